/**
 * Bad input for the etcd keys of the plugin ("datastore": "etcd"), through the plugin's verbs in-process against a
 * real etcd with TLS client certificates and authentication on: each is a CNI error object with the right code and
 * a message naming what to fix. A malformed etcd_host, a file that cannot be read, a certificate without its key, a
 * wrong password and a CA that did not sign etcd's certificate are configuration errors (7); an etcd that nothing
 * answers on is 11 (try again later) within the call's bound (CNIKIT_CLUSTER_IPAM_TIMEOUT_MS).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cniRunner, expectCniError, expectOk } from '@cnikit/testing';
import { plugin } from './index.ts';
import { freePort, makeEtcdPki, startTestEtcd, type TestEtcd } from './testdata/etcd-testenv.ts';

describe('cluster-ipam on etcd: bad etcd keys', () => {
  let etcd: TestEtcd;
  let dir: string;
  before(async () => {
    etcd = await startTestEtcd({ tls: true, auth: true });
    dir = mkdtempSync(join(tmpdir(), 'cnikit-ipam-etcd-bad-'));
    makeEtcdPki(join(dir, 'other'));
  });
  after(async () => {
    await etcd?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const run = cniRunner(plugin, {
    containerId: 'bad-1',
    ifName: 'net1',
    netns: '/var/run/netns/x',
    env: { NODENAME: 'node-bad', CNIKIT_CLUSTER_IPAM_TIMEOUT_MS: '3000' },
  });
  const good = () => ({
    datastore: 'etcd',
    etcd_host: etcd.host,
    etcd_username: etcd.user?.name,
    etcd_password: etcd.user?.password,
    etcd_cert_file: etcd.tls?.cert,
    etcd_key_file: etcd.tls?.key,
    etcd_ca_cert_file: etcd.tls?.ca,
  });
  const netconf = (ipam: Record<string, unknown>) => ({
    cniVersion: '1.1.0',
    name: 'badnet',
    type: 'macvlan',
    ipam: { type: 'cluster-ipam', range: '10.70.0.0/24', ...good(), ...ipam },
  });

  test('the good settings work (the baseline of every case below)', async () => {
    expectOk(await run.add(netconf({})));
    expectOk(await run.del(netconf({})));
  });

  test('configuration errors: code 7 naming the key', async () => {
    const cases: Array<[string, Record<string, unknown>, RegExp]> = [
      [
        'etcd_host without a port number',
        { etcd_host: '127.0.0.1:notaport' },
        /etcd_host "127\.0\.0\.1:notaport"/,
      ],
      [
        'etcd_host with a port out of range',
        { etcd_host: '127.0.0.1:99999' },
        /etcd_host "127\.0\.0\.1:99999"/,
      ],
      [
        'etcd_host of another scheme',
        { etcd_host: 'ftp://127.0.0.1:2379' },
        /etcd_host .*scheme must be http or https/,
      ],
      ['etcd_host empty', { etcd_host: '' }, /needs etcd_host/],
      [
        'etcd_cert_file that does not exist',
        { etcd_cert_file: '/nonexistent/client.crt' },
        /etcd_cert_file: cannot read \/nonexistent\/client\.crt/,
      ],
      [
        'etcd_ca_cert_file that does not exist',
        { etcd_ca_cert_file: '/nonexistent/ca.crt' },
        /etcd_ca_cert_file: cannot read \/nonexistent\/ca\.crt/,
      ],
      [
        'etcd_cert_file without etcd_key_file',
        { etcd_key_file: undefined },
        /etcd_cert_file and etcd_key_file go together/,
      ],
      [
        'etcd_username without etcd_password',
        { etcd_password: undefined },
        /etcd_username and etcd_password go together/,
      ],
      ['a wrong etcd_password', { etcd_password: 'wrong' }, /authentication failed/],
      [
        "an etcd_ca_cert_file that did not sign etcd's certificate",
        { etcd_ca_cert_file: join(dir, 'other', 'ca.crt') },
        /TLS: .*etcd_ca_cert_file/,
      ],
    ];
    for (const [what, ipam, re] of cases) {
      for (const verb of ['ADD', 'DEL'] as const) {
        const r = await run.call(verb, netconf(ipam));
        const e = expectCniError(r, 7);
        assert.match(e.msg, re, `${what} (${verb}): ${e.msg}`);
      }
    }
  });

  test('etcd down (nothing listens there): code 11 within the bound, for ADD, DEL and CHECK', async () => {
    const ipam = { etcd_host: `127.0.0.1:${await freePort()}` };
    for (const verb of ['ADD', 'DEL', 'CHECK'] as const) {
      const t0 = Date.now();
      const r = await run.call(verb, netconf(ipam));
      const ms = Date.now() - t0;
      const e = expectCniError(r, 11);
      assert.match(e.msg, /etcd 127\.0\.0\.1:\d+: .*(ECONNREFUSED|connect)/i, e.msg);
      assert.ok(ms < 3000 + 2000, `${verb} answered in ${ms} ms (bound 3000 ms)`);
    }
  });
});
