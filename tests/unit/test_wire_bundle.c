/* Unit tests: datagram bundles (src/wire/bundle.c). Layout: docs/wire-format.md section 7.1. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include <softub/errors.h>

#include "wire/bundle.h"

/* Two records: a 3-byte and a 1-byte packet. */
static const uint8_t v_two[] = {0xf8, 0x00, 0x03, 0x40, 0x01, 0x02, 0x00, 0x01, 0x17};

static void test_bundle_encode(void **state)
{
    (void)state;
    const uint8_t a[] = {0x40, 0x01, 0x02}, b[] = {0x17};
    uint8_t out[sizeof(v_two) + 4];
    memset(out, 0xa5, sizeof(out));
    size_t n = ub__bundle_put_hdr(out);
    n += ub__bundle_put_rec(out + n, a, sizeof(a));
    n += ub__bundle_put_rec(out + n, b, sizeof(b));
    assert_int_equal(n, sizeof(v_two));
    assert_int_equal(n, ub__bundle_size(sizeof(a) + sizeof(b), 2));
    assert_memory_equal(out, v_two, sizeof(v_two));
    assert_int_equal(out[n], 0xa5);
}

static void test_bundle_decode(void **state)
{
    (void)state;
    assert_true(ub__bundle_is(v_two, sizeof(v_two)));
    assert_int_equal(ub__bundle_check(v_two, sizeof(v_two)), 2);
    size_t off = 0, len;
    const uint8_t *rec;
    assert_int_equal(ub__bundle_next(v_two, sizeof(v_two), &off, &rec, &len), 1);
    assert_ptr_equal(rec, v_two + 3);
    assert_int_equal(len, 3);
    assert_int_equal(ub__bundle_next(v_two, sizeof(v_two), &off, &rec, &len), 1);
    assert_ptr_equal(rec, v_two + 8);
    assert_int_equal(len, 1);
    assert_int_equal(ub__bundle_next(v_two, sizeof(v_two), &off, &rec, &len), 0);
}

static void test_bundle_malformed(void **state)
{
    (void)state;
    /* Every proper prefix: cut inside a record (or nothing after the marker). */
    for (size_t k = 0; k < sizeof(v_two); k++) {
        int rc = ub__bundle_check(v_two, k);
        if (k == 0 || k == 1)
            assert_int_equal(rc, UB_EBADMSG); /* not a bundle / no record */
        else if (k == 6)
            assert_int_equal(rc, 1); /* the first record alone is a whole bundle */
        else
            assert_int_equal(rc, UB_ETRUNC);
    }
    const uint8_t not_marked[] = {0x40, 0x00, 0x01, 0x17};
    assert_false(ub__bundle_is(not_marked, sizeof(not_marked)));
    assert_int_equal(ub__bundle_check(not_marked, sizeof(not_marked)), UB_EBADMSG);
    const uint8_t empty_rec[] = {0xf8, 0x00, 0x00, 0x00, 0x01, 0x17};
    assert_int_equal(ub__bundle_check(empty_rec, sizeof(empty_rec)), UB_EBADMSG);
    const uint8_t nested[] = {0xf8, 0x00, 0x04, 0xf8, 0x00, 0x01, 0x17};
    assert_int_equal(ub__bundle_check(nested, sizeof(nested)), UB_EBADMSG);
    const uint8_t overlong[] = {0xf8, 0x00, 0x05, 0x40, 0x01};
    assert_int_equal(ub__bundle_check(overlong, sizeof(overlong)), UB_ETRUNC);
    const uint8_t other_version[] = {0xf9, 0x00, 0x01, 0x17};
    assert_false(ub__bundle_is(other_version, sizeof(other_version)));
    assert_int_equal(ub__bundle_check(NULL, 4), UB_EBADMSG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bundle_encode),
        cmocka_unit_test(test_bundle_decode),
        cmocka_unit_test(test_bundle_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
