/**
 * static IPAM: drop-in replacement for the reference plugin (`plugins/ipam/static`). Returns fixed
 * addresses, routes and DNS; keeps no state.
 *
 * Address sources and precedence (as the reference): `runtimeConfig.ips` replaces `args.cni.ips`, which
 * replaces `ipam.addresses` + CNI_ARGS `IP` (appended). CNI_ARGS `GATEWAY` sets the gateway of every
 * CNI_ARGS address whose subnet contains it (config addresses are not parsed yet at that point in the
 * reference, so they never match — kept deliberately).
 *
 * Codes: configuration errors are CNI code 7 (the reference answers 999 with the same message); errors
 * caused by CNI_ARGS and CHECK failures keep code 999.
 */
import { equal, formatCIDR, formatIP, parseCIDR, parseIP } from '@cnikit/ip';
import {
  CniError,
  CURRENT_VERSION,
  ErrorCode,
  type IPConfig,
  type Plugin,
  type Request,
  type Result,
  CNIKIT_VERSION as VERSION,
} from '@cnikit/skel';
import { parseConf, type StaticConfig } from './config.ts';

function add(req: Request<StaticConfig>): Result {
  const conf = req.conf;
  const ips: IPConfig[] = conf.addresses.map((a) =>
    a.gateway
      ? { address: formatCIDR(a.cidr), gateway: formatIP(a.gateway) }
      : { address: formatCIDR(a.cidr) },
  );
  const result: Result = { cniVersion: CURRENT_VERSION };
  if (ips.length > 0) result.ips = ips;
  if (conf.routes.length > 0) result.routes = conf.routes;
  result.dns = conf.dns;
  return result;
}

function check(req: Request<StaticConfig>): void {
  const conf = req.conf;
  // skel parses prevResult (key matched case-insensitively, like Go); null counts as missing
  const prev = req.prevResult;
  if (!prev) throw new CniError(ErrorCode.Internal, 'Required prevResult missing');
  for (const want of conf.addresses) {
    for (const got of prev.ips ?? []) {
      const gotIP = parseCIDR(got.address)?.ip;
      if (!gotIP || !equal(gotIP, want.cidr.ip)) continue;
      if (!want.gateway) break;
      const gotGw = got.gateway ? parseIP(got.gateway) : undefined;
      if (equal(gotGw, want.gateway)) break;
      throw new CniError(
        ErrorCode.Internal,
        `static: Failed to match addr ${formatIP(gotIP)} on interface ${req.ifName}`,
      );
    }
  }
}

export const plugin: Plugin<StaticConfig> = {
  name: 'static',
  ipam: true,
  about: `CNI static plugin cnikit ${VERSION}`,
  conf: parseConf,
  add,
  // No DEL handler: static keeps no state, and DEL succeeds without reading the config (as the reference's does).
  check,
};
