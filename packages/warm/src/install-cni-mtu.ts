/**
 * install-cni's MTU when the node agent is on: the conflist's `${MTU}` follows the agent's mode unless the ConfigMap
 * key `mtu` sets it. Pods behind VXLAN need room for its encapsulation (outer IPv4 20 or IPv6 40 + UDP 8 + VXLAN 8 +
 * inner Ethernet 14 = 50 / 70 bytes); `auto` may carry any peer through VXLAN, so it gets the VXLAN MTU too
 * (flannel does the same). `host-gw` adds no header: the underlay's MTU.
 *
 * The underlay is the host link holding NODE_IP (the downward API's status.hostIP, the node's InternalIP), else the
 * link of the IPv4 default route, else an assumed 1500-byte IPv4 link.
 */
import type { Family } from '@cnikit/ip';
import { listLinks, listRoutes } from '@cnikit/netlink';
import { KEYS, MODES, nodeAgentEnabled } from './node-agent/config.ts';
import { findUnderlay, vxlanOverhead } from './node-agent/kernel.ts';

export interface UnderlayMtu {
  mtu: number;
  family: Family;
  /** Where the figure comes from (the line install-cni prints). */
  from: string;
}

/** The node's underlay link and its MTU, looked up in this (the host's) network namespace. */
export function hostUnderlayMtu(env: Readonly<Record<string, string | undefined>>): UnderlayMtu {
  const nodeIp = env.NODE_IP?.trim();
  if (nodeIp) {
    const u = findUnderlay([nodeIp]);
    if (u) return { mtu: u.mtu, family: u.vtepFamily ?? 4, from: `${u.linkName} (${nodeIp})` };
  }
  const dflt = listRoutes({ family: 4 }).find((r) => r.dst === '0.0.0.0/0' && r.linkIndex !== undefined);
  const link = dflt && listLinks().find((l) => l.index === dflt.linkIndex);
  if (link) return { mtu: link.mtu, family: 4, from: `${link.name} (the default route's link)` };
  return { mtu: 1500, family: 4, from: 'no underlay link found: 1500 assumed' };
}

/**
 * The environment install-cni renders with: `MTU` filled from the node agent's mode when the agent is on and `MTU`
 * is unset or empty; anything else unchanged. A mode the agent would refuse leaves `MTU` alone (the agent reports
 * the key; the template's default applies).
 */
export function withAgentMtu(
  env: Readonly<Record<string, string | undefined>>,
  out: (line: string) => void,
  underlay: (env: Readonly<Record<string, string | undefined>>) => UnderlayMtu = hostUnderlayMtu,
): Readonly<Record<string, string | undefined>> {
  if (!nodeAgentEnabled(env) || (env.MTU ?? '').trim() !== '') return env;
  const mode = (env[KEYS['node-agent-mode']] ?? '').trim() || 'auto';
  if (!(MODES as readonly string[]).includes(mode)) return env;
  const vxlanMtu = (env[KEYS['vxlan-mtu']] ?? '').trim();
  if (mode !== 'host-gw' && /^\d+$/.test(vxlanMtu)) {
    out(`MTU ${vxlanMtu}: node agent mode ${mode}, vxlan-mtu`);
    return { ...env, MTU: vxlanMtu };
  }
  const u = underlay(env);
  if (mode === 'host-gw') {
    out(`MTU ${u.mtu}: node agent mode host-gw, the underlay ${u.from}`);
    return { ...env, MTU: String(u.mtu) };
  }
  const overhead = vxlanOverhead(u.family);
  const mtu = u.mtu - overhead;
  out(
    `MTU ${mtu}: node agent mode ${mode}, the underlay ${u.from} ${u.mtu} - ${overhead} (VXLAN, IPv${u.family})`,
  );
  return { ...env, MTU: String(mtu) };
}
