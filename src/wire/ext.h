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

int ub__ext_encode(const struct ub__ext *h, struct ub__wcur *w);
int ub__ext_decode(struct ub__ext *h, struct ub__rcur *r);

/* Encoded size of h (16 + tail_len). */
size_t ub__ext_size(const struct ub__ext *h);

#endif
