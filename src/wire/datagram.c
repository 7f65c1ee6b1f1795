/* Whole-datagram header chain. docs/wire-format.md section 7. */
#include "wire/datagram.h"

#include <string.h>

bool ub__wire_nh_allowed(uint8_t pds_type, uint8_t k)
{
    bool req = k == UB_PDS_NH_REQ_SMALL || k == UB_PDS_NH_REQ_MEDIUM || k == UB_PDS_NH_REQ_STD;
    bool data_rsp = k == UB_PDS_NH_RSP_DATA || k == UB_PDS_NH_RSP_DATA_SMALL;
    switch (pds_type) {
    case UB_PDS_TYPE_RUD_REQ:
    case UB_PDS_TYPE_ROD_REQ:
    case UB_PDS_TYPE_RUD_CC_REQ:
    case UB_PDS_TYPE_ROD_CC_REQ:
        return req || data_rsp; /* read responses travel as PDS requests */
    case UB_PDS_TYPE_RUDI_REQ:
    case UB_PDS_TYPE_UUD_REQ:
        return req;
    case UB_PDS_TYPE_RUDI_RESP:
        return k == UB_PDS_NH_RSP || data_rsp;
    case UB_PDS_TYPE_ACK:
    case UB_PDS_TYPE_ACK_CC:
    case UB_PDS_TYPE_ACK_CCX:
        return k == UB_PDS_NH_NONE || k == UB_PDS_NH_RSP || data_rsp;
    case UB_PDS_TYPE_NACK:
    case UB_PDS_TYPE_NACK_CCX:
        return k == UB_PDS_NH_NONE;
    default:
        return false; /* CTRL carries no next header */
    }
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

int ub__wire_parse_datagram(struct ub__wire_dgram *d, const uint8_t *buf, size_t len,
                            unsigned flags)
{
    if (!d || (!buf && len) || (flags & ~UB_WIRE_F_OPENED))
        return UB_EINVAL;
    /* Field by field, not the whole 392 bytes: the header decoders clear what they fill
     * (the PDS union member, the extension, the SES header), so only what they do not
     * reach is cleared here. */
    d->len = len;
    d->has_tss = false;
    d->sealed = false;
    memset(&d->tss, 0, sizeof(d->tss));
    d->tss_len = 0;
    d->icv_off = 0;
    d->pds_off = d->pds_len = 0;
    d->has_ext = false;
    d->ext_off = 0;
    d->ext_len = 0;
    d->ses_kind = UB_PDS_NH_NONE;
    d->ses_off = d->ses_len = 0;
    d->payload_off = d->payload_len = 0;
    size_t end = len; /* where the headers and payload stop (the ICV starts) */
    struct ub__rcur r;
    ub__rcur_init(&r, buf, len);
    int rc;

    if (ub__tss_present(buf, len)) {
        d->has_tss = true;
        if ((rc = ub__tss_decode(&d->tss, &r)) != 0)
            return rc;
        d->tss_len = ub__rcur_offset(&r);
        if (len - d->tss_len < UB_TSS_ICV_SIZE + UB_PDS_MIN_SIZE)
            return UB_ETRUNC;
        end = len - UB_TSS_ICV_SIZE;
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
    }

    d->pds_off = ub__rcur_offset(&r);
    if ((rc = ub__pds_decode(&d->pds, &r)) != 0)
        return rc;
    d->pds_len = ub__rcur_offset(&r) - d->pds_off;
    uint8_t nh = ub__pds_next_hdr_at(buf + d->pds_off, d->pds.type);

    if (nh == UB_PDS_NH_SOFTUB_EXT) {
        d->has_ext = true;
        d->ext_off = ub__rcur_offset(&r);
        if ((rc = ub__ext_decode(&d->ext, &r)) != 0)
            return rc;
        d->ext_len = ub__rcur_offset(&r) - d->ext_off;
        nh = d->ext.next_hdr;
    } else {
        memset(&d->ext, 0, sizeof(d->ext));
    }
    if (d->pds.type != UB_PDS_TYPE_CTRL && !ub__wire_nh_allowed(d->pds.type, nh))
        return UB_EBADMSG;

    d->ses_kind = nh;
    d->ses_off = ub__rcur_offset(&r);
    if (nh != UB_PDS_NH_NONE) {
        if ((rc = ub__ses_decode(&d->ses, nh, &r)) != 0)
            return rc;
    } else {
        memset(&d->ses, 0, sizeof(d->ses));
    }
    d->ses_len = ub__rcur_offset(&r) - d->ses_off;
    d->payload_off = ub__rcur_offset(&r);
    d->payload_len = end - d->payload_off;
    if (d->pds.type == UB_PDS_TYPE_CTRL)
        return d->payload_len == 0 ? 0 : UB_EBADMSG;
    return check_payload(&d->ses, d->payload_len);
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
