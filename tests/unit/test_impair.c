/* Impaired-link decision engine: scripted patterns, seeded rules, composition, counters. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <softub/errors.h>
#include "dev/impair.h"

#define N_OFFERS 1000

/* Offers n packets of len bytes at now = i * step; records which were dropped. */
static void run(const struct ub__impair_cfg *cfg, uint64_t salt, uint32_t n, uint32_t len,
                uint64_t step, uint8_t *dropped, struct ub__impair_stats *st)
{
    struct ub__impair im;
    struct ub__impair_decision d;
    assert_int_equal(ub__impair_init(&im, cfg, salt), 0);
    for (uint32_t i = 0; i < n; i++) {
        ub__impair_decide(&im, (uint64_t)i * step, len, &d);
        assert_int_equal(d.index, i);
        dropped[i] = d.drop != UB_IMPAIR_PASS;
        if (d.drop) {
            assert_int_equal(d.dups, 0);
            assert_int_equal(d.nflips, 0);
            assert_int_equal(d.hold, 0);
            assert_int_equal(d.delay_ns, 0);
        }
    }
    if (st)
        *st = im.stats;
}

static void test_perfect_link(void **state)
{
    (void)state;
    struct ub__impair_cfg cfg;
    memset(&cfg, 0, sizeof(cfg));
    assert_false(ub__impair_cfg_active(&cfg));
    struct ub__impair im;
    struct ub__impair_decision d;
    assert_int_equal(ub__impair_init(&im, &cfg, 0), 0);
    for (uint32_t i = 0; i < 100; i++) {
        ub__impair_decide(&im, i, 100, &d);
        assert_int_equal(d.drop, UB_IMPAIR_PASS);
        assert_int_equal(d.dups + d.nflips + d.hold, 0);
        assert_int_equal(d.delay_ns, 0);
        assert_false(d.ce);
    }
    assert_int_equal(im.stats.offered, 100);
    assert_int_equal(im.stats.dropped + im.stats.duplicated + im.stats.corrupted +
                         im.stats.reordered + im.stats.delayed + im.stats.ce_marked,
                     0);
}

static void test_drop_list(void **state)
{
    (void)state;
    static const uint64_t list[] = {0, 3, 17, 99, 500};
    struct ub__impair_cfg cfg;
    memset(&cfg, 0, sizeof(cfg));
    assert_int_equal(ub__impair_add_drop_list(&cfg, list, 5), 0);
    assert_true(ub__impair_cfg_active(&cfg));
    uint8_t dr[N_OFFERS];
    struct ub__impair_stats st;
    run(&cfg, 0, N_OFFERS, 64, 1, dr, &st);
    for (uint32_t i = 0; i < N_OFFERS; i++) {
        bool want = i == 0 || i == 3 || i == 17 || i == 99 || i == 500;
        assert_int_equal(dr[i], want);
    }
    assert_int_equal(st.offered, N_OFFERS);
    assert_int_equal(st.dropped, 5);
    assert_int_equal(st.dropped_script, 5);
    assert_int_equal(st.dropped_random + st.dropped_blackhole, 0);
}

static void test_drop_every(void **state)
{
    (void)state;
    struct ub__impair_cfg cfg;
    uint8_t dr[N_OFFERS];
    memset(&cfg, 0, sizeof(cfg));
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_DROP_EVERY, 5, 0, 0), 0);
    run(&cfg, 0, N_OFFERS, 64, 1, dr, NULL);
    for (uint32_t i = 0; i < N_OFFERS; i++)
        assert_int_equal(dr[i], i % 5 == 4); /* 4, 9, 14, ...: every 5th */

    memset(&cfg, 0, sizeof(cfg));
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_DROP_EVERY, 4, 3, 0), 0);
    run(&cfg, 0, N_OFFERS, 64, 1, dr, NULL);
    for (uint32_t i = 0; i < N_OFFERS; i++)
        assert_int_equal(dr[i], i >= 3 && (i - 3) % 4 == 3); /* 6, 10, 14, ... */
    assert_true(dr[6] && dr[10] && !dr[2] && !dr[3]);

    memset(&cfg, 0, sizeof(cfg));
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_DROP_EVERY, 1, 0, 0), 0);
    run(&cfg, 0, 50, 64, 1, dr, NULL);
    for (uint32_t i = 0; i < 50; i++)
        assert_true(dr[i]);
}

static void test_drop_burst(void **state)
{
    (void)state;
    struct ub__impair_cfg cfg;
    uint8_t dr[N_OFFERS];
    struct ub__impair_stats st;
    memset(&cfg, 0, sizeof(cfg));
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_DROP_BURST, 10, 5, 0), 0);
    run(&cfg, 0, N_OFFERS, 64, 1, dr, &st);
    for (uint32_t i = 0; i < N_OFFERS; i++)
        assert_int_equal(dr[i], i >= 10 && i < 15);
    assert_int_equal(st.dropped, 5);

    /* A burst reaching the end of numbering must not wrap. */
    memset(&cfg, 0, sizeof(cfg));
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_DROP_BURST, 2, UINT64_MAX, 0), 0);
    run(&cfg, 0, 100, 64, 1, dr, NULL);
    for (uint32_t i = 0; i < 100; i++)
        assert_int_equal(dr[i], i >= 2);
}

static void test_drop_cycle(void **state)
{
    (void)state;
    struct ub__impair_cfg cfg;
    uint8_t dr[N_OFFERS];
    memset(&cfg, 0, sizeof(cfg));
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_DROP_CYCLE, 3, 7, 0), 0);
    run(&cfg, 0, N_OFFERS, 64, 1, dr, NULL);
    for (uint32_t i = 0; i < N_OFFERS; i++)
        assert_int_equal(dr[i], i % 10 < 3);

    memset(&cfg, 0, sizeof(cfg));
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_DROP_CYCLE, 2, 1, 5), 0);
    run(&cfg, 0, 20, 64, 1, dr, NULL);
    static const uint8_t want[20] = {0, 0, 0, 0, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0};
    assert_memory_equal(dr, want, 20);
}

static void test_blackhole(void **state)
{
    (void)state;
    struct ub__impair_cfg cfg;
    uint8_t dr[N_OFFERS];
    struct ub__impair_stats st;
    memset(&cfg, 0, sizeof(cfg));
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_BLACKHOLE_PKT, 50, 0, 0), 0);
    run(&cfg, 0, N_OFFERS, 64, 1, dr, &st);
    for (uint32_t i = 0; i < N_OFFERS; i++)
        assert_int_equal(dr[i], i >= 50);
    assert_int_equal(st.dropped_blackhole, N_OFFERS - 50);

    /* From time T: offers at now = i * 1000, T = 25 500 -> packets 26 and on. */
    memset(&cfg, 0, sizeof(cfg));
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_BLACKHOLE_TIME, 25500, 0, 0), 0);
    run(&cfg, 0, 100, 64, 1000, dr, &st);
    for (uint32_t i = 0; i < 100; i++)
        assert_int_equal(dr[i], i >= 26);
    assert_int_equal(st.dropped_blackhole, 74);
}

static void test_compose(void **state)
{
    (void)state;
    struct ub__impair_cfg cfg;
    uint8_t dr[N_OFFERS];
    struct ub__impair_stats st;
    memset(&cfg, 0, sizeof(cfg));
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_DROP_NTH, 1, 0, 0), 0);
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_DROP_EVERY, 10, 0, 0), 0);
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_DROP_BURST, 30, 3, 0), 0);
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_BLACKHOLE_PKT, 90, 0, 0), 0);
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_DUP_NTH, 2, 2, 0), 0);
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_DELAY_NTH, 3, 777, 0), 0);
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_DELAY_NTH, 3, 23, 0), 0);
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_REORDER_NTH, 4, 6, 0), 0);
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_CE_NTH, 5, 0, 0), 0);
    /* Scripted effects on a dropped packet vanish with it. */
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_DUP_NTH, 9, 1, 0), 0);

    struct ub__impair im;
    struct ub__impair_decision d;
    assert_int_equal(ub__impair_init(&im, &cfg, 0), 0);
    for (uint32_t i = 0; i < 100; i++) {
        ub__impair_decide(&im, 0, 64, &d);
        dr[i] = d.drop != UB_IMPAIR_PASS;
        bool want = i == 1 || i % 10 == 9 || (i >= 30 && i < 33) || i >= 90;
        assert_int_equal(dr[i], want);
        assert_int_equal(d.dups, i == 2 ? 2u : 0u);
        assert_int_equal(d.delay_ns, i == 3 ? 800u : 0u);
        assert_int_equal(d.hold, i == 4 ? 6u : 0u);
        assert_int_equal(d.ce, i == 5);
    }
    st = im.stats;
    assert_int_equal(st.dropped, 1 + 9 + 3 + 10);
    assert_int_equal(st.dropped_blackhole, 10);
    assert_int_equal(st.dropped_script, 13);
    assert_int_equal(st.duplicated, 2);
    assert_int_equal(st.delayed, 1);
    assert_int_equal(st.reordered, 1);
    assert_int_equal(st.ce_marked, 1);
}

static uint32_t count(const uint8_t *v, uint32_t n)
{
    uint32_t c = 0;
    for (uint32_t i = 0; i < n; i++)
        c += v[i];
    return c;
}

static void test_random_drop(void **state)
{
    (void)state;
    enum { N = 100000 };
    uint8_t *a = malloc(N), *b = malloc(N), *c = malloc(N), *e = malloc(N);
    assert_true(a && b && c && e);
    struct ub__impair_cfg cfg;
    struct ub__impair_stats st;
    memset(&cfg, 0, sizeof(cfg));
    cfg.seed = 42;
    cfg.drop_ppm = 100000;
    run(&cfg, 0, N, 64, 1, a, &st);
    /* Binomial(100 000, 0.1): sd ~ 94.9; +-500 is more than 5 sd. */
    uint32_t na = count(a, N);
    assert_in_range(na, 9500, 10500);
    assert_int_equal(st.dropped, na);
    assert_int_equal(st.dropped_random, na);

    run(&cfg, 0, N, 64, 1, b, NULL);
    assert_memory_equal(a, b, N);

    cfg.seed = 43;
    run(&cfg, 0, N, 64, 1, c, NULL);
    assert_in_range(count(c, N), 9500, 10500);
    assert_memory_not_equal(a, c, N);

    /* Same seed, other salt (another direction): another pattern. */
    cfg.seed = 42;
    run(&cfg, 7, N, 64, 1, e, NULL);
    assert_memory_not_equal(a, e, N);

    /* Enabling other rules does not move the drop draws. */
    cfg.dup_ppm = 300000;
    cfg.corrupt_ppm = 200000;
    cfg.reorder_ppm = 100000;
    cfg.reorder_depth = 4;
    cfg.jitter_ns = 1000;
    run(&cfg, 0, N, 64, 1, e, NULL);
    assert_memory_equal(a, e, N);

    /* Extremes. */
    memset(&cfg, 0, sizeof(cfg));
    cfg.drop_ppm = UB_IMPAIR_PPM;
    run(&cfg, 0, 1000, 64, 1, e, NULL);
    assert_int_equal(count(e, 1000), 1000);
    free(a);
    free(b);
    free(c);
    free(e);
}

static uint32_t popcount_diff(const uint8_t *x, const uint8_t *y, uint32_t n)
{
    uint32_t c = 0;
    for (uint32_t i = 0; i < n; i++)
        c += (uint32_t)__builtin_popcount((unsigned)(x[i] ^ y[i]));
    return c;
}

static void test_corrupt(void **state)
{
    (void)state;
    struct ub__impair_cfg cfg;
    struct ub__impair im;
    struct ub__impair_decision d;
    uint8_t orig[100], buf[100];
    for (uint32_t i = 0; i < sizeof(orig); i++)
        orig[i] = (uint8_t)(i * 37);

    memset(&cfg, 0, sizeof(cfg));
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_CORRUPT_NTH, 5, 3, 0), 0);
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_CORRUPT_BIT, 6, 9, 0), 0);
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_CORRUPT_BIT, 7, 800, 0), 0); /* past the end */
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_CORRUPT_NTH, 8, 16, 0), 0);
    assert_int_equal(ub__impair_init(&im, &cfg, 0), 0);
    for (uint32_t i = 0; i < 10; i++) {
        uint32_t len = i == 8 ? 1 : 100;
        ub__impair_decide(&im, 0, len, &d);
        memcpy(buf, orig, sizeof(buf));
        ub__impair_flip(buf, len, &d);
        uint32_t want = i == 5 ? 3 : i == 6 ? 1 : i == 8 ? 8 : 0;
        assert_int_equal(d.nflips, want);
        assert_int_equal(popcount_diff(orig, buf, sizeof(buf)), want);
        for (uint32_t k = 0; k < d.nflips; k++)
            assert_true(d.flips[k] < len * 8);
        if (i == 6) {
            assert_int_equal(d.flips[0], 9);
            assert_int_equal(buf[1] ^ orig[1], 0x02);
        }
    }
    assert_int_equal(im.stats.corrupted, 3);
    assert_int_equal(im.stats.bits_flipped, 12);

    /* Random corruption: every packet, exactly corrupt_bits distinct bits; empty packets none. */
    memset(&cfg, 0, sizeof(cfg));
    cfg.seed = 9;
    cfg.corrupt_ppm = UB_IMPAIR_PPM;
    cfg.corrupt_bits = 5;
    assert_int_equal(ub__impair_init(&im, &cfg, 0), 0);
    for (uint32_t i = 0; i < 1000; i++) {
        ub__impair_decide(&im, 0, 100, &d);
        memcpy(buf, orig, sizeof(buf));
        ub__impair_flip(buf, sizeof(buf), &d);
        assert_int_equal(d.nflips, 5);
        assert_int_equal(popcount_diff(orig, buf, sizeof(buf)), 5);
    }
    ub__impair_decide(&im, 0, 0, &d);
    assert_int_equal(d.nflips, 0);
    assert_int_equal(im.stats.corrupted, 1000);
}

static void test_duplicate(void **state)
{
    (void)state;
    struct ub__impair_cfg cfg;
    struct ub__impair im;
    struct ub__impair_decision d;
    memset(&cfg, 0, sizeof(cfg));
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_DUP_NTH, 7, 3, 0), 0);
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_DUP_NTH, 8, 16, 0), 0);
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_DUP_NTH, 8, 16, 0), 0);
    assert_int_equal(ub__impair_init(&im, &cfg, 0), 0);
    for (uint32_t i = 0; i < 10; i++) {
        ub__impair_decide(&im, 0, 10, &d);
        assert_int_equal(d.dups, i == 7 ? 3 : i == 8 ? UB_IMPAIR_MAX_DUPS : 0);
    }
    assert_int_equal(im.stats.duplicated, 3 + UB_IMPAIR_MAX_DUPS);

    cfg.dup_ppm = UB_IMPAIR_PPM; /* composes: one more everywhere */
    assert_int_equal(ub__impair_init(&im, &cfg, 0), 0);
    for (uint32_t i = 0; i < 10; i++) {
        ub__impair_decide(&im, 0, 10, &d);
        assert_int_equal(d.dups, i == 7 ? 4 : i == 8 ? UB_IMPAIR_MAX_DUPS : 1);
    }

    memset(&cfg, 0, sizeof(cfg));
    cfg.seed = 5;
    cfg.dup_ppm = 250000;
    assert_int_equal(ub__impair_init(&im, &cfg, 0), 0);
    for (uint32_t i = 0; i < 40000; i++)
        ub__impair_decide(&im, 0, 10, &d);
    assert_in_range(im.stats.duplicated, 9500, 10500); /* sd ~ 87 */
}

static void test_delay_jitter(void **state)
{
    (void)state;
    struct ub__impair_cfg cfg;
    struct ub__impair im, im2;
    struct ub__impair_decision d, d2;
    memset(&cfg, 0, sizeof(cfg));
    cfg.delay_ns = 1000;
    assert_int_equal(ub__impair_init(&im, &cfg, 0), 0);
    for (uint32_t i = 0; i < 100; i++) {
        ub__impair_decide(&im, 0, 10, &d);
        assert_int_equal(d.delay_ns, 1000);
    }
    assert_int_equal(im.stats.delayed, 100);

    cfg.seed = 77;
    cfg.jitter_ns = 500;
    assert_int_equal(ub__impair_init(&im, &cfg, 0), 0);
    assert_int_equal(ub__impair_init(&im2, &cfg, 0), 0);
    uint64_t lo = UINT64_MAX, hi = 0, sum = 0;
    for (uint32_t i = 0; i < 20000; i++) {
        ub__impair_decide(&im, 0, 10, &d);
        ub__impair_decide(&im2, 0, 10, &d2);
        assert_int_equal(d.delay_ns, d2.delay_ns);
        assert_in_range(d.delay_ns, 1000, 1500);
        lo = d.delay_ns < lo ? d.delay_ns : lo;
        hi = d.delay_ns > hi ? d.delay_ns : hi;
        sum += d.delay_ns;
    }
    assert_int_equal(lo, 1000);
    assert_int_equal(hi, 1500);
    assert_in_range(sum / 20000, 1240, 1260);
}

static void test_reorder(void **state)
{
    (void)state;
    struct ub__impair_cfg cfg;
    struct ub__impair im;
    struct ub__impair_decision d;
    uint32_t seen[9] = {0};
    memset(&cfg, 0, sizeof(cfg));
    cfg.seed = 3;
    cfg.reorder_ppm = UB_IMPAIR_PPM;
    cfg.reorder_depth = 8;
    assert_int_equal(ub__impair_init(&im, &cfg, 0), 0);
    for (uint32_t i = 0; i < 8000; i++) {
        ub__impair_decide(&im, 0, 10, &d);
        assert_in_range(d.hold, 1, 8);
        seen[d.hold]++;
    }
    for (uint32_t k = 1; k <= 8; k++)
        assert_in_range(seen[k], 800, 1200);
    assert_int_equal(im.stats.reordered, 8000);

    /* depth 0 means 1 */
    cfg.reorder_depth = 0;
    assert_int_equal(ub__impair_init(&im, &cfg, 0), 0);
    ub__impair_decide(&im, 0, 10, &d);
    assert_int_equal(d.hold, 1);
}

static void test_ce(void **state)
{
    (void)state;
    struct ub__impair_cfg cfg;
    struct ub__impair im;
    struct ub__impair_decision d;
    memset(&cfg, 0, sizeof(cfg));
    cfg.ce_ppm = 500000;
    assert_int_equal(ub__impair_init(&im, &cfg, 0), 0);
    for (uint32_t i = 0; i < 10000; i++)
        ub__impair_decide(&im, 0, 10, &d);
    assert_in_range(im.stats.ce_marked, 4700, 5300);
}

static void test_set_restarts_numbering(void **state)
{
    (void)state;
    struct ub__impair_cfg cfg;
    struct ub__impair im;
    struct ub__impair_decision d;
    memset(&cfg, 0, sizeof(cfg));
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_DROP_NTH, 2, 0, 0), 0);
    assert_int_equal(ub__impair_init(&im, &cfg, 0), 0);
    for (uint32_t i = 0; i < 10; i++)
        ub__impair_decide(&im, 0, 10, &d);
    assert_int_equal(im.stats.dropped, 1);
    assert_int_equal(ub__impair_set(&im, &cfg, 0), 0);
    for (uint32_t i = 0; i < 10; i++) {
        ub__impair_decide(&im, 0, 10, &d);
        assert_int_equal(d.index, i);
        assert_int_equal(d.drop != 0, i == 2);
    }
    assert_int_equal(im.stats.offered, 20);
    assert_int_equal(im.stats.dropped, 2);
}

static void test_cfg_check(void **state)
{
    (void)state;
    struct ub__impair_cfg cfg;
    struct ub__impair im;
    memset(&cfg, 0, sizeof(cfg));
    assert_int_equal(ub__impair_cfg_check(NULL), UB_EINVAL);
    assert_int_equal(ub__impair_cfg_check(&cfg), 0);
    cfg.drop_ppm = UB_IMPAIR_PPM + 1;
    assert_int_equal(ub__impair_init(&im, &cfg, 0), UB_ERANGE);
    cfg.drop_ppm = 0;
    cfg.reorder_depth = UB_IMPAIR_MAX_DEPTH + 1;
    assert_int_equal(ub__impair_cfg_check(&cfg), UB_ERANGE);
    cfg.reorder_depth = 0;
    cfg.corrupt_bits = UB_IMPAIR_MAX_FLIPS + 1;
    assert_int_equal(ub__impair_cfg_check(&cfg), UB_ERANGE);
    cfg.corrupt_bits = 0;

    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_NONE, 0, 0, 0), UB_EINVAL);
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_KIND_COUNT, 0, 0, 0), UB_EINVAL);
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_DROP_EVERY, 0, 0, 0), 0);
    assert_int_equal(ub__impair_cfg_check(&cfg), UB_EINVAL);
    cfg.nrules = 0;
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_DROP_CYCLE, 0, 0, 0), 0);
    assert_int_equal(ub__impair_cfg_check(&cfg), UB_EINVAL);
    cfg.nrules = 0;
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_REORDER_NTH, 0, 65, 0), 0);
    assert_int_equal(ub__impair_cfg_check(&cfg), UB_ERANGE);
    cfg.nrules = 0;
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_DUP_NTH, 0, 0, 0), 0);
    assert_int_equal(ub__impair_cfg_check(&cfg), UB_ERANGE);
    cfg.nrules = 0;
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_CORRUPT_NTH, 0, 0, 0), 0);
    assert_int_equal(ub__impair_cfg_check(&cfg), UB_ERANGE);
    cfg.nrules = 0;

    for (uint32_t i = 0; i < UB_IMPAIR_MAX_RULES; i++)
        assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_DROP_NTH, i, 0, 0), 0);
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_DROP_NTH, 0, 0, 0), UB_EFULL);
    cfg.nrules = UB_IMPAIR_MAX_RULES - 1;
    uint64_t two[2] = {1, 2};
    assert_int_equal(ub__impair_add_drop_list(&cfg, two, 2), UB_EFULL);
    assert_int_equal(cfg.nrules, UB_IMPAIR_MAX_RULES - 1);
    cfg.rules[0].kind = 999;
    assert_int_equal(ub__impair_cfg_check(&cfg), UB_EINVAL);
}

/* Per-path rules touch only their path, and leave every other decision unchanged. */
static void test_path_rules(void **state)
{
    (void)state;
    struct ub__impair_cfg base = {.seed = 9, .drop_ppm = 100000, .ce_ppm = 100000};
    struct ub__impair_cfg cfg = base;
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_PATH_DROP, 2, UB_IMPAIR_PPM, 0), 0);
    assert_int_equal(ub__impair_add(&cfg, UB_IMPAIR_PATH_CE, 1, 500000, 0), 0);
    struct ub__impair a, b;
    assert_int_equal(ub__impair_init(&a, &base, 0), 0);
    assert_int_equal(ub__impair_init(&b, &cfg, 0), 0);
    uint32_t ce1 = 0, n1 = 0;
    for (uint32_t i = 0; i < 40000; i++) {
        uint32_t path = i % 4;
        struct ub__impair_decision da, db;
        ub__impair_decide_path(&a, 0, 100, path, &da);
        ub__impair_decide_path(&b, 0, 100, path, &db);
        if (path == 2) {
            assert_true(db.drop != UB_IMPAIR_PASS);
            continue;
        }
        assert_int_equal(da.drop, db.drop);
        if (da.drop)
            continue;
        assert_int_equal(da.delay_ns, db.delay_ns);
        if (path != 1) {
            assert_int_equal(da.ce, db.ce);
            continue;
        }
        assert_true(db.ce || !da.ce); /* the path rule only adds marks */
        n1++;
        ce1 += db.ce;
    }
    /* 1 - 0.9 x 0.5 = 55 % marked on path 1. */
    assert_true(ce1 * 100 > n1 * 52 && ce1 * 100 < n1 * 58);
    cfg.rules[0].b = UB_IMPAIR_PPM + 1;
    assert_int_equal(ub__impair_cfg_check(&cfg), UB_ERANGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_perfect_link), cmocka_unit_test(test_drop_list),
        cmocka_unit_test(test_drop_every),   cmocka_unit_test(test_drop_burst),
        cmocka_unit_test(test_drop_cycle),   cmocka_unit_test(test_blackhole),
        cmocka_unit_test(test_compose),      cmocka_unit_test(test_random_drop),
        cmocka_unit_test(test_corrupt),      cmocka_unit_test(test_duplicate),
        cmocka_unit_test(test_delay_jitter), cmocka_unit_test(test_reorder),
        cmocka_unit_test(test_ce),           cmocka_unit_test(test_set_restarts_numbering),
        cmocka_unit_test(test_cfg_check),    cmocka_unit_test(test_path_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
