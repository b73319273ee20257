/*
 * labexec CGROUP.PROCS... -- PROGRAM [ARGS...]
 * Moves itself into the cgroups whose cgroup.procs files are given, then execs PROGRAM: the lab cluster
 * (scripts/k8s/lab-node.ts) starts every process of a node through it, so the process is in the node's cgroup
 * subtree before it joins the node's cgroup namespace (nsenter -C) and sees that subtree as its root.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
  char pid[32];
  int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
  int i = 1;
  for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
    int fd = open(argv[i], O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, pid, (size_t)n) != n) {
      fprintf(stderr, "labexec: %s: %s\n", argv[i], strerror(errno));
      return 125;
    }
    close(fd);
  }
  if (i + 1 >= argc) {
    fprintf(stderr, "usage: labexec CGROUP.PROCS... -- PROGRAM [ARGS...]\n");
    return 125;
  }
  execvp(argv[i + 1], argv + i + 1);
  fprintf(stderr, "labexec: %s: %s\n", argv[i + 1], strerror(errno));
  return 127;
}
