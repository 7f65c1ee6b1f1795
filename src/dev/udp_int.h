/*
 * The udp device's internals, shared by its send side (udp.c) and its receive side
 * (udp_rx.c). Include after defining _GNU_SOURCE (sendmmsg, recvmmsg).
 */
#ifndef SOFTUB_DEV_UDP_INT_H
#define SOFTUB_DEV_UDP_INT_H

#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/compiler.h"
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

#define TX_WINDOW       256   /* packets sorted per socket at a time */
#define GSO_MAX_SEGS    64    /* UDP_MAX_SEGMENTS of older kernels */
#define GRO_BUF_SIZE    65536 /* a coalesced receive never exceeds 64 KiB */
#define GRO_STAGE       16    /* staging buffers: 1 MiB per device, only with GRO */
#define GRO_DIRECT      16    /* direct GRO receives: at most this many pool buffers per message */
#define RX_PASSES       4     /* bound on round-robin passes over the sockets per recv */
#define RX_UNCONN_EVERY 8     /* with a connected socket: single receives per path socket read */
#define RX_EPOLL_EVERY  8     /* several paths, only socket 0 busy: its reads per readiness check */
#define RX_POLL_MAX     8  /* several paths, at most this many: poll(2) finds the readable ones */
#define CONN_IDLE       64 /* path socket datagrams in a row that retire the connected socket */
#define RING_EV         (UB_UDP_MAX_PATHS + 1) /* the packet ring's epoll data (evfd: MAX_PATHS) */
#define ECN_MASK        3u
#define ECN_ECT0        2u
#define ECN_CE          3u

union udp_sa {
    struct sockaddr sa;
    struct sockaddr_in in;
    struct sockaddr_in6 in6;
};

/* Room for UDP_SEGMENT + TOS on send; TOS + UDP_GRO on receive. */
union udp_ctrl {
    /* Aligned as a cmsghdr, whose flexible data member would make the union (and a struct
     * holding one, udp_one) a variable-sized type. */
    _Alignas(struct cmsghdr) char buf[128];
};

/*
 * One message's system-call scratch: its header, iovecs, address and control buffer side by
 * side. The single send and the single receive, a ping-pong's every turn, use one each
 * beside the device's header fields; element 0 of each batch array lies pages apart, and on a
 * host whose system calls empty the TLB every page a turn touches costs a walk
 * (docs/perf-journal.md, "Pages, polls and the repost", "Whose pages").
 */
struct udp_one {
    struct mmsghdr msg;
    struct iovec iov[3]; /* send: headers, attached payload; receive: two buffers, staging */
    union udp_sa name;
    union udp_ctrl ctrl;
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
    /* The sockets are in epfd: from open with several paths (their receive asks epoll which
     * are readable), else from the first fd() (udp.c, udp_fd). */
    bool ep_live;
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
     * back to batches; rx_hit marks the first of them. Several sockets take single receives
     * only while epoll finds one of them readable (lone): one datagram per socket per call
     * would slice a sender's feedback from many paths, and the balancers' loss inference
     * measured worse for it on a rate-limited test bed. */
    bool single, rx_hit, lone;
    /* Several paths: the latest readiness check (ready_socks) found only socket 0 readable,
     * where a peer's requests and (docs/pds.md, "Where ACKs go") the ACKs of ours arrive.
     * Socket 0 is then read without asking first (a system call less per datagram) but every
     * RX_EPOLL_EVERY-th time, when the check says again whether the others are quiet. */
    bool sock0_only;
    uint32_t epoll_tick;
    /* One path: fds[1] may be connected to the first peer a lone packet went to (nsock 2).
     * Single receives ask it every time and the path socket, which then holds only the
     * other peers, every RX_UNCONN_EVERY-th time, or every time while it keeps finding
     * datagrams (path0_hot). CONN_IDLE datagrams in a row on the path socket (someone else
     * is the peer now) retire it; the next lone packet connects anew. */
    uint32_t nsock; /* sockets to read: np, or 2 with the connected one */
    bool conn_tried, path0_hot;
    bool conn_tos_off; /* the connected socket does not read TOS (a loopback peer) */
    uint32_t path0_tick, path0_streak;
    struct ub__addr cpeer;    /* the connected socket's peer, as packets to it say */
    struct ub__addr cpeer_rx; /* the same, as the kernel says where datagrams come from */
    uint32_t rr;              /* socket recv serves first next time */
    /* GRO staging, [stage_head, stage_n) of stage[] still to split. */
    uint8_t *stage_mem;
    uint32_t stage_head, stage_n;
    /* rxmsg[0, stage_prep) point at the staging buffers: a receive of small datagrams (a
     * ping-pong's one) need not rebuild 16 headers each time, only reset what the kernel
     * wrote back into the ones it used. The other receive paths reuse rxmsg and clear it. */
    uint32_t stage_prep;
    int fds[UB_UDP_MAX_PATHS];
    struct udp_one tx1, rx1; /* send_one's; recv_single's */
    /* rx1's pool buffers, kept while its receives find nothing: the datagram's, and the next
     * one for a train's second full-size segment (recv_single) */
    struct ub__pkt *rx1_pkt, *rx1_pkt2;
    const struct ub__pktpool *rx1_pool; /* theirs */
    /* The packet ring (ring=1, udp_ring.c): its mapping, the next frame to look at, empty
     * polls since the sockets were last read. */
    uint8_t *ring;
    int ring_fd;
    uint32_t ring_head, ring_idle;
    /* Notes of datagrams the sockets hold, less the messages read from them since (below 0
     * when a batch read ahead of the ring); ring_look: read them until one read finds
     * nothing (the ring lost notes, or the periodic look). */
    int32_t ring_owed;
    bool ring_look;
    uint32_t rx_msgs;        /* messages the sockets gave (every receive call's, wrapping) */
    struct ub__udp_stats st; /* counters a turn updates, beside the above */
    struct ub__addr path_addr[UB_UDP_MAX_PATHS];

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

    /* GRO staging (stage_mem and its bookkeeping above, asked on every receive). */
    struct udp_stage stage[GRO_STAGE];
};

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

/*
 * One buffer, no control data: sendto, which spares the kernel copying and checking a
 * message header and an iovec array (40-75 ns a send on loopback here, bench/udp_calls). Same
 * contract as sys_sendmsg1: 1 or -1 with errno.
 */
static inline int sys_sendto1(int fd, const void *buf, size_t len, const void *name,
                              socklen_t namelen)
{
#ifdef SYS_sendto
    long r = syscall(SYS_sendto, fd, buf, len, 0, name, namelen);
#else
    long r = sendto(fd, buf, len, 0, name, namelen);
#endif
    return r < 0 ? -1 : 1;
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

static inline int sys_poll0(struct pollfd *fds, unsigned n)
{
#ifdef SYS_ppoll
    static const struct timespec zero = {0, 0};
    return (int)syscall(SYS_ppoll, fds, n, &zero, NULL, (size_t)8);
#else
    return poll(fds, n, 0);
#endif
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

/* The address a datagram came from (or a socket is bound to). */
static inline void sa_to_addr(const union udp_sa *sa, struct ub__addr *a)
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

/* Bytes a pool buffer holds after its headroom. */
static inline uint32_t pool_buf_room(const struct ub__pktpool *pool)
{
    return pool->buf_size - pool->headroom;
}

/* A received packet handed out: the counters. */
static inline void rx_count(struct udp_dev *u, const struct ub__pkt *p)
{
    u->st.rx_pkts++;
    u->st.rx_bytes += p->len;
    u->st.path[p->path].rx_pkts++;
    u->st.path[p->path].rx_bytes += p->len;
    if (p->ecn == ECN_CE)
        u->st.rx_ce++;
}

/* The path a packet received on socket s took: the connected socket is path 0's. */
static inline uint16_t sock_path(const struct udp_dev *u, uint32_t s)
{
    return s < u->np ? (uint16_t)s : 0;
}

/* Closes the connected socket (udp.c). */
void ub__udp_conn_close(struct udp_dev *u);

/* The vtable's receive (udp_rx.c). */
int ub__udp_recv(struct ub__dev *dev, struct ub__pkt **pkts, uint32_t max,
                 struct ub__pktpool *pool);

/* udp_ring.c */
/* Opens the packet ring for the device's bound sockets: UB_EACCESS without CAP_NET_RAW. */
int ub__udp_ring_open(struct udp_dev *u);
void ub__udp_ring_close(struct udp_dev *u);
/* The filter every UDP socket of a ring device carries (before its bind): it drops what the
 * ring takes. */
int ub__udp_ring_sock_filter(int fd, bool v6);
/* Up to max packets from the ring; counts its notes into ring_owed, sets ring_look. */
uint32_t ub__udp_ring_take(struct udp_dev *u, struct ub__pkt **out, uint32_t max,
                           struct ub__pktpool *pool);
/* A ring frame's datagram: the payload at ip + off, len bytes. */
struct ub__udp_ring_dgram {
    uint32_t off, len;
    struct ub__addr src;
    uint16_t dport;
    uint8_t ecn;
};
/* Parses a ring frame from its IP header, IPv4 or IPv6 (cap bytes captured of the
 * datagram's len, received on interface ifindex): 1 with *d for a datagram to take whole, 0
 * for a larger datagram's note (its data waits in a socket), UB_EBADMSG for a malformed one
 * or, unless csum_known (the kernel checked it), a bad UDP checksum. Never reads past cap. */
int ub__udp_ring_parse(const uint8_t *ip, uint32_t cap, uint32_t len, bool csum_known,
                       uint32_t ifindex, struct ub__udp_ring_dgram *d);
/* Whether a UDP datagram (ulen bytes at udp, its IPv4 or IPv6 header at ip) checks out. */
bool ub__udp_ring_csum_ok(const uint8_t *ip, const uint8_t *udp, uint32_t ulen);

#endif
