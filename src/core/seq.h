/*
 * Serial-number arithmetic for wrapping 32-bit sequence numbers (PSNs,
 * message ids): a is before b when b - a, taken modulo 2^32, is less than
 * 2^31 and non-zero (RFC 1982).
 */
#ifndef UB_CORE_SEQ_H
#define UB_CORE_SEQ_H

#include <stdbool.h>
#include <stdint.h>

static inline int32_t ub__seq_diff(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b);
}

static inline bool ub__seq_lt(uint32_t a, uint32_t b)
{
    return ub__seq_diff(a, b) < 0;
}

static inline bool ub__seq_le(uint32_t a, uint32_t b)
{
    return ub__seq_diff(a, b) <= 0;
}

/* base + off in sequence space (off may be negative). */
static inline uint32_t ub__seq_add(uint32_t base, int32_t off)
{
    uint32_t u = (uint32_t)off;
    return base + u;
}

static inline uint32_t ub__seq_max(uint32_t a, uint32_t b)
{
    return ub__seq_lt(a, b) ? b : a;
}

#endif
