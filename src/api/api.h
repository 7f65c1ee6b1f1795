/*
 * The public API's internals: the loop fabric object behind ub_loopnet, the
 * progress driver, and hooks tests use (the fabric's impairment, a manual
 * clock). Internal.
 */
#ifndef UB_API_API_H
#define UB_API_API_H

#include <softub/softub.h>
#include "core/clock.h"
#include "dev/loop.h"
#include "ses/ses.h"
#include "api/ctx.h"

#define UB_API_DEFAULT_JFC_DEPTH 1024
#define UB_API_DEFAULT_DEPTH     256
#define UB_API_DEFAULT_SGE       4
#define UB_API_DEFAULT_INLINE    256
#define UB_API_MAX_SGE           64
#define UB_API_MAX_INLINE        65536
#define UB_API_ID_MAX            0xffffffu /* object ids travel in 24-bit fields */

struct ub_loopnet {
    struct ub__loopnet *net;
    struct ub_loopnet_attr attr;
    struct ub__clock clock;
    ub_context *ports[UB_LOOP_MAX_PORTS];
    struct ub__list zombies; /* closed contexts whose packets the fabric still holds */
};

/* The fabric itself, e.g. for scripted impairment (ub__loopnet_impair). */
struct ub__loopnet *ub__loopnet_impl(ub_loopnet *n);
/* Replaces the clock every context on n reads (tests: a manual clock). */
void ub__loopnet_use_clock(ub_loopnet *n, const struct ub__clock *c);
/* The time ctx's progress runs at. */
uint64_t ub__ctx_now(const ub_context *ctx);
/* Frees closed contexts whose buffers have all come back. */
void ub__loopnet_reap(ub_loopnet *n, bool force);
/* Bytes 5..27 of every descriptor: the context's address. */
void ub__desc_put_addr(uint8_t *d, const struct ub__addr *a);
int ub__desc_get_addr(const uint8_t *d, struct ub__addr *a);
/*
 * Bytes 48..55 of every descriptor: an alternative address on this host (the shm endpoint
 * of a "udp://...?shm=1" context): family, port (16), 0, host id (32). Zero when none.
 */
void ub__desc_put_alt(uint8_t *d, const ub_context *ctx);
/* The address an importer uses: the alternative one when it can reach it, else a. */
void ub__desc_route(ub_context *importer, const uint8_t *d, struct ub__addr *a);

/* The context lock (ctx.h: the threading rule). Unlock also wakes the progress thread if
 * the call left the engine wanting to run sooner than the thread's sleep. */
static inline void ub__ctx_lock(ub_context *c)
{
    struct ub__ctx *x = ub__ctx_of(c);
    ub__lock_acquire(&x->lock);
    x->quiet = false; /* an API call may give the next round work (ub_poll_jfc does not) */
}

static inline void ub__ctx_unlock(ub_context *c)
{
    struct ub__ctx *x = ub__ctx_of(c);
    if (x->thread_started)
        ub__progress_kick(x);
    ub__lock_release(&x->lock);
}
/* A fresh object id (1 .. UB_API_ID_MAX) not in use for kind. */
uint32_t ub__ctx_new_id(ub_context *ctx, uint32_t kind);

#endif
