/**
 * The tap device: created persistent in the container namespace under a temporary name (TUNSETIFF would attach to
 * an existing tap of the wanted name instead of failing), with owner/group/flags, then MTU, MAC, renamed, enslaved
 * to `bridge` (a bridge inside the container, as in the reference) and set up. With an SELinux context the device is
 * created by `ip tuntap` run under that exec label, like the reference (only where SELinux is enabled).
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import * as nl from '@cnikit/netlink';
import { errorReason, type Interface, internalError } from '@cnikit/skel';
import { tunCreate } from '@cnikit/sys';
import { type TapConf, tapFlags } from './config.ts';

const q = JSON.stringify;

function selinuxEnabled(): boolean {
  return existsSync('/sys/fs/selinux/enforce');
}

/** `ip tuntap add` under the SELinux exec label (the label applies to the next execve of this thread). */
function createWithIptool(name: string, conf: TapConf): void {
  try {
    writeFileSync('/proc/thread-self/attr/exec', conf.selinuxContext);
  } catch (err) {
    throw internalError(`failed set socket label: ${errorReason(err)}`, err);
  }
  const args = ['tuntap', 'add', 'mode', 'tap', 'name', name];
  if (conf.multiQueue) args.push('multi_queue');
  if (conf.owner !== undefined) args.push('user', String(conf.owner));
  if (conf.group !== undefined) args.push('group', String(conf.group));
  const r = spawnSync('ip', args, { encoding: 'utf8' });
  if (r.status !== 0)
    throw internalError(`failed to run command ${r.stdout}${r.stderr}: exit status ${r.status}`);
}

/**
 * The temporary name a tap for `ifName` is created under before its rename: derived from `ifName` (the reference's
 * is random), so that the persistent tap of an ADD killed before its rename is found again — removed by DEL and by
 * the next ADD — instead of staying in the container under a name nothing knows.
 */
export function tempTapName(ifName: string): string {
  return `cnitap${createHash('sha256').update(ifName).digest('hex').slice(0, 9)}`;
}

/** Deletes the tap a killed ADD for `ifName` left under its temporary name (only a tun/tap link of that name). */
export function deleteTempTap(ifName: string): void {
  const l = nl.getLink(tempTapName(ifName));
  if (l?.kind === 'tun') nl.deleteLinkIfExists(l.index);
}

/** In the container namespace (the caller's thread is there). */
export function createTap(conf: TapConf, ifName: string, sandbox: string): Interface {
  const tmp = tempTapName(ifName);
  deleteTempTap(ifName);
  if (nl.getLink(tmp)) throw internalError(`failed to create tap: ${q(tmp)} exists and is not a tap`);
  try {
    if (conf.selinuxContext !== '' && selinuxEnabled()) createWithIptool(tmp, conf);
    else tunCreate(tmp, tapFlags(conf), conf.owner ?? -1, conf.group ?? -1);
  } catch (err) {
    throw internalError(`failed to create tap: ${errorReason(err)}`, err);
  }
  const link = nl.getLinkOrThrow(tmp);
  try {
    if (conf.mtu > 0) nl.setMtu(link.index, conf.mtu);
    if (conf.mac !== '') nl.setMac(link.index, conf.mac);
    try {
      nl.renameLink(link.index, ifName);
    } catch (err) {
      throw internalError(`failed to rename tap to ${q(ifName)}: ${errorReason(err)}`, err);
    }
    if (conf.bridge !== '') {
      const br = nl.getLink(conf.bridge);
      if (!br) throw internalError(`failed to get bridge ${conf.bridge}: Link not found`);
      try {
        nl.setMaster(link.index, br.index);
      } catch (err) {
        throw internalError(
          `failed to set tap ${ifName} as a port of bridge ${conf.bridge}: ${errorReason(err)}`,
          err,
        );
      }
    }
    try {
      nl.setLinkUp(link.index);
    } catch (err) {
      throw internalError(`failed to set tap interface up: ${errorReason(err)}`, err);
    }
  } catch (err) {
    nl.deleteLinkIfExists(link.index);
    throw err;
  }
  const l = nl.getLinkOrThrow(link.index);
  return { name: l.name, mac: l.mac, sandbox };
}
