/* Unit tests: UET PDS header codecs (src/wire/pds.c). Vectors: docs/wire-format.md section 3. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <softub/errors.h>

#include "unit/wire_check.h"
#include "wire/pds.h"

WIRE_ADAPT(pds_req, struct ub__pds_req)
WIRE_ADAPT(pds_rudi, struct ub__pds_rudi)
WIRE_ADAPT(pds_uud, struct ub__pds_uud)
WIRE_ADAPT(pds_link, struct ub__pds_link)
WIRE_ADAPT(pds_ack, struct ub__pds_ack)
WIRE_ADAPT(pds_nack, struct ub__pds_nack)
WIRE_ADAPT(pds_ctrl, struct ub__pds_ctrl)
WIRE_ADAPT(pds, struct ub__pds_hdr)

/* Both the specific codec and the generic tagged one must produce the vector. */
static void check_both(wire_enc_fn enc, wire_dec_fn dec, const void *h, size_t hsize,
                       const uint8_t *v, size_t n)
{
    wire_check_vector(enc, dec, h, hsize, v, n);
    struct ub__pds_hdr any;
    assert_int_equal(wire_decode_exact(pds_dec, &any, v, n, NULL), 0);
    wire_check_vector(pds_enc, pds_dec, &any, sizeof(any), v, n);
    assert_int_equal(ub__pds_hdr_size(any.type, (uint8_t)(v[1] & 0x7f)), n);
}

/* ---- RUD/ROD requests ---------------------------------------------------- */

static const uint8_t v_rud_req[] = {0x11, 0x88, 0xff, 0xfe, 0x01, 0x02,
                                    0x03, 0x04, 0x11, 0x22, 0x33, 0x44};

static struct ub__pds_req rud_req(void)
{
    struct ub__pds_req h = {0};
    h.type = UB_PDS_TYPE_RUD_REQ;
    h.next_hdr = UB_PDS_NH_REQ_STD;
    h.flags = UB_PDS_REQ_F_AR;
    h.clear_psn_offset = -2;
    h.psn = 0x01020304;
    h.spdcid = 0x1122;
    h.dpdcid = 0x3344;
    return h;
}

static void test_rud_req_vector(void **state)
{
    (void)state;
    struct ub__pds_req h = rud_req();
    check_both(pds_req_enc, pds_req_dec, &h, sizeof(h), v_rud_req, sizeof(v_rud_req));
    struct ub__pds_req d;
    assert_int_equal(wire_decode_exact(pds_req_dec, &d, v_rud_req, sizeof(v_rud_req), NULL), 0);
    assert_int_equal(d.clear_psn_offset, -2);
    assert_int_equal(d.psn, 0x01020304);
    assert_int_equal(d.dpdcid, 0x3344);
}

static const uint8_t v_rod_syn[] = {0x18, 0x94, 0x00, 0x05, 0xa0, 0xb0,
                                    0xc0, 0xd0, 0x00, 0x07, 0x81, 0x23};

static void test_rod_req_syn_vector(void **state)
{
    (void)state;
    struct ub__pds_req h = {0};
    h.type = UB_PDS_TYPE_ROD_REQ;
    h.next_hdr = UB_PDS_NH_REQ_SMALL;
    h.flags = UB_PDS_REQ_F_SYN | UB_PDS_REQ_F_RETX;
    h.clear_psn_offset = 5;
    h.psn = 0xa0b0c0d0;
    h.spdcid = 7;
    h.use_rsv_pdc = true;
    h.psn_offset = 0x123;
    check_both(pds_req_enc, pds_req_dec, &h, sizeof(h), v_rod_syn, sizeof(v_rod_syn));
    struct ub__pds_req d;
    assert_int_equal(wire_decode_exact(pds_req_dec, &d, v_rod_syn, sizeof(v_rod_syn), NULL), 0);
    assert_true(d.use_rsv_pdc);
    assert_int_equal(d.psn_offset, 0x123);
    assert_int_equal(d.dpdcid, 0);
}

/* The sender's direct writer gives the same bytes as the checked encoder. */
static void test_req_put_vectors(void **state)
{
    (void)state;
    uint8_t b[UB_PDS_REQ_SIZE];
    ub__pds_req_put(b, UB_PDS_TYPE_RUD_REQ, UB_PDS_NH_REQ_STD, UB_PDS_REQ_F_AR, -2, 0x01020304,
                    0x1122, 0x3344);
    assert_memory_equal(b, v_rud_req, sizeof(b));
    ub__pds_req_put(b, UB_PDS_TYPE_ROD_REQ, UB_PDS_NH_REQ_SMALL,
                    UB_PDS_REQ_F_SYN | UB_PDS_REQ_F_RETX, 5, 0xa0b0c0d0, 7, 0x8123);
    assert_memory_equal(b, v_rod_syn, sizeof(b));
}

static const uint8_t v_rud_cc[] = {0x69, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
                                   0x00, 0x02, 0x00, 0x03, 0x44, 0x55, 0x66, 0x77};

static void test_rud_cc_req_vector(void **state)
{
    (void)state;
    struct ub__pds_req h = {0};
    h.type = UB_PDS_TYPE_RUD_CC_REQ;
    h.next_hdr = UB_PDS_NH_REQ_MEDIUM;
    h.psn = 1;
    h.spdcid = 2;
    h.dpdcid = 3;
    h.ccc_id = 0x44;
    h.credit_target = 0x556677;
    check_both(pds_req_enc, pds_req_dec, &h, sizeof(h), v_rud_cc, sizeof(v_rud_cc));
}

static void test_req_bad(void **state)
{
    (void)state;
    uint8_t m[16];
    size_t n = sizeof(v_rud_req);
    /* reserved flag bits 0x40, 0x20, 0x02, 0x01 */
    static const uint8_t rsvd[] = {0x40, 0x20, 0x02, 0x01};
    for (size_t i = 0; i < sizeof(rsvd); i++)
        wire_check_decode_fails(pds_req_dec, wire_mutate(m, v_rud_req, n, 1, rsvd[i]), n,
                                UB_EBADMSG);
    /* next_hdr 7..14 reserved: 0x11,0x88 has nh 3; nh 7 = 0x13,0x88 */
    wire_check_decode_fails(pds_req_dec, wire_mutate(m, v_rud_req, n, 0, 0x02), n, UB_EBADMSG);
    /* not a request type (ACK prologue) */
    wire_check_decode_fails(pds_req_dec, wire_mutate(m, v_rud_req, n, 0, 0x11 ^ 0x39), n,
                            UB_EBADMSG);
    /* SYN with reserved pdc_info bits */
    wire_check_decode_fails(pds_req_dec, wire_mutate(m, v_rod_syn, n, 10, 0x40), n, UB_EBADMSG);
    wire_check_decode_fails(pds_req_dec, wire_mutate(m, v_rod_syn, n, 10, 0x10), n, UB_EBADMSG);
    /* the SES next header may be the softub extension */
    struct ub__pds_req d;
    memcpy(m, v_rud_req, n); /* type 2, nh 15: 00010 111 | 1 0001000 */
    m[0] = 0x17;
    m[1] = 0x88;
    assert_int_equal(wire_decode_exact(pds_req_dec, &d, m, n, NULL), 0);
    assert_int_equal(d.next_hdr, UB_PDS_NH_SOFTUB_EXT);
}

static void test_req_encode_errors(void **state)
{
    (void)state;
    struct ub__pds_req h = rud_req();
    h.type = UB_PDS_TYPE_ACK;
    wire_check_encode_fails(pds_req_enc, &h, UB_EINVAL);
    h = rud_req();
    h.next_hdr = 7;
    wire_check_encode_fails(pds_req_enc, &h, UB_EINVAL);
    h.next_hdr = 16;
    wire_check_encode_fails(pds_req_enc, &h, UB_EOVERFLOW);
    h = rud_req();
    h.flags = 0x80;
    wire_check_encode_fails(pds_req_enc, &h, UB_EOVERFLOW);
    h.flags = 0x40;
    wire_check_encode_fails(pds_req_enc, &h, UB_EINVAL);
    h = rud_req();
    h.flags = UB_PDS_REQ_F_SYN;
    h.psn_offset = 0x1000;
    wire_check_encode_fails(pds_req_enc, &h, UB_EOVERFLOW);
    h = rud_req();
    h.type = UB_PDS_TYPE_ROD_CC_REQ;
    h.credit_target = 0x1000000;
    wire_check_encode_fails(pds_req_enc, &h, UB_EOVERFLOW);
}

/* ---- RUDI, UUD ------------------------------------------------------------ */

static const uint8_t v_rudi_resp[] = {0x2a, 0x30, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef};

static void test_rudi_vector(void **state)
{
    (void)state;
    struct ub__pds_rudi h = {UB_PDS_TYPE_RUDI_RESP, UB_PDS_NH_RSP,
                             UB_PDS_RUDI_F_M | UB_PDS_RUDI_F_RETX, 0xdeadbeef};
    check_both(pds_rudi_enc, pds_rudi_dec, &h, sizeof(h), v_rudi_resp, sizeof(v_rudi_resp));
    uint8_t m[8];
    size_t n = sizeof(v_rudi_resp);
    /* M on a request */
    wire_check_decode_fails(pds_rudi_dec, wire_mutate(m, v_rudi_resp, n, 0, 0x2a ^ 0x22), n,
                            UB_EBADMSG);
    wire_check_decode_fails(pds_rudi_dec, wire_mutate(m, v_rudi_resp, n, 2, 0x01), n, UB_EBADMSG);
    wire_check_decode_fails(pds_rudi_dec, wire_mutate(m, v_rudi_resp, n, 1, 0x01), n, UB_EBADMSG);
    h.type = UB_PDS_TYPE_RUDI_REQ;
    wire_check_encode_fails(pds_rudi_enc, &h, UB_EINVAL);
    h.flags = 0;
    h.next_hdr = UB_PDS_NH_REQ_STD;
    static const uint8_t v_req[] = {0x21, 0x80, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef};
    check_both(pds_rudi_enc, pds_rudi_dec, &h, sizeof(h), v_req, sizeof(v_req));
}

static const uint8_t v_uud[] = {0x31, 0x80, 0x00, 0x00};

static void test_uud_vector(void **state)
{
    (void)state;
    struct ub__pds_uud h = {UB_PDS_NH_REQ_STD};
    check_both(pds_uud_enc, pds_uud_dec, &h, sizeof(h), v_uud, sizeof(v_uud));
    uint8_t m[4];
    wire_check_decode_fails(pds_uud_dec, wire_mutate(m, v_uud, 4, 1, 0x01), 4, UB_EBADMSG);
    wire_check_decode_fails(pds_uud_dec, wire_mutate(m, v_uud, 4, 3, 0x01), 4, UB_EBADMSG);
    h.next_hdr = 9;
    wire_check_encode_fails(pds_uud_enc, &h, UB_EINVAL);
}

/* ---- LINK (softub) ---------------------------------------------------------- */

/* type 31, next header 15 (the extension), ROD; reserved; the receiver's incarnation */
static const uint8_t v_link[] = {0xff, 0x81, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef};

static void test_link_vector(void **state)
{
    (void)state;
    struct ub__pds_link h = {UB_PDS_NH_SOFTUB_EXT, UB_PDS_LINK_F_ROD, 0xdeadbeef};
    check_both(pds_link_enc, pds_link_dec, &h, sizeof(h), v_link, sizeof(v_link));
    struct ub__pds_hdr any = {.type = UB_PDS_TYPE_LINK, .u.link = h};
    check_both(pds_enc, pds_dec, &any, sizeof(any), v_link, sizeof(v_link));
    assert_int_equal(ub__pds_hdr_size(UB_PDS_TYPE_LINK, 0), UB_PDS_LINK_SIZE);
    uint8_t m[8];
    size_t n = sizeof(v_link);
    wire_check_decode_fails(pds_link_dec, wire_mutate(m, v_link, n, 1, 0x02), n, UB_EBADMSG);
    wire_check_decode_fails(pds_link_dec, wire_mutate(m, v_link, n, 2, 0x01), n, UB_EBADMSG);
    wire_check_decode_fails(pds_link_dec, wire_mutate(m, v_link, n, 3, 0x80), n, UB_EBADMSG);
    wire_check_decode_fails(pds_link_dec, v_link, 7, UB_ETRUNC);
    h.next_hdr = 9;
    wire_check_encode_fails(pds_link_enc, &h, UB_EINVAL);
    h.next_hdr = UB_PDS_NH_REQ_STD;
    h.flags = 0x02;
    wire_check_encode_fails(pds_link_enc, &h, UB_EINVAL);
    h.flags = 0x80;
    wire_check_encode_fails(pds_link_enc, &h, UB_EOVERFLOW);
}

/* ---- ACK family ------------------------------------------------------------ */

static const uint8_t v_ack[] = {0x3a, 0x24, 0x00, 0x03, 0x00, 0x00,
                                0x01, 0x00, 0x01, 0x02, 0x03, 0x04};

static struct ub__pds_ack plain_ack(void)
{
    struct ub__pds_ack h;
    memset(&h, 0, sizeof(h));
    h.type = UB_PDS_TYPE_ACK;
    h.next_hdr = UB_PDS_NH_RSP;
    h.flags = UB_PDS_ACK_F_M;
    h.req = UB_PDS_ACK_REQ_CLOSE;
    h.ack_psn_offset = 3;
    h.cack_psn = 0x100;
    h.spdcid = 0x0102;
    h.dpdcid = 0x0304;
    return h;
}

static void test_ack_vector(void **state)
{
    (void)state;
    struct ub__pds_ack h = plain_ack();
    check_both(pds_ack_enc, pds_ack_dec, &h, sizeof(h), v_ack, sizeof(v_ack));
    struct ub__pds_ack d;
    assert_int_equal(wire_decode_exact(pds_ack_dec, &d, v_ack, sizeof(v_ack), NULL), 0);
    assert_int_equal(d.req, UB_PDS_ACK_REQ_CLOSE);
    assert_int_equal(d.flags, UB_PDS_ACK_F_M);
}

/* softub's OWN flag (0x01) with a response riding behind (next header 15, the extension). */
static const uint8_t v_ack_own[] = {0x3f, 0x81, 0x00, 0x03, 0x00, 0x00,
                                    0x01, 0x00, 0x01, 0x02, 0x03, 0x04};

static void test_ack_own_vector(void **state)
{
    (void)state;
    struct ub__pds_ack h = plain_ack();
    h.next_hdr = UB_PDS_NH_SOFTUB_EXT;
    h.flags = UB_PDS_ACK_F_OWN;
    h.req = 0;
    check_both(pds_ack_enc, pds_ack_dec, &h, sizeof(h), v_ack_own, sizeof(v_ack_own));
    struct ub__pds_ack d;
    assert_int_equal(wire_decode_exact(pds_ack_dec, &d, v_ack_own, sizeof(v_ack_own), NULL), 0);
    assert_int_equal(d.flags, UB_PDS_ACK_F_OWN);
    assert_int_equal(d.next_hdr, UB_PDS_NH_SOFTUB_EXT);
}

static const uint8_t v_ack_epsn[] = {0x38, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10,
                                     0x00, 0x01, 0x00, 0x02, 0x12, 0x34, 0x56, 0x78};

static void test_ack_epsn_vector(void **state)
{
    (void)state;
    struct ub__pds_ack h;
    memset(&h, 0, sizeof(h));
    h.type = UB_PDS_TYPE_ACK;
    h.flags = UB_PDS_ACK_F_EPSN;
    h.cack_psn = 0x10;
    h.spdcid = 1;
    h.dpdcid = 2;
    h.expected_psn = 0x12345678;
    check_both(pds_ack_enc, pds_ack_dec, &h, sizeof(h), v_ack_epsn, sizeof(v_ack_epsn));
}

static const uint8_t v_ack_cc_nscc[] = {
    0x42, 0x98, 0xbe, 0xef, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x00, 0x40, 0xff, 0xff,
    0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x12, 0x34, 0x85, 0xab, 0xcd, 0xef, 0x00, 0x09};

static struct ub__pds_ack nscc_ack(void)
{
    struct ub__pds_ack h;
    memset(&h, 0, sizeof(h));
    h.type = UB_PDS_TYPE_ACK_CC;
    h.next_hdr = UB_PDS_NH_RSP_DATA;
    h.flags = UB_PDS_ACK_F_RETX | UB_PDS_ACK_F_P;
    h.ack_psn_offset = (int16_t)-16657; /* 0xbeef: the probe opaque */
    h.cack_psn = 0x11223344;
    h.spdcid = 0x5566;
    h.dpdcid = 0x7788;
    h.cc_type = UB_PDS_CC_NSCC;
    h.mpr = 0x40;
    h.sack_psn_offset = -1;
    h.sack_bitmap = 0x8000000000000001ull;
    h.cc.nscc.service_time = 0x1234;
    h.cc.nscc.restore_cwnd = true;
    h.cc.nscc.rcv_cwnd_pend = 5;
    h.cc.nscc.rcvd_bytes = 0xabcdef;
    h.cc.nscc.ooo_count = 9;
    return h;
}

static void test_ack_cc_nscc_vector(void **state)
{
    (void)state;
    struct ub__pds_ack h = nscc_ack();
    check_both(pds_ack_enc, pds_ack_dec, &h, sizeof(h), v_ack_cc_nscc, sizeof(v_ack_cc_nscc));
    struct ub__pds_ack d;
    assert_int_equal(wire_decode_exact(pds_ack_dec, &d, v_ack_cc_nscc, sizeof(v_ack_cc_nscc), NULL),
                     0);
    assert_int_equal(d.cc.nscc.rcvd_bytes, 0xabcdef);
    assert_true(d.cc.nscc.restore_cwnd);
    assert_int_equal(d.sack_psn_offset, -1);
}

static const uint8_t v_ack_cc_rccc[] = {
    0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x08, 0x00, 0x10,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0x0a, 0x0b, 0x0c, 0x00, 0x00, 0x00, 0x01, 0x02};

static void test_ack_cc_rccc_vector(void **state)
{
    (void)state;
    struct ub__pds_ack h;
    memset(&h, 0, sizeof(h));
    h.type = UB_PDS_TYPE_ACK_CC;
    h.cc_type = UB_PDS_CC_RCCC;
    h.mpr = 8;
    h.sack_psn_offset = 0x10;
    h.sack_bitmap = 0xff;
    h.cc.rccc.credit = 0x0a0b0c;
    h.cc.rccc.ooo_count = 0x0102;
    check_both(pds_ack_enc, pds_ack_dec, &h, sizeof(h), v_ack_cc_rccc, sizeof(v_ack_cc_rccc));
    uint8_t m[32];
    /* reserved bits in the RCCC state */
    wire_check_decode_fails(pds_ack_dec, wire_mutate(m, v_ack_cc_rccc, 32, 28, 0x01), 32,
                            UB_EBADMSG);
}

static void test_ack_ccx_vector(void **state)
{
    (void)state;
    uint8_t v[40] = {0x48, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                     0xe0, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03};
    struct ub__pds_ack h;
    memset(&h, 0, sizeof(h));
    h.type = UB_PDS_TYPE_ACK_CCX;
    h.cc_type = 0xe;
    h.mpr = 1;
    h.sack_psn_offset = 2;
    h.sack_bitmap = 3;
    for (uint8_t i = 0; i < 16; i++) {
        h.ccx_state[i] = i;
        v[24 + i] = i;
    }
    check_both(pds_ack_enc, pds_ack_dec, &h, sizeof(h), v, sizeof(v));
    h.cc_type = 16;
    wire_check_encode_fails(pds_ack_enc, &h, UB_EOVERFLOW);
}

static void test_ack_bad(void **state)
{
    (void)state;
    uint8_t m[40];
    /* request field 3 is reserved */
    wire_check_decode_fails(pds_ack_dec, wire_mutate(m, v_ack, 12, 1, 0x02), 12, UB_EBADMSG);
    /* ACK_CC: EPSN not allowed; cc_flags reserved; cc_type 2..15 reserved */
    wire_check_decode_fails(pds_ack_dec, wire_mutate(m, v_ack_cc_nscc, 32, 1, 0x40), 32,
                            UB_EBADMSG);
    wire_check_decode_fails(pds_ack_dec, wire_mutate(m, v_ack_cc_nscc, 32, 12, 0x01), 32,
                            UB_EBADMSG);
    wire_check_decode_fails(pds_ack_dec, wire_mutate(m, v_ack_cc_nscc, 32, 12, 0x20), 32,
                            UB_EBADMSG);
    /* ACK next header 7 (4 -> 7: 0x3a,0x24 -> 0x3b,0xa4) */
    wire_mutate(m, v_ack, 12, 1, 0x80);
    m[0] ^= 0x01;
    wire_check_decode_fails(pds_ack_dec, m, 12, UB_EBADMSG);
}

static void test_ack_encode_errors(void **state)
{
    (void)state;
    struct ub__pds_ack h = plain_ack();
    h.req = 3;
    wire_check_encode_fails(pds_ack_enc, &h, UB_EINVAL);
    h.req = 4;
    wire_check_encode_fails(pds_ack_enc, &h, UB_EOVERFLOW);
    h = plain_ack();
    h.flags |= UB_PDS_ACK_F_REQ_MASK; /* the request goes in .req, not in .flags */
    wire_check_encode_fails(pds_ack_enc, &h, UB_EINVAL);
    h = nscc_ack();
    h.flags |= UB_PDS_ACK_F_EPSN;
    wire_check_encode_fails(pds_ack_enc, &h, UB_EINVAL);
    h = nscc_ack();
    h.cc.nscc.rcv_cwnd_pend = 0x80;
    wire_check_encode_fails(pds_ack_enc, &h, UB_EOVERFLOW);
    h = nscc_ack();
    h.cc.nscc.rcvd_bytes = 0x1000000;
    wire_check_encode_fails(pds_ack_enc, &h, UB_EOVERFLOW);
    h = nscc_ack();
    h.cc_type = 3;
    wire_check_encode_fails(pds_ack_enc, &h, UB_EINVAL);
    h = nscc_ack();
    h.cc_type = UB_PDS_CC_RCCC;
    h.cc.rccc.credit = 0x1000000;
    wire_check_encode_fails(pds_ack_enc, &h, UB_EOVERFLOW);
    h.type = UB_PDS_TYPE_NACK;
    wire_check_encode_fails(pds_ack_enc, &h, UB_EINVAL);
}

/* ---- NACK family ------------------------------------------------------------ */

static const uint8_t v_nack[] = {0x50, 0x10, 0x01, 0x00, 0x00, 0x00, 0x04, 0x00,
                                 0x00, 0x01, 0x00, 0x02, 0x00, 0x00, 0x04, 0x01};

static struct ub__pds_nack plain_nack(void)
{
    struct ub__pds_nack h;
    memset(&h, 0, sizeof(h));
    h.type = UB_PDS_TYPE_NACK;
    h.flags = UB_PDS_NACK_F_RETX;
    h.code = UB_PDS_NACK_TRIMMED;
    h.psn = 0x400;
    h.spdcid = 1;
    h.dpdcid = 2;
    h.payload = 0x401;
    return h;
}

static void test_nack_vector(void **state)
{
    (void)state;
    struct ub__pds_nack h = plain_nack();
    check_both(pds_nack_enc, pds_nack_dec, &h, sizeof(h), v_nack, sizeof(v_nack));
}

static void test_nack_ccx_vector(void **state)
{
    (void)state;
    uint8_t v[32] = {0x60, 0x08, 0x07, 0x99, 0xca, 0xfe, 0xba, 0xbe};
    struct ub__pds_nack h;
    memset(&h, 0, sizeof(h));
    h.type = UB_PDS_TYPE_NACK_CCX;
    h.flags = UB_PDS_NACK_F_NT;
    h.code = UB_PDS_NACK_NO_PKT_BUF;
    h.vendor_code = 0x99;
    h.psn = 0xcafebabe;
    for (uint8_t i = 0; i < 16; i++)
        v[16 + i] = h.ccx_state[i] = (uint8_t)(0x30 + i);
    check_both(pds_nack_enc, pds_nack_dec, &h, sizeof(h), v, sizeof(v));
    /* RUDI NACK (NT) carries no PDC ids */
    uint8_t m[32];
    wire_check_decode_fails(pds_nack_dec, wire_mutate(m, v, 32, 9, 0x01), 32, UB_EBADMSG);
    h.dpdcid = 1;
    wire_check_encode_fails(pds_nack_enc, &h, UB_EINVAL);
}

static void test_nack_codes(void **state)
{
    (void)state;
    int valid = 0;
    for (unsigned c = 0; c < 256; c++) {
        uint8_t m[16];
        memcpy(m, v_nack, sizeof(m));
        m[2] = (uint8_t)c;
        struct ub__pds_nack d;
        int rc = wire_decode_exact(pds_nack_dec, &d, m, sizeof(m), NULL);
        bool ok = ub__pds_nack_code_valid((uint8_t)c);
        assert_int_equal(rc, ok ? 0 : UB_EBADMSG);
        valid += ok;
    }
    assert_int_equal(valid, 0x0b + (0x1a - 0x0d + 1) + 3); /* 11 + 14 + 3 experimental */
    assert_false(ub__pds_nack_code_valid(0x00));
    assert_false(ub__pds_nack_code_valid(0x0c));
    assert_false(ub__pds_nack_code_valid(0x1b));
    assert_false(ub__pds_nack_code_valid(0xfc));
    assert_true(ub__pds_nack_code_valid(UB_PDS_NACK_NEW_START_PSN));
    struct ub__pds_nack h = plain_nack();
    h.code = 0x0c;
    wire_check_encode_fails(pds_nack_enc, &h, UB_EINVAL);
    uint8_t m[16];
    wire_check_decode_fails(pds_nack_dec, wire_mutate(m, v_nack, 16, 1, 0x40), 16, UB_EBADMSG);
    wire_check_decode_fails(pds_nack_dec, wire_mutate(m, v_nack, 16, 1, 0x01), 16, UB_EBADMSG);
}

/* ---- CTRL ---------------------------------------------------------------------- */

static const uint8_t v_ctrl_probe[] = {0x5b, 0x28, 0x43, 0x21, 0x00, 0x00, 0x10, 0x00,
                                       0x0a, 0x0a, 0x0b, 0x0b, 0x00, 0x00, 0x0f, 0xff};
static const uint8_t v_ctrl_neg[] = {0x5c, 0x94, 0x00, 0x00, 0xcd, 0xef, 0x01, 0x23,
                                     0xcd, 0xef, 0x88, 0x76, 0x00, 0x00, 0x00, 0x00};

static void test_ctrl_vectors(void **state)
{
    (void)state;
    struct ub__pds_ctrl h;
    memset(&h, 0, sizeof(h));
    h.ctl_type = UB_PDS_CTRL_PROBE;
    h.flags = UB_PDS_CTRL_F_ISROD | UB_PDS_CTRL_F_AR;
    h.probe_opaque = 0x4321;
    h.psn = 0x1000;
    h.spdcid = 0x0a0a;
    h.dpdcid = 0x0b0b;
    h.payload = 0xfff;
    check_both(pds_ctrl_enc, pds_ctrl_dec, &h, sizeof(h), v_ctrl_probe, sizeof(v_ctrl_probe));

    memset(&h, 0, sizeof(h));
    h.ctl_type = UB_PDS_CTRL_NEGOTIATION;
    h.flags = UB_PDS_CTRL_F_SYN | UB_PDS_CTRL_F_RETX;
    h.psn = 0xcdef0123;
    h.spdcid = 0xcdef;
    h.use_rsv_pdc = true;
    h.psn_offset = 0x876;
    check_both(pds_ctrl_enc, pds_ctrl_dec, &h, sizeof(h), v_ctrl_neg, sizeof(v_ctrl_neg));
}

static void test_ctrl_bad(void **state)
{
    (void)state;
    uint8_t m[16];
    /* ctl_type 10..15 reserved: 0x5b,0x28 has ctl 6; flipping bit 0x02 of byte 0 gives 14 */
    wire_check_decode_fails(pds_ctrl_dec, wire_mutate(m, v_ctrl_probe, 16, 0, 0x02), 16,
                            UB_EBADMSG);
    /* probe opaque on a non-probe */
    wire_check_decode_fails(pds_ctrl_dec, wire_mutate(m, v_ctrl_neg, 16, 3, 0x01), 16, UB_EBADMSG);
    wire_check_decode_fails(pds_ctrl_dec, wire_mutate(m, v_ctrl_probe, 16, 1, 0x41), 16,
                            UB_EBADMSG);
    struct ub__pds_ctrl h;
    memset(&h, 0, sizeof(h));
    h.ctl_type = 10;
    wire_check_encode_fails(pds_ctrl_enc, &h, UB_EINVAL);
    h.ctl_type = 16;
    wire_check_encode_fails(pds_ctrl_enc, &h, UB_EOVERFLOW);
    h.ctl_type = UB_PDS_CTRL_CLOSE;
    h.flags = UB_PDS_CTRL_F_SYN;
    h.psn_offset = 0x1000;
    wire_check_encode_fails(pds_ctrl_enc, &h, UB_EOVERFLOW);
}

/* ---- generic ------------------------------------------------------------------- */

static void test_generic_reserved_types(void **state)
{
    (void)state;
    for (unsigned t = 0; t < 32; t++) {
        uint8_t b[64] = {0};
        b[0] = (uint8_t)(t << 3);
        size_t size = ub__pds_hdr_size((uint8_t)t, 0);
        bool known =
            (t >= UB_PDS_TYPE_RUD_REQ && t <= UB_PDS_TYPE_ROD_CC_REQ) || t == UB_PDS_TYPE_LINK;
        assert_int_equal(size != 0, known);
        if (!known)
            wire_check_decode_fails(pds_dec, b, sizeof(b), UB_EBADMSG);
    }
    wire_check_decode_fails(pds_dec, (const uint8_t *)"\x11", 1, UB_ETRUNC);
    wire_check_decode_fails(pds_dec, (const uint8_t *)"", 0, UB_ETRUNC);
    struct ub__pds_hdr h;
    memset(&h, 0, sizeof(h));
    h.type = UB_PDS_TYPE_RUD_REQ; /* union member's own type disagrees */
    h.u.req.type = UB_PDS_TYPE_ROD_REQ;
    wire_check_encode_fails(pds_enc, &h, UB_EINVAL);
    h.type = 0;
    wire_check_encode_fails(pds_enc, &h, UB_EINVAL);
}

static void test_prologue(void **state)
{
    (void)state;
    struct ub__pds_prologue p = {UB_PDS_TYPE_ROD_CC_REQ, 0xf, 0x7f};
    uint8_t b[2];
    struct ub__wcur w;
    ub__wcur_init(&w, b, 2);
    assert_int_equal(ub__pds_prologue_encode(&p, &w), 0);
    assert_int_equal(b[0], 0x77); /* 01110 111 */
    assert_int_equal(b[1], 0xff); /* 1 1111111 */
    struct ub__rcur r;
    ub__rcur_init(&r, b, 2);
    struct ub__pds_prologue q;
    assert_int_equal(ub__pds_prologue_decode(&q, &r), 0);
    assert_int_equal(q.type, 14);
    assert_int_equal(q.next_hdr, 15);
    assert_int_equal(q.flags, 0x7f);
    p.type = 32;
    ub__wcur_init(&w, b, 2);
    assert_int_equal(ub__pds_prologue_encode(&p, &w), UB_EOVERFLOW);
    p.type = 1;
    p.flags = 0x80;
    assert_int_equal(ub__pds_prologue_encode(&p, &w), UB_EOVERFLOW);
    for (uint8_t nh = 0; nh < 16; nh++)
        assert_int_equal(ub__pds_nh_valid(nh), nh <= 6 || nh == 15);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rud_req_vector),
        cmocka_unit_test(test_rod_req_syn_vector),
        cmocka_unit_test(test_req_put_vectors),
        cmocka_unit_test(test_rud_cc_req_vector),
        cmocka_unit_test(test_req_bad),
        cmocka_unit_test(test_req_encode_errors),
        cmocka_unit_test(test_rudi_vector),
        cmocka_unit_test(test_uud_vector),
        cmocka_unit_test(test_link_vector),
        cmocka_unit_test(test_ack_vector),
        cmocka_unit_test(test_ack_epsn_vector),
        cmocka_unit_test(test_ack_cc_nscc_vector),
        cmocka_unit_test(test_ack_cc_rccc_vector),
        cmocka_unit_test(test_ack_ccx_vector),
        cmocka_unit_test(test_ack_own_vector),
        cmocka_unit_test(test_ack_bad),
        cmocka_unit_test(test_ack_encode_errors),
        cmocka_unit_test(test_nack_vector),
        cmocka_unit_test(test_nack_ccx_vector),
        cmocka_unit_test(test_nack_codes),
        cmocka_unit_test(test_ctrl_vectors),
        cmocka_unit_test(test_ctrl_bad),
        cmocka_unit_test(test_generic_reserved_types),
        cmocka_unit_test(test_prologue),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
