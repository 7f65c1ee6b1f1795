/*
 * Single copy (cross-memory attach) for large RMA and messages between two processes over
 * shm://: 64 MiB WRITE and READ copied once by the target (counters prove the path, data is
 * verified, bandwidth printed next to the packet path on the same size), WRITE_IMM and
 * several SGEs, SEND_IMM into a receive buffer of two elements (also deferred until the
 * buffer is posted, and too long for it), protection (bad token, out of bounds, revoked
 * segment) touching no memory, fallback to packets when either side turns single copy off,
 * small transfers on packets.
 * Skipped when the kernel does not let this process reach its child (ptrace policy).
 */
#define _GNU_SOURCE
#include <sys/uio.h>

#include "ses/ses.h"
#include "unit/api_net_util.h"

#define C_BIG   (64u << 20)
#define C_TMEM  (C_BIG + (1u << 20)) /* target: 64 MiB, then a MiB of receive buffers */
#define C_IMEM  (C_BIG + (4u << 20)) /* initiator */
#define C_TOKEN 0xc0ffee11ull
#define C_WAIT  (30ull * 1000000000ull)

static uint64_t probe_word = 0x5eed5eed5eedull;

/* Commands to the target process, and its answer. */
struct cmd {
    char op; /* f: fill, c: check, s: stats, i: WRITE_IMM record, r: post a receive buffer,
              * m: a message's record, u: unregister, q: quit */
    uint32_t off, len, seed;
};
struct answer {
    int32_t ok;
    uint32_t status, len; /* i, m: the record's */
    uint64_t cma_done, cma_bytes, cma_refused, imm;
};

/* Waits for one record of opcode op: a->ok when it came, succeeded and is op. */
static void take_record(ub_jfc *jfc, enum ub_cr_opcode op, struct answer *a)
{
    struct ub_cr cr;
    a->ok = 0;
    for (uint64_t end = t_now() + N_WAIT_NS; t_now() < end;) {
        if (ub_poll_jfc(jfc, 1, &cr) == 1) {
            a->ok = cr.status == UB_CR_SUCCESS && cr.opcode == op;
            a->status = (uint32_t)cr.status;
            a->len = cr.length;
            a->imm = (cr.flags & UB_CR_F_IMM) ? cr.imm_data : 0;
            return;
        }
    }
}

static void target_main(const char *boot, uint32_t cma_min)
{
    struct ub_context_attr ca = {.progress = UB_PROGRESS_AUTO, .cma_min = cma_min};
    ub_context *ctx;
    ub_jfc *jfc;
    ub_jetty *jetty;
    ub_seg *seg;
    ub_bootstrap *bs;
    uint8_t *mem = aligned_alloc(4096, C_TMEM);
    if (!mem || ub_context_open("shm://0", &ca, &ctx))
        _exit(3);
    memset(mem, 0, C_TMEM);
    struct ub_jfc_attr fa = {.depth = 64};
    struct ub_jetty_attr ja;
    memset(&ja, 0, sizeof(ja));
    ja.jfs.depth = 8;
    ja.jfr.depth = 16;
    if (ub_jfc_create(ctx, &fa, &jfc))
        _exit(3);
    ja.jfs.jfc = jfc;
    ja.jfr.jfc = jfc;
    if (ub_jetty_create(ctx, &ja, &jetty) ||
        ub_seg_register(ctx, mem, C_TMEM, N_ACCESS, C_TOKEN, &seg))
        _exit(3);
    for (uint32_t i = 0; i < 4; i++) {
        struct ub_sge sg = {mem + C_BIG + i * 4096u, 4096, seg};
        struct ub_rwr rw;
        memset(&rw, 0, sizeof(rw));
        rw.user_ctx = i;
        rw.sge = &sg;
        rw.num_sge = 1;
        if (ub_post_recv(ub_jetty_jfr(jetty), &rw, NULL))
            _exit(3);
    }
    uint8_t d[128];
    if (ub_jetty_export(jetty, d, 64) != 64 || ub_seg_export(seg, d + 64, 64) != 64)
        _exit(3);
    if (ub_bootstrap_connect(boot, N_BOOT_MS, &bs) || ub_bootstrap_send(bs, d, 128, N_BOOT_MS))
        _exit(4);
    for (;;) {
        struct cmd c;
        if (ub_bootstrap_recv(bs, &c, sizeof(c), 60000) != (int)sizeof(c) || c.op == 'q')
            break;
        struct answer a;
        memset(&a, 0, sizeof(a));
        a.ok = 1;
        if (c.op == 'f') {
            t_fill(mem + c.off, c.len, c.seed);
        } else if (c.op == 'c') {
            uint8_t *exp = malloc(c.len);
            t_fill(exp, c.len, c.seed);
            a.ok = memcmp(mem + c.off, exp, c.len) == 0;
            free(exp);
        } else if (c.op == 'i') {
            take_record(jfc, UB_CR_OP_RECV_WRITE_IMM, &a);
        } else if (c.op == 'm') {
            take_record(jfc, UB_CR_OP_RECV, &a);
        } else if (c.op == 'r') { /* two elements side by side, split off the middle */
            uint32_t l0 = c.len / 3;
            struct ub_sge sg[2] = {{mem + c.off, l0, seg}, {mem + c.off + l0, c.len - l0, seg}};
            struct ub_rwr rw;
            memset(&rw, 0, sizeof(rw));
            rw.user_ctx = 100 + c.off;
            rw.sge = sg;
            rw.num_sge = 2;
            a.ok = ub_post_recv(ub_jetty_jfr(jetty), &rw, NULL) == 0;
        } else if (c.op == 'u') {
            a.ok = ub_seg_unregister(seg) == 0;
        }
        struct ub_context_stats st;
        ub_context_stats(ctx, &st);
        a.cma_done = st.cma_done;
        a.cma_bytes = st.cma_bytes;
        a.cma_refused = st.cma_refused;
        if (ub_bootstrap_send(bs, &a, sizeof(a), N_BOOT_MS))
            break;
    }
    ub_bootstrap_close(bs);
    ub_context_close(ctx);
    free(mem);
    _exit(0);
}

/* The initiator's side of one run. */
struct run {
    pid_t pid;
    ub_bootstrap *bs;
    uint8_t desc[128];
    ub_context *ctx;
    ub_jfc *jfc;
    ub_jetty *jetty;
    uint8_t *mem;
    ub_seg *seg;
    ub_tjetty *tj;
    ub_tseg *ts;
    uint64_t base;
};

/* Whether this process may read its child's memory (what the shm device probes). */
static bool cma_permitted(pid_t pid)
{
    uint64_t v = 0;
    struct iovec l = {&v, sizeof(v)}, r = {&probe_word, sizeof(v)};
    return process_vm_readv(pid, &l, 1, &r, 1, 0) == (ssize_t)sizeof(v) && v == probe_word;
}

static pid_t spawn(struct run *r, uint32_t target_cma_min)
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
        target_main(boot, target_cma_min);
    }
    assert_int_equal(ub_bootstrap_accept(l, N_BOOT_MS), 0);
    assert_int_equal(ub_bootstrap_recv(l, r->desc, sizeof(r->desc), N_BOOT_MS), 128);
    r->pid = pid;
    r->bs = l;
    return pid;
}

/* Opens the initiator's context (cma_min as given) and imports the target. */
static void open_side(struct run *r, uint32_t cma_min)
{
    struct ub_context_attr ca = {.progress = UB_PROGRESS_MANUAL, .cma_min = cma_min};
    assert_int_equal(ub_context_open("shm://0", &ca, &r->ctx), 0);
    if (!r->mem) {
        r->mem = aligned_alloc(4096, C_IMEM);
        assert_non_null(r->mem);
        memset(r->mem, 0, C_IMEM); /* fault the pages in: time copies, not page faults */
    }
    struct ub_jfc_attr fa = {.depth = 64};
    assert_int_equal(ub_jfc_create(r->ctx, &fa, &r->jfc), 0);
    struct ub_jetty_attr ja;
    memset(&ja, 0, sizeof(ja));
    ja.jfs.depth = 16;
    ja.jfs.jfc = r->jfc;
    ja.jfr.depth = 4;
    ja.jfr.jfc = r->jfc;
    assert_int_equal(ub_jetty_create(r->ctx, &ja, &r->jetty), 0);
    assert_int_equal(ub_seg_register(r->ctx, r->mem, C_IMEM, N_ACCESS, 1, &r->seg), 0);
    assert_int_equal(ub_jetty_import(r->ctx, r->desc, 64, &r->tj), 0);
    assert_int_equal(ub_seg_import(r->ctx, r->desc + 64, 64, C_TOKEN, &r->ts), 0);
    r->base = ub_tseg_base(r->ts);
}

static void close_side(struct run *r)
{
    assert_int_equal(ub_context_close(r->ctx), 0);
    r->ctx = NULL;
}

static struct answer ask(struct run *r, char op, uint32_t off, uint32_t len, uint32_t seed)
{
    struct cmd c = {op, off, len, seed};
    struct answer a;
    assert_int_equal(ub_bootstrap_send(r->bs, &c, sizeof(c), N_BOOT_MS), 0);
    assert_int_equal(ub_bootstrap_recv(r->bs, &a, sizeof(a), 30000), (int)sizeof(a));
    return a;
}

static void finish_run(struct run *r)
{
    struct cmd c = {'q', 0, 0, 0};
    ub_bootstrap_send(r->bs, &c, sizeof(c), N_BOOT_MS);
    assert_int_equal(t_reap(r->pid, 10000), 0);
    ub_bootstrap_close(r->bs);
    if (r->ctx)
        close_side(r);
    free(r->mem);
}

static struct ub_context_stats stats(struct run *r)
{
    struct ub_context_stats st;
    assert_int_equal(ub_context_stats(r->ctx, &st), 0);
    return st;
}

/* Waits for the record of the request posted last (user_ctx 77); returns its status. */
static int wait_record(struct run *r)
{
    struct ub_cr cr;
    for (uint64_t end = t_now() + C_WAIT;;) {
        if (ub_poll_jfc(r->jfc, 1, &cr) == 1)
            break;
        ub_progress(r->ctx);
        if (t_now() > end)
            fail_msg("no completion");
    }
    assert_int_equal(cr.user_ctx, 77);
    return (int)cr.status;
}

/* Posts one RMA and waits for its record; returns the status, *sec the time it took. */
static int rma(struct run *r, enum ub_opcode op, struct ub_sge *sg, uint32_t nsge, ub_tseg *ts,
               uint64_t raddr, double *sec)
{
    struct ub_wr wr = t_rma(op, sg, ts, raddr);
    wr.num_sge = nsge;
    wr.user_ctx = 77;
    if (op == UB_OP_WRITE_IMM) {
        wr.tjetty = r->tj;
        wr.imm_data = 0xabcdef;
    }
    uint64_t t0 = t_now();
    assert_int_equal(ub_post_jetty_send(r->jetty, &wr, NULL), 0);
    int st = wait_record(r);
    if (sec)
        *sec = (double)(t_now() - t0) / 1e9;
    return st;
}

/* Posts a SEND_IMM of sg[0..nsge) to the target's jetty (its record: wait_record). */
static void post_msg(struct run *r, struct ub_sge *sg, uint32_t nsge)
{
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_SEND_IMM;
    wr.flags = UB_WR_COMPLETE;
    wr.user_ctx = 77;
    wr.sge = sg;
    wr.num_sge = nsge;
    wr.tjetty = r->tj;
    wr.imm_data = 0x5e5d;
    assert_int_equal(ub_post_jetty_send(r->jetty, &wr, NULL), 0);
}

/* Four 4 KiB messages, on packets (below the threshold), into the target's four 4 KiB
 * buffers: the larger ones posted next are the only ones left. */
static void fill_small_buffers(struct run *r)
{
    uint64_t reqs = stats(r).cma_reqs;
    for (uint32_t i = 0; i < 4; i++) {
        t_fill(r->mem, 4096, 20 + i);
        struct ub_sge sg = {r->mem, 4096, r->seg};
        post_msg(r, &sg, 1);
        assert_int_equal(wait_record(r), UB_CR_SUCCESS);
        struct answer a = ask(r, 'm', 0, 0, 0);
        assert_true(a.ok);
        assert_int_equal(a.len, 4096);
        assert_int_equal(a.imm, 0x5e5d);
        assert_true(ask(r, 'c', C_BIG + i * 4096u, 4096, 20 + i).ok);
    }
    assert_int_equal(stats(r).cma_reqs, reqs);
}

/* Skips unless single copy toward the child works here. */
static bool skip_unless_cma(struct run *r)
{
    if (cma_permitted(r->pid))
        return false;
    finish_run(r);
    print_message("  process_vm_readv toward a child is not permitted here: skipped\n");
    skip();
    return true;
}

/* A run with its target spawned (single copy from target_cma_min there) and this side open
 * (from cma_min); false when single copy cannot work here: the test is skipped. */
static bool start(struct run *r, uint32_t target_cma_min, uint32_t cma_min)
{
    memset(r, 0, sizeof(*r));
    spawn(r, target_cma_min);
    if (skip_unless_cma(r))
        return false;
    open_side(r, cma_min);
    return true;
}

/* 64 MiB WRITE then READ, once single copy and once as packets; returns nothing. */
static void big_pair(struct run *r, bool cma, double *wsec, double *rsec)
{
    struct ub_context_stats s0 = stats(r);
    t_fill(r->mem, C_BIG, cma ? 1 : 3);
    struct ub_sge sg = {r->mem, C_BIG, r->seg};
    assert_int_equal(rma(r, UB_OP_WRITE, &sg, 1, r->ts, r->base, wsec), UB_CR_SUCCESS);
    assert_true(ask(r, 'c', 0, C_BIG, cma ? 1 : 3).ok);
    ask(r, 'f', 0, C_BIG, cma ? 2 : 4);
    memset(r->mem, 0, C_BIG);
    assert_int_equal(rma(r, UB_OP_READ, &sg, 1, r->ts, r->base, rsec), UB_CR_SUCCESS);
    uint8_t *exp = malloc(C_BIG);
    assert_non_null(exp);
    t_fill(exp, C_BIG, cma ? 2 : 4);
    assert_memory_equal(r->mem, exp, C_BIG);
    free(exp);
    struct ub_context_stats s1 = stats(r);
    assert_int_equal(s1.cma_reqs - s0.cma_reqs, cma ? 2 : 0);
    assert_int_equal(s1.cma_fallbacks, s0.cma_fallbacks);
    if (cma)
        assert_true(s1.tx_shm_pkts - s0.tx_shm_pkts < 64); /* requests and ACKs only */
    else
        assert_true(s1.tx_shm_pkts - s0.tx_shm_pkts > C_BIG / 8192); /* a packet a few KiB */
}

static void test_cma_big(void **state)
{
    (void)state;
    struct run r;
    if (!start(&r, 0, 0))
        return;
    double cw, cr, pw, pr;
    struct answer a0 = ask(&r, 's', 0, 0, 0);
    big_pair(&r, true, &cw, &cr);
    struct answer a1 = ask(&r, 's', 0, 0, 0);
    assert_int_equal(a1.cma_done - a0.cma_done, 2);
    assert_int_equal(a1.cma_bytes - a0.cma_bytes, 2ull * C_BIG);
    /* The same size as packets through the rings, from a context with single copy off. */
    close_side(&r);
    open_side(&r, UB_CMA_OFF);
    big_pair(&r, false, &pw, &pr);
    struct answer a2 = ask(&r, 's', 0, 0, 0);
    assert_int_equal(a2.cma_bytes, a1.cma_bytes);
    print_message("  64 MiB single copy: WRITE %.2f GB/s, READ %.2f GB/s\n", C_BIG / cw / 1e9,
                  C_BIG / cr / 1e9);
    print_message("  64 MiB packets:     WRITE %.2f GB/s, READ %.2f GB/s\n", C_BIG / pw / 1e9,
                  C_BIG / pr / 1e9);
    finish_run(&r);
}

/* WRITE_IMM and a three-SGE WRITE by single copy; small transfers stay on packets. */
static void test_cma_sgl_imm_small(void **state)
{
    (void)state;
    struct run r;
    if (!start(&r, 0, 0))
        return;
    struct ub_context_stats s0 = stats(&r);
    t_fill(r.mem, 1u << 20, 5);
    struct ub_sge sg = {r.mem, 1u << 20, r.seg};
    assert_int_equal(rma(&r, UB_OP_WRITE_IMM, &sg, 1, r.ts, r.base + 4096, NULL), UB_CR_SUCCESS);
    struct answer a = ask(&r, 'i', 0, 0, 0);
    assert_true(a.ok);
    assert_int_equal(a.imm, 0xabcdef);
    assert_true(ask(&r, 'c', 4096, 1u << 20, 5).ok);
    /* Three SGEs, gathered from their places into one contiguous target range. */
    uint32_t l0 = 300000, l1 = (3u << 20) + 5, l2 = 100000;
    uint8_t *src = malloc(l0 + l1 + l2);
    t_fill(src, l0 + l1 + l2, 6);
    memcpy(r.mem + (8u << 20), src, l0);
    memcpy(r.mem + (16u << 20), src + l0, l1);
    memcpy(r.mem + (32u << 20), src + l0 + l1, l2);
    struct ub_sge sgl[3] = {
        {r.mem + (8u << 20), l0, r.seg},
        {r.mem + (16u << 20), l1, r.seg},
        {r.mem + (32u << 20), l2, r.seg},
    };
    assert_int_equal(rma(&r, UB_OP_WRITE, sgl, 3, r.ts, r.base + 777, NULL), UB_CR_SUCCESS);
    assert_true(ask(&r, 'c', 777, l0 + l1 + l2, 6).ok);
    /* ... and READ back scattered into three others. */
    memset(r.mem, 0, C_BIG);
    assert_int_equal(rma(&r, UB_OP_READ, sgl, 3, r.ts, r.base + 777, NULL), UB_CR_SUCCESS);
    assert_memory_equal(r.mem + (8u << 20), src, l0);
    assert_memory_equal(r.mem + (16u << 20), src + l0, l1);
    assert_memory_equal(r.mem + (32u << 20), src + l0 + l1, l2);
    free(src);
    struct ub_context_stats s1 = stats(&r);
    assert_int_equal(s1.cma_reqs - s0.cma_reqs, 3);
    /* Below the threshold: packets. */
    t_fill(r.mem, 8192, 7);
    struct ub_sge small = {r.mem, 8192, r.seg};
    assert_int_equal(rma(&r, UB_OP_WRITE, &small, 1, r.ts, r.base, NULL), UB_CR_SUCCESS);
    assert_true(ask(&r, 'c', 0, 8192, 7).ok);
    small.addr = r.mem + 65536;
    assert_int_equal(rma(&r, UB_OP_READ, &small, 1, r.ts, r.base, NULL), UB_CR_SUCCESS);
    assert_memory_equal(r.mem + 65536, r.mem, 8192);
    struct ub_context_stats s2 = stats(&r);
    assert_int_equal(s2.cma_reqs, s1.cma_reqs);
    assert_true(s2.tx_shm_pkts > s1.tx_shm_pkts);
    /* The threshold measured at open: a page short of it packets, at it single copy. */
    uint32_t at = (uint32_t)s2.cma_min;
    assert_true(at >= UB_SES_CMA_MIN && at <= UB_SES_CMA_AUTO_MAX && at % 4096 == 0);
    print_message("  single copy from %u bytes here\n", at);
    t_fill(r.mem, at, 9);
    small.addr = r.mem;
    small.len = at - 4096;
    assert_int_equal(rma(&r, UB_OP_WRITE, &small, 1, r.ts, r.base, NULL), UB_CR_SUCCESS);
    assert_int_equal(stats(&r).cma_reqs, s2.cma_reqs);
    small.len = at;
    assert_int_equal(rma(&r, UB_OP_WRITE, &small, 1, r.ts, r.base, NULL), UB_CR_SUCCESS);
    assert_int_equal(stats(&r).cma_reqs, s2.cma_reqs + 1);
    assert_true(ask(&r, 'c', 0, at, 9).ok);
    finish_run(&r);
}

/* The threshold from a host's cost of a single copy's fixed part: 12 bytes a ns, in whole
 * pages, within [16 KiB, 64 KiB]. */
static void test_cma_auto_min(void **state)
{
    (void)state;
    assert_int_equal(ub__ses_cma_auto_min(0), 16384);    /* unknown */
    assert_int_equal(ub__ses_cma_auto_min(1000), 16384); /* 12 000: the floor */
    assert_int_equal(ub__ses_cma_auto_min(1365), 16384); /* 16 380: a page */
    assert_int_equal(ub__ses_cma_auto_min(1366), 20480); /* 16 392: the next page */
    assert_int_equal(ub__ses_cma_auto_min(2600), 32768); /* 31 200 */
    assert_int_equal(ub__ses_cma_auto_min(5462), 65536);
    assert_int_equal(ub__ses_cma_auto_min(UINT64_MAX), 65536);
}

/* An untagged message of 3 MiB from two SGEs into a receive buffer of two elements: one
 * copy, by the target, once the buffer is there; too long for its buffer: refused. */
static void test_cma_send(void **state)
{
    (void)state;
    struct run r;
    if (!start(&r, 0, 0))
        return;
    fill_small_buffers(&r);
    struct ub_context_stats s0 = stats(&r);
    struct answer a0 = ask(&r, 's', 0, 0, 0);
    uint32_t len = (3u << 20) + 5, l0 = 1000003;
    uint8_t *src = malloc(len);
    assert_non_null(src);
    t_fill(src, len, 21);
    memcpy(r.mem + (8u << 20), src, l0);
    memcpy(r.mem + (16u << 20), src + l0, len - l0);
    struct ub_sge sg[2] = {{r.mem + (8u << 20), l0, r.seg}, {r.mem + (16u << 20), len - l0, r.seg}};
    assert_true(ask(&r, 'r', 0, len, 0).ok);
    post_msg(&r, sg, 2);
    assert_int_equal(wait_record(&r), UB_CR_SUCCESS);
    struct answer a = ask(&r, 'm', 0, 0, 0);
    assert_true(a.ok);
    assert_int_equal(a.len, len);
    assert_int_equal(a.imm, 0x5e5d);
    assert_true(ask(&r, 'c', 0, len, 21).ok);
    assert_int_equal(a.cma_done - a0.cma_done, 1);
    assert_int_equal(a.cma_bytes - a0.cma_bytes, len);
    struct ub_context_stats s1 = stats(&r);
    assert_int_equal(s1.cma_reqs - s0.cma_reqs, 1);
    assert_true(s1.tx_shm_pkts - s0.tx_shm_pkts < 8); /* the request and its response */
    /* Sent before the target has a buffer: deferred, then copied once it is posted. */
    post_msg(&r, sg, 2);
    struct ub_cr cr;
    for (int i = 0; i < 100; i++) { /* no record while it waits for the buffer */
        assert_int_equal(ub_poll_jfc(r.jfc, 1, &cr), 0);
        ub_progress(r.ctx);
    }
    assert_true(ask(&r, 'r', 0, len, 0).ok);
    assert_int_equal(wait_record(&r), UB_CR_SUCCESS);
    a = ask(&r, 'm', 0, 0, 0);
    assert_true(a.ok);
    assert_int_equal(a.len, len);
    assert_true(ask(&r, 'c', 0, len, 21).ok);
    /* Too long for the buffer posted: nothing copied, both sides told. */
    assert_true(ask(&r, 'r', 0, 65536, 0).ok);
    post_msg(&r, sg, 2);
    assert_int_equal(wait_record(&r), UB_CR_REM_LEN_ERR);
    a = ask(&r, 'm', 0, 0, 0);
    assert_int_equal(a.status, UB_CR_LOC_LEN_ERR);
    assert_int_equal(a.cma_bytes - a0.cma_bytes, 2ull * len);
    free(src);
    finish_run(&r);
}

/* Bad token, out of bounds, revoked segment: refused by the target, no memory touched. */
static void test_cma_protection(void **state)
{
    (void)state;
    struct run r;
    if (!start(&r, 0, 0))
        return;
    ask(&r, 'f', 0, C_TMEM, 9);
    ub_tseg *bad;
    assert_int_equal(ub_seg_import(r.ctx, r.desc + 64, 64, C_TOKEN + 1, &bad), 0);
    t_fill(r.mem, 4u << 20, 10);
    struct ub_sge sg = {r.mem, 4u << 20, r.seg};
    struct ub_context_stats s0 = stats(&r);
    assert_int_equal(rma(&r, UB_OP_WRITE, &sg, 1, bad, r.base, NULL), UB_CR_INVALID_TOKEN);
    /* Out of bounds: starts inside, ends 1 MiB past the segment. */
    uint64_t oob = r.base + C_TMEM - (3u << 20);
    assert_int_equal(rma(&r, UB_OP_WRITE, &sg, 1, r.ts, oob, NULL), UB_CR_REM_ACCESS_ERR);
    assert_true(ask(&r, 'c', 0, C_TMEM, 9).ok); /* untouched */
    /* READ: the sink keeps its bytes. */
    t_fill(r.mem, 4u << 20, 11);
    assert_int_equal(rma(&r, UB_OP_READ, &sg, 1, bad, r.base, NULL), UB_CR_INVALID_TOKEN);
    assert_int_equal(rma(&r, UB_OP_READ, &sg, 1, r.ts, oob, NULL), UB_CR_REM_ACCESS_ERR);
    uint8_t *exp = malloc(4u << 20);
    t_fill(exp, 4u << 20, 11);
    assert_memory_equal(r.mem, exp, 4u << 20);
    struct ub_context_stats s1 = stats(&r);
    assert_int_equal(s1.cma_reqs - s0.cma_reqs, 4); /* they went by the single-copy path */
    struct answer a = ask(&r, 's', 0, 0, 0);
    assert_int_equal(a.cma_bytes, 0);
    /* Revoked: unregistered at the target, the next single copy is refused. */
    assert_true(ask(&r, 'u', 0, 0, 0).ok);
    assert_int_equal(rma(&r, UB_OP_WRITE, &sg, 1, r.ts, r.base, NULL), UB_CR_INVALID_TOKEN);
    assert_int_equal(rma(&r, UB_OP_READ, &sg, 1, r.ts, r.base, NULL), UB_CR_INVALID_TOKEN);
    assert_memory_equal(r.mem, exp, 4u << 20);
    free(exp);
    assert_int_equal(ask(&r, 's', 0, 0, 0).cma_bytes, 0);
    finish_run(&r);
}

/* The target has single copy off: refused once, sent as packets, packets from then on. */
static void test_cma_fallback_target_off(void **state)
{
    (void)state;
    struct run r;
    if (!start(&r, UB_CMA_OFF, 0))
        return;
    t_fill(r.mem, 8u << 20, 12);
    struct ub_sge sg = {r.mem, 8u << 20, r.seg};
    assert_int_equal(rma(&r, UB_OP_WRITE, &sg, 1, r.ts, r.base, NULL), UB_CR_SUCCESS);
    assert_true(ask(&r, 'c', 0, 8u << 20, 12).ok);
    struct ub_context_stats s = stats(&r);
    assert_int_equal(s.cma_reqs, 1);
    assert_int_equal(s.cma_fallbacks, 1);
    assert_int_equal(ask(&r, 's', 0, 0, 0).cma_refused, 1);
    ask(&r, 'f', 0, 8u << 20, 13);
    assert_int_equal(rma(&r, UB_OP_READ, &sg, 1, r.ts, r.base, NULL), UB_CR_SUCCESS);
    uint8_t *exp = malloc(8u << 20);
    t_fill(exp, 8u << 20, 13);
    assert_memory_equal(r.mem, exp, 8u << 20);
    free(exp);
    s = stats(&r);
    assert_int_equal(s.cma_reqs, 1); /* the stream remembers: no second attempt */
    struct answer a = ask(&r, 's', 0, 0, 0);
    assert_int_equal(a.cma_refused, 1);
    assert_int_equal(a.cma_bytes, 0);
    finish_run(&r);
}

/* The target has single copy off: a large message is refused once and sent again as an
 * eager part and a rendezvous READ. */
static void test_cma_send_fallback(void **state)
{
    (void)state;
    struct run r;
    if (!start(&r, UB_CMA_OFF, 0))
        return;
    fill_small_buffers(&r);
    uint32_t len = 1u << 20;
    t_fill(r.mem, len, 22);
    struct ub_sge sg = {r.mem, len, r.seg};
    assert_true(ask(&r, 'r', C_BIG - len, len, 0).ok);
    post_msg(&r, &sg, 1);
    assert_int_equal(wait_record(&r), UB_CR_SUCCESS);
    struct answer a = ask(&r, 'm', 0, 0, 0);
    assert_true(a.ok);
    assert_int_equal(a.len, len);
    assert_true(ask(&r, 'c', C_BIG - len, len, 22).ok);
    struct ub_context_stats s = stats(&r);
    assert_int_equal(s.cma_reqs, 1);
    assert_int_equal(s.cma_fallbacks, 1);
    assert_int_equal(a.cma_refused, 1);
    assert_int_equal(a.cma_bytes, 0);
    finish_run(&r);
}

/* SOFTUB_CMA=0 in the initiator: never asks, packets only. */
static void test_cma_env_off(void **state)
{
    (void)state;
    struct run r;
    memset(&r, 0, sizeof(r));
    spawn(&r, 0);
    setenv("SOFTUB_CMA", "0", 1);
    open_side(&r, 0);
    unsetenv("SOFTUB_CMA");
    t_fill(r.mem, 4u << 20, 14);
    struct ub_sge sg = {r.mem, 4u << 20, r.seg};
    assert_int_equal(rma(&r, UB_OP_WRITE, &sg, 1, r.ts, r.base, NULL), UB_CR_SUCCESS);
    assert_true(ask(&r, 'c', 0, 4u << 20, 14).ok);
    assert_int_equal(rma(&r, UB_OP_READ, &sg, 1, r.ts, r.base, NULL), UB_CR_SUCCESS);
    struct ub_context_stats s = stats(&r);
    assert_int_equal(s.cma_reqs, 0);
    assert_int_equal(s.cma_min, 0); /* off */
    assert_int_equal(ask(&r, 's', 0, 0, 0).cma_done, 0);
    finish_run(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cma_big),           cmocka_unit_test(test_cma_sgl_imm_small),
        cmocka_unit_test(test_cma_protection),    cmocka_unit_test(test_cma_fallback_target_off),
        cmocka_unit_test(test_cma_env_off),       cmocka_unit_test(test_cma_send),
        cmocka_unit_test(test_cma_send_fallback), cmocka_unit_test(test_cma_auto_min),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
