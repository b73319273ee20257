/**
 * Bridge-specific helpers of the bridge's kernel tests (not a test file); the fixture itself (sandbox, in-process
 * and binary calls, eventually/sleep) is @cnikit/testing.
 *
 * `snapshot` stays here on purpose: it records what a bridge attachment changes as compact text lines (a link as
 * "name kind master=… operstate", addresses without lifetimes, routes of every table, the nat table and the nft
 * ruleset without handles), and `withoutBridge` drops the lines of the bridges (kept by the reference on DEL) and
 * the timing-dependent "tentative"/"linkdown" words inside them — a line-level filter that @cnikit/testing's JSON
 * snapshot (one JSON object per link/address) cannot express without weakening its own comparisons.
 */
import { execFileSync, spawnSync } from 'node:child_process';

export function run(cmd: string, args: string[], input?: string): string {
  return execFileSync(cmd, args, { encoding: 'utf8', input, stdio: ['pipe', 'pipe', 'pipe'] });
}

export function tryRun(cmd: string, args: string[]): { status: number; stdout: string; stderr: string } {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  return { status: r.status ?? -1, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
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
