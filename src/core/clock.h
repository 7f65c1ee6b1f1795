/*
 * Time source. The engine is handed `now` (integer nanoseconds) by its
 * driver and never reads a clock; drivers get time from a ub__clock, which
 * is the real monotonic clock in real runs and a manual one in tests and
 * the simulator.
 */
#ifndef UB_CORE_CLOCK_H
#define UB_CORE_CLOCK_H

#include <stdint.h>

#define UB_NS_PER_US  1000ULL
#define UB_NS_PER_MS  1000000ULL
#define UB_NS_PER_S   1000000000ULL
#define UB_TIME_NEVER UINT64_MAX

struct ub__clock {
    uint64_t (*now_ns)(void *arg);
    void *arg;
};

static inline uint64_t ub__clock_now(const struct ub__clock *c)
{
    return c->now_ns(c->arg);
}

/* CLOCK_MONOTONIC in nanoseconds: the one place the library reads real time. */
uint64_t ub__clock_monotonic_ns(void *arg);
extern const struct ub__clock ub__clock_real;

/* A clock that moves only when told to: for tests and simulation. */
struct ub__manual_clock {
    uint64_t now;
};
uint64_t ub__clock_manual_ns(void *arg);
static inline struct ub__clock ub__clock_manual(struct ub__manual_clock *m)
{
    struct ub__clock c = {ub__clock_manual_ns, m};
    return c;
}

#endif
