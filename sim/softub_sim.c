/*
 * softub-sim: run a workload over a simulated fabric.
 *
 * Everything written to stdout and to the output files is a pure function of
 * the options (seed included); wall time, event rate and the progress bar go
 * to stderr. The real clock is read here only, never inside the simulation.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <softub/errors.h>
#include "core/num.h"
#include "sim/plot.h"
#include "sim/reftp.h"
#include "sim/series.h"
#include "sim/sim.h"
#include "sim/softub_host.h"
#include "sim/stats.h"
#include "sim/topo.h"
#include "sim/topofile.h"
#include "sim/workload.h"

struct opts {
    struct ub_sim_topo_cfg topo;
    const char *workload, *cm, *fct, *ports, *transport, *cc, *fc, *routing, *pds_cc, *pds_lb;
    const char *series, *sample_ports, *plot, *topo_file, *write_topo;
    uint64_t interval_ns;
    uint64_t size, seed, queue, kmin, kmax, window, rto, until;
    uint64_t xoff, xon, headroom, credits, deadlock_us, llr_ns;
    uint32_t mtu, paths, incast, loss_ppm, pool, root, stride, spray_burst;
    bool trim, ecn, quiet, bdp_queue, virtual_payload, caqm;
    struct ub_sim_fail fails[16];
    uint32_t nfails;
};

static void usage(FILE *f)
{
    fprintf(
        f, "usage: softub-sim [options]\n"
           "  --topo fattree|leafspine|dumbbell|ring|torus   (fattree)\n"
           "  --topo-file FILE (a built-in shape or any graph: docs/simulator.md)\n"
           "  --write-topo FILE (the fabric as an explicit graph in that format)\n"
           "  --x N --y N                          ring size (x), torus dimensions (x by y)\n"
           "  --k N --oversub N --hosts N          fat tree arity, ToR oversubscription, host cap\n"
           "  --leaves N --spines N --hosts-per-leaf N (also per switch: ring, torus)\n"
           "  --routing ecmp|updown (ecmp)  --root SWITCH (up/down's root, 0)\n"
           "  --fc none|pfc|cbfc (none)  --xoff B --xon B --headroom B --credits B\n"
           "  --deadlock-us US (watchdog interval; default 1000 with --fc, stops the run)\n"
           "  --rate GBPS (100) --delay-ns NS (1000) --bottleneck-gbps G (dumbbell)\n"
           "  --mtu BYTES (4096)  --queue BYTES (1 BDP with trimming, 5 BDP without)\n"
           "  --kmin BYTES --kmax BYTES (0.2/0.8 BDP)  --no-ecn  --no-trim  --loss-ppm N\n"
           "  --llr-ns NS (link-level retry of corrupted frames after NS; default: drop them)\n"
           "  --caqm (switches mark C-AQM I/C/hint on the 0.2/0.8 BDP band; ref transport and\n"
           "          softub (PDS cc caqm unless --pds-cc) react to them)\n"
           "  --workload perm|incast|outcast|single|shift|alltoall|allreduce|cm (perm)\n"
           "  --size BYTES (2000000; allreduce: the vector)  --incast N (incast, outcast)\n"
           "  --stride N (shift: host i sends to host i + N)\n"
           "  --cm FILE (htsim connection matrix)\n"
           "  --transport ref|softub (ref)  --paths N (1)  --window BYTES  --cc aimd|fixed\n"
           "  --rto-us US  --pool N (softub: buffers per engine)\n"
           "  --virtual-payload (softub: headers-only buffers)  --pds-cc NAME\n"
           "  --pds-lb reps|oblivious|bitmap|random|single (softub: PDS load balancing)\n"
           "  --spray-burst BYTES (softub: bytes a path carries per balancer choice; 0: every "
           "packet)\n"
           "  --fail-link T_US A B | --restore-link T_US A B | --degrade-link T_US A B GBPS\n"
           "  --fail-switch T_US NODE   (nodes: hosts 0..H-1, then switches)\n"
           "  --seed N (1)  --until-us US  --fct FILE  --ports FILE  --quiet\n"
           "  --series FILE (queue and throughput time series, CSV)  --interval-ns NS (1000)\n"
           "  --sample-ports hosts|all|P,P,... (hosts: switch ports facing hosts)\n"
           "  --plot DIR (gnuplot PNGs: FCT CDF, queues, throughput; implies --series)\n");
}

static uint64_t num(const char *s)
{
    uint64_t v;
    if (!ub__num_u64_all(s, 0, &v)) {
        fprintf(stderr, "softub-sim: not a number: %s\n", s);
        exit(2);
    }
    return v;
}

static uint32_t num32(const char *s)
{
    uint64_t v = num(s);
    if (v > UINT32_MAX) {
        fprintf(stderr, "softub-sim: too large: %s\n", s);
        exit(2);
    }
    return (uint32_t)v;
}

static void add_fail(struct opts *o, enum ub_sim_fail_kind kind, char **argv, int *i, int argc,
                     int nargs)
{
    if (*i + nargs >= argc || o->nfails == 16) {
        usage(stderr);
        exit(2);
    }
    struct ub_sim_fail *f = &o->fails[o->nfails++];
    f->kind = kind;
    f->time = num(argv[++*i]) * UB_SIM_PS_PER_US;
    f->a = num32(argv[++*i]);
    if (nargs > 2)
        f->b = num32(argv[++*i]);
    if (nargs > 3)
        f->rate = num(argv[++*i]) * 1000000000ULL;
}

static void parse(struct opts *o, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(name) (!strcmp(a, name) && (v || (usage(stderr), exit(2), 0)) && ++i)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--no-trim")) {
            o->trim = false;
        } else if (!strcmp(a, "--no-ecn")) {
            o->ecn = false;
        } else if (!strcmp(a, "--caqm")) {
            o->caqm = true;
        } else if (!strcmp(a, "--virtual-payload")) {
            o->virtual_payload = true;
        } else if (!strcmp(a, "--quiet")) {
            o->quiet = true;
        } else if (!strcmp(a, "--fail-link")) {
            add_fail(o, UB_SIM_FAIL_LINK_DOWN, argv, &i, argc, 3);
        } else if (!strcmp(a, "--restore-link")) {
            add_fail(o, UB_SIM_FAIL_LINK_UP, argv, &i, argc, 3);
        } else if (!strcmp(a, "--degrade-link")) {
            add_fail(o, UB_SIM_FAIL_LINK_RATE, argv, &i, argc, 4);
        } else if (!strcmp(a, "--fail-switch")) {
            add_fail(o, UB_SIM_FAIL_SWITCH_DOWN, argv, &i, argc, 2);
        } else if (OPT("--topo")) {
            if (!strcmp(v, "fattree"))
                o->topo.kind = UB_SIM_TOPO_FATTREE;
            else if (!strcmp(v, "leafspine"))
                o->topo.kind = UB_SIM_TOPO_LEAFSPINE;
            else if (!strcmp(v, "dumbbell"))
                o->topo.kind = UB_SIM_TOPO_DUMBBELL;
            else if (!strcmp(v, "ring"))
                o->topo.kind = UB_SIM_TOPO_RING;
            else if (!strcmp(v, "torus"))
                o->topo.kind = UB_SIM_TOPO_TORUS;
            else {
                usage(stderr);
                exit(2);
            }
        } else if (OPT("--x")) {
            o->topo.x = num32(v);
        } else if (OPT("--y")) {
            o->topo.y = num32(v);
        } else if (OPT("--routing")) {
            o->routing = v;
        } else if (OPT("--root")) {
            o->root = num32(v);
        } else if (OPT("--fc")) {
            o->fc = v;
        } else if (OPT("--xoff")) {
            o->xoff = num(v);
        } else if (OPT("--xon")) {
            o->xon = num(v);
        } else if (OPT("--headroom")) {
            o->headroom = num(v);
        } else if (OPT("--credits")) {
            o->credits = num(v);
        } else if (OPT("--deadlock-us")) {
            o->deadlock_us = num(v);
        } else if (OPT("--pds-cc")) {
            o->pds_cc = v;
        } else if (OPT("--pds-lb")) {
            o->pds_lb = v;
        } else if (OPT("--spray-burst")) {
            o->spray_burst = num32(v);
        } else if (OPT("--llr-ns")) {
            o->llr_ns = num(v);
        } else if (OPT("--stride")) {
            o->stride = num32(v);
        } else if (OPT("--k")) {
            o->topo.k = num32(v);
        } else if (OPT("--oversub")) {
            o->topo.oversub = num32(v);
        } else if (OPT("--hosts")) {
            o->topo.hosts = num32(v);
        } else if (OPT("--leaves")) {
            o->topo.leaves = num32(v);
        } else if (OPT("--spines")) {
            o->topo.spines = num32(v);
        } else if (OPT("--hosts-per-leaf")) {
            o->topo.hosts_per_leaf = num32(v);
        } else if (OPT("--rate")) {
            o->topo.rate = num(v) * 1000000000ULL;
        } else if (OPT("--bottleneck-gbps")) {
            o->topo.bottleneck_rate = num(v) * 1000000000ULL;
        } else if (OPT("--delay-ns")) {
            o->topo.delay = num(v) * UB_SIM_PS_PER_NS;
        } else if (OPT("--mtu")) {
            o->mtu = num32(v);
        } else if (OPT("--queue")) {
            o->queue = num(v);
            o->bdp_queue = false;
        } else if (OPT("--kmin")) {
            o->kmin = num(v);
        } else if (OPT("--kmax")) {
            o->kmax = num(v);
        } else if (OPT("--loss-ppm")) {
            o->loss_ppm = num32(v);
        } else if (OPT("--workload")) {
            o->workload = v;
        } else if (OPT("--size")) {
            o->size = num(v);
        } else if (OPT("--incast")) {
            o->incast = num32(v);
        } else if (OPT("--cm")) {
            o->cm = v;
            o->workload = "cm";
        } else if (OPT("--transport")) {
            o->transport = v;
        } else if (OPT("--paths")) {
            o->paths = num32(v);
        } else if (OPT("--window")) {
            o->window = num(v);
        } else if (OPT("--cc")) {
            o->cc = v;
        } else if (OPT("--rto-us")) {
            o->rto = num(v) * UB_SIM_PS_PER_US;
        } else if (OPT("--pool")) {
            o->pool = num32(v);
        } else if (OPT("--seed")) {
            o->seed = num(v);
        } else if (OPT("--until-us")) {
            o->until = num(v) * UB_SIM_PS_PER_US;
        } else if (OPT("--topo-file")) {
            o->topo_file = v;
            o->topo.kind = UB_SIM_TOPO_FILE;
        } else if (OPT("--write-topo")) {
            o->write_topo = v;
        } else if (OPT("--series")) {
            o->series = v;
        } else if (OPT("--interval-ns")) {
            o->interval_ns = num(v);
        } else if (OPT("--sample-ports")) {
            o->sample_ports = v;
        } else if (OPT("--plot")) {
            o->plot = v;
        } else if (OPT("--fct")) {
            o->fct = v;
        } else if (OPT("--ports")) {
            o->ports = v;
        } else {
            fprintf(stderr, "softub-sim: unknown option %s\n", a);
            usage(stderr);
            exit(2);
        }
#undef OPT
    }
}

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "softub-sim: %s: %s\n", what, ub_strerror(rc));
    exit(1);
}

static int workload(struct ub_sim *sim, const struct opts *o)
{
    if (!strcmp(o->workload, "perm"))
        return ub_sim_wl_permutation(sim, o->size, 0);
    if (!strcmp(o->workload, "incast"))
        return ub_sim_wl_incast(sim, o->incast ? o->incast : 8, 0, o->size, 0);
    if (!strcmp(o->workload, "shift"))
        return ub_sim_wl_shift(sim, o->stride ? o->stride : 1, o->size, 0);
    if (!strcmp(o->workload, "outcast"))
        return ub_sim_wl_outcast(sim, o->incast ? o->incast : 8, 0, o->size, 0);
    if (!strcmp(o->workload, "alltoall"))
        return ub_sim_wl_alltoall(sim, o->size, 0);
    if (!strcmp(o->workload, "allreduce"))
        return ub_sim_wl_allreduce(sim, o->size, 0);
    if (!strcmp(o->workload, "single"))
        return ub_sim_add_flow(sim, 0, 0, sim->nhosts - 1, o->size, 0) < 0 ? UB_EINVAL : 0;
    if (!strcmp(o->workload, "cm")) {
        FILE *f = o->cm ? fopen(o->cm, "r") : NULL;
        if (!f) {
            fprintf(stderr, "softub-sim: cannot open connection matrix %s\n",
                    o->cm ? o->cm : "(none: --cm FILE)");
            exit(1);
        }
        uint32_t line = 0;
        int rc = ub_sim_wl_load_cm(sim, f, &line);
        fclose(f);
        if (rc)
            fprintf(stderr, "softub-sim: %s line %u: %s\n", o->cm, line, ub_strerror(rc));
        return rc;
    }
    return UB_EINVAL;
}

int main(int argc, char **argv)
{
    struct opts o = {
        .workload = "perm",
        .transport = "ref",
        .cc = "aimd",
        .size = 2000000,
        .seed = 1,
        .mtu = 4096,
        .paths = 1,
        .trim = true,
        .ecn = true,
        .bdp_queue = true,
        .until = UB_SIM_NEVER,
        .fc = "none",
        .routing = "ecmp",
        .sample_ports = "hosts",
        .interval_ns = 1000,
    };
    parse(&o, argc, argv);
    double t0 = wall();
    struct ub_sim_softub *stp = NULL;

    struct ub_sim sim;
    int rc = ub_sim_init(&sim, o.seed);
    if (rc)
        die("init", rc);
    struct ub_sim_qcfg q = {.limit = 1ULL << 30};
    if (o.topo_file) {
        FILE *tf = fopen(o.topo_file, "r");
        if (!tf)
            die(o.topo_file, UB_EIO);
        uint32_t line;
        bool is_builtin;
        rc = ub_sim_topo_load(&sim, tf, &q, &line, &is_builtin, &o.topo);
        fclose(tf);
        if (rc) {
            fprintf(stderr, "softub-sim: %s line %u: %s\n", o.topo_file, line, ub_strerror(rc));
            exit(1);
        }
        if (is_builtin)
            rc = ub_sim_topo_build(&sim, &o.topo, &q);
        else
            o.topo.kind = UB_SIM_TOPO_FILE;
    } else {
        rc = ub_sim_topo_build(&sim, &o.topo, &q);
    }
    if (rc == UB_ERANGE) {
        fprintf(stderr, "softub-sim: topology: larger than %u nodes or %u links\n",
                UB_SIM_MAX_NODES, UB_SIM_MAX_LINKS);
        exit(1);
    }
    if (rc)
        die("topology", rc);
    if (o.write_topo) {
        FILE *wf = fopen(o.write_topo, "w");
        if (!wf || ub_sim_topo_write(&sim, wf) || fclose(wf))
            die(o.write_topo, UB_EIO);
    }

    /* Queue sizes follow htsim: in units of the longest path's BDP. */
    uint32_t far = sim.nhosts - 1;
    uint64_t base_rtt = ub_sim_ideal_fct(&sim, 0, far, o.mtu - 64, o.mtu, 64, 64);
    uint64_t rate = sim.ports[0].rate;
    uint64_t bdp = rate / 8 * base_rtt / UB_SIM_PS_PER_S;
    q.trim = o.trim;
    q.prio_ctrl = o.trim;
    q.limit = o.bdp_queue ? (o.trim ? bdp : 5 * bdp) : o.queue;
    if (q.limit < o.mtu)
        q.limit = o.mtu;
    if (o.ecn) {
        q.kmin = o.kmin ? o.kmin : bdp / 5;
        q.kmax = o.kmax ? o.kmax : bdp * 4 / 5;
    }
    q.loss_ppm = o.loss_ppm;
    q.caqm = o.caqm;
    q.caqm_kmin = bdp / 5;
    q.caqm_kmax = bdp * 4 / 5;
    q.llr_delay = o.llr_ns * UB_SIM_PS_PER_NS;
    if (!strcmp(o.fc, "pfc"))
        q.fc = UB_SIM_FC_PFC;
    else if (!strcmp(o.fc, "cbfc"))
        q.fc = UB_SIM_FC_CBFC;
    else if (strcmp(o.fc, "none"))
        die("--fc", UB_EINVAL);
    if (q.fc != UB_SIM_FC_NONE) {
        /* Headroom: what arrives while PAUSE travels back and the frame in progress ends. */
        uint64_t link_rtt = 2 * sim.ports[0].delay + 2 * ub_sim_port_ser(&sim.ports[0], o.mtu);
        q.headroom = o.headroom ? o.headroom : rate / 8 * link_rtt / UB_SIM_PS_PER_S + o.mtu;
        q.xoff = o.xoff ? o.xoff : bdp / 2;
        q.xon = o.xon ? o.xon : (q.xoff > 2ULL * o.mtu ? q.xoff - 2ULL * o.mtu : 0);
        q.credits = o.credits ? o.credits : q.xoff + q.headroom;
        q.prio_ctrl = true; /* ACKs travel in their own class */
    }
    ub_sim_set_queues(&sim, &q);
    if (!strcmp(o.routing, "updown"))
        rc = ub_sim_set_routing(&sim, UB_SIM_ROUTE_UPDOWN, o.root);
    else if (!strcmp(o.routing, "ecmp"))
        rc = 0;
    else
        rc = UB_EINVAL;
    if (rc)
        die("routing", rc);

    if (!strcmp(o.transport, "ref")) {
        struct ub_sim_reftp_cfg tc = {
            .mtu = o.mtu,
            /* htsim NSCC's largest window: 1.5 BDP. */
            .window = o.window ? o.window : (bdp * 3 / 2 / o.mtu + 1) * o.mtu,
            .base_rtt = base_rtt,
            .paths = o.paths,
            .cc = !strcmp(o.cc, "aimd"),
            .caqm = o.caqm,
            /* htsim's rule: 15 us plus six times a full queue's drain time. */
            .rto =
                o.rto ? o.rto : 15 * UB_SIM_PS_PER_US + 6 * ub_sim_port_ser(&sim.ports[0], q.limit),
        };
        rc = ub_sim_reftp_create(&sim, &tc, NULL);
    } else if (!strcmp(o.transport, "softub")) {
        uint64_t win = o.window ? o.window : bdp * 3 / 2; /* htsim NSCC's largest window */
        struct ub_sim_softub_cfg sc = {
            .mtu = o.mtu,
            .pool_bufs = o.pool,
            .paths = o.paths,
            .window = (uint32_t)((win + o.mtu - 1) / o.mtu),
            .rto_min_ns =
                (o.rto ? o.rto
                       : 15 * UB_SIM_PS_PER_US + 6 * ub_sim_port_ser(&sim.ports[0], q.limit)) /
                UB_SIM_PS_PER_NS,
            .virtual_payload = o.virtual_payload,
            .trimming = q.trim,
            .cc = o.pds_cc ? o.pds_cc
                  : o.caqm ? "caqm"
                           : NULL,
            .lb = o.pds_lb,
            .spray_burst = o.spray_burst,
            .base_rtt_ns = base_rtt / UB_SIM_PS_PER_NS,
        };
        rc = ub_sim_softub_create(&sim, &sc, &stp);
    } else {
        rc = UB_EINVAL;
    }
    if (rc)
        die("transport", rc);
    rc = workload(&sim, &o);
    if (rc)
        die("workload", rc);
    for (uint32_t i = 0; i < o.nfails; i++) {
        rc = ub_sim_add_fail(&sim, &o.fails[i]);
        if (rc)
            die("failure", rc);
    }
    sim.stop_when_done = true;
    rc = ub_sim_start(&sim);
    if (rc)
        die("start", rc);
    struct ub_sim_series *series = NULL;
    FILE *series_f = NULL;
    char series_path[4096];
    if (o.series || o.plot) {
        if (o.series)
            snprintf(series_path, sizeof(series_path), "%s", o.series);
        else
            snprintf(series_path, sizeof(series_path), "%s/series.csv", o.plot);
        uint32_t *sp;
        uint32_t nsp = ub_sim_select_ports(&sim, o.sample_ports, &sp);
        if (!nsp)
            die("--sample-ports", UB_EINVAL);
        series_f = fopen(series_path, "w");
        if (!series_f)
            die(series_path, UB_EIO);
        rc =
            ub_sim_series_start(&sim, series_f, o.interval_ns * UB_SIM_PS_PER_NS, sp, nsp, &series);
        free(sp);
        if (rc)
            die("series", rc);
    }
    uint64_t wd = o.deadlock_us ? o.deadlock_us : (q.fc != UB_SIM_FC_NONE ? 1000 : 0);
    if (wd)
        ub_sim_watchdog(&sim, wd * UB_SIM_PS_PER_US, true);

    char b1[32], b2[32];
    printf("topology %s hosts %u switches %u ports %u rate_gbps %" PRIu64 " delay_ns %" PRIu64 "\n",
           ub_sim_topo_name(o.topo.kind), sim.nhosts, sim.nswitches, sim.nports,
           (uint64_t)(rate / 1000000000ULL), sim.ports[0].delay / UB_SIM_PS_PER_NS);
    printf("queue_bytes %" PRIu64 " kmin %" PRIu64 " kmax %" PRIu64 " trim %s bdp_bytes %" PRIu64
           " base_rtt_us %s\n",
           sim.qcfg.limit, sim.qcfg.kmin, sim.qcfg.kmax, sim.qcfg.trim ? "on" : "off", bdp,
           ub_sim_fmt_us(base_rtt, b1));
    printf("transport %s workload %s flows %u seed %" PRIu64 " routing %s fc %s\n", o.transport,
           o.workload, sim.nflows, o.seed, o.routing, o.fc);
    double setup = wall() - t0;

    /* Run in slices of simulated time so the progress bar can be drawn between them. */
    const uint64_t slice = 20 * UB_SIM_PS_PER_US;
    double last_draw = 0;
    uint64_t t = 0;
    bool idle = false;
    while (!idle && t < o.until) {
        t = o.until - t > slice ? t + slice : o.until;
        idle = ub_sim_run(&sim, t);
        if (!o.quiet) {
            double w = wall();
            if (w - last_draw > 0.25 || idle) {
                last_draw = w;
                uint32_t pct = sim.nflows ? (uint32_t)(100ULL * sim.flows_done / sim.nflows) : 100;
                char bar[41];
                for (uint32_t i = 0; i < 40; i++)
                    bar[i] = i < pct * 40 / 100 ? '#' : '.';
                bar[40] = '\0';
                fprintf(stderr, "\r[%s] %3u%% %u/%u flows  t=%s us  %.1f s", bar, pct,
                        sim.flows_done, sim.nflows, ub_sim_fmt_us(ub_sim_now(&sim), b2), w - t0);
            }
        }
    }
    if (!o.quiet)
        fprintf(stderr, "\n");
    double run = wall() - t0 - setup;

    struct ub_sim_summary s;
    ub_sim_summarize(&sim, &s);
    ub_sim_print_summary(&sim, &s, stdout);
    if (stp)
        ub_sim_softub_print(stp, stdout);
    if (q.caqm)
        printf("caqm c %" PRIu64 " hold %" PRIu64 "\n", sim.ctr.caqm_c, sim.ctr.caqm_hold);
    if (q.llr_delay)
        printf("llr retries %" PRIu64 "\n", sim.ctr.llr_retries);
    if (q.fc != UB_SIM_FC_NONE)
        printf("lossless %s xoff %" PRIu64 " xon %" PRIu64 " headroom %" PRIu64 " credits %" PRIu64
               " pauses %" PRIu64 " resumes %" PRIu64 " headroom_overflow %" PRIu64 "\n",
               o.fc, q.xoff, q.xon, q.headroom, q.credits, sim.ctr.pauses, sim.ctr.resumes,
               sim.ctr.headroom_overflow);
    if (wd) {
        if (sim.deadlock_at != UB_SIM_NEVER)
            printf("deadlock at_us %s stalled_ports %u\n", ub_sim_fmt_us(sim.deadlock_at, b1),
                   sim.deadlock_ports);
        else
            printf("deadlock none\n");
    }
    if (o.fct) {
        FILE *f = fopen(o.fct, "w");
        if (!f)
            die(o.fct, UB_EIO);
        ub_sim_write_fct_csv(&sim, f);
        fclose(f);
    }
    if (o.ports) {
        FILE *f = fopen(o.ports, "w");
        if (!f)
            die(o.ports, UB_EIO);
        ub_sim_write_port_csv(&sim, f);
        fclose(f);
    }
    if (series_f && fclose(series_f))
        die(series_path, UB_EIO);
    if (o.plot) {
        char title[160];
        snprintf(title, sizeof(title), "%s %s, %u hosts, %s", o.workload, o.transport, sim.nhosts,
                 ub_sim_topo_name(o.topo.kind));
        rc = ub_sim_plot(&sim, o.plot, series_path, series, title);
        if (rc)
            die("--plot", rc);
    }
    ub_sim_series_free(series);
    fprintf(stderr,
            "wall setup %.3f s run %.3f s events %" PRIu64 " (%.2f M/s) orphans %" PRIu64
            " heap_cap %u pkt_descs %" PRIu64 "\n",
            setup, run, sim.evq.fired, run > 0 ? (double)sim.evq.fired / run / 1e6 : 0.0,
            sim.evq.orphans, sim.evq.cap, sim.pool.total);
    int ret = s.done == s.flows ? 0 : sim.deadlock_at != UB_SIM_NEVER ? 4 : 3;
    ub_sim_fini(&sim);
    return ret;
}
