/*
 * softub-perf's parts that a run cannot show deterministically: the parting of the two
 * processes (tools/perf_run.c perf_part: a client on the server's CPU moves to another CPU of
 * its set and keeps its set; on another CPU, or with nowhere else to go, it stays), and the
 * server's check of the configuration and run requests it is sent (perf_stats.c).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

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

/* A write_bw client's configuration: the defaults, then those its test sets (parse). */
static struct perf_cfg good_cfg(void)
{
    struct perf_cfg c;
    perf_cfg_defaults(&c);
    c.test = T_WRITE_BW;
    c.size = 65536;
    c.tx_depth = 128;
    c.inline_sz = 128;
    strcpy(c.server_ip, "127.0.0.1");
    return c;
}

/* Every field out of its option's bounds is named; in bounds, nothing is. */
static void test_cfg_bad(void **state)
{
    (void)state;
    struct perf_cfg c = good_cfg();
    assert_null(perf_cfg_bad(&c));
    c.jettys = PERF_MAX_JETTY;
    c.tx_depth = c.rx_depth = PERF_MAX_DEPTH;
    c.mtu = PERF_MIN_MTU;
    c.sweep = c.tagged = 1;
    assert_null(perf_cfg_bad(&c));
#define EXPECT_BAD(name, stmt)                       \
    do {                                             \
        struct perf_cfg x = good_cfg();              \
        stmt;                                        \
        assert_non_null(perf_cfg_bad(&x));           \
        assert_string_equal(perf_cfg_bad(&x), name); \
    } while (0)
    EXPECT_BAD("test", x.test = T_COUNT);
    EXPECT_BAD("device", x.dev = 2);
    EXPECT_BAD("size", x.size = 0);
    EXPECT_BAD("size", x.size = PERF_MAX_SIZE + 1ull);
    EXPECT_BAD("max size", x.max_size = 1);
    EXPECT_BAD("duration", x.duration = PERF_MAX_DURATION + 1);
    EXPECT_BAD("warmup", x.warmup = PERF_MAX_WARMUP + 1);
    EXPECT_BAD("jettys", x.jettys = PERF_MAX_JETTY + 1);
    EXPECT_BAD("jettys", x.jettys = 0);
    EXPECT_BAD("tx depth", x.tx_depth = PERF_MAX_DEPTH + 1);
    EXPECT_BAD("rx depth", x.rx_depth = 0);
    EXPECT_BAD("post list", x.post_list = PERF_MAX_POST_LIST + 1);
    EXPECT_BAD("cq mod", x.cq_mod = PERF_MAX_CQ_MOD + 1);
    EXPECT_BAD("inline", x.inline_sz = PERF_MAX_INLINE + 1);
    EXPECT_BAD("order or mode", x.order = 3);
    EXPECT_BAD("order or mode", x.tm = 2);
    EXPECT_BAD("paths", x.paths = PERF_MAX_PATHS + 1);
    EXPECT_BAD("mtu", x.mtu = PERF_MIN_MTU - 1);
    EXPECT_BAD("mtu", x.mtu = PERF_MAX_MTU + 1);
    EXPECT_BAD("flag", x.bidir = 2);
    EXPECT_BAD("name", memset(x.cc, 'a', sizeof(x.cc)));
    EXPECT_BAD("name", memset(x.server_ip, '1', sizeof(x.server_ip)));
    EXPECT_BAD("name", memset(x.udp_opts, 'k', sizeof(x.udp_opts)));
#undef EXPECT_BAD
}

/* A run request fits the buffers the configuration set up, or is refused. */
static void test_run_fits(void **state)
{
    (void)state;
    struct perf_cfg c = good_cfg();
    struct perf_run r = {.type = M_RUN, .size = 65536, .iters = 10};
    assert_true(perf_run_fits(&c, &r));
    r.size = 65537;
    assert_false(perf_run_fits(&c, &r));
    r.size = 0;
    assert_false(perf_run_fits(&c, &r));
    c.sweep = 1;
    c.max_size = 1024;
    r.size = 1024;
    assert_true(perf_run_fits(&c, &r));
    r.size = 2048;
    assert_false(perf_run_fits(&c, &r));
    c.size = 2; /* a 2-byte test still has room for an 8-byte atomic */
    c.sweep = 0;
    r.size = 8;
    assert_true(perf_run_fits(&c, &r));
    r.duration_ms = PERF_MAX_DURATION * 1000u + 1;
    assert_false(perf_run_fits(&c, &r));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_moves_off_the_shared_cpu),
        cmocka_unit_test(test_stays_elsewhere_or_alone),
        cmocka_unit_test(test_cfg_bad),
        cmocka_unit_test(test_run_fits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
