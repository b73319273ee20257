/**
 * CniConfig without root: fake plugins (Node scripts in a temporary CNI_PATH) record what they receive and answer
 * like plugins, so the reference's order, injection, environment, caching, GC/STATUS rules, error surfacing, trace
 * context and abort can be checked exactly; and a registered plugin object runs in-process with the same outcome.
 */
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CniError, type Plugin } from '@cnikit/skel';
import { tempDir } from '@cnikit/testing';
import { CniConfig } from './api.ts';
import type { RuntimeConf } from './cache.ts';
import { confListFromObject, type Json } from './conf.ts';
import { AbortedError, LibcniError, MultiError, PluginError } from './errors.ts';

// A fake plugin: appends {plugin, env (CNI_*, TRACE*), conf} to $FAKE_LOG; fails with conf.fail = {code, msg}
// (error on stdout, conf.stderr on stderr, exit 1); sleeps conf.sleep ms; on ADD prints prevResult (or
// {cniVersion: conf.answerVersion ?? conf.cniVersion}) with conf.addr appended to `ips`; VERSION answers conf-less.
const FAKE = `#!${process.execPath}
const fs = require('node:fs');
const path = require('node:path');
const cmd = process.env.CNI_COMMAND;
if (cmd === 'VERSION') {
  const v = process.env.FAKE_VERSIONS ? process.env.FAKE_VERSIONS.split(',') : ['0.3.1', '0.4.0', '1.0.0', '1.1.0'];
  process.stdout.write(JSON.stringify({ cniVersion: '1.1.0', supportedVersions: path.basename(process.argv[1]) === 'old' ? ['0.3.1'] : v }));
  process.exit(0);
}
const raw = fs.readFileSync(0, 'utf8');
const conf = JSON.parse(raw);
const env = {};
for (const [k, v] of Object.entries(process.env)) if (k.startsWith('CNI_') || k.startsWith('TRACE') || k === 'BAGGAGE') env[k] = v;
fs.appendFileSync(process.env.FAKE_LOG, JSON.stringify({ plugin: path.basename(process.argv[1]), env, conf, raw }) + '\\n');
if (conf.sleep) { setTimeout(() => {}, conf.sleep); return; }
if (conf.stderr) process.stderr.write(conf.stderr);
if (conf.fail && (!conf.failOn || conf.failOn === cmd)) {
  process.stdout.write(JSON.stringify(conf.fail));
  process.exit(1);
}
if (cmd === 'ADD') {
  const prev = conf.prevResult ?? { cniVersion: conf.answerVersion ?? conf.cniVersion };
  process.stdout.write(JSON.stringify({ ...prev, ips: [...(prev.ips ?? []), { address: conf.addr }] }));
}
`;

interface Call {
  plugin: string;
  env: Record<string, string>;
  conf: Json;
  /** stdin exactly as received */
  raw: string;
}

let dir: { path: string; remove(): void };
let bin: string;
before(() => {
  dir = tempDir('libcni-api');
  bin = join(dir.path, 'bin');
  mkdirSync(bin);
  for (const name of ['a', 'b', 'c', 'old']) {
    writeFileSync(join(bin, name), FAKE);
    chmodSync(join(bin, name), 0o755);
  }
});
after(() => dir.remove());

let n = 0;
function setup(extra: Partial<ConstructorParameters<typeof CniConfig>[0]> = {}) {
  n += 1;
  const log = join(dir.path, `log-${n}`);
  writeFileSync(log, '');
  const cacheDir = join(dir.path, `cache-${n}`);
  const stderr: string[] = [];
  const cni = new CniConfig({
    path: [join(dir.path, 'none'), bin],
    cacheDir,
    env: { PATH: process.env.PATH, FAKE_LOG: log },
    stderr: { write: (s: string) => stderr.push(s) },
    ...extra,
  });
  const calls = () =>
    readFileSync(log, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Call);
  return { cni, calls, cacheDir, stderr, log };
}

const rt: RuntimeConf = {
  containerId: 'ctr1',
  netns: '/run/netns/x',
  ifName: 'eth0',
  args: [
    ['K', 'V'],
    ['IgnoreUnknown', '1'],
  ],
  capabilityArgs: { portMappings: [{ hostPort: 1 }], other: 2 },
};

function list(cniVersion: string, extra: Json = {}, plugins?: Json[]) {
  return confListFromObject({
    cniVersion,
    name: 'net1',
    plugins: plugins ?? [
      { type: 'a', addr: '10.0.0.1/24', name: 'ignored', cniVersion: '9.9.9' },
      { type: 'b', addr: '10.0.0.2/24', capabilities: { portMappings: true, bandwidth: true, other: false } },
    ],
    ...extra,
  });
}

describe('ADD', () => {
  test('list order, name/version injected, prevResult as returned, runtimeConfig for declared capabilities, env', async () => {
    const { cni, calls, cacheDir } = setup();
    const result = await cni.addNetworkList(list('1.0.0'), rt);
    assert.deepEqual(result, {
      cniVersion: '1.1.0',
      ips: [{ address: '10.0.0.1/24' }, { address: '10.0.0.2/24' }],
    });
    const [a, b] = calls();
    assert.deepEqual([a?.plugin, b?.plugin], ['a', 'b']);
    assert.equal(a?.conf.name, 'net1');
    assert.equal(a?.conf.cniVersion, '1.0.0');
    assert.equal('prevResult' in (a?.conf ?? {}), false);
    assert.equal('runtimeConfig' in (a?.conf ?? {}), false);
    assert.deepEqual(b?.conf.prevResult, { cniVersion: '1.0.0', ips: [{ address: '10.0.0.1/24' }] });
    assert.deepEqual(
      b?.conf.runtimeConfig,
      { portMappings: [{ hostPort: 1 }] },
      'only true capabilities with arguments',
    );
    assert.deepEqual(
      b?.conf.capabilities,
      { portMappings: true, bandwidth: true, other: false },
      'left in like Go',
    );
    assert.deepEqual(a?.env, {
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: 'ctr1',
      CNI_NETNS: '/run/netns/x',
      CNI_ARGS: 'K=V;IgnoreUnknown=1',
      CNI_IFNAME: 'eth0',
      CNI_PATH: `${join(dir.path, 'none')}:${bin}`,
    });
    const entry = JSON.parse(readFileSync(join(cacheDir, 'results', 'net1-ctr1-eth0'), 'utf8'));
    assert.deepEqual(entry.result, {
      cniVersion: '1.0.0',
      ips: [{ address: '10.0.0.1/24' }, { address: '10.0.0.2/24' }],
    });
  });
  test('a plugin answering in another version leaks that version to the next one (no conversion, like Go)', async () => {
    const { cni, calls } = setup();
    const raw = await cni.addNetworkListRaw(
      list('1.0.0', {}, [
        { type: 'a', addr: '10.0.0.1/24', answerVersion: '0.4.0' },
        { type: 'b', addr: '10.0.0.2/24' },
      ]),
      rt,
    );
    assert.equal((calls()[1]?.conf.prevResult as Json | undefined)?.cniVersion, '0.4.0');
    assert.equal(raw.cniVersion, '0.4.0');
  });
  test('names are validated before a plugin runs; a missing plugin is reported first; the first error stops', async () => {
    const { cni, calls, cacheDir } = setup();
    await assert.rejects(cni.addNetworkList(list('1.0.0'), { ...rt, containerId: 'bad id' }), {
      message: 'plugin type="a" name="ignored" failed (add): invalid characters in containerID; bad id',
    });
    await assert.rejects(cni.addNetworkList(list('1.0.0', { name: 'bad/name' }), rt), (e: unknown) => {
      assert.ok(PluginError.is(e));
      assert.equal(e.code, 7);
      return true;
    });
    await assert.rejects(
      cni.addNetworkList(list('1.0.0', {}, [{ type: 'missing' }]), { ...rt, containerId: '' }),
      {
        message: `plugin type="missing" failed (add): failed to find plugin "missing" in path [${join(dir.path, 'none')} ${bin}]`,
      },
    );
    assert.equal(calls().length, 0);
    const failing = list('1.0.0', {}, [
      {
        type: 'a',
        addr: '10.0.0.1/24',
        fail: { code: 11, msg: 'try later', details: 'busy' },
        stderr: 'diag line\n',
      },
      { type: 'b' },
    ]);
    const err = await cni.addNetworkList(failing, rt).catch((e) => e);
    assert.ok(err instanceof PluginError && err instanceof LibcniError);
    assert.equal(err.message, 'plugin type="a" failed (add): try later; busy');
    assert.deepEqual(err.toJSON(), { code: 11, msg: 'try later', details: 'busy' });
    assert.equal(err.stderr, 'diag line\n');
    assert.equal(err.plugin, 'a');
    assert.equal(err.command, 'ADD');
    assert.equal(calls().length, 1, 'b never ran and no DEL was sent');
    assert.ok(!existsSync(join(cacheDir, 'results', 'net1-ctr1-eth0')));
  });
  test("a successful plugin's stderr goes to the stderr option", async () => {
    const { cni, stderr } = setup();
    await cni.addNetworkList(list('1.0.0', {}, [{ type: 'a', addr: '10.0.0.1/24', stderr: 'hello\n' }]), rt);
    assert.deepEqual(stderr, ['hello\n']);
  });
});

describe('CHECK and DEL', () => {
  test('CHECK: below 0.4.0 an error, disableCheck runs nothing, else list order with the cached result converted', async () => {
    const { cni, calls, log } = setup();
    await assert.rejects(cni.checkNetworkList(list('0.3.1'), rt), {
      message: 'configuration version "0.3.1" does not support the CHECK command',
    });
    await cni.addNetworkList(list('1.0.0'), rt);
    writeFileSync(log, '');
    await cni.checkNetworkList(list('1.0.0', { disableCheck: true }), rt);
    assert.equal(calls().length, 0);
    // the same network now declared 0.4.0: the cached 1.0.0 result reaches the plugins as 0.4.0
    await cni.checkNetworkList(list('0.4.0'), rt);
    assert.deepEqual(
      calls().map((c) => [c.plugin, c.env.CNI_COMMAND, c.conf.prevResult]),
      ['a', 'b'].map((p) => [
        p,
        'CHECK',
        {
          cniVersion: '0.4.0',
          dns: {},
          ips: [
            { address: '10.0.0.1/24', version: '4' },
            { address: '10.0.0.2/24', version: '4' },
          ],
        },
      ]),
    );
  });
  test('DEL: reverse order, cached result as prevResult, entry removed after success only', async () => {
    const { cni, calls, log, cacheDir } = setup();
    await cni.addNetworkList(list('1.0.0'), rt);
    writeFileSync(log, '');
    const failing = list('1.0.0', {}, [
      { type: 'a' },
      { type: 'b', fail: { code: 11, msg: 'later' }, failOn: 'DEL' },
    ]);
    await assert.rejects(cni.delNetworkList(failing, rt), {
      message: 'plugin type="b" failed (delete): later',
    });
    assert.ok(existsSync(join(cacheDir, 'results', 'net1-ctr1-eth0')), 'kept after a failed DEL');
    writeFileSync(log, '');
    await cni.delNetworkList(list('1.0.0'), rt);
    assert.deepEqual(
      calls().map((c) => [c.plugin, (c.conf.prevResult as Json)?.cniVersion]),
      [
        ['b', '1.0.0'],
        ['a', '1.0.0'],
      ],
    );
    assert.ok(!existsSync(join(cacheDir, 'results', 'net1-ctr1-eth0')));
  });
  test('DEL: an unreadable entry is removed and DEL goes on without prevResult; below 0.4.0 never a prevResult', async () => {
    const { cni, calls, log, cacheDir } = setup();
    mkdirSync(join(cacheDir, 'results'), { recursive: true });
    writeFileSync(
      join(cacheDir, 'results', 'net1-ctr1-eth0'),
      '{"kind":"cniCacheV1","result":{"cniVersion":"1.0.0","ips":[{"address":"bogus"}]}}',
    );
    await cni.delNetworkList(list('1.0.0'), rt);
    assert.deepEqual(
      calls().map((c) => 'prevResult' in c.conf),
      [false, false],
    );
    assert.ok(!existsSync(join(cacheDir, 'results', 'net1-ctr1-eth0')));
    await cni.addNetworkList(list('0.3.1'), rt);
    writeFileSync(log, '');
    await cni.delNetworkList(list('0.3.1'), rt);
    assert.deepEqual(
      calls().map((c) => 'prevResult' in c.conf),
      [false, false],
    );
  });
});

describe('GC and STATUS', () => {
  test('GC: stale attachments of this network get DEL, valid ones stay, then GC with both attachment keys', async () => {
    const { cni, calls, log } = setup();
    await cni.addNetworkList(list('1.1.0'), rt);
    await cni.addNetworkList(list('1.1.0'), { ...rt, containerId: 'ctr2', args: [], capabilityArgs: {} });
    await cni.addNetworkList(list('1.1.0', { name: 'other' }), { ...rt, containerId: 'ctr3' });
    writeFileSync(log, '');
    const valid = [{ containerID: 'ctr1', ifname: 'eth0' }];
    await cni.gcNetworkList(list('1.1.0'), { validAttachments: valid });
    const got = calls();
    assert.deepEqual(
      got.map((c) => [c.plugin, c.env.CNI_COMMAND, c.env.CNI_CONTAINERID]),
      [
        ['b', 'DEL', 'ctr2'],
        ['a', 'DEL', 'ctr2'],
        ['a', 'GC', ''],
        ['b', 'GC', ''],
      ],
    );
    assert.deepEqual(got[2]?.conf['cni.dev/valid-attachments'], valid);
    assert.deepEqual(got[2]?.conf['cni.dev/attachments'], valid);
    assert.deepEqual(got[2]?.env, {
      CNI_COMMAND: 'GC',
      CNI_CONTAINERID: '',
      CNI_NETNS: '',
      CNI_ARGS: '',
      CNI_IFNAME: '',
      CNI_PATH: `${join(dir.path, 'none')}:${bin}`,
    });
    assert.equal('prevResult' in (got[2]?.conf ?? {}), false);
    assert.deepEqual(
      (await cni.getCachedAttachments()).map((a) => `${a.network}/${a.containerId}`),
      ['net1/ctr1', 'other/ctr3'],
    );
  });
  test('GC: disableGC does nothing; a 1.0.0 list gets only the DELs; failures are collected', async () => {
    const { cni, calls, log } = setup();
    await cni.addNetworkList(list('1.0.0'), rt);
    writeFileSync(log, '');
    await cni.gcNetworkList(list('1.0.0', { disableGC: 'True' }));
    assert.equal(calls().length, 0);
    await cni.gcNetworkList(list('1.0.0'));
    assert.deepEqual(
      calls().map((c) => c.env.CNI_COMMAND),
      ['DEL', 'DEL'],
    );
    await cni.addNetworkList(list('1.1.0'), rt);
    const failing = list('1.1.0', {}, [
      { type: 'a', fail: { code: 1, msg: 'x' }, failOn: 'DEL' },
      { type: 'b', fail: { code: 2, msg: 'y' }, failOn: 'GC' },
      { type: 'c', fail: { code: 3, msg: 'z' }, failOn: 'GC' },
    ]);
    const err = await cni.gcNetworkList(failing).catch((e) => e);
    assert.ok(MultiError.is(err));
    assert.deepEqual(err.message.split('\n'), [
      'failed to delete stale attachment ctr1 eth0: plugin type="a" failed (delete): x',
      'failed to GC plugin b: y',
      'failed to GC plugin c: z',
    ]);
    assert.deepEqual(
      err.errors.map((e: Error) => (e as PluginError).code),
      [1, 2, 3],
    );
  });
  test('STATUS: a no-op below 1.1.0, else in order and the first error stops', async () => {
    const { cni, calls } = setup();
    await cni.getStatusNetworkList(list('1.0.0'));
    assert.equal(calls().length, 0);
    const failing = list('1.1.0', {}, [{ type: 'a', fail: { code: 50, msg: 'not ready' } }, { type: 'b' }]);
    await assert.rejects(
      cni.getStatusNetworkList(failing),
      (e: unknown) => PluginError.is(e) && e.code === 50 && e.message === 'not ready',
    );
    assert.deepEqual(
      calls().map((c) => [c.plugin, c.env.CNI_COMMAND, c.conf.name, c.conf.cniVersion]),
      [['a', 'STATUS', 'net1', '1.1.0']],
    );
  });
});

describe('versions', () => {
  test('getVersionInfo and validateNetworkList (presence, version support, capabilities)', async () => {
    const { cni } = setup();
    assert.deepEqual(await cni.getVersionInfo('a'), {
      cniVersion: '1.1.0',
      supportedVersions: ['0.3.1', '0.4.0', '1.0.0', '1.1.0'],
    });
    assert.deepEqual(await cni.validateNetworkList(list('1.0.0')), ['bandwidth', 'portMappings']);
    const err = await cni
      .validateNetworkList(list('1.0.0', {}, [{ type: 'old' }, { type: 'missing' }, { type: 'a' }]))
      .catch((e) => e);
    assert.ok(LibcniError.is(err));
    assert.equal(
      err.message,
      `[plugin old does not support config version "1.0.0" failed to find plugin "missing" in path [${join(dir.path, 'none')} ${bin}]]`,
    );
  });
});

describe('per-call options', () => {
  test('trace context reaches every plugin; a malformed traceparent is refused before anything runs', async () => {
    const { cni, calls } = setup();
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    await cni.addNetworkList(list('1.0.0'), rt, {
      trace: { traceparent, tracestate: 'v=1', baggage: 'k=v' },
    });
    for (const c of calls()) {
      assert.equal(c.env.TRACEPARENT, traceparent);
      assert.equal(c.env.TRACESTATE, 'v=1');
      assert.equal(c.env.BAGGAGE, 'k=v');
    }
    await assert.rejects(
      cni.addNetworkList(list('1.0.0'), rt, {
        trace: { traceparent: '00-00000000000000000000000000000000-00f067aa0ba902b7-01' },
      }),
      /invalid trace context/,
    );
    assert.equal(calls().length, 2);
  });
  test('timeout / AbortSignal: the running plugin is killed and the call rejects with AbortedError', async () => {
    const { cni } = setup();
    const slow = list('1.0.0', {}, [{ type: 'a', sleep: 30_000 }]);
    const t0 = Date.now();
    const err = await cni.addNetworkList(slow, rt, { timeoutMs: 300 }).catch((e) => e);
    assert.ok(AbortedError.is(err), String(err));
    assert.match(err.message, /^plugin type="a" failed \(add\): timed out after 300 ms/);
    assert.ok(Date.now() - t0 < 10_000);
    const ctl = new AbortController();
    ctl.abort(new Error('shutting down'));
    await assert.rejects(
      cni.delNetworkList(slow, rt, { signal: ctl.signal }),
      (e: unknown) => AbortedError.is(e) && /shutting down/.test((e as Error).message),
    );
  });
});

describe('in-process plugin objects', () => {
  test('a registered object runs instead of the file, with the same results and errors', async () => {
    const seen: string[] = [];
    const inproc: Plugin = {
      name: 'c',
      add(req) {
        seen.push(`${req.command} ${req.containerId} ${req.env.CNI_ARGS}`);
        const conf = req.config as Json;
        if (conf.fail) {
          const f = conf.fail as { code: number; msg: string; details?: string };
          throw new CniError(f.code, f.msg, f.details);
        }
        const prev = req.prevResult ?? { cniVersion: '1.1.0' };
        return { ...prev, ips: [...(prev.ips ?? []), { address: conf.addr as string }] };
      },
      del(req) {
        seen.push(`${req.command} ${req.containerId}`);
      },
    };
    const l = list('1.0.0', {}, [
      { type: 'a', addr: '10.0.0.1/24' },
      { type: 'c', addr: '10.0.0.3/24' },
    ]);
    const execd = setup({ inProcess: false });
    const viaExec = await execd.cni.addNetworkList(l, rt);
    const local = setup({ plugins: [inproc] });
    assert.equal(local.cni.runMode('c'), 'in-process');
    assert.equal(local.cni.runMode('a'), 'exec');
    assert.equal(execd.cni.runMode('c'), 'exec', 'inProcess: false wins');
    const viaObject = await local.cni.addNetworkList(l, rt);
    assert.deepEqual(viaObject, viaExec);
    assert.deepEqual(seen, ['ADD ctr1 K=V;IgnoreUnknown=1']);
    await local.cni.delNetworkList(l, rt);
    assert.deepEqual(seen.at(-1), 'DEL ctr1');
    const bad = list('1.0.0', {}, [{ type: 'c', fail: { code: 11, msg: 'busy', details: 'd' } }]);
    const e1 = await local.cni.addNetworkList(bad, rt).catch((e) => e);
    const e2 = await execd.cni.addNetworkList(bad, rt).catch((e) => e);
    assert.ok(PluginError.is(e1) && PluginError.is(e2));
    assert.deepEqual([e1.message, e1.toJSON()], [e2.message, e2.toJSON()]);
  });
});

describe('edge cases kept from the old synchronous Runtime driver tests', () => {
  test('empty netns and CNI_ARGS are still set in the environment; the cache entry omits them', async () => {
    const { cni, calls, cacheDir } = setup();
    const bare: RuntimeConf = { containerId: 'ctr2', netns: '', ifName: 'eth1' };
    await cni.addNetworkList(list('1.1.0'), bare);
    assert.equal(calls()[0]?.env.CNI_NETNS, '');
    assert.equal(calls()[0]?.env.CNI_ARGS, '');
    const entry = JSON.parse(readFileSync(join(cacheDir, 'results', 'net1-ctr2-eth1'), 'utf8'));
    assert.deepEqual(Object.keys(entry), [
      'kind',
      'containerId',
      'config',
      'ifName',
      'networkName',
      'result',
    ]);
  });

  test('a failing first plugin stops the chain with its error object; nothing is cached', async () => {
    const { cni, calls } = setup();
    const l = list('1.0.0', {}, [
      { type: 'a', fail: { code: 7, msg: 'bad config', details: 'key x' } },
      { type: 'b', addr: '10.0.0.2/24' },
    ]);
    const err = await cni.addNetworkList(l, rt).then(
      () => assert.fail('ADD succeeded'),
      (e: unknown) => e,
    );
    assert.ok(PluginError.is(err), String(err));
    assert.equal(err.plugin, 'a');
    assert.equal(err.command, 'ADD');
    assert.deepEqual(err.toJSON(), { code: 7, msg: 'bad config', details: 'key x' });
    assert.deepEqual(
      calls().map((c) => c.plugin),
      ['a'],
    );
    assert.equal(await cni.getNetworkListCachedResult(l, rt), undefined);
  });

  test('a plugin that prints nothing on ADD is an error and nothing is cached', async () => {
    const { cni } = setup();
    // the fake prints nothing when it is asked to sleep
    const empty = list('1.0.0', {}, [{ type: 'a', sleep: 1 }]);
    const err = await cni.addNetworkList(empty, rt).then(
      () => assert.fail('ADD succeeded'),
      (e: unknown) => e as Error,
    );
    assert.ok(LibcniError.is(err), String(err));
    assert.equal(
      err.message,
      'plugin type="a" failed (add): failed to unmarshal raw result: unexpected end of JSON input',
    );
    assert.equal(await cni.getNetworkListCachedResult(empty, rt), undefined);
  });

  test('CHECK without a cache entry gives the plugins no prevResult', async () => {
    const { cni, calls } = setup();
    await cni.checkNetworkList(list('1.1.0'), rt);
    assert.deepEqual(
      calls().map((c) => [c.plugin, 'prevResult' in c.conf]),
      [
        ['a', false],
        ['b', false],
      ],
    );
  });

  test('runtimeConfig: only enabled capabilities; an existing one stays unless replaced; other keys pass', async () => {
    const { cni, calls } = setup();
    const withCaps: RuntimeConf = {
      ...rt,
      capabilityArgs: { mac: 'aa:bb:cc:dd:ee:ff', ips: ['10.1.0.1/24'] },
    };
    const plugin = { type: 'a', addr: '10.0.0.1/24', runtimeConfig: { old: 1 }, 'cni.dev/x': 1 };
    await cni.addNetworkList(
      list('1.1.0', {}, [{ ...plugin, capabilities: { mac: true, ips: false, bandwidth: true } }]),
      withCaps,
    );
    await cni.addNetworkList(list('1.1.0', {}, [{ ...plugin, capabilities: { ips: false } }]), {
      ...withCaps,
      containerId: 'ctr3',
    });
    const [replaced, kept] = calls();
    assert.deepEqual(replaced?.conf.runtimeConfig, { mac: 'aa:bb:cc:dd:ee:ff' });
    assert.deepEqual(kept?.conf.runtimeConfig, { old: 1 });
    assert.equal(kept?.conf['cni.dev/x'], 1);
    assert.deepEqual(kept?.conf.capabilities, { ips: false });
  });
});
