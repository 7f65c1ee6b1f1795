/*
 * The fabric against analysis: a single flow's FCT, a drop-tail queue under
 * a known 2:1 overload, packet conservation, incast, failures mid-run.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>

#include "sim/reftp.h"
#include "sim/sim.h"
#include "sim/topo.h"
#include "sim/workload.h"

#define GBPS 1000000000ULL
#define RATE (100 * GBPS)
#define MTU  4096u

static void conservation(const struct ub_sim *sim)
{
    const struct ub_sim_counters *c = &sim->ctr;
    uint64_t in_net = ub_sim_in_network(sim);
    assert_int_equal(c->injected, c->delivered + c->drops + c->fail_drops + c->corrupt_drops +
                                      c->noroute_drops + in_net);
    uint64_t enq = 0, deq = 0, queued = 0, drops = 0, trims = 0, marks = 0;
    for (uint32_t i = sim->nhosts; i < sim->nports; i++) {
        const struct ub_sim_port *p = &sim->ports[i];
        if (!p->st.fail_drops) /* a failure flushes what it held */
            assert_int_equal(p->st.enq, p->st.deq + p->q.n + p->hq.n);
        enq += p->st.enq;
        deq += p->st.deq;
        queued += p->q.n + p->hq.n;
        drops += p->st.drops;
        trims += p->st.trims;
        marks += p->st.marks;
    }
    assert_true(enq >= deq + queued); /* equal unless a failure flushed a queue */
    assert_int_equal(drops, c->drops);
    assert_int_equal(trims, c->trims);
    assert_int_equal(marks, c->marks);
    assert_true(sim->pool.out >= in_net);
}

static struct ub_sim_reftp_cfg ref_cfg(const struct ub_sim *sim, bool cc, uint32_t paths)
{
    uint64_t rtt = ub_sim_ideal_fct(sim, 0, sim->nhosts - 1, MTU - 64, MTU, 64, 64);
    return (struct ub_sim_reftp_cfg){
        .mtu = MTU,
        .window = 64 * MTU,
        .base_rtt = rtt,
        .rto = 200 * UB_SIM_PS_PER_US,
        .paths = paths,
        .cc = cc,
    };
}

/* FCT = size/rate + RTT within 2 %, and exactly the store-and-forward ideal. */
static void single_flow(enum ub_sim_topo_kind kind, uint32_t k, uint32_t links)
{
    struct ub_sim sim;
    assert_int_equal(ub_sim_init(&sim, 7), 0);
    struct ub_sim_topo_cfg t = {
        .kind = kind, .k = k, .hosts = kind == UB_SIM_TOPO_DUMBBELL ? 2 : 0};
    struct ub_sim_qcfg q = {
        .limit = 100 * MTU, .kmin = 20 * MTU, .kmax = 80 * MTU, .trim = true, .prio_ctrl = true};
    assert_int_equal(ub_sim_topo_build(&sim, &t, &q), 0);
    uint32_t dst = sim.nhosts - 1;
    assert_int_equal(ub_sim_path_links(&sim, 0, dst), links);
    struct ub_sim_reftp_cfg c = ref_cfg(&sim, true, 1);
    assert_int_equal(ub_sim_reftp_create(&sim, &c, NULL), 0);
    const uint64_t size = 2000000;
    assert_int_equal(ub_sim_add_flow(&sim, 0, 0, dst, size, 5 * UB_SIM_PS_PER_US), 0);
    assert_int_equal(ub_sim_start(&sim), 0);
    assert_true(ub_sim_run(&sim, UB_SIM_NEVER));
    const struct ub_sim_flow *f = &sim.flows[0];
    assert_int_not_equal(f->end, UB_SIM_NEVER);
    uint64_t fct = f->end - f->start;

    /* Analytical: bytes on the wire at the bottleneck plus the unloaded RTT of one packet. */
    uint64_t npkts = (size + MTU - 64 - 1) / (MTU - 64);
    uint64_t wire = size + npkts * 64;
    uint64_t ser = wire * 8 * UB_SIM_PS_PER_S / RATE;
    uint64_t rtt = 2 * links * UB_SIM_PS_PER_US;
    uint64_t simple = ser + rtt;
    uint64_t diff = fct > simple ? fct - simple : simple - fct;
    assert_true(diff * 100 <= simple * 2);
    assert_int_equal(fct, f->ideal);
    conservation(&sim);
    assert_int_equal(sim.ctr.drops + sim.ctr.trims, 0);
    ub_sim_fini(&sim);
}

static void test_single_flow_dumbbell(void **state)
{
    (void)state;
    single_flow(UB_SIM_TOPO_DUMBBELL, 0, 3);
}

static void test_single_flow_fattree(void **state)
{
    (void)state;
    single_flow(UB_SIM_TOPO_FATTREE, 4, 6);
}

/* A constant-bit-rate source with no feedback: each flow is `size` bytes of MTU packets. */
struct cbr {
    uint32_t *left; /* per host: packets still to send */
    uint32_t *flow;
};

static void cbr_start(void *ctx, struct ub_sim *sim, uint32_t f)
{
    struct cbr *c = ctx;
    c->left[sim->flows[f].src] = (uint32_t)(sim->flows[f].size / MTU);
    c->flow[sim->flows[f].src] = f;
    ub_sim_host_kick(sim, sim->flows[f].src);
}

static struct ub_sim_pkt *cbr_pull(void *ctx, struct ub_sim *sim, uint32_t host)
{
    struct cbr *c = ctx;
    if (!c->left[host])
        return NULL;
    c->left[host]--;
    struct ub_sim_pkt *p = ub_sim_pkt_alloc(sim);
    const struct ub_sim_flow *f = &sim->flows[c->flow[host]];
    p->src = host;
    p->dst = f->dst;
    p->size = MTU;
    p->flow = c->flow[host];
    return p;
}

static void cbr_rx(void *ctx, struct ub_sim *sim, uint32_t host, struct ub_sim_pkt *p)
{
    (void)ctx;
    (void)host;
    ub_sim_pkt_free(sim, p);
}

static const struct ub_sim_transport_ops cbr_ops = {
    .name = "cbr", .start_flow = cbr_start, .pull = cbr_pull, .rx = cbr_rx};

/*
 * Two line-rate sources into one port for N packet times each: the port
 * serves one packet per packet time while two arrive, so once Q packets
 * wait, every second arrival is dropped. Accepted = served + queued =
 * N + Q (within a packet at either end), dropped = 2N - accepted.
 */
static void test_droptail_overload(void **state)
{
    (void)state;
    struct ub_sim sim;
    assert_int_equal(ub_sim_init(&sim, 3), 0);
    struct ub_sim_topo_cfg t = {
        .kind = UB_SIM_TOPO_LEAFSPINE, .leaves = 1, .spines = 1, .hosts_per_leaf = 3};
    const uint32_t Q = 40, N = 1000;
    struct ub_sim_qcfg q = {.limit = Q * MTU}; /* drop-tail: no trimming, no ECN */
    assert_int_equal(ub_sim_topo_build(&sim, &t, &q), 0);
    uint32_t left[3] = {0}, flow[3] = {0};
    struct cbr c = {left, flow};
    ub_sim_set_transport(&sim, &cbr_ops, &c);
    assert_true(ub_sim_add_flow(&sim, 0, 0, 2, (uint64_t)N * MTU, 0) >= 0);
    assert_true(ub_sim_add_flow(&sim, 0, 1, 2, (uint64_t)N * MTU, 0) >= 0);
    assert_int_equal(ub_sim_start(&sim), 0);

    /* Mid-run the books balance too. */
    ub_sim_run(&sim, 100 * UB_SIM_PS_PER_US);
    conservation(&sim);
    assert_true(ub_sim_run(&sim, UB_SIM_NEVER));
    conservation(&sim);
    uint64_t drops = sim.ctr.drops, expect = N - Q;
    assert_int_equal(sim.ctr.injected, 2 * N);
    assert_int_equal(sim.ctr.delivered + drops, 2 * N);
    assert_true(drops + 2 >= expect && drops <= expect + 2);
    const struct ub_sim_port *bott = &sim.ports[sim.rt.host_port[2]];
    assert_int_equal(bott->st.max_qbytes, (uint64_t)Q * MTU);
    assert_int_equal(bott->st.drops, drops);
    /* The last packet leaves when the port has sent everything it accepted. */
    uint64_t ser = ub_sim_port_ser(bott, MTU);
    assert_true(ub_sim_now(&sim) >= sim.ctr.delivered * ser);
    assert_int_equal(sim.pool.out, 0);
    ub_sim_fini(&sim);
}

/* 8 -> 1 with trimming: everyone finishes, the bottleneck never exceeds its limit. */
static void test_incast_bounded(void **state)
{
    (void)state;
    struct ub_sim sim;
    assert_int_equal(ub_sim_init(&sim, 11), 0);
    struct ub_sim_topo_cfg t = {.kind = UB_SIM_TOPO_FATTREE, .k = 4};
    const uint64_t limit = 43 * MTU;
    struct ub_sim_qcfg q = {
        .limit = limit, .kmin = limit / 5, .kmax = limit * 4 / 5, .trim = true, .prio_ctrl = true};
    assert_int_equal(ub_sim_topo_build(&sim, &t, &q), 0);
    struct ub_sim_reftp_cfg c = ref_cfg(&sim, true, 8);
    c.window = 64 * MTU;
    assert_int_equal(ub_sim_reftp_create(&sim, &c, NULL), 0);
    assert_int_equal(ub_sim_wl_incast(&sim, 8, 0, 1000000, 0), 0);
    assert_int_equal(ub_sim_start(&sim), 0);
    assert_true(ub_sim_run(&sim, UB_SIM_NEVER));
    assert_int_equal(sim.flows_done, 8);
    const struct ub_sim_port *bott = &sim.ports[sim.rt.host_port[0]];
    assert_true(bott->st.max_qbytes <= limit);
    assert_true(bott->st.trims > 0);
    /* 8 MB through one 100 Gb/s port: the last flow cannot beat the bottleneck. */
    uint64_t last = 0;
    for (uint32_t i = 0; i < sim.nflows; i++)
        if (sim.flows[i].end > last)
            last = sim.flows[i].end;
    uint64_t floor = ub_sim_port_ser(bott, 8ULL * 1000000);
    assert_true(last >= floor);
    assert_true(last <= floor * 2); /* and trimming keeps it efficient */
    conservation(&sim);
    assert_int_equal(ub_sim_in_network(&sim), 0);
    assert_int_equal(sim.pool.out, 0);
    ub_sim_fini(&sim);
}

/* A core link and then a whole aggregation switch die mid-run; every flow still completes. */
static void test_failures_mid_run(void **state)
{
    (void)state;
    struct ub_sim sim;
    assert_int_equal(ub_sim_init(&sim, 5), 0);
    struct ub_sim_topo_cfg t = {.kind = UB_SIM_TOPO_FATTREE, .k = 4};
    struct ub_sim_qcfg q = {
        .limit = 50 * MTU, .kmin = 10 * MTU, .kmax = 40 * MTU, .trim = true, .prio_ctrl = true};
    assert_int_equal(ub_sim_topo_build(&sim, &t, &q), 0);
    struct ub_sim_reftp_cfg c = ref_cfg(&sim, true, 16);
    c.rto = 50 * UB_SIM_PS_PER_US;
    assert_int_equal(ub_sim_reftp_create(&sim, &c, NULL), 0);
    assert_int_equal(ub_sim_wl_permutation(&sim, 500000, 0), 0);
    /* k=4: hosts 0-15, edges 16-23, aggs 24-31, cores 32-35. Agg 24 (pod 0) reaches cores 32, 33.
     */
    struct ub_sim_fail link = {
        .time = 10 * UB_SIM_PS_PER_US, .kind = UB_SIM_FAIL_LINK_DOWN, .a = 24, .b = 32};
    struct ub_sim_fail sw = {
        .time = 20 * UB_SIM_PS_PER_US, .kind = UB_SIM_FAIL_SWITCH_DOWN, .a = 27};
    struct ub_sim_fail slow = {.time = 15 * UB_SIM_PS_PER_US,
                               .kind = UB_SIM_FAIL_LINK_RATE,
                               .a = 26,
                               .b = 34,
                               .rate = 25 * GBPS};
    assert_int_equal(ub_sim_add_fail(&sim, &link), 0);
    assert_int_equal(ub_sim_add_fail(&sim, &sw), 0);
    assert_int_equal(ub_sim_add_fail(&sim, &slow), 0);
    assert_int_equal(ub_sim_start(&sim), 0);
    ub_sim_run(&sim, 30 * UB_SIM_PS_PER_US);
    conservation(&sim);
    assert_true(sim.ctr.fail_drops > 0);
    assert_true(ub_sim_run(&sim, 100000 * UB_SIM_PS_PER_US));
    assert_int_equal(sim.flows_done, sim.nflows);
    conservation(&sim);
    ub_sim_fini(&sim);
}

/* Per-packet spraying with ECMP over a permutation: the books balance at every checkpoint. */
static void test_conservation_permutation(void **state)
{
    (void)state;
    struct ub_sim sim;
    assert_int_equal(ub_sim_init(&sim, 9), 0);
    struct ub_sim_topo_cfg t = {.kind = UB_SIM_TOPO_FATTREE, .k = 6, .oversub = 2};
    struct ub_sim_qcfg q = {.limit = 20 * MTU,
                            .kmin = 4 * MTU,
                            .kmax = 16 * MTU,
                            .trim = true,
                            .prio_ctrl = true,
                            .loss_ppm = 200};
    assert_int_equal(ub_sim_topo_build(&sim, &t, &q), 0);
    assert_int_equal(sim.nhosts, 108);
    struct ub_sim_reftp_cfg c = ref_cfg(&sim, true, 32);
    c.rto = 40 * UB_SIM_PS_PER_US;
    assert_int_equal(ub_sim_reftp_create(&sim, &c, NULL), 0);
    assert_int_equal(ub_sim_wl_permutation(&sim, 300000, 0), 0);
    assert_int_equal(ub_sim_start(&sim), 0);
    for (uint64_t t_us = 5; t_us < 400; t_us += 23) {
        ub_sim_run(&sim, t_us * UB_SIM_PS_PER_US);
        conservation(&sim);
    }
    assert_true(ub_sim_run(&sim, UB_SIM_NEVER));
    conservation(&sim);
    assert_int_equal(sim.flows_done, sim.nflows);
    assert_true(sim.ctr.trims > 0);
    assert_true(sim.ctr.marks > 0);
    assert_true(sim.ctr.corrupt_drops > 0);
    assert_int_equal(ub_sim_in_network(&sim), 0);
    assert_int_equal(sim.pool.out, 0);
    ub_sim_fini(&sim);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_flow_dumbbell),
        cmocka_unit_test(test_single_flow_fattree),
        cmocka_unit_test(test_droptail_overload),
        cmocka_unit_test(test_incast_bounded),
        cmocka_unit_test(test_failures_mid_run),
        cmocka_unit_test(test_conservation_permutation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
