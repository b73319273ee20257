// The kernel lab's command (scripts/vm.mjs): one VM boot checks everything the promise says: Debian's kernel, root,
// the current directory, the environment, stdout and stderr apart, the exit status, the host's files readable,
// writes that stay in the VM, and namespaces plus the link types this machine's kernel lacks.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { PassThrough } from 'node:stream';
import { after, test } from 'node:test';
// @ts-expect-error: a plain ES module without types
import { runInVm } from './vm.mjs';

const root = new URL('..', import.meta.url).pathname;
// a directory of the repository's (the VM sees the host's /tmp too, copy-on-write like every other path)
mkdirSync(join(root, 'node_modules', '.cache'), { recursive: true });
const dir = mkdtempSync(join(root, 'node_modules', '.cache', 'vm-test-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const hostTmpLink = join(tmpdir(), `${basename(dir)}-link`);

test('npm run vm -- <command>: kernel, cwd, env, streams, exit status, read-only host, namespaces', () => {
  writeFileSync(join(dir, 'from-host'), 'host content\n');
  const script = [
    'uname -r',
    'id -u',
    'pwd',
    'echo "env=$CNIKIT_VM_TEST_VALUE"',
    'cat from-host',
    'echo changed > from-host && echo new > created && cat from-host created',
    // /tmp is on the repository's mount (the host's /tmp, copy-on-write): a hard link into it works as on the host
    `ln created ${hostTmpLink} && cat ${hostTmpLink}`,
    'echo "to stderr" >&2',
    'ip netns add vmt && ip -n vmt link add d0 type dummy && ip -n vmt link add link d0 name d0.5 type vlan id 5',
    'ip -n vmt link add d1 type dummy && ip -n vmt link add link d0 name m0 type macvlan',
    'ip -n vmt link add link d1 name i0 type ipvlan && ip -n vmt link add v0 type vrf table 10',
    'ip -n vmt -br link show | cut -d" " -f1 | LC_ALL=C sort | tr "\\n" " "; echo',
    'exit 7',
  ].join('\n');
  const r = spawnSync(process.execPath, [join(root, 'scripts', 'vm.mjs'), 'sh', '-c', script], {
    cwd: dir,
    encoding: 'utf8',
    env: { ...process.env, CNIKIT_VM_TEST_VALUE: "a 'quoted' $value" },
    timeout: 15 * 60_000,
  });
  assert.equal(r.status, 7, `stdout:\n${r.stdout}\nstderr:\n${r.stderr}`);
  const lines = r.stdout.split('\n');
  assert.match(lines[0]!, /^6\.1\.\d+-\d+-amd64$/, "Debian's 6.1 kernel");
  assert.deepEqual(lines.slice(1, 9), [
    '0',
    dir,
    "env=a 'quoted' $value",
    'host content',
    'changed',
    'new',
    'new',
    'd0 d0.5@d0 d1 i0@d1 lo m0@d0 v0 ',
  ]);
  assert.equal(r.stderr, 'to stderr\n');
  // nothing the VM wrote reached the host
  assert.equal(readFileSync(join(dir, 'from-host'), 'utf8'), 'host content\n');
  assert.equal(existsSync(join(dir, 'created')), false);
  assert.equal(existsSync(hostTmpLink), false);
});

test('a command that does not exist: 127 and the shell error on stderr; no command: usage, 125', () => {
  const r = spawnSync(process.execPath, [join(root, 'scripts', 'vm.mjs'), 'cnikit-no-such-command'], {
    encoding: 'utf8',
    timeout: 15 * 60_000,
  });
  assert.equal(r.status, 127, r.stderr);
  assert.match(r.stderr, /cnikit-no-such-command/);
  const u = spawnSync(process.execPath, [join(root, 'scripts', 'vm.mjs')], { encoding: 'utf8' });
  assert.equal(u.status, 125);
  assert.match(u.stderr, /usage: npm run vm -- <command>/);
});

test('keepLinks: a tree copied into the writable layer keeps its hard links when one name is linked; without, the overlay splits them', async () => {
  for (const d of ['kept', 'plain']) {
    mkdirSync(join(dir, d));
    writeFileSync(join(dir, d, 'a'), 'exe\n');
    linkSync(join(dir, d, 'a'), join(dir, d, 'b'));
  }
  const out = new PassThrough();
  let text = '';
  out.on('data', (c: Buffer) => {
    text += c.toString();
  });
  // linking one name into /tmp makes the overlay copy it up (what bridge.test.ts does to dist-bin/ files)
  const script = `ln kept/a /tmp/${basename(dir)}-k && ln plain/a /tmp/${basename(dir)}-p && stat -c %i kept/a kept/b plain/a plain/b`;
  const status = await runInVm(['sh', '-c', script], {
    cwd: dir,
    stdout: out,
    keepLinks: [join(dir, 'kept')],
  });
  assert.equal(status, 0, text);
  const [ka, kb, pa, pb] = text.trim().split('\n');
  assert.equal(ka, kb, `kept: one file (${text})`);
  assert.notEqual(pa, pb, `plain: split by the copy-up (${text})`);
  // the host's tree is untouched: still one file under two names, no copy left beside it
  assert.equal(statSync(join(dir, 'kept', 'a')).ino, statSync(join(dir, 'kept', 'b')).ino);
  assert.equal(statSync(join(dir, 'kept', 'a')).nlink, 2);
  assert.equal(existsSync(join(dir, 'kept.cnikit-vm-links')), false);
});
