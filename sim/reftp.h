/*
 * The reference transport: a simple, fast window-based sender with a
 * per-packet ACK, used to calibrate the fabric against analytical results.
 * Data packets are `mtu` bytes on the wire (`hdr` of them headers); the
 * receiver ACKs every packet (echoing CE) and NACKs every trimmed one; the
 * sender retransmits NACKed packets at once and everything outstanding after
 * an RTO without progress. Optional congestion control: DCTCP on ECN
 * echoes (per base RTT), halving on a trim or timeout.
 * Spraying: each packet picks one of `paths` entropy values at random.
 *
 * C-AQM (`caqm`): each flow runs src/cms's C-AQM sender (ub__cc_caqm): data
 * packets carry I (rate below the link) and the flow's rate as the hint,
 * switches mark them (ub__caqm_switch_mark), the receiver echoes I, C and the
 * hint on the ACK, and the sender's window follows its rate: rate x base RTT,
 * between one MTU and `window`. Replaces the DCTCP-style control.
 */
#ifndef UB_SIM_REFTP_H
#define UB_SIM_REFTP_H

#include "sim/sim.h"

struct ub_sim_reftp_cfg {
    uint32_t mtu;      /* wire bytes of a full data packet (default 4096) */
    uint32_t hdr;      /* header bytes in each data packet (default 64) */
    uint32_t ack_size; /* wire bytes of an ACK or NACK (default 64) */
    uint64_t window;   /* bytes in flight at most (the initial and largest cwnd) */
    uint64_t rto;      /* ps */
    uint64_t base_rtt; /* ps: paces multiplicative decrease */
    uint32_t paths;    /* entropy values per flow (1: one ECMP path per flow) */
    bool cc;           /* DCTCP-style window control; off: fixed window */
    bool caqm;         /* C-AQM rate control from the switches' C and hint (see above) */
};

struct ub_sim_reftp_stats {
    uint64_t data_sent, rtx, acks, nacks, timeouts, dup_data;
    uint64_t caqm_c_echoes; /* ACKs that brought C back */
};

struct ub_sim_reftp;

/* Creates the transport and installs it on sim (ub_sim_fini destroys it). */
int ub_sim_reftp_create(struct ub_sim *sim, const struct ub_sim_reftp_cfg *cfg,
                        struct ub_sim_reftp **out);
const struct ub_sim_reftp_stats *ub_sim_reftp_stats(const struct ub_sim_reftp *tp);

#endif
