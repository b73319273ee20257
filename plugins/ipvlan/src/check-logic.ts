/**
 * CHECK's look at the container interface (the reference's `validateCniContainerInterface`): an ipvlan of the
 * configured mode with prevResult's MAC, as @cnikit/link's validateContainerInterface checks (unit-tested over a
 * lookup function; the real lookup is @cnikit/netlink's getLinkDetails inside the container).
 */
import type { ContainerLinkCheck } from '@cnikit/link';
import { modeFromString } from './config.ts';

export interface IpvlanLinkView {
  name: string;
  kind: string | undefined;
  mac: string;
  ipvlan?: { mode: string };
}

export function ipvlanLinkCheck(modeExpected: string): ContainerLinkCheck<IpvlanLinkView> {
  return {
    kind: { kind: 'ipvlan', label: 'ipvlan', data: true },
    kindData: (link) => {
      const want = modeFromString(modeExpected);
      const have = link.ipvlan?.mode ?? '';
      if (have === want) return;
      if (!['l2', 'l3', 'l3s'].includes(have)) throw new Error(`unknown ipvlan mode: ${have}`);
      throw new Error(`Container IPVlan mode ${have} does not match expected value: ${want}`);
    },
  };
}
