/*
 * Switch egress queues: drop-tail with a byte limit, ECN marking at dequeue
 * with a probability rising linearly from 0 at kmin to 1 at kmax bytes, and
 * packet trimming (a packet that does not fit is cut to a header that goes
 * into a strict-priority queue, so the receiver learns of the loss at once).
 */
#include "sim/link.h"
#include "sim/sim.h"
#include "wire/ext.h"

static void drop(struct ub_sim *sim, struct ub_sim_port *port, struct ub_sim_pkt *p)
{
    ub_sim_fc_release(sim, p);
    port->st.drops++;
    sim->ctr.drops++;
    ub_sim_pkt_free(sim, p);
}

void ub_sim_port_enqueue(struct ub_sim *sim, struct ub_sim_port *port, struct ub_sim_pkt *p)
{
    if (!port->up) {
        port->st.fail_drops++;
        sim->ctr.fail_drops++;
        ub_sim_fc_release(sim, p);
        ub_sim_pkt_free(sim, p);
        return;
    }
    if (!port->prio_ctrl || !(p->flags & (UB_SIM_PF_CTRL | UB_SIM_PF_TRIMMED))) {
        if (port->qbytes + p->size <= port->limit) {
            port->qbytes += p->size;
            if (port->qbytes > port->st.max_qbytes)
                port->st.max_qbytes = port->qbytes;
            ub_sim_pktq_push(&port->q, p);
            port->st.enq++;
            goto kick;
        }
        if (!port->trim || (p->flags & UB_SIM_PF_TRIMMED) || p->size <= UB_SIM_TRIM_SIZE) {
            drop(sim, port, p);
            return;
        }
        p->size = UB_SIM_TRIM_SIZE;
        p->flags |= UB_SIM_PF_TRIMMED;
        port->st.trims++;
        sim->ctr.trims++;
        if (!port->prio_ctrl) {
            /* Without a header queue the stub still needs room in the data queue. */
            if (port->qbytes + p->size > port->limit) {
                drop(sim, port, p);
                return;
            }
            port->qbytes += p->size;
            ub_sim_pktq_push(&port->q, p);
            port->st.enq++;
            goto kick;
        }
    }
    if (port->hbytes + p->size > port->hlimit) {
        drop(sim, port, p);
        return;
    }
    port->hbytes += p->size;
    ub_sim_pktq_push(&port->hq, p);
    port->st.enq++;
kick:
    ub_sim_port_start(sim, port);
}

/*
 * C-AQM at egress, on the bytes the request leaves behind (like ECN): the shared switch rule of
 * src/cms (ub__caqm_switch_mark) on the descriptor's copy of the extension header's fields.
 */
static void caqm_mark(struct ub_sim *sim, struct ub_sim_port *port, struct ub_sim_pkt *p)
{
    struct ub__ext ext = {
        .aqm_increase = (p->aqm & UB_SIM_AQM_I) != 0,
        .aqm_congestion = (p->aqm & UB_SIM_AQM_C) != 0,
        .aqm_hint = p->hint,
    };
    bool had_i = ext.aqm_increase, had_c = ext.aqm_congestion;
    if (!ub__caqm_switch_mark(&port->caqm_band, port->qbytes, port->rate, &ext))
        return;
    if (had_i && !ext.aqm_increase) {
        port->st.caqm_hold++;
        sim->ctr.caqm_hold++;
    }
    if (ext.aqm_congestion && !had_c) {
        port->st.caqm_c++;
        sim->ctr.caqm_c++;
    }
    p->aqm = (uint8_t)(UB_SIM_AQM_VALID | (ext.aqm_increase ? UB_SIM_AQM_I : 0) |
                       (ext.aqm_congestion ? UB_SIM_AQM_C : 0));
    p->hint = ext.aqm_hint;
}

/* The next packet to serialize: headers first; data is marked as it leaves. */
struct ub_sim_pkt *ub_sim_port_dequeue(struct ub_sim *sim, struct ub_sim_port *port)
{
    bool fc = sim->qcfg.fc != UB_SIM_FC_NONE;
    struct ub_sim_pkt *p = port->hq.head;
    if (p && (!fc || ub_sim_fc_can_send(sim, port, p))) {
        ub_sim_pktq_pop(&port->hq);
        port->hbytes -= p->size;
        port->st.deq++;
        if (fc)
            ub_sim_fc_release(sim, p);
        return p;
    }
    p = port->q.head;
    if (!p || (fc && !ub_sim_fc_can_send(sim, port, p)))
        return NULL;
    ub_sim_pktq_pop(&port->q);
    port->qbytes -= p->size;
    port->st.deq++;
    if (fc)
        ub_sim_fc_release(sim, p);
    /* Mark on what the departing packet leaves behind: the queue a newcomer would see. */
    if (port->kmax && (p->ecn == UB_SIM_ECN_ECT0 || p->ecn == UB_SIM_ECN_ECT1) &&
        port->qbytes > port->kmin) {
        bool mark = port->qbytes >= port->kmax ||
                    ub__rng_below(&port->rng, port->kmax - port->kmin) < port->qbytes - port->kmin;
        if (mark) {
            p->ecn = UB_SIM_ECN_CE;
            port->st.marks++;
            sim->ctr.marks++;
        }
    }
    if (port->caqm && (p->aqm & UB_SIM_AQM_VALID) && port->qbytes > port->caqm_band.kmin)
        caqm_mark(sim, port, p);
    return p;
}
