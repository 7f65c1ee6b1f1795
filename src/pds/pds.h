/*
 * PDS: the packet delivery sublayer. Its one job is that every packet of a
 * transaction reaches the peer's transaction layer (exactly once for RUD and
 * ROD, in PSN order for ROD), whatever the network does. It knows PSNs, not
 * transactions: the layer above hands it packets (SES header + payload) and
 * learns when each was acknowledged, or that it failed.
 *
 * Packet delivery contexts (PDCs) are ephemeral: the first packet to a peer
 * carries SYN and opens the context at the target with no handshake round
 * trip; the initiator sends at full window meanwhile. Contexts close when
 * idle, are bounded in number, and carry the initiator's incarnation so a
 * restarted peer is never mistaken for its earlier self.
 *
 * Sans-I/O like the rest of the engine: packets in through ub__pds_input,
 * out through ub__pds_pull, time injected, timers on the engine's heap.
 */
#ifndef UB_PDS_PDS_H
#define UB_PDS_PDS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/addr.h"
#include "core/hmap.h"
#include "core/list.h"
#include "core/log.h"
#include "core/pktbuf.h"
#include "core/rand.h"
#include "core/ring.h"
#include "core/timer.h"
#include "wire/datagram.h"

/* Delivery modes. */
enum ub__pds_mode {
    UB_PDS_RUD = 0,  /* reliable, unordered: the default, may be sprayed */
    UB_PDS_ROD = 1,  /* reliable, ordered: one path, go-back-N */
    UB_PDS_RUDI = 2, /* reliable for idempotent operations: no duplicate filtering */
    UB_PDS_UUD = 3,  /* unreliable datagrams */
    UB_PDS_MODE_COUNT
};

/* Retransmission: {go-back-N, selective} x {fast (NACK, SACK, EV), timeout only}. */
enum ub__pds_retx {
    UB_PDS_RETX_DEFAULT = 0, /* selective+fast for RUD/RUDI, go-back-N+fast for ROD */
    UB_PDS_RETX_SEL_FAST,
    UB_PDS_RETX_SEL_TIMEOUT,
    UB_PDS_RETX_GBN_FAST,
    UB_PDS_RETX_GBN_TIMEOUT,
};

/* Zero fields take the defaults in pds.c (UB_PDS_DEFAULT_*). */
struct ub__pds_cfg {
    uint32_t max_pdcs;     /* initiator and target contexts, each table */
    uint32_t window;       /* packets in flight per PDC (until congestion control decides) */
    uint32_t mp_range;     /* PSNs past the cumulative ACK the target can track (<= 65536) */
    uint32_t ack_every;    /* ACK after this many packets ... */
    uint64_t ack_delay_ns; /* ... or this long after the first unacknowledged one */
    /* An ACK of a PDC still waiting in the output is rewritten, not joined by another: the
     * packets of one received batch are acknowledged once (API contexts). */
    bool ack_coalesce;
    uint64_t rto_init_ns; /* before an RTT sample */
    uint64_t rto_min_ns, rto_max_ns;
    uint32_t ooo_threshold; /* fast loss: this many later PSNs acknowledged */
    uint32_t max_retries;   /* consecutive RTOs without progress before the PDC fails */
    uint64_t fail_after_ns; /* ... and at least this long since its last ACK progress (0: any) */
    uint64_t idle_close_ns; /* an initiator closes a PDC idle this long */
    uint64_t quarantine_ns; /* how long a closed PDC's identity is remembered */
    enum ub__pds_retx retx[UB_PDS_MODE_COUNT];
    bool no_ev_loss;    /* turns off entropy-based loss detection (per-path order) */
    bool no_probe;      /* turns off tail-loss probes */
    uint32_t num_paths; /* entropy values to spray RUD over */
    /* Bytes of new packets one entropy value carries before the balancer chooses again; 0 (or
     * up to a packet): every packet is a choice (the fabric's spraying). Real devices send a
     * path's consecutive packets in one system call (udp: a GSO super-datagram). */
    uint32_t spray_burst;
    uint32_t
        start_psn; /* nonzero: every new initiator PDC starts here, not at a random PSN (tests) */
    /*
     * Congestion control and load balancing (src/cms; docs/pds.md). One congestion context
     * per (peer host, traffic class), shared by the PDCs to that peer; one balancer per PDC.
     */
    const char *cc_algo;   /* NULL = "nscc"; "none" = the fixed packet window alone */
    const char *lb_algo;   /* NULL = "reps"; ROD PDCs always use "single" */
    uint64_t link_bps;     /* the sender's link rate; 0 = 100 Gbit/s */
    uint64_t base_rtt_ns;  /* the network's unloaded RTT; 0 = 12 us */
    uint32_t mtu;          /* bytes of a full packet on the wire; 0 = the engine's MTU (4096) */
    uint64_t cc_init_cwnd; /* bytes; 0 = the algorithm's own start (NSCC: 1.5 BDP) */
    bool trimming;         /* the fabric trims packets (NSCC target delay, REPS freeze) */
    /* Bytes a paced sender may send at once, beyond its rate's schedule; 0 = one mtu (a
     * simulated fabric, exact timing). Hosts whose progress loop comes back every few us
     * need room for what accrued meanwhile, as Linux lets a TSO burst of up to 64 KiB go. */
    uint32_t pacer_burst;
    /* ... or, if more, what the rate accrues in this long (0: bytes only). A loop that comes
     * back every 10-20 us under load loses, at 100 Gbit/s, more than 64 KiB a round. */
    uint64_t pacer_burst_ns;
    /*
     * Receiver credits (RCCC; docs/pds.md). Sender: cc_algo "rccc" (credits alone, 1.5 BDP
     * window) or "NAME+rccc" (e.g. "nscc+rccc": NAME's window AND the credit). Target: always
     * answers credit requests, granting at rccc_rate_bps in fair shares.
     */
    uint64_t rccc_rate_bps;    /* target: credit granted per second in total; 0 = 98 % link */
    uint32_t rccc_quantum;     /* target: bytes per grant; 0 = 4 x mtu */
    uint64_t rccc_init_credit; /* sender: speculative credit at start; 0 = 8 x mtu */
    /*
     * Destination flow control (docs/pds.md). Target: while the engine's packet pool is short,
     * every ACK_CC (NSCC state) asks the sender to give back part of what it acknowledges:
     * rcv_cwnd_pend is 0 with dest_fc_free_pct % of the buffers free or more, rising linearly
     * to 127 (the whole acked amount) with none free.
     */
    bool no_dest_fc;           /* target: rcv_cwnd_pend always 0 */
    uint32_t dest_fc_free_pct; /* 0 = 25; above 100 counts as 100 */
    /*
     * Lossless carriers. A PDC to a UB_AF_SHM peer rides the shm device's lanes: reliable,
     * in order, a full lane holds packets back (the driver requeues them) instead of dropping
     * them. Nothing is ever lost or reordered there and there is no congestion to control,
     * so such a PDC has no congestion context, no tail-loss probes, and a retransmission
     * timer of at least UB_PDS_LOSSLESS_RTO_NS: it only notices a dead peer (UB_EUNREACH
     * after max_retries, as anywhere) and never fires because the peer was descheduled for
     * a while; and it does not ask for immediate ACKs, which the target sends every
     * UB_PDS_LOSSLESS_ACK_EVERY packets. no_lossless treats those peers like any other.
     */
    bool no_lossless;
    /*
     * Lossless links without PDCs (docs/pds.md, "The link path"). RUD and ROD packets to a
     * lossless peer go as LINK packets: the extension header (with this side's incarnation)
     * behind an 8-byte PDS header that names the receiver's incarnation as last heard from
     * it; no PSN, no ACK, no timer. Handed to the driver, a packet counts as acknowledged
     * (acked upcall): the carrier delivers it once and in order or the peer is gone, which
     * the layer above's response bound reports. Received (link on or off), one is delivered
     * at once if it came over a lossless carrier (the device's word, not the packet's) and
     * names this incarnation or none; others are counted (rx_link_stale, rx_malformed) and
     * dropped.
     */
    bool link;
};

#define UB_PDS_LOSSLESS_RTO_NS 50000000ull /* 50 ms: the first RTO of a lossless PDC */
/* A target ACKs a lossless peer every this many packets at least (or after ack_delay_ns):
 * the ACK only frees the window and feeds the dead-peer timer there. */
#define UB_PDS_LOSSLESS_ACK_EVERY 16u

/* Whether PDS treats a PDC to dst as lossless (see no_lossless). */
static inline bool ub__pds_lossless_peer(const struct ub__pds_cfg *cfg, const struct ub__addr *dst)
{
    return !cfg->no_lossless && dst->family == UB_AF_SHM;
}

/* Whether RUD and ROD packets to dst take the link path (see link). */
static inline bool ub__pds_link_peer(const struct ub__pds_cfg *cfg, const struct ub__addr *dst)
{
    return cfg->link && ub__pds_lossless_peer(cfg, dst);
}

/* Set by a device or the simulator on a received datagram whose payload a switch cut off
 * (the headers survive): PDS NACKs it with TRIMMED instead of delivering it. Equal to the
 * simulator's UB_SIM_TRIMMED (sim/sim.h). */
#define UB_PDS_PKT_TRIMMED 0x80u
/* ACK_CC service_time unit: the receiver's hold time in units of 16 ns (saturating). */
#define UB_PDS_SERVICE_TIME_NS 16u

/* Every event PDS counts. */
struct ub__pds_stats {
    uint64_t tx_pkts, tx_bytes; /* first transmissions of data packets */
    uint64_t tx_direct;         /* of them, emitted as they were sent (ub__pds_tx.now) */
    /* LINK packets (cfg.link; not in the above): sent, delivered, dropped as meant for an
     * earlier incarnation (not in rx_stale). */
    uint64_t tx_link, rx_link, rx_link_stale;
    uint64_t link_restarts; /* lossless peers heard from as a new incarnation */
    uint64_t retx_pkts;     /* retransmissions */
    uint64_t retx_rto, retx_fast, retx_nack, retx_probe;
    uint64_t spurious_retx; /* retransmissions whose original had arrived (seen at target) */
    uint64_t rx_pkts;       /* data packets delivered up */
    uint64_t rx_dup;        /* duplicates dropped */
    uint64_t rx_oow;        /* beyond MP_RANGE: dropped, NACKed */
    uint64_t rx_ooo_rod;    /* ROD packets out of order: dropped, NACKed */
    uint64_t rx_stale;      /* for a closed PDC or an earlier incarnation */
    uint64_t rx_no_pdc;     /* for a PDC this side does not have */
    uint64_t rx_malformed;  /* failed PDS-level checks */
    uint64_t acks_tx, acks_rx, nacks_tx, nacks_rx, ctrl_tx, ctrl_rx;
    uint64_t acks_coalesced; /* of acks_tx, ACKs rewritten into one still queued (ack_coalesce) */
    /* Responses on ACKs (docs/pds.md): target: ACKs sent with a response, of them re-sent from
     * the cache for a duplicate, responses the cache had no room for; initiator: ACKs received
     * with a response, of them repeats for a packet already completed (the response not taken
     * up again), K packets a foreign ACK covered (then resent until their own ACK came). */
    uint64_t acks_rsp_tx, acks_rsp_resent, rsp_cache_full, acks_rsp_rx, acks_rsp_stale;
    uint64_t own_covered;
    uint64_t nacks_by_code[32];
    uint64_t rto_fired, probes_sent;
    uint64_t rto_undone;       /* RTOs found spurious (the originals arrived): window restored */
    uint64_t rto_floor_raised; /* of those, stalls that raised their PDC's RTO floor */
    uint64_t pdc_opened, pdc_accepted, pdc_closed, pdc_evicted, pdc_failed;
    uint64_t tx_failed;    /* packets failed back to the layer above */
    uint64_t table_full;   /* PDCs refused: table full and nothing to evict */
    uint64_t nobufs;       /* packets not made: pool empty */
    uint64_t zc_flattened; /* attached payloads copied in as their request completed */
    /* congestion signals */
    uint64_t rx_ce;       /* target: data packets that arrived CE-marked */
    uint64_t acks_ecn_tx; /* target: ACKs sent with the M flag (ECN echo) */
    uint64_t acks_ecn_rx; /* initiator: ACKs received with the M flag */
    uint64_t rx_trimmed;  /* target: trimmed packets NACKed (TRIMMED), not delivered */
    uint64_t cc_blocked;  /* initiator: sends held back by the congestion window */
    uint64_t cc_paced;    /* initiator: sends held back by the pacer (a timer resumes them) */
    /* receiver credits (RCCC) */
    uint64_t credit_req_tx, credit_req_rx;     /* CTRL CREDIT_REQ (demand) sent / received */
    uint64_t credit_tx, credit_rx;             /* CTRL CREDIT sent / received */
    uint64_t credit_ack_tx, credit_ack_rx;     /* ACK_CC cc_type RCCC sent / received */
    uint64_t credit_bytes_tx, credit_bytes_rx; /* bytes granted (both carriers) */
    uint64_t rccc_full;                        /* target: a sender found no free slot */
};

/* A delivered packet, as the layer above sees it. Bytes valid during the upcall only. */
struct ub__pds_rx {
    const struct ub__addr *src;
    uint32_t incarnation; /* the initiator's */
    uint16_t pdc;         /* the target's PDC id (0 for UUD/RUDI) */
    uint8_t mode;
    uint16_t path;
    uint8_t ecn;
    uint32_t psn;
    const struct ub__wire_dgram *hdr; /* the parsed headers (ext, SES) */
    const uint8_t *payload;
    uint32_t payload_len;
};

struct ub__pds_upcalls {
    /* Target: a packet arrived (once for RUD/ROD, PSN order for ROD; RUDI may repeat). */
    void (*deliver)(void *arg, const struct ub__pds_rx *rx, uint64_t now);
    /* Initiator: the packet with this cookie reached the target. */
    void (*acked)(void *arg, uint64_t cookie, uint64_t now);
    /* Initiator: the packet with this cookie will never be acknowledged (UB_EUNREACH, ...). */
    void (*failed)(void *arg, uint64_t cookie, int err, uint64_t now);
    /*
     * Optional, link path: `peer` spoke as a new incarnation (a process restarted at its
     * address). `noticed`: the carrier had reported the old one gone (ub__pds_peer_gone), so
     * what was sent to it has failed already; otherwise what was sent since it was last
     * heard from named it, and the new one drops that (it will never be answered).
     */
    void (*restarted)(void *arg, const struct ub__addr *peer, bool noticed, uint64_t now);
};

/* Target, optional: the link path's usual request (ub__wire_link_req) from src, taken whole
 * (true) or not (false: it is parsed and delivered as any other). Called with up_arg. */
typedef bool (*ub__pds_link_req_fn)(void *arg, const struct ub__addr *src,
                                    const struct ub__wire_link_req *r, uint64_t now);
/* Initiator, optional: the link path's usual response (ub__wire_link_rsp), the same way. */
typedef bool (*ub__pds_link_rsp_fn)(void *arg, const struct ub__addr *src,
                                    const struct ub__wire_link_rsp *r, uint64_t now);

struct ub__pds;

/* Responses on ACKs: the most bytes (softub extension + SES header + data) one ACK carries, and
 * how many a target PDC keeps for re-sending (a ring indexed by PSN, a power of two). Up to
 * UB_PDS_ACK_RSP_INLINE bytes are kept in the ring's entry itself, longer ones (READ data) in a
 * buffer of the entry's own, allocated when first needed. */
#define UB_PDS_ACK_RSP_MAX    560
#define UB_PDS_ACK_RSP_INLINE 112
#define UB_PDS_ACK_RSP_CACHE  64

/* What the layer above asks to send: SES header + payload bytes, and how. */
struct ub__pds_tx {
    const struct ub__addr *dst;
    uint8_t mode;     /* enum ub__pds_mode */
    uint8_t ses_kind; /* UB_PDS_NH_* of the SES header at the start of pkt */
    bool ack_req;     /* ask the target to ACK at once (latency-sensitive last packet) */
    /* The packet carries the SES tail bit K: its response may ride on its ACK. Then (RUD,
     * selective) only an ACK of its own completes it (docs/pds.md, "Responses on ACKs"). */
    bool own;
    /* A response without data (a WRITE's, a SEND's): an ACK that leaves with it goes first,
     * so that its initiator frees the request's packets before it reports the request done
     * (a zero-copy payload then never needs copying: UB_PKT_F_AFTER_ACK). */
    bool after_ack;
    struct ub__ext ext; /* order tag, stream; incarnation is filled in by PDS */
    uint64_t cookie;    /* returned by acked/failed */
    /* dst's context in mode from ub__pds_peer just before, or NULL: PDS looks it up. */
    struct ub__pds_ipdc *pdc;
    /* The caller takes the output right after, at this time (ub__pds_pull): the packet may
     * be given its PSN and be stamped sent now, saving the round through the queue. */
    bool now;
};

int ub__pds_create(struct ub__pds **out, const struct ub__pds_cfg *cfg, struct ub__timers *timers,
                   struct ub__pktpool *pool, struct ub__rng *rng, const struct ub__log *log);
/* Frees every context; packets not yet acknowledged are failed with UB_EFLUSHED. */
void ub__pds_destroy(struct ub__pds *pds, uint64_t now);

void ub__pds_set_upcalls(struct ub__pds *pds, const struct ub__pds_upcalls *up, void *arg);
void ub__pds_set_link_req(struct ub__pds *pds, ub__pds_link_req_fn fn);
void ub__pds_set_link_rsp(struct ub__pds *pds, ub__pds_link_rsp_fn fn);
/*
 * The unloaded RTT to a peer host in ns, when the owner knows it (e.g. from the fabric's
 * topology), 0 if not: it seeds the base RTT of that peer's congestion context (NSCC's
 * per-pair base RTT, which samples can still lower) instead of the network-wide base_rtt_ns.
 * Consulted when a context is created. docs/algorithms.md section 2.
 */
typedef uint64_t (*ub__pds_peer_rtt_fn)(void *arg, const struct ub__addr *peer);
void ub__pds_set_peer_rtt(struct ub__pds *pds, ub__pds_peer_rtt_fn fn, void *arg);

/* The incarnation id this instance stamps on its packets. */
uint32_t ub__pds_incarnation(const struct ub__pds *pds);

/*
 * Queues pkt (SES header + payload; headroom for the PDS and extension
 * headers) for reliable delivery. PDS takes the reference. UB_EFULL when the
 * context's queue is at its bound (back-pressure), UB_ENOBUFS, UB_EINVAL.
 * tx->ext is completed in place (version, next header, incarnation).
 */
int ub__pds_send(struct ub__pds *pds, struct ub__pds_tx *tx, struct ub__pkt *pkt, uint64_t now);

/* A received datagram whose headers parsed (d); returns 1 if PDS consumed it, 0 if not its. */
int ub__pds_input(struct ub__pds *pds, struct ub__pkt *pkt, const struct ub__wire_dgram *d,
                  uint64_t now);
/* A received datagram that is the link path's usual request (ub__wire_link_req found r in
 * it): what ub__pds_input does with it, the headers parsed only if the layer above does not
 * take r whole. Consumes it (returns 1). */
int ub__pds_input_link_req(struct ub__pds *pds, struct ub__pkt *pkt,
                           const struct ub__wire_link_req *r, uint64_t now);
/* The same for the link path's usual response (ub__wire_link_rsp). */
int ub__pds_input_link_rsp(struct ub__pds *pds, struct ub__pkt *pkt,
                           const struct ub__wire_link_rsp *r, uint64_t now);

/*
 * Responses on ACKs, called by the layer above during a deliver upcall of a RUD request.
 * ub__pds_dlv_own: the packet carried K; it gets an ACK of its own at once (flag OWN, never
 * merged into another), and every later ACK of its PDC says OWN. ub__pds_dlv_rsp: that ACK
 * carries a response of len bytes (softub extension, SES response header and data, at most
 * UB_PDS_ACK_RSP_MAX, and the ACK with it within a packet buffer), kept until the initiator's
 * clear PSN passes the packet so that a duplicate is answered with it again; the caller writes
 * it, at once, where the returned pointer says. NULL: not this packet or no room (send it the
 * ordinary way).
 */
void ub__pds_dlv_own(struct ub__pds *pds);
uint8_t *ub__pds_dlv_rsp(struct ub__pds *pds, uint32_t len);

/* Up to max packets to transmit now (ACKs and control first); the caller owns them. */
uint32_t ub__pds_pull(struct ub__pds *pds, struct ub__pkt **pkts, uint32_t max, uint64_t now);

/* What ub__pds_pull would return now: nothing, one packet of the link path and nothing else
 * (a ping-pong's answer over shm: ub__pds_link_pull_one takes it), or more. */
enum { UB_PDS_OUT_NONE, UB_PDS_OUT_LINK_ONE, UB_PDS_OUT_MORE };
int ub__pds_output(const struct ub__pds *pds);
/* The first queued LINK packet (ub__pds_pull's part), reported acknowledged as it leaves, or
 * NULL. */
struct ub__pkt *ub__pds_link_pull_one(struct ub__pds *pds, uint64_t now);

/* Whether ub__pds_pull would return something now. */
bool ub__pds_has_output(const struct ub__pds *pds);

/*
 * The carrier found the process behind dst gone (the shm device's probe): packets to whoever
 * takes the id next name no incarnation (they would be dropped there as meant for the
 * predecessor, and a restarted server never reached again); the old one is kept to tell its
 * successor (the restarted upcall) from its own last packets (dropped).
 */
void ub__pds_peer_gone(struct ub__pds *pds, const struct ub__addr *dst);

/* Packets queued or in flight on the context the last send went to (0 if none). */
uint32_t ub__pds_last_outstanding(const struct ub__pds *pds);
/* Packets queued or in flight towards dst in mode (0 if no context). */
uint32_t ub__pds_outstanding(const struct ub__pds *pds, const struct ub__addr *dst, uint8_t mode);
/* What a sender asks before each request packet to dst in mode, with one lookup. */
struct ub__pds_peer {
    struct ub__pds_ipdc *pdc; /* for ub__pds_tx.pdc; NULL: no context yet */
    uint32_t outstanding;     /* ub__pds_outstanding */
    /* Whether the layer above should send K to dst in mode: this side's PDCs of mode complete
     * packets sent with ub__pds_tx.own on their own ACKs only (RUD, selective retransmission),
     * and dst is not a lossless peer (there ACKs are paced every UB_PDS_LOSSLESS_ACK_EVERY
     * packets, and an ACK of its own per request measured slower than the response's own). */
    bool own_ok;
    /* dst is served by the link path (docs/pds.md): a packet is as good as delivered once the
     * driver has it, so one without an attached payload needs no cookie (no acked upcall). */
    bool link;
    /* Packets to dst are sprayed over several paths: those of one request may arrive out of
     * order (an ACK of its own at the last one would often report holes the next moment
     * fills, and count as evidence of loss). */
    bool sprays;
};
void ub__pds_peer(const struct ub__pds *pds, const struct ub__addr *dst, uint8_t mode,
                  struct ub__pds_peer *out);
/* out, found by ub__pds_peer with a context and sent to since, brought up to date (its
 * outstanding count): what ub__pds_peer would find again, without the look-up. */
void ub__pds_peer_again(struct ub__pds_peer *out);

/*
 * Flattens (ub__pkt_flatten) every packet with this cookie that PDS still holds towards dst
 * in mode, queued or kept for retransmission: the memory their attached payloads refer to is
 * about to go back to its owner (the request they belong to completes). The bytes on the
 * wire stay the same. Returns how many it flattened.
 */
uint32_t ub__pds_flatten(struct ub__pds *pds, const struct ub__addr *dst, uint8_t mode,
                         uint64_t cookie);
/*
 * The same for every packet PDS holds, towards any peer, whose attached payload lies in
 * [lo, lo + len): that memory stops being ours to read (a segment is unregistered).
 */
uint32_t ub__pds_flatten_range(struct ub__pds *pds, const void *lo, uint64_t len);

const struct ub__pds_stats *ub__pds_stats(const struct ub__pds *pds);

/*
 * A datagram flagged UB_PDS_PKT_TRIMMED (only its headers are meaningful): returns 1 if PDS
 * consumed it (a RUD/ROD request, answered with NACK TRIMMED or, if it had already arrived, an
 * ACK), 0 if it is not PDS's.
 */
int ub__pds_input_trimmed(struct ub__pds *pds, struct ub__pkt *pkt, uint64_t now);

struct ub__cc;
/* The congestion context shared by the PDCs to dst's host (NULL if none, or cc_algo "none"). */
const struct ub__cc *ub__pds_cc(const struct ub__pds *pds, const struct ub__addr *dst);
/* Bytes of data in flight under that context (0 if none). */
uint64_t ub__pds_cc_inflight(const struct ub__pds *pds, const struct ub__addr *dst);
/* Live congestion contexts. */
uint32_t ub__pds_cc_count(const struct ub__pds *pds);

/* Live contexts: initiator side and target side. */
uint32_t ub__pds_ipdc_count(const struct ub__pds *pds);
uint32_t ub__pds_tpdc_count(const struct ub__pds *pds);

#endif
