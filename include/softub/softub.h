/*
 * softub: a software Unified Bus. Public API.
 *
 * Everything a program needs is reached through this header. Names start
 * with ub_ (functions, types) or UB_ (macros, constants); anything else in
 * the library is internal and not exported.
 */
#ifndef SOFTUB_SOFTUB_H
#define SOFTUB_SOFTUB_H

#include <softub/version.h>
#include <softub/errors.h>
#include <softub/urma.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version string ("0.1.0") as built, which may differ from the header's. */
const char *ub_version(void);

#ifdef __cplusplus
}
#endif
#endif
