/**
 * @cnikit/netlink/testing — test seams: replace how rtnetlink sockets are opened (a fake kernel transport) and
 * the per-request timeout. Not part of the main entry, so no dependency of @cnikit/netlink can swap the kernel
 * transport by accident.
 */
export { rtnlSeams, setRequestTimeout, setTransportFactory } from './rtnl-seams.ts';
