/*
 * The shm device's internals, shared by its data path (shm.c) and its peer side
 * (shm_peer.c): the object's layout, the device and peer structs, the slot helpers both use.
 * Include after defining _GNU_SOURCE (PATH_MAX, MADV_*).
 */
#ifndef SOFTUB_DEV_SHM_INT_H
#define SOFTUB_DEV_SHM_INT_H

#include <limits.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "core/compiler.h"
#include "dev/shm.h"
#include "dev/shm_delta.h"

/*
 * Object layout (offsets from the start of the mapping):
 *
 *   0           struct shm_hdr        one page: identity, layout, state,
 *                                     the waiting word, the used-lane mask
 *   lane_off    struct shm_lane[lanes] three cache lines each: owner pid,
 *                                     tail (producer's), head (consumer's)
 *   slot_off    lanes * slots slots   slot_size bytes each: struct shm_slot
 *                                     then up to mtu bytes of datagram (or,
 *                                     delta-encoded, its changed words)
 *
 * Everything a peer relies on for memory safety (the layout) is copied out
 * of the header and validated against the object's size once, at attach:
 * a corrupt or hostile header cannot make a producer write outside the
 * mapping later.
 */

#ifndef MADV_POPULATE_READ /* headers older than the kernel feature (Linux 5.14) */
#define MADV_POPULATE_READ  22
#define MADV_POPULATE_WRITE 23
#endif

#define SHM_MAGIC       0x4853425554464f53ull /* "SOFTUBSH" */
#define SHM_VERSION     3u /* 2: slots carry their sequence word; 3: delta-encoded slots */
#define SHM_HDR_SIZE    4096u
#define SHM_CACHELINE   64u
#define SHM_SLOT_HDR    16u
#define SHM_MAX_OBJ     (4ull << 30) /* refuse layouts above 4 GiB */
#define SHM_OPEN_TRIES  8            /* create/reclaim races retried */
#define SHM_DRAIN_MAX   16           /* FIFO reads per drain */
#define SHM_FULL_PROBE  64           /* full-lane hits per liveness probe of the receiver */
#define SHM_FULL_PEERS  8            /* full lanes a send skips; at more it stops */
#define SHM_FLAG_WAKE   1u
#define SHM_DEFAULT_DIR "/dev/shm"

enum { SHM_INIT = 0, SHM_READY = 1, SHM_CLOSED = 2 };

struct shm_hdr {
    uint64_t magic;
    uint32_t version, hdr_size;
    uint32_t lanes, slots, slot_size, mtu;
    uint64_t lane_off, slot_off, obj_size;
    uint64_t probe_addr, probe_value; /* a word in the owner's private memory, for the CMA probe */
    uint32_t owner_pid, flags;
    uint32_t id, pad;
    _Atomic uint32_t state; /* SHM_*; READY is stored (release) after everything above */
    /* Written by the consumer (arm) and by producers (clear): its own line. */
    alignas(SHM_CACHELINE) _Atomic uint32_t waiting;
    /* Lanes ever claimed: the consumer scans only these. Written at attach only. */
    alignas(SHM_CACHELINE) _Atomic uint64_t used;
};

/* One producer's ring. Each index on its own line: the two sides never share a written line. */
struct shm_lane {
    alignas(SHM_CACHELINE) _Atomic uint32_t owner; /* producer pid, 0 when free */
    alignas(SHM_CACHELINE) _Atomic uint64_t tail;  /* producer: slots published */
    alignas(SHM_CACHELINE) _Atomic uint64_t head;  /* consumer: slots consumed */
};

/* What a slot says about its datagram; the consumer checks a private copy of it. */
struct shm_meta {
    uint32_t len;
    uint16_t src; /* sender's endpoint id */
    uint16_t path;
    uint8_t ecn;
    uint8_t enc;   /* 1: the body is the mask's words of a datagram of len bytes (shm_delta.h) */
    uint16_t mask; /* with enc: which words of the datagram the body holds */
};

/*
 * seq: the slot's lane index + 1 (mod 2^32), stored with release after everything else: the
 * consumer polls the next slot's own line rather than the tail's, so a small datagram costs
 * it one cache-line transfer, not two. A slot still holds the previous lap's value (index +
 * 1 - slots) until rewritten, which never equals the expected one.
 */
struct shm_slot {
    _Atomic uint32_t seq;
    struct shm_meta m;
};

_Static_assert(sizeof(struct shm_hdr) <= SHM_HDR_SIZE, "header fits its page");
_Static_assert(sizeof(struct shm_lane) == 3 * SHM_CACHELINE, "lane is three lines");
_Static_assert(sizeof(struct shm_slot) == SHM_SLOT_HDR, "slot header size");
/* Lock-free atomics are address-free: the same word works in every process's mapping. */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2 && ATOMIC_LLONG_LOCK_FREE == 2, "lock-free atomics");

/* A receiver this device sends to: its mapping and the lane we own in it. */
struct shm_peer {
    struct shm_hdr *hdr;
    struct shm_lane *lane;
    uint8_t *slots; /* our lane's first slot */
    uint8_t *base;
    size_t size;
    uint64_t tail;       /* next slot to write (only we write the lane's tail) */
    uint64_t pub;        /* tail last published */
    uint64_t head_cache; /* consumer's head when last read: avoids a shared load per packet */
    uint64_t last_use;
    uint32_t mask, slot_size, mtu, lane_idx;
    int fd;  /* the peer's object: its lock says whether the owner lives */
    int wfd; /* the peer's FIFO, opened read-write so a dead reader cannot raise SIGPIPE */
    pid_t pid;
    uint16_t id;
    uint16_t full; /* sends that found the lane full since it last took a packet */
    bool used, cma;
    struct ub__shm_delta delta; /* what our lane's consumer last saw, per size */
};

struct shm_dev {
    struct ub__dev dev;
    struct ub__shm_cfg cfg;
    char dir[PATH_MAX / 2];
    char name[UB_SHM_NAME_MAX];
    char fifo[PATH_MAX];
    int fd;  /* our object, locked LOCK_EX while we live */
    int rfd; /* our FIFO's read end: fd(); -1 without wake-ups */
    uint8_t *base;
    size_t size;
    struct shm_hdr *hdr;
    struct shm_lane *lanes;
    uint8_t *slots;
    uint32_t slot_size, np;
    uint32_t rr;                     /* lane served first by the next recv */
    bool armed;                      /* we set the waiting word and have not seen it cleared */
    bool busy;                       /* the caller polls again at once: empty receives do not arm */
    uint64_t probe;                  /* the word peers read to probe CMA */
    uint64_t head[UB_SHM_MAX_LANES]; /* our copy of each lane's head (we are its only writer) */
    uint64_t mapped;                 /* lanes whose slots ub__shm_lane_prefault mapped */

    struct shm_peer *peers;
    struct shm_peer *last; /* found last: a slot of peers (a detached one reads unused) */
    uint16_t *tab;         /* open addressing: peer index + 1, 0 empty */
    uint32_t tab_mask, npeers;
    uint64_t tick;
    struct ub__shm_stats st;
    /* Ids of peers found gone, each once, for ub__shm_take_gone: max_peers of them, as many
     * as can be attached at once (more only if more than that died between two takes). */
    uint16_t *gone;
    uint32_t ngone;
    struct ub__shm_delta *rx_delta; /* per lane: what its producer last sent, per size */
};

static inline struct shm_dev *shm_of(const struct ub__dev *dev)
{
    return UB_CONTAINER_OF(dev, struct shm_dev, dev);
}

/* Slot `idx` (a lane index, not yet masked) of the lane whose first slot is at `slots`. */
static inline struct shm_slot *slot_at(uint8_t *slots, uint64_t idx, uint32_t mask,
                                       uint32_t slot_size)
{
    return (struct shm_slot *)(void *)(slots + (idx & mask) * slot_size);
}

/* Whether slot idx of a lane holds the datagram published under that index. */
static inline bool slot_full(const struct shm_slot *sl, uint64_t idx, memory_order mo)
{
    return atomic_load_explicit(&sl->seq, mo) == (uint32_t)(idx + 1);
}

static inline uint32_t tab_home(const struct shm_dev *s, uint16_t id)
{
    return (uint32_t)(((uint32_t)id * 0x9E3779B1u) >> 16) & s->tab_mask;
}

/* shm.c */
int ub__shm_fifo_path(const char *dir, const char *name, char *buf, size_t len);
bool ub__shm_owner_alive(int fd);
bool ub__shm_pid_dead(uint32_t pid);
/* The send path's publish; detach's too, for its final tail. */
void ub__shm_publish(struct shm_dev *s, struct shm_peer *pe);

/* shm_peer.c: what the data path calls when it meets a peer not attached yet or gone. */
int ub__shm_attach(struct shm_dev *s, uint16_t id, struct shm_peer **out);
void ub__shm_detach(struct shm_dev *s, struct shm_peer *pe);
bool ub__shm_peer_gone(const struct shm_peer *pe);
void ub__shm_note_gone(struct shm_dev *s, uint16_t id);
void ub__shm_peer_dead(struct shm_dev *s, struct shm_peer *pe);
bool ub__shm_lane_prefault(uint8_t *slots, uint32_t nslots, uint32_t slot_size, int advice);

#endif
