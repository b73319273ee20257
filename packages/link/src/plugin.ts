/**
 * The rest of what the interface plugins share: their plugin object (`linkPlugin`, with the shared DEL and the IPAM's
 * GC and STATUS as the default verbs), and the master's lookups of CHECK/ADD (`lookupMaster`, the reference's
 * "failed to lookup master …") and of STATUS (`requireMaster`, code 50).
 */
import { getLinkDetails, type LinkDetails } from '@cnikit/netlink';
import {
  ALL_VERSIONS,
  CNIKIT_VERSION,
  CniError,
  ErrorCode,
  internalError,
  type Plugin,
  type Request,
} from '@cnikit/skel';
import { inMasterNetns } from './container.ts';
import { ipamGc, ipamStatus, type WithIpam } from './ipam.ts';
import { delContainerLink } from './verbs.ts';

/**
 * What an interface plugin writes itself; `del` defaults to delContainerLink's (IPAM DEL and the link's removal, no
 * master needed), `gc` and `status` to the IPAM's (none without an IPAM type).
 */
export type LinkPluginVerbs<C> = Pick<Plugin<C>, 'conf' | 'add' | 'check'> &
  Partial<Pick<Plugin<C>, 'del' | 'gc' | 'status' | 'prevResultErrorPrefix'>>;

/**
 * The plugin object of interface plugin `name`: about text `CNI <name> plugin cnikit <version>`, every spec version,
 * not an IPAM. Without a `del` of its own it runs delContainerLink, without `gc`/`status` the IPAM's (when one is
 * configured): such a link leaves nothing outside its container, and has no prerequisite of its own to report.
 */
export function linkPlugin<C extends WithIpam>(name: string, verbs: LinkPluginVerbs<C>): Plugin<C> {
  return {
    name,
    ipam: false,
    about: `CNI ${name} plugin cnikit ${CNIKIT_VERSION}`,
    versions: ALL_VERSIONS,
    del: async function del(req: Request<C>): Promise<void> {
      await delContainerLink(req);
    },
    gc: async function gc(req: Request<C>): Promise<void> {
      await ipamGc(req);
    },
    status: async function status(req: Request<C>): Promise<void> {
      await ipamStatus(req);
    },
    ...verbs,
  };
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
