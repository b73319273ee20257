// Cheap existence checks for nftables objects (one nfnetlink GET, no `nft` process) and legacy x_tables tables
// (one /proc read): let teardown code skip the tool executions (iptables-save, nft list), each a process start,
// when nothing of its own can exist.
import { readFileSync } from 'node:fs';
import { NETLINK_NETFILTER, NetlinkSocket } from '@cnikit/sys';
import { closeAfterTask } from './nfclose.ts';
import { NLM_F_ACK, NLM_F_REQUEST, NLMSG_ERROR, NlBuilder, parseMessages } from './nl.ts';

const NFNL_SUBSYS_NFTABLES = 10;
const NFT_MSG_GETTABLE = 1;
const NFT_MSG_GETCHAIN = 4;
const NFTA_TABLE_NAME = 1;
const NFTA_CHAIN_TABLE = 1;
const NFTA_CHAIN_NAME = 3;
const ENOENT = 2;

/** nftables address families (NFPROTO_*). */
export const NFPROTO = { inet: 1, ip: 2, arp: 3, netdev: 5, bridge: 7, ip6: 10 } as const;
export type NftFamily = keyof typeof NFPROTO;

/** The request bytes (exported for tests). */
export function nftGetRequest(
  family: NftFamily,
  table: string,
  chain: string | undefined,
  seq: number,
): Buffer {
  const type = (NFNL_SUBSYS_NFTABLES << 8) | (chain ? NFT_MSG_GETCHAIN : NFT_MSG_GETTABLE);
  // struct nfgenmsg: family, version 0, res_id 0
  const b = new NlBuilder(type, NLM_F_REQUEST | NLM_F_ACK, 64).u8(NFPROTO[family]).u8(0).u16(0);
  if (chain) b.attrStr(NFTA_CHAIN_TABLE, table).attrStr(NFTA_CHAIN_NAME, chain);
  else b.attrStr(NFTA_TABLE_NAME, table);
  return b.finish(seq);
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
      for (const m of parseMessages(buf)) {
        if (m.seq !== seq) continue;
        if (m.type === NLMSG_ERROR) {
          const err = -m.payload.readInt32LE(0);
          if (err === 0) return found || undefined;
          return err === ENOENT ? false : undefined;
        }
        found = true; // NFT_MSG_NEWTABLE / NEWCHAIN: the object exists; the ACK follows
      }
    }
  } catch {
    return undefined;
  } finally {
    // after a commit (ours or another process's) the first close of an nfnetlink socket waits for the kernel to
    // free the transaction's objects: not on the caller's path (nfclose.ts)
    closeAfterTask(sock);
  }
}

/**
 * Whether the legacy x_tables table `table` (e.g. 'nat') of IPv`family` is loaded in the calling thread's network
 * namespace, from /proc/thread-self/net/ip{,6}_tables_names: true / false (false also when the x_tables module of
 * that family is not loaded at all), or undefined when the file cannot be read for another reason.
 * iptables-nft tables are not x_tables tables: check those with nftExists('ip' | 'ip6', …).
 */
export function xtablesTableLoaded(family: 4 | 6, table: string): boolean | undefined {
  let names: string;
  try {
    names = readFileSync(`/proc/thread-self/net/ip${family === 6 ? '6' : ''}_tables_names`, 'utf8');
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ENOENT' ? false : undefined;
  }
  return names.split('\n').includes(table);
}
