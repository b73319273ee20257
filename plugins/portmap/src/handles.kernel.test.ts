// portmap's jump records (packages/firewall/src/handles.ts) against the kernel, in a private namespace: ADD records
// the handles of its CNI-HOSTPORT-DNAT jumps, DEL fetches them by handle (no listing of CNI-HOSTPORT-DNAT), and
// with the Go portmap in between (Go DEL, Go ADD of the same container: the record is stale) cnikit's DEL still
// removes exactly that container's rules.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { jumpRecordPath } from '@cnikit/firewall';
import { handlesDirForFile } from '@cnikit/firewall/testing';
import { nftRuleRequests } from '@cnikit/netlink/testing';
import { sandboxForFile } from '@cnikit/testing';
import { distBin } from '../../../test-netns/dist.ts';
import { dnatChainName, HOSTPORT_DNAT_CHAIN, iptables } from './iptables.ts';
import type { PortMapArgs } from './mapping.ts';

const GO = '/usr/lib/cni/portmap';
const env = sandboxForFile({ prefix: 'cnikit-delhandles-pm' });
handlesDirForFile(() => env.dir);
let ns: { netns: string };
before(() => {
  ns = { netns: env.sb.host.path };
});

const NET = 'pmhandles';
const m = (hostPort: number, containerPort: number, protocol: string) => ({
  hostPort,
  containerPort,
  protocol,
  hostIP: '',
});
const pm = (i: number, mappings = [m(8000 + i, 80, 'tcp'), m(9000 + i, 53, 'udp')]): PortMapArgs => ({
  network: NET,
  containerID: `c${i}`,
  containerIP: `10.67.0.${i + 2}/24`,
  mappings,
  snat: true,
  masqAll: false,
  markMasqBit: 13,
});
const dn = (i: number) => dnatChainName(NET, `c${i}`);

/** CNI-HOSTPORT-DNAT's jumps with their handles (`nft -a`): chain jumped to → handles. */
function entries(): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const r = env.sb.exec('nft', ['-a', 'list', 'chain', 'ip', 'nat', HOSTPORT_DNAT_CHAIN], { check: false });
  for (const x of r.stdout.matchAll(/jump (\S+) # handle (\d+)/g))
    out.set(x[1]!, [...(out.get(x[1]!) ?? []), x[2]!]);
  return out;
}
const chainExists = (c: string) =>
  env.sb.exec('nft', ['list', 'chain', 'ip', 'nat', c], { check: false }).status === 0;
const recordOf = (i: number) => jumpRecordPath(4, 'nat', dn(i), ns)!;

/** The stdin of a portmap call for container `i`. */
function confOf(i: number): string {
  const a = pm(i);
  const conf = {
    cniVersion: '1.0.0',
    name: NET,
    type: 'portmap',
    snat: true,
    runtimeConfig: { portMappings: a.mappings },
    prevResult: {
      cniVersion: '1.0.0',
      interfaces: [{ name: 'eth0', sandbox: '/run/netns/x' }],
      ips: [{ address: a.containerIP, interface: 0 }],
    },
  };
  return JSON.stringify(conf);
}

function goPortmap(cmd: 'ADD' | 'DEL', i: number): void {
  assert.ok(existsSync(GO), `no Go portmap at ${GO} (Debian package containernetworking-plugins)`);
  const a = pm(i);
  const r = spawnSync('ip', ['netns', 'exec', env.sb.host.name, GO], {
    input: confOf(i),
    encoding: 'utf8',
    env: {
      ...process.env,
      CNI_COMMAND: cmd,
      CNI_CONTAINERID: a.containerID,
      CNI_NETNS: '/run/netns/none',
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/usr/lib/cni',
    },
  });
  assert.equal(r.status, 0, `Go portmap ${cmd}: ${r.stdout}${r.stderr}`);
}

describe('portmap jump records (iptables-nft)', () => {
  test('ADD records the handles of its CNI-HOSTPORT-DNAT jumps; DEL deletes them by handle, no chain listed', () => {
    for (let i = 0; i < 4; i++) iptables.setup({ ...pm(i), ...ns }, 4);
    const before = entries();
    for (let i = 0; i < 4; i++) {
      const rec = JSON.parse(readFileSync(recordOf(i), 'utf8')) as {
        jumps: Array<{ from: string; handle: string }>;
      };
      assert.deepEqual(
        rec.jumps.map((j) => `${j.from} ${BigInt(`0x${j.handle}`)}`).sort(),
        (before.get(dn(i)) ?? []).map((h) => `${HOSTPORT_DNAT_CHAIN} ${h}`).sort(),
        `c${i}: the record holds the kernel's handles of its jumps (one per protocol)`,
      );
      assert.equal(rec.jumps.length, 2);
    }
    const r0 = { ...nftRuleRequests };
    assert.deepEqual(iptables.teardown(NET, 'c1', ns), []);
    assert.equal(nftRuleRequests.ruleDumps - r0.ruleDumps, 0, 'DEL listed no chain');
    assert.equal(nftRuleRequests.ruleGets - r0.ruleGets, 2, 'DEL fetched its two rules by handle');
    const left = entries();
    assert.equal(left.has(dn(1)), false);
    assert.equal(chainExists(dn(1)), false);
    assert.equal(existsSync(recordOf(1)), false);
    for (const i of [0, 2, 3]) assert.deepEqual(left.get(dn(i)), before.get(dn(i)), `c${i} kept`);
    assert.deepEqual(iptables.teardown(NET, 'c1', ns), [], 'a second DEL is fine');
    assert.deepEqual(entries(), left);
  });

  test('cnikit ADD, Go DEL, Go ADD (the record is stale), cnikit DEL: the listing removes exactly that container', () => {
    goPortmap('DEL', 2);
    assert.equal(entries().has(dn(2)), false, 'Go removed c2');
    assert.equal(existsSync(recordOf(2)), true, "Go's DEL left cnikit's record");
    goPortmap('ADD', 2);
    const before = entries();
    assert.equal(before.get(dn(2))?.length, 2, 'Go added c2 again (new handles)');
    const r0 = { ...nftRuleRequests };
    assert.deepEqual(iptables.teardown(NET, 'c2', ns), []);
    assert.ok(nftRuleRequests.ruleDumps - r0.ruleDumps >= 1, 'the stale record led to the listing');
    const left = entries();
    assert.equal(left.has(dn(2)), false, 'c2 removed');
    assert.equal(chainExists(dn(2)), false);
    for (const i of [0, 3]) assert.deepEqual(left.get(dn(i)), before.get(dn(i)), `c${i} kept`);
    assert.equal(existsSync(recordOf(2)), false);
  });

  test('Go ADD (no record), cnikit DEL; cnikit ADD, Go DEL', () => {
    goPortmap('ADD', 5);
    assert.equal(existsSync(recordOf(5)), false);
    assert.deepEqual(iptables.teardown(NET, 'c5', ns), []);
    assert.equal(entries().has(dn(5)), false);
    assert.equal(chainExists(dn(5)), false);
    iptables.setup({ ...pm(6), ...ns }, 4);
    goPortmap('DEL', 6);
    assert.equal(entries().has(dn(6)), false);
    assert.equal(chainExists(dn(6)), false);
    // the record Go left behind is removed by cnikit's next DEL of that container (nothing to delete)
    assert.deepEqual(iptables.teardown(NET, 'c6', ns), []);
    assert.equal(existsSync(recordOf(6)), false);
    assert.ok(entries().has(dn(0)) && entries().has(dn(3)), 'the others kept');
  });

  test('the compiled portmap: DEL sends a GETRULE by handle per jump and no dump (strace)', () => {
    const bin = join(distBin(), 'portmap');
    assert.ok(existsSync(bin), `${bin} not built (npm run build)`);
    assert.ok(existsSync('/usr/bin/strace'), 'strace is needed (apt-get install strace)');
    const dir = join(env.dir, 'handles-bin');
    const call = (cmd: 'ADD' | 'DEL') => {
      const out = join(env.dir, `strace.${cmd}`);
      const r = spawnSync(
        'ip',
        [
          'netns',
          'exec',
          env.sb.host.name,
          'strace',
          '-f',
          '-qq',
          '-e',
          'trace=sendto,sendmsg',
          '-o',
          out,
          bin,
        ],
        {
          input: confOf(9),
          encoding: 'utf8',
          env: {
            ...process.env,
            CNIKIT_NFT_HANDLES_DIR: dir,
            CNI_COMMAND: cmd,
            CNI_CONTAINERID: 'c9',
            CNI_NETNS: '/run/netns/none',
            CNI_IFNAME: 'eth0',
            CNI_PATH: distBin(),
          },
        },
      );
      assert.equal(r.status, 0, `portmap ${cmd}: ${r.stdout}${r.stderr}`);
      return readFileSync(out, 'utf8');
    };
    call('ADD');
    assert.equal(readdirSync(dir).length, 1, 'ADD wrote one record');
    assert.ok(entries().has(dn(9)));
    const del = call('DEL');
    const gets = del.match(/NFT_MSG_GETRULE, nlmsg_flags=[A-Z_|]+/g) ?? [];
    // two jumps (tcp, udp): two GETs by handle, no NLM_F_DUMP anywhere in the DEL
    assert.deepEqual(gets, Array(2).fill('NFT_MSG_GETRULE, nlmsg_flags=NLM_F_REQUEST|NLM_F_ACK'), del);
    assert.doesNotMatch(del, /NLM_F_DUMP/);
    assert.match(del, /NFT_MSG_DELRULE/);
    assert.equal(entries().has(dn(9)), false);
    assert.equal(chainExists(dn(9)), false);
    assert.deepEqual(readdirSync(dir), [], 'DEL removed the record');
    assert.ok(entries().has(dn(0)) && entries().has(dn(3)), 'the others kept');
  });
});
