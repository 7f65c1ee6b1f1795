/* The marks of critpath.h (a build with SOFTUB_CRITPATH only). */
#include "dev/critpath.h"

#ifdef SOFTUB_CRITPATH
#include <stdbool.h>
#include <valgrind/callgrind.h>

/* A measurement build: one thread plays both sides of the ping-pong. */
static bool collecting;
static const struct ub__dev *sent_last;

/* Stored to where a count starts ([0]) and ends ([1]): a memory trace (lackey) finds the
 * turns by these stores (bench/footprint.sh). */
volatile unsigned char ub__critpath_mark[2];

void ub__critpath_rx(const struct ub__dev *dev)
{
    if (!collecting && dev != sent_last) {
        collecting = true;
        ub__critpath_mark[0] = 1;
        CALLGRIND_TOGGLE_COLLECT;
    }
}

void ub__critpath_tx(const struct ub__dev *dev)
{
    if (collecting) {
        CALLGRIND_TOGGLE_COLLECT;
        ub__critpath_mark[1] = 1;
        collecting = false;
    }
    sent_last = dev;
}
#else
typedef int ub__critpath_off; /* ISO C wants a declaration in every translation unit */
#endif
