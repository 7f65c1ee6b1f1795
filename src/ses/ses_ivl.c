/*
 * Per-transaction arrival tracking: which byte ranges of a message, READ
 * response or rendezvous READ have arrived. PDS delivers each packet once per
 * PDC, but a transaction may see a packet twice when its PDC was
 * re-established (the initiator retransmits into the new context); counting
 * bytes would then complete a transaction that still has a hole. Intervals
 * are kept sorted and disjoint and merged as they touch, so in-order arrival
 * costs one interval whatever the length.
 */
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "ses/ses.h"

static uint64_t *ivl_v(struct ub__ivl *t)
{
    return t->cap ? t->heap : t->inl;
}

static const uint64_t *ivl_cv(const struct ub__ivl *t)
{
    return t->cap ? t->heap : t->inl;
}

static uint32_t ivl_cap(const struct ub__ivl *t)
{
    return t->cap ? t->cap : UB_IVL_INLINE;
}

/* ub__ivl_reset's rare part. The inline array is only read below n: it is never cleared. */
void ub__ivl_free_heap(struct ub__ivl *t)
{
    free(t->heap);
    t->heap = NULL;
}

bool ub__ivl_covers(const struct ub__ivl *t, uint64_t a, uint64_t b)
{
    if (a >= b)
        return true;
    const uint64_t *v = ivl_cv(t);
    for (uint32_t i = 0; i < t->n; i++)
        if (v[2 * i] <= a && b <= v[2 * i + 1])
            return true;
    return false;
}

int ub__ivl_add(struct ub__ivl *t, uint64_t a, uint64_t b, uint64_t *fresh)
{
    *fresh = 0;
    if (a >= b)
        return 0;
    uint64_t *v = ivl_v(t);
    /* In-order arrival (nearly every packet): the first interval, or the last one grows. */
    if (!t->n || v[2 * t->n - 1] == a) {
        if (!t->n) {
            v[0] = a;
            t->n = 1;
        }
        v[2 * t->n - 1] = b;
        *fresh = b - a;
        t->total += b - a;
        return 0;
    }
    /* First interval that ends at or after a (touching counts: they merge). */
    uint32_t i = 0;
    while (i < t->n && v[2 * i + 1] < a)
        i++;
    /* Intervals i .. j-1 overlap or touch [a, b). */
    uint32_t j = i;
    uint64_t lo = a, hi = b, covered = 0;
    while (j < t->n && v[2 * j] <= b) {
        uint64_t s = v[2 * j], e = v[2 * j + 1];
        uint64_t os = s > a ? s : a, oe = e < b ? e : b;
        if (oe > os)
            covered += oe - os;
        if (s < lo)
            lo = s;
        if (e > hi)
            hi = e;
        j++;
    }
    if (j == i) { /* no neighbour: insert a new interval at i */
        if (t->n == ivl_cap(t)) {
            uint32_t cap = ivl_cap(t) * 2;
            uint64_t *n = malloc((size_t)cap * 2 * sizeof(*n));
            if (!n)
                return UB_ENOMEM;
            memcpy(n, v, (size_t)t->n * 2 * sizeof(*n));
            free(t->heap);
            t->heap = n;
            t->cap = cap;
            v = n;
        }
        memmove(&v[2 * (i + 1)], &v[2 * i], (size_t)(t->n - i) * 2 * sizeof(*v));
        t->n++;
    } else if (j > i + 1) { /* several merge into one */
        memmove(&v[2 * (i + 1)], &v[2 * j], (size_t)(t->n - j) * 2 * sizeof(*v));
        t->n -= j - i - 1;
    }
    v[2 * i] = lo;
    v[2 * i + 1] = hi;
    *fresh = (b - a) - covered;
    t->total += *fresh;
    return 0;
}
