/*
 * Device specs ("scheme:ADDRESS?key=value&key=value"): the parsing the UDP and shared
 * memory devices share. Lengths, not NUL terminators, bound every field.
 */
#ifndef UB_DEV_SPEC_H
#define UB_DEV_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* s[0..len) as a decimal in [lo, hi] (1 to 10 digits, nothing else): 0 or UB_EINVAL. */
int ub__spec_u32(const char *s, size_t len, uint32_t lo, uint32_t hi, uint32_t *out);

/* Whether the key k[0..klen) is name. */
bool ub__spec_key_is(const char *k, size_t klen, const char *name);

/* Applies one option to cfg: 0, or UB_EINVAL for an unknown key or a bad value. */
typedef int (*ub__spec_option_fn)(void *cfg, const char *k, size_t klen, const char *v,
                                  size_t vlen);

/*
 * Applies every "key=value" of the '&'-separated list [o, end) (what follows the '?') in
 * order: 0, or UB_EINVAL at the first without '=' or with an empty key, or that opt refuses.
 */
int ub__spec_options(const char *o, const char *end, ub__spec_option_fn opt, void *cfg);

#endif
