/*
 * Quiet polls (src/api/context.c, poll_quiet): after a round that found nothing to do, a
 * manual-progress udp context's polls are its device's receive alone until an API call, a
 * datagram or the engine's next deadline. They do what whole rounds would: a timer fires at
 * its deadline, not later; a datagram is taken, and its record handed out, by the poll that
 * received it; an API call ends the spell. Contexts whose rounds must run whole (automatic
 * progress, a loop fabric) have none.
 */
#include "unit/api_net_util.h"
#include "api/api.h"

#define URI   "udp://127.0.0.1:0?paths=1"
#define POLLS 200u

struct two {
    struct node a, b;
    struct peer pa, pb;             /* a's view of b, b's view of a */
    struct ub__manual_clock clk[2]; /* a's and b's once frozen (freeze) */
};

static void two_up(struct two *t, enum ub_progress_mode mode)
{
    struct ub_context_attr ca = {.progress = mode};
    t_pair(&t->a, URI, &t->b, URI, &ca, &t->pa);
    uint8_t d[NODE_DESC];
    node_export(&t->a, d);
    node_import(&t->b, d, &t->pb);
    for (uint32_t i = 0; i < 4; i++) {
        assert_int_equal(node_post_recv(&t->a, ub_jetty_jfr(t->a.jetty), i, 0, 0), 0);
        assert_int_equal(node_post_recv(&t->b, ub_jetty_jfr(t->b.jetty), i, 0, 0), 0);
    }
}

static void two_down(struct two *t)
{
    node_close(&t->a);
    node_close(&t->b);
}

static struct ub__ctx *ctx_of(struct node *n)
{
    return ub__ctx_of(n->ctx);
}

/* Polls n until it finds a record, and other (if not NULL) whenever n found nothing (a post
 * leaves its request for the poster's next round); returns the record. */
static struct ub_cr poll_until_record(struct node *n, struct node *other, uint32_t *polls)
{
    uint64_t end = t_now() + N_WAIT_NS;
    struct ub_cr cr, o;
    for (*polls = 1; ub_poll_jfc(n->jfc, 1, &cr) == 0; (*polls)++) {
        if (other)
            assert_int_equal(ub_poll_jfc(other->jfc, 1, &o), 0);
        assert_true(t_now() < end);
    }
    assert_int_equal(cr.status, UB_CR_SUCCESS);
    return cr;
}

/* One SEND from a to b and its completion at a, each side polled until done. */
static void exchange(struct two *t, uint64_t id)
{
    assert_int_equal(node_send8(&t->a, t->pa.tj, id), 0);
    uint32_t polls;
    struct ub_cr cr = poll_until_record(&t->b, &t->a, &polls);
    assert_int_equal(cr.opcode, UB_CR_OP_RECV);
    assert_int_equal(node_post_recv(&t->b, ub_jetty_jfr(t->b.jetty), (uint32_t)cr.user_ctx, 0, 0),
                     0);
    uint64_t end = t_now() + N_WAIT_NS;
    for (;;) {
        int k = ub_poll_jfc(t->a.jfc, 1, &cr);
        if (k == 1 && cr.opcode == UB_CR_OP_SEND && cr.user_ctx == id)
            break;
        ub_poll_jfc(t->b.jfc, 1, &cr); /* b's ACK and response may wait for a round */
        assert_true(t_now() < end);
    }
}

/* Empty polls of n: how many of them were quiet. */
static uint64_t quiet_polls(struct node *n, uint32_t polls)
{
    uint64_t q0 = ctx_of(n)->st_quiet;
    struct ub_cr cr;
    for (uint32_t i = 0; i < polls; i++)
        assert_int_equal(ub_poll_jfc(n->jfc, 1, &cr), 0);
    return ctx_of(n)->st_quiet - q0;
}

/* n's clock stops where it is (a manual one, moved only by the test): no deadline passes
 * while a loaded machine holds the test up, so which polls are quiet is the test's to say. */
static struct ub__manual_clock *freeze(struct two *t, struct node *n)
{
    struct ub__manual_clock *c = &t->clk[n == &t->b];
    c->now = ub__ctx_now(n->ctx);
    ctx_of(n)->clock = ub__clock_manual(c);
    return c;
}

/* A manual pair after one SEND from a to b, n's clock then frozen and n polled into a spell:
 * after the exchange's last records, at most a round or two of leftovers (the ACK a yield
 * left, a held output) before the polls are quiet. Of the quiet ones, every 1 024th round
 * is a whole one (its chores): a run of POLLS has one at most. */
static void two_quiet(struct two *t, struct node *n)
{
    two_up(t, UB_PROGRESS_MANUAL);
    exchange(t, 1);
    freeze(t, n);
    assert_true(quiet_polls(n, POLLS) >= POLLS - 3);
    assert_true(ctx_of(n)->quiet);
}

/* After an idle round every poll is quiet, and an API call (here a receive posted) ends the
 * spell: the next poll runs a whole round, and the spell starts again after it. */
static void test_spell(void **state)
{
    (void)state;
    struct two t;
    two_quiet(&t, &t.a);
    assert_int_equal(node_post_recv(&t.a, ub_jetty_jfr(t.a.jetty), 9, 0, 0), 0);
    assert_false(ctx_of(&t.a)->quiet);
    assert_int_equal(quiet_polls(&t.a, 1), 0);
    assert_true(quiet_polls(&t.a, POLLS) >= POLLS - 1);
    two_down(&t);
}

/* A datagram that arrives in a spell is taken by a quiet poll, which runs the rest of the round
 * and hands its record out at once, as a whole round would. */
static void test_datagram_ends_spell(void **state)
{
    (void)state;
    struct two t;
    two_quiet(&t, &t.b);
    uint64_t q0 = ctx_of(&t.b)->st_quiet;
    assert_int_equal(node_send8(&t.a, t.pa.tj, 2), 0);
    struct ub_cr o;
    assert_int_equal(ub_poll_jfc(t.a.jfc, 1, &o), 0); /* a's round sends the request */
    uint32_t polls;
    struct ub_cr cr = poll_until_record(&t.b, NULL, &polls);
    assert_int_equal(cr.opcode, UB_CR_OP_RECV);
    assert_false(ctx_of(&t.b)->quiet);
    /* Every poll but the one that received was quiet (or, once, the 1 024th round's). */
    uint64_t quiet = ctx_of(&t.b)->st_quiet - q0;
    assert_true(quiet + 1 == polls || quiet + 2 == polls);
    two_down(&t);
}

/* A timer due in a spell fires at its deadline and not before: a's request to b, which does
 * not answer (b is not polled), leaves a's timers armed; with a's clock a manual one, polls
 * just short of the engine's deadline stay quiet and fire nothing, the first one at it does.
 * (a's first poll after the post sends the request.) */
static void test_timer_in_spell(void **state)
{
    (void)state;
    struct two t;
    two_up(&t, UB_PROGRESS_MANUAL);
    exchange(&t, 1);
    struct ub__manual_clock *clk = freeze(&t, &t.a);
    assert_int_equal(node_send8(&t.a, t.pa.tj, 2), 0);
    struct ub_cr cr;
    for (uint32_t i = 0; i < 8 && !ctx_of(&t.a)->quiet; i++)
        assert_int_equal(ub_poll_jfc(t.a.jfc, 1, &cr), 0);
    assert_true(ctx_of(&t.a)->quiet);
    uint64_t due = ctx_of(&t.a)->quiet_until;
    assert_true(due > clk->now && due != UB_TIME_NEVER);
    uint64_t fired = t.a.ctx->eng.stats.timers_fired;
    clk->now = due - 1;
    assert_true(quiet_polls(&t.a, POLLS) >= POLLS - 1);
    assert_int_equal(t.a.ctx->eng.stats.timers_fired, fired);
    clk->now = due;
    assert_int_equal(quiet_polls(&t.a, 1), 0);
    assert_true(t.a.ctx->eng.stats.timers_fired > fired);
    two_down(&t);
}

/* Automatic progress and a loop fabric run whole rounds only. */
static void test_no_spells(void **state)
{
    (void)state;
    struct two t;
    two_up(&t, UB_PROGRESS_AUTO);
    assert_false(ctx_of(&t.a)->quiet_ok);
    two_down(&t);
    ub_loopnet *net;
    struct ub_loopnet_attr la = {.ports = 2};
    assert_int_equal(ub_loopnet_create(&la, &net), 0);
    struct ub_context_attr ca = {.progress = UB_PROGRESS_MANUAL, .loopnet = net};
    ub_context *c;
    assert_int_equal(ub_context_open("loop:0", &ca, &c), 0);
    assert_false(ub__ctx_of(c)->quiet_ok);
    assert_int_equal(ub_context_close(c), 0);
    ub_loopnet_destroy(net);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spell),
        cmocka_unit_test(test_datagram_ends_spell),
        cmocka_unit_test(test_timer_in_spell),
        cmocka_unit_test(test_no_spells),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
