/*
 * The target: per-stream transaction assembly with direct placement, the
 * order engine (NO / RO / SO / fence), execution (RMA, atomics, receive
 * buffers, tag matching), exactly-once execution with cached responses, and
 * READ response streaming.
 *
 * Order rules, per (initiator incarnation, stream), executed once the whole
 * transaction has arrived:
 *   NO     executes at once.
 *   RO     executes once the last SO before it has executed (it may pass
 *          earlier RO and NO transactions).
 *   SO     executes once every earlier RO and SO has executed.
 *   fence  executes once every earlier transaction has executed.
 * The initiator states the dependencies in the extension tail (so_delta,
 * ro_count), so the target never waits for a transaction it has not seen
 * only because it cannot tell its class.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "core/compiler.h"
#include "core/seq.h"
#include "ses/ses_tgt.h"
#include "wire/datagram.h"

#define TSTREAM_IDLE_NS (10ull * 1000000000ull)

/* ---- helpers --------------------------------------------------------------------------- */

/* Requests in a row mostly name one segment: the last one found is kept (seg.c forgets it
 * when it is unregistered, so revocation stays immediate). */
static ub_seg *seg_lookup(ub_context *ctx, uint32_t key)
{
    ub_seg *seg = ctx->ses.seg_last;
    if (seg && seg->key == key)
        return seg;
    seg = ub__hmap_get(&ctx->objs, ub__obj_key(UB__OBJ_SEG, key));
    if (seg)
        ctx->ses.seg_last = seg;
    return seg;
}

uint8_t ub__tgt_seg_check(ub_context *ctx, uint32_t key, uint64_t token, uint32_t need,
                          uint64_t addr, uint64_t len, ub_seg **out)
{
    ub_seg *seg = seg_lookup(ctx, key);
    if (!seg || seg->token != token)
        return UB_SES_RC_BAD_MKEY;
    if ((seg->access & need) != need)
        return UB_SES_RC_PERM_VIOLATION;
    uint64_t base = (uint64_t)(uintptr_t)seg->addr;
    if (addr < base || len > seg->len || addr - base > seg->len - len)
        return UB_SES_RC_AT_OUT_OF_RANGE;
    if (out)
        *out = seg;
    return UB_SES_RC_OK;
}

static inline bool bit_get(const struct ub__tstream *ts, uint32_t seq)
{
    uint32_t i = seq & (UB_SES_WINDOW - 1);
    return (ts->bits[i / 64] >> (i % 64)) & 1;
}

static bool executed(const struct ub__tstream *ts, uint32_t seq)
{
    if (ub__seq_lt(seq, ts->floor))
        return true;
    if (ub__seq_diff(seq, ts->floor) >= UB_SES_WINDOW)
        return false;
    return bit_get(ts, seq);
}

static void mark_executed(struct ub__tstream *ts, uint32_t seq)
{
    if (ub__seq_lt(seq, ts->floor) || ub__seq_diff(seq, ts->floor) >= UB_SES_WINDOW)
        return;
    if (seq == ts->floor) /* in order: the floor moves past it, its bit is never set */
        ts->floor++;
    else {
        uint32_t i = seq & (UB_SES_WINDOW - 1);
        ts->bits[i / 64] |= 1ull << (i % 64);
    }
    while (bit_get(ts, ts->floor)) {
        uint32_t j = ts->floor & (UB_SES_WINDOW - 1);
        ts->bits[j / 64] &= ~(1ull << (j % 64));
        ts->floor++;
    }
}

/* ---- streams --------------------------------------------------------------------------------- */

static uint64_t ts_key(const struct ub__addr *src, uint32_t inc, uint16_t id)
{
    return ub__ses_peer_hash(src, ((uint64_t)inc << 16) | id);
}

static struct ub__tstream *tstream_get_slow(struct ub__tl *s, const struct ub__addr *src,
                                            uint32_t inc, uint16_t id, uint64_t now);

static inline struct ub__tstream *tstream_get(struct ub__tl *s, const struct ub__addr *src,
                                              uint32_t inc, uint16_t id, uint64_t now)
{
    struct ub__tstream *ts = s->ts_last;
    /* The records of a packed packet, and most packets in a row, are of one stream. */
    if (ts && ts->id == id && ts->inc == inc && ub__ses_peer_eq(&ts->src, src)) {
        if (s->tstream_lru.prev != &ts->lru) {
            ub__list_remove(&ts->lru);
            ub__list_push_back(&s->tstream_lru, &ts->lru);
        }
        ts->last_active = now;
        return ts;
    }
    return tstream_get_slow(s, src, inc, id, now);
}

static struct ub__tstream *tstream_get_slow(struct ub__tl *s, const struct ub__addr *src,
                                            uint32_t inc, uint16_t id, uint64_t now)
{
    uint64_t key = ts_key(src, inc, id);
    struct ub__tstream *ts = ub__hmap_get(&s->tstreams, key);
    if (ts) {
        if (!ub__ses_peer_eq(&ts->src, src) || ts->inc != inc || ts->id != id)
            return NULL; /* a 64-bit hash collision: refuse rather than mix two streams */
    } else {
        ts = calloc(1, sizeof(*ts));
        if (!ts)
            return NULL;
        ts->key = key;
        ts->src = *src;
        ts->inc = inc;
        ts->id = id;
        ts->cur_epoch = UINT32_MAX;
        ub__list_init(&ts->waiting);
        if (ub__hmap_init(&ts->msgs, 4, 0, key) || ub__hmap_put(&s->tstreams, key, ts)) {
            ub__hmap_fini(&ts->msgs);
            free(ts);
            return NULL;
        }
        ub__list_init(&ts->lru);
    }
    ub__list_remove(&ts->lru);
    ub__list_push_back(&s->tstream_lru, &ts->lru);
    ts->last_active = now;
    return s->ts_last = ts;
}

static void tstream_free(struct ub__tl *s, struct ub__tstream *ts)
{
    if (s->ts_last == ts)
        s->ts_last = NULL;
    uint64_t k;
    void *v;
    while (ts->msgs.slots && ub__hmap_next(&ts->msgs, 0, &k, &v))
        ub__tgt_msg_free(s, v);
    ub__hmap_del(&s->tstreams, ts->key);
    ub__list_remove(&ts->lru);
    ub__hmap_fini(&ts->msgs);
    free(ts->ss.v);
    free(ts);
}

void ub__ses_tgt_gc(struct ub__tl *s, uint64_t now)
{
    while (!ub__list_empty(&s->tstream_lru)) {
        struct ub__tstream *ts = UB_CONTAINER_OF(s->tstream_lru.next, struct ub__tstream, lru);
        if (ts->last_active + TSTREAM_IDLE_NS > now || ts->msgs.count || ts->busy)
            break;
        tstream_free(s, ts);
    }
}

/* ---- messages -------------------------------------------------------------------------------- */

/* A message from the cache of freed ones (one per request at message rates: malloc and free
 * cost more than the memset), or new; zeroed from `amo` on (msg_new sets the fields before). */
static struct ub__rxmsg *msg_alloc(struct ub__tl *s)
{
    if (!s->nmsg_cache)
        return calloc(1, sizeof(struct ub__rxmsg));
    struct ub__rxmsg *m = s->msg_cache[--s->nmsg_cache];
    memset(&m->amo, 0, sizeof(*m) - offsetof(struct ub__rxmsg, amo));
    return m;
}

static void msg_release(struct ub__tl *s, struct ub__rxmsg *m)
{
    if (s->nmsg_cache < UB_SES_MSG_CACHE)
        s->msg_cache[s->nmsg_cache++] = m;
    else
        free(m);
}

static void msg_untrack(struct ub__tstream *ts, struct ub__rxmsg *m)
{
    if (m->in_map) {
        ub__hmap_del(&ts->msgs, m->seq);
        m->in_map = false;
    }
}

/* Detaches m from its stream and frees it. */
void ub__tgt_msg_free(struct ub__tl *s, struct ub__rxmsg *m)
{
    if (s->msg_live == m)
        s->msg_live = NULL;
    if (m->ts)
        msg_untrack(m->ts, m);
    if (m->on_wait)
        ub__list_remove(&m->link);
    if (m->on_unexp)
        ub__list_remove(&m->ulink);
    if (m->in_rndv)
        ub__hmap_del(&s->rndv, m->read_id);
    ub__timer_cancel(&s->eng->timers, &m->rd_timer);
    if (m->rb && m->jfr) { /* still holds a buffer: give it back to the front of the queue */
        ub__list_push_front(&m->jfr->posted, &m->rb->link);
    }
    ub__ivl_reset(&m->ivl);
    if (m->cma_seg) /* rarely there: no call for nothing */
        free(m->cma_seg);
    if (m->stage)
        free(m->stage);
    msg_release(s, m);
}

/* ---- the order engine ----------------------------------------------------------------------- */

/* The JFR a request names: requests of a flow name the same one, so the last one found is
 * checked before the context's object map. */
static inline ub_jfr *jfr_by_id(struct ub__tl *s, uint32_t id)
{
    ub_jfr *r = s->jfr_last;
    if (r && r->id == id)
        return r;
    r = ub__hmap_get(&s->ctx->objs, ub__obj_key(UB__OBJ_JFR, id));
    if (r)
        s->jfr_last = r;
    return r;
}

/* Whether transaction seq of ts may run now, by its ordering fields (the extension header's
 * exec_order and fence, the tail's so_delta and ro_count). */
static bool order_ok_at(const struct ub__tstream *ts, uint32_t seq, bool fence, uint8_t eo,
                        uint16_t so_delta, uint16_t ro_count)
{
    if (fence && ts->floor != seq)
        return false;
    if (eo == UB_EXT_EO_NO)
        return true;
    uint32_t last_so = seq - so_delta;
    if (!executed(ts, last_so))
        return false;
    if (eo == UB_EXT_EO_SO)
        return ts->cur_epoch == last_so && ts->ro_done == ro_count;
    return true;
}

static bool order_ok(const struct ub__tstream *ts, const struct ub__rxmsg *m)
{
    return order_ok_at(ts, m->seq, m->fence, m->eo, m->so_delta, m->ro_count);
}

static bool ready(const struct ub__rxmsg *m)
{
    if (!m->complete)
        return false;
    if (m->rc != UB_SES_RC_OK)
        return true;
    return m->bind != BIND_WAIT;
}

/* Transaction seq of ts (ordered by eo, so_delta) ran: its epoch and executed bit. */
static void executed_at(struct ub__tstream *ts, uint32_t seq, uint8_t eo, uint16_t so_delta)
{
    if (eo == UB_EXT_EO_SO) {
        ts->cur_epoch = seq;
        ts->ro_done = 0;
    } else if (eo == UB_EXT_EO_RO && seq - so_delta == ts->cur_epoch) {
        ts->ro_done++;
    }
    mark_executed(ts, seq);
}

void ub__tgt_executed_now(struct ub__tstream *ts, struct ub__rxmsg *m)
{
    executed_at(ts, m->seq, m->eo, m->so_delta);
}

/* Whether a READ's data packet to dst may go at once: nothing waits before it (responses
 * queued, READs being streamed) and the READ pump's own limits allow it. */
static bool read_may_go(struct ub__tl *s, const struct ub__addr *dst)
{
    return ub__list_empty(&s->rdq) && ub__list_empty(&s->rspq) &&
           s->eng->pool.avail > UB_SES_POOL_RESERVE &&
           ub__pds_outstanding(s->eng->pds, dst, UB_PDS_RUD) < UB_SES_PKT_BUDGET;
}

/* Whether this target runs a fetching atomic of these fields: UB_SES_RC_OK, or why not. */
static uint8_t amo_check(uint8_t datatype, uint8_t amo, uint64_t len, uint64_t addr)
{
    if (datatype != UB_SES_DT_UINT64 && datatype != UB_SES_DT_INT64)
        return UB_SES_RC_AMO_UNSUPPORTED_DT;
    if (amo != UB_SES_AMO_CSWAP && amo != UB_SES_AMO_WRITE && amo != UB_SES_AMO_SUM &&
        amo != UB_SES_AMO_DIFF && amo != UB_SES_AMO_BAND && amo != UB_SES_AMO_BOR &&
        amo != UB_SES_AMO_BXOR)
        return UB_SES_RC_AMO_UNSUPPORTED_OP;
    if (len != 8)
        return UB_SES_RC_AMO_UNSUPPORTED_SIZE;
    return addr % 8 ? UB_SES_RC_AMO_UNALIGNED : UB_SES_RC_OK;
}

/* Runs atomic amo on the word at addr of seg (checked); returns the word's old value. */
static uint64_t amo_apply(ub_seg *seg, uint64_t addr, uint8_t amo, uint64_t compare, uint64_t v)
{
    uint64_t *word = (uint64_t *)(void *)(seg->addr + (addr - (uint64_t)(uintptr_t)seg->addr));
    uint64_t old = *word;
    switch (amo) {
    case UB_SES_AMO_CSWAP:
        if (old == compare)
            *word = v;
        break;
    case UB_SES_AMO_WRITE:
        *word = v;
        break;
    case UB_SES_AMO_SUM:
        *word = old + v;
        break;
    case UB_SES_AMO_DIFF:
        *word = old - v;
        break;
    case UB_SES_AMO_BAND:
        *word = old & v;
        break;
    case UB_SES_AMO_BOR:
        *word = old | v;
        break;
    default:
        *word = old ^ v;
        break;
    }
    return old;
}

/* Executes m; returns false if m stays alive (READ streaming, unexpected message). */
static bool exec_msg(struct ub__tl *s, struct ub__tstream *ts, struct ub__rxmsg *m, uint64_t now)
{
    ub_context *ctx = s->ctx;
    if (m->cma_unexp) {
        /* A tagged single copy that matched no buffer: not executed; the initiator sends it
         * again as packets, which take its place in the matching order. */
        s->st.cma_unexpected++;
        ub__tgt_rsp_val(s, &m->src, m->stream, m->seq, UB_SES_RC_CMA_UNEXPECTED, 0, false, 0, m->pk,
                        now);
        return true;
    }
    if (m->rc != UB_SES_RC_OK) {
        if ((m->op == UB_SES_OP_SEND || m->op == UB_SES_OP_TAGGED_SEND ||
             (m->op == UB_SES_OP_WRITE && m->jfr)) &&
            m->rb && m->rc == UB_SES_RC_TOO_LONG)
            ub__tgt_deliver_recv(s, m, now); /* the buffer was consumed: its owner learns why */
        ub__tgt_respond(s, m, m->rc, 0, false, 0, now);
        ub__tgt_executed_now(ts, m);
        return true;
    }
    if (m->cma) /* single copy: the target pulls (WRITE) or pushes (READ) now */
        return ub__tgt_cma_start(s, m, now);
    switch (m->op) {
    case UB_SES_OP_WRITE: {
        if (m->staged) {
            ub_seg *seg = NULL;
            uint8_t rc =
                ub__tgt_seg_check(ctx, m->key, m->mkey, UB_ACCESS_WRITE, m->addr, m->len, &seg);
            if (rc != UB_SES_RC_OK) {
                ub__tgt_respond(s, m, rc, 0, false, 0, now);
                ub__tgt_executed_now(ts, m);
                return true;
            }
            if (m->len)
                memcpy(seg->addr + (m->addr - (uint64_t)(uintptr_t)seg->addr), m->stage, m->len);
        }
        if (m->jfr && m->rb) {
            ub__tgt_deliver_recv(s, m, now); /* counts it executed */
        } else {
            s->st.executed++;
            ctx->writes_placed++;
        }
        ub__tgt_respond(s, m, UB_SES_RC_OK, (uint32_t)m->len, false, 0, now);
        ub__tgt_executed_now(ts, m);
        return true;
    }
    case UB_SES_OP_READ: {
        /* Small: answered now, its data in one response record (riding on the ACK of its
         * request when that is being made); of one response packet: that packet now, when
         * nothing waits before it. Otherwise streamed by ub__ses_rd_pump. */
        bool small = m->len <= UB_SES_PRSP_DATA;
        if (small || (m->len <= s->max_rsp_payload && read_may_go(s, &m->src))) {
            ub_seg *seg = NULL;
            uint8_t rc =
                ub__tgt_seg_check(ctx, m->key, m->mkey, UB_ACCESS_READ, m->addr, m->len, &seg);
            bool answered = true;
            if (small || rc != UB_SES_RC_OK)
                ub__tgt_read_answer(s, &m->src, m->stream, m->seq, m->pk, rc, seg, m->addr,
                                    (uint32_t)m->len, now);
            else
                answered = ub__tgt_read_packet(s, &m->src, m->stream, m->seq, seg, m->addr,
                                               (uint32_t)m->len, now);
            if (answered) {
                ub__tgt_executed_now(ts, m);
                s->st.executed++;
                return true;
            }
        }
        ub__tgt_rd_start(s, m);
        return false;
    }
    case UB_SES_OP_FETCHING_ATOMIC: {
        ub_seg *seg = NULL;
        uint8_t rc = ub__tgt_seg_check(ctx, m->key, m->mkey, UB_ACCESS_ATOMIC, m->addr, 8, &seg);
        if (rc != UB_SES_RC_OK) {
            ub__tgt_respond(s, m, rc, 0, false, 0, now);
            ub__tgt_executed_now(ts, m);
            return true;
        }
        uint64_t old = amo_apply(seg, m->addr, m->amo, m->compare, m->operand);
        ub__tgt_respond(s, m, UB_SES_RC_OK, 8, true, old, now);
        ub__tgt_executed_now(ts, m);
        s->st.executed++;
        return true;
    }
    default: /* SEND, TAGGED_SEND */
        if (m->rndv) {
            if (m->bind == BIND_UNEXP) {
                /* Parked: matched in order, bulk READ once a buffer matches. The sender
                 * learns the target holds it, and hears so again while it waits
                 * (UB_SES_PARK_REFRESH_NS): its bound on a parked message. */
                ub__tgt_respond(s, m, UB_SES_RC_PENDING, 0, false, 0, now);
                ub__tgt_executed_now(ts, m);
                msg_untrack(ts, m);
                m->ts = NULL;
                ub__tgt_rndv_park(s, m, now);
                return false;
            }
            ub__tgt_executed_now(ts, m);
            msg_untrack(ts, m);
            m->ts = NULL;
            return ub__tgt_rndv_begin(s, m, now);
        }
        if (m->bind == BIND_UNEXP) {
            /* Buffered: the sender is done; the receiver gets it when a buffer matches. */
            ub__tgt_respond(s, m, UB_SES_RC_OK, (uint32_t)m->len, false, 0, now);
            ub__tgt_executed_now(ts, m);
            msg_untrack(ts, m);
            m->ts = NULL;
            return false;
        }
        if (m->staged && m->stage && m->len <= m->rb->cap)
            ub__tgt_rbuf_place(m->rb, 0, m->stage, m->wire_len);
        ub__tgt_deliver_recv(s, m, now);
        ub__tgt_respond(s, m, UB_SES_RC_OK, (uint32_t)m->len, false, 0, now);
        ub__tgt_executed_now(ts, m);
        return true;
    }
}

/* Executes every waiting transaction of ts whose turn has come, until none is left. */
void ub__tgt_try_exec(struct ub__tl *s, struct ub__tstream *ts, uint64_t now)
{
    for (bool progress = true; progress;) {
        progress = false;
        struct ub__list *it, *tmp;
        UB_LIST_FOR_EACH_SAFE(it, tmp, &ts->waiting)
        {
            struct ub__rxmsg *m = UB_CONTAINER_OF(it, struct ub__rxmsg, link);
            if (!ready(m) || !order_ok(ts, m))
                continue;
            ub__list_remove(&m->link);
            m->on_wait = false;
            if (exec_msg(s, ts, m, now))
                ub__tgt_msg_free(s, m);
            progress = true;
            break; /* the list may have changed under us */
        }
    }
}

/* The whole transaction is here (or it was refused): queue it for the order engine. */
static void on_complete(struct ub__tl *s, struct ub__tstream *ts, struct ub__rxmsg *m, uint64_t now)
{
    m->complete = true;
    if (m->rc == UB_SES_RC_OK && m->cma_refuse) {
        /* No single copy here: not executed; the initiator sends it again as packets. */
        s->st.cma_refused++;
        ub__tgt_rsp_val(s, &m->src, m->stream, m->seq, UB_SES_RC_CMA_REFUSED, 0, false, 0, m->pk,
                        now);
        ub__tgt_msg_free(s, m);
        return;
    }
    if (m->rc == UB_SES_RC_OK && m->bind == BIND_RNR) {
        /* Not executed: the initiator sends the same transaction again, when we ask for it
         * (deferred: DEFER_RTR once a buffer is posted) or after a back-off (RNR). */
        uint8_t rc = UB_SES_RC_RNR;
        if (m->deferrable && m->jfr && ub__tgt_defer_add(m->jfr, &m->src, m->restart)) {
            rc = UB_SES_RC_DEFERRED;
            s->st.deferred_sent++;
        } else {
            s->st.rnr_sent++;
        }
        ub__tgt_rsp_val(s, &m->src, m->stream, m->seq, rc, 0, false, 0, m->pk, now);
        if (m->rb) { /* never holds one when RNR; defensive */
            ub__tgt_rbuf_free(m->jfr, m->rb);
            m->rb = NULL;
        }
        ub__tgt_msg_free(s, m);
        return;
    }
    if (ub__list_empty(&ts->waiting) && ready(m) && order_ok(ts, m)) {
        /* Nothing waits before it and its turn has come (a message in order): what the
         * order engine would do with it alone, without the queue. */
        if (exec_msg(s, ts, m, now))
            ub__tgt_msg_free(s, m);
        return;
    }
    ub__list_push_back(&ts->waiting, &m->link);
    m->on_wait = true;
    ub__tgt_try_exec(s, ts, now);
}

/* ---- requests ----------------------------------------------------------------------------------
 */

/* *seg: a WRITE's segment, found valid by the check here (for this call only). late: m goes
 * into ts->msgs only if it outlives the handling of this packet (see ub__ses_on_req). */
static struct ub__rxmsg *msg_new(struct ub__tl *s, struct ub__tstream *ts,
                                 const struct ub__pds_rx *rx, const struct ub__ses_tail *t,
                                 uint64_t now, bool late, ub_seg **seg)
{
    const struct ub__wire_dgram *d = rx->hdr;
    const struct ub__ses_std *q = &d->ses.u.std;
    ub_context *ctx = s->ctx;
    struct ub__rxmsg *m = msg_alloc(s);
    if (!m)
        return NULL;
    ub__list_init(&m->link);
    ub__list_init(&m->ulink);
    m->ts = ts;
    m->src = *rx->src;
    m->stream = d->ext.stream;
    m->seq = d->ext.order_seq;
    m->eo = d->ext.exec_order;
    m->fence = d->ext.fence;
    m->so_delta = t->so_delta;
    m->ro_count = t->ro_count;
    m->send_seq = t->send_seq;
    m->aux = t->aux & 0xffffffu;
    m->solicited = ((t->aux >> 24) & UB_SES_TAIL_S) != 0;
    m->deferrable = ((t->aux >> 24) & UB_SES_TAIL_D) != 0;
    m->pk = ((t->aux >> 24) & UB_SES_TAIL_A) != 0;
    m->restart = q->buffer_offset;
    m->op = q->opcode;
    ub__timer_init(&m->rd_timer, ub__tgt_rndv_timeout);
    /* Deferrable and rendezvous messages are messages: one code path from here on. */
    if (m->op == UB_SES_OP_DEFER_SEND) {
        m->op = UB_SES_OP_SEND;
        m->deferrable = true;
    } else if (m->op == UB_SES_OP_DEFER_TSEND) {
        m->op = UB_SES_OP_TAGGED_SEND; /* never deferred: unmatched ones are buffered */
        m->deferrable = false;
    } else if (m->op == UB_SES_OP_RNDV_SEND || m->op == UB_SES_OP_RNDV_TSEND) {
        m->op = m->op == UB_SES_OP_RNDV_SEND ? UB_SES_OP_SEND : UB_SES_OP_TAGGED_SEND;
        m->rndv = true;
    }
    if (m->op == UB_SES_OP_TAGGED_SEND)
        m->deferrable = false;
    m->key = ub__ses_std_key(q);
    m->addr = q->buffer_offset;
    m->mkey = q->mem_key;
    m->initiator = q->initiator;
    m->len = q->request_length;
    m->wire_len = m->len;
    m->rc = UB_SES_RC_OK;
    if (m->rndv) { /* the request carries the eager part; the rest is READ from read_offset */
        const struct ub__ses_rndv *r = &d->ses.rndv;
        m->wire_len = r->eager_length;
        m->rd_off = r->read_offset;
        m->rd_key = r->read_mem_key;
        m->rd_jfs = ((uint32_t)r->pid_on_fep << 12) | r->resource_index;
        if (r->eager_length > m->len || r->read_offset != r->eager_length)
            m->rc = UB_SES_RC_UNSUPPORTED_SIZE;
    }
    if (late) {
        s->msg_live = m;
    } else {
        if (ub__hmap_put(&ts->msgs, m->seq, m)) {
            msg_release(s, m);
            return NULL;
        }
        m->in_map = true;
    }
    m->cma = ((t->aux >> 24) & UB_SES_TAIL_C) != 0;
    if (m->cma) { /* one request packet; refused (before any binding) if we cannot copy */
        m->wire_len = 0;
        m->cma_refuse = !ub__tgt_cma_allowed(s, m);
    }
    switch (m->op) {
    case UB_SES_OP_WRITE:
        m->rc = ub__tgt_seg_check(ctx, m->key, m->mkey, UB_ACCESS_WRITE, m->addr, m->len, seg);
        if (m->rc == UB_SES_RC_OK && m->aux &&
            !m->cma_refuse) { /* WRITE_IMM: a record in the target JFR */
            m->jfr = jfr_by_id(s, m->aux);
            if (!m->jfr || m->jfr->attr.tag_matching)
                m->rc = UB_SES_RC_BAD_INDEX;
            else
                m->bind = ub__tgt_bind_untagged(m) ? BIND_BUF : BIND_RNR;
        }
        /* Data must not become visible before its turn: stage it until then (a single
         * copy is pulled only when its turn comes). */
        m->staged = m->rc == UB_SES_RC_OK && m->bind != BIND_RNR && !m->cma && !order_ok(ts, m);
        break;
    case UB_SES_OP_READ:
        m->rc = ub__tgt_seg_check(ctx, m->key, m->mkey, UB_ACCESS_READ, m->addr, m->len, NULL);
        m->wire_len = 0;
        break;
    case UB_SES_OP_FETCHING_ATOMIC: {
        const struct ub__ses_atomic *a = &d->ses.atomic;
        m->wire_len = 0;
        m->amo = a->opcode;
        m->rc = amo_check(a->datatype, m->amo, m->len, m->addr);
        if (m->rc == UB_SES_RC_OK)
            m->rc = ub__tgt_seg_check(ctx, m->key, m->mkey, UB_ACCESS_ATOMIC, m->addr, 8, NULL);
        if (ub__ses_amo_is_cswap(m->amo)) {
            m->compare = ub__ld64(a->compare);
            m->operand = ub__ld64(a->swap);
        } else if (rx->payload_len == 8) {
            m->operand = ub__ld64(rx->payload);
        } else if (m->rc == UB_SES_RC_OK) {
            m->rc = UB_SES_RC_AMO_UNSUPPORTED_SIZE;
        }
        break;
    }
    case UB_SES_OP_SEND:
    case UB_SES_OP_TAGGED_SEND: {
        bool tagged = m->op == UB_SES_OP_TAGGED_SEND;
        m->jfr = jfr_by_id(s, m->key);
        if (!m->jfr) {
            m->rc = UB_SES_RC_BAD_INDEX;
            break;
        }
        if (m->jfr->attr.tag_matching != tagged) {
            m->rc = UB_SES_RC_UNSUPPORTED_OP;
            m->jfr = NULL;
            break;
        }
        if (m->cma_refuse)
            break; /* sent again as packets, bound then */
        if (tagged) {
            ub__tgt_bind_tagged_in_order(s, m, now);
            m->staged = m->bind != BIND_BUF;
        } else {
            m->bind = ub__tgt_bind_untagged(m) ? BIND_BUF : BIND_RNR;
            if (m->bind == BIND_BUF && m->len > m->rb->cap)
                m->rc = UB_SES_RC_TOO_LONG;
        }
        break;
    }
    default:
        m->rc = UB_SES_RC_UNSUPPORTED_OP;
        break;
    }
    if (m->cma && m->rc == UB_SES_RC_OK && !m->cma_refuse)
        m->rc = ub__tgt_cma_parse(s, m, rx->payload, rx->payload_len);
    return m;
}

/* seg: m's segment if this very call checked it already (NULL: check it here). */
static void place(struct ub__tl *s, struct ub__rxmsg *m, uint64_t off, const uint8_t *p, uint32_t n,
                  ub_seg *seg)
{
    if (!n || m->rc != UB_SES_RC_OK || m->bind == BIND_RNR)
        return;
    if (off + n > m->wire_len) {
        m->rc = UB_SES_RC_TOO_LONG;
        return;
    }
    if (m->staged || m->bind == BIND_WAIT || m->bind == BIND_UNEXP) {
        ub__tgt_stage_put(s, m, off, p, n);
        return;
    }
    switch (m->op) {
    case UB_SES_OP_WRITE: {
        /* Checked on every packet: unregistering revokes at once (nothing can unregister
         * between the check of a first packet and its placement in the same call). */
        uint8_t rc = seg ? UB_SES_RC_OK
                         : ub__tgt_seg_check(s->ctx, m->key, m->mkey, UB_ACCESS_WRITE, m->addr,
                                             m->len, &seg);
        if (rc != UB_SES_RC_OK) {
            m->rc = rc;
            return;
        }
        memcpy(seg->addr + (m->addr - (uint64_t)(uintptr_t)seg->addr) + off, p, n);
        return;
    }
    case UB_SES_OP_SEND:
    case UB_SES_OP_TAGGED_SEND:
        if (!m->rb || off + n > m->rb->cap)
            return;
        if (m->rb->num_sge && off + n <= m->rb->sge[0].len) /* in the first element: one copy */
            memcpy((uint8_t *)m->rb->sge[0].addr + off, p, n);
        else
            ub__tgt_rbuf_place(m->rb, off, p, n);
        return;
    default:
        return;
    }
}

/*
 * A READ small enough to ride, delivered again after it ran (through a re-established PDC):
 * its data may have ridden on an ACK lost with the old PDC, and no response with data is kept
 * here, so it is read again, as RDMA READs are; the initiator drops a second answer as stale.
 */
static void read_again(struct ub__tl *s, const struct ub__addr *src, const struct ub__ext *x,
                       const struct ub__ses_std *q, bool pk, uint64_t now)
{
    uint32_t len = q->request_length;
    ub_seg *seg = NULL;
    uint8_t rc = ub__tgt_seg_check(s->ctx, ub__ses_std_key(q), q->mem_key, UB_ACCESS_READ,
                                   q->buffer_offset, len, &seg);
    s->st.dup_executed++;
    if (len <= UB_SES_PRSP_DATA || rc != UB_SES_RC_OK)
        ub__tgt_read_answer(s, src, x->stream, x->order_seq, pk, rc, seg, q->buffer_offset, len,
                            now);
    else if (len <= s->max_rsp_payload && read_may_go(s, src))
        (void)ub__tgt_read_packet(s, src, x->stream, x->order_seq, seg, q->buffer_offset, len, now);
}

static void resend_cached(struct ub__tl *s, struct ub__tstream *ts, uint32_t seq, uint64_t now)
{
    const struct ub__rspc *c = &ts->cache[seq % UB_SES_RSP_CACHE];
    if (!c->valid || c->seq != seq)
        return;
    s->st.rsp_resent++;
    ub__tgt_rsp_val(s, &ts->src, ts->id, seq, c->rc, c->len, c->has_val, c->val, ts->pk, now);
}

/* The end of a late message's first packet: if m is still alive and in its stream, it enters
 * the map now (room was checked before, and nothing in between adds to it). */
static void msg_outlives(struct ub__tl *s, struct ub__tstream *ts, struct ub__rxmsg *m)
{
    if (s->msg_live != m)
        return; /* freed */
    s->msg_live = NULL;
    if (m->ts && !ub__hmap_put(&ts->msgs, m->seq, m))
        m->in_map = true;
}

/* A fast path's receive record: the request q (tail flags tf), the next of its stream's sends
 * to jfr (sq), recorded in rb, a buffer posted to jfr (tagged: with the message's tag). */
static UB_ALWAYS_INLINE void fast_record(struct ub__tl *s, ub_jfr *jfr, struct ub__send_seq *sq,
                                         struct ub__rbuf *rb, enum ub_cr_opcode op,
                                         const struct ub__ses_std *q, const struct ub__addr *src,
                                         uint8_t tf)
{
    sq->next++;
    ub__list_remove(&rb->link);
    struct ub_cr *cr = ub__tgt_recv_cr(jfr);
    cr->status = UB_CR_SUCCESS;
    cr->opcode = op;
    cr->length = q->request_length;
    cr->remote_id = q->initiator;
    if (q->flags & UB_SES_F_HD) {
        cr->flags = UB_CR_F_IMM;
        cr->imm_data = q->header_data;
    }
    if (q->opcode == UB_SES_OP_TAGGED_SEND) {
        cr->flags |= UB_CR_F_TAG;
        cr->tag = q->mem_key;
    }
    ub__tgt_recv_done(s, jfr, rb, cr, src, (tf & UB_SES_TAIL_S) != 0);
}

static UB_ALWAYS_INLINE struct ub__rbuf *first_posted(ub_jfr *jfr)
{
    return UB_CONTAINER_OF(jfr->posted.next, struct ub__rbuf, link);
}

/*
 * The usual message taken whole, without a message record from the cache: a SEND whose
 * buffer holds it in one piece (untagged: its JFR's first posted one; tagged: the first
 * posted one its tag matches), the next of its stream's sends to that JFR. The caller
 * checked that it is one packet whose turn has come (nothing waits in its stream and its
 * order is met). What msg_new, place, on_complete and exec_msg do for such a message, with
 * the same effects (test_api_fast plays ping-pongs both ways and compares the bytes sent and
 * the records). false: not such a message, and nothing was changed (the JFR, send-order
 * entry and buffer looked up are what msg_new would look up, too).
 */
static UB_ALWAYS_INLINE bool fast_send(struct ub__tl *s, struct ub__tstream *ts,
                                       const struct ub__addr *src, const struct ub__ext *x,
                                       const struct ub__ses_std *q, const uint8_t *payload,
                                       const struct ub__ses_tail *t, uint64_t now)
{
    uint8_t tf = (uint8_t)(t->aux >> 24);
    uint32_t len = q->request_length;
    bool tagged = q->opcode == UB_SES_OP_TAGGED_SEND;
    ub_jfr *jfr = jfr_by_id(s, ub__ses_std_key(q));
    if (!jfr || jfr->attr.tag_matching != tagged || ub__list_empty(&jfr->posted))
        return false;
    struct ub__send_seq *sq = ub__send_seq_of(&ts->ss, jfr->id);
    struct ub__rbuf *rb = first_posted(jfr);
    if (UB_UNLIKELY(tagged) && !(rb = ub__tgt_first_match(jfr, q->mem_key)))
        return false;
    if (!sq || sq->next != t->send_seq || len > rb->cap || !rb->num_sge || len > rb->sge[0].len)
        return false;
    if (len)
        memcpy(rb->sge[0].addr, payload, len);
    fast_record(s, jfr, sq, rb, UB_CR_OP_RECV, q, src, tf);
    ub__tgt_respond_in(s, ts, src, x->stream, x->order_seq, (tf & UB_SES_TAIL_A) != 0, UB_SES_RC_OK,
                       len, false, 0, now);
    return true;
}

/*
 * The usual WRITE taken whole: into a segment it may write, and for a WRITE_IMM with the
 * record in its JFR's first posted buffer, the next of its stream's sends to that JFR.
 * Under the same conditions and with the same effects as fast_send; a WRITE the segment
 * check refuses takes the general path, which answers why.
 */
static UB_ALWAYS_INLINE bool fast_write(struct ub__tl *s, struct ub__tstream *ts,
                                        const struct ub__addr *src, const struct ub__ext *x,
                                        const struct ub__ses_std *q, const uint8_t *payload,
                                        const struct ub__ses_tail *t, uint64_t now)
{
    uint8_t tf = (uint8_t)(t->aux >> 24);
    uint32_t len = q->request_length, imm_jfr = t->aux & 0xffffffu;
    ub_seg *seg;
    if (ub__tgt_seg_check(s->ctx, ub__ses_std_key(q), q->mem_key, UB_ACCESS_WRITE, q->buffer_offset,
                          len, &seg) != UB_SES_RC_OK)
        return false;
    ub_jfr *jfr = NULL;
    struct ub__send_seq *sq = NULL;
    if (imm_jfr) {
        jfr = jfr_by_id(s, imm_jfr);
        if (!jfr || jfr->attr.tag_matching || ub__list_empty(&jfr->posted) ||
            !(sq = ub__send_seq_of(&ts->ss, jfr->id)) || sq->next != t->send_seq)
            return false;
    }
    if (len)
        memcpy(seg->addr + (q->buffer_offset - (uint64_t)(uintptr_t)seg->addr), payload, len);
    if (jfr) {
        fast_record(s, jfr, sq, first_posted(jfr), UB_CR_OP_RECV_WRITE_IMM, q, src, tf);
    } else {
        s->st.executed++;
        s->ctx->writes_placed++;
    }
    ub__tgt_respond_in(s, ts, src, x->stream, x->order_seq, (tf & UB_SES_TAIL_A) != 0, UB_SES_RC_OK,
                       len, false, 0, now);
    return true;
}

/*
 * The usual fetching atomic taken whole: one this target runs, on a word of a segment it may
 * change. Under the same conditions and with the same effects as fast_send; anything the
 * checks refuse takes the general way, which answers why.
 */
static UB_ALWAYS_INLINE bool fast_atomic(struct ub__tl *s, struct ub__tstream *ts,
                                         const struct ub__addr *src, const struct ub__ext *x,
                                         const struct ub__ses_std *q,
                                         const struct ub__ses_atomic *a, const uint8_t *payload,
                                         uint32_t payload_len, const struct ub__ses_tail *t,
                                         uint64_t now)
{
    uint64_t compare = 0, operand, addr = q->buffer_offset;
    if (ub__ses_amo_is_cswap(a->opcode)) {
        compare = ub__ld64(a->compare);
        operand = ub__ld64(a->swap);
    } else if (payload_len == 8) {
        operand = ub__ld64(payload);
    } else {
        return false;
    }
    ub_seg *seg;
    if (amo_check(a->datatype, a->opcode, q->request_length, addr) != UB_SES_RC_OK ||
        ub__tgt_seg_check(s->ctx, ub__ses_std_key(q), q->mem_key, UB_ACCESS_ATOMIC, addr, 8,
                          &seg) != UB_SES_RC_OK)
        return false;
    uint64_t old = amo_apply(seg, addr, a->opcode, compare, operand);
    s->st.executed++;
    ub__tgt_respond_in(s, ts, src, x->stream, x->order_seq, ((t->aux >> 24) & UB_SES_TAIL_A) != 0,
                       UB_SES_RC_OK, 8, true, old, now);
    return true;
}

/*
 * The usual READ taken whole: at most a response packet's data from a segment it may read,
 * answered at once as exec_msg answers it. Under the same conditions as fast_send.
 */
static UB_ALWAYS_INLINE bool fast_read(struct ub__tl *s, const struct ub__addr *src,
                                       const struct ub__ext *x, const struct ub__ses_std *q,
                                       const struct ub__ses_tail *t, uint64_t now)
{
    uint32_t len = q->request_length;
    bool small = len <= UB_SES_PRSP_DATA;
    ub_seg *seg;
    if ((!small && (len > s->max_rsp_payload || !read_may_go(s, src))) ||
        ub__tgt_seg_check(s->ctx, ub__ses_std_key(q), q->mem_key, UB_ACCESS_READ, q->buffer_offset,
                          len, &seg) != UB_SES_RC_OK)
        return false;
    if (small)
        ub__tgt_read_answer(s, src, x->stream, x->order_seq, ((t->aux >> 24) & UB_SES_TAIL_A) != 0,
                            UB_SES_RC_OK, seg, q->buffer_offset, len, now);
    else if (!ub__tgt_read_packet(s, src, x->stream, x->order_seq, seg, q->buffer_offset, len, now))
        return false;
    s->st.executed++;
    return true;
}

/*
 * A request in one packet whose turn has come (nothing waits in its stream and its order is
 * met), the usual SEND, WRITE, READ or fetching atomic (a: its extension; NULL: none came):
 * executed here, without a message record. false: not taken, nothing changed; it goes the
 * general way.
 */
static UB_ALWAYS_INLINE bool fast_req(struct ub__tl *s, struct ub__tstream *ts,
                                      const struct ub__addr *src, const struct ub__ext *x,
                                      const struct ub__ses_std *q, const struct ub__ses_atomic *a,
                                      const uint8_t *payload, uint32_t payload_len,
                                      const struct ub__ses_tail *t, uint64_t now)
{
    bool send = q->opcode == UB_SES_OP_SEND || q->opcode == UB_SES_OP_DEFER_SEND ||
                q->opcode == UB_SES_OP_TAGGED_SEND;
    bool write = q->opcode == UB_SES_OP_WRITE;
    bool amo = a && q->opcode == UB_SES_OP_FETCHING_ATOMIC;
    bool read = q->opcode == UB_SES_OP_READ && !payload_len;
    /* An atomic or a READ is one packet whatever its EOM says, and carries no message. */
    if (!(send || write || amo || read) || !(q->flags & UB_SES_F_SOM) ||
        (!amo && !read && (!(q->flags & UB_SES_F_EOM) || payload_len != q->request_length)) ||
        ((t->aux >> 24) & UB_SES_TAIL_C) || ts->msgs.count || !ub__list_empty(&ts->waiting) ||
        !order_ok_at(ts, x->order_seq, x->fence, x->exec_order, t->so_delta, t->ro_count))
        return false;
    if (!(send    ? fast_send(s, ts, src, x, q, payload, t, now)
          : write ? fast_write(s, ts, src, x, q, payload, t, now)
          : read  ? fast_read(s, src, x, q, t, now)
                  : fast_atomic(s, ts, src, x, q, a, payload, payload_len, t, now)))
        return false;
    executed_at(ts, x->order_seq, x->exec_order, t->so_delta);
    s->st.rx_fast++;
    return true;
}

bool ub__ses_link_req(struct ub__tl *s, const struct ub__addr *src,
                      const struct ub__wire_link_req *r, uint64_t now)
{
    /* What ub__ses_on_req would check before fast_req, and what on_deliver would route
     * elsewhere (packed requests, a response asked for on the ACK, rendezvous reads). */
    if (!s->fast || r->ext.version < 1 || r->ext.tail_len < UB_SES_TAIL_LEN)
        return false;
    struct ub__ses_tail t;
    ub__ses_tail_get(r->ext.tail, &t);
    uint8_t tf = (uint8_t)(t.aux >> 24);
    if (tf & (UB_SES_TAIL_R | UB_SES_TAIL_P | UB_SES_TAIL_K))
        return false;
    struct ub__tstream *ts = tstream_get(s, src, r->ext.incarnation, r->ext.stream, now);
    uint32_t seq = r->ext.order_seq;
    if (!ts || executed(ts, seq) || ub__seq_diff(seq, ts->floor) >= UB_SES_WINDOW)
        return false;
    ts->pk = (tf & UB_SES_TAIL_A) != 0;
    if (!fast_req(s, ts, src, &r->ext, &r->std, r->has_atomic ? &r->atomic : NULL, r->payload,
                  r->payload_len, &t, now))
        return false;
    s->st.rx_req_pkts++;
    return true;
}

void ub__ses_on_req(struct ub__tl *s, const struct ub__pds_rx *rx, uint64_t now)
{
    const struct ub__wire_dgram *d = rx->hdr;
    const struct ub__ses_std *q = &d->ses.u.std;
    s->st.rx_req_pkts++;
    if (d->ext.version < 1 || d->ext.tail_len < UB_SES_TAIL_LEN) {
        s->st.rx_bad_pkts++;
        return;
    }
    struct ub__ses_tail t;
    ub__ses_tail_get(d->ext.tail, &t);
    if (q->opcode == UB_SES_OP_DEFER_RTR) { /* a target we sent to has a buffer now */
        ub__ses_on_rtr(s, rx->src, q->mem_key, now);
        return;
    }
    if ((t.aux >> 24) & UB_SES_TAIL_R) { /* a target READs a rendezvous message of ours */
        ub__ses_rndv_serve(s, rx, &t, now);
        return;
    }
    struct ub__tstream *ts = tstream_get(s, rx->src, rx->incarnation, d->ext.stream, now);
    if (!ts) {
        s->st.rx_bad_pkts++;
        return;
    }
    ts->pk = ((t.aux >> 24) & UB_SES_TAIL_A) != 0;
    uint32_t seq = d->ext.order_seq;
    if (executed(ts, seq)) {
        /* A re-delivered transaction that already ran: never again; its answer goes again. */
        s->st.rx_dup_pkts++;
        if ((q->flags & UB_SES_F_SOM) && q->opcode == UB_SES_OP_READ &&
            q->request_length <= UB_SES_RIDE_DATA)
            read_again(s, rx->src, &d->ext, q, ts->pk, now);
        else if (q->flags & UB_SES_F_SOM)
            resend_cached(s, ts, seq, now);
        return;
    }
    if (ub__seq_diff(seq, ts->floor) >= UB_SES_WINDOW) {
        s->st.rx_bad_pkts++;
        return;
    }
    const struct ub__ses_atomic *a = d->ses.ext == UB_SES_EXT_ATOMIC ? &d->ses.atomic : NULL;
    if (s->fast && fast_req(s, ts, rx->src, &d->ext, q, a, rx->payload, rx->payload_len, &t, now))
        return;
    struct ub__rxmsg *m = ts->msgs.count ? ub__hmap_get(&ts->msgs, seq) : NULL;
    ub_seg *seg = NULL;
    bool som = (q->flags & UB_SES_F_SOM) != 0;
    bool late = false, created = !m;
    if (!m) {
        /* A whole message in one packet usually executes and is freed before this call
         * returns: it enters the map (which finds its re-delivered packets) only if it
         * outlives the call. Not for tagged and rendezvous messages (matching walks the
         * map) nor single copies; and only when the insert later cannot need memory. */
        uint8_t op = q->opcode;
        late = som && !((t.aux >> 24) & UB_SES_TAIL_C) && ts->msgs.slots &&
               (uint64_t)(ts->msgs.count + 1) * 4 <= (uint64_t)(ts->msgs.mask + 1) * 3 &&
               (op == UB_SES_OP_READ || op == UB_SES_OP_FETCHING_ATOMIC ||
                ((op == UB_SES_OP_WRITE || op == UB_SES_OP_SEND || op == UB_SES_OP_DEFER_SEND) &&
                 rx->payload_len == q->request_length));
        m = msg_new(s, ts, rx, &t, now, late, &seg);
        if (!m) {
            s->st.rx_bad_pkts++;
            return;
        }
    } else if (m->complete || m->running || m->cma != (((t.aux >> 24) & UB_SES_TAIL_C) != 0)) {
        /* Over, or the other form of it (a single-copy request re-delivered after its
         * packet resend began): never mixed. */
        s->st.rx_dup_pkts++;
        return;
    }
    uint64_t off = som ? 0 : q->message_offset;
    uint32_t n = m->op == UB_SES_OP_FETCHING_ATOMIC || m->op == UB_SES_OP_READ || m->cma
                     ? 0
                     : rx->payload_len;
    if (n > m->wire_len || off > m->wire_len - n) { /* beyond the request's (eager) bytes */
        s->st.rx_bad_pkts++;
        if (m->rc == UB_SES_RC_OK)
            m->rc = UB_SES_RC_TOO_LONG;
        if (!m->complete)
            on_complete(s, ts, m, now);
        if (late)
            msg_outlives(s, ts, m);
        return;
    }
    /* A packet seen before (re-delivered through a re-established PDC) counts once. */
    uint64_t fresh = 0;
    if (created && n && !m->ivl.n && !m->ivl.cap) {
        /* A new message's first bytes (ub__ivl_add's first case, without the call). */
        m->ivl.inl[0] = off;
        m->ivl.inl[1] = off + n;
        m->ivl.n = 1;
        m->ivl.total = fresh = n;
    } else if (ub__ivl_add(&m->ivl, off, off + n, &fresh)) {
        s->st.rx_bad_pkts++;
        if (late)
            msg_outlives(s, ts, m);
        return;
    }
    s->st.dup_bytes += n - fresh;
    if (n ? fresh == 0 : (!som || m->som_seen)) {
        s->st.rx_dup_pkts++;
        if (late)
            msg_outlives(s, ts, m);
        return;
    }
    if (som) {
        m->som_seen = true;
        if (q->flags & UB_SES_F_HD) {
            m->has_imm = true;
            m->imm = q->header_data;
        }
    }
    place(s, m, off, rx->payload, n, seg);
    m->got = m->ivl.total;
    if (m->som_seen && m->got >= m->wire_len)
        on_complete(s, ts, m, now);
    if (late)
        msg_outlives(s, ts, m);
}

void ub__ses_tgt_fini(struct ub__tl *s)
{
    ub__ses_cma_fini(s);
    ub__ses_rsp_fini(s);
    uint64_t k;
    void *v;
    while (s->rndv.slots && ub__hmap_next(&s->rndv, 0, &k, &v))
        ub__tgt_msg_free(s, v);
    while (s->tstreams.slots && ub__hmap_next(&s->tstreams, 0, &k, &v))
        tstream_free(s, v);
    while (s->nmsg_cache) /* last: freeing the streams above fills it */
        free(s->msg_cache[--s->nmsg_cache]);
}
