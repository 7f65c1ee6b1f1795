/*
 * UET 1.0 Transport Security Sublayer (TSS) header and ICV placement. Internal.
 *
 * When present, the TSS header opens the UET packet, in front of the PDS
 * header; its first 5 bits are the PDS type value UB_PDS_TYPE_TSS (1), which
 * is how a receiver tells it from a PDS prologue. A 16-byte ICV (AES-256-GCM
 * tag) ends the packet. No cryptography here: only where things lie.
 *
 *   word 0   type(5) = 1 | SP(1) | rsvd(1) | AN(1) | SDI(24)
 *   word 1   SSI (32)                      present only with SP
 *   next 8   epoch(16) | TSC(48)
 *
 * Conventions as in wire/pds.h; layout in docs/wire-format.md section 5.
 */
#ifndef UB_WIRE_TSS_H
#define UB_WIRE_TSS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/cursor.h"
#include "wire/pds.h"

#define UB_TSS_HDR_SIZE     12 /* without SSI */
#define UB_TSS_HDR_SSI_SIZE 16 /* with SSI (SP set) */
#define UB_TSS_ICV_SIZE     16
#define UB_TSS_SDI_MAX      0xffffffu
#define UB_TSS_TSC_MAX      0xffffffffffffull /* 48 bits */

struct ub__tss {
    bool sp;        /* SSI present (explicit source identifier) */
    bool an;        /* association number: which of two SD keys */
    uint32_t sdi;   /* security domain index, 24 bits */
    uint32_t ssi;   /* secure source identifier, with sp only */
    uint16_t epoch; /* SD epoch */
    uint64_t tsc;   /* per-source packet counter, 48 bits */
};

int ub__tss_encode(const struct ub__tss *h, struct ub__wcur *w);
int ub__tss_decode(struct ub__tss *h, struct ub__rcur *r);

/* Header size for this SP setting. */
size_t ub__tss_hdr_size(bool sp);

/* Whether a UET packet starts with a TSS header (first 5 bits == 1). Inline: every received
 * datagram asks. */
static inline bool ub__tss_present(const uint8_t *pkt, size_t len)
{
    return len >= 1 && (pkt[0] >> 3) == UB_PDS_TYPE_TSS;
}

/*
 * Where the protected parts of a TSS packet lie, as offsets into the packet:
 *
 *   [0, hdr_len)                    TSS header           authenticated (AAD)
 *   [hdr_len, hdr_len + clear_len)  cleartext part       authenticated (AAD)
 *   [ct_off, ct_off + ct_len)       encrypted part       (PDS, ext, SES, payload)
 *   [icv_off, icv_off + 16)         ICV                  end of packet
 *
 * aad_off is always 0 and aad_len = hdr_len + clear_len. clear_len is a
 * policy choice of the sender (0: encrypt everything after the TSS header).
 */
struct ub__tss_layout {
    size_t hdr_len;
    size_t aad_off, aad_len;
    size_t ct_off, ct_len;
    size_t icv_off;
};

/*
 * Decodes the TSS header of pkt into h and computes the layout for a
 * cleartext part of clear_len bytes. UB_ETRUNC if pkt cannot hold the header,
 * the cleartext part, a minimal PDS header (UB_PDS_MIN_SIZE bytes, in the
 * cleartext or the encrypted part) and the ICV; UB_EBADMSG for a malformed
 * header.
 */
int ub__tss_layout(struct ub__tss_layout *l, struct ub__tss *h, const uint8_t *pkt, size_t len,
                   size_t clear_len);

#endif
