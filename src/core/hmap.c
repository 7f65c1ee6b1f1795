#include <stdlib.h>

#include <softub/errors.h>
#include "core/hmap.h"
#include "core/rand.h"

static inline uint32_t home(const struct ub__hmap *m, uint64_t key)
{
    return (uint32_t)ub__mix64(key ^ m->seed) & m->mask;
}

static int alloc_slots(struct ub__hmap *m, uint32_t cap)
{
    m->slots = calloc(cap, sizeof(*m->slots));
    if (!m->slots)
        return UB_ENOMEM;
    m->mask = cap - 1;
    return 0;
}

/* Smallest power of two holding n entries at a load factor of at most 3/4. */
static uint32_t cap_for(uint32_t n)
{
    uint64_t need = (uint64_t)n * 4 / 3 + 1;
    uint32_t cap = 8;
    while (cap < need && cap < (1u << 31))
        cap <<= 1;
    return cap;
}

int ub__hmap_init(struct ub__hmap *m, uint32_t cap_hint, uint32_t max, uint64_t seed)
{
    m->count = 0;
    m->max = max;
    m->seed = seed;
    return alloc_slots(m, cap_for(cap_hint));
}

void ub__hmap_fini(struct ub__hmap *m)
{
    free(m->slots);
    m->slots = 0;
    m->count = 0;
    m->mask = 0;
}

void *ub__hmap_get(const struct ub__hmap *m, uint64_t key)
{
    for (uint32_t i = home(m, key);; i = (i + 1) & m->mask) {
        const struct ub__hmap_slot *s = &m->slots[i];
        if (!s->val)
            return 0;
        if (s->key == key)
            return s->val;
    }
}

static void insert_new(struct ub__hmap *m, uint64_t key, void *val)
{
    uint32_t i = home(m, key);
    while (m->slots[i].val)
        i = (i + 1) & m->mask;
    m->slots[i].key = key;
    m->slots[i].val = val;
    m->count++;
}

static int grow(struct ub__hmap *m)
{
    struct ub__hmap_slot *old = m->slots;
    uint32_t old_cap = m->mask + 1;
    if (old_cap >= (1u << 31))
        return UB_ENOMEM;
    if (alloc_slots(m, old_cap * 2)) {
        m->slots = old;
        return UB_ENOMEM;
    }
    m->count = 0;
    for (uint32_t i = 0; i < old_cap; i++)
        if (old[i].val)
            insert_new(m, old[i].key, old[i].val);
    free(old);
    return 0;
}

int ub__hmap_put(struct ub__hmap *m, uint64_t key, void *val)
{
    if (!val)
        return UB_EINVAL;
    if (ub__hmap_get(m, key))
        return UB_EEXIST;
    if (m->max && m->count >= m->max)
        return UB_EFULL;
    if ((uint64_t)(m->count + 1) * 4 > (uint64_t)(m->mask + 1) * 3) {
        int rc = grow(m);
        if (rc)
            return rc;
    }
    insert_new(m, key, val);
    return 0;
}

void *ub__hmap_del(struct ub__hmap *m, uint64_t key)
{
    uint32_t i = home(m, key);
    while (m->slots[i].val && m->slots[i].key != key)
        i = (i + 1) & m->mask;
    void *val = m->slots[i].val;
    if (!val)
        return 0;
    /* Backward shift: pull later members of the probe run into the hole. */
    for (uint32_t j = (i + 1) & m->mask; m->slots[j].val; j = (j + 1) & m->mask) {
        uint32_t h = home(m, m->slots[j].key);
        /* Move j into the hole i unless its home lies cyclically in (i, j]. */
        if (((j - h) & m->mask) >= ((j - i) & m->mask)) {
            m->slots[i] = m->slots[j];
            i = j;
        }
    }
    m->slots[i].val = 0;
    m->slots[i].key = 0;
    m->count--;
    return val;
}

uint32_t ub__hmap_next(const struct ub__hmap *m, uint32_t pos, uint64_t *key, void **val)
{
    for (uint32_t i = pos; i <= m->mask; i++) {
        if (m->slots[i].val) {
            *key = m->slots[i].key;
            *val = m->slots[i].val;
            return i + 1;
        }
    }
    return 0;
}
