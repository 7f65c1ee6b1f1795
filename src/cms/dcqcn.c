/*
 * DCQCN (Zhu et al., SIGCOMM 2015), the reaction point, in integer
 * arithmetic: alpha in Q16, rates in bits/s. The notification point (one CNP
 * per flow per 50 us) is emulated from the per-packet ECN echo of the ACKs.
 * Timers are evaluated lazily from the events (and from ub__cc_on_tick at
 * ub__cc_next_deadline), period by period, so the result does not depend on
 * when the owner happens to call.
 */
#include "cms/cc.h"

#include "cms/cms_int.h"
#include "core/clock.h"

#define DCQCN_ONE         65536u            /* alpha = 1 */
#define DCQCN_G_SHIFT     8                 /* g = 1/256 */
#define DCQCN_PERIOD_NS   55000ULL          /* rate-increase and alpha timers */
#define DCQCN_CNP_NS      50000ULL          /* NP: at most one CNP per 50 us */
#define DCQCN_BYTES       (10ULL * 1000000) /* byte counter B = 10 MB */
#define DCQCN_F           5u                /* fast-recovery steps */
#define DCQCN_MAX_CATCHUP 1024u

static void set_rate(struct ub__cc *cc)
{
    cc->rate = ub__bps_to_Bps(cc->u.dcqcn.rc);
}

static void dcqcn_init(struct ub__cc *cc)
{
    struct ub__cc_dcqcn *s = &cc->u.dcqcn;
    s->rc = s->rt = cc->p.link_bps;
    s->rai = cc->p.dcqcn_rai_bps;
    s->rhai = cc->p.dcqcn_rhai_bps;
    s->min_rate = ub__min64(cc->p.min_rate_bps, cc->p.link_bps);
    s->alpha = DCQCN_ONE;
    s->t_timer = s->t_alpha = UB_TIME_NEVER; /* started by the first event */
    cc->cwnd = cc->p.init_cwnd ? cc->p.init_cwnd : UINT64_MAX;
    set_rate(cc);
}

static void increase(struct ub__cc *cc)
{
    struct ub__cc_dcqcn *s = &cc->u.dcqcn;
    uint64_t link = cc->p.link_bps;
    if (s->rc >= link)
        return;
    uint32_t hi = s->t > s->bc ? s->t : s->bc;
    uint32_t lo = s->t < s->bc ? s->t : s->bc;
    if (hi <= DCQCN_F) {
        /* fast recovery: halfway back to the target */
    } else if (lo > DCQCN_F) {
        s->rt = ub__sat_add(s->rt, ub__muldiv(lo - DCQCN_F, s->rhai, 1)); /* hyper */
    } else {
        s->rt = ub__sat_add(s->rt, s->rai); /* additive */
    }
    s->rt = ub__min64(s->rt, link);
    s->rc = (s->rt + s->rc) / 2;
    s->rc = ub__min64(s->rc, link);
}

static void start(struct ub__cc_dcqcn *s, uint64_t now)
{
    if (s->t_timer == UB_TIME_NEVER)
        s->t_timer = s->t_alpha = now;
}

static void dcqcn_tick(struct ub__cc *cc, uint64_t now)
{
    struct ub__cc_dcqcn *s = &cc->u.dcqcn;
    start(s, now);
    uint32_t n = 0;
    while (now - s->t_timer >= DCQCN_PERIOD_NS) {
        if (++n > DCQCN_MAX_CATCHUP) { /* idle for ages: the rest changes nothing more */
            s->t_timer = now - (now - s->t_timer) % DCQCN_PERIOD_NS;
            break;
        }
        s->t_timer += DCQCN_PERIOD_NS;
        if (s->t < UINT32_MAX)
            s->t++;
        increase(cc);
    }
    n = 0;
    while (now - s->t_alpha >= DCQCN_PERIOD_NS) {
        if (++n > DCQCN_MAX_CATCHUP) {
            s->t_alpha = now - (now - s->t_alpha) % DCQCN_PERIOD_NS;
            break;
        }
        s->t_alpha += DCQCN_PERIOD_NS;
        s->alpha -= s->alpha >> DCQCN_G_SHIFT;
    }
    set_rate(cc);
}

static void cnp(struct ub__cc *cc, uint64_t now)
{
    struct ub__cc_dcqcn *s = &cc->u.dcqcn;
    s->rt = s->rc;
    s->rc -= ub__muldiv(s->rc, s->alpha, 2 * DCQCN_ONE);
    s->rc = ub__max64(s->rc, s->min_rate);
    s->alpha = s->alpha - (s->alpha >> DCQCN_G_SHIFT) + (DCQCN_ONE >> DCQCN_G_SHIFT);
    s->t = s->bc = 0;
    s->byte_counter = 0;
    s->t_timer = s->t_alpha = now;
    s->last_cnp = now;
    s->cnp_seen = true;
    cc->st.cnps++;
    set_rate(cc);
}

static void dcqcn_on_send(struct ub__cc *cc, uint64_t bytes, uint64_t now)
{
    struct ub__cc_dcqcn *s = &cc->u.dcqcn;
    dcqcn_tick(cc, now);
    s->byte_counter += bytes;
    while (s->byte_counter >= DCQCN_BYTES) {
        s->byte_counter -= DCQCN_BYTES;
        if (s->bc < UINT32_MAX)
            s->bc++;
        increase(cc);
    }
    set_rate(cc);
}

static void dcqcn_on_ack(struct ub__cc *cc, const struct ub__cc_ack *ack, uint64_t now)
{
    struct ub__cc_dcqcn *s = &cc->u.dcqcn;
    dcqcn_tick(cc, now);
    if (ack->ecn && (!s->cnp_seen || now - s->last_cnp >= DCQCN_CNP_NS))
        cnp(cc, now);
}

static void dcqcn_on_nack(struct ub__cc *cc, const struct ub__cc_nack *nack, uint64_t now)
{
    struct ub__cc_dcqcn *s = &cc->u.dcqcn;
    dcqcn_tick(cc, now);
    /* A trimmed packet met a full queue: as strong a signal as a mark. */
    if (nack->trimmed && (!s->cnp_seen || now - s->last_cnp >= DCQCN_CNP_NS))
        cnp(cc, now);
}

static uint64_t dcqcn_next_deadline(const struct ub__cc *cc)
{
    const struct ub__cc_dcqcn *s = &cc->u.dcqcn;
    if (s->t_timer == UB_TIME_NEVER)
        return UB_TIME_NEVER;
    if (s->rc >= cc->p.link_bps && s->alpha == 0)
        return UB_TIME_NEVER;
    return ub__min64(s->t_timer, s->t_alpha) + DCQCN_PERIOD_NS;
}

const struct ub__cc_algo ub__cc_dcqcn = {
    .name = "dcqcn",
    .init = dcqcn_init,
    .on_send = dcqcn_on_send,
    .on_ack = dcqcn_on_ack,
    .on_nack = dcqcn_on_nack,
    .next_deadline = dcqcn_next_deadline,
    .on_tick = dcqcn_tick,
};
