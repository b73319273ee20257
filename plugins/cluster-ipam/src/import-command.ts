/**
 * `cluster-ipam import [--dry-run] [--kubeconfig FILE] …` (the plugin's subcommand, like `dhcp daemon`): reads
 * whereabouts' IPPool and OverlappingRangeIPReservation objects and writes a cluster-ipam allocation record for every
 * address they hold (./whereabouts-import.ts), into the Kubernetes store (the same kubeconfig) or, with
 * --etcd-host, into etcd. Prints what it wrote, what was there already and the conflicts; exit 0 when there is no
 * conflict and nothing was skipped, 1 otherwise (nothing is overwritten either way), 2 for a usage error.
 */
import { parseArgs } from 'node:util';
import {
  closeConnection,
  inClusterConnection,
  type KubeConnection,
  kubeconfigConnection,
  kubeRequest,
} from '@cnikit/warm/kube';
import { DEFAULT_ETCD_PREFIX, EtcdStore, etcdOptionsFromConfig } from './etcd-store.ts';
import { KubernetesStore } from './kubernetes.ts';
import type { Store } from './store.ts';
import { importWhereabouts, type WhereaboutsImportReport } from './whereabouts-import.ts';

export const IMPORT_USAGE = `usage: cluster-ipam import [--dry-run] [--json] [--kubeconfig FILE] [--namespace NS] [--fallback-node NAME]
                          [--no-overlapping-ranges NETWORK_NAME]…
                          [--etcd-host HOST:PORT [--etcd-prefix P] [--etcd-ca-cert-file F] [--etcd-cert-file F]
                           [--etcd-key-file F] [--etcd-username U --etcd-password P]]
  Writes a cluster-ipam record for every address whereabouts' IPPools and OverlappingRangeIPReservations hold
  (all namespaces unless --namespace), so the switch never hands out an address a running pod holds. Existing
  records are never changed: the same attachment counts as imported, another one is listed as a conflict.
  --kubeconfig    reads whereabouts' objects and the pods (default: $KUBECONFIG, else the pod's service account);
                  the records go to the same API server unless --etcd-host names an etcd
  --fallback-node the node recorded when an entry's pod cannot be found (default: unknown)
  --no-overlapping-ranges  a network_name whose configurations set enable_overlapping_ranges false (repeat for
                  more; "default" for none): its addresses are recorded per range CIDR, as the plugin names them
  --dry-run       report only, write nothing; --json: the report as one JSON object
  exit status: 0 done, 1 conflicts or skipped entries (see the report), 2 usage error, 3 the API or store failed
`;

function connection(kubeconfig: string | undefined): KubeConnection {
  return kubeconfig ? kubeconfigConnection(kubeconfig) : inClusterConnection(process.env);
}

/** The human-readable report. */
export function formatImportReport(r: WhereaboutsImportReport, dryRun: boolean): string {
  const lines: string[] = [];
  const verb = dryRun ? 'would import' : 'imported';
  lines.push(
    `${verb} ${r.created.length}, already recorded ${r.existing.length}, conflicts ${r.conflicts.length}, skipped ${r.skipped.length}`,
  );
  for (const x of r.created)
    lines.push(
      `  ${verb} ${x.ip} (${x.network || 'default'}) ${x.podRef} ${x.containerID}/${x.ifName} from ${x.source}`,
    );
  for (const x of r.conflicts)
    lines.push(
      `  conflict ${x.ip} (${x.network || 'default'}): whereabouts has ${x.containerID}/${x.ifName} (${x.podRef}, ${x.source}), cluster-ipam has ${x.holder}: left as it is`,
    );
  for (const x of r.skipped) lines.push(`  skipped ${x.source}: ${x.reason}`);
  return `${lines.join('\n')}\n`;
}

export async function importMain(
  args: readonly string[],
  io: { stdout: { write(s: string): unknown }; stderr: { write(s: string): unknown } } = process,
): Promise<number> {
  let values: Record<string, string | boolean | string[] | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...args],
      strict: true,
      allowPositionals: false,
      options: {
        'dry-run': { type: 'boolean' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
        kubeconfig: { type: 'string' },
        namespace: { type: 'string' },
        'fallback-node': { type: 'string' },
        'no-overlapping-ranges': { type: 'string', multiple: true },
        'etcd-host': { type: 'string' },
        'etcd-prefix': { type: 'string' },
        'etcd-ca-cert-file': { type: 'string' },
        'etcd-cert-file': { type: 'string' },
        'etcd-key-file': { type: 'string' },
        'etcd-username': { type: 'string' },
        'etcd-password': { type: 'string' },
      },
    }));
  } catch (e) {
    io.stderr.write(`cluster-ipam import: ${(e as Error).message}\n${IMPORT_USAGE}`);
    return 2;
  }
  if (values.help) {
    io.stdout.write(IMPORT_USAGE);
    return 0;
  }
  const str = (k: string) => (typeof values[k] === 'string' ? (values[k] as string) : undefined);
  let conn: KubeConnection;
  let store: Store;
  try {
    conn = connection(str('kubeconfig') ?? (process.env.KUBECONFIG || undefined));
    const etcdHost = str('etcd-host');
    if (etcdHost) {
      const opts = etcdOptionsFromConfig({
        etcd_host: etcdHost,
        etcd_ca_cert_file: str('etcd-ca-cert-file'),
        etcd_cert_file: str('etcd-cert-file'),
        etcd_key_file: str('etcd-key-file'),
        ...(str('etcd-username') !== undefined ? { etcd_username: str('etcd-username') } : {}),
        ...(str('etcd-password') !== undefined ? { etcd_password: str('etcd-password') } : {}),
      });
      store = new EtcdStore({ ...opts, prefix: str('etcd-prefix') ?? DEFAULT_ETCD_PREFIX });
    } else {
      store = new KubernetesStore({ connection: { ...conn }, deadlineMs: 600_000 });
    }
  } catch (e) {
    io.stderr.write(`cluster-ipam import: ${(e as Error).message}\n`);
    return 2;
  }
  const dryRun = values['dry-run'] === true;
  try {
    const report = await importWhereabouts(
      async (path) => {
        const r = await kubeRequest(conn, 'GET', path, undefined, 30_000);
        let body: unknown;
        try {
          body = r.body ? JSON.parse(r.body) : undefined;
        } catch {
          body = undefined;
        }
        return { status: r.status, body };
      },
      store,
      {
        dryRun,
        fallbackNode: str('fallback-node') ?? 'unknown',
        perRangeNetworks: (values['no-overlapping-ranges'] as string[] | undefined) ?? [],
        ...(str('namespace') ? { namespace: str('namespace') } : {}),
      },
    );
    io.stdout.write(
      values.json ? `${JSON.stringify({ dryRun, ...report })}\n` : formatImportReport(report, dryRun),
    );
    return report.conflicts.length > 0 || report.skipped.length > 0 ? 1 : 0;
  } catch (e) {
    io.stderr.write(`cluster-ipam import: ${(e as Error).message}\n`);
    return 3;
  } finally {
    closeConnection(conn);
    await store.close();
  }
}
