// The sandbox ("pause") process of the Kubernetes end-to-end test's pods: holds the pod's namespaces, reaps
// children, exits on SIGINT/SIGTERM (as PID 1 of its PID namespace it would otherwise ignore them). Built static
// by the test (cc -static) and imported into the private containerd as a one-layer image: no registry is needed.
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) {
  (void)sig;
  _exit(0);
}

static void reap(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction sa = {0};
  sa.sa_handler = stop;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sa.sa_handler = reap;
  sa.sa_flags = SA_NOCLDSTOP;
  sigaction(SIGCHLD, &sa, NULL);
  for (;;) pause();
  return EXIT_FAILURE;
}
