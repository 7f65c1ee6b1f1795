#include "dev/shm_delta.h"

#include <string.h>

#include <softub/errors.h>

static void set_ctx(struct ub__shm_delta_ctx *c, const uint8_t *data, uint32_t len)
{
    uint32_t words = (len + 7u) / 8u;
    memcpy(c->w, data, len);
    memset((uint8_t *)c->w + len, 0, words * 8u - len);
    c->len = len;
}

/* The datagram's last word (len % 8 bytes, zero above them; len >= 8): the last 8 bytes
 * shifted down, instead of a variable-length copy. */
static inline uint64_t last_word(const uint8_t *data, uint32_t len)
{
    uint64_t v;
    memcpy(&v, data + len - 8u, 8);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return v >> (8u * (8u - len % 8u));
#else
    v = 0;
    memcpy(&v, data + len - len % 8u, len % 8u);
    return v;
#endif
}

uint32_t ub__shm_delta_encode(struct ub__shm_delta *d, const uint8_t *data, uint32_t len,
                              uint8_t *out, uint16_t *mask)
{
    struct ub__shm_delta_ctx *c = &d->c[ub__shm_delta_index(len)];
    if (c->len != len) {
        set_ctx(c, data, len);
        return 0;
    }
    /* A stream changes the same words each time: the branches predict well. (restrict: the
     * body's stores cannot change the context, so nothing is reloaded.) */
    uint64_t *restrict w = c->w;
    uint8_t *restrict body = out;
    uint32_t words = (len + 7u) / 8u, n = 0, m = 0;
    for (uint32_t i = 0; i < words; i++) {
        uint64_t v;
        if (i + 1 < words || len % 8u == 0)
            memcpy(&v, data + i * 8u, 8);
        else
            v = last_word(data, len);
        if (v == w[i])
            continue;
        w[i] = v;
        memcpy(body + n * 8u, &v, 8);
        n++;
        m |= 1u << i;
    }
    if (n > UB_SHM_DELTA_BODY / 8u)
        return 0; /* whole: the context holds the datagram already */
    if (n == 0) { /* the same datagram again: one word, so that an encoded slot has a body */
        memcpy(body, &w[0], 8);
        m = 1;
        n = 1;
    }
    *mask = (uint16_t)m;
    return n * 8u;
}

void ub__shm_delta_note(struct ub__shm_delta *d, const uint8_t *data, uint32_t len)
{
    set_ctx(&d->c[ub__shm_delta_index(len)], data, len);
}

int ub__shm_delta_decode(struct ub__shm_delta *d, uint32_t len, uint16_t mask, const uint8_t *body,
                         uint8_t *out, uint32_t out_room)
{
    if (!ub__shm_delta_fits(len))
        return UB_EBADMSG;
    struct ub__shm_delta_ctx *c = &d->c[ub__shm_delta_index(len)];
    uint32_t words = (len + 7u) / 8u, m = mask;
    for (uint32_t k = 0; k < UB_SHM_DELTA_BODY / 8u; k++) /* more words than the body holds? */
        m &= m - 1;
    if (c->len != len || mask == 0 || (mask >> words) != 0 || m != 0 || out_room < len)
        return UB_EBADMSG;
    for (uint32_t k = 0, b = mask; b; b &= b - 1, k++)
        memcpy(&c->w[__builtin_ctz(b)], body + k * 8u, 8);
    /* Whole lines when there is room: a fixed-size copy is a few moves, a variable one a call.
     * (Bytes past len are the context's zeros, or a hostile producer's own noise.) */
    if (out_room >= UB_SHM_DELTA_MAX)
        memcpy(out, c->w, UB_SHM_DELTA_MAX);
    else
        memcpy(out, c->w, len);
    return 0;
}
