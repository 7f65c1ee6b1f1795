/*
 * softub-demo: softub between two real processes, through the public API only.
 *
 * For each device (loopback UDP, then shared memory) it forks a server process and plays
 * the client:
 *   server  opens a context with automatic progress, registers memory, posts receive
 *           buffers, ships its descriptors over the bootstrap channel (TCP on 127.0.0.1),
 *           then sleeps in ub_wait_jfc: one-sided operations complete without it, and it
 *           wakes only for messages, which it checks byte for byte;
 *   client  opens a context with manual progress (busy polling), imports the descriptors,
 *           runs every operation once with verification (WRITE, READ, SEND with immediate,
 *           WRITE with immediate, atomic FADD and CAS, a tagged send), then measures 8-byte
 *           latency (post -> completion) and WRITE bandwidth, and asks the server for its
 *           verdict.
 * Prints a short table; exits 0 only if every check passed on every device. Every wait is
 * bounded (a stuck peer fails the run, it never hangs it).
 *
 *   softub-demo [--quick] [--device udp|shm|both] [-v]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <softub/softub.h>

#define MEM_SIZE    (4u << 20)
#define RECV_BUF    2048u
#define RECV_BUFS   512u
#define TAG_BUFS    8u
#define OFF_WIMM    (64u << 10)
#define OFF_COUNTER (128u << 10)
#define OFF_BULK    (1u << 20)
#define IMM_SEND    0x5e4d000000001234ull
#define IMM_WIMM    0x5e4d000000005678ull
#define TAG_MSG     0xabcd0042ull
#define TAG_BUF     0xabcd0000ull
#define TAG_IGNORE  0xffffull
#define LEN_SEND    1000u
#define LEN_WIMM    2048u
#define LEN_TSEND   700u
#define TOKEN       0x50f7ull
#define WAIT_NS     (5ull * 1000000000ull) /* bound on any single completion */
#define BOOT_MS     10000

static bool verbose;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (uint8_t)(x >> 16);
    }
}

static bool check(const uint8_t *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        if (p[i] != (uint8_t)(x >> 16))
            return false;
    }
    return true;
}

#define FAIL(...)                                     \
    do {                                              \
        fprintf(stderr, "softub-demo: " __VA_ARGS__); \
        fprintf(stderr, "\n");                        \
        goto out;                                     \
    } while (0)

/* Over loopback udp datagrams of 9000 bytes, as softub-perf uses there (the device's 1452
 * fits real Ethernet paths): bulk transfers move about twice as fast. */
static const char *uri_of(const char *dev)
{
    return strcmp(dev, "udp") == 0 ? "udp://127.0.0.1:0?paths=8&mtu=9000" : "shm://0";
}

/* ---- the server (target) ---------------------------------------------------------------- */

struct srv {
    ub_context *ctx;
    ub_jfce *jfce;
    ub_jfc *jfc;
    ub_jetty *jetty;
    ub_jfr *tjfr;
    uint8_t *mem, *rmem;
    ub_seg *seg, *rseg;
    uint32_t ok_send, ok_wimm, ok_tag, small, bad;
};

static int srv_post(struct srv *s, ub_jfr *jfr, uint32_t idx, bool tagged)
{
    struct ub_sge sg = {s->rmem + (size_t)idx * RECV_BUF, RECV_BUF, s->rseg};
    struct ub_rwr rw;
    memset(&rw, 0, sizeof(rw));
    rw.user_ctx = idx;
    rw.sge = &sg;
    rw.num_sge = 1;
    if (tagged) {
        rw.tag = TAG_BUF;
        rw.ignore = TAG_IGNORE;
    }
    return ub_post_recv(jfr, &rw, NULL);
}

static void srv_handle(struct srv *s, const struct ub_cr *cr)
{
    if (cr->status != UB_CR_SUCCESS) {
        fprintf(stderr, "softub-demo server: record %s\n", ub_cr_status_str(cr->status));
        s->bad++;
        return;
    }
    if (cr->opcode == UB_CR_OP_RECV_WRITE_IMM) {
        if (cr->imm_data == IMM_WIMM && check(s->mem + OFF_WIMM, LEN_WIMM, 3))
            s->ok_wimm++;
        else
            s->bad++;
    } else if (cr->opcode == UB_CR_OP_RECV) {
        const uint8_t *buf = s->rmem + (size_t)cr->user_ctx * RECV_BUF;
        if (cr->flags & UB_CR_F_TAG) {
            if (cr->tag == TAG_MSG && cr->length == LEN_TSEND && check(buf, LEN_TSEND, 4))
                s->ok_tag++;
            else
                s->bad++;
        } else if (cr->flags & UB_CR_F_IMM) {
            if (cr->imm_data == IMM_SEND && cr->length == LEN_SEND && check(buf, LEN_SEND, 2))
                s->ok_send++;
            else
                s->bad++;
        } else if (cr->length == 8) {
            s->small++;
        } else {
            s->bad++;
        }
    } else {
        return; /* our own sends: none */
    }
    /* Every buffer goes back where it came from (tagged ones carry their index + RECV_BUFS). */
    bool tagged = cr->user_ctx >= RECV_BUFS;
    if (srv_post(s, tagged ? s->tjfr : ub_jetty_jfr(s->jetty), (uint32_t)cr->user_ctx, tagged))
        s->bad++;
}

static int srv_drain(struct srv *s)
{
    struct ub_cr cr[32];
    int n, total = 0;
    while ((n = ub_poll_jfc(s->jfc, 32, cr)) > 0) {
        for (int i = 0; i < n; i++)
            srv_handle(s, &cr[i]);
        total += n;
    }
    return total;
}

static int server(const char *dev, const char *boot_uri)
{
    struct srv s;
    memset(&s, 0, sizeof(s));
    int rc = 1;
    ub_bootstrap *b = NULL;
    struct ub_context_attr ca = {.progress = UB_PROGRESS_AUTO};
    if (ub_context_open(uri_of(dev), &ca, &s.ctx))
        FAIL("server: cannot open %s", uri_of(dev));
    s.mem = aligned_alloc(4096, MEM_SIZE);
    s.rmem = aligned_alloc(4096, (RECV_BUFS + TAG_BUFS) * RECV_BUF);
    if (!s.mem || !s.rmem)
        FAIL("server: out of memory");
    memset(s.mem, 0, MEM_SIZE);
    uint64_t counter = 100;
    memcpy(s.mem + OFF_COUNTER, &counter, 8);
    struct ub_jfc_attr fa = {.depth = 1024};
    if (ub_jfce_create(s.ctx, &s.jfce) || (fa.jfce = s.jfce, ub_jfc_create(s.ctx, &fa, &s.jfc)))
        FAIL("server: jfc");
    struct ub_jetty_attr ja;
    memset(&ja, 0, sizeof(ja));
    ja.jfs.depth = 16;
    ja.jfs.jfc = s.jfc;
    ja.jfr.depth = RECV_BUFS;
    ja.jfr.jfc = s.jfc;
    struct ub_jfr_attr ta = {.depth = TAG_BUFS, .jfc = s.jfc, .tag_matching = true};
    if (ub_jetty_create(s.ctx, &ja, &s.jetty) || ub_jfr_create(s.ctx, &ta, &s.tjfr))
        FAIL("server: jetty");
    uint32_t all = UB_ACCESS_LOCAL_WRITE | UB_ACCESS_READ | UB_ACCESS_WRITE | UB_ACCESS_ATOMIC;
    if (ub_seg_register(s.ctx, s.mem, MEM_SIZE, all, TOKEN, &s.seg) ||
        ub_seg_register(s.ctx, s.rmem, (RECV_BUFS + TAG_BUFS) * RECV_BUF, UB_ACCESS_LOCAL_WRITE, 0,
                        &s.rseg))
        FAIL("server: segments");
    for (uint32_t i = 0; i < RECV_BUFS; i++)
        if (srv_post(&s, ub_jetty_jfr(s.jetty), i, false))
            FAIL("server: post_recv");
    for (uint32_t i = 0; i < TAG_BUFS; i++)
        if (srv_post(&s, s.tjfr, RECV_BUFS + i, true))
            FAIL("server: post_recv tagged");
    uint8_t desc[3 * 64];
    if (ub_jetty_export(s.jetty, desc, 64) < 0 || ub_jfr_export(s.tjfr, desc + 64, 64) < 0 ||
        ub_seg_export(s.seg, desc + 128, 64) < 0)
        FAIL("server: export");
    if (ub_bootstrap_connect(boot_uri, BOOT_MS, &b) ||
        ub_bootstrap_send(b, desc, sizeof(desc), BOOT_MS))
        FAIL("server: bootstrap to %s", boot_uri);
    /* Sleep until a message arrives or the client says it is done (bounded: 60 s). */
    uint64_t end = now_ns() + 60ull * 1000000000ull;
    char msg[256];
    for (;;) {
        if (now_ns() > end)
            FAIL("server: the client never finished");
        if (srv_drain(&s))
            continue;
        ub_rearm_jfc(s.jfc, false);
        if (srv_drain(&s))
            continue; /* a record slipped in before the rearm */
        ub_jfc *fired[8];
        int n = ub_wait_jfc(s.jfce, 8, 20, fired);
        if (n > 0)
            ub_ack_jfc(s.jfc, (uint32_t)n);
        int m = ub_bootstrap_recv(b, msg, sizeof(msg) - 1, 0);
        if (m == UB_ETIMEDOUT)
            continue;
        if (m < 0)
            FAIL("server: bootstrap: %s", ub_strerror(m));
        break; /* "done" */
    }
    srv_drain(&s);
    uint64_t final_counter;
    memcpy(&final_counter, s.mem + OFF_COUNTER, 8);
    bool ok = s.ok_send == 1 && s.ok_wimm == 1 && s.ok_tag == 1 && !s.bad && final_counter == 999;
    int len = snprintf(
        msg, sizeof(msg), "%s send_imm=%u write_imm=%u tagged=%u small=%u bad=%u counter=%" PRIu64,
        ok ? "ok" : "FAIL", s.ok_send, s.ok_wimm, s.ok_tag, s.small, s.bad, final_counter);
    if (ub_bootstrap_send(b, msg, (size_t)len, BOOT_MS))
        FAIL("server: bootstrap reply");
    rc = ok ? 0 : 1;
out:
    if (b)
        ub_bootstrap_close(b);
    if (s.ctx)
        ub_context_close(s.ctx);
    free(s.mem);
    free(s.rmem);
    return rc;
}

/* ---- the client (initiator) ------------------------------------------------------------- */

struct cli {
    ub_context *ctx;
    ub_jfc *jfc;
    ub_jetty *jetty;
    ub_tjetty *tj, *ttj;
    ub_tseg *ts;
    uint8_t *mem;
    ub_seg *seg;
    uint64_t base;
};

struct result {
    const char *dev;
    double lat[3][2]; /* send, write, read: p50, p99 (us) */
    double bw[2];     /* 64 KiB, 1 MiB writes: MB/s */
    bool ok;
    char verdict[256];
};

static int wait_cr(struct cli *c, struct ub_cr *cr, int n)
{
    uint64_t end = now_ns() + WAIT_NS;
    int got = 0;
    while (got < n) {
        int k = ub_poll_jfc(c->jfc, n - got, cr + got);
        if (k < 0)
            return k;
        got += k;
        if (!k && now_ns() > end)
            return UB_ETIMEDOUT;
    }
    return got;
}

static int post(struct cli *c, struct ub_wr *wr)
{
    struct ub_wr *bad = NULL;
    return ub_post_jetty_send(c->jetty, wr, &bad);
}

/* Posts one request and waits for its record: 0 if it succeeded. */
static int run1(struct cli *c, struct ub_wr *wr, uint64_t *ns)
{
    struct ub_cr cr;
    uint64_t t0 = now_ns();
    int rc = post(c, wr);
    if (rc)
        return rc;
    rc = wait_cr(c, &cr, 1);
    if (ns)
        *ns = now_ns() - t0;
    if (rc < 0)
        return rc;
    if (cr.status != UB_CR_SUCCESS) {
        fprintf(stderr, "softub-demo: completion: %s\n", ub_cr_status_str(cr.status));
        return UB_EIO;
    }
    return 0;
}

static struct ub_wr rma(enum ub_opcode op, struct ub_sge *sg, ub_tseg *ts, uint64_t raddr)
{
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = op;
    wr.flags = UB_WR_COMPLETE;
    wr.sge = sg;
    wr.num_sge = 1;
    wr.u.rma.tseg = ts;
    wr.u.rma.addr = raddr;
    return wr;
}

/* READs 8 bytes at raddr into local and *val (the step's time covers the READ). */
static bool read_u64(struct cli *c, uint8_t *local, uint64_t raddr, uint64_t *val)
{
    struct ub_sge sg = {local, 8, c->seg};
    struct ub_wr wr = rma(UB_OP_READ, &sg, c->ts, raddr);
    if (run1(c, &wr, NULL))
        return false;
    memcpy(val, local, 8);
    return true;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void pct(uint64_t *v, uint32_t n, double out[2])
{
    qsort(v, n, sizeof(*v), cmp_u64);
    out[0] = (double)v[n / 2] / 1000.0;
    out[1] = (double)v[(size_t)n * 99 / 100] / 1000.0;
}

#define STEP(name, expr)                                               \
    do {                                                               \
        uint64_t t_ = now_ns();                                        \
        bool ok_ = (expr);                                             \
        printf("  %-44s %s  (%.1f us)\n", name, ok_ ? "ok" : "FAILED", \
               (double)(now_ns() - t_) / 1000.0);                      \
        if (!ok_)                                                      \
            goto out;                                                  \
    } while (0)

static bool bandwidth(struct cli *c, uint32_t size, uint64_t total, uint32_t window, double *mbs)
{
    uint32_t n = (uint32_t)(total / size);
    struct ub_sge sg = {c->mem + OFF_BULK, size, c->seg};
    fill(c->mem + OFF_BULK, size, 9);
    uint64_t t0 = now_ns();
    uint32_t posted = 0, done = 0;
    struct ub_cr cr[16];
    while (done < n) {
        while (posted < n && posted - done < window) {
            struct ub_wr wr = rma(UB_OP_WRITE, &sg, c->ts, c->base + OFF_BULK);
            if (post(c, &wr))
                return false;
            posted++;
        }
        int k = wait_cr(c, cr, 1);
        if (k < 0 || cr[0].status != UB_CR_SUCCESS)
            return false;
        done++;
    }
    *mbs = (double)n * size / ((double)(now_ns() - t0) / 1e9) / 1e6;
    /* The last write's bytes are there: read them back. */
    memset(c->mem + OFF_BULK + size, 0, size);
    struct ub_sge rs = {c->mem + OFF_BULK + size, size, c->seg};
    struct ub_wr rd = rma(UB_OP_READ, &rs, c->ts, c->base + OFF_BULK);
    return run1(c, &rd, NULL) == 0 && check(c->mem + OFF_BULK + size, size, 9);
}

static int client(const char *dev, ub_bootstrap *b, bool quick, pid_t child, struct result *res)
{
    struct cli c;
    memset(&c, 0, sizeof(c));
    int rc = 1;
    struct ub_context_attr ca = {.progress = UB_PROGRESS_MANUAL};
    if (ub_context_open(uri_of(dev), &ca, &c.ctx))
        FAIL("client: cannot open %s", uri_of(dev));
    c.mem = aligned_alloc(4096, MEM_SIZE);
    if (!c.mem)
        FAIL("client: out of memory");
    memset(c.mem, 0, MEM_SIZE);
    struct ub_jfc_attr fa = {.depth = 512};
    if (ub_jfc_create(c.ctx, &fa, &c.jfc))
        FAIL("client: jfc");
    struct ub_jetty_attr ja;
    memset(&ja, 0, sizeof(ja));
    ja.jfs.depth = 256;
    ja.jfs.jfc = c.jfc;
    ja.jfr.depth = 16;
    ja.jfr.jfc = c.jfc;
    uint32_t all = UB_ACCESS_LOCAL_WRITE | UB_ACCESS_READ | UB_ACCESS_WRITE | UB_ACCESS_ATOMIC;
    if (ub_jetty_create(c.ctx, &ja, &c.jetty) ||
        ub_seg_register(c.ctx, c.mem, MEM_SIZE, all, 1, &c.seg))
        FAIL("client: jetty/segment");
    uint8_t desc[3 * 64];
    if (ub_bootstrap_accept(b, BOOT_MS))
        FAIL("client: the server did not connect");
    int m = ub_bootstrap_recv(b, desc, sizeof(desc), BOOT_MS);
    if (m != (int)sizeof(desc))
        FAIL("client: descriptors: %s", m < 0 ? ub_strerror(m) : "short");
    if (ub_jetty_import(c.ctx, desc, 64, &c.tj) || ub_jetty_import(c.ctx, desc + 64, 64, &c.ttj) ||
        ub_seg_import(c.ctx, desc + 128, 64, TOKEN, &c.ts))
        FAIL("client: import");
    c.base = ub_tseg_base(c.ts);
    char me[96], peer[96];
    ub_context_addr(c.ctx, me, sizeof(me));
    snprintf(peer, sizeof(peer), "server pid %d", (int)child);
    printf("%s: client %s (manual progress%s), %s (automatic progress, asleep in ub_wait_jfc)\n",
           dev, me, strcmp(dev, "udp") == 0 ? ", 8 paths, MTU 9000" : "", peer);

    /* Every operation once, verified. */
    struct ub_sge sg = {c.mem, 4096, c.seg};
    fill(c.mem, 4096, 1);
    struct ub_wr wr = rma(UB_OP_WRITE, &sg, c.ts, c.base);
    STEP("WRITE 4 KiB", run1(&c, &wr, NULL) == 0);
    struct ub_sge rs = {c.mem + 8192, 4096, c.seg};
    wr = rma(UB_OP_READ, &rs, c.ts, c.base);
    STEP("READ 4 KiB back, compare", run1(&c, &wr, NULL) == 0 && check(c.mem + 8192, 4096, 1));
    struct ub_sge ss = {c.mem + 16384, LEN_SEND, c.seg};
    fill(c.mem + 16384, LEN_SEND, 2);
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_SEND_IMM;
    wr.flags = UB_WR_COMPLETE;
    wr.sge = &ss;
    wr.num_sge = 1;
    wr.imm_data = IMM_SEND;
    wr.tjetty = c.tj;
    STEP("SEND 1000 B with immediate (server checks)", run1(&c, &wr, NULL) == 0);
    struct ub_sge ws = {c.mem + 20480, LEN_WIMM, c.seg};
    fill(c.mem + 20480, LEN_WIMM, 3);
    wr = rma(UB_OP_WRITE_IMM, &ws, c.ts, c.base + OFF_WIMM);
    wr.imm_data = IMM_WIMM;
    wr.tjetty = c.tj;
    STEP("WRITE_IMM 2 KiB (server checks)", run1(&c, &wr, NULL) == 0);
    uint64_t old = 0;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_ATOMIC_FADD;
    wr.flags = UB_WR_COMPLETE;
    wr.u.atomic.tseg = c.ts;
    wr.u.atomic.addr = c.base + OFF_COUNTER;
    wr.u.atomic.operand = 5;
    wr.u.atomic.result = &old;
    STEP("ATOMIC FADD +5 (old value 100)", run1(&c, &wr, NULL) == 0 && old == 100);
    wr.opcode = UB_OP_ATOMIC_CAS;
    wr.u.atomic.compare = 105;
    wr.u.atomic.operand = 999;
    STEP("ATOMIC CAS 105 -> 999 (old value 105)", run1(&c, &wr, NULL) == 0 && old == 105);
    uint64_t now_val = 0;
    STEP("READ the counter back (999)",
         read_u64(&c, c.mem + 24576, c.base + OFF_COUNTER, &now_val) && now_val == 999);
    struct ub_sge ts_ = {c.mem + 28672, LEN_TSEND, c.seg};
    fill(c.mem + 28672, LEN_TSEND, 4);
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_TSEND;
    wr.flags = UB_WR_COMPLETE;
    wr.sge = &ts_;
    wr.num_sge = 1;
    wr.tjetty = c.ttj;
    wr.u.send.tag = TAG_MSG;
    STEP("tagged SEND 700 B, tag 0xabcd0042 (server checks)", run1(&c, &wr, NULL) == 0);

    /* 8-byte latency, post -> completion record. */
    uint32_t samples = quick ? 300 : 2000;
    uint64_t *v = calloc(samples, sizeof(*v));
    if (!v)
        FAIL("client: out of memory");
    struct ub_sge s8 = {c.mem + 32768, 8, c.seg};
    for (int op = 0; op < 3; op++) {
        for (uint32_t i = 0; i < samples + samples / 10; i++) { /* the first 10 %: warm-up */
            if (op == 0) {
                memset(&wr, 0, sizeof(wr));
                wr.opcode = UB_OP_SEND;
                wr.flags = UB_WR_COMPLETE;
                wr.sge = &s8;
                wr.num_sge = 1;
                wr.tjetty = c.tj;
            } else {
                wr = rma(op == 1 ? UB_OP_WRITE : UB_OP_READ, &s8, c.ts, c.base + 32768);
            }
            uint64_t ns;
            if (run1(&c, &wr, &ns)) {
                free(v);
                FAIL("client: latency run failed");
            }
            if (i >= samples / 10)
                v[i - samples / 10] = ns;
        }
        pct(v, samples, res->lat[op]);
    }
    free(v);

    /* WRITE bandwidth. */
    uint64_t total = quick ? (8ull << 20) : (32ull << 20);
    STEP("WRITE bandwidth 64 KiB x window 16, read back",
         bandwidth(&c, 64 << 10, total, 16, &res->bw[0]));
    STEP("WRITE bandwidth 1 MiB x window 4, read back",
         bandwidth(&c, 1 << 20, total, 4, &res->bw[1]));

    if (ub_bootstrap_send(b, "done", 4, BOOT_MS))
        FAIL("client: bootstrap");
    m = ub_bootstrap_recv(b, res->verdict, sizeof(res->verdict) - 1, BOOT_MS);
    if (m < 0)
        FAIL("client: no verdict from the server: %s", ub_strerror(m));
    res->verdict[m] = '\0';
    printf("  %-44s %s\n", "server's checks", res->verdict);
    if (strncmp(res->verdict, "ok", 2) != 0)
        goto out;
    struct ub_context_stats st;
    ub_context_stats(c.ctx, &st);
    if (verbose)
        printf("  client: %" PRIu64 " packets out, %" PRIu64 " in, %" PRIu64 " retransmitted\n",
               st.tx_pkts, st.rx_pkts, st.retransmits);
    rc = 0;
out:
    if (c.ctx)
        ub_context_close(c.ctx);
    free(c.mem);
    return rc;
}

/* Waits up to ms for the child; kills it if it does not exit. Returns its exit status. */
static int reap(pid_t pid, int ms)
{
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pfd >= 0) {
        struct pollfd p = {.fd = pfd, .events = POLLIN};
        if (poll(&p, 1, ms) <= 0)
            kill(pid, SIGKILL);
        close(pfd);
    } else {
        kill(pid, SIGKILL);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static bool run_device(const char *dev, bool quick, struct result *res)
{
    memset(res, 0, sizeof(*res));
    res->dev = dev;
    ub_bootstrap *b;
    char uri[96];
    if (ub_bootstrap_listen("tcp://127.0.0.1:0", &b) ||
        ub_bootstrap_uri(b, uri, sizeof(uri)) <= 0) {
        fprintf(stderr, "softub-demo: cannot listen on 127.0.0.1\n");
        return false;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        ub_bootstrap_close(b);
        return false;
    }
    if (pid == 0) {
        ub_bootstrap_close(b); /* the child's copy of the listener */
        _exit(server(dev, uri));
    }
    int crc = client(dev, b, quick, pid, res);
    ub_bootstrap_close(b);
    int src = reap(pid, crc ? 100 : 5000);
    if (src != 0 && !crc)
        fprintf(stderr, "softub-demo: the %s server exited with %d\n", dev, src);
    res->ok = crc == 0 && src == 0;
    return res->ok;
}

int main(int argc, char **argv)
{
    bool quick = false;
    const char *which = "both";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = true;
        else if (strcmp(argv[i], "-v") == 0)
            verbose = true;
        else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc)
            which = argv[++i];
        else {
            fprintf(stderr, "usage: softub-demo [--quick] [--device udp|shm|both] [-v]\n");
            return 2;
        }
    }
    const char *devs[2];
    int nd = 0;
    if (strcmp(which, "udp") == 0 || strcmp(which, "both") == 0)
        devs[nd++] = "udp";
    if (strcmp(which, "shm") == 0 || strcmp(which, "both") == 0)
        devs[nd++] = "shm";
    if (!nd) {
        fprintf(stderr, "softub-demo: unknown device %s\n", which);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    printf("softub-demo: two processes, the URMA-style API, verified operations%s\n\n",
           quick ? " (quick)" : "");
    struct result res[2];
    bool all = true;
    for (int i = 0; i < nd; i++) {
        if (!run_device(devs[i], quick, &res[i])) {
            all = false;
            printf("  %s: FAILED\n", devs[i]);
        }
        printf("\n");
    }
    printf("8-byte latency, post -> completion record (us)     WRITE bandwidth (MB/s)\n");
    printf("device   SEND p50/p99    WRITE p50/p99    READ p50/p99      64 KiB      1 MiB\n");
    for (int i = 0; i < nd; i++) {
        if (!res[i].ok) {
            printf("%-6s   failed\n", res[i].dev);
            continue;
        }
        printf("%-6s %6.1f /%6.1f  %6.1f /%6.1f  %6.1f /%6.1f  %10.0f %10.0f\n", res[i].dev,
               res[i].lat[0][0], res[i].lat[0][1], res[i].lat[1][0], res[i].lat[1][1],
               res[i].lat[2][0], res[i].lat[2][1], res[i].bw[0], res[i].bw[1]);
    }
    printf("\n%s\n", all ? "all operations verified" : "FAILED");
    return all ? 0 : 1;
}
