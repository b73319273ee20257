/**
 * Observability, black box: a real OTLP/HTTP receiver (@cnikit/testing/otlp, started here on 127.0.0.1 of
 * the sandbox's host namespace) receives the spans of a kubelet-style chain (bridge + host-local → tuning → portmap)
 * driven through libcni, with the compiled executables (each process exports its own spans) and with the plugin
 * objects in this process (one export by libcni); an unreachable or blackholed endpoint neither fails nor slows a
 * call beyond the bound; `cnikit serve --metrics` is read with a Prometheus text-format parser from npm after a known
 * set of warm calls (client fallbacks and a re-execution included) and the counts match; warm mode exports traced
 * calls in batches.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CniConfig, confListFromObject, type NetworkConfigList, type RuntimeConf } from '@cnikit/libcni';
import { plugin as bridge } from '@cnikit/plugin-bridge';
import { plugin as hostLocal } from '@cnikit/plugin-host-local';
import { plugin as portmap } from '@cnikit/plugin-portmap';
import { plugin as tuning } from '@cnikit/plugin-tuning';
import { cniEnv, eventually, sandboxForFile, scaled } from '@cnikit/testing';
import {
  decodeTraces,
  type OtlpReceiver,
  type ReceivedSpan,
  startBlackhole,
  startOtlpReceiver,
} from '@cnikit/testing/otlp';
import { histogramSeries, metricFamily, sampleValue } from '@cnikit/testing/prometheus';
import { DIST, ensureBuilt } from './dist.ts';

ensureBuilt();
const env = sandboxForFile({ enterHost: true });
const PATH = process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin';
const CALLER = '0af7651916cd43dd8448eb211c80319c';
const CALLER_SPAN = 'b7ad6b7169203331';

let rx: OtlpReceiver;
before(async () => {
  env.sb.exec('ip', ['link', 'set', 'lo', 'up']);
  rx = await startOtlpReceiver();
});
after(async () => {
  await rx?.close();
});

function chain(name: string, subnet: string, br = `br-${name}${subnet.split('.')[2]}`): NetworkConfigList {
  return confListFromObject({
    cniVersion: '1.1.0',
    name,
    plugins: [
      {
        type: 'bridge',
        bridge: br.slice(0, 15),
        isGateway: true,
        ipam: { type: 'host-local', ranges: [[{ subnet }]], dataDir: join(env.dir, 'ipam') },
      },
      {
        type: 'tuning',
        dataDir: join(env.dir, 'tuning'),
        sysctl: { 'net.ipv4.conf.IFNAME.arp_ignore': '1' },
      },
      { type: 'portmap', backend: 'iptables', capabilities: { portMappings: true } },
    ],
  });
}

/** A runtime config in a container namespace of its own (a failed test leaves nothing in the next one's way). */
function rt(id: string, port: number, netns = env.sb.newContainer().path): RuntimeConf {
  return {
    containerId: id,
    netns,
    ifName: 'eth0',
    capabilityArgs: { portMappings: [{ hostPort: port, containerPort: 80, protocol: 'tcp' }] },
  };
}

const byName = (spans: ReceivedSpan[], name: string, traceId: string) =>
  spans.filter((s) => s.traceId === traceId && s.name === name);

/** Every plugin-call span of the trace (those with `cni.plugin`) says `mode`, and they are exactly `names`. */
function assertModes(spans: ReceivedSpan[], traceId: string, mode: 'cold' | 'warm', names: string[]): void {
  const calls = spans.filter((s) => s.traceId === traceId && s.attributes['cni.plugin'] !== undefined);
  assert.deepEqual(calls.map((s) => s.name).sort(), [...names].sort());
  for (const s of calls) assert.equal(s.attributes['cnikit.mode'], mode, `${s.name}: cnikit.mode`);
}

/** Checks the tree of one traced ADD of the chain; returns the libcni span. */
function checkAddTree(spans: ReceivedSpan[], traceId: string, ctr: string, inProcess: boolean): ReceivedSpan {
  const [root] = byName(spans, 'libcni ADD obs', traceId);
  assert.ok(root, 'the libcni span');
  assert.equal(root.attributes['cni.plugins'], 'bridge,tuning,portmap');
  assert.equal(root.attributes['cni.container_id'], ctr);
  assert.equal(root.attributes['cni.result_code'], 0);
  const plugins = ['bridge', 'tuning', 'portmap'].map((p) => {
    const [s] = byName(spans, `${p} ADD`, traceId);
    assert.ok(s, `${p} ADD span`);
    assert.equal(s.parentSpanId, root.spanId, `${p} is a child of the libcni span`);
    assert.equal(s.attributes['cni.plugin'], p);
    assert.equal(s.attributes['cni.command'], 'ADD');
    assert.equal(s.attributes['cni.container_id'], ctr);
    assert.equal(s.attributes['cni.network'], 'obs');
    assert.equal(s.attributes['cni.result_code'], 0);
    assert.ok(s.startNs >= root.startNs && s.endNs <= root.endNs, `${p} inside the libcni span`);
    // exec'd plugins export themselves (their own pid), in-process ones go with libcni's export
    assert.equal(s.attributes['process.pid'] === process.pid, inProcess, `${p} pid`);
    return s;
  });
  const [br, , pm] = plugins as [ReceivedSpan, ReceivedSpan, ReceivedSpan];
  const [del] = byName(spans, 'delegate host-local ADD', traceId);
  assert.ok(del, 'the delegation span');
  assert.equal(del.parentSpanId, br.spanId);
  assert.equal(del.attributes['cni.delegate.mode'], 'in-process');
  const [hl] = byName(spans, 'host-local ADD', traceId);
  assert.ok(hl, 'the in-process host-local span');
  assert.equal(hl.parentSpanId, del.spanId);
  assert.equal(hl.attributes['cnikit.in_process'], true);
  // cold calls: every plugin span of the chain, the in-process delegate's too, says cold
  assertModes(spans, traceId, 'cold', ['bridge ADD', 'host-local ADD', 'tuning ADD', 'portmap ADD']);
  const ns = spans.filter((s) => s.traceId === traceId && s.name === 'netns' && s.parentSpanId === br.spanId);
  assert.ok(ns.length > 0, 'bridge entered the container: netns spans');
  for (const s of ns) {
    assert.equal(typeof s.attributes['cnikit.netns'], 'string');
    assert.ok(s.startNs >= br.startNs && s.endNs <= br.endNs, 'a netns section inside the bridge call');
  }
  // portmap's rules: one iptables-restore, run as the tool or (iptables-nft 1.8.9) written in-process
  const restore = spans.filter(
    (s) => s.traceId === traceId && s.name.includes('iptables-restore') && s.parentSpanId === pm.spanId,
  );
  assert.ok(
    restore.some(
      (s) =>
        (s.name === 'exec iptables-restore' && s.attributes['process.exit.code'] === 0) ||
        (s.name === 'iptables-restore (in-process)' &&
          s.attributes['cnikit.in_process'] === true &&
          s.attributes['cnikit.nf_tables.errno'] === 0),
    ),
    `portmap's iptables-restore: ${JSON.stringify(restore.map((s) => s.name))}`,
  );
  return root;
}

describe('traces of a kubelet-style chain through libcni', () => {
  const otel = () => ({
    ...process.env,
    OTEL_EXPORTER_OTLP_ENDPOINT: rx.url,
    CNIKIT_OTLP_TIMEOUT_MS: '5000',
  });

  test('exec: libcni starts the root span; every plugin process exports its spans under it', async () => {
    const cni = new CniConfig({ path: [DIST], cacheDir: join(env.dir, 'c1'), inProcess: false, env: otel() });
    const list = chain('obs', '10.93.1.0/24');
    const r = rt('ctr-exec', 18501);
    await cni.addNetworkList(list, r);
    // no caller context: a new trace whose root is the libcni span
    const root = rx.spans.find(
      (s) => s.name === 'libcni ADD obs' && s.attributes['cni.container_id'] === 'ctr-exec',
    );
    assert.ok(root, 'the libcni root span arrived');
    assert.equal(root.parentSpanId, '');
    const spans = await rx.waitFor((s) => byName(s, 'portmap ADD', root.traceId).length > 0);
    checkAddTree(spans, root.traceId, 'ctr-exec', false);
    assert.deepEqual(rx.rejected, []);
    // DEL with the caller's trace context: the libcni span is its child
    await cni.delNetworkList(list, r, { trace: { traceparent: `00-${CALLER}-${CALLER_SPAN}-01` } });
    const del = await rx.waitFor(
      (s) =>
        byName(s, 'libcni DEL obs', CALLER).length === 1 &&
        ['bridge', 'tuning', 'portmap', 'host-local'].every(
          (p) => byName(s, `${p} DEL`, CALLER).length === 1,
        ),
    );
    const [libDel] = byName(del, 'libcni DEL obs', CALLER);
    assert.equal(libDel!.parentSpanId, CALLER_SPAN);
    for (const p of ['bridge', 'tuning', 'portmap'])
      assert.equal(byName(del, `${p} DEL`, CALLER)[0]!.parentSpanId, libDel!.spanId);
  });

  test('in-process: the same tree, exported once by libcni', async () => {
    const cni = new CniConfig({
      path: [DIST],
      cacheDir: join(env.dir, 'c2'),
      plugins: [bridge, hostLocal, tuning, portmap],
      env: otel(),
    });
    const n0 = rx.requests;
    const list = chain('obs', '10.93.2.0/24');
    const r = rt('ctr-inproc', 18502);
    await cni.addNetworkList(list, r, {
      trace: { traceparent: `00-${CALLER.replace(/^0a/, '1b')}-${CALLER_SPAN}-01` },
    });
    const traceId = CALLER.replace(/^0a/, '1b');
    const spans = await rx.waitFor((s) => byName(s, 'libcni ADD obs', traceId).length > 0);
    const root = checkAddTree(spans, traceId, 'ctr-inproc', true);
    assert.equal(root.parentSpanId, CALLER_SPAN);
    assert.equal(rx.requests, n0 + 1, 'one export for the whole operation');
    await cni.delNetworkList(list, r);
  });

  test('an unreachable or blackholed endpoint fails nothing; the wait is the bound, nothing more', async () => {
    const hole = await startBlackhole();
    const dead = await startBlackhole();
    await dead.close(); // nothing listens there any more: connection refused
    const traced = (url: string, bound?: number) => ({
      ...process.env,
      OTEL_EXPORTER_OTLP_ENDPOINT: url,
      ...(bound ? { CNIKIT_OTLP_TIMEOUT_MS: String(bound) } : {}),
    });
    try {
      // the whole chain, ADD, CHECK and DEL, against both: the same results as without tracing
      const netns = env.sb.newContainer().path;
      for (const [i, url] of [hole.url, dead.url].entries()) {
        const cni = new CniConfig({
          path: [DIST],
          cacheDir: join(env.dir, `c3-${i}`),
          inProcess: false,
          env: traced(url),
        });
        const list = chain('obs', '10.93.3.0/24');
        const r = rt(`ctr-bh-${i}`, 18510 + i, netns);
        const result = await cni.addNetworkList(list, r);
        assert.match(result.ips?.[0]?.address ?? '', /^10\.93\.3\.\d+\/24$/);
        await cni.checkNetworkList(list, r);
        await cni.delNetworkList(list, r);
      }
      assert.ok(hole.accepted() > 0, 'the blackhole was reached');
      // timing, one exec'd plugin per operation (libcni and loopback wait for their exports): tracing off, the
      // default bound (10 ms) and a bound of 1500 ms, interleaved; on this shared machine a process start varies by
      // hundreds of ms, so the bound is shown by the difference it makes, not by absolute times
      const lo = confListFromObject({ cniVersion: '1.1.0', name: 'obs-lo', plugins: [{ type: 'loopback' }] });
      const runs: Record<'off' | 'bound10' | 'bound1500', number[]> = { off: [], bound10: [], bound1500: [] };
      const envs = { off: process.env, bound10: traced(hole.url), bound1500: traced(hole.url, 1500) };
      const ROUNDS = 7;
      for (let i = 0; i < ROUNDS; i++) {
        for (const k of ['off', 'bound10', 'bound1500'] as const) {
          const cni = new CniConfig({
            path: [DIST],
            cacheDir: join(env.dir, 'c4'),
            inProcess: false,
            env: envs[k],
          });
          const t0 = performance.now();
          await cni.addNetworkList(lo, { containerId: `lo-${k}-${i}`, netns, ifName: 'lo' });
          runs[k].push(performance.now() - t0);
        }
      }
      const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[ROUNDS >> 1]!;
      // paired: the three runs of a round are back to back, so a round's differences cancel most of the load's swings
      const paired = (k: 'bound10' | 'bound1500') => median(runs[k].map((ms, i) => ms - runs.off[i]!));
      const [off, d10, d1500] = [median(runs.off), paired('bound10'), paired('bound1500')];
      const shown = `off ${off.toFixed(0)} ms, bound 10: +${d10.toFixed(0)} ms, bound 1500: +${d1500.toFixed(0)} ms`;
      // two waits (the plugin process, then libcni) of the bound against a blackhole: never less (a timer may fire
      // a few ms early against performance.now()), and not much more
      for (const ms of runs.bound1500) assert.ok(ms >= 2 * 1500 - 50, `${ms.toFixed(0)} ms; ${shown}`);
      assert.ok(d1500 < 2 * 1500 + scaled(1500), shown);
      assert.ok(d10 < 2 * 10 + scaled(400), shown);
      // the requests had left before the bound: the blackhole holds every plugin process's and libcni's spans of
      // those runs although nobody read an answer (the Bun executable's and libcni's exporter)
      const heldBack = () =>
        hole
          .bodies()
          .flatMap((b) => decodeTraces(b))
          .filter((s) => s.attributes['cni.container_id']?.toString().startsWith('lo-bound1500-'));
      await eventually(
        () => heldBack().filter((s) => s.name === 'loopback ADD').length === ROUNDS,
        'the loopback ADD spans of the 1500 ms runs reached the blackhole',
      );
      assert.equal(heldBack().filter((s) => s.name === 'libcni ADD obs-lo').length, ROUNDS);
    } finally {
      await hole.close();
    }
  });
});

describe('a collector that never completes the handshake', () => {
  test('SYNs dropped: the plugin process answers and ends at its bound, not at the kernel connect timeout', () => {
    // in the test's private host namespace, every SYN to one port of 127.0.0.1 is dropped: the export's connection
    // attempt stays pending (~2 min until the kernel gives up), which Bun's TCP client cannot cancel
    const port = 18599;
    env.sb.exec('nft', ['add', 'table', 'inet', 'obsdrop']);
    try {
      env.sb.exec('nft', ['add chain inet obsdrop out { type filter hook output priority 0 ; }']);
      env.sb.exec('nft', ['add rule inet obsdrop out ip daddr 127.0.0.1 tcp dport 18599 drop']);
      const netns = env.sb.newContainer().path;
      const t0 = performance.now();
      const r = spawnSync(join(DIST, 'loopback'), [], {
        input: JSON.stringify({ cniVersion: '1.1.0', name: 'obs-syn', type: 'loopback' }),
        env: {
          PATH,
          ...cniEnv('ADD', { netns, containerId: 'ctr-syn', path: DIST }),
          CNI_IFNAME: 'lo',
          TRACEPARENT: `00-${CALLER}-${CALLER_SPAN}-01`,
          OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
          CNIKIT_OTLP_TIMEOUT_MS: '300',
        },
        encoding: 'utf8',
        timeout: scaled(60_000),
      });
      const ms = performance.now() - t0;
      assert.equal(r.status, 0, `${r.stdout}${r.stderr} (${ms.toFixed(0)} ms, signal ${r.signal})`);
      assert.equal(JSON.parse(r.stdout).interfaces[0].name, 'lo');
      // it waited its bound, and ended long before the kernel's connect timeout (127 s with tcp_syn_retries 6)
      assert.ok(ms >= 300, `${ms.toFixed(0)} ms`);
      assert.ok(ms < 300 + scaled(20_000), `${ms.toFixed(0)} ms`);

      // cnitool (the same executable): libcni's own export meets the same collector
      const netDir = join(env.dir, 'syn-net.d');
      mkdirSync(netDir, { recursive: true });
      writeFileSync(
        join(netDir, 'obs-syn.conflist'),
        JSON.stringify({ cniVersion: '1.1.0', name: 'obs-syn', plugins: [{ type: 'loopback' }] }),
      );
      const tool = (verb: string) => {
        const t = performance.now();
        const c = spawnSync(join(DIST, 'cnitool'), [verb, 'obs-syn', netns], {
          env: {
            PATH,
            NETCONFPATH: netDir,
            CNI_PATH: DIST,
            CNI_IFNAME: 'lo',
            CNI_CACHE_DIR: join(env.dir, 'syn-cache'),
            OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
            CNIKIT_OTLP_TIMEOUT_MS: '300',
          },
          encoding: 'utf8',
          timeout: scaled(60_000),
        });
        const took = performance.now() - t;
        assert.equal(c.status, 0, `${c.stdout}${c.stderr} (${took.toFixed(0)} ms, signal ${c.signal})`);
        assert.ok(took >= 300 && took < 300 + scaled(20_000), `cnitool ${verb}: ${took.toFixed(0)} ms`);
        return c.stdout;
      };
      assert.equal(JSON.parse(tool('add')).interfaces[0].name, 'lo');
      tool('del');
    } finally {
      env.sb.exec('nft', ['delete', 'table', 'inet', 'obsdrop']);
    }
  });
});

/** `cnikit serve` with metrics on 127.0.0.1:<port>, started by the test; stopped in teardown. */
class Service {
  readonly proc: ChildProcess;
  readonly logFile: string;
  constructor(
    readonly socket: string,
    readonly port: number,
    extraEnv: Record<string, string> = {},
  ) {
    this.logFile = `${socket}.log`;
    const fd = openSync(this.logFile, 'a');
    try {
      this.proc = spawn(
        join(DIST, 'cnikit'),
        ['serve', '--socket', socket, '--verbose', '--deadline-ms', '1000', '--metrics', `127.0.0.1:${port}`],
        { stdio: ['ignore', 'ignore', fd], env: { PATH, ...extraEnv } },
      );
    } finally {
      closeSync(fd);
    }
  }
  get log(): string {
    return readFileSync(this.logFile, 'utf8');
  }
  async ready(): Promise<void> {
    await eventually(
      () =>
        spawnSync(join(DIST, 'cnikit'), ['serve', '--check', '--socket', this.socket], { env: { PATH } })
          .status === 0 && this.log.includes('metrics on'),
      `service on ${this.socket} ready`,
      20_000,
    );
  }
  async stop(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const done = new Promise((r) => this.proc.once('exit', r));
    this.proc.kill('SIGTERM');
    const t = setTimeout(() => this.proc.kill('SIGKILL'), scaled(10_000));
    await done;
    clearTimeout(t);
  }
  scrape(): Promise<{ status: number; type: string; body: string }> {
    return new Promise((resolve, reject) => {
      const req = request(
        // agent false: a kept-alive connection would not survive the service's re-execution
        { host: '127.0.0.1', port: this.port, path: '/metrics', timeout: scaled(10_000), agent: false },
        (res) => {
          let body = '';
          res.setEncoding('utf8').on('data', (d: string) => {
            body += d;
          });
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), body }),
          );
        },
      );
      req.on('error', (e) => reject(new Error(`scrape: ${e.message}; service log:\n${this.log}`)));
      req.end();
    });
  }
}

const family = metricFamily;
const value = sampleValue;

describe('warm mode: metrics and batched traces', () => {
  const WARM = join(DIST, 'warm');
  let dir: string;
  let svc: Service;
  const port = 19000 + (process.pid % 500);
  before(async () => {
    dir = join(env.dir, 'run');
    mkdirSync(dir, { mode: 0o700 });
    svc = new Service(join(dir, 'cnikit.sock'), port, { OTEL_EXPORTER_OTLP_ENDPOINT: rx.url });
    await svc.ready();
  });
  after(async () => {
    await svc?.stop();
  });

  function call(
    plugin: string,
    command: string,
    conf: unknown,
    extra: Record<string, string> = {},
    socket?: string,
  ) {
    const e: Record<string, string> = {
      PATH,
      CNIKIT_SOCKET: socket ?? svc.socket,
      ...(command === 'VERSION'
        ? { CNI_COMMAND: 'VERSION' }
        : cniEnv(command as 'ADD', { netns: env.sb.container.path, containerId: 'ctr-warm', path: WARM })),
      ...extra,
    };
    const r = spawnSync(join(WARM, plugin), [], {
      input: JSON.stringify(conf),
      env: e,
      encoding: 'utf8',
      timeout: scaled(30_000),
    });
    return { code: r.status ?? 128, stdout: r.stdout, stderr: r.stderr };
  }

  test('a known set of calls is counted by plugin, command and result code; fallbacks and a re-execution too', async () => {
    const lo = { cniVersion: '1.1.0', name: 'lo-net', type: 'loopback' };
    const traceparent = `00-${CALLER.replace(/^0a/, '2c')}-${CALLER_SPAN}-01`;
    for (let i = 0; i < 3; i++)
      assert.equal(call('loopback', 'ADD', lo, { TRACEPARENT: traceparent }).code, 0);
    for (let i = 0; i < 2; i++) assert.equal(call('loopback', 'DEL', lo).code, 0);
    assert.equal(call('loopback', 'VERSION', lo).code, 0);
    const bad = call('loopback', 'ADD', { ...lo, cniVersion: '9.9.9' });
    assert.equal(bad.code, 1);
    assert.equal(JSON.parse(bad.stdout).code, 1);
    // two clients find no service on a socket of this directory: they run cold and record "unavailable"
    for (let i = 0; i < 2; i++) {
      const r = call('loopback', 'VERSION', lo, {}, join(dir, 'nobody.sock'));
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /"cniVersion"/);
    }
    let m = await svc.scrape();
    assert.equal(m.status, 200);
    assert.match(m.type, /^text\/plain; version=0\.0\.4/);
    const req = family(m.body, 'cnikit_serve_requests_total');
    assert.equal(req.type, 'COUNTER');
    assert.equal(value(req, { plugin: 'loopback', command: 'ADD', result_code: '0' }), 3);
    assert.equal(value(req, { plugin: 'loopback', command: 'DEL', result_code: '0' }), 2);
    // + 1: svc.ready()'s `cnikit serve --check` is a loopback VERSION through the service
    assert.equal(value(req, { plugin: 'loopback', command: 'VERSION', result_code: '0' }), 2);
    assert.equal(value(req, { plugin: 'loopback', command: 'ADD', result_code: '1' }), 1);
    assert.equal(req.metrics.length, 4);
    const dur = family(m.body, 'cnikit_serve_request_duration_seconds');
    assert.equal(dur.type, 'HISTOGRAM');
    const add = histogramSeries(
      m.body,
      'cnikit_serve_request_duration_seconds',
      'plugin="loopback",command="ADD"',
    );
    assert.equal(Number(add.count), 4);
    assert.equal(Number(add.buckets?.['+Inf']), 4);
    assert.equal(Number(add.buckets?.['120']), 4, 'every ADD within the last bucket');
    assert.ok(Number(add.sum) > 0 && Number(add.sum) < 120);
    const del = histogramSeries(
      m.body,
      'cnikit_serve_request_duration_seconds',
      'plugin="loopback",command="DEL"',
    );
    assert.equal(Number(del.count), 2);
    assert.equal(value(family(m.body, 'cnikit_serve_requests_in_flight'), {}), 0);
    const fb = family(m.body, 'cnikit_client_fallbacks_total');
    assert.equal(value(fb, { reason: 'unavailable' }), 2);
    assert.equal(value(family(m.body, 'cnikit_serve_reexecs_total'), { reason: 'deadline' }), 0);
    assert.equal(value(family(m.body, 'cnikit_build_info'), {}), 1);
    // the executable's version stamp, not only the package version
    const stamp = ensureBuilt().stamp;
    assert.ok(stamp, 'BUILD-INFO.json records the stamp');
    assert.equal(
      value(family(m.body, 'cnikit_build_info'), {
        version: stamp.version,
        commit: stamp.commit,
        dirty: String(stamp.dirty ?? false),
      }),
      1,
    );

    // the traced ADDs arrive batched (warm mode), one export with all three
    const traceId = CALLER.replace(/^0a/, '2c');
    const spans = await rx.waitFor((s) => byName(s, 'loopback ADD', traceId).length === 3);
    for (const s of byName(spans, 'loopback ADD', traceId)) {
      assert.equal(s.parentSpanId, CALLER_SPAN);
      assert.equal(s.attributes['cnikit.mode'], 'warm');
      assert.equal(s.attributes['cni.container_id'], 'ctr-warm');
      assert.equal(s.resource['cnikit.mode'], 'warm');
    }
    assert.equal(
      new Set(byName(spans, 'loopback ADD', traceId).map((s) => s.resource['process.pid'])).size,
      1,
    );

    // a request over the deadline (an IPAM delegate that sleeps): code 11, the service re-executes itself and
    // the counters carry over
    const slow = join(env.dir, 'slow');
    mkdirSync(slow, { recursive: true });
    writeFileSync(join(slow, 'slow-ipam'), '#!/bin/sh\nexec sleep 5\n', { mode: 0o755 });
    const conf = {
      cniVersion: '1.0.0',
      name: 'obs-dl',
      type: 'bridge',
      bridge: 'obsdl0',
      ipam: { type: 'slow-ipam' },
    };
    const r = call('bridge', 'ADD', conf, { CNI_PATH: `${slow}:${WARM}` });
    assert.equal(JSON.parse(r.stdout).code, 11, r.stdout);
    await eventually(() => svc.log.includes('re-executing'), 'the service re-executes itself', 20_000);
    await svc.ready();
    m = await svc.scrape();
    assert.equal(value(family(m.body, 'cnikit_serve_reexecs_total'), { reason: 'deadline' }), 1);
    const after = family(m.body, 'cnikit_serve_requests_total');
    assert.equal(
      value(after, { plugin: 'loopback', command: 'ADD', result_code: '0' }),
      3,
      'kept across the re-exec',
    );
    assert.equal(value(after, { plugin: 'bridge', command: 'ADD', result_code: '11' }), 1);
    assert.equal(value(family(m.body, 'cnikit_client_fallbacks_total'), { reason: 'unavailable' }), 2);
    env.sb.exec('ip', ['link', 'del', 'obsdl0']);
  });

  test('a traced warm bridge + host-local ADD: every span says warm, the in-process host-local one too', async () => {
    const traceId = CALLER.replace(/^0a/, '3d');
    const conf = {
      cniVersion: '1.1.0',
      name: 'obs-warm',
      type: 'bridge',
      bridge: 'obswarm0',
      isGateway: true,
      ipam: { type: 'host-local', subnet: '10.93.9.0/24', dataDir: join(env.dir, 'ipam-warm') },
    };
    const ctr = env.sb.newContainer();
    const add = call('bridge', 'ADD', conf, {
      TRACEPARENT: `00-${traceId}-${CALLER_SPAN}-01`,
      CNI_NETNS: ctr.path,
      CNI_CONTAINERID: 'ctr-warm-chain',
    });
    assert.equal(add.code, 0, add.stdout + add.stderr);
    const spans = await rx.waitFor((s) => byName(s, 'host-local ADD', traceId).length === 1);
    const [br] = byName(spans, 'bridge ADD', traceId);
    assert.ok(br);
    const [del] = byName(spans, 'delegate host-local ADD', traceId);
    assert.equal(del?.attributes['cni.delegate.mode'], 'in-process');
    assert.equal(byName(spans, 'host-local ADD', traceId)[0]?.attributes['cnikit.in_process'], true);
    assertModes(spans, traceId, 'warm', ['bridge ADD', 'host-local ADD']);
    // and every span of that call came in a warm export
    for (const s of spans.filter((x) => x.traceId === traceId))
      assert.equal(s.resource['cnikit.mode'], 'warm', `${s.name}: resource cnikit.mode`);
    const rm = call('bridge', 'DEL', conf, { CNI_NETNS: ctr.path, CNI_CONTAINERID: 'ctr-warm-chain' });
    assert.equal(rm.code, 0, rm.stdout + rm.stderr);
    env.sb.exec('ip', ['link', 'del', 'obswarm0']);
  });

  test('--metrics: bad addresses are refused at start', () => {
    for (const bad of ['9091', 'host:', 'a:b:c', ':70000', 'relative/path']) {
      const r = spawnSync(join(DIST, 'cnikit'), ['serve', '--metrics', bad], {
        encoding: 'utf8',
        env: { PATH },
      });
      assert.equal(r.status, 2, bad);
      assert.match(r.stderr, /--metrics must be HOST:PORT, :PORT, an absolute socket path or off/);
    }
  });
});
