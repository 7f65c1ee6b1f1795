/*
 * softub-info: what this build of softub contains, and a self-test of the
 * engine between two in-process endpoints over the loop device, on a clean
 * link and on impaired ones.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <softub/softub.h>
#include "cms/cc.h"
#include "cms/lb.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/num.h"
#include "dev/shm.h"
#include "engine/testbed.h"
#include "ses/ses.h"
#include "wire/datagram.h"

struct rx_check {
    uint64_t intact, bad;
};

/* Datagram i carries a pattern derived from i, and i itself as immediate data. */
static uint8_t pattern(uint64_t i, uint32_t k)
{
    return (uint8_t)(i * 131 + k * 7 + (k >> 8));
}

static void on_dgram(void *arg, const struct ub__dgram_in *d, uint64_t now)
{
    (void)now;
    struct rx_check *c = arg;
    uint64_t i = d->header_data;
    for (uint32_t k = 0; k < d->len; k++) {
        if (d->data[k] != pattern(i, k)) {
            c->bad++;
            return;
        }
    }
    c->intact++;
}

struct scenario {
    const char *name;
    uint32_t drop_ppm, dup_ppm, corrupt_ppm, reorder_ppm;
};

/* Sends `count` datagrams A -> B through one scenario; returns 0 when every invariant held. */
static int run_scenario(const struct scenario *sc, uint32_t count, uint64_t seed, int verbose)
{
    struct ub__loopnet_cfg nc = {.ports = 2,
                                 .mtu = 4096,
                                 .num_paths = 8,
                                 .seed = seed,
                                 .latency_ns = 2 * UB_NS_PER_US,
                                 .queue_cap = 4096};
    struct ub__engine_cfg ec = {.seed = seed, .mtu = 4096, .num_paths = 8};
    struct ub__testbed tb;
    int rc = ub__testbed_create(&tb, 2, &nc, &ec);
    if (rc) {
        fprintf(stderr, "testbed: %s\n", ub_strerror(rc));
        return 1;
    }
    struct ub__impair_cfg ic = {.seed = seed,
                                .drop_ppm = sc->drop_ppm,
                                .dup_ppm = sc->dup_ppm,
                                .corrupt_ppm = sc->corrupt_ppm,
                                .reorder_ppm = sc->reorder_ppm,
                                .reorder_depth = 64,
                                .jitter_ns = sc->reorder_ppm ? UB_NS_PER_US : 0};
    ub__loopnet_impair(tb.net, 0, 1, &ic);
    struct rx_check chk = {0, 0};
    static const struct ub__engine_upcalls up = {.dgram = on_dgram};
    ub__engine_set_upcalls(&tb.nodes[1].eng, &up, &chk);

    uint64_t t0 = ub__clock_monotonic_ns(NULL);
    uint8_t buf[4096];
    uint32_t maxlen = ub__engine_dgram_max(&tb.nodes[0].eng);
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t len = 1 + (uint32_t)((i * 2654435761u) % maxlen);
        for (uint32_t k = 0; k < len; k++)
            buf[k] = pattern(i, k);
        /* Keep the output queue short: flush through the fabric when it fills. */
        while ((rc = ub__engine_dgram_send(&tb.nodes[0].eng, &tb.nodes[1].addr, (uint16_t)i, 0, i,
                                           buf, len, tb.now)) == UB_EFULL ||
               rc == UB_ENOBUFS)
            ub__testbed_run(&tb, tb.now + UB_NS_PER_US, 1000);
        if (rc) {
            fprintf(stderr, "send: %s\n", ub_strerror(rc));
            ub__testbed_destroy(&tb);
            return 1;
        }
        bytes += len;
        if (i % 256 == 255)
            tb.now += UB_NS_PER_US; /* a sender at a finite rate */
        ub__testbed_step(&tb);
    }
    bool idle = ub__testbed_run(&tb, UB_TIME_NEVER, 10000000);
    uint64_t wall = ub__clock_monotonic_ns(NULL) - t0;

    struct ub__loop_dir_stats ds;
    ub__loopnet_dir_stats(tb.net, 0, 1, &ds);
    const struct ub__engine_stats *rs = &tb.nodes[1].eng.stats;
    uint64_t arrived = count - ds.impair.dropped + ds.impair.duplicated;
    uint64_t damaged = rs->rx_malformed + rs->rx_unsupported + chk.bad;
    /* Conservation: every copy the link let through reached the engine and was judged. */
    int ok = idle && ds.overflow == 0 && rs->rx_pkts == arrived &&
             rs->rx_delivered == chk.intact + chk.bad && damaged <= ds.impair.corrupted &&
             chk.intact >= count - ds.impair.dropped - ds.impair.corrupted;
    double wall_ms = (double)wall / 1e6;
    printf("  %-22s %7u %8llu %7llu %6llu %7llu %9llu %9.3f %7.2f  %s\n", sc->name, count,
           (unsigned long long)chk.intact, (unsigned long long)ds.impair.dropped,
           (unsigned long long)ds.impair.duplicated, (unsigned long long)ds.impair.corrupted,
           (unsigned long long)(rs->rx_malformed + rs->rx_unsupported + chk.bad),
           (double)tb.now / 1e6, wall_ms, ok ? "ok" : "FAILED");
    if (verbose || !ok)
        printf("    bytes %llu, rx %llu, held %llu, reordered %llu, steps %llu\n",
               (unsigned long long)bytes, (unsigned long long)rs->rx_pkts,
               (unsigned long long)ds.held, (unsigned long long)ds.impair.reordered,
               (unsigned long long)tb.steps);
    ub__testbed_destroy(&tb);
    return ok ? 0 : 1;
}

static void print_info(void)
{
    printf("softub %s (library %s)\n", UB_VERSION_STRING, ub_version());
    printf("  devices:     loop, udp (a path per source port; ring=1: the packet ring), shm\n");
    printf("  wire:        UET 1.0 PDS (RUD/ROD/RUDI/UUD, ACK/ACK_CC/NACK/CTRL), SES (standard,\n"
           "               small, medium, responses, atomic and rendezvous extensions), TSS,\n"
           "               softub extension header; UDP port %d\n",
           UB_WIRE_UDP_PORT);
    printf("  services:    jettys: WRITE, READ, atomics, SEND (immediate, tagged) over RUD or\n"
           "               ROD; unreliable datagrams (UUD)\n");
    printf("  cc:         ");
    for (size_t i = 0; ub__cc_algo_at(i); i++)
        printf(" %s", ub__cc_algo_at(i)->name);
    printf(" (NAME+rccc: with receiver credits)\n  lb:         ");
    for (size_t i = 0; ub__lb_algo_at(i); i++)
        printf(" %s", ub__lb_algo_at(i)->name);
    /* What a context with a shm device would choose here (docs/api.md, "Single copy"). */
    uint64_t cost = ub__shm_cma_cost_ns();
    if (cost)
        printf("\n  single copy: over shm from %u bytes here (a one-page copy takes %llu ns)\n",
               ub__ses_cma_auto_min(cost), (unsigned long long)cost);
    else
        printf("\n  single copy: refused here (process_vm_readv): packets only\n");
    printf("  log level:   SOFTUB_LOG=%s\n",
           getenv("SOFTUB_LOG") ? getenv("SOFTUB_LOG") : "(warn)");
}

static int selftest(uint32_t count, uint64_t seed, int verbose)
{
    static const struct scenario sc[] = {
        {"clean link", 0, 0, 0, 0},
        {"5% loss", 50000, 0, 0, 0},
        {"reorder 64 deep", 0, 0, 0, 100000},
        {"dup 1% + corrupt 1%", 0, 10000, 10000, 0},
        {"all of the above", 50000, 10000, 10000, 100000},
    };
    printf("\nself-test: %u datagrams A -> B over the loop device, seed %llu\n", count,
           (unsigned long long)seed);
    printf("  %-22s %7s %8s %7s %6s %7s %9s %9s %7s\n", "link", "sent", "intact", "dropped", "dups",
           "corrupt", "rejected", "sim ms", "wall ms");
    int fails = 0;
    for (size_t i = 0; i < sizeof(sc) / sizeof(sc[0]); i++)
        fails += run_scenario(&sc[i], count, seed, verbose);
    printf("self-test %s\n", fails ? "FAILED" : "passed");
    return fails ? 1 : 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: softub-info [--selftest] [-n COUNT] [--seed N] [-v]\n"
               "  Prints what this build contains; --selftest also runs the engine between\n"
               "  two in-process endpoints over clean and impaired links.\n");
}

int main(int argc, char **argv)
{
    int run = 0, verbose = 0;
    uint32_t count = 20000;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--selftest") == 0) {
            run = 1;
        } else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
            uint64_t n;
            if (!ub__num_u64_all(argv[++i], 0, &n) || n == 0 || n > UINT32_MAX) {
                fprintf(stderr, "softub-info: -n: not a count: %s\n", argv[i]);
                return 2;
            }
            count = (uint32_t)n;
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            if (!ub__num_u64_all(argv[++i], 0, &seed)) {
                fprintf(stderr, "softub-info: --seed: not a number: %s\n", argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "-v") == 0) {
            verbose = 1;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    print_info();
    return run ? selftest(count, seed, verbose) : 0;
}
