/*
 * Lossless carriers (docs/pds.md): a PDC to a UB_AF_SHM peer has no congestion context, no
 * tail-loss probes and a retransmission timer of at least UB_PDS_LOSSLESS_RTO_NS, yet a dead
 * peer still fails its packets with UB_EUNREACH within a bound. A udp peer keeps the normal
 * timers; no_lossless turns the treatment off.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <softub/errors.h>
#include "core/clock.h"
#include "pds/pds.h"
#include "wire/datagram.h"
#include "unit/pds_send8.h"

#define L_MS 1000000ull

struct lrig {
    struct ub__timers timers;
    struct ub__pktpool pool;
    struct ub__rng rng;
    struct ub__pds *pds;
    uint32_t acked, failed;
    int err;
    uint64_t failed_at;
};

static void l_deliver(void *arg, const struct ub__pds_rx *rx, uint64_t now)
{
    (void)arg;
    (void)rx;
    (void)now;
}

static void l_acked(void *arg, uint64_t cookie, uint64_t now)
{
    (void)cookie;
    (void)now;
    ((struct lrig *)arg)->acked++;
}

static void l_failed(void *arg, uint64_t cookie, int err, uint64_t now)
{
    (void)cookie;
    struct lrig *r = arg;
    r->failed++;
    r->err = err;
    r->failed_at = now;
}

static const struct ub__pds_upcalls l_up = {
    .deliver = l_deliver, .acked = l_acked, .failed = l_failed};

static void rig_open(struct lrig *r, bool no_lossless)
{
    memset(r, 0, sizeof(*r));
    assert_int_equal(ub__timers_init(&r->timers, 16), 0);
    assert_int_equal(ub__pktpool_init(&r->pool, 64, 4096 + 64, 64), 0);
    ub__rng_seed(&r->rng, 7);
    struct ub__pds_cfg cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.no_lossless = no_lossless;
    assert_int_equal(ub__pds_create(&r->pds, &cfg, &r->timers, &r->pool, &r->rng, NULL), 0);
    ub__pds_set_upcalls(r->pds, &l_up, r);
}

static void rig_close(struct lrig *r)
{
    ub__pds_destroy(r->pds, 0);
    ub__pktpool_fini(&r->pool);
    ub__timers_fini(&r->timers);
}

/* A packet PDS can carry and the receiver can parse: an 8-byte SEND with its SES header. */
static struct ub__pkt *l_pkt(struct lrig *r)
{
    return t_send8_pkt(&r->pool);
}

/* Sends one packet to dst at time 0 and throws away what PDS hands out: a dead peer. */
static void send_into_void(struct lrig *r, const struct ub__addr *dst)
{
    struct ub__pkt *p = l_pkt(r);
    struct ub__pds_tx tx;
    memset(&tx, 0, sizeof(tx));
    tx.dst = dst;
    tx.mode = UB_PDS_RUD;
    tx.ses_kind = UB_PDS_NH_REQ_STD;
    tx.ack_req = true;
    tx.cookie = 1;
    assert_int_equal(ub__pds_send(r->pds, &tx, p, 0), 0);
    struct ub__pkt *out[4];
    assert_int_equal(ub__pds_pull(r->pds, out, 4, 0), 1);
    assert_int_equal(out[0]->addr.family, dst->family);
    ub__pkt_free(out[0]);
}

/* Runs the timers (dropping every retransmission) until the packet failed or `limit`. */
static void run_until_failed(struct lrig *r, uint64_t limit)
{
    uint64_t now = 0;
    while (!r->failed) {
        uint64_t t = ub__timers_next(&r->timers);
        if (t == UB_TIME_NEVER || t > limit)
            break;
        now = t;
        ub__timers_expire(&r->timers, now);
        struct ub__pkt *out[8];
        uint32_t n;
        while ((n = ub__pds_pull(r->pds, out, 8, now)) != 0)
            for (uint32_t i = 0; i < n; i++)
                ub__pkt_free(out[i]);
    }
}

static void test_shm_peer_is_lossless(void **state)
{
    (void)state;
    struct lrig r;
    rig_open(&r, false);
    struct ub__addr dst;
    memset(&dst, 0, sizeof(dst));
    dst.family = UB_AF_SHM;
    dst.port = 42;
    send_into_void(&r, &dst);
    assert_null(ub__pds_cc(r.pds, &dst)); /* no congestion context */
    assert_int_equal(ub__pds_cc_count(r.pds), 0);
    /* The first timer is the long RTO: no probe before it. */
    assert_true(ub__timers_next(&r.timers) >= UB_PDS_LOSSLESS_RTO_NS);
    run_until_failed(&r, 10000 * L_MS);
    const struct ub__pds_stats *st = ub__pds_stats(r.pds);
    assert_int_equal(r.failed, 1);
    assert_int_equal(r.err, UB_EUNREACH);
    assert_int_equal(r.acked, 0);
    assert_int_equal(st->retx_probe, 0);
    assert_int_equal(st->probes_sent, 0);
    assert_int_equal(st->rto_fired, 9); /* max_retries (8) backed-off RTOs, then failure */
    /* The bound: 50 ms doubling up to rto_max (100 ms), nine times. */
    assert_true(r.failed_at >= UB_PDS_LOSSLESS_RTO_NS);
    assert_true(r.failed_at <= 1000 * L_MS);
    rig_close(&r);
}

static void test_udp_peer_and_no_lossless_keep_short_timers(void **state)
{
    (void)state;
    for (int k = 0; k < 2; k++) {
        struct lrig r;
        rig_open(&r, k == 1);
        struct ub__addr dst;
        memset(&dst, 0, sizeof(dst));
        dst.family = k == 0 ? UB_AF_INET : UB_AF_SHM;
        dst.port = 4790;
        dst.ip[0] = 127;
        dst.ip[3] = 1;
        send_into_void(&r, &dst);
        assert_non_null(ub__pds_cc(r.pds, &dst));
        assert_true(ub__timers_next(&r.timers) < UB_PDS_LOSSLESS_RTO_NS);
        run_until_failed(&r, 10000 * L_MS);
        assert_int_equal(r.failed, 1);
        assert_int_equal(r.err, UB_EUNREACH);
        rig_close(&r);
    }
}

/* Hands every packet src emits to dst as if a device carried it; returns how many. Counts
 * requests that asked for an ACK (AR) in *ar. */
static uint32_t carry(struct lrig *src, const struct ub__addr *src_addr, struct lrig *dst,
                      uint64_t now, uint32_t *ar)
{
    struct ub__pkt *out[16];
    uint32_t n = ub__pds_pull(src->pds, out, 16, now);
    for (uint32_t i = 0; i < n; i++) {
        struct ub__pkt *p = out[i];
        p->addr = *src_addr;
        struct ub__wire_dgram d;
        assert_int_equal(ub__wire_parse_datagram(&d, p->data, p->len, 0), 0);
        if (ar && d.pds.type == UB_PDS_TYPE_RUD_REQ && (d.pds.u.req.flags & UB_PDS_REQ_F_AR))
            (*ar)++;
        assert_int_equal(ub__pds_input(dst->pds, p, &d, now), 1);
        ub__pkt_free(p);
    }
    return n;
}

/*
 * A lossless PDC does not ask for an ACK per latency-sensitive packet (only while it is
 * being opened), and its target ACKs every UB_PDS_LOSSLESS_ACK_EVERY packets (or on its
 * timer). A udp peer asks every time and is answered every time.
 */
static void test_lossless_acks_at_target_pace(void **state)
{
    (void)state;
    enum { N = 40 };
    for (int k = 0; k < 2; k++) {
        struct lrig a, b;
        rig_open(&a, false);
        rig_open(&b, false);
        struct ub__addr aa, ba;
        memset(&aa, 0, sizeof(aa));
        memset(&ba, 0, sizeof(ba));
        aa.family = ba.family = k == 0 ? UB_AF_SHM : UB_AF_INET;
        aa.port = 1;
        ba.port = 2;
        uint32_t ar = 0, acks = 0;
        for (uint32_t i = 0; i < N; i++) {
            struct ub__pkt *p = l_pkt(&a);
            struct ub__pds_tx tx;
            memset(&tx, 0, sizeof(tx));
            tx.dst = &ba;
            tx.mode = UB_PDS_RUD;
            tx.ses_kind = UB_PDS_NH_REQ_STD;
            tx.ack_req = true;
            tx.cookie = 1 + i;
            assert_int_equal(ub__pds_send(a.pds, &tx, p, 0), 0);
            assert_int_equal(carry(&a, &aa, &b, 0, i == 0 ? NULL : &ar), 1);
            acks += carry(&b, &ba, &a, 0, NULL);
        }
        if (k == 0) {
            uint32_t every = UB_PDS_LOSSLESS_ACK_EVERY;
            assert_int_equal(ar, 0); /* past the first (SYN) packet, none asked */
            assert_int_equal(acks, 1 + (N - 1) / every); /* the SYN's, then every 16th */
            assert_int_equal(a.acked, 1 + every * ((N - 1) / every));
            /* The rest on b's ACK timer. */
            uint64_t t = ub__timers_next(&b.timers);
            assert_true(t != UB_TIME_NEVER);
            ub__timers_expire(&b.timers, t);
            assert_int_equal(carry(&b, &ba, &a, t, NULL), 1);
            assert_int_equal(a.acked, N);
        } else {
            assert_int_equal(ar, N - 1);
            assert_int_equal(acks, N);
            assert_int_equal(a.acked, N);
        }
        rig_close(&a);
        rig_close(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shm_peer_is_lossless),
        cmocka_unit_test(test_udp_peer_and_no_lossless_keep_short_timers),
        cmocka_unit_test(test_lossless_acks_at_target_pace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
