/**
 * Calls that hang, for the warm service's deadline and stop tests: a CNI_PATH directory whose programs record their
 * pid in $CNIKIT_TEST_PIDFILE and sleep.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const SLEEPER = '#!/bin/sh\necho $$ >> "$CNIKIT_TEST_PIDFILE"\nexec sleep 30\n';

/** `<scratch>/slow-<tag>` with a `slow-ipam` that hangs (a delegate that never answers); pidfile: where pids go. */
export function slowIpam(scratch: string, tag: string): { dir: string; pidfile: string } {
  const dir = join(scratch, `slow-${tag}`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'slow-ipam'), SLEEPER, { mode: 0o755 });
  return { dir, pidfile: join(dir, 'pids') };
}

/** Every firewall tool the bridge's ipMasq could run, hanging, in `dir` (a request stuck in synchronous code). */
export function hangFirewallTools(dir: string): void {
  for (const tool of [
    'iptables',
    'ip6tables',
    'iptables-save',
    'ip6tables-save',
    'iptables-restore',
    'ip6tables-restore',
    'nft',
  ])
    writeFileSync(join(dir, tool), SLEEPER, { mode: 0o755 });
}
