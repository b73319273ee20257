/**
 * macvlan: a macvlan of the master (configured, or the interface of the default route) as the container's
 * interface, with optional delegated IPAM (drop-in for the reference plugin at HEAD).
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
  errorReason,
  internalError,
  type Plugin,
  type Request,
  type Result,
  Rollback,
  undoDelegateAdd,
  CNIKIT_VERSION as VERSION,
  validateDelegate,
} from '@cnikit/skel';
import { findContainerInterface, validateMacvlanInterface } from './check-logic.ts';
import { type MacvlanConf, parseConf } from './config.ts';
import { createContainerMacvlan, resolveMaster } from './link.ts';

async function add(req: Request<MacvlanConf>): Promise<Result> {
  const conf = req.conf;
  // configuration errors, the IPAM's included, are raised before the first change
  if (conf.ipamType !== '') await validateDelegate(conf.ipamType, req, { ipam: true });
  const master = resolveMaster(conf, req.netns);
  const netnsFd = nl.openContainerNetns(req.netns);
  const undo = new Rollback();
  try {
    const link = createContainerMacvlan(conf, master, req.ifName, netnsFd);
    undo.push('delete macvlan', () => nl.withNetnsFd(netnsFd, () => nl.deleteLinkIfExists(req.ifName)));
    const result: Result = {
      cniVersion: '1.1.0',
      interfaces: [{ name: req.ifName, mac: link.mac, sandbox: req.netns }],
    };
    if (conf.ipamType !== '') {
      // registered before the call: an IPAM that allocated and then failed to answer is released too
      undo.push('IPAM DEL', () => undoDelegateAdd(conf.ipamType, req));
      const ipam = await delegateAdd(conf.ipamType, req);
      if (!ipam.ips || ipam.ips.length === 0) throw internalError('IPAM plugin returned missing IP config');
      result.ips = ipam.ips.map((ip) => ({ ...ip, interface: 0 }));
      if (ipam.routes) result.routes = ipam.routes.map((r) => ({ ...r }));
      nl.withNetnsFd(netnsFd, () => {
        nl.setNotifySysctls(req.ifName);
        nl.configureIface(req.ifName, result);
      });
    } else {
      nl.withNetnsFd(netnsFd, () => {
        try {
          nl.setLinkUp(req.ifName);
        } catch (err) {
          throw internalError(`failed to set ${JSON.stringify(req.ifName)} UP: ${errorReason(err)}`, err);
        }
      });
    }
    // like the reference, the result always carries the config's DNS object (printed as {} when empty)
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
 * DEL: IPAM DEL and the link's removal both run (each failure is reported at the end); a missing link, an empty
 * CNI_NETNS and a namespace that is gone are success. Needs no master (the reference's DEL does not look it up).
 */
async function del(req: Request<MacvlanConf>): Promise<void> {
  const errors = new ErrorList();
  if (req.conf.ipamType !== '') await errors.run('', () => delegateDel(req.conf.ipamType, req));
  if (req.netns !== '') errors.run('', () => nl.deleteLinkInNetns(req.netns, req.ifName));
  errors.throwIfAny();
}

async function check(req: Request<MacvlanConf>): Promise<void> {
  const conf = req.conf;
  const master = resolveMaster(conf, req.netns);
  closeSync(nl.openContainerNetns(req.netns));
  if (conf.ipamType !== '') await delegateCheck(conf.ipamType, req);
  const prev = req.prevResult;
  if (!prev) throw internalError('required prevResult missing');
  const intf = findContainerInterface(prev.interfaces, req.ifName, req.netns);
  if (!nl.inMasterNetns(req.netns, conf.linkInContainer, () => nl.getLinkDetails(master)))
    throw internalError(`failed to lookup master ${JSON.stringify(master)}: Link not found`);
  nl.withNetns(req.netns, () => {
    validateMacvlanInterface(intf, conf.mode, (name) => nl.getLinkDetails(name));
    nl.validateExpectedInterfaceIPs(req.ifName, prev.ips ?? []);
    nl.validateExpectedRoutes(prev.routes ?? []);
  });
}

/** GC (the reference has none): the IPAM's GC. The macvlan itself leaves nothing outside the container. */
async function gc(req: Request<MacvlanConf>): Promise<void> {
  if (req.conf.ipamType !== '') await delegateGc(req.conf.ipamType, req);
}

/**
 * STATUS: the IPAM's STATUS, then (beyond the reference, which leaves it unimplemented) the master: a master in the host namespace that does
 * not exist, or no default route to take it from, is "not available" (code 50). A master in the container
 * (linkInContainer) cannot be checked without a container.
 */
async function status(req: Request<MacvlanConf>): Promise<void> {
  const conf = req.conf;
  if (conf.ipamType !== '') await delegateStatus(conf.ipamType, req);
  if (conf.linkInContainer) return;
  let master = conf.master;
  try {
    master ||= nl.defaultRouteInterface();
  } catch (err) {
    throw new CniError(ErrorCode.PluginNotAvailable, `no master: ${errorReason(err)}`);
  }
  if (!nl.getLinkDetails(master))
    throw new CniError(ErrorCode.PluginNotAvailable, `master ${JSON.stringify(master)} not found`);
}

export const plugin: Plugin<MacvlanConf> = {
  name: 'macvlan',
  ipam: false,
  about: `CNI macvlan plugin cnikit ${VERSION}`,
  versions: ALL_VERSIONS,
  conf: parseConf,
  add,
  del,
  check,
  gc,
  status,
};
