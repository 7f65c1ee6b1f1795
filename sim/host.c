/*
 * Hosts, flows and scheduled failures. A host is a NIC port plus a
 * transport (struct ub_sim_transport_ops). Flow starts and failures are kept
 * sorted and walked by one event each, so a million flows cost no more
 * events than their starts.
 */
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "core/grow.h"
#include "sim/link.h"
#include "sim/sim.h"

void ub_sim_host_kick(struct ub_sim *sim, uint32_t host)
{
    ub_sim_port_start(sim, &sim->ports[host]);
}

void ub_sim_host_input(struct ub_sim *sim, uint32_t host, struct ub_sim_pkt *p)
{
    sim->ctr.delivered++;
    if (p->flags & UB_SIM_PF_TRIMMED)
        sim->ctr.delivered_trimmed++;
    if (!sim->tp) {
        ub_sim_pkt_free(sim, p);
        return;
    }
    sim->tp->rx(sim->tp_ctx, sim, host, p);
}

void ub_sim_flow_done(struct ub_sim *sim, uint32_t flow)
{
    struct ub_sim_flow *f = &sim->flows[flow];
    if (f->end != UB_SIM_NEVER)
        return;
    f->end = ub_sim_now(sim);
    sim->flows_done++;
    /* Flows waiting for this one start now (or at their own start time, if later). */
    for (uint32_t w = sim->dep_head ? sim->dep_head[flow] : UB_SIM_NONE; w != UB_SIM_NONE;
         w = sim->flows[w].dep_next) {
        struct ub_sim_flow *g = &sim->flows[w];
        if (g->start < f->end)
            g->start = f->end;
        /* Into the pending starts, in (start, arrival) order. */
        uint32_t j = sim->nstart++;
        while (j > sim->next_start && sim->flows[sim->start_order[j - 1]].start > g->start) {
            sim->start_order[j] = sim->start_order[j - 1];
            j--;
        }
        sim->start_order[j] = w;
    }
    if (sim->start_ev.fn && sim->next_start < sim->nstart) {
        uint64_t t = sim->flows[sim->start_order[sim->next_start]].start;
        if (!sim->start_ev.armed || t < sim->start_ev.time)
            ub_sim_at(sim, &sim->start_ev, t);
    }
    if (sim->stop_when_done && sim->flows_done == sim->nflows)
        sim->stop = true;
}

int ub_sim_add_flow(struct ub_sim *sim, uint32_t id, uint32_t src, uint32_t dst, uint64_t size,
                    uint64_t start)
{
    if (src >= sim->nhosts || dst >= sim->nhosts || src == dst || sim->start_order)
        return UB_EINVAL;
    if (sim->nflows == sim->cap_flows) {
        struct ub_sim_flow *f = ub__grow(sim->flows, &sim->cap_flows, sizeof(*f), 64);
        if (!f)
            return UB_ENOMEM;
        sim->flows = f;
    }
    uint32_t idx = sim->nflows++;
    struct ub_sim_flow *f = &sim->flows[idx];
    memset(f, 0, sizeof(*f));
    f->id = id ? id : idx + 1;
    f->src = src;
    f->dst = dst;
    f->size = size;
    f->start = start;
    f->end = UB_SIM_NEVER;
    f->dep = f->dep_next = UB_SIM_NONE;
    return (int)idx;
}

int ub_sim_add_fail(struct ub_sim *sim, const struct ub_sim_fail *f)
{
    if (f->a >= sim->nnodes || (f->kind != UB_SIM_FAIL_SWITCH_DOWN && f->b >= sim->nnodes))
        return UB_EINVAL;
    struct ub_sim_fail *a = realloc(sim->fails, (sim->nfails + 1) * sizeof(*a));
    if (!a)
        return UB_ENOMEM;
    sim->fails = a;
    sim->fails[sim->nfails++] = *f;
    return 0;
}

static void start_due(struct ub_sim *sim, struct ub_sim_event *ev)
{
    uint64_t now = ub_sim_now(sim);
    while (sim->next_start < sim->nstart) {
        uint32_t f = sim->start_order[sim->next_start];
        if (sim->flows[f].start > now) {
            ub_sim_at(sim, ev, sim->flows[f].start);
            return;
        }
        sim->next_start++;
        if (sim->tp)
            sim->tp->start_flow(sim->tp_ctx, sim, f);
    }
}

static void each_link(struct ub_sim *sim, const struct ub_sim_fail *f, uint32_t a, uint32_t b)
{
    for (int dir = 0; dir < 2; dir++) {
        uint32_t from = dir ? b : a, to = dir ? a : b;
        const struct ub_sim_node *nd = &sim->nodes[from];
        for (uint32_t i = 0; i < nd->nports; i++) {
            struct ub_sim_port *port = &sim->ports[nd->port_base + i];
            if (port->peer != to)
                continue;
            if (f->kind == UB_SIM_FAIL_LINK_RATE)
                ub_sim_port_set_rate(port, f->rate);
            else
                ub_sim_port_set_up(sim, port, f->kind == UB_SIM_FAIL_LINK_UP);
        }
    }
}

static void fail_due(struct ub_sim *sim, struct ub_sim_event *ev)
{
    uint64_t now = ub_sim_now(sim);
    while (sim->next_fail < sim->nfails) {
        const struct ub_sim_fail *f = &sim->fails[sim->next_fail];
        if (f->time > now) {
            ub_sim_at(sim, ev, f->time);
            return;
        }
        sim->next_fail++;
        if (f->kind == UB_SIM_FAIL_SWITCH_DOWN) {
            /* A dead switch: every link touching it goes down. */
            const struct ub_sim_node *nd = &sim->nodes[f->a];
            struct ub_sim_fail down = *f;
            down.kind = UB_SIM_FAIL_LINK_DOWN;
            for (uint32_t i = 0; i < nd->nports; i++)
                each_link(sim, &down, f->a, sim->ports[nd->port_base + i].peer);
        } else {
            each_link(sim, f, f->a, f->b);
        }
    }
}

/* qsort has no context argument in C11: sort (start, index) pairs instead. */
struct start_key {
    uint64_t start;
    uint32_t idx;
};

static int cmp_key(const void *a, const void *b)
{
    const struct start_key *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->idx < y->idx ? -1 : (x->idx > y->idx);
}

static int cmp_fail(const void *a, const void *b)
{
    const struct ub_sim_fail *x = a, *y = b;
    return x->time < y->time ? -1 : (x->time > y->time);
}

int ub_sim_start(struct ub_sim *sim)
{
    if (sim->start_order)
        return UB_EINVAL;
    struct start_key *k = malloc((sim->nflows ? sim->nflows : 1) * sizeof(*k));
    sim->start_order = malloc((sim->nflows ? sim->nflows : 1) * sizeof(uint32_t));
    if (!k || !sim->start_order) {
        free(k);
        return UB_ENOMEM;
    }
    sim->dep_head = malloc((sim->nflows ? sim->nflows : 1) * sizeof(uint32_t));
    if (!sim->dep_head) {
        free(k);
        return UB_ENOMEM;
    }
    uint32_t nk = 0;
    for (uint32_t i = 0; i < sim->nflows; i++)
        sim->dep_head[i] = UB_SIM_NONE;
    /* Dependent flows are listed under the flow they wait for, newest first: walk backwards. */
    for (uint32_t i = sim->nflows; i-- > 0;) {
        struct ub_sim_flow *f = &sim->flows[i];
        if (f->dep != UB_SIM_NONE && f->dep < sim->nflows && f->dep != i) {
            f->dep_next = sim->dep_head[f->dep];
            sim->dep_head[f->dep] = i;
        }
    }
    for (uint32_t i = 0; i < sim->nflows; i++)
        if (sim->flows[i].dep == UB_SIM_NONE || sim->flows[i].dep >= sim->nflows ||
            sim->flows[i].dep == i)
            k[nk++] = (struct start_key){sim->flows[i].start, i};
    qsort(k, nk, sizeof(*k), cmp_key);
    for (uint32_t i = 0; i < nk; i++)
        sim->start_order[i] = k[i].idx;
    sim->nstart = nk;
    free(k);
    /* Stable order for equal times: insertion sort keeps the list order of the user. */
    for (uint32_t i = 1; i < sim->nfails; i++) {
        struct ub_sim_fail f = sim->fails[i];
        uint32_t j = i;
        while (j > 0 && cmp_fail(&sim->fails[j - 1], &f) > 0) {
            sim->fails[j] = sim->fails[j - 1];
            j--;
        }
        sim->fails[j] = f;
    }
    ub_sim_event_init(&sim->fail_ev, fail_due);
    ub_sim_event_init(&sim->start_ev, start_due);
    if (sim->nfails)
        ub_sim_at(sim, &sim->fail_ev, sim->fails[0].time);
    if (sim->nstart)
        ub_sim_at(sim, &sim->start_ev, sim->flows[sim->start_order[0]].start);
    return 0;
}
