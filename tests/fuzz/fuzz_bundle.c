/*
 * Fuzz target: datagram bundle decoder. Invariants: a bundle that checks walks to
 * exactly its records, which tile the datagram after the marker, none empty or nested;
 * re-encoding them reproduces the datagram byte for byte; what follows its first record,
 * behind a marker, is a bundle of the others.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <softub/errors.h>
#include "wire/bundle.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int n = ub__bundle_check(data, size);
    CHECK(n > 0 || n == UB_EBADMSG || n == UB_ETRUNC);
    if (n <= 0)
        return 0;
    static uint8_t out[65536 + 8];
    if (size > 65536)
        return 0;
    size_t off = 0, len, w = ub__bundle_put_hdr(out);
    const uint8_t *rec;
    int k = 0;
    while (ub__bundle_next(data, size, &off, &rec, &len)) {
        CHECK(len > 0 && rec > data && rec + len <= data + size && rec[0] != UB_BUNDLE_MARK);
        w += ub__bundle_put_rec(out + w, rec, len);
        k++;
    }
    CHECK(k == n && off == size && w == size && memcmp(out, data, size) == 0);
    /* A yield's split (engine.c): the marker over the last byte of a record leaves the
     * records after it a bundle of their own. */
    if (n >= 2) {
        off = 0;
        CHECK(ub__bundle_next(data, size, &off, &rec, &len));
        memcpy(out, data, size);
        out[off - 1] = UB_BUNDLE_MARK;
        CHECK(ub__bundle_check(out + off - 1, size - (off - 1)) == n - 1);
    }
    return 0;
}
