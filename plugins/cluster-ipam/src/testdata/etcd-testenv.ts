/**
 * A real etcd for tests and the benchmark: Debian's /usr/bin/etcd on free loopback ports with its own data
 * directory (removed by stop()), optionally with TLS (certificates made with openssl, client certificates
 * required) and with authentication on (a root user and a user restricted to one prefix).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { scaled } from '@cnikit/testing';
import { issueCert } from '../../../../scripts/k8s/control-plane.ts';
import { EtcdClient, type EtcdClientOptions, prefixEnd } from '../etcd.ts';

export interface TestEtcd {
  /** host:port of the client URL. */
  host: string;
  dir: string;
  /** Options that reach it (TLS files and the restricted user's credentials when those are on). */
  clientOptions: EtcdClientOptions;
  /** Paths of the PEM files when TLS is on. */
  tls?: { ca: string; cert: string; key: string };
  user?: { name: string; password: string; prefix: string };
  pid(): number | undefined;
  /** SIGKILL (data kept); start() brings it back on the same ports and data. */
  kill(): Promise<void>;
  start(): Promise<void>;
  /**
   * SIGSTOP, resolved once every thread of etcd is stopped (a group stop is asynchronous: until the thread
   * that took the signal runs, the others still answer): a server that accepts connections and never answers.
   */
  freeze(): Promise<void>;
  thaw(): void;
  stop(): Promise<void>;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => resolve(typeof a === 'object' && a ? a.port : 0));
    });
  });
}

function openssl(args: string[]): void {
  const r = spawnSync('openssl', args, { encoding: 'utf8', timeout: 30_000 });
  if (r.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${r.error?.message ?? r.stderr}`);
}

/**
 * A CA, etcd's serving certificate and client certificates (without and with a Common Name; P-256, 2 days). The serving certificate carries
 * clientAuth as well: etcd 3.4's JSON gateway dials the server's own gRPC port with it, and with
 * --client-cert-auth a serverAuth-only certificate breaks every gateway request ("broken pipe").
 */
export function makeEtcdPki(pki: string): void {
  mkdirSync(pki, { recursive: true, mode: 0o700 });
  const p = (n: string) => join(pki, n);
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  openssl([
    'req',
    '-x509',
    ...ec,
    '-keyout',
    p('ca.key'),
    '-out',
    p('ca.crt'),
    '-days',
    '2',
    '-subj',
    '/CN=cnikit-etcd-test-ca',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign,digitalSignature',
  ]);
  const leaf = (name: string, subj: string, ext: string[]) => issueCert(pki, name, subj, ext);
  const ku = 'keyUsage=critical,digitalSignature,keyEncipherment';
  leaf('server', '/O=cnikit-etcd-test', [
    ku,
    'extendedKeyUsage=serverAuth,clientAuth',
    'subjectAltName=IP:127.0.0.1,DNS:localhost',
  ]);
  // no Common Name: with auth on, etcd's gateway refuses a client certificate that carries one (etcd.ts)
  leaf('client', '/O=cnikit', [ku, 'extendedKeyUsage=clientAuth']);
  leaf('client-cn', '/CN=cnikit', [ku, 'extendedKeyUsage=clientAuth']);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function startTestEtcd(
  opts: {
    tls?: boolean;
    auth?: boolean;
    etcd?: string;
    prefix?: string;
    /** The address clients reach it at (default 127.0.0.1; the peer URL stays on the loopback). */
    ip?: string;
  } = {},
): Promise<TestEtcd> {
  const dir = mkdtempSync(join(tmpdir(), 'cnikit-etcd-'));
  const [clientPort, peerPort] = [await freePort(), await freePort()];
  const scheme = opts.tls ? 'https' : 'http';
  const host = `${opts.ip ?? '127.0.0.1'}:${clientPort}`;
  let tls: TestEtcd['tls'];
  const args = [
    '--name',
    'test',
    '--data-dir',
    join(dir, 'data'),
    '--listen-client-urls',
    `${scheme}://${host}`,
    '--advertise-client-urls',
    `${scheme}://${host}`,
    '--listen-peer-urls',
    `http://127.0.0.1:${peerPort}`,
    '--initial-advertise-peer-urls',
    `http://127.0.0.1:${peerPort}`,
    '--initial-cluster',
    `test=http://127.0.0.1:${peerPort}`,
    '--log-level',
    'warn',
  ];
  if (opts.tls) {
    const pki = join(dir, 'pki');
    makeEtcdPki(pki);
    tls = { ca: join(pki, 'ca.crt'), cert: join(pki, 'client.crt'), key: join(pki, 'client.key') };
    args.push(
      '--cert-file',
      join(pki, 'server.crt'),
      '--key-file',
      join(pki, 'server.key'),
      '--trusted-ca-file',
      tls.ca,
      '--client-cert-auth',
    );
  }
  mkdirSync(join(dir, 'data'), { recursive: true, mode: 0o700 });
  // generous: the machine running the tests may be loaded (setup must not fail on a slow answer)
  const clientOptions: EtcdClientOptions = { endpoints: host, timeoutMs: 15_000 };
  if (tls) {
    clientOptions.ca = readFileSync(tls.ca);
    clientOptions.cert = readFileSync(tls.cert);
    clientOptions.key = readFileSync(tls.key);
  }
  let proc: ChildProcess | undefined;
  const exited = (p: ChildProcess) =>
    p.exitCode !== null || p.signalCode !== null
      ? Promise.resolve()
      : new Promise<void>((r) => p.once('exit', () => r()));
  const start = async () => {
    const log = openSync(join(dir, 'etcd.log'), 'a');
    proc = spawn(opts.etcd ?? '/usr/bin/etcd', args, { stdio: ['ignore', log, log] });
    closeSync(log);
    const probe = new EtcdClient({
      ...clientOptions,
      username: undefined,
      password: undefined,
      timeoutMs: 1000,
    });
    // scaled: under the kernel lab's TCG a Go server takes many times longer to come up
    const deadline = Date.now() + scaled(30_000);
    try {
      for (;;) {
        if (proc.exitCode !== null) {
          throw new Error(
            `etcd exited ${proc.exitCode}: ${readFileSync(join(dir, 'etcd.log'), 'utf8').slice(-2000)}`,
          );
        }
        try {
          await probe.range({ key: '\0' });
          return;
        } catch (e) {
          // with auth on, an unauthenticated range is refused: the server is up
          if ((e as Error).name === 'EtcdError') return;
          if (Date.now() > deadline)
            throw new Error(
              `etcd did not answer within ${scaled(30_000)} ms (${(e as Error).message}): ${readFileSync(join(dir, 'etcd.log'), 'utf8').slice(-2000)}`,
            );
          await sleep(100);
        }
      }
    } finally {
      probe.close();
    }
  };
  const kill = async () => {
    if (!proc) return;
    proc.kill('SIGCONT');
    proc.kill('SIGKILL');
    await exited(proc);
    proc = undefined;
  };
  const stop = async () => {
    await kill();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await start();
    let user: TestEtcd['user'];
    if (opts.auth) {
      const prefix = opts.prefix ?? '/cnikit/';
      user = { name: 'cnikit', password: 'p4ss-w0rd', prefix };
      const admin = new EtcdClient(clientOptions);
      const b64 = (s: string | Buffer) => Buffer.from(s).toString('base64');
      try {
        await admin.call('/v3/auth/user/add', { name: 'root', password: 'r00t' });
        await admin.call('/v3/auth/role/add', { name: 'root' });
        await admin.call('/v3/auth/user/grant', { user: 'root', role: 'root' });
        await admin.call('/v3/auth/role/add', { name: 'ipam' });
        await admin.call('/v3/auth/role/grant', {
          name: 'ipam',
          perm: { permType: 'READWRITE', key: b64(prefix), range_end: b64(prefixEnd(prefix)) },
        });
        await admin.call('/v3/auth/user/add', { name: user.name, password: user.password });
        await admin.call('/v3/auth/user/grant', { user: user.name, role: 'ipam' });
        await admin.call('/v3/auth/enable', {});
      } finally {
        admin.close();
      }
      clientOptions.username = user.name;
      clientOptions.password = user.password;
    }
    return {
      host,
      dir,
      clientOptions,
      ...(tls ? { tls } : {}),
      ...(user ? { user } : {}),
      pid: () => proc?.pid,
      kill,
      start,
      freeze: async () => {
        const pid = proc?.pid;
        if (pid === undefined) throw new Error('etcd is not running');
        proc?.kill('SIGSTOP');
        // state field of /proc/PID/task/TID/stat (after the parenthesised name): T = stopped
        const allStopped = () =>
          readdirSync(`/proc/${pid}/task`).every((tid) => {
            const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
            return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'T';
          });
        for (const t = Date.now(); !allStopped(); await sleep(5))
          if (Date.now() - t > 10_000) throw new Error(`etcd ${pid}: not every thread stopped within 10 s`);
      },
      thaw: () => proc?.kill('SIGCONT'),
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}

/** True when etcd can be started here (the tests need /usr/bin/etcd). */
export function etcdAvailable(bin = '/usr/bin/etcd'): boolean {
  return spawnSync(bin, ['--version'], { encoding: 'utf8' }).status === 0;
}
