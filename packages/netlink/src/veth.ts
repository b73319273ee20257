/** Go's pkg/ip veth helpers: SetupVeth's creation with a random peer name, DelLinkByNameAddr. */
import { type CIDR, formatCIDR, isGlobalUnicast, parseCIDR } from '@cnikit/ip';
import { SysError } from '@cnikit/sys';
import { listAddrs } from './addr.ts';
import { fail } from './helper-errors.ts';
import { createVethPair, deleteLink, getLink, type Link } from './link.ts';
import { randomVethName } from './names.ts';
import { withNetns } from './netns.ts';
import { isNotFoundError } from './rtnl.ts';

/** `err` (or one of its causes) carries errno code `code` ('EEXIST', 'EADDRNOTAVAIL', …). */
export function hasErrno(err: unknown, code: string): boolean {
  for (let e = err, depth = 0; e && depth < 6; e = (e as { cause?: unknown }).cause, depth++) {
    if ((e as { code?: unknown }).code === code) return true;
  }
  return false;
}

/**
 * `ip.SetupVeth` (creation part): a veth pair `name` ↔ random `veth…`, the peer placed directly into
 * the namespace open on `peerNsFd` (or here when undefined) in one RTM_NEWLINK. Retries on name
 * collisions. Returns the peer name.
 */
export function createVethWithRandomPeer(
  name: string,
  mtu: number,
  mac: string,
  peerNsFd: number | undefined,
): { peer: string; link: Link } {
  for (let i = 0; i < 10; i++) {
    const peer = randomVethName();
    try {
      const link = createVethPair({
        name,
        peerName: peer,
        peerNetnsFd: peerNsFd,
        mtu: mtu > 0 ? mtu : undefined,
        peerMtu: mtu > 0 ? mtu : undefined,
        mac: mac || undefined,
      });
      return { peer, link };
    } catch (err) {
      if (hasErrno(err, 'EEXIST')) {
        // which name clashed? retry with a new peer name only if the peer exists
        let peerExists = false;
        if (peerNsFd === undefined) peerExists = getLink(peer) !== undefined;
        else peerExists = withNetns(`/proc/self/fd/${peerNsFd}`, () => getLink(peer) !== undefined);
        if (peerExists) continue;
        throw fail(
          `container veth name (${JSON.stringify(name)}) peer provided (${JSON.stringify(peer)}) already exists`,
          err,
        );
      }
      throw fail(`failed to make veth pair: ${SysError.reasonOf(err)}`, err);
    }
  }
  throw fail('failed to find a unique veth name');
}

/** `ip.DelLinkByNameAddr`: the link's global-unicast addresses, then delete it; [] when absent. */
export function delLinkByNameAddr(name: string): string[] {
  const l = getLink(name);
  if (!l) return [];
  const addrs = listAddrs({ link: name })
    .map((a) => parseCIDR(a.cidr))
    .filter((a): a is CIDR => a !== undefined && isGlobalUnicast(a.ip))
    .map(formatCIDR);
  try {
    deleteLink(name);
  } catch (err) {
    if (!isNotFoundError(err))
      throw fail(`failed to delete ${JSON.stringify(name)}: ${SysError.reasonOf(err)}`, err);
  }
  return addrs;
}
