/**
 * @cnikit/skel — the plugin side of the CNI protocol (spec 0.1.0–1.1.0).
 *
 * Entry points: `runPlugin(plugin)` (process), `dispatch(plugin, io)` / `invokeInProcess(plugin, env, stdin)`
 * (in-process seam for tests), `s`/`decode` (typed config), `loadArgs` (CNI_ARGS), result helpers,
 * delegation (`delegateAdd` & co., `withDelegateCleanup`, `Invoker`, `registerInProcess`) and `createLogger`.
 * The caller side alone (a runtime: no plugin dispatcher) is `@cnikit/skel/invoke`; the plugin side alone (no
 * delegation) is `@cnikit/skel/plugin`.
 *
 * Every export here is public API.
 */

export {
  type DelegateOptions,
  defaultInvoker,
  delegate,
  delegateAdd,
  delegateCheck,
  delegateDel,
  delegateGc,
  delegateStatus,
  delegateVersion,
  type ExecPluginOptions,
  execPlugin,
  findInPath,
  getVersionInfo,
  type InProcessRunner,
  Invoker,
  type InvokerOptions,
  inProcessPlugin,
  onDelegateRollback,
  parseDelegateResult,
  registerInProcess,
  splitPathList,
  undoDelegateAdd,
  type ValidateDelegateOptions,
  type VersionInfo,
  validateDelegate,
  withDelegateCleanup,
} from './invoke.ts';
export * from './plugin.ts';
