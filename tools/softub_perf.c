/*
 * softub-perf: latency and bandwidth of softub between two processes, in the manner of
 * perftest (ib_write_lat, ib_write_bw) and urma_perftest.
 *
 *   softub-perf TEST [options]              server: waits for one client
 *   softub-perf TEST [options] SERVER_IP    client: runs the test, prints the results
 *
 * TEST: read_lat write_lat send_lat atomic_lat read_bw write_bw send_bw atomic_bw.
 * The client decides every parameter and ships it to the server over the bootstrap
 * channel (TCP, --port); descriptors travel the same way. Latency lines are
 *   bytes iterations t_min t_max t_median t_avg t_stdev 99% 99.9% 99.99%   (microseconds;
 *   SEND and WRITE: half the round trip of a ping-pong, READ and atomics: the round trip)
 * and bandwidth lines
 *   bytes iterations BW_peak BW_average (MB/s = 10^6 B/s) MsgRate (Mpps).
 * docs/benchmarks.md has the details and the latest comparison with other transports.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/num.h"
#include "perf.h"

struct opts {
    struct perf_cfg cfg;
    const char *server;
    const char *bind;
    const char *local;
    int port;
    int timeout_ms;
    bool json;
    bool set_size, set_iters, set_tx, set_inline, set_mtu;
    uint64_t window; /* --window: latency statistics of the last N iterations too */
    bool pin;        /* -c: this side's CPUs (never sent to the peer) */
    cpu_set_t cpus;
};

static void usage(FILE *f)
{
    fprintf(f, "usage: softub-perf TEST [options] [SERVER_IP]\n"
               "TEST: read_lat write_lat send_lat atomic_lat read_bw write_bw send_bw atomic_bw\n"
               "Without SERVER_IP: server (waits for one client); with it: client.\n"
               "  -p, --port N          bootstrap TCP port (18515; server: 0 = any, printed)\n"
               "      --bind IP         server: listen on IP (0.0.0.0)\n"
               "      --local IP        client: its own address (the route to SERVER_IP)\n"
               "  -d, --device udp|shm  (udp)\n"
               "  -s, --size BYTES      bytes per operation (lat 8, bw 65536; atomics 8)\n"
               "  -a, --all             sweep sizes 2 B .. --max-size (8 MiB) by powers of 2\n"
               "      --max-size BYTES\n"
               "  -n, --iters N         iterations (lat 1000, bw 5000; at most 1 GiB per size)\n"
               "  -D, --duration SEC    run for SEC seconds instead\n"
               "      --warmup N        unmeasured latency iterations first (16)\n"
               "  -q, --jettys N        jettys (each its JFS and JFR; bw spreads over them) (1)\n"
               "  -t, --tx-depth N      requests in flight per jetty (lat 16, bw 128)\n"
               "  -r, --rx-depth N      receive buffers per jetty (256)\n"
               "  -l, --post-list N     requests per post call (1; at most 64)\n"
               "  -Q, --cq-mod N        bandwidth: a completion record every N requests, as\n"
               "                        perftest's (1: every one; at most 1024, and at most\n"
               "                        the requests a jetty keeps in flight)\n"
               "  -I, --inline BYTES    WRITE/SEND of at most this many bytes go inline (128)\n"
               "      --order no|ro|so  ordering class of every request (no)\n"
               "      --tm rud|rod      delivery mode of the jettys (rud)\n"
               "      --cc NAME         congestion control: none nscc dcqcn caqm rccc, or\n"
               "                        NAME+rccc (receiver credits too) (nscc)\n"
               "      --lb NAME         load balancer: single oblivious random reps bitmap (reps)\n"
               "      --paths N         udp paths (source ports) (1)\n"
               "      --burst BYTES     bytes on one path before the balancer chooses again\n"
               "                        (0: 65000, a GSO send; 1: every packet)\n"
               "      --cma-min BYTES   shm: single copy from this size on, or off (both sides;\n"
               "                        default: the threshold measured for the host)\n"
               "      --tagged          send tests: tagged sends into tag-matching receive\n"
               "                        queues (as ucx_perftest's tag_lat and tag_bw)\n"
               "      --mtu BYTES       largest datagram (udp: 9000 to a loopback peer, else\n"
               "                        the device's, 1452)\n"
               "      --udp-opts K=V&.. more udp device keys (docs/device-udp.md), e.g.\n"
               "                        ring=1: small datagrams from a packet ring (both sides)\n"
               "  -e, --event           automatic progress, sleep on completion events\n"
               "                        (default: manual progress, busy polling)\n"
               "      --spin            polling never yields the CPU (default: it does after\n"
               "                        64 empty polls in a row, and 30 us of them while\n"
               "                        nobody else wants the CPU)\n"
               "      --huge            buffers of 2 MiB or more on transparent huge pages\n"
               "                        (both sides; as ib_write_bw --use_hugepages)\n"
               "  -b, --bidir           bandwidth in both directions at once\n"
               "      --timeout MS      give up after MS without a packet (10000)\n"
               "      --json            one JSON object on stdout instead of the table\n"
               "      --window N        latency: the statistics of the last N iterations too\n"
               "                        (ucx_perftest's percentiles cover its last 2048)\n"
               "  -c, --cpu LIST        run on these CPUs (e.g. 1 or 0,2-3; this side only)\n");
}

/* A number with an optional K or M suffix (times 1024, 1024^2). */
static int parse_u64(const char *s, uint64_t *out)
{
    uint64_t v, mul = 1;
    const char *end;
    if (!ub__num_u64(s, 0, &v, &end))
        return -1;
    if (*end == 'k' || *end == 'K')
        mul = 1024, end++;
    else if (*end == 'm' || *end == 'M')
        mul = 1024 * 1024, end++;
    if (*end || v > UINT64_MAX / mul)
        return -1;
    *out = v * mul;
    return 0;
}

static int parse_u32(const char *s, uint32_t *out, uint32_t lo, uint32_t hi)
{
    uint64_t v = 0;
    if (parse_u64(s, &v) || v < lo || v > hi)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

/* A CPU list as taskset and ucx_perftest -c take it: numbers and ranges, comma-separated. */
static int parse_cpus(const char *s, cpu_set_t *set)
{
    CPU_ZERO(set);
    for (;;) {
        char *end;
        unsigned long a = strtoul(s, &end, 10), b = a;
        if (end == s || a >= CPU_SETSIZE)
            return -1;
        if (*end == '-') {
            s = end + 1;
            b = strtoul(s, &end, 10);
            if (end == s || b < a || b >= CPU_SETSIZE)
                return -1;
        }
        for (unsigned long i = a; i <= b; i++)
            CPU_SET(i, set);
        if (*end == '\0')
            return 0;
        if (*end != ',')
            return -1;
        s = end + 1;
    }
}

static int parse(int argc, char **argv, struct opts *o)
{
    enum {
        O_MAX = 256,
        O_WARM,
        O_ORDER,
        O_TM,
        O_CC,
        O_LB,
        O_PATHS,
        O_MTU,
        O_UDPO,
        O_TIMEOUT,
        O_JSON,
        O_BIND,
        O_LOCAL,
        O_SPIN,
        O_HUGE,
        O_WINDOW,
        O_BURST,
        O_TAGGED,
        O_CMA_MIN
    };
    static const struct option lo[] = {
        {"port", 1, 0, 'p'},          {"bind", 1, 0, O_BIND},       {"local", 1, 0, O_LOCAL},
        {"device", 1, 0, 'd'},        {"size", 1, 0, 's'},          {"all", 0, 0, 'a'},
        {"max-size", 1, 0, O_MAX},    {"iters", 1, 0, 'n'},         {"duration", 1, 0, 'D'},
        {"warmup", 1, 0, O_WARM},     {"jettys", 1, 0, 'q'},        {"tx-depth", 1, 0, 't'},
        {"rx-depth", 1, 0, 'r'},      {"post-list", 1, 0, 'l'},     {"cq-mod", 1, 0, 'Q'},
        {"inline", 1, 0, 'I'},        {"order", 1, 0, O_ORDER},     {"tm", 1, 0, O_TM},
        {"cc", 1, 0, O_CC},           {"lb", 1, 0, O_LB},           {"paths", 1, 0, O_PATHS},
        {"burst", 1, 0, O_BURST},     {"mtu", 1, 0, O_MTU},         {"udp-opts", 1, 0, O_UDPO},
        {"event", 0, 0, 'e'},         {"bidir", 0, 0, 'b'},         {"json", 0, 0, O_JSON},
        {"timeout", 1, 0, O_TIMEOUT}, {"help", 0, 0, 'h'},          {"spin", 0, 0, O_SPIN},
        {"huge", 0, 0, O_HUGE},       {"window", 1, 0, O_WINDOW},   {"cpu", 1, 0, 'c'},
        {"tagged", 0, 0, O_TAGGED},   {"cma-min", 1, 0, O_CMA_MIN}, {0, 0, 0, 0}};
    struct perf_cfg *c = &o->cfg;
    uint64_t v = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "p:d:s:an:D:q:t:r:l:Q:I:ebhc:", lo, NULL)) != -1) {
        int bad = 0;
        switch (ch) {
        case 'p':
            bad = parse_u64(optarg, &v) || v > 65535;
            o->port = (int)v;
            break;
        case O_BIND:
            o->bind = optarg;
            break;
        case O_LOCAL:
            o->local = optarg;
            break;
        case 'd':
            if (strcmp(optarg, "udp") == 0)
                c->dev = DEV_UDP;
            else if (strcmp(optarg, "shm") == 0)
                c->dev = DEV_SHM;
            else
                bad = 1;
            break;
        case 's':
            bad = parse_u64(optarg, &c->size) || !c->size || c->size > PERF_MAX_SIZE;
            o->set_size = true;
            break;
        case 'a':
            c->sweep = 1;
            break;
        case O_MAX:
            bad = parse_u32(optarg, &c->max_size, PERF_MIN_SWEEP, PERF_MAX_SIZE);
            break;
        case 'n':
            bad = parse_u64(optarg, &c->iters) || !c->iters;
            o->set_iters = true;
            break;
        case 'D':
            bad = parse_u32(optarg, &c->duration, 1, PERF_MAX_DURATION);
            break;
        case O_WARM:
            bad = parse_u32(optarg, &c->warmup, 0, PERF_MAX_WARMUP);
            break;
        case 'q':
            bad = parse_u32(optarg, &c->jettys, 1, PERF_MAX_JETTY);
            break;
        case 't':
            bad = parse_u32(optarg, &c->tx_depth, 1, PERF_MAX_DEPTH);
            o->set_tx = true;
            break;
        case 'r':
            bad = parse_u32(optarg, &c->rx_depth, 1, PERF_MAX_DEPTH);
            break;
        case 'Q':
            bad = parse_u32(optarg, &c->cq_mod, 1, PERF_MAX_CQ_MOD);
            break;
        case 'l':
            bad = parse_u32(optarg, &c->post_list, 1, PERF_MAX_POST_LIST);
            break;
        case 'I':
            bad = parse_u32(optarg, &c->inline_sz, 0, PERF_MAX_INLINE);
            o->set_inline = true;
            break;
        case O_ORDER:
            c->order = strcmp(optarg, "no") == 0 ? 0 : strcmp(optarg, "ro") == 0 ? 1 : 2;
            bad = c->order == 2 && strcmp(optarg, "so") != 0;
            break;
        case O_TM:
            c->tm = strcmp(optarg, "rod") == 0;
            bad = !c->tm && strcmp(optarg, "rud") != 0;
            break;
        case O_CC:
            bad = strlen(optarg) >= sizeof(c->cc);
            if (!bad)
                strcpy(c->cc, optarg);
            break;
        case O_LB:
            bad = strlen(optarg) >= sizeof(c->lb);
            if (!bad)
                strcpy(c->lb, optarg);
            break;
        case O_PATHS:
            bad = parse_u32(optarg, &c->paths, 1, PERF_MAX_PATHS);
            break;
        case O_BURST:
            bad = parse_u32(optarg, &c->burst, 0, UINT32_MAX);
            break;
        case O_MTU:
            bad = parse_u32(optarg, &c->mtu, PERF_MIN_MTU, PERF_MAX_MTU);
            o->set_mtu = true;
            break;
        case O_UDPO:
            bad = strlen(optarg) >= sizeof(c->udp_opts);
            if (!bad)
                strcpy(c->udp_opts, optarg);
            break;
        case 'e':
            c->event = 1;
            break;
        case 'b':
            c->bidir = 1;
            break;
        case O_SPIN:
            c->spin = 1;
            break;
        case O_HUGE:
            c->huge = 1;
            break;
        case O_CMA_MIN:
            if (strcmp(optarg, "off") == 0) {
                c->cma_min = UB_CMA_OFF;
                break;
            }
            bad = parse_u64(optarg, &v) || v == 0 || v >= UB_CMA_OFF;
            c->cma_min = (uint32_t)v;
            break;
        case O_TAGGED:
            c->tagged = 1;
            break;
        case O_JSON:
            o->json = true;
            break;
        case O_WINDOW:
            bad = parse_u64(optarg, &o->window) || !o->window;
            break;
        case 'c':
            bad = parse_cpus(optarg, &o->cpus);
            o->pin = !bad;
            break;
        case O_TIMEOUT:
            bad = parse_u64(optarg, &v) || !v || v > 3600000;
            o->timeout_ms = (int)v;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return -1;
        }
        if (bad) {
            /* -x, or a long option without a letter by its name. */
            char name[32];
            snprintf(name, sizeof(name), "-%c", ch < 256 ? ch : '-');
            for (const struct option *x = lo; ch >= 256 && x->name; x++)
                if (x->val == ch)
                    snprintf(name, sizeof(name), "--%s", x->name);
            fprintf(stderr, "softub-perf: bad value for option %s: %s\n", name,
                    optarg ? optarg : "");
            return -1;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return -1;
    }
    int t = perf_test_parse(argv[optind++]);
    if (t < 0) {
        fprintf(stderr, "softub-perf: unknown test %s\n", argv[optind - 1]);
        return -1;
    }
    c->test = (uint32_t)t;
    if (optind < argc)
        o->server = argv[optind++];
    if (optind < argc) {
        usage(stderr);
        return -1;
    }
    if (o->server && !o->port) {
        fprintf(stderr, "softub-perf: a client needs the server's port (-p)\n");
        return -1;
    }
    bool lat = perf_is_lat((enum perf_test)t);
    if (!o->set_size)
        c->size = lat ? 8 : 65536;
    if (t == T_ATOMIC_LAT || t == T_ATOMIC_BW) {
        c->size = 8;
        c->sweep = 0;
    }
    if (!o->set_tx)
        c->tx_depth = lat ? 16 : 128;
    if (!o->set_inline)
        c->inline_sz = 128;
    if (c->bidir && lat) {
        fprintf(stderr, "softub-perf: -b is for bandwidth tests\n");
        return -1;
    }
    if (c->tagged && t != T_SEND_LAT && t != T_SEND_BW) {
        fprintf(stderr, "softub-perf: --tagged is for send_lat and send_bw\n");
        return -1;
    }
    return 0;
}

/* Iterations for one size: as asked, or the default capped at 1 GiB moved. */
static uint64_t iters_for(const struct opts *o, uint64_t size)
{
    const struct perf_cfg *c = &o->cfg;
    if (o->set_iters)
        return c->iters;
    uint64_t n = perf_is_lat((enum perf_test)c->test) ? 1000 : 5000;
    uint64_t cap = (1ull << 30) / size;
    if (n > cap)
        n = cap < 64 ? 64 : cap;
    return n;
}

/* ---- output ----------------------------------------------------------------------------- */

static void banner(const struct opts *o, const char *peer)
{
    const struct perf_cfg *c = &o->cfg;
    const char *rule = "-------------------------------------------------------------------"
                       "--------------------------------";
    printf("%s\n", rule);
    printf(" softub-perf %s  device %s  peer %s  %s progress\n", perf_test_name(c->test),
           c->dev == DEV_SHM ? "shm" : "udp", peer,
           c->event  ? "automatic (events)"
           : c->spin ? "polling (spin)"
                     : "polling");
    printf(" jettys %u  tx depth %u  rx depth %u  post list %u  cq mod %u  inline %u  order %s"
           "  tm %s\n",
           c->jettys, c->tx_depth, c->rx_depth, c->post_list, c->cq_mod, c->inline_sz,
           c->order == 1   ? "ro"
           : c->order == 2 ? "so"
                           : "no",
           c->tm ? "rod" : "rud");
    if (c->tagged)
        printf(" tagged sends into tag-matching receive queues (--tagged)\n");
    if (c->huge)
        printf(" buffers on transparent huge pages (--huge)\n");
    if (c->cma_min == UB_CMA_OFF)
        printf(" single copy off (--cma-min off)\n");
    else if (c->cma_min)
        printf(" single copy from %u bytes (--cma-min)\n", c->cma_min);
    if (c->dev == DEV_UDP)
        printf(" paths %u  burst %u  cc %s  lb %s  mtu %u%s%s\n", c->paths ? c->paths : 1, c->burst,
               c->cc[0] ? c->cc : "default", c->lb[0] ? c->lb : "default", c->mtu,
               c->bidir ? "  bidirectional" : "", c->mtu ? "" : " (device's)");
    if (perf_is_lat((enum perf_test)c->test)) {
        printf(" latency in microseconds, %s\n", perf_is_half_rtt((enum perf_test)c->test)
                                                     ? "half round trip (ping-pong)"
                                                     : "full round trip");
        printf("%s\n", rule);
        printf(" %-10s %-11s %10s %10s %10s %10s %10s %10s %10s %10s\n", "#bytes", "#iterations",
               "t_min", "t_max", "t_median", "t_avg", "t_stdev", "99%", "99.9%", "99.99%");
    } else {
        printf("%s\n", rule);
        printf(" %-10s %-11s %14s %17s %14s\n", "#bytes", "#iterations", "BW peak[MB/s]",
               "BW average[MB/s]", "MsgRate[Mpps]");
    }
    fflush(stdout);
}

struct json {
    char *buf;
    size_t len, cap;
};

static void jappend(struct json *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void jappend(struct json *j, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(j->buf ? j->buf + j->len : NULL, j->buf ? j->cap - j->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if (j->buf && (size_t)n < j->cap - j->len) {
            j->len += (size_t)n;
            return;
        }
        size_t ncap = (j->cap + (size_t)n + 1) * 2;
        char *g = realloc(j->buf, ncap);
        if (!g)
            return;
        j->buf = g;
        j->cap = ncap;
    }
}

/* ---- the two roles ---------------------------------------------------------------------- */

static int recv_msg(struct perf_ep *e, void *buf, size_t cap, uint32_t want)
{
    int m = ub_bootstrap_recv(e->b, buf, cap, e->timeout_ms);
    if (m < 4) {
        fprintf(stderr, "softub-perf: control channel: %s\n",
                m < 0 ? ub_strerror(m) : "short message");
        return -1;
    }
    uint32_t type;
    memcpy(&type, buf, 4);
    if (type == M_ERROR) {
        fprintf(stderr, "softub-perf: peer: %.*s\n", m - 4, (const char *)buf + 4);
        return -1;
    }
    if (want && type != want) {
        fprintf(stderr, "softub-perf: unexpected control message %u\n", type);
        return -1;
    }
    return m;
}

/* Exchanges descriptors: the server sends first. */
static int exchange(struct perf_ep *e)
{
    static uint8_t msg[4 + (PERF_MAX_JETTY + 1) * 64];
    uint32_t type = M_DESC;
    memcpy(msg, &type, 4);
    int n = perf_export(e, msg + 4, sizeof(msg) - 4);
    if (n < 0)
        return -1;
    uint8_t in[sizeof(msg)];
    int m;
    if (e->server) {
        if (ub_bootstrap_send(e->b, msg, (size_t)n + 4, e->timeout_ms) ||
            (m = recv_msg(e, in, sizeof(in), M_DESC)) < 0)
            return -1;
    } else {
        if ((m = recv_msg(e, in, sizeof(in), M_DESC)) < 0 ||
            ub_bootstrap_send(e->b, msg, (size_t)n + 4, e->timeout_ms))
            return -1;
    }
    return perf_connect_peer(e, in + 4, (size_t)m - 4) ? -1 : 0;
}

static void send_error(struct perf_ep *e, const char *text)
{
    uint8_t msg[256];
    uint32_t type = M_ERROR;
    memcpy(msg, &type, 4);
    size_t l = strlen(text) < sizeof(msg) - 4 ? strlen(text) : sizeof(msg) - 4;
    memcpy(msg + 4, text, l);
    ub_bootstrap_send(e->b, msg, l + 4, 1000);
}

/* What the transport had to repair on this side: a figure below the peak usually has
 * retransmissions or socket-buffer drops behind it. */
static struct ub_context_stats transport_stats(struct perf_ep *e)
{
    struct ub_context_stats st;
    if (ub_context_stats(e->ctx, &st) != 0)
        memset(&st, 0, sizeof(st));
    return st;
}

static void print_transport(const struct ub_context_stats *st)
{
    printf(" # packets sent %" PRIu64 ", received %" PRIu64 ", retransmitted %" PRIu64
           ", dropped by the receive socket %" PRIu64 "\n",
           st->tx_pkts, st->rx_pkts, st->retransmits, st->dev_rx_drops);
    printf(" # retransmitted after RTOs %" PRIu64 " (RTOs %" PRIu64 ", %" PRIu64
           " of them spurious), fast %" PRIu64 ", on NACKs %" PRIu64 ", as probes %" PRIu64
           "; CE marks received %" PRIu64 ", echoed to us %" PRIu64 "\n",
           st->retx_rto, st->rto_fired, st->rto_undone, st->retx_fast, st->retx_nack,
           st->retx_probe, st->rx_ce, st->acks_ecn_rx);
    if (st->udp_tx_calls || st->udp_rx_calls)
        printf(" # udp system calls: sends %" PRIu64 " (GSO runs %" PRIu64 " of %" PRIu64
               " packets), receives %" PRIu64 " (GRO runs %" PRIu64 " of %" PRIu64
               " packets); ACKs sent %" PRIu64 "\n",
               st->udp_tx_calls, st->udp_gso_runs, st->udp_gso_pkts, st->udp_rx_calls,
               st->udp_gro_runs, st->udp_gro_pkts, st->acks_tx);
    if (st->cma_reqs || st->cma_done)
        printf(" # single copies (from %" PRIu64 " bytes): asked for %" PRIu64
               " (sent again as packets %" PRIu64 "), done %" PRIu64 " (%" PRIu64
               " bytes), refused %" PRIu64 ", failed %" PRIu64
               ", tagged with no buffer yet %" PRIu64 "\n",
               st->cma_min, st->cma_reqs, st->cma_fallbacks, st->cma_done, st->cma_bytes,
               st->cma_refused, st->cma_errors, st->cma_unexpected);
    if (st->tx_link || st->rx_link)
        printf(" # shm without transport contexts: packets sent %" PRIu64 ", received %" PRIu64
               ", stale dropped %" PRIu64 "\n",
               st->tx_link, st->rx_link, st->rx_link_stale);
}

static int server(struct opts *o)
{
    struct perf_ep e;
    memset(&e, 0, sizeof(e));
    e.server = true;
    e.timeout_ms = o->timeout_ms;
    char uri[128];
    snprintf(uri, sizeof(uri), "tcp://%s:%d", o->bind ? o->bind : "0.0.0.0", o->port);
    int rc = ub_bootstrap_listen(uri, &e.b);
    if (rc) {
        fprintf(stderr, "softub-perf: listen on %s: %s\n", uri, ub_strerror(rc));
        return 1;
    }
    /* With -p 0 the kernel picks the port: say which, so a script can start the client. */
    if (ub_bootstrap_uri(e.b, uri, sizeof(uri)) <= 0)
        snprintf(uri, sizeof(uri), "?");
    fprintf(stderr, "softub-perf: %s server waiting on %s\n", perf_test_name(o->cfg.test), uri);
    /* A server waits for its client longer than for a packet. */
    if ((rc = ub_bootstrap_accept(e.b, o->timeout_ms * 12)) != 0) {
        fprintf(stderr, "softub-perf: no client: %s\n", ub_strerror(rc));
        perf_teardown(&e);
        return 1;
    }
    uint8_t msg[4 + sizeof(struct perf_cfg)];
    int m = recv_msg(&e, msg, sizeof(msg), M_CFG);
    int ret = 1;
    if (m != (int)sizeof(msg)) {
        fprintf(stderr, "softub-perf: bad configuration from the client\n");
        goto out;
    }
    memcpy(&e.cfg, msg + 4, sizeof(e.cfg));
    if (e.cfg.magic != PERF_MAGIC || e.cfg.version != PERF_VERSION) {
        send_error(&e, "version mismatch");
        goto out;
    }
    if (e.cfg.test != o->cfg.test) {
        char t[128];
        snprintf(t, sizeof(t), "the server runs %s, not %s", perf_test_name(o->cfg.test),
                 perf_test_name(e.cfg.test));
        send_error(&e, t);
        fprintf(stderr, "softub-perf: %s\n", t);
        goto out;
    }
    const char *bad = perf_cfg_bad(&e.cfg); /* whoever connected: nothing unchecked is used */
    if (bad) {
        char t[64];
        snprintf(t, sizeof(t), "bad configuration (%s)", bad);
        send_error(&e, t);
        fprintf(stderr, "softub-perf: %s from the client\n", t);
        goto out;
    }
    snprintf(e.local_ip, sizeof(e.local_ip), "%s", e.cfg.server_ip);
    if (perf_setup(&e)) {
        send_error(&e, "server setup failed");
        goto out;
    }
    if (exchange(&e))
        goto out;
    for (;;) {
        struct perf_run r;
        m = recv_msg(&e, &r, sizeof(r), 0);
        if (m < 0)
            goto out;
        if (r.type == M_QUIT) {
            struct ub_context_stats st = transport_stats(&e);
            print_transport(&st);
            break;
        }
        if (r.type != M_RUN || m != (int)sizeof(r) || !perf_run_fits(&e.cfg, &r)) {
            fprintf(stderr, "softub-perf: bad run request from the client\n");
            goto out;
        }
        if (perf_server_run(&e, &r))
            goto out;
    }
    ret = 0;
out:
    perf_teardown(&e);
    return ret;
}

/* The local address the kernel would use toward ip (a connected UDP socket's name). */
static int route_src(const char *ip, char *out, size_t len)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    socklen_t sl;
    int fam;
    if (strchr(ip, ':')) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(9);
        if (inet_pton(AF_INET6, ip, &s6->sin6_addr) != 1)
            return -1;
        sl = sizeof(*s6);
        fam = AF_INET6;
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        s4->sin_family = AF_INET;
        s4->sin_port = htons(9);
        if (inet_pton(AF_INET, ip, &s4->sin_addr) != 1)
            return -1;
        sl = sizeof(*s4);
        fam = AF_INET;
    }
    int fd = socket(fam, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_storage me;
    socklen_t ml = sizeof(me);
    int rc = -1;
    if (connect(fd, (struct sockaddr *)&ss, sl) == 0 &&
        getsockname(fd, (struct sockaddr *)&me, &ml) == 0) {
        const void *a = fam == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)&me)->sin6_addr
                                        : (const void *)&((struct sockaddr_in *)&me)->sin_addr;
        rc = inet_ntop(fam, a, out, (socklen_t)len) ? 0 : -1;
    }
    close(fd);
    return rc;
}

/* True for 127.0.0.0/8 and ::1 (and ::ffff:127.x): the peer is reached over the loopback
 * device, whose MTU (65536) is not a real network's. */
static bool is_loopback(const char *ip)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, ip, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, ip, &a6) != 1)
        return false;
    if (IN6_IS_ADDR_LOOPBACK(&a6))
        return true;
    return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
}

static int client(struct opts *o)
{
    struct perf_ep e;
    memset(&e, 0, sizeof(e));
    e.timeout_ms = o->timeout_ms;
    /* The device's default MTU (1452) is a real network's; over loopback larger datagrams
     * are far cheaper (docs/benchmarks.md). --mtu overrides either way. */
    if (o->cfg.dev == DEV_UDP && !o->set_mtu && is_loopback(o->server))
        o->cfg.mtu = PERF_LOOPBACK_MTU;
    e.cfg = o->cfg;
    struct perf_cfg *c = &e.cfg;
    snprintf(c->server_ip, sizeof(c->server_ip), "%s", o->server);
    if (o->local)
        snprintf(e.local_ip, sizeof(e.local_ip), "%s", o->local);
    else if (route_src(o->server, e.local_ip, sizeof(e.local_ip))) {
        fprintf(stderr, "softub-perf: %s is not an IP address (or has no route)\n", o->server);
        return 1;
    }
    char uri[128];
    snprintf(uri, sizeof(uri), strchr(o->server, ':') ? "tcp://[%s]:%d" : "tcp://%s:%d", o->server,
             o->port);
    int rc = ub_bootstrap_connect(uri, o->timeout_ms, &e.b);
    if (rc) {
        fprintf(stderr, "softub-perf: connect to %s: %s\n", uri, ub_strerror(rc));
        return 1;
    }
    uint8_t msg[4 + sizeof(struct perf_cfg)];
    uint32_t type = M_CFG;
    memcpy(msg, &type, 4);
    memcpy(msg + 4, c, sizeof(*c));
    int ret = 1;
    uint64_t *samples = NULL;
    struct json js = {0};
    if (ub_bootstrap_send(e.b, msg, sizeof(msg), e.timeout_ms) || perf_setup(&e) || exchange(&e))
        goto out;
    enum perf_test t = (enum perf_test)c->test;
    bool lat = perf_is_lat(t);
    if (!o->json)
        banner(o, o->server);
    else
        jappend(&js,
                "{\"tool\":\"softub-perf\",\"test\":\"%s\",\"device\":\"%s\",\"progress\":\"%s\","
                "\"jettys\":%u,\"tx_depth\":%u,\"rx_depth\":%u,\"post_list\":%u,\"cq_mod\":%u,"
                "\"inline\":%u,"
                "\"paths\":%u,\"burst\":%u,\"bidir\":%s,\"huge\":%s,\"tagged\":%s,%s"
                "\"results\":[",
                perf_test_name(t), c->dev == DEV_SHM ? "shm" : "udp",
                c->event  ? "event"
                : c->spin ? "spin"
                          : "polling",
                c->jettys, c->tx_depth, c->rx_depth, c->post_list, c->cq_mod, c->inline_sz,
                c->paths ? c->paths : 1, c->burst, c->bidir ? "true" : "false",
                c->huge ? "true" : "false", c->tagged ? "true" : "false",
                lat ? (perf_is_half_rtt(t) ? "\"unit\":\"us\",\"latency\":\"half_rtt\","
                                           : "\"unit\":\"us\",\"latency\":\"rtt\",")
                    : "\"unit\":\"MB/s\",");
    uint64_t lo = c->sweep ? PERF_MIN_SWEEP : c->size, hi = c->sweep ? c->max_size : c->size;
    int first = 1;
    unsigned parted = 0; /* runs before which the client left the server's CPU */
    for (uint64_t size = lo; size <= hi; size *= 2) {
        struct perf_run r = {.type = M_RUN,
                             .size = size,
                             .iters = iters_for(o, size),
                             .duration_ms = c->duration * 1000u};
        memset(e.buf, 0, e.half);
        int m;
        if (ub_bootstrap_send(e.b, &r, sizeof(r), e.timeout_ms) ||
            (m = recv_msg(&e, msg, sizeof(msg), M_READY)) < 0)
            goto out;
        uint32_t srv_cpu;
        if (m >= 8) {
            memcpy(&srv_cpu, msg + 4, 4);
            parted += perf_part(srv_cpu);
        }
        struct perf_result mine, peer;
        if (lat) {
            size_t n = 0;
            free(samples);
            samples = NULL;
            if (perf_client_lat(&e, &r, &samples, &n) || perf_client_done(&e, &peer))
                goto out;
            double scale = perf_is_half_rtt(t) ? 0.5 : 1.0;
            /* The window's statistics first: perf_lat_stats sorts what it is given. */
            struct perf_lat l, wl = {0};
            size_t wn = o->window && o->window < n ? (size_t)o->window : n;
            if (o->window)
                perf_lat_stats(samples + (n - wn), wn, scale, &wl);
            perf_lat_stats(samples, n, scale, &l);
            if (o->json) {
                jappend(&js,
                        "%s{\"bytes\":%" PRIu64 ",\"iterations\":%zu,\"t_min\":%.3f,"
                        "\"t_max\":%.3f,\"t_median\":%.3f,\"t_avg\":%.3f,\"t_stdev\":%.3f,"
                        "\"p99\":%.3f,\"p99_9\":%.3f,\"p99_99\":%.3f",
                        first ? "" : ",", size, n, l.min, l.max, l.median, l.avg, l.stdev, l.p99,
                        l.p999, l.p9999);
                if (o->window)
                    jappend(&js,
                            ",\"window\":{\"iterations\":%zu,\"t_median\":%.3f,\"p99\":%.3f,"
                            "\"p99_9\":%.3f}",
                            wn, wl.median, wl.p99, wl.p999);
                jappend(&js, "}");
            } else {
                printf(" %-10" PRIu64 " %-11zu %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f "
                       "%10.2f\n",
                       size, n, l.min, l.max, l.median, l.avg, l.stdev, l.p99, l.p999, l.p9999);
                if (o->window)
                    printf(" # the last %zu iterations: t_median %.2f, 99%% %.2f, 99.9%% %.2f\n",
                           wn, wl.median, wl.p99, wl.p999);
            }
        } else {
            if (perf_client_bw(&e, &r, &mine, &peer))
                goto out;
            double avg = mine.ns ? (double)mine.bytes * 1e3 / (double)mine.ns : 0;
            double rate = mine.ns ? (double)mine.ops * 1e3 / (double)mine.ns : 0;
            double peak = mine.peak_mbs;
            uint64_t ops = mine.ops;
            if (c->bidir && peer.ns) {
                avg += (double)peer.bytes * 1e3 / (double)peer.ns;
                rate += (double)peer.ops * 1e3 / (double)peer.ns;
                peak += peer.peak_mbs;
                ops += peer.ops;
            }
            uint64_t bytes = t == T_ATOMIC_BW ? 8 : size;
            if (o->json)
                jappend(&js,
                        "%s{\"bytes\":%" PRIu64 ",\"iterations\":%" PRIu64 ",\"bw_peak\":%.2f,"
                        "\"bw_avg\":%.2f,\"msg_rate_mpps\":%.4f}",
                        first ? "" : ",", bytes, ops, peak, avg, rate);
            else
                printf(" %-10" PRIu64 " %-11" PRIu64 " %14.2f %17.2f %14.4f\n", bytes, ops, peak,
                       avg, rate);
        }
        first = 0;
        fflush(stdout);
    }
    struct perf_run q = {.type = M_QUIT};
    ub_bootstrap_send(e.b, &q, sizeof(q), e.timeout_ms);
    struct ub_context_stats st = transport_stats(&e);
    if (o->json) {
        jappend(&js,
                "],\"cpu_parted\":%u,\"transport\":{\"tx_pkts\":%" PRIu64 ",\"rx_pkts\":%" PRIu64
                ",\"retransmits\":%" PRIu64 ",\"rx_drops\":%" PRIu64 ",\"retx_rto\":%" PRIu64
                ",\"retx_fast\":%" PRIu64 ",\"retx_nack\":%" PRIu64 ",\"retx_probe\":%" PRIu64
                ",\"rto_fired\":%" PRIu64 ",\"rto_undone\":%" PRIu64 ",\"rx_ce\":%" PRIu64
                ",\"acks_ecn_rx\":%" PRIu64 ",\"tx_link\":%" PRIu64 ",\"rx_link\":%" PRIu64
                ",\"udp_tx_calls\":%" PRIu64 ",\"udp_gso_runs\":%" PRIu64
                ",\"udp_gso_pkts\":%" PRIu64 ",\"udp_rx_calls\":%" PRIu64
                ",\"udp_gro_runs\":%" PRIu64 ",\"udp_gro_pkts\":%" PRIu64 ",\"acks_tx\":%" PRIu64
                ",\"cma_min\":%" PRIu64 ",\"cma_reqs\":%" PRIu64 ",\"cma_fallbacks\":%" PRIu64
                ",\"cma_done\":%" PRIu64 ",\"cma_bytes\":%" PRIu64 "}}\n",
                parted, st.tx_pkts, st.rx_pkts, st.retransmits, st.dev_rx_drops, st.retx_rto,
                st.retx_fast, st.retx_nack, st.retx_probe, st.rto_fired, st.rto_undone, st.rx_ce,
                st.acks_ecn_rx, st.tx_link, st.rx_link, st.udp_tx_calls, st.udp_gso_runs,
                st.udp_gso_pkts, st.udp_rx_calls, st.udp_gro_runs, st.udp_gro_pkts, st.acks_tx,
                st.cma_min, st.cma_reqs, st.cma_fallbacks, st.cma_done, st.cma_bytes);
        if (js.buf)
            fputs(js.buf, stdout);
    } else {
        print_transport(&st);
        if (parted)
            printf(" # the client moved off the server's CPU before %u of the runs (the two "
                   "shared one)\n",
                   parted);
        printf("-------------------------------------------------------------------"
               "--------------------------------\n");
    }
    ret = 0;
out:
    free(samples);
    free(js.buf);
    perf_teardown(&e);
    return ret;
}

int main(int argc, char **argv)
{
    struct opts o;
    memset(&o, 0, sizeof(o));
    o.port = 18515;
    o.timeout_ms = 10000;
    perf_cfg_defaults(&o.cfg);
    if (parse(argc, argv, &o))
        return 2;
    if (o.pin && sched_setaffinity(0, sizeof(o.cpus), &o.cpus)) {
        perror("softub-perf: -c");
        return 2;
    }
    return o.server ? client(&o) : server(&o);
}
