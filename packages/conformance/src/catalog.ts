/**
 * The checks of the conformance kit: stable IDs, the spec section each comes from and what it does. IDs never change
 * meaning; a new check gets a new ID. Spec references are to SPEC.md at the tag spec-v1.1.0 of
 * github.com/containernetworking/cni (the spec version 1.1.0).
 */

export const SPEC_URL = 'https://github.com/containernetworking/cni/blob/spec-v1.1.0/SPEC.md';

/** The spec versions the kit knows (each has its own `add.<version>` check). */
export const KIT_VERSIONS = ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] as const;

export interface CheckInfo {
  /** Stable ID, e.g. `del.twice`. */
  id: string;
  /** One line. */
  title: string;
  /** The section of SPEC.md (spec-v1.1.0) the requirement comes from, e.g. `§2 DEL`; `kit rule` when none. */
  spec: string;
  /** The anchor of that section in SPEC.md ('' for kit rules). */
  anchor: string;
  /** What the kit does and what makes the check fail. */
  explain: string;
}

const ADD_VERSIONS: CheckInfo[] = KIT_VERSIONS.map((v) => ({
  id: `add.${v}`,
  title: `ADD with cniVersion ${v}: the result is that version's schema and matches the kernel`,
  spec: '§5 ADD Success; §1 Version considerations',
  anchor: '#add-success',
  explain:
    `The whole chain runs ADD with cniVersion ${v} (skip when the plugin's VERSION does not list it, or a plugin ` +
    'before it does not). The result must parse as the result type of that version (0.1.0/0.2.0: ip4/ip6; 0.3.x/0.4.0: ' +
    'interfaces with the version field of ips; 1.x: no version field), carry cniVersion ' +
    `"${v}", and agree with the kernel: every interface whose sandbox is CNI_NETNS exists in the container (same mac ` +
    'and mtu when given), every host interface (no sandbox) exists in the host, every address is on the interface its ' +
    'index names, every route is in the container routing table. DEL afterwards must succeed.',
}));

export const CHECKS: readonly CheckInfo[] = [
  {
    id: 'version.output',
    title: 'VERSION prints the version object and echoes the requested version',
    spec: '§2 VERSION; §5 VERSION Success',
    anchor: '#version-probe-plugin-version-support',
    explain:
      'VERSION with {"cniVersion": V} on stdin for every V the plugin lists (and 1.1.0): exit 0, one JSON object ' +
      'with cniVersion equal to V (the spec: "the value of cniVersion specified on input") and supportedVersions, ' +
      'a non-empty list of version strings.',
  },
  {
    id: 'version.config',
    title: "the plugin supports the configuration's cniVersion",
    spec: '§2 VERSION; §1 Version considerations',
    anchor: '#version-probe-plugin-version-support',
    explain:
      "The configuration list's cniVersion must be one of the versions the plugin's VERSION lists; the plugins " +
      'before it (through libcni) must list it too. When it is not, this one check fails and every check that runs ' +
      'the plugin in that version (add.prevresult, add.ifname-exists, add.failure-clean, check.*, del.*, ' +
      'concurrency, determinism) is skipped naming this check, instead of failing each with "expected ADD to ' +
      'succeed". The add.<version>, GC and STATUS checks pick their own versions and still run.',
  },
  {
    id: 'version.unsupported',
    title: 'a configuration in an unsupported version fails with code 1',
    spec: '§5 Error (code 1)',
    anchor: '#error',
    explain:
      'ADD with cniVersion "99.0.0" must exit non-zero with one error object of code 1 ("Incompatible CNI version") ' +
      'on stdout.',
  },
  ...(['CNI_COMMAND', 'CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME'] as const).map(
    (v): CheckInfo => ({
      id: `env.${v.slice(4).toLowerCase()}`,
      title: `ADD without ${v}${v === 'CNI_COMMAND' ? ' (or with an unknown command)' : ''} fails with code 4 naming it`,
      spec: '§2 Parameters; §5 Error (code 4)',
      anchor: '#parameters',
      explain:
        v === 'CNI_COMMAND'
          ? 'CNI_COMMAND=BOGUS with a valid configuration: exit non-zero, one error object of code 4 whose msg or ' +
            "details names CNI_COMMAND or the bad value. CNI_COMMAND unset: the same, or the reference skel's " +
            'answer to a human (exit 0, nothing on stdout, an "about" banner on stderr), which the kit accepts.'
          : `ADD with a valid configuration and every other variable set, ${v} unset: exit non-zero, one error ` +
            `object of code 4 whose msg or details names ${v} ("The error message must contain the names of ` +
            'invalid variables").',
    }),
  ),
  {
    id: 'stdin.malformed',
    title: 'malformed stdin: one error object (code 6 or 7), no stack trace',
    spec: '§5 Error (codes 6, 7); §2 Errors',
    anchor: '#error',
    explain:
      'ADD with truncated JSON, random bytes, a JSON array, a JSON string and an empty object: each must exit ' +
      'non-zero and print exactly one JSON error object (code, msg, optional details/cniVersion) with code 6 ' +
      '("Failed to decode content") or 7 ("Invalid network config"), and no stack trace on stdout.',
  },
  {
    id: 'stdin.oversized',
    title: 'oversized stdin (8 MiB of a broken document): one error object, no crash, no hang',
    spec: '§5 Error (codes 6, 7); §2 Errors',
    anchor: '#error',
    explain:
      'ADD with 8 MiB on stdin (a JSON object whose string never ends): exit non-zero within the timeout, one ' +
      'error object of code 6 or 7 on stdout, no stack trace.',
  },
  ...ADD_VERSIONS,
  {
    id: 'add.prevresult',
    title: 'a chained plugin passes prevResult through',
    spec: '§2 ADD; §5 ADD Success',
    anchor: '#add-add-container-to-network-or-apply-modifications',
    explain:
      'Only when plugins run before the plugin under test. Every interface, address, route and DNS nameserver of ' +
      'prevResult must be in the plugin\'s result ("must output it as their result, with any possible modifications ' +
      'made by that plugin included"); what is missing is listed.',
  },
  {
    id: 'add.ifname-exists',
    title: 'ADD fails when CNI_IFNAME already exists in the container, and changes nothing',
    spec: '§2 ADD',
    anchor: '#add-add-container-to-network-or-apply-modifications',
    explain:
      'Only for a plugin that creates the CNI_IFNAME interface (first in its chain; a normal ADD created it). A veth ' +
      'named CNI_IFNAME is put into a fresh container first; ADD must fail with an error object ("If an interface ' +
      'of the requested name already exists in the container, the CNI plugin MUST return with an error") and leave ' +
      'host, container and /var/lib/cni exactly as they were.',
  },
  {
    id: 'add.failure-clean',
    title: 'a failed ADD (forced by the kit) leaves host, container and /var/lib/cni as before',
    spec: 'kit rule (§3 Lifecycle & Ordering)',
    anchor: '#lifecycle--ordering',
    explain:
      'After one ADD/DEL that leaves the shared state a node has anyway (bridge device, base chains), the plugin ' +
      'under test gets an ADD it must fail: CNI_NETNS naming no namespace, then a 16-character CNI_IFNAME. The ' +
      'first one that fails is judged: an error object on stdout, and a snapshot of host and container (links, ' +
      'addresses, routes, iptables, ip6tables, nftables, tc, sysctls) and of the files under /var/lib/cni equal to ' +
      'the one before. The spec lets a runtime DEL after a failed ADD; the detail says whether that DEL would have ' +
      'cleaned up. Skip when the plugin succeeds with both (it needs neither the namespace nor the name).',
  },
  {
    id: 'check.after-add',
    title: 'CHECK right after ADD succeeds',
    spec: '§2 CHECK',
    anchor: '#check-check-containers-networking-is-as-expected',
    explain:
      'ADD, then CHECK with the ADD result as prevResult and the same parameters: exit 0, nothing on stdout. Skip ' +
      'when the configuration version is below 0.4.0 (no CHECK) or the plugin does not support one that has it.',
  },
  {
    id: 'check.tampered',
    title: 'CHECK fails after the kit undoes part of what ADD did',
    spec: '§2 CHECK',
    anchor: '#check-check-containers-networking-is-as-expected',
    explain:
      'ADD, CHECK (must pass), then the kit reverts the first kind of change the plugin made, in this order: ' +
      'container links it created (deleted), container addresses, container routes, container link attributes ' +
      '(mtu, promisc, mac put back), host links, iptables/ip6tables rules and chains, nftables rules, tc qdiscs, ' +
      'sysctls, files under /var/lib/cni. CHECK must then fail with an error object. Skip when ADD changed nothing ' +
      'the kit can revert.',
  },
  {
    id: 'del.twice',
    title: 'DEL twice succeeds',
    spec: '§2 DEL',
    anchor: '#del-remove-container-from-network-or-un-apply-modifications',
    explain:
      'ADD, DEL, DEL with the same parameters: both DELs exit 0 ("Plugins MUST accept multiple DEL calls").',
  },
  {
    id: 'del.without-add',
    title: 'DEL without ADD succeeds',
    spec: '§2 DEL',
    anchor: '#del-remove-container-from-network-or-un-apply-modifications',
    explain:
      'DEL of an attachment that was never added (the namespace exists, no prevResult): exit 0 ("return success if ' +
      'the interface in question, or any modifications added, are missing").',
  },
  {
    id: 'del.netns-gone',
    title: 'DEL with the container namespace gone succeeds',
    spec: '§2 DEL',
    anchor: '#del-remove-container-from-network-or-un-apply-modifications',
    explain:
      'ADD, remove the container namespace, DEL with the old CNI_NETNS and the ADD result as prevResult: exit 0 ' +
      '(an IPAM plugin "should ... return success even if the container network namespace no longer exists").',
  },
  {
    id: 'del.cleanup',
    title: 'ADD then DEL leaves host, container and the file paths under /var/lib/cni as before',
    spec: '§2 DEL',
    anchor: '#del-remove-container-from-network-or-un-apply-modifications',
    explain:
      'After one ADD/DEL of another container (shared state), ADD and DEL of a fresh one: the snapshots of host and ' +
      'container and the set of files under /var/lib/cni must equal those before (a DEL must "undo any ' +
      'modifications applied in the plugin\'s ADD"). File contents may change (round-robin hints).',
  },
  {
    id: 'concurrency',
    title: 'concurrent ADDs and DELs of different containers succeed without conflicts',
    spec: '§3 Lifecycle & Ordering',
    anchor: '#lifecycle--ordering',
    explain:
      'N containers (--concurrency, default 6) are added at the same time through the whole chain, then deleted at ' +
      'the same time ("Plugins must handle being executed concurrently across different containers"): every call ' +
      'succeeds, no address is given to two containers, and afterwards the containers are as before.',
  },
  {
    id: 'gc.valid-attachments',
    title: 'GC removes exactly the state of the attachments that are not valid',
    spec: '§2 GC; §3 Garbage-collecting a network',
    anchor: '#gc-clean-up-any-stale-resources',
    explain:
      "Needs 1.1.0. Attachments A and B are added; B's namespace is removed; GC with cni.dev/valid-attachments = " +
      '[A] must exit 0; everything the plugin added for A (host state lines, files) must still be there, and what it ' +
      'added for B only must be gone.',
  },
  {
    id: 'status.answers',
    title: 'STATUS answers',
    spec: '§2 STATUS',
    anchor: '#status-check-plugin-status',
    explain:
      'Needs 1.1.0. STATUS with the configuration: exit 0 with nothing on stdout (ready), or one error object of ' +
      'code 50 or 51 (not available).',
  },
  {
    id: 'determinism',
    title: 'the same request gives the same answer',
    spec: 'kit rule (§5 VERSION Success; §5 ADD Success)',
    anchor: '#version-success',
    explain:
      'VERSION twice prints identical output; ADD, DEL, ADD of the same attachment give results of the same shape ' +
      '(interface names and sandboxes, number and families of addresses with their prefix lengths, routes, DNS); ' +
      'allocated values (addresses, MACs) may differ.',
  },
];

export function checkInfo(id: string): CheckInfo | undefined {
  return CHECKS.find((c) => c.id === id);
}

/** Expand `--only` patterns: exact IDs or prefixes ending in `.` or `*` (`add.*`, `env.`). Unknown → error. */
export function selectChecks(only: readonly string[] | undefined): CheckInfo[] {
  if (!only || only.length === 0) return [...CHECKS];
  const out = new Set<CheckInfo>();
  for (const raw of only) {
    const p = raw.trim();
    if (!p) continue;
    const prefix = p.endsWith('*') ? p.slice(0, -1) : p.endsWith('.') ? p : undefined;
    const hits = CHECKS.filter((c) => (prefix !== undefined ? c.id.startsWith(prefix) : c.id === p));
    if (hits.length === 0) throw new Error(`unknown check ${JSON.stringify(p)} (cnikit conformance --list)`);
    for (const h of hits) out.add(h);
  }
  return CHECKS.filter((c) => out.has(c));
}
