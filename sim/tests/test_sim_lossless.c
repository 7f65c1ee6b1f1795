/*
 * Lossless fabrics: PFC and credit-based flow control never drop, the deadlock of shortest-path
 * routing on a ring (cyclic buffer dependency) is detected, up/down routing avoids it, and the
 * workloads with dependencies (ring allreduce) run in order.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "sim/reftp.h"
#include "sim/sim.h"
#include "sim/topo.h"
#include "sim/workload.h"

#define MTU 4096u

static void add_ref(struct ub_sim *sim)
{
    struct ub_sim_reftp_cfg c = {
        .mtu = MTU,
        .window = 32 * MTU,
        .base_rtt = 10 * UB_SIM_PS_PER_US,
        .rto = 200 * UB_SIM_PS_PER_US,
        .paths = 4,
        .cc = false,
    };
    assert_int_equal(ub_sim_reftp_create(sim, &c, NULL), 0);
}

static struct ub_sim_qcfg lossless(enum ub_sim_fc fc)
{
    return (struct ub_sim_qcfg){
        .fc = fc,
        .prio_ctrl = true,
        .xoff = 12 * MTU,
        .xon = 10 * MTU,
        .headroom = 40000, /* 2 x 1 us x 12.5 GB/s + 2 frames + 1 frame */
        .credits = 16 * MTU,
    };
}

/* Nothing dropped, every packet delivered or still inside. */
static void check_lossless(const struct ub_sim *sim)
{
    assert_int_equal(sim->ctr.drops, 0);
    assert_int_equal(sim->ctr.trims, 0);
    assert_int_equal(sim->ctr.headroom_overflow, 0);
    assert_int_equal(sim->ctr.injected, sim->ctr.delivered + ub_sim_in_network(sim));
}

/*
 * Ring of 5 switches, 2 hosts each; host i sends to host i + 4 (two switches clockwise). Every
 * ring link carries four flows: queues fill, pauses travel around the cycle.
 */
static void ring_run(enum ub_sim_fc fc, enum ub_sim_routing r, uint32_t *done, bool *deadlock)
{
    struct ub_sim sim;
    assert_int_equal(ub_sim_init(&sim, 3), 0);
    struct ub_sim_topo_cfg t = {.kind = UB_SIM_TOPO_RING, .x = 5, .hosts_per_leaf = 2};
    struct ub_sim_qcfg q = lossless(fc);
    assert_int_equal(ub_sim_topo_build(&sim, &t, &q), 0);
    assert_int_equal(ub_sim_set_routing(&sim, r, 0), 0);
    add_ref(&sim);
    assert_int_equal(ub_sim_wl_shift(&sim, 4, 1000000, 0), 0);
    sim.stop_when_done = true;
    assert_int_equal(ub_sim_start(&sim), 0);
    ub_sim_watchdog(&sim, 500 * UB_SIM_PS_PER_US, true);
    ub_sim_run(&sim, 20000 * UB_SIM_PS_PER_US);
    check_lossless(&sim);
    *done = sim.flows_done;
    *deadlock = sim.deadlock_at != UB_SIM_NEVER;
    if (*deadlock) {
        assert_true(sim.deadlock_ports >= 5); /* at least the ring's clockwise ports */
        assert_true(ub_sim_in_network(&sim) > 0);
    }
    ub_sim_fini(&sim);
}

static void test_ring_shortest_path_deadlocks_with_pfc(void **state)
{
    (void)state;
    uint32_t done;
    bool dl;
    ring_run(UB_SIM_FC_PFC, UB_SIM_ROUTE_ECMP, &done, &dl);
    assert_true(dl);
    assert_true(done < 10);
}

static void test_ring_updown_does_not_deadlock_with_pfc(void **state)
{
    (void)state;
    uint32_t done;
    bool dl;
    ring_run(UB_SIM_FC_PFC, UB_SIM_ROUTE_UPDOWN, &done, &dl);
    assert_false(dl);
    assert_int_equal(done, 10);
}

static void test_ring_credits_deadlock_and_updown_cures_it(void **state)
{
    (void)state;
    uint32_t done;
    bool dl;
    ring_run(UB_SIM_FC_CBFC, UB_SIM_ROUTE_ECMP, &done, &dl);
    assert_true(dl);
    ring_run(UB_SIM_FC_CBFC, UB_SIM_ROUTE_UPDOWN, &done, &dl);
    assert_false(dl);
    assert_int_equal(done, 10);
}

/* Up/down routes on a torus: every pair reachable, never an up link after a down link. */
static void test_updown_routes_are_legal(void **state)
{
    (void)state;
    struct ub_sim sim;
    assert_int_equal(ub_sim_init(&sim, 1), 0);
    struct ub_sim_topo_cfg t = {.kind = UB_SIM_TOPO_TORUS, .x = 4, .y = 3, .hosts_per_leaf = 1};
    struct ub_sim_qcfg q = {.limit = 100000};
    assert_int_equal(ub_sim_topo_build(&sim, &t, &q), 0);
    assert_int_equal(sim.nswitches, 12);
    assert_int_equal(ub_sim_set_routing(&sim, UB_SIM_ROUTE_UPDOWN, 5), 0);
    for (uint32_t a = 0; a < sim.nhosts; a++)
        for (uint32_t b = 0; b < sim.nhosts; b++) {
            if (a == b)
                continue;
            uint32_t ports[64];
            uint32_t n = ub_sim_path(&sim, a, b, ports, 64);
            assert_true(n >= 2);
            bool down = false;
            for (uint32_t i = 1; i + 1 < n; i++) { /* switch-to-switch hops */
                bool d = sim.rt.is_down[ports[i]];
                assert_false(down && !d);
                down |= d;
            }
        }
    ub_sim_fini(&sim);
}

/* PFC under a 6-to-1 incast: pauses, no loss, and no ingress beyond xoff + headroom. */
static void test_pfc_incast_is_lossless(void **state)
{
    (void)state;
    struct ub_sim sim;
    assert_int_equal(ub_sim_init(&sim, 2), 0);
    struct ub_sim_topo_cfg t = {
        .kind = UB_SIM_TOPO_LEAFSPINE, .leaves = 2, .spines = 2, .hosts_per_leaf = 4};
    struct ub_sim_qcfg q = lossless(UB_SIM_FC_PFC);
    assert_int_equal(ub_sim_topo_build(&sim, &t, &q), 0);
    add_ref(&sim);
    assert_int_equal(ub_sim_wl_incast(&sim, 6, 0, 500000, 0), 0);
    sim.stop_when_done = true;
    assert_int_equal(ub_sim_start(&sim), 0);
    ub_sim_watchdog(&sim, 500 * UB_SIM_PS_PER_US, true);
    ub_sim_run(&sim, UB_SIM_NEVER);
    check_lossless(&sim);
    assert_int_equal(sim.flows_done, 6);
    assert_true(sim.ctr.pauses > 0);
    assert_int_equal(sim.ctr.pauses, sim.ctr.resumes);
    assert_int_equal(sim.deadlock_at, UB_SIM_NEVER);
    /* The receiver's link is the bottleneck: 3 MB at 100 Gb/s takes 240 us at least. */
    uint64_t last = 0;
    for (uint32_t i = 0; i < 6; i++)
        last = sim.flows[i].end > last ? sim.flows[i].end : last;
    assert_true(last >= 240 * UB_SIM_PS_PER_US);
    assert_true(last <= 260 * UB_SIM_PS_PER_US);
    ub_sim_fini(&sim);
}

/* Ring allreduce: each step starts only once the chunk it forwards has arrived. */
static void test_allreduce_steps_follow_their_dependencies(void **state)
{
    (void)state;
    struct ub_sim sim;
    assert_int_equal(ub_sim_init(&sim, 5), 0);
    struct ub_sim_topo_cfg t = {.kind = UB_SIM_TOPO_FATTREE, .k = 4};
    struct ub_sim_qcfg q = {.limit = 200000, .trim = true, .prio_ctrl = true};
    assert_int_equal(ub_sim_topo_build(&sim, &t, &q), 0);
    add_ref(&sim);
    assert_int_equal(ub_sim_wl_allreduce(&sim, 1600000, 0), 0);
    assert_int_equal(sim.nflows, 2 * 15 * 16);
    assert_int_equal(ub_sim_start(&sim), 0);
    assert_true(ub_sim_run(&sim, UB_SIM_NEVER));
    assert_int_equal(sim.flows_done, sim.nflows);
    for (uint32_t f = 0; f < sim.nflows; f++) {
        const struct ub_sim_flow *x = &sim.flows[f];
        if (x->dep != UB_SIM_NONE)
            assert_true(x->start >= sim.flows[x->dep].end);
    }
    ub_sim_fini(&sim);
}

static void test_outcast_and_alltoall_flows(void **state)
{
    (void)state;
    struct ub_sim sim;
    assert_int_equal(ub_sim_init(&sim, 5), 0);
    struct ub_sim_topo_cfg t = {.kind = UB_SIM_TOPO_FATTREE, .k = 4};
    struct ub_sim_qcfg q = {.limit = 200000, .trim = true, .prio_ctrl = true};
    assert_int_equal(ub_sim_topo_build(&sim, &t, &q), 0);
    add_ref(&sim);
    assert_int_equal(ub_sim_wl_outcast(&sim, 3, 2, 100000, 0), 0);
    assert_int_equal(ub_sim_wl_alltoall(&sim, 20000, 0), 0);
    assert_int_equal(sim.nflows, 3 + 16 * 15);
    for (uint32_t i = 0; i < 3; i++) {
        assert_int_equal(sim.flows[i].src, 2);
        assert_int_equal(sim.flows[i].dst, 3 + i);
    }
    assert_int_equal(ub_sim_start(&sim), 0);
    assert_true(ub_sim_run(&sim, UB_SIM_NEVER));
    assert_int_equal(sim.flows_done, sim.nflows);
    ub_sim_fini(&sim);
}

/* Link-level retry: corrupted frames are resent by their link, the transport never notices. */
static void test_llr_repairs_corruption_below_the_transport(void **state)
{
    (void)state;
    for (int llr = 0; llr < 2; llr++) {
        struct ub_sim sim;
        assert_int_equal(ub_sim_init(&sim, 8), 0);
        struct ub_sim_topo_cfg t = {.kind = UB_SIM_TOPO_FATTREE, .k = 4};
        struct ub_sim_qcfg q = {.limit = 400000,
                                .trim = true,
                                .prio_ctrl = true,
                                .loss_ppm = 20000,
                                .llr_delay = llr ? 2 * UB_SIM_PS_PER_US : 0};
        assert_int_equal(ub_sim_topo_build(&sim, &t, &q), 0);
        struct ub_sim_reftp *tp;
        struct ub_sim_reftp_cfg c = {.mtu = MTU,
                                     .window = 32 * MTU,
                                     .base_rtt = 10 * UB_SIM_PS_PER_US,
                                     .rto = 100 * UB_SIM_PS_PER_US,
                                     .paths = 4};
        assert_int_equal(ub_sim_reftp_create(&sim, &c, &tp), 0);
        assert_int_equal(ub_sim_wl_permutation(&sim, 400000, 0), 0);
        assert_int_equal(ub_sim_start(&sim), 0);
        assert_true(ub_sim_run(&sim, UB_SIM_NEVER));
        assert_int_equal(sim.flows_done, 16);
        uint64_t corrupt = 0;
        for (uint32_t i = 0; i < sim.nports; i++)
            corrupt += sim.ports[i].st.corrupt;
        assert_true(corrupt > 100); /* 2 % of some 3000 x 4 switch hops */
        if (llr) {
            assert_int_equal(sim.ctr.corrupt_drops, 0);
            assert_int_equal(sim.ctr.llr_retries, corrupt);
            assert_int_equal(ub_sim_reftp_stats(tp)->rtx, 0);
        } else {
            assert_int_equal(sim.ctr.corrupt_drops, corrupt);
            assert_true(ub_sim_reftp_stats(tp)->rtx > 0);
        }
        assert_int_equal(sim.ctr.injected, sim.ctr.delivered + sim.ctr.drops +
                                               sim.ctr.corrupt_drops + ub_sim_in_network(&sim));
        ub_sim_fini(&sim);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_shortest_path_deadlocks_with_pfc),
        cmocka_unit_test(test_ring_updown_does_not_deadlock_with_pfc),
        cmocka_unit_test(test_ring_credits_deadlock_and_updown_cures_it),
        cmocka_unit_test(test_updown_routes_are_legal),
        cmocka_unit_test(test_pfc_incast_is_lossless),
        cmocka_unit_test(test_allreduce_steps_follow_their_dependencies),
        cmocka_unit_test(test_outcast_and_alltoall_flows),
        cmocka_unit_test(test_llr_repairs_corruption_below_the_transport),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
