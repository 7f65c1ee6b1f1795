/*
 * Fuzz target: the packed-request and packed-response decoders (src/ses/ses_pack.c). Input:
 * the payload of a packed packet (the records behind the container header), run through
 * both. Invariants, for each: the whole check and the record-by-record walk agree; every
 * record and its payload lie inside the input; a record's extension and SES header re-encode
 * to the bytes they came from; every proper prefix that cuts a record is refused.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ses/ses.h"
#include "wire/ext.h"
#include "wire/ses.h"
#include "fuzz.h"

typedef int (*rec_fn)(const uint8_t *p, size_t n, struct ub__ses_prec *rec);

/* Walks data record by record with parse and checks each against the whole check's count. */
static void walk(const uint8_t *data, size_t size, int count, rec_fn parse, bool rsp)
{
    CHECK(count == UB_EBADMSG || count == UB_ETRUNC || (count >= 1 && count <= UB_SES_PACK_RECS));
    size_t off = 0;
    int walked = 0;
    struct ub__ses_prec rec;
    while (off < size) {
        int k = parse(data + off, size - off, &rec);
        if (k < 0)
            break;
        CHECK((size_t)k <= size - off && k >= UB_SES_PACK_LEN);
        CHECK(rec.payload >= data + off && rec.payload + rec.payload_len == data + off + (size_t)k);
        if (rsp) /* a version-0 extension and a response with data */
            CHECK(rec.ext.version == 0 && rec.ses.kind == UB_PDS_NH_RSP_DATA &&
                  rec.payload_len == rec.ses.u.rsp_data.payload_len);
        else
            CHECK(rec.payload_len <= rec.ses.u.std.request_length);
        /* Headers re-encode to the same bytes. */
        uint8_t out[UB_EXT_MAX_SIZE + UB_SES_MAX_SIZE];
        struct ub__wcur w;
        ub__wcur_init(&w, out, sizeof(out));
        CHECK(ub__ext_encode(&rec.ext, &w) == 0);
        CHECK(ub__ses_encode(&rec.ses, &w) == 0);
        size_t hl = ub__wcur_offset(&w);
        CHECK(hl + rec.payload_len + UB_SES_PACK_LEN == (size_t)k);
        CHECK(memcmp(out, data + off + UB_SES_PACK_LEN, hl) == 0);
        /* A record cut anywhere is refused. */
        for (size_t cut = 0; cut < (size_t)k; cut++)
            CHECK(parse(data + off, cut, &rec) < 0);
        off += (size_t)k;
        walked++;
    }
    if (count > 0) {
        CHECK(off == size && walked == count);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    walk(data, size, ub__ses_prsp_check(data, size), ub__ses_prsp_rec, true);
    walk(data, size, ub__ses_pack_check(data, size), ub__ses_pack_rec, false);
    return 0;
}
