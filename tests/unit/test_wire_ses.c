/* Unit tests: UET SES header codecs (src/wire/ses.c). Vectors: docs/wire-format.md section 4. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <softub/errors.h>

#include "unit/wire_check.h"
#include "wire/pds.h"
#include "wire/ses.h"

WIRE_ADAPT(ses_std, struct ub__ses_std)
WIRE_ADAPT(ses_small, struct ub__ses_small)
WIRE_ADAPT(ses_medium, struct ub__ses_medium)
WIRE_ADAPT(ses_rsp, struct ub__ses_rsp)
WIRE_ADAPT(ses_rsp_data, struct ub__ses_rsp_data)
WIRE_ADAPT(ses_rsp_data_small, struct ub__ses_rsp_data_small)
WIRE_ADAPT(ses_atomic, struct ub__ses_atomic)
WIRE_ADAPT(ses_rndv, struct ub__ses_rndv)

static int ses_enc(const void *h, struct ub__wcur *w)
{
    return ub__ses_encode((const struct ub__ses *)h, w);
}

static uint8_t g_kind; /* the next-header value ses_dec decodes as */

static int ses_dec(void *h, struct ub__rcur *r)
{
    return ub__ses_decode((struct ub__ses *)h, g_kind, r);
}

/* ---- standard request ----------------------------------------------------- */

static const uint8_t v_std_som[44] = {
    0x01, 0x2d, 0x12, 0x34, 0x77, 0xab, 0xcd, 0xef, 0x06, 0x78, 0x09, 0xab, 0xfe, 0xdc, 0xba,
    0x98, 0x76, 0x54, 0x32, 0x10, 0xfe, 0xdc, 0xba, 0x98, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66,
    0x77, 0x88, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00, 0x11, 0x00, 0x01, 0x00, 0x00};

static struct ub__ses_std std_som(void)
{
    struct ub__ses_std h;
    memset(&h, 0, sizeof(h));
    h.opcode = UB_SES_OP_WRITE;
    h.flags = UB_SES_F_DC | UB_SES_F_REL | UB_SES_F_HD | UB_SES_F_SOM;
    h.msg_id = 0x1234;
    h.ri_generation = 0x77;
    h.job_id = 0xabcdef;
    h.pid_on_fep = 0x678;
    h.resource_index = 0x9ab;
    h.buffer_offset = 0xfedcba9876543210ull;
    h.initiator = 0xfedcba98;
    h.mem_key = 0x1122334455667788ull;
    h.header_data = 0xaabbccddeeff0011ull;
    h.request_length = 0x10000;
    return h;
}

static const uint8_t v_std_mid[44] = {
    0x05, 0x02, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x03, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x11, 0x00};

static struct ub__ses_std std_mid(void)
{
    struct ub__ses_std h;
    memset(&h, 0, sizeof(h));
    h.opcode = UB_SES_OP_SEND;
    h.flags = UB_SES_F_EOM;
    h.msg_id = 1;
    h.job_id = 1;
    h.pid_on_fep = 1;
    h.resource_index = 1;
    h.initiator = 2;
    h.mem_key = 3;
    h.payload_len = 0x100;
    h.message_offset = 0x1000;
    h.request_length = 0x1100;
    return h;
}

static void test_std_vectors(void **state)
{
    (void)state;
    struct ub__ses_std h = std_som();
    wire_check_vector(ses_std_enc, ses_std_dec, &h, sizeof(h), v_std_som, sizeof(v_std_som));
    h = std_mid();
    wire_check_vector(ses_std_enc, ses_std_dec, &h, sizeof(h), v_std_mid, sizeof(v_std_mid));
    struct ub__ses_std d;
    assert_int_equal(wire_decode_exact(ses_std_dec, &d, v_std_mid, 44, NULL), 0);
    assert_int_equal(d.payload_len, 0x100);
    assert_int_equal(d.message_offset, 0x1000);
    assert_true(d.header_data == 0);
    /* without HD the header data slot is written as zero */
    h = std_som();
    h.flags &= (uint8_t)~UB_SES_F_HD;
    uint8_t out[44];
    assert_int_equal(wire_encode_guarded(ses_std_enc, &h, 44, out, NULL), 0);
    for (size_t i = 32; i < 40; i++)
        assert_int_equal(out[i], 0);
}

static void test_std_bad(void **state)
{
    (void)state;
    uint8_t m[44];
    wire_check_decode_fails(ses_std_dec, wire_mutate(m, v_std_som, 44, 0, 0x40), 44, UB_EBADMSG);
    wire_check_decode_fails(ses_std_dec, wire_mutate(m, v_std_som, 44, 0, 0x11), 44,
                            UB_EBADMSG); /* opcode 0x10 */
    wire_check_decode_fails(ses_std_dec, wire_mutate(m, v_std_som, 44, 1, 0x40), 44,
                            UB_EBADMSG); /* version 1 */
    wire_check_decode_fails(ses_std_dec, wire_mutate(m, v_std_som, 44, 8, 0x10), 44, UB_EBADMSG);
    wire_check_decode_fails(ses_std_dec, wire_mutate(m, v_std_som, 44, 10, 0x80), 44, UB_EBADMSG);
    /* header data present without HD */
    wire_check_decode_fails(ses_std_dec, wire_mutate(m, v_std_som, 44, 1, UB_SES_F_HD), 44,
                            UB_EBADMSG);
    /* reserved bits above payload_len */
    wire_check_decode_fails(ses_std_dec, wire_mutate(m, v_std_mid, 44, 34, 0x40), 44, UB_EBADMSG);
    /* message_offset + payload_len beyond request_length */
    wire_check_decode_fails(ses_std_dec, wire_mutate(m, v_std_mid, 44, 42, 0x01), 44, UB_EBADMSG);
}

static void test_std_encode_errors(void **state)
{
    (void)state;
    struct ub__ses_std h = std_som();
    h.opcode = 0x40;
    wire_check_encode_fails(ses_std_enc, &h, UB_EOVERFLOW);
    h.opcode = 0x10;
    wire_check_encode_fails(ses_std_enc, &h, UB_EINVAL);
    h = std_som();
    h.flags = 0x40;
    wire_check_encode_fails(ses_std_enc, &h, UB_EOVERFLOW);
    h = std_som();
    h.job_id = 0x1000000;
    wire_check_encode_fails(ses_std_enc, &h, UB_EOVERFLOW);
    h = std_som();
    h.pid_on_fep = 0x1000;
    wire_check_encode_fails(ses_std_enc, &h, UB_EOVERFLOW);
    h = std_som();
    h.resource_index = 0x1000;
    wire_check_encode_fails(ses_std_enc, &h, UB_EOVERFLOW);
    h = std_mid();
    h.payload_len = 0x4000;
    wire_check_encode_fails(ses_std_enc, &h, UB_EOVERFLOW);
    h = std_mid();
    h.request_length = 0x10ff;
    wire_check_encode_fails(ses_std_enc, &h, UB_EINVAL);
}

/* ---- small and medium requests ---------------------------------------------- */

static const uint8_t v_small[20] = {0x01, 0x23, 0x01, 0x00, 0x01, 0x00, 0x00, 0x02, 0x00, 0x03,
                                    0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00};

static void test_small_vector(void **state)
{
    (void)state;
    struct ub__ses_small h = {
        UB_SES_OP_WRITE, UB_SES_F_SOM | UB_SES_F_EOM | UB_SES_F_DC, 0x100, 1, 2, 3, 4, 0x1000};
    wire_check_vector(ses_small_enc, ses_small_dec, &h, sizeof(h), v_small, sizeof(v_small));
    uint8_t m[20];
    wire_check_decode_fails(ses_small_dec, wire_mutate(m, v_small, 20, 1, UB_SES_F_HD), 20,
                            UB_EBADMSG);
    wire_check_decode_fails(ses_small_dec, wire_mutate(m, v_small, 20, 1, UB_SES_F_SOM), 20,
                            UB_EBADMSG);
    wire_check_decode_fails(ses_small_dec, wire_mutate(m, v_small, 20, 1, UB_SES_F_EOM), 20,
                            UB_EBADMSG);
    wire_check_decode_fails(ses_small_dec, wire_mutate(m, v_small, 20, 2, 0x40), 20, UB_EBADMSG);
    h.request_length = 0x4000;
    wire_check_encode_fails(ses_small_enc, &h, UB_EOVERFLOW);
    h.request_length = 1;
    h.flags = UB_SES_F_SOM;
    wire_check_encode_fails(ses_small_enc, &h, UB_EINVAL);
}

static const uint8_t v_medium[32] = {
    0x09, 0x07, 0x20, 0x00, 0x00, 0x00, 0x00, 0x05, 0x00, 0x06, 0x00, 0x07, 0x01, 0x02, 0x03, 0x04,
    0x05, 0x06, 0x07, 0x08, 0x0a, 0x0b, 0x0c, 0x0d, 0xf0, 0xf0, 0xf0, 0xf0, 0xf0, 0xf0, 0xf0, 0xf0};

static void test_medium_vector(void **state)
{
    (void)state;
    struct ub__ses_medium h;
    memset(&h, 0, sizeof(h));
    h.opcode = UB_SES_OP_TAGGED_SEND;
    h.flags = UB_SES_F_SOM | UB_SES_F_EOM | UB_SES_F_HD;
    h.request_length = 0x2000;
    h.job_id = 5;
    h.pid_on_fep = 6;
    h.resource_index = 7;
    h.header_data = 0x0102030405060708ull;
    h.initiator = 0x0a0b0c0d;
    h.mem_key = 0xf0f0f0f0f0f0f0f0ull;
    wire_check_vector(ses_medium_enc, ses_medium_dec, &h, sizeof(h), v_medium, sizeof(v_medium));
    /* without HD the same slot is the buffer offset */
    struct ub__ses_medium d;
    uint8_t m[32];
    assert_int_equal(wire_decode_exact(ses_medium_dec, &d,
                                       wire_mutate(m, v_medium, 32, 1, UB_SES_F_HD), 32, NULL),
                     0);
    assert_true(d.buffer_offset == 0x0102030405060708ull);
    assert_true(d.header_data == 0);
    wire_check_decode_fails(ses_medium_dec, wire_mutate(m, v_medium, 32, 1, UB_SES_F_EOM), 32,
                            UB_EBADMSG);
    wire_check_decode_fails(ses_medium_dec, wire_mutate(m, v_medium, 32, 2, 0x80), 32, UB_EBADMSG);
}

/* ---- responses ----------------------------------------------------------------- */

static const uint8_t v_rsp[12] = {0x41, 0x01, 0x12, 0x34, 0x05, 0x06,
                                  0x07, 0x08, 0x00, 0x00, 0x04, 0x00};

static void test_rsp_vector(void **state)
{
    (void)state;
    struct ub__ses_rsp h = {
        UB_SES_LIST_OVERFLOW, UB_SES_RSP_RESPONSE, UB_SES_RC_OK, 0x1234, 5, 0x060708, 0x400};
    wire_check_vector(ses_rsp_enc, ses_rsp_dec, &h, sizeof(h), v_rsp, sizeof(v_rsp));
    uint8_t m[12];
    wire_check_decode_fails(ses_rsp_dec, wire_mutate(m, v_rsp, 12, 0, 0x03), 12,
                            UB_EBADMSG); /* opcode 2 needs the data header */
    wire_check_decode_fails(ses_rsp_dec, wire_mutate(m, v_rsp, 12, 0, 0xc0), 12,
                            UB_EBADMSG); /* list 2 */
    wire_check_decode_fails(ses_rsp_dec, wire_mutate(m, v_rsp, 12, 1, 0x40), 12, UB_EBADMSG);
    wire_check_decode_fails(ses_rsp_dec, wire_mutate(m, v_rsp, 12, 1, 0x01 ^ 0x25), 12,
                            UB_EBADMSG); /* rc 0x25 */
    h.rc = 0x38;
    wire_check_encode_fails(ses_rsp_enc, &h, UB_EINVAL);
    h.rc = 0x40;
    wire_check_encode_fails(ses_rsp_enc, &h, UB_EOVERFLOW);
    h.rc = 0;
    h.opcode = UB_SES_RSP_WITH_DATA;
    wire_check_encode_fails(ses_rsp_enc, &h, UB_EINVAL);
    h.opcode = UB_SES_RSP_NONE;
    h.list = 2;
    wire_check_encode_fails(ses_rsp_enc, &h, UB_EINVAL);
    int valid = 0;
    for (unsigned rc = 0; rc < 64; rc++)
        valid += ub__ses_rc_valid((uint8_t)rc);
    assert_int_equal(valid, 0x25 + 8 + 1);
}

static const uint8_t v_rsp_data[20] = {0x02, 0x01, 0x00, 0x10, 0x00, 0x00, 0x00, 0x01, 0x00, 0x20,
                                       0x08, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x20, 0x00};

static void test_rsp_data_vector(void **state)
{
    (void)state;
    struct ub__ses_rsp_data h = {
        UB_SES_LIST_EXPECTED, UB_SES_RC_OK, 0x10, 1, 0x20, 0x800, 0x800, 0x2000};
    wire_check_vector(ses_rsp_data_enc, ses_rsp_data_dec, &h, sizeof(h), v_rsp_data, 20);
    uint8_t m[20];
    wire_check_decode_fails(ses_rsp_data_dec, wire_mutate(m, v_rsp_data, 20, 4, 0x01), 20,
                            UB_EBADMSG);
    wire_check_decode_fails(ses_rsp_data_dec, wire_mutate(m, v_rsp_data, 20, 0, 0x03), 20,
                            UB_EBADMSG);
    wire_check_decode_fails(ses_rsp_data_dec, wire_mutate(m, v_rsp_data, 20, 10, 0x40), 20,
                            UB_EBADMSG);
    h.payload_len = 0x4000;
    wire_check_encode_fails(ses_rsp_data_enc, &h, UB_EOVERFLOW);
}

static const uint8_t v_rsp_small[12] = {0x02, 0x00, 0x00, 0x40, 0x00, 0x00,
                                        0xab, 0xcd, 0x11, 0x11, 0x11, 0x11};

static void test_rsp_data_small_vector(void **state)
{
    (void)state;
    struct ub__ses_rsp_data_small h = {UB_SES_LIST_EXPECTED, UB_SES_RC_NULL, 0x40, 0xabcd,
                                       0x11111111};
    wire_check_vector(ses_rsp_data_small_enc, ses_rsp_data_small_dec, &h, sizeof(h), v_rsp_small,
                      12);
    uint8_t m[12];
    wire_check_decode_fails(ses_rsp_data_small_dec, wire_mutate(m, v_rsp_small, 12, 4, 0x80), 12,
                            UB_EBADMSG);
    wire_check_decode_fails(ses_rsp_data_small_dec, wire_mutate(m, v_rsp_small, 12, 2, 0x80), 12,
                            UB_EBADMSG);
    h.job_id = 0x1000000;
    wire_check_encode_fails(ses_rsp_data_small_enc, &h, UB_EOVERFLOW);
}

/* ---- extension headers ------------------------------------------------------------ */

static const uint8_t v_atomic[4] = {0x02, 0x07, 0x01, 0x00};

static void test_atomic_vectors(void **state)
{
    (void)state;
    struct ub__ses_atomic h;
    memset(&h, 0, sizeof(h));
    h.opcode = UB_SES_AMO_SUM;
    h.datatype = UB_SES_DT_UINT64;
    h.ctrl = UB_SES_AMO_CTRL_CACHEABLE;
    wire_check_vector(ses_atomic_enc, ses_atomic_dec, &h, sizeof(h), v_atomic, 4);

    uint8_t v[36] = {0x0d, 0x05, 0x03, 0x00};
    h.opcode = UB_SES_AMO_CSWAP;
    h.datatype = UB_SES_DT_UINT32;
    h.ctrl = UB_SES_AMO_CTRL_CACHEABLE | UB_SES_AMO_CTRL_CPU_COHERENT;
    for (uint8_t i = 0; i < 16; i++) {
        v[4 + i] = h.compare[i] = (uint8_t)(0x10 + i);
        v[20 + i] = h.swap[i] = (uint8_t)(0x20 + i);
    }
    wire_check_vector(ses_atomic_enc, ses_atomic_dec, &h, sizeof(h), v, 36);

    uint8_t m[4];
    wire_check_decode_fails(ses_atomic_dec, wire_mutate(m, v_atomic, 4, 0, 0x16), 4,
                            UB_EBADMSG); /* 0x14 INVAL */
    wire_check_decode_fails(ses_atomic_dec, wire_mutate(m, v_atomic, 4, 1, 0x15), 4,
                            UB_EBADMSG); /* datatype 0x12 */
    wire_check_decode_fails(ses_atomic_dec, wire_mutate(m, v_atomic, 4, 2, 0x04), 4, UB_EBADMSG);
    wire_check_decode_fails(ses_atomic_dec, wire_mutate(m, v_atomic, 4, 3, 0x01), 4, UB_EBADMSG);
    h.opcode = 0xe0; /* vendor defined: not supported */
    wire_check_encode_fails(ses_atomic_enc, &h, UB_EINVAL);
    for (unsigned op = 0; op < 256; op++)
        assert_int_equal(ub__ses_amo_is_cswap((uint8_t)op), op >= 0x0d && op <= 0x12);
}

static const uint8_t v_rndv[24] = {0x00, 0x00, 0x10, 0x00, 0x12, 0x34, 0x56, 0x78,
                                   0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
                                   0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00};

static void test_rndv_vector(void **state)
{
    (void)state;
    struct ub__ses_rndv h = {
        0x1000, 0x12, 0x345, 0x678, 0x1122334455667788ull, 0x99aabbccddeeff00ull};
    wire_check_vector(ses_rndv_enc, ses_rndv_dec, &h, sizeof(h), v_rndv, 24);
    h.pid_on_fep = 0x1000;
    wire_check_encode_fails(ses_rndv_enc, &h, UB_EOVERFLOW);
}

/* ---- tagged SES with extensions ------------------------------------------------------ */

static void test_ses_with_extensions(void **state)
{
    (void)state;
    uint8_t v[UB_SES_MAX_SIZE];
    struct ub__ses s;

    /* standard FETCHING_ATOMIC + atomic extension */
    memset(&s, 0, sizeof(s));
    s.kind = UB_PDS_NH_REQ_STD;
    s.u.std = std_som();
    s.u.std.opcode = UB_SES_OP_FETCHING_ATOMIC;
    s.ext = UB_SES_EXT_ATOMIC;
    s.atomic.opcode = UB_SES_AMO_SUM;
    s.atomic.datatype = UB_SES_DT_UINT64;
    s.atomic.ctrl = UB_SES_AMO_CTRL_CACHEABLE;
    memcpy(v, v_std_som, 44);
    v[0] = UB_SES_OP_FETCHING_ATOMIC;
    memcpy(v + 44, v_atomic, 4);
    assert_int_equal(ub__ses_size(&s), 48);
    g_kind = UB_PDS_NH_REQ_STD;
    wire_check_vector(ses_enc, ses_dec, &s, sizeof(s), v, 48);

    /* standard RNDV_SEND + rendezvous extension */
    s.u.std.opcode = UB_SES_OP_RNDV_SEND;
    s.ext = UB_SES_EXT_RNDV;
    s.rndv = (struct ub__ses_rndv){
        0x1000, 0x12, 0x345, 0x678, 0x1122334455667788ull, 0x99aabbccddeeff00ull};
    v[0] = UB_SES_OP_RNDV_SEND;
    memcpy(v + 44, v_rndv, 24);
    assert_int_equal(ub__ses_size(&s), 68);
    wire_check_vector(ses_enc, ses_dec, &s, sizeof(s), v, 68);
    /* the extension must agree with the opcode */
    s.ext = UB_SES_EXT_NONE;
    wire_check_encode_fails(ses_enc, &s, UB_EINVAL);
    s.ext = UB_SES_EXT_RNDV;
    s.rndv.resource_index = 0x1000; /* a bad extension value fails before any write */
    wire_check_encode_fails(ses_enc, &s, UB_EOVERFLOW);

    /* small ATOMIC with a compare-and-swap extension */
    memset(&s, 0, sizeof(s));
    s.kind = UB_PDS_NH_REQ_SMALL;
    s.u.small = (struct ub__ses_small){
        UB_SES_OP_ATOMIC, UB_SES_F_SOM | UB_SES_F_EOM, 8, 0, 2, 3, 4, 0x1000};
    s.ext = UB_SES_EXT_ATOMIC;
    s.atomic.opcode = UB_SES_AMO_CSWAP_GT;
    s.atomic.datatype = UB_SES_DT_INT64;
    memcpy(v, v_small, 20);
    v[0] = UB_SES_OP_ATOMIC;
    v[1] = 0x03;
    v[2] = 0x00;
    v[3] = 0x08;
    v[4] = 0x00;
    memset(v + 20, 0, 36);
    v[20] = UB_SES_AMO_CSWAP_GT;
    v[21] = UB_SES_DT_INT64;
    assert_int_equal(ub__ses_size(&s), 56);
    g_kind = UB_PDS_NH_REQ_SMALL;
    wire_check_vector(ses_enc, ses_dec, &s, sizeof(s), v, 56);

    /* responses have no extension */
    memset(&s, 0, sizeof(s));
    s.kind = UB_PDS_NH_RSP;
    s.u.rsp = (struct ub__ses_rsp){
        UB_SES_LIST_OVERFLOW, UB_SES_RSP_RESPONSE, UB_SES_RC_OK, 0x1234, 5, 0x060708, 0x400};
    g_kind = UB_PDS_NH_RSP;
    wire_check_vector(ses_enc, ses_dec, &s, sizeof(s), v_rsp, 12);

    /* not an SES kind */
    _Alignas(16) uint8_t scratch[sizeof(struct ub__ses)];
    g_kind = UB_PDS_NH_NONE;
    assert_int_equal(wire_decode_exact(ses_dec, scratch, v_rsp, 12, NULL), UB_EINVAL);
    g_kind = UB_PDS_NH_SOFTUB_EXT;
    assert_int_equal(wire_decode_exact(ses_dec, scratch, v_rsp, 12, NULL), UB_EINVAL);
    s.kind = 9;
    assert_int_equal(ub__ses_size(&s), 0);
    wire_check_encode_fails(ses_enc, &s, UB_EINVAL);
    assert_int_equal(ub__ses_ext_for(UB_PDS_NH_REQ_MEDIUM, UB_SES_OP_RNDV_TSEND), UB_SES_EXT_NONE);
    assert_int_equal(ub__ses_ext_for(UB_PDS_NH_REQ_STD, UB_SES_OP_TSEND_ATOMIC), UB_SES_EXT_ATOMIC);
    assert_int_equal(ub__ses_ext_for(UB_PDS_NH_RSP, UB_SES_OP_ATOMIC), UB_SES_EXT_NONE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_std_vectors),         cmocka_unit_test(test_std_bad),
        cmocka_unit_test(test_std_encode_errors),   cmocka_unit_test(test_small_vector),
        cmocka_unit_test(test_medium_vector),       cmocka_unit_test(test_rsp_vector),
        cmocka_unit_test(test_rsp_data_vector),     cmocka_unit_test(test_rsp_data_small_vector),
        cmocka_unit_test(test_atomic_vectors),      cmocka_unit_test(test_rndv_vector),
        cmocka_unit_test(test_ses_with_extensions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
