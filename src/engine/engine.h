/*
 * The engine: softub's protocol stack for one endpoint, sans I/O.
 *
 * It never opens a socket or reads a clock. A driver (a progress loop over a
 * real device, a test bed, the simulator's host) moves packets and time:
 *
 *   ub__engine_input(e, pkts, n, now)   received datagrams in; the engine
 *                                       takes the references (and may keep
 *                                       the last few for later: a yield)
 *   ub__engine_output(e, pkts, max, now) datagrams to transmit out, in
 *                                       order; the caller gets the references
 *   ub__engine_next_deadline(e)         when the engine next wants to run
 *   ub__engine_expire(e, now)           run the timers due by now
 *
 * Time is integer nanoseconds, monotonic, supplied by the driver; all
 * randomness comes from the engine's rng, seeded from the configuration.
 * Equal seeds and equal inputs give equal outputs, byte for byte.
 *
 * Reliable delivery is the PDS layer (e->pds: RUD, ROD, RUDI, UUD), which
 * the transaction layer drives. Besides it the engine offers a bare
 * unreliable datagram (PDS UUD + SES DGRAM_SEND, no extension header) that
 * the self-test and the device tests use.
 */
#ifndef UB_ENGINE_ENGINE_H
#define UB_ENGINE_ENGINE_H

#include <stdint.h>

#include "core/addr.h"
#include "core/log.h"
#include "core/pktbuf.h"
#include "core/rand.h"
#include "core/ring.h"
#include "core/timer.h"
#include "pds/pds.h"

/* Zero fields take the defaults below. */
struct ub__engine_cfg {
    uint64_t seed;
    uint32_t mtu;       /* largest datagram, all headers included */
    uint32_t num_paths; /* entropy values the device offers */
    uint32_t pool_bufs; /* packet buffers owned by the engine */
    uint32_t txq_cap;   /* datagrams waiting for the driver */
    uint32_t job_id;    /* SES job id stamped on outgoing requests (24 bits) */
    /*
     * Small packets of one output batch for the same destination and path leave as one
     * datagram bundle (wire/bundle.h): fewer system calls and trips through the kernel's
     * stack. Bundles are always accepted on input.
     */
    bool bundle;
    /*
     * Request payloads of at least this many bytes that lie in one piece of the source
     * buffer are attached to their packets by reference (ub__pkt_attach) instead of being
     * copied: for a device that gathers (udp: one more iovec), the copy into the packet
     * buffer goes. 0: always copied. Below a few KiB the copy is cheaper than the iovec.
     */
    uint32_t zc_min;
    const struct ub__log *log; /* may be NULL */
    struct ub__pds_cfg pds;    /* packet delivery; zero fields take its defaults */
};

#define UB_ENGINE_DEFAULT_MTU   4096
#define UB_ENGINE_DEFAULT_PATHS 1
#define UB_ENGINE_DEFAULT_POOL  4096
#define UB_ENGINE_DEFAULT_TXQ   1024
/* Room in front of every packet: lower layers may prepend (TSS) without a copy (64), and a
 * bundle is built in its last member's buffer, the packets before it copied in front (256: a
 * ping-pong's answer before the ACK it goes with, engine.c bundle_make). */
#define UB_ENGINE_HEADROOM      (64 + 256)
#define UB_ENGINE_BUNDLE_MEMBER 1024        /* packets up to this size are bundled */
#define UB_ENGINE_HOLD_MAX_NS   10000000ull /* a refused shm datagram is retried this long */
/* ... then, on the link path (kept, not dropped), once per this long: a receiver that does
 * not drain must not keep a progress thread spinning. */
#define UB_ENGINE_HOLD_RETRY_NS 1000000ull
#define UB_ENGINE_PARKED_MAX    8 /* peers parked one by one; at more, all shm peers are */
/* Parked peers' packets kept at most (and at most half the held ring): past it the output
 * takes nothing new, and back-pressure reaches the layers above as before the parking. */
#define UB_ENGINE_PARKED_BACKLOG 256u
/* A yield is honoured only when at most this many received datagrams are left behind:
 * a ping-pong's batch (the request, a response, an ACK), never a stream's. */
#define UB_ENGINE_YIELD_REST 4
/* ... and, unless the driver takes answers alone (shm), only in a ping-pong: at most this
 * many of our own packets in flight on the last PDC (engine.c, pingpong()). */
#define UB_ENGINE_PINGPONG_OUT 2u

/*
 * What the engine counted. Every received packet lands in exactly one rx_* outcome (the
 * packets of a bundle one by one; a malformed bundle as one malformed packet). tx_pkts
 * counts packets before bundling.
 */
struct ub__engine_stats {
    uint64_t rx_pkts, rx_bytes;
    uint64_t rx_delivered;   /* handed to a service */
    uint64_t rx_malformed;   /* failed to parse: dropped */
    uint64_t rx_unsupported; /* well formed, but nothing here serves it: dropped */
    uint64_t tx_pkts, tx_bytes;
    uint64_t tx_queue_full;   /* sends refused: the output queue was full */
    uint64_t tx_nobufs;       /* sends refused: the packet pool was empty */
    uint64_t tx_held;         /* datagrams a full shm lane gave back, kept for the next output */
    uint64_t tx_hold_expired; /* of those, dropped after UB_ENGINE_HOLD_MAX_NS still refused */
    uint64_t tx_hold_parked;  /* link path: parkings (peers held back HOLD_RETRY_NS instead) */
    uint64_t timers_fired;
    uint64_t tx_bundles, tx_bundled; /* bundles sent, packets inside them */
    uint64_t rx_bundles, rx_bundled; /* well-formed bundles received, packets inside them */
    uint64_t rx_yields; /* input stopped early for the layer above; the rest kept for later */
    uint64_t rx_split;  /* of them, in a bundle: its records after the one that yielded */
    uint64_t rx_alone;  /* first datagrams taken from the device alone (rx_one_first) */
};

/* A received datagram, as a service sees it. The bytes are valid during the upcall only. */
struct ub__dgram_in {
    const struct ub__addr *src;
    uint32_t initiator; /* sender-chosen id, e.g. its endpoint index */
    uint16_t path;
    uint8_t ecn;
    const uint8_t *data;
    uint32_t len;
    uint64_t header_data; /* 8 bytes of immediate data travelling with the datagram */
};

struct ub__engine_upcalls {
    void (*dgram)(void *arg, const struct ub__dgram_in *d, uint64_t now);
};

struct ub__engine {
    struct ub__engine_cfg cfg;
    struct ub__rng rng;
    struct ub__timers timers;
    struct ub__pktpool pool;
    struct ub__ring txq;
    struct ub__ring held; /* given back by the driver (full shm lanes): out first, in order */
    uint64_t held_min_ts; /* no held packet first went out before this */
    /*
     * Link path: the peers whose held packets were refused past UB_ENGINE_HOLD_MAX_NS
     * (parked_all: more than UB_ENGINE_PARKED_MAX of them, every shm peer). Until hold_timer
     * fires their held packets stay and their new ones join them there; the rest goes on.
     */
    struct ub__timer hold_timer;
    bool held_parked;
    bool parked_all;
    uint8_t n_parked;
    uint16_t parked[UB_ENGINE_PARKED_MAX];
    uint32_t held_parked_n;  /* of the held packets, those of parked peers (0 unless parked) */
    uint32_t parked_backlog; /* ... at most: UB_ENGINE_PARKED_BACKLOG, half the held ring */
    uint64_t out_now;        /* the last output's time */
    struct ub__engine_stats stats;
    const struct ub__engine_upcalls *up;
    void *up_arg;
    struct ub__pds *pds; /* reliable delivery (and PDS-level UUD) */
    /*
     * Set by the layer above during an upcall: what it waits for has just arrived (a
     * completion its application polls for). Input stops after that datagram if at most
     * UB_ENGINE_YIELD_REST are left, which wait in rx_later and go in first next time: the
     * application answers before the rest of its batch (its own request's response, an
     * ACK) is worked through, which takes that work off a ping-pong's round trip. Inside a
     * bundle it stops after the record when one record is left (a udp ping-pong's ACK behind
     * the answer): the rest waits as a bundle of its own. Only in a ping-pong (at most
     * UB_ENGINE_PINGPONG_OUT packets of ours in flight; any with rx_one_first): a stream's
     * batches stay whole.
     */
    bool rx_yield;
    /*
     * Set by the layer above for a round whose poller answers what it receives (it may
     * yield): while the device's backlog is small (rx_small), the driver takes the first
     * datagram alone, and the rest only if that one did not yield. A device asked for more
     * looks at the slot after the request, which a peer that answers first is often still
     * writing (its response to our last request): over shm with the CPUs far apart that
     * look cost a cache-line transfer, ~0.1 us, on the round trip's path. After such a
     * yield the backlog is unknown and the next receive takes a batch: a stream's rounds
     * stay batched. And only while receives yield (one of the last four that took
     * anything): a poller whose rounds bring only its own requests' responses would pay a
     * device call more per round for nothing.
     */
    bool rx_one_first;
    bool rx_small;   /* the last batch receive took at most UB_ENGINE_YIELD_REST datagrams */
    uint8_t rx_ylog; /* whether the last four receives that took anything yielded (bit 0) */
    struct ub__ring rx_later;
    const struct ub__pkt *rx_rest; /* in rx_later: a split bundle's rest, checked, counted */
};

int ub__engine_init(struct ub__engine *e, const struct ub__engine_cfg *cfg);
/* Frees queued packets; packets the driver still holds must have been returned first. */
void ub__engine_fini(struct ub__engine *e);

void ub__engine_set_upcalls(struct ub__engine *e, const struct ub__engine_upcalls *up, void *arg);

/* Returns whether it yielded (the datagrams after the one that asked are in rx_later). */
bool ub__engine_input(struct ub__engine *e, struct ub__pkt *const *pkts, uint32_t n, uint64_t now);
/* Inputs what a yield left in rx_later; returns whether it yielded again. */
bool ub__engine_input_later(struct ub__engine *e, uint64_t now);
uint32_t ub__engine_output(struct ub__engine *e, struct ub__pkt **pkts, uint32_t max, uint64_t now);
/* ub__engine_output's result when the engine holds nothing and PDS's output is one packet
 * of the link path (UB_PDS_OUT_LINK_ONE: a ping-pong's answer over shm), without the rounds
 * through the queues. */
struct ub__pkt *ub__engine_output_link_one(struct ub__engine *e, uint64_t now);
uint64_t ub__engine_next_deadline(const struct ub__engine *e);
void ub__engine_expire(struct ub__engine *e, uint64_t now);

/* Whether a yield left received datagrams for ub__engine_input_later. */
static inline bool ub__engine_rx_later(const struct ub__engine *e)
{
    return ub__ring_count(&e->rx_later) != 0;
}

/* Whether the engine's own rings hold output (given back by the driver and not parked, or
 * datagrams). */
static inline bool ub__engine_queued(const struct ub__engine *e)
{
    return ub__ring_count(&e->held) > e->held_parked_n || ub__ring_count(&e->txq);
}

/* Whether ub__engine_output takes new packets (not while parked peers' backlog is full). */
static inline bool ub__engine_takes_new(const struct ub__engine *e)
{
    return !e->held_parked || e->held_parked_n < e->parked_backlog;
}

/* Whether ub__engine_output has something to hand out now (or to park). */
static inline bool ub__engine_pending(const struct ub__engine *e)
{
    return ub__ring_count(&e->held) > e->held_parked_n ||
           (ub__engine_takes_new(e) && (ub__ring_count(&e->txq) || ub__pds_has_output(e->pds)));
}

/*
 * Takes back datagrams of the last output the device did not accept (a full lane, a full
 * socket buffer). UB_AF_SHM ones are kept (a lossless carrier: a full lane is back-pressure,
 * not loss; PDS counts on it) and come out first, in the same order, from the next
 * ub__engine_output; the others are dropped, like a NIC would, for PDS to repair. A kept one
 * still refused UB_ENGINE_HOLD_MAX_NS after it first went out is dropped too (a receiver
 * that lives but does not drain); on the link path, where nothing would repair it, its peer
 * is parked instead (see held_parked). Takes every reference; returns the number dropped.
 */
uint32_t ub__engine_requeue(struct ub__engine *e, struct ub__pkt *const *pkts, uint32_t n);

/*
 * Queues an unreliable datagram to dst: UB_ELENGTH if it does not fit one
 * packet, UB_EFULL if the output queue is full, UB_ENOBUFS if the pool is
 * empty. It may be lost, duplicated or reordered by the network.
 */
int ub__engine_dgram_send(struct ub__engine *e, const struct ub__addr *dst, uint16_t path,
                          uint32_t initiator, uint64_t header_data, const void *buf, uint32_t len,
                          uint64_t now);

/* The largest datagram payload that fits one packet. */
uint32_t ub__engine_dgram_max(const struct ub__engine *e);

#endif
