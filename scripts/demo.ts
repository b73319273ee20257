/**
 * `npm run demo`: two containers on a bridge, attached through the compiled plugins exactly as a runtime would.
 *
 *   1. installs dependencies if needed (`npm ci`) and builds dist-bin/ (incremental; instant when up to date);
 *   2. creates a private "host" network namespace and two container namespaces (nothing happens in the machine's
 *      own namespace: the bridge lives in the private host namespace, IPAM state and the result cache in a temp dir);
 *   3. attaches each container with the `lo` network (loopback) and the `demo` network (bridge + host-local),
 *      printing every plugin's result;
 *   4. shows the addresses and runs a TCP exchange between the containers (a small Node echo server in one
 *      container, a client in the other, each started with `ip netns exec`);
 *   5. detaches (DEL in reverse order) and removes everything — also when a step fails or on Ctrl-C.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(fileURLToPath(new URL('.', import.meta.url)), '..');
const DIST = join(ROOT, 'dist-bin');
const SUBNET = '10.22.0.0/24';
const BRIDGE = 'cnidemo0';
const PORT = 7777;

const bold = (s: string) => (process.stdout.isTTY ? `\x1b[1m${s}\x1b[0m` : s);
const say = (s = '') => process.stdout.write(`${s}\n`);
const step = (s: string) => say(`\n${bold(`==> ${s}`)}`);

function sh(cmd: string, args: string[], opts: { check?: boolean; input?: string } = {}): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', input: opts.input ?? '', timeout: 60_000 });
  if (r.error) throw r.error;
  if ((opts.check ?? true) && r.status !== 0)
    throw new Error(`${cmd} ${args.join(' ')} failed: ${r.stderr.trim()}`);
  return r.stdout;
}

function ensureBuilt(): void {
  if (!existsSync(join(ROOT, 'node_modules', '.bin', 'esbuild'))) {
    step('installing dependencies (npm ci)');
    const r = spawnSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: ROOT, stdio: 'inherit' });
    if (r.status !== 0) throw new Error('npm ci failed');
  }
  step('building the plugins (npm run build; incremental)');
  const r = spawnSync('npm', ['run', '--silent', 'build'], {
    cwd: ROOT,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  if (r.status !== 0) throw new Error('npm run build failed');
  for (const p of ['loopback', 'bridge', 'host-local']) {
    if (!existsSync(join(DIST, p)))
      throw new Error(`dist-bin/${p} was not built (is plugins/${p} complete?)`);
  }
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error('the demo creates network namespaces: run it as root');
  ensureBuilt();
  // Imported after the build so that a fresh clone gets its dependencies first.
  const { createNamedNetns, deleteNamedNetns, enterNetns } = await import('@cnikit/testing');
  const { CniConfig, confListFromObject } = await import('@cnikit/libcni');

  // What "as it was" means, checked at the end: the machine's own links, addresses and routes, and our namespaces gone.
  const machineState = () =>
    [
      sh('ip', ['-br', 'link', 'show']),
      sh('ip', ['-br', 'addr', 'show']),
      sh('ip', ['route', 'show', 'table', 'all']),
    ].join('\n');
  const before = machineState();
  const work = mkdtempSync(join(tmpdir(), 'cnikit-demo-'));
  const namespaces: Array<{ name: string; path: string }> = [];
  const children: ChildProcess[] = [];
  const attached: Array<() => Promise<void>> = [];
  // the plugins run as processes from this thread, moved into the private host namespace (like on a node)
  let inHost: { restore(): void } | undefined;
  let cleaned = false;
  const cleanup = async () => {
    if (cleaned) return;
    cleaned = true;
    step('tearing down');
    for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
    for (const detach of attached.reverse()) {
      try {
        await detach();
      } catch (err) {
        say(`  DEL failed (continuing): ${(err as Error).message}`);
      }
    }
    inHost?.restore();
    for (const ns of namespaces.reverse()) {
      try {
        deleteNamedNetns(ns);
        say(`  removed namespace ${ns.name}`);
      } catch (err) {
        say(`  could not remove ${ns.name}: ${(err as Error).message}`);
      }
    }
    rmSync(work, { recursive: true, force: true });
    say(`  removed ${work}`);
  };
  const onSignal = (sig: NodeJS.Signals) => {
    void cleanup().finally(() => process.kill(process.pid, sig));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  try {
    step('creating a private host namespace and two container namespaces');
    const host = createNamedNetns('cnikit-demo-host');
    namespaces.push(host);
    const ctrs = [createNamedNetns('cnikit-demo-a'), createNamedNetns('cnikit-demo-b')];
    namespaces.push(...ctrs);
    for (const c of ctrs) sh('ip', ['-n', c.name, 'link', 'set', 'lo', 'down']); // loopback will bring it up
    say(`  host: ${host.path}\n  containers: ${ctrs.map((c) => c.path).join(', ')}`);

    inHost = enterNetns(host.path);
    const rt = new CniConfig({ path: [DIST], cacheDir: join(work, 'cache'), inProcess: false });
    const loNet = { cniVersion: '1.0.0', name: 'lo', plugins: [{ type: 'loopback' }] };
    const demoNet = {
      cniVersion: '1.0.0',
      name: 'demo',
      plugins: [
        {
          type: 'bridge',
          bridge: BRIDGE,
          isGateway: true,
          ipMasq: false,
          ipam: {
            type: 'host-local',
            ranges: [[{ subnet: SUBNET }]],
            routes: [{ dst: '0.0.0.0/0' }],
            dataDir: join(work, 'ipam'),
          },
        },
      ],
    };
    say(`\n  network config list "demo":\n${JSON.stringify(demoNet, null, 2).replace(/^/gm, '    ')}`);

    const ips: string[] = [];
    for (const [i, c] of ctrs.entries()) {
      const conf = { containerId: `demo-${i === 0 ? 'a' : 'b'}`, netns: c.path, ifName: 'eth0' };
      for (const net of [loNet, demoNet]) {
        step(`ADD ${net.name} → container ${conf.containerId}`);
        const list = confListFromObject(net);
        // each list has one plugin: its result is the list's result (cached by the runtime for DEL)
        const result = await rt.addNetworkListRaw(list, conf);
        const type = net.plugins[0]?.type ?? '?';
        say(`  ${bold(type)} result:\n${JSON.stringify(result, null, 2).replace(/^/gm, '    ')}`);
        attached.push(async () => {
          await rt.delNetworkList(list, conf);
          say(`  DEL ${net.name} ← ${conf.containerId}: ok`);
        });
        if (net === demoNet) {
          const addr = (JSON.parse(JSON.stringify(result)) as { ips?: Array<{ address: string }> }).ips?.[0]
            ?.address;
          if (!addr) throw new Error('bridge returned no address');
          ips.push(addr.split('/')[0] as string);
        }
      }
    }

    step('addresses');
    for (const c of ctrs)
      say(`  ${c.name}:\n${sh('ip', ['-n', c.name, '-br', 'addr', 'show']).replace(/^/gm, '    ')}`);
    say(
      `  host namespace (bridge):\n${sh('ip', ['-n', host.name, '-br', 'addr', 'show', 'dev', BRIDGE]).replace(/^/gm, '    ')}`,
    );

    step(`TCP exchange: echo server in ${ctrs[1]?.name} (${ips[1]}:${PORT}), client in ${ctrs[0]?.name}`);
    const server = spawn(
      'ip',
      [
        'netns',
        'exec',
        ctrs[1]?.name as string,
        process.execPath,
        '-e',
        `const net = require('node:net');
         const srv = net.createServer((s) => s.on('data', (d) => { s.end('echo from ' + process.argv[1] + ': ' + d); srv.close(); }));
         srv.listen(${PORT}, process.argv[2], () => console.log('listening'));
         setTimeout(() => process.exit(2), 20000).unref();`,
        ctrs[1]?.name as string,
        ips[1] as string,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    children.push(server);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('echo server did not start')), 15_000);
      server.stdout?.on('data', (d: Buffer) => {
        if (d.toString().includes('listening')) {
          clearTimeout(timer);
          resolve();
        }
      });
      server.on('exit', (code) => reject(new Error(`echo server exited (${code})`)));
    });
    const reply = sh('ip', [
      'netns',
      'exec',
      ctrs[0]?.name as string,
      process.execPath,
      '-e',
      `const s = require('node:net').connect(${PORT}, process.argv[1], () => s.write('hello from ' + process.argv[2]));
       let buf = ''; s.on('data', (d) => buf += d); s.on('end', () => { console.log(buf); process.exit(0); });
       s.on('error', (e) => { console.error(e.message); process.exit(1); });
       setTimeout(() => { console.error('timeout'); process.exit(1); }, 10000);`,
      ips[1] as string,
      `${ctrs[0]?.name} (${ips[0]})`,
    ]).trim();
    say(`  client sent: hello from ${ctrs[0]?.name} (${ips[0]})`);
    say(`  client got:  ${reply}`);
    if (!reply.startsWith('echo from')) throw new Error(`unexpected reply ${JSON.stringify(reply)}`);
  } finally {
    await cleanup();
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
  }
  const left = sh('ip', ['netns', 'list'])
    .split('\n')
    .filter((l) => namespaces.some((n) => l.startsWith(n.name)));
  if (left.length) throw new Error(`namespaces left behind: ${left.join(', ')}`);
  if (machineState() !== before) {
    // Other software may change the machine meanwhile; say so rather than claim a clean state.
    say('  note: the root namespace links/addresses/routes changed during the demo (by other software?)');
  }
  step('done: the machine is as it was');
}

main().catch((err: Error) => {
  process.stderr.write(`\ndemo failed: ${err.message}\n`);
  process.exitCode = 1;
});
