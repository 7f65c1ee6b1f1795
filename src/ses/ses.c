/* SES instance: set-up, the PDS upcalls, the output pump, shared helpers. */
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "core/compiler.h"
#include "core/env.h"
#include "core/grow.h"
#include "ses/ses.h"
#include "wire/cursor.h"

uint64_t ub__obj_key(uint32_t kind, uint32_t id)
{
    return ((uint64_t)kind << 32) | id;
}

int ub__ses_send_v1(struct ub__tl *s, struct ub__pds_tx *tx, uint16_t stream, uint32_t seq,
                    const struct ub__ses_tail *t, struct ub__pkt *p, uint64_t now)
{
    uint8_t tail[UB_SES_TAIL_LEN]; /* PDS encodes the extension before it returns */
    ub__ses_tail_put(tail, t);
    tx->ext.version = 1;
    tx->ext.stream = stream;
    tx->ext.order_seq = seq;
    tx->ext.tail = tail;
    tx->ext.tail_len = UB_SES_TAIL_LEN;
    int rc = ub__pds_send(s->eng->pds, tx, p, now);
    if (rc)
        ub__pkt_free(p);
    return rc;
}

void ub__async_push(ub_context *ctx, int type, int err, uint64_t arg)
{
    if (ctx->async_count == UB_SES_ASYNC_QUEUE) { /* keep the newest: drop the oldest */
        ctx->async_head = (ctx->async_head + 1) % UB_SES_ASYNC_QUEUE;
        ctx->async_count--;
        ctx->async_dropped++;
    }
    struct ub_async_event *ev =
        &ctx->async[(ctx->async_head + ctx->async_count) % UB_SES_ASYNC_QUEUE];
    ev->type = type;
    ev->err = err;
    ev->arg = arg;
    ctx->async_count++;
}

static void on_deliver(void *arg, const struct ub__pds_rx *rx, uint64_t now)
{
    struct ub__tl *s = arg;
    const struct ub__wire_dgram *d = rx->hdr;
    if (!d->has_ext || rx->mode == UB_PDS_UUD) {
        s->st.rx_bad_pkts++;
        return;
    }
    if (d->ses_kind == UB_PDS_NH_RSP_DATA && ub__ses_is_pack(d))
        ub__ses_pack_on_rsp(s, rx, now); /* several responses: each runs as if alone */
    else if (d->ses_kind == UB_PDS_NH_RSP_DATA && d->ext.version >= 1 &&
             d->ext.tail_len >= UB_SES_TAIL_LEN && (d->ext.tail[8] & UB_SES_TAIL_R)) {
        struct ub__ses_tail t;
        ub__ses_tail_get(d->ext.tail, &t);
        ub__ses_rndv_on_data(s, rx, &t, now); /* data of a READ this side issued (rendezvous) */
    } else if (d->ses_kind == UB_PDS_NH_RSP_DATA)
        ub__ses_on_rsp(s, rx, now);
    else if (d->ses_kind == UB_PDS_NH_REQ_STD && ub__ses_is_pack(d))
        ub__ses_pack_on_req(s, rx, now); /* several requests: each runs as if alone */
    else if (d->ses_kind == UB_PDS_NH_REQ_STD && s->ack_rsp && rx->mode == UB_PDS_RUD &&
             d->ext.version >= 1 && d->ext.tail_len >= UB_SES_TAIL_LEN &&
             (d->ext.tail[8] & UB_SES_TAIL_K)) {
        /* Its PDS ACK goes alone and carries the response if this packet produces it. */
        ub__pds_dlv_own(s->eng->pds);
        s->ackr_on = true;
        s->ackr_src = rx->src;
        s->ackr_stream = d->ext.stream;
        s->ackr_seq = d->ext.order_seq;
        ub__ses_on_req(s, rx, now);
        s->ackr_on = false;
    } else if (d->ses_kind == UB_PDS_NH_REQ_STD)
        ub__ses_on_req(s, rx, now);
    else
        s->st.rx_bad_pkts++;
}

static void on_acked(void *arg, uint64_t cookie, uint64_t now)
{
    /* Completion comes with the target's response, not the PDS ACK; the ACK (re)starts the
     * bound on that response. */
    if ((cookie >> 40) == 0 && (cookie & UB_SES_PACK_COOKIE))
        ub__ses_pack_acked(arg, cookie, now);
    else if (cookie)
        ub__ses_on_acked(arg, cookie, now);
}

static void on_failed(void *arg, uint64_t cookie, int err, uint64_t now)
{
    if (cookie)
        ub__ses_on_failed(arg, cookie, err, now);
}

static bool on_link_req(void *arg, const struct ub__addr *src, const struct ub__wire_link_req *r,
                        uint64_t now)
{
    return ub__ses_link_req(arg, src, r, now);
}

static bool on_link_rsp(void *arg, const struct ub__addr *src, const struct ub__wire_link_rsp *r,
                        uint64_t now)
{
    return ub__ses_link_rsp(arg, src, r, now);
}

static void on_restarted(void *arg, const struct ub__addr *peer, bool noticed, uint64_t now)
{
    (void)now;
    ub__ses_peer_restarted(arg, peer, noticed);
}

static const struct ub__pds_upcalls ses_upcalls = {
    .deliver = on_deliver, .acked = on_acked, .failed = on_failed, .restarted = on_restarted};

int ub__ses_init(struct ub__tl *s, ub_context *ctx)
{
    memset(s, 0, sizeof(*s));
    s->ctx = ctx;
    s->eng = &ctx->eng;
    uint32_t mtu = s->eng->cfg.mtu;
    uint32_t hdr = UB_PDS_REQ_SIZE + UB_EXT_SIZE + UB_SES_TAIL_LEN + UB_SES_STD_SIZE;
    s->max_payload = mtu - hdr;
    s->max_rsp_payload = mtu - (UB_PDS_REQ_SIZE + UB_EXT_SIZE + UB_SES_RSP_DATA_SIZE);
    if (s->max_rsp_payload > UB_SES_LEN14_MAX)
        s->max_rsp_payload = UB_SES_LEN14_MAX;
    if (s->max_payload > UB_SES_LEN14_MAX)
        s->max_payload = UB_SES_LEN14_MAX;
    s->max_prsp_payload = s->max_rsp_payload - UB_SES_TAIL_LEN;
    ub__list_init(&s->txq);
    s->txq_idle_gen = UINT64_MAX; /* no pass yet */
    ub__list_init(&s->rdq);
    ub__list_init(&s->rspq);
    ub__list_init(&s->tstream_lru);
    ub__list_init(&s->rvq);
    ub__list_init(&s->cmaq);
    s->cma_min = ctx->attr.cma_min ? ctx->attr.cma_min : UB_SES_CMA_MIN;
    s->eager_max = ctx->attr.eager_max ? ctx->attr.eager_max : UB_SES_EAGER_MAX;
    s->rsp_timeout_ns =
        ctx->attr.rsp_timeout_ms ? ctx->attr.rsp_timeout_ms * 1000000ull : UB_SES_RSP_TIMEOUT_NS;
    /* Packing: on unless the context says UB_PACK_OFF or the environment SOFTUB_PACK=0. */
    s->pack_max = ctx->attr.pack_max ? ctx->attr.pack_max : UB_SES_PACK_MAX;
    if (ctx->attr.pack_max == UB_PACK_OFF || ub__env_off("SOFTUB_PACK"))
        s->pack_max = 0;
    s->ack_rsp = !ub__env_off("SOFTUB_ACK_RSP");
    s->fast = !ub__env_off("SOFTUB_FAST");
    s->ack_rsp_busy = 1; /* a request waited for alone: streams keep packing and coalescing */
    uint64_t seed = ub__rng_next(&s->eng->rng);
    int rc;
    if ((rc = ub__hmap_init(&s->tstreams, 16, 0, seed)) ||
        (rc = ub__hmap_init(&s->ostreams_by_id, 16, 0, seed + 1)) ||
        (rc = ub__hmap_init(&s->pending, 64, 0, seed + 2)) ||
        (rc = ub__hmap_init(&s->rndv, 4, 0, seed + 3)) ||
        (rc = ub__hmap_init(&s->packs, 16, 0, seed + 4))) {
        ub__ses_fini(s);
        return rc;
    }
    s->next_stream = (uint16_t)ub__rng_next(&s->eng->rng);
    ub__pds_set_upcalls(s->eng->pds, &ses_upcalls, s);
    ub__pds_set_link_req(s->eng->pds, on_link_req);
    ub__pds_set_link_rsp(s->eng->pds, on_link_rsp);
    return 0;
}

void ub__ses_fini(struct ub__tl *s)
{
    s->prsp_n = 0;
    ub__ses_tgt_fini(s);
    ub__ses_rndv_fini(s);
    ub__ses_pack_fini(s);
    ub__hmap_fini(&s->tstreams);
    ub__hmap_fini(&s->ostreams_by_id);
    ub__hmap_fini(&s->pending);
    ub__hmap_fini(&s->rndv);
    ub__hmap_fini(&s->packs);
}

/* Whether w goes to one of the n peers a pass found busy (by a request of each). */
static inline bool busy_peer(const struct ub__wr *const *busy, uint32_t n, const struct ub__wr *w)
{
    for (uint32_t i = 0; i < n; i++)
        if (ub__ses_wr_to(w, busy[i]->mode, &busy[i]->dst))
            return true;
    return false;
}

/* The table of ub__send_seq_of: jfr's entry, new (at 0) at the end. */
struct ub__send_seq *ub__send_seq_add(struct ub__send_seqs *t, uint32_t jfr)
{
    if (t->n == t->cap) {
        struct ub__send_seq *v = ub__grow(t->v, &t->cap, sizeof(*v), 2);
        if (!v)
            return NULL;
        t->v = v;
    }
    t->v[t->n] = (struct ub__send_seq){jfr, 0};
    return &t->v[t->n++];
}

void ub__ses_pump_work(struct ub__tl *s, uint64_t now)
{
    /* Requests in posting order; one that cannot go on waits at the head (fair, in order).
     * One left queued found its peer busy (PDS holds its budget): nothing more goes there in
     * this pass, so the others for that peer are passed over without asking again (a bulk
     * sender waiting on its window polls with dozens of them queued; one sending to several
     * peers, with their requests interleaved). */
    const struct ub__wr *busy[UB_SES_PUMP_BUSY];
    uint32_t nbusy = 0;
    bool only_busy = true; /* every request after the first busy one is for its peer */
    struct ub__list *it = s->txq.next;
    while (it != &s->txq) {
        struct ub__wr *w = UB_CONTAINER_OF(it, struct ub__wr, txq);
        if (nbusy && busy_peer(busy, nbusy, w)) {
            s->st.tx_passed++;
            it = it->next;
            continue;
        }
        only_busy = !nbusy;
        struct ub__list *prev = it->prev; /* stays: members of a pack come after w */
        /* The last queued request has nothing after it to pack with: alone (UB_PACK_NONE). */
        int pk =
            s->pack_max && w->txq.next != &s->txq ? ub__ses_pack_pump(s, w, now) : UB_PACK_NONE;
        if (pk == UB_PACK_STOP || (pk == UB_PACK_NONE && !ub__ses_wr_pump(s, w, now)))
            break;
        if (w->on_txq) {
            /* The queue as a pass left it that found only this peer's requests behind its
             * first busy one (a bulk sender waiting on its window): the rest would be passed
             * over one by one. */
            if (!nbusy && s->txq_idle_gen == s->txq_gen)
                break;
            busy[nbusy < UB_SES_PUMP_BUSY ? nbusy++ : nbusy - 1] = w;
            /* Every request queued goes to this peer (a bulk sender of many JFSs waiting on its
             * window): passing over the thousands behind it one by one would find only that,
             * and the pass's end below would record it so. */
            if (!s->txq_mixed) {
                s->txq_idle_gen = s->txq_gen;
                break;
            }
        }
        it = w->on_txq ? w->txq.next : prev->next;
    }
    if (it == &s->txq && nbusy && only_busy)
        s->txq_idle_gen = s->txq_gen;
    /* Each sub-pump only when its queue holds work (they do nothing on an empty one). */
    if ((ub__list_empty(&s->rspq) && ub__list_empty(&s->rdq)) || ub__ses_rd_pump(s, now)) {
        if (!ub__list_empty(&s->rvq))
            ub__ses_rndv_pump(s, now);
    }
    if (!ub__list_empty(&s->cmaq))
        ub__ses_cma_pump(s, now);
    if (s->prsp_n && !s->prsp_hold)
        ub__ses_rsp_flush(s, now); /* the responses of this round, packed per initiator */
}
