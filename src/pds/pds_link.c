/*
 * The link path (ub__pds_cfg.link): RUD and ROD packets over a lossless carrier (the shm
 * device's lanes) without a PDC. The lanes deliver every packet once and in order or the
 * peer is gone, so a PSN, ACKs, retransmission and congestion control only cost time there
 * (a shm round trip spent ~780 of its ~3 250 instructions in PDS). What a PDC still gave is
 * kept: each packet names the receiver's incarnation as this side last heard it, so that a
 * restarted process at the same shm id refuses what was meant for its predecessor (a late
 * response to a request the old process sent).
 */
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "core/compiler.h"
#include "pds/pds_int.h"

int ub__pds_link_init(struct ub__pds *pds, uint64_t seed)
{
    return ub__hmap_init(&pds->link_peers, 16, pds->cfg.max_pdcs, seed);
}

void ub__pds_link_fini(struct ub__pds *pds)
{
    struct ub__pkt *p;
    while ((p = pds->link_head) != NULL) {
        pds->link_head = p->next;
        ub__pkt_free(p);
    }
    pds->link_tail = NULL;
    pds->link_qlen = 0;
    if (!pds->link_peers.slots)
        return;
    uint64_t k;
    void *v;
    for (uint32_t i = 0; (i = ub__hmap_next(&pds->link_peers, i, &k, &v)) != 0;)
        free(v);
    ub__hmap_fini(&pds->link_peers);
    pds->link_last = NULL;
}

/* What is known of a; NULL if nothing (or another peer holds its hash). */
static UB_ALWAYS_INLINE struct ub__pds_link_peer *peer_get(struct ub__pds *pds,
                                                           const struct ub__addr *a)
{
    struct ub__pds_link_peer *lp = pds->link_last;
    if (lp && ub__addr_eq(&lp->addr, a))
        return lp;
    lp = ub__hmap_get(&pds->link_peers, ub__addr_hash(a, 0));
    if (!lp || !ub__addr_eq(&lp->addr, a))
        return NULL;
    pds->link_last = lp;
    return lp;
}

/* A known peer spoke as another incarnation than the one on record (or as that one after it
 * was reported gone): whether its packet is taken. */
static UB_NOINLINE bool peer_changed(struct ub__pds *pds, struct ub__pds_link_peer *lp,
                                     uint32_t inc, uint64_t now)
{
    if (inc == lp->incarnation) { /* reported gone, yet it speaks: it lives */
        lp->gone = false;
        return true;
    }
    if (inc == lp->prev) /* the predecessor's last packets, read after its successor's */
        return false;
    bool noticed = lp->gone;
    lp->prev = lp->incarnation;
    lp->incarnation = inc;
    lp->gone = false;
    pds->st.link_restarts++;
    if (pds->up && pds->up->restarted)
        pds->up->restarted(pds->up_arg, &lp->addr, noticed, now);
    return true;
}

/* src spoke as incarnation inc: whether its packet is taken. A full table (max_pdcs peers)
 * or a hash taken by another peer leaves it unknown: its packets then name no incarnation,
 * as before the first. */
static bool peer_learn(struct ub__pds *pds, const struct ub__addr *src, uint32_t inc, uint64_t now)
{
    struct ub__pds_link_peer *lp = peer_get(pds, src);
    if (lp)
        return UB_LIKELY(inc == lp->incarnation && !lp->gone) || peer_changed(pds, lp, inc, now);
    uint64_t key = ub__addr_hash(src, 0);
    if (ub__hmap_get(&pds->link_peers, key) || !(lp = malloc(sizeof(*lp))))
        return true;
    *lp = (struct ub__pds_link_peer){.addr = *src, .incarnation = inc};
    if (ub__hmap_put(&pds->link_peers, key, lp) != 0) {
        free(lp);
        return true;
    }
    pds->link_last = lp;
    return true;
}

void ub__pds_peer_gone(struct ub__pds *pds, const struct ub__addr *dst)
{
    struct ub__pds_link_peer *lp = peer_get(pds, dst);
    if (lp)
        lp->gone = true;
}

int ub__pds_link_send(struct ub__pds *pds, const struct ub__pds_tx *tx, struct ub__pkt *pkt,
                      uint32_t ext_len)
{
    uint8_t *at;
    if (pds->link_qlen >= UB_PDS_DEFAULT_QUEUE || !(at = ub__pkt_push(pkt, UB_PDS_LINK_SIZE))) {
        ub__pkt_pull(pkt, ext_len);
        return pds->link_qlen >= UB_PDS_DEFAULT_QUEUE ? UB_EFULL : UB_ENOBUFS;
    }
    const struct ub__pds_link_peer *lp = peer_get(pds, tx->dst);
    ub__pds_link_put(at, UB_PDS_NH_SOFTUB_EXT, tx->mode == UB_PDS_ROD ? UB_PDS_LINK_F_ROD : 0,
                     lp && !lp->gone ? lp->incarnation : 0);
    pkt->addr = *tx->dst;
    pkt->path = 0; /* one lane per peer: the path says nothing */
    pkt->tag = tx->cookie;
    pkt->flags = tx->after_ack ? UB_PKT_F_AFTER_ACK : 0;
    ub__pds_list_append(&pds->link_head, &pds->link_tail, pkt);
    pds->link_qlen++;
    pds->st.tx_link++;
    pds->st.tx_bytes += ub__pkt_wire_len(pkt);
    return 0;
}

/* Handed to the driver (which sends it now, copying any attached payload in, or keeps it
 * until the lane has room): as good as acknowledged. */
static void handed_out(struct ub__pds *pds, struct ub__pkt *p, uint64_t now)
{
    uint64_t cookie = p->tag;
    p->tag = 0;
    if (cookie && pds->up && pds->up->acked)
        pds->up->acked(pds->up_arg, cookie, now);
}

struct ub__pkt *ub__pds_link_pull_one(struct ub__pds *pds, uint64_t now)
{
    struct ub__pkt *p = pds->link_head;
    if (!p)
        return NULL;
    if (!(pds->link_head = p->next))
        pds->link_tail = NULL;
    p->next = NULL;
    pds->link_qlen--;
    handed_out(pds, p, now);
    return p;
}

uint32_t ub__pds_link_pull(struct ub__pds *pds, struct ub__pkt **pkts, uint32_t max, uint64_t now)
{
    uint32_t n = 0;
    struct ub__pkt *p;
    while (n < max && (p = pds->link_head) != NULL) {
        if (!(pds->link_head = p->next))
            pds->link_tail = NULL;
        p->next = NULL;
        pds->link_qlen--;
        pkts[n++] = p;
    }
    /* After the loop: the upcall may send again. */
    for (uint32_t i = 0; i < n; i++)
        handed_out(pds, pkts[i], now);
    return n;
}

/* Whether a LINK packet from src (with the extension: has_ext) is taken; counted either way. */
static bool link_accept(struct ub__pds *pds, const struct ub__addr *src, bool has_ext,
                        uint32_t dst_inc, uint32_t src_inc, uint64_t now)
{
    /* Only a lossless carrier vouches for what PDS would otherwise check: over any other, a
     * LINK packet is malformed. Taken with cfg.link off too: either side may keep PDCs. */
    if (!has_ext || !ub__pds_lossless_peer(&pds->cfg, src)) {
        pds->st.rx_malformed++;
        return false;
    }
    /* Meant for this id's predecessor, or from the predecessor of the peer's process. */
    if ((dst_inc && dst_inc != pds->incarnation) || !peer_learn(pds, src, src_inc, now)) {
        pds->st.rx_link_stale++;
        return false;
    }
    pds->st.rx_link++;
    return true;
}

static inline uint8_t link_mode(uint8_t flags)
{
    return (flags & UB_PDS_LINK_F_ROD) ? UB_PDS_ROD : UB_PDS_RUD;
}

void ub__pds_on_link(struct ub__pds *pds, struct ub__pkt *pkt, const struct ub__wire_dgram *d,
                     uint64_t now)
{
    if (link_accept(pds, &pkt->addr, d->has_ext, d->pds.u.link.dst_inc, d->ext.incarnation, now))
        ub__pds_deliver_nopdc(pds, pkt, d, link_mode(d->pds.u.link.flags), now);
}

/* A usual request or response the layer above did not take whole: as any other. */
static void deliver_parsed(struct ub__pds *pds, struct ub__pkt *pkt, uint8_t link_flags,
                           uint64_t now)
{
    struct ub__wire_dgram d; /* cannot fail: a recogniser found the fields in these bytes */
    if (ub__wire_parse_datagram(&d, pkt->data, pkt->len, 0) == 0)
        ub__pds_deliver_nopdc(pds, pkt, &d, link_mode(link_flags), now);
}

int ub__pds_input_link_req(struct ub__pds *pds, struct ub__pkt *pkt,
                           const struct ub__wire_link_req *r, uint64_t now)
{
    if (link_accept(pds, &pkt->addr, true, r->dst_inc, r->ext.incarnation, now) &&
        !(pds->link_req && pds->link_req(pds->up_arg, &pkt->addr, r, now)))
        deliver_parsed(pds, pkt, r->link_flags, now);
    return 1;
}

int ub__pds_input_link_rsp(struct ub__pds *pds, struct ub__pkt *pkt,
                           const struct ub__wire_link_rsp *r, uint64_t now)
{
    if (link_accept(pds, &pkt->addr, true, r->dst_inc, r->ext.incarnation, now) &&
        !(pds->link_rsp && pds->link_rsp(pds->up_arg, &pkt->addr, r, now)))
        deliver_parsed(pds, pkt, r->link_flags, now);
    return 1;
}
