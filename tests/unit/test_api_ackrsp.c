/*
 * Responses on ACKs (docs/pds.md "Responses on ACKs", docs/wire-format.md 3.4): a request in
 * one packet carries K, its target answers it with an ACK of its own (flag OWN) that carries
 * the response when it is made while the packet is delivered. Exact outcomes when that ACK is
 * lost (the request is resent and the duplicate answered from the target's cache), when a
 * later ACK covers the PSN first (the PSN stays open until its own ACK), duplicated and
 * reordered, towards a peer without the capability either way, and beside packed requests
 * and responses. Manual clock, loop fabric, node 0 initiates, node 1 answers.
 */
#include "unit/api_pack_world.h"
#include "unit/api_tap.h"
#include "dev/impair.h"
#include "pds/pds_int.h"

/* Node 0 sends K on every request, not only when nothing else is outstanding to node 1, so
 * that several such requests are in flight at once. */
static void setup_mtu(uint32_t pack_max, uint32_t mtu)
{
    pw_setup(pack_max, mtu, 4000, 17);
    T.ctx[0]->ses.ack_rsp_busy = UINT32_MAX;
}

static void setup(uint32_t pack_max)
{
    setup_mtu(pack_max, 9000);
}

static struct ub__ses_stats *I(void)
{
    return &T.ctx[0]->ses.st;
}

static struct ub__ses_stats *G(void)
{
    return &T.ctx[1]->ses.st;
}

static const struct ub__pds_stats *IP(void)
{
    return ub__pds_stats(T.ctx[0]->eng.pds);
}

static const struct ub__pds_stats *GP(void)
{
    return ub__pds_stats(T.ctx[1]->eng.pds);
}

/* Scripted impairment of the direction src -> dst (packets numbered from now). */
static void write_wr(struct ub_wr *wr, struct ub_sge *sg, uint64_t user, uint32_t off)
{
    pw_rma_wr(wr, sg, UB_OP_WRITE, UB_WR_INLINE, user, off, 8);
}

/* n 8-byte WRITEs of a fresh pattern, M0 + 8 i to M1 + 8 i, each posted alone (own packets). */
static void post_writes(uint32_t n, uint32_t seed)
{
    static struct ub_sge sg[64];
    static struct ub_wr wr[64];
    fill_pattern(M0, 8 * (size_t)n, seed);
    for (uint32_t i = 0; i < n; i++) {
        write_wr(&wr[i], &sg[i], i, 8 * i);
        assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr[i], NULL), 0);
    }
}

/* Collects n successful records of node 0, one for each user_ctx 0 .. n-1 (in any order: the
 * requests are unordered; bounded rounds); then nothing more comes. */
static void collect_ok(uint32_t n)
{
    uint32_t got = 0;
    uint64_t seen = 0;
    for (int round = 0; got < n && round < 200000; round++) {
        struct ub_cr cr;
        int k = ub_poll_jfc(T.jfc[0], 1, &cr);
        if (k) {
            assert_int_equal(cr.status, UB_CR_SUCCESS);
            assert_true(cr.user_ctx < n && !(seen & (1ull << cr.user_ctx)));
            seen |= 1ull << cr.user_ctx;
            got++;
        } else {
            tnet_step(&T, 10000);
        }
    }
    assert_int_equal(got, n);
    for (int round = 0; round < 50; round++)
        tnet_step(&T, 10000);
    struct ub_cr extra;
    assert_int_equal(ub_poll_jfc(T.jfc[0], 1, &extra), 0);
}

struct snap {
    struct ub__ses_stats i, g;
    struct ub__pds_stats ip, gp;
};

static struct snap snap(void)
{
    struct snap s = {*I(), *G(), *IP(), *GP()};
    return s;
}

#define DI(f)  (I()->f - s0.i.f)
#define DG(f)  (G()->f - s0.g.f)
#define DIP(f) (IP()->f - s0.ip.f)
#define DGP(f) (GP()->f - s0.gp.f)

/* Clean: every response rides on its request's ACK; the target sends no packet of its own. */
static void test_ackrsp_clean(void **state)
{
    (void)state;
    setup(UB_PACK_OFF);
    struct snap s0 = snap();
    post_writes(8, 1);
    collect_ok(8);
    assert_memory_equal(M1, M0, 64);
    assert_int_equal(DG(executed), 8);
    assert_int_equal(DG(tx_rsp_ack), 8);
    assert_int_equal(DG(tx_rsp_pkts), 0);
    assert_int_equal(DGP(tx_pkts), 0); /* no response packet, so no ACK of one either */
    assert_int_equal(DGP(acks_rsp_tx), 8);
    assert_int_equal(DIP(acks_rsp_rx), 8);
    assert_int_equal(DIP(retx_pkts), 0);
    assert_int_equal(DIP(own_covered), 0);
    assert_int_equal(DI(rx_stale_rsp), 0);
    pw_teardown();
}

/* The one ACK carrying the response is lost: the request goes again, the target answers the
 * duplicate from its cache, the WRITE completes once and runs once. */
static void test_ackrsp_lost(void **state)
{
    (void)state;
    setup(UB_PACK_OFF);
    tnet_impair(&T, 1, 0, UB_IMPAIR_DROP_NTH, 0, 0);
    struct snap s0 = snap();
    post_writes(1, 2);
    collect_ok(1);
    assert_memory_equal(M1, M0, 8);
    assert_int_equal(DG(executed), 1);
    assert_int_equal(DG(tx_rsp_ack), 1);
    assert_int_equal(DG(tx_rsp_pkts), 0);
    assert_int_equal(DGP(rx_dup), 1);
    assert_int_equal(DGP(acks_rsp_resent), 1);
    assert_int_equal(DGP(acks_rsp_tx), 2);
    assert_int_equal(DIP(retx_pkts), 1);
    assert_int_equal(DIP(acks_rsp_rx), 1);
    assert_int_equal(DI(rx_stale_rsp), 0);
    /* The application sees the repair and why: one tail-loss probe, no RTO. */
    struct ub_context_stats st;
    assert_int_equal(ub_context_stats(T.ctx[0], &st), 0);
    assert_int_equal(st.retransmits, 1);
    assert_int_equal(st.retx_probe, 1);
    assert_int_equal(st.retx_rto + st.retx_fast + st.retx_nack, 0);
    assert_int_equal(st.rto_fired, 0);
    pw_teardown();
}

/* The request arrives CE-marked: its own ACK echoes the mark, and both sides' public counters
 * say so (the target received one mark, the initiator had one echoed). */
static void test_ackrsp_ce(void **state)
{
    (void)state;
    setup(UB_PACK_OFF);
    tnet_impair(&T, 0, 1, UB_IMPAIR_CE_NTH, 0, 0);
    post_writes(1, 5);
    collect_ok(1);
    struct ub_context_stats si, st;
    assert_int_equal(ub_context_stats(T.ctx[0], &si), 0);
    assert_int_equal(ub_context_stats(T.ctx[1], &st), 0);
    assert_int_equal(st.rx_ce, 1);
    assert_int_equal(si.acks_ecn_rx, 1);
    assert_int_equal(si.rx_ce + st.acks_ecn_rx, 0);
    assert_int_equal(si.retransmits, 0);
    pw_teardown();
}

/* The ACK of the first of two is lost and the second's ACK covers it: the first stays open
 * (covered) until its own ACK, which the duplicate brings with the response. */
static void test_ackrsp_covered(void **state)
{
    (void)state;
    setup(UB_PACK_OFF);
    tnet_impair(&T, 1, 0, UB_IMPAIR_DROP_NTH, 0, 0);
    struct snap s0 = snap();
    post_writes(2, 3);
    collect_ok(2);
    assert_memory_equal(M1, M0, 16);
    assert_int_equal(DG(executed), 2);
    assert_int_equal(DG(tx_rsp_pkts), 0);
    assert_int_equal(DIP(own_covered), 1);
    assert_int_equal(DIP(retx_pkts), 1);
    assert_int_equal(DGP(acks_rsp_resent), 1);
    assert_int_equal(DIP(acks_rsp_rx), 2);
    assert_int_equal(DI(rx_stale_rsp), 0);
    pw_teardown();
}

/* Every ACK of a run of 16 lost once, in turn (drop, pass, ...): all complete, once each. */
static void test_ackrsp_lossy(void **state)
{
    (void)state;
    setup(UB_PACK_OFF);
    tnet_impair(&T, 1, 0, UB_IMPAIR_DROP_CYCLE, 1, 1);
    struct snap s0 = snap();
    post_writes(16, 4);
    collect_ok(16);
    assert_memory_equal(M1, M0, 128);
    assert_int_equal(DG(executed), 16);
    assert_int_equal(DG(tx_rsp_pkts), 0);
    assert_true(DGP(acks_rsp_resent) >= 1);
    tnet_heal(&T, 1, 0);
    pw_teardown();
}

/* The ACK with the response arrives twice, and the request too: one completion, one run; the
 * second copy of the ACK is a repeat whose response PDS does not take up again, the duplicate
 * request is answered from the cache. */
static void test_ackrsp_dup(void **state)
{
    (void)state;
    setup(UB_PACK_OFF);
    tnet_impair(&T, 1, 0, UB_IMPAIR_DUP_NTH, 0, 1);
    struct snap s0 = snap();
    post_writes(1, 5);
    collect_ok(1);
    assert_int_equal(DIP(acks_rsp_stale), 1);
    assert_int_equal(DI(rx_stale_rsp), 0);
    assert_int_equal(DG(executed), 1);
    tnet_impair(&T, 0, 1, UB_IMPAIR_DUP_NTH, 0, 1);
    s0 = snap();
    post_writes(1, 6);
    collect_ok(1);
    assert_memory_equal(M1, M0, 8);
    assert_int_equal(DG(executed), 1);
    assert_int_equal(DGP(rx_dup), 1);
    assert_int_equal(DGP(acks_rsp_resent), 1);
    assert_int_equal(DIP(acks_rsp_stale), 1);
    assert_int_equal(DI(rx_stale_rsp), 0);
    assert_int_equal(DIP(retx_pkts), 0);
    pw_teardown();
}

/* The first ACK is overtaken by the three after it: they cover it, its own ACK completes it
 * when it comes; all four complete once, in order. */
static void test_ackrsp_reorder(void **state)
{
    (void)state;
    setup(UB_PACK_OFF);
    tnet_impair(&T, 1, 0, UB_IMPAIR_REORDER_NTH, 0, 3);
    struct snap s0 = snap();
    post_writes(4, 7);
    collect_ok(4);
    assert_memory_equal(M1, M0, 32);
    assert_int_equal(DG(executed), 4);
    assert_int_equal(DG(tx_rsp_pkts), 0);
    assert_true(DIP(own_covered) >= 1);
    assert_int_equal(DIP(acks_rsp_rx), DGP(acks_rsp_tx));
    pw_teardown();
}

/* A WRITE of three packets over one path: K on its last, whose ACK carries the response when
 * the message is complete on its arrival (clean; that ACK lost: the last packet goes again and
 * its duplicate is answered from the cache), and not when a packet before it is missing then
 * (the response then goes in a packet of its own once the message is complete). Sprayed over
 * several paths its packets may arrive in any order: no K, the response in a packet. */
static void test_ackrsp_multi(void **state)
{
    (void)state;
    static struct ub_sge sg;
    static struct ub_wr wr;
    const uint32_t len = 20000;
    for (int c = 0; c < 4; c++) {
        if (c == 0 || c == 3) {
            if (c == 3)
                pw_teardown();
            PW_LB = c == 0 ? "single" : NULL;
            setup(UB_PACK_OFF);
        }
        if (c == 1)
            tnet_impair(&T, 1, 0, UB_IMPAIR_DROP_NTH, 0, 0); /* the K packet's ACK */
        if (c == 2)
            tnet_impair(&T, 0, 1, UB_IMPAIR_DROP_NTH, 0, 0); /* the first packet */
        fill_pattern(M0 + 8192, len, 20 + (uint32_t)c);
        struct snap s0 = snap();
        pw_rma_wr(&wr, &sg, UB_OP_WRITE, 0, 0, 8192, len);
        assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr, NULL), 0);
        collect_ok(1);
        assert_memory_equal(M1 + 8192, M0 + 8192, len);
        assert_int_equal(DI(tx_req_pkts), 3);
        assert_int_equal(DG(executed), 1);
        assert_int_equal(DG(tx_rsp_ack), c < 2 ? 1 : 0);
        assert_int_equal(DG(tx_rsp_pkts), c < 2 ? 0 : 1);
        assert_int_equal(DGP(acks_rsp_resent), c == 1 ? 1 : 0);
        /* One repair: of the K packet by a tail-loss probe when its ACK was lost (a probe of
         * the oldest would only have covered it); of the first packet, when that was lost, as
         * soon as the K packet's ACK shows the hole (one path: in order, so it is lost). */
        assert_int_equal(DIP(retx_pkts), c == 1 || c == 2 ? 1 : 0);
        assert_int_equal(DIP(probes_sent), c == 1 ? 1 : 0);
        assert_int_equal(DIP(rto_fired), 0);
        assert_int_equal(DI(rx_stale_rsp), 0);
    }
    pw_teardown();
}

/* An atomic's old value rides as well. */
static void test_ackrsp_atomic(void **state)
{
    (void)state;
    setup(UB_PACK_OFF);
    uint64_t *word = (uint64_t *)(void *)(M1 + 65536);
    *word = 41;
    static uint64_t old;
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_ATOMIC_FADD;
    wr.flags = UB_WR_COMPLETE;
    wr.u.atomic.tseg = TS;
    wr.u.atomic.addr = ub_tseg_base(TS) + 65536;
    wr.u.atomic.operand = 1;
    wr.u.atomic.result = &old;
    struct snap s0 = snap();
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr, NULL), 0);
    collect_ok(1);
    assert_int_equal(old, 41);
    assert_int_equal(*word, 42);
    assert_int_equal(DG(tx_rsp_ack), 1);
    assert_int_equal(DG(tx_rsp_pkts), 0);
    pw_teardown();
}

/* A READ of len bytes of node 1's M1 + 4096 into M0, alone: completes with the data and not a
 * byte more. */
static void read_once(uint32_t len)
{
    static struct ub_sge sg;
    static struct ub_wr wr;
    memset(M0, 0, len + 1);
    pw_rma_wr(&wr, &sg, UB_OP_READ, 0, 0, 4096, len);
    sg.addr = M0;
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr, NULL), 0);
    collect_ok(1);
    assert_memory_equal(M0, M1 + 4096, len);
    assert_int_equal(M0[len], 0);
}

/* A READ of at most UB_SES_RIDE_DATA bytes is answered while its packet is delivered: the data
 * rides, also when the ACK that carried it is lost (the duplicate is answered from the target's
 * cache: in the cache entry itself, or past UB_PDS_ACK_RSP_INLINE bytes in the entry's own
 * buffer). A longer READ sends its data in a packet of its own, as before. */
static void test_ackrsp_read(void **state)
{
    (void)state;
    setup(UB_PACK_OFF);
    const uint32_t lens[] = {64, 65, UB_SES_RIDE_DATA};
    for (uint32_t k = 0; k < 3; k++) {
        uint32_t len = lens[k];
        fill_pattern(M1 + 4096, len, 11 + k);
        for (int lose = 0; lose < 2; lose++) {
            if (lose)
                tnet_impair(&T, 1, 0, UB_IMPAIR_DROP_NTH, 0, 0);
            struct snap s0 = snap();
            read_once(len);
            assert_int_equal(DG(executed), 1);
            assert_int_equal(DG(tx_rsp_ack), 1);
            assert_int_equal(DG(tx_rsp_pkts), 0);
            assert_int_equal(DGP(tx_pkts), 0);
            assert_int_equal(DGP(acks_rsp_resent), lose);
            assert_int_equal(DIP(retx_pkts), lose);
        }
    }
    struct snap s0 = snap();
    fill_pattern(M1 + 4096, UB_SES_RIDE_DATA + 1, 12);
    read_once(UB_SES_RIDE_DATA + 1);
    assert_int_equal(DG(tx_rsp_ack), 0);
    assert_int_equal(DG(tx_rsp_pkts), 1);
    pw_teardown();
}

/* A READ whose data rode, delivered again after it ran (as through a re-established PDC, whose
 * ACK with the data may have been lost with the old one): read again and answered, not left
 * without an answer; the initiator, which has its data, drops the second as stale. */
static void test_ackrsp_read_again(void **state)
{
    (void)state;
    setup(UB_PACK_OFF);
    tap_install(T.ctx[1], 1);
    TAP.record = true;
    fill_pattern(M1 + 4096, 300, 31);
    read_once(300);
    TAP.record = false;
    assert_int_equal(TAP.n, 1);
    struct snap s0 = snap();
    tap_redeliver(0);
    for (int i = 0; i < 50; i++)
        tnet_step(&T, 1000);
    assert_int_equal(DG(rx_dup_pkts), 1);
    assert_int_equal(DG(dup_executed), 1);
    assert_int_equal(DG(executed), 0);
    assert_int_equal(DG(tx_rsp_pkts), 1); /* outside PDS's delivery: no ACK of its own to ride */
    assert_int_equal(DI(rx_stale_rsp), 1);
    assert_memory_equal(M0, M1 + 4096, 300);
    struct ub_cr extra;
    assert_int_equal(ub_poll_jfc(T.jfc[0], 1, &extra), 0);
    tap_free();
    pw_teardown();
}

/* With a small MTU a READ rides only while the ACK with it fits one datagram: past that its data
 * goes in a packet of its own (the ACK never leaves without its response). */
static void test_ackrsp_read_small_mtu(void **state)
{
    (void)state;
    const uint32_t mtu = 512, fits = mtu - UB_PDS_ACK_CCX_SIZE - UB_EXT_SIZE - UB_SES_RSP_DATA_SIZE;
    setup_mtu(UB_PACK_OFF, mtu);
    for (uint32_t len = fits; len <= fits + 1; len++) {
        fill_pattern(M1 + 4096, len, len);
        struct snap s0 = snap();
        read_once(len);
        assert_int_equal(DG(tx_rsp_ack), len == fits ? 1 : 0);
        assert_int_equal(DG(tx_rsp_pkts), len == fits ? 0 : 1);
        assert_int_equal(DIP(retx_pkts), 0);
    }
    pw_teardown();
}

/* A target without the capability (SOFTUB_ACK_RSP=0 there) ignores K: plain ACKs, responses
 * in packets of their own, nothing held open or resent at the initiator. */
static void test_ackrsp_old_target(void **state)
{
    (void)state;
    setup(UB_PACK_OFF);
    T.ctx[1]->ses.ack_rsp = false;
    struct snap s0 = snap();
    post_writes(8, 8);
    collect_ok(8);
    assert_memory_equal(M1, M0, 64);
    assert_int_equal(DG(tx_rsp_ack), 0);
    assert_int_equal(DG(tx_rsp_pkts), 8);
    assert_int_equal(DIP(acks_rsp_rx), 0);
    assert_int_equal(DIP(own_covered), 0);
    assert_int_equal(DIP(retx_pkts), 0);
    pw_teardown();
}

/* An initiator without it sends no K: today's exchange exactly. */
static void test_ackrsp_old_initiator(void **state)
{
    (void)state;
    setup(UB_PACK_OFF);
    T.ctx[0]->ses.ack_rsp = false;
    struct snap s0 = snap();
    post_writes(8, 9);
    collect_ok(8);
    assert_int_equal(DG(tx_rsp_ack), 0);
    assert_int_equal(DG(tx_rsp_pkts), 8);
    assert_int_equal(DGP(acks_rsp_tx), 0);
    assert_int_equal(DIP(acks_rsp_rx), 0);
    pw_teardown();
}

/* By default K goes only on a request with nothing else outstanding to its peer: of 8 WRITEs
 * posted at once the first rides, the others are answered the ordinary way (packed together). */
static void test_ackrsp_busy(void **state)
{
    (void)state;
    setup(UB_PACK_OFF);
    T.ctx[0]->ses.ack_rsp_busy = 1;
    struct snap s0 = snap();
    post_writes(8, 13);
    collect_ok(8);
    assert_memory_equal(M1, M0, 64);
    assert_int_equal(DG(executed), 8);
    assert_int_equal(DG(tx_rsp_ack), 1);
    assert_int_equal(DG(tx_prsp_recs) + DG(tx_rsp_pkts) - DG(tx_prsp_pkts), 7);
    pw_teardown();
}

/* Packed requests keep packed responses (no K on a pack); a lone request beside them rides. */
static void test_ackrsp_packed(void **state)
{
    (void)state;
    setup(0);
    static struct ub_sge sg[16];
    static struct ub_wr wr[16];
    fill_pattern(M0, 8 * 16, 10);
    for (uint32_t i = 0; i < 16; i++) {
        write_wr(&wr[i], &sg[i], i, 8 * i);
        wr[i].next = i + 1 < 16 ? &wr[i + 1] : NULL;
    }
    struct snap s0 = snap();
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr[0], NULL), 0);
    collect_ok(16);
    assert_memory_equal(M1, M0, 128);
    assert_int_equal(DI(pack_pkts), 1);
    assert_int_equal(DG(tx_prsp_pkts), 1);
    assert_int_equal(DG(tx_prsp_recs), 16);
    assert_int_equal(DG(tx_rsp_ack), 0);
    s0 = snap();
    write_wr(&wr[0], &sg[0], 0, 0);
    wr[0].next = NULL;
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr[0], NULL), 0);
    collect_ok(1);
    assert_int_equal(DG(tx_rsp_ack), 1);
    assert_int_equal(DG(tx_prsp_pkts), 0);
    pw_teardown();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ackrsp_clean),
        cmocka_unit_test(test_ackrsp_lost),
        cmocka_unit_test(test_ackrsp_ce),
        cmocka_unit_test(test_ackrsp_covered),
        cmocka_unit_test(test_ackrsp_lossy),
        cmocka_unit_test(test_ackrsp_dup),
        cmocka_unit_test(test_ackrsp_reorder),
        cmocka_unit_test(test_ackrsp_atomic),
        cmocka_unit_test(test_ackrsp_multi),
        cmocka_unit_test(test_ackrsp_read),
        cmocka_unit_test(test_ackrsp_read_small_mtu),
        cmocka_unit_test(test_ackrsp_read_again),
        cmocka_unit_test(test_ackrsp_old_target),
        cmocka_unit_test(test_ackrsp_old_initiator),
        cmocka_unit_test(test_ackrsp_busy),
        cmocka_unit_test(test_ackrsp_packed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
