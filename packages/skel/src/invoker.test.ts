import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, describe, test } from 'node:test';
// a program holding plugin objects has loaded the dispatcher: it registers the Invokers' in-process runner
import './dispatch.ts';
import { CniError } from './errors.ts';
import { defaultInvoker, delegateAdd, Invoker, inProcessPlugin } from './invoke.ts';
import type { AnyPlugin, RequestBase } from './types.ts';

type InvokerType = Invoker;

const dir = mkdtempSync(join(tmpdir(), 'cnikit-invoker-'));
after(() => rmSync(dir, { recursive: true, force: true }));
// regular files that are never executed: the Invokers below run these names in-process
for (const name of ['outer', 'inner', 'other', 'plain']) writeFileSync(join(dir, name), '');
const path = (name: string) => join(dir, name);
const conf = (type: string) => JSON.stringify({ cniVersion: '1.1.0', name: 'net', type });
const env = (command: string) => ({
  CNI_COMMAND: command,
  CNI_CONTAINERID: 'c1',
  CNI_NETNS: '/proc/self/ns/net',
  CNI_IFNAME: 'eth0',
  CNI_PATH: dir,
  CNI_NETNS_OVERRIDE: '1',
});
const dec = new TextDecoder();

/** `outer` delegates ADD to `inner` with the free function, recording which Invoker each request carried. */
function plugins(seen: Array<[string, InvokerType | undefined]>): AnyPlugin[] {
  const inner: AnyPlugin = {
    name: 'inner',
    add: (req) => {
      seen.push(['inner', req.invoker]);
      return { cniVersion: '1.1.0', ips: [{ address: '10.1.2.3/24' }] };
    },
  };
  const outer: AnyPlugin = {
    name: 'outer',
    add: async (req) => {
      seen.push(['outer', req.invoker]);
      const r = await delegateAdd('inner', req, { stdin: conf('inner') });
      return { ...r, interfaces: [{ name: 'eth0' }] };
    },
  };
  return [outer, inner];
}

describe('Invoker (executor passed in)', () => {
  test('a plugin run in-process gets the Invoker in req.invoker, and its delegation runs through it (no global registry)', async () => {
    const seen: Array<[string, InvokerType | undefined]> = [];
    const inv = new Invoker({ plugins: plugins(seen), isSelf: (p) => dirname(p) === dir });
    const out = await inv.execPlugin(path('outer'), conf('outer'), env('ADD'), { write: () => true });
    assert.deepEqual(JSON.parse(dec.decode(out)), {
      cniVersion: '1.1.0',
      interfaces: [{ name: 'eth0' }],
      ips: [{ address: '10.1.2.3/24' }],
    });
    assert.deepEqual(
      seen.map(([n, i]) => [n, i === inv]),
      [
        ['outer', true],
        ['inner', true],
      ],
    );
    // nothing leaked into the default Invoker
    assert.equal(defaultInvoker.get('outer'), undefined);
    assert.equal(inProcessPlugin(path('outer')), undefined);
  });

  test('isSelf decides; without it (and without anyPath) a registered plugin is not this file', async () => {
    const seen: Array<[string, InvokerType | undefined]> = [];
    const [outer] = plugins(seen);
    const notSelf = new Invoker({ plugins: [outer!], isSelf: () => false });
    assert.equal(notSelf.inProcessPlugin(path('outer')), undefined);
    // the empty file is then exec'd: the kernel refuses it, worded like Go
    const err = await notSelf.execPlugin(path('outer'), conf('outer'), env('ADD')).catch((e) => e);
    assert.ok(CniError.is(err));
    assert.match(err.msg, /exec format error|netplugin failed/);
    assert.deepEqual(seen, []);
    const anyPath = new Invoker({ plugins: [outer!], anyPath: true, isSelf: () => false });
    assert.equal(anyPath.inProcessPlugin(path('outer')), outer);
    assert.equal(anyPath.inProcessPlugin(path('plain')), undefined, 'the file name selects the plugin');
  });

  test('register replaces and toggles anyPath; fallback is asked for what an Invoker does not hold', () => {
    const other: AnyPlugin = { name: 'other' };
    const base = new Invoker({ isSelf: () => false });
    base.register(other, { anyPath: true });
    const inv = new Invoker({ fallback: base, isSelf: () => false });
    assert.equal(inv.get('other'), other);
    assert.equal(inv.inProcessPlugin(path('other')), other);
    base.register(other); // anyPath off again
    assert.equal(inv.inProcessPlugin(path('other')), undefined);
    const mine: AnyPlugin = { name: 'other' };
    inv.register(mine, { anyPath: true });
    assert.equal(inv.inProcessPlugin(path('other')), mine, 'its own plugin first');
  });

  test('delegation without req.invoker uses the default Invoker', async () => {
    const req = {
      command: 'ADD',
      containerId: 'c1',
      netns: '',
      ifName: 'eth0',
      args: '',
      path: [dir],
      stdin: new TextEncoder().encode(conf('outer')),
      config: { cniVersion: '1.1.0', name: 'net', type: 'outer' },
      cniVersion: '1.1.0',
      env: env('ADD'),
      log: { debug() {}, info() {}, warn() {}, error() {} },
      stderr: { write: () => true },
    } as unknown as RequestBase;
    // 'inner' is registered nowhere but in the Invokers of the tests above: the empty file is exec'd and fails
    const err = await delegateAdd('inner', req).catch((e) => e);
    assert.ok(CniError.is(err));
  });
});

describe('@cnikit/skel/invoke, the caller side', () => {
  /** The modules a file imports at run time (type-only imports and dynamic import() left out), transitively. */
  function staticGraph(file: string, seen = new Set<string>()): Set<string> {
    if (seen.has(file)) return seen;
    seen.add(file);
    const src = readFileSync(file, 'utf8');
    for (const m of src.matchAll(/^(?:import|export)\s+(?!type\s)[^;]*?from\s+'(\.[^']+)';/gms)) {
      staticGraph(resolve(dirname(file), m[1]!), seen);
    }
    return seen;
  }
  test('does not load the plugin dispatcher (libcni imports only this)', () => {
    const here = dirname(new URL(import.meta.url).pathname);
    const names = [...staticGraph(join(here, 'invoke.ts'))].map((f) => f.slice(here.length + 1)).sort();
    assert.ok(names.includes('exec.ts') && names.includes('result.ts'), names.join(' '));
    for (const plugin of ['dispatch.ts', 'process.ts', 'log.ts', 'args.ts', 'conventions.ts']) {
      assert.ok(!names.includes(plugin), `${plugin} in ${names.join(' ')}`);
    }
    const pkg = JSON.parse(readFileSync(join(here, '..', 'package.json'), 'utf8'));
    assert.equal(pkg.exports['./invoke']['cnikit-source'], './src/invoke.ts');
    const libcni = join(here, '..', '..', 'libcni', 'src');
    for (const f of ['api.ts', 'exec.ts', 'cache.ts', 'conf.ts', 'cnitool.ts', 'errors.ts']) {
      assert.doesNotMatch(readFileSync(join(libcni, f), 'utf8'), /from '@cnikit\/skel';/, f);
    }
  });
});
