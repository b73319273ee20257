/**
 * sbr's kernel work inside the container namespace (reference: plugins/meta/sbr doRoutes, doRoutesWithTable,
 * tidyRules): one `from <ip>/32 lookup <table>` rule per address, the interface's main-table routes copied into
 * that table (plus a default route through the gateway), then removed from the main table (or, with
 * addSourceHints, the subnet routes kept with a source hint and only the other routes removed).
 *
 * Every change is registered on the caller's Rollback, so a failed ADD puts the namespace back as it was.
 */
import { contains, formatCIDR, formatIP, networkCIDR, parseCIDR, parseIP } from '@cnikit/ip';
import {
  addRoute,
  addRule,
  delRoute,
  delRule,
  getLink,
  isNotFoundError,
  listAddrs,
  listRoutes,
  listRules,
  type Route,
  type RouteSpec,
  replaceRoute,
  routeSpec,
} from '@cnikit/netlink';
import { CniError, ErrorCode, errorReason, type IPConfig, type Rollback } from '@cnikit/skel';
import type { StaticGateways } from './config.ts';

export const FIRST_TABLE_ID = 100;
const RT_TABLE_MAIN = 254;
const RT_SCOPE_LINK = 253;

function fail(msg: string, cause?: unknown): CniError {
  return new CniError(ErrorCode.Internal, msg, undefined, cause === undefined ? undefined : { cause });
}

function hostPrefix(address: string): string {
  const c = parseCIDR(address);
  if (!c) throw fail(`invalid address ${JSON.stringify(address)}`);
  return `${formatIP(c.ip)}/${c.ip.family === 4 ? 32 : 128}`;
}

/**
 * The first table id from `candidate` on that no rule references and that holds no route. (The reference means
 * the same but only looks at main-table routes, so a table used without a rule, e.g. a VRF's, could be taken.)
 */
export function nextFreeTable(usedTables: ReadonlySet<number>, candidate: number): number {
  let t = candidate;
  while (usedTables.has(t)) t++;
  return t;
}

function usedTables(): Set<number> {
  const used = new Set<number>();
  try {
    for (const r of listRules()) used.add(r.table);
  } catch (err) {
    throw fail(`Failed to list all rules: ${errorReason(err)}`, err);
  }
  try {
    for (const r of listRoutes({ table: 0 })) used.add(r.table);
  } catch (err) {
    throw fail(`Failed to list all routes: ${errorReason(err)}`, err);
  }
  return used;
}

function addSourceRule(address: string, table: number, undo: Rollback, msg: string): void {
  const spec = { src: hostPrefix(address), table };
  try {
    addRule(spec);
  } catch (err) {
    throw fail(`${msg}: ${errorReason(err)}`, err);
  }
  undo.push(`delete rule from ${spec.src} lookup ${table}`, () => delRule(spec));
}

/** `table` configured: only the rules (the reference's doRoutesWithTable). */
export function setupWithTable(ipcs: readonly IPConfig[], table: number, undo: Rollback): void {
  for (const ipc of ipcs) addSourceRule(ipc.address, table, undo, 'failed to add rule');
}

/** No `table`: a table per address, routes moved into it (the reference's doRoutes). */
export function setupRoutes(
  ipcs: readonly IPConfig[],
  ifName: string,
  gateways: StaticGateways,
  addSourceHints: boolean,
  undo: Rollback,
): void {
  const used = usedTables();
  let table = nextFreeTable(used, FIRST_TABLE_ID);
  const link = getLink(ifName);
  if (!link) throw fail(`Cannot find network interface ${ifName}: Link not found`);
  let routes: Route[];
  try {
    routes = listRoutes({ link: link.index, table: RT_TABLE_MAIN });
  } catch (err) {
    throw fail(`Unable to list routes: ${errorReason(err)}`, err);
  }

  for (const ipc of ipcs) {
    addSourceRule(ipc.address, table, undo, 'Failed to add rule');
    const addr = parseCIDR(ipc.address);
    if (!addr) throw fail(`invalid address ${JSON.stringify(ipc.address)}`);
    const v4 = addr.ip.family === 4;
    const staticGw = v4 ? gateways.v4 : gateways.v6;
    const gateway = staticGw ?? ipc.gateway;
    if (gateway !== undefined) {
      const spec: RouteSpec = { dst: v4 ? '0.0.0.0/0' : '::/0', gw: gateway, dev: link.index, table };
      try {
        addRoute(spec);
      } catch (err) {
        throw fail(`Failed to add default route to ${gateway}: ${errorReason(err)}`, err);
      }
      undo.push(`delete default route of table ${table}`, () => delRoute(spec));
    }
    // The interface's routes are copied into the table (replace: the default route may be there already).
    for (const r of routes) {
      const src = r.src === undefined ? undefined : parseIP(r.src);
      const gw = r.gw === undefined ? undefined : parseIP(r.gw);
      const generic = src === undefined && gw === undefined;
      if (!generic && !(src && contains(addr, src)) && !(gw && contains(addr, gw))) continue;
      // A static gateway wins over the interface's default route (the reference copies that route over it).
      if (staticGw !== undefined && r.family === addr.ip.family && r.dst.endsWith('/0')) continue;
      const copy = routeSpec(r, table);
      const before = listRoutes({ table, family: r.family }).find((x) => x.dst === r.dst);
      try {
        replaceRoute(copy);
      } catch (err) {
        throw fail(`Failed to readd route: ${errorReason(err)}`, err);
      }
      undo.push(`restore route ${r.dst} of table ${table}`, () =>
        before ? replaceRoute(routeSpec(before)) : delRoute(copy),
      );
    }
    table = nextFreeTable(used, table + 1);
  }

  if (addSourceHints) {
    // Subnet routes stay in the main table with a source hint; every other route of the interface goes.
    for (const ipc of ipcs) {
      const addr = parseCIDR(ipc.address);
      if (!addr) continue;
      const subnet = formatCIDR(networkCIDR(addr));
      const hint: RouteSpec = {
        dst: subnet,
        src: formatIP(addr.ip),
        dev: link.index,
        table: RT_TABLE_MAIN,
        scope: RT_SCOPE_LINK,
      };
      const before = routes.find((x) => x.dst === subnet);
      try {
        replaceRoute(hint);
        undo.push(`restore route ${subnet}`, () =>
          before ? replaceRoute(routeSpec(before)) : delRoute(hint),
        );
      } catch {
        // the reference only warns here
      }
    }
    for (const r of routes) {
      if (r.scope === RT_SCOPE_LINK) continue;
      try {
        delRoute(routeSpec(r));
        undo.push(`restore route ${r.dst}`, () => addRoute(routeSpec(r)));
      } catch {
        // the reference only warns here
      }
    }
  } else {
    for (const r of routes) {
      try {
        delRoute(routeSpec(r));
      } catch (err) {
        throw fail(`Failed to delete route: ${errorReason(err)}`, err);
      }
      undo.push(`restore route ${r.dst}`, () => addRoute(routeSpec(r)));
    }
  }
}

/**
 * DEL: removes the rules whose source is one of the interface's addresses (only those of `table` when set). A
 * missing interface is success. Keeps going after a failure and reports the last one, like the reference.
 */
export function tidyRules(ifName: string, table: number | undefined): void {
  let rules: ReturnType<typeof listRules>;
  try {
    rules = listRules(table === undefined ? {} : { table });
  } catch (err) {
    throw table === undefined
      ? fail(`Failed to list all rules to tidy: ${errorReason(err)}`, err)
      : fail(`failed to list rules of table ${table} to tidy: ${errorReason(err)}`, err);
  }
  const link = getLink(ifName);
  if (!link) return;
  let addrs: string[];
  try {
    addrs = listAddrs({ link: link.index }).map((a) => a.ip);
  } catch (err) {
    throw fail(`Failed to list all addrs: ${errorReason(err)}`, err);
  }
  let last: CniError | undefined;
  for (const rule of rules) {
    if (rule.src === undefined) continue;
    const ip = parseIP(rule.src.slice(0, rule.src.indexOf('/')));
    if (!ip || !addrs.some((a) => formatIP(ip) === a)) continue;
    try {
      delRule({ src: rule.src, table: rule.table, priority: rule.priority });
    } catch (err) {
      if (!isNotFoundError(err)) last = fail(`Failed to delete rule ${errorReason(err)}`, err);
    }
  }
  if (last) throw last;
}

/**
 * CHECK (the reference checks nothing): what ADD set up for every address of the interface is still there — its
 * source rule (lookup `table` when set, some non-main table otherwise) and, without `table`, the default route
 * through its gateway (the static one of its family, else prevResult's) in the rule's table. Returns the problems.
 */
export function checkProblems(
  ipcs: readonly IPConfig[],
  table: number | undefined,
  gateways: StaticGateways,
): string[] {
  const rules = listRules();
  const problems: string[] = [];
  for (const ipc of ipcs) {
    const src = hostPrefix(ipc.address);
    const rule = rules.find(
      (r) => r.src === src && (table === undefined ? r.table !== RT_TABLE_MAIN : r.table === table),
    );
    if (!rule) {
      problems.push(`no source rule for ${src}`);
      continue;
    }
    if (table !== undefined) continue;
    const addr = parseCIDR(ipc.address);
    if (!addr) continue;
    const v4 = addr.ip.family === 4;
    const gateway = (v4 ? gateways.v4 : gateways.v6) ?? ipc.gateway;
    if (gateway === undefined) continue;
    const gw = parseIP(gateway);
    const routes = listRoutes({ table: rule.table, family: v4 ? 4 : 6 });
    const found = routes.some((r) => {
      const rgw = r.gw === undefined ? undefined : parseIP(r.gw);
      return r.dst.endsWith('/0') && rgw !== undefined && gw !== undefined && formatIP(rgw) === formatIP(gw);
    });
    if (!found) problems.push(`no default route via ${gateway} in table ${rule.table} (the table of ${src})`);
  }
  return problems;
}
