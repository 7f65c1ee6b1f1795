/*
 * The target side of PDS: contexts opened by SYN, duplicate filtering over
 * an MP_RANGE-bounded bitmap, ROD's in-order acceptance, ACK generation
 * (coalesced, immediate on gaps and requests, timer-driven otherwise),
 * NACKs, close, eviction and the quarantine of closed contexts.
 */
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "core/clock.h"
#include "core/seq.h"
#include "pds/pds_int.h"

static void ack_timer_fire(struct ub__timer *t, uint64_t now);

static uint64_t tpdc_key(const struct ub__addr *src, uint32_t incarnation, uint16_t spdcid,
                         uint8_t mode)
{
    return ub__mix64(ub__pds_host_key(src) ^ ((uint64_t)incarnation << 24) ^
                     ((uint64_t)spdcid << 4) ^ mode);
}

static inline uint32_t words(const struct ub__pds *pds)
{
    return pds->cfg.mp_range / 64;
}

static inline bool bit_get(const struct ub__pds_tpdc *t, uint32_t psn, uint32_t mask)
{
    uint32_t i = psn & mask;
    return (t->bits[i / 64] >> (i % 64)) & 1;
}

static inline void bit_set(struct ub__pds_tpdc *t, uint32_t psn, uint32_t mask)
{
    uint32_t i = psn & mask;
    t->bits[i / 64] |= 1ull << (i % 64);
}

static inline void bit_clear(struct ub__pds_tpdc *t, uint32_t psn, uint32_t mask)
{
    uint32_t i = psn & mask;
    t->bits[i / 64] &= ~(1ull << (i % 64));
}

/*
 * The 64 bits of PSNs base .. base + 63 (base >= rcv_nxt), from the receive bitmap's words
 * with two shifts (the bitmap is a ring of mp_range bits, mp_range a power of two and a
 * multiple of 64); PSNs at or beyond rcv_nxt + mp_range are not tracked and read as 0.
 */
static uint64_t sack_bits(const struct ub__pds_tpdc *t, uint32_t base, uint32_t mask)
{
    uint32_t nw = words(t->pds);
    uint32_t i = base & mask, w = i / 64, b = i % 64;
    uint64_t bm = t->bits[w] >> b;
    if (b)
        bm |= t->bits[(w + 1) % nw] << (64 - b);
    int32_t room = (int32_t)t->pds->cfg.mp_range - ub__seq_diff(base, t->rcv_nxt);
    if (room <= 0)
        return 0;
    if (room < 64)
        bm &= (1ull << room) - 1;
    return bm;
}

static bool bitmap_empty(const struct ub__pds_tpdc *t)
{
    for (uint32_t i = 0; i < words(t->pds); i++)
        if (t->bits[i])
            return false;
    return true;
}

/* ---- packets the target sends ------------------------------------------------- */

static void send_nack_f(struct ub__pds *pds, const struct ub__addr *to, uint16_t path, uint8_t code,
                        uint32_t psn, uint16_t our_id, uint16_t their_id, uint32_t payload,
                        uint8_t flags);

static void send_nack(struct ub__pds *pds, const struct ub__addr *to, uint16_t path, uint8_t code,
                      uint32_t psn, uint16_t our_id, uint16_t their_id, uint32_t payload, bool retx)
{
    send_nack_f(pds, to, path, code, psn, our_id, their_id, payload, retx ? UB_PDS_NACK_F_RETX : 0);
}

static void send_nack_f(struct ub__pds *pds, const struct ub__addr *to, uint16_t path, uint8_t code,
                        uint32_t psn, uint16_t our_id, uint16_t their_id, uint32_t payload,
                        uint8_t flags)
{
    struct ub__wire_dgram d;
    memset(&d, 0, sizeof(d));
    d.pds.type = UB_PDS_TYPE_NACK;
    struct ub__pds_nack *n = &d.pds.u.nack;
    n->type = UB_PDS_TYPE_NACK;
    n->flags = flags;
    n->code = code;
    n->psn = psn;
    n->spdcid = our_id;
    n->dpdcid = their_id;
    n->payload = payload;
    if (ub__pds_ctl_send(pds, &d, to, path))
        pds->st.nacks_tx++;
}

/* ---- C-AQM echo (docs/algorithms.md section 5) ------------------------------------- */

/*
 * A request's C-AQM fields, as the switches left them. A request carries them when its sender
 * runs C-AQM (I set, or its rate in the hint) or a switch marked it (C). Over the requests since
 * the last ACK: C if any had it, I if every one kept it, and the most congested hint (the
 * lowest of the C-marked ones; without C, the latest).
 */
static void caqm_note_fields(struct ub__pds_tpdc *t, const struct ub__ext *e)
{
    bool first = !t->caqm_seen;
    t->caqm_seen = true;
    t->caqm_i = (first || t->caqm_i) && e->aqm_increase;
    if (e->aqm_congestion) {
        if (!t->caqm_c || (e->aqm_hint && (t->caqm_hint == 0 || e->aqm_hint < t->caqm_hint)))
            t->caqm_hint = e->aqm_hint;
        t->caqm_c = true;
    } else if (!t->caqm_c) {
        t->caqm_hint = e->aqm_hint;
    }
}

/* Requests without C-AQM fields (no C-AQM sender on the path) leave the echo as it is. */
static inline void caqm_note(struct ub__pds_tpdc *t, const struct ub__wire_dgram *d)
{
    const struct ub__ext *e = &d->ext;
    if (d->has_ext && (e->aqm_increase || e->aqm_congestion || e->aqm_hint))
        caqm_note_fields(t, e);
}

/* Turns the ACK being built into ACK_CC cc_type CAQM when there is a C-AQM echo; resets it. */
static void caqm_echo(struct ub__pds_tpdc *t, struct ub__pds_ack *a)
{
    if (!t->caqm_seen)
        return;
    struct ub__pds_nscc_state n = a->cc.nscc;
    a->cc_type = UB_PDS_CC_CAQM;
    a->cc.caqm = (struct ub__pds_caqm_state){
        .service_time = n.service_time,
        .restore_cwnd = n.restore_cwnd,
        .rcv_cwnd_pend = n.rcv_cwnd_pend,
        .c = t->caqm_c,
        .i = t->caqm_i,
        .hint = t->caqm_hint,
        .ooo_count = n.ooo_count,
    };
    t->caqm_seen = t->caqm_c = t->caqm_i = false;
    t->caqm_hint = 0;
}

/*
 * Destination flow control (docs/algorithms.md section 2): the receiver is overloaded when its
 * packet pool runs short, for then arrivals are about to be dropped for want of a buffer. The
 * penalty is 0 with dest_fc_free_pct % of the buffers free or more and rises linearly to 127
 * (the sender gives back the whole acked amount) with none free:
 * floor(127 x (count x pct - avail x 100) / (count x pct)). Sampled when the ACK is built,
 * before its own buffer is taken.
 */
static uint8_t dest_fc_pend(const struct ub__pds *pds)
{
    const struct ub__pktpool *pl = pds->pool;
    if (pds->cfg.no_dest_fc || !pl || !pl->count)
        return 0;
    uint32_t pct =
        pds->cfg.dest_fc_free_pct ? pds->cfg.dest_fc_free_pct : UB_PDS_DEFAULT_DEST_FC_PCT;
    uint64_t thr = (uint64_t)pl->count * UB_MIN(pct, 100u); /* free buffers x 100 */
    uint64_t avail = (uint64_t)pl->avail * 100;
    if (avail >= thr)
        return 0;
    return (uint8_t)((thr - avail) * UB_PDS_CWND_PEND_MAX / thr);
}

/* The response that rode on the ACK of psn, while the initiator may still ask for it. */
static const struct ub__pds_rspc *rsp_cached(const struct ub__pds_tpdc *t, uint32_t psn)
{
    if (!t->rspc)
        return NULL;
    const struct ub__pds_rspc *e = &t->rspc[psn & (UB_PDS_ACK_RSP_CACHE - 1)];
    if (!e->len || e->psn != psn || (t->clear_set && ub__seq_lt(psn, t->clear_psn)))
        return NULL;
    return e;
}

/*
 * Where the PDC's ACKs go: the address our own initiator PDC to the same device sends to, if
 * there is one, else the source of the latest request. A peer of several paths sends from
 * as many ports; any of them reaches it, and the one our requests use lets an ACK share their
 * datagram (UB_PKT_F_ANY_PATH: the bundle's path serves it too).
 */
static const struct ub__addr *ack_dest(struct ub__pds_tpdc *t)
{
    struct ub__pds *pds = t->pds;
    if (UB_UNLIKELY(t->twin_gen != pds->dev_gen)) {
        t->twin_gen = pds->dev_gen;
        struct ub__pds_ipdc *c =
            ub__hmap_get(&pds->ipdc_by_dev, ub__pds_dev_key(&t->peer, t->incarnation));
        bool same = c && c->peer_inc == t->incarnation &&
                    ub__pds_host_key(&c->peer) == ub__pds_host_key(&t->peer);
        t->twin = same ? c : NULL;
    }
    return t->twin ? &t->twin->peer : &t->peer;
}

/*
 * The first of the 64 PSNs the next ACK reports selectively: from the first hole, or ending at
 * the latest arrival. Coalescing must not drop what the queued ACK reports: PSNs received out
 * of order and reported by no other ACK would look lost to the initiator's inference (a
 * device of several paths hands a round over socket by socket, so its PSNs arrive in strides
 * and the latest arrival runs far ahead of the first hole). So the queued ACK keeps its base
 * while the latest arrival fits in its bitmap; otherwise, if the new bitmap would leave out
 * PSNs it reports as held, it leaves as it is (ack_q cleared) and the new ACK reports from just
 * past it.
 */
static uint32_t sack_base(struct ub__pds_tpdc *t)
{
    uint32_t base = t->rcv_nxt;
    if (ub__seq_diff(t->last_psn, base) >= 64)
        base = t->last_psn - 63;
    if (!t->ack_q)
        return base;
    uint32_t qb = t->ack_q_base;
    uint64_t keep = t->ack_q_bm; /* still held: above the new cumulative ACK */
    int32_t gone = ub__seq_diff(t->rcv_nxt, qb);
    if (gone >= 64)
        keep = 0;
    else if (gone > 0)
        keep &= ~0ull << gone;
    if (!keep)
        return base;
    int32_t at = ub__seq_diff(t->last_psn, qb);
    if (at >= 0 && at < 64)
        return gone > 0 ? t->rcv_nxt : qb;
    int32_t d = ub__seq_diff(base, qb); /* keep's bit i is PSN qb + i, the new bit i - d */
    bool lost = d >= 64 || d <= -64 || (d > 0 && (keep & ((1ull << d) - 1))) ||
                (d < 0 && (keep >> (64 + d)));
    if (!lost)
        return base;
    t->ack_q->tag = 0; /* it leaves as it is: a new ACK reports the rest */
    t->ack_q = NULL;
    if (at >= 64 && ub__seq_lt(base, qb + 64))
        base = qb + 64;
    return base;
}

/*
 * Sends the ACK of the PDC's latest state. pin: an ACK that answers its trigger (last_psn) on
 * its own (a request with K, or a duplicate): never rewritten by a later one, it carries the
 * response cached for that PSN if there is one. A pinned ACK may still absorb an unpinned one
 * queued before it (the newer state says everything the older did).
 */
static void send_ack_x(struct ub__pds_tpdc *t, bool pin)
{
    struct ub__pds *pds = t->pds;
    ub__timer_cancel(pds->timers, &t->ack_timer);
    uint8_t pend = dest_fc_pend(pds);
    uint32_t base = sack_base(t);
    /* Coalescing: the ACK still queued for this PDC is rewritten with the newer state. */
    struct ub__pkt *p = t->ack_q;
    uint32_t old_len = p ? p->len : 0;
    if (p)
        ub__pkt_pull(p, old_len);
    else if ((p = ub__pds_alloc(pds)) == NULL)
        return; /* the initiator's RTO or probe asks again */
    const struct ub__pds_rspc *rsp = pin ? rsp_cached(t, t->last_psn) : NULL;
    /* No room after the header for it (cannot happen with MTU-sized buffers): then the ACK
     * names no trigger, so that it cannot answer that PSN without its response. */
    bool notrig = rsp && ub__pkt_tailroom(p) < (uint32_t)UB_PDS_ACK_CCX_SIZE + rsp->len;
    if (notrig)
        rsp = NULL;
    uint32_t mask = pds->cfg.mp_range - 1;
    uint32_t cack = t->rcv_nxt - 1;
    struct ub__pds_ack ack;
    memset(&ack, 0, sizeof(ack));
    struct ub__pds_ack *a = &ack;
    a->type = UB_PDS_TYPE_ACK_CC;
    a->flags = (uint8_t)((t->retx_seen ? UB_PDS_ACK_F_RETX : 0) |
                         (t->ecn_seen ? UB_PDS_ACK_F_M : 0) | (t->own_peer ? UB_PDS_ACK_F_OWN : 0));
    if (rsp)
        a->next_hdr = UB_PDS_NH_SOFTUB_EXT;
    int32_t off = ub__seq_diff(t->last_psn, cack);
    /* A trigger too far to name points past anything the initiator has in flight (an OWN ACK
     * must never seem to answer a PSN it does not). */
    a->ack_psn_offset =
        (int16_t)(off > INT16_MAX || off < INT16_MIN || notrig ? (t->own_peer ? INT16_MAX : 0)
                                                               : off);
    a->cack_psn = cack;
    a->spdcid = t->id;
    a->dpdcid = t->ispdcid;
    a->cc_type = UB_PDS_CC_NSCC;
    a->mpr = (uint8_t)(pds->cfg.mp_range / UB_PDS_MPR_UNIT);
    uint64_t bm = sack_bits(t, base, mask);
#ifdef UB_PDS_CHECK_DETECT
    {
        uint64_t slow = 0;
        for (uint32_t i = 0; i < 64; i++) {
            uint32_t psn = base + i;
            if (ub__seq_diff(psn, t->rcv_nxt) >= (int32_t)pds->cfg.mp_range)
                break;
            if (bit_get(t, psn, mask))
                slow |= 1ull << i;
        }
        if (slow != bm)
            abort();
        if (bitmap_empty(t) != (t->held == 0))
            abort();
    }
#endif
    a->sack_psn_offset = (int16_t)(base - cack);
    a->sack_bitmap = bm;
    /*
     * NSCC state: PSNs held beyond the first hole (saturating), the wire bytes accepted so far
     * (24 bits, wrapping: the initiator takes ub__cc_rcvd_bytes_delta), and the destination
     * flow-control penalty. How long the ACK was held after its triggering packet arrived,
     * which the initiator takes off its RTT sample, is written as it leaves (ub__pds_pull).
     */
    a->cc.nscc.rcv_cwnd_pend = pend;
    a->cc.nscc.ooo_count = (uint16_t)UB_MIN(t->held, 0xffffu);
    a->cc.nscc.rcvd_bytes = (uint32_t)(t->rcvd_bytes & UB_PDS_RCVD_BYTES_MAX);
    caqm_echo(t, a);
    if (pds->rccc_npend) /* RCCC: pending credit for that host rides here */
        ub__pds_rccc_ack_out(pds, &t->peer, a);
    if (ub__pds_encode_ack_into(p, a)) {
        if (t->ack_q)
            ub__pkt_push(p, old_len); /* the queued ACK as it was */
        else
            ub__pkt_free(p);
        return;
    }
    if (rsp) {
        memcpy(ub__pkt_put(p, rsp->len), ub__pds_rspc_bytes(rsp), rsp->len); /* room checked */
        pds->st.acks_rsp_tx++;
    }
    p->addr = *ack_dest(t);
    p->path = t->reply_path;
    p->flags |= UB_PKT_F_ANY_PATH;
    if (a->cc_type == UB_PDS_CC_NSCC || a->cc_type == UB_PDS_CC_CAQM) {
        p->flags |= UB_PDS_PKT_SERVICE;
        p->ts = t->trig_at;
    }
    t->unacked = 0;
    t->retx_seen = false;
    if (t->ecn_seen)
        pds->st.acks_ecn_tx++;
    t->ecn_seen = false;
    pds->st.acks_tx++;
    if (t->ack_q) {
        pds->st.acks_coalesced++;
        t->ack_q_base = base;
        t->ack_q_bm = bm;
        if (pin) { /* it leaves as it is now: a later ACK is a new packet */
            p->tag = 0;
            t->ack_q = NULL;
        }
        return;
    }
    if (!pds->cfg.ack_coalesce || pin) {
        ub__pds_ctl_push(pds, p);
        return;
    }
    p->tag = (uint64_t)(uintptr_t)t;
    if (ub__pds_ctl_push(pds, p)) {
        t->ack_q = p;
        t->ack_q_base = base;
        t->ack_q_bm = bm;
    }
}

static void send_ack(struct ub__pds_tpdc *t)
{
    send_ack_x(t, false);
}

void ub__pds_dlv_own(struct ub__pds *pds)
{
    if (!pds->dlv_t)
        return;
    pds->dlv_own = true;
    pds->dlv_t->own_peer = true;
}

uint8_t *ub__pds_dlv_rsp(struct ub__pds *pds, uint32_t len)
{
    struct ub__pds_tpdc *t = pds->dlv_t;
    /* The ACK must take it whole (else it would go without its trigger, send_ack_x). */
    if (!t || !pds->dlv_own || pds->dlv_rsp || !len || len > UB_PDS_ACK_RSP_MAX ||
        (pds->pool && UB_PDS_ACK_CCX_SIZE + len > pds->pool->buf_size - pds->pool->headroom))
        return NULL;
    if (!t->rspc && !(t->rspc = calloc(UB_PDS_ACK_RSP_CACHE, sizeof(*t->rspc)))) {
        pds->st.rsp_cache_full++;
        return NULL;
    }
    struct ub__pds_rspc *e = &t->rspc[pds->dlv_psn & (UB_PDS_ACK_RSP_CACHE - 1)];
    /* Taken by a PSN the initiator has not cleared: it may still ask for that one. */
    if (e->len && e->psn != pds->dlv_psn && !(t->clear_set && ub__seq_lt(e->psn, t->clear_psn))) {
        pds->st.rsp_cache_full++;
        return NULL;
    }
    if (len > UB_PDS_ACK_RSP_INLINE && !e->big && !(e->big = malloc(UB_PDS_ACK_RSP_MAX))) {
        pds->st.rsp_cache_full++;
        return NULL;
    }
    e->psn = pds->dlv_psn;
    e->len = (uint16_t)len;
    pds->dlv_rsp = true;
    return len > UB_PDS_ACK_RSP_INLINE ? e->big : e->b;
}

/* A request's clear PSN (the initiator's una when it sent it): responses below it are done. */
static void note_clear(struct ub__pds_tpdc *t, const struct ub__pds_req *r)
{
    uint32_t clear = ub__seq_add(r->psn, r->clear_psn_offset);
    if (!t->clear_set || ub__seq_lt(t->clear_psn, clear)) {
        t->clear_psn = clear;
        t->clear_set = true;
    }
}

static void ack_timer_fire(struct ub__timer *tm, uint64_t now)
{
    (void)now;
    send_ack(UB_CONTAINER_OF(tm, struct ub__pds_tpdc, ack_timer));
}

/* ---- the context table ---------------------------------------------------------- */

void ub__pds_graves_expire(struct ub__pds *pds, uint64_t now)
{
    while (!ub__list_empty(&pds->grave_list)) {
        struct ub__pds_grave *g = UB_CONTAINER_OF(pds->grave_list.next, struct ub__pds_grave, link);
        if (g->until > now && pds->graves.count <= 4 * pds->cfg.max_pdcs)
            break;
        ub__list_remove(&g->link);
        ub__hmap_del(&pds->graves, g->key);
        free(g);
    }
}

void ub__pds_tpdc_free(struct ub__pds_tpdc *t, bool graveyard, uint64_t now)
{
    struct ub__pds *pds = t->pds;
    ub__timer_cancel(pds->timers, &t->ack_timer);
    if (t->ack_q)
        t->ack_q->tag = 0; /* its last ACK still leaves, without us */
    ub__list_remove(&t->lru);
    ub__hmap_del(&pds->tpdc_by_key, t->key);
    ub__hmap_del(&pds->tpdc_by_id, t->id);
    if (pds->tpdc_last == t)
        pds->tpdc_last = NULL;
    if (graveyard) {
        struct ub__pds_grave *g = malloc(sizeof(*g));
        if (g) {
            g->key = t->key;
            g->end_psn = t->rcv_nxt;
            g->until = now + pds->cfg.quarantine_ns;
            if (ub__hmap_put(&pds->graves, g->key, g) == 0)
                ub__list_push_back(&pds->grave_list, &g->link);
            else
                free(g);
        }
    }
    free(t->bits);
    for (uint32_t i = 0; t->rspc && i < UB_PDS_ACK_RSP_CACHE; i++)
        free(t->rspc[i].big);
    free(t->rspc);
    free(t);
}

/* Whether t holds nothing that would be lost by forgetting it now. */
static bool quiescent(const struct ub__pds_tpdc *t)
{
    return t->unacked == 0 && !ub__timer_armed(&t->ack_timer) && bitmap_empty(t);
}

static bool evict_one(struct ub__pds *pds, uint64_t now)
{
    struct ub__list *it;
    int looked = 0;
    UB_LIST_FOR_EACH(it, &pds->tpdc_lru)
    {
        struct ub__pds_tpdc *t = UB_CONTAINER_OF(it, struct ub__pds_tpdc, lru);
        if (quiescent(t)) {
            pds->st.pdc_evicted++;
            ub__pds_tpdc_free(t, true, now);
            return true;
        }
        if (++looked == 8)
            break;
    }
    return false;
}

/* Under pressure, ask the least recently active initiator to close (it does once idle). */
static void ask_close(struct ub__pds *pds, uint64_t now)
{
    (void)now;
    if (ub__list_empty(&pds->tpdc_lru))
        return;
    struct ub__pds_tpdc *t = UB_CONTAINER_OF(pds->tpdc_lru.next, struct ub__pds_tpdc, lru);
    if (t->close_req_sent)
        return;
    struct ub__wire_dgram d;
    memset(&d, 0, sizeof(d));
    d.pds.type = UB_PDS_TYPE_CTRL;
    d.pds.u.ctrl.ctl_type = UB_PDS_CTRL_CLOSE_REQ;
    d.pds.u.ctrl.psn = t->rcv_nxt;
    d.pds.u.ctrl.spdcid = t->id;
    d.pds.u.ctrl.dpdcid = t->ispdcid;
    if (!ub__pds_ctl_send(pds, &d, &t->peer, t->reply_path))
        return;
    t->close_req_sent = true;
    pds->st.ctrl_tx++;
}

static uint16_t alloc_id(struct ub__pds *pds)
{
    for (;;) {
        uint16_t id = pds->next_tpdc_id++;
        if (id != 0 && !ub__hmap_get(&pds->tpdc_by_id, id))
            return id;
    }
}

static struct ub__pds_tpdc *tpdc_create(struct ub__pds *pds, uint64_t key, const struct ub__pkt *p,
                                        uint32_t incarnation, uint16_t ispdcid, uint8_t mode,
                                        uint32_t start_psn, uint64_t now)
{
    if (pds->tpdc_by_id.count >= pds->cfg.max_pdcs && !evict_one(pds, now)) {
        pds->st.table_full++;
        return NULL;
    }
    if (pds->tpdc_by_id.count * 4 >= pds->cfg.max_pdcs * 3)
        ask_close(pds, now);
    struct ub__pds_tpdc *t = calloc(1, sizeof(*t));
    uint64_t *bits = calloc(words(pds), sizeof(uint64_t));
    if (!t || !bits) {
        free(t);
        free(bits);
        return NULL;
    }
    t->pds = pds;
    t->bits = bits;
    t->key = key;
    t->id = alloc_id(pds);
    t->ispdcid = ispdcid;
    t->incarnation = incarnation;
    t->mode = mode;
    t->rcv_nxt = start_psn;
    t->peer = p->addr;
    t->key_addr = p->addr; /* key came from it and the fields above */
    ub__timer_init(&t->ack_timer, ack_timer_fire);
    if (ub__hmap_put(&pds->tpdc_by_key, key, t) || ub__hmap_put(&pds->tpdc_by_id, t->id, t)) {
        ub__hmap_del(&pds->tpdc_by_key, key);
        free(bits);
        free(t);
        return NULL;
    }
    ub__list_push_back(&pds->tpdc_lru, &t->lru);
    pds->st.pdc_accepted++;
    return t;
}

/* ---- receiving requests ---------------------------------------------------------- */

static void deliver(struct ub__pds *pds, struct ub__pkt *p, const struct ub__wire_dgram *d,
                    uint16_t pdc, uint8_t mode, uint32_t psn, uint64_t now)
{
    struct ub__pds_rx rx = {
        .src = &p->addr,
        .incarnation = d->ext.incarnation,
        .pdc = pdc,
        .mode = mode,
        .path = p->path,
        .ecn = p->ecn,
        .psn = psn,
        .hdr = d,
        .payload = p->data + d->payload_off,
        .payload_len = (uint32_t)d->payload_len,
    };
    pds->st.rx_pkts++;
    if (pds->up && pds->up->deliver)
        pds->up->deliver(pds->up_arg, &rx, now);
}

/* A request for a context we do not have: closed (quarantined) or never known. */
static void reject_unknown(struct ub__pds *pds, const struct ub__pkt *p, uint64_t key,
                           const struct ub__pds_req *r, uint64_t now)
{
    ub__pds_graves_expire(pds, now);
    const struct ub__pds_grave *g = ub__hmap_get(&pds->graves, key);
    bool retx = r->flags & UB_PDS_REQ_F_RETX;
    if (g) {
        pds->st.rx_stale++;
        send_nack(pds, &p->addr, p->path, UB_PDS_NACK_CLOSING, r->psn, 0, r->spdcid, g->end_psn,
                  retx);
    } else {
        pds->st.rx_no_pdc++;
        send_nack(pds, &p->addr, p->path, UB_PDS_NACK_NO_PDC, r->psn, 0, r->spdcid, 0, retx);
    }
}

void ub__pds_on_req(struct ub__pds *pds, struct ub__pkt *p, const struct ub__wire_dgram *d,
                    uint64_t now)
{
    const struct ub__pds_req *r = &d->pds.u.req;
    uint8_t mode = (r->type == UB_PDS_TYPE_ROD_REQ || r->type == UB_PDS_TYPE_ROD_CC_REQ)
                       ? UB_PDS_ROD
                       : UB_PDS_RUD;
    uint32_t inc = d->ext.incarnation;
    bool retx = r->flags & UB_PDS_REQ_F_RETX;
    struct ub__pds_tpdc *t;
    if (r->flags & UB_PDS_REQ_F_SYN) {
        uint64_t key = tpdc_key(&p->addr, inc, r->spdcid, mode);
        t = ub__hmap_get(&pds->tpdc_by_key, key);
        if (!t) {
            ub__pds_graves_expire(pds, now);
            if (ub__hmap_get(&pds->graves, key)) {
                reject_unknown(pds, p, key, r, now);
                return;
            }
            t = tpdc_create(pds, key, p, inc, r->spdcid, mode, r->psn - r->psn_offset, now);
            if (!t) {
                send_nack(pds, &p->addr, p->path, UB_PDS_NACK_NO_RESOURCE, r->psn, 0, r->spdcid, 0,
                          retx);
                return;
            }
        }
    } else {
        t = pds->tpdc_last;
        if (!t || t->id != r->dpdcid) {
            t = ub__hmap_get(&pds->tpdc_by_id, r->dpdcid);
            if (t)
                pds->tpdc_last = t;
        }
        /* The key check without hashing the address again when nothing changed since. */
        bool same = t && t->incarnation == inc && t->ispdcid == r->spdcid && t->mode == mode;
        if (t && !(same && ub__addr_eq(&t->key_addr, &p->addr))) {
            if (t->key != tpdc_key(&p->addr, inc, r->spdcid, mode)) {
                /*
                 * Our PDC id, someone else's (host, incarnation, spdcid, mode): an earlier
                 * incarnation's straggler or a damaged header. Dropped without a NACK: a NO_PDC
                 * would make the rightful owner of the id fail its whole context.
                 */
                pds->st.rx_stale++;
                return;
            }
            if (same)
                t->key_addr = p->addr;
        }
        if (!t) {
            reject_unknown(pds, p, tpdc_key(&p->addr, inc, r->spdcid, mode), r, now);
            return;
        }
    }
    t->peer = p->addr;
    t->reply_path = p->path;
    t->last_active = now;
    if (pds->tpdc_lru.prev != &t->lru) { /* most recently active already: stays last */
        ub__list_remove(&t->lru);
        ub__list_push_back(&pds->tpdc_lru, &t->lru);
    }

    uint32_t psn = r->psn;
    uint32_t mask = pds->cfg.mp_range - 1;
    int32_t ahead = ub__seq_diff(psn, t->rcv_nxt);
    if (ahead < 0 || (ahead < (int32_t)pds->cfg.mp_range && bit_get(t, psn, mask))) {
        /* Already here. ACK again at once: the ACK that said so may have been lost. It answers
         * this PSN on its own, with the response that rode on the lost one if there was one. */
        pds->st.rx_dup++;
        if (retx)
            pds->st.spurious_retx++;
        note_clear(t, r);
        t->last_psn = psn;
        t->trig_at = now;
        t->retx_seen = retx;
        if (p->ecn == 3) {
            pds->st.rx_ce++;
            t->ecn_seen = true;
        }
        caqm_note(t, d);
        if (rsp_cached(t, psn))
            pds->st.acks_rsp_resent++;
        send_ack_x(t, true);
        return;
    }
    if (ahead >= (int32_t)pds->cfg.mp_range) {
        pds->st.rx_oow++;
        send_nack(pds, &p->addr, p->path, UB_PDS_NACK_PSN_OOR_WINDOW, psn, t->id, t->ispdcid,
                  t->rcv_nxt, retx);
        return;
    }
    if (mode == UB_PDS_ROD && ahead != 0) {
        pds->st.rx_ooo_rod++;
        /* One NACK per gap: every later packet of the burst would say the same. */
        if (!t->nacked || t->last_nack_psn != t->rcv_nxt || retx) {
            t->nacked = true;
            t->last_nack_psn = t->rcv_nxt;
            send_nack(pds, &p->addr, p->path, UB_PDS_NACK_ROD_OOO, psn, t->id, t->ispdcid,
                      t->rcv_nxt, retx);
        }
        return;
    }
    /* Accept. */
    bool in_order = ahead == 0;
    if (in_order && t->held == 0) {
        t->rcv_nxt++; /* nothing held beyond it: its bit would be set and cleared at once */
    } else {
        bit_set(t, psn, mask);
        t->held++;
        while (bit_get(t, t->rcv_nxt, mask)) { /* bits exist only inside the window: bounded */
            bit_clear(t, t->rcv_nxt, mask);
            t->held--;
            t->rcv_nxt++;
        }
    }
    t->rcvd_bytes += ub__pkt_wire_len(p);
    t->unacked++;
    t->last_psn = psn;
    t->trig_at = now;
    t->retx_seen = retx;
    if (p->ecn == 3) { /* CE: echoed by the M flag of the ACK this packet triggers at once */
        pds->st.rx_ce++;
        t->ecn_seen = true;
    }
    caqm_note(t, d); /* a C mark, like CE, is echoed at once */
    note_clear(t, r);
    /* The layer above may ask for this packet's own ACK and attach its response (RUD only:
     * ROD's cumulative ACKs cannot answer a PSN on its own). */
    pds->dlv_t = mode == UB_PDS_RUD ? t : NULL;
    pds->dlv_psn = psn;
    pds->dlv_own = pds->dlv_rsp = false;
    deliver(pds, p, d, t->id, mode, psn, now);
    pds->dlv_t = NULL;
    /* The upcall may not free t (only our own code does), so t is still valid here. */
    if (pds->dlv_own) {
        send_ack_x(t, true);
        return;
    }
    bool gap = !in_order || t->held != 0; /* held counts the bits set: the bitmap is not empty */
    uint32_t every = pds->cfg.ack_every;
    if (every < UB_PDS_LOSSLESS_ACK_EVERY && ub__pds_lossless_peer(&pds->cfg, &t->peer))
        every = UB_PDS_LOSSLESS_ACK_EVERY;
    if ((r->flags & UB_PDS_REQ_F_AR) || t->unacked >= every || gap || retx || t->ecn_seen ||
        t->caqm_c)
        send_ack(t);
    else if (!ub__timer_armed(&t->ack_timer))
        ub__timer_arm(pds->timers, &t->ack_timer, now + pds->cfg.ack_delay_ns);
}

void ub__pds_on_rudi_req(struct ub__pds *pds, struct ub__pkt *p, const struct ub__wire_dgram *d,
                         uint64_t now)
{
    const struct ub__pds_rudi *r = &d->pds.u.rudi;
    /* Idempotent: deliver every copy, answer every copy. */
    deliver(pds, p, d, 0, UB_PDS_RUDI, r->pkt_id, now);
    struct ub__wire_dgram rd;
    memset(&rd, 0, sizeof(rd));
    rd.pds.type = UB_PDS_TYPE_RUDI_RESP;
    rd.pds.u.rudi.type = UB_PDS_TYPE_RUDI_RESP;
    rd.pds.u.rudi.next_hdr = UB_PDS_NH_RSP;
    rd.pds.u.rudi.flags = (uint8_t)(p->ecn == 3 ? UB_PDS_RUDI_F_M : 0);
    rd.pds.u.rudi.pkt_id = r->pkt_id;
    rd.ses_kind = UB_PDS_NH_RSP;
    rd.ses.kind = UB_PDS_NH_RSP;
    rd.ses.u.rsp.list = UB_SES_LIST_EXPECTED;
    rd.ses.u.rsp.opcode = UB_SES_RSP_DEFAULT;
    rd.ses.u.rsp.rc = UB_SES_RC_OK;
    if (ub__pds_ctl_send(pds, &rd, &p->addr, p->path))
        pds->st.acks_tx++;
}

void ub__pds_on_ctrl(struct ub__pds *pds, const struct ub__pkt *p, const struct ub__wire_dgram *d,
                     uint64_t now)
{
    const struct ub__pds_ctrl *k = &d->pds.u.ctrl;
    switch (k->ctl_type) {
    case UB_PDS_CTRL_CLOSE: {
        struct ub__pds_tpdc *t = ub__hmap_get(&pds->tpdc_by_id, k->dpdcid);
        if (t && t->ispdcid == k->spdcid &&
            ub__pds_host_key(&t->peer) == ub__pds_host_key(&p->addr)) {
            if (t->rcv_nxt != k->psn || !bitmap_empty(t))
                return; /* something is still missing: the initiator's RTO repeats the CLOSE */
            t->last_psn = k->psn;
            t->trig_at = now;
            t->rcv_nxt = k->psn + 1; /* the CLOSE takes its PSN */
            t->peer = p->addr;
            send_ack(t);
            pds->st.pdc_closed++;
            ub__pds_tpdc_free(t, true, now);
            return;
        }
        /* Closed already (our ACK was lost) or never known: either way the initiator may go. */
        send_nack(pds, &p->addr, p->path, UB_PDS_NACK_NO_PDC, k->psn, 0, k->spdcid, 0,
                  k->flags & UB_PDS_CTRL_F_RETX);
        return;
    }
    case UB_PDS_CTRL_ACK_REQ: {
        struct ub__pds_tpdc *t = ub__hmap_get(&pds->tpdc_by_id, k->dpdcid);
        if (t && t->ispdcid == k->spdcid) {
            t->trig_at = now;
            send_ack(t);
        }
        return;
    }
    case UB_PDS_CTRL_CLOSE_REQ:
        ub__pds_on_ctrl_close_req(pds, k, now);
        return;
    case UB_PDS_CTRL_CREDIT:
    case UB_PDS_CTRL_CREDIT_REQ:
        ub__pds_rccc_on_ctrl(pds, p, k, now); /* RCCC (pds_rccc.c) */
        return;
    default:
        return; /* NOP, negotiation: nothing to do at this layer yet */
    }
}

/*
 * A trimmed request (UB_PDS_PKT_TRIMMED): a switch cut its payload, its headers survived. It is
 * not delivered and not marked received: the target answers NACK TRIMMED for its PSN (M set if
 * it was also CE-marked), and the initiator resends it at once. If that PSN had already
 * arrived (a trimmed duplicate), an ACK says so instead. Only the PDS header is read: the
 * extension and SES headers may have been cut too.
 */
int ub__pds_on_trimmed(struct ub__pds *pds, const struct ub__pkt *p, uint64_t now)
{
    struct ub__rcur r;
    ub__rcur_init(&r, p->data, p->len);
    struct ub__pds_hdr h;
    if (ub__pds_decode(&h, &r) != 0)
        return 0;
    if (h.type != UB_PDS_TYPE_RUD_REQ && h.type != UB_PDS_TYPE_ROD_REQ &&
        h.type != UB_PDS_TYPE_RUD_CC_REQ && h.type != UB_PDS_TYPE_ROD_CC_REQ)
        return 0; /* anything else trimmed is simply lost */
    const struct ub__pds_req *q = &h.u.req;
    bool retx = q->flags & UB_PDS_REQ_F_RETX;
    uint16_t our_id = 0;
    if (!(q->flags & UB_PDS_REQ_F_SYN)) {
        struct ub__pds_tpdc *t = ub__hmap_get(&pds->tpdc_by_id, q->dpdcid);
        if (t && t->ispdcid == q->spdcid &&
            ub__pds_host_key(&t->peer) == ub__pds_host_key(&p->addr)) {
            our_id = t->id;
            int32_t ahead = ub__seq_diff(q->psn, t->rcv_nxt);
            if (ahead < 0 ||
                (ahead < (int32_t)pds->cfg.mp_range && bit_get(t, q->psn, pds->cfg.mp_range - 1))) {
                pds->st.rx_dup++;
                t->last_psn = q->psn;
                t->trig_at = now;
                t->retx_seen = retx;
                send_ack_x(t, true);
                return 1;
            }
        }
    }
    pds->st.rx_trimmed++;
    if (p->ecn == 3)
        pds->st.rx_ce++;
    send_nack_f(pds, &p->addr, p->path, UB_PDS_NACK_TRIMMED, q->psn, our_id, q->spdcid, 0,
                (uint8_t)((retx ? UB_PDS_NACK_F_RETX : 0) | (p->ecn == 3 ? UB_PDS_NACK_F_M : 0)));
    return 1;
}
