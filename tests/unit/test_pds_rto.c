/*
 * The initiator's retransmission timer is moved only to an earlier deadline (an ACK that empties
 * the window leaves it armed): an expiry before the real deadline re-arms for it and sends
 * nothing, and the probe or RTO still goes exactly when it is due. A probe during a receiver's
 * stall does not make the packets queued behind it look lost, and the out-of-order count tells
 * reordering inside a batch from loss.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include <softub/errors.h>
#include "core/clock.h"
#include "pds/pds.h"
#include "wire/datagram.h"
#include "unit/pds_send8.h"

#define US 1000ull

struct rig {
    struct ub__timers timers;
    struct ub__pktpool pool;
    struct ub__rng rng;
    struct ub__pds *pds;
    struct ub__addr addr;
    uint32_t acked;
    uint8_t mode; /* what send_one sends: UB_PDS_RUD unless a test says otherwise */
};

static void r_deliver(void *arg, const struct ub__pds_rx *rx, uint64_t now)
{
    (void)arg;
    (void)rx;
    (void)now;
}

static void r_acked(void *arg, uint64_t cookie, uint64_t now)
{
    (void)cookie;
    (void)now;
    ((struct rig *)arg)->acked++;
}

static void r_failed(void *arg, uint64_t cookie, int err, uint64_t now)
{
    (void)arg;
    (void)cookie;
    (void)err;
    (void)now;
}

static const struct ub__pds_upcalls r_up = {
    .deliver = r_deliver, .acked = r_acked, .failed = r_failed};

static void rig_open_pool(struct rig *r, uint16_t port, const struct ub__pds_cfg *cfg,
                          uint32_t bufs)
{
    memset(r, 0, sizeof(*r));
    assert_int_equal(ub__timers_init(&r->timers, 16), 0);
    assert_int_equal(ub__pktpool_init(&r->pool, bufs, 4096 + 64, 64), 0);
    ub__rng_seed(&r->rng, port);
    assert_int_equal(ub__pds_create(&r->pds, cfg, &r->timers, &r->pool, &r->rng, NULL), 0);
    ub__pds_set_upcalls(r->pds, &r_up, r);
    r->addr.family = UB_AF_INET;
    r->addr.ip[0] = 127;
    r->addr.ip[3] = 1;
    r->addr.port = port;
}

static void rig_open_cfg(struct rig *r, uint16_t port, const struct ub__pds_cfg *cfg)
{
    rig_open_pool(r, port, cfg, 64);
}

static void rig_open(struct rig *r, uint16_t port)
{
    struct ub__pds_cfg cfg;
    memset(&cfg, 0, sizeof(cfg));
    rig_open_cfg(r, port, &cfg);
}

static void rig_close(struct rig *r)
{
    ub__pds_destroy(r->pds, 0);
    ub__pktpool_fini(&r->pool);
    ub__timers_fini(&r->timers);
}

static void send_one(struct rig *a, const struct rig *b, uint64_t cookie, uint64_t now)
{
    struct ub__pds_tx tx;
    memset(&tx, 0, sizeof(tx));
    tx.dst = &b->addr;
    tx.mode = a->mode;
    tx.ses_kind = UB_PDS_NH_REQ_STD;
    tx.ack_req = true;
    tx.cookie = cookie;
    assert_int_equal(ub__pds_send(a->pds, &tx, t_send8_pkt(&a->pool), now), 0);
}

/* Hands what src emits at now to dst (NULL: the network drops it); returns how many. */
static uint32_t carry(struct rig *src, struct rig *dst, uint64_t now)
{
    struct ub__pkt *out[16];
    uint32_t n = ub__pds_pull(src->pds, out, 16, now);
    for (uint32_t i = 0; i < n; i++) {
        struct ub__pkt *p = out[i];
        if (dst) {
            p->addr = src->addr;
            struct ub__wire_dgram d;
            assert_int_equal(ub__wire_parse_datagram(&d, p->data, p->len, 0), 0);
            assert_int_equal(ub__pds_input(dst->pds, p, &d, now), 1);
        }
        ub__pkt_free(p);
    }
    return n;
}

/* Two round trips of 100 us, ending at 300 us: srtt 100 us, rttvar 37 us, RTO 250 us, probe
 * after 200 us. */
static void warm_up(struct rig *a, struct rig *b)
{
    send_one(a, b, 1, 0);
    assert_int_equal(carry(a, b, 0), 1);
    assert_int_equal(carry(b, a, 100 * US), 1);
    send_one(a, b, 2, 200 * US);
    assert_int_equal(carry(a, b, 200 * US), 1);
    assert_int_equal(carry(b, a, 300 * US), 1);
}

static void test_timer_due_after_idle(void **state)
{
    (void)state;
    struct rig a, b;
    rig_open(&a, 1);
    rig_open(&b, 2);
    warm_up(&a, &b);
    assert_int_equal(a.acked, 2);
    /* Nothing in flight; the next packet is lost. Its timer is due 200 us (the probe time)
     * after it left. */
    send_one(&a, &b, 3, 350 * US);
    assert_int_equal(carry(&a, NULL, 350 * US), 1);
    const struct ub__pds_stats *st = ub__pds_stats(a.pds);
    uint64_t t = ub__timers_next(&a.timers);
    assert_true(t <= 550 * US);
    if (t < 550 * US) { /* the deadline of the previous packet: nothing goes, the timer moves */
        ub__timers_expire(&a.timers, t);
        assert_int_equal(carry(&a, NULL, t), 0);
        assert_int_equal(st->probes_sent, 0);
        assert_int_equal(st->retx_pkts, 0);
        assert_int_equal(ub__timers_next(&a.timers), 550 * US);
    }
    ub__timers_expire(&a.timers, 550 * US - 1);
    assert_int_equal(carry(&a, NULL, 550 * US - 1), 0);
    ub__timers_expire(&a.timers, 550 * US);
    /* The loss clock started when it left (nothing was in flight): 200 us later a probe, not
     * the RTO (due 250 us after it left), resends it. */
    assert_int_equal(carry(&a, NULL, 550 * US), 1);
    assert_int_equal(st->retx_pkts, 1);
    assert_int_equal(st->retx_rto, 0);
    assert_int_equal(st->probes_sent, 1);
    rig_close(&a);
    rig_close(&b);
}

/* Takes what src emits at now, addressed from src, without handing it on; returns how many. */
static uint32_t grab(struct rig *src, struct ub__pkt **out, uint32_t max, uint64_t now)
{
    uint32_t n = ub__pds_pull(src->pds, out, max, now);
    for (uint32_t i = 0; i < n; i++)
        out[i]->addr = src->addr;
    return n;
}

static void feed(struct rig *dst, struct ub__pkt *p, uint64_t now)
{
    struct ub__wire_dgram d;
    assert_int_equal(ub__wire_parse_datagram(&d, p->data, p->len, 0), 0);
    assert_int_equal(ub__pds_input(dst->pds, p, &d, now), 1);
    ub__pkt_free(p);
}

/*
 * Sends eight packets at 300 us and runs a's timers (at most eight firings) until *counter
 * (one of a's stats) is no longer 0, keeping everything a hands out in q: the originals,
 * then probes and resends. Returns how many; *t is the last firing's time.
 */
static uint32_t eight_until(struct rig *a, struct rig *b, struct ub__pkt **q,
                            const uint64_t *counter, uint64_t *t)
{
    for (uint64_t k = 0; k < 8; k++)
        send_one(a, b, 10 + k, 300 * US);
    uint32_t n = grab(a, q, 16, 300 * US);
    assert_int_equal(n, 8);
    *t = 300 * US;
    for (int k = 0; k < 8 && !*counter; k++) {
        *t = ub__timers_next(&a->timers);
        ub__timers_expire(&a->timers, *t);
        n += grab(a, q + n, 16 - n, *t);
    }
    return n;
}

/*
 * A tail-loss probe during a receiver's stall: the probe resends the oldest packet, then the
 * receiver works through its backlog, originals first, acknowledging one packet at a time.
 * The oldest is acknowledged by its original's ACK; its resend's later send order says nothing
 * about the packets still queued, so nothing may be declared lost for it (before: all seven
 * behind it were, and resent as the ACKs trickled in).
 */
static void test_probe_during_stall(void **state)
{
    (void)state;
    struct rig a, b;
    rig_open(&a, 1);
    rig_open(&b, 2);
    warm_up(&a, &b);
    /* Eight packets reach the receiver's queue; it is off its CPU. The probe resends the
     * oldest, which queues behind them (a timer that fires early only moves). */
    struct ub__pkt *q[16];
    const struct ub__pds_stats *st = ub__pds_stats(a.pds);
    uint64_t t;
    uint32_t n = eight_until(&a, &b, q, &st->probes_sent, &t);
    assert_true(t < 550 * US); /* before the RTO (last progress + 250 us) */
    assert_int_equal(st->probes_sent, 1);
    assert_int_equal(n, 9);
    /* The receiver wakes and takes its queue one packet at a time; the sender sends whatever
     * each ACK makes it send. */
    uint64_t now = t + 20 * US;
    for (uint32_t i = 0; i < n; i++, now += 5 * US) {
        feed(&b, q[i], now);
        struct ub__pkt *acks[4];
        uint32_t m = grab(&b, acks, 4, now);
        for (uint32_t j = 0; j < m; j++)
            feed(&a, acks[j], now);
        assert_int_equal(carry(&a, NULL, now), 0); /* nothing resent */
    }
    assert_int_equal(a.acked, 10);
    assert_int_equal(st->retx_fast, 0);
    assert_int_equal(st->retx_pkts, 1); /* the probe */
    rig_close(&a);
    rig_close(&b);
}

/* Hands everything `from` emits (acknowledgements) to `to` at now; returns how many. */
static uint32_t answer(struct rig *from, struct rig *to, uint64_t now)
{
    struct ub__pkt *q[32];
    uint32_t m = grab(from, q, 32, now);
    for (uint32_t j = 0; j < m; j++)
        feed(to, q[j], now);
    return m;
}

/* What a device of several paths does when q[0]'s path goes last: the batch's transmission
 * stamps are handed out again in the order the packets left. */
static void leave_last(struct ub__pkt **q, uint32_t n)
{
    uint64_t last = q[n - 1]->order;
    for (uint32_t i = n - 1; i > 0; i--)
        q[i]->order = q[i - 1]->order;
    q[0]->order = last;
}

/*
 * The out-of-order count (per-path order off) and a device that sends its batch path by
 * path: twelve packets of one batch, the first one's path sent last, arrive in that order;
 * the first is overtaken by eleven later PSNs but not by a packet that left after it, so it
 * is not declared lost (before: resent when the eighth was acknowledged). Overtaken by
 * packets that left after it (the network reorders), it is; so is a packet that left last
 * and was lost, once a packet of the next batch is acknowledged.
 */
static void test_reorder_in_batch(void **state)
{
    (void)state;
    struct ub__pds_cfg cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.no_ev_loss = true;
    struct rig a, b;
    rig_open_cfg(&a, 1, &cfg);
    rig_open_cfg(&b, 2, &cfg);
    warm_up(&a, &b);
    const struct ub__pds_stats *st = ub__pds_stats(a.pds);
    struct ub__pkt *q[16], *r[2];
    uint64_t now = 400 * US, cookie = 100;

    /* The first packet left last and arrives last: nothing resent. */
    for (int k = 0; k < 12; k++)
        send_one(&a, &b, cookie++, now);
    assert_int_equal(grab(&a, q, 16, now), 12);
    leave_last(q, 12);
    for (uint32_t i = 1; i < 12; i++)
        feed(&b, q[i], now + 10 * US);
    assert_true(answer(&b, &a, now + 20 * US) > 0);
    assert_int_equal(carry(&a, NULL, now + 20 * US), 0);
    feed(&b, q[0], now + 30 * US);
    answer(&b, &a, now + 40 * US);
    assert_int_equal(a.acked, 2 + 12);
    assert_int_equal(st->retx_pkts, 0);

    /* The first packet left first and is overtaken by the eleven: resent. */
    now += 1000 * US;
    for (int k = 0; k < 12; k++)
        send_one(&a, &b, cookie++, now);
    assert_int_equal(grab(&a, q, 16, now), 12);
    for (uint32_t i = 1; i < 12; i++)
        feed(&b, q[i], now + 10 * US);
    answer(&b, &a, now + 20 * US);
    assert_int_equal(grab(&a, r, 2, now + 20 * US), 1);
    assert_int_equal(st->retx_fast, 1);
    feed(&b, q[0], now + 30 * US);
    feed(&b, r[0], now + 30 * US);
    answer(&b, &a, now + 40 * US);
    assert_int_equal(a.acked, 2 + 24);

    /* The first packet left last and is lost: found once the next batch is acknowledged. */
    now += 1000 * US;
    for (int k = 0; k < 12; k++)
        send_one(&a, &b, cookie++, now);
    assert_int_equal(grab(&a, q, 16, now), 12);
    leave_last(q, 12);
    ub__pkt_free(q[0]);
    for (uint32_t i = 1; i < 12; i++)
        feed(&b, q[i], now + 10 * US);
    answer(&b, &a, now + 20 * US);
    assert_int_equal(carry(&a, NULL, now + 20 * US), 0);
    send_one(&a, &b, cookie++, now + 30 * US);
    assert_int_equal(grab(&a, q, 16, now + 30 * US), 1);
    feed(&b, q[0], now + 40 * US);
    answer(&b, &a, now + 50 * US);
    assert_int_equal(grab(&a, r, 2, now + 50 * US), 1); /* the lost one, resent */
    assert_int_equal(st->retx_fast, 2);
    feed(&b, r[0], now + 60 * US);
    answer(&b, &a, now + 70 * US);
    assert_int_equal(a.acked, 2 + 37);
    assert_int_equal(st->retx_pkts, 2);
    rig_close(&a);
    rig_close(&b);
}

/*
 * A device of eight paths hands a round over path by path, and the receiver takes it path by
 * path too, acknowledging each path's share: 128 packets sprayed over eight paths arrive as
 * PSNs 0, 8, ..., 120, then 1, 9, ..., 121, and so on. Every arrival must be reported by some
 * ACK, or the initiator's inference (out-of-order count and per-path order) resends it.
 * Before, the ACK after the first path's share reported only the last 64 PSNs of it, and 7 of
 * its 16 packets were resent at once; now a share's ACK that cannot report it all leaves as
 * it is and a second one reports the rest.
 */
static void test_strided_rounds(void **state)
{
    (void)state;
    enum { N = 128, PATHS = 8 };
    struct ub__pds_cfg cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.num_paths = PATHS;
    cfg.lb_algo = "oblivious";
    cfg.cc_algo = "none";
    cfg.ack_coalesce = true;
    struct rig a, b;
    rig_open_pool(&a, 1, &cfg, 2 * N);
    rig_open_cfg(&b, 2, &cfg);
    warm_up(&a, &b);
    uint64_t now = 400 * US;
    for (uint64_t k = 0; k < N; k++)
        send_one(&a, &b, 100 + k, now);
    struct ub__pkt *q[N], *byp[N];
    uint32_t n = 0;
    while (n < N) {
        uint32_t m = grab(&a, q + n, N - n, now);
        assert_true(m > 0);
        n += m;
    }
    /* As the device sends them: path by path, the transmission stamps given out again. */
    uint64_t orders[N];
    uint32_t k = 0, start[PATHS + 1];
    for (uint16_t path = 0; path < PATHS; path++) {
        start[path] = k;
        for (uint32_t i = 0; i < N; i++)
            if (q[i]->path == path)
                byp[k++] = q[i];
    }
    start[PATHS] = k;
    assert_int_equal(k, N);
    for (uint32_t i = 0; i < N; i++)
        orders[i] = q[i]->order;
    for (uint32_t i = 0; i < N; i++)
        byp[i]->order = orders[i];
    const struct ub__pds_stats *st = ub__pds_stats(a.pds);
    uint32_t acks = 0;
    for (uint32_t path = 0; path < PATHS; path++) {
        assert_int_equal(start[path + 1] - start[path], N / PATHS); /* one in eight */
        now += 10 * US;
        for (uint32_t i = start[path]; i < start[path + 1]; i++)
            feed(&b, byp[i], now);
        acks += answer(&b, &a, now);
        assert_int_equal(carry(&a, NULL, now), 0); /* nothing resent */
    }
    assert_int_equal(a.acked, 2 + N);
    assert_int_equal(st->retx_pkts, 0);
    /* Per share: PSNs span 120, so two ACKs; the last share fills every hole: one. */
    assert_int_equal(acks, 2 * (PATHS - 1) + 1);
    rig_close(&a);
    rig_close(&b);
}

/* Feeds b what a emitted in q[0..n), hands b's ACKs back, and asserts nothing more goes. */
static void arrive_late(struct rig *a, struct rig *b, struct ub__pkt **q, uint32_t n, uint64_t now)
{
    for (uint32_t i = 0; i < n; i++)
        feed(b, q[i], now);
    answer(b, a, now + 10 * US);
    assert_int_equal(carry(a, NULL, now + 10 * US), 0);
}

/*
 * The eight originals in q were lost; the copies q[8..n) arrive, and their ACK has the other
 * seven resent at once, which then arrive.
 */
static void copies_only(struct rig *a, struct rig *b, struct ub__pkt **q, uint32_t n, uint64_t now)
{
    for (uint32_t i = 0; i < 8; i++)
        ub__pkt_free(q[i]);
    for (uint32_t i = 8; i < n; i++)
        feed(b, q[i], now);
    answer(b, a, now + 10 * US);
    struct ub__pkt *r[16];
    uint32_t m = grab(a, r, 16, now + 10 * US);
    assert_int_equal(m, 7);
    for (uint32_t i = 0; i < m; i++)
        feed(b, r[i], now + 20 * US);
    answer(b, a, now + 30 * US);
}

/*
 * The first RTO of a series resends the oldest packet only, and the next ACK that
 * acknowledges something decides about the rest (F-RTO). A receiver that was only late (its
 * ACKs acknowledge originals) costs the probe and that one resend, and the window cut is
 * undone; before, the RTO resent all eight. A flight really lost (the ACK acknowledges only a
 * resent copy) is resent whole at that ACK; and so is it at the series' second RTO when no
 * ACK came at all (the first RTO's resend lost too).
 */
static void test_rto_verdict(void **state)
{
    (void)state;
    for (int lost = 0; lost < 3; lost++) {
        struct rig a, b;
        rig_open(&a, 1);
        rig_open(&b, 2);
        warm_up(&a, &b);
        struct ub__pkt *q[16];
        uint64_t t;
        const struct ub__pds_stats *st = ub__pds_stats(a.pds);
        uint32_t n = eight_until(&a, &b, q, &st->rto_fired, &t);
        assert_int_equal(st->rto_fired, 1);
        assert_int_equal(n, 10); /* eight, the probe, one resend at the RTO */
        assert_int_equal(st->retx_rto, 1);
        uint64_t now = t + 10 * US;
        if (!lost) {
            /* Late: the originals arrive first, then the two copies. */
            arrive_late(&a, &b, q, n, now);
            assert_int_equal(st->rto_undone, 1);
            assert_int_equal(st->retx_pkts, 2);
        } else if (lost == 2) {
            /* Silence: the second RTO (backed off) resends all eight; then they arrive. */
            for (uint32_t i = 0; i < n; i++)
                ub__pkt_free(q[i]);
            now = ub__timers_next(&a.timers);
            ub__timers_expire(&a.timers, now);
            assert_int_equal(st->rto_fired, 2);
            struct ub__pkt *r[16];
            uint32_t m = grab(&a, r, 16, now);
            assert_int_equal(m, 8);
            for (uint32_t i = 0; i < m; i++)
                feed(&b, r[i], now + 10 * US);
            answer(&b, &a, now + 20 * US);
            assert_int_equal(st->retx_pkts, 2 + 8);
        } else {
            /* Lost: only the copies arrive; their ACK (for resent copies only) has the other
             * seven resent at once. */
            copies_only(&a, &b, q, n, now);
            assert_int_equal(st->rto_undone, 0);
            assert_int_equal(st->retx_pkts, 9);
        }
        assert_int_equal(a.acked, 2 + 8);
        assert_int_equal(ub__pds_outstanding(a.pds, &b.addr, UB_PDS_RUD), 0);
        rig_close(&a);
        rig_close(&b);
    }
}

/* A SEND of `bytes` zeros. */
static void send_big(struct rig *a, const struct rig *b, uint64_t cookie, uint32_t bytes,
                     uint64_t now)
{
    struct ub__pds_tx tx;
    memset(&tx, 0, sizeof(tx));
    tx.dst = &b->addr;
    tx.mode = UB_PDS_RUD;
    tx.ses_kind = UB_PDS_NH_REQ_STD;
    tx.cookie = cookie;
    assert_int_equal(ub__pds_send(a->pds, &tx, t_send_pkt(&a->pool, bytes), now), 0);
}

/*
 * The RTO's lone repair with a full congestion window: NSCC takes every byte in flight off the
 * window at the RTO (down to one MTU) while the seven packets not resent still count as in
 * flight. The repair goes all the same, at the RTO, as TCP's retransmission after an RTO
 * does; the target's ACK of the copy alone says the rest were lost, and the whole window is
 * repaired before the second RTO would have been due (before: nothing went at the first RTO,
 * the repair waited 2 ms for the second).
 */
static void test_rto_full_window(void **state)
{
    (void)state;
    struct rig a, b;
    struct ub__pds_cfg cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.link_bps = 100000000000ull;
    cfg.base_rtt_ns = 10 * US;
    cfg.cc_init_cwnd = 8 * 3200; /* exactly eight packets of 3000 payload bytes */
    rig_open_cfg(&a, 1, &cfg);
    rig_open(&b, 2);
    for (uint64_t k = 0; k < 8; k++)
        send_big(&a, &b, 10 + k, 3000, 0);
    assert_int_equal(carry(&a, NULL, 0), 8); /* all lost */
    const struct ub__pds_stats *st = ub__pds_stats(a.pds);
    uint64_t t = ub__timers_next(&a.timers); /* no RTT sample: no probe, the first RTO */
    ub__timers_expire(&a.timers, t);
    assert_int_equal(st->rto_fired, 1);
    assert_int_equal(carry(&a, &b, t), 1); /* the lone repair, at the RTO */
    assert_int_equal(st->retx_rto, 1);
    uint64_t now = t;
    for (int round = 0; round < 64 && a.acked < 8; round++) {
        now += 10 * US;
        carry(&b, &a, now);
        carry(&a, &b, now);
    }
    assert_int_equal(a.acked, 8);
    assert_int_equal(st->rto_fired, 1);
    assert_int_equal(st->retx_pkts, 8);
    assert_true(now < 3 * t);
    rig_close(&a);
    rig_close(&b);
}

/*
 * Go-back-N's tail-loss probe is a lone repair too: the target drops what follows a lost
 * packet, so the next ACK decides. Late originals (their ACKs arrive): nothing more goes;
 * before, the probe went back over all eight. Lost originals (the ACK acknowledges only
 * the probe's copy): everything after it goes again at that ACK.
 */
static void test_probe_verdict_rod(void **state)
{
    (void)state;
    for (int lost = 0; lost < 2; lost++) {
        struct rig a, b;
        rig_open(&a, 1);
        rig_open(&b, 2);
        a.mode = UB_PDS_ROD;
        warm_up(&a, &b);
        struct ub__pkt *q[16];
        uint64_t t;
        const struct ub__pds_stats *st = ub__pds_stats(a.pds);
        uint32_t n = eight_until(&a, &b, q, &st->probes_sent, &t);
        assert_int_equal(st->probes_sent, 1);
        assert_int_equal(st->rto_fired, 0);
        assert_int_equal(n, 9); /* the eight, and the probe's one copy */
        uint64_t now = t + 10 * US;
        if (!lost) {
            arrive_late(&a, &b, q, n, now);
            assert_int_equal(st->retx_pkts, 1);
        } else {
            copies_only(&a, &b, q, n, now);
            assert_int_equal(st->retx_pkts, 8);
        }
        assert_int_equal(a.acked, 2 + 8);
        assert_int_equal(ub__pds_outstanding(a.pds, &b.addr, UB_PDS_ROD), 0);
        rig_close(&a);
        rig_close(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timer_due_after_idle), cmocka_unit_test(test_probe_during_stall),
        cmocka_unit_test(test_reorder_in_batch),     cmocka_unit_test(test_rto_verdict),
        cmocka_unit_test(test_probe_verdict_rod),    cmocka_unit_test(test_rto_full_window),
        cmocka_unit_test(test_strided_rounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
