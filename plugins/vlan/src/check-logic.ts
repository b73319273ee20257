/**
 * CHECK's look at the container interface (the reference's `validateCniContainerInterface` for vlan, with its
 * messages verbatim — including the "Tuning" wording of the VLAN ID and MTU mismatches), as @cnikit/link's
 * validateContainerInterface checks (unit-tested over a lookup function; the real lookup is @cnikit/netlink's
 * getLinkDetails inside the container).
 */
import type { ContainerLinkCheck } from '@cnikit/link';

export interface VlanLinkView {
  name: string;
  kind: string | undefined;
  mac: string;
  mtu: number;
  vlan?: { id: number };
}

/** A vlan with the configured ID (and MTU, when configured) and prevResult's MAC. */
export function vlanLinkCheck(vlanId: number, mtu: number): ContainerLinkCheck<VlanLinkView> {
  return {
    prefix: 'vlan: ',
    kind: { kind: 'vlan', label: 'vlan', data: true },
    after: (link) => {
      const id = link.vlan?.id;
      if (vlanId !== id)
        throw new Error(
          `Error: Tuning link ${link.name} configured promisc is ${vlanId}, current value is ${id}`,
        );
      if (mtu !== 0 && mtu !== link.mtu)
        throw new Error(
          `Error: Tuning configured MTU of ${link.name} is ${mtu}, current value is ${link.mtu}`,
        );
    },
  };
}
