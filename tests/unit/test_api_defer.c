/*
 * Deferrable send and the transaction-level bounds, under a manual clock:
 *  - a message to a JFR without a buffer is deferred (the sender pauses, no blind retries)
 *    and restarted by DEFER_RTR when a buffer is posted; large ones too (rendezvous);
 *  - no buffer within the deferral bound: UB_CR_RNR;
 *  - a target that acknowledged a request and then never answers: the request completes
 *    with UB_CR_PEER_UNREACHABLE within the response bound;
 *  - a peer that PDS declares failed fails every pending request to it, on any JFS.
 */
#include "unit/api_util.h"
#include "dev/impair.h"
#include "pds/pds_int.h"

static struct tnet T;
static uint8_t *M0, *M1;
static ub_seg *S0, *S1;
static ub_tjetty *TJ;

static void setup(uint32_t drop_ppm)
{
    tnet_init(&T, 2, drop_ppm, true, false);
    tnet_mem(&T, 1 << 20, &M0, &S0, &M1, &S1);
    TJ = tnet_import_jetty(&T, 0, 1);
}

static void teardown(void)
{
    tnet_fini(&T);
    free(M0);
    free(M1);
}

static void send_on(ub_jfs *jfs, uint32_t len, uint64_t user)
{
    struct ub_sge sg = {M0, len, S0};
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_SEND;
    wr.flags = UB_WR_COMPLETE;
    wr.user_ctx = user;
    wr.sge = &sg;
    wr.num_sge = 1;
    wr.tjetty = TJ;
    assert_int_equal(ub_post_send(jfs, &wr, NULL), 0);
}

static void post_buf(uint32_t cap, uint64_t user)
{
    struct ub_sge sg = {M1, cap, S1};
    struct ub_rwr rw = {.user_ctx = user, .sge = &sg, .num_sge = 1};
    assert_int_equal(ub_post_jetty_recv(T.jetty[1], &rw, NULL), 0);
}

/* Steps (step_ns each) until node's JFC yields a record; returns the manual time it took. */
static uint64_t wait_cr(uint32_t node, struct ub_cr *cr, uint64_t step_ns)
{
    uint64_t t0 = T.mclock.now;
    for (int i = 0; i < 1000000; i++) {
        if (ub_poll_jfc(T.jfc[node], 1, cr) == 1)
            return T.mclock.now - t0;
        tnet_step(&T, step_ns);
    }
    fail_msg("no completion on node %u", node);
    return 0;
}

static void do_deferred_late_buffer(uint32_t len, uint32_t drop_ppm)
{
    setup(drop_ppm);
    fill_pattern(M0, len, len);
    send_on(ub_jetty_jfs(T.jetty[0]), len, 1);
    for (int i = 0; i < 200; i++)
        tnet_step(&T, 10000);
    /* Deferred, paused: no completion, no retries while no buffer comes. */
    struct ub_cr cr;
    assert_int_equal(ub_poll_jfc(T.jfc[0], 1, &cr), 0);
    assert_int_equal(T.ctx[1]->ses.st.deferred_sent, 1);
    uint64_t pkts = T.ctx[0]->ses.st.tx_req_pkts;
    for (int i = 0; i < 200; i++)
        tnet_step(&T, 100000); /* 20 ms of silence */
    assert_int_equal(T.ctx[0]->ses.st.tx_req_pkts, pkts);
    assert_int_equal(T.ctx[0]->ses.st.rnr_retries, 0);
    /* The buffer comes: DEFER_RTR, the message goes again and lands. */
    post_buf(len + 100, 7);
    assert_int_equal(T.ctx[1]->ses.st.rtr_sent, 1);
    wait_cr(1, &cr, 10000);
    assert_int_equal(cr.status, UB_CR_SUCCESS);
    assert_int_equal(cr.user_ctx, 7);
    assert_int_equal(cr.length, len);
    assert_memory_equal(M1, M0, len);
    wait_cr(0, &cr, 10000);
    assert_int_equal(cr.status, UB_CR_SUCCESS);
    assert_int_equal(T.ctx[0]->ses.st.defer_restarts, 1);
    teardown();
}

static void test_deferred_late_buffer(void **state)
{
    (void)state;
    do_deferred_late_buffer(1000, 0);
    do_deferred_late_buffer(100000, 0); /* rendezvous, deferred */
    do_deferred_late_buffer(1000, 30000);
    do_deferred_late_buffer(100000, 30000);
}

static void test_deferred_timeout(void **state)
{
    (void)state;
    setup(0);
    struct ub_jfs_attr ja = {.depth = 8, .jfc = T.jfc[0], .defer_timeout_ms = 5};
    ub_jfs *jfs;
    assert_int_equal(ub_jfs_create(T.ctx[0], &ja, &jfs), 0);
    send_on(jfs, 500, 3);
    struct ub_cr cr;
    uint64_t took = wait_cr(0, &cr, 50000);
    assert_int_equal(cr.status, UB_CR_RNR);
    assert_int_equal(cr.user_ctx, 3);
    assert_true(took >= 5000000);
    assert_true(took <= 5000000 + 200000);
    /* A buffer posted later wakes a sender that is gone: nothing happens, nothing breaks. */
    post_buf(1000, 4);
    for (int i = 0; i < 100; i++)
        tnet_step(&T, 10000);
    assert_int_equal(ub_poll_jfc(T.jfc[0], 1, &cr), 0);
    /* And the buffer is still there for the next message. */
    send_on(jfs, 500, 5);
    wait_cr(0, &cr, 10000);
    assert_int_equal(cr.status, UB_CR_SUCCESS);
    teardown();
}

/* ---- the target dies after acknowledging ----------------------------------------------- */

struct mute {
    const struct ub__pds_upcalls *up;
    void *arg;
    bool on;
};
static struct mute MUTE;

/* The target's PDS acknowledges, but its transaction layer has "died": nothing executes. */
static void mute_deliver(void *arg, const struct ub__pds_rx *rx, uint64_t now)
{
    (void)arg;
    if (!MUTE.on)
        MUTE.up->deliver(MUTE.arg, rx, now);
}

static void mute_acked(void *arg, uint64_t c, uint64_t now)
{
    (void)arg;
    MUTE.up->acked(MUTE.arg, c, now);
}

static void mute_failed(void *arg, uint64_t c, int err, uint64_t now)
{
    (void)arg;
    MUTE.up->failed(MUTE.arg, c, err, now);
}

static const struct ub__pds_upcalls mute_up = {
    .deliver = mute_deliver, .acked = mute_acked, .failed = mute_failed};

static void mute_target(bool on)
{
    struct ub__pds *pds = T.ctx[1]->eng.pds;
    if (on) {
        MUTE.up = pds->up;
        MUTE.arg = pds->up_arg;
        ub__pds_set_upcalls(pds, &mute_up, NULL);
    } else {
        ub__pds_set_upcalls(pds, MUTE.up, MUTE.arg);
    }
    MUTE.on = on;
}

static void test_response_timeout(void **state)
{
    (void)state;
    setup(0);
    T.ctx[0]->ses.rsp_timeout_ns = 3000000; /* 3 ms (ub_context_attr.rsp_timeout_ms) */
    ub_tseg *ts = tnet_import_seg(&T, 0, S1, 2);
    mute_target(true);
    uint64_t acks = ub__pds_stats(T.ctx[0]->eng.pds)->acks_rx;
    /* A READ, an atomic, a SEND: PDS acknowledges each, no response ever comes. */
    struct ub_sge sg = {M0, 100, S0};
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_READ;
    wr.flags = UB_WR_COMPLETE;
    wr.user_ctx = 1;
    wr.sge = &sg;
    wr.num_sge = 1;
    wr.u.rma.tseg = ts;
    wr.u.rma.addr = ub_tseg_base(ts);
    uint64_t old;
    struct ub_wr amo;
    memset(&amo, 0, sizeof(amo));
    amo.opcode = UB_OP_ATOMIC_FADD;
    amo.flags = UB_WR_COMPLETE;
    amo.user_ctx = 2;
    amo.u.atomic.tseg = ts;
    amo.u.atomic.addr = ub_tseg_base(ts) + 64;
    amo.u.atomic.operand = 1;
    amo.u.atomic.result = &old;
    wr.next = &amo;
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr, NULL), 0);
    send_on(ub_jetty_jfs(T.jetty[0]), 100, 3);
    struct ub_cr cr;
    uint64_t took = wait_cr(0, &cr, 20000);
    assert_true(ub__pds_stats(T.ctx[0]->eng.pds)->acks_rx > acks); /* PDS did deliver */
    assert_int_equal(cr.status, UB_CR_PEER_UNREACHABLE);
    assert_true(took >= 3000000 && took <= 3000000 + 200000);
    for (int i = 0; i < 2; i++) {
        wait_cr(0, &cr, 20000);
        assert_int_equal(cr.status, UB_CR_PEER_UNREACHABLE);
    }
    assert_int_equal(T.ctx[0]->ses.st.rsp_timeouts, 3);
    /* The target comes back to life: the next request opens a new stream and works. */
    mute_target(false);
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &amo, NULL), 0);
    wait_cr(0, &cr, 20000);
    assert_int_equal(cr.status, UB_CR_SUCCESS);
    teardown();
}

/* A response bound does not cut short a long transfer that makes progress. */
static void test_response_timeout_progress(void **state)
{
    (void)state;
    setup(0);
    T.ctx[0]->ses.rsp_timeout_ns = 30000; /* far shorter than the transfer */
    ub_tseg *ts = tnet_import_seg(&T, 0, S1, 2);
    struct ub_sge sg = {M0, 900000, S0};
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_READ;
    wr.flags = UB_WR_COMPLETE;
    wr.sge = &sg;
    wr.num_sge = 1;
    wr.u.rma.tseg = ts;
    wr.u.rma.addr = ub_tseg_base(ts);
    fill_pattern(M1, 900000, 11);
    /* Every answer takes 20 us, more than half the bound: only progress keeps it alive. */
    struct ub__impair_cfg ic;
    memset(&ic, 0, sizeof(ic));
    ic.delay_ns = 20000;
    ic.fifo = true;
    assert_int_equal(ub__loopnet_impair(ub__loopnet_impl(T.net), 1, 0, &ic), 0);
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr, NULL), 0);
    struct ub_cr cr;
    uint64_t took = wait_cr(0, &cr, 20000);
    assert_int_equal(cr.status, UB_CR_SUCCESS);
    assert_true(took > 3 * 30000);
    assert_memory_equal(M0, M1, 900000);
    teardown();
}

/* PDS gives up on a peer: every request pending to it fails, on every JFS, at once. */
static void test_peer_failure_fails_all(void **state)
{
    (void)state;
    setup(0);
    T.ctx[0]->ses.rsp_timeout_ns = 60ull * 1000000000ull; /* the response bound is not it */
    ub_tseg *ts = tnet_import_seg(&T, 0, S1, 2);
    struct ub_jfs_attr ja = {.depth = 8, .jfc = T.jfc[0]};
    ub_jfs *other;
    assert_int_equal(ub_jfs_create(T.ctx[0], &ja, &other), 0);
    mute_target(true);
    struct ub_sge sg = {M0, 100, S0};
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_READ;
    wr.flags = UB_WR_COMPLETE;
    wr.user_ctx = 1;
    wr.sge = &sg;
    wr.num_sge = 1;
    wr.u.rma.tseg = ts;
    wr.u.rma.addr = ub_tseg_base(ts);
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr, NULL), 0);
    for (int i = 0; i < 100; i++) /* delivered and acknowledged; waits for its response */
        tnet_step(&T, 10000);
    struct ub_cr cr;
    assert_int_equal(ub_poll_jfc(T.jfc[0], 1, &cr), 0);
    /* The target dies for good; a request on another JFS finds out. */
    mute_target(false);
    assert_int_equal(ub_context_close(T.ctx[1]), 0);
    T.ctx[1] = NULL;
    wr.opcode = UB_OP_WRITE;
    wr.user_ctx = 2;
    assert_int_equal(ub_post_send(other, &wr, NULL), 0);
    uint64_t took = wait_cr(0, &cr, 50000);
    assert_int_equal(cr.status, UB_CR_PEER_UNREACHABLE);
    struct ub_cr cr2;
    assert_int_equal(ub_poll_jfc(T.jfc[0], 1, &cr2), 1);
    assert_int_equal(cr2.status, UB_CR_PEER_UNREACHABLE);
    assert_int_equal(cr.user_ctx + cr2.user_ctx, 3); /* both: the READ did not wait 60 s */
    assert_true(took < 10ull * 1000000000ull);
    assert_int_equal(T.ctx[0]->ses.st.rsp_timeouts, 0);
    assert_true(T.ctx[0]->ses.st.peer_failed >= 1);
    teardown();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deferred_late_buffer),
        cmocka_unit_test(test_deferred_timeout),
        cmocka_unit_test(test_response_timeout),
        cmocka_unit_test(test_response_timeout_progress),
        cmocka_unit_test(test_peer_failure_fails_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
