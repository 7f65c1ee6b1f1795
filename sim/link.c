/*
 * Links: a port serializes one packet at a time at its rate (exact integer
 * picoseconds), then the packet rides the wire for the propagation delay.
 * Arrivals on a wire are in departure order, so a wire is a FIFO with one
 * event for its head, not one event per packet.
 */
#include "sim/link.h"
#include "sim/sim.h"

#define BITS_PS 8000000000000ULL /* 8 bits x 1e12 ps per second */

uint64_t ub_sim_port_ser(const struct ub_sim_port *port, uint64_t bytes)
{
    if (port->ps_per_byte)
        return bytes * port->ps_per_byte;
    return (bytes * BITS_PS + port->rate - 1) / port->rate;
}

void ub_sim_port_set_rate(struct ub_sim_port *port, uint64_t rate)
{
    port->rate = rate ? rate : 1;
    port->ps_per_byte = BITS_PS % port->rate == 0 ? BITS_PS / port->rate : 0;
}

static void transmit(struct ub_sim *sim, struct ub_sim_port *port, struct ub_sim_pkt *p)
{
    ub_sim_fc_spend(sim, port, p);
    uint64_t end = ub_sim_now(sim) + ub_sim_port_ser(port, p->size);
    port->busy_until = end;
    port->st.tx_bytes += p->size;
    if (port->loss_ppm && ub__rng_chance_ppm(&port->rng, port->loss_ppm))
        p->flags |= UB_SIM_PF_CORRUPT;
    p->t = end + port->delay;
    ub_sim_pktq_push(&port->wire, p);
    if (port->wire.n == 1)
        ub_sim_at(sim, &port->rx_ev, p->t);
}

void ub_sim_port_start(struct ub_sim *sim, struct ub_sim_port *port)
{
    if (!port->up)
        return;
    if (port->busy_until > ub_sim_now(sim)) {
        if (!port->tx_ev.armed)
            ub_sim_at(sim, &port->tx_ev, port->busy_until);
        return;
    }
    struct ub_sim_pkt *p;
    if (port->nic) {
        bool fc = sim->qcfg.fc != UB_SIM_FC_NONE;
        /* Lossless: a packet the NIC may not send yet waits in its (otherwise unused) queue. */
        if (fc && port->q.head) {
            if (!ub_sim_fc_can_send(sim, port, port->q.head))
                return;
            p = ub_sim_pktq_pop(&port->q);
        } else {
            p = sim->tp ? sim->tp->pull(sim->tp_ctx, sim, port->node) : NULL;
            if (!p)
                return;
            sim->ctr.injected++;
            port->st.enq++;
            if (fc && !ub_sim_fc_can_send(sim, port, p)) {
                ub_sim_pktq_push(&port->q, p);
                return;
            }
        }
        port->st.deq++;
    } else {
        p = ub_sim_port_dequeue(sim, port);
        if (!p)
            return;
    }
    transmit(sim, port, p);
    /* A NIC asks its transport again when free; a switch port only if a packet waits. */
    if (port->nic || port->q.n || port->hq.n)
        ub_sim_at(sim, &port->tx_ev, port->busy_until);
}

static void tx_done(struct ub_sim *sim, struct ub_sim_event *ev)
{
    ub_sim_port_start(sim, UB_SIM_CONTAINER_OF(ev, struct ub_sim_port, tx_ev));
}

static void rx_arrive(struct ub_sim *sim, struct ub_sim_event *ev)
{
    struct ub_sim_port *port = UB_SIM_CONTAINER_OF(ev, struct ub_sim_port, rx_ev);
    struct ub_sim_pkt *p = ub_sim_pktq_pop(&port->wire);
    if (port->wire.head)
        ub_sim_at(sim, &port->rx_ev, port->wire.head->t);
    if (p->flags & UB_SIM_PF_CORRUPT) {
        /* The far end's FCS check fails. */
        port->st.corrupt++;
        if (port->llr_delay) {
            /* Link-level retry: the far end asks again, the frame goes out ahead of the queue. */
            p->flags &= (uint8_t)~UB_SIM_PF_CORRUPT;
            p->t = ub_sim_now(sim) + port->llr_delay;
            ub_sim_pktq_push(&port->llrq, p);
            if (port->llrq.n == 1)
                ub_sim_at(sim, &port->llr_ev, p->t);
            return;
        }
        sim->ctr.corrupt_drops++;
        ub_sim_pkt_free(sim, p);
        return;
    }
    if (port->peer < sim->nhosts) {
        ub_sim_host_input(sim, port->peer, p);
    } else {
        if (sim->qcfg.fc != UB_SIM_FC_NONE)
            ub_sim_fc_arrive(sim, &sim->ports[port->rev], p);
        ub_sim_switch_input(sim, port->peer, p);
    }
}

static void llr_fire(struct ub_sim *sim, struct ub_sim_event *ev)
{
    struct ub_sim_port *port = UB_SIM_CONTAINER_OF(ev, struct ub_sim_port, llr_ev);
    struct ub_sim_pkt *p = ub_sim_pktq_pop(&port->llrq);
    if (port->llrq.head)
        ub_sim_at(sim, &port->llr_ev, port->llrq.head->t);
    port->st.llr_retries++;
    sim->ctr.llr_retries++;
    /* To the front of the priority queue: the replay goes before anything new. */
    p->next = port->hq.head;
    port->hq.head = p;
    if (!port->hq.tail)
        port->hq.tail = p;
    port->hq.n++;
    port->hbytes += p->size;
    port->st.enq++;
    ub_sim_port_start(sim, port);
}

void ub_sim_port_init(struct ub_sim *sim, struct ub_sim_port *port, uint32_t idx)
{
    ub_sim_event_init(&port->llr_ev, llr_fire);
    ub_sim_event_init(&port->tx_ev, tx_done);
    ub_sim_event_init(&port->rx_ev, rx_arrive);
    ub_sim_event_init(&port->fc_ev, ub_sim_fc_fire);
    port->up = true;
    ub__rng_fork(&port->rng, &sim->rng, 0x706f727400000000ULL | idx);
}

static uint64_t flush(struct ub_sim *sim, struct ub_sim_pktq *q)
{
    uint64_t n = 0;
    struct ub_sim_pkt *p;
    while ((p = ub_sim_pktq_pop(q)) != NULL) {
        ub_sim_fc_release(sim, p);
        ub_sim_pkt_free(sim, p);
        n++;
    }
    return n;
}

void ub_sim_port_set_up(struct ub_sim *sim, struct ub_sim_port *port, bool up)
{
    if (port->up == up)
        return;
    port->up = up;
    if (up) {
        ub_sim_port_start(sim, port);
        return;
    }
    /* A cut link loses what it holds: the queue, the frame being sent, the bits in flight. */
    uint64_t n = flush(sim, &port->q) + flush(sim, &port->hq) + flush(sim, &port->wire) +
                 flush(sim, &port->llrq);
    ub_sim_cancel(&port->llr_ev);
    port->qbytes = port->hbytes = 0;
    port->busy_until = 0;
    ub_sim_cancel(&port->tx_ev);
    ub_sim_cancel(&port->rx_ev);
    port->st.fail_drops += n;
    sim->ctr.fail_drops += n;
}
