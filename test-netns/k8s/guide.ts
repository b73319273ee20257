/**
 * The shell blocks of the operator's guide (docs/kubernetes.md), as the lab-cluster test runs them. Every
 * ```sh block is preceded by a comment `<!-- guide: ID -->` naming it; a block whose first line is the comment
 * `# on each node` is run on every node, the others where kubectl runs. A command is one line (a trailing `\`
 * joins the next); comment lines are not commands. The commands the test cannot run as written are listed here
 * with the reason, and checkGuideCoverage() fails when that list and the guide differ in any way.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Cluster, LabNode } from '../../scripts/k8s/cluster.ts';
import { ROOT } from '../dist.ts';

export const GUIDE = join(ROOT, 'docs', 'kubernetes.md');

export interface GuideBlock {
  id: string;
  /** 'node': on each node; 'admin': where kubectl runs. */
  place: 'node' | 'admin';
  commands: string[];
  /** 1-based line of the fence. */
  line: number;
}

const ID = /^<!-- guide: ([a-z0-9-]+) -->$/;
const FENCE = /^```(\S*)/;
const SHELL = new Set(['sh', 'bash', 'shell', 'console', 'shell-session']);

/** The guide's shell blocks in document order; throws on a shell block without a name or a name used twice. */
export function guideBlocks(text = readFileSync(GUIDE, 'utf8')): GuideBlock[] {
  const lines = text.split('\n');
  const out: GuideBlock[] = [];
  let pendingId: string | undefined;
  for (let i = 0; i < lines.length; i++) {
    const t = (lines[i] ?? '').trim();
    const id = ID.exec(t);
    if (id) {
      pendingId = id[1];
      continue;
    }
    const fence = FENCE.exec(t);
    if (!fence) {
      if (t !== '') pendingId = undefined;
      continue;
    }
    const lang = fence[1] ?? '';
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length && (lines[j] ?? '').trim() !== '```'; j++) body.push((lines[j] ?? '').trim());
    if (j >= lines.length) throw new Error(`${GUIDE}:${i + 1}: a fence that is never closed`);
    if (SHELL.has(lang)) {
      if (!pendingId)
        throw new Error(
          `${GUIDE}:${i + 1}: a \`\`\`${lang} block without a <!-- guide: ID --> comment before it`,
        );
      if (lang !== 'sh') throw new Error(`${GUIDE}:${i + 1}: shell blocks are \`\`\`sh, not ${lang}`);
      if (out.some((b) => b.id === pendingId)) throw new Error(`${GUIDE}:${i + 1}: block ${pendingId} twice`);
      const place = /^# on each node\b/.test(body[0] ?? '') ? 'node' : 'admin';
      const commands: string[] = [];
      let cur = '';
      for (const l of body) {
        if (cur === '' && (l === '' || l.startsWith('#'))) continue;
        if (l.endsWith('\\')) {
          cur += `${l.slice(0, -1).trim()} `;
          continue;
        }
        commands.push(cur + l);
        cur = '';
      }
      if (cur !== '') throw new Error(`${GUIDE}:${i + 1}: the last line of ${pendingId} ends with \\`);
      out.push({ id: pendingId, place, commands, line: i + 1 });
    } else if (pendingId) {
      throw new Error(`${GUIDE}:${i + 1}: <!-- guide: ${pendingId} --> names a block that is not \`\`\`sh`);
    }
    pendingId = undefined;
    i = j;
  }
  return out;
}

/** Commands of the guide the lab test does not run, and why. */
export const NOT_RUN: Record<string, string> = {
  'podman load -i cnikit-image-v0.1.0.oci.tar':
    "the lab's nodes run containerd, and podman load would write the machine's own image store; " +
    'scripts/image-index.test.ts runs it into a private store',
};

/** Commands the lab test runs changed, how and why. */
export const REWRITTEN: Record<string, { from: string; to: string; why: string }> = {
  'skopeo copy --all oci-archive:cnikit-image-v0.1.0.oci.tar:ghcr.io/cnikit/cnikit:v0.1.0 docker://registry.example.com/cnikit/cnikit:v0.1.0':
    {
      from: 'docker://registry.example.com/cnikit/cnikit:v0.1.0',
      to: 'oci:mirror:v0.1.0',
      why: 'no registry in the tests: the same copy --all goes into a local OCI layout, checked for both manifests',
    },
};

/**
 * Blocks that the lab-cluster guide test does not run because another test file runs them on a cluster of its own
 * (through runGuideBlock, with the state they need): block → the file. guide.test.ts checks that the file does.
 */
export const RUN_ELSEWHERE: Record<string, string> = {
  'agent-on': 'test-netns/k8s/cluster-agent.k8s.test.ts',
};

/** The command as the test runs it (REWRITTEN applied), or undefined when it is in NOT_RUN. */
export function runnable(command: string): string | undefined {
  if (command in NOT_RUN) return undefined;
  const r = REWRITTEN[command];
  return r ? command.replace(r.from, r.to) : command;
}

/**
 * The problems with a run of the guide: a block not run, a command neither run nor listed, a listed command that
 * is not in the guide (the lists must stay exact).
 */
export function guideCoverage(blocks: GuideBlock[], ran: Map<string, Set<string>>): string[] {
  const problems: string[] = [];
  const all = new Set(blocks.flatMap((b) => b.commands));
  for (const c of [...Object.keys(NOT_RUN), ...Object.keys(REWRITTEN)])
    if (!all.has(c)) problems.push(`listed but not in the guide: ${c}`);
  for (const b of blocks) {
    if (b.id in RUN_ELSEWHERE) continue;
    const done = ran.get(b.id);
    if (!done) {
      problems.push(`block ${b.id} (line ${b.line}) was not run`);
      continue;
    }
    for (const c of b.commands)
      if (!done.has(c) && !(c in NOT_RUN)) problems.push(`${b.id}: not run and not listed: ${c}`);
  }
  for (const id of ran.keys())
    if (!blocks.some((b) => b.id === id)) problems.push(`ran a block the guide does not have: ${id}`);
  return problems;
}

/**
 * Runs one command of the guide where the guide says: on a node (in all its namespaces), or where kubectl runs —
 * the control plane's namespace with the lab's kubectl 1.20.2 first on PATH and the admin kubeconfig. `cwd` holds
 * what the guide's relative paths name (a copy of deploy/kubernetes/, the image archives).
 */
export function runGuideCommand(
  c: Cluster,
  node: LabNode | undefined,
  cmd: string,
  cwd: string,
  timeout = 400_000,
): { status: number | null; stdout: string; stderr: string } {
  if (node) return node.exec('sh', ['-c', `cd '${cwd}' && ${cmd}`], { timeout });
  const x = spawnSync(
    'ip',
    [
      'netns',
      'exec',
      c.controlPlane.netns,
      'env',
      `KUBECONFIG=${c.controlPlane.kubeconfig}`,
      `PATH=${c.binDir}:${process.env.PATH}`,
      'sh',
      '-c',
      cmd,
    ],
    { cwd, encoding: 'utf8', timeout, maxBuffer: 64 * 1024 * 1024 },
  );
  return { status: x.status, stdout: x.stdout, stderr: x.stderr };
}

/** Every command of block `id`, on every node or where kubectl runs; throws naming the first that fails. */
export function runGuideBlock(c: Cluster, id: string, cwd: string): void {
  const b = guideBlocks().find((x) => x.id === id);
  if (!b) throw new Error(`docs/kubernetes.md has no block ${id}`);
  for (const command of b.commands) {
    const cmd = runnable(command);
    if (cmd === undefined) continue;
    for (const n of b.place === 'node' ? c.nodes : [undefined]) {
      const r = runGuideCommand(c, n, cmd, cwd);
      if (r.status !== 0)
        throw new Error(`guide block ${id}${n ? ` on ${n.name}` : ''}: ${cmd}\n${r.stdout}${r.stderr}`);
    }
  }
}
