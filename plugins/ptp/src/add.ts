/**
 * ADD in the reference's order (IPAM, forwarding, veth + container addresses/routes, host addresses/routes,
 * masquerade), with a rollback of everything this call created when a step fails (the reference releases only
 * the IPAM allocation and leaves the veth pair and rules behind).
 */
import { closeSync } from 'node:fs';
import * as fw from '@cnikit/firewall';
import { enableForward, ipamAdd, openContainerNetns } from '@cnikit/link';
import * as nl from '@cnikit/netlink';
import {
  type DNS,
  errorReason,
  internalError,
  type Request,
  type Result,
  Rollback,
  validateDelegate,
} from '@cnikit/skel';
import { masqBackend, type PtpConf } from './config.ts';
import { configureContainer, createPair, deleteContainerVeth, setupHost } from './kernel.ts';
import { checkAddresses, familiesOf } from './plan.ts';

/** The reference's `dnsConfSet`: any DNS key of the network config set (an empty list counts). */
export function dnsConfSet(dns: DNS | undefined): boolean {
  if (!dns) return false;
  return (
    dns.nameservers !== undefined || dns.search !== undefined || dns.options !== undefined || !!dns.domain
  );
}

export async function add(req: Request<PtpConf>): Promise<Result> {
  const conf = req.conf;
  const backend = masqBackend(conf);
  // configuration errors, the IPAM's included, are raised before the first change
  await validateDelegate(conf.ipamType, req, { ipam: true });
  const undo = new Rollback();
  try {
    // registered before the call: an IPAM that allocated and then failed to answer is released too
    const ipam = await ipamAdd(conf.ipamType, req, undo);
    const result: Result = {
      cniVersion: '1.1.0',
      ips: (ipam.ips ?? []).map((ip) => ({ ...ip })),
      routes: (ipam.routes ?? []).map((r) => ({ ...r })),
    };
    if (ipam.dns) result.dns = structuredClone(ipam.dns);
    if (!result.ips || result.ips.length === 0) throw internalError('IPAM plugin returned missing IP config');
    checkAddresses(result.ips);

    for (const family of familiesOf(result.ips)) {
      try {
        enableForward(family);
      } catch (err) {
        throw internalError(`Could not enable IP forwarding: ${errorReason(err)}`, err);
      }
    }

    const netnsFd = openContainerNetns(req.netns);
    try {
      const pair = createPair(netnsFd, req.netns, req.ifName, conf.mtu, () =>
        undo.push('delete veth', () => nl.withNetns(req.netns, () => deleteContainerVeth(req.ifName))),
      );
      result.interfaces = [pair.host, pair.container];
      for (const ipc of result.ips) ipc.interface = 1;
      configureContainer(netnsFd, req.ifName, result);
      setupHost(pair.host.name, result);
    } finally {
      closeSync(netnsFd);
    }

    if (conf.ipMasq) {
      const ips = result.ips.map((ip) => ip.address);
      undo.push('masquerade teardown', () =>
        fw.teardownIPMasq({ ips, network: conf.name, ifName: req.ifName, containerID: req.containerId }),
      );
      fw.setupIPMasq({ backend, ips, network: conf.name, ifName: req.ifName, containerID: req.containerId });
    }

    // only DNS keys of the network config replace the IPAM's; the reference always prints a dns object
    if (dnsConfSet(conf.dns)) result.dns = structuredClone(conf.dns);
    result.dns ??= {};
    return result;
  } catch (err) {
    await undo.undoAll(req.log);
    throw err;
  }
}
