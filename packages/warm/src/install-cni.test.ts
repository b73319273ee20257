// cnikit install-cni on a real filesystem (temporary directories only): layout, template rendering, ownership,
// idempotence, uninstall, --watch with a ConfigMap-style ..data symlink swap, replacement under a running process.
// biome-ignore-all lint/suspicious/noTemplateCurlyInString: the template syntax ${NAME} is the subject here
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { CLIENT_FILE, COLD_FILE } from './build-client.ts';
import { TOOL_FILE } from './install.ts';
import {
  checkInstalled,
  type InstallCniOptions,
  installCni,
  installCniMain,
  parseInstallCniArgs,
  RECORD_FILE,
  renderTemplate,
  uninstallCni,
  watchTemplate,
} from './install-cni.ts';

const base = mkdtempSync(join(tmpdir(), 'cnikit-install-cni-'));
after(() => rmSync(base, { recursive: true, force: true }));
let n = 0;
const PLUGINS = ['bridge', 'host-local', 'loopback', 'portmap'];
const TEMPLATE = `{
  "cniVersion": "1.0.0",
  "name": "k8s-pod-network",
  "plugins": [
    { "type": "bridge", "bridge": "cni0", "mtu": \${MTU:-1500}, "ipam": { "type": "host-local",
      "ranges": [[{ "subnet": "\${POD_CIDR}" }]] } },
    { "type": "portmap", "capabilities": { "portMappings": true }, "node": "\${NODE_NAME}" }
  ]
}
`;
const ENV = { NODE_NAME: 'node-a', POD_CIDR: '10.244.1.0/24' };

function image(exe = 'exe-v1', client = 'client-v1'): { exe: string; client: string } {
  const dir = join(base, `img-${n++}`);
  mkdirSync(dir);
  writeFileSync(join(dir, 'cnikit'), exe, { mode: 0o755 });
  writeFileSync(join(dir, 'cnikit-client'), client, { mode: 0o755 });
  return { exe: join(dir, 'cnikit'), client: join(dir, 'cnikit-client') };
}

function opts(extra: Partial<InstallCniOptions> = {}): InstallCniOptions & { lines: string[] } {
  const host = join(base, `host-${n++}`);
  const tdir = join(host, 'cm');
  mkdirSync(tdir, { recursive: true });
  writeFileSync(join(tdir, '10-cnikit.conflist'), TEMPLATE);
  const lines: string[] = [];
  return {
    mode: 'warm',
    ...image(),
    plugins: PLUGINS,
    binDir: join(host, 'opt/cni/bin'),
    confDir: join(host, 'etc/cni/net.d'),
    template: join(tdir, '10-cnikit.conflist'),
    confName: '10-cnikit.conflist',
    env: ENV,
    dryRun: false,
    out: (l) => lines.push(l),
    lines,
    ...extra,
  };
}

const ino = (p: string) => statSync(p).ino;

test('the installed names are those of the build and scripts/install', () => {
  const o = opts();
  installCni({ ...o, plugins: [] });
  assert.deepEqual(readdirSync(o.binDir).sort(), [RECORD_FILE, CLIENT_FILE, COLD_FILE, TOOL_FILE].sort());
});

describe('renderTemplate', () => {
  test('substitutes, applies defaults and JSON-escapes values', () => {
    assert.equal(renderTemplate('"${A}" ${B:-7} ${C:-x}', { A: 'q"\\\n', C: 'set' }), '"q\\"\\\\\\n" 7 set');
  });
  test('an unset or empty variable without default is an error naming every one', () => {
    assert.throws(
      () => renderTemplate('${A} ${B} ${C}', { B: '', C: 'ok' }),
      /\$\{A\}: environment variable A is not set; \$\{B\}: environment variable B is empty; nothing was written/,
    );
  });
  test('malformed references are errors', () => {
    assert.throws(() => renderTemplate('${1X}', {}), /\$\{1X\} is not a variable reference/);
    assert.throws(() => renderTemplate('x ${A', { A: 'v' }), /unterminated \$\{ at offset 2/);
  });
});

describe('installCni', () => {
  test('warm: copies, links, writes the conflist with substitutions, records ownership', () => {
    const o = opts();
    installCni(o);
    const b = o.binDir;
    assert.equal(readFileSync(join(b, 'cnikit'), 'utf8'), 'exe-v1');
    assert.equal(readFileSync(join(b, 'cnikit-client'), 'utf8'), 'client-v1');
    for (const p of PLUGINS) assert.equal(ino(join(b, p)), ino(join(b, 'cnikit-client')), p);
    assert.equal(ino(join(b, 'cnitool')), ino(join(b, 'cnikit')));
    assert.equal(statSync(join(b, 'cnikit')).mode & 0o777, 0o755);
    const conf = JSON.parse(readFileSync(join(o.confDir, '10-cnikit.conflist'), 'utf8'));
    assert.equal(conf.plugins[0].mtu, 1500);
    assert.equal(conf.plugins[0].ipam.ranges[0][0].subnet, '10.244.1.0/24');
    assert.equal(conf.plugins[1].node, 'node-a');
    const record = JSON.parse(readFileSync(join(b, RECORD_FILE), 'utf8'));
    assert.deepEqual(
      Object.keys(record.files).sort(),
      [...PLUGINS, 'cnikit', 'cnikit-client', 'cnitool'].sort(),
    );
    assert.deepEqual(Object.keys(record.conf), ['../../../etc/cni/net.d/10-cnikit.conflist']);
    // no temporary file left behind
    assert.deepEqual(
      readdirSync(b).filter((f) => f.startsWith('.cnikit-tmp')),
      [],
    );
    assert.ok(checkInstalled(b).ok);
  });

  test('the conflist is written last: its mtime is not older than any binary', () => {
    const o = opts();
    installCni(o);
    const conf = statSync(join(o.confDir, '10-cnikit.conflist')).mtimeMs;
    for (const f of readdirSync(o.binDir)) assert.ok(statSync(join(o.binDir, f)).mtimeMs <= conf, f);
  });

  test('idempotent: a second run changes nothing and says so', () => {
    const o = opts();
    installCni(o);
    const before = ino(join(o.binDir, 'cnikit'));
    o.lines.length = 0;
    const changes = installCni(o);
    assert.ok(changes.every((c) => c.action === 'unchanged'));
    assert.equal(o.lines.at(-1), 'no changes');
    assert.equal(ino(join(o.binDir, 'cnikit')), before);
  });

  test('a missing variable: clear error and nothing written at all', () => {
    const o = opts({ env: { NODE_NAME: 'node-a' } });
    assert.throws(() => installCni(o), /environment variable POD_CIDR is not set; nothing was written/);
    assert.equal(existsSync(o.binDir), false);
    assert.equal(existsSync(o.confDir), false);
  });

  test('a value that would break the JSON cannot: it is escaped', () => {
    const o = opts({ env: { ...ENV, NODE_NAME: 'x", "type": "evil' } });
    installCni(o);
    const conf = JSON.parse(readFileSync(join(o.confDir, '10-cnikit.conflist'), 'utf8'));
    assert.equal(conf.plugins[1].node, 'x", "type": "evil');
    assert.equal(conf.plugins[1].type, 'portmap');
  });

  test('a template that is not a conflist after substitution is refused, nothing written', () => {
    const o = opts({ env: { ...ENV, MTU: 'big' } });
    assert.throws(() => installCni(o), /not valid JSON after substitution/);
    assert.equal(existsSync(o.binDir), false);
    const o2 = opts();
    writeFileSync(o2.template as string, '{"cniVersion":"1.0.0","name":"x","plugins":[]}');
    assert.throws(() => installCni(o2), /"plugins" must be a non-empty list/);
  });

  test('upgrade: new content replaces the old atomically, links follow; cold mode relinks and keeps the client', () => {
    const o = opts();
    installCni(o);
    const v2 = image('exe-v2', 'client-v2');
    o.lines.length = 0;
    installCni({ ...o, ...v2 });
    assert.equal(readFileSync(join(o.binDir, 'bridge'), 'utf8'), 'client-v2');
    assert.ok(
      o.lines.some((l) => /write +.*cnikit: copy .*replaces the previous install/.test(l)),
      o.lines.join('\n'),
    );
    installCni({ ...o, ...v2, mode: 'cold' });
    assert.equal(readFileSync(join(o.binDir, 'bridge'), 'utf8'), 'exe-v2');
    // the installed cnikit can go warm again by itself: its client stays beside it, recorded as ours
    assert.equal(readFileSync(join(o.binDir, 'cnikit-client'), 'utf8'), 'client-v2');
    assert.equal(checkInstalled(o.binDir).ok, true, JSON.stringify(checkInstalled(o.binDir).problems));
  });

  test('cold on a fresh node installs the client too (not linked); without a client in the image, cold still works', () => {
    const o = { ...opts(), mode: 'cold' as const };
    installCni(o);
    assert.equal(readFileSync(join(o.binDir, 'cnikit-client'), 'utf8'), 'client-v1');
    for (const p of PLUGINS) assert.equal(ino(join(o.binDir, p)), ino(join(o.binDir, 'cnikit')), p);
    uninstallCni({ binDir: o.binDir, dryRun: false, out: () => {} });
    assert.equal(existsSync(join(o.binDir, 'cnikit-client')), false, 'uninstall removes it: ours');
    const o2 = { ...opts(), mode: 'cold' as const, client: join(base, 'no-such-client') };
    installCni(o2);
    assert.equal(existsSync(join(o2.binDir, 'cnikit-client')), false);
    assert.equal(readFileSync(join(o2.binDir, 'bridge'), 'utf8'), 'exe-v1');
  });

  test('a foreign file in the bin dir is left alone; one we replace is reported', () => {
    const o = opts();
    mkdirSync(o.binDir, { recursive: true });
    writeFileSync(join(o.binDir, 'calico'), 'theirs');
    writeFileSync(join(o.binDir, 'bridge'), 'go-bridge');
    installCni(o);
    assert.ok(
      o.lines.some((l) =>
        /bridge: hard link to cnikit-client \(replaces a file install-cni did not write\)/.test(l),
      ),
    );
    uninstallCni(o);
    assert.equal(readFileSync(join(o.binDir, 'calico'), 'utf8'), 'theirs');
    assert.deepEqual(readdirSync(o.binDir), ['calico']);
  });
});

test('--run-dir: the service directory is created or made 0700 (hostPath creates it 0755)', () => {
  const o = opts();
  const run = join(base, `run-${n++}`);
  mkdirSync(run, { mode: 0o755 });
  chmodSync(run, 0o755);
  installCni({ ...o, runDir: run });
  assert.equal(statSync(run).mode & 0o7777, 0o700);
  assert.ok(o.lines.some((l) => l.includes('service directory: mode 0755 uid 0 -> 0700 uid 0')));
  o.lines.length = 0;
  installCni({ ...o, runDir: run });
  assert.equal(o.lines.at(-1), 'no changes');
  const fresh = join(base, `run-${n++}`, 'cnikit');
  installCni({ ...o, runDir: fresh });
  assert.equal(statSync(fresh).mode & 0o7777, 0o700);
  writeFileSync(join(base, `file-${n}`), '');
  assert.throws(() => installCni({ ...o, runDir: join(base, `file-${n}`) }), /exists and is not a directory/);
});

test('the record reads the same from the init container (/host/...) and from the host (readiness, uninstall)', () => {
  const o = opts();
  const root = join(base, `view-${n++}`);
  const inPod = { binDir: join(root, 'host/opt/cni/bin'), confDir: join(root, 'host/etc/cni/net.d') };
  installCni({ ...o, ...inPod });
  // the host sees the same tree without the /host prefix
  renameSync(join(root, 'host'), join(root, 'node'));
  const hostBin = join(root, 'node/opt/cni/bin');
  assert.deepEqual(checkInstalled(hostBin), { ok: true, problems: [] });
  const confPath = join(root, 'node/etc/cni/net.d/10-cnikit.conflist');
  writeFileSync(confPath, '{"changed":1}');
  assert.match(checkInstalled(hostBin).problems.join('\n'), /10-cnikit\.conflist differs/);
  writeFileSync(join(hostBin, 'cnikit'), 'exe-v1-but-longer');
  assert.match(checkInstalled(hostBin).problems.join('\n'), /cnikit differs/);
  rmSync(confPath);
  assert.match(checkInstalled(hostBin).problems.join('\n'), /10-cnikit\.conflist is missing/);
  uninstallCni({ ...o, binDir: hostBin });
  assert.deepEqual(
    readdirSync(hostBin).sort(),
    ['cnikit', 'cnitool'],
    'the changed file (and its link) stays',
  );
});

describe('uninstallCni', () => {
  test('removes only its own, unchanged files; idempotent', () => {
    const o = opts();
    installCni(o);
    writeFileSync(join(o.binDir, 'other'), 'x');
    writeFileSync(join(o.confDir, '05-other.conflist'), '{}');
    // a conflist changed by someone else since is not ours to remove
    const confPath = join(o.confDir, '10-cnikit.conflist');
    writeFileSync(confPath, '{"edited":true}');
    o.lines.length = 0;
    uninstallCni(o);
    assert.deepEqual(readdirSync(o.binDir), ['other']);
    assert.equal(readFileSync(confPath, 'utf8'), '{"edited":true}');
    assert.ok(o.lines.some((l) => /keep +.*10-cnikit.conflist: changed since install-cni wrote it/.test(l)));
    assert.ok(existsSync(join(o.confDir, '05-other.conflist')));
    o.lines.length = 0;
    uninstallCni(o);
    assert.equal(o.lines.at(-1), 'no changes');
  });

  test('dry run changes nothing', () => {
    const o = opts();
    installCni(o);
    const before = readdirSync(o.binDir).sort();
    uninstallCni({ ...o, dryRun: true });
    assert.deepEqual(readdirSync(o.binDir).sort(), before);
  });
});

describe('replacement under a running process', () => {
  test('the old binary keeps running while it is replaced: no ETXTBSY, readers never see a partial file', async () => {
    const o = opts();
    // a real executable as "cnikit": /bin/sleep v1, then a different real executable (/bin/true padded) as v2
    const v1 = join(base, `sleep-${n++}`);
    copyFileSync('/bin/sleep', v1);
    installCni({ ...o, exe: v1, mode: 'cold' });
    const running = spawn(join(o.binDir, 'bridge'), ['1.5'], { stdio: 'ignore' });
    const exited = new Promise<number | null>((r) => running.on('exit', (c) => r(c)));
    await new Promise((r) => setTimeout(r, 200));
    const v2 = join(base, `true-${n++}`);
    const big = Buffer.concat([readFileSync('/bin/true'), Buffer.alloc(8 << 20, 7)]);
    writeFileSync(v2, big, { mode: 0o755 });
    // a reader polling the size during the install sees only the old or the new size
    const sizes = new Set<number>();
    const poll = setInterval(() => sizes.add(statSync(join(o.binDir, 'cnikit')).size), 1);
    for (let i = 0; i < 3; i++) {
      installCni({ ...o, exe: i % 2 ? v1 : v2, mode: 'cold' });
      await new Promise((r) => setTimeout(r, 5));
    }
    installCni({ ...o, exe: v2, mode: 'cold' });
    clearInterval(poll);
    sizes.add(statSync(join(o.binDir, 'cnikit')).size);
    for (const s of sizes) assert.ok(s === statSync(v1).size || s === big.length, `partial size ${s}`);
    assert.equal(await exited, 0);
    assert.ok(readFileSync(join(o.binDir, 'bridge')).equals(big));
    const t = spawn(join(o.binDir, 'bridge'), [], { stdio: 'ignore' });
    assert.equal(await new Promise((r) => t.on('exit', r)), 0);
  });
});

describe('--watch', () => {
  test('a ConfigMap ..data symlink swap rewrites the conflist; a broken template keeps the last one', async () => {
    const o = opts();
    const cm = join(base, `cm-${n++}`);
    mkdirSync(join(cm, '..2026_a'), { recursive: true });
    writeFileSync(join(cm, '..2026_a', '10-cnikit.conflist'), TEMPLATE);
    symlinkSync('..2026_a', join(cm, '..data'));
    symlinkSync('..data/10-cnikit.conflist', join(cm, '10-cnikit.conflist'));
    const w = { ...o, template: join(cm, '10-cnikit.conflist') };
    installCni(w);
    const ac = new AbortController();
    const done = watchTemplate(w, 60_000, ac.signal);
    const swap = (dir: string, text: string) => {
      mkdirSync(join(cm, dir));
      writeFileSync(join(cm, dir, '10-cnikit.conflist'), text);
      symlinkSync(dir, join(cm, '..data_tmp'));
      renameSync(join(cm, '..data_tmp'), join(cm, '..data'));
    };
    const confPath = join(o.confDir, '10-cnikit.conflist');
    const waitFor = async (pred: () => boolean) => {
      for (let i = 0; i < 100 && !pred(); i++) await new Promise((r) => setTimeout(r, 50));
      assert.ok(pred());
    };
    swap('..2026_b', TEMPLATE.replace('cni0', 'cbr1'));
    await waitFor(() => readFileSync(confPath, 'utf8').includes('cbr1'));
    swap('..2026_c', TEMPLATE.replace('${POD_CIDR}', '${NOPE}'));
    await waitFor(() => o.lines.some((l) => /NOPE is not set.*stays as it is/.test(l)));
    assert.ok(readFileSync(confPath, 'utf8').includes('cbr1'));
    ac.abort();
    await done;
  });
});

describe('CLI', () => {
  test('argument errors exit 2 with a message; --check is 1 before and 0 after an install', async () => {
    assert.throws(() => parseInstallCniArgs(['--bin-dir', 'rel']), /must be an absolute path/);
    assert.throws(
      () => parseInstallCniArgs(['--conf-name', '../x.conflist']),
      /--conf-name must be a file name/,
    );
    assert.throws(() => parseInstallCniArgs(['--watch', '--uninstall']), /--watch goes with an install only/);
    assert.throws(() => parseInstallCniArgs(['--bogus']), /unknown argument/);
    const o = opts();
    const out: string[] = [];
    const err: string[] = [];
    const ctx = {
      plugins: PLUGINS,
      execPath: o.exe,
      env: ENV,
      out: (l: string) => out.push(l),
      err: (l: string) => err.push(l),
    };
    assert.equal(await installCniMain(['--nope'], ctx), 2);
    assert.match(err.join('\n'), /unknown argument "--nope"/);
    assert.equal(await installCniMain(['--check', '--bin-dir', o.binDir], ctx), 1);
    assert.match(out.join('\n'), /not ready: nothing installed/);
    const args = ['--bin-dir', o.binDir, '--conf-dir', o.confDir, '--template', o.template as string];
    assert.equal(await installCniMain(args, ctx), 0);
    assert.ok(existsSync(join(o.binDir, 'cnikit-client')));
    out.length = 0;
    assert.equal(await installCniMain(['--check', '--bin-dir', o.binDir], ctx), 0);
    assert.match(out.join('\n'), /^ok: /);
    assert.equal(await installCniMain(['--check', '--bin-dir', o.binDir, '--socket', '/x.sock'], ctx), 1);
    assert.match(out.join('\n'), /no warm-mode service to check/);
    assert.equal(await installCniMain(['--uninstall', '--bin-dir', o.binDir], ctx), 0);
    assert.equal(existsSync(join(o.binDir, 'cnikit')), false);
  });
});
