/*
 * Lossless link-level flow control and the deadlock watchdog.
 *
 * A switch accounts every packet to the link and class it came in on
 * (port->ibytes at the switch's port facing the upstream node) from arrival
 * until it leaves an egress queue. PFC: above xoff bytes the switch sends
 * PAUSE for the class upstream, at xon or below RESUME; the upstream port
 * stops serializing that class while paused (the frame being sent finishes).
 * Bytes still arriving after PAUSE must fit the headroom (counted if not;
 * nothing is dropped). CBFC: the upstream port starts with `credits` bytes
 * per class, spends a packet's size to send it and gets it back when the
 * packet leaves the downstream switch. Flow-control messages travel on the
 * reverse link after its propagation delay (PAUSE/RESUME also wait one
 * 64-byte serialization) and take no data bandwidth. Hosts sink everything.
 */
#include "sim/link.h"
#include "sim/sim.h"

enum { FC_PAUSE = 1, FC_RESUME, FC_CREDIT };

static void fc_send(struct ub_sim *sim, struct ub_sim_port *x, uint32_t kind, uint32_t cls,
                    uint64_t bytes)
{
    struct ub_sim_pkt *m = ub_sim_pkt_alloc(sim);
    m->flow = kind;
    m->seq = cls;
    m->size = (uint32_t)bytes;
    m->t = ub_sim_now(sim) + x->delay + (kind == FC_CREDIT ? 0 : ub_sim_port_ser(x, 64));
    /* Credits returned at the same instant travel as one message. */
    struct ub_sim_pkt *tail = x->fcq.tail;
    if (kind == FC_CREDIT && tail && tail->flow == FC_CREDIT && tail->seq == cls &&
        tail->t == m->t) {
        tail->size += m->size;
        ub_sim_pkt_free(sim, m);
        return;
    }
    ub_sim_pktq_push(&x->fcq, m);
    if (x->fcq.n == 1)
        ub_sim_at(sim, &x->fc_ev, m->t);
}

void ub_sim_fc_fire(struct ub_sim *sim, struct ub_sim_event *ev)
{
    struct ub_sim_port *x = UB_SIM_CONTAINER_OF(ev, struct ub_sim_port, fc_ev);
    struct ub_sim_pkt *m = ub_sim_pktq_pop(&x->fcq);
    if (x->fcq.head)
        ub_sim_at(sim, &x->fc_ev, x->fcq.head->t);
    struct ub_sim_port *u = &sim->ports[x->rev];
    uint32_t cls = m->seq;
    switch (m->flow) {
    case FC_PAUSE:
        u->paused[cls] = true;
        u->st.pauses++;
        break;
    case FC_RESUME:
        u->paused[cls] = false;
        break;
    default:
        u->credits[cls] += m->size;
        break;
    }
    ub_sim_pkt_free(sim, m);
    if (m->flow != FC_PAUSE)
        ub_sim_port_start(sim, u);
}

void ub_sim_fc_arrive(struct ub_sim *sim, struct ub_sim_port *x, struct ub_sim_pkt *p)
{
    uint32_t cls = ub_sim_pkt_class(sim, p);
    p->in_port = (uint32_t)(x - sim->ports) + 1;
    x->ibytes[cls] += p->size;
    if (sim->qcfg.fc != UB_SIM_FC_PFC)
        return;
    if (x->ibytes[cls] > sim->qcfg.xoff + sim->qcfg.headroom)
        sim->ctr.headroom_overflow++;
    if (x->ibytes[cls] > sim->qcfg.xoff && !x->pause_sent[cls]) {
        x->pause_sent[cls] = true;
        sim->ctr.pauses++;
        fc_send(sim, x, FC_PAUSE, cls, 0);
    }
}

void ub_sim_fc_release(struct ub_sim *sim, struct ub_sim_pkt *p)
{
    if (!p->in_port)
        return;
    struct ub_sim_port *x = &sim->ports[p->in_port - 1];
    uint32_t cls = ub_sim_pkt_class(sim, p);
    p->in_port = 0;
    x->ibytes[cls] -= p->size;
    if (sim->qcfg.fc == UB_SIM_FC_CBFC) {
        fc_send(sim, x, FC_CREDIT, cls, p->size);
    } else if (x->pause_sent[cls] && x->ibytes[cls] <= sim->qcfg.xon) {
        x->pause_sent[cls] = false;
        sim->ctr.resumes++;
        fc_send(sim, x, FC_RESUME, cls, 0);
    }
}

bool ub_sim_fc_can_send(const struct ub_sim *sim, const struct ub_sim_port *port,
                        const struct ub_sim_pkt *p)
{
    uint32_t cls = ub_sim_pkt_class(sim, p);
    if (port->paused[cls])
        return false;
    return sim->qcfg.fc != UB_SIM_FC_CBFC || port->peer < sim->nhosts ||
           port->credits[cls] >= (int64_t)p->size;
}

void ub_sim_fc_spend(struct ub_sim *sim, struct ub_sim_port *port, const struct ub_sim_pkt *p)
{
    if (sim->qcfg.fc == UB_SIM_FC_CBFC && port->peer >= sim->nhosts)
        port->credits[ub_sim_pkt_class(sim, p)] -= p->size;
}

/* ---- deadlock watchdog ------------------------------------------------------------------ */

static void wd_fire(struct ub_sim *sim, struct ub_sim_event *ev)
{
    uint32_t stalled = 0;
    for (uint32_t i = 0; i < sim->nports; i++) {
        struct ub_sim_port *port = &sim->ports[i];
        bool waiting = port->up && (port->q.n || port->hq.n);
        if (waiting && port->wd_wait && port->st.deq == port->wd_deq)
            stalled++;
        port->wd_wait = waiting;
        port->wd_deq = port->st.deq;
    }
    if (stalled) {
        /* Packets waited a whole interval at these ports and none left: a cycle of pauses. */
        if (sim->deadlock_at == UB_SIM_NEVER)
            sim->deadlock_at = ub_sim_now(sim);
        sim->deadlock_ports = stalled;
        if (sim->stop_on_deadlock) {
            sim->stop = true;
            return;
        }
    }
    if (sim->flows_done < sim->nflows)
        ub_sim_at(sim, ev, ub_sim_now(sim) + sim->deadlock_after);
}

void ub_sim_watchdog(struct ub_sim *sim, uint64_t after, bool stop)
{
    sim->deadlock_after = after;
    sim->stop_on_deadlock = stop;
    sim->deadlock_at = UB_SIM_NEVER;
    ub_sim_event_init(&sim->wd_ev, wd_fire);
    if (after)
        ub_sim_at(sim, &sim->wd_ev, ub_sim_now(sim) + after);
}
