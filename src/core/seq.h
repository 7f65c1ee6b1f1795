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

static inline uint32_t ub__seq_max(uint32_t a, uint32_t b)
{
    return ub__seq_lt(a, b) ? b : a;
}

#endif
