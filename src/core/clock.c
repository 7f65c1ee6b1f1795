#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "core/clock.h"

uint64_t ub__clock_monotonic_ns(void *arg)
{
    (void)arg;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * UB_NS_PER_S + (uint64_t)ts.tv_nsec;
}

const struct ub__clock ub__clock_real = {ub__clock_monotonic_ns, 0};

uint64_t ub__clock_manual_ns(void *arg)
{
    return ((const struct ub__manual_clock *)arg)->now;
}
