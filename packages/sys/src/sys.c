// cnikit native layer: the few system calls JavaScript cannot reach.
//
// Pure Node-API (node_api.h only: no libuv, no V8, no node-addon-api) so the same
// compiled addon loads under Node (including a single executable application) and Bun.
//
// Every function is synchronous and acts on the calling thread. Errors are thrown as
// Error objects carrying `errno` (number), `code` ('ENOENT'...), `syscall` ('setns'...)
// and `reason` (the Go syscall.Errno text, e.g. "no such file or directory"); the
// TypeScript wrapper turns them into SysError.
//
// Exports:
//   setns(fd, nstype)                 -> undefined
//   nsType(fd)                        -> number   (ioctl NS_GET_NSTYPE: CLONE_NEWNET...)
//   fsMagic(fd)                       -> number   (fstatfs f_type)
//   flock(fd, op, nonBlocking)        -> boolean  (op: 0 shared, 1 exclusive, 2 unlock;
//                                                  false when non-blocking and busy)
//   gettid()                          -> number
//   nlOpen(protocol, rcvbuf)          -> [fd, portId]
//   nlSend(fd, buffer[, portId])      -> undefined (to the kernel, or to another socket's port id)
//   nlRecv(fd, timeoutMs)             -> Buffer | null (null on timeout; <0 waits forever)
//   nlSetOpt(fd, option, value)       -> undefined (setsockopt SOL_NETLINK, int value)
//   closeFd(fd)                       -> undefined
//   closeFdLater(fd[, afterGrace])    -> undefined (the close(2) done by a background thread, started once, with
//                                        afterGrace first after an RCU grace period: for a descriptor whose
//                                        release may wait in the kernel, e.g. an nfnetlink socket after an
//                                        nf_tables commit; the caller never uses the number again)
//   errnoName(errno) / errnoMessage(errno) -> string
//   Unix stream sockets (the warm-mode service, @cnikit/warm):
//   listenUnix(path, backlog)         -> fd       (socket+bind+listen, SOCK_CLOEXEC)
//   acceptUnix(fd, timeoutMs)         -> {fd, pid, uid, gid} | null (poll+accept4+SO_PEERCRED; null on timeout)
//   connectUnix(path)                 -> fd       (blocking connect, SOCK_CLOEXEC)
//   peerCred(fd)                      -> {pid, uid, gid}
//   recvMsg(fd, maxLen, timeoutMs)    -> {data: Buffer, fds: number[]} | null (null on timeout; empty data = EOF;
//                                        descriptors passed with SCM_RIGHTS arrive close-on-exec)
//   sendAll(fd, buffer, timeoutMs[, fds]) -> undefined (every byte or throws ETIMEDOUT; fds go with the first
//                                        sendmsg as SCM_RIGHTS; MSG_NOSIGNAL)
//   setCloexec(fd, on)                -> undefined (FD_CLOEXEC on or off)
//   watchdogSet(path, argv, envp, keepFd) -> undefined (starts the watchdog thread once; stores what to exec)
//   watchdogArm(timeoutMs) / watchdogDisarm() -> undefined: when armed and not disarmed in time, the watchdog
//                                        thread does execReplace with the stored arguments (a main thread stuck
//                                        in synchronous code cannot do it itself)
//   (both keep descriptors 0-2 open across the exec)
//   watchdogOnStopSignal(entry)       -> undefined: from now on a SIGTERM or SIGINT (then passed on to the handler
//                                        installed before) makes the watchdog's exec add `entry` to its envp (a
//                                        signal the stuck main thread never saw is not lost across the exec)
//   udpOpenDevice(ifname, port[, chaddr]) -> fd (socket(AF_INET, SOCK_DGRAM) in the calling thread's network
//                                        namespace, SO_REUSEADDR + SO_BROADCAST + SO_BINDTODEVICE ifname, bound to
//                                        0.0.0.0:port; non-blocking, close-on-exec: the DHCP client's socket, handed
//                                        to node:dgram as { fd }). With a 6-byte chaddr, a socket filter keeps only
//                                        datagrams whose BOOTP chaddr is that address (replies broadcast to other
//                                        clients on the segment are dropped in the kernel)
//   netnsNew()                        -> fd       (a new, anonymous network namespace: unshare(CLONE_NEWNET) on the
//                                        calling thread, open /proc/thread-self/ns/net, setns back; alive while the
//                                        fd is open — host-device's temporary namespace)
//   tunCreate(name, flags, owner, group) -> name   (a persistent tun/tap device in the calling thread's network
//                                        namespace: open /dev/net/tun, TUNSETIFF with IFF_* flags, TUNSETOWNER /
//                                        TUNSETGROUP when >= 0, TUNSETPERSIST; returns the kernel's name for it)
//   execReplace(path, argv, envp, keepFd) -> never returns (dup2 keepFd to 3 without close-on-exec, execve);
//                                        throws on failure
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <linux/if_tun.h>
#include <linux/nsfs.h>
#include <poll.h>
#include <pthread.h>
#include <alloca.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <node_api.h>

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

// ---------------------------------------------------------------------------
// errno names and messages

struct errno_entry {
  int no;
  const char *name;
};

#define E(x) {x, #x}
static const struct errno_entry errno_table[] = {
    E(EPERM),        E(ENOENT),       E(ESRCH),        E(EINTR),         E(EIO),
    E(ENXIO),        E(E2BIG),        E(ENOEXEC),      E(EBADF),         E(ECHILD),
    E(EAGAIN),       E(ENOMEM),       E(EACCES),       E(EFAULT),        E(ENOTBLK),
    E(EBUSY),        E(EEXIST),       E(EXDEV),        E(ENODEV),        E(ENOTDIR),
    E(EISDIR),       E(EINVAL),       E(ENFILE),       E(EMFILE),        E(ENOTTY),
    E(ETXTBSY),      E(EFBIG),        E(ENOSPC),       E(ESPIPE),        E(EROFS),
    E(EMLINK),       E(EPIPE),        E(EDOM),         E(ERANGE),        E(EDEADLK),
    E(ENAMETOOLONG), E(ENOLCK),       E(ENOSYS),       E(ENOTEMPTY),     E(ELOOP),
    E(ENOMSG),       E(EIDRM),        E(ENODATA),      E(ETIME),         E(ENOLINK),
    E(EPROTO),       E(EBADMSG),      E(EOVERFLOW),    E(EILSEQ),        E(ENOTSOCK),
    E(EDESTADDRREQ), E(EMSGSIZE),     E(EPROTOTYPE),   E(ENOPROTOOPT),   E(EPROTONOSUPPORT),
    E(EOPNOTSUPP),   E(EAFNOSUPPORT), E(EADDRINUSE),   E(EADDRNOTAVAIL), E(ENETDOWN),
    E(ENETUNREACH),  E(ENETRESET),    E(ECONNABORTED), E(ECONNRESET),    E(ENOBUFS),
    E(EISCONN),      E(ENOTCONN),     E(ETIMEDOUT),    E(ECONNREFUSED),  E(EHOSTDOWN),
    E(EHOSTUNREACH), E(EALREADY),     E(EINPROGRESS),  E(ESTALE),        E(EDQUOT),
    E(ECANCELED),    E(EOWNERDEAD),   E(ENOTRECOVERABLE), E(ERFKILL),    E(EHWPOISON),
    E(ENOTUNIQ),     E(ECOMM),        E(ENONET),       E(ENOSR),         E(ENOSTR),
    E(ENOPKG),       E(EREMOTE),      E(EADV),         E(ESRMNT),        E(EUSERS),
    E(ESHUTDOWN),    E(ETOOMANYREFS), E(EKEYEXPIRED),  E(EKEYREJECTED),  E(EKEYREVOKED),
    E(ENOKEY),       E(EMEDIUMTYPE),  E(ENOMEDIUM),    E(ENOTNAM),       E(EREMOTEIO),
};
#undef E

static const char *errno_name(int no, char *buf, size_t len) {
  for (size_t i = 0; i < sizeof(errno_table) / sizeof(errno_table[0]); i++) {
    if (errno_table[i].no == no) return errno_table[i].name;
  }
  snprintf(buf, len, "E%d", no);
  return buf;
}

// Go's syscall.Errno strings are glibc's strerror texts with a lower-case first letter.
static void errno_message(int no, char *buf, size_t len) {
  char tmp[256];
  const char *s = strerror_r(no, tmp, sizeof(tmp));  // GNU variant: returns the string
  snprintf(buf, len, "%s", s);
  if (buf[0] >= 'A' && buf[0] <= 'Z' && !(buf[1] >= 'A' && buf[1] <= 'Z')) buf[0] = (char)(buf[0] - 'A' + 'a');
}

// ---------------------------------------------------------------------------
// helpers

#define CHECK(call)                                         \
  do {                                                      \
    if ((call) != napi_ok) return throw_napi_failure(env);  \
  } while (0)

static napi_value throw_napi_failure(napi_env env) {
  bool pending = false;
  napi_is_exception_pending(env, &pending);
  if (!pending) {
    const napi_extended_error_info *info = NULL;
    napi_get_last_error_info(env, &info);
    napi_throw_error(env, "ECNIKITNAPI", info && info->error_message ? info->error_message : "Node-API call failed");
  }
  return NULL;
}

static void set_prop(napi_env env, napi_value obj, const char *key, napi_value v) {
  napi_set_named_property(env, obj, key, v);
}

// Throws an Error with errno/code/syscall/reason properties. Always returns NULL.
static napi_value throw_errno(napi_env env, const char *syscall_name, int err) {
  char namebuf[16], reason[256], msgbuf[320];
  const char *name = errno_name(err, namebuf, sizeof(namebuf));
  errno_message(err, reason, sizeof(reason));
  snprintf(msgbuf, sizeof(msgbuf), "%s: %s", syscall_name, reason);
  napi_value code, msg, error, v;
  if (napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &code) != napi_ok ||
      napi_create_string_utf8(env, msgbuf, NAPI_AUTO_LENGTH, &msg) != napi_ok ||
      napi_create_error(env, code, msg, &error) != napi_ok) {
    napi_throw_error(env, name, msgbuf);
    return NULL;
  }
  if (napi_create_int32(env, err, &v) == napi_ok) set_prop(env, error, "errno", v);
  set_prop(env, error, "code", code);
  if (napi_create_string_utf8(env, syscall_name, NAPI_AUTO_LENGTH, &v) == napi_ok) set_prop(env, error, "syscall", v);
  if (napi_create_string_utf8(env, reason, NAPI_AUTO_LENGTH, &v) == napi_ok) set_prop(env, error, "reason", v);
  napi_throw(env, error);
  return NULL;
}

static napi_value throw_type(napi_env env, const char *msg) {
  napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", msg);
  return NULL;
}

// Reads argv[i] as an int32; fails (throws) on a non-number.
static bool arg_int(napi_env env, napi_value *argv, size_t argc, size_t i, int32_t *out, const char *what) {
  napi_valuetype t = napi_undefined;
  if (i >= argc || napi_typeof(env, argv[i], &t) != napi_ok || t != napi_number) {
    throw_type(env, what);
    return false;
  }
  if (napi_get_value_int32(env, argv[i], out) != napi_ok) {
    throw_type(env, what);
    return false;
  }
  return true;
}

static napi_value make_undefined(napi_env env) {
  napi_value u;
  napi_get_undefined(env, &u);
  return u;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#define ARGS(n)                  \
  size_t argc = n;               \
  napi_value argv[n];            \
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL))

// ---------------------------------------------------------------------------
// namespaces

static napi_value js_setns(napi_env env, napi_callback_info info) {
  ARGS(2);
  int32_t fd, nstype;
  if (!arg_int(env, argv, argc, 0, &fd, "setns: fd must be a number")) return NULL;
  if (!arg_int(env, argv, argc, 1, &nstype, "setns: nstype must be a number")) return NULL;
  if (setns(fd, nstype) != 0) return throw_errno(env, "setns", errno);
  return make_undefined(env);
}

static napi_value js_ns_type(napi_env env, napi_callback_info info) {
  ARGS(1);
  int32_t fd;
  if (!arg_int(env, argv, argc, 0, &fd, "nsType: fd must be a number")) return NULL;
  int r = ioctl(fd, NS_GET_NSTYPE);
  if (r < 0) return throw_errno(env, "ioctl(NS_GET_NSTYPE)", errno);
  napi_value out;
  CHECK(napi_create_int32(env, r, &out));
  return out;
}

static napi_value js_fs_magic(napi_env env, napi_callback_info info) {
  ARGS(1);
  int32_t fd;
  if (!arg_int(env, argv, argc, 0, &fd, "fsMagic: fd must be a number")) return NULL;
  struct statfs st;
  int r;
  do {
    r = fstatfs(fd, &st);
  } while (r < 0 && errno == EINTR);
  if (r < 0) return throw_errno(env, "fstatfs", errno);
  napi_value out;
  CHECK(napi_create_double(env, (double)(uint64_t)(unsigned long)st.f_type, &out));
  return out;
}

// ---------------------------------------------------------------------------
// flock

static napi_value js_flock(napi_env env, napi_callback_info info) {
  ARGS(3);
  int32_t fd, op;
  if (!arg_int(env, argv, argc, 0, &fd, "flock: fd must be a number")) return NULL;
  if (!arg_int(env, argv, argc, 1, &op, "flock: op must be a number")) return NULL;
  bool nb = false;
  if (argc > 2) {
    napi_valuetype t;
    if (napi_typeof(env, argv[2], &t) == napi_ok && t == napi_boolean) napi_get_value_bool(env, argv[2], &nb);
  }
  int how;
  switch (op) {
    case 0: how = LOCK_SH; break;
    case 1: how = LOCK_EX; break;
    case 2: how = LOCK_UN; break;
    default: return throw_type(env, "flock: op must be 0 (shared), 1 (exclusive) or 2 (unlock)");
  }
  if (nb) how |= LOCK_NB;
  int r;
  do {
    r = flock(fd, how);
  } while (r < 0 && errno == EINTR);
  napi_value out;
  if (r < 0) {
    if (nb && errno == EWOULDBLOCK) {
      CHECK(napi_get_boolean(env, false, &out));
      return out;
    }
    return throw_errno(env, "flock", errno);
  }
  CHECK(napi_get_boolean(env, true, &out));
  return out;
}

static napi_value js_gettid(napi_env env, napi_callback_info info) {
  napi_value out;
  CHECK(napi_create_int32(env, (int32_t)syscall(SYS_gettid), &out));
  return out;
}

static napi_value js_close(napi_env env, napi_callback_info info) {
  ARGS(1);
  int32_t fd;
  if (!arg_int(env, argv, argc, 0, &fd, "close: fd must be a number")) return NULL;
  // Linux always releases the descriptor, even when close reports EINTR: never retry.
  if (close(fd) != 0 && errno != EINTR) return throw_errno(env, "close", errno);
  return make_undefined(env);
}

// The background closer: one detached thread, started on first use, with signals blocked (they stay the main
// thread's). A descriptor it cannot take (thread not startable, queue full) is closed at once.
static pthread_mutex_t bc_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bc_cv = PTHREAD_COND_INITIALIZER;
static int bc_fds[256];
static int bc_len = 0;
static int bc_state = 0;  // 0 not started, 1 running, -1 cannot start
static bool bc_grace = false;  // a descriptor of the queued batch asked for the grace period

// Before closing a batch in which a descriptor asked for it (afterGrace: a long-lived process, the warm service),
// the thread waits for one RCU grace period (membarrier MEMBARRIER_CMD_GLOBAL is synchronize_rcu() in the kernel).
// A process about to exit does not ask: its exit would wait for that system call to end. The reason: releasing an nfnetlink socket runs nf_tables'
// NETLINK_URELEASE handler, which takes the namespace's nf_tables commit mutex and, while holding it, waits for the
// freeing of the last commit's objects (an RCU grace period) when that is still pending; every link created or
// deleted in that namespace meanwhile (its NETDEV_REGISTER/UNREGISTER notifier takes the same mutex, under rtnl)
// waited for it: the warm service's bridge ADD after a DEL chain, 1.5-2.5 ms in its veth creation. After a grace
// period started after the commit, that freeing is done (or nearly): the release takes the mutex only briefly.
// Without membarrier (ENOSYS, or EINVAL on nohz_full machines) the descriptors are closed at once, as before.
#ifndef MEMBARRIER_CMD_GLOBAL
#define MEMBARRIER_CMD_GLOBAL 1
#endif
static void *bc_main(void *arg) {
  (void)arg;
  int batch[sizeof(bc_fds) / sizeof(bc_fds[0])];
  pthread_mutex_lock(&bc_mu);
  for (;;) {
    while (bc_len == 0) pthread_cond_wait(&bc_cv, &bc_mu);
    if (bc_grace) {
      pthread_mutex_unlock(&bc_mu);
      syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0);
      pthread_mutex_lock(&bc_mu);
    }
    bc_grace = false;
    int n = bc_len;
    memcpy(batch, bc_fds, (size_t)n * sizeof(int));
    bc_len = 0;
    pthread_mutex_unlock(&bc_mu);
    for (int i = 0; i < n; i++) close(batch[i]);
    pthread_mutex_lock(&bc_mu);
  }
  return NULL;
}

static napi_value js_close_later(napi_env env, napi_callback_info info) {
  ARGS(2);
  int32_t fd;
  if (!arg_int(env, argv, argc, 0, &fd, "closeFdLater: fd must be a number")) return NULL;
  bool grace = false;
  napi_valuetype t = napi_undefined;
  if (argc > 1 && napi_typeof(env, argv[1], &t) == napi_ok && t == napi_boolean) napi_get_value_bool(env, argv[1], &grace);
  bool queued = false;
  pthread_mutex_lock(&bc_mu);
  if (bc_state == 0) {
    pthread_attr_t ta;
    pthread_attr_init(&ta);
    pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&ta, 64 * 1024);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);  // the new thread inherits the mask
    pthread_t t;
    bc_state = pthread_create(&t, &ta, bc_main, NULL) == 0 ? 1 : -1;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&ta);
  }
  if (bc_state == 1 && bc_len < (int)(sizeof(bc_fds) / sizeof(bc_fds[0]))) {
    bc_fds[bc_len++] = fd;
    if (grace) bc_grace = true;
    queued = true;
    pthread_cond_signal(&bc_cv);
  }
  pthread_mutex_unlock(&bc_mu);
  if (!queued && close(fd) != 0 && errno != EINTR) return throw_errno(env, "close", errno);
  return make_undefined(env);
}

// ---------------------------------------------------------------------------
// netlink transport

static napi_value js_nl_open(napi_env env, napi_callback_info info) {
  ARGS(2);
  int32_t protocol, rcvbuf = 0;
  if (!arg_int(env, argv, argc, 0, &protocol, "nlOpen: protocol must be a number")) return NULL;
  if (argc > 1) {
    napi_valuetype t;
    if (napi_typeof(env, argv[1], &t) == napi_ok && t == napi_number) napi_get_value_int32(env, argv[1], &rcvbuf);
  }
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, protocol);
  if (fd < 0) return throw_errno(env, "socket", errno);
  if (rcvbuf > 0) {
    // SO_RCVBUFFORCE ignores rmem_max but needs CAP_NET_ADMIN; fall back to the capped option.
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)) != 0) {
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    }
    int sndbuf = 1 << 20;
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)) != 0) {
      setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    }
  }
  struct sockaddr_nl sa;
  memset(&sa, 0, sizeof(sa));
  sa.nl_family = AF_NETLINK;
  if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
    int e = errno;
    close(fd);
    return throw_errno(env, "bind", e);
  }
  socklen_t len = sizeof(sa);
  if (getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
    int e = errno;
    close(fd);
    return throw_errno(env, "getsockname", e);
  }
  napi_value out, vfd, vport;
  if (napi_create_array_with_length(env, 2, &out) != napi_ok || napi_create_int32(env, fd, &vfd) != napi_ok ||
      napi_create_uint32(env, sa.nl_pid, &vport) != napi_ok || napi_set_element(env, out, 0, vfd) != napi_ok ||
      napi_set_element(env, out, 1, vport) != napi_ok) {
    close(fd);
    return throw_napi_failure(env);
  }
  return out;
}

static napi_value js_nl_set_opt(napi_env env, napi_callback_info info) {
  ARGS(3);
  int32_t fd, opt, val;
  if (!arg_int(env, argv, argc, 0, &fd, "nlSetOpt: fd must be a number")) return NULL;
  if (!arg_int(env, argv, argc, 1, &opt, "nlSetOpt: option must be a number")) return NULL;
  if (!arg_int(env, argv, argc, 2, &val, "nlSetOpt: value must be a number")) return NULL;
  if (setsockopt(fd, SOL_NETLINK, opt, &val, sizeof(val)) != 0) return throw_errno(env, "setsockopt", errno);
  return make_undefined(env);
}

static napi_value js_nl_send(napi_env env, napi_callback_info info) {
  ARGS(3);
  int32_t fd;
  if (!arg_int(env, argv, argc, 0, &fd, "nlSend: fd must be a number")) return NULL;
  void *data = NULL;
  size_t len = 0;
  bool is_typed = false;
  if (argc < 2 || napi_is_typedarray(env, argv[1], &is_typed) != napi_ok || !is_typed) {
    return throw_type(env, "nlSend: message must be a Uint8Array");
  }
  napi_typedarray_type tt;
  size_t length, offset;
  napi_value ab;
  CHECK(napi_get_typedarray_info(env, argv[1], &tt, &length, &data, &ab, &offset));
  if (tt != napi_uint8_array && tt != napi_uint8_clamped_array && tt != napi_int8_array) {
    return throw_type(env, "nlSend: message must be a Uint8Array");
  }
  len = length;
  uint32_t dest = 0;  // nl_pid 0: the kernel
  if (argc > 2) {
    napi_valuetype t;
    if (napi_typeof(env, argv[2], &t) == napi_ok && t == napi_number) napi_get_value_uint32(env, argv[2], &dest);
  }
  struct sockaddr_nl sa;
  memset(&sa, 0, sizeof(sa));
  sa.nl_family = AF_NETLINK;
  sa.nl_pid = dest;
  ssize_t n;
  do {
    n = sendto(fd, data, len, 0, (struct sockaddr *)&sa, sizeof(sa));
  } while (n < 0 && errno == EINTR);
  if (n < 0) return throw_errno(env, "sendto", errno);
  if ((size_t)n != len) return throw_errno(env, "sendto", EMSGSIZE);
  return make_undefined(env);
}

// Waits until `fd` is ready for `events` or the deadline (ms since now_ms epoch; <0 forever) passes.
// Returns 1 ready, 0 timeout, -1 error (errno set).
static int wait_fd(int fd, short events, int64_t deadline) {
  for (;;) {
    struct pollfd pfd = {.fd = fd, .events = events, .revents = 0};
    int wait = -1;
    if (deadline >= 0) {
      int64_t left = deadline - now_ms();
      wait = left > 0 ? (int)left : 0;
    }
    int pr = poll(&pfd, 1, wait);
    if (pr < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (pr == 0) return 0;
    if (pfd.revents & POLLNVAL) {
      errno = EBADF;
      return -1;
    }
    return 1;
  }
}

#define RECV_STATIC 65536
static _Thread_local unsigned char recv_buf[RECV_STATIC];

static napi_value js_nl_recv(napi_env env, napi_callback_info info) {
  ARGS(2);
  int32_t fd, timeout = -1;
  if (!arg_int(env, argv, argc, 0, &fd, "nlRecv: fd must be a number")) return NULL;
  if (argc > 1) {
    napi_valuetype t;
    if (napi_typeof(env, argv[1], &t) == napi_ok && t == napi_number) napi_get_value_int32(env, argv[1], &timeout);
  }
  int64_t deadline = timeout >= 0 ? now_ms() + timeout : -1;
  for (;;) {
    int ready = wait_fd(fd, POLLIN, deadline);
    if (ready < 0) return throw_errno(env, "poll", errno);
    if (ready == 0) {
      napi_value nul;
      CHECK(napi_get_null(env, &nul));
      return nul;
    }
    // Peek at the datagram's real size so a large message is never truncated.
    ssize_t size;
    do {
      size = recv(fd, recv_buf, RECV_STATIC, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT);
    } while (size < 0 && errno == EINTR);
    if (size < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) continue;  // spurious wake-up
      return throw_errno(env, "recv", errno);
    }
    unsigned char *buf = recv_buf;
    size_t cap = RECV_STATIC;
    if ((size_t)size > RECV_STATIC) {
      buf = malloc((size_t)size);
      if (!buf) return throw_errno(env, "recv", ENOMEM);
      cap = (size_t)size;
    }
    ssize_t n;
    do {
      n = recv(fd, buf, cap, MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
      int e = errno;
      if (buf != recv_buf) free(buf);
      if (e == EAGAIN || e == EWOULDBLOCK) continue;
      return throw_errno(env, "recv", e);
    }
    napi_value out;
    void *dst;
    napi_status st = napi_create_buffer_copy(env, (size_t)n, buf, &dst, &out);
    if (buf != recv_buf) free(buf);
    if (st != napi_ok) return throw_napi_failure(env);
    return out;
  }
}

// ---------------------------------------------------------------------------
// Unix stream sockets (warm-mode service)

static bool unix_addr(napi_env env, napi_value v, struct sockaddr_un *sa, socklen_t *len, const char *what) {
  memset(sa, 0, sizeof(*sa));
  sa->sun_family = AF_UNIX;
  size_t n = 0;
  napi_valuetype t;
  if (napi_typeof(env, v, &t) != napi_ok || t != napi_string) {
    throw_type(env, what);
    return false;
  }
  if (napi_get_value_string_utf8(env, v, sa->sun_path, sizeof(sa->sun_path), &n) != napi_ok) {
    throw_type(env, what);
    return false;
  }
  if (n == 0 || n >= sizeof(sa->sun_path) - 1) {
    throw_errno(env, "bind", ENAMETOOLONG);
    return false;
  }
  *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
  return true;
}

static napi_value js_listen_unix(napi_env env, napi_callback_info info) {
  ARGS(2);
  struct sockaddr_un sa;
  socklen_t len;
  int32_t backlog = 128;
  if (argc < 1 || !unix_addr(env, argv[0], &sa, &len, "listenUnix: path must be a string")) return NULL;
  if (argc > 1 && !arg_int(env, argv, argc, 1, &backlog, "listenUnix: backlog must be a number")) return NULL;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return throw_errno(env, "socket", errno);
  if (bind(fd, (struct sockaddr *)&sa, len) != 0) {
    int e = errno;
    close(fd);
    return throw_errno(env, "bind", e);
  }
  if (listen(fd, backlog) != 0) {
    int e = errno;
    close(fd);
    return throw_errno(env, "listen", e);
  }
  napi_value out;
  CHECK(napi_create_int32(env, fd, &out));
  return out;
}

static napi_value make_cred(napi_env env, napi_value obj, const struct ucred *cred) {
  napi_value v;
  if (napi_create_int32(env, cred->pid, &v) != napi_ok) return NULL;
  set_prop(env, obj, "pid", v);
  if (napi_create_uint32(env, cred->uid, &v) != napi_ok) return NULL;
  set_prop(env, obj, "uid", v);
  if (napi_create_uint32(env, cred->gid, &v) != napi_ok) return NULL;
  set_prop(env, obj, "gid", v);
  return obj;
}


static int64_t deadline_of(int32_t timeout) { return timeout >= 0 ? now_ms() + timeout : -1; }

static napi_value js_accept_unix(napi_env env, napi_callback_info info) {
  ARGS(2);
  int32_t fd, timeout = -1;
  if (!arg_int(env, argv, argc, 0, &fd, "acceptUnix: fd must be a number")) return NULL;
  if (argc > 1 && !arg_int(env, argv, argc, 1, &timeout, "acceptUnix: timeoutMs must be a number")) return NULL;
  int64_t deadline = deadline_of(timeout);
  for (;;) {
    int w = wait_fd(fd, POLLIN, deadline);
    if (w < 0) return throw_errno(env, "poll", errno);
    if (w == 0) {
      napi_value nul;
      CHECK(napi_get_null(env, &nul));
      return nul;
    }
    int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) {
      // the connection went away between poll and accept, or a signal: wait again
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) continue;
      return throw_errno(env, "accept4", errno);
    }
    struct ucred cred;
    socklen_t clen = sizeof(cred);
    if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0) {
      int e = errno;
      close(c);
      return throw_errno(env, "getsockopt(SO_PEERCRED)", e);
    }
    napi_value out, v;
    if (napi_create_object(env, &out) != napi_ok || napi_create_int32(env, c, &v) != napi_ok) {
      close(c);
      return throw_napi_failure(env);
    }
    set_prop(env, out, "fd", v);
    if (!make_cred(env, out, &cred)) {
      close(c);
      return throw_napi_failure(env);
    }
    return out;
  }
}

static napi_value js_connect_unix(napi_env env, napi_callback_info info) {
  ARGS(1);
  struct sockaddr_un sa;
  socklen_t len;
  if (argc < 1 || !unix_addr(env, argv[0], &sa, &len, "connectUnix: path must be a string")) return NULL;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return throw_errno(env, "socket", errno);
  int r;
  do {
    r = connect(fd, (struct sockaddr *)&sa, len);
  } while (r < 0 && errno == EINTR);
  if (r != 0) {
    int e = errno;
    close(fd);
    return throw_errno(env, "connect", e);
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  napi_value out;
  CHECK(napi_create_int32(env, fd, &out));
  return out;
}

static napi_value js_peer_cred(napi_env env, napi_callback_info info) {
  ARGS(1);
  int32_t fd;
  if (!arg_int(env, argv, argc, 0, &fd, "peerCred: fd must be a number")) return NULL;
  struct ucred cred;
  socklen_t clen = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0) return throw_errno(env, "getsockopt(SO_PEERCRED)", errno);
  napi_value out;
  CHECK(napi_create_object(env, &out));
  if (!make_cred(env, out, &cred)) return throw_napi_failure(env);
  return out;
}

#define MAX_PASSED_FDS 8

static napi_value js_recv_msg(napi_env env, napi_callback_info info) {
  ARGS(3);
  int32_t fd, max_len, timeout = -1;
  if (!arg_int(env, argv, argc, 0, &fd, "recvMsg: fd must be a number")) return NULL;
  if (!arg_int(env, argv, argc, 1, &max_len, "recvMsg: maxLen must be a number")) return NULL;
  if (argc > 2 && !arg_int(env, argv, argc, 2, &timeout, "recvMsg: timeoutMs must be a number")) return NULL;
  if (max_len <= 0) return throw_type(env, "recvMsg: maxLen must be positive");
  int64_t deadline = deadline_of(timeout);
  unsigned char *buf = max_len <= RECV_STATIC ? recv_buf : malloc((size_t)max_len);
  if (!buf) return throw_errno(env, "recvmsg", ENOMEM);
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int) * MAX_PASSED_FDS)];
  } control;
  ssize_t n;
  struct msghdr msg;
  for (;;) {
    int w = wait_fd(fd, POLLIN, deadline);
    if (w <= 0) {
      int e = errno;
      if (buf != recv_buf) free(buf);
      if (w < 0) return throw_errno(env, "poll", e);
      napi_value nul;
      CHECK(napi_get_null(env, &nul));
      return nul;
    }
    struct iovec iov = {.iov_base = buf, .iov_len = (size_t)max_len};
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof(control.buf);
    n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    break;
  }
  if (n < 0) {
    int e = errno;
    if (buf != recv_buf) free(buf);
    return throw_errno(env, "recvmsg", e);
  }
  napi_value out, data, fds;
  int nfds = 0;
  int passed[MAX_PASSED_FDS];
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    int *p = (int *)CMSG_DATA(c);
    for (size_t i = 0; i < count; i++) {
      if (nfds < MAX_PASSED_FDS) passed[nfds++] = p[i];
      else close(p[i]);
    }
  }
  void *dst;
  napi_status st = napi_create_buffer_copy(env, (size_t)n, buf, &dst, &data);
  if (buf != recv_buf) free(buf);
  if (st != napi_ok || napi_create_array_with_length(env, (size_t)nfds, &fds) != napi_ok ||
      napi_create_object(env, &out) != napi_ok) {
    for (int i = 0; i < nfds; i++) close(passed[i]);
    return throw_napi_failure(env);
  }
  for (int i = 0; i < nfds; i++) {
    napi_value v;
    if (napi_create_int32(env, passed[i], &v) == napi_ok) napi_set_element(env, fds, (uint32_t)i, v);
  }
  set_prop(env, out, "data", data);
  set_prop(env, out, "fds", fds);
  return out;
}

static napi_value js_send_all(napi_env env, napi_callback_info info) {
  ARGS(4);
  int32_t fd, timeout = -1;
  if (!arg_int(env, argv, argc, 0, &fd, "sendAll: fd must be a number")) return NULL;
  bool is_typed = false;
  if (argc < 2 || napi_is_typedarray(env, argv[1], &is_typed) != napi_ok || !is_typed) {
    return throw_type(env, "sendAll: data must be a Uint8Array");
  }
  napi_typedarray_type tt;
  size_t length, offset;
  napi_value ab;
  void *data = NULL;
  CHECK(napi_get_typedarray_info(env, argv[1], &tt, &length, &data, &ab, &offset));
  if (argc > 2 && !arg_int(env, argv, argc, 2, &timeout, "sendAll: timeoutMs must be a number")) return NULL;
  int fds[MAX_PASSED_FDS];
  uint32_t nfds = 0;
  if (argc > 3) {
    bool is_arr = false;
    if (napi_is_array(env, argv[3], &is_arr) == napi_ok && is_arr) {
      napi_get_array_length(env, argv[3], &nfds);
      if (nfds > MAX_PASSED_FDS) return throw_type(env, "sendAll: too many descriptors");
      for (uint32_t i = 0; i < nfds; i++) {
        napi_value v;
        int32_t x;
        if (napi_get_element(env, argv[3], i, &v) != napi_ok || napi_get_value_int32(env, v, &x) != napi_ok) {
          return throw_type(env, "sendAll: descriptors must be numbers");
        }
        fds[i] = x;
      }
    }
  }
  int64_t deadline = deadline_of(timeout);
  size_t off = 0;
  bool fds_sent = nfds == 0;
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int) * MAX_PASSED_FDS)];
  } control;
  while (off < length || !fds_sent) {
    struct iovec iov = {.iov_base = (char *)data + off, .iov_len = length - off};
    struct msghdr msg;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (!fds_sent) {
      memset(&control, 0, sizeof(control));
      msg.msg_control = control.buf;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
      struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
      memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
    }
    ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        int w = wait_fd(fd, POLLOUT, deadline);
        if (w < 0) return throw_errno(env, "poll", errno);
        if (w == 0) return throw_errno(env, "sendmsg", ETIMEDOUT);
        continue;
      }
      return throw_errno(env, "sendmsg", errno);
    }
    fds_sent = true;
    off += (size_t)n;
  }
  return make_undefined(env);
}

static napi_value js_set_cloexec(napi_env env, napi_callback_info info) {
  ARGS(2);
  int32_t fd;
  if (!arg_int(env, argv, argc, 0, &fd, "setCloexec: fd must be a number")) return NULL;
  bool on = true;
  if (argc > 1) napi_get_value_bool(env, argv[1], &on);
  int fl = fcntl(fd, F_GETFD);
  if (fl < 0) return throw_errno(env, "fcntl", errno);
  if (fcntl(fd, F_SETFD, on ? (fl | FD_CLOEXEC) : (fl & ~FD_CLOEXEC)) < 0) return throw_errno(env, "fcntl", errno);
  return make_undefined(env);
}

// BOOTP chaddr filter: for a UDP socket the filter sees the datagram from the UDP header (8 bytes), so the BOOTP
// chaddr (payload offset 28) is at 36..41.
static int attach_chaddr_filter(int fd, const uint8_t *mac) {
  uint32_t hi = ((uint32_t)mac[0] << 24) | ((uint32_t)mac[1] << 16) | ((uint32_t)mac[2] << 8) | mac[3];
  uint32_t lo = ((uint32_t)mac[4] << 8) | mac[5];
  struct sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 36),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, hi, 0, 3),
      BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 40),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, lo, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, 0xffff),
      BPF_STMT(BPF_RET | BPF_K, 0),
  };
  struct sock_fprog prog = {.len = sizeof(code) / sizeof(code[0]), .filter = code};
  return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog));
}

static napi_value js_udp_open_device(napi_env env, napi_callback_info info) {
  ARGS(3);
  char ifname[IFNAMSIZ];
  size_t n = 0;
  int32_t port;
  if (argc < 1 || napi_get_value_string_utf8(env, argv[0], NULL, 0, &n) != napi_ok)
    return throw_type(env, "udpOpenDevice: ifname must be a string");
  if (n == 0 || n >= IFNAMSIZ) return throw_errno(env, "setsockopt(SO_BINDTODEVICE)", EINVAL);
  CHECK(napi_get_value_string_utf8(env, argv[0], ifname, sizeof(ifname), &n));
  if (!arg_int(env, argv, argc, 1, &port, "udpOpenDevice: port must be a number")) return NULL;
  if (port < 0 || port > 65535) return throw_errno(env, "bind", EINVAL);
  uint8_t *mac = NULL;
  if (argc > 2) {
    napi_valuetype t;
    CHECK(napi_typeof(env, argv[2], &t));
    if (t != napi_undefined && t != napi_null) {
      bool is_typed = false;
      napi_typedarray_type tt;
      size_t length, offset;
      napi_value ab;
      void *data = NULL;
      if (napi_is_typedarray(env, argv[2], &is_typed) != napi_ok || !is_typed ||
          napi_get_typedarray_info(env, argv[2], &tt, &length, &data, &ab, &offset) != napi_ok ||
          tt != napi_uint8_array || length != 6)
        return throw_type(env, "udpOpenDevice: chaddr must be a Uint8Array of 6 bytes");
      mac = data;
    }
  }
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return throw_errno(env, "socket", errno);
  int one = 1;
  const char *what = NULL;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) what = "setsockopt(SO_REUSEADDR)";
  else if (setsockopt(fd, SOL_SOCKET, SO_BROADCAST, &one, sizeof(one)) != 0) what = "setsockopt(SO_BROADCAST)";
  else if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, ifname, (socklen_t)(n + 1)) != 0)
    what = "setsockopt(SO_BINDTODEVICE)";
  else if (mac && attach_chaddr_filter(fd, mac) != 0)
    what = "setsockopt(SO_ATTACH_FILTER)";
  if (!what) {
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) what = "bind";
  }
  if (what) {
    int e = errno;
    close(fd);
    return throw_errno(env, what, e);
  }
  napi_value out;
  CHECK(napi_create_int32(env, fd, &out));
  return out;
}

static napi_value js_netns_new(napi_env env, napi_callback_info info) {
  (void)info;
  int orig = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (orig < 0) return throw_errno(env, "open(/proc/thread-self/ns/net)", errno);
  if (unshare(CLONE_NEWNET) != 0) {
    int e = errno;
    close(orig);
    return throw_errno(env, "unshare", e);
  }
  int fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  int e = errno;
  if (setns(orig, CLONE_NEWNET) != 0) {
    // the thread would stay in the new namespace: never return normally from here
    abort();
  }
  close(orig);
  if (fd < 0) return throw_errno(env, "open(/proc/thread-self/ns/net)", e);
  napi_value out;
  CHECK(napi_create_int32(env, fd, &out));
  return out;
}

static napi_value js_tun_create(napi_env env, napi_callback_info info) {
  ARGS(4);
  char name[IFNAMSIZ];
  size_t n = 0;
  int32_t flags, owner, group;
  if (argc < 1 || napi_get_value_string_utf8(env, argv[0], NULL, 0, &n) != napi_ok)
    return throw_type(env, "tunCreate: name must be a string");
  if (n >= IFNAMSIZ) return throw_errno(env, "ioctl(TUNSETIFF)", EINVAL);
  CHECK(napi_get_value_string_utf8(env, argv[0], name, sizeof(name), &n));
  if (!arg_int(env, argv, argc, 1, &flags, "tunCreate: flags must be a number")) return NULL;
  if (!arg_int(env, argv, argc, 2, &owner, "tunCreate: owner must be a number")) return NULL;
  if (!arg_int(env, argv, argc, 3, &group, "tunCreate: group must be a number")) return NULL;
  int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
  if (fd < 0) return throw_errno(env, "open(/dev/net/tun)", errno);
  struct ifreq ifr;
  memset(&ifr, 0, sizeof(ifr));
  memcpy(ifr.ifr_name, name, n);
  ifr.ifr_flags = (short)flags;
  const char *what = NULL;
  if (ioctl(fd, TUNSETIFF, &ifr) != 0) what = "ioctl(TUNSETIFF)";
  else if (owner >= 0 && ioctl(fd, TUNSETOWNER, (unsigned long)owner) != 0) what = "ioctl(TUNSETOWNER)";
  else if (group >= 0 && ioctl(fd, TUNSETGROUP, (unsigned long)group) != 0) what = "ioctl(TUNSETGROUP)";
  else if (ioctl(fd, TUNSETPERSIST, 1UL) != 0) what = "ioctl(TUNSETPERSIST)";
  int e = errno;
  close(fd);  // a device made persistent stays; one that failed before goes with the descriptor
  if (what) return throw_errno(env, what, e);
  napi_value out;
  CHECK(napi_create_string_utf8(env, ifr.ifr_name, strnlen(ifr.ifr_name, IFNAMSIZ), &out));
  return out;
}

static char *dup_string(napi_env env, napi_value v) {
  size_t n = 0;
  if (napi_get_value_string_utf8(env, v, NULL, 0, &n) != napi_ok) return NULL;
  char *s = malloc(n + 1);
  if (!s) return NULL;
  if (napi_get_value_string_utf8(env, v, s, n + 1, &n) != napi_ok) {
    free(s);
    return NULL;
  }
  return s;
}

// NULL-terminated copy of a JS string array (NULL on error).
static char **dup_string_array(napi_env env, napi_value arr) {
  bool is_arr = false;
  uint32_t len = 0;
  if (napi_is_array(env, arr, &is_arr) != napi_ok || !is_arr || napi_get_array_length(env, arr, &len) != napi_ok) {
    return NULL;
  }
  char **out = calloc((size_t)len + 1, sizeof(char *));
  if (!out) return NULL;
  for (uint32_t i = 0; i < len; i++) {
    napi_value v;
    if (napi_get_element(env, arr, i, &v) != napi_ok || !(out[i] = dup_string(env, v))) {
      for (uint32_t j = 0; j < i; j++) free(out[j]);
      free(out);
      return NULL;
    }
  }
  return out;
}

static void free_string_array(char **a) {
  if (!a) return;
  for (char **p = a; *p; p++) free(*p);
  free(a);
}

// ---------------------------------------------------------------------------
// watchdog thread: replaces the process image when the main thread overruns a deadline

static pthread_mutex_t wd_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wd_cv;
static bool wd_started = false;
static int64_t wd_deadline = -1;  // now_ms() time; -1: disarmed
static char *wd_path = NULL;
static char **wd_argv = NULL;
static char **wd_envp = NULL;
static int wd_keep = -1;

static volatile sig_atomic_t wd_stop_signalled = 0;
static char *wd_stop_entry = NULL;
static struct sigaction wd_prev_term, wd_prev_int;

static void wd_on_stop_signal(int sig, siginfo_t *info, void *ctx) {
  wd_stop_signalled = 1;
  struct sigaction *prev = sig == SIGTERM ? &wd_prev_term : &wd_prev_int;
  if (prev->sa_flags & SA_SIGINFO) {
    if (prev->sa_sigaction) prev->sa_sigaction(sig, info, ctx);
  } else if (prev->sa_handler != SIG_IGN && prev->sa_handler != SIG_DFL && prev->sa_handler) {
    prev->sa_handler(sig);
  }
}

static void replace_image(const char *path, char **args, char **envp, int keep) {
  // the new image keeps this process's stdin, stdout and stderr (Node marks them close-on-exec)
  for (int fd = 0; fd < 3; fd++) {
    int fl = fcntl(fd, F_GETFD);
    if (fl >= 0 && (fl & FD_CLOEXEC)) fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC);
  }
  if (keep >= 0) {
    if (keep != 3 && dup2(keep, 3) < 0) return;
    int fl = fcntl(3, F_GETFD);
    if (fl >= 0) fcntl(3, F_SETFD, fl & ~FD_CLOEXEC);
  }
  execve(path, args, envp);
}

static void *wd_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&wd_mu);
  for (;;) {
    if (wd_deadline < 0) {
      pthread_cond_wait(&wd_cv, &wd_mu);
      continue;
    }
    int64_t now = now_ms();
    if (now >= wd_deadline) break;
    struct timespec ts;
    ts.tv_sec = (time_t)(wd_deadline / 1000);
    ts.tv_nsec = (long)(wd_deadline % 1000) * 1000000L;
    pthread_cond_timedwait(&wd_cv, &wd_mu, &ts);
  }
  static const char msg[] = "cnikit: watchdog: the main thread overran its deadline; re-executing\n";
  ssize_t w = write(2, msg, sizeof(msg) - 1);
  (void)w;
  char **envp = wd_envp;
  if (wd_stop_signalled && wd_stop_entry && envp) {
    // the entry appended (a stack copy of the array: no allocation in this thread)
    size_t n = 0;
    while (envp[n]) n++;
    char **with = alloca((n + 2) * sizeof(char *));
    memcpy(with, envp, n * sizeof(char *));
    with[n] = wd_stop_entry;
    with[n + 1] = NULL;
    envp = with;
  }
  replace_image(wd_path, wd_argv, envp, wd_keep);
  _exit(70);
  return NULL;
}

// The arguments of an exec request (watchdogSet, execReplace): path, argv, envp, optional descriptor to keep.
// Returns false with a JavaScript exception pending (nothing allocated then).
typedef struct {
  char *path;
  char **argv;
  char **envp;
  int32_t keep;
} exec_args;

static bool parse_exec_args(napi_env env, napi_value *argv, size_t argc, const char *what, exec_args *out) {
  char msg[128];
  out->keep = -1;
  if (argc < 3) {
    snprintf(msg, sizeof(msg), "%s: path, argv and envp are required", what);
    throw_type(env, msg);
    return false;
  }
  snprintf(msg, sizeof(msg), "%s: keepFd must be a number", what);
  if (argc > 3 && !arg_int(env, argv, argc, 3, &out->keep, msg)) return false;
  out->path = dup_string(env, argv[0]);
  out->argv = dup_string_array(env, argv[1]);
  out->envp = dup_string_array(env, argv[2]);
  if (!out->path || !out->argv || !out->envp) {
    free(out->path);
    free_string_array(out->argv);
    free_string_array(out->envp);
    snprintf(msg, sizeof(msg), "%s: path must be a string, argv and envp arrays of strings", what);
    throw_type(env, msg);
    return false;
  }
  return true;
}

static napi_value js_watchdog_set(napi_env env, napi_callback_info info) {
  ARGS(4);
  exec_args a;
  if (!parse_exec_args(env, argv, argc, "watchdogSet", &a)) return NULL;
  char *path = a.path;
  char **args = a.argv;
  char **envp = a.envp;
  int32_t keep = a.keep;
  pthread_mutex_lock(&wd_mu);
  free(wd_path);
  free_string_array(wd_argv);
  free_string_array(wd_envp);
  wd_path = path;
  wd_argv = args;
  wd_envp = envp;
  wd_keep = keep;
  int err = 0;
  if (!wd_started) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&wd_cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_attr_t ta;
    pthread_attr_init(&ta);
    pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&ta, 64 * 1024);
    pthread_t t;
    err = pthread_create(&t, &ta, wd_main, NULL);
    pthread_attr_destroy(&ta);
    if (err == 0) wd_started = true;
  }
  pthread_mutex_unlock(&wd_mu);
  if (err != 0) return throw_errno(env, "pthread_create", err);
  return make_undefined(env);
}

static napi_value js_watchdog_arm(napi_env env, napi_callback_info info) {
  ARGS(1);
  int32_t timeout;
  if (!arg_int(env, argv, argc, 0, &timeout, "watchdogArm: timeoutMs must be a number")) return NULL;
  pthread_mutex_lock(&wd_mu);
  bool ok = wd_started;
  if (ok) {
    wd_deadline = now_ms() + (timeout > 0 ? timeout : 0);
    pthread_cond_signal(&wd_cv);
  }
  pthread_mutex_unlock(&wd_mu);
  if (!ok) return throw_errno(env, "watchdogArm", EINVAL);
  return make_undefined(env);
}

static napi_value js_watchdog_on_stop_signal(napi_env env, napi_callback_info info) {
  ARGS(1);
  char *entry = argc >= 1 ? dup_string(env, argv[0]) : NULL;
  if (!entry) return throw_type(env, "watchdogOnStopSignal: entry must be a string");
  pthread_mutex_lock(&wd_mu);
  bool first = wd_stop_entry == NULL;
  free(wd_stop_entry);
  wd_stop_entry = entry;
  pthread_mutex_unlock(&wd_mu);
  if (first) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = wd_on_stop_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, &wd_prev_term) != 0) return throw_errno(env, "sigaction", errno);
    if (sigaction(SIGINT, &sa, &wd_prev_int) != 0) return throw_errno(env, "sigaction", errno);
  }
  return make_undefined(env);
}

static napi_value js_watchdog_disarm(napi_env env, napi_callback_info info) {
  pthread_mutex_lock(&wd_mu);
  wd_deadline = -1;
  if (wd_started) pthread_cond_signal(&wd_cv);
  pthread_mutex_unlock(&wd_mu);
  return make_undefined(env);
}

static napi_value js_exec_replace(napi_env env, napi_callback_info info) {
  ARGS(4);
  exec_args a;
  if (!parse_exec_args(env, argv, argc, "execReplace", &a)) return NULL;
  char *path = a.path;
  char **args = a.argv;
  char **envp = a.envp;
  int32_t keep = a.keep;
  replace_image(path, args, envp, keep);
  int e = errno;
  free(path);
  free_string_array(args);
  free_string_array(envp);
  return throw_errno(env, "execve", e);
}

// ---------------------------------------------------------------------------
// errno helpers

static napi_value js_errno_name(napi_env env, napi_callback_info info) {
  ARGS(1);
  int32_t no;
  if (!arg_int(env, argv, argc, 0, &no, "errnoName: errno must be a number")) return NULL;
  char buf[16];
  napi_value out;
  CHECK(napi_create_string_utf8(env, errno_name(no < 0 ? -no : no, buf, sizeof(buf)), NAPI_AUTO_LENGTH, &out));
  return out;
}

static napi_value js_errno_message(napi_env env, napi_callback_info info) {
  ARGS(1);
  int32_t no;
  if (!arg_int(env, argv, argc, 0, &no, "errnoMessage: errno must be a number")) return NULL;
  char buf[256];
  errno_message(no < 0 ? -no : no, buf, sizeof(buf));
  napi_value out;
  CHECK(napi_create_string_utf8(env, buf, NAPI_AUTO_LENGTH, &out));
  return out;
}

// ---------------------------------------------------------------------------

NAPI_MODULE_INIT() {
  napi_property_descriptor props[] = {
      {"setns", NULL, js_setns, NULL, NULL, NULL, napi_enumerable, NULL},
      {"nsType", NULL, js_ns_type, NULL, NULL, NULL, napi_enumerable, NULL},
      {"fsMagic", NULL, js_fs_magic, NULL, NULL, NULL, napi_enumerable, NULL},
      {"flock", NULL, js_flock, NULL, NULL, NULL, napi_enumerable, NULL},
      {"gettid", NULL, js_gettid, NULL, NULL, NULL, napi_enumerable, NULL},
      {"closeFd", NULL, js_close, NULL, NULL, NULL, napi_enumerable, NULL},
      {"closeFdLater", NULL, js_close_later, NULL, NULL, NULL, napi_enumerable, NULL},
      {"nlOpen", NULL, js_nl_open, NULL, NULL, NULL, napi_enumerable, NULL},
      {"nlSetOpt", NULL, js_nl_set_opt, NULL, NULL, NULL, napi_enumerable, NULL},
      {"nlSend", NULL, js_nl_send, NULL, NULL, NULL, napi_enumerable, NULL},
      {"nlRecv", NULL, js_nl_recv, NULL, NULL, NULL, napi_enumerable, NULL},
      {"errnoName", NULL, js_errno_name, NULL, NULL, NULL, napi_enumerable, NULL},
      {"errnoMessage", NULL, js_errno_message, NULL, NULL, NULL, napi_enumerable, NULL},
      {"listenUnix", NULL, js_listen_unix, NULL, NULL, NULL, napi_enumerable, NULL},
      {"acceptUnix", NULL, js_accept_unix, NULL, NULL, NULL, napi_enumerable, NULL},
      {"connectUnix", NULL, js_connect_unix, NULL, NULL, NULL, napi_enumerable, NULL},
      {"peerCred", NULL, js_peer_cred, NULL, NULL, NULL, napi_enumerable, NULL},
      {"recvMsg", NULL, js_recv_msg, NULL, NULL, NULL, napi_enumerable, NULL},
      {"sendAll", NULL, js_send_all, NULL, NULL, NULL, napi_enumerable, NULL},
      {"setCloexec", NULL, js_set_cloexec, NULL, NULL, NULL, napi_enumerable, NULL},
      {"watchdogSet", NULL, js_watchdog_set, NULL, NULL, NULL, napi_enumerable, NULL},
      {"watchdogArm", NULL, js_watchdog_arm, NULL, NULL, NULL, napi_enumerable, NULL},
      {"watchdogDisarm", NULL, js_watchdog_disarm, NULL, NULL, NULL, napi_enumerable, NULL},
      {"watchdogOnStopSignal", NULL, js_watchdog_on_stop_signal, NULL, NULL, NULL, napi_enumerable, NULL},
      {"execReplace", NULL, js_exec_replace, NULL, NULL, NULL, napi_enumerable, NULL},
      {"udpOpenDevice", NULL, js_udp_open_device, NULL, NULL, NULL, napi_enumerable, NULL},
      {"netnsNew", NULL, js_netns_new, NULL, NULL, NULL, napi_enumerable, NULL},
      {"tunCreate", NULL, js_tun_create, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  if (napi_define_properties(env, exports, sizeof(props) / sizeof(props[0]), props) != napi_ok) return NULL;
  return exports;
}
