/*
 * Transaction order and exactly-once execution, under a manual clock with scripted loss:
 * the A/B scenario of the design notes, fence, in-order completion, and re-delivered
 * transactions (stale WRITEs, atomics, SENDs) that must not execute twice.
 */
#include "unit/api_util.h"
#include "unit/api_tap.h"
#include "dev/impair.h"
#include "pds/pds_int.h"
#include "wire/datagram.h"

static struct tnet T;
static uint8_t *M0, *M1;
static ub_seg *S0, *S1;
static ub_tseg *TS;

static void setup(void)
{
    tnet_init(&T, 2, 0, true, false);
    tnet_mem(&T, 1 << 20, &M0, &S0, &M1, &S1);
    TS = tnet_import_seg(&T, 0, S1, 2);
    tnet_warm_up(&T, M0, S0, TS);
}

static void teardown(void)
{
    tnet_fini(&T);
    free(M0);
    free(M1);
}

/*
 * Drops the k-th packet (from 0) sent from node 0 to node 1 from now on, and, with hold, every
 * packet after the first `hold` ones too (repairs included) until heal(): however quickly PDS
 * detects the loss, the repair cannot land before the test has looked.
 */
static void drop_next_hold(uint64_t k, uint64_t hold)
{
    struct ub__impair_cfg ic;
    memset(&ic, 0, sizeof(ic));
    ub__impair_add(&ic, UB_IMPAIR_DROP_NTH, k, 0, 0);
    if (hold)
        ub__impair_add(&ic, UB_IMPAIR_BLACKHOLE_PKT, hold, 0, 0);
    assert_int_equal(ub__loopnet_impair(ub__loopnet_impl(T.net), 0, 1, &ic), 0);
}

static void drop_next(uint64_t k)
{
    drop_next_hold(k, 0);
}

static void heal(void)
{
    tnet_heal(&T, 0, 1);
}

static void write_wr(struct ub_wr *wr, struct ub_sge *sg, uint64_t user, uint32_t flags,
                     uint32_t off, uint32_t len)
{
    memset(wr, 0, sizeof(*wr));
    sg->addr = M0 + off;
    sg->len = len;
    sg->seg = S0;
    wr->opcode = UB_OP_WRITE;
    wr->flags = UB_WR_COMPLETE | flags;
    wr->user_ctx = user;
    wr->sge = sg;
    wr->num_sge = 1;
    wr->u.rma.tseg = TS;
    wr->u.rma.addr = ub_tseg_base(TS) + off;
}

/*
 * A: 3 packets, RO, its 2nd packet lost. B: one packet, posted after A, with flags b_flags.
 * Returns whether B executed (its bytes visible at the target) before A's repair.
 */
static bool ab(uint32_t a_flags, uint32_t b_flags, bool *b_completed_early)
{
    setup();
    memset(M0, 0xaa, 12000);
    memset(M0 + 20000, 0xbb, 8);
    struct ub_sge sa, sb;
    struct ub_wr a, b;
    write_wr(&a, &sa, 1, a_flags, 0, 12000);
    write_wr(&b, &sb, 2, b_flags, 20000, 8);
    a.next = &b;
    drop_next_hold(1, 4); /* A1 A2 A3 B go out first: A2 is lost, its repairs held back */
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &a, NULL), 0);
    for (int i = 0; i < 50; i++)
        tnet_step(&T, 1000);
    bool b_done = M1[20000] == 0xbb;
    assert_int_equal(M1[0], 0xaa);        /* A1: placed directly */
    assert_int_not_equal(M1[5000], 0xaa); /* A2: lost */
    struct ub_cr cr[2];
    int n = ub_poll_jfc(T.jfc[0], 2, cr);
    *b_completed_early = n == 1 && cr[0].user_ctx == 2;
    assert_true(n == 0 || *b_completed_early);
    /* The repair: A completes, then (or already) B. */
    heal();
    int got = n;
    while (got < 2) {
        int k = ub_poll_jfc(T.jfc[0], 2 - got, cr + got);
        got += k;
        if (!k)
            tnet_step(&T, 50000);
    }
    for (int i = 0; i < 2; i++)
        assert_int_equal(cr[i].status, UB_CR_SUCCESS);
    assert_memory_equal(M1, M0, 12000);
    assert_int_equal(M1[20000], 0xbb);
    if (!*b_completed_early) {
        assert_int_equal(cr[0].user_ctx, 1); /* A first */
        assert_int_equal(cr[1].user_ctx, 2);
    }
    teardown();
    return b_done;
}

static void test_ab_scenario(void **state)
{
    (void)state;
    bool early;
    /* RO B: executes while A waits for its lost packet. */
    assert_true(ab(UB_WR_ORDER_RO, UB_WR_ORDER_RO, &early));
    assert_true(early);
    /* NO B: the same. */
    assert_true(ab(UB_WR_ORDER_RO, 0, &early));
    assert_true(early);
    /* SO B: held back until A has executed; its data is not visible before. */
    assert_false(ab(UB_WR_ORDER_RO, UB_WR_ORDER_SO, &early));
    assert_false(early);
    /* SO A, RO B: an RO never passes an earlier SO. */
    assert_false(ab(UB_WR_ORDER_SO, UB_WR_ORDER_RO, &early));
    assert_false(early);
    /* SO B after a NO A: SO only waits for RO and SO. */
    assert_true(ab(0, UB_WR_ORDER_SO, &early));
    /* Fence: waits for everything earlier, NO included. */
    assert_false(ab(0, UB_WR_FENCE, &early));
    assert_false(early);
    /* In-order completion: B executes at once, but completes after A. */
    assert_true(ab(0, UB_WR_INORDER_COMP, &early));
    assert_false(early);
}

/* ---- exactly once ------------------------------------------------------------------------ */

static void test_exactly_once(void **state)
{
    (void)state;
    setup();
    tap_install(T.ctx[1], 8);
    TAP.record = true;
    struct ub_cr cr;
    struct ub_sge sg;
    struct ub_wr wr;

    /* A stale WRITE never overwrites newer data. */
    memset(M0, 1, 64);
    write_wr(&wr, &sg, 1, 0, 0, 64);
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr, NULL), 0);
    assert_int_equal(tnet_wait(&T, 0, &cr), 1);
    TAP.record = false;
    memset(M0, 2, 64);
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr, NULL), 0);
    assert_int_equal(tnet_wait(&T, 0, &cr), 1);
    tap_redeliver(0);
    for (int i = 0; i < 20; i++)
        tnet_step(&T, 1000);
    assert_int_equal(M1[0], 2);

    /* An atomic re-delivered: executes once; the kept response goes out again. */
    uint64_t *word = (uint64_t *)(void *)(M1 + 4096);
    *word = 100;
    uint64_t old = 0;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_ATOMIC_FADD;
    wr.flags = UB_WR_COMPLETE;
    wr.u.atomic.tseg = TS;
    wr.u.atomic.addr = ub_tseg_base(TS) + 4096;
    wr.u.atomic.operand = 5;
    wr.u.atomic.result = &old;
    TAP.record = true;
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr, NULL), 0);
    assert_int_equal(tnet_wait(&T, 0, &cr), 1);
    TAP.record = false;
    assert_int_equal(old, 100);
    uint64_t resent = T.ctx[1]->ses.st.rsp_resent;
    tap_redeliver(1);
    tap_redeliver(1);
    for (int i = 0; i < 20; i++)
        tnet_step(&T, 1000);
    assert_int_equal(*word, 105);
    assert_int_equal(T.ctx[1]->ses.st.rsp_resent, resent + 2);
    assert_int_equal(ub_poll_jfc(T.jfc[0], 1, &cr), 0); /* the resent answers are stale: ignored */

    /* A SEND re-delivered does not consume a second receive buffer. */
    struct ub_sge rsg[2] = {{M1 + 8192, 100, S1}, {M1 + 16384, 100, S1}};
    struct ub_rwr rw[2] = {{.user_ctx = 1, .sge = &rsg[0], .num_sge = 1},
                           {.user_ctx = 2, .sge = &rsg[1], .num_sge = 1}};
    rw[0].next = &rw[1];
    assert_int_equal(ub_post_jetty_recv(T.jetty[1], rw, NULL), 0);
    ub_tjetty *tj = tnet_import_jetty(&T, 0, 1);
    struct ub_sge ssg = {M0, 10, S0};
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_SEND;
    wr.flags = UB_WR_COMPLETE;
    wr.sge = &ssg;
    wr.num_sge = 1;
    wr.tjetty = tj;
    TAP.record = true;
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr, NULL), 0);
    assert_int_equal(tnet_wait(&T, 0, &cr), 1);
    TAP.record = false;
    assert_int_equal(tnet_wait(&T, 1, &cr), 1);
    assert_int_equal(cr.user_ctx, 1);
    tap_redeliver(2);
    for (int i = 0; i < 20; i++)
        tnet_step(&T, 1000);
    assert_int_equal(ub_poll_jfc(T.jfc[1], 1, &cr), 0);
    tap_free();
    teardown();
}

/* SENDs from one stream take receive buffers in posting order, whatever order they arrive in. */
static void test_send_order(void **state)
{
    (void)state;
    setup();
    ub_tjetty *tj = tnet_import_jetty(&T, 0, 1);
    struct ub_sge rsg[4];
    struct ub_rwr rw[4];
    memset(rw, 0, sizeof(rw));
    for (int i = 0; i < 4; i++) {
        rsg[i] = (struct ub_sge){M1 + 65536 * (i + 1), 8000, S1};
        rw[i].user_ctx = (uint64_t)i;
        rw[i].sge = &rsg[i];
        rw[i].num_sge = 1;
        rw[i].next = i < 3 ? &rw[i + 1] : NULL;
    }
    assert_int_equal(ub_post_jetty_recv(T.jetty[1], rw, NULL), 0);
    /* Message 0 has two packets and loses its first: messages 1..3 arrive before it. */
    struct ub_sge sg[4];
    struct ub_wr wr[4];
    for (int i = 0; i < 4; i++) {
        memset(M0 + 8192 * i, 'a' + i, 8000);
        sg[i] = (struct ub_sge){M0 + 8192 * i, i == 0 ? 6000u : 100u, S0};
        memset(&wr[i], 0, sizeof(wr[i]));
        wr[i].opcode = UB_OP_SEND;
        wr[i].sge = &sg[i];
        wr[i].num_sge = 1;
        wr[i].tjetty = tj;
        wr[i].next = i < 3 ? &wr[i + 1] : NULL;
    }
    drop_next(0);
    assert_int_equal(ub_post_jetty_send(T.jetty[0], wr, NULL), 0);
    struct ub_cr cr[4];
    int got = 0;
    while (got < 4) {
        int k = ub_poll_jfc(T.jfc[1], 4 - got, cr + got);
        got += k;
        if (!k)
            tnet_step(&T, 20000);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(cr[i].status, UB_CR_SUCCESS);
        /* buffer k holds message k */
        uint8_t *b = M1 + 65536 * (cr[i].user_ctx + 1);
        assert_int_equal(b[0], 'a' + (int)cr[i].user_ctx);
        assert_int_equal(cr[i].length, cr[i].user_ctx == 0 ? 6000 : 100);
    }
    /* Out-of-order arrival: message 0 completed last. */
    assert_int_equal(cr[3].user_ctx, 0);
    teardown();
}

static bool keep_small(const struct ub__pds_rx *rx)
{
    return rx->payload_len == 8;
}

/* A one-packet WRITE that waits for its turn (staged) stays findable: its packet delivered
 * again meanwhile is a duplicate, and it executes once when the earlier one completes. */
static void test_redeliver_waiting(void **state)
{
    (void)state;
    setup();
    tap_install(T.ctx[1], 8);
    TAP.keep = keep_small;
    TAP.record = true;
    memset(M0, 0xaa, 12000);
    memset(M0 + 20000, 0xbb, 8);
    struct ub_sge sa, sb;
    struct ub_wr a, b;
    write_wr(&a, &sa, 1, UB_WR_ORDER_RO, 0, 12000);
    write_wr(&b, &sb, 2, UB_WR_ORDER_SO, 20000, 8);
    a.next = &b;
    drop_next_hold(1, 4);
    uint64_t exec0 = T.ctx[1]->ses.st.executed;
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &a, NULL), 0);
    for (int i = 0; i < 50; i++)
        tnet_step(&T, 1000);
    TAP.record = false;
    assert_int_equal(TAP.n, 1);
    assert_int_not_equal(M1[20000], 0xbb); /* B waits for A */
    uint64_t dup0 = T.ctx[1]->ses.st.rx_dup_pkts;
    tap_redeliver(0);
    tap_redeliver(0);
    assert_int_equal(T.ctx[1]->ses.st.rx_dup_pkts, dup0 + 2);
    heal();
    struct ub_cr cr[3];
    int got = 0;
    for (int i = 0; i < 2000 && got < 2; i++) {
        int k = ub_poll_jfc(T.jfc[0], 2 - got, cr + got);
        got += k;
        if (!k)
            tnet_step(&T, 50000);
    }
    assert_int_equal(got, 2);
    assert_int_equal(cr[0].user_ctx, 1);
    assert_int_equal(cr[1].user_ctx, 2);
    assert_int_equal(M1[20000], 0xbb);
    for (int i = 0; i < 20; i++)
        tnet_step(&T, 1000);
    assert_int_equal(ub_poll_jfc(T.jfc[0], 1, cr), 0);
    assert_int_equal(T.ctx[1]->ses.st.executed, exec0 + 2);
    tap_free();
    teardown();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ab_scenario),
        cmocka_unit_test(test_exactly_once),
        cmocka_unit_test(test_send_order),
        cmocka_unit_test(test_redeliver_waiting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
