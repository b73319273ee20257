/**
 * A CRI v1 client for the Kubernetes end-to-end test: the calls kubelet makes for a pod's sandbox (RunPodSandbox,
 * PodSandboxStatus, StopPodSandbox, RemovePodSandbox, plus Version/Status/ListPodSandbox), over gRPC on the private
 * containerd's Unix socket, from the API subset in cri.proto.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

export interface PortMapping {
  protocol?: 'TCP' | 'UDP' | 'SCTP';
  containerPort: number;
  hostPort: number;
  hostIp?: string;
}

export interface PodSpec {
  name: string;
  uid: string;
  namespace: string;
  portMappings?: PortMapping[];
  annotations?: Record<string, string>;
  labels?: Record<string, string>;
  cgroupParent?: string;
}

export interface SandboxStatus {
  id: string;
  state: 'SANDBOX_READY' | 'SANDBOX_NOTREADY';
  network?: { ip: string; additionalIps: { ip: string }[] };
  annotations: Record<string, string>;
}

/** containerd 1.6's verbose sandbox info (the fields the test reads). */
export interface SandboxInfo {
  pid: number;
  netNamespacePath: string;
  cniResult?: {
    Interfaces?: Record<
      string,
      { IPConfigs?: { IP: string; Gateway: string }[]; Mac?: string; Sandbox?: string }
    >;
  };
}

type Call = (
  req: unknown,
  opts: { deadline: Date },
  cb: (err: grpc.ServiceError | null, res: unknown) => void,
) => void;

export interface CriClient {
  version(): Promise<{ runtimeName: string; runtimeVersion: string; runtimeApiVersion: string }>;
  /** Runtime conditions by type (RuntimeReady, NetworkReady) → status. */
  conditions(): Promise<Record<string, { status: boolean; reason: string; message: string }>>;
  runPodSandbox(pod: PodSpec): Promise<string>;
  podSandboxStatus(id: string): Promise<{ status: SandboxStatus; info: SandboxInfo }>;
  stopPodSandbox(id: string): Promise<void>;
  removePodSandbox(id: string): Promise<void>;
  listPodSandbox(): Promise<{ id: string; metadata: { name: string } }[]>;
  close(): void;
}

const PROTO = join(fileURLToPath(new URL('.', import.meta.url)), 'cri.proto');

export function criClient(socket: string, timeoutMs = 60_000): CriClient {
  const def = protoLoader.loadSync(PROTO, { keepCase: false, longs: String, enums: String, defaults: true });
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    runtime: { v1: { RuntimeService: grpc.ServiceClientConstructor } };
  };
  const client = new pkg.runtime.v1.RuntimeService(`unix://${socket}`, grpc.credentials.createInsecure());
  const call = <T>(method: string, req: unknown): Promise<T> =>
    new Promise((resolve, reject) => {
      const fn = (client as unknown as Record<string, Call>)[method] as Call;
      fn.call(client, req, { deadline: new Date(Date.now() + timeoutMs) }, (err, res) =>
        err ? reject(new Error(`CRI ${method}: ${err.details || err.message}`)) : resolve(res as T),
      );
    });
  return {
    version: () => call('Version', { version: 'v1' }),
    async conditions() {
      const r = await call<{
        status: { conditions: { type: string; status: boolean; reason: string; message: string }[] };
      }>('Status', { verbose: false });
      return Object.fromEntries(
        r.status.conditions.map((c) => [c.type, { status: c.status, reason: c.reason, message: c.message }]),
      );
    },
    async runPodSandbox(pod) {
      const r = await call<{ podSandboxId: string }>('RunPodSandbox', {
        config: {
          metadata: { name: pod.name, uid: pod.uid, namespace: pod.namespace, attempt: 0 },
          hostname: pod.name,
          labels: pod.labels ?? {},
          annotations: pod.annotations ?? {},
          portMappings: (pod.portMappings ?? []).map((m) => ({
            protocol: m.protocol ?? 'TCP',
            containerPort: m.containerPort,
            hostPort: m.hostPort,
            hostIp: m.hostIp ?? '',
          })),
          linux: { cgroupParent: pod.cgroupParent ?? '' },
        },
        runtimeHandler: '',
      });
      return r.podSandboxId;
    },
    async podSandboxStatus(id) {
      const r = await call<{ status: SandboxStatus; info: Record<string, string> }>('PodSandboxStatus', {
        podSandboxId: id,
        verbose: true,
      });
      return { status: r.status, info: JSON.parse(r.info.info ?? '{}') as SandboxInfo };
    },
    async stopPodSandbox(id) {
      await call('StopPodSandbox', { podSandboxId: id });
    },
    async removePodSandbox(id) {
      await call('RemovePodSandbox', { podSandboxId: id });
    },
    async listPodSandbox() {
      const r = await call<{ items: { id: string; metadata: { name: string } }[] }>('ListPodSandbox', {});
      return r.items;
    },
    close: () => client.close(),
  };
}
