/**
 * @cnikit/netlink/testing — test seams: replace how rtnetlink sockets are opened (a fake kernel transport) and
 * the per-request timeout. Not part of the main entry, so no dependency of @cnikit/netlink can swap the kernel
 * transport by accident.
 */

/** How many nfnetlink rule dumps and rule-by-handle GETs nftjumps.ts sent (a test/bench counter). */
export { nftRuleRequests } from './nftjumps.ts';
export { rtnlSeams, setRequestTimeout, setTransportFactory } from './rtnl-seams.ts';
