import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Result } from '@cnikit/skel';
import { containerIPs, decodeConf } from './config.ts';

describe('portmap config', () => {
  test('container IPs: first per family on CNI_IFNAME with a sandbox; an IP without interface index counts', () => {
    const r: Result = {
      cniVersion: '1.0.0',
      interfaces: [{ name: 'host' }, { name: 'eth0', sandbox: '/x' }, { name: 'eth1', sandbox: '/x' }],
      ips: [
        { address: '10.0.0.9/24', interface: 0 },
        { address: '10.0.0.2/24', interface: 1 },
        { address: '2001:db8:1::9/64', interface: 2 },
        { address: '2001:db8:1::2/64', interface: 1 },
        { address: '10.0.0.3/24', interface: 1 },
      ],
    };
    assert.deepEqual(containerIPs(r, 'eth0'), [
      { family: 4, ip: '10.0.0.2/24' },
      { family: 6, ip: '2001:db8:1::2/64' },
    ]);
    assert.deepEqual(containerIPs({ cniVersion: '1.0.0', ips: [{ address: '10.0.0.4/24' }] }, 'eth0'), [
      { family: 4, ip: '10.0.0.4/24' },
    ]);
  });

  test('defaults, backend detection only when it matters, option ownership', () => {
    let probes = 0;
    const detect = () => {
      probes++;
      return 'nftables' as const;
    };
    const c = decodeConf({ name: 'n' }, { detect });
    assert.deepEqual(
      [c.backend, c.snat, c.masqAll, c.markMasqBit, c.mappings],
      ['nftables', true, false, 13, []],
    );
    assert.equal(probes, 1);
    decodeConf({ name: 'n' }, { detect, needBackend: false });
    assert.equal(probes, 1, 'DEL without backend-specific options needs no detection');
    const add = decodeConf({ name: 'n' }, { detect, deferDetect: true });
    assert.equal(probes, 1, 'ADD leaves the detection to a failure of iptables');
    assert.deepEqual([add.backend, add.detectOnFailure], ['iptables', true]);
    assert.equal(
      decodeConf({ name: 'n', conditionsV4: ['ip saddr 1.2.3.4'] }, { detect, deferDetect: true }).backend,
      'nftables',
    );
    assert.equal(probes, 2, 'options of one backend still need the detection for the consistency check');
    assert.throws(
      () => decodeConf({ name: 'n', externalSetMarkChain: 'X' }, { detect, needBackend: false }),
      {
        msg: 'nftables backend was requested but configuration contains iptables-specific options [externalSetMarkChain]',
      },
    );
    assert.equal(
      decodeConf({ name: 'n', conditionsV4: [''] }, { detect: () => 'iptables' }).backend,
      'iptables',
    );
  });

  test('mappings: capitalised keys, protocol lower-cased, host IP canonical', () => {
    const c = decodeConf(
      {
        name: 'n',
        backend: 'iptables',
        runtimeConfig: {
          portMappings: [{ HostPort: 80, ContainerPort: 8080, Protocol: 'TCP', HostIP: '::FFFF:1.2.3.4' }],
        },
      },
      {},
    );
    assert.deepEqual(c.mappings, [{ hostPort: 80, containerPort: 8080, protocol: 'tcp', hostIP: '1.2.3.4' }]);
  });
});
