/**
 * @cnikit/firewall — what several CNI plugins share of iptables / nftables / firewalld.
 *
 * - Every plugin call applies its iptables changes with ONE iptables-restore per family
 *   (`iptablesBatch`) and its nftables changes with ONE `nft -f -` (`nftBatch`); state is read with
 *   iptables-save / `nft -j`; kernel probes (`probeKernel`, `natChainsMayExist`, `removeJumpChainsFast`) let
 *   teardown skip tool runs when nothing of its own can exist.
 * - Names and comments are the reference plugins' (`formatChainName`, `nftInstanceComment`, …).
 * - High-level helpers used by plugins: `setupIPMasq` / `teardownIPMasq` / `gcIPMasq`,
 *   `setupSpoofCheck` / `teardownSpoofCheck`, `detectBackend` / `resolveBackend`.
 * - firewalld over D-Bus (`Firewalld`: addSource / removeSource / querySource / getSources, `firewalldRunning`), pure TS.
 * Every function takes an optional `{ netns }` to run the tools in another network namespace.
 */
// Every export here is public API; the execStats counter (a test/bench seam) is in @cnikit/firewall/testing.
export {
  detectBackend,
  type FirewallBackend,
  resolveBackend,
  UnknownBackendError,
} from './backend.ts';
export { type ParsedCidr, parseCidr } from './cidr.ts';
export {
  addressSockets,
  busMayExist,
  type DBusArg,
  DBusConnection,
  DBusError,
  type DBusOptions,
  DEFAULT_SYSTEM_BUS_ADDRESS,
  type Message,
  type MethodCall,
  marshalCall,
  messageLength,
  parseMessage,
  splitSignature,
  systemBusAddress,
} from './dbus.ts';
export {
  type RunOptions,
  runTool,
  ToolError,
  ToolNotFoundError,
  type ToolOptions,
  type ToolResult,
} from './exec.ts';
export {
  FIREWALLD_NAME,
  FIREWALLD_PATH,
  FIREWALLD_ZONE_INTERFACE,
  Firewalld,
  firewalldRunning,
  isFirewalldError,
  withFirewalld,
} from './firewalld.ts';
export {
  forgetJumps,
  forgetNftRecordAt,
  forgetNftRules,
  handlesDir,
  jumpRecordPath,
  markNftRulesPending,
  type NftRulesRecord,
  nftRulesRecordPath,
  nftRulesRecords,
  type RecordedJump,
  recalledJumps,
  recallNftRules,
  rememberJumps,
  rememberNoNftRules,
} from './handles.ts';
export {
  type GCAttachment,
  gcIPMasq,
  IPMASQ_NFT_CHAIN,
  IPMASQ_NFT_TABLE,
  IPMasqError,
  type IPMasqSetupArgs,
  type IPMasqTeardownArgs,
  setupIPMasq,
  teardownIPMasq,
} from './ipmasq.ts';
export {
  type CommitResult,
  hasRule,
  type IPFamily,
  IptablesBatch,
  iptablesBatch,
  iptablesSave,
  listChains,
  listRules,
  normalizeRule,
  parseSave,
  quoteRuleArg,
  readTable,
  ruleComment,
  ruleTarget,
  type SavedRule,
  type SavedTable,
  splitRuleText,
  supportsIPTables,
} from './iptables.ts';
export type { CreatedRule } from './iptnft.ts';
export {
  chainName,
  formatChainName,
  formatChainNameWithPrefix,
  formatComment,
  formatHashWithPrefix,
  goQuote,
  goUnquote,
  MAX_CHAIN_LENGTH,
  MAX_HASH_LENGTH,
  NFT_COMMENT_MAX,
  nftInstanceComment,
  nftInstanceHash,
  nftNetworkHash,
  parseComment,
} from './names.ts';
export {
  type ChainSpec,
  checkNftIdentifier,
  NftBatch,
  type NftChain,
  type NftFamily,
  type NftListing,
  type NftRule,
  type NftTable,
  nftBatch,
  nftList,
  nftListRules,
  nftQuote,
  parseNftJson,
  supportsNFTables,
} from './nftables.ts';
export { commitRecorded, deleteRecorded, earlierRules, handleNumber } from './nftcommit.ts';
export { natChainsInPlace, natChainsMayExist, probeKernel, removeJumpChainsFast } from './probe.ts';
export {
  gcSpoofCheck,
  iifnameOf,
  type SpoofCheckArgs,
  setupSpoofCheck,
  spoofCheckNames,
  teardownSpoofCheck,
} from './spoofcheck.ts';
