// Runs as root inside the kernel lab's VM booted with systemd as PID 1 (`node scripts/vm.mjs --systemd`), used by
// bench/warm-boot.ts (the figures) and test-netns/release/warm-boot.release.test.ts (the states). Plain JavaScript:
// no TypeScript loader to start under TCG.
//
//   node bench/lib/warm-boot-vm.mjs --repo DIR [--rounds N] [--firsts M] [--hello-ms MS]
//
// 1. `scripts/install --source DIR/dist-bin` with no mode flag — the default install, which finds systemd running
//    (/run/systemd/system) and enables cnikit.socket; the states after it: socket enabled and listening, the service
//    not started, no `cnikit serve` process;
// 2. the first plugin call (bridge VERSION through /opt/cni/bin/bridge, the warm client): systemd starts cnikit.service
//    on it (socket activation); the states after it: the service active, triggered by the socket, its metrics count
//    exactly that call, no client fell back to the cold executable;
// 3. N rounds alternating a warm call (/opt/cni/bin/bridge) and a cold call (/opt/cni/bin/cnikit named bridge, what a
//    cold install execs);
// 4. M more first calls: `systemctl stop cnikit.service` (the socket stays), then one call — the state right after
//    boot again — each beside a cold call;
// 5. `scripts/install --cold`: the socket disabled and stopped, the units and the link gone, the plugin names cold; a
//    plugin call then runs cold and leaves no resident process behind.
// Prints one JSON object on stdout.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';

const arg = (name, def) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : def;
};
const REPO = arg('repo', process.cwd());
const ROUNDS = Number(arg('rounds', '5'));
const FIRSTS = Number(arg('firsts', '2'));
const BIN = '/opt/cni/bin';
const UNITS = '/etc/systemd/system';
const SOCKET_DIR = '/run/cnikit';

const run = (cmd, args) => {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  return { status: r.status, stdout: (r.stdout ?? '').trim(), stderr: (r.stderr ?? '').trim() };
};
const systemctl = (...a) => run('systemctl', a).stdout;
const ino = (p) => (existsSync(p) ? statSync(p).ino : -1);
const linkOf = (p) => {
  try {
    return readlinkSync(p);
  } catch {
    return null;
  }
};

/** The pids whose command line is `… serve …` of a cnikit executable. */
function servePids() {
  const pids = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    let argv;
    try {
      argv = readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0');
    } catch {
      continue;
    }
    if (/cnikit$/.test(argv[0] ?? '') && argv[1] === 'serve') pids.push(Number(d));
  }
  return pids;
}

function state() {
  return {
    socketEnabled: systemctl('is-enabled', 'cnikit.socket'),
    socketActive: systemctl('is-active', 'cnikit.socket'),
    serviceActive: systemctl('is-active', 'cnikit.service'),
    serviceMainPid: Number(systemctl('show', '-p', 'MainPID', '--value', 'cnikit.service')) || 0,
    serviceTriggeredBy: systemctl('show', '-p', 'TriggeredBy', '--value', 'cnikit.service'),
    wantsLink: linkOf(join(UNITS, 'sockets.target.wants', 'cnikit.socket')),
    units: ['cnikit.socket', 'cnikit.service'].filter((u) => existsSync(join(UNITS, u))),
    socketFile: existsSync(join(SOCKET_DIR, 'cnikit.sock')),
    bridgeLinksClient: ino(join(BIN, 'bridge')) === ino(join(BIN, 'cnikit-client')),
    bridgeLinksCold: ino(join(BIN, 'bridge')) === ino(join(BIN, 'cnikit')),
    servePids: servePids(),
    fallbacks: existsSync(join(SOCKET_DIR, 'client-fallbacks'))
      ? readFileSync(join(SOCKET_DIR, 'client-fallbacks'), 'utf8')
      : '',
  };
}

/**
 * The client's wait for the service's greeting (2 s by default) stretched by the lab's time scale: under TCG the
 * service's start on the first call takes longer than 2 s, and the client would run that call cold (it does: the
 * figures of docs/warm-mode.md, "the first call after boot").
 */
const HELLO_MS = arg('hello-ms', String(Math.round(2000 * Number(process.env.CNIKIT_TEST_TIME_SCALE || 1))));

/** One bridge VERSION call through `file` (argv0 bridge); its wall time in ms. */
function call(file) {
  const t0 = performance.now();
  const r = spawnSync(file, [], {
    argv0: 'bridge',
    env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', CNI_COMMAND: 'VERSION', CNIKIT_HELLO_TIMEOUT_MS: HELLO_MS },
    input: '{"cniVersion":"1.1.0"}',
    encoding: 'utf8',
  });
  const ms = performance.now() - t0;
  if (r.status !== 0 || !/"supportedVersions"/.test(r.stdout))
    throw new Error(`${file} VERSION: exit ${r.status}: ${r.stdout}${r.stderr}`);
  return ms;
}
const warm = () => call(join(BIN, 'bridge'));
const cold = () => call(join(BIN, 'cnikit'));

const say = (what) =>
  process.stderr.write(`[warm-boot ${readFileSync('/proc/uptime', 'utf8').split(' ')[0]} s] ${what}\n`);

/** The service's Prometheus text (the metrics socket beside the plugin socket); the error's text when it fails. */
async function metrics() {
  for (let i = 0; ; i++) {
    try {
      return await metricsOnce();
    } catch (e) {
      if (i >= 4) return `error: ${e.message}`;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}
function metricsOnce() {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: join(SOCKET_DIR, 'metrics.sock'), path: '/metrics' }, (res) => {
      let body = '';
      res.on('data', (c) => {
        body += c;
      });
      res.on('end', () => resolve(body));
    });
    req.on('error', reject);
    req.end();
  });
}
const bridgeVersions = (text) =>
  Number(
    /^cnikit_serve_requests_total\{plugin="bridge",command="VERSION",result_code="0"\} (\d+)/m.exec(
      text,
    )?.[1] ?? 0,
  );

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

const out = { uptimeAtStart: Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]) };
out.pid1 = readFileSync('/proc/1/comm', 'utf8').trim();
out.loadavgStart = readFileSync('/proc/loadavg', 'utf8').trim();
out.helloMs = Number(HELLO_MS);

say('start');
// 1. the default install
let t0 = performance.now();
const inst = run(join(REPO, 'scripts', 'install'), ['--source', join(REPO, 'dist-bin')]);
out.installSeconds = (performance.now() - t0) / 1000;
out.install = inst;
out.afterInstall = state();

say(`installed in ${out.installSeconds.toFixed(1)} s`);
// 2. the first call after boot: socket activation starts the service
out.firstCallMs = warm();
out.afterFirst = state();
out.afterFirstBridgeVersions = bridgeVersions(await metrics());

say(`first call ${out.firstCallMs.toFixed(0)} ms`);
// 3. warm and cold, alternating
const warmMs = [];
const coldMs = [];
for (let i = 0; i < ROUNDS; i++) {
  coldMs.push(cold());
  warmMs.push(warm());
}
out.afterRoundsBridgeVersions = bridgeVersions(await metrics());
out.afterRounds = state();

// 4. more first calls: the service stopped, the socket listening, as after boot
const firstMs = [out.firstCallMs];
const firstColdMs = [];
const restarts = [];
for (let i = 0; i < FIRSTS; i++) {
  run('systemctl', ['stop', 'cnikit.service']);
  const before = state();
  firstColdMs.push(cold());
  firstMs.push(warm());
  const after = state();
  restarts.push({
    before: before.serviceActive,
    beforePids: before.servePids.length,
    after: after.serviceActive,
  });
}
out.restarts = restarts;
out.afterFirsts = state();

say('rounds done');
// 5. back to cold: what the install enabled goes
t0 = performance.now();
out.uninstall = run(join(REPO, 'scripts', 'install'), ['--cold', '--source', join(REPO, 'dist-bin')]);
out.uninstallSeconds = (performance.now() - t0) / 1000;
out.afterUninstall = state();
out.coldAfterUninstallMs = warm();
out.afterColdCall = state();

out.figures = {
  rounds: ROUNDS,
  firsts: firstMs.length,
  warmMedianMs: median(warmMs),
  coldMedianMs: median(coldMs),
  firstMedianMs: median(firstMs),
  firstColdMedianMs: median(firstColdMs.length ? firstColdMs : coldMs),
  warmMs,
  coldMs,
  firstMs,
  firstColdMs,
};
out.journal = run('journalctl', [
  '-u',
  'cnikit.service',
  '-u',
  'cnikit.socket',
  '--no-pager',
  '-o',
  'short-monotonic',
])
  .stdout.split('\n')
  .slice(-40);
out.loadavgEnd = readFileSync('/proc/loadavg', 'utf8').trim();
process.stdout.write(`${JSON.stringify(out)}\n`);
