// deploy/kubernetes/: every manifest validated against the Kubernetes API's own OpenAPI schemas (the validators
// kubernetes-models generates from them; no cluster here), plus what the schemas cannot know: the DaemonSet's
// commands are ones `cnikit install-cni` accepts, the ConfigMap's template renders with the init container's
// environment into a conflist of this tree's plugins, every mount names a volume, tolerations cover every taint.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { CustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1';
import { DaemonSet } from 'kubernetes-models/apps/v1';
import {
  ClusterRole,
  ClusterRoleBinding,
  Role,
  RoleBinding,
} from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { ConfigMap, ServiceAccount } from 'kubernetes-models/v1';
import { parseAllDocuments } from 'yaml';
import { parseGcEnv } from '../packages/warm/src/cri-gc-loop.ts';
import { checkConflist, parseInstallCniArgs, renderTemplate } from '../packages/warm/src/install-cni.ts';
import { parseServeArgs } from '../packages/warm/src/serve.ts';
import { discoverPlugins } from './build.ts';
import { unknownFields } from './k8s-fields.ts';

const DIR = join(import.meta.dirname, '..', 'deploy', 'kubernetes');

interface Doc {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  [k: string]: unknown;
}

function docs(file: string): Doc[] {
  return parseAllDocuments(readFileSync(join(DIR, file), 'utf8')).map((d) => {
    assert.deepEqual(d.errors, [], `${file}: YAML errors`);
    return d.toJS({ maxAliasCount: 0 }) as Doc;
  });
}

const kustomization = docs('kustomization.yaml')[0] as unknown as {
  resources: string[];
  namespace: string;
  images: { name: string; newTag: string }[];
};
const all = kustomization.resources.flatMap((f) => docs(f).map((d) => ({ file: f, doc: d })));
const ds = all.find((d) => d.doc.kind === 'DaemonSet')?.doc as unknown as {
  spec: {
    template: {
      spec: {
        hostPID: boolean;
        hostNetwork: boolean;
        serviceAccountName?: string;
        automountServiceAccountToken?: boolean;
        priorityClassName: string;
        tolerations: { operator: string; key?: string; effect?: string }[];
        initContainers: Container[];
        containers: Container[];
        volumes: { name: string; hostPath?: { path: string }; configMap?: { name: string } }[];
      };
    };
    updateStrategy: { type: string };
  };
};
const cm = all.find((d) => d.doc.kind === 'ConfigMap')?.doc as unknown as Doc & {
  data: Record<string, string>;
};

interface Container {
  name: string;
  image: string;
  command: string[];
  env?: {
    name: string;
    valueFrom?: {
      fieldRef?: { fieldPath: string };
      configMapKeyRef?: { name: string; key: string; optional?: boolean };
    };
  }[];
  resources: { requests: Record<string, string>; limits: Record<string, string> };
  volumeMounts?: { name: string; mountPath: string }[];
  readinessProbe?: { exec: { command: string[] } };
  livenessProbe?: { exec: { command: string[] } };
  securityContext?: { privileged?: boolean };
  ports?: { name?: string; containerPort: number; protocol?: string }[];
}

describe('deploy/kubernetes', () => {
  test('kustomization lists every manifest of the directory; everything in kube-system', () => {
    const yamls = readdirSync(DIR).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml');
    assert.deepEqual([...kustomization.resources].sort(), yamls.sort());
    assert.equal(kustomization.namespace, 'kube-system');
    const clusterScoped = new Set(['ClusterRole', 'ClusterRoleBinding', 'CustomResourceDefinition']);
    for (const { doc } of all)
      assert.equal(
        doc.metadata.namespace,
        clusterScoped.has(doc.kind) ? undefined : 'kube-system',
        doc.metadata.name,
      );
    const version = JSON.parse(readFileSync(join(DIR, '..', '..', 'package.json'), 'utf8')).version;
    assert.equal(kustomization.images[0]?.newTag, `v${version}`, 'the image tag is the release version');
  });

  test('kustomization: only fields kubectl 1.20 (kustomize v2.0.3) knows; the labels are in each manifest', () => {
    // `labels:` (kustomize >= 4.1) stops kubectl 1.20 with `json: unknown field "labels"`; commonLabels would
    // also rewrite the DaemonSet's immutable selector. So each manifest carries its labels itself
    // (scripts/deploy-kubernetes.k8s.test.ts renders the directory with kubectl 1.20.2).
    const v203 = [
      'apiVersion',
      'kind',
      'namespace',
      'resources',
      'images',
      'commonLabels',
      'commonAnnotations',
    ];
    assert.deepEqual(
      Object.keys(kustomization).filter((k) => !v203.includes(k)),
      [],
      'fields kubectl 1.20 refuses',
    );
    for (const { file, doc } of all)
      assert.deepEqual(
        (doc.metadata as { labels?: Record<string, string> }).labels,
        { 'app.kubernetes.io/name': 'cnikit', 'app.kubernetes.io/part-of': 'cnikit' },
        `${file}: ${doc.kind} ${doc.metadata.name}`,
      );
  });

  test('every manifest is valid against the Kubernetes API schema of its kind', () => {
    const models: Record<string, new (d: never) => { validate(): void }> = {
      'apps/v1 DaemonSet': DaemonSet as never,
      'v1 ConfigMap': ConfigMap as never,
      'v1 ServiceAccount': ServiceAccount as never,
      'rbac.authorization.k8s.io/v1 ClusterRole': ClusterRole as never,
      'rbac.authorization.k8s.io/v1 ClusterRoleBinding': ClusterRoleBinding as never,
      'rbac.authorization.k8s.io/v1 Role': Role as never,
      'rbac.authorization.k8s.io/v1 RoleBinding': RoleBinding as never,
      'apiextensions.k8s.io/v1 CustomResourceDefinition': CustomResourceDefinition as never,
    };
    for (const { file, doc } of all) {
      const M = models[`${doc.apiVersion} ${doc.kind}`];
      assert.ok(M, `${file}: no schema for ${doc.apiVersion} ${doc.kind}`);
      assert.doesNotThrow(() => new M(doc as never).validate(), `${file}: ${doc.kind} ${doc.metadata.name}`);
      // strict, like `kubectl apply --validate=strict`: no key the schema does not know
      assert.deepEqual(unknownFields(doc), [], `${file}: ${doc.kind} ${doc.metadata.name}: unknown fields`);
    }
  });

  test('the schema check catches a broken manifest (it can fail)', () => {
    const bad = structuredClone(ds) as unknown as { spec: { template: { spec: { containers: unknown[] } } } };
    (bad.spec.template.spec.containers[0] as { command: unknown }).command = 'not-a-list';
    assert.throws(() => new DaemonSet(bad as never).validate(), /command/);
    const noSelector = structuredClone(ds) as unknown as { spec: Record<string, unknown> };
    delete noSelector.spec.selector;
    assert.throws(() => new DaemonSet(noSelector as never).validate(), /selector/);
    // misspelt keys pass validate() (the OpenAPI objects are open) but not the strict walk; maps stay open
    const typos = structuredClone(ds) as unknown as {
      metadata: { labels?: Record<string, string> };
      spec: { template: { spec: Record<string, unknown> & { containers: Record<string, unknown>[] } } };
    };
    typos.spec.template.spec.toleration = [];
    (typos.spec.template.spec.containers[0] as Record<string, unknown>).readinesProbe = {};
    typos.metadata.labels = { ...typos.metadata.labels, 'any-label': 'ok' };
    assert.doesNotThrow(() => new DaemonSet(typos as never).validate());
    assert.deepEqual(unknownFields(typos as never), [
      'spec.template.spec.containers[0].readinesProbe',
      'spec.template.spec.toleration',
    ]);
  });

  test('node-critical, every taint tolerated, rolling update, requests and limits on every container', () => {
    const spec = ds.spec.template.spec;
    assert.equal(spec.priorityClassName, 'system-node-critical');
    assert.ok(spec.tolerations.some((t) => t.operator === 'Exists' && !t.key && !t.effect));
    assert.equal(ds.spec.updateStrategy.type, 'RollingUpdate');
    assert.equal(spec.hostNetwork, true);
    assert.equal(spec.hostPID, true, 'cnikit-hostns enters pid 1 mount namespace');
    for (const c of [...spec.initContainers, ...spec.containers]) {
      for (const k of ['cpu', 'memory']) {
        assert.ok(c.resources.requests[k], `${c.name} requests.${k}`);
        assert.ok(c.resources.limits[k], `${c.name} limits.${k}`);
      }
      const volumes = new Set(spec.volumes.map((v) => v.name));
      for (const m of c.volumeMounts ?? [])
        assert.ok(volumes.has(m.name), `${c.name}: mount of unknown volume ${m.name}`);
    }
  });

  test('install-cni accepts the init container command; the template renders into a conflist of our plugins', () => {
    const init = ds.spec.template.spec.initContainers.find((c) => c.name === 'install-cni') as Container;
    assert.deepEqual(init.command.slice(0, 2), ['/opt/cnikit/cnikit', 'install-cni']);
    const args = parseInstallCniArgs(init.command.slice(2));
    assert.notEqual(args, 'help');
    if (args === 'help') return;
    assert.equal(args.mode, 'warm');
    // the service directory it makes 0700 is the serve container's socket directory on the host
    const runMount = init.volumeMounts?.find((m) => m.mountPath === args.runDir);
    assert.equal(
      ds.spec.template.spec.volumes.find((v) => v.name === runMount?.name)?.hostPath?.path,
      '/run/cnikit',
    );
    // the template file comes from the ConfigMap volume mounted at the template's directory
    const tmplDir = args.template?.slice(0, args.template.lastIndexOf('/'));
    const mount = init.volumeMounts?.find((m) => m.mountPath === tmplDir);
    const vol = ds.spec.template.spec.volumes.find((v) => v.name === mount?.name);
    assert.equal(vol?.configMap?.name, cm.metadata.name);
    const template = cm.data[(args.template as string).slice((tmplDir as string).length + 1)];
    assert.ok(template, 'the ConfigMap carries the template file');
    // the environment as the kubelet would give it: downward API and ConfigMap keys
    const env: Record<string, string> = {};
    for (const e of init.env ?? []) {
      if (e.valueFrom?.fieldRef?.fieldPath === 'spec.nodeName') env[e.name] = 'node-1';
      const ref = e.valueFrom?.configMapKeyRef;
      if (ref) {
        assert.equal(ref.name, cm.metadata.name);
        if (cm.data[ref.key] !== undefined) env[e.name] = cm.data[ref.key] as string;
      }
    }
    // the shipped ConfigMap sets no pod-cidr: each node's own spec.podCIDR, which install-cni looks up (node-podcidr)
    assert.equal(cm.data['pod-cidr'], undefined, 'no cluster-wide pod subnet by default');
    assert.equal(env.POD_CIDR, undefined);
    env.POD_CIDR = '10.244.3.0/24';
    const conf = checkConflist(renderTemplate(template, env), 'configmap');
    assert.deepEqual(conf.types, ['bridge', 'portmap', 'bandwidth', 'tuning']);
    const ours = new Set(discoverPlugins().map((p) => p.dir));
    for (const t of [...conf.types, 'host-local']) assert.ok(ours.has(t), `${t} is a plugin of this tree`);
    const rendered = JSON.parse(renderTemplate(template, env));
    assert.equal(rendered.plugins[0].ipam.type, 'host-local');
    assert.equal(rendered.plugins[0].ipam.ranges[0][0].subnet, '10.244.3.0/24');
    // without a pod subnet the install stops (nothing written)
    const { POD_CIDR: _, ...noCidr } = env;
    assert.throws(() => renderTemplate(template, noCidr), /POD_CIDR is not set/);
  });

  test('per-node pod subnet: the DaemonSet may get its own Node (RBAC); pod-cidr is an optional override', () => {
    const spec = ds.spec.template.spec;
    const of = (kind: string) => all.filter((d) => d.doc.kind === kind).map((d) => d.doc);
    const sa = of('ServiceAccount')[0] as Doc;
    assert.equal(spec.serviceAccountName, sa.metadata.name);
    assert.equal(sa.metadata.namespace, 'kube-system');
    assert.equal(spec.automountServiceAccountToken, true, 'install-cni reads the mounted token and CA');
    const role = of('ClusterRole').find((d) => d.metadata.name === 'cnikit') as Doc & {
      rules: { apiGroups: string[]; resources: string[]; verbs: string[] }[];
    };
    assert.deepEqual(
      role.rules,
      [
        { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] },
        { apiGroups: [''], resources: ['nodes/status'], verbs: ['patch'] },
      ],
      'read nodes; the node agent patches nodes/status (its VTEP MAC annotation), never a spec',
    );
    const binding = of('ClusterRoleBinding').find((d) => d.metadata.name === 'cnikit') as Doc & {
      roleRef: { apiGroup: string; kind: string; name: string };
      subjects: { kind: string; name: string; namespace: string }[];
    };
    assert.deepEqual(binding.roleRef, {
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'ClusterRole',
      name: role.metadata.name,
    });
    assert.deepEqual(binding.subjects, [
      { kind: 'ServiceAccount', name: sa.metadata.name, namespace: 'kube-system' },
    ]);
    // both install-cni runs (init, conf-watch) know their node; a ConfigMap without pod-cidr leaves POD_CIDR unset
    // (install-cni then asks the API server) instead of failing the pod
    const runs = [...spec.initContainers, ...spec.containers].filter(
      (c) => c.command.includes('install-cni') && !c.command.includes('--check'),
    );
    assert.equal(runs.length, 2);
    for (const c of runs) {
      assert.equal(
        c.env?.find((e) => e.name === 'NODE_NAME')?.valueFrom?.fieldRef?.fieldPath,
        'spec.nodeName',
      );
      const cidr = c.env?.find((e) => e.name === 'POD_CIDR')?.valueFrom?.configMapKeyRef;
      assert.deepEqual(cidr, { name: cm.metadata.name, key: 'pod-cidr', optional: true }, c.name);
    }
    assert.match(cm.data['10-cnikit.conflist'] as string, /"subnet": "\$\{POD_CIDR\}"/);
  });

  test('serve runs the host executable in the host mount namespace; readiness = files + conflist + service', () => {
    const spec = ds.spec.template.spec;
    const serve = spec.containers.find((c) => c.name === 'serve') as Container;
    assert.deepEqual(serve.command.slice(0, 3), [
      '/opt/cnikit/cnikit-hostns',
      '/opt/cni/bin/cnikit',
      'serve',
    ]);
    assert.equal(serve.securityContext?.privileged, true);
    const socket = serve.command[serve.command.indexOf('--socket') + 1];
    assert.equal(socket, '/run/cnikit/cnikit.sock', 'the path the installed clients use');
    // the probes run in the mount namespace of the container's process, which is the host's after cnikit-hostns:
    // host paths, the executable install-cni put there
    const probe = serve.readinessProbe?.exec.command ?? [];
    assert.deepEqual(probe.slice(0, 3), ['/opt/cni/bin/cnikit', 'install-cni', '--check']);
    const args = parseInstallCniArgs(probe.slice(2));
    assert.ok(args !== 'help' && args.verb === 'check' && args.socket === socket);
    const init = spec.initContainers[0] as Container;
    const hostPathOf = (mountPath: string | undefined) => {
      const m = init.volumeMounts?.find((x) => x.mountPath === mountPath);
      return spec.volumes.find((v) => v.name === m?.name)?.hostPath?.path;
    };
    const initArgs = parseInstallCniArgs(init.command.slice(2));
    if (initArgs === 'help') throw new Error('unexpected --help');
    assert.equal(
      hostPathOf(initArgs.binDir),
      args.binDir,
      'the probe checks the directory install-cni wrote',
    );
    assert.equal(hostPathOf(initArgs.binDir), '/opt/cni/bin');
    assert.equal(hostPathOf(initArgs.runDir), '/run/cnikit', 'the socket directory install-cni makes 0700');
    assert.equal(hostPathOf(initArgs.confDir), '/etc/cni/net.d');
    assert.deepEqual(serve.livenessProbe?.exec.command.slice(0, 3), [
      '/opt/cni/bin/cnikit',
      'serve',
      '--check',
    ]);
    assert.ok(existsSync(join(DIR, '..', '..', 'packages', 'warm', 'client', 'cnikit-hostns.c')));
    // the hosted dhcp daemon: off unless the ConfigMap sets it, what cnikit serve reads from its environment
    const envOf = (on: Record<string, string>) => {
      const env: Record<string, string> = {};
      for (const e of serve.env ?? []) {
        // the node agent's identity and credentials (downward API, the projected token's host path)
        if (['NODE_NAME', 'POD_UID', 'CNIKIT_SA_TOKEN_FILE', 'CNIKIT_SA_CA_FILE'].includes(e.name)) continue;
        const ref = e.valueFrom?.configMapKeyRef;
        assert.ok(ref?.name === 'cnikit-config' && ref.optional === true, `${e.name} from an optional key`);
        if (on[ref.key] !== undefined) env[e.name] = on[ref.key] as string;
      }
      return parseServeArgs(serve.command.slice(3), env) as { dhcpDaemon?: string[]; nodeAgent?: boolean };
    };
    assert.equal(envOf({}).dhcpDaemon, undefined);
    assert.equal(
      envOf({}).nodeAgent,
      undefined,
      'the node agent is off unless the ConfigMap sets node-agent',
    );
    assert.equal(envOf({ 'node-agent': 'on' }).nodeAgent, true);
    assert.deepEqual(envOf({ 'dhcp-daemon': 'on', 'dhcp-daemon-flags': '-timeout 5s' }).dhcpDaemon, [
      '-timeout',
      '5s',
    ]);
  });

  test('the metrics port and annotations are the ones docs/observability.md describes', () => {
    const doc = readFileSync(join(DIR, '..', '..', 'docs', 'observability.md'), 'utf8');
    const m = /the DaemonSet uses `([^`]+)` with the annotations ((?:`[^`]+: "[^"]*"`(?:, | and )?)+)/.exec(
      doc,
    );
    assert.ok(m, "docs/observability.md names the DaemonSet's metrics address and annotations");
    const documented = Object.fromEntries(
      [...(m[2] as string).matchAll(/`([^`:]+): "([^"]*)"`/g)].map((x) => [x[1], x[2]]),
    );
    const tpl = (ds.spec.template as unknown as { metadata: { annotations?: Record<string, string> } })
      .metadata;
    assert.deepEqual(tpl.annotations, documented);
    const serve = ds.spec.template.spec.containers.find((c) => c.name === 'serve') as Container;
    const opts = parseServeArgs(serve.command.slice(3), {});
    assert.ok(opts !== 'help' && !('error' in opts), JSON.stringify(opts));
    assert.equal(opts.metricsArg, m[1]);
    assert.deepEqual(opts.metrics, {
      kind: 'tcp',
      host: '::',
      port: Number(documented['prometheus.io/port']),
    });
    assert.deepEqual(serve.ports, [{ name: 'metrics', containerPort: opts.metrics.port, protocol: 'TCP' }]);
  });

  test('periodic GC from the CRI: on by default through the ConfigMap, on the containerd socket', () => {
    const serve = ds.spec.template.spec.containers.find((c) => c.name === 'serve') as Container;
    const env: Record<string, string | undefined> = {};
    for (const e of serve.env ?? []) {
      const ref = e.valueFrom?.configMapKeyRef;
      if (!ref) continue;
      assert.equal(ref.name, cm.metadata.name);
      assert.equal(ref.optional, true, `${e.name}: a ConfigMap without the key still starts`);
      env[e.name] = cm.data[ref.key];
    }
    assert.deepEqual(parseGcEnv(env), { intervalMs: 600_000, socket: '/run/containerd/containerd.sock' });
  });
});
