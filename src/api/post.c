/* Posting work requests: one doorbell (pump) per chain. */
#include <softub/errors.h>
#include "api/api.h"
#include "core/compiler.h"

static int post_send_impl(ub_jfs *jfs, struct ub_wr *wr, struct ub_wr **bad_wr)
{
    if (!jfs)
        return UB_EINVAL;
    ub_context *ctx = jfs->ctx;
    struct ub__ctx *x = ub__ctx_of(ctx);
    /*
     * A post that answers a held round over shm alone takes the round's time instead of a
     * second clock reading on the answer's path (~25 ns of a 0.5 us turn). The hold lasts two
     * watchdog periods at most (hold.c), and over shm time only arms bounds of 10 ms and more
     * (the response bound, the peers' probe); over udp a PDC's RTT samples and timers want
     * the moment of sending.
     */
    uint64_t now = x->tx_held && ub__ctx_shm_only(ctx) ? x->round_now : ub__ctx_now(ctx);
    /* After an idle spell the shm peers are probed first: a request must not go to a process
     * that died meanwhile (it would fail) when one restarted at its id would answer. */
    ub__ctx_shm_check_due(ctx, now);
    int rc = 0;
    for (; wr; wr = wr->next) {
        rc = ub__ses_post(jfs, wr, now);
        if (rc) {
            if (bad_wr)
                *bad_wr = wr;
            break;
        }
    }
    /* Held output: this post answers what the last round received. The responses held
     * stay back (ub__ctx_send_out sends them after these requests). */
    bool answer = x->tx_held;
    if (x->writes_unanswered) { /* the application reacts to WRITEs it polled memory for */
        x->writes_answered = true;
        x->writes_unanswered = false;
    }
    ctx->ses.emit_now = answer && ctx->ses.fast; /* the output follows at once (flush below) */
    ub__ses_pump_held(&ctx->ses, now, answer);
    ctx->ses.emit_now = false;
    /*
     * Automatic progress: the packets go out now rather than at the thread's next round, with
     * whatever a waiter's round held. Only the sending: receiving is for that thread or a
     * waiter, and a receive here would mostly be a failing system call. What the device
     * refuses stays pending, and unlocking wakes the thread for it.
     */
    if (ctx->attr.progress == UB_PROGRESS_AUTO && ub__engine_pending(&ctx->eng)) {
        ub__ctx_send_locked(ctx, now);
    } else {
        ub__ctx_flush_held_at(ctx, now); /* the request joins the ACKs and responses held */
    }
    if (answer)
        x->answered = true;
    return rc;
}

UB_EXPORT int ub_post_send(ub_jfs *jfs, struct ub_wr *wr, struct ub_wr **bad_wr)
{
    if (!jfs)
        return UB_EINVAL;
    ub_context *ctx_ = jfs->ctx;
    ub__ctx_lock(ctx_);
    int rc = post_send_impl(jfs, wr, bad_wr);
    ub__ctx_unlock(ctx_);
    return rc;
}
