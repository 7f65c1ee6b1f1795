/*
 * Initiator internals shared by pds_tx.c (PSN assignment, transmission, acknowledgements,
 * close, re-establishment) and pds_loss.c (loss detection, RTO and probes, NACKs).
 */
#ifndef UB_PDS_PDS_IPDC_H
#define UB_PDS_PDS_IPDC_H

#include "core/clock.h"
#include "core/seq.h"
#include "pds/pds_int.h"

static inline bool gbn(const struct ub__pds_ipdc *c)
{
    return c->retx_mode == UB_PDS_RETX_GBN_FAST || c->retx_mode == UB_PDS_RETX_GBN_TIMEOUT;
}

/* The RTO floor of a lossless PDC (bounded by rto_max_ns like every RTO). */
static inline uint64_t lossless_rto(const struct ub__pds_cfg *cfg)
{
    return UB_MIN(UB_MAX(UB_PDS_LOSSLESS_RTO_NS, cfg->rto_min_ns), cfg->rto_max_ns);
}

static inline bool fast(const struct ub__pds_ipdc *c)
{
    return c->retx_mode == UB_PDS_RETX_SEL_FAST || c->retx_mode == UB_PDS_RETX_GBN_FAST;
}

static inline struct ub__pds_slot *slot_of(const struct ub__pds_ipdc *c, uint32_t psn)
{
    return &c->slots[psn & c->wmask];
}

static inline uint32_t inflight(const struct ub__pds_ipdc *c)
{
    return c->nxt - c->una;
}

/* ---- per-path FIFOs of the slots in flight (txseq order) -------------------------------- */

static inline void path_link(struct ub__pds_ipdc *c, uint32_t psn)
{
    uint32_t idx = psn & c->wmask;
    struct ub__pds_slot *s = &c->slots[idx];
    struct ub__pds_path *pa = &c->paths[s->path];
    s->pnext = UB_PDS_NOSLOT;
    s->pprev = pa->tail;
    if (pa->tail != UB_PDS_NOSLOT)
        c->slots[pa->tail].pnext = idx;
    else
        pa->head = idx;
    pa->tail = idx;
}

static inline void path_unlink(struct ub__pds_ipdc *c, struct ub__pds_slot *s)
{
    struct ub__pds_path *pa = &c->paths[s->path];
    if (s->pprev != UB_PDS_NOSLOT)
        c->slots[s->pprev].pnext = s->pnext;
    else
        pa->head = s->pnext;
    if (s->pnext != UB_PDS_NOSLOT)
        c->slots[s->pnext].pprev = s->pprev;
    else
        pa->tail = s->pprev;
}

/* A slot leaves SLOT_INFLIGHT (acknowledged, declared lost, dropped): no longer in flight. */
static inline void uncount(struct ub__pds_ipdc *c, const struct ub__pds_slot *s)
{
    if (c->ccx && s->state == SLOT_INFLIGHT && s->pkt)
        c->ccx->inflight -= UB_MIN(c->ccx->inflight, (uint64_t)ub__pkt_wire_len(s->pkt));
}

/* Packets from una that may be in flight: the window, MP_RANGE, and go-back-N's loss window. */
static inline uint32_t send_limit(const struct ub__pds_ipdc *c)
{
    uint32_t limit = UB_MIN(c->pds->cfg.window, c->mpr);
    return gbn(c) ? UB_MIN(limit, c->gbn_win) : limit;
}

/* Where repairs stop: go-back-N resends only inside its window. */
static inline uint32_t repair_end(const struct ub__pds_ipdc *c)
{
    uint32_t end = gbn(c) ? c->una + send_limit(c) : c->nxt;
    return ub__seq_lt(c->nxt, end) ? c->nxt : end;
}

/* The lowest LOST PSN before end, moving lost_scan up to it (or to end if there is none). */
static inline bool next_lost(struct ub__pds_ipdc *c, uint32_t end, uint32_t *out)
{
    for (uint32_t psn = c->lost_scan; c->nlost; psn++) {
        if (!ub__seq_lt(psn, end)) {
            c->lost_scan = end;
            return false;
        }
        c->lost_scan = psn;
        if (slot_of(c, psn)->state == SLOT_LOST) {
            *out = psn;
            return true;
        }
    }
    return false;
}

/* pds_loss.c */
/* Fast loss detection after an ACK (hint: the PSN that triggered it, for go-back-N). */
void ub__pds_detect_losses(struct ub__pds_ipdc *c, bool has_hint, uint32_t hint, bool hint_retx,
                           uint64_t now);
/* After an ACK (orig: provoked by an original copy): undoes the window cut of a spurious RTO,
 * and learns the RTO floor from a stall. */
void ub__pds_undo_check(struct ub__pds_ipdc *c, bool orig, uint64_t now);
void ub__pds_frto_check(struct ub__pds_ipdc *c, bool orig, uint64_t now);
void ub__pds_rto_fire(struct ub__timer *t, uint64_t now);

/* pds_tx.c */
void ub__pds_finish_close(struct ub__pds_ipdc *c, uint64_t now);
void ub__pds_send_close(struct ub__pds_ipdc *c, bool retx);
/* The target evicted our context at end_psn: the rest goes again on a new one. */
void ub__pds_reestablish(struct ub__pds_ipdc *c, uint32_t end_psn, uint64_t now);

/*
 * The retransmission timer is due at `at`. It moves only when that is earlier than where it is
 * armed: an ACK in a ping-pong pushes the deadline out on every round trip, and moving the heap
 * entry each time costs more than the one early expiry that re-arms it (ub__pds_rto_fire).
 */
static inline void rto_at(struct ub__pds_ipdc *c, uint64_t at)
{
    c->rto_due = at;
    if (!ub__timer_armed(&c->rto) || c->rto.deadline > at)
        ub__timer_arm(c->pds->timers, &c->rto, at);
}

/* (Re)arms the retransmission timer: RTO, or the tail-loss probe before it; off when idle. */
static inline void ub__pds_arm_rto(struct ub__pds_ipdc *c, uint64_t now)
{
    struct ub__pds *pds = c->pds;
    if (!inflight(c) && c->state != IPDC_CLOSING) {
        c->rto_due = UB_TIME_NEVER; /* an expiry of the armed timer finds nothing to do */
        return;
    }
    uint64_t wait = c->rto_ns;
    if (!pds->cfg.no_probe && !pds->cfg.trimming && !c->lossless && fast(c) && !c->probed &&
        c->srtt) {
        /*
         * Tail-loss probe: well before the RTO, once per period without progress. Not on a
         * trimming fabric: there a loss comes back as a NACK, and a probe would resend a
         * packet that is most likely still queued.
         */
        uint64_t pto = UB_MAX(2 * c->srtt, pds->cfg.ack_delay_ns + c->srtt);
        wait = UB_MIN(wait, pto);
    }
    rto_at(c, now + wait);
}

/* The RTO from the smoothed RTT, without backoff. */
static inline void ub__pds_rto_from_rtt(struct ub__pds_ipdc *c)
{
    const struct ub__pds_cfg *cfg = &c->pds->cfg;
    uint64_t rto = c->srtt + UB_MAX(4 * c->rttvar, cfg->ack_delay_ns);
    uint64_t floor = c->lossless ? lossless_rto(cfg) : UB_MAX(cfg->rto_min_ns, c->rto_floor);
    c->rto_ns = UB_MIN(UB_MAX(rto, floor), cfg->rto_max_ns);
}

static inline void ub__pds_rtt_sample(struct ub__pds_ipdc *c, uint64_t r)
{
    if (!c->srtt) {
        c->srtt = r;
        c->rttvar = r / 2;
    } else {
        uint64_t d = c->srtt > r ? c->srtt - r : r - c->srtt;
        c->rttvar = (3 * c->rttvar + d) / 4;
        c->srtt = (7 * c->srtt + r) / 8;
    }
    if (c->rto_floor && ++c->floor_samples >= UB_PDS_RTO_FLOOR_DECAY) {
        c->floor_samples = 0;
        c->rto_floor /= 2;
        if (c->rto_floor <= c->pds->cfg.rto_min_ns)
            c->rto_floor = 0;
    }
    ub__pds_rto_from_rtt(c);
}

static inline void clear_dirty(struct ub__pds_ipdc *c)
{
    for (uint32_t i = 0; i < c->ndirty; i++)
        c->paths[c->dirty[i]].dirty = false;
    c->ndirty = 0;
}

/* ub__pds_detect_losses, but nothing in flight (a ping-pong's every ACK) has nothing to lose. */
static inline void ub__pds_after_ack_losses(struct ub__pds_ipdc *c, bool has_hint, uint32_t hint,
                                            bool hint_retx, uint64_t now)
{
    if (c->una == c->nxt)
        clear_dirty(c);
    else
        ub__pds_detect_losses(c, has_hint, hint, hint_retx, now);
}

#endif
