// The order in which `run-tests --k8s` starts the Kubernetes end-to-end files: the longest first. Node's test
// runner sorts the files it is given by name, so with --test-concurrency=4 the lab-cluster files (test-netns/k8s/
// cluster*.k8s.test.ts, 10-19 minutes each) started behind the short plugins/ and scripts/ files and the run ended
// with one long file alone. run-tests.mjs therefore runs each k8s file as its own `node --test` and starts them
// from this list, longest first, a few at a time (scripts/run-tests.mjs, runK8sPool).

/**
 * Seconds per file, used only to order the files. Measured on the shared 2-core machine where a figure is recorded
 * (docs/kubernetes.md, docs/lab-cluster.md, docs/k8s-build.md, the commits that added the files; the busiest one
 * where several are): cluster-lifecycle, cluster-agent, cluster, cluster-network, reclaimer, cri (2-4 min),
 * control-plane, deploy-kubernetes, reflect2-patch. The others (cluster-ipam-warm, cluster-ipam, node-agent, cri-gc,
 * whereabouts-import) have no recorded figure: their values are estimates from what they start (one control
 * plane, no nodes) — replace them with the per-file lines of a full `npm run test:k8s`. A file not listed counts
 * as UNLISTED_SECONDS: a new k8s file starts among the long ones until it has a figure here.
 */
export const K8S_SECONDS = {
  'test-netns/k8s/cluster-lifecycle.k8s.test.ts': 1135,
  'test-netns/k8s/cluster-agent.k8s.test.ts': 858,
  'test-netns/k8s/cluster.k8s.test.ts': 660,
  'test-netns/k8s/cluster-network.k8s.test.ts': 619,
  'plugins/cluster-ipam/src/reclaimer.k8s.test.ts': 456,
  'plugins/cluster-ipam/src/cluster-ipam-warm.k8s.test.ts': 300,
  'plugins/cluster-ipam/src/cluster-ipam.k8s.test.ts': 240,
  'test-netns/k8s/cri.k8s.test.ts': 240,
  'test-netns/k8s/node-agent.k8s.test.ts': 200,
  'test-netns/k8s/cri-gc.k8s.test.ts': 90,
  'plugins/cluster-ipam/src/whereabouts-import.k8s.test.ts': 60,
  'test-netns/k8s/control-plane.k8s.test.ts': 12,
  'scripts/deploy-kubernetes.k8s.test.ts': 12,
  'test-netns/k8s/reflect2-patch.k8s.test.ts': 11,
};
export const UNLISTED_SECONDS = 600;

/** files (repository-relative paths), longest first by `seconds`; equal ones by name. */
export function longestFirst(files, seconds = K8S_SECONDS) {
  const s = (f) => seconds[f] ?? UNLISTED_SECONDS;
  return [...files].sort((a, b) => s(b) - s(a) || (a < b ? -1 : a > b ? 1 : 0));
}
