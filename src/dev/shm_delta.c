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

/* Word i of the datagram into the body (at most its last word, then the whole datagram). */
static inline bool put_word(struct ub__shm_delta_ctx *c, uint32_t i, uint64_t v, uint8_t *out,
                            uint32_t *n, uint16_t *m)
{
    if (v == c->w[i])
        return true;
    if (*n == UB_SHM_DELTA_BODY / 8u)
        return false;
    c->w[i] = v;
    memcpy(out + *n * 8u, &v, 8);
    *m = (uint16_t)(*m | (1u << i));
    ++*n;
    return true;
}

uint32_t ub__shm_delta_encode(struct ub__shm_delta *d, const uint8_t *data, uint32_t len,
                              uint8_t *out, uint16_t *mask)
{
    struct ub__shm_delta_ctx *c = &d->c[ub__shm_delta_index(len)];
    uint32_t full = len / 8u, n = 0;
    uint16_t m = 0;
    if (c->len != len)
        goto whole;
    for (uint32_t i = 0; i < full; i++) {
        uint64_t v;
        memcpy(&v, data + i * 8u, 8);
        if (!put_word(c, i, v, out, &n, &m))
            goto whole;
    }
    if (len % 8u) {
        uint64_t v = 0;
        memcpy(&v, data + full * 8u, len % 8u);
        if (!put_word(c, full, v, out, &n, &m))
            goto whole;
    }
    if (n == 0) { /* the same datagram again: one word, so that an encoded slot has a body */
        memcpy(out, &c->w[0], 8);
        m = 1;
        n = 1;
    }
    *mask = m;
    return n * 8u;
whole: /* the context may hold some of the words already: all of them now */
    set_ctx(c, data, len);
    return 0;
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
