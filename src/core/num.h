/*
 * Numbers from command lines and text files. Internal. strtoull alone takes "-1" as its
 * negation, skips leading blanks and saturates what does not fit: none of them is a count
 * or a size someone meant, so these accept digits only and refuse what is past 64 bits.
 */
#ifndef UB_CORE_NUM_H
#define UB_CORE_NUM_H

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

/* The number whose digits start at s, in base (0: hexadecimal after 0x, else decimal: unlike
 * C's, a leading 0 is not octal, so that "010" is ten), in *v; *rest is where its digits end
 * (a suffix may follow). false: no digit at s, or past 64 bits. */
static inline bool ub__num_u64(const char *s, int base, uint64_t *v, const char **rest)
{
    if (!isdigit((unsigned char)*s))
        return false;
    if (base == 0)
        base = s[0] == '0' && (s[1] == 'x' || s[1] == 'X') ? 16 : 10;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, base);
    if (errno == ERANGE)
        return false;
    *v = x;
    *rest = end;
    return true;
}

/* The same for the whole of s: nothing may follow the digits. */
static inline bool ub__num_u64_all(const char *s, int base, uint64_t *v)
{
    const char *rest;
    uint64_t x;
    if (!ub__num_u64(s, base, &x, &rest) || *rest)
        return false;
    *v = x;
    return true;
}

#endif
