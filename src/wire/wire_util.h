/* Small helpers shared by the wire codecs. Internal. */
#ifndef UB_WIRE_UTIL_H
#define UB_WIRE_UTIL_H

#include <stdint.h>

/* The two's-complement value of a 16-bit field, without implementation-defined casts. */
static inline int16_t ub__s16(uint16_t v)
{
    return (int16_t)(v >= 0x8000u ? (int32_t)v - 0x10000 : (int32_t)v);
}

#endif
