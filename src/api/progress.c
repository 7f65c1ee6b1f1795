/*
 * Automatic progress: one thread per context that drives the engine at the real clock.
 * It runs rounds back to back while there is work, keeps spinning for spin_ns after the
 * last work (a reply usually comes within that), then sleeps in epoll on the device's fd
 * and a wake eventfd until the engine's next deadline. docs/progress.md.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <softub/errors.h>
#include "api/api.h"
#include "dev/shm.h"

/* Drains the wake eventfd if epoll reported it. */
static void handle_events(struct ub__ctx *x, const struct epoll_event *ev, int n)
{
    for (int i = 0; i < n; i++) {
        if (ev[i].data.u32 == 1) {
            uint64_t v;
            ssize_t r = read(x->wake_fd, &v, sizeof(v));
            (void)r;
            atomic_fetch_add_explicit(&x->wakes, 1, memory_order_relaxed);
        }
    }
}

/* Busy-polls the epoll set (no lock held) until something is ready or `until`. */
static void spin_until(struct ub__ctx *x, uint64_t until)
{
    struct epoll_event ev[4];
    for (;;) {
        /* Spinning rounds ask the shm device for no wake-up: look at its lanes directly. */
        if (ub__shm_rx_ready(x->shm))
            return;
        int n = epoll_wait(x->epfd, ev, 4, 0);
        if (n > 0) {
            handle_events(x, ev, n);
            return;
        }
        if (atomic_load_explicit(&x->stop, memory_order_relaxed) ||
            ub__clock_monotonic_ns(NULL) >= until)
            return;
    }
}

/* Sleeps in epoll until something is readable or `until` (monotonic ns, or never). */
static void sleep_until(struct ub__ctx *x, uint64_t until)
{
    struct epoll_event ev[4];
    uint64_t now = ub__clock_monotonic_ns(NULL);
    if (until != UB_TIME_NEVER && until <= now)
        return;
    struct timespec ts, *tsp = NULL;
    if (until != UB_TIME_NEVER) {
        uint64_t d = until - now;
        ts.tv_sec = (time_t)(d / UB_NS_PER_S);
        ts.tv_nsec = (long)(d % UB_NS_PER_S);
        tsp = &ts;
    }
    atomic_fetch_add_explicit(&x->sleeps, 1, memory_order_relaxed);
    int n = epoll_pwait2(x->epfd, ev, 4, tsp, NULL);
    if (n < 0 && errno == ENOSYS) { /* kernels before 5.11: millisecond resolution, rounded up */
        int ms = -1;
        if (tsp) {
            uint64_t m = (until - now + UB_NS_PER_MS - 1) / UB_NS_PER_MS;
            ms = m > 1000000 ? 1000000 : (int)m;
        }
        n = epoll_wait(x->epfd, ev, 4, ms);
    }
    handle_events(x, ev, n);
}

/* Stands by: sleeps on the wake fd alone (an application thread drives the device) until
 * `until` (monotonic ns). Returns whether the fd woke it (stop, or output to send). */
static bool standby_until(struct ub__ctx *x, uint64_t until)
{
    uint64_t now = ub__clock_monotonic_ns(NULL);
    if (until <= now)
        return false;
    uint64_t d = until - now;
    struct timespec ts = {.tv_sec = (time_t)(d / UB_NS_PER_S), .tv_nsec = (long)(d % UB_NS_PER_S)};
    struct pollfd p = {.fd = x->wake_fd, .events = POLLIN};
    atomic_fetch_add_explicit(&x->sleeps, 1, memory_order_relaxed);
    if (ppoll(&p, 1, &ts, NULL) <= 0)
        return false;
    uint64_t v;
    ssize_t r = read(x->wake_fd, &v, sizeof(v));
    (void)r;
    atomic_fetch_add_explicit(&x->wakes, 1, memory_order_relaxed);
    return true;
}

/* Until when the thread stands by, or 0 when it drives again (read without the lock). */
static uint64_t standby_end(struct ub__ctx *x, uint64_t now)
{
    if (atomic_load_explicit(&x->drivers, memory_order_acquire))
        return now + UB_API_DRIVER_LEASE_NS;
    uint64_t lease = atomic_load_explicit(&x->lease_until, memory_order_relaxed);
    return now < lease ? lease : 0;
}

/* Stands by while application threads drive. The waiter runs the timers it sleeps for;
 * after it left a timer runs late by a lease at most. */
static void standby(struct ub__ctx *x, uint64_t until)
{
    while (!atomic_load_explicit(&x->stop, memory_order_acquire)) {
        if (standby_until(x, until))
            return; /* output to send: a round now */
        until = standby_end(x, ub__clock_monotonic_ns(NULL));
        if (!until)
            return;
    }
}

/*
 * The thread. Rounds run under the context lock; waiting never holds it. After a round
 * that did nothing, it publishes how long it means to wait (sleeping, sleep_until: an API
 * call that wants it sooner writes the wake fd), then either busy-polls the epoll set
 * (within spin_ns of the last work) or sleeps in it until the engine's next deadline.
 * While application threads drive from ub_wait_jfc (and a lease after), it stands by.
 */
static void *progress_main(void *arg)
{
    struct ub__ctx *x = arg;
    ub_context *ctx = &x->c;
    uint64_t last_work = ub__clock_monotonic_ns(NULL);
    while (!atomic_load_explicit(&x->stop, memory_order_acquire)) {
        /*
         * Within spin_ns of the last work the thread spins next: no round, this thread's or an
         * API call's, needs the shm device to wake it (a wake-up costs the sender a write(2)
         * per message). The round before a sleep asks for one, and so does every round while
         * the thread sleeps. The flag changes under the lock only.
         */
        bool may_sleep = ub__clock_monotonic_ns(NULL) - last_work >= x->spin_ns;
        ub__lock_acquire(&x->lock);
        x->sleeping = false;
        x->standby = false;
        uint64_t now = ub__ctx_now(ctx);
        int n = 0;
        bool pending = ub__engine_pending(&ctx->eng);
        /* A waiter drives (and sleeps until the engine's deadline): only output an API call
         * left for this thread, or a timer due, is this thread's to run. */
        if (!atomic_load_explicit(&x->drivers, memory_order_relaxed) || pending ||
            ub__engine_next_deadline(&ctx->eng) <= now) {
            ub__shm_set_busy_poll(x->shm, !may_sleep);
            n = ub__ctx_progress_locked(ctx);
            now = ub__ctx_now(ctx);
            pending = ub__engine_pending(&ctx->eng);
            atomic_fetch_add_explicit(&x->rounds, 1, memory_order_relaxed);
        }
        if (n > 0 || pending) {
            ub__lock_release(&x->lock);
            last_work = now;
            continue;
        }
        uint64_t deadline = ub__engine_next_deadline(&ctx->eng);
        uint64_t until = standby_end(x, ub__clock_monotonic_ns(NULL));
        if (until) {
            x->sleeping = true;
            x->standby = true;
            x->sleep_until = until;
            ub__lock_release(&x->lock);
            standby(x, until); /* idle since: no spin after it */
            continue;
        }
        x->sleeping = true;
        x->sleep_until = deadline;
        ub__lock_release(&x->lock);
        if (!may_sleep) {
            uint64_t spin_end = last_work + x->spin_ns;
            spin_until(x, deadline < spin_end ? deadline : spin_end);
        } else {
            sleep_until(x, deadline);
            last_work = ub__clock_monotonic_ns(NULL); /* woken: spin again for a while */
        }
    }
    return NULL;
}

void ub__progress_kick(struct ub__ctx *x)
{
    /* Under the lock. The thread re-reads the deadline after every wake-up. Standing by, it
     * looks again within a lease anyway: only output waiting to leave (not held for the
     * application's reaction) wakes it. */
    if (!x->sleeping)
        return;
    ub_context *ctx = &x->c;
    bool pending = ub__engine_pending(&ctx->eng);
    if (x->standby ? pending && !x->tx_held
                   : pending || ub__engine_next_deadline(&ctx->eng) < x->sleep_until) {
        uint64_t one = 1;
        ssize_t r = write(x->wake_fd, &one, sizeof(one));
        (void)r;
        x->sleeping = false; /* one write per sleep */
    }
}

int ub__thread_create(pthread_t *t, void *(*fn)(void *), void *arg)
{
    /* The thread must not take the application's signals. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

int ub__progress_start(struct ub__ctx *x)
{
    x->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    x->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (x->wake_fd < 0 || x->epfd < 0)
        goto fail;
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 1};
    if (epoll_ctl(x->epfd, EPOLL_CTL_ADD, x->wake_fd, &ev) != 0)
        goto fail;
    int dfd = ub__dev_fd(x->c.dev);
    if (dfd >= 0) {
        ev.data.u32 = 0;
        if (epoll_ctl(x->epfd, EPOLL_CTL_ADD, dfd, &ev) != 0)
            goto fail;
    }
    atomic_store(&x->stop, false);
    x->thread_started = true;
    if (ub__thread_create(&x->thread, progress_main, x) != 0) {
        x->thread_started = false;
        goto fail;
    }
    return 0;
fail:
    if (x->wake_fd >= 0)
        close(x->wake_fd);
    if (x->epfd >= 0)
        close(x->epfd);
    x->wake_fd = x->epfd = -1;
    return UB_EIO;
}

void ub__progress_stop(struct ub__ctx *x)
{
    if (!x->thread_started)
        return;
    atomic_store_explicit(&x->stop, true, memory_order_release);
    uint64_t one = 1;
    ssize_t r = write(x->wake_fd, &one, sizeof(one));
    (void)r;
    pthread_join(x->thread, NULL);
    x->thread_started = false;
    close(x->wake_fd);
    close(x->epfd);
    x->wake_fd = x->epfd = -1;
}
