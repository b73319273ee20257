/**
 * ptp: a veth pair whose container end routes everything through the host end (the IPAM gateway lives on the
 * host end as a /32), optional masquerade (drop-in for the reference plugin; kind's kindnetd uses it with
 * host-local and portmap).
 */
import * as fw from '@cnikit/firewall';
import { checkContainerLink, ipamGc, ipamStatus, linkPlugin } from '@cnikit/link';
import { ErrorList, type Request } from '@cnikit/skel';
import { add } from './add.ts';
import { type PtpConf, parseConf } from './config.ts';
import { del } from './del.ts';

/** CHECK in the reference's order: netns, IPAM CHECK, prevResult, then the container's veth, addresses and routes. */
async function check(req: Request<PtpConf>): Promise<void> {
  await checkContainerLink(req, {
    ipamAlways: true,
    missingPrevResult: 'ptp: Required prevResult missing',
    link: { prefix: 'ptp: ', kind: { kind: 'veth', label: 'veth/p2p' } },
  });
}

/**
 * GC (the reference has none for ptp): the IPAM's GC, then the masquerade rules of attachments that are not in
 * the valid list (also when ipMasq is now off: earlier attachments may have rules).
 */
async function gc(req: Request<PtpConf>): Promise<void> {
  const valid = req.validAttachments ?? [];
  const errors = new ErrorList();
  await errors.run('', () => ipamGc(req, true));
  errors.run('', () =>
    fw.gcIPMasq(
      req.conf.name,
      valid.map((a) => ({ containerID: a.containerID, ifName: a.ifname })),
    ),
  );
  errors.throwIfAny();
}

/** STATUS: the IPAM's STATUS. */
async function status(req: Request<PtpConf>): Promise<void> {
  await ipamStatus(req, true);
}

export const plugin = linkPlugin('ptp', { conf: parseConf, add, del, check, gc, status });
