/*
 * Abuse: floods of garbage, of well-formed requests for PDCs the target does not have, of
 * ACKs/NACKs/CLOSEs for unknown initiator PDCs, and corruption reaching PDS (the fabric's
 * checksum model off). Nothing is delivered that was not sent, everything is counted, no PDC
 * is opened by a non-SYN, no buffer leaks, and a real flow beside the flood is unharmed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_pds_harness.h"

/* Encodes d (+ len payload bytes) into a fresh packet of node's pool addressed to `to`. */
static struct ub__pkt *make(struct h_run *h, uint16_t node, const struct ub__wire_dgram *d,
                            uint32_t len, uint16_t to)
{
    struct ub__pkt *p = ub__pkt_alloc(&h->tb.nodes[node].eng.pool);
    assert_non_null(p);
    struct ub__wcur w;
    ub__wcur_init(&w, p->data, ub__pkt_tailroom(p));
    assert_int_equal(ub__wire_encode_headers(d, &w), 0);
    uint32_t n = (uint32_t)ub__wcur_offset(&w);
    ub__pkt_put(p, n);
    memset(ub__pkt_put(p, len), 0x5a, len);
    p->addr = h->tb.nodes[to].addr;
    return p;
}

static void req_hdr(struct ub__wire_dgram *d, uint8_t type, uint32_t psn, uint16_t spdcid,
                    uint16_t dpdcid, uint32_t incarnation, uint32_t len)
{
    memset(d, 0, sizeof(*d));
    d->pds.type = type;
    d->pds.u.req.type = type;
    d->pds.u.req.next_hdr = UB_PDS_NH_SOFTUB_EXT;
    d->pds.u.req.psn = psn;
    d->pds.u.req.spdcid = spdcid;
    d->pds.u.req.dpdcid = dpdcid;
    d->has_ext = true;
    d->ext.version = UB_EXT_VERSION;
    d->ext.next_hdr = UB_PDS_NH_REQ_STD;
    d->ext.incarnation = incarnation;
    d->ses_kind = UB_PDS_NH_REQ_STD;
    d->ses.kind = UB_PDS_NH_REQ_STD;
    d->ses.u.std.opcode = UB_SES_OP_SEND;
    d->ses.u.std.flags = UB_SES_F_SOM | UB_SES_F_EOM;
    d->ses.u.std.request_length = len;
}

static void inject(struct h_run *h, uint16_t from, struct ub__pkt **pkts, uint32_t n)
{
    assert_int_equal(ub__dev_send(h->tb.nodes[from].dev, pkts, n), (int)n);
}

static void test_garbage_and_unknown_pdcs(void **state)
{
    (void)state;
    struct ub__loopnet_cfg nc;
    struct ub__engine_cfg ec;
    h_default_cfg(&nc, &ec, 31);
    nc.ports = 3;
    struct h_run h;
    h_init(&h, &nc, &ec, 3, UB_PDS_RUD, 2000);
    struct ub__rng rng;
    ub__rng_seed(&rng, 7);
    const uint32_t rounds = 200, per = 32;
    uint64_t garbage = 0, unknown_req = 0, unknown_ctl = 0;
    for (uint32_t r = 0; r < rounds; r++) {
        struct ub__pkt *batch[32];
        for (uint32_t i = 0; i < per; i++) {
            struct ub__wire_dgram d;
            uint32_t kind = (uint32_t)ub__rng_below(&rng, 4);
            uint16_t id = (uint16_t)(ub__rng_next(&rng) | 1);
            uint32_t psn = (uint32_t)ub__rng_next(&rng);
            if (kind == 0) { /* random bytes */
                struct ub__pkt *p = ub__pkt_alloc(&h.tb.nodes[2].eng.pool);
                assert_non_null(p);
                uint32_t len = 1 + (uint32_t)ub__rng_below(&rng, 300);
                uint8_t *b = ub__pkt_put(p, len);
                for (uint32_t k = 0; k < len; k++)
                    b[k] = (uint8_t)ub__rng_next(&rng);
                p->addr = h.tb.nodes[1].addr;
                batch[i] = p;
                garbage++;
            } else if (kind == 1) { /* a request for a PDC node 1 never opened (no SYN) */
                req_hdr(&d, UB_PDS_TYPE_RUD_REQ, psn, id, id, (uint32_t)ub__rng_next(&rng), 64);
                batch[i] = make(&h, 2, &d, 64, 1);
                unknown_req++;
            } else if (kind == 2) { /* ROD too */
                req_hdr(&d, UB_PDS_TYPE_ROD_REQ, psn, id, id, 77, 64);
                batch[i] = make(&h, 2, &d, 64, 1);
                unknown_req++;
            } else { /* ACK, NACK or CLOSE for an initiator PDC node 0 does not have */
                memset(&d, 0, sizeof(d));
                uint32_t which = (uint32_t)ub__rng_below(&rng, 3);
                if (which == 0) {
                    d.pds.type = UB_PDS_TYPE_ACK_CC;
                    d.pds.u.ack.type = UB_PDS_TYPE_ACK_CC;
                    d.pds.u.ack.cack_psn = psn;
                    d.pds.u.ack.spdcid = id;
                    d.pds.u.ack.dpdcid = id;
                    d.pds.u.ack.cc_type = UB_PDS_CC_NSCC;
                    d.pds.u.ack.sack_bitmap = ub__rng_next(&rng);
                } else if (which == 1) {
                    d.pds.type = UB_PDS_TYPE_NACK;
                    d.pds.u.nack.type = UB_PDS_TYPE_NACK;
                    d.pds.u.nack.code = UB_PDS_NACK_NO_PDC;
                    d.pds.u.nack.psn = psn;
                    d.pds.u.nack.spdcid = id;
                    d.pds.u.nack.dpdcid = id;
                } else {
                    d.pds.type = UB_PDS_TYPE_CTRL;
                    d.pds.u.ctrl.ctl_type = UB_PDS_CTRL_CLOSE;
                    d.pds.u.ctrl.psn = psn;
                    d.pds.u.ctrl.spdcid = id;
                    d.pds.u.ctrl.dpdcid = id;
                }
                batch[i] = make(&h, 2, &d, 0, (uint16_t)(which == 2 ? 1 : 0));
                unknown_ctl++;
            }
        }
        inject(&h, 2, batch, per);
        /* A real flow runs beside the flood, and must not notice. */
        h_offer(&h, h.next_pkt + 10 < h.npkt ? h.next_pkt + 10 : h.npkt);
        ub__testbed_run(&h.tb, h.tb.now + 5000, 1000000);
    }
    h_pump(&h, 10 * UB_NS_PER_S);
    h_assert_exactly_once(&h);
    const struct ub__pds_stats *s0 = h_st(&h, 0), *s1 = h_st(&h, 1);
    const struct ub__engine_stats *e1 = &h.tb.nodes[1].eng.stats;
    /* Every garbage datagram was dropped: by the parser or by PDS's own checks. */
    assert_true(e1->rx_malformed + s1->rx_malformed + e1->rx_unsupported + s1->rx_no_pdc >=
                garbage / 2);
    /* Every request for an unknown PDC was refused, counted and NACKed; none opened one. */
    assert_true(s1->rx_no_pdc >= unknown_req);
    assert_true(s1->nacks_by_code[0] + s1->nacks_tx >= unknown_req);
    assert_int_equal(s1->pdc_accepted, 1); /* only the real flow's SYN */
    assert_true(s0->rx_no_pdc > 0);
    assert_int_equal(s0->pdc_failed, 0);
    assert_int_equal(h.corrupt + h.foreign, 0);
    assert_true(ub__testbed_run(&h.tb, h.tb.now + 10 * UB_NS_PER_S, 100000000));
    assert_int_equal(ub__pds_tpdc_count(h.tb.nodes[1].eng.pds), 0);
    h_assert_no_leak(&h);
    h_fini(&h);
}

/*
 * The fabric's checksum model off: corrupted datagrams reach PDS. Headers that break are
 * dropped as malformed, a flipped PSN or PDC id is refused or filtered, a flipped payload
 * byte is caught by the harness's checksum. Nothing crashes, nothing leaks, nothing foreign
 * is delivered, and every packet is resolved (acked or failed).
 */
static void test_corruption_reaching_pds(void **state)
{
    (void)state;
    struct ub__loopnet_cfg nc;
    struct ub__engine_cfg ec;
    h_default_cfg(&nc, &ec, 32);
    nc.checksum = false;
    ec.pds.max_retries = 30;
    struct h_run h;
    h_init(&h, &nc, &ec, 2, UB_PDS_RUD, 5000);
    struct ub__impair_cfg ic = {.seed = 33, .corrupt_ppm = 20000, .corrupt_bits = 2};
    assert_int_equal(ub__loopnet_impair(h.tb.net, 0, 1, &ic), 0);
    assert_int_equal(ub__loopnet_impair(h.tb.net, 1, 0, &ic), 0);
    h_pump(&h, 60 * UB_NS_PER_S);
    struct ub__loop_dir_stats d;
    h_dir(&h, 0, 1, &d);
    printf("  corrupted %llu offered %llu acked %llu failed %llu corrupt %llu malformed %llu stale "
           "%llu nopdc %llu\n",
           (unsigned long long)d.impair.corrupted, (unsigned long long)d.impair.offered,
           (unsigned long long)h.nacked, (unsigned long long)h.nfailed,
           (unsigned long long)h.corrupt, (unsigned long long)h.tb.nodes[1].eng.stats.rx_malformed,
           (unsigned long long)h_st(&h, 1)->rx_stale, (unsigned long long)h_st(&h, 0)->rx_no_pdc);
    assert_true(d.impair.corrupted > 50);
    for (uint32_t i = 0; i < h.npkt; i++)
        assert_int_equal(h.acked[i] + h.failed[i], 1);
    assert_true(h.corrupt > 0); /* the layer above must check: this is why UDP has a checksum */
    assert_int_equal(h.foreign, 0);
    assert_true(ub__testbed_run(&h.tb, h.tb.now + 60 * UB_NS_PER_S, 100000000));
    h_assert_no_leak(&h);
    h_fini(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_garbage_and_unknown_pdcs),
        cmocka_unit_test(test_corruption_reaching_pds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
