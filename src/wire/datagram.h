/*
 * The whole softub datagram: the chain of headers in one UDP payload. Internal.
 *
 *   [TSS header]        optional; first 5 bits == UB_PDS_TYPE_TSS
 *   PDS header          always
 *   [softub extension]  when the PDS next_hdr is UB_PDS_NH_SOFTUB_EXT
 *   [SES header + SES extension]   as named by the (extension's) next_hdr
 *   payload
 *   [ICV, 16 B]         when the TSS header is present
 *
 * ub__wire_parse_datagram() is what the engine runs on every received
 * datagram: it walks the chain, decodes every header, and checks that the
 * headers agree with each other and with the datagram length.
 * docs/wire-format.md section 7 is the reference.
 */
#ifndef UB_WIRE_DATAGRAM_H
#define UB_WIRE_DATAGRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/cursor.h"
#include "wire/ext.h"
#include "wire/pds.h"
#include "wire/ses.h"
#include "wire/tss.h"

/* UDP destination port of UET (IANA); softub listens there by default. */
#define UB_WIRE_UDP_PORT 4793

/* Flags for ub__wire_parse_datagram(). */
#define UB_WIRE_F_OPENED  0x1u /* the TSS-protected part is already plaintext (decrypted) */
#define UB_WIRE_F_GENERAL 0x2u /* tests: no fast path for the link path's packets (same result) */

struct ub__wire_dgram {
    size_t len; /* the whole datagram */
    /* TSS */
    bool has_tss;
    bool sealed; /* TSS present but not UB_WIRE_F_OPENED: nothing after the TSS header parsed */
    struct ub__tss tss;
    size_t tss_len;
    size_t icv_off; /* with has_tss: len - 16 */
    /* PDS */
    size_t pds_off, pds_len;
    struct ub__pds_hdr pds;
    /* softub extension */
    bool has_ext;
    size_t ext_off, ext_len;
    struct ub__ext ext;
    /* SES (ses_kind == UB_PDS_NH_NONE: none) */
    uint8_t ses_kind;
    size_t ses_off, ses_len; /* SES extension header included */
    struct ub__ses ses;
    /* payload */
    size_t payload_off, payload_len;
};

/*
 * Parses buf[0, len) into d. 0 on success; UB_ETRUNC if a header is cut
 * short; UB_EBADMSG if a header is malformed, a next-header value is not
 * allowed after the packet type that names it, or a length field disagrees
 * with the payload actually present; UB_EINVAL for bad arguments.
 */
int ub__wire_parse_datagram(struct ub__wire_dgram *d, const uint8_t *buf, size_t len,
                            unsigned flags);

/*
 * The link path's usual request (docs/pds.md, "The link path"): LINK, the softub extension,
 * a standard SES header without an SES extension (no rendezvous) that says SOM and EOM, and
 * the whole message as payload; or a READ (SOM, nothing else) or a fetching atomic (SOM,
 * its atomic extension, its operand if any). For such a datagram, what ub__wire_parse_datagram
 * would find in it, in the fields a receive of it needs; false for anything else, which may still
 * be valid (parse it). fuzz_datagram checks the two agree.
 */
struct ub__wire_link_req {
    uint32_t dst_inc;   /* LINK: the receiver's incarnation as the sender knows it */
    uint8_t link_flags; /* UB_PDS_LINK_F_* */
    bool has_atomic;    /* a fetching atomic: atomic holds its extension */
    struct ub__ext ext;
    struct ub__ses_std std;
    struct ub__ses_atomic atomic;
    const uint8_t *payload;
    uint32_t payload_len; /* == std.request_length but for a READ (0) or an atomic */
};
bool ub__wire_link_req(struct ub__wire_link_req *r, const uint8_t *buf, size_t len);

/*
 * The link path's usual response: LINK, a version-0 softub extension (nothing appended, so
 * neither packed responses nor rendezvous data) naming a response with data, and exactly its
 * payload. Found as ub__wire_link_req finds a request; fuzz_datagram checks the same way.
 */
struct ub__wire_link_rsp {
    uint32_t dst_inc;
    uint8_t link_flags;
    struct ub__ext ext;
    struct ub__ses_rsp_data rsp;
    const uint8_t *payload;
    uint32_t payload_len; /* == rsp.payload_len */
};
bool ub__wire_link_rsp(struct ub__wire_link_rsp *r, const uint8_t *buf, size_t len);
#define UB_WIRE_LINK_BYTE0 0xffu /* a LINK packet's first byte (type 31, next header 15) */

/*
 * Encodes the headers of d (TSS if has_tss, PDS, extension if has_ext, SES)
 * back to back: everything up to payload_off. The payload and ICV are the
 * caller's. Header chaining is checked: the PDS next_hdr must name the
 * extension when has_ext, and the last next_hdr must equal ses_kind.
 */
int ub__wire_encode_headers(const struct ub__wire_dgram *d, struct ub__wcur *w);

/* Whether an SES header of this kind (UB_PDS_NH_*) may follow a PDS header of this type. */
bool ub__wire_nh_allowed(uint8_t pds_type, uint8_t ses_kind);

#endif
