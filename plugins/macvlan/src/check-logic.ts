/**
 * CHECK's look at the container interface (the reference's `validateCniContainerInterface`): a macvlan of the
 * configured mode with prevResult's MAC, as @cnikit/link's validateContainerInterface checks (unit-tested over a
 * lookup function; the real lookup is @cnikit/netlink's getLinkDetails inside the container namespace). The messages
 * are the reference's: HEAD spells them lower-case for macvlan.
 */
import { type ContainerLinkCheck, type ModeLinkView, modeLinkCheck } from '@cnikit/link';
import { modeFromString } from './config.ts';

export type MacvlanLinkView = ModeLinkView;

export function macvlanLinkCheck(modeExpected: string): ContainerLinkCheck<MacvlanLinkView> {
  return modeLinkCheck({
    kind: 'macvlan',
    lowerCase: true,
    want: () => modeFromString(modeExpected),
    modes: ['bridge', 'private', 'vepa', 'passthru'],
    label: 'container macvlan',
  });
}
