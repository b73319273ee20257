/**
 * The IPAM steps of an interface plugin's verbs: ADD's with its undo (`ipamAdd`), GC's and STATUS's (`ipamGc`,
 * `ipamStatus`), each run only when an IPAM type is configured unless the reference runs it regardless.
 */
import {
  delegateAdd,
  delegateGc,
  delegateStatus,
  type Request,
  type RequestBase,
  type Result,
  type Rollback,
  undoDelegateAdd,
} from '@cnikit/skel';

/** The part of a plugin's configuration the shared verbs read: the IPAM type ('' = none configured). */
export interface WithIpam {
  ipamType: string;
}

/** GC's IPAM step: the IPAM's GC when an IPAM type is configured (`always`: also without, the reference's error). */
export async function ipamGc<C extends WithIpam>(req: Request<C>, always = false): Promise<void> {
  if (always || req.conf.ipamType !== '') await delegateGc(req.conf.ipamType, req);
}

/**
 * STATUS's IPAM step: the IPAM's STATUS when an IPAM type is configured (`always`: also without, the reference's
 * "no plugin name provided").
 */
export async function ipamStatus<C extends WithIpam>(req: Request<C>, always = false): Promise<void> {
  if (always || req.conf.ipamType !== '') await delegateStatus(req.conf.ipamType, req);
}

/**
 * ADD's IPAM step: its undo (an IPAM DEL, only for a delegate whose ADD started) goes on `undo` before the call, so an
 * IPAM that allocated and then failed to answer is released too; then the IPAM's ADD.
 */
export function ipamAdd(ipamType: string, req: RequestBase, undo: Rollback): Promise<Result> {
  undo.push('IPAM DEL', () => undoDelegateAdd(ipamType, req));
  return delegateAdd(ipamType, req);
}
