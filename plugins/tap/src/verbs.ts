/**
 * ADD, DEL, CHECK, GC and STATUS of tap in the reference's order. cnikit also rolls back a failed ADD completely,
 * keeps DEL going after a failure, and checks in CHECK that the tap itself is still there.
 */
import { closeSync } from 'node:fs';
import * as nl from '@cnikit/netlink';
import {
  delegateAdd,
  delegateCheck,
  delegateDel,
  delegateGc,
  delegateStatus,
  ErrorList,
  internalError,
  type Request,
  type Result,
  Rollback,
  undoDelegateAdd,
  validateDelegate,
} from '@cnikit/skel';
import type { TapConf } from './config.ts';
import { createTap, deleteTempTap } from './kernel.ts';

export async function cmdAdd(req: Request<TapConf>): Promise<Result> {
  const conf = req.conf;
  // configuration errors, the IPAM's included, are raised before the first change
  if (conf.ipamType !== '') await validateDelegate(conf.ipamType, req, { ipam: true });
  const fd = nl.openContainerNetns(req.netns);
  const undo = new Rollback();
  try {
    const tap = nl.withNetnsFd(fd, () => createTap(conf, req.ifName, req.netns));
    undo.push('delete tap', () => nl.withNetnsFd(fd, () => nl.deleteLinkIfExists(req.ifName)));
    const result: Result = { cniVersion: '1.1.0', interfaces: [tap] };
    if (conf.ipamType !== '') {
      undo.push('IPAM DEL', () => undoDelegateAdd(conf.ipamType, req));
      const ipam = await delegateAdd(conf.ipamType, req);
      if (!ipam.ips || ipam.ips.length === 0) throw internalError('IPAM plugin returned missing IP config');
      result.ips = ipam.ips.map((ip) => ({ ...ip, interface: 0 }));
      result.routes = (ipam.routes ?? []).map((r) => ({ ...r }));
      nl.withNetnsFd(fd, () => {
        try {
          nl.sysctlSet(`net/ipv4/conf/${req.ifName}/arp_notify`, '1');
        } catch {
          // ignored, like the reference
        }
        nl.configureIface(req.ifName, result);
      });
    }
    // the reference replaces the IPAM's DNS with the network config's, set or not
    if (conf.dns) result.dns = structuredClone(conf.dns);
    return result;
  } catch (err) {
    await undo.undoAll(req.log);
    throw err;
  } finally {
    closeSync(fd);
  }
}

export async function cmdDel(req: Request<TapConf>): Promise<void> {
  const errors = new ErrorList();
  if (req.conf.ipamType !== '') await errors.run('', () => delegateDel(req.conf.ipamType, req));
  if (req.netns !== '') {
    errors.run('', () => {
      try {
        nl.withNetns(req.netns, () => {
          nl.deleteLinkIfExists(req.ifName);
          deleteTempTap(req.ifName);
        });
      } catch (err) {
        if (!nl.isNetnsGoneForDel(err, req.netns)) throw err;
      }
    });
  }
  errors.throwIfAny();
}

export async function cmdCheck(req: Request<TapConf>): Promise<void> {
  closeSync(nl.openContainerNetns(req.netns));
  if (req.conf.ipamType !== '') await delegateCheck(req.conf.ipamType, req);
  const prev = req.prevResult;
  if (!prev) throw internalError('Required prevResult missing');
  const intf = nl.findSandboxInterface(prev.interfaces, req.ifName, req.netns);
  nl.withNetns(req.netns, () => {
    // not in the reference: the tap itself must still be there, with its MAC
    nl.validateContainerInterface(intf, { kind: { kind: 'tun', label: 'tap' } });
    nl.validateExpectedInterfaceIPs(req.ifName, prev.ips ?? []);
    nl.validateExpectedRoutes(prev.routes ?? []);
  });
}

/** GC (none in the reference): the IPAM's; a tap has no state outside its namespace. */
export async function cmdGc(req: Request<TapConf>): Promise<void> {
  if (req.conf.ipamType !== '') await delegateGc(req.conf.ipamType, req);
}

export async function cmdStatus(req: Request<TapConf>): Promise<void> {
  if (req.conf.ipamType !== '') await delegateStatus(req.conf.ipamType, req);
}
