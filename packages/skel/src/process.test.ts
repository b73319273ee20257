// runPlugin as a real process (the example plugin through tsx): fd 0/1/2 handling and exit codes.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { isatty } from 'node:tty';
import { fileURLToPath } from 'node:url';
import { devMajor, stdinIsTerminal } from './process.ts';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const example = fileURLToPath(new URL('../examples/passthrough.ts', import.meta.url));
let dir: string;

before(() => {
  dir = mkdtempSync(join(tmpdir(), `cnikit-proc-${process.pid}-`));
});
after(() => rmSync(dir, { recursive: true, force: true }));

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

function run(
  env: Record<string, string>,
  stdin: string | number | 'ignore',
  big = false,
  script = example,
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--conditions=cnikit-source', '--import', 'tsx', script], {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: [typeof stdin === 'string' && stdin !== 'ignore' ? 'pipe' : stdin, 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
    if (child.stdin) {
      child.stdin.on('error', () => undefined);
      if (big) {
        const chunk = 'x'.repeat(1 << 16);
        for (let i = 0; i < 64; i++) child.stdin.write(chunk);
      }
      child.stdin.end(typeof stdin === 'string' ? stdin : '');
    }
  });
}

const ADD = {
  CNI_COMMAND: 'ADD',
  CNI_CONTAINERID: 'c1',
  CNI_NETNS: '/nonexistent',
  CNI_IFNAME: 'eth0',
  CNI_PATH: '/opt/cni/bin',
};

describe('runPlugin in a real process', () => {
  test('ADD: result on stdout (no trailing newline), exit 0, inputs recorded', async () => {
    const rec = join(dir, 'rec.jsonl');
    const conf = {
      cniVersion: '1.0.0',
      name: 'n',
      type: 'passthrough',
      recordFile: rec,
      prevResult: { cniVersion: '1.0.0', ips: [{ address: '10.0.0.2/24' }] },
    };
    const r = await run({ ...ADD, CNI_ARGS: 'A=1' }, JSON.stringify(conf));
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.equal(
      r.stdout,
      '{\n    "cniVersion": "1.0.0",\n    "ips": [\n        {\n            "address": "10.0.0.2/24"\n        }\n    ]\n}',
    );
    const line = JSON.parse(readFileSync(rec, 'utf8').trim());
    assert.equal(line.command, 'ADD');
    assert.equal(line.args, 'A=1');
    assert.equal(line.stdin, JSON.stringify(conf));
    assert.deepEqual(line.prevResult, { cniVersion: '1.1.0', ips: [{ address: '10.0.0.2/24' }] });
  });
  test('error: JSON on stdout, exit 1', async () => {
    const r = await run({ ...ADD }, '{"name":"n","cniVersion":"7.0.0"}');
    assert.equal(r.status, 1);
    assert.equal(JSON.parse(r.stdout).code, 1);
  });
  test('stdin is a directory → code 5', async () => {
    const fd = openSync(dir, 'r');
    try {
      const r = await run(ADD, fd);
      assert.equal(r.status, 1);
      assert.deepEqual(JSON.parse(r.stdout), {
        code: 5,
        msg: 'error reading from stdin: read /dev/stdin: is a directory',
      });
    } finally {
      closeSync(fd);
    }
  });
  describe('a closed stdin is told from a /dev/null one (the runtime reopens a closed fd 0 read-write)', () => {
    // bash runs the plugin with fd 0 closed, read-only /dev/null (what Go os/exec and libuv give), or read-write
    const cases: Array<[string, string, unknown]> = [
      ['<&-', 'closed', { code: 5, msg: 'error reading from stdin: read /dev/stdin: bad file descriptor' }],
      [
        '</dev/null',
        'read-only /dev/null',
        { code: 6, msg: 'error unmarshall network config: unexpected end of JSON input' },
      ],
    ];
    for (const [redir, what, expected] of cases) {
      test(`stdin ${what} (${redir}) → code ${(expected as { code: number }).code}`, async () => {
        const r = await new Promise<Run>((resolve, reject) => {
          const child = spawn(
            'bash',
            [
              '-c',
              `exec "$@" ${redir}`,
              'bash',
              process.execPath,
              '--conditions=cnikit-source',
              '--import',
              'tsx',
              example,
            ],
            {
              cwd: root,
              env: { PATH: process.env.PATH ?? '', ...ADD },
              stdio: ['pipe', 'pipe', 'pipe'],
            },
          );
          let stdout = '';
          let stderr = '';
          child.stdout.on('data', (d) => (stdout += d));
          child.stderr.on('data', (d) => (stderr += d));
          child.on('error', reject);
          child.on('close', (status) => resolve({ status, stdout, stderr }));
          child.stdin.end();
        });
        assert.equal(r.status, 1, r.stderr);
        assert.deepEqual(JSON.parse(r.stdout), expected);
      });
    }
    test("stdin 'ignore' (libuv opens /dev/null read-only) → code 6", async () => {
      const r = await run(ADD, 'ignore');
      assert.equal(r.status, 1);
      assert.equal(JSON.parse(r.stdout).code, 6);
    });
  });
  test('VERSION: a broken stdin (even a large one) gets the current version; ends with a newline', async () => {
    const r = await run({ CNI_COMMAND: 'VERSION' }, 'garbage', true);
    assert.equal(r.status, 0);
    assert.equal(
      r.stdout,
      '{"cniVersion":"1.1.0","supportedVersions":["0.1.0","0.2.0","0.3.0","0.3.1","0.4.0","1.0.0","1.1.0"]}\n',
    );
  });
  test('VERSION answers with the cniVersion given on stdin (SPEC.md §5 VERSION Success)', async () => {
    for (const v of ['0.1.0', '0.3.1', '1.0.0']) {
      const r = await run({ CNI_COMMAND: 'VERSION' }, `{"cniVersion":"${v}"}`);
      assert.equal(r.status, 0, r.stderr);
      assert.equal(
        r.stdout,
        `{"cniVersion":"${v}","supportedVersions":["0.1.0","0.2.0","0.3.0","0.3.1","0.4.0","1.0.0","1.1.0"]}\n`,
      );
    }
  });
  test('console output from plugin code goes to stderr, never stdout', async () => {
    const file = join(dir, 'noisy.mts');
    const skel = new URL('./index.ts', import.meta.url).href;
    writeFileSync(
      file,
      `import { runPlugin } from ${JSON.stringify(skel)};
await runPlugin({
  name: 'noisy',
  add() {
    console.log('log line');
    console.info('info line');
    console.dir({ a: 1 });
    return { cniVersion: '1.1.0', ips: [{ address: '10.0.0.3/24' }] };
  },
});
`,
    );
    const r = await run(ADD, '{"cniVersion":"1.1.0","name":"n"}', false, file);
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { cniVersion: '1.1.0', ips: [{ address: '10.0.0.3/24' }] });
    assert.match(r.stderr, /log line\ninfo line\n\{ a: 1 \}/);
  });
  test('bare invocation prints the about banner to stderr only', async () => {
    const r = await run({}, 'ignore');
    assert.equal(r.status, 0);
    assert.equal(r.stdout, '');
    assert.equal(
      r.stderr,
      'cnikit passthrough example plugin\nCNI protocol versions supported: 0.1.0, 0.2.0, 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0\n',
    );
  });
});

describe('stdout on /dev/null: only a failing write means the result was not delivered', () => {
  // The caller chooses where stdout goes: a shell's >/dev/null opens it write-only, Python's subprocess.DEVNULL
  // read-write; both take the result. A read-only /dev/null makes every write fail with EBADF: the result is not
  // delivered, so ADD is rolled back (the example records the DEL) and the error is reported on stderr.
  const conf = (rec: string) =>
    JSON.stringify({
      cniVersion: '1.1.0',
      name: 'n',
      type: 'passthrough',
      recordFile: rec,
      result: { cniVersion: '1.1.0', ips: [{ address: '10.0.0.9/24' }] },
    });
  const ENV: Record<string, Record<string, string>> = {
    ADD,
    DEL: { ...ADD, CNI_COMMAND: 'DEL' },
    CHECK: { ...ADD, CNI_COMMAND: 'CHECK' },
    GC: { CNI_COMMAND: 'GC', CNI_PATH: '/opt/cni/bin' },
    STATUS: { CNI_COMMAND: 'STATUS', CNI_PATH: '/opt/cni/bin' },
    VERSION: { CNI_COMMAND: 'VERSION' },
  };
  function runOn(flags: 'r' | 'w' | 'r+', env: Record<string, string>, stdin: string): Promise<Run> {
    const out = openSync('/dev/null', flags);
    return new Promise<Run>((resolve, reject) => {
      const child = spawn(process.execPath, ['--conditions=cnikit-source', '--import', 'tsx', example], {
        cwd: root,
        env: { PATH: process.env.PATH ?? '', ...env },
        stdio: ['pipe', out, 'pipe'],
      });
      let stderr = '';
      child.stderr!.on('data', (d) => (stderr += d));
      child.on('error', reject);
      child.on('close', (status) => resolve({ status, stdout: '', stderr }));
      child.stdin!.end(stdin);
    }).finally(() => closeSync(out));
  }
  const commands = (rec: string) => {
    try {
      return readFileSync(rec, 'utf8')
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((l) => (JSON.parse(l) as { command: string }).command);
    } catch {
      return [];
    }
  };
  for (const [flags, what] of [
    ['w', "write-only (a shell's >/dev/null)"],
    ['r+', "read-write (Python's subprocess.DEVNULL)"],
  ] as const) {
    test(`${what}: every verb exits 0, ADD is not rolled back`, async () => {
      for (const cmd of Object.keys(ENV)) {
        const rec = join(dir, `devnull-${flags}-${cmd}.jsonl`);
        const r = await runOn(flags, ENV[cmd]!, conf(rec));
        assert.equal(r.status, 0, `${cmd}: ${r.stderr}`);
        assert.equal(r.stderr, '', cmd);
        assert.deepEqual(commands(rec), cmd === 'VERSION' ? [] : [cmd], cmd);
      }
    });
  }
  test('read-only: the write fails (EBADF): ADD rolled back and exit 1, VERSION exit 1, the error on stderr', async () => {
    const rec = join(dir, 'devnull-r-ADD.jsonl');
    const add = await runOn('r', ENV.ADD!, conf(rec));
    assert.equal(add.status, 1);
    assert.deepEqual(commands(rec), ['ADD', 'DEL']);
    assert.match(add.stderr, /could not write the error to stdout \(.*EBADF.*\)/);
    assert.match(add.stderr, /"msg": "failed to write the result to stdout: .*EBADF.*"/);
    assert.match(add.stderr, /"details": "the ADD was rolled back"/);
    const version = await runOn('r', ENV.VERSION!, '');
    assert.equal(version.status, 1);
    assert.match(version.stderr, /"code": 5/);
  });
  test('read-only: DEL, CHECK, GC and STATUS print nothing on success, so they succeed and never roll back', async () => {
    for (const cmd of ['DEL', 'CHECK', 'GC', 'STATUS']) {
      const rec = join(dir, `devnull-r-${cmd}.jsonl`);
      const r = await runOn('r', ENV[cmd]!, conf(rec));
      assert.equal(r.status, 0, `${cmd}: ${r.stderr}`);
      assert.deepEqual(commands(rec), [cmd]);
    }
  });
});

describe('stdinIsTerminal: node:tty only for a character device that is not a memory device', () => {
  test('devMajor decodes glibc device numbers, large majors included', () => {
    assert.equal(devMajor(0x103), 1); // /dev/null: 1,3
    assert.equal(devMajor(0x8805), 136); // /dev/pts/5
    assert.equal(devMajor(0x501), 5); // /dev/console: 5,1
    // makedev(4097, 2): ((4097 & 0xfff) << 8) | ((4097 & ~0xfff) << 32) | 2
    assert.equal(devMajor(((4097 & 0xfff) << 8) + (4097 & ~0xfff) * 2 ** 32 + 2), 4097);
  });
  test('a pipe, a file, /dev/null and a closed descriptor are no terminal; a pseudo-terminal is one', () => {
    const file = join(dir, 'stdin-file');
    writeFileSync(file, '{}');
    const fds: number[] = [];
    try {
      const f = openSync(file, 'r');
      fds.push(f);
      assert.equal(stdinIsTerminal(f), false, 'regular file');
      const nul = openSync('/dev/null', 'r');
      fds.push(nul);
      assert.equal(stdinIsTerminal(nul), false, '/dev/null');
      const zero = openSync('/dev/zero', 'r');
      fds.push(zero);
      assert.equal(stdinIsTerminal(zero), false, '/dev/zero');
      const closed = openSync(file, 'r');
      closeSync(closed);
      assert.equal(stdinIsTerminal(closed), false, 'closed descriptor');
      const ptmx = openSync('/dev/ptmx', 'r+');
      fds.push(ptmx);
      assert.equal(stdinIsTerminal(ptmx), isatty(ptmx), 'a pseudo-terminal master: what isatty says');
      assert.equal(stdinIsTerminal(ptmx), true, 'a pseudo-terminal master is a terminal');
    } finally {
      for (const fd of fds) closeSync(fd);
    }
  });
  test('a pipe is no terminal', async () => {
    const probe = join(dir, 'probe-pipe.ts');
    writeFileSync(
      probe,
      `import { stdinIsTerminal } from ${JSON.stringify(fileURLToPath(new URL('./process.ts', import.meta.url)))};\nprocess.stdout.write(String(stdinIsTerminal()));\n`,
    );
    const r = spawnSync(process.execPath, ['--import', 'tsx', probe], {
      cwd: root,
      input: '{}',
      encoding: 'utf8',
    });
    assert.equal(r.stdout, 'false', r.stderr);
  });
});
