/**
 * CHECK's validation of the container interface (the reference's `validateCniContainerInterface` and the sandbox
 * match), over a lookup function so it can be unit-tested; the real lookup is @cnikit/netlink's getLinkDetails
 * inside the container namespace. The messages are the reference's (HEAD spells them lower-case for macvlan).
 */
import type { Interface } from '@cnikit/skel';
import { modeFromString } from './config.ts';

export interface MacvlanLinkView {
  name: string;
  kind: string | undefined;
  mac: string;
  macvlan?: { mode: string };
}

function fail(msg: string): never {
  throw new Error(msg);
}

/** The prevResult interface named `ifName` in the sandbox `netns` (the reference reports a mismatch in lower case). */
export function findContainerInterface(
  interfaces: readonly Interface[] | undefined,
  ifName: string,
  netns: string,
): Interface {
  const found = (interfaces ?? []).find((i) => i.name === ifName && i.sandbox === netns);
  if (!found) fail(`sandbox in prevResult  doesn't match configured netns: ${netns}`);
  return found;
}

/** The container interface exists, is a macvlan of the configured mode and has prevResult's MAC. */
export function validateMacvlanInterface(
  intf: Interface,
  modeExpected: string,
  lookup: (name: string) => MacvlanLinkView | undefined,
): void {
  if (!intf.name) fail('container interface name missing in prevResult: ');
  const link = lookup(intf.name);
  if (!link) fail(`container Interface name in prevResult: ${intf.name} not found`);
  if (!intf.sandbox) fail(`error: Container interface ${link.name} should not be in host namespace`);
  if (link.kind !== 'macvlan' || !link.macvlan)
    fail(`error: Container interface ${link.name} not of type macvlan`);
  const want = modeFromString(modeExpected);
  const have = link.macvlan.mode;
  if (have !== want) {
    if (!['bridge', 'private', 'vepa', 'passthru'].includes(have)) fail(`unknown macvlan mode: ${have}`);
    fail(`container macvlan mode ${have} does not match expected value: ${want}`);
  }
  if (intf.mac && intf.mac !== link.mac)
    fail(`interface ${intf.name} Mac ${intf.mac} doesn't match container Mac: ${link.mac}`);
}
