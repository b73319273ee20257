/**
 * CHECK's look at the container interface (the reference's `validateCniContainerInterface`): a macvlan of the
 * configured mode with prevResult's MAC, as @cnikit/link's validateContainerInterface checks (unit-tested over a
 * lookup function; the real lookup is @cnikit/netlink's getLinkDetails inside the container namespace). The messages
 * are the reference's: HEAD spells them lower-case for macvlan.
 */
import type { ContainerLinkCheck } from '@cnikit/link';
import { modeFromString } from './config.ts';

export interface MacvlanLinkView {
  name: string;
  kind: string | undefined;
  mac: string;
  macvlan?: { mode: string };
}

export function macvlanLinkCheck(modeExpected: string): ContainerLinkCheck<MacvlanLinkView> {
  return {
    lowerCase: true,
    kind: { kind: 'macvlan', label: 'macvlan', data: true },
    kindData: (link) => {
      const want = modeFromString(modeExpected);
      const have = link.macvlan?.mode ?? '';
      if (have === want) return;
      if (!['bridge', 'private', 'vepa', 'passthru'].includes(have))
        throw new Error(`unknown macvlan mode: ${have}`);
      throw new Error(`container macvlan mode ${have} does not match expected value: ${want}`);
    },
  };
}
