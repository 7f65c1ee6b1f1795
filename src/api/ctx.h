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
#define UB_API_UDP_BASE_RTT_NS 50000 /* unloaded RTT over kernel UDP (congestion control) */
#define UB_API_ZC_MIN          2048  /* request payloads attached, not copied, from this size */

struct ub__ctx {
    struct ub_context c; /* first: (ub_context *) and (struct ub__ctx *) are the same address */
    pthread_mutex_t lock;
    struct ub__clock clock;
    enum ub__ctx_kind kind;
    struct ub__dev *udp, *shm; /* the devices under c.dev (one of them is c.dev unless MULTI) */
    struct ub__addr shm_addr;  /* alternative address advertised in descriptors (MULTI) */
    uint32_t host_id;          /* this host's boot id hash: shm peers must share it */
    /*
     * Held output (hold.c): in manual progress a round that produced completion records
     * keeps its output (ACKs, responses) for the application's reaction (usually its next
     * post), so one datagram carries both; a watchdog thread sends what stays held.
     */
    bool tx_held;  /* under lock */
    bool hold_off; /* never hold: automatic progress, loop fabric, SOFTUB_HOLD=0 */
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
    uint64_t spin_ns;
    atomic_uint_fast64_t rounds, sleeps, wakes; /* progress thread counters */
};

static inline struct ub__ctx *ub__ctx_of(const ub_context *c)
{
    return (struct ub__ctx *)(uintptr_t)c;
}

/* ---- hold.c ---- */
bool ub__hold_enabled(void);
/* Keeps the engine's output for the application's reaction; the caller holds the lock. */
void ub__ctx_hold(ub_context *ctx);
/* Sends output held back, if any; the caller holds the lock. */
void ub__ctx_flush_held(ub_context *ctx);
/* The same, at a time the caller just read from the context's clock. */
void ub__ctx_flush_held_at(ub_context *ctx, uint64_t now);
/* Ends the watchdog (context close). */
void ub__hold_stop(struct ub__ctx *x);
/* pthread_create with every signal blocked in the new thread (they are the application's). */
int ub__thread_create(pthread_t *t, void *(*fn)(void *), void *arg);

/* ---- progress.c ---- */
/* One round at the context's clock; the caller holds the lock. Returns the work done. */
int ub__ctx_progress_locked(ub_context *ctx);
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
