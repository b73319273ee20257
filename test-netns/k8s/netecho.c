/*
 * A TCP and UDP echo for the cluster-network tests (busybox's nc has no UDP): it tells each client the source
 * address it saw, so a test observes on the receiver whether a packet kept the pod's address or was masqueraded.
 *
 *   netecho serve PORT            TCP and UDP on [::]:PORT (IPv4 too); for each message prints
 *                                 "tcp|udp from ADDR: MSG" and answers "PEER ADDR MSG"
 *   netecho tcp|udp HOST PORT MSG  sends MSG, prints the answer; exit 1 without one (10 s; UDP: 5 tries)
 *
 * Built with cc -static by the test and given to pods through a hostPath volume.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void timeout(int sig) {
  static const char m[] = "netecho: timeout (no connection or no answer in 10 s)\n";
  (void)sig;
  if (write(1, m, sizeof m - 1) < 0) _exit(1);
  _exit(1);
}

static void peer(const struct sockaddr_in6 *sa, char *out, size_t n) {
  if (IN6_IS_ADDR_V4MAPPED(&sa->sin6_addr))
    inet_ntop(AF_INET, &sa->sin6_addr.s6_addr[12], out, n);
  else
    inet_ntop(AF_INET6, &sa->sin6_addr, out, n);
}

static int bound(int type, int port) {
  int fd = socket(AF_INET6, type, 0);
  int zero = 0, one = 1;
  struct sockaddr_in6 a;
  if (fd < 0) return -1;
  setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  memset(&a, 0, sizeof a);
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(port);
  a.sin6_addr = in6addr_any;
  if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0) return -1;
  if (type == SOCK_STREAM && listen(fd, 16) < 0) return -1;
  return fd;
}

static void trim(char *s, ssize_t *n) {
  while (*n > 0 && (s[*n - 1] == '\n' || s[*n - 1] == '\r')) (*n)--;
  s[*n] = 0;
}

static int serve(int port) {
  int t = bound(SOCK_STREAM, port), u = bound(SOCK_DGRAM, port);
  if (t < 0 || u < 0) {
    perror("bind");
    return 2;
  }
  printf("listening on %d\n", port);
  fflush(stdout);
  for (;;) {
    struct pollfd p[2] = {{t, POLLIN, 0}, {u, POLLIN, 0}};
    char buf[512], addr[INET6_ADDRSTRLEN], reply[700];
    struct sockaddr_in6 sa;
    socklen_t len = sizeof sa;
    ssize_t n;
    if (poll(p, 2, -1) < 0) continue;
    if (p[1].revents & POLLIN) {
      n = recvfrom(u, buf, sizeof buf - 1, 0, (struct sockaddr *)&sa, &len);
      if (n >= 0) {
        trim(buf, &n);
        peer(&sa, addr, sizeof addr);
        printf("udp from %s: %s\n", addr, buf);
        fflush(stdout);
        n = snprintf(reply, sizeof reply, "PEER %s %s\n", addr, buf);
        sendto(u, reply, n, 0, (struct sockaddr *)&sa, len);
      }
    }
    if (p[0].revents & POLLIN) {
      int c = accept(t, (struct sockaddr *)&sa, &len);
      struct pollfd q = {c, POLLIN, 0};
      if (c < 0) continue;
      n = poll(&q, 1, 5000) == 1 ? read(c, buf, sizeof buf - 1) : -1;
      if (n >= 0) {
        trim(buf, &n);
        peer(&sa, addr, sizeof addr);
        printf("tcp from %s: %s\n", addr, buf);
        fflush(stdout);
        n = snprintf(reply, sizeof reply, "PEER %s %s\n", addr, buf);
        if (write(c, reply, n) < 0) perror("write");
      }
      close(c);
    }
  }
}

static int client(int udp, const char *host, const char *port, const char *msg) {
  struct sockaddr_in a4;
  struct sockaddr_in6 a6;
  struct sockaddr *sa;
  socklen_t len;
  char buf[700];
  ssize_t n = -1;
  int fd, tries, v6 = strchr(host, ':') != NULL;
  memset(&a4, 0, sizeof a4);
  memset(&a6, 0, sizeof a6);
  a4.sin_family = AF_INET;
  a6.sin6_family = AF_INET6;
  a4.sin_port = a6.sin6_port = htons(atoi(port));
  if (v6 ? inet_pton(AF_INET6, host, &a6.sin6_addr) != 1 : inet_pton(AF_INET, host, &a4.sin_addr) != 1) {
    fprintf(stderr, "netecho: not an address: %s\n", host);
    return 2;
  }
  sa = v6 ? (struct sockaddr *)&a6 : (struct sockaddr *)&a4;
  len = v6 ? sizeof a6 : sizeof a4;
  fd = socket(v6 ? AF_INET6 : AF_INET, udp ? SOCK_DGRAM : SOCK_STREAM, 0);
  signal(SIGALRM, timeout);
  alarm(10);
  if (fd < 0 || connect(fd, sa, len) < 0) {
    perror("connect");
    return 1;
  }
  for (tries = 0; tries < (udp ? 5 : 1); tries++) {
    struct pollfd q = {fd, POLLIN, 0};
    if (write(fd, msg, strlen(msg)) < 0) {
      perror("send");
      return 1;
    }
    if (poll(&q, 1, udp ? 1000 : 5000) == 1) {
      n = read(fd, buf, sizeof buf - 1);
      if (n > 0) break;
    }
  }
  if (n <= 0) {
    fprintf(stderr, "netecho: no answer from %s %s\n", host, port);
    return 1;
  }
  buf[n] = 0;
  fputs(buf, stdout);
  return 0;
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc == 3 && strcmp(argv[1], "serve") == 0) return serve(atoi(argv[2]));
  if (argc == 5 && (strcmp(argv[1], "tcp") == 0 || strcmp(argv[1], "udp") == 0))
    return client(argv[1][0] == 'u', argv[2], argv[3], argv[4]);
  fputs("usage: netecho serve PORT | netecho tcp|udp HOST PORT MSG\n", stderr);
  return 2;
}
