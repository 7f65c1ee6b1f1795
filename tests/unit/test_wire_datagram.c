/* Unit tests: whole-datagram header chain (src/wire/datagram.c). docs/wire-format.md section 7. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <softub/errors.h>

#include "unit/wire_check.h"
#include "wire/datagram.h"

/* RUD_REQ, next header = softub extension (the RUD vector of test_wire_pds with nh 15) */
static const uint8_t v_pds_rud_ext[12] = {0x17, 0x88, 0xff, 0xfe, 0x01, 0x02,
                                          0x03, 0x04, 0x11, 0x22, 0x33, 0x44};
/* extension: RO, CO, F, I, hint 100, stream 0x102, seq 0x0a0b0c0d, incarnation; next = REQ_STD */
static const uint8_t v_ext[16] = {0x03, 0x04, 0x78, 0x00, 0x00, 0x64, 0x01, 0x02,
                                  0x0a, 0x0b, 0x0c, 0x0d, 0xde, 0xad, 0xbe, 0xef};
/* SES standard request, WRITE, SOM with header data, request_length 0x10000 */
static const uint8_t v_std_som[44] = {
    0x01, 0x2d, 0x12, 0x34, 0x77, 0xab, 0xcd, 0xef, 0x06, 0x78, 0x09, 0xab, 0xfe, 0xdc, 0xba,
    0x98, 0x76, 0x54, 0x32, 0x10, 0xfe, 0xdc, 0xba, 0x98, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66,
    0x77, 0x88, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00, 0x11, 0x00, 0x01, 0x00, 0x00};
/* TSS header with SSI */
static const uint8_t v_tss_ssi[16] = {0x0c, 0xab, 0xcd, 0xef, 0x11, 0x22, 0x33, 0x44,
                                      0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

static size_t cat(uint8_t *out, size_t off, const void *p, size_t n)
{
    memcpy(out + off, p, n);
    return off + n;
}

/* PDS + extension + SES + 16 bytes of payload. */
static size_t build_write(uint8_t *b)
{
    size_t n = 0;
    n = cat(b, n, v_pds_rud_ext, 12);
    n = cat(b, n, v_ext, 16);
    n = cat(b, n, v_std_som, 44);
    memset(b + n, 0x5c, 16);
    return n + 16;
}

static int parse_exact(struct ub__wire_dgram *d, const uint8_t *b, size_t n, unsigned flags)
{
    uint8_t *copy = malloc(n ? n : 1);
    assert_non_null(copy);
    memcpy(copy, b, n);
    int rc = ub__wire_parse_datagram(d, copy, n, flags);
    free(copy);
    return rc;
}

/* Re-encodes the parsed headers and compares with the original bytes. */
static void check_reencode(const struct ub__wire_dgram *d, const uint8_t *b)
{
    uint8_t out[256 + 16];
    memset(out, 0xa5, sizeof(out));
    struct ub__wcur w;
    ub__wcur_init(&w, out, 256);
    assert_int_equal(ub__wire_encode_headers(d, &w), 0);
    assert_int_equal(ub__wcur_offset(&w), d->payload_off);
    assert_memory_equal(out, b, d->payload_off);
    for (size_t i = 256; i < sizeof(out); i++)
        assert_int_equal(out[i], 0xa5);
    /* too small a writer: nothing written, writer unmoved */
    for (size_t cap = 0; cap < d->payload_off; cap++) {
        memset(out, 0xa5, sizeof(out));
        ub__wcur_init(&w, out, cap);
        assert_int_equal(ub__wire_encode_headers(d, &w), UB_ETRUNC);
        assert_int_equal(ub__wcur_offset(&w), 0);
    }
}

static void test_write_with_extension(void **state)
{
    (void)state;
    uint8_t b[128];
    size_t n = build_write(b);
    struct ub__wire_dgram d;
    assert_int_equal(parse_exact(&d, b, n, 0), 0);
    assert_false(d.has_tss);
    assert_int_equal(d.pds.type, UB_PDS_TYPE_RUD_REQ);
    assert_int_equal(d.pds_off, 0);
    assert_int_equal(d.pds_len, 12);
    assert_true(d.has_ext);
    assert_int_equal(d.ext_off, 12);
    assert_int_equal(d.ext_len, 16);
    assert_int_equal(d.ext.exec_order, UB_EXT_EO_RO);
    assert_int_equal(d.ses_kind, UB_PDS_NH_REQ_STD);
    assert_int_equal(d.ses_off, 28);
    assert_int_equal(d.ses_len, 44);
    assert_int_equal(d.ses.u.std.opcode, UB_SES_OP_WRITE);
    assert_int_equal(d.payload_off, 72);
    assert_int_equal(d.payload_len, 16);
    check_reencode(&d, b);
    /* every cut inside the headers is a truncation */
    for (size_t k = 0; k < 72; k++)
        assert_int_equal(parse_exact(&d, b, k, 0), UB_ETRUNC);
}

static void test_without_extension(void **state)
{
    (void)state;
    uint8_t b[128];
    size_t n = 0;
    n = cat(b, n, v_pds_rud_ext, 12);
    b[0] = 0x11; /* next header REQ_STD */
    n = cat(b, n, v_std_som, 44);
    struct ub__wire_dgram d;
    assert_int_equal(parse_exact(&d, b, n, 0), 0);
    assert_false(d.has_ext);
    assert_int_equal(d.ses_off, 12);
    assert_int_equal(d.payload_len, 0);
    check_reencode(&d, b);
}

/* LINK (dst_inc 0x0a0b0c0d), the extension, a FETCHING_ATOMIC (SOM, request_length 8), its
 * extension (opcode op, UINT64) and, for a FADD, its 8-byte operand. */
static size_t build_link_amo(uint8_t *b, uint8_t op)
{
    static const uint8_t link[8] = {0xff, 0x81, 0x00, 0x00, 0x0a, 0x0b, 0x0c, 0x0d};
    size_t n = cat(b, 0, link, 8);
    n = cat(b, n, v_ext, 16);
    n = cat(b, n, v_std_som, 44);
    b[24] = UB_SES_OP_FETCHING_ATOMIC;
    b[25] = UB_SES_F_SOM;
    memset(b + 24 + 32, 0, 8); /* no header data */
    memcpy(b + 24 + 40, (const uint8_t[]){0, 0, 0, 8}, 4);
    n = cat(b, n, (const uint8_t[]){op, UB_SES_DT_UINT64, 0, 0}, 4);
    if (op == UB_SES_AMO_CSWAP) { /* compare 7, swap 9 (16 bytes each, the first 8 used) */
        memset(b + n, 0, 32);
        b[n + 7] = 7;
        b[n + 23] = 9;
        return n + 32;
    }
    memset(b + n, 0, 8);
    b[n + 7] = 5;
    return n + 8;
}

/* The link path's recogniser takes a fetching atomic or a READ with the fields the general
 * parse finds, and leaves what the general parse would refuse or what it does not know to
 * it. */
static void test_link_req_atomic(void **state)
{
    (void)state;
    uint8_t b[160];
    for (int cas = 0; cas < 2; cas++) {
        size_t n = build_link_amo(b, cas ? UB_SES_AMO_CSWAP : UB_SES_AMO_SUM);
        struct ub__wire_dgram d;
        assert_int_equal(parse_exact(&d, b, n, 0), 0);
        struct ub__wire_link_req r;
        assert_true(ub__wire_link_req(&r, b, n));
        assert_true(r.has_atomic);
        assert_int_equal(r.dst_inc, 0x0a0b0c0d);
        assert_int_equal(r.std.opcode, UB_SES_OP_FETCHING_ATOMIC);
        assert_memory_equal(&r.atomic, &d.ses.atomic, sizeof(r.atomic));
        assert_int_equal(r.payload_len, cas ? 0 : 8);
        assert_ptr_equal(r.payload, b + n - r.payload_len);
        if (!cas) {
            b[n] = 0; /* a 9-byte operand: more than request_length, refused by both */
            assert_int_equal(parse_exact(&d, b, n + 1, 0), UB_EBADMSG);
            assert_false(ub__wire_link_req(&r, b, n + 1));
        }
        b[25] = UB_SES_F_EOM; /* not the first packet: left to the general parse */
        assert_false(ub__wire_link_req(&r, b, n));
        b[25] = UB_SES_F_SOM;
        b[68] = UB_SES_AMO_OP_MAX + 1; /* an opcode nobody knows: refused by both */
        assert_false(ub__wire_link_req(&r, b, n));
        assert_int_equal(parse_exact(&d, b, n, 0), UB_EBADMSG);
    }
    /* A READ: SOM, nothing behind the standard header; with bytes behind it, left alone. */
    size_t n = build_link_amo(b, UB_SES_AMO_SUM) - 12;
    b[24] = UB_SES_OP_READ;
    struct ub__wire_dgram d;
    assert_int_equal(parse_exact(&d, b, n, 0), 0);
    struct ub__wire_link_req r;
    assert_true(ub__wire_link_req(&r, b, n));
    assert_false(r.has_atomic);
    assert_int_equal(r.std.opcode, UB_SES_OP_READ);
    assert_int_equal(r.std.request_length, 8);
    assert_int_equal(r.payload_len, 0);
    assert_int_equal(parse_exact(&d, b, n + 8, 0), 0);
    assert_false(ub__wire_link_req(&r, b, n + 8));
}

static void test_tss_sealed_and_opened(void **state)
{
    (void)state;
    uint8_t b[160];
    size_t n = cat(b, 0, v_tss_ssi, 16);
    n += build_write(b + n);
    memset(b + n, 0x1c, 16); /* ICV */
    n += 16;
    struct ub__wire_dgram d;
    assert_int_equal(parse_exact(&d, b, n, 0), 0);
    assert_true(d.has_tss && d.sealed);
    assert_int_equal(d.tss_len, 16);
    assert_int_equal(d.pds_off, 16);
    assert_int_equal(d.icv_off, n - 16);
    assert_int_equal(d.tss.ssi, 0x11223344);
    assert_int_equal(parse_exact(&d, b, n, UB_WIRE_F_OPENED), 0);
    assert_false(d.sealed);
    assert_int_equal(d.ses_off, 16 + 28);
    assert_int_equal(d.payload_off, 16 + 72);
    assert_int_equal(d.payload_len, 16);
    assert_int_equal(d.icv_off, 16 + 88);
    check_reencode(&d, b);
    /* a TSS packet too short for a PDS header and the ICV */
    assert_int_equal(parse_exact(&d, b, 16 + 4 + 15, 0), UB_ETRUNC);
    assert_int_equal(parse_exact(&d, b, 16 + 4 + 16, 0), 0);
    assert_int_equal(parse_exact(&d, b, 16 + 4 + 16, UB_WIRE_F_OPENED), UB_ETRUNC);
}

static void test_next_header_rules(void **state)
{
    (void)state;
    /* ACK (next header NONE) alone */
    uint8_t ack[16] = {0x38, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x01, 0x00, 0x02};
    struct ub__wire_dgram d;
    assert_int_equal(parse_exact(&d, ack, 12, 0), 0);
    assert_int_equal(d.ses_kind, UB_PDS_NH_NONE);
    assert_int_equal(d.payload_len, 0);
    check_reencode(&d, ack);
    assert_int_equal(parse_exact(&d, ack, 13, 0), UB_EBADMSG); /* stray byte */
    /* ACK naming a request header */
    ack[0] = 0x39;
    ack[1] = 0x80; /* nh 3 */
    uint8_t b[128];
    memcpy(b, ack, 12);
    memcpy(b + 12, v_std_som, 44);
    assert_int_equal(parse_exact(&d, b, 56, 0), UB_EBADMSG);
    /* NACK naming a response */
    static const uint8_t nack[16] = {0x52, 0x10, 0x01, 0x00, 0x00, 0x00, 0x04, 0x00,
                                     0x00, 0x01, 0x00, 0x02, 0x00, 0x00, 0x04, 0x01};
    memcpy(b, nack, 16);
    memset(b + 16, 0, 12);
    assert_int_equal(parse_exact(&d, b, 28, 0), UB_EBADMSG);
    /* CTRL with anything after it */
    static const uint8_t ctrl[17] = {0x5b, 0x28, 0x43, 0x21, 0x00, 0x00, 0x10, 0x00, 0x0a,
                                     0x0a, 0x0b, 0x0b, 0x00, 0x00, 0x0f, 0xff, 0x00};
    assert_int_equal(parse_exact(&d, ctrl, 16, 0), 0);
    check_reencode(&d, ctrl);
    assert_int_equal(parse_exact(&d, ctrl, 17, 0), UB_EBADMSG);
    /* the table */
    for (uint8_t t = 0; t < 32; t++)
        for (uint8_t k = 0; k < 16; k++) {
            bool ok = ub__wire_nh_allowed(t, k);
            if (k >= 7)
                assert_false(ok);
            if (t == UB_PDS_TYPE_CTRL || t < UB_PDS_TYPE_RUD_REQ ||
                (t > UB_PDS_TYPE_ROD_CC_REQ && t != UB_PDS_TYPE_LINK))
                assert_false(ok);
        }
    assert_true(ub__wire_nh_allowed(UB_PDS_TYPE_RUD_REQ, UB_PDS_NH_RSP_DATA));
    assert_false(ub__wire_nh_allowed(UB_PDS_TYPE_UUD_REQ, UB_PDS_NH_RSP_DATA));
    /* the link path carries requests and responses alike */
    assert_true(ub__wire_nh_allowed(UB_PDS_TYPE_LINK, UB_PDS_NH_REQ_STD));
    assert_true(ub__wire_nh_allowed(UB_PDS_TYPE_LINK, UB_PDS_NH_RSP_DATA));
    assert_false(ub__wire_nh_allowed(UB_PDS_TYPE_LINK, UB_PDS_NH_NONE));
    assert_false(ub__wire_nh_allowed(UB_PDS_TYPE_RUDI_RESP, UB_PDS_NH_REQ_STD));
    assert_true(ub__wire_nh_allowed(UB_PDS_TYPE_ACK_CC, UB_PDS_NH_RSP_DATA_SMALL));
}

static void test_length_agreement(void **state)
{
    (void)state;
    /* RUD request carrying a response with data (a read response), payload_len 0x10 */
    static const uint8_t pds[12] = {0x12, 0x88, 0x00, 0x00, 0x00, 0x00,
                                    0x00, 0x09, 0x00, 0x01, 0x00, 0x02}; /* nh 5, AR */
    static const uint8_t rsp[20] = {0x02, 0x01, 0x00, 0x10, 0x00, 0x00, 0x00, 0x01, 0x00, 0x20,
                                    0x00, 0x10, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00};
    uint8_t b[128];
    memcpy(b, pds, 12);
    memcpy(b + 12, rsp, 20);
    memset(b + 32, 0x77, 0x11);
    struct ub__wire_dgram d;
    assert_int_equal(parse_exact(&d, b, 32 + 0x10, 0), 0);
    assert_int_equal(d.payload_len, 0x10);
    check_reencode(&d, b);
    assert_int_equal(parse_exact(&d, b, 32 + 0x0f, 0), UB_EBADMSG);
    assert_int_equal(parse_exact(&d, b, 32 + 0x11, 0), UB_EBADMSG);
    /* a small request's payload may not exceed its request length */
    static const uint8_t small[20] = {0x01, 0x23, 0x00, 0x04, 0x01, 0x00, 0x00, 0x02, 0x00, 0x03,
                                      0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00};
    memcpy(b, pds, 12);
    b[0] = 0x10; /* nh 1 */
    memcpy(b + 12, small, 20);
    assert_int_equal(parse_exact(&d, b, 32 + 4, 0), 0);
    assert_int_equal(parse_exact(&d, b, 32 + 5, 0), UB_EBADMSG);
}

static void test_encode_chain_errors(void **state)
{
    (void)state;
    uint8_t b[128];
    size_t n = build_write(b);
    struct ub__wire_dgram d;
    assert_int_equal(parse_exact(&d, b, n, 0), 0);
    uint8_t out[128];
    struct ub__wcur w;
    struct ub__wire_dgram e = d;
    e.has_ext = false; /* PDS still names the extension */
    ub__wcur_init(&w, out, sizeof(out));
    assert_int_equal(ub__wire_encode_headers(&e, &w), UB_EINVAL);
    e = d;
    e.ses_kind = UB_PDS_NH_REQ_MEDIUM;
    assert_int_equal(ub__wire_encode_headers(&e, &w), UB_EINVAL);
    e = d;
    e.ext.next_hdr = UB_PDS_NH_RSP;
    e.ses_kind = UB_PDS_NH_RSP;
    assert_int_equal(ub__wire_encode_headers(&e, &w), UB_EINVAL); /* RUD cannot carry RSP */
    e = d;
    e.ses.u.std.job_id = 0x1000000; /* fails in the SES header: nothing left written */
    assert_int_equal(ub__wire_encode_headers(&e, &w), UB_EOVERFLOW);
    assert_int_equal(ub__wcur_offset(&w), 0);
    assert_int_equal(ub__wire_parse_datagram(NULL, b, n, 0), UB_EINVAL);
    assert_int_equal(ub__wire_parse_datagram(&d, NULL, 4, 0), UB_EINVAL);
    assert_int_equal(ub__wire_parse_datagram(&d, b, n, 0x80), UB_EINVAL);
    assert_int_equal(ub__wire_parse_datagram(&d, NULL, 0, 0), UB_ETRUNC);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_with_extension),  cmocka_unit_test(test_without_extension),
        cmocka_unit_test(test_tss_sealed_and_opened), cmocka_unit_test(test_next_header_rules),
        cmocka_unit_test(test_length_agreement),      cmocka_unit_test(test_encode_chain_errors),
        cmocka_unit_test(test_link_req_atomic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
