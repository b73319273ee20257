// scripts/k8s-order.mjs: the order in which run-tests --k8s starts the Kubernetes files (longest first).
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
// @ts-expect-error: a JavaScript module of scripts/ without declarations
import { K8S_SECONDS, longestFirst, UNLISTED_SECONDS } from './k8s-order.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));

test('longest first: by the recorded seconds, unlisted files as UNLISTED_SECONDS, ties by name', () => {
  const seconds = { 'a.k8s.test.ts': 10, 'b.k8s.test.ts': 900, 'c.k8s.test.ts': 10, 'd.k8s.test.ts': 300 };
  assert.deepEqual(
    longestFirst(
      ['c.k8s.test.ts', 'a.k8s.test.ts', 'd.k8s.test.ts', 'new.k8s.test.ts', 'b.k8s.test.ts'],
      seconds,
    ),
    ['b.k8s.test.ts', 'new.k8s.test.ts', 'd.k8s.test.ts', 'a.k8s.test.ts', 'c.k8s.test.ts'],
  );
  assert.ok(UNLISTED_SECONDS > 300 && UNLISTED_SECONDS < 900);
  const input = ['z', 'y'];
  longestFirst(input, {});
  assert.deepEqual(input, ['z', 'y'], 'the given list is not reordered in place');
});

test("the repository's k8s files: every listed one exists, and the lab-cluster files start before the short ones", () => {
  for (const f of Object.keys(K8S_SECONDS)) {
    assert.match(f, /\.k8s\.test\.ts$/);
    assert.ok(existsSync(join(root, f)), `${f} (listed in scripts/k8s-order.mjs) exists`);
  }
  const order = longestFirst(Object.keys(K8S_SECONDS));
  assert.equal(order[0], 'test-netns/k8s/cluster-lifecycle.k8s.test.ts');
  assert.ok(
    order.indexOf('test-netns/k8s/cluster.k8s.test.ts') <
      order.indexOf('scripts/deploy-kubernetes.k8s.test.ts'),
  );
});
