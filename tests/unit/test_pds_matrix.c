/*
 * PDS under the impaired link: every reliable mode x every retransmission mode x loss
 * {0, 1, 10, 30} %, each cell also reordering (up to 64 deep), duplicating and corrupting in
 * both directions. Each cell sends h_txns() transactions (1..3 packets each; 100 000 by
 * default, 10 000 under a sanitizer, SOFTUB_PDS_TXNS overrides) and asserts every packet
 * delivered exactly once and intact (RUDI: at least once, intact), acked exactly once,
 * nothing failed, no buffer leaked.
 *
 * Corruption: the loop fabric models the UDP checksum (loopnet cfg.checksum), so a corrupted
 * datagram is dropped like a lost one, as the kernel (and later TSS's ICV) would; the
 * harness's own payload checksum would catch anything that slipped through.
 * test_pds_abuse.c covers corruption reaching PDS with the checksum off.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_pds_harness.h"

static const uint32_t losses[] = {0, 10000, 100000, 300000};

static void cell(uint8_t mode, enum ub__pds_retx retx, uint32_t loss_ppm, uint64_t seed)
{
    struct ub__loopnet_cfg nc;
    struct ub__engine_cfg ec;
    h_default_cfg(&nc, &ec, seed);
    ec.pds.retx[mode] = retx;
    /*
     * At 30 % loss each way a lone repair and its ACK both arrive with probability 0.49:
     * eight failures in a row (the default bound) happen in a few of the thousands of stalls
     * a cell goes through. The bound itself is tested in test_pds_lifecycle.c.
     */
    ec.pds.max_retries = 40;
    struct h_run h;
    h_init(&h, &nc, &ec, 2, mode, h_txns());
    struct ub__impair_cfg ic = {.seed = seed,
                                .drop_ppm = loss_ppm,
                                .reorder_ppm = 10000,
                                .reorder_depth = 64,
                                .dup_ppm = 5000,
                                .corrupt_ppm = 5000,
                                .corrupt_bits = 3};
    assert_int_equal(ub__loopnet_impair(h.tb.net, 0, 1, &ic), 0);
    ic.seed = seed + 77;
    assert_int_equal(ub__loopnet_impair(h.tb.net, 1, 0, &ic), 0);
    h_pump(&h, 600 * UB_NS_PER_S);

    const struct ub__pds_stats *s0 = h_st(&h, 0), *s1 = h_st(&h, 1);
    struct ub__loop_dir_stats d01, d10;
    h_dir(&h, 0, 1, &d01);
    h_dir(&h, 1, 0, &d10);
    printf("  mode %u retx %d loss %5.1f%%: pkts %u retx %.3fx (rto %llu fast %llu nack %llu "
           "probe %llu) spurious %llu dup %llu oow %llu rod_ooo %llu csum %llu t=%.1f ms\n",
           mode, (int)retx, loss_ppm / 1e4, h.npkt, (double)s0->retx_pkts / h.npkt,
           (unsigned long long)s0->retx_rto, (unsigned long long)s0->retx_fast,
           (unsigned long long)s0->retx_nack, (unsigned long long)s0->retx_probe,
           (unsigned long long)s1->spurious_retx, (unsigned long long)s1->rx_dup,
           (unsigned long long)s1->rx_oow, (unsigned long long)s1->rx_ooo_rod,
           (unsigned long long)(d01.csum_dropped + d10.csum_dropped), (double)h.tb.now / 1e6);
    assert_int_equal(d01.overflow + d10.overflow, 0);
    assert_int_equal(s0->tx_pkts, h.npkt);
    assert_int_equal(s0->tx_failed, 0);
    assert_int_equal(s0->pdc_failed, 0);
    if (mode == UB_PDS_RUDI) {
        uint32_t missing = 0;
        for (uint32_t i = 0; i < h.npkt; i++) {
            missing += h.delivered[i] == 0;
            assert_int_equal(h.acked[i], 1);
        }
        assert_int_equal(missing, 0);
        assert_int_equal(h.corrupt + h.foreign, 0);
        assert_int_equal(h.msgs_done, h.nmsg);
        assert_int_equal(h.nfailed, 0);
        if (loss_ppm)
            assert_true(h.dup_deliv > 0); /* retransmissions of lost responses */
    } else {
        h_assert_exactly_once(&h);
        assert_int_equal(s1->rx_pkts, h.npkt);
    }
    bool gbn = retx == UB_PDS_RETX_GBN_FAST || retx == UB_PDS_RETX_GBN_TIMEOUT;
    if (loss_ppm == 0) /* only reorder (go-back-N resends what reordering overtook) and csum */
        assert_true(s0->retx_pkts * 10 < (uint64_t)h.npkt * (gbn ? 15 : 1));
    /* Even go-back-N stays within a small factor of the losses (no echo storms). */
    assert_true(s0->retx_pkts < (uint64_t)h.npkt * (gbn ? 4 : 2));
    if (loss_ppm) {
        assert_true(s0->retx_pkts > 0);
        assert_true(d01.impair.dropped_random > 0 && d10.impair.dropped_random > 0);
    }
    assert_true(d01.csum_dropped > 0 && d01.impair.reordered > 0 && d01.impair.duplicated > 0);
    /* Idle: every context closed on both sides, every buffer home. */
    assert_int_equal(ub__pds_ipdc_count(h.tb.nodes[0].eng.pds), 0);
    assert_int_equal(ub__pds_tpdc_count(h.tb.nodes[1].eng.pds), 0);
    h_assert_no_leak(&h);
    h_fini(&h);
}

static void all_losses(uint8_t mode, enum ub__pds_retx retx, uint64_t seed)
{
    for (unsigned i = 0; i < UB_ARRAY_SIZE(losses); i++)
        cell(mode, retx, losses[i], seed * 100 + i);
}

static void test_rud_sel_fast(void **state)
{
    (void)state;
    all_losses(UB_PDS_RUD, UB_PDS_RETX_SEL_FAST, 1);
}

static void test_rud_sel_timeout(void **state)
{
    (void)state;
    all_losses(UB_PDS_RUD, UB_PDS_RETX_SEL_TIMEOUT, 2);
}

static void test_rud_gbn_fast(void **state)
{
    (void)state;
    all_losses(UB_PDS_RUD, UB_PDS_RETX_GBN_FAST, 3);
}

static void test_rud_gbn_timeout(void **state)
{
    (void)state;
    all_losses(UB_PDS_RUD, UB_PDS_RETX_GBN_TIMEOUT, 4);
}

static void test_rod_gbn_fast(void **state)
{
    (void)state;
    all_losses(UB_PDS_ROD, UB_PDS_RETX_GBN_FAST, 5);
}

static void test_rod_gbn_timeout(void **state)
{
    (void)state;
    all_losses(UB_PDS_ROD, UB_PDS_RETX_GBN_TIMEOUT, 6);
}

static void test_rudi_sel_fast(void **state)
{
    (void)state;
    all_losses(UB_PDS_RUDI, UB_PDS_RETX_SEL_FAST, 7);
}

static void test_rudi_sel_timeout(void **state)
{
    (void)state;
    all_losses(UB_PDS_RUDI, UB_PDS_RETX_SEL_TIMEOUT, 8);
}

static void test_rudi_gbn_fast(void **state)
{
    (void)state;
    all_losses(UB_PDS_RUDI, UB_PDS_RETX_GBN_FAST, 9);
}

static void test_rudi_gbn_timeout(void **state)
{
    (void)state;
    all_losses(UB_PDS_RUDI, UB_PDS_RETX_GBN_TIMEOUT, 10);
}

/* ROD refuses selective repeat: its target accepts only the next PSN. */
static void test_rod_selective_refused(void **state)
{
    (void)state;
    struct ub__loopnet_cfg nc;
    struct ub__engine_cfg ec;
    h_default_cfg(&nc, &ec, 1);
    ec.pds.retx[UB_PDS_ROD] = UB_PDS_RETX_SEL_FAST;
    struct ub__testbed tb;
    assert_int_equal(ub__testbed_create(&tb, 2, &nc, &ec), UB_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rud_sel_fast),          cmocka_unit_test(test_rud_sel_timeout),
        cmocka_unit_test(test_rud_gbn_fast),          cmocka_unit_test(test_rud_gbn_timeout),
        cmocka_unit_test(test_rod_gbn_fast),          cmocka_unit_test(test_rod_gbn_timeout),
        cmocka_unit_test(test_rudi_sel_fast),         cmocka_unit_test(test_rudi_sel_timeout),
        cmocka_unit_test(test_rudi_gbn_fast),         cmocka_unit_test(test_rudi_gbn_timeout),
        cmocka_unit_test(test_rod_selective_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
