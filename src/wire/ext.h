/*
 * The softub extension header (softub's own, not part of UET 1.0). Internal.
 *
 * It sits between the PDS header and the SES header when the PDS next_hdr is
 * UB_PDS_NH_SOFTUB_EXT (15), and carries what UET has no field for: the UB
 * transaction-order tag (execution order NO/RO/SO, fence, completion order,
 * an order sequence number per initiator stream), the initiator incarnation
 * and the C-AQM congestion fields. Its own next_hdr says which SES header
 * follows (a UB_PDS_NH_* value 0..6). Layout: docs/wire-format.md section 6.
 *
 *   byte 0      version(4) | next_hdr(4)
 *   byte 1      hlen: total header length in 4-byte words (4 for version 0)
 *   byte 2      EO(2) | CO(1) | F(1) | I(1) | C(1) | reserved(2)
 *   byte 3      reserved (0)
 *   bytes 4-5   C-AQM hint, units of UB_EXT_HINT_UNIT_MBPS, 0 = no hint
 *   bytes 6-7   order stream
 *   bytes 8-11  order sequence number
 *   bytes 12-15 initiator incarnation
 *   bytes 16-   (versions 1..7 only) further fields, hlen * 4 - 16 bytes
 *
 * Versions 0..7 are compatible: a later one keeps bytes 0-15 as above and only
 * appends, so a receiver that knows version 0 reads bytes 0-15 and skips the
 * rest. Versions 8..15 are incompatible: a receiver that does not know one
 * rejects the packet (UB_EBADMSG).
 */
#ifndef UB_WIRE_EXT_H
#define UB_WIRE_EXT_H

#include <stdbool.h>
#include <stdint.h>

#include "wire/cursor.h"
#include "wire/pds.h"

#define UB_EXT_VERSION            0
#define UB_EXT_VERSION_COMPAT_MAX 7  /* 8..15: incompatible */
#define UB_EXT_SIZE               16 /* version 0 */
#define UB_EXT_HLEN_UNIT          4
#define UB_EXT_MAX_SIZE           (255 * UB_EXT_HLEN_UNIT)
#define UB_EXT_HINT_UNIT_MBPS     10 /* 1 hint unit = 10 Mbit/s; max 655.35 Gbit/s */

/* Execution order, UB ODR[1:0]. */
#define UB_EXT_EO_NO 0 /* no ordering (default) */
#define UB_EXT_EO_RO 1 /* relaxed order */
#define UB_EXT_EO_SO 2 /* strong order */
/* 3 reserved */

/* Byte 2 bits. */
#define UB_EXT_B2_EO_SHIFT 6
#define UB_EXT_B2_CO       0x20 /* ODR[2]: in-order completion */
#define UB_EXT_B2_F        0x10 /* fence */
#define UB_EXT_B2_I        0x08 /* C-AQM: increase request (set by the sender) */
#define UB_EXT_B2_C        0x04 /* C-AQM: congestion (set on the path, echoed back) */
#define UB_EXT_B2_RSVD     0x03

struct ub__ext {
    uint8_t version;    /* 0..7 */
    uint8_t next_hdr;   /* UB_PDS_NH_NONE .. UB_PDS_NH_RSP_DATA_SMALL */
    uint8_t exec_order; /* UB_EXT_EO_* */
    bool inorder_completion;
    bool fence;
    bool aqm_increase;   /* I */
    bool aqm_congestion; /* C */
    uint16_t aqm_hint;
    uint16_t stream;    /* initiator's order stream (e.g. its JFS) */
    uint32_t order_seq; /* per (incarnation, stream), for the target's order engine */
    uint32_t incarnation;
    /* Versions 1..7: the appended bytes this version does not understand. */
    const uint8_t *tail; /* points into the decoded buffer */
    uint16_t tail_len;   /* a multiple of 4 */
};

/* Encoded size of h (16 + tail_len). */
static inline size_t ub__ext_size(const struct ub__ext *h)
{
    return UB_EXT_SIZE + (size_t)h->tail_len;
}

/* Why h cannot be encoded (UB_EOVERFLOW, UB_EINVAL), 0 if it can. */
int ub__ext_invalid(const struct ub__ext *h);

/* The codec is inline: every packet passes through it once or twice, and its callers (PDS
 * on sending, the datagram parser) then keep the header in registers. */
static inline int ub__ext_encode(const struct ub__ext *h, struct ub__wcur *w)
{
    /* One test for all the checks; which one failed is asked only then. */
    uint32_t tl = h->tail_len;
    bool bad = (h->version > UB_EXT_VERSION_COMPAT_MAX) | (h->next_hdr > UB_PDS_NH_RSP_DATA_SMALL) |
               (h->exec_order > UB_EXT_EO_SO) | (tl > UB_EXT_MAX_SIZE - UB_EXT_SIZE) |
               ((tl % UB_EXT_HLEN_UNIT) != 0) |
               ((tl != 0) & ((h->tail == NULL) | (h->version == UB_EXT_VERSION)));
    if (bad)
        return ub__ext_invalid(h);
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

/* The next header an encoded extension at p names (p[0] must be there). */
static inline uint8_t ub__ext_next_hdr(const uint8_t *p)
{
    return (uint8_t)(p[0] & 0x0fu);
}

static inline int ub__ext_decode(struct ub__ext *h, struct ub__rcur *r)
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
    h->next_hdr = ub__ext_next_hdr(&b0);
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

#endif
