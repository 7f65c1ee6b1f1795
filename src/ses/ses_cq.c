/*
 * Completion rings. A JFC holds up to `cap` records; every JFS or JFR that
 * reports to it commits its depth in berths, and the sum never exceeds cap,
 * so a push can never find the ring full. A record releases its berth when
 * it is polled.
 */
#include <unistd.h>

#include <softub/errors.h>
#include "core/compiler.h"
#include "ses/ses.h"

void ub__jfce_signal(ub_jfce *ce)
{
    uint64_t one = 1;
    ssize_t n = write(ce->fd, &one, sizeof(one));
    (void)n; /* a full eventfd counter is still readable: nothing is lost */
    ce->signalled = true;
    ce->signals++;
}

static void fire_event(ub_jfc *jfc)
{
    ub_jfce *ce = jfc->jfce;
    jfc->armed = false;
    jfc->pending_events++;
    if (!jfc->on_fired) {
        ub__list_push_back(&ce->fired, &jfc->fired_link);
        jfc->on_fired = true;
    }
    if (ce->fd >= 0 && ce->defer)
        ce->owed = true;
    else if (ce->fd >= 0)
        ub__jfce_signal(ce);
}

void ub__jfc_commit(ub_jfc *jfc, const struct ub_cr *cr, uint64_t owner, bool solicited)
{
    if (cr == &jfc->spill) /* cannot happen: berths are committed; keep the invariant loud */
        return;
    struct ub__cqe *e = UB_CONTAINER_OF(cr, struct ub__cqe, cr);
    e->owner = owner;
    e->solicited = solicited;
    jfc->count++;
    jfc->ctx->cr_pushed++;
    /* A message the poller answers (its own requests' completions mostly come in streams). */
    if (jfc->yield && (cr->opcode == UB_CR_OP_RECV || cr->opcode == UB_CR_OP_RECV_WRITE_IMM))
        jfc->ctx->eng.rx_yield = true;
    if (jfc->armed && jfc->jfce && (!jfc->sol_only || solicited || cr->status != UB_CR_SUCCESS))
        fire_event(jfc);
}

/* Gives the berth of a polled record back. The JFC keeps the JFS and JFR it found last
 * (records come in runs from a few owners; a destroyed one is cleared from it). */
static void release(ub_jfc *jfc, uint64_t owner)
{
    ub_context *ctx = jfc->ctx;
    uint32_t kind = (uint32_t)(owner >> 56);
    uint32_t id = (uint32_t)(owner >> 32) & 0xffffffu;
    if (kind == UB__OBJ_JFS) {
        ub_jfs *jfs = jfc->last_jfs;
        if (!jfs || jfs->id != id)
            jfs = jfc->last_jfs = ub__hmap_get(&ctx->objs, ub__obj_key(UB__OBJ_JFS, id));
        if (jfs)
            ub__ses_wr_release(jfs, (uint16_t)owner);
        else
            jfc->committed--; /* its JFS is gone: the berth it left behind goes back */
    } else if (kind == UB__OBJ_JFR) {
        ub_jfr *jfr = jfc->last_jfr;
        if (!jfr || jfr->id != id)
            jfr = jfc->last_jfr = ub__hmap_get(&ctx->objs, ub__obj_key(UB__OBJ_JFR, id));
        if (jfr && jfr->used)
            jfr->used--;
        else if (!jfr)
            jfc->committed--;
    }
}

int ub__jfc_take(ub_jfc *jfc, int max, struct ub_cr *out)
{
    int n = 0;
    while (n < max && jfc->count) {
        struct ub__cqe *e = &jfc->ring[jfc->head];
        out[n++] = e->cr;
        uint64_t owner = e->owner;
        if (++jfc->head == jfc->cap)
            jfc->head = 0;
        jfc->count--;
        if (owner)
            release(jfc, owner);
    }
    return n;
}
