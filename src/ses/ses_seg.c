/* Segment helpers shared by the initiator and the target. */
#include "ses/ses.h"

bool ub__seg_covers(const ub_seg *seg, const void *p, uint64_t len)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)seg->addr;
    return a >= b && len <= seg->len && a - b <= seg->len - len;
}
