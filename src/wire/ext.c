/* The softub extension header codec. Layout: docs/wire-format.md section 6. */
#include "wire/ext.h"

#include <string.h>

#include "wire/pds.h"

size_t ub__ext_size(const struct ub__ext *h)
{
    return UB_EXT_SIZE + (size_t)h->tail_len;
}

/* Why h cannot be encoded (ub__ext_encode's checks, in their order of precedence). */
static int ext_check(const struct ub__ext *h)
{
    if (h->version > 15 || h->next_hdr > 15 || h->exec_order > 3)
        return UB_EOVERFLOW;
    if (h->version > UB_EXT_VERSION_COMPAT_MAX || h->next_hdr > UB_PDS_NH_RSP_DATA_SMALL ||
        h->exec_order > UB_EXT_EO_SO)
        return UB_EINVAL;
    if (h->tail_len > UB_EXT_MAX_SIZE - UB_EXT_SIZE)
        return UB_EOVERFLOW;
    if ((h->tail_len % UB_EXT_HLEN_UNIT) || (h->tail_len && !h->tail) ||
        (h->version == UB_EXT_VERSION && h->tail_len))
        return UB_EINVAL;
    return 0;
}

int ub__ext_encode(const struct ub__ext *h, struct ub__wcur *w)
{
    /* Every packet passes here: one test for all the checks, the reason only on failure. */
    uint32_t tl = h->tail_len;
    bool bad = (h->version > UB_EXT_VERSION_COMPAT_MAX) | (h->next_hdr > UB_PDS_NH_RSP_DATA_SMALL) |
               (h->exec_order > UB_EXT_EO_SO) | (tl > UB_EXT_MAX_SIZE - UB_EXT_SIZE) |
               ((tl % UB_EXT_HLEN_UNIT) != 0) |
               ((tl != 0) & ((h->tail == NULL) | (h->version == UB_EXT_VERSION)));
    if (bad)
        return ext_check(h);
    size_t size = UB_EXT_SIZE + tl;
    uint8_t *p = ub__wcur_take(w, size);
    if (!p)
        return UB_ETRUNC;
    p[0] = (uint8_t)((h->version << 4) | h->next_hdr);
    p[1] = (uint8_t)(size / UB_EXT_HLEN_UNIT);
    p[2] = (uint8_t)((h->exec_order << UB_EXT_B2_EO_SHIFT) |
                     (h->inorder_completion ? UB_EXT_B2_CO : 0) | (h->fence ? UB_EXT_B2_F : 0) |
                     (h->aqm_increase ? UB_EXT_B2_I : 0) | (h->aqm_congestion ? UB_EXT_B2_C : 0));
    p[3] = 0;
    ub__st16(p + 4, h->aqm_hint);
    ub__st16(p + 6, h->stream);
    ub__st32(p + 8, h->order_seq);
    ub__st32(p + 12, h->incarnation);
    /* The transaction layer's tail (12 bytes): a copy of fixed size, no library call. */
    if (tl == 12)
        memcpy(p + UB_EXT_SIZE, h->tail, 12);
    else if (tl)
        memcpy(p + UB_EXT_SIZE, h->tail, tl);
    return 0;
}

int ub__ext_decode(struct ub__ext *h, struct ub__rcur *r)
{
    const uint8_t *p = ub__rcur_peek(r, 2);
    if (!p) {
        ub__rcur_skip(r, 2); /* records the truncation */
        return UB_ETRUNC;
    }
    uint8_t b0 = p[0];
    uint8_t hlen = p[1];
    uint8_t version = (uint8_t)(b0 >> 4);
    size_t size = (size_t)hlen * UB_EXT_HLEN_UNIT;
    if (version > UB_EXT_VERSION_COMPAT_MAX || size < UB_EXT_SIZE ||
        (version == UB_EXT_VERSION && size != UB_EXT_SIZE)) {
        ub__rcur_skip(r, 2);
        return UB_EBADMSG;
    }
    p = ub__rcur_take(r, size);
    if (!p)
        return UB_ETRUNC;
    uint8_t b2 = p[2];
    uint8_t b3 = p[3];
    /* Every field is set: no clearing of the struct first. */
    h->version = version;
    h->next_hdr = (uint8_t)(b0 & 0x0fu);
    h->aqm_hint = ub__ld16(p + 4);
    h->stream = ub__ld16(p + 6);
    h->order_seq = ub__ld32(p + 8);
    h->incarnation = ub__ld32(p + 12);
    h->tail_len = (uint16_t)(size - UB_EXT_SIZE);
    h->tail = h->tail_len ? p + UB_EXT_SIZE : NULL;
    h->exec_order = (uint8_t)(b2 >> UB_EXT_B2_EO_SHIFT);
    h->inorder_completion = (b2 & UB_EXT_B2_CO) != 0;
    h->fence = (b2 & UB_EXT_B2_F) != 0;
    h->aqm_increase = (b2 & UB_EXT_B2_I) != 0;
    h->aqm_congestion = (b2 & UB_EXT_B2_C) != 0;
    if (h->next_hdr > UB_PDS_NH_RSP_DATA_SMALL || h->exec_order > UB_EXT_EO_SO ||
        (b2 & UB_EXT_B2_RSVD) || b3)
        return UB_EBADMSG;
    return 0;
}
