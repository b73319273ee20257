/**
 * cluster-ipam served by the node's warm service against a real kube-apiserver (scripts/k8s/control-plane.ts, in a
 * private network namespace): the runtime's call goes through the static client dist-bin/warm/cluster-ipam to
 * `dist-bin/cnikit serve` (both in that namespace, socket in a scratch directory), which keeps the node's view in
 * memory. Then the service is killed with SIGKILL in the middle of ADDs (the API server paused with SIGSTOP, so the
 * request is surely in flight: its create may still land after the service is gone), restarted, and DEL / GC must
 * leave no record of the killed attachments and no address twice. Run with `npm run test:k8s` after `npm run build`.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cniRunner, expectCniError, expectOk } from '@cnikit/testing';
import { type ControlPlane, startControlPlane } from '../../../scripts/k8s/control-plane.ts';
// @ts-expect-error: a JavaScript module of scripts/ without declarations
import { k8sBinaries } from '../../../scripts/k8s-build.mjs';
import { distBin } from '../../../test-netns/dist.ts';
import { applyClusterIpamCrds } from './testdata/crds.ts';

const DIST = distBin();
const COLD = join(DIST, 'cluster-ipam');
const WARM = join(DIST, 'warm', 'cluster-ipam');
const netns = `cnikit-cipamw-${process.pid}`;
const ctrNs = `${netns}-ctr`;
const dir = mkdtempSync(join(tmpdir(), 'cnikit-cluster-ipam-warm-'));
const sockDir = join(dir, 'run');
const SOCK = join(sockDir, 'cnikit.sock');
const NODE = 'warm-node';
const PATH = process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin';
let cp: ControlPlane | undefined;
let svc: Service | undefined;
let apiserverPid = 0;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function eventually(f: () => boolean, what: string, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (!f()) {
    if (Date.now() > end) throw new Error(`timed out waiting for: ${what}`);
    await sleep(100);
  }
}

/** `cnikit serve` in the API server's namespace; its log in a file (one `→ exit` line per request). */
class Service {
  readonly proc: ChildProcess;
  readonly logFile = join(dir, `serve-${Date.now()}.log`);
  constructor() {
    const fd = openSync(this.logFile, 'a');
    try {
      this.proc = spawn(
        'ip',
        [
          'netns',
          'exec',
          netns,
          join(DIST, 'cnikit'),
          'serve',
          '--socket',
          SOCK,
          '--verbose',
          '--metrics',
          'off',
          '--deadline-ms',
          '60000',
        ],
        { stdio: ['ignore', 'ignore', fd], env: { PATH, NODENAME: NODE } },
      );
    } finally {
      closeSync(fd);
    }
  }
  get log(): string {
    return readFileSync(this.logFile, 'utf8');
  }
  served(): number {
    return this.log.split('\n').filter((l) => l.includes('cluster-ipam') && l.includes(' → exit ')).length;
  }
  /** The service's own pid (ip netns exec execs it: the same process). */
  get pid(): number {
    return this.proc.pid as number;
  }
  fds(): number {
    try {
      return readdirSync(`/proc/${this.pid}/fd`).length;
    } catch {
      return -1;
    }
  }
  async ready(): Promise<void> {
    await eventually(
      () =>
        spawnSync(join(DIST, 'cnikit'), ['serve', '--check', '--socket', SOCK], { env: { PATH } }).status ===
        0,
      `the service answers on ${SOCK}`,
    );
  }
  async kill(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const done = new Promise((r) => this.proc.once('exit', r));
    this.proc.kill('SIGKILL');
    await done;
  }
  async stop(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const done = new Promise((r) => this.proc.once('exit', r));
    this.proc.kill('SIGTERM');
    const t = setTimeout(() => this.proc.kill('SIGKILL'), 10_000);
    await done;
    clearTimeout(t);
  }
}

after(async () => {
  if (apiserverPid) spawnSync('kill', ['-CONT', String(apiserverPid)]);
  await svc?.stop();
  await cp?.stop();
  spawnSync('ip', ['netns', 'del', netns]);
  spawnSync('ip', ['netns', 'del', ctrNs]);
  spawnSync('rm', ['-rf', dir]);
});

let kubeconfig = '';
const conf = () => ({
  cniVersion: '1.1.0',
  name: 'warmnet',
  type: 'macvlan',
  ipam: {
    type: 'cluster-ipam',
    range: '10.20.0.0/24',
    network_name: 'warmnet',
    kubernetes: { kubeconfig },
  },
});
const opts = { inNetns: netns, netns: `/var/run/netns/${ctrNs}`, ifName: 'net1', timeoutMs: 90_000 };
/** What the kubelet passes (the pod of the attachment). */
const podArgs = (c: string) =>
  `IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=pod-${c};K8S_POD_UID=uid-${c}`;
let warm: ReturnType<typeof cniRunner>;
let cold: ReturnType<typeof cniRunner>;

interface Rec {
  metadata: { name: string; labels: Record<string, string> };
  spec: { ip: string; node: string; containerID: string; ifName: string };
}
function records(): Rec[] {
  const r = cp!.kubectl(['get', 'ipamallocations.ipam.cnikit.dev', '-o', 'json']);
  assert.equal(r.status, 0, r.stderr);
  return (JSON.parse(r.stdout).items as Rec[]).filter((x) => x.metadata.name.startsWith('warmnet.'));
}

before(async () => {
  assert.ok(existsSync(WARM), `${WARM} is missing: npm run build`);
  mkdirSync(sockDir, { mode: 0o700 });
  assert.equal(spawnSync('ip', ['netns', 'add', ctrNs]).status, 0);
  const { dir: cacheDir } = await k8sBinaries();
  cp = await startControlPlane({ binDir: join(cacheDir, 'bin'), dir: join(dir, 'cp'), netns });
  applyClusterIpamCrds(cp);
  kubeconfig = cp.kubeconfig;
  for (const p of cp.procs) {
    try {
      if (readFileSync(`/proc/${p.pid}/comm`, 'utf8').trim() === 'kube-apiserver') apiserverPid = p.pid;
    } catch {
      // gone
    }
  }
  assert.ok(apiserverPid > 0, 'the kube-apiserver process of the control plane');
  warm = cniRunner({ binary: WARM }, { ...opts, env: { CNIKIT_SOCKET: SOCK } });
  cold = cniRunner({ binary: COLD }, { ...opts, env: { NODENAME: NODE } });
  svc = new Service();
  await svc.ready();
});

describe('cluster-ipam in the warm service on kube-apiserver', { concurrency: false }, () => {
  test('ADDs go to the service, one address each from the node’s block; cold calls beside them; DEL frees', async () => {
    const s = svc as Service;
    const ips = new Map<string, string>();
    for (let i = 0; i < 12; i++) {
      const r = expectOk(await warm.add(conf(), { containerId: `w${i}`, args: podArgs(`w${i}`) }));
      ips.set(`w${i}`, r.ips![0]!.address);
    }
    assert.equal(new Set(ips.values()).size, 12);
    await eventually(() => s.served() >= 12, `12 calls answered by the service (log:\n${s.log})`);
    // the record of each: this node, its label, the address answered
    const recs = records();
    assert.equal(recs.length, 12);
    for (const r of recs) {
      assert.equal(r.spec.node, NODE);
      assert.equal(r.metadata.labels['ipam.cnikit.dev/node'], NODE);
      assert.equal(`${r.spec.ip}/24`, ips.get(r.spec.containerID));
    }
    // a cold call of the same node (no service involved) takes another address
    const c = expectOk(await cold.add(conf(), { containerId: 'cold0', args: podArgs('cold0') }));
    assert.ok(![...ips.values()].includes(c.ips![0]!.address), c.ips![0]!.address);
    // a repeated ADD is answered with the address it holds
    const again = expectOk(await warm.add(conf(), { containerId: 'w3', args: podArgs('w3') }));
    assert.equal(again.ips![0]!.address, ips.get('w3'));
    // DEL through the service, and cold
    for (const id of ips.keys()) expectOk(await warm.del(conf(), { containerId: id }));
    expectOk(await cold.del(conf(), { containerId: 'cold0' }));
    expectOk(await warm.del(conf(), { containerId: 'w0' }));
    assert.deepEqual(records(), []);
  });

  test('SIGKILL of the service mid-ADD, then DEL and GC: no record left of the killed ADDs, no address twice', async () => {
    const live = expectOk(await warm.add(conf(), { containerId: 'live0', args: podArgs('live0') }));
    const killed: string[] = [];
    for (let round = 0; round < 8; round++) {
      const s = svc as Service;
      const baseline = s.fds();
      // rounds 0-3: the API server stops answering, so the ADD's create is surely sent and waiting when the
      // service dies; rounds 4-7: it answers, and the kill comes as soon as the service holds the call
      const paused = round < 4;
      if (paused) assert.equal(spawnSync('kill', ['-STOP', String(apiserverPid)]).status, 0);
      const id = `k${round}`;
      killed.push(id);
      let finished = false;
      const pending = warm.add(conf(), { containerId: id, args: podArgs(id) }).finally(() => {
        finished = true;
      });
      // the service holds the call: the client's connection and its namespace descriptor are open in it (an
      // unpaused ADD may be answered before that is seen: then the kill comes after it)
      await eventually(
        () => s.fds() >= baseline + 2 || (!paused && finished),
        `the service took the ADD of ${id}`,
        30_000,
      );
      await s.kill();
      const out = await pending;
      if (paused) assert.equal(spawnSync('kill', ['-CONT', String(apiserverPid)]).status, 0);
      // the client reports the lost service as "try again later" (or the answer, when it came first)
      if (paused || out.code !== 0) expectCniError(out, 11);
      svc = new Service();
      await svc.ready();
    }
    // the API server is settled: what the killed services sent has landed or never will
    let last = '';
    await eventually(() => {
      const now = JSON.stringify(records().map((r) => r.metadata.name));
      const same = now === last;
      last = now;
      return same;
    }, 'the records no longer change');
    const orphans = records().filter((r) => killed.includes(r.spec.containerID)).length;
    // the runtime's DEL of the first two, its GC for the others (valid: the live attachment only)
    for (const id of killed.slice(0, 2)) expectOk(await warm.del(conf(), { containerId: id }));
    expectOk(
      await warm.gc({
        ...conf(),
        'cni.dev/valid-attachments': [{ containerID: 'live0', ifname: 'net1' }],
      }),
    );
    const after1 = records();
    assert.deepEqual(
      after1.filter((r) => killed.includes(r.spec.containerID)).map((r) => r.metadata.name),
      [],
      `records of killed ADDs left (${orphans} had landed)`,
    );
    assert.deepEqual(
      after1.map((r) => `${r.spec.containerID} ${r.spec.ip}/24`),
      [`live0 ${live.ips![0]!.address}`],
    );
    // the restarted service hands out addresses again, none twice
    for (let i = 0; i < 8; i++)
      expectOk(await warm.add(conf(), { containerId: `n${i}`, args: podArgs(`n${i}`) }));
    const all = records();
    assert.equal(all.length, 9);
    assert.equal(new Set(all.map((r) => r.spec.ip)).size, 9);
    process.stderr.write(`# warm kill test: ${orphans} of ${killed.length} killed ADDs left a record\n`);
  });
});
