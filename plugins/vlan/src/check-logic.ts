/**
 * CHECK's validation of the container interface (the reference's `validateCniContainerInterface` for vlan, with its
 * messages verbatim — including the "Tuning" wording of the VLAN ID and MTU mismatches), over a lookup function so it
 * can be unit-tested; the real lookup is @cnikit/netlink's getLinkDetails inside the container.
 */
import type { Interface } from '@cnikit/skel';

export interface VlanLinkView {
  name: string;
  kind: string | undefined;
  mac: string;
  mtu: number;
  vlan?: { id: number };
}

function fail(msg: string): never {
  throw new Error(msg);
}

/** The container interface exists, is a vlan with the configured ID (and MTU, when configured) and prevResult's MAC. */
export function validateVlanInterface(
  intf: Interface,
  vlanId: number,
  mtu: number,
  lookup: (name: string) => VlanLinkView | undefined,
): void {
  if (!intf.name) fail('Container interface name missing in prevResult: ');
  const link = lookup(intf.name);
  if (!link) fail(`vlan: Container Interface name in prevResult: ${intf.name} not found`);
  if (!intf.sandbox) fail(`vlan: Error: Container interface ${link.name} should not be in host namespace`);
  if (link.kind !== 'vlan' || !link.vlan) fail(`Error: Container interface ${link.name} not of type vlan`);
  if (intf.mac && intf.mac !== link.mac)
    fail(`vlan: Interface ${intf.name} Mac ${intf.mac} doesn't match container Mac: ${link.mac}`);
  if (vlanId !== link.vlan.id)
    fail(`Error: Tuning link ${intf.name} configured promisc is ${vlanId}, current value is ${link.vlan.id}`);
  if (mtu !== 0 && mtu !== link.mtu)
    fail(`Error: Tuning configured MTU of ${intf.name} is ${mtu}, current value is ${link.mtu}`);
}
