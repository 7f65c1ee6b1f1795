/* Segments: registration with a token, export, import, revocation. */
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "api/api.h"
#include "core/compiler.h"
#include "wire/cursor.h"

#define ACCESS_ALL (UB_ACCESS_LOCAL_WRITE | UB_ACCESS_READ | UB_ACCESS_WRITE | UB_ACCESS_ATOMIC)

static int seg_register_impl(ub_context *ctx, void *addr, size_t len, uint32_t access,
                             uint64_t token, ub_seg **out)
{
    if (!ctx || !addr || !len || !out || (access & ~(uint32_t)ACCESS_ALL))
        return UB_EINVAL;
    /* A range past the end of the address space is no memory anyone has (a length of
     * (size_t)-1 for "all of it", say): peers would be let at addresses that wrap. */
    if (len > UINTPTR_MAX - (uintptr_t)addr)
        return UB_EINVAL;
    uint32_t key = ub__ctx_new_id(ctx, UB__OBJ_SEG);
    ub_seg *s = calloc(1, sizeof(*s));
    if (!s || !key) {
        free(s);
        return UB_ENOMEM;
    }
    s->ctx = ctx;
    s->key = key;
    s->addr = addr;
    s->len = len;
    s->access = access;
    s->token = token;
    int rc = ub__hmap_put(&ctx->objs, ub__obj_key(UB__OBJ_SEG, key), s);
    if (rc) {
        free(s);
        return rc;
    }
    ub__list_push_back(&ctx->segs, &s->link);
    *out = s;
    return 0;
}

UB_EXPORT int ub_seg_register(ub_context *ctx, void *addr, size_t len, uint32_t access,
                              uint64_t token, ub_seg **out)
{
    if (!ctx)
        return UB_EINVAL;
    ub_context *ctx_ = ctx;
    ub__ctx_lock(ctx_);
    int rc = seg_register_impl(ctx, addr, len, access, token, out);
    ub__ctx_unlock(ctx_);
    return rc;
}

static int seg_unregister_impl(ub_seg *s)
{
    if (!s)
        return UB_EINVAL;
    /* Out of the table: the next packet that names it is refused (revocation is immediate). */
    ub__hmap_del(&s->ctx->objs, ub__obj_key(UB__OBJ_SEG, s->key));
    if (s->ctx->ses.seg_last == s) /* the target's lookup cache */
        s->ctx->ses.seg_last = NULL;
    ub__list_remove(&s->link);
    /* READ data sent from it by reference and still held for retransmission: copied in. */
    ub__pds_flatten_range(s->ctx->eng.pds, s->addr, s->len);
    free(s);
    return 0;
}

UB_EXPORT int ub_seg_unregister(ub_seg *s)
{
    if (!s)
        return UB_EINVAL;
    ub_context *ctx_ = s->ctx;
    ub__ctx_lock(ctx_);
    int rc = seg_unregister_impl(s);
    ub__ctx_unlock(ctx_);
    return rc;
}

UB_EXPORT int ub_seg_export(const ub_seg *s, void *desc, size_t len)
{
    if (!s || !desc || len < UB_SEG_DESC_SIZE)
        return UB_EINVAL;
    uint8_t *d = desc;
    memset(d, 0, UB_SEG_DESC_SIZE);
    memcpy(d, "UBS1", 4);
    d[4] = (uint8_t)s->access;
    ub__desc_put_addr(d, &s->ctx->addr);
    d[28] = (uint8_t)(s->key >> 24);
    d[29] = (uint8_t)(s->key >> 16);
    d[30] = (uint8_t)(s->key >> 8);
    d[31] = (uint8_t)s->key;
    ub__st64(d + 32, (uint64_t)(uintptr_t)s->addr);
    ub__st64(d + 40, s->len);
    ub__desc_put_alt(d, s->ctx);
    return UB_SEG_DESC_SIZE;
}

static int seg_import_impl(ub_context *ctx, const void *desc, size_t len, uint64_t token,
                           ub_tseg **out)
{
    if (!ctx || !desc || !out || len < UB_SEG_DESC_SIZE)
        return UB_EINVAL;
    const uint8_t *d = desc;
    /* What registration accepts: a non-empty range that does not wrap. */
    uint64_t base = ub__ld64(d + 32), n = ub__ld64(d + 40);
    if (memcmp(d, "UBS1", 4) != 0 || (d[4] & ~ACCESS_ALL) || !n || n > UINT64_MAX - base)
        return UB_EINVAL;
    ub_tseg *t = calloc(1, sizeof(*t));
    if (!t)
        return UB_ENOMEM;
    if (ub__desc_get_addr(d, &t->addr)) {
        free(t);
        return UB_EINVAL;
    }
    ub__desc_route(ctx, d, &t->addr);
    t->ctx = ctx;
    t->access = d[4];
    t->key = ((uint32_t)d[28] << 24) | ((uint32_t)d[29] << 16) | ((uint32_t)d[30] << 8) | d[31];
    t->base = base;
    t->len = n;
    t->token = token;
    ub__list_push_back(&ctx->tsegs, &t->link);
    *out = t;
    return 0;
}

UB_EXPORT int ub_seg_import(ub_context *ctx, const void *desc, size_t len, uint64_t token,
                            ub_tseg **out)
{
    if (!ctx)
        return UB_EINVAL;
    ub_context *ctx_ = ctx;
    ub__ctx_lock(ctx_);
    int rc = seg_import_impl(ctx, desc, len, token, out);
    ub__ctx_unlock(ctx_);
    return rc;
}

static int seg_unimport_impl(ub_tseg *t)
{
    if (!t)
        return UB_EINVAL;
    ub__list_remove(&t->link);
    free(t);
    return 0;
}

UB_EXPORT int ub_seg_unimport(ub_tseg *t)
{
    if (!t)
        return UB_EINVAL;
    ub_context *ctx_ = t->ctx;
    ub__ctx_lock(ctx_);
    int rc = seg_unimport_impl(t);
    ub__ctx_unlock(ctx_);
    return rc;
}

UB_EXPORT uint64_t ub_tseg_base(const ub_tseg *t)
{
    return t ? t->base : 0;
}

UB_EXPORT uint64_t ub_tseg_len(const ub_tseg *t)
{
    return t ? t->len : 0;
}
