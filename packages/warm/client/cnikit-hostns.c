/*
 * cnikit-hostns PROGRAM [ARG...]: run PROGRAM in the mount namespace of pid 1.
 *
 * The Kubernetes DaemonSet's serve container (deploy/kubernetes/daemonset.yaml, docs/kubernetes.md) runs with
 * hostPID, so pid 1 is the node's init: `cnikit-hostns /opt/cni/bin/cnikit serve` runs the node's own installed
 * executable with the node's files (iptables/nft tools and backend, /var/lib/cni, /run/netns, /run/cnikit), exactly
 * what a runtime's cold exec of /opt/cni/bin/<plugin> sees. The network namespace is the pod's (hostNetwork) and the
 * cgroup stays the container's, so the pod's resource limits apply.
 *
 * setns(CLONE_NEWNS) is refused to a multi-threaded process, and the JavaScript runtime starts threads before any
 * of our code runs: hence this tiny single-threaded static program, which setns()es and then execs. It takes no
 * option and reads no environment variable: the namespace is always pid 1's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 2 || argv[1][0] != '/') {
    fprintf(stderr, "usage: cnikit-hostns /ABSOLUTE/PROGRAM [ARG...]   (runs it in the mount namespace of pid 1)\n");
    return 2;
  }
  int fd = open("/proc/1/ns/mnt", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    fprintf(stderr, "cnikit-hostns: open /proc/1/ns/mnt: %s (the pod needs hostPID: true)\n", strerror(errno));
    return 1;
  }
  if (setns(fd, CLONE_NEWNS) != 0) {
    fprintf(stderr, "cnikit-hostns: setns(/proc/1/ns/mnt): %s (the container needs privileged: true)\n",
            strerror(errno));
    return 1;
  }
  close(fd);
  if (chdir("/") != 0) {
    fprintf(stderr, "cnikit-hostns: chdir /: %s\n", strerror(errno));
    return 1;
  }
  execv(argv[1], argv + 1);
  fprintf(stderr, "cnikit-hostns: exec %s in the host's mount namespace: %s\n", argv[1], strerror(errno));
  return 127;
}
