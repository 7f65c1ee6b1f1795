/*
 * UET 1.0 Packet Delivery Sublayer (PDS) headers. Internal.
 *
 * Every PDS header starts with the 16-bit prologue
 *     type(5) | next_hdr or ctl_type(4) | flags(7)
 * (big-endian, most significant bit first). The structs below hold host-order
 * values; docs/wire-format.md gives the byte diagrams.
 *
 * Conventions shared by every codec in src/wire/:
 *  - encode: writes the whole header or nothing. UB_ETRUNC if the writer has
 *    no room, UB_EOVERFLOW if a value does not fit its field, UB_EINVAL if
 *    the struct asks for something the format cannot say (wrong type for this
 *    codec, reserved value, contradictory fields).
 *  - decode: UB_ETRUNC if the input ends inside the header, UB_EBADMSG if a
 *    field is reserved, out of range or inconsistent. Reserved bits must be
 *    zero, so a decoded header re-encodes to exactly the bytes it came from.
 *    On error the output struct is unspecified and the cursor position too.
 */
#ifndef UB_WIRE_PDS_H
#define UB_WIRE_PDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "wire/cursor.h"

/* ---- prologue: packet types --------------------------------------------- */
#define UB_PDS_TYPE_RESERVED   0
#define UB_PDS_TYPE_TSS        1 /* not PDS: a TSS header starts here (see wire/tss.h) */
#define UB_PDS_TYPE_RUD_REQ    2
#define UB_PDS_TYPE_ROD_REQ    3
#define UB_PDS_TYPE_RUDI_REQ   4
#define UB_PDS_TYPE_RUDI_RESP  5
#define UB_PDS_TYPE_UUD_REQ    6
#define UB_PDS_TYPE_ACK        7
#define UB_PDS_TYPE_ACK_CC     8
#define UB_PDS_TYPE_ACK_CCX    9
#define UB_PDS_TYPE_NACK       10
#define UB_PDS_TYPE_CTRL       11
#define UB_PDS_TYPE_NACK_CCX   12
#define UB_PDS_TYPE_RUD_CC_REQ 13
#define UB_PDS_TYPE_ROD_CC_REQ 14
/* softub's choice (reserved in UET 1.0): a request or response carried by a lossless link
 * (shm) without a PDC: no PSN, no ACK; the link delivers once and in order. */
#define UB_PDS_TYPE_LINK 31
/* 15..31 reserved */

/* ---- prologue: next header (what follows the PDS header) ---------------- */
#define UB_PDS_NH_NONE           0
#define UB_PDS_NH_REQ_SMALL      1 /* SES small (optimized non-matching) request, 20 B */
#define UB_PDS_NH_REQ_MEDIUM     2 /* SES medium (small message) request, 32 B */
#define UB_PDS_NH_REQ_STD        3 /* SES standard request, 44 B */
#define UB_PDS_NH_RSP            4 /* SES response, 12 B */
#define UB_PDS_NH_RSP_DATA       5 /* SES response with data, 20 B */
#define UB_PDS_NH_RSP_DATA_SMALL 6 /* SES small response with data, 12 B */
/* 7..14 reserved by UET 1.0 */
#define UB_PDS_NH_SOFTUB_EXT 15 /* softub choice: the softub extension header follows */

/* ---- prologue flags, per packet family (values are the 7-bit wire field) -- */
/* RUD/ROD requests (incl. the _CC variants) */
#define UB_PDS_REQ_F_RETX 0x10 /* retransmission */
#define UB_PDS_REQ_F_AR   0x08 /* ACK requested */
#define UB_PDS_REQ_F_SYN  0x04 /* PDC establishment: dpdcid slot holds pdc_info|psn_offset */
#define UB_PDS_REQ_F_MASK 0x1c
/* RUDI request/response */
#define UB_PDS_RUDI_F_M    0x20 /* ECN-marked (responses only) */
#define UB_PDS_RUDI_F_RETX 0x10 /* retransmission */
#define UB_PDS_RUDI_F_MASK 0x30
/* ACK, ACK_CC, ACK_CCX */
#define UB_PDS_ACK_F_EPSN      0x40 /* expected-PSN word follows (plain ACK only; see doc) */
#define UB_PDS_ACK_F_M         0x20 /* acked packet was ECN-marked */
#define UB_PDS_ACK_F_RETX      0x10 /* acked packet was a retransmission */
#define UB_PDS_ACK_F_P         0x08 /* answers a probe: ack_psn_offset is the probe opaque */
#define UB_PDS_ACK_F_REQ_SHIFT 1
#define UB_PDS_ACK_F_REQ_MASK  0x06 /* 2-bit request, UB_PDS_ACK_REQ_* */
/* softub (UET reserved): the target answers requests that carry the SES tail bit K with an
 * ACK of their own, never merged into another, carrying their response when it is ready
 * (docs/wire-format.md 3.4); set only towards initiators that sent K */
#define UB_PDS_ACK_F_OWN     0x01
#define UB_PDS_ACK_F_MASK    0x7f
#define UB_PDS_ACK_REQ_NONE  0
#define UB_PDS_ACK_REQ_CLEAR 1
#define UB_PDS_ACK_REQ_CLOSE 2
/* 3 reserved */
/* NACK, NACK_CCX */
#define UB_PDS_NACK_F_M    0x20 /* NACKed packet was ECN-marked */
#define UB_PDS_NACK_F_RETX 0x10 /* NACKed packet was a retransmission */
#define UB_PDS_NACK_F_NT   0x08 /* NACK type: 0 RUD/ROD (psn), 1 RUDI (pkt_id, no PDC ids) */
#define UB_PDS_NACK_F_MASK 0x38
/* CTRL */
#define UB_PDS_CTRL_F_ISROD 0x20 /* the PDC is ROD (0: RUD) */
#define UB_PDS_CTRL_F_RETX  0x10
#define UB_PDS_CTRL_F_AR    0x08
#define UB_PDS_CTRL_F_SYN   0x04
#define UB_PDS_CTRL_F_MASK  0x3c

/* ---- CTRL types (in the next_hdr slot of a CTRL prologue) --------------- */
#define UB_PDS_CTRL_NOP         0
#define UB_PDS_CTRL_ACK_REQ     1
#define UB_PDS_CTRL_CLEAR       2
#define UB_PDS_CTRL_CLEAR_REQ   3
#define UB_PDS_CTRL_CLOSE       4
#define UB_PDS_CTRL_CLOSE_REQ   5
#define UB_PDS_CTRL_PROBE       6
#define UB_PDS_CTRL_CREDIT      7
#define UB_PDS_CTRL_CREDIT_REQ  8
#define UB_PDS_CTRL_NEGOTIATION 9
/* 10..15 reserved */

/* ---- congestion-control types in ACK_CC --------------------------------- */
#define UB_PDS_CC_NSCC 0
#define UB_PDS_CC_RCCC 1 /* receiver credit ("CREDIT") */
/* softub's own (UET 1.0 reserves 2..15): NSCC's state with rcvd_bytes replaced by the C-AQM
 * echo (docs/wire-format.md section 3.4). */
#define UB_PDS_CC_CAQM 15

/* ---- NACK codes --------------------------------------------------------- */
#define UB_PDS_NACK_TRIMMED         0x01
#define UB_PDS_NACK_TRIMMED_LASTHOP 0x02
#define UB_PDS_NACK_TRIMMED_ACK     0x03
#define UB_PDS_NACK_NO_PDC          0x04
#define UB_PDS_NACK_NO_CCC          0x05
#define UB_PDS_NACK_NO_BITMAP       0x06
#define UB_PDS_NACK_NO_PKT_BUF      0x07
#define UB_PDS_NACK_NO_GTD_DEL      0x08
#define UB_PDS_NACK_NO_SES_MSG      0x09
#define UB_PDS_NACK_NO_RESOURCE     0x0a
#define UB_PDS_NACK_PSN_OOR_WINDOW  0x0b
/* 0x0c reserved */
#define UB_PDS_NACK_ROD_OOO           0x0d
#define UB_PDS_NACK_INV_DPDCID        0x0e
#define UB_PDS_NACK_PDC_HDR_MISMATCH  0x0f
#define UB_PDS_NACK_CLOSING           0x10
#define UB_PDS_NACK_CLOSING_IN_ERR    0x11
#define UB_PDS_NACK_PKT_NOT_RCVD      0x12
#define UB_PDS_NACK_GTD_RESP_UNAVAIL  0x13
#define UB_PDS_NACK_ACK_WITH_DATA     0x14
#define UB_PDS_NACK_INVALID_SYN       0x15
#define UB_PDS_NACK_PDC_MODE_MISMATCH 0x16
#define UB_PDS_NACK_NEW_START_PSN     0x17
#define UB_PDS_NACK_RCVD_SES_PROCG    0x18
#define UB_PDS_NACK_UNEXP_EVENT       0x19
#define UB_PDS_NACK_RCVR_INFER_LOSS   0x1a
/* 0x1b..0xfc reserved */
#define UB_PDS_NACK_EXP_NORMAL 0xfd
#define UB_PDS_NACK_EXP_ERR    0xfe
#define UB_PDS_NACK_EXP_FATAL  0xff

/* ---- sizes (bytes, prologue included) ----------------------------------- */
#define UB_PDS_PROLOGUE_SIZE  2
#define UB_PDS_REQ_SIZE       12 /* RUD_REQ, ROD_REQ */
#define UB_PDS_REQ_CC_SIZE    16 /* RUD_CC_REQ, ROD_CC_REQ */
#define UB_PDS_RUDI_SIZE      8  /* RUDI_REQ, RUDI_RESP */
#define UB_PDS_UUD_SIZE       4
#define UB_PDS_LINK_SIZE      8
#define UB_PDS_ACK_SIZE       12
#define UB_PDS_ACK_EPSN_SIZE  16 /* ACK with the EPSN flag */
#define UB_PDS_ACK_CC_SIZE    32
#define UB_PDS_ACK_CCX_SIZE   40
#define UB_PDS_NACK_SIZE      16
#define UB_PDS_NACK_CCX_SIZE  32
#define UB_PDS_CTRL_SIZE      16
#define UB_PDS_MIN_SIZE       UB_PDS_UUD_SIZE
#define UB_PDS_MAX_SIZE       UB_PDS_ACK_CCX_SIZE
#define UB_PDS_CCX_STATE_SIZE 16

/* Where an ACK_CC's NSCC or CAQM service time sits (the CC state word's top 16 bits). */
#define UB_PDS_ACK_SERVICE_OFF 24

/* ---- field limits -------------------------------------------------------- */
#define UB_PDS_PSN_OFFSET_MAX 0x0fffu   /* 12-bit SYN psn_offset */
#define UB_PDS_CREDIT_MAX     0xffffffu /* 24-bit credits */
#define UB_PDS_RCVD_BYTES_MAX 0xffffffu
#define UB_PDS_CWND_PEND_MAX  0x7fu

/* The prologue alone. */
struct ub__pds_prologue {
    uint8_t type;     /* 5 bits */
    uint8_t next_hdr; /* 4 bits: next header, or the ctl_type of a CTRL packet */
    uint8_t flags;    /* 7 bits */
};

/* RUD_REQ, ROD_REQ, RUD_CC_REQ, ROD_CC_REQ. */
struct ub__pds_req {
    uint8_t type;
    uint8_t next_hdr;
    uint8_t flags;            /* UB_PDS_REQ_F_* */
    int16_t clear_psn_offset; /* clear_psn = psn + clear_psn_offset */
    uint32_t psn;
    uint16_t spdcid;
    uint16_t dpdcid;        /* without SYN; must be 0 with SYN */
    bool use_rsv_pdc;       /* with SYN: pdc_info bit "use reserved PDC" */
    uint16_t psn_offset;    /* with SYN: start_psn = psn - psn_offset (12 bits) */
    uint8_t ccc_id;         /* _CC types only */
    uint32_t credit_target; /* _CC types only, 24 bits */
};

/* RUDI_REQ, RUDI_RESP. */
struct ub__pds_rudi {
    uint8_t type;
    uint8_t next_hdr;
    uint8_t flags; /* UB_PDS_RUDI_F_* */
    uint32_t pkt_id;
};

/* UUD_REQ. */
struct ub__pds_uud {
    uint8_t next_hdr;
};

/* LINK: prologue | reserved(16) | dst_inc(32). */
#define UB_PDS_LINK_F_ROD  0x01 /* sent in ROD mode (else RUD) */
#define UB_PDS_LINK_F_MASK 0x01
struct ub__pds_link {
    uint8_t next_hdr;
    uint8_t flags;    /* UB_PDS_LINK_F_* */
    uint32_t dst_inc; /* the receiver's incarnation as the sender knows it; 0: not known */
};

/* NSCC view of the 64-bit ACK_CC congestion state. */
struct ub__pds_nscc_state {
    uint16_t service_time;
    bool restore_cwnd;     /* "rc" */
    uint8_t rcv_cwnd_pend; /* 7 bits */
    uint32_t rcvd_bytes;   /* 24 bits */
    uint16_t ooo_count;
};

/* RCCC (credit) view of the 64-bit ACK_CC congestion state. */
struct ub__pds_rccc_state {
    uint32_t credit; /* 24 bits */
    uint16_t ooo_count;
};

/*
 * C-AQM view of the 64-bit ACK_CC congestion state (cc_type UB_PDS_CC_CAQM, softub's): NSCC's
 * layout with rcvd_bytes replaced by the echo of the requests' C-AQM fields.
 *   | service_time (16) |R| rcv_cwnd_pend (7) |C|I| rsvd (6) | hint (16) | ooo_count (16) |
 */
struct ub__pds_caqm_state {
    uint16_t service_time;
    bool restore_cwnd;
    uint8_t rcv_cwnd_pend; /* 7 bits */
    bool c;                /* a request since the last ACK arrived with C */
    bool i;                /* every request since the last ACK kept its I (increase granted) */
    uint16_t hint;         /* C: the lowest hint of the C-marked requests; else the latest */
    uint16_t ooo_count;
};

/* ACK, ACK_CC, ACK_CCX. */
struct ub__pds_ack {
    uint8_t type;
    uint8_t next_hdr;
    uint8_t flags;          /* UB_PDS_ACK_F_M/RETX/P/EPSN */
    uint8_t req;            /* UB_PDS_ACK_REQ_*, the 2-bit field inside flags */
    int16_t ack_psn_offset; /* ack_psn = cack_psn + offset; with P: the probe opaque */
    uint32_t cack_psn;
    uint16_t spdcid;
    uint16_t dpdcid;
    uint32_t expected_psn; /* with EPSN only */
    /* ACK_CC / ACK_CCX extension */
    uint8_t cc_type; /* ACK_CC: UB_PDS_CC_*; ACK_CCX: ccx_type (any 4-bit value) */
    uint8_t mpr;     /* MP_RANGE */
    int16_t sack_psn_offset;
    uint64_t sack_bitmap;
    union {
        struct ub__pds_nscc_state nscc; /* ACK_CC, cc_type NSCC */
        struct ub__pds_rccc_state rccc; /* ACK_CC, cc_type RCCC */
        struct ub__pds_caqm_state caqm; /* ACK_CC, cc_type CAQM (softub) */
    } cc;
    uint8_t ccx_state[UB_PDS_CCX_STATE_SIZE]; /* ACK_CCX: opaque */
};

/* NACK, NACK_CCX. */
struct ub__pds_nack {
    uint8_t type;
    uint8_t next_hdr;
    uint8_t flags; /* UB_PDS_NACK_F_* */
    uint8_t code;  /* UB_PDS_NACK_* */
    uint8_t vendor_code;
    uint32_t psn; /* NACKed PSN, or the RUDI pkt_id with NT */
    uint16_t spdcid;
    uint16_t dpdcid;
    uint32_t payload; /* code specific, e.g. max received PSN + 1 */
    /* NACK_CCX: nccx_type(4) | opaque state(124): kept as 16 raw bytes */
    uint8_t ccx_state[UB_PDS_CCX_STATE_SIZE];
};

/* CTRL. */
struct ub__pds_ctrl {
    uint8_t ctl_type;      /* UB_PDS_CTRL_* */
    uint8_t flags;         /* UB_PDS_CTRL_F_* */
    uint16_t probe_opaque; /* PROBE only, else 0 */
    uint32_t psn;
    uint16_t spdcid;
    uint16_t dpdcid;     /* without SYN */
    bool use_rsv_pdc;    /* with SYN */
    uint16_t psn_offset; /* with SYN */
    uint32_t payload;    /* ctl-type specific */
};

/* Any PDS header, tagged by its prologue type. */
struct ub__pds_hdr {
    uint8_t type; /* UB_PDS_TYPE_*; selects the union member */
    union {
        struct ub__pds_req req;   /* RUD/ROD (+CC) */
        struct ub__pds_rudi rudi; /* RUDI_REQ, RUDI_RESP */
        struct ub__pds_uud uud;
        struct ub__pds_link link;
        struct ub__pds_ack ack;   /* ACK, ACK_CC, ACK_CCX */
        struct ub__pds_nack nack; /* NACK, NACK_CCX */
        struct ub__pds_ctrl ctrl;
    } u;
};

int ub__pds_prologue_encode(const struct ub__pds_prologue *p, struct ub__wcur *w);
int ub__pds_prologue_decode(struct ub__pds_prologue *p, struct ub__rcur *r);

/* The first 12 bytes of requests and ACKs: prologue, a 16-bit field, a PSN, two PDC ids, each
 * field a byte swap and a store (ub__st64: gcc assembles byte-wise stores a byte at a time). */
static inline void ub__pds_put12(uint8_t *p, uint16_t prologue, uint16_t f16, uint32_t psn,
                                 uint16_t id1, uint16_t id2)
{
    ub__st64(p, (uint64_t)prologue << 48 | (uint64_t)f16 << 32 | psn);
    ub__st32(p + 8, (uint32_t)id1 << 16 | id2);
}

/*
 * The UB_PDS_REQ_SIZE bytes of a RUD/ROD request (not CC) at p, from fields the caller knows to
 * be valid (ub__pds_req_encode checks them, then writes through this): the sender's per-packet
 * path skips the struct and the checks. slot: dpdcid, or with SYN the psn_offset (no RSV PDC).
 */
static inline void ub__pds_req_put(uint8_t *p, uint8_t type, uint8_t next_hdr, uint8_t flags,
                                   int16_t clear_psn_offset, uint32_t psn, uint16_t spdcid,
                                   uint16_t slot)
{
    ub__pds_put12(p, (uint16_t)(((unsigned)type << 11) | ((unsigned)next_hdr << 7) | flags),
                  (uint16_t)clear_psn_offset, psn, spdcid, slot);
}

int ub__pds_req_encode(const struct ub__pds_req *h, struct ub__wcur *w);
int ub__pds_req_decode(struct ub__pds_req *h, struct ub__rcur *r);
int ub__pds_rudi_encode(const struct ub__pds_rudi *h, struct ub__wcur *w);
int ub__pds_rudi_decode(struct ub__pds_rudi *h, struct ub__rcur *r);
int ub__pds_uud_encode(const struct ub__pds_uud *h, struct ub__wcur *w);
int ub__pds_uud_decode(struct ub__pds_uud *h, struct ub__rcur *r);
int ub__pds_link_encode(const struct ub__pds_link *h, struct ub__wcur *w);
int ub__pds_link_decode(struct ub__pds_link *h, struct ub__rcur *r);
/* The UB_PDS_LINK_SIZE bytes of a LINK header at p, from fields valid by construction. */
static inline void ub__pds_link_put(uint8_t *p, uint8_t next_hdr, uint8_t flags, uint32_t dst_inc)
{
    ub__st64(p, (uint64_t)(((unsigned)UB_PDS_TYPE_LINK << 11) | ((unsigned)next_hdr << 7) | flags)
                        << 48 |
                    dst_inc);
}
int ub__pds_ack_encode(const struct ub__pds_ack *h, struct ub__wcur *w);
/* The 64-bit CC state word of an ACK_CC (0 for the other types); UB_EOVERFLOW / UB_EINVAL as
 * ub__pds_ack_encode. Inline for NSCC, the target's usual ACK; the others in pds.c. */
int ub__pds_ack_state_other(const struct ub__pds_ack *h, uint64_t *state);
static inline int ub__pds_nscc_pack(const struct ub__pds_nscc_state *s, uint64_t *out);
static inline int ub__pds_ack_state(const struct ub__pds_ack *h, uint64_t *state)
{
    *state = 0;
    if (h->type != UB_PDS_TYPE_ACK_CC)
        return 0;
    if (h->cc_type == UB_PDS_CC_NSCC)
        return ub__pds_nscc_pack(&h->cc.nscc, state);
    return ub__pds_ack_state_other(h, state);
}
/* Bytes of an ACK, ACK_CC or ACK_CCX header with these flags. */
static inline size_t ub__pds_ack_size(uint8_t type, uint8_t flags)
{
    if (type == UB_PDS_TYPE_ACK)
        return (flags & UB_PDS_ACK_F_EPSN) ? UB_PDS_ACK_EPSN_SIZE : UB_PDS_ACK_SIZE;
    return type == UB_PDS_TYPE_ACK_CC ? UB_PDS_ACK_CC_SIZE : UB_PDS_ACK_CCX_SIZE;
}
/*
 * The ub__pds_ack_size bytes of h at p, state from ub__pds_ack_state, without the checks of
 * ub__pds_ack_encode (which writes through this): for a sender whose fields are valid by
 * construction, on the per-ACK path.
 */
static inline void ub__pds_ack_put(uint8_t *p, const struct ub__pds_ack *h, uint64_t state)
{
    unsigned flags = h->flags | ((unsigned)h->req << UB_PDS_ACK_F_REQ_SHIFT);
    ub__pds_put12(p, (uint16_t)(((unsigned)h->type << 11) | ((unsigned)h->next_hdr << 7) | flags),
                  (uint16_t)h->ack_psn_offset, h->cack_psn, h->spdcid, h->dpdcid);
    if (h->flags & UB_PDS_ACK_F_EPSN)
        ub__st32(p + 12, h->expected_psn);
    if (h->type != UB_PDS_TYPE_ACK) {
        /* cc_type, cc_flags(4) reserved, mpr, sack_psn_offset */
        ub__st32(p + 12, (uint32_t)(h->cc_type & 0x0fu) << 28 | (uint32_t)h->mpr << 16 |
                             (uint16_t)h->sack_psn_offset);
        ub__st64(p + 16, h->sack_bitmap);
        if (h->type == UB_PDS_TYPE_ACK_CC)
            ub__st64(p + 24, state);
        else
            memcpy(p + 24, h->ccx_state, sizeof(h->ccx_state));
    }
}
int ub__pds_ack_decode(struct ub__pds_ack *h, struct ub__rcur *r);
int ub__pds_nack_encode(const struct ub__pds_nack *h, struct ub__wcur *w);
int ub__pds_nack_decode(struct ub__pds_nack *h, struct ub__rcur *r);
int ub__pds_ctrl_encode(const struct ub__pds_ctrl *h, struct ub__wcur *w);
int ub__pds_ctrl_decode(struct ub__pds_ctrl *h, struct ub__rcur *r);

/* Peeks the prologue type and decodes the matching variant. */
int ub__pds_decode(struct ub__pds_hdr *h, struct ub__rcur *r);
int ub__pds_encode(const struct ub__pds_hdr *h, struct ub__wcur *w);

/* The next header of a decoded PDS header; UB_PDS_NH_NONE for CTRL. */
uint8_t ub__pds_next_hdr(const struct ub__pds_hdr *h);

/* The same read from the encoded header hdr that decoded as type (every decoder keeps the
 * prologue's 4 bits): no dispatch on the type, for the per-datagram path. */
static inline uint8_t ub__pds_next_hdr_at(const uint8_t *hdr, uint8_t type)
{
    return (uint8_t)(type == UB_PDS_TYPE_CTRL ? UB_PDS_NH_NONE
                                              : (hdr[0] << 1 | hdr[1] >> 7) & 0x0f);
}

/* Encoded size of a header of this type (with these flags), 0 for a reserved type. */
size_t ub__pds_hdr_size(uint8_t type, uint8_t flags);

/* Whether next_hdr is a value UET 1.0 or softub defines (0..6, 15). */
bool ub__pds_nh_valid(uint8_t next_hdr);

/* Whether code is a NACK code UET 1.0 defines. */
bool ub__pds_nack_code_valid(uint8_t code);

/* Pack / unpack the 64-bit ACK_CC congestion state. */
static inline int ub__pds_nscc_pack(const struct ub__pds_nscc_state *s, uint64_t *out)
{
    if (s->rcv_cwnd_pend > UB_PDS_CWND_PEND_MAX || s->rcvd_bytes > UB_PDS_RCVD_BYTES_MAX)
        return UB_EOVERFLOW;
    *out = ((uint64_t)s->service_time << 48) | ((uint64_t)(s->restore_cwnd ? 1u : 0u) << 47) |
           ((uint64_t)s->rcv_cwnd_pend << 40) | ((uint64_t)s->rcvd_bytes << 16) | s->ooo_count;
    return 0;
}
void ub__pds_nscc_unpack(struct ub__pds_nscc_state *s, uint64_t v);
int ub__pds_rccc_pack(const struct ub__pds_rccc_state *s, uint64_t *out);
int ub__pds_rccc_unpack(struct ub__pds_rccc_state *s, uint64_t v);
int ub__pds_caqm_pack(const struct ub__pds_caqm_state *s, uint64_t *out);
int ub__pds_caqm_unpack(struct ub__pds_caqm_state *s, uint64_t v);

#endif
