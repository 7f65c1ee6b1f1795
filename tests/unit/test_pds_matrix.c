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

/*
 * Responses on ACKs (docs/pds.md): every packet goes with own, the receiver asks for its own
 * ACK and attaches a response naming the packet (its order_seq); the sender sees the response
 * come with the ACK that completes the packet. Per packet: responses received, and whether the
 * target's cache had no room (a real transaction layer would then send it the ordinary way).
 */
static struct {
    uint8_t *rsp_got, *rsp_sep, *acked_at_rsp;
    uint64_t rsp_foreign, rsp_before_ack;
} O;

static void own_deliver(void *arg, const struct ub__pds_rx *rx, uint64_t now)
{
    struct h_run *h = arg;
    const struct ub__wire_dgram *d = rx->hdr;
    if (d->pds.type == UB_PDS_TYPE_ACK_CC) { /* a response on an ACK, at the sender */
        uint32_t pid = d->ext.order_seq;
        if (pid >= h->npkt || rx->payload_len != 8 || h_get32(rx->payload) != pid) {
            O.rsp_foreign++;
            return;
        }
        if (!h->acked[pid]) /* the ACK it rode on completes the packet first */
            O.rsp_before_ack++;
        if (O.rsp_got[pid] < 255)
            O.rsp_got[pid]++;
        return;
    }
    h_on_deliver(arg, rx, now);
    const uint8_t *b = rx->payload;
    if (rx->payload_len < H_HDR || h_get32(b) != H_MAGIC || h_get32(b + 4) >= h->nmsg)
        return;
    uint32_t pid = h->msg_first[h_get32(b + 4)] + (h_get32(b + 8) & 0xffff);
    struct ub__pds *pds = h->tb.nodes[h->dst].eng.pds;
    ub__pds_dlv_own(pds);
    uint8_t r[UB_EXT_SIZE + UB_SES_RSP_DATA_SIZE + 8];
    struct ub__ext ext = {.next_hdr = UB_PDS_NH_RSP_DATA, .order_seq = pid, .incarnation = 1};
    struct ub__ses_rsp_data sr = {.rc = UB_SES_RC_OK, .payload_len = 8, .modified_length = 8};
    struct ub__wcur w;
    ub__wcur_init(&w, r, sizeof(r));
    assert_int_equal(ub__ext_encode(&ext, &w), 0);
    assert_int_equal(ub__ses_rsp_data_encode(&sr, &w), 0);
    memset(r + UB_EXT_SIZE + UB_SES_RSP_DATA_SIZE, 0, 8);
    h_put32(r + UB_EXT_SIZE + UB_SES_RSP_DATA_SIZE, pid);
    uint8_t *at = ub__pds_dlv_rsp(pds, sizeof(r));
    if (at)
        memcpy(at, r, sizeof(r));
    else
        O.rsp_sep[pid] = 1;
}

static const struct ub__pds_upcalls own_upcalls = {
    .deliver = own_deliver, .acked = h_on_acked, .failed = h_on_failed};

static void cell_x(uint8_t mode, enum ub__pds_retx retx, uint32_t loss_ppm, uint64_t seed,
                   bool own);

static void cell(uint8_t mode, enum ub__pds_retx retx, uint32_t loss_ppm, uint64_t seed)
{
    cell_x(mode, retx, loss_ppm, seed, false);
}

static void cell_x(uint8_t mode, enum ub__pds_retx retx, uint32_t loss_ppm, uint64_t seed, bool own)
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
    h_init(&h, &nc, &ec, 2, mode, own ? h_txns() / 4 : h_txns());
    if (own) {
        h.own = true;
        memset(&O, 0, sizeof(O));
        O.rsp_got = calloc(h.npkt, 1);
        O.rsp_sep = calloc(h.npkt, 1);
        assert_true(O.rsp_got && O.rsp_sep);
        for (uint32_t i = 0; i < h.tb.n; i++)
            ub__pds_set_upcalls(h.tb.nodes[i].eng.pds, &own_upcalls, &h);
    }
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
    if (own) {
        /* Every packet's response reached the sender with the ACK that completed it (or the
         * cache had no room and it would have gone the ordinary way). */
        uint32_t none = 0, sep = 0;
        for (uint32_t i = 0; i < h.npkt; i++) {
            none += !O.rsp_got[i] && !O.rsp_sep[i];
            sep += O.rsp_sep[i];
        }
        printf("    own: responses on ACKs %llu (resent %llu), cache full %u, covered %llu\n",
               (unsigned long long)s1->acks_rsp_tx, (unsigned long long)s1->acks_rsp_resent, sep,
               (unsigned long long)s0->own_covered);
        assert_int_equal(none, 0);
        assert_int_equal(O.rsp_foreign, 0);
        assert_int_equal(O.rsp_before_ack, 0);
        assert_true(s1->acks_rsp_tx > 0);
        free(O.rsp_got);
        free(O.rsp_sep);
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

/* Responses on ACKs under the same impairments, both selective modes. */
static void test_rud_own(void **state)
{
    (void)state;
    for (unsigned i = 0; i < UB_ARRAY_SIZE(losses); i++) {
        cell_x(UB_PDS_RUD, UB_PDS_RETX_SEL_FAST, losses[i], 1100 + i, true);
        cell_x(UB_PDS_RUD, UB_PDS_RETX_SEL_TIMEOUT, losses[i], 1200 + i, true);
    }
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
        cmocka_unit_test(test_rod_selective_refused), cmocka_unit_test(test_rud_own),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
