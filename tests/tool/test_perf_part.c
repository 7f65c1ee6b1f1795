/*
 * softub-perf's parting of the two processes (tools/perf_run.c perf_part): a client on the
 * server's CPU moves to another CPU of its set and keeps its set; on another CPU, or with
 * nowhere else to go, it stays.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "perf.h"

/* The first two CPUs of this process's set, or skip (one CPU: nothing to part). */
static void two_cpus(cpu_set_t *own, int *a, int *b)
{
    assert_int_equal(sched_getaffinity(0, sizeof(*own), own), 0);
    *a = *b = -1;
    for (int c = 0; c < CPU_SETSIZE && *b < 0; c++) {
        if (!CPU_ISSET((size_t)c, own))
            continue;
        if (*a < 0)
            *a = c;
        else
            *b = c;
    }
    if (*b < 0)
        skip();
}

static void pin(int cpu)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET((size_t)cpu, &one);
    assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
}

static void test_moves_off_the_shared_cpu(void **state)
{
    (void)state;
    cpu_set_t own, now;
    int a, b;
    two_cpus(&own, &a, &b);
    cpu_set_t pair;
    CPU_ZERO(&pair);
    CPU_SET((size_t)a, &pair);
    CPU_SET((size_t)b, &pair);
    /* On a with both allowed (the scheduler may move it on its own in between: try again). */
    for (int i = 0; i < 10; i++) {
        pin(a);
        assert_int_equal(sched_setaffinity(0, sizeof(pair), &pair), 0);
        if (sched_getcpu() == a)
            break;
    }
    assert_int_equal(sched_getcpu(), a);
    assert_true(perf_part((uint32_t)a));
    assert_int_equal(sched_getcpu(), b);
    /* Its set is its own again. */
    assert_int_equal(sched_getaffinity(0, sizeof(now), &now), 0);
    assert_true(CPU_EQUAL(&now, &pair));
    assert_int_equal(sched_setaffinity(0, sizeof(own), &own), 0);
}

static void test_stays_elsewhere_or_alone(void **state)
{
    (void)state;
    cpu_set_t own;
    int a, b;
    two_cpus(&own, &a, &b);
    pin(a);
    assert_false(perf_part((uint32_t)b)); /* the server is elsewhere */
    assert_false(perf_part((uint32_t)a)); /* one CPU allowed: nowhere to go */
    assert_int_equal(sched_getcpu(), a);
    assert_false(perf_part(UINT32_MAX)); /* a server that could not say */
    assert_int_equal(sched_setaffinity(0, sizeof(own), &own), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_moves_off_the_shared_cpu),
        cmocka_unit_test(test_stays_elsewhere_or_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
