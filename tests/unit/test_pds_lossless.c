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

static const struct ub__pds_upcalls l_up = {l_deliver, l_acked, l_failed};

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

/* Sends one packet to dst at time 0 and throws away what PDS hands out: a dead peer. */
static void send_into_void(struct lrig *r, const struct ub__addr *dst)
{
    struct ub__pkt *p = ub__pkt_alloc(&r->pool);
    assert_non_null(p);
    memset(ub__pkt_put(p, 32), 0, 32);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shm_peer_is_lossless),
        cmocka_unit_test(test_udp_peer_and_no_lossless_keep_short_timers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
