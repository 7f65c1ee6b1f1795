/* Completion queues (JFC) and event channels (JFCE). */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <softub/errors.h>
#include "api/api.h"
#include "core/compiler.h"
#include "dev/shm.h"

static int jfc_create(ub_context *ctx, uint32_t depth, const struct ub_jfc_attr *attr,
                      ub_jfc **out);

UB_EXPORT int ub_jfc_create(ub_context *ctx, const struct ub_jfc_attr *attr, ub_jfc **out)
{
    if (!ctx || !out)
        return UB_EINVAL;
    uint32_t depth = attr && attr->depth ? attr->depth : UB_API_DEFAULT_JFC_DEPTH;
    if (depth > (1u << 24))
        return UB_EINVAL;
    if (attr && attr->jfce && attr->jfce->ctx != ctx)
        return UB_EINVAL;
    ub__ctx_lock(ctx);
    int rc = jfc_create(ctx, depth, attr, out);
    ub__ctx_unlock(ctx);
    return rc;
}

static int jfc_create(ub_context *ctx, uint32_t depth, const struct ub_jfc_attr *attr, ub_jfc **out)
{
    ub_jfc *c = calloc(1, sizeof(*c));
    if (!c)
        return UB_ENOMEM;
    c->ring = calloc(depth, sizeof(*c->ring));
    if (!c->ring) {
        free(c);
        return UB_ENOMEM;
    }
    c->ctx = ctx;
    c->cap = depth;
    c->jfce = attr ? attr->jfce : NULL;
    c->user_ctx = attr ? attr->user_ctx : 0;
    ub__list_init(&c->fired_link);
    if (c->jfce)
        c->jfce->users++;
    ub__list_push_back(&ctx->jfcs, &c->link);
    *out = c;
    return 0;
}

UB_EXPORT int ub_jfc_destroy(ub_jfc *c)
{
    if (!c)
        return UB_EINVAL;
    ub_context *ctx = c->ctx;
    ub__ctx_lock(ctx);
    if (c->users || c->events) {
        ub__ctx_unlock(ctx);
        return UB_EBUSY;
    }
    if (c->on_fired)
        ub__list_remove(&c->fired_link);
    if (c->jfce)
        c->jfce->users--;
    ub__list_remove(&c->link);
    free(c->ring);
    free(c);
    ub__ctx_unlock(ctx);
    return 0;
}

UB_EXPORT int ub_poll_jfc(ub_jfc *c, int max, struct ub_cr *cr)
{
    if (!c || max < 0 || (max && !cr))
        return UB_EINVAL;
    ub_context *ctx = c->ctx;
    struct ub__ctx *x = ub__ctx_of(ctx);
    ub__lock_acquire(&x->lock); /* not ub__ctx_lock: a poll leaves a quiet spell on */
    /* Manual progress: the poller drives. Automatic: the progress thread does. */
    if (!c->count && ctx->attr.progress == UB_PROGRESS_MANUAL) {
        /* A poller polls again: no wake-up wanted from the shm device (each would cost the
         * sender a write(2)). ub_progress and ub_wait_jfc ask for one before any sleep. */
        struct ub__dev *shm = ub__ctx_of(ctx)->shm;
        if (shm)
            ub__shm_set_busy_poll(shm, true);
        /* An application that answers what it receives gets its record before the rest of
         * its batch is worked through (at most a few datagrams, or over udp the rest of its
         * bundle: the next poll's). Only shm's device is asked for one datagram first (a udp
         * ping-pong's batch is one datagram anyway). */
        c->yield = x->answered;
        ctx->eng.rx_one_first = c->yield && ub__ctx_shm_only(ctx);
        ub__ctx_poll_locked(ctx);
        c->yield = ctx->eng.rx_one_first = false;
        if (shm)
            ub__shm_set_busy_poll(shm, false);
    }
    int n = ub__jfc_take(c, max, cr);
    if (n)
        x->quiet = false; /* taken records give their berths back */
    ub__ctx_unlock(ctx);
    return n;
}

UB_EXPORT int ub_rearm_jfc(ub_jfc *c, bool solicited_only)
{
    if (!c || !c->jfce)
        return UB_EINVAL;
    ub__ctx_lock(c->ctx);
    c->armed = true;
    c->sol_only = solicited_only;
    ub__ctx_unlock(c->ctx);
    return 0;
}

UB_EXPORT int ub_jfce_create(ub_context *ctx, ub_jfce **out)
{
    if (!ctx || !out)
        return UB_EINVAL;
    ub_jfce *e = calloc(1, sizeof(*e));
    if (!e)
        return UB_ENOMEM;
    e->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (e->fd < 0) {
        free(e);
        return UB_EIO;
    }
    e->ctx = ctx;
    ub__list_init(&e->fired);
    ub__ctx_lock(ctx);
    ub__list_push_back(&ctx->jfces, &e->link);
    ub__ctx_unlock(ctx);
    *out = e;
    return 0;
}

UB_EXPORT int ub_jfce_destroy(ub_jfce *e)
{
    if (!e)
        return UB_EINVAL;
    ub_context *ctx = e->ctx;
    ub__ctx_lock(ctx);
    if (e->users) {
        ub__ctx_unlock(ctx);
        return UB_EBUSY;
    }
    close(e->fd);
    ub__list_remove(&e->link);
    free(e);
    ub__ctx_unlock(ctx);
    return 0;
}

UB_EXPORT int ub_jfce_fd(const ub_jfce *e)
{
    return e ? e->fd : UB_EINVAL;
}

static int take_fired(ub_jfce *e, int max, ub_jfc **jfcs)
{
    int n = 0;
    while (n < max && !ub__list_empty(&e->fired)) {
        ub_jfc *c = UB_CONTAINER_OF(e->fired.next, ub_jfc, fired_link);
        ub__list_remove(&c->fired_link);
        c->on_fired = false;
        c->events += c->pending_events;
        /* Batched wake-up: a JFC that fired several times is returned once per event. */
        for (uint32_t k = 0; k < c->pending_events && n < max; k++)
            jfcs[n++] = c;
        c->pending_events = 0;
    }
    if (ub__list_empty(&e->fired) && e->signalled) {
        uint64_t v;
        ssize_t r = read(e->fd, &v, sizeof(v)); /* re-arms the fd's readability */
        (void)r;
        e->signalled = false;
    }
    return n;
}

/* A waiter of an automatic context stops driving (under the lock); the progress thread takes
 * the device back a lease after the last one left. */
static void driver_leave(ub_context *ctx)
{
    struct ub__ctx *x = ub__ctx_of(ctx);
    /* The lease first: the progress thread reads both without the lock. */
    atomic_store_explicit(&x->lease_until, ub__clock_monotonic_ns(NULL) + UB_API_DRIVER_LEASE_NS,
                          memory_order_relaxed);
    atomic_fetch_sub_explicit(&x->drivers, 1, memory_order_release);
}

UB_EXPORT int ub_wait_jfc(ub_jfce *e, int max, int timeout_ms, ub_jfc **jfcs)
{
    if (!e || max <= 0 || !jfcs)
        return UB_EINVAL;
    ub_context *ctx = e->ctx;
    struct ub__ctx *x = ub__ctx_of(ctx);
    bool manual = ctx->attr.progress == UB_PROGRESS_MANUAL;
    int dev_fd = ub_context_fd(ctx);
    /*
     * A blocking waiter drives its context, in automatic progress too when the device has an
     * fd: the reply then wakes this thread directly, instead of waking the progress thread,
     * which would take the lock, run the round and wake this thread through the JFCE fd (two
     * wake-ups in a row, and on a small machine a spinning thread in the way). The progress
     * thread stands by meanwhile (progress.c).
     */
    bool drive = manual || (timeout_ms != 0 && dev_fd >= 0);
    bool driver = false;
    uint64_t start = ub__clock_monotonic_ns(NULL); /* of the spin: the wait's, or the last work */
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX
                                       : ub__clock_monotonic_ns(NULL) +
                                             (uint64_t)timeout_ms * (uint64_t)UB_NS_PER_MS;
    bool armed = false; /* the latest round let the shm device arm its wake-up */
    for (bool first = true;; first = false) {
        ub__ctx_lock(ctx);
        /*
         * Automatic progress over udp alone: no round before the first sleep unless something
         * is due (the progress thread or the last post ran one, and the socket stays readable
         * for what came since): one failing receive call less per wait.
         */
        bool skip = drive && !manual && first && !x->shm && !x->tx_held &&
                    !ub__engine_pending(&ctx->eng) &&
                    ub__engine_next_deadline(&ctx->eng) > ub__ctx_now(ctx);
        if (drive) {
            if (!manual && !driver) {
                atomic_fetch_add_explicit(&x->drivers, 1, memory_order_relaxed);
                driver = true;
            }
            /* A round within the spin is followed by another: the shm device need not arm a
             * wake-up (each costs the peer a write(2) and us a read(2)). The round before a
             * sleep arms it (below). */
            if (driver && x->shm) {
                bool spin = ub__clock_monotonic_ns(NULL) - start < x->spin_ns;
                ub__shm_set_busy_poll(x->shm, spin);
                armed = !spin;
            }
            /* The waiter returns to an application about to react: like a manual round, this
             * one may hold its output for the reaction (a lease bounds the hold, progress.c). */
            x->wait_round = driver;
            e->defer = true;
            /* Work without an event for us (a peer's one-sided request served, an ACK):
             * more may follow, so the spin starts again, as the progress thread's does. */
            if (!skip && ub__ctx_progress_locked(ctx) > 0)
                start = ub__clock_monotonic_ns(NULL);
            e->defer = false;
            x->wait_round = false;
        }
        /* What this round fired is taken here: the fd is written only for what is left. */
        bool owed = e->owed;
        e->owed = false;
        if (!ub__list_empty(&e->fired)) {
            int n = take_fired(e, max, jfcs);
            if (owed && !ub__list_empty(&e->fired))
                ub__jfce_signal(e);
            if (driver && x->shm)
                ub__shm_set_busy_poll(x->shm, false); /* whoever sleeps next is woken */
            if (driver)
                driver_leave(ctx);
            ub__ctx_unlock(ctx);
            return n;
        }
        uint64_t now = ub__clock_monotonic_ns(NULL);
        uint64_t until = deadline;
        if (drive) {
            /* Output to send, or input a poll's round left (a yield): no sleep. */
            uint64_t d = ub__engine_pending(&ctx->eng) || ub__engine_rx_later(&ctx->eng)
                             ? now
                             : ub__engine_next_deadline(&ctx->eng);
            if (d < until)
                until = d;
        }
        bool done = timeout_ms == 0 || now >= deadline;
        if (done && driver && x->shm)
            ub__shm_set_busy_poll(x->shm, false);
        if (done && driver)
            driver_leave(ctx);
        ub__ctx_unlock(ctx);
        if (done)
            return 0;
        /*
         * A driver of an automatic context keeps driving for spin_ns before it sleeps (the
         * progress thread's spin_us, 50 us by default): a reply usually comes within that, and
         * a thread woken from sleep on an idle CPU (a virtual one above all) pays tens of
         * microseconds that a loaded CPU does not.
         */
        if (driver && now - start < x->spin_ns && until > now) {
            sched_yield(); /* on a busy machine the peer may need this CPU to answer */
            continue;
        }
        if (driver && x->shm && !armed)
            continue; /* the spin ended after a round that did not arm: one more that does */
        /* Sleep on the event fd (and, when driving, the device) until something happens or
         * the next timer; a device without an fd (loop) is busy-polled. */
        int ms = 0;
        if (!manual || dev_fd >= 0) {
            uint64_t left = until > now ? until - now : 0;
            uint64_t m = until == UINT64_MAX ? 1000 : (left + UB_NS_PER_MS - 1) / UB_NS_PER_MS;
            ms = m > 1000 ? 1000 : (int)m;
        }
        struct pollfd pfd[2] = {{.fd = e->fd, .events = POLLIN}, {.fd = dev_fd, .events = POLLIN}};
        int r = poll(pfd, drive && dev_fd >= 0 ? 2 : 1, ms);
        if (r < 0 && errno != EINTR) {
            if (driver) {
                ub__ctx_lock(ctx);
                driver_leave(ctx);
                ub__ctx_unlock(ctx);
            }
            return UB_EIO;
        }
    }
}

UB_EXPORT int ub_ack_jfc(ub_jfc *c, uint32_t n)
{
    if (!c)
        return UB_EINVAL;
    ub__ctx_lock(c->ctx);
    int rc = 0;
    if (n > c->events)
        rc = UB_EINVAL;
    else
        c->events -= n;
    ub__ctx_unlock(c->ctx);
    return rc;
}
