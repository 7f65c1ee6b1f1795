/*
 * The shm device: configuration, its own object's life (open, close, liveness), the send and
 * receive data path, the vtable and the ub__shm_* helpers. Attaching to peers and single copy
 * are shm_peer.c: the data path calls there only for a peer it has not attached to or finds
 * gone, so what it runs every packet stays here, inlined. docs/device-shm.md.
 */
#define _GNU_SOURCE /* flock, O_CLOEXEC under -std=c11 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <softub/errors.h>
#include "core/compiler.h"
#include "core/rand.h"
#include "dev/critpath.h"
#include "dev/shm_int.h"
#include "dev/spec.h"

static const struct ub__dev_ops shm_ops;

static int errno_to_ub(int e)
{
    switch (e) {
    case EACCES:
    case EPERM:
        return UB_EACCESS;
    case ENOMEM:
    case ENOSPC:
    case EMFILE:
    case ENFILE:
        return UB_ENOMEM;
    case EEXIST:
    case EBUSY:
        return UB_EBUSY;
    case ENOENT:
        return UB_ENOENT;
    case EINVAL:
        return UB_EINVAL;
    default:
        return UB_EIO;
    }
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

int ub__shm_objname(uint16_t id, char *buf, size_t len)
{
    return snprintf(buf, len, "/softub-%u-%u", (unsigned)getuid(), (unsigned)id);
}

int ub__shm_fifo_path(const char *dir, const char *name, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s%s.wake", dir, name);
    return n > 0 && (size_t)n < len ? 0 : UB_EINVAL;
}

/* ---- spec parser --------------------------------------------------------------- */

static int parse_option(void *cfg, const char *k, size_t klen, const char *v, size_t vlen)
{
    struct ub__shm_cfg *c = cfg;
    uint32_t x;
    if (ub__spec_key_is(k, klen, "lanes"))
        return ub__spec_u32(v, vlen, 1, UB_SHM_MAX_LANES, &c->lanes);
    if (ub__spec_key_is(k, klen, "slots")) {
        if (ub__spec_u32(v, vlen, UB_SHM_MIN_SLOTS, UB_SHM_MAX_SLOTS, &x) || (x & (x - 1)))
            return UB_EINVAL;
        c->slots = x;
        return 0;
    }
    if (ub__spec_key_is(k, klen, "mtu"))
        return ub__spec_u32(v, vlen, UB_SHM_MIN_MTU, UB_SHM_MAX_MTU, &c->mtu);
    if (ub__spec_key_is(k, klen, "peers"))
        return ub__spec_u32(v, vlen, 1, UB_SHM_MAX_PEERS, &c->max_peers);
    if (ub__spec_key_is(k, klen, "paths"))
        return ub__spec_u32(v, vlen, 1, UB_SHM_MAX_PATHS, &c->num_paths);
    if (ub__spec_key_is(k, klen, "wake")) {
        if (ub__spec_u32(v, vlen, 0, 1, &x))
            return UB_EINVAL;
        c->no_wake = x == 0;
        return 0;
    }
    return UB_EINVAL;
}

static int parse_spec(const char *spec, struct ub__shm_cfg *cfg)
{
    size_t len = strnlen(spec, UB_SHM_SPEC_MAX + 1);
    if (len > UB_SHM_SPEC_MAX)
        return UB_EINVAL;
    const char *s = spec, *end = spec + len;
    if (len >= 6 && memcmp(s, "shm://", 6) == 0)
        s += 6;
    else if (len >= 4 && memcmp(s, "shm:", 4) == 0)
        s += 4;
    const char *q = memchr(s, '?', (size_t)(end - s));
    const char *id_end = q ? q : end;
    uint32_t id = 0;
    if (id_end > s && ub__spec_u32(s, (size_t)(id_end - s), 0, UINT16_MAX, &id))
        return UB_EINVAL;
    cfg->id = (uint16_t)id;
    return q ? ub__spec_options(q + 1, end, parse_option, cfg) : 0;
}

int ub__shm_cfg_parse(const char *spec, struct ub__shm_cfg *cfg)
{
    if (!cfg)
        return UB_EINVAL;
    memset(cfg, 0, sizeof(*cfg));
    if (!spec)
        return UB_EINVAL;
    int rc = parse_spec(spec, cfg);
    if (rc)
        memset(cfg, 0, sizeof(*cfg));
    return rc;
}

/* ---- liveness ------------------------------------------------------------------- */

/*
 * Whether the owner of the object behind fd is alive: it holds LOCK_EX for
 * its whole life and the kernel drops it when the process dies, however it
 * dies. Exact, unlike pid checks, which pid reuse can fool.
 */
bool ub__shm_owner_alive(int fd)
{
    if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
        flock(fd, LOCK_UN);
        return false;
    }
    return errno == EWOULDBLOCK || errno == EINTR;
}

/* Whether fd is still the object linked under name (not unlinked and replaced). */
static bool still_linked(const char *name, int fd)
{
    int fd2 = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
    if (fd2 < 0)
        return false;
    struct stat a, b;
    bool same =
        fstat(fd, &a) == 0 && fstat(fd2, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
    close(fd2);
    return same;
}

/* A producer pid that no longer exists (EPERM: exists, another user's). */
bool ub__shm_pid_dead(uint32_t pid)
{
    return pid == 0 || pid > INT32_MAX || (kill((pid_t)pid, 0) != 0 && errno == ESRCH);
}

/* ---- open / close ---------------------------------------------------------------- */

/*
 * Creates and locks the object `name`, reclaiming a stale one. Returns the
 * fd, or a negative error (UB_EBUSY: a live owner has it).
 *
 * Races: two openers of one name, or an opener and a reclaimer, each end
 * holding the lock of the inode they checked is still linked under the
 * name; only one inode is linked, so exactly one wins.
 */
static int create_locked(struct shm_dev *s, const char *name, const char *fifo)
{
    for (int t = 0; t < SHM_OPEN_TRIES; t++) {
        int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0) {
            if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
                /* A reclaimer took it for stale in the instant before our lock: it wins. */
                close(fd);
                return UB_EBUSY;
            }
            if (still_linked(name, fd))
                return fd;
            close(fd);
            continue;
        }
        if (errno != EEXIST)
            return errno_to_ub(errno);
        fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
        if (fd < 0) {
            if (errno == ENOENT)
                continue; /* unlinked meanwhile: create again */
            return errno_to_ub(errno);
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            close(fd);
            return e == EWOULDBLOCK ? UB_EBUSY : errno_to_ub(e);
        }
        /* Unlocked: its owner died without closing. Unlink it; live mappings keep the inode. */
        if (still_linked(name, fd)) {
            shm_unlink(name);
            unlink(fifo);
            s->st.stale_reclaimed++;
        }
        close(fd);
    }
    return UB_EBUSY;
}

static void shm_free(struct shm_dev *s)
{
    if (s->peers)
        for (uint32_t i = 0; i < s->cfg.max_peers; i++)
            if (s->peers[i].used)
                ub__shm_detach(s, &s->peers[i]);
    if (s->hdr) {
        /* Producers see CLOSED and detach; the unlink makes the id free for a new owner. */
        atomic_store_explicit(&s->hdr->state, SHM_CLOSED, memory_order_release);
        shm_unlink(s->name);
        if (s->rfd >= 0)
            unlink(s->fifo);
    }
    if (s->base)
        munmap(s->base, s->size);
    if (s->rfd >= 0)
        close(s->rfd);
    if (s->fd >= 0)
        close(s->fd); /* drops the lock last: nobody reclaims the name while we tear down */
    free(s->peers);
    free(s->tab);
    free(s->gone);
    free(s->rx_delta);
    free(s);
}

/* Undoes a half-done open_id: nothing of a failed attempt stays linked or open. */
static void open_undo(struct shm_dev *s, bool fifo_made)
{
    if (s->rfd >= 0)
        close(s->rfd);
    if (fifo_made)
        unlink(s->fifo);
    if (s->base)
        munmap(s->base, s->size);
    shm_unlink(s->name);
    close(s->fd);
    s->rfd = s->fd = -1;
    s->base = NULL;
    s->hdr = NULL;
}

static int open_id(struct shm_dev *s, uint16_t id)
{
    ub__shm_objname(id, s->name, sizeof(s->name));
    if (ub__shm_fifo_path(s->dir, s->name, s->fifo, sizeof(s->fifo)))
        return UB_EINVAL;
    int fd = create_locked(s, s->name, s->fifo);
    if (fd < 0)
        return fd;
    s->fd = fd;
    bool fifo_made = false;
    int rc = 0;
    void *m = MAP_FAILED;
    if (ftruncate(fd, (off_t)s->size) != 0 ||
        (m = mmap(NULL, s->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
        rc = errno_to_ub(errno);
    if (rc == 0) {
        s->base = m;
        s->hdr = m;
    }
    if (rc == 0 && !s->cfg.no_wake) {
        unlink(s->fifo); /* a leftover of a crashed owner that nobody reclaimed */
        if (mkfifo(s->fifo, 0600) != 0) {
            rc = errno_to_ub(errno);
        } else {
            fifo_made = true;
            /* O_RDWR: the FIFO always has a writer, so poll never reports a hang-up. */
            s->rfd = open(s->fifo, O_RDWR | O_NONBLOCK | O_CLOEXEC);
            if (s->rfd < 0)
                rc = errno_to_ub(errno);
        }
    }
    if (rc) {
        open_undo(s, fifo_made);
        /* EBUSY means "try the next id" to an auto-open: a real failure must not. */
        return rc == UB_EBUSY ? UB_EIO : rc;
    }
    s->dev.local.port = id;
    s->st.id = id;
    return 0;
}

/* Fills the header of a fresh (zeroed) object and makes it visible. */
static void publish_hdr(struct shm_dev *s, uint64_t lane_off, uint64_t slot_off)
{
    struct shm_hdr *h = s->hdr;
    h->magic = SHM_MAGIC;
    h->version = SHM_VERSION;
    h->hdr_size = SHM_HDR_SIZE;
    h->lanes = s->cfg.lanes;
    h->slots = s->cfg.slots;
    h->slot_size = s->slot_size;
    h->mtu = s->cfg.mtu;
    h->lane_off = lane_off;
    h->slot_off = slot_off;
    h->obj_size = s->size;
    h->probe_addr = (uint64_t)(uintptr_t)&s->probe;
    h->probe_value = s->probe;
    h->owner_pid = (uint32_t)getpid();
    h->flags = s->cfg.no_wake ? 0 : SHM_FLAG_WAKE;
    h->id = s->dev.local.port;
    /*
     * Armed from the start: then at every moment either the waiting word is set or a byte
     * waits in the FIFO (only an arming receive drains it), so a caller that sleeps on fd()
     * after busy-polling receives alone is still woken.
     */
    atomic_store_explicit(&h->waiting, s->cfg.no_wake ? 0u : 1u, memory_order_relaxed);
    s->armed = !s->cfg.no_wake;
    s->st.wake_armed = s->armed ? 1 : 0;
    atomic_store_explicit(&h->state, SHM_READY, memory_order_release);
}

static uint64_t probe_seed(const struct shm_dev *s)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ub__mix64((uint64_t)getpid() << 32 ^ (uint64_t)(uintptr_t)s ^ (uint64_t)ts.tv_nsec ^
                     (uint64_t)ts.tv_sec << 30) |
           1;
}

int ub__shm_open(const struct ub__shm_cfg *cfg, struct ub__dev **out)
{
    if (!out)
        return UB_EINVAL;
    *out = NULL;
    if (!cfg)
        return UB_EINVAL;
    struct ub__shm_cfg c = *cfg;
    if (!c.lanes)
        c.lanes = UB_SHM_DEFAULT_LANES;
    if (!c.slots)
        c.slots = UB_SHM_DEFAULT_SLOTS;
    if (!c.mtu)
        c.mtu = UB_SHM_DEFAULT_MTU;
    if (!c.max_peers)
        c.max_peers = UB_SHM_DEFAULT_PEERS;
    if (!c.num_paths)
        c.num_paths = 1;
    if (c.lanes > UB_SHM_MAX_LANES || c.slots < UB_SHM_MIN_SLOTS || c.slots > UB_SHM_MAX_SLOTS ||
        (c.slots & (c.slots - 1)) || c.mtu < UB_SHM_MIN_MTU || c.mtu > UB_SHM_MAX_MTU ||
        c.max_peers > UB_SHM_MAX_PEERS || c.num_paths > UB_SHM_MAX_PATHS)
        return UB_EINVAL;
    const char *dir = c.dir ? c.dir : SHM_DEFAULT_DIR;
    uint32_t slot_size = (uint32_t)align_up(SHM_SLOT_HDR + c.mtu, SHM_CACHELINE);
    uint64_t lane_off = SHM_HDR_SIZE;
    uint64_t slot_off = align_up(lane_off + c.lanes * sizeof(struct shm_lane), 4096);
    uint64_t size = slot_off + (uint64_t)c.lanes * c.slots * slot_size;
    if (size > SHM_MAX_OBJ || strlen(dir) >= sizeof(((struct shm_dev *)0)->dir))
        return UB_EINVAL;

    struct shm_dev *s = calloc(1, sizeof(*s));
    if (!s)
        return UB_ENOMEM;
    s->fd = s->rfd = -1;
    memcpy(s->dir, dir, strlen(dir) + 1);
    c.dir = NULL; /* the caller's string need not outlive open */
    s->cfg = c;
    s->np = c.num_paths;
    s->slot_size = slot_size;
    s->size = (size_t)size;
    s->probe = probe_seed(s);
    s->dev.ops = &shm_ops;
    ub__shm_addr(&s->dev.local, 0);
    uint32_t tab = 4;
    while (tab < 2 * c.max_peers)
        tab <<= 1;
    s->tab_mask = tab - 1;
    s->peers = calloc(c.max_peers, sizeof(*s->peers));
    s->tab = calloc(tab, sizeof(*s->tab));
    s->gone = calloc(c.max_peers, sizeof(*s->gone));
    s->rx_delta = calloc(c.lanes, sizeof(*s->rx_delta));
    int rc = s->peers && s->tab && s->gone && s->rx_delta ? 0 : UB_ENOMEM;
    if (rc == 0 && c.id) {
        rc = open_id(s, c.id);
    } else if (rc == 0) {
        /* Spread the starting point so concurrent auto-openers rarely collide. */
        uint32_t start = (uint32_t)(s->probe % UINT16_MAX);
        rc = UB_EBUSY;
        for (uint32_t k = 0; k < UB_SHM_AUTO_TRIES && rc == UB_EBUSY; k++)
            rc = open_id(s, (uint16_t)((start + k) % UINT16_MAX + 1));
    }
    if (rc) {
        shm_free(s); /* open_id left nothing behind */
        return rc;
    }
    s->lanes = (struct shm_lane *)(void *)(s->base + lane_off);
    s->slots = s->base + slot_off;
    publish_hdr(s, lane_off, slot_off);
    s->st.lanes = c.lanes;
    s->st.slots = c.slots;
    s->st.mtu = c.mtu;
    s->st.slot_size = slot_size;
    s->st.num_paths = c.num_paths;
    s->st.obj_size = size;
    *out = &s->dev;
    return 0;
}

static void shm_close(struct ub__dev *dev)
{
    shm_free(shm_of(dev));
}

/* ---- peers ------------------------------------------------------------------------ */

static struct shm_peer *peer_find(struct shm_dev *s, uint16_t id)
{
    /* A sender talks to one peer at a time: its slot is checked before the table. */
    struct shm_peer *pe = s->last;
    if (pe && pe->used && pe->id == id)
        return pe;
    for (uint32_t h = tab_home(s, id), n = 0; n <= s->tab_mask; h = (h + 1) & s->tab_mask, n++) {
        uint16_t v = s->tab[h];
        if (!v)
            return NULL;
        if (s->peers[v - 1].id == id)
            return s->last = &s->peers[v - 1];
    }
    return NULL;
}

static inline void wake_peer(struct shm_dev *s, struct shm_peer *pe)
{
    /*
     * Dekker with the consumer's arm: it stores waiting then loads tails;
     * we stored the tail and load waiting, each side with a seq_cst fence
     * between, so at least one sees the other: either the consumer finds
     * our slots, or we find it waiting and wake it.
     */
    if (pe->wfd < 0)
        return; /* the receiver busy-polls (wake=0) */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&pe->hdr->waiting, memory_order_relaxed) &&
        atomic_exchange_explicit(&pe->hdr->waiting, 0, memory_order_relaxed)) {
        static const uint8_t one = 1;
        /* EAGAIN: the FIFO already holds bytes, the consumer is woken anyway. */
        ssize_t r = write(pe->wfd, &one, 1);
        (void)r;
        s->st.wake_sent++;
    } else {
        s->st.wake_avoided++;
    }
}

/* Makes the slots written so far visible, with one store for the whole batch. */
void ub__shm_publish(struct shm_dev *s, struct shm_peer *pe)
{
    if (!pe || pe->tail == pe->pub)
        return;
    atomic_store_explicit(&pe->lane->tail, pe->tail, memory_order_release);
    pe->pub = pe->tail;
    s->st.tx_publishes++;
    wake_peer(s, pe);
}

/* The peer at id, attaching on first use (a closed receiver is dropped and looked up again);
 * NULL with *rc ub__shm_attach's error. A peer of another version is as good as gone for the layers
 * above: nothing sent to it will ever be answered. */
static struct shm_peer *get_peer(struct shm_dev *s, uint16_t id, int *rc)
{
    struct shm_peer *pe = peer_find(s, id);
    if (pe && atomic_load_explicit(&pe->hdr->state, memory_order_acquire) != SHM_READY) {
        ub__shm_peer_dead(s, pe);
        pe = NULL;
    }
    if (!pe && (*rc = ub__shm_attach(s, id, &pe)) != 0) {
        if (*rc == UB_EPROTO)
            ub__shm_note_gone(s, id);
        return NULL;
    }
    pe->last_use = ++s->tick;
    return pe;
}

static inline uint64_t lane_used(struct shm_peer *pe)
{
    uint64_t used = pe->tail - pe->head_cache;
    if (used > pe->mask) {
        pe->head_cache = atomic_load_explicit(&pe->lane->head, memory_order_acquire);
        used = pe->tail - pe->head_cache;
    }
    return used;
}

/* ---- send -------------------------------------------------------------------------- */

/* Whether `port` is among the `n` peers whose lanes a send found full. */
static inline bool full_peer(const uint16_t *full, uint32_t n, uint16_t port)
{
    for (uint32_t i = 0; i < n; i++)
        if (full[i] == port)
            return true;
    return false;
}

/*
 * A full lane refuses its packet and that peer's later ones (a lane stays in order) and the
 * rest go on: a receiver that does not drain holds back only its own traffic. The refused
 * are gathered in front while the loop runs (never ahead of it) and moved behind at the end.
 */
static int shm_send(struct ub__dev *dev, struct ub__pkt **pkts, uint32_t n)
{
    struct shm_dev *s = shm_of(dev);
    n = UB_MIN(n, (uint32_t)INT32_MAX);
    struct shm_peer *cur = NULL;
    uint16_t full[SHM_FULL_PEERS];
    uint32_t nfull = 0, refused = 0, k = 0;
    for (; k < n; k++) {
        struct ub__pkt *p = pkts[k];
        uint32_t len = ub__pkt_total_len(p); /* an attached payload is copied in below */
        if (len > s->cfg.mtu) {
            /* Refused, not dropped: the caller keeps this one and the rest. */
            s->st.tx_too_big++;
            if (k == 0)
                return UB_ELENGTH;
            break;
        }
        if (nfull && full_peer(full, nfull, p->addr.port)) {
            s->st.tx_full++;
            pkts[refused++] = p;
            continue;
        }
        if (p->addr.family != UB_AF_SHM) {
            s->st.tx_bad_addr++;
            ub__pkt_free(p);
            continue;
        }
        if (!cur || cur->id != p->addr.port) {
            /* Publish per peer switch: attach may evict, and a batch rarely alternates. */
            ub__shm_publish(s, cur);
            int rc;
            cur = get_peer(s, p->addr.port, &rc);
            if (!cur) {
                s->st.tx_unreach++;
                ub__pkt_free(p);
                continue;
            }
        }
        if (len > cur->mtu) {
            s->st.tx_peer_too_big++;
            ub__pkt_free(p);
            continue;
        }
        if (lane_used(cur) > cur->mask) {
            /* Full. A receiver that died never drains: recognise it rather than stall. The
             * caller retries a full lane every round, so the liveness probe (a system
             * call) runs on the first hit and then every SHM_FULL_PROBE-th. */
            if ((cur->full++ % SHM_FULL_PROBE) == 0 && ub__shm_peer_gone(cur)) {
                ub__shm_peer_dead(s, cur);
                cur = NULL;
                s->st.tx_unreach++;
                ub__pkt_free(p);
                continue;
            }
            if (nfull == SHM_FULL_PEERS) {
                s->st.tx_full += n - k; /* this one and the rest refused */
                break;
            }
            full[nfull++] = cur->id;
            s->st.tx_full++;
            pkts[refused++] = p;
            continue;
        }
        struct shm_slot *sl = slot_at(cur->slots, cur->tail, cur->mask, cur->slot_size);
        ub__critpath_tx(&s->dev);
        sl->m.len = len;
        sl->m.src = s->dev.local.port;
        sl->m.path = p->path;
        sl->m.ecn = p->ecn;
        uint32_t body = 0;
        if (!p->xlen && ub__shm_delta_fits(len))
            body =
                ub__shm_delta_encode(&cur->delta, p->data, len, (uint8_t *)(sl + 1), &sl->m.mask);
        sl->m.enc = body != 0;
        if (!body) {
            memcpy(sl + 1, p->data, p->len);
            if (p->xlen) /* the payload straight from where it lives: one copy, not two */
                memcpy((uint8_t *)(sl + 1) + p->len, p->xdata, p->xlen);
        }
        s->st.tx_delta += body != 0;
        atomic_store_explicit(&sl->seq, (uint32_t)(cur->tail + 1), memory_order_release);
        cur->tail++;
        cur->full = 0;
        s->st.tx_pkts++;
        s->st.tx_bytes += len;
        ub__pkt_free(p);
    }
    ub__shm_publish(s, cur);
    /* The refused: those gathered in front, then pkts[k..n), in order, at the end. */
    if (refused)
        memmove(pkts + (k - refused), pkts, refused * sizeof(*pkts));
    return (int)(k - refused);
}

/* ---- receive ------------------------------------------------------------------------ */

static inline uint32_t pool_room(const struct ub__pktpool *pool)
{
    return pool->buf_size - pool->headroom;
}

/* Lane i's next slot, the one its head points at. */
static inline struct shm_slot *next_slot(const struct shm_dev *s, uint32_t i, uint64_t head)
{
    uint32_t mask = s->cfg.slots - 1;
    return slot_at(s->slots + (uint64_t)i * (mask + 1) * s->slot_size, head, mask, s->slot_size);
}

/*
 * Takes up to `want` packets from lane i into out. A slot is read after an
 * acquire load of its seq (pairs with the producer's release store) and the
 * lane is released with a release store of the head after the slots are
 * copied out, so the producer never overwrites a slot being read.
 */
static uint32_t recv_lane(struct shm_dev *s, uint32_t i, struct ub__pkt **out, uint32_t want,
                          struct ub__pktpool *pool, bool *stalled)
{
    uint64_t h = s->head[i];
    uint32_t n = 0, room = pool_room(pool);
    /* At most a lap per call, however fast a (broken) producer keeps filling it. */
    for (uint32_t seen = 0; n < want && seen < s->cfg.slots; seen++) {
        const struct shm_slot *slot = next_slot(s, i, h);
        if (!slot_full(slot, h, memory_order_acquire))
            break;
        /* One snapshot of the header: a writer scribbling on it cannot change what we check. */
        struct shm_meta sh;
        memcpy(&sh, &slot->m, sizeof(sh));
        atomic_signal_fence(memory_order_seq_cst);
        if (sh.len > s->cfg.mtu || sh.len > room) {
            s->st.rx_bad_slot++;
            h++;
            continue;
        }
        struct ub__pkt *p = ub__pkt_alloc(pool);
        if (!p) {
            s->st.rx_pool_empty++;
            *stalled = true;
            break;
        }
        const uint8_t *body = (const uint8_t *)slot + SHM_SLOT_HDR;
        if (sh.enc) {
            if (ub__shm_delta_decode(&s->rx_delta[i], sh.len, sh.mask, body, p->data, room) != 0) {
                ub__pkt_free(p);
                s->st.rx_bad_slot++;
                h++;
                continue;
            }
            s->st.rx_delta++;
        } else {
            memcpy(p->data, body, sh.len);
            if (ub__shm_delta_fits(sh.len))
                ub__shm_delta_note(&s->rx_delta[i], p->data, sh.len);
        }
        p->len = sh.len;
        ub__shm_addr(&p->addr, sh.src);
        p->path = (uint16_t)ub__mod_below(sh.path, s->np);
        p->ecn = (uint8_t)(sh.ecn & 3u);
        s->st.rx_pkts++;
        s->st.rx_bytes += sh.len;
        out[n++] = p;
        h++;
    }
    if (h != s->head[i]) {
        s->head[i] = h;
        atomic_store_explicit(&s->lanes[i].head, h, memory_order_release);
    }
    return n;
}

/* A producer claimed a lane since: its slots (which it mapped writing) are mapped here too. */
static void map_lanes(struct shm_dev *s, uint64_t used)
{
    for (uint64_t m = used & ~s->mapped; m; m &= m - 1) {
        uint32_t i = (uint32_t)__builtin_ctzll(m);
        (void)ub__shm_lane_prefault(s->slots + (uint64_t)i * s->cfg.slots * s->slot_size,
                                    s->cfg.slots, s->slot_size, MADV_POPULATE_READ);
    }
    s->mapped = used;
}

/*
 * One round-robin pass over the lanes that hold something, each taking an equal share first,
 * then (only if some lane filled its share) whatever is left. It visits the claimed lanes'
 * bits only: an empty poll, the busy poller's common case, costs one load per lane (its next
 * slot's seq).
 */
static uint32_t recv_pass(struct shm_dev *s, struct ub__pkt **pkts, uint32_t max,
                          struct ub__pktpool *pool, bool *stalled)
{
    uint64_t used = atomic_load_explicit(&s->hdr->used, memory_order_acquire);
    uint32_t nl = s->cfg.lanes, rr = s->rr;
    if (!used)
        return 0;
    if (UB_UNLIKELY(used & ~s->mapped))
        map_lanes(s, used);
    if (++s->rr >= nl)
        s->rr = 0;
    /* Bit b of rot is lane (rr + b) mod 64: lanes rr.. first, then the ones before it. */
    uint64_t rot = rr ? (used >> rr) | (used << (64 - rr)) : used;
    uint8_t busy[UB_SHM_MAX_LANES];
    uint32_t k = 0;
    for (uint64_t m = rot; m; m &= m - 1) {
        uint32_t i = (rr + (uint32_t)__builtin_ctzll(m)) & 63u;
        if (slot_full(next_slot(s, i, s->head[i]), s->head[i], memory_order_relaxed))
            busy[k++] = (uint8_t)i;
    }
    if (!k)
        return 0;
    ub__critpath_rx(&s->dev);
    uint32_t n = 0, share = k == 1 ? max : UB_MAX(1u, max / k); /* one lane: no division */
    for (uint32_t round = 0; round < 2; round++) {
        uint32_t q = round == 0 ? share : max;
        bool more = false;
        for (uint32_t j = 0; j < k && n < max && !*stalled; j++) {
            uint32_t want = UB_MIN(q, max - n);
            uint32_t got = recv_lane(s, busy[j], pkts + n, want, pool, stalled);
            n += got;
            more |= got == want;
        }
        if (!more || n >= max || *stalled)
            break;
    }
    return n;
}

static bool lanes_empty(const struct shm_dev *s)
{
    uint64_t used = atomic_load_explicit(&s->hdr->used, memory_order_acquire);
    for (uint32_t i = 0; used; i++, used >>= 1)
        if ((used & 1) && slot_full(next_slot(s, i, s->head[i]), s->head[i], memory_order_acquire))
            return false;
    return true;
}

static void drain_fifo(struct shm_dev *s)
{
    uint8_t buf[64];
    for (int i = 0; i < SHM_DRAIN_MAX; i++)
        if (read(s->rfd, buf, sizeof(buf)) < (ssize_t)sizeof(buf))
            break;
    s->st.wake_drained++;
}

/*
 * Nothing to receive: make sure a producer wakes us. While our waiting
 * word is still set nobody has consumed the request and nothing is owed,
 * so a busy-polling caller pays one load here. Once a producer has cleared
 * it (and written the FIFO), we drain the FIFO and set it again.
 */
static bool arm(struct shm_dev *s)
{
    if (s->armed && atomic_load_explicit(&s->hdr->waiting, memory_order_relaxed))
        return false;
    if (s->armed)
        drain_fifo(s);
    atomic_store_explicit(&s->hdr->waiting, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst); /* pairs with the producer's, see wake_peer */
    s->armed = true;
    s->st.wake_armed++;
    /* A producer that published before our store did not see it: look again. */
    return !lanes_empty(s);
}

static int shm_recv(struct ub__dev *dev, struct ub__pkt **pkts, uint32_t max,
                    struct ub__pktpool *pool)
{
    struct shm_dev *s = shm_of(dev);
    if (!pool)
        return UB_EINVAL;
    max = UB_MIN(max, (uint32_t)INT32_MAX);
    if (max == 0)
        return 0;
    bool stalled = false;
    uint32_t n = recv_pass(s, pkts, max, pool, &stalled);
    /* Arm whenever the lanes were drained, not only when they were empty: a caller
     * that goes to sleep after a receive that found something must be woken too. */
    if (n < max && !stalled && s->rfd >= 0 && !s->busy && arm(s))
        n += recv_pass(s, pkts + n, max - n, pool, &stalled);
    return (int)n;
}

/* ---- the rest of the vtable and helpers --------------------------------------------- */

static int shm_fd(struct ub__dev *dev)
{
    return shm_of(dev)->rfd;
}

static uint32_t shm_mtu(const struct ub__dev *dev)
{
    return shm_of(dev)->cfg.mtu;
}

static uint32_t shm_num_paths(const struct ub__dev *dev)
{
    return shm_of(dev)->np;
}

static const struct ub__dev_ops shm_ops = {
    .name = "shm",
    .gather = true, /* an attached payload is copied into the slot with the headers */
    .send = shm_send,
    .recv = shm_recv,
    .fd = shm_fd,
    .mtu = shm_mtu,
    .num_paths = shm_num_paths,
    .close = shm_close,
};

int ub__shm_stats(const struct ub__dev *dev, struct ub__shm_stats *out)
{
    if (!dev || !out || dev->ops != &shm_ops)
        return UB_EINVAL;
    *out = shm_of(dev)->st;
    return 0;
}

int ub__shm_arm(struct ub__dev *dev)
{
    if (!dev || dev->ops != &shm_ops)
        return UB_EINVAL;
    struct shm_dev *s = shm_of(dev);
    if (s->rfd < 0)
        return 0;
    if (s->armed && atomic_load_explicit(&s->hdr->waiting, memory_order_relaxed))
        return lanes_empty(s) ? 0 : 1;
    return arm(s) ? 1 : 0;
}

bool ub__shm_rx_ready(const struct ub__dev *dev)
{
    if (!dev || dev->ops != &shm_ops)
        return false;
    const struct shm_dev *s = shm_of(dev);
    /* Only shared atomics: the lane's published head, not our private copy of it. */
    uint64_t used = atomic_load_explicit(&s->hdr->used, memory_order_acquire);
    for (; used; used &= used - 1) {
        uint32_t i = (uint32_t)__builtin_ctzll(used);
        uint64_t h = atomic_load_explicit(&s->lanes[i].head, memory_order_relaxed);
        if (slot_full(next_slot(s, i, h), h, memory_order_acquire))
            return true;
    }
    return false;
}

void ub__shm_set_busy_poll(struct ub__dev *dev, bool on)
{
    if (dev && dev->ops == &shm_ops)
        shm_of(dev)->busy = on;
}

int ub__shm_layout(const struct ub__dev *dev, struct ub__shm_layout *out)
{
    if (!dev || !out || dev->ops != &shm_ops)
        return UB_EINVAL;
    const struct shm_dev *s = shm_of(dev);
    out->obj_size = s->size;
    out->lane_off = s->hdr->lane_off;
    out->lane_size = sizeof(struct shm_lane);
    out->slot_off = s->hdr->slot_off;
    out->slot_len = (uint64_t)s->cfg.lanes * s->cfg.slots * s->slot_size;
    return 0;
}

int ub__shm_reachable(const struct ub__addr *a)
{
    if (!a || a->family != UB_AF_SHM || a->port == 0)
        return UB_EINVAL;
    char name[UB_SHM_NAME_MAX];
    ub__shm_objname(a->port, name, sizeof(name));
    int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0)
        return errno == EACCES ? UB_EACCESS : UB_EUNREACH;
    int rc = UB_EUNREACH;
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size >= (off_t)SHM_HDR_SIZE) {
        void *m = mmap(NULL, SHM_HDR_SIZE, PROT_READ, MAP_SHARED, fd, 0);
        if (m != MAP_FAILED) {
            const struct shm_hdr *h = m;
            if (atomic_load_explicit(&h->state, memory_order_acquire) == SHM_READY &&
                h->magic == SHM_MAGIC && ub__shm_owner_alive(fd))
                rc = h->version == SHM_VERSION ? 0 : UB_EPROTO;
            munmap(m, SHM_HDR_SIZE);
        }
    }
    close(fd);
    return rc;
}

static struct shm_peer *peer_for(struct ub__dev *dev, const struct ub__addr *dst, int *rc)
{
    *rc = UB_EINVAL;
    if (!dev || dev->ops != &shm_ops || !dst || dst->family != UB_AF_SHM)
        return NULL;
    *rc = 0;
    return get_peer(shm_of(dev), dst->port, rc);
}

int ub__shm_tx_space(struct ub__dev *dev, const struct ub__addr *dst)
{
    int rc;
    struct shm_peer *pe = peer_for(dev, dst, &rc);
    if (!pe)
        return rc;
    pe->head_cache = atomic_load_explicit(&pe->lane->head, memory_order_acquire);
    uint64_t used = pe->tail - pe->head_cache;
    return used > pe->mask ? 0 : (int)(pe->mask + 1 - used);
}

int ub__shm_peer_cma(struct ub__dev *dev, const struct ub__addr *dst, pid_t *pid)
{
    int rc;
    struct shm_peer *pe = peer_for(dev, dst, &rc);
    if (!pe)
        return rc;
    if (pid)
        *pid = pe->pid;
    return pe->cma ? 0 : UB_ENOTSUP;
}

int ub__shm_check_peers(struct ub__dev *dev)
{
    if (!dev || dev->ops != &shm_ops)
        return UB_EINVAL;
    struct shm_dev *s = shm_of(dev);
    int n = 0;
    for (uint32_t i = 0; i < s->cfg.max_peers; i++)
        if (s->peers[i].used && ub__shm_peer_gone(&s->peers[i])) {
            ub__shm_peer_dead(s, &s->peers[i]);
            n++;
        }
    return n;
}

uint32_t ub__shm_take_gone(struct ub__dev *dev, uint16_t *ids, uint32_t max)
{
    if (!dev || dev->ops != &shm_ops)
        return 0;
    struct shm_dev *s = shm_of(dev);
    uint32_t n = UB_MIN(max, s->ngone);
    memcpy(ids, s->gone, n * sizeof(*ids));
    memmove(s->gone, s->gone + n, (s->ngone - n) * sizeof(*ids));
    s->ngone -= n;
    return n;
}
