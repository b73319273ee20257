/**
 * Configuration loading and validation against fixtures in the reference's formats, with the reference's error texts
 * (libcni/conf.go, spec 1.1.0 §Configuration).
 */
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { tempDir } from '@cnikit/testing';
import {
  confFiles,
  confListFromBytes,
  confListFromConf,
  confListFromFile,
  goMarshal,
  injectConf,
  loadConf,
  loadNetworkConf,
  pluginConfFromBytes,
} from './conf.ts';
import { ConfigError, LibcniError, NoConfigsFoundError, NotFoundError } from './errors.ts';

const dec = new TextDecoder();

function rejects(fn: () => unknown, message: string, cls: { is(v: unknown): boolean } = ConfigError): void {
  let caught: unknown;
  try {
    fn();
  } catch (e) {
    caught = e;
  }
  assert.ok(caught, `expected an error: ${message}`);
  assert.ok(cls.is(caught), `${(caught as Error).name}: ${(caught as Error).message}`);
  assert.equal((caught as Error).message, message);
}

describe('confListFromBytes (Go NetworkConfFromBytes)', () => {
  test('a full list: fields, bools as strings in any case, plugin bytes re-marshalled like Go', () => {
    const l = confListFromBytes(
      JSON.stringify({
        cniVersion: '1.0.0',
        name: 'net1',
        disableCheck: 'TRUE',
        disableGC: true,
        plugins: [
          { type: 'bridge', bridge: 'cni0', ipam: { type: 'host-local', b: 1, a: '<&>' } },
          { type: 'portmap', capabilities: { portMappings: true, bandwidth: false } },
        ],
      }),
    );
    assert.equal(l.name, 'net1');
    assert.equal(l.cniVersion, '1.0.0');
    assert.equal(l.disableCheck, true);
    assert.equal(l.disableGC, true);
    assert.equal(l.loadOnlyInlinedPlugins, false);
    assert.deepEqual(
      l.plugins.map((p) => p.network),
      [
        { type: 'bridge', name: '', cniVersion: '', capabilities: {} },
        { type: 'portmap', name: '', cniVersion: '', capabilities: { portMappings: true, bandwidth: false } },
      ],
    );
    // keys sorted at every level, HTML characters escaped (Go json.Marshal of a map)
    assert.equal(
      dec.decode(l.plugins[0]!.bytes),
      '{"bridge":"cni0","ipam":{"a":"\\u003c\\u0026\\u003e","b":1,"type":"host-local"},"type":"bridge"}',
    );
  });
  test('cniVersions: the highest version this library knows, together with cniVersion', () => {
    const pick = (extra: object) =>
      confListFromBytes(JSON.stringify({ name: 'n', plugins: [{ type: 'x' }], ...extra })).cniVersion;
    assert.equal(pick({ cniVersion: '1.0.0', cniVersions: ['0.4.0', '1.0.0', '1.1.0', '2.0.0'] }), '1.1.0');
    assert.equal(pick({ cniVersion: '0.3.1', cniVersions: ['0.4.0'] }), '0.4.0');
    assert.equal(pick({ cniVersions: ['3.0.0'] }), '');
    assert.equal(pick({ cniVersion: '9.0.0', cniVersions: ['0.4.0'] }), '0.4.0');
    assert.equal(pick({}), '');
  });
  test('every validation error with the reference text', () => {
    const L = 'error parsing configuration list';
    const cases: Array<[string, string]> = [
      ['{', `${L}: unexpected end of JSON input`],
      ['[]', `${L}: json: cannot unmarshal array into Go value of type map[string]interface {}`],
      ['{}', `${L}: no name`],
      ['{"name":5}', `${L}: invalid name type float64`],
      ['{"name":null}', `${L}: invalid name type <nil>`],
      ['{"name":"n","cniVersion":1}', `${L}: invalid cniVersion type float64`],
      ['{"name":"n","cniVersions":"1.0.0"}', `${L}: invalid type for cniVersions: []interface {}`],
      ['{"name":"n","cniVersions":[1]}', `${L}: invalid type for cniVersions index 0: float64`],
      [
        '{"name":"n","cniVersions":["x.1"]}',
        `${L}: invalid cniVersions entry x.1 at index 0: failed to convert major version part "x": strconv.Atoi: parsing "x": invalid syntax`,
      ],
      ['{"name":"n","disableCheck":1}', `${L}: invalid type float64 for disableCheck`],
      ['{"name":"n","disableGC":"yes"}', `${L}: invalid value "yes" for disableGC`],
      [
        '{"name":"n","loadOnlyInlinedPlugins":true}',
        `${L}: \`loadOnlyInlinedPlugins\` is true, and no 'plugins' key`,
      ],
      ['{"name":"n","plugins":{}}', `${L}: invalid 'plugins' type map[string]interface {}`],
      ['{"name":"n","plugins":[]}', `${L}: no plugins in list`],
      [
        '{"name":"n","plugins":[{}]}',
        "failed to parse plugin config 0: error parsing configuration: missing 'type'",
      ],
      [
        '{"name":"n","plugins":[{"type":"a"},"x"]}',
        'failed to parse plugin config 1: error parsing configuration: json: cannot unmarshal string into Go value of type types.PluginConf',
      ],
      [
        '{"name":"n","plugins":[{"type":1}]}',
        'failed to parse plugin config 0: error parsing configuration: json: cannot unmarshal number into Go struct field PluginConf.type of type string',
      ],
      [
        '{"name":"n","plugins":[{"type":"a","capabilities":{"x":"yes"}}]}',
        'failed to parse plugin config 0: error parsing configuration: json: cannot unmarshal string into Go struct field PluginConf.capabilities of type bool',
      ],
    ];
    for (const [input, message] of cases) rejects(() => confListFromBytes(input), message);
  });
  test('Go key matching for plugin fields: case-insensitive, null ignored', () => {
    const p = pluginConfFromBytes('{"TYPE":"a","Name":"x","cniversion":"0.4.0","name":null}');
    assert.deepEqual(p.network, { type: 'a', name: 'x', cniVersion: '0.4.0', capabilities: {} });
  });
  test('a list without plugins parses (a file adds them from its directory)', () => {
    const l = confListFromBytes('{"name":"n","cniVersion":"1.1.0"}');
    assert.deepEqual(l.plugins, []);
  });
});

describe('files and directories (ConfFiles, NetworkConfFromFile, LoadNetworkConf)', () => {
  test('confFiles: sorted, by extension, directories skipped, a missing directory is empty', () => {
    using d = tempDir('libcni-conf');
    for (const f of ['b.conf', 'a.conflist', 'c.json', 'x.txt']) writeFileSync(join(d.path, f), '{}');
    mkdirSync(join(d.path, 'dir.conf'));
    assert.deepEqual(confFiles(d.path, ['.conf', '.json']), [join(d.path, 'b.conf'), join(d.path, 'c.json')]);
    assert.deepEqual(confFiles(join(d.path, 'none'), ['.conf']), []);
  });
  test('a conflist file gets the plugins of <dir>/<network>/*.conf appended, unless loadOnlyInlinedPlugins', () => {
    using d = tempDir('libcni-conf');
    writeFileSync(
      join(d.path, '10-net.conflist'),
      JSON.stringify({ cniVersion: '1.1.0', name: 'mynet', plugins: [{ type: 'bridge' }] }),
    );
    mkdirSync(join(d.path, 'mynet'));
    writeFileSync(join(d.path, 'mynet', '20-tuning.conf'), '{"type":"tuning"}');
    writeFileSync(
      join(d.path, 'mynet', '10-portmap.conf'),
      '{"type":"portmap","capabilities":{"portMappings":true}}',
    );
    writeFileSync(join(d.path, 'mynet', 'ignored.json'), '{"type":"nope"}');
    const l = confListFromFile(join(d.path, '10-net.conflist'));
    assert.deepEqual(
      l.plugins.map((p) => p.network.type),
      ['bridge', 'portmap', 'tuning'],
    );
    // the cache records the list file's own bytes
    assert.equal(
      dec.decode(l.bytes),
      JSON.stringify({ cniVersion: '1.1.0', name: 'mynet', plugins: [{ type: 'bridge' }] }),
    );

    writeFileSync(
      join(d.path, 'only.conflist'),
      '{"name":"mynet2","loadOnlyInlinedPlugins":"true","plugins":[{"type":"a"}]}',
    );
    mkdirSync(join(d.path, 'mynet2'));
    writeFileSync(join(d.path, 'mynet2', 'x.conf'), '{"type":"b"}');
    assert.deepEqual(
      confListFromFile(join(d.path, 'only.conflist')).plugins.map((p) => p.network.type),
      ['a'],
    );
    // a list with no inline plugins, all of them from the directory
    writeFileSync(join(d.path, 'dironly.conflist'), '{"name":"mynet","cniVersion":"1.1.0"}');
    assert.deepEqual(
      confListFromFile(join(d.path, 'dironly.conflist')).plugins.map((p) => p.network.type),
      ['portmap', 'tuning'],
    );
    writeFileSync(join(d.path, 'empty.conflist'), '{"name":"nothing"}');
    rejects(() => confListFromFile(join(d.path, 'empty.conflist')), 'no plugin configs found');
    writeFileSync(join(d.path, 'mynet', '30-bad.conf'), '{"type":""}');
    rejects(
      () => confListFromFile(join(d.path, '10-net.conflist')),
      `${join(d.path, 'mynet', '30-bad.conf')}: error parsing configuration: missing 'type'`,
    );
    // malformed JSON: the file, the line and the column, then Go's text
    writeFileSync(join(d.path, 'bad.conflist'), '{"name":"x",\n "plugins": [ {"type":"a",} ]}\n');
    rejects(
      () => confListFromFile(join(d.path, 'bad.conflist')),
      `${join(d.path, 'bad.conflist')}:2:27: error parsing configuration list: invalid character '}' looking for beginning of object key string`,
    );
    writeFileSync(join(d.path, 'cut.conflist'), '{"name":"x",\n "plugins": [');
    rejects(
      () => confListFromFile(join(d.path, 'cut.conflist')),
      `${join(d.path, 'cut.conflist')}:2:14: error parsing configuration list: unexpected end of JSON input`,
    );
    rejects(
      () => confListFromFile(join(d.path, 'missing.conflist')),
      `error reading ${join(d.path, 'missing.conflist')}: open ${join(d.path, 'missing.conflist')}: no such file or directory`,
    );
  });
  test('loadNetworkConf: first match in name order; every earlier file must parse; .conf promoted to a list', () => {
    using d = tempDir('libcni-conf');
    writeFileSync(
      join(d.path, '20-b.conflist'),
      '{"name":"net","cniVersion":"1.0.0","plugins":[{"type":"second"}]}',
    );
    writeFileSync(
      join(d.path, '10-a.conflist'),
      '{"name":"net","cniVersion":"1.0.0","plugins":[{"type":"first"}]}',
    );
    writeFileSync(
      join(d.path, '30-single.conf'),
      '{"name":"single","cniVersion":"0.4.0","type":"bridge","zz":1,"aa":2}',
    );
    assert.equal(loadNetworkConf(d.path, 'net').plugins[0]!.network.type, 'first');
    const single = loadNetworkConf(d.path, 'single');
    assert.equal(single.name, 'single');
    assert.equal(single.cniVersion, '0.4.0');
    assert.equal(single.plugins.length, 1);
    assert.equal(
      dec.decode(single.bytes),
      '{"cniVersion":"0.4.0","name":"single","plugins":[{"aa":2,"cniVersion":"0.4.0","name":"single","type":"bridge","zz":1}]}',
    );
    rejects(
      () => loadNetworkConf(d.path, 'other'),
      `no net configuration with name "other" in ${d.path}`,
      NotFoundError,
    );
    // an unrelated broken list that sorts first breaks every lookup (like Go)
    writeFileSync(join(d.path, '00-broken.conflist'), '{"name":"broken","plugins":[]}');
    rejects(
      () => loadNetworkConf(d.path, 'net'),
      `${join(d.path, '00-broken.conflist')}: error parsing configuration list: no plugins in list`,
    );
  });
  test('NotFound vs NoConfigsFound like the reference', () => {
    using d = tempDir('libcni-conf');
    rejects(
      () => loadNetworkConf(d.path, 'x'),
      `no net configurations found in ${d.path}`,
      NoConfigsFoundError,
    );
    rejects(() => loadConf(d.path, 'x'), `no net configurations found in ${d.path}`, NoConfigsFoundError);
    writeFileSync(join(d.path, 'a.conflist'), '{"name":"a","plugins":[{"type":"t"}]}');
    // only lists, none named x: NotFound, not NoConfigsFound
    rejects(
      () => loadNetworkConf(d.path, 'x'),
      `no net configuration with name "x" in ${d.path}`,
      NotFoundError,
    );
    assert.ok(NotFoundError.is(new NotFoundError('d', 'n')) && ConfigError.is(new NotFoundError('d', 'n')));
    assert.ok(new NotFoundError('d', 'n') instanceof LibcniError);
    assert.ok(!(new ConfigError('x') instanceof NotFoundError));
  });
});

describe('injectConf / confListFromConf / goMarshal', () => {
  test('injectConf sets keys and re-serialises; empty key or nil value are errors', () => {
    const p = pluginConfFromBytes('{"type":"a","name":"old","x":{"b":1,"a":2}}');
    const q = injectConf(p, { name: 'new', cniVersion: '1.0.0' });
    assert.equal(dec.decode(q.bytes), '{"cniVersion":"1.0.0","name":"new","type":"a","x":{"a":2,"b":1}}');
    assert.equal(q.network.name, 'new');
    rejects(() => injectConf(p, { '': 1 }), 'keys cannot be empty', LibcniError);
    rejects(() => injectConf(p, { k: null }), "key 'k' value must not be nil", LibcniError);
  });
  test('confListFromConf keeps the plugin object and takes its name and version', () => {
    const l = confListFromConf(pluginConfFromBytes('{"type":"a","name":"n","cniVersion":"0.3.1"}'));
    assert.equal(l.name, 'n');
    assert.equal(l.cniVersion, '0.3.1');
    assert.equal(dec.decode(l.plugins[0]!.bytes), '{"cniVersion":"0.3.1","name":"n","type":"a"}');
  });
  test('goMarshal escapes like Go', () => {
    assert.equal(
      goMarshal({ b: '\u2028<', a: [{ d: 1, c: 2 }] }),
      '{"a":[{"c":2,"d":1}],"b":"\\u2028\\u003c"}',
    );
  });
});
