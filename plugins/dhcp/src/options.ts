/**
 * The plugin's configuration (`ipam.daemonSocketPath`, `provide`, `request`, `priority`), the DHCP options it turns
 * into (the reference's prepareOptions), and the CNI result built from a DHCPACK (the reference's IPNet, Gateway and
 * Routes, plus DNS). Pure: unit-tested without a server.
 */
import { CniError, type DNS, ErrorCode, type Result, type Route } from '@cnikit/skel';
import {
  type DhcpMessage,
  decodeClasslessRoutes,
  decodeDomainSearch,
  decodeStaticRoutes,
  maskToPrefix,
  Opt,
  optIp,
  optIps,
  optString,
} from './packet.ts';

export const DEFAULT_SOCKET_PATH = '/run/cni/dhcp.sock';

/** The reference's option names (dhcp-options(5) spelling); anything else must be a number 0-255. */
export const OPTION_NAMES: Readonly<Record<string, number>> = {
  'dhcp-client-identifier': Opt.CLIENT_ID,
  'subnet-mask': Opt.SUBNET_MASK,
  routers: Opt.ROUTER,
  'host-name': Opt.HOST_NAME,
  'user-class': Opt.USER_CLASS,
  'vendor-class-identifier': Opt.CLASS_ID,
};

/** The reference requests router and subnet mask; cnikit also asks for DNS servers, domain, search list and option 121. */
export const DEFAULT_REQUESTED = [
  Opt.ROUTER,
  Opt.SUBNET_MASK,
  Opt.DNS,
  Opt.DOMAIN_NAME,
  Opt.DOMAIN_SEARCH,
  Opt.CLASSLESS_ROUTES,
];

/**
 * Options the client itself puts in each message, by RFC 2131/2132 and the message's state: they cannot be
 * provided (a provided value would replace the client's — a DHCPDISCOVER sent as another message type, a server
 * identifier or requested address in a renewal, where RFC 2131 forbids them — and the exchange would only fail at
 * the acquisition timeout). The client identifier (61) stays providable, as in the reference.
 */
export const CLIENT_OWNED_OPTIONS: Readonly<Record<number, string>> = {
  [Opt.PAD]: 'pad: a single byte without length, not an option with a value',
  [Opt.REQUESTED_IP]:
    'requested IP address: the client sends the offered (or held) address where RFC 2131 allows it',
  [Opt.OVERLOAD]: "option overload: the layout of the message is the encoder's",
  [Opt.MESSAGE_TYPE]: 'DHCP message type: DISCOVER, REQUEST and RELEASE are chosen by the client',
  [Opt.SERVER_ID]: "server identifier: the client sends the offering server's where RFC 2131 requires it",
  [Opt.PARAMETER_REQUEST_LIST]: 'parameter request list: set it with ipam.request',
  [Opt.MAX_MESSAGE_SIZE]: "maximum DHCP message size: what the client can receive is the client's",
  [Opt.END]: 'end: a single byte without length, not an option with a value',
};

export interface ProvideOption {
  option: string;
  value?: string;
  fromArg?: string;
}

export interface RequestOption {
  skipDefault?: boolean;
  option?: string;
}

export interface DhcpIpamConfig {
  daemonSocketPath: string;
  provide: ProvideOption[];
  request: RequestOption[];
  priority: number;
}

function configError(msg: string): CniError {
  return new CniError(ErrorCode.InvalidNetworkConfig, msg);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function str(v: unknown, what: string): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw configError(`${what} must be a string, got ${JSON.stringify(v)}`);
  return v;
}

/** Reads `ipam` of the network config (every key optional, as in the reference). */
export function readIpamConfig(config: Record<string, unknown>): DhcpIpamConfig {
  const ipam = config.ipam;
  if (ipam !== undefined && !isObject(ipam)) throw configError('ipam must be an object');
  const i = (ipam ?? {}) as Record<string, unknown>;
  const daemonSocketPath = str(i.daemonSocketPath, 'ipam.daemonSocketPath') || DEFAULT_SOCKET_PATH;
  const list = (v: unknown, what: string): Record<string, unknown>[] => {
    if (v === undefined || v === null) return [];
    if (!Array.isArray(v) || !v.every(isObject)) throw configError(`${what} must be a list of objects`);
    return v as Record<string, unknown>[];
  };
  const provide = list(i.provide, 'ipam.provide').map((p, n) => ({
    option: str(p.option, `ipam.provide[${n}].option`) ?? '',
    value: str(p.value, `ipam.provide[${n}].value`),
    fromArg: str(p.fromArg, `ipam.provide[${n}].fromArg`),
  }));
  const request = list(i.request, 'ipam.request').map((r, n) => {
    if (r.skipDefault !== undefined && typeof r.skipDefault !== 'boolean')
      throw configError(`ipam.request[${n}].skipDefault must be a boolean`);
    return { skipDefault: r.skipDefault === true, option: str(r.option, `ipam.request[${n}].option`) };
  });
  const priority = i.priority ?? 0;
  if (typeof priority !== 'number' || !Number.isInteger(priority))
    throw configError(`ipam.priority must be an integer, got ${JSON.stringify(i.priority)}`);
  return { daemonSocketPath, provide, request, priority };
}

/** An option name or number; the reference's wording on failure. */
export function parseOptionName(option: string): number {
  const named = OPTION_NAMES[option];
  if (named !== undefined) return named;
  if (/^\d+$/.test(option) && Number(option) <= 255) return Number(option);
  const why = /^\d+$/.test(option) ? 'value out of range' : 'invalid syntax';
  throw configError(
    `Can not parse option ${JSON.stringify(option)}: Can not parse option: strconv.ParseUint: parsing ${JSON.stringify(option)}: ${why}`,
  );
}

/** CNI_ARGS as the reference splits them: `;`-separated `K=V` pairs (a pair without `=` is ignored). */
export function parseCniArgs(args: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const pair of args.split(';')) {
    const eq = pair.indexOf('=');
    if (eq >= 0) out.set(pair.slice(0, eq), pair.slice(eq + 1));
  }
  return out;
}

export interface PreparedOptions {
  /** Options sent in every request, in order (a later one of the same code replaces an earlier one). */
  provide: Array<[number, string]>;
  /** Parameter request list (option 55); empty means none is sent. */
  request: number[];
}

/**
 * The option code of each `provide` entry; a name that does not parse, or an option the client owns, is a
 * configuration error (the dhcp plugin's ADD decoder runs it, so a delegating plugin sees it before its first change).
 */
export function providedCodes(conf: DhcpIpamConfig): number[] {
  return conf.provide.map((p, n) => {
    const code = parseOptionName(p.option);
    const owned = CLIENT_OWNED_OPTIONS[code];
    if (owned !== undefined)
      throw configError(
        `ipam.provide[${n}]: option ${JSON.stringify(p.option)} cannot be provided: option ${code} is the DHCP client's own (${owned})`,
      );
    return code;
  });
}

/** The reference's prepareOptions: provided values (from config or CNI_ARGS) and the parameter request list. */
export function prepareOptions(conf: DhcpIpamConfig, cniArgs: string): PreparedOptions {
  const args = parseCniArgs(cniArgs);
  const provide: Array<[number, string]> = [];
  const codes = providedCodes(conf);
  for (const [n, p] of conf.provide.entries()) {
    const code = codes[n]!;
    if (p.value) {
      if (Buffer.byteLength(p.value) > 255)
        throw configError(
          `value too long for option ${JSON.stringify(p.option)}: ${JSON.stringify(p.value)}`,
        );
      provide.push([code, p.value]);
    }
    const fromArg = p.fromArg !== undefined ? args.get(p.fromArg) : undefined;
    if (fromArg !== undefined) {
      if (Buffer.byteLength(fromArg) > 255)
        throw configError(
          `value too long for option ${JSON.stringify(p.option)} from CNI_ARGS ${JSON.stringify(p.fromArg)}: ${JSON.stringify(fromArg)}`,
        );
      provide.push([code, fromArg]);
    }
  }
  const request: number[] = [];
  let skipDefault = false;
  for (const r of conf.request) {
    if (r.skipDefault) skipDefault = true;
    if (!r.option) continue;
    const code = parseOptionName(r.option);
    if (!request.includes(code)) request.push(code);
  }
  if (!skipDefault) for (const code of DEFAULT_REQUESTED) if (!request.includes(code)) request.push(code);
  return { provide, request };
}

/** The reference's client ID: `<containerID>/<network name>/<ifName>`, cut at 254 bytes. */
export function generateClientId(containerId: string, netName: string, ifName: string): string {
  const id = `${containerId}/${netName}/${ifName}`;
  return id.length > 254 ? id.slice(0, 254) : id;
}

/** The CNI result of a DHCPACK: address, gateway, routes (RFC 3442 rules), DNS. Throws without a subnet mask. */
export function resultFromAck(ack: DhcpMessage, priority: number): Result {
  const mask = optIp(ack, Opt.SUBNET_MASK);
  if (!mask) throw new CniError(ErrorCode.Internal, 'DHCP option Subnet Mask not found in DHCPACK');
  const prefix = maskToPrefix(mask);
  if (prefix === undefined)
    throw new CniError(ErrorCode.Internal, `DHCP option Subnet Mask ${mask} is not contiguous`);
  const gateway = optIp(ack, Opt.ROUTER);
  const routes: Route[] = [];
  const classless = ack.options.get(Opt.CLASSLESS_ROUTES);
  const opt121 = classless ? decodeClasslessRoutes(classless) : [];
  if (opt121.length > 0) {
    // RFC 3442: with option 121, option 33 and the router option are ignored for routes
    for (const r of opt121) {
      if (r.gw === '0.0.0.0') routes.push({ dst: r.dst, gw: r.gw, scope: 253 });
      else routes.push({ dst: r.dst, gw: r.gw });
    }
  } else {
    const stat = ack.options.get(Opt.STATIC_ROUTES);
    if (stat) for (const r of decodeStaticRoutes(stat)) routes.push({ dst: r.dst, gw: r.gw });
    if (gateway) routes.push({ dst: '0.0.0.0/0', gw: gateway });
  }
  if (priority !== 0) for (const r of routes) r.priority = priority;
  const result: Result = {
    cniVersion: '1.1.0',
    ips: [{ address: `${ack.yiaddr}/${prefix}`, ...(gateway ? { gateway } : {}) }],
    routes,
  };
  const dns: DNS = {};
  const servers = optIps(ack, Opt.DNS);
  if (servers.length) dns.nameservers = servers;
  const domain = optString(ack, Opt.DOMAIN_NAME);
  if (domain) dns.domain = domain;
  const search = ack.options.get(Opt.DOMAIN_SEARCH);
  if (search) {
    const names = decodeDomainSearch(search);
    if (names.length) dns.search = names;
  }
  if (Object.keys(dns).length) result.dns = dns;
  return result;
}
