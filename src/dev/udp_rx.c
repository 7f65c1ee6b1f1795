/*
 * The udp device's receive side: batches or single receives per socket, GRO trains split
 * into pool buffers (directly or through staging), round robin over the sockets.
 * docs/device-udp.md.
 */
#define _GNU_SOURCE /* recvmmsg */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <softub/errors.h>
#include "dev/critpath.h"
#include "dev/udp_int.h"

/* ---- receive --------------------------------------------------------------------- */

struct rx_meta {
    uint8_t ecn;
    uint32_t gro_seg; /* 0: not coalesced */
};

static void parse_rx_cmsgs(struct msghdr *h, struct rx_meta *m)
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
        }
    }
}

/* A receive header for len bytes at buf (one iovec), with room for address and controls. */
static void rx_prepare_at(struct msghdr *h, struct iovec *iov, union udp_sa *name,
                          union udp_ctrl *ctrl, void *buf, size_t len)
{
    *iov = (struct iovec){buf, len};
    h->msg_name = name;
    h->msg_namelen = (socklen_t)sizeof(*name);
    h->msg_iov = iov;
    h->msg_iovlen = 1;
    h->msg_control = ctrl->buf;
    h->msg_controllen = sizeof(ctrl->buf);
    h->msg_flags = 0;
}

/* Message j of the batch arrays. */
static void rx_prepare(struct udp_dev *u, uint32_t j, void *buf, size_t len)
{
    rx_prepare_at(&u->rxmsg[j].msg_hdr, &u->rxiov[j], &u->rxname[j], &u->rxctrl[j], buf, len);
}

/* Whether receives take one datagram now: in single mode, and with several sockets only
 * while epoll finds one of them readable (a ping-pong's; a sender's spray over many paths
 * is read in batches, see udp_int.h). */
static inline bool single_now(const struct udp_dev *u)
{
    return u->single && u->lone;
}

/*
 * Receives into v[0..k) (rxmsg with rxname, or rx1's message and name for k = 1) of socket
 * s, k >= 1 (one message: recvmsg), and keeps the socket's mode. A single receive that found its
 * datagram ends the socket's turn: asking again at once would almost always be a failing system
 * call.
 */
static int rx_call(struct udp_dev *u, uint32_t s, struct mmsghdr *v, union udp_sa *names,
                   uint32_t k)
{
    /* The connected socket's datagrams all come from its peer (rx_src): the kernel need not
     * write the address back. */
    bool conn = s >= u->np;
    if (conn)
        for (uint32_t j = 0; j < k; j++)
            v[j].msg_hdr.msg_name = NULL;
    int r = k == 1 ? sys_recvmsg1(u->fds[s], v) : sys_recvmmsg(u->fds[s], v, k);
    if (r > 0) {
        ub__critpath_rx(&u->dev);
        u->rx_msgs += (uint32_t)r;
    }
    if (conn)
        for (uint32_t j = 0; j < k; j++)
            v[j].msg_hdr.msg_name = &names[j];
    if (u->np == 1 && u->nsock > 1) { /* the path socket and the connected one */
        if (s == 0) {
            u->path0_hot = r > 0;
            if (r > 0)
                u->path0_streak += (uint32_t)r;
        } else if (r > 0) {
            u->st.rx_connected += (uint32_t)r;
            u->path0_streak = 0;
        }
    }
    if (!single_now(u)) {
        u->single = r <= 1;
        u->rx_hit = false;
        return r;
    }
    u->ready &= ~(1ull << s);
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
    return single_now(u) && k ? 1 : k;
}

/* The source of a message received on socket s, its address written back into name. */
static inline void rx_src(const struct udp_dev *u, uint32_t s, const union udp_sa *name,
                          struct ub__addr *a)
{
    if (s >= u->np)
        *a = u->cpeer_rx;
    else
        sa_to_addr(name, a);
}

/* The first len bytes of pool buffer p, a message of socket s's last receive (its source written
 * back into name): the packet handed out. */
static void rx_take(struct udp_dev *u, uint32_t s, uint32_t len, const union udp_sa *name,
                    struct ub__pkt *p, const struct rx_meta *m)
{
    p->len = len;
    rx_src(u, s, name, &p->addr);
    p->path = sock_path(u, s);
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
            u->st.rx_copied++;
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

/* A coalesced receive of segs packets (counted when more than one), once whatever way its
 * packets were handed out. */
static inline void count_train(struct udp_dev *u, uint32_t segs)
{
    if (segs > 1) {
        u->st.rx_gro_msgs++;
        u->st.rx_gro_segs += segs;
    }
}

/* Queues a message of the last receive (len bytes at buf, its source written back into name)
 * for splitting into segments. */
static void stage_add(struct udp_dev *u, uint32_t s, const union udp_sa *name, uint8_t *buf,
                      uint32_t len, const struct rx_meta *m, const struct ub__pktpool *pool)
{
    struct udp_stage *g = &u->stage[u->stage_n++];
    g->buf = buf;
    g->len = len;
    g->off = 0;
    g->seg = m->gro_seg && m->gro_seg < len ? m->gro_seg : len;
    if (g->seg == pool_buf_room(pool))
        u->bulk |= 1ull << s;
    g->left = len ? (len + g->seg - 1) / g->seg : 1;
    rx_src(u, s, name, &g->src);
    g->path = sock_path(u, s);
    g->ecn = m->ecn;
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
    int r = rx_call(u, s, u->rxmsg, u->rxname, k);
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
        parse_rx_cmsgs(h, &m);
        if (h->msg_flags & MSG_TRUNC) {
            u->st.rx_truncated++;
            continue;
        }
        stage_add(u, s, &u->rxname[j], u->stage_mem + (size_t)j * GRO_BUF_SIZE, u->rxmsg[j].msg_len,
                  &m, pool);
        count_train(u, u->stage[u->stage_n - 1].left);
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
    if (!*ran) {
        if (k > GRO_DIRECT)
            u->bulk &= ~(1ull << s); /* buffers this small never take it: stop asking */
        return 0;
    }
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
    int r = rx_call(u, s, u->rxmsg, u->rxname, msgs);
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
        parse_rx_cmsgs(h, &m);
        uint32_t len = u->rxmsg[j].msg_len, used = 0;
        uint32_t seg = m.gro_seg && m.gro_seg < len ? m.gro_seg : len;
        full |= seg == room;
        struct ub__addr src;
        rx_src(u, s, &u->rxname[j], &src);
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
                p->path = sock_path(u, s);
                p->ecn = m.ecn;
                rx_count(u, p);
                out[n++] = p;
            }
            count_train(u, used);
            if (used > 1)
                u->st.rx_direct += used;
        } else {
            staging = true;
            uint8_t *buf = u->stage_mem + (size_t)u->stage_n * GRO_BUF_SIZE;
            for (uint32_t off = 0, i = 0; off < len; off += room, i++)
                memcpy(buf + off, bufs[i]->data, UB_MIN(room, len - off));
            stage_add(u, s, &u->rxname[j], buf, len, &m, pool);
            count_train(u, u->stage[u->stage_n - 1].left);
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
    int r = rx_call(u, s, u->rxmsg, u->rxname, k);
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
        parse_rx_cmsgs(h, &m);
        if (h->msg_flags & MSG_TRUNC) {
            u->st.rx_truncated++;
            ub__pkt_free(p);
            continue;
        }
        rx_take(u, s, u->rxmsg[j].msg_len, &u->rxname[j], p, &m);
        out[n++] = p;
    }
    for (uint32_t j = got; j < k; j++)
        ub__pkt_free(u->rxpkt[j]);
    return n;
}

/*
 * rx1's buffers ready for a single receive: the datagram's pool buffer, and (room short of 64
 * KiB) a second one for a train's second segment, with rx1's header pointing at them and on
 * into staging; those a receive that found nothing left are kept as they are (a failing call
 * writes nothing back: a waiting side's every poll is such a receive). false: the pool is
 * short.
 */
static bool rx1_ready(struct udp_dev *u, struct ub__pktpool *pool, bool *stalled)
{
    if (UB_UNLIKELY(pool != u->rx1_pool)) { /* (another caller's pool: not the engine's) */
        if (u->rx1_pkt)
            ub__pkt_free(u->rx1_pkt);
        if (u->rx1_pkt2)
            ub__pkt_free(u->rx1_pkt2);
        u->rx1_pkt = u->rx1_pkt2 = NULL;
        u->rx1_pool = pool;
    }
    uint32_t room = pool_buf_room(pool);
    bool two = room < GRO_BUF_SIZE;
    uint32_t need = (u->rx1_pkt ? 0u : 1u) + (two && !u->rx1_pkt2 ? 1u : 0u);
    if (UB_LIKELY(need == 0))
        return true;
    if (pool->avail < need) {
        u->st.rx_pool_empty++;
        *stalled = true;
        return false;
    }
    if (!u->rx1_pkt)
        u->rx1_pkt = ub__pkt_alloc(pool);
    if (two && !u->rx1_pkt2)
        u->rx1_pkt2 = ub__pkt_alloc(pool);
    struct udp_one *o = &u->rx1;
    struct msghdr *h = &o->msg.msg_hdr;
    rx_prepare_at(h, &o->iov[0], &o->name, &o->ctrl, u->rx1_pkt->data, room);
    if (two) {
        o->iov[1] = (struct iovec){u->rx1_pkt2->data, UB_MIN(room, GRO_BUF_SIZE - room)};
        h->msg_iovlen = 2;
        if (2 * room < GRO_BUF_SIZE) {
            o->iov[2] = (struct iovec){u->stage_mem + 2 * room, GRO_BUF_SIZE - 2 * room};
            h->msg_iovlen = 3;
        }
    }
    return true;
}

/*
 * GRO, a socket in single mode, staging empty: one datagram straight into a pool buffer, not
 * through staging and a copy. A train of full-size segments (a message of two to seven
 * packets from a peer of the same MTU) leaves its first two where they landed, in the two
 * buffers; anything else that does not fit the first buffer (smaller segments, an oversized
 * datagram) is gathered in staging behind room for the first buffer's part, which is copied
 * there, and split from staging as any other receive.
 */
static uint32_t recv_single(struct udp_dev *u, uint32_t s, struct ub__pkt **out, uint32_t max,
                            struct ub__pktpool *pool, bool *stalled)
{
    if (!rx1_ready(u, pool, stalled))
        return 0;
    uint32_t room = pool_buf_room(pool);
    struct udp_one *o = &u->rx1;
    struct msghdr *h = &o->msg.msg_hdr;
    struct ub__pkt *p = u->rx1_pkt, *q = u->rx1_pkt2;
    int r = rx_call(u, s, &o->msg, &o->name, 1);
    if (r <= 0) {
        rx_failed(u, s);
        return 0;
    }
    u->rx1_pkt = NULL; /* handed out or freed below; the second buffer unless a train took it */
    u->st.rx_batches++;
    struct rx_meta m;
    parse_rx_cmsgs(h, &m);
    uint32_t len = o->msg.msg_len;
    if (h->msg_flags & MSG_TRUNC) {
        u->st.rx_truncated++;
        ub__pkt_free(p);
        return 0;
    }
    if (len <= room && (!m.gro_seg || m.gro_seg >= len)) {
        rx_take(u, s, len, &o->name, p, &m);
        out[0] = p;
        return 1;
    }
    uint32_t seg = m.gro_seg;
    if (q && seg == room && max >= 2) {
        /* A train of full-size segments: the first two are where they landed. */
        u->rx1_pkt2 = NULL;
        rx_take(u, s, room, &o->name, p, &m);
        rx_take(u, s, UB_MIN(room, len - room), &o->name, q, &m);
        out[0] = p;
        out[1] = q;
        count_train(u, (len + seg - 1) / seg);
        u->st.rx_direct += 2;
        if (len <= 2 * room)
            return 2;
        u->stage_head = u->stage_n = 0;
        stage_add(u, s, &o->name, u->stage_mem + 2 * room, len - 2 * room, &m, pool);
        return 2 + stage_drain(u, out + 2, max - 2, pool, stalled);
    }
    /* What ran past the first buffer, together in staging as before the second one: its
     * part of the second buffer in front of what went on into staging. */
    if (q && len > room)
        memcpy(u->stage_mem + room, q->data, UB_MIN(room, len - room));
    u->stage_head = u->stage_n = 0;
    if (seg && seg <= room) {
        /* A train whose first segment fits the buffer: it stays there. The rest is split from
         * staging, where the part of it that landed in the buffer joins what ran on. */
        memcpy(u->stage_mem + seg, p->data + seg, UB_MIN(room, len) - seg);
        rx_take(u, s, seg, &o->name, p, &m);
        out[0] = p;
        stage_add(u, s, &o->name, u->stage_mem + seg, len - seg, &m, pool);
        count_train(u, (len + seg - 1) / seg);
        return 1 + stage_drain(u, out + 1, max - 1, pool, stalled);
    }
    memcpy(u->stage_mem, p->data, UB_MIN(room, len));
    ub__pkt_free(p);
    stage_add(u, s, &o->name, u->stage_mem, len, &m, pool);
    count_train(u, u->stage[0].left);
    return stage_drain(u, out, max, pool, stalled);
}

/*
 * Which sockets hold datagrams. The epoll set once it is in use (the context's fd was asked
 * for, or more than RX_POLL_MAX sockets); before, poll(2) over the sockets: a socket in an
 * epoll set calls into epoll for every datagram it queues, 0.15-0.4 us of a ping-pong's half
 * round trip between devices of eight paths, and poll's cost grows with the sockets it asks.
 */
static uint64_t ready_socks(struct udp_dev *u)
{
    uint64_t ready = 0;
    if (u->ep_live) {
        int r = sys_epoll_poll(u->epfd, u->evs, (int)UB_ARRAY_SIZE(u->evs));
        for (int i = 0; i < r; i++)
            if (u->evs[i].data.u32 < u->nsock)
                ready |= 1ull << u->evs[i].data.u32;
        return ready;
    }
    struct pollfd pf[RX_POLL_MAX];
    uint32_t n = UB_MIN(u->nsock, (uint32_t)RX_POLL_MAX);
    for (uint32_t i = 0; i < n; i++)
        pf[i] = (struct pollfd){.fd = u->fds[i], .events = POLLIN};
    if (sys_poll0(pf, n) > 0)
        for (uint32_t i = 0; i < n; i++)
            if (pf[i].revents)
                ready |= 1ull << i;
    return ready;
}

/* What the sockets hold (and staging): single receives, batches, GRO, round robin. */
static uint32_t sock_recv(struct udp_dev *u, struct ub__pkt **pkts, uint32_t max,
                          struct ub__pktpool *pool)
{
    uint32_t n = 0;
    bool stalled = false;
    if (u->stage_n)
        n = stage_drain(u, pkts, max, pool, &stalled);
    if (!u->stage_n && !stalled && n < max && !u->ready && u->np == 1) {
        /* One path: ask its socket(s) directly; epoll first would be a system call more. */
        u->ready = 1;
        if (u->nsock > 1)
            u->ready = u->path0_hot || ++u->path0_tick % RX_UNCONN_EVERY == 0 ? 3 : 2;
        /* One socket to read, singly (a ping-pong's every poll): what the round robin below
         * would do, without its arithmetic. */
        if (u->ready != 3 && single_now(u) && !(u->bulk & u->ready)) {
            uint32_t s = u->ready == 2;
            u->rr = 0; /* where the round robin ends after serving the last socket */
            n += u->gro ? recv_single(u, s, pkts + n, max - n, pool, &stalled)
                        : recv_sock(u, s, pkts + n, max - n, pool, &stalled);
            goto out;
        }
    } else if (!u->stage_n && !stalled && n < max && !u->ready) {
        if (u->sock0_only && ++u->epoll_tick % RX_EPOLL_EVERY != 0) {
            u->ready = 1;
        } else {
            u->ready |= ready_socks(u);
            u->st.rx_polls++;
            u->lone = (u->ready & (u->ready - 1)) == 0;
            if (u->ready)
                u->sock0_only = u->ready == 1;
        }
    }
    /*
     * Round robin: in each pass every readable socket gets an equal share
     * of what is left, and the next call starts after the last socket
     * served, so a busy path 0 cannot starve path 7.
     */
    uint32_t q = 0, pass_left = 0;
    for (uint32_t it = 0; it < RX_PASSES * u->nsock && n < max && u->ready && !stalled; it++) {
        uint32_t s = u->rr;
        u->rr = s + 1 == u->nsock ? 0 : s + 1;
        if (pass_left == 0) {
            /* One path (one socket, or two with the connected one): no popcount, a library
             * call without -mpopcnt. */
            uint32_t nready = u->np == 1 ? (uint32_t)((u->ready & 1) + (u->ready >> 1 & 1))
                                         : (uint32_t)__builtin_popcountll(u->ready);
            q = (max - n + nready - 1) / nready;
            pass_left = u->nsock;
        }
        pass_left--;
        if (!(u->ready & (1ull << s)))
            continue;
        q = UB_MIN(q, max - n);
        if (!u->gro) {
            n += recv_sock(u, s, pkts + n, q, pool, &stalled);
            continue;
        }
        /* A lone datagram reads singly unless direct GRO ran: it cannot with buffers much
         * smaller than 64 KiB (the default 1 452-byte MTU), whatever the peer sends. */
        bool direct = false;
        if (!u->stage_n && (u->bulk & (1ull << s)))
            n += gro_direct(u, s, pkts + n, q, pool, &direct);
        if (!direct && !u->stage_n && single_now(u)) {
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
out:
    if (u->gro)
        stage_signal(u);
    if (u->path0_streak >= CONN_IDLE)
        ub__udp_conn_close(u);
    return n;
}

int ub__udp_recv(struct ub__dev *dev, struct ub__pkt **pkts, uint32_t max, struct ub__pktpool *pool)
{
    struct udp_dev *u = udp_of(dev);
    if (!pool)
        return UB_EINVAL;
    max = UB_MIN(max, (uint32_t)INT32_MAX);
    if (!u->ring)
        return (int)sock_recv(u, pkts, max, pool);
    /* The sockets only while the ring's notes say they hold datagrams not yet read, or
     * when it may have lost notes (a full ring, now and then): then until a read finds
     * nothing. */
    uint32_t n = ub__udp_ring_take(u, pkts, max, pool);
    if ((u->ring_owed <= 0 && !u->ring_look && !u->stage_n) || n == max)
        return (int)n;
    u->ring_idle = 0;
    uint32_t m0 = u->rx_msgs;
    uint32_t got = sock_recv(u, pkts + n, max - n, pool);
    if (got == 0 && pool->avail) { /* drained: any note left stood for a dropped datagram */
        u->ring_owed = 0;
        u->ring_look = false;
    } else {
        u->ring_owed -= (int32_t)(u->rx_msgs - m0);
    }
    return (int)(n + got);
}
