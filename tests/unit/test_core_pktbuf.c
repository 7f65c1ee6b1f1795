/* Packet pool: exhaustion, refcounts, headroom/tailroom bounds, clones. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include <softub/errors.h>
#include "core/pktbuf.h"

static void test_alloc_until_empty(void **state)
{
    (void)state;
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 0, 2048, 64), UB_EINVAL);
    assert_int_equal(ub__pktpool_init(&pool, 4, 64, 64), UB_EINVAL);
    assert_int_equal(ub__pktpool_init(&pool, 4, 2048, 64), 0);
    struct ub__pkt *p[5];
    for (int i = 0; i < 4; i++) {
        p[i] = ub__pkt_alloc(&pool);
        assert_non_null(p[i]);
        assert_int_equal((uintptr_t)p[i]->head % 64, 0);
        assert_int_equal(ub__pkt_headroom(p[i]), 64);
        assert_int_equal(ub__pkt_tailroom(p[i]), 2048 - 64);
    }
    p[4] = ub__pkt_alloc(&pool);
    assert_null(p[4]);
    assert_int_equal(pool.exhausted, 1);
    assert_int_equal(pool.avail, 0);
    for (int i = 0; i < 4; i++)
        ub__pkt_free(p[i]);
    assert_int_equal(pool.avail, 4);
    ub__pktpool_fini(&pool);
}

static void test_refcount(void **state)
{
    (void)state;
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 1, 256, 32), 0);
    struct ub__pkt *p = ub__pkt_alloc(&pool);
    ub__pkt_ref(p);
    ub__pkt_free(p);
    assert_int_equal(pool.avail, 0); /* still referenced */
    ub__pkt_free(p);
    assert_int_equal(pool.avail, 1);
    ub__pktpool_fini(&pool);
}

static void test_put_push_pull_bounds(void **state)
{
    (void)state;
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 2, 256, 32), 0);
    struct ub__pkt *p = ub__pkt_alloc(&pool);
    uint8_t *d = ub__pkt_put(p, 100);
    assert_ptr_equal(d, p->head + 32);
    memset(d, 0xab, 100);
    assert_null(ub__pkt_put(p, 256 - 32 - 100 + 1));
    assert_non_null(ub__pkt_put(p, 256 - 32 - 100));
    assert_int_equal(ub__pkt_tailroom(p), 0);
    uint8_t *h = ub__pkt_push(p, 16);
    assert_ptr_equal(h, p->head + 16);
    assert_null(ub__pkt_push(p, 17));
    assert_int_equal(p->len, 256 - 16);
    assert_non_null(ub__pkt_pull(p, 16));
    assert_null(ub__pkt_pull(p, p->len + 1));
    assert_int_equal(p->data[0], 0xab);

    p->path = 5;
    p->ecn = 3;
    ub__addr_loop(&p->addr, 9);
    struct ub__pkt *c = ub__pkt_clone(p);
    assert_non_null(c);
    assert_int_equal(c->len, p->len);
    assert_int_equal(ub__pkt_headroom(c), ub__pkt_headroom(p));
    assert_memory_equal(c->data, p->data, p->len);
    assert_int_equal(c->path, 5);
    assert_int_equal(c->ecn, 3);
    assert_true(ub__addr_eq(&c->addr, &p->addr));
    assert_null(ub__pkt_clone(p)); /* pool of two is empty now */
    ub__pkt_free(c);
    ub__pkt_free(p);
    assert_int_equal(pool.avail, 2);
    ub__pktpool_fini(&pool);
}

/* An attached payload: counted on the wire, flattened into the tailroom with the same bytes,
 * copied by clone, and nothing may be put after it. */
static void test_attach_flatten(void **state)
{
    (void)state;
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 4, 256, 32), 0);
    uint8_t ext[200];
    for (uint32_t i = 0; i < sizeof(ext); i++)
        ext[i] = (uint8_t)(i * 7 + 1);

    struct ub__pkt *p = ub__pkt_alloc(&pool);
    memset(ub__pkt_put(p, 20), 0x11, 20);
    assert_int_equal(ub__pkt_attach(p, ext, 205), UB_ENOBUFS); /* 256 - 32 - 20 = 204 */
    assert_int_equal(p->xlen, 0);
    assert_int_equal(ub__pkt_attach(p, ext, 0), 0); /* nothing to attach */
    assert_int_equal(p->xlen, 0);
    assert_int_equal(ub__pkt_attach(p, ext, sizeof(ext)), 0);
    assert_int_equal(ub__pkt_attach(p, ext, 1), UB_EINVAL);
    assert_int_equal(p->len, 20);
    assert_int_equal(ub__pkt_total_len(p), 220);
    assert_int_equal(ub__pkt_wire_len(p), 220);
    assert_null(ub__pkt_put(p, 1));      /* it would land before the payload */
    memset(ub__pkt_push(p, 8), 0x22, 8); /* headers go in front as before */
    assert_int_equal(ub__pkt_wire_len(p), 228);

    struct ub__pkt *c = ub__pkt_clone(p); /* flat, same bytes */
    assert_non_null(c);
    assert_int_equal(c->xlen, 0);
    assert_null(c->xdata);
    assert_int_equal(c->len, 228);
    assert_int_equal(ub__pkt_wire_len(c), 228);
    assert_memory_equal(c->data, p->data, 28);
    assert_memory_equal(c->data + 28, ext, sizeof(ext));

    ub__pkt_flatten(p);
    assert_int_equal(p->xlen, 0);
    assert_null(p->xdata);
    assert_int_equal(p->len, 228);
    assert_int_equal(p->wire_len, 0);
    assert_memory_equal(p->data, c->data, 228);
    ext[0] ^= 0xff; /* the owner may change its memory now */
    assert_int_equal(p->data[28], (uint8_t)(ext[0] ^ 0xff));
    ub__pkt_flatten(p); /* flat: nothing happens */
    assert_int_equal(p->len, 228);

    /* A headers-only packet with a virtual payload (the simulator's) keeps its wire_len. */
    struct ub__pkt *v = ub__pkt_alloc(&pool);
    ub__pkt_put(v, 10);
    v->wire_len = 1000;
    struct ub__pkt *arr[] = {v, c};
    ub__pkts_flatten(arr, 2);
    assert_int_equal(v->len, 10);
    assert_int_equal(ub__pkt_wire_len(v), 1000);

    /* A reused buffer comes without a payload attached. */
    ub__pkt_free(v);
    v = ub__pkt_alloc(&pool);
    assert_int_equal(v->xlen, 0);
    assert_null(v->xdata);
    ub__pkt_free(v);
    ub__pkt_free(c);
    ub__pkt_free(p);
    assert_int_equal(pool.avail, 4);
    ub__pktpool_fini(&pool);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_until_empty),
        cmocka_unit_test(test_refcount),
        cmocka_unit_test(test_put_push_pull_bounds),
        cmocka_unit_test(test_attach_flatten),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
