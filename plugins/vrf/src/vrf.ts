/**
 * vrf's kernel work inside the container namespace (reference: plugins/meta/vrf vrf.go): find or create the VRF,
 * enslave the interface while keeping its global IPv6 addresses and its non-connected routes (moved into the VRF's
 * table), and the reverse on DEL. Every ADD step is registered on the caller's Rollback.
 */
import {
  addAddr,
  createVrf,
  deleteLink,
  getLink,
  type Link,
  listAddrs,
  listLinks,
  listRoutes,
  listVrfs,
  replaceRoute,
  routeSpec,
  setLinkUp,
  setMaster,
  type Vrf,
} from '@cnikit/netlink';
import { CniError, ErrorCode, errorReason, type Rollback } from '@cnikit/skel';
import { freeTable } from './config.ts';

const RT_TABLE_MAIN = 254;
const RT_SCOPE_UNIVERSE = 0;

function fail(msg: string, cause?: unknown): CniError {
  return new CniError(ErrorCode.Internal, msg, undefined, cause === undefined ? undefined : { cause });
}

/** The VRF of that name; undefined when no link has the name; an error when the link is not a VRF. */
export function findVrf(name: string): Vrf | undefined {
  const vrf = listVrfs().find((v) => v.name === name);
  if (vrf) return vrf;
  if (getLink(name)) throw fail(`Netlink ${name} is not a VRF`);
  return undefined;
}

/** Finds or creates the VRF (ADD). */
export function ensureVrf(name: string, table: number, undo: Rollback): Vrf {
  const found = findVrf(name);
  if (found) {
    if (table !== 0 && found.table !== table)
      throw fail(`VRF ${name} already exist with different routing table ${found.table}`);
    return found;
  }
  const id = table !== 0 ? table : freeTable(new Set(listVrfs().map((v) => v.table)));
  let vrf: Vrf;
  try {
    vrf = createVrf(name, id);
  } catch (err) {
    throw fail(`could not add VRF ${name}: ${errorReason(err)}`, err);
  }
  undo.push(`delete VRF ${name}`, () => deleteLink(vrf.index));
  try {
    setLinkUp(vrf.index);
  } catch (err) {
    throw fail(`could not set link up for VRF ${name}: ${errorReason(err)}`, err);
  }
  return vrf;
}

export function assignedInterfaces(vrf: Vrf): Link[] {
  return listLinks().filter((l) => l.masterIndex === vrf.index);
}

const sleep = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/** Enslaves `ifName` to the VRF (the reference's addInterface). */
export function addInterface(vrf: Vrf, ifName: string, undo: Rollback): void {
  const link = getLink(ifName);
  if (!link) throw fail(`could not get link by name ${ifName}`);
  if (link.masterIndex) {
    const master = getLink(link.masterIndex);
    if (!master)
      throw fail(`interface ${ifName} has already a master set, could not retrieve the name: Link not found`);
    throw fail(`interface ${ifName} has already a master set: ${master.name}`);
  }
  // Global IPv6 addresses go when the device changes master (unless keep_addr_on_down), and so do the routes
  // through it: remember them first.
  const globalV6 = listAddrs({ link: link.index, family: 6 }).filter((a) => a.scope === RT_SCOPE_UNIVERSE);
  const globalRoutes = listRoutes({ link: link.index, table: RT_TABLE_MAIN }).filter(
    (r) => r.scope === RT_SCOPE_UNIVERSE,
  );
  try {
    setMaster(link.index, vrf.index);
  } catch (err) {
    throw fail(`could not set vrf ${vrf.name} as master of ${ifName}: ${errorReason(err)}`, err);
  }
  undo.push(`release ${ifName} from ${vrf.name}`, () => {
    setMaster(link.index, null);
    for (const a of globalV6)
      if (!listAddrs({ link: link.index, family: 6 }).some((x) => x.cidr === a.cidr))
        addAddr(link.index, a.cidr, { noDad: true });
    for (const r of globalRoutes) replaceRoute(routeSpec(r, RT_TABLE_MAIN));
  });

  const after = new Set(listAddrs({ link: link.index, family: 6 }).map((a) => a.cidr));
  for (const a of globalV6) {
    if (after.has(a.cidr)) continue;
    try {
      addAddr(link.index, a.cidr, { flags: a.flags });
    } catch (err) {
      throw fail(`could not restore address ${a.cidr} to ${ifName} @ ${vrf.name}: ${errorReason(err)}`, err);
    }
    // the kernel adds the address's local route to the VRF table asynchronously: wait for it (10 ms … 2.5 s)
    for (let attempt = 0; ; attempt++) {
      const present = listRoutes({ table: vrf.table, family: 6, link: link.index }).some(
        (r) => r.dst === `${a.ip}/128`,
      );
      if (present) break;
      if (attempt === 8)
        throw fail(
          `failed getting local/host addresses for ${ifName} in table ${vrf.table} with dst ${a.cidr}`,
        );
      sleep(10 * 2 ** attempt);
    }
  }
  for (const r of globalRoutes) {
    const spec = routeSpec(r, vrf.table);
    try {
      replaceRoute(spec);
    } catch (err) {
      throw fail(`could not add route '${r.dst}${r.gw ? ` via ${r.gw}` : ''}': ${errorReason(err)}`, err);
    }
  }
}

/** DEL: the interface leaves the VRF; the VRF goes with its last interface. Missing pieces are success. */
export function removeInterface(vrfName: string, ifName: string): void {
  const vrf = findVrf(vrfName);
  if (!vrf) return;
  const link = getLink(ifName);
  if (link?.masterIndex === vrf.index) {
    try {
      setMaster(link.index, null);
    } catch (err) {
      throw fail(`resetMaster: could reset master to ${ifName}: ${errorReason(err)}`, err);
    }
  }
  if (assignedInterfaces(vrf).length === 0) deleteLink(vrf.index);
}
