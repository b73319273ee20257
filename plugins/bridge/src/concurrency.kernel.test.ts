import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import * as nl from '@cnikit/netlink';
import { cniCall, sandboxForFile } from '@cnikit/testing';
import { hostLocal } from './testenv.ts';

const env = sandboxForFile({ enterHost: true, containers: 6 });

// the plugin as separate processes from source, held at a start barrier so that the ADDs really overlap
const SOURCE = { source: join(import.meta.dirname, 'index.ts') };

test('concurrent ADDs that all create and address the same bridge all succeed', async () => {
  const conf = {
    cniVersion: '1.0.0',
    name: 'ccnet',
    type: 'bridge',
    bridge: 'brcc',
    isDefaultGateway: true,
    ipam: hostLocal(env.dir, '10.30.0.0/24'),
  };
  const barrier = { dir: join(env.dir, 'barrier'), count: env.sb.containers.length };
  mkdirSync(barrier.dir);
  const results = await Promise.all(
    env.sb.containers.map((c, i) =>
      cniCall(SOURCE, 'ADD', conf, { netns: c.path, containerId: `cc${i}`, barrier }),
    ),
  );
  for (const r of results) assert.equal(r.code, 0, r.stdout + r.stderr);
  const ips = results.map((r) => r.json.ips[0].address).sort();
  assert.equal(new Set(ips).size, env.sb.containers.length);
  assert.deepEqual(
    nl.listAddrs({ link: 'brcc', family: 4 }).map((a) => a.cidr),
    ['10.30.0.1/24'],
  );
  const br = nl.getLink('brcc')!;
  assert.equal(nl.listLinks().filter((l) => l.masterIndex === br.index).length, env.sb.containers.length);
});
