/*
 * A device-neutral peer address: what a device needs to reach a peer
 * (IPv4/IPv6 address and UDP port, a loop-fabric port, a shm ring name id).
 * Fixed size and comparable with memcmp, so it can key hash tables.
 */
#ifndef UB_CORE_ADDR_H
#define UB_CORE_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum ub__addr_family {
    UB_AF_NONE = 0,
    UB_AF_LOOP = 1, /* port = endpoint index on a loop fabric */
    UB_AF_INET = 2,
    UB_AF_INET6 = 3,
    UB_AF_SHM = 4,
};

struct ub__addr {
    uint8_t family;
    uint8_t pad;
    uint16_t port;     /* host order */
    uint32_t scope_id; /* IPv6 scope; 0 otherwise */
    uint8_t ip[16];    /* IPv4 in the first 4 bytes; unused bytes zero */
};

static inline void ub__addr_loop(struct ub__addr *a, uint16_t port)
{
    memset(a, 0, sizeof(*a));
    a->family = UB_AF_LOOP;
    a->port = port;
}

static inline uint64_t ub__addr_word(const struct ub__addr *a, size_t i)
{
    uint64_t v;
    memcpy(&v, (const unsigned char *)a + 8 * i, sizeof(v));
    return v;
}

/* Three words without holes: compared as words, not through a memcmp call (per packet). Each
 * word loaded on its own: copied whole into arrays, gcc moves both through the stack. */
static inline bool ub__addr_eq(const struct ub__addr *a, const struct ub__addr *b)
{
    _Static_assert(sizeof(struct ub__addr) == 24, "three words");
    return ((ub__addr_word(a, 0) ^ ub__addr_word(b, 0)) |
            (ub__addr_word(a, 1) ^ ub__addr_word(b, 1)) |
            (ub__addr_word(a, 2) ^ ub__addr_word(b, 2))) == 0;
}

uint64_t ub__addr_hash(const struct ub__addr *a, uint64_t seed);

/* "udp:127.0.0.1:4790", "loop:3", ...; returns the length snprintf would have written. */
int ub__addr_format(const struct ub__addr *a, char *buf, size_t len);

#endif
