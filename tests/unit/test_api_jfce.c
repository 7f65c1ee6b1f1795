/*
 * The JFCE fd of a waiter that drives its context: what ub_wait_jfc takes from its own round
 * never touches the fd; what it leaves (more events than `max`) makes the fd readable for
 * whoever else watches it, and the fd is quiet again once the last event is taken.
 */
#include <poll.h>

#include "ses/ses.h"
#include "unit/api_util.h"

struct rig {
    struct tnet t;
    ub_jfce *e;
    ub_jfc *x, *y;
    ub_jetty *jx, *jy;
    ub_tjetty *to1;
};

static ub_jetty *jetty_on(ub_context *ctx, ub_jfc *jfc)
{
    struct ub_jetty_attr ja;
    memset(&ja, 0, sizeof(ja));
    ja.jfs.depth = 8;
    ja.jfs.jfc = jfc;
    ja.jfr.depth = 8;
    ja.jfr.jfc = jfc;
    ub_jetty *j;
    assert_int_equal(ub_jetty_create(ctx, &ja, &j), 0);
    return j;
}

static void rig_init(struct rig *r)
{
    tnet_init(&r->t, 2, 0, true, false);
    ub_context *c0 = r->t.ctx[0];
    assert_int_equal(ub_jfce_create(c0, &r->e), 0);
    struct ub_jfc_attr fa = {.depth = 64, .jfce = r->e};
    assert_int_equal(ub_jfc_create(c0, &fa, &r->x), 0);
    assert_int_equal(ub_jfc_create(c0, &fa, &r->y), 0);
    r->jx = jetty_on(c0, r->x);
    r->jy = jetty_on(c0, r->y);
    r->to1 = tnet_import_jetty(&r->t, 0, 1);
}

static void rig_fini(struct rig *r)
{
    assert_int_equal(ub_jetty_destroy(r->jx), 0);
    assert_int_equal(ub_jetty_destroy(r->jy), 0);
    assert_int_equal(ub_jfc_destroy(r->x), 0);
    assert_int_equal(ub_jfc_destroy(r->y), 0);
    assert_int_equal(ub_jfce_destroy(r->e), 0);
    tnet_fini(&r->t);
}

/* An empty SEND from jetty j to node 1 (with its receive): posted, not yet sent. */
static void post_req(struct rig *r, ub_jetty *j, uint64_t id)
{
    struct ub_rwr rw = {.user_ctx = id};
    assert_int_equal(ub_post_jetty_recv(r->t.jetty[1], &rw, NULL), 0);
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_SEND;
    wr.flags = UB_WR_COMPLETE;
    wr.user_ctx = id;
    wr.tjetty = r->to1;
    assert_int_equal(ub_post_jetty_send(j, &wr, NULL), 0);
}

/* Node 0 sends what was posted, node 1 receives n messages and answers; node 0 is not driven
 * after that, so the answers wait for node 0's next round. */
static void serve(struct rig *r, int n)
{
    ub_progress(r->t.ctx[0]);
    struct ub_cr cr;
    int got = 0;
    for (int i = 0; i < 1000 && got < n; i++) {
        r->t.mclock.now += 10000;
        got += ub_poll_jfc(r->t.jfc[1], 1, &cr);
    }
    assert_int_equal(got, n);
    for (int i = 0; i < 10; i++) { /* past the target's ACK delay: the answers are out */
        r->t.mclock.now += 10000;
        ub_progress(r->t.ctx[1]);
    }
}

static bool fd_readable(const ub_jfce *e)
{
    struct pollfd p = {.fd = ub_jfce_fd(e), .events = POLLIN};
    return poll(&p, 1, 0) == 1;
}

static void take_record(ub_jfc *jfc, uint64_t id)
{
    struct ub_cr cr;
    assert_int_equal(ub_poll_jfc(jfc, 1, &cr), 1);
    assert_int_equal(cr.status, UB_CR_SUCCESS);
    assert_int_equal(cr.user_ctx, id);
    assert_int_equal(ub_ack_jfc(jfc, 1), 0);
}

static void test_waiter_takes_its_round(void **state)
{
    (void)state;
    struct rig r;
    rig_init(&r);
    ub_jfc *got[4];

    /* One event, fired and taken inside the waiter's round: the fd is never written. */
    assert_int_equal(ub_rearm_jfc(r.x, false), 0);
    post_req(&r, r.jx, 1);
    serve(&r, 1);
    assert_false(fd_readable(r.e));
    assert_int_equal(ub_wait_jfc(r.e, 4, 0, got), 1);
    assert_ptr_equal(got[0], r.x);
    assert_int_equal(r.e->signals, 0);
    assert_false(fd_readable(r.e));
    take_record(r.x, 1);

    /* Two events in one round, room for one: the other is left, and the fd says so. */
    assert_int_equal(ub_rearm_jfc(r.x, false), 0);
    assert_int_equal(ub_rearm_jfc(r.y, false), 0);
    post_req(&r, r.jx, 2);
    post_req(&r, r.jy, 3);
    serve(&r, 2);
    assert_int_equal(ub_wait_jfc(r.e, 1, 0, got), 1);
    ub_jfc *first = got[0];
    assert_int_equal(r.e->signals, 1);
    assert_true(fd_readable(r.e));
    assert_int_equal(ub_wait_jfc(r.e, 1, 0, got), 1);
    assert_true(got[0] != first && (got[0] == r.x || got[0] == r.y));
    assert_int_equal(r.e->signals, 1);
    assert_false(fd_readable(r.e));
    take_record(r.x, 2);
    take_record(r.y, 3);

    /* An event fired in a round someone else ran (here ub_progress) writes the fd at once. */
    assert_int_equal(ub_rearm_jfc(r.y, false), 0);
    post_req(&r, r.jy, 4);
    serve(&r, 1);
    ub_progress(r.t.ctx[0]);
    assert_int_equal(r.e->signals, 2);
    assert_true(fd_readable(r.e));
    assert_int_equal(ub_wait_jfc(r.e, 4, 0, got), 1);
    assert_ptr_equal(got[0], r.y);
    assert_false(fd_readable(r.e));
    take_record(r.y, 4);
    rig_fini(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_waiter_takes_its_round),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
