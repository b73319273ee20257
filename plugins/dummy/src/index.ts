/**
 * dummy: a dummy link in the container carrying the IPAM's addresses and routes (drop-in for the reference plugin,
 * HEAD only; the reference's order), with a rollback of a failed ADD, an idempotent DEL that keeps going, and GC
 * (none in the reference).
 */
import * as link from '@cnikit/link';
import * as nl from '@cnikit/netlink';
import {
  CniError,
  ErrorCode,
  errorReason,
  internalError,
  type Request,
  type Result,
  validateDelegate,
} from '@cnikit/skel';
import { type DummyConf, IPAM_REQUIRED, parseConf } from './config.ts';

function requireIpam(conf: DummyConf): void {
  if (conf.ipamType === '') throw new CniError(ErrorCode.InvalidNetworkConfig, IPAM_REQUIRED);
}

async function add(req: Request<DummyConf>): Promise<Result> {
  const conf = req.conf;
  requireIpam(conf);
  // configuration errors, the IPAM's included, are raised before the first change
  await validateDelegate(conf.ipamType, req, { ipam: true });
  return link.addContainerLink(req, {
    kind: 'dummy',
    create: (fd) => {
      const l = nl.withNetnsFd(fd, () => {
        try {
          return nl.createDummy(req.ifName);
        } catch (err) {
          throw internalError(`failed to create dummy: ${errorReason(err)}`, err);
        }
      });
      return { name: req.ifName, mac: l.mac, sandbox: req.netns };
    },
    dns: (ipam) => (ipam?.dns ? structuredClone(ipam.dns) : undefined),
  });
}

async function del(req: Request<DummyConf>): Promise<void> {
  // like the reference, a config without IPAM fails DEL ("no plugin name provided"); the link still goes
  await link.delContainerLink(req, { ipamAlways: true, remove: (ifName) => nl.deleteLinkIfExists(ifName) });
}

async function check(req: Request<DummyConf>): Promise<void> {
  requireIpam(req.conf);
  await link.checkContainerLink(req, {
    ipamAlways: true,
    missingPrevResult: 'dummy: Required prevResult missing',
    link: { kind: { kind: 'dummy', label: 'dummy' }, requireUp: true },
    routes: false,
  });
}

/** STATUS: the IPAM's, also without an IPAM type (the reference's "no plugin name provided"); GC: the IPAM's. */
async function status(req: Request<DummyConf>): Promise<void> {
  await link.ipamStatus(req, true);
}

export const plugin = link.linkPlugin('dummy', { conf: parseConf, add, del, check, status });
