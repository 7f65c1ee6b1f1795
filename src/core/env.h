/* Environment switches. Internal. */
#ifndef UB_CORE_ENV_H
#define UB_CORE_ENV_H

#include <stdbool.h>
#include <stdlib.h>

/* Whether the environment turns a feature that is on by default off: name set to "0" exactly
 * (SOFTUB_HOLD=0, SOFTUB_FAST=0, ...). Anything else, or unset, leaves it on. */
static inline bool ub__env_off(const char *name)
{
    const char *v = getenv(name);
    return v && v[0] == '0' && v[1] == '\0';
}

#endif
