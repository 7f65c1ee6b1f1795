/* PDS instance: configuration, context tables, input dispatch, output scheduling. */
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "core/clock.h"
#include "pds/pds_int.h"

static void set_defaults(struct ub__pds_cfg *c)
{
#define DEF(f, v) \
    if (!c->f)    \
    c->f = (v)
    DEF(max_pdcs, UB_PDS_DEFAULT_MAX_PDCS);
    DEF(window, UB_PDS_DEFAULT_WINDOW);
    DEF(mp_range, UB_PDS_DEFAULT_MP_RANGE);
    DEF(ack_every, UB_PDS_DEFAULT_ACK_EVERY);
    DEF(ack_delay_ns, UB_PDS_DEFAULT_ACK_DELAY_NS);
    DEF(rto_init_ns, UB_PDS_DEFAULT_RTO_INIT_NS);
    DEF(rto_min_ns, UB_PDS_DEFAULT_RTO_MIN_NS);
    DEF(rto_max_ns, UB_PDS_DEFAULT_RTO_MAX_NS);
    DEF(ooo_threshold, UB_PDS_DEFAULT_OOO_THRESHOLD);
    DEF(max_retries, UB_PDS_DEFAULT_MAX_RETRIES);
    DEF(idle_close_ns, UB_PDS_DEFAULT_IDLE_CLOSE_NS);
    DEF(num_paths, 1);
    DEF(link_bps, UB_PDS_DEFAULT_LINK_BPS);
    DEF(base_rtt_ns, UB_PDS_DEFAULT_BASE_RTT_NS);
    DEF(mtu, UB_PDS_DEFAULT_MTU);
    DEF(cc_algo, UB_PDS_DEFAULT_CC);
    DEF(lb_algo, UB_PDS_DEFAULT_LB);
#undef DEF
    if (!c->quarantine_ns) /* outlive every retransmission of the closed PDC */
        c->quarantine_ns = c->rto_max_ns * (c->max_retries + 2);
    if (c->retx[UB_PDS_RUD] == UB_PDS_RETX_DEFAULT)
        c->retx[UB_PDS_RUD] = UB_PDS_RETX_SEL_FAST;
    if (c->retx[UB_PDS_RUDI] == UB_PDS_RETX_DEFAULT)
        c->retx[UB_PDS_RUDI] = UB_PDS_RETX_SEL_FAST;
    if (c->retx[UB_PDS_ROD] == UB_PDS_RETX_DEFAULT)
        c->retx[UB_PDS_ROD] = UB_PDS_RETX_GBN_FAST;
}

/*
 * cc_algo: a registered name, or "NAME+rccc" (NAME's window gated by receiver credits). *rccc
 * says whether credits are on ("rccc" alone: its own fixed window and credits). NULL if unknown.
 */
static const struct ub__cc_algo *cc_algo_parse(const char *name, bool *rccc)
{
    static const char suffix[] = "+rccc";
    size_t n = strlen(name), k = sizeof(suffix) - 1;
    const struct ub__cc_algo *a;
    *rccc = false;
    if (n > k && strcmp(name + n - k, suffix) == 0) {
        char base[32];
        if (n - k >= sizeof(base))
            return NULL;
        memcpy(base, name, n - k);
        base[n - k] = '\0';
        *rccc = true;
        a = ub__cc_algo_find(base);
    } else {
        a = ub__cc_algo_find(name);
    }
    if (a == &ub__cc_rccc)
        *rccc = true;
    return a;
}

static int check_cfg(const struct ub__pds_cfg *c)
{
    if (c->dest_fc_free_pct > 100)
        return UB_EINVAL;
    if (c->mp_range % UB_PDS_MPR_UNIT || c->mp_range > 255u * UB_PDS_MPR_UNIT ||
        (c->mp_range & (c->mp_range - 1)))
        return UB_EINVAL;
    if (c->window > UB_PDS_SYN_SPAN || c->max_pdcs > 60000 || c->rto_min_ns > c->rto_max_ns ||
        c->num_paths > 65535)
        return UB_EINVAL;
    for (int m = 0; m < UB_PDS_MODE_COUNT; m++)
        if (c->retx[m] > UB_PDS_RETX_GBN_TIMEOUT)
            return UB_EINVAL;
    bool rccc;
    if (!cc_algo_parse(c->cc_algo, &rccc))
        return UB_EINVAL;
    const struct ub__lb_algo *lb = ub__lb_algo_find(c->lb_algo);
    if (!lb || (lb == &ub__lb_bitmap && c->num_paths > UB_LB_MAX_EVS))
        return UB_EINVAL;
    /* ROD's target accepts only the next PSN: selective repeat cannot work there. */
    if (c->retx[UB_PDS_ROD] == UB_PDS_RETX_SEL_FAST ||
        c->retx[UB_PDS_ROD] == UB_PDS_RETX_SEL_TIMEOUT)
        return UB_EINVAL;
    return 0;
}

int ub__pds_create(struct ub__pds **out, const struct ub__pds_cfg *cfg, struct ub__timers *timers,
                   struct ub__pktpool *pool, struct ub__rng *rng, const struct ub__log *log)
{
    struct ub__pds *pds = calloc(1, sizeof(*pds));
    if (!pds)
        return UB_ENOMEM;
    pds->cfg = *cfg;
    set_defaults(&pds->cfg);
    int rc = check_cfg(&pds->cfg);
    if (rc) {
        free(pds);
        return rc;
    }
    pds->timers = timers;
    pds->pool = pool;
    pds->cc_algo = cc_algo_parse(pds->cfg.cc_algo, &pds->rccc);
    if (pds->cc_algo == &ub__cc_none && !pds->rccc)
        pds->cc_algo = NULL; /* the fixed packet window alone, exactly as without CC */
    ub__pds_rccc_init(pds);
    pds->lb_algo = ub__lb_algo_find(pds->cfg.lb_algo);
    pds->cc_params = (struct ub__cc_params){
        .link_bps = pds->cfg.link_bps,
        .base_rtt_ns = pds->cfg.base_rtt_ns,
        .mtu = pds->cfg.mtu,
        .init_cwnd = pds->cfg.cc_init_cwnd,
        .trimming = pds->cfg.trimming,
        .pacer_burst = pds->cfg.pacer_burst,
        .pacer_burst_ns = pds->cfg.pacer_burst_ns,
        .qa_gate = -1,
        .rccc = pds->rccc,
        .init_credit =
            pds->cfg.rccc_init_credit ? pds->cfg.rccc_init_credit : 8 * (uint64_t)pds->cfg.mtu,
    };
    pds->log = log;
    ub__rng_fork(&pds->rng, rng, 0x706473 /* "pds" */);
    pds->incarnation = (uint32_t)ub__rng_next(&pds->rng) | 1u;
    pds->next_ipdc_id = (uint16_t)ub__rng_next(&pds->rng);
    pds->next_tpdc_id = (uint16_t)ub__rng_next(&pds->rng);
    uint64_t hseed = ub__rng_next(&pds->rng);
    uint32_t n = pds->cfg.max_pdcs;
    if ((rc = ub__hmap_init(&pds->ipdc_by_peer, 16, n, hseed)) ||
        (rc = ub__hmap_init(&pds->ipdc_by_id, 16, n, hseed + 1)) ||
        (rc = ub__hmap_init(&pds->ipdc_by_dev, 16, n, hseed + 6)) ||
        (rc = ub__hmap_init(&pds->tpdc_by_key, 16, n, hseed + 2)) ||
        (rc = ub__hmap_init(&pds->tpdc_by_id, 16, n, hseed + 3)) ||
        (rc = ub__hmap_init(&pds->graves, 16, 0, hseed + 4)) ||
        (rc = ub__hmap_init(&pds->ccx_by_key, 16, n, hseed + 5)) ||
        (rc = ub__pds_link_init(pds, hseed + 7)) || (rc = ub__ring_init(&pds->ctlq, UB_PDS_CTLQ))) {
        ub__pds_destroy(pds, 0);
        return rc;
    }
    ub__list_init(&pds->ready);
    ub__list_init(&pds->tpdc_lru);
    ub__list_init(&pds->grave_list);
    *out = pds;
    return 0;
}

void ub__pds_destroy(struct ub__pds *pds, uint64_t now)
{
    uint64_t k;
    void *v;
    /* Freeing edits the maps: restart the scan after each removal. */
    while (pds->ipdc_by_id.slots && ub__hmap_next(&pds->ipdc_by_id, 0, &k, &v))
        ub__pds_ipdc_free(v, UB_EFLUSHED, now);
    while (pds->tpdc_by_id.slots && ub__hmap_next(&pds->tpdc_by_id, 0, &k, &v))
        ub__pds_tpdc_free(v, false, now);
    if (pds->graves.slots)
        ub__pds_graves_expire(pds, UB_TIME_NEVER);
    struct ub__pkt *p;
    while ((p = pds->out_head) != NULL) {
        pds->out_head = p->next;
        ub__pkt_free(p);
    }
    ub__pds_link_fini(pds);
    if (pds->ctlq.items)
        while ((p = ub__ring_pop(&pds->ctlq)) != NULL)
            ub__pkt_free(p);
    ub__ring_fini(&pds->ctlq);
    ub__hmap_fini(&pds->ipdc_by_peer);
    ub__hmap_fini(&pds->ipdc_by_id);
    ub__hmap_fini(&pds->ipdc_by_dev);
    ub__hmap_fini(&pds->tpdc_by_key);
    ub__hmap_fini(&pds->tpdc_by_id);
    ub__hmap_fini(&pds->graves);
    ub__hmap_fini(&pds->ccx_by_key); /* empty: the last PDC of each context freed it */
    ub__pds_rccc_fini(pds);
    free(pds);
}

void ub__pds_set_peer_rtt(struct ub__pds *pds, ub__pds_peer_rtt_fn fn, void *arg)
{
    pds->peer_rtt = fn;
    pds->peer_rtt_arg = arg;
}

void ub__pds_set_upcalls(struct ub__pds *pds, const struct ub__pds_upcalls *up, void *arg)
{
    pds->up = up;
    pds->up_arg = arg;
}

void ub__pds_set_link_req(struct ub__pds *pds, ub__pds_link_req_fn fn)
{
    pds->link_req = fn;
}

void ub__pds_set_link_rsp(struct ub__pds *pds, ub__pds_link_rsp_fn fn)
{
    pds->link_rsp = fn;
}

uint32_t ub__pds_incarnation(const struct ub__pds *pds)
{
    return pds->incarnation;
}

const struct ub__pds_stats *ub__pds_stats(const struct ub__pds *pds)
{
    return &pds->st;
}

uint32_t ub__pds_ipdc_count(const struct ub__pds *pds)
{
    return pds->ipdc_by_id.count;
}

uint32_t ub__pds_tpdc_count(const struct ub__pds *pds)
{
    return pds->tpdc_by_id.count;
}

/* The part of an address that names the host, not the path: UDP paths differ only in port. */
uint64_t ub__pds_host_key(const struct ub__addr *a)
{
    struct ub__addr h = *a;
    if (h.family == UB_AF_INET || h.family == UB_AF_INET6)
        h.port = 0;
    return ub__addr_hash(&h, 0x686f7374);
}

struct ub__pkt *ub__pds_alloc(struct ub__pds *pds)
{
    struct ub__pkt *p = ub__pkt_alloc(pds->pool);
    if (!p)
        pds->st.nobufs++;
    return p;
}

bool ub__pds_ctl_push(struct ub__pds *pds, struct ub__pkt *p)
{
    /* A full control queue drops, like a full NIC ring: the ACK timer or an RTO repairs it. */
    if (ub__ring_push(&pds->ctlq, p))
        return true;
    ub__pkt_free(p);
    return false;
}

/* Encodes d's headers at the front of p (prepending into headroom when p holds a payload). */
static int encode_into(struct ub__pkt *p, const struct ub__wire_dgram *d)
{
    uint8_t hdr[UB_PDS_MAX_SIZE + UB_EXT_SIZE + UB_SES_MAX_SIZE];
    struct ub__wcur w;
    ub__wcur_init(&w, hdr, sizeof(hdr));
    int rc = ub__wire_encode_headers(d, &w);
    if (rc)
        return rc;
    uint32_t n = (uint32_t)ub__wcur_offset(&w);
    uint8_t *at = ub__pkt_push(p, n);
    if (!at)
        return UB_ENOBUFS;
    memcpy(at, hdr, n);
    return 0;
}

bool ub__pds_ctl_send(struct ub__pds *pds, const struct ub__wire_dgram *d,
                      const struct ub__addr *to, uint16_t path)
{
    struct ub__pkt *p = ub__pds_alloc(pds);
    if (!p)
        return false;
    if (encode_into(p, d)) {
        ub__pkt_free(p);
        return false;
    }
    p->addr = *to;
    p->path = path;
    ub__pds_ctl_push(pds, p);
    return true;
}

/*
 * An ACK without a next header at the front of p, written in place: the generic path's
 * datagram struct, chain checks and scratch copy cost more than the ACK itself.
 */
int ub__pds_encode_ack_into(struct ub__pkt *p, const struct ub__pds_ack *a)
{
    if (a->next_hdr != UB_PDS_NH_NONE && a->next_hdr != UB_PDS_NH_SOFTUB_EXT)
        return UB_EINVAL; /* (a response that rides follows the header, put there by the caller) */
    /* The fields are PDS's own (send_ack_x): only the CC state's ranges are checked. */
    uint64_t state;
    int rc = ub__pds_ack_state(a, &state);
    if (rc)
        return rc;
    uint32_t n = (uint32_t)ub__pds_ack_size(a->type, a->flags);
    uint8_t *at = ub__pkt_push(p, n);
    if (!at)
        return UB_ENOBUFS;
    ub__pds_ack_put(at, a, state);
    return 0;
}

void ub__pds_mark_one(struct ub__pds_ipdc *c, uint64_t now)
{
    if (ub__pds_ipdc_can_send(c, now)) {
        ub__list_push_back(&c->pds->ready, &c->ready);
        c->on_ready = true;
    }
}

static void mark_one(struct ub__pds_ipdc *c, uint64_t now)
{
    /* Nothing queued and nothing to repair: nothing to send, whatever the window says. */
    if (!c->on_ready && (c->qlen || c->nlost))
        ub__pds_mark_one(c, now);
}

void ub__pds_mark_all(struct ub__pds_ipdc *c, uint64_t now)
{
    struct ub__list *it;
    UB_LIST_FOR_EACH(it, &c->ccx->pdcs)
    {
        mark_one(UB_CONTAINER_OF(it, struct ub__pds_ipdc, cc_link), now);
    }
}

/* A request emitted as it was sent: the next pull takes it after the control queue. */
static void out_push(struct ub__pds *pds, struct ub__pkt *p)
{
    ub__pds_list_append(&pds->out_head, &pds->out_tail, p);
}

int ub__pds_send(struct ub__pds *pds, struct ub__pds_tx *tx, struct ub__pkt *pkt, uint64_t now)
{
    if (tx->mode >= UB_PDS_MODE_COUNT || tx->ses_kind > UB_PDS_NH_RSP_DATA_SMALL)
        return UB_EINVAL;
    /* The extension goes on now: it does not depend on the PSN. Completed where it is: the
     * caller has just written it field by field, and a copy's wide loads would wait for
     * those stores to drain (no store forwarding across them). */
    struct ub__ext *ext = &tx->ext;
    /* The layer above may use a compatible later version with appended fields (its tail). */
    if (ext->version == UB_EXT_VERSION || ext->version > UB_EXT_VERSION_COMPAT_MAX) {
        ext->version = UB_EXT_VERSION;
        ext->tail = NULL;
        ext->tail_len = 0;
    }
    ext->next_hdr = tx->ses_kind;
    ext->incarnation = pds->incarnation;
    uint32_t ext_len = (uint32_t)ub__ext_size(ext);
    uint8_t *at = ub__pkt_push(pkt, ext_len);
    if (!at)
        return UB_ENOBUFS;
    struct ub__wcur w;
    ub__wcur_init(&w, at, ext_len);
    int rc = ub__ext_encode(ext, &w);
    if (rc) {
        ub__pkt_pull(pkt, ext_len);
        return rc;
    }
    if (tx->mode <= UB_PDS_ROD && ub__pds_link_peer(&pds->cfg, tx->dst))
        return ub__pds_link_send(pds, tx, pkt, ext_len);
    if (tx->mode == UB_PDS_UUD) {
        /* Unreliable: no context, no PSN, straight to the wire. */
        struct ub__wire_dgram d;
        memset(&d, 0, sizeof(d));
        d.pds.type = UB_PDS_TYPE_UUD_REQ;
        d.pds.u.uud.next_hdr = UB_PDS_NH_SOFTUB_EXT;
        uint8_t hdr[UB_PDS_UUD_SIZE];
        ub__wcur_init(&w, hdr, sizeof(hdr));
        if ((rc = ub__pds_encode(&d.pds, &w)) != 0 || !(at = ub__pkt_push(pkt, UB_PDS_UUD_SIZE))) {
            ub__pkt_pull(pkt, ext_len);
            return rc ? rc : UB_ENOBUFS;
        }
        memcpy(at, hdr, sizeof(hdr));
        pkt->addr = *tx->dst;
        pkt->path = (uint16_t)(ub__rng_next(&pds->rng) % pds->cfg.num_paths);
        if (ub__ring_full(&pds->ctlq)) {
            ub__pkt_pull(pkt, UB_PDS_UUD_SIZE + ext_len);
            return UB_EFULL;
        }
        pds->st.tx_pkts++;
        pds->st.tx_bytes += ub__pkt_wire_len(pkt);
        ub__pds_ctl_push(pds, pkt);
        return 0;
    }
    struct ub__pds_ipdc *c = tx->pdc;
    if (c) /* the caller's ub__pds_peer found it: as ub__pds_ipdc_get would */
        pds->last_ipdc = c;
    else if (!(c = ub__pds_last_ipdc(pds, tx->dst, tx->mode)))
        c = ub__pds_ipdc_get(pds, tx->dst, tx->mode, now, &rc);
    if (!c || c->qlen >= UB_PDS_DEFAULT_QUEUE) {
        ub__pkt_pull(pkt, ext_len);
        return c ? UB_EFULL : rc;
    }
    pkt->tag = tx->cookie;
    pkt->flags = (uint8_t)((tx->ack_req ? UB_PDS_PKT_ACK_REQ : 0) | (tx->own ? UB_PDS_PKT_OWN : 0) |
                           (tx->after_ack ? UB_PKT_F_AFTER_ACK : 0));
    pkt->next = NULL;
    /*
     * Emitted at once (tx->now): what the next pull would do, the packet alone in the queue,
     * no other PDC's turn before it (the ready list empty) and a PDC alone in its congestion
     * context (whose window no other PDC's event moves), without the round through the queue
     * and the ready list. Not under receiver credits (RCCC counts queued demand).
     */
    bool alone = !c->ccx || (c->cc_link.next == c->cc_link.prev &&
                             c->cc_link.next == &c->ccx->pdcs && !c->ccx->cc.credit_on);
    int took = 0;
    if (tx->now && !c->qlen && !c->nlost && alone && ub__list_empty(&pds->ready)) {
        struct ub__pkt *out = NULL;
        if ((took = ub__pds_ipdc_emit_one(c, pkt, &out, now)) > 0) {
            if (out)
                out_push(pds, out);
            else /* kept as a repair (cannot happen: the header is ours) */
                ub__pds_mark_ready(c, now);
            pds->st.tx_direct++;
            return 0;
        }
    }
    ub__pds_list_append(&c->q_head, &c->q_tail, pkt);
    c->qlen++;
    if (c->ccx && c->ccx->cc.credit_on) /* RCCC: demand grows */
        ub__pds_rccc_enqueue(c, ub__pkt_wire_len(pkt) + UB_PDS_REQ_SIZE);
    if (took == 0) /* (-1: the congestion context just said no, as it would here) */
        ub__pds_mark_ready(c, now);
    return 0;
}

void ub__pds_deliver_nopdc(struct ub__pds *pds, struct ub__pkt *p, const struct ub__wire_dgram *d,
                           uint8_t mode, uint64_t now)
{
    struct ub__pds_rx rx = {
        .src = &p->addr,
        .incarnation = d->has_ext ? d->ext.incarnation : 0,
        .mode = mode,
        .path = p->path,
        .ecn = p->ecn,
        .hdr = d,
        .payload = p->data + d->payload_off,
        .payload_len = (uint32_t)d->payload_len,
    };
    if (pds->up && pds->up->deliver)
        pds->up->deliver(pds->up_arg, &rx, now);
}

int ub__pds_input(struct ub__pds *pds, struct ub__pkt *pkt, const struct ub__wire_dgram *d,
                  uint64_t now)
{
    switch (d->pds.type) {
    case UB_PDS_TYPE_RUD_REQ:
    case UB_PDS_TYPE_ROD_REQ:
    case UB_PDS_TYPE_RUD_CC_REQ:
    case UB_PDS_TYPE_ROD_CC_REQ:
        if (!d->has_ext) /* softub's requests always say who sent them (incarnation) */
            break;
        ub__pds_on_req(pds, pkt, d, now);
        return 1;
    case UB_PDS_TYPE_RUDI_REQ:
        if (!d->has_ext)
            break;
        ub__pds_on_rudi_req(pds, pkt, d, now);
        return 1;
    case UB_PDS_TYPE_RUDI_RESP:
        ub__pds_on_rudi_resp(pds, pkt, &d->pds.u.rudi, now);
        return 1;
    case UB_PDS_TYPE_UUD_REQ:
        if (!d->has_ext) /* the engine's own datagram service */
            return 0;
        pds->st.rx_pkts++;
        ub__pds_deliver_nopdc(pds, pkt, d, UB_PDS_UUD, now);
        return 1;
    case UB_PDS_TYPE_LINK:
        ub__pds_on_link(pds, pkt, d, now);
        return 1;
    case UB_PDS_TYPE_ACK:
    case UB_PDS_TYPE_ACK_CC:
    case UB_PDS_TYPE_ACK_CCX:
        pds->st.acks_rx++;
        ub__pds_on_ack(pds, pkt, d, now);
        return 1;
    case UB_PDS_TYPE_NACK:
    case UB_PDS_TYPE_NACK_CCX:
        pds->st.nacks_rx++;
        pds->st.nacks_by_code[d->pds.u.nack.code & 31]++;
        ub__pds_on_nack(pds, &d->pds.u.nack, now);
        return 1;
    case UB_PDS_TYPE_CTRL:
        pds->st.ctrl_rx++;
        ub__pds_on_ctrl(pds, pkt, d, now);
        return 1;
    default:
        break;
    }
    pds->st.rx_malformed++;
    return 1;
}

/* Output other than the link queue's: control, emitted packets, PDCs' turns, credit requests. */
static inline bool output_beside_link(const struct ub__pds *pds)
{
    return ub__ring_count(&pds->ctlq) || pds->out_head || !ub__list_empty(&pds->ready) ||
           !ub__list_empty(&pds->rccc_dirty);
}

bool ub__pds_has_output(const struct ub__pds *pds)
{
    return pds->link_head || output_beside_link(pds);
}

int ub__pds_output(const struct ub__pds *pds)
{
    bool other = output_beside_link(pds);
    if (!pds->link_head)
        return other ? UB_PDS_OUT_MORE : UB_PDS_OUT_NONE;
    return other || pds->link_head->next ? UB_PDS_OUT_MORE : UB_PDS_OUT_LINK_ONE;
}

uint32_t ub__pds_pull(struct ub__pds *pds, struct ub__pkt **pkts, uint32_t max, uint64_t now)
{
    uint32_t n = 0;
    struct ub__pkt *p;
    if (!ub__list_empty(&pds->rccc_dirty))
        ub__pds_rccc_flush(pds, now); /* credit requests first: they open the grants */
    while (n < max && (p = ub__ring_pop(&pds->ctlq)) != NULL) {
        if (p->tag) { /* a coalescing PDC's ACK leaves: its next one is a new packet */
            ((struct ub__pds_tpdc *)(uintptr_t)p->tag)->ack_q = NULL;
            p->tag = 0;
        }
        if (p->flags & UB_PDS_PKT_SERVICE) {
            /* Its service time (units of 16 ns, saturating; written as 0) counts until now:
             * an ACK queued behind a round's arrivals would otherwise add their processing to
             * the initiator's RTT sample. */
            p->flags &= (uint8_t)~UB_PDS_PKT_SERVICE;
            if (now > p->ts) {
                uint64_t held = (now - p->ts) / UB_PDS_SERVICE_TIME_NS;
                ub__st16(p->data + UB_PDS_ACK_SERVICE_OFF, (uint16_t)UB_MIN(held, 0xffffu));
            }
        }
        pkts[n++] = p;
    }
    while (n < max && (p = pds->out_head) != NULL) {
        if (!(pds->out_head = p->next))
            pds->out_tail = NULL;
        p->next = NULL;
        pkts[n++] = p;
    }
    if (pds->link_head)
        n += ub__pds_link_pull(pds, pkts + n, max - n, now);
    /* Round robin over the PDCs with work, a burst each, so one busy peer cannot starve others. */
    while (n < max && !ub__list_empty(&pds->ready)) {
        struct ub__list *l = ub__list_pop_front(&pds->ready);
        struct ub__pds_ipdc *c = UB_CONTAINER_OF(l, struct ub__pds_ipdc, ready);
        c->on_ready = false;
        uint32_t room = UB_MIN(max - n, (uint32_t)UB_PDS_BURST);
        uint32_t k = ub__pds_ipdc_emit(c, pkts + n, room, now);
        n += k;
        /*
         * Nothing emitted although it looked ready (the pool ran dry mid-way): it leaves the
         * list until its next event (ACK, RTO, timer) instead of spinning here.
         */
        if (k)
            mark_one(c, now);
    }
    return n;
}

int ub__pds_input_trimmed(struct ub__pds *pds, struct ub__pkt *pkt, uint64_t now)
{
    return ub__pds_on_trimmed(pds, pkt, now);
}

static const struct ub__pds_ccx *ccx_of(const struct ub__pds *pds, const struct ub__addr *dst)
{
    return ub__hmap_get(&pds->ccx_by_key, ub__pds_host_key(dst));
}

const struct ub__cc *ub__pds_cc(const struct ub__pds *pds, const struct ub__addr *dst)
{
    const struct ub__pds_ccx *x = ccx_of(pds, dst);
    return x ? &x->cc : NULL;
}

uint64_t ub__pds_cc_inflight(const struct ub__pds *pds, const struct ub__addr *dst)
{
    const struct ub__pds_ccx *x = ccx_of(pds, dst);
    return x ? x->inflight : 0;
}

uint32_t ub__pds_cc_count(const struct ub__pds *pds)
{
    return pds->ccx_by_key.count;
}

/* Packets of c queued or in flight (0 without a context). */
static uint32_t outstanding(const struct ub__pds_ipdc *c)
{
    return c ? c->qlen + (c->nxt - c->una) : 0;
}

uint32_t ub__pds_last_outstanding(const struct ub__pds *pds)
{
    return outstanding(pds->last_ipdc);
}

static void peer_fill(const struct ub__pds *pds, struct ub__pds_ipdc *c, const struct ub__addr *dst,
                      uint8_t mode, struct ub__pds_peer *out)
{
    out->pdc = c;
    out->outstanding = outstanding(c);
    out->own_ok = ub__pds_own_ok(pds, dst, mode);
    out->link = false;
    out->sprays = mode == UB_PDS_RUD && pds->cfg.num_paths > 1 && pds->lb_algo != &ub__lb_single;
}

/* Not the last PDC: a table lookup, out of the usual path (which then saves no registers). */
static UB_NOINLINE void peer_find(const struct ub__pds *pds, const struct ub__addr *dst,
                                  uint8_t mode, struct ub__pds_peer *out)
{
    bool collision;
    peer_fill(pds, ub__pds_ipdc_find(pds, dst, mode, &collision), dst, mode, out);
}

void ub__pds_peer(const struct ub__pds *pds, const struct ub__addr *dst, uint8_t mode,
                  struct ub__pds_peer *out)
{
    if (mode <= UB_PDS_ROD && ub__pds_link_peer(&pds->cfg, dst)) {
        *out = (struct ub__pds_peer){.outstanding = pds->link_qlen, .link = true};
        return;
    }
    struct ub__pds_ipdc *c = ub__pds_last_ipdc(pds, dst, mode);
    if (c)
        peer_fill(pds, c, dst, mode, out);
    else
        peer_find(pds, dst, mode, out);
}

void ub__pds_peer_again(struct ub__pds_peer *out)
{
    out->outstanding = outstanding(out->pdc);
}

uint32_t ub__pds_outstanding(const struct ub__pds *pds, const struct ub__addr *dst, uint8_t mode)
{
    struct ub__pds_peer p;
    ub__pds_peer(pds, dst, mode, &p);
    return p.outstanding;
}
