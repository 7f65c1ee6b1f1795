/*
 * How often the host takes a busy CPU away, and for how long: one thread per CPU, pinned,
 * reads the monotonic clock in a loop for the given time and counts the gaps between two
 * reads above 5, 10 and 30 us (timer ticks, interrupts, a hypervisor's exits, other tasks).
 *
 * A busy-polling ping-pong sample that spans such a gap is late by it. With r gaps per
 * second on each of the two CPUs and a round trip of d seconds, about 2 r d of the samples
 * are hit: p99.9 shows the gaps once 2 r d exceeds 0.1 %, so the slower of two transports
 * can show a tail the faster one does not on the same host (docs/benchmarks.md).
 *
 *   hiccups [SECONDS]      (default 1; prints one line per CPU, then the mean per CPU)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CPUS 256

struct probe {
    pthread_t th;
    size_t cpu;
    uint64_t dur_ns;
    uint64_t over5, over10, over30, longest;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *run(void *arg)
{
    struct probe *p = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(p->cpu, &set);
    (void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    uint64_t start = now_ns(), prev = start;
    for (;;) { /* bounded: stops after dur_ns */
        uint64_t t = now_ns(), gap = t - prev;
        prev = t;
        p->over5 += gap > 5000;
        p->over10 += gap > 10000;
        p->over30 += gap > 30000;
        if (gap > p->longest)
            p->longest = gap;
        if (t - start >= p->dur_ns)
            break;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 1.0;
    if (!(secs > 0 && secs <= 60)) {
        fprintf(stderr, "usage: hiccups [SECONDS (0..60]]\n");
        return 2;
    }
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0)
        CPU_ZERO(&allowed);
    static struct probe pr[MAX_CPUS];
    int n = 0;
    for (size_t c = 0; c < MAX_CPUS && c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &allowed))
            continue;
        pr[n].cpu = c;
        pr[n].dur_ns = (uint64_t)(secs * 1e9);
        if (pthread_create(&pr[n].th, NULL, run, &pr[n]) != 0) {
            fprintf(stderr, "hiccups: pthread_create failed\n");
            return 1;
        }
        n++;
    }
    double s5 = 0, s10 = 0, s30 = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(pr[i].th, NULL);
        printf("cpu %zu: gaps over 5 us %.0f/s, over 10 us %.0f/s, over 30 us %.0f/s, longest %.1f "
               "us\n",
               pr[i].cpu, (double)pr[i].over5 / secs, (double)pr[i].over10 / secs,
               (double)pr[i].over30 / secs, (double)pr[i].longest / 1000.0);
        s5 += (double)pr[i].over5 / secs;
        s10 += (double)pr[i].over10 / secs;
        s30 += (double)pr[i].over30 / secs;
    }
    if (n)
        printf("mean per CPU: over 5 us %.0f/s, over 10 us %.0f/s, over 30 us %.0f/s\n", s5 / n,
               s10 / n, s30 / n);
    return 0;
}
