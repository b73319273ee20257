// The hand-written CRI client (cri.ts) against a real gRPC server (@grpc/grpc-js, a devDependency, serving the CRI
// subset in test-netns/k8s/cri.proto on a Unix socket), and cri-gc.ts's refusals: an unreachable runtime or a
// gRPC error releases nothing, a dry run changes nothing, a live sandbox keeps every attachment of its ID.
import assert from 'node:assert/strict';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { CniConfig } from './api.ts';
import { encodeCacheEntry } from './cache.ts';
import { runCnitool } from './cnitool.ts';
import {
  CriError,
  criVersion,
  decodeFields,
  decodeListPodSandboxResponse,
  encodeStrings,
  grpcFrame,
  grpcUnframe,
  listPodSandboxes,
} from './cri.ts';
import { criGc } from './cri-gc.ts';

const PROTO = join(import.meta.dirname, '..', '..', '..', 'test-netns', 'k8s', 'cri.proto');
const dir = mkdtempSync(join(tmpdir(), 'cnikit-cri-test-'));
after(() => rmSync(dir, { recursive: true, force: true }));

type Sandbox = {
  id: string;
  metadata: { name: string; uid: string; namespace: string; attempt: number };
  state: string;
};
interface FakeRuntime {
  socket: string;
  sandboxes: Sandbox[];
  /** gRPC error code every call answers with, when set. */
  fail?: number;
  calls: string[];
  close(): Promise<void>;
}

/** A CRI server answering Version and ListPodSandbox on `pkg` (runtime.v1 or runtime.v1alpha2). */
async function fakeRuntime(name: string, pkg: 'v1' | 'v1alpha2'): Promise<FakeRuntime> {
  let proto = PROTO;
  if (pkg !== 'v1') {
    proto = join(dir, `cri-${pkg}.proto`);
    writeFileSync(
      proto,
      readFileSync(PROTO, 'utf8').replace('package runtime.v1;', `package runtime.${pkg};`),
    );
  }
  const def = protoLoader.loadSync(proto, { keepCase: false, longs: String, enums: String, defaults: true });
  const loaded = grpc.loadPackageDefinition(def) as unknown as {
    runtime: Record<string, { RuntimeService: { service: grpc.ServiceDefinition } }>;
  };
  const server = new grpc.Server();
  const rt: FakeRuntime = {
    socket: join(dir, `${name}.sock`),
    sandboxes: [],
    calls: [],
    close: () => new Promise((resolve) => server.tryShutdown(() => resolve())),
  };
  const answer =
    (method: string, body: () => unknown) =>
    (_call: unknown, cb: (e: grpc.ServiceError | null, r?: unknown) => void) => {
      rt.calls.push(method);
      if (rt.fail !== undefined)
        cb({ code: rt.fail, details: 'runtime is on fire: ünïcode' } as grpc.ServiceError);
      else cb(null, body());
    };
  server.addService(loaded.runtime[pkg]!.RuntimeService.service, {
    Version: answer('Version', () => ({
      version: '0.1.0',
      runtimeName: 'fake',
      runtimeVersion: '9.9',
      runtimeApiVersion: pkg,
    })),
    ListPodSandbox: answer('ListPodSandbox', () => ({ items: rt.sandboxes })),
  });
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(`unix://${rt.socket}`, grpc.ServerCredentials.createInsecure(), (e) =>
      e ? reject(e) : resolve(),
    ),
  );
  return rt;
}

const sb = (id: string, state = 'SANDBOX_READY'): Sandbox => ({
  id,
  metadata: { name: `pod-${id}`, uid: `uid-${id}`, namespace: 'default', attempt: 1 },
  state,
});

describe('protobuf and gRPC framing', () => {
  test('strings encode as length-delimited fields; decode reads them back, skips unknown wire types', () => {
    const b = encodeStrings({ 1: 'v1', 2: '', 3: 'é' });
    assert.deepEqual([...b], [0x0a, 2, 0x76, 0x31, 0x1a, 2, 0xc3, 0xa9]);
    const withFixed = Buffer.concat([Buffer.from([0x11, 1, 2, 3, 4, 5, 6, 7, 8, 0x18, 0xac, 0x02]), b]);
    const f = decodeFields(withFixed);
    assert.deepEqual(
      f.map((x) => ('varint' in x ? [x.no, x.varint] : [x.no, x.bytes.toString()])),
      [
        [3, 300],
        [1, 'v1'],
        [3, 'é'],
      ],
    );
    assert.throws(() => decodeFields(Buffer.from([0x0a, 5, 1])), /truncated/);
    assert.throws(() => decodeFields(Buffer.from([0x0b])), /wire type 3/);
    assert.throws(() => decodeListPodSandboxResponse(Buffer.from([0x0a, 0])), /without an id/);
    assert.deepEqual(grpcUnframe(grpcFrame(b)), b);
    assert.throws(() => grpcUnframe(Buffer.from([1, 0, 0, 0, 0])), /compressed/);
    assert.throws(() => grpcUnframe(Buffer.from([0, 0, 0, 0, 9, 1])), /9 bytes in a body of 6/);
  });
});

describe('CRI client against a gRPC server', () => {
  let v1: FakeRuntime;
  let alpha: FakeRuntime;
  before(async () => {
    v1 = await fakeRuntime('v1', 'v1');
    alpha = await fakeRuntime('alpha', 'v1alpha2');
  });
  after(async () => {
    await v1.close();
    await alpha.close();
  });

  test('Version and ListPodSandbox (READY and NOTREADY) on runtime.v1', async () => {
    v1.sandboxes = [sb('a'.repeat(64)), sb('b'.repeat(64), 'SANDBOX_NOTREADY')];
    assert.deepEqual(await criVersion(v1.socket), {
      service: 'runtime.v1.RuntimeService',
      version: '0.1.0',
      runtimeName: 'fake',
      runtimeVersion: '9.9',
      runtimeApiVersion: 'v1',
    });
    const r = await listPodSandboxes(v1.socket);
    assert.equal(r.service, 'runtime.v1.RuntimeService');
    assert.deepEqual(r.sandboxes, [
      {
        id: 'a'.repeat(64),
        name: `pod-${'a'.repeat(64)}`,
        uid: `uid-${'a'.repeat(64)}`,
        namespace: 'default',
        attempt: 1,
        state: 'SANDBOX_READY',
      },
      {
        id: 'b'.repeat(64),
        name: `pod-${'b'.repeat(64)}`,
        uid: `uid-${'b'.repeat(64)}`,
        namespace: 'default',
        attempt: 1,
        state: 'SANDBOX_NOTREADY',
      },
    ]);
    v1.sandboxes = [];
    assert.deepEqual((await listPodSandboxes(v1.socket)).sandboxes, []);
  });

  test('a runtime with only runtime.v1alpha2 (UNIMPLEMENTED on v1) is asked again on v1alpha2', async () => {
    alpha.sandboxes = [sb('c1')];
    const r = await listPodSandboxes(alpha.socket);
    assert.equal(r.service, 'runtime.v1alpha2.RuntimeService');
    assert.deepEqual(
      r.sandboxes.map((s) => s.id),
      ['c1'],
    );
  });

  test('a gRPC error is a CriError with its status and message; a missing socket says it cannot reach it', async () => {
    v1.fail = grpc.status.UNAVAILABLE;
    try {
      await assert.rejects(listPodSandboxes(v1.socket), (e: unknown) => {
        assert.ok(e instanceof CriError);
        assert.equal(e.grpcStatus, 14);
        assert.match(e.message, /ListPodSandbox on .*: gRPC status 14: runtime is on fire: ünïcode/);
        return true;
      });
    } finally {
      delete v1.fail;
    }
    await assert.rejects(
      listPodSandboxes(join(dir, 'nope.sock')),
      /cannot reach the CRI runtime at .*nope\.sock: ENOENT/,
    );
    // a socket that is no gRPC server
    const notGrpc = join(dir, 'plain.sock');
    const net = await import('node:net');
    const srv = net.createServer((c) => c.end('HTTP/1.1 400 Bad Request\r\n\r\n')).listen(notGrpc);
    try {
      await assert.rejects(listPodSandboxes(notGrpc, 2000), CriError);
    } finally {
      srv.close();
    }
  });

  describe('gc --from-cri', () => {
    const netDir = join(dir, 'net.d');
    const cacheDir = join(dir, 'cache');
    const dataDir = join(dir, 'networks');
    const store = join(dataDir, 'podnet');
    const LIVE = 'live0000';
    const GONE = 'gone0000';
    const state = () =>
      Object.fromEntries(
        [store, join(cacheDir, 'results')].flatMap((d) =>
          readdirSync(d).map((f) => [join(d, f), readFileSync(join(d, f), 'utf8')]),
        ),
      );
    before(() => {
      mkdirSync(netDir, { recursive: true });
      mkdirSync(store, { recursive: true });
      mkdirSync(join(cacheDir, 'results'), { recursive: true });
      const conf = {
        cniVersion: '1.0.0',
        name: 'podnet',
        plugins: [{ type: 'bridge', ipam: { type: 'host-local', dataDir, subnet: '10.9.0.0/24' } }],
      };
      writeFileSync(join(netDir, '10-podnet.conflist'), JSON.stringify(conf));
      const old = new Date(Date.now() - 3600_000);
      const reserve = (ip: string, id: string, ifn: string, age = old) => {
        writeFileSync(join(store, ip), `${id}\r\n${ifn}`);
        utimesSync(join(store, ip), age, age);
      };
      reserve('10.9.0.2', LIVE, 'eth0');
      reserve('10.9.0.3', LIVE, 'net1'); // a second interface of a live sandbox
      reserve('10.9.0.4', GONE, 'eth0');
      reserve('10.9.0.5', 'fresh000', 'eth0', new Date()); // a sandbox in creation: not listed yet
      writeFileSync(join(store, 'last_reserved_ip.0'), '10.9.0.5');
      for (const id of [LIVE, GONE]) {
        const f = join(cacheDir, 'results', `podnet-${id}-eth0`);
        writeFileSync(
          f,
          encodeCacheEntry(
            { cniVersion: '1.0.0', ips: [] } as never,
            Buffer.from(JSON.stringify(conf)),
            'podnet',
            {
              containerId: id,
              ifName: 'eth0',
              netns: `/run/netns/${id}`,
            },
          ),
        );
        utimesSync(f, old, old);
      }
    });

    const tool = async (args: string[]) => {
      let out = '';
      let err = '';
      const status = await runCnitool(args, {
        env: { NETCONFPATH: netDir, CNI_PATH: join(dir, 'no-plugins') },
        stdout: { write: (s: string) => (out += s) },
        stderr: { write: (s: string) => (err += s) },
      });
      return { status, out, err };
    };

    test("--dry-run prints the vanished sandbox's cached attachment and address, changes nothing", async () => {
      v1.sandboxes = [sb(LIVE, 'SANDBOX_NOTREADY')];
      const before = state();
      const r = await tool(['gc', '--from-cri', v1.socket, '--cache-dir', cacheDir, '--dry-run']);
      assert.equal(r.status, 0, r.err);
      assert.equal(
        r.out,
        [
          '1 pod sandbox(es) from runtime.v1.RuntimeService',
          `would release cached attachment of ${GONE} eth0 (network podnet)`,
          `would release address 10.9.0.4 of ${GONE} eth0 (network podnet)`,
          'kept address 10.9.0.5 of fresh000 eth0 (network podnet): younger than the grace period',
          '',
        ].join('\n'),
      );
      assert.deepEqual(state(), before);
      // with no grace, the fresh one would go too; the live sandbox's two interfaces never
      const all = await criGc({
        socket: v1.socket,
        cni: new CniConfig({ path: '', cacheDir }),
        netDir,
        cacheDir,
        dryRun: true,
        graceMs: 0,
      });
      assert.deepEqual(
        all.networks[0]?.stale.map((s) => `${s.kind} ${s.containerId} ${s.ifName}`),
        [`cache ${GONE} eth0`, `host-local ${GONE} eth0`, 'host-local fresh000 eth0'],
      );
      assert.deepEqual(state(), before);
    });

    test('a CRI error or a missing socket: exit 1 with the reason, nothing released', async () => {
      const before = state();
      v1.fail = grpc.status.INTERNAL;
      try {
        const r = await tool(['gc', '--from-cri', v1.socket, '--cache-dir', cacheDir]);
        assert.equal(r.status, 1);
        assert.equal(r.out, '');
        assert.match(
          r.err,
          /^cnitool: CRI \/runtime\.v1\.RuntimeService\/ListPodSandbox on .*: gRPC status 13: runtime is on fire/,
        );
      } finally {
        delete v1.fail;
      }
      const missing = await tool(['gc', '--from-cri', join(dir, 'gone.sock'), '--cache-dir', cacheDir]);
      assert.equal(missing.status, 1);
      assert.match(missing.err, /cannot reach the CRI runtime at .*gone\.sock/);
      assert.deepEqual(state(), before);
    });

    test('usage errors: --dry-run without --from-cri, --from-cri with a netns or on another command', async () => {
      for (const args of [
        ['gc', 'podnet', '/run/netns/x', '--dry-run'],
        ['gc', '--from-cri', v1.socket, 'podnet', '/run/netns/x'],
        ['del', '--from-cri', v1.socket, 'podnet'],
        ['gc', '--from-cri', v1.socket, '--grace', '-1'],
      ]) {
        const r = await tool(args);
        assert.equal(r.status, 2, args.join(' '));
      }
    });
  });
});
