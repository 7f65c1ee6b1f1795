/*
 * UET 1.0 Semantic Sublayer (SES) headers. Internal.
 *
 * The PDS next_hdr (or the softub extension's next_hdr) names the SES header
 * that follows: small / medium / standard request, response, response with
 * data, small response with data. Requests whose opcode needs it are followed
 * by an SES extension header: atomic (4 B), compare-and-swap atomic (36 B) or
 * rendezvous (24 B). Conventions as in wire/pds.h; layouts in
 * docs/wire-format.md section 4.
 */
#ifndef UB_WIRE_SES_H
#define UB_WIRE_SES_H

#include <stdbool.h>
#include <stdint.h>

#include "wire/cursor.h"

/* ---- request opcodes (6 bits) -------------------------------------------- */
#define UB_SES_OP_NO_OP              0x00
#define UB_SES_OP_WRITE              0x01
#define UB_SES_OP_READ               0x02
#define UB_SES_OP_ATOMIC             0x03
#define UB_SES_OP_FETCHING_ATOMIC    0x04
#define UB_SES_OP_SEND               0x05
#define UB_SES_OP_RNDV_SEND          0x06
#define UB_SES_OP_DGRAM_SEND         0x07
#define UB_SES_OP_DEFER_SEND         0x08
#define UB_SES_OP_TAGGED_SEND        0x09
#define UB_SES_OP_RNDV_TSEND         0x0a
#define UB_SES_OP_DEFER_TSEND        0x0b
#define UB_SES_OP_DEFER_RTR          0x0c /* deferrable send: ready to restart */
#define UB_SES_OP_TSEND_ATOMIC       0x0d
#define UB_SES_OP_TSEND_FETCH_ATOMIC 0x0e
#define UB_SES_OP_MSG_ERR            0x0f
#define UB_SES_OP_MAX                UB_SES_OP_MSG_ERR /* 0x10..0x3f: reserved / vendor, rejected */

/* ---- request flags (low 6 bits of byte 1; the top 2 bits are the version) - */
#define UB_SES_F_DC    0x20 /* delivery complete */
#define UB_SES_F_IE    0x10 /* initiator error */
#define UB_SES_F_REL   0x08 /* relative addressing */
#define UB_SES_F_HD    0x04 /* header data present */
#define UB_SES_F_EOM   0x02 /* end of message */
#define UB_SES_F_SOM   0x01 /* start of message */
#define UB_SES_F_MASK  0x3f
#define UB_SES_VERSION 0 /* the only version UET 1.0 defines */

/* ---- response opcodes ---------------------------------------------------- */
#define UB_SES_RSP_DEFAULT   0x00
#define UB_SES_RSP_RESPONSE  0x01
#define UB_SES_RSP_WITH_DATA 0x02
#define UB_SES_RSP_NONE      0x03

/* ---- response list (2 bits) ---------------------------------------------- */
#define UB_SES_LIST_EXPECTED 0
#define UB_SES_LIST_OVERFLOW 1

/* ---- return codes (6 bits) ----------------------------------------------- */
#define UB_SES_RC_NULL                 0x00
#define UB_SES_RC_OK                   0x01
#define UB_SES_RC_BAD_GENERATION       0x02
#define UB_SES_RC_DISABLED             0x03
#define UB_SES_RC_DISABLED_GEN         0x04
#define UB_SES_RC_NO_MATCH             0x05
#define UB_SES_RC_UNSUPPORTED_OP       0x06
#define UB_SES_RC_UNSUPPORTED_SIZE     0x07
#define UB_SES_RC_AT_INVALID           0x08
#define UB_SES_RC_AT_PERM              0x09
#define UB_SES_RC_AT_ATS_ERROR         0x0a
#define UB_SES_RC_AT_NO_TRANS          0x0b
#define UB_SES_RC_AT_OUT_OF_RANGE      0x0c
#define UB_SES_RC_HOST_POISONED        0x0d
#define UB_SES_RC_HOST_UNSUCCESS_CMPL  0x0e
#define UB_SES_RC_AMO_UNSUPPORTED_OP   0x0f
#define UB_SES_RC_AMO_UNSUPPORTED_DT   0x10
#define UB_SES_RC_AMO_UNSUPPORTED_SIZE 0x11
#define UB_SES_RC_AMO_UNALIGNED        0x12
#define UB_SES_RC_AMO_FP_NAN           0x13
#define UB_SES_RC_AMO_FP_UNDERFLOW     0x14
#define UB_SES_RC_AMO_FP_OVERFLOW      0x15
#define UB_SES_RC_AMO_FP_INEXACT       0x16
#define UB_SES_RC_PERM_VIOLATION       0x17
#define UB_SES_RC_OP_VIOLATION         0x18
#define UB_SES_RC_BAD_INDEX            0x19
#define UB_SES_RC_BAD_PID              0x1a
#define UB_SES_RC_BAD_JOB_ID           0x1b
#define UB_SES_RC_BAD_MKEY             0x1c
#define UB_SES_RC_BAD_ADDR             0x1d
#define UB_SES_RC_CANCELLED            0x1e
#define UB_SES_RC_UNDELIVERABLE        0x1f
#define UB_SES_RC_UNCOR                0x20
#define UB_SES_RC_UNCOR_TRNSNT         0x21
#define UB_SES_RC_TOO_LONG             0x22
#define UB_SES_RC_INITIATOR_ERR        0x23
#define UB_SES_RC_DROPPED              0x24
#define UB_SES_RC_VENDOR_FIRST         0x30
#define UB_SES_RC_VENDOR_LAST          0x37
#define UB_SES_RC_EXTENDED             0x3e

/* ---- atomic extension ---------------------------------------------------- */
#define UB_SES_AMO_MIN      0x00
#define UB_SES_AMO_MAX      0x01
#define UB_SES_AMO_SUM      0x02
#define UB_SES_AMO_DIFF     0x03
#define UB_SES_AMO_PROD     0x04
#define UB_SES_AMO_LOR      0x05
#define UB_SES_AMO_LAND     0x06
#define UB_SES_AMO_BOR      0x07
#define UB_SES_AMO_BAND     0x08
#define UB_SES_AMO_LXOR     0x09
#define UB_SES_AMO_BXOR     0x0a
#define UB_SES_AMO_READ     0x0b
#define UB_SES_AMO_WRITE    0x0c
#define UB_SES_AMO_CSWAP    0x0d
#define UB_SES_AMO_CSWAP_NE 0x0e
#define UB_SES_AMO_CSWAP_LE 0x0f
#define UB_SES_AMO_CSWAP_LT 0x10
#define UB_SES_AMO_CSWAP_GE 0x11
#define UB_SES_AMO_CSWAP_GT 0x12
#define UB_SES_AMO_MSWAP    0x13
#define UB_SES_AMO_OP_MAX   UB_SES_AMO_MSWAP

#define UB_SES_DT_INT8                0x00
#define UB_SES_DT_UINT8               0x01
#define UB_SES_DT_INT16               0x02
#define UB_SES_DT_UINT16              0x03
#define UB_SES_DT_INT32               0x04
#define UB_SES_DT_UINT32              0x05
#define UB_SES_DT_INT64               0x06
#define UB_SES_DT_UINT64              0x07
#define UB_SES_DT_INT128              0x08
#define UB_SES_DT_UINT128             0x09
#define UB_SES_DT_FLOAT               0x0a
#define UB_SES_DT_DOUBLE              0x0b
#define UB_SES_DT_FLOAT_COMPLEX       0x0c
#define UB_SES_DT_DOUBLE_COMPLEX      0x0d
#define UB_SES_DT_LONG_DOUBLE         0x0e
#define UB_SES_DT_LONG_DOUBLE_COMPLEX 0x0f
#define UB_SES_DT_BF16                0x10
#define UB_SES_DT_FP16                0x11
#define UB_SES_DT_MAX                 UB_SES_DT_FP16

#define UB_SES_AMO_CTRL_CACHEABLE    0x01
#define UB_SES_AMO_CTRL_CPU_COHERENT 0x02
#define UB_SES_AMO_CTRL_MASK         0x03

/* ---- sizes --------------------------------------------------------------- */
#define UB_SES_STD_SIZE            44
#define UB_SES_MEDIUM_SIZE         32
#define UB_SES_SMALL_SIZE          20
#define UB_SES_RSP_SIZE            12
#define UB_SES_RSP_DATA_SIZE       20
#define UB_SES_RSP_DATA_SMALL_SIZE 12
#define UB_SES_ATOMIC_SIZE         4
#define UB_SES_CSWAP_SIZE          36
#define UB_SES_CSWAP_OPERAND_SIZE  16
#define UB_SES_RNDV_SIZE           24
#define UB_SES_MAX_SIZE            (UB_SES_STD_SIZE + UB_SES_CSWAP_SIZE)

/* ---- field limits -------------------------------------------------------- */
#define UB_SES_JOB_ID_MAX 0xffffffu
#define UB_SES_PID_MAX    0x0fffu
#define UB_SES_RI_MAX     0x0fffu
#define UB_SES_LEN14_MAX  0x3fffu /* payload_len, small/medium request_length */

/* Standard request (PDS next_hdr REQ_STD), 44 B. */
struct ub__ses_std {
    uint8_t opcode; /* UB_SES_OP_* */
    uint8_t flags;  /* UB_SES_F_* */
    uint16_t msg_id;
    uint8_t ri_generation;
    uint32_t job_id;         /* 24 bits */
    uint16_t pid_on_fep;     /* 12 bits */
    uint16_t resource_index; /* 12 bits */
    uint64_t buffer_offset;  /* DEFER_SEND/DEFER_TSEND: restart token */
    uint32_t initiator;
    uint64_t mem_key;        /* memory key or match bits; DEFER_RTR: restart token */
    uint64_t header_data;    /* SOM with HD only */
    uint16_t payload_len;    /* without SOM only, 14 bits */
    uint32_t message_offset; /* without SOM only */
    uint32_t request_length;
};

/* The resource a standard request names (a JFR, segment or JFS): pid_on_fep and index. */
static inline uint32_t ub__ses_std_key(const struct ub__ses_std *q)
{
    return ((uint32_t)q->pid_on_fep << 12) | q->resource_index;
}

/* Small (optimized non-matching) request (REQ_SMALL), 20 B, single packet. */
struct ub__ses_small {
    uint8_t opcode;
    uint8_t flags;           /* SOM and EOM set, HD clear */
    uint16_t request_length; /* 14 bits */
    uint8_t ri_generation;
    uint32_t job_id;
    uint16_t pid_on_fep;
    uint16_t resource_index;
    uint64_t buffer_offset;
};

/* Medium (small message) request (REQ_MEDIUM), 32 B, single packet. */
struct ub__ses_medium {
    uint8_t opcode;
    uint8_t flags;           /* SOM and EOM set */
    uint16_t request_length; /* 14 bits */
    uint8_t ri_generation;
    uint32_t job_id;
    uint16_t pid_on_fep;
    uint16_t resource_index;
    uint64_t buffer_offset; /* without HD */
    uint64_t header_data;   /* with HD (same slot) */
    uint32_t initiator;
    uint64_t mem_key; /* memory key or match bits */
};

/* Response (RSP), 12 B. */
struct ub__ses_rsp {
    uint8_t list;   /* UB_SES_LIST_* */
    uint8_t opcode; /* DEFAULT, RESPONSE or NONE */
    uint8_t rc;     /* UB_SES_RC_* */
    uint16_t msg_id;
    uint8_t ri_generation;
    uint32_t job_id;
    uint32_t modified_length;
};

/* Response with data (RSP_DATA), 20 B; opcode is always RESPONSE_W_DATA. */
struct ub__ses_rsp_data {
    uint8_t list;
    uint8_t rc;
    uint16_t msg_id;
    uint32_t job_id;
    uint16_t read_req_msg_id;
    uint16_t payload_len; /* 14 bits */
    uint32_t modified_length;
    uint32_t message_offset;
};

/* Small response with data (RSP_DATA_SMALL), 12 B; opcode RESPONSE_W_DATA. */
struct ub__ses_rsp_data_small {
    uint8_t list;
    uint8_t rc;
    uint16_t payload_len; /* 14 bits */
    uint32_t job_id;
    uint32_t orig_req_psn;
};

/* Atomic extension (4 B), or compare-and-swap extension (36 B) for CSWAP*. */
struct ub__ses_atomic {
    uint8_t opcode;                             /* UB_SES_AMO_* */
    uint8_t datatype;                           /* UB_SES_DT_* */
    uint8_t ctrl;                               /* UB_SES_AMO_CTRL_* */
    uint8_t compare[UB_SES_CSWAP_OPERAND_SIZE]; /* CSWAP* only */
    uint8_t swap[UB_SES_CSWAP_OPERAND_SIZE];    /* CSWAP* only */
};

/* Rendezvous extension (24 B). */
struct ub__ses_rndv {
    uint32_t eager_length;
    uint8_t ri_generation;
    uint16_t pid_on_fep;     /* 12 bits */
    uint16_t resource_index; /* 12 bits */
    uint64_t read_offset;
    uint64_t read_mem_key; /* read memory key / match bits */
};

#define UB_SES_EXT_NONE   0
#define UB_SES_EXT_ATOMIC 1 /* struct ub__ses_atomic (4 or 36 B) */
#define UB_SES_EXT_RNDV   2 /* struct ub__ses_rndv */

/* Any SES header with its extension, tagged by the next-header value. */
struct ub__ses {
    uint8_t kind; /* UB_PDS_NH_REQ_SMALL .. UB_PDS_NH_RSP_DATA_SMALL */
    union {
        struct ub__ses_std std;
        struct ub__ses_small small;
        struct ub__ses_medium medium;
        struct ub__ses_rsp rsp;
        struct ub__ses_rsp_data rsp_data;
        struct ub__ses_rsp_data_small rsp_data_small;
    } u;
    uint8_t ext; /* UB_SES_EXT_*, implied by kind and opcode (set by decode, checked by encode) */
    struct ub__ses_atomic atomic;
    struct ub__ses_rndv rndv;
};

int ub__ses_std_encode(const struct ub__ses_std *h, struct ub__wcur *w);
int ub__ses_std_decode(struct ub__ses_std *h, struct ub__rcur *r);
int ub__ses_small_encode(const struct ub__ses_small *h, struct ub__wcur *w);
int ub__ses_small_decode(struct ub__ses_small *h, struct ub__rcur *r);
int ub__ses_medium_encode(const struct ub__ses_medium *h, struct ub__wcur *w);
int ub__ses_medium_decode(struct ub__ses_medium *h, struct ub__rcur *r);
int ub__ses_rsp_encode(const struct ub__ses_rsp *h, struct ub__wcur *w);
int ub__ses_rsp_decode(struct ub__ses_rsp *h, struct ub__rcur *r);
int ub__ses_rsp_data_encode(const struct ub__ses_rsp_data *h, struct ub__wcur *w);
int ub__ses_rsp_data_decode(struct ub__ses_rsp_data *h, struct ub__rcur *r);
int ub__ses_rsp_data_small_encode(const struct ub__ses_rsp_data_small *h, struct ub__wcur *w);
int ub__ses_rsp_data_small_decode(struct ub__ses_rsp_data_small *h, struct ub__rcur *r);
int ub__ses_atomic_encode(const struct ub__ses_atomic *h, struct ub__wcur *w);
int ub__ses_atomic_decode(struct ub__ses_atomic *h, struct ub__rcur *r);
int ub__ses_rndv_encode(const struct ub__ses_rndv *h, struct ub__wcur *w);
int ub__ses_rndv_decode(struct ub__ses_rndv *h, struct ub__rcur *r);

/* Decodes the SES header named by kind (a UB_PDS_NH_* value) and its extension. */
int ub__ses_decode(struct ub__ses *s, uint8_t kind, struct ub__rcur *r);
/* Encodes s->kind's header and the extension its opcode needs (s->ext must agree). */
int ub__ses_encode(const struct ub__ses *s, struct ub__wcur *w);
/* Encoded size of s, or 0 if s->kind is not an SES header. */
size_t ub__ses_size(const struct ub__ses *s);

/* The extension header a request of this kind and opcode carries (UB_SES_EXT_*). */
uint8_t ub__ses_ext_for(uint8_t kind, uint8_t opcode);
/* Whether an atomic opcode uses the 36-byte compare-and-swap extension. */
bool ub__ses_amo_is_cswap(uint8_t amo_opcode);
/* Whether rc is a return code UET 1.0 defines. */
bool ub__ses_rc_valid(uint8_t rc);

#endif
