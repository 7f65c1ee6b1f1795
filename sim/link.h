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

#endif
