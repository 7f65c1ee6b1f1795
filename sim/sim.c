/* The simulation world: set-up, the descriptor pool, the fabric builder, ideal FCTs; the
 * text formats' line reader. */
#define _POSIX_C_SOURCE 200809L /* getline */
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "core/grow.h"
#include "sim/link.h"
#include "sim/sim.h"

#define SLAB_PKTS 4096u

int ub_sim_init(struct ub_sim *sim, uint64_t seed)
{
    memset(sim, 0, sizeof(*sim));
    sim->seed = seed;
    sim->deadlock_at = UB_SIM_NEVER;
    ub__rng_seed(&sim->rng, seed);
    return ub_sim_evq_init(&sim->evq, 1024);
}

void ub_sim_pool_fini(struct ub_sim_pool *pool)
{
    for (uint32_t i = 0; i < pool->nslabs; i++)
        free(pool->slabs[i]);
    free(pool->slabs);
    memset(pool, 0, sizeof(*pool));
}

static void free_queue(struct ub_sim *sim, struct ub_sim_pktq *q)
{
    struct ub_sim_pkt *p;
    while ((p = ub_sim_pktq_pop(q)) != NULL)
        ub_sim_pkt_free(sim, p);
}

void ub_sim_fini(struct ub_sim *sim)
{
    /* Packets still in the fabric may hold engine buffers: return them before the transport goes.
     */
    for (uint32_t i = 0; i < sim->nports; i++) {
        struct ub_sim_port *port = &sim->ports[i];
        free_queue(sim, &port->q);
        free_queue(sim, &port->hq);
        free_queue(sim, &port->wire);
        free_queue(sim, &port->fcq);
        free_queue(sim, &port->llrq);
    }
    if (sim->tp && sim->tp->destroy)
        sim->tp->destroy(sim->tp_ctx, sim);
    ub_sim_routes_fini(&sim->rt);
    free(sim->ports);
    free(sim->nodes);
    free(sim->flows);
    free(sim->start_order);
    free(sim->dep_head);
    free(sim->fails);
    ub_sim_pool_fini(&sim->pool);
    ub_sim_evq_fini(&sim->evq);
    memset(sim, 0, sizeof(*sim));
}

_Static_assert(sizeof(struct ub_sim_pkt) == 56, "packet descriptors stay 56 bytes");

struct ub_sim_pkt *ub_sim_pkt_alloc(struct ub_sim *sim)
{
    struct ub_sim_pool *pool = &sim->pool;
    if (!pool->free) {
        if (pool->nslabs == pool->cap_slabs) {
            void **s = ub__grow(pool->slabs, &pool->cap_slabs, sizeof(*s), 16);
            if (!s)
                abort();
            pool->slabs = s;
        }
        struct ub_sim_pkt *slab = malloc(SLAB_PKTS * sizeof(*slab));
        if (!slab)
            abort();
        pool->slabs[pool->nslabs++] = slab;
        for (uint32_t i = SLAB_PKTS; i-- > 0;) {
            slab[i].next = pool->free;
            pool->free = &slab[i];
        }
        pool->total += SLAB_PKTS;
    }
    struct ub_sim_pkt *p = pool->free;
    pool->free = p->next;
    pool->out++;
    memset(p, 0, sizeof(*p));
    return p;
}

void ub_sim_pkt_free(struct ub_sim *sim, struct ub_sim_pkt *p)
{
    if (p->buf) {
        ub__pkt_free(p->buf);
        p->buf = NULL;
    }
    p->next = sim->pool.free;
    sim->pool.free = p;
    sim->pool.out--;
}

int ub_sim_build(struct ub_sim *sim, uint32_t nhosts, uint32_t nswitches,
                 const struct ub_sim_link_spec *links, uint32_t nlinks, const struct ub_sim_qcfg *q)
{
    if (sim->nodes || nhosts == 0)
        return UB_EINVAL;
    if ((uint64_t)nhosts + nswitches > UB_SIM_MAX_NODES || nlinks > UB_SIM_MAX_LINKS)
        return UB_ERANGE;
    uint32_t N = nhosts + nswitches;
    sim->nodes = calloc(N, sizeof(*sim->nodes));
    uint32_t *next = calloc(N, sizeof(*next));
    if (!sim->nodes || !next) {
        free(next);
        return UB_ENOMEM;
    }
    sim->nhosts = nhosts;
    sim->nswitches = nswitches;
    sim->nnodes = N;
    for (uint32_t i = 0; i < nlinks; i++) {
        if (links[i].a >= N || links[i].b >= N || links[i].a == links[i].b ||
            (links[i].a < nhosts && links[i].b < nhosts)) {
            free(next);
            return UB_EINVAL;
        }
        sim->nodes[links[i].a].nports++;
        sim->nodes[links[i].b].nports++;
    }
    uint32_t base = nhosts;
    for (uint32_t n = 0; n < N; n++) {
        if (n < nhosts) {
            if (sim->nodes[n].nports != 1) {
                free(next);
                return UB_EINVAL;
            }
            sim->nodes[n].port_base = n;
        } else {
            sim->nodes[n].port_base = base;
            base += sim->nodes[n].nports;
        }
        next[n] = sim->nodes[n].port_base;
    }
    sim->nports = base;
    sim->ports = calloc(base, sizeof(*sim->ports));
    if (!sim->ports) {
        free(next);
        return UB_ENOMEM;
    }
    for (uint32_t i = 0; i < nlinks; i++) {
        for (int dir = 0; dir < 2; dir++) {
            uint32_t from = dir ? links[i].b : links[i].a;
            uint32_t to = dir ? links[i].a : links[i].b;
            uint32_t idx = next[from]++;
            struct ub_sim_port *port = &sim->ports[idx];
            ub_sim_port_init(sim, port, idx);
            port->node = from;
            port->peer = to;
            port->delay = links[i].delay;
            ub_sim_port_set_rate(port, links[i].rate);
            port->nic = from < nhosts;
            port->rev = UB_SIM_NONE;
        }
    }
    free(next);
    /* Pair each port with its opposite direction: the port at its peer that leads back. */
    for (uint32_t i = 0; i < base; i++) {
        struct ub_sim_port *port = &sim->ports[i];
        if (port->rev != UB_SIM_NONE)
            continue;
        const struct ub_sim_node *nd = &sim->nodes[port->peer];
        for (uint32_t j = 0; j < nd->nports; j++) {
            struct ub_sim_port *r = &sim->ports[nd->port_base + j];
            if (r->peer == port->node && r->rev == UB_SIM_NONE) {
                port->rev = nd->port_base + j;
                r->rev = i;
                break;
            }
        }
    }
    ub_sim_set_queues(sim, q);
    return ub_sim_routes_build(sim);
}

void ub_sim_set_queues(struct ub_sim *sim, const struct ub_sim_qcfg *q)
{
    sim->qcfg = *q;
    if (sim->qcfg.fc != UB_SIM_FC_NONE) {
        /* Lossless: flow control bounds the queues; nothing is dropped or cut. */
        sim->qcfg.trim = false;
        sim->qcfg.limit = sim->qcfg.hlimit = UINT64_MAX / 4;
        for (uint32_t i = 0; i < sim->nports; i++)
            for (uint32_t c = 0; c < UB_SIM_NCLASS; c++)
                sim->ports[i].credits[c] = (int64_t)sim->qcfg.credits;
    }
    if (!sim->qcfg.hlimit)
        sim->qcfg.hlimit = sim->qcfg.limit;
    for (uint32_t i = sim->nhosts; i < sim->nports; i++) {
        struct ub_sim_port *port = &sim->ports[i];
        port->limit = sim->qcfg.limit;
        port->hlimit = sim->qcfg.hlimit;
        port->kmin = sim->qcfg.kmin;
        port->kmax = sim->qcfg.kmax;
        port->trim = sim->qcfg.trim;
        port->prio_ctrl = sim->qcfg.prio_ctrl;
        port->loss_ppm = sim->qcfg.loss_ppm;
        port->llr_delay = sim->qcfg.llr_delay;
        port->caqm = sim->qcfg.caqm;
        port->caqm_band.kmin = sim->qcfg.caqm_kmax ? sim->qcfg.caqm_kmin : sim->qcfg.kmin;
        port->caqm_band.kmax = sim->qcfg.caqm_kmax ? sim->qcfg.caqm_kmax : sim->qcfg.kmax;
    }
}

void ub_sim_set_transport(struct ub_sim *sim, const struct ub_sim_transport_ops *ops, void *ctx)
{
    sim->tp = ops;
    sim->tp_ctx = ctx;
}

uint64_t ub_sim_in_network(const struct ub_sim *sim)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < sim->nports; i++) {
        const struct ub_sim_port *p = &sim->ports[i];
        n += p->q.n + p->hq.n + p->wire.n + p->llrq.n;
    }
    return n;
}

/*
 * Store-and-forward over the path with every packet ready at the start: the
 * last byte reaches the far end once the slowest hop has sent everything,
 * plus the first (full) packet's way to that hop and the last packet's way
 * from it. The maximum over hops of that sum is exact for back-to-back
 * packets of one size followed by a shorter last one.
 */
uint64_t ub_sim_ideal_fct(const struct ub_sim *sim, uint32_t src, uint32_t dst, uint64_t size,
                          uint32_t mtu, uint32_t hdr, uint32_t ack_size)
{
    uint32_t path[64], back[64];
    uint32_t n = ub_sim_path(sim, src, dst, path, 64);
    if (!n || mtu <= hdr)
        return 0;
    uint64_t mss = mtu - hdr;
    uint64_t npkts = size ? (size + mss - 1) / mss : 1;
    uint64_t last = size - (npkts - 1) * mss + hdr;
    uint64_t total = size + npkts * hdr;
    uint64_t best = 0;
    for (uint32_t j = 0; j < n; j++) {
        uint64_t t = 0;
        for (uint32_t i = 0; i < n; i++) {
            const struct ub_sim_port *p = &sim->ports[path[i]];
            if (i < j)
                t += ub_sim_port_ser(p, npkts > 1 ? mtu : last) + p->delay;
            else if (i == j)
                t += ub_sim_port_ser(p, total) + p->delay;
            else
                t += ub_sim_port_ser(p, last) + p->delay;
        }
        if (t > best)
            best = t;
    }
    if (ack_size) {
        uint32_t m = ub_sim_path(sim, dst, src, back, 64);
        for (uint32_t i = 0; i < m; i++)
            best += ub_sim_port_ser(&sim->ports[back[i]], ack_size) + sim->ports[back[i]].delay;
    }
    return best;
}

int ub_sim_text_line(FILE *f, char **buf, size_t *cap)
{
    ssize_t len = getline(buf, cap, f);
    if (len < 0)
        return 0;
    return len > UB_SIM_TEXT_LINE_MAX || memchr(*buf, '\0', (size_t)len) ? -1 : 1;
}
