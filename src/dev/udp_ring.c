/*
 * The udp device's packet ring (`ring=1`): small datagrams are read from a
 * PACKET_RX_RING shared with the kernel instead of by a receive system call per datagram.
 *
 * A packet socket on every interface, with a classic BPF filter that takes
 * only the device's own UDP datagrams (its family, UDP right behind the IP header) for its ports
 * (and its address, when bound to one), copies each such datagram into a ring frame while the
 * sender's system call delivers it; polling the ring is a load of the next frame's status word, so
 * a busy poller finds a datagram the moment it is written and enters the kernel only to send. Every
 * UDP socket of the device carries the complementary filter: it drops what the ring took whole, a
 * datagram of at most RING_SMALL bytes of UDP, so nothing arrives twice. Larger datagrams (bulk
 * data, GSO trains, fragmented ones) stay with the sockets; the ring gets their first headers only,
 * a note that tells the device to read its sockets, and every RING_SOCK_EVERY empty polls it reads
 * them anyway (a note lost to a full ring). 576 bytes of IP fit every IPv4 link's MTU (IPv6's least
 * is 1 280), so a datagram the ring takes whole is never fragmented on its way.
 *
 * Needs CAP_NET_RAW (UB_EACCESS without it). docs/device-udp.md, "The packet ring".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <softub/errors.h>
#include "dev/critpath.h"
#include "dev/udp_int.h"

#define RING_FRAME      1024u /* tpacket2 header, address, a 576-byte IP datagram */
#define RING_FRAMES     512u
#define RING_BLOCK      65536u
#define RING_NOTE_SNAP  96u /* a large datagram's note: IP (with options) and UDP headers */
#define RING_SOCK_EVERY 1024u
/* Where a frame's sockaddr_ll follows its header: TPACKET_ALIGN (16) of the header's size. */
#define RING_HDR_LEN ((sizeof(struct tpacket2_hdr) + 15u) & ~(size_t)15u)

static int attach(int fd, struct sock_filter *f, unsigned short n)
{
    struct sock_fprog prog = {n, f};
    return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) ? -1 : 0;
}

int ub__udp_ring_sock_filter(int fd, bool v6)
{
    /* A UDP socket's filter sees the UDP header and payload, the IP header before them
     * (SKF_NET_OFF). It drops a datagram of at most UB_UDP_RING_SMALL bytes: the ring's.
     * Over IPv6 only one right behind the fixed header: the ring refuses extension headers
     * (IPv4 options it reads). */
    struct sock_filter f4[] = {
        {BPF_LD | BPF_W | BPF_LEN, 0, 0, 0},
        {BPF_JMP | BPF_JGT | BPF_K, 1, 0, UB_UDP_RING_SMALL + 8},
        {BPF_RET | BPF_K, 0, 0, 0},
        {BPF_RET | BPF_K, 0, 0, 0xffffffffu},
    };
    struct sock_filter f6[] = {
        {BPF_LD | BPF_W | BPF_LEN, 0, 0, 0},
        {BPF_JMP | BPF_JGT | BPF_K, 3, 0, UB_UDP_RING_SMALL + 8},
        {BPF_LD | BPF_B | BPF_ABS, 0, 0, (uint32_t)SKF_NET_OFF + 6},
        {BPF_JMP | BPF_JEQ | BPF_K, 0, 1, IPPROTO_UDP},
        {BPF_RET | BPF_K, 0, 0, 0},
        {BPF_RET | BPF_K, 0, 0, 0xffffffffu},
    };
    int rc = v6 ? attach(fd, f6, (unsigned short)UB_ARRAY_SIZE(f6))
                : attach(fd, f4, (unsigned short)UB_ARRAY_SIZE(f4));
    return rc ? UB_EIO : 0;
}

/* A filter program under construction; tests that fail jump to a reject placed last. */
struct bpf_build {
    struct sock_filter f[24 + UB_UDP_MAX_PATHS];
    unsigned short n, fix[12], nfix;
};

static void put(struct bpf_build *b, uint16_t code, uint32_t k, uint8_t jt, uint8_t jf)
{
    b->f[b->n++] = (struct sock_filter){code, jt, jf, k};
}

/* A test whose failure (or, for BPF_JA, whose reaching) rejects the datagram. */
static void put_rej(struct bpf_build *b, uint16_t code, uint32_t k)
{
    b->fix[b->nfix++] = b->n;
    put(b, code, k, 0, 0);
}

/* The packet socket's filter; offsets from the IP header (SOCK_DGRAM). */
static int ring_filter(const struct udp_dev *u, int fd)
{
    struct bpf_build b = {.n = 0};
    bool v6 = u->family == AF_INET6;
    const uint8_t *a = u->path_addr[0].ip;
    put(&b, BPF_LD | BPF_W | BPF_ABS, (uint32_t)(SKF_AD_OFF + SKF_AD_PKTTYPE), 0, 0);
    put_rej(&b, BPF_JMP | BPF_JEQ | BPF_K, PACKET_HOST);
    put(&b, BPF_LD | BPF_B | BPF_ABS, 0, 0, 0);
    put(&b, BPF_ALU | BPF_AND | BPF_K, 0xf0, 0, 0);
    put_rej(&b, BPF_JMP | BPF_JEQ | BPF_K, v6 ? 0x60 : 0x40);
    /* UDP right behind the header: an IPv6 extension header (a fragment's among them) or
     * an IPv4 fragment is the sockets'. */
    put(&b, BPF_LD | BPF_B | BPF_ABS, v6 ? 6 : 9, 0, 0);
    put_rej(&b, BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_UDP);
    if (!v6) {
        put(&b, BPF_LD | BPF_H | BPF_ABS, 6, 0, 0);
        put(&b, BPF_JMP | BPF_JSET | BPF_K, 0x3fff, 0, 1);
        put_rej(&b, BPF_JMP | BPF_JA, 0);
    }
    /* The device's address, when it is bound to one. */
    uint32_t alen = v6 ? 16 : 4, aoff = v6 ? 24 : 16;
    bool any = true;
    for (uint32_t i = 0; i < alen; i++)
        any = any && !a[i];
    for (uint32_t i = 0; !any && i < alen; i += 4) {
        put(&b, BPF_LD | BPF_W | BPF_ABS, aoff + i, 0, 0);
        put_rej(&b, BPF_JMP | BPF_JEQ | BPF_K,
                (uint32_t)a[i] << 24 | (uint32_t)a[i + 1] << 16 | (uint32_t)a[i + 2] << 8 |
                    a[i + 3]);
    }
    if (v6)
        put(&b, BPF_LDX | BPF_W | BPF_IMM, 40, 0, 0);
    else
        put(&b, BPF_LDX | BPF_B | BPF_MSH, 0, 0, 0);
    put(&b, BPF_LD | BPF_H | BPF_IND, 2, 0, 0);
    /* One test per path port: a match skips the others and the reject after them. */
    for (uint32_t i = 0; i < u->np; i++)
        put(&b, BPF_JMP | BPF_JEQ | BPF_K, u->path_addr[i].port, (uint8_t)(u->np - i), 0);
    put_rej(&b, BPF_JMP | BPF_JA, 0);
    put(&b, BPF_LD | BPF_H | BPF_IND, 4, 0, 0);
    put(&b, BPF_JMP | BPF_JGT | BPF_K, UB_UDP_RING_SMALL + 8, 1, 0);
    put(&b, BPF_RET | BPF_K, 0x10000, 0, 0);        /* small: the whole datagram */
    put(&b, BPF_RET | BPF_K, RING_NOTE_SNAP, 0, 0); /* large: a note, the data stays queued */
    unsigned short rej = b.n;
    put(&b, BPF_RET | BPF_K, 0, 0, 0);
    for (unsigned short i = 0; i < b.nfix; i++) {
        struct sock_filter *j = &b.f[b.fix[i]];
        unsigned d = (unsigned)(rej - b.fix[i] - 1);
        if (BPF_OP(j->code) == BPF_JA)
            j->k = d;
        else
            j->jf = (uint8_t)d;
    }
    return attach(fd, b.f, b.n);
}

int ub__udp_ring_open(struct udp_dev *u)
{
    /* No protocol until the bind: nothing is queued before the filter and the ring are in. */
    int fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno == EPERM || errno == EACCES ? UB_EACCESS : UB_ENOTSUP;
    u->ring_fd = fd;
    int v = TPACKET_V2, one = 1;
    struct tpacket_req req = {
        .tp_block_size = RING_BLOCK,
        .tp_block_nr = RING_FRAMES * RING_FRAME / RING_BLOCK,
        .tp_frame_size = RING_FRAME,
        .tp_frame_nr = RING_FRAMES,
    };
    if (setsockopt(fd, SOL_PACKET, PACKET_VERSION, &v, sizeof(v)) || ring_filter(u, fd) ||
        setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)))
        return UB_EIO;
    /* Our own datagrams to a peer on the same interface: the filter's PACKET_HOST test
     * rejects them anyway, this spares the kernel the copy for the filter. */
    (void)setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
    void *m =
        mmap(NULL, (size_t)RING_FRAMES * RING_FRAME, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        return UB_ENOMEM;
    u->ring = m;
    /* Every interface: a multihomed host's paths (ECMP over several links) arrive on
     * several, whichever holds the address. */
    struct sockaddr_ll ll = {
        .sll_family = AF_PACKET,
        .sll_protocol = htons(u->family == AF_INET6 ? ETH_P_IPV6 : ETH_P_IP),
    };
    if (bind(fd, (struct sockaddr *)&ll, sizeof(ll)))
        return UB_EIO;
    return 0;
}

void ub__udp_ring_close(struct udp_dev *u)
{
    if (u->ring)
        munmap(u->ring, (size_t)RING_FRAMES * RING_FRAME);
    if (u->ring_fd >= 0)
        close(u->ring_fd);
    u->ring = NULL;
    u->ring_fd = -1;
}

/* The 16-bit one's complement sum of n bytes at b, added to sum (RFC 1071). */
static uint64_t sum16(uint64_t sum, const uint8_t *b, uint32_t n)
{
    for (uint32_t i = 0; i + 1 < n; i += 2)
        sum += (uint32_t)(b[i] << 8 | b[i + 1]);
    if (n & 1)
        sum += (uint32_t)b[n - 1] << 8;
    return sum;
}

/* The UDP checksum over the pseudo-header (the IP header's addresses, alen bytes at addrs)
 * and the datagram: RFC 768, RFC 8200 8.1. */
static bool csum_ok(const uint8_t *addrs, uint32_t alen, const uint8_t *udp, uint32_t ulen)
{
    uint64_t sum = sum16(sum16((uint64_t)IPPROTO_UDP + ulen, addrs, alen), udp, ulen);
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return sum == 0xffff;
}

bool ub__udp_ring_csum_ok(const uint8_t *ip, const uint8_t *udp, uint32_t ulen)
{
    if ((ip[0] >> 4) == 6) /* no checksum is no datagram over IPv6 */
        return csum_ok(ip + 8, 32, udp, ulen);
    return (!udp[6] && !udp[7]) || csum_ok(ip + 12, 8, udp, ulen);
}

/* The ring was full for some datagrams: the kernel's count (reset by reading it). */
static void ring_drops(struct udp_dev *u)
{
    struct tpacket_stats ts;
    socklen_t l = sizeof(ts);
    if (getsockopt(u->ring_fd, SOL_PACKET, PACKET_STATISTICS, &ts, &l) == 0)
        u->st.rx_kernel_drops += ts.tp_drops;
}

/* The path whose port a datagram was sent to. */
static uint16_t port_path(const struct udp_dev *u, uint16_t port)
{
    for (uint32_t i = 1; i < u->np; i++)
        if (u->path_addr[i].port == port)
            return (uint16_t)i;
    return 0;
}

int ub__udp_ring_parse(const uint8_t *ip, uint32_t cap, uint32_t len, bool csum_known,
                       uint32_t ifindex, struct ub__udp_ring_dgram *d)
{
    if (cap < 28)
        return UB_EBADMSG;
    bool v6 = (ip[0] >> 4) == 6;
    uint32_t hl = v6 ? 40u : (ip[0] & 15u) * 4u;
    if ((!v6 && ((ip[0] >> 4) != 4 || hl < 20)) || (v6 && ip[6] != IPPROTO_UDP) || hl + 8 > cap)
        return UB_EBADMSG;
    const uint8_t *udp = ip + hl;
    uint32_t ulen = (uint32_t)(udp[4] << 8 | udp[5]);
    if (ulen > UB_UDP_RING_SMALL + 8 || len > cap)
        return 0; /* a larger datagram's note: the data waits in a socket */
    if (ulen < 8 || hl + ulen > cap || (!csum_known && !ub__udp_ring_csum_ok(ip, udp, ulen)))
        return UB_EBADMSG;
    d->off = hl + 8;
    d->len = ulen - 8;
    memset(&d->src, 0, sizeof(d->src));
    d->src.port = (uint16_t)(udp[0] << 8 | udp[1]);
    d->dport = (uint16_t)(udp[2] << 8 | udp[3]);
    if (v6) {
        d->src.family = UB_AF_INET6;
        memcpy(d->src.ip, ip + 8, 16);
        /* A link-local source names its link, as the socket's sin6_scope_id would. */
        if (ip[8] == 0xfe && (ip[9] & 0xc0) == 0x80)
            d->src.scope_id = ifindex;
        d->ecn = (ip[1] >> 4) & ECN_MASK; /* the traffic class's low bits */
    } else {
        d->src.family = UB_AF_INET;
        memcpy(d->src.ip, ip + 12, 4);
        d->ecn = ip[1] & ECN_MASK;
    }
    return 1;
}

/* Frame h's datagram into a pool buffer, or NULL (counted) when it is not one to take. */
static struct ub__pkt *frame_take(struct udp_dev *u, const struct tpacket2_hdr *h,
                                  struct ub__pktpool *pool, bool *note)
{
    const uint8_t *ip = (const uint8_t *)h + h->tp_net;
    bool csum = h->tp_status & (TP_STATUS_CSUMNOTREADY | TP_STATUS_CSUM_VALID);
    struct ub__udp_ring_dgram d;
    const struct sockaddr_ll *ll = (const void *)((const uint8_t *)h + RING_HDR_LEN);
    int rc = ub__udp_ring_parse(ip, h->tp_snaplen, h->tp_len, csum, (uint32_t)ll->sll_ifindex, &d);
    if (rc == 0) {
        u->st.rx_ring_notes++;
        *note = true;
        return NULL;
    }
    if (rc < 0 || d.len > pool_buf_room(pool)) {
        u->st.rx_ring_bad++;
        return NULL;
    }
    struct ub__pkt *p = ub__pkt_alloc(pool);
    memcpy(p->data, ip + d.off, d.len);
    p->len = d.len;
    p->addr = d.src;
    p->path = port_path(u, d.dport);
    p->ecn = d.ecn;
    rx_count(u, p);
    return p;
}

uint32_t ub__udp_ring_take(struct udp_dev *u, struct ub__pkt **out, uint32_t max,
                           struct ub__pktpool *pool)
{
    uint32_t n = 0;
    while (n < max) {
        struct tpacket2_hdr *h = (void *)(u->ring + (size_t)u->ring_head * RING_FRAME);
        if (!(__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER))
            break;
        if (pool->avail == 0) { /* the frame waits; the ring may fill and drop */
            u->st.rx_pool_empty++;
            break;
        }
        bool note = false;
        struct ub__pkt *p = frame_take(u, h, pool, &note);
        if (h->tp_status & TP_STATUS_LOSING) {
            ring_drops(u);
            u->ring_look = true; /* notes may be among the lost */
        }
        __atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
        u->ring_head = u->ring_head + 1 == RING_FRAMES ? 0 : u->ring_head + 1;
        u->ring_owed += note;
        if (p) {
            if (n == 0)
                ub__critpath_rx(&u->dev);
            u->st.rx_ring++;
            out[n++] = p;
        }
    }
    if (n == 0 && ++u->ring_idle % RING_SOCK_EVERY == 0)
        u->ring_look = true;
    return n;
}
