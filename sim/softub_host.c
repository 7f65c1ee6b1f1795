/* Hosts running the real softub engine: flows as RUD messages through PDS (see softub_host.h). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "core/clock.h"
#include "engine/engine.h"
#include "sim/softub_host.h"
#include "wire/datagram.h"
#include "wire/ses.h"

/* Packets queued to PDS beyond its window, so an ACK never finds the context's queue empty. */
#define SLACK 8u

struct shost {
    struct ub__engine eng;
    struct ub_sim_event timer; /* the engine's next deadline */
    struct ub_sim_event retry; /* the pool ran dry: top up again shortly */
    struct ub_sim_softub *s;
    uint32_t id;
    uint32_t dirty; /* stack of flows to top up, linked through sflow.dnext */
};

struct sflow {
    uint32_t npkts; /* packets in the message */
    uint32_t made;  /* handed to PDS */
    uint32_t acked;
    uint32_t dnext;
    bool dirty;
};

struct ub_sim_softub {
    struct ub_sim_softub_cfg cfg;
    struct ub_sim_softub_stats st;
    struct ub_sim *sim;
    struct shost *hosts;
    uint32_t nhosts;
    struct sflow *fl;
    uint32_t nfl;
    uint32_t pay;     /* payload bytes in a full data packet */
    uint32_t reserve; /* buffers top_up leaves free for control packets and copies */
    bool closing;
    uint8_t *scratch; /* payload bytes (real_payload) */
};

static inline uint64_t ns_of(const struct ub_sim *sim)
{
    return ub_sim_now(sim) / UB_SIM_PS_PER_NS;
}

static inline uint32_t pkt_payload(const struct ub_sim_softub *s, const struct ub_sim_flow *sf,
                                   uint32_t idx)
{
    uint64_t off = (uint64_t)idx * s->pay;
    uint64_t left = sf->size - off;
    return left < s->pay ? (uint32_t)left : s->pay;
}

/*
 * C-AQM: the switches work on the descriptor's copy of the extension header's I, C and hint. A
 * request leaving its host brings them along (it may be marked: UB_SIM_AQM_VALID) ...
 */
static void caqm_load(const struct ub__pkt *b, struct ub_sim_pkt *p)
{
    struct ub__wire_dgram d;
    if (ub__wire_parse_datagram(&d, b->data, b->len, 0) || !d.has_ext)
        return;
    p->aqm = (uint8_t)(UB_SIM_AQM_VALID | (d.ext.aqm_increase ? UB_SIM_AQM_I : 0) |
                       (d.ext.aqm_congestion ? UB_SIM_AQM_C : 0));
    p->hint = d.ext.aqm_hint;
}

/* ... and the receiving engine finds what the switches made of them in its copy. */
static void caqm_store(struct ub__pkt *b, const struct ub_sim_pkt *p)
{
    struct ub__wire_dgram d;
    if (ub__wire_parse_datagram(&d, b->data, b->len, 0) || !d.has_ext)
        return;
    struct ub__ext e = d.ext;
    e.aqm_increase = (p->aqm & UB_SIM_AQM_I) != 0;
    e.aqm_congestion = (p->aqm & UB_SIM_AQM_C) != 0;
    e.aqm_hint = p->hint;
    struct ub__wcur w;
    ub__wcur_init(&w, b->data + d.ext_off, d.ext_len);
    (void)ub__ext_encode(&e, &w); /* same fields, same size: cannot fail */
}

static void rearm(struct ub_sim *sim, struct shost *h)
{
    uint64_t d = ub__engine_next_deadline(&h->eng);
    if (d == UB_TIME_NEVER)
        ub_sim_cancel(&h->timer);
    else
        ub_sim_at(sim, &h->timer,
                  d > UINT64_MAX / UB_SIM_PS_PER_NS ? UB_SIM_NEVER - 1 : d * UB_SIM_PS_PER_NS);
}

static void mark_dirty(struct ub_sim_softub *s, struct shost *h, uint32_t f)
{
    struct sflow *x = &s->fl[f];
    if (x->dirty || x->made == x->npkts)
        return;
    x->dirty = true;
    x->dnext = h->dirty;
    h->dirty = f;
}

/* Builds packet idx of flow f (SES standard header + payload) and queues it to PDS. */
static int make_pkt(struct ub_sim_softub *s, struct ub_sim *sim, struct shost *h, uint32_t f,
                    const struct ub__addr *dst)
{
    const struct ub_sim_flow *sf = &sim->flows[f];
    struct sflow *x = &s->fl[f];
    uint32_t idx = x->made;
    struct ub__pkt *b = ub__pkt_alloc(&h->eng.pool);
    if (!b)
        return UB_ENOBUFS;
    uint32_t len = pkt_payload(s, sf, idx);
    uint32_t carried = s->cfg.virtual_payload ? 0 : len;
    bool som = idx == 0, eom = idx + 1 == x->npkts;
    struct ub__ses_std hd = {
        .opcode = UB_SES_OP_WRITE,
        .flags = (uint8_t)((som ? UB_SES_F_SOM : 0) | (eom ? UB_SES_F_EOM : 0)),
        .msg_id = (uint16_t)f,
        .initiator = f,
        .mem_key = sf->id,
        .request_length = (uint32_t)sf->size,
    };
    if (!som) {
        hd.payload_len = (uint16_t)carried;
        hd.message_offset = idx * s->pay;
    }
    struct ub__wcur w;
    ub__wcur_init(&w, ub__pkt_put(b, UB_SES_STD_SIZE), UB_SES_STD_SIZE);
    int rc = ub__ses_std_encode(&hd, &w);
    if (!rc && carried) {
        uint8_t *at = ub__pkt_put(b, carried);
        if (at)
            memcpy(at, s->scratch, carried);
        else
            rc = UB_ELENGTH;
    }
    if (rc) {
        ub__pkt_free(b);
        return rc;
    }
    if (!carried && len)
        b->wire_len = b->len + len; /* virtual payload: PDS and its cc count the real size */
    struct ub__pds_tx tx = {
        .dst = dst,
        .mode = UB_PDS_RUD,
        .ses_kind = UB_PDS_NH_REQ_STD,
        .ack_req = eom,
        .cookie = ((uint64_t)(f + 1) << 32) | idx,
    };
    rc = ub__pds_send(h->eng.pds, &tx, b, ns_of(sim));
    if (rc) {
        ub__pkt_free(b);
        return rc;
    }
    x->made++;
    s->st.pkts_queued++;
    return 0;
}

/* Keeps flow f's context at window + SLACK packets queued or in flight. */
static void top_up(struct ub_sim_softub *s, struct ub_sim *sim, struct shost *h, uint32_t f)
{
    struct sflow *x = &s->fl[f];
    if (x->made == x->npkts)
        return;
    struct ub__addr dst;
    ub__addr_loop(&dst, (uint16_t)sim->flows[f].dst);
    uint32_t out = ub__pds_outstanding(h->eng.pds, &dst, UB_PDS_RUD);
    bool any = false;
    while (x->made < x->npkts && out < s->cfg.window + SLACK) {
        /*
         * Data never takes the last buffers: ACKs, NACKs and retransmission copies need them
         * (PDS cannot make progress without them).
         */
        int rc = h->eng.pool.avail > s->reserve ? make_pkt(s, sim, h, f, &dst) : UB_ENOBUFS;
        if (rc == UB_ENOBUFS || rc == UB_EFULL) {
            /* Every buffer is out (in flight or waiting for an ACK): try again a packet later. */
            s->st.send_blocked++;
            mark_dirty(s, h, f);
            if (!h->retry.armed)
                ub_sim_at(sim, &h->retry,
                          ub_sim_now(sim) + ub_sim_port_ser(&sim->ports[h->id], s->cfg.mtu));
            break;
        }
        if (rc) {
            s->st.send_errors++;
            break;
        }
        out++;
        any = true;
    }
    if (any)
        ub_sim_host_kick(sim, h->id);
}

static void drain_dirty(struct ub_sim_softub *s, struct ub_sim *sim, struct shost *h)
{
    uint32_t f, next = h->dirty;
    h->dirty = UB_SIM_NONE; /* a flow that blocks again goes on a fresh list */
    while ((f = next) != UB_SIM_NONE) {
        next = s->fl[f].dnext;
        s->fl[f].dirty = false;
        top_up(s, sim, h, f);
    }
}

static void timer_fire(struct ub_sim *sim, struct ub_sim_event *ev)
{
    struct shost *h = UB_SIM_CONTAINER_OF(ev, struct shost, timer);
    ub__engine_expire(&h->eng, ns_of(sim));
    drain_dirty(h->s, sim, h);
    rearm(sim, h);
    ub_sim_host_kick(sim, h->id);
}

static void retry_fire(struct ub_sim *sim, struct ub_sim_event *ev)
{
    struct shost *h = UB_SIM_CONTAINER_OF(ev, struct shost, retry);
    drain_dirty(h->s, sim, h);
    rearm(sim, h);
}

static struct ub_sim_pkt *pull(void *ctx, struct ub_sim *sim, uint32_t host)
{
    struct ub_sim_softub *s = ctx;
    struct shost *h = &s->hosts[host];
    for (;;) {
        struct ub__pkt *b;
        uint32_t n = ub__engine_output(&h->eng, &b, 1, ns_of(sim));
        rearm(sim, h); /* sending may have armed a retransmission timer */
        if (n != 1)
            return NULL;
        if (b->addr.family != UB_AF_LOOP || b->addr.port >= sim->nhosts) {
            ub__pkt_free(b); /* nowhere in this fabric */
            continue;
        }
        ub__pkt_flatten(b); /* the fabric keeps the buffer: nothing may point elsewhere */
        struct ub_sim_pkt *p = ub_sim_pkt_alloc(sim);
        p->buf = b;
        p->src = host;
        p->dst = b->addr.port;
        p->size = ub__pkt_wire_len(b); /* virtual payloads included */
        p->ev = b->path;
        p->ecn = b->ecn;
        if (b->tag) { /* a data packet: its cookie names the flow and the packet */
            uint32_t f = (uint32_t)(b->tag >> 32) - 1;
            p->flow = f;
            p->seq = (uint32_t)b->tag;
            if (sim->qcfg.caqm)
                caqm_load(b, p);
        } else {
            p->flow = UB_SIM_NONE;
            p->flags |= UB_SIM_PF_CTRL;
        }
        if (h->eng.pool.avail < s->st.pool_low)
            s->st.pool_low = h->eng.pool.avail;
        if (p->size < UB_SIM_SOFTUB_MIN_FRAME)
            p->size = UB_SIM_SOFTUB_MIN_FRAME;
        return p;
    }
}

static void rx(void *ctx, struct ub_sim *sim, uint32_t host, struct ub_sim_pkt *p)
{
    struct ub_sim_softub *s = ctx;
    struct shost *h = &s->hosts[host];
    struct ub__pkt *b = p->buf;
    p->buf = NULL;
    if (!b) {
        ub_sim_pkt_free(sim, p);
        return;
    }
    bool trimmed = p->flags & UB_SIM_PF_TRIMMED;
    struct ub__pkt *in = b;
    bool caqm = (p->aqm & UB_SIM_AQM_VALID) && !trimmed;
    if (b->refcnt > 1 || trimmed) {
        /*
         * The sender still holds these bytes (for retransmission): the receiver gets a copy.
         * Of a trimmed packet only the first UB_SIM_TRIM_SIZE bytes (its headers) survive.
         */
        in = ub__pkt_alloc(&h->eng.pool);
        if (in) {
            uint32_t len = trimmed && b->len > UB_SIM_TRIM_SIZE ? UB_SIM_TRIM_SIZE : b->len;
            memcpy(ub__pkt_put(in, len), b->data, len);
            if (!trimmed)
                in->wire_len = b->wire_len;
            s->st.copies++;
        }
        ub__pkt_free(b);
        if (!in) {
            ub_sim_pkt_free(sim, p);
            return;
        }
    }
    if (caqm)
        caqm_store(in, p);
    ub__addr_loop(&in->addr, (uint16_t)p->src);
    in->path = p->ev;
    in->ecn = p->ecn;
    in->flags = trimmed ? UB_PDS_PKT_TRIMMED : 0; /* PDS answers NACK TRIMMED */
    if (trimmed)
        s->st.trimmed_in++;
    in->tag = 0;
    in->ts = ns_of(sim);
    ub_sim_pkt_free(sim, p);
    ub__engine_input(&h->eng, &in, 1, ns_of(sim));
    drain_dirty(s, sim, h);
    rearm(sim, h);
    ub_sim_host_kick(sim, host);
}

static void on_deliver(void *arg, const struct ub__pds_rx *r, uint64_t now)
{
    (void)arg;
    (void)r;
    (void)now;
}

static void on_acked(void *arg, uint64_t cookie, uint64_t now)
{
    (void)now;
    struct shost *h = arg;
    struct ub_sim_softub *s = h->s;
    if (s->closing)
        return;
    uint32_t f = (uint32_t)(cookie >> 32) - 1;
    struct sflow *x = &s->fl[f];
    s->st.pkts_acked++;
    if (++x->acked == x->npkts)
        ub_sim_flow_done(s->sim, f);
    else
        mark_dirty(s, h, f);
}

static void on_failed(void *arg, uint64_t cookie, int err, uint64_t now)
{
    (void)cookie;
    (void)err;
    (void)now;
    struct shost *h = arg;
    if (!h->s->closing)
        h->s->st.pkts_failed++; /* the flow never completes: it shows in the summary */
}

static const struct ub__pds_upcalls pds_up = {
    .deliver = on_deliver,
    .acked = on_acked,
    .failed = on_failed,
};

static void start_flow(void *ctx, struct ub_sim *sim, uint32_t f)
{
    struct ub_sim_softub *s = ctx;
    if (!s->fl) {
        s->fl = calloc(sim->nflows ? sim->nflows : 1, sizeof(*s->fl));
        if (!s->fl)
            abort();
        s->nfl = sim->nflows;
    }
    struct ub_sim_flow *sf = &sim->flows[f];
    struct shost *h = &s->hosts[sf->src];
    sf->ideal = ub_sim_ideal_fct(sim, sf->src, sf->dst, sf->size, UB_SIM_SOFTUB_HDR + s->pay,
                                 UB_SIM_SOFTUB_HDR, UB_SIM_SOFTUB_MIN_FRAME);
    if (sf->size == 0 || sf->size > UINT32_MAX) {
        if (sf->size)
            s->st.send_errors++; /* one SES message carries at most 4 GiB */
        else
            ub_sim_flow_done(sim, f);
        return;
    }
    s->fl[f].npkts = (uint32_t)((sf->size + s->pay - 1) / s->pay);
    s->fl[f].dnext = UB_SIM_NONE;
    top_up(s, sim, h, f);
    rearm(sim, h);
}

static void destroy(void *ctx, struct ub_sim *sim)
{
    (void)sim;
    struct ub_sim_softub *s = ctx;
    s->closing = true;
    for (uint32_t i = 0; i < s->nhosts; i++)
        ub__engine_fini(&s->hosts[i].eng);
    free(s->hosts);
    free(s->fl);
    free(s->scratch);
    free(s);
}

static const struct ub_sim_transport_ops softub_ops = {
    .name = "softub",
    .start_flow = start_flow,
    .pull = pull,
    .rx = rx,
    .destroy = destroy,
};

int ub_sim_softub_create(struct ub_sim *sim, const struct ub_sim_softub_cfg *cfg,
                         struct ub_sim_softub **out)
{
    if (sim->nhosts > UINT16_MAX)
        return UB_EINVAL; /* hosts are loop-fabric ports */
    struct ub_sim_softub *s = calloc(1, sizeof(*s));
    if (!s)
        return UB_ENOMEM;
    s->cfg = *cfg;
    if (!s->cfg.mtu)
        s->cfg.mtu = 4096;
    if (!s->cfg.paths)
        s->cfg.paths = 1;
    if (!s->cfg.window)
        s->cfg.window = 64;
    if (!s->cfg.pool_bufs)
        s->cfg.pool_bufs = 3 * s->cfg.window + 64;
    if (!s->cfg.rto_min_ns)
        s->cfg.rto_min_ns = 100000;
    if (!s->cfg.ack_delay_ns)
        s->cfg.ack_delay_ns = 5000;
    if (s->cfg.mtu < 256 + UB_SIM_SOFTUB_HDR || s->cfg.window > 4096 ||
        s->cfg.mtu - UB_SIM_SOFTUB_HDR > 16383) {
        free(s);
        return UB_EINVAL;
    }
    s->st.pool_low = s->cfg.pool_bufs;
    s->pay = s->cfg.mtu - UB_SIM_SOFTUB_HDR;
    s->reserve = s->cfg.window / 2 + 16;
    if (s->reserve >= s->cfg.pool_bufs)
        s->reserve = s->cfg.pool_bufs / 2;
    s->sim = sim;
    s->hosts = calloc(sim->nhosts ? sim->nhosts : 1, sizeof(*s->hosts));
    s->scratch = calloc(1, s->cfg.mtu);
    if (!s->hosts || !s->scratch) {
        free(s->hosts);
        free(s->scratch);
        free(s);
        return UB_ENOMEM;
    }
    for (uint32_t i = 0; i < s->cfg.mtu; i++)
        s->scratch[i] = (uint8_t)(i * 131u);
    for (uint32_t i = 0; i < sim->nhosts; i++) {
        struct shost *h = &s->hosts[i];
        struct ub__engine_cfg ec = {
            .seed = ub__mix64(sim->seed ^ (0x656e67ULL << 32) ^ i),
            /* Virtual payload: buffers only hold headers (the engine's minimum datagram size). */
            .mtu = s->cfg.virtual_payload ? 256 : s->cfg.mtu,
            .num_paths = s->cfg.paths,
            .pool_bufs = s->cfg.pool_bufs,
            .txq_cap = 16,
            .pds =
                {
                    .window = s->cfg.window,
                    .mp_range = 1024,
                    .rto_init_ns = s->cfg.rto_min_ns,
                    .rto_min_ns = s->cfg.rto_min_ns,
                    .ack_delay_ns = s->cfg.ack_delay_ns,
                    /*
                     * Spraying over paths with different queues reorders by up to a window;
                     * trimming reports real losses at once, so only a window's worth of later
                     * acknowledgements declares a packet lost.
                     */
                    .ooo_threshold = s->cfg.window,
                    .num_paths = s->cfg.paths,
                    .mtu = s->cfg.mtu,
                    .link_bps = sim->ports[i].rate,
                    .base_rtt_ns = s->cfg.base_rtt_ns,
                    .trimming = s->cfg.trimming,
                    /* Virtual payloads keep cc exact: PDS counts each packet's wire_len. */
                    .cc_algo = s->cfg.cc,
                    .lb_algo = s->cfg.lb,
                    .spray_burst = s->cfg.spray_burst,
                },
        };
        int rc = ub__engine_init(&h->eng, &ec);
        if (rc) {
            s->nhosts = i;
            destroy(s, sim);
            return rc;
        }
        s->nhosts = i + 1;
        h->s = s;
        h->id = i;
        h->dirty = UB_SIM_NONE;
        ub_sim_event_init(&h->timer, timer_fire);
        ub_sim_event_init(&h->retry, retry_fire);
        ub__pds_set_upcalls(h->eng.pds, &pds_up, h);
    }
    ub_sim_set_transport(sim, &softub_ops, s);
    if (out)
        *out = s;
    return 0;
}

const struct ub_sim_softub_stats *ub_sim_softub_stats(const struct ub_sim_softub *s)
{
    return &s->st;
}

struct ub__engine *ub_sim_softub_engine(struct ub_sim_softub *s, uint32_t host)
{
    return host < s->nhosts ? &s->hosts[host].eng : NULL;
}

void ub_sim_softub_print(const struct ub_sim_softub *s, FILE *f)
{
    struct ub__pds_stats t;
    memset(&t, 0, sizeof(t));
    for (uint32_t i = 0; i < s->nhosts; i++) {
        const struct ub__pds_stats *p = ub__pds_stats(s->hosts[i].eng.pds);
        t.tx_pkts += p->tx_pkts;
        t.retx_pkts += p->retx_pkts;
        t.retx_rto += p->retx_rto;
        t.retx_fast += p->retx_fast;
        t.retx_nack += p->retx_nack;
        t.rx_pkts += p->rx_pkts;
        t.rx_dup += p->rx_dup;
        t.acks_tx += p->acks_tx;
        t.nacks_tx += p->nacks_tx;
        t.nacks_by_code[UB_PDS_NACK_TRIMMED & 31] += p->nacks_by_code[UB_PDS_NACK_TRIMMED & 31];
        t.rto_fired += p->rto_fired;
        t.pdc_failed += p->pdc_failed;
    }
    fprintf(f,
            "softub pkts %" PRIu64 " acked %" PRIu64 " failed %" PRIu64 " trim_nacks_rx %" PRIu64
            " blocked %" PRIu64 " copies %" PRIu64 " pool %u low %" PRIu64 " cc %s\n",
            s->st.pkts_queued, s->st.pkts_acked, s->st.pkts_failed,
            t.nacks_by_code[UB_PDS_NACK_TRIMMED & 31], s->st.send_blocked, s->st.copies,
            s->cfg.pool_bufs, s->st.pool_low, s->cfg.cc ? s->cfg.cc : "nscc");
    fprintf(f,
            "pds tx %" PRIu64 " retx %" PRIu64 " (rto %" PRIu64 " fast %" PRIu64 " nack %" PRIu64
            ") rx %" PRIu64 " dup %" PRIu64 " acks %" PRIu64 " nacks %" PRIu64 " rto_fired %" PRIu64
            " pdc_failed %" PRIu64 "\n",
            t.tx_pkts, t.retx_pkts, t.retx_rto, t.retx_fast, t.retx_nack, t.rx_pkts, t.rx_dup,
            t.acks_tx, t.nacks_tx, t.rto_fired, t.pdc_failed);
}
