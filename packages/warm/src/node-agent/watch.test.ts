// The node agent's list and watch against a stand-in API server (node:https on 127.0.0.1, with a certificate from
// ../testdata/self-signed.ts): a silent watch is dropped after its bound, a failed watch is followed by a list (not a
// resume from the old resourceVersion), a clean end resumes, and retries back off until a watch delivers.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { closeConnection, type KubeConnection } from '../kube.ts';
import { KubeClient } from '../kube-client.ts';
import { selfSigned } from '../testdata/self-signed.ts';
import { NodeAgent, type WatchTiming } from './agent.ts';
import { parseNodeAgentConfig } from './config.ts';

const dir = mkdtempSync(join(tmpdir(), 'cnikit-agent-watch-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** What the stand-in does with a watch request (its query string given). */
type WatchAnswer = (res: ServerResponse, q: URLSearchParams) => void;

interface Hit {
  kind: 'list' | 'watch';
  rv: string;
  at: number;
}

const pem = selfSigned(dir, 'apiserver');
const tls = { key: readFileSync(pem.key), cert: readFileSync(pem.cert) };
let server: Server;
let conn: KubeConnection;
let hits: Hit[] = [];
let listRv = 0;
let watchAnswers: WatchAnswer[] = [];
let lastAnswer: WatchAnswer = () => {};
let logs: string[] = [];

const nodeObj = (name: string, rv: string, i: number) => ({
  metadata: { name, resourceVersion: rv },
  spec: { podCIDRs: [`10.244.${i}.0/24`] },
  status: { addresses: [{ type: 'InternalIP', address: `192.0.2.${i}` }] },
});

before(async () => {
  server = createServer(tls, (req: IncomingMessage, res: ServerResponse) => {
    const u = new URL(req.url ?? '/', 'https://x');
    const q = u.searchParams;
    if (q.get('watch') === '1') {
      hits.push({ kind: 'watch', rv: q.get('resourceVersion') ?? '', at: Date.now() });
      const a = watchAnswers.length ? (watchAnswers.shift() as WatchAnswer) : lastAnswer;
      a(res, q);
      return;
    }
    listRv++;
    hits.push({ kind: 'list', rv: `L${listRv}`, at: Date.now() });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        metadata: { resourceVersion: `L${listRv}` },
        items: [nodeObj('peer', `L${listRv}`, 1)],
      }),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  conn = {
    server: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    ca: tls.cert,
    source: 'test',
  };
});
after(() => {
  server.closeAllConnections();
  server.close();
});

const silent: WatchAnswer = () => {}; // accepted, never answered
const fail500: WatchAnswer = (res) => {
  res.writeHead(500, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ message: 'etcd leader changed' }));
};
/** One event (a node with resourceVersion `rv`), then a clean end after `endMs`. */
const oneEvent =
  (rv: string, endMs = 0): WatchAnswer =>
  (res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write(`${JSON.stringify({ type: 'ADDED', object: nodeObj(`n-${rv}`, rv, 2) })}\n`);
    setTimeout(() => res.end(), endMs);
  };
/** One event, then the connection cut (no clean end of the chunked answer). */
const oneEventThenCut =
  (rv: string): WatchAnswer =>
  (res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write(`${JSON.stringify({ type: 'ADDED', object: nodeObj(`n-${rv}`, rv, 3) })}\n`);
    setTimeout(() => res.socket?.destroy(), 20);
  };

async function run(
  timing: Partial<WatchTiming>,
  answers: WatchAnswer[],
  last: WatchAnswer,
  until: (a: NodeAgent) => boolean,
  boundMs: number,
): Promise<NodeAgent> {
  hits = [];
  listRv = 0;
  watchAnswers = [...answers];
  lastAnswer = last;
  const cfg = parseNodeAgentConfig({ NODE_NAME: 'self', CNIKIT_MASQUERADE: 'off' });
  logs = [];
  const agent = new NodeAgent(cfg, new KubeClient(conn), (m) => logs.push(m), undefined, timing);
  agent.start();
  const t0 = Date.now();
  try {
    while (!until(agent) && Date.now() - t0 < boundMs) await new Promise((r) => setTimeout(r, 20));
  } finally {
    await agent.stop();
    closeConnection(conn);
    server.closeAllConnections();
  }
  return agent;
}

test('a watch accepted and never answered is dropped after watchTimeoutS + idleMarginS and the nodes listed again', async () => {
  const t0 = Date.now();
  const a = await run(
    { watchTimeoutS: 1, idleMarginS: 0.5, backoffMinMs: 10 },
    [],
    silent,
    () => hits.length >= 4,
    6_000,
  );
  const kinds = hits.map((h) => h.kind);
  assert.deepEqual(kinds.slice(0, 4), ['list', 'watch', 'list', 'watch'], JSON.stringify(hits));
  // the first watch asked the server to end it after 1 s; dropped by the client 1.5 s after it opened
  const dropped = (hits[2] as Hit).at - (hits[1] as Hit).at;
  assert.ok(dropped >= 1_400 && dropped < 3_000, `dropped after ${dropped} ms`);
  assert.equal((hits[3] as Hit).rv, 'L2', 'the watch after the drop starts from the new list');
  assert.ok(
    logs.some((m) => m.includes('no data within 1500 ms')),
    logs.join('\n'),
  );
  assert.ok((a.errors.api ?? 0) >= 1);
  assert.ok(Date.now() - t0 < 6_000);
});

test('the default bounds: the server ends a watch after 60 s, the client drops a silent one after 75 s', async () => {
  let q: URLSearchParams | undefined;
  await run(
    {},
    [],
    (res, query) => {
      q = query;
      res.writeHead(200);
    },
    () => q !== undefined,
    5_000,
  );
  assert.equal(q?.get('timeoutSeconds'), '60');
  assert.equal(q?.get('allowWatchBookmarks'), 'true');
});

test('a failed watch (HTTP 500, connection cut) is followed by a list; a clean end resumes from the last event', async () => {
  await run(
    { backoffMinMs: 10, watchTimeoutS: 60 },
    [oneEvent('5'), fail500, oneEventThenCut('9'), oneEvent('12')],
    silent,
    () => hits.length >= 7,
    5_000,
  );
  assert.deepEqual(
    hits.slice(0, 7).map((h) => `${h.kind}:${h.rv}`),
    [
      'list:L1',
      'watch:L1',
      'watch:5', // clean end after an event: resumed from its resourceVersion, no list
      'list:L2', // HTTP 500: listed again
      'watch:L2',
      'list:L3', // cut mid-stream after an event: listed again, not resumed from 9
      'watch:L3',
    ],
  );
});

test('retries back off (doubling to backoffMaxMs) and the delay resets only after a watch that delivered', async () => {
  const timing = { backoffMinMs: 40, backoffMaxMs: 320, watchTimeoutS: 60 };
  const a = await run(
    timing,
    [fail500, fail500, fail500, fail500, fail500, fail500, oneEvent('7'), fail500],
    silent,
    () => hits.filter((h) => h.kind === 'watch').length >= 9,
    10_000,
  );
  const watches = hits.filter((h) => h.kind === 'watch');
  assert.ok(watches.length >= 9, JSON.stringify(hits));
  const gaps = watches.slice(1, 7).map((w, i) => w.at - (watches[i] as Hit).at);
  // 40, 80, 160, 320, 320 (±20 %), plus a list each time
  for (const [i, want] of [40, 80, 160, 320, 320].entries())
    assert.ok(
      (gaps[i] as number) >= want * 0.8,
      `gap ${i}: ${gaps[i]} ms, want ≥ ${want * 0.8} (${gaps.join(', ')})`,
    );
  // after the watch that delivered (the 7th) and ended at once, its 8th fails: that retry waits the minimum again
  assert.equal((watches[7] as Hit).rv, '7');
  const last = (watches[8] as Hit).at - (watches[7] as Hit).at;
  assert.ok(last < 200, `after a delivering watch the retry waited ${last} ms`);
  assert.equal(a.lastBackoffMs, 40);
});

test('a watch the server ends at once with nothing delivered is not retried in a hot loop', async () => {
  const emptyEnd: WatchAnswer = (res) => {
    res.writeHead(200);
    res.end();
  };
  const a = await run(
    { backoffMinMs: 50, backoffMaxMs: 400, watchTimeoutS: 60 },
    [],
    emptyEnd,
    () => false,
    1_500,
  );
  const watches = hits.filter((h) => h.kind === 'watch').length;
  // 50 + 100 + 200 + 400 + 400 … ≈ 5 watches in 1.5 s (the old code: one every few ms)
  assert.ok(watches <= 8, `${watches} watches in 1.5 s`);
  assert.ok(a.lastBackoffMs >= 200, String(a.lastBackoffMs));
});
