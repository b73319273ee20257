/**
 * ipvlan: an ipvlan (l2, l3 or l3s) of the master as the container's interface, addressed by the IPAM plugin or,
 * chained without IPAM, with prevResult's addresses (drop-in for the reference plugin at HEAD).
 */
import { closeSync } from 'node:fs';
import * as nl from '@cnikit/netlink';
import {
  ALL_VERSIONS,
  CniError,
  delegateAdd,
  delegateCheck,
  delegateDel,
  delegateGc,
  delegateStatus,
  ErrorCode,
  ErrorList,
  internalError,
  type Plugin,
  type Request,
  type Result,
  Rollback,
  undoDelegateAdd,
  CNIKIT_VERSION as VERSION,
  validateDelegate,
} from '@cnikit/skel';
import { validateIpvlanInterface } from './check-logic.ts';
import { chainedMaster, type IpvlanConf, modeFromString, parseConf } from './config.ts';

async function add(req: Request<IpvlanConf>): Promise<Result> {
  const conf = req.conf;
  // chained after a plugin that already chose the addresses, no IPAM runs
  const chained = conf.ipamType === '' && (req.prevResult?.ips?.length ?? 0) > 0;
  // configuration errors, the IPAM's included, are raised before the first change
  if (!chained) await validateDelegate(conf.ipamType, req, { ipam: true });
  const master =
    conf.master ||
    chainedMaster(req.prevResult) ||
    nl.inMasterNetns(req.netns, conf.linkInContainer, () => nl.defaultRouteInterface());
  const netnsFd = nl.openContainerNetns(req.netns);
  const undo = new Rollback();
  try {
    const mode = modeFromString(conf.mode);
    const link = nl.addStackedLinkToContainer({
      kind: 'ipvlan',
      master,
      linkInContainer: conf.linkInContainer,
      netnsFd,
      ifName: req.ifName,
      create: (name, parent, fd) =>
        nl.createIpvlan({ name, parent, netnsFd: fd, mode, mtu: conf.mtu > 0 ? conf.mtu : undefined }),
    });
    undo.push('delete ipvlan', () => nl.withNetnsFd(netnsFd, () => nl.deleteLinkIfExists(req.ifName)));

    let result: Result;
    const prev = req.prevResult;
    if (chained && prev) {
      result = structuredClone(prev);
    } else {
      undo.push('IPAM DEL', () => undoDelegateAdd(conf.ipamType, req));
      result = await delegateAdd(conf.ipamType, req);
      if (!result.ips || result.ips.length === 0)
        throw internalError('IPAM plugin returned missing IP config');
    }
    result.cniVersion = '1.1.0';
    result.ips = (result.ips ?? []).map((ip) => ({ ...ip, interface: 0 }));
    result.interfaces = [{ name: req.ifName, mac: link.mac, sandbox: req.netns }];
    nl.withNetnsFd(netnsFd, () => {
      nl.setNotifySysctls(req.ifName);
      nl.configureIface(req.ifName, result);
    });
    // like the reference, the result carries the config's DNS object (printed as {} when empty)
    result.dns = conf.dns ?? {};
    return result;
  } catch (err) {
    await undo.undoAll(req.log);
    throw err;
  } finally {
    closeSync(netnsFd);
  }
}

/**
 * DEL: IPAM DEL (when configured) and the link's removal both run, every failure reported at the end; a missing
 * link, an empty CNI_NETNS and a namespace that is gone are success. Unlike the reference, DEL resolves no master
 * (the reference looks up the default route when `master` is unset, and fails without one).
 */
async function del(req: Request<IpvlanConf>): Promise<void> {
  const errors = new ErrorList();
  if (req.conf.ipamType !== '') await errors.run('', () => delegateDel(req.conf.ipamType, req));
  if (req.netns !== '') errors.run('', () => nl.deleteLinkInNetns(req.netns, req.ifName));
  errors.throwIfAny();
}

async function check(req: Request<IpvlanConf>): Promise<void> {
  const conf = req.conf;
  closeSync(nl.openContainerNetns(req.netns));
  if (conf.ipamType !== '') await delegateCheck(conf.ipamType, req);
  const prev = req.prevResult;
  if (!prev) throw internalError('Required prevResult missing');
  const intf = nl.findSandboxInterface(prev.interfaces, req.ifName, req.netns);
  // Without `master` the reference fails here (it looks up ""); the ipvlan cannot outlive its master, so the
  // interface check below covers it.
  if (
    conf.master !== '' &&
    !nl.inMasterNetns(req.netns, conf.linkInContainer, () => nl.getLinkDetails(conf.master))
  )
    throw internalError(`failed to lookup master ${JSON.stringify(conf.master)}: Link not found`);
  nl.withNetns(req.netns, () => {
    validateIpvlanInterface(intf, conf.mode, (name) => nl.getLinkDetails(name));
    nl.validateExpectedInterfaceIPs(req.ifName, prev.ips ?? []);
    nl.validateExpectedRoutes(prev.routes ?? []);
  });
}

/** GC (the reference has none): the IPAM's GC. */
async function gc(req: Request<IpvlanConf>): Promise<void> {
  if (req.conf.ipamType !== '') await delegateGc(req.conf.ipamType, req);
}

/**
 * STATUS: the IPAM's STATUS, then (beyond the reference, which leaves it unimplemented) a configured master in the host namespace must
 * exist (code 50 otherwise). Without `master` the master may come from prevResult, which STATUS does not have.
 */
async function status(req: Request<IpvlanConf>): Promise<void> {
  const conf = req.conf;
  if (conf.ipamType !== '') await delegateStatus(conf.ipamType, req);
  if (conf.linkInContainer || conf.master === '') return;
  if (!nl.getLinkDetails(conf.master))
    throw new CniError(ErrorCode.PluginNotAvailable, `master ${JSON.stringify(conf.master)} not found`);
}

export const plugin: Plugin<IpvlanConf> = {
  name: 'ipvlan',
  ipam: false,
  about: `CNI ipvlan plugin cnikit ${VERSION}`,
  versions: ALL_VERSIONS,
  prevResultErrorPrefix: 'could not parse prevResult: ',
  conf: parseConf,
  add,
  del,
  check,
  gc,
  status,
};
