/**
 * The rest of what the interface plugins share: their plugin object (`linkPlugin`, with the IPAM's GC and STATUS as
 * the default verbs), the IPAM step of an ADD with its undo (`ipamAdd`), and the master's lookups of CHECK/ADD
 * (`lookupMaster`, the reference's "failed to lookup master …") and of STATUS (`requireMaster`, code 50).
 */
import { getLinkDetails, type LinkDetails } from '@cnikit/netlink';
import {
  ALL_VERSIONS,
  CNIKIT_VERSION,
  CniError,
  delegateAdd,
  delegateGc,
  delegateStatus,
  ErrorCode,
  internalError,
  type Plugin,
  type Request,
  type RequestBase,
  type Result,
  type Rollback,
  undoDelegateAdd,
} from '@cnikit/skel';
import { inMasterNetns } from './container.ts';

/** The part of a plugin's configuration the shared verbs read: the IPAM type ('' = none configured). */
export interface WithIpam {
  ipamType: string;
}

/** What an interface plugin writes itself; `gc` and `status` default to the IPAM's (none without an IPAM type). */
export type LinkPluginVerbs<C> = Pick<Plugin<C>, 'conf' | 'add' | 'del' | 'check'> &
  Partial<Pick<Plugin<C>, 'gc' | 'status' | 'prevResultErrorPrefix'>>;

/**
 * The plugin object of interface plugin `name`: about text `CNI <name> plugin cnikit <version>`, every spec version,
 * not an IPAM. Without `gc`/`status` of its own it runs the IPAM's (when one is configured): such a link leaves
 * nothing outside its container, and has no prerequisite of its own to report.
 */
export function linkPlugin<C extends WithIpam>(name: string, verbs: LinkPluginVerbs<C>): Plugin<C> {
  return {
    name,
    ipam: false,
    about: `CNI ${name} plugin cnikit ${CNIKIT_VERSION}`,
    versions: ALL_VERSIONS,
    gc: async function gc(req: Request<C>): Promise<void> {
      await ipamGc(req);
    },
    status: async function status(req: Request<C>): Promise<void> {
      await ipamStatus(req);
    },
    ...verbs,
  };
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

/**
 * The master of a stacked link (macvlan, ipvlan, vlan) in the calling thread's namespace, or in the container's with
 * `linkInContainer`; a missing one ('' included) is the reference's "failed to lookup master "<name>": Link not found"
 * (code 999).
 */
export function lookupMaster(netns: string, linkInContainer: boolean, master: string): LinkDetails {
  const found =
    master === '' ? undefined : inMasterNetns(netns, linkInContainer, () => getLinkDetails(master));
  if (!found) throw internalError(`failed to lookup master ${JSON.stringify(master)}: Link not found`);
  return found;
}

/** STATUS's master check (beyond the reference): a master missing from this namespace is code 50, "not available". */
export function requireMaster(master: string): void {
  if (master === '' || !getLinkDetails(master))
    throw new CniError(ErrorCode.PluginNotAvailable, `master ${JSON.stringify(master)} not found`);
}
