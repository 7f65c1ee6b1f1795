/* The shm lanes' delta encoding (src/dev/shm_delta.c): exact bodies, the fallback to whole
 * datagrams, a producer and a consumer kept equal over a long random run, refusals. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include <softub/errors.h>
#include "core/rand.h"
#include "dev/shm_delta.h"

static struct ub__shm_delta pro, con;

static void reset(void)
{
    memset(&pro, 0, sizeof(pro));
    memset(&con, 0, sizeof(con));
}

/* One datagram over the lane: what the producer wrote (0: whole) and what arrived. */
static uint32_t carry(const uint8_t *dg, uint32_t len, uint8_t *body, uint16_t *mask)
{
    uint8_t out[UB_SHM_DELTA_MAX + 8];
    memset(out, 0xee, sizeof(out));
    uint32_t n = ub__shm_delta_encode(&pro, dg, len, body, mask);
    if (n)
        assert_int_equal(ub__shm_delta_decode(&con, len, *mask, body, out, sizeof(out)), 0);
    else
        ub__shm_delta_note(&con, dg, len);
    if (n)
        assert_memory_equal(out, dg, len);
    assert_memory_equal(&pro, &con, sizeof(pro));
    return n;
}

static void fill(uint8_t *dg, uint32_t len, uint8_t seed)
{
    for (uint32_t i = 0; i < len; i++)
        dg[i] = (uint8_t)(seed + i);
}

static void test_exact(void **state)
{
    (void)state;
    reset();
    uint8_t dg[88], body[UB_SHM_DELTA_MAX];
    uint16_t mask = 0;
    fill(dg, sizeof(dg), 0);
    assert_int_equal(carry(dg, 88, body, &mask), 0); /* no context yet: whole */
    /* The same again: one word (word 0) so that an encoded slot always has a body. */
    assert_int_equal(carry(dg, 88, body, &mask), 8);
    assert_int_equal(mask, 0x0001);
    assert_memory_equal(body, dg, 8);
    /* Bytes 10 and 87 change: words 1 and 10, in order. */
    dg[10] = 0xaa;
    dg[87] = 0xbb;
    assert_int_equal(carry(dg, 88, body, &mask), 16);
    assert_int_equal(mask, (1u << 1) | (1u << 10));
    static const uint8_t want[16] = {0x08, 0x09, 0xaa, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
                                     0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0xbb};
    assert_memory_equal(body, want, 16);
}

static void test_partial_word(void **state)
{
    (void)state;
    reset();
    uint8_t dg[89], body[UB_SHM_DELTA_MAX];
    uint16_t mask = 0;
    fill(dg, sizeof(dg), 3);
    assert_int_equal(carry(dg, 89, body, &mask), 0);
    dg[88] = 0x77; /* the last word is one byte, sent zero-padded */
    assert_int_equal(carry(dg, 89, body, &mask), 8);
    assert_int_equal(mask, 1u << 11);
    static const uint8_t want[8] = {0x77, 0, 0, 0, 0, 0, 0, 0};
    assert_memory_equal(body, want, 8);
}

static void test_whole_when_too_many(void **state)
{
    (void)state;
    reset();
    uint8_t dg[128], body[UB_SHM_DELTA_MAX];
    uint16_t mask = 0;
    fill(dg, sizeof(dg), 0);
    assert_int_equal(carry(dg, 128, body, &mask), 0);
    for (uint32_t w = 0; w < 6; w++) /* six words: the first line holds them */
        dg[w * 16] ^= 1;
    assert_int_equal(carry(dg, 128, body, &mask), 48);
    for (uint32_t w = 0; w < 7; w++) /* seven: whole, and the contexts still agree */
        dg[w * 16 + 1] ^= 1;
    assert_int_equal(carry(dg, 128, body, &mask), 0);
    dg[127] ^= 1;
    assert_int_equal(carry(dg, 128, body, &mask), 8);
    assert_int_equal(mask, 1u << 15);
    /* Another length on the same context (88 and 120 bytes share index 3): whole, then
     * encoded against it. */
    assert_int_equal(ub__shm_delta_index(88), ub__shm_delta_index(120));
    assert_int_equal(carry(dg, 120, body, &mask), 0);
    assert_int_equal(carry(dg, 88, body, &mask), 0);
    assert_int_equal(carry(dg, 88, body, &mask), 8);
}

/* Requests and responses of many sizes interleaved, a few bytes changed each time. */
static void test_random_run(void **state)
{
    (void)state;
    reset();
    struct ub__rng r;
    ub__rng_seed(&r, 7);
    uint8_t dg[UB_SHM_DELTA_CTXS * 2][UB_SHM_DELTA_MAX], body[UB_SHM_DELTA_MAX];
    uint32_t lens[UB_SHM_DELTA_CTXS * 2];
    for (uint32_t k = 0; k < UB_SHM_DELTA_CTXS * 2; k++) {
        lens[k] = UB_SHM_DELTA_MIN + (uint32_t)ub__rng_below(&r, 80);
        fill(dg[k], UB_SHM_DELTA_MAX, (uint8_t)k);
    }
    uint32_t encoded = 0;
    for (int i = 0; i < 20000; i++) {
        uint32_t k = (uint32_t)ub__rng_below(&r, UB_SHM_DELTA_CTXS * 2);
        for (uint64_t c = ub__rng_below(&r, 9); c; c--)
            dg[k][ub__rng_below(&r, lens[k])] = (uint8_t)ub__rng_next(&r);
        uint16_t mask = 0;
        encoded += carry(dg[k], lens[k], body, &mask) != 0;
    }
    assert_in_range(encoded, 5000, 19000);
}

static void test_refused(void **state)
{
    (void)state;
    reset();
    uint8_t dg[64], body[UB_SHM_DELTA_MAX], out[UB_SHM_DELTA_MAX];
    uint16_t mask = 0;
    fill(dg, sizeof(dg), 9);
    memset(body, 0x5a, sizeof(body));
    /* No context of that length. */
    assert_int_equal(ub__shm_delta_decode(&con, 64, 1, body, out, sizeof(out)), UB_EBADMSG);
    (void)carry(dg, 64, body, &mask);
    struct ub__shm_delta was = con;
    /* No words; a word past the datagram (64 bytes: 8 words); seven words; a length out of
     * range; no room for the datagram. */
    assert_int_equal(ub__shm_delta_decode(&con, 64, 0, body, out, sizeof(out)), UB_EBADMSG);
    assert_int_equal(ub__shm_delta_decode(&con, 64, 1u << 8, body, out, sizeof(out)), UB_EBADMSG);
    assert_int_equal(ub__shm_delta_decode(&con, 64, 0x7f, body, out, sizeof(out)), UB_EBADMSG);
    assert_int_equal(ub__shm_delta_decode(&con, 48, 1, body, out, sizeof(out)), UB_EBADMSG);
    assert_int_equal(ub__shm_delta_decode(&con, 129, 1, body, out, sizeof(out)), UB_EBADMSG);
    assert_int_equal(ub__shm_delta_decode(&con, 64, 1, body, out, 63), UB_EBADMSG);
    assert_memory_equal(&was, &con, sizeof(con));
    /* Six words and a short buffer: taken, exactly len bytes written. */
    uint8_t small[65];
    memset(small, 0xcc, sizeof(small));
    assert_int_equal(ub__shm_delta_decode(&con, 64, 0x3f, body, small, 64), 0);
    assert_memory_equal(small, body, 48);
    assert_memory_equal(small + 48, dg + 48, 16);
    assert_int_equal(small[64], 0xcc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact),
        cmocka_unit_test(test_partial_word),
        cmocka_unit_test(test_whole_when_too_many),
        cmocka_unit_test(test_random_run),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
