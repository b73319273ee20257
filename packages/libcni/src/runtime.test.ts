/**
 * Runtime driver logic without root: fake plugins (small Node scripts in a temp CNI_PATH directory) record what they
 * were given and answer like a plugin would, so chain order, prevResult, env, runtimeConfig and the result cache can
 * be checked exactly.
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  type ConfList,
  type Json,
  Runtime,
  type RuntimeConf,
  RuntimeError,
  supportsCachedPrevResult,
} from './runtime.ts';

// A fake plugin: logs {plugin, env, conf} as one JSON line to $FAKE_LOG, then
// - fails with conf.fail = {code, msg} (error object on stdout, exit 1),
// - on ADD prints conf.silent ? nothing : prevResult (or {cniVersion}) with conf.addr appended to `ips`,
// - on anything else prints nothing.
const FAKE = `#!${process.execPath}
const fs = require('node:fs');
const path = require('node:path');
const conf = JSON.parse(fs.readFileSync(0, 'utf8'));
const env = {};
for (const [k, v] of Object.entries(process.env)) if (k.startsWith('CNI_')) env[k] = v;
fs.appendFileSync(process.env.FAKE_LOG, JSON.stringify({ plugin: path.basename(process.argv[1]), env, conf }) + '\\n');
if (conf.fail) {
  process.stdout.write(JSON.stringify(conf.fail));
  process.exit(1);
}
if (env.CNI_COMMAND === 'ADD' && !conf.silent) {
  const prev = conf.prevResult ?? { cniVersion: conf.cniVersion };
  process.stdout.write(JSON.stringify({ ...prev, ips: [...(prev.ips ?? []), { address: conf.addr }] }));
}
`;

interface Call {
  plugin: string;
  env: Record<string, string>;
  conf: Json;
}

let dir: string;
let bin: string;
let bin2: string;
let n = 0;

function setup(): { rt: Runtime; log: string; cacheDir: string } {
  n += 1;
  const log = join(dir, `log-${n}`);
  writeFileSync(log, '');
  const cacheDir = join(dir, `cache-${n}`);
  return { rt: new Runtime({ path: [bin, bin2], cacheDir, env: { FAKE_LOG: log } }), log, cacheDir };
}

function calls(log: string): Call[] {
  return readFileSync(log, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Call);
}

const rtc: RuntimeConf = { containerId: 'ctr1', netns: '/run/netns/x', ifName: 'eth0' };

function list(cniVersion: string, extra: Partial<ConfList> = {}): ConfList {
  return {
    cniVersion,
    name: 'net1',
    plugins: [
      { type: 'a', addr: '10.0.0.1/24' },
      { type: 'b', addr: '10.0.0.2/24' },
    ],
    ...extra,
  };
}

before(() => {
  dir = mkdtempSync(join(tmpdir(), `cnikit-libcni-${process.pid}-`));
  bin = join(dir, 'bin');
  bin2 = join(dir, 'bin2');
  mkdirSync(bin);
  mkdirSync(bin2);
  for (const [d, name] of [
    [bin, 'a'],
    [bin, 'b'],
    [bin2, 'b'],
    [bin2, 'c'],
  ] as const) {
    writeFileSync(join(d, name), FAKE);
    chmodSync(join(d, name), 0o755);
  }
});

after(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('findPlugin', () => {
  test('first CNI_PATH directory wins; later directories are searched', () => {
    const { rt } = setup();
    assert.equal(rt.findPlugin('b'), join(bin, 'b'));
    assert.equal(rt.findPlugin('c'), join(bin2, 'c'));
  });
  test('missing, empty and path-like names are errors', () => {
    const { rt } = setup();
    assert.throws(() => rt.findPlugin('nope'), {
      message: `failed to find plugin "nope" in path [${bin} ${bin2}]`,
    });
    assert.throws(() => rt.findPlugin(''), { message: 'no plugin name provided' });
    assert.throws(() => rt.findPlugin('../a'), { message: 'invalid plugin name: ../a' });
  });
});

describe('buildConfig', () => {
  test('name and cniVersion come from the list; other keys (capabilities, cni.dev/*) pass through', () => {
    const { rt } = setup();
    const l = list('1.0.0');
    const conf = rt.buildConfig(
      l,
      { type: 'a', name: 'other', cniVersion: '0.3.1', capabilities: { ips: false }, 'cni.dev/x': 1 },
      rtc,
    );
    assert.deepEqual(conf, {
      type: 'a',
      name: 'net1',
      cniVersion: '1.0.0',
      capabilities: { ips: false },
      'cni.dev/x': 1,
    });
  });
  test('runtimeConfig keeps only enabled capabilities and replaces an existing one only when non-empty', () => {
    const { rt } = setup();
    const l = list('1.1.0');
    const withCaps: RuntimeConf = {
      ...rtc,
      capabilityArgs: { mac: 'aa:bb:cc:dd:ee:ff', ips: ['10.1.0.1/24'] },
    };
    const plugin = {
      type: 'a',
      capabilities: { mac: true, ips: false, bandwidth: true },
      runtimeConfig: { old: 1 },
    };
    assert.deepEqual(rt.buildConfig(l, plugin, withCaps).runtimeConfig, { mac: 'aa:bb:cc:dd:ee:ff' });
    assert.deepEqual(rt.buildConfig(l, { ...plugin, capabilities: { ips: false } }, withCaps).runtimeConfig, {
      old: 1,
    });
    assert.equal(rt.buildConfig(l, { type: 'a' }, rtc).runtimeConfig, undefined);
  });
  test('prevResult is added when given', () => {
    const { rt } = setup();
    const prev = { cniVersion: '1.0.0', ips: [] };
    assert.deepEqual(rt.buildConfig(list('1.0.0'), { type: 'a' }, rtc, prev).prevResult, prev);
  });
});

describe('ADD', () => {
  test('runs the chain in order with each result as the next prevResult, and caches the final one', () => {
    const { rt, log, cacheDir } = setup();
    const l = list('1.0.0');
    const steps: string[] = [];
    const withArgs: RuntimeConf = { ...rtc, args: [['K8S_POD_NAME', 'p']], capabilityArgs: { mac: 'x' } };
    const result = rt.addNetworkList(l, withArgs, (t) => steps.push(t));
    assert.deepEqual(steps, ['a', 'b']);
    assert.deepEqual(result, {
      cniVersion: '1.0.0',
      ips: [{ address: '10.0.0.1/24' }, { address: '10.0.0.2/24' }],
    });
    const c = calls(log);
    assert.deepEqual(
      c.map((x) => x.plugin),
      ['a', 'b'],
    );
    assert.equal(c[0]?.conf.prevResult, undefined, 'first plugin has no prevResult');
    assert.deepEqual(c[1]?.conf.prevResult, { cniVersion: '1.0.0', ips: [{ address: '10.0.0.1/24' }] });
    assert.deepEqual(c[0]?.env, {
      CNI_COMMAND: 'ADD',
      CNI_PATH: `${bin}:${bin2}`,
      CNI_CONTAINERID: 'ctr1',
      CNI_NETNS: '/run/netns/x',
      CNI_IFNAME: 'eth0',
      CNI_ARGS: 'K8S_POD_NAME=p',
    });

    const file = rt.cacheFile(l, withArgs);
    assert.equal(file, join(cacheDir, 'results', 'net1-ctr1-eth0'));
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.equal(statSync(join(cacheDir, 'results')).mode & 0o777, 0o700);
    const entry = JSON.parse(readFileSync(file, 'utf8')) as Json;
    assert.deepEqual(Object.keys(entry), [
      'kind',
      'containerId',
      'config',
      'ifName',
      'networkName',
      'netns',
      'cniArgs',
      'capabilityArgs',
      'result',
    ]);
    assert.equal(entry.kind, 'cniCacheV1');
    assert.deepEqual(JSON.parse(Buffer.from(entry.config as string, 'base64').toString()), l);
    assert.deepEqual(entry.cniArgs, [['K8S_POD_NAME', 'p']]);
    assert.deepEqual(entry.capabilityArgs, { mac: 'x' });
    assert.deepEqual(entry.result, result);
    assert.deepEqual(rt.getCachedResult(l, withArgs), result);
  });

  test('cache entry omits empty netns, cniArgs and capabilityArgs; CNI_* env is set even if empty', () => {
    const { rt, log } = setup();
    const l = list('1.1.0');
    const bare: RuntimeConf = { containerId: 'ctr2', netns: '', ifName: 'eth1' };
    rt.addNetworkList(l, bare);
    const entry = JSON.parse(readFileSync(rt.cacheFile(l, bare), 'utf8')) as Json;
    assert.deepEqual(Object.keys(entry), [
      'kind',
      'containerId',
      'config',
      'ifName',
      'networkName',
      'result',
    ]);
    assert.equal(calls(log)[0]?.env.CNI_NETNS, '');
    assert.equal(calls(log)[0]?.env.CNI_ARGS, '');
  });

  test('the first error stops the chain, carries the CNI error object, and nothing is cached', () => {
    const { rt, log } = setup();
    const l: ConfList = {
      ...list('1.0.0'),
      plugins: [
        { type: 'a', fail: { code: 7, msg: 'bad config', details: 'key x' } },
        { type: 'b', addr: '10.0.0.2/24' },
      ],
    };
    let err: unknown;
    try {
      rt.addNetworkList(l, rtc);
    } catch (e) {
      err = e;
    }
    assert.ok(err instanceof RuntimeError);
    assert.equal(err.plugin, 'a');
    assert.equal(err.command, 'ADD');
    assert.equal(err.exitCode, 1);
    assert.deepEqual(err.cni, { code: 7, msg: 'bad config', details: 'key x' });
    assert.equal(err.message, 'a ADD failed (exit 1): [7] bad config; key x');
    assert.equal(calls(log).length, 1);
    assert.equal(rt.getCachedResult(l, rtc), undefined);
  });

  test('a plugin that prints nothing on ADD is an error', () => {
    const { rt } = setup();
    const l: ConfList = { ...list('1.0.0'), plugins: [{ type: 'a', silent: true }] };
    assert.throws(() => rt.addNetworkList(l, rtc), { message: 'a ADD printed no result' });
  });

  test('a plugin that fails without an error object: the message shows its output', () => {
    const err = new RuntimeError('x', 'DEL', 2, 'not json', 'boom');
    assert.equal(err.cni, undefined);
    assert.equal(err.message, 'x DEL failed (exit 2): not jsonboom');
  });
});

describe('CHECK', () => {
  test('runs in list order with the cached result as prevResult', () => {
    const { rt, log } = setup();
    const l = list('1.0.0');
    const result = rt.addNetworkList(l, rtc);
    writeFileSync(log, '');
    rt.checkNetworkList(l, rtc);
    const c = calls(log);
    assert.deepEqual(
      c.map((x) => [x.plugin, x.env.CNI_COMMAND, x.conf.prevResult]),
      [
        ['a', 'CHECK', result],
        ['b', 'CHECK', result],
      ],
    );
  });
  test('without a cache entry the plugins get no prevResult', () => {
    const { rt, log } = setup();
    rt.checkNetworkList(list('1.1.0'), rtc);
    assert.deepEqual(
      calls(log).map((x) => [x.plugin, 'prevResult' in x.conf]),
      [
        ['a', false],
        ['b', false],
      ],
    );
  });
  test('disableCheck succeeds without running anything', () => {
    const { rt, log } = setup();
    rt.checkNetworkList(list('1.0.0', { disableCheck: true }), rtc);
    assert.equal(calls(log).length, 0);
  });
  test('versions before 0.4.0 do not support CHECK', () => {
    const { rt, log } = setup();
    for (const v of ['0.1.0', '0.2.0', '0.3.0', '0.3.1']) {
      assert.equal(supportsCachedPrevResult(v), false);
      assert.throws(() => rt.checkNetworkList(list(v), rtc), {
        message: `configuration version "${v}" does not support the CHECK command`,
      });
    }
    assert.equal(calls(log).length, 0);
    assert.equal(supportsCachedPrevResult('0.4.0'), true);
  });
});

describe('DEL', () => {
  test('runs in reverse order with the cached result as prevResult and removes the cache entry', () => {
    const { rt, log } = setup();
    const l = list('0.4.0');
    const result = rt.addNetworkList(l, rtc);
    writeFileSync(log, '');
    rt.delNetworkList(l, rtc);
    assert.deepEqual(
      calls(log).map((x) => [x.plugin, x.env.CNI_COMMAND, x.conf.prevResult]),
      [
        ['b', 'DEL', result],
        ['a', 'DEL', result],
      ],
    );
    assert.equal(rt.getCachedResult(l, rtc), undefined);
    rt.delNetworkList(l, rtc); // idempotent: no cache, no prevResult
    assert.equal(calls(log).length, 4);
    assert.equal('prevResult' in (calls(log)[3]?.conf ?? {}), false);
  });
  test('below 0.4.0 DEL never gets a prevResult', () => {
    const { rt, log } = setup();
    const l = list('0.3.1');
    rt.addNetworkList(l, rtc);
    writeFileSync(log, '');
    rt.delNetworkList(l, rtc);
    assert.deepEqual(
      calls(log).map((x) => [x.plugin, 'prevResult' in x.conf]),
      [
        ['b', false],
        ['a', false],
      ],
    );
  });
  test('the first error stops DEL and the cache entry stays', () => {
    const { rt, log } = setup();
    const l = list('1.0.0');
    const result = rt.addNetworkList(l, rtc);
    writeFileSync(log, '');
    const failing: ConfList = {
      ...l,
      plugins: [{ type: 'a' }, { type: 'b', fail: { code: 11, msg: 'try again' } }],
    };
    assert.throws(() => rt.delNetworkList(failing, rtc), {
      message: 'b DEL failed (exit 1): [11] try again',
    });
    assert.deepEqual(
      calls(log).map((x) => x.plugin),
      ['b'],
    );
    assert.deepEqual(rt.getCachedResult(l, rtc), result);
  });
  test('an unreadable cache entry is deleted and DEL goes on without a prevResult', () => {
    const { rt, log } = setup();
    const l = list('1.0.0');
    rt.addNetworkList(l, rtc);
    writeFileSync(rt.cacheFile(l, rtc), '{not json');
    writeFileSync(log, '');
    const failing: ConfList = { ...l, plugins: [{ type: 'a', fail: { code: 11, msg: 'x' } }] };
    assert.throws(() => rt.delNetworkList(failing, rtc), RuntimeError);
    assert.equal('prevResult' in (calls(log)[0]?.conf ?? {}), false);
    assert.throws(() => statSync(rt.cacheFile(l, rtc)), { code: 'ENOENT' }, 'deleted before the plugins ran');
  });
});
