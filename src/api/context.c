/* Contexts: opening an endpoint on a device, progress, asynchronous events, closing. */
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "api/api.h"
#include "core/compiler.h"

uint64_t ub__ctx_now(const ub_context *ctx)
{
    return ub__clock_now(&ctx->net->clock);
}

uint32_t ub__ctx_new_id(ub_context *ctx, uint32_t kind)
{
    for (uint32_t tries = 0; tries <= UB_API_ID_MAX; tries++) {
        uint32_t id = ctx->next_id++ & UB_API_ID_MAX;
        if (id && !ub__hmap_get(&ctx->objs, ub__obj_key(kind, id)))
            return id;
    }
    return 0;
}

static int parse_loop_uri(const char *uri, uint32_t *port)
{
    if (strncmp(uri, "loop:", 5) != 0)
        return UB_ENOTSUP;
    const char *p = uri + 5;
    if (!*p)
        return UB_EINVAL;
    uint32_t v = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9' || v > 100000)
            return UB_EINVAL;
        v = v * 10 + (uint32_t)(*p - '0');
    }
    *port = v;
    return 0;
}

static void impair_pair(ub_loopnet *n, uint16_t a, uint16_t b)
{
    struct ub__impair_cfg ic;
    memset(&ic, 0, sizeof(ic));
    ic.seed = n->attr.seed ^ ((uint64_t)a << 16) ^ b;
    ic.drop_ppm = n->attr.drop_ppm;
    ub__loopnet_impair(n->net, a, b, &ic);
}

UB_EXPORT int ub_context_open(const char *uri, const struct ub_context_attr *attr, ub_context **out)
{
    if (!uri || !attr || !out)
        return UB_EINVAL;
    uint32_t port;
    int rc = parse_loop_uri(uri, &port);
    if (rc)
        return rc;
    ub_loopnet *n = attr->loopnet;
    if (!n || port >= n->attr.ports)
        return UB_EINVAL;
    if (attr->progress == UB_PROGRESS_AUTO)
        return UB_ENOTSUP; /* the progress thread comes with the real networks */
    if (attr->progress != UB_PROGRESS_MANUAL)
        return UB_EINVAL;
    ub__loopnet_reap(n, false);
    ub_context *ctx = calloc(1, sizeof(*ctx));
    if (!ctx)
        return UB_ENOMEM;
    ctx->attr = *attr;
    ctx->net = n;
    ctx->port = (uint16_t)port;
    ub__list_init(&ctx->zombie);
    rc = ub__loop_open(n->net, (uint16_t)port, &ctx->dev);
    if (rc) {
        free(ctx);
        return rc == UB_EEXIST ? UB_EBUSY : rc;
    }
    struct ub__engine_cfg ec;
    memset(&ec, 0, sizeof(ec));
    uint64_t now = ub__clock_now(&n->clock);
    ec.seed = attr->seed ? attr->seed : (now ^ ((uint64_t)port << 48) ^ (uint64_t)(uintptr_t)ctx);
    uint32_t dmtu = ub__dev_mtu(ctx->dev);
    ec.mtu = attr->mtu && attr->mtu < dmtu ? attr->mtu : dmtu;
    uint32_t dpaths = ub__dev_num_paths(ctx->dev);
    ec.num_paths = attr->num_paths && attr->num_paths < dpaths ? attr->num_paths : dpaths;
    rc = ub__engine_init(&ctx->eng, &ec);
    if (rc) {
        ub__dev_close(ctx->dev);
        free(ctx);
        return rc;
    }
    ub__addr_loop(&ctx->addr, (uint16_t)port);
    struct ub__list *lists[] = {&ctx->jfces,  &ctx->jfcs, &ctx->jfss,  &ctx->jfrs,
                                &ctx->jettys, &ctx->segs, &ctx->tsegs, &ctx->tjettys};
    for (size_t i = 0; i < UB_ARRAY_SIZE(lists); i++)
        ub__list_init(lists[i]);
    ctx->next_id = (uint32_t)ub__rng_next(&ctx->eng.rng);
    if ((rc = ub__hmap_init(&ctx->objs, 64, 0, ub__rng_next(&ctx->eng.rng))) != 0 ||
        (rc = ub__ses_init(&ctx->ses, ctx)) != 0) {
        ub__hmap_fini(&ctx->objs);
        ub__dev_close(ctx->dev);
        ub__engine_fini(&ctx->eng);
        free(ctx);
        return rc;
    }
    n->ports[port] = ctx;
    if (n->attr.drop_ppm) {
        for (uint32_t p = 0; p < n->attr.ports; p++) {
            if (!n->ports[p])
                continue;
            impair_pair(n, (uint16_t)p, (uint16_t)port);
            if (p != port)
                impair_pair(n, (uint16_t)port, (uint16_t)p);
        }
    }
    *out = ctx;
    return 0;
}

UB_EXPORT int ub_context_close(ub_context *ctx)
{
    if (!ctx)
        return UB_EINVAL;
    ctx->closing = true;
    struct ub__list *l;
    while (!ub__list_empty(&ctx->jettys))
        ub_jetty_destroy(UB_CONTAINER_OF(ctx->jettys.next, ub_jetty, link));
    while (!ub__list_empty(&ctx->jfss))
        ub_jfs_destroy(UB_CONTAINER_OF(ctx->jfss.next, ub_jfs, link));
    while (!ub__list_empty(&ctx->jfrs)) {
        ub_jfr *r = UB_CONTAINER_OF(ctx->jfrs.next, ub_jfr, link);
        r->refs = 1;
        ub_jfr_destroy(r);
    }
    while (!ub__list_empty(&ctx->jfcs)) {
        ub_jfc *c = UB_CONTAINER_OF(ctx->jfcs.next, ub_jfc, link);
        c->users = 0;
        c->events = 0;
        ub_jfc_destroy(c);
    }
    while (!ub__list_empty(&ctx->jfces)) {
        ub_jfce *e = UB_CONTAINER_OF(ctx->jfces.next, ub_jfce, link);
        e->users = 0;
        ub_jfce_destroy(e);
    }
    while (!ub__list_empty(&ctx->segs))
        ub_seg_unregister(UB_CONTAINER_OF(ctx->segs.next, ub_seg, link));
    while ((l = ub__list_pop_front(&ctx->tsegs)) != NULL)
        free(UB_CONTAINER_OF(l, ub_tseg, link));
    while ((l = ub__list_pop_front(&ctx->tjettys)) != NULL)
        free(UB_CONTAINER_OF(l, ub_tjetty, link));
    ub_loopnet *n = ctx->net;
    /* Nothing above may hear from PDS any more: the packets it fails now concern no one. */
    ub__pds_set_upcalls(ctx->eng.pds, NULL, NULL);
    ub__ses_fini(&ctx->ses);
    ub__hmap_fini(&ctx->objs);
    n->ports[ctx->port] = NULL;
    ub__dev_close(ctx->dev);
    /* The fabric may still hold packets from our pool (queued towards others): keep it until
     * they are back. */
    ub__pds_destroy(ctx->eng.pds, 0);
    ctx->eng.pds = NULL;
    ub__list_push_back(&n->zombies, &ctx->zombie);
    ub__loopnet_reap(n, false);
    return 0;
}

UB_EXPORT int ub_progress(ub_context *ctx)
{
    if (!ctx)
        return UB_EINVAL;
    uint64_t now = ub__ctx_now(ctx);
    ub__loopnet_set_time(ctx->net->net, now);
    ub__ses_pump(&ctx->ses, now);
    int n = ub__drive_once(&ctx->eng, ctx->dev, now, &ctx->drive);
    ub__ses_pump(&ctx->ses, now);
    if (ub__engine_pending(&ctx->eng))
        n += ub__drive_once(&ctx->eng, ctx->dev, now, &ctx->drive);
    if ((++ctx->drive_rounds & 1023) == 0) {
        ub__ses_tgt_gc(&ctx->ses, now);
        if (!ub__list_empty(&ctx->net->zombies))
            ub__loopnet_reap(ctx->net, false);
    }
    return n < 0 ? 0 : n;
}

UB_EXPORT int ub_get_async_event(ub_context *ctx, struct ub_async_event *ev)
{
    if (!ctx || !ev)
        return UB_EINVAL;
    if (!ctx->async_count)
        return 0;
    *ev = ctx->async[ctx->async_head];
    ctx->async_head = (ctx->async_head + 1) % UB_SES_ASYNC_QUEUE;
    ctx->async_count--;
    return 1;
}

UB_EXPORT const char *ub_cr_status_str(enum ub_cr_status s)
{
    switch (s) {
    case UB_CR_SUCCESS:
        return "success";
    case UB_CR_LOC_LEN_ERR:
        return "local length error";
    case UB_CR_LOC_ACCESS_ERR:
        return "local access error";
    case UB_CR_REM_ACCESS_ERR:
        return "remote access error";
    case UB_CR_REM_LEN_ERR:
        return "remote length error";
    case UB_CR_INVALID_TOKEN:
        return "invalid token";
    case UB_CR_RNR:
        return "receiver not ready";
    case UB_CR_PEER_UNREACHABLE:
        return "peer unreachable";
    case UB_CR_FLUSHED:
        return "flushed";
    case UB_CR_UNSUPPORTED:
        return "unsupported operation";
    case UB_CR_REM_OP_ERR:
        return "remote operation error";
    }
    return "unknown status";
}
