/*
 * Fuzz target: SES header decoder. Input: one byte choosing the header kind
 * (a PDS next-header value), then the header bytes. Invariants: a decoded
 * header re-encodes to the bytes it came from, with the size ub__ses_size()
 * reports, and decodes again identically.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "wire/pds.h"
#include "wire/ses.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t kind = (uint8_t)(data[0] & 0x0f);
    data++;
    size--;
    struct ub__rcur r;
    struct ub__ses s;
    ub__rcur_init(&r, data, size);
    int rc = ub__ses_decode(&s, kind, &r);
    bool is_ses = kind >= UB_PDS_NH_REQ_SMALL && kind <= UB_PDS_NH_RSP_DATA_SMALL;
    CHECK(is_ses ? (rc == 0 || rc == UB_ETRUNC || rc == UB_EBADMSG) : rc == UB_EINVAL);
    if (rc)
        return 0;
    size_t n = ub__rcur_offset(&r);
    CHECK(n == ub__ses_size(&s) && n <= UB_SES_MAX_SIZE && n <= size);

    uint8_t out[UB_SES_MAX_SIZE + 8];
    memset(out, 0xa5, sizeof(out));
    struct ub__wcur w;
    ub__wcur_init(&w, out, UB_SES_MAX_SIZE);
    CHECK(ub__ses_encode(&s, &w) == 0);
    CHECK(ub__wcur_offset(&w) == n && memcmp(out, data, n) == 0);
    for (size_t i = UB_SES_MAX_SIZE; i < sizeof(out); i++)
        CHECK(out[i] == 0xa5);

    struct ub__ses s2;
    ub__rcur_init(&r, out, n);
    CHECK(ub__ses_decode(&s2, kind, &r) == 0 && ub__rcur_offset(&r) == n);
    CHECK(s2.ext == s.ext && ub__ses_size(&s2) == n);

    for (size_t cap = 0; cap < n; cap++) {
        ub__wcur_init(&w, out, cap);
        CHECK(ub__ses_encode(&s, &w) == UB_ETRUNC);
    }
    for (size_t k = 0; k < n; k++) {
        ub__rcur_init(&r, data, k);
        CHECK(ub__ses_decode(&s2, kind, &r) == UB_ETRUNC);
    }
    return 0;
}
