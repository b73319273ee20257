import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type AnyPlugin, invokeInProcess, type Plugin } from '@cnikit/skel';
import { handleNoPlugin, lazyFacade, selectPlugin } from './multicall.ts';

const plugins: AnyPlugin[] = [{ name: 'bridge' }, { name: 'loopback' }, { name: 'host-local' }];

describe('multicall name selection', () => {
  test('argv0 basename wins (hard link or symlink name)', () => {
    assert.equal(
      selectPlugin(plugins, '/opt/cni/bin/bridge', '/opt/cni/bin/bridge', []).plugin?.name,
      'bridge',
    );
    // symlink: execPath resolves to the target, argv0 keeps the link name
    assert.equal(
      selectPlugin(plugins, '/opt/cni/bin/loopback', '/opt/cni/bin/cnikit', []).plugin?.name,
      'loopback',
    );
    assert.equal(selectPlugin(plugins, 'host-local', '/x/host-local', ['a']).rest[0], 'a');
  });
  test('the executed hard link wins over an arbitrary argv0 (exec -a)', () => {
    const s = selectPlugin(plugins, 'weird', '/opt/cni/bin/bridge', []);
    assert.equal(s.plugin?.name, 'bridge');
    assert.equal(s.explicit, false);
  });
  test('explicit form: cnikit <plugin>', () => {
    const s = selectPlugin(plugins, '/opt/cni/bin/cnikit', '/opt/cni/bin/cnikit', ['loopback', 'x']);
    assert.equal(s.plugin?.name, 'loopback');
    assert.equal(s.explicit, true);
    assert.deepEqual(s.rest, ['x']);
  });
  test('unknown names', () => {
    const a = selectPlugin(plugins, '/usr/bin/portmap', '/usr/bin/portmap', []);
    assert.equal(a.plugin, undefined);
    assert.equal(a.name, 'portmap');
    const b = selectPlugin(plugins, 'cnikit', '/bin/cnikit', ['nope']);
    assert.equal(b.plugin, undefined);
    assert.equal(b.name, 'nope');
    const c = selectPlugin(plugins, 'cnikit', '/bin/cnikit', []);
    assert.equal(c.plugin, undefined);
    assert.equal(c.name, '');
  });
  test('unknown plugin: message on stderr, CNI error JSON on stdout only when CNI_COMMAND is set', () => {
    const run = (env: Record<string, string>, args: string[], argv0 = 'cnikit') => {
      let out = '';
      let err = '';
      const code = handleNoPlugin(plugins, selectPlugin(plugins, argv0, '/bin/cnikit', args), {
        env,
        stdout: { write: (s: string) => (out += s) },
        stderr: { write: (s: string) => (err += s) },
      });
      return { code, out, err };
    };
    const a = run({}, ['nope']);
    assert.equal(a.code, 1);
    assert.equal(a.out, '');
    assert.match(a.err, /unknown plugin "nope"/);
    assert.match(a.err, /plugins: bridge, host-local, loopback/);
    const b = run({ CNI_COMMAND: 'ADD' }, [], 'portmap');
    assert.equal(b.code, 1);
    assert.deepEqual(JSON.parse(b.out), {
      code: 999,
      msg: 'cnikit: unknown plugin "portmap"',
      details: 'available plugins: bridge, host-local, loopback',
    });
    const c = run({}, []);
    assert.equal(c.code, 1);
    assert.match(c.err, /no plugin selected/);
    const d = run({}, ['--list']);
    assert.equal(d.code, 0);
    assert.equal(d.out, 'bridge\nhost-local\nloopback\n');
    const e = run({}, ['--help']);
    assert.equal(e.code, 0);
    assert.match(e.out, /usage: cnikit <plugin>/);
    // every subcommand of the executable is named
    assert.match(e.out, /^cnitool: cnikit tool add\|check\|del\|gc\|status/m);
    assert.match(e.out, /^warm mode: cnikit serve /m);
    assert.match(e.out, /^conformance: cnikit conformance /m);
    assert.match(e.out, /^version: cnikit --version/m);
  });
});

describe('lazy facade (in-process delegates of the executable)', () => {
  test('forwards every key of the plugin, the config decoder included, and loads the module once', async () => {
    let loads = 0;
    const seen: unknown[] = [];
    const real: Plugin<{ dir: string }> = {
      name: 'ipam-x',
      about: 'x',
      versions: ['1.1.0'],
      parsePrevResult: false,
      prevResultErrorPrefix: 'p: ',
      conf: (raw) => ({ dir: `decoded:${String(raw.dataDir)}` }),
      del(req) {
        seen.push(req.conf.dir);
      },
      commands: { daemon: async () => 0 },
    };
    const facade = lazyFacade({
      name: 'ipam-x',
      load: () => {
        loads++;
        return real as AnyPlugin;
      },
    });
    assert.equal(loads, 0);
    for (const key of Object.keys(real) as Array<keyof AnyPlugin>) {
      if (typeof real[key] !== 'function') assert.deepEqual(facade[key], real[key], key);
      else assert.equal(typeof facade[key], 'function', key);
    }
    const r = await invokeInProcess(
      facade,
      { CNI_COMMAND: 'DEL', CNI_CONTAINERID: 'c', CNI_IFNAME: 'eth0', CNI_PATH: '/x' },
      JSON.stringify({ cniVersion: '1.1.0', name: 'n', type: 'ipam-x', dataDir: '/d' }),
    );
    assert.equal(r.code, 0, r.stdout);
    assert.deepEqual(seen, ['decoded:/d']);
    assert.equal(loads, 1);
  });
});
