/**
 * host-local's test environment (not part of the plugin): store inspection, a config builder, and which
 * executables play "ours" out of process (the built multicall binary `dist-bin/host-local`, else the plugin as a
 * process from source through @cnikit/testing's `{ source }` target) and the Go reference when installed, for the
 * tests and bench/ipam.ts. Calls, environments and temporary directories come from @cnikit/testing.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  type CniCallOptions,
  type CniCommand,
  type CniOutcome,
  type CniTarget,
  cniCall,
  cniEnv,
} from '@cnikit/testing';
import { DIST, distBin } from '../../../test-netns/dist.ts';

/** The files of a store directory and their contents (byte strings). */
export function storeFiles(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch {
    return out;
  }
  for (const n of names) out[n] = readFileSync(join(dir, n), 'latin1');
  return out;
}

/** Reservation files only (no lock, last_reserved_ip.*). */
export function reservations(dir: string): Record<string, string> {
  const out = storeFiles(dir);
  for (const k of Object.keys(out)) if (k === 'lock' || k.startsWith('last_reserved_ip.')) delete out[k];
  return out;
}

export function net(dataDir: string, ipam: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  return {
    cniVersion: '1.1.0',
    name: 'mynet',
    type: 'ipvlan',
    master: 'foo0',
    ...extra,
    ipam: { type: 'host-local', dataDir, ...ipam },
  };
}

const here = dirname(fileURLToPath(import.meta.url));
export const repoRoot = resolve(here, '../../..');
export const GO_HOST_LOCAL = '/usr/lib/cni/host-local';

export interface Impl {
  /** What it is, for messages: 'binary' | 'source' | 'go'. */
  kind: 'binary' | 'source' | 'go';
  target: { binary: string } | { source: string };
}

/** Our host-local as a separate process (the binary, else from source). */
export function ourHostLocal(): Impl {
  // when dist-bin/ is built, it is checked fresh (rebuilt when its sources changed): never an older host-local
  if (existsSync(DIST) && process.env.CNIKIT_TEST_NO_BINARY !== '1')
    return { kind: 'binary', target: { binary: join(distBin(), 'host-local') } };
  return { kind: 'source', target: { source: join(here, 'index.ts') } };
}

export function goHostLocal(): Impl | undefined {
  return existsSync(GO_HOST_LOCAL) ? { kind: 'go', target: { binary: GO_HOST_LOCAL } } : undefined;
}

/** IPAM calls get this CNI_NETNS (host-local never opens it). */
const NETNS = '/var/run/netns/none';

/** One call of `impl` as a process; `timeoutMs` kills it with SIGKILL (outcome.signal). */
export function exec(
  impl: Impl,
  command: CniCommand,
  containerId: string,
  stdin: string,
  o: CniCallOptions = {},
): Promise<CniOutcome> {
  return cniCall(impl.target as CniTarget, command, stdin, { containerId, netns: NETNS, ...o });
}

/** The environment of `exec` (benchmarks time their own synchronous spawn of a binary). */
export function ipamEnv(command: CniCommand, containerId: string): Record<string, string> {
  return cniEnv(command, { containerId, netns: NETNS });
}
