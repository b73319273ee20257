/**
 * sbr configuration (reference: plugins/meta/sbr main.go PluginConf): `table`, `gateways`, `addSourceHints`, and the
 * selection of the IP configurations that belong to the interface. Pure.
 */
import { parseIP } from '@cnikit/ip';
import { CniError, decode, ErrorCode, type Infer, type IPConfig, type Result, s } from '@cnikit/skel';

const confSchema = s.object({
  // a routing table id is a uint32 (FRA_TABLE): out of range is a configuration error (code 7), not a netlink one
  table: s.int({ min: 0, max: 0xffffffff }).optional(),
  gateways: s.array(s.string()).optional(),
  addSourceHints: s.bool().default(false),
});

export type SbrConf = Infer<typeof confSchema>;

function fail(msg: string): CniError {
  return new CniError(ErrorCode.Internal, msg);
}

/** The reference's parseConfig: a decoding error keeps its prefix; prevResult is parsed by the SDK. */
export function parseConf(config: Record<string, unknown>): SbrConf {
  try {
    return decode(confSchema, config);
  } catch (err) {
    const e = CniError.from(err);
    throw new CniError(e.code, `failed to parse network configuration: ${e.msg}`, e.details, { cause: err });
  }
}

/**
 * A configured `table` an ADD can use. 0 is RT_TABLE_UNSPEC (the kernel refuses a rule to it) and 255 the local
 * table (looked up first by the priority-0 rule anyway): neither can hold the interface's routes, so ADD says so
 * before it changes anything (the reference fails later, or adds a useless rule). DEL does not ask: it removes only
 * rules whose source is an address of the interface, whatever the table, and an attachment made by an earlier
 * version must still be deletable.
 */
export function checkTable(table: number | undefined): void {
  const why =
    table === 0
      ? '0 is not a routing table (RT_TABLE_UNSPEC)'
      : table === 255
        ? "255 is the kernel's local table"
        : undefined;
  if (why)
    throw new CniError(
      ErrorCode.InvalidNetworkConfig,
      `failed to parse network configuration: table: ${why}: use 1-252 or 256 and above`,
    );
}

export interface StaticGateways {
  v4?: string;
  v6?: string;
}

/**
 * The static gateways (one per family at most), with the reference's messages. Like the reference, they are only
 * looked at when no `table` is configured.
 */
export function staticGateways(list: readonly string[] | undefined): StaticGateways {
  const out: StaticGateways = {};
  if (!list) return out;
  if (list.length > 2) throw fail('gateways list cannot contain more than 2 entries (one IPv4, one IPv6)');
  for (const gw of list) {
    const ip = parseIP(gw);
    if (!ip) throw fail(`invalid static gateway IP address: ${gw}`);
    const key = ip.family === 4 ? 'v4' : 'v6';
    const had = out[key];
    if (had !== undefined)
      throw fail(`gateways list contains multiple IPv${ip.family === 4 ? 4 : 6} addresses: ${had} and ${gw}`);
    out[key] = gw;
  }
  return out;
}

/**
 * The IP configurations of prevResult that belong to `ifName` (the reference's getIPCfgs): those without an
 * interface index, or whose index is out of range, or whose interface has that name.
 */
export function ipConfigsFor(ifName: string, prev: Result): IPConfig[] {
  const ips = prev.ips ?? [];
  if (ips.length === 0) throw fail(`No IP addresses supplied on interface: ${ifName}`);
  return ips.filter((ip) => {
    const i = ip.interface;
    if (i === undefined || i === null) return true;
    const iface = i >= 0 ? prev.interfaces?.[i] : undefined;
    return iface === undefined || iface.name === ifName;
  });
}
