/* Whole-datagram header chain. docs/wire-format.md section 7. */
#include "wire/datagram.h"

#include <string.h>

#include "core/compiler.h"

/* For each PDS type, the next-header values (bit k for value k) allowed after it. */
#define NH(k)       (1u << (k))
#define NH_REQ      (NH(UB_PDS_NH_REQ_SMALL) | NH(UB_PDS_NH_REQ_MEDIUM) | NH(UB_PDS_NH_REQ_STD))
#define NH_DATA_RSP (NH(UB_PDS_NH_RSP_DATA) | NH(UB_PDS_NH_RSP_DATA_SMALL))
static const uint16_t nh_ok[32] = {
    /* read responses travel as PDS requests */
    [UB_PDS_TYPE_RUD_REQ] = NH_REQ | NH_DATA_RSP,
    [UB_PDS_TYPE_ROD_REQ] = NH_REQ | NH_DATA_RSP,
    [UB_PDS_TYPE_RUD_CC_REQ] = NH_REQ | NH_DATA_RSP,
    [UB_PDS_TYPE_ROD_CC_REQ] = NH_REQ | NH_DATA_RSP,
    [UB_PDS_TYPE_RUDI_REQ] = NH_REQ,
    [UB_PDS_TYPE_UUD_REQ] = NH_REQ,
    [UB_PDS_TYPE_LINK] = NH_REQ | NH_DATA_RSP,
    [UB_PDS_TYPE_RUDI_RESP] = NH(UB_PDS_NH_RSP) | NH_DATA_RSP,
    [UB_PDS_TYPE_ACK] = NH(UB_PDS_NH_NONE) | NH(UB_PDS_NH_RSP) | NH_DATA_RSP,
    [UB_PDS_TYPE_ACK_CC] = NH(UB_PDS_NH_NONE) | NH(UB_PDS_NH_RSP) | NH_DATA_RSP,
    [UB_PDS_TYPE_ACK_CCX] = NH(UB_PDS_NH_NONE) | NH(UB_PDS_NH_RSP) | NH_DATA_RSP,
    [UB_PDS_TYPE_NACK] = NH(UB_PDS_NH_NONE),
    [UB_PDS_TYPE_NACK_CCX] = NH(UB_PDS_NH_NONE),
    /* CTRL carries no next header */
};

static inline bool nh_allowed(uint8_t pds_type, uint8_t k)
{
    return pds_type < UB_ARRAY_SIZE(nh_ok) && k < 16 && ((nh_ok[pds_type] >> k) & 1u);
}

bool ub__wire_nh_allowed(uint8_t pds_type, uint8_t k)
{
    return nh_allowed(pds_type, k);
}

/* Checks that the SES length fields agree with the payload present. */
static int check_payload(const struct ub__ses *s, size_t payload)
{
    switch (s->kind) {
    case UB_PDS_NH_NONE:
    case UB_PDS_NH_RSP:
        return payload == 0 ? 0 : UB_EBADMSG;
    case UB_PDS_NH_REQ_SMALL:
        return payload <= s->u.small.request_length ? 0 : UB_EBADMSG;
    case UB_PDS_NH_REQ_MEDIUM:
        return payload <= s->u.medium.request_length ? 0 : UB_EBADMSG;
    case UB_PDS_NH_REQ_STD:
        if (s->u.std.flags & UB_SES_F_SOM)
            return payload <= s->u.std.request_length ? 0 : UB_EBADMSG;
        return payload == s->u.std.payload_len ? 0 : UB_EBADMSG;
    case UB_PDS_NH_RSP_DATA:
        return payload == s->u.rsp_data.payload_len ? 0 : UB_EBADMSG;
    case UB_PDS_NH_RSP_DATA_SMALL:
        return payload == s->u.rsp_data_small.payload_len ? 0 : UB_EBADMSG;
    default:
        return UB_EBADMSG;
    }
}

/* A parse that failed before its SES header was through: nothing from there on was found. */
static int fail_before_ses(struct ub__wire_dgram *d, int rc)
{
    d->ses_kind = UB_PDS_NH_NONE;
    d->ses_off = d->ses_len = 0;
    d->payload_off = d->payload_len = 0;
    return rc;
}

/*
 * The chain after the TSS header (if any): PDS, extension, SES, payload, in r up to end.
 * Every field from pds_off on is written once, on failure too (what was not reached
 * reads 0). Inline: the call cost more than its chain checks, once per datagram.
 */
static UB_ALWAYS_INLINE int parse_chain(struct ub__wire_dgram *d, const uint8_t *buf,
                                        struct ub__rcur *r, size_t end)
{
    int rc;
    size_t off = ub__rcur_offset(r);
    d->pds_off = off;
    if (UB_UNLIKELY((rc = ub__pds_decode(&d->pds, r)) != 0)) {
        d->pds_len = 0;
        d->has_ext = false;
        d->ext_off = d->ext_len = 0;
        return fail_before_ses(d, rc);
    }
    size_t pds_end = ub__rcur_offset(r);
    d->pds_len = pds_end - off;
    uint8_t nh = ub__pds_next_hdr_at(buf + off, d->pds.type);
    d->has_ext = nh == UB_PDS_NH_SOFTUB_EXT;
    if (d->has_ext) {
        d->ext_off = pds_end;
        if ((rc = ub__ext_decode(&d->ext, r)) != 0) {
            d->ext_len = 0;
            return fail_before_ses(d, rc);
        }
        d->ext_len = ub__rcur_offset(r) - pds_end;
        nh = d->ext.next_hdr;
    } else {
        d->ext_off = d->ext_len = 0;
        memset(&d->ext, 0, sizeof(d->ext));
    }
    bool ctrl = d->pds.type == UB_PDS_TYPE_CTRL;
    if (!ctrl && !nh_allowed(d->pds.type, nh))
        return fail_before_ses(d, UB_EBADMSG);

    d->ses_kind = nh;
    size_t ses_off = ub__rcur_offset(r);
    d->ses_off = ses_off;
    if (nh != UB_PDS_NH_NONE) {
        if ((rc = ub__ses_decode(&d->ses, nh, r)) != 0) {
            d->ses_len = 0;
            d->payload_off = d->payload_len = 0;
            return rc;
        }
    } else {
        memset(&d->ses, 0, sizeof(d->ses));
    }
    size_t pay = ub__rcur_offset(r);
    d->ses_len = pay - ses_off;
    d->payload_off = pay;
    d->payload_len = end - pay;
    if (ctrl)
        return d->payload_len == 0 ? 0 : UB_EBADMSG;
    return check_payload(&d->ses, d->payload_len);
}

/* A LINK header at buf: type 31, next header 15 (0xff, 0x80), flags O or none, reserved 0. */
static inline bool link_hdr_ok(const uint8_t *buf, size_t len)
{
    return len >= UB_PDS_LINK_SIZE && buf[0] == UB_WIRE_LINK_BYTE0 && (buf[1] & 0xfe) == 0x80 &&
           !(buf[2] | buf[3]);
}

/*
 * The link path's usual packet (docs/pds.md, "The link path"): LINK with the softub extension
 * next, then a request or a response with data. What parse_chain makes of it, without the
 * PDS decoder's dispatch and the next-header table: the LINK header's checks inline, the
 * extension and SES headers by their own decoders. false for anything else, or anything
 * wrong, and parse_chain runs (it writes every field again, and finds the error):
 * fuzz_datagram checks that the two agree on every input.
 */
static UB_ALWAYS_INLINE bool parse_link(struct ub__wire_dgram *d, const uint8_t *buf, size_t len)
{
    if (!link_hdr_ok(buf, len))
        return false;
    struct ub__rcur r;
    ub__rcur_init(&r, buf, len);
    ub__rcur_skip(&r, UB_PDS_LINK_SIZE);
    if (ub__ext_decode(&d->ext, &r) != 0)
        return false;
    uint8_t nh = d->ext.next_hdr;
    if (nh != UB_PDS_NH_REQ_STD && nh != UB_PDS_NH_RSP_DATA)
        return false;
    size_t ses_off = ub__rcur_offset(&r);
    if (ub__ses_decode(&d->ses, nh, &r) != 0)
        return false;
    size_t pay = ub__rcur_offset(&r);
    if (check_payload(&d->ses, len - pay) != 0)
        return false;
    d->pds_off = 0;
    d->pds_len = UB_PDS_LINK_SIZE;
    d->pds.type = UB_PDS_TYPE_LINK;
    d->pds.u.link.next_hdr = UB_PDS_NH_SOFTUB_EXT;
    d->pds.u.link.flags = buf[1] & UB_PDS_LINK_F_MASK;
    d->pds.u.link.dst_inc = ub__ld32(buf + 4);
    d->has_ext = true;
    d->ext_off = UB_PDS_LINK_SIZE;
    d->ext_len = ses_off - UB_PDS_LINK_SIZE;
    d->ses_kind = nh;
    d->ses_off = ses_off;
    d->ses_len = pay - ses_off;
    d->payload_off = pay;
    d->payload_len = len - pay;
    return true;
}

/* A LINK header of at least min bytes' datagram and the extension after it (into *x, naming
 * next header nh), *c left at the SES header: the usual request's and response's first part.
 * The next header is looked at first: a response is not decoded twice on its way past the
 * request's recogniser. */
static inline bool link_ext(const uint8_t *buf, size_t len, size_t min, uint8_t nh,
                            struct ub__ext *x, struct ub__rcur *c)
{
    if (len < min || !link_hdr_ok(buf, len) || ub__ext_next_hdr(buf + UB_PDS_LINK_SIZE) != nh)
        return false;
    ub__rcur_init(c, buf, len);
    ub__rcur_skip(c, UB_PDS_LINK_SIZE);
    return ub__ext_decode(x, c) == 0 && x->next_hdr == nh;
}

bool ub__wire_link_req(struct ub__wire_link_req *r, const uint8_t *buf, size_t len)
{
    struct ub__rcur c;
    if (!link_ext(buf, len, UB_PDS_LINK_SIZE + UB_EXT_SIZE + UB_SES_STD_SIZE, UB_PDS_NH_REQ_STD,
                  &r->ext, &c) ||
        ub__ses_std_decode(&r->std, &c) != 0)
        return false;
    /* A fetching atomic or a READ is one packet that says SOM (whatever its EOM says): the
     * atomic's operand, if any, at most request_length bytes (as the general parse asks), a
     * READ nothing. A message is whole in its packet. */
    uint8_t op = r->std.opcode;
    r->has_atomic = op == UB_SES_OP_FETCHING_ATOMIC;
    if (!(r->std.flags & UB_SES_F_SOM) ||
        (r->has_atomic ? ub__ses_atomic_decode(&r->atomic, &c) != 0
                       : ub__ses_ext_for(UB_PDS_NH_REQ_STD, op) != UB_SES_EXT_NONE))
        return false;
    size_t pay = ub__rcur_offset(&c), n = len - pay;
    bool ok = r->has_atomic          ? n <= r->std.request_length
              : op == UB_SES_OP_READ ? n == 0
                                     : (r->std.flags & UB_SES_F_EOM) && n == r->std.request_length;
    if (!ok)
        return false;
    r->dst_inc = ub__ld32(buf + 4);
    r->link_flags = buf[1] & UB_PDS_LINK_F_MASK;
    r->payload = buf + pay;
    r->payload_len = (uint32_t)(len - pay);
    return true;
}

bool ub__wire_link_rsp(struct ub__wire_link_rsp *r, const uint8_t *buf, size_t len)
{
    struct ub__rcur c;
    if (!link_ext(buf, len, UB_PDS_LINK_SIZE + UB_EXT_SIZE + UB_SES_RSP_DATA_SIZE,
                  UB_PDS_NH_RSP_DATA, &r->ext, &c) ||
        r->ext.version != 0 || ub__ses_rsp_data_decode(&r->rsp, &c) != 0)
        return false;
    size_t pay = ub__rcur_offset(&c);
    if (len - pay != r->rsp.payload_len)
        return false;
    r->dst_inc = ub__ld32(buf + 4);
    r->link_flags = buf[1] & UB_PDS_LINK_F_MASK;
    r->payload = buf + pay;
    r->payload_len = (uint32_t)(len - pay);
    return true;
}

int ub__wire_parse_datagram(struct ub__wire_dgram *d, const uint8_t *buf, size_t len,
                            unsigned flags)
{
    if (!d || (!buf && len) || (flags & ~(UB_WIRE_F_OPENED | UB_WIRE_F_GENERAL)))
        return UB_EINVAL;
    /* Field by field, not the whole 392 bytes: the header decoders clear what they fill
     * (the PDS union member, the extension, the SES header), and parse_chain() writes
     * every field from pds_off on; only the TSS part is cleared here. */
    d->len = len;
    d->sealed = false;
    d->tss_len = 0;
    d->icv_off = 0;
    struct ub__rcur r;
    ub__rcur_init(&r, buf, len);
    if (UB_LIKELY(!ub__tss_present(buf, len))) {
        d->has_tss = false;
        memset(&d->tss, 0, sizeof(d->tss));
        if (!(flags & UB_WIRE_F_GENERAL) && parse_link(d, buf, len))
            return 0;
        return parse_chain(d, buf, &r, len);
    }

    int rc;
    d->has_tss = true;
    d->pds_off = d->pds_len = 0;
    d->has_ext = false;
    d->ext_off = d->ext_len = 0;
    d->ses_kind = UB_PDS_NH_NONE;
    d->ses_off = d->ses_len = 0;
    d->payload_off = d->payload_len = 0;
    if ((rc = ub__tss_decode(&d->tss, &r)) != 0)
        return rc;
    d->tss_len = ub__rcur_offset(&r);
    if (len - d->tss_len < UB_TSS_ICV_SIZE + UB_PDS_MIN_SIZE)
        return UB_ETRUNC;
    size_t end = len - UB_TSS_ICV_SIZE; /* where the headers and payload stop */
    d->icv_off = end;
    if (!(flags & UB_WIRE_F_OPENED)) {
        d->sealed = true;
        d->pds_off = d->tss_len;
        memset(&d->pds, 0, sizeof(d->pds));
        memset(&d->ext, 0, sizeof(d->ext));
        memset(&d->ses, 0, sizeof(d->ses));
        return 0;
    }
    ub__rcur_init(&r, buf, end); /* the ICV is not part of the chain */
    ub__rcur_skip(&r, d->tss_len);
    return parse_chain(d, buf, &r, end);
}

int ub__wire_encode_headers(const struct ub__wire_dgram *d, struct ub__wcur *w)
{
    uint8_t nh = ub__pds_next_hdr(&d->pds);
    if (d->pds.type == UB_PDS_TYPE_CTRL) {
        if (d->has_ext || d->ses_kind != UB_PDS_NH_NONE)
            return UB_EINVAL;
    } else {
        if (d->has_ext != (nh == UB_PDS_NH_SOFTUB_EXT))
            return UB_EINVAL;
        if (d->has_ext)
            nh = d->ext.next_hdr;
        if (nh != d->ses_kind || !ub__wire_nh_allowed(d->pds.type, nh))
            return UB_EINVAL;
        if (nh != UB_PDS_NH_NONE && d->ses.kind != nh)
            return UB_EINVAL;
    }
    size_t start = ub__wcur_offset(w);
    int rc = 0;
    if (d->has_tss)
        rc = ub__tss_encode(&d->tss, w);
    if (!rc)
        rc = ub__pds_encode(&d->pds, w);
    if (!rc && d->has_ext)
        rc = ub__ext_encode(&d->ext, w);
    if (!rc && d->ses_kind != UB_PDS_NH_NONE && d->pds.type != UB_PDS_TYPE_CTRL)
        rc = ub__ses_encode(&d->ses, w);
    if (rc) {
        /* Leave the writer as it was: the headers land whole or not at all. */
        w->off = start;
        w->err = rc == UB_ETRUNC ? UB_ETRUNC : w->err;
    }
    return rc;
}
