/*
 * Receiver credits (RCCC) inside PDS (docs/pds.md "Receiver credits", docs/algorithms.md
 * sections 3 and 7).
 *
 * Sender: each congestion context (per peer host) with credits on tells the target how many
 * bytes it still wants (queued for a first transmission + lost awaiting repair - credit in
 * hand) in a CTRL CREDIT_REQ: when that grows past what the target knows of, when it drops to
 * zero (the sender leaves), and again after a stall (no grant came while nothing was in
 * flight: the request or its grants were lost). Grants come back in ACK_CC cc_type RCCC or
 * CTRL CREDIT and go to ub__cc_on_credit.
 *
 * Target: one ub__rccc_rx per instance (this host's link) with a slot per sender host. Each
 * grant tick (the pace of rate / quantum) moves the grants due into the sender's pending
 * credit; the next ACK to that host carries it, and whatever no ACK took by the following tick
 * leaves in a CTRL CREDIT, so a sender with nothing in flight is never starved.
 */
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "core/clock.h"
#include "pds/pds_int.h"

static void rccc_tick(struct ub__timer *t, uint64_t now);

void ub__pds_rccc_init(struct ub__pds *pds)
{
    ub__list_init(&pds->rccc_dirty);
    ub__timer_init(&pds->rccc_timer, rccc_tick);
}

void ub__pds_rccc_fini(struct ub__pds *pds)
{
    if (pds->timers)
        ub__timer_cancel(pds->timers, &pds->rccc_timer);
    free(pds->rccc_slots);
    free(pds->rccc_peers);
    pds->rccc_slots = NULL;
    pds->rccc_peers = NULL;
    pds->rccc_npend = 0;
}

static void send_ctrl(struct ub__pds *pds, const struct ub__addr *to, uint16_t path, uint8_t type,
                      uint64_t bytes)
{
    struct ub__wire_dgram d;
    memset(&d, 0, sizeof(d));
    d.pds.type = UB_PDS_TYPE_CTRL;
    d.pds.u.ctrl.ctl_type = type;
    d.pds.u.ctrl.payload = (uint32_t)UB_MIN(bytes, (uint64_t)UB_PDS_CREDIT_MAX);
    if (!ub__pds_ctl_send(pds, &d, to, path))
        return;
    pds->st.ctrl_tx++;
    if (type == UB_PDS_CTRL_CREDIT) {
        pds->st.credit_tx++;
        pds->st.credit_bytes_tx += d.pds.u.ctrl.payload;
    } else {
        pds->st.credit_req_tx++;
    }
}

/* ---- sender ------------------------------------------------------------------------ */

static bool on(const struct ub__pds_ccx *x)
{
    return x && x->cc.credit_on;
}

static void mark(struct ub__pds_ccx *x)
{
    if (x->rccc_dirty)
        return;
    x->rccc_dirty = true;
    ub__list_push_back(&x->pds->rccc_dirty, &x->rccc_link);
}

void ub__pds_rccc_enqueue(struct ub__pds_ipdc *c, uint64_t bytes)
{
    if (!on(c->ccx))
        return;
    c->ccx->rccc_queued += bytes;
    mark(c->ccx);
}

void ub__pds_rccc_sent(struct ub__pds_ipdc *c, uint64_t bytes)
{
    struct ub__pds_ccx *x = c->ccx;
    if (!on(x))
        return;
    x->rccc_queued -= UB_MIN(x->rccc_queued, bytes);
    if (x->rccc_queued == 0) {
        mark(x); /* maybe the sender leaves */
        return;
    }
    struct ub__list *it;
    UB_LIST_FOR_EACH(it, &x->pdcs)
    {
        if (UB_CONTAINER_OF(it, struct ub__pds_ipdc, cc_link)->qlen)
            return;
    }
    x->rccc_queued = 0; /* every queue empty: no estimate drift */
    mark(x);            /* maybe the sender leaves */
}

/*
 * Credit held the context back (no packet goes ahead of credit, not even a lone one). Idle
 * (nothing in flight, so no ACK will come) and nothing heard or asked for 4 base RTTs: the
 * request or its grants may have been lost, so the next request repeats the demand. Returns
 * when to look again if idle (the caller's timer), UB_TIME_NEVER if an ACK will come.
 */
uint64_t ub__pds_rccc_blocked(struct ub__pds_ccx *x, bool idle, uint64_t now)
{
    if (!on(x))
        return UB_TIME_NEVER;
    uint64_t patience = 4 * x->pds->cfg.base_rtt_ns;
    if (idle && now - UB_MIN(now, x->rccc_heard) >= patience) {
        x->rccc_told = 0;
        x->rccc_heard = now;
    }
    mark(x);
    return idle ? x->rccc_heard + patience : UB_TIME_NEVER;
}

/* The context is being freed with its last PDC: if the target still counts on it, it leaves. */
void ub__pds_rccc_ccx_gone(struct ub__pds_ccx *x, const struct ub__pds_ipdc *last)
{
    if (x->rccc_dirty)
        ub__list_remove(&x->rccc_link);
    x->rccc_dirty = false;
    if (on(x) && x->rccc_told)
        send_ctrl(x->pds, &last->peer, last->next_path, UB_PDS_CTRL_CREDIT_REQ, 0);
}

static void tell(struct ub__pds_ccx *x, uint64_t now)
{
    struct ub__pds *pds = x->pds;
    if (ub__list_empty(&x->pdcs))
        return;
    uint64_t want = x->rccc_queued, mtu = pds->cfg.mtu;
    struct ub__list *it;
    UB_LIST_FOR_EACH(it, &x->pdcs)
    {
        want += (uint64_t)UB_CONTAINER_OF(it, struct ub__pds_ipdc, cc_link)->nlost * mtu;
    }
    int64_t credit = x->cc.credit;
    uint64_t need = credit > 0 ? want - UB_MIN(want, (uint64_t)credit) : want;
    if (want && credit <= 0)
        need = UB_MAX(need, mtu); /* the estimate may undercount: never ask for nothing */
    need = UB_MIN(need, (uint64_t)UB_PDS_CREDIT_MAX);
    if (need > x->rccc_told || (need == 0 && x->rccc_told)) {
        const struct ub__pds_ipdc *c = UB_CONTAINER_OF(x->pdcs.next, struct ub__pds_ipdc, cc_link);
        send_ctrl(pds, &c->peer, c->next_path, UB_PDS_CTRL_CREDIT_REQ, need);
        x->rccc_told = need;
        x->rccc_heard = now;
    }
}

/* Before output: the contexts whose demand changed tell their targets (one request each). */
void ub__pds_rccc_flush(struct ub__pds *pds, uint64_t now)
{
    while (!ub__list_empty(&pds->rccc_dirty)) {
        struct ub__list *l = ub__list_pop_front(&pds->rccc_dirty);
        struct ub__pds_ccx *x = UB_CONTAINER_OF(l, struct ub__pds_ccx, rccc_link);
        x->rccc_dirty = false;
        tell(x, now);
    }
}

static void credit_in(struct ub__pds *pds, const struct ub__addr *from, uint64_t bytes,
                      uint64_t now)
{
    struct ub__pds_ccx *x = ub__hmap_get(&pds->ccx_by_key, ub__pds_host_key(from));
    pds->st.credit_bytes_rx += bytes;
    if (!on(x) || !bytes)
        return;
    ub__cc_on_credit(&x->cc, bytes);
    x->rccc_heard = now;
    x->rccc_told -= UB_MIN(x->rccc_told, bytes);
    if (!ub__list_empty(&x->pdcs))
        ub__pds_mark_ready(UB_CONTAINER_OF(x->pdcs.next, struct ub__pds_ipdc, cc_link), now);
}

void ub__pds_rccc_on_ack(struct ub__pds *pds, const struct ub__pkt *p, const struct ub__pds_ack *a,
                         uint64_t now)
{
    if (a->type != UB_PDS_TYPE_ACK_CC || a->cc_type != UB_PDS_CC_RCCC)
        return;
    pds->st.credit_ack_rx++;
    credit_in(pds, &p->addr, a->cc.rccc.credit, now);
}

/* ---- target -------------------------------------------------------------------------- */

static uint64_t grant_interval(const struct ub__pds *pds)
{
    uint64_t ns = (uint64_t)pds->rccc_rx.quantum * 8 * UB_NS_PER_S / pds->rccc_rx.rate_bps;
    return ns ? ns : 1;
}

static struct ub__pds_rccc_peer *peer_find(struct ub__pds *pds, uint64_t key)
{
    for (uint32_t i = 0; i < UB_PDS_RCCC_SLOTS; i++)
        if (pds->rccc_peers[i].used && pds->rccc_peers[i].key == key)
            return &pds->rccc_peers[i];
    return NULL;
}

static bool in_rx(const struct ub__pds *pds, uint64_t key)
{
    for (uint32_t i = 0; i < UB_PDS_RCCC_SLOTS; i++)
        if (pds->rccc_slots[i].used && pds->rccc_slots[i].key == key)
            return true;
    return false;
}

static struct ub__pds_rccc_peer *peer_get(struct ub__pds *pds, uint64_t key)
{
    struct ub__pds_rccc_peer *e = peer_find(pds, key);
    if (e)
        return e;
    for (uint32_t i = 0; i < UB_PDS_RCCC_SLOTS; i++) {
        e = &pds->rccc_peers[i];
        if (!e->used || (e->pending == 0 && !in_rx(pds, e->key))) {
            memset(e, 0, sizeof(*e));
            e->used = true;
            e->key = key;
            return e;
        }
    }
    return NULL;
}

static void rearm(struct ub__pds *pds, uint64_t now)
{
    uint64_t at = ub__rccc_rx_next_time(&pds->rccc_rx);
    if (pds->rccc_npend)
        at = UB_MIN(at, now + grant_interval(pds));
    if (at == UB_TIME_NEVER)
        ub__timer_cancel(pds->timers, &pds->rccc_timer);
    else if (!ub__timer_armed(&pds->rccc_timer) || pds->rccc_timer.deadline != UB_MAX(at, now))
        ub__timer_arm(pds->timers, &pds->rccc_timer, UB_MAX(at, now));
}

/* The grant pace: stale pending credit leaves as CTRL CREDIT, then the grants due are made. */
static void rccc_tick(struct ub__timer *t, uint64_t now)
{
    struct ub__pds *pds = UB_CONTAINER_OF(t, struct ub__pds, rccc_timer);
    for (uint32_t i = 0; i < UB_PDS_RCCC_SLOTS; i++) {
        struct ub__pds_rccc_peer *e = &pds->rccc_peers[i];
        if (e->used && e->pending && e->old) {
            send_ctrl(pds, &e->addr, e->path, UB_PDS_CTRL_CREDIT, e->pending);
            e->pending -= UB_MIN(e->pending, (uint64_t)UB_PDS_CREDIT_MAX);
            if (e->pending == 0)
                pds->rccc_npend--;
        }
    }
    uint64_t key, bytes;
    while (ub__rccc_rx_next(&pds->rccc_rx, now, &key, &bytes)) {
        struct ub__pds_rccc_peer *e = peer_find(pds, key);
        if (e) {
            if (e->pending == 0)
                pds->rccc_npend++;
            e->pending += bytes;
        }
    }
    for (uint32_t i = 0; i < UB_PDS_RCCC_SLOTS; i++) {
        pds->rccc_peers[i].old = pds->rccc_peers[i].pending != 0;
        /* A sender granted all it asked for frees its slot (a new request takes one again). */
        if (pds->rccc_slots[i].used && pds->rccc_slots[i].demand == 0)
            ub__rccc_rx_demand(&pds->rccc_rx, pds->rccc_slots[i].key, 0, now);
    }
    rearm(pds, now);
}

static void on_credit_req(struct ub__pds *pds, const struct ub__pkt *p, uint64_t demand,
                          uint64_t now)
{
    pds->st.credit_req_rx++;
    if (!pds->rccc_slots) {
        pds->rccc_slots = calloc(UB_PDS_RCCC_SLOTS, sizeof(*pds->rccc_slots));
        pds->rccc_peers = calloc(UB_PDS_RCCC_SLOTS, sizeof(*pds->rccc_peers));
        uint64_t rate =
            pds->cfg.rccc_rate_bps ? pds->cfg.rccc_rate_bps : pds->cfg.link_bps / 100 * 98;
        uint32_t quantum = pds->cfg.rccc_quantum ? pds->cfg.rccc_quantum : 4 * pds->cfg.mtu;
        if (!pds->rccc_slots || !pds->rccc_peers ||
            ub__rccc_rx_init(&pds->rccc_rx, pds->rccc_slots, UB_PDS_RCCC_SLOTS, rate, quantum)) {
            ub__pds_rccc_fini(pds);
            return;
        }
    }
    uint64_t key = ub__pds_host_key(&p->addr);
    struct ub__pds_rccc_peer *e = demand ? peer_get(pds, key) : peer_find(pds, key);
    if (demand && !e) {
        pds->st.rccc_full++;
        return;
    }
    if (e) {
        e->addr = p->addr;
        e->path = p->path;
    }
    if (ub__rccc_rx_demand(&pds->rccc_rx, key, demand, now))
        pds->st.rccc_full++;
    rearm(pds, now);
}

bool ub__pds_rccc_on_ctrl(struct ub__pds *pds, const struct ub__pkt *p,
                          const struct ub__pds_ctrl *k, uint64_t now)
{
    switch (k->ctl_type) {
    case UB_PDS_CTRL_CREDIT_REQ:
        on_credit_req(pds, p, k->payload & UB_PDS_CREDIT_MAX, now);
        return true;
    case UB_PDS_CTRL_CREDIT:
        pds->st.credit_rx++;
        credit_in(pds, &p->addr, k->payload & UB_PDS_CREDIT_MAX, now);
        return true;
    default:
        return false;
    }
}

/* An ACK_CC about to leave for `to`: it carries that host's pending credit (cc_type RCCC). */
void ub__pds_rccc_ack_out(struct ub__pds *pds, const struct ub__addr *to, struct ub__pds_ack *a)
{
    if (!pds->rccc_npend || a->type != UB_PDS_TYPE_ACK_CC || a->cc_type != UB_PDS_CC_NSCC)
        return;
    struct ub__pds_rccc_peer *e = peer_find(pds, ub__pds_host_key(to));
    if (!e || !e->pending)
        return;
    uint32_t credit = (uint32_t)UB_MIN(e->pending, (uint64_t)UB_PDS_CREDIT_MAX);
    uint16_t ooo = a->cc.nscc.ooo_count;
    a->cc_type = UB_PDS_CC_RCCC;
    a->cc.rccc.credit = credit;
    a->cc.rccc.ooo_count = ooo;
    e->pending -= credit;
    if (e->pending == 0)
        pds->rccc_npend--;
    pds->st.credit_ack_tx++;
    pds->st.credit_bytes_tx += credit;
}
