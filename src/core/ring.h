/*
 * A bounded FIFO of pointers with a power-of-two capacity, allocated once.
 * Single-threaded (the shm device has its own lock-free rings).
 */
#ifndef UB_CORE_RING_H
#define UB_CORE_RING_H

#include <stdbool.h>
#include <stdint.h>

struct ub__ring {
    void **items;
    uint32_t mask;
    uint32_t head; /* next to pop */
    uint32_t tail; /* next free */
};

/* Capacity is cap rounded up to a power of two. */
int ub__ring_init(struct ub__ring *r, uint32_t cap);
void ub__ring_fini(struct ub__ring *r);

static inline uint32_t ub__ring_count(const struct ub__ring *r)
{
    return r->tail - r->head;
}

static inline uint32_t ub__ring_capacity(const struct ub__ring *r)
{
    return r->mask + 1;
}

static inline bool ub__ring_full(const struct ub__ring *r)
{
    return ub__ring_count(r) == ub__ring_capacity(r);
}

/* False when full. */
static inline bool ub__ring_push(struct ub__ring *r, void *p)
{
    if (ub__ring_full(r))
        return false;
    r->items[r->tail++ & r->mask] = p;
    return true;
}

/* NULL when empty. */
static inline void *ub__ring_pop(struct ub__ring *r)
{
    if (r->head == r->tail)
        return 0;
    return r->items[r->head++ & r->mask];
}

static inline void *ub__ring_peek(const struct ub__ring *r)
{
    return r->head == r->tail ? 0 : r->items[r->head & r->mask];
}

/* The i-th item from the head; i < ub__ring_count(r). */
static inline void *ub__ring_at(const struct ub__ring *r, uint32_t i)
{
    return r->items[(r->head + i) & r->mask];
}

#endif
