/*
 * Helpers for the API tests over real devices (udp, shm) and across processes: a node
 * (context, JFC, jetty, a registered buffer), bounded waits, every operation checked once,
 * and a forked target that serves until told to stop. Every wait is bounded in time.
 */
#ifndef UB_TEST_API_NET_UTIL_H
#define UB_TEST_API_NET_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <softub/softub.h>
#include "unit/wr_util.h"

#define N_MEM      (2u << 20)
#define N_TOKEN    0x7e57ull
#define N_WAIT_NS  (5ull * 1000000000ull)
#define N_BOOT_MS  10000
#define N_ACCESS   (UB_ACCESS_LOCAL_WRITE | UB_ACCESS_READ | UB_ACCESS_WRITE | UB_ACCESS_ATOMIC)
#define N_RECV_OFF (1u << 20) /* receive buffers live in the second MiB */
#define N_RECV_BUF 4096u

struct node {
    ub_context *ctx;
    ub_jfce *jfce;
    ub_jfc *jfc;
    ub_jetty *jetty;
    ub_jfr *tjfr; /* tag matching */
    uint8_t *mem;
    ub_seg *seg;
};

static inline uint64_t t_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void t_fill(uint8_t *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (uint8_t)(x >> 16);
    }
}

/* Opens a node; returns the ub_context_open code (0 on success) so callers can skip. */
static inline int node_open(struct node *n, const char *uri, const struct ub_context_attr *ca)
{
    memset(n, 0, sizeof(*n));
    int rc = ub_context_open(uri, ca, &n->ctx);
    if (rc)
        return rc;
    n->mem = aligned_alloc(4096, N_MEM);
    if (!n->mem)
        return UB_ENOMEM;
    memset(n->mem, 0, N_MEM);
    if ((rc = ub_jfce_create(n->ctx, &n->jfce)) != 0)
        return rc;
    struct ub_jfc_attr fa = {.depth = 2048, .jfce = n->jfce};
    if ((rc = ub_jfc_create(n->ctx, &fa, &n->jfc)) != 0)
        return rc;
    struct ub_jetty_attr ja;
    memset(&ja, 0, sizeof(ja));
    ja.jfs.depth = 512;
    ja.jfs.jfc = n->jfc;
    ja.jfr.depth = 128;
    ja.jfr.jfc = n->jfc;
    struct ub_jfr_attr ta = {.depth = 16, .jfc = n->jfc, .tag_matching = true};
    if ((rc = ub_jetty_create(n->ctx, &ja, &n->jetty)) != 0 ||
        (rc = ub_jfr_create(n->ctx, &ta, &n->tjfr)) != 0)
        return rc;
    return ub_seg_register(n->ctx, n->mem, N_MEM, N_ACCESS, N_TOKEN, &n->seg);
}

static inline void node_close(struct node *n)
{
    if (n->ctx)
        assert_int_equal(ub_context_close(n->ctx), 0);
    free(n->mem);
    memset(n, 0, sizeof(*n));
}

/* Posts receive buffer i of `size` bytes (the i-th such slot of the second MiB) to jfr. */
static inline int node_post_recv_of(struct node *n, ub_jfr *jfr, uint32_t i, uint32_t size,
                                    uint64_t tag, uint64_t ignore)
{
    struct ub_sge sg = {n->mem + N_RECV_OFF + (size_t)i * size, size, n->seg};
    struct ub_rwr rw;
    memset(&rw, 0, sizeof(rw));
    rw.user_ctx = i;
    rw.sge = &sg;
    rw.num_sge = 1;
    rw.tag = tag;
    rw.ignore = ignore;
    return ub_post_recv(jfr, &rw, NULL);
}

/* Posts receive buffer i (of N_RECV_BUF bytes in the second MiB) to jfr. */
static inline int node_post_recv(struct node *n, ub_jfr *jfr, uint32_t i, uint64_t tag,
                                 uint64_t ignore)
{
    return node_post_recv_of(n, jfr, i, N_RECV_BUF, tag, ignore);
}

/*
 * Waits for one record of n, progressing n and (if not NULL) other in manual mode.
 * Returns 1, or 0 after the bound.
 */
static inline int node_wait(struct node *n, struct node *other, struct ub_cr *cr)
{
    uint64_t end = t_now() + N_WAIT_NS;
    for (;;) {
        int k = ub_poll_jfc(n->jfc, 1, cr);
        if (k)
            return k;
        if (other)
            ub_progress(other->ctx);
        if (t_now() > end)
            return 0;
    }
}

/* Posts wr on n and waits for its record; returns its status (or -1 on timeout). */
static inline int t_run(struct node *n, struct node *other, struct ub_wr *wr)
{
    struct ub_wr *bad = NULL;
    assert_int_equal(ub_post_jetty_send(n->jetty, wr, &bad), 0);
    struct ub_cr cr;
    if (!node_wait(n, other, &cr))
        return -1;
    assert_int_equal(cr.user_ctx, wr->user_ctx);
    return (int)cr.status;
}

/* Descriptors of a node: jetty, tagged JFR, segment. */
#define NODE_DESC (3 * 64)
static inline void node_export(struct node *n, uint8_t *d)
{
    assert_int_equal(ub_jetty_export(n->jetty, d, 64), 64);
    assert_int_equal(ub_jfr_export(n->tjfr, d + 64, 64), 64);
    assert_int_equal(ub_seg_export(n->seg, d + 128, 64), 64);
}

struct peer {
    ub_tjetty *tj, *ttj;
    ub_tseg *ts;
    uint64_t base;
};

/* An 8-byte inline SEND of n's first bytes to the jetty tj, signalled, user_ctx id. */
static inline int node_send8(struct node *n, ub_tjetty *tj, uint64_t id)
{
    struct ub_sge sg = {n->mem, 8, n->seg};
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_SEND;
    wr.flags = UB_WR_COMPLETE | UB_WR_INLINE;
    wr.user_ctx = id;
    wr.sge = &sg;
    wr.num_sge = 1;
    wr.tjetty = tj;
    return ub_post_jetty_send(n->jetty, &wr, NULL);
}

static inline void node_import(struct node *n, const uint8_t *d, struct peer *p)
{
    assert_int_equal(ub_jetty_import(n->ctx, d, 64, &p->tj), 0);
    assert_int_equal(ub_jetty_import(n->ctx, d + 64, 64, &p->ttj), 0);
    assert_int_equal(ub_seg_import(n->ctx, d + 128, 64, N_TOKEN, &p->ts), 0);
    p->base = ub_tseg_base(p->ts);
}

/* Opens a on ua and b on ub (both with ca) and imports b into a as p. */
static inline void t_pair(struct node *a, const char *ua, struct node *b, const char *ub,
                          const struct ub_context_attr *ca, struct peer *p)
{
    assert_int_equal(node_open(a, ua, ca), 0);
    assert_int_equal(node_open(b, ub, ca), 0);
    uint8_t d[NODE_DESC];
    node_export(b, d);
    node_import(a, d, p);
}

/*
 * Every operation from a to the peer p (b's memory seen through `bmem` when b is in this
 * process, NULL otherwise: then b's side is checked by b). other: progressed while
 * waiting (manual b in this thread), or NULL.
 */
static inline void t_every_op(struct node *a, struct node *other, struct peer *p, uint8_t *bmem)
{
    /* WRITE 100 000 B (spans many packets), READ it back. */
    t_fill(a->mem, 100000, 1);
    struct ub_sge sg = {a->mem, 100000, a->seg};
    struct ub_wr wr = t_rma(UB_OP_WRITE, &sg, p->ts, p->base + 4096);
    wr.user_ctx = 1;
    assert_int_equal(t_run(a, other, &wr), UB_CR_SUCCESS);
    if (bmem)
        assert_memory_equal(bmem + 4096, a->mem, 100000);
    struct ub_sge rs = {a->mem + 200000, 100000, a->seg};
    wr = t_rma(UB_OP_READ, &rs, p->ts, p->base + 4096);
    wr.user_ctx = 2;
    assert_int_equal(t_run(a, other, &wr), UB_CR_SUCCESS);
    assert_memory_equal(a->mem + 200000, a->mem, 100000);
    /* Atomics on a word at 512 KiB: FADD, CAS, then READ it. */
    uint64_t old = 1;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_ATOMIC_FADD;
    wr.flags = UB_WR_COMPLETE;
    wr.user_ctx = 3;
    wr.u.atomic.tseg = p->ts;
    wr.u.atomic.addr = p->base + (512u << 10);
    wr.u.atomic.operand = 7;
    wr.u.atomic.result = &old;
    assert_int_equal(t_run(a, other, &wr), UB_CR_SUCCESS);
    assert_int_equal(old, 0);
    wr.opcode = UB_OP_ATOMIC_CAS;
    wr.user_ctx = 4;
    wr.u.atomic.compare = 7;
    wr.u.atomic.operand = 0xfeedull;
    assert_int_equal(t_run(a, other, &wr), UB_CR_SUCCESS);
    assert_int_equal(old, 7);
    struct ub_sge ws = {a->mem + 400000, 8, a->seg};
    wr = t_rma(UB_OP_READ, &ws, p->ts, p->base + (512u << 10));
    wr.user_ctx = 5;
    assert_int_equal(t_run(a, other, &wr), UB_CR_SUCCESS);
    uint64_t v;
    memcpy(&v, a->mem + 400000, 8);
    assert_int_equal(v, 0xfeedull);
    /* SEND with immediate, WRITE with immediate, tagged SEND: the target checks (or bmem). */
    t_fill(a->mem + 500000, 3000, 2);
    struct ub_sge ss = {a->mem + 500000, 3000, a->seg};
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_SEND_IMM;
    wr.flags = UB_WR_COMPLETE;
    wr.user_ctx = 6;
    wr.sge = &ss;
    wr.num_sge = 1;
    wr.imm_data = 0x1111;
    wr.tjetty = p->tj;
    assert_int_equal(t_run(a, other, &wr), UB_CR_SUCCESS);
    t_fill(a->mem + 510000, 2000, 3);
    struct ub_sge wis = {a->mem + 510000, 2000, a->seg};
    wr = t_rma(UB_OP_WRITE_IMM, &wis, p->ts, p->base + (600u << 10));
    wr.user_ctx = 7;
    wr.imm_data = 0x2222;
    wr.tjetty = p->tj;
    assert_int_equal(t_run(a, other, &wr), UB_CR_SUCCESS);
    if (bmem)
        assert_memory_equal(bmem + (600u << 10), a->mem + 510000, 2000);
    t_fill(a->mem + 520000, 1500, 4);
    struct ub_sge tsg = {a->mem + 520000, 1500, a->seg};
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_TSEND;
    wr.flags = UB_WR_COMPLETE;
    wr.user_ctx = 8;
    wr.sge = &tsg;
    wr.num_sge = 1;
    wr.tjetty = p->ttj;
    wr.u.send.tag = 0x5a5a0001;
    assert_int_equal(t_run(a, other, &wr), UB_CR_SUCCESS);
}

/* The target side of t_every_op: post buffers first, then check the three records. */
static inline void t_every_op_post(struct node *b)
{
    assert_int_equal(node_post_recv(b, ub_jetty_jfr(b->jetty), 0, 0, 0), 0);
    assert_int_equal(node_post_recv(b, ub_jetty_jfr(b->jetty), 1, 0, 0), 0);
    assert_int_equal(node_post_recv(b, b->tjfr, 2, 0x5a5a0000, 0xffff), 0);
}

/* Returns 0 if b got exactly the three expected records (polling, bounded). */
static inline int t_every_op_check(struct node *b, struct node *other)
{
    int ok = 0;
    for (int i = 0; i < 3; i++) {
        struct ub_cr cr;
        if (!node_wait(b, other, &cr) || cr.status != UB_CR_SUCCESS)
            return -1;
        uint8_t exp[3000];
        const uint8_t *buf = b->mem + N_RECV_OFF + (size_t)cr.user_ctx * N_RECV_BUF;
        if (cr.opcode == UB_CR_OP_RECV && (cr.flags & UB_CR_F_TAG)) {
            t_fill(exp, 1500, 4);
            ok += cr.tag == 0x5a5a0001 && cr.length == 1500 && !memcmp(buf, exp, 1500);
        } else if (cr.opcode == UB_CR_OP_RECV) {
            t_fill(exp, 3000, 2);
            ok += cr.imm_data == 0x1111 && cr.length == 3000 && !memcmp(buf, exp, 3000);
        } else if (cr.opcode == UB_CR_OP_RECV_WRITE_IMM) {
            t_fill(exp, 2000, 3);
            ok += cr.imm_data == 0x2222 && !memcmp(b->mem + (600u << 10), exp, 2000);
        }
    }
    return ok == 3 ? 0 : -1;
}

/* Every operation from a to b, both in this process (b progressed while a waits); b's
 * descriptors in d when d is not NULL. */
static inline void t_every_op_local(struct node *a, struct node *b, uint8_t *d)
{
    uint8_t own[NODE_DESC];
    if (!d)
        d = own;
    t_every_op_post(b);
    node_export(b, d);
    struct peer p;
    node_import(a, d, &p);
    t_every_op(a, b, &p, b->mem);
    assert_int_equal(t_every_op_check(b, a), 0);
}

/* Waits up to ms for a child; SIGKILLs it after that. Returns its exit code (or 128+sig). */
static inline int t_reap(pid_t pid, int ms)
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

/*
 * A forked target: opens uri with automatic progress, posts t_every_op's buffers, sends
 * its descriptors over the bootstrap uri, then (with check_ops) checks t_every_op's three
 * records and reports "ok"/"bad"; it then serves until the parent sends anything or
 * closes. Never returns.
 */
static inline void t_target_main(const char *uri, const char *boot, bool check_ops)
{
    struct node b;
    struct ub_context_attr ca = {.progress = UB_PROGRESS_AUTO};
    ub_bootstrap *bs = NULL;
    int rc = 1;
    if (node_open(&b, uri, &ca))
        _exit(3);
    t_every_op_post(&b);
    uint8_t d[NODE_DESC];
    node_export(&b, d);
    if (ub_bootstrap_connect(boot, N_BOOT_MS, &bs) ||
        ub_bootstrap_send(bs, d, sizeof(d), N_BOOT_MS))
        _exit(4);
    if (check_ops) {
        int r = t_every_op_check(&b, NULL);
        if (ub_bootstrap_send(bs, r ? "bad" : "ok", r ? 3 : 2, N_BOOT_MS))
            _exit(5);
    }
    char m[16];
    int got = ub_bootstrap_recv(bs, m, sizeof(m), 30000); /* anything, or the parent closed */
    (void)got;
    rc = 0;
    ub_bootstrap_close(bs);
    ub_context_close(b.ctx);
    free(b.mem);
    _exit(rc);
}

/* Forks t_target_main; returns its pid and the connected bootstrap with its descriptors in d. */
static inline pid_t t_fork_target(const char *uri, bool check_ops, ub_bootstrap **bs, uint8_t *d)
{
    ub_bootstrap *l;
    char boot[96];
    assert_int_equal(ub_bootstrap_listen("tcp://127.0.0.1:0", &l), 0);
    assert_true(ub_bootstrap_uri(l, boot, sizeof(boot)) > 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        ub_bootstrap_close(l);
        t_target_main(uri, boot, check_ops);
    }
    assert_int_equal(ub_bootstrap_accept(l, N_BOOT_MS), 0);
    assert_int_equal(ub_bootstrap_recv(l, d, NODE_DESC, N_BOOT_MS), NODE_DESC);
    *bs = l;
    return pid;
}

/*
 * A peer SIGKILLed mid-transfer: a forked target on uri; 16 WRITEs of `size` bytes in
 * flight until 32 succeeded, then the kill. Every request must complete (none hanging),
 * successes before, PEER_UNREACHABLE after, nothing else, the first error within
 * bound_ms of the kill. timeout_ms: the initiator's failure bound.
 */
static inline void t_peer_killed(const char *uri, uint32_t size, uint32_t timeout_ms,
                                 uint64_t bound_ms)
{
    ub_bootstrap *bs;
    uint8_t d[NODE_DESC];
    pid_t pid = t_fork_target(uri, false, &bs, d);
    struct node a;
    struct ub_context_attr ca = {
        .progress = UB_PROGRESS_MANUAL, .timeout_ms = timeout_ms, .retries = 4};
    assert_int_equal(node_open(&a, uri, &ca), 0);
    struct peer p;
    node_import(&a, d, &p);
    t_fill(a.mem, 1u << 20, 6);
    uint32_t posted = 0, ok = 0, unreach = 0, other = 0;
    uint64_t killed_at = 0, first_err = 0, end = t_now() + 10ull * 1000000000ull;
    while (t_now() < end) {
        while (posted - (ok + unreach + other) < 16 && !first_err) {
            struct ub_sge sg = {a.mem, size, a.seg};
            struct ub_wr wr = t_rma(UB_OP_WRITE, &sg, p.ts, p.base);
            wr.user_ctx = posted;
            assert_int_equal(ub_post_jetty_send(a.jetty, &wr, NULL), 0);
            posted++;
        }
        struct ub_cr cr;
        int k = ub_poll_jfc(a.jfc, 1, &cr);
        if (!k)
            continue;
        if (cr.status == UB_CR_SUCCESS)
            ok++;
        else if (cr.status == UB_CR_PEER_UNREACHABLE)
            unreach++;
        else
            other++;
        if (cr.status != UB_CR_SUCCESS && !first_err)
            first_err = t_now();
        if (ok >= 32 && !killed_at) {
            kill(pid, SIGKILL);
            killed_at = t_now();
        }
        if (ok + unreach + other == posted && first_err)
            break;
    }
    assert_true(t_reap(pid, 2000) == 128 + SIGKILL);
    ub_bootstrap_close(bs);
    print_message("%s: killed after %u writes: %u ok, %u unreachable, %u other; first error "
                  "%.1f ms after the kill\n",
                  uri, ok, ok, unreach, other, (double)(first_err - killed_at) / 1e6);
    assert_true(killed_at && first_err);
    assert_int_equal(ok + unreach + other, posted); /* nothing left hanging */
    assert_int_equal(other, 0);
    assert_true(unreach > 0);
    assert_true(first_err - killed_at < bound_ms * 1000000ull);
    node_close(&a);
}

#endif
