/*
 * Bounds-checked big-endian cursors over a byte buffer. Internal.
 *
 * A reader (struct ub__rcur) and a writer (struct ub__wcur) walk a buffer
 * front to back. Every access is checked against the end of the buffer; the
 * first access that would cross it records UB_ETRUNC in the cursor's sticky
 * error, touches nothing, and from then on every access is a no-op (getters
 * return 0, byte reads zero-fill their destination). Codecs therefore read
 * or write a whole header unconditionally and test the error once at the end.
 *
 * The cursors never read or write outside [buf, buf + len). No allocation,
 * no global state.
 */
#ifndef UB_WIRE_CURSOR_H
#define UB_WIRE_CURSOR_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <softub/errors.h>

/* ---- reader ------------------------------------------------------------- */

struct ub__rcur {
    const uint8_t *buf;
    size_t len; /* bytes in buf */
    size_t off; /* next byte to read */
    int err;    /* 0 or UB_ETRUNC, sticky */
};

static inline void ub__rcur_init(struct ub__rcur *r, const void *buf, size_t len)
{
    /* A NULL buffer reads as empty; "" keeps pointer arithmetic off NULL. */
    r->buf = buf ? (const uint8_t *)buf : (const uint8_t *)"";
    r->len = buf ? len : 0;
    r->off = 0;
    r->err = 0;
}

static inline size_t ub__rcur_remaining(const struct ub__rcur *r)
{
    return r->err ? 0 : r->len - r->off;
}

static inline size_t ub__rcur_offset(const struct ub__rcur *r)
{
    return r->off;
}

static inline int ub__rcur_error(const struct ub__rcur *r)
{
    return r->err;
}

/* Claims n bytes: a pointer to them, or NULL (and the sticky error) if fewer remain. */
static inline const uint8_t *ub__rcur_take(struct ub__rcur *r, size_t n)
{
    if (r->err || n > r->len - r->off) {
        r->err = UB_ETRUNC;
        return NULL;
    }
    const uint8_t *p = r->buf + r->off;
    r->off += n;
    return p;
}

/* Looks at the next n bytes without consuming them; NULL if fewer remain (no error recorded). */
static inline const uint8_t *ub__rcur_peek(const struct ub__rcur *r, size_t n)
{
    if (r->err || n > r->len - r->off)
        return NULL;
    return r->buf + r->off;
}

static inline void ub__rcur_skip(struct ub__rcur *r, size_t n)
{
    (void)ub__rcur_take(r, n);
}

static inline uint64_t ub__rcur_be(struct ub__rcur *r, size_t n)
{
    const uint8_t *p = ub__rcur_take(r, n);
    uint64_t v = 0;
    if (!p)
        return 0;
    for (size_t i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

static inline uint8_t ub__get_u8(struct ub__rcur *r)
{
    return (uint8_t)ub__rcur_be(r, 1);
}

static inline uint16_t ub__get_u16(struct ub__rcur *r)
{
    return (uint16_t)ub__rcur_be(r, 2);
}

static inline uint32_t ub__get_u24(struct ub__rcur *r)
{
    return (uint32_t)ub__rcur_be(r, 3);
}

static inline uint32_t ub__get_u32(struct ub__rcur *r)
{
    return (uint32_t)ub__rcur_be(r, 4);
}

static inline uint64_t ub__get_u48(struct ub__rcur *r)
{
    return ub__rcur_be(r, 6);
}

static inline uint64_t ub__get_u64(struct ub__rcur *r)
{
    return ub__rcur_be(r, 8);
}

/* Copies n bytes to dst; on truncation dst is zero-filled and nothing is consumed. */
static inline void ub__get_bytes(struct ub__rcur *r, void *dst, size_t n)
{
    const uint8_t *p = ub__rcur_take(r, n);
    if (p)
        memcpy(dst, p, n);
    else if (n)
        memset(dst, 0, n);
}

/* ---- writer ------------------------------------------------------------- */

struct ub__wcur {
    uint8_t *buf;
    size_t cap; /* bytes available in buf */
    size_t off; /* next byte to write = bytes written so far */
    int err;    /* 0 or UB_ETRUNC, sticky */
};

static inline void ub__wcur_init(struct ub__wcur *w, void *buf, size_t cap)
{
    w->buf = (uint8_t *)buf;
    w->cap = buf ? cap : 0;
    w->off = 0;
    w->err = 0;
}

static inline size_t ub__wcur_remaining(const struct ub__wcur *w)
{
    return w->err ? 0 : w->cap - w->off;
}

static inline size_t ub__wcur_offset(const struct ub__wcur *w)
{
    return w->off;
}

static inline int ub__wcur_error(const struct ub__wcur *w)
{
    return w->err;
}

/* Claims n bytes for writing: a pointer to them, or NULL (and the sticky error). */
static inline uint8_t *ub__wcur_take(struct ub__wcur *w, size_t n)
{
    if (w->err || n > w->cap - w->off) {
        w->err = UB_ETRUNC;
        return NULL;
    }
    if (!w->buf)
        return NULL; /* n == 0 on an empty writer: nothing to point at */
    uint8_t *p = w->buf + w->off;
    w->off += n;
    return p;
}

static inline void ub__wcur_be(struct ub__wcur *w, uint64_t v, size_t n)
{
    uint8_t *p = ub__wcur_take(w, n);
    if (!p)
        return;
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

static inline void ub__put_u8(struct ub__wcur *w, uint8_t v)
{
    ub__wcur_be(w, v, 1);
}

static inline void ub__put_u16(struct ub__wcur *w, uint16_t v)
{
    ub__wcur_be(w, v, 2);
}

/* Writes the low 24 bits of v. */
static inline void ub__put_u24(struct ub__wcur *w, uint32_t v)
{
    ub__wcur_be(w, v, 3);
}

static inline void ub__put_u32(struct ub__wcur *w, uint32_t v)
{
    ub__wcur_be(w, v, 4);
}

/* Writes the low 48 bits of v. */
static inline void ub__put_u48(struct ub__wcur *w, uint64_t v)
{
    ub__wcur_be(w, v, 6);
}

static inline void ub__put_u64(struct ub__wcur *w, uint64_t v)
{
    ub__wcur_be(w, v, 8);
}

static inline void ub__put_bytes(struct ub__wcur *w, const void *src, size_t n)
{
    uint8_t *p = ub__wcur_take(w, n);
    if (p && n)
        memcpy(p, src, n);
}

/* Writes n zero bytes (reserved fields, padding). */
static inline void ub__put_zero(struct ub__wcur *w, size_t n)
{
    uint8_t *p = ub__wcur_take(w, n);
    if (p && n)
        memset(p, 0, n);
}

/*
 * Encoders call this before writing a header of n bytes, so that a header
 * either lands whole or not at all: nothing is written when it does not fit.
 */
/* ---- fixed layouts ------------------------------------------------------ */

/*
 * Big-endian stores and loads at a pointer into room already claimed (ub__wcur_take /
 * ub__rcur_take): for headers of fixed size, one bounds check for the whole header instead of
 * one per field (byte stores may alias the cursor, so per-field checks reload it each time).
 * A store is one byte swap and one store where the compiler has the swap: written a byte at a
 * time, gcc assembles the bytes of a header's fields one by one.
 */
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define UB__ST_SWAP 1
#endif

static inline void ub__st16(uint8_t *p, uint16_t v)
{
#ifdef UB__ST_SWAP
    v = __builtin_bswap16(v);
    memcpy(p, &v, sizeof(v));
#else
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
#endif
}

static inline void ub__st24(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 16);
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)v;
}

static inline void ub__st32(uint8_t *p, uint32_t v)
{
#ifdef UB__ST_SWAP
    v = __builtin_bswap32(v);
    memcpy(p, &v, sizeof(v));
#else
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
#endif
}

static inline void ub__st64(uint8_t *p, uint64_t v)
{
#ifdef UB__ST_SWAP
    v = __builtin_bswap64(v);
    memcpy(p, &v, sizeof(v));
#else
    ub__st32(p, (uint32_t)(v >> 32));
    ub__st32(p + 4, (uint32_t)v);
#endif
}

static inline uint16_t ub__ld16(const uint8_t *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}

static inline uint32_t ub__ld24(const uint8_t *p)
{
    return ((uint32_t)p[0] << 16) | ((uint32_t)p[1] << 8) | p[2];
}

static inline uint32_t ub__ld32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint64_t ub__ld64(const uint8_t *p)
{
    return ((uint64_t)ub__ld32(p) << 32) | ub__ld32(p + 4);
}

static inline int ub__wcur_reserve(struct ub__wcur *w, size_t n)
{
    if (w->err || n > w->cap - w->off) {
        w->err = UB_ETRUNC;
        return UB_ETRUNC;
    }
    return 0;
}

#endif
