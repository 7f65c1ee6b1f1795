/* Unit tests: the UET TSS header and packet layout (src/wire/tss.c). docs/wire-format.md section 5.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <softub/errors.h>

#include "unit/wire_check.h"
#include "wire/pds.h"
#include "wire/tss.h"

WIRE_ADAPT(tss, struct ub__tss)

static const uint8_t v_tss[12] = {0x09, 0x12, 0x34, 0x56, 0x00, 0x01,
                                  0x00, 0x00, 0x00, 0x00, 0x01, 0x02};
static const uint8_t v_tss_ssi[16] = {0x0c, 0xab, 0xcd, 0xef, 0x11, 0x22, 0x33, 0x44,
                                      0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

static void test_tss_vectors(void **state)
{
    (void)state;
    struct ub__tss h = {false, true, 0x123456, 0, 1, 0x102};
    wire_check_vector(tss_enc, tss_dec, &h, sizeof(h), v_tss, sizeof(v_tss));
    struct ub__tss s = {true, false, 0xabcdef, 0x11223344, 0xffff, UB_TSS_TSC_MAX};
    wire_check_vector(tss_enc, tss_dec, &s, sizeof(s), v_tss_ssi, sizeof(v_tss_ssi));
    struct ub__tss d;
    assert_int_equal(wire_decode_exact(tss_dec, &d, v_tss_ssi, 16, NULL), 0);
    assert_true(d.sp);
    assert_false(d.an);
    assert_int_equal(d.ssi, 0x11223344);
    assert_true(d.tsc == UB_TSS_TSC_MAX);
    assert_int_equal(ub__tss_hdr_size(false), 12);
    assert_int_equal(ub__tss_hdr_size(true), 16);
    assert_true(ub__tss_present(v_tss, 1));
    assert_false(ub__tss_present(v_tss, 0));
    assert_false(ub__tss_present((const uint8_t *)"\x11", 1)); /* an RUD request */
}

static void test_tss_bad(void **state)
{
    (void)state;
    uint8_t m[16];
    wire_check_decode_fails(tss_dec, wire_mutate(m, v_tss, 12, 0, 0x02), 12,
                            UB_EBADMSG); /* reserved bit */
    wire_check_decode_fails(tss_dec, wire_mutate(m, v_tss, 12, 0, 0x18), 12,
                            UB_EBADMSG); /* type 2 */
    struct ub__tss h = {false, false, 0x1000000, 0, 0, 0};
    wire_check_encode_fails(tss_enc, &h, UB_EOVERFLOW);
    h.sdi = 0;
    h.tsc = UB_TSS_TSC_MAX + 1;
    wire_check_encode_fails(tss_enc, &h, UB_EOVERFLOW);
}

static void test_tss_layout(void **state)
{
    (void)state;
    uint8_t pkt[64];
    memset(pkt, 0x33, sizeof(pkt));
    memcpy(pkt, v_tss, 12);
    struct ub__tss_layout l;
    struct ub__tss h;
    /* 12 header + 20 protected + 16 ICV */
    assert_int_equal(ub__tss_layout(&l, &h, pkt, 48, 0), 0);
    assert_int_equal(l.hdr_len, 12);
    assert_int_equal(l.aad_off, 0);
    assert_int_equal(l.aad_len, 12);
    assert_int_equal(l.ct_off, 12);
    assert_int_equal(l.ct_len, 20);
    assert_int_equal(l.icv_off, 32);
    assert_int_equal(h.sdi, 0x123456);
    /* a 12-byte PDS header left in the clear but authenticated */
    assert_int_equal(ub__tss_layout(&l, &h, pkt, 48, 12), 0);
    assert_int_equal(l.aad_len, 24);
    assert_int_equal(l.ct_off, 24);
    assert_int_equal(l.ct_len, 8);
    assert_int_equal(l.icv_off, 32);
    /* everything in the clear: nothing encrypted, still authenticated */
    assert_int_equal(ub__tss_layout(&l, &h, pkt, 48, 20), 0);
    assert_int_equal(l.ct_len, 0);
    assert_int_equal(ub__tss_layout(&l, &h, pkt, 48, 21), UB_ETRUNC);
    /* the smallest packet: header + minimal PDS (4) + ICV */
    assert_int_equal(ub__tss_layout(&l, &h, pkt, 12 + 4 + 16, 0), 0);
    for (size_t len = 0; len < 12 + 4 + 16; len++)
        assert_int_equal(ub__tss_layout(&l, &h, pkt, len, 0), UB_ETRUNC);
    /* with SSI the header is 16 bytes */
    memcpy(pkt, v_tss_ssi, 16);
    assert_int_equal(ub__tss_layout(&l, &h, pkt, 64, 0), 0);
    assert_int_equal(l.hdr_len, 16);
    assert_int_equal(l.ct_len, 32);
    assert_int_equal(l.icv_off, 48);
    /* not a TSS packet */
    pkt[0] = 0x11;
    assert_int_equal(ub__tss_layout(&l, &h, pkt, 64, 0), UB_EBADMSG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tss_vectors),
        cmocka_unit_test(test_tss_bad),
        cmocka_unit_test(test_tss_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
