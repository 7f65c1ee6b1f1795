#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "sim/reftp.h"
#include "wire/ext.h"

struct rflow {
    struct ub_sim_event rto;
    struct ub_sim_reftp *tp;
    uint64_t cwnd, inflight;
    uint64_t last_decrease;                /* start of the current DCTCP observation period */
    uint32_t acks, marked;                 /* ACKs and ECN echoes in the period */
    uint32_t alpha;                        /* DCTCP's estimate of the marked fraction, x 1024 */
    uint64_t *acked, *out, *queued, *rcvd; /* bitmaps, one bit per packet */
    uint32_t *rtx;                         /* ring of packets to resend, npkts slots */
    uint32_t rtx_head, rtx_n;
    uint32_t npkts, snd_nxt, nacked, nrcvd;
    uint32_t last_size;
    uint32_t anext, aprev; /* the sender's circular list of flows with work */
    uint16_t ev_base;
    bool active, done;
    struct ub__cc cc; /* C-AQM: the rate the window follows */
};

struct rhost {
    struct ub_sim_pktq ctrl; /* ACKs and NACKs go before data */
    uint32_t active;         /* round-robin cursor, UB_SIM_NONE if no flow has work */
    struct ub__rng rng;
};

struct ub_sim_reftp {
    struct ub_sim_reftp_cfg cfg;
    struct ub_sim_reftp_stats st;
    struct rhost *hosts;
    struct rflow *fl;
    uint32_t nfl;
};

static inline bool bit_get(const uint64_t *b, uint32_t i)
{
    return (b[i >> 6] >> (i & 63)) & 1u;
}

static inline void bit_set(uint64_t *b, uint32_t i)
{
    b[i >> 6] |= 1ULL << (i & 63);
}

static inline void bit_clr(uint64_t *b, uint32_t i)
{
    b[i >> 6] &= ~(1ULL << (i & 63));
}

static inline uint32_t pkt_size(const struct ub_sim_reftp *tp, const struct rflow *f, uint32_t seq)
{
    return seq + 1 < f->npkts ? tp->cfg.mtu : f->last_size;
}

static void activate(struct ub_sim_reftp *tp, uint32_t host, uint32_t idx)
{
    struct rflow *f = &tp->fl[idx];
    if (f->active || f->done)
        return;
    struct rhost *h = &tp->hosts[host];
    f->active = true;
    if (h->active == UB_SIM_NONE) {
        f->anext = f->aprev = idx;
        h->active = idx;
        return;
    }
    /* Insert behind the cursor: the newcomer waits one round like everyone else. */
    struct rflow *cur = &tp->fl[h->active];
    f->anext = h->active;
    f->aprev = cur->aprev;
    tp->fl[cur->aprev].anext = idx;
    cur->aprev = idx;
}

static void deactivate(struct ub_sim_reftp *tp, uint32_t host, uint32_t idx)
{
    struct rflow *f = &tp->fl[idx];
    if (!f->active)
        return;
    struct rhost *h = &tp->hosts[host];
    f->active = false;
    if (f->anext == idx) {
        h->active = UB_SIM_NONE;
        return;
    }
    tp->fl[f->aprev].anext = f->anext;
    tp->fl[f->anext].aprev = f->aprev;
    if (h->active == idx)
        h->active = f->anext;
}

static void rtx_push(struct rflow *f, uint32_t seq)
{
    if (bit_get(f->queued, seq) || bit_get(f->acked, seq))
        return;
    bit_set(f->queued, seq);
    f->rtx[(f->rtx_head + f->rtx_n) % f->npkts] = seq;
    f->rtx_n++;
}

/* A trim or a timeout: a sure sign of congestion, cut by half at most once per base RTT. */
static void decrease(struct ub_sim_reftp *tp, struct rflow *f, uint64_t now)
{
    if (!tp->cfg.cc || now - f->last_decrease < tp->cfg.base_rtt)
        return;
    f->last_decrease = now;
    f->acks = f->marked = 0;
    f->cwnd /= 2;
    if (f->cwnd < tp->cfg.mtu)
        f->cwnd = tp->cfg.mtu;
}

/*
 * DCTCP in integers: once per base RTT, alpha moves 1/16 of the way to the
 * fraction of ECN-echoing ACKs, and the window shrinks by alpha / 2 if any
 * ACK echoed a mark; otherwise it grows by one MTU per window of ACKs.
 */
static void cc_ack(struct ub_sim_reftp *tp, struct rflow *f, uint32_t size, bool ece, uint64_t now)
{
    f->acks++;
    f->marked += ece;
    if (now - f->last_decrease >= tp->cfg.base_rtt) {
        uint32_t frac = (uint32_t)((uint64_t)f->marked * 1024 / f->acks);
        f->alpha = (f->alpha * 15 + frac) / 16;
        if (f->marked) {
            f->cwnd -= f->cwnd * f->alpha / 2048;
            if (f->cwnd < tp->cfg.mtu)
                f->cwnd = tp->cfg.mtu;
        }
        f->last_decrease = now;
        f->acks = f->marked = 0;
    }
    if (!ece && f->cwnd < tp->cfg.window) {
        f->cwnd += (uint64_t)tp->cfg.mtu * size / f->cwnd;
        if (f->cwnd > tp->cfg.window)
            f->cwnd = tp->cfg.window;
    }
}

/* C-AQM: the window that lets the flow's rate through one base RTT. */
static void caqm_window(const struct ub_sim_reftp *tp, struct rflow *f)
{
    uint64_t rate = f->cc.u.caqm.rate; /* bit/s */
    uint64_t w = rate / 8 * tp->cfg.base_rtt / UB_SIM_PS_PER_S;
    f->cwnd = w < tp->cfg.mtu ? tp->cfg.mtu : w > tp->cfg.window ? tp->cfg.window : w;
}

/* The flow's next packet, or NULL if its window is closed or it has nothing to send. */
static struct ub_sim_pkt *flow_next(struct ub_sim_reftp *tp, struct ub_sim *sim, uint32_t idx)
{
    struct rflow *f = &tp->fl[idx];
    uint32_t seq;
    bool rtx = false;
    for (;;) {
        if (f->rtx_n) {
            seq = f->rtx[f->rtx_head];
            if (bit_get(f->acked, seq)) { /* acked meanwhile by a late ACK */
                bit_clr(f->queued, seq);
                f->rtx_head = (f->rtx_head + 1) % f->npkts;
                f->rtx_n--;
                continue;
            }
            rtx = true;
        } else if (f->snd_nxt < f->npkts) {
            seq = f->snd_nxt;
        } else {
            return NULL;
        }
        break;
    }
    uint32_t size = pkt_size(tp, f, seq);
    if (f->inflight && f->inflight + size > f->cwnd)
        return NULL;
    if (rtx) {
        bit_clr(f->queued, seq);
        f->rtx_head = (f->rtx_head + 1) % f->npkts;
        f->rtx_n--;
        tp->st.rtx++;
    } else {
        f->snd_nxt++;
    }
    bit_set(f->out, seq);
    f->inflight += size;
    tp->st.data_sent++;
    const struct ub_sim_flow *sf = &sim->flows[idx];
    struct ub_sim_pkt *p = ub_sim_pkt_alloc(sim);
    p->src = sf->src;
    p->dst = sf->dst;
    p->flow = idx;
    p->seq = seq;
    p->size = size;
    p->ecn = UB_SIM_ECN_ECT0;
    if (tp->cfg.caqm) {
        struct ub__ext ext = {0};
        ub__cc_caqm_tx_fields(&f->cc, &ext);
        p->aqm = (uint8_t)(UB_SIM_AQM_VALID | (ext.aqm_increase ? UB_SIM_AQM_I : 0));
        p->hint = ext.aqm_hint;
    }
    uint32_t paths = tp->cfg.paths;
    p->ev =
        (uint16_t)(f->ev_base + (paths > 1 ? ub__rng_below(&tp->hosts[sf->src].rng, paths) : 0));
    if (!f->rto.armed)
        ub_sim_at(sim, &f->rto, ub_sim_now(sim) + tp->cfg.rto);
    return p;
}

static struct ub_sim_pkt *pull(void *ctx, struct ub_sim *sim, uint32_t host)
{
    struct ub_sim_reftp *tp = ctx;
    struct rhost *h = &tp->hosts[host];
    struct ub_sim_pkt *p = ub_sim_pktq_pop(&h->ctrl);
    if (p)
        return p;
    while (h->active != UB_SIM_NONE) {
        uint32_t idx = h->active;
        p = flow_next(tp, sim, idx);
        if (p) {
            h->active = tp->fl[idx].anext;
            return p;
        }
        deactivate(tp, host, idx);
    }
    return NULL;
}

static void rto_fire(struct ub_sim *sim, struct ub_sim_event *ev)
{
    struct rflow *f = UB_SIM_CONTAINER_OF(ev, struct rflow, rto);
    struct ub_sim_reftp *tp = f->tp;
    if (f->done || f->inflight == 0)
        return;
    tp->st.timeouts++;
    for (uint32_t seq = 0; seq < f->snd_nxt; seq++) {
        if (bit_get(f->out, seq)) {
            bit_clr(f->out, seq);
            rtx_push(f, seq);
        }
    }
    f->inflight = 0;
    f->last_decrease = 0;
    decrease(tp, f, ub_sim_now(sim));
    if (tp->cfg.caqm) {
        ub__cc_on_timeout(&f->cc, tp->cfg.mtu, ub_sim_now(sim) / UB_SIM_PS_PER_NS);
        caqm_window(tp, f);
    }
    uint32_t idx = (uint32_t)(f - tp->fl);
    uint32_t src = sim->flows[idx].src;
    activate(tp, src, idx);
    ub_sim_at(sim, &f->rto, ub_sim_now(sim) + tp->cfg.rto);
    ub_sim_host_kick(sim, src);
}

static void start_flow(void *ctx, struct ub_sim *sim, uint32_t idx)
{
    struct ub_sim_reftp *tp = ctx;
    if (!tp->fl) {
        tp->fl = calloc(sim->nflows ? sim->nflows : 1, sizeof(*tp->fl));
        if (!tp->fl)
            abort();
        tp->nfl = sim->nflows;
    }
    struct ub_sim_flow *sf = &sim->flows[idx];
    struct rflow *f = &tp->fl[idx];
    uint64_t mss = tp->cfg.mtu - tp->cfg.hdr;
    uint64_t n = sf->size ? (sf->size + mss - 1) / mss : 1;
    if (n > UINT32_MAX / 2)
        abort();
    f->tp = tp;
    f->npkts = (uint32_t)n;
    f->last_size = (uint32_t)(sf->size - (n - 1) * mss + tp->cfg.hdr);
    uint32_t words = (f->npkts + 63) / 64;
    uint64_t *mem = calloc((size_t)words * 4 + (f->npkts + 1) / 2 + 1, sizeof(uint64_t));
    if (!mem)
        abort();
    f->acked = mem;
    f->out = mem + words;
    f->queued = mem + 2 * words;
    f->rcvd = mem + 3 * words;
    f->rtx = (uint32_t *)(void *)(mem + 4 * words);
    f->cwnd = tp->cfg.window;
    f->last_decrease = ub_sim_now(sim);
    f->ev_base = (uint16_t)ub__mix64(sim->seed ^ ((uint64_t)idx << 20));
    ub_sim_event_init(&f->rto, rto_fire);
    if (tp->cfg.caqm) {
        struct ub__cc_params cp = {
            .link_bps = sim->ports[sf->src].rate,
            .base_rtt_ns = tp->cfg.base_rtt / UB_SIM_PS_PER_NS,
            .mtu = tp->cfg.mtu,
            .trimming = sim->qcfg.trim,
        };
        if (ub__cc_init(&f->cc, &ub__cc_caqm, &cp))
            abort(); /* parameters checked at create */
        caqm_window(tp, f);
    }
    sf->ideal = ub_sim_ideal_fct(sim, sf->src, sf->dst, sf->size, tp->cfg.mtu, tp->cfg.hdr,
                                 tp->cfg.ack_size);
    activate(tp, sf->src, idx);
    ub_sim_host_kick(sim, sf->src);
}

static void send_ctrl(struct ub_sim_reftp *tp, struct ub_sim *sim, uint32_t host,
                      const struct ub_sim_pkt *d, uint8_t flags)
{
    struct ub_sim_pkt *a = ub_sim_pkt_alloc(sim);
    a->src = host;
    a->dst = d->src;
    a->flow = d->flow;
    a->seq = d->seq;
    a->size = tp->cfg.ack_size;
    a->ev = d->ev;
    a->ecn = UB_SIM_ECN_NOT_ECT;
    a->flags = (uint8_t)(UB_SIM_PF_CTRL | flags);
    a->aqm = (uint8_t)(d->aqm & (UB_SIM_AQM_I | UB_SIM_AQM_C)); /* the echo: switches skip it */
    a->hint = d->hint;
    ub_sim_pktq_push(&tp->hosts[host].ctrl, a);
    ub_sim_host_kick(sim, host);
}

static void on_ack(struct ub_sim_reftp *tp, struct ub_sim *sim, struct rflow *f,
                   const struct ub_sim_pkt *p)
{
    uint32_t idx = p->flow, seq = p->seq;
    uint64_t now = ub_sim_now(sim);
    uint32_t size = pkt_size(tp, f, seq);
    if (bit_get(f->out, seq)) {
        bit_clr(f->out, seq);
        f->inflight -= size;
    }
    if (p->flags & UB_SIM_PF_NACK) {
        tp->st.nacks++;
        rtx_push(f, seq);
        decrease(tp, f, now);
        if (tp->cfg.caqm) {
            struct ub__cc_nack n = {.bytes = size, .inflight = f->inflight, .trimmed = true};
            ub__cc_on_nack(&f->cc, &n, now / UB_SIM_PS_PER_NS);
            caqm_window(tp, f);
        }
    } else {
        tp->st.acks++;
        if (!bit_get(f->acked, seq)) {
            bit_set(f->acked, seq);
            f->nacked++;
        }
        if (tp->cfg.caqm) {
            bool c = p->aqm & UB_SIM_AQM_C;
            struct ub__cc_ack a = {
                .acked_bytes = size,
                .inflight = f->inflight,
                .caqm_c = c,
                .caqm_i = (p->aqm & UB_SIM_AQM_I) != 0,
                .caqm_hint = c ? ub__caqm_hint_decode(p->hint) : 0,
            };
            tp->st.caqm_c_echoes += c;
            ub__cc_on_ack(&f->cc, &a, now / UB_SIM_PS_PER_NS);
            caqm_window(tp, f);
        } else if (tp->cfg.cc) {
            cc_ack(tp, f, size, p->flags & UB_SIM_PF_ECE, now);
        }
        if (f->nacked == f->npkts) {
            f->done = true;
            ub_sim_cancel(&f->rto);
            deactivate(tp, p->dst, idx);
            ub_sim_flow_done(sim, idx);
            return;
        }
        /* Progress pushes the timeout back (lazily: no heap work). */
        if (f->inflight)
            ub_sim_at(sim, &f->rto, now + tp->cfg.rto);
    }
    activate(tp, p->dst, idx);
    ub_sim_host_kick(sim, p->dst);
}

static void rx(void *ctx, struct ub_sim *sim, uint32_t host, struct ub_sim_pkt *p)
{
    struct ub_sim_reftp *tp = ctx;
    struct rflow *f = &tp->fl[p->flow];
    if (p->flags & (UB_SIM_PF_ACK | UB_SIM_PF_NACK)) {
        if (!f->done)
            on_ack(tp, sim, f, p);
    } else if (p->flags & UB_SIM_PF_TRIMMED) {
        send_ctrl(tp, sim, host, p, UB_SIM_PF_NACK);
    } else {
        if (bit_get(f->rcvd, p->seq)) {
            tp->st.dup_data++;
        } else {
            bit_set(f->rcvd, p->seq);
            f->nrcvd++;
        }
        send_ctrl(tp, sim, host, p,
                  (uint8_t)(UB_SIM_PF_ACK | (p->ecn == UB_SIM_ECN_CE ? UB_SIM_PF_ECE : 0)));
    }
    ub_sim_pkt_free(sim, p);
}

static void destroy(void *ctx, struct ub_sim *sim)
{
    struct ub_sim_reftp *tp = ctx;
    for (uint32_t h = 0; h < sim->nhosts; h++) {
        struct ub_sim_pkt *p;
        while ((p = ub_sim_pktq_pop(&tp->hosts[h].ctrl)) != NULL)
            ub_sim_pkt_free(sim, p);
    }
    if (tp->fl)
        for (uint32_t i = 0; i < tp->nfl; i++)
            free(tp->fl[i].acked);
    free(tp->fl);
    free(tp->hosts);
    free(tp);
}

static const struct ub_sim_transport_ops reftp_ops = {
    .name = "ref",
    .start_flow = start_flow,
    .pull = pull,
    .rx = rx,
    .destroy = destroy,
};

int ub_sim_reftp_create(struct ub_sim *sim, const struct ub_sim_reftp_cfg *cfg,
                        struct ub_sim_reftp **out)
{
    struct ub_sim_reftp *tp = calloc(1, sizeof(*tp));
    if (!tp)
        return UB_ENOMEM;
    tp->cfg = *cfg;
    if (!tp->cfg.mtu)
        tp->cfg.mtu = 4096;
    if (!tp->cfg.hdr)
        tp->cfg.hdr = 64;
    if (!tp->cfg.ack_size)
        tp->cfg.ack_size = 64;
    if (!tp->cfg.paths)
        tp->cfg.paths = 1;
    if (!tp->cfg.window)
        tp->cfg.window = 64ULL * tp->cfg.mtu;
    if (!tp->cfg.rto)
        tp->cfg.rto = 100 * UB_SIM_PS_PER_US;
    if (tp->cfg.caqm)
        tp->cfg.cc = false; /* C-AQM replaces the DCTCP-style control */
    if (tp->cfg.hdr >= tp->cfg.mtu || (tp->cfg.caqm && tp->cfg.base_rtt < UB_SIM_PS_PER_NS)) {
        free(tp);
        return UB_EINVAL;
    }
    tp->hosts = calloc(sim->nhosts, sizeof(*tp->hosts));
    if (!tp->hosts) {
        free(tp);
        return UB_ENOMEM;
    }
    for (uint32_t h = 0; h < sim->nhosts; h++) {
        tp->hosts[h].active = UB_SIM_NONE;
        ub__rng_fork(&tp->hosts[h].rng, &sim->rng, 0x7265667470000000ULL | h);
    }
    ub_sim_set_transport(sim, &reftp_ops, tp);
    if (out)
        *out = tp;
    return 0;
}

const struct ub_sim_reftp_stats *ub_sim_reftp_stats(const struct ub_sim_reftp *tp)
{
    return &tp->st;
}
