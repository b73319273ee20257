/**
 * ptp: a veth pair whose container end routes everything through the host end (the IPAM gateway lives on the
 * host end as a /32), optional masquerade (drop-in for the reference plugin; kind's kindnetd uses it with
 * host-local and portmap).
 */
import { ALL_VERSIONS, type Plugin, CNIKIT_VERSION as VERSION } from '@cnikit/skel';
import { cmdAdd } from './add.ts';
import { cmdCheck } from './check.ts';
import { type PtpConf, parseConf } from './config.ts';
import { cmdDel } from './del.ts';
import { cmdGc, cmdStatus } from './gcstatus.ts';

export const plugin: Plugin<PtpConf> = {
  name: 'ptp',
  ipam: false,
  about: `CNI ptp plugin cnikit ${VERSION}`,
  versions: ALL_VERSIONS,
  conf: parseConf,
  add: cmdAdd,
  del: cmdDel,
  check: cmdCheck,
  gc: cmdGc,
  status: cmdStatus,
};
