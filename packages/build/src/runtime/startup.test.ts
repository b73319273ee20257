import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { LazyPlugin } from './multicall.ts';
import { versionOnly } from './startup.ts';

const meta = { about: 'a', versions: ['1.0.0'] };
const lazy = (name: string, m: LazyPlugin['meta'] | null = meta): LazyPlugin => ({
  name,
  load: () => {
    throw new Error('not loaded on the start-up path');
  },
  ...(m ? { meta: m } : {}),
});
const plugins = [lazy('bridge'), lazy('loopback', { about: 'l', versions: ['0.4.0'] })];
const call = (argv0: string, args: string[] = [], env: Record<string, string> = { CNI_COMMAND: 'VERSION' }) =>
  versionOnly(plugins, {}, { env, argv0, execPath: '/opt/cni/bin/cnikit', args });

describe('the start-up path (runtime/startup.ts): which invocations it answers without the SDK', () => {
  test('VERSION of a plugin by its link name or as `cnikit <plugin>`: the recorded metadata', () => {
    assert.deepEqual(call('/opt/cni/bin/bridge'), meta);
    assert.deepEqual(call('loopback'), { about: 'l', versions: ['0.4.0'] });
    assert.deepEqual(call('/opt/cni/bin/cnikit', ['bridge']), meta);
  });

  test('everything else goes to the multicall entry: other commands, unknown names, the words of cnikit', () => {
    assert.equal(call('/opt/cni/bin/bridge', [], { CNI_COMMAND: 'ADD' }), undefined);
    assert.equal(call('/opt/cni/bin/bridge', [], {}), undefined, 'a bare invocation prints the about text');
    assert.equal(call('/opt/cni/bin/nope'), undefined);
    assert.equal(call('/opt/cni/bin/cnikit', ['nope']), undefined);
    assert.equal(call('/opt/cni/bin/cnikit'), undefined);
    for (const word of ['serve', 'conformance', 'install-cni', 'tool'])
      assert.equal(call('/opt/cni/bin/cnikit', [word, 'bridge']), undefined, word);
    assert.equal(call('/opt/cni/bin/cnitool', ['bridge']), undefined, 'cnitool');
    // a plugin without recorded metadata is evaluated by the multicall entry
    assert.equal(
      versionOnly(
        [lazy('x', null)],
        {},
        { env: { CNI_COMMAND: 'VERSION' }, argv0: 'x', execPath: 'x', args: [] },
      ),
      undefined,
    );
  });
});
