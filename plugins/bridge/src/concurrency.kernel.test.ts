import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import * as nl from '@cnikit/netlink';
import { enterHost, type HostEnv, hostLocal } from './testenv.ts';

let env: HostEnv;
before(() => {
  env = enterHost('cc', 6);
});
after(() => env?.destroy());

const MAIN = join(import.meta.dirname, 'testmain.ts');

function startAdd(conf: object, netns: string, id: string, barrier: string) {
  const proc = spawn(process.execPath, ['--import', 'tsx', MAIN], {
    env: {
      ...process.env,
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: id,
      CNI_NETNS: netns,
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/usr/lib/cni',
      CNIKIT_TEST_BARRIER: barrier,
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  proc.stdin.end(JSON.stringify(conf));
  let out = '';
  let err = '';
  proc.stdout.on('data', (d) => (out += d));
  const ready = new Promise<void>((r) =>
    proc.stderr.on('data', (d) => {
      err += d;
      if (err.includes('ready')) r();
    }),
  );
  const done = new Promise<{ code: number; out: string; err: string }>((r) =>
    proc.on('exit', (code) => r({ code: code ?? -1, out, err })),
  );
  return { ready, done };
}

test('concurrent ADDs that all create and address the same bridge all succeed', async () => {
  const conf = {
    cniVersion: '1.0.0',
    name: 'ccnet',
    type: 'bridge',
    bridge: 'brcc',
    isDefaultGateway: true,
    ipam: hostLocal(env.dataDir, '10.30.0.0/24'),
  };
  const barrier = join(env.dataDir, 'go');
  const runs = env.containers.map((c, i) => startAdd(conf, env.path(c), `cc${i}`, barrier));
  await Promise.all(runs.map((r) => r.ready));
  writeFileSync(barrier, '');
  const results = await Promise.all(runs.map((r) => r.done));
  for (const r of results) assert.equal(r.code, 0, r.out + r.err);
  const ips = results.map((r) => JSON.parse(r.out).ips[0].address).sort();
  assert.equal(new Set(ips).size, env.containers.length);
  assert.deepEqual(
    nl.listAddrs({ link: 'brcc', family: 4 }).map((a) => a.cidr),
    ['10.30.0.1/24'],
  );
  const br = nl.getLink('brcc')!;
  assert.equal(nl.listLinks().filter((l) => l.masterIndex === br.index).length, env.containers.length);
});
