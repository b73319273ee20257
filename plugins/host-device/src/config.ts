/**
 * host-device network configuration: decoding with the reference's messages and the "which device" rule. Pure;
 * the sysfs part (runtimeConfig.deviceID, DPDK drivers) is in sysfs.ts and runs in ADD/CHECK/DEL.
 */
import { IPAM_KEYS, type LinkConfBase, linkConfBase, NETCONF_KEYS } from '@cnikit/link';
import { CniError, decodeNetconf, ErrorCode, type RequestBase, s } from '@cnikit/skel';

export const DEFAULT_DATA_DIR = '/var/lib/cni/host-device';

export const hostDeviceSchema = s.object({
  ...NETCONF_KEYS,
  device: s.string().default(''),
  hwaddr: s.string().default(''),
  kernelpath: s.string().default(''),
  pciBusID: s.string().default(''),
  // the reference's NetConf has an untagged exported DPDKMode field: Go's decoder fills it from "DPDKMode"
  DPDKMode: s.bool().default(false),
  // cnikit: where the device's original addresses and state are kept between ADD and DEL
  dataDir: s.string().default(DEFAULT_DATA_DIR),
  runtimeConfig: s.object({ deviceID: s.string().default('') }).optional(),
  ...IPAM_KEYS,
});

export interface HostDeviceConf extends LinkConfBase {
  device: string;
  hwaddr: string;
  kernelpath: string;
  pciBusID: string;
  dpdkMode: boolean;
  deviceID: string;
  dataDir: string;
}

export const SPECIFY_EITHER = 'specify either "device", "hwaddr", "kernelpath" or "pciBusID"';

/**
 * Decode; errors read "failed to load netconf: …". ADD, CHECK and DEL need one of the four device keys (or
 * runtimeConfig.deviceID), like the reference; GC and STATUS do not look at the device.
 */
export function parseConf(raw: unknown, req?: Pick<RequestBase, 'command'>): HostDeviceConf {
  const c = decodeNetconf(hostDeviceSchema, raw);
  const conf: HostDeviceConf = {
    ...linkConfBase(c),
    device: c.device,
    hwaddr: c.hwaddr,
    kernelpath: c.kernelpath,
    pciBusID: c.pciBusID,
    dpdkMode: c.DPDKMode,
    deviceID: c.runtimeConfig?.deviceID ?? '',
    dataDir: c.dataDir,
  };
  const verb = req?.command;
  if (verb !== 'GC' && verb !== 'STATUS') {
    if (!conf.device && !conf.hwaddr && !conf.kernelpath && !conf.pciBusID && !conf.deviceID)
      throw new CniError(ErrorCode.InvalidNetworkConfig, SPECIFY_EITHER);
  }
  return conf;
}
