// Conntrack entries over nfnetlink (NETLINK_NETFILTER, subsystem ctnetlink): what the `conntrack` tool and Go's
// netlink.ConntrackDeleteFilters do, without a process. Used by portmap to flush stale UDP flows of a host port.
import { NETLINK_NETFILTER, NetlinkSocket } from '@cnikit/sys';
import {
  AF_INET,
  AF_INET6,
  attrU8,
  NLA_F_NESTED,
  NLM_F_ACK,
  NLM_F_DUMP,
  NLM_F_REQUEST,
  NLMSG_DONE,
  NLMSG_ERROR,
  NlBuilder,
  parseAttrs,
  parseMessages,
} from './nl.ts';
import { NetlinkError } from './rtnl.ts';

const NFNL_SUBSYS_CTNETLINK = 1;
const IPCTNL_MSG_CT_NEW = 0;
const IPCTNL_MSG_CT_GET = 1;
const IPCTNL_MSG_CT_DELETE = 2;
const CTA_TUPLE_ORIG = 1;
const CTA_TUPLE_PROTO = 2;
const CTA_PROTO_NUM = 1;
const CTA_PROTO_DST_PORT = 3;
const CTA_ZONE = 18;
const ENOENT = 2;

export const IPPROTO_TCP = 6;
export const IPPROTO_UDP = 17;

function ctType(msg: number): number {
  return (NFNL_SUBSYS_CTNETLINK << 8) | msg;
}

/** The dump request for one family (exported for tests). */
export function conntrackDumpRequest(family: 4 | 6, seq: number): Buffer {
  return new NlBuilder(ctType(IPCTNL_MSG_CT_GET), NLM_F_REQUEST | NLM_F_DUMP, 32)
    .u8(family === 4 ? AF_INET : AF_INET6)
    .u8(0)
    .u16(0)
    .finish(seq);
}

/** A delete request for one entry, given its original tuple (and zone) as the kernel reported them. */
export function conntrackDeleteRequest(
  family: 4 | 6,
  origTuple: Uint8Array,
  zone: Uint8Array | undefined,
  seq: number,
): Buffer {
  const b = new NlBuilder(ctType(IPCTNL_MSG_CT_DELETE), NLM_F_REQUEST | NLM_F_ACK, 128)
    .u8(family === 4 ? AF_INET : AF_INET6)
    .u8(0)
    .u16(0)
    .attr(CTA_TUPLE_ORIG | NLA_F_NESTED, origTuple);
  if (zone) b.attr(CTA_ZONE, zone);
  return b.finish(seq);
}

function collect(
  sock: NetlinkSocket,
  seq: number,
  op: string,
  onMsg: (payload: Buffer, type: number) => void,
): void {
  for (;;) {
    const buf = sock.recv(5000);
    if (!buf) throw new NetlinkError(110, op, { reason: 'the kernel did not answer in time' });
    for (const m of parseMessages(buf)) {
      if (m.seq !== seq) continue;
      if (m.type === NLMSG_DONE) return;
      if (m.type === NLMSG_ERROR) {
        const err = -m.payload.readInt32LE(0);
        if (err === 0) return;
        throw new NetlinkError(err, op);
      }
      onMsg(m.payload, m.type);
    }
  }
}

/**
 * Delete every conntrack entry of `family` whose original tuple has protocol `proto` and destination port `port`
 * (Go's utils.DeleteConntrackEntriesForDstPort). One dump, then one delete per match; an entry that expired in
 * between is fine. Returns the number deleted. Runs in the calling thread's network namespace.
 */
export function deleteConntrackByDstPort(family: 4 | 6, proto: number, port: number): number {
  const op = `failed to delete conntrack entries for ${proto === IPPROTO_UDP ? 'udp' : proto} port ${port}`;
  const sock = NetlinkSocket.open(NETLINK_NETFILTER, { receiveBufferSize: 1 << 20 });
  try {
    let seq = (Date.now() ^ (process.pid << 10)) >>> 0;
    sock.send(conntrackDumpRequest(family, seq));
    const victims: Array<{ tuple: Buffer; zone: Buffer | undefined }> = [];
    collect(sock, seq, op, (p, type) => {
      if ((type & 0xff) !== IPCTNL_MSG_CT_NEW) return;
      const a = parseAttrs(p, 4);
      const orig = a.get(CTA_TUPLE_ORIG);
      if (!orig) return;
      const protoAttrs = parseAttrs(parseAttrs(orig).get(CTA_TUPLE_PROTO) ?? Buffer.alloc(0));
      const dport = protoAttrs.get(CTA_PROTO_DST_PORT);
      if (attrU8(protoAttrs, CTA_PROTO_NUM) !== proto || !dport || dport.readUInt16BE(0) !== port) return;
      victims.push({
        tuple: Buffer.from(orig),
        zone: a.get(CTA_ZONE) && Buffer.from(a.get(CTA_ZONE) as Buffer),
      });
    });
    let deleted = 0;
    for (const v of victims) {
      seq = (seq + 1) >>> 0;
      sock.send(conntrackDeleteRequest(family, v.tuple, v.zone, seq));
      try {
        collect(sock, seq, op, () => {});
        deleted++;
      } catch (err) {
        if ((err as NetlinkError).errno !== ENOENT) throw err;
      }
    }
    return deleted;
  } finally {
    sock.close();
  }
}
