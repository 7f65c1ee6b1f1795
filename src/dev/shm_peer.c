/*
 * The shm device's peer side: the table of receivers a device sends to, attaching to a
 * receiver's object (claiming a lane in it, probing single copy), detaching, and single copy
 * itself (process_vm_readv/writev). None of it runs per packet: the data path (shm.c) calls
 * in only for a peer not attached yet or found gone. docs/device-shm.md.
 */
#define _GNU_SOURCE /* process_vm_readv/writev, O_CLOEXEC under -std=c11 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <string.h>

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <softub/errors.h>
#include "core/clock.h"
#include "dev/shm_int.h"

#define CMA_PROBE_PAGE 4096u
#define CMA_PROBE_RUNS 8

/* ---- peers ------------------------------------------------------------------------ */

static void tab_insert(struct shm_dev *s, uint32_t idx, uint16_t id)
{
    uint32_t h = tab_home(s, id);
    while (s->tab[h])
        h = (h + 1) & s->tab_mask;
    s->tab[h] = (uint16_t)(idx + 1);
}

/* Linear probing deletion by backward shift: no tombstones, lookups stay short. */
static void tab_remove(struct shm_dev *s, uint32_t idx)
{
    uint32_t i = tab_home(s, s->peers[idx].id);
    while (s->tab[i] != idx + 1)
        i = (i + 1) & s->tab_mask;
    s->tab[i] = 0;
    for (uint32_t j = (i + 1) & s->tab_mask; s->tab[j]; j = (j + 1) & s->tab_mask) {
        uint32_t k = tab_home(s, s->peers[s->tab[j] - 1].id);
        /* Move j back into the hole unless its home lies cyclically in (i, j]. */
        bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            s->tab[i] = s->tab[j];
            s->tab[j] = 0;
            i = j;
        }
    }
}

void ub__shm_detach(struct shm_dev *s, struct shm_peer *pe)
{
    ub__shm_publish(s, pe);
    /* Release: a producer that takes the lane over sees our final tail. */
    atomic_store_explicit(&pe->lane->owner, 0, memory_order_release);
    munmap(pe->base, pe->size);
    close(pe->fd);
    if (pe->wfd >= 0)
        close(pe->wfd);
    tab_remove(s, (uint32_t)(pe - s->peers));
    memset(pe, 0, sizeof(*pe));
    s->npeers--;
    s->st.detach++;
    s->st.peers = s->npeers;
}

/* Copies and checks the layout a peer's header claims, against the object's real size. */
static bool layout_ok(const struct shm_hdr *h, uint64_t size, struct shm_peer *pe)
{
    uint32_t lanes = h->lanes, slots = h->slots, slot_size = h->slot_size, mtu = h->mtu;
    uint64_t lane_off = h->lane_off, slot_off = h->slot_off;
    if (h->magic != SHM_MAGIC || h->version != SHM_VERSION || lanes == 0 ||
        lanes > UB_SHM_MAX_LANES || slots < UB_SHM_MIN_SLOTS || slots > UB_SHM_MAX_SLOTS ||
        (slots & (slots - 1)) || mtu < UB_SHM_MIN_MTU || mtu > UB_SHM_MAX_MTU ||
        slot_size < SHM_SLOT_HDR + mtu || slot_size % SHM_CACHELINE || lane_off < SHM_HDR_SIZE ||
        lane_off % SHM_CACHELINE || slot_off < lane_off + lanes * sizeof(struct shm_lane) ||
        slot_off % SHM_CACHELINE || slot_off + (uint64_t)lanes * slots * slot_size > size)
        return false;
    pe->mask = slots - 1;
    pe->slot_size = slot_size;
    pe->mtu = mtu;
    return true;
}

/*
 * Maps a lane's slots into this process now rather than one page fault at a time as the ring
 * first goes round: otherwise the first few hundred packets through a lane each pay a fault
 * (a small ping-pong ran at 10 us instead of 0.85 for its first 200 round trips). Slots
 * of two pages or more get their first page only, where a small packet lies; a larger one
 * pays for its other pages once, beside its copy. False when the memory cannot be had (a
 * full tmpfs: touching it would raise SIGBUS); a kernel without MADV_POPULATE_* just faults
 * as before.
 */
bool ub__shm_lane_prefault(uint8_t *slots, uint32_t nslots, uint32_t slot_size, int advice)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)slots & ~(page - 1);
    int rc = 0;
    if (slot_size < 2 * page) {
        uintptr_t hi = (uintptr_t)slots + (uintptr_t)nslots * slot_size;
        rc = madvise((void *)lo, hi - lo, advice);
    } else {
        for (uint32_t i = 0; i < nslots && rc == 0; i++) {
            uintptr_t at = ((uintptr_t)slots + (uintptr_t)i * slot_size) & ~(page - 1);
            rc = madvise((void *)at, page, advice);
        }
    }
    return rc == 0 || (errno != EFAULT && errno != ENOMEM);
}

/* Takes a free lane, or a dead producer's. Returns its index or -1. */
static int claim_lane(struct shm_dev *s, struct shm_lane *lanes, uint32_t n)
{
    uint32_t me = (uint32_t)getpid();
    for (uint32_t i = 0; i < n; i++) {
        uint32_t zero = 0;
        if (atomic_load_explicit(&lanes[i].owner, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong_explicit(&lanes[i].owner, &zero, me,
                                                    memory_order_acquire, memory_order_relaxed))
            return (int)i;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t old = atomic_load_explicit(&lanes[i].owner, memory_order_relaxed);
        /*
         * A producer that died mid-enqueue left nothing half-visible (its
         * unpublished slots lie beyond the tail): continuing from the tail
         * is safe.
         */
        if (old && old != me && ub__shm_pid_dead(old) &&
            atomic_compare_exchange_strong_explicit(&lanes[i].owner, &old, me, memory_order_acquire,
                                                    memory_order_relaxed)) {
            s->st.lanes_reclaimed++;
            return (int)i;
        }
    }
    return -1;
}

static bool cma_probe(pid_t pid, uint64_t addr, uint64_t expect)
{
    uint64_t v = 0;
    struct iovec l = {&v, sizeof(v)}, r = {(void *)(uintptr_t)addr, sizeof(v)};
    return process_vm_readv(pid, &l, 1, &r, 1, 0) == (ssize_t)sizeof(v) && v == expect;
}

static struct shm_peer *lru_victim(struct shm_dev *s)
{
    struct shm_peer *v = NULL;
    for (uint32_t i = 0; i < s->cfg.max_peers; i++)
        if (s->peers[i].used && (!v || s->peers[i].last_use < v->last_use))
            v = &s->peers[i];
    return v;
}

/* Maps endpoint id's object and claims a lane in it. Returns 0 or UB_EUNREACH/UB_EACCESS, or
 * UB_EPROTO: the object is another softub version's (its slots would not be understood). */
int ub__shm_attach(struct shm_dev *s, uint16_t id, struct shm_peer **out)
{
    char name[UB_SHM_NAME_MAX], fifo[PATH_MAX];
    ub__shm_objname(id, name, sizeof(name));
    if (ub__shm_fifo_path(s->dir, name, fifo, sizeof(fifo)))
        return UB_EUNREACH;
    int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) {
        s->st.attach_fail++;
        return errno == EACCES ? UB_EACCESS : UB_EUNREACH;
    }
    struct stat st;
    struct shm_peer pe = {.fd = fd, .wfd = -1, .id = id};
    int rc = UB_EUNREACH;
    if (fstat(fd, &st) != 0 || st.st_size < (off_t)SHM_HDR_SIZE ||
        (uint64_t)st.st_size > SHM_MAX_OBJ)
        goto fail;
    pe.size = (size_t)st.st_size;
    void *m = mmap(NULL, pe.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        goto fail;
    pe.base = m;
    pe.hdr = m;
    if (atomic_load_explicit(&pe.hdr->state, memory_order_acquire) != SHM_READY)
        goto fail;
    if (pe.hdr->magic == SHM_MAGIC && pe.hdr->version != SHM_VERSION) {
        /* Another softub's slot format: a peer there, but not one we can talk to. */
        s->st.attach_version++;
        rc = UB_EPROTO;
        goto fail;
    }
    if (!layout_ok(pe.hdr, pe.size, &pe) || !ub__shm_owner_alive(fd))
        goto fail;
    struct shm_lane *lanes = (struct shm_lane *)(void *)(pe.base + pe.hdr->lane_off);
    uint32_t nlanes = pe.hdr->lanes;
    uint64_t slot_off = pe.hdr->slot_off;
    bool wake = pe.hdr->flags & SHM_FLAG_WAKE;
    if (wake) {
        pe.wfd = open(fifo, O_RDWR | O_NONBLOCK | O_CLOEXEC);
        if (pe.wfd < 0)
            goto fail;
    }
    int li = claim_lane(s, lanes, nlanes);
    if (li < 0)
        goto fail;
    pe.lane_idx = (uint32_t)li;
    pe.lane = &lanes[li];
    pe.slots = pe.base + slot_off + (uint64_t)li * (pe.mask + 1) * pe.slot_size;
    /* We are the lane's only writer now; acquire pairs with a previous owner's release. */
    pe.tail = atomic_load_explicit(&pe.lane->tail, memory_order_acquire);
    pe.head_cache = atomic_load_explicit(&pe.lane->head, memory_order_acquire);
    /* A previous owner that died between writing slots and publishing its tail left them
     * complete and visible (their seq is set): continue after them, never over them. */
    for (uint32_t k = 0;
         k <= pe.mask && slot_full(slot_at(pe.slots, pe.tail, pe.mask, pe.slot_size), pe.tail,
                                   memory_order_acquire);
         k++)
        pe.tail++;
    pe.pub = pe.tail;
    if (!ub__shm_lane_prefault(pe.slots, pe.mask + 1, pe.slot_size, MADV_POPULATE_WRITE)) {
        atomic_store_explicit(&pe.lane->owner, 0, memory_order_release);
        goto fail;
    }
    atomic_fetch_or_explicit(&pe.hdr->used, 1ull << li, memory_order_release);
    pe.pid = (pid_t)pe.hdr->owner_pid;
    pe.cma = cma_probe(pe.pid, pe.hdr->probe_addr, pe.hdr->probe_value);

    if (s->npeers == s->cfg.max_peers) {
        ub__shm_detach(s, lru_victim(s));
        s->st.evicted++;
    }
    uint32_t idx = 0;
    while (s->peers[idx].used)
        idx++;
    pe.used = true;
    pe.last_use = ++s->tick;
    s->peers[idx] = pe;
    tab_insert(s, idx, id);
    s->npeers++;
    s->st.attach++;
    s->st.peers = s->npeers;
    *out = &s->peers[idx];
    return 0;
fail:
    if (pe.wfd >= 0)
        close(pe.wfd);
    if (pe.base)
        munmap(pe.base, pe.size);
    close(fd);
    s->st.attach_fail++;
    return rc;
}

/* Whether a receiver we are attached to has gone (closed, or died: its lock is free). */
bool ub__shm_peer_gone(const struct shm_peer *pe)
{
    return atomic_load_explicit(&pe->hdr->state, memory_order_acquire) != SHM_READY ||
           !ub__shm_owner_alive(pe->fd);
}

/* id for ub__shm_take_gone, once. */
void ub__shm_note_gone(struct shm_dev *s, uint16_t id)
{
    uint32_t i = 0;
    while (i < s->ngone && s->gone[i] != id)
        i++;
    if (i == s->ngone && s->ngone < s->cfg.max_peers)
        s->gone[s->ngone++] = id;
}

/* pe's receiver is dead or closed: detached, and its id kept for ub__shm_take_gone. */
void ub__shm_peer_dead(struct shm_dev *s, struct shm_peer *pe)
{
    ub__shm_note_gone(s, pe->id);
    ub__shm_detach(s, pe);
    s->st.peer_dead++;
}

/* ---- single copy ------------------------------------------------------------------- */

#define CMA_IOV 64 /* local segments per system call */

static int cma_xfer(pid_t pid, uint64_t remote, const struct iovec *iov, uint32_t iovcnt,
                    bool write_side)
{
    if (pid <= 0 || (iovcnt && !iov))
        return UB_EINVAL;
    uint64_t total = 0;
    for (uint32_t i = 0; i < iovcnt; i++)
        total += iov[i].iov_len;
    if (total && remote + total < remote)
        return UB_EINVAL;
    uint64_t done = 0;
    uint32_t idx = 0;
    size_t off = 0; /* into iov[idx] */
    int eintr = 0;
    while (done < total) {
        struct iovec l[CMA_IOV];
        uint32_t nl = 0;
        for (uint32_t j = idx; j < iovcnt && nl < CMA_IOV; j++) {
            size_t o = j == idx ? off : 0;
            if (iov[j].iov_len > o)
                l[nl++] = (struct iovec){(uint8_t *)iov[j].iov_base + o, iov[j].iov_len - o};
        }
        struct iovec r = {(void *)(uintptr_t)(remote + done), (size_t)(total - done)};
        ssize_t got = write_side ? process_vm_writev(pid, l, nl, &r, 1, 0)
                                 : process_vm_readv(pid, l, nl, &r, 1, 0);
        if (got < 0) {
            int e = errno;
            if (e == EINTR && eintr++ < 8)
                continue;
            switch (e) {
            case EPERM:
            case EACCES:
            case ENOSYS:
                return UB_ENOTSUP;
            case ESRCH:
                return UB_EUNREACH;
            case EFAULT:
            case EINVAL:
                return UB_EINVAL;
            case ENOMEM:
                return UB_ENOMEM;
            default:
                return UB_EIO;
            }
        }
        if (got == 0)
            return UB_EINVAL; /* the remote range ended: a partial transfer */
        done += (uint64_t)got;
        /* Advance the local position by what moved (partial transfers stop on a segment edge). */
        for (uint64_t left = (uint64_t)got; left && idx < iovcnt;) {
            size_t in = iov[idx].iov_len - off;
            if (left >= in) {
                left -= in;
                idx++;
                off = 0;
            } else {
                off += (size_t)left;
                left = 0;
            }
        }
    }
    return 0;
}

int ub__shm_cma_read(pid_t pid, uint64_t remote, const struct iovec *iov, uint32_t iovcnt)
{
    return cma_xfer(pid, remote, iov, iovcnt, false);
}

int ub__shm_cma_write(pid_t pid, uint64_t remote, const struct iovec *iov, uint32_t iovcnt)
{
    return cma_xfer(pid, remote, iov, iovcnt, true);
}

static uint64_t cma_time_ns(void)
{
    /* One page each way, page-aligned: the copy itself is a few dozen ns of the cost. */
    uint8_t *buf =
        mmap(NULL, 2 * CMA_PROBE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED)
        return 0;
    memset(buf, 1, 2 * CMA_PROBE_PAGE); /* faulted in: a transfer pins, never faults */
    struct iovec l = {buf + CMA_PROBE_PAGE, CMA_PROBE_PAGE};
    uint64_t best = UINT64_MAX;
    /* The least of a few: a preemption or a host's gap only ever adds. */
    for (int i = 0; i < CMA_PROBE_RUNS; i++) {
        uint64_t t0 = ub__clock_monotonic_ns(NULL);
        if (ub__shm_cma_read(getpid(), (uint64_t)(uintptr_t)buf, &l, 1) != 0) {
            best = 0;
            break;
        }
        uint64_t t = ub__clock_monotonic_ns(NULL) - t0;
        best = t < best ? t : best;
    }
    munmap(buf, 2 * CMA_PROBE_PAGE);
    return best;
}

uint64_t ub__shm_cma_cost_ns(void)
{
    /* The host's cost, once a process: every context of it then draws the same line, and
     * opening another costs no probe. Two first callers may both probe; either result stands. */
    static _Atomic uint64_t memo; /* the cost + 1; 0: not measured yet */
    uint64_t v = atomic_load_explicit(&memo, memory_order_relaxed);
    if (!v) {
        v = cma_time_ns() + 1;
        atomic_store_explicit(&memo, v, memory_order_relaxed);
    }
    return v - 1;
}
