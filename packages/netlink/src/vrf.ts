// VRF devices (kind "vrf", IFLA_VRF_TABLE in IFLA_INFO_DATA): creation and listing with their routing tables.
import { decodeLink, getLinkOrThrow, type Link } from './link.ts';
import {
  AF_UNSPEC,
  attrNested,
  attrStr,
  attrU32,
  IFLA_IFNAME,
  IFLA_INFO_DATA,
  IFLA_INFO_KIND,
  IFLA_LINKINFO,
  NLM_F_ACK,
  NLM_F_CREATE,
  NLM_F_DUMP,
  NLM_F_EXCL,
  NLM_F_REQUEST,
  NlBuilder,
  type NlMessage,
  parseAttrs,
  RTM_GETLINK,
  RTM_NEWLINK,
} from './nl.ts';
import { invalidArgument, rtDump, rtRequest, withSocket } from './rtnl.ts';

const IFLA_VRF_TABLE = 1;

export interface Vrf extends Link {
  /** The routing table the VRF's routes live in (IFLA_VRF_TABLE). */
  table: number;
}

/** The RTM_NEWLINK message of a VRF device (exported for byte-level tests). */
export function buildVrf(name: string, table: number): NlBuilder {
  if (!Number.isInteger(table) || table <= 0 || table > 0xffffffff)
    throw invalidArgument(`failed to create VRF ${name}`, `invalid routing table ${table}`);
  return new NlBuilder(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL)
    .ifinfo(AF_UNSPEC, 0)
    .attrStr(IFLA_IFNAME, name)
    .begin(IFLA_LINKINFO)
    .attrStr(IFLA_INFO_KIND, 'vrf', false)
    .begin(IFLA_INFO_DATA)
    .attrU32(IFLA_VRF_TABLE, table)
    .end()
    .end();
}

/** Creates a VRF device bound to `table` (EEXIST when the name is taken; EOPNOTSUPP without the vrf module). */
export function createVrf(name: string, table: number): Vrf {
  const op = `failed to create VRF ${name}`;
  return withSocket(() => {
    rtRequest(buildVrf(name, table), op);
    return { ...getLinkOrThrow(name), table };
  }, op);
}

function decodeVrf(m: NlMessage): Vrf | undefined {
  const info = attrNested(parseAttrs(m.payload, 16), IFLA_LINKINFO);
  if (!info || attrStr(info, IFLA_INFO_KIND) !== 'vrf') return undefined;
  const data = attrNested(info, IFLA_INFO_DATA);
  return { ...decodeLink(m), table: (data && attrU32(data, IFLA_VRF_TABLE)) ?? 0 };
}

/** Every VRF device of the current namespace. */
export function listVrfs(): Vrf[] {
  const b = new NlBuilder(RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP).ifinfo(AF_UNSPEC, 0);
  return rtDump(b, 'failed to list links')
    .filter((m) => m.type === RTM_NEWLINK)
    .map(decodeVrf)
    .filter((v): v is Vrf => v !== undefined);
}
