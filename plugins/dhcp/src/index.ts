/**
 * dhcp IPAM: drop-in replacement for the reference plugin (`plugins/ipam/dhcp`). The plugin is a thin client of the
 * daemon (`dhcp daemon`, the same executable), which acquires the lease inside the container's namespace and keeps
 * renewing it until DEL. Config keys (under `ipam`): daemonSocketPath, provide, request, priority.
 *
 * Protocol with the daemon: protocol.ts (cnikit's JSON; meeting the reference's Go daemon, or the reverse, fails at
 * once with a message saying so). Beyond the reference: DNS in the result, leases persisted and resumed by a
 * restarted daemon, `dhcp status` lists the daemon's leases, GC releases leases of attachments that are gone,
 * STATUS fails (code 50) when the daemon is unreachable. See docs/plugins/dhcp.md.
 */
import { resolve } from 'node:path';
import {
  CniError,
  ErrorCode,
  type Plugin,
  type Request,
  type Result,
  CNIKIT_VERSION as VERSION,
} from '@cnikit/skel';
import { type DhcpConf, parseConf } from './config.ts';
import type { CallArgs } from './daemon.ts';
import { DEFAULT_SOCKET_PATH, prepareOptions } from './options.ts';
import { callDaemon, DaemonUnreachable } from './protocol.ts';

function callArgs(req: Request<DhcpConf>): CallArgs {
  // the daemon may run in another working directory: the namespace path must be absolute
  return {
    containerId: req.containerId,
    netns: req.netns ? resolve(req.netns) : '',
    ifName: req.ifName,
    args: req.args,
    config: req.conf.raw,
  };
}

async function add(req: Request<DhcpConf>): Promise<Result> {
  prepareOptions(req.conf.ipam, req.args); // configuration errors before the daemon is asked
  const result = (await callDaemon(req.conf.ipam.daemonSocketPath, 'allocate', callArgs(req))) as Result;
  return { ...result, cniVersion: '1.1.0' };
}

async function del(req: Request<DhcpConf>): Promise<void> {
  await callDaemon(req.conf.ipam.daemonSocketPath, 'release', callArgs(req));
}

async function check(req: Request<DhcpConf>): Promise<void> {
  const addresses = (req.prevResult?.ips ?? []).map((ip) => ip.address);
  await callDaemon(req.conf.ipam.daemonSocketPath, 'check', { ...callArgs(req), addresses });
}

async function gc(req: Request<DhcpConf>): Promise<void> {
  const valid = (req.validAttachments ?? []).map((a) => ({ containerId: a.containerID, ifName: a.ifname }));
  await callDaemon(req.conf.ipam.daemonSocketPath, 'gc', { config: req.conf.raw, valid });
}

async function status(req: Request<DhcpConf>): Promise<void> {
  try {
    await callDaemon(req.conf.ipam.daemonSocketPath, 'ping', {});
  } catch (err) {
    const e = err as CniError;
    throw new CniError(
      ErrorCode.PluginNotAvailable,
      `DHCP daemon not available at ${req.conf.ipam.daemonSocketPath}: ${e.msg ?? e.message}`,
      err instanceof DaemonUnreachable ? 'start it with `dhcp daemon`' : '',
    );
  }
}

/** `dhcp status [-socketpath PATH]`: the daemon's leases as JSON on stdout. */
export async function statusMain(args: readonly string[]): Promise<number> {
  let socketPath = DEFAULT_SOCKET_PATH;
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    const m = /^--?socketpath(?:=(.*))?$/.exec(a);
    if (!m) {
      process.stderr.write(
        `dhcp status: unknown argument ${JSON.stringify(a)}\nusage: dhcp status [-socketpath PATH]\n`,
      );
      return 2;
    }
    const v = m[1] ?? args[++i];
    if (!v) {
      process.stderr.write('dhcp status: -socketpath needs a value\n');
      return 2;
    }
    socketPath = v;
  }
  try {
    const res = await callDaemon(socketPath, 'status', {});
    process.stdout.write(`${JSON.stringify(res, null, 2)}\n`);
    return 0;
  } catch (err) {
    process.stderr.write(`dhcp status: ${(err as CniError).msg ?? (err as Error).message}\n`);
    return 1;
  }
}

export const plugin: Plugin<DhcpConf> = {
  name: 'dhcp',
  ipam: true,
  about: `CNI dhcp plugin cnikit ${VERSION}`,
  conf: parseConf,
  add,
  del,
  check,
  gc,
  status,
  commands: {
    daemon: async (args) => (await import('./daemon.ts')).daemonMain(args),
    status: statusMain,
  },
  // `cnikit serve --dhcp-daemon`: the warm service runs the daemon's listener in its own process
  resident: {
    command: 'daemon',
    async start(args, log) {
      const { startDaemon } = await import('./daemon.ts');
      const running = await startDaemon(args, log, { activation: false });
      return {
        description: `listening on ${running.where}${running.resumed ? `, ${running.resumed} lease(s) resumed` : ''}`,
        stop: () => running.stop(),
      };
    },
  },
};
