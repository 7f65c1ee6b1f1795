/*
 * Congestion control and load balancing through real engines on a simulated fabric: the
 * acceptance figures of docs/algorithms.md ("Measured"), asserted.
 *
 * Every host runs a struct ub__engine (sim/softub_host.c): flows are RUD messages through PDS,
 * which drives NSCC and the load balancer. The fabric is set up as `softub-sim --transport
 * softub` sets it up: 100 Gb/s, 1 us links, 4 KiB MTU, queues of 1 BDP that trim, ECN between
 * 0.2 and 0.8 BDP at dequeue, PDS window 1.5 BDP, minimum RTO 15 us + 6 queue drains.
 *
 *  - one flow: payload goodput >= 95 % of the line rate;
 *  - 8 -> 1 incast, NSCC: Jain's index of the senders' rates over the steady part >= 0.95, the
 *    bottleneck queue's mean below kmax (0.8 BDP) and its peak at most the trimming threshold
 *    (1 BDP);
 *  - permutation on a k = 8 fat tree: REPS and oblivious spraying over 128 EVs finish the
 *    slowest flow at least 3x sooner than a single path;
 *  - one aggregation-core link degraded to 10 Gb/s: REPS and bitmap put fewer bytes on it than
 *    oblivious spraying, and their slowest flow finishes sooner.
 *
 * Under AddressSanitizer the sizes shrink (the claims stay the same).
 */
#include <stdarg.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <setjmp.h>
#include <cmocka.h>

#include "cms/cc.h"
#include "engine/engine.h"
#include "sim/sim.h"
#include "sim/softub_host.h"
#include "sim/topo.h"
#include "sim/workload.h"

#if defined(__SANITIZE_ADDRESS__)
#define CC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CC_ASAN 1
#endif
#endif
#ifndef CC_ASAN
#define CC_ASAN 0
#endif

#define MTU   4096u
#define GBPS  1000000000ULL
#define SLICE (10 * UB_SIM_PS_PER_US)

struct fab {
    struct ub_sim sim;
    struct ub_sim_softub *s;
    uint64_t bdp;      /* bytes: longest path's one-packet RTT x line rate */
    uint64_t base_rtt; /* ps */
    struct ub_sim_qcfg q;
};

/* A k-ary fat tree with htsim's queues and engines configured as softub-sim does. */
static void fab_init_q(struct fab *f, uint32_t k, uint64_t seed, const char *cc, const char *lb,
                       uint32_t paths, bool trim, bool caqm)
{
    assert_int_equal(ub_sim_init(&f->sim, seed), 0);
    struct ub_sim_topo_cfg t = {.kind = UB_SIM_TOPO_FATTREE, .k = k};
    struct ub_sim_qcfg q0 = {.limit = 1ULL << 30};
    assert_int_equal(ub_sim_topo_build(&f->sim, &t, &q0), 0);
    struct ub_sim *sim = &f->sim;
    f->base_rtt = ub_sim_ideal_fct(sim, 0, sim->nhosts - 1, MTU - 64, MTU, 64, 64);
    f->bdp = sim->ports[0].rate / 8 * f->base_rtt / UB_SIM_PS_PER_S;
    struct ub_sim_qcfg q = {
        .limit = trim ? f->bdp : 5 * f->bdp, /* htsim: 1 BDP with trimming, else 5 */
        .kmin = f->bdp / 5,
        .kmax = f->bdp * 4 / 5,
        .trim = trim,
        .prio_ctrl = trim,
        .caqm = caqm,
        .caqm_kmin = f->bdp / 5,
        .caqm_kmax = f->bdp * 4 / 5,
    };
    f->q = q;
    ub_sim_set_queues(sim, &q);
    struct ub_sim_softub_cfg c = {
        .mtu = MTU,
        .paths = paths,
        .window = (uint32_t)((f->bdp * 3 / 2 + MTU - 1) / MTU),
        .rto_min_ns = (15 * UB_SIM_PS_PER_US + 6 * ub_sim_port_ser(&sim->ports[0], q.limit)) /
                      UB_SIM_PS_PER_NS,
        .trimming = trim,
        .cc = cc,
        .lb = lb,
        .base_rtt_ns = f->base_rtt / UB_SIM_PS_PER_NS,
    };
    assert_int_equal(ub_sim_softub_create(sim, &c, &f->s), 0);
}

static void fab_init(struct fab *f, uint32_t k, uint64_t seed, const char *cc, const char *lb,
                     uint32_t paths)
{
    fab_init_q(f, k, seed, cc, lb, paths, true, false);
}

/* The unloaded RTT between two hosts of f's fabric, for PDS's per-peer NSCC base RTT. */
struct peer_rtt {
    struct fab *f;
    uint32_t host;
};

static uint64_t peer_rtt_fn(void *arg, const struct ub__addr *peer)
{
    const struct peer_rtt *pr = arg;
    struct ub_sim *sim = &pr->f->sim;
    if (peer->family != UB_AF_LOOP || peer->port >= sim->nhosts)
        return 0;
    return ub_sim_ideal_fct(sim, pr->host, peer->port, MTU - 64, MTU, 64, 64) / UB_SIM_PS_PER_NS;
}

/* Gives every host's PDS the fabric's per-pair base RTTs (pr: one per host, kept alive). */
static void fab_peer_rtts(struct fab *f, struct peer_rtt *pr)
{
    for (uint32_t h = 0; h < f->sim.nhosts; h++) {
        pr[h] = (struct peer_rtt){.f = f, .host = h};
        ub__pds_set_peer_rtt(ub_sim_softub_engine(f->s, h)->pds, peer_rtt_fn, &pr[h]);
    }
}

/* Runs to completion and checks that every packet was acknowledged once, none failed. */
static void fab_finish(struct fab *f)
{
    struct ub_sim *sim = &f->sim;
    assert_true(ub_sim_run(sim, UB_SIM_NEVER));
    assert_int_equal(sim->flows_done, sim->nflows);
    const struct ub_sim_softub_stats *st = ub_sim_softub_stats(f->s);
    assert_int_equal(st->pkts_acked, st->pkts_queued);
    assert_int_equal(st->pkts_failed, 0);
    assert_int_equal(st->send_errors, 0);
    assert_int_equal(sim->ctr.injected, sim->ctr.delivered + sim->ctr.drops + sim->ctr.fail_drops +
                                            sim->ctr.corrupt_drops + sim->ctr.noroute_drops +
                                            ub_sim_in_network(sim));
}

static uint64_t max_fct(const struct ub_sim *sim)
{
    uint64_t m = 0;
    for (uint32_t i = 0; i < sim->nflows; i++) {
        uint64_t d = sim->flows[i].end - sim->flows[i].start;
        if (d > m)
            m = d;
    }
    return m;
}

/* The port of node a that leads to node b. */
static struct ub_sim_port *port_to(struct ub_sim *sim, uint32_t a, uint32_t b)
{
    const struct ub_sim_node *n = &sim->nodes[a];
    for (uint32_t i = 0; i < n->nports; i++)
        if (sim->ports[n->port_base + i].peer == b)
            return &sim->ports[n->port_base + i];
    fail_msg("no link %u -> %u", a, b);
    return NULL;
}

static double us(uint64_t ps)
{
    return (double)ps / (double)UB_SIM_PS_PER_US;
}

/* One long flow across the fat tree (host 0 to the last host, 6 hops): >= 95 % of line rate. */
static void test_single_flow_line_rate(void **state)
{
    (void)state;
    /* Full size even under sanitizers: one flow is cheap, and a fixed few-us tail (the last
     * ACK) would cost a short flow more than the 5 % this test allows. */
    const uint64_t size = 20000000;
    struct fab f;
    fab_init(&f, 4, 1, "nscc", "reps", 128);
    struct ub_sim *sim = &f.sim;
    assert_true(ub_sim_add_flow(sim, 0, 0, sim->nhosts - 1, size, 0) >= 0);
    assert_int_equal(ub_sim_start(sim), 0);
    fab_finish(&f);
    uint64_t fct = sim->flows[0].end - sim->flows[0].start;
    double goodput = (double)size * 8.0 / ((double)fct / (double)UB_SIM_PS_PER_S);
    double frac = goodput / (double)sim->ports[0].rate;
    print_message(
        "single flow %" PRIu64 " B: fct %.3f us (ideal %.3f), goodput %.2f Gb/s = %.2f %% "
        "of line rate, trims %" PRIu64 "\n",
        size, us(fct), us(sim->flows[0].ideal), goodput / 1e9, 100.0 * frac, sim->ctr.trims);
    assert_true(frac >= 0.95);
    assert_true((double)fct <= 1.01 * (double)sim->flows[0].ideal);
    ub_sim_fini(sim);
}

static double jain(const double *x, uint32_t n)
{
    double s = 0, s2 = 0;
    for (uint32_t i = 0; i < n; i++) {
        s += x[i];
        s2 += x[i] * x[i];
    }
    return s2 > 0 ? s * s / ((double)n * s2) : 1.0;
}

struct incast_res {
    double jain, qmean_bdp, qmax_bdp, fct_min_us, fct_max_us;
};

/*
 * n -> 1 incast to host 0 from the hosts in src[], `size` bytes each, on a k = 4 fat tree under
 * `cc`. Each sender's rate is measured at its NIC over the second half of the time before the
 * first completion (the first half is the convergence from the synchronised start); the
 * receiver's downlink queue is sampled every 10 us over the same window.
 */
static void incast_run(const char *label, const uint32_t *src, uint32_t n, uint64_t size,
                       const char *cc, bool peer_rtts, struct incast_res *r)
{
    enum { MAXN = 16, MAXS = 4096 };
    struct fab f;
    static struct peer_rtt pr[16];
    fab_init(&f, 4, 1, cc, "reps", 128);
    struct ub_sim *sim = &f.sim;
    if (peer_rtts)
        fab_peer_rtts(&f, pr);
    assert_true(n <= MAXN);
    for (uint32_t i = 0; i < n; i++)
        assert_true(ub_sim_add_flow(sim, 0, src[i], 0, size, 0) >= 0);
    assert_int_equal(ub_sim_start(sim), 0);
    struct ub_sim_port *down = &sim->ports[sim->rt.host_port[0]];
    /* Per slice: the senders' NIC byte counters and the bottleneck queue. */
    static uint64_t tx[MAXS][MAXN], qb[MAXS];
    uint32_t ns = 0, first = 0;
    uint64_t t = 0;
    bool idle = false;
    while (!idle) {
        t += SLICE;
        idle = ub_sim_run(sim, t);
        if (!first && sim->flows_done)
            first = ns; /* slices [0, first) end before any completion */
        if (ns < MAXS) {
            for (uint32_t i = 0; i < n; i++)
                tx[ns][i] = sim->ports[sim->nodes[src[i]].port_base].st.tx_bytes;
            qb[ns] = down->qbytes;
            ns++;
        }
    }
    assert_true(first >= 40 && first < MAXS);
    uint32_t a = first / 2, b = first - 1;
    double rate[MAXN], qmean = 0;
    for (uint32_t i = 0; i < n; i++)
        rate[i] = (double)(tx[b][i] - tx[a][i]) * 8.0 /
                  ((double)((b - a) * SLICE) / (double)UB_SIM_PS_PER_S);
    for (uint32_t k = a + 1; k <= b; k++)
        qmean += (double)qb[k];
    qmean /= (double)(b - a);
    uint64_t fmin = UINT64_MAX, fmax = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t d = sim->flows[i].end - sim->flows[i].start;
        fmin = d < fmin ? d : fmin;
        fmax = d > fmax ? d : fmax;
    }
    r->jain = jain(rate, n);
    r->qmean_bdp = qmean / (double)f.bdp;
    r->qmax_bdp = (double)down->st.max_qbytes / (double)f.bdp;
    r->fct_min_us = us(fmin);
    r->fct_max_us = us(fmax);
    print_message("%s, %u->1 %" PRIu64 " B, cc %s: window %.0f..%.0f us, rates (Gb/s)", label, n,
                  size, cc, us((a + 1) * SLICE), us((b + 1) * SLICE));
    for (uint32_t i = 0; i < n; i++)
        print_message(" %.2f", rate[i] / 1e9);
    print_message("\n  jain %.4f, queue mean %.0f B (%.2f BDP) max %" PRIu64
                  " B (%.2f BDP), fct min %.1f max %.1f us, trims %" PRIu64 "\n",
                  r->jain, qmean, r->qmean_bdp, down->st.max_qbytes, r->qmax_bdp, r->fct_min_us,
                  r->fct_max_us, sim->ctr.trims);
    fab_finish(&f);
    ub_sim_fini(sim);
}

/*
 * 8 -> 1 incast under NSCC, 4 MB each. Jain's index of the eight rates >= 0.95; the receiver's
 * downlink queue averages at most 0.9 BDP (NSCC holds it near its target delay, 0.75 of the
 * fabric's base RTT, i.e. 0.75 BDP) and never exceeds the trimming threshold (1 BDP).
 *  - same distance: hosts 8..15 (pods 2 and 3: six hops, one base RTT for all);
 *  - mixed distances: hosts 1..8 (one on the receiver's edge switch, two more in its pod, five
 *    across the core): base RTTs 6.0, 10.0 and 14.0 us.
 */
static void test_incast_fair_bounded(void **state)
{
    (void)state;
    static const uint32_t same[8] = {8, 9, 10, 11, 12, 13, 14, 15};
    static const uint32_t mixed[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    struct incast_res r;
    incast_run("incast same distance", same, 8, 4000000, "nscc", false, &r);
    assert_true(r.jain >= 0.95);
    assert_true(r.qmean_bdp <= 0.9);
    assert_true(r.qmax_bdp <= 1.0);
    incast_run("incast mixed distances, learned base RTTs", mixed, 8, 4000000, "nscc", false, &r);
    double learned = r.jain;
    incast_run("incast mixed distances, per-peer base RTTs", mixed, 8, 4000000, "nscc", true, &r);
    assert_true(r.jain >= 0.95);
    assert_true(r.qmean_bdp <= 0.9);
    assert_true(r.qmax_bdp <= 1.0);
    /* Learned from samples, the base RTTs carry the start-up queueing: not fair (0.81). */
    assert_true(learned < r.jain);
}

/* Permutation traffic on a k = 8 fat tree (128 hosts): the slowest flow of each balancer. */
static uint64_t perm_max_fct(const char *lb, uint32_t paths, uint64_t size)
{
    struct fab f;
    fab_init(&f, 8, 1, "nscc", lb, paths);
    struct ub_sim *sim = &f.sim;
    assert_int_equal(ub_sim_wl_permutation(sim, size, 0), 0);
    assert_int_equal(ub_sim_start(sim), 0);
    fab_finish(&f);
    uint64_t m = max_fct(sim);
    print_message("permutation k=8 %" PRIu64 " B %-9s paths %3u: max fct %.1f us, trims %" PRIu64
                  "\n",
                  size, lb, paths, us(m), sim->ctr.trims);
    ub_sim_fini(sim);
    return m;
}

static void test_permutation_spraying_tail(void **state)
{
    (void)state;
    const uint64_t size = CC_ASAN ? 500000 : 1000000;
    uint64_t single = perm_max_fct("single", 1, size);
    uint64_t obl = perm_max_fct("oblivious", 128, size);
    uint64_t reps = perm_max_fct("reps", 128, size);
    print_message("  tail ratio single/oblivious %.2f, single/reps %.2f\n",
                  (double)single / (double)obl, (double)single / (double)reps);
    assert_true(single >= 3 * obl);
    assert_true(single >= 3 * reps);
}

struct degr {
    uint64_t bytes; /* over the degraded link, both directions */
    uint64_t max_fct;
};

/*
 * k = 4 fat tree, permutation of 2 MB flows; the link between aggregation switch 0 of pod 0
 * (node 24) and core 0 (node 32) runs at 10 Gb/s from the start.
 */
static void degraded(const char *lb, uint64_t size, struct degr *d)
{
    struct fab f;
    fab_init(&f, 4, 1, "nscc", lb, 128);
    struct ub_sim *sim = &f.sim;
    const uint32_t agg = 16 + 8, core = 16 + 8 + 8;
    struct ub_sim_fail x = {.kind = UB_SIM_FAIL_LINK_RATE, .a = agg, .b = core, .rate = 10 * GBPS};
    assert_int_equal(ub_sim_add_fail(sim, &x), 0);
    assert_int_equal(ub_sim_wl_permutation(sim, size, 0), 0);
    assert_int_equal(ub_sim_start(sim), 0);
    fab_finish(&f);
    struct ub_sim_port *up = port_to(sim, agg, core), *dn = port_to(sim, core, agg);
    assert_int_equal(up->rate, 10 * GBPS);
    d->bytes = up->st.tx_bytes + dn->st.tx_bytes;
    d->max_fct = max_fct(sim);
    print_message("degraded link %u<->%u 10 Gb/s, %-9s: %" PRIu64
                  " B over it, max fct %.1f us, trims %" PRIu64 "\n",
                  agg, core, lb, d->bytes, us(d->max_fct), sim->ctr.trims);
    ub_sim_fini(sim);
}

static void test_degraded_link_steering(void **state)
{
    (void)state;
    const uint64_t size = CC_ASAN ? 1000000 : 2000000;
    struct degr obl, reps, bm;
    degraded("oblivious", size, &obl);
    degraded("reps", size, &reps);
    degraded("bitmap", size, &bm);
    /* At least 15 % less on the slow link, and a shorter tail. */
    assert_true(reps.bytes * 100 <= obl.bytes * 85);
    assert_true(bm.bytes * 100 <= obl.bytes * 85);
    assert_true(reps.max_fct < obl.max_fct);
    assert_true(bm.max_fct < obl.max_fct);
}

struct aqm_res {
    double qmax_bdp, qmax_all_bdp, qmean_bdp, p50_us, max_us, ideal_us;
};

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/*
 * 16 -> 1 incast (hosts 1..16 -> 0) on a k = 6 fat tree without trimming: 5 BDP queues that
 * drop (htsim's default without trimming), ECN 0.2-0.8 BDP, C-AQM marking on the same band when
 * `caqm`. The receiver's downlink queue: its peak over the whole run, and its peak and mean
 * after the start-up transient (`warm` us: every sender opens with a full 1.5 BDP window, 24 BDP
 * in all, before any feedback can exist).
 */
static void aqm_incast(const char *cc, bool caqm, uint64_t size, uint64_t warm_us,
                       struct aqm_res *r)
{
    enum { N = 16 };
    struct fab f;
    fab_init_q(&f, 6, 1, cc, "reps", 128, false, caqm);
    struct ub_sim *sim = &f.sim;
    assert_int_equal(ub_sim_wl_incast(sim, N, 0, size, 0), 0);
    assert_int_equal(ub_sim_start(sim), 0);
    struct ub_sim_port *down = &sim->ports[sim->rt.host_port[0]];
    uint64_t t = 0, qsum = 0, nq = 0, all = 0;
    bool idle = false;
    while (!idle) {
        t += SLICE;
        idle = ub_sim_run(sim, t);
        if (t == warm_us * UB_SIM_PS_PER_US) {
            all = down->st.max_qbytes;
            down->st.max_qbytes = down->qbytes; /* the peak from here on */
        }
        if (t > warm_us * UB_SIM_PS_PER_US && !sim->flows_done) {
            qsum += down->qbytes;
            nq++;
        }
    }
    uint64_t fct[N];
    for (uint32_t i = 0; i < N; i++)
        fct[i] = sim->flows[i].end - sim->flows[i].start;
    qsort(fct, N, sizeof(fct[0]), cmp_u64);
    r->qmax_bdp = (double)down->st.max_qbytes / (double)f.bdp;
    r->qmax_all_bdp =
        (double)(all > down->st.max_qbytes ? all : down->st.max_qbytes) / (double)f.bdp;
    r->qmean_bdp = nq ? (double)qsum / (double)nq / (double)f.bdp : 0;
    r->p50_us = us(fct[N / 2 - 1]);
    r->max_us = us(fct[N - 1]);
    /* Ideal: the bottleneck carries all N x size, back to back, from t = 0. */
    r->ideal_us =
        us(ub_sim_ideal_fct(sim, 1, 0, N * size, MTU, UB_SIM_SOFTUB_HDR, UB_SIM_SOFTUB_MIN_FRAME));
    const struct ub__pds_stats *ps = ub__pds_stats(ub_sim_softub_engine(f.s, 1)->pds);
    print_message("incast 16->1 %" PRIu64 " B no trim, cc %-5s%s: queue max %.2f BDP (whole run "
                  "%.2f), mean %.2f BDP after %" PRIu64 " us; fct p50 %.1f max %.1f us; drops "
                  "%" PRIu64 ", host 1 retx %" PRIu64 "; ideal %.1f us; C marks %" PRIu64 "\n",
                  size, cc, caqm ? " +caqm" : "      ", r->qmax_bdp, r->qmax_all_bdp, r->qmean_bdp,
                  warm_us, r->p50_us, r->max_us, sim->ctr.drops, ps->retx_pkts, r->ideal_us,
                  sim->ctr.caqm_c);
    fab_finish(&f);
    ub_sim_fini(sim);
}

static void test_caqm_incast_queue(void **state)
{
    (void)state;
    const uint64_t size = 2000000, warm = 200;
    struct aqm_res none, nscc, caqm;
    aqm_incast("none", false, size, warm, &none);
    aqm_incast("nscc", false, size, warm, &nscc);
    aqm_incast("caqm", true, size, warm, &caqm);
    /*
     * C-AQM through PDS end to end: requests carry I and the sender's rate (hint), the switches
     * mark them, the target echoes C/I/hint in ACK_CC (cc_type CAQM) and the sender's context
     * adopts the hints. It opens at link / 16 and grows by granted increases, so the bottleneck
     * queue stays below 2 BDP over the WHOLE run (NSCC and none hit the 5 BDP limit in the
     * first RTT), without a drop, and the incast completes within 1.25 x the ideal (the
     * bottleneck carrying all 16 x 2 MB back to back).
     */
    assert_true(caqm.qmax_all_bdp < 2.0);
    assert_true(caqm.qmax_all_bdp < nscc.qmax_all_bdp);
    assert_true(caqm.max_us < 1.25 * caqm.ideal_us);
    assert_true(nscc.qmax_bdp < none.qmax_bdp);
}

/*
 * 8 -> 1 incast on receiver credits, 4 MB each, senders 8..15 (same distance), "rccc" alone
 * and "nscc+rccc". The receiver grants 98 % of its downlink in equal shares (4 MTU per grant,
 * round robin): Jain >= 0.95. The queue is the speculative start (8 senders x 8 MTU of initial
 * credit = 1.5 BDP offered at once) and drains at the 2 % the grants leave free: max <= 0.75 BDP
 * over the whole run, nothing trimmed, mean over the measuring window <= 0.1 BDP.
 */
static void test_rccc_incast(void **state)
{
    (void)state;
    static const uint32_t same[8] = {8, 9, 10, 11, 12, 13, 14, 15};
    static const char *const algos[2] = {"rccc", "nscc+rccc"};
    for (int i = 0; i < 2; i++) {
        struct incast_res r;
        incast_run("incast same distance", same, 8, 4000000, algos[i], false, &r);
        assert_true(r.jain >= 0.95);
        assert_true(r.qmax_bdp <= 0.75);
        assert_true(r.qmean_bdp <= 0.1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_flow_line_rate),
        cmocka_unit_test(test_incast_fair_bounded),
        cmocka_unit_test(test_permutation_spraying_tail),
        cmocka_unit_test(test_degraded_link_steering),
        cmocka_unit_test(test_caqm_incast_queue),
        cmocka_unit_test(test_rccc_incast),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
