/*
 * C-AQM in the fabric: the switch rule at egress on a queue of known depth (exact), the
 * reference transport's reaction (a 16-to-1 incast keeps the bottleneck queue below 2 BDP once
 * the first window's burst has drained, where a fixed window holds it above 8 BDP), and the
 * softub engine's requests carrying the fields through the switches.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/engine.h"
#include "sim/link.h"
#include "sim/reftp.h"
#include "sim/sim.h"
#include "sim/softub_host.h"
#include "sim/topo.h"
#include "sim/workload.h"

#define MTU  4096u
#define RATE 100000000000ULL

/* The bottleneck's egress port: the leaf's port facing host 0. */
static struct ub_sim_port *port_to(struct ub_sim *sim, uint32_t host)
{
    return &sim->ports[sim->rt.host_port[host]];
}

static uint64_t bdp_of(struct ub_sim *sim, uint64_t *base_rtt)
{
    *base_rtt = ub_sim_ideal_fct(sim, 0, sim->nhosts - 1, MTU - 64, MTU, 64, 64);
    return RATE / 8 * *base_rtt / UB_SIM_PS_PER_S;
}

/*
 * Ten requests asking for more (I) at 100 Gb/s are queued at a switch port whose C-AQM band is
 * (8 KiB, 16 KiB]: each is marked on the bytes it leaves behind, as ub__caqm_switch_mark says.
 */
static void test_switch_marks_on_queue_depth(void **state)
{
    (void)state;
    struct ub_sim sim;
    assert_int_equal(ub_sim_init(&sim, 1), 0);
    struct ub_sim_topo_cfg t = {.kind = UB_SIM_TOPO_DUMBBELL, .hosts = 1};
    struct ub_sim_qcfg q = {.limit = 1 << 20, .caqm = true, .caqm_kmin = 8192, .caqm_kmax = 16384};
    assert_int_equal(ub_sim_topo_build(&sim, &t, &q), 0);
    struct ub_sim_port *port = port_to(&sim, 1);
    uint16_t h = ub__caqm_hint_encode(RATE);
    for (uint32_t i = 0; i < 10; i++) {
        struct ub_sim_pkt *p = ub_sim_pkt_alloc(&sim);
        p->src = 0;
        p->dst = 1;
        p->size = MTU;
        p->seq = i;
        p->aqm = UB_SIM_AQM_VALID | UB_SIM_AQM_I;
        p->hint = h;
        ub_sim_port_enqueue(&sim, port, p); /* the first goes straight to the wire */
    }
    assert_int_equal(port->qbytes, 9 * MTU);
    for (uint32_t i = 1; i < 10; i++) {
        struct ub_sim_pkt *p = ub_sim_port_dequeue(&sim, port);
        assert_non_null(p);
        uint64_t left = (uint64_t)(9 - i) * MTU;
        if (left > 16384) { /* above kmax: C, no I, hint = h x kmax / q (at least h / 2) */
            assert_int_equal(p->aqm, UB_SIM_AQM_VALID | UB_SIM_AQM_C);
            uint64_t want = RATE * 16384 / left;
            if (want < RATE / 2)
                want = RATE / 2;
            assert_int_equal(p->hint, ub__caqm_hint_encode(want));
        } else if (left > 8192) { /* in the band: the increase is refused */
            assert_int_equal(p->aqm, UB_SIM_AQM_VALID);
            assert_int_equal(p->hint, h);
        } else { /* at or below kmin: granted, untouched */
            assert_int_equal(p->aqm, UB_SIM_AQM_VALID | UB_SIM_AQM_I);
            assert_int_equal(p->hint, h);
        }
        ub_sim_pkt_free(&sim, p);
    }
    /* left after each: 32, 28, 24, 20 KiB (C) | 16, 12 KiB (hold) | 8, 4, 0 KiB */
    assert_int_equal(port->st.caqm_c, 4);
    assert_int_equal(port->st.caqm_hold, 6);
    ub_sim_fini(&sim);
}

struct incast {
    uint64_t bdp, warm_max, after_max, last_end, ideal_all;
    uint32_t done;
    uint64_t c, hold, echoes;
};

/* 16 hosts send 4 MB each to host 0 over a leaf-spine with deep queues (no trimming, no loss). */
static void incast16(bool caqm, struct incast *o)
{
    struct ub_sim sim;
    assert_int_equal(ub_sim_init(&sim, 3), 0);
    struct ub_sim_topo_cfg t = {
        .kind = UB_SIM_TOPO_LEAFSPINE, .leaves = 3, .spines = 2, .hosts_per_leaf = 8};
    struct ub_sim_qcfg q = {.limit = 1 << 30};
    assert_int_equal(ub_sim_topo_build(&sim, &t, &q), 0);
    uint64_t base_rtt;
    o->bdp = bdp_of(&sim, &base_rtt);
    q.limit = 200 * o->bdp; /* never full: the queue shows what the senders do */
    q.kmin = o->bdp / 5;
    q.kmax = o->bdp * 4 / 5;
    q.caqm = caqm;
    ub_sim_set_queues(&sim, &q);
    struct ub_sim_reftp_cfg c = {
        .mtu = MTU,
        .window = (o->bdp * 3 / 2 / MTU + 1) * MTU,
        .base_rtt = base_rtt,
        .rto = 1000 * UB_SIM_PS_PER_US,
        .caqm = caqm,
    };
    struct ub_sim_reftp *tp;
    assert_int_equal(ub_sim_reftp_create(&sim, &c, &tp), 0);
    const uint64_t size = 4000000;
    assert_int_equal(ub_sim_wl_incast(&sim, 16, 0, size, 0), 0);
    sim.stop_when_done = true;
    assert_int_equal(ub_sim_start(&sim), 0);
    /* The first windows (16 x 1.5 BDP) arrive before any feedback can: let them drain. */
    const uint64_t warm = 600 * UB_SIM_PS_PER_US;
    ub_sim_run(&sim, warm);
    struct ub_sim_port *b = port_to(&sim, 0);
    o->warm_max = b->st.max_qbytes;
    b->st.max_qbytes = b->qbytes;
    ub_sim_run(&sim, UB_SIM_NEVER);
    o->after_max = b->st.max_qbytes;
    o->done = sim.flows_done;
    o->last_end = 0;
    for (uint32_t i = 0; i < sim.nflows; i++)
        if (sim.flows[i].end > o->last_end)
            o->last_end = sim.flows[i].end;
    /* Everything through one 100 Gb/s port: packets of MTU - 64 payload bytes. */
    uint64_t pkts = 16 * ((size + MTU - 64 - 1) / (MTU - 64));
    o->ideal_all = pkts * MTU * 8 * (UB_SIM_PS_PER_S / RATE);
    o->c = sim.ctr.caqm_c;
    o->hold = sim.ctr.caqm_hold;
    o->echoes = ub_sim_reftp_stats(tp)->caqm_c_echoes;
    ub_sim_fini(&sim);
}

static void test_incast_queue_below_2bdp(void **state)
{
    (void)state;
    struct incast a, f;
    incast16(true, &a);
    incast16(false, &f);
    print_message("bdp %llu B; caqm: first %llu us max %llu B, then max %llu B (%.2f BDP), "
                  "done at %.1f us (all bytes at line rate: %.1f us); fixed window: then max "
                  "%llu B (%.1f BDP)\n",
                  (unsigned long long)a.bdp, 600ULL, (unsigned long long)a.warm_max,
                  (unsigned long long)a.after_max, (double)a.after_max / (double)a.bdp,
                  (double)a.last_end / 1e6, (double)a.ideal_all / 1e6,
                  (unsigned long long)f.after_max, (double)f.after_max / (double)f.bdp);
    assert_int_equal(a.done, 16);
    assert_int_equal(f.done, 16);
    assert_true(a.after_max < 2 * a.bdp);
    assert_true(f.after_max > 8 * f.bdp);
    /* The bottleneck never idles for long: within 5 % of line rate for all 64 MB. */
    assert_true(a.last_end * 100 <= a.ideal_all * 105);
    assert_true(a.c > 0 && a.hold > 0 && a.echoes > 0);
    assert_int_equal(f.c + f.hold + f.echoes, 0);
}

/* The softub engine's requests carry their extension header's C-AQM fields through the switches
 * and every engine still parses every packet. */
static void test_softub_requests_are_marked(void **state)
{
    (void)state;
    struct ub_sim sim;
    assert_int_equal(ub_sim_init(&sim, 5), 0);
    struct ub_sim_topo_cfg t = {.kind = UB_SIM_TOPO_DUMBBELL, .hosts = 4};
    struct ub_sim_qcfg q = {.limit = 4 << 20, .caqm = true, .caqm_kmin = 8192, .caqm_kmax = 32768};
    assert_int_equal(ub_sim_topo_build(&sim, &t, &q), 0);
    struct ub_sim_softub_cfg c = {
        .mtu = MTU, .window = 32, .virtual_payload = true, .cc = "caqm", .base_rtt_ns = 10000};
    struct ub_sim_softub *s;
    assert_int_equal(ub_sim_softub_create(&sim, &c, &s), 0);
    for (uint32_t i = 0; i < 4; i++)
        assert_true(ub_sim_add_flow(&sim, 0, i, 4, 300000, 0) >= 0);
    sim.stop_when_done = true;
    assert_int_equal(ub_sim_start(&sim), 0);
    ub_sim_run(&sim, UB_SIM_NEVER);
    assert_int_equal(sim.flows_done, 4);
    assert_true(sim.ctr.caqm_c > 0);
    for (uint32_t h = 0; h < sim.nhosts; h++)
        assert_int_equal(ub_sim_softub_engine(s, h)->stats.rx_malformed, 0);
    ub_sim_fini(&sim);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_switch_marks_on_queue_depth),
        cmocka_unit_test(test_incast_queue_below_2bdp),
        cmocka_unit_test(test_softub_requests_are_marked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
