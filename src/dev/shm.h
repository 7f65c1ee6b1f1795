/*
 * The shared-memory device: softub between processes of one host.
 *
 * Each endpoint owns one POSIX shared-memory object, "/softub-<uid>-<id>",
 * holding a header and `lanes` receive lanes. A lane is a single-producer /
 * single-consumer ring of fixed-size slots: a sender claims one lane in the
 * receiver's object on first contact (attach) and is its only writer; the
 * receiver is the only reader of all its lanes. Per-producer lanes instead
 * of one multi-producer ring because a producer that dies mid-enqueue can
 * then only ever stall its own lane, and there is nothing to stall: a slot
 * becomes visible with one release store of the lane's tail, after it is
 * fully written, so a half-written slot is never seen. The fast path has no
 * compare-and-swap and publishes a whole batch with one store.
 *
 * Addressing: family UB_AF_SHM, port = the 16-bit endpoint id (1..65535).
 * recv reports addr = the sender's id, path = the sender's pkt->path
 * (modulo the local path count), ecn = the sender's codepoint: a reply to
 * pkt->addr reaches the sender. Only endpoints of the same user (the uid is
 * part of the object name) and the same PID namespace are reachable.
 *
 * Send: a packet goes to its peer's lane; peers are attached lazily and
 * cached in a bounded table (the least recently used one is detached when
 * it is full). A full lane refuses its packet and that peer's later ones of
 * the call, which stay the caller's (counted in tx_full, at the end of the
 * array: dev.h); packets to other peers still go. Packets to no live endpoint, or not
 * UB_AF_SHM, are accepted and dropped, counted.
 *
 * Wake-ups: fd() is the read end of a named FIFO next to the object. A
 * receive that finds nothing sets a "waiting" word in the header (and
 * re-checks the lanes); a producer that publishes and sees the word set
 * clears it and writes one byte to the FIFO. So a consumer is woken only
 * when it asked to be, and a busy consumer costs producers no system call:
 * a caller that busy-polls says so (ub__shm_set_busy_poll) and its empty
 * receives then leave the word alone, else every message it gets would
 * cost its producer a write(2) and it a read(2).
 * With wake=0 there is no FIFO: fd() is -1 and the caller busy-polls.
 *
 * Liveness: the owner holds an exclusive flock on its object; it dies with
 * the process, so a stale object (owner crashed) is recognised exactly and
 * reclaimed on open, and producers recognise a dead receiver. Lanes record
 * their producer's pid; a dead producer's lane is taken over when no lane
 * is free.
 *
 * Large transfers: ub__shm_cma_read/write move bytes directly between two
 * processes' memory (process_vm_readv/writev, one copy), when the kernel
 * permits it (same user, ptrace policy); attach probes it per peer.
 *
 * Single-threaded like the engine driving it; no allocation after attach.
 */
#ifndef UB_DEV_SHM_H
#define UB_DEV_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "core/addr.h"
#include "dev/dev.h"

#define UB_SHM_MAX_LANES     64
#define UB_SHM_DEFAULT_LANES 16
#define UB_SHM_DEFAULT_SLOTS 512
#define UB_SHM_MIN_SLOTS     2
#define UB_SHM_MAX_SLOTS     65536 /* a power of two */
#define UB_SHM_DEFAULT_MTU   4224  /* a 4 KiB payload and its headers in one datagram */
#define UB_SHM_MIN_MTU       64
#define UB_SHM_MAX_MTU       65536
#define UB_SHM_DEFAULT_PEERS 64
#define UB_SHM_MAX_PEERS     1024
#define UB_SHM_MAX_PATHS     64
#define UB_SHM_SPEC_MAX      256
#define UB_SHM_NAME_MAX      64
#define UB_SHM_AUTO_TRIES    4096 /* ids tried by an open with id 0 */

/* Zero fields take the defaults. */
struct ub__shm_cfg {
    uint16_t id;        /* endpoint id; 0: pick a free one */
    uint32_t lanes;     /* producers that can attach at once, 1..64; 0: 16 */
    uint32_t slots;     /* slots per lane, a power of two 2..65536; 0: 512 */
    uint32_t mtu;       /* largest datagram, 64..65536; 0: UB_SHM_DEFAULT_MTU */
    uint32_t max_peers; /* attached peers cached, 1..1024; 0: 64 */
    uint32_t num_paths; /* path labels carried, 1..64; 0: 1 */
    bool no_wake;       /* no FIFO: fd() is -1, the consumer busy-polls */
    const char *dir;    /* directory of the wake FIFOs; NULL: "/dev/shm" */
};

/*
 * Parses "[shm:[//]]ID[?key=value&...]" into cfg (zeroed first). ID is a
 * decimal endpoint id 0..65535 (0 or empty: pick a free one). Keys: lanes,
 * slots, mtu, peers, paths, wake=0|1. UB_EINVAL for anything else, out of
 * range or longer than UB_SHM_SPEC_MAX.
 */
int ub__shm_cfg_parse(const char *spec, struct ub__shm_cfg *cfg);

/*
 * Creates the endpoint. UB_EINVAL for a bad cfg, UB_EBUSY when the id is
 * owned by a live process (or, for id 0, no free id was found), UB_EACCESS
 * when the object cannot be created, UB_ENOMEM, UB_EIO otherwise. A stale
 * object of a dead owner is reclaimed (counted in stale_reclaimed).
 */
int ub__shm_open(const struct ub__shm_cfg *cfg, struct ub__dev **out);

/* addr = the shm endpoint id. */
static inline void ub__shm_addr(struct ub__addr *a, uint16_t id)
{
    memset(a, 0, sizeof(*a));
    a->family = UB_AF_SHM;
    a->port = id;
}

/* The object name of endpoint id for this user ("/softub-<uid>-<id>"); snprintf's result. */
int ub__shm_objname(uint16_t id, char *buf, size_t len);

/*
 * Whether a live endpoint with that address exists and this process may
 * attach to it: 0, or UB_EUNREACH (none, dead, or not ready), UB_EACCESS
 * (another user's), UB_EPROTO (another softub version's slot format),
 * UB_EINVAL (not a shm address). For the API layer's choice of the shm
 * device for peers on this host.
 */
int ub__shm_reachable(const struct ub__addr *a);

/*
 * Free slots in this device's lane to dst (attaching on first use): how
 * many packets send would accept for it now. UB_EUNREACH when dst is not
 * reachable (UB_EPROTO: another softub version's), UB_EINVAL when dev is not
 * a shm device.
 */
int ub__shm_tx_space(struct ub__dev *dev, const struct ub__addr *dst);

/*
 * Whether single-copy transfers with dst's process work: 0 and *pid set
 * when the attach probe read the peer's memory, UB_ENOTSUP when the kernel
 * refused (ptrace policy, another user), UB_EUNREACH when not reachable.
 */
int ub__shm_peer_cma(struct ub__dev *dev, const struct ub__addr *dst, pid_t *pid);

/*
 * Probes every attached peer and detaches dead or closed ones (a progress
 * layer calls it now and then: a dead receiver is otherwise noticed when
 * its lane fills). Returns the number detached.
 */
int ub__shm_check_peers(struct ub__dev *dev);

/*
 * The ids of peers found dead or closed since the last call (by the probe above, a full
 * lane's probe or a send that found the receiver closed), or speaking another slot format
 * version (attach_version), up to max; returns how many. The
 * layers above fail what waits on them (no transport context watches a shm peer).
 */
uint32_t ub__shm_take_gone(struct ub__dev *dev, uint16_t *ids, uint32_t max);

/*
 * Single copy between this process's iov and [remote, remote + total) in
 * process pid (process_vm_readv / writev), all of it or an error:
 * UB_ENOTSUP when not permitted (or unsupported), UB_EUNREACH when pid is
 * gone, UB_EINVAL for a bad address or argument, UB_EIO otherwise.
 */
int ub__shm_cma_read(pid_t pid, uint64_t remote, const struct iovec *iov, uint32_t iovcnt);
int ub__shm_cma_write(pid_t pid, uint64_t remote, const struct iovec *iov, uint32_t iovcnt);

/*
 * What a single copy costs on this host before its first byte, in ns: the least of a few
 * one-page process_vm_readv calls on this process (the system call, the pages pinned). 0 when
 * the kernel refuses them. Measured at the first call of a process (a few tens of
 * microseconds), remembered after; the threshold below which packets are faster follows
 * from it (ub__ses_cma_auto_min).
 */
uint64_t ub__shm_cma_cost_ns(void);

struct ub__shm_stats {
    uint64_t tx_pkts, tx_bytes;
    uint64_t tx_publishes;    /* tail stores: one per peer per send call */
    uint64_t tx_full;         /* packets refused because their lane was full (caller keeps them) */
    uint64_t tx_too_big;      /* send calls stopped at a packet larger than the MTU */
    uint64_t tx_peer_too_big; /* accepted, dropped: larger than the peer's slots */
    uint64_t tx_bad_addr;     /* accepted, dropped: not a shm address */
    uint64_t tx_unreach;      /* accepted, dropped: no live endpoint or no free lane */
    uint64_t tx_delta;        /* datagrams sent delta-encoded (dev/shm_delta.h) */

    uint64_t rx_pkts, rx_bytes;
    uint64_t rx_bad_slot;   /* slots with a length beyond the MTU or the pool buffer, or a
                               delta no datagram of ours could have made: dropped */
    uint64_t rx_pool_empty; /* recv calls stopped by an empty pool */
    uint64_t rx_delta;      /* datagrams received delta-encoded */

    uint64_t wake_sent;    /* FIFO writes: a publish found the receiver waiting */
    uint64_t wake_avoided; /* publishes that found it busy: no system call */
    uint64_t wake_armed;   /* times the waiting word was set: at open, then by receives */
    uint64_t wake_drained; /* FIFO drains after a wake-up */

    uint64_t attach, detach;  /* peers mapped / unmapped */
    uint64_t attach_fail;     /* attach attempts that found no live endpoint or lane */
    uint64_t attach_version;  /* of those: the endpoint's object has another slot format version */
    uint64_t evicted;         /* detached to make room in the peer table */
    uint64_t peer_dead;       /* detached because the receiver died or closed */
    uint64_t lanes_reclaimed; /* lanes of dead producers taken over */
    uint64_t stale_reclaimed; /* stale objects of dead owners reclaimed at open */

    uint16_t id;
    uint32_t lanes, slots, mtu, slot_size, num_paths;
    uint32_t peers; /* attached now */
    uint64_t obj_size;
};

/*
 * Busy polling on: an empty receive does not ask for a wake-up (the caller
 * will look again at once, not sleep on fd()); off (the default): it does.
 * A caller about to sleep should make one receive with it off first (else
 * a byte left in the FIFO by an earlier wake-up may keep fd() readable: it
 * is never silent while a packet waits, the device is armed from open on).
 * No-op for other devices.
 */
void ub__shm_set_busy_poll(struct ub__dev *dev, bool on);

/*
 * The caller is about to sleep on fd(): asks for a wake-up (draining a FIFO byte an earlier
 * one left) without receiving. 1 when packets already wait (receive instead of sleeping),
 * 0 when fd() will become readable at the next packet, UB_EINVAL when not a shm device.
 * For an API call such as ub_context_next_timeout_ms after busy polling.
 */
int ub__shm_arm(struct ub__dev *dev);

/*
 * Whether a lane holds packets, without a system call or a wake-up request: for a thread
 * that spins between rounds without the engine's lock (it reads shared atomics only).
 * false for other devices.
 */
bool ub__shm_rx_ready(const struct ub__dev *dev);

/* Copies dev's counters. UB_EINVAL when dev is not a shm device. */
int ub__shm_stats(const struct ub__dev *dev, struct ub__shm_stats *out);

/* Where the slots live in the object (for tests that scribble on them). */
struct ub__shm_layout {
    uint64_t obj_size;
    uint64_t lane_off, lane_size; /* lane control blocks */
    uint64_t slot_off, slot_len;  /* every lane's slots */
};
int ub__shm_layout(const struct ub__dev *dev, struct ub__shm_layout *out);

#endif
