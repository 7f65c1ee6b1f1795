/* The event queue: (time, sequence) order, lazy re-arming and cancelling, run limits. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>

#include "sim/sim.h"

struct rec {
    struct ub_sim_event ev;
    uint32_t id;
    uint64_t fired_at;
    uint32_t order;
};

struct log {
    uint32_t n;
    struct rec *r;
};

static uint32_t g_order; /* test-local counter, reset by each test */

static void fire(struct ub_sim *sim, struct ub_sim_event *ev)
{
    struct rec *r = UB_SIM_CONTAINER_OF(ev, struct rec, ev);
    r->fired_at = ub_sim_now(sim);
    r->order = ++g_order;
}

static void test_order_time_then_seq(void **state)
{
    (void)state;
    struct ub_sim sim;
    assert_int_equal(ub_sim_init(&sim, 1), 0);
    enum { N = 5000 };
    struct rec *r = calloc(N, sizeof(*r));
    struct ub__rng rng;
    ub__rng_seed(&rng, 42);
    g_order = 0;
    for (uint32_t i = 0; i < N; i++) {
        ub_sim_event_init(&r[i].ev, fire);
        r[i].id = i;
        ub_sim_at(&sim, &r[i].ev, ub__rng_below(&rng, 100)); /* many ties */
    }
    assert_true(ub_sim_run(&sim, UB_SIM_NEVER));
    for (uint32_t i = 0; i < N; i++) {
        for (uint32_t j = i + 1; j < N && j < i + 50; j++) {
            /* Earlier time first; equal times in arming order. */
            if (r[i].ev.time < r[j].ev.time || (r[i].ev.time == r[j].ev.time))
                assert_true(r[i].order < r[j].order || r[i].ev.time > r[j].ev.time);
        }
        assert_int_equal(r[i].fired_at, r[i].ev.time);
    }
    uint64_t prev_t = 0;
    uint32_t *by_order = calloc(N + 1, sizeof(*by_order));
    for (uint32_t i = 0; i < N; i++)
        by_order[r[i].order] = i;
    for (uint32_t k = 1; k <= N; k++) {
        struct rec *x = &r[by_order[k]];
        assert_true(x->fired_at >= prev_t);
        if (k > 1 && x->fired_at == prev_t)
            assert_true(by_order[k] > by_order[k - 1]);
        prev_t = x->fired_at;
    }
    assert_int_equal(sim.evq.fired, N);
    free(by_order);
    free(r);
    ub_sim_fini(&sim);
}

static void test_rearm_and_cancel(void **state)
{
    (void)state;
    struct ub_sim sim;
    assert_int_equal(ub_sim_init(&sim, 1), 0);
    struct rec a = {0}, b = {0}, c = {0};
    ub_sim_event_init(&a.ev, fire);
    ub_sim_event_init(&b.ev, fire);
    ub_sim_event_init(&c.ev, fire);
    g_order = 0;
    ub_sim_at(&sim, &a.ev, 100);
    ub_sim_at(&sim, &a.ev, 300); /* later: lazy, fires once at 300 */
    ub_sim_at(&sim, &b.ev, 200);
    ub_sim_at(&sim, &b.ev, 50); /* earlier: a new entry, the old one is orphaned */
    ub_sim_at(&sim, &c.ev, 10);
    ub_sim_cancel(&c.ev);
    assert_false(ub_sim_run(&sim, 60));
    assert_int_equal(b.fired_at, 50);
    assert_int_equal(b.order, 1);
    assert_int_equal(ub_sim_now(&sim), 60);
    assert_true(ub_sim_run(&sim, UB_SIM_NEVER));
    assert_int_equal(a.fired_at, 300);
    assert_int_equal(a.order, 2);
    assert_int_equal(c.order, 0);
    assert_int_equal(sim.evq.fired, 2);
    ub_sim_fini(&sim);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_time_then_seq),
        cmocka_unit_test(test_rearm_and_cancel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
