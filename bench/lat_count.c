/*
 * An 8-byte SEND ping-pong between two contexts of one thread, for counting instructions
 * (valgrind --tool=callgrind) without scheduling noise: each side only ever polls its own
 * JFC, as two busy-polling processes (softub-perf send_lat) do, and finds the other's
 * message on its first poll. Run it for two counts of round trips and divide the difference
 * of the instruction totals by the difference of the counts: both sides, per round trip
 * (docs/perf-journal.md, "The latency path's flat costs"). Run natively, it also says what a
 * round trip costs in time with nothing waited for, and how much of it the kernel takes.
 * Both contexts read a manual clock that moves 1 us per post: under callgrind, where a
 * round trip takes a hundred times longer, the real one would fire retransmission and ACK
 * timers, and the counts would depend on how fast valgrind ran.
 *
 * EMPTY_POLLS: that many polls of the first side after the round trips, which find nothing
 * (what a waiting side's poll costs: bench/critpath.sh counts them with --toggle-collect).
 *
 *   lat_count [URI [ROUND_TRIPS [EMPTY_POLLS]]]   URI: udp://127.0.0.1:0?paths=1 (default),
 *                                                 shm://0
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <softub/softub.h>

#include "api/ctx.h"
#include "core/compiler.h"

#define MEM     (1u << 20)
#define RECV_SZ 4096u
#define TOKEN   0x1a7ull

struct side {
    ub_context *ctx;
    ub_jfc *jfc;
    ub_jetty *jetty;
    ub_seg *seg;
    uint8_t *mem;
    ub_tjetty *peer; /* the other side's jetty */
    unsigned long empty_polls;
};

static struct ub__manual_clock clk = {UB_NS_PER_S};

static int fail(const char *what, int rc)
{
    fprintf(stderr, "lat_count: %s: %s\n", what, ub_strerror(rc));
    exit(1);
}

static void open_side(struct side *s, const char *uri)
{
    memset(s, 0, sizeof(*s));
    struct ub_context_attr ca;
    memset(&ca, 0, sizeof(ca));
    ca.progress = UB_PROGRESS_MANUAL;
    int rc = ub_context_open(uri, &ca, &s->ctx);
    if (rc)
        fail("ub_context_open", rc);
    ub__ctx_of(s->ctx)->clock = ub__clock_manual(&clk); /* nothing has read the clock yet */
    s->mem = calloc(1, MEM);
    if (!s->mem)
        fail("calloc", UB_ENOMEM);
    struct ub_jfc_attr fa = {.depth = 1024};
    if ((rc = ub_jfc_create(s->ctx, &fa, &s->jfc)) != 0)
        fail("ub_jfc_create", rc);
    struct ub_jetty_attr ja;
    memset(&ja, 0, sizeof(ja));
    ja.jfs.depth = 16;
    ja.jfs.jfc = s->jfc;
    ja.jfr.depth = 64;
    ja.jfr.jfc = s->jfc;
    if ((rc = ub_jetty_create(s->ctx, &ja, &s->jetty)) != 0)
        fail("ub_jetty_create", rc);
    if ((rc = ub_seg_register(s->ctx, s->mem, MEM, UB_ACCESS_LOCAL_WRITE, TOKEN, &s->seg)) != 0)
        fail("ub_seg_register", rc);
}

static void post_recv(struct side *s, uint32_t i)
{
    struct ub_sge sg = {s->mem + (size_t)(i % 64) * RECV_SZ, RECV_SZ, s->seg};
    struct ub_rwr rw;
    memset(&rw, 0, sizeof(rw));
    rw.user_ctx = i;
    rw.sge = &sg;
    rw.num_sge = 1;
    int rc = ub_post_recv(ub_jetty_jfr(s->jetty), &rw, NULL);
    if (rc)
        fail("ub_post_recv", rc);
}

static void post_send(struct side *s, uint64_t id)
{
    clk.now += UB_NS_PER_US;
    struct ub_sge sg = {s->mem + MEM - 64, 8, s->seg};
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_SEND;
    wr.flags = UB_WR_COMPLETE | UB_WR_INLINE;
    wr.user_ctx = id;
    wr.sge = &sg;
    wr.num_sge = 1;
    wr.tjetty = s->peer;
    int rc = ub_post_jetty_send(s->jetty, &wr, NULL);
    if (rc)
        fail("ub_post_jetty_send", rc);
}

/* The poll's records, off the stack as softub-perf keeps them (a turn's frames then sit as
 * high as its). */
static struct ub_cr cr[64];

/* s polls until its receive arrives and returns the buffer's index (the caller reposts it
 * after answering, as softub-perf does); other polls its own JFC whenever s found nothing,
 * as the other process would meanwhile. */
static uint32_t wait_recv(struct side *s, struct side *other)
{
    for (;;) {
        int k = ub_poll_jfc(s->jfc, 64, cr);
        if (k < 0)
            fail("ub_poll_jfc", k);
        int got = -1;
        for (int i = 0; i < k; i++) {
            if (cr[i].status != UB_CR_SUCCESS)
                fail(ub_cr_status_str(cr[i].status), UB_EIO);
            if (cr[i].opcode == UB_CR_OP_RECV) {
                if (got >= 0)
                    fail("two receives in one turn", UB_EIO);
                got = (int)cr[i].user_ctx;
            }
        }
        if (got >= 0)
            return (uint32_t)got;
        if (k == 0)
            s->empty_polls++;
        if (ub_poll_jfc(other->jfc, 64, cr) < 0)
            fail("ub_poll_jfc", UB_EIO);
    }
}

/* One poll right after a post, finding nothing new yet: what a waiting process's first poll
 * does off the round trip's path (the rest of the received batch, held output). A function
 * of its own, so that its instructions can be told apart from the path's. */
static void idle_poll(struct side *s)
{
    int k = ub_poll_jfc(s->jfc, 64, cr);
    if (k < 0)
        fail("ub_poll_jfc", k);
    for (int i = 0; i < k; i++)
        if (cr[i].status != UB_CR_SUCCESS || cr[i].opcode == UB_CR_OP_RECV)
            fail("idle poll: unexpected record", UB_EIO);
}

/* k polls of s that find nothing, in a function of their own: bench/critpath.sh counts
 * inside it (valgrind --toggle-collect). */
static UB_NOINLINE void empty_polls(struct side *s, unsigned long k)
{
    for (unsigned long i = 0; i < k; i++)
        idle_poll(s);
}

static double us_between(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) * 1e6 + (double)(b->tv_nsec - a->tv_nsec) / 1e3;
}

static double tv_us(const struct timeval *end, const struct timeval *start)
{
    return (double)(end->tv_sec - start->tv_sec) * 1e6 + (double)(end->tv_usec - start->tv_usec);
}

int main(int argc, char **argv)
{
    const char *uri = argc > 1 ? argv[1] : "udp://127.0.0.1:0?paths=1";
    unsigned long n = argc > 2 ? strtoul(argv[2], NULL, 10) : 1000;
    unsigned long empty = argc > 3 ? strtoul(argv[3], NULL, 10) : 0;
    struct side a, b;
    open_side(&a, uri);
    open_side(&b, uri);
    uint8_t d[64];
    int rc;
    if (ub_jetty_export(b.jetty, d, sizeof(d)) < 0 ||
        (rc = ub_jetty_import(a.ctx, d, sizeof(d), &a.peer)) != 0)
        fail("jetty exchange", UB_EINVAL);
    if (ub_jetty_export(a.jetty, d, sizeof(d)) < 0 ||
        (rc = ub_jetty_import(b.ctx, d, sizeof(d), &b.peer)) != 0)
        fail("jetty exchange", UB_EINVAL);
    for (uint32_t i = 0; i < 16; i++) {
        post_recv(&a, i);
        post_recv(&b, i);
    }
    struct rusage r0, r1;
    struct timespec t0, t1;
    getrusage(RUSAGE_SELF, &r0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint32_t ra = UINT32_MAX, rb;
    for (unsigned long i = 0; i < n; i++) {
        post_send(&a, i);
        if (ra != UINT32_MAX)
            post_recv(&a, ra);
        idle_poll(&a);
        rb = wait_recv(&b, &a);
        post_send(&b, i);
        post_recv(&b, rb);
        idle_poll(&b);
        ra = wait_recv(&a, &b);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    getrusage(RUSAGE_SELF, &r1);
    idle_poll(&a); /* what the last turn held (the response) leaves: nothing is sent after */
    empty_polls(&a, empty);
    /* Packets both sides' engines sent, per round trip (the members of a bundle one each). */
    static struct ub_context_stats sa, sb; /* large: not in main's frame, above every turn's */
    if (ub_context_stats(a.ctx, &sa) || ub_context_stats(b.ctx, &sb))
        fail("stats", UB_EINVAL);
    printf("lat_count: %lu round trips over %s, %lu empty polls, %.2f packets per round trip\n", n,
           uri, a.empty_polls + b.empty_polls,
           n ? (double)(sa.tx_pkts + sb.tx_pkts) / (double)n : 0.0);
    /* Natively (not under callgrind): where a round trip's time goes, nothing waited for. */
    if (n)
        printf("lat_count: per round trip %.2f us, of it user %.2f us, system %.2f us\n",
               us_between(&t0, &t1) / (double)n, tv_us(&r1.ru_utime, &r0.ru_utime) / (double)n,
               tv_us(&r1.ru_stime, &r0.ru_stime) / (double)n);
    ub_context_close(a.ctx);
    ub_context_close(b.ctx);
    free(a.mem);
    free(b.mem);
    return 0;
}
