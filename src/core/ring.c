#include <stdlib.h>

#include <softub/errors.h>
#include "core/ring.h"

int ub__ring_init(struct ub__ring *r, uint32_t cap)
{
    uint32_t n = 1;
    while (n < cap) {
        if (n >= (1u << 31))
            return UB_EINVAL;
        n <<= 1;
    }
    r->items = calloc(n, sizeof(*r->items));
    if (!r->items)
        return UB_ENOMEM;
    r->mask = n - 1;
    r->head = r->tail = 0;
    return 0;
}

void ub__ring_fini(struct ub__ring *r)
{
    free(r->items);
    r->items = 0;
    r->mask = r->head = r->tail = 0;
}
