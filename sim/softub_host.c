#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "core/clock.h"
#include "engine/engine.h"
#include "sim/softub_host.h"

struct shost {
    struct ub__engine eng;
    struct ub_sim_event timer; /* the engine's next deadline */
    struct ub_sim_event retry; /* the pool ran dry: try again shortly */
    struct ub_sim_softub *s;
    uint32_t id;
    uint32_t active; /* circular list of flows with bytes left to send */
};

struct sflow {
    uint64_t sent, rcvd;
    uint32_t anext, aprev;
    bool active;
};

struct ub_sim_softub {
    struct ub_sim_softub_cfg cfg;
    struct ub_sim_softub_stats st;
    struct ub_sim *sim;
    struct shost *hosts;
    uint32_t nhosts;
    struct sflow *fl;
    uint32_t nfl;
    uint8_t *scratch; /* payload bytes for generated datagrams */
};

static inline uint64_t ns_of(const struct ub_sim *sim)
{
    return ub_sim_now(sim) / UB_SIM_PS_PER_NS;
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

static void timer_fire(struct ub_sim *sim, struct ub_sim_event *ev)
{
    struct shost *h = UB_SIM_CONTAINER_OF(ev, struct shost, timer);
    ub__engine_expire(&h->eng, ns_of(sim));
    rearm(sim, h);
    ub_sim_host_kick(sim, h->id);
}

static void retry_fire(struct ub_sim *sim, struct ub_sim_event *ev)
{
    ub_sim_host_kick(sim, UB_SIM_CONTAINER_OF(ev, struct shost, retry)->id);
}

static void list_add(struct ub_sim_softub *s, struct shost *h, uint32_t f)
{
    struct sflow *x = &s->fl[f];
    if (x->active)
        return;
    x->active = true;
    if (h->active == UB_SIM_NONE) {
        x->anext = x->aprev = f;
        h->active = f;
        return;
    }
    struct sflow *cur = &s->fl[h->active];
    x->anext = h->active;
    x->aprev = cur->aprev;
    s->fl[cur->aprev].anext = f;
    cur->aprev = f;
}

static void list_del(struct ub_sim_softub *s, struct shost *h, uint32_t f)
{
    struct sflow *x = &s->fl[f];
    if (!x->active)
        return;
    x->active = false;
    if (x->anext == f) {
        h->active = UB_SIM_NONE;
        return;
    }
    s->fl[x->aprev].anext = x->anext;
    s->fl[x->anext].aprev = x->aprev;
    if (h->active == f)
        h->active = x->anext;
}

/* The workload seam: turns the next slice of a flow into a datagram on the engine's queue. */
static void fill(struct ub_sim_softub *s, struct ub_sim *sim, struct shost *h)
{
    while (h->active != UB_SIM_NONE) {
        uint32_t f = h->active;
        struct sflow *x = &s->fl[f];
        const struct ub_sim_flow *sf = &sim->flows[f];
        uint64_t left = sf->size - x->sent;
        uint32_t max = ub__engine_dgram_max(&h->eng);
        uint32_t len = left < max ? (uint32_t)left : max;
        struct ub__addr dst;
        ub__addr_loop(&dst, (uint16_t)sf->dst);
        uint16_t path = (uint16_t)((x->sent / max) % s->cfg.paths);
        int rc =
            ub__engine_dgram_send(&h->eng, &dst, path, f, x->sent, s->scratch, len, ns_of(sim));
        if (rc == UB_ENOBUFS || rc == UB_EFULL) {
            /*
             * The sender's buffers are all in the fabric (a datagram's bytes
             * travel by reference and go home when the receiver consumes
             * them): poll again one packet time later.
             */
            s->st.send_blocked++;
            ub_sim_at(sim, &h->retry,
                      ub_sim_now(sim) + ub_sim_port_ser(&sim->ports[h->id], s->cfg.mtu));
            return;
        }
        if (rc) {
            s->st.send_errors++;
            list_del(s, h, f);
            continue;
        }
        s->st.dgrams_sent++;
        x->sent += len;
        h->active = x->anext;
        if (x->sent >= sf->size)
            list_del(s, h, f);
        return;
    }
}

static struct ub_sim_pkt *pull(void *ctx, struct ub_sim *sim, uint32_t host)
{
    struct ub_sim_softub *s = ctx;
    struct shost *h = &s->hosts[host];
    for (;;) {
        if (!ub__engine_pending(&h->eng))
            fill(s, sim, h);
        struct ub__pkt *b;
        if (ub__engine_output(&h->eng, &b, 1, ns_of(sim)) != 1)
            return NULL;
        if (b->addr.family != UB_AF_LOOP || b->addr.port >= sim->nhosts) {
            ub__pkt_free(b); /* nowhere in this fabric */
            continue;
        }
        struct ub_sim_pkt *p = ub_sim_pkt_alloc(sim);
        p->buf = b;
        p->src = host;
        p->dst = b->addr.port;
        p->flow = UB_SIM_NONE;
        p->size = b->len;
        p->ev = b->path;
        p->ecn = b->ecn;
        return p;
    }
}

static void rx(void *ctx, struct ub_sim *sim, uint32_t host, struct ub_sim_pkt *p)
{
    struct ub_sim_softub *s = ctx;
    struct shost *h = &s->hosts[host];
    struct ub__pkt *b = p->buf;
    bool trimmed = p->flags & UB_SIM_PF_TRIMMED;
    p->buf = NULL;
    if (!b) {
        ub_sim_pkt_free(sim, p);
        return;
    }
    struct ub__pkt *in = b;
    if (b->refcnt > 1 || trimmed) {
        /* The sender still holds these bytes (or only a header survived): the receiver gets a copy.
         */
        in = ub__pkt_alloc(&h->eng.pool);
        if (in) {
            uint32_t len = trimmed && b->len > UB_SIM_TRIM_SIZE ? UB_SIM_TRIM_SIZE : b->len;
            if (len > ub__pkt_tailroom(in))
                len = ub__pkt_tailroom(in);
            memcpy(ub__pkt_put(in, len), b->data, len);
            s->st.copies++;
        }
        ub__pkt_free(b);
        if (!in) {
            ub_sim_pkt_free(sim, p);
            return;
        }
    }
    ub__addr_loop(&in->addr, (uint16_t)p->src);
    in->path = p->ev;
    in->ecn = p->ecn;
    in->flags = trimmed ? UB_SIM_TRIMMED : 0;
    in->ts = ns_of(sim);
    if (trimmed)
        s->st.trimmed_in++;
    ub_sim_pkt_free(sim, p);
    ub__engine_input(&h->eng, &in, 1, ns_of(sim));
    rearm(sim, h);
    ub_sim_host_kick(sim, host);
}

static void on_dgram(void *arg, const struct ub__dgram_in *d, uint64_t now)
{
    (void)now;
    struct shost *h = arg;
    struct ub_sim_softub *s = h->s;
    s->st.dgrams_rcvd++;
    if (d->initiator >= s->nfl)
        return;
    struct sflow *x = &s->fl[d->initiator];
    const struct ub_sim_flow *sf = &s->sim->flows[d->initiator];
    if (sf->dst != h->id)
        return;
    x->rcvd += d->len;
    if (x->rcvd >= sf->size)
        ub_sim_flow_done(s->sim, d->initiator);
}

static const struct ub__engine_upcalls upcalls = {.dgram = on_dgram};

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
    uint32_t max = ub__engine_dgram_max(&h->eng);
    sf->ideal = ub_sim_ideal_fct(sim, sf->src, sf->dst, sf->size, s->cfg.mtu, s->cfg.mtu - max, 0);
    if (sf->size == 0) {
        ub_sim_flow_done(sim, f);
        return;
    }
    list_add(s, h, f);
    ub_sim_host_kick(sim, sf->src);
}

static void destroy(void *ctx, struct ub_sim *sim)
{
    (void)sim;
    struct ub_sim_softub *s = ctx;
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
    if (!s->cfg.pool_bufs)
        s->cfg.pool_bufs = 64;
    if (!s->cfg.paths)
        s->cfg.paths = 1;
    s->sim = sim;
    s->hosts = calloc(sim->nhosts, sizeof(*s->hosts));
    s->scratch = calloc(1, s->cfg.mtu);
    if (!s->hosts || !s->scratch) {
        free(s->hosts);
        free(s->scratch);
        free(s);
        return UB_ENOMEM;
    }
    for (uint32_t i = 0; i < sim->nhosts; i++) {
        struct shost *h = &s->hosts[i];
        struct ub__engine_cfg ec = {
            .seed = ub__mix64(sim->seed ^ (0x656e67ULL << 32) ^ i),
            .mtu = s->cfg.mtu,
            .num_paths = s->cfg.paths,
            .pool_bufs = s->cfg.pool_bufs,
            .txq_cap = 16,
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
        h->active = UB_SIM_NONE;
        ub_sim_event_init(&h->timer, timer_fire);
        ub_sim_event_init(&h->retry, retry_fire);
        ub__engine_set_upcalls(&h->eng, &upcalls, h);
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
