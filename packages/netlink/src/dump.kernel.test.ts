// Large dumps (many datagrams) against the real kernel.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, test } from 'node:test';
import { listAddrs } from './addr.ts';
import { listLinks } from './link.ts';
import { withNetns } from './netns.ts';
import { listRoutes } from './route.ts';
import { ipJson, withTestNs } from './testns.ts';

function batch(ns: string, lines: string[]): void {
  const r = spawnSync('ip', ['-n', ns, '-batch', '-'], { input: `${lines.join('\n')}\n`, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
}

describe('large dumps (kernel)', () => {
  test('300 links, 600 addresses and 3000 routes are listed completely', () =>
    withTestNs(1, (ns) => {
      const links: string[] = [];
      const addrs: string[] = [];
      for (let i = 0; i < 150; i++) {
        links.push(`link add a${i} type veth peer name b${i}`, `link set a${i} up`, `link set b${i} up`);
        addrs.push(
          `addr add 10.${i >> 8}.${i & 255}.1/32 dev a${i}`,
          `addr add 2001:db8:${i.toString(16)}::1/64 dev a${i} nodad`,
        );
      }
      batch(ns.name, links);
      batch(ns.name, addrs);
      const routes: string[] = [];
      for (let i = 0; i < 3000; i++)
        routes.push(`route add 172.${16 + (i >> 8)}.${i & 255}.0/24 dev a0 table 77`);
      batch(ns.name, routes);
      const { l, a, r } = withNetns(ns.path, () => ({
        l: listLinks(),
        a: listAddrs({ family: 4 }),
        r: listRoutes({ table: 77 }),
      }));
      assert.equal(l.length, 301);
      assert.equal(l.length, ipJson(ns, 'link', 'show').length);
      assert.equal(a.length, 151, '150 + loopback');
      assert.equal(r.length, 3000);
      assert.equal(new Set(r.map((x) => x.dst)).size, 3000);
      assert.ok(
        r.every(
          (x) => x.table === 77 && x.scope === 253 && x.linkIndex === l.find((y) => y.name === 'a0')?.index,
        ),
      );
    }));
});
