import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ArgsCniSchema, AttachmentSchema, RuntimeConfigSchema } from './conventions.ts';
import { CniError } from './errors.ts';
import { decode, s } from './schema.ts';

describe('convention schemas', () => {
  test('runtimeConfig capabilities decode with Go key matching, unknown capabilities kept', () => {
    const rc = decode(
      RuntimeConfigSchema,
      {
        PortMappings: [{ hostPort: 8080, containerPort: 80, protocol: 'tcp' }],
        ipRanges: [[{ subnet: '10.0.0.0/24', rangeStart: '10.0.0.10' }]],
        bandwidth: { ingressRate: 1000, egressBurst: 10 },
        dns: { nameservers: ['1.1.1.1'] },
        ips: ['10.0.0.5/24'],
        mac: 'aa:bb:cc:dd:ee:ff',
        infinibandGUID: 'g',
        deviceID: '0000:00:01.0',
        aliases: ['a'],
        cgroupPath: '/k',
        custom: { x: 1 },
      },
      'runtimeConfig',
    );
    assert.equal(rc.portMappings![0]!.hostPort, 8080);
    assert.equal(rc.ipRanges![0]![0]!.rangeStart, '10.0.0.10');
    assert.equal(rc.bandwidth!.ingressRate, 1000);
    assert.deepEqual(rc.custom, { x: 1 });
    assert.deepEqual(decode(RuntimeConfigSchema, undefined), {});
  });
  test('bad capability types are code 7 naming the path', () => {
    assert.throws(
      () => decode(RuntimeConfigSchema, { portMappings: [{ hostPort: '80' }] }, 'runtimeConfig'),
      (e: unknown) =>
        CniError.is(e) &&
        e.code === 7 &&
        e.msg === 'runtimeConfig.portMappings[0].hostPort: expected integer, got string',
    );
    assert.throws(
      () => decode(RuntimeConfigSchema, { bandwidth: { ingressRate: -1 } }, 'runtimeConfig'),
      (e: unknown) =>
        CniError.is(e) && e.msg === 'runtimeConfig.bandwidth.ingressRate: -1 is less than the minimum 0',
    );
  });
  test('args.cni and attachments', () => {
    const a = decode(ArgsCniSchema, { ips: ['10.0.0.2'], labels: [{ key: 'k', value: 'v' }], other: true });
    assert.deepEqual(a, { ips: ['10.0.0.2'], labels: [{ key: 'k', value: 'v' }], other: true });
    assert.deepEqual(decode(s.array(AttachmentSchema), [{ containerID: 'c', IfName: 'eth0' }]), [
      { containerID: 'c', ifname: 'eth0' },
    ]);
  });
});
