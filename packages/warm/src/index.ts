/**
 * @cnikit/warm — warm mode: `cnikit serve` (a resident service running plugin calls through the skel dispatcher)
 * and cnikit-client (a tiny static C executable installed under each plugin name that forwards a call to it, or
 * execs the cold executable when the service is not there). See README.md. Every export here is public API.
 */
export { buildClient, CLIENT_SOURCE, type ClientBuildResult, layoutWarmDir } from './build-client.ts';
export {
  cniErrorText,
  DEFAULT_DEADLINE_MS,
  DEFAULT_SOCKET,
  decodeHello,
  decodeReply,
  decodeRequest,
  decodeStdin,
  encodeFrame,
  encodeHello,
  encodeReply,
  encodeRequest,
  encodeStdin,
  FLAG_STDOUT_CLOSED,
  FRAME_HEADER,
  FrameReader,
  HELLO_LENGTH,
  type Hello,
  isForwarded,
  MAGIC,
  MAX_FRAME,
  PROTOCOL_VERSION,
  ProtocolError,
  type Reply,
  type Request,
  T_NEED_STDIN,
  T_REPLY,
  T_REQUEST,
  T_STDIN,
} from './protocol.ts';
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
