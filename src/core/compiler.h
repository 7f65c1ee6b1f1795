/* Compiler helpers shared by every module. Internal. */
#ifndef UB_CORE_COMPILER_H
#define UB_CORE_COMPILER_H

#include <stddef.h>
#include <stdint.h>

/* Only symbols marked UB_EXPORT leave the shared library. */
#define UB_EXPORT __attribute__((visibility("default")))

#define UB_LIKELY(x)         __builtin_expect(!!(x), 1)
#define UB_UNLIKELY(x)       __builtin_expect(!!(x), 0)
#define UB_UNUSED            __attribute__((unused))
#define UB_NOINLINE          __attribute__((noinline))
#define UB_ALWAYS_INLINE     inline __attribute__((always_inline))
#define UB_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#define UB_ARRAY_SIZE(a)     (sizeof(a) / sizeof((a)[0]))
#define UB_MIN(a, b)         ((a) < (b) ? (a) : (b))
#define UB_MAX(a, b)         ((a) > (b) ? (a) : (b))

/* v modulo n (n > 0) without the division when v < n already, as an entropy value taken
 * for a path nearly always is: a division is tens of cycles on a packet's path. */
static inline uint32_t ub__mod_below(uint32_t v, uint32_t n)
{
    return v < n ? v : v % n;
}

/* The struct that embeds member m at address p. */
#define UB_CONTAINER_OF(p, type, m) ((type *)(void *)((char *)(p)-offsetof(type, m)))

#endif
