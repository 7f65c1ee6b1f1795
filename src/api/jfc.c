/* Completion queues (JFC) and event channels (JFCE). */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <softub/errors.h>
#include "api/api.h"
#include "core/compiler.h"

UB_EXPORT int ub_jfc_create(ub_context *ctx, const struct ub_jfc_attr *attr, ub_jfc **out)
{
    if (!ctx || !out)
        return UB_EINVAL;
    uint32_t depth = attr && attr->depth ? attr->depth : UB_API_DEFAULT_JFC_DEPTH;
    if (depth > (1u << 24))
        return UB_EINVAL;
    if (attr && attr->jfce && attr->jfce->ctx != ctx)
        return UB_EINVAL;
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
    if (c->users || c->events)
        return UB_EBUSY;
    if (c->on_fired)
        ub__list_remove(&c->fired_link);
    if (c->jfce)
        c->jfce->users--;
    ub__list_remove(&c->link);
    free(c->ring);
    free(c);
    return 0;
}

UB_EXPORT int ub_poll_jfc(ub_jfc *c, int max, struct ub_cr *cr)
{
    if (!c || max < 0 || (max && !cr))
        return UB_EINVAL;
    if (!c->count)
        ub_progress(c->ctx);
    return ub__jfc_take(c, max, cr);
}

UB_EXPORT int ub_rearm_jfc(ub_jfc *c, bool solicited_only)
{
    if (!c || !c->jfce)
        return UB_EINVAL;
    c->armed = true;
    c->sol_only = solicited_only;
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
    ub__list_push_back(&ctx->jfces, &e->link);
    *out = e;
    return 0;
}

UB_EXPORT int ub_jfce_destroy(ub_jfce *e)
{
    if (!e)
        return UB_EINVAL;
    if (e->users)
        return UB_EBUSY;
    close(e->fd);
    ub__list_remove(&e->link);
    free(e);
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
    if (ub__list_empty(&e->fired)) {
        uint64_t v;
        ssize_t r = read(e->fd, &v, sizeof(v)); /* re-arms the fd's readability */
        (void)r;
    }
    return n;
}

UB_EXPORT int ub_wait_jfc(ub_jfce *e, int max, int timeout_ms, ub_jfc **jfcs)
{
    if (!e || max <= 0 || !jfcs)
        return UB_EINVAL;
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX
                                       : ub__clock_monotonic_ns(NULL) +
                                             (uint64_t)timeout_ms * (uint64_t)UB_NS_PER_MS;
    for (;;) {
        /* Manual progress: the waiter drives its context. */
        ub_progress(e->ctx);
        if (!ub__list_empty(&e->fired))
            return take_fired(e, max, jfcs);
        if (timeout_ms == 0 || ub__clock_monotonic_ns(NULL) >= deadline)
            return 0;
        struct pollfd pfd = {.fd = e->fd, .events = POLLIN};
        int r = poll(&pfd, 1, 0);
        if (r < 0 && errno != EINTR)
            return UB_EIO;
    }
}

UB_EXPORT int ub_ack_jfc(ub_jfc *c, uint32_t n)
{
    if (!c || n > c->events)
        return UB_EINVAL;
    c->events -= n;
    return 0;
}
