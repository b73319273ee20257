/**
 * The tap device: created persistent in the container namespace under a temporary name (TUNSETIFF would attach to
 * an existing tap of the wanted name instead of failing), with owner/group/flags, then MTU, MAC, renamed, enslaved
 * to `bridge` (a bridge inside the container, as in the reference) and set up. With an SELinux context the device is
 * created by `ip tuntap` run under that exec label, like the reference (only where SELinux is enabled).
 */
import { spawnSync } from 'node:child_process';
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

/** In the container namespace (the caller's thread is there). */
export function createTap(conf: TapConf, ifName: string, sandbox: string): Interface {
  let tmp = '';
  for (let i = 0; i < 10 && tmp === ''; i++) {
    const name = nl.randomVethName();
    if (nl.getLink(name)) continue;
    try {
      if (conf.selinuxContext !== '' && selinuxEnabled()) createWithIptool(name, conf);
      else tunCreate(name, tapFlags(conf), conf.owner ?? -1, conf.group ?? -1);
      tmp = name;
    } catch (err) {
      throw internalError(`failed to create tap: ${errorReason(err)}`, err);
    }
  }
  if (tmp === '') throw internalError('failed to find a unique tap name');
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
