/**
 * The reclaimer on the etcd datastore against a real etcd (Debian's /usr/bin/etcd on free loopback ports): its
 * flags, the election (two instances → one leader; a clean stop hands over at once, a crash only after the lease
 * expired), and "node gone" by heartbeat: a node whose instance dies keeps its records until the leader has seen
 * it without a heartbeat for the whole grace, never before; then its records and empty blocks are released and its
 * registration removed, while live nodes and nodes that never registered keep theirs.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { distBin } from '../../../test-netns/dist.ts';
import { type AllocationSpec, Allocator, type BlockSpec } from './allocator.ts';
import { parseConf } from './config.ts';
import {
  EtcdReclaimer,
  type EtcdReclaimerConfig,
  parseEtcdReclaimerArgs,
  wantsEtcd,
} from './etcd-reclaimer.ts';
import { EtcdStore } from './etcd-store.ts';
import type { StoreKind } from './store.ts';
import { startTestEtcd, type TestEtcd } from './testdata/etcd-testenv.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('etcd reclaimer flags', () => {
  const env = { NODENAME: 'n1', CNIKIT_CLUSTER_IPAM_ETCD_HOST: '127.0.0.1:2379' };
  test('--datastore etcd selects it, from a flag or the environment', () => {
    assert.equal(wantsEtcd(['--datastore', 'etcd'], {}), true);
    assert.equal(wantsEtcd(['--datastore=etcd'], {}), true);
    assert.equal(wantsEtcd(['--grace', '1m'], { CNIKIT_CLUSTER_IPAM_DATASTORE: 'etcd' }), true);
    assert.equal(wantsEtcd(['--datastore', 'kubernetes'], { CNIKIT_CLUSTER_IPAM_DATASTORE: 'etcd' }), false);
    assert.equal(wantsEtcd([], {}), false);
  });
  test('defaults and flags', () => {
    const c = parseEtcdReclaimerArgs(['--datastore', 'etcd'], env);
    assert.equal(c.node, 'n1');
    assert.equal(c.etcd.etcd_host, '127.0.0.1:2379');
    assert.equal(c.prefix, '/cnikit/cluster-ipam/');
    assert.equal(c.leaseSeconds, 15);
    assert.equal(c.graceMs, 600_000);
    assert.match(c.identity, /^n1_\d+$/);
    const d = parseEtcdReclaimerArgs(
      [
        '--datastore=etcd',
        '--etcd-host=e:1',
        '--node',
        'n2',
        '--grace',
        '90s',
        '--interval',
        '5s',
        '--lease-seconds',
        '6',
        '--etcd-prefix',
        '/x/',
        '--etcd-username',
        'u',
        '--etcd-password',
        'p',
        '--etcd-ca-cert-file',
        '/ca',
      ],
      env,
    );
    assert.deepEqual(
      [d.node, d.graceMs, d.intervalMs, d.leaseSeconds, d.prefix],
      ['n2', 90_000, 5000, 6, '/x/'],
    );
    assert.deepEqual(d.etcd, {
      etcd_host: 'e:1',
      etcd_username: 'u',
      etcd_password: 'p',
      etcd_ca_cert_file: '/ca',
    });
  });
  test('bad input names the flag', () => {
    const bad: Array<[string[], Record<string, string>, RegExp]> = [
      [['--datastore', 'etcd'], { NODENAME: 'n1' }, /--etcd-host/],
      [['--datastore', 'kubernetes'], env, /--datastore must be etcd/],
      [['--datastore', 'etcd', '--node', 'a/b'], env, /--node must be a node name/],
      [['--datastore', 'etcd', '--node', ''], env, /--node needs a value/],
      [['--datastore', 'etcd', '--lease-seconds', '1'], env, /--lease-seconds must be an integer from 2/],
      [['--datastore', 'etcd', '--interval', '100ms'], env, /at least 500ms/],
      [['--datastore', 'etcd', '--grace', 'soon'], env, /reclaim grace must be a duration/],
      [
        ['--datastore', 'etcd', '--etcd-prefix', '/x'],
        env,
        /--etcd-prefix \(\$CNIKIT_CLUSTER_IPAM_ETCD_PREFIX, ConfigMap key cluster-ipam-etcd-prefix\) must end with '\/'/,
      ],
      [
        ['--datastore', 'etcd', '--etcd-username', 'u'],
        env,
        /--etcd-username .* and a password .* go together/,
      ],
      [
        ['--datastore', 'etcd', '--etcd-password', 'p', '--etcd-password-file', '/p'],
        env,
        /--etcd-password .* and --etcd-password-file .*: give one of them/,
      ],
      [
        ['--datastore', 'etcd', '--etcd-username', 'u', '--etcd-password-file', '/nonexistent/p'],
        env,
        /--etcd-password-file \(\$CNIKIT_CLUSTER_IPAM_ETCD_PASSWORD_FILE, ConfigMap key cluster-ipam-etcd-password-file\): cannot read \/nonexistent\/p/,
      ],
      [['--datastore', 'etcd', '--kubeconfig', '/k'], env, /unknown argument "--kubeconfig"/],
    ];
    for (const [args, e, re] of bad) assert.throws(() => parseEtcdReclaimerArgs(args, e), re, args.join(' '));
  });
  test('an etcd_ca_cert_file that cannot be read fails at start, naming it', () => {
    const cfg = parseEtcdReclaimerArgs(
      ['--datastore', 'etcd', '--etcd-ca-cert-file', '/nonexistent/ca.crt'],
      env,
    );
    assert.throws(
      () => EtcdReclaimer.open(cfg),
      /--etcd-ca-cert-file \(\$CNIKIT_CLUSTER_IPAM_ETCD_CA_CERT_FILE, ConfigMap key cluster-ipam-etcd-ca-cert-file\): cannot read \/nonexistent\/ca\.crt/,
    );
  });
  test('every etcd setting from the environment (the DaemonSet sets it from the ConfigMap); flags win', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cnikit-ipam-etcd-pw-'));
    try {
      writeFileSync(join(dir, 'pw'), 's3cret\n');
      const e = {
        NODENAME: 'n1',
        CNIKIT_CLUSTER_IPAM_DATASTORE: 'etcd',
        CNIKIT_CLUSTER_IPAM_ETCD_HOST: 'e:2379',
        CNIKIT_CLUSTER_IPAM_ETCD_USERNAME: 'ipam',
        CNIKIT_CLUSTER_IPAM_ETCD_PASSWORD_FILE: join(dir, 'pw'),
        CNIKIT_CLUSTER_IPAM_ETCD_CERT_FILE: '/c.crt',
        CNIKIT_CLUSTER_IPAM_ETCD_KEY_FILE: '/c.key',
        CNIKIT_CLUSTER_IPAM_ETCD_CA_CERT_FILE: '/ca.crt',
        CNIKIT_CLUSTER_IPAM_ETCD_PREFIX: '/p/',
      };
      const c = parseEtcdReclaimerArgs([], e);
      assert.equal(c.prefix, '/p/');
      assert.deepEqual(c.etcd, {
        etcd_host: 'e:2379',
        etcd_username: 'ipam',
        etcd_password: 's3cret',
        etcd_cert_file: '/c.crt',
        etcd_key_file: '/c.key',
        etcd_ca_cert_file: '/ca.crt',
      });
      const f = parseEtcdReclaimerArgs(['--etcd-host', 'f:1', '--etcd-prefix', '/q/'], e);
      assert.deepEqual([f.etcd.etcd_host, f.prefix], ['f:1', '/q/']);
      assert.equal(
        parseEtcdReclaimerArgs([], {
          ...e,
          CNIKIT_CLUSTER_IPAM_ETCD_PASSWORD_FILE: '',
          CNIKIT_CLUSTER_IPAM_ETCD_PASSWORD: 'x',
        }).etcd.etcd_password,
        'x',
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('etcd reclaimer against a real etcd', () => {
  let etcd: TestEtcd;
  const made: EtcdReclaimer[] = [];
  let seq = 0;
  before(async () => {
    etcd = await startTestEtcd();
  });
  after(async () => {
    for (const r of made) await r.stop({ crash: true }).catch(() => {});
    await etcd?.stop();
  });

  /** An instance for `node` on its own prefix; `clock.offset` moves its clock (the grace is measured on it). */
  function instance(
    node: string,
    prefix: string,
    o: Partial<EtcdReclaimerConfig> = {},
    clock = { offset: 0 },
  ) {
    const cfg: EtcdReclaimerConfig = {
      node,
      identity: `${node}_${++seq}`,
      leaseSeconds: 2,
      graceMs: 10_000,
      intervalMs: 500,
      prefix,
      etcd: { etcd_host: etcd.host },
      ...o,
    };
    const r = new EtcdReclaimer(
      cfg,
      new EtcdStore({ ...etcd.clientOptions, prefix }),
      () => {},
      () => Date.now() + clock.offset,
    );
    made.push(r);
    return r;
  }

  test('two instances: one leader; a clean stop hands over at the next step, a crash after the lease expired', async () => {
    const prefix = '/t-elect/';
    const a = instance('node-a', prefix);
    const b = instance('node-b', prefix);
    await a.step();
    await b.step();
    await a.step();
    assert.deepEqual([a.leader, b.leader], [true, false]);
    const key = await a.client.get(`${prefix}reclaimer/leader`);
    assert.equal(key.kv?.value.toString(), a.cfg.identity);
    assert.equal(key.kv?.lease, a.lease);
    // both keep their heartbeats
    for (const n of ['node-a', 'node-b'])
      assert.ok((await a.client.get(`${prefix}alive/${n}`)).kv, `heartbeat of ${n}`);
    // concurrent steps of both: never two leaders
    for (let i = 0; i < 5; i++) {
      await Promise.all([a.step(), b.step()]);
      assert.equal([a, b].filter((x) => x.holds()).length, 1);
    }
    await a.stop();
    await b.step();
    assert.equal(b.leader, true, 'a clean stop hands over at once');
    // b dies: c must wait for b's lease to expire
    const c = instance('node-c', prefix);
    await b.stop({ crash: true });
    const t0 = Date.now();
    await c.step();
    assert.equal(c.leader, false, 'the crashed leader still holds the key');
    for (let i = 0; i < 40 && !c.leader; i++) {
      await sleep(250);
      await c.step();
    }
    assert.equal(c.leader, true, 'leader after the lease expired');
    const waited = Date.now() - t0;
    assert.ok(waited >= 1000, `took over only after the lease (${waited} ms)`);
    // the crashed node's heartbeat went with its lease
    assert.equal((await c.client.get(`${prefix}alive/node-b`)).kv, undefined);
  });

  test('a node whose heartbeat stops: its records and blocks are released after the grace, never before', async () => {
    const prefix = '/t-gone/';
    const grace = 4000;
    const clock = { offset: 0 };
    const leader = instance('node-a', prefix, { graceMs: grace }, clock);
    const victim = instance('node-b', prefix, { graceMs: grace });
    await leader.step();
    await victim.step();
    assert.equal(leader.leader, true);
    const store = new EtcdStore({ ...etcd.clientOptions, prefix });
    try {
      const pools = parseConf(
        {
          name: 'n',
          cniVersion: '1.0.0',
          ipam: { type: 'cluster-ipam', range: '10.9.0.0/24', block_size: 4 },
        },
        { args: '', command: 'ADD', env: { NODENAME: 'x' } },
        { flatFiles: [] },
      ).pools;
      const old = () => new Date(Date.now() - 3_600_000);
      const on = (node: string) =>
        new Allocator(store, { net: 'default', overlapping: true, pools, node }, old);
      for (let i = 0; i < 3; i++) await on('node-a').allocate({ containerID: `a${i}`, ifName: 'net1' });
      for (let i = 0; i < 5; i++) await on('node-b').allocate({ containerID: `b${i}`, ifName: 'net1' });
      // a node that never ran a reclaimer: unknown, never released
      await on('node-x').allocate({ containerID: 'x0', ifName: 'net1' });
      const nodesOf = async () =>
        (await store.list<AllocationSpec>('allocations'))
          .map((r) => r.spec.node)
          .sort()
          .join(' ');
      const before = await nodesOf();
      assert.equal(before, 'node-a node-a node-a node-b node-b node-b node-b node-b node-x');
      assert.ok((await store.list<BlockSpec>('blocks')).some((b) => b.spec.node === 'node-b'));

      // alive: nothing released, whatever the clock says
      clock.offset = 3 * grace;
      let r = await leader.step();
      assert.ok(r);
      assert.deepEqual(r.released, []);
      assert.deepEqual(r.kept, { live: 8, grace: 0, unknown: 1 });
      // (the leader's clock only moves forward: its next run is due an interval after this one)

      // node-b dies: its heartbeat lasts until the lease expires, then the grace starts
      await victim.stop({ crash: true });
      for (let i = 0; i < 40; i++) {
        await sleep(250);
        r = await leader.step();
        if (r && 'node-b' in r.missing) break;
        if (r) assert.deepEqual(r.released, [], 'nothing released while the heartbeat lasts');
      }
      assert.ok(r && 'node-b' in r.missing, 'node-b seen without a heartbeat');
      assert.deepEqual(r.released, []);
      assert.equal(r.kept.grace, 5);
      // just before the grace has passed: still kept
      clock.offset += grace - 1000;
      r = await leader.step();
      assert.ok(r);
      assert.deepEqual(r.released, [], 'never before the grace');
      assert.equal(await nodesOf(), before);
      // past the grace: node-b's records, then its blocks and registration go; the others stay
      clock.offset += 1500;
      r = await leader.step();
      assert.ok(r);
      assert.equal(r.released.length, 5);
      assert.ok(r.released.every((x) => x.node === 'node-b'));
      assert.ok(r.blocksReleased.length > 0);
      assert.deepEqual(r.nodesRemoved, ['node-b']);
      assert.equal(await nodesOf(), 'node-a node-a node-a node-x');
      assert.ok(!(await store.list<BlockSpec>('blocks')).some((b) => b.spec.node === 'node-b'));
      assert.ok((await store.list<BlockSpec>('blocks')).some((b) => b.spec.node === 'node-a'));
      assert.equal((await store.client.get(`${prefix}nodes/node-b`)).kv, undefined);
      // node-b comes back: it registers again and is alive
      const back = instance('node-b', prefix, { graceMs: grace });
      await back.step();
      assert.ok((await store.client.get(`${prefix}nodes/node-b`)).kv);
      await on('node-b').allocate({ containerID: 'b-new', ifName: 'net1' });
      clock.offset += 3 * grace;
      r = await leader.step();
      assert.ok(r);
      assert.deepEqual(r.released, []);
    } finally {
      await store.close();
    }
  });

  test('a record deleted and created again under its name, or updated, between the run’s list and its delete is kept (compare on mod revision)', async () => {
    const prefix = '/t-race/';
    const grace = 3000;
    const clock = { offset: 0 };
    const store = new EtcdStore({ ...etcd.clientOptions, prefix });
    const targets = new Map<string, 'recreate' | 'update'>();
    const raced: string[] = [];
    // the leader's store: just before its delete of a target, another writer changes the record
    class RacingStore extends EtcdStore {
      override async delete(kind: StoreKind, name: string, version?: string, spec?: unknown) {
        const what = kind === 'allocations' ? targets.get(name) : undefined;
        if (what) {
          targets.delete(name);
          raced.push(name);
          const now = await store.get<AllocationSpec>('allocations', name);
          assert.ok(now);
          if (what === 'recreate') {
            // released and handed out again to a pod on a live node: the same key, a new create revision
            assert.equal(await store.delete('allocations', name, now.version, now.spec), true);
            assert.ok(
              await store.create<AllocationSpec>('allocations', name, {
                ...now.spec,
                containerID: 'race-new',
                node: 'node-a',
                created: new Date().toISOString(),
              }),
            );
          } else
            assert.ok(await store.update('allocations', name, { ...now.spec, ifName: 'net2' }, now.version));
        }
        return super.delete(kind, name, version, spec);
      }
    }
    const leader = new EtcdReclaimer(
      {
        node: 'node-a',
        identity: `node-a_${++seq}`,
        leaseSeconds: 2,
        graceMs: grace,
        intervalMs: 500,
        prefix,
        etcd: { etcd_host: etcd.host },
      },
      new RacingStore({ ...etcd.clientOptions, prefix }),
      () => {},
      () => Date.now() + clock.offset,
    );
    made.push(leader);
    const victim = instance('node-b', prefix, { graceMs: grace });
    try {
      await leader.step();
      await victim.step();
      assert.equal(leader.leader, true);
      const pools = parseConf(
        { name: 'n', cniVersion: '1.0.0', ipam: { type: 'cluster-ipam', range: '10.9.2.0/24' } },
        { args: '', command: 'ADD', env: { NODENAME: 'x' } },
        { flatFiles: [] },
      ).pools;
      const old = () => new Date(Date.now() - 3_600_000);
      const b = new Allocator(store, { net: 'default', overlapping: true, pools, node: 'node-b' }, old);
      const recs = [];
      for (let i = 0; i < 3; i++)
        recs.push((await b.allocate({ containerID: `b${i}`, ifName: 'net1' }))[0]!.record);
      const [recreated, updated, stale] = recs as [
        (typeof recs)[number],
        (typeof recs)[number],
        (typeof recs)[number],
      ];
      await victim.stop({ crash: true });
      let r: Awaited<ReturnType<EtcdReclaimer['step']>>;
      for (let i = 0; i < 40; i++) {
        await sleep(250);
        r = await leader.step();
        if (r && 'node-b' in r.missing) break;
      }
      targets.set(recreated.name, 'recreate');
      targets.set(updated.name, 'update');
      clock.offset = grace + 1500;
      r = await leader.step();
      assert.ok(r);
      assert.deepEqual(raced.sort(), [recreated.name, updated.name].sort(), 'both races ran');
      assert.deepEqual(
        r.released.map((x) => x.name),
        [stale.name],
        'only the record left alone is released',
      );
      const now = new Map((await store.list<AllocationSpec>('allocations')).map((x) => [x.name, x]));
      assert.equal(now.get(recreated.name)?.spec.containerID, 'race-new', 'the record created again is kept');
      assert.equal(now.get(updated.name)?.spec.ifName, 'net2', 'the updated record is kept');
      assert.equal(now.has(stale.name), false);
      // the compare on its own: a delete with the version as listed is refused once the key was written again
      assert.equal(await store.delete('allocations', updated.name, updated.version, updated.spec), false);
      assert.equal(
        await store.delete('allocations', recreated.name, recreated.version, recreated.spec),
        false,
      );
      assert.equal((await store.list('allocations')).length, 2);
    } finally {
      await store.close();
    }
  });

  test('a young record of a gone node is kept until it is older than the grace; a non-leader releases nothing', async () => {
    const prefix = '/t-young/';
    const grace = 3000;
    const clock = { offset: 0 };
    const leader = instance('node-a', prefix, { graceMs: grace }, clock);
    const other = instance('node-c', prefix, { graceMs: grace }, clock);
    const victim = instance('node-b', prefix, { graceMs: grace });
    await leader.step();
    await other.step();
    await victim.step();
    const store = new EtcdStore({ ...etcd.clientOptions, prefix });
    try {
      const pools = parseConf(
        { name: 'n', cniVersion: '1.0.0', ipam: { type: 'cluster-ipam', range: '10.9.1.0/24' } },
        { args: '', command: 'ADD', env: { NODENAME: 'x' } },
        { flatFiles: [] },
      ).pools;
      // created "in the future" of the leader's clock as it will stand: young when the node is already gone
      const later = () => new Date(Date.now() + 2 * grace);
      await new Allocator(
        store,
        { net: 'default', overlapping: true, pools, node: 'node-b' },
        later,
      ).allocate({
        containerID: 'b0',
        ifName: 'net1',
      });
      await victim.stop({ crash: true });
      for (let i = 0; i < 40; i++) {
        await sleep(250);
        const r = await leader.step();
        if (r && 'node-b' in r.missing) break;
      }
      clock.offset = grace + 500;
      // the non-leader's steps release nothing
      assert.equal(await other.step(), undefined);
      let r = await leader.step();
      assert.ok(r);
      assert.deepEqual(r.released, [], 'the record is younger than the grace');
      assert.equal(r.kept.grace, 1);
      clock.offset = 3 * grace + 1000;
      r = await leader.step();
      assert.ok(r);
      assert.equal(r.released.length, 1);
      assert.equal((await store.list('allocations')).length, 0);
    } finally {
      await store.close();
    }
  });

  test('`cluster-ipam reclaimer --datastore etcd` (the compiled plugin): heartbeat and leader key, SIGTERM hands the key back; bad flags exit 2', async () => {
    const bin = join(distBin(), 'cluster-ipam');
    const bad = spawnSync(bin, ['reclaimer', '--datastore', 'etcd', '--node', 'n1'], {
      encoding: 'utf8',
      env: { PATH: process.env.PATH },
      timeout: 30_000,
    });
    assert.equal(bad.status, 2, bad.stderr);
    assert.match(bad.stderr, /--etcd-host \(host:port\) is needed/);
    assert.match(bad.stderr, /usage: cluster-ipam reclaimer --datastore etcd/);
    const prefix = '/t-cli/';
    const p = spawn(
      bin,
      [
        'reclaimer',
        '--datastore=etcd',
        '--etcd-host',
        etcd.host,
        '--etcd-prefix',
        prefix,
        '--lease-seconds',
        '2',
        '--interval',
        '1s',
      ],
      { env: { PATH: process.env.PATH, NODENAME: 'cli-node' }, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let log = '';
    p.stderr.setEncoding('utf8').on('data', (d: string) => (log += d));
    const exited = new Promise<number | null>((r) => p.on('exit', (c) => r(c)));
    const store = new EtcdStore({ ...etcd.clientOptions, prefix });
    try {
      let leader = '';
      for (let i = 0; i < 120 && !leader; i++) {
        await sleep(250);
        leader = (await store.client.get(`${prefix}reclaimer/leader`)).kv?.value.toString() ?? '';
      }
      assert.match(leader, /^cli-node_\d+$/, log);
      assert.ok((await store.client.get(`${prefix}alive/cli-node`)).kv, 'heartbeat');
      assert.ok((await store.client.get(`${prefix}nodes/cli-node`)).kv, 'registration');
      for (let i = 0; i < 120 && !/reclaimer run:/.test(log); i++) await sleep(250);
      assert.match(log, /reclaimer run: 0 records/);
      p.kill('SIGTERM');
      assert.equal(await exited, 0, log);
      assert.equal(
        (await store.client.get(`${prefix}reclaimer/leader`)).kv,
        undefined,
        'the key is handed back',
      );
    } finally {
      if (p.exitCode === null) p.kill('SIGKILL');
      await store.close();
    }
  });
});
