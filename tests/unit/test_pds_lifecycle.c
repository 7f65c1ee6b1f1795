/*
 * PDC life cycle: lost SYN, PSN wrap-around, idle close on both sides (and a lost CLOSE),
 * target-requested close, eviction with a small table then re-establishment with nothing lost
 * or duplicated, stale packets of a closed PDC rejected, peer restart (target and initiator),
 * a black-holed peer failing every packet with UB_EUNREACH within the configured bound, tail
 * loss repaired by a probe, lost ACKs, and MP_RANGE respected at the target.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "pds/pds_int.h"
#include "test_pds_harness.h"

static void setup(struct h_run *h, uint8_t mode, uint32_t nmsg, uint64_t seed,
                  void (*tweak)(struct ub__loopnet_cfg *, struct ub__engine_cfg *))
{
    struct ub__loopnet_cfg nc;
    struct ub__engine_cfg ec;
    h_default_cfg(&nc, &ec, seed);
    if (tweak)
        tweak(&nc, &ec);
    h_init(h, &nc, &ec, 2, mode, nmsg);
}

static void impair(struct h_run *h, uint16_t s, uint16_t d, struct ub__impair_cfg *ic)
{
    assert_int_equal(ub__loopnet_impair(h->tb.net, s, d, ic), 0);
}

/* ---- SYN loss, lost ACKs, tail loss ------------------------------------------------ */

static void test_syn_lost(void **state)
{
    (void)state;
    for (uint8_t mode = UB_PDS_RUD; mode <= UB_PDS_ROD; mode++) {
        struct h_run h;
        setup(&h, mode, 50, 11 + mode, NULL);
        struct ub__impair_cfg ic = {.seed = 1};
        ub__impair_add(&ic, UB_IMPAIR_DROP_BURST, 0, 3, 0); /* the SYN and two followers */
        impair(&h, 0, 1, &ic);
        h_pump(&h, 5 * UB_NS_PER_S);
        h_assert_exactly_once(&h);
        assert_true(h_st(&h, 0)->retx_pkts >= 3);
        assert_int_equal(h_st(&h, 1)->pdc_accepted, 1);
        h_assert_no_leak(&h);
        h_fini(&h);
    }
}

static void test_acks_lost(void **state)
{
    (void)state;
    struct h_run h;
    setup(&h, UB_PDS_RUD, 2000, 12, NULL);
    struct ub__impair_cfg ic = {.seed = 2, .drop_ppm = 500000}; /* half the ACKs */
    ub__impair_add(&ic, UB_IMPAIR_DROP_BURST, 10, 30, 0);
    impair(&h, 1, 0, &ic);
    h_pump(&h, 10 * UB_NS_PER_S);
    h_assert_exactly_once(&h);
    /* Only ACKs were lost: every retransmission reached a target that had the packet. */
    assert_int_equal(h_st(&h, 0)->retx_pkts, h_st(&h, 1)->spurious_retx);
    h_fini(&h);
}

static void test_tail_loss_probe(void **state)
{
    (void)state;
    struct h_run h;
    setup(&h, UB_PDS_RUD, 40, 13, NULL);
    /* Warm up (an RTT sample), then lose the last 3 packets of a burst: only a probe sees it. */
    h_offer(&h, 20);
    ub__testbed_run(&h.tb, h.tb.now + 50 * 1000 * 1000, 1000000);
    struct ub__impair_cfg ic = {.seed = 3};
    uint32_t burst = h.npkt - 20;
    ub__impair_add(&ic, UB_IMPAIR_DROP_BURST, burst - 3, 3, 0);
    impair(&h, 0, 1, &ic);
    h_pump(&h, 5 * UB_NS_PER_S);
    h_assert_exactly_once(&h);
    const struct ub__pds_stats *s = h_st(&h, 0);
    assert_true(s->retx_probe >= 1);
    assert_int_equal(s->rto_fired, 0); /* the probe and the SACK it provoked did it all */
    h_fini(&h);
}

/* ---- PSN wrap ------------------------------------------------------------------------ */

static void near_wrap(struct ub__loopnet_cfg *nc, struct ub__engine_cfg *ec)
{
    (void)nc;
    ec->pds.start_psn = 0xffffff00u;
}

static void test_psn_wrap(void **state)
{
    (void)state;
    for (uint8_t mode = UB_PDS_RUD; mode <= UB_PDS_RUDI; mode++) {
        struct h_run h;
        setup(&h, mode, 1000, 14 + mode, near_wrap);
        struct ub__impair_cfg ic = {
            .seed = 4, .drop_ppm = 50000, .reorder_ppm = 20000, .reorder_depth = 16};
        impair(&h, 0, 1, &ic);
        impair(&h, 1, 0, &ic);
        h.on_rx = NULL;
        h_pump(&h, 10 * UB_NS_PER_S);
        if (mode == UB_PDS_RUDI) {
            for (uint32_t i = 0; i < h.npkt; i++)
                assert_true(h.delivered[i] >= 1 && h.acked[i] == 1);
        } else {
            h_assert_exactly_once(&h);
        }
        assert_true(h.npkt > 0x100); /* the PSNs did wrap */
        h_fini(&h);
    }
}

/* ---- idle close, lost CLOSE, target-requested close ------------------------------ */

static void test_idle_close(void **state)
{
    (void)state;
    struct h_run h;
    setup(&h, UB_PDS_RUD, 100, 15, NULL);
    struct ub__impair_cfg ic = {.seed = 5};
    impair(&h, 0, 1, &ic);
    h_offer(&h, h.npkt);
    ub__testbed_run(&h.tb, h.tb.now + 10 * 1000 * 1000, 10000000);
    assert_int_equal(ub__pds_ipdc_count(h.tb.nodes[0].eng.pds), 1);
    assert_int_equal(ub__pds_tpdc_count(h.tb.nodes[1].eng.pds), 1);
    /* Lose the CLOSE (and its first retry): the initiator's RTO repeats it. */
    ub__impair_add(&ic, UB_IMPAIR_DROP_BURST, 0, 2, 0);
    impair(&h, 0, 1, &ic);
    assert_true(ub__testbed_run(&h.tb, h.tb.now + 10 * UB_NS_PER_S, 10000000));
    assert_int_equal(ub__pds_ipdc_count(h.tb.nodes[0].eng.pds), 0);
    assert_int_equal(ub__pds_tpdc_count(h.tb.nodes[1].eng.pds), 0);
    assert_int_equal(h_st(&h, 0)->pdc_closed, 1);
    assert_int_equal(h_st(&h, 1)->pdc_closed, 1);
    h_assert_exactly_once(&h);
    h_fini(&h);
}

static void small_table(struct ub__loopnet_cfg *nc, struct ub__engine_cfg *ec)
{
    nc->ports = 6;
    ec->pds.max_pdcs = 4;
}

/* Sends `n` packets from node `from` to node 0 in mode RUD with cookies >= base. */
static void send_to0(struct h_run *h, uint16_t from, uint32_t first, uint32_t n)
{
    h->src = from;
    h->dst = 0;
    for (uint32_t i = 0; i < n; i++)
        assert_true(h_send_one(h, first + i));
}

static void test_eviction_and_reestablish(void **state)
{
    (void)state;
    struct h_run h;
    struct ub__loopnet_cfg nc;
    struct ub__engine_cfg ec;
    h_default_cfg(&nc, &ec, 16);
    small_table(&nc, &ec);
    h_init(&h, &nc, &ec, 6, UB_PDS_RUD, 3000);
    /* Nodes 1..5 each talk to node 0, whose target table holds only 4 PDCs. */
    uint32_t pid = 0;
    for (int round = 0; round < 6; round++) {
        for (uint16_t from = 1; from <= 5; from++) {
            send_to0(&h, from, pid, 50);
            pid += 50;
            ub__testbed_run(&h.tb, h.tb.now + 200 * 1000, 1000000);
        }
    }
    h.next_pkt = pid;
    assert_true(ub__testbed_run(&h.tb, h.tb.now + 30 * UB_NS_PER_S, 100000000));
    const struct ub__pds_stats *t = h_st(&h, 0);
    /* Five initiators, four slots: contexts were closed at the target's request or evicted. */
    assert_true(t->pdc_accepted > 5);
    assert_true(t->ctrl_tx > 0); /* CLOSE_REQs */
    assert_true(t->pdc_closed + t->pdc_evicted + 4 >= t->pdc_accepted);
    assert_true(ub__pds_tpdc_count(h.tb.nodes[0].eng.pds) <= 4);
    uint32_t missing = 0, multi = 0;
    for (uint32_t i = 0; i < pid; i++) {
        missing += !h.delivered[i];
        multi += h.delivered[i] > 1;
        assert_int_equal(h.acked[i], 1);
        assert_int_equal(h.failed[i], 0);
    }
    assert_int_equal(missing, 0);
    assert_int_equal(multi, 0);
    assert_int_equal(h.corrupt + h.dup_deliv, 0);
    h_assert_no_leak(&h);
    h_fini(&h);
}

/* Evicted while the initiator still has packets in flight: CLOSING NACK, re-establishment. */
static void eviction_mid_flow(bool own)
{
    struct h_run h;
    struct ub__loopnet_cfg nc;
    struct ub__engine_cfg ec;
    h_default_cfg(&nc, &ec, 17);
    nc.ports = 3;
    ec.pds.max_pdcs = 1;
    h_init(&h, &nc, &ec, 3, UB_PDS_RUD, 400);
    h.own = own;
    /* 1 -> 0: a flow; then 2 -> 0 wants the only slot once 1's PDC is quiescent. */
    send_to0(&h, 1, 0, 100);
    assert_true(ub__testbed_run(&h.tb, h.tb.now + 1000 * 1000, 1000000) || true);
    send_to0(&h, 2, 100, 100);
    ub__testbed_run(&h.tb, h.tb.now + 1000 * 1000, 1000000);
    send_to0(&h, 1, 200, 100); /* to a PDC the target evicted: re-established */
    ub__testbed_run(&h.tb, h.tb.now + 1000 * 1000, 1000000);
    send_to0(&h, 2, 300, 100);
    h.next_pkt = 400;
    ub__testbed_run(&h.tb, h.tb.now + 30 * UB_NS_PER_S, 100000000);
    uint32_t missing = 0, multi = 0;
    for (uint32_t i = 0; i < 400; i++) {
        missing += !h.delivered[i];
        multi += h.delivered[i] > 1;
        assert_int_equal(h.acked[i] + h.failed[i], 1);
    }
    assert_int_equal(multi, 0);
    assert_int_equal(h.nfailed, 0);
    assert_int_equal(missing, 0);
    assert_true(h_st(&h, 0)->pdc_evicted >= 1);
    assert_true(h_st(&h, 1)->pdc_opened >= 2 || h_st(&h, 2)->pdc_opened >= 2);
    h_assert_no_leak(&h);
    h_fini(&h);
}

static void test_reestablish_after_eviction_mid_flow(void **state)
{
    (void)state;
    eviction_mid_flow(false);
}

/* Packets sent with own to a target that never says OWN re-establish as any other: what the
 * target had is acknowledged, not sent again. */
static void test_reestablish_own_without_own_acks(void **state)
{
    (void)state;
    eviction_mid_flow(true);
}

/* ---- stale packets of a closed PDC ----------------------------------------------- */

static struct ub__pkt *captured[64];
static uint32_t ncaptured;

static void test_quarantine_rejects_stale(void **state)
{
    (void)state;
    struct h_run h;
    setup(&h, UB_PDS_RUD, 20, 18, NULL);
    h_offer(&h, h.npkt);
    /* Keep a copy of every data packet node 0 emits before the fabric sees it. */
    ncaptured = 0;
    struct ub__engine *e0 = &h.tb.nodes[0].eng;
    struct ub__pkt *out[64];
    uint32_t n = ub__engine_output(e0, out, 64, h.tb.now);
    for (uint32_t i = 0; i < n && ncaptured < 64; i++)
        captured[ncaptured++] = ub__pkt_clone(out[i]);
    assert_int_equal(ub__dev_send(h.tb.nodes[0].dev, out, n), (int)n);
    assert_true(ub__testbed_run(&h.tb, h.tb.now + 10 * UB_NS_PER_S, 10000000));
    h_assert_exactly_once(&h);
    assert_int_equal(ub__pds_tpdc_count(h.tb.nodes[1].eng.pds), 0); /* closed by now */
    /* Replay the old packets (SYN included): all stale, none delivered, no PDC reopened. */
    uint64_t stale0 = h_st(&h, 1)->rx_stale, acc0 = h_st(&h, 1)->pdc_accepted;
    assert_int_equal(ub__dev_send(h.tb.nodes[0].dev, captured, ncaptured), (int)ncaptured);
    ub__testbed_run(&h.tb, h.tb.now + UB_NS_PER_S, 1000000);
    assert_int_equal(h_st(&h, 1)->rx_stale - stale0, ncaptured);
    assert_int_equal(h_st(&h, 1)->pdc_accepted, acc0);
    assert_int_equal(h.ndeliv, h.npkt);
    assert_int_equal(h.dup_deliv, 0);
    h_assert_no_leak(&h);
    h_fini(&h);
}

/* ---- peer restart ------------------------------------------------------------------- */

static void restart_node(struct h_run *h, uint16_t i, uint64_t seed)
{
    struct ub__tb_node *nd = &h->tb.nodes[i];
    struct ub__engine_cfg ec = nd->eng.cfg;
    ec.seed = seed;
    /* The fabric returns what it holds for this node's pool first: close and reopen its port. */
    ub__engine_fini(&nd->eng);
    assert_int_equal(ub__engine_init(&nd->eng, &ec), 0);
    ub__pds_set_upcalls(nd->eng.pds, &h_upcalls, h);
}

static void test_target_restart(void **state)
{
    (void)state;
    struct h_run h;
    setup(&h, UB_PDS_RUD, 400, 19, NULL);
    /* The target goes dark mid-flow (drops everything), restarts, comes back. */
    h_offer(&h, 200);
    ub__testbed_run(&h.tb, h.tb.now + 1000 * 1000, 1000000);
    struct ub__impair_cfg ic = {.seed = 9};
    ub__impair_add(&ic, UB_IMPAIR_BLACKHOLE_PKT, 0, 0, 0);
    impair(&h, 0, 1, &ic);
    h_offer(&h, 300); /* these are in flight when the target restarts */
    ub__testbed_run(&h.tb, h.tb.now + 100 * 1000, 1000000);
    uint32_t inc_before = ub__pds_incarnation(h.tb.nodes[1].eng.pds);
    /* Drain what the fabric holds for node 1 so its pool can close cleanly. */
    ub__testbed_run(&h.tb, h.tb.now + 100 * 1000, 1000000);
    restart_node(&h, 1, 999);
    assert_int_not_equal(ub__pds_incarnation(h.tb.nodes[1].eng.pds), inc_before);
    impair(&h, 0, 1, NULL);
    ub__testbed_run(&h.tb, h.tb.now + 10 * UB_NS_PER_S, 100000000);
    /* Packets 200..299 were in flight towards the old target: failed with a distinct error. */
    uint32_t stale = 0;
    for (uint32_t i = 200; i < 300; i++) {
        assert_int_equal(h.acked[i] + h.failed[i], 1);
        if (h.failed[i]) {
            assert_int_equal(h.fail_err[i], UB_ESTALE);
            stale++;
        }
    }
    assert_true(stale > 0);
    /* New sends work. */
    h_pump(&h, 10 * UB_NS_PER_S);
    for (uint32_t i = 300; i < h.npkt; i++) {
        assert_int_equal(h.delivered[i], 1);
        assert_int_equal(h.acked[i], 1);
    }
    assert_int_equal(h.corrupt + h.dup_deliv, 0);
    h_fini(&h);
}

static void test_initiator_restart(void **state)
{
    (void)state;
    struct h_run h;
    setup(&h, UB_PDS_RUD, 400, 20, NULL);
    h_offer(&h, 200);
    ub__testbed_run(&h.tb, h.tb.now + 1000 * 1000, 1000000);
    assert_int_equal(ub__pds_tpdc_count(h.tb.nodes[1].eng.pds), 1);
    /* The initiator restarts with the same address and, by bad luck, the same PDC ids. */
    ub__testbed_run(&h.tb, h.tb.now + 1000 * 1000, 1000000);
    restart_node(&h, 0, 12345);
    h_pump(&h, 10 * UB_NS_PER_S);
    for (uint32_t i = 0; i < h.npkt; i++) {
        assert_int_equal(h.delivered[i], 1);
        assert_int_equal(h.acked[i], 1);
    }
    /* The restarted initiator's packets opened a new target PDC: a new incarnation. */
    assert_int_equal(h_st(&h, 1)->pdc_accepted, 2);
    assert_int_equal(h.corrupt + h.dup_deliv, 0);
    h_fini(&h);
}

/* ---- black hole: bounded failure ------------------------------------------------------- */

static void test_blackhole_bounded(void **state)
{
    (void)state;
    for (uint8_t mode = UB_PDS_RUD; mode <= UB_PDS_RUDI; mode++) {
        struct h_run h;
        setup(&h, mode, 300, 21 + mode, NULL);
        h_offer(&h, 100);
        ub__testbed_run(&h.tb, h.tb.now + 1000 * 1000, 1000000);
        struct ub__impair_cfg ic = {.seed = 9};
        ub__impair_add(&ic, UB_IMPAIR_BLACKHOLE_PKT, 0, 0, 0);
        impair(&h, 0, 1, &ic);
        uint64_t t0 = h.tb.now;
        h_offer(&h, h.npkt);
        /* The bound: every RTO at most rto_max, max_retries + 1 of them, plus the probe. */
        const struct ub__pds_cfg *cfg = &h.tb.nodes[0].eng.pds->cfg;
        uint64_t bound = (uint64_t)(cfg->max_retries + 2) * cfg->rto_max_ns;
        assert_true(ub__testbed_run(&h.tb, t0 + bound + UB_NS_PER_S, 100000000));
        uint32_t failed = 0;
        for (uint32_t i = 0; i < h.npkt; i++) {
            assert_int_equal(h.acked[i] + h.failed[i], 1);
            if (h.failed[i]) {
                assert_int_equal(h.fail_err[i], UB_EUNREACH);
                failed++;
            }
        }
        assert_true(failed >= h.npkt - 100);
        assert_true(h_st(&h, 0)->pdc_failed >= 1);
        assert_true(h.tb.now - t0 <= bound);
        h_fini(&h);
    }
}

static void fail_after_500ms(struct ub__loopnet_cfg *nc, struct ub__engine_cfg *ec)
{
    (void)nc;
    ec->pds.fail_after_ns = 500 * UB_NS_PER_MS;
}

/*
 * With a failure floor the retries alone do not fail a PDC: a black hole is declared
 * unreachable only once the peer has acknowledged nothing for fail_after_ns (and within
 * one more rto_max of it); without the floor the same run fails well before.
 */
static void test_blackhole_floor(void **state)
{
    (void)state;
    for (int floor = 0; floor < 2; floor++) {
        struct h_run h;
        setup(&h, UB_PDS_RUD, 300, 31, floor ? fail_after_500ms : NULL);
        h_offer(&h, 100);
        ub__testbed_run(&h.tb, h.tb.now + 1000 * 1000, 1000000);
        struct ub__impair_cfg ic = {.seed = 9};
        ub__impair_add(&ic, UB_IMPAIR_BLACKHOLE_PKT, 0, 0, 0);
        impair(&h, 0, 1, &ic);
        uint64_t t0 = h.tb.now;
        h_offer(&h, h.npkt);
        const struct ub__pds_cfg *cfg = &h.tb.nodes[0].eng.pds->cfg;
        assert_true(ub__testbed_run(&h.tb, t0 + 10 * UB_NS_PER_S, 100000000));
        assert_true(h_st(&h, 0)->pdc_failed >= 1);
        uint64_t took = h.tb.now - t0;
        if (floor) {
            assert_true(took >= 500 * UB_NS_PER_MS);
            assert_true(took <= 500 * UB_NS_PER_MS + 2 * cfg->rto_max_ns);
        } else {
            assert_true(took < 500 * UB_NS_PER_MS);
        }
        h_fini(&h);
    }
}

/* ---- MP_RANGE -------------------------------------------------------------------------- */

static void small_mpr(struct ub__loopnet_cfg *nc, struct ub__engine_cfg *ec)
{
    (void)nc;
    ec->pds.mp_range = 64;
    ec->pds.window = 1024;
}

static void test_mp_range_respected(void **state)
{
    (void)state;
    struct h_run h;
    setup(&h, UB_PDS_RUD, 3000, 23, small_mpr);
    struct ub__impair_cfg ic = {
        .seed = 10, .drop_ppm = 20000, .reorder_ppm = 50000, .reorder_depth = 32};
    impair(&h, 0, 1, &ic);
    h_pump(&h, 30 * UB_NS_PER_S);
    h_assert_exactly_once(&h);
    /* The target never saw a PSN past its MP_RANGE: no out-of-window drop, no NACK for it. */
    assert_int_equal(h_st(&h, 1)->rx_oow, 0);
    assert_int_equal(h_st(&h, 0)->nacks_by_code[UB_PDS_NACK_PSN_OOR_WINDOW], 0);
    h_fini(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_syn_lost),
        cmocka_unit_test(test_acks_lost),
        cmocka_unit_test(test_tail_loss_probe),
        cmocka_unit_test(test_psn_wrap),
        cmocka_unit_test(test_idle_close),
        cmocka_unit_test(test_eviction_and_reestablish),
        cmocka_unit_test(test_reestablish_after_eviction_mid_flow),
        cmocka_unit_test(test_reestablish_own_without_own_acks),
        cmocka_unit_test(test_quarantine_rejects_stale),
        cmocka_unit_test(test_target_restart),
        cmocka_unit_test(test_initiator_restart),
        cmocka_unit_test(test_blackhole_bounded),
        cmocka_unit_test(test_blackhole_floor),
        cmocka_unit_test(test_mp_range_respected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
