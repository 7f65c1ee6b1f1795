#include "core/rand.h"

static uint64_t splitmix64(uint64_t *state)
{
    *state += 0x9e3779b97f4a7c15ULL;
    return ub__mix64(*state);
}

void ub__rng_seed(struct ub__rng *rng, uint64_t seed)
{
    uint64_t st = seed;
    for (int i = 0; i < 4; i++)
        rng->s[i] = splitmix64(&st);
}

void ub__rng_fork(struct ub__rng *child, const struct ub__rng *parent, uint64_t stream_id)
{
    /* Derive from the parent's state without advancing it, so forking is order-independent. */
    uint64_t st =
        parent->s[0] ^ ub__mix64(parent->s[1] + stream_id) ^ (parent->s[2] << 1) ^ parent->s[3];
    for (int i = 0; i < 4; i++)
        child->s[i] = splitmix64(&st);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t ub__rng_next(struct ub__rng *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t ub__rng_below(struct ub__rng *rng, uint64_t bound)
{
    if (bound == 0)
        return 0;
    unsigned __int128 m = (unsigned __int128)ub__rng_next(rng) * bound;
    uint64_t low = (uint64_t)m;
    if (low < bound) {
        uint64_t threshold = (0 - bound) % bound;
        while (low < threshold) {
            m = (unsigned __int128)ub__rng_next(rng) * bound;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

bool ub__rng_chance_ppm(struct ub__rng *rng, uint32_t ppm)
{
    if (ppm == 0)
        return false;
    if (ppm >= 1000000)
        return true;
    return ub__rng_below(rng, 1000000) < ppm;
}
