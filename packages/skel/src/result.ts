/**
 * Result parsing, normalisation, conversion between every spec version and Go-identical printing
 * (spec §1, §12). Three shapes ("families"): 020 (0.1.0, 0.2.0), 040 (0.3.0, 0.3.1, 0.4.0) and
 * 100 (1.0.0, 1.1.0). Parsing normalises like Go's typed structs: addresses canonical, unknown keys
 * dropped, zero-valued optional numbers/strings and empty lists dropped, `table`/`scope` 0 kept.
 */
import { canonicalCIDR, canonicalIP, familyOf } from '@cnikit/ip';
import { CniError } from './errors.ts';
import { configVersion, goEscapeJSON, goList, sortKeysDeep } from './gojson.ts';
import { decode, s } from './schema.ts';
import type {
  AnyResult,
  DNS,
  Interface,
  IPConfig,
  IPConfig020,
  Result,
  Result020,
  Result040,
  Route,
} from './types.ts';
import { goQuote } from './version.ts';

type IPConfig040 = NonNullable<Result040['ips']>[number];
type Family = '020' | '040' | '100';
const FAMILY_VERSIONS: Record<Family, readonly string[]> = {
  '020': ['', '0.1.0', '0.2.0'],
  '040': ['0.3.0', '0.3.1', '0.4.0'],
  '100': ['1.0.0', '1.1.0'],
};

/** The result family of a spec version, or undefined if no result type exists for it. */
export function resultFamily(version: string): Family | undefined {
  for (const f of ['020', '040', '100'] as const) if (FAMILY_VERSIONS[f].includes(version)) return f;
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Schemas (Go struct decoding: case-insensitive keys, null = unset, unknown keys ignored)

/** Thrown by address refinements; surfaces as a plain Error with Go's text. */
class ParseFailure extends Error {}

/**
 * The result schemas, built on first use and per family: every process start evaluates this module, only the calls
 * that parse a result (prevResult, a delegate's answer, the check of a handler's result) need them, and a call
 * needs the family of its version (building the three is a cold call's instructions for nothing).
 */
function buildParts() {
  const cidr = s.string().refine((v) => {
    const c = canonicalCIDR(v);
    if (c === undefined) throw new ParseFailure(`invalid CIDR address: ${v}`);
    return c;
  });
  const ip = s
    .string()
    .refine((v) => {
      if (v === '') return undefined; // Go: empty text → nil IP
      const c = canonicalIP(v);
      if (c === undefined) throw new ParseFailure(`invalid IP address: ${v}`);
      return c;
    })
    .optional();
  const optStr = s.string().optional();
  const optInt = s.int().optional();
  const strList = s.array(s.string()).optional();

  const routeSchema = s.object({
    dst: cidr,
    gw: ip,
    mtu: optInt,
    advmss: optInt,
    priority: optInt,
    table: optInt,
    scope: optInt,
  });
  const dnsSchema = s
    .object({ nameservers: strList, domain: optStr, search: strList, options: strList })
    .optional();
  return { cidr, ip, optStr, optInt, routeSchema, dnsSchema };
}
type Parts = ReturnType<typeof buildParts>;
let parts: Parts | undefined;
function partsOf(): Parts {
  parts ??= buildParts();
  return parts;
}

function build020({ cidr, ip, routeSchema, dnsSchema }: Parts) {
  const ipc020 = s.object({ ip: cidr, gateway: ip, routes: s.array(routeSchema).optional() }).optional();
  return s.object({
    cniVersion: s.string().default(''),
    ip4: ipc020,
    ip6: ipc020,
    dns: dnsSchema,
  });
}
function build040({ cidr, ip, optStr, optInt, routeSchema, dnsSchema }: Parts) {
  const iface040 = s.object({ name: s.string().default(''), mac: optStr, sandbox: optStr });
  return s.object({
    cniVersion: s.string().default(''),
    interfaces: s.array(iface040).optional(),
    ips: s
      .array(s.object({ version: s.string().default(''), interface: optInt, address: cidr, gateway: ip }))
      .optional(),
    routes: s.array(routeSchema).optional(),
    dns: dnsSchema,
  });
}
function build100({ cidr, ip, optStr, optInt, routeSchema, dnsSchema }: Parts) {
  const iface100 = s.object({
    name: s.string().default(''),
    mac: optStr,
    mtu: optInt,
    sandbox: optStr,
    socketPath: optStr,
    pciID: optStr,
  });
  return s.object({
    cniVersion: s.string().default(''),
    interfaces: s.array(iface100).optional(),
    ips: s.array(s.object({ interface: optInt, address: cidr, gateway: ip })).optional(),
    routes: s.array(routeSchema).optional(),
    dns: dnsSchema,
  });
}
let schema020: ReturnType<typeof build020> | undefined;
let schema040: ReturnType<typeof build040> | undefined;
let schema100: ReturnType<typeof build100> | undefined;
function schemaOf020(): ReturnType<typeof build020> {
  schema020 ??= build020(partsOf());
  return schema020;
}
function schemaOf040(): ReturnType<typeof build040> {
  schema040 ??= build040(partsOf());
  return schema040;
}
function schemaOf100(): ReturnType<typeof build100> {
  schema100 ??= build100(partsOf());
  return schema100;
}

// ---------------------------------------------------------------------------------------------
// Normalisers (field order = Go's struct order for 020/040)

/** A route as Go's `types.Route` JSON has it: zero mtu/advmss/priority dropped, table/scope kept (`full`: 0.3.0+ fields). */
export function normRoute(r: Route, full = true): Route {
  const o: Route = { dst: r.dst };
  if (r.gw) o.gw = r.gw;
  if (!full) return o;
  if (r.mtu) o.mtu = r.mtu;
  if (r.advmss) o.advmss = r.advmss;
  if (r.priority) o.priority = r.priority;
  if (r.table !== undefined) o.table = r.table;
  if (r.scope !== undefined) o.scope = r.scope;
  return o;
}

/** A DNS block as Go's `types.DNS` JSON has it: empty lists and strings dropped. */
export function normDNS(d: DNS | undefined): DNS {
  const o: DNS = {};
  if (!d) return o;
  if (d.nameservers?.length) o.nameservers = [...d.nameservers];
  if (d.domain) o.domain = d.domain;
  if (d.search?.length) o.search = [...d.search];
  if (d.options?.length) o.options = [...d.options];
  return o;
}

function dnsEmpty(d: DNS | undefined): boolean {
  return !d || (!d.nameservers?.length && !d.domain && !d.search?.length && !d.options?.length);
}

function normIface(i: Partial<Interface>, full: boolean): Interface {
  const o: Interface = { name: i.name ?? '' };
  if (i.mac) o.mac = i.mac;
  if (full && i.mtu) o.mtu = i.mtu;
  if (i.sandbox) o.sandbox = i.sandbox;
  if (full && i.socketPath) o.socketPath = i.socketPath;
  if (full && i.pciID) o.pciID = i.pciID;
  return o;
}

function normIPC(c: { interface?: number; address: string; gateway?: string }): IPConfig {
  const o: IPConfig = { address: c.address };
  if (c.interface !== undefined) o.interface = c.interface;
  if (c.gateway) o.gateway = c.gateway;
  return o;
}

function normIPC020(c: { ip: string; gateway?: string; routes?: Route[] }): IPConfig020 {
  const o: IPConfig020 = { ip: c.ip };
  if (c.gateway) o.gateway = c.gateway;
  if (c.routes?.length) o.routes = c.routes.map((r) => normRoute(r));
  return o;
}

function make020(
  version: string,
  ip4: IPConfig020 | undefined,
  ip6: IPConfig020 | undefined,
  dns: DNS | undefined,
): Result020 {
  const out = { cniVersion: version } as Result020;
  if (ip4) out.ip4 = normIPC020(ip4);
  if (ip6) out.ip6 = normIPC020(ip6);
  out.dns = normDNS(dns);
  return out;
}

function make040(
  version: string,
  interfaces: Array<Partial<Interface>> | undefined,
  ips: Array<{ version: string; interface?: number; address: string; gateway?: string }> | undefined,
  routes: Route[] | undefined,
  dns: DNS | undefined,
): Result040 {
  const out = { cniVersion: version } as Result040;
  if (interfaces?.length) out.interfaces = interfaces.map((i) => normIface(i, false));
  if (ips?.length) {
    out.ips = ips.map((c) => {
      const o = { version: c.version } as IPConfig040;
      if (c.interface !== undefined) o.interface = c.interface;
      o.address = c.address;
      if (c.gateway) o.gateway = c.gateway;
      return o;
    });
  }
  if (routes?.length) out.routes = routes.map((r) => normRoute(r));
  out.dns = normDNS(dns);
  return out;
}

function make100(
  version: string,
  interfaces: Array<Partial<Interface>> | undefined,
  ips: Array<{ interface?: number; address: string; gateway?: string }> | undefined,
  routes: Route[] | undefined,
  dns: DNS | undefined,
): Result {
  const out: Result = { cniVersion: version };
  if (interfaces?.length) out.interfaces = interfaces.map((i) => normIface(i, true));
  if (ips?.length) out.ips = ips.map(normIPC);
  if (routes?.length) out.routes = routes.map((r) => normRoute(r));
  if (!dnsEmpty(dns)) out.dns = normDNS(dns);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Parsing

/** A result's own cniVersion ('0.1.0' when missing, empty or not a string). */
function versionOf(json: unknown): string {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return '0.1.0';
  return configVersion(json as Record<string, unknown>, () => '');
}

function plain(e: unknown): Error {
  if (e instanceof ParseFailure) return new Error(e.message);
  if (CniError.is(e)) {
    const cause = (e as { cause?: unknown }).cause;
    if (cause instanceof ParseFailure) return new Error(cause.message);
    return new Error(`json: ${e.msg}`);
  }
  return e instanceof Error ? e : new Error(String(e));
}

function decodePlain<T>(schema: Parameters<typeof decode<T>>[0], json: unknown): T {
  try {
    return decode(schema, json === null ? {} : json, '');
  } catch (e) {
    throw plain(e);
  }
}

/**
 * Parse a result (JSON value) with the result type of `version` (default: the result's own
 * `cniVersion`, '' meaning 0.1.0) — Go `create.Create`. The result's `cniVersion` must belong to the
 * same family: `result type supports [0.3.0 0.3.1 0.4.0] but unmarshalled CNIVersion is "1.0.0"`.
 * Throws plain `Error`s with Go's texts (`invalid CIDR address: x`, `unsupported CNI result version "9"`).
 */
export function parseResult(json: unknown, version?: string): AnyResult {
  const v = version ?? versionOf(json);
  const fam = resultFamily(v);
  if (!fam) throw new Error(`unsupported CNI result version ${goQuote(v)}`);
  if (json !== null && (typeof json !== 'object' || Array.isArray(json))) {
    throw new Error(
      `json: cannot unmarshal ${Array.isArray(json) ? 'array' : typeof json} into Go value of type types${fam}.Result`,
    );
  }
  const supported = FAMILY_VERSIONS[fam];
  if (fam === '020') {
    const r = decodePlain(schemaOf020(), json);
    if (!supported.includes(r.cniVersion)) {
      throw new Error(
        `result type supports ${goList(supported)} but unmarshalled CNIVersion is ${goQuote(r.cniVersion)}`,
      );
    }
    return make020(r.cniVersion || '0.1.0', r.ip4, r.ip6, r.dns);
  }
  if (fam === '040') {
    const r = decodePlain(schemaOf040(), json);
    if (!supported.includes(r.cniVersion)) {
      throw new Error(
        `result type supports ${goList(supported)} but unmarshalled CNIVersion is ${goQuote(r.cniVersion)}`,
      );
    }
    return make040(r.cniVersion, r.interfaces, r.ips, r.routes, r.dns);
  }
  const r = decodePlain(schemaOf100(), json);
  if (!supported.includes(r.cniVersion)) {
    throw new Error(
      `result type supports ${goList(supported)} but unmarshalled CNIVersion is ${goQuote(r.cniVersion)}`,
    );
  }
  return make100(r.cniVersion, r.interfaces, r.ips, r.routes, r.dns);
}

/** The family a typed result object belongs to (by cniVersion, else by shape). */
function versionOfTyped(result: AnyResult): string {
  if (result.cniVersion) return result.cniVersion;
  if ('ip4' in result || 'ip6' in result) return '0.2.0';
  const ips = (result as { ips?: unknown }).ips;
  if (Array.isArray(ips) && ips.some((x) => typeof x === 'object' && x !== null && 'version' in x))
    return '0.4.0';
  return '1.1.0';
}

// ---------------------------------------------------------------------------------------------
// Conversion

function from020to040(r: Result020, to: string): Result040 {
  const ips: Array<{ version: string; address: string; gateway?: string }> = [];
  const routes: Route[] = [];
  if (r.ip4) {
    ips.push({ version: '4', address: r.ip4.ip, ...(r.ip4.gateway ? { gateway: r.ip4.gateway } : {}) });
    routes.push(...(r.ip4.routes ?? []));
  }
  if (r.ip6) {
    ips.push({ version: '6', address: r.ip6.ip, ...(r.ip6.gateway ? { gateway: r.ip6.gateway } : {}) });
    routes.push(...(r.ip6.routes ?? []));
  }
  return make040(to, undefined, ips, routes, r.dns);
}

function from040to020(r: Result040, to: string): Result020 {
  let ip4: IPConfig020 | undefined;
  let ip6: IPConfig020 | undefined;
  for (const c of r.ips ?? []) {
    if (c.version === '4' && !ip4) ip4 = { ip: c.address, ...(c.gateway ? { gateway: c.gateway } : {}) };
    else if (c.version === '6' && !ip6) ip6 = { ip: c.address, ...(c.gateway ? { gateway: c.gateway } : {}) };
    if (ip4 && ip6) break;
  }
  for (const rt of r.routes ?? []) {
    const target = familyOf(rt.dst) === 4 ? ip4 : ip6;
    if (!target) continue;
    target.routes ??= [];
    target.routes.push(normRoute(rt, false));
  }
  if (!ip4 && !ip6) throw new Error('cannot convert: no valid IP addresses');
  return make020(to, ip4, ip6, r.dns);
}

function from040to100(r: Result040, to: string): Result {
  return make100(
    to,
    r.interfaces?.map((i) => normIface(i, false)),
    r.ips?.map(({ version: _v, ...rest }) => rest),
    r.routes,
    r.dns,
  );
}

function from100to040(r: Result, to: string): Result040 {
  return make040(
    to,
    r.interfaces?.map((i) => normIface(i, false)),
    r.ips?.map((c) => ({ version: familyOf(c.address) === 4 ? '4' : '6', ...c })),
    r.routes,
    r.dns,
  );
}

/**
 * Convert a result to `toVersion` ('' = 0.1.0) following Go's converters (spec §12). The input is
 * normalised first (so a handler's hand-built result is validated). Throws plain Errors:
 * `cannot convert: no valid IP addresses`, `no converter for CNI result version X to Y`.
 */
export function convertResult(result: AnyResult, toVersion: string): AnyResult {
  return convert(result, toVersion).result;
}

/**
 * convertResult, telling also whether the converted result is what parseResult returns for it (parsed, and at most
 * its cniVersion changed within its family, which every family's parse ignores), so printing needs no second parse.
 */
function convert(result: AnyResult, toVersion: string): { result: AnyResult; parsed: boolean } {
  const to = toVersion === '' ? '0.1.0' : toVersion;
  const fromVersion = versionOfTyped(result);
  const src = parseResult({ ...result, cniVersion: fromVersion }, fromVersion);
  if (src.cniVersion === to) return { result: src, parsed: true };
  const fromFam = resultFamily(src.cniVersion)!;
  const toFam = resultFamily(to);
  if (!toFam) {
    throw new Error(`no converter for CNI result version ${src.cniVersion} to ${to}`);
  }
  if (fromFam === toFam) return { result: { ...src, cniVersion: to } as AnyResult, parsed: true };
  return { result: convertAcross(src, fromFam, toFam, to), parsed: false };
}

function convertAcross(src: AnyResult, fromFam: Family, toFam: Family, to: string): AnyResult {
  switch (`${fromFam}>${toFam}`) {
    case '020>020':
      return { ...(src as Result020), cniVersion: to };
    case '020>040':
      return from020to040(src as Result020, to);
    case '020>100':
      return from040to100(from020to040(src as Result020, '0.4.0'), to);
    case '040>020':
      return from040to020(src as Result040, to);
    case '040>040':
      return { ...(src as Result040), cniVersion: to };
    case '040>100':
      return from040to100(src as Result040, to);
    case '100>020':
      return from040to020(from100to040(src as Result, '0.4.0'), to);
    case '100>040':
      return from100to040(src as Result, to);
    default:
      return { ...(src as Result), cniVersion: to };
  }
}

/** Convert any result to the current (1.1.0) shape handlers work with. */
export function toCurrent(result: AnyResult): Result {
  return convertResult(result, '1.1.0') as Result;
}

// ---------------------------------------------------------------------------------------------
// Printing

/**
 * Serialise a result exactly like Go's `PrintTo` (json.MarshalIndent with 4 spaces, no trailing
 * newline): 020/040 in struct order with `"dns": {}` always, 1.x with sorted keys and no empty dns.
 */
export function formatResult(result: AnyResult): string {
  const v = versionOfTyped(result);
  return printParsed(parseResult({ ...result, cniVersion: v }, v));
}

/** formatResult(convertResult(result, toVersion)), without parsing the converted result again when it is parsed. */
export function formatConverted(result: AnyResult, toVersion: string): string {
  const c = convert(result, toVersion);
  return c.parsed ? printParsed(c.result) : formatResult(c.result);
}

function printParsed(norm: AnyResult): string {
  const doc = resultFamily(norm.cniVersion) === '100' ? sortKeysDeep(norm) : norm;
  return goEscapeJSON(JSON.stringify(doc, null, 4));
}
