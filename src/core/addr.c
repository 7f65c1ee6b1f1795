#include <stdio.h>

#include "core/addr.h"
#include "core/rand.h"

uint64_t ub__addr_hash(const struct ub__addr *a, uint64_t seed)
{
    uint64_t w[3];
    memcpy(w, a, sizeof(w));
    return ub__mix64(ub__mix64(ub__mix64(seed ^ w[0]) ^ w[1]) ^ w[2]);
}

int ub__addr_format(const struct ub__addr *a, char *buf, size_t len)
{
    const uint8_t *ip = a->ip;
    switch (a->family) {
    case UB_AF_LOOP:
        return snprintf(buf, len, "loop:%u", a->port);
    case UB_AF_SHM:
        return snprintf(buf, len, "shm:%u", a->port);
    case UB_AF_INET:
        return snprintf(buf, len, "udp:%u.%u.%u.%u:%u", ip[0], ip[1], ip[2], ip[3], a->port);
    case UB_AF_INET6: {
        int n = snprintf(buf, len, "udp:[");
        for (int i = 0; i < 16; i += 2) {
            size_t off = (size_t)n < len ? (size_t)n : len;
            n += snprintf(buf + off, len - off, "%s%x", i ? ":" : "",
                          (unsigned)((ip[i] << 8) | ip[i + 1]));
        }
        size_t off = (size_t)n < len ? (size_t)n : len;
        return n + snprintf(buf + off, len - off, "]:%u", a->port);
    }
    default:
        return snprintf(buf, len, "none");
    }
}
