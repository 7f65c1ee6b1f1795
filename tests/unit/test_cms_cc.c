/* Congestion control: exact trajectories on scripted event streams, the pacer,
 * RCCC credits, C-AQM, DCQCN, and a closed-loop NSCC fairness check. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "cms/cc.h"
#include "core/clock.h"
#include "softub/errors.h"
#include "wire/ext.h"

/* The reference network of the NSCC constants: 100 Gbit/s, 12 us, 4 KiB MTU. */
static struct ub__cc_params ref_params(void)
{
    struct ub__cc_params p;
    memset(&p, 0, sizeof p);
    p.link_bps = 100000000000ULL;
    p.base_rtt_ns = 12000;
    p.mtu = 4096;
    p.trimming = true;
    p.qa_gate = -1;
    return p;
}

static struct ub__cc_ack ack_of(uint64_t bytes, uint64_t rtt, bool ecn)
{
    struct ub__cc_ack a;
    memset(&a, 0, sizeof a);
    a.acked_bytes = bytes;
    a.rtt_ns = rtt;
    a.ecn = ecn;
    return a;
}

static void test_registry(void **state)
{
    (void)state;
    const char *names[] = {"none", "nscc", "rccc", "dcqcn", "caqm"};
    for (size_t i = 0; i < 5; i++) {
        assert_non_null(ub__cc_algo_find(names[i]));
        assert_string_equal(ub__cc_algo_at(i)->name, names[i]);
    }
    assert_null(ub__cc_algo_at(5));
    assert_null(ub__cc_algo_find("cubic"));
    struct ub__cc cc;
    struct ub__cc_params p = ref_params();
    p.mtu = 0;
    assert_int_equal(ub__cc_init(&cc, &ub__cc_nscc, &p), UB_EINVAL);
    assert_int_equal(ub__cc_init(&cc, NULL, &p), UB_EINVAL);
}

static void test_none_fixed(void **state)
{
    (void)state;
    struct ub__cc cc;
    struct ub__cc_params p = ref_params();
    p.init_cwnd = 10000;
    assert_int_equal(ub__cc_init(&cc, ub__cc_algo_find("none"), &p), 0);
    struct ub__cc_ack a = ack_of(4096, 50000, true);
    ub__cc_on_ack(&cc, &a, 1000);
    assert_int_equal(ub__cc_cwnd(&cc), 10000);
    assert_int_equal(ub__cc_pacing_rate(&cc), 0);
    assert_true(ub__cc_can_send(&cc, 5904, 4096, 0));
    assert_false(ub__cc_can_send(&cc, 5905, 4096, 0));
}

static void test_nscc_params(void **state)
{
    (void)state;
    struct ub__cc cc;
    struct ub__cc_params p = ref_params();
    assert_int_equal(ub__cc_init(&cc, &ub__cc_nscc, &p), 0);
    const struct ub__cc_nscc *s = &cc.u.nscc;
    assert_int_equal(s->net_bdp, 150000);
    assert_int_equal(s->maxwnd, 225000);      /* 1.5 BDP */
    assert_int_equal(s->minwnd, 4096);        /* 1 MTU */
    assert_int_equal(s->target, 9000);        /* 0.75 x base RTT with trimming */
    assert_int_equal(s->qa_threshold, 36000); /* 4 x target */
    assert_int_equal(s->fi, 20480);           /* 5 MSS x a, a = 1 */
    assert_int_equal(s->eta, 614);            /* 0.15 MSS x a */
    assert_int_equal(cc.cwnd, 225000);        /* starts at the max window */
    /* no trimming: target = base RTT; 400 Gbit/s: a = 4 scales fi and eta */
    p.trimming = false;
    p.link_bps = 400000000000ULL;
    assert_int_equal(ub__cc_init(&cc, &ub__cc_nscc, &p), 0);
    assert_int_equal(s->target, 12000);
    assert_int_equal(s->fi, 81920);
    assert_int_equal(s->eta, 2457);
    assert_int_equal(s->maxwnd, 900000);
}

/* Delay 3 us below the 9 us target, no ECN, one ACK per 13 us (each fulfils). */
static void test_nscc_proportional(void **state)
{
    (void)state;
    static const uint64_t want[20] = {42393, 43798, 45178, 46534, 47869, 49183, 50479,
                                      51757, 53019, 54265, 55497, 56715, 57920, 59113,
                                      60294, 61464, 62623, 63772, 64912, 66042};
    struct ub__cc cc;
    struct ub__cc_params p = ref_params();
    p.init_cwnd = 40960;
    assert_int_equal(ub__cc_init(&cc, &ub__cc_nscc, &p), 0);
    for (int i = 0; i < 20; i++) {
        struct ub__cc_ack a = ack_of(4096, 12000 + 3000, false);
        ub__cc_on_ack(&cc, &a, 20000 + 13000 * (uint64_t)i);
        assert_int_equal(ub__cc_cwnd(&cc), want[i]);
    }
    /* first step by hand: inc = 4 x 4096 x 4096 x 6000 / 12000 = 33554432;
     * 40960 + 33554432 / 40960 + eta 614 = 42393 */
    assert_int_equal(cc.st.md, 0);
    assert_int_equal(cc.st.fulfil, 20);
}

/* Delay above target without ECN: fair increase, 5 MSS per window of ACKs. */
static void test_nscc_fair(void **state)
{
    (void)state;
    static const uint64_t want[20] = {43622, 46159, 48590, 50930, 53191, 55382, 57510,
                                      59582, 61603, 63578, 65511, 67405, 69263, 71088,
                                      72882, 74646, 76383, 78095, 79783, 81448};
    struct ub__cc cc;
    struct ub__cc_params p = ref_params();
    p.init_cwnd = 40960;
    assert_int_equal(ub__cc_init(&cc, &ub__cc_nscc, &p), 0);
    for (int i = 0; i < 20; i++) {
        struct ub__cc_ack a = ack_of(4096, 12000 + 10000, false);
        ub__cc_on_ack(&cc, &a, 20000 + 13000 * (uint64_t)i);
        assert_int_equal(ub__cc_cwnd(&cc), want[i]);
    }
    /* 40960 + 20480 x 4096 / 40960 + 614 = 43622 */
}

/* ECN and a 30 us queue: the MD waits for the delay EWMA to pass the target,
 * then applies at most once per base RTT (13 ACKs at 1 us spacing). */
static void test_nscc_md_once_per_rtt(void **state)
{
    (void)state;
    static const int md_at[6] = {28, 41, 54, 67, 80, 93};
    static const uint64_t md_cwnd[6] = {198865, 156559, 106978, 66439, 38596, 21412};
    struct ub__cc cc;
    struct ub__cc_params p = ref_params();
    p.init_cwnd = 200000;
    assert_int_equal(ub__cc_init(&cc, &ub__cc_nscc, &p), 0);
    int k = 0;
    for (int i = 0; i < 100; i++) {
        struct ub__cc_ack a = ack_of(4096, 12000 + 30000, true);
        ub__cc_on_ack(&cc, &a, 20000 + 1000 * (uint64_t)i);
        if (cc.st.md > (uint64_t)k) {
            assert_true(k < 6);
            assert_int_equal(i, md_at[k]);
            assert_int_equal(ub__cc_cwnd(&cc), md_cwnd[k]);
            k++;
        }
    }
    assert_int_equal(k, 6);
    assert_int_equal(ub__cc_cwnd(&cc), 21412);
}

/* ECN with a short queue: no window change (the quadrant only moves paths). */
static void test_nscc_ecn_low_delay_noop(void **state)
{
    (void)state;
    struct ub__cc cc;
    struct ub__cc_params p = ref_params();
    p.init_cwnd = 50000;
    assert_int_equal(ub__cc_init(&cc, &ub__cc_nscc, &p), 0);
    for (int i = 0; i < 5; i++) {
        struct ub__cc_ack a = ack_of(4096, 12000 + 2000, true);
        ub__cc_on_ack(&cc, &a, 1000 + 1000 * (uint64_t)i); /* no fulfil: < 12 us, < 8 MTU */
        assert_int_equal(ub__cc_cwnd(&cc), 50000);
    }
}

/* A trim after a period in which only 16 KiB got through: cwnd = 16 KiB. */
static void test_nscc_quick_adapt_trim(void **state)
{
    (void)state;
    struct ub__cc cc;
    struct ub__cc_params p = ref_params();
    assert_int_equal(ub__cc_init(&cc, &ub__cc_nscc, &p), 0);
    struct ub__cc_ack a = ack_of(4096, 12000 + 20000, false);
    ub__cc_on_ack(&cc, &a, 1000); /* opens the period: ends at 1000 + 12000 + 9000 */
    for (uint64_t t = 2000; t <= 5000; t += 1000)
        ub__cc_on_ack(&cc, &a, t); /* 4 x 4096 achieved */
    assert_true(ub__cc_cwnd(&cc) > 16384);
    struct ub__cc_nack n = {.bytes = 4096, .inflight = 8192, .trimmed = true};
    ub__cc_on_nack(&cc, &n, 22001);
    assert_int_equal(cc.st.quick_adapt, 1);
    assert_int_equal(ub__cc_cwnd(&cc), 16384);
    /* the next 8192 bytes of marked ACKs (already in flight) are ignored */
    struct ub__cc_ack m = ack_of(4096, 12000 + 30000, true);
    ub__cc_on_ack(&cc, &m, 22100);
    assert_int_equal(ub__cc_cwnd(&cc), 16384);
    /* the next one counts again: no MD yet (the delay EWMA is still below target),
     * but the adjust period has passed: + eta */
    ub__cc_on_ack(&cc, &m, 22200);
    assert_int_equal(ub__cc_cwnd(&cc), 16384 + 614);
    /* a NACK inside the new period: window minus the packet */
    ub__cc_on_nack(&cc, &n, 23000);
    assert_int_equal(cc.st.quick_adapt, 1);
    assert_int_equal(ub__cc_cwnd(&cc), 16384 + 614 - 4096);
}

/* Delay above 4 x target triggers quick adapt without any loss. */
static void test_nscc_quick_adapt_delay(void **state)
{
    (void)state;
    struct ub__cc cc;
    struct ub__cc_params p = ref_params();
    assert_int_equal(ub__cc_init(&cc, &ub__cc_nscc, &p), 0);
    struct ub__cc_ack a = ack_of(4096, 12000 + 20000, false);
    ub__cc_on_ack(&cc, &a, 1000);
    ub__cc_on_ack(&cc, &a, 2000);
    ub__cc_on_ack(&cc, &a, 3000);
    struct ub__cc_ack big = ack_of(4096, 12000 + 40000, false);
    ub__cc_on_ack(&cc, &big, 22001); /* 2 x 4096 after the period opened + this one */
    assert_int_equal(cc.st.quick_adapt, 1);
    assert_int_equal(ub__cc_cwnd(&cc), 3 * 4096);
}

static void test_nscc_bounds(void **state)
{
    (void)state;
    struct ub__cc cc;
    struct ub__cc_params p = ref_params();
    p.init_cwnd = 8192;
    assert_int_equal(ub__cc_init(&cc, &ub__cc_nscc, &p), 0);
    /* zero queueing: fast increase (+25% of acked bytes) up to exactly 1.5 BDP */
    for (uint64_t i = 0; i < 2000; i++) {
        struct ub__cc_ack a = ack_of(4096, 12000, false);
        ub__cc_on_ack(&cc, &a, 1000 + 100 * i);
        assert_true(ub__cc_cwnd(&cc) <= 225000);
    }
    assert_int_equal(ub__cc_cwnd(&cc), 225000);
    assert_true(cc.st.fast_inc > 0);
    /* NACKs inside one quick-adapt period: down by a packet each, floor 1 MTU */
    p.init_cwnd = 20000;
    p.no_quick_adapt = true;
    assert_int_equal(ub__cc_init(&cc, &ub__cc_nscc, &p), 0);
    struct ub__cc_nack n = {.bytes = 4096, .trimmed = true};
    for (int i = 0; i < 10; i++)
        ub__cc_on_nack(&cc, &n, 1000);
    assert_int_equal(ub__cc_cwnd(&cc), 4096);
    ub__cc_on_timeout(&cc, 4096, 2000);
    assert_int_equal(ub__cc_cwnd(&cc), 4096);
}

/* Destination flow control: penalty 64/127 of the acked bytes comes off. */
static void test_nscc_rcv_penalty(void **state)
{
    (void)state;
    struct ub__cc cc;
    struct ub__cc_params p = ref_params();
    p.init_cwnd = 40960;
    assert_int_equal(ub__cc_init(&cc, &ub__cc_nscc, &p), 0);
    struct ub__cc_ack a = ack_of(4096, 12000 + 2000, true); /* the no-op quadrant */
    a.has_nscc = true;
    a.rcv_cwnd_pend = 64;
    ub__cc_on_ack(&cc, &a, 5000);
    assert_int_equal(ub__cc_cwnd(&cc), 40960 - 4096 * 64 / 127);
    /* service time comes off the RTT sample: 14000 - 2000 = 12000, delay 0 */
    a.rcv_cwnd_pend = 0;
    a.service_ns = 2000;
    a.ecn = false;
    ub__cc_on_ack(&cc, &a, 6000);
    assert_int_equal(cc.u.nscc.base_rtt, 12000);
    /* a shorter RTT lowers the base RTT (the delay reference), not the max window */
    struct ub__cc_ack b = ack_of(4096, 8000, false);
    ub__cc_on_ack(&cc, &b, 7000);
    assert_int_equal(cc.u.nscc.base_rtt, 8000);
    assert_int_equal(cc.u.nscc.bdp, 100000);
    assert_int_equal(cc.u.nscc.maxwnd, 225000);
}

/* DCQCN: one CNP halves the rate (alpha = 1), then the 55 us timer walks the
 * stages: 5 fast-recovery steps, additive, then (with the byte counter) hyper. */
static void test_dcqcn_stages(void **state)
{
    (void)state;
    struct ub__cc cc;
    struct ub__cc_params p = ref_params();
    assert_int_equal(ub__cc_init(&cc, ub__cc_algo_find("dcqcn"), &p), 0);
    assert_int_equal(ub__cc_pacing_rate(&cc), 12500000000ULL);
    struct ub__cc_ack m = ack_of(4096, 0, true);
    ub__cc_on_ack(&cc, &m, 0);
    const struct ub__cc_dcqcn *s = &cc.u.dcqcn;
    assert_int_equal(s->rc, 50000000000ULL);
    assert_int_equal(s->rt, 100000000000ULL);
    assert_int_equal(s->alpha, 65536); /* (1 - 1/256) x 1 + 1/256 */
    assert_int_equal(ub__cc_pacing_rate(&cc), 6250000000ULL);
    /* a second mark within 50 us: no second CNP */
    ub__cc_on_ack(&cc, &m, 49999);
    assert_int_equal(cc.st.cnps, 1);
    static const uint64_t rc[7] = {75000000000ULL, 87500000000ULL, 93750000000ULL, 96875000000ULL,
                                   98437500000ULL, 99218750000ULL, 99609375000ULL};
    for (int i = 0; i < 7; i++) {
        ub__cc_on_tick(&cc, 55000 * (uint64_t)(i + 1));
        assert_int_equal(s->rc, rc[i]);
        assert_int_equal(s->t, (uint32_t)(i + 1));
    }
    /* the alpha timer decayed alpha 7 times by 1/256 */
    uint32_t al = 65536;
    for (int i = 0; i < 7; i++)
        al -= al >> 8;
    assert_int_equal(s->alpha, al);
    /* T = 6, 7 > F = 5 with BC = 0: additive (target + 40 Mbit/s, capped at the link) */
    assert_int_equal(s->rt, 100000000000ULL);
    /* second CNP at 400 us: cut by alpha / 2 */
    ub__cc_on_ack(&cc, &m, 400000);
    /* 99609375000 x al fits in 64 bits: al < 2^16 */
    uint64_t want = 99609375000ULL - 99609375000ULL / 8 * al / 16384;
    assert_int_equal(s->rc, want);
    assert_int_equal(s->rt, 99609375000ULL);
    assert_int_equal(s->t, 0);
    /* byte counter: 10 MB sent -> BC = 1, a fast-recovery step */
    uint64_t rc0 = s->rc;
    ub__cc_on_send(&cc, 10000000, 400001);
    assert_int_equal(s->bc, 1);
    assert_int_equal(s->rc, (rc0 + 99609375000ULL) / 2);
    /* hyper increase needs both counters past F */
    struct ub__cc_params q = ref_params();
    q.link_bps = 1000000000000ULL; /* a fast link so rt stays uncapped */
    assert_int_equal(ub__cc_init(&cc, &ub__cc_dcqcn, &q), 0);
    ub__cc_on_ack(&cc, &m, 0); /* rc = 500 G, rt = 1 T */
    for (int i = 0; i < 6; i++)
        ub__cc_on_send(&cc, 10000000, 1);
    assert_int_equal(s->bc, 6);
    ub__cc_on_tick(&cc, 6 * 55000); /* T 1..5 fast recovery, 6: T = 6 > F and BC = 6 > F */
    assert_int_equal(s->t, 6);
    assert_true(s->rt <= q.link_bps);
    assert_int_equal(ub__cc_next_deadline(&cc), 7 * 55000);
}

/* Hyper increase, exactly: rt += (min(T, BC) - F) x R_HAI. */
static void test_dcqcn_hyper(void **state)
{
    (void)state;
    struct ub__cc cc;
    struct ub__cc_params p = ref_params();
    p.dcqcn_rai_bps = 1000000;   /* 1 Mbit/s */
    p.dcqcn_rhai_bps = 10000000; /* 10 Mbit/s */
    assert_int_equal(ub__cc_init(&cc, &ub__cc_dcqcn, &p), 0);
    struct ub__cc_ack m = ack_of(4096, 0, true);
    ub__cc_on_ack(&cc, &m, 0);
    ub__cc_on_ack(&cc, &m, 50000); /* second CNP: rc = 50G x (1 - 1/2) = 25G, rt = 50G */
    const struct ub__cc_dcqcn *s = &cc.u.dcqcn;
    assert_int_equal(s->rc, 25000000000ULL);
    assert_int_equal(s->rt, 50000000000ULL);
    for (int i = 0; i < 7; i++)
        ub__cc_on_send(&cc, 10000000, 50000); /* BC 1..7 */
    /* BC 1..5 fast recovery; BC 6 (T = 0): additive +1M; BC 7: additive +1M */
    assert_int_equal(s->rt, 50002000000ULL);
    uint64_t rc = s->rc;
    for (int t = 1; t <= 6; t++) {
        ub__cc_on_tick(&cc, 50000 + 55000 * (uint64_t)t);
        /* T = 1..5 with BC = 7: additive; T = 6: hyper with i = 1 */
        uint64_t rt_want =
            50002000000ULL + (uint64_t)(t < 6 ? t : 5) * 1000000 + (t == 6 ? 10000000ULL : 0);
        assert_int_equal(s->rt, rt_want);
        rc = (rt_want + rc) / 2;
        assert_int_equal(s->rc, rc);
    }
}

/* RCCC's receiver without slots: accepted (no flow can ask); slots missing for a count or
 * a zero rate or quantum: UB_EINVAL. */
static void test_rccc_rx_init_args(void **state)
{
    (void)state;
    struct ub__rccc_slot slots[2];
    struct ub__rccc_rx rx;
    assert_int_equal(ub__rccc_rx_init(&rx, NULL, 0, 8000000000ULL, 1000), 0);
    assert_int_equal(ub__rccc_rx_demand(&rx, 1, 1000, 0), UB_EFULL);
    assert_int_equal(ub__rccc_rx_next_time(&rx), UB_TIME_NEVER);
    assert_int_equal(ub__rccc_rx_init(&rx, NULL, 2, 8000000000ULL, 1000), UB_EINVAL);
    assert_int_equal(ub__rccc_rx_init(&rx, slots, 2, 0, 1000), UB_EINVAL);
    assert_int_equal(ub__rccc_rx_init(&rx, slots, 2, 8000000000ULL, 0), UB_EINVAL);
    assert_int_equal(ub__rccc_rx_init(NULL, slots, 2, 8000000000ULL, 1000), UB_EINVAL);
}

/* RCCC: the receiver shares its rate equally; the sender spends credit. */
static void test_rccc_shares(void **state)
{
    (void)state;
    struct ub__rccc_slot slots[4];
    struct ub__rccc_rx rx;
    /* 8 Gbit/s = 1 byte/ns, 1000-byte grants: one grant per 1000 ns */
    assert_int_equal(ub__rccc_rx_init(&rx, slots, 4, 8000000000ULL, 1000), 0);
    assert_int_equal(ub__rccc_rx_next_time(&rx), UB_TIME_NEVER);
    for (uint64_t k = 1; k <= 3; k++)
        assert_int_equal(ub__rccc_rx_demand(&rx, k, 1000000, 0), 0);
    uint64_t got[4] = {0}, key, bytes;
    for (uint64_t t = 0; t < 30000; t += 100)
        while (ub__rccc_rx_next(&rx, t, &key, &bytes))
            got[key] += bytes;
    assert_int_equal(got[1], 10000);
    assert_int_equal(got[2], 10000);
    assert_int_equal(got[3], 10000);
    assert_int_equal(ub__rccc_rx_next_time(&rx), 30000);
    /* sender 2 leaves: 1 and 3 split the rate */
    assert_int_equal(ub__rccc_rx_demand(&rx, 2, 0, 30000), 0);
    for (uint64_t t = 30000; t < 50000; t += 100)
        while (ub__rccc_rx_next(&rx, t, &key, &bytes))
            got[key] += bytes;
    assert_int_equal(got[1], 20000);
    assert_int_equal(got[2], 10000);
    assert_int_equal(got[3], 20000);
    assert_int_equal(ub__rccc_rx_granted(&rx, 1), 20000);
    /* a full table */
    assert_int_equal(ub__rccc_rx_demand(&rx, 7, 10, 50000), 0);
    assert_int_equal(ub__rccc_rx_demand(&rx, 8, 10, 50000), 0);
    assert_int_equal(ub__rccc_rx_demand(&rx, 9, 10, 50000), UB_EFULL);

    /* sender: credit-gated, window = min(window, credit) with NSCC */
    struct ub__cc cc;
    struct ub__cc_params p = ref_params();
    p.init_credit = 8192;
    assert_int_equal(ub__cc_init(&cc, &ub__cc_rccc, &p), 0);
    assert_true(ub__cc_can_send(&cc, 0, 4096, 0));
    ub__cc_on_send(&cc, 4096, 0);
    ub__cc_on_send(&cc, 4096, 0);
    assert_false(ub__cc_can_send(&cc, 8192, 4096, 0));
    ub__cc_on_credit(&cc, 1000);
    assert_true(ub__cc_can_send(&cc, 8192, 4096, 0));
    p.rccc = true;
    p.init_cwnd = 4096;
    assert_int_equal(ub__cc_init(&cc, &ub__cc_nscc, &p), 0);
    assert_true(cc.credit_on);
    assert_false(ub__cc_can_send(&cc, 4096, 4096, 0)); /* window-limited, credit left */
}

/* C-AQM: the sender adopts a hint, increases when granted, probes gently otherwise. */
static void test_caqm(void **state)
{
    (void)state;
    struct ub__cc cc;
    struct ub__cc_params p = ref_params();
    assert_int_equal(ub__cc_init(&cc, ub__cc_algo_find("caqm"), &p), 0);
    struct ub__ext ext;
    memset(&ext, 0, sizeof ext);
    /* default start: link / 16, window 1.25 x its bytes per base RTT */
    assert_int_equal(cc.u.caqm.rate, 6250000000ULL);
    assert_int_equal(ub__cc_cwnd(&cc), 11718);
    ub__cc_caqm_tx_fields(&cc, &ext);
    assert_true(ext.aqm_increase);
    assert_int_equal(ext.aqm_hint, 625);
    /* init_cwnd sets the start: 1 BDP per base RTT = line rate, window 1.25 BDP */
    p.init_cwnd = 150000;
    assert_int_equal(ub__cc_init(&cc, ub__cc_algo_find("caqm"), &p), 0);
    assert_int_equal(cc.u.caqm.rate, 100000000000ULL);
    assert_int_equal(ub__cc_cwnd(&cc), 187500);
    ub__cc_caqm_tx_fields(&cc, &ext);
    assert_false(ext.aqm_increase); /* at line rate: nothing to ask */
    assert_int_equal(ext.aqm_hint, 10000);

    /* switch: queue 2 x kmax halves the sender's rate in the hint */
    struct ub__caqm_port port;
    ub__caqm_port_init(&port, p.link_bps, p.base_rtt_ns);
    assert_int_equal(port.kmin, 30000);
    assert_int_equal(port.kmax, 120000);
    assert_false(ub__caqm_switch_mark(&port, 30000, p.link_bps, &ext));
    assert_true(ub__caqm_switch_mark(&port, 240000, p.link_bps, &ext));
    assert_true(ext.aqm_congestion);
    assert_int_equal(ext.aqm_hint, 5000); /* 50 Gbit/s */
    /* a later congested switch scales the rate it receives (never raises it) */
    ub__caqm_switch_mark(&port, 130000, p.link_bps, &ext);
    assert_int_equal(ext.aqm_hint, 4615); /* 50 G x 120000 / 130000, in 10 Mbit/s units */

    struct ub__cc_ack a = ack_of(4096, 0, false);
    a.caqm_c = true;
    a.caqm_hint = ub__caqm_hint_decode(ext.aqm_hint);
    ub__cc_on_ack(&cc, &a, 1000);
    assert_int_equal(cc.u.caqm.rate, 46150000000ULL);
    assert_int_equal(ub__cc_pacing_rate(&cc), 5768750000ULL);
    ub__cc_caqm_tx_fields(&cc, &ext);
    assert_true(ext.aqm_increase);
    /* granted within the hold time: nothing; after one base RTT: + link / 16 */
    struct ub__cc_ack g = ack_of(4096, 0, false);
    g.caqm_i = true;
    ub__cc_on_ack(&cc, &g, 5000);
    assert_int_equal(cc.u.caqm.rate, 46150000000ULL);
    ub__cc_on_ack(&cc, &g, 13000);
    assert_int_equal(cc.u.caqm.rate, 52400000000ULL);
    ub__cc_on_ack(&cc, &g, 20000); /* once per base RTT */
    assert_int_equal(cc.u.caqm.rate, 52400000000ULL);
    /* refused (no I echo, no C): gentle probe, link / 1024 */
    struct ub__cc_ack r = ack_of(4096, 0, false);
    ub__cc_on_ack(&cc, &r, 25000);
    assert_int_equal(cc.u.caqm.rate, 52400000000ULL + 97656250ULL);
    /* the middle band: I cleared, no C */
    memset(&ext, 0, sizeof ext);
    ext.aqm_increase = true;
    assert_true(ub__caqm_switch_mark(&port, 60000, p.link_bps, &ext));
    assert_false(ext.aqm_increase);
    assert_false(ext.aqm_congestion);
    assert_int_equal(ub__caqm_hint_encode(1), 1);
    assert_int_equal(ub__caqm_hint_encode(1000000000000ULL), 0xffff);
}

/* Pacer: exact spacing at the rate, bursts only up to the allowance. */
static void test_pacer(void **state)
{
    (void)state;
    struct ub__pacer pc;
    ub__pacer_init(&pc, 1000000000ULL, 1000, 0); /* 1 byte/ns, 1-packet burst */
    uint64_t t = 5000;
    for (int i = 0; i < 10; i++) {
        uint64_t when = ub__pacer_next_send_time(&pc, 1000, t);
        assert_int_equal(when, 5000 + 1000 * (uint64_t)i);
        ub__pacer_on_send(&pc, 1000, when);
        t = when; /* ask again right away */
    }
    /* a rate with a remainder: 3 bytes/ns, 1000-byte packets every 333.33 ns */
    ub__pacer_init(&pc, 3000000000ULL, 1000, 0);
    t = 0;
    for (int i = 0; i < 3000; i++) {
        uint64_t when = ub__pacer_next_send_time(&pc, 1000, t);
        assert_int_equal(when, (uint64_t)i * 1000 / 3);
        ub__pacer_on_send(&pc, 1000, when);
        t = when;
    }
    /* burst allowance 4000 bytes: after idle, 4 packets at once, then paced */
    ub__pacer_init(&pc, 1000000000ULL, 4000, 0);
    uint64_t times[8];
    t = 100000;
    for (int i = 0; i < 8; i++) {
        times[i] = ub__pacer_next_send_time(&pc, 1000, t);
        ub__pacer_on_send(&pc, 1000, times[i]);
        t = times[i];
    }
    static const uint64_t want[8] = {100000, 100000, 100000, 100000,
                                     101000, 102000, 103000, 104000};
    for (int i = 0; i < 8; i++)
        assert_int_equal(times[i], want[i]);
    /* ... or 10 us at the rate, which is more: 10 packets at once, then paced */
    ub__pacer_init(&pc, 1000000000ULL, 4000, 10000);
    t = 100000;
    for (int i = 0; i < 12; i++) {
        uint64_t when = ub__pacer_next_send_time(&pc, 1000, t);
        assert_int_equal(when, i < 10 ? 100000 : 100000 + 1000 * (uint64_t)(i - 9));
        ub__pacer_on_send(&pc, 1000, when);
        t = when;
    }
    /* unpaced */
    ub__pacer_init(&pc, 0, 0, 0);
    assert_int_equal(ub__pacer_next_send_time(&pc, 9000, 77), 77);
    /* through the cc: DCQCN at line rate paces 4096-byte packets 327.68 ns apart */
    struct ub__cc cc;
    struct ub__cc_params p = ref_params();
    assert_int_equal(ub__cc_init(&cc, &ub__cc_dcqcn, &p), 0);
    ub__cc_on_send(&cc, 4096, 0);
    assert_int_equal(ub__cc_next_send_time(&cc, 4096, 0), 327);
    assert_false(ub__cc_can_send(&cc, 0, 4096, 326));
    assert_true(ub__cc_can_send(&cc, 0, 4096, 327));
}

/* ---- closed loop: N NSCC senders through one trimming, ECN-marking queue ---- */
#define FL_N    4
#define FL_PKT  4096u
#define FL_QCAP 8192u
#define FL_RTT  12000u

struct fl_pkt {
    uint8_t src;
    bool mark, trim;
    uint64_t sent;
};

struct fl_model {
    struct ub__cc cc[FL_N];
    uint64_t inflight[FL_N], delivered[FL_N], start[FL_N];
    struct fl_pkt q[FL_QCAP]; /* the bottleneck FIFO */
    uint32_t qh, qn;
    uint64_t qbytes;
    struct fl_pkt back[FL_QCAP]; /* ACK/NACK path, constant delay: FIFO */
    uint64_t back_at[FL_QCAP];
    uint32_t bh, bn;
};

static void fl_push_back(struct fl_model *m, struct fl_pkt pk, uint64_t at)
{
    assert_true(m->bn < FL_QCAP);
    uint32_t i = (m->bh + m->bn++) % FL_QCAP;
    m->back[i] = pk;
    m->back_at[i] = at;
}

static double fl_run(uint64_t end, uint64_t measure_from, uint64_t out[FL_N])
{
    static struct fl_model m;
    memset(&m, 0, sizeof m);
    struct ub__cc_params p = ref_params();
    const uint64_t bdp = 150000, kmin = bdp / 5, kmax = bdp * 4 / 5, qmax = bdp;
    for (int i = 0; i < FL_N; i++) {
        assert_int_equal(ub__cc_init(&m.cc[i], &ub__cc_nscc, &p), 0);
        m.start[i] = (uint64_t)i * 500000; /* staggered arrivals, 0.5 ms apart */
    }
    uint64_t credit = 0; /* bottleneck byte budget: 25 bytes per 2 ns */
    uint64_t mark_ctr = 0;
    for (uint64_t t = 0; t < end; t += 2) {
        /* the bottleneck dequeues 25 bytes per 2 ns (100 Gbit/s) */
        credit += 25;
        while (m.qn && credit >= FL_PKT) {
            struct fl_pkt pk = m.q[m.qh];
            m.qh = (m.qh + 1) % FL_QCAP;
            m.qn--;
            m.qbytes -= FL_PKT;
            credit -= FL_PKT;
            /* ECN at dequeue, linear between kmin and kmax (deterministic counter) */
            if (m.qbytes > kmin) {
                uint64_t pct = m.qbytes >= kmax ? 100 : (m.qbytes - kmin) * 100 / (kmax - kmin);
                mark_ctr += pct;
                if (mark_ctr >= 100) {
                    mark_ctr -= 100;
                    pk.mark = true;
                }
            }
            fl_push_back(&m, pk, t + FL_RTT);
        }
        if (!m.qn && credit > FL_PKT)
            credit = FL_PKT;
        /* feedback */
        while (m.bn && m.back_at[m.bh] <= t) {
            struct fl_pkt pk = m.back[m.bh];
            m.bh = (m.bh + 1) % FL_QCAP;
            m.bn--;
            int s = pk.src;
            m.inflight[s] -= FL_PKT;
            if (pk.trim) {
                struct ub__cc_nack n = {
                    .bytes = FL_PKT, .inflight = m.inflight[s], .trimmed = true};
                ub__cc_on_nack(&m.cc[s], &n, t);
            } else {
                struct ub__cc_ack a = ack_of(FL_PKT, t - pk.sent, pk.mark);
                a.inflight = m.inflight[s];
                ub__cc_on_ack(&m.cc[s], &a, t);
                if (t >= measure_from)
                    m.delivered[s] += FL_PKT;
            }
        }
        /* senders (one packet per sender per step at most: a 2 ns NIC slot) */
        for (int s = 0; s < FL_N; s++) {
            if (t < m.start[s] || !ub__cc_can_send(&m.cc[s], m.inflight[s], FL_PKT, t))
                continue;
            ub__cc_on_send(&m.cc[s], FL_PKT, t);
            m.inflight[s] += FL_PKT;
            struct fl_pkt pk = {.src = (uint8_t)s, .sent = t};
            if (m.qbytes + FL_PKT > qmax) {
                pk.trim = true; /* trimmed: the header comes back at once */
                fl_push_back(&m, pk, t + FL_RTT);
                continue;
            }
            assert_true(m.qn < FL_QCAP);
            m.q[(m.qh + m.qn++) % FL_QCAP] = pk;
            m.qbytes += FL_PKT;
        }
    }
    double sum = 0, sq = 0;
    for (int s = 0; s < FL_N; s++) {
        out[s] = m.delivered[s];
        sum += (double)m.delivered[s];
        sq += (double)m.delivered[s] * (double)m.delivered[s];
    }
    return sum * sum / (FL_N * sq);
}

static void test_nscc_fairness_closed_loop(void **state)
{
    (void)state;
    uint64_t got[FL_N];
    /* all four active from 1.5 ms; measure 4..8 ms */
    double jain = fl_run(8000000, 4000000, got);
    uint64_t total = 0;
    for (int s = 0; s < FL_N; s++)
        total += got[s];
    print_message("NSCC closed loop: Jain %.4f, per sender %llu %llu %llu %llu, utilisation %.3f\n",
                  jain, (unsigned long long)got[0], (unsigned long long)got[1],
                  (unsigned long long)got[2], (unsigned long long)got[3],
                  (double)total / (4000000.0 * 12.5));
    assert_true(jain >= 0.95);
    assert_true((double)total >= 0.8 * 4000000.0 * 12.5); /* the link stays busy */
    /* deterministic: same run, same bytes */
    uint64_t again[FL_N];
    fl_run(8000000, 4000000, again);
    assert_memory_equal(got, again, sizeof got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry),
        cmocka_unit_test(test_none_fixed),
        cmocka_unit_test(test_nscc_params),
        cmocka_unit_test(test_nscc_proportional),
        cmocka_unit_test(test_nscc_fair),
        cmocka_unit_test(test_nscc_md_once_per_rtt),
        cmocka_unit_test(test_nscc_ecn_low_delay_noop),
        cmocka_unit_test(test_nscc_quick_adapt_trim),
        cmocka_unit_test(test_nscc_quick_adapt_delay),
        cmocka_unit_test(test_nscc_bounds),
        cmocka_unit_test(test_nscc_rcv_penalty),
        cmocka_unit_test(test_dcqcn_stages),
        cmocka_unit_test(test_dcqcn_hyper),
        cmocka_unit_test(test_rccc_rx_init_args),
        cmocka_unit_test(test_rccc_shares),
        cmocka_unit_test(test_caqm),
        cmocka_unit_test(test_pacer),
        cmocka_unit_test(test_nscc_fairness_closed_loop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
