/* softub-perf: latency statistics, test names, the configuration's bounds, the clock. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf.h"

static const char *const names[T_COUNT] = {"read_lat", "write_lat", "send_lat", "atomic_lat",
                                           "read_bw",  "write_bw",  "send_bw",  "atomic_bw"};

const char *perf_test_name(enum perf_test t)
{
    return (unsigned)t < T_COUNT ? names[t] : "?";
}

int perf_test_parse(const char *s)
{
    for (int i = 0; i < (int)T_COUNT; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

void perf_cfg_defaults(struct perf_cfg *c)
{
    memset(c, 0, sizeof(*c));
    c->magic = PERF_MAGIC;
    c->version = PERF_VERSION;
    c->jettys = 1;
    c->rx_depth = 256;
    c->post_list = 1;
    c->cq_mod = 1;
    c->max_size = PERF_MAX_SIZE;
    c->warmup = 16;
}

static bool in(uint64_t v, uint64_t lo, uint64_t hi)
{
    return v >= lo && v <= hi;
}

static bool has_nul(const char *s, size_t n)
{
    return memchr(s, '\0', n) != NULL;
}

const char *perf_cfg_bad(const struct perf_cfg *c)
{
    return c->test >= T_COUNT                                                     ? "test"
           : c->dev > DEV_SHM                                                     ? "device"
           : !in(c->size, 1, PERF_MAX_SIZE)                                       ? "size"
           : !in(c->max_size, PERF_MIN_SWEEP, PERF_MAX_SIZE)                      ? "max size"
           : c->duration > PERF_MAX_DURATION                                      ? "duration"
           : c->warmup > PERF_MAX_WARMUP                                          ? "warmup"
           : !in(c->jettys, 1, PERF_MAX_JETTY)                                    ? "jettys"
           : !in(c->tx_depth, 1, PERF_MAX_DEPTH)                                  ? "tx depth"
           : !in(c->rx_depth, 1, PERF_MAX_DEPTH)                                  ? "rx depth"
           : !in(c->post_list, 1, PERF_MAX_POST_LIST)                             ? "post list"
           : !in(c->cq_mod, 1, PERF_MAX_CQ_MOD)                                   ? "cq mod"
           : c->inline_sz > PERF_MAX_INLINE                                       ? "inline"
           : c->order > 2 || c->tm > 1                                            ? "order or mode"
           : c->paths > PERF_MAX_PATHS                                            ? "paths"
           : c->mtu && !in(c->mtu, PERF_MIN_MTU, PERF_MAX_MTU)                    ? "mtu"
           : (c->sweep | c->event | c->spin | c->huge | c->bidir | c->tagged) > 1 ? "flag"
           : !has_nul(c->cc, sizeof(c->cc)) || !has_nul(c->lb, sizeof(c->lb)) ||
                   !has_nul(c->server_ip, sizeof(c->server_ip)) ||
                   !has_nul(c->udp_opts, sizeof(c->udp_opts))
               ? "name"
               : NULL;
}

uint64_t perf_cfg_top(const struct perf_cfg *c)
{
    uint64_t top = c->sweep ? c->max_size : c->size;
    return top < 8 ? 8 : top; /* room for an atomic's word whatever the size */
}

bool perf_run_fits(const struct perf_cfg *c, const struct perf_run *r)
{
    return in(r->size, 1, perf_cfg_top(c)) && r->duration_ms <= PERF_MAX_DURATION * 1000ull;
}

bool perf_is_lat(enum perf_test t)
{
    return t <= T_ATOMIC_LAT;
}

/* SEND and WRITE latency is reported as half the round trip (ping-pong); READ and atomics
 * are one request and its response: the full round trip. */
bool perf_is_half_rtt(enum perf_test t)
{
    return t == T_WRITE_LAT || t == T_SEND_LAT;
}

uint64_t perf_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile (nearest rank) of sorted v[0..n). */
static double rank(const uint64_t *v, size_t n, double q)
{
    double r = ceil(q * (double)n);
    size_t i = r < 1 ? 0 : (size_t)r - 1;
    return (double)v[i < n ? i : n - 1];
}

void perf_lat_stats(uint64_t *ns, size_t n, double scale, struct perf_lat *out)
{
    memset(out, 0, sizeof(*out));
    if (!n)
        return;
    qsort(ns, n, sizeof(*ns), cmp_u64);
    double sum = 0, sq = 0;
    for (size_t i = 0; i < n; i++)
        sum += (double)ns[i];
    double avg = sum / (double)n;
    for (size_t i = 0; i < n; i++)
        sq += ((double)ns[i] - avg) * ((double)ns[i] - avg);
    double k = scale / 1000.0; /* ns -> us, halved for half round trips */
    out->min = (double)ns[0] * k;
    out->max = (double)ns[n - 1] * k;
    out->median = rank(ns, n, 0.5) * k;
    out->avg = avg * k;
    out->stdev = sqrt(sq / (double)n) * k;
    out->p99 = rank(ns, n, 0.99) * k;
    out->p999 = rank(ns, n, 0.999) * k;
    out->p9999 = rank(ns, n, 0.9999) * k;
}
