/*
 * Rendezvous, initiator half, and the two request-less packets the
 * transaction layer sends on its own: DEFER_RTR (a target asks a deferred
 * message again) and the rendezvous READ (a target fetches the bulk of a
 * large message).
 *
 * A rendezvous message exposes nothing but itself: the target's READ names
 * the transaction (stream and order_seq in the extension header, the JFS in
 * pid_on_fep|resource_index), presents the one-off 64-bit token the eager
 * part carried, and must come from the node the message went to. The data
 * comes from the request's own SGEs (any SGL, or its inline copy): by
 * reference where a WRITE's payload would be (engine zc_min, one SGE),
 * gathered otherwise; nothing is registered for it and nothing stays
 * readable after the request is over (what PDS still holds then is copied
 * in, as for a WRITE). The READ data goes back as responses with data, tagged with the
 * R bit and the target's read id in an extension tail.
 */
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "core/compiler.h"
#include "ses/ses.h"
#include "wire/datagram.h"

/* One READ of a rendezvous message being served. */
struct ub__rvjob {
    struct ub__list link; /* s->rvq */
    struct ub__wr *w;
    uint32_t gen;
    uint32_t read_id;
    uint64_t off, end;
};

int ub__ses_send_ctl(struct ub__tl *s, const struct ub__addr *dst, const struct ub__ses_std *q,
                     uint16_t stream, uint32_t seq, const struct ub__ses_tail *t, uint64_t cookie,
                     uint64_t now)
{
    struct ub__engine *e = s->eng;
    struct ub__pkt *p = ub__pkt_alloc(&e->pool);
    if (!p)
        return UB_ENOBUFS;
    struct ub__ses h;
    memset(&h, 0, sizeof(h));
    h.kind = UB_PDS_NH_REQ_STD;
    h.u.std = *q;
    h.ext = ub__ses_ext_for(h.kind, q->opcode);
    size_t hl = ub__ses_size(&h);
    uint8_t *at = ub__pkt_put(p, (uint32_t)hl);
    struct ub__wcur wc;
    int rc = UB_ENOBUFS;
    if (at) {
        ub__wcur_init(&wc, at, hl);
        rc = ub__ses_encode(&h, &wc);
    }
    if (rc) {
        ub__pkt_free(p);
        return rc;
    }
    struct ub__pds_tx tx = {
        .dst = dst, .mode = UB_PDS_RUD, .ses_kind = UB_PDS_NH_REQ_STD, .ack_req = true};
    tx.cookie = cookie;
    if ((rc = ub__ses_send_v1(s, &tx, stream, seq, t, p, now)) != 0)
        return rc;
    s->st.tx_req_pkts++;
    return 0;
}

int ub__ses_send_rdata(struct ub__tl *s, const struct ub__addr *dst, uint16_t stream, uint32_t seq,
                       uint32_t read_id, uint8_t rc, uint32_t mod_len, struct ub__wr *w,
                       uint64_t off, uint32_t n, uint64_t now)
{
    struct ub__pkt *p;
    int err = ub__ses_rsp_data_pkt(s, seq, rc, mod_len, (uint32_t)off, n, &p, NULL);
    if (err)
        return err;
    /* The data by reference, as a WRITE's: the packet then carries w's cookie, so that PDS
     * tells w of its ACK and w's completion finds it if it is still held. */
    bool zc = n && ub__ses_attach(s, w, p, off, n);
    if (n && !zc) {
        uint8_t *room = ub__pkt_put(p, n);
        if (!room) {
            ub__pkt_free(p);
            return UB_ENOBUFS;
        }
        ub__ses_gather(w, off, room, n);
    }
    struct ub__ses_tail t = {0, 0, read_id, UB_SES_TAIL_R << 24};
    struct ub__pds_tx tx = {
        .dst = dst, .mode = UB_PDS_RUD, .ses_kind = UB_PDS_NH_RSP_DATA, .ack_req = true};
    tx.cookie = zc ? ub__ses_wr_cookie(w) : 0;
    if ((err = ub__ses_send_v1(s, &tx, stream, seq, &t, p, now)) != 0)
        return err;
    if (zc)
        w->in_pds++;
    s->st.tx_rsp_pkts++;
    return 0;
}

void ub__ses_rndv_serve(struct ub__tl *s, const struct ub__pds_rx *rx, const struct ub__ses_tail *t,
                        uint64_t now)
{
    const struct ub__wire_dgram *d = rx->hdr;
    const struct ub__ses_std *q = &d->ses.u.std;
    uint16_t stream = d->ext.stream;
    uint32_t seq = d->ext.order_seq;
    if (q->opcode != UB_SES_OP_READ) {
        s->st.rx_bad_pkts++;
        return;
    }
    struct ub__wr *w = ub__ses_pending(s, stream, seq);
    uint32_t jfs_id = ub__ses_std_key(q);
    uint64_t off = q->buffer_offset, n = q->request_length;
    uint8_t rc = UB_SES_RC_OK;
    if (!w || !w->eager || !ub__ses_peer_eq(&w->dst, rx->src))
        rc = UB_SES_RC_NO_MATCH; /* over already, or never ours to give */
    else if (jfs_id != w->jfs->id || q->mem_key != w->rndv_token)
        rc = UB_SES_RC_BAD_MKEY;
    else if (off > w->len || n > w->len - off)
        rc = UB_SES_RC_AT_OUT_OF_RANGE;
    if (rc != UB_SES_RC_OK) {
        s->st.rx_bad_pkts++;
        ub__ses_send_rdata(s, rx->src, stream, seq, t->send_seq, rc, 0, NULL, 0, 0, now);
        return;
    }
    struct ub__list *it;
    UB_LIST_FOR_EACH(it, &s->rvq)
    {
        struct ub__rvjob *j = UB_CONTAINER_OF(it, struct ub__rvjob, link);
        if (j->w == w && j->read_id == t->send_seq)
            return; /* the same READ again (a re-established PDC): already being served */
    }
    struct ub__rvjob *j = calloc(1, sizeof(*j));
    if (!j) {
        ub__ses_send_rdata(s, rx->src, stream, seq, t->send_seq, UB_SES_RC_HOST_UNSUCCESS_CMPL, 0,
                           NULL, 0, 0, now);
        return;
    }
    j->w = w;
    j->gen = w->gen;
    j->read_id = t->send_seq;
    j->off = off;
    j->end = off + n;
    ub__list_push_back(&s->rvq, &j->link);
    /* The target is alive and has a buffer: the bound runs again (and while we serve). */
    w->parked = false;
    ub__ses_wr_arm_rsp(s, w, now);
    ub__ses_rndv_pump(s, now);
}

bool ub__ses_rndv_pump(struct ub__tl *s, uint64_t now)
{
    struct ub__engine *e = s->eng;
    struct ub__list *it, *tmp;
    UB_LIST_FOR_EACH_SAFE(it, tmp, &s->rvq)
    {
        struct ub__rvjob *j = UB_CONTAINER_OF(it, struct ub__rvjob, link);
        struct ub__wr *w = j->w;
        while (j->off < j->end) {
            if (e->pool.avail <= UB_SES_POOL_RESERVE)
                return false;
            if (ub__pds_outstanding(e->pds, &w->dst, UB_PDS_RUD) >= UB_SES_PKT_BUDGET)
                break;
            /* The extension's tail rides along: that much less data per packet. */
            uint32_t room = s->max_rsp_payload - UB_SES_TAIL_LEN;
            uint32_t n = (uint32_t)UB_MIN((uint64_t)room, j->end - j->off);
            if (ub__ses_send_rdata(s, &w->dst, w->os->id, w->seq, j->read_id, UB_SES_RC_OK,
                                   (uint32_t)w->len, w, j->off, n, now))
                return false;
            s->st.rndv_served_pkts++;
            j->off += n;
        }
        if (j->off >= j->end) {
            ub__list_remove(&j->link);
            free(j);
            ub__ses_wr_arm_rsp(s, w, now); /* all out: now the final answer is due */
        }
    }
    return true;
}

void ub__ses_rndv_forget(struct ub__tl *s, const struct ub__wr *w)
{
    struct ub__list *it, *tmp;
    UB_LIST_FOR_EACH_SAFE(it, tmp, &s->rvq)
    {
        struct ub__rvjob *j = UB_CONTAINER_OF(it, struct ub__rvjob, link);
        if (j->w == w) {
            ub__list_remove(&j->link);
            free(j);
        }
    }
}

void ub__ses_rndv_fini(struct ub__tl *s)
{
    struct ub__list *l;
    while (s->rvq.next && (l = ub__list_pop_front(&s->rvq)) != NULL)
        free(UB_CONTAINER_OF(l, struct ub__rvjob, link));
}
