/**
 * The install layout, the one owner (`@cnikit/sys/layout`, plain node:fs: no native code, no import.meta.url, so
 * the compiled executable can load it): the file names of a CNI bin directory, what each plugin name is a hard
 * link of, and how a file or a link is placed (atomically, with @cnikit/sys/atomic).
 *
 *   cnikit          the multicall executable (the cold path)
 *   cnikit-client   the warm-mode client (packages/warm/client), copied beside cnikit, cold mode too
 *   <plugin>        a hard link to cnikit-client (warm) or to cnikit (cold)
 *   cnitool         always a hard link to cnikit
 *
 * Used by scripts/install.ts, @cnikit/warm's install.ts (--warm/--cold), install-cni, the build of dist-bin/warm
 * (build-client.ts), the warm service (which recognises a client by its name) and the executable's entry
 * (@cnikit/build's multicall names).
 */
import { lstatSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { linkAtomic, writeFileAtomic } from './atomic.ts';

export { CLIENT_FILE, EXE_FILE, SYSTEM_BIN_DIR, TOOL_FILE } from './names.ts';

import { CLIENT_FILE, EXE_FILE, TOOL_FILE } from './names.ts';

export type LayoutMode = 'warm' | 'cold';

/** The file a name of the layout is a hard link of: cnitool → cnikit; a plugin → the client (warm) or cnikit. */
export function linkTarget(name: string, mode: LayoutMode): string {
  if (name === TOOL_FILE) return EXE_FILE;
  return mode === 'warm' ? CLIENT_FILE : EXE_FILE;
}

/** The names in `dir` (hidden ones and `file` itself left out) that are hard links of dir/`file`, sorted. */
export function hardLinksOf(dir: string, file: string, ino = statSync(join(dir, file)).ino): string[] {
  return readdirSync(dir)
    .filter((n) => n !== file && !n.startsWith('.'))
    .filter((n) => {
      const st = lstatSync(join(dir, n));
      return st.isFile() && st.ino === ino;
    })
    .sort();
}

/** Whether `a` and `b` are regular files of the same bytes (false when either is missing). */
export function sameContent(a: string, b: string): boolean {
  try {
    const sa = statSync(a);
    const sb = statSync(b);
    if (!sa.isFile() || !sb.isFile() || sa.size !== sb.size) return false;
    return readFileSync(a).equals(readFileSync(b));
  } catch {
    return false;
  }
}

/** Place a copy of `src` at `dst` atomically with `mode` (temporary file in dst's directory, fsync, rename). */
export function placeCopy(src: string, dst: string, mode: number): void {
  writeFileAtomic(dst, readFileSync(src), mode);
}

/** Make `dst` a hard link of `src` atomically (link to a temporary name, rename). */
export function placeLink(src: string, dst: string): void {
  linkAtomic(src, dst);
}
