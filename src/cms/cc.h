/*
 * Congestion control (CMS). Internal.
 *
 * One `struct ub__cc` per (pair of endpoints, traffic class): the PDCs between
 * them share it; the owner (PDS) decides. The algorithm is a named const
 * vtable chosen at run time (`ub__cc_algo_find("nscc")`); its state is a
 * fixed-size union embedded in the context, so nothing allocates. Every value
 * that affects a decision is an integer: bytes, nanoseconds, bits/s or
 * bytes/s, fixed-point fractions. Sans-I/O: the owner feeds events with the
 * current time and asks questions; the module never reads a clock.
 *
 * Algorithms: "none" (fixed window), "nscc", "rccc" (receiver credits only),
 * "dcqcn" (rate), "caqm" (rate, switch hints). Any algorithm can also be
 * gated by receiver credits (params.rccc): the effective limit is then the
 * window AND the credit. docs/algorithms.md has the rules and the sources.
 *
 * Also here: the pacer (token bucket / GCRA turning a rate into send times),
 * the RCCC receiver (`ub__rccc_rx`, fair credit grants) and the C-AQM switch
 * helper (`ub__caqm_switch_mark`).
 */
#ifndef UB_CMS_CC_H
#define UB_CMS_CC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ub__ext;

/* ---- pacer ---------------------------------------------------------------- */
/*
 * A GCRA token bucket: packets leave at `rate` bytes/s with at most `burst`
 * bytes, or `burst_ns` worth of the rate if that is more, ahead of schedule at
 * any instant (always at least one packet). The schedule is exact over any run
 * length (the sub-nanosecond remainder is carried, never rounded away). Rate 0
 * means unpaced.
 */
struct ub__pacer {
    uint64_t rate;     /* bytes/s, 0 = unpaced */
    uint64_t burst;    /* bytes */
    uint64_t burst_ns; /* ... or this long at the rate, if more (0: bytes only) */
    uint64_t tat;      /* theoretical arrival time of the next byte, ns */
    uint64_t frac;     /* remainder of tat, in units of 1/rate ns (< rate) */
};

void ub__pacer_init(struct ub__pacer *p, uint64_t rate, uint64_t burst, uint64_t burst_ns);
/* Changes the rate from now on (the backlog already scheduled is kept). */
void ub__pacer_set_rate(struct ub__pacer *p, uint64_t rate, uint64_t now);
/* Earliest time >= now at which a packet of `bytes` may leave. */
uint64_t ub__pacer_next_send_time(const struct ub__pacer *p, uint64_t bytes, uint64_t now);
/* Charges a packet sent at `now` (call it with now >= next_send_time). */
void ub__pacer_on_send(struct ub__pacer *p, uint64_t bytes, uint64_t now);

/* ---- parameters and events ------------------------------------------------ */
struct ub__cc_params {
    uint64_t link_bps;         /* required: the sender's link rate, bits/s */
    uint64_t base_rtt_ns;      /* required: the network's base (unloaded) RTT, its longest path */
    uint64_t peer_base_rtt_ns; /* this pair's unloaded RTT if known (topology); 0 = base_rtt_ns */
    uint32_t mtu;              /* required: bytes of a full packet on the wire */
    uint32_t mss;              /* payload bytes of a full packet; 0 = mtu */
    uint64_t init_cwnd;        /* 0 = the algorithm's default (NSCC: max window) */
    bool trimming;             /* the fabric trims (NSCC target 0.75 x RTT, else 1 x) */
    /* NSCC */
    uint64_t target_qdelay_ns; /* 0 = 0.75 x base RTT with trimming, 1 x without */
    int8_t qa_gate;            /* quick adapt only if achieved < maxwnd >> gate; <0 = 3 */
    bool no_quick_adapt;
    /* receiver credits (RCCC), with any algorithm */
    bool rccc;
    uint64_t init_credit; /* speculative credit at start; 0 = the max window */
    /* rate-based algorithms (DCQCN, C-AQM) */
    uint64_t min_rate_bps;   /* 0 = 10 Mbit/s */
    uint64_t dcqcn_rai_bps;  /* 0 = 40 Mbit/s */
    uint64_t dcqcn_rhai_bps; /* 0 = 10 x rai */
    uint32_t pacer_burst;    /* bytes; 0 = one mtu */
    uint64_t pacer_burst_ns; /* ... or this long at the current rate, if more; 0 = bytes only */
};

/* What one ACK says. PDS fills it from the ACK / ACK_CC and its send records. */
struct ub__cc_ack {
    uint64_t acked_bytes; /* newly delivered bytes (rcvd_bytes delta, or SACKed sizes) */
    uint64_t inflight;    /* bytes still in flight after this ACK */
    uint64_t rtt_ns;      /* RTT sample of the acked packet, 0 = none (retransmitted, probe) */
    bool ecn;             /* the acked packet arrived CE-marked (ACK flag M) */
    /* NSCC receiver state (ACK_CC cc_type NSCC) */
    bool has_nscc;
    uint8_t rcv_cwnd_pend; /* 0..127 destination flow-control penalty, 0 = none */
    uint32_t service_ns;   /* receiver's hold time, subtracted from the RTT sample */
    /* C-AQM echo (softub extension header on the ACK) */
    bool caqm_c;        /* congestion bit came back */
    bool caqm_i;        /* our increase request came back granted */
    uint64_t caqm_hint; /* the switch's suggested rate, bits/s (0 = none) */
};

struct ub__cc_nack {
    uint64_t bytes;    /* size of the NACKed packet */
    uint64_t inflight; /* after removing it */
    bool trimmed;      /* TRIMMED / TRIMMED_LASTHOP (else another congestion NACK) */
    bool last_hop;     /* trimmed at the last hop (receiver's downlink) */
    bool ecn;
};

/* ---- algorithm state ---------------------------------------------------- */
struct ub__cc_nscc {
    uint64_t net_rtt, net_bdp; /* configured network RTT and BDP: scale the constants */
    uint64_t base_rtt, bdp;    /* this pair's base RTT (min seen) and BDP */
    uint64_t maxwnd, minwnd;
    uint64_t target;        /* target queueing delay, ns */
    uint64_t qa_threshold;  /* 4 x target */
    uint64_t fi;            /* fair increase: bytes per window of ACKs */
    uint64_t eta;           /* bytes per adjust period */
    uint64_t adjust_bytes;  /* fulfil after this many bytes (8 mtu) ... */
    uint64_t adjust_period; /* ... or this long (network RTT) */
    uint64_t avg_delay_q8;  /* EWMA of the queueing delay, ns << 8 */
    uint64_t inc;           /* accumulated increase, bytes x bytes */
    uint64_t received;      /* bytes acked since the last fulfil */
    uint64_t achieved;      /* bytes acked in this quick-adapt period */
    uint64_t bytes_ignored, bytes_to_ignore;
    uint64_t qa_end, last_dec, last_adjust;
    uint64_t fi_count; /* bytes acked in a row with near-zero delay */
    uint8_t qa_gate;
    bool fast_inc, trigger_qa, no_qa;
};

struct ub__cc_dcqcn {
    uint64_t rc, rt; /* current and target rate, bits/s */
    uint64_t rai, rhai, min_rate;
    uint32_t alpha; /* Q16, 65536 = 1 */
    uint32_t t, bc; /* timer and byte-counter stage counts */
    uint64_t byte_counter;
    uint64_t t_timer, t_alpha; /* start of the running 55 us periods */
    uint64_t last_cnp;
    bool cnp_seen;
};

struct ub__cc_caqm {
    uint64_t rate; /* bits/s */
    uint64_t min_rate;
    uint64_t last_change; /* increases at most once per base RTT */
    uint64_t hold_until;  /* no increase before (after adopting a hint) */
    bool ramp;            /* start-up: a granted increase doubles the rate */
};

struct ub__cc_algo;

/* Counters, for tests and statistics. */
struct ub__cc_stats {
    uint64_t md, quick_adapt, fulfil, fast_inc, nacks, timeouts, cnps, hints;
    uint64_t undone; /* timeouts undone as spurious */
};

struct ub__cc {
    const struct ub__cc_algo *algo;
    struct ub__cc_params p; /* normalised copy */
    uint64_t cwnd;          /* bytes; UINT64_MAX for pure rate algorithms */
    uint64_t rate;          /* pacing rate, bytes/s, 0 = unpaced */
    bool credit_on;
    int64_t credit; /* RCCC: bytes we may still send; may go negative by < 1 packet */
    uint64_t credit_max;
    struct ub__pacer pacer;
    struct ub__cc_stats st;
    union {
        struct ub__cc_nscc nscc;
        struct ub__cc_dcqcn dcqcn;
        struct ub__cc_caqm caqm;
    } u;
};

struct ub__cc_algo {
    const char *name;
    void (*init)(struct ub__cc *cc);
    void (*on_send)(struct ub__cc *cc, uint64_t bytes, uint64_t now);
    void (*on_ack)(struct ub__cc *cc, const struct ub__cc_ack *ack, uint64_t now);
    void (*on_nack)(struct ub__cc *cc, const struct ub__cc_nack *nack, uint64_t now);
    void (*on_timeout)(struct ub__cc *cc, uint64_t bytes, uint64_t now);
    /* Next time the algorithm wants to run without an event (rate timers); may be NULL. */
    uint64_t (*next_deadline)(const struct ub__cc *cc);
    void (*on_tick)(struct ub__cc *cc, uint64_t now);
};

extern const struct ub__cc_algo ub__cc_none, ub__cc_nscc, ub__cc_rccc, ub__cc_dcqcn, ub__cc_caqm;

/* The registry: NULL if unknown. */
const struct ub__cc_algo *ub__cc_algo_find(const char *name);
/* i-th registered algorithm, NULL past the end (for listing). */
const struct ub__cc_algo *ub__cc_algo_at(size_t i);

/* UB_EINVAL if algo is NULL or a required parameter is 0. */
int ub__cc_init(struct ub__cc *cc, const struct ub__cc_algo *algo,
                const struct ub__cc_params *params);

/* Events. Each is O(1), never allocates. */
/* (on_send, on_ack: static inline below, as every packet and ACK calls them) */
void ub__cc_on_nack(struct ub__cc *cc, const struct ub__cc_nack *nack, uint64_t now);
/* A retransmission timeout of a packet of `bytes`. */
void ub__cc_on_timeout(struct ub__cc *cc, uint64_t bytes, uint64_t now);
/* A timeout turned out spurious (what it declared lost had arrived): a window algorithm's
 * window goes back up to `cwnd`, its value before the timeout. Counted; rates stay. */
void ub__cc_undo_timeout(struct ub__cc *cc, uint64_t cwnd);
/* A credit grant from the receiver (RCCC), bytes. */
void ub__cc_on_credit(struct ub__cc *cc, uint64_t bytes);

/* Queries. */
static inline uint64_t ub__cc_cwnd(const struct ub__cc *cc)
{
    return cc->cwnd;
}
/* Bytes/s; 0 = unpaced (window-limited only). */
static inline uint64_t ub__cc_pacing_rate(const struct ub__cc *cc)
{
    return cc->rate;
}
/* Earliest time >= now the pacer lets a packet of `bytes` go (now if unpaced). */
uint64_t ub__cc_next_send_time(const struct ub__cc *cc, uint64_t bytes, uint64_t now);
/* Next rate-timer deadline (UB_TIME_NEVER if none). */
uint64_t ub__cc_next_deadline(const struct ub__cc *cc);

/* The per-packet events and queries, inline: each is a few tests around the algorithm's hook. */
static inline void ub__cc_sync_pacer(struct ub__cc *cc, uint64_t now)
{
    if (cc->pacer.rate != cc->rate)
        ub__pacer_set_rate(&cc->pacer, cc->rate, now);
}

static inline void ub__cc_on_send(struct ub__cc *cc, uint64_t bytes, uint64_t now)
{
    if (cc->credit_on)
        cc->credit -= (int64_t)bytes;
    if (cc->algo->on_send)
        cc->algo->on_send(cc, bytes, now);
    ub__cc_sync_pacer(cc, now);
    if (cc->pacer.rate)
        ub__pacer_on_send(&cc->pacer, bytes, now);
}

static inline void ub__cc_on_ack(struct ub__cc *cc, const struct ub__cc_ack *ack, uint64_t now)
{
    if (cc->algo->on_ack)
        cc->algo->on_ack(cc, ack, now);
    ub__cc_sync_pacer(cc, now);
}

/* Runs rate timers due by now (DCQCN); harmless for the others. */
static inline void ub__cc_on_tick(struct ub__cc *cc, uint64_t now)
{
    if (cc->algo->on_tick)
        cc->algo->on_tick(cc, now);
    ub__cc_sync_pacer(cc, now);
}

/* Whether a packet of `bytes` may go now with `inflight` bytes outstanding:
 * window, credit and pacing. */
static inline bool ub__cc_can_send(const struct ub__cc *cc, uint64_t inflight, uint64_t bytes,
                                   uint64_t now)
{
    if (cc->cwnd != UINT64_MAX && (inflight + bytes < inflight || inflight + bytes > cc->cwnd))
        return false;
    if (cc->credit_on && cc->credit <= 0)
        return false;
    return !cc->pacer.rate || ub__pacer_next_send_time(&cc->pacer, bytes, now) <= now;
}

/* C-AQM: fields the sender writes in the extension header of a request
 * (I bit when it wants more, and its current rate as the hint). */
void ub__cc_caqm_tx_fields(const struct ub__cc *cc, struct ub__ext *ext);

/* Bytes delivered between two 24-bit rcvd_bytes counters of ACK_CC (wraps). */
static inline uint64_t ub__cc_rcvd_bytes_delta(uint32_t prev, uint32_t cur)
{
    return (uint64_t)((cur - prev) & 0xffffffu);
}

/* C-AQM hint field <-> bits/s (units of UB_EXT_HINT_UNIT_MBPS, saturating). */
uint16_t ub__caqm_hint_encode(uint64_t bps);
uint64_t ub__caqm_hint_decode(uint16_t hint);

/* ---- C-AQM switch side ---------------------------------------------------- */
struct ub__caqm_port {
    uint64_t kmin; /* queue bytes above which increase requests are refused */
    uint64_t kmax; /* queue bytes above which C is set and a hint computed */
};
/* Defaults for a port: kmin 0.2 BDP, kmax 0.8 BDP (the htsim ECN thresholds). */
void ub__caqm_port_init(struct ub__caqm_port *port, uint64_t link_bps, uint64_t base_rtt_ns);
/*
 * Marks a forwarded request's extension header given the egress queue depth:
 *  q <= kmin         : nothing (an I bit passes: the increase is granted);
 *  kmin < q <= kmax  : I cleared (hold);
 *  q > kmax          : I cleared, C set, hint = h x kmax / q, at least h / 2,
 *                      where h is the rate the hint field brings (the sender's
 *                      own rate, or an upstream switch's suggestion: each
 *                      congested hop scales it; a hint is never raised).
 * The sender writes its rate into the hint of each request. Returns true if
 * it changed the header.
 */
bool ub__caqm_switch_mark(const struct ub__caqm_port *port, uint64_t queue_bytes, uint64_t link_bps,
                          struct ub__ext *ext);

/* ---- RCCC receiver -------------------------------------------------------- */
/*
 * The receiver's credit pacer: it grants `quantum` bytes at a time, round
 * robin over the senders that still have demand, spaced so that the grants
 * add up to exactly `rate_bps`. The owner provides the slot array once.
 */
struct ub__rccc_slot {
    uint64_t key;    /* the owner's name for the sender (e.g. its PDC) */
    uint64_t demand; /* bytes the sender still wants (its credit_target backlog) */
    uint64_t granted;
    bool used;
};

struct ub__rccc_rx {
    struct ub__rccc_slot *slot;
    uint32_t nslots;
    uint32_t rr; /* next slot to consider */
    uint32_t quantum;
    uint64_t rate_bps;
    uint64_t epoch, epoch_bytes; /* grants since epoch: next grant at epoch + bytes/rate */
    bool busy;
};

int ub__rccc_rx_init(struct ub__rccc_rx *rx, struct ub__rccc_slot *slots, uint32_t nslots,
                     uint64_t rate_bps, uint32_t quantum);
/* Sets a sender's outstanding demand (0 = leaves). UB_EFULL if no slot is free. */
int ub__rccc_rx_demand(struct ub__rccc_rx *rx, uint64_t key, uint64_t demand, uint64_t now);
/* Emits the next grant due by now: true with *key and *bytes, or false. Call until false. */
bool ub__rccc_rx_next(struct ub__rccc_rx *rx, uint64_t now, uint64_t *key, uint64_t *bytes);
/* When the next grant falls due (UB_TIME_NEVER when nobody wants credit). */
uint64_t ub__rccc_rx_next_time(const struct ub__rccc_rx *rx);
/* Bytes granted so far to key (0 if unknown). */
uint64_t ub__rccc_rx_granted(const struct ub__rccc_rx *rx, uint64_t key);

#endif
