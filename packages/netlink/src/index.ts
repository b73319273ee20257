/**
 * @cnikit/netlink — typed rtnetlink operations over the @cnikit/sys socket, sysctl and network-namespace helpers.
 *
 * Every export here is public API. Message-level pieces (rtnetlink constants, message builders and decoders, the
 * request/dump primitives) are in `@cnikit/netlink/wire`; the fake-transport seams for tests are in
 * `@cnikit/netlink/testing`.
 */
export {
  type AddAddrOptions,
  type Addr,
  addAddr,
  delAddr,
  type FamilyFilter,
  type ListAddrsOptions,
  listAddrs,
  waitDadSettled,
} from './addr.ts';
export {
  type BridgePortFlags,
  type BridgeVlanEntry,
  type BridgeVlanSpec,
  bridgeVlanAdd,
  bridgeVlanDel,
  bridgeVlanList,
  setBridgePortFlags,
} from './bridge.ts';
export {
  deleteConntrackByDstPort,
  IPPROTO_TCP,
  IPPROTO_UDP,
} from './conntrack.ts';
export {
  type BridgeOptions,
  type BridgePortInfo,
  type BridgePortState,
  createBridge,
  createDummy,
  createIfb,
  createVethPair,
  deleteLink,
  deleteLinkIfExists,
  describeLink,
  getLink,
  getLinkOrThrow,
  type IfbOptions,
  type Link,
  type LinkRef,
  linkIndex,
  listLinks,
  moveToNetns,
  type OperState,
  renameLink,
  setAlias,
  setAllMulticast,
  setLinkDown,
  setLinkUp,
  setMac,
  setMaster,
  setMtu,
  setPromisc,
  setTxQueueLen,
  type VethOptions,
} from './link.ts';
export {
  randomLocalMac,
  randomVethName,
} from './names.ts';
export {
  currentNetnsPath,
  isNetns,
  isNetnsGone,
  isNetnsGoneForDel,
  isNotNetnsError,
  NetNS,
  NetnsNotFoundError,
  NetnsRestoreError,
  NotNetnsError,
  openNetnsFd,
  type Sync,
  sameNetns,
  type TracedSpan,
  traceSection,
  withNetns,
  withNetnsFd,
} from './netns.ts';
export { closeAfterTask } from './nfclose.ts';
export {
  NFPROTO,
  type NftFamily,
  nftExists,
  xtablesTableLoaded,
} from './nftexists.ts';
export {
  type ChainJumps,
  type JumpChain,
  type KnownJumps,
  type NftExpr,
  type NftRuleRef,
  type NftRuleWatch,
  nftChainJumps,
  nftDeleteKnownRules,
  nftKnownRulesHold,
  nftRemoveJumpChains,
  nftRemoveKnownJumpChains,
  nftRemoveRulesWhere,
  nftRuleComment,
  nftWatchRules,
  ruleExprs,
  ruleJumpTarget,
} from './nftjumps.ts';
export {
  formatMac,
  invalidMacMessage,
  parseMac,
} from './nl.ts';
export {
  type AddRouteOptions,
  addRoute,
  delRoute,
  type ListRoutesOptions,
  listRoutes,
  type NextHop,
  type Route,
  type RouteSpec,
  replaceRoute,
  routeGet,
  routeSpec,
  type ScopeName,
} from './route.ts';
export {
  isExistsError,
  isNotFoundError,
  NetlinkError,
} from './rtnl.ts';
export {
  addRule,
  delRule,
  listRules,
  type Rule,
  type RuleSpec,
} from './rule.ts';
export {
  createIpvlan,
  createMacvlan,
  createVlan,
  defaultRouteInterface,
  getLinkDetails,
  type IpvlanFlag,
  type IpvlanInfo,
  type IpvlanMode,
  type IpvlanOptions,
  type LinkDetails,
  MACVLAN_FLAG_NODST,
  MACVLAN_FLAG_NOPROMISC,
  type MacvlanInfo,
  type MacvlanMode,
  type MacvlanOptions,
  type StackedLinkOptions,
  type VlanInfo,
  type VlanOptions,
  type VlanProtocol,
} from './sublink.ts';
export {
  readProcSys,
  sysctlGet,
  sysctlNormalName,
  sysctlPath,
  sysctlSet,
  writeProcSys,
} from './sysctl.ts';
export {
  addIngressQdisc,
  addRedirectFilter,
  addTbfQdisc,
  deleteQdisc,
  formatHandle,
  listQdiscs,
  makeHandle,
  type Qdisc,
  type TbfParams,
  TC_H_INGRESS,
  TC_H_ROOT,
  tickInUsec,
} from './tc.ts';
export {
  createVethWithRandomPeer,
  delLinkByNameAddr,
  hasErrno,
} from './veth.ts';
export { buildVrf, createVrf, listVrfs, type Vrf } from './vrf.ts';
export {
  createVxlan,
  delFdb,
  delNeighbour,
  getVxlan,
  listNeighbours,
  type Neighbour,
  type NeighbourSpec,
  NUD_PERMANENT,
  replaceFdb,
  replaceNeighbour,
  type VxlanInfo,
  type VxlanOptions,
} from './vxlan.ts';
