/**
 * The verbs an interface plugin shares (macvlan, ipvlan, vlan, dummy, tap; CHECK also ptp and host-device): ADD's
 * ending once the plugin has made its link (rollback, IPAM, the result, ConfigureIface), DEL (IPAM DEL and the
 * link's removal, both always run) and CHECK up to the plugin's own look at the link. What differs between the
 * reference plugins (its error texts, which IPAM calls run without an IPAM type, the notify sysctls, where DNS comes
 * from) is a parameter; what a plugin does alone (creating its link, finding its master) stays in the plugin.
 */
import { closeSync } from 'node:fs';
import { deleteLinkIfExists, setLinkUp, sysctlSet, withNetns, withNetnsFd } from '@cnikit/netlink';
import {
  type DNS,
  delegateCheck,
  delegateDel,
  ErrorList,
  errorReason,
  type Interface,
  internalError,
  type Request,
  type Result,
  Rollback,
} from '@cnikit/skel';
import { configureIface } from './configure.ts';
import {
  addStackedLinkToContainer,
  type ContainerLinkRequest,
  deleteLinkInNetns,
  openContainerNetns,
  removeInNetns,
} from './container.ts';
import { ipamAdd, type WithIpam } from './ipam.ts';
import {
  type ContainerLinkCheck,
  findSandboxInterface,
  type LinkView,
  validateContainerInterface,
  validateExpectedInterfaceIPs,
  validateExpectedRoutes,
} from './validate.ts';

/** A link stacked on a master (macvlan, ipvlan, vlan): addStackedLinkToContainer's request but for what ADD knows. */
export type StackedLink = Pick<ContainerLinkRequest, 'master' | 'linkInContainer' | 'create'>;

interface ContainerLinkAddBase {
  /** The result to take the addresses from instead of running the IPAM (ipvlan chained after another plugin). */
  chained?: Result;
  /** How a failed IPAM ADD is reported (vlan wraps it); default as the IPAM said it. */
  ipamError?: (err: unknown) => Error;
  /** The neighbour-notify sysctls set before addressing (errors ignored, like the reference); default none. */
  notify?: 'arp' | 'arp+ndisc';
  /** Without IPAM, bring the link up (macvlan); default: leave it as `create` made it. */
  upWithoutIpam?: boolean;
  /** The result's DNS, from the IPAM's result (undefined without IPAM) or the configuration. */
  dns(ipam: Result | undefined): DNS | undefined;
}

/** How ADD makes the link: `create` (any link), or `stacked` on a master. A failure undoes nothing (nothing is made yet). */
export type ContainerLinkAdd = ContainerLinkAddBase &
  (
    | {
        /** The link kind as the rollback's log names it ('delete dummy'). */
        kind: string;
        /**
         * Creates CNI_IFNAME in the container namespace open on `netnsFd` (dummy/tap inside it) and returns the
         * result's interface.
         */
        create(netnsFd: number): Interface;
      }
    | {
        kind: ContainerLinkRequest['kind'];
        /**
         * The link on its master (asked for once the container namespace is open), created by
         * addStackedLinkToContainer; the result's interface is CNI_IFNAME's.
         */
        stacked(): StackedLink;
      }
  );

/**
 * ADD after the plugin's own checks: open the container namespace, make the link, run the IPAM (or take the chained
 * addresses), address the link and return the 1.1.0 result; on any failure the link is deleted and the IPAM's
 * allocation released (registered before the call: an IPAM that allocated and then failed to answer is released
 * too), and the error is the one that stopped ADD.
 */
export async function addContainerLink<C extends WithIpam>(
  req: Request<C>,
  spec: ContainerLinkAdd,
): Promise<Result> {
  const ipamType = req.conf.ipamType;
  const fd = openContainerNetns(req.netns);
  const undo = new Rollback();
  try {
    const intf: Interface =
      'stacked' in spec
        ? {
            name: req.ifName,
            mac: addStackedLinkToContainer({
              ...spec.stacked(),
              kind: spec.kind,
              netnsFd: fd,
              ifName: req.ifName,
            }).mac,
            sandbox: req.netns,
          }
        : spec.create(fd);
    undo.push(`delete ${spec.kind}`, () => withNetnsFd(fd, () => deleteLinkIfExists(req.ifName)));
    let ipam: Result | undefined = spec.chained;
    if (!ipam && ipamType !== '') {
      try {
        ipam = await ipamAdd(ipamType, req, undo);
      } catch (err) {
        throw spec.ipamError ? spec.ipamError(err) : err;
      }
      if (!ipam.ips || ipam.ips.length === 0) throw internalError('IPAM plugin returned missing IP config');
    }
    const result: Result = { cniVersion: '1.1.0', interfaces: [intf] };
    if (ipam) {
      result.ips = (ipam.ips ?? []).map((ip) => ({ ...ip, interface: 0 }));
      result.routes = (ipam.routes ?? []).map((r) => ({ ...r }));
      withNetnsFd(fd, () => {
        if (spec.notify) setNotifySysctls(req.ifName, spec.notify);
        configureIface(req.ifName, result);
      });
    } else if (spec.upWithoutIpam) {
      withNetnsFd(fd, () => {
        try {
          setLinkUp(req.ifName);
        } catch (err) {
          throw internalError(`failed to set ${JSON.stringify(req.ifName)} UP: ${errorReason(err)}`, err);
        }
      });
    }
    const dns = spec.dns(ipam);
    if (dns) result.dns = dns;
    return result;
  } catch (err) {
    await undo.undoAll(req.log);
    throw err;
  } finally {
    closeSync(fd);
  }
}

/**
 * Before addressing a new link in the container (the calling thread's namespace): arp_notify (and ndisc_notify) on,
 * so the neighbours learn the new MAC at once. Errors are ignored, like the reference (a kernel without IPv6 has no
 * ndisc_notify).
 */
export function setNotifySysctls(ifName: string, which: 'arp' | 'arp+ndisc' = 'arp+ndisc'): void {
  const names = [`net/ipv4/conf/${ifName}/arp_notify`];
  if (which === 'arp+ndisc') names.push(`net/ipv6/conf/${ifName}/ndisc_notify`);
  for (const name of names) {
    try {
      sysctlSet(name, '1');
    } catch {
      // ignored, like the reference
    }
  }
}

export interface ContainerLinkDel {
  /** IPAM DEL also without an IPAM type (the reference's dummy fails it: "no plugin name provided"). */
  ipamAlways?: boolean;
  /**
   * Removes the interface inside the container namespace (a missing link is success); default: deleteLinkInNetns,
   * whose failure reads "failed to delete "<ifName>": <reason>".
   */
  remove?: (ifName: string) => void;
}

/**
 * DEL: IPAM DEL and the link's removal both run, every failure reported at the end; a missing link, an empty
 * CNI_NETNS and a namespace that is gone are success. Needs no master.
 */
export async function delContainerLink<C extends WithIpam>(
  req: Request<C>,
  spec: ContainerLinkDel = {},
): Promise<void> {
  const errors = new ErrorList();
  const ipamType = req.conf.ipamType;
  if (spec.ipamAlways || ipamType !== '') await errors.run('', () => delegateDel(ipamType, req));
  if (req.netns !== '') {
    const remove = spec.remove;
    errors.run('', () =>
      remove ? removeInNetns(req.netns, () => remove(req.ifName)) : deleteLinkInNetns(req.netns, req.ifName),
    );
  }
  errors.throwIfAny();
}

export interface ContainerLinkCheckSpec<L extends LinkView> {
  /** IPAM CHECK also without an IPAM type (the reference's vlan, dummy, ptp: "no plugin name provided"). */
  ipamAlways?: boolean;
  /** The reference's text for a missing prevResult ('Required prevResult missing', 'vlan: Required …'). */
  missingPrevResult: string;
  /** Stop after prevResult: nothing of the interface to check (host-device in DPDK mode). */
  noInterface?: boolean;
  /** Checks the master once the interface is found (macvlan, ipvlan, vlan), in the calling thread's namespace. */
  master?: () => void;
  /** The interface's checks, with the plugin's texts (see validateContainerInterface). */
  link?: ContainerLinkCheck<L>;
  /** The container's link lookup (default @cnikit/netlink's getLink). */
  lookup?: (name: string) => L | undefined;
  /** Check prevResult's routes (all but dummy, whose reference checks only the addresses). */
  routes?: boolean;
}

/**
 * CHECK in the reference's order: the container namespace opens, the IPAM's CHECK, prevResult, its interface in
 * this sandbox, the master, then in the container the link, its addresses and the routes.
 */
export async function checkContainerLink<C extends WithIpam, L extends LinkView>(
  req: Request<C>,
  spec: ContainerLinkCheckSpec<L>,
): Promise<void> {
  const ipamType = req.conf.ipamType;
  closeSync(openContainerNetns(req.netns));
  if (spec.ipamAlways || ipamType !== '') await delegateCheck(ipamType, req);
  const prev = req.prevResult;
  if (!prev) throw internalError(spec.missingPrevResult);
  if (spec.noInterface) return;
  const intf = findSandboxInterface(prev.interfaces, req.ifName, req.netns, spec.link?.lowerCase);
  spec.master?.();
  withNetns(req.netns, () => {
    validateContainerInterface(intf, spec.link, spec.lookup);
    validateExpectedInterfaceIPs(req.ifName, prev.ips ?? []);
    if (spec.routes !== false) validateExpectedRoutes(prev.routes ?? []);
  });
}
