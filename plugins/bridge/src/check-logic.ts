/**
 * CHECK's validation logic (the reference's cmdCheck after the IPAM CHECK), written over a small view
 * of the kernel state so that it can be unit-tested; `kernel.ts` (`checkEnv`) provides the real views.
 */

import type { Family } from '@cnikit/ip';
import {
  type AddrView,
  type ExpectedStateView,
  type RouteView,
  validateExpectedInterfaceIPs,
  validateExpectedRoutes,
} from '@cnikit/link';
import { CniError, ErrorCode, type Interface, type Result } from '@cnikit/skel';

export interface LinkView {
  name: string;
  index: number;
  kind: string;
  mac: string;
  promisc: boolean;
  masterIndex: number;
  /** veth peer ifindex (IFLA_LINK), when known */
  peerIndex?: number;
}

export type { AddrView, RouteView } from '@cnikit/link';
export { routeText } from '@cnikit/link';

/** What CHECK needs to read from the system. */
export interface CheckEnv {
  hostLink(name: string): LinkView | undefined;
  /** Runs in the container namespace. */
  containerLink(name: string): LinkView | undefined;
  containerAddrs(linkName: string): AddrView[];
  containerRoutes(family: Family): RouteView[];
}

function fail(msg: string): never {
  throw new CniError(ErrorCode.Internal, msg);
}

interface Found {
  found: boolean;
  name: string;
  ifIndex: number;
  peerIndex: number;
  masterIndex: number;
}

const notFound = (): Found => ({ found: false, name: '', ifIndex: 0, peerIndex: 0, masterIndex: 0 });

function validateInterface(intf: Interface, link: LinkView | undefined, expectInSandbox: boolean): LinkView {
  if (!intf.name) fail('Interface name missing ');
  if (!link) fail(`Interface name ${intf.name} not found`);
  if (expectInSandbox) {
    if (!intf.sandbox) fail(`Interface ${intf.name} is expected to be in a sandbox`);
  } else if (intf.sandbox) {
    fail(`Interface ${intf.name} should not be in sandbox`);
  }
  return link;
}

export interface CheckArgs {
  bridge: string;
  promiscMode: boolean;
  ifName: string;
  netns: string;
}

/** The reference's interface validation of CHECK, then addresses and routes. */
export function checkAttachment(env: CheckEnv, args: CheckArgs, prev: Result): void {
  const interfaces = prev.interfaces ?? [];
  let brMap: Interface = { name: '' };
  let contMap: Interface = { name: '' };
  for (const intf of interfaces) {
    if (intf.name === args.bridge) {
      brMap = intf;
      continue;
    }
    if (intf.name === args.ifName && intf.sandbox === args.netns) contMap = intf;
  }

  // bridge
  const brLink = validateInterface(brMap, brMap.name ? env.hostLink(brMap.name) : undefined, false);
  if (brLink.kind !== 'bridge') fail(`Interface ${brMap.name} does not have link type of bridge`);
  if (brMap.mac && brMap.mac !== brLink.mac)
    fail(`Bridge interface ${brMap.name} Mac doesn't match: ${brMap.mac}`);
  if (brLink.promisc !== args.promiscMode) {
    fail(
      `Bridge interface ${brMap.name} configured Promisc Mode ${args.promiscMode} doesn't match current state: ${brLink.promisc} `,
    );
  }
  const br: Found = {
    found: true,
    name: brLink.name,
    ifIndex: brLink.index,
    peerIndex: 0,
    masterIndex: brLink.masterIndex,
  };

  if (args.netns !== (contMap.sandbox ?? '')) {
    fail(`Sandbox in prevResult ${contMap.sandbox ?? ''} doesn't match configured netns: ${args.netns}`);
  }

  // container side
  const contLink = validateInterface(
    contMap,
    contMap.name ? env.containerLink(contMap.name) : undefined,
    true,
  );
  if (contLink.kind !== 'veth') fail(`Error: Container interface ${contLink.name} not of type veth`);
  if (contLink.peerIndex === undefined || contLink.peerIndex <= 0) {
    fail(`Unable to obtain veth peer index for veth ${contLink.name}`);
  }
  if (contMap.mac && contMap.mac !== contLink.mac) {
    fail(`Interface ${contMap.name} Mac ${contMap.mac} doesn't match container Mac: ${contLink.mac}`);
  }
  const cont: Found = {
    found: true,
    name: contLink.name,
    ifIndex: contLink.index,
    peerIndex: contLink.peerIndex,
    masterIndex: 0,
  };

  // the host veth: peer of the container interface, enslaved to the bridge
  let veth = notFound();
  for (const intf of interfaces) {
    if (intf.name === brMap.name || intf.name === contMap.name) continue;
    const link = validateInterface(intf, env.hostLink(intf.name), false);
    if (link.kind !== 'veth') continue;
    if (link.peerIndex === undefined || link.peerIndex <= 0)
      fail(`Unable to obtain veth peer index for veth ${link.name}`);
    if (link.index !== cont.peerIndex || cont.ifIndex !== link.peerIndex || link.masterIndex !== br.ifIndex)
      continue;
    if (intf.mac && intf.mac !== link.mac)
      fail(`Interface ${intf.name} Mac doesn't match: ${intf.mac} not found`);
    veth = {
      found: true,
      name: link.name,
      ifIndex: link.index,
      peerIndex: link.peerIndex,
      masterIndex: link.masterIndex,
    };
    break;
  }
  if (!veth.found) fail(`CNI veth created for bridge ${args.bridge} was not found`);

  // pkg/ip's validators (in @cnikit/netlink) over the container side of the view
  const inContainer: ExpectedStateView = {
    link: (name) => env.containerLink(name),
    addrs: (name) => env.containerAddrs(name),
    routes: (family) => env.containerRoutes(family),
  };
  validateExpectedInterfaceIPs(args.ifName, prev.ips ?? [], inContainer);
  validateExpectedRoutes(prev.routes ?? [], inContainer);
}
