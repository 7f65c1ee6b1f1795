/*
 * Fuzz target: TSS header decoder and packet layout. Input: one byte giving
 * the cleartext length for the layout, then a packet. Invariants: a decoded
 * header re-encodes to its bytes; a layout covers the packet exactly
 * (AAD + ciphertext + ICV == packet) and stays inside it.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "wire/pds.h"
#include "wire/tss.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t clear_len = data[0];
    data++;
    size--;

    struct ub__rcur r;
    struct ub__tss h;
    ub__rcur_init(&r, data, size);
    int rc = ub__tss_decode(&h, &r);
    CHECK(rc == 0 || rc == UB_ETRUNC || rc == UB_EBADMSG);
    if (rc == 0) {
        size_t n = ub__rcur_offset(&r);
        CHECK(n == ub__tss_hdr_size(h.sp));
        CHECK(ub__tss_present(data, size));
        uint8_t out[UB_TSS_HDR_SSI_SIZE];
        struct ub__wcur w;
        ub__wcur_init(&w, out, sizeof(out));
        CHECK(ub__tss_encode(&h, &w) == 0);
        CHECK(ub__wcur_offset(&w) == n && memcmp(out, data, n) == 0);
        for (size_t k = 0; k < n; k++) {
            ub__rcur_init(&r, data, k);
            CHECK(ub__tss_decode(&h, &r) == UB_ETRUNC);
        }
    }

    struct ub__tss_layout l;
    rc = ub__tss_layout(&l, &h, data, size, clear_len);
    CHECK(rc == 0 || rc == UB_ETRUNC || rc == UB_EBADMSG);
    if (rc == 0) {
        CHECK(l.aad_off == 0 && l.aad_len == l.hdr_len + clear_len);
        CHECK(l.ct_off == l.aad_len);
        CHECK(l.ct_off + l.ct_len == l.icv_off);
        CHECK(l.icv_off + UB_TSS_ICV_SIZE == size);
        CHECK(clear_len + l.ct_len >= UB_PDS_MIN_SIZE);
    }
    return 0;
}
