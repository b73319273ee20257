/**
 * The systemd units of warm mode: a socket unit (systemd creates /run/cnikit/cnikit.sock, root 0600 in a 0700
 * directory, and starts the service on the first connection) and the service it activates. The service receives the
 * listening socket as descriptor 3 (LISTEN_FDS) and re-executes itself with it after an upgrade, so calls queue in
 * the socket instead of failing. Written by `scripts/install --warm`; never enabled or started by it.
 */
import { DEFAULT_DEADLINE_MS } from './protocol.ts';

export interface UnitOptions {
  /** The installed cold executable, e.g. /opt/cni/bin/cnikit. */
  exe: string;
  /** The socket path (default /run/cnikit/cnikit.sock). */
  socket: string;
  deadlineMs?: number;
}

export const SOCKET_UNIT = 'cnikit.socket';
export const SERVICE_UNIT = 'cnikit.service';

/** A path as systemd reads it on a command line or in a setting: no whitespace, quotes, backslashes or specifiers. */
function checkPath(what: string, p: string): void {
  if (!p.startsWith('/') || /[\s"'\\%$;]/.test(p)) {
    throw new Error(
      `${what} ${JSON.stringify(p)} must be an absolute path without spaces, quotes, \\, %, $ or ;`,
    );
  }
}

export function systemdUnits(o: UnitOptions): Record<string, string> {
  checkPath('executable', o.exe);
  checkPath('socket', o.socket);
  const deadline = o.deadlineMs ?? DEFAULT_DEADLINE_MS;
  return {
    [SOCKET_UNIT]: [
      '# written by cnikit scripts/install --warm; enable with: systemctl enable --now cnikit.socket',
      '[Unit]',
      'Description=cnikit warm-mode CNI plugin service (socket)',
      '',
      '[Socket]',
      `ListenStream=${o.socket}`,
      'SocketUser=root',
      'SocketGroup=root',
      'SocketMode=0600',
      'DirectoryMode=0700',
      'Backlog=256',
      // the socket file goes when the socket is stopped or disabled (scripts/install --cold): nothing is left to connect to
      'RemoveOnStop=yes',
      '',
      '[Install]',
      'WantedBy=sockets.target',
      '',
    ].join('\n'),
    [SERVICE_UNIT]: [
      '# written by cnikit scripts/install --warm; started by cnikit.socket on the first plugin call',
      '[Unit]',
      'Description=cnikit warm-mode CNI plugin service',
      `Requires=${SOCKET_UNIT}`,
      `After=${SOCKET_UNIT}`,
      '',
      '[Service]',
      'Type=simple',
      `ExecStart=${o.exe} serve --socket ${o.socket} --deadline-ms ${deadline}`,
      'User=root',
      // the plugins' own needs: namespaces, netlink, iptables/nft, tc, sysctl, state files under /var/lib/cni
      'Restart=always',
      'RestartSec=1',
      'KillMode=mixed',
      'TimeoutStopSec=30',
      'StandardOutput=journal',
      'StandardError=journal',
      '',
      '[Install]',
      'WantedBy=multi-user.target',
      '',
    ].join('\n'),
  };
}
