/*
 * NSCC: the UET network-signal congestion control (ECN x delay, four
 * quadrants), in integer arithmetic. The rules and every constant follow the
 * UEC's htsim model (uet-htsim, htsim/sim/uec.cpp: initNsccParams,
 * updateCwndOnAck_NSCC, quick_adapt, fulfill_adjustment, update_delay);
 * docs/algorithms.md gives the mapping and the few places softub differs.
 */
#include "cms/cc.h"

#include "cms/cms_int.h"

/* Reference network the constants are written for: 100 Gbit/s, 12 us. */
#define REF_RTT_NS  12000ULL
#define REF_BDP     150000ULL /* bytes: 100e9 / 8 * 12e-6 */
#define FAST_INC_NS 1000ULL   /* fast increase below 1 us of queueing */
#define EWMA_DIV    80        /* delay EWMA gain 0.0125 = 1/80 */
#define GAMMA_NUM   4         /* MD: cwnd *= max(1 - 0.8 (d - t) / d, 0.5) */
#define GAMMA_DEN   5

/*
 * The pair's base RTT (the delay reference) and BDP. The max window is fixed at init from the
 * configured RTT (the network's, or the pair's seed): a lower sample moves the delay reference
 * only. htsim shrinks the max window with it; on hosts the minimum sample is one taken while
 * both ends happened to be idle (a few us over loopback), while at full rate their batching
 * (GSO/GRO runs, receive batches, coalesced ACKs) keeps far more than that BDP in flight, and a
 * window of a handful of packets caps the flow at a fraction of what the hosts can move.
 */
static void nscc_set_base(struct ub__cc *cc, uint64_t base_rtt)
{
    struct ub__cc_nscc *s = &cc->u.nscc;
    s->base_rtt = base_rtt;
    s->bdp = ub__bdp(cc->p.link_bps, base_rtt);
}

static void nscc_bounds(struct ub__cc *cc)
{
    struct ub__cc_nscc *s = &cc->u.nscc;
    if (cc->cwnd < s->minwnd)
        cc->cwnd = s->minwnd;
    if (cc->cwnd > s->maxwnd)
        cc->cwnd = s->maxwnd;
}

static void nscc_init(struct ub__cc *cc)
{
    struct ub__cc_nscc *s = &cc->u.nscc;
    const struct ub__cc_params *p = &cc->p;
    s->minwnd = p->mtu;
    s->net_rtt = p->base_rtt_ns;
    s->net_bdp = ub__bdp(p->link_bps, p->base_rtt_ns);
    /* htsim initNscc(peer_rtt): the network's RTT, or the pair's when configured; samples
     * below it lower it (update_base_rtt) */
    nscc_set_base(cc, p->peer_base_rtt_ns ? p->peer_base_rtt_ns : p->base_rtt_ns);
    s->maxwnd = ub__max64(s->bdp * 3 / 2, s->minwnd);
    if (p->target_qdelay_ns)
        s->target = p->target_qdelay_ns;
    else
        s->target = p->trimming ? p->base_rtt_ns * 3 / 4 : p->base_rtt_ns;
    s->qa_threshold = 4 * s->target;
    s->qa_gate = p->qa_gate < 0 ? 3 : (uint8_t)p->qa_gate;
    s->no_qa = p->no_quick_adapt;
    /* scaling_factor_a = net_bdp / REF_BDP */
    s->fi = ub__muldiv(5ULL * p->mss, s->net_bdp, REF_BDP);
    s->eta = ub__muldiv(15ULL * p->mss, s->net_bdp, 100 * REF_BDP);
    s->adjust_bytes = 8ULL * p->mtu;
    s->adjust_period = s->net_rtt;
    cc->cwnd = p->init_cwnd ? p->init_cwnd : s->maxwnd;
    nscc_bounds(cc);
}

static uint64_t avg_delay(const struct ub__cc_nscc *s)
{
    return s->avg_delay_q8 >> 8;
}

static void ewma(struct ub__cc_nscc *s, uint64_t sample)
{
    int64_t x = (int64_t)(sample << 8);
    int64_t a = (int64_t)s->avg_delay_q8;
    a += (x - a) / EWMA_DIV;
    s->avg_delay_q8 = a < 0 ? 0 : (uint64_t)a;
}

/* raw_rtt >= base_rtt */
static void update_delay(struct ub__cc_nscc *s, uint64_t raw_rtt, bool ecn)
{
    uint64_t delay = raw_rtt - s->base_rtt;
    if (!ecn && delay > s->target)
        ewma(s, s->base_rtt / 4); /* delay without marks: not our bottleneck */
    else
        ewma(s, delay);
}

/* true: quick adapt ran or the ACK is ignored; skip the rest of the update. */
static bool quick_adapt(struct ub__cc *cc, bool is_loss, bool ecn, uint64_t delay,
                        uint64_t inflight, uint64_t now)
{
    struct ub__cc_nscc *s = &cc->u.nscc;
    bool done = false;
    if (s->no_qa)
        return false;
    if (s->bytes_ignored < s->bytes_to_ignore && ecn) {
        done = true;
    } else if (now > s->qa_end) {
        if (s->qa_end != 0 && (s->trigger_qa || is_loss || delay > s->qa_threshold) &&
            s->achieved < (s->maxwnd >> s->qa_gate)) {
            cc->cwnd = ub__max64(s->achieved, s->minwnd);
            s->bytes_to_ignore = inflight;
            s->bytes_ignored = 0;
            s->trigger_qa = false;
            cc->st.quick_adapt++;
            done = true;
        }
        s->achieved = 0;
        s->qa_end = now + s->base_rtt + s->target;
    }
    if (done) {
        s->inc = 0;
        s->received = 0;
    }
    return done;
}

static void multiplicative_decrease(struct ub__cc *cc, uint64_t now)
{
    struct ub__cc_nscc *s = &cc->u.nscc;
    s->fast_inc = false;
    s->fi_count = 0;
    uint64_t avg = avg_delay(s);
    if (avg <= s->target || now - s->last_dec <= s->base_rtt)
        return;
    /* factor = max(1 - gamma (avg - target) / avg, 1/2), gamma = 4/5 */
    uint64_t num = GAMMA_DEN * avg - GAMMA_NUM * (avg - s->target);
    uint64_t den = GAMMA_DEN * avg;
    uint64_t w = 2 * num < den ? cc->cwnd / 2 : ub__muldiv(cc->cwnd, num, den);
    cc->cwnd = ub__max64(w, s->minwnd);
    s->last_dec = now;
    cc->st.md++;
}

static void proportional_increase(struct ub__cc *cc, uint64_t acked, uint64_t delay)
{
    struct ub__cc_nscc *s = &cc->u.nscc;
    /* fast increase: the path is (nearly) empty for a whole window */
    if (delay < FAST_INC_NS) {
        s->fi_count += acked;
        if (s->fi_count > cc->cwnd || s->fast_inc) {
            cc->cwnd += ub__muldiv(acked, s->net_bdp, 4 * REF_BDP); /* 0.25 x scaling_a */
            s->fast_inc = true;
            cc->st.fast_inc++;
            return;
        }
    } else {
        s->fi_count = 0;
    }
    s->fast_inc = false;
    /* alpha x acked x (target - delay), alpha = 4 mss a b / target, b = target / 12 us */
    s->inc = ub__sat_add(s->inc, ub__muldiv3(4ULL * cc->p.mss * acked, s->target - delay,
                                             s->net_bdp, REF_BDP * REF_RTT_NS));
}

static void fulfil(struct ub__cc *cc, uint64_t now)
{
    struct ub__cc_nscc *s = &cc->u.nscc;
    cc->cwnd += s->inc / cc->cwnd;
    if (now - s->last_adjust >= s->adjust_period) {
        cc->cwnd += s->eta;
        s->last_adjust = now;
    }
    s->inc = 0;
    s->received = 0;
    cc->st.fulfil++;
}

static void nscc_on_ack(struct ub__cc *cc, const struct ub__cc_ack *ack, uint64_t now)
{
    struct ub__cc_nscc *s = &cc->u.nscc;
    uint64_t acked = ack->acked_bytes;

    s->achieved += acked;
    s->received += acked;
    s->bytes_ignored += acked;

    /* Destination flow control: the receiver asks for a smaller window. */
    if (ack->has_nscc && ack->rcv_cwnd_pend) {
        uint64_t dec = acked * ub__min64(ack->rcv_cwnd_pend, 127) / 127;
        cc->cwnd = ub__max64(ub__sat_sub(cc->cwnd, dec), cc->p.mtu);
    }

    uint64_t delay;
    uint64_t rtt = ack->rtt_ns;
    if (rtt && ack->has_nscc && ack->service_ns && ack->service_ns < rtt)
        rtt -= ack->service_ns;
    if (rtt) {
        if (rtt < s->base_rtt)
            nscc_set_base(cc, rtt);
        update_delay(s, rtt, ack->ecn);
        delay = rtt - s->base_rtt;
    } else {
        delay = avg_delay(s);
    }

    if (quick_adapt(cc, false, ack->ecn, delay, ack->inflight, now))
        return;

    if (!ack->ecn && delay >= s->target)
        s->inc = ub__sat_add(s->inc, ub__muldiv(s->fi, acked, 1)); /* fair increase */
    else if (!ack->ecn)
        proportional_increase(cc, acked, delay);
    else if (delay >= s->target)
        multiplicative_decrease(cc, now);
    /* ECN with a short queue: no change (the load balancer moves away) */

    nscc_bounds(cc);
    if (s->received > s->adjust_bytes || now - s->last_adjust > s->adjust_period)
        fulfil(cc, now);
    nscc_bounds(cc);
}

static void nscc_on_nack(struct ub__cc *cc, const struct ub__cc_nack *nack, uint64_t now)
{
    struct ub__cc_nscc *s = &cc->u.nscc;
    s->bytes_ignored += nack->bytes;
    /* A trim says the queue reached the trimming threshold: about one network RTT. */
    update_delay(s, s->base_rtt + s->net_rtt, true);
    s->trigger_qa = true;
    if (quick_adapt(cc, true, true, 0, nack->inflight, now))
        return;
    if (!(cc->credit_on && nack->last_hop)) {
        cc->cwnd = ub__sat_sub(cc->cwnd, nack->bytes);
        nscc_bounds(cc);
    }
}

static void nscc_on_timeout(struct ub__cc *cc, uint64_t bytes, uint64_t now)
{
    (void)now;
    cc->cwnd = ub__max64(ub__sat_sub(cc->cwnd, bytes), cc->p.mtu);
}

const struct ub__cc_algo ub__cc_nscc = {
    .name = "nscc",
    .init = nscc_init,
    .on_ack = nscc_on_ack,
    .on_nack = nscc_on_nack,
    .on_timeout = nscc_on_timeout,
};
