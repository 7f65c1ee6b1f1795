/*
 * netns_xfer: a reliable (PDS RUD) transfer between two engines over the multipath UDP
 * device, each in its own network namespace of the test bed (scripts/netns-testbed.sh).
 *
 * One process, three threads: the receiver thread enters namespace B (setns), the sender
 * thread namespace A, each opens its udp device there and drives its engine with
 * ub__drive_once and epoll_wait; the main thread stays where it started, watches the
 * progress and, at a chosen point, runs a command (taking a path down, say).
 *
 * Every packet carries (magic, id, length, checksum) and a payload derived from its id, so
 * the receiver checks that each arrived exactly once and intact; the sender checks that each
 * was acknowledged exactly once and none failed, and that every EV carried traffic. It
 * prints key=value lines (per-EV counters, PDS retransmissions, ack latencies, recovery
 * after the failure) for the runner scripts.
 *
 * --cc NAME and --lb NAME choose PDS's congestion control and load balancer (its defaults
 * otherwise); tests/netns/cc_ratelimit.sh compares load balancers with one path rate-limited,
 * where a balancer may legitimately steer an EV empty: --allow-idle-evs drops that check.
 *
 * Exit: 0 pass, 1 fail, 2 usage, 77 skip (namespaces cannot be entered: no privilege).
 * Every loop is bounded in time (--timeout) and stops by itself.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <softub/errors.h>
#include "core/clock.h"
#include "core/rand.h"
#include "dev/udp.h"
#include "engine/driver.h"
#include "engine/engine.h"
#include "wire/cursor.h"
#include "wire/pds.h"
#include "wire/ses.h"

extern char **environ;

#define X_MAGIC  0x4e535846u /* "NSXF" */
#define X_HDR    16u         /* magic, id, len, csum */
#define X_MTU    1452u
#define X_MAXPAY 1200u
#define X_POOL   8192u
#define X_OFFER  256u /* packets handed to PDS and not yet resolved: its window, no queueing */

struct opts {
    const char *ns_a, *ns_b, *spec_a, *spec_b;
    uint32_t packets, paths, payload;
    uint32_t fail_at_pct; /* run fail_cmd once this share of packets is acknowledged */
    const char *fail_cmd;
    uint32_t timeout_s;
    const char *cc, *lb; /* PDS congestion control and load balancing (NULL: defaults) */
    bool allow_idle_evs; /* an EV that sent nothing is not a failure */
};

struct xfer {
    struct opts o;
    uint64_t t0, deadline;
    /* Sender side (written by the sender thread only). */
    uint64_t *first_tx; /* handed to PDS */
    uint64_t *ack_at;
    uint8_t *acked, *failed;
    uint64_t nacked, nfailed, ack_dup, fail_after_ack;
    struct ub__pds_stats tx_pds, tx_pds_at_fail;
    struct ub__udp_stats tx_udp;
    struct ub__engine_stats tx_eng;
    struct ub__drive_stats tx_drive;
    uint64_t fail_seen_ns; /* when the sender noticed the failure had been applied */
    /* Receiver side (written by the receiver thread only). */
    uint8_t *delivered;
    uint64_t ndeliv, corrupt, foreign, dup;
    struct ub__pds_stats rx_pds;
    struct ub__udp_stats rx_udp;
    struct ub__drive_stats rx_drive;
    /* Shared. */
    _Atomic uint64_t progress; /* packets acknowledged so far */
    _Atomic int rx_ready, stop, fail_state, tx_done;
    _Atomic int thread_err;        /* first setup error: 77 skip, 1 fail */
    uint64_t fail_start, fail_end; /* main thread: around the command */
    int fail_rc;
};

static uint64_t now_ns(void)
{
    return ub__clock_monotonic_ns(NULL);
}

static uint32_t fnv(const uint8_t *b, uint32_t n)
{
    uint32_t x = 2166136261u;
    for (uint32_t i = 0; i < n; i++)
        x = (x ^ b[i]) * 16777619u;
    return x;
}

static void put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Payload length of packet id: the configured size, or 64..X_MAXPAY when it is 0. */
static uint32_t pay_len(const struct xfer *x, uint32_t id)
{
    if (x->o.payload)
        return x->o.payload;
    return 64 + (uint32_t)(ub__mix64(id) % (X_MAXPAY - 64 + 1));
}

static void fill(uint8_t *b, uint32_t id, uint32_t len)
{
    uint64_t m = ub__mix64((uint64_t)id + 1);
    for (uint32_t i = 0; i < len; i++)
        b[i] = (uint8_t)(m >> (8 * (i % 8))) ^ (uint8_t)(i * 7);
}

static void fail_thread(struct xfer *x, int code, const char *what, int rc)
{
    fprintf(stderr, "netns_xfer: %s: %s\n", what, rc ? ub_strerror(rc) : strerror(errno));
    int zero = 0;
    atomic_compare_exchange_strong(&x->thread_err, &zero, code);
    atomic_store(&x->stop, 1);
}

/* Moves the calling thread into the named network namespace. */
static int enter_ns(struct xfer *x, const char *name)
{
    char path[256];
    snprintf(path, sizeof(path), "/run/netns/%s", name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(path, sizeof(path), "/var/run/netns/%s", name);
        fd = open(path, O_RDONLY | O_CLOEXEC);
    }
    if (fd < 0) {
        fail_thread(x, 1, path, 0);
        return -1;
    }
    int rc = setns(fd, CLONE_NEWNET);
    int err = errno;
    close(fd);
    if (rc) {
        errno = err;
        fail_thread(x, err == EPERM ? 77 : 1, "setns", 0);
        return -1;
    }
    return 0;
}

static int open_side(struct xfer *x, const char *spec, struct ub__dev **dev, struct ub__engine *e,
                     uint64_t seed)
{
    struct ub__udp_cfg uc;
    int rc = ub__udp_cfg_parse(spec, &uc);
    if (rc) {
        fail_thread(x, 1, spec, rc);
        return -1;
    }
    uc.num_paths = x->o.paths;
    uc.mtu = X_MTU;
    rc = ub__udp_open(&uc, dev);
    if (rc) {
        fail_thread(x, 1, "ub__udp_open", rc);
        return -1;
    }
    struct ub__engine_cfg ec = {.seed = seed,
                                .mtu = X_MTU,
                                .num_paths = x->o.paths,
                                .pool_bufs = X_POOL,
                                .pds = {.cc_algo = x->o.cc, .lb_algo = x->o.lb}};
    rc = ub__engine_init(e, &ec);
    if (rc) {
        ub__dev_close(*dev);
        fail_thread(x, 1, "ub__engine_init", rc);
        return -1;
    }
    return 0;
}

/* Sleeps on the device until it is readable or the engine's next deadline (at most 5 ms). */
static void wait_dev(int ep, const struct ub__engine *e, uint64_t now)
{
    if (ub__engine_pending(e))
        return;
    uint64_t dl = ub__engine_next_deadline(e);
    int ms = 5;
    if (dl <= now)
        ms = 0;
    else if (dl - now < 5000000u)
        ms = (int)((dl - now + 999999u) / 1000000u);
    struct epoll_event ev;
    (void)epoll_wait(ep, &ev, 1, ms);
}

static int make_epoll(struct ub__dev *dev)
{
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        return -1;
    struct epoll_event ev = {.events = EPOLLIN};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, ub__dev_fd(dev), &ev)) {
        close(ep);
        return -1;
    }
    return ep;
}

/* ---- receiver ------------------------------------------------------------------------- */

static void on_deliver(void *arg, const struct ub__pds_rx *rx, uint64_t now)
{
    (void)now;
    struct xfer *x = arg;
    x->ndeliv++;
    const uint8_t *b = rx->payload;
    uint32_t n = rx->payload_len;
    if (n < X_HDR || get32(b) != X_MAGIC) {
        x->corrupt++;
        return;
    }
    uint32_t id = get32(b + 4), len = get32(b + 8);
    if (id >= x->o.packets) {
        x->foreign++;
        return;
    }
    if (len != pay_len(x, id) || n != X_HDR + len || get32(b + 12) != fnv(b + X_HDR, len)) {
        x->corrupt++;
        return;
    }
    uint8_t want[X_MAXPAY > 4096 ? X_MAXPAY : 4096];
    fill(want, id, len);
    if (memcmp(want, b + X_HDR, len) != 0) {
        x->corrupt++;
        return;
    }
    if (x->delivered[id]) {
        x->dup++;
        return;
    }
    x->delivered[id] = 1;
}

static void rx_acked(void *arg, uint64_t cookie, uint64_t now)
{
    (void)arg, (void)cookie, (void)now;
}

static void rx_failed(void *arg, uint64_t cookie, int err, uint64_t now)
{
    (void)arg, (void)cookie, (void)err, (void)now;
}

static void *receiver(void *arg)
{
    struct xfer *x = arg;
    if (enter_ns(x, x->o.ns_b))
        return NULL;
    struct ub__dev *dev;
    struct ub__engine *e = calloc(1, sizeof(*e));
    if (!e || open_side(x, x->o.spec_b, &dev, e, 2)) {
        free(e);
        return NULL;
    }
    static const struct ub__pds_upcalls up = {
        .deliver = on_deliver, .acked = rx_acked, .failed = rx_failed};
    ub__pds_set_upcalls(e->pds, &up, x);
    int ep = make_epoll(dev);
    if (ep < 0) {
        fail_thread(x, 1, "epoll", 0);
    } else {
        atomic_store(&x->rx_ready, 1);
        for (uint64_t it = 0; it < 100000000u && !atomic_load(&x->stop); it++) {
            uint64_t now = now_ns();
            if (now > x->deadline + 1000000000u)
                break;
            ub__drive_once(e, dev, now, &x->rx_drive);
            wait_dev(ep, e, now);
        }
        close(ep);
    }
    x->rx_pds = *ub__pds_stats(e->pds);
    ub__udp_stats(dev, &x->rx_udp);
    ub__dev_close(dev);
    ub__engine_fini(e);
    free(e);
    return NULL;
}

/* ---- sender --------------------------------------------------------------------------- */

struct sender {
    struct xfer *x;
    uint64_t now;
};

static void on_acked(void *arg, uint64_t cookie, uint64_t now)
{
    struct sender *s = arg;
    struct xfer *x = s->x;
    if (cookie >= x->o.packets)
        return;
    if (x->failed[cookie])
        x->fail_after_ack++;
    if (x->acked[cookie]) {
        x->ack_dup++;
        return;
    }
    x->acked[cookie] = 1;
    x->ack_at[cookie] = now;
    x->nacked++;
    atomic_store_explicit(&x->progress, x->nacked, memory_order_relaxed);
}

static void on_failed(void *arg, uint64_t cookie, int err, uint64_t now)
{
    (void)now;
    struct sender *s = arg;
    struct xfer *x = s->x;
    if (cookie >= x->o.packets)
        return;
    if (!x->failed[cookie] && x->nfailed < 5)
        fprintf(stderr, "netns_xfer: packet %llu failed: %s\n", (unsigned long long)cookie,
                ub_strerror(err));
    x->failed[cookie] = 1;
    x->nfailed++;
}

static void tx_deliver(void *arg, const struct ub__pds_rx *rx, uint64_t now)
{
    (void)arg, (void)rx, (void)now;
}

static int send_one(struct xfer *x, struct ub__engine *e, const struct ub__addr *dst, uint32_t id,
                    uint64_t now)
{
    struct ub__pkt *p = ub__pkt_alloc(&e->pool);
    if (!p)
        return UB_ENOBUFS;
    uint32_t len = pay_len(x, id);
    struct ub__ses_std ses = {.opcode = UB_SES_OP_SEND,
                              .flags = UB_SES_F_SOM | UB_SES_F_EOM,
                              .request_length = X_HDR + len};
    struct ub__wcur w;
    ub__wcur_init(&w, ub__pkt_put(p, UB_SES_STD_SIZE), UB_SES_STD_SIZE);
    int rc = ub__ses_std_encode(&ses, &w);
    if (rc) {
        ub__pkt_free(p);
        return rc;
    }
    uint8_t *b = ub__pkt_put(p, X_HDR + len);
    put32(b, X_MAGIC);
    put32(b + 4, id);
    put32(b + 8, len);
    fill(b + X_HDR, id, len);
    put32(b + 12, fnv(b + X_HDR, len));
    struct ub__pds_tx tx = {
        .dst = dst, .mode = UB_PDS_RUD, .ses_kind = UB_PDS_NH_REQ_STD, .cookie = id};
    rc = ub__pds_send(e->pds, &tx, p, now);
    if (rc)
        ub__pkt_free(p);
    return rc;
}

static void *sender(void *arg)
{
    struct xfer *x = arg;
    if (enter_ns(x, x->o.ns_a))
        return NULL;
    struct ub__udp_cfg bc;
    if (ub__udp_cfg_parse(x->o.spec_b, &bc)) {
        fail_thread(x, 1, "peer spec", UB_EINVAL);
        return NULL;
    }
    struct ub__dev *dev;
    struct ub__engine *e = calloc(1, sizeof(*e));
    if (!e || open_side(x, x->o.spec_a, &dev, e, 1)) {
        free(e);
        return NULL;
    }
    struct sender s = {.x = x};
    static const struct ub__pds_upcalls up = {
        .deliver = tx_deliver, .acked = on_acked, .failed = on_failed};
    ub__pds_set_upcalls(e->pds, &up, &s);
    int ep = make_epoll(dev);
    if (ep < 0) {
        fail_thread(x, 1, "epoll", 0);
    } else {
        /* The receiver's sockets exist before the first packet (bounded wait). */
        for (int i = 0; i < 5000 && !atomic_load(&x->rx_ready) && !atomic_load(&x->stop); i++)
            usleep(1000);
        uint32_t next = 0;
        bool fail_noted = false;
        for (uint64_t it = 0; it < 100000000u && !atomic_load(&x->stop); it++) {
            uint64_t now = now_ns();
            if (now > x->deadline)
                break;
            if (!fail_noted && atomic_load(&x->fail_state) == 2) {
                fail_noted = true;
                x->fail_seen_ns = now;
                x->tx_pds_at_fail = *ub__pds_stats(e->pds);
            }
            /* At most a window ahead, so first_tx is (nearly) the first transmission. Nothing
             * new while the failure command runs (tens of ms): on a fast host the rest of the
             * transfer could otherwise finish before the failure takes effect. */
            while (atomic_load(&x->fail_state) != 1 && next < x->o.packets &&
                   next - x->nacked - x->nfailed < X_OFFER &&
                   send_one(x, e, &bc.local, next, now) == 0)
                x->first_tx[next++] = now;
            ub__drive_once(e, dev, now, &x->tx_drive);
            if (x->nacked + x->nfailed >= x->o.packets)
                break;
            wait_dev(ep, e, now);
        }
        /* A few more rounds so the last ACK-of-ACK and close traffic can go (bounded). */
        uint64_t end = now_ns() + 20000000u;
        for (int i = 0; i < 1000 && now_ns() < end; i++) {
            uint64_t now = now_ns();
            ub__drive_once(e, dev, now, &x->tx_drive);
            wait_dev(ep, e, now);
        }
        close(ep);
    }
    x->tx_pds = *ub__pds_stats(e->pds);
    x->tx_eng = e->stats;
    ub__udp_stats(dev, &x->tx_udp);
    ub__dev_close(dev);
    ub__engine_fini(e);
    free(e);
    atomic_store(&x->tx_done, 1);
    return NULL;
}

/* ---- main ----------------------------------------------------------------------------- */

static int run_cmd(const char *cmd)
{
    char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, "/bin/sh", NULL, NULL, argv, environ);
    if (rc) {
        fprintf(stderr, "netns_xfer: posix_spawn: %s\n", strerror(rc));
        return -1;
    }
    int st;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR)
            return -1;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static double ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Ack latency (first handed to PDS -> acknowledged) of packets first sent in [from, to). */
static void latency(const struct xfer *x, uint64_t from, uint64_t to, const char *tag)
{
    uint64_t *v = malloc(sizeof(uint64_t) * (x->o.packets + 1u));
    if (!v)
        return;
    uint32_t n = 0;
    for (uint32_t i = 0; i < x->o.packets; i++)
        if (x->acked[i] && x->first_tx[i] >= from && x->first_tx[i] < to)
            v[n++] = x->ack_at[i] - x->first_tx[i];
    if (n) {
        qsort(v, n, sizeof(*v), cmp_u64);
        printf("ack_latency_%s packets=%u p50_ms=%.3f p99_ms=%.3f max_ms=%.3f\n", tag, n,
               ms(v[n / 2]), ms(v[(uint64_t)n * 99 / 100]), ms(v[n - 1]));
    }
    free(v);
}

static void report_recovery(const struct xfer *x)
{
    uint64_t tf = x->fail_end;
    /* Everything handed to PDS before the failure: when was the last of it acknowledged? */
    uint64_t last_before = tf, inflight = 0;
    for (uint32_t i = 0; i < x->o.packets; i++) {
        if (!x->acked[i] || x->first_tx[i] > tf)
            continue;
        if (x->ack_at[i] > tf) {
            inflight++;
            if (x->ack_at[i] > last_before)
                last_before = x->ack_at[i];
        }
    }
    /* The longest stretch after the failure with no acknowledgement at all. */
    uint64_t *t = malloc(sizeof(uint64_t) * (x->o.packets + 1u));
    uint64_t gap = 0;
    if (t) {
        uint32_t n = 0;
        t[n++] = tf;
        for (uint32_t i = 0; i < x->o.packets; i++)
            if (x->acked[i] && x->ack_at[i] > tf)
                t[n++] = x->ack_at[i];
        qsort(t, n, sizeof(*t), cmp_u64);
        for (uint32_t i = 1; i < n; i++)
            if (t[i] - t[i - 1] > gap)
                gap = t[i] - t[i - 1];
        free(t);
    }
    uint64_t acked_then = 0;
    for (uint32_t i = 0; i < x->o.packets; i++)
        acked_then += x->acked[i] && x->ack_at[i] <= x->fail_start;
    const struct ub__pds_stats *a = &x->tx_pds_at_fail, *b = &x->tx_pds;
    printf("failure at_ms=%.3f cmd_ms=%.3f acked_then=%llu rc=%d\n", ms(x->fail_start - x->t0),
           ms(x->fail_end - x->fail_start), (unsigned long long)acked_then, x->fail_rc);
    printf("recovery pending_at_failure=%llu all_recovered_after_ms=%.3f max_ack_gap_ms=%.3f "
           "retx_after=%llu (rto=%llu fast=%llu nack=%llu probe=%llu)\n",
           (unsigned long long)inflight, ms(last_before - tf), ms(gap),
           (unsigned long long)(b->retx_pkts - a->retx_pkts),
           (unsigned long long)(b->retx_rto - a->retx_rto),
           (unsigned long long)(b->retx_fast - a->retx_fast),
           (unsigned long long)(b->retx_nack - a->retx_nack),
           (unsigned long long)(b->retx_probe - a->retx_probe));
    latency(x, x->t0, x->fail_start, "before");
    latency(x, tf, UINT64_MAX, "after");
}

static void usage(void)
{
    fprintf(stderr,
            "usage: netns_xfer --ns-a NS --ns-b NS --a IP:PORT --b IP:PORT [--packets N]\n"
            "       [--paths K] [--payload BYTES (0: 64..1200)] [--fail-at PCT --fail-cmd CMD]\n"
            "       [--timeout SEC] [--cc NAME] [--lb NAME] [--allow-idle-evs]\n");
    exit(2);
}

static uint32_t num(const char *s, uint32_t lo, uint32_t hi)
{
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > hi)
        usage();
    return (uint32_t)v;
}

static void parse(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.packets = 20000, .paths = 8, .payload = 0, .timeout_s = 25};
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        if (!strcmp(k, "--allow-idle-evs")) {
            o->allow_idle_evs = true;
            continue;
        }
        if (i + 1 >= argc)
            usage();
        const char *v = argv[++i];
        if (!strcmp(k, "--ns-a"))
            o->ns_a = v;
        else if (!strcmp(k, "--ns-b"))
            o->ns_b = v;
        else if (!strcmp(k, "--a"))
            o->spec_a = v;
        else if (!strcmp(k, "--b"))
            o->spec_b = v;
        else if (!strcmp(k, "--packets"))
            o->packets = num(v, 1, 10000000);
        else if (!strcmp(k, "--paths"))
            o->paths = num(v, 1, UB_UDP_MAX_PATHS);
        else if (!strcmp(k, "--payload"))
            o->payload = num(v, 0, X_MAXPAY);
        else if (!strcmp(k, "--fail-at"))
            o->fail_at_pct = num(v, 1, 99);
        else if (!strcmp(k, "--fail-cmd"))
            o->fail_cmd = v;
        else if (!strcmp(k, "--timeout"))
            o->timeout_s = num(v, 1, 3600);
        else if (!strcmp(k, "--cc"))
            o->cc = v;
        else if (!strcmp(k, "--lb"))
            o->lb = v;
        else
            usage();
    }
    if (!o->ns_a || !o->ns_b || !o->spec_a || !o->spec_b || (o->payload && o->payload < 16) ||
        (!o->fail_cmd != !o->fail_at_pct))
        usage();
}

static int verify(const struct xfer *x)
{
    int bad = 0;
    uint32_t missing = 0, unacked = 0;
    for (uint32_t i = 0; i < x->o.packets; i++) {
        missing += !x->delivered[i];
        unacked += !x->acked[i];
    }
#define CHECK(cond, ...)                  \
    do {                                  \
        if (!(cond)) {                    \
            printf("FAIL: " __VA_ARGS__); \
            printf("\n");                 \
            bad = 1;                      \
        }                                 \
    } while (0)
    CHECK(missing == 0, "%u packets never delivered", missing);
    CHECK(unacked == 0, "%u packets never acknowledged", unacked);
    CHECK(x->dup == 0, "%llu duplicate deliveries", (unsigned long long)x->dup);
    CHECK(x->corrupt == 0, "%llu corrupt deliveries", (unsigned long long)x->corrupt);
    CHECK(x->foreign == 0, "%llu foreign deliveries", (unsigned long long)x->foreign);
    CHECK(x->nfailed == 0, "%llu packets failed", (unsigned long long)x->nfailed);
    CHECK(x->ack_dup == 0 && x->fail_after_ack == 0, "acked twice (%llu) or failed after ack",
          (unsigned long long)x->ack_dup);
    for (uint32_t k = 0; k < x->o.paths && !x->o.allow_idle_evs; k++)
        CHECK(x->tx_udp.path[k].tx_pkts > 0, "EV %u (source port socket %u) sent nothing", k, k);
    CHECK(x->rx_udp.rx_truncated == 0, "receiver truncated datagrams");
    if (x->o.fail_cmd)
        CHECK(x->fail_rc == 0, "failure command returned %d", x->fail_rc);
#undef CHECK
    return bad;
}

int main(int argc, char **argv)
{
    struct xfer *x = calloc(1, sizeof(*x));
    if (!x)
        return 1;
    parse(argc, argv, &x->o);
    uint32_t n = x->o.packets;
    x->first_tx = calloc(n, sizeof(uint64_t));
    x->ack_at = calloc(n, sizeof(uint64_t));
    x->acked = calloc(n, 1);
    x->failed = calloc(n, 1);
    x->delivered = calloc(n, 1);
    if (!x->first_tx || !x->ack_at || !x->acked || !x->failed || !x->delivered)
        return 1;
    signal(SIGPIPE, SIG_IGN);
    x->t0 = now_ns();
    x->deadline = x->t0 + (uint64_t)x->o.timeout_s * 1000000000u;

    pthread_t tr, ts;
    if (pthread_create(&tr, NULL, receiver, x) || pthread_create(&ts, NULL, sender, x)) {
        fprintf(stderr, "netns_xfer: pthread_create failed\n");
        return 1;
    }
    /* Watch the progress; run the failure command once, at the chosen point (bounded). */
    uint64_t fail_after = (uint64_t)n * x->o.fail_at_pct / 100;
    while (!atomic_load(&x->tx_done) && now_ns() < x->deadline + 2000000000u) {
        if (x->o.fail_cmd && atomic_load(&x->fail_state) == 0 &&
            atomic_load(&x->progress) >= fail_after && !atomic_load(&x->stop)) {
            atomic_store(&x->fail_state, 1);
            x->fail_start = now_ns();
            x->fail_rc = run_cmd(x->o.fail_cmd);
            x->fail_end = now_ns();
            atomic_store(&x->fail_state, 2);
        }
        usleep(200);
    }
    pthread_join(ts, NULL);
    atomic_store(&x->stop, 1);
    pthread_join(tr, NULL);
    uint64_t t_end = now_ns();

    int terr = atomic_load(&x->thread_err);
    if (terr == 77) {
        printf("SKIP: cannot enter the test namespaces (setns needs CAP_SYS_ADMIN)\n");
        return 77;
    }
    /* Completion time: the last acknowledgement. */
    uint64_t last = x->t0;
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (x->acked[i] && x->ack_at[i] > last)
            last = x->ack_at[i];
        bytes += pay_len(x, i);
    }
    printf("transfer packets=%u payload_bytes=%llu acked=%llu delivered_unique=%llu dup=%llu "
           "corrupt=%llu failed=%llu time_ms=%.1f goodput_mbit=%.1f wall_ms=%.1f\n",
           n, (unsigned long long)bytes, (unsigned long long)x->nacked,
           (unsigned long long)(x->ndeliv - x->dup - x->corrupt - x->foreign),
           (unsigned long long)x->dup, (unsigned long long)x->corrupt,
           (unsigned long long)x->nfailed, ms(last - x->t0),
           (double)bytes * 8 / ((double)(last - x->t0) / 1e9) / 1e6, ms(t_end - x->t0));
    const struct ub__pds_stats *p = &x->tx_pds;
    printf("pds_sender tx=%llu retx=%llu rto=%llu fast=%llu nack=%llu probe=%llu rto_fired=%llu "
           "acks_rx=%llu nacks_rx=%llu\n",
           (unsigned long long)p->tx_pkts, (unsigned long long)p->retx_pkts,
           (unsigned long long)p->retx_rto, (unsigned long long)p->retx_fast,
           (unsigned long long)p->retx_nack, (unsigned long long)p->retx_probe,
           (unsigned long long)p->rto_fired, (unsigned long long)p->acks_rx,
           (unsigned long long)p->nacks_rx);
    printf(
        "pds_receiver delivered=%llu dup_dropped=%llu spurious_retx=%llu oow=%llu acks_tx=%llu\n",
        (unsigned long long)x->rx_pds.rx_pkts, (unsigned long long)x->rx_pds.rx_dup,
        (unsigned long long)x->rx_pds.spurious_retx, (unsigned long long)x->rx_pds.rx_oow,
        (unsigned long long)x->rx_pds.acks_tx);
    printf("udp_sender tx_pkts=%llu gso=%d gso_msgs=%llu tx_full=%llu tx_full_dropped=%llu "
           "tx_err_dropped=%llu drive_refused=%llu\n",
           (unsigned long long)x->tx_udp.tx_pkts, x->tx_udp.gso,
           (unsigned long long)x->tx_udp.tx_gso_msgs, (unsigned long long)x->tx_udp.tx_full,
           (unsigned long long)x->tx_udp.tx_full_dropped,
           (unsigned long long)x->tx_udp.tx_err_dropped,
           (unsigned long long)x->tx_drive.tx_refused);
    printf("udp_receiver rx_pkts=%llu kernel_drops=%llu gro=%d\n",
           (unsigned long long)x->rx_udp.rx_pkts, (unsigned long long)x->rx_udp.rx_kernel_drops,
           x->rx_udp.gro);
    for (uint32_t k = 0; k < x->o.paths; k++)
        printf("ev %u sender_tx_pkts=%llu sender_tx_bytes=%llu sender_rx_pkts=%llu\n", k,
               (unsigned long long)x->tx_udp.path[k].tx_pkts,
               (unsigned long long)x->tx_udp.path[k].tx_bytes,
               (unsigned long long)x->tx_udp.path[k].rx_pkts);
    if (x->o.fail_cmd && atomic_load(&x->fail_state) == 2)
        report_recovery(x);
    else if (x->o.fail_cmd)
        printf("FAIL: the failure command never ran\n");

    int bad = terr != 0 || verify(x) || (x->o.fail_cmd && atomic_load(&x->fail_state) != 2);
    printf("%s\n", bad ? "RESULT: FAIL" : "RESULT: PASS");
    free(x->first_tx);
    free(x->ack_at);
    free(x->acked);
    free(x->failed);
    free(x->delivered);
    free(x);
    return bad ? 1 : 0;
}
