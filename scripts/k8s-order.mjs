// The order in which `run-tests --k8s` starts the Kubernetes end-to-end files: the longest first. Node's test
// runner sorts the files it is given by name, so with --test-concurrency=4 the lab-cluster files (test-netns/k8s/
// cluster*.k8s.test.ts, 10-19 minutes each) started behind the short plugins/ and scripts/ files and the run ended
// with one long file alone. run-tests.mjs therefore runs each k8s file as its own `node --test` and starts them
// from this list, longest first, a few at a time (scripts/run-tests.mjs, runK8sPool).

/**
 * Seconds per file, used only to order the files: the per-file lines of one full `npm run test:k8s` on the shared
 * 2-core machine (2026-12-02, 4 files at a time, beside the kernel-lab part of an `npm test`), except cluster-agent:
 * 995 s in that run, where a watch bug made two of its tests wait out their bounds (414 s and 120 s), 451 s alone
 * once fixed; 700 s is its share among the others. A file not listed counts
 * as UNLISTED_SECONDS: a new k8s file starts among the long ones until it has a figure here.
 */
export const K8S_SECONDS = {
  'test-netns/k8s/cluster-lifecycle.k8s.test.ts': 788,
  'test-netns/k8s/cluster-agent.k8s.test.ts': 700,
  'test-netns/k8s/cluster-network.k8s.test.ts': 583,
  'test-netns/k8s/cluster.k8s.test.ts': 556,
  'test-netns/k8s/node-agent.k8s.test.ts': 107,
  'test-netns/k8s/cri.k8s.test.ts': 105,
  'plugins/cluster-ipam/src/reclaimer.k8s.test.ts': 99,
  'plugins/cluster-ipam/src/legacy-records.k8s.test.ts': 50,
  'plugins/cluster-ipam/src/cluster-ipam.k8s.test.ts': 48,
  'plugins/cluster-ipam/src/whereabouts-import.k8s.test.ts': 44,
  'scripts/deploy-kubernetes.k8s.test.ts': 35,
  'plugins/cluster-ipam/src/cluster-ipam-warm.k8s.test.ts': 30,
  'test-netns/k8s/control-plane.k8s.test.ts': 27,
  'test-netns/k8s/reflect2-patch.k8s.test.ts': 15,
  'test-netns/k8s/cri-gc.k8s.test.ts': 14,
};
export const UNLISTED_SECONDS = 600;

/** files (repository-relative paths), longest first by `seconds`; equal ones by name. */
export function longestFirst(files, seconds = K8S_SECONDS) {
  const s = (f) => seconds[f] ?? UNLISTED_SECONDS;
  return [...files].sort((a, b) => s(b) - s(a) || (a < b ? -1 : a > b ? 1 : 0));
}
