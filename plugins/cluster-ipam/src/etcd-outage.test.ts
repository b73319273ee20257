/**
 * The compiled cluster-ipam (cold, as a runtime execs it) on the etcd backend while etcd is killed and restarted in
 * the middle of a stream of ADDs from two nodes: every ADD during the outage fails with code 11 within the bound
 * (CNIKIT_CLUSTER_IPAM_TIMEOUT_MS), the runtime's DEL + ADD again succeed once etcd is back, and in the end every
 * attachment holds exactly one address, every address one record, none twice. Needs /usr/bin/etcd (Debian's
 * etcd-server) and `npm run build`.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { cniRunner, expectOk } from '@cnikit/testing';
import { distBin } from '../../../test-netns/dist.ts';
import { EtcdStore } from './etcd-store.ts';
import { etcdAvailable, startTestEtcd, type TestEtcd } from './testdata/etcd-testenv.ts';

const BIN = join(distBin(), 'cluster-ipam');
const ctrNs = `cnikit-etcdout-${process.pid}`;
const BOUND_MS = 4000;
let etcd: TestEtcd | undefined;
const skip = !etcdAvailable() ? '/usr/bin/etcd is not installed' : false;

before(async () => {
  if (skip) return;
  assert.ok(existsSync(BIN), `${BIN} is missing: npm run build`);
  assert.equal(spawnSync('ip', ['netns', 'add', ctrNs]).status, 0);
  etcd = await startTestEtcd();
});
after(async () => {
  await etcd?.stop();
  spawnSync('ip', ['netns', 'del', ctrNs]);
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('etcd killed and restarted mid-run: ADDs in the outage fail with 11 within the bound, succeed after; no duplicate', {
  skip,
}, async () => {
  const e = etcd!;
  const conf = {
    cniVersion: '1.1.0',
    name: 'l2net',
    type: 'macvlan',
    ipam: {
      type: 'cluster-ipam',
      range: '10.40.0.0/24',
      datastore: 'etcd',
      etcd_host: e.host,
      block_size: 8,
    },
  };
  // the plugin talks to etcd on this namespace's loopback; the container's namespace is another one
  const run = cniRunner(
    { binary: BIN },
    {
      netns: `/var/run/netns/${ctrNs}`,
      ifName: 'net1',
      timeoutMs: 60_000,
      env: { CNIKIT_CLUSTER_IPAM_TIMEOUT_MS: String(BOUND_MS) },
    },
  );
  const got = new Map<string, string>();
  const failed: Array<{ c: string; node: string; ms: number }> = [];
  let outage = false;
  let restarted = false;
  const worker = async (node: string) => {
    for (let i = 0; !restarted || i < 8; i++) {
      const c = `${node}-${i}`;
      const t0 = Date.now();
      const r = await run.add(conf, { containerId: c, env: { NODENAME: node } });
      const ms = Date.now() - t0;
      if (r.code === 0) got.set(c, (r.json as { ips: Array<{ address: string }> }).ips[0]!.address);
      else {
        const err = r.json as { code: number; msg: string };
        assert.equal(err.code, 11, `ADD ${c} during the outage: ${r.stdout}`);
        assert.match(err.msg, /etcd/i, err.msg);
        failed.push({ c, node, ms });
      }
      if (i > 200) throw new Error('the run did not end');
    }
  };
  const workers = [worker('node-1'), worker('node-2')];
  // etcd goes away after a few ADDs, and comes back once several have failed
  const t0 = Date.now();
  while (got.size < 6) await sleep(50);
  await e.kill();
  outage = true;
  const killedAt = Date.now();
  while (failed.length < 6 && Date.now() - killedAt < 60_000) await sleep(50);
  await e.start();
  restarted = true;
  const outageMs = Date.now() - killedAt;
  await Promise.all(workers);
  assert.ok(outage && failed.length >= 6, `${failed.length} ADDs failed during the outage`);
  const worst = Math.max(...failed.map((f) => f.ms));
  process.stderr.write(
    `etcd down ${outageMs} ms: ${failed.length} ADDs failed with 11 (slowest ${worst} ms, bound ${BOUND_MS} ms), ${got.size} succeeded, run ${Date.now() - t0} ms\n`,
  );
  // the bound covers the plugin's store work; the process start comes on top (a loaded machine: seconds)
  assert.ok(worst < BOUND_MS + 5000, `an ADD in the outage took ${worst} ms`);
  // the runtime cleans up a failed ADD with DEL and tries again: both succeed now
  for (const f of failed) {
    expectOk(await run.del(conf, { containerId: f.c, env: { NODENAME: f.node } }), `DEL ${f.c}`);
    const r = expectOk(
      await run.add(conf, { containerId: f.c, env: { NODENAME: f.node } }),
      `ADD ${f.c} again`,
    );
    got.set(f.c, r.ips![0]!.address);
  }
  const store = new EtcdStore({ endpoints: e.host });
  try {
    const recs = await store.list<{ ip: string; containerID: string; prefix: number }>('allocations');
    assert.equal(recs.length, got.size, 'one record per attachment: nothing leaked by the failed ADDs');
    assert.equal(new Set(recs.map((r) => r.spec.ip)).size, recs.length, 'no address twice');
    assert.equal(new Set(got.values()).size, got.size, 'no address handed out twice');
    for (const r of recs) assert.equal(`${r.spec.ip}/${r.spec.prefix}`, got.get(r.spec.containerID), r.name);
  } finally {
    await store.close();
  }
});

test('etcd frozen (accepts, never answers): an ADD fails with 11 within the bound, not a hang; thawed: ADD succeeds', {
  skip,
}, async () => {
  const e = etcd!;
  const conf = {
    cniVersion: '1.1.0',
    name: 'frozen',
    type: 'macvlan',
    ipam: { type: 'cluster-ipam', range: '10.41.0.0/28', datastore: 'etcd', etcd_host: e.host },
  };
  const run = cniRunner(
    { binary: BIN },
    {
      netns: `/var/run/netns/${ctrNs}`,
      ifName: 'net1',
      timeoutMs: 60_000,
      env: { CNIKIT_CLUSTER_IPAM_TIMEOUT_MS: String(BOUND_MS), NODENAME: 'node-1' },
    },
  );
  await e.freeze();
  let ms: number;
  let r: Awaited<ReturnType<typeof run.add>>;
  try {
    const t0 = Date.now();
    r = await run.add(conf, { containerId: 'frozen-1' });
    ms = Date.now() - t0;
  } finally {
    e.thaw();
  }
  assert.equal((r.json as { code: number }).code, 11, r.stdout);
  process.stderr.write(`ADD against a frozen etcd: code 11 after ${ms} ms (bound ${BOUND_MS} ms)\n`);
  assert.ok(ms < BOUND_MS + 5000, `${ms} ms`);
  expectOk(await run.del(conf, { containerId: 'frozen-1' }));
  const ok = expectOk(await run.add(conf, { containerId: 'frozen-1' }));
  const store = new EtcdStore({ endpoints: e.host });
  try {
    const recs = (await store.list<{ ip: string; containerID: string }>('allocations')).filter(
      (x) => x.spec.containerID === 'frozen-1',
    );
    assert.deepEqual(
      recs.map((x) => x.spec.ip),
      [ok.ips![0]!.address.split('/')[0]],
    );
  } finally {
    await store.close();
  }
});
