/* UET 1.0 SES header codecs. Layouts: docs/wire-format.md section 4. */
#include "wire/ses.h"

#include <stddef.h>
#include <string.h>

#include "wire/pds.h"

/* ---- the 12-byte prefix shared by standard, medium and small requests ---- */

struct req_common {
    uint8_t opcode;
    uint8_t flags;
    uint16_t slot; /* msg_id (standard) or rsvd(2)|request_length(14) (small, medium) */
    uint8_t ri_generation;
    uint32_t job_id;
    uint16_t pid_on_fep;
    uint16_t resource_index;
};

static int common_check(const struct req_common *c)
{
    if (c->opcode > 0x3f || c->flags > UB_SES_F_MASK || c->job_id > UB_SES_JOB_ID_MAX ||
        c->pid_on_fep > UB_SES_PID_MAX || c->resource_index > UB_SES_RI_MAX)
        return UB_EOVERFLOW;
    if (c->opcode > UB_SES_OP_MAX)
        return UB_EINVAL;
    return 0;
}

static void common_put(uint8_t *p, const struct req_common *c)
{
    p[0] = c->opcode; /* rsvd(2) | opcode(6) */
    p[1] = c->flags;  /* version(2) = 0 | flags(6) */
    ub__st16(p + 2, c->slot);
    p[4] = c->ri_generation;
    ub__st24(p + 5, c->job_id);
    ub__st16(p + 8, c->pid_on_fep);      /* rsvd(4) | pid(12) */
    ub__st16(p + 10, c->resource_index); /* rsvd(4) | ri(12) */
}

/* Reads the prefix; returns nonzero if a reserved bit is set or a value is reserved. */
static bool common_get(const uint8_t *p, struct req_common *c)
{
    uint8_t b0 = p[0];
    uint8_t b1 = p[1];
    c->slot = ub__ld16(p + 2);
    c->ri_generation = p[4];
    c->job_id = ub__ld24(p + 5);
    c->pid_on_fep = ub__ld16(p + 8);
    c->resource_index = ub__ld16(p + 10);
    c->opcode = (uint8_t)(b0 & 0x3fu);
    c->flags = (uint8_t)(b1 & UB_SES_F_MASK);
    return (b0 & 0xc0u) || (b1 >> 6) != UB_SES_VERSION || c->opcode > UB_SES_OP_MAX ||
           c->pid_on_fep > UB_SES_PID_MAX || c->resource_index > UB_SES_RI_MAX;
}

/* ---- standard request ----------------------------------------------------- */

int ub__ses_std_encode(const struct ub__ses_std *h, struct ub__wcur *w)
{
    struct req_common c = {h->opcode, h->flags,      h->msg_id,        h->ri_generation,
                           h->job_id, h->pid_on_fep, h->resource_index};
    int rc = common_check(&c);
    if (rc)
        return rc;
    bool som = (h->flags & UB_SES_F_SOM) != 0;
    if (!som) {
        if (h->payload_len > UB_SES_LEN14_MAX)
            return UB_EOVERFLOW;
        if ((uint64_t)h->message_offset + h->payload_len > h->request_length)
            return UB_EINVAL;
    }
    uint8_t *p = ub__wcur_take(w, UB_SES_STD_SIZE);
    if (!p)
        return UB_ETRUNC;
    common_put(p, &c);
    ub__st64(p + 12, h->buffer_offset);
    ub__st32(p + 20, h->initiator);
    ub__st64(p + 24, h->mem_key);
    if (som) {
        ub__st64(p + 32, (h->flags & UB_SES_F_HD) ? h->header_data : 0);
    } else {
        ub__st32(p + 32, h->payload_len); /* rsvd(18) | payload_len(14) */
        ub__st32(p + 36, h->message_offset);
    }
    ub__st32(p + 40, h->request_length);
    return 0;
}

/*
 * The standard request at p (UB_SES_STD_SIZE bytes) into h, every field written (the
 * decoders' rule: what the header does not carry reads as zero). Reserved bits are tested
 * on the raw bytes: the top two of bytes 0 and 1 (rsvd, version 0) and the top four of
 * the 12-bit pid_on_fep and resource_index.
 */
static int std_decode_at(struct ub__ses_std *h, const uint8_t *p)
{
    uint8_t b0 = p[0], b1 = p[1];
    h->opcode = (uint8_t)(b0 & 0x3fu);
    h->flags = (uint8_t)(b1 & UB_SES_F_MASK);
    h->msg_id = ub__ld16(p + 2);
    h->ri_generation = p[4];
    h->job_id = ub__ld24(p + 5);
    h->pid_on_fep = ub__ld16(p + 8);
    h->resource_index = ub__ld16(p + 10);
    h->buffer_offset = ub__ld64(p + 12);
    h->initiator = ub__ld32(p + 20);
    h->mem_key = ub__ld64(p + 24);
    uint64_t hd = ub__ld64(p + 32);
    h->request_length = ub__ld32(p + 40);
    h->header_data = 0;
    h->payload_len = 0;
    h->message_offset = 0;
    _Static_assert(UB_SES_VERSION == 0 && UB_SES_PID_MAX == 0x0fffu && UB_SES_RI_MAX == 0x0fffu,
                   "the reserved-bit test below");
    if (((b0 | b1) & 0xc0u) || ((p[8] | p[10]) & 0xf0u) || h->opcode > UB_SES_OP_MAX)
        return UB_EBADMSG;
    if (h->flags & UB_SES_F_SOM) {
        if (!(h->flags & UB_SES_F_HD) && hd)
            return UB_EBADMSG; /* header data without HD */
        h->header_data = hd;
        return 0;
    }
    if ((hd >> 32) > UB_SES_LEN14_MAX)
        return UB_EBADMSG; /* reserved bits above payload_len */
    h->payload_len = (uint16_t)(hd >> 32);
    h->message_offset = (uint32_t)hd;
    if ((uint64_t)h->message_offset + h->payload_len > h->request_length)
        return UB_EBADMSG;
    return 0;
}

int ub__ses_std_decode(struct ub__ses_std *h, struct ub__rcur *r)
{
    const uint8_t *p = ub__rcur_take(r, UB_SES_STD_SIZE);
    if (!p)
        return UB_ETRUNC;
    return std_decode_at(h, p);
}

/* ---- small and medium requests --------------------------------------------- */

#define SINGLE_PACKET (UB_SES_F_SOM | UB_SES_F_EOM)

int ub__ses_small_encode(const struct ub__ses_small *h, struct ub__wcur *w)
{
    struct req_common c = {h->opcode, h->flags,      h->request_length, h->ri_generation,
                           h->job_id, h->pid_on_fep, h->resource_index};
    int rc = common_check(&c);
    if (rc)
        return rc;
    if (h->request_length > UB_SES_LEN14_MAX)
        return UB_EOVERFLOW;
    if ((h->flags & SINGLE_PACKET) != SINGLE_PACKET || (h->flags & UB_SES_F_HD))
        return UB_EINVAL;
    uint8_t *p = ub__wcur_take(w, UB_SES_SMALL_SIZE);
    if (!p)
        return UB_ETRUNC;
    common_put(p, &c);
    ub__st64(p + 12, h->buffer_offset);
    return 0;
}

int ub__ses_small_decode(struct ub__ses_small *h, struct ub__rcur *r)
{
    const uint8_t *p = ub__rcur_take(r, UB_SES_SMALL_SIZE);
    if (!p)
        return UB_ETRUNC;
    struct req_common c;
    bool bad = common_get(p, &c);
    uint64_t off = ub__ld64(p + 12);
    if (bad || c.slot > UB_SES_LEN14_MAX || (c.flags & SINGLE_PACKET) != SINGLE_PACKET ||
        (c.flags & UB_SES_F_HD))
        return UB_EBADMSG;
    h->opcode = c.opcode;
    h->flags = c.flags;
    h->request_length = c.slot;
    h->ri_generation = c.ri_generation;
    h->job_id = c.job_id;
    h->pid_on_fep = c.pid_on_fep;
    h->resource_index = c.resource_index;
    h->buffer_offset = off;
    return 0;
}

int ub__ses_medium_encode(const struct ub__ses_medium *h, struct ub__wcur *w)
{
    struct req_common c = {h->opcode, h->flags,      h->request_length, h->ri_generation,
                           h->job_id, h->pid_on_fep, h->resource_index};
    int rc = common_check(&c);
    if (rc)
        return rc;
    if (h->request_length > UB_SES_LEN14_MAX)
        return UB_EOVERFLOW;
    if ((h->flags & SINGLE_PACKET) != SINGLE_PACKET)
        return UB_EINVAL;
    uint8_t *p = ub__wcur_take(w, UB_SES_MEDIUM_SIZE);
    if (!p)
        return UB_ETRUNC;
    common_put(p, &c);
    ub__st64(p + 12, (h->flags & UB_SES_F_HD) ? h->header_data : h->buffer_offset);
    ub__st32(p + 20, h->initiator);
    ub__st64(p + 24, h->mem_key);
    return 0;
}

int ub__ses_medium_decode(struct ub__ses_medium *h, struct ub__rcur *r)
{
    const uint8_t *p = ub__rcur_take(r, UB_SES_MEDIUM_SIZE);
    if (!p)
        return UB_ETRUNC;
    struct req_common c;
    bool bad = common_get(p, &c);
    uint64_t slot = ub__ld64(p + 12);
    uint32_t initiator = ub__ld32(p + 20);
    uint64_t mem_key = ub__ld64(p + 24);
    if (bad || c.slot > UB_SES_LEN14_MAX || (c.flags & SINGLE_PACKET) != SINGLE_PACKET)
        return UB_EBADMSG;
    memset(h, 0, sizeof(*h));
    h->opcode = c.opcode;
    h->flags = c.flags;
    h->request_length = c.slot;
    h->ri_generation = c.ri_generation;
    h->job_id = c.job_id;
    h->pid_on_fep = c.pid_on_fep;
    h->resource_index = c.resource_index;
    if (c.flags & UB_SES_F_HD)
        h->header_data = slot;
    else
        h->buffer_offset = slot;
    h->initiator = initiator;
    h->mem_key = mem_key;
    return 0;
}

/* ---- responses ------------------------------------------------------------- */

bool ub__ses_rc_valid(uint8_t rc)
{
    return rc <= UB_SES_RC_DROPPED ||
           (rc >= UB_SES_RC_VENDOR_FIRST && rc <= UB_SES_RC_VENDOR_LAST) ||
           rc == UB_SES_RC_EXTENDED;
}

/* Checks list, opcode and return code for encoding. */
static int rsp_check(uint8_t list, uint8_t opcode, uint8_t rc)
{
    if (list > 3 || opcode > 0x3f || rc > 0x3f)
        return UB_EOVERFLOW;
    if (list > UB_SES_LIST_OVERFLOW || !ub__ses_rc_valid(rc))
        return UB_EINVAL;
    (void)opcode;
    return 0;
}

/* Splits the first two response bytes; false if a field is reserved. */
static bool rsp_split(uint8_t b0, uint8_t b1, uint8_t *list, uint8_t *opcode, uint8_t *rc)
{
    *list = (uint8_t)(b0 >> 6);
    *opcode = (uint8_t)(b0 & 0x3fu);
    *rc = (uint8_t)(b1 & 0x3fu);
    return *list <= UB_SES_LIST_OVERFLOW && (b1 >> 6) == UB_SES_VERSION && ub__ses_rc_valid(*rc);
}

static bool rsp_opcode_plain(uint8_t op)
{
    return op == UB_SES_RSP_DEFAULT || op == UB_SES_RSP_RESPONSE || op == UB_SES_RSP_NONE;
}

int ub__ses_rsp_encode(const struct ub__ses_rsp *h, struct ub__wcur *w)
{
    int rc = rsp_check(h->list, h->opcode, h->rc);
    if (rc)
        return rc;
    if (h->job_id > UB_SES_JOB_ID_MAX)
        return UB_EOVERFLOW;
    if (!rsp_opcode_plain(h->opcode))
        return UB_EINVAL;
    if (ub__wcur_reserve(w, UB_SES_RSP_SIZE))
        return UB_ETRUNC;
    ub__put_u8(w, (uint8_t)((h->list << 6) | h->opcode));
    ub__put_u8(w, h->rc);
    ub__put_u16(w, h->msg_id);
    ub__put_u8(w, h->ri_generation);
    ub__put_u24(w, h->job_id);
    ub__put_u32(w, h->modified_length);
    return 0;
}

int ub__ses_rsp_decode(struct ub__ses_rsp *h, struct ub__rcur *r)
{
    uint8_t b0 = ub__get_u8(r);
    uint8_t b1 = ub__get_u8(r);
    h->msg_id = ub__get_u16(r);
    h->ri_generation = ub__get_u8(r);
    h->job_id = ub__get_u24(r);
    h->modified_length = ub__get_u32(r);
    if (ub__rcur_error(r))
        return UB_ETRUNC;
    if (!rsp_split(b0, b1, &h->list, &h->opcode, &h->rc) || !rsp_opcode_plain(h->opcode))
        return UB_EBADMSG;
    return 0;
}

int ub__ses_rsp_data_encode(const struct ub__ses_rsp_data *h, struct ub__wcur *w)
{
    int rc = rsp_check(h->list, UB_SES_RSP_WITH_DATA, h->rc);
    if (rc)
        return rc;
    if (h->job_id > UB_SES_JOB_ID_MAX || h->payload_len > UB_SES_LEN14_MAX)
        return UB_EOVERFLOW;
    uint8_t *p = ub__wcur_take(w, UB_SES_RSP_DATA_SIZE);
    if (!p)
        return UB_ETRUNC;
    p[0] = (uint8_t)((h->list << 6) | UB_SES_RSP_WITH_DATA);
    p[1] = h->rc;
    ub__st16(p + 2, h->msg_id);
    p[4] = 0;
    ub__st24(p + 5, h->job_id);
    ub__st16(p + 8, h->read_req_msg_id);
    ub__st16(p + 10, h->payload_len);
    ub__st32(p + 12, h->modified_length);
    ub__st32(p + 16, h->message_offset);
    return 0;
}

/* The response with data at p (UB_SES_RSP_DATA_SIZE bytes) into h, every field written. */
static int rsp_data_decode_at(struct ub__ses_rsp_data *h, const uint8_t *p)
{
    uint8_t b0 = p[0];
    uint8_t b1 = p[1];
    h->msg_id = ub__ld16(p + 2);
    uint8_t rsvd = p[4];
    h->job_id = ub__ld24(p + 5);
    h->read_req_msg_id = ub__ld16(p + 8);
    h->payload_len = ub__ld16(p + 10);
    h->modified_length = ub__ld32(p + 12);
    h->message_offset = ub__ld32(p + 16);
    uint8_t opcode;
    if (!rsp_split(b0, b1, &h->list, &opcode, &h->rc) || opcode != UB_SES_RSP_WITH_DATA || rsvd ||
        h->payload_len > UB_SES_LEN14_MAX)
        return UB_EBADMSG;
    return 0;
}

int ub__ses_rsp_data_decode(struct ub__ses_rsp_data *h, struct ub__rcur *r)
{
    const uint8_t *p = ub__rcur_take(r, UB_SES_RSP_DATA_SIZE);
    if (!p)
        return UB_ETRUNC;
    return rsp_data_decode_at(h, p);
}

int ub__ses_rsp_data_small_encode(const struct ub__ses_rsp_data_small *h, struct ub__wcur *w)
{
    int rc = rsp_check(h->list, UB_SES_RSP_WITH_DATA, h->rc);
    if (rc)
        return rc;
    if (h->job_id > UB_SES_JOB_ID_MAX || h->payload_len > UB_SES_LEN14_MAX)
        return UB_EOVERFLOW;
    if (ub__wcur_reserve(w, UB_SES_RSP_DATA_SMALL_SIZE))
        return UB_ETRUNC;
    ub__put_u8(w, (uint8_t)((h->list << 6) | UB_SES_RSP_WITH_DATA));
    ub__put_u8(w, h->rc);
    ub__put_u16(w, h->payload_len);
    ub__put_u8(w, 0);
    ub__put_u24(w, h->job_id);
    ub__put_u32(w, h->orig_req_psn);
    return 0;
}

int ub__ses_rsp_data_small_decode(struct ub__ses_rsp_data_small *h, struct ub__rcur *r)
{
    uint8_t b0 = ub__get_u8(r);
    uint8_t b1 = ub__get_u8(r);
    h->payload_len = ub__get_u16(r);
    uint8_t rsvd = ub__get_u8(r);
    h->job_id = ub__get_u24(r);
    h->orig_req_psn = ub__get_u32(r);
    if (ub__rcur_error(r))
        return UB_ETRUNC;
    uint8_t opcode;
    if (!rsp_split(b0, b1, &h->list, &opcode, &h->rc) || opcode != UB_SES_RSP_WITH_DATA || rsvd ||
        h->payload_len > UB_SES_LEN14_MAX)
        return UB_EBADMSG;
    return 0;
}

/* ---- extension headers ------------------------------------------------------- */

bool ub__ses_amo_is_cswap(uint8_t op)
{
    return op >= UB_SES_AMO_CSWAP && op <= UB_SES_AMO_CSWAP_GT;
}

int ub__ses_atomic_encode(const struct ub__ses_atomic *h, struct ub__wcur *w)
{
    if (h->opcode > UB_SES_AMO_OP_MAX || h->datatype > UB_SES_DT_MAX ||
        (h->ctrl & ~UB_SES_AMO_CTRL_MASK))
        return UB_EINVAL;
    bool cswap = ub__ses_amo_is_cswap(h->opcode);
    if (ub__wcur_reserve(w, cswap ? UB_SES_CSWAP_SIZE : UB_SES_ATOMIC_SIZE))
        return UB_ETRUNC;
    ub__put_u8(w, h->opcode);
    ub__put_u8(w, h->datatype);
    ub__put_u8(w, h->ctrl);
    ub__put_u8(w, 0);
    if (cswap) {
        ub__put_bytes(w, h->compare, sizeof(h->compare));
        ub__put_bytes(w, h->swap, sizeof(h->swap));
    }
    return 0;
}

int ub__ses_atomic_decode(struct ub__ses_atomic *h, struct ub__rcur *r)
{
    memset(h, 0, sizeof(*h));
    h->opcode = ub__get_u8(r);
    h->datatype = ub__get_u8(r);
    h->ctrl = ub__get_u8(r);
    uint8_t rsvd = ub__get_u8(r);
    if (!ub__rcur_error(r) && ub__ses_amo_is_cswap(h->opcode)) {
        ub__get_bytes(r, h->compare, sizeof(h->compare));
        ub__get_bytes(r, h->swap, sizeof(h->swap));
    }
    if (ub__rcur_error(r))
        return UB_ETRUNC;
    if (h->opcode > UB_SES_AMO_OP_MAX || h->datatype > UB_SES_DT_MAX ||
        (h->ctrl & ~UB_SES_AMO_CTRL_MASK) || rsvd)
        return UB_EBADMSG;
    return 0;
}

int ub__ses_rndv_encode(const struct ub__ses_rndv *h, struct ub__wcur *w)
{
    if (h->pid_on_fep > UB_SES_PID_MAX || h->resource_index > UB_SES_RI_MAX)
        return UB_EOVERFLOW;
    if (ub__wcur_reserve(w, UB_SES_RNDV_SIZE))
        return UB_ETRUNC;
    ub__put_u32(w, h->eager_length);
    ub__put_u32(w, ((uint32_t)h->ri_generation << 24) | ((uint32_t)h->pid_on_fep << 12) |
                       h->resource_index);
    ub__put_u64(w, h->read_offset);
    ub__put_u64(w, h->read_mem_key);
    return 0;
}

int ub__ses_rndv_decode(struct ub__ses_rndv *h, struct ub__rcur *r)
{
    h->eager_length = ub__get_u32(r);
    uint32_t v = ub__get_u32(r);
    h->read_offset = ub__get_u64(r);
    h->read_mem_key = ub__get_u64(r);
    if (ub__rcur_error(r))
        return UB_ETRUNC;
    h->ri_generation = (uint8_t)(v >> 24);
    h->pid_on_fep = (uint16_t)((v >> 12) & UB_SES_PID_MAX);
    h->resource_index = (uint16_t)(v & UB_SES_RI_MAX);
    return 0;
}

/* ---- any SES header ------------------------------------------------------------ */

uint8_t ub__ses_ext_for(uint8_t kind, uint8_t opcode)
{
    if (kind < UB_PDS_NH_REQ_SMALL || kind > UB_PDS_NH_REQ_STD)
        return UB_SES_EXT_NONE;
    switch (opcode) {
    case UB_SES_OP_ATOMIC:
    case UB_SES_OP_FETCHING_ATOMIC:
    case UB_SES_OP_TSEND_ATOMIC:
    case UB_SES_OP_TSEND_FETCH_ATOMIC:
        return UB_SES_EXT_ATOMIC;
    case UB_SES_OP_RNDV_SEND:
    case UB_SES_OP_RNDV_TSEND:
        return kind == UB_PDS_NH_REQ_STD ? UB_SES_EXT_RNDV : UB_SES_EXT_NONE;
    default:
        return UB_SES_EXT_NONE;
    }
}

static uint8_t ses_opcode(const struct ub__ses *s)
{
    switch (s->kind) {
    case UB_PDS_NH_REQ_SMALL:
        return s->u.small.opcode;
    case UB_PDS_NH_REQ_MEDIUM:
        return s->u.medium.opcode;
    case UB_PDS_NH_REQ_STD:
        return s->u.std.opcode;
    default:
        return 0;
    }
}

size_t ub__ses_size(const struct ub__ses *s)
{
    size_t base;
    switch (s->kind) {
    case UB_PDS_NH_REQ_SMALL:
        base = UB_SES_SMALL_SIZE;
        break;
    case UB_PDS_NH_REQ_MEDIUM:
        base = UB_SES_MEDIUM_SIZE;
        break;
    case UB_PDS_NH_REQ_STD:
        base = UB_SES_STD_SIZE;
        break;
    case UB_PDS_NH_RSP:
        return UB_SES_RSP_SIZE;
    case UB_PDS_NH_RSP_DATA:
        return UB_SES_RSP_DATA_SIZE;
    case UB_PDS_NH_RSP_DATA_SMALL:
        return UB_SES_RSP_DATA_SMALL_SIZE;
    default:
        return 0;
    }
    switch (ub__ses_ext_for(s->kind, ses_opcode(s))) {
    case UB_SES_EXT_ATOMIC:
        return base +
               (ub__ses_amo_is_cswap(s->atomic.opcode) ? UB_SES_CSWAP_SIZE : UB_SES_ATOMIC_SIZE);
    case UB_SES_EXT_RNDV:
        return base + UB_SES_RNDV_SIZE;
    default:
        return base;
    }
}

int ub__ses_encode(const struct ub__ses *s, struct ub__wcur *w)
{
    size_t size = ub__ses_size(s);
    if (!size)
        return UB_EINVAL;
    if (s->ext != ub__ses_ext_for(s->kind, ses_opcode(s)))
        return UB_EINVAL;
    /* Without an extension the header's own encoder checks every value before it claims
     * room; with one, both are checked (in a scratch buffer) before anything is written. */
    if (s->ext == UB_SES_EXT_NONE) {
        switch (s->kind) {
        case UB_PDS_NH_REQ_STD:
            return ub__ses_std_encode(&s->u.std, w);
        case UB_PDS_NH_RSP_DATA:
            return ub__ses_rsp_data_encode(&s->u.rsp_data, w);
        default:
            break;
        }
    }
    uint8_t scratch[UB_SES_MAX_SIZE];
    struct ub__wcur tmp;
    ub__wcur_init(&tmp, scratch, sizeof(scratch));
    int rc;
    switch (s->kind) {
    case UB_PDS_NH_REQ_SMALL:
        rc = ub__ses_small_encode(&s->u.small, &tmp);
        break;
    case UB_PDS_NH_REQ_MEDIUM:
        rc = ub__ses_medium_encode(&s->u.medium, &tmp);
        break;
    case UB_PDS_NH_REQ_STD:
        rc = ub__ses_std_encode(&s->u.std, &tmp);
        break;
    case UB_PDS_NH_RSP:
        rc = ub__ses_rsp_encode(&s->u.rsp, &tmp);
        break;
    case UB_PDS_NH_RSP_DATA:
        rc = ub__ses_rsp_data_encode(&s->u.rsp_data, &tmp);
        break;
    default:
        rc = ub__ses_rsp_data_small_encode(&s->u.rsp_data_small, &tmp);
        break;
    }
    if (!rc && s->ext == UB_SES_EXT_ATOMIC)
        rc = ub__ses_atomic_encode(&s->atomic, &tmp);
    else if (!rc && s->ext == UB_SES_EXT_RNDV)
        rc = ub__ses_rndv_encode(&s->rndv, &tmp);
    if (rc)
        return rc;
    if (ub__wcur_reserve(w, size))
        return UB_ETRUNC;
    ub__put_bytes(w, scratch, ub__wcur_offset(&tmp));
    return 0;
}

int ub__ses_decode(struct ub__ses *s, uint8_t kind, struct ub__rcur *r)
{
    int rc;
    /* What the headers do not carry reads as zero. The union is cleared only for the
     * decoders that leave some of it alone (the standard request's writes every field),
     * and apart from the extensions: two clears small enough to be done inline. */
    s->kind = kind;
    memset((uint8_t *)s + offsetof(struct ub__ses, ext), 0,
           sizeof(*s) - offsetof(struct ub__ses, ext));
    if (kind == UB_PDS_NH_REQ_STD) {
        const uint8_t *p = ub__rcur_take(r, UB_SES_STD_SIZE);
        if (!p) {
            memset(&s->u, 0, sizeof(s->u));
            return UB_ETRUNC;
        }
        if ((rc = std_decode_at(&s->u.std, p)) != 0)
            return rc;
        s->ext = ub__ses_ext_for(kind, s->u.std.opcode);
        if (s->ext == UB_SES_EXT_NONE)
            return 0;
        return s->ext == UB_SES_EXT_ATOMIC ? ub__ses_atomic_decode(&s->atomic, r)
                                           : ub__ses_rndv_decode(&s->rndv, r);
    }
    memset(&s->u, 0, sizeof(s->u));
    if (kind == UB_PDS_NH_RSP_DATA) { /* a response on an ACK: no extension follows */
        const uint8_t *p = ub__rcur_take(r, UB_SES_RSP_DATA_SIZE);
        return p ? rsp_data_decode_at(&s->u.rsp_data, p) : UB_ETRUNC;
    }
    switch (kind) {
    case UB_PDS_NH_REQ_SMALL:
        rc = ub__ses_small_decode(&s->u.small, r);
        break;
    case UB_PDS_NH_REQ_MEDIUM:
        rc = ub__ses_medium_decode(&s->u.medium, r);
        break;
    case UB_PDS_NH_RSP:
        rc = ub__ses_rsp_decode(&s->u.rsp, r);
        break;
    case UB_PDS_NH_RSP_DATA:
        rc = ub__ses_rsp_data_decode(&s->u.rsp_data, r);
        break;
    case UB_PDS_NH_RSP_DATA_SMALL:
        rc = ub__ses_rsp_data_small_decode(&s->u.rsp_data_small, r);
        break;
    default:
        return UB_EINVAL; /* not an SES header */
    }
    if (rc)
        return rc;
    s->ext = ub__ses_ext_for(kind, ses_opcode(s));
    if (s->ext == UB_SES_EXT_ATOMIC)
        return ub__ses_atomic_decode(&s->atomic, r);
    if (s->ext == UB_SES_EXT_RNDV)
        return ub__ses_rndv_decode(&s->rndv, r);
    return 0;
}
