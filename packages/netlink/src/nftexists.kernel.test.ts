// nftExists against the real kernel, inside namespaces this file creates; objects are made with nft / iptables.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, test } from 'node:test';
import { withNetns } from './netns.ts';
import { NFPROTO, nftExists, nftGetRequest, xtablesTableLoaded } from './nftexists.ts';
import { run, withTestNs } from './testns.ts';

describe('nftExists', () => {
  test('request bytes: nfnetlink GETCHAIN with table and chain names', () => {
    const b = nftGetRequest('ip6', 'nat', 'CNI-x', 7);
    assert.equal(b.readUInt32LE(0), b.length);
    assert.equal(b.readUInt16LE(4), (10 << 8) | 4);
    assert.equal(b.readUInt32LE(8), 7);
    assert.equal(b[16], NFPROTO.ip6);
    assert.ok(b.includes(Buffer.from('nat\0')) && b.includes(Buffer.from('CNI-x\0')));
    assert.equal(nftGetRequest('inet', 't', undefined, 1).readUInt16LE(4), (10 << 8) | 1);
    // exact bytes (header, nfgenmsg, NUL-terminated padded string attributes)
    assert.equal(
      b.toString('hex'),
      '28000000040a050007000000000000000a000000080001006e6174000a000300434e492d78000000',
    );
    assert.equal(
      nftGetRequest('inet', 'filter', undefined, 0xfffffff1).toString('hex'),
      '20000000010a0500f1ffffff00000000010000000b00010066696c7465720000',
    );
  });

  test('tables and chains: absent, then present (per family), in the namespace it runs in', () => {
    withTestNs(1, (ns) => {
      const probe = () =>
        withNetns(ns.path, () => ({
          table: nftExists('inet', 'cnikit_nfx'),
          chain: nftExists('inet', 'cnikit_nfx', 'c1'),
          v4: nftExists('ip', 'nat', 'CNI-nfx'),
          v6: nftExists('ip6', 'nat', 'CNI-nfx'),
        }));
      assert.deepEqual(probe(), { table: false, chain: false, v4: false, v6: false });
      run('ip', ['netns', 'exec', ns.name, 'nft', 'add table inet cnikit_nfx']);
      assert.deepEqual(probe(), { table: true, chain: false, v4: false, v6: false });
      run('ip', ['netns', 'exec', ns.name, 'nft', 'add chain inet cnikit_nfx c1']);
      run('ip', ['netns', 'exec', ns.name, 'iptables', '-w', '-t', 'nat', '-N', 'CNI-nfx']);
      // iptables-nft keeps its chains in nftables (`ip nat`); with iptables-legacy they are not visible here
      const nftBackend = run('iptables', ['-V']).includes('nf_tables');
      assert.deepEqual(probe(), { table: true, chain: true, v4: nftBackend, v6: false });
      // the machine's own namespace is not where the objects are
      assert.equal(nftExists('inet', 'cnikit_nfx'), false);
    });
  });
});

describe('xtablesTableLoaded', () => {
  test('legacy x_tables nat table: absent in a fresh namespace, present after iptables-legacy uses it', () => {
    withTestNs(1, (ns) => {
      const probe = () =>
        withNetns(ns.path, () => ({ v4: xtablesTableLoaded(4, 'nat'), v6: xtablesTableLoaded(6, 'nat') }));
      assert.deepEqual(probe(), { v4: false, v6: false });
      const r = spawnSync('ip', ['netns', 'exec', ns.name, 'iptables-legacy', '-t', 'nat', '-S'], {
        encoding: 'utf8',
      });
      // the tool comes with Debian's iptables package (.ci/run installs it), the table with every kernel this runs on
      // (built in here, a module the kernel lab loads at boot): either missing is a failure, never a skip
      assert.ifError(r.error);
      assert.equal(r.status, 0, r.stderr);
      assert.deepEqual(probe(), { v4: true, v6: false });
      // only this namespace: another fresh one still has none
      withTestNs(1, (other) =>
        assert.equal(
          withNetns(other.path, () => xtablesTableLoaded(4, 'nat')),
          false,
        ),
      );
      assert.equal(
        withNetns(ns.path, () => xtablesTableLoaded(4, 'filter')),
        false,
      );
    });
  });
});
