/*
 * softub-perf: the endpoint (context, jettys, one segment) and the measurement loops.
 *
 * Memory: one registered region of 2 * half bytes. [0, half) is the target area: the
 * peer WRITEs into it, READs from it, applies atomics at its first word, and every
 * receive buffer points at it (as perftest does, all receives share one buffer).
 * [half, 2 half) holds local sources (WRITE, SEND) and sinks (READ, atomic results).
 *
 * A control word after the two halves (2 half) is where the peer WRITEs a sequence number
 * to say "done" (client) or "my result is on its way" (server): the waiting side polls
 * memory, never a socket, then reads the control message with a blocking call.
 *
 * Waiting: in polling mode (manual progress) ub_poll_jfc drives the context, so the
 * loops simply poll; in event mode (-e: automatic progress) they poll once, rearm the
 * JFC and sleep in ub_wait_jfc. A poll that follows PERF_YIELD_AFTER empty ones yields the CPU
 * first (unless --spin). Every wait is bounded by the endpoint's timeout counted
 * from the last packet received.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>

#include "perf.h"

#define PERF_HUGE (2u << 20) /* x86-64's and arm64's transparent huge page */

#define MAX_LIST 64u
/* Polling yields the CPU before each poll once PERF_YIELD_AFTER polls in a row found nothing:
 * more than a ping-pong's wait on an idle host (~15 over shm, ~10 over udp's sockets). Once
 * PERF_YIELD_QUICK yields in a row returned within PERF_YIELD_BUSY_NS, nobody else wants the
 * CPU, and it waits PERF_YIELD_NS as well before yielding: over udp's packet ring a poll
 * makes no system call and 64 of them pass within a round trip, and a yield's system call
 * would delay the answer that arrives during it. A yield that took longer (another task
 * ran) goes back to yielding early. */
#define PERF_YIELD_AFTER   64u
#define PERF_YIELD_NS      30000u
#define PERF_YIELD_QUICK   8u
#define PERF_YIELD_BUSY_NS 4000u
#define MS                 ((uint64_t)1000000)
#define POLL_BATCH         64u

static int msg_send(struct perf_ep *e, const void *m, size_t len)
{
    return ub_bootstrap_send(e->b, m, len, e->timeout_ms);
}

/*
 * Moves the client off the server's CPU when they share one and another is allowed: the
 * scheduler puts a process woken by a peer on the peer's CPU (the server's accept, a control
 * message), and two busy pollers on one CPU can stay together for a hundred milliseconds
 * before the load balancer parts them, each round trip then a time slice's share (25-40 us
 * where 3-6 is usual). Pinned for a moment to the other CPU, then given back its own set,
 * the client stays where it was moved. Returns whether it moved.
 */
bool perf_part(uint32_t peer_cpu)
{
    int cpu = sched_getcpu();
    cpu_set_t own, one;
    if (cpu < 0 || (uint32_t)cpu != peer_cpu || sched_getaffinity(0, sizeof(own), &own))
        return false;
    for (size_t c = 0; c < CPU_SETSIZE; c++) {
        if (c == (size_t)cpu || !CPU_ISSET(c, &own))
            continue;
        CPU_ZERO(&one);
        CPU_SET(c, &one);
        bool moved = sched_setaffinity(0, sizeof(one), &one) == 0;
        (void)sched_setaffinity(0, sizeof(own), &own);
        return moved;
    }
    return false; /* one CPU: nowhere to go */
}

/* ---- setup ------------------------------------------------------------------------------ */

static int post_recv(struct perf_ep *e, uint32_t j)
{
    struct ub_sge sg = {e->buf, (uint32_t)(e->half > UINT32_MAX ? UINT32_MAX : e->half), e->seg};
    struct ub_rwr rw;
    memset(&rw, 0, sizeof(rw));
    rw.user_ctx = j;
    rw.sge = &sg;
    rw.num_sge = 1;
    rw.tag = PERF_TAG;
    int rc = ub_post_jetty_recv(e->jetty[j], &rw, NULL);
    if (rc == 0)
        e->recv_posted++;
    return rc;
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "softub-perf: %s: %s\n", what, ub_strerror(rc));
    return rc < 0 ? rc : UB_EIO;
}

/* Requests per post: -l, at most MAX_LIST. */
static uint32_t post_list_max(const struct perf_ep *e)
{
    uint32_t list = e->cfg.post_list;
    return list == 0 ? 1 : list > MAX_LIST ? MAX_LIST : list;
}

int perf_setup(struct perf_ep *e)
{
    const struct perf_cfg *c = &e->cfg;
    char uri[256];
    if (c->dev == DEV_SHM)
        snprintf(uri, sizeof(uri), "shm://0");
    else
        /* The context's MTU is at most the device's: raise the device's too. */
        snprintf(uri, sizeof(uri), "udp://%s:0?paths=%u%s%.0u%s%s", e->local_ip,
                 c->paths ? c->paths : 1, c->mtu ? "&mtu=" : "", c->mtu, c->udp_opts[0] ? "&" : "",
                 c->udp_opts);
    struct ub_context_attr ca;
    memset(&ca, 0, sizeof(ca));
    ca.progress = c->event ? UB_PROGRESS_AUTO : UB_PROGRESS_MANUAL;
    ca.mtu = c->mtu;
    ca.cc = c->cc[0] ? c->cc : NULL;
    ca.lb = c->lb[0] ? c->lb : NULL;
    ca.spray_burst = c->burst;
    ca.cma_min = c->cma_min;
    uint32_t list = post_list_max(e);
    size_t wsz = list * sizeof(*e->wr), ssz = list * sizeof(*e->sg);
    uint8_t *scratch = calloc(1, wsz + ssz + POLL_BATCH * sizeof(*e->cr));
    if (!scratch)
        return fail("memory", UB_ENOMEM);
    e->wr = (struct ub_wr *)(void *)scratch;
    e->sg = (struct ub_sge *)(void *)(scratch + wsz);
    e->cr = (struct ub_cr *)(void *)(scratch + wsz + ssz);
    int rc = ub_context_open(uri, &ca, &e->ctx);
    if (rc == UB_EINVAL && (ca.cc || ca.lb))
        return fail("congestion control / load balancer", rc);
    if (rc)
        return fail(uri, rc);
    e->half = (perf_cfg_top(c) + 4095) & ~(size_t)4095;
    size_t total = 2 * e->half + 4096; /* + the control words */
    /* --huge: transparent huge pages where the kernel gives them on request (its madvise
     * mode), so that a single copy (process_vm_readv) looks up a page per 2 MiB instead of
     * one per 4 KiB (docs/perf-journal.md, "Huge pages"). */
    bool huge = c->huge && total >= PERF_HUGE;
    if (huge)
        total = (total + PERF_HUGE - 1) & ~(size_t)(PERF_HUGE - 1);
    e->buf = aligned_alloc(huge ? PERF_HUGE : 4096, total);
    if (!e->buf)
        return fail("memory", UB_ENOMEM);
    if (huge)
        (void)madvise(e->buf, total, MADV_HUGEPAGE); /* a hint: without it, small pages */
    memset(e->buf, 0, total);
    uint32_t all = UB_ACCESS_LOCAL_WRITE | UB_ACCESS_READ | UB_ACCESS_WRITE | UB_ACCESS_ATOMIC;
    if ((rc = ub_seg_register(e->ctx, e->buf, total, all, PERF_TOKEN, &e->seg)) != 0)
        return fail("ub_seg_register", rc);
    if (c->event && (rc = ub_jfce_create(e->ctx, &e->jfce)) != 0)
        return fail("ub_jfce_create", rc);
    struct ub_jfc_attr fa = {.depth = c->jettys * (c->tx_depth + c->rx_depth) + 64,
                             .jfce = e->jfce};
    if ((rc = ub_jfc_create(e->ctx, &fa, &e->jfc)) != 0)
        return fail("ub_jfc_create", rc);
    for (uint32_t j = 0; j < c->jettys; j++) {
        struct ub_jetty_attr ja;
        memset(&ja, 0, sizeof(ja));
        ja.jfs.depth = c->tx_depth;
        ja.jfs.jfc = e->jfc;
        ja.jfs.max_sge = 1;
        /* At least the control flag's 8 bytes (raise_flag), whatever -I says for the test. */
        ja.jfs.max_inline = c->inline_sz > 8 ? c->inline_sz : 8;
        ja.jfs.tm = c->tm ? UB_TM_ROD : UB_TM_RUD;
        ja.jfr.depth = c->rx_depth;
        ja.jfr.max_sge = 1;
        ja.jfr.jfc = e->jfc;
        ja.jfr.tag_matching = c->tagged != 0;
        if ((rc = ub_jetty_create(e->ctx, &ja, &e->jetty[j])) != 0)
            return fail("ub_jetty_create", rc);
        for (uint32_t i = 0; i < c->rx_depth; i++)
            if ((rc = post_recv(e, j)) != 0)
                return fail("ub_post_jetty_recv", rc);
    }
    return 0;
}

int perf_export(struct perf_ep *e, uint8_t *desc, size_t cap)
{
    size_t need = (size_t)(e->cfg.jettys + 1) * 64;
    if (cap < need)
        return UB_ELENGTH;
    for (uint32_t j = 0; j < e->cfg.jettys; j++)
        if (ub_jetty_export(e->jetty[j], desc + 64 * j, 64) < 0)
            return UB_EIO;
    if (ub_seg_export(e->seg, desc + 64 * e->cfg.jettys, 64) < 0)
        return UB_EIO;
    return (int)need;
}

int perf_connect_peer(struct perf_ep *e, const uint8_t *desc, size_t len)
{
    if (len != (size_t)(e->cfg.jettys + 1) * 64)
        return fail("peer descriptors", UB_ELENGTH);
    int rc;
    for (uint32_t j = 0; j < e->cfg.jettys; j++)
        if ((rc = ub_jetty_import(e->ctx, desc + 64 * j, 64, &e->tj[j])) != 0)
            return fail("ub_jetty_import", rc);
    if ((rc = ub_seg_import(e->ctx, desc + 64 * e->cfg.jettys, 64, PERF_TOKEN, &e->ts)) != 0)
        return fail("ub_seg_import", rc);
    e->rbase = ub_tseg_base(e->ts);
    return 0;
}

void perf_teardown(struct perf_ep *e)
{
    if (e->ctx)
        ub_context_close(e->ctx); /* destroys everything created from it */
    e->ctx = NULL;
    free(e->buf);
    e->buf = NULL;
    free(e->wr); /* the scratch's one allocation */
    e->wr = NULL;
    if (e->b)
        ub_bootstrap_close(e->b);
    e->b = NULL;
}

/* ---- completions and waiting ------------------------------------------------------------ */

static void handle(struct perf_ep *e, const struct ub_cr *cr)
{
    if (cr->status != UB_CR_SUCCESS) {
        if (cr->status == UB_CR_FLUSHED)
            return;
        if (!e->failed)
            fprintf(stderr, "softub-perf: completion record: %s\n", ub_cr_status_str(cr->status));
        e->failed++;
    }
    if (cr->opcode == UB_CR_OP_RECV || cr->opcode == UB_CR_OP_RECV_WRITE_IMM) {
        uint32_t j = (uint32_t)cr->user_ctx;
        e->recvs++;
        if (j >= e->cfg.jettys)
            return;
        /*
         * Polling: the buffer goes back at the next poll, after whatever the caller does
         * with this record (a ping-pong's answer leaves first, the post off its path). Under
         * manual progress nothing is received in between; the progress thread of event mode
         * could, so there it goes back at once.
         */
        if (e->cfg.event) {
            if (post_recv(e, j) != 0)
                e->failed++;
        } else {
            e->repost[j]++;
            e->repost_n++;
        }
        return;
    }
    /* A request's user_ctx: its jetty, and above bit 32 how many requests its record covers
     * (itself and the unsignalled ones before it, -Q); an error record covers itself. */
    uint32_t j = (uint32_t)cr->user_ctx;
    uint32_t n = (uint32_t)(cr->user_ctx >> 32);
    if (!n || cr->status != UB_CR_SUCCESS)
        n = 1;
    if (j < PERF_MAX_JETTY)
        e->outstanding[j] -= n < e->outstanding[j] ? n : e->outstanding[j];
    e->completed += n;
}

/* The receives handle() left to post again. */
static void repost(struct perf_ep *e)
{
    for (uint32_t j = 0; e->repost_n && j < e->cfg.jettys; j++)
        for (; e->repost[j]; e->repost[j]--, e->repost_n--)
            if (post_recv(e, j) != 0)
                e->failed++;
}

/* Before a control message: what this endpoint still owes the peer leaves first, with the
 * receive buffers back for whatever that round takes in. */
static void settle(struct perf_ep *e)
{
    repost(e);
    ub_progress(e->ctx);
}

static int drain(struct perf_ep *e)
{
    if (e->repost_n)
        repost(e);
    struct ub_cr *cr = e->cr;
    int n = ub_poll_jfc(e->jfc, POLL_BATCH, cr);
    for (int i = 0; i < n; i++)
        handle(e, &cr[i]);
    return n;
}

/* One step of a wait: poll (manual progress runs inside), or sleep on the event channel. */
static int step(struct perf_ep *e)
{
    int n = drain(e);
    if (n != 0) {
        e->idle = 0;
        e->idle_long = false;
        return n;
    }
    if (!e->cfg.event) {
        /* Nothing for a while: the peer (or the kernel's half of the loopback) may be waiting
         * for this CPU. Yielding costs a system call when nobody is; spinning through a whole
         * time slice costs milliseconds when somebody is (docs/perf-journal.md, "Polling on a
         * shared CPU"). */
        if (e->cfg.spin || ++e->idle < PERF_YIELD_AFTER)
            return 0;
        if (e->cpu_alone && !e->idle_long) {
            if (e->idle == PERF_YIELD_AFTER)
                e->idle_since = perf_now_ns();
            else if (e->idle % 16 == 0)
                e->idle_long = perf_now_ns() - e->idle_since >= PERF_YIELD_NS;
            if (!e->idle_long)
                return 0;
        }
        uint64_t t = perf_now_ns();
        sched_yield();
        if (perf_now_ns() - t >= PERF_YIELD_BUSY_NS) {
            e->cpu_alone = false;
            e->quick_yields = 0;
        } else if (++e->quick_yields >= PERF_YIELD_QUICK) {
            e->cpu_alone = true;
        }
        return 0;
    }
    ub_rearm_jfc(e->jfc, false);
    if ((n = drain(e)) != 0)
        return n;
    ub_jfc *fired[8];
    int k = ub_wait_jfc(e->jfce, 8, 1, fired);
    if (k > 0)
        ub_ack_jfc(e->jfc, (uint32_t)k);
    return 0;
}

/* A bound on waiting that restarts whenever packets come in. */
struct bound {
    uint64_t deadline, rx, next_check, next_stats, extra_ns;
    unsigned k;
};

/* The bound starts at its first look at the clock, 256 polls in: a latency run waits once
 * per round trip, and a clock reading there would be part of every sample. */
static void bound_init(struct bound *b, uint64_t extra_ns)
{
    memset(b, 0, sizeof(*b));
    b->extra_ns = extra_ns;
}

/* Every so often: 1 when a millisecond passed (the caller may look at its control channel),
 * UB_ETIMEDOUT when nothing arrived for the whole bound (at most an eighth more), else 0. */
static int bound_tick(struct perf_ep *e, struct bound *b)
{
    if (++b->k % 256)
        return 0;
    uint64_t t = perf_now_ns(), bound = (uint64_t)e->timeout_ms * MS;
    if (!b->deadline) {
        b->deadline = t + bound + b->extra_ns;
        b->next_check = t + MS;
        b->next_stats = t + bound / 8;
        return 0;
    }
    if (t < b->next_check)
        return 0;
    b->next_check = t + MS;
    /* The statistics cost a system call per udp socket (its kernel drop count): looked at an
     * eighth of the bound apart, and before giving up, not inside every millisecond. */
    if (t >= b->next_stats || t > b->deadline) {
        b->next_stats = t + bound / 8;
        struct ub_context_stats st;
        if (ub_context_stats(e->ctx, &st) == 0 && st.rx_pkts != b->rx) {
            b->rx = st.rx_pkts;
            b->deadline = t + bound;
        }
    }
    if (t > b->deadline) {
        fprintf(stderr, "softub-perf: nothing received for %d ms: giving up\n", e->timeout_ms);
        return UB_ETIMEDOUT;
    }
    return 1;
}

#define WAIT_UNTIL(e, cond)                      \
    do {                                         \
        struct bound bd_;                        \
        bound_init(&bd_, 0);                     \
        while (!(cond)) {                        \
            int rc_ = step(e);                   \
            if (rc_ < 0)                         \
                return fail("ub_poll_jfc", rc_); \
            if (e->failed)                       \
                return UB_EIO;                   \
            if ((rc_ = bound_tick(e, &bd_)) < 0) \
                return rc_;                      \
        }                                        \
    } while (0)

static volatile uint64_t *ctl_word(struct perf_ep *e)
{
    return (volatile uint64_t *)(void *)(e->buf + 2 * e->half);
}

/* Runs the endpoint (serving the peer's requests) until the peer's next control flag, then
 * reads its control message (blocking, bounded). */
static int serve_until_msg(struct perf_ep *e, void *msg, size_t cap, uint64_t extra_ns)
{
    struct bound bd;
    bound_init(&bd, extra_ns);
    uint64_t want = e->ctl_seen + 1;
    while (*ctl_word(e) < want) {
        int rc = step(e);
        if (rc < 0)
            return fail("ub_poll_jfc", rc);
        if ((rc = bound_tick(e, &bd)) < 0)
            return rc;
    }
    e->ctl_seen = want;
    settle(e);
    return ub_bootstrap_recv(e->b, msg, cap, e->timeout_ms);
}

static uint64_t in_flight(const struct perf_ep *e)
{
    uint64_t n = 0;
    for (uint32_t j = 0; j < e->cfg.jettys; j++)
        n += e->outstanding[j];
    return n;
}

/* WRITEs our next control flag into the peer's control word and waits for its completion. */
static int raise_flag(struct perf_ep *e)
{
    uint64_t *src = (uint64_t *)(void *)(e->buf + 2 * e->half + 64);
    *src = ++e->ctl_seq;
    struct ub_sge sg = {src, 8, e->seg};
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_WRITE;
    wr.flags = UB_WR_COMPLETE | UB_WR_INLINE;
    wr.sge = &sg;
    wr.num_sge = 1;
    wr.u.rma.tseg = e->ts;
    wr.u.rma.addr = e->rbase + 2 * e->half;
    /* Alone in flight, so its completion is the next one. */
    WAIT_UNTIL(e, in_flight(e) == 0);
    uint64_t done0 = e->completed;
    int rc;
    WAIT_UNTIL(e, (rc = ub_post_jetty_send(e->jetty[0], &wr, NULL)) != UB_EFULL);
    if (rc)
        return fail("ub_post_jetty_send", rc);
    e->outstanding[0]++;
    WAIT_UNTIL(e, e->completed > done0);
    return 0;
}

/* ---- requests ----------------------------------------------------------------------------- */

static enum ub_opcode base_op(enum perf_test t)
{
    switch (t) {
    case T_READ_LAT:
    case T_READ_BW:
        return UB_OP_READ;
    case T_WRITE_LAT:
    case T_WRITE_BW:
        return UB_OP_WRITE;
    case T_SEND_LAT:
    case T_SEND_BW:
        return UB_OP_SEND;
    default:
        return UB_OP_ATOMIC_FADD;
    }
}

static void build(struct perf_ep *e, struct ub_wr *wr, struct ub_sge *sg, enum ub_opcode op,
                  uint64_t size, uint32_t j)
{
    memset(wr, 0, sizeof(*wr));
    wr->user_ctx = j;
    wr->opcode = op;
    wr->flags = UB_WR_COMPLETE;
    if (e->cfg.order == 1)
        wr->flags |= UB_WR_ORDER_RO;
    else if (e->cfg.order == 2)
        wr->flags |= UB_WR_ORDER_SO;
    sg->addr = e->buf + e->half;
    sg->len = (uint32_t)size;
    sg->seg = e->seg;
    wr->sge = sg;
    wr->num_sge = 1;
    switch (op) {
    case UB_OP_READ:
    case UB_OP_WRITE:
        wr->u.rma.tseg = e->ts;
        wr->u.rma.addr = e->rbase;
        break;
    case UB_OP_WRITE_IMM:
        wr->u.rma.tseg = e->ts;
        wr->u.rma.addr = e->rbase;
        wr->tjetty = e->tj[j];
        wr->imm_data = 0x50e4f;
        break;
    case UB_OP_SEND:
        wr->tjetty = e->tj[j];
        if (e->cfg.tagged) {
            wr->opcode = UB_OP_TSEND;
            wr->u.send.tag = PERF_TAG;
        }
        break;
    default: /* FADD on the peer's first word (one per jetty) */
        wr->sge = NULL;
        wr->num_sge = 0;
        wr->u.atomic.tseg = e->ts;
        wr->u.atomic.addr = e->rbase + 8ull * j;
        wr->u.atomic.operand = 1;
        wr->u.atomic.result = (uint64_t *)(void *)(e->buf + e->half + 8ull * j);
        break;
    }
    if ((op == UB_OP_WRITE || op == UB_OP_WRITE_IMM || op == UB_OP_SEND) &&
        size <= e->cfg.inline_sz)
        wr->flags |= UB_WR_INLINE;
}

/* Whether wr, the next request on jetty j, asks for a record: every cq-th one does, and the
 * last of a run (last). Its record then covers it and the unsignalled ones before it. */
static void signal_next(struct perf_ep *e, uint32_t j, uint32_t cq, bool last, struct ub_wr *wr)
{
    uint32_t covered = ++e->unsig[j];
    if (cq > 1) /* a record then says that those before it are over too */
        wr->flags |= UB_WR_INORDER_COMP;
    if (cq > 1 && covered < cq && !last) {
        wr->flags &= ~(uint32_t)UB_WR_COMPLETE;
        return;
    }
    wr->user_ctx |= (uint64_t)covered << 32;
    e->unsig[j] = 0;
}

/* Posts a chain of k requests on jetty j, a record every cq (-Q; last: the chain ends the
 * run); returns how many it took (0 when full). */
static int post_ops(struct perf_ep *e, uint32_t j, enum ub_opcode op, uint64_t size, uint32_t k,
                    uint32_t cq, bool last)
{
    struct ub_wr *wr = e->wr;
    struct ub_sge *sg = e->sg;
    uint32_t unsig = e->unsig[j];
    for (uint32_t i = 0; i < k; i++) {
        build(e, &wr[i], &sg[i], op, size, j);
        signal_next(e, j, cq, last && i + 1 == k, &wr[i]);
        wr[i].next = i + 1 < k ? &wr[i + 1] : NULL;
    }
    struct ub_wr *bad = NULL;
    int rc = ub_post_jetty_send(e->jetty[j], wr, &bad);
    uint32_t took = rc == 0 ? k : bad ? (uint32_t)(bad - wr) : 0;
    if (took < k) { /* the count as the requests taken left it */
        e->unsig[j] = unsig;
        for (uint32_t i = 0; i < took; i++)
            e->unsig[j] = (wr[i].flags & UB_WR_COMPLETE) ? 0 : e->unsig[j] + 1;
    }
    e->outstanding[j] += took;
    if (rc && rc != UB_EFULL)
        return fail("ub_post_jetty_send", rc);
    return (int)took;
}

static int post_one(struct perf_ep *e, enum ub_opcode op, uint64_t size)
{
    int n;
    WAIT_UNTIL(e, (n = post_ops(e, 0, op, size, 1, 1, true)) != 0);
    return n < 0 ? n : 0;
}

/* ---- latency ------------------------------------------------------------------------------ */

int perf_client_lat(struct perf_ep *e, const struct perf_run *r, uint64_t **samples, size_t *n)
{
    enum perf_test t = (enum perf_test)e->cfg.test;
    enum ub_opcode op = base_op(t);
    /* Ping-pong: WRITE is noticed by polling the last byte, unless in event mode, where it
     * carries an immediate so the receiver gets a record to wake for. */
    bool memwait = t == T_WRITE_LAT && !e->cfg.event;
    if (t == T_WRITE_LAT && e->cfg.event)
        op = UB_OP_WRITE_IMM;
    bool pingpong = t == T_WRITE_LAT || t == T_SEND_LAT;
    uint64_t size = r->size;
    size_t cap = r->duration_ms ? 65536 : (size_t)r->iters;
    if (!cap)
        cap = 1;
    uint64_t *s = malloc(cap * sizeof(*s));
    *samples = s;
    *n = 0;
    if (!s)
        return fail("memory", UB_ENOMEM);
    /* Touched now: a page of samples first written inside a round trip (every 512th) would
     * add its page fault, a microsecond or two, to that sample. Not with zeros: the compiler
     * turns malloc and a zeroing memset into calloc, which leaves fresh pages untouched. */
    memset(s, 0xff, cap * sizeof(*s));
    volatile uint8_t *tgt = e->buf + size - 1;
    uint8_t *src = e->buf + e->half + size - 1;
    uint64_t w = e->cfg.warmup, end = 0, prev = 0;
    for (uint64_t i = 0;; i++) {
        /* One clock reading per iteration, as perftest and ucx_perftest take theirs: the time
         * a request is posted ends the previous one's round trip. */
        uint64_t now = perf_now_ns();
        if (i > w) {
            s[(*n)++] = now - prev;
            if (*n == cap && r->duration_ms) { /* grown and touched between round trips */
                uint64_t *g = realloc(s, 2 * cap * sizeof(*s));
                if (!g)
                    return fail("memory", UB_ENOMEM);
                *samples = s = g;
                memset(s + cap, 0xff, cap * sizeof(*s));
                cap *= 2;
                now = perf_now_ns();
            }
        }
        if (i == w && r->duration_ms)
            end = now + r->duration_ms * MS;
        if (!r->duration_ms && i >= w + r->iters)
            break;
        if (end && now >= end)
            break;
        prev = now;
        uint8_t v = (uint8_t)(i % 255 + 1);
        *src = v;
        uint64_t recvs0 = e->recvs, done0 = e->completed;
        int rc = post_one(e, op, size);
        if (rc)
            return rc;
        if (memwait)
            WAIT_UNTIL(e, *tgt == v);
        else if (pingpong)
            WAIT_UNTIL(e, e->recvs > recvs0);
        else
            WAIT_UNTIL(e, e->completed > done0);
    }
    return 0;
}

/* The server's half of a ping-pong: answers every ping until the client's DONE. */
static int pong(struct perf_ep *e, const struct perf_run *r, void *msg, size_t cap)
{
    enum perf_test t = (enum perf_test)e->cfg.test;
    bool memwait = t == T_WRITE_LAT && !e->cfg.event;
    enum ub_opcode op = t == T_SEND_LAT ? UB_OP_SEND : memwait ? UB_OP_WRITE : UB_OP_WRITE_IMM;
    uint64_t size = r->size, answered = e->recvs;
    volatile uint8_t *tgt = e->buf + size - 1;
    uint8_t *src = e->buf + e->half + size - 1;
    struct bound bd;
    bound_init(&bd, 0);
    for (uint64_t i = 0;;) {
        uint8_t v = (uint8_t)(i % 255 + 1);
        bool ping = memwait ? *tgt == v : e->recvs > answered;
        if (ping) {
            *src = v;
            answered++;
            i++;
            int rc = post_one(e, op, size);
            if (rc)
                return rc;
            continue;
        }
        if (*ctl_word(e) > e->ctl_seen) {
            e->ctl_seen++;
            settle(e);
            return ub_bootstrap_recv(e->b, msg, cap, e->timeout_ms);
        }
        int rc = step(e);
        if (rc < 0)
            return fail("ub_poll_jfc", rc);
        if ((rc = bound_tick(e, &bd)) < 0)
            return rc;
    }
}

/* ---- bandwidth ---------------------------------------------------------------------------- */

/* A run that ends by its duration may leave requests unsignalled (-Q): a NOP on their jetty,
 * reported in order after them, covers them (not itself). */
static int cover_tail(struct perf_ep *e)
{
    for (uint32_t j = 0; j < e->cfg.jettys; j++) {
        if (!e->unsig[j])
            continue;
        struct ub_wr wr;
        memset(&wr, 0, sizeof(wr));
        wr.opcode = UB_OP_NOP;
        wr.flags = UB_WR_COMPLETE | UB_WR_INORDER_COMP;
        wr.user_ctx = j | (uint64_t)e->unsig[j] << 32;
        int rc;
        WAIT_UNTIL(e, (rc = ub_post_jetty_send(e->jetty[j], &wr, NULL)) != UB_EFULL);
        if (rc)
            return fail("ub_post_jetty_send", rc);
        e->unsig[j] = 0;
    }
    return 0;
}

static int bw_active(struct perf_ep *e, const struct perf_run *r, struct perf_result *res)
{
    enum ub_opcode op = base_op((enum perf_test)e->cfg.test);
    uint64_t size = op == UB_OP_ATOMIC_FADD ? 8 : r->size;
    uint32_t depth = e->cfg.tx_depth, list = post_list_max(e);
    if (list > depth)
        list = depth;
    if (!list)
        list = 1;
    /* A record must come before a jetty's window is full (whole post lists of it). */
    uint32_t cq = e->cfg.cq_mod, room = depth / list * list;
    if (cq > room)
        cq = room ? room : 1;
    uint64_t total = r->duration_ms ? UINT64_MAX : r->iters, posted = 0;
    uint64_t done0 = e->completed;
    uint64_t t0 = perf_now_ns(), end = r->duration_ms ? t0 + r->duration_ms * MS : 0;
    uint64_t win_t = t0, win_done = 0;
    double peak = 0;
    bool stop = false;
    struct bound bd;
    bound_init(&bd, 0);
    while (!stop || e->completed - done0 < posted) {
        if (!stop) {
            for (uint32_t j = 0; j < e->cfg.jettys && posted < total; j++) {
                while (e->outstanding[j] + list <= depth && posted < total) {
                    uint64_t k = total - posted < list ? total - posted : list;
                    int took = post_ops(e, j, op, size, (uint32_t)k, cq, posted + k >= total);
                    if (took < 0)
                        return took;
                    posted += (uint64_t)took;
                    if ((uint64_t)took < k)
                        break;
                }
            }
            if (posted >= total)
                stop = true;
        }
        int rc = step(e);
        if (rc < 0)
            return fail("ub_poll_jfc", rc);
        if (e->failed)
            return UB_EIO;
        if ((rc = bound_tick(e, &bd)) < 0)
            return rc;
        if (rc == 1) {
            uint64_t t = perf_now_ns(), d = e->completed - done0;
            if (end && t >= end && !stop) {
                stop = true;
                if ((rc = cover_tail(e)) != 0)
                    return rc;
            }
            if (t - win_t >= 10 * MS) {
                double mbs = (double)(d - win_done) * (double)size * 1e3 / (double)(t - win_t);
                if (mbs > peak)
                    peak = mbs;
                win_t = t;
                win_done = d;
            }
        }
    }
    uint64_t t1 = perf_now_ns();
    res->ops = e->completed - done0;
    res->bytes = res->ops * size;
    res->ns = t1 - t0;
    double avg = res->ns ? (double)res->bytes * 1e3 / (double)res->ns : 0;
    res->peak_mbs = peak > avg ? peak : avg;
    return 0;
}

int perf_client_bw(struct perf_ep *e, const struct perf_run *r, struct perf_result *mine,
                   struct perf_result *peer)
{
    memset(mine, 0, sizeof(*mine));
    mine->type = M_RESULT;
    int rc = bw_active(e, r, mine);
    if (rc)
        return rc;
    mine->ok = 1;
    return perf_client_done(e, peer);
}

int perf_client_done(struct perf_ep *e, struct perf_result *peer)
{
    uint32_t done = M_DONE;
    int rc = raise_flag(e);
    if (rc)
        return rc;
    rc = msg_send(e, &done, sizeof(done));
    if (rc)
        return fail("bootstrap", rc);
    /* Keep serving the peer (its own traffic when bidirectional) until its result. */
    uint8_t msg[256];
    int m = serve_until_msg(e, msg, sizeof(msg), 0);
    if (m < (int)sizeof(*peer))
        return fail("waiting for the server's result", m < 0 ? m : UB_EBADMSG);
    memcpy(peer, msg, sizeof(*peer));
    return peer->type == M_RESULT && peer->ok ? 0 : UB_EIO;
}

int perf_server_run(struct perf_ep *e, const struct perf_run *r)
{
    enum perf_test t = (enum perf_test)e->cfg.test;
    memset(e->buf, 0, e->half); /* a stale last byte must not look like a ping */
    struct perf_result res;
    memset(&res, 0, sizeof(res));
    res.type = M_RESULT;
    /* Where it runs, for the client to part the two (perf_part). */
    int cpu = sched_getcpu();
    uint32_t ready[2] = {M_READY, cpu < 0 ? UINT32_MAX : (uint32_t)cpu};
    int rc = msg_send(e, ready, sizeof(ready));
    if (rc)
        return fail("bootstrap", rc);
    uint8_t msg[256];
    int m;
    uint64_t extra = r->duration_ms * MS;
    if (t == T_SEND_LAT || t == T_WRITE_LAT) {
        m = pong(e, r, msg, sizeof(msg));
    } else {
        if (!perf_is_lat(t) && e->cfg.bidir && (rc = bw_active(e, r, &res)) != 0)
            return rc;
        m = serve_until_msg(e, msg, sizeof(msg), extra);
    }
    if (m < 4)
        return fail("waiting for the client", m < 0 ? m : UB_EBADMSG);
    uint32_t type;
    memcpy(&type, msg, 4);
    if (type != M_DONE)
        return fail("control message out of place", UB_EPROTO);
    res.ok = !e->failed;
    if ((rc = raise_flag(e)) != 0)
        return rc;
    if ((rc = msg_send(e, &res, sizeof(res))) != 0)
        return fail("bootstrap", rc);
    return e->failed ? UB_EIO : 0;
}
