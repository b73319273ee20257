/**
 * The configuration of a private containerd 1.6 (CRI plugin) for a lab node or the CRI-level test node: its own
 * root, state, socket, CNI directories and sandbox image, nothing else of the machine's.
 */
import { SANDBOX_IMAGE } from './images.ts';

export interface ContainerdPaths {
  root: string;
  state: string;
  socket: string;
  /** CNI plugin and configuration directories the CRI plugin reads. */
  binDir: string;
  confDir: string;
}

export function containerdConfig(p: ContainerdPaths): string {
  const q = (s: string) => JSON.stringify(s);
  return [
    'version = 2',
    `root = ${q(p.root)}`,
    `state = ${q(p.state)}`,
    'disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",',
    '  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]',
    '[grpc]',
    `  address = ${q(p.socket)}`,
    '[ttrpc]',
    `  address = ${q(`${p.socket}.ttrpc`)}`,
    '[debug]',
    '  level = "info"',
    '[metrics]',
    '  address = ""',
    '[plugins."io.containerd.grpc.v1.cri"]',
    `  sandbox_image = ${q(SANDBOX_IMAGE)}`,
    '  netns_mounts_under_state_dir = true',
    '  enable_selinux = false',
    '  disable_apparmor = true',
    '  restrict_oom_score_adj = true',
    '  stream_server_address = "127.0.0.1"',
    '  stream_server_port = "0"',
    '  [plugins."io.containerd.grpc.v1.cri".containerd]',
    '    snapshotter = "overlayfs"',
    '    default_runtime_name = "runc"',
    '    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]',
    '      runtime_type = "io.containerd.runc.v2"',
    '  [plugins."io.containerd.grpc.v1.cri".cni]',
    `    bin_dir = ${q(p.binDir)}`,
    `    conf_dir = ${q(p.confDir)}`,
    '    max_conf_num = 1',
    '',
  ].join('\n');
}
