/**
 * Test helpers for the bridge's kernel tests (not a test file): private "host" and "container"
 * namespaces, moving the test process's main thread into the host namespace, running the plugin
 * in-process, and snapshots of the kernel state for before/after comparisons.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type InProcessResult, invokeInProcess, type Plugin } from '@cnikit/skel';
import { setns } from '@cnikit/sys';

export const uid = `${process.pid.toString(36)}${Math.floor(Math.random() * 36 ** 3).toString(36)}`;

export function run(cmd: string, args: string[], input?: string): string {
  return execFileSync(cmd, args, { encoding: 'utf8', input, stdio: ['pipe', 'pipe', 'pipe'] });
}

export function tryRun(cmd: string, args: string[]): { status: number; stdout: string; stderr: string } {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  return { status: r.status ?? -1, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
}

export interface HostEnv {
  host: string;
  hostPath: string;
  containers: string[];
  dataDir: string;
  /** name → /run/netns path */
  path(name: string): string;
  newContainer(): string;
  /** move the main thread back and delete everything */
  destroy(): void;
}

/**
 * Create a private host namespace (and `n` container namespaces) and move this process's main thread
 * into the host namespace for the rest of the test file (the plugin runs there, like a runtime
 * would run it on a node). Sub-processes spawned from the main thread inherit it.
 */
export function enterHost(tag: string, n = 2): HostEnv {
  const host = `cnikit-br${tag}-${uid}-h`;
  const containers: string[] = [];
  let counter = 0;
  const newContainer = () => {
    const name = `cnikit-br${tag}-${uid}-c${counter++}`;
    run('ip', ['netns', 'add', name]);
    containers.push(name);
    return name;
  };
  const orig = openSync('/proc/self/ns/net', 'r');
  try {
    run('ip', ['netns', 'add', host]);
    run('ip', ['-n', host, 'link', 'set', 'lo', 'up']);
    for (let i = 0; i < n; i++) newContainer();
    const hostFd = openSync(`/run/netns/${host}`, 'r');
    try {
      setns(hostFd);
    } finally {
      closeSync(hostFd);
    }
  } catch (err) {
    // do not leave namespaces behind when the sandbox cannot be entered (e.g. native addon missing)
    closeSync(orig);
    for (const c of [...containers, host]) tryRun('ip', ['netns', 'del', c]);
    throw err;
  }
  const dataDir = mkdtempSync(join(tmpdir(), `cnikit-br${tag}-`));
  return {
    host,
    hostPath: `/run/netns/${host}`,
    containers,
    dataDir,
    path: (name) => `/run/netns/${name}`,
    newContainer,
    destroy() {
      try {
        setns(orig);
      } finally {
        closeSync(orig);
        for (const c of [...containers, host]) tryRun('ip', ['netns', 'del', c]);
        rmSync(dataDir, { recursive: true, force: true });
      }
    },
  };
}

export interface CallOpts {
  netns?: string;
  ifName?: string;
  containerId?: string;
  args?: string;
  path?: string;
}

export async function cni(
  plugin: Plugin,
  command: string,
  conf: object,
  o: CallOpts = {},
): Promise<InProcessResult> {
  const env: Record<string, string> = {
    CNI_COMMAND: command,
    CNI_CONTAINERID: o.containerId ?? 'ctr1',
    CNI_NETNS: o.netns ?? '',
    CNI_IFNAME: o.ifName ?? 'eth0',
    CNI_PATH: o.path ?? '/usr/lib/cni',
  };
  if (o.args) env.CNI_ARGS = o.args;
  if (command === 'GC' || command === 'STATUS') {
    delete env.CNI_CONTAINERID;
    delete env.CNI_IFNAME;
    delete env.CNI_NETNS;
  }
  return invokeInProcess(plugin, env, JSON.stringify(conf));
}

/** Everything observable in a namespace that a bridge attachment could change. */
export function snapshot(ns?: string): string {
  const pre = ns ? ['ip', 'netns', 'exec', ns] : [];
  const x = (cmd: string[]) => {
    const [c, ...a] = [...pre, ...cmd];
    const r = tryRun(c!, a);
    return r.status === 0 ? r.stdout : `(${cmd[0]} unavailable)`;
  };
  const links = (JSON.parse(x(['ip', '-j', '-d', 'link', 'show'])) as Array<Record<string, unknown>>)
    .map(
      (l) =>
        `${l.ifname} ${(l.linkinfo as { info_kind?: string } | undefined)?.info_kind ?? ''} master=${l.master ?? ''} ${l.operstate}`,
    )
    .sort();
  const addrs = x(['ip', '-o', 'addr', 'show'])
    .split('\n')
    .map((l) => l.replace(/^\d+:\s+/, '').replace(/\s+valid_lft.*$/, ''))
    .filter(Boolean)
    .sort();
  const routes = [
    ...x(['ip', 'route', 'show', 'table', 'all']).split('\n'),
    ...x(['ip', '-6', 'route', 'show', 'table', 'all']).split('\n'),
  ]
    .filter(Boolean)
    .sort();
  const ipt = (bin: string) => x([bin, '-t', 'nat', '-S']).split('\n').filter(Boolean).sort();
  const nft = x(['nft', 'list', 'ruleset']).replace(/ # handle \d+/g, '');
  return JSON.stringify(
    { links, addrs, routes, ipt4: ipt('iptables'), ipt6: ipt('ip6tables'), nft },
    null,
    1,
  );
}

/**
 * Remove lines mentioning bridges (kept by the reference on DEL, and whose carrier/link-local state
 * changes asynchronously) from a snapshot. Every bridge in these tests is named `br…`.
 */
export function withoutBridge(snap: string, _bridge?: string): string {
  const s = JSON.parse(snap) as Record<string, unknown>;
  for (const k of ['links', 'addrs', 'routes'] as const) {
    s[k] = (s[k] as string[])
      .filter((l) => !/(^|\s)br[\w.-]*(\s|:|$)/.test(l))
      // timing-dependent: IPv6 DAD progress and carrier flags
      .map((l) => l.replace(/ (tentative|linkdown)\b/g, ''));
  }
  return JSON.stringify(s, null, 1);
}

export function hostLocal(dataDir: string, subnet: string | string[][], extra: object = {}): object {
  const ranges =
    typeof subnet === 'string' ? [[{ subnet }]] : subnet.map((r) => r.map((s) => ({ subnet: s })));
  return { type: 'host-local', ranges, dataDir, ...extra };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Polls `cond` every 50 ms for up to `ms`; fails with `what` if it never holds (for asynchronous kernel work). */
export async function eventually(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
  for (const end = Date.now() + ms; !cond(); await sleep(50)) {
    if (Date.now() > end) assert.fail(`${what} (waited ${ms / 1000} s)`);
  }
}
