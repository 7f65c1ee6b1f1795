/* Tag matching: exact, ordered wildcards, unexpected messages, send order; and JFCE events. */
#include "unit/api_util.h"

static struct tnet T;
static uint8_t *M0, *M1;
static ub_seg *S0, *S1;
static ub_tjetty *TJ;

static void setup(uint32_t drop_ppm)
{
    tnet_init(&T, 2, drop_ppm, false, true);
    tnet_mem(&T, 1 << 20, &M0, &S0, &M1, &S1);
    TJ = tnet_import_jetty(&T, 0, 1);
}

static void teardown(void)
{
    tnet_fini(&T);
    free(M0);
    free(M1);
}

static void tsend(uint64_t tag, uint32_t off, uint32_t len, uint8_t fill, uint32_t flags)
{
    memset(M0 + off, fill, len);
    struct ub_sge sg = {M0 + off, len, S0};
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_TSEND;
    wr.flags = flags;
    wr.sge = &sg;
    wr.num_sge = 1;
    wr.tjetty = TJ;
    wr.u.send.tag = tag;
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr, NULL), 0);
}

static void trecv(uint64_t user, uint64_t tag, uint64_t ignore, uint32_t off, uint32_t len)
{
    struct ub_sge sg = {M1 + off, len, S1};
    struct ub_rwr rw = {.user_ctx = user, .sge = &sg, .num_sge = 1, .tag = tag, .ignore = ignore};
    assert_int_equal(ub_post_jetty_recv(T.jetty[1], &rw, NULL), 0);
}

#define recv_cr() recv_cr_(__LINE__)
static struct ub_cr recv_cr_(int line)
{
    struct ub_cr cr;
    int n = tnet_wait(&T, 1, &cr);
    if (n != 1)
        fprintf(stderr, "no receive completion (line %d)\n", line);
    assert_int_equal(n, 1);
    assert_int_equal(cr.status, UB_CR_SUCCESS);
    assert_true(cr.flags & UB_CR_F_TAG);
    return cr;
}

static void do_matching(uint32_t drop_ppm)
{
    setup(drop_ppm);
    /* Exact. */
    trecv(1, 5, 0, 0, 1000);
    tsend(5, 0, 700, 0x11, 0);
    struct ub_cr cr = recv_cr();
    assert_int_equal(cr.user_ctx, 1);
    assert_int_equal(cr.tag, 5);
    assert_int_equal(cr.length, 700);
    assert_int_equal(M1[699], 0x11);
    /* Wildcards match in posting order: the first posted buffer that matches wins. */
    trecv(2, 0x100, 0xff, 1000, 1000);
    trecv(3, 0x1ff, 0, 2000, 1000);
    tsend(0x1ff, 0, 10, 0x22, 0);
    cr = recv_cr();
    assert_int_equal(cr.user_ctx, 2);
    tsend(0x1ff, 0, 10, 0x33, 0);
    cr = recv_cr();
    assert_int_equal(cr.user_ctx, 3);
    assert_int_equal(M1[2000], 0x33);
    /* A non-matching tag waits as unexpected; unexpected messages match in send order. */
    tsend(7, 0, 100, 0x41, 0);
    tsend(7, 4096, 100, 0x42, 0);
    tsend(7, 8192, 200000, 0x43, 0); /* long: rendezvous, its eager part parked */
    for (int i = 0; i < 2000; i++)
        tnet_step(&T, 0);
    struct ub_cr x;
    assert_int_equal(ub_poll_jfc(T.jfc[1], 1, &x), 0);
    trecv(4, 7, 0, 4096, 1000);
    cr = recv_cr();
    assert_int_equal(cr.user_ctx, 4);
    assert_int_equal(M1[4096], 0x41);
    trecv(5, 0, ~0ull, 8192, 1000); /* matches anything */
    cr = recv_cr();
    assert_int_equal(M1[8192], 0x42);
    trecv(6, 7, 0, 16384, 300000);
    cr = recv_cr();
    assert_int_equal(cr.length, 200000);
    assert_int_equal(M1[16384 + 199999], 0x43);
    /* Unsignaled sends: no records (the rendezvous one completed once READ). */
    int sends = 0;
    while (ub_poll_jfc(T.jfc[0], 1, &x) == 1)
        sends++;
    assert_int_equal(sends, 0); /* unsignaled */
    teardown();
}

static void test_matching(void **state)
{
    (void)state;
    do_matching(0);
    do_matching(30000);
}

static void test_events(void **state)
{
    (void)state;
    tnet_init(&T, 2, 0, false, false);
    tnet_mem(&T, 65536, &M0, &S0, &M1, &S1);
    TJ = tnet_import_jetty(&T, 0, 1);
    /* A second jetty on node 1 whose JFC reports through an event channel. */
    ub_jfce *ce;
    assert_int_equal(ub_jfce_create(T.ctx[1], &ce), 0);
    assert_true(ub_jfce_fd(ce) >= 0);
    struct ub_jfc_attr fa = {.depth = 64, .jfce = ce};
    ub_jfc *jfc;
    assert_int_equal(ub_jfc_create(T.ctx[1], &fa, &jfc), 0);
    struct ub_jfr_attr ra = {.depth = 16, .jfc = jfc};
    ub_jfr *jfr;
    assert_int_equal(ub_jfr_create(T.ctx[1], &ra, &jfr), 0);
    uint8_t d[UB_JETTY_DESC_SIZE];
    assert_int_equal(ub_jfr_export(jfr, d, sizeof(d)), UB_JETTY_DESC_SIZE);
    ub_tjetty *tj;
    assert_int_equal(ub_jetty_import(T.ctx[0], d, sizeof(d), &tj), 0);
    struct ub_sge rsg = {M1, 100, S1};
    struct ub_rwr rw[3] = {
        {.sge = &rsg, .num_sge = 1}, {.sge = &rsg, .num_sge = 1}, {.sge = &rsg, .num_sge = 1}};
    rw[0].next = &rw[1];
    rw[1].next = &rw[2];
    assert_int_equal(ub_post_recv(jfr, rw, NULL), 0);
    assert_int_equal(ub_rearm_jfc(jfc, true), 0);
    struct ub_sge sg = {M0, 10, S0};
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_SEND;
    wr.sge = &sg;
    wr.num_sge = 1;
    wr.tjetty = tj;
    /* Not solicited: a solicited-only JFC stays quiet. */
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr, NULL), 0);
    ub_jfc *fired[4];
    for (int i = 0; i < 200; i++) {
        tnet_step(&T, 0);
        assert_int_equal(ub_wait_jfc(ce, 4, 0, fired), 0);
    }
    assert_int_equal(jfc->count, 1);
    /* Solicited: one event; the fd is readable. */
    wr.flags = UB_WR_SOLICITED;
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr, NULL), 0);
    int n = 0;
    for (int i = 0; i < 100000 && !n; i++) {
        tnet_step(&T, 0);
        n = ub_wait_jfc(ce, 4, 0, fired);
    }
    assert_int_equal(n, 1);
    assert_ptr_equal(fired[0], jfc);
    struct ub_cr cr[4];
    assert_int_equal(ub_poll_jfc(jfc, 4, cr), 2);
    assert_int_equal(ub_jfc_destroy(jfc), UB_EBUSY); /* event not acknowledged; JFR attached */
    assert_int_equal(ub_ack_jfc(jfc, 1), 0);
    /* Not rearmed: no further event. Rearmed for all: the next completion fires. */
    wr.flags = 0;
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr, NULL), 0);
    for (int i = 0; i < 200; i++) {
        tnet_step(&T, 0);
        assert_int_equal(ub_wait_jfc(ce, 4, 0, fired), 0);
    }
    assert_int_equal(ub_poll_jfc(jfc, 4, cr), 1);
    assert_int_equal(ub_rearm_jfc(jfc, false), 0);
    assert_int_equal(ub_post_recv(jfr, rw, NULL), 0);
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr, NULL), 0);
    n = 0;
    for (int i = 0; i < 100000 && !n; i++) {
        tnet_step(&T, 0);
        n = ub_wait_jfc(ce, 4, 1, fired);
    }
    assert_int_equal(n, 1);
    assert_int_equal(ub_ack_jfc(jfc, 1), 0);
    assert_int_equal(ub_jfr_destroy(jfr), 0);
    assert_int_equal(ub_poll_jfc(jfc, 4, cr), 3); /* one received, two flushed */
    assert_int_equal(ub_jfc_destroy(jfc), 0);
    assert_int_equal(ub_jfce_destroy(ce), 0);
    teardown();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matching),
        cmocka_unit_test(test_events),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
