// cnikit-client: the warm-mode plugin executable. Installed under each plugin's name (hard links), it forwards one
// CNI call to the resident `cnikit serve` service over a Unix socket and prints the service's answer; when the
// service is not there it execs the cold multicall executable instead. Protocol: packages/warm/README.md.
//
// The rule that makes the fallback safe: the client sends nothing before it has read a valid hello from a root-owned
// peer, and it never reads stdin before the service asks for it. So before that point nothing was consumed and
// exec'ing the cold executable (same argv, environment and stdin) is exact; after the request was sent, a lost
// service is reported as a CNI error (code 11, "try again later") and never replayed cold.
//
// No dependencies beyond libc; built with `cc -static -Os` (see packages/warm/src/build-client.ts).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_SOCKET "/run/cnikit/cnikit.sock"
#define MAGIC "CNKW"
#define PROTO_VERSION 1
#define HELLO_LEN 16
#define FRAME_HDR 8
#define T_REQUEST 1
#define T_NEED_STDIN 2
#define T_STDIN 3
#define T_REPLY 4
#define FLAG_STDOUT_CLOSED 1u
#define MAX_FRAME (64u << 20)
#define HELLO_TIMEOUT_MS 2000
#define REPLY_MARGIN_MS 5000

extern char **environ;
static char **g_argv;
static const char *g_socket = DEFAULT_SOCKET;

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void put32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
  p[2] = (unsigned char)(v >> 16);
  p[3] = (unsigned char)(v >> 24);
}

static uint32_t get32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void write_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        poll(&pfd, 1, -1);
        continue;
      }
      return;
    }
    p += n;
    len -= (size_t)n;
  }
}

// The fallback record: one line, the reason, appended to client-fallbacks in the socket's directory,
// which `cnikit serve` counts for its metrics (cnikit_client_fallbacks_total). Best effort: no directory (no
// service was ever started there), a symlink or anything but a regular file, and nothing is written.
static void record_fallback(const char *reason) {
  const char *slash = strrchr(g_socket, '/');
  if (!slash || slash == g_socket) return;
  char path[PATH_MAX];
  int n = snprintf(path, sizeof(path), "%.*s/client-fallbacks", (int)(slash - g_socket), g_socket);
  if (n <= 0 || (size_t)n >= sizeof(path)) return;
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
  if (fd < 0) return;
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    char line[32];
    int len = snprintf(line, sizeof(line), "%s\n", reason);
    // one write of a short line to an O_APPEND file: lines of concurrent clients do not interleave
    if (len > 0 && write(fd, line, (size_t)len) < 0) {
      // nothing to do: the count is best effort
    }
  }
  close(fd);
}

// Runs the cold executable: <directory of this executable's path>/cnikit, same argv (argv[0] names the plugin),
// environment and (unread) stdin, after recording why. Returns only if the exec failed.
static void exec_cold(const char *reason) {
  record_fallback(reason);
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  char cold[PATH_MAX + 16];
  if (n > 0) {
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    snprintf(cold, sizeof(cold), "%s/cnikit", exe);
  } else {
    snprintf(cold, sizeof(cold), "cnikit");
  }
  execve(cold, g_argv, environ);
  int e = errno;
  char msg[PATH_MAX + 128];
  int len = snprintf(msg, sizeof(msg), "cnikit-client: cnikit service unavailable and cannot run %s: %s\n", cold,
                     strerror(e));
  write_all(2, msg, (size_t)(len > 0 ? len : 0));
  const char *cmd = getenv("CNI_COMMAND");
  if (cmd && *cmd) {
    len = snprintf(msg, sizeof(msg), "{\n    \"code\": 999,\n    \"msg\": \"cannot run the cold executable %s: %s\"\n}",
                   cold, strerror(e));
    write_all(1, msg, (size_t)(len > 0 ? len : 0));
  }
  _exit(1);
}

// The request reached the service but no answer came back: report "try again later" (code 11), never replay.
static void lost(const char *why) {
  char msg[512];
  int len = snprintf(msg, sizeof(msg),
                     "{\n    \"code\": 11,\n    \"msg\": \"cnikit service: %s\",\n    \"details\": \"the request may "
                     "have been partly applied; try again later\"\n}",
                     why);
  write_all(1, msg, (size_t)(len > 0 ? len : 0));
  len = snprintf(msg, sizeof(msg), "cnikit-client: cnikit service: %s\n", why);
  write_all(2, msg, (size_t)(len > 0 ? len : 0));
  _exit(1);
}

// Reads exactly len bytes; 1 ok, 0 end of stream or timeout, -1 error.
static int read_full(int fd, unsigned char *buf, size_t len, int64_t deadline) {
  size_t off = 0;
  while (off < len) {
    ssize_t n = recv(fd, buf + off, len - off, MSG_DONTWAIT);
    if (n > 0) {
      off += (size_t)n;
      continue;
    }
    if (n == 0) return 0;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    int64_t left = deadline - now_ms();
    if (left <= 0) return 0;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int r = poll(&pfd, 1, (int)left);
    if (r < 0 && errno != EINTR) return -1;
  }
  return 1;
}

// Sends every byte (with fd as SCM_RIGHTS on the first sendmsg when fd >= 0). 1 ok, 0 failed.
static int send_full(int sock, const unsigned char *buf, size_t len, int fd, int64_t deadline) {
  size_t off = 0;
  int fd_sent = fd < 0;
  while (off < len) {
    struct iovec iov = {.iov_base = (void *)(buf + off), .iov_len = len - off};
    struct msghdr msg;
    union {
      struct cmsghdr align;
      char buf[CMSG_SPACE(sizeof(int))];
    } control;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (!fd_sent) {
      memset(&control, 0, sizeof(control));
      msg.msg_control = control.buf;
      msg.msg_controllen = sizeof(control.buf);
      struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return 0;
      int64_t left = deadline - now_ms();
      if (left <= 0) return 0;
      struct pollfd pfd = {.fd = sock, .events = POLLOUT};
      poll(&pfd, 1, (int)left);
      continue;
    }
    fd_sent = 1;
    off += (size_t)n;
  }
  return 1;
}

struct buf {
  unsigned char *p;
  size_t len, cap;
};

static void buf_need(struct buf *b, size_t more) {
  if (b->len + more <= b->cap) return;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap < b->len + more) cap *= 2;
  unsigned char *p = realloc(b->p, cap);
  if (!p) lost("out of memory");
  b->p = p;
  b->cap = cap;
}

static void buf_add(struct buf *b, const void *data, size_t len) {
  buf_need(b, len);
  memcpy(b->p + b->len, data, len);
  b->len += len;
}

static void buf_add32(struct buf *b, uint32_t v) {
  unsigned char x[4];
  put32(x, v);
  buf_add(b, x, 4);
}

static int forwarded(const char *kv) {
  return strncmp(kv, "CNI_", 4) == 0 || strncmp(kv, "CNIKIT_", 7) == 0 || strncmp(kv, "TRACEPARENT=", 12) == 0 ||
         strncmp(kv, "TRACESTATE=", 11) == 0 || strncmp(kv, "BAGGAGE=", 8) == 0;
}

// stdin the caller closed (Node and Bun reopen a closed fd 0-2 read-write on /dev/null, and the cold executable
// reports that as closed; an explicit read-only /dev/null is not).
static int fd_closed(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0) return errno == EBADF;
  char path[32], target[64];
  snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  ssize_t n = readlink(path, target, sizeof(target) - 1);
  if (n < 0) return 0;
  target[n] = 0;
  if (strcmp(target, "/dev/null") != 0) return 0;
  return (fl & O_ACCMODE) == O_RDWR;
}

// The stdin answer: u32 errno (0 = read to end of file), then the bytes.
static void send_stdin(int sock, int stdin_closed, int64_t deadline) {
  struct buf b = {0};
  unsigned char hdr[FRAME_HDR] = {T_STDIN, 0, 0, 0};
  buf_add(&b, hdr, FRAME_HDR);
  buf_add32(&b, 0);
  int err = stdin_closed ? EBADF : 0;
  while (!err) {
    buf_need(&b, 65536);
    ssize_t n = read(0, b.p + b.len, b.cap - b.len);
    if (n > 0) {
      b.len += (size_t)n;
      if (b.len > MAX_FRAME - 16) {
        err = EFBIG;
        break;
      }
      continue;
    }
    if (n == 0) break;
    if (errno == EINTR) continue;
    if (errno == EAGAIN) {
      struct pollfd pfd = {.fd = 0, .events = POLLIN};
      poll(&pfd, 1, -1);
      continue;
    }
    err = errno;
  }
  if (err) b.len = FRAME_HDR + 4;
  put32(b.p + 4, (uint32_t)(b.len - FRAME_HDR));
  put32(b.p + FRAME_HDR, (uint32_t)err);
  if (!send_full(sock, b.p, b.len, -1, deadline)) lost("connection lost while sending stdin");
  free(b.p);
}

int main(int argc, char **argv) {
  (void)argc;
  g_argv = argv;
  int stdin_closed = fd_closed(0);
  // stdout: only a descriptor that is really closed (EBADF); /dev/null is a destination the caller chose
  int stdout_closed = fcntl(1, F_GETFL) < 0 && errno == EBADF;
  // Never let the socket become fd 0-2 (a closed stdout would receive it): fill the gaps like Node and Bun do.
  for (int fd = 0; fd < 3; fd++) {
    if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
      int n = open("/dev/null", O_RDWR);
      if (n >= 0 && n != fd) {
        dup2(n, fd);
        close(n);
      }
    }
  }

  const char *path = getenv("CNIKIT_SOCKET");
  if (!path || !*path) path = DEFAULT_SOCKET;
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof(sa));
  sa.sun_family = AF_UNIX;
  g_socket = path;
  if (strlen(path) >= sizeof(sa.sun_path)) exec_cold("socket");
  strcpy(sa.sun_path, path);
  int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (sock < 0) exec_cold("socket");
  // Non-blocking: a full backlog (EAGAIN) means a busy service, and the cold executable serves this call.
  if (connect(sock, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
    int e = errno;
    close(sock);
    exec_cold(e == EAGAIN ? "busy" : "unavailable");
  }
  struct ucred cred;
  socklen_t clen = sizeof(cred);
  if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 || cred.uid != 0) {
    close(sock);
    exec_cold("peer");
  }
  int hello_ms = HELLO_TIMEOUT_MS;
  const char *h = getenv("CNIKIT_HELLO_TIMEOUT_MS");
  if (h && *h) hello_ms = atoi(h);
  unsigned char hello[HELLO_LEN];
  if (read_full(sock, hello, HELLO_LEN, now_ms() + hello_ms) != 1) {
    close(sock);
    exec_cold("hello");
  }
  if (memcmp(hello, MAGIC, 4) != 0 || hello[4] != PROTO_VERSION) {
    close(sock);
    exec_cold("protocol");
  }
  uint32_t service_deadline = get32(hello + 12);
  int netns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (netns < 0) {
    close(sock);
    exec_cold("netns");
  }

  // From here on the request belongs to the service: never cold.
  struct buf req = {0};
  unsigned char hdr[FRAME_HDR] = {T_REQUEST, 0, 0, 0};
  buf_add(&req, hdr, FRAME_HDR);
  buf_add32(&req, stdout_closed ? FLAG_STDOUT_CLOSED : 0);
  const char *name = strrchr(argv[0] ? argv[0] : "", '/');
  name = name ? name + 1 : (argv[0] ? argv[0] : "");
  buf_add32(&req, (uint32_t)strlen(name));
  buf_add(&req, name, strlen(name));
  uint32_t count = 0;
  for (char **e = environ; *e; e++) count += forwarded(*e) ? 1 : 0;
  buf_add32(&req, count);
  for (char **e = environ; *e; e++) {
    if (!forwarded(*e)) continue;
    buf_add32(&req, (uint32_t)strlen(*e));
    buf_add(&req, *e, strlen(*e));
  }
  put32(req.p + 4, (uint32_t)(req.len - FRAME_HDR));
  int64_t deadline = now_ms() + (int64_t)service_deadline + REPLY_MARGIN_MS;
  if (!send_full(sock, req.p, req.len, netns, deadline)) lost("connection lost while sending the request");
  close(netns);
  free(req.p);

  for (;;) {
    unsigned char fh[FRAME_HDR];
    int r = read_full(sock, fh, FRAME_HDR, deadline);
    if (r != 1) lost(r == 0 && now_ms() >= deadline ? "no answer within the deadline" : "connection lost during the request");
    uint32_t len = get32(fh + 4);
    if (len > MAX_FRAME) lost("protocol error: frame too large");
    if (fh[0] == T_NEED_STDIN) {
      if (len != 0) lost("protocol error: unexpected stdin request body");
      send_stdin(sock, stdin_closed, deadline);
      continue;
    }
    if (fh[0] != T_REPLY || len < 12) lost("protocol error: unexpected frame");
    unsigned char *body = malloc(len);
    if (!body) lost("out of memory");
    if (read_full(sock, body, len, deadline) != 1) lost("connection lost during the reply");
    int32_t code = (int32_t)get32(body);
    uint32_t out_len = get32(body + 4);
    if ((uint64_t)out_len + 12 > len) lost("protocol error: bad reply");
    uint32_t err_len = get32(body + 8 + out_len);
    if ((uint64_t)out_len + err_len + 12 != len) lost("protocol error: bad reply");
    write_all(2, body + 12 + out_len, err_len);
    write_all(1, body + 8, out_len);
    return code;
  }
}
