/* UET 1.0 TSS header codec and packet layout. docs/wire-format.md section 5. */
#include "wire/tss.h"

#include "wire/pds.h"

#define TSS_SP   0x04000000u
#define TSS_RSVD 0x02000000u
#define TSS_AN   0x01000000u

size_t ub__tss_hdr_size(bool sp)
{
    return sp ? UB_TSS_HDR_SSI_SIZE : UB_TSS_HDR_SIZE;
}

int ub__tss_encode(const struct ub__tss *h, struct ub__wcur *w)
{
    if (h->sdi > UB_TSS_SDI_MAX || h->tsc > UB_TSS_TSC_MAX)
        return UB_EOVERFLOW;
    if (ub__wcur_reserve(w, ub__tss_hdr_size(h->sp)))
        return UB_ETRUNC;
    uint32_t w0 =
        ((uint32_t)UB_PDS_TYPE_TSS << 27) | (h->sp ? TSS_SP : 0u) | (h->an ? TSS_AN : 0u) | h->sdi;
    ub__put_u32(w, w0);
    if (h->sp)
        ub__put_u32(w, h->ssi);
    ub__put_u16(w, h->epoch);
    ub__put_u48(w, h->tsc);
    return 0;
}

int ub__tss_decode(struct ub__tss *h, struct ub__rcur *r)
{
    uint32_t w0 = ub__get_u32(r);
    if (ub__rcur_error(r))
        return UB_ETRUNC;
    if ((w0 >> 27) != UB_PDS_TYPE_TSS)
        return UB_EBADMSG;
    h->sp = (w0 & TSS_SP) != 0;
    h->an = (w0 & TSS_AN) != 0;
    h->sdi = w0 & UB_TSS_SDI_MAX;
    h->ssi = h->sp ? ub__get_u32(r) : 0;
    h->epoch = ub__get_u16(r);
    h->tsc = ub__get_u48(r);
    if (ub__rcur_error(r))
        return UB_ETRUNC;
    if (w0 & TSS_RSVD)
        return UB_EBADMSG;
    return 0;
}

int ub__tss_layout(struct ub__tss_layout *l, struct ub__tss *h, const uint8_t *pkt, size_t len,
                   size_t clear_len)
{
    struct ub__rcur r;
    ub__rcur_init(&r, pkt, len);
    int rc = ub__tss_decode(h, &r);
    if (rc)
        return rc;
    size_t hdr = ub__rcur_offset(&r);
    size_t room = len - hdr; /* what follows the header */
    if (room < UB_TSS_ICV_SIZE)
        return UB_ETRUNC;
    room -= UB_TSS_ICV_SIZE; /* cleartext part + encrypted part */
    if (clear_len > room || room < UB_PDS_MIN_SIZE)
        return UB_ETRUNC;
    l->hdr_len = hdr;
    l->aad_off = 0;
    l->aad_len = hdr + clear_len;
    l->ct_off = hdr + clear_len;
    l->ct_len = room - clear_len;
    l->icv_off = len - UB_TSS_ICV_SIZE;
    return 0;
}
