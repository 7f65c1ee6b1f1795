/*
 * ECN from the socket to NSCC, over real loopback UDP devices.
 *
 * Two engines, each on a udp device (127.0.0.1, 4 paths). The test drives them itself and
 * injects time (a virtual clock: the engine is sans-I/O), so every RTT sample is exact while
 * every datagram really crosses the kernel. Packets go one at a time (each ACKed at once: AR).
 *
 *  - phase 1: 20 packets, unmarked, RTT 20 us (the configured base RTT);
 *  - phase 2: 150 packets whose IP header the sender's device sets to CE (the test sets
 *    pkt->ecn = 3 between ub__engine_output and ub__dev_send: the device writes a per-packet
 *    IP_TOS cmsg), RTT 80 us (60 us of "queueing" above the 20 us target).
 *
 * The receiver's device reads the TOS byte (IP_RECVTOS) into pkt->ecn, its PDS counts rx_ce
 * and echoes M in the ACK, and the sender's PDS hands ecn = true to NSCC. A shadow NSCC fed
 * the same events (sizes, RTTs, marks, times) must have exactly the same window after every
 * ACK: the window shrinks exactly as the algorithm's own trajectory says.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <softub/errors.h>
#include "cms/cc.h"
#include "core/clock.h"
#include "dev/udp.h"
#include "engine/engine.h"
#include "wire/ses.h"

#define PAYLOAD  1000u
#define BASE_RTT 20000u /* ns */
#define MARK_RTT 80000u
#define N_CLEAN  20u
#define N_MARKED 150u

struct side {
    struct ub__engine eng;
    struct ub__dev *dev;
    int ep;
};

static void side_open(struct side *s, uint64_t seed)
{
    struct ub__udp_cfg uc;
    assert_int_equal(ub__udp_cfg_parse("127.0.0.1:0?paths=4&gso=0&gro=0", &uc), 0);
    assert_int_equal(ub__udp_open(&uc, &s->dev), 0);
    struct ub__engine_cfg ec = {
        .seed = seed,
        .mtu = 1500,
        .num_paths = 4,
        .pool_bufs = 256,
        .pds =
            {
                .mtu = 1500,
                .num_paths = 4,
                .cc_algo = "nscc",
                .lb_algo = "reps",
                .link_bps = 100000000000ULL,
                .base_rtt_ns = BASE_RTT,
                .trimming = false, /* target queueing delay = 1 x base RTT = 20 us */
                .rto_init_ns = 10 * UB_NS_PER_S,
                .rto_min_ns = 10 * UB_NS_PER_S,
                .rto_max_ns = 20 * UB_NS_PER_S,
                .no_probe = true,
            },
    };
    assert_int_equal(ub__engine_init(&s->eng, &ec), 0);
    s->ep = epoll_create1(0);
    assert_true(s->ep >= 0);
    struct epoll_event ev = {.events = EPOLLIN};
    assert_int_equal(epoll_ctl(s->ep, EPOLL_CTL_ADD, ub__dev_fd(s->dev), &ev), 0);
}

static void side_close(struct side *s)
{
    ub__engine_fini(&s->eng);
    ub__dev_close(s->dev);
    close(s->ep);
}

/* Receives (bounded wait, real time) at least one datagram into the engine at virtual `now`. */
static uint32_t pump_in(struct side *s, uint64_t now)
{
    struct ub__pkt *p[16];
    uint64_t end = ub__clock_monotonic_ns(NULL) + 2 * UB_NS_PER_S;
    for (int it = 0; it < 2000 && ub__clock_monotonic_ns(NULL) < end; it++) {
        int n = ub__dev_recv(s->dev, p, 16, &s->eng.pool);
        assert_true(n >= 0);
        if (n > 0) {
            ub__engine_input(&s->eng, p, (uint32_t)n, now);
            return (uint32_t)n;
        }
        struct epoll_event ev;
        int r = epoll_wait(s->ep, &ev, 1, 20);
        assert_true(r >= 0 || errno == EINTR);
    }
    fail_msg("nothing arrived");
    return 0;
}

/* Sends what the engine has at `now`; ce: mark every datagram CE. Returns the bytes sent. */
static uint32_t pump_out(struct side *s, uint64_t now, bool ce, uint32_t *count)
{
    struct ub__pkt *p[16];
    uint32_t n = ub__engine_output(&s->eng, p, 16, now), bytes = 0;
    for (uint32_t i = 0; i < n; i++) {
        bytes += p[i]->len; /* real buffers: the wire size */
        if (ce)
            p[i]->ecn = 3; /* the test's hook: the device sends this codepoint (IP_TOS cmsg) */
    }
    if (n)
        assert_int_equal(ub__dev_send(s->dev, p, n), (int)n);
    if (count)
        *count = n;
    return bytes;
}

static void queue_one(struct side *a, const struct ub__addr *dst, uint32_t id, uint64_t now)
{
    struct ub__pkt *p = ub__pkt_alloc(&a->eng.pool);
    assert_non_null(p);
    struct ub__ses_std s = {
        .opcode = UB_SES_OP_SEND, .flags = UB_SES_F_SOM | UB_SES_F_EOM, .request_length = PAYLOAD};
    struct ub__wcur w;
    ub__wcur_init(&w, ub__pkt_put(p, UB_SES_STD_SIZE), UB_SES_STD_SIZE);
    assert_int_equal(ub__ses_std_encode(&s, &w), 0);
    memset(ub__pkt_put(p, PAYLOAD), (int)(id & 0xff), PAYLOAD);
    struct ub__pds_tx tx = {.dst = dst,
                            .mode = UB_PDS_RUD,
                            .cookie = id + 1,
                            .ses_kind = UB_PDS_NH_REQ_STD,
                            .ack_req = true};
    assert_int_equal(ub__pds_send(a->eng.pds, &tx, p, now), 0);
}

static uint32_t acked_count;

static void on_acked(void *arg, uint64_t cookie, uint64_t now)
{
    (void)arg;
    (void)cookie;
    (void)now;
    acked_count++;
}

static void on_failed(void *arg, uint64_t cookie, int err, uint64_t now)
{
    (void)arg;
    (void)cookie;
    (void)now;
    fail_msg("packet failed: %d", err);
}

static void on_deliver(void *arg, const struct ub__pds_rx *r, uint64_t now)
{
    (void)arg;
    (void)r;
    (void)now;
}

static const struct ub__pds_upcalls up = {
    .deliver = on_deliver, .acked = on_acked, .failed = on_failed};

static void test_ce_reaches_nscc(void **state)
{
    (void)state;
    struct side a, b;
    side_open(&a, 11);
    side_open(&b, 22);
    ub__pds_set_upcalls(a.eng.pds, &up, NULL);
    ub__pds_set_upcalls(b.eng.pds, &up, NULL);
    acked_count = 0;
    const struct ub__addr *dst = &b.dev->local;

    /* The shadow: PDS's parameters (src/pds/pds.c), fed what this test knows happened. */
    struct ub__cc_params cp = {.link_bps = 100000000000ULL,
                               .base_rtt_ns = BASE_RTT,
                               .mtu = 1500,
                               .trimming = false,
                               .qa_gate = -1};
    struct ub__cc shadow;
    assert_int_equal(ub__cc_init(&shadow, ub__cc_algo_find("nscc"), &cp), 0);

    uint64_t t = 1000000; /* virtual ns */
    uint64_t cwnd_before_marks = 0, cwnd_min = UINT64_MAX;
    for (uint32_t i = 0; i < N_CLEAN + N_MARKED; i++) {
        bool ce = i >= N_CLEAN;
        uint64_t rtt = ce ? MARK_RTT : BASE_RTT;
        queue_one(&a, dst, i, t);
        uint32_t n;
        uint32_t bytes = pump_out(&a, t, ce, &n);
        assert_int_equal(n, 1); /* one data packet, nothing else */
        ub__cc_on_send(&shadow, bytes, t);
        /* The target gets it half an RTT later and ACKs at once (AR, or the CE mark). */
        assert_int_equal(pump_in(&b, t + rtt / 2), 1);
        uint32_t nack;
        pump_out(&b, t + rtt / 2, false, &nack);
        assert_int_equal(nack, 1);
        uint32_t before = acked_count;
        assert_int_equal(pump_in(&a, t + rtt), 1);
        assert_int_equal(acked_count, before + 1);
        struct ub__cc_ack ack = {.acked_bytes = bytes,
                                 .inflight = 0,
                                 .rtt_ns = rtt,
                                 .ecn = ce,
                                 .has_nscc = true,
                                 .service_ns = 0};
        ub__cc_on_ack(&shadow, &ack, t + rtt);
        const struct ub__cc *cc = ub__pds_cc(a.eng.pds, dst);
        assert_non_null(cc);
        if (ub__cc_cwnd(cc) != ub__cc_cwnd(&shadow))
            fail_msg("packet %u: PDS's NSCC window %" PRIu64 ", the shadow's %" PRIu64, i,
                     ub__cc_cwnd(cc), ub__cc_cwnd(&shadow));
        if (i + 1 == N_CLEAN)
            cwnd_before_marks = ub__cc_cwnd(cc);
        if (ub__cc_cwnd(cc) < cwnd_min)
            cwnd_min = ub__cc_cwnd(cc);
        assert_int_equal(cc->st.md, shadow.st.md);
        t += rtt + 1000;
    }
    const struct ub__cc *cc = ub__pds_cc(a.eng.pds, dst);
    struct ub__udp_stats us;
    assert_int_equal(ub__udp_stats(b.dev, &us), 0);
    const struct ub__pds_stats *pa = ub__pds_stats(a.eng.pds), *pb = ub__pds_stats(b.eng.pds);
    print_message("cwnd %" PRIu64 " B before the marks, %" PRIu64
                  " B after %u CE packets (min %" PRIu64 "), %" PRIu64
                  " multiplicative decreases; udp rx_ce %" PRIu64 ", pds rx_ce %" PRIu64
                  " acks_ecn_tx %" PRIu64 " acks_ecn_rx %" PRIu64 "\n",
                  cwnd_before_marks, ub__cc_cwnd(cc), N_MARKED, cwnd_min, cc->st.md, us.rx_ce,
                  pb->rx_ce, pb->acks_ecn_tx, pa->acks_ecn_rx);
    /* Every mark was read from the socket, echoed, and seen by the initiator. */
    assert_int_equal(us.rx_ce, N_MARKED);
    assert_int_equal(pb->rx_ce, N_MARKED);
    assert_int_equal(pb->acks_ecn_tx, N_MARKED);
    assert_int_equal(pa->acks_ecn_rx, N_MARKED);
    assert_int_equal(pa->retx_pkts, 0);
    /* And NSCC acted on them: decreases, the window well below where it was. */
    assert_true(cc->st.md > 0);
    assert_true(ub__cc_cwnd(cc) * 2 < cwnd_before_marks);
    side_close(&a);
    side_close(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ce_reaches_nscc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
