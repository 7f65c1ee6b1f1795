#define _GNU_SOURCE /* sendmmsg, recvmmsg, SO_RCVBUFFORCE */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <softub/errors.h>
#include "core/compiler.h"
#include "dev/spec.h"
#include "dev/udp.h"

/* Older libc headers lack these; the values are the kernel ABI. */
#ifndef SOL_UDP
#define SOL_UDP 17
#endif
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#ifndef SO_RXQ_OVFL
#define SO_RXQ_OVFL 40
#endif

#define TX_WINDOW     256   /* packets sorted per socket at a time */
#define GSO_MAX_SEGS  64    /* UDP_MAX_SEGMENTS of older kernels */
#define GSO_MAX_BYTES 65000 /* below the 64 KiB IP datagram limit, either family */
#define GRO_BUF_SIZE  65536 /* a coalesced receive never exceeds 64 KiB */
#define GRO_STAGE     16    /* staging buffers: 1 MiB per device, only with GRO */
#define GRO_DIRECT    16    /* direct GRO receives: at most this many pool buffers per message */
#define RX_PASSES     4     /* bound on round-robin passes over the sockets per recv */
#define ECN_MASK      3u
#define ECN_ECT0      2u
#define ECN_CE        3u

union udp_sa {
    struct sockaddr sa;
    struct sockaddr_in in;
    struct sockaddr_in6 in6;
};

/* Room for UDP_SEGMENT + TOS on send; TOS + UDP_GRO + SO_RXQ_OVFL on receive. */
union udp_ctrl {
    char buf[128];
    struct cmsghdr align;
};

/* A coalesced (or, with GRO, any) receive waiting to be split into pool buffers. */
struct udp_stage {
    uint8_t *buf;
    uint32_t len;  /* bytes received */
    uint32_t off;  /* next segment starts here */
    uint32_t seg;  /* segment size (len when not coalesced) */
    uint32_t left; /* segments still to hand out (1 for an empty datagram) */
    struct ub__addr src;
    uint16_t path;
    uint8_t ecn;
};

struct udp_dev {
    struct ub__dev dev;
    struct ub__udp_cfg cfg;
    int family; /* AF_INET or AF_INET6 */
    int epfd;
    uint32_t np;
    uint8_t tos;     /* DSCP and default ECN codepoint, set on every socket */
    uint8_t ecn_def; /* the default codepoint: ECT(0), or Not-ECT with no_ecn */
    bool gso, gro;
    bool ev_armed;  /* evfd signalled: staged GRO segments wait */
    int evfd;       /* in the epoll set with GRO only; -1 otherwise */
    uint64_t ready; /* sockets epoll reported readable and not yet found drained */
    /* Sockets whose last receive held full-size datagrams: direct GRO receives pay off there
     * (small ones, as a ping-pong's, are cheaper staged than given eight pool buffers each). */
    uint64_t bulk;
    /* A device of one socket reads it one datagram per call (recvmsg) while its last batch held
     * at most one, as a ping-pong's do. Two single receives in a row that both found one switch
     * back to batches; rx_hit marks the first of them. Several sockets always take batches:
     * one datagram per socket per call slices a sender's feedback from many paths, and the
     * balancers' loss inference measured worse for it on a rate-limited test bed. */
    bool single, rx_hit;
    uint32_t rr; /* socket recv serves first next time */
    int fds[UB_UDP_MAX_PATHS];
    uint32_t ovfl[UB_UDP_MAX_PATHS]; /* last SO_RXQ_OVFL count seen per socket */
    struct ub__addr path_addr[UB_UDP_MAX_PATHS];
    struct ub__udp_stats st;

    /* Send scratch: one window sorted per socket, one sendmmsg batch. */
    uint16_t order[TX_WINDOW];
    uint8_t done[TX_WINDOW]; /* sent, or dropped for a counted reason */
    struct mmsghdr txmsg[UB_UDP_BATCH];
    struct iovec txiov[2 * UB_UDP_BATCH]; /* per packet: its buffer, its attached payload */
    union udp_sa txname[UB_UDP_BATCH];
    union udp_ctrl txctrl[UB_UDP_BATCH];
    uint32_t txfirst[UB_UDP_BATCH]; /* message -> position of its first packet in the socket list */
    uint32_t txnseg[UB_UDP_BATCH];

    /* Receive scratch. */
    struct mmsghdr rxmsg[UB_UDP_BATCH];
    struct iovec rxiov[UB_UDP_BATCH];
    union udp_sa rxname[UB_UDP_BATCH];
    union udp_ctrl rxctrl[UB_UDP_BATCH];
    struct ub__pkt *rxpkt[UB_UDP_BATCH];
    struct iovec rxgiov[UB_UDP_BATCH]; /* direct GRO: one pool buffer per segment slot */
    struct epoll_event evs[UB_UDP_MAX_PATHS + 1];

    /* GRO staging, [stage_head, stage_n) still to split. */
    uint8_t *stage_mem;
    struct udp_stage stage[GRO_STAGE];
    uint32_t stage_head, stage_n;
    /* rxmsg[0, stage_prep) point at the staging buffers: a receive of small datagrams (a
     * ping-pong's one) need not rebuild 16 headers each time, only reset what the kernel
     * wrote back into the ones it used. The other receive paths reuse rxmsg and clear it. */
    uint32_t stage_prep;
};

static const struct ub__dev_ops udp_ops;

/*
 * The device's system calls never block (non-blocking sockets, a zero epoll timeout), so
 * they go to the kernel directly, not through libc's cancellation-point wrappers: in a
 * multi-threaded process (the hold watchdog makes one) each of those switches the thread's
 * cancellation state with two atomic updates around the call, three times per received and
 * answered message. Nor should a call that holds the context lock be a cancellation point.
 */
static inline int sys_sendmmsg(int fd, struct mmsghdr *v, unsigned n)
{
#ifdef SYS_sendmmsg
    return (int)syscall(SYS_sendmmsg, fd, v, n, 0);
#else
    return sendmmsg(fd, v, n, 0);
#endif
}

static inline int sys_recvmmsg(int fd, struct mmsghdr *v, unsigned n)
{
#ifdef SYS_recvmmsg
    return (int)syscall(SYS_recvmmsg, fd, v, n, 0, NULL);
#else
    return recvmmsg(fd, v, n, 0, NULL);
#endif
}

/*
 * One message: sendmsg and recvmsg, not their vector forms. For a single datagram
 * recvmmsg costs a second, failing receive inside the call and its own set-up besides
 * (together about 0.4 us of a 2-3 us loopback receive), sendmmsg a little less.
 * Same contract as the vector forms: 1 or -1 with errno.
 */
static inline int sys_sendmsg1(int fd, struct mmsghdr *m)
{
#ifdef SYS_sendmsg
    long r = syscall(SYS_sendmsg, fd, &m->msg_hdr, 0);
#else
    long r = sendmsg(fd, &m->msg_hdr, 0);
#endif
    if (r < 0)
        return -1;
    m->msg_len = (unsigned)r;
    return 1;
}

static inline int sys_recvmsg1(int fd, struct mmsghdr *m)
{
#ifdef SYS_recvmsg
    long r = syscall(SYS_recvmsg, fd, &m->msg_hdr, 0);
#else
    long r = recvmsg(fd, &m->msg_hdr, 0);
#endif
    if (r < 0)
        return -1;
    m->msg_len = (unsigned)r;
    return 1;
}

static inline int sys_epoll_poll(int epfd, struct epoll_event *ev, int max)
{
#ifdef SYS_epoll_pwait
    return (int)syscall(SYS_epoll_pwait, epfd, ev, max, 0, NULL, (size_t)8);
#else
    return epoll_wait(epfd, ev, max, 0);
#endif
}

static inline struct udp_dev *udp_of(const struct ub__dev *dev)
{
    return UB_CONTAINER_OF(dev, struct udp_dev, dev);
}

/* ---- addresses ---------------------------------------------------------------- */

/* Fills sa for a; 0 when a is not of the device's family (the packet cannot leave). */
static socklen_t addr_to_sa(const struct ub__addr *a, int family, union udp_sa *sa)
{
    if (family == AF_INET && a->family == UB_AF_INET) {
        memset(&sa->in, 0, sizeof(sa->in));
        sa->in.sin_family = AF_INET;
        sa->in.sin_port = htons(a->port);
        memcpy(&sa->in.sin_addr, a->ip, 4);
        return (socklen_t)sizeof(sa->in);
    }
    if (family == AF_INET6 && a->family == UB_AF_INET6) {
        memset(&sa->in6, 0, sizeof(sa->in6));
        sa->in6.sin6_family = AF_INET6;
        sa->in6.sin6_port = htons(a->port);
        sa->in6.sin6_scope_id = a->scope_id;
        memcpy(&sa->in6.sin6_addr, a->ip, 16);
        return (socklen_t)sizeof(sa->in6);
    }
    return 0;
}

static void sa_to_addr(const union udp_sa *sa, struct ub__addr *a)
{
    memset(a, 0, sizeof(*a));
    if (sa->sa.sa_family == AF_INET) {
        a->family = UB_AF_INET;
        a->port = ntohs(sa->in.sin_port);
        memcpy(a->ip, &sa->in.sin_addr, 4);
    } else if (sa->sa.sa_family == AF_INET6) {
        a->family = UB_AF_INET6;
        a->port = ntohs(sa->in6.sin6_port);
        a->scope_id = sa->in6.sin6_scope_id;
        memcpy(a->ip, &sa->in6.sin6_addr, 16);
    }
}

/* Compares only what reaches the wire, so stray bytes in unused fields cannot split a GSO run. */
static bool same_dst(const struct ub__addr *a, const struct ub__addr *b)
{
    if (a->family != b->family || a->port != b->port)
        return false;
    if (a->family == UB_AF_INET)
        return memcmp(a->ip, b->ip, 4) == 0;
    return a->scope_id == b->scope_id && memcmp(a->ip, b->ip, 16) == 0;
}

/* ---- spec parser --------------------------------------------------------------- */

static int parse_host(const char *s, size_t len, bool v6, struct ub__addr *a)
{
    char buf[INET6_ADDRSTRLEN + IF_NAMESIZE + 2];
    if (len == 0 || len >= sizeof(buf))
        return UB_EINVAL;
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (!v6) {
        if (inet_pton(AF_INET, buf, a->ip) != 1)
            return UB_EINVAL;
        a->family = UB_AF_INET;
        return 0;
    }
    char *pct = strchr(buf, '%');
    if (pct) {
        *pct++ = '\0';
        size_t sl = strlen(pct);
        if (sl == 0 || sl >= IF_NAMESIZE)
            return UB_EINVAL;
        if (pct[0] >= '0' && pct[0] <= '9') {
            if (ub__spec_u32(pct, sl, 1, UINT32_MAX, &a->scope_id))
                return UB_EINVAL;
        } else {
            a->scope_id = if_nametoindex(pct);
            if (a->scope_id == 0)
                return UB_EINVAL;
        }
    }
    if (inet_pton(AF_INET6, buf, a->ip) != 1)
        return UB_EINVAL;
    a->family = UB_AF_INET6;
    return 0;
}

static int parse_option(void *arg, const char *k, size_t klen, const char *v, size_t vlen)
{
    struct ub__udp_cfg *cfg = arg;
    uint32_t x;
    if (ub__spec_key_is(k, klen, "paths"))
        return ub__spec_u32(v, vlen, 1, UB_UDP_MAX_PATHS, &cfg->num_paths);
    if (ub__spec_key_is(k, klen, "mtu"))
        return ub__spec_u32(v, vlen, UB_UDP_MIN_MTU, UB_UDP_MAX_MTU, &cfg->mtu);
    if (ub__spec_key_is(k, klen, "rcvbuf"))
        return ub__spec_u32(v, vlen, 0, UB_UDP_MAX_SOCKBUF, &cfg->rcvbuf);
    if (ub__spec_key_is(k, klen, "sndbuf"))
        return ub__spec_u32(v, vlen, 0, UB_UDP_MAX_SOCKBUF, &cfg->sndbuf);
    if (ub__spec_key_is(k, klen, "dscp")) {
        if (ub__spec_u32(v, vlen, 0, 63, &x))
            return UB_EINVAL;
        cfg->dscp = (uint8_t)x;
        return 0;
    }
    bool *flag = ub__spec_key_is(k, klen, "gso")   ? &cfg->no_gso
                 : ub__spec_key_is(k, klen, "gro") ? &cfg->no_gro
                 : ub__spec_key_is(k, klen, "ecn") ? &cfg->no_ecn
                                                   : NULL;
    if (!flag || ub__spec_u32(v, vlen, 0, 1, &x))
        return UB_EINVAL;
    *flag = x == 0;
    return 0;
}

int ub__udp_cfg_parse(const char *spec, struct ub__udp_cfg *cfg)
{
    if (!cfg)
        return UB_EINVAL;
    memset(cfg, 0, sizeof(*cfg));
    if (!spec)
        return UB_EINVAL;
    size_t len = strnlen(spec, UB_UDP_SPEC_MAX + 1);
    if (len > UB_UDP_SPEC_MAX)
        return UB_EINVAL;
    const char *s = spec, *end = spec + len;
    if (len >= 4 && memcmp(s, "udp:", 4) == 0)
        s += 4;
    const char *q = memchr(s, '?', (size_t)(end - s));
    const char *aend = q ? q : end;

    /* IPv4 has no ':' of its own; IPv6 is bracketed. */
    const char *host, *hend, *colon;
    bool v6 = s < aend && *s == '[';
    if (v6) {
        host = s + 1;
        hend = memchr(host, ']', (size_t)(aend - host));
        if (!hend)
            return UB_EINVAL;
        colon = hend + 1;
    } else {
        host = s;
        hend = memchr(s, ':', (size_t)(aend - s));
        if (!hend)
            return UB_EINVAL;
        colon = hend;
    }
    uint32_t port;
    if (colon >= aend || *colon != ':' ||
        ub__spec_u32(colon + 1, (size_t)(aend - colon - 1), 0, 65535, &port) ||
        parse_host(host, (size_t)(hend - host), v6, &cfg->local))
        goto bad;
    cfg->local.port = (uint16_t)port;

    if (q && ub__spec_options(q + 1, end, parse_option, cfg))
        goto bad;
    return 0;
bad:
    memset(cfg, 0, sizeof(*cfg));
    return UB_EINVAL;
}

/* ---- open / close ---------------------------------------------------------------- */

static int errno_to_ub(int e)
{
    switch (e) {
    case EADDRINUSE:
        return UB_EBUSY;
    case EACCES:
    case EPERM:
        return UB_EACCESS;
    case EADDRNOTAVAIL:
    case EINVAL:
        return UB_EINVAL;
    case EAFNOSUPPORT:
    case EPROTONOSUPPORT:
        return UB_ENOTSUP;
    case EMFILE:
    case ENFILE:
    case ENOMEM:
    case ENOBUFS:
        return UB_ENOMEM;
    default:
        return UB_EIO;
    }
}

static int setopt_int(int fd, int level, int name, int v)
{
    return setsockopt(fd, level, name, &v, (socklen_t)sizeof(v));
}

/* Root may exceed [rw]mem_max with the FORCE variant; others get what the cap allows. */
static void set_sockbuf(int fd, int force_opt, int opt, uint32_t bytes)
{
    if (setopt_int(fd, SOL_SOCKET, force_opt, (int)bytes) == 0)
        return;
    (void)setopt_int(fd, SOL_SOCKET, opt, (int)bytes);
}

static uint32_t get_sockbuf(int fd, int opt)
{
    int v = 0;
    socklen_t l = (socklen_t)sizeof(v);
    if (getsockopt(fd, SOL_SOCKET, opt, &v, &l) != 0 || v < 0)
        return 0;
    return (uint32_t)v;
}

static int open_path(struct udp_dev *u, uint32_t i)
{
    const struct ub__udp_cfg *c = &u->cfg;
    int fd = socket(u->family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno_to_ub(errno);
    u->fds[i] = fd;

    bool v6 = u->family == AF_INET6;
    /* One family per device: no v4-mapped surprises in source addresses. */
    if (v6 && setopt_int(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1))
        return UB_EIO;
    set_sockbuf(fd, SO_RCVBUFFORCE, SO_RCVBUF, c->rcvbuf);
    set_sockbuf(fd, SO_SNDBUFFORCE, SO_SNDBUF, c->sndbuf);
    if (v6 ? setopt_int(fd, IPPROTO_IPV6, IPV6_TCLASS, u->tos) ||
                 setopt_int(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, 1)
           : setopt_int(fd, IPPROTO_IP, IP_TOS, u->tos) ||
                 setopt_int(fd, IPPROTO_IP, IP_RECVTOS, 1))
        return UB_EIO;
    /* Best effort: only feeds the rx_kernel_drops counter. */
    (void)setopt_int(fd, SOL_SOCKET, SO_RXQ_OVFL, 1);

    struct ub__addr a = c->local;
    if (c->local.port)
        a.port = (uint16_t)(c->local.port + i);
    union udp_sa sa;
    socklen_t sl = addr_to_sa(&a, u->family, &sa);
    if (bind(fd, &sa.sa, sl) != 0)
        return errno_to_ub(errno);
    sl = (socklen_t)sizeof(sa);
    if (getsockname(fd, &sa.sa, &sl) != 0)
        return UB_EIO;
    sa_to_addr(&sa, &u->path_addr[i]);

    /* Path 0 probes the offloads; the others must then agree. */
    if (i == 0) {
        u->gso = !c->no_gso && setopt_int(fd, SOL_UDP, UDP_SEGMENT, 0) == 0;
        u->gro = !c->no_gro && setopt_int(fd, SOL_UDP, UDP_GRO, 1) == 0;
    } else if (u->gro && setopt_int(fd, SOL_UDP, UDP_GRO, 1) != 0) {
        return UB_EIO;
    }

    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = i};
    if (epoll_ctl(u->epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
        return errno_to_ub(errno);
    return 0;
}

static void udp_free(struct udp_dev *u)
{
    for (uint32_t i = 0; i < UB_UDP_MAX_PATHS; i++)
        if (u->fds[i] >= 0)
            close(u->fds[i]);
    if (u->evfd >= 0)
        close(u->evfd);
    if (u->epfd >= 0)
        close(u->epfd);
    /* Staged GRO data holds no pool buffers: nothing else to return. */
    free(u->stage_mem);
    free(u);
}

int ub__udp_open(const struct ub__udp_cfg *cfg, struct ub__dev **out)
{
    if (!out)
        return UB_EINVAL;
    *out = NULL;
    if (!cfg)
        return UB_EINVAL;
    struct ub__udp_cfg c = *cfg;
    if (!c.num_paths)
        c.num_paths = UB_UDP_DEFAULT_PATHS;
    if (!c.mtu)
        c.mtu = UB_UDP_DEFAULT_MTU;
    if (!c.rcvbuf)
        c.rcvbuf = UB_UDP_DEFAULT_SOCKBUF;
    if (!c.sndbuf)
        c.sndbuf = UB_UDP_DEFAULT_SOCKBUF;
    if ((c.local.family != UB_AF_INET && c.local.family != UB_AF_INET6) ||
        c.num_paths > UB_UDP_MAX_PATHS || c.mtu < UB_UDP_MIN_MTU || c.mtu > UB_UDP_MAX_MTU ||
        c.rcvbuf > UB_UDP_MAX_SOCKBUF || c.sndbuf > UB_UDP_MAX_SOCKBUF || c.dscp > 63)
        return UB_EINVAL;
    if (c.local.port && (uint32_t)c.local.port + c.num_paths - 1 > 65535)
        return UB_ERANGE;

    struct udp_dev *u = calloc(1, sizeof(*u));
    if (!u)
        return UB_ENOMEM;
    for (uint32_t i = 0; i < UB_UDP_MAX_PATHS; i++)
        u->fds[i] = -1;
    u->evfd = -1;
    u->bulk = ~0ull; /* direct until a receive shows small datagrams */
    u->cfg = c;
    u->np = c.num_paths;
    for (uint32_t i = 0; i < TX_WINDOW; i++)
        u->order[i] = (uint16_t)i; /* stays so with one path (send_window) */
    u->family = c.local.family == UB_AF_INET ? AF_INET : AF_INET6;
    u->ecn_def = c.no_ecn ? 0 : (uint8_t)ECN_ECT0;
    u->tos = (uint8_t)((unsigned)c.dscp << 2 | u->ecn_def);
    int rc = 0;
    u->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (u->epfd < 0)
        rc = errno_to_ub(errno);
    for (uint32_t i = 0; rc == 0 && i < u->np; i++)
        rc = open_path(u, i);
    if (rc == 0 && u->gro) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = UB_UDP_MAX_PATHS};
        u->stage_mem = malloc((size_t)GRO_STAGE * GRO_BUF_SIZE);
        u->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (!u->stage_mem)
            rc = UB_ENOMEM;
        else if (u->evfd < 0 || epoll_ctl(u->epfd, EPOLL_CTL_ADD, u->evfd, &ev) != 0)
            rc = errno_to_ub(errno);
    }
    if (rc) {
        udp_free(u);
        return rc;
    }
    u->dev.ops = &udp_ops;
    u->dev.local = u->path_addr[0];
    u->st.num_paths = u->np;
    u->st.mtu = c.mtu;
    u->st.rcvbuf = get_sockbuf(u->fds[0], SO_RCVBUF);
    u->st.sndbuf = get_sockbuf(u->fds[0], SO_SNDBUF);
    *out = &u->dev;
    return 0;
}

static void udp_close(struct ub__dev *dev)
{
    udp_free(udp_of(dev));
}

/* ---- send ------------------------------------------------------------------------ */

static inline uint8_t ecn_of(const struct udp_dev *u, const struct ub__pkt *p)
{
    return p->ecn ? (uint8_t)(p->ecn & ECN_MASK) : u->ecn_def;
}

static void put_cmsg(union udp_ctrl *ctrl, size_t *len, int level, int type, const void *data,
                     size_t dlen)
{
    struct cmsghdr *c = (struct cmsghdr *)(void *)(ctrl->buf + *len);
    c->cmsg_level = level;
    c->cmsg_type = type;
    c->cmsg_len = CMSG_LEN(dlen);
    memcpy(CMSG_DATA(c), data, dlen);
    *len += CMSG_SPACE(dlen);
}

/* A codepoint other than the socket's default travels as a per-message TOS / TCLASS. */
static void put_ecn(const struct udp_dev *u, union udp_ctrl *ctrl, size_t *len, uint8_t ecn)
{
    if (ecn == u->ecn_def)
        return;
    int tos = (int)((unsigned)u->cfg.dscp << 2 | ecn);
    if (u->family == AF_INET6)
        put_cmsg(ctrl, len, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof(tos));
    else
        put_cmsg(ctrl, len, IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
}

static void count_sent(struct udp_dev *u, uint32_t s, uint32_t len)
{
    u->st.tx_pkts++;
    u->st.tx_bytes += len;
    u->st.path[s].tx_pkts++;
    u->st.path[s].tx_bytes += len;
}

/*
 * Builds sendmmsg messages from list[pos..cnt) (window positions of one
 * socket's packets, in order): GSO runs become one message. Returns the
 * message count; *endp is the list position after the last packet used.
 */
static uint32_t build_batch(struct udp_dev *u, struct ub__pkt *const *pkts, const uint16_t *list,
                            uint32_t pos, uint32_t cnt, uint32_t *endp)
{
    /* At most UB_UDP_BATCH packets per batch, each one or two iovecs. */
    uint32_t m = 0, niov = 0, npk = 0, i = pos;
    while (i < cnt && m < UB_UDP_BATCH && npk < UB_UDP_BATCH) {
        const struct ub__pkt *p = pkts[list[i]];
        socklen_t sl = addr_to_sa(&p->addr, u->family, &u->txname[m]);
        if (!sl) {
            if (!u->done[list[i]]) {
                u->done[list[i]] = 1;
                u->st.tx_bad_addr++;
            }
            i++;
            continue;
        }
        uint8_t ecn = ecn_of(u, p);
        uint32_t plen = ub__pkt_total_len(p);
        uint32_t nseg = 1, total = plen, k = niov;
        u->txiov[k++] = (struct iovec){p->data, p->len};
        if (p->xlen) /* zero copy: the payload straight from where it lives */
            u->txiov[k++] = (struct iovec){(void *)(uintptr_t)p->xdata, p->xlen};
        /* A run: same destination and codepoint, equal sizes; a shorter segment ends it. The
         * kernel cuts a super-datagram by size alone, so a segment may span several iovecs. */
        while (u->gso && plen > 0 && i + nseg < cnt && npk + nseg < UB_UDP_BATCH &&
               nseg < GSO_MAX_SEGS) {
            const struct ub__pkt *q = pkts[list[i + nseg]];
            uint32_t qlen = ub__pkt_total_len(q);
            if (qlen == 0 || qlen > plen || total + qlen > GSO_MAX_BYTES ||
                !same_dst(&q->addr, &p->addr) || ecn_of(u, q) != ecn)
                break;
            u->txiov[k++] = (struct iovec){q->data, q->len};
            if (q->xlen)
                u->txiov[k++] = (struct iovec){(void *)(uintptr_t)q->xdata, q->xlen};
            total += qlen;
            nseg++;
            if (qlen < plen)
                break;
        }
        struct msghdr *h = &u->txmsg[m].msg_hdr;
        h->msg_name = &u->txname[m];
        h->msg_namelen = sl;
        h->msg_iov = &u->txiov[niov];
        h->msg_iovlen = k - niov;
        h->msg_flags = 0;
        size_t clen = 0;
        if (nseg > 1) {
            uint16_t gso = (uint16_t)plen;
            put_cmsg(&u->txctrl[m], &clen, SOL_UDP, UDP_SEGMENT, &gso, sizeof(gso));
        }
        put_ecn(u, &u->txctrl[m], &clen, ecn);
        h->msg_control = clen ? u->txctrl[m].buf : NULL;
        h->msg_controllen = clen;
        u->txfirst[m] = i;
        u->txnseg[m] = nseg;
        niov = k;
        npk += nseg;
        i += nseg;
        m++;
    }
    *endp = i;
    return m;
}

static void count_send_error(struct udp_dev *u, int e)
{
    switch (e) {
    case EMSGSIZE:
        u->st.tx_err_msgsize++;
        break;
    case ENETUNREACH:
    case EHOSTUNREACH:
    case ECONNREFUSED:
    case EADDRNOTAVAIL:
    case ENETDOWN:
    case EHOSTDOWN:
        u->st.tx_err_unreach++;
        break;
    case EPERM:
    case EACCES:
        u->st.tx_err_perm++;
        break;
    case EINVAL:
        u->st.tx_err_inval++;
        break;
    default:
        u->st.tx_err_other++;
        break;
    }
}

/*
 * Sends one socket's packets list[0..cnt) in order. Returns true when the
 * socket's buffer filled (the packets not marked done were not sent).
 */
static bool send_sock(struct udp_dev *u, uint32_t s, struct ub__pkt *const *pkts,
                      const uint16_t *list, uint32_t cnt)
{
    uint32_t pos = 0, eintr = 0;
    while (pos < cnt) {
        uint32_t end;
        uint32_t m = build_batch(u, pkts, list, pos, cnt, &end);
        if (m == 0) {
            pos = end;
            continue;
        }
        int r = m == 1 ? sys_sendmsg1(u->fds[s], u->txmsg) : sys_sendmmsg(u->fds[s], u->txmsg, m);
        if (r > 0) {
            u->st.tx_batches++;
            for (uint32_t j = 0; j < (uint32_t)r; j++) {
                uint32_t first = u->txfirst[j], nseg = u->txnseg[j];
                for (uint32_t t = 0; t < nseg; t++) {
                    uint32_t w = list[first + t];
                    u->done[w] = 1;
                    count_sent(u, s, ub__pkt_total_len(pkts[w]));
                }
                if (nseg > 1) {
                    u->st.tx_gso_msgs++;
                    u->st.tx_gso_segs += nseg;
                }
            }
            /* The kernel keeps a later message's error for the next call: it lands on it. */
            pos = (uint32_t)r < m ? u->txfirst[r] : end;
            continue;
        }
        int e = errno;
        if (e == EINTR && eintr++ < 8)
            continue;
        if (e == EAGAIN || e == EWOULDBLOCK || e == ENOBUFS) {
            u->st.tx_full++;
            return true;
        }
        if (u->txnseg[0] > 1 &&
            (e == EINVAL || e == EIO || e == EMSGSIZE || e == EOPNOTSUPP || e == ENOPROTOOPT)) {
            /* The route refuses super-datagrams (path MTU, offload): send singly from now on. */
            u->gso = false;
            u->st.tx_gso_fallbacks++;
            pos = u->txfirst[0];
            continue;
        }
        count_send_error(u, e);
        for (uint32_t t = 0; t < u->txnseg[0]; t++)
            u->done[list[u->txfirst[0] + t]] = 1;
        u->st.tx_err_dropped += u->txnseg[0];
        pos = u->txfirst[0] + u->txnseg[0];
    }
    return false;
}

/*
 * Sends pkts[0..w), w <= TX_WINDOW, grouped per socket. Returns how many
 * the device consumed: all w, or, when a socket filled up, up to the last
 * packet it sent or dropped (unsent packets before that are dropped here,
 * counted: the sockets are independent queues, like a NIC's).
 */
static uint32_t send_window(struct udp_dev *u, struct ub__pkt *const *pkts, uint32_t w, bool *full)
{
    if (u->np == 1) { /* one socket: the window in its order (u->order is the identity) */
        memset(u->done, 0, w);
        *full = send_sock(u, 0, pkts, u->order, w);
    } else {
        uint32_t cnt[UB_UDP_MAX_PATHS] = {0}, at[UB_UDP_MAX_PATHS];
        for (uint32_t i = 0; i < w; i++)
            cnt[pkts[i]->path % u->np]++;
        uint32_t sum = 0;
        for (uint32_t s = 0; s < u->np; s++) {
            at[s] = sum;
            sum += cnt[s];
        }
        for (uint32_t i = 0; i < w; i++)
            u->order[at[pkts[i]->path % u->np]++] = (uint16_t)i;
        memset(u->done, 0, w);

        *full = false;
        for (uint32_t s = 0, start = 0; s < u->np; start += cnt[s], s++)
            if (cnt[s] && send_sock(u, s, pkts, &u->order[start], cnt[s]))
                *full = true;
    }

    uint32_t took = w;
    if (*full)
        for (took = w; took > 0 && !u->done[took - 1]; took--)
            ;
    for (uint32_t i = 0; i < took; i++) {
        if (!u->done[i])
            u->st.tx_full_dropped++;
        ub__pkt_free(pkts[i]);
    }
    return took;
}

/*
 * One packet (a ping-pong's every send): what send_window does for a window of one, without
 * its sorting, batching and bookkeeping (some 200 instructions of a 300-instruction send).
 * Returns 1 (sent, or dropped and counted) or 0 (the socket is full: not taken).
 */
static int send_one(struct udp_dev *u, struct ub__pkt *p, uint32_t len)
{
    uint32_t s = p->path % u->np;
    socklen_t sl = addr_to_sa(&p->addr, u->family, &u->txname[0]);
    if (!sl) {
        u->st.tx_bad_addr++;
        ub__pkt_free(p);
        return 1;
    }
    struct msghdr *h = &u->txmsg[0].msg_hdr;
    u->txiov[0] = (struct iovec){p->data, p->len};
    if (p->xlen)
        u->txiov[1] = (struct iovec){(void *)(uintptr_t)p->xdata, p->xlen};
    h->msg_name = &u->txname[0];
    h->msg_namelen = sl;
    h->msg_iov = u->txiov;
    h->msg_iovlen = p->xlen ? 2 : 1;
    h->msg_flags = 0;
    size_t clen = 0;
    put_ecn(u, &u->txctrl[0], &clen, ecn_of(u, p));
    h->msg_control = clen ? u->txctrl[0].buf : NULL;
    h->msg_controllen = clen;
    for (uint32_t eintr = 0;;) {
        if (sys_sendmsg1(u->fds[s], u->txmsg) == 1) {
            u->st.tx_batches++;
            count_sent(u, s, len);
            break;
        }
        int e = errno;
        if (e == EINTR && eintr++ < 8)
            continue;
        if (e == EAGAIN || e == EWOULDBLOCK || e == ENOBUFS) {
            u->st.tx_full++;
            return 0;
        }
        count_send_error(u, e);
        u->st.tx_err_dropped++;
        break;
    }
    ub__pkt_free(p);
    return 1;
}

static int udp_send(struct ub__dev *dev, struct ub__pkt *const *pkts, uint32_t n)
{
    struct udp_dev *u = udp_of(dev);
    if (n == 1) {
        uint32_t len = ub__pkt_total_len(pkts[0]);
        if (len <= u->cfg.mtu)
            return send_one(u, pkts[0], len);
    }
    n = UB_MIN(n, (uint32_t)INT32_MAX);
    uint32_t lim = 0;
    while (lim < n && ub__pkt_total_len(pkts[lim]) <= u->cfg.mtu)
        lim++;
    if (lim < n) {
        /* Refused, not dropped: the caller keeps this one and the rest. */
        u->st.tx_too_big++;
        if (lim == 0)
            return UB_ELENGTH;
    }
    uint32_t k = 0;
    while (k < lim) {
        bool full;
        uint32_t w = UB_MIN(lim - k, (uint32_t)TX_WINDOW);
        k += send_window(u, pkts + k, w, &full);
        if (full)
            break;
    }
    return (int)k;
}

/* ---- receive --------------------------------------------------------------------- */

struct rx_meta {
    uint8_t ecn;
    uint32_t gro_seg; /* 0: not coalesced */
};

static void parse_rx_cmsgs(struct udp_dev *u, uint32_t s, struct msghdr *h, struct rx_meta *m)
{
    m->ecn = 0;
    m->gro_seg = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c)) {
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
            m->ecn = (uint8_t)(*(const uint8_t *)CMSG_DATA(c) & ECN_MASK);
        } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS) {
            int v;
            memcpy(&v, CMSG_DATA(c), sizeof(v));
            m->ecn = (uint8_t)((unsigned)v & ECN_MASK);
        } else if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
            int v;
            memcpy(&v, CMSG_DATA(c), sizeof(v));
            m->gro_seg = v > 0 ? (uint32_t)v : 0;
        } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) {
            /* The socket's cumulative drop count when this datagram was queued. */
            uint32_t v;
            memcpy(&v, CMSG_DATA(c), sizeof(v));
            u->st.rx_kernel_drops += (uint32_t)(v - u->ovfl[s]);
            u->ovfl[s] = v;
        }
    }
}

static void rx_prepare(struct udp_dev *u, uint32_t j, void *buf, size_t len)
{
    struct msghdr *h = &u->rxmsg[j].msg_hdr;
    u->rxiov[j] = (struct iovec){buf, len};
    h->msg_name = &u->rxname[j];
    h->msg_namelen = (socklen_t)sizeof(u->rxname[j]);
    h->msg_iov = &u->rxiov[j];
    h->msg_iovlen = 1;
    h->msg_control = u->rxctrl[j].buf;
    h->msg_controllen = sizeof(u->rxctrl[j].buf);
    h->msg_flags = 0;
}

static void rx_count(struct udp_dev *u, struct ub__pkt *p)
{
    u->st.rx_pkts++;
    u->st.rx_bytes += p->len;
    u->st.path[p->path].rx_pkts++;
    u->st.path[p->path].rx_bytes += p->len;
    if (p->ecn == ECN_CE)
        u->st.rx_ce++;
}

/*
 * Receives into rxmsg[0..k) of socket s, k >= 1 (one message: recvmsg), and keeps the
 * socket's mode. A single receive that found its datagram ends the socket's turn: asking
 * again at once would almost always be a failing system call.
 */
static int rx_call(struct udp_dev *u, uint32_t s, uint32_t k)
{
    int r = k == 1 ? sys_recvmsg1(u->fds[s], u->rxmsg) : sys_recvmmsg(u->fds[s], u->rxmsg, k);
    if (u->np != 1)
        return r;
    if (!u->single) {
        u->single = r <= 1;
        u->rx_hit = false;
        return r;
    }
    u->ready = 0;
    if (r != 1) {
        u->rx_hit = false;
        return r;
    }
    u->st.rx_single++;
    if (u->rx_hit)
        u->single = false; /* two in a row: a burst */
    u->rx_hit = true;
    return r;
}

/* At most one message in single mode. */
static inline uint32_t rx_limit(const struct udp_dev *u, uint32_t k)
{
    return u->single && k ? 1 : k;
}

/* Message j of socket s's last receive, whole in pool buffer p: the packet handed out. */
static void rx_take(struct udp_dev *u, uint32_t s, uint32_t j, struct ub__pkt *p,
                    const struct rx_meta *m)
{
    p->len = u->rxmsg[j].msg_len;
    sa_to_addr(&u->rxname[j], &p->addr);
    p->path = (uint16_t)s;
    p->ecn = m->ecn;
    rx_count(u, p);
}

/* Socket s's recvmmsg failed or came up short: what epoll said is used up. */
static void rx_failed(struct udp_dev *u, uint32_t s)
{
    int e = errno;
    if (e != EAGAIN && e != EWOULDBLOCK && e != EINTR)
        u->st.rx_errors++;
    u->ready &= ~(1ull << s);
}

static inline uint32_t pool_buf_room(const struct ub__pktpool *pool)
{
    return pool->buf_size - pool->headroom;
}

/* Hands out staged segments into pool buffers; *stalled when the pool ran dry. */
static uint32_t stage_drain(struct udp_dev *u, struct ub__pkt **out, uint32_t max,
                            struct ub__pktpool *pool, bool *stalled)
{
    uint32_t n = 0;
    while (u->stage_head < u->stage_n && n < max) {
        struct udp_stage *g = &u->stage[u->stage_head];
        if (g->left == 0) {
            u->stage_head++;
            continue;
        }
        uint32_t len = UB_MIN(g->seg, g->len - g->off);
        if (len > pool_buf_room(pool)) {
            u->st.rx_truncated++;
        } else {
            if (pool->avail == 0) {
                u->st.rx_pool_empty++;
                *stalled = true;
                break;
            }
            struct ub__pkt *p = ub__pkt_alloc(pool);
            memcpy(p->data, g->buf + g->off, len);
            p->len = len;
            p->addr = g->src;
            p->path = g->path;
            p->ecn = g->ecn;
            rx_count(u, p);
            out[n++] = p;
        }
        g->off += len;
        g->left--;
    }
    if (u->stage_head == u->stage_n)
        u->stage_head = u->stage_n = 0;
    return n;
}

/* Queues message j of the last receive (len bytes at buf) for splitting into segments. */
static void stage_add(struct udp_dev *u, uint32_t s, uint32_t j, uint8_t *buf, uint32_t len,
                      const struct rx_meta *m, const struct ub__pktpool *pool)
{
    struct udp_stage *g = &u->stage[u->stage_n++];
    g->buf = buf;
    g->len = len;
    g->off = 0;
    g->seg = m->gro_seg && m->gro_seg < len ? m->gro_seg : len;
    if (g->seg == pool_buf_room(pool))
        u->bulk |= 1ull << s;
    g->left = len ? (len + g->seg - 1) / g->seg : 1;
    sa_to_addr(&u->rxname[j], &g->src);
    g->path = (uint16_t)s;
    g->ecn = m->ecn;
    if (g->left > 1) {
        u->st.rx_gro_msgs++;
        u->st.rx_gro_segs += g->left;
    }
}

/* GRO: receives up to `want` datagrams of socket s into the (empty) staging buffers. */
static void stage_fill(struct udp_dev *u, uint32_t s, uint32_t want, struct ub__pktpool *pool,
                       bool *stalled)
{
    /* Taking data out of the kernel with nowhere to put it would only move the queue. */
    if (pool->avail == 0) {
        u->st.rx_pool_empty++;
        *stalled = true;
        return;
    }
    uint32_t k = rx_limit(u, UB_MIN(want, (uint32_t)GRO_STAGE));
    for (uint32_t j = u->stage_prep; j < k; j++)
        rx_prepare(u, j, u->stage_mem + (size_t)j * GRO_BUF_SIZE, GRO_BUF_SIZE);
    if (k > u->stage_prep)
        u->stage_prep = k;
    int r = rx_call(u, s, k);
    if (r <= 0) {
        rx_failed(u, s);
        return;
    }
    /* What the kernel wrote back (a failed message is not written): reset after the loop. */
    u->st.rx_batches++;
    if ((uint32_t)r < k)
        u->ready &= ~(1ull << s);
    u->stage_head = u->stage_n = 0;
    for (uint32_t j = 0; j < (uint32_t)r; j++) {
        struct msghdr *h = &u->rxmsg[j].msg_hdr;
        struct rx_meta m;
        parse_rx_cmsgs(u, s, h, &m);
        if (h->msg_flags & MSG_TRUNC) {
            u->st.rx_truncated++;
            continue;
        }
        stage_add(u, s, j, u->stage_mem + (size_t)j * GRO_BUF_SIZE, u->rxmsg[j].msg_len, &m, pool);
    }
    for (uint32_t j = 0; j < (uint32_t)r; j++) {
        struct msghdr *h = &u->rxmsg[j].msg_hdr;
        h->msg_namelen = (socklen_t)sizeof(u->rxname[j]);
        h->msg_controllen = sizeof(u->rxctrl[j].buf);
        h->msg_flags = 0;
    }
}

/*
 * GRO without the staging copy: each message gets k = ceil(64 KiB / room) pool buffers as
 * its iovec, so a coalesced receive whose segments are exactly a pool buffer's room (the
 * peer's full-size packets when both ends use the same MTU: the bulk of a large transfer)
 * leaves every segment at the start of its own buffer, and a datagram that was not
 * coalesced lands whole in the first one. Anything else (smaller segments: ACK trains,
 * mixed sizes) is gathered into staging and split there as before, and so is every later
 * message of the batch, to keep the socket's order. Only called with staging empty.
 * Returns the packets handed out; 0 with nothing received when it cannot run (the caller
 * then stages).
 */
static uint32_t gro_direct(struct udp_dev *u, uint32_t s, struct ub__pkt **out, uint32_t want,
                           struct ub__pktpool *pool, bool *ran)
{
    uint32_t room = pool_buf_room(pool);
    uint32_t k = (GRO_BUF_SIZE + room - 1) / room;
    uint32_t msgs = UB_MIN(UB_MIN(want, (uint32_t)UB_UDP_BATCH), pool->avail) / k;
    msgs = rx_limit(u, UB_MIN(msgs, (uint32_t)GRO_STAGE));
    *ran = k <= GRO_DIRECT && msgs > 0;
    if (!*ran)
        return 0;
    for (uint32_t j = 0; j < msgs * k; j++) {
        struct ub__pkt *p = ub__pkt_alloc(pool);
        u->rxpkt[j] = p;
        u->rxgiov[j] = (struct iovec){p->data, room};
    }
    u->stage_prep = 0;
    for (uint32_t j = 0; j < msgs; j++) {
        rx_prepare(u, j, NULL, 0);
        u->rxmsg[j].msg_hdr.msg_iov = &u->rxgiov[j * k];
        u->rxmsg[j].msg_hdr.msg_iovlen = k;
    }
    int r = rx_call(u, s, msgs);
    uint32_t got = r > 0 ? (uint32_t)r : 0, n = 0;
    if (r <= 0)
        rx_failed(u, s);
    else {
        u->st.rx_batches++;
        if (got < msgs)
            u->ready &= ~(1ull << s);
    }
    bool staging = false, full = false;
    for (uint32_t j = 0; j < got; j++) {
        struct ub__pkt **bufs = &u->rxpkt[j * k];
        struct msghdr *h = &u->rxmsg[j].msg_hdr;
        struct rx_meta m;
        parse_rx_cmsgs(u, s, h, &m);
        uint32_t len = u->rxmsg[j].msg_len, used = 0;
        uint32_t seg = m.gro_seg && m.gro_seg < len ? m.gro_seg : len;
        full |= seg == room;
        struct ub__addr src;
        sa_to_addr(&u->rxname[j], &src);
        if (h->msg_flags & MSG_TRUNC) {
            u->st.rx_truncated++;
        } else if (!staging && seg == len && len > room) {
            u->st.rx_truncated++; /* one datagram larger than a buffer: as recv_sock drops it */
        } else if (!staging && (seg == len || seg == room)) {
            used = len ? (len + seg - 1) / seg : 1;
            for (uint32_t i = 0; i < used; i++) {
                struct ub__pkt *p = bufs[i];
                p->len = i + 1 < used ? seg : len - i * seg;
                p->addr = src;
                p->path = (uint16_t)s;
                p->ecn = m.ecn;
                rx_count(u, p);
                out[n++] = p;
            }
            if (used > 1) {
                u->st.rx_gro_msgs++;
                u->st.rx_gro_segs += used;
                u->st.rx_direct += used;
            }
        } else {
            staging = true;
            struct udp_stage *g = &u->stage[u->stage_n];
            g->buf = u->stage_mem + (size_t)u->stage_n * GRO_BUF_SIZE;
            u->stage_n++;
            for (uint32_t off = 0, i = 0; off < len; off += room, i++)
                memcpy(g->buf + off, bufs[i]->data, UB_MIN(room, len - off));
            g->len = len;
            g->off = 0;
            g->seg = seg;
            g->left = len ? (len + seg - 1) / seg : 1;
            g->src = src;
            g->path = (uint16_t)s;
            g->ecn = m.ecn;
            if (g->left > 1) {
                u->st.rx_gro_msgs++;
                u->st.rx_gro_segs += g->left;
            }
        }
        for (uint32_t i = used; i < k; i++)
            ub__pkt_free(bufs[i]);
    }
    for (uint32_t j = got * k; j < msgs * k; j++)
        ub__pkt_free(u->rxpkt[j]);
    if (got && !full)
        u->bulk &= ~(1ull << s);
    return n;
}

/*
 * Staged segments are invisible to epoll: while some wait, the device's
 * eventfd keeps the device fd readable so a driver does not sleep on them.
 */
static void stage_signal(struct udp_dev *u)
{
    bool want = u->stage_n != 0;
    if (want == u->ev_armed)
        return;
    uint64_t v = 1;
    if (want)
        u->ev_armed = write(u->evfd, &v, sizeof(v)) == (ssize_t)sizeof(v);
    else
        u->ev_armed = !(read(u->evfd, &v, sizeof(v)) == (ssize_t)sizeof(v) || errno == EAGAIN);
}

/* Receives up to `want` datagrams of socket s straight into pool buffers. */
static uint32_t recv_sock(struct udp_dev *u, uint32_t s, struct ub__pkt **out, uint32_t want,
                          struct ub__pktpool *pool, bool *stalled)
{
    uint32_t k = rx_limit(u, UB_MIN(UB_MIN(want, (uint32_t)UB_UDP_BATCH), pool->avail));
    if (k == 0) {
        u->st.rx_pool_empty++;
        *stalled = true;
        return 0;
    }
    u->stage_prep = 0;
    for (uint32_t j = 0; j < k; j++) {
        struct ub__pkt *p = ub__pkt_alloc(pool);
        u->rxpkt[j] = p;
        rx_prepare(u, j, p->data, pool_buf_room(pool));
    }
    int r = rx_call(u, s, k);
    uint32_t got = r > 0 ? (uint32_t)r : 0, n = 0;
    if (r <= 0)
        rx_failed(u, s);
    else {
        u->st.rx_batches++;
        if (got < k)
            u->ready &= ~(1ull << s);
    }
    for (uint32_t j = 0; j < got; j++) {
        struct ub__pkt *p = u->rxpkt[j];
        struct msghdr *h = &u->rxmsg[j].msg_hdr;
        struct rx_meta m;
        parse_rx_cmsgs(u, s, h, &m);
        if (h->msg_flags & MSG_TRUNC) {
            u->st.rx_truncated++;
            ub__pkt_free(p);
            continue;
        }
        rx_take(u, s, j, p, &m);
        out[n++] = p;
    }
    for (uint32_t j = got; j < k; j++)
        ub__pkt_free(u->rxpkt[j]);
    return n;
}

/*
 * GRO, a socket in single mode, staging empty: one datagram straight into a pool buffer, not
 * through staging and a copy. What does not fit the buffer (a coalesced train, an oversized
 * datagram) runs on into staging buffer 0 behind room for the buffer's part, which is copied
 * there, and is split from staging as any other receive.
 */
static uint32_t recv_single(struct udp_dev *u, uint32_t s, struct ub__pkt **out, uint32_t max,
                            struct ub__pktpool *pool, bool *stalled)
{
    if (pool->avail == 0) {
        u->st.rx_pool_empty++;
        *stalled = true;
        return 0;
    }
    uint32_t room = pool_buf_room(pool);
    struct ub__pkt *p = ub__pkt_alloc(pool);
    u->stage_prep = 0;
    rx_prepare(u, 0, p->data, room);
    struct msghdr *h = &u->rxmsg[0].msg_hdr;
    if (room < GRO_BUF_SIZE) {
        u->rxgiov[0] = (struct iovec){p->data, room};
        u->rxgiov[1] = (struct iovec){u->stage_mem + room, GRO_BUF_SIZE - room};
        h->msg_iov = u->rxgiov;
        h->msg_iovlen = 2;
    }
    int r = rx_call(u, s, 1);
    if (r <= 0) {
        rx_failed(u, s);
        ub__pkt_free(p);
        return 0;
    }
    u->st.rx_batches++;
    struct rx_meta m;
    parse_rx_cmsgs(u, s, h, &m);
    uint32_t len = u->rxmsg[0].msg_len;
    if (h->msg_flags & MSG_TRUNC) {
        u->st.rx_truncated++;
        ub__pkt_free(p);
        return 0;
    }
    if (len <= room && (!m.gro_seg || m.gro_seg >= len)) {
        rx_take(u, s, 0, p, &m);
        out[0] = p;
        return 1;
    }
    memcpy(u->stage_mem, p->data, UB_MIN(room, len));
    ub__pkt_free(p);
    u->stage_head = u->stage_n = 0;
    stage_add(u, s, 0, u->stage_mem, len, &m, pool);
    return stage_drain(u, out, max, pool, stalled);
}

static int udp_recv(struct ub__dev *dev, struct ub__pkt **pkts, uint32_t max,
                    struct ub__pktpool *pool)
{
    struct udp_dev *u = udp_of(dev);
    if (!pool)
        return UB_EINVAL;
    max = UB_MIN(max, (uint32_t)INT32_MAX);
    uint32_t n = 0;
    bool stalled = false;
    if (u->stage_n)
        n = stage_drain(u, pkts, max, pool, &stalled);
    if (!u->stage_n && !stalled && n < max && !u->ready && u->np == 1) {
        u->ready = 1; /* one socket: ask it; epoll first would be a system call more */
    } else if (!u->stage_n && !stalled && n < max && !u->ready) {
        int r = sys_epoll_poll(u->epfd, u->evs, (int)UB_ARRAY_SIZE(u->evs));
        for (int i = 0; i < r; i++)
            if (u->evs[i].data.u32 < u->np)
                u->ready |= 1ull << u->evs[i].data.u32;
    }
    /*
     * Round robin: in each pass every readable socket gets an equal share
     * of what is left, and the next call starts after the last socket
     * served, so a busy path 0 cannot starve path 7.
     */
    uint32_t q = 0, pass_left = 0;
    for (uint32_t it = 0; it < RX_PASSES * u->np && n < max && u->ready && !stalled; it++) {
        uint32_t s = u->rr;
        u->rr = s + 1 == u->np ? 0 : s + 1;
        if (pass_left == 0) {
            /* One socket: its bit is the only one (no popcount, a library call without
             * -mpopcnt). */
            uint32_t nready = u->np == 1 ? 1 : (uint32_t)__builtin_popcountll(u->ready);
            q = (max - n + nready - 1) / nready;
            pass_left = u->np;
        }
        pass_left--;
        if (!(u->ready & (1ull << s)))
            continue;
        q = UB_MIN(q, max - n);
        if (!u->gro) {
            n += recv_sock(u, s, pkts + n, q, pool, &stalled);
            continue;
        }
        bool direct = false;
        if (!u->stage_n && (u->bulk & (1ull << s)))
            n += gro_direct(u, s, pkts + n, q, pool, &direct);
        else if (!u->stage_n && u->single) {
            n += recv_single(u, s, pkts + n, max - n, pool, &stalled);
            if (u->stage_n)
                break; /* a train is being handed out */
            continue;
        }
        if (!direct)
            stage_fill(u, s, q, pool, &stalled);
        n += stage_drain(u, pkts + n, max - n, pool, &stalled);
        if (u->stage_n)
            break; /* staging is full: hand it out before reading more */
    }
    if (u->gro)
        stage_signal(u);
    return (int)n;
}

/* ---- the rest of the vtable ------------------------------------------------------ */

static int udp_fd(const struct ub__dev *dev)
{
    return udp_of(dev)->epfd;
}

static uint32_t udp_mtu(const struct ub__dev *dev)
{
    return udp_of(dev)->cfg.mtu;
}

static uint32_t udp_num_paths(const struct ub__dev *dev)
{
    return udp_of(dev)->np;
}

static const struct ub__dev_ops udp_ops = {
    .name = "udp",
    .gather = true, /* an attached payload is one more iovec */
    .send = udp_send,
    .recv = udp_recv,
    .fd = udp_fd,
    .mtu = udp_mtu,
    .num_paths = udp_num_paths,
    .close = udp_close,
};

int ub__udp_stats(const struct ub__dev *dev, struct ub__udp_stats *out)
{
    if (!dev || !out || dev->ops != &udp_ops)
        return UB_EINVAL;
    const struct udp_dev *u = udp_of(dev);
    *out = u->st;
    out->gso = u->gso;
    out->gro = u->gro;
    return 0;
}

int ub__udp_path_addr(const struct ub__dev *dev, uint32_t path, struct ub__addr *out)
{
    if (!dev || !out || dev->ops != &udp_ops)
        return UB_EINVAL;
    const struct udp_dev *u = udp_of(dev);
    if (path >= u->np)
        return UB_ERANGE;
    *out = u->path_addr[path];
    return 0;
}
