/**
 * Processes of the lab cluster named by pid and start time (field 22 of /proc/PID/stat), so that a `down` run by
 * another process than the one that started them ends exactly those processes and never a reused pid.
 */
import { readFileSync } from 'node:fs';

export interface ProcRef {
  pid: number;
  /** Start time in clock ticks since boot. */
  start: string;
}

function stat(pid: number): string[] | undefined {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // the command name (field 2) may hold spaces: fields after the last ')'
    return s.slice(s.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

export function procRef(pid: number): ProcRef {
  const f = stat(pid);
  if (!f) throw new Error(`process ${pid} is gone`);
  return { pid, start: f[19] ?? '' };
}

/** True while the process runs (a zombie, or a new process with the same pid, is not it). */
export function alive(ref: ProcRef): boolean {
  const f = stat(ref.pid);
  return f !== undefined && f[19] === ref.start && f[0] !== 'Z';
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function signal(ref: ProcRef, sig: NodeJS.Signals): void {
  if (!alive(ref)) return;
  try {
    process.kill(ref.pid, sig);
  } catch {
    // exited meanwhile
  }
}

/** SIGTERM (or `sig`) to each, SIGKILL to those still running after graceMs; resolves when all are gone. */
export async function terminate(
  refs: ProcRef[],
  graceMs = 10_000,
  sig: NodeJS.Signals = 'SIGTERM',
): Promise<void> {
  for (const r of refs) signal(r, sig);
  const end = Date.now() + graceMs;
  while (refs.some(alive) && Date.now() < end) await sleep(50);
  for (const r of refs) signal(r, 'SIGKILL');
  const hard = Date.now() + 10_000;
  while (refs.some(alive)) {
    if (Date.now() > hard) {
      throw new Error(`processes still running after SIGKILL: ${refs.filter(alive).map((r) => r.pid)}`);
    }
    await sleep(50);
  }
}
