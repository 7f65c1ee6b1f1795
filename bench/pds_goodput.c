/*
 * PDS goodput against loss rate, selective vs go-back-N repeat (fast and timeout-only), on the
 * deterministic test bed: two engines, 4 paths, 2 us one-way latency, the same Bernoulli loss
 * in both directions (data and ACKs), window 256.
 *
 * The loop fabric has latency but no serialization rate, so the figure of merit is link
 * efficiency: useful packets / data packets transmitted (first transmissions plus
 * retransmissions). On a link the sender keeps busy, that is goodput as a fraction of the
 * line rate. The completion time in simulated time is printed too (it measures recovery
 * latency: RTO waits, not bandwidth).
 *
 *   pds_goodput [packets per cell (default 20000)] [seed]
 *
 * Prints a Markdown table (scripts/pds_goodput.sh; docs/pds.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "core/clock.h"
#include "engine/testbed.h"

struct counts {
    uint64_t acked, failed, delivered;
};

static void on_deliver(void *arg, const struct ub__pds_rx *rx, uint64_t now)
{
    (void)rx;
    (void)now;
    ((struct counts *)arg)->delivered++;
}

static void on_acked(void *arg, uint64_t cookie, uint64_t now)
{
    (void)cookie;
    (void)now;
    ((struct counts *)arg)->acked++;
}

static void on_failed(void *arg, uint64_t cookie, int err, uint64_t now)
{
    (void)cookie;
    (void)err;
    (void)now;
    ((struct counts *)arg)->failed++;
}

static const struct ub__pds_upcalls ups = {
    .deliver = on_deliver, .acked = on_acked, .failed = on_failed};

struct result {
    double eff, retx, ms;
    uint64_t failed;
};

static int cell(uint8_t mode, enum ub__pds_retx retx, uint32_t loss_ppm, uint32_t n, uint64_t seed,
                struct result *r)
{
    struct ub__loopnet_cfg nc = {.ports = 2,
                                 .mtu = 4096,
                                 .num_paths = 4,
                                 .seed = seed,
                                 .latency_ns = 2000,
                                 .queue_cap = 16384,
                                 .checksum = true};
    struct ub__engine_cfg ec = {.seed = seed, .mtu = 4096, .num_paths = 4, .pool_bufs = 8192};
    ec.pds.retx[mode] = retx;
    ec.pds.max_retries = 64;
    struct ub__testbed tb;
    if (ub__testbed_create(&tb, 2, &nc, &ec))
        return -1;
    struct ub__impair_cfg ic = {.seed = seed, .drop_ppm = loss_ppm};
    ub__loopnet_impair(tb.net, 0, 1, &ic);
    ic.seed = seed + 1;
    ub__loopnet_impair(tb.net, 1, 0, &ic);
    struct counts c = {0};
    ub__pds_set_upcalls(tb.nodes[0].eng.pds, &ups, &c);
    ub__pds_set_upcalls(tb.nodes[1].eng.pds, &ups, &c);
    uint32_t sent = 0;
    uint64_t end = 3600ull * UB_NS_PER_S;
    while (c.acked + c.failed < n && tb.now < end) {
        while (sent < n) {
            struct ub__pkt *p = ub__pkt_alloc(&tb.nodes[0].eng.pool);
            if (!p)
                break;
            struct ub__ses_std h = {.opcode = UB_SES_OP_SEND,
                                    .flags = UB_SES_F_SOM | UB_SES_F_EOM,
                                    .request_length = 1024};
            struct ub__wcur w;
            ub__wcur_init(&w, ub__pkt_put(p, UB_SES_STD_SIZE), UB_SES_STD_SIZE);
            ub__ses_std_encode(&h, &w);
            memset(ub__pkt_put(p, 1024), 0xab, 1024);
            struct ub__pds_tx tx = {.dst = &tb.nodes[1].addr,
                                    .mode = mode,
                                    .cookie = sent,
                                    .ses_kind = UB_PDS_NH_REQ_STD};
            if (ub__pds_send(tb.nodes[0].eng.pds, &tx, p, tb.now)) {
                ub__pkt_free(p);
                break;
            }
            sent++;
        }
        if (ub__testbed_run(&tb, tb.now + 100000, 10000000) && sent == n)
            break;
    }
    const struct ub__pds_stats *s = ub__pds_stats(tb.nodes[0].eng.pds);
    uint64_t tx = s->tx_pkts + s->retx_pkts;
    r->eff = tx ? (double)c.acked / (double)tx : 0;
    r->retx = (double)s->retx_pkts / n;
    r->ms = (double)tb.now / 1e6;
    r->failed = c.failed;
    ub__testbed_destroy(&tb);
    return 0;
}

int main(int argc, char **argv)
{
    uint32_t n = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 20000;
    uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
    static const uint32_t loss[] = {0, 1000, 10000, 30000, 100000, 300000};
    static const struct {
        const char *name;
        uint8_t mode;
        enum ub__pds_retx retx;
    } cols[] = {
        {"RUD selective+fast", UB_PDS_RUD, UB_PDS_RETX_SEL_FAST},
        {"RUD selective+timeout", UB_PDS_RUD, UB_PDS_RETX_SEL_TIMEOUT},
        {"RUD go-back-N+fast", UB_PDS_RUD, UB_PDS_RETX_GBN_FAST},
        {"RUD go-back-N+timeout", UB_PDS_RUD, UB_PDS_RETX_GBN_TIMEOUT},
        {"ROD go-back-N+fast", UB_PDS_ROD, UB_PDS_RETX_GBN_FAST},
        {"ROD go-back-N+timeout", UB_PDS_ROD, UB_PDS_RETX_GBN_TIMEOUT},
    };
    const unsigned ncol = sizeof(cols) / sizeof(cols[0]);
    printf("Goodput (useful / transmitted data packets) and completion time (simulated ms), "
           "%u packets of 1 KiB per cell, seed %llu.\n\n",
           n, (unsigned long long)seed);
    printf("| loss |");
    for (unsigned j = 0; j < ncol; j++)
        printf(" %s |", cols[j].name);
    printf("\n|---:|");
    for (unsigned j = 0; j < ncol; j++)
        printf("---:|");
    printf("\n");
    for (unsigned i = 0; i < sizeof(loss) / sizeof(loss[0]); i++) {
        printf("| %.1f %% |", loss[i] / 1e4);
        for (unsigned j = 0; j < ncol; j++) {
            struct result r;
            if (cell(cols[j].mode, cols[j].retx, loss[i], n, seed + i, &r)) {
                printf(" error |");
                continue;
            }
            printf(" %.3f (%.0f ms)%s |", r.eff, r.ms, r.failed ? " FAILED" : "");
        }
        printf("\n");
        fflush(stdout);
    }
    return 0;
}
