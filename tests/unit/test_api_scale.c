/*
 * Scale: atomics from many initiators on one word, 10 000 imported peers (memory per
 * imported peer measured), large RMA (64 MiB by default; SOFTUB_TEST_1GIB=1 for 1 GiB).
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <time.h>

#include "unit/api_util.h"

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void do_atomics(uint32_t initiators, uint32_t per, uint32_t drop_ppm)
{
    struct tnet t;
    tnet_init(&t, initiators + 1, drop_ppm, false, false);
    uint64_t *word = calloc(1, 4096);
    ub_seg *seg;
    assert_int_equal(ub_seg_register(t.ctx[0], word, 4096, ALL_ACCESS, 99, &seg), 0);
    ub_tseg *ts[T_MAX_NODES];
    uint32_t posted[T_MAX_NODES] = {0}, done[T_MAX_NODES] = {0};
    uint64_t olds[T_MAX_NODES][64];
    for (uint32_t i = 1; i <= initiators; i++)
        ts[i] = tnet_import_seg(&t, i, seg, 99);
    uint32_t total = 0;
    while (total < initiators * per) {
        for (uint32_t i = 1; i <= initiators; i++) {
            while (posted[i] < per && posted[i] - done[i] < 32) {
                struct ub_wr wr;
                memset(&wr, 0, sizeof(wr));
                wr.opcode = UB_OP_ATOMIC_FADD;
                wr.flags = UB_WR_COMPLETE;
                wr.u.atomic.tseg = ts[i];
                wr.u.atomic.addr = ub_tseg_base(ts[i]);
                wr.u.atomic.operand = i;
                wr.u.atomic.result = &olds[i][posted[i] % 64];
                assert_int_equal(ub_post_jetty_send(t.jetty[i], &wr, NULL), 0);
                posted[i]++;
            }
            struct ub_cr cr[32];
            int n = ub_poll_jfc(t.jfc[i], 32, cr);
            for (int k = 0; k < n; k++)
                assert_int_equal(cr[k].status, UB_CR_SUCCESS);
            done[i] += (uint32_t)n;
            total += (uint32_t)n;
        }
        ub_progress(t.ctx[0]);
    }
    uint64_t expect = 0;
    for (uint32_t i = 1; i <= initiators; i++)
        expect += (uint64_t)i * per;
    assert_int_equal(word[0], expect);
    tnet_fini(&t);
    free(word);
}

static void test_atomics_many(void **state)
{
    (void)state;
    do_atomics(8, 1000, 0);
    do_atomics(8, 300, 20000);
}

static void test_many_peers(void **state)
{
    (void)state;
    struct tnet t;
    tnet_init(&t, 2, 0, false, false);
    enum { N = 10000 };
    uint8_t desc[UB_JETTY_DESC_SIZE];
    assert_int_equal(ub_jetty_export(t.jetty[1], desc, sizeof(desc)), UB_JETTY_DESC_SIZE);
    ub_tjetty **tj = calloc(N, sizeof(*tj));
    struct mallinfo2 before = mallinfo2();
    for (uint32_t i = 0; i < N; i++)
        assert_int_equal(ub_jetty_import(t.ctx[0], desc, sizeof(desc), &tj[i]), 0);
    struct mallinfo2 after = mallinfo2();
    double per = (double)(after.uordblks - before.uordblks) / N;
    printf("memory per idle imported peer: %.1f bytes (struct ub_tjetty %zu bytes)\n", per,
           sizeof(struct ub_tjetty));
    assert_true(per <= 256);
    /* One JFS reaches all of them: messages to 200 of the imported handles. */
    uint8_t *m0 = calloc(1, 4096), *m1 = calloc(1, 1 << 16);
    ub_seg *s0, *s1;
    assert_int_equal(ub_seg_register(t.ctx[0], m0, 4096, ALL_ACCESS, 1, &s0), 0);
    assert_int_equal(ub_seg_register(t.ctx[1], m1, 1 << 16, ALL_ACCESS, 1, &s1), 0);
    uint32_t recvd = 0, sent = 0;
    for (uint32_t i = 0; i < 200; i += 20) {
        for (uint32_t k = 0; k < 20; k++) {
            struct ub_sge rs = {m1 + 64 * (i + k), 64, s1};
            struct ub_rwr rw = {.sge = &rs, .num_sge = 1};
            assert_int_equal(ub_post_jetty_recv(t.jetty[1], &rw, NULL), 0);
            struct ub_sge sg = {m0, 16, s0};
            struct ub_wr wr;
            memset(&wr, 0, sizeof(wr));
            wr.opcode = UB_OP_SEND;
            wr.sge = &sg;
            wr.num_sge = 1;
            wr.tjetty = tj[(i + k) * 37 % N];
            assert_int_equal(ub_post_jetty_send(t.jetty[0], &wr, NULL), 0);
            sent++;
        }
        while (recvd < sent) {
            struct ub_cr cr[32];
            tnet_step(&t, 0);
            int n = ub_poll_jfc(t.jfc[1], 32, cr);
            for (int k = 0; k < n; k++)
                assert_int_equal(cr[k].status, UB_CR_SUCCESS);
            recvd += (uint32_t)n;
        }
    }
    for (uint32_t i = 0; i < N; i++)
        assert_int_equal(ub_jetty_unimport(tj[i]), 0);
    free(tj);
    tnet_fini(&t);
    free(m0);
    free(m1);
}

static void big_rma(size_t len)
{
    struct tnet t;
    tnet_init(&t, 2, 0, false, false);
    uint8_t *a = malloc(len), *b = malloc(len);
    assert_non_null(a);
    assert_non_null(b);
    for (size_t i = 0; i < len; i += 4096)
        a[i] = (uint8_t)(i >> 12), a[len - 1 - i] = (uint8_t)(i >> 20);
    memset(b, 0, len);
    ub_seg *sa, *sb;
    assert_int_equal(ub_seg_register(t.ctx[0], a, len, ALL_ACCESS, 1, &sa), 0);
    assert_int_equal(ub_seg_register(t.ctx[1], b, len, ALL_ACCESS, 2, &sb), 0);
    ub_tseg *ts = tnet_import_seg(&t, 0, sb, 2);
    struct ub_sge sg = {a, (uint32_t)(len > UINT32_MAX ? UINT32_MAX : len), sa};
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_WRITE;
    wr.flags = UB_WR_COMPLETE;
    wr.sge = &sg;
    wr.num_sge = 1;
    wr.u.rma.tseg = ts;
    wr.u.rma.addr = ub_tseg_base(ts);
    double t0 = wall();
    assert_int_equal(ub_post_jetty_send(t.jetty[0], &wr, NULL), 0);
    struct ub_cr cr;
    assert_int_equal(tnet_wait(&t, 0, &cr), 1);
    assert_int_equal(cr.status, UB_CR_SUCCESS);
    double t1 = wall();
    assert_memory_equal(a, b, len);
    memset(a, 0, len);
    wr.opcode = UB_OP_READ;
    double t2 = wall();
    assert_int_equal(ub_post_jetty_send(t.jetty[0], &wr, NULL), 0);
    assert_int_equal(tnet_wait(&t, 0, &cr), 1);
    assert_int_equal(cr.status, UB_CR_SUCCESS);
    double t3 = wall();
    assert_memory_equal(a, b, len);
    printf("RMA %zu MiB: WRITE %.3f s (%.0f MB/s), READ %.3f s (%.0f MB/s)\n", len >> 20, t1 - t0,
           (double)len / (t1 - t0) / 1e6, t3 - t2, (double)len / (t3 - t2) / 1e6);
    tnet_fini(&t);
    free(a);
    free(b);
}

static void test_big_rma(void **state)
{
    (void)state;
    const char *e = getenv("SOFTUB_TEST_1GIB");
    big_rma(e && *e == '1' ? (1ull << 30) : (64ull << 20));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_atomics_many),
        cmocka_unit_test(test_many_peers),
        cmocka_unit_test(test_big_rma),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
