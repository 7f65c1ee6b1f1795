/* Load balancing: single, oblivious, random, REPS recycling/freezing, bitmap skipping, bursts. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <string.h>

#include "cms/lb.h"
#include "core/rand.h"
#include "softub/errors.h"

static struct ub__lb_params params(uint16_t n, uint64_t seed)
{
    struct ub__lb_params p;
    memset(&p, 0, sizeof p);
    p.ev_count = n;
    p.seed = seed;
    p.trimming = true;
    return p;
}

static void test_registry(void **state)
{
    (void)state;
    const char *names[] = {"single", "oblivious", "random", "reps", "bitmap", "reps-loss"};
    for (size_t i = 0; i < 6; i++) {
        assert_non_null(ub__lb_algo_find(names[i]));
        assert_string_equal(ub__lb_algo_at(i)->name, names[i]);
    }
    assert_null(ub__lb_algo_at(6));
    assert_null(ub__lb_algo_find("ecmp"));
    struct ub__lb lb;
    struct ub__lb_params p = params(0, 1);
    assert_int_equal(ub__lb_init(&lb, &ub__lb_single, &p), UB_EINVAL);
    p = params(257, 1);
    assert_int_equal(ub__lb_init(&lb, &ub__lb_bitmap, &p), UB_EINVAL);
    assert_int_equal(ub__lb_init(&lb, &ub__lb_reps, &p), 0);
}

static void test_single(void **state)
{
    (void)state;
    struct ub__lb lb;
    struct ub__lb_params p = params(16, 1);
    p.single_ev = 21;
    assert_int_equal(ub__lb_init(&lb, ub__lb_algo_find("single"), &p), 0);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(ub__lb_next_ev(&lb, 0), 5);
        ub__lb_on_nack(&lb, 5, 0);
        ub__lb_on_timeout(&lb, 5, 0);
    }
}

/* Every round of ev_count packets uses every EV exactly once, in a new order. */
static void test_oblivious_rounds(void **state)
{
    (void)state;
    static const uint16_t counts[] = {1, 8, 64, 10, 257};
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        uint16_t n = counts[c];
        struct ub__lb lb, lb2;
        struct ub__lb_params p = params(n, 7 + c);
        assert_int_equal(ub__lb_init(&lb, &ub__lb_oblivious, &p), 0);
        assert_int_equal(ub__lb_init(&lb2, &ub__lb_oblivious, &p), 0);
        for (int round = 0; round < 5; round++) {
            uint8_t seen[300] = {0};
            for (uint16_t i = 0; i < n; i++) {
                uint16_t ev = ub__lb_next_ev(&lb, 0);
                assert_true(ev < n);
                assert_int_equal(ev, ub__lb_next_ev(&lb2, 0)); /* same seed, same order */
                assert_int_equal(seen[ev], 0);
                seen[ev] = 1;
            }
        }
    }
}

static void test_random(void **state)
{
    (void)state;
    struct ub__lb lb;
    struct ub__lb_params p = params(100, 3);
    assert_int_equal(ub__lb_init(&lb, &ub__lb_random, &p), 0);
    struct ub__rng ref;
    ub__rng_seed(&ref, 3);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(ub__lb_next_ev(&lb, 0), ub__rng_below(&ref, 100));
}

/* REPS: unmarked ACKs' EVs come back in order; marked and NACKed ones never. */
static void test_reps_recycle(void **state)
{
    (void)state;
    struct ub__lb lb;
    struct ub__lb_params p = params(256, 11);
    assert_int_equal(ub__lb_init(&lb, ub__lb_algo_find("reps"), &p), 0);
    struct ub__rng ref;
    ub__rng_seed(&ref, 11);
    /* empty: fresh random EVs */
    for (int i = 0; i < 3; i++)
        assert_int_equal(ub__lb_next_ev(&lb, 0), ub__rng_below(&ref, 256));
    ub__lb_on_ack(&lb, 5, false, true, 10);
    ub__lb_on_ack(&lb, 7, true, true, 10); /* marked: dropped */
    ub__lb_on_ack(&lb, 9, false, true, 10);
    ub__lb_on_nack(&lb, 20, 10);               /* dropped */
    ub__lb_on_trim(&lb, 21, false, false, 10); /* trimmed in the fabric: dropped */
    ub__lb_on_trim(&lb, 13, true, false, 10);  /* last hop: the path was fine */
    ub__lb_on_trim(&lb, 22, true, true, 10);   /* last hop but marked: dropped */
    assert_int_equal(ub__lb_next_ev(&lb, 20), 5);
    assert_int_equal(ub__lb_next_ev(&lb, 20), 9);
    assert_int_equal(ub__lb_next_ev(&lb, 20), 13);
    assert_int_equal(ub__lb_next_ev(&lb, 20), ub__rng_below(&ref, 256)); /* explore */
    /* 10 good EVs into a buffer of 8: the last 8 survive, oldest first */
    for (uint16_t ev = 100; ev < 110; ev++)
        ub__lb_on_ack(&lb, ev, false, true, 30);
    for (uint16_t ev = 102; ev < 110; ev++)
        assert_int_equal(ub__lb_next_ev(&lb, 40), ev);
    assert_int_equal(ub__lb_next_ev(&lb, 40), ub__rng_below(&ref, 256));
    /* interleaved: use one, add one */
    ub__lb_on_ack(&lb, 1, false, true, 50);
    ub__lb_on_ack(&lb, 2, false, true, 50);
    assert_int_equal(ub__lb_next_ev(&lb, 50), 1);
    ub__lb_on_ack(&lb, 3, false, true, 50);
    assert_int_equal(ub__lb_next_ev(&lb, 50), 2);
    assert_int_equal(ub__lb_next_ev(&lb, 50), 3);
}

/* REPS: a timeout (with trimming) freezes: reuse only the cached EVs; after the
 * freeze the buffer is forgotten and 16 random EVs explore. */
static void test_reps_freeze(void **state)
{
    (void)state;
    struct ub__lb lb;
    struct ub__lb_params p = params(256, 12);
    p.reps_freeze_ns = 1000000; /* 1 ms */
    assert_int_equal(ub__lb_init(&lb, &ub__lb_reps, &p), 0);
    struct ub__rng ref;
    ub__rng_seed(&ref, 12);
    ub__lb_on_ack(&lb, 10, false, true, 0);
    ub__lb_on_ack(&lb, 11, false, true, 0);
    ub__lb_on_ack(&lb, 12, false, true, 0);
    assert_int_equal(ub__lb_next_ev(&lb, 0), 10);
    ub__lb_on_timeout(&lb, UB_LB_EV_UNKNOWN, 1000);
    assert_true(lb.u.reps.frozen);
    static const uint16_t cyc[7] = {10, 11, 12, 10, 11, 12, 10};
    for (int i = 0; i < 7; i++)
        assert_int_equal(ub__lb_next_ev(&lb, 2000), cyc[i]);
    /* a good ACK while frozen joins the cache */
    ub__lb_on_ack(&lb, 13, false, true, 3000);
    static const uint16_t cyc2[5] = {11, 12, 13, 10, 11};
    for (int i = 0; i < 5; i++)
        assert_int_equal(ub__lb_next_ev(&lb, 3000), cyc2[i]);
    /* a second timeout while frozen changes nothing */
    ub__lb_on_timeout(&lb, UB_LB_EV_UNKNOWN, 4000);
    assert_int_equal(lb.u.reps.thaw_at, 1001000);
    /* feedback after the freeze: thaw, forget, explore 16, then recycle */
    ub__lb_on_ack(&lb, 50, false, true, 1001001);
    assert_false(lb.u.reps.frozen);
    for (int i = 0; i < 16; i++)
        assert_int_equal(ub__lb_next_ev(&lb, 1001001), ub__rng_below(&ref, 256));
    assert_int_equal(ub__lb_next_ev(&lb, 1001001), 50);
    /* a timeout during exploration does not freeze */
    ub__lb_on_ack(&lb, 51, false, true, 1001002);
    lb.u.reps.explore = 1;
    ub__lb_on_timeout(&lb, UB_LB_EV_UNKNOWN, 1001003);
    assert_false(lb.u.reps.frozen);
    /* no trimming: no freeze */
    p.trimming = false;
    assert_int_equal(ub__lb_init(&lb, &ub__lb_reps, &p), 0);
    ub__lb_on_ack(&lb, 10, false, true, 0);
    ub__lb_on_timeout(&lb, UB_LB_EV_UNKNOWN, 1000);
    assert_false(lb.u.reps.frozen);
}

/* Bitmap: an EV with penalty p is skipped on exactly its next p turns. */
static void test_bitmap_skip(void **state)
{
    (void)state;
    enum { N = 8, CALLS = 200 };
    struct ub__lb base, lb;
    struct ub__lb_params p = params(N, 99);
    assert_int_equal(ub__lb_init(&base, &ub__lb_bitmap, &p), 0);
    uint16_t ref[CALLS + 32];
    for (int i = 0; i < CALLS + 32; i++)
        ref[i] = ub__lb_next_ev(&base, 0);

    struct {
        const char *what;
        unsigned pen;
    } cases[] = {{"ecn", 1}, {"nack", 4}, {"timeout", 15}, {"nack+nack", 8}, {"sat", 15}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        assert_int_equal(ub__lb_init(&lb, ub__lb_algo_find("bitmap"), &p), 0);
        uint16_t bad = 3;
        switch (c) {
        case 0:
            ub__lb_on_ack(&lb, bad, true, true, 0);
            break;
        case 1:
            ub__lb_on_nack(&lb, bad, 0);
            break;
        case 2:
            ub__lb_on_timeout(&lb, bad, 0);
            break;
        case 3:
            ub__lb_on_nack(&lb, bad, 0);
            ub__lb_on_trim(&lb, bad, false, false, 0);
            break;
        default:
            ub__lb_on_timeout(&lb, bad, 0);
            ub__lb_on_nack(&lb, bad, 0); /* capped at 15 */
            break;
        }
        assert_int_equal(lb.u.bm.penalty[bad], cases[c].pen);
        ub__lb_on_ack(&lb, bad, false, true, 0); /* a good ACK neither adds nor clears */
        ub__lb_on_timeout(&lb, UB_LB_EV_UNKNOWN, 0);
        assert_int_equal(lb.u.bm.penalty[bad], cases[c].pen);
        /* expected: the baseline order with `bad` dropped while penalised; each
         * call pays one unit for the first penalised EV it meets (htsim's decay),
         * so `bad` met twice in one call (end of a round, start of the next)
         * costs one unit for two skips */
        unsigned left = cases[c].pen, skipped = 0;
        int j = 0;
        for (int i = 0; i < CALLS; i++) {
            bool first = true;
            while (ref[j] == bad && left) {
                if (first)
                    left--;
                first = false;
                skipped++;
                j++;
            }
            assert_int_equal(ub__lb_next_ev(&lb, 0), ref[j]);
            j++;
        }
        assert_true(skipped >= cases[c].pen);
        assert_int_equal(lb.u.bm.penalty[bad], 0);
    }
}

/* A new packet's EV with flight bytes in flight; *chosen must say whether it started a burst. */
static uint16_t next_new_in(struct ub__lb *lb, uint32_t len, uint64_t flight)
{
    bool chosen;
    uint16_t before = lb->burst_ev;
    uint32_t left = lb->burst_left;
    uint16_t ev = ub__lb_next_ev_new(lb, len, flight, &chosen, 0);
    assert_int_equal(chosen, left < len);
    if (!chosen)
        assert_int_equal(ev, before);
    return ev;
}

/* ... with plenty in flight: bursts of the full size. */
static uint16_t next_new(struct ub__lb *lb, uint32_t len)
{
    return next_new_in(lb, len, 1ull << 40);
}

/*
 * Bursts: a new packet stays on the current burst's EV while the burst has room for it;
 * every other packet takes the balancer's next choice, exactly the sequence a balancer
 * without bursts gives. Retransmissions draw outside the burst; a NACK, timeout or ECN
 * echo for the burst's EV ends it, a clean ACK or word on another EV does not.
 */
static void test_bursts(void **state)
{
    (void)state;
    struct ub__lb lb, ref;
    struct ub__lb_params p = params(8, 11);
    assert_int_equal(ub__lb_init(&ref, &ub__lb_oblivious, &p), 0);
    p.burst = 3000;
    assert_int_equal(ub__lb_init(&lb, &ub__lb_oblivious, &p), 0);
    uint16_t c[16];
    for (size_t i = 0; i < 16; i++)
        c[i] = ub__lb_next_ev(&ref, 0);
    /* 3 x 1000 bytes fill a burst; the fourth starts the next. */
    assert_int_equal(next_new(&lb, 1000), c[0]);
    assert_int_equal(next_new(&lb, 1000), c[0]);
    assert_int_equal(next_new(&lb, 1000), c[0]);
    assert_int_equal(next_new(&lb, 1000), c[1]);
    /* 2 000 bytes left: a 2 500-byte packet does not fit, a 500-byte one after it does. */
    assert_int_equal(next_new(&lb, 2500), c[2]);
    assert_int_equal(next_new(&lb, 500), c[2]);
    assert_int_equal(next_new(&lb, 1000), c[3]);
    /* A retransmission's draw, a clean ACK and a NACK on another EV leave the burst alone. */
    assert_int_equal(ub__lb_next_ev(&lb, 0), c[4]);
    ub__lb_on_ack(&lb, c[3], false, false, 0);
    uint16_t other = (uint16_t)((c[3] + 1) % 8);
    ub__lb_on_nack(&lb, other, 0);
    ub__lb_on_timeout(&lb, other, 0);
    assert_int_equal(next_new(&lb, 1000), c[3]);
    assert_int_equal(next_new(&lb, 1000), c[3]);
    /* A NACK, a timeout, a congested trim, an ECN echo for the burst's EV end it. */
    assert_int_equal(next_new(&lb, 1000), c[5]);
    ub__lb_on_nack(&lb, c[5], 0);
    assert_int_equal(next_new(&lb, 1000), c[6]);
    ub__lb_on_timeout(&lb, c[6], 0);
    assert_int_equal(next_new(&lb, 1000), c[7]);
    ub__lb_on_trim(&lb, c[7], false, false, 0);
    assert_int_equal(next_new(&lb, 1000), c[8]);
    ub__lb_on_ack(&lb, c[8], true, false, 0);
    assert_int_equal(next_new(&lb, 1000), c[9]);
    /* A trim at the last hop says nothing against the path. */
    ub__lb_on_trim(&lb, c[9], true, false, 0);
    assert_int_equal(next_new(&lb, 1000), c[9]);
    /* A packet larger than a burst is a burst of its own. */
    assert_int_equal(next_new(&lb, 1000), c[9]);
    assert_int_equal(next_new(&lb, 4000), c[10]);
    assert_int_equal(next_new(&lb, 1), c[11]);

    /* A burst is at most an ev_count-th of what is in flight: 8 000 bytes over 8 EVs leave
     * room for one 1 000-byte packet, 16 000 for two, 80 000 for the full 3 000. */
    p = params(8, 11);
    p.burst = 3000;
    assert_int_equal(ub__lb_init(&lb, &ub__lb_oblivious, &p), 0);
    assert_int_equal(next_new_in(&lb, 1000, 0), c[0]);
    assert_int_equal(next_new_in(&lb, 1000, 8000), c[1]);
    assert_int_equal(next_new_in(&lb, 1000, 16000), c[2]);
    assert_int_equal(next_new_in(&lb, 1000, 16000), c[2]);
    assert_int_equal(next_new_in(&lb, 1000, 80000), c[3]);
    assert_int_equal(next_new_in(&lb, 1000, 0), c[3]); /* set when the burst began */
    assert_int_equal(next_new_in(&lb, 1000, 0), c[3]);
    assert_int_equal(next_new_in(&lb, 1000, 80000), c[4]);

    /* Without bursts (0, or a burst no larger than the packet) every new packet chooses. */
    static const uint32_t none[] = {0, 1000};
    for (size_t k = 0; k < 2; k++) {
        p.burst = none[k];
        assert_int_equal(ub__lb_init(&lb, &ub__lb_oblivious, &p), 0);
        for (size_t i = 0; i < 16; i++)
            assert_int_equal(next_new(&lb, 1000), c[i]);
    }
    /* REPS learns of a good EV once per choice: the ACKs of a burst's other packets
     * (chosen false) recycle nothing, a congested one counts as always. */
    p = params(8, 5);
    p.burst = 4000;
    assert_int_equal(ub__lb_init(&lb, &ub__lb_reps, &p), 0);
    uint16_t e0 = next_new(&lb, 1000);
    for (int i = 0; i < 3; i++)
        assert_int_equal(next_new(&lb, 1000), e0);
    ub__lb_on_ack(&lb, e0, false, true, 0);
    for (int i = 0; i < 3; i++)
        ub__lb_on_ack(&lb, e0, false, false, 0);
    assert_int_equal(lb.u.reps.fresh, 1);
    ub__lb_on_ack(&lb, e0, true, false, 0); /* marked: not recycled, and heard */
    assert_int_equal(lb.u.reps.fresh, 1);
    assert_int_equal(next_new(&lb, 1000), e0); /* the one recycled EV */
    assert_int_equal(lb.u.reps.fresh, 0);

    /* One EV: always 0. */
    p = params(1, 3);
    p.burst = 3000;
    assert_int_equal(ub__lb_init(&lb, &ub__lb_reps, &p), 0);
    for (int i = 0; i < 10; i++)
        assert_int_equal(next_new(&lb, 1000), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry),         cmocka_unit_test(test_single),
        cmocka_unit_test(test_oblivious_rounds), cmocka_unit_test(test_random),
        cmocka_unit_test(test_reps_recycle),     cmocka_unit_test(test_reps_freeze),
        cmocka_unit_test(test_bitmap_skip),      cmocka_unit_test(test_bursts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
