/**
 * @cnikit/warm — warm mode: `cnikit serve` (a resident service running plugin calls through the skel dispatcher)
 * and cnikit-client (a tiny static C executable installed under each plugin name that forwards a call to it, or
 * execs the cold executable when the service is not there). See README.md.
 */
export { buildClient, CLIENT_SOURCE, type ClientBuildResult, layoutWarmDir } from './build-client.ts';
export * from './protocol.ts';
export {
  CLIENT_NAME,
  check,
  isWarmClient,
  openSocket,
  parseServeArgs,
  SERVE_USAGE,
  type ServeContext,
  type ServeOptions,
  Service,
  serveMain,
} from './serve.ts';
export { systemdUnits, type UnitOptions } from './systemd.ts';
