#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "core/clock.h"
#include "engine/testbed.h"

int ub__testbed_create(struct ub__testbed *tb, uint32_t nodes, const struct ub__loopnet_cfg *net,
                       const struct ub__engine_cfg *eng_cfg)
{
    memset(tb, 0, sizeof(*tb));
    struct ub__loopnet_cfg nc = *net;
    if (nodes == 0 || nodes > UB_LOOP_MAX_PORTS)
        return UB_EINVAL;
    if (nc.ports < nodes)
        nc.ports = nodes;
    int rc = ub__loopnet_create(&nc, &tb->net);
    if (rc)
        return rc;
    tb->nodes = calloc(nodes, sizeof(*tb->nodes));
    if (!tb->nodes) {
        ub__loopnet_destroy(tb->net);
        return UB_ENOMEM;
    }
    for (uint32_t i = 0; i < nodes; i++) {
        struct ub__tb_node *nd = &tb->nodes[i];
        struct ub__engine_cfg ec = *eng_cfg;
        ec.seed = eng_cfg->seed + i;
        if (!ec.num_paths)
            ec.num_paths = nc.num_paths;
        if (!ec.mtu)
            ec.mtu = nc.mtu ? nc.mtu : UB_LOOP_DEFAULT_MTU;
        rc = ub__loop_open(tb->net, (uint16_t)i, &nd->dev);
        if (!rc)
            rc = ub__engine_init(&nd->eng, &ec);
        if (rc) {
            tb->n = i;
            ub__testbed_destroy(tb);
            return rc;
        }
        ub__addr_loop(&nd->addr, (uint16_t)i);
        tb->n = i + 1;
    }
    return 0;
}

void ub__testbed_destroy(struct ub__testbed *tb)
{
    /* The fabric first: it returns the buffers it holds to the engines' pools. */
    if (tb->net)
        ub__loopnet_destroy(tb->net);
    for (uint32_t i = 0; i < tb->n; i++)
        ub__engine_fini(&tb->nodes[i].eng);
    free(tb->nodes);
    memset(tb, 0, sizeof(*tb));
}

int ub__testbed_step(struct ub__testbed *tb)
{
    int moved = 0;
    ub__loopnet_set_time(tb->net, tb->now);
    for (uint32_t i = 0; i < tb->n; i++) {
        int m = ub__drive_once(&tb->nodes[i].eng, tb->nodes[i].dev, tb->now, &tb->nodes[i].drive);
        if (m > 0)
            moved += m;
    }
    tb->steps++;
    return moved;
}

/* The earliest moment anything can happen, or UB_TIME_NEVER. */
static uint64_t next_event(const struct ub__testbed *tb)
{
    uint64_t t = ub__loopnet_next_deadline(tb->net);
    for (uint32_t i = 0; i < tb->n; i++) {
        const struct ub__engine *e = &tb->nodes[i].eng;
        if (ub__engine_pending(e))
            return tb->now;
        uint64_t d = ub__engine_next_deadline(e);
        if (d < t)
            t = d;
    }
    return t;
}

bool ub__testbed_run(struct ub__testbed *tb, uint64_t until, uint64_t max_steps)
{
    for (uint64_t s = 0; s < max_steps; s++) {
        uint64_t t = next_event(tb);
        if (t == UB_TIME_NEVER)
            return true;
        if (t > until) {
            if (until != UB_TIME_NEVER && until > tb->now)
                tb->now = until; /* nothing happens before then: the clock moves anyway */
            return false;
        }
        if (t > tb->now)
            tb->now = t;
        ub__testbed_step(tb);
    }
    return false;
}
