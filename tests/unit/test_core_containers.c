/* hmap, ring, list, growing arrays and serial-number arithmetic. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <softub/errors.h>
#include "core/grow.h"
#include "core/hmap.h"
#include "core/list.h"
#include "core/rand.h"
#include "core/ring.h"
#include "core/seq.h"

static void *val_of(uint64_t k)
{
    return (void *)(uintptr_t)(k * 2 + 1); /* never NULL */
}

static void test_hmap_basic(void **state)
{
    (void)state;
    struct ub__hmap m;
    assert_int_equal(ub__hmap_init(&m, 0, 0, 1), 0);
    assert_null(ub__hmap_get(&m, 5));
    assert_int_equal(ub__hmap_put(&m, 5, val_of(5)), 0);
    assert_int_equal(ub__hmap_put(&m, 5, val_of(5)), UB_EEXIST);
    assert_int_equal(ub__hmap_put(&m, 6, NULL), UB_EINVAL);
    assert_ptr_equal(ub__hmap_get(&m, 5), val_of(5));
    assert_ptr_equal(ub__hmap_del(&m, 5), val_of(5));
    assert_null(ub__hmap_del(&m, 5));
    assert_int_equal(m.count, 0);
    ub__hmap_fini(&m);
}

static void test_hmap_bounded(void **state)
{
    (void)state;
    struct ub__hmap m;
    assert_int_equal(ub__hmap_init(&m, 4, 3, 1), 0);
    for (uint64_t k = 0; k < 3; k++)
        assert_int_equal(ub__hmap_put(&m, k, val_of(k)), 0);
    assert_int_equal(ub__hmap_put(&m, 3, val_of(3)), UB_EFULL);
    ub__hmap_del(&m, 1);
    assert_int_equal(ub__hmap_put(&m, 3, val_of(3)), 0);
    ub__hmap_fini(&m);
}

/* Random churn against a shadow array: every lookup agrees, through growth and deletion. */
static void test_hmap_churn(void **state)
{
    (void)state;
    enum { K = 4096 };
    static uint8_t present[K];
    struct ub__hmap m;
    assert_int_equal(ub__hmap_init(&m, 4, 0, 99), 0);
    struct ub__rng r;
    ub__rng_seed(&r, 3);
    uint32_t count = 0;
    for (int i = 0; i < 200000; i++) {
        uint64_t k = ub__rng_below(&r, K);
        if (present[k]) {
            assert_ptr_equal(ub__hmap_del(&m, k * 7919), val_of(k));
            present[k] = 0;
            count--;
        } else {
            assert_int_equal(ub__hmap_put(&m, k * 7919, val_of(k)), 0);
            present[k] = 1;
            count++;
        }
        if (i % 1000 == 0) {
            for (uint64_t j = 0; j < K; j++)
                assert_ptr_equal(ub__hmap_get(&m, j * 7919), present[j] ? val_of(j) : NULL);
        }
    }
    assert_int_equal(m.count, count);
    uint32_t seen = 0;
    uint64_t key;
    void *val;
    for (uint32_t pos = 0; (pos = ub__hmap_next(&m, pos, &key, &val)) != 0;) {
        assert_true(present[key / 7919]);
        seen++;
    }
    assert_int_equal(seen, count);
    ub__hmap_fini(&m);
}

static void test_ring(void **state)
{
    (void)state;
    struct ub__ring r;
    assert_int_equal(ub__ring_init(&r, 5), 0);
    assert_int_equal(ub__ring_capacity(&r), 8);
    assert_null(ub__ring_pop(&r));
    int v[20];
    /* Wrap the indices several times. */
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < 8; i++)
            assert_true(ub__ring_push(&r, &v[i]));
        assert_false(ub__ring_push(&r, &v[9]));
        assert_ptr_equal(ub__ring_peek(&r), &v[0]);
        for (int i = 0; i < 8; i++)
            assert_ptr_equal(ub__ring_pop(&r), &v[i]);
        assert_int_equal(ub__ring_count(&r), 0);
    }
    ub__ring_fini(&r);
}

struct node {
    struct ub__list link;
    int v;
};

static void test_list(void **state)
{
    (void)state;
    struct ub__list head, *it, *tmp;
    ub__list_init(&head);
    struct node n[4];
    for (int i = 0; i < 4; i++) {
        n[i].v = i;
        ub__list_push_back(&head, &n[i].link);
    }
    ub__list_remove(&n[1].link);
    ub__list_remove(&n[1].link);
    int want[3] = {0, 2, 3}, k = 0;
    UB_LIST_FOR_EACH(it, &head)
    {
        assert_int_equal(UB_CONTAINER_OF(it, struct node, link)->v, want[k++]);
    }
    assert_int_equal(k, 3);
    UB_LIST_FOR_EACH_SAFE(it, tmp, &head)
    {
        ub__list_remove(it);
    }
    assert_true(ub__list_empty(&head));
    assert_null(ub__list_pop_front(&head));
}

static void test_seq(void **state)
{
    (void)state;
    assert_true(ub__seq_lt(1, 2));
    assert_false(ub__seq_lt(2, 2));
    assert_true(ub__seq_le(2, 2));
    assert_true(ub__seq_lt(0xfffffff0u, 5)); /* across the wrap */
    assert_false(ub__seq_lt(5, 0xfffffff0u));
    assert_int_equal(ub__seq_max(0xfffffff0u, 5), 5);
    assert_int_equal(ub__seq_diff(3, 0xffffffffu), 4);
}

/* Doubling from `first`, contents kept; a capacity that cannot double leaves all as it was. */
static void test_grow(void **state)
{
    (void)state;
    uint32_t cap = 0;
    uint64_t *v = ub__grow(NULL, &cap, sizeof(*v), 4);
    assert_non_null(v);
    assert_int_equal(cap, 4);
    for (uint64_t i = 0; i < 4; i++)
        v[i] = i * 3;
    uint64_t *w = ub__grow(v, &cap, sizeof(*w), 4);
    assert_non_null(w);
    assert_int_equal(cap, 8);
    for (uint64_t i = 0; i < 4; i++)
        assert_int_equal(w[i], i * 3);
    uint32_t huge = 1u << 31;
    assert_null(ub__grow(w, &huge, 1, 4));
    assert_int_equal(huge, 1u << 31);
    free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hmap_basic), cmocka_unit_test(test_hmap_bounded),
        cmocka_unit_test(test_hmap_churn), cmocka_unit_test(test_ring),
        cmocka_unit_test(test_list),       cmocka_unit_test(test_seq),
        cmocka_unit_test(test_grow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
