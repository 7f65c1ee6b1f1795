/*
 * Fuzz target: PDS header decoder. Invariants: a header that decodes has the
 * size its type says, re-encodes to exactly the bytes it came from, decodes
 * again to the same bytes, and its encoder neither writes past a short buffer
 * nor writes anything when it fails.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "wire/pds.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ub__rcur r;
    struct ub__pds_hdr h;
    ub__rcur_init(&r, data, size);
    int rc = ub__pds_decode(&h, &r);
    CHECK(rc == 0 || rc == UB_ETRUNC || rc == UB_EBADMSG);
    if (rc)
        return 0;
    size_t n = ub__rcur_offset(&r);
    CHECK(n >= UB_PDS_MIN_SIZE && n <= UB_PDS_MAX_SIZE && n <= size);
    CHECK(n == ub__pds_hdr_size(h.type, (uint8_t)(data[1] & 0x7f)));
    CHECK(h.type == (data[0] >> 3));
    CHECK(ub__pds_next_hdr_at(data, h.type) == ub__pds_next_hdr(&h)); /* the fast read agrees */

    uint8_t out[UB_PDS_MAX_SIZE + 8];
    memset(out, 0xa5, sizeof(out));
    struct ub__wcur w;
    ub__wcur_init(&w, out, UB_PDS_MAX_SIZE);
    CHECK(ub__pds_encode(&h, &w) == 0);
    CHECK(ub__wcur_offset(&w) == n);
    CHECK(memcmp(out, data, n) == 0);
    for (size_t i = UB_PDS_MAX_SIZE; i < sizeof(out); i++)
        CHECK(out[i] == 0xa5);

    struct ub__pds_hdr h2;
    ub__rcur_init(&r, out, n);
    CHECK(ub__pds_decode(&h2, &r) == 0 && ub__rcur_offset(&r) == n);
    CHECK(h2.type == h.type && ub__pds_next_hdr(&h2) == ub__pds_next_hdr(&h));

    for (size_t cap = 0; cap < n; cap++) {
        memset(out, 0xa5, sizeof(out));
        ub__wcur_init(&w, out, cap);
        CHECK(ub__pds_encode(&h, &w) == UB_ETRUNC);
        for (size_t i = 0; i < sizeof(out); i++)
            CHECK(out[i] == 0xa5);
    }
    /* every prefix is a truncation */
    for (size_t k = 0; k < n; k++) {
        ub__rcur_init(&r, data, k);
        CHECK(ub__pds_decode(&h2, &r) == UB_ETRUNC);
    }
    return 0;
}
