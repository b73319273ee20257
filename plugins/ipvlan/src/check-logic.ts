/**
 * CHECK's look at the container interface (the reference's `validateCniContainerInterface`): an ipvlan of the
 * configured mode with prevResult's MAC, as @cnikit/link's validateContainerInterface checks (unit-tested over a
 * lookup function; the real lookup is @cnikit/netlink's getLinkDetails inside the container).
 */
import { type ContainerLinkCheck, type ModeLinkView, modeLinkCheck } from '@cnikit/link';
import { modeFromString } from './config.ts';

export type IpvlanLinkView = ModeLinkView;

export function ipvlanLinkCheck(modeExpected: string): ContainerLinkCheck<IpvlanLinkView> {
  return modeLinkCheck({
    kind: 'ipvlan',
    want: () => modeFromString(modeExpected),
    modes: ['l2', 'l3', 'l3s'],
    label: 'Container IPVlan',
  });
}
