/*
 * The unreliable and the idempotent modes. UUD loses exactly what the network dropped (and
 * delivers each network duplicate); RUDI delivers every packet at least once, intact, and
 * may repeat, but nothing worse.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_pds_harness.h"

static void test_uud_loses_only_drops(void **state)
{
    (void)state;
    struct ub__loopnet_cfg nc;
    struct ub__engine_cfg ec;
    h_default_cfg(&nc, &ec, 41);
    struct h_run h;
    h_init(&h, &nc, &ec, 2, UB_PDS_UUD, 20000);
    struct ub__impair_cfg ic = {.seed = 42,
                                .drop_ppm = 100000,
                                .dup_ppm = 20000,
                                .reorder_ppm = 20000,
                                .reorder_depth = 64};
    assert_int_equal(ub__loopnet_impair(h.tb.net, 0, 1, &ic), 0);
    h_pump(&h, 10 * UB_NS_PER_S);
    assert_int_equal(h.next_pkt, h.npkt);
    struct ub__loop_dir_stats d;
    h_dir(&h, 0, 1, &d);
    uint32_t distinct = 0;
    uint64_t copies = 0;
    for (uint32_t i = 0; i < h.npkt; i++) {
        distinct += h.delivered[i] != 0;
        copies += h.delivered[i];
    }
    /* Lost: exactly the dropped; delivered: every copy that arrived (duplicates included). */
    assert_int_equal(h.npkt - distinct, d.impair.dropped);
    assert_int_equal(copies, d.delivered);
    assert_int_equal(h.corrupt + h.foreign, 0);
    assert_int_equal(h.nacked + h.nfailed, 0); /* no context, no completion */
    assert_int_equal(ub__pds_ipdc_count(h.tb.nodes[0].eng.pds), 0);
    assert_int_equal(h_st(&h, 0)->retx_pkts, 0);
    assert_true(d.impair.duplicated > 0 && d.impair.dropped > 0);
    h_assert_no_leak(&h);
    h_fini(&h);
}

static void test_rudi_duplicates_only(void **state)
{
    (void)state;
    struct ub__loopnet_cfg nc;
    struct ub__engine_cfg ec;
    h_default_cfg(&nc, &ec, 43);
    struct h_run h;
    h_init(&h, &nc, &ec, 2, UB_PDS_RUDI, 20000);
    struct ub__impair_cfg ic = {.seed = 44, .drop_ppm = 100000, .dup_ppm = 20000};
    assert_int_equal(ub__loopnet_impair(h.tb.net, 0, 1, &ic), 0);
    ic.seed = 45;
    assert_int_equal(ub__loopnet_impair(h.tb.net, 1, 0, &ic), 0);
    h_pump(&h, 10 * UB_NS_PER_S);
    for (uint32_t i = 0; i < h.npkt; i++) {
        assert_true(h.delivered[i] >= 1);
        assert_int_equal(h.acked[i], 1);
    }
    assert_true(h.dup_deliv > 0); /* lost responses and network duplicates are redelivered */
    assert_int_equal(h.corrupt + h.foreign + h.nfailed, 0);
    assert_int_equal(h_st(&h, 1)->rx_dup, 0);                       /* no filtering at the target */
    assert_int_equal(ub__pds_tpdc_count(h.tb.nodes[1].eng.pds), 0); /* no target state */
    h_assert_no_leak(&h);
    h_fini(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uud_loses_only_drops),
        cmocka_unit_test(test_rudi_duplicates_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
