/* Congestion-control core: the registry, event dispatch, the pacer, the
 * "none" and "rccc" algorithms, the RCCC receiver and the C-AQM helpers. */
#include "cms/cc.h"

#include <string.h>

#include "cms/cms_int.h"
#include "core/clock.h"
#include "softub/errors.h"
#include "wire/ext.h"

/* ---- pacer ---------------------------------------------------------------- */
void ub__pacer_init(struct ub__pacer *p, uint64_t rate, uint64_t burst, uint64_t burst_ns)
{
    p->rate = rate;
    p->burst = burst;
    p->burst_ns = burst_ns;
    p->tat = 0;
    p->frac = 0;
}

void ub__pacer_set_rate(struct ub__pacer *p, uint64_t rate, uint64_t now)
{
    if (p->tat < now) {
        p->tat = now;
        p->frac = 0;
    }
    if (rate != p->rate)
        p->frac = 0; /* the remainder was in units of the old rate */
    p->rate = rate;
}

uint64_t ub__pacer_next_send_time(const struct ub__pacer *p, uint64_t bytes, uint64_t now)
{
    if (p->rate == 0)
        return now;
    uint64_t cost = ub__sat_add(ub__muldiv(bytes, UB_NS_PER_S, 1), p->frac) / p->rate;
    uint64_t tau = ub__max64(ub__muldiv(p->burst, UB_NS_PER_S, p->rate), p->burst_ns);
    uint64_t allowance = ub__max64(tau, cost);
    uint64_t t = ub__sat_sub(ub__sat_add(p->tat, cost), allowance);
    return ub__max64(t, now);
}

void ub__pacer_on_send(struct ub__pacer *p, uint64_t bytes, uint64_t now)
{
    if (p->rate == 0)
        return;
    if (p->tat < now) {
        p->tat = now;
        p->frac = 0;
    }
    uint64_t num = ub__sat_add(ub__muldiv(bytes, UB_NS_PER_S, 1), p->frac);
    p->tat = ub__sat_add(p->tat, num / p->rate);
    p->frac = num % p->rate;
}

/* ---- registry ------------------------------------------------------------- */
static const struct ub__cc_algo *const cc_algos[] = {
    &ub__cc_none, &ub__cc_nscc, &ub__cc_rccc, &ub__cc_dcqcn, &ub__cc_caqm,
};

const struct ub__cc_algo *ub__cc_algo_find(const char *name)
{
    if (name == NULL)
        return NULL;
    for (size_t i = 0; i < sizeof cc_algos / sizeof cc_algos[0]; i++)
        if (strcmp(cc_algos[i]->name, name) == 0)
            return cc_algos[i];
    return NULL;
}

const struct ub__cc_algo *ub__cc_algo_at(size_t i)
{
    return i < sizeof cc_algos / sizeof cc_algos[0] ? cc_algos[i] : NULL;
}

/* ---- dispatch ------------------------------------------------------------- */
static void sync_pacer(struct ub__cc *cc, uint64_t now)
{
    if (cc->pacer.rate != cc->rate)
        ub__pacer_set_rate(&cc->pacer, cc->rate, now);
}

int ub__cc_init(struct ub__cc *cc, const struct ub__cc_algo *algo,
                const struct ub__cc_params *params)
{
    if (cc == NULL || algo == NULL || params == NULL || params->link_bps == 0 ||
        params->base_rtt_ns == 0 || params->mtu == 0)
        return UB_EINVAL;
    memset(cc, 0, sizeof *cc);
    cc->algo = algo;
    cc->p = *params;
    if (cc->p.mss == 0 || cc->p.mss > cc->p.mtu)
        cc->p.mss = cc->p.mtu;
    if (cc->p.min_rate_bps == 0)
        cc->p.min_rate_bps = 10000000;
    if (cc->p.dcqcn_rai_bps == 0)
        cc->p.dcqcn_rai_bps = 40000000;
    if (cc->p.dcqcn_rhai_bps == 0)
        cc->p.dcqcn_rhai_bps = 10 * cc->p.dcqcn_rai_bps;
    if (cc->p.pacer_burst == 0)
        cc->p.pacer_burst = cc->p.mtu;
    cc->cwnd = UINT64_MAX;
    cc->rate = 0;
    /* 1.5 BDP: the max window of NSCC and RCCC in htsim, and the credit cap. */
    uint64_t maxwnd = ub__max64(ub__bdp(cc->p.link_bps, cc->p.base_rtt_ns) * 3 / 2, cc->p.mtu);
    cc->credit_on = cc->p.rccc || algo == &ub__cc_rccc;
    cc->credit_max = maxwnd;
    cc->credit = (int64_t)(cc->p.init_credit ? cc->p.init_credit : maxwnd);
    algo->init(cc);
    ub__pacer_init(&cc->pacer, cc->rate, cc->p.pacer_burst, cc->p.pacer_burst_ns);
    return 0;
}

void ub__cc_on_nack(struct ub__cc *cc, const struct ub__cc_nack *nack, uint64_t now)
{
    cc->st.nacks++;
    if (cc->algo->on_nack)
        cc->algo->on_nack(cc, nack, now);
    sync_pacer(cc, now);
}

void ub__cc_on_timeout(struct ub__cc *cc, uint64_t bytes, uint64_t now)
{
    cc->st.timeouts++;
    if (cc->algo->on_timeout)
        cc->algo->on_timeout(cc, bytes, now);
    sync_pacer(cc, now);
}

void ub__cc_undo_timeout(struct ub__cc *cc, uint64_t cwnd)
{
    cc->st.undone++;
    if (cc->cwnd != UINT64_MAX && cwnd != UINT64_MAX && cwnd > cc->cwnd)
        cc->cwnd = cwnd;
}

void ub__cc_on_credit(struct ub__cc *cc, uint64_t bytes)
{
    if (!cc->credit_on)
        return;
    int64_t c = cc->credit + (int64_t)ub__min64(bytes, cc->credit_max);
    cc->credit = c > (int64_t)cc->credit_max ? (int64_t)cc->credit_max : c;
}

uint64_t ub__cc_next_send_time(const struct ub__cc *cc, uint64_t bytes, uint64_t now)
{
    return ub__pacer_next_send_time(&cc->pacer, bytes, now);
}

uint64_t ub__cc_next_deadline(const struct ub__cc *cc)
{
    return cc->algo->next_deadline ? cc->algo->next_deadline(cc) : UB_TIME_NEVER;
}

/* ---- none: a fixed window ----------------------------------------------- */
static void none_init(struct ub__cc *cc)
{
    cc->cwnd = cc->p.init_cwnd ? cc->p.init_cwnd : cc->credit_max;
}

const struct ub__cc_algo ub__cc_none = {
    .name = "none",
    .init = none_init,
};

/* ---- rccc: receiver credits, window capped at the max window ------------- */
static void rccc_init(struct ub__cc *cc)
{
    cc->cwnd = cc->p.init_cwnd ? cc->p.init_cwnd : cc->credit_max;
    cc->credit_on = true;
}

const struct ub__cc_algo ub__cc_rccc = {
    .name = "rccc",
    .init = rccc_init,
};

/* ---- C-AQM helpers ------------------------------------------------------ */
#define CAQM_HINT_UNIT_BPS ((uint64_t)UB_EXT_HINT_UNIT_MBPS * 1000000u)

uint16_t ub__caqm_hint_encode(uint64_t bps)
{
    if (bps == 0)
        return 0;
    uint64_t h = bps / CAQM_HINT_UNIT_BPS;
    if (h == 0)
        h = 1;
    return h > UINT16_MAX ? UINT16_MAX : (uint16_t)h;
}

uint64_t ub__caqm_hint_decode(uint16_t hint)
{
    return (uint64_t)hint * CAQM_HINT_UNIT_BPS;
}

void ub__caqm_port_init(struct ub__caqm_port *port, uint64_t link_bps, uint64_t base_rtt_ns)
{
    uint64_t bdp = ub__bdp(link_bps, base_rtt_ns);
    port->kmin = bdp / 5;
    port->kmax = bdp * 4 / 5;
}

bool ub__caqm_switch_mark(const struct ub__caqm_port *port, uint64_t queue_bytes, uint64_t link_bps,
                          struct ub__ext *ext)
{
    if (queue_bytes <= port->kmin)
        return false;
    bool changed = ext->aqm_increase;
    ext->aqm_increase = false;
    if (queue_bytes <= port->kmax)
        return changed;
    /* The request's hint carries the sender's rate; 0 = unknown: use the link. */
    uint64_t sender = ext->aqm_hint ? ub__caqm_hint_decode(ext->aqm_hint) : link_bps;
    uint64_t want = ub__max64(ub__muldiv(sender, port->kmax, queue_bytes), sender / 2);
    uint16_t h = ub__caqm_hint_encode(want);
    if (ext->aqm_hint == 0 || h < ext->aqm_hint)
        ext->aqm_hint = h;
    ext->aqm_congestion = true;
    return true;
}

/* ---- RCCC receiver -------------------------------------------------------- */
int ub__rccc_rx_init(struct ub__rccc_rx *rx, struct ub__rccc_slot *slots, uint32_t nslots,
                     uint64_t rate_bps, uint32_t quantum)
{
    if (rx == NULL || (slots == NULL && nslots) || rate_bps == 0 || quantum == 0)
        return UB_EINVAL;
    memset(rx, 0, sizeof *rx);
    rx->slot = slots;
    rx->nslots = nslots;
    rx->rate_bps = rate_bps;
    rx->quantum = quantum;
    if (nslots) /* no slots may come as NULL: memset must not be given it */
        memset(slots, 0, sizeof *slots * nslots);
    return 0;
}

static uint64_t rccc_due(const struct ub__rccc_rx *rx)
{
    return ub__sat_add(rx->epoch, ub__muldiv(rx->epoch_bytes, 8 * UB_NS_PER_S, rx->rate_bps));
}

static bool rccc_any_demand(const struct ub__rccc_rx *rx)
{
    for (uint32_t i = 0; i < rx->nslots; i++)
        if (rx->slot[i].used && rx->slot[i].demand)
            return true;
    return false;
}

int ub__rccc_rx_demand(struct ub__rccc_rx *rx, uint64_t key, uint64_t demand, uint64_t now)
{
    struct ub__rccc_slot *s = NULL, *free_slot = NULL;
    for (uint32_t i = 0; i < rx->nslots; i++) {
        if (rx->slot[i].used && rx->slot[i].key == key) {
            s = &rx->slot[i];
            break;
        }
        if (!rx->slot[i].used && free_slot == NULL)
            free_slot = &rx->slot[i];
    }
    if (s == NULL) {
        if (demand == 0)
            return 0;
        if (free_slot == NULL)
            return UB_EFULL;
        s = free_slot;
        s->used = true;
        s->key = key;
        s->granted = 0;
    }
    if (!rx->busy && demand) {
        /* Restart the schedule, never earlier than the previous one allowed. */
        uint64_t from = ub__max64(now, rccc_due(rx));
        rx->epoch = from;
        rx->epoch_bytes = 0;
        rx->busy = true;
    }
    s->demand = demand;
    if (demand == 0)
        s->used = false;
    return 0;
}

bool ub__rccc_rx_next(struct ub__rccc_rx *rx, uint64_t now, uint64_t *key, uint64_t *bytes)
{
    if (!rx->busy)
        return false;
    if (!rccc_any_demand(rx)) {
        rx->busy = false;
        return false;
    }
    if (rccc_due(rx) > now)
        return false;
    for (uint32_t n = 0; n < rx->nslots; n++) {
        uint32_t i = (rx->rr + n) % rx->nslots;
        struct ub__rccc_slot *s = &rx->slot[i];
        if (!s->used || s->demand == 0)
            continue;
        uint64_t g = ub__min64(rx->quantum, s->demand);
        s->demand -= g;
        s->granted += g;
        rx->epoch_bytes += g;
        rx->rr = (i + 1) % rx->nslots;
        *key = s->key;
        *bytes = g;
        if (!rccc_any_demand(rx))
            rx->busy = false;
        return true;
    }
    return false;
}

uint64_t ub__rccc_rx_next_time(const struct ub__rccc_rx *rx)
{
    if (!rx->busy || !rccc_any_demand(rx))
        return UB_TIME_NEVER;
    return rccc_due(rx);
}

uint64_t ub__rccc_rx_granted(const struct ub__rccc_rx *rx, uint64_t key)
{
    for (uint32_t i = 0; i < rx->nslots; i++)
        if (rx->slot[i].used && rx->slot[i].key == key)
            return rx->slot[i].granted;
    return 0;
}
