/* UET 1.0 PDS header codecs. Layouts: docs/wire-format.md section 3. */
#include "wire/pds.h"

#include <string.h>

#include "core/compiler.h"
#include "wire/wire_util.h"

/* ---- prologue ------------------------------------------------------------ */

static uint16_t prologue_word(uint8_t type, uint8_t nh, uint8_t flags)
{
    return (uint16_t)(((unsigned)type << 11) | ((unsigned)nh << 7) | flags);
}

static void prologue_split(uint16_t v, struct ub__pds_prologue *p)
{
    p->type = (uint8_t)(v >> 11);
    p->next_hdr = (uint8_t)((v >> 7) & 0x0fu);
    p->flags = (uint8_t)(v & 0x7fu);
}

int ub__pds_prologue_encode(const struct ub__pds_prologue *p, struct ub__wcur *w)
{
    if (p->type > 31 || p->next_hdr > 15 || p->flags > 0x7f)
        return UB_EOVERFLOW;
    if (ub__wcur_reserve(w, UB_PDS_PROLOGUE_SIZE))
        return UB_ETRUNC;
    ub__put_u16(w, prologue_word(p->type, p->next_hdr, p->flags));
    return 0;
}

int ub__pds_prologue_decode(struct ub__pds_prologue *p, struct ub__rcur *r)
{
    uint16_t v = ub__get_u16(r);
    if (ub__rcur_error(r))
        return UB_ETRUNC;
    prologue_split(v, p);
    return 0;
}

/*
 * The decoders below peek at the prologue, then claim the whole fixed-size header at once (one
 * bounds check instead of one per field) and read it at fixed offsets. NULL (the truncation
 * recorded) if even the prologue is cut short.
 */
static const uint8_t *peek_prologue(struct ub__rcur *r, struct ub__pds_prologue *p)
{
    const uint8_t *b = ub__rcur_peek(r, UB_PDS_PROLOGUE_SIZE);
    if (!b) {
        ub__rcur_skip(r, UB_PDS_PROLOGUE_SIZE);
        return NULL;
    }
    prologue_split(ub__ld16(b), p);
    return b;
}

bool ub__pds_nh_valid(uint8_t next_hdr)
{
    return next_hdr <= UB_PDS_NH_RSP_DATA_SMALL || next_hdr == UB_PDS_NH_SOFTUB_EXT;
}

bool ub__pds_nack_code_valid(uint8_t code)
{
    return (code >= UB_PDS_NACK_TRIMMED && code <= UB_PDS_NACK_PSN_OOR_WINDOW) ||
           (code >= UB_PDS_NACK_ROD_OOO && code <= UB_PDS_NACK_RCVR_INFER_LOSS) ||
           code >= UB_PDS_NACK_EXP_NORMAL;
}

/* Common encoder checks for the next_hdr and flags of a prologue. */
static int check_nh_flags(uint8_t nh, uint8_t flags, uint8_t allowed)
{
    if (nh > 15 || flags > 0x7f)
        return UB_EOVERFLOW;
    if (!ub__pds_nh_valid(nh) || (flags & ~allowed))
        return UB_EINVAL;
    return 0;
}

/* The SYN form of the dpdcid slot: pdc_info(4) = use_rsv_pdc(1) | rsvd(3), psn_offset(12). */
static uint16_t syn_word(bool use_rsv_pdc, uint16_t psn_offset)
{
    return (uint16_t)((use_rsv_pdc ? 0x8000u : 0u) | psn_offset);
}

static int syn_split(uint16_t v, bool *use_rsv_pdc, uint16_t *psn_offset)
{
    if (v & 0x7000u)
        return UB_EBADMSG; /* reserved pdc_info bits */
    *use_rsv_pdc = (v & 0x8000u) != 0;
    *psn_offset = (uint16_t)(v & UB_PDS_PSN_OFFSET_MAX);
    return 0;
}

/* ---- RUD/ROD requests ---------------------------------------------------- */

static bool is_req_type(uint8_t t)
{
    return t == UB_PDS_TYPE_RUD_REQ || t == UB_PDS_TYPE_ROD_REQ || t == UB_PDS_TYPE_RUD_CC_REQ ||
           t == UB_PDS_TYPE_ROD_CC_REQ;
}

static bool is_cc_req_type(uint8_t t)
{
    return t == UB_PDS_TYPE_RUD_CC_REQ || t == UB_PDS_TYPE_ROD_CC_REQ;
}

int ub__pds_req_encode(const struct ub__pds_req *h, struct ub__wcur *w)
{
    if (!is_req_type(h->type))
        return UB_EINVAL;
    int rc = check_nh_flags(h->next_hdr, h->flags, UB_PDS_REQ_F_MASK);
    if (rc)
        return rc;
    bool syn = (h->flags & UB_PDS_REQ_F_SYN) != 0;
    bool cc = is_cc_req_type(h->type);
    if (syn && h->psn_offset > UB_PDS_PSN_OFFSET_MAX)
        return UB_EOVERFLOW;
    if (cc && h->credit_target > UB_PDS_CREDIT_MAX)
        return UB_EOVERFLOW;
    uint8_t *p = ub__wcur_take(w, cc ? UB_PDS_REQ_CC_SIZE : UB_PDS_REQ_SIZE);
    if (!p)
        return UB_ETRUNC;
    ub__pds_req_put(p, h->type, h->next_hdr, h->flags, h->clear_psn_offset, h->psn, h->spdcid,
                    syn ? syn_word(h->use_rsv_pdc, h->psn_offset) : h->dpdcid);
    if (cc) {
        p[12] = h->ccc_id;
        ub__st24(p + 13, h->credit_target);
    }
    return 0;
}

int ub__pds_req_decode(struct ub__pds_req *h, struct ub__rcur *r)
{
    struct ub__pds_prologue pr;
    if (!peek_prologue(r, &pr))
        return UB_ETRUNC;
    if (!is_req_type(pr.type)) {
        ub__rcur_skip(r, UB_PDS_PROLOGUE_SIZE);
        return UB_EBADMSG;
    }
    bool cc = is_cc_req_type(pr.type);
    const uint8_t *p = ub__rcur_take(r, cc ? UB_PDS_REQ_CC_SIZE : UB_PDS_REQ_SIZE);
    if (!p)
        return UB_ETRUNC;
    h->type = pr.type;
    h->next_hdr = pr.next_hdr;
    h->flags = pr.flags;
    h->clear_psn_offset = ub__s16(ub__ld16(p + 2));
    h->psn = ub__ld32(p + 4);
    h->spdcid = ub__ld16(p + 8);
    uint16_t slot = ub__ld16(p + 10);
    h->dpdcid = 0;
    h->use_rsv_pdc = false;
    h->psn_offset = 0;
    h->ccc_id = cc ? p[12] : 0;
    h->credit_target = cc ? ub__ld24(p + 13) : 0;
    if ((pr.flags & ~UB_PDS_REQ_F_MASK) || !ub__pds_nh_valid(pr.next_hdr))
        return UB_EBADMSG;
    if (pr.flags & UB_PDS_REQ_F_SYN)
        return syn_split(slot, &h->use_rsv_pdc, &h->psn_offset);
    h->dpdcid = slot;
    return 0;
}

/* ---- RUDI ---------------------------------------------------------------- */

int ub__pds_rudi_encode(const struct ub__pds_rudi *h, struct ub__wcur *w)
{
    if (h->type != UB_PDS_TYPE_RUDI_REQ && h->type != UB_PDS_TYPE_RUDI_RESP)
        return UB_EINVAL;
    int rc = check_nh_flags(h->next_hdr, h->flags, UB_PDS_RUDI_F_MASK);
    if (rc)
        return rc;
    if (h->type == UB_PDS_TYPE_RUDI_REQ && (h->flags & UB_PDS_RUDI_F_M))
        return UB_EINVAL;
    uint8_t *p = ub__wcur_take(w, UB_PDS_RUDI_SIZE);
    if (!p)
        return UB_ETRUNC;
    ub__st16(p, prologue_word(h->type, h->next_hdr, h->flags));
    ub__st16(p + 2, 0);
    ub__st32(p + 4, h->pkt_id);
    return 0;
}

int ub__pds_rudi_decode(struct ub__pds_rudi *h, struct ub__rcur *r)
{
    struct ub__pds_prologue pr;
    if (!peek_prologue(r, &pr))
        return UB_ETRUNC;
    if (pr.type != UB_PDS_TYPE_RUDI_REQ && pr.type != UB_PDS_TYPE_RUDI_RESP) {
        ub__rcur_skip(r, UB_PDS_PROLOGUE_SIZE);
        return UB_EBADMSG;
    }
    const uint8_t *p = ub__rcur_take(r, UB_PDS_RUDI_SIZE);
    if (!p)
        return UB_ETRUNC;
    uint16_t rsvd = ub__ld16(p + 2);
    uint32_t pkt_id = ub__ld32(p + 4);
    if (rsvd || (pr.flags & ~UB_PDS_RUDI_F_MASK) || !ub__pds_nh_valid(pr.next_hdr))
        return UB_EBADMSG;
    if (pr.type == UB_PDS_TYPE_RUDI_REQ && (pr.flags & UB_PDS_RUDI_F_M))
        return UB_EBADMSG;
    h->type = pr.type;
    h->next_hdr = pr.next_hdr;
    h->flags = pr.flags;
    h->pkt_id = pkt_id;
    return 0;
}

/* ---- UUD ----------------------------------------------------------------- */

int ub__pds_uud_encode(const struct ub__pds_uud *h, struct ub__wcur *w)
{
    int rc = check_nh_flags(h->next_hdr, 0, 0);
    if (rc)
        return rc;
    uint8_t *p = ub__wcur_take(w, UB_PDS_UUD_SIZE);
    if (!p)
        return UB_ETRUNC;
    ub__st16(p, prologue_word(UB_PDS_TYPE_UUD_REQ, h->next_hdr, 0));
    ub__st16(p + 2, 0);
    return 0;
}

int ub__pds_uud_decode(struct ub__pds_uud *h, struct ub__rcur *r)
{
    struct ub__pds_prologue pr;
    if (!peek_prologue(r, &pr))
        return UB_ETRUNC;
    if (pr.type != UB_PDS_TYPE_UUD_REQ) {
        ub__rcur_skip(r, UB_PDS_PROLOGUE_SIZE);
        return UB_EBADMSG;
    }
    const uint8_t *p = ub__rcur_take(r, UB_PDS_UUD_SIZE);
    if (!p)
        return UB_ETRUNC;
    if (ub__ld16(p + 2) || pr.flags || !ub__pds_nh_valid(pr.next_hdr))
        return UB_EBADMSG;
    h->next_hdr = pr.next_hdr;
    return 0;
}

/* ---- LINK (softub) --------------------------------------------------------- */

int ub__pds_link_encode(const struct ub__pds_link *h, struct ub__wcur *w)
{
    int rc = check_nh_flags(h->next_hdr, h->flags, UB_PDS_LINK_F_MASK);
    if (rc)
        return rc;
    uint8_t *p = ub__wcur_take(w, UB_PDS_LINK_SIZE);
    if (!p)
        return UB_ETRUNC;
    ub__pds_link_put(p, h->next_hdr, h->flags, h->dst_inc);
    return 0;
}

int ub__pds_link_decode(struct ub__pds_link *h, struct ub__rcur *r)
{
    struct ub__pds_prologue pr;
    if (!peek_prologue(r, &pr))
        return UB_ETRUNC;
    if (pr.type != UB_PDS_TYPE_LINK) {
        ub__rcur_skip(r, UB_PDS_PROLOGUE_SIZE);
        return UB_EBADMSG;
    }
    const uint8_t *p = ub__rcur_take(r, UB_PDS_LINK_SIZE);
    if (!p)
        return UB_ETRUNC;
    if (ub__ld16(p + 2) || (pr.flags & ~UB_PDS_LINK_F_MASK) || !ub__pds_nh_valid(pr.next_hdr))
        return UB_EBADMSG;
    h->next_hdr = pr.next_hdr;
    h->flags = pr.flags;
    h->dst_inc = ub__ld32(p + 4);
    return 0;
}

/* ---- ACK_CC congestion state --------------------------------------------- */

void ub__pds_nscc_unpack(struct ub__pds_nscc_state *s, uint64_t v)
{
    s->service_time = (uint16_t)(v >> 48);
    s->restore_cwnd = ((v >> 47) & 1u) != 0;
    s->rcv_cwnd_pend = (uint8_t)((v >> 40) & 0x7fu);
    s->rcvd_bytes = (uint32_t)((v >> 16) & 0xffffffu);
    s->ooo_count = (uint16_t)(v & 0xffffu);
}

int ub__pds_rccc_pack(const struct ub__pds_rccc_state *s, uint64_t *out)
{
    if (s->credit > UB_PDS_CREDIT_MAX)
        return UB_EOVERFLOW;
    *out = ((uint64_t)s->credit << 40) | s->ooo_count;
    return 0;
}

int ub__pds_rccc_unpack(struct ub__pds_rccc_state *s, uint64_t v)
{
    if (v & 0x000000ffffff0000ull)
        return UB_EBADMSG; /* reserved 24 bits */
    s->credit = (uint32_t)(v >> 40);
    s->ooo_count = (uint16_t)(v & 0xffffu);
    return 0;
}

int ub__pds_caqm_pack(const struct ub__pds_caqm_state *s, uint64_t *out)
{
    if (s->rcv_cwnd_pend > UB_PDS_CWND_PEND_MAX)
        return UB_EOVERFLOW;
    *out = ((uint64_t)s->service_time << 48) | ((uint64_t)(s->restore_cwnd ? 1u : 0u) << 47) |
           ((uint64_t)s->rcv_cwnd_pend << 40) | ((uint64_t)(s->c ? 1u : 0u) << 39) |
           ((uint64_t)(s->i ? 1u : 0u) << 38) | ((uint64_t)s->hint << 16) | s->ooo_count;
    return 0;
}

int ub__pds_caqm_unpack(struct ub__pds_caqm_state *s, uint64_t v)
{
    if (v & 0x0000003f00000000ull)
        return UB_EBADMSG; /* reserved 6 bits */
    s->service_time = (uint16_t)(v >> 48);
    s->restore_cwnd = ((v >> 47) & 1u) != 0;
    s->rcv_cwnd_pend = (uint8_t)((v >> 40) & 0x7fu);
    s->c = ((v >> 39) & 1u) != 0;
    s->i = ((v >> 38) & 1u) != 0;
    s->hint = (uint16_t)(v >> 16);
    s->ooo_count = (uint16_t)(v & 0xffffu);
    return 0;
}

/* ---- ACK, ACK_CC, ACK_CCX ------------------------------------------------ */

static bool is_ack_type(uint8_t t)
{
    return t == UB_PDS_TYPE_ACK || t == UB_PDS_TYPE_ACK_CC || t == UB_PDS_TYPE_ACK_CCX;
}

int ub__pds_ack_encode(const struct ub__pds_ack *h, struct ub__wcur *w)
{
    if (!is_ack_type(h->type))
        return UB_EINVAL;
    if (h->req > 3)
        return UB_EOVERFLOW;
    int rc = check_nh_flags(h->next_hdr, h->flags, UB_PDS_ACK_F_MASK & ~UB_PDS_ACK_F_REQ_MASK);
    if (rc)
        return rc;
    if (h->req == 3)
        return UB_EINVAL;
    bool epsn = (h->flags & UB_PDS_ACK_F_EPSN) != 0;
    if (epsn && h->type != UB_PDS_TYPE_ACK)
        return UB_EINVAL;
    uint64_t state = 0;
    if (h->type != UB_PDS_TYPE_ACK && h->cc_type > 15)
        return UB_EOVERFLOW;
    if ((rc = ub__pds_ack_state(h, &state)) != 0)
        return rc;
    uint8_t *p = ub__wcur_take(w, ub__pds_ack_size(h->type, h->flags));
    if (!p)
        return UB_ETRUNC;
    ub__pds_ack_put(p, h, state);
    return 0;
}

int ub__pds_ack_state_other(const struct ub__pds_ack *h, uint64_t *state)
{
    if (h->cc_type == UB_PDS_CC_RCCC)
        return ub__pds_rccc_pack(&h->cc.rccc, state);
    if (h->cc_type == UB_PDS_CC_CAQM)
        return ub__pds_caqm_pack(&h->cc.caqm, state);
    return UB_EINVAL;
}

int ub__pds_ack_decode(struct ub__pds_ack *h, struct ub__rcur *r)
{
    struct ub__pds_prologue pr;
    if (!peek_prologue(r, &pr))
        return UB_ETRUNC;
    if (!is_ack_type(pr.type)) {
        ub__rcur_skip(r, UB_PDS_PROLOGUE_SIZE);
        return UB_EBADMSG;
    }
    const uint8_t *p = ub__rcur_take(r, ub__pds_ack_size(pr.type, pr.flags));
    if (!p)
        return UB_ETRUNC;
    memset(h, 0, sizeof(*h));
    h->type = pr.type;
    h->next_hdr = pr.next_hdr;
    h->flags = (uint8_t)(pr.flags & ~UB_PDS_ACK_F_REQ_MASK);
    h->req = (uint8_t)((pr.flags & UB_PDS_ACK_F_REQ_MASK) >> UB_PDS_ACK_F_REQ_SHIFT);
    bool epsn = (pr.flags & UB_PDS_ACK_F_EPSN) != 0;
    h->ack_psn_offset = ub__s16(ub__ld16(p + 2));
    h->cack_psn = ub__ld32(p + 4);
    h->spdcid = ub__ld16(p + 8);
    h->dpdcid = ub__ld16(p + 10);
    if (epsn && pr.type == UB_PDS_TYPE_ACK)
        h->expected_psn = ub__ld32(p + 12);
    uint8_t cc_byte = 0;
    uint64_t state = 0;
    if (pr.type != UB_PDS_TYPE_ACK) {
        cc_byte = p[12];
        h->cc_type = (uint8_t)(cc_byte >> 4);
        h->mpr = p[13];
        h->sack_psn_offset = ub__s16(ub__ld16(p + 14));
        h->sack_bitmap = ub__ld64(p + 16);
        if (pr.type == UB_PDS_TYPE_ACK_CC)
            state = ub__ld64(p + 24);
        else
            memcpy(h->ccx_state, p + 24, sizeof(h->ccx_state));
    }
    if ((pr.flags & ~UB_PDS_ACK_F_MASK) || h->req == 3 || !ub__pds_nh_valid(pr.next_hdr))
        return UB_EBADMSG;
    if (epsn && pr.type != UB_PDS_TYPE_ACK)
        return UB_EBADMSG;
    if (cc_byte & 0x0fu)
        return UB_EBADMSG; /* reserved cc_flags */
    if (pr.type == UB_PDS_TYPE_ACK_CC) {
        if (h->cc_type == UB_PDS_CC_NSCC)
            ub__pds_nscc_unpack(&h->cc.nscc, state);
        else if (h->cc_type == UB_PDS_CC_RCCC)
            return ub__pds_rccc_unpack(&h->cc.rccc, state);
        else if (h->cc_type == UB_PDS_CC_CAQM)
            return ub__pds_caqm_unpack(&h->cc.caqm, state);
        else
            return UB_EBADMSG;
    }
    return 0;
}

/* ---- NACK, NACK_CCX ------------------------------------------------------ */

int ub__pds_nack_encode(const struct ub__pds_nack *h, struct ub__wcur *w)
{
    if (h->type != UB_PDS_TYPE_NACK && h->type != UB_PDS_TYPE_NACK_CCX)
        return UB_EINVAL;
    int rc = check_nh_flags(h->next_hdr, h->flags, UB_PDS_NACK_F_MASK);
    if (rc)
        return rc;
    if (!ub__pds_nack_code_valid(h->code))
        return UB_EINVAL;
    if ((h->flags & UB_PDS_NACK_F_NT) && (h->spdcid || h->dpdcid))
        return UB_EINVAL;
    bool ccx = h->type == UB_PDS_TYPE_NACK_CCX;
    uint8_t *p = ub__wcur_take(w, ccx ? UB_PDS_NACK_CCX_SIZE : UB_PDS_NACK_SIZE);
    if (!p)
        return UB_ETRUNC;
    ub__st16(p, prologue_word(h->type, h->next_hdr, h->flags));
    p[2] = h->code;
    p[3] = h->vendor_code;
    ub__st32(p + 4, h->psn);
    ub__st16(p + 8, h->spdcid);
    ub__st16(p + 10, h->dpdcid);
    ub__st32(p + 12, h->payload);
    if (ccx)
        memcpy(p + 16, h->ccx_state, sizeof(h->ccx_state));
    return 0;
}

int ub__pds_nack_decode(struct ub__pds_nack *h, struct ub__rcur *r)
{
    struct ub__pds_prologue pr;
    if (!peek_prologue(r, &pr))
        return UB_ETRUNC;
    if (pr.type != UB_PDS_TYPE_NACK && pr.type != UB_PDS_TYPE_NACK_CCX) {
        ub__rcur_skip(r, UB_PDS_PROLOGUE_SIZE);
        return UB_EBADMSG;
    }
    bool ccx = pr.type == UB_PDS_TYPE_NACK_CCX;
    const uint8_t *p = ub__rcur_take(r, ccx ? UB_PDS_NACK_CCX_SIZE : UB_PDS_NACK_SIZE);
    if (!p)
        return UB_ETRUNC;
    memset(h, 0, sizeof(*h));
    h->type = pr.type;
    h->next_hdr = pr.next_hdr;
    h->flags = pr.flags;
    h->code = p[2];
    h->vendor_code = p[3];
    h->psn = ub__ld32(p + 4);
    h->spdcid = ub__ld16(p + 8);
    h->dpdcid = ub__ld16(p + 10);
    h->payload = ub__ld32(p + 12);
    if (ccx)
        memcpy(h->ccx_state, p + 16, sizeof(h->ccx_state));
    if ((pr.flags & ~UB_PDS_NACK_F_MASK) || !ub__pds_nh_valid(pr.next_hdr) ||
        !ub__pds_nack_code_valid(h->code))
        return UB_EBADMSG;
    if ((pr.flags & UB_PDS_NACK_F_NT) && (h->spdcid || h->dpdcid))
        return UB_EBADMSG;
    return 0;
}

/* ---- CTRL ---------------------------------------------------------------- */

int ub__pds_ctrl_encode(const struct ub__pds_ctrl *h, struct ub__wcur *w)
{
    if (h->ctl_type > 15 || h->flags > 0x7f)
        return UB_EOVERFLOW;
    if (h->ctl_type > UB_PDS_CTRL_NEGOTIATION || (h->flags & ~UB_PDS_CTRL_F_MASK))
        return UB_EINVAL;
    bool syn = (h->flags & UB_PDS_CTRL_F_SYN) != 0;
    if (syn && h->psn_offset > UB_PDS_PSN_OFFSET_MAX)
        return UB_EOVERFLOW;
    uint8_t *p = ub__wcur_take(w, UB_PDS_CTRL_SIZE);
    if (!p)
        return UB_ETRUNC;
    ub__st16(p, prologue_word(UB_PDS_TYPE_CTRL, h->ctl_type, h->flags));
    ub__st16(p + 2, h->ctl_type == UB_PDS_CTRL_PROBE ? h->probe_opaque : 0);
    ub__st32(p + 4, h->psn);
    ub__st16(p + 8, h->spdcid);
    ub__st16(p + 10, syn ? syn_word(h->use_rsv_pdc, h->psn_offset) : h->dpdcid);
    ub__st32(p + 12, h->payload);
    return 0;
}

int ub__pds_ctrl_decode(struct ub__pds_ctrl *h, struct ub__rcur *r)
{
    struct ub__pds_prologue pr;
    if (!peek_prologue(r, &pr))
        return UB_ETRUNC;
    if (pr.type != UB_PDS_TYPE_CTRL) {
        ub__rcur_skip(r, UB_PDS_PROLOGUE_SIZE);
        return UB_EBADMSG;
    }
    const uint8_t *p = ub__rcur_take(r, UB_PDS_CTRL_SIZE);
    if (!p)
        return UB_ETRUNC;
    memset(h, 0, sizeof(*h));
    h->ctl_type = pr.next_hdr;
    h->flags = pr.flags;
    h->probe_opaque = ub__ld16(p + 2);
    h->psn = ub__ld32(p + 4);
    h->spdcid = ub__ld16(p + 8);
    uint16_t slot = ub__ld16(p + 10);
    h->payload = ub__ld32(p + 12);
    if (h->ctl_type > UB_PDS_CTRL_NEGOTIATION || (pr.flags & ~UB_PDS_CTRL_F_MASK))
        return UB_EBADMSG;
    if (h->ctl_type != UB_PDS_CTRL_PROBE && h->probe_opaque)
        return UB_EBADMSG;
    if (pr.flags & UB_PDS_CTRL_F_SYN)
        return syn_split(slot, &h->use_rsv_pdc, &h->psn_offset);
    h->dpdcid = slot;
    return 0;
}

/* ---- any PDS header ------------------------------------------------------ */

size_t ub__pds_hdr_size(uint8_t type, uint8_t flags)
{
    switch (type) {
    case UB_PDS_TYPE_RUD_REQ:
    case UB_PDS_TYPE_ROD_REQ:
        return UB_PDS_REQ_SIZE;
    case UB_PDS_TYPE_RUD_CC_REQ:
    case UB_PDS_TYPE_ROD_CC_REQ:
        return UB_PDS_REQ_CC_SIZE;
    case UB_PDS_TYPE_RUDI_REQ:
    case UB_PDS_TYPE_RUDI_RESP:
        return UB_PDS_RUDI_SIZE;
    case UB_PDS_TYPE_UUD_REQ:
        return UB_PDS_UUD_SIZE;
    case UB_PDS_TYPE_LINK:
        return UB_PDS_LINK_SIZE;
    case UB_PDS_TYPE_ACK:
        return (flags & UB_PDS_ACK_F_EPSN) ? UB_PDS_ACK_EPSN_SIZE : UB_PDS_ACK_SIZE;
    case UB_PDS_TYPE_ACK_CC:
        return UB_PDS_ACK_CC_SIZE;
    case UB_PDS_TYPE_ACK_CCX:
        return UB_PDS_ACK_CCX_SIZE;
    case UB_PDS_TYPE_NACK:
        return UB_PDS_NACK_SIZE;
    case UB_PDS_TYPE_NACK_CCX:
        return UB_PDS_NACK_CCX_SIZE;
    case UB_PDS_TYPE_CTRL:
        return UB_PDS_CTRL_SIZE;
    default:
        return 0;
    }
}

int ub__pds_decode(struct ub__pds_hdr *h, struct ub__rcur *r)
{
    const uint8_t *p = ub__rcur_peek(r, UB_PDS_PROLOGUE_SIZE);
    if (!p) {
        ub__rcur_skip(r, UB_PDS_PROLOGUE_SIZE); /* records the truncation */
        return UB_ETRUNC;
    }
    h->type = (uint8_t)(p[0] >> 3);
    switch (h->type) {
    case UB_PDS_TYPE_RUD_REQ:
    case UB_PDS_TYPE_ROD_REQ:
    case UB_PDS_TYPE_RUD_CC_REQ:
    case UB_PDS_TYPE_ROD_CC_REQ:
        return ub__pds_req_decode(&h->u.req, r);
    case UB_PDS_TYPE_RUDI_REQ:
    case UB_PDS_TYPE_RUDI_RESP:
        return ub__pds_rudi_decode(&h->u.rudi, r);
    case UB_PDS_TYPE_UUD_REQ:
        return ub__pds_uud_decode(&h->u.uud, r);
    case UB_PDS_TYPE_LINK:
        return ub__pds_link_decode(&h->u.link, r);
    case UB_PDS_TYPE_ACK:
    case UB_PDS_TYPE_ACK_CC:
    case UB_PDS_TYPE_ACK_CCX:
        return ub__pds_ack_decode(&h->u.ack, r);
    case UB_PDS_TYPE_NACK:
    case UB_PDS_TYPE_NACK_CCX:
        return ub__pds_nack_decode(&h->u.nack, r);
    case UB_PDS_TYPE_CTRL:
        return ub__pds_ctrl_decode(&h->u.ctrl, r);
    default:
        return UB_EBADMSG; /* reserved, or a TSS header where PDS was expected */
    }
}

int ub__pds_encode(const struct ub__pds_hdr *h, struct ub__wcur *w)
{
    switch (h->type) {
    case UB_PDS_TYPE_RUD_REQ:
    case UB_PDS_TYPE_ROD_REQ:
    case UB_PDS_TYPE_RUD_CC_REQ:
    case UB_PDS_TYPE_ROD_CC_REQ:
        return h->u.req.type == h->type ? ub__pds_req_encode(&h->u.req, w) : UB_EINVAL;
    case UB_PDS_TYPE_RUDI_REQ:
    case UB_PDS_TYPE_RUDI_RESP:
        return h->u.rudi.type == h->type ? ub__pds_rudi_encode(&h->u.rudi, w) : UB_EINVAL;
    case UB_PDS_TYPE_UUD_REQ:
        return ub__pds_uud_encode(&h->u.uud, w);
    case UB_PDS_TYPE_LINK:
        return ub__pds_link_encode(&h->u.link, w);
    case UB_PDS_TYPE_ACK:
    case UB_PDS_TYPE_ACK_CC:
    case UB_PDS_TYPE_ACK_CCX:
        return h->u.ack.type == h->type ? ub__pds_ack_encode(&h->u.ack, w) : UB_EINVAL;
    case UB_PDS_TYPE_NACK:
    case UB_PDS_TYPE_NACK_CCX:
        return h->u.nack.type == h->type ? ub__pds_nack_encode(&h->u.nack, w) : UB_EINVAL;
    case UB_PDS_TYPE_CTRL:
        return ub__pds_ctrl_encode(&h->u.ctrl, w);
    default:
        return UB_EINVAL;
    }
}

uint8_t ub__pds_next_hdr(const struct ub__pds_hdr *h)
{
    switch (h->type) {
    case UB_PDS_TYPE_RUD_REQ:
    case UB_PDS_TYPE_ROD_REQ:
    case UB_PDS_TYPE_RUD_CC_REQ:
    case UB_PDS_TYPE_ROD_CC_REQ:
        return h->u.req.next_hdr;
    case UB_PDS_TYPE_RUDI_REQ:
    case UB_PDS_TYPE_RUDI_RESP:
        return h->u.rudi.next_hdr;
    case UB_PDS_TYPE_UUD_REQ:
        return h->u.uud.next_hdr;
    case UB_PDS_TYPE_LINK:
        return h->u.link.next_hdr;
    case UB_PDS_TYPE_ACK:
    case UB_PDS_TYPE_ACK_CC:
    case UB_PDS_TYPE_ACK_CCX:
        return h->u.ack.next_hdr;
    case UB_PDS_TYPE_NACK:
    case UB_PDS_TYPE_NACK_CCX:
        return h->u.nack.next_hdr;
    default:
        return UB_PDS_NH_NONE;
    }
}
