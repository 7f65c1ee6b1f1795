/* The marks of critpath.h (a build with SOFTUB_CRITPATH only). */
#include "dev/critpath.h"

#ifdef SOFTUB_CRITPATH
#include <stdbool.h>
#include <valgrind/callgrind.h>

static bool collecting; /* a measurement build: one thread plays the ping-pong */

void ub__critpath_rx(void)
{
    if (!collecting) {
        collecting = true;
        CALLGRIND_TOGGLE_COLLECT;
    }
}

void ub__critpath_tx(void)
{
    if (collecting) {
        CALLGRIND_TOGGLE_COLLECT;
        collecting = false;
    }
}
#else
typedef int ub__critpath_off; /* ISO C wants a declaration in every translation unit */
#endif
