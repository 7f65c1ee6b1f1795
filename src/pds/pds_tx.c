/*
 * The initiator side of PDS: PSN assignment, transmission and spraying,
 * acknowledgement processing, idle close, and re-establishment after the
 * target evicted a context. Loss detection, the retransmission modes and
 * bounded failure are in pds_loss.c.
 */
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "core/clock.h"
#include "core/seq.h"
#include "pds/pds_ipdc.h"

static uint64_t peer_key(const struct ub__addr *a, uint8_t mode)
{
    return ub__addr_hash(a, mode);
}

static void idle_fire(struct ub__timer *t, uint64_t now);

/* ---- congestion context and load balancer -------------------------------------- */

static void pace_fire(struct ub__timer *t, uint64_t now)
{
    struct ub__pds_ccx *x = UB_CONTAINER_OF(t, struct ub__pds_ccx, pace);
    if (!ub__list_empty(&x->pdcs))
        ub__pds_mark_ready(UB_CONTAINER_OF(x->pdcs.next, struct ub__pds_ipdc, cc_link), now);
}

/* Joins (or creates) the congestion context of c's peer host; traffic class 0 for now. */
static int ccx_attach(struct ub__pds_ipdc *c)
{
    struct ub__pds *pds = c->pds;
    ub__list_init(&c->cc_link);
    if (!pds->cc_algo || c->lossless) /* nothing to congest on a lossless carrier */
        return 0;
    uint64_t key = ub__pds_host_key(&c->peer);
    struct ub__pds_ccx *x = ub__hmap_get(&pds->ccx_by_key, key);
    if (!x) {
        x = calloc(1, sizeof(*x));
        if (!x)
            return UB_ENOMEM;
        struct ub__cc_params cp = pds->cc_params;
        if (pds->peer_rtt)
            cp.peer_base_rtt_ns = pds->peer_rtt(pds->peer_rtt_arg, &c->peer);
        int rc = ub__cc_init(&x->cc, pds->cc_algo, &cp);
        if (!rc)
            rc = ub__hmap_put(&pds->ccx_by_key, key, x);
        if (rc) {
            free(x);
            return rc;
        }
        x->pds = pds;
        x->key = key;
        ub__list_init(&x->pdcs);
        ub__timer_init(&x->pace, pace_fire);
    }
    x->refs++;
    ub__list_push_back(&x->pdcs, &c->cc_link);
    c->ccx = x;
    return 0;
}

static void ccx_detach(struct ub__pds_ipdc *c)
{
    struct ub__pds_ccx *x = c->ccx;
    if (!x)
        return;
    ub__list_remove(&c->cc_link);
    c->ccx = NULL;
    if (--x->refs)
        return;
    ub__pds_rccc_ccx_gone(x, c); /* RCCC: the target stops granting to it */
    ub__timer_cancel(c->pds->timers, &x->pace);
    ub__hmap_del(&c->pds->ccx_by_key, x->key);
    free(x);
}

/* cc_allows, once ub__cc_can_send said no: the pacer's timer, RCCC's credit, a lone packet
 * (out of line: rare on the usual path). */
static UB_NOINLINE bool ccx_held(struct ub__pds_ipdc *c, uint64_t bytes, uint64_t inflight,
                                 uint64_t now)
{
    struct ub__pds_ccx *x = c->ccx;
    uint64_t at = ub__cc_next_send_time(&x->cc, bytes, now);
    if (at > now) {
        if (!ub__timer_armed(&x->pace) || x->pace.deadline > at)
            ub__timer_arm(c->pds->timers, &x->pace, at);
        c->pds->st.cc_paced++;
        return false;
    }
    if (x->cc.credit_on && x->cc.credit <= 0) {
        /* RCCC: never ahead of credit, even alone; maybe ask again, and look again then. */
        uint64_t again = ub__pds_rccc_blocked(x, x->inflight == 0, now);
        if (again != UB_TIME_NEVER && (!ub__timer_armed(&x->pace) || x->pace.deadline > again))
            ub__timer_arm(c->pds->timers, &x->pace, again);
        c->pds->st.cc_blocked++;
        return false;
    }
    if (inflight == 0)
        return true;
    c->pds->st.cc_blocked++;
    return false;
}

/*
 * Whether the congestion context lets a packet of `bytes` go now: the window (a packet may
 * always go when nothing is in flight, so a window below one packet cannot deadlock) and the
 * pacer. When only the pacer holds it back, the context's timer is armed for the moment it
 * allows, so output resumes on time and the engine's next deadline says when. Without a
 * congestion context (a lossless peer, cc "none") only the PDC's window counts.
 *
 * An RTO's lone repair goes whatever the window, as TCP's retransmission after an RTO does:
 * the RTO has just taken every byte in flight off the window (NSCC: down to one MTU) while
 * the packets not resent still count as in flight, so the repair would otherwise wait for
 * the next, backed-off RTO.
 */
static inline bool cc_allows(struct ub__pds_ipdc *c, uint64_t bytes, bool lone, uint64_t now)
{
    struct ub__pds_ccx *x = c->ccx;
    if (!x)
        return true;
    uint64_t inflight = lone ? 0 : x->inflight;
    ub__cc_on_tick(&x->cc, now); /* lazy rate timers (DCQCN): exact whenever called */
    return ub__cc_can_send(&x->cc, inflight, bytes, now) || ccx_held(c, bytes, inflight, now);
}

static uint16_t alloc_id(struct ub__pds *pds)
{
    for (;;) {
        uint16_t id = pds->next_ipdc_id++;
        if (id != 0 && !ub__hmap_get(&pds->ipdc_by_id, id))
            return id;
    }
}

/* Resets the PSN space: a fresh start PSN, no slot in use, SYN until the target answers. */
static void start_fresh(struct ub__pds_ipdc *c)
{
    struct ub__pds *pds = c->pds;
    c->state = IPDC_SYN;
    c->tid = 0;
    c->start_psn = (uint32_t)ub__rng_next(&pds->rng);
    if (pds->cfg.start_psn)
        c->start_psn = pds->cfg.start_psn;
    c->una = c->nxt = c->start_psn;
    c->mpr = pds->cfg.mp_range;
    c->nlost = 0;
    c->lost_scan = c->una;
    c->ooo_scan = c->ooo_hi = c->una;
    c->acked_order = 0;
    c->ooo_order = UINT64_MAX;
    for (uint32_t i = 0; i < pds->cfg.num_paths; i++) {
        c->paths[i].head = c->paths[i].tail = UB_PDS_NOSLOT;
        c->paths[i].dirty = false;
    }
    c->ndirty = 0;
    c->high_acked = c->una;
    c->any_acked = false;
    c->retries = 0;
    c->probed = false;
    c->undo_armed = c->undo_seen = c->undo_quiet = c->frto = c->lone_go = false;
    c->gbn_win = pds->cfg.window;
    memset(c->slots, 0, (c->wmask + 1) * sizeof(*c->slots));
}

struct ub__pds_ipdc *ub__pds_ipdc_find(const struct ub__pds *pds, const struct ub__addr *dst,
                                       uint8_t mode, bool *collision)
{
    struct ub__pds_ipdc *c = ub__pds_last_ipdc(pds, dst, mode);
    if (c)
        return c;
    c = ub__hmap_get(&pds->ipdc_by_peer, peer_key(dst, mode));
    *collision = c && !ub__addr_eq(&c->peer, dst);
    return *collision ? NULL : c;
}

/* Which attached payloads to flatten: a request's (its cookie), or, lo set, those lying in
 * [lo, lo + len) (a segment's: each was taken from one, so its start decides). */
struct zc_match {
    uint64_t cookie;
    const void *lo;
    uint64_t len;
};

static uint32_t flatten_if(struct ub__pkt *p, const struct zc_match *m)
{
    if (!p || !p->xlen)
        return 0;
    uintptr_t a = (uintptr_t)p->xdata, b = (uintptr_t)m->lo;
    if (m->lo ? a < b || a - b >= m->len : p->tag != m->cookie)
        return 0;
    ub__pkt_flatten(p);
    return 1;
}

static uint32_t flatten_list(struct ub__pkt *p, const struct zc_match *m)
{
    uint32_t n = 0;
    for (; p; p = p->next)
        n += flatten_if(p, m);
    return n;
}

/* What c holds: kept for retransmission (its window) and queued. */
static uint32_t flatten_pdc(struct ub__pds_ipdc *c, const struct zc_match *m)
{
    uint32_t n = 0;
    for (uint32_t psn = c->una; psn != c->nxt; psn++)
        n += flatten_if(slot_of(c, psn)->pkt, m);
    return n + flatten_list(c->q_head, m);
}

uint32_t ub__pds_flatten_range(struct ub__pds *pds, const void *lo, uint64_t len)
{
    struct zc_match m = {.lo = lo, .len = len};
    uint32_t n = flatten_list(pds->link_head, &m);
    uint64_t k;
    void *v;
    for (uint32_t i = 0; (i = ub__hmap_next(&pds->ipdc_by_id, i, &k, &v)) != 0;)
        n += flatten_pdc(v, &m);
    pds->st.zc_flattened += n;
    return n;
}

uint32_t ub__pds_flatten(struct ub__pds *pds, const struct ub__addr *dst, uint8_t mode,
                         uint64_t cookie)
{
    struct zc_match m = {.cookie = cookie};
    uint32_t n = 0;
    if (mode <= UB_PDS_ROD && ub__pds_link_peer(&pds->cfg, dst)) {
        n = flatten_list(pds->link_head, &m);
    } else {
        bool collision;
        struct ub__pds_ipdc *c = ub__pds_ipdc_find(pds, dst, mode, &collision);
        if (c) /* none, or being torn down: its packets are freed without being read */
            n = flatten_pdc(c, &m);
    }
    pds->st.zc_flattened += n;
    return n;
}

struct ub__pds_ipdc *ub__pds_ipdc_get(struct ub__pds *pds, const struct ub__addr *dst, uint8_t mode,
                                      uint64_t now, int *err)
{
    bool collision;
    struct ub__pds_ipdc *c = ub__pds_ipdc_find(pds, dst, mode, &collision);
    if (c) {
        pds->last_ipdc = c;
        return c;
    }
    if (collision) {
        *err = UB_EEXIST; /* a 64-bit hash collision between two peers: refuse, never mix */
        return NULL;
    }
    if (pds->ipdc_by_id.count >= pds->cfg.max_pdcs) {
        pds->st.table_full++;
        *err = UB_EFULL;
        return NULL;
    }
    uint32_t wcap = 1;
    while (wcap < pds->cfg.window)
        wcap <<= 1;
    c = calloc(1, sizeof(*c));
    struct ub__pds_slot *slots = calloc(wcap, sizeof(*slots));
    struct ub__pds_path *paths = calloc(pds->cfg.num_paths, sizeof(*paths));
    uint16_t *dirty = calloc(pds->cfg.num_paths, sizeof(*dirty));
    uint32_t *cand = calloc(wcap, sizeof(*cand));
    if (!c || !slots || !paths || !dirty || !cand) {
        free(c);
        free(slots);
        free(paths);
        free(dirty);
        free(cand);
        *err = UB_ENOMEM;
        return NULL;
    }
    c->pds = pds;
    c->peer = *dst;
    c->key = peer_key(dst, mode);
    c->mode = mode;
    c->retx_mode = (uint8_t)pds->cfg.retx[mode];
    c->slots = slots;
    c->wmask = wcap - 1;
    c->paths = paths;
    c->dirty = dirty;
    c->cand = cand;
    c->lossless = ub__pds_lossless_peer(&pds->cfg, dst);
    c->rto_ns = c->lossless ? lossless_rto(&pds->cfg) : pds->cfg.rto_init_ns;
    c->last_progress = c->acked_at = now;
    /* ROD stays on one path (random); the others spray as the balancer decides. */
    c->next_path = (uint16_t)ub__rng_below(&pds->rng, pds->cfg.num_paths);
    struct ub__lb_params lp = {
        .ev_count = (uint16_t)pds->cfg.num_paths,
        .single_ev = c->next_path,
        .trimming = pds->cfg.trimming,
        .seed = ub__rng_next(&pds->rng),
        /* One path (or ROD's one): nothing to choose, no burst to keep. */
        .burst = pds->cfg.num_paths > 1 && mode != UB_PDS_ROD ? pds->cfg.spray_burst : 0,
    };
    if ((*err = ub__lb_init(&c->lb, mode == UB_PDS_ROD ? &ub__lb_single : pds->lb_algo, &lp)) ||
        (*err = ccx_attach(c)) != 0) {
        free(c->slots);
        free(c->paths);
        free(c->dirty);
        free(c->cand);
        free(c);
        return NULL;
    }
    ub__list_init(&c->ready);
    ub__timer_init(&c->rto, ub__pds_rto_fire);
    c->rto_due = UB_TIME_NEVER;
    ub__timer_init(&c->idle, idle_fire);
    c->id = alloc_id(pds);
    start_fresh(c);
    if ((*err = ub__hmap_put(&pds->ipdc_by_peer, c->key, c)) != 0 ||
        (*err = ub__hmap_put(&pds->ipdc_by_id, c->id, c)) != 0) {
        ub__hmap_del(&pds->ipdc_by_peer, c->key);
        ccx_detach(c);
        free(c->slots);
        free(c->paths);
        free(c->dirty);
        free(c->cand);
        free(c);
        return NULL;
    }
    pds->st.pdc_opened++;
    ub__timer_arm(pds->timers, &c->idle, now + pds->cfg.idle_close_ns);
    pds->last_ipdc = c;
    return c;
}

static void fail_pkt(struct ub__pds *pds, struct ub__pkt *p, int err, uint64_t now)
{
    pds->st.tx_failed++;
    uint64_t cookie = p->tag;
    ub__pkt_free(p);
    if (pds->up && pds->up->failed)
        pds->up->failed(pds->up_arg, cookie, err, now);
}

/*
 * c stops naming the device it knew, if it did: another PDC that knows the same device takes
 * its place (PDCs close rarely, so a scan is fine), else the device has no twin for a while.
 */
static void forget_dev(struct ub__pds_ipdc *c)
{
    struct ub__pds *pds = c->pds;
    uint64_t dk = ub__pds_dev_key(&c->peer, c->peer_inc);
    if (!c->peer_inc_known || ub__hmap_get(&pds->ipdc_by_dev, dk) != c)
        return;
    ub__hmap_del(&pds->ipdc_by_dev, dk);
    pds->dev_gen++;
    uint64_t k;
    void *v;
    for (uint32_t i = 0; (i = ub__hmap_next(&pds->ipdc_by_id, i, &k, &v)) != 0;) {
        struct ub__pds_ipdc *o = v;
        if (o != c && o->peer_inc_known && ub__pds_dev_key(&o->peer, o->peer_inc) == dk) {
            (void)ub__hmap_put(&pds->ipdc_by_dev, dk, o);
            return;
        }
    }
}

/* c names its target's device from now on, unless another PDC to that device does already. */
void ub__pds_learn_dev(struct ub__pds_ipdc *c, uint32_t incarnation)
{
    struct ub__pds *pds = c->pds;
    forget_dev(c); /* the peer restarted under the same address */
    c->peer_inc_known = true;
    c->peer_inc = incarnation;
    (void)ub__hmap_put(&pds->ipdc_by_dev, ub__pds_dev_key(&c->peer, incarnation), c);
    pds->dev_gen++;
}

void ub__pds_ipdc_free(struct ub__pds_ipdc *c, int err, uint64_t now)
{
    struct ub__pds *pds = c->pds;
    ub__timer_cancel(pds->timers, &c->rto);
    ub__timer_cancel(pds->timers, &c->idle);
    if (c->on_ready)
        ub__list_remove(&c->ready);
    forget_dev(c);
    if (ub__hmap_get(&pds->ipdc_by_peer, c->key) == c)
        ub__hmap_del(&pds->ipdc_by_peer, c->key);
    if (pds->last_ipdc == c)
        pds->last_ipdc = NULL;
    ub__hmap_del(&pds->ipdc_by_id, c->id);
    /* Unlinked first, so an upcall that sends again opens a new context. */
    for (uint32_t psn = c->una; psn != c->nxt; psn++) {
        struct ub__pds_slot *s = slot_of(c, psn);
        uncount(c, s);
        if (s->pkt)
            fail_pkt(pds, s->pkt, err, now);
        s->pkt = NULL;
    }
    struct ub__pds_ccx *x = c->ccx;
    bool others = x && x->refs > 1;
    ccx_detach(c);
    if (others) /* the window the others share may have opened */
        ub__pds_mark_ready(UB_CONTAINER_OF(x->pdcs.next, struct ub__pds_ipdc, cc_link), now);
    struct ub__pkt *p = c->q_head;
    while (p) {
        struct ub__pkt *nx = p->next;
        fail_pkt(pds, p, err, now);
        p = nx;
    }
    free(c->slots);
    free(c->paths);
    free(c->dirty);
    free(c->cand);
    free(c);
}

static size_t req_header_size(uint8_t mode);

/* Whether c may give a new packet its PSN now, the congestion context aside: not closing,
 * room in the window, and before the target answers, within a SYN's 12-bit offset. */
static bool window_open(const struct ub__pds_ipdc *c)
{
    return c->state != IPDC_CLOSING && inflight(c) < send_limit(c) &&
           !(c->state == IPDC_SYN && c->nxt - c->start_psn >= UB_PDS_SYN_SPAN);
}

bool ub__pds_ipdc_can_send(struct ub__pds_ipdc *c, uint64_t now)
{
    if (c->nlost) { /* a repair waits, unless go-back-N's window keeps it back */
        if (gbn(c) && !ub__seq_lt(c->lost_scan, c->una + send_limit(c)))
            return false;
        uint32_t psn;
        if (!next_lost(c, repair_end(c), &psn))
            return false;
        return cc_allows(c, ub__pkt_wire_len(slot_of(c, psn)->pkt), c->lone_go, now);
    }
    if (!c->qlen || !window_open(c))
        return false;
    return cc_allows(c, ub__pkt_wire_len(c->q_head) + req_header_size(c->mode), false, now);
}

/* The PDS header of a data packet, as it goes out this time, written at b. */
static int req_header(const struct ub__pds_ipdc *c, uint32_t psn, bool retx, bool ar, uint8_t *b)
{
    if (c->mode == UB_PDS_RUDI) {
        struct ub__pds_rudi h;
        memset(&h, 0, sizeof(h));
        h.type = UB_PDS_TYPE_RUDI_REQ;
        h.next_hdr = UB_PDS_NH_SOFTUB_EXT;
        h.flags = retx ? UB_PDS_RUDI_F_RETX : 0;
        /*
         * The response echoes pkt_id and nothing else: it names our PDC (high half) and the
         * PSN's low 16 bits (the window is at most 4096 PSNs). Matching by the responder's
         * address alone fails when it answers from another port (a UDP path).
         */
        h.pkt_id = (uint32_t)c->id << 16 | (psn & 0xffff);
        struct ub__wcur w;
        ub__wcur_init(&w, b, UB_PDS_RUDI_SIZE);
        return ub__pds_rudi_encode(&h, &w);
    }
    /* Written directly: every field comes from our own state, valid by construction but for a
     * SYN's psn_offset, which ub__pds_ipdc_can_send keeps below UB_PDS_SYN_SPAN. */
    uint8_t flags = (uint8_t)((retx ? UB_PDS_REQ_F_RETX : 0) | (ar ? UB_PDS_REQ_F_AR : 0));
    int32_t clear = ub__seq_diff(c->una, psn); /* clear_psn = una: everything below is done */
    uint16_t slot = c->tid;
    if (c->state == IPDC_SYN) {
        flags |= UB_PDS_REQ_F_SYN;
        if (psn - c->start_psn > UB_PDS_PSN_OFFSET_MAX)
            return UB_EOVERFLOW;
        slot = (uint16_t)(psn - c->start_psn);
    }
    ub__pds_req_put(b, c->mode == UB_PDS_ROD ? UB_PDS_TYPE_ROD_REQ : UB_PDS_TYPE_RUD_REQ,
                    UB_PDS_NH_SOFTUB_EXT, flags, (int16_t)(clear < INT16_MIN ? INT16_MIN : clear),
                    psn, c->id, slot);
    return 0;
}

static size_t req_header_size(uint8_t mode)
{
    return mode == UB_PDS_RUDI ? UB_PDS_RUDI_SIZE : UB_PDS_REQ_SIZE;
}

/* The balancer's EV, or a new packet's burst's (then s->in_burst); a retransmission avoids
 * the path its last copy took when it can. */
static uint16_t pick_path(struct ub__pds_ipdc *c, struct ub__pds_slot *s, bool retx, uint64_t now)
{
    if (!retx) {
        if (!c->lb.p.burst) /* every packet chooses (s->in_burst is 0 since emit_new) */
            return ub__lb_next_ev(&c->lb, now);
        /* In flight before it: the PSNs sent and not cumulatively acknowledged, this size. */
        uint32_t len = ub__pkt_wire_len(s->pkt);
        bool chosen;
        uint16_t ev =
            ub__lb_next_ev_new(&c->lb, len, (uint64_t)(c->nxt - 1 - c->una) * len, &chosen, now);
        s->in_burst = !chosen;
        return ev;
    }
    s->in_burst = 0;
    uint16_t ev = ub__lb_next_ev(&c->lb, now);
    if (ev == s->path && c->lb.algo != &ub__lb_single && c->pds->cfg.num_paths > 1)
        ev = ub__lb_next_ev(&c->lb, now); /* one more draw: O(1), the balancer's own choice */
    return ev;
}

/*
 * C-AQM: each (re)transmission asks for more (I) and states the sender's current rate (hint) in
 * the extension header right after the PDS header, as ub__cc_caqm_tx_fields says; C is cleared
 * (it is the path's to set). Patched in place: the caller owns the bytes (refcnt 1).
 */
static void caqm_stamp(const struct ub__pds_ipdc *c, struct ub__pkt *pkt)
{
    if (!c->ccx || c->ccx->cc.algo != &ub__cc_caqm)
        return;
    size_t off = req_header_size(c->mode);
    if (pkt->len < off + UB_EXT_SIZE)
        return;
    struct ub__ext e = {0};
    ub__cc_caqm_tx_fields(&c->ccx->cc, &e);
    uint8_t *x = pkt->data + off;
    x[2] = (uint8_t)((x[2] & ~(UB_EXT_B2_I | UB_EXT_B2_C)) | (e.aqm_increase ? UB_EXT_B2_I : 0));
    x[4] = (uint8_t)(e.aqm_hint >> 8);
    x[5] = (uint8_t)e.aqm_hint;
}

/* Hands slot's packet out (a reference for the device); the header is (re)written first. */
static struct ub__pkt *transmit(struct ub__pds_ipdc *c, uint32_t psn, bool retx, uint64_t now)
{
    struct ub__pds *pds = c->pds;
    struct ub__pds_slot *s = slot_of(c, psn);
    if (s->pkt->refcnt > 1) {
        /* An earlier copy is still on its way out: never edit bytes someone else holds. */
        struct ub__pkt *copy = ub__pkt_clone(s->pkt);
        if (!copy) {
            pds->st.nobufs++;
            return NULL;
        }
        ub__pkt_free(s->pkt);
        s->pkt = copy;
    }
    bool ar = s->ack_req || s->why == WHY_PROBE || c->state == IPDC_SYN;
    if (req_header(c, psn, retx, ar, s->pkt->data) != 0)
        return NULL; /* cannot happen: the fields come from our own state */
    caqm_stamp(c, s->pkt);
    s->path = pick_path(c, s, retx, now);
    s->sent_ns = now;
    s->txseq = ++c->txseq;
    s->pkt->order = ++pds->tx_order;
    s->pkt->path = s->path;
    s->pkt->addr = c->peer;
    s->pkt->ecn = 2; /* ECT(0): congestion can be signalled, not dropped */
    ub__pkt_ref(s->pkt);
    if (c->ccx) { /* every transmission is charged: window, credit and pacer */
        c->ccx->inflight += ub__pkt_wire_len(s->pkt);
        ub__cc_on_send(&c->ccx->cc, ub__pkt_wire_len(s->pkt), now);
    }
    if (retx) {
        s->retx++;
        pds->st.retx_pkts++;
        switch (s->why) {
        case WHY_RTO:
            pds->st.retx_rto++;
            break;
        case WHY_NACK:
            pds->st.retx_nack++;
            break;
        case WHY_PROBE:
            pds->st.retx_probe++;
            pds->st.probes_sent++;
            break;
        default:
            pds->st.retx_fast++;
            break;
        }
        s->why = WHY_NONE;
    } else {
        pds->st.tx_pkts++;
        pds->st.tx_bytes += ub__pkt_wire_len(s->pkt);
        if (c->ccx && c->ccx->cc.credit_on) /* RCCC: demand shrinks */
            ub__pds_rccc_sent(c, ub__pkt_wire_len(s->pkt));
    }
    return s->pkt;
}

/* The first packet in flight after none: the loss clock starts now, not at the last progress
 * of an earlier exchange (which would leave no room for a tail-loss probe before the RTO). */
static void arm_from_idle(struct ub__pds_ipdc *c, uint64_t now)
{
    c->last_progress = now;
    ub__pds_arm_rto(c, now);
}

/*
 * A new packet (the headers above PDS in place, PDS's pushed) gets the next PSN and is
 * transmitted: the reference for the device, or NULL when it could not go, in which case
 * it stays as a repair. last: nothing queued after it.
 */
static struct ub__pkt *emit_new(struct ub__pds_ipdc *c, struct ub__pkt *p, bool last, uint64_t now)
{
    p->next = NULL;
    uint32_t psn = c->nxt++;
    struct ub__pds_slot *s = slot_of(c, psn);
    memset(s, 0, sizeof(*s));
    s->pkt = p;
    s->state = SLOT_INFLIGHT;
    /* The last queued packet asks for an ACK, to learn of a loss early. A lossless
     * carrier loses nothing: the target's own pace (ack_every, ack_delay) frees the window
     * and its ACK leaves the latency path. */
    s->ack_req = !c->lossless && ((p->flags & UB_PDS_PKT_ACK_REQ) || last);
    s->own = (p->flags & UB_PDS_PKT_OWN) && !gbn(c);
    s->first_ns = now;
    struct ub__pkt *out = transmit(c, psn, false, now);
    if (!out) { /* keep it; it goes out as a repair */
        s->state = SLOT_LOST;
        s->why = WHY_NONE;
        c->nlost++;
        return NULL;
    }
    path_link(c, psn);
    return out;
}

uint32_t ub__pds_ipdc_emit(struct ub__pds_ipdc *c, struct ub__pkt **pkts, uint32_t max,
                           uint64_t now)
{
    uint32_t n = 0;
    /* Repairs before new data (go-back-N: only inside its window), under the same window. */
    uint32_t end = repair_end(c);
    uint32_t psn;
    while (n < max && next_lost(c, end, &psn)) {
        struct ub__pds_slot *s = slot_of(c, psn);
        if (!cc_allows(c, ub__pkt_wire_len(s->pkt), c->lone_go, now))
            break;
        struct ub__pkt *p = transmit(c, psn, true, now);
        if (!p)
            break;
        c->lone_go = false;
        s->state = SLOT_INFLIGHT;
        c->nlost--;
        path_link(c, psn);
        ub__pds_ooo_rescan(c, psn); /* in flight again */
        pkts[n++] = p;
    }
    while (n < max && c->q_head && !c->nlost && ub__pds_ipdc_can_send(c, now)) {
        struct ub__pkt *p = c->q_head;
        if (!ub__pkt_push(p, (uint32_t)req_header_size(c->mode))) {
            c->pds->st.nobufs++;
            break;
        }
        c->q_head = p->next;
        if (!c->q_head)
            c->q_tail = NULL;
        c->qlen--;
        struct ub__pkt *out = emit_new(c, p, !c->q_head, now);
        if (!out)
            break;
        pkts[n++] = out;
    }
    if (n && c->rto_due == UB_TIME_NEVER) /* else it times the oldest packet in flight */
        arm_from_idle(c, now);
    return n;
}

int ub__pds_ipdc_emit_one(struct ub__pds_ipdc *c, struct ub__pkt *p, struct ub__pkt **out,
                          uint64_t now)
{
    /* ub__pds_ipdc_can_send for p alone in the queue; the congestion context last, as there. */
    size_t hl = req_header_size(c->mode);
    if (!window_open(c))
        return 0;
    if (!cc_allows(c, ub__pkt_wire_len(p) + hl, false, now))
        return -1;
    if (!ub__pkt_push(p, (uint32_t)hl)) {
        c->pds->st.nobufs++;
        return 0;
    }
    *out = emit_new(c, p, true, now);
    if (*out && c->rto_due == UB_TIME_NEVER)
        arm_from_idle(c, now);
    return 1;
}

/*
 * The target has psn: complete it once. Returns true if this was news, adding its bytes to
 * *acked and telling the balancer its path was good (ecn: the ACK's M flag, which speaks for the
 * PSN that triggered the ACK only: a CE mark makes the target ACK at once).
 */
static void complete(struct ub__pds_ipdc *c, struct ub__pds_slot *s, uint64_t now)
{
    struct ub__pds *pds = c->pds;
    s->state = SLOT_ACKED;
    uint64_t cookie = s->pkt->tag;
    ub__pkt_free(s->pkt);
    s->pkt = NULL;
    if (pds->up && pds->up->acked)
        pds->up->acked(pds->up_arg, cookie, now);
}

/*
 * The target has psn. own: the ACK says OWN and psn is not its trigger: a packet with K
 * (s->own) is then only covered (out of flight, kept): its own ACK, which may carry its response,
 * completes it; if that never comes it goes again (out-of-order count, probe, RTO) and the
 * target answers the duplicate with its cached response. The trigger of an OWN ACK completes a
 * covered slot.
 */
static bool ack_one(struct ub__pds_ipdc *c, uint32_t psn, bool ecn, uint64_t *acked, uint64_t now,
                    bool own)
{
    struct ub__pds *pds = c->pds;
    struct ub__pds_slot *s = slot_of(c, psn);
    if (s->state == SLOT_COVERED) {
        if (own)
            return false;
        complete(c, s, now);
        return true;
    }
    if (s->state != SLOT_INFLIGHT && s->state != SLOT_LOST)
        return false;
    if (own && s->cov)
        return false; /* known to be there: it waits to go again for its own ACK */
    if (s->state == SLOT_LOST) {
        c->nlost--;
        /* Declared lost by an RTO and not resent since: a copy from before the RTO arrived. */
        if (s->why == WHY_RTO)
            c->undo_seen = true;
    } else {
        path_unlink(c, s);
    }
    uncount(c, s);
    *acked += ub__pkt_wire_len(s->pkt);
    ub__lb_on_ack(&c->lb, s->path, ecn, !s->in_burst, now);
    s->state = SLOT_ACKED;
    if (own && s->own) {
        s->state = SLOT_COVERED;
        s->cov = 1;
        pds->st.own_covered++;
        ub__pds_ooo_rescan(c, psn); /* the out-of-order count looks at it again */
    }
    if (c->gbn_win < pds->cfg.window)
        c->gbn_win++;
    /* The per-path order's evidence: only a packet sent once says which copy arrived. One
     * resent after a spurious RTO is acknowledged by its original as often as not, and its
     * resend's txseq would declare every copy sent before it, still on its way, lost. */
    struct ub__pds_path *pa = &c->paths[s->path];
    if (s->retx == 0) {
        if (s->pkt->order > c->acked_order)
            c->acked_order = s->pkt->order;
        if (s->txseq > pa->acked_txseq) {
            pa->acked_txseq = s->txseq;
            if (!pa->dirty) {
                pa->dirty = true;
                c->dirty[c->ndirty++] = s->path;
            }
        }
    }
    if (!c->any_acked || ub__seq_lt(c->high_acked, psn))
        c->high_acked = psn;
    c->any_acked = true;
    if (s->state == SLOT_ACKED)
        complete(c, s, now);
    return true;
}

/* Slides una over acknowledged slots. */
static void advance_una(struct ub__pds_ipdc *c)
{
    while (c->una != c->nxt && slot_of(c, c->una)->state == SLOT_ACKED) {
        slot_of(c, c->una)->state = SLOT_FREE;
        c->una++;
    }
    if (ub__seq_lt(c->lost_scan, c->una))
        c->lost_scan = c->una;
    if (ub__seq_lt(c->ooo_scan, c->una))
        c->ooo_scan = c->una;
}

static void progress(struct ub__pds_ipdc *c, uint64_t now)
{
    /*
     * New data acknowledged: the backoff ends (as in Linux, not RFC 6298's wait for a fresh
     * sample): after an RTO nearly every packet is a retransmission, so Karn's rule would
     * leave the backed-off RTO in place for a long time under heavy loss.
     */
    if (c->retries && c->srtt)
        ub__pds_rto_from_rtt(c);
    c->retries = 0;
    c->probed = false;
    c->last_progress = c->acked_at = now;
    ub__pds_arm_rto(c, now);
}

void ub__pds_finish_close(struct ub__pds_ipdc *c, uint64_t now)
{
    c->pds->st.pdc_closed++;
    ub__pds_ipdc_free(c, UB_ECLOSED, now);
}

/*
 * An ACK_CC of cc_type CAQM (softub's): the target's echo of our requests' C-AQM fields as the
 * switches left them, plus NSCC's service time and destination penalty.
 */
static void caqm_ack(struct ub__cc_ack *ev, const struct ub__pds_caqm_state *s)
{
    ev->has_nscc = true;
    ev->rcv_cwnd_pend = s->rcv_cwnd_pend;
    ev->service_ns = (uint32_t)s->service_time * UB_PDS_SERVICE_TIME_NS;
    ev->caqm_c = s->c;
    ev->caqm_i = s->i && !s->c;
    ev->caqm_hint = s->c && s->hint ? ub__caqm_hint_decode(s->hint) : 0;
}

void ub__pds_on_ack(struct ub__pds *pds, const struct ub__pkt *p, const struct ub__wire_dgram *d,
                    uint64_t now)
{
    const struct ub__pds_ack *a = &d->pds.u.ack;
    if (a->cc_type == UB_PDS_CC_RCCC) /* RCCC: a credit rides on ACK_CC, whatever the PDC */
        ub__pds_rccc_on_ack(pds, p, a, now);
    /* Mostly the PDC the last send went to (in ipdc_by_id under its id while it is last_ipdc). */
    struct ub__pds_ipdc *c = pds->last_ipdc;
    if (!c || c->id != a->dpdcid)
        c = ub__hmap_get(&pds->ipdc_by_id, a->dpdcid);
    if (!c || c->mode == UB_PDS_RUDI) {
        pds->st.rx_no_pdc++;
        return;
    }
    if (c->state == IPDC_SYN) {
        c->tid = a->spdcid;
        c->state = IPDC_EST;
    } else if (c->tid != a->spdcid) {
        pds->st.rx_stale++; /* from another context of the target's, or an earlier one */
        return;
    }
    uint32_t cack = a->cack_psn;
    if (c->state == IPDC_CLOSING) {
        if (cack == c->close_psn)
            ub__pds_finish_close(c, now);
        return;
    }
    if ((a->cc_type == UB_PDS_CC_NSCC || a->cc_type == UB_PDS_CC_CAQM) &&
        a->mpr) /* ACK_CC advertises MP_RANGE */
        c->mpr = (uint32_t)a->mpr * UB_PDS_MPR_UNIT;
    /* An RTT sample from the PSN that triggered the ACK, if it went out only once (Karn). */
    uint32_t ack_psn = ub__seq_add(cack, a->ack_psn_offset);
    uint64_t rtt = 0;
    /* Whether the trigger is still outstanding: only then is a response riding on this ACK
     * news (below). */
    bool trig_open = false;
    if (ub__seq_le(c->una, ack_psn) && ub__seq_lt(ack_psn, c->nxt)) {
        const struct ub__pds_slot *s = slot_of(c, ack_psn);
        trig_open = s->state == SLOT_INFLIGHT || s->state == SLOT_LOST || s->state == SLOT_COVERED;
        if (s->state == SLOT_INFLIGHT && s->retx == 0 && !(a->flags & UB_PDS_ACK_F_RETX)) {
            rtt = now - s->first_ns;
            ub__pds_rtt_sample(c, rtt);
        } else if (s->state == SLOT_INFLIGHT && s->retx == 1 && (a->flags & UB_PDS_ACK_F_RETX) &&
                   s->pkt->order > c->acked_order) {
            /* A resent copy's own ACK (a probe's, say): everything that left before it and is
             * far enough behind is lost. Only with one resend: with more, the ACK may answer
             * an earlier one. */
            c->acked_order = s->pkt->order;
        }
    }
    /* A lone repair's verdict: this ACK was provoked by the original of a packet outstanding
     * when the repair went out. */
    bool frto_orig = c->frto && !(a->flags & UB_PDS_ACK_F_RETX) && ub__seq_le(c->una, ack_psn) &&
                     ub__seq_lt(ack_psn, c->frto_nxt);
    /* Provoked by an original copy of a packet outstanding at the RTO: it was not lost. */
    if (c->undo_armed && !(a->flags & UB_PDS_ACK_F_RETX) && ub__seq_le(c->una, ack_psn) &&
        ub__seq_lt(ack_psn, c->undo_nxt)) {
        const struct ub__pds_slot *s = slot_of(c, ack_psn);
        if (s->state == SLOT_INFLIGHT || s->state == SLOT_LOST)
            c->undo_seen = true;
    }
    bool ecn = (a->flags & UB_PDS_ACK_F_M) != 0;
    if (ecn)
        pds->st.acks_ecn_rx++;
    bool news = false;
    uint64_t acked = 0;
    /* OWN: the target answers packets with K on their own ACKs (docs/pds.md), so this one
     * completes such a packet only if it is its trigger (a probe answer names none). */
    bool own = (a->flags & UB_PDS_ACK_F_OWN) != 0;
    c->own_seen |= own;
    uint32_t trig = (a->flags & UB_PDS_ACK_F_P) ? c->nxt : ack_psn;
    /* Cumulative: every PSN up to cack. Ignore anything outside what we sent. */
    bool cum = ub__seq_le(c->una, cack) && ub__seq_lt(cack, c->nxt);
    if (cum) {
        for (uint32_t psn = c->una; psn != cack + 1; psn++)
            news |= ack_one(c, psn, ecn && psn == ack_psn, &acked, now, own && psn != trig);
    }
    /* Selective (go-back-N ignores it by definition): the triggering PSN and the bitmap. The
     * trigger at or below cack had the same ack_one above; a second one would change nothing. */
    if (!gbn(c)) {
        if (ub__seq_le(c->una, ack_psn) && ub__seq_lt(ack_psn, c->nxt) &&
            !(cum && ub__seq_le(ack_psn, cack)))
            news |= ack_one(c, ack_psn, ecn, &acked, now, own && ack_psn != trig);
        if (a->type == UB_PDS_TYPE_ACK_CC) {
            uint32_t base = ub__seq_add(cack, a->sack_psn_offset);
            for (uint64_t bm = a->sack_bitmap; bm; bm &= bm - 1) {
                uint32_t psn = base + (uint32_t)__builtin_ctzll(bm);
                if (ub__seq_le(c->una, psn) && ub__seq_lt(psn, c->nxt))
                    news |= ack_one(c, psn, ecn && psn == ack_psn, &acked, now, own && psn != trig);
            }
        }
    }
    advance_una(c);
    if (c->frto && news)
        ub__pds_frto_check(c, frto_orig, now);
    ub__pds_undo_check(c, !(a->flags & UB_PDS_ACK_F_RETX), now);
    if (news)
        progress(c, now);
    /* One congestion event per ACK: the bytes it newly acknowledged, its RTT sample, its mark. */
    bool caqm = a->type == UB_PDS_TYPE_ACK_CC && a->cc_type == UB_PDS_CC_CAQM;
    if (c->ccx && (acked || ecn || (caqm && a->cc.caqm.c))) {
        bool nscc = a->type == UB_PDS_TYPE_ACK_CC && a->cc_type == UB_PDS_CC_NSCC;
        struct ub__cc_ack ev = {
            .acked_bytes = acked,
            .inflight = c->ccx->inflight,
            .rtt_ns = rtt,
            .ecn = ecn,
            .has_nscc = nscc,
            .rcv_cwnd_pend = nscc ? a->cc.nscc.rcv_cwnd_pend : 0,
            .service_ns = nscc ? (uint32_t)a->cc.nscc.service_time * UB_PDS_SERVICE_TIME_NS : 0,
        };
        if (caqm)
            caqm_ack(&ev, &a->cc.caqm);
        ub__cc_on_ack(&c->ccx->cc, &ev, now);
    }
    ub__pds_after_ack_losses(c, true, ack_psn, (a->flags & UB_PDS_ACK_F_RETX) != 0, now);
    ub__pds_mark_ready(c, now);
    if (d->ses_kind != UB_PDS_NH_NONE && d->has_ext) {
        /* A repeat (the target answering a duplicate of a packet already completed) carries
         * the response delivered with the first: up again, a stale RNR would count against
         * the request's next attempt. */
        pds->st.acks_rsp_rx++;
        if (!trig_open) {
            pds->st.acks_rsp_stale++;
            return;
        }
        if (UB_UNLIKELY(!c->peer_inc_known || c->peer_inc != d->ext.incarnation))
            ub__pds_learn_dev(c, d->ext.incarnation);
        /* A response rode on it: up as if it had come alone, after the ACK it answers. */
        struct ub__pds_rx rx = {
            .src = &p->addr,
            .incarnation = d->ext.incarnation,
            .pdc = c->id,
            .mode = UB_PDS_RUD,
            .path = p->path,
            .ecn = p->ecn,
            .psn = ack_psn,
            .hdr = d,
            .payload = p->data + d->payload_off,
            .payload_len = (uint32_t)d->payload_len,
        };
        if (pds->up && pds->up->deliver)
            pds->up->deliver(pds->up_arg, &rx, now);
    }
}

/* The target evicted our context at end_psn: what it has, it has; the rest goes on a new one. */
void ub__pds_reestablish(struct ub__pds_ipdc *c, uint32_t end_psn, uint64_t now)
{
    struct ub__pds *pds = c->pds;
    struct ub__pkt *head = NULL, *last = NULL;
    uint32_t moved = 0;
    for (uint32_t psn = c->una; psn != c->nxt; psn++) {
        struct ub__pds_slot *s = slot_of(c, psn);
        if (!s->pkt)
            continue;
        /* Below end_psn the target had it; but a packet with K whose own ACK never came from a
         * target that answers with OWN ACKs may have lost its response with it: it goes again
         * (the transaction layer answers a re-delivered request from its own cache). */
        if (ub__seq_lt(psn, end_psn) && !(s->own && c->own_seen)) {
            uint64_t acked = 0;
            ack_one(c, psn, false, &acked, now, false);
            continue;
        }
        uncount(c, s);
        /* Back to the queued form (extension + SES, no PDS header), ahead of what waits. */
        struct ub__pkt *p = s->pkt;
        s->pkt = NULL;
        if (p->refcnt > 1) { /* a copy is still in flight: do not move its bytes under it */
            struct ub__pkt *copy = ub__pkt_clone(p);
            if (!copy) {
                pds->st.nobufs++;
                fail_pkt(pds, p, UB_ENOBUFS, now);
                continue;
            }
            ub__pkt_free(p);
            p = copy;
        }
        ub__pkt_pull(p, (uint32_t)req_header_size(c->mode));
        /* Out of the slots and not yet back in the queue, ub__pds_flatten would miss it if a
         * failure upcall below completed its request: no attached payload on this rare path. */
        ub__pkt_flatten(p);
        p->next = NULL;
        if (last)
            last->next = p;
        else
            head = p;
        last = p;
        moved++;
    }
    if (last) {
        last->next = c->q_head;
        if (!c->q_head)
            c->q_tail = last;
        c->q_head = head;
        c->qlen += moved;
    }
    ub__hmap_del(&pds->ipdc_by_id, c->id);
    c->id = alloc_id(pds);
    ub__hmap_put(&pds->ipdc_by_id, c->id, c);
    start_fresh(c);
    ub__timer_cancel(pds->timers, &c->rto);
    c->rto_due = UB_TIME_NEVER;
    pds->st.pdc_opened++;
    ub__pds_mark_ready(c, now);
}

void ub__pds_on_rudi_resp(struct ub__pds *pds, const struct ub__pkt *p,
                          const struct ub__pds_rudi *r, uint64_t now)
{
    struct ub__pds_ipdc *c = ub__hmap_get(&pds->ipdc_by_id, r->pkt_id >> 16);
    if (!c || c->mode != UB_PDS_RUDI || ub__pds_host_key(&c->peer) != ub__pds_host_key(&p->addr)) {
        pds->st.rx_no_pdc++;
        return;
    }
    pds->st.acks_rx++;
    uint32_t psn = c->una + ((r->pkt_id - c->una) & 0xffff);
    c->state = IPDC_EST;
    if (!(ub__seq_le(c->una, psn) && ub__seq_lt(psn, c->nxt)))
        return;
    struct ub__pds_slot *s = slot_of(c, psn);
    uint64_t rtt = 0;
    if (s->state == SLOT_INFLIGHT && s->retx == 0) {
        rtt = now - s->first_ns;
        ub__pds_rtt_sample(c, rtt);
    }
    bool ecn = (r->flags & UB_PDS_RUDI_F_M) != 0;
    uint64_t acked = 0;
    bool news = ack_one(c, psn, ecn, &acked, now, false);
    advance_una(c);
    ub__pds_undo_check(c, false, now); /* a response says nothing of which copy it answers */
    if (news)
        progress(c, now);
    if (c->ccx && (acked || ecn)) {
        struct ub__cc_ack ev = {
            .acked_bytes = acked, .inflight = c->ccx->inflight, .rtt_ns = rtt, .ecn = ecn};
        ub__cc_on_ack(&c->ccx->cc, &ev, now);
    }
    ub__pds_after_ack_losses(c, false, 0, false, now);
    ub__pds_mark_ready(c, now);
}

void ub__pds_send_close(struct ub__pds_ipdc *c, bool retx)
{
    struct ub__pds *pds = c->pds;
    struct ub__wire_dgram d;
    memset(&d, 0, sizeof(d));
    d.pds.type = UB_PDS_TYPE_CTRL;
    struct ub__pds_ctrl *k = &d.pds.u.ctrl;
    k->ctl_type = UB_PDS_CTRL_CLOSE;
    k->flags = (uint8_t)((retx ? UB_PDS_CTRL_F_RETX : 0) | UB_PDS_CTRL_F_AR |
                         (c->mode == UB_PDS_ROD ? UB_PDS_CTRL_F_ISROD : 0));
    k->psn = c->close_psn;
    k->spdcid = c->id;
    k->dpdcid = c->tid;
    if (ub__pds_ctl_send(pds, &d, &c->peer, c->next_path))
        pds->st.ctrl_tx++;
}

static void start_close(struct ub__pds_ipdc *c, uint64_t now)
{
    struct ub__pds *pds = c->pds;
    if (c->mode == UB_PDS_RUDI || c->state == IPDC_SYN) {
        /* No target state to tear down (RUDI), or none was ever confirmed: just forget it. */
        ub__pds_finish_close(c, now);
        return;
    }
    /* New sends to this peer open a new context from now on. */
    ub__hmap_del(&pds->ipdc_by_peer, c->key);
    if (pds->last_ipdc == c)
        pds->last_ipdc = NULL;
    c->state = IPDC_CLOSING;
    c->close_psn = c->nxt;
    c->retries = 0;
    ub__pds_send_close(c, false);
    ub__pds_arm_rto(c, now);
}

static void idle_fire(struct ub__timer *t, uint64_t now)
{
    struct ub__pds_ipdc *c = UB_CONTAINER_OF(t, struct ub__pds_ipdc, idle);
    struct ub__pds *pds = c->pds;
    if (c->state == IPDC_CLOSING)
        return;
    uint64_t idle_at = c->last_progress + pds->cfg.idle_close_ns;
    if (c->qlen || inflight(c) || idle_at > now) {
        ub__timer_arm(pds->timers, &c->idle, UB_MAX(idle_at, now + 1));
        return;
    }
    start_close(c, now);
}

void ub__pds_on_ctrl_close_req(struct ub__pds *pds, const struct ub__pds_ctrl *k, uint64_t now)
{
    struct ub__pds_ipdc *c = ub__hmap_get(&pds->ipdc_by_id, k->dpdcid);
    if (!c || c->tid != k->spdcid)
        return;
    if (c->state == IPDC_EST && !c->qlen && !inflight(c))
        start_close(c, now);
}
