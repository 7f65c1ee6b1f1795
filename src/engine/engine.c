#include <string.h>

#include <softub/errors.h>
#include "core/clock.h"
#include "engine/engine.h"
#include "wire/bundle.h"
#include "wire/datagram.h"

static void set_defaults(struct ub__engine_cfg *c)
{
    if (!c->mtu)
        c->mtu = UB_ENGINE_DEFAULT_MTU;
    if (!c->num_paths)
        c->num_paths = UB_ENGINE_DEFAULT_PATHS;
    if (!c->pool_bufs)
        c->pool_bufs = UB_ENGINE_DEFAULT_POOL;
    if (!c->txq_cap)
        c->txq_cap = UB_ENGINE_DEFAULT_TXQ;
}

static void hold_fire(struct ub__timer *t, uint64_t now)
{
    (void)now;
    struct ub__engine *e = UB_CONTAINER_OF(t, struct ub__engine, hold_timer);
    e->held_parked = e->parked_all = false;
    e->n_parked = 0;
    e->held_parked_n = 0;
}

int ub__engine_init(struct ub__engine *e, const struct ub__engine_cfg *cfg)
{
    memset(e, 0, sizeof(*e));
    e->cfg = *cfg;
    set_defaults(&e->cfg);
    if (e->cfg.job_id > UB_SES_JOB_ID_MAX || e->cfg.mtu < 256)
        return UB_EINVAL;
    ub__rng_seed(&e->rng, e->cfg.seed);
    int rc = ub__timers_init(&e->timers, 64);
    if (rc)
        return rc;
    rc = ub__pktpool_init(&e->pool, e->cfg.pool_bufs, e->cfg.mtu + UB_ENGINE_HEADROOM,
                          UB_ENGINE_HEADROOM);
    if (rc)
        goto fail_pool;
    rc = ub__ring_init(&e->txq, e->cfg.txq_cap);
    if (rc)
        goto fail_ring;
    rc = ub__ring_init(&e->held, e->cfg.txq_cap);
    if (rc)
        goto fail_held;
    e->parked_backlog = UB_MIN(UB_ENGINE_PARKED_BACKLOG, ub__ring_capacity(&e->held) / 2);
    ub__timer_init(&e->hold_timer, hold_fire);
    rc = ub__ring_init(&e->rx_later, UB_ENGINE_YIELD_REST);
    if (rc)
        goto fail_later;
    e->cfg.pds.num_paths = e->cfg.pds.num_paths ? e->cfg.pds.num_paths : e->cfg.num_paths;
    e->cfg.pds.mtu = e->cfg.pds.mtu ? e->cfg.pds.mtu : e->cfg.mtu; /* congestion control's MTU */
    rc = ub__pds_create(&e->pds, &e->cfg.pds, &e->timers, &e->pool, &e->rng, e->cfg.log);
    if (rc)
        goto fail_pds;
    return 0;
fail_pds:
    ub__ring_fini(&e->rx_later);
fail_later:
    ub__ring_fini(&e->held);
fail_held:
    ub__ring_fini(&e->txq);
fail_ring:
    ub__pktpool_fini(&e->pool);
fail_pool:
    ub__timers_fini(&e->timers);
    return rc;
}

void ub__engine_fini(struct ub__engine *e)
{
    ub__timer_cancel(&e->timers, &e->hold_timer);
    if (e->pds) /* a context may have torn PDS down early (ub_context_close) */
        ub__pds_destroy(e->pds, 0);
    struct ub__pkt *p;
    while ((p = ub__ring_pop(&e->rx_later)) != NULL)
        ub__pkt_free(p);
    ub__ring_fini(&e->rx_later);
    while ((p = ub__ring_pop(&e->held)) != NULL)
        ub__pkt_free(p);
    ub__ring_fini(&e->held);
    while ((p = ub__ring_pop(&e->txq)) != NULL)
        ub__pkt_free(p);
    ub__ring_fini(&e->txq);
    if (e->pool.avail != e->pool.count)
        UB_LOG(e->cfg.log, UB_LOG_WARN, "engine closed with %u packet buffers still out",
               e->pool.count - e->pool.avail);
    ub__pktpool_fini(&e->pool);
    ub__timers_fini(&e->timers);
}

void ub__engine_set_upcalls(struct ub__engine *e, const struct ub__engine_upcalls *up, void *arg)
{
    e->up = up;
    e->up_arg = arg;
}

static void deliver_dgram(struct ub__engine *e, const struct ub__pkt *p,
                          const struct ub__wire_dgram *d, uint64_t now)
{
    const struct ub__ses_std *s = &d->ses.u.std;
    if (d->ses_kind != UB_PDS_NH_REQ_STD || s->opcode != UB_SES_OP_DGRAM_SEND ||
        (s->flags & (UB_SES_F_SOM | UB_SES_F_EOM)) != (UB_SES_F_SOM | UB_SES_F_EOM) ||
        d->payload_len != s->request_length || !e->up || !e->up->dgram) {
        e->stats.rx_unsupported++;
        return;
    }
    struct ub__dgram_in in = {
        .src = &p->addr,
        .initiator = s->initiator,
        .path = p->path,
        .ecn = p->ecn,
        .data = p->data + d->payload_off,
        .len = (uint32_t)d->payload_len,
        .header_data = (s->flags & UB_SES_F_HD) ? s->header_data : 0,
    };
    e->stats.rx_delivered++;
    e->up->dgram(e->up_arg, &in, now);
}

static void input_one(struct ub__engine *e, struct ub__pkt *p, uint64_t now)
{
    struct ub__wire_dgram d;
    e->stats.rx_pkts++;
    e->stats.rx_bytes += p->len;
    /* Trimmed by a switch (the simulator): only the headers mean anything; PDS NACKs it. */
    if ((p->flags & UB_PDS_PKT_TRIMMED) && ub__pds_input_trimmed(e->pds, p, now)) {
        e->stats.rx_delivered++;
        return;
    }
    /* The link path's usual request and response (a shm ping-pong's every message and its
     * answer): PDS's and the transaction layer's checks on the fields they need, without the
     * general parse. */
    if (p->len && p->data[0] == UB_WIRE_LINK_BYTE0) {
        struct ub__wire_link_req r;
        struct ub__wire_link_rsp a;
        if (ub__wire_link_req(&r, p->data, p->len)) {
            e->stats.rx_delivered += (uint64_t)ub__pds_input_link_req(e->pds, p, &r, now);
            return;
        }
        if (ub__wire_link_rsp(&a, p->data, p->len)) {
            e->stats.rx_delivered += (uint64_t)ub__pds_input_link_rsp(e->pds, p, &a, now);
            return;
        }
    }
    int rc = ub__wire_parse_datagram(&d, p->data, p->len, 0);
    if (rc) {
        e->stats.rx_malformed++;
        UB_LOG(e->cfg.log, UB_LOG_DEBUG, "dropped malformed datagram (%u B): %s", p->len,
               ub_strerror(rc));
        return;
    }
    if (ub__pds_input(e->pds, p, &d, now)) {
        e->stats.rx_delivered++;
        return;
    }
    if (d.pds.type == UB_PDS_TYPE_UUD_REQ)
        deliver_dgram(e, p, &d, now);
    else
        e->stats.rx_unsupported++;
}

/*
 * Whether a yield is worth its extra round: in a ping-pong the application waits for what
 * it answers with little of its own in flight: its last request, whose ACK is likely what
 * the yield leaves for later. A stream in both directions keeps its batches whole: there
 * each yield only cost a round (the rate of send_bw -b over udp fell 13 %). Over shm (the
 * driver takes answers alone) the count says nothing: its lossless peers acknowledge only
 * every few packets, and there a stream's yields cost less than the answer's wait gains.
 */
static bool pingpong(const struct ub__engine *e)
{
    return e->rx_one_first || ub__pds_last_outstanding(e->pds) <= UB_ENGINE_PINGPONG_OUT;
}

/* Whether exactly one record follows off (a ping-pong's bundle: the answer, then the ACK of
 * the request it answers; a stream's has more). The bundle was checked whole. */
static bool last_rec(const uint8_t *data, size_t len, size_t off)
{
    return off + UB_BUNDLE_REC_HDR <= len &&
           off + UB_BUNDLE_REC_HDR + ((size_t)data[off] << 8 | data[off + 1]) == len;
}

/*
 * A bundle: each record runs as a packet of its own, in place (the buffer is borrowed for
 * the upcall only, nothing below keeps a received packet), with the datagram's source,
 * path, ECN and time. When a record yields and split allows, the records after it become
 * a bundle of their own in the same buffer (the marker overwrites the last byte of the
 * record just run) and the packet is kept for later: returns true.
 */
static bool input_bundle(struct ub__engine *e, struct ub__pkt *p, uint64_t now, bool split)
{
    /* The rest of a bundle split here: checked and counted with it, unchanged since. */
    bool rest = p == e->rx_rest;
    e->rx_rest = NULL;
    if (!rest && ub__bundle_check(p->data, p->len) < 0) {
        e->stats.rx_pkts++;
        e->stats.rx_bytes += p->len;
        e->stats.rx_malformed++;
        UB_LOG(e->cfg.log, UB_LOG_DEBUG, "dropped malformed bundle (%u B)", p->len);
        return false;
    }
    uint8_t *data = p->data;
    uint32_t len = p->len, wire = p->wire_len;
    if (!rest)
        e->stats.rx_bundles++;
    size_t off = 0, rlen;
    const uint8_t *rec;
    while (ub__bundle_next(data, len, &off, &rec, &rlen)) {
        p->data = data + (rec - data); /* the record, in place (rec is a const view of it) */
        p->len = (uint32_t)rlen;
        p->wire_len = 0;
        e->stats.rx_bundled++;
        bool asked = e->rx_yield; /* by an earlier record: that one decided */
        input_one(e, p, now);
        if (split && !asked && e->rx_yield && last_rec(data, len, off) && pingpong(e)) {
            uint32_t used = (uint32_t)off - UB_BUNDLE_HDR;
            data[used] = UB_BUNDLE_MARK;
            p->data = data + used;
            p->len = len - used;
            p->wire_len = wire ? wire - used : 0;
            e->rx_rest = p;
            e->stats.rx_split++;
            return true;
        }
    }
    p->data = data;
    p->len = len;
    p->wire_len = wire;
    return false;
}

bool ub__engine_input(struct ub__engine *e, struct ub__pkt *const *pkts, uint32_t n, uint64_t now)
{
    e->rx_yield = false;
    /* Only with nothing left from before: what is left stays in arrival order, and fits. */
    bool may_yield = !ub__engine_rx_later(e);
    for (uint32_t i = 0; i < n; i++) {
        struct ub__pkt *p = pkts[i];
        uint32_t rest = n - i - 1; /* datagrams after this one */
        bool kept = false;         /* the rest of p, a bundle, waits too */
        if (ub__bundle_is(p->data, p->len))
            kept = input_bundle(e, p, now, may_yield && rest < UB_ENGINE_YIELD_REST);
        else
            input_one(e, p, now);
        if (!kept)
            ub__pkt_free(p);
        if (!e->rx_yield)
            continue;
        e->rx_yield = false;
        if (!may_yield || rest + kept > UB_ENGINE_YIELD_REST || (!kept && !pingpong(e)))
            continue; /* a stream's batch: worked through whole */
        for (uint32_t j = kept ? i : i + 1; j < n; j++)
            ub__ring_push(&e->rx_later, pkts[j]);
        e->stats.rx_yields++;
        return true;
    }
    return false;
}

bool ub__engine_input_later(struct ub__engine *e, uint64_t now)
{
    struct ub__pkt *batch[UB_ENGINE_YIELD_REST], *p;
    uint32_t n = 0;
    while ((p = ub__ring_pop(&e->rx_later)) != NULL)
        batch[n++] = p;
    return ub__engine_input(e, batch, n, now);
}

static bool bundle_member(const struct ub__pkt *p)
{
    return p->len > 0 && p->len <= UB_ENGINE_BUNDLE_MEMBER && !p->wire_len;
}

/* Whether all of p's bytes exist to be copied into a bundle (its buffer's and an attached
 * payload; a simulator's headers-only buffer stands for a payload it does not hold). */
static bool bundle_copyable(const struct ub__pkt *p)
{
    return p->len > 0 && ub__pkt_total_len(p) == ub__pkt_wire_len(p);
}

/* Writes p's record at out (its length, its bytes, then any attached payload); its size. */
static size_t bundle_put_pkt(uint8_t *out, const struct ub__pkt *p)
{
    size_t h = ub__bundle_put_len(out, ub__pkt_total_len(p));
    memcpy(out + h, p->data, p->len);
    if (p->xlen)
        memcpy(out + h + p->len, p->xdata, p->xlen);
    return h + ub__pkt_total_len(p);
}

/* What a bundle's members must share: its destination, path and ECN codepoint. */
struct hop {
    const struct ub__addr *addr;
    uint16_t path, dev_path; /* the bundle's entropy value, and the device path it selects */
    bool any_path;           /* no member needs a path yet */
    uint8_t ecn;
};

static inline void hop_init(const struct ub__engine *e, struct hop *h, const struct ub__pkt *p)
{
    h->addr = &p->addr;
    h->path = p->path;
    /* Entropy values select a device path modulo the paths there are. */
    h->dev_path = (uint16_t)ub__mod_below(p->path, e->cfg.num_paths);
    h->any_path = (p->flags & UB_PKT_F_ANY_PATH) != 0;
    h->ecn = p->ecn;
}

/*
 * Whether q may join the bundle h describes, and h updated if it does. ECN 0 (the device's
 * default: ACKs, control) goes with anything, and the bundle takes the codepoint its data
 * packets ask for; likewise a packet of any path (an ACK) goes with anything, and the bundle
 * takes the path of its first member that has one.
 */
static inline bool same_hop(const struct ub__engine *e, struct hop *h, const struct ub__pkt *q)
{
    bool any = (q->flags & UB_PKT_F_ANY_PATH) != 0;
    uint16_t dev_path = (uint16_t)ub__mod_below(q->path, e->cfg.num_paths);
    if ((!any && !h->any_path && dev_path != h->dev_path) ||
        (q->ecn && h->ecn && q->ecn != h->ecn) || !ub__addr_eq(&q->addr, h->addr))
        return false;
    if (q->ecn)
        h->ecn = q->ecn;
    if (!any && h->any_path) {
        h->any_path = false;
        h->path = q->path;
        h->dev_path = dev_path;
    }
    return true;
}

#define BUNDLE_SCAN 64 /* packets of one batch looked at together */

/* The position of the last of pkts[from, end) to addr, or end. */
static uint32_t last_to(struct ub__pkt *const *pkts, uint32_t from, uint32_t end,
                        const struct ub__addr *addr)
{
    for (uint32_t j = end; j-- > from;)
        if (ub__addr_eq(&pkts[j]->addr, addr))
            return j;
    return end;
}

/* Whether p and q may leave as a bundle of two: one at least is a small member (an ACK, which
 * rides with a packet of any size), both can be copied, and together they fit the MTU. */
static bool may_pair(const struct ub__engine *e, const struct ub__pkt *p, const struct ub__pkt *q)
{
    return (bundle_member(p) || bundle_member(q)) && bundle_copyable(p) && bundle_copyable(q) &&
           ub__bundle_size((size_t)ub__pkt_total_len(p) + ub__pkt_total_len(q), 2) <= e->cfg.mtu;
}

/*
 * Makes the bundle of p and the packets of pk[] named by the bits of mine (in their order;
 * bytes and cnt count p with them) and frees those it copied. Returns the bundle, or NULL
 * (nothing touched) without a free buffer.
 */
static struct ub__pkt *bundle_make(struct ub__engine *e, struct ub__pkt *p, struct ub__pkt **pk,
                                   uint64_t mine, size_t bytes, size_t cnt, const struct hop *h)
{
    /* Bundled only when a buffer is free (as the decision always was); the first
     * packet's own buffer serves when nobody else holds it (an ACK, not a packet PDS
     * keeps for retransmission) and has room: no copy of it. */
    uint32_t total = (uint32_t)ub__bundle_size(bytes, cnt), plen = p->len;
    struct ub__pkt *b = NULL, *last;
    uint8_t *w = NULL;
    if (!e->pool.avail)
        return NULL;
    if (p->refcnt == 1 && !p->xlen && ub__pkt_headroom(p) >= UB_BUNDLE_HDR + UB_BUNDLE_REC_HDR &&
        ub__pkt_tailroom(p) >= total - plen - (UB_BUNDLE_HDR + UB_BUNDLE_REC_HDR)) {
        b = p;
        w = ub__pkt_push(b, UB_BUNDLE_HDR + UB_BUNDLE_REC_HDR);
        w += ub__bundle_put_hdr(w);
        ub__bundle_put_len(w, plen); /* p's bytes follow, in place */
        w = ub__pkt_put(b, total - plen - (UB_BUNDLE_HDR + UB_BUNDLE_REC_HDR));
        b->next = NULL; /* as a fresh buffer's */
        b->tag = 0;
        b->flags = 0;
    } else if (cnt == 2 && (last = pk[__builtin_ctzll(mine)])->refcnt == 1 && !last->xlen &&
               ub__pkt_headroom(last) >= total - last->len) {
        /* The other one's buffer when p is held (a request PDS keeps) and that one is not
         * (an ACK): p goes in front of it (UB_ENGINE_HEADROOM), the same bytes as below. */
        uint32_t llen = last->len;
        b = last;
        w = ub__pkt_push(b, total - llen);
        w += ub__bundle_put_hdr(w);
        w += bundle_put_pkt(w, p);
        ub__bundle_put_len(w, llen); /* the ACK's bytes follow, in place */
        b->next = NULL;              /* as a fresh buffer's */
        b->tag = 0;
        b->order = 0;
        b->flags = 0;
        b->addr = p->addr;
        mine = 0;
    } else if ((b = ub__pkt_alloc(&e->pool)) != NULL) {
        w = ub__pkt_put(b, total);
        w += ub__bundle_put_hdr(w);
        w += bundle_put_pkt(w, p);
        b->addr = p->addr;
        b->path = p->path;
    } else {
        return NULL;
    }
    for (; mine; mine &= mine - 1) {
        struct ub__pkt *q = pk[__builtin_ctzll(mine)];
        w += bundle_put_pkt(w, q);
        ub__pkt_free(q);
    }
    b->ecn = h->ecn;
    b->path = h->path;
    if (b != p)
        ub__pkt_free(p);
    e->stats.tx_bundles++;
    e->stats.tx_bundled += cnt;
    return b;
}

/*
 * Rewrites pkts[0, n) with the small packets of each (destination, path, ECN) bundled
 * into one datagram at the place of the first of them (up to the MTU, in their order);
 * the others keep their places. Returns the new count. Without a free buffer, nothing
 * is bundled.
 */
static uint32_t bundle_batch(struct ub__engine *e, struct ub__pkt **pkts, uint32_t n)
{
    if (n == 2) { /* the request-response case (an ACK and a packet): the same rule, short */
        struct ub__pkt *p = pkts[0], *q = pkts[1], *b;
        /* The packet before the ACK: a peer that answers it acts on it before the ACK
         * (a yield, ub__engine_input), which takes the ACK off a ping-pong's round trip. Not
         * a response that only says a request is done: its initiator takes the ACK first
         * and frees the request's packets before it reports the request (a WRITE's
         * zero-copy payload still in them would otherwise be copied out, ub__pds_flatten:
         * a 1 MiB write_bw copied ~19 of its 118 packets so). */
        if ((p->flags & UB_PKT_F_ANY_PATH) &&
            !(q->flags & (UB_PKT_F_ANY_PATH | UB_PKT_F_AFTER_ACK))) {
            pkts[0] = q;
            pkts[1] = p;
            p = q;
            q = pkts[1];
        }
        /* A small packet (the ACK) rides with one of any size that fits beside it, copied: a
         * datagram less for the peer to receive and take apart (a SEND of a few KiB with
         * the ACK of the one it answers). A stream's big packets leave as GSO runs. */
        struct hop h;
        hop_init(e, &h, p);
        if (may_pair(e, p, q) && same_hop(e, &h, q) &&
            (b = bundle_make(e, p, pkts, 2, (size_t)ub__pkt_total_len(p) + ub__pkt_total_len(q), 2,
                             &h)) != NULL) {
            pkts[0] = b;
            return 1;
        }
        return 2;
    }
    /* Packets too big to bundle only (a bulk stream's window): none joins another, none
     * carries an ACK. */
    uint32_t small = 0;
    while (small < n && !bundle_member(pkts[small]))
        small++;
    if (small == n)
        return n;
    uint32_t out = 0;
    for (uint32_t base = 0; base < n; base += BUNDLE_SCAN) {
        uint32_t end = n - base < BUNDLE_SCAN ? n : base + BUNDLE_SCAN;
        uint64_t taken = 0, carries = 0; /* carries: packets an earlier ACK rides with */
        struct ub__pkt *rider[BUNDLE_SCAN];
        for (uint32_t i = base; i < end; i++) {
            if (taken >> (i - base) & 1)
                continue;
            struct ub__pkt *p = pkts[i];
            if (carries >> (i - base) & 1) {
                struct ub__pkt *b = NULL, *a = rider[i - base];
                struct hop h;
                hop_init(e, &h, p);
                if (same_hop(e, &h, a))
                    b = bundle_make(e, a, &p, 1, (size_t)ub__pkt_total_len(p) + a->len, 2, &h);
                pkts[out++] = b ? b : p;
                if (!b)
                    pkts[out++] = a;
                continue;
            }
            uint64_t mine = 0;
            size_t bytes = p->len, cnt = 1;
            struct hop h;
            hop_init(e, &h, p);
            /* A transmission (stamped) never overtakes another to the same destination:
             * the receiver would see a gap and its ACK would make PDS declare the
             * overtaken packets lost (docs/pds.md, ROD would drop it). ACKs may. */
            bool passed = false;
            if (bundle_member(p))
                for (uint32_t j = i + 1; j < end; j++) {
                    struct ub__pkt *q = pkts[j];
                    if (taken >> (j - base) & 1)
                        continue;
                    struct hop h2 = h;
                    if (bundle_member(q) && !(passed && q->order) &&
                        ub__bundle_size(bytes + q->len, cnt + 1) <= e->cfg.mtu &&
                        same_hop(e, &h2, q)) {
                        h = h2;
                        mine |= 1ull << (j - base);
                        bytes += q->len;
                        cnt++;
                    } else if (q->order && ub__addr_eq(&q->addr, h.addr)) {
                        passed = true;
                    }
                }
            /* An ACK with no small packet to go with: the last packet to its peer in the
             * window carries it if it fits beside it (a message's shorter last packet: a
             * datagram less, and the GSO run before it stays whole), the ACK ahead of it:
             * a peer that answers the message as it completes (a yield) has its own last
             * request's packets acknowledged first, so the answer may ask for its response on
             * the ACK (K counts one request pending behind a yield, not its packets). */
            uint32_t c = mine || !(p->flags & UB_PKT_F_ANY_PATH) || !bundle_member(p)
                             ? end
                             : last_to(pkts, i + 1, end, &p->addr);
            if (c < end && !((taken | carries) >> (c - base) & 1) && !bundle_member(pkts[c]) &&
                may_pair(e, pkts[c], p)) {
                carries |= 1ull << (c - base);
                rider[c - base] = p;
                continue;
            }
            struct ub__pkt *b = mine ? bundle_make(e, p, pkts + base, mine, bytes, cnt, &h) : NULL;
            if (!b) {
                pkts[out++] = p;
                continue;
            }
            taken |= mine;
            pkts[out++] = b;
        }
    }
    return out;
}

struct ub__pkt *ub__engine_output_link_one(struct ub__engine *e, uint64_t now)
{
    struct ub__pkt *p = ub__pds_link_pull_one(e->pds, now);
    if (!p)
        return NULL;
    e->out_now = now;
    e->stats.tx_bytes += ub__pkt_total_len(p);
    e->stats.tx_pkts++;
    p->ts = now;
    return p;
}

/* Whether p goes to a parked peer (held_parked). */
static bool parked_peer(const struct ub__engine *e, const struct ub__pkt *p)
{
    if (p->addr.family != UB_AF_SHM)
        return false;
    if (e->parked_all)
        return true;
    for (uint32_t i = 0; i < e->n_parked; i++)
        if (e->parked[i] == p->addr.port)
            return true;
    return false;
}

/* Keeps p (refused, or for a parked peer) in held; false when held is full. On the link
 * path PDS counts a packet handed out as done with, so its request may end while it waits
 * here: an attached payload is copied in now, before its buffer can go back. */
static bool hold(struct ub__engine *e, struct ub__pkt *p)
{
    ub__pkt_flatten(p);
    if (!ub__ring_count(&e->held) || p->ts < e->held_min_ts)
        e->held_min_ts = p->ts;
    return ub__ring_push(&e->held, p);
}

/* Parks the peers of held packets refused past UB_ENGINE_HOLD_MAX_NS (link path). */
static void park(struct ub__engine *e)
{
    uint32_t cnt = ub__ring_count(&e->held);
    uint64_t min = UINT64_MAX;
    for (uint32_t i = 0; i < cnt; i++) {
        const struct ub__pkt *p = ub__ring_at(&e->held, i);
        if (e->out_now - p->ts > UB_ENGINE_HOLD_MAX_NS && !parked_peer(e, p)) {
            if (e->n_parked < UB_ENGINE_PARKED_MAX)
                e->parked[e->n_parked++] = p->addr.port;
            else
                e->parked_all = true;
        }
        min = UB_MIN(min, p->ts);
    }
    e->held_min_ts = min;
    if (!e->n_parked && !e->parked_all)
        return;
    e->held_parked_n = 0;
    for (uint32_t i = 0; i < cnt; i++)
        e->held_parked_n += parked_peer(e, ub__ring_at(&e->held, i));
    if (!e->held_parked) {
        e->held_parked = true;
        e->stats.tx_hold_parked++;
        ub__timer_arm(&e->timers, &e->hold_timer, e->out_now + UB_ENGINE_HOLD_RETRY_NS);
    }
}

/* Parked: the held packets of peers not parked, in order, the others kept. */
static uint32_t unparked_held(struct ub__engine *e, struct ub__pkt **pkts, uint32_t max)
{
    uint32_t h = 0, cnt = ub__ring_count(&e->held);
    if (cnt == e->held_parked_n)
        return 0;
    for (uint32_t i = 0; i < cnt; i++) {
        struct ub__pkt *p = ub__ring_pop(&e->held);
        if (h < max && !parked_peer(e, p))
            pkts[h++] = p;
        else
            ub__ring_push(&e->held, p); /* behind the rest: each peer's stay in order */
    }
    return h;
}

uint32_t ub__engine_output(struct ub__engine *e, struct ub__pkt **pkts, uint32_t max, uint64_t now)
{
    uint32_t n = 0, h = 0;
    struct ub__pkt *p;
    e->out_now = now;
    if (e->held_parked)
        h = unparked_held(e, pkts, max);
    while (!e->held_parked && h < max && (p = ub__ring_pop(&e->held)) != NULL) {
        /* A receiver alive but not draining (stopped) must not keep us spinning: past the
         * bound the packet is dropped, and PDS's timer takes over as for any loss. On the
         * link path nothing would repair it: kept, its peer parked (ub__engine_requeue). */
        if (now - p->ts > UB_ENGINE_HOLD_MAX_NS && !e->cfg.pds.link) {
            e->stats.tx_hold_expired++;
            ub__pkt_free(p);
            continue;
        }
        pkts[h++] = p; /* counted when first handed out */
    }
    n = h;
    /* Link path: whatever this batch hands out may come back refused and must fit the held
     * ring again (nothing would repair a dropped one), with what stays held meanwhile. */
    if (e->cfg.pds.link)
        max = UB_MIN(max, ub__ring_capacity(&e->held) - ub__ring_count(&e->held));
    /* A parked peer's new packets join its held ones: as many as may still (each new one may
     * be one of them). */
    if (e->held_parked)
        max = UB_MIN(max, n + (ub__engine_takes_new(e) ? e->parked_backlog - e->held_parked_n : 0));
    while (n < max && (p = ub__ring_pop(&e->txq)) != NULL)
        pkts[n++] = p;
    n += ub__pds_pull(e->pds, pkts + n, max - n, now);
    for (uint32_t i = h; i < n; i++)
        e->stats.tx_bytes += ub__pkt_total_len(pkts[i]);
    e->stats.tx_pkts += n - h;
    if (e->held_parked) { /* a parked peer's new packets join its held ones, behind them */
        uint32_t k = h;
        for (uint32_t i = h; i < n; i++) {
            if (!parked_peer(e, pkts[i])) {
                pkts[k++] = pkts[i];
                continue;
            }
            pkts[i]->ts = now;
            if (hold(e, pkts[i])) /* there is room: the batch fits the held ring (above) */
                e->held_parked_n++;
            else
                ub__pkt_free(pkts[i]);
        }
        n = k;
    }
    /* Held packets went out (bundled) before and keep their first time for the bound. */
    if (e->cfg.bundle && n - h > 1)
        n = h + bundle_batch(e, pkts + h, n - h);
    for (uint32_t i = h; i < n; i++)
        pkts[i]->ts = now;
    return n;
}

uint32_t ub__engine_requeue(struct ub__engine *e, struct ub__pkt *const *pkts, uint32_t n)
{
    uint32_t dropped = 0;
    bool room = true;
    for (uint32_t i = 0; i < n; i++) {
        /* Once one did not fit, none after it is kept either: a lane stays in order. */
        if (pkts[i]->addr.family == UB_AF_SHM && room && hold(e, pkts[i])) {
            e->stats.tx_held++;
            continue;
        }
        if (pkts[i]->addr.family == UB_AF_SHM)
            room = false;
        ub__pkt_free(pkts[i]);
        dropped++;
    }
    /* Link path: a kept one (held ones keep their first time) was past the bound already at
     * that output: its peer parks. */
    if (e->cfg.pds.link && ub__ring_count(&e->held) &&
        e->out_now - e->held_min_ts > UB_ENGINE_HOLD_MAX_NS)
        park(e);
    return dropped;
}

uint64_t ub__engine_next_deadline(const struct ub__engine *e)
{
    return ub__timers_next(&e->timers);
}

void ub__engine_expire(struct ub__engine *e, uint64_t now)
{
    e->stats.timers_fired += ub__timers_expire(&e->timers, now);
}

/* The datagram service's headers: PDS UUD_REQ, SES standard request, DGRAM_SEND. */
static void dgram_headers(struct ub__wire_dgram *d, const struct ub__engine *e, uint32_t initiator,
                          uint64_t header_data, uint32_t len)
{
    memset(d, 0, sizeof(*d));
    d->pds.type = UB_PDS_TYPE_UUD_REQ;
    d->pds.u.uud.next_hdr = UB_PDS_NH_REQ_STD;
    d->ses_kind = UB_PDS_NH_REQ_STD;
    d->ses.kind = UB_PDS_NH_REQ_STD;
    struct ub__ses_std *s = &d->ses.u.std;
    s->opcode = UB_SES_OP_DGRAM_SEND;
    s->flags = UB_SES_F_SOM | UB_SES_F_EOM | (header_data ? UB_SES_F_HD : 0);
    s->job_id = e->cfg.job_id;
    s->initiator = initiator;
    s->header_data = header_data;
    s->request_length = len;
}

uint32_t ub__engine_dgram_max(const struct ub__engine *e)
{
    return e->cfg.mtu - (UB_PDS_UUD_SIZE + UB_SES_STD_SIZE);
}

int ub__engine_dgram_send(struct ub__engine *e, const struct ub__addr *dst, uint16_t path,
                          uint32_t initiator, uint64_t header_data, const void *buf, uint32_t len,
                          uint64_t now)
{
    (void)now;
    if (len > ub__engine_dgram_max(e))
        return UB_ELENGTH;
    if (ub__ring_full(&e->txq)) {
        e->stats.tx_queue_full++;
        return UB_EFULL;
    }
    struct ub__pkt *p = ub__pkt_alloc(&e->pool);
    if (!p) {
        e->stats.tx_nobufs++;
        return UB_ENOBUFS;
    }
    struct ub__wire_dgram d;
    dgram_headers(&d, e, initiator, header_data, len);
    struct ub__wcur w;
    ub__wcur_init(&w, p->data, ub__pkt_tailroom(p));
    int rc = ub__wire_encode_headers(&d, &w);
    if (rc) {
        ub__pkt_free(p);
        return rc;
    }
    uint32_t hdr = (uint32_t)ub__wcur_offset(&w);
    ub__pkt_put(p, hdr);
    memcpy(ub__pkt_put(p, len), buf, len);
    p->addr = *dst;
    p->path = (uint16_t)ub__mod_below(path, e->cfg.num_paths);
    ub__ring_push(&e->txq, p);
    return 0;
}
