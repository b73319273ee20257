/**
 * loopback's configuration: the reference reads no key of its own (it only brings `lo` up), so the decoder hands the
 * network configuration on as the SDK parsed it (what the SDK gives a plugin without a decoder).
 */
import type { NetConf } from '@cnikit/skel/plugin';

export type LoopbackConf = NetConf;

export function parseConf(raw: Record<string, unknown>): LoopbackConf {
  return raw as LoopbackConf;
}
