/* Timer heap: order, tie-break, cancel, re-arm, re-arm from callbacks. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "core/clock.h"
#include "core/rand.h"
#include "core/timer.h"
#include "core/compiler.h"

struct rec {
    struct ub__timer t;
    int id;
    int *log;
    int *nlog;
    uint64_t fired_at;
    uint64_t rearm_to; /* non-zero: re-arm to this from the callback */
    struct ub__timers *ts;
};

static void on_fire(struct ub__timer *t, uint64_t now)
{
    struct rec *r = UB_CONTAINER_OF(t, struct rec, t);
    r->log[(*r->nlog)++] = r->id;
    r->fired_at = now;
    if (r->rearm_to) {
        uint64_t to = r->rearm_to;
        r->rearm_to = 0;
        assert_int_equal(ub__timer_arm(r->ts, t, to), 0);
    }
}

static void setup_recs(struct rec *r, int n, int *log, int *nlog, struct ub__timers *ts)
{
    for (int i = 0; i < n; i++) {
        ub__timer_init(&r[i].t, on_fire);
        r[i].id = i;
        r[i].log = log;
        r[i].nlog = nlog;
        r[i].rearm_to = 0;
        r[i].ts = ts;
    }
}

static void test_order_and_tiebreak(void **state)
{
    (void)state;
    struct ub__timers ts;
    assert_int_equal(ub__timers_init(&ts, 2), 0);
    struct rec r[6];
    int log[16], nlog = 0;
    setup_recs(r, 6, log, &nlog, &ts);
    assert_int_equal(ub__timers_next(&ts), UB_TIME_NEVER);
    /* Equal deadlines fire in arming order: 3 before 1 before 5. */
    uint64_t dl[6] = {50, 20, 10, 20, 40, 20};
    int order[6] = {0, 3, 1, 5, 2, 4};
    for (int i = 0; i < 6; i++)
        assert_int_equal(ub__timer_arm(&ts, &r[order[i]].t, dl[order[i]]), 0);
    assert_int_equal(ub__timers_next(&ts), 10);
    assert_int_equal(ub__timers_expire(&ts, 9), 0);
    assert_int_equal(ub__timers_expire(&ts, 20), 4);
    int want[4] = {2, 3, 1, 5};
    assert_int_equal(nlog, 4);
    assert_memory_equal(log, want, sizeof(want));
    assert_int_equal(ub__timers_next(&ts), 40);
    assert_int_equal(ub__timers_expire(&ts, 1000), 2);
    assert_int_equal(log[4], 4);
    assert_int_equal(log[5], 0);
    assert_int_equal(r[0].fired_at, 1000);
    assert_false(ub__timer_armed(&r[0].t));
    ub__timers_fini(&ts);
}

static void test_cancel_and_rearm(void **state)
{
    (void)state;
    struct ub__timers ts;
    assert_int_equal(ub__timers_init(&ts, 0), 0);
    struct rec r[3];
    int log[8], nlog = 0;
    setup_recs(r, 3, log, &nlog, &ts);
    ub__timer_arm(&ts, &r[0].t, 10);
    ub__timer_arm(&ts, &r[1].t, 20);
    ub__timer_arm(&ts, &r[2].t, 30);
    ub__timer_cancel(&ts, &r[1].t);
    ub__timer_cancel(&ts, &r[1].t);  /* twice is harmless */
    ub__timer_arm(&ts, &r[0].t, 35); /* moves, does not duplicate */
    assert_int_equal(ub__timers_next(&ts), 30);
    assert_int_equal(ub__timers_expire(&ts, 100), 2);
    assert_int_equal(nlog, 2);
    assert_int_equal(log[0], 2);
    assert_int_equal(log[1], 0);
    ub__timers_fini(&ts);
}

static void test_rearm_from_callback_terminates(void **state)
{
    (void)state;
    struct ub__timers ts;
    assert_int_equal(ub__timers_init(&ts, 0), 0);
    struct rec r[2];
    int log[8], nlog = 0;
    setup_recs(r, 2, log, &nlog, &ts);
    r[0].rearm_to = 5; /* already due when re-armed at now = 10 */
    ub__timer_arm(&ts, &r[0].t, 10);
    ub__timer_arm(&ts, &r[1].t, 10);
    assert_int_equal(ub__timers_expire(&ts, 10), 2);
    assert_true(ub__timer_armed(&r[0].t));
    assert_int_equal(ub__timers_next(&ts), 11);
    assert_int_equal(ub__timers_expire(&ts, 11), 1);
    assert_int_equal(nlog, 3);
    ub__timers_fini(&ts);
}

/* A random arm/cancel workload fires every armed timer exactly once, in (deadline, seq) order. */
static void test_random_heap_property(void **state)
{
    (void)state;
    enum { N = 2000 };
    struct ub__timers ts;
    assert_int_equal(ub__timers_init(&ts, 4), 0);
    static struct rec r[N];
    static int log[N];
    int nlog = 0;
    setup_recs(r, N, log, &nlog, &ts);
    struct ub__rng rng;
    ub__rng_seed(&rng, 7);
    int armed = 0;
    for (int i = 0; i < N; i++)
        ub__timer_arm(&ts, &r[i].t, ub__rng_below(&rng, 500));
    for (int i = 0; i < N; i += 3)
        ub__timer_cancel(&ts, &r[i].t);
    for (int i = 0; i < N; i++)
        armed += ub__timer_armed(&r[i].t);
    uint64_t last_dl = 0, last_seq = 0;
    int fired = 0;
    while (ub__timers_next(&ts) != UB_TIME_NEVER) {
        uint64_t now = ub__timers_next(&ts);
        int before = nlog;
        fired += (int)ub__timers_expire(&ts, now);
        for (int k = before; k < nlog; k++) {
            struct rec *x = &r[log[k]];
            assert_true(x->t.deadline > last_dl ||
                        (x->t.deadline == last_dl && x->t.seq > last_seq) || k == 0);
            last_dl = x->t.deadline;
            last_seq = x->t.seq;
        }
    }
    assert_int_equal(fired, armed);
    ub__timers_fini(&ts);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_tiebreak),
        cmocka_unit_test(test_cancel_and_rearm),
        cmocka_unit_test(test_rearm_from_callback_terminates),
        cmocka_unit_test(test_random_heap_property),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
