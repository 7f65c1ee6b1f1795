/*
 * Per-transaction arrival tracking: the interval tracker against a byte map, and a packet
 * re-delivered inside one transaction (as through a re-established PDC) that must not count
 * toward its completion twice.
 */
#include "unit/api_util.h"
#include "unit/api_tap.h"
#include "core/rand.h"
#include "dev/impair.h"
#include "pds/pds_int.h"
#include "wire/datagram.h"

static void test_tracker(void **state)
{
    (void)state;
    struct ub__ivl t;
    memset(&t, 0, sizeof(t));
    uint64_t f;
    assert_int_equal(ub__ivl_add(&t, 0, 100, &f), 0);
    assert_int_equal(f, 100);
    assert_int_equal(ub__ivl_add(&t, 0, 100, &f), 0); /* duplicate */
    assert_int_equal(f, 0);
    assert_int_equal(ub__ivl_add(&t, 200, 300, &f), 0);
    assert_int_equal(f, 100);
    assert_int_equal(ub__ivl_add(&t, 50, 250, &f), 0); /* bridges the hole */
    assert_int_equal(f, 100);
    assert_int_equal(t.n, 1);
    assert_int_equal(t.total, 300);
    assert_true(ub__ivl_covers(&t, 0, 300));
    assert_false(ub__ivl_covers(&t, 0, 301));
    assert_int_equal(ub__ivl_add(&t, 10, 10, &f), 0);
    assert_int_equal(f, 0);
    ub__ivl_reset(&t);
    assert_int_equal(t.total, 0);

    /* Random packets (duplicates, any order, many holes) against a byte map. */
    struct ub__rng rng;
    ub__rng_seed(&rng, 42);
    for (int round = 0; round < 200; round++) {
        enum { LEN = 4096 };
        static uint8_t map[LEN];
        memset(map, 0, sizeof(map));
        uint64_t total = 0;
        for (int k = 0; k < 300; k++) {
            uint64_t a = ub__rng_next(&rng) % LEN;
            uint64_t b = a + ub__rng_next(&rng) % 64;
            if (b > LEN)
                b = LEN;
            uint64_t want = 0;
            for (uint64_t i = a; i < b; i++)
                if (!map[i]) {
                    map[i] = 1;
                    want++;
                }
            assert_int_equal(ub__ivl_add(&t, a, b, &f), 0);
            assert_int_equal(f, want);
            total += want;
            assert_int_equal(t.total, total);
        }
        /* Sorted, disjoint, not touching, and exactly the map. */
        const uint64_t *v = t.cap ? t.heap : t.inl;
        for (uint32_t i = 0; i < t.n; i++) {
            assert_true(v[2 * i] < v[2 * i + 1]);
            if (i)
                assert_true(v[2 * i - 1] < v[2 * i]);
        }
        for (uint64_t i = 0; i < LEN; i++)
            assert_int_equal(ub__ivl_covers(&t, i, i + 1), map[i] != 0);
        ub__ivl_reset(&t);
    }
}

/* ---- a duplicate inside one transaction -------------------------------------------------- */

static struct tnet T;
static uint8_t *M0, *M1;
static ub_seg *S0, *S1;

/* op: a 3-packet WRITE or SEND whose last packet is held back; its first packet is delivered
 * again meanwhile. Byte counting would complete it with a hole; the tracker does not. */
static void dup_within(bool send)
{
    tnet_init(&T, 2, 0, true, false);
    tnet_mem(&T, 1 << 20, &M0, &S0, &M1, &S1);
    ub_tseg *ts = tnet_import_seg(&T, 0, S1, 2);
    ub_tjetty *tj = tnet_import_jetty(&T, 0, 1);
    tap_install(T.ctx[1], 4);
    TAP.record = true;
    uint32_t len = 2 * T.ctx[0]->ses.max_payload + 1000; /* three packets, the last short */
    fill_pattern(M0, len, 9);
    if (send) {
        struct ub_sge rsg = {M1, len, S1};
        struct ub_rwr rw = {.user_ctx = 1, .sge = &rsg, .num_sge = 1};
        assert_int_equal(ub_post_jetty_recv(T.jetty[1], &rw, NULL), 0);
    }
    /* Drop packet 2 (the last) and hold everything after (its repairs) until healed. */
    struct ub__impair_cfg ic;
    memset(&ic, 0, sizeof(ic));
    ub__impair_add(&ic, UB_IMPAIR_DROP_NTH, 2, 0, 0);
    ub__impair_add(&ic, UB_IMPAIR_BLACKHOLE_PKT, 3, 0, 0);
    assert_int_equal(ub__loopnet_impair(ub__loopnet_impl(T.net), 0, 1, &ic), 0);
    struct ub_sge sg = {M0, len, S0};
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = send ? UB_OP_SEND : UB_OP_WRITE;
    wr.flags = UB_WR_COMPLETE;
    wr.sge = &sg;
    wr.num_sge = 1;
    wr.tjetty = tj;
    wr.u.rma.tseg = ts;
    wr.u.rma.addr = ub_tseg_base(ts);
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr, NULL), 0);
    for (int i = 0; i < 20; i++)
        tnet_step(&T, 1000);
    assert_int_equal(TAP.n, 2);
    uint64_t dup = T.ctx[1]->ses.st.dup_bytes;
    tap_redeliver(0);
    tap_redeliver(1);
    tap_redeliver(0);
    assert_true(T.ctx[1]->ses.st.dup_bytes >= dup + 3ull * T.ctx[0]->ses.max_payload);
    for (int i = 0; i < 20; i++)
        tnet_step(&T, 1000);
    struct ub_cr cr;
    assert_int_equal(ub_poll_jfc(T.jfc[0], 1, &cr), 0); /* not complete: a hole remains */
    assert_int_equal(ub_poll_jfc(T.jfc[1], 1, &cr), 0);
    assert_int_not_equal(memcmp(M1, M0, len), 0);
    /* The real last packet: complete, every byte right, once. */
    tnet_heal(&T, 0, 1);
    int n = 0;
    for (int i = 0; i < 100000 && !n; i++) {
        n = ub_poll_jfc(T.jfc[0], 1, &cr);
        if (!n)
            tnet_step(&T, 20000);
    }
    assert_int_equal(n, 1);
    assert_int_equal(cr.status, UB_CR_SUCCESS);
    assert_memory_equal(M1, M0, len);
    if (send) {
        assert_int_equal(tnet_wait(&T, 1, &cr), 1);
        assert_int_equal(cr.length, len);
        for (int i = 0; i < 50; i++)
            tnet_step(&T, 1000);
        assert_int_equal(ub_poll_jfc(T.jfc[1], 1, &cr), 0); /* one record, not two */
    }
    tap_free();
    tnet_fini(&T);
    free(M0);
    free(M1);
}

static void test_dup_within_transaction(void **state)
{
    (void)state;
    dup_within(false);
    dup_within(true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tracker),
        cmocka_unit_test(test_dup_within_transaction),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
