/*
 * The device interface: the only thing between the sans-I/O engine and a
 * network. A device moves batches of packets and says how to wait for it;
 * it knows nothing of the protocol. Implementations: loop (engines in one
 * process, for tests), udp, shm, and the simulator's host port.
 */
#ifndef UB_DEV_DEV_H
#define UB_DEV_DEV_H

#include <stdbool.h>
#include <stdint.h>

#include "core/addr.h"
#include "core/pktbuf.h"

struct ub__dev;

struct ub__dev_ops {
    const char *name;
    /*
     * The device sends a packet's attached payload (pkt->xdata, core/pktbuf.h) from where it
     * is, gathering it with the headers. For every other device ub__dev_send flattens such
     * packets first, so none of them needs to know about attached payloads.
     */
    bool gather;
    /*
     * Sends pkts[0..n) to pkt->addr over path pkt->path (modulo the path
     * count). Consumes the caller's reference of every packet it accepts
     * (a sender that keeps a packet for retransmission takes a reference of
     * its own first); returns how many it accepted, k, or a negative error.
     * Fewer than n when the device is full: those it refused stay the
     * caller's and are moved to pkts[k..n), each peer's in their order;
     * pkts[0..k) is then undefined. A device that refuses one peer's packet (a full shm
     * lane) refuses that peer's later ones of the call too, and may still
     * take those to other peers: one peer that does not drain holds back
     * no one else, and each peer's packets stay in order.
     */
    int (*send)(struct ub__dev *dev, struct ub__pkt **pkts, uint32_t n);
    /*
     * Receives up to max packets, with addr = sender, path and ecn filled
     * in; buffers come from pool unless the device hands over its own.
     * Returns the count (0 when nothing waits) or a negative error.
     */
    int (*recv)(struct ub__dev *dev, struct ub__pkt **pkts, uint32_t max, struct ub__pktpool *pool);
    /* A file descriptor that polls readable when recv has work, or -1. Asked for only by a
     * caller that may sleep on it: a device may set it up on the first call (udp). */
    int (*fd)(struct ub__dev *dev);
    /* Largest datagram (softub headers included) the device carries. */
    uint32_t (*mtu)(const struct ub__dev *dev);
    /* Number of distinct paths (entropy values) the device can use. */
    uint32_t (*num_paths)(const struct ub__dev *dev);
    void (*close)(struct ub__dev *dev);
};

struct ub__dev {
    const struct ub__dev_ops *ops;
    struct ub__addr local;
};

static inline int ub__dev_send(struct ub__dev *d, struct ub__pkt **pkts, uint32_t n)
{
    if (!d->ops->gather) {
        if (n == 1) /* a ping-pong's answer: no call */
            ub__pkt_flatten(pkts[0]);
        else
            ub__pkts_flatten(pkts, n);
    }
    return d->ops->send(d, pkts, n);
}

static inline int ub__dev_recv(struct ub__dev *d, struct ub__pkt **pkts, uint32_t max,
                               struct ub__pktpool *pool)
{
    return d->ops->recv(d, pkts, max, pool);
}

static inline int ub__dev_fd(struct ub__dev *d)
{
    return d->ops->fd(d);
}

static inline uint32_t ub__dev_mtu(const struct ub__dev *d)
{
    return d->ops->mtu(d);
}

/* Whether packets with an attached payload reach the device as they are. */
static inline bool ub__dev_gathers(const struct ub__dev *d)
{
    return d->ops->gather;
}

static inline uint32_t ub__dev_num_paths(const struct ub__dev *d)
{
    return d->ops->num_paths(d);
}

static inline void ub__dev_close(struct ub__dev *d)
{
    d->ops->close(d);
}

#endif
