/**
 * loopback: brings `lo` up in the container namespace (reference: plugins/main/loopback, plugins.md §6).
 *
 * - ADD: `lo` UP; every address on it must be a loopback address; the result is prevResult unchanged when one
 *   is given, else `{ interfaces: [{ name: 'lo', mac: '00:00:00:00:00:00', sandbox: CNI_NETNS }], ips: [first v4,
 *   first v6] }` with `interface: 0` on each IP. CNI_IFNAME is ignored (always `lo`); CNI_ARGS is not parsed.
 * - DEL: empty CNI_NETNS or a namespace that is gone (isNetnsGoneForDel: missing path, or the empty file left
 *   behind by an unmounted bind mount) → success; else `lo` DOWN.
 * - CHECK: `lo` must be UP (`loopback interface is down`), and every address prevResult puts on `lo` (an `ips` entry
 *   whose `interface` index names `lo` in CNI_NETNS) must still be on it (`loopback interface lacks address …`);
 *   SPEC.md §2 CHECK: an error when a resource of the result is missing. The reference checks only that `lo` is up.
 * - GC / STATUS: not implemented (succeed as no-ops, like the reference).
 */
import { canonicalCIDR, isLoopback, parseIP } from '@cnikit/ip';
import { isNetnsGoneForDel, withNetns } from '@cnikit/netlink';
import type { IPConfig, Plugin, Request, Result } from '@cnikit/skel/plugin';
import { CNIKIT_VERSION, CniError, CURRENT_VERSION, ErrorCode } from '@cnikit/skel/plugin';
import { type LoopbackConf, parseConf } from './config.ts';
import { type LoopbackAddr, loopbackAddrs, loopbackIsUp, setLoopbackDown, setLoopbackUp } from './lo.ts';

export const LO = 'lo';
export const LOOPBACK_MAC = '00:00:00:00:00:00';

/** Go's net.IP.IsLoopback: 127.0.0.0/8 (also IPv4-mapped) and ::1. */
export function isLoopbackIp(ip: string): boolean {
  const parsed = parseIP(ip);
  return parsed !== undefined && isLoopback(parsed);
}

/** Checks the addresses of `lo` and picks the first of each family, like the reference. */
export function pickAddresses(addrs: readonly LoopbackAddr[]): { v4?: string; v6?: string } {
  let v4: string | undefined;
  let v6: string | undefined;
  for (const family of [4, 6] as const) {
    const list = addrs.filter((a) => a.family === family);
    for (const a of list) {
      if (!isLoopbackIp(a.ip)) {
        throw new CniError(
          ErrorCode.Internal,
          `loopback interface found with non-loopback address ${JSON.stringify(a.ip)}`,
        );
      }
    }
    const first = list[0];
    if (first) {
      if (family === 4) v4 = `${first.ip}/${first.prefixLen}`;
      else v6 = `${first.ip}/${first.prefixLen}`;
    }
  }
  return { v4, v6 };
}

export function loopbackResult(
  cniVersion: string,
  netns: string,
  addrs: { v4?: string; v6?: string },
): Result {
  const ips: IPConfig[] = [];
  if (addrs.v4) ips.push({ interface: 0, address: addrs.v4 });
  if (addrs.v6) ips.push({ interface: 0, address: addrs.v6 });
  const result: Result = { cniVersion, interfaces: [{ name: LO, mac: LOOPBACK_MAC, sandbox: netns }] };
  if (ips.length) result.ips = ips;
  return result;
}

function add(req: Request<LoopbackConf>): Result {
  const addrs = withNetns(req.netns, () => {
    setLoopbackUp();
    return pickAddresses(loopbackAddrs());
  });
  if (req.prevResult) return req.prevResult;
  // Handlers return the current (1.1.0) shape; the SDK converts it to the config's version.
  return loopbackResult(CURRENT_VERSION, req.netns, addrs);
}

function del(req: Request<LoopbackConf>): void {
  if (!req.netns) return;
  try {
    withNetns(req.netns, () => setLoopbackDown());
  } catch (err) {
    // missing, or the empty file left by an unmounted bind mount (the rule lives in @cnikit/netlink)
    if (isNetnsGoneForDel(err, req.netns)) return;
    throw err;
  }
}

/** The addresses a result puts on `lo` of `netns` (its `ips` whose `interface` index names lo there), canonical. */
export function resultLoopbackAddrs(result: Result | undefined, netns: string): string[] {
  if (!result) return [];
  const ifaces = result.interfaces ?? [];
  const out: string[] = [];
  for (const ip of result.ips ?? []) {
    if (ip.interface === undefined) continue;
    const i = ifaces[ip.interface];
    if (!i || i.name !== LO || (i.sandbox !== undefined && i.sandbox !== netns)) continue;
    out.push(canonicalCIDR(ip.address) ?? ip.address);
  }
  return out;
}

function check(req: Request<LoopbackConf>): void {
  withNetns(req.netns, () => {
    if (!loopbackIsUp()) throw new CniError(ErrorCode.Internal, 'loopback interface is down');
    const want = resultLoopbackAddrs(req.prevResult, req.netns);
    if (!want.length) return;
    const have = new Set(
      loopbackAddrs().map((a) => canonicalCIDR(`${a.ip}/${a.prefixLen}`) ?? `${a.ip}/${a.prefixLen}`),
    );
    const missing = want.filter((a) => !have.has(a));
    if (missing.length)
      throw new CniError(
        ErrorCode.Internal,
        `loopback interface lacks address ${missing.join(', ')} of prevResult`,
        `addresses on lo: ${[...have].join(', ') || 'none'}`,
      );
  });
}

export const plugin: Plugin<LoopbackConf> = {
  name: 'loopback',
  ipam: false,
  about: `CNI loopback plugin cnikit ${CNIKIT_VERSION}`,
  conf: parseConf,
  add,
  del,
  check,
};
