import assert from 'node:assert/strict';
import {
  chmodSync,
  closeSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { plugin as passthrough } from '../examples/passthrough.ts';
import { invokeInProcess } from './dispatch.ts';
import { CniError } from './errors.ts';
import {
  DELEGATION_ENV,
  delegateAdd,
  delegateCheck,
  delegateDel,
  delegateGc,
  delegateStatus,
  delegateVersion,
  execPlugin,
  findInPath,
  getVersionInfo,
  invokeHooks,
  MAX_DELEGATION_DEPTH,
  onDelegateRollback,
  registerInProcess,
  undoDelegateAdd,
  validateDelegate,
  withDelegateCleanup,
} from './invoke.ts';
import { createLogger } from './log.ts';
import type { Plugin, Request, RequestBase } from './types.ts';

let dir: string;
let bin: string;
const enc = new TextEncoder();

/** Write an executable `#!/usr/bin/env node` fake delegate. */
function fake(name: string, body: string, where = bin): string {
  const p = join(where, name);
  writeFileSync(p, `#!/usr/bin/env node\n${body}\n`);
  chmodSync(p, 0o755);
  return p;
}

/** Body that records argv0/env/stdin to $FAKE_RECORD (one JSON line) and then runs `then`. */
const RECORD = `
const fs = require('node:fs');
const stdin = fs.readFileSync(0, 'utf8');
if (process.env.FAKE_RECORD) fs.appendFileSync(process.env.FAKE_RECORD, JSON.stringify({ cmd: process.env.CNI_COMMAND, env: process.env, stdin }) + '\\n');
`;

function records(file: string): Array<{ cmd: string; env: Record<string, string>; stdin: string }> {
  try {
    return readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
  } catch {
    return [];
  }
}

let stderrSink: string[];
function request(
  overrides: Partial<RequestBase> & { conf?: object; extraEnv?: Record<string, string> } = {},
): RequestBase {
  const conf = overrides.conf ?? { cniVersion: '1.0.0', name: 'net', type: 'upper', ipam: { type: 'fake' } };
  const stdin = enc.encode(JSON.stringify(conf));
  stderrSink = [];
  return {
    command: 'ADD',
    containerId: 'c1',
    netns: '/var/run/netns/x',
    ifName: 'eth0',
    args: '',
    path: [bin],
    stdin,
    config: conf as RequestBase['config'],
    cniVersion: (conf as { cniVersion?: string }).cniVersion ?? '0.1.0',
    env: {
      PATH: process.env.PATH,
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: 'c1',
      CNI_NETNS: '/var/run/netns/x',
      CNI_IFNAME: 'eth0',
      CNI_PATH: `/nonexistent:${bin}`,
      OTHER_VAR: 'kept',
      ...overrides.extraEnv,
    },
    log: createLogger('test', undefined, { stderr: { write: () => true }, env: {} }),
    stderr: { write: (s: string) => stderrSink.push(s) },
    ...overrides,
  };
}

before(() => {
  dir = mkdtempSync(join(tmpdir(), `cnikit-invoke-${process.pid}-`));
  bin = join(dir, 'bin');
  mkdirSync(bin);
});
after(() => rmSync(dir, { recursive: true, force: true }));

describe('findInPath', () => {
  test('errors with Go texts', () => {
    assert.throws(() => findInPath('', ['/x']), { message: 'no plugin name provided' });
    assert.throws(() => findInPath('a/b', ['/x']), { message: 'invalid plugin name: a/b' });
    assert.throws(() => findInPath('x', []), { message: 'no paths provided' });
    assert.throws(() => findInPath('nothere', ['/a', '/b']), {
      message: 'failed to find plugin "nothere" in path [/a /b]',
    });
  });
  test('first regular file wins; directories are skipped; execute bit not checked', () => {
    const d1 = join(dir, 'p1');
    const d2 = join(dir, 'p2');
    const d3 = join(dir, 'p3');
    mkdirSync(join(d1, 'tool'), { recursive: true });
    mkdirSync(d2);
    mkdirSync(d3);
    writeFileSync(join(d2, 'tool'), 'x', { mode: 0o644 });
    writeFileSync(join(d3, 'tool'), 'x', { mode: 0o755 });
    assert.equal(findInPath('tool', [d1, d2, d3]), join(d2, 'tool'));
  });
});

describe('delegation to a child process', () => {
  test('ADD: full env with CNI_COMMAND replaced, stdin byte-identical, 0.2.0 answer converted to 1.1.0', async () => {
    const rec = join(dir, 'add.rec');
    fake(
      'ipam020',
      `${RECORD}
process.stderr.write('delegate says hi\\n');
process.stdout.write(JSON.stringify({ cniVersion: '0.2.0', ip4: { ip: '10.1.0.5/16', gateway: '10.1.0.1', routes: [{ dst: '0.0.0.0/0' }] }, dns: {} }));`,
    );
    const req = request({ command: 'DEL', extraEnv: { CNI_COMMAND: 'DEL', FAKE_RECORD: rec } });
    const res = await delegateAdd('ipam020', req);
    assert.deepEqual(res, {
      cniVersion: '1.1.0',
      ips: [{ address: '10.1.0.5/16', gateway: '10.1.0.1' }],
      routes: [{ dst: '0.0.0.0/0' }],
    });
    const [r] = records(rec);
    assert.equal(r!.cmd, 'ADD');
    assert.equal(r!.env.OTHER_VAR, 'kept');
    assert.equal(r!.env.CNI_CONTAINERID, 'c1');
    assert.equal(r!.env.CNI_IFNAME, 'eth0');
    assert.equal(r!.stdin, new TextDecoder().decode(req.stdin));
    assert.deepEqual(stderrSink, ['delegate says hi\n']);
  });
  test('answer without cniVersion takes the config version', async () => {
    fake(
      'ipamnover',
      `${RECORD}process.stdout.write(JSON.stringify({ ips: [{ version: '4', address: '10.2.0.5/16' }] }));`,
    );
    const res = await delegateAdd(
      'ipamnover',
      request({ conf: { cniVersion: '0.4.0', name: 'n', type: 't' } }),
    );
    assert.deepEqual(res, { cniVersion: '1.1.0', ips: [{ address: '10.2.0.5/16' }] });
    // same body under a 1.x config: version "4" is an unknown key there, still fine
    const res1 = await delegateAdd('ipamnover', request());
    assert.deepEqual(res1, { cniVersion: '1.1.0', ips: [{ address: '10.2.0.5/16' }] });
  });
  test('error JSON passes through unchanged (code 11), stderr not copied', async () => {
    fake(
      'ipam11',
      `${RECORD}process.stderr.write('noise'); process.stdout.write(JSON.stringify({ code: 11, msg: 'busy', details: 'later' })); process.exitCode = 1;`,
    );
    await assert.rejects(delegateAdd('ipam11', request()), (e: unknown) => {
      assert.ok(CniError.is(e));
      assert.deepEqual(e.toJSON(), { code: 11, msg: 'busy', details: 'later' });
      return true;
    });
    assert.deepEqual(stderrSink, []);
  });
  const failures: Array<[string, string, RegExp | string]> = [
    [
      'stderronly',
      `${RECORD}process.stderr.write('boom\\n'); process.exitCode = 2;`,
      'netplugin failed: "boom\\n": exit status 2',
    ],
    ['silent', `${RECORD}process.exitCode = 3;`, 'netplugin failed with no error message: exit status 3'],
    [
      'garbage',
      `${RECORD}process.stdout.write('not json'); process.exitCode = 1;`,
      /^netplugin failed but error parsing its diagnostic message "not json": /,
    ],
    [
      'killed',
      `${RECORD}process.kill(process.pid, 'SIGKILL');`,
      'netplugin failed with no error message: signal: killed',
    ],
  ];
  for (const [name, body, msg] of failures) {
    test(`failure without error JSON → code 0 (${name})`, async () => {
      fake(name, body);
      await assert.rejects(delegateAdd(name, request()), (e: unknown) => {
        assert.ok(CniError.is(e));
        assert.equal(e.code, 0);
        if (typeof msg === 'string') assert.equal(e.msg, msg);
        else assert.match(e.msg, msg);
        return true;
      });
    });
  }
  test('a file that cannot be executed', async () => {
    writeFileSync(join(bin, 'noexec'), '#!/usr/bin/env node\n', { mode: 0o644 });
    await assert.rejects(delegateDel('noexec', request()), {
      code: 0,
      msg: `netplugin failed with no error message: fork/exec ${join(bin, 'noexec')}: permission denied`,
    });
  });
  test('lookup errors surface as plain errors', async () => {
    await assert.rejects(delegateAdd('missing', request()), {
      message: `failed to find plugin "missing" in path [/nonexistent ${bin}]`,
    });
    await assert.rejects(delegateAdd('', request()), { message: 'no plugin name provided' });
    await assert.rejects(delegateAdd('../x', request()), { message: 'invalid plugin name: ../x' });
    await assert.rejects(delegateAdd('x', request({ extraEnv: { CNI_PATH: '' } })), {
      message: 'no paths provided',
    });
  });
  test('unparseable ADD output on success', async () => {
    fake('badresult', `${RECORD}process.stdout.write('[1]');`);
    await assert.rejects(delegateAdd('badresult', request()), /^Error: failed to unmarshal raw result: /);
    fake('emptyresult', `${RECORD}`);
    await assert.rejects(delegateAdd('emptyresult', request()), {
      message: 'failed to unmarshal raw result: unexpected end of JSON input',
    });
    fake(
      'crossfam',
      `${RECORD}process.stdout.write(JSON.stringify({ cniVersion: '0.4.0', ips: [{ version: '4', address: 'bogus' }] }));`,
    );
    await assert.rejects(delegateAdd('crossfam', request()), { message: 'invalid CIDR address: bogus' });
  });
  test('DEL, CHECK, GC, STATUS forward the verb and succeed silently', async () => {
    const rec = join(dir, 'verbs.rec');
    fake('verbs', `${RECORD}`);
    const req = request({ extraEnv: { FAKE_RECORD: rec } });
    await delegateDel('verbs', req);
    await delegateCheck('verbs', req);
    await delegateGc('verbs', req);
    await delegateStatus('verbs', req);
    assert.deepEqual(
      records(rec).map((r) => r.cmd),
      ['DEL', 'CHECK', 'GC', 'STATUS'],
    );
  });
  test('"text file busy" is retried', async () => {
    const p = fake(
      'busy',
      `${RECORD}process.stdout.write(JSON.stringify({ cniVersion: '1.0.0', ips: [{ address: '10.3.0.1/24' }] }));`,
    );
    const fd = openSync(p, 'r+'); // open for writing: exec fails with ETXTBSY
    const saved = invokeHooks.retryDelayMs;
    invokeHooks.retryDelayMs = 50;
    const t = setTimeout(() => closeSync(fd), 120);
    try {
      const res = await delegateAdd('busy', request());
      assert.deepEqual(res.ips, [{ address: '10.3.0.1/24' }]);
    } finally {
      clearTimeout(t);
      try {
        closeSync(fd);
      } catch {
        // already closed
      }
      invokeHooks.retryDelayMs = saved;
    }
  });
  test('"text file busy" gives up after 6 attempts', async () => {
    const p = fake('busyforever', `${RECORD}`);
    const fd = openSync(p, 'r+');
    const saved = invokeHooks.retryDelayMs;
    invokeHooks.retryDelayMs = 5;
    try {
      await assert.rejects(delegateDel('busyforever', request()), {
        code: 0,
        msg: `netplugin failed with no error message: fork/exec ${p}: text file busy`,
      });
    } finally {
      closeSync(fd);
      invokeHooks.retryDelayMs = saved;
    }
  });
});

describe('VERSION of a delegate', () => {
  test('modern, legacy and 0.2.0 answers; dummy env for old skels', async () => {
    const rec = join(dir, 'version.rec');
    fake(
      'vmodern',
      `${RECORD}process.stdout.write('{"cniVersion":"1.1.0","supportedVersions":["0.4.0","1.0.0"]}\\n');`,
    );
    const req = request({ extraEnv: { FAKE_RECORD: rec } });
    assert.deepEqual(await delegateVersion('vmodern', req), {
      cniVersion: '1.1.0',
      supportedVersions: ['0.4.0', '1.0.0'],
    });
    const [r] = records(rec);
    assert.equal(r!.cmd, 'VERSION');
    assert.equal(r!.stdin, '{"cniVersion":"1.1.0"}');
    assert.deepEqual(
      [r!.env.CNI_NETNS, r!.env.CNI_IFNAME, r!.env.CNI_PATH, r!.env.CNI_CONTAINERID],
      ['dummy', 'dummy', 'dummy', ''],
    );
    fake(
      'vlegacy',
      `${RECORD}process.stdout.write('{"code":4,"msg":"unknown CNI_COMMAND: VERSION"}'); process.exitCode = 1;`,
    );
    assert.deepEqual(await delegateVersion('vlegacy', req), {
      cniVersion: '1.1.0',
      supportedVersions: ['0.1.0'],
    });
    fake('v020', `${RECORD}process.stdout.write('{"cniVersion":"0.2.0"}');`);
    assert.deepEqual(await delegateVersion('v020', req), {
      cniVersion: '1.1.0',
      supportedVersions: ['0.1.0', '0.2.0'],
    });
    fake('vnolist', `${RECORD}process.stdout.write('{"cniVersion":"0.3.0"}');`);
    await assert.rejects(delegateVersion('vnolist', req), {
      message: 'decoding version info: missing field supportedVersions',
    });
    fake('vnover', `${RECORD}process.stdout.write('{}');`);
    await assert.rejects(delegateVersion('vnover', req), {
      message: 'decoding version info: missing field cniVersion',
    });
    fake('vjunk', `${RECORD}process.stdout.write('junk');`);
    await assert.rejects(delegateVersion('vjunk', req), {
      message: "decoding version info: invalid character 'j' looking for beginning of value",
    });
  });
  test('our own dispatcher answers the probe', async () => {
    const selfPath = join(bin, 'selfversion');
    writeFileSync(selfPath, '', { mode: 0o644 });
    registerInProcess({ name: 'selfversion', versions: ['1.0.0', '1.1.0'] });
    const saved = invokeHooks.isSelf;
    invokeHooks.isSelf = (x) => x === selfPath;
    try {
      assert.deepEqual(await getVersionInfo(selfPath, {}), {
        cniVersion: '1.1.0',
        supportedVersions: ['1.0.0', '1.1.0'],
      });
    } finally {
      invokeHooks.isSelf = saved;
    }
  });
});

describe('withDelegateCleanup', () => {
  test('a failure after the delegate ADD runs delegate DEL and rethrows', async () => {
    const rec = join(dir, 'cleanup.rec');
    fake(
      'ipamok',
      `${RECORD}if (process.env.CNI_COMMAND === 'ADD') process.stdout.write(JSON.stringify({ cniVersion: '1.0.0', ips: [{ address: '10.4.0.2/24' }] }));`,
    );
    const req = request({ extraEnv: { FAKE_RECORD: rec } });
    await assert.rejects(
      withDelegateCleanup('ipamok', req, (r) => {
        assert.equal(r.ips![0]!.address, '10.4.0.2/24');
        throw new CniError(101, 'route failed');
      }),
      { code: 101, msg: 'route failed' },
    );
    assert.deepEqual(
      records(rec).map((r) => r.cmd),
      ['ADD', 'DEL'],
    );
    const ok = await withDelegateCleanup('ipamok', req, (r) => r.ips!.length);
    assert.equal(ok, 1);
    assert.deepEqual(
      records(rec).map((r) => r.cmd),
      ['ADD', 'DEL', 'ADD'],
    );
  });
  test('a delegate that exits 0 with an unparseable answer is cleaned up', async () => {
    const rec = join(dir, 'junk.rec');
    fake(
      'ipamjunk',
      `${RECORD}if (process.env.CNI_COMMAND === 'ADD') process.stdout.write('{"cniVersion":"1.0.0","ips":[{"address":"nope"}]}');`,
    );
    await assert.rejects(
      withDelegateCleanup('ipamjunk', request({ extraEnv: { FAKE_RECORD: rec } }), () => 1),
      {
        message: 'invalid CIDR address: nope',
      },
    );
    assert.deepEqual(
      records(rec).map((r) => r.cmd),
      ['ADD', 'DEL'],
    );
  });
  test('a failing delegate ADD is not followed by DEL', async () => {
    const rec = join(dir, 'nodel.rec');
    fake(
      'ipamfail',
      `${RECORD}process.stdout.write(JSON.stringify({ code: 11, msg: 'no' })); process.exitCode = 1;`,
    );
    await assert.rejects(
      withDelegateCleanup('ipamfail', request({ extraEnv: { FAKE_RECORD: rec } }), () => 1),
      { code: 11 },
    );
    assert.deepEqual(
      records(rec).map((r) => r.cmd),
      ['ADD'],
    );
  });
});

describe('in-process delegation', () => {
  const tsxApi = import.meta.resolve('tsx/esm/api');
  const skelIndex = new URL('./index.ts', import.meta.url).href;
  const example = new URL('../examples/passthrough.ts', import.meta.url).href;

  test('same executable + registered plugin → dispatch in-process with identical results', async () => {
    const selfPath = join(bin, 'passthrough');
    // real executable for the child-process run: the example plugin through tsx
    fake(
      'passthrough',
      `(async () => {
  const { register } = await import(${JSON.stringify(tsxApi)});
  register();
  const { runPlugin } = await import(${JSON.stringify(skelIndex)});
  const { plugin } = await import(${JSON.stringify(example)});
  await runPlugin(plugin);
})();`,
    );
    const recChild = join(dir, 'pt-child.rec');
    const recSelf = join(dir, 'pt-self.rec');
    const mk = (recordFile: string) =>
      request({
        conf: {
          cniVersion: '0.3.1',
          name: 'net',
          type: 'upper',
          recordFile,
          result: { cniVersion: '0.3.1', ips: [{ version: '6', address: 'FD00::5/64' }], dns: {} },
        },
      });
    const viaChild = await delegateAdd('passthrough', mk(recChild));

    registerInProcess(passthrough);
    const saved = invokeHooks.isSelf;
    invokeHooks.isSelf = (p) => p === selfPath;
    try {
      const viaSelf = await delegateAdd('passthrough', mk(recSelf));
      assert.deepEqual(viaSelf, viaChild);
      assert.deepEqual(viaSelf, { cniVersion: '1.1.0', ips: [{ address: 'fd00::5/64' }] });
      const [c] = records(recChild) as unknown as Array<Record<string, unknown>>;
      const [s] = records(recSelf) as unknown as Array<Record<string, unknown>>;
      // identical request seen by the plugin either way (except the record file name in stdin)
      for (const k of ['command', 'containerId', 'netns', 'ifName', 'args', 'path', 'cniVersion', 'env']) {
        assert.deepEqual(s![k], c![k], k);
      }
      // errors pass through identically
      const failConf = {
        cniVersion: '1.0.0',
        name: 'n',
        type: 't',
        fail: { code: 11, msg: 'nope', details: 'd' },
      };
      const e1 = await delegateAdd('passthrough', request({ conf: failConf })).catch((e) => e);
      invokeHooks.isSelf = saved;
      const e2 = await delegateAdd('passthrough', request({ conf: failConf })).catch((e) => e);
      assert.deepEqual(e1.toJSON(), { code: 11, msg: 'nope', details: 'd' });
      assert.deepEqual(e2.toJSON(), e1.toJSON());
    } finally {
      invokeHooks.isSelf = saved;
    }
  });
  test('in-process path never spawns: the file may be anything', async () => {
    const selfPath = join(bin, 'inproc');
    writeFileSync(selfPath, 'not an executable', { mode: 0o644 });
    const calls: Request[] = [];
    const p: Plugin = {
      name: 'inproc',
      add(req) {
        calls.push(req);
        return { cniVersion: '1.1.0', ips: [{ address: '192.0.2.7/24' }] };
      },
      del(req) {
        calls.push(req);
        throw new Error('plain failure');
      },
    };
    registerInProcess(p);
    const saved = invokeHooks.isSelf;
    invokeHooks.isSelf = (x) => x === selfPath;
    try {
      const res = await delegateAdd(
        'inproc',
        request({ conf: { cniVersion: '0.2.0', name: 'n', type: 't' } }),
      );
      assert.deepEqual(res, { cniVersion: '1.1.0', ips: [{ address: '192.0.2.7/24' }] });
      assert.equal(calls[0]!.command, 'ADD');
      assert.equal(calls[0]!.env.OTHER_VAR, 'kept');
      await assert.rejects(delegateDel('inproc', request()), { code: 999, msg: 'plain failure' });
      assert.equal(calls[1]!.command, 'DEL');
    } finally {
      invokeHooks.isSelf = saved;
    }
  });
  test('an in-process delegate ADD registers what its DEL does not undo; the rollback DEL runs it', async () => {
    const selfPath = join(bin, 'cursor');
    writeFileSync(selfPath, 'not an executable', { mode: 0o644 });
    const log: string[] = [];
    let registered: boolean | undefined;
    const p: Plugin = {
      name: 'cursor',
      add() {
        log.push('ADD');
        registered = onDelegateRollback(() => log.push('undo 1'));
        onDelegateRollback(() => log.push('undo 2'));
        return { cniVersion: '1.1.0', ips: [{ address: '192.0.2.8/24' }] };
      },
      del() {
        log.push('DEL');
      },
    };
    registerInProcess(p);
    const saved = invokeHooks.isSelf;
    invokeHooks.isSelf = (x) => x === selfPath;
    try {
      // a rollback: ADD then DEL with the same request runs the steps once, newest first, after the DEL
      const req = request({ conf: { cniVersion: '1.0.0', name: 'n', type: 't' } });
      await delegateAdd('cursor', req);
      assert.equal(registered, true);
      await delegateDel('cursor', req);
      await delegateDel('cursor', req);
      assert.deepEqual(log, ['ADD', 'DEL', 'undo 2', 'undo 1', 'DEL']);
      // a DEL of another request (the runtime's DEL of a successful ADD) runs nothing
      log.length = 0;
      await delegateAdd('cursor', request({ conf: { cniVersion: '1.0.0', name: 'n', type: 't' } }));
      await delegateDel('cursor', request({ conf: { cniVersion: '1.0.0', name: 'n', type: 't' } }));
      assert.deepEqual(log, ['ADD', 'DEL']);
      // withDelegateCleanup: its cleanup DEL runs them too
      log.length = 0;
      const failing = request({ conf: { cniVersion: '1.0.0', name: 'n', type: 't' } });
      await assert.rejects(
        withDelegateCleanup('cursor', failing, () => {
          throw new Error('later step failed');
        }),
        /later step failed/,
      );
      assert.deepEqual(log, ['ADD', 'DEL', 'undo 2', 'undo 1']);
      // outside an in-process delegate ADD nothing is registered
      assert.equal(
        onDelegateRollback(() => log.push('never')),
        false,
      );
    } finally {
      invokeHooks.isSelf = saved;
    }
  });
  test('not registered → child process even when it is the same executable', async () => {
    fake('unregistered', `${RECORD}process.stdout.write(JSON.stringify({ cniVersion: '1.0.0' }));`);
    const saved = invokeHooks.isSelf;
    invokeHooks.isSelf = () => true;
    try {
      assert.deepEqual(await delegateAdd('unregistered', request()), { cniVersion: '1.1.0' });
    } finally {
      invokeHooks.isSelf = saved;
    }
  });
  test('a plugin delegating from inside dispatch (bridge → ipam shape)', async () => {
    fake(
      'ipamx',
      `${RECORD}process.stdout.write(JSON.stringify({ cniVersion: '0.2.0', ip4: { ip: '10.9.0.2/16', gateway: '10.9.0.1' }, dns: {} }));`,
    );
    const upper: Plugin = {
      name: 'upper',
      async add(req) {
        const ipam = await delegateAdd('ipamx', req);
        return {
          ...ipam,
          interfaces: [{ name: req.ifName, sandbox: req.netns }],
          ips: ipam.ips!.map((i) => ({ ...i, interface: 0 })),
        };
      },
    };
    const env = {
      PATH: process.env.PATH,
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: 'c',
      CNI_NETNS: '/nonexistent',
      CNI_IFNAME: 'eth0',
      CNI_PATH: bin,
    };
    const r = await invokeInProcess(
      upper,
      env,
      JSON.stringify({ cniVersion: '1.0.0', name: 'n', type: 'upper', ipam: { type: 'ipamx' } }),
    );
    assert.equal(r.code, 0, r.stdout);
    assert.deepEqual(JSON.parse(r.stdout), {
      cniVersion: '1.0.0',
      interfaces: [{ name: 'eth0', sandbox: '/nonexistent' }],
      ips: [{ address: '10.9.0.2/16', gateway: '10.9.0.1', interface: 0 }],
    });
  });
});

test('a delegation cycle or a too deep delegation is a code-7 error, not an endless recursion', async () => {
  // a plugin that delegates to the type named in its config's ipam section, in-process (isSelf forced: the
  // files in CNI_PATH stand for this executable)
  const dir = mkdtempSync(join(tmpdir(), 'cnikit-cycle-'));
  const savedIsSelf = invokeHooks.isSelf;
  invokeHooks.isSelf = () => true;
  try {
    for (const n of ['loopy', 'deep']) writeFileSync(join(dir, n), '', { mode: 0o755 });
    let calls = 0;
    const loopy: Plugin = {
      name: 'loopy',
      async add(req) {
        calls++;
        return delegateAdd((req.config.ipam as { type: string }).type, req);
      },
    };
    registerInProcess(loopy);
    const env = {
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: 'c',
      CNI_NETNS: '/x',
      CNI_IFNAME: 'eth0',
      CNI_PATH: dir,
      CNI_NETNS_OVERRIDE: '1',
    };
    const conf = JSON.stringify({ cniVersion: '1.0.0', name: 'n', type: 'loopy', ipam: { type: 'loopy' } });
    const r = await invokeInProcess(loopy, env, conf);
    assert.equal(r.code, 1);
    const e = JSON.parse(r.stdout);
    assert.equal(e.code, 7);
    assert.match(
      e.msg,
      /delegation cycle: plugin "loopy" is reached again through its own delegation \(loopy → loopy\)/,
    );
    assert.equal(calls, 1, 'the cycle is stopped before the delegate runs');
    // depth: a chain already MAX deep in the environment (e.g. through exec'd plugins) refuses one more
    const deepEnv = {
      ...env,
      [DELEGATION_ENV]: Array.from({ length: MAX_DELEGATION_DEPTH }, (_, i) => `p${i}`).join(','),
    };
    const d = await invokeInProcess(
      loopy,
      deepEnv,
      JSON.stringify({ cniVersion: '1.0.0', name: 'n', type: 'loopy', ipam: { type: 'deep' } }),
    );
    assert.match(JSON.parse(d.stdout).msg, /delegation depth limit of 8 exceeded \(p0 → .* → p7 → deep\)/);
  } finally {
    invokeHooks.isSelf = savedIsSelf;
    rmSync(dir, { recursive: true, force: true });
  }
});

describe('validateDelegate and undoDelegateAdd: a delegating ADD refused before its first change', () => {
  test('an in-process delegate: its config decoder runs, its handler does not; an ipam:false plugin is refused', async () => {
    const selfPath = join(bin, 'strict-ipam');
    writeFileSync(selfPath, 'not an executable', { mode: 0o644 });
    writeFileSync(join(bin, 'main-only'), 'not an executable', { mode: 0o644 });
    const log: string[] = [];
    const ipam: Plugin<{ subnet: string }> = {
      name: 'strict-ipam',
      ipam: true,
      conf(raw) {
        log.push('conf');
        const subnet = (raw.ipam as { subnet?: unknown }).subnet;
        if (typeof subnet !== 'string')
          throw new CniError(7, `ipam.subnet: expected string, got ${typeof subnet}`);
        return { subnet };
      },
      add() {
        log.push('ADD');
        return { cniVersion: '1.1.0', ips: [{ address: '192.0.2.9/24' }] };
      },
      del() {
        log.push('DEL');
      },
    };
    const main: Plugin = { name: 'main-only', ipam: false, add: () => ({ cniVersion: '1.1.0' }) };
    registerInProcess(ipam as unknown as Plugin);
    registerInProcess(main);
    const saved = invokeHooks.isSelf;
    invokeHooks.isSelf = (x) => x === selfPath || x === join(bin, 'main-only');
    try {
      const conf = (sub: unknown) => ({
        cniVersion: '1.0.0',
        name: 'n',
        type: 'upper',
        ipam: { type: 'strict-ipam', subnet: sub },
      });
      const bad = request({ conf: conf(1) });
      await assert.rejects(validateDelegate('strict-ipam', bad, { ipam: true }), {
        code: 7,
        msg: 'ipam.subnet: expected string, got number',
      });
      assert.deepEqual(log, ['conf'], 'decoded, never ADDed');
      // the rollback of an ADD that never started asks for no DEL
      await undoDelegateAdd('strict-ipam', bad);
      assert.deepEqual(log, ['conf']);
      log.length = 0;
      await validateDelegate('strict-ipam', request({ conf: conf('192.0.2.0/24') }), { ipam: true });
      assert.deepEqual(log, ['conf']);
      // a main plugin named as IPAM: refused without running anything of it
      await assert.rejects(validateDelegate('main-only', request(), { ipam: true }), {
        code: 7,
        msg: '"ipam": {"type": "main-only"}: plugin "main-only" is not an IPAM plugin',
      });
      // a delegate that is not there is reported before any change too
      await assert.rejects(
        validateDelegate('absent', request(), { ipam: true }),
        /failed to find plugin "absent"/,
      );
      // a delegate ADD that ran (and failed after allocating) is DELed by its rollback
      log.length = 0;
      const started = request({ conf: conf('192.0.2.0/24') });
      await delegateAdd('strict-ipam', started);
      await undoDelegateAdd('strict-ipam', started);
      assert.deepEqual(log, ['conf', 'ADD', 'conf', 'DEL']);
    } finally {
      invokeHooks.isSelf = saved;
    }
  });

  test('a delegation cycle is refused by validateDelegate; the refused ADD is never followed by a DEL', async () => {
    const dir2 = mkdtempSync(join(tmpdir(), 'cnikit-validate-'));
    writeFileSync(join(dir2, 'upper'), '', { mode: 0o755 });
    const saved = invokeHooks.isSelf;
    invokeHooks.isSelf = () => true;
    const log: string[] = [];
    registerInProcess({
      name: 'upper',
      add: () => {
        log.push('ADD');
        return { cniVersion: '1.1.0' };
      },
      del: () => {
        log.push('DEL');
      },
    });
    try {
      const req = request({
        conf: { cniVersion: '1.0.0', name: 'n', type: 'upper', ipam: { type: 'upper' } },
        extraEnv: { CNI_PATH: dir2 },
      });
      await assert.rejects(validateDelegate('upper', req, { ipam: true }), {
        code: 7,
        msg: /delegation cycle: plugin "upper" is reached again through its own delegation \(upper → upper\)/,
      });
      await assert.rejects(delegateAdd('upper', req), { code: 7 });
      await undoDelegateAdd('upper', req);
      assert.deepEqual(log, [], 'neither ADD nor DEL of the delegate ran');
    } finally {
      invokeHooks.isSelf = saved;
      rmSync(dir2, { recursive: true, force: true });
    }
  });
});

describe('execPlugin options (libcni)', () => {
  test('signal: an abort kills the plugin (SIGKILL) like Go exec.CommandContext', async () => {
    const p = fake('sleeper', `setTimeout(() => process.stdout.write('{}'), 30000);`);
    const t0 = Date.now();
    const err = await execPlugin(p, '{}', { PATH: process.env.PATH }, undefined, {
      signal: AbortSignal.timeout(200),
    }).catch((e) => e);
    assert.ok(Date.now() - t0 < 10_000, 'returned long before the plugin would have finished');
    assert.ok(CniError.is(err));
    assert.equal(err.msg, 'netplugin failed with no error message: signal: killed');
  });
  test('onStderr gets the whole stderr on failure too; inProcess:false starts a process for a registered plugin', async () => {
    const p = fake(
      'noisy',
      `process.stderr.write('why it failed\\n'); process.stdout.write(JSON.stringify({ code: 11, msg: 'later', details: 'd' })); process.exitCode = 1;`,
    );
    let seen = '';
    const err = await execPlugin(
      p,
      '{}',
      { PATH: process.env.PATH },
      { write: () => true },
      {
        onStderr: (t) => (seen = t),
      },
    ).catch((e) => e);
    assert.deepEqual(err.toJSON(), { code: 11, msg: 'later', details: 'd' });
    assert.equal(seen, 'why it failed\n');
    registerInProcess({ name: 'noisy', add: () => ({ cniVersion: '1.1.0' }) }, { anyPath: true });
    try {
      const forced = await execPlugin(
        p,
        '{}',
        { PATH: process.env.PATH },
        { write: () => true },
        {
          inProcess: false,
        },
      ).catch((e) => e);
      assert.equal(forced.code, 11, 'the file ran, not the registered object');
      const inproc = await execPlugin(p, JSON.stringify({ cniVersion: '1.1.0', name: 'n', type: 'noisy' }), {
        CNI_COMMAND: 'ADD',
        CNI_CONTAINERID: 'c',
        CNI_NETNS: '/nonexistent',
        CNI_IFNAME: 'eth0',
        CNI_PATH: bin,
      });
      assert.deepEqual(JSON.parse(new TextDecoder().decode(inproc)), { cniVersion: '1.1.0' });
    } finally {
      registerInProcess({ name: 'noisy' });
    }
  });
  test('TRACEPARENT/TRACESTATE in the environment reach delegates (the whole environment is passed on)', async () => {
    const rec = join(dir, 'trace.rec');
    fake('traced', `${RECORD}process.stdout.write(JSON.stringify({ cniVersion: '1.0.0' }));`);
    const tp = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    await delegateAdd(
      'traced',
      request({ extraEnv: { FAKE_RECORD: rec, TRACEPARENT: tp, TRACESTATE: 'k=v' } }),
    );
    const [r] = records(rec);
    assert.equal(r!.env.TRACEPARENT, tp);
    assert.equal(r!.env.TRACESTATE, 'k=v');
  });
});
