/** The file names of a CNI bin directory (./layout.ts); constants only, so an executable's start-up path can use them. */
/** The multicall executable. */
export const EXE_FILE = 'cnikit';
/** The warm-mode client; the plugin names are hard links of it in warm mode. */
export const CLIENT_FILE = 'cnikit-client';
/** The cnitool CLI: a hard link of the executable in either mode. */
export const TOOL_FILE = 'cnitool';
/** The system's CNI bin directory. */
export const SYSTEM_BIN_DIR = '/opt/cni/bin';
