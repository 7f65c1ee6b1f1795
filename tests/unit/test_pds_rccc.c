/*
 * Receiver credits (RCCC) through PDS, on the deterministic test bed (docs/pds.md "Receiver
 * credits"). The loop fabric has latency but no link rate, so a sender goes exactly as fast as
 * its credit lets it: what arrives at the target per sender is what the target granted it.
 * Asserted: 3 senders -> 1 target share the configured grant rate equally (within one grant
 * quantum per interval plus a packet), one leaving hands its share to the other two, "rccc"
 * alone delivers everything exactly once (RUD and ROD, with and without loss), and
 * "nscc+rccc" is limited by the smaller of the NSCC window and the credit.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "cms/cc.h"
#include "core/clock.h"
#include "engine/testbed.h"
#include "wire/datagram.h"

#define LAT     2000u /* one-way latency, ns */
#define PAYLOAD 4000u
#define NODES   4u /* senders 0..2, target 3 */
#define TARGET  3u
#define MAXPKT  4096u

struct run {
    struct ub__testbed tb;
    uint32_t n[NODES];            /* packets offered per sender */
    uint8_t got[NODES][MAXPKT];   /* copies delivered per (sender, id) */
    uint32_t ndeliv[NODES], ndup; /* first copies, duplicates */
    uint64_t win_pkts[NODES];     /* first copies in the measuring window */
    uint64_t win_from, win_to;    /* measuring window, ns */
    uint64_t last_arr[NODES];     /* latest first-copy arrival */
    uint32_t nacked[NODES], nfailed;
};

static void on_deliver(void *arg, const struct ub__pds_rx *rx, uint64_t now)
{
    struct run *r = arg;
    uint32_t id, from;
    assert_int_equal(rx->payload_len, PAYLOAD);
    memcpy(&id, rx->payload, 4);
    memcpy(&from, rx->payload + 4, 4);
    assert_true(from < NODES && id < r->n[from]);
    if (r->got[from][id]++) {
        r->ndup++;
        return;
    }
    r->ndeliv[from]++;
    r->last_arr[from] = now;
    if (now >= r->win_from && now < r->win_to)
        r->win_pkts[from]++;
}

static void on_acked(void *arg, uint64_t cookie, uint64_t now)
{
    struct run *r = arg;
    (void)now;
    r->nacked[cookie >> 32]++;
}

static void on_failed(void *arg, uint64_t cookie, int err, uint64_t now)
{
    struct run *r = arg;
    (void)cookie;
    (void)err;
    (void)now;
    r->nfailed++;
}

static const struct ub__pds_upcalls upcalls = {
    .deliver = on_deliver, .acked = on_acked, .failed = on_failed};

static void cfg_default(struct ub__loopnet_cfg *nc, struct ub__engine_cfg *ec, uint64_t seed)
{
    memset(nc, 0, sizeof(*nc));
    memset(ec, 0, sizeof(*ec));
    nc->ports = NODES;
    nc->mtu = 4096;
    nc->num_paths = 4;
    nc->seed = seed;
    nc->latency_ns = LAT;
    nc->queue_cap = 16384;
    nc->checksum = true;
    ec->seed = seed;
    ec->mtu = 4096;
    ec->num_paths = 4;
    ec->pool_bufs = 8192;
    ec->pds.cc_algo = "rccc";
    ec->pds.rccc_rate_bps = 80000000000ull; /* 10 B/ns */
}

static void run_init(struct run *r, const struct ub__loopnet_cfg *nc,
                     const struct ub__engine_cfg *ec)
{
    memset(r, 0, sizeof(*r));
    r->win_to = 0;
    assert_int_equal(ub__testbed_create(&r->tb, NODES, nc, ec), 0);
    for (uint32_t i = 0; i < NODES; i++)
        ub__pds_set_upcalls(r->tb.nodes[i].eng.pds, &upcalls, r);
}

/* Queues `count` full packets from `from` to the target. */
static void offer(struct run *r, uint32_t from, uint32_t count, uint8_t mode)
{
    for (uint32_t k = 0; k < count; k++) {
        uint32_t id = r->n[from];
        assert_true(id < MAXPKT);
        struct ub__pkt *p = ub__pkt_alloc(&r->tb.nodes[from].eng.pool);
        assert_non_null(p);
        struct ub__ses_std s = {.opcode = UB_SES_OP_SEND,
                                .flags = UB_SES_F_SOM | UB_SES_F_EOM,
                                .request_length = PAYLOAD};
        struct ub__wcur w;
        ub__wcur_init(&w, ub__pkt_put(p, UB_SES_STD_SIZE), UB_SES_STD_SIZE);
        assert_int_equal(ub__ses_std_encode(&s, &w), 0);
        uint8_t *b = ub__pkt_put(p, PAYLOAD);
        memset(b, (int)(id & 0xff), PAYLOAD);
        memcpy(b, &id, 4);
        memcpy(b + 4, &from, 4);
        struct ub__pds_tx tx = {.dst = &r->tb.nodes[TARGET].addr,
                                .mode = mode,
                                .cookie = (uint64_t)from << 32 | id,
                                .ses_kind = UB_PDS_NH_REQ_STD};
        assert_int_equal(ub__pds_send(r->tb.nodes[from].eng.pds, &tx, p, r->tb.now), 0);
        r->n[from]++;
    }
}

static const struct ub__pds_stats *st(const struct run *r, uint32_t node)
{
    return ub__pds_stats(r->tb.nodes[node].eng.pds);
}

static uint32_t wire_size(const struct run *r, uint32_t node)
{
    const struct ub__pds_stats *s = st(r, node);
    assert_true(s->tx_pkts > 0);
    assert_int_equal(s->tx_bytes % s->tx_pkts, 0);
    return (uint32_t)(s->tx_bytes / s->tx_pkts);
}

static void check_all_once(const struct run *r)
{
    assert_int_equal(r->ndup, 0);
    assert_int_equal(r->nfailed, 0);
    for (uint32_t s = 0; s < NODES; s++) {
        assert_int_equal(r->ndeliv[s], r->n[s]);
        assert_int_equal(r->nacked[s], r->n[s]);
        for (uint32_t i = 0; i < r->n[s]; i++)
            assert_int_equal(r->got[s][i], 1);
    }
}

/*
 * 3 senders with a long backlog: over a window of W ns each receives rate x W / 3 bytes, within
 * one quantum plus one packet. Sender 0 has less to send; once it is done the other two split
 * the whole rate.
 */
static void test_fair_shares(void **state)
{
    (void)state;
    struct ub__loopnet_cfg nc;
    struct ub__engine_cfg ec;
    cfg_default(&nc, &ec, 31);
    static struct run r;
    run_init(&r, &nc, &ec);
    offer(&r, 0, 300, UB_PDS_RUD);
    offer(&r, 1, 1200, UB_PDS_RUD);
    offer(&r, 2, 1200, UB_PDS_RUD);
    const uint64_t rate = 10; /* B/ns */
    const uint64_t quantum = 4 * 4096;
    uint64_t t0 = r.tb.now;
    /* Phase 1: all three. Window [30, 230) us. */
    r.win_from = t0 + 30000;
    r.win_to = t0 + 230000;
    assert_false(ub__testbed_run(&r.tb, r.win_to + 1, 100000000));
    uint32_t size = wire_size(&r, 1);
    uint64_t want = rate * (r.win_to - r.win_from) / 3;
    printf("  rccc 3->1 at 80 Gbit/s, %u B packets, window 200 us: want %" PRIu64
           " B each, got %" PRIu64 " / %" PRIu64 " / %" PRIu64 " B\n",
           size, want, r.win_pkts[0] * size, r.win_pkts[1] * size, r.win_pkts[2] * size);
    for (uint32_t s = 0; s < 3; s++) {
        uint64_t got = r.win_pkts[s] * size;
        uint64_t diff = got > want ? got - want : want - got;
        assert_true(diff <= quantum + size);
    }
    /* Phase 2: sender 0 is done by 370 us (300 packets at a third of the rate); then
     * [420, 620) us. */
    memset(r.win_pkts, 0, sizeof(r.win_pkts));
    r.win_from = t0 + 420000;
    r.win_to = t0 + 620000;
    assert_false(ub__testbed_run(&r.tb, r.win_to + 1, 100000000));
    assert_int_equal(r.ndeliv[0], 300);
    assert_true(r.last_arr[0] < r.win_from);
    want = rate * (r.win_to - r.win_from) / 2;
    printf("  sender 0 done at %" PRIu64 " us; in [420, 620) us want %" PRIu64
           " B each, got %" PRIu64 " / %" PRIu64 " B\n",
           (r.last_arr[0] - t0) / 1000, want, r.win_pkts[1] * size, r.win_pkts[2] * size);
    assert_int_equal(r.win_pkts[0], 0);
    for (uint32_t s = 1; s < 3; s++) {
        uint64_t got = r.win_pkts[s] * size;
        uint64_t diff = got > want ? got - want : want - got;
        assert_true(diff <= quantum + size);
    }
    assert_true(ub__testbed_run(&r.tb, UB_NS_PER_S * 10, 100000000));
    check_all_once(&r);
    const struct ub__pds_stats *t = st(&r, TARGET);
    printf("  target: %" PRIu64 " credit requests, %" PRIu64 " grants in ACK_CC, %" PRIu64
           " in CTRL CREDIT, %" PRIu64 " B granted\n",
           t->credit_req_rx, t->credit_ack_tx, t->credit_tx, t->credit_bytes_tx);
    assert_true(t->credit_ack_tx > 0 && t->credit_tx > 0);
    /* Sender 0 asked once: the target granted exactly that and freed its slot (no "leave"
     * needed). No stall re-requests: at most one more each. */
    printf("  credit requests per sender: %" PRIu64 " / %" PRIu64 " / %" PRIu64 "\n",
           st(&r, 0)->credit_req_tx, st(&r, 1)->credit_req_tx, st(&r, 2)->credit_req_tx);
    assert_int_equal(st(&r, 0)->credit_req_tx, 1);
    assert_true(st(&r, 1)->credit_req_tx <= 2 && st(&r, 2)->credit_req_tx <= 2);
    ub__testbed_destroy(&r.tb);
}

/* "rccc" alone: everything arrives exactly once, RUD and ROD, clean and with 2 % loss. */
static void test_exactly_once(void **state)
{
    (void)state;
    for (int lossy = 0; lossy < 2; lossy++) {
        struct ub__loopnet_cfg nc;
        struct ub__engine_cfg ec;
        cfg_default(&nc, &ec, 32 + (uint64_t)lossy);
        static struct run r;
        run_init(&r, &nc, &ec);
        if (lossy) {
            for (uint16_t s = 0; s < 3; s++) {
                struct ub__impair_cfg ic = {.seed = 77 + s, .drop_ppm = 20000, .fifo = true};
                assert_int_equal(ub__loopnet_impair(r.tb.net, s, TARGET, &ic), 0);
                assert_int_equal(ub__loopnet_impair(r.tb.net, TARGET, s, &ic), 0);
            }
        }
        offer(&r, 0, 500, UB_PDS_RUD);
        offer(&r, 1, 500, UB_PDS_ROD);
        offer(&r, 2, 250, UB_PDS_RUD);
        offer(&r, 2, 250, UB_PDS_ROD);
        assert_true(ub__testbed_run(&r.tb, UB_NS_PER_S * 10, 100000000));
        check_all_once(&r);
        printf("  rccc %s: 1500 packets delivered once, %" PRIu64 " retransmissions, %" PRIu64
               " credit requests\n",
               lossy ? "2 % loss" : "clean",
               st(&r, 0)->retx_pkts + st(&r, 1)->retx_pkts + st(&r, 2)->retx_pkts,
               st(&r, TARGET)->credit_req_rx);
        ub__testbed_destroy(&r.tb);
    }
}

/*
 * "nscc+rccc": the limit is the smaller of the window and the credit. (a) Credit the smaller:
 * one sender gets exactly the grant rate (NSCC alone would fill its 1.5 BDP window every
 * RTT). (b) Window the smaller (a slow link: NSCC's window is one packet; a very high grant rate):
 * bytes in flight never exceed the window, and the run takes one RTT per packet.
 */
static void test_nscc_and_rccc(void **state)
{
    (void)state;
    struct ub__loopnet_cfg nc;
    struct ub__engine_cfg ec;
    static struct run r;
    /* (a) */
    cfg_default(&nc, &ec, 41);
    ec.pds.cc_algo = "nscc+rccc";
    ec.pds.rccc_rate_bps = 8000000000ull; /* 1 B/ns */
    run_init(&r, &nc, &ec);
    offer(&r, 0, 400, UB_PDS_RUD);
    const struct ub__cc *cc = ub__pds_cc(r.tb.nodes[0].eng.pds, &r.tb.nodes[TARGET].addr);
    assert_non_null(cc);
    assert_ptr_equal(cc->algo, &ub__cc_nscc);
    assert_true(cc->credit_on);
    uint64_t t0 = r.tb.now;
    r.win_from = t0 + 100000;
    r.win_to = t0 + 900000;
    assert_false(ub__testbed_run(&r.tb, r.win_to + 1, 100000000));
    uint32_t size = wire_size(&r, 0);
    uint64_t want = (r.win_to - r.win_from) * 1;
    uint64_t got = r.win_pkts[0] * size;
    printf("  nscc+rccc, credit the smaller: NSCC window %" PRIu64 " B, %" PRIu64
           " B in 800 us at 1 B/ns of credit (want %" PRIu64 ")\n",
           ub__cc_cwnd(cc), got, want);
    assert_true((got > want ? got - want : want - got) <= 4 * 4096 + size);
    assert_true(ub__testbed_run(&r.tb, UB_NS_PER_S * 10, 100000000));
    check_all_once(&r);
    ub__testbed_destroy(&r.tb);

    /* (b) */
    cfg_default(&nc, &ec, 42);
    ec.pds.cc_algo = "nscc+rccc";
    ec.pds.rccc_rate_bps = 800000000000ull; /* 100 B/ns */
    ec.pds.rccc_init_credit = 1000000;
    ec.pds.link_bps = 800000000ull; /* NSCC's max window: 1.5 x 0.1 B/ns x 12 us = 1800 B */
    run_init(&r, &nc, &ec);
    offer(&r, 0, 400, UB_PDS_RUD);
    cc = ub__pds_cc(r.tb.nodes[0].eng.pds, &r.tb.nodes[TARGET].addr);
    uint64_t samples = 0;
    t0 = r.tb.now;
    while (r.ndeliv[0] < 400 && samples < 1000000) {
        ub__testbed_run(&r.tb, r.tb.now + 100, 1000000);
        uint64_t infl = ub__pds_cc_inflight(r.tb.nodes[0].eng.pds, &r.tb.nodes[TARGET].addr);
        /* A lone packet may go whatever the window (PDS never deadlocks below one packet). */
        assert_true(infl <= (ub__cc_cwnd(cc) > size ? ub__cc_cwnd(cc) : size));
        samples++;
    }
    uint64_t took = r.tb.now - t0;
    printf("  nscc+rccc, window the smaller: window %" PRIu64
           " B, in flight <= window in all %" PRIu64 " samples; 400 packets took %" PRIu64
           " us (credit alone: %" PRIu64 " us)\n",
           ub__cc_cwnd(cc), samples, took / 1000, 400 * (uint64_t)size / 100 / 1000);
    /* About one packet per RTT (the window), not the credit's 100 B/ns. */
    assert_true(took >= 399 * 2 * (uint64_t)LAT);
    assert_true(ub__testbed_run(&r.tb, UB_NS_PER_S * 10, 100000000));
    check_all_once(&r);
    ub__testbed_destroy(&r.tb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fair_shares),
        cmocka_unit_test(test_exactly_once),
        cmocka_unit_test(test_nscc_and_rccc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
