/**
 * The kernel operations loopback needs, on `lo` of the calling thread's namespace (call inside withNetns),
 * through @cnikit/netlink (rtnetlink; no external tools).
 */
import { getLinkOrThrow, listAddrs, setLinkDown, setLinkUp } from '@cnikit/netlink';

export interface LoopbackAddr {
  family: 4 | 6;
  ip: string;
  prefixLen: number;
}

const LO = 'lo';

export function setLoopbackUp(): void {
  setLinkUp(getLinkOrThrow(LO));
}

export function setLoopbackDown(): void {
  setLinkDown(getLinkOrThrow(LO));
}

export function loopbackIsUp(): boolean {
  return getLinkOrThrow(LO).up;
}

/** v4 addresses first, then v6, each in kernel order (the reference lists the families separately). */
export function loopbackAddrs(): LoopbackAddr[] {
  const link = getLinkOrThrow(LO);
  const out: LoopbackAddr[] = [];
  for (const family of [4, 6] as const) {
    for (const a of listAddrs({ link, family })) out.push({ family, ip: a.ip, prefixLen: a.prefix });
  }
  return out;
}
