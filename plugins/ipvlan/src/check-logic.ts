/**
 * CHECK's validation of the container interface (the reference's `validateCniContainerInterface`), over a lookup
 * function so it can be unit-tested; the real lookup is @cnikit/netlink's getLinkDetails inside the container.
 */
import type { Interface } from '@cnikit/skel';
import { modeFromString } from './config.ts';

export interface IpvlanLinkView {
  name: string;
  kind: string | undefined;
  mac: string;
  ipvlan?: { mode: string };
}

function fail(msg: string): never {
  throw new Error(msg);
}

/** The container interface exists, is an ipvlan of the configured mode and has prevResult's MAC. */
export function validateIpvlanInterface(
  intf: Interface,
  modeExpected: string,
  lookup: (name: string) => IpvlanLinkView | undefined,
): void {
  if (!intf.name) fail('Container interface name missing in prevResult: ');
  const link = lookup(intf.name);
  if (!link) fail(`Container Interface name in prevResult: ${intf.name} not found`);
  if (!intf.sandbox) fail(`Error: Container interface ${link.name} should not be in host namespace`);
  if (link.kind !== 'ipvlan' || !link.ipvlan)
    fail(`Error: Container interface ${link.name} not of type ipvlan`);
  const want = modeFromString(modeExpected);
  const have = link.ipvlan.mode;
  if (have !== want) {
    if (!['l2', 'l3', 'l3s'].includes(have)) fail(`unknown ipvlan mode: ${have}`);
    fail(`Container IPVlan mode ${have} does not match expected value: ${want}`);
  }
  if (intf.mac && intf.mac !== link.mac)
    fail(`Interface ${intf.name} Mac ${intf.mac} doesn't match container Mac: ${link.mac}`);
}
