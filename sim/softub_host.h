/*
 * Hosts running the real softub engine. Each host owns a struct ub__engine;
 * the NIC pulls datagrams from ub__engine_output, arrivals go to
 * ub__engine_input, and each engine's next deadline is one simulator event
 * (picoseconds here, nanoseconds in the engine).
 *
 * Workload seam: the engine's only service today is the unreliable datagram,
 * so a flow is a train of DGRAM_SEND datagrams (initiator = flow index,
 * header_data = byte offset) produced as fast as the NIC drains them, and it
 * completes when the receiver has seen every byte; a lost datagram leaves it
 * unfinished. When the reliable delivery modes land, fill() posts one
 * message per flow instead and the completion upcall ends the flow.
 */
#ifndef UB_SIM_SOFTUB_HOST_H
#define UB_SIM_SOFTUB_HOST_H

#include "sim/sim.h"

struct ub_sim_softub_cfg {
    uint32_t mtu;       /* wire bytes of the largest datagram (default 4096) */
    uint32_t pool_bufs; /* per-engine packet buffers (default 64: memory grows with hosts) */
    uint32_t paths;     /* entropy values per engine (default 1) */
};

struct ub_sim_softub_stats {
    uint64_t dgrams_sent, dgrams_rcvd, send_errors, send_blocked, trimmed_in, copies;
};

struct ub_sim_softub;

int ub_sim_softub_create(struct ub_sim *sim, const struct ub_sim_softub_cfg *cfg,
                         struct ub_sim_softub **out);
const struct ub_sim_softub_stats *ub_sim_softub_stats(const struct ub_sim_softub *s);
/* Host h's engine, e.g. for its counters. */
struct ub__engine *ub_sim_softub_engine(struct ub_sim_softub *s, uint32_t host);

#endif
