/*
 * The udp device's packet ring (ring=1) over 127.0.0.1 and ::1: small datagrams through the ring,
 * large ones through the sockets, each exactly once with its source, path and ECN; a plain
 * socket's datagram; the checksum check; the frame parser over IPv4 and IPv6; the spec key. Needs
 * CAP_NET_RAW (skipped without it). Every wait is bounded; nothing sleeps to synchronise.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <softub/errors.h>
#include "core/clock.h"
#include "core/pktbuf.h"
#include "dev/udp.h"
#include "dev/udp_int.h"

#define POOL_N 512
#define BUF    4096
#define N      1200

/* A ring device on 127.0.0.1 (NULL, after skip(), where this process may not open one). */
static struct ub__dev *open_ring(const char *spec)
{
    struct ub__udp_cfg cfg;
    struct ub__dev *d = NULL;
    assert_int_equal(ub__udp_cfg_parse(spec, &cfg), 0);
    int rc = ub__udp_open(&cfg, &d);
    if (rc == UB_EACCESS)
        skip(); /* no CAP_NET_RAW */
    assert_int_equal(rc, 0);
    return d;
}

static struct ub__udp_stats stats_of(const struct ub__dev *d)
{
    struct ub__udp_stats st;
    assert_int_equal(ub__udp_stats(d, &st), 0);
    return st;
}

static uint8_t pat(uint32_t seq, uint32_t i)
{
    return (uint8_t)(seq * 13u + i * 5u + 3u);
}

/* Sizes around the ring's bound: one in three large. */
static uint32_t len_of(uint32_t seq)
{
    static const uint32_t v[] = {4, UB_UDP_RING_SMALL, UB_UDP_RING_SMALL + 1, 100, 2000, 548};
    return v[seq % 6];
}

struct seen {
    uint8_t n[N];
    uint32_t got, bad;
};

/* Takes what d has (bounded), checking every packet's bytes, source, path and ECN. */
static void drain(struct ub__dev *d, struct ub__pktpool *pool, struct seen *s,
                  const struct ub__dev *from, uint32_t want)
{
    uint64_t end = ub__clock_monotonic_ns(NULL) + 5 * UB_NS_PER_S;
    while (s->got + s->bad < want && ub__clock_monotonic_ns(NULL) < end) {
        struct ub__pkt *b[64];
        int r = ub__dev_recv(d, b, 64, pool);
        assert_true(r >= 0);
        for (int i = 0; i < r; i++) {
            struct ub__pkt *p = b[i];
            uint32_t seq;
            memcpy(&seq, p->data, 4);
            bool ok = p->len >= 4 && seq < N && p->len == len_of(seq) && p->path == seq % 4 &&
                      ub__addr_eq(&p->addr, &from->local) && p->ecn == (seq % 5 == 0 ? 3 : 2);
            for (uint32_t k = 4; ok && k < p->len; k++)
                ok = p->data[k] == pat(seq, k);
            if (ok)
                s->n[seq]++, s->got++;
            else
                s->bad++;
            ub__pkt_free(p);
        }
        if (r == 0) {
            struct epoll_event ev[4];
            assert_true(epoll_wait(ub__dev_fd(d), ev, 4, 20) >= 0 || errno == EINTR);
        }
    }
}

/* Sizes around the ring's bound from a (one path) to b's four paths, over host (127.0.0.1 or
 * ::1): each exactly once, the small ones through the ring. */
static void mixed_run(const char *host)
{
    char sb[96], sa[96];
    snprintf(sb, sizeof(sb), "udp:%s:0?paths=4&ring=1&mtu=4000", host);
    snprintf(sa, sizeof(sa), "udp:%s:0?paths=1&ring=1&mtu=4000", host);
    struct ub__dev *b = open_ring(sb);
    struct ub__dev *a = open_ring(sa);
    struct ub__pktpool pa, pb;
    assert_int_equal(ub__pktpool_init(&pa, POOL_N, BUF, 0), 0);
    assert_int_equal(ub__pktpool_init(&pb, POOL_N, BUF, 0), 0);
    struct ub__addr to[4];
    for (uint16_t i = 0; i < 4; i++)
        assert_int_equal(ub__udp_path_addr(b, i, &to[i]), 0);

    struct seen s = {{0}, 0, 0};
    uint32_t small = 0;
    for (uint32_t seq = 0; seq < N; seq++) {
        struct ub__pkt *p = ub__pkt_alloc(&pa);
        uint8_t *d = ub__pkt_put(p, len_of(seq));
        for (uint32_t k = 0; k < p->len; k++)
            d[k] = pat(seq, k);
        memcpy(d, &seq, 4);
        p->addr = to[seq % 4]; /* path i of b: its socket's port, told by the ring */
        p->ecn = seq % 5 == 0 ? 3 : 2;
        small += len_of(seq) <= UB_UDP_RING_SMALL;
        assert_int_equal(ub__dev_send(a, &p, 1), 1);
        if (seq % 64 == 63) /* within the ring's and the sockets' room */
            drain(b, &pb, &s, a, seq + 1);
    }
    drain(b, &pb, &s, a, N);
    assert_int_equal(s.bad, 0);
    assert_int_equal(s.got, N);
    for (uint32_t i = 0; i < N; i++)
        assert_int_equal(s.n[i], 1);
    struct ub__udp_stats st = stats_of(b);
    assert_true(st.ring);
    assert_int_equal(st.rx_ring, small);
    assert_true(st.rx_ring_notes >= 1 && st.rx_ring_notes <= N - small);
    assert_int_equal(st.rx_ring_bad, 0);
    assert_int_equal(st.rx_pkts, N);
    assert_int_equal(st.rx_ce, N / 5);
    /* Every datagram arrived: the sockets' filter discarding what the ring took is no drop. */
    assert_int_equal(st.rx_kernel_drops, 0);

    /* Nothing more comes, from the ring or the sockets, however long it is polled. */
    for (int i = 0; i < 3000; i++) {
        struct ub__pkt *x[8];
        assert_int_equal(ub__dev_recv(b, x, 8, &pb), 0);
    }
    ub__dev_close(a);
    ub__dev_close(b);
    assert_int_equal(pa.avail, pa.count);
    assert_int_equal(pb.avail, pb.count);
    ub__pktpool_fini(&pa);
    ub__pktpool_fini(&pb);
}

static void test_ring_mixed(void **state)
{
    (void)state;
    mixed_run("127.0.0.1");
}

static void test_ring_mixed6(void **state)
{
    (void)state;
    int fd = socket(AF_INET6, SOCK_DGRAM, 0);
    struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    bool ok = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    if (fd >= 0)
        close(fd);
    if (!ok)
        skip(); /* no IPv6 loopback here */
    mixed_run("[::1]");
}

/* A datagram from a plain socket: its address as the kernel would have reported it. */
static void test_ring_plain_sender(void **state)
{
    (void)state;
    struct ub__dev *b = open_ring("udp:127.0.0.1:0?paths=1&ring=1");
    struct ub__pktpool pb;
    assert_int_equal(ub__pktpool_init(&pb, 16, BUF, 0), 0);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in me = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&me, sizeof(me)), 0);
    socklen_t l = sizeof(me);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&me, &l), 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(b->local.port)};
    memcpy(&to.sin_addr, b->local.ip, 4);
    assert_int_equal(sendto(fd, "ring", 4, 0, (struct sockaddr *)&to, sizeof(to)), 4);
    struct ub__pkt *p = NULL;
    for (int i = 0; i < 1000 && !p; i++) {
        if (ub__dev_recv(b, &p, 1, &pb) == 0) {
            struct epoll_event ev;
            assert_true(epoll_wait(ub__dev_fd(b), &ev, 1, 20) >= 0 || errno == EINTR);
        }
    }
    assert_non_null(p);
    assert_int_equal(p->len, 4);
    assert_memory_equal(p->data, "ring", 4);
    assert_int_equal(p->addr.family, UB_AF_INET);
    assert_int_equal(p->addr.port, ntohs(me.sin_port));
    assert_memory_equal(p->addr.ip, &me.sin_addr, 4);
    assert_int_equal(p->ecn, 0); /* a plain socket sends Not-ECT */
    assert_int_equal(stats_of(b).rx_ring, 1);
    ub__pkt_free(p);
    close(fd);
    ub__dev_close(b);
    ub__pktpool_fini(&pb);
}

/* RFC 768 over a fixed datagram (127.0.0.1:1000 -> 127.0.0.1:4791, "softub"). */
static void test_ring_csum(void **state)
{
    (void)state;
    uint8_t ip[20] = {0x45, 0, 0, 34, 0, 0, 0x40, 0, 64, 17, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1};
    uint8_t udp[14] = {0x03, 0xe8, 0x12, 0xb7, 0, 14, 0, 0, 's', 'o', 'f', 't', 'u', 'b'};
    /* The pseudo-header's and the datagram's 16-bit words summed, folded and complemented
     * (7f00 0001 7f00 0001 0011 000e, 03e8 12b7 000e 736f 6674 7562): 0x9bea. */
    udp[6] = 0x9b;
    udp[7] = 0xea;
    assert_true(ub__udp_ring_csum_ok(ip, udp, sizeof(udp)));
    udp[9] ^= 1;
    assert_false(ub__udp_ring_csum_ok(ip, udp, sizeof(udp)));
    udp[6] = udp[7] = 0; /* no checksum sent */
    assert_true(ub__udp_ring_csum_ok(ip, udp, sizeof(udp)));
    /* An odd length: the last byte pads with zero. */
    uint8_t odd[9] = {0x03, 0xe8, 0x12, 0xb7, 0, 9, 0, 0, 'x'};
    ip[3] = 29;
    /* 7f00 0001 7f00 0001 0011 0009, 03e8 12b7 0009 7800: 0x733a. */
    odd[6] = 0x73;
    odd[7] = 0x3a;
    assert_true(ub__udp_ring_csum_ok(ip, odd, sizeof(odd)));
}

/* The frame parser's outcomes over the same datagram: taken, noted, refused. */
static void test_ring_parse(void **state)
{
    (void)state;
    uint8_t f[40] = {0x45, 0x01, 0, 34, 0,   0,   0x40, 0,   64,   17,   0,    0,
                     10,   1,    2, 3,  127, 0,   0,    1,   0x03, 0xe8, 0x12, 0xb7,
                     0,    14,   0, 0,  's', 'o', 'f',  't', 'u',  'b'};
    struct ub__udp_ring_dgram d;
    assert_int_equal(ub__udp_ring_parse(f, 34, 34, true, 0, &d), 1);
    assert_int_equal(d.off, 28);
    assert_int_equal(d.len, 6);
    assert_memory_equal(f + d.off, "softub", 6);
    assert_int_equal(d.src.family, UB_AF_INET);
    assert_int_equal(d.src.port, 1000);
    assert_memory_equal(d.src.ip, "\x0a\x01\x02\x03", 4);
    assert_int_equal(d.dport, 4791);
    assert_int_equal(d.ecn, 1);
    /* Its checksum field is 0: none sent, so the unverified path takes it too. */
    assert_int_equal(ub__udp_ring_parse(f, 34, 34, false, 0, &d), 1);
    f[26] = 0x12; /* a checksum that does not check out */
    assert_int_equal(ub__udp_ring_parse(f, 34, 34, false, 0, &d), UB_EBADMSG);
    assert_int_equal(ub__udp_ring_parse(f, 34, 34, true, 0, &d), 1); /* the kernel vouched */
    /* Cut short, a UDP length past the capture, an IP header too short, not IPv4. */
    assert_int_equal(ub__udp_ring_parse(f, 27, 27, true, 0, &d), UB_EBADMSG);
    assert_int_equal(ub__udp_ring_parse(f, 33, 33, true, 0, &d), UB_EBADMSG);
    f[0] = 0x44;
    assert_int_equal(ub__udp_ring_parse(f, 34, 34, true, 0, &d), UB_EBADMSG);
    f[0] = 0x65;
    assert_int_equal(ub__udp_ring_parse(f, 34, 34, true, 0, &d), UB_EBADMSG);
    f[0] = 0x45;
    /* A larger datagram's note: its UDP length past the bound, or more than was captured. */
    f[24] = 0x05;
    assert_int_equal(ub__udp_ring_parse(f, 34, 34, true, 0, &d), 0);
    f[24] = 0;
    assert_int_equal(ub__udp_ring_parse(f, 34, 1400, true, 0, &d), 0);
    /* A UDP length under its own header. */
    f[25] = 7;
    assert_int_equal(ub__udp_ring_parse(f, 34, 34, true, 0, &d), UB_EBADMSG);
}

/* The same over IPv6, from a link-local source: its scope is the interface it came in on. */
static void test_ring_parse6(void **state)
{
    (void)state;
    uint8_t f[64] = {0x60, 0x10, 0, 0, 0, 14, 17, 64}; /* traffic class 0x01: ECT(1) */
    static const uint8_t src[16] = {0xfe, 0x80, [15] = 1}, dst[16] = {[15] = 1};
    static const uint8_t udp[14] = {0x03, 0xe8, 0x12, 0xb7, 0,   14,  0x9b,
                                    0x6a, 's',  'o',  'f',  't', 'u', 'b'};
    memcpy(f + 8, src, 16);
    memcpy(f + 24, dst, 16);
    memcpy(f + 40, udp, sizeof(udp));
    struct ub__udp_ring_dgram d;
    assert_true(ub__udp_ring_csum_ok(f, f + 40, 14));
    assert_int_equal(ub__udp_ring_parse(f, 54, 54, false, 7, &d), 1);
    assert_int_equal(d.off, 48);
    assert_int_equal(d.len, 6);
    assert_memory_equal(f + d.off, "softub", 6);
    assert_int_equal(d.src.family, UB_AF_INET6);
    assert_memory_equal(d.src.ip, src, 16);
    assert_int_equal(d.src.scope_id, 7);
    assert_int_equal(d.src.port, 1000);
    assert_int_equal(d.dport, 4791);
    assert_int_equal(d.ecn, 1);
    f[8] = 0x20; /* a global source: no scope */
    assert_int_equal(ub__udp_ring_parse(f, 54, 54, true, 7, &d), 1);
    assert_int_equal(d.src.scope_id, 0);
    assert_int_equal(ub__udp_ring_parse(f, 54, 54, false, 7, &d), UB_EBADMSG); /* its sum */
    f[8] = 0xfe;
    f[46] = f[47] = 0; /* no checksum: no datagram over IPv6 */
    assert_int_equal(ub__udp_ring_parse(f, 54, 54, false, 7, &d), UB_EBADMSG);
    f[6] = 0; /* an extension header (hop-by-hop) before UDP: not the ring's */
    assert_int_equal(ub__udp_ring_parse(f, 54, 54, true, 7, &d), UB_EBADMSG);
    f[6] = 17;
    assert_int_equal(ub__udp_ring_parse(f, 47, 47, true, 7, &d), UB_EBADMSG); /* cut */
}

static void test_ring_spec(void **state)
{
    (void)state;
    struct ub__udp_cfg cfg;
    assert_int_equal(ub__udp_cfg_parse("udp:127.0.0.1:0?ring=2", &cfg), UB_EINVAL);
    assert_int_equal(ub__udp_cfg_parse("udp:[::1]:0?ring=1", &cfg), 0);
    assert_true(cfg.ring);
    assert_int_equal(ub__udp_cfg_parse("udp:127.0.0.1:0?ring=0", &cfg), 0);
    assert_false(cfg.ring);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_mixed),        cmocka_unit_test(test_ring_mixed6),
        cmocka_unit_test(test_ring_plain_sender), cmocka_unit_test(test_ring_csum),
        cmocka_unit_test(test_ring_parse),        cmocka_unit_test(test_ring_parse6),
        cmocka_unit_test(test_ring_spec),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
