/**
 * DEL: IPAM DEL, then the device back to the host under its original name, with the addresses and up state it had
 * before ADD (and its MAC, MTU and alias, which the container may have changed). Idempotent: a missing namespace or
 * a device no longer in the container is not an error (the reference fails in both cases); a device the kernel
 * returned to the host when the namespace died (container-side name or dev%d) is found by the hardware identifiers
 * ADD saved (permanent MAC, parent bus device) or its MAC and alias, renamed back and restored. Keeps going after a
 * failure and reports every failure at the end; the state file stays while the device could not be restored.
 */
import { closeSync } from 'node:fs';
import { openContainerNetns } from '@cnikit/link';
import * as nl from '@cnikit/netlink';
import { delegateDel, ErrorList, type Request } from '@cnikit/skel';
import type { HostDeviceConf } from './config.ts';
import { moveLinkOut, reclaimReturned } from './move.ts';
import { readState, removeState, restoreDevice, stateName } from './state.ts';

export async function del(req: Request<HostDeviceConf>): Promise<void> {
  const conf = req.conf;
  const errors = new ErrorList();
  const state = stateName(req.containerId, req.ifName);
  if (conf.ipamType !== '') await errors.run('', () => delegateDel(conf.ipamType, req));
  let done = true;
  /** Not in the container (any more): the kernel may have returned it to the host when the namespace died. */
  const reclaim = () => {
    const saved = readState(conf.dataDir, conf.name, state);
    try {
      if (!saved || !reclaimReturned(saved)) return;
      const errs = restoreDevice(saved);
      if (errs.length) throw new Error(errs.join('; '));
    } catch (err) {
      done = false;
      throw err;
    }
  };
  if (req.netns !== '') {
    errors.run('', () => {
      let fd: number;
      try {
        fd = openContainerNetns(req.netns);
      } catch (err) {
        if (nl.isNetnsGoneForDel(err, req.netns)) return reclaim();
        throw err;
      }
      try {
        const original = moveLinkOut(fd, req.ifName);
        if (original === undefined) return reclaim();
        const saved = readState(conf.dataDir, conf.name, state);
        if (saved && saved.device === original) {
          const errs = restoreDevice(saved);
          if (errs.length) throw new Error(errs.join('; '));
        }
      } catch (err) {
        done = false;
        throw err;
      } finally {
        closeSync(fd);
      }
    });
  }
  // the saved state is dropped once the device is back (or cannot come back: its namespace is gone)
  if (done) errors.run('', () => removeState(conf.dataDir, conf.name, state));
  errors.throwIfAny();
}
