/*
 * Congestion control and load balancing inside PDS, on the deterministic test bed. The loop
 * fabric has latency but no link rate, so what is asserted is what can be exact: the window PDS
 * enforces follows the congestion context's own trajectory ACK by ACK (a mirror context fed the
 * same events ends in the same state), ECN-marked ACKs cut the window at most once per base
 * RTT, the pacer spaces packets at exactly the rate (and, with a wider burst, keeps the rate
 * for a sender polled coarsely), the balancers steer away from a path that
 * CE-marks or drops, bursts keep a path for their bytes, trimmed packets are NACKed, and equal
 * seeds replay exactly.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "cms/cc.h"
#include "core/clock.h"
#include "core/seq.h"
#include "engine/testbed.h"
#include "wire/datagram.h"

#define LAT     2000u /* one-way latency, ns */
#define PAYLOAD 200u
#define MAXPKT  4096u

struct run {
    struct ub__testbed tb;
    uint32_t n;             /* packets offered */
    uint64_t arr[MAXPKT];   /* arrival time at the target (first copy) */
    uint64_t ackt[MAXPKT];  /* acked upcall time */
    uint64_t cwnd[MAXPKT];  /* the context's window when packet i was acked (before that ACK) */
    uint16_t path[MAXPKT];  /* path the first copy arrived on */
    uint32_t order[MAXPKT]; /* acked order: packet ids */
    uint32_t nacked, ndeliv, ndup, nfailed, nce;
    uint32_t per_path[8];
    uint32_t ce_path[8];
    uint8_t got[MAXPKT];
};

static void on_deliver(void *arg, const struct ub__pds_rx *rx, uint64_t now)
{
    struct run *r = arg;
    uint32_t id;
    assert_true(rx->payload_len == PAYLOAD);
    memcpy(&id, rx->payload, 4);
    assert_true(id < r->n);
    if (r->got[id]++) {
        r->ndup++;
        return;
    }
    r->ndeliv++;
    r->arr[id] = now;
    r->path[id] = rx->path;
    r->per_path[rx->path & 7]++;
    if (rx->ecn == 3) {
        r->nce++;
        r->ce_path[rx->path & 7]++;
    }
}

static void on_acked(void *arg, uint64_t cookie, uint64_t now)
{
    struct run *r = arg;
    assert_true(cookie < r->n);
    const struct ub__cc *cc = ub__pds_cc(r->tb.nodes[0].eng.pds, &r->tb.nodes[1].addr);
    r->ackt[cookie] = now;
    r->cwnd[cookie] = cc ? ub__cc_cwnd(cc) : 0;
    r->order[r->nacked++] = (uint32_t)cookie;
}

static void on_failed(void *arg, uint64_t cookie, int err, uint64_t now)
{
    (void)cookie;
    (void)err;
    (void)now;
    ((struct run *)arg)->nfailed++;
}

static const struct ub__pds_upcalls upcalls = {
    .deliver = on_deliver, .acked = on_acked, .failed = on_failed};

static void cfg_default(struct ub__loopnet_cfg *nc, struct ub__engine_cfg *ec, uint64_t seed)
{
    memset(nc, 0, sizeof(*nc));
    memset(ec, 0, sizeof(*ec));
    nc->ports = 2;
    nc->mtu = 4096;
    nc->num_paths = 4;
    nc->seed = seed;
    nc->latency_ns = LAT;
    nc->queue_cap = 16384;
    nc->checksum = true;
    ec->seed = seed;
    ec->mtu = 4096;
    ec->num_paths = 4;
    ec->pool_bufs = 8192;
    ec->pds.ack_every = 1;
}

static void run_init(struct run *r, const struct ub__loopnet_cfg *nc,
                     const struct ub__engine_cfg *ec)
{
    memset(r, 0, sizeof(*r));
    assert_int_equal(ub__testbed_create(&r->tb, 2, nc, ec), 0);
    for (uint32_t i = 0; i < 2; i++)
        ub__pds_set_upcalls(r->tb.nodes[i].eng.pds, &upcalls, r);
}

/* Queues packets [r->n, r->n + count) from node 0 to node 1 (SES header + PAYLOAD bytes). */
static void offer(struct run *r, uint32_t count, uint8_t mode)
{
    for (uint32_t k = 0; k < count; k++) {
        uint32_t id = r->n;
        assert_true(id < MAXPKT);
        struct ub__pkt *p = ub__pkt_alloc(&r->tb.nodes[0].eng.pool);
        assert_non_null(p);
        struct ub__ses_std s = {.opcode = UB_SES_OP_SEND,
                                .flags = UB_SES_F_SOM | UB_SES_F_EOM,
                                .request_length = PAYLOAD};
        struct ub__wcur w;
        ub__wcur_init(&w, ub__pkt_put(p, UB_SES_STD_SIZE), UB_SES_STD_SIZE);
        assert_int_equal(ub__ses_std_encode(&s, &w), 0);
        uint8_t *b = ub__pkt_put(p, PAYLOAD);
        assert_non_null(b);
        if (!b)
            return; /* not reached: tells the compiler b is not NULL below */
        memset(b, (int)(id & 0xff), PAYLOAD);
        memcpy(b, &id, 4);
        struct ub__pds_tx tx = {
            .dst = &r->tb.nodes[1].addr, .mode = mode, .cookie = id, .ses_kind = UB_PDS_NH_REQ_STD};
        assert_int_equal(ub__pds_send(r->tb.nodes[0].eng.pds, &tx, p, r->tb.now), 0);
        r->n++;
    }
}

static uint32_t wire_size(const struct run *r)
{
    const struct ub__pds_stats *s = ub__pds_stats(r->tb.nodes[0].eng.pds);
    assert_true(s->tx_pkts > 0);
    assert_int_equal(s->tx_bytes % s->tx_pkts, 0); /* every data packet the same size */
    return (uint32_t)(s->tx_bytes / s->tx_pkts);
}

static const struct ub__pds_stats *st(const struct run *r, uint32_t node)
{
    return ub__pds_stats(r->tb.nodes[node].eng.pds);
}

/*
 * Replays the run's ACKs into a fresh context with the same parameters (one packet per ACK:
 * ack_every 1, no loss) and checks that PDS's window before every ACK equals the mirror's, and
 * that PDS kept exactly floor(cwnd / size) packets in flight whenever it had a backlog.
 */
static void check_mirror(const struct run *r, const struct ub__engine_cfg *ec, bool ecn,
                         struct ub__cc *m, uint64_t *md_times, uint32_t *n_md)
{
    const struct ub__pds *pds = r->tb.nodes[0].eng.pds;
    uint32_t size = wire_size(r);
    struct ub__cc_params p = {
        .link_bps = ec->pds.link_bps ? ec->pds.link_bps : 100000000000ull,
        .base_rtt_ns = ec->pds.base_rtt_ns ? ec->pds.base_rtt_ns : 12000,
        .mtu = ec->mtu,
        .init_cwnd = ec->pds.cc_init_cwnd,
        .trimming = ec->pds.trimming,
        .qa_gate = -1,
    };
    assert_int_equal(ub__cc_init(m, ub__cc_algo_find(ec->pds.cc_algo), &p), 0);
    assert_int_equal(r->nacked, r->n);
    *n_md = 0;
    uint32_t sent_before = 0; /* packets sent strictly before the current ACK's time */
    for (uint32_t k = 0; k < r->nacked; k++) {
        uint32_t id = r->order[k];
        assert_int_equal(id, k); /* in order: no loss, one path delay */
        uint64_t t = r->ackt[id];
        assert_int_equal(r->cwnd[id], ub__cc_cwnd(m));
        while (sent_before < r->n && r->arr[sent_before] - LAT < t)
            sent_before++;
        uint64_t md = m->st.md;
        struct ub__cc_ack a = {.acked_bytes = size,
                               .inflight = (uint64_t)(sent_before - k - 1) * size,
                               .rtt_ns = t - (r->arr[id] - LAT),
                               .ecn = ecn,
                               .has_nscc = true};
        assert_int_equal(a.rtt_ns, 2 * LAT);
        ub__cc_on_ack(m, &a, t);
        if (m->st.md != md)
            md_times[(*n_md)++] = t;
        /* After the last ACK at t, the sends at t fill the window exactly. */
        if (k + 1 < r->nacked && r->ackt[k + 1] == t)
            continue;
        uint32_t inflight = 0, acked_by_t = k + 1, sent_by_t = 0;
        for (uint32_t j = 0; j < r->n; j++)
            sent_by_t += r->arr[j] - LAT <= t;
        inflight = sent_by_t - acked_by_t;
        uint64_t w = ub__cc_cwnd(m);
        assert_true((uint64_t)inflight * size <= w || inflight == 1);
        if (sent_by_t < r->n) /* backlogged: the window (or the 256-packet cap) limited it */
            assert_int_equal(inflight, UB_MIN(w / size, 256u));
    }
    const struct ub__cc *cc = ub__pds_cc(pds, &r->tb.nodes[1].addr);
    assert_non_null(cc);
    assert_int_equal(ub__cc_cwnd(cc), ub__cc_cwnd(m));
    assert_memory_equal(&cc->st, &m->st, sizeof(cc->st));
}

/* NSCC from a small initial window, no congestion: growth ACK by ACK as the context computes. */
static void test_window_follows_cc(void **state)
{
    (void)state;
    struct ub__loopnet_cfg nc;
    struct ub__engine_cfg ec;
    cfg_default(&nc, &ec, 11);
    ec.pds.cc_algo = "nscc";
    ec.pds.cc_init_cwnd = 2000;
    static struct run r;
    run_init(&r, &nc, &ec);
    offer(&r, 2000, UB_PDS_RUD);
    /* Not until idle: the context goes with the PDC when it closes (100 ms idle). */
    assert_false(ub__testbed_run(&r.tb, 50000000, 10000000));
    assert_int_equal(r.ndeliv, 2000);
    assert_int_equal(r.nfailed, 0);
    struct ub__cc m;
    uint64_t md[MAXPKT];
    uint32_t nmd;
    check_mirror(&r, &ec, false, &m, md, &nmd);
    assert_int_equal(nmd, 0);
    uint32_t size = wire_size(&r);
    printf("  nscc growth: %u B packets, cwnd %" PRIu64 " -> %" PRIu64 " (ack 100) -> %" PRIu64
           " (end, max %" PRIu64 "), fulfils %" PRIu64 ", fast increases %" PRIu64
           ", sends held by the window %" PRIu64 "\n",
           size, r.cwnd[0], r.cwnd[100], ub__cc_cwnd(&m), m.u.nscc.maxwnd, m.st.fulfil,
           m.st.fast_inc, st(&r, 0)->cc_blocked);
    assert_true(ub__cc_cwnd(&m) > 10 * 2000);
    assert_true(st(&r, 0)->cc_blocked > 0);
    ub__testbed_destroy(&r.tb);
}

/* Every packet CE-marked and a queueing delay above target: MD at most once per base RTT. */
static void test_ecn_md_once_per_rtt(void **state)
{
    (void)state;
    struct ub__loopnet_cfg nc;
    struct ub__engine_cfg ec;
    cfg_default(&nc, &ec, 12);
    ec.pds.cc_algo = "nscc";
    ec.pds.base_rtt_ns = 1000; /* the loop's 4 us RTT is then 3 us of "queueing" */
    static struct run r;
    run_init(&r, &nc, &ec);
    struct ub__impair_cfg ic = {.seed = 5, .ce_ppm = UB_IMPAIR_PPM};
    assert_int_equal(ub__loopnet_impair(r.tb.net, 0, 1, &ic), 0);
    offer(&r, 3000, UB_PDS_RUD);
    assert_false(ub__testbed_run(&r.tb, 50000000, 10000000));
    assert_int_equal(r.ndeliv, 3000);
    assert_int_equal(r.nce, 3000);
    assert_int_equal(st(&r, 1)->acks_ecn_tx, 3000);
    assert_int_equal(st(&r, 0)->acks_ecn_rx, 3000);
    struct ub__cc m;
    static uint64_t md[MAXPKT];
    uint32_t nmd;
    check_mirror(&r, &ec, true, &m, md, &nmd);
    assert_true(nmd >= 5);
    /* At most one MD per base RTT, and (ACKs come in one burst per RTT) exactly one per burst
     * once the delay average passed the target. */
    uint32_t bursts = 0;
    for (uint32_t i = 1; i < nmd; i++)
        assert_true(md[i] - md[i - 1] > m.u.nscc.base_rtt);
    for (uint32_t k = 0; k < r.n; k++)
        if (r.ackt[k] > md[0] && (k == 0 || r.ackt[k] != r.ackt[k - 1]))
            bursts++;
    assert_int_equal(nmd - 1, bursts);
    printf("  ecn: %u MDs, first at %" PRIu64 " ns, then every %" PRIu64
           " ns (one per ACK burst), cwnd %" PRIu64 " -> %" PRIu64 " (min %" PRIu64 ")\n",
           nmd, md[0], md[1] - md[0], r.cwnd[0], ub__cc_cwnd(&m), m.u.nscc.minwnd);
    ub__testbed_destroy(&r.tb);
}

/* One scripted CE mark: exactly one ACK carries M, and the initiator hears exactly one. */
static void test_ecn_echo(void **state)
{
    (void)state;
    struct ub__loopnet_cfg nc;
    struct ub__engine_cfg ec;
    cfg_default(&nc, &ec, 13);
    ec.pds.ack_every = 0; /* the default coalescing: the mark still makes an ACK at once */
    static struct run r;
    run_init(&r, &nc, &ec);
    struct ub__impair_cfg ic = {.seed = 5};
    assert_int_equal(ub__impair_add(&ic, UB_IMPAIR_CE_NTH, 17, 0, 0), 0);
    assert_int_equal(ub__loopnet_impair(r.tb.net, 0, 1, &ic), 0);
    offer(&r, 100, UB_PDS_RUD);
    assert_true(ub__testbed_run(&r.tb, UB_NS_PER_S, 1000000));
    assert_int_equal(r.ndeliv, 100);
    assert_int_equal(r.nce, 1);
    assert_int_equal(st(&r, 1)->rx_ce, 1);
    assert_int_equal(st(&r, 1)->acks_ecn_tx, 1);
    assert_int_equal(st(&r, 0)->acks_ecn_rx, 1);
    ub__testbed_destroy(&r.tb);
}

/* DCQCN at line rate paces: 1 B/ns, so a packet of S bytes leaves exactly every S ns. */
static void test_pacing_exact(void **state)
{
    (void)state;
    struct ub__loopnet_cfg nc;
    struct ub__engine_cfg ec;
    cfg_default(&nc, &ec, 14);
    ec.pds.cc_algo = "dcqcn";
    ec.pds.link_bps = 8000000000ull; /* 10^9 B/s */
    static struct run r;
    run_init(&r, &nc, &ec);
    offer(&r, 1, UB_PDS_RUD);
    assert_true(ub__testbed_run(&r.tb, UB_NS_PER_S, 1000000));
    uint32_t size = wire_size(&r);
    ub__testbed_destroy(&r.tb);

    ec.pds.mtu = size; /* the pacer's burst: one packet */
    run_init(&r, &nc, &ec);
    uint64_t t0 = r.tb.now;
    offer(&r, 1000, UB_PDS_RUD);
    /* Mid-run, the engine's next deadline is the pacer's next release. */
    assert_false(ub__testbed_run(&r.tb, t0 + 100 * size + size / 2, 1000000));
    uint64_t next = ub__engine_next_deadline(&r.tb.nodes[0].eng);
    assert_int_equal(next, t0 + 101 * (uint64_t)size);
    assert_true(ub__testbed_run(&r.tb, UB_NS_PER_S, 10000000));
    assert_int_equal(r.ndeliv, 1000);
    for (uint32_t i = 0; i < 1000; i++)
        assert_int_equal(r.arr[i], t0 + LAT + (uint64_t)i * size);
    assert_true(st(&r, 0)->cc_paced >= 999);
    printf("  pacing: %u packets of %u B at 1 B/ns: sent at exactly i x %u ns (last at %" PRIu64
           " ns)\n",
           1000, size, size, r.arr[999] - LAT - t0);
    ub__testbed_destroy(&r.tb);
}

/*
 * A paced sender whose owner comes back only every `gap` ns (a host's progress loop, not an
 * event-driven fabric) at `bpns` B/ns with the given pacer burst (bytes, and time at the
 * rate): the packets it hands out in each of `rounds` rounds after the first, whose count (the
 * burst after an idle pacer) is not kept.
 */
static void paced_rounds(uint64_t bpns, uint32_t burst, uint64_t burst_ns, uint64_t gap,
                         uint32_t rounds, uint32_t *per_round, uint32_t *size)
{
    struct ub__loopnet_cfg nc;
    struct ub__engine_cfg ec;
    cfg_default(&nc, &ec, 16);
    ec.pds.cc_algo = "dcqcn";
    ec.pds.link_bps = 8000000000ull * bpns;
    ec.pds.pacer_burst = burst;
    ec.pds.pacer_burst_ns = burst_ns;
    ec.pds.window = 1024;
    static struct run r;
    run_init(&r, &nc, &ec);
    offer(&r, 1, UB_PDS_RUD); /* the PDC is set up (no SYN limit) */
    assert_true(ub__testbed_run(&r.tb, UB_NS_PER_S, 1000000));
    offer(&r, 1000, UB_PDS_RUD);
    struct ub__engine *e = &r.tb.nodes[0].eng;
    struct ub__pkt *out[1024];
    uint64_t t = r.tb.now;
    for (uint32_t k = 0; k <= rounds; k++, t += gap) {
        ub__engine_expire(e, t); /* the pacer's release timer */
        uint32_t n = ub__pds_pull(e->pds, out, 1024, t);
        for (uint32_t i = 0; i < n; i++)
            ub__pkt_free(out[i]);
        if (k)
            per_round[k - 1] = n;
    }
    *size = wire_size(&r);
    ub__testbed_destroy(&r.tb);
}

/*
 * The pacer's burst bounds what a sender may send at once beyond its schedule. One MTU (the
 * default, right for a simulated fabric that calls back at each release) lets a sender that
 * comes back every 20 us send 4 KiB a round although 20 KB accrued: a fifth of its rate, as
 * DCQCN ran over loopback (0.7 GB/s). With the burst real devices use (64 KiB), what accrued
 * between rounds goes out.
 */
static void test_pacing_burst(void **state)
{
    (void)state;
    uint64_t gap = 20 * UB_NS_PER_US;
    uint32_t one[4], wide[4], size;
    paced_rounds(1, 0, 0, gap, 4, one, &size);
    paced_rounds(1, 65536, 0, gap, 4, wide, &size);
    printf("  pacing at 1 B/ns, a round every 20 us, packets of %u B: %u %u %u %u a round with "
           "a 4 KiB burst, %u %u %u %u with 64 KiB\n",
           size, one[0], one[1], one[2], one[3], wide[0], wide[1], wide[2], wide[3]);
    uint32_t accrued = (uint32_t)gap / size; /* 1 B/ns */
    for (int k = 0; k < 4; k++) {
        assert_true(one[k] <= 4096 / size + 1);
        assert_true(wide[k] + 1 >= accrued && wide[k] <= accrued + 1);
    }
}

/*
 * At 8 B/ns (64 Gbit/s) a round every 10 us accrues 80 KB: a burst of 32 KiB lets 40 % of it
 * go, as 64 KiB did for DCQCN and C-AQM at 100 Gbit/s over loopback (1 MiB WRITEs at 4.1
 * GB/s where NSCC, unpaced, ran 6.6). A burst of 10 us at the rate, the byte floor
 * unchanged, lets all of it go. (Two rounds: a PDC keeps at most 1024 packets in flight.)
 */
static void test_pacing_burst_time(void **state)
{
    (void)state;
    uint64_t gap = 10 * UB_NS_PER_US;
    uint32_t bytes[2], timed[2], size;
    paced_rounds(8, 32768, 0, gap, 2, bytes, &size);
    paced_rounds(8, 32768, gap, gap, 2, timed, &size);
    printf("  pacing at 8 B/ns, a round every 10 us, packets of %u B: %u %u a round with a "
           "32 KiB burst, %u %u with 10 us\n",
           size, bytes[0], bytes[1], timed[0], timed[1]);
    uint32_t accrued = (uint32_t)(8 * gap) / size;
    for (int k = 0; k < 2; k++) {
        assert_true(bytes[k] <= 32768 / size + 1);
        assert_true(timed[k] + 1 >= accrued && timed[k] <= accrued + 1);
    }
}

/* Per-path counts of first copies, before and after path 2 turns bad. */
static void steer(const char *lb, uint32_t rule, uint32_t ppm, uint32_t *before, uint32_t *after)
{
    struct ub__loopnet_cfg nc;
    struct ub__engine_cfg ec;
    cfg_default(&nc, &ec, 15);
    ec.pds.lb_algo = lb;
    /*
     * The loop has no link rate: a window's ACKs all arrive at one instant, and REPS's 8-entry
     * cache cannot hold a burst of hundreds. A small packet window keeps the bursts within it
     * (on a real link the ACKs come spread by serialization); congestion control stays out.
     */
    ec.pds.cc_algo = "none";
    ec.pds.window = 8;
    static struct run r;
    run_init(&r, &nc, &ec);
    offer(&r, 1500, UB_PDS_RUD);
    assert_true(ub__testbed_run(&r.tb, UB_NS_PER_S, 10000000));
    memcpy(before, r.per_path, 4 * sizeof(uint32_t));
    struct ub__impair_cfg ic = {.seed = 6};
    assert_int_equal(ub__impair_add(&ic, (enum ub__impair_kind)rule, 2, ppm, 0), 0);
    assert_int_equal(ub__loopnet_impair(r.tb.net, 0, 1, &ic), 0);
    memset(r.per_path, 0, sizeof(r.per_path));
    offer(&r, 1500, UB_PDS_RUD);
    assert_true(ub__testbed_run(&r.tb, 10 * UB_NS_PER_S, 10000000));
    assert_int_equal(r.ndeliv, 3000);
    assert_int_equal(r.nfailed, 0);
    memcpy(after, r.per_path, 4 * sizeof(uint32_t));
    printf("  %-9s path 2 %s: delivered per path before %u/%u/%u/%u, after %u/%u/%u/%u (CE %u)\n",
           lb, rule == UB_IMPAIR_PATH_CE ? "CE-marks " : "drops 30%", before[0], before[1],
           before[2], before[3], after[0], after[1], after[2], after[3], r.nce);
    ub__testbed_destroy(&r.tb);
}

static void test_lb_steers_away(void **state)
{
    (void)state;
    static const char *const lbs[] = {"reps", "bitmap"};
    static const uint32_t rules[][2] = {{UB_IMPAIR_PATH_CE, UB_IMPAIR_PPM},
                                        {UB_IMPAIR_PATH_DROP, 300000}};
    for (int i = 0; i < 2; i++) {
        for (int k = 0; k < 2; k++) {
            uint32_t b[4], a[4];
            steer(lbs[i], rules[k][0], rules[k][1], b, a);
            assert_true(b[2] > 100); /* path 2 carried its part before */
            /* After: under two thirds of what the least used good path carries. */
            uint32_t lo = UB_MIN(a[0], UB_MIN(a[1], a[3]));
            assert_true(3 * a[2] < 2 * lo);
        }
    }
    /* Oblivious spraying cannot: it keeps its share. */
    uint32_t b[4], a[4];
    steer("oblivious", UB_IMPAIR_PATH_CE, UB_IMPAIR_PPM, b, a);
    assert_int_equal(a[2], 1500 / 4);
}

/*
 * Bursts (spray_burst): 1 500 packets over 4 paths, congestion control out, a packet window
 * of `window`. Returns the packets per burst (spray_burst over the datagram size); fills
 * the longest run of consecutive first copies on one path and the number of runs, both over
 * packets 300 and later (the window full).
 */
static uint32_t burst_run(struct run *r, const char *lb, uint32_t window, uint32_t burst,
                          uint32_t *longest, uint32_t *runs)
{
    struct ub__loopnet_cfg nc;
    struct ub__engine_cfg ec;
    cfg_default(&nc, &ec, 17);
    ec.pds.lb_algo = lb;
    ec.pds.cc_algo = "none";
    ec.pds.window = window;
    ec.pds.spray_burst = burst;
    run_init(r, &nc, &ec);
    offer(r, 1500, UB_PDS_RUD);
    assert_true(ub__testbed_run(&r->tb, UB_NS_PER_S, 10000000));
    assert_int_equal(r->ndeliv, 1500);
    assert_int_equal(st(r, 0)->retx_pkts, 0);
    *longest = 0;
    *runs = 0;
    for (uint32_t i = 300, len = 0; i < 1500; i++) {
        len = i > 300 && r->path[i] == r->path[i - 1] ? len + 1 : 1;
        *runs += len == 1;
        *longest = UB_MAX(*longest, len);
    }
    uint32_t k = burst / wire_size(r);
    ub__testbed_destroy(&r->tb);
    return k;
}

static void test_spray_bursts(void **state)
{
    (void)state;
    static struct run r;
    uint32_t longest, runs;
    /* Per packet: a new choice every packet (oblivious repeats an EV only across rounds). */
    burst_run(&r, "oblivious", 256, 0, &longest, &runs);
    assert_true(runs > 1000 && longest <= 2);
    /* Bursts of k packets: runs of up to k, or 2k where two rounds meet on one EV (shorter
     * while the flight refills: the loop acknowledges a whole window at one instant); the
     * paths still share alike. */
    uint32_t k = burst_run(&r, "oblivious", 256, 4096, &longest, &runs);
    printf("  bursts of %u packets: %u runs, the longest %u, per path %u/%u/%u/%u\n", k, runs,
           longest, r.per_path[0], r.per_path[1], r.per_path[2], r.per_path[3]);
    assert_true(k >= 8);
    assert_true(longest >= k && longest <= 2 * k && runs < 1200 / 8 && runs >= 1200 / (2 * k));
    for (uint32_t i = 0; i < 4; i++)
        assert_true(r.per_path[i] + 2 * k >= 1500 / 4 && r.per_path[i] <= 1500 / 4 + 2 * k);
    /* A window of 16 packets: a burst is at most a quarter of the 15 in flight before it. */
    burst_run(&r, "oblivious", 16, 4096, &longest, &runs);
    assert_true(longest <= 2 * 3 && runs >= 1200 / 6);
    /* REPS learns once per burst: every path keeps at least three quarters of an even share. */
    burst_run(&r, "reps", 256, 4096, &longest, &runs);
    printf("  reps: per path %u/%u/%u/%u\n", r.per_path[0], r.per_path[1], r.per_path[2],
           r.per_path[3]);
    for (uint32_t i = 0; i < 4; i++)
        assert_true(r.per_path[i] >= 3 * 1500 / 16);
}

/*
 * A spurious RTO: the target's ACKs stall (one held 300 us, the rest queued behind it: a
 * peer off the CPU) while nothing is lost. The RTO (200 us) cuts the window and resends the
 * oldest packet only; the held ACKs then acknowledge originals, so the RTO was spurious:
 * nothing else is resent and the cut is undone, the window back where it was before the RTO.
 * With the packet window binding (256) and with the congestion window binding (packet window
 * 1024) alike: before the verdict waited for an ACK, the first resent the whole flight (257
 * packets), the second what the cut window let go (16).
 */
static void spurious_rto_run(uint32_t window, uint32_t count)
{
    struct ub__loopnet_cfg nc;
    struct ub__engine_cfg ec;
    cfg_default(&nc, &ec, 21);
    ec.pds.cc_algo = "nscc";
    ec.pds.window = window;
    static struct run r;
    run_init(&r, &nc, &ec);
    struct ub__impair_cfg ic = {.fifo = true};
    ub__impair_add(&ic, UB_IMPAIR_DELAY_NTH, 40, 300000, 0);
    assert_int_equal(ub__loopnet_impair(r.tb.net, 1, 0, &ic), 0);
    offer(&r, count, UB_PDS_RUD);
    assert_false(ub__testbed_run(&r.tb, 50000000, 10000000));
    assert_int_equal(r.ndeliv, count);
    assert_int_equal(r.nfailed, 0);
    const struct ub__pds_stats *s0 = st(&r, 0);
    const struct ub__cc *cc = ub__pds_cc(r.tb.nodes[0].eng.pds, &r.tb.nodes[1].addr);
    assert_non_null(cc);
    /* The window each packet saw acknowledged: before the stall, then right after the undo. */
    uint64_t before = r.cwnd[r.order[35]], cut = UINT64_MAX, after = 0;
    for (uint32_t k = 36; k < r.nacked; k++) {
        uint64_t w = r.cwnd[r.order[k]];
        cut = UB_MIN(cut, w);
        if (cut < before && w >= before) {
            after = w;
            break;
        }
    }
    printf("  window %u: %" PRIu64 " RTO, %" PRIu64 " undone, %" PRIu64 " resent, %" PRIu64
           " spurious at the target; cwnd %" PRIu64 " -> %" PRIu64 " -> %" PRIu64 "\n",
           window, s0->rto_fired, s0->rto_undone, s0->retx_pkts, st(&r, 1)->spurious_retx, before,
           cut, after);
    assert_int_equal(s0->rto_fired, 1);
    assert_int_equal(s0->rto_undone, 1);
    assert_int_equal(cc->st.timeouts, 1);
    assert_int_equal(cc->st.undone, 1);
    assert_true(cut < before);    /* the RTO cut it ... */
    assert_true(after >= before); /* ... and the first ACK after the stall restored it */
    /* The tail-loss probe before the RTO, and the RTO's one resend. */
    assert_true(s0->retx_pkts <= 2);
    ub__testbed_destroy(&r.tb);
}

static void test_spurious_rto_undone(void **state)
{
    (void)state;
    spurious_rto_run(256, 400);
    spurious_rto_run(1024, 2000);
}

/*
 * A peer off its CPU again and again: the ACK stream stalls for 3 ms `stalls` times (one ACK
 * held, the rest queued behind it), nothing lost. Returns the initiator's stats.
 */
static struct ub__pds_stats stall_run(uint32_t stalls, uint64_t *done_ns)
{
    struct ub__loopnet_cfg nc;
    struct ub__engine_cfg ec;
    cfg_default(&nc, &ec, 23);
    ec.pds.cc_algo = "nscc";
    static struct run r;
    run_init(&r, &nc, &ec);
    struct ub__impair_cfg ic = {.fifo = true};
    for (uint32_t k = 0; k < stalls; k++)
        assert_int_equal(ub__impair_add(&ic, UB_IMPAIR_DELAY_NTH, 40 + 600 * k, 3000000, 0), 0);
    assert_int_equal(ub__loopnet_impair(r.tb.net, 1, 0, &ic), 0);
    offer(&r, 3000, UB_PDS_RUD);
    (void)ub__testbed_run(&r.tb, 500000000, 10000000); /* idle, or timers left at the end */
    assert_int_equal(r.ndeliv, 3000);
    assert_int_equal(r.nfailed, 0);
    struct ub__pds_stats s = *st(&r, 0);
    *done_ns = r.ackt[r.order[r.nacked - 1]];
    printf("  %u stalls: %" PRIu64 " RTO, %" PRIu64 " undone, %" PRIu64 " floors, %" PRIu64
           " probes, %" PRIu64 " resent (rto %" PRIu64 ", fast %" PRIu64 "), done at %.2f ms\n",
           stalls, s.rto_fired, s.rto_undone, s.rto_floor_raised, s.probes_sent, s.retx_pkts,
           s.retx_rto, s.retx_fast, (double)*done_ns / 1e6);
    ub__testbed_destroy(&r.tb);
    return s;
}

/*
 * The first stall's RTOs are proven spurious by the first ACK after it, an original copy's:
 * the silence it ended (3 ms and a little) becomes the PDC's RTO floor, and the four stalls
 * after it pass without an RTO: a tail-loss probe each, one packet. A run without stalls
 * learns nothing.
 */
static void test_rto_learns_stalls(void **state)
{
    (void)state;
    uint64_t t0, t1, t5;
    struct ub__pds_stats none = stall_run(0, &t0), one = stall_run(1, &t1),
                         five = stall_run(5, &t5);
    assert_int_equal(none.rto_fired + none.rto_floor_raised + none.retx_pkts, 0);
    assert_true(one.rto_fired >= 1);
    assert_int_equal(one.rto_undone, 1);
    assert_int_equal(one.rto_floor_raised, 1);
    assert_int_equal(five.rto_fired, one.rto_fired);
    assert_int_equal(five.rto_undone, 1);
    assert_int_equal(five.rto_floor_raised, 1);
    assert_int_equal(five.probes_sent, one.probes_sent + 4);
    assert_int_equal(five.retx_pkts, one.retx_pkts + 4);
    /* Each later stall costs its 3 ms and no more. */
    assert_true(t5 - t1 < 4 * 3000000 + 4 * 200000);
}

/* Same seed, same trajectory (times, paths, windows); another seed, another one. */
static void one_run(struct run *r, uint64_t seed)
{
    struct ub__loopnet_cfg nc;
    struct ub__engine_cfg ec;
    cfg_default(&nc, &ec, seed);
    ec.pds.ack_every = 0;
    ec.pds.cc_init_cwnd = 3000;
    run_init(r, &nc, &ec);
    /* FIFO jitter: each path stays in order, as the per-path loss detection assumes. */
    struct ub__impair_cfg ic = {
        .seed = seed, .drop_ppm = 20000, .ce_ppm = 50000, .jitter_ns = 500, .fifo = true};
    assert_int_equal(ub__loopnet_impair(r->tb.net, 0, 1, &ic), 0);
    assert_int_equal(ub__loopnet_impair(r->tb.net, 1, 0, &ic), 0);
    offer(r, 2000, UB_PDS_RUD);
    assert_true(ub__testbed_run(&r->tb, 10 * UB_NS_PER_S, 10000000));
    assert_int_equal(r->ndeliv, 2000);
}

static void test_determinism(void **state)
{
    (void)state;
    static struct run a, b;
    one_run(&a, 21);
    one_run(&b, 21);
    assert_memory_equal(a.arr, b.arr, sizeof(a.arr));
    assert_memory_equal(a.ackt, b.ackt, sizeof(a.ackt));
    assert_memory_equal(a.cwnd, b.cwnd, sizeof(a.cwnd));
    assert_memory_equal(a.path, b.path, sizeof(a.path));
    assert_int_equal(a.tb.now, b.tb.now);
    ub__testbed_destroy(&b.tb);
    one_run(&b, 22);
    assert_true(memcmp(a.path, b.path, sizeof(a.path)) != 0);
    ub__testbed_destroy(&a.tb);
    ub__testbed_destroy(&b.tb);
}

/* A trimmed request is NACKed, not delivered; the initiator resends it at once. */
static void test_trimmed_nacked(void **state)
{
    (void)state;
    struct ub__loopnet_cfg nc;
    struct ub__engine_cfg ec;
    cfg_default(&nc, &ec, 16);
    ec.pds.trimming = true;
    static struct run r;
    run_init(&r, &nc, &ec);
    struct ub__engine *e0 = &r.tb.nodes[0].eng, *e1 = &r.tb.nodes[1].eng;
    offer(&r, 1, UB_PDS_RUD);
    struct ub__pkt *out[4];
    assert_int_equal(ub__engine_output(e0, out, 4, r.tb.now), 1);
    /* What a switch leaves of it: the first 64 bytes, flagged. */
    struct ub__pkt *t = ub__pkt_alloc(&e1->pool);
    assert_non_null(t);
    memcpy(ub__pkt_put(t, 64), out[0]->data, 64);
    t->addr = r.tb.nodes[0].addr;
    t->path = out[0]->path;
    t->ecn = 3;
    t->flags = UB_PDS_PKT_TRIMMED;
    ub__pkt_free(out[0]);
    ub__engine_input(e1, &t, 1, r.tb.now);
    assert_int_equal(r.ndeliv, 0);
    assert_int_equal(st(&r, 1)->rx_trimmed, 1);
    assert_int_equal(st(&r, 1)->nacks_tx, 1);
    assert_int_equal(st(&r, 1)->rx_ce, 1);
    assert_int_equal(ub__engine_output(e1, out, 4, r.tb.now), 1);
    struct ub__wire_dgram d;
    assert_int_equal(ub__wire_parse_datagram(&d, out[0]->data, out[0]->len, 0), 0);
    assert_int_equal(d.pds.type, UB_PDS_TYPE_NACK);
    assert_int_equal(d.pds.u.nack.code, UB_PDS_NACK_TRIMMED);
    assert_true(d.pds.u.nack.flags & UB_PDS_NACK_F_M);
    out[0]->addr = r.tb.nodes[1].addr;
    struct ub__pkt *n = ub__pkt_alloc(&e0->pool);
    memcpy(ub__pkt_put(n, out[0]->len), out[0]->data, out[0]->len);
    n->addr = r.tb.nodes[1].addr;
    ub__pkt_free(out[0]);
    ub__engine_input(e0, &n, 1, r.tb.now);
    const struct ub__cc *cc = ub__pds_cc(e0->pds, &r.tb.nodes[1].addr);
    assert_int_equal(cc->st.nacks, 1);
    assert_true(ub__testbed_run(&r.tb, UB_NS_PER_S, 100000));
    assert_int_equal(r.ndeliv, 1);
    assert_int_equal(r.nacked, 1);
    assert_int_equal(st(&r, 0)->retx_nack, 1);
    assert_int_equal(st(&r, 0)->rto_fired, 0);
    ub__testbed_destroy(&r.tb);
}

/* RUD and ROD to one peer share one context, freed with the last PDC; "none" has none. */
static void test_shared_context(void **state)
{
    (void)state;
    struct ub__loopnet_cfg nc;
    struct ub__engine_cfg ec;
    cfg_default(&nc, &ec, 17);
    ec.pds.idle_close_ns = 1000000;
    static struct run r;
    run_init(&r, &nc, &ec);
    struct ub__pds *pds = r.tb.nodes[0].eng.pds;
    offer(&r, 50, UB_PDS_RUD);
    offer(&r, 50, UB_PDS_ROD);
    assert_int_equal(ub__pds_ipdc_count(pds), 2);
    assert_int_equal(ub__pds_cc_count(pds), 1);
    assert_int_equal(ub__pds_cc_inflight(pds, &r.tb.nodes[1].addr), 0);
    assert_false(ub__testbed_run(&r.tb, r.tb.now + 1000, 100000));
    assert_true(ub__pds_cc_inflight(pds, &r.tb.nodes[1].addr) > 0);
    assert_true(ub__testbed_run(&r.tb, UB_NS_PER_S, 1000000));
    assert_int_equal(r.ndeliv, 100);
    assert_int_equal(ub__pds_ipdc_count(pds), 0);
    assert_int_equal(ub__pds_cc_count(pds), 0);
    ub__testbed_destroy(&r.tb);

    ec.pds.cc_algo = "none";
    run_init(&r, &nc, &ec);
    offer(&r, 10, UB_PDS_RUD);
    assert_null(ub__pds_cc(r.tb.nodes[0].eng.pds, &r.tb.nodes[1].addr));
    assert_true(ub__testbed_run(&r.tb, UB_NS_PER_S, 1000000));
    assert_int_equal(r.ndeliv, 10);
    ub__testbed_destroy(&r.tb);

    static struct ub__engine e;
    ec.pds.cc_algo = "bogus+rccc"; /* receiver credits on an unknown window */
    assert_int_equal(ub__engine_init(&e, &ec), UB_EINVAL);
    ec.pds.cc_algo = "bogus";
    assert_int_equal(ub__engine_init(&e, &ec), UB_EINVAL);
    ec.pds.cc_algo = NULL;
    ec.pds.lb_algo = "bogus";
    assert_int_equal(ub__engine_init(&e, &ec), UB_EINVAL);
}

/* Node `to`'s copy of a datagram node `from` sent (the sender keeps its bytes). */
static struct ub__pkt *hand_over(struct run *r, struct ub__pkt *p, uint32_t from)
{
    struct ub__pkt *c = ub__pkt_clone(p);
    assert_non_null(c);
    ub__pkt_free(p);
    c->addr = r->tb.nodes[from].addr;
    return c;
}

/*
 * C-AQM through PDS, driven by hand on the test bed's engines: every request leaves with I and
 * the sender's rate as hint (link / 16 at the start); a scripted switch marks one request with
 * C and a 3 Gbit/s hint; the target echoes C and that hint in its ACK_CC (cc_type CAQM), and
 * the sender's context adopts it: its rate and the hint of its later requests follow.
 */
static void test_caqm_echo(void **state)
{
    (void)state;
    struct ub__loopnet_cfg nc;
    struct ub__engine_cfg ec;
    cfg_default(&nc, &ec, 14);
    ec.pds.cc_algo = "caqm";
    static struct run r;
    run_init(&r, &nc, &ec);
    offer(&r, 60, UB_PDS_RUD);
    struct ub__engine *e0 = &r.tb.nodes[0].eng, *e1 = &r.tb.nodes[1].eng;
    const struct ub__cc *cc = NULL;
    const uint16_t mark_hint = ub__caqm_hint_encode(3000000000ull);
    uint32_t ndata = 0, marked_psn = 0, nack_caqm = 0, nack_c = 0, after = 0;
    bool marked = false, adopted = false;
    uint64_t adopted_at = 0;
    uint64_t now = 1000; /* the loop's RTT is ~0 here: base RTT 12 us (the default) paces */
    for (int round = 0; round < 2000 && r.nacked < r.n; round++, now += 500) {
        struct ub__pkt *pk[64];
        uint32_t n = ub__engine_output(e0, pk, 64, now);
        cc = ub__pds_cc(e0->pds, &r.tb.nodes[1].addr);
        for (uint32_t i = 0; i < n; i++) {
            struct ub__pkt *p = hand_over(&r, pk[i], 0);
            struct ub__wire_dgram d;
            assert_int_equal(ub__wire_parse_datagram(&d, p->data, p->len, 0), 0);
            if (d.pds.type == UB_PDS_TYPE_RUD_REQ) {
                assert_true(d.has_ext);
                assert_true(d.ext.aqm_increase); /* below line rate: asks for more */
                assert_false(d.ext.aqm_congestion);
                assert_int_equal(d.ext.aqm_hint, ub__caqm_hint_encode(cc->u.caqm.rate));
                if (ndata == 0)
                    assert_int_equal(d.ext.aqm_hint, 625); /* 6.25 Gbit/s: link / 16 */
                if (adopted && now < adopted_at + 12000) { /* held one base RTT */
                    assert_int_equal(d.ext.aqm_hint, mark_hint);
                    after++;
                }
                if (++ndata == 20) { /* the switch: C and a lower hint, I cleared */
                    struct ub__ext x = d.ext;
                    x.aqm_increase = false;
                    x.aqm_congestion = true;
                    x.aqm_hint = mark_hint;
                    struct ub__wcur w;
                    ub__wcur_init(&w, p->data + d.ext_off, d.ext_len);
                    assert_int_equal(ub__ext_encode(&x, &w), 0);
                    marked_psn = d.pds.u.req.psn;
                    marked = true;
                }
            }
            ub__engine_input(e1, &p, 1, now);
        }
        n = ub__engine_output(e1, pk, 64, now);
        for (uint32_t i = 0; i < n; i++) {
            struct ub__pkt *p = hand_over(&r, pk[i], 1);
            struct ub__wire_dgram d;
            assert_int_equal(ub__wire_parse_datagram(&d, p->data, p->len, 0), 0);
            const struct ub__pds_ack *a = &d.pds.u.ack;
            assert_int_equal(a->type, UB_PDS_TYPE_ACK_CC);
            assert_int_equal(a->cc_type, UB_PDS_CC_CAQM);
            nack_caqm++;
            uint32_t trig = ub__seq_add(a->cack_psn, a->ack_psn_offset);
            if (a->cc.caqm.c) {
                nack_c++;
                assert_true(marked && trig == marked_psn); /* C makes the ACK go at once */
                assert_int_equal(a->cc.caqm.hint, mark_hint);
                assert_false(a->cc.caqm.i);
            } else {
                assert_true(a->cc.caqm.i); /* granted all the way */
            }
            ub__engine_input(e0, &p, 1, now);
            if (a->cc.caqm.c) {
                assert_int_equal(cc->u.caqm.rate, 3000000000ull);
                assert_int_equal(ub__cc_pacing_rate(cc), 375000000ull);
                assert_int_equal(cc->st.hints, 1);
                adopted = true;
                adopted_at = now;
            }
        }
        ub__engine_expire(e0, now);
        ub__engine_expire(e1, now);
    }
    assert_int_equal(r.nacked, r.n);
    assert_int_equal(r.ndeliv, r.n);
    assert_int_equal(nack_c, 1);
    assert_true(after > 0);
    printf("  caqm: %u requests, %u ACK_CC CAQM (1 with C), %u requests after the hint at "
           "%" PRIu64 " bit/s\n",
           ndata, nack_caqm, after, cc->u.caqm.rate);
    ub__testbed_destroy(&r.tb);
}

/* A copy of what node `from` sent, in a buffer of node `to`'s pool (as its NIC would receive). */
static struct ub__pkt *copy_to(struct run *r, struct ub__pkt *p, uint32_t from, uint32_t to)
{
    struct ub__pkt *c = ub__pkt_alloc(&r->tb.nodes[to].eng.pool);
    assert_non_null(c);
    memcpy(ub__pkt_put(c, p->len), p->data, p->len);
    c->addr = r->tb.nodes[from].addr;
    c->path = p->path;
    ub__pkt_free(p);
    return c;
}

/* The target's penalty for a pool of `count` buffers with `avail` free (default 25 %). */
static uint8_t pend_of(uint32_t count, uint32_t avail)
{
    uint64_t thr = (uint64_t)count * 25, free100 = (uint64_t)avail * 100;
    return (uint8_t)(free100 >= thr ? 0 : (thr - free100) * 127 / thr);
}

/*
 * Destination flow control, driven by hand: the test holds most of the target's packet pool
 * and gives it back a few buffers per round. Every ACK_CC carries rcv_cwnd_pend as the pool
 * stood when it was built (127 x the shortfall below 25 % free, linearly; 0 above): near 127
 * at first, 0 at the end. The sender's NSCC context after each ACK equals a copy of it from
 * just before, fed the same ACK fields by hand, and the penalty cost window (a copy fed 0 ends
 * larger). With no_dest_fc the same pressure sends 0.
 */
static void dest_fc_run(bool off, uint32_t *n_pend, uint32_t *max_pend)
{
    struct ub__loopnet_cfg nc;
    struct ub__engine_cfg ec;
    cfg_default(&nc, &ec, 18);
    ec.pds.cc_algo = "nscc";
    ec.pds.window = 4; /* a few packets a round: the ACKs' buffers stay few */
    ec.pds.no_dest_fc = off;
    ec.pool_bufs = 1024;
    static struct run r;
    run_init(&r, &nc, &ec);
    struct ub__engine *e0 = &r.tb.nodes[0].eng, *e1 = &r.tb.nodes[1].eng;
    const struct ub__addr *dst = &r.tb.nodes[1].addr;
    static struct ub__pkt *hog[1024];
    uint32_t nhog = 0;
    while (e1->pool.avail > 20)
        hog[nhog++] = ub__pkt_alloc(&e1->pool);
    offer(&r, 200, UB_PDS_RUD);
    uint8_t expect[8];
    uint32_t nack = 0, cost = 0;
    *n_pend = *max_pend = 0;
    uint8_t last = 0;
    uint64_t t = 1000;
    for (int round = 0; round < 1000 && r.nacked < r.n; round++, t += 2000) {
        struct ub__pkt *pk[8];
        uint32_t n = ub__engine_output(e0, pk, 8, t), nd = 0;
        for (uint32_t i = 0; i < n; i++) {
            struct ub__pkt *p = copy_to(&r, pk[i], 0, 1);
            assert_true(nd < 8);
            /* As send_ack sees the pool: this packet and the ACKs queued so far taken. */
            expect[nd++] = off ? 0 : pend_of(e1->pool.count, e1->pool.avail);
            ub__engine_input(e1, &p, 1, t + 1000);
        }
        uint32_t na = ub__engine_output(e1, pk, 8, t + 1000);
        assert_int_equal(na, nd); /* ack_every 1: one ACK per request, in order */
        for (uint32_t i = 0; i < na; i++) {
            struct ub__pkt *p = copy_to(&r, pk[i], 1, 0);
            struct ub__wire_dgram d;
            assert_int_equal(ub__wire_parse_datagram(&d, p->data, p->len, 0), 0);
            const struct ub__pds_ack *a = &d.pds.u.ack;
            assert_int_equal(a->type, UB_PDS_TYPE_ACK_CC);
            assert_int_equal(a->cc_type, UB_PDS_CC_NSCC);
            uint8_t pend = a->cc.nscc.rcv_cwnd_pend;
            assert_int_equal(pend, expect[i]);
            nack++;
            last = pend;
            *n_pend += pend != 0;
            *max_pend = UB_MAX(*max_pend, pend);
            const struct ub__cc *cc = ub__pds_cc(e0->pds, dst);
            assert_non_null(cc);
            struct ub__cc m = *cc, m0 = *cc;
            uint32_t acked_before = r.nacked;
            ub__engine_input(e0, &p, 1, t + 2000);
            assert_int_equal(r.nacked, acked_before + 1);
            struct ub__cc_ack ev = {
                .acked_bytes = wire_size(&r),
                .inflight = ub__pds_cc_inflight(e0->pds, dst),
                .rtt_ns = 2000,
                .has_nscc = true,
                .rcv_cwnd_pend = pend,
                .service_ns = (uint32_t)a->cc.nscc.service_time * UB_PDS_SERVICE_TIME_NS,
            };
            ub__cc_on_ack(&m, &ev, t + 2000);
            assert_int_equal(ub__cc_cwnd(cc), ub__cc_cwnd(&m));
            assert_memory_equal(&cc->st, &m.st, sizeof(cc->st));
            assert_memory_equal(&cc->u.nscc, &m.u.nscc, sizeof(cc->u.nscc));
            ev.rcv_cwnd_pend = 0;
            ub__cc_on_ack(&m0, &ev, t + 2000);
            if (pend)
                cost += ub__cc_cwnd(&m0) > ub__cc_cwnd(&m);
        }
        for (int k = 0; k < 6 && nhog; k++) /* the target's load eases */
            ub__pkt_free(hog[--nhog]);
        ub__engine_expire(e0, t + 2000);
        ub__engine_expire(e1, t + 1000);
    }
    assert_int_equal(r.nacked, r.n);
    assert_int_equal(r.ndeliv, r.n);
    assert_int_equal(r.nfailed, 0);
    assert_int_equal(nack, r.n);
    assert_int_equal(last, 0); /* the pool back above 25 % free */
    if (*n_pend)
        assert_true(cost > 0);
    printf("  dest fc%s: %u of %u ACKs with rcv_cwnd_pend (max %u), %u cut the window, "
           "cwnd %" PRIu64 " at the end\n",
           off ? " off" : "", *n_pend, nack, *max_pend, cost,
           ub__cc_cwnd(ub__pds_cc(e0->pds, dst)));
    while (nhog)
        ub__pkt_free(hog[--nhog]);
    ub__testbed_destroy(&r.tb);
}

static void test_dest_fc_penalty(void **state)
{
    (void)state;
    uint32_t n, max;
    dest_fc_run(false, &n, &max);
    assert_true(n > 50);
    assert_true(max >= 110); /* ~19 of 1024 free: 117 */
    dest_fc_run(true, &n, &max);
    assert_int_equal(n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window_follows_cc), cmocka_unit_test(test_ecn_md_once_per_rtt),
        cmocka_unit_test(test_ecn_echo),          cmocka_unit_test(test_pacing_exact),
        cmocka_unit_test(test_pacing_burst),      cmocka_unit_test(test_pacing_burst_time),
        cmocka_unit_test(test_lb_steers_away),    cmocka_unit_test(test_spray_bursts),
        cmocka_unit_test(test_determinism),       cmocka_unit_test(test_trimmed_nacked),
        cmocka_unit_test(test_shared_context),    cmocka_unit_test(test_caqm_echo),
        cmocka_unit_test(test_dest_fc_penalty),   cmocka_unit_test(test_spurious_rto_undone),
        cmocka_unit_test(test_rto_learns_stalls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
