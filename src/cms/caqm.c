/*
 * C-AQM sender: rate-based, driven by the switch's congestion bit and hint
 * (UB's C-AQM: the sender asks with the I bit, the switch answers with C and
 * a suggested rate). The public UB material names the fields but not the
 * sender's rules; these are softub's (docs/algorithms.md).
 */
#include "cms/cc.h"

#include "cms/cms_int.h"
#include "wire/ext.h"

#define CAQM_GRANT_DIV 16   /* granted increase: link / 16 per base RTT */
#define CAQM_PROBE_DIV 1024 /* otherwise gentle probing: link / 1024 per base RTT */
#define CAQM_INIT_DIV  16   /* start at link / 16 until the switches grant more */
#define CAQM_WND_NUM   5    /* window = 5/4 x the rate's bytes per base RTT ... */
#define CAQM_WND_DEN   4
#define CAQM_WND_MIN   2 /* ... and at least 2 packets */

/*
 * The pacing rate and the window that goes with it: 1.5 x what the rate sends in one base RTT
 * (at line rate: the 1.5 BDP every algorithm here caps at). Tying the window to the rate keeps
 * a rate that is too high for the moment (a hint still on its way) from piling more than half
 * a rate-BDP per sender into the queues.
 */
static void set_rate(struct ub__cc *cc)
{
    cc->rate = ub__bps_to_Bps(cc->u.caqm.rate);
    uint64_t w = ub__bdp(cc->u.caqm.rate, cc->p.base_rtt_ns) * CAQM_WND_NUM / CAQM_WND_DEN;
    cc->cwnd = ub__max64(w, (uint64_t)cc->p.mtu * CAQM_WND_MIN);
}

/*
 * Start-up: switch-guided increase is C-AQM's premise, so a sender that has heard nothing yet
 * opens at link / 16 (init_cwnd, if given, sets the start instead: that many bytes per base
 * RTT). 16 synchronised newcomers then add up to the line rate, and a free path is at line rate
 * after 15 granted increases (base RTTs).
 */
static void caqm_init(struct ub__cc *cc)
{
    struct ub__cc_caqm *s = &cc->u.caqm;
    uint64_t link = cc->p.link_bps;
    s->min_rate = ub__min64(cc->p.min_rate_bps, link);
    s->rate = link / CAQM_INIT_DIV;
    if (cc->p.init_cwnd)
        s->rate = ub__muldiv(cc->p.init_cwnd, 8 * UB_NS_PER_S, cc->p.base_rtt_ns);
    s->rate = ub__max64(ub__min64(s->rate, link), s->min_rate);
    s->ramp = true;
    set_rate(cc);
}

static void cut(struct ub__cc *cc, uint64_t num, uint64_t den, uint64_t now)
{
    struct ub__cc_caqm *s = &cc->u.caqm;
    s->ramp = false;
    if (s->last_change && now - s->last_change < cc->p.base_rtt_ns)
        return;
    s->rate = ub__max64(ub__muldiv(s->rate, num, den), s->min_rate);
    s->last_change = now;
    s->hold_until = now + cc->p.base_rtt_ns;
}

static void caqm_on_ack(struct ub__cc *cc, const struct ub__cc_ack *ack, uint64_t now)
{
    struct ub__cc_caqm *s = &cc->u.caqm;
    uint64_t link = cc->p.link_bps;
    if (ack->caqm_c || !ack->caqm_i)
        s->ramp = false; /* the first queue the switches report ends the start-up doubling */
    if (ack->caqm_c) {
        if (ack->caqm_hint) {
            uint64_t r = ub__max64(ub__min64(ack->caqm_hint, link), s->min_rate);
            if (r < s->rate || now >= s->hold_until) {
                s->rate = r;
                s->last_change = now;
                s->hold_until = now + cc->p.base_rtt_ns;
                cc->st.hints++;
            }
        } else {
            cut(cc, 7, 8, now);
        }
    } else if (s->rate < link && now >= s->hold_until &&
               (s->last_change == 0 || now - s->last_change >= cc->p.base_rtt_ns)) {
        uint64_t step = !ack->caqm_i ? link / CAQM_PROBE_DIV
                        : s->ramp    ? s->rate /* start-up: double while every hop grants */
                                     : link / CAQM_GRANT_DIV;
        s->rate = ub__min64(s->rate + ub__max64(step, 1), link);
        s->last_change = now;
    }
    set_rate(cc);
}

static void caqm_on_nack(struct ub__cc *cc, const struct ub__cc_nack *nack, uint64_t now)
{
    (void)nack;
    cut(cc, 1, 2, now);
    set_rate(cc);
}

static void caqm_on_timeout(struct ub__cc *cc, uint64_t bytes, uint64_t now)
{
    (void)bytes;
    cut(cc, 1, 2, now);
    set_rate(cc);
}

const struct ub__cc_algo ub__cc_caqm = {
    .name = "caqm",
    .init = caqm_init,
    .on_ack = caqm_on_ack,
    .on_nack = caqm_on_nack,
    .on_timeout = caqm_on_timeout,
};

void ub__cc_caqm_tx_fields(const struct ub__cc *cc, struct ub__ext *ext)
{
    if (cc->algo != &ub__cc_caqm) {
        ext->aqm_increase = false;
        ext->aqm_hint = 0;
        return;
    }
    ext->aqm_increase = cc->u.caqm.rate < cc->p.link_bps;
    ext->aqm_hint = ub__caqm_hint_encode(cc->u.caqm.rate);
}
