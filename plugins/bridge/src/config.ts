/**
 * bridge network configuration: decoding, validation (with the reference's exact messages) and the
 * container MAC choice. Pure: no system access.
 */
import { formatMac, invalidMacMessage, parseMac } from '@cnikit/netlink';
import {
  CniError,
  decodeNetconf,
  ErrorCode,
  type Infer,
  interfaceNameProblem,
  loadArgs,
  type RequestBase,
  s,
} from '@cnikit/skel';

const trunkSchema = s.object({
  minID: s.int().optional(),
  maxID: s.int().optional(),
  id: s.int().optional(),
});

const dnsSchema = s.object({
  nameservers: s.array(s.string()).optional(),
  domain: s.string().optional(),
  search: s.array(s.string()).optional(),
  options: s.array(s.string()).optional(),
});

export const netConfSchema = s.object({
  cniVersion: s.string().default(''),
  name: s.string().default(''),
  type: s.string().default(''),
  bridge: s.string().default('cni0'),
  isGateway: s.bool().default(false),
  isDefaultGateway: s.bool().default(false),
  forceAddress: s.bool().default(false),
  ipMasq: s.bool().default(false),
  ipMasqBackend: s.string().optional(),
  mtu: s.int().default(0),
  hairpinMode: s.bool().default(false),
  promiscMode: s.bool().default(false),
  vlan: s.int().default(0),
  vlanTrunk: s.array(trunkSchema).optional(),
  preserveDefaultVlan: s.bool().default(false),
  macspoofchk: s.bool().default(false),
  enabledad: s.bool().default(false),
  disableContainerInterface: s.bool().default(false),
  portIsolation: s.bool().default(false),
  ipam: s.object({ type: s.string().default('') }).optional(),
  dns: dnsSchema.optional(),
  args: s.object({ cni: s.object({ mac: s.string().optional() }).optional() }).optional(),
  runtimeConfig: s.object({ mac: s.string().optional() }).optional(),
});

export type RawNetConf = Infer<typeof netConfSchema>;
export type VlanTrunkEntry = Infer<typeof trunkSchema>;

export type MasqBackend = 'iptables' | 'nftables';

export interface BridgeConf {
  cniVersion: string;
  name: string;
  bridge: string;
  isGateway: boolean;
  isDefaultGateway: boolean;
  forceAddress: boolean;
  ipMasq: boolean;
  /** As configured; checked by `validateForAdd` (undefined/'auto' = detect). */
  ipMasqBackend: string | undefined;
  /** 0 = kernel default (the reference ignores values ≤ 0). */
  mtu: number;
  hairpinMode: boolean;
  promiscMode: boolean;
  vlan: number;
  /** Whether `vlanTrunk` was present at all (even `[]`): turns on vlan_filtering at creation. */
  vlanTrunkPresent: boolean;
  /** Trunk VIDs, de-duplicated and sorted. */
  vlans: number[];
  preserveDefaultVlan: boolean;
  macspoofchk: boolean;
  enabledad: boolean;
  disableContainerInterface: boolean;
  portIsolation: boolean;
  ipamType: string;
  dns: Infer<typeof dnsSchema> | undefined;
  /** Container MAC as configured (validated and canonicalised by `validateForAdd`), or ''. */
  mac: string;
}

function configError(msg: string, details = ''): CniError {
  return new CniError(ErrorCode.InvalidNetworkConfig, msg, details);
}

/**
 * The reference's `collectVlanTrunk`: every entry may hold a min/max range and/or an id; the result
 * is de-duplicated and sorted. `undefined` (key absent) and an effectively empty trunk give `[]`.
 */
export function collectVlanTrunk(trunk: readonly VlanTrunkEntry[] | undefined): number[] {
  if (!trunk) return [];
  const set = new Set<number>();
  for (const item of trunk) {
    const { minID, maxID, id } = item ?? {};
    if (minID !== undefined && maxID !== undefined) {
      if (minID <= 0 || minID > 4094) throw configError('incorrect trunk minID parameter');
      if (maxID <= 0 || maxID > 4094) throw configError('incorrect trunk maxID parameter');
      if (maxID < minID) throw configError('minID is greater than maxID in trunk parameter');
      for (let v = minID; v <= maxID; v++) set.add(v);
    } else if (minID === undefined && maxID !== undefined) {
      throw configError('minID and maxID should be configured simultaneously, minID is missing');
    } else if (minID !== undefined && maxID === undefined) {
      throw configError('minID and maxID should be configured simultaneously, maxID is missing');
    }
    if (id !== undefined) {
      if (id <= 0 || id > 4094) throw configError('incorrect trunk id parameter');
      set.add(id);
    }
  }
  return [...set].sort((a, b) => a - b);
}

/** A configured MAC (Go `net.ParseMAC`, 48-bit, via netlink's parser) in canonical lowercase colon form; code 7 otherwise. */
export function canonicalMac(text: string): string {
  const bytes = parseMac(text);
  if (!bytes) throw configError(invalidMacMessage(text));
  return formatMac(bytes);
}

/** The bridge name reaches sysctl paths: the reference's interface-name rules (skel), bridge wording. */
function validateBridgeName(name: string): void {
  const problem = interfaceNameProblem(name);
  if (problem) throw configError(`invalid bridge name ${JSON.stringify(name)}: name ${problem}`);
}

/**
 * The plugin's config decoder. ADD, DEL and CHECK: the reference's `loadNetConf`. GC and STATUS decode only (no
 * VLAN/trunk validation, no CNI_ARGS: what the reference's STATUS does, and enough for GC; `vlans` is then empty
 * and `mac` '').
 */
export function parseConf(
  raw: Record<string, unknown>,
  req: Pick<RequestBase, 'command' | 'args'>,
): BridgeConf {
  if (req.command === 'GC' || req.command === 'STATUS') return fromRaw(decodeRaw(raw), [], '');
  return loadNetConf(raw, req.args);
}

/** Decode the network configuration; errors become "failed to load netconf: …" (code 6 unless more specific). */
function decodeRaw(config: unknown): RawNetConf {
  return decodeNetconf(netConfSchema, config);
}

/**
 * The reference's `loadNetConf`: decode, validate VLAN and trunk, pick the container MAC
 * (runtimeConfig.mac > args.cni.mac > CNI_ARGS MAC). `cniArgs` is CNI_ARGS verbatim.
 */
export function loadNetConf(config: unknown, cniArgs: string): BridgeConf {
  const raw = decodeRaw(config);
  if (raw.vlan < 0 || raw.vlan > 4094) {
    throw configError(`invalid VLAN ID ${raw.vlan} (must be between 0 and 4094)`);
  }
  const vlans = collectVlanTrunk(raw.vlanTrunk);

  let mac = '';
  if (cniArgs !== '') {
    const a = loadArgs(cniArgs, { MAC: 'string' });
    if (a.MAC) mac = a.MAC;
  }
  if (raw.args?.cni?.mac) mac = raw.args.cni.mac;
  if (raw.runtimeConfig?.mac) mac = raw.runtimeConfig.mac;
  return fromRaw(raw, vlans, mac);
}

function fromRaw(raw: RawNetConf, vlans: number[], mac: string): BridgeConf {
  return {
    cniVersion: raw.cniVersion,
    name: raw.name,
    bridge: raw.bridge,
    isGateway: raw.isGateway || raw.isDefaultGateway,
    isDefaultGateway: raw.isDefaultGateway,
    forceAddress: raw.forceAddress,
    ipMasq: raw.ipMasq,
    ipMasqBackend: raw.ipMasqBackend,
    mtu: Math.max(raw.mtu, 0),
    hairpinMode: raw.hairpinMode,
    promiscMode: raw.promiscMode,
    vlan: raw.vlan,
    vlanTrunkPresent: raw.vlanTrunk !== undefined,
    vlans,
    preserveDefaultVlan: raw.preserveDefaultVlan,
    macspoofchk: raw.macspoofchk,
    enabledad: raw.enabledad,
    disableContainerInterface: raw.disableContainerInterface,
    portIsolation: raw.portIsolation,
    ipamType: raw.ipam?.type ?? '',
    dns: raw.dns,
    mac,
  };
}

/**
 * The ADD-time checks (step 2 of the reference's ADD, plus checks the reference only hits later, after
 * it has changed the system: MAC syntax, masquerade backend, bridge name). They are not run for DEL so
 * that a DEL always cleans up. Returns the canonical MAC and the chosen masquerade backend.
 */
export function validateForAdd(conf: BridgeConf): { mac: string; backend: MasqBackend | undefined } {
  validateBridgeName(conf.bridge);
  const mac = conf.mac === '' ? '' : canonicalMac(conf.mac);
  let backend: MasqBackend | undefined;
  const b = conf.ipMasqBackend;
  if (conf.ipMasq && conf.ipamType !== '' && b !== undefined && b !== 'auto') {
    if (b !== 'iptables' && b !== 'nftables') {
      throw configError(
        `unknown ipmasq backend ${JSON.stringify(b)}`,
        'use "iptables", "nftables" or "auto"',
      );
    }
    backend = b;
  }
  if (conf.ipamType !== '' && conf.disableContainerInterface) {
    throw configError('cannot use IPAM when DisableContainerInterface flag is set');
  }
  if (conf.hairpinMode && conf.promiscMode) {
    throw configError('cannot set hairpin mode and promiscuous mode at the same time');
  }
  return { mac, backend };
}

/** Whether the bridge is created with vlan_filtering (only applies when this call creates it). */
export function wantsVlanFiltering(conf: BridgeConf): boolean {
  return conf.vlan !== 0 || conf.vlanTrunkPresent;
}

/** The spoof-check / nft reference id. */
export function uniqueID(containerID: string, ifName: string): string {
  return `${containerID}-${ifName}`;
}
