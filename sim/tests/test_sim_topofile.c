/*
 * Topology files: a built-in shape by name, a fat tree written out and read back (the same
 * fabric port for port: identical runs), an arbitrary graph with per-link rates and delays (a
 * single flow takes exactly its store-and-forward time), and the errors.
 */
#define _POSIX_C_SOURCE 200809L
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
#include "sim/topo.h"
#include "sim/topofile.h"
#include "sim/workload.h"

static const struct ub_sim_qcfg Q = {
    .limit = 200000, .kmin = 35000, .kmax = 140000, .trim = true, .prio_ctrl = true};

static int load_str(struct ub_sim *sim, const char *text, uint32_t *line)
{
    FILE *f = fmemopen((void *)(uintptr_t)text, strlen(text), "r");
    assert_non_null(f);
    bool b;
    struct ub_sim_topo_cfg c;
    int rc = ub_sim_topo_load(sim, f, &Q, line, &b, &c);
    fclose(f);
    return rc || !b ? rc : ub_sim_topo_build(sim, &c, &Q); /* a shape: as softub-sim does */
}

static void same_fabric(const struct ub_sim *a, const struct ub_sim *b)
{
    assert_int_equal(a->nhosts, b->nhosts);
    assert_int_equal(a->nswitches, b->nswitches);
    assert_int_equal(a->nports, b->nports);
    for (uint32_t i = 0; i < a->nports; i++) {
        assert_int_equal(a->ports[i].node, b->ports[i].node);
        assert_int_equal(a->ports[i].peer, b->ports[i].peer);
        assert_int_equal(a->ports[i].rev, b->ports[i].rev);
        assert_int_equal(a->ports[i].rate, b->ports[i].rate);
        assert_int_equal(a->ports[i].delay, b->ports[i].delay);
    }
}

/* A 2 MB permutation with the reference transport over 8 paths; returns the flows' ends. */
static void run_perm(struct ub_sim *sim, uint64_t *end)
{
    struct ub_sim_reftp_cfg c = {
        .mtu = 4096, .window = 262144, .base_rtt = 10000000, .paths = 8, .cc = true};
    assert_int_equal(ub_sim_reftp_create(sim, &c, NULL), 0);
    assert_int_equal(ub_sim_wl_permutation(sim, 2000000, 0), 0);
    assert_int_equal(ub_sim_start(sim), 0);
    ub_sim_run(sim, UB_SIM_NEVER);
    assert_int_equal(sim->flows_done, sim->nflows);
    for (uint32_t i = 0; i < sim->nflows; i++)
        end[i] = sim->flows[i].end;
}

static void test_builtin_and_round_trip(void **state)
{
    (void)state;
    struct ub_sim a, b, c;
    assert_int_equal(ub_sim_init(&a, 7), 0);
    assert_int_equal(ub_sim_init(&b, 7), 0);
    assert_int_equal(ub_sim_init(&c, 7), 0);
    struct ub_sim_topo_cfg t = {.kind = UB_SIM_TOPO_FATTREE, .k = 4};
    assert_int_equal(ub_sim_topo_build(&a, &t, &Q), 0);
    uint32_t line;
    assert_int_equal(
        load_str(&b, "# the same, by name\nbuiltin fattree k 4 rate 100G delay 1us\n", &line), 0);
    same_fabric(&a, &b);
    /* Written out as a graph and read back: the same ports in the same order. */
    char *text = NULL;
    size_t len = 0;
    FILE *w = open_memstream(&text, &len);
    assert_non_null(w);
    assert_int_equal(ub_sim_topo_write(&a, w), 0);
    fclose(w);
    assert_int_equal(load_str(&c, text, &line), 0);
    free(text);
    same_fabric(&a, &c);
    uint64_t ea[16], ec[16];
    run_perm(&a, ea);
    run_perm(&c, ec);
    for (uint32_t i = 0; i < 16; i++)
        assert_int_equal(ea[i], ec[i]);
    ub_sim_fini(&a);
    ub_sim_fini(&b);
    ub_sim_fini(&c);
}

/*
 * h0 -100G,1us- s0 -100G,2us- s1 -40G,3us- s2 -100G,500ns- h1. 100 packets of 4096 B (4032
 * payload): the first reaches s1 after 2 x (327.68 ns + delay), s1 sends all 100 at 819.2 ns each,
 * the last then needs 3 us + 327.68 ns + 500 ns; its 64-byte ACK returns in
 * 4 delays + 3 x 5.12 + 12.8 ns. Total 89403.04 + 6528.16 = 95931.2 ns.
 */
static void test_graph_single_flow_exact(void **state)
{
    (void)state;
    struct ub_sim sim;
    assert_int_equal(ub_sim_init(&sim, 1), 0);
    uint32_t line;
    assert_int_equal(load_str(&sim,
                              "defaults rate 100G delay 1us\n"
                              "host h1 s2 delay 500ns   # attached before s2 is declared\n"
                              "switch s0 s1\n"
                              "switch s2\n"
                              "host h0 s0\n"
                              "link s0 s1 delay 2us\n"
                              "link s1 s2 rate 40G delay 3us\n",
                              &line),
                     0);
    assert_int_equal(sim.nhosts, 2);
    assert_int_equal(sim.nswitches, 3);
    struct ub_sim_qcfg deep = {.limit = 1 << 30}; /* 40G after 100G: a queue, never a trim */
    ub_sim_set_queues(&sim, &deep);
    struct ub_sim_reftp_cfg c = {.mtu = 4096, .window = 1 << 20, .base_rtt = 20000000};
    assert_int_equal(ub_sim_reftp_create(&sim, &c, NULL), 0);
    /* hosts are numbered in declaration order: h1 is host 0 */
    assert_true(ub_sim_add_flow(&sim, 0, 1, 0, 403200, 0) >= 0);
    assert_int_equal(ub_sim_start(&sim), 0);
    ub_sim_run(&sim, UB_SIM_NEVER);
    assert_int_equal(sim.flows_done, 1);
    uint64_t fct = sim.flows[0].end - sim.flows[0].start;
    assert_int_equal(fct, 95931200);
    assert_int_equal(sim.flows[0].ideal, 95931200);
    ub_sim_fini(&sim);
}

static void expect_error(const char *text, uint32_t want_line)
{
    struct ub_sim sim;
    assert_int_equal(ub_sim_init(&sim, 1), 0);
    uint32_t line = 99;
    assert_int_equal(load_str(&sim, text, &line), UB_EINVAL);
    assert_int_equal(line, want_line);
    ub_sim_fini(&sim);
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("switch s0\nhost h0 s0\nhost h1 s9\n", 3);            /* undeclared switch */
    expect_error("switch s0 s1\nhost h0 s0\nlink h0 s1\n", 3);         /* a host's 2nd link */
    expect_error("switch s0\nhost h0 s0\nhost h1\n", 3);               /* a host without link */
    expect_error("switch s0\nswitch s0\n", 2);                         /* declared twice */
    expect_error("switch s0 s1\nhost h0 s0\nlink s0 s1 rate 1X\n", 3); /* bad rate */
    expect_error("switch s0 s1\nhost h0 s0\nlink s0 s1 rate -5\n", 3); /* a sign, not 2^64 - 5 */
    expect_error("builtin fattree k +4\n", 1);
    expect_error("switch s0 s1\nhost h0 s0\nlink s0 s1 delay 5\n", 3);  /* delay without unit */
    expect_error("switch s0\nhost h0 s0\nhost h1 s0\nlink h0 h1\n", 4); /* host to host */
    expect_error("builtin fattree k 4\nswitch s0\n", 2);                /* builtin is alone */
    expect_error("builtin moebius k 4\n", 1);
    expect_error("frobnicate\n", 1);
    expect_error("# nothing\n", 0);
}

/* Shapes past the fabric limits are refused before anything is built (each of these would
 * have wrapped 32-bit arithmetic or asked for gigabytes of links), in a file or given. */
static void test_too_large(void **state)
{
    (void)state;
    static const struct ub_sim_topo_cfg big[] = {
        {.kind = UB_SIM_TOPO_LEAFSPINE, .leaves = 100000, .spines = 100000, .hosts_per_leaf = 1},
        {.kind = UB_SIM_TOPO_LEAFSPINE, .leaves = 65536, .spines = 1, .hosts_per_leaf = 65536},
        {.kind = UB_SIM_TOPO_TORUS, .x = 70000, .y = 70000},
        {.kind = UB_SIM_TOPO_RING, .x = 3, .hosts_per_leaf = 4000000},
        {.kind = UB_SIM_TOPO_DUMBBELL, .hosts = 5000000},
        {.kind = UB_SIM_TOPO_FATTREE, .k = 4, .oversub = 4000000000u},
        {.kind = UB_SIM_TOPO_FATTREE, .k = 256, .oversub = 2},
    };
    for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
        struct ub_sim sim;
        assert_int_equal(ub_sim_init(&sim, 1), 0);
        assert_int_equal(ub_sim_topo_build(&sim, &big[i], &Q), UB_ERANGE);
        assert_int_equal(sim.nnodes, 0);
        ub_sim_fini(&sim);
    }
    struct ub_sim sim;
    assert_int_equal(ub_sim_init(&sim, 1), 0);
    uint32_t line = 99;
    assert_int_equal(load_str(&sim, "builtin torus x 70000 y 70000\n", &line), UB_ERANGE);
    assert_int_equal(line, 0);
    /* The builder itself: a count whose sum would wrap. */
    struct ub_sim_link_spec one = {.a = 0, .b = 1, .rate = 1, .delay = 1};
    assert_int_equal(ub_sim_build(&sim, UINT32_MAX, 2, &one, 1, &Q), UB_ERANGE);
    assert_int_equal(ub_sim_build(&sim, 1, 1, &one, UB_SIM_MAX_LINKS + 1, &Q), UB_ERANGE);
    ub_sim_fini(&sim);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_and_round_trip),
        cmocka_unit_test(test_graph_single_flow_exact),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_too_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
