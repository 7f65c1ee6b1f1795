/*
 * How far apart two CPUs are: one cache line bounced between two threads pinned to them
 * (each waits for the other's store, then stores), as the round trip of a line between their
 * caches. On a virtual machine the host may place the two virtual CPUs on cores that share a
 * last-level cache or on cores that do not, and move them from one placement to the other
 * while a benchmark runs: every loopback transfer moves its data between the two caches, so
 * the placement shows in bandwidth and latency alike (docs/benchmarks.md, "Bulk over udp").
 *
 *   c2c [CPU_A CPU_B]      (default: the first two CPUs this process may use)
 *
 * Prints the median of 9 batches of 20 000 round trips, in nanoseconds per round trip.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BATCHES 9
#define ROUNDS  20000u

static _Alignas(64) _Atomic uint64_t ping;
static _Alignas(64) _Atomic uint64_t pong;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET((size_t)cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static int cpu_b;
static _Atomic int pinned_b = -1;

/* Answers every ping (pinned or not: the main thread waits for all of them); the total is
 * known, so it stops by itself. */
static void *answer(void *arg)
{
    (void)arg;
    atomic_store(&pinned_b, pin(cpu_b) == 0);
    for (uint64_t i = 1; i <= (uint64_t)BATCHES * ROUNDS; i++) {
        while (atomic_load_explicit(&ping, memory_order_acquire) != i)
            ;
        atomic_store_explicit(&pong, i, memory_order_release);
    }
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int cpu_a = -1;
    cpu_b = -1;
    if (argc == 3) {
        cpu_a = atoi(argv[1]);
        cpu_b = atoi(argv[2]);
    } else if (argc == 1) {
        cpu_set_t allowed;
        if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0)
            CPU_ZERO(&allowed);
        for (int c = 0; c < CPU_SETSIZE && cpu_b < 0; c++)
            if (CPU_ISSET((size_t)c, &allowed)) {
                if (cpu_a < 0)
                    cpu_a = c;
                else
                    cpu_b = c;
            }
    }
    if (cpu_a < 0 || cpu_b < 0 || cpu_a == cpu_b) {
        fprintf(stderr, "usage: c2c [CPU_A CPU_B] (two distinct CPUs; the default needs two)\n");
        return 2;
    }
    pthread_t th;
    if (pin(cpu_a) != 0 || pthread_create(&th, NULL, answer, NULL) != 0) {
        fprintf(stderr, "c2c: cannot run on CPUs %d and %d\n", cpu_a, cpu_b);
        return 1;
    }
    double per[BATCHES];
    uint64_t i = 0;
    for (int b = 0; b < BATCHES; b++) {
        uint64_t t0 = now_ns();
        for (uint32_t k = 0; k < ROUNDS; k++) {
            atomic_store_explicit(&ping, ++i, memory_order_release);
            /* Bounded: the answering thread runs until it has answered every ping. */
            while (atomic_load_explicit(&pong, memory_order_acquire) != i)
                ;
        }
        per[b] = (double)(now_ns() - t0) / ROUNDS;
    }
    pthread_join(th, NULL);
    if (atomic_load(&pinned_b) != 1) {
        fprintf(stderr, "c2c: cannot run on CPU %d\n", cpu_b);
        return 1;
    }
    qsort(per, BATCHES, sizeof(per[0]), cmp);
    printf(
        "cpu %d <-> cpu %d: %.0f ns per cache-line round trip (median of %d batches; %.0f-%.0f)\n",
        cpu_a, cpu_b, per[BATCHES / 2], BATCHES, per[0], per[BATCHES - 1]);
    return 0;
}
