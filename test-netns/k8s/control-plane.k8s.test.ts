/**
 * The lab cluster's control plane (scripts/k8s/control-plane.ts, docs/k8s-build.md): etcd-server and the
 * kube-apiserver built from Debian's source package (scripts/k8s-build.mjs; a cache hit after the first build, about
 * 16 CPU-minutes from nothing) started in a private network namespace with certificates made at start, used through
 * kubectl, and stopped. Run with `npm run test:k8s`.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { type ControlPlane, startControlPlane } from '../../scripts/k8s/control-plane.ts';
// @ts-expect-error: a JavaScript module of scripts/ without declarations
import { k8sBinaries, UPSTREAM_VERSION } from '../../scripts/k8s-build.mjs';

const netns = `cnikit-cp-${process.pid}`;
const dir = mkdtempSync(join(tmpdir(), 'cnikit-control-plane-test-'));
let cp: ControlPlane | undefined;
after(async () => {
  await cp?.stop();
  spawnSync('ip', ['netns', 'del', netns]);
});

const rootNs = () => spawnSync('readlink', ['/proc/self/ns/net'], { encoding: 'utf8' }).stdout.trim();
const listening = (args: string[]) =>
  spawnSync('ss', ['-Htln', ...args], { encoding: 'utf8' })
    .stdout.split('\n')
    .filter((l) => /:(6443|2379|2380)\s/.test(l));

test('etcd + kube-apiserver in a private namespace: TLS with the PKI made at start, RBAC, JSON maps, clean stop', async () => {
  const { dir: cacheDir } = await k8sBinaries();
  const binDir = join(cacheDir, 'bin');
  const before = rootNs();
  const rootListenersBefore = listening([]);
  cp = await startControlPlane({ binDir, dir, netns });

  const version = JSON.parse(cp.kubectl(['version', '-o', 'json']).stdout);
  assert.equal(version.serverVersion.gitVersion, UPSTREAM_VERSION);
  assert.equal(version.clientVersion.gitVersion, UPSTREAM_VERSION);

  // the serving certificate is the one made at start: kubectl verified it against our CA
  const serving = spawnSync(
    'ip',
    [
      'netns',
      'exec',
      netns,
      'openssl',
      's_client',
      '-connect',
      '127.0.0.1:6443',
      '-CAfile',
      join(cp.pki, 'ca.crt'),
    ],
    { encoding: 'utf8', input: '', timeout: 20_000 },
  );
  assert.match(serving.stdout, /Verify return code: 0 \(ok\)/);
  assert.match(serving.stdout, /subject=CN ?= ?kube-apiserver/);

  // a ConfigMap round trip: JSON maps encoded by kubectl (the reflect2 patch) and by the apiserver
  const created = cp.kubectl([
    'create',
    'configmap',
    'lab',
    '--from-literal=a=b',
    '--from-literal=c=d',
    '-o',
    'json',
  ]);
  assert.equal(created.status, 0, created.stderr);
  assert.deepEqual(JSON.parse(created.stdout).data, { a: 'b', c: 'd' });
  const got = JSON.parse(cp.kubectl(['get', 'configmap', 'lab', '-o', 'json']).stdout);
  assert.deepEqual(got.data, { a: 'b', c: 'd' });

  // RBAC and the Node authorizer are on: an unknown user is denied, a node identity may read its own node only
  const anon = cp.kubectl(['auth', 'can-i', 'list', 'pods', '--as', 'nobody']);
  assert.equal(anon.stdout.trim(), 'no');
  // nodes/get for a node identity comes from the Node authorizer's rules (1.20's RBAC binds nothing to system:nodes);
  // a secret no pod of that node uses stays closed to it
  const nodeGet = cp.kubectl([
    'auth',
    'can-i',
    'get',
    'nodes/n1',
    '--as',
    'system:node:n1',
    '--as-group',
    'system:nodes',
  ]);
  assert.equal(nodeGet.stdout.trim(), 'yes', nodeGet.stderr);
  const nodeSecret = cp.kubectl([
    'auth',
    'can-i',
    'get',
    'secrets/s',
    '--as',
    'system:node:n1',
    '--as-group',
    'system:nodes',
  ]);
  assert.match(
    nodeSecret.stdout.trim(),
    /^no - no relationship found between node 'n1'/,
    'the Node authorizer decided',
  );

  // everything listens in the private namespace only
  assert.equal(rootNs(), before);
  assert.deepEqual(listening([]), rootListenersBefore, 'nothing new listens in the root namespace');
  const inNs = spawnSync('ip', ['netns', 'exec', netns, 'ss', '-Htln'], { encoding: 'utf8' }).stdout;
  for (const port of ['6443', '2379', '2380']) assert.match(inNs, new RegExp(`127\\.0\\.0\\.1:${port}\\s`));

  await cp.stop();
  const stopped = cp;
  cp = undefined;
  assert.equal(existsSync(stopped.dir), false, 'the scratch directory is removed');
  const nsList = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' }).stdout;
  assert.doesNotMatch(nsList, new RegExp(`^${netns}\\b`, 'm'), 'the namespace is removed');
  const ps = spawnSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).stdout;
  assert.equal(ps.includes(stopped.dir), false, 'no process of the control plane is left');
});
