/*
 * Growing arrays: the one doubling policy of the library's and the simulator's resizable
 * tables. Internal.
 */
#ifndef UB_CORE_GROW_H
#define UB_CORE_GROW_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/*
 * Array v of *cap elements of `size` bytes, reallocated to twice as many (to `first` when it
 * has none). Returns the new array, *cap updated; NULL when it cannot grow, v and *cap as
 * they were. The caller stores the result back itself (typed: no cast through void **).
 */
static inline void *ub__grow(void *v, uint32_t *cap, size_t size, uint32_t first)
{
    uint32_t c = *cap ? *cap * 2 : first;
    if (c <= *cap)
        return NULL; /* 2^32 elements */
    void *x = realloc(v, (size_t)c * size);
    if (x)
        *cap = c;
    return x;
}

#endif
