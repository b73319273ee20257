/**
 * GC (the reference implements none for bridge): IPAM GC, then masquerade rules of attachments that are not in the
 * valid list (also when ipMasq is now off: rules of earlier attachments may remain), and stale spoof-check rules.
 * Every failure is reported; the IPAM's error code wins.
 */
import * as fw from '@cnikit/firewall';
import { delegateGc, ErrorList, type Request } from '@cnikit/skel';
import { decodeNetConf, uniqueID } from './config.ts';

export async function cmdGc(req: Request): Promise<void> {
  const conf = decodeNetConf(req.config);
  const valid = req.validAttachments ?? [];
  const errors = new ErrorList();
  if (conf.ipamType !== '') {
    await errors.run('', () => delegateGc(conf.ipamType, req));
    errors.run('', () =>
      fw.gcIPMasq(
        conf.name,
        valid.map((a) => ({ containerID: a.containerID, ifName: a.ifname })),
      ),
    );
  }
  if (conf.macspoofchk) {
    errors.run('', () => fw.gcSpoofCheck(new Set(valid.map((a) => uniqueID(a.containerID, a.ifname)))));
  }
  errors.throwIfAny();
}
