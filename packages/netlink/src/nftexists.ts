// Cheap existence checks for nftables objects (one nfnetlink GET, no `nft` process): lets teardown code skip
// the tool executions (iptables-save, nft list: 5–30 ms each) when nothing of its own can exist.
import { NETLINK_NETFILTER, NetlinkSocket } from '@cnikit/sys';

const NFNL_SUBSYS_NFTABLES = 10;
const NFT_MSG_GETTABLE = 1;
const NFT_MSG_GETCHAIN = 4;
const NFTA_TABLE_NAME = 1;
const NFTA_CHAIN_TABLE = 1;
const NFTA_CHAIN_NAME = 3;
const NLM_F_REQUEST = 0x1;
const NLM_F_ACK = 0x4;
const NLMSG_ERROR = 2;
const ENOENT = 2;

/** nftables address families (NFPROTO_*). */
export const NFPROTO = { inet: 1, ip: 2, arp: 3, netdev: 5, bridge: 7, ip6: 10 } as const;
export type NftFamily = keyof typeof NFPROTO;

function strAttr(type: number, value: string): Buffer {
  const data = Buffer.from(`${value}\0`, 'utf8');
  const len = 4 + data.length;
  const out = Buffer.alloc((len + 3) & ~3);
  out.writeUInt16LE(len, 0);
  out.writeUInt16LE(type, 2);
  data.copy(out, 4);
  return out;
}

/** The request bytes (exported for tests). */
export function nftGetRequest(
  family: NftFamily,
  table: string,
  chain: string | undefined,
  seq: number,
): Buffer {
  const attrs = chain
    ? [strAttr(NFTA_CHAIN_TABLE, table), strAttr(NFTA_CHAIN_NAME, chain)]
    : [strAttr(NFTA_TABLE_NAME, table)];
  const body = Buffer.concat([Buffer.from([NFPROTO[family], 0, 0, 0]), ...attrs]);
  const hdr = Buffer.alloc(16);
  hdr.writeUInt32LE(16 + body.length, 0);
  hdr.writeUInt16LE((NFNL_SUBSYS_NFTABLES << 8) | (chain ? NFT_MSG_GETCHAIN : NFT_MSG_GETTABLE), 4);
  hdr.writeUInt16LE(NLM_F_REQUEST | NLM_F_ACK, 6);
  hdr.writeUInt32LE(seq >>> 0, 8);
  return Buffer.concat([hdr, body]);
}

/**
 * Whether the nftables table `family table` (or the chain `chain` in it) exists in the calling thread's
 * network namespace: true / false, or undefined when the kernel does not say (nf_tables missing, no
 * permission, timeout): callers then fall back to their full path.
 */
export function nftExists(family: NftFamily, table: string, chain?: string): boolean | undefined {
  let sock: NetlinkSocket;
  try {
    sock = NetlinkSocket.open(NETLINK_NETFILTER, { receiveBufferSize: 0 });
  } catch {
    return undefined;
  }
  try {
    const seq = (Date.now() ^ (process.pid << 8)) >>> 0;
    sock.send(nftGetRequest(family, table, chain, seq));
    let found = false;
    for (;;) {
      const buf = sock.recv(2000);
      if (!buf) return undefined;
      for (let off = 0; off + 16 <= buf.length; ) {
        const len = buf.readUInt32LE(off);
        if (len < 16 || off + len > buf.length) return undefined;
        const type = buf.readUInt16LE(off + 4);
        if (buf.readUInt32LE(off + 8) === seq) {
          if (type === NLMSG_ERROR) {
            const err = -buf.readInt32LE(off + 16);
            if (err === 0) return found || undefined;
            return err === ENOENT ? false : undefined;
          }
          found = true; // NFT_MSG_NEWTABLE / NEWCHAIN: the object exists; the ACK follows
        }
        off += (len + 3) & ~3;
      }
    }
  } catch {
    return undefined;
  } finally {
    sock.close();
  }
}
