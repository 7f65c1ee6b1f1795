/*
 * Target PDC receive paths.
 *
 * Key check: a target PDC accepts a request only from its own (host, incarnation, spdcid,
 * mode). The check skips hashing the source when nothing changed since the last request;
 * these cases must still be told apart: another incarnation or spdcid from the same address
 * (stale, not delivered), another port of the same host (accepted, as the key ignores the
 * udp port), then the first port again.
 *
 * ACK coalescing: with ack_coalesce, the ACK a PDC still has in the output is rewritten by
 * the next one, so the requests of one received batch are acknowledged by one ACK carrying
 * the latest state; without it each request asking for an ACK gets its own.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <softub/errors.h>
#include "pds/pds.h"
#include "wire/datagram.h"

struct krig {
    struct ub__timers timers;
    struct ub__pktpool pool;
    struct ub__rng rng;
    struct ub__pds *pds;
    uint32_t delivered;
};

static void k_deliver(void *arg, const struct ub__pds_rx *rx, uint64_t now)
{
    (void)rx;
    (void)now;
    ((struct krig *)arg)->delivered++;
}

static void k_acked(void *arg, uint64_t cookie, uint64_t now)
{
    (void)arg;
    (void)cookie;
    (void)now;
}

static void k_failed(void *arg, uint64_t cookie, int err, uint64_t now)
{
    (void)arg;
    (void)cookie;
    (void)err;
    (void)now;
}

static const struct ub__pds_upcalls k_up = {k_deliver, k_acked, k_failed};

static void rig_open_cfg(struct krig *r, uint64_t seed, bool coalesce)
{
    memset(r, 0, sizeof(*r));
    assert_int_equal(ub__timers_init(&r->timers, 16), 0);
    assert_int_equal(ub__pktpool_init(&r->pool, 64, 4096 + 64, 64), 0);
    ub__rng_seed(&r->rng, seed);
    struct ub__pds_cfg cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.ack_coalesce = coalesce;
    assert_int_equal(ub__pds_create(&r->pds, &cfg, &r->timers, &r->pool, &r->rng, NULL), 0);
    ub__pds_set_upcalls(r->pds, &k_up, r);
}

static void rig_open(struct krig *r, uint64_t seed)
{
    rig_open_cfg(r, seed, false);
}

static void rig_close(struct krig *r)
{
    ub__pds_destroy(r->pds, 0);
    ub__pktpool_fini(&r->pool);
    ub__timers_fini(&r->timers);
}

/* Queues an 8-byte SEND from r to dst and returns the packet PDS hands out for it. */
static struct ub__pkt *next_req_ar(struct krig *r, const struct ub__addr *dst, uint64_t cookie,
                                   bool ack_req)
{
    struct ub__pkt *p = ub__pkt_alloc(&r->pool);
    assert_non_null(p);
    struct ub__ses_std h = {
        .opcode = UB_SES_OP_SEND, .flags = UB_SES_F_SOM | UB_SES_F_EOM, .request_length = 8};
    struct ub__wcur w;
    ub__wcur_init(&w, ub__pkt_put(p, UB_SES_STD_SIZE), UB_SES_STD_SIZE);
    assert_int_equal(ub__ses_std_encode(&h, &w), 0);
    memset(ub__pkt_put(p, 8), 0, 8);
    struct ub__pds_tx tx;
    memset(&tx, 0, sizeof(tx));
    tx.dst = dst;
    tx.mode = UB_PDS_RUD;
    tx.ses_kind = UB_PDS_NH_REQ_STD;
    tx.cookie = cookie;
    tx.ack_req = ack_req;
    assert_int_equal(ub__pds_send(r->pds, &tx, p, 0), 0);
    struct ub__pkt *out[4];
    assert_int_equal(ub__pds_pull(r->pds, out, 4, 0), 1);
    return out[0];
}

static struct ub__pkt *next_req(struct krig *r, const struct ub__addr *dst, uint64_t cookie)
{
    return next_req_ar(r, dst, cookie, false);
}

/* Hands p to dst as if it came from src; frees it. */
static void carry(struct ub__pkt *p, const struct ub__addr *src, struct krig *dst)
{
    p->addr = *src;
    struct ub__wire_dgram d;
    assert_int_equal(ub__wire_parse_datagram(&d, p->data, p->len, 0), 0);
    assert_int_equal(ub__pds_input(dst->pds, p, &d, 0), 1);
    ub__pkt_free(p);
}

/* Carries everything src has to send to dst (as from src_addr). */
static void carry_all(struct krig *src, const struct ub__addr *src_addr, struct krig *dst)
{
    struct ub__pkt *out[16];
    uint32_t n;
    while ((n = ub__pds_pull(src->pds, out, 16, 0)) != 0)
        for (uint32_t i = 0; i < n; i++)
            carry(out[i], src_addr, dst);
}

static void drain(struct krig *r)
{
    struct ub__pkt *out[16];
    uint32_t n;
    while ((n = ub__pds_pull(r->pds, out, 16, 0)) != 0)
        for (uint32_t i = 0; i < n; i++)
            ub__pkt_free(out[i]);
}

static struct ub__addr inet(uint16_t port)
{
    struct ub__addr a;
    memset(&a, 0, sizeof(a));
    a.family = UB_AF_INET;
    a.port = port;
    a.ip[0] = 10;
    a.ip[3] = 1;
    return a;
}

static void test_key_check(void **state)
{
    (void)state;
    struct krig a, b;
    rig_open(&a, 7);
    rig_open(&b, 8);
    struct ub__addr aa = inet(1000), aa2 = inet(1001), ba = inet(2000);
    const struct ub__pds_stats *st = ub__pds_stats(b.pds);

    carry(next_req(&a, &ba, 1), &aa, &b); /* SYN: opens b's PDC */
    carry_all(&b, &ba, &a);               /* its ACK: a's PDC is established */
    carry(next_req(&a, &ba, 2), &aa, &b);
    assert_int_equal(b.delivered, 2);
    assert_int_equal(st->rx_stale, 0);

    /* Same address and PDC id, another incarnation (extension bytes 12-15): stale. */
    struct ub__pkt *p = next_req(&a, &ba, 3);
    p->data[UB_PDS_REQ_SIZE + 15] ^= 0x01;
    carry(p, &aa, &b);
    assert_int_equal(b.delivered, 2);
    assert_int_equal(st->rx_stale, 1);

    /* Same address and PDC id, another spdcid (PDS bytes 8-9): stale. */
    p = next_req(&a, &ba, 4);
    p->data[9] ^= 0x40;
    carry(p, &aa, &b);
    assert_int_equal(b.delivered, 2);
    assert_int_equal(st->rx_stale, 2);

    /* The same host from another port: the key ignores the port, accepted. Then the first port
     * again, and again the second. */
    carry(next_req(&a, &ba, 5), &aa2, &b);
    assert_int_equal(b.delivered, 3);
    carry(next_req(&a, &ba, 6), &aa, &b);
    carry(next_req(&a, &ba, 7), &aa2, &b);
    assert_int_equal(b.delivered, 5);

    /* Another host with the right PDC id and fields: not ours, stale. */
    struct ub__addr other = inet(1000);
    other.ip[3] = 2;
    carry(next_req(&a, &ba, 8), &other, &b);
    assert_int_equal(b.delivered, 5);
    assert_int_equal(st->rx_stale, 3);
    /* And the rightful source still gets through after it. */
    carry(next_req(&a, &ba, 9), &aa, &b);
    assert_int_equal(b.delivered, 6);
    assert_int_equal(st->rx_stale, 3);

    drain(&b);
    drain(&a);
    rig_close(&a);
    rig_close(&b);
}

/* Three requests asking for an ACK, received in one batch: one ACK (the latest cumulative
 * state) with coalescing, three without; the next batch gets a new ACK. */
static void test_ack_coalesce(void **state)
{
    (void)state;
    for (int co = 0; co < 2; co++) {
        struct krig a, b;
        rig_open(&a, 17);
        rig_open_cfg(&b, 18, co);
        struct ub__addr aa = inet(1000), ba = inet(2000);
        for (int round = 0; round < 2; round++) {
            for (uint64_t i = 0; i < 3; i++)
                carry(next_req_ar(&a, &ba, 10 * (uint64_t)round + i, true), &aa, &b);
            struct ub__pkt *out[8];
            uint32_t n = ub__pds_pull(b.pds, out, 8, 0);
            assert_int_equal(n, co ? 1 : 3);
            for (uint32_t i = 0; i < n; i++) {
                struct ub__wire_dgram d;
                assert_int_equal(ub__wire_parse_datagram(&d, out[i]->data, out[i]->len, 0), 0);
                assert_int_equal(d.pds.type, UB_PDS_TYPE_ACK_CC);
                assert_int_equal(out[i]->tag, 0); /* nothing of the PDC's left on it */
            }
            /* The one ACK acknowledges all three: nothing stays in flight at a. */
            for (uint32_t i = 0; i < n; i++)
                carry(out[i], &ba, &a);
            assert_int_equal(ub__pds_outstanding(a.pds, &ba, UB_PDS_RUD), 0);
            assert_int_equal(ub__pds_stats(a.pds)->acks_rx, (uint64_t)(round + 1) * n);
        }
        assert_int_equal(ub__pds_stats(b.pds)->acks_coalesced, co ? 4 : 0);
        assert_int_equal(b.delivered, 6);
        drain(&a);
        drain(&b);
        rig_close(&a);
        rig_close(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_check),
        cmocka_unit_test(test_ack_coalesce),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
