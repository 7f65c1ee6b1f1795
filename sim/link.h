/* Internal: the serializer and the wire of a port, and node input. */
#ifndef UB_SIM_LINK_H
#define UB_SIM_LINK_H

#include "sim/sim.h"

/* Starts serializing the next packet if the port is idle and has one. */
void ub_sim_port_start(struct ub_sim *sim, struct ub_sim_port *port);
struct ub_sim_pkt *ub_sim_port_dequeue(struct ub_sim *sim, struct ub_sim_port *port);
void ub_sim_port_init(struct ub_sim *sim, struct ub_sim_port *port, uint32_t idx);

/* A packet arrives at a node (switch: forward it; host: hand it to the transport). */
void ub_sim_switch_input(struct ub_sim *sim, uint32_t node, struct ub_sim_pkt *p);
void ub_sim_host_input(struct ub_sim *sim, uint32_t host, struct ub_sim_pkt *p);

/* Flow control (flowctl.c). The class: control and headers (with prio_ctrl) or data. */
static inline uint32_t ub_sim_pkt_class(const struct ub_sim *sim, const struct ub_sim_pkt *p)
{
    return sim->qcfg.prio_ctrl && (p->flags & (UB_SIM_PF_CTRL | UB_SIM_PF_TRIMMED)) ? 1u : 0u;
}
void ub_sim_fc_fire(struct ub_sim *sim, struct ub_sim_event *ev);
/* A packet came into a switch through its port x (the port facing the sender). */
void ub_sim_fc_arrive(struct ub_sim *sim, struct ub_sim_port *x, struct ub_sim_pkt *p);
/* The switch lets go of p (it leaves an egress queue, or is dropped). */
void ub_sim_fc_release(struct ub_sim *sim, struct ub_sim_pkt *p);
bool ub_sim_fc_can_send(const struct ub_sim *sim, const struct ub_sim_port *port,
                        const struct ub_sim_pkt *p);
void ub_sim_fc_spend(struct ub_sim *sim, struct ub_sim_port *port, const struct ub_sim_pkt *p);

#endif
