/**
 * CHECK helpers shared by interface plugins: Go's pkg/ip `ValidateExpectedInterfaceIPs` and
 * `ValidateExpectedRoute`, written over a small view of the container's kernel state so that they can
 * be unit-tested; `currentNetnsView()` is the real view of the calling thread's namespace (wrap in
 * withNetns). Failures are plain Errors carrying the reference's message (code 999 through the SDK).
 */
import {
  bitsOf,
  type Family,
  familyPrefix,
  formatCIDR,
  formatIP,
  maskOf,
  networkCIDR,
  parseCIDR,
  parseIP,
} from '@cnikit/ip';
import { getLink, listAddrs, listRoutes } from '@cnikit/netlink';

export interface AddrView {
  /** `ip/prefix`, canonical */
  cidr: string;
}

export interface RouteView {
  family: Family;
  /** canonical `net/prefix` (`0.0.0.0/0` / `::/0` for default routes) */
  dst: string;
  /** canonical gateway address */
  gw?: string;
  table: number;
}

/** What the validators read from the (container) namespace. */
export interface ExpectedStateView {
  /** Any non-undefined value means the link exists. */
  link(name: string): unknown;
  addrs(linkName: string): AddrView[];
  routes(family: Family): RouteView[];
}

/** Addresses of a link in the calling thread's namespace, canonical `ip/prefix`. */
export function addrViews(linkName: string): AddrView[] {
  return listAddrs({ link: linkName }).map((a) => ({ cidr: formatCIDR(parseCIDR(a.cidr)!) }));
}

/** Routes of all tables in the calling thread's namespace; an ECMP route counts once per next hop. */
export function routeViews(family: Family): RouteView[] {
  return listRoutes({ family, table: 0 }).flatMap((r) => {
    const dst = formatCIDR(parseCIDR(r.dst)!);
    const gws = r.multipath?.length ? r.multipath.map((h) => h.gw) : [r.gw];
    return gws.map((gw) => ({ family, dst, gw, table: r.table }));
  });
}

/** The real view of the calling thread's namespace. */
export function currentNetnsView(): ExpectedStateView {
  return { link: (name) => getLink(name), addrs: addrViews, routes: routeViews };
}

const MAIN_TABLE = 254;

function fail(msg: string): never {
  throw new Error(msg);
}

/** A route as the reference prints it in CHECK errors (Go `%v` of types.Route: `{Dst:{IP:… Mask:…} GW:…}`). */
export function routeText(r: { dst: string; gw?: string }): string {
  const n = parseCIDR(r.dst);
  let dst = r.dst;
  if (n) {
    const fam = n.ip.family;
    const mask = maskOf(fam, familyPrefix(n))
      .toString(16)
      .padStart(bitsOf(fam) / 4, '0');
    dst = `{IP:${formatIP(n.ip)} Mask:${mask}}`;
  }
  const gw = r.gw ? parseIP(r.gw) : undefined;
  return `{Dst:${dst} GW:${gw ? formatIP(gw) : (r.gw ?? '<nil>')}}`;
}

/** `ip.ValidateExpectedInterfaceIPs`: every address is on the link and a route to its subnet exists. */
export function validateExpectedInterfaceIPs(
  ifName: string,
  ips: ReadonlyArray<{ address: string; gateway?: string }>,
  view: ExpectedStateView = currentNetnsView(),
): void {
  for (const ipc of ips) {
    const addr = parseCIDR(ipc.address);
    if (!addr) fail(`Failed to match addr ${ipc.address} on interface ${ifName}`);
    if (!view.link(ifName)) fail(`Cannot find container link ${ifName}`);
    const want = formatCIDR(addr);
    if (!view.addrs(ifName).some((a) => a.cidr === want)) {
      fail(`Failed to match addr ${want} on interface ${ifName}`);
    }
    const prefix = formatCIDR(networkCIDR(addr));
    const found = view.routes(addr.ip.family).some((r) => r.table === MAIN_TABLE && r.dst === prefix);
    if (!found) fail(`Failed to find Gateway ${ipc.gateway ?? '<nil>'} for interface ${ifName}`);
  }
}

/** `ip.ValidateExpectedRoute` (HEAD): match by dst, and by gw when given (default routes: dst only). */
export function validateExpectedRoutes(
  routes: ReadonlyArray<{ dst: string; gw?: string }>,
  view: ExpectedStateView = currentNetnsView(),
): void {
  for (const route of routes) {
    const dst = parseCIDR(route.dst);
    if (!dst) fail(`Invalid static route found ${routeText(route)}`);
    const dstText = formatCIDR(networkCIDR(dst));
    const isDefault = familyPrefix(dst) === 0;
    const gw = route.gw ? parseIP(route.gw) : undefined;
    const gwText = gw ? formatIP(gw) : undefined;
    const found = view
      .routes(dst.ip.family)
      .some((r) => r.table === MAIN_TABLE && r.dst === dstText && (isDefault || !gwText || r.gw === gwText));
    if (!found) fail(`Expected Route ${routeText(route)} not found in routing table`);
  }
}

/**
 * The interface of prevResult that CHECK looks at: named `ifName` with `sandbox` equal to CNI_NETNS. `lowerCase`:
 * the message with a lower-case first letter (the reference's macvlan).
 */
export function findSandboxInterface<I extends { name: string; sandbox?: string }>(
  interfaces: readonly I[] | undefined,
  ifName: string,
  netns: string,
  lowerCase = false,
): I {
  const found = (interfaces ?? []).find((i) => i.name === ifName && i.sandbox === netns);
  // the reference prints the (empty) sandbox of the interface it did not find: two spaces
  if (!found) fail(cased(lowerCase, `Sandbox in prevResult  doesn't match configured netns: ${netns}`));
  return found;
}

/** What the interface checks read of the container's link (@cnikit/netlink's Link and LinkDetails have it). */
export interface LinkView {
  kind: string | undefined;
  mac: string;
  up?: boolean;
}

export interface ContainerLinkCheck<L extends LinkView = LinkView> {
  /** Prefix of some of the messages, as the plugin's reference words them ('ptp: ', 'vlan: ' or ''). */
  prefix?: string;
  /** Every message with a lower-case first letter (the reference's macvlan). */
  lowerCase?: boolean;
  /**
   * The link kind the interface must have, and how the message names it ('veth' → 'veth/p2p'); `data`: the link's
   * kind-specific data (`link[kind]`, e.g. LinkDetails' `ipvlan`) must be there too.
   */
  kind?: { kind: string; label: string; data?: boolean };
  /** The kind-specific checks, right after the kind's (ipvlan's and macvlan's mode). */
  kindData?: (link: L) => void;
  /** The checks after the MAC's (vlan's ID and MTU). */
  after?: (link: L) => void;
  /** Fail with "Interface <name> is down" when the link is not administratively up (dummy). */
  requireUp?: boolean;
}

function cased(lower: boolean | undefined, msg: string): string {
  return lower ? msg.charAt(0).toLowerCase() + msg.slice(1) : msg;
}

/**
 * The reference plugins' `validateCniContainerInterface` (macvlan, ipvlan, vlan, ptp, host-device, dummy, tap…):
 * the prevResult interface exists in the container (the calling thread's namespace unless `lookup` says
 * otherwise), has the expected kind (and its kind's checks) and MAC, and is up when asked; the texts are each
 * reference plugin's (`prefix`, `lowerCase`).
 */
export function validateContainerInterface<L extends LinkView = LinkView>(
  intf: { name: string; mac?: string; sandbox?: string },
  opts: ContainerLinkCheck<L> = {},
  lookup: (name: string) => L | undefined = getLink as unknown as (name: string) => L | undefined,
): void {
  const p = opts.prefix ?? '';
  const no: (msg: string) => never = (msg) => fail(cased(opts.lowerCase, msg));
  if (intf.name === '') no('Container interface name missing in prevResult: ');
  const link = lookup(intf.name);
  if (!link) no(`${p}Container Interface name in prevResult: ${intf.name} not found`);
  if (!intf.sandbox) no(`${p}Error: Container interface ${intf.name} should not be in host namespace`);
  const kind = opts.kind;
  if (
    kind &&
    (link.kind !== kind.kind ||
      (kind.data && (link as unknown as Record<string, unknown>)[kind.kind] === undefined))
  )
    no(`Error: Container interface ${intf.name} not of type ${kind.label}`);
  opts.kindData?.(link);
  if (intf.mac && intf.mac !== link.mac)
    no(`${p}Interface ${intf.name} Mac ${intf.mac} doesn't match container Mac: ${link.mac}`);
  opts.after?.(link);
  if (opts.requireUp && !link.up) no(`Interface ${intf.name} is down`);
}

/** A macvlan's or ipvlan's view for `modeLinkCheck`: its kind data holds the mode. */
export interface ModeLinkView extends LinkView {
  name: string;
  macvlan?: { mode: string };
  ipvlan?: { mode: string };
}

export interface ModeLinkCheck {
  kind: 'macvlan' | 'ipvlan';
  /** The configured mode as the kernel names it (the plugin's `modeFromString`, which throws for an unknown one). */
  want: () => string;
  /** The modes the plugin knows: another one on the link is "unknown <kind> mode: <mode>". */
  modes: readonly string[];
  /** How the mismatch message names the link: 'Container IPVlan' (ipvlan), 'container macvlan' (macvlan). */
  label: string;
  /** Every message with a lower-case first letter (the reference's macvlan). */
  lowerCase?: boolean;
}

/**
 * CHECK's look at a stacked link with a mode (macvlan, ipvlan): of the kind, with its kind data, in the configured
 * mode ("<label> mode <have> does not match expected value: <want>"), with prevResult's MAC.
 */
export function modeLinkCheck(o: ModeLinkCheck): ContainerLinkCheck<ModeLinkView> {
  return {
    lowerCase: o.lowerCase,
    kind: { kind: o.kind, label: o.kind, data: true },
    kindData: (link) => {
      const want = o.want();
      const have = link[o.kind]?.mode ?? '';
      if (have === want) return;
      if (!o.modes.includes(have)) throw new Error(`unknown ${o.kind} mode: ${have}`);
      throw new Error(`${o.label} mode ${have} does not match expected value: ${want}`);
    },
  };
}
