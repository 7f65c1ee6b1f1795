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
 * the latest state; without it each request asking for an ACK gets its own. An ACK a packet
 * with K gets (responses on ACKs) is pinned: never rewritten by a later one.
 *
 * Twin: ACKs go to the address of an initiator PDC of ours to the same device, and still do
 * when the PDC that named the device closes while another one knows it too.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <softub/errors.h>
#include "pds/pds.h"
#include "wire/datagram.h"
#include "unit/pds_rig.h"
#include "unit/pds_send8.h"

struct krig {
    struct pds_rig k; /* first: the upcalls get the krig */
    uint32_t delivered;
    /* Responses on ACKs: deliveries (by number) that ask for their own ACK, and that attach a
     * response to it; responses received on ACKs; packets acked (by cookie, below 64). */
    uint64_t own_mask, rsp_mask;
    uint32_t rsp_rx, acked;
    uint64_t acked_mask;
};

static void k_deliver(void *arg, const struct ub__pds_rx *rx, uint64_t now)
{
    (void)now;
    struct krig *r = arg;
    uint8_t t = rx->hdr->pds.type;
    if (t == UB_PDS_TYPE_ACK || t == UB_PDS_TYPE_ACK_CC || t == UB_PDS_TYPE_ACK_CCX) {
        r->rsp_rx++; /* a response that rode on an ACK */
        return;
    }
    uint32_t i = r->delivered++;
    if (i < 64 && (r->own_mask >> i) & 1)
        ub__pds_dlv_own(r->k.pds);
    if (i < 64 && (r->rsp_mask >> i) & 1) {
        uint8_t b[UB_EXT_SIZE + UB_SES_RSP_DATA_SIZE];
        struct ub__ext ext = {.next_hdr = UB_PDS_NH_RSP_DATA,
                              .order_seq = i,
                              .incarnation = ub__pds_incarnation(r->k.pds)};
        struct ub__ses_rsp_data sr = {.rc = UB_SES_RC_OK};
        struct ub__wcur w;
        ub__wcur_init(&w, b, sizeof(b));
        assert_int_equal(ub__ext_encode(&ext, &w), 0);
        assert_int_equal(ub__ses_rsp_data_encode(&sr, &w), 0);
        uint8_t *at = ub__pds_dlv_rsp(r->k.pds, sizeof(b));
        assert_non_null(at);
        memcpy(at, b, sizeof(b));
    }
}

static void k_acked(void *arg, uint64_t cookie, uint64_t now)
{
    (void)now;
    struct krig *r = arg;
    r->acked++;
    if (cookie < 64)
        r->acked_mask |= 1ull << cookie;
}

static void k_failed(void *arg, uint64_t cookie, int err, uint64_t now)
{
    (void)arg;
    (void)cookie;
    (void)err;
    (void)now;
}

static const struct ub__pds_upcalls k_up = {
    .deliver = k_deliver, .acked = k_acked, .failed = k_failed};

static void rig_open_idle(struct krig *r, uint64_t seed, bool coalesce, uint64_t idle_close_ns)
{
    memset(r, 0, sizeof(*r));
    struct ub__pds_cfg cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.ack_coalesce = coalesce;
    cfg.idle_close_ns = idle_close_ns;
    pds_rig_open(&r->k, &cfg, seed, &k_up, r);
}

static void rig_open_cfg(struct krig *r, uint64_t seed, bool coalesce)
{
    rig_open_idle(r, seed, coalesce, 0);
}

static void rig_open(struct krig *r, uint64_t seed)
{
    rig_open_cfg(r, seed, false);
}

static void rig_close(struct krig *r)
{
    pds_rig_close(&r->k);
}

/* Queues an 8-byte SEND from r to dst at `now` and returns the packet PDS hands out for it. */
static struct ub__pkt *next_req_m(struct krig *r, const struct ub__addr *dst, uint64_t cookie,
                                  uint8_t mode, bool ack_req, bool own, uint64_t now)
{
    struct ub__pkt *p = t_send8_pkt(&r->k.pool);
    struct ub__pds_tx tx;
    memset(&tx, 0, sizeof(tx));
    tx.dst = dst;
    tx.mode = mode;
    tx.ses_kind = UB_PDS_NH_REQ_STD;
    tx.cookie = cookie;
    tx.ack_req = ack_req;
    tx.own = own;
    assert_int_equal(ub__pds_send(r->k.pds, &tx, p, now), 0);
    struct ub__pkt *out[4];
    assert_int_equal(ub__pds_pull(r->k.pds, out, 4, now), 1);
    return out[0];
}

static struct ub__pkt *next_req_x(struct krig *r, const struct ub__addr *dst, uint64_t cookie,
                                  bool ack_req, bool own)
{
    return next_req_m(r, dst, cookie, UB_PDS_RUD, ack_req, own, 0);
}

static struct ub__pkt *next_req_ar(struct krig *r, const struct ub__addr *dst, uint64_t cookie,
                                   bool ack_req)
{
    return next_req_x(r, dst, cookie, ack_req, false);
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
    assert_int_equal(ub__pds_input(dst->k.pds, p, &d, 0), 1);
    ub__pkt_free(p);
}

/* Carries everything src has to send to dst (as from src_addr). */
static void carry_all(struct krig *src, const struct ub__addr *src_addr, struct krig *dst)
{
    struct ub__pkt *out[16];
    uint32_t n;
    while ((n = ub__pds_pull(src->k.pds, out, 16, 0)) != 0)
        for (uint32_t i = 0; i < n; i++)
            carry(out[i], src_addr, dst);
}

static void drain(struct krig *r)
{
    struct ub__pkt *out[16];
    uint32_t n;
    while ((n = ub__pds_pull(r->k.pds, out, 16, 0)) != 0)
        for (uint32_t i = 0; i < n; i++)
            ub__pkt_free(out[i]);
}

static struct ub__addr inet_h(uint8_t host, uint16_t port)
{
    struct ub__addr a;
    memset(&a, 0, sizeof(a));
    a.family = UB_AF_INET;
    a.port = port;
    a.ip[0] = 10;
    a.ip[3] = host;
    return a;
}

static struct ub__addr inet(uint16_t port)
{
    return inet_h(1, port);
}

static void test_key_check(void **state)
{
    (void)state;
    struct krig a, b;
    rig_open(&a, 7);
    rig_open(&b, 8);
    struct ub__addr aa = inet(1000), aa2 = inet(1001), ba = inet(2000);
    const struct ub__pds_stats *st = ub__pds_stats(b.k.pds);

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
            uint32_t n = ub__pds_pull(b.k.pds, out, 8, 0);
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
            assert_int_equal(ub__pds_outstanding(a.k.pds, &ba, UB_PDS_RUD), 0);
            assert_int_equal(ub__pds_stats(a.k.pds)->acks_rx, (uint64_t)(round + 1) * n);
        }
        assert_int_equal(ub__pds_stats(b.k.pds)->acks_coalesced, co ? 4 : 0);
        assert_int_equal(b.delivered, 6);
        drain(&a);
        drain(&b);
        rig_close(&a);
        rig_close(&b);
    }
}

/*
 * An ACK's service time (how long the target held it after its trigger arrived, which the
 * initiator takes off its RTT sample) counts until the ACK leaves, not until it was written:
 * a trigger that arrived at 5 us, its ACK taken from the output at 15 us, says 10 us.
 */
static void test_ack_service_time(void **state)
{
    (void)state;
    struct krig a, b;
    rig_open(&a, 21);
    rig_open_cfg(&b, 22, true);
    struct ub__addr aa = inet(1000), ba = inet(2000);
    struct ub__pkt *p = next_req_ar(&a, &ba, 1, true);
    p->addr = aa;
    struct ub__wire_dgram d;
    assert_int_equal(ub__wire_parse_datagram(&d, p->data, p->len, 0), 0);
    assert_int_equal(ub__pds_input(b.k.pds, p, &d, 5000), 1);
    ub__pkt_free(p);
    struct ub__pkt *out[4];
    assert_int_equal(ub__pds_pull(b.k.pds, out, 4, 15000), 1);
    assert_int_equal(ub__wire_parse_datagram(&d, out[0]->data, out[0]->len, 0), 0);
    assert_int_equal(d.pds.type, UB_PDS_TYPE_ACK_CC);
    assert_int_equal(d.pds.u.ack.cc.nscc.service_time, 10000 / 16);
    assert_int_equal(out[0]->flags & 0x1f, 0); /* none of PDS's own bits left on it */
    ub__pkt_free(out[0]);
    drain(&a);
    rig_close(&a);
    rig_close(&b);
}

/* The ACK trigger of a parsed ACK. */
static uint32_t trig_of(const struct ub__wire_dgram *d)
{
    return (uint32_t)((int64_t)d->pds.u.ack.cack_psn + d->pds.u.ack.ack_psn_offset);
}

/*
 * Responses on ACKs with coalescing on: p0 (plain, AR) queues an ACK; p1 (own, a response
 * attached) takes that queued ACK over, pinned; p2 (own) gets a pinned ACK of its own; p3
 * (plain, AR) a new ACK, since the pinned ones are no longer rewritten. At the initiator the
 * last ACK arrives first: it completes p0 and p3 and only covers p1 and p2, whose own ACKs
 * complete them after (p1's with its response). A duplicate of p1 is answered with the cached
 * response until the initiator's clear PSN passes it.
 */
static void test_ack_own_pinned(void **state)
{
    (void)state;
    struct krig a, b;
    rig_open(&a, 19);
    rig_open_cfg(&b, 20, true);
    struct ub__addr aa = inet(1000), ba = inet(2000);
    carry(next_req(&a, &ba, 60), &aa, &b); /* SYN: delivery 0 */
    carry_all(&b, &ba, &a);
    b.own_mask = (1u << 2) | (1u << 3);
    b.rsp_mask = 1u << 2;
    struct ub__pkt *p[4];
    for (uint64_t i = 0; i < 4; i++)
        p[i] = next_req_x(&a, &ba, i, i == 0 || i == 3, i == 1 || i == 2);
    uint32_t psn1 = ub__ld32(p[1]->data + 4);
    struct ub__pkt *dup1 = ub__pkt_clone(p[1]);
    assert_non_null(dup1);
    for (int i = 0; i < 4; i++)
        carry(p[i], &aa, &b);
    const struct ub__pds_stats *sb = ub__pds_stats(b.k.pds), *sa = ub__pds_stats(a.k.pds);
    assert_int_equal(sb->acks_coalesced, 1);
    assert_int_equal(sb->acks_rsp_tx, 1);
    struct ub__pkt *out[8];
    assert_int_equal(ub__pds_pull(b.k.pds, out, 8, 0), 3);
    struct ub__wire_dgram d[3];
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ub__wire_parse_datagram(&d[i], out[i]->data, out[i]->len, 0), 0);
        assert_true(d[i].pds.u.ack.flags & UB_PDS_ACK_F_OWN);
        assert_int_equal(trig_of(&d[i]), psn1 + (uint32_t)i);
        assert_int_equal(out[i]->tag, 0);
    }
    assert_int_equal(d[0].ses_kind, UB_PDS_NH_RSP_DATA); /* p1's ACK carries its response */
    assert_int_equal(d[1].ses_kind, UB_PDS_NH_NONE);
    assert_int_equal(d[2].ses_kind, UB_PDS_NH_NONE);
    assert_int_equal(d[2].pds.u.ack.cack_psn, psn1 + 2); /* p3's ACK covers everything */
    uint32_t acked0 = a.acked;
    carry(out[2], &ba, &a); /* p0 and p3 complete, p1 and p2 are covered */
    assert_int_equal(a.acked - acked0, 2);
    assert_int_equal(a.acked_mask & 0xf, 0x9);
    assert_int_equal(sa->own_covered, 2);
    assert_int_equal(ub__pds_outstanding(a.k.pds, &ba, UB_PDS_RUD), 3); /* from p1 on */
    carry(out[0], &ba, &a);                                             /* p1, with its response */
    assert_int_equal(a.acked_mask & 0xf, 0xb);
    assert_int_equal(a.rsp_rx, 1);
    carry(out[1], &ba, &a); /* p2 */
    assert_int_equal(a.acked_mask & 0xf, 0xf);
    assert_int_equal(a.acked - acked0, 4);
    assert_int_equal(ub__pds_outstanding(a.k.pds, &ba, UB_PDS_RUD), 0);
    assert_int_equal(sa->retx_pkts, 0);
    /* A late duplicate of p1: its own ACK again, with the response. */
    struct ub__pkt *dup2 = ub__pkt_clone(dup1);
    assert_non_null(dup2);
    carry(dup1, &aa, &b);
    assert_int_equal(sb->acks_rsp_resent, 1);
    assert_int_equal(ub__pds_pull(b.k.pds, out, 8, 0), 1);
    struct ub__wire_dgram e;
    assert_int_equal(ub__wire_parse_datagram(&e, out[0]->data, out[0]->len, 0), 0);
    assert_int_equal(trig_of(&e), psn1);
    assert_int_equal(e.ses_kind, UB_PDS_NH_RSP_DATA);
    /* A repeat for a packet already completed: counted, its response not taken up again (a
     * stale RNR would count against the request's next attempt), nothing completes. */
    carry(out[0], &ba, &a);
    assert_int_equal(a.rsp_rx, 1);
    assert_int_equal(sa->acks_rsp_rx, 2);
    assert_int_equal(sa->acks_rsp_stale, 1);
    assert_int_equal(a.acked - acked0, 4);
    /* The next request says everything up to it was acknowledged: the response is dropped. */
    b.own_mask = b.rsp_mask = 0;
    carry(next_req_ar(&a, &ba, 5, true), &aa, &b);
    drain(&b);
    carry(dup2, &aa, &b);
    assert_int_equal(sb->acks_rsp_resent, 1);
    assert_int_equal(ub__pds_pull(b.k.pds, out, 8, 0), 1);
    assert_int_equal(ub__wire_parse_datagram(&e, out[0]->data, out[0]->len, 0), 0);
    assert_int_equal(e.ses_kind, UB_PDS_NH_NONE);
    ub__pkt_free(out[0]);
    drain(&a);
    rig_close(&a);
    rig_close(&b);
}

/* The address the single ACK b has queued goes to (and frees it). */
static uint16_t ack_port(struct krig *b)
{
    struct ub__pkt *out[4];
    assert_int_equal(ub__pds_pull(b->k.pds, out, 4, 0), 1);
    uint16_t port = out[0]->addr.port;
    ub__pkt_free(out[0]);
    return port;
}

/*
 * Where ACKs go: a target PDC ACKs to the address its own node's initiator PDCs use for the
 * same device (their twin), not to the port a request came from. b has two initiator PDCs to
 * two ports of a that both learned a's device; when the one that named the device closes, the
 * other takes over.
 */
static void test_ack_twin_survives(void **state)
{
    (void)state;
    struct krig a, b;
    rig_open(&a, 21);
    uint64_t idle = 1000000, t1 = idle / 2;
    rig_open_idle(&b, 22, false, idle);
    struct ub__addr a_main = inet_h(1, 1000), a_alt = inet_h(1, 1002), ba = inet_h(2, 2000);
    struct ub__addr a_path = inet_h(1, 1001);
    /* b's PDC to a_main opens at 0, the one to a_alt at t1: both learn a's device from a
     * response on an ACK. */
    a.own_mask = a.rsp_mask = 3;
    carry(next_req_m(&b, &a_main, 40, UB_PDS_RUD, true, true, 0), &ba, &a);
    carry(next_req_m(&b, &a_alt, 41, UB_PDS_RUD, true, true, t1), &ba, &a);
    carry_all(&a, &a_main, &b);
    assert_int_equal(b.rsp_rx, 2);
    assert_int_equal(b.acked, 2);
    /* a's requests come from another of its ports; b ACKs them to the first twin. */
    carry(next_req_ar(&a, &ba, 0, true), &a_path, &b);
    assert_int_equal(ack_port(&b), 1000);
    /* The PDC to a_main closes idle; the younger one names a's device from now on. */
    ub__timers_expire(&b.k.timers, idle + 1);
    carry_all(&b, &ba, &a); /* the close handshake */
    carry_all(&a, &a_main, &b);
    assert_int_equal(ub__pds_stats(b.k.pds)->pdc_closed, 1);
    carry(next_req_ar(&a, &ba, 1, true), &a_path, &b);
    assert_int_equal(ack_port(&b), 1002);
    drain(&a);
    rig_close(&a);
    rig_close(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_check),         cmocka_unit_test(test_ack_coalesce),
        cmocka_unit_test(test_ack_service_time),  cmocka_unit_test(test_ack_own_pinned),
        cmocka_unit_test(test_ack_twin_survives),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
