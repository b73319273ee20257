/**
 * ADD in the reference's order: find the host device, move it into the container (renamed, original name in the
 * alias), then the IPAM and its addresses/routes. cnikit also records the device before the move (state.ts: what
 * DEL restores and what finds it again), and undoes everything when a later step fails (the reference releases only the IPAM allocation and leaves the
 * device in the container).
 */
import { closeSync } from 'node:fs';
import { configureIface, ipamAdd, openContainerNetns } from '@cnikit/link';
import * as nl from '@cnikit/netlink';
import {
  errorReason,
  internalError,
  type Request,
  type Result,
  Rollback,
  validateDelegate,
} from '@cnikit/skel';
import type { HostDeviceConf } from './config.ts';
import { moveLinkIn, moveLinkOut } from './move.ts';
import { captureDevice, readState, removeState, restoreDevice, saveState, stateName } from './state.ts';
import { findHostLink, hasDpdkDriver, resolveDeviceID } from './sysfs.ts';

/** runtimeConfig.deviceID and the DPDK check (sysfs), as the reference's loadConf does for ADD/CHECK/DEL. */
export function resolveSelection(conf: HostDeviceConf) {
  const { pciBusID, auxDevice } = resolveDeviceID(conf.deviceID, conf.pciBusID);
  const dpdkMode = pciBusID !== '' ? hasDpdkDriver(pciBusID) : conf.dpdkMode;
  return { ...conf, pciBusID, auxDevice, dpdkMode };
}

export async function add(req: Request<HostDeviceConf>): Promise<Result> {
  const conf = resolveSelection(req.conf);
  // configuration errors, the IPAM's included, are raised before the first change
  if (conf.ipamType !== '') await validateDelegate(conf.ipamType, req, { ipam: true });
  const fd = openContainerNetns(req.netns);
  const undo = new Rollback();
  const state = stateName(req.containerId, req.ifName);
  try {
    const result: Result = { cniVersion: '1.1.0', interfaces: [{ name: req.ifName, sandbox: req.netns }] };
    if (!conf.dpdkMode) {
      let hostName: string;
      try {
        hostName = findHostLink(
          conf,
          () => nl.listLinks(),
          (n) => nl.getLink(n) !== undefined,
        );
      } catch (err) {
        throw internalError(`failed to find host device: ${errorReason(err)}`, err);
      }
      // `device` may be an alternative name: the alias and the DEL restore use the link's name
      hostName = nl.getLinkOrThrow(hostName).name;
      const saved = captureDevice(hostName);
      saveState(conf.dataDir, conf.name, state, saved);
      undo.push('remove state', () => removeState(conf.dataDir, conf.name, state));
      let cont: nl.Link;
      try {
        cont = moveLinkIn(hostName, fd, req.ifName);
      } catch (err) {
        // a move undone after the kernel took the device across drops its addresses: put them back
        restoreDevice(saved);
        throw internalError(`failed to move link ${errorReason(err)}`, err);
      }
      undo.push('move the device back', () => {
        if (moveLinkOut(fd, req.ifName)) {
          const errs = restoreDevice(readState(conf.dataDir, conf.name, state) ?? saved);
          if (errs.length) throw new Error(errs.join('; '));
        }
      });
      result.interfaces = [{ name: cont.name, mac: cont.mac, sandbox: req.netns }];
    }
    if (conf.ipamType === '') return result;

    const ipam = await ipamAdd(conf.ipamType, req, undo);
    if (!ipam.ips || ipam.ips.length === 0) throw internalError('IPAM plugin returned missing IP config');
    const out: Result = {
      cniVersion: '1.1.0',
      interfaces: result.interfaces,
      ips: ipam.ips.map((ip) => ({ ...ip, interface: 0 })),
      routes: (ipam.routes ?? []).map((r) => ({ ...r })),
    };
    if (!conf.dpdkMode) nl.withNetnsFd(fd, () => configureIface(req.ifName, out));
    // the reference replaces the IPAM's DNS with the network config's, set or not
    if (conf.dns) out.dns = structuredClone(conf.dns);
    return out;
  } catch (err) {
    await undo.undoAll(req.log);
    throw err;
  } finally {
    closeSync(fd);
  }
}
