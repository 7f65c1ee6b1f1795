/*
 * SES: softub's transaction layer (URMA semantics) inside the sans-I/O engine.
 *
 * It owns the object model's state (JFC rings, JFS berths, JFR buffers,
 * segments) and turns work requests into SES-headed packets for PDS, executes
 * arriving transactions (placement, atomics, receive-buffer binding, tag
 * matching) under the order engine, answers them, and produces completion
 * records. No sockets, no clocks, no threads: src/api drives it with `now`.
 *
 * Transactions. Every request belongs to an order stream: one per (JFS,
 * destination node), named by a 16-bit id the initiating context allocates.
 * Inside a stream, order_seq numbers transactions 0, 1, 2, ... The softub
 * extension header (version 1) carries the stream, order_seq, the execution
 * order (NO/RO/SO, fence, in-order completion) and a 12-byte tail:
 *
 *   so_delta(16) | ro_count(16) | send_seq(32) | S(1) D(1) R(1) C(1) P(1) A(1) K(1) rsv(1) |
 *   aux(24)
 *
 *   so_delta  order_seq - (order_seq of the last SO before it); stream start
 *             counts as an SO at order_seq -1 that has executed
 *   ro_count  SO only: RO transactions between that SO and this one
 *   send_seq  SEND/TSEND/WRITE_IMM: index among this stream's messages to
 *             the same target JFR (receive buffers are bound in this order)
 *   C         single copy: the payload describes the initiator's memory (ses_cma.c)
 *   S D R     solicited; deferrable (DEFERRED instead of RNR); rendezvous READ or its
 *             data (send_seq then names the target's read)
 *   P         packed: the payload is several whole requests (ses_pack.c)
 *   A K       the initiator takes packed responses; this request's response may ride on
 *             its PDS ACK (docs/wire-format.md 3.4)
 *   aux       WRITE_IMM: the target JFR id whose buffer the record consumes
 *
 * docs/api.md ("Transaction layer") is the reference.
 */
#ifndef UB_SES_SES_H
#define UB_SES_SES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <softub/urma.h>
#include "core/addr.h"
#include "core/hmap.h"
#include "core/list.h"
#include "core/timer.h"
#include "engine/driver.h"
#include "engine/engine.h"

#define UB_SES_WINDOW          4096 /* order_seq window per stream; also the largest JFS depth */
#define UB_SES_TAIL_LEN        12
#define UB_SES_RSP_CACHE       64 /* responses kept per target stream for re-sending */
#define UB_SES_RNR_RETRY       7
#define UB_SES_RNR_BACKOFF_NS  20000ull
#define UB_SES_RNR_MAX_WAIT_NS 2000000ull
/* Default: messages longer than this go by rendezvous (the eager part, then the target's
 * READ of the rest: a round trip more). A target buffers at most this much of an unexpected
 * tagged message; an untagged one without a buffer is deferred, its bytes dropped. 64 KiB
 * is Open MPI's eager limit over TCP too; at 16 KiB a 32 KiB SEND took twice as long. */
#define UB_SES_EAGER_MAX        65536
#define UB_SES_RSP_TIMEOUT_NS   2000000000ull /* default response bound per transaction */
#define UB_SES_DEFER_TIMEOUT_NS 1000000000ull /* default bound on a deferred message */
/* A parked rendezvous message (PENDING) may wait for its buffer as long as the receiver takes:
 * the target says PENDING again this often while it holds one, and the initiator gives the
 * message up after UB_SES_PARK_BOUND_NS (or its response bound, if longer) without word. A
 * target that died meanwhile thus ends the message within a bound. */
#define UB_SES_PARK_REFRESH_NS  500000000ull
#define UB_SES_PARK_BOUND_NS    (4 * UB_SES_PARK_REFRESH_NS)
#define UB_SES_DEFER_MAX        4096 /* deferred messages remembered per JFR (then RNR) */
#define UB_SES_PKT_BUDGET       512  /* packets queued in PDS per peer before the pump waits */
#define UB_SES_POOL_RESERVE     256  /* pool buffers the pump leaves for ACKs and responses */
#define UB_SES_PUMP_BUSY        8    /* busy peers a pump pass passes over without asking */
#define UB_SES_MAX_MSG          0xffffffffull
#define UB_SES_RC_RNR           0x30  /* vendor return code: receiver not ready */
#define UB_SES_RC_DEFERRED      0x31  /* vendor: no buffer; wait for DEFER_RTR (deferrable send) */
#define UB_SES_RC_PENDING       0x32  /* vendor: rendezvous accepted; the target READs later */
#define UB_SES_RC_CMA_REFUSED   0x33  /* vendor: no single copy here; not executed: resend */
#define UB_SES_RC_CMA_EXPIRED   0x34  /* vendor: single copy not done before its valid-until time */
#define UB_SES_CMA_MIN          16384 /* single copy from this size at least (cma_auto_min) */
#define UB_SES_CMA_AUTO_MAX     65536 /* and a measured threshold at most this (eager size) */
#define UB_SES_CMA_BYTES_PER_NS 12    /* threshold: bytes per ns of a copy's fixed part */
#define UB_SES_CMA_HDR          16    /* descriptor: valid_until(64) | nseg(16) | rsv(48) */
#define UB_SES_CMA_SEG          16    /* then per initiator segment: address(64) | length(64) */
#define UB_SES_CMA_MAX_SEG      64    /* segments a descriptor may name */
#define UB_SES_CMA_CHUNK        (4u << 20)  /* bytes per system call at the target */
#define UB_SES_CMA_BUDGET       (32u << 20) /* bytes copied per pump call */
#define UB_SES_CMA_NS_PER_BYTE  4           /* response bound grows by this per byte (250 MB/s) */
#define UB_SES_PACK_MAX         1024 /* default: requests with at most this many payload bytes pack */
#define UB_SES_PACK_RECS        64   /* records per packed packet, at most */
#define UB_SES_PACK_LEN         2    /* record length prefix */
#define UB_SES_PACK_SCAN        256  /* queued requests a pack looks through for members */
#define UB_SES_OS_WINDOW        1024 /* initiator: most slots of a stream's request window */
#define UB_SES_MSG_CACHE        128  /* target: freed messages kept for reuse */
#define UB_SES_PRSP_DATA        64   /* response data bytes (READ, atomic) that pack, at most */
#define UB_SES_RIDE_DATA        512  /* READ data bytes that ride on an ACK, at most */
#define UB_SES_PACK_COOKIE      (1ull << 32) /* PDS cookie of a pack: this bit | pack id (32) */
/* Vendor return code: a tagged single copy that matched no buffer; not executed: resent as
 * packets (ses_msg.c bind_tagged). */
#define UB_SES_RC_CMA_UNEXPECTED 0x35

/* The largest datagram the transaction layer makes: a request of the largest payload its
 * 14-bit length field carries (a response's header is shorter). */
#define UB_SES_MAX_DGRAM \
    (UB_PDS_REQ_SIZE + UB_EXT_SIZE + UB_SES_TAIL_LEN + UB_SES_STD_SIZE + UB_SES_LEN14_MAX)

/* Flags in byte 8 of the extension tail. */
#define UB_SES_TAIL_S      0x80u /* solicited */
#define UB_SES_TAIL_D      0x40u /* deferrable: the target may answer DEFERRED instead of RNR */
#define UB_SES_TAIL_R      0x20u /* rendezvous READ, or its data: send_seq is the target's read id */
#define UB_SES_TAIL_C      0x10u /* single copy: the payload describes the initiator's memory */
#define UB_SES_TAIL_P      0x08u /* packed: the payload is whole requests (records, ses_pack.c) */
#define UB_SES_TAIL_A      0x04u /* on requests: the initiator takes packed responses */
#define UB_SES_TAIL_K      0x02u /* on a request's only packet: its response may ride its ACK */
#define UB_SES_ASYNC_QUEUE 256

/*
 * Whether two addresses name the same peer endpoint as far as packets *from* it go: a
 * multipath UDP peer sends from one socket per path (the source port is the entropy
 * value), so for IP the port is not part of its identity (as ub__pds_host_key; the
 * incarnation tells endpoints on one host apart). Replies still go to the exact source.
 */
static inline bool ub__ses_peer_eq(const struct ub__addr *a, const struct ub__addr *b)
{
    if (a->family != b->family)
        return false;
    if (a->family != UB_AF_INET && a->family != UB_AF_INET6)
        return ub__addr_eq(a, b);
    return a->scope_id == b->scope_id && memcmp(a->ip, b->ip, sizeof(a->ip)) == 0;
}

static inline uint64_t ub__ses_peer_hash(const struct ub__addr *a, uint64_t seed)
{
    struct ub__addr h = *a;
    if (h.family == UB_AF_INET || h.family == UB_AF_INET6)
        h.port = 0;
    return ub__addr_hash(&h, seed);
}

/* Object kinds in the context's table (key = kind << 32 | id). */
enum { UB__OBJ_JFS = 1, UB__OBJ_JFR = 2, UB__OBJ_SEG = 3 };

/* A completion record in a JFC ring, with the berth it releases when polled. */
struct ub__cqe {
    struct ub_cr cr;
    uint64_t owner; /* kind << 32 | id; 0: nothing to release */
    bool solicited;
};

struct ub_jfce {
    struct ub__list link; /* ctx->jfces */
    ub_context *ctx;
    int fd;
    struct ub__list fired; /* JFCs that fired and were not yet returned by ub_wait_jfc */
    uint32_t users;
    /* The fd's counter is non-zero (written since the last read). While a waiter of this JFCE
     * runs a round itself (defer), events only mark the write owed: the waiter takes them at
     * once, and writes the fd only for what it leaves for others (ub_wait_jfc). */
    bool signalled, defer, owed;
    uint64_t signals; /* fd writes, for tests */
};

struct ub_jfc {
    struct ub__list link; /* ctx->jfcs */
    ub_context *ctx;
    struct ub__cqe *ring;
    uint32_t cap, head, count;
    uint32_t committed; /* berths of the JFS/JFR reporting here: never above cap */
    uint32_t users;
    ub_jfce *jfce;
    bool armed, sol_only;
    bool yield;      /* a poll's round: its first record here lets the engine yield (engine.h) */
    uint32_t events; /* delivered through the JFCE, not yet acknowledged */
    uint32_t pending_events;
    struct ub__list fired_link;
    bool on_fired;
    uint64_t user_ctx;
    /* The JFS and JFR whose records were polled last (records come from a few owners):
     * polling finds them without the context's object map; cleared when they are destroyed. */
    ub_jfs *last_jfs;
    ub_jfr *last_jfr;
    struct ub_cr spill; /* what ub__jfc_next hands out were the ring full (never: berths) */
};

/* Work request states (a berth). */
enum { WR_FREE = 0, WR_ACTIVE, WR_DONE_WAIT, WR_REPORTED };

struct ub__ostream;
struct ub__ses_tail;
struct ub__ses_std;

/*
 * Which byte ranges of a transaction arrived (ses_ivl.c): disjoint, sorted half-open
 * intervals, merged as they touch. A duplicate packet (e.g. re-delivered through a
 * re-established PDC) adds no fresh bytes, so completion counts every byte once. A few
 * intervals live inline; more (many holes at once) go to the heap.
 */
#define UB_IVL_INLINE 4
struct ub__ivl {
    uint32_t n, cap; /* cap 0: the inline array */
    uint64_t total;  /* bytes covered */
    uint64_t *heap;
    uint64_t inl[2 * UB_IVL_INLINE];
};
/* Adds [a, b); *fresh: bytes not covered before. UB_ENOMEM leaves t unchanged. */
int ub__ivl_add(struct ub__ivl *t, uint64_t a, uint64_t b, uint64_t *fresh);
void ub__ivl_free_heap(struct ub__ivl *t);
/* Empties t (inline: once per request on both sides, and mostly without a heap array). */
static inline void ub__ivl_reset(struct ub__ivl *t)
{
    if (t->heap)
        ub__ivl_free_heap(t);
    t->n = t->cap = 0;
    t->total = 0;
}
/* Whether [a, b) is entirely covered. */
bool ub__ivl_covers(const struct ub__ivl *t, uint64_t a, uint64_t b);

struct ub__wr {
    /* Kept when the slot is reused (ub__ses_post sets or clears everything from `state` on). */
    struct ub__list order;      /* jfs->unreported: every not yet reported request, posting order */
    struct ub__list txq;        /* ses->txq while it has packets to hand to PDS */
    struct ub__timer rnr_timer; /* RNR back-off */
    struct ub__timer rsp_timer; /* response bound; while deferred: the deferral bound */
    struct ub_jfs *jfs;
    struct ub_sge *sge; /* jfs->attr.max_sge entries */
    uint8_t *inl;       /* jfs->attr.max_inline bytes: the copied inline data */
    struct ub__ivl rd;  /* READ: response bytes placed (emptied when the request finishes) */
    uint32_t gen;
    uint16_t idx;
    uint8_t state;
    bool on_txq;
    uint64_t rsp_due; /* when the bound really ends (rsp_timer may fire earlier) */
    bool rsp_on;      /* the bound applies (else a firing rsp_timer is stale) */
    struct ub__ostream *os;
    enum ub_opcode opcode;
    uint32_t flags;
    uint64_t user_ctx;
    uint32_t num_sge;
    bool is_inline;
    uint64_t len;  /* request bytes (READ: bytes to fetch) */
    uint64_t sent; /* bytes handed to PDS (0-length: 1 once the packet went) */
    uint64_t got;  /* READ: response bytes placed */
    bool first_sent;
    uint32_t seq, send_seq;
    uint16_t so_delta, ro_count;
    uint8_t eo;
    uint8_t ses_op, amo_op, mode;
    struct ub__addr dst;
    uint32_t rkey; /* segment key or JFR id */
    uint32_t aux;  /* WRITE_IMM: the JFR id */
    uint64_t raddr, token, imm, tag;
    uint64_t operand, compare;
    uint64_t *result;
    uint32_t rnr_tries;
    uint32_t eager;            /* rendezvous: bytes sent eagerly (0: not rendezvous) */
    uint64_t rndv_token;       /* rendezvous: what the target's READ must present */
    uint64_t defer_deadline;   /* first deferral + the JFS's bound (0: never deferred) */
    bool deferrable, deferred; /* deferred: paused until DEFER_RTR or the bound */
    bool rtr_early;            /* DEFER_RTR overtook the DEFERRED response */
    bool parked;               /* rendezvous PENDING: the target holds it, no response bound */
    bool cma;                  /* single copy: the target pulls (WRITE) or pushes (READ) */
    bool zc; /* packets of it refer to its source buffer (attached payloads, engine zc_min) */
    uint32_t in_pds; /* its packets PDS holds, queued or not yet acknowledged */
    enum ub_cr_status status;
    uint32_t out_len;
};

struct ub__send_seq {
    uint32_t jfr, next;
};

/* The next send_seq per JFR of a stream, both sides: a few JFRs per stream, so a short array. */
struct ub__send_seqs {
    struct ub__send_seq *v;
    uint32_t n, cap;
};

struct ub__send_seq *ub__send_seq_add(struct ub__send_seqs *t, uint32_t jfr);

/* jfr's entry of t (a new one starts at 0); NULL when it cannot be added (no memory). */
static inline struct ub__send_seq *ub__send_seq_of(struct ub__send_seqs *t, uint32_t jfr)
{
    for (uint32_t i = 0; i < t->n; i++)
        if (t->v[i].jfr == jfr)
            return &t->v[i];
    return ub__send_seq_add(t, jfr);
}

/* Initiator side of an order stream: one per (JFS, destination node). */
struct ub__ostream {
    struct ub_jfs *jfs;
    struct ub__addr dst;
    uint64_t key;
    uint16_t id;
    bool broken; /* its peer failed: new requests open a new stream */
    bool no_cma; /* the target refused single copy once: packets from now on */
    bool orphan; /* out of the tables: freed by its last completion */
    uint32_t next_seq, last_so, ro_since;
    uint32_t outstanding;
    struct ub__send_seqs ss; /* the next send_seq to give, per JFR */
    /* Its active requests by order_seq modulo wmask + 1 (a slot taken by an older one that is
     * still active: that request goes to ses->pending instead, as do those of an orphan). */
    struct ub__wr **win;
    uint32_t wmask;
};

struct ub_jfs {
    struct ub__list link; /* ctx->jfss */
    ub_context *ctx;
    uint32_t id;
    struct ub_jfs_attr attr;
    ub_jfc *jfc;
    ub_jetty *jetty;
    struct ub__wr *wrs;
    uint16_t *free_stack;
    uint32_t nfree;
    uint32_t used; /* berths taken */
    struct ub__list unreported;
    struct ub__hmap ostreams;
    struct ub__ostream *os_last; /* the stream last posted to (most posts go where the last did) */
    struct ub_sge *sge_mem;
    uint8_t *inl_mem;
};

struct ub__rbuf {
    struct ub__list link; /* jfr->posted, or jfr->reserved */
    uint64_t user_ctx;
    struct ub_sge *sge;
    uint32_t num_sge;
    uint64_t cap;
    uint64_t tag, ignore;
    uint32_t idx;
    bool in_use;
};

struct ub_jfr {
    struct ub__list link; /* ctx->jfrs */
    ub_context *ctx;
    uint32_t id;
    struct ub_jfr_attr attr;
    ub_jfc *jfc;
    uint32_t refs; /* jettys using it (sharing it, or its own jetty), plus one for its creator */
    struct ub__rbuf *bufs;
    uint32_t *free_stack;
    uint32_t nfree;
    uint32_t used; /* buffers posted or reserved, plus records not yet polled */
    struct ub__list posted;
    struct ub__list reserved;
    struct ub__list unexpected; /* tagged: messages that matched nothing yet */
    struct ub__list deferred;   /* messages answered DEFERRED, waiting for a buffer (FIFO) */
    uint32_t ndeferred;
    struct ub_sge *sge_mem;
};

struct ub_jetty {
    struct ub__list link; /* ctx->jettys */
    ub_context *ctx;
    ub_jfs *jfs;
    ub_jfr *jfr;
    bool shared_jfr;
};

struct ub_seg {
    struct ub__list link; /* ctx->segs */
    ub_context *ctx;
    uint32_t key;
    uint8_t *addr;
    uint64_t len;
    uint32_t access;
    uint64_t token;
};

struct ub_tseg {
    struct ub__list link; /* ctx->tsegs */
    ub_context *ctx;
    struct ub__addr addr;
    uint32_t key;
    uint32_t access;
    uint64_t base, len;
    uint64_t token;
};

/* An imported jetty: all the state a peer costs (no connection, no per-peer queue). */
struct ub_tjetty {
    struct ub__list link; /* ctx->tjettys */
    ub_context *ctx;
    struct ub__addr addr;
    uint32_t jfr;
    uint32_t flags; /* 1: the JFR matches tags */
};

struct ub__ses_stats {
    uint64_t tx_reqs, tx_req_pkts, tx_rsp_pkts;
    uint64_t rx_req_pkts, rx_rsp_pkts, rx_dup_pkts, rx_bad_pkts, rx_stale_rsp;
    uint64_t executed, rsp_resent, rnr_sent, rnr_retries;
    uint64_t dup_executed; /* target: READs delivered again after they ran, read again */
    uint64_t staged_bytes, rndv_reads;
    uint64_t rndv_sent, rndv_served_pkts, rndv_done, dup_bytes;
    uint64_t rndv_park_refresh; /* target: PENDING said again for a parked message */
    uint64_t rndv_park_dropped; /* target: parked messages let go, their sender failed */
    uint64_t deferred_sent, rtr_sent, rtr_rx, defer_restarts, rsp_timeouts, peer_failed;
    uint64_t cma_reqs;            /* initiator: requests sent as single copy */
    uint64_t cma_fallbacks;       /* initiator: refused or unmatched, sent again as packets */
    uint64_t cma_done, cma_bytes; /* target: single copies executed, bytes moved */
    uint64_t cma_refused, cma_errors, cma_expired; /* target: refused, failed, too late */
    uint64_t cma_unexpected; /* target: tagged single copies that matched no buffer (resent) */
    uint64_t pack_pkts, pack_reqs;       /* initiator: packed packets sent, requests in them */
    uint64_t rx_pack_pkts, rx_pack_recs; /* target: packed packets received, records run */
    uint64_t rx_pack_bad;                /* target: packed packets refused whole (malformed) */
    uint64_t tx_prsp_pkts, tx_prsp_recs; /* target: packed response packets sent, records */
    uint64_t rx_prsp_pkts, rx_prsp_recs; /* initiator: packed responses received, records run */
    uint64_t rx_prsp_bad;                /* initiator: packed responses refused whole */
    uint64_t tx_rsp_ack;                 /* target: responses that rode on a PDS ACK */
    uint64_t rx_fast;                    /* target: usual requests taken whole (fast_req) */
    uint64_t rx_rsp_fast; /* initiator: link-path responses taken whole (ub__ses_link_rsp) */
    uint64_t tx_busy;     /* initiator: requests the pump found held back by their peer's budget */
    uint64_t tx_passed;   /* initiator: queued requests a pump pass passed over (peer busy) */
    uint64_t rd_streamed; /* target: READs whose data the READ pump sent (not answered at once) */
};

/*
 * Single copy (cross-memory attach) between processes of one host, provided by the API
 * layer when the context has a shm device (NULL hooks: never). ses_cma.c.
 */
struct ub__ses_cma {
    void *arg;
    /* 0 and *pid when this process may read and write dst's process memory. */
    int (*peer)(void *arg, const struct ub__addr *dst, pid_t *pid);
    /* One remote range <-> local iov, all or UB_E* (ub__shm_cma_read/write). */
    int (*read)(pid_t pid, uint64_t remote, const struct iovec *iov, uint32_t iovcnt);
    int (*write)(pid_t pid, uint64_t remote, const struct iovec *iov, uint32_t iovcnt);
    /* CLOCK_MONOTONIC now: one clock for every process of the host (valid-until times). */
    uint64_t (*clock)(void *arg);
};

/* A response without data or with a little (atomic value, small READ), waiting to be packed
 * with the others of one progress round to the same initiator (or queued for a buffer). */
struct ub__prsp {
    uint16_t stream;
    uint8_t rc;
    uint8_t n; /* data bytes */
    uint32_t seq, mod_len, off;
    uint8_t data[UB_SES_PRSP_DATA];
};

/* The transaction layer of one context. */
struct ub__tl {
    ub_context *ctx;
    struct ub__engine *eng;
    uint32_t max_payload;      /* request payload per packet */
    uint32_t max_rsp_payload;  /* response payload per packet */
    uint32_t max_prsp_payload; /* records per packed response (its extension is longer) */
    struct ub__list txq;       /* requests with packets to hand out */
    /* txq's changes so far, and their count when a pass of the pump last found only the
     * first busy request's peer behind it (ub__ses_pump_work) */
    uint64_t txq_gen, txq_idle_gen;
    /* Whether txq has held requests to more than one (mode, destination) since it was last
     * empty, and the one it held until then: a pass that finds that peer busy is over. */
    bool txq_mixed;
    uint8_t txq_mode;
    struct ub__addr txq_dst;
    struct ub__list rdq;         /* READ responses with data to hand out */
    struct ub__list rspq;        /* responses that found no buffer yet */
    struct ub__hmap tstreams;    /* target side, by (source, incarnation, stream) */
    struct ub__tstream *ts_last; /* target: the stream last looked up */
    struct ub__list tstream_lru;
    struct ub__hmap ostreams_by_id; /* initiator side, by stream id */
    struct ub__hmap pending;        /* (stream id << 32 | seq) -> struct ub__wr, beyond os->win */
    uint16_t next_stream;
    uint32_t eager_max;      /* messages longer than this go by rendezvous */
    uint64_t rsp_timeout_ns; /* a transaction's response bound */
    struct ub__list rvq;     /* initiator: rendezvous READs being served */
    struct ub__hmap rndv;    /* target: read id -> message whose bulk is being READ */
    uint32_t next_rndv;
    struct ub__ses_cma cma; /* single copy hooks (peer NULL: off) */
    uint32_t cma_min;       /* RMA or untagged message of at least this many bytes: single copy */
    struct ub__list cmaq;   /* target: single copies being executed */
    uint32_t pack_max;      /* requests of at most this many payload bytes pack (0: off) */
    struct ub__hmap packs;  /* pack id -> struct ub__pack: packets PDS has not acked/failed */
    uint32_t next_pack;
    struct ub__addr prsp_dst; /* target: the initiator the responses in prsp go to */
    uint32_t prsp_n, prsp_bytes;
    bool prsp_hold;   /* the pump leaves prsp as it is (ub__ses_pump_held) */
    bool emit_now;    /* the output is taken right after this pump (ub__pds_tx.now) */
    bool fast;        /* the fast paths are on (SOFTUB_FAST=0 turns them off) */
    ub_seg *seg_last; /* target: the segment last looked up (cleared when it is unregistered) */
    ub_jfr *jfr_last; /* target: the JFR a request named last (cleared when it is destroyed) */
    struct ub__rxmsg *msg_live; /* target: a new message kept out of its stream's map until its
                                   first packet is handled (NULL once it is freed) */
    /* Responses on ACKs (docs/wire-format.md 3.4). Initiator: single-packet RUD requests carry
     * K (off: SOFTUB_ACK_RSP=0). Target: while a packet with K is delivered, the response of
     * its transaction (ackr_src, ackr_stream, ackr_seq) goes on its ACK if it is made now. */
    bool ack_rsp;
    uint32_t ack_rsp_busy; /* K only while fewer packets than this wait or fly to the peer */
    bool ackr_on;
    uint16_t ackr_stream;
    uint32_t ackr_seq;
    const struct ub__addr *ackr_src;
    struct ub__ses_stats st;
    /* Initiator: the JFS a PDS cookie named last (cleared when it is destroyed) and the stream
     * a response named last (cleared when it leaves ostreams_by_id). */
    ub_jfs *jfs_last;
    struct ub__ostream *os_last;
    /* The arrays last, the fields above together on few pages: a response (prsp[0]) is
     * gathered every turn, the rest of prsp only by packed rounds. */
    uint32_t nmsg_cache;
    struct ub__prsp prsp[UB_SES_PACK_RECS];
    struct ub__rxmsg *msg_cache[UB_SES_MSG_CACHE]; /* target: freed messages, for reuse */
};

struct ub_context {
    struct ub__engine eng;
    struct ub__tl ses;
    struct ub__dev *dev;
    ub_loopnet *net;
    uint16_t port;
    struct ub__addr addr;
    struct ub__hmap objs; /* JFS, JFR, segments by kind and id */
    struct ub__list jfces, jfcs, jfss, jfrs, jettys, segs, tsegs, tjettys;
    struct ub__drive_stats drive;
    struct ub__list zombie; /* ub_loopnet's list of closed contexts whose buffers are still out */
    uint32_t next_id;
    /* UB_SES_ASYNC_QUEUE events: storage the API layer keeps at the end of its context, after
     * the fields every poll touches (4 KiB that would split them across pages). */
    struct ub_async_event *async;
    uint32_t async_head, async_count;
    uint64_t async_dropped;
    uint64_t drive_rounds;
    uint64_t cr_pushed; /* completion records pushed so far, into any JFC (a round's news) */
    /* Plain WRITEs (no record) executed here so far: news too, for an application that polls
     * the memory they change (a WRITE ping-pong answers as a SEND one does). */
    uint64_t writes_placed;
    struct ub_context_attr attr;
    bool closing;
};

/* ---- ses.c ---- */
int ub__ses_init(struct ub__tl *s, ub_context *ctx);
void ub__ses_fini(struct ub__tl *s);
/* Hands pending request and response packets to PDS, as far as budgets allow. */
void ub__ses_pump_work(struct ub__tl *s, uint64_t now);
/* Whether w goes to dst in mode: one peer as PDS's budgets count it (the pump's unit). */
static inline bool ub__ses_wr_to(const struct ub__wr *w, uint8_t mode, const struct ub__addr *dst)
{
    return w->mode == mode && ub__addr_eq(&w->dst, dst);
}

/* w joins / leaves s->txq. */
static inline void ub__ses_txq_add(struct ub__tl *s, struct ub__wr *w)
{
    if (ub__list_empty(&s->txq)) {
        s->txq_mixed = false;
        s->txq_mode = w->mode;
        s->txq_dst = w->dst;
    } else if (!s->txq_mixed && !ub__ses_wr_to(w, s->txq_mode, &s->txq_dst)) {
        s->txq_mixed = true;
    }
    ub__list_push_back(&s->txq, &w->txq);
    w->on_txq = true;
    s->txq_gen++;
}

static inline void ub__ses_txq_del(struct ub__tl *s, struct ub__wr *w)
{
    ub__list_remove(&w->txq);
    w->on_txq = false;
    s->txq_gen++;
}

/* Returns whether anything was queued. */
static inline bool ub__ses_pump(struct ub__tl *s, uint64_t now)
{
    /* Nothing queued (an idle poll): every pump would find its list empty and do nothing.
     * Inline: an idle poll pays no call for it. */
    if (ub__list_empty(&s->txq) && ub__list_empty(&s->rspq) && ub__list_empty(&s->rdq) &&
        ub__list_empty(&s->rvq) && ub__list_empty(&s->cmaq) && !s->prsp_n)
        return false;
    ub__ses_pump_work(s, now);
    return true;
}
/* The same; with hold, the responses gathered stay in prsp (held output: src/api/hold.c). */
static inline void ub__ses_pump_held(struct ub__tl *s, uint64_t now, bool hold)
{
    /* Only held responses (a ping-pong's round, whose record the application waits for):
     * nothing would move. */
    if (hold && ub__list_empty(&s->txq) && ub__list_empty(&s->rspq) && ub__list_empty(&s->rdq) &&
        ub__list_empty(&s->rvq) && ub__list_empty(&s->cmaq))
        return;
    s->prsp_hold = hold;
    ub__ses_pump(s, now);
    s->prsp_hold = false;
}
uint64_t ub__obj_key(uint32_t kind, uint32_t id);
void ub__async_push(ub_context *ctx, int type, int err, uint64_t arg);

/* ---- ses_cq.c: completion rings ---- */
/*
 * The record the next ub__jfc_commit appends, filled in place by the caller: a record built
 * elsewhere and copied in stalls the copy's wide loads on the narrow stores that have just
 * written it (no store forwarding), ~5 % of a stream of small WRITEs. Nothing else may
 * append to jfc in between. Rings are sized for every berth; were one full, this is a
 * scratch record the commit drops.
 */
static inline struct ub_cr *ub__jfc_next(ub_jfc *jfc)
{
    if (jfc->count == jfc->cap)
        return &jfc->spill;
    uint32_t at = jfc->head + jfc->count; /* head < cap and count < cap: below 2 cap */
    return &jfc->ring[at >= jfc->cap ? at - jfc->cap : at].cr;
}
/* Appends cr, the record ub__jfc_next handed out (owner: whose berth it holds). */
void ub__jfc_commit(ub_jfc *jfc, const struct ub_cr *cr, uint64_t owner, bool solicited);
/* Makes the JFCE's fd readable. */
void ub__jfce_signal(ub_jfce *ce);
int ub__jfc_take(ub_jfc *jfc, int max, struct ub_cr *out);

/* ---- ses_init.c: the initiator ---- */
int ub__ses_post(ub_jfs *jfs, const struct ub_wr *wr, uint64_t now);
/* Completes every not yet reported request of jfs as flushed. */
void ub__ses_jfs_flush(ub_jfs *jfs, uint64_t now);
/* A reported request's berth is free again (its record was polled). Inline: the JFC poll
 * calls it per record. */
static inline void ub__ses_wr_release(ub_jfs *jfs, uint16_t idx)
{
    struct ub__wr *w = &jfs->wrs[idx];
    if (w->state != WR_REPORTED)
        return;
    w->state = WR_FREE;
    w->gen++;
    jfs->free_stack[jfs->nfree++] = idx;
    jfs->used--;
}
/* A response (SES header r) to transaction seq of stream, from src, with its payload. */
struct ub__ses_rsp_in {
    uint16_t stream;
    uint32_t seq;
    const struct ub__ses_rsp_data *r;
    const struct ub__addr *src;
    const uint8_t *payload;
    uint32_t payload_len;
};
void ub__ses_rsp_in(struct ub__tl *s, const struct ub__ses_rsp_in *in, uint64_t now);
void ub__ses_on_rsp(struct ub__tl *s, const struct ub__pds_rx *rx, uint64_t now);
/* The link path's usual response (ub__wire_link_rsp) from src: taken (true) unless the fast
 * paths are off (SOFTUB_FAST=0: false, it is parsed and delivered as any other). */
bool ub__ses_link_rsp(struct ub__tl *s, const struct ub__addr *src,
                      const struct ub__wire_link_rsp *r, uint64_t now);
void ub__ses_on_acked(struct ub__tl *s, uint64_t cookie, uint64_t now);
void ub__ses_on_failed(struct ub__tl *s, uint64_t cookie, int err, uint64_t now);
/* dst is gone (a shm peer's process died): every request to it completes PEER_UNREACHABLE,
 * and the rendezvous messages it left parked here are let go. */
void ub__ses_peer_gone(struct ub__tl *s, const struct ub__addr *dst);
/* The link path heard a new process at dst (PDS's restarted upcall): the async
 * UB_ASYNC_PEER_RESTARTED event, and, unless the old one was noticed gone (its requests have
 * failed then), every request to dst fails as in ub__ses_peer_gone. */
void ub__ses_peer_restarted(struct ub__tl *s, const struct ub__addr *dst, bool noticed);
/* The active request (stream, seq) of this context, or NULL. */
struct ub__wr *ub__ses_pending(struct ub__tl *s, uint16_t stream, uint32_t seq);
/* A target's DEFER_RTR for the request whose restart token is token. */
void ub__ses_on_rtr(struct ub__tl *s, const struct ub__addr *src, uint64_t token, uint64_t now);
/* (Re)arms w's response bound from now. */
void ub__ses_wr_arm_rsp(struct ub__tl *s, struct ub__wr *w, uint64_t now);
/* Copies n bytes at message offset off out of the request's data. */
void ub__ses_gather(const struct ub__wr *w, uint64_t off, uint8_t *dst, uint32_t n);

/* ---- ses_rndv.c: rendezvous (both sides) ---- */
/* Initiator: the target's READ of a rendezvous message's bulk arrived. */
void ub__ses_rndv_serve(struct ub__tl *s, const struct ub__pds_rx *rx, const struct ub__ses_tail *t,
                        uint64_t now);
/* Initiator: hands out READ data of rendezvous messages; false when out of buffers. */
bool ub__ses_rndv_pump(struct ub__tl *s, uint64_t now);
/* Initiator: drops serving jobs of a request that is over. */
void ub__ses_rndv_forget(struct ub__tl *s, const struct ub__wr *w);
void ub__ses_rndv_fini(struct ub__tl *s);
/* Sends a request-less packet (DEFER_RTR, rendezvous READ) to dst; 0 or UB_E*. */
int ub__ses_send_ctl(struct ub__tl *s, const struct ub__addr *dst, const struct ub__ses_std *q,
                     uint16_t stream, uint32_t seq, const struct ub__ses_tail *t, uint64_t cookie,
                     uint64_t now);
/*
 * A packet holding an SES response-with-data header (seq, rc, mod_len, off) and room for n
 * data bytes at *data (data NULL: no room, the caller attaches the n bytes). UB_ENOBUFS when
 * the pool is empty.
 */
int ub__ses_rsp_data_pkt(struct ub__tl *s, uint32_t seq, uint8_t rc, uint32_t mod_len, uint32_t off,
                         uint32_t n, struct ub__pkt **out, uint8_t **data);
/* Sends a response with data and an R tail (rendezvous READ data or refusal). */
int ub__ses_send_rdata(struct ub__tl *s, const struct ub__addr *dst, uint16_t stream, uint32_t seq,
                       uint32_t read_id, uint8_t rc, uint32_t mod_len, struct ub__wr *w,
                       uint64_t off, uint32_t n, uint64_t now);
/*
 * Attaches bytes [off, off + n) of w's payload to p by reference when they are worth it
 * (engine zc_min) and lie in one SGE; w then counts as zero-copy (its completion copies in
 * what PDS still holds, ub__pds_flatten). False: they must be copied.
 */
bool ub__ses_attach(const struct ub__tl *s, struct ub__wr *w, struct ub__pkt *p, uint64_t off,
                    uint32_t n);
/* Whether n bytes of payload are worth attaching rather than copying (engine zc_min). */
static inline bool ub__ses_zc_size(const struct ub__tl *s, uint32_t n)
{
    uint32_t zc = s->eng->cfg.zc_min;
    return zc && n >= zc;
}
/* Hands out this request's next packets; false when PDS or the pool is full. */
bool ub__ses_wr_pump(struct ub__tl *s, struct ub__wr *w, uint64_t now);
void ub__ses_wr_init_timer(struct ub__wr *w);

/* The PDS cookie of w's packets, and the active request a cookie names (or NULL). */
uint64_t ub__ses_wr_cookie(const struct ub__wr *w);
struct ub__wr *ub__ses_wr_of_cookie(struct ub__tl *s, uint64_t cookie);
/* The same in two steps: the JFS a cookie names (one lookup for several cookies of one JFS),
 * then the request in it. */
ub_jfs *ub__ses_jfs_of_cookie(struct ub__tl *s, uint64_t cookie);
struct ub__wr *ub__ses_wr_in_jfs(ub_jfs *jfs, uint64_t cookie);
/* PDS acknowledged the last packet of w (NULL: over already): restarts its response bound. */
void ub__ses_wr_acked(struct ub__tl *s, struct ub__wr *w, uint64_t now);
/* Appends w's SES header and bytes [off, off+n) to p (one request packet, or one record).
 * attach: the bytes may be attached by reference (engine zc_min) instead of copied; nothing
 * may be appended to p after that. */
int ub__ses_build_req(struct ub__tl *s, struct ub__wr *w, struct ub__pkt *p, uint64_t off,
                      uint32_t n, bool attach);
/* w's softub extension (version 1; tail: UB_SES_TAIL_LEN bytes the extension points to). */
void ub__ses_wr_ext(const struct ub__wr *w, struct ub__ext *ext, uint8_t *tail);
/* Only its tail (UB_SES_TAIL_LEN bytes at tail). */
void ub__ses_wr_tail(const struct ub__wr *w, uint8_t *tail);
/* n more bytes of w went to PDS (arms the response bound once all are out). */
void ub__ses_wr_sent(struct ub__tl *s, struct ub__wr *w, uint32_t n, uint64_t now);

/* ---- ses_pack.c: several small requests in one packet (docs/wire-format.md 6.1) ---- */
enum { UB_PACK_NONE = 0, UB_PACK_SENT, UB_PACK_BUSY, UB_PACK_STOP };
/* Initiator: sends w with the queued requests of its stream that fit behind one PDS header:
 * UB_PACK_NONE (w goes alone), _SENT, _BUSY (its peer is busy), _STOP (out of buffers). */
int ub__ses_pack_pump(struct ub__tl *s, struct ub__wr *w, uint64_t now);
/* Initiator: PDS acked / failed a packed packet: every member request learns it. */
void ub__ses_pack_acked(struct ub__tl *s, uint64_t cookie, uint64_t now);
void ub__ses_pack_failed(struct ub__tl *s, uint64_t cookie, int err, uint64_t now);
void ub__ses_pack_fini(struct ub__tl *s);
/* Target: a packed packet arrived: all records well-formed, then each run as if alone. */
void ub__ses_pack_on_req(struct ub__tl *s, const struct ub__pds_rx *rx, uint64_t now);
/* Target: sends n responses (2..UB_SES_PACK_RECS) to dst in one packed response; 0 or UB_E*
 * (nothing sent). */
int ub__ses_prsp_send(struct ub__tl *s, const struct ub__addr *dst, const struct ub__prsp *r,
                      uint32_t n, uint64_t now);
/* Writes r as a version-0 extension (incarnation inc), a response with data and its data at
 * x0 (UB_EXT_SIZE + UB_SES_RSP_DATA_SIZE + r->n bytes; rc, n and job_id already checked). */
void ub__ses_prsp_put(uint8_t *x0, const struct ub__prsp *r, uint32_t job_id, uint32_t inc);
/* The same with n bytes of data from data instead of r's own (n at most UB_SES_LEN14_MAX). */
void ub__ses_rsp_put(uint8_t *x0, const struct ub__prsp *r, const uint8_t *data, uint32_t n,
                     uint32_t job_id, uint32_t inc);
/* Initiator: a packed response arrived: all records well-formed, then each as if alone. */
void ub__ses_pack_on_rsp(struct ub__tl *s, const struct ub__pds_rx *rx, uint64_t now);
/* Bytes a response with n data bytes takes in a packed response. */
#define UB_SES_PRSP_REC(n) (UB_SES_PACK_LEN + UB_EXT_SIZE + UB_SES_RSP_DATA_SIZE + (n))
/* Whether a delivered packet is a packed one (version-1 extension with the P bit). Inline:
 * every delivered packet asks. */
static inline bool ub__ses_is_pack(const struct ub__wire_dgram *d)
{
    return d->ext.version >= 1 && d->ext.tail_len >= UB_SES_TAIL_LEN &&
           (d->ext.tail[8] & UB_SES_TAIL_P) != 0;
}
/* One parsed record: its extension, SES header and payload (pointing into the packet). */
struct ub__ses_prec {
    struct ub__ext ext;
    struct ub__ses ses;
    const uint8_t *payload;
    uint32_t payload_len;
};
/* Parses the record at *p (n bytes left); its size, or UB_EBADMSG / UB_ETRUNC. */
int ub__ses_pack_rec(const uint8_t *p, size_t n, struct ub__ses_prec *rec);
/* Checks a packed payload: 1..UB_SES_PACK_RECS well-formed records filling exactly n bytes.
 * Their count, or UB_EBADMSG / UB_ETRUNC. */
int ub__ses_pack_check(const uint8_t *p, size_t n);
/* Parses the response record at *p (n bytes left); its size, or UB_EBADMSG / UB_ETRUNC. */
int ub__ses_prsp_rec(const uint8_t *p, size_t n, struct ub__ses_prec *rec);
/* Checks a packed response's payload as ub__ses_pack_check does a packed request's. */
int ub__ses_prsp_check(const uint8_t *p, size_t n);

/* ---- the target: ses_tgt.c, ses_rsp.c (responses, READ streaming), ses_msg.c ---- */
void ub__ses_on_req(struct ub__tl *s, const struct ub__pds_rx *rx, uint64_t now);
/* The link path's usual request from src, taken whole when it is a SEND that
 * ub__ses_on_req's fast path would take (true); false: nothing done, deliver it. */
bool ub__ses_link_req(struct ub__tl *s, const struct ub__addr *src,
                      const struct ub__wire_link_req *r, uint64_t now);
/* Sends the responses gathered for packing (end of a pump). */
void ub__ses_rsp_flush(struct ub__tl *s, uint64_t now);
bool ub__ses_rd_pump(struct ub__tl *s, uint64_t now);
/* A receive buffer was posted: bind waiting messages (tagged unexpected ones first). */
void ub__ses_jfr_posted(ub_jfr *jfr, uint64_t now);
/* Whether ub__ses_jfr_posted has anything to do (and so looks at the time): only with messages
 * waiting for a buffer (deferred SENDs, unexpected tagged ones). Else the poster skips it. */
static inline bool ub__ses_jfr_posted_needs_now(const ub_jfr *jfr)
{
    return jfr->attr.tag_matching ? !ub__list_empty(&jfr->unexpected) : jfr->ndeferred != 0;
}
/* Flushes posted, reserved and unexpected state of a JFR being destroyed. */
void ub__ses_jfr_flush(ub_jfr *jfr, uint64_t now);
void ub__ses_tgt_fini(struct ub__tl *s);
/* Drops target streams idle for long (called from progress). */
void ub__ses_tgt_gc(struct ub__tl *s, uint64_t now);
/* Target: READ data (or a refusal) for a rendezvous message arrived. */
void ub__ses_rndv_on_data(struct ub__tl *s, const struct ub__pds_rx *rx,
                          const struct ub__ses_tail *t, uint64_t now);
/* Target: the rendezvous READ with this id failed in PDS (the initiator is gone). */
void ub__ses_rndv_failed(struct ub__tl *s, uint32_t read_id, uint64_t now);
/* Target: src is gone; the messages it left parked here are let go (nothing of them could be
 * READ). Its exact address: another process on its host keeps its own. */
void ub__ses_rndv_peer_gone(struct ub__tl *s, const struct ub__addr *src);

/* ---- ses_cma.c: single copy (both sides) ---- */
/* Initiator: whether w (WRITE, WRITE_IMM, READ) goes by single copy. */
bool ub__ses_cma_choose(struct ub__tl *s, const struct ub__wr *w);
/* The single-copy threshold for a host whose single copy costs cost_ns before its first byte
 * (ub__shm_cma_cost_ns; 0: unknown, UB_SES_CMA_MIN). */
uint32_t ub__ses_cma_auto_min(uint64_t cost_ns);
/* Initiator: appends w's descriptor (valid until `until`) at d; returns its size. */
uint32_t ub__ses_cma_desc_len(const struct ub__wr *w);
void ub__ses_cma_desc_put(const struct ub__wr *w, uint64_t until, uint8_t *d);
/* Initiator: w's response bound (longer for single copies: the copy takes time). */
uint64_t ub__ses_cma_bound(const struct ub__tl *s, const struct ub__wr *w);
/* Target: copies a share of the single copies in execution; whether work is left. */
bool ub__ses_cma_pump(struct ub__tl *s, uint64_t now);
void ub__ses_cma_fini(struct ub__tl *s);

/* ---- ses_seg.c ---- */
/* Whether [p, p+len) lies in seg. */
bool ub__seg_covers(const ub_seg *seg, const void *p, uint64_t len);

/* The packed SES extension tail. */
struct ub__ses_tail {
    uint16_t so_delta, ro_count;
    uint32_t send_seq, aux; /* aux: UB_SES_TAIL_* flags << 24 | 24-bit JFR id */
};
/* Inline: every request and response packet carries one. */
static inline void ub__ses_tail_put(uint8_t *b, const struct ub__ses_tail *t)
{
    ub__st16(b, t->so_delta);
    ub__st16(b + 2, t->ro_count);
    ub__st32(b + 4, t->send_seq);
    ub__st32(b + 8, t->aux);
}
/* Hands p to PDS under a version-1 extension (stream, seq, tail t); frees p if PDS refuses
 * it. 0 or PDS's error. */
int ub__ses_send_v1(struct ub__tl *s, struct ub__pds_tx *tx, uint16_t stream, uint32_t seq,
                    const struct ub__ses_tail *t, struct ub__pkt *p, uint64_t now);
static inline void ub__ses_tail_get(const uint8_t *b, struct ub__ses_tail *t)
{
    t->so_delta = ub__ld16(b);
    t->ro_count = ub__ld16(b + 2);
    t->send_seq = ub__ld32(b + 4);
    t->aux = ub__ld32(b + 8);
}

#endif
