/**
 * Unknown-field check for Kubernetes manifests (what `kubectl apply --validate=strict` reports): walks a manifest
 * along the TypeScript interfaces kubernetes-models generates from the API's OpenAPI schemas and lists every key the
 * schema does not have (a misspelt `toleration`, a `readinesProbe`). kubernetes-models' own validate() checks types
 * and required fields but lets unknown keys through, as the OpenAPI documents do not close their objects.
 */
import { join } from 'node:path';
import ts from 'typescript';

const ROOT = join(import.meta.dirname, '..');

/** The interface of each kind, as `apiVersion kind` → module of kubernetes-models and exported interface name. */
const KINDS: Record<string, [string, string]> = {
  'apps/v1 DaemonSet': ['kubernetes-models/apps/v1/DaemonSet', 'IDaemonSet'],
  'v1 ConfigMap': ['kubernetes-models/v1/ConfigMap', 'IConfigMap'],
  'v1 ServiceAccount': ['kubernetes-models/v1/ServiceAccount', 'IServiceAccount'],
  'rbac.authorization.k8s.io/v1 ClusterRole': [
    'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole',
    'IClusterRole',
  ],
  'rbac.authorization.k8s.io/v1 ClusterRoleBinding': [
    'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding',
    'IClusterRoleBinding',
  ],
  'rbac.authorization.k8s.io/v1 Role': ['kubernetes-models/rbac.authorization.k8s.io/v1/Role', 'IRole'],
  'rbac.authorization.k8s.io/v1 RoleBinding': [
    'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding',
    'IRoleBinding',
  ],
  'apiextensions.k8s.io/v1 CustomResourceDefinition': [
    'kubernetes-models/apiextensions.k8s.io/v1/CustomResourceDefinition',
    'ICustomResourceDefinition',
  ],
};

let cached: { checker: ts.TypeChecker; types: Map<string, ts.Type> } | undefined;

/** One program over a virtual file that names every kind's interface (built once, ~1 s). */
function load(): { checker: ts.TypeChecker; types: Map<string, ts.Type> } {
  if (cached) return cached;
  const probe = join(ROOT, '__k8s_fields_probe__.ts');
  const keys = Object.keys(KINDS);
  const text = Object.values(KINDS)
    .map(([mod, name], i) => `import type { ${name} as T${i} } from '${mod}';\nexport type K${i} = T${i};\n`)
    .join('');
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const read = host.getSourceFile.bind(host);
  host.getSourceFile = (name, lang, onError, create) =>
    name === probe ? ts.createSourceFile(name, text, lang) : read(name, lang, onError, create);
  const exists = host.fileExists.bind(host);
  host.fileExists = (name) => name === probe || exists(name);
  const program = ts.createProgram([probe], options, host);
  const checker = program.getTypeChecker();
  const sf = program.getSourceFile(probe);
  if (!sf) throw new Error('k8s-fields: the probe file did not load');
  const types = new Map<string, ts.Type>();
  for (const st of sf.statements) {
    if (!ts.isTypeAliasDeclaration(st)) continue;
    const i = Number(st.name.text.slice(1));
    const t = checker.getTypeAtLocation(st.name);
    if (t.flags & ts.TypeFlags.Any) throw new Error(`k8s-fields: the type of ${keys[i]} did not resolve`);
    types.set(keys[i]!, t);
  }
  cached = { checker, types };
  return cached;
}

/** Keys of `doc` that its kind's schema does not have, as JSON paths (`spec.template.spec.toleration`). */
export function unknownFields(doc: { apiVersion: string; kind: string }): string[] {
  const { checker, types } = load();
  const root = types.get(`${doc.apiVersion} ${doc.kind}`);
  if (!root) throw new Error(`k8s-fields: no schema for ${doc.apiVersion} ${doc.kind}`);
  const out: string[] = [];
  const walk = (value: unknown, type: ts.Type, path: string): void => {
    if (value === null || typeof value !== 'object') return;
    // optional fields are `T | undefined`; a few are unions of primitives (IntOrString): only object parts matter
    const parts = (type.isUnion() ? type.types : [type]).filter(
      (t) => !(t.flags & (ts.TypeFlags.Undefined | ts.TypeFlags.Null)),
    );
    if (Array.isArray(value)) {
      const arr = parts.find((t) => checker.isArrayType(t));
      const elem = arr && checker.getTypeArguments(arr as ts.TypeReference)[0];
      if (elem) for (const [i, v] of value.entries()) walk(v, elem, `${path}[${i}]`);
      return;
    }
    const obj = parts.find((t) => t.flags & ts.TypeFlags.Object && !checker.isArrayType(t));
    if (!obj) return;
    const index = checker.getIndexInfoOfType(obj, ts.IndexKind.String);
    for (const [k, v] of Object.entries(value)) {
      const at = path ? `${path}.${k}` : k;
      const prop = obj.getProperty(k);
      if (prop) walk(v, checker.getTypeOfSymbol(prop), at);
      else if (index) walk(v, index.type, at);
      else out.push(at);
    }
  };
  walk(doc, root, '');
  return out;
}
