/**
 * host-device: moves an existing host link (by name, MAC, kernel path, PCI address or runtimeConfig.deviceID) into
 * the container and back on DEL (drop-in for the reference plugin; Multus/OpenShift/KubeVirt secondary networks).
 */
import { ALL_VERSIONS, type Plugin, CNIKIT_VERSION as VERSION } from '@cnikit/skel';
import { cmdAdd } from './add.ts';
import { cmdCheck } from './check.ts';
import { type HostDeviceConf, parseConf } from './config.ts';
import { cmdDel } from './del.ts';
import { cmdGc, cmdStatus } from './gcstatus.ts';

export const plugin: Plugin<HostDeviceConf> = {
  name: 'host-device',
  ipam: false,
  about: `CNI host-device plugin cnikit ${VERSION}`,
  versions: ALL_VERSIONS,
  conf: parseConf,
  add: cmdAdd,
  del: cmdDel,
  check: cmdCheck,
  gc: cmdGc,
  status: cmdStatus,
};
