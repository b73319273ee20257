// The shared Kubernetes client's configuration side: kubeconfig YAML as kubectl/kubeadm write it, relative
// certificate paths, tokens, contexts, and the errors that name what is wrong.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { tempDir } from '@cnikit/testing';
import { KubeConfigError, kubeconfigConnection, parseKubeYaml } from './kube.ts';

const KUBEADM = `apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: Q0EK
    server: https://10.0.0.1:6443   # the control plane
  name: kubernetes
contexts:
- context:
    cluster: kubernetes
    user: "whereabouts"
  name: whereabouts-context
- name: other
  context:
    cluster: none
    user: none
current-context: whereabouts-context
kind: Config
preferences: {}
users:
- name: whereabouts
  user:
    token: 'abc''def'
`;

test('kubeconfig YAML: lists of mappings, quoted scalars, comments, {} and []', () => {
  const doc = parseKubeYaml(KUBEADM) as Record<string, unknown>;
  assert.equal(doc['current-context'], 'whereabouts-context');
  assert.deepEqual(doc.preferences, {});
  assert.deepEqual((doc.contexts as unknown[]).length, 2);
  assert.deepEqual((doc.contexts as Array<{ name: string }>)[1]!.name, 'other');
  assert.deepEqual(parseKubeYaml('a:\n  - x\n  - "y z"\nb: []\n'), { a: ['x', 'y z'], b: [] });
  assert.deepEqual(parseKubeYaml('a:\n- 1\n- two\n'), { a: ['1', 'two'] });
});

test('kubeconfigConnection: the current context, CA data, token; apiRoot replaces the server', () => {
  using tmp = tempDir();
  const f = join(tmp.path, 'kc');
  writeFileSync(f, KUBEADM);
  const c = kubeconfigConnection(f);
  assert.equal(c.server, 'https://10.0.0.1:6443');
  assert.equal(c.ca?.toString(), 'CA\n');
  assert.equal(c.token, "abc'def");
  assert.equal(c.user, 'whereabouts');
  assert.equal(
    kubeconfigConnection(f, { apiRoot: 'https://127.0.0.1:6443/' }).server,
    'https://127.0.0.1:6443',
  );
});

test('kubeconfigConnection: relative certificate files; clear errors for what is missing', () => {
  using tmp = tempDir();
  writeFileSync(join(tmp.path, 'ca.crt'), 'ca');
  writeFileSync(join(tmp.path, 'u.crt'), 'cert');
  writeFileSync(join(tmp.path, 'u.key'), 'key');
  const f = join(tmp.path, 'kc.json');
  const doc = {
    clusters: [{ name: 'c', cluster: { server: 'https://h:1', 'certificate-authority': 'ca.crt' } }],
    users: [{ name: 'u', user: { 'client-certificate': 'u.crt', 'client-key': 'u.key' } }],
    contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
    'current-context': 'x',
  };
  writeFileSync(f, JSON.stringify(doc));
  const c = kubeconfigConnection(f);
  assert.equal(c.ca?.toString(), 'ca');
  assert.equal(c.cert?.toString(), 'cert');
  assert.equal(c.key?.toString(), 'key');
  assert.throws(
    () => kubeconfigConnection(join(tmp.path, 'absent')),
    (e: unknown) => e instanceof KubeConfigError && /absent does not exist/.test(e.message),
  );
  writeFileSync(f, JSON.stringify({ ...doc, 'current-context': 'nope' }));
  assert.throws(() => kubeconfigConnection(f), /no context named "nope"/);
  writeFileSync(f, JSON.stringify({ ...doc, users: [{ name: 'u', user: { 'client-key': 'gone.key' } }] }));
  assert.throws(() => kubeconfigConnection(f), /cannot read client-key .*gone\.key/);
  writeFileSync(f, 'a: [1, 2]\n: broken');
  assert.throws(() => kubeconfigConnection(f), /is not valid YAML or JSON/);
});
