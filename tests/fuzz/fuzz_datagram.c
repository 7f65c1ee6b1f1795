/*
 * Fuzz target: the whole-datagram parser, run as the engine runs it on every
 * received packet (both sealed and opened). Invariants: the parsed pieces tile
 * the datagram in order and stay inside it; the headers re-encode to exactly
 * the bytes before the payload; a re-parse of the re-encoded headers plus the
 * same payload agrees; the link path's fast parse and the general one (UB_WIRE_F_GENERAL)
 * give the same result, field for field; whatever ub__wire_link_req or ub__wire_link_rsp
 * takes the general parse takes too, with the same fields.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "wire/datagram.h"
#include "fuzz.h"

static void one(const uint8_t *data, size_t size, unsigned flags)
{
    struct ub__wire_dgram d, g;
    /* One fill for both: fields neither parse writes (padding, union bytes) compare equal. */
    memset(&d, 0xa5, sizeof(d));
    memset(&g, 0xa5, sizeof(g));
    int rc = ub__wire_parse_datagram(&d, data, size, flags);
    CHECK(ub__wire_parse_datagram(&g, data, size, flags | UB_WIRE_F_GENERAL) == rc);
    CHECK(memcmp(&d, &g, sizeof(d)) == 0);
    struct ub__wire_link_req r;
    memset(&r, 0xa5, sizeof(r));
    if (ub__wire_link_req(&r, data, size)) {
        CHECK(rc == 0 && !d.has_tss && d.pds.type == UB_PDS_TYPE_LINK && d.has_ext);
        CHECK(d.ses_kind == UB_PDS_NH_REQ_STD);
        CHECK(r.dst_inc == d.pds.u.link.dst_inc && r.link_flags == d.pds.u.link.flags);
        CHECK(memcmp(&r.ext, &d.ext, sizeof(r.ext)) == 0);
        CHECK(memcmp(&r.std, &d.ses.u.std, sizeof(r.std)) == 0);
        CHECK(r.payload == data + d.payload_off && r.payload_len == d.payload_len);
        CHECK(r.std.flags & UB_SES_F_SOM);
        if (r.has_atomic) {
            CHECK(d.ses.ext == UB_SES_EXT_ATOMIC);
            CHECK(memcmp(&r.atomic, &d.ses.atomic, sizeof(r.atomic)) == 0);
        } else {
            CHECK(d.ses.ext == UB_SES_EXT_NONE);
            CHECK(r.payload_len ==
                  (r.std.opcode == UB_SES_OP_READ ? 0 : d.ses.u.std.request_length));
        }
    }
    struct ub__wire_link_rsp a;
    memset(&a, 0xa5, sizeof(a));
    if (ub__wire_link_rsp(&a, data, size)) {
        CHECK(rc == 0 && !d.has_tss && d.pds.type == UB_PDS_TYPE_LINK && d.has_ext);
        CHECK(d.ses_kind == UB_PDS_NH_RSP_DATA && d.ext.version == 0 && d.ext.tail_len == 0);
        CHECK(a.dst_inc == d.pds.u.link.dst_inc && a.link_flags == d.pds.u.link.flags);
        CHECK(memcmp(&a.ext, &d.ext, sizeof(a.ext)) == 0);
        CHECK(memcmp(&a.rsp, &d.ses.u.rsp_data, sizeof(a.rsp)) == 0);
        CHECK(a.payload == data + d.payload_off && a.payload_len == d.payload_len);
    }
    CHECK(rc == 0 || rc == UB_ETRUNC || rc == UB_EBADMSG);
    if (rc)
        return;
    CHECK(d.len == size);
    if (d.has_tss) {
        CHECK(d.tss_len == ub__tss_hdr_size(d.tss.sp) && d.pds_off == d.tss_len);
        CHECK(d.icv_off + UB_TSS_ICV_SIZE == size);
    } else {
        CHECK(d.pds_off == 0 && !d.sealed);
    }
    if (d.sealed) {
        CHECK(!(flags & UB_WIRE_F_OPENED));
        return;
    }
    size_t end = d.has_tss ? d.icv_off : size;
    CHECK(d.pds_len == ub__pds_hdr_size(d.pds.type, (uint8_t)(data[d.pds_off + 1] & 0x7f)));
    size_t next = d.pds_off + d.pds_len;
    if (d.has_ext) {
        CHECK(d.ext_off == next && d.ext_len == ub__ext_size(&d.ext));
        next += d.ext_len;
    }
    CHECK(d.ses_off == next);
    CHECK(d.ses_len == (d.ses_kind == UB_PDS_NH_NONE ? 0 : ub__ses_size(&d.ses)));
    CHECK(d.payload_off == d.ses_off + d.ses_len);
    CHECK(d.payload_off + d.payload_len == end);

    static uint8_t out[1 << 16];
    struct ub__wcur w;
    ub__wcur_init(&w, out, sizeof(out));
    CHECK(ub__wire_encode_headers(&d, &w) == 0);
    CHECK(ub__wcur_offset(&w) == d.payload_off);
    CHECK(memcmp(out, data, d.payload_off) == 0);
    /* the same headers, a re-parse of the same datagram, agree */
    if (size <= sizeof(out)) {
        memcpy(out + d.payload_off, data + d.payload_off, size - d.payload_off);
        struct ub__wire_dgram d2;
        CHECK(ub__wire_parse_datagram(&d2, out, size, flags) == 0);
        CHECK(d2.payload_off == d.payload_off && d2.payload_len == d.payload_len);
        CHECK(d2.ses_kind == d.ses_kind && d2.has_ext == d.has_ext);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    one(data, size, 0);
    one(data, size, UB_WIRE_F_OPENED);
    return 0;
}
