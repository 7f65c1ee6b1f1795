/*
 * Held output (manual progress). A progress round that produced completion records (or
 * executed plain WRITEs, while the application answers those: it polls the memory they
 * change) keeps what it would send (ACKs, responses) until the application reacts, usually
 * by posting (a ping-pong's answer, the next request of a window): the post sends the
 * request and the held packets together, one datagram bundle instead of two or three
 * datagrams per direction, which halves a loopback ping-pong's latency.
 *
 * An application that takes a completion and then leaves the library (blocks on another
 * channel, computes) must not starve its peer of the ACK, or the peer's request would
 * fail although it was delivered. A watchdog thread, started at the first hold and parked
 * when holds stop, sends output that stayed held for a whole period (1 ms, up to 4 ms
 * while the application keeps coming back; at most two periods in all), like a delayed ACK
 * timer. It only takes the context lock when nobody holds it: a caller inside the library
 * flushes by itself. SOFTUB_HOLD=0 turns holding off.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "api/api.h"
#include "core/env.h"

#define HOLD_PERIOD_NS     1000000L /* the watchdog's period */
#define HOLD_PERIOD_MAX_NS 4000000L /* ... while the application keeps coming back */
#define HOLD_IDLE_TICKS    100      /* periods without a hold before it parks */

bool ub__hold_enabled(void)
{
    return !ub__env_off("SOFTUB_HOLD");
}

void ub__ctx_flush_held(ub_context *ctx)
{
    struct ub__ctx *x = ub__ctx_of(ctx);
    if (!x->tx_held)
        return;
    ub__ctx_flush_held_at(ctx, ub__ctx_now(ctx));
}

void ub__ctx_flush_held_at(ub_context *ctx, uint64_t now)
{
    struct ub__ctx *x = ub__ctx_of(ctx);
    if (!x->tx_held)
        return;
    x->tx_held = false;
    x->answered = false; /* a post that flushes says otherwise after */
    ub__ctx_send_out(ctx, now);
}

/*
 * The responses a held round made wait in the transaction layer (ses.prsp_hold) until the
 * application's answer is with PDS: the answer leaves first, and the peer, which waits for
 * it, can act on it before working through the responses (a yield, engine.h). Over shm
 * the answer is even on its way before the responses are built; elsewhere they share its
 * datagram (a bundle), after it.
 */
void ub__ctx_send_out(ub_context *ctx, uint64_t now)
{
    if (ctx->ses.prsp_n) {
        if (ub__ctx_shm_only(ctx))
            ub__drive_send(&ctx->eng, ctx->dev, now, &ctx->drive);
        ub__ses_rsp_flush(&ctx->ses, now);
    }
    ub__drive_send(&ctx->eng, ctx->dev, now, &ctx->drive);
}

static void *hold_main(void *arg)
{
    struct ub__ctx *x = arg;
    /*
     * No wake-up preemption (SCHED_BATCH): an application that busy-polls owns its CPU, and a
     * watchdog preempting it every period cost a ping-pong a context switch on over 1 % of
     * its round trips. The watchdog matters when the application has left the library: then
     * it runs at once on an idle CPU, and at the next scheduler tick on a busy one.
     */
    struct sched_param sp = {0};
    (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
    uint64_t last = atomic_load(&x->hold_gen);
    unsigned idle = 0;
    long period = HOLD_PERIOD_NS;
    while (!atomic_load(&x->hold_stop)) {
        struct timespec ts = {0, period};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        uint64_t gen = atomic_load(&x->hold_gen);
        if (ub__lock_try(&x->lock)) {
            /* The same hold as a period ago: nobody came back for it. */
            if (x->tx_held && gen == last)
                ub__ctx_flush_held(&x->c);
            ub__lock_release(&x->lock);
        }
        /* New holds since the last look: the application keeps coming back and sends them
         * itself, so look less often (a hold it leaves behind waits two periods at most). */
        period = gen != last ? (period * 2 > HOLD_PERIOD_MAX_NS ? HOLD_PERIOD_MAX_NS : period * 2)
                             : HOLD_PERIOD_NS;
        idle = gen == last ? idle + 1 : 0;
        last = gen;
        if (idle < HOLD_IDLE_TICKS)
            continue;
        /* Park until the next hold. Seen-or-signalled: the holder bumps hold_gen, then reads
         * hold_parked; we set hold_parked, then read hold_gen (both sequentially consistent). */
        pthread_mutex_lock(&x->hold_mu);
        atomic_store(&x->hold_parked, true);
        while (atomic_load(&x->hold_parked) && atomic_load(&x->hold_gen) == last &&
               !atomic_load(&x->hold_stop))
            pthread_cond_wait(&x->hold_cv, &x->hold_mu);
        atomic_store(&x->hold_parked, false);
        pthread_mutex_unlock(&x->hold_mu);
        idle = 0;
    }
    return NULL;
}

void ub__ctx_hold(ub_context *ctx)
{
    struct ub__ctx *x = ub__ctx_of(ctx);
    x->tx_held = true;
    atomic_fetch_add(&x->hold_gen, 1);
    /* Automatic progress: the progress thread sends what stays held, a lease after the waiter
     * that held it left (progress.c), without a watchdog. */
    if (ctx->attr.progress == UB_PROGRESS_AUTO || x->hold_no_watchdog)
        return;
    if (!x->hold_started) {
        pthread_mutex_init(&x->hold_mu, NULL);
        pthread_cond_init(&x->hold_cv, NULL);
        atomic_store(&x->hold_stop, false);
        atomic_store(&x->hold_parked, false);
        if (ub__thread_create(&x->hold_thread, hold_main, x) != 0) {
            /* No watchdog, no holding: send now. */
            pthread_cond_destroy(&x->hold_cv);
            pthread_mutex_destroy(&x->hold_mu);
            x->hold_off = true;
            ub__ctx_flush_held(ctx);
            return;
        }
        x->hold_started = true;
        return;
    }
    if (atomic_load(&x->hold_parked)) {
        pthread_mutex_lock(&x->hold_mu);
        atomic_store(&x->hold_parked, false);
        pthread_cond_signal(&x->hold_cv);
        pthread_mutex_unlock(&x->hold_mu);
    }
}

void ub__hold_stop(struct ub__ctx *x)
{
    if (!x->hold_started)
        return;
    pthread_mutex_lock(&x->hold_mu);
    atomic_store(&x->hold_stop, true);
    pthread_cond_signal(&x->hold_cv);
    pthread_mutex_unlock(&x->hold_mu);
    pthread_join(x->hold_thread, NULL);
    pthread_cond_destroy(&x->hold_cv);
    pthread_mutex_destroy(&x->hold_mu);
    x->hold_started = false;
}
