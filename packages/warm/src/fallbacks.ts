/**
 * Client fallbacks: a warm client that runs the cold executable instead of the service (no service,
 * a full backlog, no hello in time, a peer that is not root, …) appends one line, its reason, to FALLBACKS_FILE in
 * the service socket's directory (packages/warm/README.md, "Fallback record"). The service counts the new lines
 * when it is scraped; the file is emptied once it passes TRUNCATE_AT bytes (a line appended between the read and
 * the truncation is lost: the count is a lower bound).
 */
import { closeSync, fstatSync, ftruncateSync, openSync, readSync } from 'node:fs';
import { dirname, join } from 'node:path';

export const FALLBACKS_FILE = 'client-fallbacks';
/** The reasons a client records (anything else is counted as `other`). */
export const FALLBACK_REASONS = [
  'unavailable',
  'busy',
  'peer',
  'hello',
  'protocol',
  'netns',
  'socket',
] as const;
const TRUNCATE_AT = 1 << 20;

export function fallbacksPath(socket: string): string {
  return join(dirname(socket), FALLBACKS_FILE);
}

/**
 * Counts the reasons recorded after `offset` bytes of the file at `path`. Returns the counts and the new offset
 * (0 after the file was emptied, or when it shrank: someone else truncated it). A missing file counts nothing.
 */
export function readFallbacks(
  path: string,
  offset: number,
): { counts: Record<string, number>; offset: number } {
  let fd: number;
  try {
    fd = openSync(path, 'r+');
  } catch {
    return { counts: {}, offset: 0 };
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return { counts: {}, offset };
    const start = st.size < offset ? 0 : offset;
    const len = Math.min(st.size - start, TRUNCATE_AT * 2);
    const buf = Buffer.alloc(len);
    let got = 0;
    while (got < len) {
      const n = readSync(fd, buf, got, len - got, start + got);
      if (n === 0) break;
      got += n;
    }
    const text = buf.subarray(0, got).toString('latin1');
    const end = text.lastIndexOf('\n') + 1; // an incomplete last line is read next time
    const counts: Record<string, number> = {};
    for (const line of text.slice(0, end).split('\n')) {
      if (line === '') continue;
      const reason = (FALLBACK_REASONS as readonly string[]).includes(line) ? line : 'other';
      counts[reason] = (counts[reason] ?? 0) + 1;
    }
    let next = start + end;
    if (next >= TRUNCATE_AT && end === text.length) {
      ftruncateSync(fd, 0);
      next = 0;
    }
    return { counts, offset: next };
  } finally {
    closeSync(fd);
  }
}
