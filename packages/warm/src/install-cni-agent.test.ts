/**
 * install-cni and the node agent: the rendered conflist's MTU follows the agent's mode (VXLAN overhead) unless the
 * ConfigMap's `mtu` is set; the serve container's readiness check (`--check --socket`) asks the agent's /readyz
 * when the agent is on.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { installCniMain } from './install-cni.ts';
import { type UnderlayMtu, withAgentMtu } from './install-cni-mtu.ts';
import { checkNodeAgentReady } from './node-agent/readyz.ts';

const base = mkdtempSync(join(tmpdir(), 'cnikit-install-cni-agent-'));
after(() => rmSync(base, { recursive: true, force: true }));

const eth0 =
  (mtu: number, family: 4 | 6 = 4) =>
  (): UnderlayMtu => ({ mtu, family, from: 'eth0 (test)' });
const ON = { NODE_NAME: 'n1', CNIKIT_NODE_AGENT: 'on' };

test('MTU: agent off or mtu set → unchanged; vxlan/auto → underlay − 50 (IPv4) / − 70 (IPv6); host-gw → underlay', () => {
  const lines: string[] = [];
  const out = (l: string) => lines.push(l);
  const mtu = (env: Record<string, string>, u = eth0(1500)) => withAgentMtu(env, out, u).MTU;
  assert.equal(mtu({ NODE_NAME: 'n1', CNIKIT_NODE_AGENT_MODE: 'vxlan' }), undefined);
  assert.equal(mtu({ ...ON, CNIKIT_NODE_AGENT: 'off' }), undefined);
  assert.equal(mtu({ ...ON, MTU: '1400' }), '1400');
  assert.equal(mtu({ ...ON, CNIKIT_NODE_AGENT_MODE: 'vxlan' }), '1450');
  assert.equal(mtu(ON), '1450', 'auto may carry any peer through VXLAN');
  assert.equal(mtu({ ...ON, CNIKIT_NODE_AGENT_MODE: 'vxlan' }, eth0(9000)), '8950');
  assert.equal(mtu({ ...ON, CNIKIT_NODE_AGENT_MODE: 'vxlan' }, eth0(1500, 6)), '1430');
  assert.equal(mtu({ ...ON, CNIKIT_NODE_AGENT_MODE: 'host-gw' }, eth0(9000)), '9000');
  assert.equal(mtu({ ...ON, CNIKIT_NODE_AGENT_MODE: 'vxlan', CNIKIT_VXLAN_MTU: '1300' }), '1300');
  assert.equal(mtu({ ...ON, CNIKIT_NODE_AGENT_MODE: 'host-gw', CNIKIT_VXLAN_MTU: '1300' }), '1500');
  // a mode the agent refuses: the agent reports the key; the template's default stays
  assert.equal(mtu({ ...ON, CNIKIT_NODE_AGENT_MODE: 'bgp' }), undefined);
  assert.ok(
    lines.includes('MTU 1450: node agent mode vxlan, the underlay eth0 (test) 1500 - 50 (VXLAN, IPv4)'),
  );
});

test('install-cni renders the agent mode’s MTU into the conflist, and the ConfigMap’s mtu wins', async () => {
  const host = join(base, 'host');
  const tdir = join(host, 'cm');
  mkdirSync(tdir, { recursive: true });
  const template = join(tdir, '10-cnikit.conflist');
  writeFileSync(
    template,
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the template syntax, literally
    '{"cniVersion":"1.0.0","name":"k8s","plugins":[{"type":"bridge","mtu":${MTU:-1500},"ipam":{"type":"host-local","ranges":[[{"subnet":"${POD_CIDR}"}]]}}]}\n',
  );
  const exe = join(base, 'cnikit');
  writeFileSync(exe, 'exe', { mode: 0o755 });
  writeFileSync(join(base, 'cnikit-client'), 'client', { mode: 0o755 });
  const confDir = join(host, 'net.d');
  const render = async (env: Record<string, string>) => {
    const out: string[] = [];
    const rc = await installCniMain(
      ['--bin-dir', join(host, 'bin'), '--conf-dir', confDir, '--template', template],
      {
        plugins: ['bridge', 'host-local'],
        execPath: exe,
        env: { POD_CIDR: '10.244.1.0/24', ...env },
        out: (l) => out.push(l),
        err: (l) => out.push(l),
        underlayMtu: eth0(1500),
      },
    );
    assert.equal(rc, 0, out.join('\n'));
    return {
      mtu: JSON.parse(readFileSync(join(confDir, '10-cnikit.conflist'), 'utf8')).plugins[0].mtu,
      out: out.join('\n'),
    };
  };
  assert.equal((await render({ NODE_NAME: 'n1' })).mtu, 1500);
  const vx = await render({ ...ON, CNIKIT_NODE_AGENT_MODE: 'vxlan' });
  assert.equal(vx.mtu, 1450);
  assert.match(vx.out, /MTU 1450: node agent mode vxlan/);
  assert.equal((await render({ ...ON, CNIKIT_NODE_AGENT_MODE: 'host-gw' })).mtu, 1500);
  assert.equal((await render({ ...ON, CNIKIT_NODE_AGENT_MODE: 'vxlan', MTU: '1400' })).mtu, 1400);
});

test('readiness: --check --socket asks /readyz when the agent is on (503 → 1 with its line, 200 → 0)', async (t) => {
  let status = 503;
  const srv = createServer((req, res) => {
    if (req.url !== '/readyz') return void res.writeHead(404).end();
    res
      .writeHead(status)
      .end(
        status === 200 ? 'ok\n' : 'not ready: ConfigMap key vxlan-id (CNIKIT_VXLAN_ID): 0 is out of range\n',
      );
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  t.after(() => srv.close());
  const port = (srv.address() as AddressInfo).port;
  const env = { ...ON, CNIKIT_NODE_AGENT_HEALTH: `127.0.0.1:${port}` };
  const lines: string[] = [];
  const out = (l: string) => lines.push(l);
  assert.equal(await checkNodeAgentReady({ ...env, CNIKIT_NODE_AGENT: 'off' }, out), 0);
  assert.deepEqual(lines, []);
  assert.equal(await checkNodeAgentReady(env, out), 1);
  assert.match(lines.at(-1) ?? '', /^not ready: node agent .*HTTP 503: .*ConfigMap key vxlan-id/);
  // the whole probe command: install check (a fresh install), service check, then the agent
  const host = join(base, 'probe');
  const exe = join(host, 'img', 'cnikit');
  mkdirSync(join(host, 'img'), { recursive: true });
  writeFileSync(exe, 'exe', { mode: 0o755 });
  writeFileSync(join(host, 'img', 'cnikit-client'), 'client', { mode: 0o755 });
  const bin = join(host, 'bin');
  const ctx = (e: Record<string, string>) => ({
    plugins: ['bridge'],
    execPath: exe,
    env: e,
    out,
    err: out,
    serviceCheck: async () => 0,
  });
  const tpl = join(host, '10-cnikit.conflist');
  writeFileSync(tpl, '{"cniVersion":"1.0.0","name":"k8s","plugins":[{"type":"bridge"}]}\n');
  const install = ['--bin-dir', bin, '--conf-dir', join(host, 'net.d'), '--template', tpl];
  assert.equal(await installCniMain(install, ctx(env)), 0);
  const probe = ['--check', '--bin-dir', bin, '--socket', '/run/x.sock'];
  lines.length = 0;
  assert.equal(await installCniMain(probe, ctx(env)), 1);
  assert.match(lines.join('\n'), /HTTP 503/);
  status = 200;
  lines.length = 0;
  assert.equal(await installCniMain(probe, ctx(env)), 0);
  assert.match(lines.join('\n'), /ok: node agent ready/);
  // agent off: the agent's listener is not asked at all
  status = 503;
  assert.equal(await installCniMain(probe, ctx({ NODE_NAME: 'n1' })), 0);
  // agent on but nothing listening: not ready, saying so
  await new Promise((r) => {
    srv.close(r);
    srv.closeAllConnections();
  });
  lines.length = 0;
  assert.equal(await installCniMain(probe, ctx(env)), 1);
  assert.match(lines.join('\n'), /not ready: node agent http:\/\/127\.0\.0\.1:\d+\/readyz: .*ECONNREFUSED/);
});
