/*
 * Fuzz target: softub extension header decoder. Invariants: a decoded header
 * has the size its hlen says, re-encodes to exactly its bytes (unknown
 * compatible tails included), and every prefix is a truncation.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "wire/ext.h"
#include "wire/pds.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ub__rcur r;
    struct ub__ext h;
    ub__rcur_init(&r, data, size);
    int rc = ub__ext_decode(&h, &r);
    CHECK(rc == 0 || rc == UB_ETRUNC || rc == UB_EBADMSG);
    if (rc)
        return 0;
    size_t n = ub__rcur_offset(&r);
    CHECK(n == ub__ext_size(&h) && n == (size_t)data[1] * UB_EXT_HLEN_UNIT);
    CHECK(h.version <= UB_EXT_VERSION_COMPAT_MAX && h.exec_order <= UB_EXT_EO_SO);
    CHECK(h.next_hdr <= UB_PDS_NH_RSP_DATA_SMALL);

    uint8_t out[UB_EXT_MAX_SIZE + 8];
    memset(out, 0xa5, sizeof(out));
    struct ub__wcur w;
    ub__wcur_init(&w, out, UB_EXT_MAX_SIZE);
    CHECK(ub__ext_encode(&h, &w) == 0);
    CHECK(ub__wcur_offset(&w) == n && memcmp(out, data, n) == 0);
    for (size_t i = UB_EXT_MAX_SIZE; i < sizeof(out); i++)
        CHECK(out[i] == 0xa5);
    struct ub__ext h2;
    ub__rcur_init(&r, out, n);
    CHECK(ub__ext_decode(&h2, &r) == 0 && ub__rcur_offset(&r) == n);
    CHECK(h2.order_seq == h.order_seq && h2.incarnation == h.incarnation);
    for (size_t k = 0; k < n; k++) {
        ub__rcur_init(&r, data, k);
        CHECK(ub__ext_decode(&h2, &r) == UB_ETRUNC);
    }
    return 0;
}
