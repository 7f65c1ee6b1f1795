/*
 * The loop device and its fabric: engines in one process exchange packets
 * through an in-memory switch, under manually injected time, with a
 * scriptable impairment (dev/impair.h) on every direction. For tests and
 * the simulator's hosts; deterministic from the fabric's seed.
 *
 * A fabric has `ports` ports; ub__loop_open() turns one into a device
 * (struct ub__dev, local address loop:<port>). A packet sent to loop:<d>
 * from port s travels direction (s, d): that direction's impairment decides
 * its fate, and it becomes deliverable at now + latency + extra delay. The
 * receiver's recv returns deliverable packets in (delivery time, enqueue
 * order) order, with addr = loop:<s>, path (modulo the path count) and ECN
 * carried, ts = delivery time.
 *
 * Time only moves through ub__loopnet_set_time(); ub__loopnet_next_deadline()
 * says when the next packet becomes deliverable, so a driver can jump there.
 *
 * Buffers: send keeps the caller's reference (no copy). recv hands that very
 * buffer over when the fabric holds its last reference, and copies it into
 * the receive pool when someone else (the sender, keeping it for
 * retransmission, or a duplicate still queued) still holds it, so neither
 * side ever sees the other's writes. Corrupted copies are clones made at
 * send time; the sender's bytes are never modified.
 *
 * Single-threaded, like the engine that drives it. No allocation after
 * ub__loop_open / ub__loopnet_impair: queues are bounded.
 */
#ifndef UB_DEV_LOOP_H
#define UB_DEV_LOOP_H

#include <stdbool.h>
#include <stdint.h>

#include "core/pktbuf.h"
#include "dev/dev.h"
#include "dev/impair.h"

#define UB_LOOP_MAX_PORTS     256
#define UB_LOOP_MAX_HELD      64 /* packets held back for reordering, per direction */
#define UB_LOOP_DEFAULT_PORTS 2
#define UB_LOOP_DEFAULT_MTU   1500
#define UB_LOOP_DEFAULT_QUEUE 1024

/* Zero fields take the defaults above (1 path, no latency, seed 0). */
struct ub__loopnet_cfg {
    uint32_t ports;      /* 1..UB_LOOP_MAX_PORTS */
    uint32_t mtu;        /* largest datagram send accepts */
    uint32_t num_paths;  /* paths (entropy values) per device */
    uint32_t queue_cap;  /* packets queued or held per direction; beyond: overflow drop */
    uint64_t seed;       /* decorrelates the directions' impairment streams */
    uint64_t latency_ns; /* base one-way latency */
    /*
     * Models the UDP checksum (and, later, the TSS ICV): a copy the impairment corrupted is
     * discarded instead of delivered, as a receiving kernel would (counted in csum_dropped).
     * Off, corrupted bytes reach the receiver, which must cope with them on its own.
     */
    bool checksum;
};

struct ub__loop_dir_stats {
    uint64_t sent; /* packets offered to this direction */
    uint64_t sent_bytes;
    uint64_t delivered; /* copies handed to the receiver */
    uint64_t delivered_bytes;
    uint64_t overflow;              /* copies dropped: the direction's queue was full */
    uint64_t nomem;                 /* corrupted copies not made: the sender's pool was empty */
    uint64_t flushed;               /* copies discarded when the receiver closed */
    uint64_t ce_marked;             /* ECN-capable copies marked CE */
    uint64_t queued;                /* copies now queued or held */
    uint64_t held;                  /* of which held back for reordering */
    uint64_t hold_full;             /* reorder decisions not applied: hold table full */
    uint64_t csum_dropped;          /* corrupted copies discarded (cfg.checksum) */
    struct ub__impair_stats impair; /* the impairment's decisions (zero if never set) */
};

struct ub__loop_port_stats {
    uint64_t tx_pkts; /* accepted by send */
    uint64_t tx_bytes;
    uint64_t tx_too_big; /* send calls stopped at a packet larger than the MTU */
    uint64_t tx_no_port; /* accepted, then dropped: destination not a port that is open */
    uint64_t rx_pkts;    /* returned by recv */
    uint64_t rx_bytes;
    uint64_t rx_copied;   /* of which copied because the buffer was still shared */
    uint64_t rx_nobufs;   /* recv calls that left a due packet queued: receive pool empty */
    uint64_t rx_too_big;  /* due packets dropped: larger than a receive-pool buffer */
    uint64_t rx_overflow; /* arrivals dropped because a direction into this port was full */
    uint64_t flushed;     /* packets discarded when this port closed */
};

struct ub__loopnet;

int ub__loopnet_create(const struct ub__loopnet_cfg *cfg, struct ub__loopnet **out);
/* Closes every open device (their ub__dev pointers die) and frees every queued packet. */
void ub__loopnet_destroy(struct ub__loopnet *net);

/* Moves the fabric's clock (never backwards: an earlier now is ignored), ending expired holds. */
void ub__loopnet_set_time(struct ub__loopnet *net, uint64_t now);
uint64_t ub__loopnet_now(const struct ub__loopnet *net);
/* Earliest pending delivery or hold expiry (may be <= now), UB_TIME_NEVER if none. */
uint64_t ub__loopnet_next_deadline(const struct ub__loopnet *net);

/*
 * Sets the rules of direction src -> dst (cfg copied; NULL or all-zero
 * clears them). Takes effect for the next packet: numbering restarts at 0,
 * counters accumulate, packets already queued keep their fate (held ones
 * are released when the rules are cleared).
 */
int ub__loopnet_impair(struct ub__loopnet *net, uint16_t src, uint16_t dst,
                       const struct ub__impair_cfg *cfg);

int ub__loopnet_dir_stats(const struct ub__loopnet *net, uint16_t src, uint16_t dst,
                          struct ub__loop_dir_stats *out);
int ub__loopnet_port_stats(const struct ub__loopnet *net, uint16_t port,
                           struct ub__loop_port_stats *out);

/*
 * Calls fn for every datagram a port's send accepts, before the impairment decides its
 * fate: the sending port, the destination address and the bytes (valid during the call).
 * For tests that compare what two runs put on the wire; NULL removes it.
 */
typedef void (*ub__loopnet_tap_fn)(void *arg, uint16_t src, const struct ub__pkt *p);
void ub__loopnet_set_tap(struct ub__loopnet *net, ub__loopnet_tap_fn fn, void *arg);

/*
 * Opens port as a device (*dev stays valid until closed or the fabric is
 * destroyed). UB_ERANGE for a port beyond the fabric, UB_EEXIST if open.
 * Closing frees everything queued or held for it.
 */
int ub__loop_open(struct ub__loopnet *net, uint16_t port, struct ub__dev **dev);

#endif
