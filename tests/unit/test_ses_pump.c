/*
 * The request pump (ub__ses_pump_work): requests go out in posting order, and a peer whose
 * budget of queued packets (UB_SES_PKT_BUDGET) is used up holds back only its own. A pass
 * that found nothing but the busy peer's requests behind the first one is remembered until
 * the queue changes (a bulk sender's rounds then stop at its first request); a request to
 * another peer posted afterwards still goes at once. While every queued request goes to one
 * peer, a pass that finds it busy ends there, the queue changed or not (a bulk sender of many
 * JFSs has thousands queued). With several busy peers' requests interleaved, a pass asks
 * about each peer once, not about each request.
 */
#include "unit/api_util.h"

#define P_MEM   (4u << 20)
#define P_TOKEN 0x5eedull
#define P_BIG   65536u /* 16 packets of the loop fabric's MTU */
#define P_N     40u    /* 640 packets to node 1: past the budget */
#define P_BIG2  (2 * P_BIG)
#define P_N2    24u /* to each of two nodes: 768 packets, within the JFS's depth of 64 */

static ub_seg *reg(struct tnet *t, uint32_t i, uint8_t **mem)
{
    *mem = aligned_alloc(4096, P_MEM);
    assert_non_null(*mem);
    memset(*mem, 0, P_MEM);
    ub_seg *s;
    assert_int_equal(ub_seg_register(t->ctx[i], *mem, P_MEM, ALL_ACCESS, P_TOKEN, &s), 0);
    return s;
}

/* Three nodes, each with a registered region; node 0 holds nodes 1's and 2's. */
struct three {
    struct tnet t;
    uint8_t *m0, *m1, *m2;
    ub_seg *s0;
    ub_tseg *ts1, *ts2;
};

static void three_init(struct three *x, uint32_t pattern)
{
    tnet_init(&x->t, 3, 0, true, false);
    x->s0 = reg(&x->t, 0, &x->m0);
    ub_seg *s1 = reg(&x->t, 1, &x->m1), *s2 = reg(&x->t, 2, &x->m2);
    x->ts1 = tnet_import_seg(&x->t, 0, s1, P_TOKEN);
    x->ts2 = tnet_import_seg(&x->t, 0, s2, P_TOKEN);
    fill_pattern(x->m0, P_MEM, pattern);
}

static void three_fini(struct three *x)
{
    tnet_fini(&x->t);
    free(x->m0);
    free(x->m1);
    free(x->m2);
}

static void write_to(struct three *x, uint8_t *src, ub_tseg *ts, uint64_t off, uint32_t len,
                     uint64_t id)
{
    tnet_post_write(&x->t, src, len, x->s0, ts, off, id);
}

static void test_busy_peer_holds_back_only_its_own(void **state)
{
    (void)state;
    struct three x;
    three_init(&x, 3);
    for (uint32_t i = 0; i < P_N; i++)
        write_to(&x, x.m0, x.ts1, (uint64_t)i * P_BIG, P_BIG, 100 + i);
    /* Node 1 never runs: node 0's queue to it fills the budget, and its passes find only
     * node 1's requests behind the first. */
    struct ub__tl *s = &x.t.ctx[0]->ses;
    for (int i = 0; i < 8; i++)
        ub_progress(x.t.ctx[0]);
    assert_false(ub__list_empty(&s->txq));
    assert_int_equal(s->txq_idle_gen, s->txq_gen);
    uint64_t gen = s->txq_gen;
    ub_progress(x.t.ctx[0]);
    assert_int_equal(s->txq_gen, gen); /* the next pass changed nothing */
    /* The queue changes (one more request, to node 1 too): the post's pass, and the next,
     * still end at the first request, its peer busy, instead of passing over the ten behind
     * it one by one. */
    uint64_t passed = s->st.tx_passed, asked = s->st.tx_busy;
    write_to(&x, x.m0, x.ts1, (uint64_t)P_N * P_BIG, 512, 99);
    assert_int_not_equal(s->txq_gen, gen);
    ub__ses_pump_work(s, ub__ctx_now(x.t.ctx[0]));
    assert_int_equal(s->st.tx_busy - asked, 2);
    assert_int_equal(s->st.tx_passed, passed);
    /* A WRITE to node 2 goes while node 1 still does not run. */
    write_to(&x, x.m0 + 1000, x.ts2, 0, 512, 7);
    struct ub_cr cr;
    int n = 0;
    for (int i = 0; i < 1000 && n == 0; i++) {
        ub_progress(x.t.ctx[0]);
        ub_progress(x.t.ctx[2]);
        n = ub_poll_jfc(x.t.jfc[0], 1, &cr);
    }
    assert_int_equal(n, 1);
    assert_int_equal(cr.user_ctx, 7);
    assert_int_equal(cr.status, UB_CR_SUCCESS);
    assert_memory_equal(x.m2, x.m0 + 1000, 512);
    /* Node 1 runs: every WRITE to it completes, intact. */
    for (uint32_t got = 0; got < P_N + 1;) {
        assert_int_equal(tnet_wait(&x.t, 0, &cr), 1);
        assert_int_equal(cr.status, UB_CR_SUCCESS);
        assert_true((cr.user_ctx >= 100 && cr.user_ctx < 100 + P_N) || cr.user_ctx == 99);
        got++;
    }
    for (uint32_t i = 0; i < P_N; i++)
        assert_memory_equal(x.m1 + (size_t)i * P_BIG, x.m0, P_BIG);
    three_fini(&x);
}

static void test_busy_peers_asked_once_a_pass(void **state)
{
    (void)state;
    struct three x;
    three_init(&x, 5);
    for (uint32_t i = 0; i < P_N2; i++) { /* to nodes 1 and 2 in turn; neither runs */
        write_to(&x, x.m0, x.ts1, (uint64_t)i * P_BIG2, P_BIG2, 100 + i);
        write_to(&x, x.m0, x.ts2, (uint64_t)i * P_BIG2, P_BIG2, 200 + i);
    }
    struct ub__tl *s = &x.t.ctx[0]->ses;
    for (int i = 0; i < 8; i++)
        ub_progress(x.t.ctx[0]);
    assert_false(ub__list_empty(&s->txq));
    uint64_t asked = s->st.tx_busy, passed = s->st.tx_passed;
    ub__ses_pump_work(s, ub__ctx_now(x.t.ctx[0])); /* one pass */
    assert_int_equal(s->st.tx_busy - asked, 2);    /* of dozens of requests queued for each */
    /* The queue holds two peers' requests: the rest of each is passed over, one by one. */
    assert_true(s->st.tx_passed - passed >= 2);
    /* Both run: every WRITE completes, intact. */
    struct ub_cr cr;
    for (uint32_t got = 0; got < 2 * P_N2;) {
        int n = 0;
        for (int i = 0; i < 100000 && n == 0; i++) {
            for (uint32_t k = 0; k < 3; k++)
                ub_progress(x.t.ctx[k]);
            n = ub_poll_jfc(x.t.jfc[0], 1, &cr);
        }
        assert_int_equal(n, 1);
        assert_int_equal(cr.status, UB_CR_SUCCESS);
        got++;
    }
    for (uint32_t i = 0; i < P_N2; i++) {
        assert_memory_equal(x.m1 + (size_t)i * P_BIG2, x.m0, P_BIG2);
        assert_memory_equal(x.m2 + (size_t)i * P_BIG2, x.m0, P_BIG2);
    }
    three_fini(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_busy_peer_holds_back_only_its_own),
        cmocka_unit_test(test_busy_peers_asked_once_a_pass),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
