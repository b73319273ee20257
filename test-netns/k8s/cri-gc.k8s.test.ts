/**
 * Leaks after a reboot (the host-local failure of containerd/cri#948): a private containerd 1.6 (node.ts) runs pod
 * sandboxes through cnikit's bridge + host-local; some are stopped (NOTREADY, as after a reboot) or removed, and the
 * host-local reservations and cached results of the removed ones are put back, as a runtime that lost them leaves
 * them. `cnikit tool gc --from-cri SOCKET` (the hand-written CRI client in @cnikit/libcni) then: --dry-run names
 * exactly the vanished sandboxes' addresses and changes nothing; the real run releases exactly those and keeps every
 * existing sandbox's (READY or NOTREADY); an unreachable socket releases nothing. Then the same through the warm
 * service's periodic GC (CNIKIT_GC_INTERVAL), counted in its metrics.
 */
import assert from 'node:assert/strict';
import {
  chmodSync,
  copyFileSync,
  linkSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { eventually, sleep } from '@cnikit/testing';
import { DIST, ensureBuilt } from '../dist.ts';
import { buildPauseImage, CGROUP_PARENT, PrivateNode } from './node.ts';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const NET = 'cnikit';
ensureBuilt();
const scratch = mkdtempSync(join(tmpdir(), 'cnikit-cri-gc-'));
const node = new PrivateNode(join(scratch, 'node'));
const p = node.paths;
const store = join(p.varLibCni, 'networks', NET);
const results = join(p.varLibCni, 'results');
const cnikit = join(p.binDir, 'cnikit');

/** The reservation files and cached results on the node, name → content. */
function state(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const d of [store, results])
    for (const f of readdirSync(d)) {
      // a GC running beside (the service's periodic one) may remove a file between the listing and the read
      let text: string;
      try {
        text = readFileSync(join(d, f), 'utf8');
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue;
        throw e;
      }
      out[`${d === store ? `networks/${NET}` : 'results'}/${f}`] = text;
    }
  return out;
}

/** The files of sandbox `id`: its reservation(s) and its cached result. */
function filesOf(id: string): Record<string, string> {
  return Object.fromEntries(
    Object.entries(state()).filter(
      ([name, text]) => text.startsWith(`${id}\r\n`) || name === `results/${NET}-${id}-eth0`,
    ),
  );
}

/** Put files back (as a reboot leaves them: old, written before the runtime lost the sandbox). */
function restore(files: Record<string, string>): void {
  const old = new Date(Date.now() - 3600_000);
  for (const [name, text] of Object.entries(files)) {
    const path = join(p.varLibCni, name);
    writeFileSync(path, text);
    utimesSync(path, old, old);
  }
}

function gc(args: string[]) {
  return node.exec('env', [
    `NETCONFPATH=${p.confDir}`,
    `CNI_PATH=${p.binDir}`,
    cnikit,
    'tool',
    'gc',
    ...args,
  ]);
}

const pods: Record<'ready' | 'notready' | 'gone1' | 'gone2', string> = {
  ready: '',
  notready: '',
  gone1: '',
  gone2: '',
};
let leaked: Record<string, string> = {};
const ORPHAN = 'f'.repeat(64);
let kept: Record<string, string> = {};

before(async () => {
  const pause = buildPauseImage(join(scratch, 'pause'), join(HERE, 'pause.c'));
  await node.start(pause);
  copyFileSync(join(DIST, 'cnikit'), cnikit);
  chmodSync(cnikit, 0o755);
  for (const n of ['loopback', 'bridge', 'host-local']) linkSync(cnikit, join(p.binDir, n));
  writeFileSync(
    join(p.confDir, '10-cnikit.conflist'),
    JSON.stringify({
      cniVersion: '1.0.0',
      name: NET,
      plugins: [
        {
          type: 'bridge',
          bridge: 'cni0',
          isGateway: true,
          ipam: { type: 'host-local', ranges: [[{ subnet: '10.244.0.0/24' }]] },
        },
      ],
    }),
  );
  await node.networkReady();
  for (const k of Object.keys(pods) as (keyof typeof pods)[])
    pods[k] = await node.cri.runPodSandbox({
      name: k,
      uid: `uid-${k}`,
      namespace: 'default',
      cgroupParent: CGROUP_PARENT,
    });
  // a reboot: containerd still lists the sandbox (NOTREADY) and the reservation stays until kubelet removes it
  const notready = filesOf(pods.notready);
  assert.equal(Object.keys(notready).length, 2, JSON.stringify(notready));
  await node.cri.stopPodSandbox(pods.notready);
  restore(notready);
  assert.deepEqual(filesOf(pods.notready), notready);
  // gone: the runtime lost the sandbox, its reservation and cached result stay behind
  leaked = { ...filesOf(pods.gone1), ...filesOf(pods.gone2) };
  assert.equal(Object.keys(leaked).length, 4, JSON.stringify(leaked));
  // and a reservation without a cached result (only the plugins' GC can release it)
  leaked[`networks/${NET}/10.244.0.200`] = `${ORPHAN}\r\neth0`;
  for (const id of [pods.gone1, pods.gone2]) {
    await node.cri.stopPodSandbox(id);
    await node.cri.removePodSandbox(id);
  }
  restore(leaked);
  kept = { ...filesOf(pods.ready), ...filesOf(pods.notready) };
  assert.equal(Object.keys(kept).length, 4, JSON.stringify(kept));
});

after(async () => {
  await node.stop();
  rmSync(scratch, { recursive: true, force: true });
});

const addrOf = (files: Record<string, string>, id: string) =>
  Object.keys(files)
    .filter((n) => n.startsWith(`networks/${NET}/`) && files[n]?.startsWith(id))
    .map((n) => n.slice(`networks/${NET}/`.length));

describe('gc --from-cri on containerd 1.6', () => {
  test('the CRI lists the sandboxes READY and NOTREADY; --dry-run names the vanished ones only, changes nothing', () => {
    const before = state();
    const r = gc(['--from-cri', p.socket, '--dry-run']);
    assert.equal(r.status, 0, r.stderr);
    const lines = r.stdout.trim().split('\n');
    assert.equal(lines[0], '2 pod sandbox(es) from runtime.v1.RuntimeService');
    const expected = [
      ...[pods.gone1, pods.gone2].flatMap((id) => [
        `would release cached attachment of ${id} eth0 (network ${NET})`,
        ...addrOf(leaked, id).map((a) => `would release address ${a} of ${id} eth0 (network ${NET})`),
      ]),
      `would release address 10.244.0.200 of ${ORPHAN} eth0 (network ${NET})`,
    ];
    assert.deepEqual(lines.slice(1).sort(), expected.sort());
    assert.deepEqual(state(), before);
  });

  test('an unreachable runtime: exit 1, the reason, nothing released', () => {
    const before = state();
    const r = gc(['--from-cri', join(p.root, 'no-such.sock')]);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /cnitool: cannot reach the CRI runtime at .*no-such\.sock: ENOENT/);
    assert.deepEqual(state(), before);
  });

  test("the real run releases exactly the vanished sandboxes' addresses and results; the others keep theirs", () => {
    const r = gc(['--from-cri', p.socket]);
    assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
    assert.equal(r.stdout.split('\n').filter((l) => l.startsWith('released ')).length, 5, r.stdout);
    const after = state();
    for (const name of Object.keys(leaked)) assert.equal(after[name], undefined, `${name} released`);
    for (const [name, text] of Object.entries(kept)) assert.equal(after[name], text, `${name} kept`);
    // a second run finds nothing
    const again = gc(['--from-cri', p.socket]);
    assert.equal(again.status, 0);
    assert.match(again.stdout, new RegExp(`nothing to release \\(network ${NET}\\)`));
  });

  test("the warm service's periodic GC releases a new leak and counts it in its metrics", async () => {
    restore(leaked);
    const log = await node.startServe(cnikit, {
      CNIKIT_GC_INTERVAL: '1s',
      CNIKIT_CRI_SOCKET: p.socket,
      NETCONFPATH: p.confDir,
      CNI_PATH: p.binDir,
    });
    try {
      await eventually(
        () => Object.keys(leaked).every((n) => state()[n] === undefined),
        'the periodic GC released the leaked files',
        20_000,
      ).catch((e) => {
        throw new Error(`${(e as Error).message}\n${readFileSync(log, 'utf8').slice(-3000)}`);
      });
      for (const [name, text] of Object.entries(kept)) assert.equal(state()[name], text, `${name} kept`);
      const scrape = () =>
        new Promise<string>((resolve, reject) => {
          const req = request(
            { socketPath: node.nodeFsPath('/run/cnikit/metrics.sock'), path: '/metrics' },
            (res) => {
              let b = '';
              res.on('data', (d) => (b += d));
              res.on('end', () => resolve(b));
            },
          );
          req.on('error', reject);
          req.end();
        });
      // the GC child releases the files before it exits and the service counts the run: under load the metrics
      // can lag the files by a moment
      let text = await scrape();
      for (let i = 0; !/^cnikit_serve_gc_runs_total\{result="ok"\} [1-9]/m.test(text); i++) {
        assert.ok(i < 100, `no GC run counted 20 s after the files were released:\n${text}`);
        await sleep(200);
        text = await scrape();
      }
      assert.match(text, /^cnikit_serve_gc_released_total\{kind="host-local"\} 3$/m);
      assert.match(text, /^cnikit_serve_gc_released_total\{kind="cache"\} 2$/m);
      assert.match(text, /^cnikit_serve_gc_runs_total\{result="error"\} 0$/m);
      assert.match(text, /^cnikit_serve_gc_sandboxes 2$/m);
      const ok = Number(/^cnikit_serve_gc_runs_total\{result="ok"\} (\d+)$/m.exec(text)?.[1]);
      assert.ok(ok >= 1, text);
    } finally {
      await node.stopServe();
    }
  });
});
