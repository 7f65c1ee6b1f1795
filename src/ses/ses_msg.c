/*
 * The target's messages: receive buffers (untagged in send order, tagged by
 * matching), unexpected messages, deferrable send (DEFERRED, then DEFER_RTR
 * when a buffer is posted), and the target half of rendezvous: the eager
 * part lands like any message; once a buffer holds the message, the target
 * READs the rest from the initiator's transaction (scoped by its stream,
 * order_seq, JFS and one-off token), then answers the initiator, which
 * completes.
 */
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "core/compiler.h"
#include "core/seq.h"
#include "ses/ses_tgt.h"
#include "wire/datagram.h"

/* A message answered DEFERRED: who to wake when a buffer comes. */
struct ub__defer {
    struct ub__list link; /* jfr->deferred */
    struct ub__addr src;
    uint64_t token; /* the initiator's restart token */
};

void ub__tgt_rbuf_free(ub_jfr *jfr, struct ub__rbuf *rb)
{
    rb->in_use = false;
    jfr->free_stack[jfr->nfree++] = rb->idx;
}

/* ---- receive buffers ------------------------------------------------------------------------ */

uint64_t ub__tgt_rbuf_place(const struct ub__rbuf *rb, uint64_t off, const uint8_t *src, uint64_t n)
{
    uint64_t done = 0;
    for (uint32_t i = 0; i < rb->num_sge && n; i++) {
        const struct ub_sge *g = &rb->sge[i];
        if (off >= g->len) {
            off -= g->len;
            continue;
        }
        uint64_t k = UB_MIN(n, g->len - off);
        memcpy((uint8_t *)g->addr + off, src, k);
        src += k;
        n -= k;
        done += k;
        off = 0;
    }
    return done;
}

static bool tag_match(const struct ub__rbuf *rb, uint64_t tag)
{
    return ((rb->tag ^ tag) & ~rb->ignore) == 0;
}

static struct ub__rbuf *take_reserved(ub_jfr *jfr, struct ub__tstream *ts, uint32_t send_seq)
{
    struct ub__list *it;
    UB_LIST_FOR_EACH(it, &jfr->reserved)
    {
        struct ub__rbuf *rb = UB_CONTAINER_OF(it, struct ub__rbuf, link);
        if (rb->tag == (uint64_t)(uintptr_t)ts && rb->ignore == send_seq) {
            ub__list_remove(&rb->link);
            return rb;
        }
    }
    return NULL;
}

static struct ub__rbuf *pop_posted(ub_jfr *jfr)
{
    struct ub__list *l = ub__list_pop_front(&jfr->posted);
    return l ? UB_CONTAINER_OF(l, struct ub__rbuf, link) : NULL;
}

void ub__tgt_stage_put(struct ub__tl *s, struct ub__rxmsg *m, uint64_t off, const uint8_t *p,
                       uint32_t n)
{
    if (!n)
        return;
    if (!m->stage) {
        m->stage = calloc(1, m->wire_len ? m->wire_len : 1);
        if (!m->stage) {
            m->rc = UB_SES_RC_HOST_UNSUCCESS_CMPL;
            return;
        }
    }
    memcpy(m->stage + off, p, n);
    s->st.staged_bytes += n;
}

/* Binds an untagged message (or WRITE_IMM) to a buffer in send order; false: receiver not ready. */
bool ub__tgt_bind_untagged(struct ub__rxmsg *m)
{
    ub_jfr *jfr = m->jfr;
    struct ub__send_seq *q = ub__send_seq_of(&m->ts->ss, jfr->id);
    if (!q)
        return false;
    if (ub__seq_lt(m->send_seq, q->next)) { /* a slot reserved for it, or a retry after RNR */
        m->rb = take_reserved(jfr, m->ts, m->send_seq);
        if (!m->rb)
            m->rb = pop_posted(jfr);
        return m->rb != NULL;
    }
    /* Messages sent before it that have not arrived keep their place: reserve their buffers. */
    while (q->next != m->send_seq) {
        struct ub__rbuf *rb = pop_posted(jfr);
        if (!rb)
            return false;
        rb->tag = (uint64_t)(uintptr_t)m->ts;
        rb->ignore = q->next;
        ub__list_push_back(&jfr->reserved, &rb->link);
        q->next++;
    }
    /* Its turn. Without a buffer it gives its place up (RNR) so that a message the sender
     * abandons never leaves a hole; its retry takes the next free buffer. */
    q->next++;
    m->rb = pop_posted(jfr);
    return m->rb != NULL;
}

struct ub__rbuf *ub__tgt_first_match(ub_jfr *jfr, uint64_t tag)
{
    struct ub__list *it;
    UB_LIST_FOR_EACH(it, &jfr->posted)
    {
        struct ub__rbuf *rb = UB_CONTAINER_OF(it, struct ub__rbuf, link);
        if (tag_match(rb, tag))
            return rb;
    }
    return NULL;
}

/*
 * Tagged: matches m against posted buffers (in posting order), or queues it as unexpected.
 * A single copy that matches nothing is not bound at all (false): it is answered
 * CMA_UNEXPECTED and comes again as packets, in its place in the send order (its copy could
 * not wait for a buffer: the initiator's descriptor expires).
 */
static bool bind_tagged(struct ub__rxmsg *m)
{
    ub_jfr *jfr = m->jfr;
    struct ub__rbuf *rb = ub__tgt_first_match(jfr, m->mkey);
    if (rb) {
        ub__list_remove(&rb->link);
        m->rb = rb;
        m->bind = BIND_BUF;
        if (m->cma && m->len > rb->cap)
            m->rc = UB_SES_RC_TOO_LONG; /* the buffer is consumed with a length error */
        /* Bytes that arrived before it was matched (holes are filled by later packets). */
        if (m->stage && m->got && m->len <= rb->cap)
            ub__tgt_rbuf_place(rb, 0, m->stage, m->wire_len);
        return true;
    }
    if (m->cma) {
        m->bind = BIND_NONE;
        m->cma_unexp = true;
        return false;
    }
    m->bind = BIND_UNEXP;
    ub__list_push_back(&jfr->unexpected, &m->ulink);
    m->on_unexp = true;
    return true;
}

/* Tagged messages of one stream to one JFR are matched in send order. */
void ub__tgt_bind_tagged_in_order(struct ub__tl *s, struct ub__rxmsg *m, uint64_t now)
{
    struct ub__send_seq *q = ub__send_seq_of(&m->ts->ss, m->jfr->id);
    if (!q || m->send_seq != q->next) {
        m->bind = BIND_WAIT;
        return;
    }
    if (!bind_tagged(m))
        return;
    q->next++;
    /* Successors that arrived early can now be matched. */
    for (bool more = true; more;) {
        more = false;
        uint64_t k;
        void *v;
        for (uint32_t i = 0; (i = ub__hmap_next(&m->ts->msgs, i, &k, &v)) != 0;) {
            struct ub__rxmsg *x = v;
            if (x->bind == BIND_WAIT && x->jfr == m->jfr && x->send_seq == q->next) {
                if (bind_tagged(x)) {
                    q->next++;
                    more = true;
                }
                break;
            }
        }
    }
    (void)s;
    (void)now;
}

void ub__tgt_deliver_recv(struct ub__tl *s, struct ub__rxmsg *m, uint64_t now)
{
    (void)now;
    ub_jfr *jfr = m->jfr;
    struct ub__rbuf *rb = m->rb;
    struct ub_cr *cr = ub__tgt_recv_cr(jfr);
    bool too_long = m->op != UB_SES_OP_WRITE && m->len > rb->cap;
    cr->status = too_long ? UB_CR_LOC_LEN_ERR : UB_CR_SUCCESS;
    if (m->cr_status != UB_CR_SUCCESS)
        cr->status = m->cr_status;
    cr->opcode = m->op == UB_SES_OP_WRITE ? UB_CR_OP_RECV_WRITE_IMM : UB_CR_OP_RECV;
    cr->length = cr->status != UB_CR_SUCCESS ? 0 : (uint32_t)m->len;
    cr->remote_id = m->initiator;
    if (m->has_imm) {
        cr->flags |= UB_CR_F_IMM;
        cr->imm_data = m->imm;
    }
    if (m->op == UB_SES_OP_TAGGED_SEND) {
        cr->flags |= UB_CR_F_TAG;
        cr->tag = m->mkey;
    }
    m->rb = NULL;
    ub__tgt_recv_done(s, jfr, rb, cr, &m->src, m->solicited);
}

void ub__tgt_recv_done(struct ub__tl *s, ub_jfr *jfr, struct ub__rbuf *rb, struct ub_cr *cr,
                       const struct ub__addr *src, bool solicited)
{
    cr->user_ctx = rb->user_ctx;
    cr->local_id = jfr->id;
    cr->remote_node = src->family == UB_AF_LOOP ? src->port : 0;
    ub__tgt_rbuf_free(jfr, rb);
    ub__jfc_commit(jfr->jfc, cr, ((uint64_t)UB__OBJ_JFR << 56) | ((uint64_t)jfr->id << 32),
                   solicited);
    s->st.executed++;
}

/* ---- JFR events ------------------------------------------------------------------------------ */

/* Sends DEFER_RTR for the oldest deferred message of jfr: its sender may try again. */
static void defer_wake(struct ub__tl *s, ub_jfr *jfr, uint64_t now)
{
    struct ub__list *l = ub__list_pop_front(&jfr->deferred);
    if (!l)
        return;
    jfr->ndeferred--;
    struct ub__defer *d = UB_CONTAINER_OF(l, struct ub__defer, link);
    struct ub__ses_std q;
    memset(&q, 0, sizeof(q));
    q.opcode = UB_SES_OP_DEFER_RTR;
    q.flags = UB_SES_F_SOM | UB_SES_F_EOM;
    q.job_id = s->eng->cfg.job_id;
    q.mem_key = d->token;
    struct ub__ses_tail t;
    memset(&t, 0, sizeof(t));
    /* Lost only if PDS gives up on the peer: the sender's deferral bound then ends it. */
    if (ub__ses_send_ctl(s, &d->src, &q, (uint16_t)(d->token >> 32), (uint32_t)d->token, &t, 0,
                         now) == 0)
        s->st.rtr_sent++;
    free(d);
}

bool ub__tgt_defer_add(ub_jfr *jfr, const struct ub__addr *src, uint64_t token)
{
    if (jfr->ndeferred >= UB_SES_DEFER_MAX)
        return false;
    struct ub__defer *d = calloc(1, sizeof(*d));
    if (!d)
        return false;
    d->src = *src;
    d->token = token;
    ub__list_push_back(&jfr->deferred, &d->link);
    jfr->ndeferred++;
    return true;
}

void ub__ses_jfr_posted(ub_jfr *jfr, uint64_t now)
{
    struct ub__tl *s = &jfr->ctx->ses;
    if (!jfr->attr.tag_matching) {
        if (jfr->ndeferred)
            defer_wake(s, jfr, now);
        return;
    }
    if (ub__list_empty(&jfr->unexpected))
        return;
    struct ub__rbuf *rb = UB_CONTAINER_OF(jfr->posted.prev, struct ub__rbuf, link);
    struct ub__list *it;
    UB_LIST_FOR_EACH(it, &jfr->unexpected)
    {
        struct ub__rxmsg *m = UB_CONTAINER_OF(it, struct ub__rxmsg, ulink);
        if (!tag_match(rb, m->mkey))
            continue;
        ub__list_remove(&m->ulink);
        m->on_unexp = false;
        ub__list_remove(&rb->link);
        m->rb = rb;
        m->bind = BIND_BUF;
        if (m->stage && m->got && m->len <= rb->cap) /* holes are filled by later packets */
            ub__tgt_rbuf_place(rb, 0, m->stage, m->wire_len);
        if (m->ts) {
            m->staged = false; /* the rest goes straight into the buffer */
        } else if (m->rndv) {  /* parked rendezvous: now READ the rest */
            if (ub__tgt_rndv_begin(s, m, now))
                ub__tgt_msg_free(s, m);
        } else { /* already executed (buffered): deliver now */
            ub__tgt_deliver_recv(s, m, now);
            ub__tgt_msg_free(s, m);
        }
        return;
    }
}

static void flush_rbuf(ub_jfr *jfr, struct ub__rbuf *rb)
{
    struct ub_cr *cr = ub__tgt_recv_cr(jfr);
    cr->status = UB_CR_FLUSHED;
    cr->opcode = UB_CR_OP_RECV;
    cr->user_ctx = rb->user_ctx;
    cr->local_id = jfr->id;
    ub__tgt_rbuf_free(jfr, rb);
    ub__jfc_commit(jfr->jfc, cr, ((uint64_t)UB__OBJ_JFR << 56) | ((uint64_t)jfr->id << 32), false);
}

void ub__ses_jfr_flush(ub_jfr *jfr, uint64_t now)
{
    (void)now;
    struct ub__tl *s = &jfr->ctx->ses;
    /* Messages in progress that hold or wait for this JFR lose it. */
    uint64_t k;
    void *v;
    for (uint32_t i = 0; (i = ub__hmap_next(&s->tstreams, i, &k, &v)) != 0;) {
        struct ub__tstream *ts = v;
        uint64_t k2;
        void *v2;
        for (uint32_t j = 0; (j = ub__hmap_next(&ts->msgs, j, &k2, &v2)) != 0;) {
            struct ub__rxmsg *m = v2;
            if (m->jfr != jfr)
                continue;
            if (m->rb)
                flush_rbuf(jfr, m->rb);
            m->rb = NULL;
            if (m->on_unexp) {
                ub__list_remove(&m->ulink);
                m->on_unexp = false;
            }
            m->jfr = NULL;
            if (m->bind == BIND_WAIT)
                m->bind = BIND_NONE;
            if (m->rc == UB_SES_RC_OK)
                m->rc = UB_SES_RC_CANCELLED;
        }
        ub__tgt_try_exec(s, ts, now);
    }
    while (!ub__list_empty(&jfr->unexpected)) { /* buffered messages nobody will receive */
        struct ub__rxmsg *m = UB_CONTAINER_OF(jfr->unexpected.next, struct ub__rxmsg, ulink);
        m->jfr = NULL;
        if (m->rndv && !m->ts) /* a parked sender waits: tell it */
            ub__tgt_respond(s, m, UB_SES_RC_CANCELLED, 0, false, 0, now);
        ub__tgt_msg_free(s, m);
    }
    /* Rendezvous messages being READ into this JFR's buffers. */
    for (bool again = true; again;) {
        again = false;
        for (uint32_t i = 0; (i = ub__hmap_next(&s->rndv, i, &k, &v)) != 0;) {
            struct ub__rxmsg *m = v;
            if (m->jfr != jfr)
                continue;
            if (m->rb)
                flush_rbuf(jfr, m->rb);
            m->rb = NULL;
            m->jfr = NULL;
            ub__tgt_respond(s, m, UB_SES_RC_CANCELLED, 0, false, 0, now);
            ub__tgt_msg_free(s, m);
            again = true;
            break;
        }
    }
    while (!ub__list_empty(&jfr->deferred)) { /* their senders' deferral bound ends them */
        struct ub__list *l = ub__list_pop_front(&jfr->deferred);
        free(UB_CONTAINER_OF(l, struct ub__defer, link));
    }
    jfr->ndeferred = 0;
    struct ub__list *l;
    while ((l = ub__list_pop_front(&jfr->reserved)) != NULL)
        flush_rbuf(jfr, UB_CONTAINER_OF(l, struct ub__rbuf, link));
    while ((l = ub__list_pop_front(&jfr->posted)) != NULL)
        flush_rbuf(jfr, UB_CONTAINER_OF(l, struct ub__rbuf, link));
}

/* ---- rendezvous, target half ------------------------------------------------------------- */

/* The message ends with an error: the receiver and the sender learn it. Caller frees m. */
static void rndv_fail(struct ub__tl *s, struct ub__rxmsg *m, enum ub_cr_status st, uint8_t rc,
                      uint64_t now)
{
    if (m->rb && m->jfr) {
        m->cr_status = st;
        ub__tgt_deliver_recv(s, m, now);
    }
    ub__tgt_respond(s, m, rc, 0, false, 0, now);
}

/* Placed completely: the receiver gets its record, the sender its answer. Caller frees m. */
static void rndv_done(struct ub__tl *s, struct ub__rxmsg *m, uint64_t now)
{
    s->st.rndv_done++;
    ub__tgt_deliver_recv(s, m, now);
    ub__tgt_respond(s, m, UB_SES_RC_OK, (uint32_t)m->len, false, 0, now);
}

/* Puts m in s->rndv under a fresh read id (its READ's, and a parked message's PENDING's PDS
 * cookie: a failure names it). false: no memory. */
static bool rndv_track(struct ub__tl *s, struct ub__rxmsg *m)
{
    uint32_t id;
    do
        id = ++s->next_rndv;
    while (!id || ub__hmap_get(&s->rndv, id));
    if (ub__hmap_put(&s->rndv, id, m))
        return false;
    m->read_id = id;
    m->in_rndv = true;
    return true;
}

void ub__tgt_rndv_park(struct ub__tl *s, struct ub__rxmsg *m, uint64_t now)
{
    (void)rndv_track(s, m); /* without an id its PENDINGs go untracked: kept until matched */
    ub__timer_arm(&s->eng->timers, &m->rd_timer, now + UB_SES_PARK_REFRESH_NS);
}

bool ub__tgt_rndv_begin(struct ub__tl *s, struct ub__rxmsg *m, uint64_t now)
{
    if (m->len > m->rb->cap) { /* the record says so; the sender learns it too */
        ub__tgt_deliver_recv(s, m, now);
        ub__tgt_respond(s, m, UB_SES_RC_TOO_LONG, 0, false, 0, now);
        return true;
    }
    if (m->stage && m->staged) /* the eager part arrived before the buffer was known */
        ub__tgt_rbuf_place(m->rb, 0, m->stage, m->wire_len);
    free(m->stage);
    m->stage = NULL;
    m->staged = false;
    if (m->ivl.total >= m->len) { /* nothing left to READ */
        rndv_done(s, m, now);
        return true;
    }
    if (!m->in_rndv && !rndv_track(s, m)) { /* a parked one has its id */
        rndv_fail(s, m, UB_CR_REM_OP_ERR, UB_SES_RC_HOST_UNSUCCESS_CMPL, now);
        return true;
    }
    uint32_t id = m->read_id;
    /* One READ request for the whole rest (UET reads are single-packet requests). */
    struct ub__ses_std q;
    memset(&q, 0, sizeof(q));
    q.opcode = UB_SES_OP_READ;
    q.flags = UB_SES_F_SOM | UB_SES_F_EOM;
    q.msg_id = (uint16_t)m->seq;
    q.job_id = s->eng->cfg.job_id;
    q.pid_on_fep = (uint16_t)((m->rd_jfs >> 12) & 0xfff);
    q.resource_index = (uint16_t)(m->rd_jfs & 0xfff);
    q.buffer_offset = m->rd_off;
    q.mem_key = m->rd_key;
    q.request_length = (uint32_t)(m->len - m->rd_off);
    struct ub__ses_tail t = {0, 0, id, UB_SES_TAIL_R << 24};
    if (ub__ses_send_ctl(s, &m->src, &q, m->stream, m->seq, &t, id, now)) {
        rndv_fail(s, m, UB_CR_REM_OP_ERR, UB_SES_RC_HOST_UNSUCCESS_CMPL, now);
        return true;
    }
    s->st.rndv_reads++;
    ub__timer_arm(&s->eng->timers, &m->rd_timer, now + s->rsp_timeout_ns);
    return false;
}

void ub__tgt_rndv_timeout(struct ub__timer *t, uint64_t now)
{
    struct ub__rxmsg *m = UB_CONTAINER_OF(t, struct ub__rxmsg, rd_timer);
    if (!m->jfr)
        return;
    struct ub__tl *s = &m->jfr->ctx->ses;
    if (m->on_unexp) {
        /* Parked: still held, the sender hears. Tracked by PDS under the read id, so that a
         * sender gone for good (it failed) lets go of it (ub__ses_rndv_failed); one that
         * cannot go now is skipped (the sender's bound spans several). */
        if (ub__tgt_rsp_tracked(s, &m->src, m->stream, m->seq, UB_SES_RC_PENDING,
                                m->in_rndv ? m->read_id : 0, now))
            s->st.rndv_park_refresh++;
        ub__timer_arm(&s->eng->timers, &m->rd_timer, now + UB_SES_PARK_REFRESH_NS);
        return;
    }
    if (!m->in_rndv)
        return;
    rndv_fail(s, m, UB_CR_PEER_UNREACHABLE, UB_SES_RC_CANCELLED, now);
    ub__tgt_msg_free(s, m);
}

void ub__ses_rndv_failed(struct ub__tl *s, uint32_t read_id, uint64_t now)
{
    struct ub__rxmsg *m = ub__hmap_get(&s->rndv, read_id);
    if (!m)
        return;
    if (m->on_unexp) { /* parked, its sender gone: nothing could ever be READ of it */
        s->st.rndv_park_dropped++;
        ub__tgt_msg_free(s, m);
        return;
    }
    rndv_fail(s, m, UB_CR_PEER_UNREACHABLE, UB_SES_RC_CANCELLED, now);
    ub__tgt_msg_free(s, m);
}

void ub__ses_rndv_peer_gone(struct ub__tl *s, const struct ub__addr *src)
{
    uint64_t k;
    void *v;
    for (bool again = true; again;) { /* freeing changes the map: from its start again */
        again = false;
        for (uint32_t i = 0; (i = ub__hmap_next(&s->rndv, i, &k, &v)) != 0;) {
            struct ub__rxmsg *m = v;
            if (m->on_unexp && ub__addr_eq(&m->src, src)) {
                s->st.rndv_park_dropped++;
                ub__tgt_msg_free(s, m);
                again = true;
                break;
            }
        }
    }
}

void ub__ses_rndv_on_data(struct ub__tl *s, const struct ub__pds_rx *rx,
                          const struct ub__ses_tail *t, uint64_t now)
{
    const struct ub__wire_dgram *d = rx->hdr;
    const struct ub__ses_rsp_data *r = &d->ses.u.rsp_data;
    s->st.rx_rsp_pkts++;
    struct ub__rxmsg *m = ub__hmap_get(&s->rndv, t->send_seq);
    if (!m || !ub__ses_peer_eq(&m->src, rx->src) || m->stream != d->ext.stream ||
        m->seq != d->ext.order_seq || !m->rb) {
        s->st.rx_stale_rsp++; /* a message already over: its buffer is not ours any more */
        return;
    }
    if (r->rc != UB_SES_RC_OK) { /* the initiator refused the READ */
        rndv_fail(s, m, UB_CR_REM_ACCESS_ERR, r->rc, now);
        ub__tgt_msg_free(s, m);
        return;
    }
    uint64_t off = r->message_offset, n = rx->payload_len;
    if (off < m->rd_off || off > m->len || n > m->len - off) {
        s->st.rx_bad_pkts++;
        return;
    }
    uint64_t fresh;
    if (ub__ivl_add(&m->ivl, off, off + n, &fresh)) {
        rndv_fail(s, m, UB_CR_REM_OP_ERR, UB_SES_RC_HOST_UNSUCCESS_CMPL, now);
        ub__tgt_msg_free(s, m);
        return;
    }
    if (fresh < n) { /* seen before: place nothing twice, count nothing twice */
        s->st.rx_dup_pkts++;
        s->st.dup_bytes += n - fresh;
    }
    if (fresh)
        ub__tgt_rbuf_place(m->rb, off, rx->payload, n);
    if (m->ivl.total >= m->len) {
        rndv_done(s, m, now);
        ub__tgt_msg_free(s, m);
        return;
    }
    ub__timer_arm(&s->eng->timers, &m->rd_timer, now + s->rsp_timeout_ns);
}
