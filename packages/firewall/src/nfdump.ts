/**
 * Test/diagnostic seam: the raw nf_tables objects (tables, chains, rules) of the `ip`/`ip6` families in the calling
 * thread's namespace, as canonical text — every attribute in hex, nested ones expanded — with the kernel-assigned
 * parts (handles, positions, counters' values, chain use counts) left out. Two rulesets made by different writers
 * print the same only when the kernel holds the same objects, byte for byte.
 */

import {
  NLM_F_DUMP,
  NLM_F_REQUEST,
  NLMSG_DONE,
  NLMSG_ERROR,
  NlBuilder,
  parseMessages,
} from '@cnikit/netlink/wire';
import { NETLINK_NETFILTER, NetlinkSocket } from '@cnikit/sys';

const NFT = 10 << 8;
const GET = { table: 1, chain: 4, rule: 7 } as const;

function dumpAll(sock: NetlinkSocket, msg: number, family: number): Buffer[] {
  const seq = (Math.random() * 0xffffffff) >>> 0;
  sock.send(new NlBuilder(NFT | msg, NLM_F_REQUEST | NLM_F_DUMP, 32).u8(family).u8(0).u16(0).finish(seq));
  const out: Buffer[] = [];
  for (;;) {
    const buf = sock.recv(2000);
    if (!buf) throw new Error('nfdump: no answer');
    for (const m of parseMessages(buf)) {
      if (m.seq !== seq) continue;
      if (m.type === NLMSG_DONE) return out;
      if (m.type === NLMSG_ERROR) throw new Error(`nfdump: error ${-m.payload.readInt32LE(0)}`);
      out.push(Buffer.from(m.payload.subarray(4)));
    }
  }
}

type Shape = { [type: number]: Shape | 'skip' | 'hex' };
// nested attributes are expanded (expression lists and their data); left out are what the kernel assigns: handles
// (table 4, chain 2, rule 3), a rule's position (6, the previous rule's handle) and a chain's counters (8)
const EXPR: Shape = { 1: 'hex', 2: {} };
const RULE: Shape = { 3: 'skip', 4: { 1: EXPR }, 6: 'skip' };
const CHAIN: Shape = { 2: 'skip', 4: { 1: 'hex', 2: 'hex' }, 8: 'skip' };
const TABLE: Shape = { 4: 'skip' };

function walk(buf: Buffer, shape: Shape, indent: string, out: string[]): void {
  let off = 0;
  while (off + 4 <= buf.length) {
    const len = buf.readUInt16LE(off);
    if (len < 4 || off + len > buf.length) break;
    const type = buf.readUInt16LE(off + 2);
    const t = type & 0x3fff;
    const data = buf.subarray(off + 4, off + len);
    const s = shape[t] ?? 'hex';
    if (s === 'skip') {
    } else if (s === 'hex') out.push(`${indent}${type.toString(16)}: ${data.toString('hex')}`);
    else {
      out.push(`${indent}${type.toString(16)}:`);
      walk(data, s, `${indent}  `, out);
    }
    off += (len + 3) & ~3;
  }
}

/** The ip and ip6 rulesets of the calling thread's namespace, canonical (see above). */
export function nfDump(families: readonly number[] = [2, 10]): string {
  const sock = NetlinkSocket.open(NETLINK_NETFILTER, { receiveBufferSize: 1 << 20 });
  try {
    const out: string[] = [];
    for (const f of families) {
      for (const [what, shape] of [
        ['table', TABLE],
        ['chain', CHAIN],
        ['rule', RULE],
      ] as const) {
        for (const m of dumpAll(sock, GET[what], f)) {
          out.push(`${f} ${what}`);
          walk(m, shape, '  ', out);
        }
      }
    }
    return `${out.join('\n')}\n`;
  } finally {
    sock.close();
  }
}
