/*
 * Packet buffers: fixed-size buffers carved from one allocation at start-up,
 * handed out from a free list, reference counted (a packet kept for
 * retransmission and in flight on a loop device is shared, not copied).
 * Headroom lets lower layers prepend headers without copying the payload.
 * A pool is single-threaded; it never allocates after init.
 */
#ifndef UB_CORE_PKTBUF_H
#define UB_CORE_PKTBUF_H

#include <stdint.h>

#include "core/addr.h"

struct ub__pktpool;

struct ub__pkt {
    struct ub__pkt *next; /* free list, or any single queue the owner keeps it on */
    struct ub__pktpool *pool;
    uint8_t *head; /* start of the buffer */
    uint8_t *data; /* first valid byte */
    uint32_t len;  /* valid bytes from data */
    uint32_t refcnt;
    /*
     * Bytes this packet stands for on the wire when that differs from len (a simulator's
     * headers-only buffer whose payload is virtual); 0 means len. Push, pull and put move it
     * along with len, clone copies it. Byte accounting (congestion control) uses
     * ub__pkt_wire_len(), parsing uses len.
     */
    uint32_t wire_len;
    /*
     * Zero copy: xlen bytes at xdata (memory the packet does not own, e.g. a request's
     * registered source buffer) follow the len bytes at data on the wire. wire_len is then
     * len + xlen. Only a device that gathers sends such a packet as is; every other device
     * flattens it first (ub__pkt_flatten: the bytes move into the buffer's tailroom, which
     * ub__pkt_attach made sure of). Whoever attaches must flatten or drop the packet before
     * the memory may go away.
     */
    const uint8_t *xdata;
    uint32_t xlen;
    uint64_t ts;  /* time of receipt or of (re)transmission, ns */
    uint64_t tag; /* the current owner's scratch word (e.g. a completion cookie) */
    /* On send: transmission order, stamped by PDS as it hands its packets out; a device that
     * sends a batch in another order gives the batch's stamps out again in that order. */
    uint64_t order;
    struct ub__addr addr; /* peer: source on receive, destination on send */
    uint16_t path;        /* entropy value: the path (UDP source port index) */
    uint8_t ecn;          /* IP ECN codepoint: 0 not-ECT, 1 ECT(1), 2 ECT(0), 3 CE */
    uint8_t flags;        /* UB_PKT_F_*, and the owner's own bits below them */
};

/* On send: a control packet that any path to its destination serves (an ACK): the engine may
 * carry it in a bundle that goes on another path. */
#define UB_PKT_F_ANY_PATH 0x40u
/* On send: a response that completes a request without data (a WRITE's, a SEND's): an ACK
 * bundled with it goes first (ub__engine_output). */
#define UB_PKT_F_AFTER_ACK 0x20u

struct ub__pktpool {
    struct ub__pkt *free;
    struct ub__pkt *pkts;
    uint8_t *mem;
    uint32_t count;    /* buffers in the pool */
    uint32_t avail;    /* buffers on the free list */
    uint32_t buf_size; /* bytes per buffer, headroom included */
    uint32_t headroom;
    uint64_t exhausted; /* allocations refused because the pool was empty */
};

int ub__pktpool_init(struct ub__pktpool *pool, uint32_t count, uint32_t buf_size,
                     uint32_t headroom);
/* Every buffer must be back: fini asserts nothing, but leaks are reported by the count. */
void ub__pktpool_fini(struct ub__pktpool *pool);

/* A packet with len 0 and data at headroom, refcnt 1; NULL when the pool is empty. */
struct ub__pkt *ub__pkt_alloc(struct ub__pktpool *pool);

static inline void ub__pkt_ref(struct ub__pkt *p)
{
    p->refcnt++;
}

/* Drops one reference; the last returns the buffer to its pool. */
void ub__pkt_free(struct ub__pkt *p);

/* The bytes the packet occupies on the wire: wire_len if set, else len. */
static inline uint32_t ub__pkt_wire_len(const struct ub__pkt *p)
{
    return p->wire_len ? p->wire_len : p->len;
}

/* Room left after the valid bytes. */
static inline uint32_t ub__pkt_tailroom(const struct ub__pkt *p)
{
    return (uint32_t)(p->pool->buf_size - (uint32_t)(p->data - p->head) - p->len);
}

static inline uint32_t ub__pkt_headroom(const struct ub__pkt *p)
{
    return (uint32_t)(p->data - p->head);
}

/*
 * Put, push and pull are inline: every packet goes through several of them (headers built
 * and stripped layer by layer), and a call costs more than their few instructions.
 */

/* Extends the valid bytes by n at the end; returns where they start, NULL if no room (or
 * if an external payload is attached: nothing may follow it). */
static inline uint8_t *ub__pkt_put(struct ub__pkt *p, uint32_t n)
{
    if (n > ub__pkt_tailroom(p) || p->xlen)
        return 0;
    uint8_t *at = p->data + p->len;
    p->len += n;
    if (p->wire_len)
        p->wire_len += n;
    return at;
}

/* Extends the valid bytes by n at the front; NULL if not enough headroom. */
static inline uint8_t *ub__pkt_push(struct ub__pkt *p, uint32_t n)
{
    if (n > ub__pkt_headroom(p))
        return 0;
    p->data -= n;
    p->len += n;
    if (p->wire_len)
        p->wire_len += n;
    return p->data;
}

/* Removes n bytes from the front; returns the new start, NULL if fewer than n. */
static inline uint8_t *ub__pkt_pull(struct ub__pkt *p, uint32_t n)
{
    if (n > p->len)
        return 0;
    p->data += n;
    p->len -= n;
    if (p->wire_len)
        p->wire_len = p->wire_len > n ? p->wire_len - n : 0;
    return p->data;
}

/* A new packet with the same bytes and metadata (refcnt 1), flat (an external payload is
 * copied in); NULL when the pool is empty. */
struct ub__pkt *ub__pkt_clone(const struct ub__pkt *p);

/*
 * Attaches n bytes at src as the packet's external payload, after its len bytes: they are
 * sent from src, not copied. UB_ENOBUFS when the tailroom could not take them (flattening
 * must always be possible), UB_EINVAL if a payload is attached already.
 */
int ub__pkt_attach(struct ub__pkt *p, const void *src, uint32_t n);

void ub__pkt_flatten_slow(struct ub__pkt *p);

/* Copies an attached payload into the buffer (same bytes on the wire): the packet no
 * longer refers to memory it does not own. A no-op for a flat packet. */
static inline void ub__pkt_flatten(struct ub__pkt *p)
{
    if (p->xlen)
        ub__pkt_flatten_slow(p);
}

/* ub__pkt_flatten for each of pkts[0..n): what a device that cannot gather does first. */
void ub__pkts_flatten(struct ub__pkt *const *pkts, uint32_t n);

/* Every byte the packet carries: its buffer's and an attached payload. */
static inline uint32_t ub__pkt_total_len(const struct ub__pkt *p)
{
    return p->len + p->xlen;
}

#endif
