/*
 * Packed responses (src/ses/ses_pack.c, docs/wire-format.md 6.2): the small responses a
 * target produces in one progress round for one initiator leave in one packet, and the
 * initiator runs every record as if it had come alone. Exact packet counts, completion
 * order, a lost packed response repaired with every request completing once, errors, RNR,
 * atomics and READs per record, re-sent cached responses, a malformed packed response
 * refused whole, an initiator that does not take them. Manual clock, loop fabric.
 */
#include "unit/api_pack_world.h"
#include "unit/api_tap.h"
#include "dev/impair.h"
#include "pds/pds_int.h"
#include "wire/datagram.h"

/* Node 0 initiates (its packing as given), node 1 answers; 9000-byte MTU: 64 records fit. */
static void setup_mtu(uint32_t pack_max, uint32_t mtu)
{
    pw_setup(pack_max, mtu, 3000, 13);
}

static void setup_with(uint32_t pack_max)
{
    setup_mtu(pack_max, 9000);
}

static void setup(void)
{
    setup_with(0);
}

static void teardown(void)
{
    pw_teardown();
}

static struct ub__ses_stats *I(void)
{
    return &T.ctx[0]->ses.st;
}

static struct ub__ses_stats *G(void)
{
    return &T.ctx[1]->ses.st;
}

static void write_wr(struct ub_wr *wr, struct ub_sge *sg, uint64_t user, uint32_t off, uint32_t len)
{
    pw_rma_wr(wr, sg, UB_OP_WRITE, UB_WR_INLINE, user, off, len);
}

static void read_wr(struct ub_wr *wr, struct ub_sge *sg, uint64_t user, uint32_t off, uint32_t len)
{
    pw_rma_wr(wr, sg, UB_OP_READ, 0, user, off, len);
}

static void fadd_wr(struct ub_wr *wr, uint64_t user, uint64_t *old)
{
    memset(wr, 0, sizeof(*wr));
    wr->opcode = UB_OP_ATOMIC_FADD;
    wr->flags = UB_WR_COMPLETE;
    wr->user_ctx = user;
    wr->u.atomic.tseg = TS;
    wr->u.atomic.addr = ub_tseg_base(TS) + 65536;
    wr->u.atomic.operand = 1;
    wr->u.atomic.result = old;
}

static void send_wr(struct ub_wr *wr, struct ub_sge *sg, uint64_t user, uint32_t off, uint32_t len)
{
    memset(wr, 0, sizeof(*wr));
    sg->addr = M0 + off;
    sg->len = len;
    sg->seg = S0;
    wr->opcode = UB_OP_SEND_IMM;
    wr->flags = UB_WR_COMPLETE;
    wr->user_ctx = user;
    wr->imm_data = user * 3;
    wr->sge = sg;
    wr->num_sge = 1;
    wr->tjetty = TJ;
}

static void chain(struct ub_wr *wr, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
}

/* n inline 8-byte WRITEs, chained, of a fresh pattern from M0 + 8 i to M1 + 8 i (user_ctx i). */
static void write8s(struct ub_wr *wr, struct ub_sge *sg, uint32_t n, uint32_t seed)
{
    fill_pattern(M0, 8 * (size_t)n, seed);
    for (uint32_t i = 0; i < n; i++)
        write_wr(&wr[i], &sg[i], i, 8 * i, 8);
    chain(wr, n);
}

/* Collects n records of node i (bounded rounds); then nothing more may come. */
static void collect(uint32_t i, struct ub_cr *cr, uint32_t n)
{
    uint32_t got = 0;
    for (int round = 0; got < n && round < 200000; round++) {
        int k = ub_poll_jfc(T.jfc[i], (int)(n - got), cr + got);
        got += (uint32_t)k;
        if (!k)
            tnet_step(&T, 10000);
    }
    assert_int_equal(got, n);
    for (int round = 0; round < 50; round++)
        tnet_step(&T, 10000);
    struct ub_cr extra;
    assert_int_equal(ub_poll_jfc(T.jfc[i], 1, &extra), 0);
}

static uint64_t rx_pkts(uint32_t i)
{
    return ub__pds_stats(T.ctx[i]->eng.pds)->rx_pkts;
}

/*
 * 64 WRITEs in one post list: one packed request, exactly one response packet back (with 64
 * records), every completion a success, in posting order.
 */
static void test_prsp_one_packet(void **state)
{
    (void)state;
    setup();
    static struct ub_sge sg[64];
    static struct ub_wr wr[64];
    write8s(wr, sg, 64, 1);
    struct ub__ses_stats i0 = *I(), g0 = *G();
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr[0], NULL), 0);
    struct ub_cr cr[64];
    collect(0, cr, 64);
    for (uint32_t i = 0; i < 64; i++) {
        assert_int_equal(cr[i].status, UB_CR_SUCCESS);
        assert_int_equal(cr[i].user_ctx, i);
    }
    assert_memory_equal(M1, M0, 8 * 64);
    assert_int_equal(I()->pack_pkts - i0.pack_pkts, 1);
    assert_int_equal(G()->tx_rsp_pkts - g0.tx_rsp_pkts, 1);
    assert_int_equal(G()->tx_prsp_pkts - g0.tx_prsp_pkts, 1);
    assert_int_equal(G()->tx_prsp_recs - g0.tx_prsp_recs, 64);
    assert_int_equal(I()->rx_prsp_pkts - i0.rx_prsp_pkts, 1);
    assert_int_equal(I()->rx_prsp_recs - i0.rx_prsp_recs, 64);
    assert_int_equal(I()->rx_stale_rsp, i0.rx_stale_rsp);
    assert_int_equal(I()->rx_prsp_bad, 0);
    teardown();
}

/* An initiator that does not take packed responses (packing off) gets one per request (here
 * without responses on ACKs either: test_api_ackrsp has those). */
static void test_prsp_not_taken(void **state)
{
    (void)state;
    setup_with(UB_PACK_OFF);
    T.ctx[0]->ses.ack_rsp = false;
    static struct ub_sge sg[16];
    static struct ub_wr wr[16];
    for (uint32_t i = 0; i < 16; i++)
        write_wr(&wr[i], &sg[i], i, 8 * i, 8);
    chain(wr, 16);
    uint64_t rsp = G()->tx_rsp_pkts;
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr[0], NULL), 0);
    struct ub_cr cr[16];
    collect(0, cr, 16);
    for (uint32_t i = 0; i < 16; i++)
        assert_int_equal(cr[i].status, UB_CR_SUCCESS);
    assert_int_equal(G()->tx_rsp_pkts - rsp, 16);
    assert_int_equal(G()->tx_prsp_pkts, 0);
    assert_int_equal(I()->rx_prsp_pkts, 0);
    teardown();
}

/*
 * Everything the target sends back is lost for a while (the ACK of the request and the packed
 * response): PDS repairs it; every request completes exactly once, nothing runs twice, and
 * the transaction layer sees the packed response once.
 */
static void test_prsp_lost(void **state)
{
    (void)state;
    setup();
    static struct ub_sge sg[32];
    static struct ub_wr wr[32];
    write8s(wr, sg, 32, 2);
    tnet_impair(&T, 1, 0, UB_IMPAIR_DROP_BURST, 0, 3);
    struct ub__ses_stats i0 = *I(), g0 = *G();
    uint64_t retx = ub__pds_stats(T.ctx[1]->eng.pds)->retx_pkts;
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr[0], NULL), 0);
    struct ub_cr cr[32];
    collect(0, cr, 32);
    for (uint32_t i = 0; i < 32; i++) {
        assert_int_equal(cr[i].status, UB_CR_SUCCESS);
        assert_int_equal(cr[i].user_ctx, i);
    }
    assert_memory_equal(M1, M0, 8 * 32);
    assert_true(ub__pds_stats(T.ctx[1]->eng.pds)->retx_pkts > retx);
    assert_int_equal(G()->executed - g0.executed, 32);
    assert_int_equal(G()->tx_prsp_recs - g0.tx_prsp_recs, 32);
    assert_int_equal(I()->rx_prsp_pkts - i0.rx_prsp_pkts, 1);
    assert_int_equal(I()->rx_prsp_recs - i0.rx_prsp_recs, 32);
    assert_int_equal(I()->rx_stale_rsp, i0.rx_stale_rsp);
    tnet_heal(&T, 1, 0);
    teardown();
}

/* Records the target refuses fail alone: their errors travel in the packed response. */
static void test_prsp_errors(void **state)
{
    (void)state;
    setup();
    ub_seg *ro;
    assert_int_equal(ub_seg_register(T.ctx[1], M1 + 500000, 4096, UB_ACCESS_READ, 2, &ro), 0);
    ub_tseg *tro = tnet_import_seg(&T, 0, ro, 2);
    ub_tseg *bad = tnet_import_seg(&T, 0, S1, 999); /* wrong token */
    static struct ub_sge sg[8];
    static struct ub_wr wr[8];
    write8s(wr, sg, 8, 5);
    wr[2].u.rma.addr = ub_tseg_base(TS) + MEM - 4; /* crosses the end */
    wr[4].u.rma.tseg = bad;
    wr[6].u.rma.tseg = tro;
    wr[6].u.rma.addr = ub_tseg_base(tro);
    struct ub__ses_stats i0 = *I(), g0 = *G();
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr[0], NULL), 0);
    struct ub_cr cr[8];
    collect(0, cr, 8);
    for (uint32_t i = 0; i < 8; i++) {
        assert_int_equal(cr[i].user_ctx, i);
        enum ub_cr_status want = i == 2   ? UB_CR_REM_ACCESS_ERR
                                 : i == 4 ? UB_CR_INVALID_TOKEN
                                 : i == 6 ? UB_CR_REM_ACCESS_ERR
                                          : UB_CR_SUCCESS;
        assert_int_equal(cr[i].status, want);
        if (want == UB_CR_SUCCESS)
            assert_memory_equal(M1 + 8 * i, M0 + 8 * i, 8);
    }
    assert_int_equal(G()->tx_rsp_pkts - g0.tx_rsp_pkts, 1);
    assert_int_equal(I()->rx_prsp_recs - i0.rx_prsp_recs, 8);
    teardown();
}

/*
 * FADDs and READs with data in one post list: the old values and the READ data (up to 64
 * bytes) travel as records; a 65-byte READ goes as its own response. Every FADD runs once.
 */
static void test_prsp_atomic_read(void **state)
{
    (void)state;
    setup();
    fill_pattern(M1 + 4096, 4096, 9);
    static struct ub_sge sg[34];
    static struct ub_wr wr[34];
    uint64_t old[16];
    for (uint32_t i = 0; i < 16; i++) {
        fadd_wr(&wr[2 * i], 100 + i, &old[i]);
        read_wr(&wr[2 * i + 1], &sg[2 * i + 1], 200 + i, 4096 + 64 * i, 8 + i);
    }
    read_wr(&wr[32], &sg[32], 300, 8192, 64);
    read_wr(&wr[33], &sg[33], 301, 8192 + 128, 65);
    chain(wr, 34);
    struct ub__ses_stats i0 = *I(), g0 = *G();
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr[0], NULL), 0);
    struct ub_cr cr[34];
    collect(0, cr, 34);
    for (uint32_t i = 0; i < 34; i++)
        assert_int_equal(cr[i].status, UB_CR_SUCCESS);
    uint8_t seen[16] = {0};
    for (uint32_t i = 0; i < 16; i++) {
        assert_true(old[i] < 16);
        assert_int_equal(seen[old[i]], 0);
        seen[old[i]] = 1;
        assert_memory_equal(M0 + 4096 + 64 * i, M1 + 4096 + 64 * i, 8 + i);
    }
    uint64_t word;
    memcpy(&word, M1 + 65536, 8);
    assert_int_equal(word, 16);
    assert_memory_equal(M0 + 8192, M1 + 8192, 64);
    assert_memory_equal(M0 + 8192 + 128, M1 + 8192 + 128, 65);
    assert_int_equal(G()->tx_prsp_recs - g0.tx_prsp_recs, 33);
    assert_int_equal(I()->rx_prsp_recs - i0.rx_prsp_recs, 33);
    assert_int_equal(G()->tx_rsp_pkts - g0.tx_rsp_pkts, G()->tx_prsp_pkts - g0.tx_prsp_pkts + 1);
    teardown();
}

/*
 * 8 SENDs, buffers for 4: the other 4 are answered DEFERRED (receiver not ready) in the packed
 * response, restart when buffers are posted and complete; every message lands once, in sending
 * order.
 */
static void test_prsp_deferred(void **state)
{
    (void)state;
    setup();
    static struct ub_sge rsg[8];
    static struct ub_rwr rw[8];
    for (uint32_t i = 0; i < 8; i++) {
        rsg[i] = (struct ub_sge){R1 + 64 * i, 64, SR};
        memset(&rw[i], 0, sizeof(rw[i]));
        rw[i].user_ctx = 1000 + i;
        rw[i].sge = &rsg[i];
        rw[i].num_sge = 1;
    }
    for (uint32_t i = 0; i < 3; i++)
        rw[i].next = &rw[i + 1];
    assert_int_equal(ub_post_jetty_recv(T.jetty[1], &rw[0], NULL), 0);
    static struct ub_sge sg[8];
    static struct ub_wr wr[8];
    fill_pattern(M0 + 1024, 512, 4);
    for (uint32_t i = 0; i < 8; i++)
        send_wr(&wr[i], &sg[i], 10 + i, 1024 + 32 * i, 8);
    chain(wr, 8);
    struct ub__ses_stats i0 = *I(), g0 = *G();
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr[0], NULL), 0);
    for (int i = 0; i < 20; i++)
        tnet_step(&T, 1000);
    assert_int_equal(G()->deferred_sent - g0.deferred_sent, 4);
    assert_int_equal(G()->tx_prsp_recs - g0.tx_prsp_recs, 8);
    for (uint32_t i = 4; i < 7; i++)
        rw[i].next = &rw[i + 1];
    assert_int_equal(ub_post_jetty_recv(T.jetty[1], &rw[4], NULL), 0);
    struct ub_cr cr[8];
    collect(0, cr, 8);
    for (uint32_t i = 0; i < 8; i++)
        assert_int_equal(cr[i].status, UB_CR_SUCCESS);
    struct ub_cr rc[8];
    collect(1, rc, 8);
    for (uint32_t i = 0; i < 8; i++) {
        assert_int_equal(rc[i].status, UB_CR_SUCCESS);
        uint32_t b = (uint32_t)rc[i].user_ctx - 1000;
        assert_int_equal(b, i);
        assert_int_equal(rc[i].imm_data, (10 + i) * 3);
        assert_memory_equal(R1 + 64 * i, M0 + 1024 + 32 * i, 8);
    }
    assert_int_equal(I()->defer_restarts - i0.defer_restarts, 4);
    teardown();
}

/*
 * A SEND waits (DEFERRED: no buffer) while 300 WRITEs on its stream come and go: their
 * order_seqs wrap the stream's request window past the waiting one (those requests are found
 * through the map instead). Every request completes once, the SEND last.
 */
static void test_prsp_window_wrap(void **state)
{
    (void)state;
    setup();
    static struct ub_sge sg[301];
    static struct ub_wr wr[301];
    send_wr(&wr[0], &sg[0], 1000, 1024, 8);
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr[0], NULL), 0);
    for (int i = 0; i < 20; i++)
        tnet_step(&T, 1000);
    assert_int_equal(G()->deferred_sent, 1);
    fill_pattern(M0 + 8192, 8 * 300, 7);
    struct ub_cr cr[301];
    for (uint32_t r = 0; r < 3; r++) {
        for (uint32_t i = 0; i < 100; i++)
            write_wr(&wr[1 + i], &sg[1 + i], 100 * r + i, 8192 + 8 * (100 * r + i), 8);
        chain(&wr[1], 100);
        assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr[1], NULL), 0);
        /* Window of 128: order_seqs 128 and 256 find slot 0 taken by the SEND (0). */
        assert_int_equal(T.ctx[0]->ses.pending.count, r ? 1 : 0);
        collect(0, cr, 100);
        for (uint32_t i = 0; i < 100; i++) {
            assert_int_equal(cr[i].status, UB_CR_SUCCESS);
            assert_int_equal(cr[i].user_ctx, 100 * r + i);
        }
    }
    assert_memory_equal(M1 + 8192, M0 + 8192, 8 * 300);
    assert_true(T.ctx[0]->ses.pending.count == 0);
    static struct ub_sge rsg;
    static struct ub_rwr rw;
    rsg = (struct ub_sge){R1, 64, SR};
    memset(&rw, 0, sizeof(rw));
    rw.user_ctx = 7;
    rw.sge = &rsg;
    rw.num_sge = 1;
    assert_int_equal(ub_post_jetty_recv(T.jetty[1], &rw, NULL), 0);
    collect(0, cr, 1);
    assert_int_equal(cr[0].status, UB_CR_SUCCESS);
    assert_int_equal(cr[0].user_ctx, 1000);
    teardown();
}

/*
 * A 1500-byte MTU: 64 READs of 64 bytes answer with records of 102 bytes, so the responses
 * of one pump fill several packed responses (split by bytes, not only by count); every READ
 * gets its bytes.
 */
static void test_prsp_split_by_bytes(void **state)
{
    (void)state;
    setup_mtu(0, 1500);
    fill_pattern(M1 + 16384, 64 * 64, 11);
    static struct ub_sge sg[64];
    static struct ub_wr wr[64];
    for (uint32_t i = 0; i < 64; i++)
        read_wr(&wr[i], &sg[i], i, 16384 + 64 * i, 64);
    chain(wr, 64);
    struct ub__ses_stats i0 = *I(), g0 = *G();
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr[0], NULL), 0);
    struct ub_cr cr[64];
    collect(0, cr, 64);
    for (uint32_t i = 0; i < 64; i++) {
        assert_int_equal(cr[i].status, UB_CR_SUCCESS);
        assert_int_equal(cr[i].user_ctx, i);
    }
    assert_memory_equal(M0 + 16384, M1 + 16384, 64 * 64);
    uint64_t pk = G()->tx_prsp_pkts - g0.tx_prsp_pkts;
    assert_int_equal(G()->tx_prsp_recs - g0.tx_prsp_recs, 64);
    assert_int_equal(I()->rx_prsp_recs - i0.rx_prsp_recs, 64);
    /* At most (1500 - headers) / 102 records each: at least 5 packets, and never one each. */
    assert_true(pk >= 5 && pk <= 16);
    assert_int_equal(G()->tx_rsp_pkts - g0.tx_rsp_pkts, pk);
    teardown();
}

/* Captures packed requests at the target. */
static bool keep_pack(const struct ub__pds_rx *rx)
{
    return ub__ses_is_pack(rx->hdr);
}

/*
 * A packed request delivered again (re-established PDC): nothing runs twice, the cached
 * responses go again, packed, and the initiator drops them as stale.
 */
static void test_prsp_cached_again(void **state)
{
    (void)state;
    setup();
    tap_install(T.ctx[1], 1);
    TAP.keep = keep_pack;
    TAP.record = true;
    static struct ub_sge sg[16];
    static struct ub_wr wr[16];
    uint64_t old[8];
    for (uint32_t i = 0; i < 8; i++) {
        write_wr(&wr[2 * i], &sg[2 * i], i, 8 * i, 8);
        fadd_wr(&wr[2 * i + 1], 100 + i, &old[i]);
    }
    chain(wr, 16);
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr[0], NULL), 0);
    struct ub_cr cr[16];
    collect(0, cr, 16);
    TAP.record = false;
    assert_int_equal(TAP.n, 1);
    struct ub__ses_stats i0 = *I(), g0 = *G();
    tap_redeliver(0);
    for (int i = 0; i < 50; i++)
        tnet_step(&T, 1000);
    assert_int_equal(G()->executed, g0.executed);
    assert_int_equal(G()->rsp_resent - g0.rsp_resent, 16);
    assert_int_equal(G()->tx_prsp_pkts - g0.tx_prsp_pkts, 1);
    assert_int_equal(G()->tx_prsp_recs - g0.tx_prsp_recs, 16);
    assert_int_equal(I()->rx_prsp_recs - i0.rx_prsp_recs, 16);
    assert_int_equal(I()->rx_stale_rsp - i0.rx_stale_rsp, 16);
    uint64_t word;
    memcpy(&word, M1 + 65536, 8);
    assert_int_equal(word, 8);
    struct ub_cr extra;
    assert_int_equal(ub_poll_jfc(T.jfc[0], 1, &extra), 0);
    tap_free();
    teardown();
}

/* SOFTUB_PACK_CORPUS=DIR: writes a packed payload out as a fuzz_pack seed. */
static void seed(const char *name, const uint8_t *p, size_t n)
{
    const char *dir = getenv("SOFTUB_PACK_CORPUS");
    if (!dir)
        return;
    char path[512];
    snprintf(path, sizeof(path), "%s/%s.bin", dir, name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(p, 1, n, f);
        fclose(f);
    }
}

/*
 * A packed request's record extensions are byte for byte what the generic encoder makes of
 * the request's extension (incarnation 0): WRITEs with order flags, a FADD and a SEND.
 */
static void test_pack_record_ext(void **state)
{
    (void)state;
    setup();
    tap_install(T.ctx[1], 1);
    TAP.keep = keep_pack;
    TAP.record = true;
    TAP.swallow = true;
    static struct ub_sge rsg;
    static struct ub_rwr rw;
    rsg = (struct ub_sge){R1, 64, SR};
    memset(&rw, 0, sizeof(rw));
    rw.sge = &rsg;
    rw.num_sge = 1;
    assert_int_equal(ub_post_jetty_recv(T.jetty[1], &rw, NULL), 0);
    static struct ub_sge sg[6];
    static struct ub_wr wr[6];
    uint64_t old;
    write_wr(&wr[0], &sg[0], 0, 0, 8);
    write_wr(&wr[1], &sg[1], 1, 8, 8);
    wr[1].flags |= UB_WR_ORDER_SO | UB_WR_INORDER_COMP;
    write_wr(&wr[2], &sg[2], 2, 16, 8);
    wr[2].flags |= UB_WR_FENCE | UB_WR_ORDER_RO;
    fadd_wr(&wr[3], 3, &old);
    send_wr(&wr[4], &sg[4], 4, 1024, 8);
    write_wr(&wr[5], &sg[5], 5, 24, 8);
    wr[5].flags |= UB_WR_SOLICITED;
    chain(wr, 6);
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr[0], NULL), 0);
    for (int i = 0; i < 20; i++)
        tnet_step(&T, 1000);
    assert_int_equal(TAP.n, 1);
    struct ub__wire_dgram d;
    assert_int_equal(ub__wire_parse_datagram(&d, TAP.saved[0], TAP.saved_len[0], 0), 0);
    const uint8_t *pl = TAP.saved[0] + d.payload_off;
    size_t off = 0;
    int k, recs = 0;
    struct ub__ses_prec rec;
    while ((k = ub__ses_pack_rec(pl + off, d.payload_len - off, &rec)) > 0) {
        struct ub__wr *w = ub__ses_pending(&T.ctx[0]->ses, rec.ext.stream, rec.ext.order_seq);
        assert_non_null(w);
        uint8_t tail[UB_SES_TAIL_LEN], want[UB_EXT_MAX_SIZE];
        struct ub__ext ext;
        ub__ses_wr_ext(w, &ext, tail);
        struct ub__wcur wc;
        ub__wcur_init(&wc, want, sizeof(want));
        assert_int_equal(ub__ext_encode(&ext, &wc), 0);
        assert_int_equal(ub__wcur_offset(&wc), UB_EXT_SIZE + UB_SES_TAIL_LEN);
        assert_memory_equal(pl + off + UB_SES_PACK_LEN, want, UB_EXT_SIZE + UB_SES_TAIL_LEN);
        off += (size_t)k;
        recs++;
    }
    assert_int_equal(off, d.payload_len);
    assert_int_equal(recs, 6);
    TAP.swallow = false;
    tap_redeliver(0); /* now the target runs them: everything completes */
    struct ub_cr cr[6];
    collect(0, cr, 6);
    for (uint32_t i = 0; i < 6; i++)
        assert_int_equal(cr[i].status, UB_CR_SUCCESS);
    struct ub_cr rc;
    collect(1, &rc, 1);
    assert_int_equal(rc.status, UB_CR_SUCCESS);
    tap_free();
    teardown();
}

/*
 * Malformed packed responses are refused whole (counted, nothing completes); the intact one
 * then completes every request once.
 */
static void test_prsp_malformed(void **state)
{
    (void)state;
    setup();
    tap_install(T.ctx[0], 1);
    TAP.rsp = true;
    TAP.src_port = 1;
    TAP.record = true;
    TAP.swallow = true; /* PDS acknowledges it; the transaction layer never sees it */
    static struct ub_sge sg[8];
    static struct ub_wr wr[8];
    uint64_t old[4];
    for (uint32_t i = 0; i < 4; i++) {
        write_wr(&wr[2 * i], &sg[2 * i], i, 8 * i, 8);
        fadd_wr(&wr[2 * i + 1], 100 + i, &old[i]);
    }
    chain(wr, 8);
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr[0], NULL), 0);
    for (int i = 0; i < 20; i++)
        tnet_step(&T, 1000);
    TAP.record = false;
    assert_int_equal(TAP.n, 1);
    struct ub__wire_dgram d;
    uint32_t len = TAP.saved_len[0];
    assert_int_equal(ub__wire_parse_datagram(&d, TAP.saved[0], len, 0), 0);
    assert_true(ub__ses_is_pack(&d));
    assert_int_equal(ub__ses_prsp_check(TAP.saved[0] + d.payload_off, d.payload_len), 8);
    /* Every record is byte for byte what the generic encoders make of its fields. */
    for (size_t off = 0; off < d.payload_len;) {
        struct ub__ses_prec rec;
        const uint8_t *at = TAP.saved[0] + d.payload_off + off;
        int k = ub__ses_prsp_rec(at, d.payload_len - off, &rec);
        assert_true(k > 0);
        uint8_t want[UB_EXT_SIZE + UB_SES_RSP_DATA_SIZE];
        struct ub__wcur wc;
        ub__wcur_init(&wc, want, sizeof(want));
        assert_int_equal(ub__ext_encode(&rec.ext, &wc), 0);
        assert_int_equal(ub__ses_encode(&rec.ses, &wc), 0);
        assert_memory_equal(at + UB_SES_PACK_LEN, want, sizeof(want));
        assert_int_equal(rec.ext.incarnation, 0);
        off += (size_t)k;
    }
    uint8_t *bad = malloc(len);
    uint8_t *pl = bad + d.payload_off;
    struct ub_cr cr[8];
    uint64_t refused = I()->rx_prsp_bad;
    /* 1: the first record's length one too long. */
    memcpy(bad, TAP.saved[0], len);
    seed("rsp_write_fadd8", pl, d.payload_len);
    pl[1]++;
    seed("rsp_bad_len", pl, d.payload_len);
    tap_redeliver_buf(bad, len);
    /* 2: the second record's extension says version 1 (a tail would follow). */
    memcpy(bad, TAP.saved[0], len);
    size_t second = 2 + (((size_t)pl[0] << 8) | pl[1]);
    pl[second + 2] = (uint8_t)(0x10 | (pl[second + 2] & 0x0f));
    seed("rsp_bad_version", pl, d.payload_len);
    tap_redeliver_buf(bad, len);
    /* 3: the last record's payload_len disagrees with its bytes (FADD: 8 -> 7). */
    memcpy(bad, TAP.saved[0], len);
    pl[d.payload_len - 8 - 20 + 10 + 1] = 7;
    seed("rsp_bad_payload_len", pl, d.payload_len);
    tap_redeliver_buf(bad, len);
    /* 4: a record naming another SES header. */
    memcpy(bad, TAP.saved[0], len);
    pl[2] = (uint8_t)((pl[2] & 0xf0) | UB_PDS_NH_RSP);
    tap_redeliver_buf(bad, len);
    free(bad);
    for (int i = 0; i < 20; i++)
        tnet_step(&T, 1000);
    assert_int_equal(I()->rx_prsp_bad - refused, 4);
    assert_int_equal(ub_poll_jfc(T.jfc[0], 8, cr), 0);
    /* The intact one: all eight complete, in order. */
    tap_redeliver(0);
    collect(0, cr, 8);
    for (uint32_t i = 0; i < 8; i++) {
        assert_int_equal(cr[i].status, UB_CR_SUCCESS);
        assert_int_equal(cr[i].user_ctx, (i & 1) ? 100 + i / 2 : i / 2);
    }
    tap_free();
    teardown();
}

/*
 * Back-pressure: the target has no spare buffers when it answers 64 WRITEs, so the responses
 * wait; when buffers come back they still leave as one packed response, in order.
 */
static void test_prsp_backpressure(void **state)
{
    (void)state;
    setup();
    static struct ub_sge sg[64];
    static struct ub_wr wr[64];
    write8s(wr, sg, 64, 5);
    /* Hold target buffers down to the floor below which no response goes out (the request is
     * still received). */
    struct ub__pktpool *pool = &T.ctx[1]->eng.pool;
    static struct ub__pkt *held[8192];
    uint32_t nheld = 0;
    while (pool->avail > UB_SES_POOL_RESERVE / 4) {
        assert_true(nheld < 8192);
        held[nheld++] = ub__pkt_alloc(pool);
    }
    struct ub__ses_stats i0 = *I(), g0 = *G();
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr[0], NULL), 0);
    for (int i = 0; i < 20 && G()->rx_req_pkts == g0.rx_req_pkts; i++)
        tnet_step(&T, 1000);
    assert_int_equal(G()->rx_req_pkts - g0.rx_req_pkts, 64); /* records */
    for (int i = 0; i < 5; i++)
        tnet_step(&T, 1000);
    assert_int_equal(G()->tx_rsp_pkts, g0.tx_rsp_pkts); /* all waiting */
    assert_memory_equal(M1, M0, 8 * 64);                /* executed */
    while (nheld)
        ub__pkt_free(held[--nheld]);
    struct ub_cr cr[64];
    collect(0, cr, 64);
    for (uint32_t i = 0; i < 64; i++) {
        assert_int_equal(cr[i].status, UB_CR_SUCCESS);
        assert_int_equal(cr[i].user_ctx, i);
    }
    assert_int_equal(G()->tx_rsp_pkts - g0.tx_rsp_pkts, 1);
    assert_int_equal(G()->tx_prsp_pkts - g0.tx_prsp_pkts, 1);
    assert_int_equal(G()->tx_prsp_recs - g0.tx_prsp_recs, 64);
    assert_int_equal(I()->rx_prsp_recs - i0.rx_prsp_recs, 64);
    assert_int_equal(I()->rx_stale_rsp, i0.rx_stale_rsp);
    teardown();
}

int main(void)
{
    (void)rx_pkts;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prsp_one_packet),     cmocka_unit_test(test_prsp_not_taken),
        cmocka_unit_test(test_prsp_lost),           cmocka_unit_test(test_prsp_errors),
        cmocka_unit_test(test_prsp_atomic_read),    cmocka_unit_test(test_prsp_deferred),
        cmocka_unit_test(test_prsp_cached_again),   cmocka_unit_test(test_prsp_malformed),
        cmocka_unit_test(test_prsp_window_wrap),    cmocka_unit_test(test_pack_record_ext),
        cmocka_unit_test(test_prsp_split_by_bytes), cmocka_unit_test(test_prsp_backpressure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
