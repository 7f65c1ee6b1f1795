/*
 * Rendezvous: messages longer than the eager threshold send an eager part; the target READs
 * the rest from the initiator's transaction once a buffer holds the message, then answers.
 * Expected and unexpected, tagged and untagged, SGLs on both sides, loss, a too-small buffer,
 * a READ that does not present the transaction's token, and a message parked at a target
 * that waits long or dies.
 */
#include "unit/api_util.h"

static struct tnet T;
static uint8_t *M0, *M1;
static ub_seg *S0, *S1;
static ub_tjetty *TJ;

#define MEM (4u << 20)
/* A message long enough for rendezvous, and the room each of several gets in memory. */
#define LONG (UB_SES_EAGER_MAX + 34464)
#define SLOT (128u << 10)

static void setup(uint32_t drop_ppm, bool tagged)
{
    tnet_init(&T, 2, drop_ppm, true, tagged);
    tnet_mem(&T, MEM, &M0, &S0, &M1, &S1);
    TJ = tnet_import_jetty(&T, 0, 1);
}

static void teardown(void)
{
    tnet_fini(&T);
    free(M0);
    free(M1);
}

/* Sends len bytes from M0+off cut into nsge SGEs (uneven), tagged or not. */
static void post_msg(bool tagged, uint64_t tag, uint32_t off, uint32_t len, uint32_t nsge,
                     uint64_t user)
{
    struct ub_sge sg[4];
    uint32_t left = len, at = off;
    for (uint32_t i = 0; i < nsge; i++) {
        uint32_t n = i + 1 == nsge ? left : left / 3 + 17 * i;
        sg[i] = (struct ub_sge){M0 + at, n, S0};
        at += n + 100; /* holes between SGEs: an SGL, not one buffer */
        left -= n;
    }
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = tagged ? UB_OP_TSEND : UB_OP_SEND;
    wr.flags = UB_WR_COMPLETE;
    wr.user_ctx = user;
    wr.sge = sg;
    wr.num_sge = nsge;
    wr.tjetty = TJ;
    wr.u.send.tag = tag;
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr, NULL), 0);
}

/* The bytes post_msg sent, gathered. */
static void sent_bytes(uint8_t *out, uint32_t off, uint32_t len, uint32_t nsge)
{
    uint32_t left = len, at = off;
    for (uint32_t i = 0; i < nsge; i++) {
        uint32_t n = i + 1 == nsge ? left : left / 3 + 17 * i;
        memcpy(out, M0 + at, n);
        out += n;
        at += n + 100;
        left -= n;
    }
}

/* A receive buffer of cap bytes at M1+off in nsge SGEs. */
static void post_buf(uint64_t tag, uint32_t off, uint32_t cap, uint32_t nsge, uint64_t user)
{
    struct ub_sge sg[4];
    uint32_t per = cap / nsge;
    for (uint32_t i = 0; i < nsge; i++)
        sg[i] = (struct ub_sge){M1 + off + i * (per + 64), i + 1 == nsge ? cap - per * i : per, S1};
    struct ub_rwr rw = {.user_ctx = user, .sge = sg, .num_sge = nsge, .tag = tag};
    assert_int_equal(ub_post_jetty_recv(T.jetty[1], &rw, NULL), 0);
}

static void got_bytes(uint8_t *out, uint32_t off, uint32_t cap, uint32_t nsge, uint32_t len)
{
    uint32_t per = cap / nsge;
    for (uint32_t i = 0; i < nsge && len; i++) {
        uint32_t n = i + 1 == nsge ? cap - per * i : per;
        if (n > len)
            n = len;
        memcpy(out, M1 + off + i * (per + 64), n);
        out += n;
        len -= n;
    }
}

static struct ub_cr wait_cr(uint32_t node)
{
    struct ub_cr cr;
    memset(&cr, 0, sizeof(cr));
    int n = 0;
    for (int i = 0; i < 200000 && !n; i++) {
        n = ub_poll_jfc(T.jfc[node], 1, &cr);
        if (!n)
            tnet_step(&T, 5000);
    }
    assert_int_equal(n, 1);
    return cr;
}

static void check_one(bool tagged, bool expected, uint32_t len, uint32_t ssge, uint32_t rsge)
{
    static uint8_t want[1 << 20], got[1 << 20];
    fill_pattern(M0, 2 << 20, len ^ ssge);
    uint64_t reads = T.ctx[1]->ses.st.rndv_reads;
    if (expected)
        post_buf(9, 0, len + 1000, rsge, 77);
    post_msg(tagged, 9, 0, len, ssge, 55);
    if (!expected) {
        /* The eager part lands and waits; the sender does not complete (nothing READ yet). */
        for (int i = 0; i < 300; i++)
            tnet_step(&T, 5000);
        struct ub_cr x;
        assert_int_equal(ub_poll_jfc(T.jfc[0], 1, &x), 0);
        assert_int_equal(ub_poll_jfc(T.jfc[1], 1, &x), 0);
        post_buf(9, 0, len + 1000, rsge, 77);
    }
    struct ub_cr r = wait_cr(1);
    assert_int_equal(r.status, UB_CR_SUCCESS);
    assert_int_equal(r.user_ctx, 77);
    assert_int_equal(r.length, len);
    if (tagged) {
        assert_true(r.flags & UB_CR_F_TAG);
        assert_int_equal(r.tag, 9);
    }
    struct ub_cr c = wait_cr(0);
    assert_int_equal(c.status, UB_CR_SUCCESS);
    assert_int_equal(c.user_ctx, 55);
    sent_bytes(want, 0, len, ssge);
    got_bytes(got, 0, len + 1000, rsge, len);
    assert_memory_equal(want, got, len);
    assert_int_equal(T.ctx[1]->ses.st.rndv_reads, reads + 1);
}

static void test_rndv_matrix(void **state)
{
    (void)state;
    for (int tagged = 0; tagged < 2; tagged++) {
        for (uint32_t drop = 0; drop <= 20000; drop += 20000) {
            setup(drop, tagged != 0);
            check_one(tagged != 0, true, 100000, 1, 1);
            check_one(tagged != 0, true, 300001, 3, 4);
            check_one(tagged != 0, true, UB_SES_EAGER_MAX + 1, 2, 1);
            if (tagged) { /* untagged without a buffer: deferral, test_api_defer.c */
                check_one(true, false, 200000, 4, 2);
                check_one(true, false, 1 << 19, 1, 3);
            }
            assert_int_equal(T.ctx[1]->ses.st.rndv_done, T.ctx[1]->ses.st.rndv_reads);
            teardown();
        }
    }
}

/* Several unexpected rendezvous messages, matched in send order by later buffers. */
static void test_rndv_unexpected_order(void **state)
{
    (void)state;
    setup(10000, true);
    for (uint32_t i = 0; i < 4; i++) {
        memset(M0 + i * SLOT, 'a' + (int)i, LONG);
        struct ub_sge sg = {M0 + i * SLOT, LONG, S0};
        struct ub_wr wr;
        memset(&wr, 0, sizeof(wr));
        wr.opcode = UB_OP_TSEND;
        wr.user_ctx = i;
        wr.flags = UB_WR_COMPLETE;
        wr.sge = &sg;
        wr.num_sge = 1;
        wr.tjetty = TJ;
        wr.u.send.tag = 3;
        assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr, NULL), 0);
    }
    for (int i = 0; i < 500; i++)
        tnet_step(&T, 5000);
    for (uint32_t i = 0; i < 4; i++)
        post_buf(3, i * SLOT, LONG + 10000, 1, 100 + i);
    for (uint32_t i = 0; i < 4; i++) {
        struct ub_cr r = wait_cr(1);
        assert_int_equal(r.status, UB_CR_SUCCESS);
        uint32_t b = (uint32_t)(r.user_ctx - 100);
        assert_int_equal(M1[b * SLOT], 'a' + (int)b); /* buffer k holds message k */
        assert_int_equal(M1[b * SLOT + LONG - 1], 'a' + (int)b);
    }
    for (uint32_t i = 0; i < 4; i++)
        assert_int_equal(wait_cr(0).status, UB_CR_SUCCESS);
    assert_int_equal(T.ctx[1]->ses.st.rndv_reads, 4);
    teardown();
}

/* Too small a buffer: the receiver sees a local length error, the sender a remote one. */
static void test_rndv_too_long(void **state)
{
    (void)state;
    setup(0, true);
    post_buf(1, 0, LONG - 10000, 1, 5);
    post_msg(true, 1, 0, LONG, 1, 6);
    struct ub_cr r = wait_cr(1);
    assert_int_equal(r.status, UB_CR_LOC_LEN_ERR);
    struct ub_cr c = wait_cr(0);
    assert_int_equal(c.status, UB_CR_REM_LEN_ERR);
    assert_int_equal(T.ctx[1]->ses.st.rndv_reads, 0); /* nothing READ for nothing */
    teardown();
}

/* A READ that does not present the transaction's token (or names another JFS) is refused. */
static void test_rndv_token(void **state)
{
    (void)state;
    setup(0, true);
    fill_pattern(M0, 100000, 5);
    post_msg(true, 4, 0, 100000, 1, 8);
    for (int i = 0; i < 300; i++)
        tnet_step(&T, 5000);
    /* Find the parked message's transaction at the initiator. */
    ub_jfs *jfs = ub_jetty_jfs(T.jetty[0]);
    struct ub__wr *w = NULL;
    for (uint32_t i = 0; i < jfs->attr.depth; i++)
        if (jfs->wrs[i].state == WR_ACTIVE)
            w = &jfs->wrs[i];
    assert_non_null(w);
    assert_true(w->parked);
    struct ub__ses_std q;
    memset(&q, 0, sizeof(q));
    q.opcode = UB_SES_OP_READ;
    q.flags = UB_SES_F_SOM | UB_SES_F_EOM;
    q.pid_on_fep = (uint16_t)(jfs->id >> 12);
    q.resource_index = (uint16_t)(jfs->id & 0xfff);
    q.buffer_offset = 0;
    q.request_length = 100000;
    q.mem_key = w->rndv_token ^ 1; /* wrong token */
    struct ub__ses_tail t = {0, 0, 999, UB_SES_TAIL_R << 24};
    uint64_t bad = T.ctx[0]->ses.st.rx_bad_pkts;
    uint64_t now = ub__ctx_now(T.ctx[1]);
    assert_int_equal(
        ub__ses_send_ctl(&T.ctx[1]->ses, &T.ctx[0]->addr, &q, w->os->id, w->seq, &t, 0, now), 0);
    q.mem_key = w->rndv_token; /* right token, another JFS */
    q.resource_index ^= 1;
    assert_int_equal(
        ub__ses_send_ctl(&T.ctx[1]->ses, &T.ctx[0]->addr, &q, w->os->id, w->seq, &t, 0, now), 0);
    for (int i = 0; i < 100; i++)
        tnet_step(&T, 5000);
    assert_int_equal(T.ctx[0]->ses.st.rx_bad_pkts, bad + 2);
    assert_int_equal(T.ctx[0]->ses.st.rndv_served_pkts, 0);
    assert_true(T.ctx[1]->ses.st.rx_stale_rsp >= 2); /* refusals for a read nobody issued */
    /* The real one goes through. */
    post_buf(4, 0, 100000, 2, 9);
    assert_int_equal(wait_cr(1).status, UB_CR_SUCCESS);
    assert_int_equal(wait_cr(0).status, UB_CR_SUCCESS);
    assert_memory_equal(M1, M0, 50000);
    teardown();
}

/* The initiator's record for a message parked at the target, polled while time moves on in
 * steps of 1 ms for at most ms milliseconds: its status, or NONE; the ms it took in *took. */
#define NONE (-1)
static int park_wait(uint32_t ms, uint32_t *took)
{
    struct ub_cr cr;
    for (uint32_t i = 0; i < ms; i++) {
        if (ub_poll_jfc(T.jfc[0], 1, &cr) == 1) {
            assert_int_equal(cr.user_ctx, 6);
            *took = i;
            return (int)cr.status;
        }
        tnet_step(&T, 1000000);
    }
    *took = ms;
    return NONE;
}

/* A receiver that posts its buffer ten seconds late: the parked message waits for it (the
 * target says PENDING again every half second, and the initiator takes that as word). */
static void test_rndv_parked_long(void **state)
{
    (void)state;
    setup(0, true);
    fill_pattern(M0, LONG, 3);
    post_msg(true, 2, 0, LONG, 1, 6);
    uint32_t took;
    assert_int_equal(park_wait(10000, &took), NONE);
    uint64_t refresh = T.ctx[1]->ses.st.rndv_park_refresh;
    assert_true(refresh >= 19 && refresh <= 20); /* every 500 ms of the 10 s */
    post_buf(2, 0, LONG, 1, 7);
    assert_int_equal(wait_cr(1).status, UB_CR_SUCCESS);
    assert_int_equal(park_wait(1000, &took), UB_CR_SUCCESS);
    assert_memory_equal(M1, M0, LONG);
    assert_int_equal(T.ctx[0]->ses.st.rsp_timeouts, 0);
    teardown();
}

/* A message parked at node 1 for ms milliseconds, then node `dies` gone (its context closed,
 * its messages never answered). */
static void park_then_close(uint32_t ms, uint32_t dies)
{
    setup(0, true);
    post_msg(true, 2, 0, LONG, 1, 6);
    uint32_t took;
    assert_int_equal(park_wait(ms, &took), NONE);
    assert_false(ub__list_empty(&ub_jetty_jfr(T.jetty[1])->unexpected));
    assert_int_equal(ub_context_close(T.ctx[dies]), 0);
    T.ctx[dies] = NULL;
}

/* A target that dies while it holds a parked message: the initiator's record says so within
 * the bound on a parked message, not never. */
static void test_rndv_parked_target_dies(void **state)
{
    (void)state;
    park_then_close(1200, 1); /* parked, said again twice */
    uint32_t took;
    /* The last PENDING came 1 000 ms after the first, 200 ms before the close. */
    assert_int_equal(park_wait(5000, &took), UB_CR_PEER_UNREACHABLE);
    assert_true(took >= 1750 && took <= 1850);
    assert_int_equal(T.ctx[0]->ses.st.rsp_timeouts, 1);
    teardown();
}

/* A sender that dies while its message is parked: the target's PENDING to it fails at PDS,
 * and the target lets go of the message (its bytes could never be READ), so that a buffer
 * posted later waits for a live one. */
static void test_rndv_parked_sender_dies(void **state)
{
    (void)state;
    park_then_close(100, 0);
    ub_jfr *jfr = ub_jetty_jfr(T.jetty[1]);
    struct ub__ses_stats *st = &T.ctx[1]->ses.st;
    uint32_t ms = 0;
    for (; ms < 10000 && !st->rndv_park_dropped; ms++)
        tnet_step(&T, 1000000);
    /* The next PENDING, 400 ms on, and PDS's retries to the dead sender (here ~1.4 s). */
    assert_int_equal(st->rndv_park_dropped, 1);
    assert_true(ms >= 400 && ms < 3000);
    assert_true(ub__list_empty(&jfr->unexpected));
    post_buf(2, 0, LONG, 1, 7);
    for (int i = 0; i < 1000; i++)
        tnet_step(&T, 1000000);
    struct ub_cr cr;
    assert_int_equal(ub_poll_jfc(T.jfc[1], 1, &cr), 0);
    teardown();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rndv_matrix),
        cmocka_unit_test(test_rndv_unexpected_order),
        cmocka_unit_test(test_rndv_too_long),
        cmocka_unit_test(test_rndv_token),
        cmocka_unit_test(test_rndv_parked_long),
        cmocka_unit_test(test_rndv_parked_target_dies),
        cmocka_unit_test(test_rndv_parked_sender_dies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
