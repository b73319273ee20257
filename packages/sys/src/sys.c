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
//   errnoName(errno) / errnoMessage(errno) -> string
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/nsfs.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
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
    struct pollfd pfd = {.fd = fd, .events = POLLIN, .revents = 0};
    int wait = -1;
    if (deadline >= 0) {
      int64_t left = deadline - now_ms();
      wait = left > 0 ? (int)left : 0;
    }
    int pr = poll(&pfd, 1, wait);
    if (pr < 0) {
      if (errno == EINTR) continue;
      return throw_errno(env, "poll", errno);
    }
    if (pr == 0) {
      napi_value nul;
      CHECK(napi_get_null(env, &nul));
      return nul;
    }
    if (pfd.revents & POLLNVAL) return throw_errno(env, "poll", EBADF);
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
      {"nlOpen", NULL, js_nl_open, NULL, NULL, NULL, napi_enumerable, NULL},
      {"nlSetOpt", NULL, js_nl_set_opt, NULL, NULL, NULL, napi_enumerable, NULL},
      {"nlSend", NULL, js_nl_send, NULL, NULL, NULL, napi_enumerable, NULL},
      {"nlRecv", NULL, js_nl_recv, NULL, NULL, NULL, napi_enumerable, NULL},
      {"errnoName", NULL, js_errno_name, NULL, NULL, NULL, napi_enumerable, NULL},
      {"errnoMessage", NULL, js_errno_message, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  if (napi_define_properties(env, exports, sizeof(props) / sizeof(props[0]), props) != napi_ok) return NULL;
  return exports;
}
