/* Unit tests: the softub extension header (src/wire/ext.c). Layout: docs/wire-format.md section 6.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <softub/errors.h>

#include "unit/wire_check.h"
#include "wire/ext.h"
#include "wire/pds.h"

WIRE_ADAPT(ext, struct ub__ext)

static const uint8_t v_ext_ro[16] = {0x03, 0x04, 0x78, 0x00, 0x00, 0x64, 0x01, 0x02,
                                     0x0a, 0x0b, 0x0c, 0x0d, 0xde, 0xad, 0xbe, 0xef};
static const uint8_t v_ext_so[16] = {0x04, 0x04, 0x84, 0x00, 0xff, 0xff, 0x00, 0x00,
                                     0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x01};

static struct ub__ext ext_ro(void)
{
    struct ub__ext h;
    memset(&h, 0, sizeof(h));
    h.next_hdr = UB_PDS_NH_REQ_STD;
    h.exec_order = UB_EXT_EO_RO;
    h.inorder_completion = true;
    h.fence = true;
    h.aqm_increase = true;
    h.aqm_hint = 100; /* 1 Gbit/s */
    h.stream = 0x0102;
    h.order_seq = 0x0a0b0c0d;
    h.incarnation = 0xdeadbeef;
    return h;
}

static void test_ext_vectors(void **state)
{
    (void)state;
    struct ub__ext h = ext_ro();
    wire_check_vector(ext_enc, ext_dec, &h, sizeof(h), v_ext_ro, 16);
    struct ub__ext d;
    assert_int_equal(wire_decode_exact(ext_dec, &d, v_ext_ro, 16, NULL), 0);
    assert_int_equal(d.exec_order, UB_EXT_EO_RO);
    assert_true(d.inorder_completion && d.fence && d.aqm_increase && !d.aqm_congestion);
    assert_int_equal(d.aqm_hint, 100);
    assert_int_equal(d.incarnation, 0xdeadbeef);
    assert_null(d.tail);
    assert_int_equal(d.tail_len, 0);
    assert_int_equal(ub__ext_size(&d), UB_EXT_SIZE);

    memset(&h, 0, sizeof(h));
    h.next_hdr = UB_PDS_NH_RSP;
    h.exec_order = UB_EXT_EO_SO;
    h.aqm_congestion = true;
    h.aqm_hint = 0xffff;
    h.order_seq = 0xffffffff;
    h.incarnation = 1;
    wire_check_vector(ext_enc, ext_dec, &h, sizeof(h), v_ext_so, 16);
}

static void test_ext_bad(void **state)
{
    (void)state;
    uint8_t m[16];
    wire_check_decode_fails(ext_dec, wire_mutate(m, v_ext_so, 16, 2, 0x40), 16,
                            UB_EBADMSG); /* EO 3 */
    wire_check_decode_fails(ext_dec, wire_mutate(m, v_ext_ro, 16, 2, 0x01), 16, UB_EBADMSG);
    wire_check_decode_fails(ext_dec, wire_mutate(m, v_ext_ro, 16, 2, 0x02), 16, UB_EBADMSG);
    wire_check_decode_fails(ext_dec, wire_mutate(m, v_ext_ro, 16, 3, 0x80), 16, UB_EBADMSG);
    wire_check_decode_fails(ext_dec, wire_mutate(m, v_ext_ro, 16, 0, 0x04), 16,
                            UB_EBADMSG); /* next_hdr 7 */
    wire_check_decode_fails(ext_dec, wire_mutate(m, v_ext_ro, 16, 0, 0x0c), 16,
                            UB_EBADMSG); /* next_hdr 15: no chained extensions */
    wire_check_decode_fails(ext_dec, wire_mutate(m, v_ext_ro, 16, 0, 0x80), 16,
                            UB_EBADMSG); /* version 8: incompatible */
    wire_check_decode_fails(ext_dec, wire_mutate(m, v_ext_ro, 16, 0, 0xf0), 16, UB_EBADMSG);
    wire_check_decode_fails(ext_dec, wire_mutate(m, v_ext_ro, 16, 1, 0x01), 16,
                            UB_EBADMSG); /* version 0 must be 16 bytes */
    wire_check_decode_fails(ext_dec, wire_mutate(m, v_ext_ro, 16, 1, 0x07), 16,
                            UB_EBADMSG); /* hlen 3 */
    wire_check_decode_fails(ext_dec, wire_mutate(m, v_ext_ro, 16, 1, 0x04), 16, UB_EBADMSG);
}

static void test_ext_compatible_version(void **state)
{
    (void)state;
    /* version 1, 24 bytes: the 8 trailing bytes are skipped but kept for re-encoding */
    uint8_t v[24 + 4];
    memcpy(v, v_ext_ro, 16);
    v[0] = 0x13;
    v[1] = 6;
    for (uint8_t i = 0; i < 8; i++)
        v[16 + i] = (uint8_t)(0xc0 + i);
    memset(v + 24, 0xee, 4); /* what follows (the SES header) */
    struct ub__ext d;
    struct ub__rcur r;
    ub__rcur_init(&r, v, sizeof(v));
    assert_int_equal(ub__ext_decode(&d, &r), 0);
    assert_int_equal(ub__rcur_offset(&r), 24);
    assert_int_equal(d.version, 1);
    assert_int_equal(d.tail_len, 8);
    assert_ptr_equal(d.tail, v + 16);
    assert_int_equal(d.incarnation, 0xdeadbeef);
    assert_int_equal(ub__ext_size(&d), 24);
    uint8_t out[24];
    assert_int_equal(wire_encode_guarded(ext_enc, &d, 24, out, NULL), 0);
    assert_memory_equal(out, v, 24);
    for (size_t cap = 0; cap < 24; cap++)
        assert_int_equal(wire_encode_guarded(ext_enc, &d, cap, NULL, NULL), UB_ETRUNC);
    for (size_t k = 0; k < 24; k++)
        wire_check_decode_fails(ext_dec, v, k, UB_ETRUNC);
    /* version 7 is still compatible; version 9 is not */
    v[0] = 0x73;
    ub__rcur_init(&r, v, 24);
    assert_int_equal(ub__ext_decode(&d, &r), 0);
    v[0] = 0x93;
    wire_check_decode_fails(ext_dec, v, 24, UB_EBADMSG);
}

static void test_ext_encode_errors(void **state)
{
    (void)state;
    static const uint8_t tail[8];
    struct ub__ext h = ext_ro();
    h.exec_order = 3;
    wire_check_encode_fails(ext_enc, &h, UB_EINVAL);
    h.exec_order = 4;
    wire_check_encode_fails(ext_enc, &h, UB_EOVERFLOW);
    h = ext_ro();
    h.next_hdr = UB_PDS_NH_SOFTUB_EXT;
    wire_check_encode_fails(ext_enc, &h, UB_EINVAL);
    h.next_hdr = 16;
    wire_check_encode_fails(ext_enc, &h, UB_EOVERFLOW);
    h = ext_ro();
    h.version = 8;
    wire_check_encode_fails(ext_enc, &h, UB_EINVAL);
    h.version = 16;
    wire_check_encode_fails(ext_enc, &h, UB_EOVERFLOW);
    h = ext_ro();
    h.tail = tail;
    h.tail_len = 8; /* version 0 has no tail */
    wire_check_encode_fails(ext_enc, &h, UB_EINVAL);
    h.version = 2;
    h.tail_len = 6; /* not whole words */
    wire_check_encode_fails(ext_enc, &h, UB_EINVAL);
    h.tail_len = UB_EXT_MAX_SIZE - UB_EXT_SIZE + 4;
    wire_check_encode_fails(ext_enc, &h, UB_EOVERFLOW);
    h.tail = NULL;
    h.tail_len = 8;
    wire_check_encode_fails(ext_enc, &h, UB_EINVAL);
    h.tail = tail;
    uint8_t out[24];
    assert_int_equal(wire_encode_guarded(ext_enc, &h, 24, out, NULL), 0);
    assert_int_equal(out[0], 0x23);
    assert_int_equal(out[1], 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ext_vectors),
        cmocka_unit_test(test_ext_bad),
        cmocka_unit_test(test_ext_compatible_version),
        cmocka_unit_test(test_ext_encode_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
