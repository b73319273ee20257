/**
 * The node agent's spans: a reconcile pass in a namespace of the test's own (one peer on the link, masquerade on)
 * is the root of a trace with the route-programming, masquerade and iptables-restore spans below it; a failed pass
 * is an ERROR span; a list of the Node objects is a client span. Nothing is recorded without an endpoint.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { withNetns } from '@cnikit/netlink';
import type { Recording, SpanRecord } from '@cnikit/skel';
import type { KubeClient } from '../kube-client.ts';
import { NodeAgent } from './agent.ts';
import { parseNodeAgentConfig } from './config.ts';

const NS = `cnikit-natrace-${process.pid}`;

function ip(args: string[]): string {
  const r = spawnSync('ip', args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`ip ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

const fakeClient = (items: unknown[]) =>
  ({
    server: 'https://192.0.2.1:6443',
    request: async () => ({
      status: 200,
      body: JSON.stringify({ metadata: { resourceVersion: '7' }, items }),
      headers: {},
    }),
    stream: (_path: string, _onLine: unknown, o: { signal: AbortSignal }) =>
      new Promise((_resolve, reject) =>
        o.signal.addEventListener('abort', () => reject(new Error('aborted'))),
      ),
  }) as unknown as KubeClient;

const cfg = parseNodeAgentConfig({
  NODE_NAME: 'self',
  CNIKIT_NODE_AGENT_MODE: 'host-gw',
  CNIKIT_CLUSTER_CIDR: '10.244.0.0/16',
  CNIKIT_NODE_AGENT_HEALTH: 'off',
});

const byName = (r: Recording, name: string): SpanRecord => {
  const s = r.spans.find((x) => x.name === name);
  assert.ok(s, `span ${name} among ${r.spans.map((x) => x.name).join(', ')}`);
  return s;
};

test('spans: reconcile (root) → routes, masquerade → exec iptables-restore; a failed pass is ERROR', (t) => {
  ip(['netns', 'add', NS]);
  t.after(() => spawnSync('ip', ['netns', 'del', NS]));
  ip(['-n', NS, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth1']);
  ip(['-n', NS, 'link', 'set', 'eth1', 'up']);
  ip(['-n', NS, 'addr', 'add', '192.168.77.1/24', 'dev', 'eth0']);
  ip(['-n', NS, 'link', 'set', 'eth0', 'up']);
  const recs: Recording[] = [];
  const tracing = { endpoint: 'http://127.0.0.1:9/v1/traces', exporter: (r: Recording) => recs.push(r) };
  const agent = new NodeAgent(cfg, fakeClient([]), () => {}, tracing);
  agent.nodes.set('self', {
    name: 'self',
    podCidrs: ['10.244.1.0/24'],
    internalIps: ['192.168.77.1'],
    vtepMac: undefined,
  });
  agent.nodes.set('peer', {
    name: 'peer',
    podCidrs: ['10.244.2.0/24'],
    internalIps: ['192.168.77.2'],
    vtepMac: undefined,
  });
  withNetns(`/run/netns/${NS}`, () => agent.sync());
  assert.equal(agent.ready, true, agent.lastError);
  // the kernel got the route, and the span says so
  const routes = JSON.parse(ip(['-n', NS, '-j', 'route', 'show', 'proto', '157'])) as { dst: string }[];
  assert.deepEqual(
    routes.map((r) => r.dst),
    ['10.244.2.0/24'],
  );
  assert.equal(recs.length, 1);
  const rec = recs[0] as Recording;
  assert.equal(rec.endpoint, tracing.endpoint);
  const root = byName(rec, 'node-agent reconcile');
  assert.equal(root.parentSpanId, undefined);
  assert.equal(root.status.code, 0);
  assert.ok(root.endNs !== undefined && root.endNs >= root.startNs);
  assert.equal(root.attributes['k8s.node.name'], 'self');
  assert.equal(root.attributes['cnikit.node_agent.mode'], 'host-gw');
  assert.equal(root.attributes['cnikit.node_agent.routes'], 1);
  assert.equal(root.attributes['cnikit.node_agent.changes'], 1);
  const r = byName(rec, 'node-agent routes');
  assert.equal(r.parentSpanId, root.spanId);
  assert.equal(r.traceId, root.traceId);
  assert.equal(r.attributes['cnikit.node_agent.routes_wanted'], 1);
  assert.equal(r.attributes['cnikit.node_agent.changes'], 1);
  const m = byName(rec, 'node-agent masquerade');
  assert.equal(m.parentSpanId, root.spanId);
  const execs = rec.spans.filter((s) => s.name.startsWith('exec '));
  assert.ok(
    execs.some((s) => s.name === 'exec iptables-restore' && s.parentSpanId === m.spanId),
    `an iptables-restore below masquerade: ${execs.map((s) => s.name).join(', ')}`,
  );
  assert.ok(execs.every((s) => s.parentSpanId === m.spanId));
  // a second pass with nothing to change: its own trace, 0 changes
  withNetns(`/run/netns/${NS}`, () => agent.sync());
  assert.equal(recs.length, 2);
  const again = byName(recs[1] as Recording, 'node-agent reconcile');
  assert.notEqual(again.traceId, root.traceId);
  assert.equal(again.attributes['cnikit.node_agent.changes'], 0);
  // a pass that fails (its own node unknown) ends in an ERROR span and changes nothing
  agent.nodes.delete('self');
  withNetns(`/run/netns/${NS}`, () => agent.sync());
  assert.equal(recs.length, 3);
  const failed = byName(recs[2] as Recording, 'node-agent reconcile');
  assert.equal(failed.status.code, 2);
  assert.match(failed.status.message ?? '', /node self \(NODE_NAME\) is not among the Node objects/);
  assert.equal((recs[2] as Recording).spans.length, 1);
});

test('spans: a list of the Node objects is a client span with the count; no tracing, no recording', async () => {
  const recs: Recording[] = [];
  const tracing = { endpoint: 'http://127.0.0.1:9/v1/traces', exporter: (r: Recording) => recs.push(r) };
  // the list names no node "self": the pass after it fails before any kernel call
  const items = [{ metadata: { name: 'other' }, spec: { podCIDR: '10.244.3.0/24' } }];
  const agent = new NodeAgent(cfg, fakeClient(items), () => {}, tracing);
  agent.start();
  for (let t = Date.now(); agent.syncs === 0; ) {
    assert.ok(Date.now() - t < 10_000, 'no sync after the list');
    await new Promise((r) => setTimeout(r, 10));
  }
  await agent.stop();
  const list = recs.flatMap((r) => r.spans).find((s) => s.name === 'node-agent list nodes');
  assert.ok(list, recs.map((r) => r.spans.map((s) => s.name)).join('; '));
  assert.equal(list.kind, 3);
  assert.equal(list.parentSpanId, undefined);
  assert.equal(list.attributes['server.address'], 'https://192.0.2.1:6443');
  assert.equal(list.attributes['cnikit.node_agent.nodes'], 1);
  assert.equal(list.attributes['k8s.resource_version'], '7');
  assert.ok(
    recs.flatMap((r) => r.spans).some((s) => s.name === 'node-agent reconcile' && s.status.code === 2),
  );
  // without tracing: the same run records nothing (and does not fail)
  const quiet = new NodeAgent(cfg, fakeClient(items), () => {});
  quiet.start();
  for (let t = Date.now(); quiet.syncs === 0; ) {
    assert.ok(Date.now() - t < 10_000, 'no sync after the list');
    await new Promise((r) => setTimeout(r, 10));
  }
  await quiet.stop();
  assert.equal(quiet.nodes.size, 1);
});
