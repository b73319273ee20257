// cluster-ipam configuration: whereabouts' keys as they are, the flat file and its lookup order, the node name,
// and the bad configurations each with code 7 and a message naming the range.
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { CniError } from '@cnikit/skel';
import { tempDir } from '@cnikit/testing';
import { cniArgs, nodeName, parseConf } from './config.ts';
import { ipText } from './pool.ts';

const env = { NODENAME: 'node-a' };
const req = (args = '') => ({ args, command: 'ADD' as const, env });
const conf = (ipam: Record<string, unknown>, top: Record<string, unknown> = {}) => ({
  cniVersion: '1.0.0',
  name: 'whereaboutsexample',
  ...top,
  ipam: { type: 'cluster-ipam', kubernetes: { kubeconfig: '/k' }, ...ipam },
});
const parse = (ipam: Record<string, unknown>, args = '', flatFiles: string[] = []) =>
  parseConf(conf(ipam), req(args), { flatFiles });

function rejects(ipam: Record<string, unknown>, code: number, msg: RegExp): void {
  assert.throws(
    () => parse(ipam),
    (e: unknown) => {
      assert.ok(CniError.is(e), String(e));
      assert.equal(e.code, code, e.msg);
      assert.match(e.msg, msg);
      return true;
    },
  );
}

describe('whereabouts keys', () => {
  test('range with exclude and gateway (whereabouts README example)', () => {
    const c = parse({
      range: '192.168.2.225/28',
      exclude: ['192.168.2.229/30', '192.168.2.236/32'],
      gateway: '192.168.2.238',
      routes: [{ dst: '0.0.0.0/0' }],
      dns: { nameservers: ['192.0.2.53'] },
      leader_lease_duration: 1500,
      leader_renew_deadline: 1000,
      leader_retry_period: 500,
      sleep_for_race: 2,
      log_file: '/tmp/whereabouts.log',
      log_level: 'debug',
      reconciler_cron_expression: '30 4 * * *',
    });
    const p = c.pools[0]!;
    assert.equal(p.cidr, '192.168.2.224/28');
    assert.equal(ipText(4, p.start), '192.168.2.225');
    assert.equal(ipText(4, p.end), '192.168.2.238');
    // 14 usable - 4 (.228-.231) - 1 (.236) - gateway .238
    assert.equal(p.size, 8n);
    assert.equal(c.gateways.get(0), '192.168.2.238');
    assert.deepEqual(c.routes, [{ dst: '0.0.0.0/0' }]);
    assert.deepEqual(c.dns, { nameservers: ['192.0.2.53'] });
    assert.equal(c.overlapping, true);
    assert.equal(c.net, 'default');
    assert.equal(c.node, 'node-a');
    assert.equal(c.kubernetes.kubeconfig, '/k');
  });

  test('range "a-b/cidr", range_start/range_end, ipRanges, network_name, enable_overlapping_ranges', () => {
    const c = parse({
      range: '10.0.0.10-10.0.0.20/24',
      ipRanges: [
        {
          range: 'fd00::/64',
          range_start: 'fd00::ffff:ffff:ffff:ff00',
          range_end: 'fd00::ffff:ffff:ffff:ffff',
        },
      ],
      network_name: 'blue',
      enable_overlapping_ranges: false,
    });
    assert.equal(c.pools.length, 2);
    assert.equal(ipText(4, c.pools[0]!.start), '10.0.0.10');
    assert.equal(ipText(4, c.pools[0]!.end), '10.0.0.20');
    const v6 = c.pools[1]!;
    assert.equal(ipText(6, v6.start), 'fd00::ffff:ffff:ffff:ff00');
    // the last address of the /64 is not handed out (whereabouts' last usable)
    assert.equal(ipText(6, v6.end), 'fd00::ffff:ffff:ffff:fffe');
    assert.equal(v6.size, 255n);
    assert.equal(c.net, 'blue');
    assert.equal(c.overlapping, false);
  });

  test('full 128-bit IPv6: a /8 range has 2^120 - 2 addresses', () => {
    const c = parse({ range: 'fd00::/8' });
    assert.equal(c.pools[0]!.size, (1n << 120n) - 2n);
    assert.equal(ipText(6, c.pools[0]!.end), 'fdff:ffff:ffff:ffff:ffff:ffff:ffff:fffe');
  });

  test('small ranges get blocks down to one address; block_size is honoured', () => {
    assert.equal(parse({ range: '10.0.0.0/29' }).pools[0]!.blockBits, 0);
    assert.equal(parse({ range: '10.0.0.0/24' }).pools[0]!.blockBits, 3);
    assert.equal(parse({ range: '10.0.0.0/16' }).pools[0]!.blockBits, 5);
    assert.equal(parse({ range: '10.0.0.0/16', block_size: 256 }).pools[0]!.blockBits, 8);
    assert.equal(parse({ range: '10.0.0.0/32' }).pools[0]!.size, 1n);
  });

  test('addresses[] and CNI_ARGS IP/GATEWAY are static addresses; K8S_POD_* fill the pod', () => {
    const c = parse(
      { range: '10.0.0.0/24', addresses: [{ address: '192.0.2.5/24', gateway: '192.0.2.1' }] },
      'IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_UID=u-1;IP=198.51.100.7/24;GATEWAY=198.51.100.1',
    );
    assert.deepEqual(c.addresses, [
      { address: '192.0.2.5/24', gateway: '192.0.2.1', family: 4 },
      { address: '198.51.100.7/24', gateway: '198.51.100.1', family: 4 },
    ]);
    assert.deepEqual(c.pod, { namespace: 'ns', name: 'p', uid: 'u-1' });
    assert.deepEqual(cniArgs('A=1;B=x=y;junk'), { A: '1', B: 'x=y' });
  });

  test('datastore etcd with whereabouts etcd keys', () => {
    const c = parse({
      range: '10.0.0.0/24',
      datastore: 'etcd',
      etcd_host: '127.0.0.1:2379',
      etcd_username: 'u',
      etcd_password: 'p',
      etcd_ca_cert_file: '/ca',
    });
    assert.equal(c.datastore, 'etcd');
    assert.deepEqual(c.etcd, { host: '127.0.0.1:2379', username: 'u', password: 'p', caCertFile: '/ca' });
  });
});

describe('bad configurations: code 7 naming the range', () => {
  test('inverted range', () =>
    rejects(
      { range: '10.0.0.0/24', range_start: '10.0.0.50', range_end: '10.0.0.10' },
      7,
      /range 0 \(10\.0\.0\.0\/24\): the range is inverted or empty: start 10\.0\.0\.50 is after end 10\.0\.0\.10/,
    ));
  test('inverted a-b form', () => rejects({ range: '10.0.0.50-10.0.0.10/24' }, 7, /inverted/));
  test('range_start outside the range', () =>
    rejects(
      { range: '10.0.0.0/24', range_start: '10.0.1.5' },
      7,
      /range_start 10\.0\.1\.5 is outside the range 10\.0\.0\.0\/24/,
    ));
  test('overlapping ranges', () =>
    rejects(
      { range: '10.0.0.0/24', ipRanges: [{ range: '10.0.0.128/25' }] },
      7,
      /range 0 \(10\.0\.0\.0\/24\) overlaps with range 1 \(10\.0\.0\.128\/25\)/,
    ));
  test('exclude outside the range', () =>
    rejects(
      { range: '10.0.0.0/24', exclude: ['10.1.0.0/24'] },
      7,
      /exclude 10\.1\.0\.0\/24 is outside the range 10\.0\.0\.1-10\.0\.0\.254/,
    ));
  test('exclude of the other family', () =>
    rejects({ range: '10.0.0.0/24', exclude: ['fd00::/64'] }, 7, /not of the range's family/));
  test('everything excluded', () =>
    rejects({ range: '10.0.0.0/30', exclude: ['10.0.0.0/30'] }, 7, /every address of the range is excluded/));
  test('bad CIDR', () => rejects({ range: '10.0.0.0/33' }, 7, /invalid CIDR "10\.0\.0\.0\/33"/));
  test('no range', () => rejects({}, 7, /no range given/));
  test('block_size not a power of two', () =>
    rejects({ range: '10.0.0.0/24', block_size: 3 }, 7, /block_size 3/));
  test('unknown datastore', () =>
    rejects({ range: '10.0.0.0/24', datastore: 'consul' }, 7, /datastore "consul"/));
});

describe('flat file and node name (whereabouts order)', () => {
  test('configuration_path first, then the lookup list; stdin wins key by key; overlapping from stdin only', () => {
    using tmp = tempDir();
    const own = join(tmp.path, 'own.conf');
    const listed = join(tmp.path, 'listed.conf');
    writeFileSync(
      own,
      JSON.stringify({
        range: '10.9.0.0/24',
        kubernetes: { kubeconfig: '/flat/kc' },
        enable_overlapping_ranges: false,
        gateway: '10.9.0.1',
      }),
    );
    writeFileSync(listed, JSON.stringify({ range: '10.8.0.0/24' }));
    const c = parseConf(
      {
        name: 'n',
        cniVersion: '1.0.0',
        ipam: { type: 'cluster-ipam', configuration_path: own, gateway: '10.9.0.254' },
      },
      req(),
      { flatFiles: [listed] },
    );
    assert.equal(c.flatFile, own);
    assert.equal(c.pools[0]!.cidr, '10.9.0.0/24');
    assert.equal(c.kubernetes.kubeconfig, '/flat/kc');
    assert.equal(c.gateways.get(0), '10.9.0.254');
    assert.equal(c.overlapping, true);
    const d = parseConf({ name: 'n', cniVersion: '1.0.0', ipam: { type: 'cluster-ipam' } }, req(), {
      flatFiles: [join(tmp.path, 'absent.conf'), listed, own],
    });
    assert.equal(d.flatFile, listed);
    assert.equal(d.pools[0]!.cidr, '10.8.0.0/24');
  });

  test('a flat file that is not JSON is a code 7 naming the file', () => {
    using tmp = tempDir();
    const f = join(tmp.path, 'bad.conf');
    writeFileSync(f, '{');
    assert.throws(
      () => parseConf(conf({ range: '10.0.0.0/24' }), req(), { flatFiles: [f] }),
      (e: unknown) => CniError.is(e) && e.code === 7 && e.msg.includes(f),
    );
  });

  test('node name: node_name, NODENAME, <configuration_path>/nodename, /etc/hostname', () => {
    using tmp = tempDir();
    mkdirSync(join(tmp.path, 'd'));
    writeFileSync(join(tmp.path, 'd', 'nodename'), 'from-file\n');
    assert.equal(nodeName({ NODENAME: 'env' }, join(tmp.path, 'd'), 'configured'), 'configured');
    assert.equal(nodeName({ NODENAME: ' env \n' }, join(tmp.path, 'd')), 'env');
    assert.equal(nodeName({}, join(tmp.path, 'd')), 'from-file');
    assert.ok(nodeName({}, join(tmp.path, 'none')).length > 0);
  });
});
