/**
 * @cnikit/link — what the CNI interface plugins share, in the reference plugins' words: ADD's ending, DEL and
 * CHECK of a container interface (`addContainerLink`, `delContainerLink`, `checkContainerLink`), Go's
 * `ipam.ConfigureIface` and forwarding sysctls, the CHECK validators (`validateExpectedInterfaceIPs`,
 * `validateExpectedRoutes`, `validateContainerInterface`), and the container-namespace helpers (`openContainerNetns`,
 * `inMasterNetns`, `addStackedLinkToContainer`, `deleteLinkInNetns`), the plugin object with the IPAM's GC/STATUS
 * (`linkPlugin`), ADD's IPAM step (`ipamAdd`) and the master's lookups (`lookupMaster`, `requireMaster`). @cnikit/netlink below it stays typed
 * rtnetlink; the error texts here are the plugins' policy.
 *
 * Every export here is public API.
 */
export {
  checkMtu,
  IPAM_KEY,
  IPAM_KEYS,
  type LinkConfBase,
  linkConfBase,
  NETCONF_KEYS,
  type StackedLinkConf,
  stackedLinkConf,
} from './conf.ts';
export { configureIface, enableForward, type IfaceConfig } from './configure.ts';
export {
  addStackedLinkToContainer,
  type ContainerLinkRequest,
  deleteLinkInNetns,
  hostVethUp,
  inMasterNetns,
  openContainerNetns,
  removeInNetns,
} from './container.ts';
export { ipamAdd, ipamGc, ipamStatus, type WithIpam } from './ipam.ts';
export { type LinkPluginVerbs, linkPlugin, lookupMaster, requireMaster } from './plugin.ts';
export {
  type AddrView,
  addrViews,
  type ContainerLinkCheck,
  currentNetnsView,
  type ExpectedStateView,
  findSandboxInterface,
  type LinkView,
  type ModeLinkCheck,
  type ModeLinkView,
  modeLinkCheck,
  type RouteView,
  routeText,
  routeViews,
  validateContainerInterface,
  validateExpectedInterfaceIPs,
  validateExpectedRoutes,
} from './validate.ts';
export {
  addContainerLink,
  type ContainerLinkAdd,
  type ContainerLinkCheckSpec,
  type ContainerLinkDel,
  checkContainerLink,
  delContainerLink,
  type StackedLink,
  setNotifySysctls,
} from './verbs.ts';
