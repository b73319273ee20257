/**
 * cluster-ipam against a real kube-apiserver (scripts/k8s/control-plane.ts, a private network namespace): the
 * elected reclaimer with two instances (one hosted by `cnikit serve` with CNIKIT_CLUSTER_IPAM_RECLAIMER=on and its
 * metrics, one `cluster-ipam reclaimer` command), both with a user bound to the shipped RBAC only; and the plugin
 * killed with SIGKILL in the middle of ADDs, then DEL and GC. Run with `npm run test:k8s` after `npm run build`.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cniRunner, enterNetns, expectOk } from '@cnikit/testing';
import { kubeconfigConnection } from '@cnikit/warm/kube';
import { parseAllDocuments } from 'yaml';
import {
  type ControlPlane,
  issueCert,
  kubeconfigFor,
  startControlPlane,
} from '../../../scripts/k8s/control-plane.ts';
// @ts-expect-error: a JavaScript module of scripts/ without declarations
import { k8sBinaries } from '../../../scripts/k8s-build.mjs';
import { distBin } from '../../../test-netns/dist.ts';
import { type AllocationSpec, Allocator } from './allocator.ts';
import { parseConf } from './config.ts';
import { KubernetesStore } from './kubernetes.ts';
import { Reclaimer } from './reclaimer.ts';
import type { ListOptions, Store, StoredObject, StoreKind } from './store.ts';
import { applyClusterIpamCrds } from './testdata/crds.ts';

const ROOT = join(import.meta.dirname, '..', '..', '..');
const BIN = join(distBin(), 'cluster-ipam');
const CNIKIT = join(distBin(), 'cnikit');
const netns = `cnikit-reclaim-${process.pid}`;
const ctrNs = `${netns}-ctr`;
const dir = mkdtempSync(join(tmpdir(), 'cnikit-reclaim-k8s-'));
const GRACE_S = 20;
let cp: ControlPlane | undefined;
const children: ChildProcess[] = [];

after(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await cp?.stop();
  spawnSync('ip', ['netns', 'del', netns]);
  spawnSync('ip', ['netns', 'del', ctrNs]);
  rmSync(dir, { recursive: true, force: true });
});

let run: ReturnType<typeof cniRunner>;
let reclaimerConfig = '';
let binDir = '';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until<T>(what: string, ms: number, f: () => T | undefined | false): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(200);
  }
}

const conf = (range = '10.30.0.0/24') => ({
  cniVersion: '1.1.0',
  name: 'l2net',
  type: 'macvlan',
  ipam: {
    type: 'cluster-ipam',
    range,
    network_name: 'l2net',
    block_size: 4,
    kubernetes: { kubeconfig: cp!.kubeconfig },
  },
});

interface Rec {
  metadata: { name: string };
  spec: { ip: string; node: string; containerID: string; ifName: string; podUID: string; created: string };
}
function list<T>(what: string): T[] {
  const r = cp!.kubectl(['get', what, '-o', 'json']);
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout).items as T[];
}
const allocations = () => list<Rec>('ipamallocations.ipam.cnikit.dev');
const blocks = () =>
  list<{ metadata: { name: string }; spec: { node: string } }>('ipamblocks.ipam.cnikit.dev');

function ok(r: { status: number | null; stderr: string }): void {
  assert.equal(r.status, 0, r.stderr);
}

function lease(): { holderIdentity?: string; leaseTransitions?: number } | undefined {
  const r = cp!.kubectl(['-n', 'kube-system', 'get', 'lease', 'cnikit-cluster-ipam-reclaimer', '-o', 'json']);
  return r.status === 0 ? JSON.parse(r.stdout).spec : undefined;
}

before(async () => {
  assert.ok(existsSync(BIN), `${BIN} is missing: npm run build`);
  assert.equal(spawnSync('ip', ['netns', 'add', ctrNs]).status, 0);
  const { dir: cacheDir } = await k8sBinaries();
  binDir = join(cacheDir, 'bin');
  cp = await startControlPlane({ binDir, dir: join(dir, 'cp'), netns });
  applyClusterIpamCrds(cp);
  // the shipped roles, bound to a user of our own instead of the DaemonSet's service account
  const docs = parseAllDocuments(readFileSync(join(ROOT, 'deploy/kubernetes/cluster-ipam-rbac.yaml'), 'utf8'))
    .map((d) => d.toJSON() as { kind: string; subjects?: unknown[] })
    .filter((d) => d);
  for (const d of docs)
    if (d.subjects) d.subjects = [{ kind: 'User', name: 'reclaimer', apiGroup: 'rbac.authorization.k8s.io' }];
  ok(cp.kubectl(['apply', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items: docs })));
  issueCert(cp.pki, 'reclaimer', '/CN=reclaimer', [
    'keyUsage=critical,digitalSignature,keyEncipherment',
    'extendedKeyUsage=clientAuth',
  ]);
  reclaimerConfig = join(dir, 'reclaimer.kubeconfig');
  writeFileSync(
    reclaimerConfig,
    kubeconfigFor(cp.pki, 'https://127.0.0.1:6443', 'reclaimer', 'reclaimer.crt', 'reclaimer.key'),
  );
  // no controller-manager runs: the service account pods need is made by hand
  ok(cp.kubectl(['-n', 'default', 'create', 'serviceaccount', 'default']));
  run = cniRunner(
    { binary: BIN },
    { inNetns: netns, netns: `/var/run/netns/${ctrNs}`, ifName: 'net1', timeoutMs: 60_000 },
  );
});

const node = (name: string) => ({ apiVersion: 'v1', kind: 'Node', metadata: { name } });
const pod = (name: string, nodeName: string) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: 'default' },
  spec: {
    nodeName,
    automountServiceAccountToken: false,
    containers: [{ name: 'c', image: 'registry.invalid/none:1' }],
  },
});
function apply(objs: unknown[]): void {
  ok(cp!.kubectl(['apply', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objs })));
}
function uidOf(name: string): string {
  const r = cp!.kubectl(['-n', 'default', 'get', 'pod', name, '-o', 'jsonpath={.metadata.uid}']);
  ok(r);
  return r.stdout;
}
const podArgs = (name: string, uid: string) =>
  `IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=${name};K8S_POD_UID=${uid}`;

interface Instance {
  proc: ChildProcess;
  log: () => string;
  identity: string;
}

/** A reclaimer instance in the control plane's namespace; `serve`: hosted by `cnikit serve` (env on). */
function startInstance(identity: string, how: 'serve' | 'command'): Instance {
  const flags = { grace: `${GRACE_S}s`, interval: '1s' };
  const env: Record<string, string> = { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin' };
  let argv: string[];
  if (how === 'serve') {
    Object.assign(env, {
      CNIKIT_CLUSTER_IPAM_RECLAIMER: 'on',
      CNIKIT_CLUSTER_IPAM_KUBECONFIG: reclaimerConfig,
      CNIKIT_CLUSTER_IPAM_RECLAIM_GRACE: flags.grace,
      CNIKIT_CLUSTER_IPAM_RECLAIM_INTERVAL: flags.interval,
      NODE_NAME: identity,
    });
    argv = [
      CNIKIT,
      'serve',
      '--socket',
      join(dir, `${identity}.sock`),
      '--metrics',
      join(dir, `${identity}.metrics`),
    ];
  } else {
    argv = [
      BIN,
      'reclaimer',
      '--kubeconfig',
      reclaimerConfig,
      '--grace',
      flags.grace,
      '--interval',
      flags.interval,
      '--lease-seconds',
      '6',
      '--identity',
      identity,
    ];
  }
  const proc = spawn('ip', ['netns', 'exec', netns, ...argv], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  children.push(proc);
  let text = '';
  proc.stderr?.on('data', (d: Buffer) => (text += d));
  return { proc, log: () => text, identity };
}

function metrics(identity: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: join(dir, `${identity}.metrics`), path: '/metrics' }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d));
      res.on('end', () => resolve(body));
    });
    req.on('error', reject);
    req.end();
  });
}
const metric = (text: string, name: string) => {
  const m = new RegExp(`^${name.replace(/[{}"]/g, (c) => `\\${c}`)} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
};

describe('the cluster-ipam reclaimer, two instances on kube-apiserver', { concurrency: false }, () => {
  const ips = new Map<string, string>();
  let a: Instance;
  let b: Instance;
  let leader: Instance;
  let follower: Instance;
  const add = async (c: string, nodeName: string, args = '') => {
    const r = expectOk(
      await run.add(conf(), { containerId: c, env: { NODENAME: nodeName }, args }),
      `ADD ${c}`,
    );
    ips.set(c, r.ips![0]!.address.split('/')[0]!);
  };

  test('setup: 3 nodes, a pod on each with its address; records without a pod UID', async () => {
    apply([
      node('node-a'),
      node('node-b'),
      node('node-c'),
      pod('pa', 'node-a'),
      pod('pb', 'node-b'),
      pod('pc', 'node-c'),
    ]);
    await add('ctr-pa', 'node-a', podArgs('pa', uidOf('pa')));
    await add('ctr-pb', 'node-b', podArgs('pb', uidOf('pb')));
    await add('ctr-pc', 'node-c', podArgs('pc', uidOf('pc')));
    // an attachment without pod UID (cnitool, a runtime that passes none) on node-c
    await add('ctr-nouid-c', 'node-c');
    await add('ctr-nouid-a', 'node-a');
    assert.equal(allocations().length, 5);
    assert.equal(new Set(blocks().map((x) => x.spec.node)).size, 3);
  });

  test('two instances: exactly one becomes leader; only it releases; records younger than the grace are kept', async () => {
    a = startInstance('reclaimer-serve', 'serve');
    b = startInstance('reclaimer-cmd', 'command');
    const holder = await until('a Lease holder', 30_000, () => lease()?.holderIdentity);
    leader = holder === 'reclaimer-cmd' ? b : a;
    follower = leader === a ? b : a;
    assert.ok(holder === leader.identity || holder.startsWith(`${leader.identity}_`), holder);
    // a record of a pod that does not exist (or not yet: a pod being created), written now: kept for the grace
    const runs = () => leader.log().match(/reclaimer run:/g)?.length ?? 0;
    await until('a first reclaimer run', 30_000, () => runs() > 0);
    await add('ctr-ghost', 'node-a', podArgs('ghost', '00000000-0000-0000-0000-00000000dead'));
    const ghostAt = Date.now();
    const seen = runs();
    await until('two more runs', 30_000, () => runs() >= seen + 2);
    const present = allocations().some((r) => r.spec.containerID === 'ctr-ghost');
    assert.ok(
      present || Date.now() - ghostAt >= GRACE_S * 1000,
      'the young record was released within the grace',
    );
    assert.equal(allocations().length, 6, 'nothing else released');
    // after the grace: the ghost's record goes, the live pods' and the no-UID records on live nodes stay
    await until('the ghost record released', 40_000, () =>
      allocations().every((r) => r.spec.containerID !== 'ctr-ghost'),
    );
    const left = allocations()
      .map((r) => r.spec.containerID)
      .sort();
    assert.deepEqual(left, ['ctr-nouid-a', 'ctr-nouid-c', 'ctr-pa', 'ctr-pb', 'ctr-pc']);
    await until('the leader’s log line', 20_000, () =>
      new RegExp(`released ${ips.get('ctr-ghost')!.replaceAll('.', '\\.')} .*pod UID [0-]+dead`).test(
        leader.log(),
      ),
    );
    assert.doesNotMatch(follower.log(), /released|reclaimer run:/, 'the follower never acts');
    assert.doesNotMatch(follower.log(), /: leader \(/);
    // the instance in cnikit serve serves its metrics
    const m = await metrics('reclaimer-serve');
    assert.equal(metric(m, 'cnikit_cluster_ipam_reclaimer_leader'), leader === a ? 1 : 0);
    if (leader === a) {
      assert.equal(metric(m, 'cnikit_cluster_ipam_reclaimer_released_total{reason="pod"}'), 1);
      assert.ok((metric(m, 'cnikit_cluster_ipam_reclaimer_runs_total{result="ok"}') ?? 0) >= 1);
    } else assert.equal(metric(m, 'cnikit_cluster_ipam_reclaimer_runs_total{result="ok"}'), 0);
  });

  test('node deleted (and its pod, as pod GC does): its records and blocks reclaimed after the grace; the live pods’ records never', async () => {
    ok(cp!.kubectl(['delete', 'node', 'node-c']));
    ok(cp!.kubectl(['-n', 'default', 'delete', 'pod', 'pc', '--grace-period=0', '--force']));
    // a pod being created: its record exists before the reclaimer can see the pod (younger than the grace)
    await add('ctr-new', 'node-b', podArgs('pnew', '00000000-0000-0000-0000-0000000000ne'));
    await until('node-c reclaimed', 40_000, () => {
      const recs = allocations();
      return (
        recs.every((r) => r.spec.node !== 'node-c') && blocks().every((x) => x.spec.node !== 'node-c') && recs
      );
    });
    const ids = allocations().map((r) => r.spec.containerID);
    assert.ok(ids.includes('ctr-pa') && ids.includes('ctr-pb') && ids.includes('ctr-nouid-a'), ids.join());
    const created = Date.parse(
      allocations().find((r) => r.spec.containerID === 'ctr-new')?.spec.created ?? '',
    );
    assert.ok(Number.isFinite(created), 'the new record is still there');
    await until('the leader’s log line', 20_000, () => /node node-c, which is gone/.test(leader.log()));
    await until('the leader’s log line', 20_000, () =>
      /; node node-c is gone; container ctr-nouid-c /.test(leader.log()),
    );
  });

  test('the leader killed (SIGKILL, Lease not released): the other takes over after the expiry and reclaims', async () => {
    const before = lease()!;
    leader.proc.kill('SIGKILL');
    // the killed instance was `ip netns exec`'s child or the same process: either way it is gone when ip exits
    await until(
      'the leader gone',
      10_000,
      () => leader.proc.exitCode !== null || leader.proc.signalCode !== null,
    );
    spawnSync('ip', ['netns', 'pids', netns]);
    const t0 = Date.now();
    const now = await until('a new holder', 60_000, () => {
      const l = lease();
      return l?.holderIdentity && !l.holderIdentity.startsWith(leader.identity) ? l : undefined;
    });
    process.stderr.write(`takeover after ${Date.now() - t0} ms\n`);
    assert.ok(now.holderIdentity!.startsWith(follower.identity));
    assert.equal(now.leaseTransitions, (before.leaseTransitions ?? 0) + 1);
    await until('the follower logs its takeover', 20_000, () =>
      /leader \(took over from/.test(follower.log()),
    );
    // the new leader acts: the pod-being-created record (its pod never came) goes after the grace
    await until('ctr-new released', 40_000, () =>
      allocations().every((r) => r.spec.containerID !== 'ctr-new'),
    );
    assert.deepEqual(
      allocations()
        .map((r) => r.spec.containerID)
        .sort(),
      ['ctr-nouid-a', 'ctr-pa', 'ctr-pb'],
      'the live pods’ records and the no-UID record of a live node were never released',
    );
    follower.proc.kill('SIGTERM');
    await until('the follower stopped', 20_000, () => follower.proc.exitCode !== null);
  });
});

/** The plugin executable run like a runtime runs it, in its own process group (killed as a whole). */
function spawnAdd(c: string, nodeName: string, cfg: unknown): ChildProcess {
  const p = spawn('ip', ['netns', 'exec', netns, BIN], {
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe'],
    env: {
      PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: c,
      CNI_NETNS: `/var/run/netns/${ctrNs}`,
      CNI_IFNAME: 'net1',
      CNI_PATH: distBin(),
      NODENAME: nodeName,
    },
  });
  p.stdin?.end(JSON.stringify(cfg));
  children.push(p);
  return p;
}
const exited = (p: ChildProcess) =>
  p.exitCode !== null || p.signalCode !== null
    ? Promise.resolve()
    : new Promise<void>((r) => p.once('exit', () => r()));

describe('cluster-ipam killed with SIGKILL in the middle of ADDs (cold)', { concurrency: false }, () => {
  // two pools: an ADD writes the first pool's record, then works on the second one's, so a kill can land between
  const killConf = () => {
    const c = conf();
    return {
      ...c,
      ipam: { ...c.ipam, range: undefined, ipRanges: [{ range: '10.31.0.0/24' }, { range: '10.32.0.0/24' }] },
    };
  };
  const nodes = ['node-k1', 'node-k2'];
  const ofPools = () => allocations().filter((r) => /^10\.3[12]\.0\./.test(r.spec.ip));

  /**
   * n concurrent ADDs; half are killed the moment their first record shows in a watch of the records (mid-ADD:
   * the second pool's address not taken yet), a quarter at a time spread over 0–2 s, a quarter finish.
   */
  async function killedBatch(prefix: string, n: number) {
    const w = spawn(
      'ip',
      [
        'netns',
        'exec',
        netns,
        join(binDir, 'kubectl'),
        '--kubeconfig',
        cp!.kubeconfig,
        'get',
        'ipamallocations.ipam.cnikit.dev',
        '--watch',
        '--no-headers',
        '-o',
        'custom-columns=C:.spec.containerID',
      ],
      { stdio: ['ignore', 'pipe', 'ignore'] },
    );
    children.push(w);
    await sleep(1500); // the watch is established (its first lines are the existing records)
    const procs = Array.from({ length: n }, (_, i) => ({
      c: `${prefix}-${i}`,
      node: nodes[i % 2]!,
      onRecord: i % 2 === 0,
      // of the others, half killed at a time spread over 0–2 s (before or in the ADD), half left to finish
      killAfter: i % 4 === 1 ? Math.round((2000 * i) / n) : undefined,
      p: spawnAdd(`${prefix}-${i}`, nodes[i % 2]!, killConf()),
      killedWithRecord: false,
    }));
    const byId = new Map(procs.map((x) => [x.c, x]));
    let buf = '';
    w.stdout?.on('data', (d: Buffer) => {
      buf += d;
      const lines = buf.split('\n');
      buf = lines.pop() ?? '';
      for (const l of lines) {
        const x = byId.get(l.trim());
        if (x?.onRecord && x.p.exitCode === null && x.p.signalCode === null) {
          process.kill(-x.p.pid!, 'SIGKILL');
          x.killedWithRecord = true;
        }
      }
    });
    await Promise.all(
      procs.map(async (x) => {
        if (x.killAfter !== undefined) {
          await Promise.race([sleep(x.killAfter), exited(x.p)]);
          if (x.p.exitCode === null && x.p.signalCode === null) process.kill(-x.p.pid!, 'SIGKILL');
        }
        await exited(x.p);
      }),
    );
    w.kill('SIGKILL');
    const killed = procs.filter((x) => x.p.exitCode !== 0);
    const done = procs.filter((x) => x.p.exitCode === 0);
    for (const x of killed) assert.equal(x.p.signalCode, 'SIGKILL', `${x.c} was killed, not failed`);
    return { killed, done, midAdd: procs.filter((x) => x.killedWithRecord && x.p.signalCode === 'SIGKILL') };
  }
  /** One record per address; a finished attachment holds one address per pool, a killed one none or one. */
  function check(done: Array<{ c: string }>) {
    const recs = ofPools();
    assert.equal(new Set(recs.map((r) => r.spec.ip)).size, recs.length, 'one record per address');
    const per = new Map<string, string[]>();
    for (const r of recs) per.set(r.spec.containerID, [...(per.get(r.spec.containerID) ?? []), r.spec.ip]);
    for (const d of done) {
      const ips = per.get(d.c) ?? [];
      assert.equal(ips.length, 2, `${d.c} holds ${ips.join(', ')}`);
      assert.deepEqual(ips.map((ip) => ip.split('.')[1]).sort(), ['31', '32']);
    }
    return recs;
  }

  test('ADDs killed mid-way (half right after their first record was written), then DEL of each: 0 leaks, 0 duplicates', async () => {
    const { killed, done, midAdd } = await killedBatch('kill-del', 16);
    const left = check(done).filter((r) => killed.some((k) => k.c === r.spec.containerID));
    process.stderr.write(
      `DEL batch: ${killed.length} killed (${midAdd.length} right after a record, ${left.length} records left), ${done.length} finished\n`,
    );
    assert.ok(midAdd.length > 0 && left.length > 0, 'some ADDs were killed after writing a record');
    assert.ok(done.length > 0, 'some ADDs finished');
    for (const k of killed)
      expectOk(await run.del(killConf(), { containerId: k.c, env: { NODENAME: k.node } }), `DEL ${k.c}`);
    const recs = check(done);
    assert.deepEqual(
      [...new Set(recs.map((r) => r.spec.containerID))].sort(),
      done.map((d) => d.c).sort(),
      'exactly the finished ADDs hold addresses',
    );
    for (const d of done)
      expectOk(await run.del(killConf(), { containerId: d.c, env: { NODENAME: d.node } }), `DEL ${d.c}`);
    assert.equal(ofPools().length, 0);
  });

  test('ADDs killed mid-way, then GC on each node with the finished ones valid: 0 leaks, 0 duplicates', async () => {
    const { killed, done, midAdd } = await killedBatch('kill-gc', 16);
    const left = check(done).filter((r) => killed.some((k) => k.c === r.spec.containerID));
    process.stderr.write(
      `GC batch: ${killed.length} killed (${midAdd.length} right after a record, ${left.length} records left), ${done.length} finished\n`,
    );
    assert.ok(midAdd.length > 0 && left.length > 0, 'some ADDs were killed after writing a record');
    assert.ok(done.length > 0, 'some ADDs finished');
    const valid = done.map((d) => ({ containerID: d.c, ifname: 'net1' }));
    for (const n of nodes)
      expectOk(await run.gc({ ...killConf(), 'cni.dev/valid-attachments': valid }, { env: { NODENAME: n } }));
    const recs = check(done);
    assert.deepEqual([...new Set(recs.map((r) => r.spec.containerID))].sort(), done.map((d) => d.c).sort());
    assert.equal(recs.length, 2 * done.length);
  });
});

describe('the reclaimer’s deletes carry preconditions {uid, resourceVersion} (kube-apiserver)', () => {
  test('a record deleted and created again under its name, or updated, between the run’s list and its delete is kept; a stale uid or resourceVersion is refused', async () => {
    // this process's connections to https://127.0.0.1:6443 are made in the control plane's namespace
    const inNs = enterNetns(`/run/netns/${netns}`);
    const store = new KubernetesStore({ kubeconfig: cp!.kubeconfig, deadlineMs: 120_000 });
    try {
      const pools = parseConf(
        {
          name: 'n',
          cniVersion: '1.0.0',
          ipam: { type: 'cluster-ipam', range: '10.33.0.0/24', block_size: 8 },
        },
        { args: '', command: 'ADD', env: { NODENAME: 'x' } },
        { flatFiles: [] },
      ).pools;
      // records of pods that do not exist, older than the grace (the reclaimer releases them)
      const hourAgo = () => new Date(Date.now() - 3_600_000);
      const on = new Allocator(store, { net: 'precond', overlapping: true, pools, node: 'node-p' }, hourAgo);
      const ghost = (i: number) => `00000000-0000-0000-0000-0000000000${String(i).padStart(2, '0')}`;
      const made = [];
      for (let i = 0; i < 3; i++)
        made.push(
          (
            await on.allocate({
              containerID: `precond-${i}`,
              ifName: 'net1',
              podNamespace: 'default',
              podName: `gone-${i}`,
              podUID: ghost(i),
            })
          )[0]!.record,
        );
      for (const r of made) assert.match(r.uid ?? '', /^[0-9a-f-]{36}$/, `${r.name} has its uid`);
      const [recreated, updated, stale] = made as [
        StoredObject<AllocationSpec>,
        StoredObject<AllocationSpec>,
        StoredObject<AllocationSpec>,
      ];
      // between the run's list and its delete: the first address released and handed out again to a pod being
      // created on another node (same name, new uid and resourceVersion), the second record changed
      const live = uidOf('pa');
      const raced: string[] = [];
      const racing: Store = {
        list: <T>(kind: StoreKind, prefix?: string, o?: ListOptions) => store.list<T>(kind, prefix, o),
        get: <T>(kind: StoreKind, name: string) => store.get<T>(kind, name),
        create: (kind, name, spec) => store.create(kind, name, spec),
        update: (kind, name, spec, version) => store.update(kind, name, spec, version),
        close: async () => {},
        async delete(kind, name, version, spec, uid) {
          if (kind === 'allocations' && name === recreated.name) {
            raced.push(name);
            assert.equal(await store.delete('allocations', name), true);
            assert.ok(
              await store.create<AllocationSpec>('allocations', name, {
                ...recreated.spec,
                containerID: 'precond-new',
                podName: 'pa',
                podUID: live,
                node: 'node-a',
                created: new Date().toISOString(),
              }),
            );
          }
          if (kind === 'allocations' && name === updated.name) {
            raced.push(name);
            const now = await store.get<AllocationSpec>('allocations', name);
            assert.ok(
              await store.update('allocations', name, { ...now!.spec, ifName: 'net2' }, now!.version),
            );
          }
          return store.delete(kind, name, version, spec, uid);
        },
      };
      const rec = new Reclaimer(
        {
          leaseNamespace: 'kube-system',
          leaseName: 'ipamfix-precondition-test',
          leaseSeconds: 60,
          graceMs: 30 * 60_000,
          intervalMs: 60_000,
          identity: 'precondition-test',
        },
        kubeconfigConnection(cp!.kubeconfig),
        () => {},
      );
      assert.equal(await rec.elect(), true, 'the test instance holds its Lease');
      const report = await rec.reclaim(racing);
      assert.deepEqual(raced.sort(), [recreated.name, updated.name].sort(), 'both races ran');
      assert.deepEqual(
        report.released.map((x) => x.name),
        [stale.name],
        'only the record left alone is released',
      );
      const now = new Map(
        (await store.list<AllocationSpec>('allocations', 'precond.')).map((r) => [r.name, r]),
      );
      assert.equal(
        now.get(recreated.name)?.spec.containerID,
        'precond-new',
        'the record created again is kept',
      );
      assert.notEqual(now.get(recreated.name)?.uid, recreated.uid);
      assert.equal(now.get(updated.name)?.spec.ifName, 'net2', 'the updated record is kept');
      assert.equal(now.has(stale.name), false);

      // each precondition on its own, as the API server applies it
      const x = now.get(updated.name)!;
      assert.equal(
        await store.delete('allocations', x.name, x.version, x.spec, recreated.uid),
        false,
        'the right resourceVersion with another object’s uid is refused',
      );
      assert.equal(
        await store.delete('allocations', x.name, updated.version, x.spec, x.uid),
        false,
        'the right uid with an older resourceVersion is refused',
      );
      assert.ok((await store.get('allocations', x.name)) !== undefined);
      assert.equal(await store.delete('allocations', x.name, x.version, x.spec, x.uid), true);
      const y = now.get(recreated.name)!;
      assert.equal(await store.delete('allocations', y.name, y.version, y.spec, y.uid), true);
      await rec.release();
    } finally {
      await store.close();
      inNs.restore();
    }
  });
});
