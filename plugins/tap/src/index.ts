/**
 * tap: a persistent tap device in the container (owner, group, multiqueue, MTU, MAC, optional bridge port), for
 * VM-based runtimes (drop-in for the reference plugin).
 */
import { ALL_VERSIONS, type Plugin, CNIKIT_VERSION as VERSION } from '@cnikit/skel';
import { parseConf, type TapConf } from './config.ts';
import { cmdAdd, cmdCheck, cmdDel, cmdGc, cmdStatus } from './verbs.ts';

export const plugin: Plugin<TapConf> = {
  name: 'tap',
  ipam: false,
  about: `CNI tap plugin cnikit ${VERSION}`,
  versions: ALL_VERSIONS,
  conf: parseConf,
  add: cmdAdd,
  del: cmdDel,
  check: cmdCheck,
  gc: cmdGc,
  status: cmdStatus,
};
