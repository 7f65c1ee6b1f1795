/*
 * The link path (ub__pds_cfg.link, docs/pds.md): RUD and ROD packets to a shm peer go as LINK
 * packets, delivered at once and in order, acknowledged as they leave for the driver, with no
 * ACK, timer or PDC. Each names the receiver's incarnation as last heard from it: a restarted
 * peer drops what was meant for its predecessor. A LINK packet from any other carrier is
 * malformed; a receiver that keeps PDCs itself takes one all the same.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <softub/errors.h>
#include "core/clock.h"
#include "pds/pds.h"
#include "wire/datagram.h"
#include "unit/pds_rig.h"
#include "unit/pds_send8.h"

#define K_MAX 8

struct krig {
    struct pds_rig k; /* first: the upcalls get the krig */
    struct ub__addr addr;
    uint32_t acked, failed, delivered;
    uint32_t restarted, noticed; /* restarted upcalls, of them with `noticed` */
    uint64_t acked_cookie[K_MAX];
    uint8_t mode[K_MAX];
    uint32_t inc[K_MAX];
    uint32_t seq[K_MAX];
};

static void k_deliver(void *arg, const struct ub__pds_rx *rx, uint64_t now)
{
    (void)now;
    struct krig *r = arg;
    assert_true(r->delivered < K_MAX);
    r->mode[r->delivered] = rx->mode;
    r->inc[r->delivered] = rx->incarnation;
    r->seq[r->delivered] = rx->hdr->ext.order_seq;
    r->delivered++;
}

static void k_acked(void *arg, uint64_t cookie, uint64_t now)
{
    (void)now;
    struct krig *r = arg;
    assert_true(r->acked < K_MAX);
    r->acked_cookie[r->acked++] = cookie;
}

static void k_failed(void *arg, uint64_t cookie, int err, uint64_t now)
{
    (void)cookie;
    (void)err;
    (void)now;
    ((struct krig *)arg)->failed++;
}

static void k_restarted(void *arg, const struct ub__addr *peer, bool noticed, uint64_t now)
{
    (void)peer;
    (void)now;
    struct krig *r = arg;
    r->restarted++;
    r->noticed += noticed;
}

static const struct ub__pds_upcalls k_up = {
    .deliver = k_deliver, .acked = k_acked, .failed = k_failed, .restarted = k_restarted};

static void shm_addr(struct ub__addr *a, uint16_t id)
{
    memset(a, 0, sizeof(*a));
    a->family = UB_AF_SHM;
    a->port = id;
}

static void rig_open(struct krig *r, uint16_t id, uint64_t seed, bool link)
{
    memset(r, 0, sizeof(*r));
    struct ub__pds_cfg cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.link = link;
    pds_rig_open(&r->k, &cfg, seed, &k_up, r);
    shm_addr(&r->addr, id);
}

static void rig_close(struct krig *r)
{
    pds_rig_close(&r->k);
}

static int k_send(struct krig *r, const struct ub__addr *dst, uint8_t mode, uint32_t seq,
                  uint64_t cookie)
{
    struct ub__pds_tx tx;
    memset(&tx, 0, sizeof(tx));
    tx.dst = dst;
    tx.mode = mode;
    tx.ses_kind = UB_PDS_NH_REQ_STD;
    tx.cookie = cookie;
    tx.ext.version = 0;
    tx.ext.order_seq = seq;
    int rc = ub__pds_send(r->k.pds, &tx, t_send8_pkt(&r->k.pool), 0);
    return rc;
}

/* What a carrier does: the bytes of p reach `to` as coming from `from_addr`. */
static void carry(struct krig *to, const struct ub__addr *from_addr, struct ub__pkt *p)
{
    struct ub__pkt *q = ub__pkt_alloc(&to->k.pool);
    assert_non_null(q);
    memcpy(ub__pkt_put(q, p->len), p->data, p->len);
    q->addr = *from_addr;
    ub__pkt_free(p);
    struct ub__wire_dgram d;
    assert_int_equal(ub__wire_parse_datagram(&d, q->data, q->len, 0), 0);
    assert_int_equal(ub__pds_input(to->k.pds, q, &d, 0), 1);
    ub__pkt_free(q);
}

/* Everything from pulls out of `from` to `to`; returns how many. */
static uint32_t flush(struct krig *from, struct krig *to)
{
    struct ub__pkt *out[K_MAX];
    uint32_t n = ub__pds_pull(from->k.pds, out, K_MAX, 0), total = n;
    for (uint32_t i = 0; i < n; i++)
        carry(to, &from->addr, out[i]);
    return total;
}

/* One RUD packet from `from` carried to `to`. */
static void pass_one(struct krig *from, struct krig *to, uint32_t seq, uint64_t cookie)
{
    assert_int_equal(k_send(from, &to->addr, UB_PDS_RUD, seq, cookie), 0);
    assert_int_equal(flush(from, to), 1);
}

static void test_delivered_in_order_acked_as_they_leave(void **state)
{
    (void)state;
    struct krig a, b;
    rig_open(&a, 1, 11, true);
    rig_open(&b, 2, 22, true);
    assert_int_equal(k_send(&a, &b.addr, UB_PDS_RUD, 10, 0x101), 0);
    assert_int_equal(k_send(&a, &b.addr, UB_PDS_ROD, 11, 0x102), 0);
    assert_int_equal(k_send(&a, &b.addr, UB_PDS_RUD, 12, 0x103), 0);
    struct ub__pds_peer peer;
    ub__pds_peer(a.k.pds, &b.addr, UB_PDS_RUD, &peer);
    assert_null(peer.pdc);
    assert_int_equal(peer.outstanding, 3);
    assert_false(peer.own_ok);
    assert_int_equal(a.acked, 0);
    struct ub__pkt *out[K_MAX];
    assert_int_equal(ub__pds_pull(a.k.pds, out, K_MAX, 0), 3);
    /* Acknowledged as handed out, in order; nothing left, no timer, no context. */
    assert_int_equal(a.acked, 3);
    assert_int_equal(a.acked_cookie[0], 0x101);
    assert_int_equal(a.acked_cookie[2], 0x103);
    assert_false(ub__pds_has_output(a.k.pds));
    assert_int_equal(ub__timers_next(&a.k.timers), UB_TIME_NEVER);
    assert_int_equal(ub__pds_ipdc_count(a.k.pds), 0);
    /* The header: LINK, the extension next, ROD on the second; b not heard from yet. */
    static const uint8_t rud[8] = {0xff, 0x80, 0, 0, 0, 0, 0, 0};
    static const uint8_t rod[8] = {0xff, 0x81, 0, 0, 0, 0, 0, 0};
    assert_memory_equal(out[0]->data, rud, 8);
    assert_memory_equal(out[1]->data, rod, 8);
    assert_int_equal(out[0]->addr.family, UB_AF_SHM);
    for (uint32_t i = 0; i < 3; i++)
        carry(&b, &a.addr, out[i]);
    assert_int_equal(b.delivered, 3);
    assert_int_equal(b.seq[0], 10);
    assert_int_equal(b.seq[1], 11);
    assert_int_equal(b.seq[2], 12);
    assert_int_equal(b.mode[0], UB_PDS_RUD);
    assert_int_equal(b.mode[1], UB_PDS_ROD);
    assert_int_equal(b.inc[0], ub__pds_incarnation(a.k.pds));
    /* No ACK goes back, no target context exists. */
    assert_false(ub__pds_has_output(b.k.pds));
    assert_int_equal(ub__pds_tpdc_count(b.k.pds), 0);
    assert_int_equal(ub__pds_stats(a.k.pds)->tx_link, 3);
    assert_int_equal(ub__pds_stats(b.k.pds)->rx_link, 3);
    rig_close(&a);
    rig_close(&b);
}

static void test_restarted_peer_drops_what_was_meant_for_its_predecessor(void **state)
{
    (void)state;
    struct krig a, b, a2;
    rig_open(&a, 1, 11, true);
    rig_open(&b, 2, 22, true);
    pass_one(&a, &b, 1, 1);
    /* b answers: its packet names a's incarnation. */
    assert_int_equal(k_send(&b, &a.addr, UB_PDS_RUD, 1, 0), 0);
    struct ub__pkt *out[K_MAX];
    assert_int_equal(ub__pds_pull(b.k.pds, out, K_MAX, 0), 1);
    uint32_t inc = ub__pds_incarnation(a.k.pds);
    const uint8_t named[4] = {(uint8_t)(inc >> 24), (uint8_t)(inc >> 16), (uint8_t)(inc >> 8),
                              (uint8_t)inc};
    assert_memory_equal(out[0]->data + 4, named, 4);
    /* a restarts under the same id before the answer arrives: the new one drops it. */
    rig_close(&a);
    rig_open(&a2, 1, 33, true);
    assert_int_not_equal(ub__pds_incarnation(a2.k.pds), inc);
    carry(&a2, &b.addr, out[0]);
    assert_int_equal(a2.delivered, 0);
    assert_int_equal(ub__pds_stats(a2.k.pds)->rx_link_stale, 1);
    /* Once the new one has spoken, b names it and its packets arrive. */
    pass_one(&a2, &b, 1, 1);
    assert_int_equal(b.inc[1], ub__pds_incarnation(a2.k.pds));
    pass_one(&b, &a2, 2, 0);
    assert_int_equal(a2.delivered, 1);
    assert_int_equal(a2.seq[0], 2);
    rig_close(&a2);
    rig_close(&b);
}

/* The other way round: the target restarts. What the initiator sends names the old one and
 * is dropped, until the carrier reports the old process gone: then it names none. */
static void test_restarted_target_reached_once_reported_gone(void **state)
{
    (void)state;
    struct krig a, b, b2;
    rig_open(&a, 1, 11, true);
    rig_open(&b, 2, 22, true);
    pass_one(&b, &a, 1, 0); /* a heard b */
    rig_close(&b);
    rig_open(&b2, 2, 44, true);
    pass_one(&a, &b2, 1, 1);
    assert_int_equal(b2.delivered, 0);
    assert_int_equal(ub__pds_stats(b2.k.pds)->rx_link_stale, 1);
    ub__pds_peer_gone(a.k.pds, &b2.addr);
    ub__pds_peer_gone(a.k.pds, &b2.addr); /* twice: nothing more to it */
    pass_one(&a, &b2, 2, 2);
    assert_int_equal(b2.delivered, 1);
    assert_int_equal(b2.seq[0], 2);
    /* b2 answers: a hears the new incarnation of a peer reported gone, once. */
    assert_int_equal(a.restarted, 0);
    pass_one(&b2, &a, 2, 0);
    pass_one(&b2, &a, 3, 0);
    assert_int_equal(a.restarted, 1);
    assert_int_equal(a.noticed, 1);
    assert_int_equal(a.delivered, 3);
    assert_int_equal(ub__pds_stats(a.k.pds)->link_restarts, 1);
    rig_close(&a);
    rig_close(&b2);
}

/*
 * A restart the carrier did not report: the peer speaks as a new incarnation. The upcall
 * says so (not noticed: what went to the old one is lost), its packet is taken, and the old
 * one's last packets, read after the new one's (another lane), are stale.
 */
static void test_restart_heard_unreported(void **state)
{
    (void)state;
    struct krig a, b, b2;
    rig_open(&a, 1, 11, true);
    rig_open(&b, 2, 22, true);
    pass_one(&b, &a, 1, 0);
    assert_int_equal(k_send(&b, &a.addr, UB_PDS_RUD, 2, 0), 0); /* b's last, not yet read */
    struct ub__pkt *late[K_MAX];
    assert_int_equal(ub__pds_pull(b.k.pds, late, K_MAX, 0), 1);
    rig_open(&b2, 2, 44, true);
    pass_one(&b2, &a, 7, 0);
    assert_int_equal(a.restarted, 1);
    assert_int_equal(a.noticed, 0);
    assert_int_equal(a.delivered, 2);
    assert_int_equal(a.seq[1], 7);
    carry(&a, &b.addr, late[0]);
    assert_int_equal(a.delivered, 2);
    assert_int_equal(ub__pds_stats(a.k.pds)->rx_link_stale, 1);
    assert_int_equal(a.restarted, 1);
    /* a now names b2, which takes it. */
    pass_one(&a, &b2, 1, 1);
    assert_int_equal(b2.delivered, 1);
    assert_int_equal(b2.inc[0], ub__pds_incarnation(a.k.pds));
    rig_close(&b);
    rig_close(&a);
    rig_close(&b2);
}

static void test_only_a_lossless_carrier_vouches(void **state)
{
    (void)state;
    struct krig a, b, c;
    rig_open(&a, 1, 11, true);
    rig_open(&b, 2, 22, true);
    rig_open(&c, 3, 44, false); /* without the link path */
    /* From a udp source: malformed, dropped. */
    struct ub__addr udp;
    memset(&udp, 0, sizeof(udp));
    udp.family = UB_AF_INET;
    udp.port = 4791;
    assert_int_equal(k_send(&a, &b.addr, UB_PDS_RUD, 1, 1), 0);
    struct ub__pkt *out[K_MAX];
    assert_int_equal(ub__pds_pull(a.k.pds, out, K_MAX, 0), 1);
    carry(&b, &udp, out[0]);
    assert_int_equal(b.delivered, 0);
    assert_int_equal(ub__pds_stats(b.k.pds)->rx_malformed, 1);
    /* A receiver that keeps PDCs itself still takes it: either side may turn the path off. */
    pass_one(&a, &c, 1, 1);
    assert_int_equal(c.delivered, 1);
    /* ... and what it sends back goes through a PDC, which a's PDS serves as ever. */
    pass_one(&c, &a, 1, 1);
    assert_int_equal(a.delivered, 1);
    assert_int_equal(ub__pds_tpdc_count(a.k.pds), 1);
    assert_int_equal(flush(&a, &c), 1); /* its ACK */
    assert_int_equal(ub__pds_stats(c.k.pds)->acks_rx, 1);
    /* Towards a udp peer, or in the other modes, PDS goes on as ever. */
    assert_int_equal(k_send(&a, &udp, UB_PDS_RUD, 1, 1), 0);
    assert_int_equal(ub__pds_pull(a.k.pds, out, K_MAX, 0), 1);
    assert_int_equal(out[0]->data[0] >> 3, UB_PDS_TYPE_RUD_REQ);
    ub__pkt_free(out[0]);
    assert_int_equal(ub__pds_ipdc_count(a.k.pds), 1);
    assert_int_equal(k_send(&a, &b.addr, UB_PDS_RUDI, 1, 1), 0);
    assert_int_equal(ub__pds_pull(a.k.pds, out, K_MAX, 0), 1);
    assert_int_equal(out[0]->data[0] >> 3, UB_PDS_TYPE_RUDI_REQ);
    ub__pkt_free(out[0]);
    rig_close(&a);
    rig_close(&b);
    rig_close(&c);
}

static void test_queued_payload_flattened_on_completion(void **state)
{
    (void)state;
    struct krig a, b;
    rig_open(&a, 1, 11, true);
    rig_open(&b, 2, 22, true);
    static uint8_t user[64];
    memset(user, 0x5a, sizeof(user));
    struct ub__pkt *p = t_send_pkt(&a.k.pool, 0);
    assert_int_equal(ub__pkt_attach(p, user, sizeof(user)), 0);
    struct ub__pds_tx tx;
    memset(&tx, 0, sizeof(tx));
    tx.dst = &b.addr;
    tx.mode = UB_PDS_RUD;
    tx.ses_kind = UB_PDS_NH_REQ_STD;
    tx.cookie = 7;
    assert_int_equal(ub__pds_send(a.k.pds, &tx, p, 0), 0);
    assert_int_equal(ub__pds_flatten(a.k.pds, &b.addr, UB_PDS_RUD, 8), 0); /* another's */
    assert_int_equal(ub__pds_flatten(a.k.pds, &b.addr, UB_PDS_RUD, 7), 1);
    assert_int_equal(p->xlen, 0);
    memset(user, 0, sizeof(user)); /* the owner has it back: the packet keeps the old bytes */
    struct ub__pkt *out[K_MAX];
    assert_int_equal(ub__pds_pull(a.k.pds, out, K_MAX, 0), 1);
    assert_int_equal(out[0]->data[out[0]->len - 1], 0x5a);
    ub__pkt_free(out[0]);
    rig_close(&a);
    rig_close(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delivered_in_order_acked_as_they_leave),
        cmocka_unit_test(test_restarted_peer_drops_what_was_meant_for_its_predecessor),
        cmocka_unit_test(test_restarted_target_reached_once_reported_gone),
        cmocka_unit_test(test_restart_heard_unreported),
        cmocka_unit_test(test_only_a_lossless_carrier_vouches),
        cmocka_unit_test(test_queued_payload_flattened_on_completion),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
