"""The egress guard for a `--worker-cmd` that is not Python: a preloaded C library (`LD_PRELOAD`) with the
rules of `killpoint.env.egress`, for the program and everything it starts that inherits its environment.

A Python worker is guarded by an audit hook (killpoint.env.egress); any other program (node, a shell
script, another interpreter) cannot be, so it was run unguarded. This library interposes libc's
`getaddrinfo`, `connect`, `sendto` and `sendmsg`, and applies the same rules before any packet leaves:

1. Off unless `egress.ALLOW_VAR` is set and not `*` (as the Python guard). The hosts it names are resolved
   once, on the first call that needs them, through libc's own resolver.
2. A name is allowed if it is empty, `localhost` or `*.localhost`, this machine's host name, an address
   allowed by 3, or one of the allowed names (case-insensitive). Any other name is refused before its DNS
   query: `getaddrinfo` returns `EAI_FAIL`.
3. An address is allowed if it is not IPv4 or IPv6 (a unix socket), loopback (127/8, ::1, a v4-mapped
   loopback), unspecified (0.0.0.0, ::: this machine), or an address of an allowed host. Any other is
   refused: `connect`, `sendto` or `sendmsg` fails with `EACCES`.
4. Each refusal writes `egress.MARKER` HOST:PORT to stderr (the incarnation's log) and sends an
   `egress.blocked` note (host, port, call site: the program and the call) to the harness over
   `KILLPOINT_SOCKET`, as the Python guard does; the `no_egress` checker fails the run.

What it cannot reach: a statically linked program (Go's default build: `LD_PRELOAD` is never read), a
program that makes its system calls itself, and a child started with an environment of its own (no
`LD_PRELOAD`). `static_program` tells the first apart, so the session can say so.
"""

from __future__ import annotations

import os
import shutil
import struct

from killpoint.env import cshim, egress

SOURCE = r"""
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_NAMES 64
#define MAX_ADDRS 256

static int (*real_connect)(int, const struct sockaddr *, socklen_t);
static int (*real_getaddrinfo)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
static ssize_t (*real_sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
static ssize_t (*real_sendmsg)(int, const struct msghdr *, int);

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static int ready;
static int guarded;
static char names[MAX_NAMES][256];
static int n_names;
static struct sockaddr_storage addrs[MAX_ADDRS];
static int n_addrs;
static char self_name[256];
static __thread int inside;

static void add_addresses(const char *name) {
    struct addrinfo hints, *res = NULL, *ai;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (real_getaddrinfo(name, NULL, &hints, &res) != 0) return;
    for (ai = res; ai && n_addrs < MAX_ADDRS; ai = ai->ai_next)
        if (ai->ai_addrlen <= sizeof(struct sockaddr_storage))
            memcpy(&addrs[n_addrs++], ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(res);
}

static void init(void) {
    inside = 1;  /* an NSS module resolving the allowed names may call connect: let it through, no re-entry */
    real_connect = dlsym(RTLD_NEXT, "connect");
    real_getaddrinfo = dlsym(RTLD_NEXT, "getaddrinfo");
    real_sendto = dlsym(RTLD_NEXT, "sendto");
    real_sendmsg = dlsym(RTLD_NEXT, "sendmsg");
    const char *spec = getenv("@ALLOW_VAR@");
    if (spec == NULL || strcmp(spec, "*") == 0) { inside = 0; return; }
    guarded = 1;
    if (gethostname(self_name, sizeof self_name - 1) != 0) self_name[0] = 0;
    char copy[4096], *save = NULL, *tok;
    strncpy(copy, spec, sizeof copy - 1);
    copy[sizeof copy - 1] = 0;
    for (tok = strtok_r(copy, ",", &save); tok && n_names < MAX_NAMES; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ') tok++;
        size_t len = strlen(tok);
        while (len && tok[len - 1] == ' ') tok[--len] = 0;
        if (!len || len >= sizeof names[0]) continue;
        strcpy(names[n_names++], tok);
        add_addresses(tok);
    }
    inside = 0;
}

/* init once; a call made by init itself (inside) does not wait for it, nor does it check anything */
static void ensure(void) {
    if (__atomic_load_n(&ready, __ATOMIC_ACQUIRE) || inside) return;
    pthread_mutex_lock(&init_lock);
    if (!ready) {
        init();
        __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&init_lock);
}

static int v4_open(const struct in_addr *a) {
    unsigned long h = ntohl(a->s_addr);
    return (h >> 24) == 127 || h == 0;
}

static int same_address(const struct sockaddr *sa, const struct sockaddr_storage *b) {
    if (sa->sa_family != b->ss_family) return 0;
    if (sa->sa_family == AF_INET)
        return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    return memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr,
                  sizeof(struct in6_addr)) == 0;
}

static int address_allowed(const struct sockaddr *sa) {
    if (sa == NULL || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)) return 1;
    if (sa->sa_family == AF_INET && v4_open(&((const struct sockaddr_in *)sa)->sin_addr)) return 1;
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a) || IN6_IS_ADDR_UNSPECIFIED(a)) return 1;
        if (IN6_IS_ADDR_V4MAPPED(a)) {
            struct in_addr v4;
            memcpy(&v4, &a->s6_addr[12], 4);
            if (v4_open(&v4)) return 1;
            struct sockaddr_in as4;
            memset(&as4, 0, sizeof as4);
            as4.sin_family = AF_INET;
            as4.sin_addr = v4;
            for (int i = 0; i < n_addrs; i++)
                if (same_address((const struct sockaddr *)&as4, &addrs[i])) return 1;
        }
    }
    for (int i = 0; i < n_addrs; i++)
        if (same_address(sa, &addrs[i])) return 1;
    return 0;
}

static int name_allowed(const char *node) {
    size_t len = strlen(node);
    if (len == 0 || strcasecmp(node, "localhost") == 0) return 1;
    if (len > 10 && strcasecmp(node + len - 10, ".localhost") == 0) return 1;
    if (self_name[0] && strcasecmp(node, self_name) == 0) return 1;
    for (int i = 0; i < n_names; i++)
        if (strcasecmp(node, names[i]) == 0) return 1;
    struct sockaddr_in6 a6;
    struct sockaddr_in a4;
    char bare[256];
    strncpy(bare, node[0] == '[' ? node + 1 : node, sizeof bare - 1);
    bare[sizeof bare - 1] = 0;
    char *cut = strpbrk(bare, "]%");
    if (cut) *cut = 0;
    memset(&a4, 0, sizeof a4);
    memset(&a6, 0, sizeof a6);
    if (inet_pton(AF_INET, bare, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        return address_allowed((struct sockaddr *)&a4);
    }
    if (inet_pton(AF_INET6, bare, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        return address_allowed((struct sockaddr *)&a6);
    }
    return 0;
}

static void json_string(char *out, size_t size, const char *s) {
    size_t n = 0;
    for (; *s && n + 7 < size; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { out[n++] = '\\'; out[n++] = c; }
        else if (c < 0x20) n += snprintf(out + n, size - n, "\\u%04x", c);
        else out[n++] = c;
    }
    out[n] = 0;
}

static void report(const char *host, const char *port, const char *call) {
    int saved = errno;
    char exe[512], site[600], line[1024];
    ssize_t got = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[got > 0 ? got : 0] = 0;
    snprintf(site, sizeof site, "%s in %s", call, got > 0 ? exe : "?");
    int len = snprintf(line, sizeof line, "@MARKER@ %s:%s from %s\n", host, port, site);
    if (len > 0) { ssize_t w = write(2, line, (size_t)len < sizeof line ? (size_t)len : sizeof line - 1); (void)w; }
    const char *path = getenv("KILLPOINT_SOCKET"), *run = getenv("KILLPOINT_RUN_ID");
    const char *inc = getenv("KILLPOINT_INCARNATION");
    if (path && run && strlen(path) < sizeof(((struct sockaddr_un *)0)->sun_path)) {
        char jh[600], jr[600], ji[600], js[1300], note[4096];
        json_string(jh, sizeof jh, host);
        json_string(jr, sizeof jr, run);
        json_string(ji, sizeof ji, inc ? inc : "");
        json_string(js, sizeof js, site);
        char *end = NULL;
        long number = strtol(port, &end, 10);
        char jp[64];
        if (end && *end == 0 && *port) snprintf(jp, sizeof jp, "%ld", number);
        else snprintf(jp, sizeof jp, "\"%s\"", port);
        int n = snprintf(note, sizeof note, "{\"v\": 1, \"kind\": \"note\", \"note\": \"egress.blocked\", "
                         "\"run_id\": \"%s\", \"host\": \"%s\", \"port\": %s, \"site\": \"%s\", \"pid\": %d, "
                         "\"incarnation\": \"%s\"}\n", jr, jh, jp, js, (int)getpid(), ji);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0) {
            struct sockaddr_un un;
            memset(&un, 0, sizeof un);
            un.sun_family = AF_UNIX;
            strcpy(un.sun_path, path);
            if (n > 0 && real_connect(fd, (struct sockaddr *)&un, sizeof un) == 0) {
                ssize_t w = write(fd, note, (size_t)n < sizeof note ? (size_t)n : sizeof note - 1);
                (void)w;
            }
            close(fd);
        }
    }
    errno = saved;
}

static void describe(const struct sockaddr *sa, char *host, size_t hsize, char *port, size_t psize) {
    if (sa->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, host, hsize);
        snprintf(port, psize, "%u", ntohs(((const struct sockaddr_in *)sa)->sin_port));
    } else {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, host, hsize);
        snprintf(port, psize, "%u", ntohs(((const struct sockaddr_in6 *)sa)->sin6_port));
    }
}

/* every caller has called ensure() */
static int refused(const struct sockaddr *sa, const char *call) {
    if (!guarded || inside || address_allowed(sa)) return 0;
    char host[INET6_ADDRSTRLEN], port[16];
    describe(sa, host, sizeof host, port, sizeof port);
    report(host, port, call);
    return 1;
}

int connect(int fd, const struct sockaddr *addr, socklen_t len) {
    ensure();
    if (refused(addr, "connect")) { errno = EACCES; return -1; }
    return real_connect(fd, addr, len);
}

ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *addr, socklen_t alen) {
    ensure();
    if (addr && refused(addr, "sendto")) { errno = EACCES; return -1; }
    return real_sendto(fd, buf, len, flags, addr, alen);
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags) {
    ensure();
    if (msg && msg->msg_name && refused((const struct sockaddr *)msg->msg_name, "sendmsg")) {
        errno = EACCES;
        return -1;
    }
    return real_sendmsg(fd, msg, flags);
}

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **res) {
    ensure();
    if (guarded && !inside && node && !name_allowed(node)) {
        report(node, service ? service : "", "getaddrinfo");
        return EAI_FAIL;
    }
    return real_getaddrinfo(node, service, hints, res);
}
""".replace("@ALLOW_VAR@", egress.ALLOW_VAR).replace("@MARKER@", egress.MARKER)
"""The library's C source (the flow of the module docstring), with the Python guard's variable and log line."""


def library() -> str | None:
    """The built library's path, or None where no C compiler builds it (`cshim.build`)."""
    return cshim.build("egress-guard", SOURCE)


def preload(env: dict[str, str], lib: str) -> dict[str, str]:
    """`env` with `lib` first in its `LD_PRELOAD` (before libfaketime's, when a clock fault put it there)."""
    rest = env.get("LD_PRELOAD", "").strip()
    return {**env, "LD_PRELOAD": f"{lib} {rest}" if rest else lib}


def static_program(argv0: str) -> bool:
    """Whether the program `argv0` names (a path, or a name on PATH) is an ELF file without an interpreter
    (`PT_INTERP`): statically linked, so a preloaded library never loads in it. A script, a dynamic
    program or one that cannot be found or read: False."""
    path = argv0 if os.sep in argv0 else shutil.which(argv0)
    try:
        with open(path or "", "rb") as f:
            head = f.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF":
                return False
            wide, little = head[4] == 2, head[5] == 1
            order = "<" if little else ">"
            if wide:
                phoff, = struct.unpack_from(order + "Q", head, 32)
                phentsize, phnum = struct.unpack_from(order + "HH", head, 54)
            else:
                phoff, = struct.unpack_from(order + "I", head, 28)
                phentsize, phnum = struct.unpack_from(order + "HH", head, 42)
            f.seek(phoff)
            table = f.read(phentsize * phnum)
    except (OSError, struct.error):
        return False
    kinds = [struct.unpack_from(order + "I", table, i * phentsize)[0] for i in range(phnum)
             if (i + 1) * phentsize <= len(table)]
    return 3 not in kinds  # PT_INTERP
