/** dummy: a dummy link in the container with the IPAM's addresses (drop-in for the reference plugin, HEAD only). */
import { ALL_VERSIONS, type Plugin, CNIKIT_VERSION as VERSION } from '@cnikit/skel';
import { type DummyConf, parseConf } from './config.ts';
import { cmdAdd, cmdCheck, cmdDel, cmdGc, cmdStatus } from './verbs.ts';

export const plugin: Plugin<DummyConf> = {
  name: 'dummy',
  ipam: false,
  about: `CNI dummy plugin cnikit ${VERSION}`,
  versions: ALL_VERSIONS,
  conf: parseConf,
  add: cmdAdd,
  del: cmdDel,
  check: cmdCheck,
  gc: cmdGc,
  status: cmdStatus,
};
