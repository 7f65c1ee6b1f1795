/*
 * The real engine on simulated hosts: flows as RUD messages through PDS, completion on the last
 * acknowledgement, trimmed packets turned into NACKs and repaired, buffer accounting.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/engine.h"
#include "sim/sim.h"
#include "sim/softub_host.h"
#include "sim/topo.h"
#include "sim/workload.h"

#define MTU 4096u

struct outcome {
    uint32_t done;
    uint64_t end[4];
    struct ub_sim_softub_stats st;
    uint64_t retx_nack, retx, drops, trims, trim_nacks;
};

/* Four left hosts send 200 kB each across the dumbbell's one bottleneck to the right side. */
static void run(uint64_t limit, bool trim, bool real, uint64_t seed, struct outcome *o)
{
    struct ub_sim sim;
    assert_int_equal(ub_sim_init(&sim, seed), 0);
    struct ub_sim_topo_cfg t = {.kind = UB_SIM_TOPO_DUMBBELL, .hosts = 4};
    struct ub_sim_qcfg q = {.limit = limit, .trim = trim, .prio_ctrl = trim};
    assert_int_equal(ub_sim_topo_build(&sim, &t, &q), 0);
    struct ub_sim_softub_cfg c = {.mtu = MTU,
                                  .paths = 4,
                                  .window = 32,
                                  .rto_min_ns = 50000,
                                  .virtual_payload = !real,
                                  .trimming = trim};
    struct ub_sim_softub *s;
    assert_int_equal(ub_sim_softub_create(&sim, &c, &s), 0);
    for (uint32_t i = 0; i < 4; i++)
        assert_true(ub_sim_add_flow(&sim, 0, i, 4 + i, 200000, 0) >= 0);
    assert_int_equal(ub_sim_start(&sim), 0);
    assert_true(ub_sim_run(&sim, UB_SIM_NEVER));
    o->done = sim.flows_done;
    for (uint32_t i = 0; i < 4; i++)
        o->end[i] = sim.flows[i].end;
    o->st = *ub_sim_softub_stats(s);
    o->retx = o->retx_nack = 0;
    uint64_t tx = 0, rx_in = 0;
    for (uint32_t h = 0; h < sim.nhosts; h++) {
        const struct ub__engine *e = ub_sim_softub_engine(s, h);
        o->retx_nack += ub__pds_stats(e->pds)->retx_nack;
        o->retx += ub__pds_stats(e->pds)->retx_pkts;
        tx += e->stats.tx_pkts;
        rx_in += e->stats.rx_pkts;
        assert_int_equal(e->stats.rx_malformed, 0);
    }
    o->drops = sim.ctr.drops;
    o->trims = sim.ctr.trims;
    /* Conservation: everything an engine sent was delivered (whole or trimmed) or dropped. */
    assert_int_equal(tx, sim.ctr.injected);
    assert_int_equal(sim.ctr.injected, sim.ctr.delivered + sim.ctr.drops);
    assert_int_equal(rx_in, sim.ctr.delivered); /* trimmed stubs included */
    assert_int_equal(o->st.trimmed_in, sim.ctr.trims);
    o->trim_nacks = 0;
    for (uint32_t h = 0; h < sim.nhosts; h++)
        o->trim_nacks +=
            ub__pds_stats(ub_sim_softub_engine(s, h)->pds)->nacks_by_code[UB_PDS_NACK_TRIMMED];
    assert_int_equal(sim.pool.out, 0);
    /* Every message packet was acknowledged exactly once. */
    assert_int_equal(o->st.pkts_acked, o->st.pkts_queued);
    assert_int_equal(o->st.pkts_failed, 0);
    assert_int_equal(o->st.send_errors, 0);
    for (uint32_t h = 0; h < sim.nhosts; h++) {
        const struct ub__engine *e = ub_sim_softub_engine(s, h);
        /* Nothing left in flight: every buffer is home (a NACK may still wait in a queue). */
        assert_true(e->pool.avail + 2 >= e->pool.count);
    }
    ub_sim_fini(&sim);
}

static void test_reliable_flows_complete(void **state)
{
    (void)state;
    struct outcome o;
    run(1000 * MTU, false, true, 4, &o);
    assert_int_equal(o.done, 4);
    assert_int_equal(o.st.trimmed_in, 0);
    assert_int_equal(o.retx, 0);
    /* 200000 B in 4024-byte payloads: 50 packets per flow. */
    assert_int_equal(o.st.pkts_queued, 4 * 50);
}

static void test_trimmed_packets_are_nacked_and_repaired(void **state)
{
    (void)state;
    struct outcome o;
    run(8 * MTU, true, true, 4, &o);
    /* 4:1 into the bottleneck with a small queue: payloads are cut, only headers arrive ... */
    assert_true(o.trims > 0);
    assert_int_equal(o.drops, 0);
    /* ... each becomes a NACK TRIMMED, and PDS resends what was trimmed (a NACK for a PSN
     * already acknowledged or already being resent changes nothing). */
    assert_int_equal(o.trim_nacks, o.st.trimmed_in);
    assert_true(o.retx_nack > 0 && o.retx_nack <= o.trim_nacks);
    assert_int_equal(o.done, 4);
}

static void test_drop_tail_losses_are_repaired(void **state)
{
    (void)state;
    struct outcome o;
    run(8 * MTU, false, true, 4, &o);
    assert_true(o.drops > 0);
    assert_true(o.retx >= o.drops);
    assert_int_equal(o.done, 4);
}

static void test_deterministic(void **state)
{
    (void)state;
    struct outcome a, b, d;
    run(8 * MTU, true, true, 9, &a);
    run(8 * MTU, true, true, 9, &b);
    run(8 * MTU, true, false, 9, &d);
    for (uint32_t i = 0; i < 4; i++)
        assert_int_equal(a.end[i], b.end[i]);
    assert_int_equal(a.retx, b.retx);
    /*
     * Virtual payloads: PDS counts each packet's wire_len, so NSCC sees the same bytes and the
     * run is identical to the real-payload one, packet for packet.
     */
    assert_int_equal(d.done, 4);
    for (uint32_t i = 0; i < 4; i++)
        assert_int_equal(a.end[i], d.end[i]);
    assert_int_equal(a.retx, d.retx);
    assert_int_equal(a.trims, d.trims);
}

/*
 * One flow across a k=4 fat tree completes in the ideal time, size/rate + RTT, within 2 %. One
 * path: with spraying, a packet that fills the last hole waits for PDS's delayed-ACK timer.
 */
static void test_single_flow_fct_is_ideal(void **state)
{
    (void)state;
    struct ub_sim sim;
    assert_int_equal(ub_sim_init(&sim, 1), 0);
    struct ub_sim_topo_cfg t = {.kind = UB_SIM_TOPO_FATTREE, .k = 4};
    struct ub_sim_qcfg q = {.limit = 200000, .trim = true, .prio_ctrl = true};
    assert_int_equal(ub_sim_topo_build(&sim, &t, &q), 0);
    struct ub_sim_softub_cfg c = {.mtu = MTU, .paths = 1, .window = 64, .trimming = true};
    assert_int_equal(ub_sim_softub_create(&sim, &c, NULL), 0);
    assert_true(ub_sim_add_flow(&sim, 0, 0, 15, 2000000, 0) >= 0);
    assert_int_equal(ub_sim_start(&sim), 0);
    assert_true(ub_sim_run(&sim, UB_SIM_NEVER));
    assert_int_equal(sim.flows_done, 1);
    uint64_t fct = sim.flows[0].end - sim.flows[0].start;
    uint64_t ideal = sim.flows[0].ideal;
    /* 2 MB at 100 Gb/s is 160 us (+ headers) and the path's RTT about 14 us. */
    assert_true(fct >= ideal);
    assert_true(fct * 100 <= ideal * 102);
    assert_true(ideal > 170 * UB_SIM_PS_PER_US && ideal < 180 * UB_SIM_PS_PER_US);
    ub_sim_fini(&sim);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reliable_flows_complete),
        cmocka_unit_test(test_trimmed_packets_are_nacked_and_repaired),
        cmocka_unit_test(test_drop_tail_losses_are_repaired),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_single_flow_fct_is_ideal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
