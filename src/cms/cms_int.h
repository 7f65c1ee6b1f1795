/* Shared integer helpers of the CMS algorithms. Internal. */
#ifndef UB_CMS_INT_H
#define UB_CMS_INT_H

#include <stdint.h>

#if !defined(__SIZEOF_INT128__)
#error "src/cms needs a 128-bit integer type for exact scaling"
#endif
__extension__ typedef unsigned __int128 ub__u128;

#define UB_NS_PER_S 1000000000ULL

/* floor(a * b / c), saturating at UINT64_MAX; c == 0 gives UINT64_MAX. */
static inline uint64_t ub__muldiv(uint64_t a, uint64_t b, uint64_t c)
{
    if (c == 0)
        return UINT64_MAX;
    ub__u128 r = (ub__u128)a * b / c;
    return r > UINT64_MAX ? UINT64_MAX : (uint64_t)r;
}

/* floor(a * b * c / d), saturating. */
static inline uint64_t ub__muldiv3(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    if (d == 0)
        return UINT64_MAX;
    ub__u128 ab = (ub__u128)a * b;
    if (c != 0 && ab > ~(ub__u128)0 / c)
        return UINT64_MAX;
    ub__u128 r = ab * c / d;
    return r > UINT64_MAX ? UINT64_MAX : (uint64_t)r;
}

static inline uint64_t ub__min64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}
static inline uint64_t ub__max64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}
static inline uint64_t ub__sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}
static inline uint64_t ub__sat_sub(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

/* bytes per second from bits per second */
static inline uint64_t ub__bps_to_Bps(uint64_t bps)
{
    return bps / 8;
}

/* BDP in bytes of rate_bps over rtt_ns */
static inline uint64_t ub__bdp(uint64_t rate_bps, uint64_t rtt_ns)
{
    return ub__muldiv(rate_bps, rtt_ns, 8 * UB_NS_PER_S);
}

#endif
