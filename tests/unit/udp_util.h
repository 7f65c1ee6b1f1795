/*
 * Helpers of the udp device's tests (test_udp.c, test_udp_conn.c): devices on loopback,
 * plain sockets beside them, numbered packets with a checked pattern, bounded drains.
 */
#ifndef UB_TEST_UDP_UTIL_H
#define UB_TEST_UDP_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* IP_RECVTOS, CMSG_NXTHDR under -std=c11 */
#endif
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <softub/errors.h>
#include "core/clock.h"
#include "dev/udp.h"
#include "dev/udp_int.h" /* RX_EPOLL_EVERY */
#include "engine/driver.h"
#include "engine/engine.h"

#define MTU      4096
#define POOL_N   1024
#define WAIT_MS  20
#define LIMIT_NS (10 * UB_NS_PER_S)

static inline uint64_t now_ns(void)
{
    return ub__clock_monotonic_ns(NULL);
}

static inline struct ub__dev *open_spec(const char *spec)
{
    struct ub__udp_cfg cfg;
    struct ub__dev *d = NULL;
    assert_int_equal(ub__udp_cfg_parse(spec, &cfg), 0);
    assert_int_equal(ub__udp_open(&cfg, &d), 0);
    assert_non_null(d);
    return d;
}

static inline struct ub__udp_stats stats_of(const struct ub__dev *d)
{
    struct ub__udp_stats st;
    assert_int_equal(ub__udp_stats(d, &st), 0);
    return st;
}

/* Waits (bounded) until fd polls readable; fd may be a device's epoll fd or a waiter's. */
static inline void wait_fd(int fd, int ms)
{
    struct epoll_event ev[8];
    int r = epoll_wait(fd, ev, 8, ms);
    assert_true(r >= 0 || errno == EINTR);
}

static inline bool have_ipv6_loopback(void)
{
    int fd = socket(AF_INET6, SOCK_DGRAM, 0);
    if (fd < 0)
        return false;
    struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    bool ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return ok;
}

static inline int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* A plain IPv4 socket on 127.0.0.1, ephemeral port. */
static inline int plain_sock4(void)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

static inline struct sockaddr_in sa4_of(const struct ub__addr *a)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(a->port)};
    memcpy(&sa.sin_addr, a->ip, 4);
    return sa;
}

static inline uint16_t plain_port(int fd)
{
    struct sockaddr_in sa;
    socklen_t l = sizeof(sa);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &l), 0);
    return ntohs(sa.sin_port);
}

/* ---- raw device traffic: payload = seq (4 bytes) + pattern ------------------------- */

static inline uint8_t pat(uint32_t seq, uint32_t i)
{
    return (uint8_t)(seq * 31u + i * 7u + 1u);
}

static inline struct ub__pkt *mk(struct ub__pktpool *pool, const struct ub__addr *dst, uint32_t seq,
                                 uint32_t len, uint16_t path)
{
    struct ub__pkt *p = ub__pkt_alloc(pool);
    assert_non_null(p);
    uint8_t *d = ub__pkt_put(p, len);
    assert_non_null(d);
    for (uint32_t i = 0; i < len; i++)
        d[i] = pat(seq, i);
    if (len >= 4)
        memcpy(d, &seq, 4);
    p->addr = *dst;
    p->path = path;
    return p;
}

struct rx_check {
    uint32_t n_expected;
    uint8_t *seen;
    uint32_t got, dup, bad;
    uint64_t bytes, sum; /* order-independent digest of the delivered bytes */
    uint32_t path_hist[UB_UDP_MAX_PATHS];
    uint32_t ecn_hist[4];
};

static inline void check_pkt(struct rx_check *c, const struct ub__pkt *p)
{
    uint32_t seq;
    if (p->len < 4) {
        c->bad++;
        return;
    }
    memcpy(&seq, p->data, 4);
    if (seq >= c->n_expected) {
        c->bad++;
        return;
    }
    for (uint32_t i = 4; i < p->len; i++)
        if (p->data[i] != pat(seq, i)) {
            c->bad++;
            return;
        }
    if (c->seen[seq]++) {
        c->dup++;
        return;
    }
    c->got++;
    c->bytes += p->len;
    uint64_t h = 1469598103934665603ULL;
    for (uint32_t i = 0; i < p->len; i++)
        h = (h ^ p->data[i]) * 1099511628211ULL;
    c->sum += h;
    c->path_hist[p->path % UB_UDP_MAX_PATHS]++;
    c->ecn_hist[p->ecn & 3]++;
}

/* One receive into check; returns how many packets it took. */
static inline int recv_checked(struct ub__dev *d, struct ub__pktpool *pool, struct rx_check *c)
{
    struct ub__pkt *b[64];
    int r = ub__dev_recv(d, b, 64, pool);
    assert_true(r >= 0);
    for (int i = 0; i < r; i++) {
        check_pkt(c, b[i]);
        ub__pkt_free(b[i]);
    }
    return r;
}

/* Receives into check until `want` packets arrived in total (or 5 s / 100k rounds). */
static inline void drain_into(struct ub__dev *d, struct ub__pktpool *pool, struct rx_check *c,
                              uint32_t want)
{
    uint64_t end = now_ns() + 5 * UB_NS_PER_S;
    for (int it = 0; it < 100000 && c->got + c->bad + c->dup < want && now_ns() < end; it++) {
        int r = recv_checked(d, pool, c);
        if (r == 0)
            wait_fd(ub__dev_fd(d), WAIT_MS);
    }
}

/* Receives into check until the device has nothing left (loopback delivers within send). */
static inline void drain_idle(struct ub__dev *d, struct ub__pktpool *pool, struct rx_check *c)
{
    for (int it = 0; it < 100000; it++) {
        int r = recv_checked(d, pool, c);
        struct epoll_event ev;
        if (r == 0 && epoll_wait(ub__dev_fd(d), &ev, 1, 0) == 0)
            return;
    }
    fail_msg("device never went idle");
}

/* Closes both devices; every packet buffer must be back in its pool. */
static inline void close_pair(struct ub__dev *a, struct ub__dev *b, struct ub__pktpool *pa,
                              struct ub__pktpool *pb)
{
    ub__dev_close(a);
    ub__dev_close(b);
    assert_int_equal(pa->avail, pa->count);
    assert_int_equal(pb->avail, pb->count);
    ub__pktpool_fini(pa);
    ub__pktpool_fini(pb);
}

/* Sends every packet, retrying (bounded) if a socket is momentarily full. */
static inline void send_all(struct ub__dev *d, struct ub__pkt **pk, uint32_t n)
{
    uint32_t k = 0;
    for (int it = 0; it < 10000 && k < n; it++) {
        int r = ub__dev_send(d, pk + k, n - k);
        assert_true(r >= 0);
        k += (uint32_t)r;
    }
    assert_int_equal(k, n);
}

#endif
