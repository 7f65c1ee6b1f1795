/*
 * The udp device: configuration, sockets, and the send side (sendmsg for one packet,
 * sendmmsg batches with GSO runs). The receive side is udp_rx.c. docs/device-udp.md.
 */
#define _GNU_SOURCE /* sendmmsg, SO_RCVBUFFORCE */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <linux/sock_diag.h>
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
#include "dev/critpath.h"
#include "dev/spec.h"
#include "dev/udp_int.h"

static const struct ub__dev_ops udp_ops;

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
    if (ub__spec_key_is(k, klen, "ring")) {
        if (ub__spec_u32(v, vlen, 0, 1, &x))
            return UB_EINVAL;
        cfg->ring = x == 1;
        return 0;
    }
    bool *flag = ub__spec_key_is(k, klen, "gso")       ? &cfg->no_gso
                 : ub__spec_key_is(k, klen, "gro")     ? &cfg->no_gro
                 : ub__spec_key_is(k, klen, "ecn")     ? &cfg->no_ecn
                 : ub__spec_key_is(k, klen, "connect") ? &cfg->no_connect
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

/* What every socket of the device is set to before it is bound. */
static int sock_options(const struct udp_dev *u, int fd)
{
    const struct ub__udp_cfg *c = &u->cfg;
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
    /* Before the bind: what the ring takes never queues here as well. */
    return c->ring ? ub__udp_ring_sock_filter(fd, v6) : 0;
}

/* Puts socket fd, as index i, into the epoll set (already there: fine). */
static int ep_add(struct udp_dev *u, int fd, uint32_t i)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = i};
    if (epoll_ctl(u->epfd, EPOLL_CTL_ADD, fd, &ev) != 0 && errno != EEXIST)
        return errno_to_ub(errno);
    return 0;
}

static int open_path(struct udp_dev *u, uint32_t i)
{
    const struct ub__udp_cfg *c = &u->cfg;
    int fd = socket(u->family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno_to_ub(errno);
    u->fds[i] = fd;
    int rc = sock_options(u, fd);
    if (rc)
        return rc;

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

    return u->ep_live ? ep_add(u, fd, i) : 0;
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
    ub__udp_ring_close(u);
    if (u->rx1_pkt)
        ub__pkt_free(u->rx1_pkt);
    if (u->rx1_pkt2)
        ub__pkt_free(u->rx1_pkt2);
    /* Staged GRO data holds no pool buffers: nothing else to return. */
    free(u->stage_mem);
    free(u);
}

/* An address of this host's loopback (127.0.0.0/8, ::1): nothing between its two ends queues
 * packets, and its MTU is 65 536. */
static bool loopback_addr(const struct ub__addr *a)
{
    static const uint8_t lo6[16] = {[15] = 1};
    return a->family == UB_AF_INET ? a->ip[0] == 127
                                   : a->family == UB_AF_INET6 && memcmp(a->ip, lo6, 16) == 0;
}

int ub__udp_open(const struct ub__udp_cfg *cfg, struct ub__dev **out)
{
    if (!out)
        return UB_EINVAL;
    *out = NULL;
    if (!cfg)
        return UB_EINVAL;
    struct ub__udp_cfg c = *cfg;
    /* Bound to a loopback address, every peer is on this host: one link, nothing to spray
     * over (more sockets only cost: docs/device-udp.md, "One socket per path"), and no
     * Ethernet frame to fit. */
    if (!c.num_paths)
        c.num_paths = loopback_addr(&c.local) ? UB_UDP_LOOPBACK_PATHS : UB_UDP_DEFAULT_PATHS;
    if (!c.mtu)
        c.mtu = loopback_addr(&c.local) ? UB_UDP_LOOPBACK_MTU : UB_UDP_DEFAULT_MTU;
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
    u->ring_fd = -1;
    u->bulk = ~0ull; /* direct until a receive shows small datagrams */
    u->cfg = c;
    u->np = c.num_paths;
    u->nsock = u->np;
    u->lone = true; /* one path: always; several: as the latest epoll found them */
    for (uint32_t i = 0; i < TX_WINDOW; i++)
        u->order[i] = (uint16_t)i; /* stays so with one path (send_window) */
    u->family = c.local.family == UB_AF_INET ? AF_INET : AF_INET6;
    u->ecn_def = c.no_ecn ? 0 : (uint8_t)ECN_ECT0;
    u->tos = (uint8_t)((unsigned)c.dscp << 2 | u->ecn_def);
    int rc = 0;
    u->ep_live = u->np > RX_POLL_MAX; /* else poll(2) finds the readable sockets */
    u->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (u->epfd < 0)
        rc = errno_to_ub(errno);
    for (uint32_t i = 0; rc == 0 && i < u->np; i++)
        rc = open_path(u, i);
    if (rc == 0 && c.ring) {
        rc = ub__udp_ring_open(u);
        if (rc == 0 && u->ep_live)
            rc = ep_add(u, u->ring_fd, RING_EV);
    }
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

/* With ecn=0 (default Not-ECT) every datagram leaves Not-ECT, whatever its packet asks: PDS
 * asks ECT(0) of every reliable packet, and honouring that would both undo the option and
 * put a TOS control message on every send. */
static inline uint8_t ecn_of(const struct udp_dev *u, const struct ub__pkt *p)
{
    return p->ecn && u->ecn_def ? (uint8_t)(p->ecn & ECN_MASK) : u->ecn_def;
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

/* p goes through the connected socket: it exists (one path) and p is for its peer. */
static inline bool to_conn(const struct udp_dev *u, const struct ub__pkt *p)
{
    return u->nsock > u->np && same_dst(&p->addr, &u->cpeer);
}

/*
 * Builds sendmmsg messages from list[pos..cnt) (window positions of one
 * socket's packets, in order): GSO runs become one message. Returns the
 * message count; *endp is the list position after the last packet used.
 * A batch is either all for the connected socket's peer (*conn: no address
 * in its messages, so the kernel takes the socket's route instead of looking
 * one up per message) or all for others.
 */
static uint32_t build_batch(struct udp_dev *u, struct ub__pkt *const *pkts, const uint16_t *list,
                            uint32_t pos, uint32_t cnt, uint32_t *endp, bool *conn)
{
    /* At most UB_UDP_BATCH packets per batch, each one or two iovecs. */
    uint32_t m = 0, niov = 0, npk = 0, i = pos;
    *conn = pos < cnt && to_conn(u, pkts[list[pos]]);
    while (i < cnt && m < UB_UDP_BATCH && npk < UB_UDP_BATCH) {
        const struct ub__pkt *p = pkts[list[i]];
        if (to_conn(u, p) != *conn)
            break;
        socklen_t sl = *conn ? 0 : addr_to_sa(&p->addr, u->family, &u->txname[m]);
        if (!*conn && !sl) {
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
            if (qlen == 0 || qlen > plen || total + qlen > UB_UDP_GSO_MAX_BYTES ||
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
        h->msg_name = sl ? &u->txname[m] : NULL;
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
        bool conn;
        uint32_t m = build_batch(u, pkts, list, pos, cnt, &end, &conn);
        if (m == 0) {
            pos = end;
            continue;
        }
        int fd = conn ? u->fds[1] : u->fds[s];
        ub__critpath_tx(&u->dev);
        int r = m == 1 ? sys_sendmsg1(fd, u->txmsg) : sys_sendmmsg(fd, u->txmsg, m);
        if (r > 0) {
            u->st.tx_batches++;
            for (uint32_t j = 0; j < (uint32_t)r; j++) {
                uint32_t first = u->txfirst[j], nseg = u->txnseg[j];
                for (uint32_t t = 0; t < nseg; t++) {
                    uint32_t w = list[first + t];
                    u->done[w] = 1;
                    count_sent(u, s, ub__pkt_total_len(pkts[w]));
                    u->st.tx_connected += conn;
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
            cnt[ub__mod_below(pkts[i]->path, u->np)]++;
        uint32_t sum = 0;
        for (uint32_t s = 0; s < u->np; s++) {
            at[s] = sum;
            sum += cnt[s];
        }
        for (uint32_t i = 0; i < w; i++)
            u->order[at[ub__mod_below(pkts[i]->path, u->np)]++] = (uint16_t)i;
        memset(u->done, 0, w);
        /* The window leaves socket by socket: its transmission stamps (pkt->order, ascending
         * as handed over) go out again in that order, so that PDS knows which packet left
         * after which (its out-of-order count, docs/pds.md). Unstamped packets (ACKs,
         * control, bundles: order 0) neither give nor take a stamp. */
        uint64_t stamp[TX_WINDOW];
        uint32_t ns = 0;
        for (uint32_t i = 0; i < w; i++)
            if (pkts[i]->order)
                stamp[ns++] = pkts[i]->order;
        for (uint32_t k = 0, j = 0; k < w && j < ns; k++)
            if (pkts[u->order[k]]->order)
                pkts[u->order[k]]->order = stamp[j++];

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
 * Connects socket 1 to dst, the first peer a lone packet goes to (a device of one path). The
 * path socket joins a SO_REUSEPORT group only now, after its own bind, so no other socket
 * could have shared its port before; the new socket binds to the same address and port and
 * the kernel prefers the connected socket for dst's datagrams. On any failure the device
 * goes on with its one socket and does not try again.
 */
static void conn_open(struct udp_dev *u, const struct ub__addr *dst)
{
    u->conn_tried = true;
    union udp_sa local, peer;
    socklen_t ll = addr_to_sa(&u->path_addr[0], u->family, &local);
    socklen_t pl = addr_to_sa(dst, u->family, &peer);
    if (!ll || !pl || setopt_int(u->fds[0], SOL_SOCKET, SO_REUSEPORT, 1))
        return;
    int fd = socket(u->family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return;
    if (sock_options(u, fd) || setopt_int(fd, SOL_SOCKET, SO_REUSEPORT, 1) ||
        (u->gro && setopt_int(fd, SOL_UDP, UDP_GRO, 1)) || bind(fd, &local.sa, ll) ||
        connect(fd, &peer.sa, pl) || (u->ep_live && ep_add(u, fd, 1))) {
        close(fd);
        return;
    }
    /* Its datagrams' source, as the kernel would write it back (udp_rx.c rx_src). */
    union udp_sa src;
    socklen_t sl = sizeof(src);
    if (getpeername(fd, &src.sa, &sl)) {
        close(fd);
        return;
    }
    sa_to_addr(&src, &u->cpeer_rx);
    /*
     * A loopback peer's datagrams cross no queue that could mark them CE (unless a qdisc
     * with ECN is put on lo), so the connected socket does not ask for their TOS: the
     * kernel's per-datagram cmsg cost 0.1-0.2 us of every receive here (docs/perf-journal.md,
     * fourteenth round). The path socket still reads it for every other peer.
     */
    u->conn_tos_off = loopback_addr(dst) &&
                      (u->family == AF_INET6 ? setopt_int(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, 0)
                                             : setopt_int(fd, IPPROTO_IP, IP_RECVTOS, 0)) == 0;
    u->fds[1] = fd;
    u->nsock = 2;
    u->cpeer = *dst;
    /* The peer's datagrams queued before the connect wait in the path socket: read it
     * first, and every time until it comes up empty, so they are not overtaken. From now on
     * it holds other peers' datagrams, read every RX_UNCONN_EVERY-th poll: singly, not with
     * the eight buffers of a direct GRO receive prepared for each read that finds nothing
     * (a bulk train from another peer is staged once, then read directly). */
    u->path0_hot = true;
    u->bulk &= ~1ull;
    u->rr = 0;
}

/*
 * Datagrams the kernel dropped at socket fd (its receive buffer full, a bad checksum): the
 * socket's own count (SO_MEMINFO), read when the statistics are asked for, so that drops at
 * the end of a burst count as well (SO_RXQ_OVFL reported them only with a later datagram).
 */
static uint64_t sock_drops(int fd)
{
    uint32_t mi[SK_MEMINFO_VARS];
    socklen_t len = sizeof(mi);
    if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mi, &len) != 0 ||
        len <= SK_MEMINFO_DROPS * sizeof(mi[0]))
        return 0;
    return mi[SK_MEMINFO_DROPS];
}

/* Its peer went quiet (udp_rx.c): the next lone packet may connect to another. */
void ub__udp_conn_close(struct udp_dev *u)
{
    if (!u->ring) /* its drops stay counted */
        u->st.rx_kernel_drops += sock_drops(u->fds[1]);
    (void)epoll_ctl(u->epfd, EPOLL_CTL_DEL, u->fds[1], NULL);
    close(u->fds[1]);
    u->fds[1] = -1;
    u->nsock = 1;
    u->conn_tried = false;
    u->conn_tos_off = false;
    u->path0_hot = false;
    u->path0_streak = 0;
    u->ready &= 1;
    u->rr = 0;
    u->st.conn_retired++;
}

/*
 * One packet (a ping-pong's every send): what send_window does for a window of one, without
 * its sorting, batching and bookkeeping (some 200 instructions of a 300-instruction send).
 * Returns 1 (sent, or dropped and counted) or 0 (the socket is full: not taken).
 */
static int send_one(struct udp_dev *u, struct ub__pkt *p, uint32_t len)
{
    uint32_t s = ub__mod_below(p->path, u->np);
    if (u->np == 1 && !u->conn_tried && !u->cfg.no_connect)
        conn_open(u, &p->addr);
    struct udp_one *o = &u->tx1;
    struct msghdr *h = &o->msg.msg_hdr;
    bool conn = to_conn(u, p);
    int fd = conn ? u->fds[1] : u->fds[s];
    if (conn) {
        h->msg_name = NULL;
        h->msg_namelen = 0;
    } else {
        socklen_t sl = addr_to_sa(&p->addr, u->family, &o->name);
        if (!sl) {
            u->st.tx_bad_addr++;
            ub__pkt_free(p);
            return 1;
        }
        h->msg_name = &o->name;
        h->msg_namelen = sl;
    }
    o->iov[0] = (struct iovec){p->data, p->len};
    if (p->xlen)
        o->iov[1] = (struct iovec){(void *)(uintptr_t)p->xdata, p->xlen};
    h->msg_iov = o->iov;
    h->msg_iovlen = p->xlen ? 2 : 1;
    h->msg_flags = 0;
    size_t clen = 0;
    put_ecn(u, &o->ctrl, &clen, ecn_of(u, p));
    h->msg_control = clen ? o->ctrl.buf : NULL;
    h->msg_controllen = clen;
    ub__critpath_tx(&u->dev);
    bool plain = !p->xlen && !clen;
    for (uint32_t eintr = 0;;) {
        int r = plain ? sys_sendto1(fd, p->data, p->len, h->msg_name, h->msg_namelen)
                      : sys_sendmsg1(fd, &o->msg);
        if (r == 1) {
            u->st.tx_batches++;
            u->st.tx_connected += conn;
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

static int udp_send(struct ub__dev *dev, struct ub__pkt **pkts, uint32_t n)
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

/* ---- the rest of the vtable ------------------------------------------------------ */

/*
 * The sockets join the epoll set only when somebody may sleep on it (or at open with more
 * than RX_POLL_MAX paths, whose receive then asks epoll). A socket in an epoll set calls into epoll
 * for every datagram that arrives and every sent one freed: over loopback 0.3-0.4 us of a
 * busy-polling ping-pong's half round trip, which never sleeps on the set. -1 if they cannot join.
 */
static int udp_fd(struct ub__dev *dev)
{
    struct udp_dev *u = udp_of(dev);
    for (uint32_t i = 0; !u->ep_live && i < u->nsock; i++)
        if (ep_add(u, u->fds[i], i))
            return -1;
    if (!u->ep_live && u->ring && ep_add(u, u->ring_fd, RING_EV))
        return -1;
    u->ep_live = true;
    return u->epfd;
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
    .recv = ub__udp_recv,
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
    out->ring = u->ring != NULL;
    out->epoll_live = u->ep_live;
    /* Beside the packet ring a socket's count includes every datagram its filter leaves to
     * the ring: only the ring's own drops (PACKET_STATISTICS, udp_ring.c) are known there. */
    for (uint32_t s = 0; !u->ring && s < u->nsock; s++)
        out->rx_kernel_drops += sock_drops(u->fds[s]);
    out->connected = u->nsock > u->np;
    if (out->connected) {
        out->peer = u->cpeer;
        out->conn_tos_off = u->conn_tos_off;
    }
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
