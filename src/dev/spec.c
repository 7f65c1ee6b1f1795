/* Device spec parsing shared by the UDP and shared memory devices (spec.h). */
#include <string.h>

#include <softub/errors.h>
#include "dev/spec.h"

int ub__spec_u32(const char *s, size_t len, uint32_t lo, uint32_t hi, uint32_t *out)
{
    if (len == 0 || len > 10)
        return UB_EINVAL;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return UB_EINVAL;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v < lo || v > hi)
        return UB_EINVAL;
    *out = (uint32_t)v;
    return 0;
}

bool ub__spec_key_is(const char *k, size_t klen, const char *name)
{
    return strlen(name) == klen && memcmp(k, name, klen) == 0;
}

int ub__spec_options(const char *o, const char *end, ub__spec_option_fn opt, void *cfg)
{
    for (;;) {
        const char *amp = memchr(o, '&', (size_t)(end - o));
        const char *oe = amp ? amp : end;
        const char *eq = memchr(o, '=', (size_t)(oe - o));
        if (!eq || eq == o || opt(cfg, o, (size_t)(eq - o), eq + 1, (size_t)(oe - eq - 1)))
            return UB_EINVAL;
        if (!amp)
            return 0;
        o = amp + 1;
    }
}
