/*
 * Seeded pseudo-random numbers (xoshiro256**, seeded through splitmix64).
 * The engine never uses the C library's generator: every component owns a ub__rng seeded
 * from its owner's, so a run is reproducible from one seed.
 */
#ifndef UB_CORE_RAND_H
#define UB_CORE_RAND_H

#include <stdbool.h>
#include <stdint.h>

struct ub__rng {
    uint64_t s[4];
};

/* Seeds rng; equal seeds give equal streams, and seed 0 is as good as any. */
void ub__rng_seed(struct ub__rng *rng, uint64_t seed);

/* A child stream for a component, decorrelated from the parent and from other stream ids. */
void ub__rng_fork(struct ub__rng *child, const struct ub__rng *parent, uint64_t stream_id);

uint64_t ub__rng_next(struct ub__rng *rng);

/* Uniform in [0, bound); bound 0 returns 0. Unbiased (Lemire's method). */
uint64_t ub__rng_below(struct ub__rng *rng, uint64_t bound);

/* True with probability ppm / 1e6. */
bool ub__rng_chance_ppm(struct ub__rng *rng, uint32_t ppm);

/* splitmix64's finaliser: a good 64-bit mixing function for hashing. */
static inline uint64_t ub__mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

#endif
