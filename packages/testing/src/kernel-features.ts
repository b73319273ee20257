/**
 * Kernel features a test needs, probed for real in a throw-away network namespace (part of the public SDK).
 *
 * A test FILE that needs a feature some kernels lack (this repository's CI machine lacks dummy, vlan, macvlan, ipvlan,
 * vrf links, bridge VLAN filtering and cls_matchall) declares it in a comment line at its top:
 *
 * ```ts
 * // cnikit-kernel-features: macvlan ipvlan
 * import { requireKernelFeatures } from '@cnikit/testing';
 *
 * test('macvlan in bridge mode', () => {
 *   requireKernelFeatures('macvlan'); // fails (never skips) with what is missing and how to run it in the lab
 *   // … create the macvlan link, check it with `ip -json` …
 * });
 * ```
 *
 * `scripts/run-tests.mjs` (so `npm test` and CI) reads the line, probes the host once, and runs the files whose
 * features the host lacks inside the kernel lab (`npm run vm`, Debian's stock kernel under qemu, docs/kernel-lab.md),
 * all of them in one VM boot, counting their results with the rest. The names are the keys of {@link KERNEL_FEATURES}.
 * Needs root (the probes create a namespace).
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { scaled } from './timescale.ts';

/** One probe step: an argument vector run inside the probe's namespace (`ip`/`tc` get `-n <ns>`). */
type Step = readonly [tool: 'ip' | 'tc', ...args: string[]];

export interface KernelFeature {
  /** What the feature is, for messages. */
  readonly description: string;
  /** Commands that succeed only when the kernel has the feature (run in a fresh namespace, in order). */
  readonly steps: readonly Step[];
  /** An extra check on the state the steps left (e.g. the kernel accepted the option but ignored it). */
  readonly verify?: (ns: string) => boolean;
}

const VETH: Step = ['ip', 'link', 'add', 'cnkp0', 'type', 'veth', 'peer', 'name', 'cnkp1'];

function linkInfoData(ns: string, name: string): Record<string, unknown> | undefined {
  const r = spawnSync('ip', ['-n', ns, '-d', '-j', 'link', 'show', 'dev', name], { encoding: 'utf8' });
  if (r.status !== 0) return undefined;
  const [link] = JSON.parse(r.stdout) as Array<{ linkinfo?: { info_data?: Record<string, unknown> } }>;
  return link?.linkinfo?.info_data;
}

/** The features a test file can declare, each with its probe. */
export const KERNEL_FEATURES = {
  dummy: {
    description: 'dummy links (CONFIG_DUMMY)',
    steps: [['ip', 'link', 'add', 'cnkd0', 'type', 'dummy']],
  },
  vlan: {
    description: '802.1Q VLAN links (CONFIG_VLAN_8021Q)',
    steps: [VETH, ['ip', 'link', 'add', 'link', 'cnkp0', 'name', 'cnkp0.5', 'type', 'vlan', 'id', '5']],
  },
  macvlan: {
    description: 'macvlan links (CONFIG_MACVLAN)',
    steps: [
      VETH,
      ['ip', 'link', 'add', 'link', 'cnkp0', 'name', 'cnkm0', 'type', 'macvlan', 'mode', 'bridge'],
    ],
  },
  macvtap: {
    description: 'macvtap links (CONFIG_MACVTAP)',
    steps: [
      VETH,
      ['ip', 'link', 'add', 'link', 'cnkp0', 'name', 'cnkt0', 'type', 'macvtap', 'mode', 'bridge'],
    ],
  },
  ipvlan: {
    description: 'ipvlan links (CONFIG_IPVLAN)',
    steps: [VETH, ['ip', 'link', 'add', 'link', 'cnkp0', 'name', 'cnki0', 'type', 'ipvlan', 'mode', 'l2']],
  },
  vrf: {
    description: 'VRF links (CONFIG_NET_VRF)',
    steps: [['ip', 'link', 'add', 'cnkv0', 'type', 'vrf', 'table', '100']],
  },
  'bridge-vlan-filtering': {
    description: 'bridge VLAN filtering (CONFIG_BRIDGE_VLAN_FILTERING)',
    steps: [['ip', 'link', 'add', 'cnkb0', 'type', 'bridge', 'vlan_filtering', '1']],
    verify: (ns) => linkInfoData(ns, 'cnkb0')?.vlan_filtering === 1,
  },
  cls_matchall: {
    description: 'the matchall tc classifier (CONFIG_NET_CLS_MATCHALL)',
    steps: [
      VETH,
      ['tc', 'qdisc', 'add', 'dev', 'cnkp0', 'clsact'],
      ['tc', 'filter', 'add', 'dev', 'cnkp0', 'ingress', 'matchall', 'action', 'pass'],
    ],
  },
  br_netfilter: {
    description: 'bridged traffic through iptables (br_netfilter, /proc/sys/net/bridge)',
    steps: [['ip', 'link', 'add', 'cnkb1', 'type', 'bridge']],
    verify: () => existsSync('/proc/sys/net/bridge/bridge-nf-call-iptables'),
  },
  tun: {
    description: 'tun/tap devices (CONFIG_TUN, /dev/net/tun)',
    steps: [['ip', 'tuntap', 'add', 'dev', 'cnkt0', 'mode', 'tap']],
  },
} as const satisfies Record<string, KernelFeature>;

export type KernelFeatureName = keyof typeof KERNEL_FEATURES;

/** The marker line: `// cnikit-kernel-features: name name …` (names separated by spaces). */
const MARKER = /^\/\/ cnikit-kernel-features:(.*)$/m;

/**
 * The feature names a test file's source declares (empty when it has no marker line). Only comment lines before
 * the first other line count. Unknown names throw, so a typo cannot send a file to the wrong kernel.
 */
export function parseKernelFeaturesMarker(source: string, file = 'test file'): KernelFeatureName[] {
  const head: string[] = [];
  for (const line of source.split('\n')) {
    const t = line.trim();
    if (t === '' || t.startsWith('//') || t.startsWith('#!')) head.push(t);
    else break;
  }
  const m = MARKER.exec(head.join('\n'));
  if (!m) return [];
  const names = m[1]!.trim().split(/\s+/).filter(Boolean);
  if (names.length === 0) throw new Error(`${file}: empty cnikit-kernel-features line`);
  for (const n of names) {
    if (!Object.hasOwn(KERNEL_FEATURES, n))
      throw new Error(
        `${file}: unknown kernel feature ${JSON.stringify(n)} (known: ${Object.keys(KERNEL_FEATURES).join(', ')})`,
      );
  }
  return names as KernelFeatureName[];
}

export interface ProbeOutcome {
  present: boolean;
  /** Why it is missing: the failing command and its error. */
  reason?: string;
}

const cache = new Map<KernelFeatureName, ProbeOutcome>();

function probeOne(name: KernelFeatureName): ProbeOutcome {
  const feature: KernelFeature = KERNEL_FEATURES[name];
  const ns = `cnikit-probe-${process.pid}-${randomBytes(3).toString('hex')}`;
  const add = spawnSync('ip', ['netns', 'add', ns], { encoding: 'utf8' });
  if (add.status !== 0)
    throw new Error(`kernel feature probe: ip netns add failed (root needed): ${add.stderr.trim()}`);
  try {
    for (const [tool, ...args] of feature.steps) {
      const r = spawnSync(tool, ['-n', ns, ...args], { encoding: 'utf8', timeout: scaled(60_000) });
      if (r.error) throw new Error(`kernel feature probe: ${tool}: ${r.error.message}`);
      if (r.status !== 0)
        return {
          present: false,
          reason: `${tool} ${args.join(' ')}: ${r.stderr.trim().replace(/\s+/g, ' ')}`,
        };
    }
    if (feature.verify && !feature.verify(ns))
      return { present: false, reason: 'accepted but not in effect' };
    return { present: true };
  } finally {
    spawnSync('ip', ['netns', 'del', ns]);
  }
}

/** Probes the running kernel (once per feature and process) in throw-away namespaces. */
export function probeKernelFeatures(
  names: readonly KernelFeatureName[] = Object.keys(KERNEL_FEATURES) as KernelFeatureName[],
): Record<KernelFeatureName, ProbeOutcome> {
  const out = {} as Record<KernelFeatureName, ProbeOutcome>;
  for (const n of names) {
    if (!Object.hasOwn(KERNEL_FEATURES, n))
      throw new TypeError(`unknown kernel feature ${JSON.stringify(n)}`);
    let o = cache.get(n);
    if (!o) {
      o = probeOne(n);
      cache.set(n, o);
    }
    out[n] = o;
  }
  return out;
}

/** The features of `names` the running kernel lacks. */
export function missingKernelFeatures(names: readonly KernelFeatureName[]): KernelFeatureName[] {
  const r = probeKernelFeatures(names);
  return names.filter((n) => !r[n].present);
}

/**
 * Throws (the test fails, it never skips) when the running kernel lacks any of these features. The message names
 * each missing feature with the probe's error and says how to run the file in the kernel lab instead.
 */
export function requireKernelFeatures(...names: KernelFeatureName[]): void {
  const r = probeKernelFeatures(names);
  const missing = names.filter((n) => !r[n].present);
  if (missing.length === 0) return;
  throw new Error(
    `this kernel lacks ${missing.map((n) => `${n} — ${KERNEL_FEATURES[n].description} (${r[n].reason})`).join('; ')}. ` +
      `Declare them on the file's first line ("// cnikit-kernel-features: ${names.join(' ')}") so ` +
      'scripts/run-tests.mjs runs it in the kernel lab, or run it there yourself: ' +
      'npm run vm -- node scripts/run-tests.mjs <file> (docs/kernel-lab.md)',
  );
}
