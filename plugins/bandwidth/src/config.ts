/**
 * bandwidth configuration (reference: plugins/meta/bandwidth main.go, plugins.md §5.1–5.2): which entry wins
 * (top-level keys over runtimeConfig.bandwidth), the rate/burst validation, and the TBF arithmetic — in Go's
 * float64/uint32 semantics, so the kernel gets exactly the values the Go plugin gives it and CHECK agrees
 * across implementations.
 */

import { foldKey } from '@cnikit/skel/go';
import { CniError, decode, ErrorCode, type Infer, s } from '@cnikit/skel/plugin';

const MAX_UINT32 = 0xffffffff;
const LATENCY_MS = 25;
const TIME_UNITS_PER_SEC = 1e6;

const amount = () => s.uint({ max: Number.MAX_SAFE_INTEGER }).default(0);
const entrySchema = s.object({
  ingressRate: amount(),
  ingressBurst: amount(),
  egressRate: amount(),
  egressBurst: amount(),
});

const confSchema = s.object({
  name: s.string().default(''),
  runtimeConfig: s.object({ bandwidth: entrySchema.optional() }).optional(),
  ...entrySchema.shape,
});

export interface BandwidthEntry {
  ingressRate: number;
  ingressBurst: number;
  egressRate: number;
  egressBurst: number;
}

export interface BandwidthConf {
  name: string;
  /** The entry in force, or undefined when neither the top-level keys nor runtimeConfig.bandwidth are given. */
  bandwidth?: BandwidthEntry;
}

const ENTRY_KEYS = ['ingressrate', 'ingressburst', 'egressrate', 'egressburst'];

/** Go's embedded *BandwidthEntry is allocated as soon as any of its keys appears (even with null). */
function hasTopLevelEntry(config: Record<string, unknown>): boolean {
  return Object.keys(config).some((k) => ENTRY_KEYS.includes(foldKey(k)));
}

function fail(msg: string): CniError {
  return new CniError(ErrorCode.Internal, msg);
}

export function validateRateAndBurst(rate: number, burst: number): void {
  if (burst === 0 && rate !== 0) throw fail('if rate is set, burst must also be set');
  if (rate === 0 && burst !== 0) throw fail('if burst is set, rate must also be set');
  if (Math.floor(burst / 8) >= MAX_UINT32) throw fail('burst cannot be more than 4GB');
}

export function isZero(b: BandwidthEntry): boolean {
  return b.ingressRate === 0 && b.ingressBurst === 0 && b.egressRate === 0 && b.egressBurst === 0;
}

/** Parse and validate (ADD, DEL and CHECK alike, as the reference): errors keep Go's texts. */
export function parseConf(config: Record<string, unknown>): BandwidthConf {
  let raw: Infer<typeof confSchema>;
  try {
    raw = decode(confSchema, config);
  } catch (err) {
    const e = CniError.from(err);
    throw new CniError(e.code, `failed to parse network configuration: ${e.msg}`, e.details, { cause: err });
  }
  const top: BandwidthEntry = {
    ingressRate: raw.ingressRate,
    ingressBurst: raw.ingressBurst,
    egressRate: raw.egressRate,
    egressBurst: raw.egressBurst,
  };
  const bandwidth = hasTopLevelEntry(config) ? top : raw.runtimeConfig?.bandwidth;
  if (bandwidth) {
    validateRateAndBurst(bandwidth.ingressRate, bandwidth.ingressBurst);
    validateRateAndBurst(bandwidth.egressRate, bandwidth.egressBurst);
  }
  return { name: raw.name, bandwidth };
}

/** Go's uint32(float64) on amd64: truncate toward zero to int64, keep the low 32 bits. */
export function goUint32(f: number): number {
  if (!Number.isFinite(f)) return 0;
  return Number(BigInt.asUintN(32, BigInt(Math.trunc(f))));
}

/**
 * The root TBF the reference installs for a rate (bits/s) and burst (bits): rate in bytes/s, buffer in
 * psched ticks (`time2tick(uint32(burstBytes·1e6/rateBytes))`), limit in bytes (`uint32(rateBytes·25 ms) +
 * burstBytes`, uint32 arithmetic).
 */
export function tbfParams(
  rateBits: number,
  burstBits: number,
  tickInUsec: number,
): { rate: number; limit: number; buffer: number } {
  const rate = Math.floor(rateBits / 8);
  const burst = goUint32(Math.floor(burstBits / 8));
  const buffer = goUint32(goUint32((burst * TIME_UNITS_PER_SEC) / rate) * tickInUsec);
  const latency = TIME_UNITS_PER_SEC * (LATENCY_MS / 1000);
  const limit = (goUint32((rate * latency) / TIME_UNITS_PER_SEC) + burst) >>> 0;
  return { rate, limit, buffer };
}
