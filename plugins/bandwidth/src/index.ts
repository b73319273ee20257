/**
 * bandwidth: token-bucket shaping of a veth-attached container (reference: plugins/meta/bandwidth,
 * plugins.md §5), all through rtnetlink (no `tc` process).
 *
 * - ADD: prevResult required once shaping is asked for; the host veth is the container interface's veth peer,
 *   which must be listed in prevResult without a sandbox. Ingress (towards the container) = root TBF 1: on the
 *   host veth. Egress (from the container) = IFB `bwp<hash>` (host veth MTU, txqueuelen 0, up) appended to the
 *   result's interfaces, ingress qdisc + u32 match-all mirred redirect on the host veth, root TBF on the IFB.
 *   A failed ADD removes what it created (the reference leaves it).
 * - DEL: deletes the IFB; idempotent, needs neither the namespace nor prevResult.
 * - CHECK: the reference's TBF rate/limit/buffer checks on the host veth and the IFB; no bandwidth → success.
 * - GC: deletes this network's IFBs (recognised by their alias) whose attachment is not valid. STATUS: no handler (success without reading the config, as the reference).
 */
import {
  addIngressQdisc,
  addRedirectFilter,
  addTbfQdisc,
  createIfb,
  deleteLinkIfExists,
  deleteQdisc,
  getLink,
  type Link,
  listLinks,
  listQdiscs,
  setAlias,
  TC_H_INGRESS,
  TC_H_ROOT,
  tickInUsec,
  withNetns,
} from '@cnikit/netlink';
import {
  CniError,
  ErrorList,
  errorReason,
  type Interface,
  internalError,
  type Plugin,
  type Request,
  type RequestBase,
  type Result,
  Rollback,
  CNIKIT_VERSION as VERSION,
} from '@cnikit/skel/plugin';
import { type BandwidthConf, type BandwidthEntry, isZero, parseConf, tbfParams } from './config.ts';
import { ifbDeviceName, ownerAlias } from './names.ts';

/** Go's wrapping `<what>: <reason>` (reason = the errno text), code 999, keeping CNI errors as they are. */
function step<T>(what: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw CniError.is(err) ? err : internalError(`${what}: ${errorReason(err)}`, err);
  }
}

/** The container interface's veth peer in this (host) namespace, as listed in prevResult (Go getHostInterface). */
function hostInterface(interfaces: readonly Interface[], req: RequestBase): Interface {
  if (interfaces.length === 0) throw internalError('no interfaces provided');
  let peer: { index: number; why: string };
  try {
    peer = withNetns(req.netns, () => {
      const l = getLink(req.ifName);
      if (!l) return { index: 0, why: `could not look up ${JSON.stringify(req.ifName)}: Link not found` };
      if (l.kind !== 'veth')
        return { index: 0, why: `interface ${JSON.stringify(req.ifName)} was not a veth interface` };
      return { index: l.peerIndex ?? 0, why: '' };
    });
  } catch (err) {
    throw internalError(`failed to open netns ${JSON.stringify(req.netns)}: ${errorReason(err)}`, err);
  }
  if (peer.index <= 0)
    throw internalError(`container interface ${req.ifName} has no veth peer: ${peer.why || '<nil>'}`);
  const link = getLink(peer.index);
  if (!link) throw internalError(`veth peer with index ${peer.index} is not in host ns`);
  const found = interfaces.find((i) => !i.sandbox && i.name === link.name);
  if (!found) throw internalError('no veth peer of container interface found in host ns');
  return found;
}

function hostLink(name: string): Link {
  const l = getLink(name);
  if (!l) throw internalError('get host device: Link not found');
  return l;
}

function add(req: Request<BandwidthConf>): Result {
  const conf = req.conf;
  const bw = conf.bandwidth;
  if (!req.prevResult) throw internalError('must be called as chained plugin');
  const result = req.prevResult;
  if (!bw || isZero(bw)) return result;
  result.interfaces ??= [];
  const host = hostLink(hostInterface(result.interfaces, req).name);
  const tick = tickInUsec();
  const undo = new Rollback();
  try {
    if (bw.ingressRate > 0 && bw.ingressBurst > 0) {
      step('create qdisc', () => addTbfQdisc(host.index, tbfParams(bw.ingressRate, bw.ingressBurst, tick)));
      undo.push('remove the TBF qdisc of the host veth', () => deleteQdisc(host.index, TC_H_ROOT));
    }
    if (bw.egressRate > 0 && bw.egressBurst > 0) {
      const name = ifbDeviceName(conf.name, req.containerId);
      const ifb = step('adding link', () => createIfb(name, { up: true, mtu: host.mtu, txQueueLen: 0 }));
      undo.push('delete the IFB', () => deleteLinkIfExists(ifb.index));
      step('set the IFB alias', () => setAlias(ifb.index, ownerAlias(conf.name)));
      result.interfaces.push({ name, mac: ifb.mac });
      step('create ingress qdisc', () => addIngressQdisc(host.index));
      undo.push('remove the ingress qdisc of the host veth', () => deleteQdisc(host.index, TC_H_INGRESS));
      step('add filter', () => addRedirectFilter(host.index, ifb.index));
      step('create ifb qdisc', () => addTbfQdisc(ifb.index, tbfParams(bw.egressRate, bw.egressBurst, tick)));
    }
  } catch (err) {
    undo.undoAllSync(req.log);
    throw err;
  }
  return result;
}

function del(req: Request<BandwidthConf>): void {
  const conf = req.conf;
  const name = ifbDeviceName(conf.name, req.containerId);
  step('failed to delete the IFB', () => {
    const l = getLink(name);
    if (l?.kind === 'ifb') deleteLinkIfExists(l.index);
  });
}

/**
 * The reference's TBF check (pfifo_fast ignored, every TBF up to the first other kind compared), except that the
 * root qdisc must be a TBF: the reference passes when the TBF is gone and only noqueue/ingress are left.
 */
function checkTbf(link: Link, rateBits: number, burstBits: number): void {
  const want = tbfParams(rateBits, burstBits, tickInUsec());
  const qdiscs = listQdiscs(link.index).filter((q) => q.kind !== 'pfifo_fast');
  if (qdiscs[0]?.kind !== 'tbf') throw internalError('Failed to find qdisc');
  for (const q of qdiscs) {
    if (q.kind !== 'tbf' || !q.tbf) break;
    if (q.tbf.rate !== want.rate) throw internalError("Rate doesn't match");
    if (q.tbf.limit !== want.limit) throw internalError("Limit doesn't match");
    if (q.tbf.buffer !== want.buffer) throw internalError("Buffer doesn't match");
  }
}

function check(req: Request<BandwidthConf>): void {
  const conf = req.conf;
  if (!req.prevResult) throw internalError('must be called as a chained plugin');
  const link = hostLink(hostInterface(req.prevResult.interfaces ?? [], req).name);
  const bw: BandwidthEntry | undefined = conf.bandwidth;
  if (!bw || isZero(bw)) return;
  if (bw.ingressRate > 0 && bw.ingressBurst > 0) checkTbf(link, bw.ingressRate, bw.ingressBurst);
  if (bw.egressRate > 0 && bw.egressBurst > 0) {
    const ifb = getLink(ifbDeviceName(conf.name, req.containerId));
    if (!ifb) throw internalError('get ifb device: Link not found');
    checkTbf(ifb, bw.egressRate, bw.egressBurst);
  }
}

function gc(req: Request<BandwidthConf>): void {
  const conf = req.conf;
  const alias = ownerAlias(conf.name);
  const valid = new Set((req.validAttachments ?? []).map((a) => ifbDeviceName(conf.name, a.containerID)));
  const errors = new ErrorList();
  for (const l of listLinks()) {
    if (l.kind !== 'ifb' || l.alias !== alias || valid.has(l.name)) continue;
    errors.run(`failed to delete stale IFB ${l.name}`, () => deleteLinkIfExists(l.index));
  }
  errors.throwIfAny();
}

export const plugin: Plugin<BandwidthConf> = {
  name: 'bandwidth',
  ipam: false,
  about: `CNI bandwidth plugin cnikit ${VERSION}`,
  versions: ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'],
  prevResultErrorPrefix: 'could not parse prevResult: ',
  conf: parseConf,
  add,
  del,
  check,
  gc,
};
