/**
 * cluster-ipam against a real kube-apiserver (scripts/k8s/control-plane.ts, in a private network namespace): the
 * CRDs of deploy/kubernetes applied, the compiled dist-bin/cluster-ipam called like a runtime calls it, as several
 * "nodes" (NODENAME) at once, with a YAML kubeconfig of a user that has the ClusterRole of
 * deploy/kubernetes/cluster-ipam-rbac.yaml and nothing else. Run with `npm run test:k8s` after `npm run build`.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cniRunner, expectCniError, expectOk } from '@cnikit/testing';
import { stringify } from 'yaml';
import {
  type ControlPlane,
  issueCert,
  kubeconfigFor,
  startControlPlane,
} from '../../../scripts/k8s/control-plane.ts';
// @ts-expect-error: a JavaScript module of scripts/ without declarations
import { k8sBinaries } from '../../../scripts/k8s-build.mjs';
import { distBin } from '../../../test-netns/dist.ts';
import { applyClusterIpamCrds } from './testdata/crds.ts';

const ROOT = join(import.meta.dirname, '..', '..', '..');
const BIN = join(distBin(), 'cluster-ipam');
const netns = `cnikit-cipam-${process.pid}`;
// the containers' namespace (CNI_NETNS; the plugin refuses its own)
const ctrNs = `${netns}-ctr`;
const dir = mkdtempSync(join(tmpdir(), 'cnikit-cluster-ipam-k8s-'));
let cp: ControlPlane | undefined;
let silent: ChildProcess | undefined;

after(async () => {
  if (silent?.pid) silent.kill('SIGKILL');
  await cp?.stop();
  spawnSync('ip', ['netns', 'del', netns]);
  spawnSync('ip', ['netns', 'del', ctrNs]);
});

let run: ReturnType<typeof cniRunner>;
let kubeconfig = '';
let nobodyConfig = '';

/** A client certificate CN=name of the control plane's CA (RBAC gives it rights by that user name). */
function userCert(pki: string, name: string): void {
  issueCert(pki, name, `/CN=${name}`, [
    'keyUsage=critical,digitalSignature,keyEncipherment',
    'extendedKeyUsage=clientAuth',
  ]);
}

const conf = (ipam: Record<string, unknown> = {}) => ({
  cniVersion: '1.1.0',
  name: 'l2net',
  type: 'macvlan',
  ipam: {
    type: 'cluster-ipam',
    range: '10.10.0.0/26',
    gateway: '10.10.0.1',
    network_name: 'l2net',
    kubernetes: { kubeconfig },
    // whereabouts' lock tuning: accepted, ignored
    leader_lease_duration: 1500,
    sleep_for_race: 1,
    ...ipam,
  },
});

interface Rec {
  metadata: { name: string; labels: Record<string, string> };
  spec: { ip: string; node: string; containerID: string; ifName: string; podName: string; podUID: string };
}
function allocations(): Rec[] {
  const r = cp!.kubectl(['get', 'ipamallocations.ipam.cnikit.dev', '-o', 'json']);
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout).items as Rec[];
}

async function pool<T>(items: T[], width: number, f: (x: T) => Promise<void>): Promise<void> {
  let i = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (i < items.length) await f(items[i++]!);
    }),
  );
}

before(async () => {
  assert.ok(existsSync(BIN), `${BIN} is missing: npm run build`);
  assert.equal(spawnSync('ip', ['netns', 'add', ctrNs]).status, 0);
  const { dir: cacheDir } = await k8sBinaries();
  cp = await startControlPlane({ binDir: join(cacheDir, 'bin'), dir: join(dir, 'cp'), netns });
  applyClusterIpamCrds(cp);
  // the shipped ClusterRole, bound to a user of our own (the shipped binding names the DaemonSet's account)
  const rbac = readFileSync(join(ROOT, 'deploy/kubernetes/cluster-ipam-rbac.yaml'), 'utf8').split(
    /^---$/m,
  )[0]!;
  assert.equal(cp.kubectl(['apply', '-f', '-'], rbac).status, 0);
  const bind = cp.kubectl([
    'create',
    'clusterrolebinding',
    'ipam-user',
    '--clusterrole=cnikit-cluster-ipam',
    '--user=ipam-user',
  ]);
  assert.equal(bind.status, 0, bind.stderr);
  userCert(cp.pki, 'ipam-user');
  userCert(cp.pki, 'nobody');
  const server = 'https://127.0.0.1:6443';
  // the plugin's kubeconfig in YAML (what kubectl and whereabouts' installer write); the other in JSON
  kubeconfig = join(dir, 'ipam.kubeconfig');
  writeFileSync(
    kubeconfig,
    stringify(JSON.parse(kubeconfigFor(cp.pki, server, 'ipam-user', 'ipam-user.crt', 'ipam-user.key'))),
  );
  nobodyConfig = join(dir, 'nobody.kubeconfig');
  writeFileSync(nobodyConfig, kubeconfigFor(cp.pki, server, 'nobody', 'nobody.crt', 'nobody.key'));
  run = cniRunner(
    { binary: BIN },
    { inNetns: netns, netns: `/var/run/netns/${ctrNs}`, ifName: 'net1', timeoutMs: 60_000 },
  );
});

describe('cluster-ipam on kube-apiserver', { concurrency: false }, () => {
  const results = new Map<string, string>();
  const nodes = ['node-1', 'node-2', 'node-3', 'node-4', 'node-5'];
  const env = (node: string) => ({ NODENAME: node });
  const args = (c: string) =>
    `IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=pod-${c};K8S_POD_UID=uid-${c};K8S_POD_INFRA_CONTAINER_ID=${c}`;

  test('60 ADDs from 5 nodes at once on a 61-address pool: 60 distinct addresses, each one record with its pod and node', async () => {
    const calls = nodes.flatMap((n) => Array.from({ length: 12 }, (_, i) => ({ node: n, c: `${n}-c${i}` })));
    const t0 = Date.now();
    await pool(calls, 5, async ({ node, c }) => {
      const r = await run.add(conf(), { containerId: c, env: env(node), args: args(c) });
      const res = expectOk(r, `ADD ${c}`);
      assert.equal(res.ips!.length, 1);
      assert.equal(res.ips![0]!.gateway, '10.10.0.1');
      results.set(c, res.ips![0]!.address);
    });
    const ms = Date.now() - t0;
    const addrs = [...results.values()];
    assert.equal(addrs.length, 60);
    assert.equal(new Set(addrs).size, 60, 'no duplicate address');
    for (const a of addrs) assert.match(a, /^10\.10\.0\.([2-9]|[1-5][0-9]|6[0-2])\/26$/);
    const recs = allocations();
    assert.equal(recs.length, 60);
    assert.equal(new Set(recs.map((r) => r.spec.ip)).size, 60);
    for (const r of recs) {
      const c = r.spec.containerID;
      assert.equal(`${r.spec.ip}/26`, results.get(c), `record of ${c}`);
      assert.equal(r.spec.node, c.split('-c')[0]);
      assert.equal(r.spec.podName, `pod-${c}`);
      assert.equal(r.spec.podUID, `uid-${c}`);
      assert.equal(r.spec.ifName, 'net1');
      assert.equal(r.metadata.labels['ipam.cnikit.dev/p1'], 'l2net');
    }
    const blocks = JSON.parse(cp!.kubectl(['get', 'ipamblocks.ipam.cnikit.dev', '-o', 'json']).stdout)
      .items as { spec: { node: string; size: number } }[];
    assert.ok(blocks.length >= 5, `${blocks.length} blocks`);
    for (const b of blocks) assert.equal(b.spec.size, 2, 'a 61-address pool is cut into blocks of 2');
    process.stderr.write(`60 ADDs (5 nodes, 5 at a time): ${ms} ms\n`);
  });

  test('the 61st ADD takes the last address, the 62nd fails (11) naming the pool and its size; STATUS 50', async () => {
    const last = expectOk(
      await run.add(conf(), { containerId: 'last', env: env('node-6'), args: args('last') }),
    );
    results.set('last', last.ips![0]!.address);
    assert.equal(new Set(results.values()).size, 61);
    const full = await run.add(conf(), { containerId: 'over', env: env('node-6'), args: args('over') });
    expectCniError(
      full,
      11,
      /pool 10\.10\.0\.0\/26 \(10\.10\.0\.1-10\.10\.0\.62, 61 addresses\) is exhausted/,
    );
    expectCniError(
      await run.status(conf(), { env: env('node-1') }),
      50,
      /pool 10\.10\.0\.0\/26 .* is exhausted: 61 addresses allocated/,
    );
    assert.equal(allocations().length, 61, 'the failed ADD left nothing');
  });

  test('CHECK finds the record; DEL releases it and is idempotent; STATUS is 0 again', async () => {
    const c = 'node-2-c3';
    const prev = { cniVersion: '1.1.0', ips: [{ address: results.get(c)! }] };
    expectOk(await run.check({ ...conf(), prevResult: prev }, { containerId: c, env: env('node-2') }));
    expectOk(await run.del(conf(), { containerId: c, env: env('node-2') }));
    expectOk(await run.del(conf(), { containerId: c, env: env('node-2') }));
    assert.equal(
      allocations().some((r) => r.spec.containerID === c),
      false,
    );
    expectCniError(
      await run.check({ ...conf(), prevResult: prev }, { containerId: c, env: env('node-2') }),
      999,
      /no address of container node-2-c3/,
    );
    expectOk(await run.status(conf(), { env: env('node-1') }));
    // a DEL of a borrowed address from the node that holds it (node-6 has no block of its own)
    expectOk(await run.del(conf(), { containerId: 'last', env: env('node-6') }));
    assert.equal(allocations().length, 59);
  });

  test('GC on node-1 releases only node-1’s attachments that are not valid', async () => {
    const valid = Array.from({ length: 6 }, (_, i) => ({ containerID: `node-1-c${i}`, ifname: 'net1' }));
    expectOk(await run.gc({ ...conf(), 'cni.dev/valid-attachments': valid }, { env: env('node-1') }));
    const left = allocations();
    const n1 = left
      .filter((r) => r.spec.node === 'node-1')
      .map((r) => r.spec.containerID)
      .sort();
    assert.deepEqual(n1, valid.map((v) => v.containerID).sort());
    assert.equal(left.filter((r) => r.spec.node !== 'node-1').length, 59 - 12);
  });

  test('bad configurations: code 7 with what to fix, nothing written', async () => {
    const before = allocations().length;
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [
        { range: '10.10.0.0/26', range_start: '10.10.0.40', range_end: '10.10.0.20' },
        /range 0 \(10\.10\.0\.0\/26\): the range is inverted or empty/,
      ],
      [
        { range: '10.10.0.0/26', ipRanges: [{ range: '10.10.0.32/27' }] },
        /range 0 \(10\.10\.0\.0\/26\) overlaps with range 1 \(10\.10\.0\.32\/27\)/,
      ],
      [{ range: '10.10.0.0/26', exclude: ['10.20.0.0/24'] }, /exclude 10\.20\.0\.0\/24 is outside the range/],
      [
        { kubernetes: { kubeconfig: join(dir, 'absent.kubeconfig') } },
        /kubeconfig .*absent\.kubeconfig does not exist/,
      ],
      [{ kubernetes: {} }, /no Kubernetes credentials: set kubernetes\.kubeconfig/],
      [
        { kubernetes: { kubeconfig: nobodyConfig } },
        /forbidden \(HTTP 403\) for kubeconfig .*nobody\.kubeconfig \(user nobody\): .*ipamblocks.*cnikit-cluster-ipam/,
      ],
    ];
    for (const [ipam, msg] of cases) {
      const r = await run.add(conf(ipam), { containerId: 'bad', env: env('node-1') });
      expectCniError(r, 7, msg);
    }
    assert.equal(allocations().length, before);
  });

  test('API server unreachable: ADD and DEL fail with 11 within the bound; DEL succeeds once it is back', async () => {
    const c = 'node-3-c0';
    // nothing listens: refused at once
    const refused = { kubernetes: { kubeconfig, k8s_api_root: 'https://127.0.0.1:6399' } };
    let t0 = Date.now();
    expectCniError(
      await run.add(conf(refused), { containerId: 'down', env: env('node-3') }),
      11,
      /Kubernetes API unreachable .*ECONNREFUSED/,
    );
    assert.ok(Date.now() - t0 < 10_000);
    // a listener that never answers (the TLS handshake hangs): the call's bound ends it
    silent = spawn(
      'ip',
      [
        'netns',
        'exec',
        netns,
        'python3',
        '-c',
        'import socket,time\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\ns.bind(("127.0.0.1",6398))\ns.listen(64)\ntime.sleep(600)',
      ],
      { stdio: 'ignore' },
    );
    for (
      let i = 0;
      i < 50 &&
      !/:6398\s/.test(spawnSync('ip', ['netns', 'exec', netns, 'ss', '-Htln'], { encoding: 'utf8' }).stdout);
      i++
    )
      await new Promise((r) => setTimeout(r, 100));
    const hung = { kubernetes: { kubeconfig, k8s_api_root: 'https://127.0.0.1:6398' } };
    t0 = Date.now();
    const r = await run.del(conf(hung), {
      containerId: c,
      env: { ...env('node-3'), CNIKIT_CLUSTER_IPAM_TIMEOUT_MS: '3000' },
    });
    const took = Date.now() - t0;
    expectCniError(r, 11, /no answer within|out of time/);
    assert.ok(took >= 2_500 && took < 8_000, `DEL took ${took} ms against a bound of 3000 ms`);
    silent.kill('SIGKILL');
    silent = undefined;
    assert.ok(
      allocations().some((x) => x.spec.containerID === c),
      'the failed DEL changed nothing',
    );
    expectOk(await run.del(conf(), { containerId: c, env: env('node-3') }));
    assert.equal(
      allocations().some((x) => x.spec.containerID === c),
      false,
    );
  });

  test('CRD missing: code 7 naming the CustomResourceDefinition to install', async () => {
    const del = cp!.kubectl([
      'delete',
      'crd',
      'ipamblocks.ipam.cnikit.dev',
      'ipamallocations.ipam.cnikit.dev',
      '--wait=true',
    ]);
    assert.equal(del.status, 0, del.stderr);
    // discovery may answer for a moment after the delete
    let r = await run.add(conf(), { containerId: 'nocrd', env: env('node-1') });
    for (let i = 0; i < 20 && r.json?.code !== 7; i++) {
      await new Promise((res) => setTimeout(res, 500));
      r = await run.add(conf(), { containerId: 'nocrd', env: env('node-1') });
    }
    expectCniError(
      r,
      7,
      /the CustomResourceDefinition ipamblocks\.ipam\.cnikit\.dev is not installed .*apply deploy\/kubernetes\/cluster-ipam-crds\.yaml/,
    );
  });
});
