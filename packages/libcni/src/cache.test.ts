/**
 * The result cache against fixtures in Go libcni's format (cachedInfo as `json.Marshal` writes it: struct field
 * order, omitempty, maps with sorted keys, `config` base64, HTML characters escaped), read both ways.
 */
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { parseResult } from '@cnikit/skel';
import { tempDir } from '@cnikit/testing';
import {
  cacheAdd,
  cacheDel,
  cacheFilePath,
  encodeCacheEntry,
  getCachedAttachments,
  getCachedConfig,
  getCachedResult,
} from './cache.ts';
import { CacheError } from './errors.ts';

const LIST = '{"cniVersion":"1.0.0","name":"net1","plugins":[{"type":"bridge"}]}';
const LIST_B64 = 'eyJjbmlWZXJzaW9uIjoiMS4wLjAiLCJuYW1lIjoibmV0MSIsInBsdWdpbnMiOlt7InR5cGUiOiJicmlkZ2UifV19';
const enc = new TextEncoder();

/** What Go libcni writes for this ADD (cachedInfo field order; result and capabilityArgs are maps: sorted keys). */
const GO_ENTRY =
  '{"kind":"cniCacheV1","containerId":"ctr1","config":"' +
  LIST_B64 +
  '","ifName":"eth0","networkName":"net1","netns":"/run/netns/x","cniArgs":[["IgnoreUnknown","1"],["K8S_POD_NAME","a\\u003cb"]],' +
  '"capabilityArgs":{"portMappings":[{"containerPort":80,"hostPort":8080,"protocol":"tcp"}]},' +
  '"result":{"cniVersion":"1.0.0","interfaces":[{"mac":"0a:58:0a:00:00:01","name":"cni0"},{"mac":"0a:58:0a:00:00:05","name":"eth0","sandbox":"/run/netns/x"}],' +
  '"ips":[{"address":"10.0.0.5/24","gateway":"10.0.0.1","interface":1}],"routes":[{"dst":"0.0.0.0/0","gw":"10.0.0.1"}]}}';

const RESULT_100 = parseResult({
  cniVersion: '1.0.0',
  interfaces: [
    { name: 'cni0', mac: '0a:58:0a:00:00:01' },
    { name: 'eth0', mac: '0a:58:0a:00:00:05', sandbox: '/run/netns/x' },
  ],
  ips: [{ address: '10.0.0.5/24', gateway: '10.0.0.1', interface: 1 }],
  routes: [{ dst: '0.0.0.0/0', gw: '10.0.0.1' }],
  dns: {},
});

const RT = {
  containerId: 'ctr1',
  netns: '/run/netns/x',
  ifName: 'eth0',
  args: [
    ['IgnoreUnknown', '1'],
    ['K8S_POD_NAME', 'a<b'],
  ] as Array<[string, string]>,
  capabilityArgs: { portMappings: [{ hostPort: 8080, containerPort: 80, protocol: 'tcp' }] },
};

describe('cache entries in the reference format', () => {
  test('written byte for byte as Go libcni writes them, 0600 in a 0700 results directory', () => {
    assert.equal(encodeCacheEntry(RESULT_100, enc.encode(LIST), 'net1', RT), GO_ENTRY);
    using d = tempDir('libcni-cache');
    cacheAdd(d.path, RESULT_100, enc.encode(LIST), 'net1', RT);
    const file = join(d.path, 'results', 'net1-ctr1-eth0');
    assert.equal(readFileSync(file, 'utf8'), GO_ENTRY);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.equal(statSync(join(d.path, 'results')).mode & 0o777, 0o700);
  });
  test('empty netns, args and capability args are left out (omitempty)', () => {
    const text = encodeCacheEntry(RESULT_100, enc.encode(LIST), 'net1', {
      containerId: 'c',
      ifName: 'eth0',
      netns: '',
      args: [],
      capabilityArgs: {},
    });
    assert.deepEqual(Object.keys(JSON.parse(text)), [
      'kind',
      'containerId',
      'config',
      'ifName',
      'networkName',
      'result',
    ]);
  });
  test('a 0.4.0 result is cached as Go re-marshals it (version kept, dns {} present, keys sorted)', () => {
    const r = parseResult({
      cniVersion: '0.4.0',
      ips: [{ version: '4', address: '10.1.0.2/16', interface: 0 }],
    });
    const text = encodeCacheEntry(r, enc.encode('{}'), 'n', { containerId: 'c', ifName: 'eth0' });
    assert.match(
      text,
      /"result":\{"cniVersion":"0\.4\.0","dns":\{\},"ips":\[\{"address":"10\.1\.0\.2\/16","interface":0,"version":"4"\}\]\}\}$/,
    );
  });
  test('a Go-written entry is read back: result converted to the list version, config and args restored', () => {
    using d = tempDir('libcni-cache');
    mkdirSync(join(d.path, 'results'), { recursive: true });
    writeFileSync(join(d.path, 'results', 'net1-ctr1-eth0'), GO_ENTRY);
    const key = { containerId: 'ctr1', ifName: 'eth0' };
    assert.deepEqual(getCachedResult(d.path, 'net1', '1.0.0', key), RESULT_100);
    // CHECK/DEL of a 0.4.0 list get the cached result in 0.4.0 shape
    assert.deepEqual(getCachedResult(d.path, 'net1', '0.4.0', key), {
      cniVersion: '0.4.0',
      interfaces: [
        { name: 'cni0', mac: '0a:58:0a:00:00:01' },
        { name: 'eth0', mac: '0a:58:0a:00:00:05', sandbox: '/run/netns/x' },
      ],
      ips: [{ version: '4', address: '10.0.0.5/24', gateway: '10.0.0.1', interface: 1 }],
      routes: [{ dst: '0.0.0.0/0', gw: '10.0.0.1' }],
      dns: {},
    });
    const cfg = getCachedConfig(d.path, 'net1', key);
    assert.equal(new TextDecoder().decode(cfg?.config), LIST);
    assert.deepEqual(cfg?.rt, { ...key, args: RT.args, capabilityArgs: RT.capabilityArgs });
    assert.equal(
      getCachedResult(d.path, 'net1', '1.0.0', { containerId: 'other', ifName: 'eth0' }),
      undefined,
    );
  });
  test('a legacy entry (the file is the result) is read like Go; a broken one is an error', () => {
    using d = tempDir('libcni-cache');
    mkdirSync(join(d.path, 'results'), { recursive: true });
    writeFileSync(
      join(d.path, 'results', 'n-c-eth0'),
      '{"cniVersion":"0.3.1","ips":[{"version":"4","address":"10.2.0.3/24"}],"dns":{}}',
    );
    assert.deepEqual(getCachedResult(d.path, 'n', '1.0.0', { containerId: 'c', ifName: 'eth0' }), {
      cniVersion: '1.0.0',
      ips: [{ address: '10.2.0.3/24' }],
    });
    writeFileSync(
      join(d.path, 'results', 'n-c-eth0'),
      '{"cniVersion":"0.3.1","ips":[{"version":"4","address":"bogus"}]}',
    );
    assert.throws(
      () => getCachedResult(d.path, 'n', '1.0.0', { containerId: 'c', ifName: 'eth0' }),
      CacheError,
    );
    // a result that cannot be converted to the list's version
    writeFileSync(
      join(d.path, 'results', 'n-c-eth0'),
      '{"kind":"cniCacheV1","result":{"cniVersion":"1.0.0"}}',
    );
    assert.throws(() => getCachedResult(d.path, 'n', '0.2.0', { containerId: 'c', ifName: 'eth0' }), {
      message:
        'failed to convert cached result to config version "0.2.0": cannot convert: no valid IP addresses',
    });
    assert.equal(getCachedConfig(d.path, 'n', { containerId: 'c', ifName: 'eth0' })?.config.length, 0);
    writeFileSync(join(d.path, 'results', 'n-c-eth0'), '{"kind":"other"}');
    assert.throws(() => getCachedConfig(d.path, 'n', { containerId: 'c', ifName: 'eth0' }), {
      message: 'read cached network "n" config has wrong kind: other',
    });
  });
  test('the path needs network, container ID and ifname', () => {
    assert.throws(() => cacheFilePath('/x', '', { containerId: 'c', ifName: 'eth0' }), {
      message: 'cache file path requires network name (""), container ID ("c"), and interface name ("eth0")',
    });
    cacheDel('/nonexistent', '', { containerId: '', ifName: '' }); // never throws
  });
  test('GetCachedAttachments: name order, container filter, foreign and incomplete files skipped', () => {
    using d = tempDir('libcni-cache');
    const dir = join(d.path, 'results');
    assert.deepEqual(getCachedAttachments(d.path), []);
    cacheAdd(d.path, RESULT_100, enc.encode(LIST), 'net1', RT);
    cacheAdd(d.path, RESULT_100, enc.encode(LIST), 'net2', { containerId: 'ctr2', ifName: 'net0' });
    cacheAdd(d.path, RESULT_100, enc.encode(LIST), 'a', { containerId: 'ctr1', ifName: 'eth1' });
    writeFileSync(join(dir, 'x-ctr1-eth2'), '{"kind":"cniCacheV1","containerId":"ctr1","networkName":"x"}'); // no ifName
    writeFileSync(join(dir, 'y-ctr1-eth3'), 'not json');
    writeFileSync(join(dir, 'z-ctr1-eth4'), '{"kind":"v0"}');
    const all = getCachedAttachments(d.path);
    assert.deepEqual(
      all.map((a) => [a.network, a.containerId, a.ifName]),
      [
        ['a', 'ctr1', 'eth1'],
        ['net1', 'ctr1', 'eth0'],
        ['net2', 'ctr2', 'net0'],
      ],
    );
    assert.equal(all[1]?.netns, '/run/netns/x');
    assert.deepEqual(all[1]?.cniArgs, RT.args);
    assert.deepEqual(all[1]?.capabilityArgs, RT.capabilityArgs);
    assert.equal(new TextDecoder().decode(all[1]?.config), LIST);
    assert.deepEqual(
      getCachedAttachments(d.path, 'ctr2').map((a) => a.network),
      ['net2'],
    );
    assert.deepEqual(getCachedAttachments(d.path, 'ctr'), []);
  });
});
