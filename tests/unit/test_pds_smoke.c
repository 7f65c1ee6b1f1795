/* Reliable delivery end to end over the test bed: a first look. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <softub/errors.h>
#include "core/clock.h"
#include "engine/testbed.h"

struct ctx {
    uint32_t n;
    uint8_t *seen;
    uint32_t delivered, dups, acked, failed;
};

static void on_deliver(void *arg, const struct ub__pds_rx *rx, uint64_t now)
{
    (void)now;
    struct ctx *c = arg;
    uint32_t id;
    memcpy(&id, rx->payload, 4);
    if (id < c->n) {
        if (c->seen[id])
            c->dups++;
        c->seen[id] = 1;
    }
    c->delivered++;
}

static void on_acked(void *arg, uint64_t cookie, uint64_t now)
{
    (void)cookie;
    (void)now;
    ((struct ctx *)arg)->acked++;
}

static void on_failed(void *arg, uint64_t cookie, int err, uint64_t now)
{
    (void)cookie;
    (void)now;
    (void)err;
    ((struct ctx *)arg)->failed++;
}

static const struct ub__pds_upcalls up = {on_deliver, on_acked, on_failed};

static void run(uint8_t mode, uint32_t loss_ppm, uint32_t n, uint64_t seed)
{
    struct ub__loopnet_cfg nc = {.ports = 2,
                                 .mtu = 4096,
                                 .num_paths = 4,
                                 .seed = seed,
                                 .latency_ns = 2000,
                                 .queue_cap = 8192};
    struct ub__engine_cfg ec = {.seed = seed, .mtu = 4096, .num_paths = 4, .pool_bufs = 8192};
    struct ub__testbed tb;
    assert_int_equal(ub__testbed_create(&tb, 2, &nc, &ec), 0);
    struct ub__impair_cfg ic = {.seed = seed, .drop_ppm = loss_ppm};
    ub__loopnet_impair(tb.net, 0, 1, &ic);
    ub__loopnet_impair(tb.net, 1, 0, &ic);
    struct ctx c = {.n = n, .seen = calloc(n, 1)};
    ub__pds_set_upcalls(tb.nodes[0].eng.pds, &up, &c);
    ub__pds_set_upcalls(tb.nodes[1].eng.pds, &up, &c);
    uint32_t sent = 0;
    for (int round = 0; sent < n && round < 100000; round++) {
        while (sent < n) {
            struct ub__pkt *p = ub__pkt_alloc(&tb.nodes[0].eng.pool);
            if (!p)
                break;
            struct ub__ses_std h = {.opcode = UB_SES_OP_SEND,
                                    .flags = UB_SES_F_SOM | UB_SES_F_EOM,
                                    .request_length = 104};
            struct ub__wcur w;
            ub__wcur_init(&w, ub__pkt_put(p, UB_SES_STD_SIZE), UB_SES_STD_SIZE);
            assert_int_equal(ub__ses_std_encode(&h, &w), 0);
            memcpy(ub__pkt_put(p, 4), &sent, 4);
            memset(ub__pkt_put(p, 100), 0xab, 100);
            struct ub__pds_tx tx = {.dst = &tb.nodes[1].addr,
                                    .mode = mode,
                                    .cookie = sent,
                                    .ses_kind = UB_PDS_NH_REQ_STD};
            int rc = ub__pds_send(tb.nodes[0].eng.pds, &tx, p, tb.now);
            if (rc) {
                ub__pkt_free(p);
                break;
            }
            sent++;
        }
        ub__testbed_run(&tb, tb.now + 10000, 100000);
    }
    ub__testbed_run(&tb, tb.now + 5 * UB_NS_PER_S, 10000000);
    const struct ub__pds_stats *s0 = ub__pds_stats(tb.nodes[0].eng.pds);
    const struct ub__pds_stats *s1 = ub__pds_stats(tb.nodes[1].eng.pds);
    printf("mode %u loss %u: delivered %u dups %u acked %u failed %u retx %llu (rto %llu fast %llu "
           "probe %llu) rxdup %llu spur %llu t=%.3f ms\n",
           mode, loss_ppm, c.delivered, c.dups, c.acked, c.failed,
           (unsigned long long)s0->retx_pkts, (unsigned long long)s0->retx_rto,
           (unsigned long long)s0->retx_fast, (unsigned long long)s0->retx_probe,
           (unsigned long long)s1->rx_dup, (unsigned long long)s1->spurious_retx,
           (double)tb.now / 1e6);
    printf("  tx %llu rx %llu acks_rx %llu acks_tx %llu\n", (unsigned long long)s0->tx_pkts,
           (unsigned long long)s1->rx_pkts, (unsigned long long)s0->acks_rx,
           (unsigned long long)s1->acks_tx);
    printf("  ipdcs %u tpdcs %u outstanding %u rto %llu failed %llu\n",
           ub__pds_ipdc_count(tb.nodes[0].eng.pds), ub__pds_tpdc_count(tb.nodes[1].eng.pds),
           ub__pds_outstanding(tb.nodes[0].eng.pds, &tb.nodes[1].addr, mode),
           (unsigned long long)s0->rto_fired, (unsigned long long)s0->pdc_failed);
    uint32_t missing = 0;
    for (uint32_t i = 0; i < n; i++)
        missing += !c.seen[i];
    assert_int_equal(missing, 0);
    if (mode != UB_PDS_RUDI)
        assert_int_equal(c.dups, 0);
    assert_int_equal(c.acked, n);
    free(c.seen);
    ub__testbed_destroy(&tb);
}

static void test_rud(void **state)
{
    (void)state;
    run(UB_PDS_RUD, 0, 20000, 1);
    run(UB_PDS_RUD, 100000, 20000, 2);
    run(UB_PDS_ROD, 0, 20000, 3);
    run(UB_PDS_ROD, 100000, 20000, 4);
    run(UB_PDS_RUDI, 100000, 20000, 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_rud)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
