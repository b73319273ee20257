// biome-ignore-all lint/suspicious/noTemplateCurlyInString: the template syntax ${NAME} is the subject here
// cnikit install-cni reading the node's pod subnet from a stand-in API server (node:https on 127.0.0.1, with a
// certificate from testdata/self-signed.ts).
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { installCniMain } from './install-cni.ts';
import { withNodePodCidr } from './node-podcidr.ts';
import { selfSigned } from './testdata/self-signed.ts';

const dir = mkdtempSync(join(tmpdir(), 'cnikit-podcidr-'));
after(() => rmSync(dir, { recursive: true, force: true }));

interface Seen {
  path: string;
  auth: string | undefined;
}
let answers: { status: number; body: unknown }[] = [];
const seen: Seen[] = [];
let server: Server;
let env: Record<string, string>;
const good = selfSigned(dir, 'apiserver');
const other = selfSigned(dir, 'other-ca');
const token = join(dir, 'token');
writeFileSync(token, 'tok-123\n');

before(async () => {
  server = createServer({ key: readFileSync(good.key), cert: readFileSync(good.cert) }, (req, res) => {
    seen.push({ path: req.url ?? '', auth: req.headers.authorization });
    const a = answers.length > 1 ? answers.shift() : answers[0];
    res.writeHead(a?.status ?? 500, { 'content-type': 'application/json' });
    res.end(JSON.stringify(a?.body ?? {}));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  env = {
    NODE_NAME: 'node-a',
    KUBERNETES_SERVICE_HOST: '127.0.0.1',
    KUBERNETES_SERVICE_PORT: String((server.address() as AddressInfo).port),
    CNIKIT_SA_TOKEN_FILE: token,
    CNIKIT_SA_CA_FILE: good.cert,
  };
});
after(() => server.close());

const node = (spec: object) => ({ status: 200, body: { kind: 'Node', metadata: { name: 'node-a' }, spec } });
const quick = { attempts: 3, retryDelayMs: 20 };

describe('install-cni: the node pod subnet from the API server', () => {
  test('spec.podCIDR fills ${POD_CIDR}, with the token, GET /api/v1/nodes/$NODE_NAME', async () => {
    answers = [node({ podCIDR: '10.244.3.0/24', podCIDRs: ['10.244.3.0/24'] })];
    seen.length = 0;
    const r = await withNodePodCidr(env, '{"subnet": "${POD_CIDR}"}', quick);
    assert.equal(r.POD_CIDR, '10.244.3.0/24');
    assert.deepEqual(seen, [{ path: '/api/v1/nodes/node-a', auth: 'Bearer tok-123' }]);
  });

  test('dual stack: spec.podCIDRs fills ${POD_CIDRS} (comma-joined) and ${POD_CIDR} the first', async () => {
    answers = [node({ podCIDR: '10.244.3.0/24', podCIDRs: ['10.244.3.0/24', 'fd00:10:244:3::/64'] })];
    const r = await withNodePodCidr(env, '"${POD_CIDR}" "${POD_CIDRS}"', quick);
    assert.equal(r.POD_CIDR, '10.244.3.0/24');
    assert.equal(r.POD_CIDRS, '10.244.3.0/24,fd00:10:244:3::/64');
    const d = await withNodePodCidr(env, '"${POD_CIDR_V4}" "${POD_CIDR_V6}"', quick);
    assert.equal(d.POD_CIDR_V4, '10.244.3.0/24');
    assert.equal(d.POD_CIDR_V6, 'fd00:10:244:3::/64');
    answers = [node({ podCIDR: '10.244.3.0/24', podCIDRs: ['10.244.3.0/24'] })];
    await assert.rejects(
      withNodePodCidr(env, '"${POD_CIDR_V6}"', quick),
      /node node-a has no IPv6 pod subnet \(spec.podCIDRs: 10.244.3.0\/24\); nothing was written/,
    );
  });

  test('a podCIDR that arrives on the second attempt is used', async () => {
    answers = [node({}), node({ podCIDR: '10.244.9.0/24' })];
    seen.length = 0;
    const r = await withNodePodCidr(env, '${POD_CIDR}', quick);
    assert.equal(r.POD_CIDR, '10.244.9.0/24');
    assert.equal(seen.length, 2);
  });

  test('no podCIDR: retried, then an error naming the node, and install-cni writes nothing', async () => {
    answers = [node({})];
    seen.length = 0;
    await assert.rejects(
      withNodePodCidr(env, '${POD_CIDR}', quick),
      /node node-a has no pod subnet yet.*after 3 attempts; nothing was written/,
    );
    assert.equal(seen.length, 3);
    const tpl = join(dir, '10-test.conflist');
    writeFileSync(
      tpl,
      JSON.stringify({
        cniVersion: '1.0.0',
        name: 't',
        plugins: [{ type: 'bridge', ipam: { type: 'host-local', ranges: [[{ subnet: '${POD_CIDR}' }]] } }],
      }),
    );
    const bin = join(dir, 'bin');
    const conf = join(dir, 'conf');
    mkdirSync(bin);
    mkdirSync(conf);
    const errs: string[] = [];
    const code = await installCniMain(['--cold', '--bin-dir', bin, '--conf-dir', conf, '--template', tpl], {
      plugins: ['bridge'],
      execPath: process.execPath,
      env: { ...env, CNIKIT_SA_CA_FILE: good.cert },
      out: () => {},
      err: (l) => errs.push(l),
      podCidr: quick,
    });
    assert.equal(code, 1);
    assert.match(errs.join('\n'), /node node-a has no pod subnet yet/);
    assert.deepEqual(readdirSync(bin), []);
    assert.deepEqual(readdirSync(conf), []);
  });

  test('install-cni with the pod CIDR from the Node: the stale bridge check sees the conflist written; with POD_CIDR set: no check', async () => {
    const tpl = join(dir, '10-stale.conflist');
    writeFileSync(
      tpl,
      JSON.stringify({
        cniVersion: '1.0.0',
        name: 't',
        plugins: [{ type: 'bridge', ipam: { type: 'host-local', ranges: [[{ subnet: '${POD_CIDR}' }]] } }],
      }),
    );
    const run = async (extra: Record<string, string>, sub: string) => {
      const bin = join(dir, `${sub}-bin`);
      const conf = join(dir, `${sub}-conf`);
      mkdirSync(bin);
      mkdirSync(conf);
      const checked: unknown[] = [];
      const errs: string[] = [];
      const code = await installCniMain(['--cold', '--bin-dir', bin, '--conf-dir', conf, '--template', tpl], {
        plugins: ['bridge'],
        execPath: process.execPath,
        env: { ...env, CNIKIT_SA_CA_FILE: good.cert, ...extra },
        out: () => {},
        err: (l) => errs.push(l),
        podCidr: quick,
        staleBridge: (c) => checked.push(c),
      });
      assert.equal(code, 0, errs.join('\n'));
      return checked as { plugins: { ipam: { ranges: { subnet: string }[][] } }[] }[];
    };
    answers = [node({ podCIDR: '10.244.7.0/24' })];
    const fromNode = await run({}, 'stale-a');
    assert.equal(fromNode.length, 1);
    assert.deepEqual(fromNode[0]?.plugins[0]?.ipam.ranges, [[{ subnet: '10.244.7.0/24' }]]);
    assert.deepEqual(await run({ POD_CIDR: '10.1.0.0/24' }, 'stale-b'), []);
  });

  test('a server certificate that does not chain to the CA is refused (no retry, no token use)', async () => {
    answers = [node({ podCIDR: '10.244.3.0/24' })];
    seen.length = 0;
    await assert.rejects(
      withNodePodCidr({ ...env, CNIKIT_SA_CA_FILE: other.cert }, '${POD_CIDR}', quick),
      /TLS verification against .*other-ca\.crt failed/,
    );
    assert.equal(seen.length, 0);
  });

  test('403: a clear error about the RBAC rule, not retried', async () => {
    answers = [{ status: 403, body: { kind: 'Status', reason: 'Forbidden' } }];
    seen.length = 0;
    await assert.rejects(
      withNodePodCidr(env, '${POD_CIDR}', quick),
      /HTTP 403 \(forbidden: the service account needs "get" on nodes/,
    );
    assert.equal(seen.length, 1);
  });

  test('POD_CIDR set in the environment (or not referenced): no API call', async () => {
    seen.length = 0;
    const set = { ...env, POD_CIDR: '10.1.0.0/24' };
    assert.equal(await withNodePodCidr(set, '${POD_CIDR}', quick), set);
    assert.equal(await withNodePodCidr(env, '${MTU:-1500}', quick), env);
    assert.equal(seen.length, 0);
  });

  test('no NODE_NAME or no KUBERNETES_SERVICE_HOST: an error before any request', async () => {
    const { NODE_NAME: _n, ...noNode } = env;
    await assert.rejects(withNodePodCidr(noNode, '${POD_CIDR}', quick), /NODE_NAME is not set/);
    const { KUBERNETES_SERVICE_HOST: _h, ...noHost } = env;
    await assert.rejects(withNodePodCidr(noHost, '${POD_CIDR}', quick), /KUBERNETES_SERVICE_HOST is not set/);
  });
});
