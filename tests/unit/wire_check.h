/*
 * Shared checks for the wire codec tests: exact-byte vectors, round trips,
 * every truncation, and writers that must not write past their buffer.
 * Include after <cmocka.h>.
 */
#ifndef SOFTUB_TESTS_WIRE_CHECK_H
#define SOFTUB_TESTS_WIRE_CHECK_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/cursor.h"

typedef int (*wire_enc_fn)(const void *h, struct ub__wcur *w);
typedef int (*wire_dec_fn)(void *h, struct ub__rcur *r);

/* Declares typed adapters NAME_enc / NAME_dec around ub__NAME_encode / ub__NAME_decode. */
#define WIRE_ADAPT(name, type)                               \
    static int name##_enc(const void *h, struct ub__wcur *w) \
    {                                                        \
        return ub__##name##_encode((const type *)h, w);      \
    }                                                        \
    static int name##_dec(void *h, struct ub__rcur *r)       \
    {                                                        \
        return ub__##name##_decode((type *)h, r);            \
    }

#define WIRE_GUARD   0xa5
#define WIRE_SCRATCH 512

/* Decodes exactly n bytes held in an exact-size heap block (so ASan sees any over-read). */
static inline int wire_decode_exact(wire_dec_fn dec, void *h, const uint8_t *bytes, size_t n,
                                    size_t *consumed)
{
    uint8_t *copy = malloc(n ? n : 1);
    assert_non_null(copy);
    if (n)
        memcpy(copy, bytes, n);
    struct ub__rcur r;
    ub__rcur_init(&r, copy, n);
    int rc = dec(h, &r);
    if (consumed)
        *consumed = ub__rcur_offset(&r);
    free(copy);
    return rc;
}

/* Encodes h into a writer of capacity cap followed by guard bytes; checks the guard. */
static inline int wire_encode_guarded(wire_enc_fn enc, const void *h, size_t cap, uint8_t *out,
                                      size_t *written)
{
    uint8_t buf[WIRE_SCRATCH + 32];
    assert_true(cap <= WIRE_SCRATCH);
    memset(buf, WIRE_GUARD, sizeof(buf));
    struct ub__wcur w;
    ub__wcur_init(&w, buf, cap);
    int rc = enc(h, &w);
    for (size_t i = cap; i < sizeof(buf); i++)
        assert_int_equal(buf[i], WIRE_GUARD);
    if (rc) /* a failed encode writes nothing at all */
        for (size_t i = 0; i < cap; i++)
            assert_int_equal(buf[i], WIRE_GUARD);
    if (written)
        *written = ub__wcur_offset(&w);
    if (out)
        memcpy(out, buf, cap);
    return rc;
}

/*
 * The full treatment for one header value h whose encoding must be exactly
 * expect[0, n): exact bytes, round trip through decode (hsize bytes of
 * struct), every prefix rejected with UB_ETRUNC, every short writer rejected
 * with UB_ETRUNC and untouched, no write past the writer's end.
 */
static inline void wire_check_vector(wire_enc_fn enc, wire_dec_fn dec, const void *h, size_t hsize,
                                     const uint8_t *expect, size_t n)
{
    uint8_t out[WIRE_SCRATCH];
    size_t written = 0;
    assert_true(hsize <= WIRE_SCRATCH);
    /* exact bytes, in a writer with room to spare */
    assert_int_equal(wire_encode_guarded(enc, h, n + 8, out, &written), 0);
    assert_int_equal(written, n);
    assert_memory_equal(out, expect, n);
    /* exact fit */
    assert_int_equal(wire_encode_guarded(enc, h, n, out, &written), 0);
    assert_memory_equal(out, expect, n);
    /* every short writer */
    for (size_t cap = 0; cap < n; cap++)
        assert_int_equal(wire_encode_guarded(enc, h, cap, NULL, NULL), UB_ETRUNC);
    /* decode, and re-encode to the same bytes */
    _Alignas(16) uint8_t h2[WIRE_SCRATCH];
    memset(h2, 0x5a, sizeof(h2));
    size_t consumed = 0;
    assert_int_equal(wire_decode_exact(dec, h2, expect, n, &consumed), 0);
    assert_int_equal(consumed, n);
    assert_int_equal(wire_encode_guarded(enc, h2, n, out, &written), 0);
    assert_memory_equal(out, expect, n);
    /* trailing bytes are left for the next header */
    uint8_t longer[WIRE_SCRATCH + 4];
    memcpy(longer, expect, n);
    memset(longer + n, 0xee, 4);
    assert_int_equal(wire_decode_exact(dec, h2, longer, n + 4, &consumed), 0);
    assert_int_equal(consumed, n);
    /* every truncation */
    for (size_t k = 0; k < n; k++)
        assert_int_equal(wire_decode_exact(dec, h2, expect, k, NULL), UB_ETRUNC);
}

/* Decoding bytes[0, n) fails with rc. */
static inline void wire_check_decode_fails(wire_dec_fn dec, const uint8_t *bytes, size_t n, int rc)
{
    _Alignas(16) uint8_t h[WIRE_SCRATCH];
    assert_int_equal(wire_decode_exact(dec, h, bytes, n, NULL), rc);
}

/* Encoding h fails with rc, writing nothing (generous writer). */
static inline void wire_check_encode_fails(wire_enc_fn enc, const void *h, int rc)
{
    assert_int_equal(wire_encode_guarded(enc, h, WIRE_SCRATCH, NULL, NULL), rc);
}

/* Copies v[0, n) to out and changes byte i by xor-ing mask. */
static inline const uint8_t *wire_mutate(uint8_t *out, const uint8_t *v, size_t n, size_t i,
                                         uint8_t mask)
{
    memcpy(out, v, n);
    out[i] ^= mask;
    return out;
}

#endif
