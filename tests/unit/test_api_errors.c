/* Protection, length errors, receiver-not-ready, berths, flushing, dead and restarted peers. */
#include "unit/api_util.h"
#include "unit/api_tap.h"

static struct tnet T;
static uint8_t *M0, *M1;
static ub_seg *S0, *S1;

static void setup(bool manual)
{
    tnet_init(&T, 2, 0, manual, false);
    M0 = calloc(1, 65536);
    M1 = calloc(1, 65536);
    assert_int_equal(ub_seg_register(T.ctx[0], M0, 65536, ALL_ACCESS, 1, &S0), 0);
    assert_int_equal(ub_seg_register(T.ctx[1], M1, 65536, ALL_ACCESS, 42, &S1), 0);
}

static void teardown(void)
{
    tnet_fini(&T);
    free(M0);
    free(M1);
}

static enum ub_cr_status run_wr(ub_jfs *jfs, struct ub_wr *wr)
{
    assert_int_equal(ub_post_send(jfs, wr, NULL), 0);
    struct ub_cr cr;
    int got = tnet_wait(&T, 0, &cr);
    if (!got) {
        const struct ub__pds_stats *ps = ub__pds_stats(T.ctx[0]->eng.pds);
        fprintf(stderr, "no completion: tx %llu retx %llu failed %llu ipdcs %u nacks_rx %llu\n",
                (unsigned long long)ps->tx_pkts, (unsigned long long)ps->retx_pkts,
                (unsigned long long)ps->tx_failed, ub__pds_ipdc_count(T.ctx[0]->eng.pds),
                (unsigned long long)ps->nacks_rx);
    }
    assert_int_equal(got, 1);
    assert_int_equal(cr.user_ctx, wr->user_ctx);
    return cr.status;
}

static struct ub_wr rma(enum ub_opcode op, ub_tseg *ts, uint64_t addr, struct ub_sge *sg)
{
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = op;
    wr.flags = UB_WR_COMPLETE;
    wr.user_ctx = 0x77;
    wr.sge = sg;
    wr.num_sge = 1;
    wr.u.rma.tseg = ts;
    wr.u.rma.addr = addr;
    return wr;
}

/* A signalled SEND of sg to tj. */
static struct ub_wr send_wr(ub_tjetty *tj, struct ub_sge *sg, uint64_t id)
{
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_SEND;
    wr.flags = UB_WR_COMPLETE;
    wr.user_ctx = id;
    wr.sge = sg;
    wr.num_sge = 1;
    wr.tjetty = tj;
    return wr;
}

static bool untouched(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

static void test_protection(void **state)
{
    (void)state;
    setup(false);
    ub_jfs *jfs = ub_jetty_jfs(T.jetty[0]);
    memset(M0, 0xee, 8192);
    struct ub_sge sg = {M0, 4096, S0};
    uint64_t one = 1;

    /* Wrong token. */
    ub_tseg *bad = tnet_import_seg(&T, 0, S1, 41);
    struct ub_wr wr = rma(UB_OP_WRITE, bad, ub_tseg_base(bad), &sg);
    assert_int_equal(run_wr(jfs, &wr), UB_CR_INVALID_TOKEN);
    wr = rma(UB_OP_READ, bad, ub_tseg_base(bad), &sg);
    assert_int_equal(run_wr(jfs, &wr), UB_CR_INVALID_TOKEN);

    /* Out of bounds: past the end, and before the start. */
    ub_tseg *ok = tnet_import_seg(&T, 0, S1, 42);
    wr = rma(UB_OP_WRITE, ok, ub_tseg_base(ok) + 65536 - 100, &sg);
    assert_int_equal(run_wr(jfs, &wr), UB_CR_REM_ACCESS_ERR);
    wr = rma(UB_OP_WRITE, ok, ub_tseg_base(ok) - 8, &sg);
    assert_int_equal(run_wr(jfs, &wr), UB_CR_REM_ACCESS_ERR);
    wr = rma(UB_OP_WRITE, ok, UINT64_MAX - 10, &sg);
    assert_int_equal(run_wr(jfs, &wr), UB_CR_REM_ACCESS_ERR);

    /* Missing access bits. */
    uint8_t *ro_mem = calloc(1, 4096), *wo_mem = calloc(1, 4096);
    ub_seg *ro, *wo;
    assert_int_equal(ub_seg_register(T.ctx[1], ro_mem, 4096, UB_ACCESS_READ, 42, &ro), 0);
    assert_int_equal(ub_seg_register(T.ctx[1], wo_mem, 4096, UB_ACCESS_WRITE, 42, &wo), 0);
    ub_tseg *tro = tnet_import_seg(&T, 0, ro, 42), *two = tnet_import_seg(&T, 0, wo, 42);
    sg.len = 1000;
    wr = rma(UB_OP_WRITE, tro, ub_tseg_base(tro), &sg);
    assert_int_equal(run_wr(jfs, &wr), UB_CR_REM_ACCESS_ERR);
    wr = rma(UB_OP_READ, two, ub_tseg_base(two), &sg);
    assert_int_equal(run_wr(jfs, &wr), UB_CR_REM_ACCESS_ERR);
    wr = rma(UB_OP_ATOMIC_FADD, NULL, 0, NULL);
    wr.num_sge = 0;
    wr.u.atomic.tseg = two;
    wr.u.atomic.addr = ub_tseg_base(two);
    wr.u.atomic.operand = 5;
    wr.u.atomic.result = &one;
    assert_int_equal(run_wr(jfs, &wr), UB_CR_REM_ACCESS_ERR);
    /* Unaligned atomic. */
    wr.u.atomic.tseg = ok;
    wr.u.atomic.addr = ub_tseg_base(ok) + 4;
    assert_int_equal(run_wr(jfs, &wr), UB_CR_REM_ACCESS_ERR);
    assert_true(untouched(ro_mem, 4096));
    assert_true(untouched(wo_mem, 4096));

    /* Unregistered: revoked at once. */
    ub_tseg *gone = tnet_import_seg(&T, 0, wo, 42);
    assert_int_equal(ub_seg_unregister(wo), 0);
    wr = rma(UB_OP_WRITE, gone, ub_tseg_base(gone), &sg);
    assert_int_equal(run_wr(jfs, &wr), UB_CR_INVALID_TOKEN);
    assert_true(untouched(wo_mem, 4096));
    assert_true(untouched(M1, 65536)); /* nothing above touched the target's memory */

    /* Local protection: an SGE outside its segment, a READ into memory without LOCAL_WRITE. */
    struct ub_sge outside = {M0 + 65000, 1000, S0};
    wr = rma(UB_OP_WRITE, ok, ub_tseg_base(ok), &outside);
    assert_int_equal(run_wr(jfs, &wr), UB_CR_LOC_ACCESS_ERR);
    uint8_t *lro = calloc(1, 4096);
    ub_seg *lseg;
    assert_int_equal(ub_seg_register(T.ctx[0], lro, 4096, UB_ACCESS_READ, 1, &lseg), 0);
    struct ub_sge lsg = {lro, 100, lseg};
    wr = rma(UB_OP_READ, ok, ub_tseg_base(ok), &lsg);
    assert_int_equal(run_wr(jfs, &wr), UB_CR_LOC_ACCESS_ERR);
    assert_true(untouched(M1, 65536));

    teardown();
    free(ro_mem);
    free(wo_mem);
    free(lro);
}

static void test_lengths_and_ops(void **state)
{
    (void)state;
    setup(false);
    ub_jfs *jfs = ub_jetty_jfs(T.jetty[0]);
    ub_tjetty *tj = tnet_import_jetty(&T, 0, 1);
    /* A receive buffer too small: the receiver sees a local length error, the sender remote. */
    struct ub_sge rsg = {M1, 100, S1};
    struct ub_rwr rw = {.user_ctx = 3, .sge = &rsg, .num_sge = 1};
    assert_int_equal(ub_post_jetty_recv(T.jetty[1], &rw, NULL), 0);
    struct ub_sge sg = {M0, 1000, S0};
    struct ub_wr wr = send_wr(tj, &sg, 0x77);
    memset(M0, 1, 1000);
    assert_int_equal(run_wr(jfs, &wr), UB_CR_REM_LEN_ERR);
    struct ub_cr cr;
    assert_int_equal(tnet_wait(&T, 1, &cr), 1);
    assert_int_equal(cr.status, UB_CR_LOC_LEN_ERR);
    assert_int_equal(cr.user_ctx, 3);
    /* Tagged send to a JFR that does not match tags: refused at post time. */
    wr.opcode = UB_OP_TSEND;
    assert_int_equal(ub_post_send(jfs, &wr, NULL), UB_ENOTSUP);
    /* A bad request is refused at post time and named. */
    wr.opcode = UB_OP_SEND;
    wr.num_sge = 99;
    struct ub_wr *bad = NULL;
    assert_int_equal(ub_post_send(jfs, &wr, &bad), UB_EINVAL);
    assert_ptr_equal(bad, &wr);
    /* A segment must be memory: no empty range, none past the end of the address space;
     * nor may an imported one say so. */
    ub_seg *sg2 = NULL;
    assert_int_equal(ub_seg_register(T.ctx[0], M0, 0, ALL_ACCESS, 1, &sg2), UB_EINVAL);
    assert_int_equal(ub_seg_register(T.ctx[0], M0, SIZE_MAX, ALL_ACCESS, 1, &sg2), UB_EINVAL);
    assert_int_equal(
        ub_seg_register(T.ctx[0], M0, SIZE_MAX - (uintptr_t)M0 + 1, ALL_ACCESS, 1, &sg2),
        UB_EINVAL);
    assert_null(sg2);
    uint8_t sd[UB_SEG_DESC_SIZE];
    assert_int_equal(ub_seg_export(S0, sd, sizeof(sd)), UB_SEG_DESC_SIZE);
    ub_tseg *ts2 = NULL;
    memset(sd + 40, 0xff, 8); /* length 2^64 - 1 from a base above 0 */
    assert_int_equal(ub_seg_import(T.ctx[1], sd, sizeof(sd), 1, &ts2), UB_EINVAL);
    memset(sd + 40, 0, 8); /* empty */
    assert_int_equal(ub_seg_import(T.ctx[1], sd, sizeof(sd), 1, &ts2), UB_EINVAL);
    assert_null(ts2);
    /* A NOP completes locally. */
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_NOP;
    wr.flags = UB_WR_COMPLETE;
    wr.user_ctx = 0x77;
    assert_int_equal(run_wr(jfs, &wr), UB_CR_SUCCESS);
    teardown();
}

static void test_rnr(void **state)
{
    (void)state;
    /* Time moves only when told. With the real clock an RTO that fires while the thread is
     * off its CPU resends a request whose RNR is on its way; a second RNR that comes after
     * the next attempt left counts as that attempt's (test_rnr_duplicate: the earlier case
     * is ignored), and the count below would be one short. */
    setup(true);
    ub_tjetty *tj = tnet_import_jetty(&T, 0, 1);
    struct ub_sge sg = {M0, 500, S0};
    struct ub_wr wr = send_wr(tj, &sg, 0x77);
    /* Blind RNR retries are what a JFS asks for with UB_JFS_F_RNR_RETRY (the default is
     * deferral: test_api_defer.c). */
    struct ub_jfs_attr ra = {.depth = 8, .jfc = T.jfc[0], .flags = UB_JFS_F_RNR_RETRY};
    ub_jfs *rj;
    assert_int_equal(ub_jfs_create(T.ctx[0], &ra, &rj), 0);
    /* No buffer ever: bounded retries, then a distinct error. */
    assert_int_equal(run_wr(rj, &wr), UB_CR_RNR);
    assert_true(T.ctx[0]->ses.st.rnr_retries >= UB_SES_RNR_RETRY);
    assert_int_equal(T.ctx[1]->ses.st.deferred_sent, 0);
    /* A buffer posted while the sender retries: it gets through. */
    assert_int_equal(ub_post_send(rj, &wr, NULL), 0);
    for (int i = 0; T.ctx[1]->ses.st.rnr_sent < UB_SES_RNR_RETRY + 2; i++) {
        assert_true(i < 100000);
        tnet_step(&T, 10000);
    }
    struct ub_sge rsg = {M1, 1000, S1};
    struct ub_rwr rw = {.user_ctx = 4, .sge = &rsg, .num_sge = 1};
    assert_int_equal(ub_post_jetty_recv(T.jetty[1], &rw, NULL), 0);
    struct ub_cr cr;
    assert_int_equal(tnet_wait(&T, 0, &cr), 1);
    assert_int_equal(cr.status, UB_CR_SUCCESS);
    assert_int_equal(tnet_wait(&T, 1, &cr), 1);
    assert_int_equal(cr.status, UB_CR_SUCCESS);
    assert_int_equal(cr.length, 500);
    /* With UB_RNR_NO_RETRY the first RNR is final. */
    struct ub_jfs_attr ja = {
        .depth = 4, .jfc = T.jfc[0], .rnr_retry = UB_RNR_NO_RETRY, .flags = UB_JFS_F_RNR_RETRY};
    ub_jfs *j2;
    assert_int_equal(ub_jfs_create(T.ctx[0], &ja, &j2), 0);
    uint64_t before = T.ctx[0]->ses.st.rnr_retries;
    assert_int_equal(run_wr(j2, &wr), UB_CR_RNR);
    assert_int_equal(T.ctx[0]->ses.st.rnr_retries, before);
    teardown();
}

/*
 * A second RNR for the same attempt (its request was sent twice: an RTO resend, a duplicate
 * in the network; the target answers each copy) that comes while the retry waits for its
 * backoff is stale: it neither counts as an attempt nor moves the retry. The WR still gets
 * its full rnr_retry retries.
 */
static void test_rnr_duplicate(void **state)
{
    (void)state;
    setup(true);
    ub_tjetty *tj = tnet_import_jetty(&T, 0, 1);
    struct ub_sge sg = {M0, 64, S0};
    struct ub_wr wr = send_wr(tj, &sg, 0x78);
    struct ub_jfs_attr ra = {
        .depth = 8, .jfc = T.jfc[0], .rnr_retry = 3, .flags = UB_JFS_F_RNR_RETRY};
    ub_jfs *rj;
    assert_int_equal(ub_jfs_create(T.ctx[0], &ra, &rj), 0);
    tap_install(T.ctx[0], 1);
    TAP.rsp = true;
    TAP.src_port = 1;
    TAP.record = true; /* the first RNR: kept, and passed on */
    uint64_t retries = T.ctx[0]->ses.st.rnr_retries, stale = T.ctx[0]->ses.st.rx_stale_rsp;
    assert_int_equal(ub_post_send(rj, &wr, NULL), 0);
    for (int i = 0; TAP.n == 0; i++) {
        assert_true(i < 1000);
        tnet_step(&T, 1000);
    }
    TAP.record = false;
    tap_redeliver(0);
    tap_redeliver(0);
    assert_int_equal(T.ctx[0]->ses.st.rx_stale_rsp - stale, 2);
    struct ub_cr cr;
    assert_int_equal(tnet_wait(&T, 0, &cr), 1);
    assert_int_equal(cr.user_ctx, 0x78);
    assert_int_equal(cr.status, UB_CR_RNR);
    assert_int_equal(T.ctx[0]->ses.st.rnr_retries - retries, 3);
    tap_free();
    teardown();
}

static void test_berths(void **state)
{
    (void)state;
    setup(false);
    struct ub_jfs_attr ja = {.depth = 4, .jfc = T.jfc[0]};
    ub_jfs *jfs;
    assert_int_equal(ub_jfs_create(T.ctx[0], &ja, &jfs), 0);
    ub_tseg *ts = tnet_import_seg(&T, 0, S1, 42);
    struct ub_sge sg = {M0, 64, S0};
    struct ub_wr wr = rma(UB_OP_WRITE, ts, ub_tseg_base(ts), &sg);
    for (int i = 0; i < 4; i++)
        assert_int_equal(ub_post_send(jfs, &wr, NULL), 0);
    assert_int_equal(ub_post_send(jfs, &wr, NULL), UB_EFULL);
    /* Completed but not consumed: the berths stay taken. */
    while (T.jfc[0]->count < 4)
        tnet_step(&T, 0);
    assert_int_equal(ub_post_send(jfs, &wr, NULL), UB_EFULL);
    struct ub_cr cr;
    assert_int_equal(ub_poll_jfc(T.jfc[0], 1, &cr), 1);
    assert_int_equal(ub_post_send(jfs, &wr, NULL), 0);
    assert_int_equal(ub_post_send(jfs, &wr, NULL), UB_EFULL);
    /* Unsignaled successful requests give their berth back at once. */
    struct ub_cr crs[8];
    int got = 0;
    while (got < 4)
        got += ub_poll_jfc(T.jfc[0], 8, crs);
    wr.flags = 0;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 4; i++)
            assert_int_equal(ub_post_send(jfs, &wr, NULL), 0);
        while (jfs->used)
            tnet_step(&T, 0);
    }
    assert_int_equal(ub_poll_jfc(T.jfc[0], 8, crs), 0);
    /* A JFC cannot be overcommitted: the ring always has room for every berth. */
    struct ub_jfc_attr fa = {.depth = 8};
    ub_jfc *small;
    assert_int_equal(ub_jfc_create(T.ctx[0], &fa, &small), 0);
    struct ub_jfs_attr big = {.depth = 9, .jfc = small};
    ub_jfs *j2;
    assert_int_equal(ub_jfs_create(T.ctx[0], &big, &j2), UB_EINVAL);
    big.depth = 8;
    assert_int_equal(ub_jfs_create(T.ctx[0], &big, &j2), 0);
    struct ub_jfr_attr ra = {.depth = 1, .jfc = small};
    ub_jfr *r2;
    assert_int_equal(ub_jfr_create(T.ctx[0], &ra, &r2), UB_EINVAL);
    assert_int_equal(ub_jfc_destroy(small), UB_EBUSY);
    assert_int_equal(ub_jfs_destroy(j2), 0);
    assert_int_equal(ub_jfc_destroy(small), 0);
    teardown();
}

/* A jetty's JFS and JFR are the jetty's to destroy, and a shared JFR outlives its jettys. */
static void test_owned_objects(void **state)
{
    (void)state;
    setup(false);
    ub_jetty *jt = T.jetty[0];
    assert_int_equal(ub_jfs_destroy(ub_jetty_jfs(jt)), UB_EBUSY);
    assert_int_equal(ub_jfr_destroy(ub_jetty_jfr(jt)), UB_EBUSY);
    struct ub_rwr rw = {.user_ctx = 1};
    assert_int_equal(ub_post_jetty_recv(jt, &rw, NULL), 0); /* both still there */
    struct ub_jfr_attr ra = {.depth = 8, .jfc = T.jfc[0]};
    ub_jfr *shared;
    assert_int_equal(ub_jfr_create(T.ctx[0], &ra, &shared), 0);
    struct ub_jetty_attr ja;
    memset(&ja, 0, sizeof(ja));
    ja.jfs.depth = 4;
    ja.jfs.jfc = T.jfc[0];
    ja.shared_jfr = shared;
    ub_jetty *a, *b;
    assert_int_equal(ub_jetty_create(T.ctx[0], &ja, &a), 0);
    assert_int_equal(ub_jetty_create(T.ctx[0], &ja, &b), 0);
    assert_ptr_equal(ub_jetty_jfr(a), shared);
    assert_int_equal(ub_jfr_destroy(shared), UB_EBUSY);
    assert_int_equal(ub_jetty_destroy(a), 0);
    assert_int_equal(ub_jfr_destroy(shared), UB_EBUSY);
    assert_int_equal(ub_jetty_destroy(b), 0);
    assert_int_equal(ub_post_recv(shared, &rw, NULL), 0); /* the creator's still */
    assert_int_equal(ub_jfr_destroy(shared), 0);
    teardown();
}

/* The failure bound's attributes at their extremes: a context opens (retries of 2^32 - 1
 * once divided the timeout by zero). */
static void test_failure_bound_extremes(void **state)
{
    (void)state;
    ub_loopnet *net;
    struct ub_loopnet_attr la = {.ports = 4, .seed = 3};
    assert_int_equal(ub_loopnet_create(&la, &net), 0);
    static const uint32_t attrs[][2] = {{1000, UINT32_MAX}, {UINT32_MAX, UINT32_MAX}, {1, 1}};
    for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
        struct ub_context_attr ca = {.loopnet = net,
                                     .progress = UB_PROGRESS_MANUAL,
                                     .timeout_ms = attrs[i][0],
                                     .retries = attrs[i][1]};
        ub_context *c;
        assert_int_equal(ub_context_open("loop:0", &ca, &c), 0);
        assert_int_equal(ub_context_close(c), 0);
    }
    assert_int_equal(ub_loopnet_destroy(net), 0);
}

static void test_flush(void **state)
{
    (void)state;
    setup(false);
    ub_tseg *ts = tnet_import_seg(&T, 0, S1, 42);
    struct ub_sge sg = {M0, 64, S0};
    struct ub_wr wr = rma(UB_OP_WRITE, ts, ub_tseg_base(ts), &sg);
    /* Node 1 never runs: nothing can complete; destroying the jetty flushes everything. */
    for (int i = 0; i < 5; i++) {
        wr.user_ctx = (uint64_t)i;
        assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr, NULL), 0);
    }
    struct ub_rwr rw = {.user_ctx = 100};
    assert_int_equal(ub_post_jetty_recv(T.jetty[0], &rw, NULL), 0);
    assert_int_equal(ub_jetty_destroy(T.jetty[0]), 0);
    T.jetty[0] = NULL;
    struct ub_cr cr[8];
    int n = ub__jfc_take(T.jfc[0], 8, cr);
    assert_int_equal(n, 6);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(cr[i].status, UB_CR_FLUSHED);
        assert_int_equal(cr[i].user_ctx, (uint64_t)i);
    }
    assert_int_equal(cr[5].status, UB_CR_FLUSHED);
    assert_int_equal(cr[5].opcode, UB_CR_OP_RECV);
    assert_int_equal(T.jfc[0]->committed, 0);
    teardown();
}

static void test_dead_and_restarted_peer(void **state)
{
    (void)state;
    setup(true);
    ub_jfs *jfs = ub_jetty_jfs(T.jetty[0]);
    ub_tseg *ts = tnet_import_seg(&T, 0, S1, 42);
    struct ub_sge sg = {M0, 64, S0};
    struct ub_wr wr = rma(UB_OP_WRITE, ts, ub_tseg_base(ts), &sg);
    assert_int_equal(run_wr(jfs, &wr), UB_CR_SUCCESS);
    /* Restart node 1: a new incarnation on the same port. */
    assert_int_equal(ub_context_close(T.ctx[1]), 0);
    tnet_open_node(&T, 1, false, 64);
    assert_int_equal(run_wr(jfs, &wr), UB_CR_PEER_UNREACHABLE);
    struct ub_async_event ev;
    assert_int_equal(ub_get_async_event(T.ctx[0], &ev), 1);
    assert_int_equal(ev.type, UB_ASYNC_PEER_RESTARTED);
    assert_int_equal(ev.arg, 1);
    /* The segment does not exist in the new incarnation. */
    assert_int_equal(run_wr(jfs, &wr), UB_CR_INVALID_TOKEN);
    /* A dead peer: bounded retries, then unreachable. */
    assert_int_equal(ub_context_close(T.ctx[1]), 0);
    T.ctx[1] = NULL;
    assert_int_equal(run_wr(jfs, &wr), UB_CR_PEER_UNREACHABLE);
    teardown();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_protection),
        cmocka_unit_test(test_lengths_and_ops),
        cmocka_unit_test(test_rnr),
        cmocka_unit_test(test_rnr_duplicate),
        cmocka_unit_test(test_berths),
        cmocka_unit_test(test_owned_objects),
        cmocka_unit_test(test_failure_bound_extremes),
        cmocka_unit_test(test_flush),
        cmocka_unit_test(test_dead_and_restarted_peer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
