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
/* (Re)arms the retransmission timer: RTO, or the tail-loss probe before it; off when idle. */
void ub__pds_arm_rto(struct ub__pds_ipdc *c, uint64_t now);
/* The RTO from the smoothed RTT, without backoff. */
void ub__pds_rto_from_rtt(struct ub__pds_ipdc *c);
void ub__pds_rtt_sample(struct ub__pds_ipdc *c, uint64_t r);
/* Fast loss detection after an ACK (hint: the PSN that triggered it, for go-back-N). */
void ub__pds_detect_losses(struct ub__pds_ipdc *c, bool has_hint, uint32_t hint, bool hint_retx,
                           uint64_t now);
/* After an ACK: undoes the window cut of a spurious RTO. */
void ub__pds_undo_check(struct ub__pds_ipdc *c);
void ub__pds_rto_fire(struct ub__timer *t, uint64_t now);

/* pds_tx.c */
void ub__pds_finish_close(struct ub__pds_ipdc *c, uint64_t now);
void ub__pds_send_close(struct ub__pds_ipdc *c, bool retx);
/* The target evicted our context at end_psn: the rest goes again on a new one. */
void ub__pds_reestablish(struct ub__pds_ipdc *c, uint32_t end_psn, uint64_t now);

#endif
