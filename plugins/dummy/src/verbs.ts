/**
 * dummy: a dummy link in the container carrying the IPAM's addresses and routes (the reference's order), with a
 * rollback of a failed ADD, an idempotent DEL that keeps going, and GC (none in the reference).
 */
import { closeSync } from 'node:fs';
import * as nl from '@cnikit/netlink';
import {
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
  type Request,
  type Result,
  Rollback,
  undoDelegateAdd,
  validateDelegate,
} from '@cnikit/skel';
import { type DummyConf, IPAM_REQUIRED } from './config.ts';

function requireIpam(conf: DummyConf): void {
  if (conf.ipamType === '') throw new CniError(ErrorCode.InvalidNetworkConfig, IPAM_REQUIRED);
}

export async function cmdAdd(req: Request<DummyConf>): Promise<Result> {
  const conf = req.conf;
  requireIpam(conf);
  // configuration errors, the IPAM's included, are raised before the first change
  await validateDelegate(conf.ipamType, req, { ipam: true });
  const fd = nl.openContainerNetns(req.netns);
  const undo = new Rollback();
  try {
    const link = nl.withNetnsFd(fd, () => {
      try {
        return nl.createDummy(req.ifName);
      } catch (err) {
        throw internalError(`failed to create dummy: ${errorReason(err)}`, err);
      }
    });
    undo.push('delete dummy', () => nl.withNetnsFd(fd, () => nl.deleteLinkIfExists(req.ifName)));
    undo.push('IPAM DEL', () => undoDelegateAdd(conf.ipamType, req));
    const ipam = await delegateAdd(conf.ipamType, req);
    if (!ipam.ips || ipam.ips.length === 0) throw internalError('IPAM plugin returned missing IP config');
    const result: Result = {
      cniVersion: '1.1.0',
      interfaces: [{ name: req.ifName, mac: link.mac, sandbox: req.netns }],
      ips: ipam.ips.map((ip) => ({ ...ip, interface: 0 })),
      routes: (ipam.routes ?? []).map((r) => ({ ...r })),
    };
    if (ipam.dns) result.dns = structuredClone(ipam.dns);
    nl.withNetnsFd(fd, () => nl.configureIface(req.ifName, result));
    return result;
  } catch (err) {
    await undo.undoAll(req.log);
    throw err;
  } finally {
    closeSync(fd);
  }
}

export async function cmdDel(req: Request<DummyConf>): Promise<void> {
  const errors = new ErrorList();
  // like the reference, a config without IPAM fails DEL ("no plugin name provided"); the link still goes
  await errors.run('', () => delegateDel(req.conf.ipamType, req));
  if (req.netns !== '') {
    errors.run('', () => {
      try {
        nl.withNetns(req.netns, () => nl.deleteLinkIfExists(req.ifName));
      } catch (err) {
        if (!nl.isNetnsGoneForDel(err, req.netns)) throw err;
      }
    });
  }
  errors.throwIfAny();
}

export async function cmdCheck(req: Request<DummyConf>): Promise<void> {
  requireIpam(req.conf);
  closeSync(nl.openContainerNetns(req.netns));
  await delegateCheck(req.conf.ipamType, req);
  const prev = req.prevResult;
  if (!prev) throw internalError('dummy: Required prevResult missing');
  const intf = nl.findSandboxInterface(prev.interfaces, req.ifName, req.netns);
  nl.withNetns(req.netns, () => {
    nl.validateContainerInterface(intf, { kind: { kind: 'dummy', label: 'dummy' }, requireUp: true });
    nl.validateExpectedInterfaceIPs(req.ifName, prev.ips ?? []);
  });
}

export async function cmdGc(req: Request<DummyConf>): Promise<void> {
  if (req.conf.ipamType !== '') await delegateGc(req.conf.ipamType, req);
}

export async function cmdStatus(req: Request<DummyConf>): Promise<void> {
  await delegateStatus(req.conf.ipamType, req);
}
