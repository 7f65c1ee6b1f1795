/*
 * softub's URMA-style programming model: contexts, jettys, segments, work
 * requests and completions. Included by <softub/softub.h>.
 *
 * The model in one paragraph. A context is one endpoint on one device. It
 * registers local memory as segments (protected by a token) and creates
 * jettys: a JFS posts requests, a JFR holds receive buffers, a JFC collects
 * completion records, a JFCE turns completions into a pollable event. Peers
 * exchange plain-byte descriptors out of band (ub_seg_export, ub_jetty_export)
 * and import them: an imported segment (ub_tseg) is a remote memory region
 * one can READ, WRITE and apply atomics to; an imported jetty (ub_tjetty) is a
 * place to SEND messages to. There are no connections: importing a peer costs
 * a few bytes, and one JFS talks to any number of peers.
 *
 * Every call returns 0 (or a count) on success and a negative UB_E* code
 * (<softub/errors.h>) on misuse; the outcome of a request is its completion
 * record's status. Objects are opaque. Every call on a context and the
 * objects created from it takes the context's lock, so any thread may call
 * them (docs/progress.md); the usual design is still one thread per context.
 */
#ifndef SOFTUB_URMA_H
#define SOFTUB_URMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ub_context ub_context;
typedef struct ub_loopnet ub_loopnet; /* an in-process fabric for contexts in one process */
typedef struct ub_jfc ub_jfc;
typedef struct ub_jfce ub_jfce;
typedef struct ub_jfs ub_jfs;
typedef struct ub_jfr ub_jfr;
typedef struct ub_jetty ub_jetty;
typedef struct ub_seg ub_seg;       /* a local registered segment */
typedef struct ub_tseg ub_tseg;     /* an imported (target) segment */
typedef struct ub_tjetty ub_tjetty; /* an imported (target) jetty */

/* ---- contexts ----------------------------------------------------------------------- */

/* How a context makes progress. */
enum ub_progress_mode {
    UB_PROGRESS_MANUAL = 0, /* the application's ub_progress/ub_poll_jfc calls drive everything */
    UB_PROGRESS_AUTO = 1,   /* a per-context thread also drives it (one-sided ops complete alone) */
};

/* Delivery mode of a JFS's traffic (PDS). */
enum ub_transport_mode {
    UB_TM_RUD = 0, /* reliable, unordered delivery, sprayed over paths (default) */
    UB_TM_ROD = 1, /* reliable, ordered delivery on one path */
};

/* Zero fields take defaults. */
struct ub_context_attr {
    uint64_t seed; /* PRNG seed; 0: from the system (getrandom: every process a new incarnation) */
    enum ub_progress_mode progress;
    uint32_t mtu;        /* largest datagram; 0: the device's */
    uint32_t num_paths;  /* entropy values to spray over; 0: the device's */
    ub_loopnet *loopnet; /* required for "loop:N" URIs */
    /*
     * Failure bound: a peer that answers nothing is declared unreachable (its requests
     * complete with UB_CR_PEER_UNREACHABLE) after about timeout_ms (0: the transport's
     * defaults, under a second) spread over `retries` retransmission timeouts (0: 8).
     */
    uint32_t timeout_ms;
    uint32_t retries;
    uint32_t spin_us; /* UB_PROGRESS_AUTO: busy-poll this long after work (the progress thread)
                         or into a ub_wait_jfc (a waiting thread) before sleeping; 0: 50 */
    /* Messages (SEND, SEND_IMM, TSEND) longer than this go by rendezvous; 0: 65536 bytes. */
    uint32_t eager_max;
    /*
     * Response bound: a request whose packets all reached the target but whose response
     * (READ data, atomic value, message acknowledgement) does not come within this long
     * completes with UB_CR_PEER_UNREACHABLE; 0: 2000 ms.
     */
    uint32_t rsp_timeout_ms;
    /*
     * Single copy: WRITE, WRITE_IMM, READ, SEND and SEND_IMM of at least this many bytes to
     * a peer reached through shared memory are copied once, by the target, with cross-memory
     * attach (process_vm_readv/writev), when the kernel permits it both ways; otherwise
     * packets. 0: measured at open, 16-64 KiB (ub_context_stats.cma_min says which);
     * UB_CMA_OFF: never (neither initiate nor serve). The environment
     * variable SOFTUB_CMA=0 turns it off for every context of the process.
     */
    uint32_t cma_min;
    /*
     * Packing: small requests (WRITE, SEND, atomics, READ requests... with at most this many
     * payload bytes) queued to one peer on one JFS share a packet (docs/api.md). 0: 1024
     * bytes; UB_PACK_OFF: one packet per request. SOFTUB_PACK=0 turns it off process-wide.
     */
    uint32_t pack_max;
    /*
     * Congestion control and load balancing of the context's transport (docs/algorithms.md),
     * by name; NULL: the transport's defaults ("nscc", "reps"). cc: "none" (the fixed packet
     * window alone), "nscc", "dcqcn", "caqm", "rccc" (receiver credits alone), or
     * "NAME+rccc" (NAME's window gated by receiver credits). lb: "single", "oblivious",
     * "random", "reps", "bitmap" (at most 256 paths). ROD's PDCs always use one path.
     * ub_context_open fails with UB_EINVAL for a name it does not know. The strings are
     * copied: they need not outlive the open.
     */
    const char *cc;
    const char *lb;
    /*
     * Bursts (docs/algorithms.md, "Bursts"): bytes of new packets that go on one path before
     * the balancer chooses again, at most an N-th of the bytes in flight over N paths. 0: the
     * context's default, 65 000 over udp (a GSO super-datagram: the kernel's cost is per
     * send call and per socket) and every packet elsewhere; 1 (up to a packet): every packet
     * is a choice, as UET sprays.
     */
    uint32_t spray_burst;
};
#define UB_CMA_OFF  0xffffffffu
#define UB_PACK_OFF 0xffffffffu

/*
 * Opens an endpoint (docs/api.md, "Devices and addresses"). uri:
 *   "loop:N"                 port N of attr->loopnet (tests)
 *   "udp://IP:PORT?key=v&.." multipath UDP (docs/device-udp.md: paths, mtu, rcvbuf, ...);
 *                            IPv6 as "udp://[::1]:PORT"; PORT 0: ephemeral; "shm=1" also opens
 *                            a shm endpoint and reaches peers on this host through it
 *   "shm://ID?key=v&.."      shared memory (docs/device-shm.md); ID 1..65535, 0 or empty: any
 *                            free one, a name: mapped to an id by a fixed hash
 * UB_EINVAL for a bad URI, UB_ENOTSUP for a device this build lacks, UB_EBUSY if the
 * address is taken.
 */
int ub_context_open(const char *uri, const struct ub_context_attr *attr, ub_context **out);
/* Destroys everything created from ctx; outstanding requests complete as flushed first. */
int ub_context_close(ub_context *ctx);

/* Runs the protocol once (receive, timers, send); returns how much work it did (>= 0). */
int ub_progress(ub_context *ctx);

/*
 * A file descriptor that polls readable when the context has packets to process (manual
 * progress in the application's own epoll loop: call ub_progress when it fires, and at
 * the latest after ub_context_next_timeout_ms). -1 if the device has none (loop).
 */
int ub_context_fd(ub_context *ctx);
/* Milliseconds until the context's next timer (-1: none, 0: due now). */
int ub_context_next_timeout_ms(ub_context *ctx);
/* The context's address, formatted ("udp:127.0.0.1:4790", "shm:42"); snprintf's result. */
int ub_context_addr(const ub_context *ctx, char *buf, size_t len);

/* Counters of one context (for tools and tests). */
#define UB_STATS_MAX_PATHS 64
struct ub_context_stats {
    uint64_t tx_pkts, tx_bytes, rx_pkts, rx_bytes; /* datagrams through the engine */
    uint64_t rx_malformed;                         /* datagrams that did not parse: dropped */
    uint64_t rx_unsupported; /* parsed, but nothing here serves them: dropped */
    uint64_t retransmits;    /* transport retransmissions */
    uint64_t peers_failed;   /* transport contexts given up (peer unreachable) */
    uint64_t dev_rx_drops;   /* receive drops the device saw (kernel socket buffer full) */
    uint64_t tx_udp_pkts, tx_shm_pkts; /* datagrams handed to each device */
    uint32_t num_paths;
    uint64_t path_tx_pkts[UB_STATS_MAX_PATHS]; /* udp: per entropy value (source port) */
    /* Single copy (cross-memory attach), docs/api.md "Single copy". Initiator: requests
     * sent as single copy, and those the target refused or, tagged, matched to no buffer
     * (then sent as packets). Target: single copies executed, bytes moved, refused, failed
     * at run time, tagged ones that matched no buffer. */
    uint64_t cma_reqs, cma_fallbacks;
    uint64_t cma_done, cma_bytes, cma_refused, cma_errors, cma_unexpected;
    /* Why the transport retransmitted (`retransmits` is their sum): after an RTO, fast
     * (SACK and out-of-order evidence), on a NACK, as a tail-loss probe. RTOs fired, and
     * those the originals' late acknowledgements showed spurious (the peer was slow). */
    uint64_t retx_rto, retx_fast, retx_nack, retx_probe;
    uint64_t rto_fired, rto_undone;
    /* Congestion signals: data packets that arrived CE-marked (this side as target), ACKs
     * that echoed a mark back (this side as initiator). */
    uint64_t rx_ce, acks_ecn_rx;
    /* udp with ring=1: datagrams taken from the packet ring (docs/device-udp.md). */
    uint64_t rx_udp_ring;
    /* Packets to and from shm peers without transport contexts (docs/pds.md, "The link
     * path"), and those dropped as meant for an earlier process under this shm id. */
    uint64_t tx_link, rx_link, rx_link_stale;
    /* udp: the device's system calls that moved datagrams (a send: one sendto, sendmsg or
     * sendmmsg; a receive: one recvmsg or recvmmsg that returned any), the GSO runs it sent
     * (super-datagrams of two packets or more) with their packets, and the GRO runs it
     * received with theirs. Packets per call is the batching (docs/device-udp.md). */
    uint64_t udp_tx_calls, udp_gso_runs, udp_gso_pkts;
    uint64_t udp_rx_calls, udp_gro_runs, udp_gro_pkts;
    /* ACK packets this side sent as a target (a queued ACK rewritten counts once). */
    uint64_t acks_tx;
    /* Single copy's threshold in effect, bytes (0: off): cma_min, or when that is 0 the one
     * measured for this host at open (docs/api.md, "Single copy"). */
    uint64_t cma_min;
};
int ub_context_stats(ub_context *ctx, struct ub_context_stats *out);

/* Asynchronous errors not tied to one request (a peer restarted, a device failed). */
struct ub_async_event {
    int type;     /* UB_ASYNC_* */
    int err;      /* UB_E* */
    uint64_t arg; /* type-specific (e.g. the jetty id) */
};
#define UB_ASYNC_PEER_RESTARTED 1
#define UB_ASYNC_JETTY_ERROR    2
#define UB_ASYNC_DEVICE_ERROR   3
/* Takes the oldest queued event: 1 if one was returned, 0 if none. */
int ub_get_async_event(ub_context *ctx, struct ub_async_event *ev);

/* An in-process fabric ("loop:N" contexts), with optional scripted impairment for tests. */
struct ub_loopnet_attr {
    uint32_t ports;      /* 0: 64 */
    uint32_t mtu;        /* 0: 4096 */
    uint32_t num_paths;  /* 0: 8 */
    uint64_t latency_ns; /* one-way */
    uint64_t seed;
    uint32_t drop_ppm; /* random loss on every direction, parts per million */
};
int ub_loopnet_create(const struct ub_loopnet_attr *attr, ub_loopnet **out);
/* Only after every context on it is closed. */
int ub_loopnet_destroy(ub_loopnet *net);

/* ---- completions ---------------------------------------------------------------------- */

/* Completion record status: what happened to one request. */
enum ub_cr_status {
    UB_CR_SUCCESS = 0,
    UB_CR_LOC_LEN_ERR,      /* a local buffer is too small (e.g. receive buffer for a message) */
    UB_CR_LOC_ACCESS_ERR,   /* a local SGE is outside its segment or lacks the access right */
    UB_CR_REM_ACCESS_ERR,   /* the target refused: out of bounds, or access right missing */
    UB_CR_REM_LEN_ERR,      /* the target's buffer or segment is too small */
    UB_CR_INVALID_TOKEN,    /* the token does not open the remote segment (or it was revoked) */
    UB_CR_RNR,              /* receiver not ready: no receive buffer within the retry bound */
    UB_CR_PEER_UNREACHABLE, /* no answer within the retry bound, or the peer restarted */
    UB_CR_FLUSHED,          /* the jetty was destroyed or errored before the request ran */
    UB_CR_UNSUPPORTED,      /* the target cannot execute this operation */
    UB_CR_REM_OP_ERR,       /* the target failed otherwise */
};
const char *ub_cr_status_str(enum ub_cr_status s);

/* What a completion record completes. */
enum ub_cr_opcode {
    UB_CR_OP_WRITE = 0,
    UB_CR_OP_READ,
    UB_CR_OP_SEND,
    UB_CR_OP_ATOMIC,
    UB_CR_OP_RECV,           /* a message consumed a receive buffer */
    UB_CR_OP_RECV_WRITE_IMM, /* a WRITE_IMM landed in our memory; imm_data says which */
};

#define UB_CR_F_IMM    0x1 /* imm_data is valid */
#define UB_CR_F_TAG    0x2 /* tag is valid (tagged receive) */
#define UB_CR_F_INLINE 0x4

struct ub_cr {
    enum ub_cr_status status;
    enum ub_cr_opcode opcode;
    uint32_t flags;    /* UB_CR_F_* */
    uint32_t length;   /* bytes transferred (received for RECV) */
    uint64_t user_ctx; /* the work request's */
    uint64_t imm_data;
    uint64_t tag;         /* a tagged message's match bits */
    uint32_t local_id;    /* our JFS or JFR id */
    uint32_t remote_id;   /* the peer's JFS id (for receives) */
    uint32_t remote_node; /* the peer's initiator id (for receives) */
};

struct ub_jfc_attr {
    uint32_t depth; /* records it can hold; 0: 1024 */
    ub_jfce *jfce;  /* NULL: no events, poll only */
    uint64_t user_ctx;
};
int ub_jfc_create(ub_context *ctx, const struct ub_jfc_attr *attr, ub_jfc **out);
/* UB_EBUSY while a JFS or JFR still reports to it. */
int ub_jfc_destroy(ub_jfc *jfc);
/* Takes up to max records (running progress first in manual mode); returns how many. */
int ub_poll_jfc(ub_jfc *jfc, int max, struct ub_cr *cr);
/* Asks for one event on the JFCE at the next (solicited-only: next solicited) completion. */
int ub_rearm_jfc(ub_jfc *jfc, bool solicited_only);

/* An event channel: one fd that becomes readable when a rearmed JFC gets a completion. */
int ub_jfce_create(ub_context *ctx, ub_jfce **out);
int ub_jfce_destroy(ub_jfce *jfce);
int ub_jfce_fd(const ub_jfce *jfce);
/*
 * Waits up to timeout_ms (-1: forever, 0: poll) for events; fills jfcs with up
 * to max JFCs that fired (one entry per event). Returns the count.
 */
int ub_wait_jfc(ub_jfce *jfce, int max, int timeout_ms, ub_jfc **jfcs);
/* Acknowledges n events of jfc (events must be acknowledged before destroying it). */
int ub_ack_jfc(ub_jfc *jfc, uint32_t n);

/* ---- jettys ------------------------------------------------------------------------------ */

struct ub_jfs_attr {
    uint32_t depth;      /* berths: requests posted and not yet completed+polled; 0: 256 */
    uint32_t max_sge;    /* 0: 4 */
    uint32_t max_inline; /* bytes of inline data; 0: 256 */
    ub_jfc *jfc;         /* required */
    enum ub_transport_mode tm;
    uint64_t user_ctx;
    uint32_t rnr_retry; /* UB_JFS_F_RNR_RETRY: retries after "receiver not ready"; 0: 7 */
    uint32_t flags;     /* UB_JFS_F_* */
    /* A message the target deferred (no receive buffer) completes with UB_CR_RNR if no buffer
     * is posted within this long; 0: 1000 ms. */
    uint32_t defer_timeout_ms;
};
#define UB_RNR_NO_RETRY 0xffffffffu /* rnr_retry: fail at the first RNR */
/* Messages that find no receive buffer are retried blindly (back-off, rnr_retry times)
 * instead of deferred (the default: the target asks for the message again when a buffer
 * is posted). */
#define UB_JFS_F_RNR_RETRY 0x1u
int ub_jfs_create(ub_context *ctx, const struct ub_jfs_attr *attr, ub_jfs **out);
/* Outstanding requests complete as flushed. */
int ub_jfs_destroy(ub_jfs *jfs);

struct ub_jfr_attr {
    uint32_t depth;    /* receive buffers it can hold; 0: 256 */
    uint32_t max_sge;  /* 0: 4 */
    ub_jfc *jfc;       /* required */
    bool tag_matching; /* buffers carry tags; messages are matched, not taken in order */
    uint32_t id;       /* a fixed id (0: allocated) */
    uint64_t user_ctx;
};
int ub_jfr_create(ub_context *ctx, const struct ub_jfr_attr *attr, ub_jfr **out);
/* Posted buffers complete as flushed. */
int ub_jfr_destroy(ub_jfr *jfr);

/* A jetty: a JFS and a JFR under one id; the JFR may be shared between jettys. */
struct ub_jetty_attr {
    struct ub_jfs_attr jfs;
    struct ub_jfr_attr jfr; /* ignored when shared_jfr is set */
    ub_jfr *shared_jfr;
};
int ub_jetty_create(ub_context *ctx, const struct ub_jetty_attr *attr, ub_jetty **out);
int ub_jetty_destroy(ub_jetty *jetty);
ub_jfs *ub_jetty_jfs(ub_jetty *jetty);
ub_jfr *ub_jetty_jfr(ub_jetty *jetty);
uint32_t ub_jfs_id(const ub_jfs *jfs);
uint32_t ub_jfr_id(const ub_jfr *jfr);

/* Descriptors: plain bytes the application ships to peers any way it likes. */
#define UB_JETTY_DESC_SIZE 64
#define UB_SEG_DESC_SIZE   64
/* Describes where messages to this JFR (or jetty) go. */
int ub_jfr_export(const ub_jfr *jfr, void *desc, size_t len);
int ub_jetty_export(const ub_jetty *jetty, void *desc, size_t len);
/* O(1) state per imported peer; no handshake, no connection. */
int ub_jetty_import(ub_context *ctx, const void *desc, size_t len, ub_tjetty **out);
int ub_jetty_unimport(ub_tjetty *tj);

/* ---- memory -------------------------------------------------------------------------------- */

#define UB_ACCESS_LOCAL_WRITE 0x1 /* the library may write it (READ results, receives) */
#define UB_ACCESS_READ        0x2 /* peers may READ it */
#define UB_ACCESS_WRITE       0x4 /* peers may WRITE it */
#define UB_ACCESS_ATOMIC      0x8 /* peers may apply atomics to it (8-byte aligned words) */

/* Registers [addr, addr+len); token protects remote access (peers must present it). */
int ub_seg_register(ub_context *ctx, void *addr, size_t len, uint32_t access, uint64_t token,
                    ub_seg **out);
/* Revokes remote access at once; requests arriving later fail with UB_CR_INVALID_TOKEN. */
int ub_seg_unregister(ub_seg *seg);
int ub_seg_export(const ub_seg *seg, void *desc, size_t len);
/* The token is the importer's claim; it is checked by the owner on every access. */
int ub_seg_import(ub_context *ctx, const void *desc, size_t len, uint64_t token, ub_tseg **out);
int ub_seg_unimport(ub_tseg *ts);
/* The remote address range an imported segment covers. */
uint64_t ub_tseg_base(const ub_tseg *ts);
uint64_t ub_tseg_len(const ub_tseg *ts);

/* ---- work requests -------------------------------------------------------------------- */

enum ub_opcode {
    UB_OP_WRITE = 0,
    UB_OP_WRITE_IMM,
    UB_OP_READ,
    UB_OP_SEND,
    UB_OP_SEND_IMM,
    UB_OP_TSEND, /* tagged send: matched at a tag-matching JFR */
    UB_OP_ATOMIC_CAS,
    UB_OP_ATOMIC_SWAP,
    UB_OP_ATOMIC_FADD,
    UB_OP_ATOMIC_FSUB,
    UB_OP_ATOMIC_FAND,
    UB_OP_ATOMIC_FOR,
    UB_OP_ATOMIC_FXOR,
    UB_OP_NOP,
};

/* Work request flags. */
#define UB_WR_COMPLETE  0x01 /* produce a completion record (else only errors complete) */
#define UB_WR_SOLICITED 0x02 /* the target's completion raises a solicited event */
#define UB_WR_INLINE    0x04 /* copy the data at post time; SGEs need no segment */
#define UB_WR_FENCE     0x08 /* execute after everything posted before it completed */
#define UB_WR_ORDER_RO \
    0x10 /* relaxed order: after earlier RO/SO of this JFS, blocks nothing else */
#define UB_WR_ORDER_SO     0x20 /* strong order: after every earlier RO and SO of this JFS */
#define UB_WR_INORDER_COMP 0x40 /* complete in posting order */

struct ub_sge {
    void *addr;
    uint32_t len;
    ub_seg *seg; /* the registered segment holding it (not needed for inline data) */
};

struct ub_wr {
    struct ub_wr *next;
    uint64_t user_ctx;
    enum ub_opcode opcode;
    uint32_t flags;     /* UB_WR_* */
    struct ub_sge *sge; /* local data: source of WRITE/SEND, sink of READ */
    uint32_t num_sge;
    uint64_t imm_data; /* WRITE_IMM, SEND_IMM: lands in the target's completion record */
    ub_tjetty *tjetty; /* SEND*, TSEND: where to; WRITE_IMM: JFR for the record */
    union {
        struct {
            ub_tseg *tseg;
            uint64_t addr; /* remote address inside tseg */
        } rma;             /* WRITE, WRITE_IMM, READ */
        struct {
            uint64_t tag; /* TSEND's match bits */
        } send;
        struct {
            ub_tseg *tseg;
            uint64_t addr;    /* 8-byte aligned remote word */
            uint64_t operand; /* swap/add/and/or/xor value; CAS: the new value */
            uint64_t compare; /* CAS only */
            uint64_t *result; /* where the old value lands (may be NULL) */
        } atomic;
    } u;
};

/*
 * Posts a chain. Stops at the first request it cannot take and points
 * *bad_wr at it: UB_EFULL when every berth is taken (a berth frees when the
 * request's completion record has been polled), UB_EINVAL for a malformed
 * request, UB_ENOTSUP for an opcode the JFS cannot do.
 */
int ub_post_send(ub_jfs *jfs, struct ub_wr *wr, struct ub_wr **bad_wr);
int ub_post_jetty_send(ub_jetty *jetty, struct ub_wr *wr, struct ub_wr **bad_wr);

struct ub_rwr {
    struct ub_rwr *next;
    uint64_t user_ctx;
    struct ub_sge *sge;
    uint32_t num_sge;
    uint64_t tag;    /* tag-matching JFR: the bits to match ... */
    uint64_t ignore; /* ... except these (wildcard) */
};
int ub_post_recv(ub_jfr *jfr, struct ub_rwr *wr, struct ub_rwr **bad_wr);
int ub_post_jetty_recv(ub_jetty *jetty, struct ub_rwr *wr, struct ub_rwr **bad_wr);

/* ---- bootstrap: shipping descriptors between processes ------------------------------- */

/*
 * A tiny out-of-band channel for descriptor blobs (tools, tests, demo). A message is at
 * most UB_BOOTSTRAP_MAX_MSG bytes; every call is bounded by its timeout (ms, >= 0).
 *   "tcp://IP:PORT": ub_bootstrap_listen (PORT 0: ephemeral; ub_bootstrap_uri says which)
 *                    then ub_bootstrap_accept (one peer), or ub_bootstrap_connect (retries
 *                    until the timeout while nobody listens)
 * Files: ub_bootstrap_file_put writes a blob atomically (temporary file + rename);
 * ub_bootstrap_file_get waits (inotify, bounded) for it to appear and reads it.
 */
typedef struct ub_bootstrap ub_bootstrap;
#define UB_BOOTSTRAP_MAX_MSG 65536
int ub_bootstrap_listen(const char *uri, ub_bootstrap **out);
int ub_bootstrap_uri(const ub_bootstrap *b, char *buf, size_t len);
/* Waits for one peer; the listener then becomes the connection. UB_ETIMEDOUT. */
int ub_bootstrap_accept(ub_bootstrap *b, int timeout_ms);
int ub_bootstrap_connect(const char *uri, int timeout_ms, ub_bootstrap **out);
/* UB_ETIMEDOUT: nothing of msg sent. Once part of it is sent, the call finishes it, waiting
 * past timeout_ms by at most a second, or fails UB_EIO and the connection is unusable. */
int ub_bootstrap_send(ub_bootstrap *b, const void *msg, size_t len, int timeout_ms);
/* Receives one message into buf: its length, UB_ELENGTH if above cap (the message stays:
 * call again with room for it), UB_ETIMEDOUT, UB_EIO. A message that arrives in part keeps
 * what came across calls (timeout 0 polls safely). */
int ub_bootstrap_recv(ub_bootstrap *b, void *buf, size_t cap, int timeout_ms);
int ub_bootstrap_close(ub_bootstrap *b);
int ub_bootstrap_file_put(const char *path, const void *msg, size_t len);
int ub_bootstrap_file_get(const char *path, void *buf, size_t cap, int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif
