/**
 * A tiny C launcher the benchmarks start plugins with: posix_spawn + waitpid (the way a Go runtime's os/exec starts a
 * plugin), reporting the wall time from spawn to exit on descriptor 3, so Node's own (large) spawn cost is in no
 * figure. `compileLauncher(dir)` builds it with `cc` and returns a function that runs one plugin exec through it.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const LAUNCH_C = `#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
extern char **environ;
int main(int argc, char **argv) {
  (void)argc;
  fcntl(3, F_SETFD, FD_CLOEXEC);
  struct timespec a, b;
  pid_t pid;
  int st = 0;
  clock_gettime(CLOCK_MONOTONIC, &a);
  if (posix_spawn(&pid, argv[1], NULL, NULL, argv + 1, environ) != 0) return 127;
  struct rusage ru;
  wait4(pid, &st, 0, &ru);
  clock_gettime(CLOCK_MONOTONIC, &b);
  long long cpu = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
  dprintf(3, "%lld %lld\\n", (long long)(b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec), cpu);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}
`;

export interface LaunchOutcome {
  /** Wall time from spawn to exit, in milliseconds. */
  ms: number;
  /**
   * User + system CPU time of the plugin process and the children it waited for (tools it ran), in milliseconds
   * (wait4's rusage): far less sensitive to the machine's load than the wall time. Work the kernel does outside the
   * process (RCU callbacks, softirqs) is not in it.
   */
  cpuMs: number;
  stdout: string;
}

/** Compile the launcher into `dir`; returns a runner, or throws naming the compiler's error. */
export function compileLauncher(
  dir: string,
): (bin: string, env: Record<string, string>, input: string) => LaunchOutcome {
  const src = join(dir, 'launch.c');
  const exe = join(dir, 'launch');
  writeFileSync(src, LAUNCH_C);
  const cc = spawnSync('cc', ['-O2', '-o', exe, src], { encoding: 'utf8' });
  if (cc.status !== 0) throw new Error(`cannot compile the launcher: ${cc.stderr}${cc.error ?? ''}`);
  return (bin, env, input) => {
    const r = spawnSync(exe, [bin], {
      env,
      input,
      encoding: 'utf8',
      stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
      maxBuffer: 64 * 1024 * 1024,
    });
    if (r.status !== 0)
      throw new Error(`${bin} ${env.CNI_COMMAND} failed (exit ${r.status}): ${r.stdout}${r.stderr}`);
    const [wall = '', cpu = ''] = String(r.output[3] ?? '')
      .trim()
      .split(' ');
    return { ms: Number(wall) / 1e6, cpuMs: Number(cpu) / 1e6, stdout: r.stdout };
  };
}
