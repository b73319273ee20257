// deploy/kubernetes/ through the oldest kubectl the guide supports: v1.20.2 built from Debian's source package
// (scripts/k8s-build.mjs; a cache hit after the first build). Its kustomize (v2.0.3) must render the kustomization
// into exactly the manifests scripts/deploy-kubernetes.test.ts checks (namespace, image tag and labels applied), and
// `kubectl apply -k --dry-run` must accept it against a v1.20.2 API server (scripts/k8s/control-plane.ts).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { type ControlPlane, startControlPlane } from './k8s/control-plane.ts';
// @ts-expect-error: a JavaScript module of scripts/ without declarations
import { k8sBinaries, UPSTREAM_VERSION } from './k8s-build.mjs';

const ROOT = join(import.meta.dirname, '..');
const DIR = join(ROOT, 'deploy', 'kubernetes');

interface Doc {
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  spec?: { template?: { spec?: { containers?: { image: string }[]; initContainers?: { image: string }[] } } };
}
const parse = (text: string): Doc[] =>
  parseAllDocuments(text).map((d) => {
    assert.deepEqual(d.errors, []);
    return d.toJS() as Doc;
  });
const key = (d: Doc) => `${d.kind}/${d.metadata.name}`;

let kubectl = '';
before(async () => {
  const { dir } = await k8sBinaries();
  kubectl = join(dir, 'bin', 'kubectl');
  const v = JSON.parse(
    spawnSync(kubectl, ['version', '--client', '-o', 'json'], { encoding: 'utf8' }).stdout,
  );
  assert.equal(v.clientVersion.gitVersion, UPSTREAM_VERSION);
});

describe(`deploy/kubernetes with kubectl ${UPSTREAM_VERSION}`, () => {
  test('kubectl kustomize renders every manifest with the namespace, the release tag and both labels', () => {
    const r = spawnSync(kubectl, ['kustomize', DIR], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const rendered = parse(r.stdout);
    const kustomization = parse(readFileSync(join(DIR, 'kustomization.yaml'), 'utf8'))[0] as unknown as {
      resources: string[];
    };
    const sources = kustomization.resources.flatMap((f) => parse(readFileSync(join(DIR, f), 'utf8')));
    assert.deepEqual(rendered.map(key).sort(), sources.map(key).sort());
    const version = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version;
    const clusterScoped = new Set(['ClusterRole', 'ClusterRoleBinding', 'CustomResourceDefinition']);
    for (const d of rendered) {
      assert.deepEqual(
        d.metadata.labels,
        { 'app.kubernetes.io/name': 'cnikit', 'app.kubernetes.io/part-of': 'cnikit' },
        key(d),
      );
      assert.equal(d.metadata.namespace, clusterScoped.has(d.kind) ? undefined : 'kube-system', key(d));
    }
    const ds = rendered.find((d) => d.kind === 'DaemonSet');
    const pod = ds?.spec?.template?.spec;
    const images = [...(pod?.initContainers ?? []), ...(pod?.containers ?? [])].map((c) => c.image);
    assert.ok(images.length >= 2);
    for (const i of images) assert.equal(i, `ghcr.io/cnikit/cnikit:v${version}`);
  });

  test('the check can fail: a kustomization with `labels:` is refused by this kubectl', () => {
    // the field current kustomize prefers; kubectl 1.20 stops at it, which is why deploy/kubernetes does not use it
    const dir = mkdtempSync(join(tmpdir(), 'cnikit-kustomize-'));
    try {
      const text = readFileSync(join(DIR, 'kustomization.yaml'), 'utf8').replace(
        'resources:',
        'labels:\n  - pairs:\n      a: b\nresources:',
      );
      for (const f of readdirSync(DIR).filter((n) => n.endsWith('.yaml') && n !== 'kustomization.yaml'))
        copyFileSync(join(DIR, f), join(dir, f));
      writeFileSync(join(dir, 'kustomization.yaml'), text);
      const r = spawnSync(kubectl, ['kustomize', dir], { encoding: 'utf8' });
      assert.notEqual(r.status, 0);
      assert.match(r.stderr, /unknown field "labels"/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  describe('against a v1.20.2 API server', () => {
    const netns = `cnikit-kust-${process.pid}`;
    const dir = mkdtempSync(join(tmpdir(), 'cnikit-kustomize-cp-'));
    let cp: ControlPlane | undefined;
    before(async () => {
      cp = await startControlPlane({ binDir: join(kubectl, '..'), dir, netns });
    });
    after(async () => {
      await cp?.stop();
      spawnSync('ip', ['netns', 'del', netns]);
      rmSync(dir, { recursive: true, force: true });
    });

    for (const mode of ['client', 'server'])
      test(`kubectl apply -k deploy/kubernetes/ --dry-run=${mode}`, () => {
        const r = cp!.kubectl(['apply', '-k', DIR, `--dry-run=${mode}`]);
        assert.equal(r.status, 0, r.stderr);
        const lines = r.stdout.trim().split('\n').sort();
        // 1.20 prints "(dry run)" for the client and "(server dry run)" for the server
        const tag = mode === 'client' ? 'dry run' : 'server dry run';
        assert.deepEqual(lines, [
          `clusterrole.rbac.authorization.k8s.io/cnikit created (${tag})`,
          `clusterrole.rbac.authorization.k8s.io/cnikit-cluster-ipam created (${tag})`,
          `clusterrole.rbac.authorization.k8s.io/cnikit-cluster-ipam-reclaimer created (${tag})`,
          `clusterrolebinding.rbac.authorization.k8s.io/cnikit created (${tag})`,
          `clusterrolebinding.rbac.authorization.k8s.io/cnikit-cluster-ipam created (${tag})`,
          `clusterrolebinding.rbac.authorization.k8s.io/cnikit-cluster-ipam-reclaimer created (${tag})`,
          `configmap/cnikit-config created (${tag})`,
          `customresourcedefinition.apiextensions.k8s.io/ipamallocations.ipam.cnikit.dev created (${tag})`,
          `customresourcedefinition.apiextensions.k8s.io/ipamblocks.ipam.cnikit.dev created (${tag})`,
          `daemonset.apps/cnikit created (${tag})`,
          `role.rbac.authorization.k8s.io/cnikit-cluster-ipam-reclaimer created (${tag})`,
          `rolebinding.rbac.authorization.k8s.io/cnikit-cluster-ipam-reclaimer created (${tag})`,
          `serviceaccount/cnikit created (${tag})`,
        ]);
        // a dry run creates nothing
        const got = cp!.kubectl(['get', 'daemonsets,configmaps', '-n', 'kube-system', '-o', 'name']);
        assert.equal(got.status, 0, got.stderr);
        assert.doesNotMatch(got.stdout, /cnikit/);
      });
  });
});
