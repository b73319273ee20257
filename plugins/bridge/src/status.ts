/** STATUS: the IPAM's STATUS (the bridge itself has no prerequisite to report). */
import { delegateStatus, type Request } from '@cnikit/skel';
import { decodeNetConf } from './config.ts';

export async function cmdStatus(req: Request): Promise<void> {
  const conf = decodeNetConf(req.config);
  if (conf.ipamType !== '') await delegateStatus(conf.ipamType, req);
}
