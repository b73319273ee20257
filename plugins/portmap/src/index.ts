/**
 * portmap: forwards host ports to the container (reference: plugins/meta/portmap, plugins.md §4), through
 * its iptables.ts and nftables.ts backends (one iptables-restore per family, or one nft transaction, per call).
 *
 * - ADD: prevResult required; per container address family: the forwarding rules, a flush of the UDP conntrack
 *   entries of every mapped UDP host port (nfnetlink, no `conntrack` exec), and with `snat` route_localnet=1 on
 *   the host interface that routes to the container. A failure removes what this ADD installed.
 * - DEL: removes the container's rules from both backends and both families, with or without mappings, namespace
 *   or prevResult; idempotent.
 * - CHECK: the reference's per-family checks and messages. GC: stale per-container iptables chains of this
 *   network. STATUS: code 50 when neither iptables nor nftables is usable.
 */
import { detectBackend, parseCidr, supportsIPTables, supportsNFTables } from '@cnikit/firewall';
import { deleteConntrackByDstPort, getLink, IPPROTO_UDP, routeGet, sysctlSet } from '@cnikit/netlink';
import {
  CniError,
  ErrorCode,
  errorReason,
  internalError,
  type Plugin,
  type Request,
  type Result,
  CNIKIT_VERSION as VERSION,
} from '@cnikit/skel/plugin';
import { containerIPs, type PortMapConf, parseConf } from './config.ts';
import { gcPortMap, iptables } from './iptables.ts';
import { type PortMapArgs, type PortMapBackend, PortMapError } from './mapping.ts';
import { gcNftRecords, nftables, recordUnusedFamilies } from './nftables.ts';

const BACKENDS: Record<PortMapConf['backend'], PortMapBackend> = { iptables, nftables };

/** Install the forwarding of one container address (its family's table) with the configured backend. */
function setupPortMap(backend: PortMapConf['backend'], a: PortMapArgs): void {
  BACKENDS[backend].setup(a, parseCidr(a.containerIP).family);
}

function checkPortMap(backend: PortMapConf['backend'], a: PortMapArgs): void {
  BACKENDS[backend].check(a, parseCidr(a.containerIP).family);
}

/**
 * Remove a container's forwarding from BOTH backends and both families, without needing its mappings. Shared chains
 * stay, as in the reference. A failure of a backend the host supports is reported after every step was tried.
 */
function teardownPortMap(network: string, containerID: string): void {
  const errors = [iptables, nftables].flatMap((b) => b.teardown(network, containerID, {}));
  if (errors.length) throw new PortMapError(errors);
}

function argsFor(
  conf: PortMapConf,
  req: Request<PortMapConf>,
  containerIP: string,
  family: 4 | 6,
): PortMapArgs {
  return {
    network: conf.name,
    containerID: req.containerId,
    mappings: conf.mappings,
    containerIP,
    snat: conf.snat,
    masqAll: conf.masqAll,
    markMasqBit: conf.markMasqBit,
    externalSetMarkChain: conf.externalSetMarkChain,
    conditions: family === 4 ? conf.conditionsV4 : conf.conditionsV6,
  };
}

/** The host interface the kernel routes the container address through (Go's getRoutableHostIF), or ''. */
function routableHostIf(ip: string): string {
  try {
    const r = routeGet(ip.split('/')[0] as string);
    return r?.linkIndex ? (getLink(r.linkIndex)?.name ?? '') : '';
  } catch {
    return '';
  }
}

function flushUdpConntrack(req: Request<PortMapConf>, conf: PortMapConf, family: 4 | 6, ip: string): void {
  for (const m of conf.mappings) {
    if (m.protocol !== 'udp') continue;
    try {
      deleteConntrackByDstPort(family, IPPROTO_UDP, m.hostPort);
    } catch (err) {
      req.log.warn('failed to delete stale UDP conntrack entries for %s: %s', ip, errorReason(err));
    }
  }
}

/**
 * The reference's backend detection (`iptables -S INPUT` usable, else nftables when usable) is a process start per
 * ADD. With no backend configured, iptables is tried first: its batch is one iptables-restore, which changes nothing
 * when it fails, and only then does the detection decide — the outcome of detecting first, without the probe on
 * every call. Later families use the backend the first one settled on.
 */
function setupDetecting(conf: PortMapConf, a: PortMapArgs, used: { backend: PortMapConf['backend'] }): void {
  used.backend = conf.backend;
  if (!conf.detectOnFailure) {
    setupPortMap(conf.backend, a);
    return;
  }
  try {
    setupPortMap('iptables', a);
  } catch (err) {
    if (detectBackend() === 'iptables') throw err;
    used.backend = 'nftables';
    setupPortMap('nftables', a);
  }
}

function add(req: Request<PortMapConf>): Result {
  let conf = req.conf;
  if (!req.prevResult) throw internalError('must be called as chained plugin');
  const prev = req.prevResult;
  if (conf.mappings.length === 0) return prev;
  const families: Array<4 | 6> = [];
  try {
    for (const { family, ip } of containerIPs(prev, req.ifName)) {
      families.push(family);
      const used = { backend: conf.backend };
      try {
        setupDetecting(conf, argsFor(conf, req, ip, family), used);
        if (conf.detectOnFailure) conf = { ...conf, backend: used.backend, detectOnFailure: undefined };
      } catch (err) {
        throw internalError(
          used.backend === 'nftables'
            ? `unable to set up nftables rules for port mappings: ${errorReason(err)}`
            : `unable to setup DNAT: ${errorReason(err)}`,
          err,
        );
      }
      flushUdpConntrack(req, conf, family, ip);
      if (family === 4 && conf.snat) {
        const dev = routableHostIf(ip);
        if (dev) {
          try {
            sysctlSet(`net/ipv4/conf/${dev}/route_localnet`, '1');
          } catch (err) {
            throw internalError(`unable to enable route_localnet: ${(err as Error).message}`, err);
          }
        }
      }
    }
  } catch (err) {
    try {
      teardownPortMap(conf.name, req.containerId);
    } catch (e) {
      req.log.warn('rollback of the port mappings failed: %s', errorReason(e));
    }
    throw err;
  }
  if (conf.backend === 'nftables' && !conf.detectOnFailure && families.length)
    recordUnusedFamilies({ containerID: req.containerId, network: conf.name }, families);
  return prev;
}

function del(req: Request<PortMapConf>): void {
  const conf = req.conf;
  try {
    teardownPortMap(conf.name, req.containerId);
  } catch (err) {
    throw internalError(`could not teardown port mappings: ${errorReason(err)}`, err);
  }
}

function check(req: Request<PortMapConf>): void {
  const conf = req.conf;
  if (!req.prevResult) throw internalError('Required prevResult missing');
  if (conf.mappings.length === 0) return;
  for (const { family, ip } of containerIPs(req.prevResult, req.ifName)) {
    try {
      checkPortMap(conf.backend, argsFor(conf, req, ip, family));
    } catch (err) {
      throw internalError(errorReason(err), err);
    }
  }
}

function gc(req: Request<PortMapConf>): void {
  const conf = req.conf;
  const valid = new Set((req.validAttachments ?? []).map((a) => a.containerID));
  try {
    gcPortMap(conf.name, valid);
    gcNftRecords(conf.name, valid);
  } catch (err) {
    throw internalError(`could not garbage-collect port mappings: ${errorReason(err)}`, err);
  }
}

function status(): void {
  if (!supportsIPTables(4) && !supportsNFTables()) {
    throw new CniError(ErrorCode.PluginNotAvailable, 'neither iptables nor nftables is usable');
  }
}

export const plugin: Plugin<PortMapConf> = {
  name: 'portmap',
  ipam: false,
  about: `CNI portmap plugin cnikit ${VERSION}`,
  prevResultErrorPrefix: 'could not parse prevResult: ',
  conf: parseConf,
  add,
  del,
  check,
  gc,
  status,
};
