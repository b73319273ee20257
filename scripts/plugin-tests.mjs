// Which test files are one plugin's (`node scripts/run-tests.mjs --plugin NAME`), derived from paths and names so a
// new plugin's files are found without a list to keep (scripts/run-tests.test.ts checks the derivation):
//   unit, kernel   every *.test.ts under plugins/NAME/ (*.kernel.test.ts: kernel; they go to the kernel lab by
//                  themselves when this kernel lacks what their `// cnikit-kernel-features:` line names)
//   black-box      test-netns/NAME.test.ts and test-netns/NAME-*.test.ts, and every test-netns file whose top comment
//                  names the plugin on a `// cnikit-test-plugins: a b` line (test-netns/stacked.test.ts)
//   conformance    the plugin's row of the matrix when test-netns/conformance/NAME.conflist exists: in
//                  test-netns/conformance.test.ts, or in test-netns/conformance-lab.test.ts for the rows that need the
//                  kernel lab (LAB_ROWS of test-netns/conformance-matrix.ts); CNIKIT_CONFORMANCE_ROWS=NAME restricts
//                  the matrix to it
// Every other test-netns file is shared by all plugins (SHARED, each with why): a full run (`npm test`) has them.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

/** The test-netns files that are no single plugin's, and why (scripts/run-tests.test.ts: every file is classified). */
export const SHARED = {
  'test-netns/basics.test.ts': 'every plugin name: VERSION, bare invocation, multicall forms, error objects',
  'test-netns/chains.test.ts': "whole conflists of a node, every plugin cnikit's",
  'test-netns/cnitool.test.ts': 'the cnitool CLI',
  'test-netns/docs-examples.test.ts': 'the examples of every plugin page (docs/plugins/*.md)',
  'test-netns/hardening.test.ts': 'hardening probes across the plugins',
  'test-netns/libcni.test.ts': "@cnikit/libcni's CniConfig on real chains",
  'test-netns/observability.test.ts': 'OTLP spans of a chain',
  'test-netns/packages.test.ts': 'the npm packages',
  'test-netns/property.kernel.test.ts': "property-based suite over every plugin's dispatcher",
  'test-netns/stdin.test.ts': 'stdin closed, for every plugin',
  'test-netns/stdout.test.ts': 'stdout on /dev/null, for every plugin',
  'test-netns/warm.test.ts': 'warm mode (the service and the client)',
  'test-netns/warm-stop.test.ts': 'warm mode: the service stops on SIGTERM within a bound',
  'test-netns/kubernetes-image.test.ts': "the DaemonSet's image",
  'test-netns/k8s/guide.test.ts':
    "the operator's guide: every shell block of docs/kubernetes.md named and run",
  'test-netns/conformance.test.ts': 'the conformance matrix (one row per plugin: CNIKIT_CONFORMANCE_ROWS)',
  'test-netns/conformance-lab.test.ts': "the conformance matrix's kernel-lab rows (CNIKIT_CONFORMANCE_ROWS)",
};

/** Plugins without a row of the conformance matrix, and why (the matrix runs plugins that need no service). */
export const NO_CONFORMANCE_ROW = {};

function walk(root, dir, out) {
  if (!existsSync(dir)) return out;
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name.startsWith('.')) continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(root, p, out);
    else if (name.endsWith('.test.ts')) out.push(relative(root, p));
  }
  return out;
}

/** The plugins: plugins/<name>/src/index.ts. */
export function pluginNames(root) {
  return readdirSync(join(root, 'plugins'))
    .filter((d) => existsSync(join(root, 'plugins', d, 'src', 'index.ts')))
    .sort();
}

/** The plugins a file's top comment names (`// cnikit-test-plugins: a b`), [] without one. */
export function markedPlugins(text) {
  const m = /^\s*(?:\/\/[^\n]*\n\s*)*\/\/ cnikit-test-plugins:([^\n]*)/.exec(text);
  return m ? m[1].trim().split(/\s+/).filter(Boolean) : [];
}

/** The rows of LAB_ROWS in test-netns/conformance-matrix.ts (read as text: this module runs without a loader). */
export function labRows(root) {
  const text = readFileSync(join(root, 'test-netns', 'conformance-matrix.ts'), 'utf8');
  const m = /export const LAB_ROWS[^=]*=\s*\{([\s\S]*?)\n\};/.exec(text);
  if (!m) throw new Error('test-netns/conformance-matrix.ts: no `export const LAB_ROWS … = { … };`');
  return [...m[1].matchAll(/^\s*'?([A-Za-z0-9-]+)'?\s*:/gm)].map((x) => x[1]).sort();
}

/** The black-box files (test-netns/, release and k8s ones aside) of `name`. */
function blackBox(root, name) {
  return walk(root, join(root, 'test-netns'), [])
    .filter((f) => !f.endsWith('.release.test.ts') && !f.endsWith('.k8s.test.ts') && !(f in SHARED))
    .filter((f) => {
      const base = f.slice(f.lastIndexOf('/') + 1, -'.test.ts'.length);
      return (
        base === name ||
        base.startsWith(`${name}-`) ||
        markedPlugins(readFileSync(join(root, f), 'utf8')).includes(name)
      );
    })
    .sort();
}

/**
 * The test files of one plugin: { unit, kernel, blackBox, conformance } (conformance: { file, row } or undefined),
 * paths relative to `root`.
 */
export function pluginTests(root, name) {
  const own = walk(root, join(root, 'plugins', name), []).sort();
  const hasRow = existsSync(join(root, 'test-netns', 'conformance', `${name}.conflist`));
  return {
    unit: own.filter((f) => !f.endsWith('.kernel.test.ts')),
    kernel: own.filter((f) => f.endsWith('.kernel.test.ts')),
    blackBox: blackBox(root, name),
    conformance: hasRow
      ? {
          file: labRows(root).includes(name)
            ? 'test-netns/conformance-lab.test.ts'
            : 'test-netns/conformance.test.ts',
          row: name,
        }
      : undefined,
  };
}

/** Every file of `pluginTests`, in one list. */
export function pluginTestFiles(root, name) {
  const t = pluginTests(root, name);
  return [...t.unit, ...t.kernel, ...t.blackBox, ...(t.conformance ? [t.conformance.file] : [])];
}
