/**
 * bridge: a Linux bridge in the host namespace, a veth pair into the container, optional delegated
 * IPAM, gateway addresses, masquerade and MAC spoof checking (drop-in for the reference plugin).
 */
import { ALL_VERSIONS, type Plugin, CNIKIT_VERSION as VERSION } from '@cnikit/skel';
import { cmdAdd } from './add.ts';
import { cmdCheck } from './check.ts';
import { cmdDel } from './del.ts';
import { cmdGc } from './gc.ts';
import { cmdStatus } from './status.ts';

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
