/*
 * The target's responses: a transaction's answer on the ACK of its request, gathered with
 * others to one initiator into a packed response, or in a packet of its own (queued in order
 * while the pool is low), and READ data, in one record, on the ACK or streamed in packets by
 * the READ pump. Apart from ses_tgt.c (assembly, order engine, execution), which decides what
 * the answer is; this file decides how it leaves.
 */
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "core/compiler.h"
#include "ses/ses_tgt.h"
#include "wire/datagram.h"

struct ub__rdjob {
    struct ub__list link;
    struct ub__rxmsg *m;
    uint64_t off;
};

/* Responses that found no buffer yet, in order: one alone, or (to an initiator that takes
 * them) a batch that leaves as one packed response. */
struct ub__rspq {
    struct ub__list link;
    struct ub__addr dst;
    uint32_t n, cap, bytes;
    struct ub__prsp r[];
};

/* ---- responses ------------------------------------------------------------------------------ */

int ub__ses_rsp_data_pkt(struct ub__tl *s, uint32_t seq, uint8_t rc, uint32_t mod_len, uint32_t off,
                         uint32_t n, struct ub__pkt **out, uint8_t **data)
{
    struct ub__engine *e = s->eng;
    struct ub__pkt *p = ub__pkt_alloc(&e->pool);
    if (!p)
        return UB_ENOBUFS;
    /* A response with data has no SES extension: its own encoder does (ub__ses_encode would
     * call it). */
    struct ub__ses_rsp_data h;
    memset(&h, 0, sizeof(h));
    struct ub__ses_rsp_data *r = &h;
    r->list = UB_SES_LIST_EXPECTED;
    r->rc = rc;
    r->msg_id = (uint16_t)seq;
    r->job_id = e->cfg.job_id;
    r->read_req_msg_id = (uint16_t)seq;
    r->payload_len = (uint16_t)n;
    r->modified_length = mod_len;
    r->message_offset = off;
    uint8_t *at = ub__pkt_put(p, UB_SES_RSP_DATA_SIZE);
    struct ub__wcur w;
    ub__wcur_init(&w, at, UB_SES_RSP_DATA_SIZE);
    int err = ub__ses_rsp_data_encode(&h, &w);
    if (data) {
        *data = NULL;
        if (!err && n && !(*data = ub__pkt_put(p, n)))
            err = UB_ENOBUFS;
    }
    if (err) {
        ub__pkt_free(p);
        return err;
    }
    *out = p;
    return 0;
}

/*
 * A response with n bytes of data, copied into its packet; or, when the data is a segment's
 * (seg) and worth it (engine zc_min), by reference, as a WRITE's payload: what PDS still
 * holds of a segment when it is unregistered is copied in then (ub__pds_flatten_range).
 */
static int send_rsp_now(struct ub__tl *s, const struct ub__addr *dst, uint16_t stream, uint32_t seq,
                        uint8_t rc, uint32_t mod_len, const uint8_t *data, uint32_t n, uint32_t off,
                        bool seg, uint64_t cookie, uint64_t now)
{
    struct ub__engine *e = s->eng;
    struct ub__pkt *p;
    uint8_t *room = NULL;
    bool ref = seg && ub__ses_zc_size(s, n);
    int err = ub__ses_rsp_data_pkt(s, seq, rc, mod_len, off, n, &p, ref ? NULL : &room);
    if (err)
        return err;
    if (ref && ub__pkt_attach(p, data, n) != 0 && !(room = ub__pkt_put(p, n))) {
        ub__pkt_free(p);
        return UB_ENOBUFS;
    }
    if (room)
        memcpy(room, data, n);
    struct ub__pds_tx tx = {.dst = dst,
                            .mode = UB_PDS_RUD,
                            .ses_kind = UB_PDS_NH_RSP_DATA,
                            .ack_req = true,
                            .after_ack = n == 0,
                            .cookie = cookie};
    tx.ext.stream = stream;
    tx.ext.order_seq = seq;
    err = ub__pds_send(e->pds, &tx, p, now);
    if (err) {
        ub__pkt_free(p);
        return err;
    }
    s->st.tx_rsp_pkts++;
    return 0;
}

/* Queues a response that cannot go now (it goes from ub__ses_rd_pump, in order). A packable
 * one (pk) joins the last queued batch when it fits, so packing survives back-pressure. */
static void rsp_queue(struct ub__tl *s, const struct ub__addr *dst, const struct ub__prsp *r,
                      bool pk)
{
    uint32_t b = UB_SES_PRSP_REC(r->n);
    struct ub__list *l = &s->rspq;
    if (pk && !ub__list_empty(l)) {
        struct ub__rspq *t = UB_CONTAINER_OF(l->prev, struct ub__rspq, link);
        if (t->n < t->cap && t->bytes + b <= s->max_prsp_payload && ub__addr_eq(&t->dst, dst)) {
            t->r[t->n++] = *r;
            t->bytes += b;
            return;
        }
    }
    uint32_t cap = pk ? UB_SES_PACK_RECS : 1;
    struct ub__rspq *q = malloc(sizeof(*q) + cap * sizeof(q->r[0]));
    if (!q)
        return; /* the initiator's request stays open; nothing else can be done */
    q->dst = *dst;
    q->n = 1;
    q->cap = cap;
    q->bytes = b;
    q->r[0] = *r;
    ub__list_push_back(l, &q->link);
}

/* Responses leave only while the pool stays above a quarter of the reserve (requests must
 * still be received), and in order: none while older ones wait in the queue. */
static bool rsp_room(const struct ub__tl *s)
{
    return s->eng->pool.avail > UB_SES_POOL_RESERVE / 4;
}

static bool rsp_may_go(struct ub__tl *s)
{
    return ub__list_empty(&s->rspq) && rsp_room(s);
}

static bool rsp_send_one(struct ub__tl *s, const struct ub__addr *dst, const struct ub__prsp *r,
                         uint64_t now)
{
    return rsp_may_go(s) && send_rsp_now(s, dst, r->stream, r->seq, r->rc, r->mod_len, r->data,
                                         r->n, r->off, false, 0, now) == 0;
}

bool ub__tgt_rsp_tracked(struct ub__tl *s, const struct ub__addr *dst, uint16_t stream,
                         uint32_t seq, uint8_t rc, uint64_t cookie, uint64_t now)
{
    return rsp_may_go(s) &&
           send_rsp_now(s, dst, stream, seq, rc, 0, NULL, 0, 0, false, cookie, now) == 0;
}

void ub__ses_rsp_flush(struct ub__tl *s, uint64_t now)
{
    uint32_t n = s->prsp_n;
    if (!n)
        return;
    s->prsp_n = 0;
    s->prsp_bytes = 0;
    if (n == 1) { /* alone: the ordinary response packet */
        if (!rsp_send_one(s, &s->prsp_dst, &s->prsp[0], now))
            rsp_queue(s, &s->prsp_dst, &s->prsp[0], true);
        return;
    }
    if (rsp_may_go(s) && ub__ses_prsp_send(s, &s->prsp_dst, s->prsp, n, now) == 0)
        return;
    for (uint32_t i = 0; i < n; i++) /* still packed when buffers come back */
        rsp_queue(s, &s->prsp_dst, &s->prsp[i], true);
}

_Static_assert(UB_EXT_SIZE + UB_SES_RSP_DATA_SIZE + UB_SES_RIDE_DATA <= UB_PDS_ACK_RSP_MAX,
               "a READ's data that may ride must fit what an ACK carries");

/* The response r (with n bytes of data) of the transaction whose packet (with K) is being
 * delivered: onto its ACK. */
static bool rsp_ride(struct ub__tl *s, const struct ub__prsp *r, const uint8_t *data, uint32_t n)
{
    uint32_t job = s->eng->cfg.job_id;
    if (job > UB_SES_JOB_ID_MAX || !ub__ses_rc_valid(r->rc) || n > UB_SES_RIDE_DATA)
        return false;
    /* Written where PDS keeps it for the ACK (and its repeats): no copy in between. */
    uint8_t *b = ub__pds_dlv_rsp(s->eng->pds, UB_EXT_SIZE + UB_SES_RSP_DATA_SIZE + n);
    if (!b)
        return false;
    ub__ses_rsp_put(b, r, data, n, job, ub__pds_incarnation(s->eng->pds));
    s->ackr_on = false; /* one response per packet */
    s->st.tx_rsp_ack++;
    return true;
}

/* The gathered responses' next record, for a response of n data bytes to dst (those
 * gathered for another initiator, or that leave no room, flushed first). */
static struct ub__prsp *prsp_next(struct ub__tl *s, const struct ub__addr *dst, uint32_t n,
                                  uint64_t now)
{
    uint32_t b = UB_SES_PRSP_REC(n);
    if (s->prsp_n && (s->prsp_n == UB_SES_PACK_RECS || s->prsp_bytes + b > s->max_prsp_payload ||
                      !ub__addr_eq(&s->prsp_dst, dst)))
        ub__ses_rsp_flush(s, now);
    if (!s->prsp_n)
        s->prsp_dst = *dst;
    s->prsp_bytes += b;
    return &s->prsp[s->prsp_n++];
}

/* Whether the response for (stream, seq) to dst may ride on the ACK being made. */
static inline bool rsp_rides(const struct ub__tl *s, const struct ub__addr *dst, uint16_t stream,
                             uint32_t seq)
{
    return s->ackr_on && seq == s->ackr_seq && stream == s->ackr_stream &&
           ub__addr_eq(dst, s->ackr_src);
}

/*
 * A response with n (at most UB_SES_PRSP_DATA) bytes of data: on the ACK being made when it
 * may ride there; to an initiator that takes packed responses (pk) gathered in s->prsp until
 * the end of the pump, so that the responses of one progress round to one initiator leave in
 * one packet; otherwise it goes now (or is queued). A response that will be gathered is
 * written straight into its record: built elsewhere and copied there, the copy's wide loads
 * would wait for the narrower stores that had just written it.
 */
static void rsp_data(struct ub__tl *s, const struct ub__addr *dst, uint16_t stream, uint32_t seq,
                     uint8_t rc, uint32_t len, const uint8_t *data, uint32_t n, bool pk,
                     uint64_t now)
{
    bool rides = rsp_rides(s, dst, stream, seq);
    bool gather = pk && ub__list_empty(&s->rspq);
    struct ub__prsp tmp, *r = gather && !rides ? prsp_next(s, dst, n, now) : &tmp;
    r->stream = stream;
    r->rc = rc;
    r->n = (uint8_t)n;
    r->seq = seq;
    r->mod_len = len;
    r->off = 0;
    if (n == 8) /* an atomic's old value: a fixed-size copy, no library call */
        memcpy(r->data, data, 8);
    else if (n)
        memcpy(r->data, data, n);
    if (r != &tmp || (rides && rsp_ride(s, r, r->data, r->n)))
        return;
    if (gather) { /* it could not ride after all */
        *prsp_next(s, dst, n, now) = *r;
        return;
    }
    ub__ses_rsp_flush(s, now); /* those gathered before go first */
    if (!rsp_send_one(s, dst, r, now))
        rsp_queue(s, dst, r, pk);
}

void ub__tgt_rsp_val(struct ub__tl *s, const struct ub__addr *dst, uint16_t stream, uint32_t seq,
                     uint8_t rc, uint32_t len, bool has_val, uint64_t val, bool pk, uint64_t now)
{
    uint8_t v[8];
    ub__st64(v, val);
    rsp_data(s, dst, stream, seq, rc, len, v, has_val ? 8 : 0, pk, now);
}

/* Sends a response without data (or with an 8-byte value); queued if it cannot go now. */
void ub__tgt_send_rsp(struct ub__tl *s, const struct ub__addr *dst, uint16_t stream, uint32_t seq,
                      uint8_t rc, uint32_t len, bool has_val, uint64_t val, uint64_t now)
{
    ub__tgt_rsp_val(s, dst, stream, seq, rc, len, has_val, val, false, now);
}

/* Answers transaction seq of stream ts (kept in its cache for re-sending; ts may be NULL). */
void ub__tgt_respond_in(struct ub__tl *s, struct ub__tstream *ts, const struct ub__addr *src,
                        uint16_t stream, uint32_t seq, bool pk, uint8_t rc, uint32_t len,
                        bool has_val, uint64_t val, uint64_t now)
{
    if (ts) {
        struct ub__rspc *c = &ts->cache[seq % UB_SES_RSP_CACHE];
        c->seq = seq;
        c->valid = true;
        c->rc = rc;
        c->len = len;
        c->has_val = has_val;
        c->val = val;
    }
    ub__tgt_rsp_val(s, src, stream, seq, rc, len, has_val, val, pk, now);
}

void ub__tgt_respond(struct ub__tl *s, struct ub__rxmsg *m, uint8_t rc, uint32_t len, bool has_val,
                     uint64_t val, uint64_t now)
{
    ub__tgt_respond_in(s, m->ts, &m->src, m->stream, m->seq, m->pk, rc, len, has_val, val, now);
}

/* Answers a READ of at most UB_SES_PRSP_DATA bytes at addr of seg (rc: the segment check's
 * verdict; seg only when it passed): its data in one response record. */
void ub__tgt_read_answer(struct ub__tl *s, const struct ub__addr *dst, uint16_t stream,
                         uint32_t seq, bool pk, uint8_t rc, const ub_seg *seg, uint64_t addr,
                         uint32_t len, uint64_t now)
{
    if (rc != UB_SES_RC_OK)
        len = 0;
    const uint8_t *data = len ? seg->addr + (addr - (uint64_t)(uintptr_t)seg->addr) : NULL;
    rsp_data(s, dst, stream, seq, rc, len, data, len, pk, now);
}

/* Answers a READ of up to a response packet's payload at addr of seg (checked), when the caller
 * saw read_may_go: on the ACK being made when it may ride there, else with a packet of its own.
 * False: that packet could not go; nothing was sent. */
bool ub__tgt_read_packet(struct ub__tl *s, const struct ub__addr *dst, uint16_t stream,
                         uint32_t seq, const ub_seg *seg, uint64_t addr, uint32_t len, uint64_t now)
{
    const uint8_t *data = seg->addr + (addr - (uint64_t)(uintptr_t)seg->addr);
    if (len <= UB_SES_RIDE_DATA && rsp_rides(s, dst, stream, seq)) {
        struct ub__prsp r;
        r.stream = stream;
        r.rc = UB_SES_RC_OK;
        r.n = 0;
        r.seq = seq;
        r.mod_len = len;
        r.off = 0;
        if (rsp_ride(s, &r, data, len))
            return true;
    }
    return send_rsp_now(s, dst, stream, seq, UB_SES_RC_OK, len, data, len, 0, true, 0, now) == 0;
}

/* ---- READ responses ------------------------------------------------------------------------- */

void ub__tgt_rd_start(struct ub__tl *s, struct ub__rxmsg *m)
{
    struct ub__rdjob *j = calloc(1, sizeof(*j));
    if (!j) {
        m->rc = UB_SES_RC_HOST_UNSUCCESS_CMPL;
        return;
    }
    m->running = true;
    m->ts->busy++;
    s->st.rd_streamed++;
    j->m = m;
    ub__list_push_back(&s->rdq, &j->link);
}

static void rd_done(struct ub__tl *s, struct ub__rdjob *j, uint64_t now)
{
    struct ub__rxmsg *m = j->m;
    struct ub__tstream *ts = m->ts;
    ub__list_remove(&j->link);
    free(j);
    ts->busy--;
    ub__tgt_executed_now(ts, m);
    s->st.executed++;
    ub__tgt_msg_free(s, m);
    ub__tgt_try_exec(s, ts, now);
}

bool ub__ses_rd_pump(struct ub__tl *s, uint64_t now)
{
    struct ub__engine *e = s->eng;
    while (!ub__list_empty(&s->rspq)) {
        struct ub__rspq *q = UB_CONTAINER_OF(s->rspq.next, struct ub__rspq, link);
        const struct ub__prsp *r = &q->r[0];
        if (!rsp_room(s) ||
            (q->n == 1 ? send_rsp_now(s, &q->dst, r->stream, r->seq, r->rc, r->mod_len, r->data,
                                      r->n, r->off, false, 0, now)
                       : ub__ses_prsp_send(s, &q->dst, q->r, q->n, now)))
            return false;
        ub__list_remove(&q->link);
        free(q);
    }
    struct ub__list *it, *tmp;
    UB_LIST_FOR_EACH_SAFE(it, tmp, &s->rdq)
    {
        struct ub__rdjob *j = UB_CONTAINER_OF(it, struct ub__rdjob, link);
        struct ub__rxmsg *m = j->m;
        for (;;) {
            if (e->pool.avail <= UB_SES_POOL_RESERVE)
                return false;
            if (ub__pds_outstanding(e->pds, &m->src, UB_PDS_RUD) >= UB_SES_PKT_BUDGET)
                break;
            ub_seg *seg = NULL;
            uint8_t rc =
                ub__tgt_seg_check(s->ctx, m->key, m->mkey, UB_ACCESS_READ, m->addr, m->len, &seg);
            if (rc != UB_SES_RC_OK) { /* revoked while being read */
                ub__tgt_rsp_val(s, &m->src, m->stream, m->seq, rc, 0, false, 0, m->pk, now);
                rd_done(s, j, now);
                break;
            }
            uint32_t n = (uint32_t)UB_MIN((uint64_t)s->max_rsp_payload, m->len - j->off);
            /* (Small READs never come here, nor those of one packet that could go at once:
             * exec_msg answers them.) */
            const uint8_t *src = seg->addr + (m->addr - (uint64_t)(uintptr_t)seg->addr) + j->off;
            int err = send_rsp_now(s, &m->src, m->stream, m->seq, UB_SES_RC_OK, (uint32_t)m->len,
                                   src, n, (uint32_t)j->off, true, 0, now);
            if (err)
                return false;
            j->off += n;
            if (j->off >= m->len) {
                rd_done(s, j, now);
                break;
            }
        }
    }
    return true;
}

/* What the response and READ queues hold when the context goes. */
void ub__ses_rsp_fini(struct ub__tl *s)
{
    struct ub__list *l;
    while ((l = ub__list_pop_front(&s->rdq)) != NULL)
        free(UB_CONTAINER_OF(l, struct ub__rdjob, link));
    while ((l = ub__list_pop_front(&s->rspq)) != NULL)
        free(UB_CONTAINER_OF(l, struct ub__rspq, link));
}
