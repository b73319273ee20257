/**
 * Running the external firewall / traffic-control tools (iptables-restore, nft, tc …).
 *
 * Tools are always started with an argument array (never a shell). When `netns` is given the
 * tool runs inside that network namespace; otherwise it runs in the calling thread's namespace
 * (so a caller already inside `withNetns(...)` gets that namespace).
 */
import { spawnSync } from 'node:child_process';
import { traceSection, withNetns } from '@cnikit/netlink';

/** Options shared by every function that runs a tool. */
export interface ToolOptions {
  /** Path of a network namespace (e.g. `/run/netns/foo`, `/proc/<pid>/ns/net`) to run the tool in. */
  netns?: string;
}

export interface RunOptions extends ToolOptions {
  /** Text written to the tool's stdin. */
  input?: string;
  /** Kill the tool after this many milliseconds (default 55 s, like the reference's nft timeout). */
  timeoutMs?: number;
}

export interface ToolResult {
  status: number;
  stdout: string;
  stderr: string;
}

/** Debian package that provides each tool we run. */
const PACKAGE_OF: Record<string, string> = {
  iptables: 'iptables',
  ip6tables: 'iptables',
  'iptables-save': 'iptables',
  'ip6tables-save': 'iptables',
  'iptables-restore': 'iptables',
  'ip6tables-restore': 'iptables',
  nft: 'nftables',
  tc: 'iproute2',
  ip: 'iproute2',
};

/** The tool binary could not be found (or not executed at all). */
export class ToolNotFoundError extends Error {
  readonly tool: string;
  readonly debianPackage: string;
  constructor(tool: string, cause?: unknown) {
    const pkg = PACKAGE_OF[tool] ?? tool;
    super(`${tool} not found in PATH: install it (Debian/Ubuntu package "${pkg}")`, { cause });
    this.name = 'ToolNotFoundError';
    this.tool = tool;
    this.debianPackage = pkg;
  }
}

/** The tool ran and exited non-zero. `stderr` holds its diagnostics. */
export class ToolError extends Error {
  readonly tool: string;
  readonly args: readonly string[];
  readonly status: number;
  readonly stderr: string;
  readonly stdout: string;
  constructor(tool: string, args: readonly string[], r: ToolResult, what?: string) {
    const detail = (r.stderr || r.stdout).trim().replace(/\s+\n/g, '\n');
    super(
      `${what ?? `${tool} ${args.join(' ')}`} failed (exit status ${r.status})${detail ? `: ${detail}` : ''}`,
    );
    this.name = 'ToolError';
    this.tool = tool;
    this.args = args;
    this.status = r.status;
    this.stderr = r.stderr;
    this.stdout = r.stdout;
  }
}

/** Counter of tool executions: a test/bench seam, deliberately not exported from the package index. */
export const execStats = { count: 0 };

/**
 * Run `tool args…` synchronously and return its exit status and output (does not throw on a
 * non-zero exit; throws ToolNotFoundError when the binary is missing).
 */
export function runTool(tool: string, args: readonly string[], opts: RunOptions = {}): ToolResult {
  const spawn = () =>
    spawnSync(tool, args, {
      input: opts.input ?? '',
      encoding: 'utf8',
      timeout: opts.timeoutMs ?? 55_000,
      maxBuffer: 256 * 1024 * 1024,
      env: { ...process.env, LC_ALL: 'C' },
    });
  execStats.count++;
  // The child is forked by the calling thread, so inside withNetns it starts in that namespace.
  const r = traceSection(
    `exec ${tool}`,
    { 'process.executable.name': tool, 'process.command_args': [tool, ...args].join(' ') },
    (span) => {
      const out = opts.netns !== undefined ? withNetns(opts.netns, spawn) : spawn();
      span?.setAttributes({ 'process.exit.code': out.status ?? -1 });
      return out;
    },
  );
  if (r.error) {
    const code = (r.error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new ToolNotFoundError(tool, r.error);
    throw new Error(`${tool}: ${r.error.message}`, { cause: r.error });
  }
  return { status: r.status ?? 1, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
}

/**
 * Lines fed to ONE run of a tool that reads a script on stdin (`nft -f -`, `tc -batch -`): the builders add
 * lines, `commit()` starts the process once (nothing for an empty batch) and clears the batch on success.
 */
export abstract class StdinBatch {
  readonly opts: ToolOptions;
  protected lines: string[] = [];

  constructor(
    private readonly tool: string,
    private readonly args: readonly string[],
    opts: ToolOptions = {},
  ) {
    this.opts = opts;
  }

  get size(): number {
    return this.lines.length;
  }

  render(): string {
    return this.lines.length ? `${this.lines.join('\n')}\n` : '';
  }

  commit(): { script: string } {
    const script = this.render();
    if (script === '') return { script };
    const r = runTool(this.tool, this.args, { ...this.opts, input: script });
    if (r.status !== 0) throw new ToolError(this.tool, this.args, r, `${this.tool} ${this.args.join(' ')}`);
    this.lines = [];
    return { script };
  }
}
