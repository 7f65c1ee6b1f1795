/*
 * The initiator's loss detection and retransmission: the SACK out-of-order count, per-path
 * order, NACKs, tail-loss probes, the RTO with backoff and its undo when it was spurious, and
 * the go-back-N and selective marking that schedules the repairs ub__pds_ipdc_emit sends.
 */
#include <stdlib.h>

#include <softub/errors.h>
#include "pds/pds_ipdc.h"

static void mark_lost(struct ub__pds_ipdc *c, uint32_t psn, uint8_t why, uint64_t now)
{
    struct ub__pds_slot *s = slot_of(c, psn);
    if (s->state == SLOT_COVERED) { /* out of flight already: it goes again for its own ACK */
        s->state = SLOT_LOST;
        s->why = why;
        if (++c->nlost == 1 || ub__seq_lt(psn, c->lost_scan))
            c->lost_scan = psn;
        return;
    }
    if (s->state != SLOT_INFLIGHT)
        return;
    uncount(c, s);
    path_unlink(c, s);
    /* A loss the sender inferred (out-of-order count, per-path order) is a NACK for the path
     * (go-back-N reports only the first of its run: the rest were not lost on their paths). */
    if (why == WHY_FAST && !gbn(c))
        ub__lb_on_nack(&c->lb, s->path, now);
    s->state = SLOT_LOST;
    s->why = why;
    if (++c->nlost == 1 || ub__seq_lt(psn, c->lost_scan))
        c->lost_scan = psn;
}

/*
 * Go-back-N: everything from psn on goes again. Each go-back also halves the window the
 * repairs and new packets may use (at least UB_PDS_GBN_MIN_WIN; an RTO takes it there at once),
 * and every acknowledged packet grows it by one again: at 10 % loss a fixed window of 256
 * would resend ~W * p = 25 packets for every one delivered.
 */
static void go_back(struct ub__pds_ipdc *c, uint32_t from, uint8_t why, uint64_t now)
{
    uint32_t w = why == WHY_RTO ? UB_PDS_GBN_MIN_WIN : c->gbn_win / 2;
    c->gbn_win = UB_MAX(w, (uint32_t)UB_PDS_GBN_MIN_WIN);
    c->frto = false; /* a probe's verdict is moot: everything from here goes again anyway */
    if (why == WHY_FAST && slot_of(c, from)->state == SLOT_INFLIGHT)
        ub__lb_on_nack(&c->lb, slot_of(c, from)->path, now);
    for (uint32_t psn = from; psn != c->nxt; psn++)
        mark_lost(c, psn, why, now);
}

/*
 * Whether the transmission of PSN `later` that provoked a report (ACK or NACK; retx: it said the
 * packet was a retransmission) left after the latest transmission of `first`, so that `first`
 * missing is news. A report provoked by a copy sent before `first` was resent is the echo of an
 * earlier go-back: acting on it would resend the window once per packet still in flight.
 */
static bool after_latest(const struct ub__pds_ipdc *c, uint32_t later, bool retx, uint32_t first)
{
    const struct ub__pds_slot *l = slot_of(c, later), *f = slot_of(c, first);
    if (f->state != SLOT_INFLIGHT || (l->state != SLOT_INFLIGHT && l->state != SLOT_ACKED))
        return false;
    if (retx != (l->retx > 0)) /* the report came from an earlier copy of `later` */
        return false;
    return l->txseq > f->txseq;
}

static void sort_u32(uint32_t *a, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++) {
        uint32_t v = a[i], j = i;
        for (; j > 0 && a[j - 1] > v; j--)
            a[j] = a[j - 1];
        a[j] = v;
    }
}

/*
 * Fast loss detection after an ACK: out-of-order count and per-path order. Go-back-N ignores
 * selective information, so it looks only at the PSN that triggered the ACK (hint): far enough
 * past una, and sent after una's latest copy, it means una was lost.
 *
 * Selective: a slot in flight is lost when high_acked is at least ooo_threshold past it and a
 * packet that left after it (acked_order) was acknowledged, or a later transmission on its
 * path was acknowledged. The first condition's second half tells overtaking from loss: a
 * device of several paths sends each batch path by path, so a batch's packets on the last
 * paths are overtaken by dozens of later PSNs on the first, and a resent packet is overtaken
 * by everything sent before it. Both are found without scanning the window: the first from
 * ooo_scan (below it nothing is in flight but what was resent since, which lowers it; slots
 * held because they left after acked_order lie in [ooo_scan, ooo_hi), scanned again only once
 * acked_order rose)
 * up to high_acked - threshold, the second from the heads of the paths whose acknowledged
 * txseq rose (their slots in flight are kept in txseq order). The union is marked in PSN
 * order, exactly as a scan of the whole window from una would.
 */
void ub__pds_detect_losses(struct ub__pds_ipdc *c, bool has_hint, uint32_t hint, bool hint_retx,
                           uint64_t now)
{
    if (!fast(c)) {
        clear_dirty(c);
        return;
    }
    const struct ub__pds_cfg *cfg = &c->pds->cfg;
    uint32_t thr = cfg->ooo_threshold;
    if (gbn(c)) {
        clear_dirty(c);
        if (has_hint && c->una != c->nxt && ub__seq_lt(c->una, hint) && ub__seq_lt(hint, c->nxt) &&
            ub__seq_diff(hint, c->una) >= (int32_t)thr && after_latest(c, hint, hint_retx, c->una))
            go_back(c, c->una, WHY_FAST, now);
        return;
    }
    if (!c->any_acked) {
        clear_dirty(c);
        return;
    }
    uint32_t k = 0;
    /* Out-of-order count: the slots in flight at or below high_acked - threshold. */
    uint32_t end = c->high_acked - thr + 1;
    if (ub__seq_lt(c->nxt, end))
        end = c->nxt;
    uint32_t start = ub__seq_lt(c->ooo_scan, c->una) ? c->una : c->ooo_scan;
    bool again = c->ooo_order != c->acked_order; /* held slots may be lost now */
    if (!again && ub__seq_lt(start, c->ooo_hi))
        start = c->ooo_hi; /* what is in flight below ooo_hi left after acked_order */
    if (ub__seq_lt(start, end)) {
        bool held = false;
        for (uint32_t psn = start; psn != end; psn++) {
            struct ub__pds_slot *s = slot_of(c, psn);
            if (s->state == SLOT_COVERED ||
                (s->state == SLOT_INFLIGHT && s->pkt->order < c->acked_order)) {
                s->cand = 1;
                c->cand[k++] = psn - c->una;
            } else if (s->state == SLOT_INFLIGHT && !held) {
                held = true;
                if (again || ub__seq_le(c->ooo_hi, c->ooo_scan))
                    c->ooo_scan = psn; /* the first held slot */
            }
        }
        if (!held && (again || ub__seq_le(c->ooo_hi, c->ooo_scan)))
            c->ooo_scan = end;
        c->ooo_hi = end;
        c->ooo_order = c->acked_order;
    }
    /* One path delivers in order: a later packet on it arrived, so the earlier ones are gone. */
    bool sorted = true;
    for (uint32_t i = 0; i < c->ndirty; i++) {
        struct ub__pds_path *pa = &c->paths[c->dirty[i]];
        pa->dirty = false;
        if (cfg->no_ev_loss)
            continue;
        for (uint32_t idx = pa->head; idx != UB_PDS_NOSLOT && c->slots[idx].txseq < pa->acked_txseq;
             idx = c->slots[idx].pnext) {
            struct ub__pds_slot *s = &c->slots[idx];
            if (s->cand)
                continue;
            s->cand = 1;
            /* The slot's PSN: the one in [una, nxt) that maps to idx. */
            uint32_t off = (idx - c->una) & c->wmask;
            if (k && off < c->cand[k - 1])
                sorted = false;
            c->cand[k++] = off;
        }
    }
    c->ndirty = 0;
#ifdef UB_PDS_CHECK_DETECT
    {
        uint32_t want = 0;
        for (uint32_t psn = c->una; psn != c->nxt; psn++) {
            struct ub__pds_slot *s = slot_of(c, psn);
            if (s->state != SLOT_INFLIGHT && s->state != SLOT_COVERED)
                continue;
            bool lost = ub__seq_diff(c->high_acked, psn) >= (int32_t)thr &&
                        (s->state == SLOT_COVERED || s->pkt->order < c->acked_order);
            if (!lost && s->state == SLOT_INFLIGHT && !cfg->no_ev_loss &&
                s->txseq < c->paths[s->path].acked_txseq)
                lost = true;
            if (lost) {
                want++;
                if (!s->cand)
                    abort();
            }
        }
        if (want != k)
            abort();
    }
#endif
    if (!sorted)
        sort_u32(c->cand, k);
    for (uint32_t i = 0; i < k; i++) {
        uint32_t psn = c->una + c->cand[i];
        slot_of(c, psn)->cand = 0;
        mark_lost(c, psn, WHY_FAST, now);
    }
}

/* The series just undone was a stall of `silence` ns: no RTO shorter than that from now on. */
static void learn_floor(struct ub__pds_ipdc *c, uint64_t silence)
{
    const struct ub__pds_cfg *cfg = &c->pds->cfg;
    uint64_t f = UB_MIN(silence + silence / 4, UB_MIN(UB_PDS_RTO_FLOOR_MAX_NS, cfg->rto_max_ns));
    if (c->lossless || f <= UB_MAX(c->rto_floor, cfg->rto_min_ns))
        return;
    c->rto_floor = f;
    c->floor_samples = 0;
    c->pds->st.rto_floor_raised++;
    ub__pds_rto_from_rtt(c);
}

/*
 * After an ACK that acknowledged something new, while a lone repair waits for its verdict
 * (frto: the series' first RTO, or a go-back-N probe): if a packet outstanding then was
 * acknowledged by its original copy (orig, or undo_seen), it was only late and nothing more
 * is resent (ub__pds_undo_check restores the window after an RTO); otherwise only the
 * resent copy got through, and everything else outstanding then is lost too (go-back-N:
 * from una on, as the target dropped what followed the loss).
 */
void ub__pds_frto_check(struct ub__pds_ipdc *c, bool orig, uint64_t now)
{
    c->frto = false;
    c->lone_go = false; /* spurious: no repair needed; lost: the flight leaves the window */
    if (orig || c->undo_seen)
        return;
    if (gbn(c)) { /* only a probe leaves go-back-N a verdict to wait for */
        if (ub__seq_lt(c->una, c->nxt))
            go_back(c, c->una, WHY_PROBE, now);
        return;
    }
    for (uint32_t psn = c->una; ub__seq_lt(psn, c->frto_nxt); psn++)
        mark_lost(c, psn, WHY_RTO, now);
}

/*
 * After an ACK (orig: provoked by an original copy): was the last RTO spurious (the peer slow,
 * e.g. off the CPU, not the network lossy)? Then its window cut goes, and if this is the
 * first ACK since the RTO the silence it ends sets the RTO floor (learn_floor). What the RTO
 * marked lost and is still unacknowledged is resent (the ACKs behind this one usually
 * acknowledge it first).
 */
void ub__pds_undo_check(struct ub__pds_ipdc *c, bool orig, uint64_t now)
{
    bool first = c->undo_quiet;
    c->undo_quiet = false;
    if (c->undo_armed && c->undo_seen) {
        c->undo_armed = false;
        c->pds->st.rto_undone++;
        if (c->ccx)
            ub__cc_undo_timeout(&c->ccx->cc, c->undo_cwnd);
        if (first && orig)
            learn_floor(c, now - c->undo_quiet_since);
    } else if (c->undo_armed && !ub__seq_lt(c->una, c->undo_nxt)) {
        c->undo_armed = false; /* all of it repaired: the losses were real */
        if (c->rto_floor) {    /* and a floor learnt from stalls only slows their repair */
            c->rto_floor = 0;
            ub__pds_rto_from_rtt(c);
        }
    }
    c->undo_seen = false;
}

/*
 * Congestion NACKs (trims, NO_PKT_BUF, RCVR_INFER_LOSS) are congestion events for the context
 * and path feedback for the balancer, once per transmission (a packet still in flight: a
 * second report of the same copy says nothing new). Protocol NACKs are not.
 */
static void congestion_nack(struct ub__pds_ipdc *c, const struct ub__pds_nack *n, uint64_t now)
{
    bool trim = n->code == UB_PDS_NACK_TRIMMED || n->code == UB_PDS_NACK_TRIMMED_LASTHOP ||
                n->code == UB_PDS_NACK_TRIMMED_ACK;
    if (!trim && n->code != UB_PDS_NACK_NO_PKT_BUF && n->code != UB_PDS_NACK_RCVR_INFER_LOSS)
        return;
    struct ub__pds_slot *s = slot_of(c, n->psn);
    if (s->state != SLOT_INFLIGHT)
        return;
    bool last_hop = n->code == UB_PDS_NACK_TRIMMED_LASTHOP;
    bool ecn = (n->flags & UB_PDS_NACK_F_M) != 0;
    if (trim)
        ub__lb_on_trim(&c->lb, s->path, last_hop, ecn, now);
    else
        ub__lb_on_nack(&c->lb, s->path, now);
    if (!c->ccx)
        return;
    uint64_t bytes = ub__pkt_wire_len(s->pkt);
    struct ub__cc_nack ev = {
        .bytes = bytes,
        .inflight = c->ccx->inflight - UB_MIN(c->ccx->inflight, bytes),
        .trimmed = trim,
        .last_hop = last_hop,
        .ecn = ecn,
    };
    ub__cc_on_nack(&c->ccx->cc, &ev, now);
}

void ub__pds_on_nack(struct ub__pds *pds, const struct ub__pds_nack *n, uint64_t now)
{
    struct ub__pds_ipdc *c = ub__hmap_get(&pds->ipdc_by_id, n->dpdcid);
    if (!c || (n->flags & UB_PDS_NACK_F_NT)) {
        pds->st.rx_no_pdc++;
        return;
    }
    if (c->state == IPDC_CLOSING) {
        if (n->code == UB_PDS_NACK_NO_PDC || n->code == UB_PDS_NACK_CLOSING ||
            n->code == UB_PDS_NACK_INV_DPDCID)
            ub__pds_finish_close(c, now);
        return;
    }
    uint32_t psn = n->psn;
    bool in_flight = ub__seq_le(c->una, psn) && ub__seq_lt(psn, c->nxt);
    if (in_flight)
        congestion_nack(c, n, now);
    switch (n->code) {
    case UB_PDS_NACK_TRIMMED:
    case UB_PDS_NACK_TRIMMED_LASTHOP:
        if (in_flight && fast(c)) {
            if (gbn(c))
                go_back(c, psn, WHY_NACK, now);
            else
                mark_lost(c, psn, WHY_NACK, now);
        }
        /*
         * A trim proves the target and the path alive: time the RTO from here, as after an
         * ACK. In a deep incast a flow may go 100 us between ACKs while NACKs keep coming;
         * an RTO timed from the last ACK would resend whole windows of packets still queued.
         */
        if (in_flight) {
            c->last_progress = now;
            c->retries = 0;
            ub__pds_arm_rto(c, now);
        }
        break;
    case UB_PDS_NACK_ROD_OOO: {
        /*
         * The target wants n->payload next and dropped everything after it. A NACK
         * provoked by a first transmission we have already decided to resend is the
         * echo of an earlier go-back, not news: acting on it would resend the
         * window once per packet still in flight.
         */
        if (!fast(c) || !in_flight || !ub__seq_le(c->una, n->payload) ||
            !ub__seq_lt(n->payload, c->nxt) ||
            !after_latest(c, psn, (n->flags & UB_PDS_NACK_F_RETX) != 0, n->payload))
            break;
        go_back(c, n->payload, WHY_NACK, now);
        break;
    }
    case UB_PDS_NACK_CLOSING:
        /* Destructive NACKs must name a PSN we have in flight: never act on a stray one. */
        if (!in_flight || ub__seq_lt(n->payload, c->una) || ub__seq_lt(c->nxt, n->payload)) {
            pds->st.rx_stale++;
            break;
        }
        ub__pds_reestablish(c, n->payload, now);
        return;
    case UB_PDS_NACK_NO_PDC:
    case UB_PDS_NACK_INV_DPDCID:
    case UB_PDS_NACK_PDC_HDR_MISMATCH:
        if (!in_flight) {
            pds->st.rx_stale++;
            break;
        }
        if (!(n->flags & UB_PDS_NACK_F_RETX)) {
            /*
             * Verify before tearing down: resend that packet. A restarted target says the
             * same about the retransmission one RTT later; a damaged header does not.
             */
            mark_lost(c, psn, WHY_NACK, now);
            break;
        }
        /* The target has no memory of us: it restarted. Nothing in flight can be vouched for. */
        pds->st.pdc_failed++;
        ub__pds_ipdc_free(c, UB_ESTALE, now);
        return;
    default:
        /* Resource shortages and window overruns: the RTO retries, with backoff. */
        break;
    }
    ub__pds_mark_ready(c, now);
}

/* The lowest packet still out (in flight, or covered and waiting for its own ACK) goes again. */
static void resend_oldest(struct ub__pds_ipdc *c, uint8_t why, uint64_t now)
{
    for (uint32_t psn = c->una; psn != c->nxt; psn++) {
        uint8_t st = slot_of(c, psn)->state;
        if (st == SLOT_INFLIGHT || st == SLOT_COVERED) {
            mark_lost(c, psn, why, now);
            return;
        }
    }
}

/*
 * What a tail-loss probe resends: the newest packet when it carries K and still waits for its
 * own ACK (a request's last packet, whose ACK carries the response: the duplicate brings that
 * ACK again, covering what came before; the oldest's ACK would only cover it), else the oldest.
 */
static void resend_probe(struct ub__pds_ipdc *c, uint64_t now)
{
    uint32_t last = c->nxt - 1;
    const struct ub__pds_slot *s = slot_of(c, last);
    if (c->nxt != c->una && s->own && (s->state == SLOT_INFLIGHT || s->state == SLOT_COVERED)) {
        mark_lost(c, last, WHY_PROBE, now);
        return;
    }
    resend_oldest(c, WHY_PROBE, now);
}

/* The oldest packet goes again, and the verdict on the rest waits for the next ACK. */
static void lone_repair(struct ub__pds_ipdc *c, uint8_t why, uint64_t now)
{
    c->frto = true;
    c->frto_nxt = c->nxt;
    resend_oldest(c, why, now);
    /* After an RTO one repair goes whatever the window (pds_tx.c ccx_allows), the lowest one
     * waiting (an earlier repair the window held back comes first); a probe's repair waits
     * for the window: probes past a full window, one per PTO, repaired a lossy burst packet
     * by packet. */
    c->lone_go = why == WHY_RTO && c->nlost;
}

void ub__pds_rto_fire(struct ub__timer *t, uint64_t now)
{
    struct ub__pds_ipdc *c = UB_CONTAINER_OF(t, struct ub__pds_ipdc, rto);
    struct ub__pds *pds = c->pds;
    const struct ub__pds_cfg *cfg = &pds->cfg;
    if (now < c->rto_due) { /* armed before the deadline moved out (rto_at) */
        if (c->rto_due != UB_TIME_NEVER)
            ub__timer_arm(pds->timers, &c->rto, c->rto_due);
        return;
    }
    c->rto_due = UB_TIME_NEVER;
    if (c->state == IPDC_CLOSING) {
        if (++c->retries > cfg->max_retries) {
            ub__pds_finish_close(c, now); /* the target will forget us on its own */
            return;
        }
        c->rto_ns = UB_MIN(c->rto_ns * 2, cfg->rto_max_ns);
        ub__pds_send_close(c, true);
        ub__pds_arm_rto(c, now);
        return;
    }
    if (!inflight(c))
        return;
    if (!cfg->no_probe && !cfg->trimming && !c->lossless && fast(c) && !c->probed && c->srtt &&
        now < c->last_progress + c->rto_ns) {
        /* Tail-loss probe: resend a packet (resend_probe), asking for an ACK. */
        c->probed = true;
        /* Go-back-N: the next ACK says whether to go back (the target drops what follows a
         * lost packet, so a lone repair cannot stand on its own there). */
        if (gbn(c))
            lone_repair(c, WHY_PROBE, now);
        else
            resend_probe(c, now);
        rto_at(c, c->last_progress + c->rto_ns);
        ub__pds_mark_ready(c, now);
        return;
    }
    pds->st.rto_fired++;
    /* A peer stalled for a while (descheduled, a loaded host) is not dead: with a floor,
     * the retries alone do not fail the PDC before it has been silent that long. */
    if (++c->retries > cfg->max_retries &&
        (!cfg->fail_after_ns || now - c->acked_at >= cfg->fail_after_ns)) {
        pds->st.pdc_failed++;
        ub__pds_ipdc_free(c, UB_EUNREACH, now);
        return;
    }
    c->rto_ns = UB_MIN(c->rto_ns * 2, cfg->rto_max_ns);
    /*
     * The balancer hears about the oldest packet's path (the one whose timer this is); the
     * congestion context about every byte the RTO declares lost (htsim takes each timed-out
     * packet's size off the window).
     */
    const struct ub__pds_slot *old = slot_of(c, c->una);
    ub__lb_on_timeout(&c->lb, old->pkt ? old->path : UB_LB_EV_UNKNOWN, now);
    bool first = !c->undo_armed;
    if (first) { /* the first RTO of a series: what an undo restores */
        c->undo_armed = true;
        c->undo_quiet = true;
        c->undo_quiet_since = c->acked_at;
        c->undo_cwnd = c->ccx ? c->ccx->cc.cwnd : 0;
        c->undo_nxt = c->nxt;
    }
    if (c->ccx) {
        uint64_t bytes = 0;
        for (uint32_t psn = c->una; psn != c->nxt; psn++) {
            const struct ub__pds_slot *s = slot_of(c, psn);
            if (s->state == SLOT_INFLIGHT)
                bytes += ub__pkt_wire_len(s->pkt);
        }
        ub__cc_on_timeout(&c->ccx->cc, bytes, now);
    }
    if (gbn(c)) {
        go_back(c, c->una, WHY_RTO, now);
    } else if (first && fast(c)) {
        /* The oldest packet only; ub__pds_frto_check decides about the rest at the next ACK
         * that acknowledges something. A peer off its CPU a little longer than the RTO (a
         * busy host) costs one resend, not a window of them. Later RTOs of the series (a
         * long silence, or the resend lost too) resend everything, as do timeout-only modes,
         * whose repairs come from RTOs alone. */
        lone_repair(c, WHY_RTO, now);
    } else {
        c->frto = false;
        for (uint32_t psn = c->una; psn != c->nxt; psn++)
            mark_lost(c, psn, WHY_RTO, now);
    }
    c->last_progress = now; /* the backed-off RTO counts from this retransmission */
    c->probed = true;       /* no probe until something is acknowledged again */
    rto_at(c, now + c->rto_ns);
    ub__pds_mark_ready(c, now);
}
