/**
 * The lab cluster's control plane, first part (docs/k8s-build.md): Debian's etcd-server and the kube-apiserver built
 * by scripts/k8s-build.mjs, both in a private network namespace (`ip netns add`) where they listen on its loopback
 * only, with a PKI made at start under the scratch directory (openssl: a CA, the apiserver's serving certificate,
 * its kubelet-client certificate, the service-account key pair and an admin client certificate in system:masters).
 * The apiserver runs with the Node and RBAC authorizers, NodeRestriction and no insecure port. Nothing is written
 * in the machine's root network namespace or outside the scratch directory; stop() ends the two processes this
 * module started (by pid), removes the namespace and the directory.
 */
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { alive, type ProcRef, procRef, terminate } from './procs.ts';

export const APISERVER_PORT = 6443;
export const SERVICE_CIDR = '10.96.0.0/16';
/** The first address of the service range: the `kubernetes` Service, so it is in the serving certificate. */
export const SERVICE_IP = '10.96.0.1';

export interface ControlPlane {
  /** The network namespace (ip netns) everything listens in. */
  netns: string;
  dir: string;
  /** An admin kubeconfig (system:masters) for https://127.0.0.1:6443 inside netns. */
  kubeconfig: string;
  pki: string;
  /** kubectl in the namespace with the admin kubeconfig. */
  kubectl(args: string[], input?: string): { status: number | null; stdout: string; stderr: string };
  /** The processes started (etcd, kube-apiserver, and kube-controller-manager, kube-scheduler if asked). */
  procs: ProcRef[];
  stop(): Promise<void>;
}

function must(cmd: string, args: string[], opts: { input?: string; timeout?: number } = {}): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: opts.timeout ?? 60_000, input: opts.input });
  if (r.error) throw new Error(`${cmd}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}

/** A CA and the certificates the control plane needs, made with openssl (P-256 keys, valid for 2 days). */
export function makePki(pki: string, extraIps: string[] = []): void {
  mkdirSync(pki, { recursive: true, mode: 0o700 });
  const p = (n: string) => join(pki, n);
  const days = '2';
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  must('openssl', [
    'req',
    '-x509',
    ...ec,
    '-keyout',
    p('ca.key'),
    '-out',
    p('ca.crt'),
    '-days',
    days,
    '-subj',
    '/CN=cnikit-lab-ca',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign,digitalSignature',
  ]);
  const leaf = (name: string, subj: string, ext: string[]) => issueCert(pki, name, subj, ext);
  const client = CLIENT_EXT;
  leaf('apiserver', '/CN=kube-apiserver', [
    'keyUsage=critical,digitalSignature,keyEncipherment',
    'extendedKeyUsage=serverAuth',
    `subjectAltName=IP:127.0.0.1,IP:${SERVICE_IP},${extraIps.map((ip) => `IP:${ip},`).join('')}DNS:localhost,` +
      'DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local',
  ]);
  leaf('apiserver-kubelet-client', '/O=system:masters/CN=kube-apiserver-kubelet-client', client);
  leaf('admin', '/O=system:masters/CN=cnikit-lab-admin', client);
  must('openssl', [
    'genpkey',
    '-algorithm',
    'EC',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-out',
    p('sa.key'),
  ]);
  must('openssl', ['pkey', '-in', p('sa.key'), '-pubout', '-out', p('sa.pub')]);
}

/** The extensions of a client certificate. */
export const CLIENT_EXT = [
  'keyUsage=critical,digitalSignature,keyEncipherment',
  'extendedKeyUsage=clientAuth',
];

/** NAME.key and NAME.crt in pki, signed by its CA (made by makePki), with subject subj and the given extensions. */
export function issueCert(pki: string, name: string, subj: string, ext: string[]): void {
  const p = (n: string) => join(pki, n);
  const days = '2';
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  must('openssl', [
    'req',
    '-new',
    ...ec,
    '-keyout',
    p(`${name}.key`),
    '-out',
    p(`${name}.csr`),
    '-subj',
    subj,
  ]);
  writeFileSync(p(`${name}.ext`), `${ext.join('\n')}\n`);
  must('openssl', [
    'x509',
    '-req',
    '-in',
    p(`${name}.csr`),
    '-CA',
    p('ca.crt'),
    '-CAkey',
    p('ca.key'),
    '-CAcreateserial',
    '-days',
    days,
    '-out',
    p(`${name}.crt`),
    '-extfile',
    p(`${name}.ext`),
  ]);
  rmSync(p(`${name}.csr`));
  rmSync(p(`${name}.ext`));
}

/** A kubeconfig with the client certificate and the CA embedded, for server. */
export function kubeconfigFor(pki: string, server: string, user: string, cert: string, key: string): string {
  const b64 = (f: string) => readFileSync(join(pki, f)).toString('base64');
  return JSON.stringify(
    {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'lab', cluster: { server, 'certificate-authority-data': b64('ca.crt') } }],
      users: [{ name: user, user: { 'client-certificate-data': b64(cert), 'client-key-data': b64(key) } }],
      contexts: [{ name: 'lab', context: { cluster: 'lab', user } }],
      'current-context': 'lab',
    },
    null,
    2,
  );
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Starts etcd and kube-apiserver in a fresh namespace `netns` with state under dir (created; removed by stop()).
 * binDir holds kube-apiserver and kubectl (scripts/k8s-build.mjs). Resolves when /readyz answers ok.
 * With advertiseAddress the apiserver listens on every address of the namespace (its certificate names that
 * address too) and the `kubernetes` Service points there; setupNetns runs once the namespace exists (to give it a
 * link to the nodes) and controllers adds kube-controller-manager (node CIDR allocation, service-account tokens,
 * the CSR signer) and kube-scheduler, both on the namespace's loopback. detached: the processes outlive this one
 * (the `npm run cluster -- up` command), onProcess records each as it starts.
 */
export async function startControlPlane(opts: {
  binDir: string;
  dir: string;
  netns: string;
  etcd?: string;
  readyTimeoutMs?: number;
  /** More kube-apiserver flags (e.g. `--feature-gates=IPv6DualStack=true` for spec.podCIDRs with two subnets). */
  apiserverArgs?: string[];
  advertiseAddress?: string;
  setupNetns?: (netns: string) => void;
  /**
   * nodeCidrMaskSizeV6: a dual-stack clusterCidr (v4,v6) — the per-family mask flags replace --node-cidr-mask-size,
   * which the controller-manager refuses with two CIDRs; args: more controller-manager flags (feature gates).
   */
  controllers?: {
    clusterCidr: string;
    nodeCidrMaskSize: number;
    nodeCidrMaskSizeV6?: number;
    args?: string[];
  };
  /** The Service range(s) of the apiserver and the controller-manager (default SERVICE_CIDR; dual stack: v4,v6). */
  serviceCidr?: string;
  detached?: boolean;
  onProcess?: (p: ProcRef) => void;
}): Promise<ControlPlane> {
  const { binDir, dir, netns } = opts;
  const etcdBin = opts.etcd ?? '/usr/bin/etcd';
  const procs: ProcRef[] = [];
  let nsMade = false;
  const stop = async () => {
    // the controllers and the apiserver before etcd
    await terminate(procs.slice(1));
    await terminate(procs.slice(0, 1));
    if (nsMade) spawnSync('ip', ['netns', 'del', netns]);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    must('ip', ['netns', 'add', netns]);
    nsMade = true;
    must('ip', ['-n', netns, 'link', 'set', 'lo', 'up']);
    opts.setupNetns?.(netns);
    const pki = join(dir, 'pki');
    makePki(pki, opts.advertiseAddress ? [opts.advertiseAddress] : []);
    const kubeconfig = join(dir, 'admin.kubeconfig');
    const local = `https://127.0.0.1:${APISERVER_PORT}`;
    writeFileSync(kubeconfig, kubeconfigFor(pki, local, 'admin', 'admin.crt', 'admin.key'), { mode: 0o600 });
    const logs = join(dir, 'logs');
    mkdirSync(logs);
    const names: string[] = [];
    const start = (name: string, cmd: string, args: string[]) => {
      const out = openSync(join(logs, `${name}.log`), 'a');
      const p = spawn('ip', ['netns', 'exec', netns, cmd, ...args], {
        stdio: ['ignore', out, out],
        detached: opts.detached,
      });
      closeSync(out);
      if (opts.detached) p.unref();
      if (!p.pid) throw new Error(`${name} did not start`);
      const ref = procRef(p.pid);
      procs.push(ref);
      names.push(name);
      opts.onProcess?.(ref);
      return ref;
    };
    start('etcd', etcdBin, [
      '--name',
      'lab',
      '--data-dir',
      join(dir, 'etcd'),
      '--listen-client-urls',
      'http://127.0.0.1:2379',
      '--advertise-client-urls',
      'http://127.0.0.1:2379',
      '--listen-peer-urls',
      'http://127.0.0.1:2380',
      '--initial-advertise-peer-urls',
      'http://127.0.0.1:2380',
      '--initial-cluster',
      'lab=http://127.0.0.1:2380',
    ]);
    const pk = (n: string) => join(pki, n);
    start('kube-apiserver', join(binDir, 'kube-apiserver'), [
      '--etcd-servers=http://127.0.0.1:2379',
      `--bind-address=${opts.advertiseAddress ? '0.0.0.0' : '127.0.0.1'}`,
      `--advertise-address=${opts.advertiseAddress ?? '127.0.0.1'}`,
      `--secure-port=${APISERVER_PORT}`,
      '--insecure-port=0',
      `--cert-dir=${pki}`,
      `--tls-cert-file=${pk('apiserver.crt')}`,
      `--tls-private-key-file=${pk('apiserver.key')}`,
      `--client-ca-file=${pk('ca.crt')}`,
      `--kubelet-certificate-authority=${pk('ca.crt')}`,
      `--kubelet-client-certificate=${pk('apiserver-kubelet-client.crt')}`,
      `--kubelet-client-key=${pk('apiserver-kubelet-client.key')}`,
      '--kubelet-preferred-address-types=InternalIP',
      `--service-account-key-file=${pk('sa.pub')}`,
      `--service-account-signing-key-file=${pk('sa.key')}`,
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      `--service-cluster-ip-range=${opts.serviceCidr ?? SERVICE_CIDR}`,
      '--authorization-mode=Node,RBAC',
      '--enable-admission-plugins=NodeRestriction',
      '--allow-privileged=true',
      '--profiling=false',
      ...(opts.apiserverArgs ?? []),
    ]);
    const kubectl = (args: string[], input?: string) => {
      const r = spawnSync(
        'ip',
        ['netns', 'exec', netns, join(binDir, 'kubectl'), '--kubeconfig', kubeconfig, ...args],
        { encoding: 'utf8', input, timeout: 60_000, maxBuffer: 64 * 1024 * 1024 },
      );
      if (r.error) throw r.error;
      return { status: r.status, stdout: r.stdout, stderr: r.stderr };
    };
    const deadline = Date.now() + (opts.readyTimeoutMs ?? 180_000);
    for (;;) {
      procs.forEach((p, i) => {
        if (!alive(p)) {
          const log = readFileSync(join(logs, `${names[i]}.log`), 'utf8')
            .split('\n')
            .slice(-15)
            .join('\n');
          throw new Error(`${names[i]} exited before the apiserver was ready:\n${log}`);
        }
      });
      const r = kubectl(['get', '--raw', '/readyz', '--request-timeout=5s']);
      if (r.status === 0 && r.stdout.trim() === 'ok') break;
      if (Date.now() > deadline) throw new Error(`kube-apiserver not ready: ${r.stdout}${r.stderr}`);
      await sleep(500);
    }
    // the controllers once the apiserver answers (they exit if it does not at their start)
    if (opts.controllers) {
      for (const [name, cn] of [
        ['kube-controller-manager', 'system:kube-controller-manager'],
        ['kube-scheduler', 'system:kube-scheduler'],
      ] as const) {
        issueCert(pki, name, `/CN=${cn}`, CLIENT_EXT);
        writeFileSync(
          join(dir, `${name}.kubeconfig`),
          kubeconfigFor(pki, local, cn, `${name}.crt`, `${name}.key`),
          { mode: 0o600 },
        );
      }
      start('kube-controller-manager', join(binDir, 'kube-controller-manager'), [
        `--kubeconfig=${join(dir, 'kube-controller-manager.kubeconfig')}`,
        `--authentication-kubeconfig=${join(dir, 'kube-controller-manager.kubeconfig')}`,
        `--authorization-kubeconfig=${join(dir, 'kube-controller-manager.kubeconfig')}`,
        '--bind-address=127.0.0.1',
        '--port=0',
        `--cert-dir=${join(dir, 'kube-controller-manager')}`,
        '--leader-elect=false',
        '--use-service-account-credentials=true',
        `--service-account-private-key-file=${pk('sa.key')}`,
        `--root-ca-file=${pk('ca.crt')}`,
        `--cluster-signing-cert-file=${pk('ca.crt')}`,
        `--cluster-signing-key-file=${pk('ca.key')}`,
        '--allocate-node-cidrs=true',
        `--cluster-cidr=${opts.controllers.clusterCidr}`,
        ...(opts.controllers.nodeCidrMaskSizeV6 === undefined
          ? [`--node-cidr-mask-size=${opts.controllers.nodeCidrMaskSize}`]
          : [
              `--node-cidr-mask-size-ipv4=${opts.controllers.nodeCidrMaskSize}`,
              `--node-cidr-mask-size-ipv6=${opts.controllers.nodeCidrMaskSizeV6}`,
            ]),
        `--service-cluster-ip-range=${opts.serviceCidr ?? SERVICE_CIDR}`,
        '--controllers=*,-cloud-node-lifecycle,-service,-route',
        '--profiling=false',
        ...(opts.controllers.args ?? []),
      ]);
      start('kube-scheduler', join(binDir, 'kube-scheduler'), [
        `--kubeconfig=${join(dir, 'kube-scheduler.kubeconfig')}`,
        `--authentication-kubeconfig=${join(dir, 'kube-scheduler.kubeconfig')}`,
        `--authorization-kubeconfig=${join(dir, 'kube-scheduler.kubeconfig')}`,
        '--bind-address=127.0.0.1',
        '--port=0',
        `--cert-dir=${join(dir, 'kube-scheduler')}`,
        '--leader-elect=false',
        '--profiling=false',
      ]);
    }
    return { netns, dir, kubeconfig, pki, kubectl, procs, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
