/* ub_loopnet: an in-process fabric shared by the contexts of one process. */
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "api/api.h"
#include "core/compiler.h"

UB_EXPORT int ub_loopnet_create(const struct ub_loopnet_attr *attr, ub_loopnet **out)
{
    if (!out)
        return UB_EINVAL;
    struct ub_loopnet_attr a;
    memset(&a, 0, sizeof(a));
    if (attr)
        a = *attr;
    if (!a.ports)
        a.ports = 64;
    if (!a.mtu)
        a.mtu = 4096;
    if (!a.num_paths)
        a.num_paths = 8;
    if (a.ports > UB_LOOP_MAX_PORTS || a.mtu < 512 || a.mtu > 65000 || a.drop_ppm > 1000000)
        return UB_EINVAL;
    ub_loopnet *n = calloc(1, sizeof(*n));
    if (!n)
        return UB_ENOMEM;
    struct ub__loopnet_cfg c = {
        .ports = a.ports,
        .mtu = a.mtu,
        .num_paths = a.num_paths,
        .queue_cap = 8192,
        .seed = a.seed,
        .latency_ns = a.latency_ns,
    };
    int rc = ub__loopnet_create(&c, &n->net);
    if (rc) {
        free(n);
        return rc;
    }
    n->attr = a;
    n->clock = ub__clock_real;
    ub__list_init(&n->zombies);
    *out = n;
    return 0;
}

UB_EXPORT int ub_loopnet_destroy(ub_loopnet *n)
{
    if (!n)
        return UB_EINVAL;
    for (uint32_t i = 0; i < UB_LOOP_MAX_PORTS; i++)
        if (n->ports[i])
            return UB_EBUSY;
    /* The fabric first: it gives the closed contexts' buffers back. */
    ub__loopnet_destroy(n->net);
    n->net = NULL;
    ub__loopnet_reap(n, true);
    free(n);
    return 0;
}

struct ub__loopnet *ub__loopnet_impl(ub_loopnet *n)
{
    return n->net;
}

void ub__loopnet_use_clock(ub_loopnet *n, const struct ub__clock *c)
{
    n->clock = *c;
}

void ub__loopnet_reap(ub_loopnet *n, bool force)
{
    struct ub__list *it, *tmp;
    UB_LIST_FOR_EACH_SAFE(it, tmp, &n->zombies)
    {
        ub_context *ctx = UB_CONTAINER_OF(it, ub_context, zombie);
        if (!force && ctx->eng.pool.avail != ctx->eng.pool.count)
            continue;
        ub__list_remove(&ctx->zombie);
        ub__engine_fini(&ctx->eng);
        free(ctx);
    }
}
