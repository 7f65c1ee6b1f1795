/*
 * Hosts running the real softub engine. Each host owns a struct ub__engine;
 * the NIC pulls datagrams from ub__engine_output, arrivals go to
 * ub__engine_input, and each engine's next deadline is one simulator event
 * (picoseconds here, nanoseconds in the engine).
 *
 * A flow is one message carried by the engine's packet delivery sublayer
 * (PDS) in RUD mode: a train of packets with an SES standard header (opcode
 * WRITE, SOM on the first, EOM on the last, message offset and length),
 * queued to PDS a window's worth at a time as acknowledgements come back.
 * The flow completes when PDS reports its last packet acknowledged at the
 * initiator. A trimmed packet reaches its target's engine as its first
 * UB_SIM_TRIM_SIZE bytes flagged UB_PDS_PKT_TRIMMED; PDS answers NACK
 * TRIMMED and the initiator resends.
 *
 * Payload: by default every packet carries its payload bytes through both
 * engines (buffers of mtu bytes). With `virtual_payload` the engine builds,
 * encodes, parses and acknowledges the same packets but the buffer holds the
 * headers only and the simulator adds the payload's length to the packet's
 * size on the wire: memory per host drops from pool x mtu to pool x 320
 * bytes. The buffer's `wire_len` (struct ub__pkt) carries the full size, and
 * PDS and its congestion control count that, so a virtual-payload run is
 * identical to a real-payload one, packet for packet.
 */
#ifndef UB_SIM_SOFTUB_HOST_H
#define UB_SIM_SOFTUB_HOST_H

#include "sim/sim.h"

struct ub_sim_softub_cfg {
    uint32_t mtu;          /* wire bytes of a full data packet (default 4096) */
    uint32_t pool_bufs;    /* per-engine packet buffers (default 3 x window + 64) */
    uint32_t paths;        /* entropy values per engine (default 1) */
    uint32_t window;       /* PDS packets in flight per context (default 64) */
    uint64_t rto_min_ns;   /* PDS minimum (and initial) RTO (default 100 us) */
    uint64_t ack_delay_ns; /* PDS delayed-ACK timer (default 5 us) */
    bool virtual_payload;  /* headers only in the buffers (see above) */
    bool trimming;         /* the fabric trims (PDS's NSCC and REPS adapt to it) */
    const char *cc;        /* PDS congestion control (NULL: PDS's default, NSCC) */
    const char *lb;        /* PDS load balancing (NULL: PDS's default, REPS) */
    uint32_t spray_burst;  /* PDS bursts: bytes per path choice (0: every packet) */
    uint64_t base_rtt_ns;  /* the fabric's unloaded RTT, for NSCC (0: PDS's default) */
};

/* The wire bytes of a data packet's headers: PDS RUD request + softub extension + SES standard. */
#define UB_SIM_SOFTUB_HDR 72u
/* The smallest frame on the wire (ACKs and NACKs are padded to it). */
#define UB_SIM_SOFTUB_MIN_FRAME 64u

struct ub_sim_softub_stats {
    uint64_t pkts_queued;  /* data packets handed to PDS */
    uint64_t pkts_acked;   /* acknowledged (reported by PDS) */
    uint64_t pkts_failed;  /* failed back by PDS */
    uint64_t send_errors;  /* ub__pds_send refused for another reason than back-pressure */
    uint64_t send_blocked; /* the pool was empty: retried one packet time later */
    uint64_t trimmed_in;   /* trimmed packets that reached their target */
    uint64_t copies;       /* received packets copied out of the sender's buffer */
    uint64_t pool_low;     /* fewest free buffers any engine had when its NIC sent */
};

struct ub_sim_softub;

int ub_sim_softub_create(struct ub_sim *sim, const struct ub_sim_softub_cfg *cfg,
                         struct ub_sim_softub **out);
const struct ub_sim_softub_stats *ub_sim_softub_stats(const struct ub_sim_softub *s);
/* Host h's engine, e.g. for its counters. */
struct ub__engine *ub_sim_softub_engine(struct ub_sim_softub *s, uint32_t host);
/* Prints the engine-side counters summed over hosts (deterministic). */
void ub_sim_softub_print(const struct ub_sim_softub *s, FILE *f);

#endif
