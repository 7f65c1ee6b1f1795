/*
 * A context's runtime, around the object model of src/ses: how it was opened (device
 * kind, clock), its lock, and the automatic progress thread. `struct ub_context` is the
 * first member, so a context pointer is also a pointer to this. Internal.
 *
 * The threading rule (docs/progress.md): one recursive mutex per context. Every public
 * call that reads or writes the context's state (objects, rings, the engine) holds it;
 * the progress thread holds it around each round (receive, timers, send) and never
 * while it sleeps. JFCE fds are plain eventfds, written under the lock, read by anyone.
 */
#ifndef UB_API_CTX_H
#define UB_API_CTX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/clock.h"
#include "dev/dev.h"
#include "ses/ses.h"

enum ub__ctx_kind { UB_CTX_LOOP = 1, UB_CTX_UDP, UB_CTX_SHM, UB_CTX_MULTI };

#define UB_API_DEFAULT_SPIN_US 50
/* How long the progress thread leaves the device to an application thread that drives it from
 * ub_wait_jfc, counted from that thread's last wait (docs/progress.md). */
#define UB_API_DRIVER_LEASE_NS 500000
#define UB_API_UDP_BASE_RTT_NS 50000 /* unloaded RTT over kernel UDP (congestion control) */
#define UB_API_PACER_BURST     65536 /* a real device's pacing burst (ub__pds_cfg.pacer_burst) */
#define UB_API_PACER_BURST_NS  20000 /* ... or this long at the rate (pacer_burst_ns) */
#define UB_API_ZC_MIN          2048  /* request payloads attached, not copied, from this size */
/* A driving context probes its shm peers' processes at most this often: a dead one's
 * requests fail then, not at the response bound (no transport context watches it). */
#define UB_API_SHM_CHECK_NS 10000000

/*
 * The context lock: a futex mutex that knows its owner, so a thread may take it again (API
 * calls that call each other). Uncontended it costs a compare-and-swap and an exchange;
 * glibc's recursive mutex costs ~80 instructions a lock and unlock, paid three times per
 * side of every round trip (post send, post receive, poll).
 */
struct ub__lock {
    atomic_int state;       /* 0 free, 1 held, 2 held and maybe waited for */
    atomic_uintptr_t owner; /* the holder's pthread_self(), 0 when free */
    unsigned depth;         /* the owner's acquisitions beyond the first */
};

/* The contended halves (context.c). */
void ub__lock_wait(struct ub__lock *l);
void ub__lock_wake(struct ub__lock *l);

static inline void ub__lock_init(struct ub__lock *l)
{
    atomic_init(&l->state, 0);
    atomic_init(&l->owner, 0);
    l->depth = 0;
}

/* Takes the lock if nobody else holds it. */
static inline bool ub__lock_try(struct ub__lock *l)
{
    uintptr_t me = (uintptr_t)pthread_self();
    /* Only this thread ever stores its own id there, so a stale value is never ours. */
    if (atomic_load_explicit(&l->owner, memory_order_relaxed) == me) {
        l->depth++;
        return true;
    }
    int free_ = 0;
    if (!atomic_compare_exchange_strong_explicit(&l->state, &free_, 1, memory_order_acquire,
                                                 memory_order_relaxed))
        return false;
    atomic_store_explicit(&l->owner, me, memory_order_relaxed);
    return true;
}

static inline void ub__lock_acquire(struct ub__lock *l)
{
    if (ub__lock_try(l))
        return;
    ub__lock_wait(l);
    atomic_store_explicit(&l->owner, (uintptr_t)pthread_self(), memory_order_relaxed);
}

static inline void ub__lock_release(struct ub__lock *l)
{
    if (l->depth) {
        l->depth--;
        return;
    }
    atomic_store_explicit(&l->owner, 0, memory_order_relaxed);
    if (atomic_exchange_explicit(&l->state, 0, memory_order_release) == 2)
        ub__lock_wake(l);
}

struct ub__ctx {
    struct ub_context c; /* first: (ub_context *) and (struct ub__ctx *) are the same address */
    char cc_name[32], lb_name[16]; /* ub_context_attr.cc and .lb, copied (c.attr points here) */
    struct ub__lock lock;
    struct ub__clock clock;
    enum ub__ctx_kind kind;
    struct ub__dev *udp, *shm; /* the devices under c.dev (one of them is c.dev unless MULTI) */
    struct ub__addr shm_addr;  /* alternative address advertised in descriptors (MULTI) */
    uint64_t shm_checked;      /* when the shm peers were last probed */
    uint32_t host_id;          /* this host's boot id hash: shm peers must share it */
    /*
     * Held output (hold.c): in manual progress a round that produced completion records
     * keeps its output (ACKs, responses) for the application's reaction (usually its next
     * post), so one datagram carries both; a watchdog thread sends what stays held.
     */
    bool tx_held;       /* under lock */
    uint64_t round_now; /* under lock: the clock at the last round's start (post.c) */
    /* Under lock: the last held output left with a post, so the application answers what it
     * receives (a ping-pong); ub_poll_jfc's rounds may then yield (engine.h). */
    bool answered;
    /* Under lock: plain WRITEs are news worth holding for (the application posted after the
     * last round that executed some, before the next round: it polls memory and answers,
     * a WRITE ping-pong), and whether the last round executed some with no post since. A
     * target that never answers (a bulk stream's) never has its ACKs held. */
    bool writes_answered, writes_unanswered;
    bool hold_off; /* never hold: automatic progress, loop fabric, SOFTUB_HOLD=0 */
    /*
     * Under lock: a quiet spell (context.c, poll_quiet): the last round found nothing to do
     * and only polls took the lock since (ub__ctx_lock ends it); until quiet_until (the
     * engine's next deadline then) a poll is the device's receive. quiet_ok: this context
     * has such spells (manual progress, a udp device alone); st_quiet counts the polls.
     */
    bool quiet, quiet_ok;
    uint64_t quiet_until, st_quiet;
    /* Hold without the watchdog: a test that drives a loop fabric in lock step under a manual
     * clock answers every hold itself, and a flush at a real-time moment would change when
     * its packets leave (test_api_fast). */
    bool hold_no_watchdog;
    bool hold_started;
    atomic_uint_fast64_t hold_gen; /* holds so far */
    atomic_bool hold_stop, hold_parked;
    pthread_t hold_thread;
    pthread_mutex_t hold_mu;
    pthread_cond_t hold_cv;
    /* automatic progress */
    pthread_t thread;
    bool thread_started;
    atomic_bool stop;
    int wake_fd;          /* eventfd: stop, or the engine wants to run sooner than the sleep */
    int epfd;             /* the thread's epoll set: device fd + wake_fd */
    bool sleeping;        /* under lock: the thread is (about to be) in epoll */
    uint64_t sleep_until; /* under lock: when it wakes by itself (UB_TIME_NEVER) */
    /*
     * Application threads blocked in ub_wait_jfc drive the context themselves (the datagram
     * wakes the waiter directly, not the progress thread which would then wake it). Meanwhile,
     * and for UB_API_DRIVER_LEASE_NS after the last one left (it usually comes straight back),
     * the thread stands by: it sleeps on the wake fd only and looks at these every lease,
     * without the lock (taking it would contend with the driver). Written under the lock.
     */
    atomic_uint drivers;
    atomic_uint_fast64_t lease_until;
    bool standby;    /* under lock */
    bool wait_round; /* under lock: a round ub_wait_jfc runs; it may hold output (hold.c) */
    uint64_t spin_ns;
    atomic_uint_fast64_t rounds, sleeps, wakes;          /* progress thread counters */
    struct ub_async_event async_mem[UB_SES_ASYNC_QUEUE]; /* c.async: cold, so last */
};

static inline struct ub__ctx *ub__ctx_of(const ub_context *c)
{
    return (struct ub__ctx *)(uintptr_t)c;
}

/* Whether the context's one device is shm (not udp, not both): the shm-only latency paths. */
static inline bool ub__ctx_shm_only(const ub_context *c)
{
    return c->dev == ub__ctx_of(c)->shm;
}

/* A poll's round under the lock (ub_poll_jfc): in a quiet spell only the receive. */
int ub__ctx_poll_locked(ub_context *ctx);

/* ---- hold.c ---- */
bool ub__hold_enabled(void);
/* Keeps the engine's output for the application's reaction; the caller holds the lock. */
void ub__ctx_hold(ub_context *ctx);
/* Sends output held back, if any; the caller holds the lock. */
void ub__ctx_flush_held(ub_context *ctx);
/* The same, at a time the caller just read from the context's clock. */
void ub__ctx_flush_held_at(ub_context *ctx, uint64_t now);
/* Sends what waits to go, the responses kept back while output was held last. */
void ub__ctx_send_out(ub_context *ctx, uint64_t now);
/* Ends the watchdog (context close). */
void ub__hold_stop(struct ub__ctx *x);
/* pthread_create with every signal blocked in the new thread (they are the application's). */
int ub__thread_create(pthread_t *t, void *(*fn)(void *), void *arg);

/* ---- progress.c ---- */
/* One round at the context's clock; the caller holds the lock. Returns the work done. */
int ub__ctx_progress_locked(ub_context *ctx);
/* Probes the shm peers' processes: requests to one found dead or closed fail now. The caller
 * holds the lock. */
void ub__ctx_shm_check(ub_context *ctx, uint64_t now);
/* ub__ctx_shm_check when the last probe is UB_API_SHM_CHECK_NS old. */
static inline void ub__ctx_shm_check_due(ub_context *ctx, uint64_t now)
{
    struct ub__ctx *x = ub__ctx_of(ctx);
    if (x->shm && now - x->shm_checked >= UB_API_SHM_CHECK_NS)
        ub__ctx_shm_check(ctx, now);
}

/* Sends the engine's pending output, held output included: the sending part of a round. */
void ub__ctx_send_locked(ub_context *ctx, uint64_t now);
int ub__progress_start(struct ub__ctx *x);
void ub__progress_stop(struct ub__ctx *x);
/* After a call changed the engine's state: wakes the progress thread if it must run sooner. */
void ub__progress_kick(struct ub__ctx *x);

/* ---- devsel.c: device selection from the URI ---- */
struct ub__devsel {
    enum ub__ctx_kind kind;
    struct ub__dev *dev; /* what the engine drives */
    struct ub__dev *udp, *shm;
};
int ub__devsel_open(const char *uri, struct ub__devsel *out);
/* A composite device: udp for IP addresses, shm for UB_AF_SHM ones (takes both). */
int ub__multidev_open(struct ub__dev *udp, struct ub__dev *shm, struct ub__dev **out);
/* A stable id of this host (boot id), 0 if unknown. */
uint32_t ub__host_id(void);
/* Maps a shm endpoint name to an id in 1..65535 (FNV-1a, fixed). */
uint16_t ub__shm_name_id(const char *name, size_t len);

#endif
