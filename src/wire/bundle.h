/*
 * Datagram bundles [softub]: several whole packets in one UDP payload. Internal.
 *
 * A round of the engine often has several small packets for one peer: an ACK, a
 * response, the next request. Each datagram costs a system call and a pass through the
 * kernel's network stack on both sides (on loopback the sender runs the receiver's stack
 * inline), so small packets to the same destination leave together:
 *
 *   byte 0     0xF8: PDS type 31 (reserved by UET, rejected by the PDS decoder) | version 0
 *   records    len(16, big-endian, >= 1) | that many bytes: one whole packet
 *
 * The records fill the datagram exactly; a record is never itself a bundle; a bundle
 * holds at least one record. A receiver that finds anything else drops the whole
 * datagram (counted). docs/wire-format.md section 7.1.
 */
#ifndef UB_WIRE_BUNDLE_H
#define UB_WIRE_BUNDLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define UB_BUNDLE_MARK    0xF8u /* type 31 << 3 | version 0 */
#define UB_BUNDLE_HDR     1u    /* the marker */
#define UB_BUNDLE_REC_HDR 2u    /* per record: its length */

/* Whether a datagram is a bundle (its first byte is the marker). */
static inline bool ub__bundle_is(const uint8_t *buf, size_t len)
{
    return len > 0 && buf[0] == UB_BUNDLE_MARK;
}

/* Bytes a bundle of packets of these total bytes and count occupies. */
static inline size_t ub__bundle_size(size_t bytes, size_t count)
{
    return UB_BUNDLE_HDR + count * UB_BUNDLE_REC_HDR + bytes;
}

/*
 * Checks a whole bundle: the marker, then records that fill len exactly, none empty, none
 * starting with the marker. The record count, or UB_ETRUNC (a record runs past the end)
 * or UB_EBADMSG (no marker, no record, an empty or nested record).
 */
int ub__bundle_check(const uint8_t *buf, size_t len);

/*
 * Walks a checked bundle: *off starts at 0; each call returns the next record's bytes
 * (*rec, *rec_len) and 1, or 0 when there are none left. Inline: the engine walks every
 * received bundle with it.
 */
static inline int ub__bundle_next(const uint8_t *buf, size_t len, size_t *off, const uint8_t **rec,
                                  size_t *rec_len)
{
    size_t o = *off ? *off : UB_BUNDLE_HDR;
    if (o + UB_BUNDLE_REC_HDR > len)
        return 0;
    size_t r = (size_t)buf[o] << 8 | buf[o + 1];
    *rec = buf + o + UB_BUNDLE_REC_HDR;
    *rec_len = r;
    *off = o + UB_BUNDLE_REC_HDR + r;
    return 1;
}

/* Writes the marker at out[0]: the bundle's first byte. (Inline, as the next: the engine
 * builds a bundle per answer of a udp ping-pong.) */
static inline size_t ub__bundle_put_hdr(uint8_t *out)
{
    out[0] = UB_BUNDLE_MARK;
    return UB_BUNDLE_HDR;
}

/* Writes a record's length at out (the record's bytes follow, written or already there). */
static inline size_t ub__bundle_put_len(uint8_t *out, size_t rec_len)
{
    out[0] = (uint8_t)(rec_len >> 8);
    out[1] = (uint8_t)rec_len;
    return UB_BUNDLE_REC_HDR;
}

/* Writes one record (length, then the bytes) at out; its size. rec_len is 1..65535. */
static inline size_t ub__bundle_put_rec(uint8_t *out, const uint8_t *rec, size_t rec_len)
{
    size_t h = ub__bundle_put_len(out, rec_len);
    memcpy(out + h, rec, rec_len);
    return h + rec_len;
}

#endif
