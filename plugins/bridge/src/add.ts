/** ADD, step by step as the reference (plugins.md §1.2), plus rollback of what this call created. */

import { closeSync } from 'node:fs';
import * as fw from '@cnikit/firewall';
import { type CIDR, formatCIDR } from '@cnikit/ip';
import { configureIface, enableForward, hostVethUp, ipamAdd } from '@cnikit/link';
import * as nl from '@cnikit/netlink';
import {
  errorReason,
  internalError,
  type Request,
  type Result,
  Rollback,
  validateDelegate,
} from '@cnikit/skel';
import { type BridgeConf, uniqueID, validateForAdd, wantsVlanFiltering } from './config.ts';
import { calcGateways, type GatewayInfo, planAddr } from './gateways.ts';
import * as k from './kernel.ts';
import { chooseDns, interfaceSkeleton, mergeIpamResult } from './result.ts';

/**
 * Step 3: create or reuse the bridge; EEXIST from concurrent creators is fine (re-read and verify). A bridge this
 * call created gets a step on `undo` that removes it again (see `removeCreatedBridge`); one it found is never removed.
 */
export function ensureBridge(conf: BridgeConf, undo?: Rollback): k.LinkInfo {
  try {
    // Fast path: an existing bridge is used as it is (the reference never changes it either).
    let br = k.linkByName(conf.bridge);
    if (!br) {
      let created = true;
      try {
        k.createBridge(conf.bridge, conf.mtu, wantsVlanFiltering(conf));
      } catch (err) {
        // EEXIST: a concurrent ADD created it first — re-read and verify below.
        if (!nl.hasErrno(err, 'EEXIST'))
          throw internalError(`could not add ${JSON.stringify(conf.bridge)}: ${errorReason(err)}`, err);
        created = false;
      }
      br = bridgeByName(conf.bridge);
      if (created && undo) {
        const index = br.index;
        undo.push(`delete bridge ${conf.bridge}`, () => removeCreatedBridge(conf.bridge, index));
      }
    } else if (br.kind !== 'bridge') {
      throw internalError(`${JSON.stringify(conf.bridge)} already exists but is not a bridge`);
    }
    if (conf.promiscMode && !br.promisc) {
      try {
        nl.setPromisc(br.index, true);
      } catch (err) {
        throw internalError(
          `could not set promiscuous mode on ${JSON.stringify(conf.bridge)}: ${errorReason(err)}`,
          err,
        );
      }
    }
    k.sysctlEnsure(`net/ipv6/conf/${conf.bridge}/accept_ra`, '0');
    if (!br.up) nl.setLinkUp(br.index);
    return br;
  } catch (err) {
    throw internalError(`failed to create bridge ${JSON.stringify(conf.bridge)}: ${errorReason(err)}`, err);
  }
}

/**
 * The rollback of a bridge this ADD created (it runs after this call's own port is gone): removed when it is still
 * that link (same ifindex) and no port is attached — a concurrent ADD that found it and attached its container
 * keeps it. Its addresses (a gateway this ADD set) go with it.
 */
export function removeCreatedBridge(name: string, index: number): void {
  const link = nl.getLink(name);
  if (!link || link.index !== index) return;
  if (nl.listLinks().some((l) => l.masterIndex === index)) return;
  k.deleteLinkQuiet(name);
}

export function bridgeByName(name: string): k.LinkInfo {
  let link: k.LinkInfo | undefined;
  try {
    link = k.linkByName(name);
  } catch (err) {
    throw internalError(`could not lookup ${JSON.stringify(name)}: ${errorReason(err)}`, err);
  }
  if (!link) throw internalError(`could not lookup ${JSON.stringify(name)}: Link not found`);
  if (link.kind !== 'bridge')
    throw internalError(`${JSON.stringify(name)} already exists but is not a bridge`);
  return link;
}

/** The port operations configurePort needs (the kernel module by default; a recorder in unit tests). */
export interface PortOps {
  setMaster(link: string | number, master: string | number): void;
  setPortFlags(link: string | number, flags: { hairpin?: boolean; isolated?: boolean }): void;
  vlanList(name: string): number[];
  vlanDel(name: string, vid: number): void;
  vlanAdd(name: string, vid: number, opts: { pvid: boolean; untagged: boolean }): void;
}

/** Attach a host-side port to the bridge with flags and VLAN entries (the host half of `setupVeth`). */
export function configurePort(
  hostName: string,
  bridge: string,
  opts: {
    hairpin: boolean;
    isolated: boolean;
    vlan: number;
    vlans: readonly number[];
    preserveDefaultVlan: boolean;
  },
  refs: { host: string | number; bridge: string | number } = { host: hostName, bridge },
  ops: PortOps = k,
): void {
  try {
    ops.setMaster(refs.host, refs.bridge);
  } catch (err) {
    throw internalError(
      `failed to connect ${JSON.stringify(hostName)} to bridge ${bridge}: ${errorReason(err)}`,
      err,
    );
  }
  try {
    ops.setPortFlags(refs.host, { hairpin: opts.hairpin });
  } catch (err) {
    throw internalError(`failed to setup hairpin mode for ${hostName}: ${errorReason(err)}`, err);
  }
  try {
    ops.setPortFlags(refs.host, { isolated: opts.isolated });
  } catch (err) {
    throw internalError(`failed to set isolated on for ${hostName}: ${errorReason(err)}`, err);
  }
  for (const op of planPortVlans(opts)) {
    try {
      if (op.op === 'del') {
        for (const vid of ops.vlanList(hostName)) ops.vlanDel(hostName, vid);
      } else ops.vlanAdd(hostName, op.vid, { pvid: op.pvid, untagged: op.pvid });
    } catch (err) {
      throw internalError(`${op.what} on interface ${JSON.stringify(hostName)}: ${errorReason(err)}`, err);
    }
  }
}

export type VlanOp = { op: 'del'; what: string } | { op: 'add'; vid: number; pvid: boolean; what: string };

/** The VLAN operations on a new port, in order (pure; VLAN filtering is tested through this). */
export function planPortVlans(opts: {
  vlan: number;
  vlans: readonly number[];
  preserveDefaultVlan: boolean;
}): VlanOp[] {
  const ops: VlanOp[] = [];
  if ((opts.vlan !== 0 || opts.vlans.length > 0) && !opts.preserveDefaultVlan) {
    ops.push({ op: 'del', what: 'failed to remove default vlan' });
  }
  if (opts.vlan !== 0) ops.push({ op: 'add', vid: opts.vlan, pvid: true, what: 'failed to setup vlan tag' });
  for (const v of opts.vlans) ops.push({ op: 'add', vid: v, pvid: false, what: 'failed to setup vlan tag' });
  if (opts.vlan === 0 && opts.vlans.length > 0) {
    ops.push({ op: 'add', vid: 1, pvid: true, what: 'failed to setup default native vlan tag' });
  }
  return ops;
}

/**
 * `ensureAddr`: put `gw` on `dev` per the reference rules, then set the device's MAC to `mac` — the MAC
 * it had when this ADD looked it up, before the new port was enslaved (like the reference) — which
 * freezes a bridge's MAC (otherwise it follows the lowest port MAC and changes as ports churn).
 */
export function ensureAddr(dev: string, gw: CIDR, forceAddress: boolean, mac: string): void {
  let existing: CIDR[];
  try {
    existing = k.listAddrs(dev, gw.ip.family);
  } catch (err) {
    throw internalError(`could not get list of IP addresses: ${errorReason(err)}`, err);
  }
  const plan = planAddr(dev, existing, gw, forceAddress);
  for (const a of plan.remove) {
    try {
      nl.delAddr(dev, formatCIDR(a));
    } catch (err) {
      if (!nl.hasErrno(err, 'EADDRNOTAVAIL')) {
        throw internalError(
          `could not remove IP address from ${JSON.stringify(dev)}: ${errorReason(err)}`,
          err,
        );
      }
    }
  }
  if (!plan.add) return;
  const text = formatCIDR(gw);
  try {
    nl.addAddr(dev, text);
  } catch (err) {
    // EEXIST: a concurrent ADD put the same address there first.
    if (!nl.hasErrno(err, 'EEXIST'))
      throw internalError(
        `could not add IP address ${text} to ${JSON.stringify(dev)}: ${errorReason(err)}`,
        err,
      );
  }
  try {
    // A bridge whose ports all went away has the zero MAC until a port joins again: the reference then
    // fails with EADDRNOTAVAIL; freeze the MAC it has now (taken from the new port) instead.
    const target = isUsableMac(mac) ? mac : k.linkByName(dev)?.mac;
    if (target && isUsableMac(target)) nl.setMac(dev, target);
  } catch (err) {
    throw internalError(`could not set bridge's mac: ${errorReason(err)}`, err);
  }
}

/** A MAC the kernel accepts as a device address: not zero, not multicast. */
export function isUsableMac(mac: string): boolean {
  const m = /^([0-9a-f]{2})(:[0-9a-f]{2}){5}$/i.exec(mac);
  if (!m) return false;
  return (Number.parseInt(m[1]!, 16) & 1) === 0 && !/^(00:){5}00$/.test(mac);
}

/**
 * The `<bridge>.<vlan>` gateway interface (a host-side veth pair, one end an access port). One this call created
 * gets a step on `undo` that removes it again (while it is still that link); one it found is never removed.
 */
export function ensureVlanInterface(
  conf: BridgeConf,
  br: k.LinkInfo,
  ops: PortOps = k,
  undo?: Rollback,
): k.LinkInfo {
  const name = `${conf.bridge}.${conf.vlan}`;
  const existing = k.linkByName(name);
  if (existing) return existing;
  let peer: string;
  try {
    peer = nl.createVethWithRandomPeer(name, br.mtu, '', undefined).peer;
  } catch (err) {
    throw internalError(`faild to create vlan gateway ${JSON.stringify(name)}: ${errorReason(err)}`, err);
  }
  try {
    nl.setLinkUp(peer);
    k.sysctlTry(`net/ipv6/conf/${peer}/accept_ra`, '0');
    configurePort(
      peer,
      conf.bridge,
      {
        hairpin: false,
        isolated: false,
        vlan: conf.vlan,
        vlans: [],
        preserveDefaultVlan: conf.preserveDefaultVlan,
      },
      { host: peer, bridge: br.index },
      ops,
    );
    nl.setLinkUp(name);
  } catch (err) {
    k.deleteLinkQuiet(name);
    throw internalError(`faild to create vlan gateway ${JSON.stringify(name)}: ${errorReason(err)}`, err);
  }
  const link = k.linkByName(name);
  if (!link) throw internalError(`failed to lookup ${JSON.stringify(name)}: Link not found`);
  undo?.push(`delete vlan gateway ${name}`, () => {
    if (k.linkByName(name)?.index === link.index) k.deleteLinkQuiet(name);
  });
  return link;
}

/** Wait for the host port to be operationally up: same total budget as the reference, finer polling. */
async function waitPortUp(hostName: string): Promise<k.LinkInfo> {
  const deadline = Date.now() + 2550;
  let delay = 2;
  for (;;) {
    const link = k.linkByName(hostName);
    if (!link) throw internalError(`failed to lookup ${JSON.stringify(hostName)}: Link not found`);
    if (link.operstate === 'up') return link;
    if (Date.now() >= deadline) throw internalError(`bridge port in error state: ${link.operstate}`);
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 100);
  }
}

export async function add(req: Request<BridgeConf>): Promise<Result> {
  const conf = req.conf;
  const { mac, backend } = validateForAdd(conf);
  const l3 = conf.ipamType !== '';
  // configuration errors, the IPAM's included, are raised before the first change
  if (l3) await validateDelegate(conf.ipamType, req, { ipam: true });

  // everything this call creates, the bridge included, is undone when a later step fails
  const undo = new Rollback();
  let netnsFd = -1;
  let hostName = '';
  try {
    const br = ensureBridge(conf, undo);
    try {
      netnsFd = nl.openNetnsFd(req.netns);
    } catch (err) {
      throw internalError(`failed to open netns ${JSON.stringify(req.netns)}: ${errorReason(err)}`, err);
    }

    // 5. veth pair, created inside the container namespace with the peer placed in ours.
    const veth = nl.withNetnsFd(netnsFd, (hostNs) => {
      const { peer, link } = nl.createVethWithRandomPeer(req.ifName, conf.mtu, mac, hostNs.fd);
      return { peer, contMac: link.mac };
    });
    hostName = veth.peer;
    undo.push('delete veth', () => nl.withNetnsFd(netnsFd, () => k.deleteLinkQuiet(req.ifName)));

    const host0 = hostVethUp(hostName, k.linkByName);
    k.sysctlEnsure(`net/ipv6/conf/${hostName}/accept_ra`, '0');
    configurePort(
      hostName,
      conf.bridge,
      {
        hairpin: conf.hairpinMode,
        isolated: conf.portIsolation,
        vlan: conf.vlan,
        vlans: conf.vlans,
        preserveDefaultVlan: conf.preserveDefaultVlan,
      },
      { host: host0.index, bridge: br.index },
    );

    const result: Result = {
      cniVersion: '1.1.0',
      interfaces: interfaceSkeleton(
        { name: br.name, mac: br.mac },
        { name: hostName, mac: host0.mac },
        { name: req.ifName, mac: veth.contMac, sandbox: req.netns },
      ),
    };

    if (conf.macspoofchk) {
      const id = uniqueID(req.containerId, req.ifName);
      undo.push('spoof-check teardown', () => fw.teardownSpoofCheck(id));
      fw.setupSpoofCheck({ iface: hostName, mac: veth.contMac, refID: id });
    }

    if (l3) {
      // Registered before the call: an IPAM that allocated and then failed to answer (killed, garbage
      // output) is released too; DEL of an allocation that never happened is a no-op for an IPAM.
      const ipamResult = await ipamAdd(conf.ipamType, req, undo);
      mergeIpamResult(result, ipamResult);
      if (!result.ips || result.ips.length === 0)
        throw internalError('IPAM plugin returned missing IP config');
      const gws = calcGateways(result, conf);

      nl.withNetnsFd(netnsFd, () => {
        if (conf.enabledad) {
          k.sysctlTry(`net/ipv6/conf/${req.ifName}/enhanced_dad`, '1');
          k.sysctlTry(`net/ipv6/conf/${req.ifName}/accept_dad`, '1');
        } else {
          k.sysctlTry(`net/ipv6/conf/${req.ifName}/accept_dad`, '0');
        }
        k.sysctlTry(`net/ipv4/conf/${req.ifName}/arp_notify`, '1');
        configureIface(req.ifName, result);
      });

      if (conf.isGateway) setupGateways(conf, br, gws, result, undo);

      if (conf.ipMasq) {
        const ips = (result.ips ?? []).map((ip) => ip.address);
        undo.push('masquerade teardown', () =>
          fw.teardownIPMasq({ ips, network: conf.name, ifName: req.ifName, containerID: req.containerId }),
        );
        fw.setupIPMasq({
          backend,
          ips,
          network: conf.name,
          ifName: req.ifName,
          containerID: req.containerId,
        });
      }
    } else if (!conf.disableContainerInterface) {
      nl.withNetnsFd(netnsFd, () => {
        if (!k.linkByName(req.ifName)) throw internalError('failed to retrieve link: Link not found');
        try {
          nl.setLinkUp(req.ifName);
        } catch (err) {
          throw internalError(`failed to set ${JSON.stringify(req.ifName)} up: ${errorReason(err)}`, err);
        }
      });
    }

    let hostLink = k.linkByName(hostName);
    if (!conf.disableContainerInterface) hostLink = await waitPortUp(hostName);
    if (!hostLink) throw internalError(`failed to lookup ${JSON.stringify(hostName)}: Link not found`);
    result.interfaces![1]!.mac = hostLink.mac;
    result.interfaces![0]!.mac = bridgeByName(conf.bridge).mac;

    // like the reference, the result always carries a DNS object (printed as {} when empty)
    result.dns = chooseDns(conf.dns, result.dns) ?? {};
    return result;
  } catch (err) {
    await undo.undoAll(req.log);
    throw err;
  } finally {
    if (netnsFd >= 0) closeSync(netnsFd);
  }
}

function setupGateways(
  conf: BridgeConf,
  br: k.LinkInfo,
  gws: { v4: GatewayInfo; v6: GatewayInfo },
  result: Result,
  undo: Rollback,
): void {
  let vlanIfaceAdded = false;
  for (const info of [gws.v4, gws.v6]) {
    for (const gw of info.gws) {
      if (conf.vlan !== 0) {
        let vif: k.LinkInfo;
        try {
          vif = ensureVlanInterface(conf, br, k, undo);
        } catch (err) {
          throw internalError(`failed to create vlan interface: ${errorReason(err)}`, err);
        }
        if (!vlanIfaceAdded) {
          result.interfaces!.push({ name: vif.name, mac: vif.mac });
          vlanIfaceAdded = true;
        }
        try {
          ensureAddr(vif.name, gw, conf.forceAddress, vif.mac);
        } catch (err) {
          throw internalError(`failed to set vlan interface for bridge with addr: ${errorReason(err)}`, err);
        }
      } else {
        try {
          ensureAddr(conf.bridge, gw, conf.forceAddress, br.mac);
        } catch (err) {
          throw internalError(`failed to set bridge addr: ${errorReason(err)}`, err);
        }
      }
    }
    if (info.gws.length > 0) {
      try {
        enableForward(info.family);
      } catch (err) {
        throw internalError(`failed to enable forwarding: ${errorReason(err)}`, err);
      }
    }
  }
}
