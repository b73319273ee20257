/**
 * vrf: puts the container interface into a VRF of the container namespace (reference: plugins/meta/vrf).
 *
 * - ADD (chained only, spec 0.3.1+): finds the VRF `vrfname` (a link of that name that is not a VRF is an error;
 *   a `table` that differs from an existing VRF's is an error) or creates it (with `table`, else the first table id
 *   from 1 that no VRF uses) and sets it up; enslaves CNI_IFNAME, restoring the global IPv6 addresses the kernel drops
 *   and moving the interface's non-connected main-table routes into the VRF's table. prevResult is passed through.
 *   A failed ADD undoes what it did (the reference leaves the VRF and the enslaved interface).
 * - DEL: the interface leaves the VRF; the VRF is deleted with its last interface. A missing namespace, VRF or
 *   interface is success.
 * - CHECK: the VRF exists and the interface is one of its ports (the reference's messages).
 * - GC / STATUS: nothing is kept outside the container namespace: success.
 */
import { isNetnsGoneForDel, withNetns } from '@cnikit/netlink';
import {
  ALL_VERSIONS,
  CNIKIT_VERSION,
  CniError,
  ErrorCode,
  errorReason,
  type Plugin,
  type Request,
  type Result,
  Rollback,
} from '@cnikit/skel';
import { parseConf, type VrfConf } from './config.ts';
import { addInterface, assignedInterfaces, ensureVrf, findVrf, removeInterface } from './vrf.ts';

function prevResultOf(req: Request<VrfConf>): Result {
  if (!req.prevResult) throw new CniError(ErrorCode.Internal, 'missing prevResult from earlier plugin');
  return req.prevResult;
}

function add(req: Request<VrfConf>): Result {
  const prev = prevResultOf(req);
  const { vrfname, table } = req.conf;
  withNetns(req.netns, () => {
    const undo = new Rollback();
    try {
      addInterface(ensureVrf(vrfname, table, undo), req.ifName, undo);
    } catch (err) {
      undo.undoAllSync(req.log);
      throw new CniError(ErrorCode.Internal, `cmdAdd failed: ${errorReason(err)}`, undefined, { cause: err });
    }
  });
  return prev;
}

function del(req: Request<VrfConf>): void {
  if (!req.netns) return;
  try {
    withNetns(req.netns, () => removeInterface(req.conf.vrfname, req.ifName));
  } catch (err) {
    if (isNetnsGoneForDel(err, req.netns)) return;
    throw err;
  }
}

function check(req: Request<VrfConf>): void {
  prevResultOf(req);
  const { vrfname } = req.conf;
  withNetns(req.netns, () => {
    const vrf = findVrf(vrfname);
    if (!vrf) throw new CniError(ErrorCode.Internal, 'Link not found');
    if (!assignedInterfaces(vrf).some((l) => l.name === req.ifName))
      throw new CniError(ErrorCode.Internal, `failed to find ${req.ifName} associated to vrf ${vrfname}`);
  });
}

export const plugin: Plugin<VrfConf> = {
  name: 'vrf',
  ipam: false,
  about: `CNI vrf plugin cnikit ${CNIKIT_VERSION}`,
  versions: ALL_VERSIONS.slice(ALL_VERSIONS.indexOf('0.3.1')),
  conf: parseConf,
  add,
  del,
  check,
  gc() {},
  status() {},
};
