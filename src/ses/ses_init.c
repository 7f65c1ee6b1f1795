/*
 * The initiator: posting work requests into berths, order streams, cutting
 * requests into packets for PDS, responses, RNR retries, failures, and the
 * completion order (in-order completion per JFS).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "core/compiler.h"
#include "core/seq.h"
#include "ses/ses.h"
#include "wire/datagram.h"

static uint64_t pend_key(uint16_t stream, uint32_t seq)
{
    return ((uint64_t)stream << 32) | seq;
}

uint64_t ub__ses_wr_cookie(const struct ub__wr *w)
{
    return ((uint64_t)w->jfs->id << 40) | ((uint64_t)w->idx << 24) | (w->gen & 0xffffffu);
}

/* The request a PDS cookie names, if it is still the same active request. */
struct ub__wr *ub__ses_wr_of_cookie(struct ub__tl *s, uint64_t cookie)
{
    return ub__ses_wr_in_jfs(ub__ses_jfs_of_cookie(s, cookie), cookie);
}

ub_jfs *ub__ses_jfs_of_cookie(struct ub__tl *s, uint64_t cookie)
{
    uint32_t id = (uint32_t)(cookie >> 40);
    ub_jfs *j = s->jfs_last; /* the one JFS of a ping-pong: no hash lookup per ACK */
    if (j && j->id == id)
        return j;
    j = ub__hmap_get(&s->ctx->objs, ub__obj_key(UB__OBJ_JFS, id));
    if (j)
        s->jfs_last = j;
    return j;
}

struct ub__wr *ub__ses_wr_in_jfs(ub_jfs *jfs, uint64_t cookie)
{
    uint16_t idx = (uint16_t)(cookie >> 24);
    uint32_t gen = (uint32_t)cookie & 0xffffffu;
    if (!jfs || idx >= jfs->attr.depth)
        return NULL;
    struct ub__wr *w = &jfs->wrs[idx];
    if (w->state != WR_ACTIVE || (w->gen & 0xffffffu) != gen)
        return NULL;
    return w;
}

/* ---- active requests by (stream, order_seq) ---------------------------------------------- */

/* Most are in their stream's window (no hashing per request); the rest in s->pending. */
static int pend_put(struct ub__tl *s, struct ub__ostream *os, struct ub__wr *w)
{
    if (os->win && !os->orphan && !os->win[w->seq & os->wmask]) {
        os->win[w->seq & os->wmask] = w;
        return 0;
    }
    return ub__hmap_put(&s->pending, pend_key(os->id, w->seq), w);
}

static void pend_del(struct ub__tl *s, struct ub__wr *w)
{
    struct ub__ostream *os = w->os;
    if (os->win && os->win[w->seq & os->wmask] == w)
        os->win[w->seq & os->wmask] = NULL;
    else
        ub__hmap_del(&s->pending, pend_key(os->id, w->seq));
}

static struct ub__wr *pend_get(struct ub__tl *s, uint16_t stream, uint32_t seq)
{
    struct ub__ostream *os = s->os_last; /* responses mostly name the stream of the last one */
    if (!os || os->id != stream)
        os = s->os_last = ub__hmap_get(&s->ostreams_by_id, stream);
    if (os && os->win) {
        struct ub__wr *w = os->win[seq & os->wmask];
        if (w && w->seq == seq)
            return w;
    }
    return ub__hmap_get(&s->pending, pend_key(stream, seq));
}

/* os leaves the stream ids' map (and so the last one looked up). */
static void os_unmap(struct ub__tl *s, struct ub__ostream *os)
{
    ub__hmap_del(&s->ostreams_by_id, os->id);
    if (s->os_last == os)
        s->os_last = NULL;
}

/* os leaves the tables (its id may be reused): its window's requests move to s->pending. */
static void pend_orphan(struct ub__tl *s, struct ub__ostream *os)
{
    for (uint32_t i = 0; os->win && i <= os->wmask; i++) {
        struct ub__wr *w = os->win[i];
        if (w) {
            os->win[i] = NULL;
            (void)ub__hmap_put(&s->pending, pend_key(os->id, w->seq),
                               w); /* else: ends by its bound */
        }
    }
}

static void ostream_free(struct ub__ostream *os)
{
    free(os->win);
    free(os->ss.v);
    free(os);
}

struct ub__wr *ub__ses_pending(struct ub__tl *s, uint16_t stream, uint32_t seq)
{
    struct ub__wr *w = pend_get(s, stream, seq);
    return w && w->state == WR_ACTIVE ? w : NULL;
}

/* ---- order streams ---------------------------------------------------------------------- */

static struct ub__ostream *ostream_get(struct ub__tl *s, ub_jfs *jfs, const struct ub__addr *dst)
{
    struct ub__ostream *last = jfs->os_last;
    if (last && !last->broken && ub__addr_eq(&last->dst, dst))
        return last;
    jfs->os_last = NULL;
    uint64_t key = ub__addr_hash(dst, 0x6f73);
    struct ub__ostream *os = ub__hmap_get(&jfs->ostreams, key);
    if (os && !os->broken && ub__addr_eq(&os->dst, dst))
        return jfs->os_last = os;
    if (os) { /* broken (or a hash collision): retire it once nothing refers to it */
        ub__hmap_del(&jfs->ostreams, key);
        os_unmap(s, os);
        if (!os->outstanding) {
            ostream_free(os);
        } else {
            os->orphan = true;
            pend_orphan(s, os);
        }
    }
    os = calloc(1, sizeof(*os));
    if (!os)
        return NULL;
    uint32_t wn = 8;
    while (wn < jfs->attr.depth && wn < UB_SES_OS_WINDOW)
        wn <<= 1;
    os->win = calloc(wn, sizeof(*os->win)); /* none: every request goes to s->pending */
    os->wmask = os->win ? wn - 1 : 0;
    os->jfs = jfs;
    os->dst = *dst;
    os->key = key;
    os->last_so = UINT32_MAX; /* stream start: a virtual SO at -1 that has executed */
    for (int tries = 0; tries < 65536; tries++) {
        uint16_t id = s->next_stream++;
        if (!ub__hmap_get(&s->ostreams_by_id, id)) {
            os->id = id;
            break;
        }
    }
    if (ub__hmap_put(&s->ostreams_by_id, os->id, os)) {
        ostream_free(os);
        return NULL;
    }
    if (ub__hmap_put(&jfs->ostreams, key, os)) {
        os_unmap(s, os);
        ostream_free(os);
        return NULL;
    }
    return jfs->os_last = os;
}

static void ostream_put(struct ub__ostream *os)
{
    if (--os->outstanding == 0 && os->orphan)
        ostream_free(os);
}

static int next_send_seq(struct ub__ostream *os, uint32_t jfr, uint32_t *out)
{
    struct ub__send_seq *q = ub__send_seq_of(&os->ss, jfr);
    if (!q)
        return UB_ENOMEM;
    *out = q->next++;
    return 0;
}

/* Free all ostreams of a JFS being destroyed (after its flush). */
static void ostreams_free(struct ub__tl *s, ub_jfs *jfs)
{
    uint64_t k;
    void *v;
    jfs->os_last = NULL;
    while (jfs->ostreams.slots && ub__hmap_next(&jfs->ostreams, 0, &k, &v)) {
        struct ub__ostream *os = v;
        ub__hmap_del(&jfs->ostreams, k);
        os_unmap(s, os);
        ostream_free(os);
    }
}

/* ---- completion ------------------------------------------------------------------------- */

static enum ub_cr_opcode cr_opcode(enum ub_opcode op)
{
    switch (op) {
    case UB_OP_WRITE:
    case UB_OP_WRITE_IMM:
        return UB_CR_OP_WRITE;
    case UB_OP_READ:
        return UB_CR_OP_READ;
    case UB_OP_SEND:
    case UB_OP_SEND_IMM:
    case UB_OP_TSEND:
    case UB_OP_NOP:
        return UB_CR_OP_SEND;
    default:
        return UB_CR_OP_ATOMIC;
    }
}

static void report(struct ub__wr *w)
{
    ub_jfs *jfs = w->jfs;
    ub__list_remove(&w->order);
    bool signaled = (w->flags & UB_WR_COMPLETE) || w->status != UB_CR_SUCCESS;
    if (!signaled) {
        w->state = WR_REPORTED;
        ub__ses_wr_release(jfs, w->idx);
        return;
    }
    struct ub_cr *cr = ub__jfc_next(jfs->jfc);
    memset(cr, 0, sizeof(*cr));
    cr->status = w->status;
    cr->opcode = cr_opcode(w->opcode);
    cr->length = w->status == UB_CR_SUCCESS ? w->out_len : 0;
    cr->user_ctx = w->user_ctx;
    cr->local_id = jfs->id;
    if (w->is_inline)
        cr->flags |= UB_CR_F_INLINE;
    w->state = WR_REPORTED;
    ub__jfc_commit(jfs->jfc, cr, ((uint64_t)UB__OBJ_JFS << 56) | ((uint64_t)jfs->id << 32) | w->idx,
                   false);
}

/* Reports from the head of the posting order every request that finished and waits its turn. */
static void report_ready_heads(ub_jfs *jfs)
{
    while (!ub__list_empty(&jfs->unreported)) {
        struct ub__wr *h = UB_CONTAINER_OF(jfs->unreported.next, struct ub__wr, order);
        if (h->state != WR_DONE_WAIT)
            break;
        report(h);
    }
}

/* The request is over (success or error): leave every queue, then report in the right order. */
static void finish(struct ub__tl *s, struct ub__wr *w, enum ub_cr_status st)
{
    if (w->state != WR_ACTIVE)
        return;
    ub_jfs *jfs = w->jfs;
    w->status = st;
    if (w->on_txq)
        ub__ses_txq_del(s, w);
    ub__timer_cancel(&s->eng->timers, &w->rnr_timer);
    if (w->zc) { /* the buffer is the application's again: no packet may read it later */
        w->zc = false;
        if (w->in_pds) /* usually all acknowledged before the response came */
            ub__pds_flatten(s->eng->pds, &w->dst, w->mode, ub__ses_wr_cookie(w));
    }
    w->rsp_on = false; /* the timer stays armed: a stale firing does nothing (rsp_fire) */
    ub__ivl_reset(&w->rd);
    if (w->eager)
        ub__ses_rndv_forget(s, w);
    if (w->os) {
        pend_del(s, w);
        ostream_put(w->os);
        w->os = NULL;
    }
    w->state = WR_DONE_WAIT;
    bool head = jfs->unreported.next == &w->order;
    if (!(w->flags & UB_WR_INORDER_COMP) || head) {
        report(w);
        report_ready_heads(jfs);
    }
}

void ub__ses_jfs_flush(ub_jfs *jfs, uint64_t now)
{
    (void)now;
    struct ub__tl *s = &jfs->ctx->ses;
    while (!ub__list_empty(&jfs->unreported)) {
        struct ub__wr *w = UB_CONTAINER_OF(jfs->unreported.next, struct ub__wr, order);
        if (w->state == WR_ACTIVE) {
            w->flags &= ~(uint32_t)UB_WR_INORDER_COMP;
            finish(s, w, UB_CR_FLUSHED);
        } else {
            report(w);
        }
    }
    ostreams_free(s, jfs);
    for (uint32_t i = 0; i < jfs->attr.depth; i++) /* stale bounds too: the slots go away */
        ub__timer_cancel(&s->eng->timers, &jfs->wrs[i].rsp_timer);
}

/* Copies n bytes; up to 16 (the small inline messages of a ping-pong or a message-rate run)
 * with two overlapping fixed-size moves instead of a library call. */
static inline void copy_small(uint8_t *dst, const uint8_t *src, size_t n)
{
    if (n >= 8 && n <= 16) {
        uint64_t a, b;
        memcpy(&a, src, 8);
        memcpy(&b, src + n - 8, 8);
        memcpy(dst, &a, 8);
        memcpy(dst + n - 8, &b, 8);
    } else if (n >= 4 && n < 8) {
        uint32_t a, b;
        memcpy(&a, src, 4);
        memcpy(&b, src + n - 4, 4);
        memcpy(dst, &a, 4);
        memcpy(dst + n - 4, &b, 4);
    } else if (n) {
        memcpy(dst, src, n);
    }
}

/* ---- posting -------------------------------------------------------------------------- */

static uint8_t amo_of(enum ub_opcode op)
{
    switch (op) {
    case UB_OP_ATOMIC_CAS:
        return UB_SES_AMO_CSWAP;
    case UB_OP_ATOMIC_SWAP:
        return UB_SES_AMO_WRITE; /* fetching write: swap */
    case UB_OP_ATOMIC_FADD:
        return UB_SES_AMO_SUM;
    case UB_OP_ATOMIC_FSUB:
        return UB_SES_AMO_DIFF;
    case UB_OP_ATOMIC_FAND:
        return UB_SES_AMO_BAND;
    case UB_OP_ATOMIC_FOR:
        return UB_SES_AMO_BOR;
    default:
        return UB_SES_AMO_BXOR;
    }
}

static bool is_atomic(enum ub_opcode op)
{
    return op >= UB_OP_ATOMIC_CAS && op <= UB_OP_ATOMIC_FXOR;
}

static bool is_msg(enum ub_opcode op)
{
    return op == UB_OP_SEND || op == UB_OP_SEND_IMM || op == UB_OP_TSEND;
}

/* Local SGEs: inside their segments, and writable by us when they receive data. */
static bool sges_ok(ub_context *ctx, const struct ub_wr *wr, bool sink)
{
    for (uint32_t i = 0; i < wr->num_sge; i++) {
        const struct ub_sge *g = &wr->sge[i];
        if (!g->len)
            continue;
        if (!g->seg || g->seg->ctx != ctx || !ub__seg_covers(g->seg, g->addr, g->len))
            return false;
        if (sink && !(g->seg->access & UB_ACCESS_LOCAL_WRITE))
            return false;
    }
    return true;
}

/* The one-off token a rendezvous message's READ must present. */
static void rndv_token(struct ub__tl *s, struct ub__wr *w)
{
    do
        w->rndv_token = ub__rng_next(&s->eng->rng);
    while (!w->rndv_token);
    s->st.rndv_sent++;
}

/* A message goes whole (single copy, or packets) or, past eager_max, as an eager part whose
 * rest the target READs (rendezvous; a tagged one that matched no buffer parks its eager
 * part until one does). */
static void send_shape(struct ub__tl *s, struct ub__wr *w)
{
    bool tagged = w->opcode == UB_OP_TSEND;
    w->ses_op = tagged          ? UB_SES_OP_TAGGED_SEND
                : w->deferrable ? UB_SES_OP_DEFER_SEND
                                : UB_SES_OP_SEND;
    w->eager = 0;
    if (!w->cma && w->len > s->eager_max) {
        w->ses_op = tagged ? UB_SES_OP_RNDV_TSEND : UB_SES_OP_RNDV_SEND;
        w->eager = s->eager_max;
        rndv_token(s, w);
    }
}

int ub__ses_post(ub_jfs *jfs, const struct ub_wr *wr, uint64_t now)
{
    ub_context *ctx = jfs->ctx;
    struct ub__tl *s = &ctx->ses;
    (void)now;
    if (wr->opcode > UB_OP_NOP || wr->num_sge > jfs->attr.max_sge || (wr->num_sge && !wr->sge))
        return UB_EINVAL;
    if ((wr->flags & UB_WR_ORDER_RO) && (wr->flags & UB_WR_ORDER_SO))
        return UB_EINVAL;
    enum ub_opcode op = wr->opcode;
    ub_tseg *ts = NULL;
    ub_tjetty *tj = NULL;
    if (is_msg(op) || op == UB_OP_WRITE_IMM) {
        tj = wr->tjetty;
        if (!tj || tj->ctx != ctx)
            return UB_EINVAL;
        if (op == UB_OP_TSEND && !(tj->flags & 1))
            return UB_ENOTSUP; /* tagged send to a JFR that does not match tags */
    }
    if (op == UB_OP_WRITE || op == UB_OP_WRITE_IMM || op == UB_OP_READ) {
        ts = wr->u.rma.tseg;
        if (!ts || ts->ctx != ctx)
            return UB_EINVAL;
    } else if (is_atomic(op)) {
        ts = wr->u.atomic.tseg;
        if (!ts || ts->ctx != ctx)
            return UB_EINVAL;
    }
    if (op == UB_OP_WRITE_IMM && !ub__addr_eq(&tj->addr, &ts->addr))
        return UB_EINVAL; /* the record and the data must land on one node */
    uint64_t len = 0;
    for (uint32_t i = 0; i < wr->num_sge; i++)
        len += wr->sge[i].len;
    if (is_atomic(op))
        len = 8;
    if (len > UB_SES_MAX_MSG)
        return UB_EINVAL;
    bool inl = (wr->flags & UB_WR_INLINE) && !is_atomic(op) && op != UB_OP_READ;
    if (inl && len > jfs->attr.max_inline)
        return UB_EINVAL;
    if (!jfs->nfree)
        return UB_EFULL;

    uint16_t idx = jfs->free_stack[--jfs->nfree];
    struct ub__wr *w = &jfs->wrs[idx];
    jfs->used++;
    /* The fields before `state` belong to the slot (timers, buffers, generation); the list
     * links are set below and rd was emptied when the slot's last request finished. */
    memset(&w->state, 0, sizeof(*w) - offsetof(struct ub__wr, state));
    w->rd.n = 0;
    w->rd.total = 0;
    w->idx = idx;
    w->jfs = jfs;
    w->opcode = op;
    w->flags = wr->flags;
    w->user_ctx = wr->user_ctx;
    w->len = len;
    w->out_len = (uint32_t)(len > UINT32_MAX ? UINT32_MAX : len);
    w->is_inline = inl;
    w->mode = jfs->attr.tm == UB_TM_ROD ? UB_PDS_ROD : UB_PDS_RUD;
    w->state = WR_ACTIVE;
    ub__list_init(&w->txq);
    ub__list_push_back(&jfs->unreported, &w->order);

    if (op == UB_OP_NOP) {
        finish(s, w, UB_CR_SUCCESS);
        return 0;
    }
    bool sink = op == UB_OP_READ;
    if (!inl && !sges_ok(ctx, wr, sink)) {
        finish(s, w, UB_CR_LOC_ACCESS_ERR);
        return 0;
    }
    if (inl && wr->num_sge == 1) { /* the usual inline send: one buffer */
        copy_small(w->inl, wr->sge[0].addr, wr->sge[0].len);
        w->num_sge = 0;
    } else if (inl) {
        uint64_t off = 0;
        for (uint32_t i = 0; i < wr->num_sge; i++) {
            memcpy(w->inl + off, wr->sge[i].addr, wr->sge[i].len);
            off += wr->sge[i].len;
        }
        w->num_sge = 0;
    } else {
        if (wr->num_sge)
            memcpy(w->sge, wr->sge, wr->num_sge * sizeof(*w->sge));
        w->num_sge = wr->num_sge;
    }

    if (ts) {
        w->dst = ts->addr;
        w->rkey = ts->key;
        w->token = ts->token;
        w->raddr = is_atomic(op) ? wr->u.atomic.addr : wr->u.rma.addr;
    }
    if (tj) {
        if (!ts)
            w->dst = tj->addr;
        w->aux = tj->jfr;
        if (!ts)
            w->rkey = tj->jfr;
    }
    switch (op) {
    case UB_OP_WRITE:
    case UB_OP_WRITE_IMM:
        w->ses_op = UB_SES_OP_WRITE;
        break;
    case UB_OP_READ:
        w->ses_op = UB_SES_OP_READ;
        break;
    case UB_OP_SEND:
    case UB_OP_SEND_IMM:
        /* Untagged messages are deferrable unless the JFS asked for blind RNR retries; their
         * shape (send_shape) waits for the choice of single copy below. */
        w->deferrable = !(jfs->attr.flags & UB_JFS_F_RNR_RETRY);
        break;
    case UB_OP_TSEND:
        /* Small: eager (an unmatched one is buffered at the target). Large: single copy to a
         * shm peer, else rendezvous (send_shape). */
        w->tag = wr->u.send.tag;
        break;
    default:
        w->ses_op = UB_SES_OP_FETCHING_ATOMIC;
        w->amo_op = amo_of(op);
        w->operand = wr->u.atomic.operand;
        w->compare = wr->u.atomic.compare;
        w->result = wr->u.atomic.result;
        break;
    }
    if (op == UB_OP_WRITE_IMM || op == UB_OP_SEND_IMM)
        w->imm = wr->imm_data;

    struct ub__ostream *os = ostream_get(s, jfs, &w->dst);
    if (!os) {
        finish(s, w, UB_CR_REM_OP_ERR);
        return 0;
    }
    uint32_t seq = os->next_seq;
    uint8_t eo = (wr->flags & UB_WR_ORDER_SO)   ? UB_EXT_EO_SO
                 : (wr->flags & UB_WR_ORDER_RO) ? UB_EXT_EO_RO
                                                : UB_EXT_EO_NO;
    /* Keep the dependency fields inside 16 bits: promote to SO (stronger, so always allowed). */
    if (eo == UB_EXT_EO_RO && (seq - os->last_so >= 0xffff || os->ro_since >= 0xffff))
        eo = UB_EXT_EO_SO;
    if (is_msg(op) || op == UB_OP_WRITE_IMM) {
        if (next_send_seq(os, w->aux, &w->send_seq)) {
            finish(s, w, UB_CR_REM_OP_ERR);
            return 0;
        }
    }
    w->eo = eo;
    w->seq = seq;
    if (eo != UB_EXT_EO_NO)
        w->so_delta = (uint16_t)(seq - os->last_so);
    if (eo == UB_EXT_EO_SO) {
        w->ro_count = (uint16_t)os->ro_since;
        os->last_so = seq;
        os->ro_since = 0;
    } else if (eo == UB_EXT_EO_RO) {
        os->ro_since++;
    }
    os->next_seq++;
    os->outstanding++;
    w->os = os;
    /* Large RMA or a large message to a shm peer: one copy, by the target. */
    w->cma = w->len >= s->cma_min && ub__ses_cma_choose(s, w);
    if (w->cma)
        s->st.cma_reqs++;
    if (is_msg(op))
        send_shape(s, w);
    if (pend_put(s, os, w)) {
        ostream_put(os);
        w->os = NULL;
        finish(s, w, UB_CR_REM_OP_ERR);
        return 0;
    }
    ub__ses_txq_add(s, w);
    s->st.tx_reqs++;
    return 0;
}

/* ---- packets ------------------------------------------------------------------------------ */

void ub__ses_gather(const struct ub__wr *w, uint64_t off, uint8_t *dst, uint32_t n)
{
    if (w->is_inline) {
        copy_small(dst, w->inl + off, n);
        return;
    }
    for (uint32_t i = 0; i < w->num_sge && n; i++) {
        const struct ub_sge *g = &w->sge[i];
        if (off >= g->len) {
            off -= g->len;
            continue;
        }
        uint32_t k = (uint32_t)UB_MIN((uint64_t)n, g->len - off);
        memcpy(dst, (const uint8_t *)g->addr + off, k);
        dst += k;
        n -= k;
        off = 0;
    }
}

/* Whether bytes [off, off + n) of w's payload should go by reference (engine zc_min). */
static inline bool zc_worth(const struct ub__tl *s, const struct ub__wr *w, uint32_t n, bool attach)
{
    return attach && ub__ses_zc_size(s, n) && !w->is_inline;
}

/* Attaches bytes [off, off + n) of w's payload to p when they lie in one SGE; false: they
 * must be copied. */
static bool attach_payload(struct ub__wr *w, struct ub__pkt *p, uint64_t off, uint32_t n)
{
    for (uint32_t i = 0; i < w->num_sge; i++) {
        const struct ub_sge *g = &w->sge[i];
        if (off >= g->len) {
            off -= g->len;
            continue;
        }
        if (g->len - off < n || ub__pkt_attach(p, (const uint8_t *)g->addr + off, n) != 0)
            return false; /* spans SGEs (or no tailroom to flatten into later): copied */
        w->zc = true;
        return true;
    }
    return false;
}

bool ub__ses_attach(const struct ub__tl *s, struct ub__wr *w, struct ub__pkt *p, uint64_t off,
                    uint32_t n)
{
    return zc_worth(s, w, n, true) && attach_payload(w, p, off, n);
}

/* Places n bytes at message offset off into the request's SGEs (READ results). */
static void scatter(const struct ub__wr *w, uint64_t off, const uint8_t *src, uint32_t n)
{
    for (uint32_t i = 0; i < w->num_sge && n; i++) {
        const struct ub_sge *g = &w->sge[i];
        if (off >= g->len) {
            off -= g->len;
            continue;
        }
        uint32_t k = (uint32_t)UB_MIN((uint64_t)n, g->len - off);
        memcpy((uint8_t *)g->addr + off, src, k);
        src += k;
        n -= k;
        off = 0;
    }
}

/*
 * w's standard request header for bytes [off, off + n) at b: the bytes ub__ses_std_encode
 * writes for the header ub__ses_build_req describes, without the generic checks (every field
 * is in range by construction: SES opcodes of ub__ses_post, 12-bit masks, the job id checked
 * when the engine starts, off + n within the request; test_ses_init re-encodes them).
 */
static void std_put(const struct ub__tl *s, const struct ub__wr *w, uint8_t *b, uint64_t off,
                    uint32_t n, uint8_t flags)
{
    b[0] = w->ses_op;
    b[1] = flags; /* version 0 */
    ub__st16(b + 2, (uint16_t)w->seq);
    b[4] = 0; /* ri_generation */
    ub__st24(b + 5, s->eng->cfg.job_id);
    ub__st16(b + 8, (uint16_t)((w->rkey >> 12) & 0xfff));
    ub__st16(b + 10, (uint16_t)(w->rkey & 0xfff));
    /* DEFER_SEND: the restart token a DEFER_RTR names us by. */
    ub__st64(b + 12, w->deferrable ? pend_key(w->os->id, w->seq) : w->raddr);
    ub__st32(b + 20, w->jfs->id);
    ub__st64(b + 24, w->tag || w->opcode == UB_OP_TSEND ? w->tag : w->token);
    if (flags & UB_SES_F_SOM) {
        ub__st64(b + 32, (flags & UB_SES_F_HD) ? w->imm : 0);
    } else {
        ub__st32(b + 32, n); /* rsvd(18) | payload_len(14) */
        ub__st32(b + 36, (uint32_t)off);
    }
    ub__st32(b + 40, (uint32_t)w->len);
}

/* One request packet: bytes [off, off+n) of w. Inline into the request pump (every request
 * packet); ub__ses_build_req is the same for packing. */
static inline int build_req(struct ub__tl *s, struct ub__wr *w, struct ub__pkt *p, uint64_t off,
                            uint32_t n, bool attach)
{
    bool som = off == 0;
    bool eom = w->cma || off + n >= (w->eager ? w->eager : w->len);
    uint8_t flags = (uint8_t)((som ? UB_SES_F_SOM : 0) | (eom ? UB_SES_F_EOM : 0));
    if (som && (w->opcode == UB_OP_WRITE_IMM || w->opcode == UB_OP_SEND_IMM))
        flags |= UB_SES_F_HD;
    /* Without SES extension (the common case): the standard header, then the bytes. */
    uint8_t ext = w->ses_op == UB_SES_OP_FETCHING_ATOMIC || w->eager
                      ? ub__ses_ext_for(UB_PDS_NH_REQ_STD, w->ses_op)
                      : UB_SES_EXT_NONE;
    if (ext == UB_SES_EXT_NONE && !w->cma) {
        bool data = n && w->ses_op != UB_SES_OP_READ;
        bool copy = data && !zc_worth(s, w, n, attach); /* small: header and bytes at once */
        uint8_t *at = ub__pkt_put(p, UB_SES_STD_SIZE + (copy ? n : 0));
        if (!at)
            return UB_ENOBUFS;
        std_put(s, w, at, off, n, flags);
        if (copy) {
            if (w->is_inline)
                copy_small(at + UB_SES_STD_SIZE, w->inl + off, n);
            else
                ub__ses_gather(w, off, at + UB_SES_STD_SIZE, n);
        } else if (data && !attach_payload(w, p, off, n)) {
            uint8_t *d = ub__pkt_put(p, n);
            if (!d)
                return UB_ENOBUFS;
            ub__ses_gather(w, off, d, n);
        }
        return 0;
    }
    struct ub__ses h;
    memset(&h, 0, sizeof(h));
    h.kind = UB_PDS_NH_REQ_STD;
    struct ub__ses_std *q = &h.u.std;
    q->opcode = w->ses_op;
    q->flags = flags;
    q->msg_id = (uint16_t)w->seq;
    q->job_id = s->eng->cfg.job_id;
    q->pid_on_fep = (uint16_t)((w->rkey >> 12) & 0xfff);
    q->resource_index = (uint16_t)(w->rkey & 0xfff);
    q->buffer_offset = w->deferrable ? pend_key(w->os->id, w->seq) : w->raddr;
    q->initiator = w->jfs->id;
    q->mem_key = w->tag || w->opcode == UB_OP_TSEND ? w->tag : w->token;
    q->request_length = (uint32_t)w->len;
    if (som) {
        if (flags & UB_SES_F_HD)
            q->header_data = w->imm;
    } else {
        q->payload_len = (uint16_t)n;
        q->message_offset = (uint32_t)off;
    }
    h.ext = ext;
    if (h.ext == UB_SES_EXT_ATOMIC) {
        h.atomic.opcode = w->amo_op;
        h.atomic.datatype = UB_SES_DT_UINT64;
        h.atomic.ctrl = UB_SES_AMO_CTRL_CACHEABLE;
        if (ub__ses_amo_is_cswap(w->amo_op)) {
            ub__st64(h.atomic.compare, w->compare);
            ub__st64(h.atomic.swap, w->operand);
        }
    } else if (h.ext == UB_SES_EXT_RNDV) {
        /* What the target READs: this transaction (stream, order_seq in the extension
         * header) of this JFS, from read_offset on, presenting the one-off token. */
        h.rndv.eager_length = w->eager;
        h.rndv.pid_on_fep = (uint16_t)((w->jfs->id >> 12) & 0xfff);
        h.rndv.resource_index = (uint16_t)(w->jfs->id & 0xfff);
        h.rndv.read_offset = w->eager;
        h.rndv.read_mem_key = w->rndv_token;
    }
    size_t hl = ub__ses_size(&h);
    uint8_t *at = ub__pkt_put(p, (uint32_t)hl);
    if (!at)
        return UB_ENOBUFS;
    struct ub__wcur wc;
    ub__wcur_init(&wc, at, hl);
    int rc = ub__ses_encode(&h, &wc);
    if (rc)
        return rc;
    if (w->cma) { /* what the target copies from (WRITE) or into (READ), and until when */
        uint32_t dl = ub__ses_cma_desc_len(w);
        uint8_t *d = ub__pkt_put(p, dl);
        if (!d)
            return UB_ENOBUFS;
        ub__ses_cma_desc_put(w, s->cma.clock(s->cma.arg) + ub__ses_cma_bound(s, w) / 2, d);
    } else if (h.ext == UB_SES_EXT_ATOMIC && !ub__ses_amo_is_cswap(w->amo_op)) {
        ub__st64(ub__pkt_put(p, 8), w->operand);
    } else if (n && w->ses_op != UB_SES_OP_READ &&
               !(zc_worth(s, w, n, attach) && attach_payload(w, p, off, n))) {
        uint8_t *d = ub__pkt_put(p, n);
        if (!d)
            return UB_ENOBUFS;
        ub__ses_gather(w, off, d, n);
    }
    return 0;
}

int ub__ses_build_req(struct ub__tl *s, struct ub__wr *w, struct ub__pkt *p, uint64_t off,
                      uint32_t n, bool attach)
{
    return build_req(s, w, p, off, n, attach);
}

static uint32_t req_room(const struct ub__tl *s, const struct ub__wr *w)
{
    uint32_t room = s->max_payload;
    if (w->ses_op == UB_SES_OP_RNDV_TSEND || w->ses_op == UB_SES_OP_RNDV_SEND)
        room -= UB_SES_RNDV_SIZE;
    return room;
}

bool ub__ses_wr_pump(struct ub__tl *s, struct ub__wr *w, uint64_t now)
{
    struct ub__engine *e = s->eng;
    uint64_t wire_len = w->eager ? w->eager : w->len;
    bool single = w->ses_op == UB_SES_OP_READ || w->ses_op == UB_SES_OP_FETCHING_ATOMIC || w->cma;
    /* The peer as PDS sees it, looked up once a pump when it has a context (nothing between
     * two packets here removes it): a bulk write's 118 packets asked 54 instructions each. */
    struct ub__pds_peer peer = {0};
    while (!w->first_sent || (!single && w->sent < wire_len)) {
        if (e->pool.avail <= UB_SES_POOL_RESERVE)
            return false;
        if (peer.pdc)
            ub__pds_peer_again(&peer);
        else
            ub__pds_peer(e->pds, &w->dst, w->mode, &peer);
        uint32_t busy = peer.outstanding;
        if (busy >= UB_SES_PKT_BUDGET) {
            s->st.tx_busy++;
            return true; /* this peer is busy; others may go on */
        }
        uint32_t n = 0;
        if (!single)
            n = (uint32_t)UB_MIN((uint64_t)req_room(s, w), wire_len - w->sent);
        struct ub__pkt *p = ub__pkt_alloc(&e->pool);
        if (!p)
            return false;
        int rc = build_req(s, w, p, w->sent, n, true);
        if (rc) {
            ub__pkt_free(p);
            finish(s, w, UB_CR_REM_OP_ERR);
            return true;
        }
        uint8_t tail[UB_SES_TAIL_LEN];
        bool last = single || w->sent + n >= wire_len;
        /* On the link path a packet that refers to no memory of ours is done with once the
         * driver has it: nothing to count or to hear back (the response bound is armed). */
        bool tracked = !peer.link || p->xdata;
        struct ub__pds_tx tx = {
            .dst = &w->dst,
            .mode = w->mode,
            .ses_kind = UB_PDS_NH_REQ_STD,
            .ack_req = last,
            .cookie = tracked ? ub__ses_wr_cookie(w) : 0,
            .pdc = peer.pdc,
            .now = s->emit_now,
        };
        ub__ses_wr_ext(w, &tx.ext, tail);
        /* The last packet of a request whose response the target can make at once: K lets it
         * ride on that packet's ACK (a READ only of at most UB_SES_RIDE_DATA bytes: larger data
         * goes in packets of its own; PDS says which modes and peers allow it; a request of
         * several packets only when they are not sprayed, so they arrive in order). Only when
         * nothing but the request's own earlier packets is queued or in flight to that peer (a
         * request waited for, as in a ping-pong): a stream of requests is better served by
         * coalesced ACKs and packed responses than by an ACK of its own per request. */
        /* After a yield (engine.h) the rest of the received bundle, usually the ACK of our
         * last request to that peer, waits: that request is as good as answered. */
        uint32_t k_busy = s->ack_rsp_busy + (ub__engine_rx_later(e) ? 1u : 0u);
        uint32_t others = busy - UB_MIN(busy, w->in_pds);
        if (s->ack_rsp && others < k_busy && last && (!w->first_sent || !peer.sprays) && !w->cma &&
            !w->eager && (w->ses_op != UB_SES_OP_READ || w->len <= UB_SES_RIDE_DATA) &&
            peer.own_ok) {
            tail[8] |= UB_SES_TAIL_K;
            tx.own = true;
        }
        rc = ub__pds_send(e->pds, &tx, p, now);
        if (rc) {
            ub__pkt_free(p);
            if (rc == UB_EFULL || rc == UB_ENOBUFS)
                return rc == UB_EFULL;
            finish(s, w, UB_CR_PEER_UNREACHABLE);
            return true;
        }
        s->st.tx_req_pkts++;
        w->in_pds += tracked;
        w->first_sent = true; /* ub__ses_wr_sent, with `last` known */
        w->sent += n;
        if (last)
            ub__ses_wr_arm_rsp(s, w, now);
    }
    if (w->on_txq)
        ub__ses_txq_del(s, w);
    return true;
}

void ub__ses_wr_tail(const struct ub__wr *w, uint8_t *tail)
{
    uint32_t aux = w->aux | ((w->flags & UB_WR_SOLICITED) ? UB_SES_TAIL_S << 24 : 0) |
                   (w->deferrable ? UB_SES_TAIL_D << 24 : 0) | (w->cma ? UB_SES_TAIL_C << 24 : 0) |
                   (w->jfs->ctx->ses.pack_max ? UB_SES_TAIL_A << 24 : 0);
    struct ub__ses_tail t = {w->so_delta, w->ro_count, w->send_seq, aux};
    ub__ses_tail_put(tail, &t);
}

void ub__ses_wr_ext(const struct ub__wr *w, struct ub__ext *ext, uint8_t *tail)
{
    ub__ses_wr_tail(w, tail);
    memset(ext, 0, sizeof(*ext));
    ext->version = 1;
    ext->next_hdr = UB_PDS_NH_REQ_STD;
    ext->exec_order = w->eo;
    ext->fence = (w->flags & UB_WR_FENCE) != 0;
    ext->inorder_completion = (w->flags & UB_WR_INORDER_COMP) != 0;
    ext->stream = w->os->id;
    ext->order_seq = w->seq;
    ext->tail = tail;
    ext->tail_len = UB_SES_TAIL_LEN;
}

void ub__ses_wr_sent(struct ub__tl *s, struct ub__wr *w, uint32_t n, uint64_t now)
{
    uint64_t wire_len = w->eager ? w->eager : w->len;
    bool single = w->ses_op == UB_SES_OP_READ || w->ses_op == UB_SES_OP_FETCHING_ATOMIC || w->cma;
    w->first_sent = true;
    w->sent += n;
    if (single || w->sent >= wire_len)
        ub__ses_wr_arm_rsp(s, w, now); /* all out: the response is due within the bound */
}

/* ---- responses ----------------------------------------------------------------------------- */

static enum ub_cr_status rc_status(uint8_t rc)
{
    switch (rc) {
    case UB_SES_RC_OK:
        return UB_CR_SUCCESS;
    case UB_SES_RC_BAD_MKEY:
    case UB_SES_RC_DISABLED:
        return UB_CR_INVALID_TOKEN;
    case UB_SES_RC_TOO_LONG:
        return UB_CR_REM_LEN_ERR;
    case UB_SES_RC_AT_OUT_OF_RANGE:
    case UB_SES_RC_PERM_VIOLATION:
    case UB_SES_RC_AT_PERM:
    case UB_SES_RC_AMO_UNALIGNED:
    case UB_SES_RC_BAD_INDEX:
    case UB_SES_RC_BAD_ADDR:
        return UB_CR_REM_ACCESS_ERR;
    case UB_SES_RC_UNSUPPORTED_OP:
    case UB_SES_RC_AMO_UNSUPPORTED_OP:
    case UB_SES_RC_AMO_UNSUPPORTED_DT:
    case UB_SES_RC_AMO_UNSUPPORTED_SIZE:
        return UB_CR_UNSUPPORTED;
    case UB_SES_RC_RNR:
        return UB_CR_RNR;
    case UB_SES_RC_CANCELLED:
        return UB_CR_FLUSHED;
    case UB_SES_RC_CMA_EXPIRED: /* single copy not done within the initiator's bound */
    case UB_SES_RC_UNDELIVERABLE:
        return UB_CR_PEER_UNREACHABLE;
    default:
        return UB_CR_REM_OP_ERR;
    }
}

/* Sends the request again from its first byte (after RNR, or when a deferral ends). */
static void restart(struct ub__tl *s, struct ub__wr *w, uint64_t now)
{
    w->rsp_on = false;
    w->deferred = false;
    w->rtr_early = false;
    w->parked = false;
    w->sent = 0;
    w->first_sent = false;
    if (!w->on_txq)
        ub__ses_txq_add(s, w);
    ub__ses_wr_pump(s, w, now);
}

static void rnr_fire(struct ub__timer *t, uint64_t now)
{
    struct ub__wr *w = UB_CONTAINER_OF(t, struct ub__wr, rnr_timer);
    struct ub__tl *s = &w->jfs->ctx->ses;
    if (w->state != WR_ACTIVE)
        return;
    s->st.rnr_retries++;
    restart(s, w, now);
}

/* The response bound passed (the target died after acknowledging the request, or is
 * wedged), or, while deferred, the deferral bound. */
static void rsp_fire(struct ub__timer *t, uint64_t now)
{
    struct ub__wr *w = UB_CONTAINER_OF(t, struct ub__wr, rsp_timer);
    struct ub__tl *s = &w->jfs->ctx->ses;
    if (w->state != WR_ACTIVE || !w->rsp_on)
        return;
    if (now < w->rsp_due) { /* the bound moved on since the timer was armed */
        ub__timer_arm(&s->eng->timers, &w->rsp_timer, w->rsp_due);
        return;
    }
    if (w->deferred) {
        finish(s, w, UB_CR_RNR);
        return;
    }
    s->st.rsp_timeouts++;
    /* Whether it executed is unknown: order state at the target can no longer be trusted. */
    if (w->os)
        w->os->broken = true;
    finish(s, w, UB_CR_PEER_UNREACHABLE);
}

void ub__ses_wr_init_timer(struct ub__wr *w)
{
    ub__timer_init(&w->rnr_timer, rnr_fire);
    ub__timer_init(&w->rsp_timer, rsp_fire);
}

/*
 * Sets w's response bound to end at due. Moving it later (every ACK and every reused slot
 * does) keeps the armed timer, which re-arms itself when it fires early: no heap work per
 * request. Only an earlier end re-arms now.
 */
static void rsp_bound(struct ub__tl *s, struct ub__wr *w, uint64_t due)
{
    w->rsp_on = true;
    w->rsp_due = due;
    if (!ub__timer_armed(&w->rsp_timer) || w->rsp_timer.deadline > due)
        ub__timer_arm(&s->eng->timers, &w->rsp_timer, due);
}

void ub__ses_wr_arm_rsp(struct ub__tl *s, struct ub__wr *w, uint64_t now)
{
    if (w->state != WR_ACTIVE || w->deferred || w->parked)
        return;
    rsp_bound(s, w, now + (w->cma ? ub__ses_cma_bound(s, w) : s->rsp_timeout_ns));
}

void ub__ses_on_acked(struct ub__tl *s, uint64_t cookie, uint64_t now)
{
    struct ub__wr *w = ub__ses_wr_of_cookie(s, cookie);
    if (w && w->in_pds)
        w->in_pds--;
    ub__ses_wr_acked(s, w, now);
}

void ub__ses_wr_acked(struct ub__tl *s, struct ub__wr *w, uint64_t now)
{
    /* Only once everything went out: the bound counts from the last sign of life. */
    if (w && w->rsp_on)
        ub__ses_wr_arm_rsp(s, w, now);
}

void ub__ses_on_rtr(struct ub__tl *s, const struct ub__addr *src, uint64_t token, uint64_t now)
{
    s->st.rtr_rx++;
    struct ub__wr *w = token >> 48 ? NULL : pend_get(s, (uint16_t)(token >> 32), (uint32_t)token);
    if (!w || w->state != WR_ACTIVE || !w->deferrable || !ub__ses_peer_eq(&w->dst, src))
        return; /* over already (the deferral bound passed): nothing to restart */
    if (!w->deferred) {
        w->rtr_early = true; /* it overtook the DEFERRED response: restart when that comes */
        return;
    }
    s->st.defer_restarts++;
    restart(s, w, now);
}

void ub__ses_on_rsp(struct ub__tl *s, const struct ub__pds_rx *rx, uint64_t now)
{
    const struct ub__wire_dgram *d = rx->hdr;
    struct ub__ses_rsp_in in = {d->ext.stream, d->ext.order_seq, &d->ses.u.rsp_data,
                                rx->src,       rx->payload,      rx->payload_len};
    ub__ses_rsp_in(s, &in, now);
}

bool ub__ses_link_rsp(struct ub__tl *s, const struct ub__addr *src,
                      const struct ub__wire_link_rsp *r, uint64_t now)
{
    if (!s->fast)
        return false;
    struct ub__ses_rsp_in in = {r->ext.stream, r->ext.order_seq, &r->rsp,
                                src,           r->payload,       r->payload_len};
    s->st.rx_rsp_fast++;
    ub__ses_rsp_in(s, &in, now);
    return true;
}

void ub__ses_rsp_in(struct ub__tl *s, const struct ub__ses_rsp_in *in, uint64_t now)
{
    const struct ub__ses_rsp_data *r = in->r;
    s->st.rx_rsp_pkts++;
    struct ub__wr *w = pend_get(s, in->stream, in->seq);
    if (!w || w->state != WR_ACTIVE || !ub__ses_peer_eq(&w->dst, in->src)) {
        s->st.rx_stale_rsp++; /* for a request already over: never touch its buffers again */
        return;
    }
    if (r->rc == UB_SES_RC_DEFERRED && w->deferrable) {
        /* Paused, resources kept: the target sends DEFER_RTR when a buffer is posted. */
        if (!w->defer_deadline) {
            uint32_t ms = w->jfs->attr.defer_timeout_ms;
            w->defer_deadline = now + (ms ? ms * 1000000ull : UB_SES_DEFER_TIMEOUT_NS);
        }
        if (w->rtr_early) {
            restart(s, w, now);
            return;
        }
        w->deferred = true;
        w->parked = false;
        rsp_bound(s, w, w->defer_deadline);
        return;
    }
    if (r->rc == UB_SES_RC_PENDING && w->eager) {
        /* Rendezvous parked at the target until a buffer matches, for as long as that takes:
         * the target says PENDING again while it holds it, and each says it is still alive
         * (the target's READ, when it comes, restarts the response bound). */
        w->parked = true;
        rsp_bound(s, w, now + UB_MAX(s->rsp_timeout_ns, UB_SES_PARK_BOUND_NS));
        return;
    }
    if (r->rc == UB_SES_RC_RNR) {
        /* While the retry waits out its backoff no attempt is in flight: this RNR answers
         * another copy of the last attempt's request (an RTO resend), counted already. */
        if (ub__timer_armed(&w->rnr_timer)) {
            s->st.rx_stale_rsp++;
            return;
        }
        w->rsp_on = false;
        uint32_t limit = w->jfs->attr.rnr_retry;
        if (w->rnr_tries >= limit) {
            finish(s, w, UB_CR_RNR);
            return;
        }
        uint64_t wait = UB_SES_RNR_BACKOFF_NS << UB_MIN(w->rnr_tries, 16u);
        w->rnr_tries++;
        ub__timer_arm(&s->eng->timers, &w->rnr_timer, now + UB_MIN(wait, UB_SES_RNR_MAX_WAIT_NS));
        return;
    }
    if (r->rc == UB_SES_RC_CMA_REFUSED || r->rc == UB_SES_RC_CMA_UNEXPECTED) {
        if (!w->cma) { /* a refusal re-delivered after the packet resend began */
            s->st.rx_stale_rsp++;
            return;
        }
        /* Not executed: the same transaction again, as packets. The target cannot copy:
         * packets on this stream from now on; a tagged message matched no buffer: this one
         * only (as packets an unmatched one is buffered, or parked by rendezvous). */
        w->cma = false;
        if (w->os && r->rc == UB_SES_RC_CMA_REFUSED)
            w->os->no_cma = true;
        if (is_msg(w->opcode))
            send_shape(s, w); /* packets: whole, or rendezvous past eager_max */
        s->st.cma_fallbacks++;
        restart(s, w, now);
        return;
    }
    if (r->rc != UB_SES_RC_OK) {
        finish(s, w, rc_status(r->rc));
        return;
    }
    switch (w->ses_op) {
    case UB_SES_OP_READ:
        if (w->cma) { /* the target pushed every byte before it answered */
            finish(s, w, UB_CR_SUCCESS);
            return;
        }
        if ((uint64_t)r->message_offset + in->payload_len > w->len) {
            finish(s, w, UB_CR_REM_OP_ERR);
            return;
        }
        scatter(w, r->message_offset, in->payload, in->payload_len);
        uint64_t fresh;
        if (ub__ivl_add(&w->rd, r->message_offset, (uint64_t)r->message_offset + in->payload_len,
                        &fresh)) {
            finish(s, w, UB_CR_REM_OP_ERR);
            return;
        }
        if (fresh != in->payload_len)
            s->st.dup_bytes += in->payload_len - fresh;
        w->got += fresh;
        if (w->got >= w->len)
            finish(s, w, UB_CR_SUCCESS);
        else
            ub__ses_wr_arm_rsp(s, w, now);
        return;
    case UB_SES_OP_FETCHING_ATOMIC:
        if (in->payload_len != 8) {
            finish(s, w, UB_CR_REM_OP_ERR);
            return;
        }
        if (w->result)
            *w->result = ub__ld64(in->payload);
        finish(s, w, UB_CR_SUCCESS);
        return;
    default:
        finish(s, w, UB_CR_SUCCESS);
        return;
    }
}

/* The peer failed (unreachable or restarted): every request to it fails, whatever JFS or
 * stream it is on, including requests PDS delivered long ago that wait for a response. */
void ub__ses_peer_gone(struct ub__tl *s, const struct ub__addr *dst)
{
    s->st.peer_failed++;
    struct ub__list *it;
    UB_LIST_FOR_EACH(it, &s->ctx->jfss)
    {
        ub_jfs *jfs = UB_CONTAINER_OF(it, ub_jfs, link);
        for (uint32_t i = 0; i < jfs->attr.depth; i++) {
            struct ub__wr *x = &jfs->wrs[i];
            if (x->state != WR_ACTIVE || !ub__addr_eq(&x->dst, dst))
                continue;
            /* Order state at the peer is gone: the next request opens a new stream. */
            if (x->os)
                x->os->broken = true;
            finish(s, x, UB_CR_PEER_UNREACHABLE);
        }
    }
    ub__ses_rndv_peer_gone(s, dst); /* and what it left parked here (over shm: no PDS to say) */
}

static void restarted_event(struct ub__tl *s, const struct ub__addr *dst)
{
    uint64_t arg = dst->family == UB_AF_LOOP ? dst->port : ub__addr_hash(dst, 0);
    ub__async_push(s->ctx, UB_ASYNC_PEER_RESTARTED, UB_ESTALE, arg);
}

void ub__ses_peer_restarted(struct ub__tl *s, const struct ub__addr *dst, bool noticed)
{
    restarted_event(s, dst);
    if (!noticed) /* what went to the old one since: dropped there, never answered */
        ub__ses_peer_gone(s, dst);
}

void ub__ses_on_failed(struct ub__tl *s, uint64_t cookie, int err, uint64_t now)
{
    if ((cookie >> 40) == 0 && (cookie & UB_SES_PACK_COOKIE)) { /* several requests */
        ub__ses_pack_failed(s, cookie, err, now);
        return;
    }
    if ((cookie >> 40) == 0) { /* no JFS: a READ this side issued for a rendezvous */
        ub__ses_rndv_failed(s, (uint32_t)cookie, now);
        return;
    }
    struct ub__wr *w = ub__ses_wr_of_cookie(s, cookie);
    if (!w)
        return;
    if (w->in_pds)
        w->in_pds--;
    struct ub__addr dst = w->dst;
    if (err == UB_ESTALE)
        restarted_event(s, &dst);
    if (err == UB_ESTALE || err == UB_EUNREACH) {
        ub__ses_peer_gone(s, &dst);
        return;
    }
    /* Anything else: this stream's order state is in doubt; every request on it fails. */
    struct ub__ostream *os = w->os;
    ub_jfs *jfs = w->jfs;
    if (os)
        os->broken = true;
    for (uint32_t i = 0; i < jfs->attr.depth; i++) {
        struct ub__wr *x = &jfs->wrs[i];
        if (x->state == WR_ACTIVE && x->os == os && x != w)
            finish(s, x, UB_CR_PEER_UNREACHABLE);
    }
    finish(s, w, UB_CR_PEER_UNREACHABLE);
}
