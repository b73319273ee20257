/**
 * bridge: a Linux bridge in the host namespace, a veth pair into the container, optional delegated
 * IPAM, gateway addresses, masquerade and MAC spoof checking (drop-in for the reference plugin).
 */
import { closeSync } from 'node:fs';
import * as fw from '@cnikit/firewall';
import * as nl from '@cnikit/netlink';
import {
  ALL_VERSIONS,
  CniError,
  delegateCheck,
  delegateDel,
  delegateGc,
  delegateStatus,
  ErrorCode,
  type Plugin,
  type Request,
} from '@cnikit/skel';
import { cmdAdd } from './add.ts';
import { checkAttachment } from './check.ts';
import { decodeNetConf, loadNetConf, uniqueID } from './config.ts';
import * as k from './kernel.ts';

const VERSION = '0.1.0';

function errText(err: unknown): string {
  if (CniError.is(err)) return err.msg;
  return err instanceof Error ? err.message : String(err);
}

/**
 * DEL: idempotent. Removes the container interface (and with it the host veth), releases the IPAM
 * allocation, removes masquerade rules of both backends and the spoof-check rules — also when the
 * namespace or interface is already gone (the firewall teardown does not need the addresses).
 * Keeps going after a failure and reports all failures at the end.
 */
export async function cmdDel(req: Request): Promise<void> {
  const conf = loadNetConf(req.config, req.args);
  const l3 = conf.ipamType !== '';
  const errors: CniError[] = [];
  const step = async (what: string, fn: () => unknown) => {
    try {
      await fn();
    } catch (err) {
      const e = CniError.from(err);
      errors.push(what ? new CniError(e.code, `${what}: ${e.msg}`, e.details) : e);
    }
  };

  let addrs: string[] = [];
  if (req.netns !== '') {
    // any other netns or netlink error is reported at the end: IPAM DEL and the firewall teardown still run
    await step('', () => {
      try {
        addrs = k.inNetnsPath(req.netns, () => nl.delLinkByNameAddr(req.ifName));
      } catch (err) {
        // a missing namespace, or the empty file left by an unmounted bind mount: nothing to delete in it
        if (!nl.isNetnsGoneForDel(err, req.netns)) throw err;
      }
    });
  }

  if (l3) await step('', () => delegateDel(conf.ipamType, req));
  if (conf.macspoofchk) {
    // like the reference, a spoof-check teardown failure is reported on stderr and does not fail DEL
    // (GC removes what is left once the interface is gone)
    try {
      fw.teardownSpoofCheck(uniqueID(req.containerId, req.ifName));
    } catch (err) {
      req.log.warn(errText(err));
    }
  }
  if (l3 && conf.ipMasq) {
    await step('', () => k.ipMasqTeardown(addrs, conf.name, req.ifName, req.containerId));
  }
  if (errors.length === 1) throw errors[0];
  if (errors.length > 1) {
    throw new CniError(errors[0]!.code, errors.map((e) => e.msg).join('\n'));
  }
}

export async function cmdCheck(req: Request): Promise<void> {
  const conf = loadNetConf(req.config, req.args);
  if (!nl.isNetns(req.netns)) {
    // reproduce the reference's message for a bad path
    try {
      closeSync(nl.openNetnsFd(req.netns));
    } catch (err) {
      throw new CniError(
        ErrorCode.Internal,
        `failed to open netns ${JSON.stringify(req.netns)}: ${errText(err)}`,
      );
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
  if (!req.prevResult) throw new CniError(ErrorCode.Internal, 'Required prevResult missing');
  checkAttachment(
    k.checkEnv(req.netns),
    { bridge: conf.bridge, promiscMode: conf.promiscMode, ifName: req.ifName, netns: req.netns },
    req.prevResult,
  );
}

export async function cmdStatus(req: Request): Promise<void> {
  const conf = decodeNetConf(req.config);
  if (conf.ipamType !== '') await delegateStatus(conf.ipamType, req);
}

/**
 * GC: IPAM GC, then remove masquerade rules of attachments that are not in the valid list, and stale
 * spoof-check rules (macspoofchk). The reference implements no GC for bridge.
 */
export async function cmdGc(req: Request): Promise<void> {
  const conf = decodeNetConf(req.config);
  const errors: string[] = [];
  let code: number = ErrorCode.Internal;
  if (conf.ipamType !== '') {
    try {
      await delegateGc(conf.ipamType, req);
    } catch (err) {
      const e = CniError.from(err);
      code = e.code;
      errors.push(e.msg);
    }
  }
  // also when ipMasq is now off: rules of earlier attachments may remain
  if (conf.ipamType !== '') {
    try {
      await k.ipMasqGc(conf.name, req.validAttachments ?? []);
    } catch (err) {
      errors.push(errText(err));
    }
  }
  if (conf.macspoofchk) {
    try {
      const valid = new Set((req.validAttachments ?? []).map((a) => uniqueID(a.containerID, a.ifname)));
      fw.gcSpoofCheck(valid);
    } catch (err) {
      errors.push(errText(err));
    }
  }
  if (errors.length) throw new CniError(code, errors.join('\n'));
}

export const plugin: Plugin = {
  name: 'bridge',
  about: `CNI bridge plugin cnikit ${VERSION}`,
  versions: ALL_VERSIONS,
  add: cmdAdd,
  del: cmdDel,
  check: cmdCheck,
  status: cmdStatus,
  gc: cmdGc,
};
