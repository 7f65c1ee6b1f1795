/* The engine boundary: datagram service, malformed input, back-pressure, determinism. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <softub/errors.h>
#include "core/clock.h"
#include "engine/driver.h"
#include "engine/testbed.h"
#include "wire/bundle.h"
#include "wire/datagram.h"
#include "unit/pds_send8.h"

struct rx_log {
    uint32_t n;
    uint64_t imm[4096];
    uint32_t len[4096];
    uint32_t initiator;
    uint8_t first[64];
    uint64_t at[4096];
};

static void on_dgram(void *arg, const struct ub__dgram_in *d, uint64_t now)
{
    struct rx_log *l = arg;
    if (l->n == 0)
        memcpy(l->first, d->data, d->len < 64 ? d->len : 64);
    if (l->n < 4096) {
        l->imm[l->n] = d->header_data;
        l->len[l->n] = d->len;
        l->at[l->n] = now;
    }
    l->initiator = d->initiator;
    l->n++;
}

static const struct ub__engine_upcalls upcalls = {.dgram = on_dgram};

static void make_bed(struct ub__testbed *tb, uint64_t seed)
{
    struct ub__loopnet_cfg nc = {.ports = 2,
                                 .mtu = 2048,
                                 .num_paths = 4,
                                 .seed = seed,
                                 .latency_ns = 1000,
                                 .queue_cap = 8192};
    struct ub__engine_cfg ec = {.seed = seed, .mtu = 2048, .pool_bufs = 8192, .txq_cap = 8192};
    assert_int_equal(ub__testbed_create(tb, 2, &nc, &ec), 0);
}

/* The exact bytes of a datagram: PDS UUD_REQ then the SES standard header, then the payload. */
static void test_dgram_bytes(void **state)
{
    (void)state;
    struct ub__engine e;
    struct ub__engine_cfg ec = {.seed = 1, .job_id = 0x123456};
    assert_int_equal(ub__engine_init(&e, &ec), 0);
    struct ub__addr dst;
    ub__addr_loop(&dst, 1);
    assert_int_equal(
        ub__engine_dgram_send(&e, &dst, 9, 0xa1b2c3d4, 0x1122334455667788ULL, "hi", 2, 0), 0);
    struct ub__pkt *p;
    assert_int_equal(ub__engine_output(&e, &p, 1, 77), 1);
    assert_int_equal(p->len, UB_PDS_UUD_SIZE + UB_SES_STD_SIZE + 2);
    assert_int_equal(p->path, 0); /* one path by default: 9 mod 1 */
    assert_int_equal(p->ts, 77);
    assert_true(ub__addr_eq(&p->addr, &dst));
    /* Decode it back with the wire module: every field as sent. */
    struct ub__wire_dgram d;
    assert_int_equal(ub__wire_parse_datagram(&d, p->data, p->len, 0), 0);
    assert_int_equal(d.pds.type, UB_PDS_TYPE_UUD_REQ);
    assert_int_equal(d.ses_kind, UB_PDS_NH_REQ_STD);
    assert_int_equal(d.ses.u.std.opcode, UB_SES_OP_DGRAM_SEND);
    assert_int_equal(d.ses.u.std.job_id, 0x123456);
    assert_int_equal(d.ses.u.std.initiator, 0xa1b2c3d4);
    assert_int_equal(d.ses.u.std.header_data, 0x1122334455667788ULL);
    assert_int_equal(d.ses.u.std.request_length, 2);
    assert_int_equal(d.payload_len, 2);
    assert_memory_equal(p->data + d.payload_off, "hi", 2);
    /* The first byte is the PDS prologue: type 6 in the top five bits. */
    assert_int_equal(p->data[0] >> 3, UB_PDS_TYPE_UUD_REQ);
    ub__pkt_free(p);
    assert_int_equal(e.stats.tx_pkts, 1);
    ub__engine_fini(&e);
}

static void test_send_errors(void **state)
{
    (void)state;
    struct ub__engine e;
    struct ub__engine_cfg ec = {.seed = 1, .mtu = 1024, .txq_cap = 4, .pool_bufs = 5};
    assert_int_equal(ub__engine_init(&e, &ec), 0);
    struct ub__addr dst;
    ub__addr_loop(&dst, 1);
    static uint8_t big[2048];
    uint32_t max = ub__engine_dgram_max(&e);
    assert_int_equal(max, 1024 - UB_PDS_UUD_SIZE - UB_SES_STD_SIZE);
    assert_int_equal(ub__engine_dgram_send(&e, &dst, 0, 0, 0, big, max + 1, 0), UB_ELENGTH);
    for (int i = 0; i < 4; i++)
        assert_int_equal(ub__engine_dgram_send(&e, &dst, 0, 0, 0, big, max, 0), 0);
    assert_int_equal(ub__engine_dgram_send(&e, &dst, 0, 0, 0, big, 1, 0), UB_EFULL);
    assert_int_equal(e.stats.tx_queue_full, 1);
    /* Drain two, keep them: the pool (5) then runs dry before the queue (4) fills. */
    struct ub__pkt *held[2];
    assert_int_equal(ub__engine_output(&e, held, 2, 0), 2);
    assert_int_equal(ub__engine_dgram_send(&e, &dst, 0, 0, 0, big, 1, 0), 0);
    assert_int_equal(ub__engine_dgram_send(&e, &dst, 0, 0, 0, big, 1, 0), UB_ENOBUFS);
    assert_int_equal(e.stats.tx_nobufs, 1);
    ub__pkt_free(held[0]);
    ub__pkt_free(held[1]);
    struct ub__engine_cfg bad = {.job_id = 1u << 24};
    struct ub__engine e2;
    assert_int_equal(ub__engine_init(&e2, &bad), UB_EINVAL);
    ub__engine_fini(&e);
}

/* Garbage and well-formed-but-unserved packets are counted and dropped; nothing is delivered. */
static void test_malformed_and_unsupported(void **state)
{
    (void)state;
    struct ub__engine e;
    struct ub__engine_cfg ec = {.seed = 1};
    assert_int_equal(ub__engine_init(&e, &ec), 0);
    struct rx_log *log = calloc(1, sizeof(*log));
    ub__engine_set_upcalls(&e, &upcalls, log);
    struct ub__rng r;
    ub__rng_seed(&r, 5);
    for (int i = 0; i < 1000; i++) {
        struct ub__pkt *p = ub__pkt_alloc(&e.pool);
        uint32_t len = (uint32_t)ub__rng_below(&r, 200);
        uint8_t *d = ub__pkt_put(p, len);
        for (uint32_t k = 0; k < len; k++)
            d[k] = (uint8_t)ub__rng_next(&r);
        if (len)
            d[0] = 0; /* reserved PDS type: always malformed */
        ub__engine_input(&e, &p, 1, 0);
    }
    assert_int_equal(e.stats.rx_pkts, 1000);
    assert_int_equal(e.stats.rx_malformed, 1000);

    /* A well-formed NACK for a context nobody has: PDS takes it, counts it, nothing moves. */
    struct ub__wire_dgram dg;
    memset(&dg, 0, sizeof(dg));
    dg.pds.type = UB_PDS_TYPE_NACK;
    dg.pds.u.nack.type = UB_PDS_TYPE_NACK;
    dg.pds.u.nack.code = UB_PDS_NACK_NO_PDC;
    dg.pds.u.nack.dpdcid = 77;
    struct ub__pkt *p = ub__pkt_alloc(&e.pool);
    struct ub__wcur w;
    ub__wcur_init(&w, p->data, ub__pkt_tailroom(p));
    assert_int_equal(ub__wire_encode_headers(&dg, &w), 0);
    ub__pkt_put(p, (uint32_t)ub__wcur_offset(&w));
    ub__engine_input(&e, &p, 1, 0);
    assert_int_equal(ub__pds_stats(e.pds)->nacks_rx, 1);
    assert_int_equal(ub__pds_stats(e.pds)->rx_no_pdc, 1);
    assert_false(ub__engine_pending(&e));

    /* A bare datagram (no extension) with an opcode the datagram service does not serve. */
    memset(&dg, 0, sizeof(dg));
    dg.pds.type = UB_PDS_TYPE_UUD_REQ;
    dg.pds.u.uud.next_hdr = UB_PDS_NH_REQ_STD;
    dg.ses_kind = dg.ses.kind = UB_PDS_NH_REQ_STD;
    dg.ses.u.std.opcode = UB_SES_OP_WRITE;
    dg.ses.u.std.flags = UB_SES_F_SOM | UB_SES_F_EOM;
    p = ub__pkt_alloc(&e.pool);
    ub__wcur_init(&w, p->data, ub__pkt_tailroom(p));
    assert_int_equal(ub__wire_encode_headers(&dg, &w), 0);
    ub__pkt_put(p, (uint32_t)ub__wcur_offset(&w));
    ub__engine_input(&e, &p, 1, 0);
    assert_int_equal(e.stats.rx_unsupported, 1);
    assert_int_equal(log->n, 0);
    assert_int_equal(e.pool.avail, e.pool.count); /* input consumed every reference */
    free(log);
    ub__engine_fini(&e);
}

/* A sender that bundles (two paths, MTU 2048) and a receiver that logs what it gets. */
/* The receiver logged want[0..n) from its record `from` on. */
static void expect_imm(const struct rx_log *log, uint32_t from, const uint64_t *want, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(log->imm[from + i], want[i]);
}

/* A bundling sender and a receiver that logs what it gets; a and b (if not NULL): loop
 * addresses 1 and 2. */
static struct rx_log *bundle_pair(struct ub__engine *tx, struct ub__engine *rx, struct ub__addr *a,
                                  struct ub__addr *b)
{
    ub__addr_loop(a, 1);
    if (b)
        ub__addr_loop(b, 2);
    struct ub__engine_cfg ec = {.seed = 1, .mtu = 2048, .num_paths = 2, .bundle = true};
    assert_int_equal(ub__engine_init(tx, &ec), 0);
    ec.bundle = false;
    assert_int_equal(ub__engine_init(rx, &ec), 0);
    struct rx_log *log = calloc(1, sizeof(*log));
    assert_non_null(log);
    ub__engine_set_upcalls(rx, &upcalls, log);
    return log;
}

/* The end of a bundle_pair test: every buffer back in both pools, everything freed. */
static void bundle_pair_done(struct ub__engine *tx, struct ub__engine *rx, struct rx_log *log)
{
    assert_int_equal(tx->pool.avail, tx->pool.count);
    assert_int_equal(rx->pool.avail, rx->pool.count);
    free(log);
    ub__engine_fini(tx);
    ub__engine_fini(rx);
}

/*
 * Bundles: small datagrams of one batch to one destination and path leave as one bundle,
 * in order, with the datagram of another destination keeping its place; big ones and other
 * paths do not join. The receiver runs every record; a malformed bundle is one malformed
 * packet and delivers nothing.
 */
static void test_bundles(void **state)
{
    (void)state;
    struct ub__engine tx, rx;
    struct ub__addr a, b;
    struct rx_log *log = bundle_pair(&tx, &rx, &a, &b);
    static uint8_t big[1500];
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 0, 1, 10, "x", 1, 0), 0);
    assert_int_equal(ub__engine_dgram_send(&tx, &b, 0, 1, 11, "y", 1, 0), 0);
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 1, 1, 12, "z", 1, 0), 0); /* other path */
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 0, 1, 13, big, sizeof(big), 0), 0);
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 2, 1, 14, "w", 1, 0), 0); /* path 2 = 0 */
    struct ub__pkt *p[8];
    uint32_t n = ub__engine_output(&tx, p, 8, 5);
    assert_int_equal(n, 4);
    uint32_t one = UB_PDS_UUD_SIZE + UB_SES_STD_SIZE + 1;
    assert_true(ub__bundle_is(p[0]->data, p[0]->len)); /* 10 and 14 */
    assert_int_equal(p[0]->len, ub__bundle_size(2 * one, 2));
    assert_int_equal(p[0]->ts, 5);
    assert_true(ub__addr_eq(&p[0]->addr, &a));
    assert_int_equal(p[1]->len, one); /* 11, to b */
    assert_int_equal(p[2]->len, one); /* 12, path 1 */
    assert_int_equal(p[3]->len, one - 1 + sizeof(big));
    assert_int_equal(tx.stats.tx_pkts, 5);
    assert_int_equal(tx.stats.tx_bundles, 1);
    assert_int_equal(tx.stats.tx_bundled, 2);
    ub__engine_input(&rx, &p[0], 1, 6);
    assert_int_equal(log->n, 2);
    assert_int_equal(log->imm[0], 10);
    assert_int_equal(log->imm[1], 14);
    assert_int_equal(rx.stats.rx_bundles, 1);
    assert_int_equal(rx.stats.rx_pkts, 2);
    assert_int_equal(rx.stats.rx_delivered, 2);
    for (uint32_t i = 1; i < n; i++)
        ub__pkt_free(p[i]);

    /* Malformed: a record running past the end. Nothing runs, one packet counted. */
    struct ub__pkt *q = ub__pkt_alloc(&rx.pool);
    const uint8_t bad[] = {UB_BUNDLE_MARK, 0x00, 0x40, 0x30};
    memcpy(ub__pkt_put(q, sizeof(bad)), bad, sizeof(bad));
    ub__engine_input(&rx, &q, 1, 7);
    assert_int_equal(rx.stats.rx_malformed, 1);
    assert_int_equal(rx.stats.rx_pkts, 3);
    assert_int_equal(log->n, 2);
    bundle_pair_done(&tx, &rx, log);
}

/* Sets flag on the packets of e's transmit queue named by the bits of which. */
static void mark_flag(struct ub__engine *e, uint32_t which, uint8_t flag)
{
    struct ub__pkt *q[16];
    uint32_t n = 0;
    while (n < 16 && (q[n] = ub__ring_pop(&e->txq)) != NULL)
        n++;
    for (uint32_t i = 0; i < n; i++) {
        if (which >> i & 1)
            q[i]->flags |= flag;
        assert_true(ub__ring_push(&e->txq, q[i]));
    }
}

/* Stamps the packets of e's transmit queue with transmission orders (0: unstamped). */
static void stamp_order(struct ub__engine *e, const uint64_t *order, uint32_t n)
{
    struct ub__pkt *q[16];
    assert_true(n <= 16);
    for (uint32_t i = 0; i < n; i++)
        assert_non_null(q[i] = ub__ring_pop(&e->txq));
    for (uint32_t i = 0; i < n; i++) {
        q[i]->order = order[i];
        assert_true(ub__ring_push(&e->txq, q[i]));
    }
}

/*
 * A transmission never overtakes another one to its destination in a bundle (the receiver
 * would ACK it first and the sender declare the overtaken one lost), an ACK may: an ACK,
 * a big request, a small one and another ACK leave as [ACK + ACK], big, small.
 */
static void test_bundle_keeps_order(void **state)
{
    (void)state;
    struct ub__engine tx, rx;
    struct ub__addr a, b;
    struct rx_log *log = bundle_pair(&tx, &rx, &a, &b);
    static uint8_t big[1500];
    uint32_t one = UB_PDS_UUD_SIZE + UB_SES_STD_SIZE + 1;
    struct ub__pkt *p[8];
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 0, 1, 10, "a", 1, 0), 0);
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 0, 1, 11, big, sizeof(big), 0), 0);
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 0, 1, 12, "r", 1, 0), 0);
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 0, 1, 13, "b", 1, 0), 0);
    stamp_order(&tx, (const uint64_t[]){0, 1, 2, 0}, 4);
    assert_int_equal(ub__engine_output(&tx, p, 8, 1), 3);
    assert_int_equal(p[0]->len, ub__bundle_size(2 * one, 2));
    assert_int_equal(p[1]->len, one - 1 + sizeof(big));
    assert_int_equal(p[2]->len, one);
    ub__engine_input(&rx, p, 3, 2);
    assert_int_equal(log->n, 4);
    expect_imm(log, 0, (const uint64_t[]){10, 13, 11, 12}, 4);

    /* One to another destination in between does not hold the small one back. */
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 0, 1, 20, "r", 1, 0), 0);
    assert_int_equal(ub__engine_dgram_send(&tx, &b, 0, 1, 21, big, sizeof(big), 0), 0);
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 0, 1, 22, "s", 1, 0), 0);
    stamp_order(&tx, (const uint64_t[]){3, 4, 5}, 3);
    assert_int_equal(ub__engine_output(&tx, p, 8, 3), 2);
    assert_int_equal(p[0]->len, ub__bundle_size(2 * one, 2));
    assert_true(ub__addr_eq(&p[1]->addr, &b));
    ub__pkt_free(p[0]);
    ub__pkt_free(p[1]);
    bundle_pair_done(&tx, &rx, log);
}

/*
 * Packets any path serves (ACKs) join a bundle whatever their path, and the bundle leaves on
 * the path of its first member that has one; packets that have a path still go only with
 * their path's. In the request-response case (an ACK, then a request: the request goes
 * first) as in a longer batch (in order).
 */
static void test_bundles_any_path(void **state)
{
    (void)state;
    struct ub__engine tx, rx;
    struct ub__addr a;
    struct rx_log *log = bundle_pair(&tx, &rx, &a, NULL);
    uint32_t one = UB_PDS_UUD_SIZE + UB_SES_STD_SIZE + 1;
    struct ub__pkt *p[8];

    /* An "ACK" on path 1, then a request on path 0: one datagram, on path 0, the request
     * first (its receiver may act on it before the ACK: a yield). */
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 1, 1, 20, "a", 1, 0), 0);
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 0, 1, 21, "r", 1, 0), 0);
    mark_flag(&tx, 1u, UB_PKT_F_ANY_PATH);
    assert_int_equal(ub__engine_output(&tx, p, 8, 1), 1);
    assert_true(ub__bundle_is(p[0]->data, p[0]->len));
    assert_int_equal(p[0]->len, ub__bundle_size(2 * one, 2));
    assert_int_equal(p[0]->path, 0);
    assert_int_equal(p[0]->flags & UB_PKT_F_ANY_PATH, 0);
    ub__engine_input(&rx, &p[0], 1, 2);
    assert_int_equal(log->n, 2);
    assert_int_equal(log->imm[0], 21);
    assert_int_equal(log->imm[1], 20);

    /* ACK (path 1), request (path 0), request (path 1), ACK (path 3 = 1): the first request
     * sets the path, the ACKs go with it, the other request leaves alone. */
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 1, 1, 30, "a", 1, 0), 0);
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 0, 1, 31, "r", 1, 0), 0);
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 1, 1, 32, "s", 1, 0), 0);
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 3, 1, 33, "b", 1, 0), 0);
    mark_flag(&tx, 1u | 8u, UB_PKT_F_ANY_PATH);
    assert_int_equal(ub__engine_output(&tx, p, 8, 3), 2);
    assert_int_equal(p[0]->len, ub__bundle_size(3 * one, 3));
    assert_int_equal(p[0]->path, 0);
    assert_int_equal(p[1]->len, one);
    assert_int_equal(p[1]->path, 1);
    ub__engine_input(&rx, p, 2, 4);
    assert_int_equal(log->n, 6);
    expect_imm(log, 2, (const uint64_t[]){30, 31, 33, 32}, 4);

    /* Only packets of any path: the first one's path. Two requests of two paths: two. */
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 1, 1, 40, "a", 1, 0), 0);
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 0, 1, 41, "b", 1, 0), 0);
    mark_flag(&tx, 3u, UB_PKT_F_ANY_PATH);
    assert_int_equal(ub__engine_output(&tx, p, 8, 5), 1);
    assert_int_equal(p[0]->path, 1);
    ub__pkt_free(p[0]);
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 1, 1, 50, "r", 1, 0), 0);
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 0, 1, 51, "s", 1, 0), 0);
    assert_int_equal(ub__engine_output(&tx, p, 8, 6), 2);
    assert_int_equal(p[0]->path, 1);
    assert_int_equal(p[1]->path, 0);
    ub__pkt_free(p[0]);
    ub__pkt_free(p[1]);
    bundle_pair_done(&tx, &rx, log);
}

/*
 * An ACK and a response that only says a request is done (UB_PKT_F_AFTER_ACK): the ACK stays
 * first in their bundle, so that the initiator frees the request's packets before it reports
 * the request (no zero-copy payload to copy out); a request still goes before the ACK.
 */
static void test_bundle_after_ack(void **state)
{
    (void)state;
    struct ub__engine tx, rx;
    struct ub__addr a;
    struct rx_log *log = bundle_pair(&tx, &rx, &a, NULL);
    struct ub__pkt *p[8];
    for (int k = 0; k < 2; k++) {
        uint64_t ack = 60 + 2 * (uint64_t)k, other = ack + 1;
        assert_int_equal(ub__engine_dgram_send(&tx, &a, 1, 1, ack, "a", 1, 0), 0);
        assert_int_equal(ub__engine_dgram_send(&tx, &a, 0, 1, other, "r", 1, 0), 0);
        mark_flag(&tx, 1u, UB_PKT_F_ANY_PATH);
        if (k == 0)
            mark_flag(&tx, 2u, UB_PKT_F_AFTER_ACK);
        assert_int_equal(ub__engine_output(&tx, p, 8, 1), 1);
        assert_true(ub__bundle_is(p[0]->data, p[0]->len));
        ub__engine_input(&rx, &p[0], 1, 2);
        assert_int_equal(log->n, 2 * (uint32_t)k + 2);
        assert_int_equal(log->imm[2 * k], k == 0 ? ack : other);
        assert_int_equal(log->imm[2 * k + 1], k == 0 ? other : ack);
    }
    bundle_pair_done(&tx, &rx, log);
}

/* Moves the last n bytes of the packet at position `which` of e's transmit queue out to an
 * attached payload at src, which holds the same bytes (a zero-copy request). */
static void attach_tail(struct ub__engine *e, uint32_t which, const uint8_t *src, uint32_t n)
{
    struct ub__pkt *q[16];
    uint32_t k = 0;
    while (k < 16 && (q[k] = ub__ring_pop(&e->txq)) != NULL)
        k++;
    assert_true(which < k && q[which]->len > n);
    assert_memory_equal(q[which]->data + q[which]->len - n, src, n);
    q[which]->len -= n;
    assert_int_equal(ub__pkt_attach(q[which], src, n), 0);
    for (uint32_t i = 0; i < k; i++)
        assert_true(ub__ring_push(&e->txq, q[i]));
}

/*
 * A batch of two, one small (an ACK) and one of any size: one bundle when both fit the MTU
 * (the other first, its attached payload copied in), two datagrams when they do not.
 */
static void test_bundle_ack_with_big(void **state)
{
    (void)state;
    struct ub__engine tx, rx;
    struct ub__addr a;
    struct rx_log *log = bundle_pair(&tx, &rx, &a, NULL); /* MTU 2048 */
    static uint8_t big[2000];
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (uint8_t)(i * 7 + 1);
    uint32_t one = UB_PDS_UUD_SIZE + UB_SES_STD_SIZE + 1;
    struct ub__pkt *p[8];
    for (int zc = 0; zc < 2; zc++) {
        uint64_t ack = 70 + 2 * (uint64_t)zc, req = ack + 1;
        assert_int_equal(ub__engine_dgram_send(&tx, &a, 1, 1, ack, "a", 1, 0), 0);
        assert_int_equal(ub__engine_dgram_send(&tx, &a, 0, 1, req, big, 1500, 0), 0);
        mark_flag(&tx, 1u, UB_PKT_F_ANY_PATH);
        if (zc)
            attach_tail(&tx, 1, big, 1500);
        assert_int_equal(ub__engine_output(&tx, p, 8, 1), 1);
        assert_true(ub__bundle_is(p[0]->data, p[0]->len));
        assert_int_equal(p[0]->len, ub__bundle_size(one + one - 1 + 1500, 2));
        assert_int_equal(p[0]->xlen, 0);
        /* The request's record: its headers, then its 1 500 bytes, then the ACK's. */
        const uint8_t *rec = p[0]->data + UB_BUNDLE_HDR + UB_BUNDLE_REC_HDR;
        assert_memory_equal(rec + one - 1, big, 1500);
        ub__engine_input(&rx, &p[0], 1, 2);
        assert_int_equal(log->n, 2 * (uint32_t)zc + 2);
        assert_int_equal(log->imm[2 * zc], req);
        assert_int_equal(log->len[2 * zc], 1500);
        assert_int_equal(log->imm[2 * zc + 1], ack);
    }
    assert_int_equal(tx.stats.tx_bundles, 2);

    /* Too big to go with it: two datagrams, as they were. */
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 1, 1, 80, "a", 1, 0), 0);
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 0, 1, 81, big, sizeof(big), 0), 0);
    mark_flag(&tx, 1u, UB_PKT_F_ANY_PATH);
    assert_int_equal(ub__engine_output(&tx, p, 8, 3), 2);
    assert_false(ub__bundle_is(p[0]->data, p[0]->len));
    assert_int_equal(tx.stats.tx_bundles, 2);
    ub__pkt_free(p[0]);
    ub__pkt_free(p[1]);
    bundle_pair_done(&tx, &rx, log);
}

/*
 * An ACK that no small packet goes with rides with the last packet to its peer when it fits
 * beside it (a message's shorter last packet), in that packet's place and ahead of it; when
 * that one is too big, the ACK leaves alone and first, as before.
 */
static void test_bundle_ack_carried(void **state)
{
    (void)state;
    struct ub__engine tx, rx;
    struct ub__addr a;
    struct rx_log *log = bundle_pair(&tx, &rx, &a, NULL); /* MTU 2048 */
    static uint8_t big[2048];
    uint32_t one = UB_PDS_UUD_SIZE + UB_SES_STD_SIZE + 1;
    struct ub__pkt *p[8];
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 1, 1, 90, "a", 1, 0), 0);
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 0, 1, 91, big, 1900, 0), 0);
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 0, 1, 92, big, 1100, 0), 0);
    mark_flag(&tx, 1u, UB_PKT_F_ANY_PATH);
    stamp_order(&tx, (const uint64_t[]){0, 1, 2}, 3);
    assert_int_equal(ub__engine_output(&tx, p, 8, 1), 2);
    assert_int_equal(p[0]->len, one - 1 + 1900);
    assert_true(ub__bundle_is(p[1]->data, p[1]->len));
    assert_int_equal(p[1]->len, ub__bundle_size(one - 1 + 1100 + one, 2));
    ub__engine_input(&rx, p, 2, 2);
    assert_int_equal(log->n, 3);
    expect_imm(log, 0, (const uint64_t[]){91, 90, 92}, 3);
    assert_int_equal(tx.stats.tx_bundles, 1);

    /* The last one too big to take it (10 bytes short of the MTU): three datagrams, the ACK
     * first. */
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 1, 1, 93, "a", 1, 0), 0);
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 0, 1, 94, big, 1100, 0), 0);
    assert_int_equal(ub__engine_dgram_send(&tx, &a, 0, 1, 95, big, 2048 - (one - 1) - 10, 0), 0);
    mark_flag(&tx, 1u, UB_PKT_F_ANY_PATH);
    assert_int_equal(ub__engine_output(&tx, p, 8, 3), 3);
    assert_int_equal(p[0]->len, one);
    assert_int_equal(tx.stats.tx_bundles, 1);
    for (uint32_t i = 0; i < 3; i++)
        ub__pkt_free(p[i]);
    bundle_pair_done(&tx, &rx, log);
}

/* Runs 3000 datagrams through a 10 %-loss, reordering link; returns the receive log. */
static void lossy_run(uint64_t seed, struct rx_log *log, struct ub__engine_stats *rx)
{
    struct ub__testbed tb;
    make_bed(&tb, seed);
    struct ub__impair_cfg ic = {.seed = seed,
                                .drop_ppm = 100000,
                                .reorder_ppm = 200000,
                                .reorder_depth = 16,
                                .jitter_ns = 500};
    assert_int_equal(ub__loopnet_impair(tb.net, 0, 1, &ic), 0);
    ub__engine_set_upcalls(&tb.nodes[1].eng, &upcalls, log);
    uint8_t buf[512];
    memset(buf, 0x5a, sizeof(buf));
    for (uint32_t i = 0; i < 3000; i++) {
        assert_int_equal(ub__engine_dgram_send(&tb.nodes[0].eng, &tb.nodes[1].addr, (uint16_t)i, 7,
                                               i, buf, 1 + i % 512, tb.now),
                         0);
        if (i % 100 == 99) {
            ub__testbed_run(&tb, tb.now + 100, 1000);
            tb.now += 100;
        }
    }
    assert_true(ub__testbed_run(&tb, UB_TIME_NEVER, 100000));
    *rx = tb.nodes[1].eng.stats;
    assert_int_equal(tb.nodes[0].eng.stats.tx_pkts, 3000);
    ub__testbed_destroy(&tb);
}

static void test_testbed_deterministic(void **state)
{
    (void)state;
    struct rx_log *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b)),
                  *c = calloc(1, sizeof(*c));
    struct ub__engine_stats sa, sb, sc;
    lossy_run(11, a, &sa);
    lossy_run(11, b, &sb);
    lossy_run(12, c, &sc);
    /* Same seed: the same datagrams, in the same order, at the same simulated times. */
    assert_int_equal(a->n, b->n);
    assert_memory_equal(a->imm, b->imm, sizeof(a->imm));
    assert_memory_equal(a->at, b->at, sizeof(a->at));
    assert_memory_equal(&sa, &sb, sizeof(sa));
    /* About 10 % lost, and some arrived out of order. */
    assert_in_range(a->n, 2600, 2800);
    assert_int_equal(sa.rx_delivered, a->n);
    uint32_t inversions = 0;
    for (uint32_t i = 1; i < a->n; i++)
        inversions += a->imm[i] < a->imm[i - 1];
    assert_true(inversions > 50);
    assert_int_equal(a->initiator, 7);
    /* Another seed: another fate. */
    assert_true(a->n != c->n || memcmp(a->imm, c->imm, sizeof(a->imm)) != 0);
    free(a);
    free(b);
    free(c);
}

/* The testbed jumps time straight to the next event: 1 us latency means arrival at exactly 1 us. */
static void test_testbed_time(void **state)
{
    (void)state;
    struct ub__testbed tb;
    make_bed(&tb, 1);
    struct rx_log *log = calloc(1, sizeof(*log));
    ub__engine_set_upcalls(&tb.nodes[1].eng, &upcalls, log);
    tb.now = 5000;
    assert_int_equal(
        ub__engine_dgram_send(&tb.nodes[0].eng, &tb.nodes[1].addr, 0, 0, 42, "x", 1, tb.now), 0);
    assert_true(ub__testbed_run(&tb, UB_TIME_NEVER, 100));
    assert_int_equal(log->n, 1);
    assert_int_equal(log->at[0], 6000);
    assert_int_equal(log->imm[0], 42);
    assert_int_equal(log->first[0], 'x');
    free(log);
    ub__testbed_destroy(&tb);
}

/* The payload's first byte of a datagram the engine handed out (our tests send one). */
static uint8_t payload_byte(const struct ub__pkt *p)
{
    struct ub__wire_dgram d;
    assert_int_equal(ub__wire_parse_datagram(&d, p->data, p->len, 0), 0);
    return p->data[d.payload_off];
}

/* Outputs at now until nothing is pending: the datagrams carry first, first + 1, ... (their
 * payload bytes, modulo 256); returns how many came. */
static uint32_t drain_in_order(struct ub__engine *e, uint64_t now, uint32_t first)
{
    struct ub__pkt *out[64];
    uint32_t got = 0;
    for (int r = 0; r < 1000 && ub__engine_pending(e); r++) {
        uint32_t n = ub__engine_output(e, out, 64, now);
        for (uint32_t i = 0; i < n; i++, got++) {
            assert_int_equal(payload_byte(out[i]), (uint8_t)(first + got));
            ub__pkt_free(out[i]);
        }
    }
    return got;
}

/*
 * Datagrams the device refused: shm ones are held and come out first next time, in order,
 * until UB_ENGINE_HOLD_MAX_NS after they first went out; others are dropped at once.
 */
static void test_requeue(void **state)
{
    (void)state;
    struct ub__engine e;
    struct ub__engine_cfg ec = {.seed = 1};
    assert_int_equal(ub__engine_init(&e, &ec), 0);
    struct ub__addr shm, loop;
    memset(&shm, 0, sizeof(shm));
    shm.family = UB_AF_SHM;
    shm.port = 9;
    ub__addr_loop(&loop, 1);
    uint8_t b = 0;
    for (uint8_t i = 0; i < 3; i++) {
        b = i;
        assert_int_equal(ub__engine_dgram_send(&e, i == 1 ? &loop : &shm, 0, i, 0, &b, 1, 0), 0);
    }
    struct ub__pkt *out[8];
    assert_int_equal(ub__engine_output(&e, out, 8, 0), 3);
    assert_int_equal(e.stats.tx_pkts, 3);
    /* The device took none: the two shm ones are held, the loop one is dropped. */
    assert_int_equal(ub__engine_requeue(&e, out, 3), 1);
    assert_int_equal(e.stats.tx_held, 2);
    assert_true(ub__engine_pending(&e));
    b = 3;
    assert_int_equal(ub__engine_dgram_send(&e, &shm, 0, 3, 0, &b, 1, 1000), 0);
    assert_int_equal(ub__engine_output(&e, out, 8, 1000), 3);
    assert_int_equal(e.stats.tx_pkts, 4); /* the held ones are not counted twice */
    uint8_t want[3] = {0, 2, 3};
    for (int i = 0; i < 3; i++)
        assert_int_equal(payload_byte(out[i]), want[i]); /* oldest first */
    /* Refused again; past the bound the two first ones are dropped, the newer one is not. */
    assert_int_equal(ub__engine_requeue(&e, out, 3), 0);
    assert_int_equal(ub__engine_output(&e, out, 8, UB_ENGINE_HOLD_MAX_NS + 500), 1);
    assert_int_equal(e.stats.tx_hold_expired, 2);
    ub__pkt_free(out[0]);
    assert_false(ub__engine_pending(&e));
    ub__engine_fini(&e);
}

/*
 * A refused shm packet with an attached payload is held flat: on the link path PDS counts it
 * done with once handed out, so its request may end (and its buffer go back) while it waits.
 */
static void test_requeue_flattens(void **state)
{
    (void)state;
    struct ub__engine e;
    struct ub__engine_cfg ec = {.seed = 1};
    assert_int_equal(ub__engine_init(&e, &ec), 0);
    struct ub__pkt *p = ub__pkt_alloc(&e.pool);
    assert_non_null(p);
    uint8_t src[3000];
    memset(src, 0x5a, sizeof(src));
    memset(ub__pkt_put(p, 16), 0x11, 16);
    assert_int_equal(ub__pkt_attach(p, src, sizeof(src)), 0);
    memset(&p->addr, 0, sizeof(p->addr));
    p->addr.family = UB_AF_SHM;
    p->addr.port = 9;
    assert_int_equal(ub__engine_requeue(&e, &p, 1), 0);
    assert_int_equal(p->xlen, 0);
    assert_int_equal(p->len, 16 + sizeof(src));
    memset(src, 0, sizeof(src)); /* the buffer is its owner's again */
    struct ub__pkt *out[2];
    assert_int_equal(ub__engine_output(&e, out, 2, 0), 1);
    assert_ptr_equal(out[0], p);
    assert_int_equal(out[0]->data[16 + 2999], 0x5a);
    ub__pkt_free(out[0]);
    ub__engine_fini(&e);
}

/* An engine of the link path and its shm peer (port 9), to which a datagram (byte b) was
 * refused twice, the second time past UB_ENGINE_HOLD_MAX_NS: the peer is parked. Returns the
 * time of that output. */
static uint64_t parked_engine(struct ub__engine *e, struct ub__addr *shm, uint8_t b)
{
    struct ub__engine_cfg ec = {.seed = 1};
    ec.pds.link = true;
    assert_int_equal(ub__engine_init(e, &ec), 0);
    memset(shm, 0, sizeof(*shm));
    shm->family = UB_AF_SHM;
    shm->port = 9;
    assert_int_equal(ub__engine_dgram_send(e, shm, 0, 0, 0, &b, 1, 0), 0);
    struct ub__pkt *out[4];
    assert_int_equal(ub__engine_output(e, out, 4, 0), 1);
    assert_int_equal(ub__engine_requeue(e, out, 1), 0);
    /* Within the bound: offered again at once. */
    assert_true(ub__engine_pending(e));
    assert_int_equal(ub__engine_output(e, out, 4, 1000), 1);
    assert_int_equal(ub__engine_requeue(e, out, 1), 0);
    assert_false(e->held_parked);
    /* Past it: kept, offered, refused again -> parked until the retry. */
    uint64_t t = UB_ENGINE_HOLD_MAX_NS + 1000;
    assert_int_equal(ub__engine_output(e, out, 4, t), 1);
    assert_int_equal(ub__engine_requeue(e, out, 1), 0);
    assert_true(e->held_parked);
    return t;
}

/*
 * On the link path a held shm packet is never dropped (nothing would repair it): refused past
 * UB_ENGINE_HOLD_MAX_NS, its peer parks (nothing pending for it, nothing handed out, so a
 * progress thread sleeps; its new packets join the held one) until a timer
 * UB_ENGINE_HOLD_RETRY_NS later, then they are offered again, first and in order. Another
 * peer's packets go meanwhile.
 */
static void test_requeue_link_parks(void **state)
{
    (void)state;
    struct ub__engine e;
    struct ub__addr shm;
    uint64_t t = parked_engine(&e, &shm, 7);
    struct ub__pkt *out[4];
    uint8_t b;
    assert_int_equal(e.stats.tx_hold_expired, 0);
    assert_int_equal(e.stats.tx_hold_parked, 1);
    assert_false(ub__engine_pending(&e));
    b = 8; /* a newer one waits behind it */
    assert_int_equal(ub__engine_dgram_send(&e, &shm, 0, 0, 0, &b, 1, t), 0);
    assert_true(ub__engine_pending(&e));
    assert_int_equal(ub__engine_output(&e, out, 4, t + 10), 0);
    assert_false(ub__engine_pending(&e));
    struct ub__addr other = shm;
    other.port = 10; /* another peer's goes */
    b = 9;
    assert_int_equal(ub__engine_dgram_send(&e, &other, 0, 0, 0, &b, 1, t + 20), 0);
    assert_int_equal(ub__engine_output(&e, out, 4, t + 20), 1);
    assert_int_equal(out[0]->addr.port, 10);
    ub__pkt_free(out[0]);
    assert_false(ub__engine_pending(&e));
    assert_int_equal(ub__engine_next_deadline(&e), t + UB_ENGINE_HOLD_RETRY_NS);
    ub__engine_expire(&e, t + UB_ENGINE_HOLD_RETRY_NS);
    assert_true(ub__engine_pending(&e));
    assert_int_equal(drain_in_order(&e, t + UB_ENGINE_HOLD_RETRY_NS, 7), 2); /* the held first */
    assert_false(ub__engine_pending(&e));
    ub__engine_fini(&e);
}

/*
 * A parked peer's new packets join its held ones only up to the backlog bound; past it the
 * output takes nothing new and nothing is pending (back-pressure, not loss), and once the
 * retry comes they leave in the order they were sent.
 */
static void test_parked_backlog_bounded(void **state)
{
    (void)state;
    struct ub__engine e;
    struct ub__addr shm;
    uint64_t t = parked_engine(&e, &shm, 0);
    struct ub__pkt *out[64];
    uint8_t b;
    enum { N = 300 };
    for (uint32_t i = 1; i <= N; i++) {
        b = (uint8_t)i;
        assert_int_equal(ub__engine_dgram_send(&e, &shm, 0, 0, 0, &b, 1, t), 0);
    }
    for (int r = 0; r < 100 && ub__engine_pending(&e); r++)
        assert_int_equal(ub__engine_output(&e, out, 64, t + 1), 0);
    assert_false(ub__engine_pending(&e));
    assert_int_equal(e.held_parked_n, e.parked_backlog);
    assert_int_equal(ub__ring_count(&e.txq), N + 1 - e.parked_backlog);
    assert_int_equal(e.stats.tx_queue_full, 0);
    ub__engine_expire(&e, t + UB_ENGINE_HOLD_RETRY_NS);
    assert_true(ub__engine_pending(&e));
    assert_int_equal(drain_in_order(&e, t + UB_ENGINE_HOLD_RETRY_NS, 0), N + 1);
    ub__engine_fini(&e);
}

/*
 * On the link path an output batch is never larger than the held ring's room: a lane that
 * refuses all of it has every packet kept, none dropped, even with a held ring smaller than
 * the batch, and they leave in order once the lane takes them.
 */
static void test_link_batch_fits_held(void **state)
{
    (void)state;
    struct ub__engine e;
    struct ub__engine_cfg ec = {.seed = 1, .txq_cap = 8};
    ec.pds.link = true;
    assert_int_equal(ub__engine_init(&e, &ec), 0);
    struct ub__addr shm = {.family = UB_AF_SHM, .port = 9};
    struct ub__pkt *out[64];
    for (uint32_t round = 0; round < 2; round++) { /* 8 refused and held, 8 more queued */
        for (uint32_t i = 0; i < 8; i++) {
            uint8_t b = (uint8_t)(8 * round + i);
            assert_int_equal(ub__engine_dgram_send(&e, &shm, 0, 0, 0, &b, 1, round), 0);
        }
        uint32_t n = ub__engine_output(&e, out, 64, round);
        assert_int_equal(n, 8); /* the second time: the held ones, not the queued ones too */
        assert_int_equal(ub__engine_requeue(&e, out, n), 0);
    }
    assert_int_equal(drain_in_order(&e, 10, 0), 16);
    ub__engine_fini(&e);
}

/* A service that asks the engine to yield after a datagram whose immediate data is 1. */
struct yield_log {
    struct ub__engine *e;
    uint32_t n;
    uint64_t imm[16];
};

static void on_dgram_yield(void *arg, const struct ub__dgram_in *d, uint64_t now)
{
    (void)now;
    struct yield_log *l = arg;
    if (l->n < 16)
        l->imm[l->n++] = d->header_data;
    if (d->header_data == 1)
        l->e->rx_yield = true;
}

static const struct ub__engine_upcalls yield_up = {.dgram = on_dgram_yield};

/* An engine without bundles whose datagrams go to l (on_dgram_yield). */
static void yield_open(struct ub__engine *e, struct yield_log *l)
{
    struct ub__engine_cfg ec = {.seed = 1, .bundle = false};
    assert_int_equal(ub__engine_init(e, &ec), 0);
    *l = (struct yield_log){.e = e};
    ub__engine_set_upcalls(e, &yield_up, l);
}

/* n datagrams out of e (immediate data imm[i]), handed back as received. */
static void yield_batch(struct ub__engine *e, const uint64_t *imm, uint32_t n,
                        struct ub__pkt **pkts)
{
    struct ub__addr dst;
    ub__addr_loop(&dst, 1);
    uint8_t b = 0;
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(ub__engine_dgram_send(e, &dst, 0, 0, imm[i], &b, 1, 0), 0);
    assert_int_equal(ub__engine_output(e, pkts, n, 0), n);
}

/*
 * The layer above asks for a yield during an upcall: input stops after that datagram when at
 * most UB_ENGINE_YIELD_REST are left, which go in first, in order, next time; with more left
 * (a stream's batch) the request lapses and the batch is worked through.
 */
static void test_yield(void **state)
{
    (void)state;
    struct ub__engine e;
    struct yield_log l;
    yield_open(&e, &l);
    struct ub__pkt *pkts[UB_ENGINE_YIELD_REST + 2];

    const uint64_t four[] = {7, 1, 8, 9};
    yield_batch(&e, four, 4, pkts);
    assert_true(ub__engine_input(&e, pkts, 4, 0));
    assert_int_equal(l.n, 2);
    assert_true(ub__engine_rx_later(&e));
    assert_int_equal(e.stats.rx_yields, 1);
    assert_false(ub__engine_input_later(&e, 0));
    assert_false(ub__engine_rx_later(&e));
    const uint64_t want[] = {7, 1, 8, 9};
    assert_int_equal(l.n, 4);
    assert_memory_equal(l.imm, want, sizeof(want));

    /* A yield asked again among what was left: the rest waits again. */
    l.n = 0;
    const uint64_t again[] = {1, 1, 5};
    yield_batch(&e, again, 3, pkts);
    assert_true(ub__engine_input(&e, pkts, 3, 0));
    assert_true(ub__engine_input_later(&e, 0));
    assert_false(ub__engine_input_later(&e, 0));
    assert_int_equal(l.n, 3);
    assert_int_equal(l.imm[2], 5);

    /* One more left than a yield may leave behind: no yield. */
    l.n = 0;
    uint64_t many[UB_ENGINE_YIELD_REST + 2] = {1};
    yield_batch(&e, many, UB_ENGINE_YIELD_REST + 2, pkts);
    assert_false(ub__engine_input(&e, pkts, UB_ENGINE_YIELD_REST + 2, 0));
    assert_int_equal(l.n, UB_ENGINE_YIELD_REST + 2);
    assert_false(ub__engine_rx_later(&e));
    assert_int_equal(e.stats.rx_yields, 3);

    /* Input from elsewhere while some are left from before: no yield (order, room). */
    l.n = 0;
    yield_batch(&e, four, 4, pkts);
    assert_true(ub__engine_input(&e, pkts, 4, 0));
    yield_batch(&e, four, 4, pkts);
    assert_false(ub__engine_input(&e, pkts, 4, 0));
    assert_int_equal(ub__ring_count(&e.rx_later), 2);
    assert_false(ub__engine_input_later(&e, 0));
    assert_int_equal(l.n, 8);

    /* What is left when the engine goes is freed with it (the pool checks). */
    yield_batch(&e, four, 4, pkts);
    assert_true(ub__engine_input(&e, pkts, 4, 0));
    ub__engine_fini(&e);
}

/* One bundle out of tx of datagrams with immediate data imm[0..n), to the loop address 1. */
static struct ub__pkt *yield_bundle(struct ub__engine *tx, const uint64_t *imm, uint32_t n)
{
    struct ub__addr dst;
    ub__addr_loop(&dst, 1);
    struct ub__pkt *p[4];
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(ub__engine_dgram_send(tx, &dst, 0, 0, imm[i], "x", 1, 0), 0);
    assert_int_equal(ub__engine_output(tx, p, 4, 0), 1);
    assert_true(ub__bundle_is(p[0]->data, p[0]->len));
    return p[0];
}

/*
 * A yield inside a bundle: when one record is left after the one that asked (a ping-pong's
 * ACK behind the answer), it waits, as a bundle of its own in the same buffer, for the next
 * input; more records (a stream's) are worked through. Neither happens while more than
 * UB_ENGINE_PINGPONG_OUT of our own packets are in flight on the last PDC (a stream in both
 * directions, whose every yield would only cost a round), unless the driver takes answers
 * alone (shm).
 */
static void test_yield_bundle(void **state)
{
    (void)state;
    struct ub__engine tx, e;
    struct ub__engine_cfg ec = {.seed = 1, .bundle = true};
    assert_int_equal(ub__engine_init(&tx, &ec), 0);
    struct yield_log l;
    yield_open(&e, &l);

    const uint64_t two[] = {1, 7};
    struct ub__pkt *b = yield_bundle(&tx, two, 2);
    assert_true(ub__engine_input(&e, &b, 1, 0));
    assert_int_equal(l.n, 1);
    assert_int_equal(e.stats.rx_split, 1);
    assert_int_equal(ub__ring_count(&e.rx_later), 1);
    assert_false(ub__engine_input_later(&e, 0));
    assert_int_equal(l.n, 2);
    assert_int_equal(l.imm[1], 7);
    assert_int_equal(e.stats.rx_bundles, 1); /* the rest is not a bundle more */
    assert_int_equal(e.stats.rx_bundled, 2);
    assert_int_equal(e.stats.rx_malformed, 0);

    /* Two records after it: all three now (the yield, with nothing left, ends the input). */
    l.n = 0;
    const uint64_t three[] = {1, 7, 8};
    b = yield_bundle(&tx, three, 3);
    assert_true(ub__engine_input(&e, &b, 1, 0));
    assert_int_equal(l.n, 3);
    assert_false(ub__engine_rx_later(&e));
    assert_int_equal(e.stats.rx_split, 1);

    /* Three of our packets in flight on the last PDC: the bundle is worked through, and a
     * batch of two datagrams does not yield either. */
    struct ub__addr peer;
    ub__addr_loop(&peer, 9);
    for (uint32_t i = 0; i < UB_ENGINE_PINGPONG_OUT + 1; i++) {
        struct ub__pds_tx t = {.dst = &peer, .mode = UB_PDS_RUD, .ses_kind = UB_PDS_NH_REQ_STD};
        assert_int_equal(ub__pds_send(e.pds, &t, t_send8_pkt(&e.pool), 0), 0);
    }
    assert_int_equal(ub__pds_last_outstanding(e.pds), UB_ENGINE_PINGPONG_OUT + 1);
    l.n = 0;
    b = yield_bundle(&tx, two, 2);
    assert_false(ub__engine_input(&e, &b, 1, 0));
    assert_int_equal(l.n, 2);
    assert_int_equal(e.stats.rx_split, 1);
    struct ub__addr dst;
    ub__addr_loop(&dst, 1);
    struct ub__pkt *pkts[2];
    for (uint32_t i = 0; i < 2; i++) { /* one at a time: not bundled */
        assert_int_equal(ub__engine_dgram_send(&tx, &dst, 0, 0, two[i], "x", 1, 0), 0);
        assert_int_equal(ub__engine_output(&tx, &pkts[i], 1, 0), 1);
    }
    assert_false(ub__engine_input(&e, pkts, 2, 0));
    assert_int_equal(l.n, 4);
    assert_false(ub__engine_rx_later(&e));

    /* A driver that takes answers alone (shm) yields whatever is in flight. */
    e.rx_one_first = true;
    b = yield_bundle(&tx, two, 2);
    assert_true(ub__engine_input(&e, &b, 1, 0));
    assert_int_equal(e.stats.rx_split, 2);
    assert_false(ub__engine_input_later(&e, 0));
    assert_int_equal(l.n, 6);

    ub__engine_fini(&tx);
    ub__engine_fini(&e);
}

/* A device that hands out what the test queued and notes how many each receive asked for. */
struct script_dev {
    struct ub__dev dev;
    struct ub__pkt *q[16];
    uint32_t head, n;
    uint32_t asked[8], calls;
};

static int script_send(struct ub__dev *dev, struct ub__pkt **pkts, uint32_t n)
{
    (void)dev;
    (void)pkts;
    (void)n;
    return UB_ENOTSUP;
}

static int script_recv(struct ub__dev *dev, struct ub__pkt **pkts, uint32_t max,
                       struct ub__pktpool *pool)
{
    (void)pool;
    struct script_dev *d = (struct script_dev *)(void *)dev;
    if (d->calls < 8)
        d->asked[d->calls] = max;
    d->calls++;
    uint32_t k = 0;
    for (; k < max && d->head < d->n; k++)
        pkts[k] = d->q[d->head++];
    return (int)k;
}

static int script_fd(struct ub__dev *dev)
{
    (void)dev;
    return -1;
}

static uint32_t script_one(const struct ub__dev *dev)
{
    (void)dev;
    return 1;
}

static const struct ub__dev_ops script_ops = {
    .name = "script",
    .send = script_send,
    .recv = script_recv,
    .fd = script_fd,
    .mtu = script_one,
    .num_paths = script_one,
};

/* Queues datagrams (immediate data imm[i]) on the scripted device and clears its notes. */
static void script_queue(struct script_dev *d, struct ub__engine *e, const uint64_t *imm,
                         uint32_t n)
{
    struct ub__pkt *pkts[8];
    yield_batch(e, imm, n, pkts);
    if (d->head == d->n)
        d->head = d->n = 0;
    for (uint32_t i = 0; i < n; i++)
        d->q[d->n++] = pkts[i];
    d->calls = 0;
}

/*
 * A poller that answers (rx_one_first) gets the first datagram alone while its receives
 * yield and the device's backlog is small (a ping-pong): the device is not asked about the
 * rest until that one was worked through without a yield. After a yield the backlog is
 * unknown and the next receive batches; a large backlog (a stream) keeps receives batching,
 * and so do receives that stop yielding.
 */
static void test_drive_one_first(void **state)
{
    (void)state;
    struct ub__engine e;
    struct yield_log l;
    yield_open(&e, &l);
    struct script_dev d = {.dev = {.ops = &script_ops}};
    struct ub__drive_stats st = {0};
    e.rx_one_first = true;

    /* Nothing known yet: a batch, whose yield (a ping-pong's answer) starts the history. */
    const uint64_t one[] = {1};
    script_queue(&d, &e, one, 1);
    assert_int_equal(ub__drive_recv(&e, &d.dev, 0, &st), 1);
    assert_int_equal(d.asked[0], UB_DRIVE_BATCH);

    /* The next answer: the device was asked for one, and the rest stays in it. */
    const uint64_t a[] = {1, 7};
    script_queue(&d, &e, a, 2);
    assert_int_equal(ub__drive_recv(&e, &d.dev, 0, &st), 1);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.asked[0], 1);
    assert_int_equal(l.n, 2);
    assert_false(ub__engine_rx_later(&e));
    assert_int_equal(e.stats.rx_alone, 1);

    /* What waited behind it: a batch (its size unknown), small. */
    d.calls = 0;
    assert_int_equal(ub__drive_recv(&e, &d.dev, 0, &st), 1);
    assert_int_equal(d.asked[0], UB_DRIVE_BATCH);

    /* No yield from the first: the rest follows in a batch, in order. */
    const uint64_t b[] = {8, 1};
    script_queue(&d, &e, b, 2);
    assert_int_equal(ub__drive_recv(&e, &d.dev, 0, &st), 2);
    assert_int_equal(d.calls, 2);
    assert_int_equal(d.asked[0], 1);
    assert_int_equal(d.asked[1], UB_DRIVE_BATCH);
    const uint64_t want[] = {1, 1, 7, 8, 1};
    assert_int_equal(l.n, 5);
    assert_memory_equal(l.imm, want, sizeof(want));

    /* A stream: after the first yield, batches while more than a few wait. */
    const uint64_t c[] = {1, 2, 3, 4, 5, 6, 7};
    script_queue(&d, &e, c, 7);
    assert_int_equal(ub__drive_recv(&e, &d.dev, 0, &st), 1);
    assert_int_equal(ub__drive_recv(&e, &d.dev, 0, &st), 6);
    const uint64_t f[] = {1, 9};
    script_queue(&d, &e, f, 2);
    assert_int_equal(ub__drive_recv(&e, &d.dev, 0, &st), 2);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.asked[0], UB_DRIVE_BATCH);
    assert_true(ub__engine_rx_later(&e)); /* the yield kept 9 for later, as without */
    assert_int_equal(ub__drive_recv(&e, &d.dev, 0, &st), 1);
    assert_int_equal(l.n, 14);
    assert_int_equal(l.imm[13], 9);
    assert_int_equal(e.stats.rx_alone, 3);

    /* Receives that stop yielding (the responses to the poller's own requests): batches. */
    const uint64_t resp[] = {7};
    for (int i = 0; i < 4; i++) {
        script_queue(&d, &e, resp, 1);
        assert_int_equal(ub__drive_recv(&e, &d.dev, 0, &st), 1);
    }
    script_queue(&d, &e, a, 2);
    assert_int_equal(ub__drive_recv(&e, &d.dev, 0, &st), 2);
    assert_int_equal(d.asked[0], UB_DRIVE_BATCH);
    assert_int_equal(ub__drive_recv(&e, &d.dev, 0, &st), 1); /* 7, left by the yield */

    /* A poller that does not answer: batches, however small the backlog. */
    e.rx_one_first = false;
    script_queue(&d, &e, a, 2);
    assert_int_equal(ub__drive_recv(&e, &d.dev, 0, &st), 2);
    assert_int_equal(d.asked[0], UB_DRIVE_BATCH);
    assert_int_equal(ub__drive_recv(&e, &d.dev, 0, &st), 1);
    assert_int_equal(d.head, d.n); /* all taken */
    ub__engine_fini(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dgram_bytes),
        cmocka_unit_test(test_send_errors),
        cmocka_unit_test(test_requeue),
        cmocka_unit_test(test_requeue_flattens),
        cmocka_unit_test(test_requeue_link_parks),
        cmocka_unit_test(test_parked_backlog_bounded),
        cmocka_unit_test(test_link_batch_fits_held),
        cmocka_unit_test(test_malformed_and_unsupported),
        cmocka_unit_test(test_bundles),
        cmocka_unit_test(test_bundle_keeps_order),
        cmocka_unit_test(test_bundles_any_path),
        cmocka_unit_test(test_bundle_after_ack),
        cmocka_unit_test(test_bundle_ack_with_big),
        cmocka_unit_test(test_bundle_ack_carried),
        cmocka_unit_test(test_testbed_deterministic),
        cmocka_unit_test(test_testbed_time),
        cmocka_unit_test(test_yield),
        cmocka_unit_test(test_yield_bundle),
        cmocka_unit_test(test_drive_one_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
