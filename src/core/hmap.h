/*
 * A hash map from 64-bit keys to pointers: open addressing, linear probing,
 * backward-shift deletion (no tombstones, so lookups stay short under
 * churn). Keys may come off the wire, so the hash is keyed by a per-map seed.
 * NULL values are not allowed (NULL means "absent").
 */
#ifndef UB_CORE_HMAP_H
#define UB_CORE_HMAP_H

#include <stdint.h>

struct ub__hmap_slot {
    uint64_t key;
    void *val; /* NULL: empty slot */
};

struct ub__hmap {
    struct ub__hmap_slot *slots;
    uint32_t mask; /* capacity - 1; capacity is a power of two */
    uint32_t count;
    uint32_t max; /* 0: grows without bound; else insert fails past max entries */
    uint64_t seed;
};

/* cap_hint entries fit without growing; max bounds the entries (0 = unbounded). */
int ub__hmap_init(struct ub__hmap *m, uint32_t cap_hint, uint32_t max, uint64_t seed);
void ub__hmap_fini(struct ub__hmap *m);

void *ub__hmap_get(const struct ub__hmap *m, uint64_t key);
/* Inserts key; UB_EEXIST if present, UB_EFULL past max, UB_ENOMEM, UB_EINVAL for NULL val. */
int ub__hmap_put(struct ub__hmap *m, uint64_t key, void *val);
/* Removes key and returns its value, or NULL if absent. */
void *ub__hmap_del(struct ub__hmap *m, uint64_t key);

/* Iteration: for (uint32_t i = 0; (i = ub__hmap_next(m, i, &k, &v)) != 0;) ... */
uint32_t ub__hmap_next(const struct ub__hmap *m, uint32_t pos, uint64_t *key, void **val);

#endif
