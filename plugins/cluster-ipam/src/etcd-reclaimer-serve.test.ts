/**
 * The etcd reclaimer hosted by the DaemonSet's service: the compiled `cnikit serve` with
 * CNIKIT_CLUSTER_IPAM_RECLAIMER=on and CNIKIT_CLUSTER_IPAM_DATASTORE=etcd, every etcd setting from the environment
 * (what the DaemonSet sets from the ConfigMap keys cluster-ipam-etcd-*), against a real etcd with TLS client
 * certificates and user/password authentication on (a user restricted to its prefix). A record and a block of a
 * registered node without a heartbeat are released after the grace while the serving node's stay; SIGTERM hands the
 * leader key back. Bad settings (a wrong password, a certificate file that does not exist, a CA that did not sign
 * etcd's certificate) stop the start with what to fix; an etcd that cannot be reached does not (it is retried).
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { distBin } from '../../../test-netns/dist.ts';
import type { AllocationSpec, BlockSpec } from './allocator.ts';
import { EtcdStore } from './etcd-store.ts';
import { freePort, makeEtcdPki, startTestEtcd, type TestEtcd } from './testdata/etcd-testenv.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Serve {
  proc: ChildProcess;
  log: () => string;
  exited: Promise<number | null>;
}

describe('the etcd reclaimer hosted by cnikit serve (TLS and authentication on)', () => {
  let etcd: TestEtcd;
  let dir: string;
  let store: EtcdStore;
  const children: ChildProcess[] = [];
  before(async () => {
    etcd = await startTestEtcd({ tls: true, auth: true, prefix: '/cnikit-ipam-etcd-serve/' });
    dir = mkdtempSync(join(tmpdir(), 'cnikit-ipam-etcd-serve-'));
    store = new EtcdStore({ ...etcd.clientOptions, prefix: etcd.user?.prefix as string });
  });
  after(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await store?.close();
    await etcd?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** What the DaemonSet's serve container gets from the ConfigMap (and a password file on the host). */
  const envFor = (over: Record<string, string> = {}): Record<string, string> => {
    const tls = etcd.tls as { ca: string; cert: string; key: string };
    const passwordFile = join(dir, 'etcd-password');
    writeFileSync(passwordFile, `${etcd.user?.password}\n`, { mode: 0o600 });
    return {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      NODE_NAME: 'serve-node',
      CNIKIT_CLUSTER_IPAM_RECLAIMER: 'on',
      CNIKIT_CLUSTER_IPAM_DATASTORE: 'etcd',
      CNIKIT_CLUSTER_IPAM_ETCD_HOST: etcd.host,
      CNIKIT_CLUSTER_IPAM_ETCD_USERNAME: etcd.user?.name as string,
      CNIKIT_CLUSTER_IPAM_ETCD_PASSWORD_FILE: passwordFile,
      CNIKIT_CLUSTER_IPAM_ETCD_CERT_FILE: tls.cert,
      CNIKIT_CLUSTER_IPAM_ETCD_KEY_FILE: tls.key,
      CNIKIT_CLUSTER_IPAM_ETCD_CA_CERT_FILE: tls.ca,
      CNIKIT_CLUSTER_IPAM_ETCD_PREFIX: etcd.user?.prefix as string,
      CNIKIT_CLUSTER_IPAM_RECLAIM_GRACE: '2s',
      CNIKIT_CLUSTER_IPAM_RECLAIM_INTERVAL: '1s',
      ...over,
    };
  };

  const serve = (name: string, env: Record<string, string>): Serve => {
    const proc = spawn(join(distBin(), 'cnikit'), ['serve', '--socket', join(dir, `${name}.sock`)], {
      env,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    children.push(proc);
    let text = '';
    proc.stderr?.setEncoding('utf8').on('data', (d: string) => (text += d));
    const exited = new Promise<number | null>((r) => proc.on('exit', (c) => r(c)));
    return { proc, log: () => text, exited };
  };

  const until = async (what: string, f: () => Promise<boolean> | boolean, ms: number, log: () => string) => {
    const end = Date.now() + ms;
    while (!(await f())) {
      if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms\n${log()}`);
      await sleep(200);
    }
  };

  const record = (ip: string, node: string, created: string): AllocationSpec => ({
    network: 'n',
    pool: '4-0a3c0001-0a3c00fe',
    ip,
    prefix: 24,
    containerID: `c-${node}`,
    ifName: 'net1',
    podNamespace: 'ns',
    podName: `p-${node}`,
    podUID: `u-${node}`,
    node,
    block: 'n.4-0a3c0001-0a3c00fe.0a3c0000-3',
    borrowed: false,
    created,
  });

  test("a gone node's record and block are released after the grace; the serving node's are kept", async () => {
    const old = new Date(Date.now() - 3_600_000).toISOString();
    const p = store.prefix;
    // gone-node: registered (its reclaimer ran once), no heartbeat; it holds one record in its own block
    await store.client.put(`${p}nodes/gone-node`, JSON.stringify({ node: 'gone-node', registered: old }));
    assert.ok(
      await store.create<AllocationSpec>(
        'allocations',
        'n.4-0a3c00.05',
        record('10.60.0.5', 'gone-node', old),
      ),
    );
    const block: BlockSpec = {
      network: 'n',
      pool: '4-0a3c0001-0a3c00fe',
      cidr: '10.60.0.0/24',
      base: '10.60.0.0',
      size: 8,
      node: 'gone-node',
      created: old,
    };
    assert.ok(await store.create<BlockSpec>('blocks', 'n.4-0a3c0001-0a3c00fe.0a3c0000-3', block));
    assert.ok(
      await store.create<AllocationSpec>(
        'allocations',
        'n.4-0a3c00.21',
        record('10.60.0.33', 'serve-node', old),
      ),
    );
    const s = serve('ok', envFor());
    try {
      let leaderAt = 0;
      await until(
        'the hosted reclaimer leads',
        async () => {
          const kv = (await store.client.get(`${p}reclaimer/leader`)).kv;
          if (kv) leaderAt = Date.now();
          return kv !== undefined;
        },
        60_000,
        s.log,
      );
      assert.match(
        (await store.client.get(`${p}reclaimer/leader`)).kv?.value.toString() ?? '',
        /^serve-node_\d+$/,
      );
      assert.ok((await store.client.get(`${p}alive/serve-node`)).kv, "the serving node's heartbeat");
      await until(
        "gone-node's record released",
        async () => (await store.get('allocations', 'n.4-0a3c00.05')) === undefined,
        60_000,
        s.log,
      );
      const releasedAfter = Date.now() - leaderAt;
      assert.ok(
        releasedAfter >= 1500,
        `released ${releasedAfter} ms after the leader appeared: the grace is 2 s`,
      );
      await until(
        "gone-node's block released",
        async () => (await store.get('blocks', 'n.4-0a3c0001-0a3c00fe.0a3c0000-3')) === undefined,
        30_000,
        s.log,
      );
      assert.ok(await store.get('allocations', 'n.4-0a3c00.21'), "the serving node's record is kept");
      assert.deepEqual(
        await store.list('allocations', '', { node: 'gone-node' }),
        [],
        'its index entry went too',
      );
      assert.match(s.log(), /cluster-ipam reclaimer serve-node_\d+ on etcd /);
      assert.match(
        s.log(),
        /reclaimer: released 10\.60\.0\.5 \(n\.4-0a3c00\.05; node gone-node has had no heartbeat/,
      );
      s.proc.kill('SIGTERM');
      assert.equal(await s.exited, 0, s.log());
      assert.equal(
        (await store.client.get(`${p}reclaimer/leader`)).kv,
        undefined,
        'SIGTERM hands the key back',
      );
    } finally {
      if (s.proc.exitCode === null) s.proc.kill('SIGKILL');
      await store.delete('allocations', 'n.4-0a3c00.21');
    }
  });

  test('bad settings stop the start with what to fix; an unreachable etcd is retried, not fatal', async () => {
    const wrong = join(dir, 'wrong-password');
    writeFileSync(wrong, 'not-the-password\n', { mode: 0o600 });
    const other = join(dir, 'other-pki');
    makeEtcdPki(other);
    const cases: Array<[string, Record<string, string>, RegExp]> = [
      [
        'a wrong password',
        { CNIKIT_CLUSTER_IPAM_ETCD_PASSWORD_FILE: wrong },
        /refuses the reclaimer: .*authentication failed.*--etcd-password-file \(\$CNIKIT_CLUSTER_IPAM_ETCD_PASSWORD_FILE, ConfigMap key cluster-ipam-etcd-password-file\)/,
      ],
      [
        'a password file that does not exist',
        { CNIKIT_CLUSTER_IPAM_ETCD_PASSWORD_FILE: join(dir, 'absent') },
        /--etcd-password-file \(\$CNIKIT_CLUSTER_IPAM_ETCD_PASSWORD_FILE, ConfigMap key cluster-ipam-etcd-password-file\): cannot read/,
      ],
      [
        'a certificate file that does not exist',
        { CNIKIT_CLUSTER_IPAM_ETCD_CERT_FILE: '/nonexistent/client.crt' },
        /--etcd-cert-file \(\$CNIKIT_CLUSTER_IPAM_ETCD_CERT_FILE, ConfigMap key cluster-ipam-etcd-cert-file\): cannot read \/nonexistent\/client\.crt/,
      ],
      [
        "a CA that did not sign etcd's certificate",
        { CNIKIT_CLUSTER_IPAM_ETCD_CA_CERT_FILE: join(other, 'ca.crt') },
        /refuses the reclaimer: .*TLS: .*--etcd-ca-cert-file/,
      ],
      [
        'a datastore that is neither',
        { CNIKIT_CLUSTER_IPAM_DATASTORE: 'etcd3' },
        /CNIKIT_CLUSTER_IPAM_DATASTORE \(ConfigMap key cluster-ipam-datastore\) must be "kubernetes" or "etcd"; got "etcd3"/,
      ],
      [
        'a username without a password',
        { CNIKIT_CLUSTER_IPAM_ETCD_PASSWORD_FILE: '' },
        /--etcd-username .* and a password .* go together/,
      ],
    ];
    for (const [what, over, re] of cases) {
      const s = serve(`bad-${cases.findIndex((c) => c[0] === what)}`, envFor(over));
      const code = await Promise.race([s.exited, sleep(30_000).then(() => 'running')]);
      if (code === 'running') s.proc.kill('SIGKILL');
      assert.equal(code, 1, `${what}: serve exits 1\n${s.log()}`);
      assert.match(s.log(), /cannot start: /, what);
      assert.match(s.log(), re, `${what}\n${s.log()}`);
    }
    // nothing listens there: the start goes on, the reclaimer says so and keeps trying
    const down = serve('down', envFor({ CNIKIT_CLUSTER_IPAM_ETCD_HOST: `127.0.0.1:${await freePort()}` }));
    try {
      await until(
        'the unreachable etcd logged',
        () => /cannot reach etcd yet: /.test(down.log()),
        30_000,
        down.log,
      );
      await sleep(1000);
      assert.equal(down.proc.exitCode, null, `serve keeps running\n${down.log()}`);
      down.proc.kill('SIGTERM');
      assert.equal(await down.exited, 0, down.log());
    } finally {
      if (down.proc.exitCode === null) down.proc.kill('SIGKILL');
    }
  });
});
