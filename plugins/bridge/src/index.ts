/**
 * bridge: a Linux bridge in the host namespace, a veth pair into the container, optional delegated
 * IPAM, gateway addresses, masquerade and MAC spoof checking (drop-in for the reference plugin).
 * The plugin object and its verbs; ADD (the long one) is in add.ts, the kernel views in kernel.ts, CHECK's
 * validation logic in check-logic.ts.
 */
import { closeSync } from 'node:fs';
import * as fw from '@cnikit/firewall';
import { linkPlugin, removeInNetns } from '@cnikit/link';
import * as nl from '@cnikit/netlink';
import {
  CniError,
  delegateCheck,
  delegateDel,
  delegateGc,
  ErrorCode,
  ErrorList,
  errorReason,
  internalError,
  type Request,
} from '@cnikit/skel';
import { add } from './add.ts';
import { checkAttachment } from './check-logic.ts';
import { type BridgeConf, parseConf, uniqueID } from './config.ts';
import { checkEnv } from './kernel.ts';

/**
 * DEL: idempotent. Removes the container interface (and with it the host veth), releases the IPAM allocation,
 * removes masquerade rules of both backends and the spoof-check rules — also when the namespace or interface is
 * already gone (the firewall teardown does not need the addresses). Keeps going after a failure and reports every
 * failure at the end.
 */
async function del(req: Request<BridgeConf>): Promise<void> {
  const conf = req.conf;
  const l3 = conf.ipamType !== '';
  const errors = new ErrorList();
  let addrs: string[] = [];
  if (req.netns !== '') {
    // any other netns or netlink error is reported at the end: IPAM DEL and the firewall teardown still run
    // a namespace that is gone (or the empty file of an unmounted bind mount) has nothing to delete in it
    errors.run('', () =>
      removeInNetns(req.netns, () => {
        addrs = nl.delLinkByNameAddr(req.ifName);
      }),
    );
  }
  if (l3) await errors.run('', () => delegateDel(conf.ipamType, req));
  if (conf.macspoofchk) {
    // like the reference, a spoof-check teardown failure is reported on stderr and does not fail DEL
    // (GC removes what is left once the interface is gone)
    try {
      fw.teardownSpoofCheck(uniqueID(req.containerId, req.ifName));
    } catch (err) {
      req.log.warn(errorReason(err));
    }
  }
  if (l3 && conf.ipMasq) {
    errors.run('', () =>
      fw.teardownIPMasq({ ips: addrs, network: conf.name, ifName: req.ifName, containerID: req.containerId }),
    );
  }
  errors.throwIfAny();
}

/** CHECK: the IPAM CHECK, then the attachment against prevResult (check-logic.ts) over the kernel's view. */
async function check(req: Request<BridgeConf>): Promise<void> {
  const conf = req.conf;
  if (!nl.isNetns(req.netns)) {
    // reproduce the reference's message for a bad path
    try {
      closeSync(nl.openNetnsFd(req.netns));
    } catch (err) {
      throw internalError(`failed to open netns ${JSON.stringify(req.netns)}: ${errorReason(err)}`, err);
    }
  }
  if (conf.ipamType === '') {
    throw new CniError(
      ErrorCode.InvalidNetworkConfig,
      'CHECK is not supported for a bridge without IPAM (ipam.type is empty)',
      'the reference plugin fails here with "no plugin name provided"; CHECK validates the IPAM allocation',
    );
  }
  await delegateCheck(conf.ipamType, req);
  if (!req.prevResult) throw internalError('Required prevResult missing');
  checkAttachment(
    checkEnv(req.netns),
    { bridge: conf.bridge, promiscMode: conf.promiscMode, ifName: req.ifName, netns: req.netns },
    req.prevResult,
  );
}

/**
 * GC (the reference implements none for bridge): IPAM GC, then masquerade rules of attachments that are not in the
 * valid list (also when ipMasq is now off: rules of earlier attachments may remain), and stale spoof-check rules.
 * Every failure is reported; the IPAM's error code wins.
 */
async function gc(req: Request<BridgeConf>): Promise<void> {
  const conf = req.conf;
  const valid = req.validAttachments ?? [];
  const errors = new ErrorList();
  if (conf.ipamType !== '') {
    await errors.run('', () => delegateGc(conf.ipamType, req));
    errors.run('', () =>
      fw.gcIPMasq(
        conf.name,
        valid.map((a) => ({ containerID: a.containerID, ifName: a.ifname })),
      ),
    );
  }
  if (conf.macspoofchk) {
    errors.run('', () => fw.gcSpoofCheck(new Set(valid.map((a) => uniqueID(a.containerID, a.ifname)))));
  }
  errors.throwIfAny();
}

// STATUS: the IPAM's STATUS (linkPlugin's: the bridge itself has no prerequisite to report)
export const plugin = linkPlugin('bridge', { conf: parseConf, add, del, check, gc });
