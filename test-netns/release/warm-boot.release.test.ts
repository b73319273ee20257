/**
 * Warm by default under a real systemd: the kernel lab's VM booted with this machine's systemd as
 * PID 1 (`scripts/vm.mjs --systemd`), the build installed there by `scripts/install` with no mode flag, as an operator
 * would (bench/lib/warm-boot-vm.mjs drives it inside the VM and reports the states; bench/warm-boot.ts prints its
 * figures). Checked, by state, not time:
 *
 *   - the installer found systemd running and enabled cnikit.socket: the sockets.target.wants link, the socket
 *     listening, the service not started and no `cnikit serve` process before the first call;
 *   - the first plugin call after that (bridge VERSION through the warm client) is served by the service systemd
 *     started for it: the service active and triggered by the socket, its metrics count exactly that one call, no
 *     client fell back to the cold executable; the calls after it are served by the same process;
 *   - with the service stopped (the socket still listening, as right after boot) the next call starts it again;
 *   - `scripts/install --cold` removes what the install enabled: socket disabled and stopped, its socket file, both
 *     units and the link gone, the plugin names cold; a plugin call then runs cold and starts no resident process.
 *
 * Needs dist-bin/ (npm run build) and root; about 3 min under TCG.
 */
import assert from 'node:assert/strict';
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { test } from 'node:test';
// @ts-expect-error: a plain ES module without types
import { buildTsCache, tsxEntry } from '../../scripts/ts-cache.mjs';
// @ts-expect-error: a plain ES module without types
import { runInVm } from '../../scripts/vm.mjs';
import { distBin } from '../dist.ts';

const root = join(import.meta.dirname, '..', '..');

interface State {
  socketEnabled: string;
  socketActive: string;
  serviceActive: string;
  serviceMainPid: number;
  serviceTriggeredBy: string;
  wantsLink: string | null;
  units: string[];
  socketFile: boolean;
  bridgeLinksClient: boolean;
  bridgeLinksCold: boolean;
  servePids: number[];
  fallbacks: string;
}

/**
 * The transpiled TypeScript bound over tsx's entries in the VM: `--import tsx` and the file scripts/install imports
 * (node_modules/tsx/dist/esm/index.mjs, by path so that it runs from any directory).
 */
function tsBinds(register: string): [string, string][] {
  return [
    [register, tsxEntry(root)],
    [register, join(root, 'node_modules', 'tsx', 'dist', 'esm', 'index.mjs')],
  ];
}

/** A writable that keeps what is written. */
function collector(): { stream: Writable; text: () => string } {
  let text = '';
  const stream = new Writable({
    write(chunk, _enc, done) {
      text += chunk.toString();
      done();
    },
  });
  return { stream, text: () => text };
}

test('scripts/install under a real systemd: socket enabled, the first call served by the socket-activated service, --cold removes it all', async () => {
  assert.equal(process.getuid?.(), 0, 'run as root (the kernel lab boots a VM)');
  // dist-bin fresh (rebuilt when stale), the warm client with it
  const dist = distBin();
  assert.ok(
    existsSync(join(dist, 'warm', 'cnikit-client')),
    'dist-bin/warm/cnikit-client missing: npm run build',
  );
  // a VM that never reaches the command's end is killed (the boot and the calls take 2-4 min under TCG at load 10-30)
  process.env.CNIKIT_VM_TIMEOUT ??= '900';
  const cache = await buildTsCache(root);
  const out = collector();
  const err = collector();
  let status: number;
  try {
    status = await runInVm(
      [
        'node',
        join(root, 'bench', 'lib', 'warm-boot-vm.mjs'),
        '--repo',
        root,
        '--rounds',
        '3',
        '--firsts',
        '1',
      ],
      { cwd: root, systemd: true, stdout: out.stream, stderr: err.stream, binds: tsBinds(cache.register) },
    );
  } finally {
    rmSync(cache.dir, { recursive: true, force: true });
  }
  assert.equal(status, 0, `${out.text()}\n${err.text()}`);
  const r = JSON.parse(out.text().trim().split('\n').at(-1) as string);
  const why = JSON.stringify(r, null, 1);
  process.stderr.write(`[warm-boot] ${JSON.stringify(r.figures)} install ${r.installSeconds.toFixed(1)} s\n`);
  assert.equal(r.pid1, 'systemd', 'systemd is PID 1 in the VM');

  // the default install found systemd and enabled the socket
  assert.equal(r.install.status, 0, why);
  assert.match(
    r.install.stdout,
    /^done\. Enabling cnikit\.socket \(systemd starts the service on the first plugin call\):$/m,
  );
  assert.match(r.install.stdout, /^systemctl enable --now cnikit\.socket$/m);
  const a: State = r.afterInstall;
  assert.equal(a.socketEnabled, 'enabled', why);
  assert.equal(a.socketActive, 'active', why);
  assert.equal(a.wantsLink, '/etc/systemd/system/cnikit.socket', why);
  assert.deepEqual(a.units, ['cnikit.socket', 'cnikit.service']);
  assert.ok(a.bridgeLinksClient, 'bridge is the warm client');
  assert.equal(
    a.serviceActive,
    'inactive',
    'the install starts no service: the socket does, on the first call',
  );
  assert.deepEqual(a.servePids, [], 'no resident process before the first call');

  // the first call: systemd started the service for it, and the service served it
  const f: State = r.afterFirst;
  assert.equal(f.serviceActive, 'active', why);
  assert.equal(f.serviceTriggeredBy, 'cnikit.socket');
  assert.deepEqual(f.servePids, [f.serviceMainPid], 'one cnikit serve: the service systemd started');
  assert.equal(r.afterFirstBridgeVersions, 1, `the service counted the first call (${why})`);
  assert.equal(f.fallbacks, '', 'no client fell back to the cold executable');
  // the calls after it: the same process
  assert.equal(r.afterRoundsBridgeVersions, 1 + r.figures.rounds);
  assert.deepEqual(r.afterRounds.servePids, [f.serviceMainPid]);
  assert.equal(r.afterRounds.fallbacks, '');
  // the service stopped, the socket listening: the next call starts it again
  for (const x of r.restarts) assert.deepEqual(x, { before: 'inactive', beforePids: 0, after: 'active' });

  // --cold removes what the install enabled
  assert.equal(r.uninstall.status, 0, why);
  assert.match(r.uninstall.stdout, /^systemctl disable --now cnikit\.socket cnikit\.service$/m);
  const u: State = r.afterUninstall;
  assert.equal(u.socketActive, 'inactive', why);
  assert.equal(u.serviceActive, 'inactive', why);
  assert.equal(u.wantsLink, null);
  assert.deepEqual(u.units, []);
  assert.equal(u.socketFile, false, 'the socket file goes with the socket (RemoveOnStop)');
  assert.ok(u.bridgeLinksCold, 'bridge is the cold executable again');
  assert.deepEqual(u.servePids, []);
  // a plugin call on the cold install: served cold, no resident process started by it
  assert.deepEqual(r.afterColdCall.servePids, [], 'a plugin call never starts a resident process');
  assert.equal(r.afterColdCall.serviceActive, 'inactive');
});
