#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "core/pktbuf.h"

int ub__pktpool_init(struct ub__pktpool *pool, uint32_t count, uint32_t buf_size, uint32_t headroom)
{
    memset(pool, 0, sizeof(*pool));
    if (count == 0 || buf_size <= headroom)
        return UB_EINVAL;
    /* Cache-line aligned buffers: headers are written at fixed offsets. */
    size_t stride = ((size_t)buf_size + 63) & ~(size_t)63;
    pool->pkts = calloc(count, sizeof(*pool->pkts));
    pool->mem = aligned_alloc(64, stride * count);
    if (!pool->pkts || !pool->mem) {
        free(pool->pkts);
        free(pool->mem);
        memset(pool, 0, sizeof(*pool));
        return UB_ENOMEM;
    }
    pool->count = count;
    pool->buf_size = buf_size;
    pool->headroom = headroom;
    for (uint32_t i = count; i-- > 0;) {
        struct ub__pkt *p = &pool->pkts[i];
        p->pool = pool;
        p->head = pool->mem + stride * i;
        p->next = pool->free;
        pool->free = p;
    }
    pool->avail = count;
    return 0;
}

void ub__pktpool_fini(struct ub__pktpool *pool)
{
    free(pool->pkts);
    free(pool->mem);
    memset(pool, 0, sizeof(*pool));
}

struct ub__pkt *ub__pkt_alloc(struct ub__pktpool *pool)
{
    struct ub__pkt *p = pool->free;
    if (!p) {
        pool->exhausted++;
        return 0;
    }
    pool->free = p->next;
    pool->avail--;
    p->next = 0;
    p->data = p->head + pool->headroom;
    p->len = 0;
    p->wire_len = 0;
    p->xdata = 0;
    p->xlen = 0;
    p->refcnt = 1;
    p->ts = 0;
    p->tag = 0;
    p->order = 0;
    memset(&p->addr, 0, sizeof(p->addr));
    p->path = 0;
    p->ecn = 0;
    p->flags = 0;
    return p;
}

void ub__pkt_free(struct ub__pkt *p)
{
    if (--p->refcnt)
        return;
    struct ub__pktpool *pool = p->pool;
    p->next = pool->free;
    pool->free = p;
    pool->avail++;
}

struct ub__pkt *ub__pkt_clone(const struct ub__pkt *p)
{
    struct ub__pkt *c = ub__pkt_alloc(p->pool);
    if (!c)
        return 0;
    c->data = c->head + (p->data - p->head);
    memcpy(c->data, p->data, p->len);
    c->len = p->len;
    c->wire_len = p->wire_len;
    if (p->xlen) {
        memcpy(c->data + c->len, p->xdata, p->xlen);
        c->len += p->xlen;
        if (c->wire_len == c->len)
            c->wire_len = 0;
    }
    c->ts = p->ts;
    c->tag = p->tag;
    c->order = p->order;
    c->addr = p->addr;
    c->path = p->path;
    c->ecn = p->ecn;
    c->flags = p->flags;
    return c;
}

int ub__pkt_attach(struct ub__pkt *p, const void *src, uint32_t n)
{
    if (p->xlen)
        return UB_EINVAL;
    if (n > ub__pkt_tailroom(p))
        return UB_ENOBUFS;
    if (!n)
        return 0;
    p->wire_len = ub__pkt_wire_len(p) + n;
    p->xdata = src;
    p->xlen = n;
    return 0;
}

void ub__pkt_flatten_slow(struct ub__pkt *p)
{
    /* The tailroom was checked when the payload was attached; headers only grow at the front. */
    memcpy(p->data + p->len, p->xdata, p->xlen);
    p->len += p->xlen;
    if (p->wire_len == p->len)
        p->wire_len = 0;
    p->xdata = 0;
    p->xlen = 0;
}

void ub__pkts_flatten(struct ub__pkt *const *pkts, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        ub__pkt_flatten(pkts[i]);
}
