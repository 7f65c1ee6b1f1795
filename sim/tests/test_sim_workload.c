/* Workloads and determinism: permutations, .cm files, byte-identical reruns. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "sim/reftp.h"
#include "sim/sim.h"
#include "sim/stats.h"
#include "sim/topo.h"
#include "sim/workload.h"

#define MTU 4096u

/* Runs a sprayed permutation on a k=6 fat tree and returns summary + FCT CSV + port CSV. */
static char *run_capture(uint64_t seed, size_t *len)
{
    struct ub_sim sim;
    assert_int_equal(ub_sim_init(&sim, seed), 0);
    struct ub_sim_topo_cfg t = {.kind = UB_SIM_TOPO_FATTREE, .k = 6};
    struct ub_sim_qcfg q = {
        .limit = 24 * MTU, .kmin = 5 * MTU, .kmax = 19 * MTU, .trim = true, .prio_ctrl = true};
    assert_int_equal(ub_sim_topo_build(&sim, &t, &q), 0);
    struct ub_sim_reftp_cfg c = {.mtu = MTU,
                                 .window = 40 * MTU,
                                 .base_rtt = 14 * UB_SIM_PS_PER_US,
                                 .rto = 50 * UB_SIM_PS_PER_US,
                                 .paths = 16,
                                 .cc = true};
    assert_int_equal(ub_sim_reftp_create(&sim, &c, NULL), 0);
    assert_int_equal(ub_sim_wl_permutation(&sim, 400000, 0), 0);
    sim.stop_when_done = true;
    assert_int_equal(ub_sim_start(&sim), 0);
    assert_true(ub_sim_run(&sim, UB_SIM_NEVER));
    assert_int_equal(sim.flows_done, sim.nflows);
    FILE *f = tmpfile();
    assert_non_null(f);
    struct ub_sim_summary s;
    assert_int_equal(ub_sim_summarize(&sim, &s), 0);
    ub_sim_print_summary(&sim, &s, f);
    ub_sim_write_fct_csv(&sim, f);
    ub_sim_write_port_csv(&sim, f);
    long n = ftell(f);
    assert_true(n > 0);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    ub_sim_fini(&sim);
    return buf;
}

static void test_determinism(void **state)
{
    (void)state;
    size_t la, lb, lc;
    char *a = run_capture(1, &la);
    char *b = run_capture(1, &lb);
    char *c = run_capture(2, &lc);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la);
    /* Another seed: another permutation, other spraying choices, other results. */
    assert_true(la != lc || memcmp(a, c, la) != 0);
    assert_non_null(strstr(a, "flows 54 completed 54"));
    free(a);
    free(b);
    free(c);
}

static void test_permutation_is_derangement(void **state)
{
    (void)state;
    struct ub_sim sim;
    assert_int_equal(ub_sim_init(&sim, 123), 0);
    struct ub_sim_topo_cfg t = {.kind = UB_SIM_TOPO_FATTREE, .k = 8};
    struct ub_sim_qcfg q = {.limit = 100 * MTU};
    assert_int_equal(ub_sim_topo_build(&sim, &t, &q), 0);
    assert_int_equal(ub_sim_wl_permutation(&sim, 1000, 0), 0);
    assert_int_equal(sim.nflows, 128);
    uint8_t seen[128] = {0};
    for (uint32_t i = 0; i < sim.nflows; i++) {
        assert_int_equal(sim.flows[i].src, i);
        assert_int_not_equal(sim.flows[i].dst, i);
        assert_int_equal(seen[sim.flows[i].dst]++, 0);
    }
    ub_sim_fini(&sim);
}

static int load_cm_text(struct ub_sim *sim, const char *text, uint32_t *line)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    fputs(text, f);
    rewind(f);
    int rc = ub_sim_wl_load_cm(sim, f, line);
    fclose(f);
    return rc;
}

static void test_cm_file(void **state)
{
    (void)state;
    struct ub_sim sim;
    assert_int_equal(ub_sim_init(&sim, 1), 0);
    struct ub_sim_topo_cfg t = {.kind = UB_SIM_TOPO_FATTREE, .k = 4};
    struct ub_sim_qcfg q = {.limit = 100 * MTU, .trim = true, .prio_ctrl = true};
    assert_int_equal(ub_sim_topo_build(&sim, &t, &q), 0);
    uint32_t line = 0;
    const char *good = "# incast 3->1\n"
                       "Nodes 16\n"
                       "Connections 3\n"
                       "1->0 id 1 start 0 size 2000000\n"
                       "2->0 id 7 start 2.5 size 1000\n"
                       "\n"
                       "15->0 start 10.000001 size 4096 id 9 prio 3\n";
    assert_int_equal(load_cm_text(&sim, good, &line), 0);
    assert_int_equal(sim.nflows, 3);
    assert_int_equal(sim.flows[1].id, 7);
    assert_int_equal(sim.flows[1].start, 2500000);
    assert_int_equal(sim.flows[2].start, 10000001);
    assert_int_equal(sim.flows[2].src, 15);
    assert_int_equal(sim.flows[0].size, 2000000);
    struct ub_sim_reftp_cfg c = {.mtu = MTU,
                                 .window = 50 * MTU,
                                 .base_rtt = 14 * UB_SIM_PS_PER_US,
                                 .rto = 100 * UB_SIM_PS_PER_US,
                                 .cc = true};
    assert_int_equal(ub_sim_reftp_create(&sim, &c, NULL), 0);
    assert_int_equal(ub_sim_start(&sim), 0);
    assert_true(ub_sim_run(&sim, UB_SIM_NEVER));
    assert_int_equal(sim.flows_done, 3);
    assert_true(sim.flows[1].end > 2500000);
    ub_sim_fini(&sim);

    const char *bad[] = {
        "Nodes 16\nConnections 2\n1->0 start 0 size 10\n",          /* count mismatch */
        "Nodes 16\nConnections 1\n1->0 size 10\n",                  /* no start */
        "Nodes 16\nConnections 1\n1->99 start 0 size 10\n",         /* no such host */
        "Nodes 16\nConnections 1\n1->0 start 0 size 10 colour 3\n", /* unknown key */
        "Nodes 99\nConnections 0\n",                                /* bigger than the fabric */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(ub_sim_init(&sim, 1), 0);
        assert_int_equal(ub_sim_topo_build(&sim, &t, &q), 0);
        assert_int_not_equal(load_cm_text(&sim, bad[i], &line), 0);
        ub_sim_fini(&sim);
    }
    assert_int_equal(ub_sim_init(&sim, 1), 0);
    assert_int_equal(ub_sim_topo_build(&sim, &t, &q), 0);
    assert_int_equal(load_cm_text(&sim,
                                  "Nodes 16\nConnections 1\nTriggers 1\n"
                                  "1->0 id 1 trigger 1 size 10\ntrigger id 1 oneshot\n",
                                  &line),
                     UB_ENOTSUP);
    assert_int_equal(line, 3); /* "Triggers 1" already */
    ub_sim_fini(&sim);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_permutation_is_derangement),
        cmocka_unit_test(test_cm_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
