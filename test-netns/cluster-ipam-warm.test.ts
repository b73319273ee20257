/**
 * cluster-ipam in the warm service, black box: the static client dist-bin/warm/cluster-ipam talking to
 * `dist-bin/cnikit serve` (socket in a scratch directory), whose Kubernetes store is a stand-in API server in this
 * process (node:https on 127.0.0.1, a self-signed certificate) that can hold the answer to one create. Calls of
 * cluster-ipam run beside each other in the service (packages/warm/src/serve.ts, BESIDE): an ADD whose create the
 * API server has not answered yet does not hold up the ADD of another container, nor its DEL.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cniEnv, createSandbox, eventually, type Sandbox, scaled } from '@cnikit/testing';
import { selfSigned } from '../packages/warm/src/testdata/self-signed.ts';
import { DIST, ensureBuilt } from './dist.ts';

ensureBuilt();
const WARM = join(DIST, 'warm');
const scratch = mkdtempSync(join(tmpdir(), 'cnikit-bb-cipam-warm-'));
const sockDir = join(scratch, 'run');
mkdirSync(sockDir, { mode: 0o700 });
const SOCK = join(sockDir, 'cnikit.sock');
const PATH = process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin';
const GROUP = '/apis/ipam.cnikit.dev/v1alpha1/';

interface Obj {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; resourceVersion?: string; labels?: Record<string, string> };
  spec: Record<string, unknown>;
}

/** The API server's part cluster-ipam uses: list, get, create-if-absent, delete of its two resources. */
class StandIn {
  readonly objects = new Map<string, Map<string, Obj>>([
    ['ipamblocks', new Map()],
    ['ipamallocations', new Map()],
  ]);
  rv = 10;
  /** Creates of a record of this container wait until release() (the API server has not answered yet). */
  holdContainer = '';
  #held: Array<() => void> = [];
  /** How many creates of a record are waiting. */
  waiting = 0;
  /** The lists asked for (path and query). */
  readonly lists: string[] = [];
  server: Server;
  url = '';

  constructor(tls: { key: string; cert: string }) {
    this.server = createServer({ key: readFileSync(tls.key), cert: readFileSync(tls.cert) }, (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
        void this.answer(req.method ?? 'GET', req.url ?? '/', body).then(([status, json]) => {
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(JSON.stringify(json));
        });
      });
    });
  }

  async start(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `https://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  release(): void {
    for (const f of this.#held.splice(0)) f();
  }

  async answer(method: string, url: string, body: Obj | undefined): Promise<[number, unknown]> {
    const path = url.split('?')[0] ?? '';
    if (!path.startsWith(GROUP)) return [404, { kind: 'Status', reason: 'NotFound' }];
    const [plural, name] = path.slice(GROUP.length).split('/').map(decodeURIComponent);
    const kind = this.objects.get(plural ?? '');
    if (!kind) return [404, {}];
    if (method === 'GET' && !name) this.lists.push(url);
    if (method === 'GET' && !name)
      return [
        200,
        { kind: 'List', metadata: { resourceVersion: String(this.rv) }, items: [...kind.values()] },
      ];
    if (method === 'GET') {
      const o = kind.get(name as string);
      return o ? [200, o] : [404, { kind: 'Status', reason: 'NotFound' }];
    }
    if (method === 'POST' && body) {
      if (plural === 'ipamallocations' && body.spec.containerID === this.holdContainer) {
        this.waiting++;
        await new Promise<void>((r) => this.#held.push(r));
        this.waiting--;
      }
      if (kind.has(body.metadata.name)) return [409, { kind: 'Status', reason: 'AlreadyExists' }];
      const o = { ...body, metadata: { ...body.metadata, resourceVersion: String(++this.rv) } };
      kind.set(o.metadata.name, o);
      return [201, o];
    }
    if (method === 'DELETE' && name) {
      if (!kind.delete(name)) return [404, { kind: 'Status', reason: 'NotFound' }];
      this.rv++;
      return [200, { kind: 'Status', status: 'Success' }];
    }
    return [405, {}];
  }
}

let api: StandIn;
let svc: ChildProcess;
let sb: Sandbox;
const logFile = join(scratch, 'serve.log');
const kubeconfig = join(scratch, 'kubeconfig');

const conf = {
  cniVersion: '1.1.0',
  name: 'besidenet',
  type: 'cluster-ipam',
  ipam: {
    type: 'cluster-ipam',
    range: '10.77.0.0/24',
    network_name: 'besidenet',
    kubernetes: { kubeconfig },
  },
};

/** One call through the warm client, as a runtime makes it. */
function call(command: 'ADD' | 'DEL', containerId: string): Promise<{ code: number; stdout: string }> {
  const env = {
    PATH,
    CNIKIT_SOCKET: SOCK,
    ...cniEnv(command, { netns: sb.container.path, containerId, ifName: 'net1', path: WARM }),
  };
  return new Promise((resolve, reject) => {
    const p = spawn(join(WARM, 'cluster-ipam'), [], { env, stdio: ['pipe', 'pipe', 'inherit'] });
    let stdout = '';
    p.stdout.on('data', (d: Buffer) => {
      stdout += d.toString('utf8');
    });
    p.on('error', reject);
    p.on('close', (code) => resolve({ code: code ?? -1, stdout }));
    p.stdin.end(JSON.stringify(conf));
  });
}

before(async () => {
  const tls = selfSigned(scratch, 'apiserver');
  api = new StandIn(tls);
  await api.start();
  writeFileSync(
    kubeconfig,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'c', cluster: { server: api.url, 'certificate-authority': tls.cert } }],
      users: [{ name: 'u', user: { token: 'test' } }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'x',
    }),
  );
  sb = createSandbox({ prefix: 'cnikit-cipamw' });
  const fd = openSync(logFile, 'a');
  try {
    svc = spawn(
      join(DIST, 'cnikit'),
      ['serve', '--socket', SOCK, '--verbose', '--metrics', 'off', '--deadline-ms', String(scaled(30_000))],
      { stdio: ['ignore', 'ignore', fd], env: { PATH, NODENAME: 'beside-node' } },
    );
  } finally {
    closeSync(fd);
  }
  await eventually(
    () =>
      spawnSync(join(DIST, 'cnikit'), ['serve', '--check', '--socket', SOCK], { env: { PATH } }).status === 0,
    `the service answers on ${SOCK}`,
    scaled(10_000),
  );
});

after(async () => {
  api?.release();
  if (svc && svc.exitCode === null && svc.signalCode === null) {
    const done = new Promise((r) => svc.once('exit', r));
    svc.kill('SIGTERM');
    const t = setTimeout(() => svc.kill('SIGKILL'), 10_000);
    await done;
    clearTimeout(t);
  }
  api?.server.closeAllConnections();
  api?.server.close();
  sb?.destroy();
  rmSync(scratch, { recursive: true, force: true });
});

describe('cluster-ipam calls in the warm service run beside each other', () => {
  test('an ADD held by an unanswered create does not hold up the ADD and DEL of other containers', async () => {
    // the view read, the block claimed: the first ADD of the service
    const first = await call('ADD', 'c0');
    assert.equal(first.code, 0, first.stdout);
    // every list from the watch cache: resourceVersion=0, and the one exact read of the new view not older than
    // its first create (no quorum list: kube-apiserver would read and decode every record from etcd for it)
    const created = api.objects.get('ipamallocations')?.values().next().value?.metadata.resourceVersion;
    const allocLists = api.lists.filter((u) => u.includes('/ipamallocations?'));
    assert.ok(api.lists.length >= 3, api.lists.join('\n'));
    assert.deepEqual(
      api.lists.filter((u) => !/[?&]resourceVersion=/.test(u)),
      [],
      'lists without a resourceVersion (quorum reads)',
    );
    assert.ok(
      allocLists.some((u) => u.includes(`resourceVersion=${created}&resourceVersionMatch=NotOlderThan`)),
      allocLists.join('\n'),
    );
    api.holdContainer = 'slow';
    let slowDone = false;
    const slow = call('ADD', 'slow').finally(() => {
      slowDone = true;
    });
    await eventually(
      () => api.waiting === 1,
      'the create of the held ADD reached the API server',
      scaled(10_000),
    );
    // while it waits: two more ADDs and a DEL are answered (on the old service they waited behind it)
    const beside = Promise.all([call('ADD', 'c1'), call('ADD', 'c2'), call('DEL', 'c0')]);
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      beside,
      new Promise<'late'>((r) => {
        timer = setTimeout(() => r('late'), scaled(15_000));
      }),
    ]);
    clearTimeout(timer);
    if (outcome === 'late') api.release(); // the calls behind the held one end, the assertion fails
    assert.notEqual(
      outcome,
      'late',
      'the ADDs and the DEL beside the held ADD were not answered within 15 s',
    );
    const [b, c, del] = await beside;
    assert.equal(b.code, 0, b.stdout);
    assert.equal(c.code, 0, c.stdout);
    assert.equal(del.code, 0, del.stdout);
    // answered by the service, not by the cold executable the client falls back to when the service does not
    // take its call (what the old service, one request at a time, made them do)
    const served = () =>
      readFileSync(logFile, 'utf8')
        .split('\n')
        .filter((l) => l.includes('cluster-ipam') && l.includes(' → exit 0'));
    assert.equal(served().length, 4, `the service's answers while the ADD is held:\n${served().join('\n')}`);
    assert.equal(slowDone, false, 'the held ADD is still waiting for its create');
    assert.equal(api.waiting, 1);
    api.release();
    const s = await slow;
    assert.equal(s.code, 0, s.stdout);
    // four different addresses; the records left are those of c1, c2 and slow
    const ip = (r: { stdout: string }) =>
      (JSON.parse(r.stdout) as { ips: Array<{ address: string }> }).ips[0]?.address;
    const ips = [first, b, c, s].map(ip);
    assert.equal(new Set(ips).size, 4, ips.join(' '));
    const left = [...(api.objects.get('ipamallocations')?.values() ?? [])]
      .map((o) => o.spec.containerID)
      .sort();
    assert.deepEqual(left, ['c1', 'c2', 'slow']);
    await eventually(() => served().length === 5, 'the service answered the held ADD too', scaled(10_000));
  });
});
