/* Unit tests: the bounds-checked big-endian cursors (src/wire/cursor.h). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <softub/errors.h>

#include "wire/cursor.h"

static void test_reader_big_endian(void **state)
{
    (void)state;
    static const uint8_t b[] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a,
                                0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14,
                                0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d};
    struct ub__rcur r;
    ub__rcur_init(&r, b, sizeof(b));
    assert_int_equal(ub__rcur_remaining(&r), 29);
    assert_int_equal(ub__get_u8(&r), 0x01);
    assert_int_equal(ub__get_u16(&r), 0x0203);
    assert_int_equal(ub__get_u24(&r), 0x040506);
    assert_int_equal(ub__get_u32(&r), 0x0708090a);
    assert_true(ub__get_u48(&r) == 0x0b0c0d0e0f10ull);
    assert_true(ub__get_u64(&r) == 0x1112131415161718ull);
    uint8_t out[3];
    ub__get_bytes(&r, out, 3);
    assert_int_equal(out[0], 0x19);
    assert_int_equal(out[2], 0x1b);
    assert_int_equal(ub__rcur_offset(&r), 27);
    ub__rcur_skip(&r, 1);
    assert_int_equal(ub__rcur_remaining(&r), 1);
    assert_int_equal(ub__rcur_error(&r), 0);
    assert_int_equal(ub__get_u8(&r), 0x1d);
    assert_int_equal(ub__rcur_remaining(&r), 0);
    assert_int_equal(ub__rcur_error(&r), 0);
}

static void test_reader_sticky_error(void **state)
{
    (void)state;
    static const uint8_t b[] = {0xff, 0xfe, 0xfd};
    struct ub__rcur r;
    ub__rcur_init(&r, b, sizeof(b));
    assert_int_equal(ub__get_u16(&r), 0xfffe);
    assert_int_equal(ub__get_u16(&r), 0); /* needs 2, has 1 */
    assert_int_equal(ub__rcur_error(&r), UB_ETRUNC);
    assert_int_equal(ub__rcur_offset(&r), 2); /* nothing consumed */
    assert_int_equal(ub__rcur_remaining(&r), 0);
    /* the last byte is there, but the cursor stays failed */
    assert_int_equal(ub__get_u8(&r), 0);
    uint8_t out[2] = {0x77, 0x77};
    ub__get_bytes(&r, out, 2);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[1], 0);
    assert_null(ub__rcur_take(&r, 0));
    assert_int_equal(ub__rcur_error(&r), UB_ETRUNC);
}

static void test_reader_each_width_at_the_edge(void **state)
{
    (void)state;
    static const uint8_t b[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    static const size_t widths[] = {1, 2, 3, 4, 6, 8};
    for (size_t i = 0; i < sizeof(widths) / sizeof(widths[0]); i++) {
        size_t wd = widths[i];
        for (size_t len = 0; len <= 8; len++) {
            struct ub__rcur r;
            ub__rcur_init(&r, b, len);
            uint64_t v = ub__rcur_be(&r, wd);
            if (len >= wd) {
                assert_int_equal(ub__rcur_error(&r), 0);
                assert_true(v != 0);
                assert_int_equal(ub__rcur_offset(&r), wd);
            } else {
                assert_int_equal(ub__rcur_error(&r), UB_ETRUNC);
                assert_true(v == 0);
                assert_int_equal(ub__rcur_offset(&r), 0);
            }
        }
    }
}

static void test_reader_null_and_empty(void **state)
{
    (void)state;
    struct ub__rcur r;
    ub__rcur_init(&r, NULL, 100); /* NULL reads as empty whatever the length */
    assert_int_equal(ub__rcur_remaining(&r), 0);
    assert_non_null(ub__rcur_take(&r, 0));
    assert_int_equal(ub__get_u8(&r), 0);
    assert_int_equal(ub__rcur_error(&r), UB_ETRUNC);
}

static void test_reader_peek(void **state)
{
    (void)state;
    static const uint8_t b[] = {0xaa, 0xbb};
    struct ub__rcur r;
    ub__rcur_init(&r, b, sizeof(b));
    const uint8_t *p = ub__rcur_peek(&r, 2);
    assert_non_null(p);
    assert_int_equal(p[1], 0xbb);
    assert_null(ub__rcur_peek(&r, 3));
    assert_int_equal(ub__rcur_error(&r), 0); /* peeking does not fail the cursor */
    assert_int_equal(ub__rcur_offset(&r), 0);
}

static void test_writer_big_endian(void **state)
{
    (void)state;
    uint8_t buf[32 + 8];
    memset(buf, 0xa5, sizeof(buf));
    struct ub__wcur w;
    ub__wcur_init(&w, buf, 32);
    ub__put_u8(&w, 0x01);
    ub__put_u16(&w, 0x0203);
    ub__put_u24(&w, 0xff040506); /* only the low 24 bits */
    ub__put_u32(&w, 0x0708090a);
    ub__put_u48(&w, 0xffff0b0c0d0e0f10ull);
    ub__put_u64(&w, 0x1112131415161718ull);
    ub__put_bytes(&w, "\x19\x1a", 2);
    ub__put_zero(&w, 3);
    assert_int_equal(ub__wcur_error(&w), 0);
    assert_int_equal(ub__wcur_offset(&w), 29);
    assert_int_equal(ub__wcur_remaining(&w), 3);
    static const uint8_t expect[29] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a,
                                       0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14,
                                       0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x00, 0x00, 0x00};
    assert_memory_equal(buf, expect, sizeof(expect));
    for (size_t i = 29; i < sizeof(buf); i++)
        assert_int_equal(buf[i], 0xa5);
}

static void test_writer_sticky_and_bounded(void **state)
{
    (void)state;
    uint8_t buf[8];
    memset(buf, 0xa5, sizeof(buf));
    struct ub__wcur w;
    ub__wcur_init(&w, buf, 5);
    ub__put_u32(&w, 0x01020304);
    ub__put_u16(&w, 0xbeef); /* does not fit: nothing written */
    assert_int_equal(ub__wcur_error(&w), UB_ETRUNC);
    assert_int_equal(ub__wcur_offset(&w), 4);
    assert_int_equal(buf[4], 0xa5);
    ub__put_u8(&w, 0x55); /* would fit, but the writer has failed */
    assert_int_equal(buf[4], 0xa5);
    ub__put_bytes(&w, "x", 1);
    ub__put_zero(&w, 1);
    assert_int_equal(buf[4], 0xa5);
    assert_int_equal(ub__wcur_remaining(&w), 0);
    assert_int_equal(ub__wcur_reserve(&w, 0), UB_ETRUNC);
    for (size_t i = 4; i < sizeof(buf); i++)
        assert_int_equal(buf[i], 0xa5);
}

static void test_writer_each_width_at_the_edge(void **state)
{
    (void)state;
    static const size_t widths[] = {1, 2, 3, 4, 6, 8};
    for (size_t i = 0; i < sizeof(widths) / sizeof(widths[0]); i++) {
        for (size_t cap = 0; cap <= 8; cap++) {
            uint8_t buf[16];
            memset(buf, 0xa5, sizeof(buf));
            struct ub__wcur w;
            ub__wcur_init(&w, buf, cap);
            ub__wcur_be(&w, 0x0102030405060708ull, widths[i]);
            if (cap >= widths[i]) {
                assert_int_equal(ub__wcur_error(&w), 0);
                assert_int_equal(buf[widths[i] - 1], 0x08);
            } else {
                assert_int_equal(ub__wcur_error(&w), UB_ETRUNC);
                assert_int_equal(ub__wcur_offset(&w), 0);
            }
            for (size_t j = widths[i] <= cap ? widths[i] : 0; j < sizeof(buf); j++)
                assert_int_equal(buf[j], 0xa5);
        }
    }
}

static void test_writer_reserve(void **state)
{
    (void)state;
    uint8_t buf[4];
    struct ub__wcur w;
    ub__wcur_init(&w, buf, sizeof(buf));
    assert_int_equal(ub__wcur_reserve(&w, 4), 0);
    assert_int_equal(ub__wcur_offset(&w), 0); /* reserving does not advance */
    assert_int_equal(ub__wcur_reserve(&w, 5), UB_ETRUNC);
    assert_int_equal(ub__wcur_error(&w), UB_ETRUNC);
    struct ub__wcur e;
    ub__wcur_init(&e, NULL, 10);
    assert_int_equal(ub__wcur_remaining(&e), 0);
    ub__put_zero(&e, 0);
    assert_int_equal(ub__wcur_error(&e), 0);
    ub__put_u8(&e, 1);
    assert_int_equal(ub__wcur_error(&e), UB_ETRUNC);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reader_big_endian),
        cmocka_unit_test(test_reader_sticky_error),
        cmocka_unit_test(test_reader_each_width_at_the_edge),
        cmocka_unit_test(test_reader_null_and_empty),
        cmocka_unit_test(test_reader_peek),
        cmocka_unit_test(test_writer_big_endian),
        cmocka_unit_test(test_writer_sticky_and_bounded),
        cmocka_unit_test(test_writer_each_width_at_the_edge),
        cmocka_unit_test(test_writer_reserve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
