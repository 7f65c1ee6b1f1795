/* PDS internals shared by pds.c (instance, tables, output), pds_tx.c and pds_loss.c (initiator;
 * their own shared part in pds_ipdc.h) and pds_rx.c (target). */
#ifndef UB_PDS_PDS_INT_H
#define UB_PDS_PDS_INT_H

#include "cms/cc.h"
#include "cms/lb.h"
#include "core/seq.h"
#include "pds/pds.h"

#define UB_PDS_DEFAULT_MAX_PDCS      4096
#define UB_PDS_DEFAULT_WINDOW        256
#define UB_PDS_DEFAULT_MP_RANGE      1024
#define UB_PDS_DEFAULT_ACK_EVERY     4
#define UB_PDS_DEFAULT_ACK_DELAY_NS  20000ull
#define UB_PDS_DEFAULT_RTO_INIT_NS   1000000ull
#define UB_PDS_DEFAULT_RTO_MIN_NS    200000ull
#define UB_PDS_RTO_FLOOR_MAX_NS      20000000ull /* a learnt RTO floor at most (a few slices) */
#define UB_PDS_RTO_FLOOR_DECAY       8192        /* RTT samples per halving of a learnt floor */
#define UB_PDS_DEFAULT_RTO_MAX_NS    100000000ull
#define UB_PDS_DEFAULT_OOO_THRESHOLD 8
#define UB_PDS_DEFAULT_MAX_RETRIES   8
#define UB_PDS_DEFAULT_IDLE_CLOSE_NS 100000000ull
#define UB_PDS_DEFAULT_QUEUE         4096 /* packets waiting per initiator PDC */
#define UB_PDS_MPR_UNIT              64   /* the ACK's 8-bit mpr counts PSNs in units of 64 */
#define UB_PDS_SYN_SPAN              4096 /* a SYN's 12-bit psn_offset bounds the PSNs sent before the ACK */
#define UB_PDS_CTLQ                  4096 /* ACKs, NACKs and control packets waiting to leave */
#define UB_PDS_BURST                 16   /* packets one PDC may emit before the next gets a turn */
#define UB_PDS_GBN_MIN_WIN           4    /* go-back-N: the window a go-back shrinks to at least */
#define UB_PDS_DEFAULT_LINK_BPS      100000000000ull /* congestion control: the link rate ... */
#define UB_PDS_DEFAULT_BASE_RTT_NS   12000ull        /* ... and base RTT (UEC's reference) */
#define UB_PDS_DEFAULT_MTU           4096
#define UB_PDS_DEFAULT_CC            "nscc"
#define UB_PDS_DEFAULT_LB            "reps"
#define UB_PDS_DEFAULT_DEST_FC_PCT   25 /* destination flow control below 25 % of the pool free */

/* Initiator PDC states. */
enum { IPDC_SYN = 0, IPDC_EST, IPDC_CLOSING };

/* Slot states. */
/* SLOT_COVERED: an own packet (K) that a foreign ACK (cumulative or selective) said arrived,
 * whose own ACK (which may carry its response) has not: kept for resending, out of flight. */
enum { SLOT_FREE = 0, SLOT_INFLIGHT, SLOT_LOST, SLOT_ACKED, SLOT_COVERED };

/* PDS's own bits in a packet it holds for sending (ub__pkt.flags, below the UB_PKT_F_ ones):
 * ask the target to ACK at once (ub__pds_tx.ack_req); the response may ride on the ACK
 * (.own). */
#define UB_PDS_PKT_ACK_REQ 0x01u
#define UB_PDS_PKT_OWN     0x02u
/* An ACK_CC whose service time counts until it leaves (ub__pds_pull), from ts. */
#define UB_PDS_PKT_SERVICE 0x04u

/* One PSN in flight at the initiator. The packet holds the full PDS header. */
struct ub__pds_slot {
    struct ub__pkt *pkt;
    uint64_t sent_ns;  /* last transmission */
    uint64_t first_ns; /* first transmission (RTT samples only from never-retransmitted) */
    uint64_t txseq;    /* transmission order, for entropy-based loss detection */
    uint16_t path;
    uint8_t retx; /* retransmissions so far */
    uint8_t state;
    uint8_t ack_req;
    uint8_t own;           /* only an ACK of its own completes it (ub__pds_tx.own) */
    uint8_t cov;           /* covered once: a foreign OWN ACK says nothing new about it */
    uint8_t why;           /* what declared it lost: WHY_* */
    uint8_t cand;          /* detect_losses: already collected this round */
    uint8_t in_burst;      /* its path was its burst's, not the balancer's choice */
    uint32_t pnext, pprev; /* SLOT_INFLIGHT: its path's FIFO (txseq order), slot indices */
};

#define UB_PDS_NOSLOT UINT32_MAX

/* Per path (entropy value) at the initiator: loss detection by per-path order. */
struct ub__pds_path {
    uint64_t acked_txseq; /* highest txseq acknowledged on it */
    uint32_t head, tail;  /* its SLOT_INFLIGHT slots, oldest transmission first */
    bool dirty;           /* acked_txseq rose since the last detect_losses: on ipdc->dirty */
};

/* Why a slot is being retransmitted (for the counters). */
enum { WHY_NONE = 0, WHY_RTO, WHY_FAST, WHY_NACK, WHY_PROBE };

/*
 * A congestion-control context: one per (peer host, traffic class), shared by the initiator
 * PDCs to that peer (RUD, ROD, RUDI, and a CLOSING predecessor), created with the first and
 * freed with the last. It counts the bytes of data in flight over all of them.
 */
struct ub__pds_ccx {
    struct ub__cc cc;
    struct ub__timer pace; /* armed while a PDC waits for the pacer: marks them ready */
    struct ub__list pdcs;  /* ub__pds_ipdc.cc_link */
    struct ub__pds *pds;
    uint64_t key;      /* in pds->ccx_by_key: (host, traffic class) */
    uint64_t inflight; /* bytes of the slots in SLOT_INFLIGHT */
    uint32_t refs;
    /* RCCC sender (pds_rccc.c): demand = queued + lost bytes - credit, told by CTRL CREDIT_REQ */
    uint64_t rccc_queued;      /* bytes queued for a first transmission */
    uint64_t rccc_told;        /* demand the target knows of (less the grants received since) */
    uint64_t rccc_heard;       /* last grant received or request sent, ns */
    struct ub__list rccc_link; /* on pds->rccc_dirty while rccc_dirty */
    bool rccc_dirty;
};

/* Initiator context: one per (peer, mode). */
struct ub__pds_ipdc {
    struct ub__list ready; /* on pds->ready when it has something to send */
    struct ub__timer rto;  /* retransmission / probe timer, armed at or before rto_due */
    struct ub__timer idle; /* closes the PDC when idle */
    struct ub__pds *pds;
    struct ub__addr peer;
    uint64_t key; /* in pds->ipdc_by_peer */
    uint16_t id;  /* our spdcid */
    uint16_t tid; /* the target's pdcid, once an ACK told us */
    uint8_t mode;
    uint8_t state;
    uint8_t retx_mode; /* UB_PDS_RETX_* resolved */
    bool on_ready;
    bool lossless; /* ub__pds_lossless_peer: no CC, no probes, a long RTO */
    uint32_t start_psn;
    uint32_t una;        /* lowest PSN not cumulatively acknowledged */
    uint32_t nxt;        /* next new PSN */
    uint32_t mpr;        /* PSNs past una the target can track */
    uint32_t nlost;      /* slots in SLOT_LOST */
    uint32_t lost_scan;  /* no LOST slot below this PSN */
    uint32_t high_acked; /* highest PSN acknowledged (cumulatively or selectively) */
    bool any_acked;
    uint32_t retries; /* consecutive RTOs without progress */
    uint64_t srtt, rttvar, rto_ns;
    uint64_t rto_due; /* when the rto timer is really due; UB_TIME_NEVER: not at all */
    uint64_t txseq;
    uint64_t last_progress;
    uint64_t acked_at;          /* creation, or the last ACK that acknowledged something new */
    struct ub__pds_path *paths; /* num_paths entries */
    uint16_t *dirty;            /* paths whose acked_txseq rose: ndirty entries */
    uint32_t ndirty;
    uint32_t ooo_scan; /* every slot in [una, ooo_scan) is out of flight or was resent since */
    /* The out-of-order count needs a packet acknowledged that left after the one it declares
     * lost (pkt->order: the device's real order, which a device of several paths changes
     * within a batch): acked_order is the latest of the packets acknowledged that went once.
     * [ooo_scan, ooo_hi) was last scanned with acked_order at ooo_order; what of it is still
     * in flight left after that. */
    uint64_t acked_order, ooo_order;
    uint32_t ooo_hi;
    uint32_t *cand;                  /* detect_losses' scratch: wmask + 1 entries */
    struct ub__pkt *q_head, *q_tail; /* waiting for a PSN, linked through pkt->next */
    uint32_t qlen;
    uint32_t wmask; /* slots: wmask + 1 entries, indexed by PSN */
    struct ub__pds_slot *slots;
    uint16_t next_path;      /* control packets' path (CLOSE); ROD's one path */
    struct ub__pds_ccx *ccx; /* shared congestion context; NULL with cc_algo "none" */
    struct ub__list cc_link; /* on ccx->pdcs */
    struct ub__lb lb;        /* chooses every transmission's entropy value */
    bool probed;             /* a tail-loss probe went out since the last progress */
    uint32_t close_psn;      /* CLOSING: the PSN of our CLOSE */
    uint32_t gbn_win; /* go-back-N: packets from una that may be (re)sent; halved per go-back */
    /* Spurious RTO: the congestion window before the first RTO of a series and nxt then. A
     * packet outstanding then and acknowledged before it was resent, or an ACK provoked by its
     * original copy, says the RTO was spurious: the cut is undone. */
    uint64_t undo_cwnd;
    uint32_t undo_nxt;
    bool undo_armed, undo_seen;
    /* A lone repair waits for its verdict: the series' first RTO (selective repair) or a
     * tail-loss probe (go-back-N) resent only the oldest packet; the next ACK that
     * acknowledges something says whether the rest, up to frto_nxt, were lost too (it
     * acknowledges only resent copies) or just late (an original), as F-RTO does for TCP
     * (RFC 5682). */
    bool frto;
    uint32_t frto_nxt;
    /* An RTO's lone repair is due: the next repair to go may pass the congestion window
     * (pds_tx.c ccx_allows). */
    bool lone_go;
    /* A stall, not a loss: the first ACK after the series' first RTO, provoked by an original
     * copy, proved it spurious. The silence it ended (since the last ACK before the RTO: the
     * peer off its CPU, typically) is what an RTO must outlast: rto_floor, at most
     * UB_PDS_RTO_FLOOR_MAX_NS, halved every UB_PDS_RTO_FLOOR_DECAY RTT samples, dropped when a
     * series proves real losses. A series that needed a retransmission never teaches anything
     * (its proof comes after the repair). */
    bool undo_quiet; /* no ACK yet since the series' first RTO */
    uint64_t undo_quiet_since;
    uint64_t rto_floor; /* 0: the configured floor only */
    uint32_t floor_samples;
    bool own_seen; /* an ACK said OWN: responses may ride on this target's ACKs */
    /* The target's incarnation, from the first ACK with a response: with the host it names
     * the peer's device, whose requests to us may come from another port (pds->ipdc_by_dev). */
    bool peer_inc_known;
    uint32_t peer_inc;
};

/* Target context: created by the first packet (SYN) of an initiator PDC. */
struct ub__pds_tpdc {
    struct ub__timer ack_timer;
    struct ub__pkt *ack_q; /* ack_coalesce: its ACK still in the control queue (tag = this) */
    uint64_t ack_q_bm;     /* ... its SACK bitmap and the bitmap's base PSN (sack_base) */
    uint32_t ack_q_base;
    struct ub__list lru; /* pds->tpdc_lru, least recently active first */
    struct ub__pds *pds;
    struct ub__addr peer;     /* where ACKs go: the source of the latest packet */
    uint64_t key;             /* in pds->tpdc_by_key: (host, incarnation, spdcid, mode) */
    struct ub__addr key_addr; /* a source known to give key with the fields below */
    uint16_t id;              /* our pdcid */
    uint16_t ispdcid;         /* the initiator's spdcid */
    uint32_t incarnation;
    uint8_t mode;
    bool retx_seen; /* the packet that triggered the pending ACK was a retransmission */
    bool close_req_sent;
    uint16_t reply_path;
    uint32_t last_nack_psn; /* ROD: the expected PSN we last NACKed, to avoid NACK storms */
    bool nacked;
    bool ecn_seen;
    /* C-AQM echo since the last ACK (ACK_CC cc_type CAQM): any request with the fields, C on
     * any, I kept on all, the hint (lowest of the C-marked ones, else the latest). */
    bool caqm_seen, caqm_c, caqm_i;
    uint16_t caqm_hint;
    uint32_t rcv_nxt;    /* every PSN before it has arrived */
    uint32_t last_psn;   /* the PSN that triggers the next ACK */
    uint32_t unacked;    /* packets since the last ACK */
    uint32_t held;       /* PSNs received beyond the first hole (ACK_CC ooo_count) */
    uint64_t trig_at;    /* when last_psn arrived: the ACK's service time counts from here */
    uint64_t rcvd_bytes; /* wire bytes accepted (ACK_CC rcvd_bytes, 24 bits, wraps) */
    uint64_t last_active;
    uint64_t *bits; /* mp_range bits: PSN p received, for rcv_nxt <= p < rcv_nxt + range */
    /* Responses on ACKs: the initiator sends K (OWN on every ACK), its clear PSN (everything
     * before it was acknowledged to it: cached responses below it are dropped), the cache. */
    bool own_peer, clear_set;
    uint32_t clear_psn;
    struct ub__pds_rspc *rspc; /* UB_PDS_ACK_RSP_CACHE entries, allocated with the first */
    /* Our initiator PDC to the same device (NULL: none), found when pds->dev_gen was twin_gen:
     * its address is where our ACKs go, so they can share datagrams with our requests. */
    struct ub__pds_ipdc *twin;
    uint32_t twin_gen;
};

/* A response that rode on the ACK of psn, for a duplicate of psn. */
struct ub__pds_rspc {
    uint32_t psn;
    uint16_t len; /* 0: empty */
    uint8_t *big; /* UB_PDS_ACK_RSP_MAX bytes: where a response longer than b is kept */
    uint8_t b[UB_PDS_ACK_RSP_INLINE];
};

static inline const uint8_t *ub__pds_rspc_bytes(const struct ub__pds_rspc *e)
{
    return e->len > UB_PDS_ACK_RSP_INLINE ? e->big : e->b;
}

/* A closed target PDC, remembered so that stale packets cannot reopen it. */
struct ub__pds_grave {
    uint64_t key;
    uint32_t end_psn; /* first PSN the closed PDC never received */
    uint64_t until;
    struct ub__list link;
};

struct ub__pds {
    struct ub__pds_cfg cfg;
    struct ub__timers *timers;
    struct ub__pktpool *pool;
    struct ub__rng rng;
    const struct ub__log *log;
    const struct ub__pds_upcalls *up;
    void *up_arg;
    ub__pds_link_req_fn link_req; /* optional, with up_arg */
    ub__pds_link_rsp_fn link_rsp; /* optional, with up_arg */
    ub__pds_peer_rtt_fn peer_rtt; /* may be NULL */
    void *peer_rtt_arg;
    uint32_t incarnation;
    struct ub__hmap ipdc_by_peer, ipdc_by_id;
    struct ub__hmap ipdc_by_dev;    /* (host, peer incarnation): one initiator PDC per device */
    uint32_t dev_gen;               /* bumped whenever ipdc_by_dev changes */
    uint64_t tx_order;              /* the last transmission stamp (pkt->order) */
    struct ub__pds_ipdc *last_ipdc; /* the latest ub__pds_ipdc_get result, while in ipdc_by_peer */
    struct ub__hmap tpdc_by_key, tpdc_by_id;
    struct ub__pds_tpdc *tpdc_last; /* found last by id (requests of a flow share it) */
    struct ub__hmap graves;
    struct ub__list grave_list; /* oldest first */
    struct ub__list tpdc_lru;
    struct ub__list ready; /* initiator PDCs with packets to send */
    struct ub__ring ctlq;  /* ACKs, NACKs, control, RUDI responses, UUD */
    /* Requests emitted as they were sent (ub__pds_tx.now), each a reference for the device;
     * linked through pkt->next, pulled after ctlq, before the ready list's turn. */
    struct ub__pkt *out_head, *out_tail;
    /* LINK packets (pds_link.c) waiting for the driver, in order, through pkt->next; and what
     * each lossless peer's incarnation was when last heard from (struct ub__pds_link_peer). */
    struct ub__pkt *link_head, *link_tail;
    uint32_t link_qlen;
    struct ub__hmap link_peers;
    struct ub__pds_link_peer *link_last;
    uint16_t next_ipdc_id, next_tpdc_id;
    struct ub__hmap ccx_by_key;
    const struct ub__cc_algo *cc_algo; /* NULL: "none" */
    const struct ub__lb_algo *lb_algo;
    struct ub__cc_params cc_params;
    struct ub__pds_stats st;
    /* The RUD request being delivered (ub__pds_dlv_own / _rsp): its PDC (NULL outside an upcall),
     * PSN, whether it carried K and whether its response was attached. */
    struct ub__pds_tpdc *dlv_t;
    uint32_t dlv_psn;
    bool dlv_own, dlv_rsp;
    /* RCCC (pds_rccc.c) */
    bool rccc;                            /* our contexts run on receiver credits */
    struct ub__list rccc_dirty;           /* contexts whose demand may need telling */
    struct ub__rccc_rx rccc_rx;           /* target: the grant pacer, over rccc_slots */
    struct ub__rccc_slot *rccc_slots;     /* NULL until the first CREDIT_REQ */
    struct ub__pds_rccc_peer *rccc_peers; /* where each sender's grants go: same count */
    struct ub__timer rccc_timer;          /* the grant pace */
    uint32_t rccc_npend;                  /* peers with pending credit (ACKs skip the scan) */
};

/* pds_link.c: the link path (ub__pds_cfg.link). */
struct ub__pds_link_peer {
    struct ub__addr addr;
    uint32_t incarnation;
    uint32_t prev; /* the one before (0: none): its late packets are stale */
    bool gone;     /* the carrier reported it gone: packets name none */
};
int ub__pds_link_init(struct ub__pds *pds, uint64_t seed);
void ub__pds_link_fini(struct ub__pds *pds);
/* pkt has its extension header (ext_len bytes) on: the rest of ub__pds_send. */
int ub__pds_link_send(struct ub__pds *pds, const struct ub__pds_tx *tx, struct ub__pkt *pkt,
                      uint32_t ext_len);
void ub__pds_on_link(struct ub__pds *pds, struct ub__pkt *pkt, const struct ub__wire_dgram *d,
                     uint64_t now);
/* Up to max queued LINK packets, each reported acknowledged as it leaves. */
uint32_t ub__pds_link_pull(struct ub__pds *pds, struct ub__pkt **pkts, uint32_t max, uint64_t now);

/* pds.c */
/* p, whose headers parsed as d, goes up as it is, without a PDC (UUD, LINK). */
void ub__pds_deliver_nopdc(struct ub__pds *pds, struct ub__pkt *p, const struct ub__wire_dgram *d,
                           uint8_t mode, uint64_t now);
/* Appends p to the singly linked queue *head .. *tail (the PDC queue, the emitted list, the
 * link queue). */
static inline void ub__pds_list_append(struct ub__pkt **head, struct ub__pkt **tail,
                                       struct ub__pkt *p)
{
    p->next = NULL;
    if (*tail)
        (*tail)->next = p;
    else
        *head = p;
    *tail = p;
}
uint64_t ub__pds_host_key(const struct ub__addr *a);
/* The ipdc_by_dev key of a device: its host and its PDS incarnation. */
static inline uint64_t ub__pds_dev_key(const struct ub__addr *a, uint32_t incarnation)
{
    return ub__pds_host_key(a) ^ ((uint64_t)incarnation << 17);
}
void ub__pds_learn_dev(struct ub__pds_ipdc *c, uint32_t incarnation);
struct ub__pkt *ub__pds_alloc(struct ub__pds *pds);
/* Queues a control packet (ACK, NACK, CTRL); false when the queue was full (p freed). */
bool ub__pds_ctl_push(struct ub__pds *pds, struct ub__pkt *p);
/* A control packet of d's headers, to `to` over path, queued by ub__pds_ctl_push (which drops
 * it when the queue is full). false when no buffer was free or d did not encode: nothing went. */
bool ub__pds_ctl_send(struct ub__pds *pds, const struct ub__wire_dgram *d,
                      const struct ub__addr *to, uint16_t path);
int ub__pds_encode_ack_into(struct ub__pkt *p, const struct ub__pds_ack *a);
/* ub__pds_mark_ready's parts: one PDC that has something to send; every PDC of c's context. */
void ub__pds_mark_one(struct ub__pds_ipdc *c, uint64_t now);
/* psn is in flight again (resent) or back under the out-of-order count: scan it again. */
static inline void ub__pds_ooo_rescan(struct ub__pds_ipdc *c, uint32_t psn)
{
    if (ub__seq_lt(psn, c->ooo_scan))
        c->ooo_scan = psn;
    c->ooo_order = UINT64_MAX; /* nothing scanned under the current evidence */
}
void ub__pds_mark_all(struct ub__pds_ipdc *c, uint64_t now);

/*
 * Puts c on the ready list if it can send now. With a shared congestion context every PDC
 * under it is reconsidered: an event on one (an ACK, a loss) moves the window of all. Inline
 * for the usual case, a PDC alone (without a context, or the only one of its context), after
 * every send and ACK.
 */
static inline void ub__pds_mark_ready(struct ub__pds_ipdc *c, uint64_t now)
{
    const struct ub__list *l = &c->cc_link;
    if (!c->ccx || (l->next == l->prev && l->next == &c->ccx->pdcs)) {
        /* Nothing queued and nothing to repair: nothing to send, whatever the window says. */
        if (!c->on_ready && (c->qlen || c->nlost))
            ub__pds_mark_one(c, now);
        return;
    }
    ub__pds_mark_all(c, now);
}

/* The PDC the last send went to, if it is dst's in mode: most sends go where the previous
 * one went (no call, no hash, no table probe). NULL otherwise. */
static inline struct ub__pds_ipdc *ub__pds_last_ipdc(const struct ub__pds *pds,
                                                     const struct ub__addr *dst, uint8_t mode)
{
    struct ub__pds_ipdc *c = pds->last_ipdc;
    return c && c->mode == mode && ub__addr_eq(&c->peer, dst) ? c : NULL;
}

/* ub__pds_peer.own_ok. */
static inline bool ub__pds_own_ok(const struct ub__pds *pds, const struct ub__addr *dst,
                                  uint8_t mode)
{
    enum ub__pds_retx r = pds->cfg.retx[mode];
    return mode == UB_PDS_RUD && (r == UB_PDS_RETX_SEL_FAST || r == UB_PDS_RETX_SEL_TIMEOUT) &&
           !ub__pds_lossless_peer(&pds->cfg, dst);
}

/* pds_tx.c */
/* The initiator PDC to dst in mode, or NULL (*collision: another peer holds its hash). */
struct ub__pds_ipdc *ub__pds_ipdc_find(const struct ub__pds *pds, const struct ub__addr *dst,
                                       uint8_t mode, bool *collision);
struct ub__pds_ipdc *ub__pds_ipdc_get(struct ub__pds *pds, const struct ub__addr *dst, uint8_t mode,
                                      uint64_t now, int *err);
void ub__pds_ipdc_free(struct ub__pds_ipdc *c, int err, uint64_t now);
uint32_t ub__pds_ipdc_emit(struct ub__pds_ipdc *c, struct ub__pkt **pkts, uint32_t max,
                           uint64_t now);
/*
 * p, which would be alone in c's queue, as ub__pds_ipdc_emit would send it now: 1 taken
 * (*out the reference for the device, or NULL when it stays as a repair), 0 not taken (the
 * window, a closing PDC, no headroom), -1 not taken because the congestion context said no
 * (what ub__pds_ipdc_can_send would say now: nothing to mark ready).
 */
int ub__pds_ipdc_emit_one(struct ub__pds_ipdc *c, struct ub__pkt *p, struct ub__pkt **out,
                          uint64_t now);
bool ub__pds_ipdc_can_send(struct ub__pds_ipdc *c, uint64_t now);
void ub__pds_on_ack(struct ub__pds *pds, const struct ub__pkt *p, const struct ub__wire_dgram *d,
                    uint64_t now);
void ub__pds_on_nack(struct ub__pds *pds, const struct ub__pds_nack *n, uint64_t now);
void ub__pds_on_rudi_resp(struct ub__pds *pds, const struct ub__pkt *p,
                          const struct ub__pds_rudi *r, uint64_t now);
void ub__pds_on_ctrl_close_req(struct ub__pds *pds, const struct ub__pds_ctrl *c, uint64_t now);

/* pds_rccc.c: receiver credits (docs/pds.md, "Receiver credits") */
#define UB_PDS_RCCC_SLOTS 256 /* senders a target grants to at once */
struct ub__pds_rccc_peer {
    uint64_t key;         /* ub__pds_host_key of the sender */
    struct ub__addr addr; /* where its CTRL CREDIT goes */
    uint64_t pending;     /* granted, not yet sent */
    uint16_t path;
    bool used, old; /* old: pending since the previous grant tick */
};
void ub__pds_rccc_init(struct ub__pds *pds);
void ub__pds_rccc_fini(struct ub__pds *pds);
void ub__pds_rccc_enqueue(struct ub__pds_ipdc *c, uint64_t bytes);
void ub__pds_rccc_sent(struct ub__pds_ipdc *c, uint64_t bytes);
uint64_t ub__pds_rccc_blocked(struct ub__pds_ccx *x, bool idle, uint64_t now);
void ub__pds_rccc_ccx_gone(struct ub__pds_ccx *x, const struct ub__pds_ipdc *last);
void ub__pds_rccc_flush(struct ub__pds *pds, uint64_t now);
void ub__pds_rccc_on_ack(struct ub__pds *pds, const struct ub__pkt *p, const struct ub__pds_ack *a,
                         uint64_t now);
bool ub__pds_rccc_on_ctrl(struct ub__pds *pds, const struct ub__pkt *p,
                          const struct ub__pds_ctrl *k, uint64_t now);
void ub__pds_rccc_ack_out(struct ub__pds *pds, const struct ub__addr *to, struct ub__pds_ack *a);

/* pds_rx.c */
void ub__pds_on_req(struct ub__pds *pds, struct ub__pkt *p, const struct ub__wire_dgram *d,
                    uint64_t now);
void ub__pds_on_rudi_req(struct ub__pds *pds, struct ub__pkt *p, const struct ub__wire_dgram *d,
                         uint64_t now);
void ub__pds_on_ctrl(struct ub__pds *pds, const struct ub__pkt *p, const struct ub__wire_dgram *d,
                     uint64_t now);
void ub__pds_tpdc_free(struct ub__pds_tpdc *t, bool graveyard, uint64_t now);
void ub__pds_graves_expire(struct ub__pds *pds, uint64_t now);
int ub__pds_on_trimmed(struct ub__pds *pds, const struct ub__pkt *p, uint64_t now);

#endif
