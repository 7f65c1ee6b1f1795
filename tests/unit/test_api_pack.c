/*
 * Several small requests in one packet (src/ses/ses_pack.c): fewer packets with every request
 * completed and its data verified; order classes inside a pack; loss, reordering,
 * duplication and re-delivery executing each record exactly once; a record refused by the
 * target's protection failing alone; a malformed pack refused whole; packing off.
 * Manual clock, scripted impairments on the loop fabric.
 */
#include "unit/api_pack_world.h"
#include "unit/api_tap.h"
#include "dev/impair.h"
#include "pds/pds_int.h"
#include "wire/datagram.h"

#define N 16

static void setup_with(uint32_t pack_max)
{
    pw_setup(pack_max, 0, 2000, 11);
}

static void setup(void)
{
    setup_with(0);
}

static void teardown(void)
{
    pw_teardown();
}

/* Impairments here are on the requests' way, node 0 to node 1. */
static void impair(enum ub__impair_kind kind, uint64_t a, uint64_t b)
{
    tnet_impair(&T, 0, 1, kind, a, b);
}

static void heal(void)
{
    tnet_heal(&T, 0, 1);
}

static uint64_t tx_pkts(void)
{
    return ub__pds_stats(T.ctx[0]->eng.pds)->tx_pkts;
}

/* WRITE of len bytes from M0+off to M1+off; inline when asked. */
static void write_wr(struct ub_wr *wr, struct ub_sge *sg, uint64_t user, uint32_t flags,
                     uint32_t off, uint32_t len)
{
    pw_rma_wr(wr, sg, UB_OP_WRITE, flags, user, off, len);
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

/* Posts n receive buffers of 64 bytes at R1 + 64 * (first + i). */
static void post_recvs(uint32_t first, uint32_t n)
{
    static struct ub_sge sg[128];
    static struct ub_rwr rw[128];
    for (uint32_t i = 0; i < n; i++) {
        sg[i] = (struct ub_sge){R1 + 64 * (first + i), 64, SR};
        memset(&rw[i], 0, sizeof(rw[i]));
        rw[i].user_ctx = 1000 + first + i;
        rw[i].sge = &sg[i];
        rw[i].num_sge = 1;
        rw[i].next = i + 1 < n ? &rw[i + 1] : NULL;
    }
    assert_int_equal(ub_post_jetty_recv(T.jetty[1], &rw[0], NULL), 0);
}

/* Collects n records of node i into cr (bounded rounds). */
static void collect(uint32_t i, struct ub_cr *cr, uint32_t n)
{
    uint32_t got = 0;
    for (int round = 0; got < n && round < 200000; round++) {
        int k = ub_poll_jfc(T.jfc[i], (int)(n - got), cr + got);
        got += (uint32_t)k;
        if (!k)
            tnet_step(&T, 10000);
    }
    if (got != n) {
        struct ub__ses_stats *a = &T.ctx[0]->ses.st, *b = &T.ctx[1]->ses.st;
        print_message("got %u/%u; init pack %llu/%llu tx %llu rsp %llu stale %llu; tgt rxpack %llu "
                      "bad %llu recs %llu exec %llu badpkts %llu req %llu\n",
                      got, n, (unsigned long long)a->pack_pkts, (unsigned long long)a->pack_reqs,
                      (unsigned long long)a->tx_req_pkts, (unsigned long long)a->rx_rsp_pkts,
                      (unsigned long long)a->rx_stale_rsp, (unsigned long long)b->rx_pack_pkts,
                      (unsigned long long)b->rx_pack_bad, (unsigned long long)b->rx_pack_recs,
                      (unsigned long long)b->executed, (unsigned long long)b->rx_bad_pkts,
                      (unsigned long long)b->rx_req_pkts);
    }
    assert_int_equal(got, n);
    for (int round = 0; round < 50; round++) /* nothing more may come */
        tnet_step(&T, 10000);
    struct ub_cr extra;
    assert_int_equal(ub_poll_jfc(T.jfc[i], 1, &extra), 0);
}

/*
 * N WRITEs (half inline) and N SEND_IMMs in one post list: packed into a few packets; every
 * request completes, every byte and every receive record is right, in sending order.
 */
static void run_mixed(uint32_t pack_max, uint64_t *pkts)
{
    setup_with(pack_max);
    post_recvs(0, N);
    static struct ub_sge sg[2 * N];
    static struct ub_wr wr[2 * N];
    fill_pattern(M0, 4096, 1);
    for (uint32_t i = 0; i < N; i++) {
        write_wr(&wr[2 * i], &sg[2 * i], i, (i & 1) ? UB_WR_INLINE : 0, 8 * i, 8);
        send_wr(&wr[2 * i + 1], &sg[2 * i + 1], 100 + i, 1024 + 32 * i, 4 + i);
    }
    for (uint32_t i = 0; i + 1 < 2 * N; i++)
        wr[i].next = &wr[i + 1];
    uint64_t before = tx_pkts(), reqs = T.ctx[0]->ses.st.pack_reqs;
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr[0], NULL), 0);
    struct ub_cr cr[2 * N];
    collect(0, cr, 2 * N);
    *pkts = tx_pkts() - before;
    for (uint32_t i = 0; i < 2 * N; i++)
        assert_int_equal(cr[i].status, UB_CR_SUCCESS);
    assert_memory_equal(M1, M0, 8 * N);
    struct ub_cr rc[N];
    collect(1, rc, N);
    for (uint32_t i = 0; i < N; i++) {
        assert_int_equal(rc[i].status, UB_CR_SUCCESS);
        assert_int_equal(rc[i].opcode, UB_CR_OP_RECV);
        uint32_t b = (uint32_t)rc[i].user_ctx - 1000; /* buffers bind in sending order */
        assert_int_equal(b, i);
        assert_int_equal(rc[i].length, 4 + i);
        assert_true(rc[i].flags & UB_CR_F_IMM);
        assert_int_equal(rc[i].imm_data, (100 + i) * 3);
        assert_memory_equal(R1 + 64 * b, M0 + 1024 + 32 * i, 4 + i);
    }
    if (pack_max != UB_PACK_OFF)
        assert_int_equal(T.ctx[0]->ses.st.pack_reqs - reqs, 2 * N);
    teardown();
}

static void test_pack_fewer_packets(void **state)
{
    (void)state;
    uint64_t on, off;
    run_mixed(0, &on);
    run_mixed(UB_PACK_OFF, &off);
    print_message("packets for %u requests: packed %llu, packing off %llu\n", 2 * N,
                  (unsigned long long)on, (unsigned long long)off);
    assert_int_equal(off, 2 * N);
    assert_true(on <= 2);
}

/* Packing off: one packet per request, nothing packed, on either side. */
static void test_pack_off(void **state)
{
    (void)state;
    setup_with(UB_PACK_OFF);
    static struct ub_sge sg[N];
    static struct ub_wr wr[N];
    fill_pattern(M0, 4096, 2);
    for (uint32_t i = 0; i < N; i++) {
        write_wr(&wr[i], &sg[i], i, 0, 8 * i, 8);
        wr[i].next = i + 1 < N ? &wr[i + 1] : NULL;
    }
    uint64_t before = tx_pkts();
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr[0], NULL), 0);
    struct ub_cr cr[N];
    collect(0, cr, N);
    assert_int_equal(tx_pkts() - before, N);
    assert_memory_equal(M1, M0, 8 * N);
    assert_int_equal(T.ctx[0]->ses.st.pack_pkts, 0);
    assert_int_equal(T.ctx[1]->ses.st.rx_pack_pkts, 0);
    teardown();
}

/*
 * Order classes inside a pack. A (RO, 3 packets, alone) loses its 2nd packet; the pack behind
 * it holds B1 (NO), B2 (RO), B3 (SO), B4 (fence), B5 (NO): NO and RO run at once, SO and the
 * fence wait for A (their data stays invisible); then everything completes.
 */
static void test_pack_order(void **state)
{
    (void)state;
    setup();
    memset(M0, 0xaa, 12000);
    for (uint32_t i = 0; i < 5; i++)
        memset(M0 + 20000 + 64 * i, 0xb1 + (int)i, 8);
    struct ub_sge sa, sb[5];
    struct ub_wr a, b[5];
    write_wr(&a, &sa, 1, UB_WR_ORDER_RO, 0, 12000);
    uint32_t fl[5] = {0, UB_WR_ORDER_RO, UB_WR_ORDER_SO, UB_WR_FENCE, 0};
    for (uint32_t i = 0; i < 5; i++) {
        write_wr(&b[i], &sb[i], 10 + i, fl[i] | UB_WR_INLINE, 20000 + 64 * i, 8);
        b[i].next = i + 1 < 5 ? &b[i + 1] : NULL;
    }
    a.next = &b[0];
    /* A1 A2 A3 pack: A2 lost, every later packet (repairs) held back. */
    struct ub__impair_cfg ic;
    memset(&ic, 0, sizeof(ic));
    ub__impair_add(&ic, UB_IMPAIR_DROP_NTH, 1, 0, 0);
    ub__impair_add(&ic, UB_IMPAIR_BLACKHOLE_PKT, 4, 0, 0);
    assert_int_equal(ub__loopnet_impair(ub__loopnet_impl(T.net), 0, 1, &ic), 0);
    uint64_t packs = T.ctx[0]->ses.st.pack_pkts;
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &a, NULL), 0);
    assert_int_equal(T.ctx[0]->ses.st.pack_pkts - packs, 1);
    for (int i = 0; i < 50; i++)
        tnet_step(&T, 1000);
    assert_int_equal(M1[20000], 0xb1);     /* NO */
    assert_int_equal(M1[20064], 0xb2);     /* RO */
    assert_int_not_equal(M1[20128], 0xb3); /* SO: waits for A */
    assert_int_not_equal(M1[20192], 0xb4); /* fence: waits for everything */
    assert_int_equal(M1[20256], 0xb5);     /* NO */
    assert_int_not_equal(M1[5000], 0xaa);  /* A2 lost */
    heal();
    struct ub_cr cr[6];
    collect(0, cr, 6);
    for (uint32_t i = 0; i < 6; i++)
        assert_int_equal(cr[i].status, UB_CR_SUCCESS);
    assert_memory_equal(M1, M0, 12000);
    for (uint32_t i = 0; i < 5; i++)
        assert_int_equal(M1[20000 + 64 * i], 0xb1 + (int)i);

    /* SO WRITEs to one word in one pack: the last one wins; in-order completion holds. */
    struct ub_sge sg[8];
    struct ub_wr w[8];
    for (uint32_t i = 0; i < 8; i++) {
        memset(M0 + 30000 + 8 * i, (int)i + 1, 8);
        write_wr(&w[i], &sg[i], 50 + i, UB_WR_ORDER_SO | UB_WR_INORDER_COMP, 30000 + 8 * i, 8);
        w[i].u.rma.addr = ub_tseg_base(TS) + 40000;
        w[i].next = i + 1 < 8 ? &w[i + 1] : NULL;
    }
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &w[0], NULL), 0);
    struct ub_cr c8[8];
    collect(0, c8, 8);
    for (uint32_t i = 0; i < 8; i++) {
        assert_int_equal(c8[i].status, UB_CR_SUCCESS);
        assert_int_equal(c8[i].user_ctx, 50 + i);
    }
    assert_int_equal(M1[40000], 8);
    teardown();
}

/* ---- loss, reordering, duplication, re-delivery ------------------------------------------- */

/* Captures packed requests only; SOFTUB_PACK_CORPUS=DIR also writes them out as fuzz_pack seeds. */
static bool keep_pack(const struct ub__pds_rx *rx)
{
    if (!ub__ses_is_pack(rx->hdr))
        return false;
    const char *dir = getenv("SOFTUB_PACK_CORPUS");
    if (dir) {
        static unsigned seeds;
        char path[512];
        snprintf(path, sizeof(path), "%s/captured_%u.bin", dir, ++seeds);
        FILE *f = fopen(path, "wb");
        if (f) {
            fwrite(rx->payload, 1, rx->payload_len, f);
            fclose(f);
        }
    }
    return true;
}

static void tap_install_pack(void)
{
    tap_install(T.ctx[1], 4);
    TAP.keep = keep_pack;
}

/* One post list of 8 SENDs, 8 WRITEs and 8 FADDs on one word. */
static void post_round(uint32_t round, uint64_t *old, struct ub_sge *sg, struct ub_wr *wr)
{
    for (uint32_t i = 0; i < 8; i++) {
        uint32_t k = round * 8 + i;
        fill_pattern(M0 + 1024 + 32 * k, 8, k);
        send_wr(&wr[3 * i], &sg[3 * i], 100 + k, 1024 + 32 * k, 8);
        fill_pattern(M0 + 8 * k, 8, 77 + k);
        write_wr(&wr[3 * i + 1], &sg[3 * i + 1], 200 + k, 0, 8 * k, 8);
        memset(&wr[3 * i + 2], 0, sizeof(wr[0]));
        wr[3 * i + 2].opcode = UB_OP_ATOMIC_FADD;
        wr[3 * i + 2].flags = UB_WR_COMPLETE;
        wr[3 * i + 2].user_ctx = 300 + k;
        wr[3 * i + 2].u.atomic.tseg = TS;
        wr[3 * i + 2].u.atomic.addr = ub_tseg_base(TS) + 65536;
        wr[3 * i + 2].u.atomic.operand = 1;
        wr[3 * i + 2].u.atomic.result = &old[k];
    }
    for (uint32_t i = 0; i + 1 < 24; i++)
        wr[i].next = &wr[i + 1];
    wr[23].next = NULL;
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr[0], NULL), 0);
}

static void check_rounds(uint32_t rounds, const uint64_t *old)
{
    struct ub_cr cr[96];
    collect(0, cr, 24 * rounds);
    for (uint32_t i = 0; i < 24 * rounds; i++)
        assert_int_equal(cr[i].status, UB_CR_SUCCESS);
    struct ub_cr rc[32];
    collect(1, rc, 8 * rounds);
    for (uint32_t i = 0; i < 8 * rounds; i++) {
        assert_int_equal(rc[i].status, UB_CR_SUCCESS);
        /* Records come in execution order; buffers are bound in sending order. */
        uint32_t b = (uint32_t)rc[i].user_ctx - 1000;
        assert_int_equal(rc[i].imm_data, (100 + b) * 3);
        assert_memory_equal(R1 + 64 * b, M0 + 1024 + 32 * b, 8);
    }
    assert_memory_equal(M1, M0, 8 * 8 * rounds);
    /* Every FADD ran exactly once: the word, and every old value seen exactly once. */
    uint64_t word;
    memcpy(&word, M1 + 65536, 8);
    assert_int_equal(word, 8 * rounds);
    uint8_t seen[32] = {0};
    for (uint32_t k = 0; k < 8 * rounds; k++) {
        assert_true(old[k] < 8 * rounds);
        assert_int_equal(seen[old[k]], 0);
        seen[old[k]] = 1;
    }
}

static void test_pack_loss_reorder_dup(void **state)
{
    (void)state;
    setup();
    post_recvs(0, 32);
    static struct ub_sge sg[4][24];
    static struct ub_wr wr[4][24];
    uint64_t old[32];
    /* Pack 0 overtaken by the next 2, pack 1 duplicated 3 times, pack 2 lost, pack 3 sent
     * twice more, late. */
    struct ub__impair_cfg ic;
    memset(&ic, 0, sizeof(ic));
    ub__impair_add(&ic, UB_IMPAIR_REORDER_NTH, 0, 2, 0);
    ub__impair_add(&ic, UB_IMPAIR_DUP_NTH, 1, 3, 0);
    ub__impair_add(&ic, UB_IMPAIR_DROP_NTH, 2, 0, 0);
    ub__impair_add(&ic, UB_IMPAIR_DUP_NTH, 3, 2, 0);
    ub__impair_add(&ic, UB_IMPAIR_DELAY_NTH, 3, 30000, 0);
    assert_int_equal(ub__loopnet_impair(ub__loopnet_impl(T.net), 0, 1, &ic), 0);
    uint64_t packs = T.ctx[0]->ses.st.pack_pkts;
    for (uint32_t r = 0; r < 4; r++)
        post_round(r, old, sg[r], wr[r]);
    assert_int_equal(T.ctx[0]->ses.st.pack_pkts - packs, 4);
    check_rounds(4, old);
    heal();
    assert_true(ub__pds_stats(T.ctx[0]->eng.pds)->retx_pkts >= 1);
    teardown();
}

/* A pack delivered again through a re-established PDC: nothing runs twice, the kept
 * responses go out again. */
static void test_pack_redelivered(void **state)
{
    (void)state;
    setup();
    post_recvs(0, 8);
    tap_install_pack();
    TAP.record = true;
    static struct ub_sge sg[24];
    static struct ub_wr wr[24];
    uint64_t old[8];
    post_round(0, old, sg, wr);
    check_rounds(1, old);
    TAP.record = false;
    assert_int_equal(TAP.n, 1);
    uint64_t resent = T.ctx[1]->ses.st.rsp_resent, exec = T.ctx[1]->ses.st.executed;
    memset(M1, 0, 64); /* a stale WRITE would show here */
    tap_redeliver_buf(TAP.saved[0], TAP.saved_len[0]);
    for (int i = 0; i < 50; i++)
        tnet_step(&T, 1000);
    assert_int_equal(T.ctx[1]->ses.st.executed, exec);
    assert_int_equal(T.ctx[1]->ses.st.rsp_resent - resent, 24);
    uint64_t word;
    memcpy(&word, M1 + 65536, 8);
    assert_int_equal(word, 8);
    for (int i = 0; i < 64; i++)
        assert_int_equal(M1[i], 0);
    struct ub_cr extra;
    assert_int_equal(ub_poll_jfc(T.jfc[0], 1, &extra), 0); /* stale responses dropped */
    assert_int_equal(ub_poll_jfc(T.jfc[1], 1, &extra), 0);
    tap_free();
    teardown();
}

/* ---- protection, malformed packs ---------------------------------------------------------- */

/* A record the target refuses (out of bounds, wrong token, no write access) fails alone. */
static void test_pack_protection(void **state)
{
    (void)state;
    setup();
    ub_seg *ro;
    assert_int_equal(ub_seg_register(T.ctx[1], M1 + 500000, 4096, UB_ACCESS_READ, 2, &ro), 0);
    ub_tseg *tro = tnet_import_seg(&T, 0, ro, 2);
    ub_tseg *bad = tnet_import_seg(&T, 0, S1, 999); /* wrong token */
    static struct ub_sge sg[8];
    static struct ub_wr wr[8];
    fill_pattern(M0, 64, 5);
    for (uint32_t i = 0; i < 8; i++) {
        write_wr(&wr[i], &sg[i], i, UB_WR_INLINE, 8 * i, 8);
        wr[i].next = i + 1 < 8 ? &wr[i + 1] : NULL;
    }
    wr[2].u.rma.addr = ub_tseg_base(TS) + MEM - 4; /* crosses the end */
    wr[4].u.rma.tseg = bad;
    wr[6].u.rma.tseg = tro;
    wr[6].u.rma.addr = ub_tseg_base(tro);
    uint64_t packs = T.ctx[0]->ses.st.pack_pkts;
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr[0], NULL), 0);
    assert_int_equal(T.ctx[0]->ses.st.pack_pkts - packs, 1);
    struct ub_cr cr[8];
    collect(0, cr, 8);
    for (uint32_t i = 0; i < 8; i++) {
        uint32_t u = (uint32_t)cr[i].user_ctx;
        enum ub_cr_status want = u == 2   ? UB_CR_REM_ACCESS_ERR
                                 : u == 4 ? UB_CR_INVALID_TOKEN
                                 : u == 6 ? UB_CR_REM_ACCESS_ERR
                                          : UB_CR_SUCCESS;
        assert_int_equal(cr[i].status, want);
        if (want == UB_CR_SUCCESS)
            assert_memory_equal(M1 + 8 * u, M0 + 8 * u, 8);
        else if (u != 6)
            for (uint32_t b = 0; b < 8; b++)
                assert_int_equal(M1[8 * u + b], 0); /* untouched */
    }
    for (uint32_t b = 0; b < 8; b++)
        assert_int_equal(M1[500000 + b], 0);
    for (uint32_t b = 0; b < 4; b++)
        assert_int_equal(M1[MEM - 4 + b], 0);
    teardown();
}

/* A pack with one malformed record is refused whole (nothing runs); the intact one then
 * arrives and everything in it runs once. */
static void test_pack_malformed(void **state)
{
    (void)state;
    setup();
    tap_install_pack();
    TAP.record = true;
    TAP.swallow = true; /* PDS acknowledges it; the transaction layer never sees it */
    static struct ub_sge sg[8];
    static struct ub_wr wr[8];
    fill_pattern(M0, 64, 6);
    for (uint32_t i = 0; i < 8; i++) {
        write_wr(&wr[i], &sg[i], i, UB_WR_INLINE, 8 * i, 8);
        wr[i].next = i + 1 < 8 ? &wr[i + 1] : NULL;
    }
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr[0], NULL), 0);
    for (int i = 0; i < 20; i++)
        tnet_step(&T, 1000);
    TAP.record = false;
    assert_int_equal(TAP.n, 1);
    struct ub__wire_dgram d;
    assert_int_equal(ub__wire_parse_datagram(&d, TAP.saved[0], TAP.saved_len[0], 0), 0);
    uint8_t *bad = malloc(TAP.saved_len[0]);
    uint64_t exec = T.ctx[1]->ses.st.executed, refused = T.ctx[1]->ses.st.rx_pack_bad;
    /* The last record's length prefix one too long; then a record naming a packed record;
     * then trailing garbage. */
    uint8_t *pl = bad + d.payload_off;
    size_t off = 0, last = 0;
    int k;
    struct ub__ses_prec rec;
    memcpy(bad, TAP.saved[0], TAP.saved_len[0]);
    while ((k = ub__ses_pack_rec(pl + off, d.payload_len - off, &rec)) > 0) {
        last = off;
        off += (size_t)k;
    }
    assert_int_equal(off, d.payload_len);
    pl[last + 1]++;
    tap_redeliver_buf(bad, TAP.saved_len[0]);
    memcpy(bad, TAP.saved[0], TAP.saved_len[0]);
    pl[last + 2 + 16 + 8] |= UB_SES_TAIL_P; /* tail flags of the last record */
    tap_redeliver_buf(bad, TAP.saved_len[0]);
    memcpy(bad, TAP.saved[0], TAP.saved_len[0]);
    pl[2 + 1] = 3; /* first record: extension hlen 3 words, too short */
    tap_redeliver_buf(bad, TAP.saved_len[0]);
    free(bad);
    for (int i = 0; i < 20; i++)
        tnet_step(&T, 1000);
    assert_int_equal(T.ctx[1]->ses.st.rx_pack_bad - refused, 3);
    assert_int_equal(T.ctx[1]->ses.st.executed, exec);
    for (int i = 0; i < 64; i++)
        assert_int_equal(M1[i], 0);
    /* The intact pack: all eight run. */
    tap_redeliver_buf(TAP.saved[0], TAP.saved_len[0]);
    struct ub_cr cr[8];
    collect(0, cr, 8);
    for (uint32_t i = 0; i < 8; i++)
        assert_int_equal(cr[i].status, UB_CR_SUCCESS);
    assert_memory_equal(M1, M0, 64);
    tap_free();
    teardown();
}

/* A peer that dies: PDS fails the packed packet; every member fails with it. */
static void test_pack_failed(void **state)
{
    (void)state;
    setup();
    impair(UB_IMPAIR_BLACKHOLE_PKT, 0, 0);
    static struct ub_sge sg[N];
    static struct ub_wr wr[N];
    for (uint32_t i = 0; i < N; i++) {
        write_wr(&wr[i], &sg[i], i, 0, 8 * i, 8);
        wr[i].next = i + 1 < N ? &wr[i + 1] : NULL;
    }
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr[0], NULL), 0);
    struct ub_cr cr[N];
    uint32_t got = 0;
    for (int round = 0; got < N && round < 100000; round++) {
        int k = ub_poll_jfc(T.jfc[0], (int)(N - got), cr + got);
        got += (uint32_t)k;
        if (!k)
            tnet_step(&T, 1000000);
    }
    assert_int_equal(got, N);
    for (uint32_t i = 0; i < N; i++)
        assert_int_equal(cr[i].status, UB_CR_PEER_UNREACHABLE);
    assert_int_equal(T.ctx[0]->ses.packs.count, 0);
    heal();
    teardown();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pack_fewer_packets), cmocka_unit_test(test_pack_off),
        cmocka_unit_test(test_pack_order),         cmocka_unit_test(test_pack_loss_reorder_dup),
        cmocka_unit_test(test_pack_redelivered),   cmocka_unit_test(test_pack_protection),
        cmocka_unit_test(test_pack_malformed),     cmocka_unit_test(test_pack_failed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
