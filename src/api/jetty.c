/* JFS, JFR and jettys: creation, destruction (flushing), receive posting, export/import. */
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "api/api.h"
#include "core/compiler.h"

/*
 * The body of an entry point: UB_EINVAL without obj, else call with the context locked.
 * The context is read first: the call may free obj.
 */
#define LOCKED_CALL(obj, ctx, call)            \
    do {                                       \
        if (!(obj))                            \
            return UB_EINVAL;                  \
        ub_context *const locked_ctx_ = (ctx); \
        ub__ctx_lock(locked_ctx_);             \
        int locked_rc_ = (call);               \
        ub__ctx_unlock(locked_ctx_);           \
        return locked_rc_;                     \
    } while (0)

/* Commits depth berths on jfc; the ring can then never overflow. */
static int commit(ub_jfc *jfc, uint32_t depth)
{
    if (depth > jfc->cap || jfc->committed > jfc->cap - depth)
        return UB_EINVAL;
    jfc->committed += depth;
    jfc->users++;
    return 0;
}

/* Gives back the berths not held by records still in the ring (those go when polled). */
/* A JFS or JFR going away leaves no JFC pointing at it (any JFC: an id looked up for an
 * older record may have found it). */
static void forget_owner(ub_context *ctx, const ub_jfs *jfs, const ub_jfr *jfr)
{
    struct ub__list *it;
    UB_LIST_FOR_EACH(it, &ctx->jfcs)
    {
        ub_jfc *c = UB_CONTAINER_OF(it, ub_jfc, link);
        if (jfs && c->last_jfs == jfs)
            c->last_jfs = NULL;
        if (jfr && c->last_jfr == jfr)
            c->last_jfr = NULL;
    }
}

static void uncommit(ub_jfc *jfc, uint32_t depth, uint32_t held)
{
    jfc->committed -= depth - held;
    jfc->users--;
}

static void jfs_free(ub_jfs *j)
{
    ub__hmap_fini(&j->ostreams);
    free(j->wrs);
    free(j->free_stack);
    free(j->sge_mem);
    free(j->inl_mem);
    free(j);
}

static int jfs_create_impl(ub_context *ctx, const struct ub_jfs_attr *attr, ub_jfs **out)
{
    if (!ctx || !attr || !out || !attr->jfc || attr->jfc->ctx != ctx)
        return UB_EINVAL;
    struct ub_jfs_attr a = *attr;
    if (!a.depth)
        a.depth = UB_API_DEFAULT_DEPTH;
    if (!a.max_sge)
        a.max_sge = UB_API_DEFAULT_SGE;
    if (!a.max_inline)
        a.max_inline = UB_API_DEFAULT_INLINE;
    if (!a.rnr_retry)
        a.rnr_retry = UB_SES_RNR_RETRY;
    else if (a.rnr_retry == UB_RNR_NO_RETRY)
        a.rnr_retry = 0;
    if (a.depth > UB_SES_WINDOW || a.max_sge > UB_API_MAX_SGE || a.max_inline > UB_API_MAX_INLINE ||
        (a.tm != UB_TM_RUD && a.tm != UB_TM_ROD))
        return UB_EINVAL;
    uint32_t id = ub__ctx_new_id(ctx, UB__OBJ_JFS);
    ub_jfs *j = calloc(1, sizeof(*j));
    if (!j || !id) {
        free(j);
        return UB_ENOMEM;
    }
    j->wrs = calloc(a.depth, sizeof(*j->wrs));
    j->free_stack = calloc(a.depth, sizeof(*j->free_stack));
    j->sge_mem = calloc((size_t)a.depth * a.max_sge, sizeof(*j->sge_mem));
    j->inl_mem = malloc((size_t)a.depth * a.max_inline);
    int rc = UB_ENOMEM;
    if (!j->wrs || !j->free_stack || !j->sge_mem || !j->inl_mem ||
        ub__hmap_init(&j->ostreams, 4, 0, id))
        goto fail;
    if ((rc = commit(a.jfc, a.depth)) != 0)
        goto fail;
    j->ctx = ctx;
    j->id = id;
    j->attr = a;
    j->jfc = a.jfc;
    ub__list_init(&j->unreported);
    for (uint32_t i = 0; i < a.depth; i++) {
        struct ub__wr *w = &j->wrs[i];
        w->idx = (uint16_t)i;
        w->sge = &j->sge_mem[(size_t)i * a.max_sge];
        w->inl = &j->inl_mem[(size_t)i * a.max_inline];
        ub__ses_wr_init_timer(w);
        j->free_stack[i] = (uint16_t)(a.depth - 1 - i);
    }
    j->nfree = a.depth;
    if ((rc = ub__hmap_put(&ctx->objs, ub__obj_key(UB__OBJ_JFS, id), j)) != 0) {
        uncommit(a.jfc, a.depth, 0);
        goto fail;
    }
    ub__list_push_back(&ctx->jfss, &j->link);
    *out = j;
    return 0;
fail:
    jfs_free(j);
    return rc;
}

UB_EXPORT int ub_jfs_create(ub_context *ctx, const struct ub_jfs_attr *attr, ub_jfs **out)
{
    LOCKED_CALL(ctx, ctx, jfs_create_impl(ctx, attr, out));
}

static int jfs_destroy_impl(ub_jfs *j)
{
    if (!j)
        return UB_EINVAL;
    if (j->jetty && !j->ctx->closing)
        return UB_EBUSY; /* destroy the jetty instead */
    ub_context *ctx = j->ctx;
    ub__ses_jfs_flush(j, ub__ctx_now(ctx));
    ub__hmap_del(&ctx->objs, ub__obj_key(UB__OBJ_JFS, j->id));
    forget_owner(ctx, j, NULL);
    if (ctx->ses.jfs_last == j)
        ctx->ses.jfs_last = NULL;
    uncommit(j->jfc, j->attr.depth, j->used);
    ub__list_remove(&j->link);
    jfs_free(j);
    return 0;
}

UB_EXPORT int ub_jfs_destroy(ub_jfs *j)
{
    LOCKED_CALL(j, j->ctx, jfs_destroy_impl(j));
}

static void jfr_free(ub_jfr *r)
{
    free(r->bufs);
    free(r->free_stack);
    free(r->sge_mem);
    free(r);
}

static int jfr_create_impl(ub_context *ctx, const struct ub_jfr_attr *attr, ub_jfr **out)
{
    if (!ctx || !attr || !out || !attr->jfc || attr->jfc->ctx != ctx)
        return UB_EINVAL;
    struct ub_jfr_attr a = *attr;
    if (!a.depth)
        a.depth = UB_API_DEFAULT_DEPTH;
    if (!a.max_sge)
        a.max_sge = UB_API_DEFAULT_SGE;
    if (a.depth > (1u << 20) || a.max_sge > UB_API_MAX_SGE || a.id > UB_API_ID_MAX)
        return UB_EINVAL;
    uint32_t id = a.id;
    if (id) {
        if (ub__hmap_get(&ctx->objs, ub__obj_key(UB__OBJ_JFR, id)))
            return UB_EEXIST;
    } else if (!(id = ub__ctx_new_id(ctx, UB__OBJ_JFR))) {
        return UB_ENOMEM;
    }
    ub_jfr *r = calloc(1, sizeof(*r));
    if (!r)
        return UB_ENOMEM;
    r->bufs = calloc(a.depth, sizeof(*r->bufs));
    r->free_stack = calloc(a.depth, sizeof(*r->free_stack));
    r->sge_mem = calloc((size_t)a.depth * a.max_sge, sizeof(*r->sge_mem));
    int rc = UB_ENOMEM;
    if (!r->bufs || !r->free_stack || !r->sge_mem)
        goto fail;
    if ((rc = commit(a.jfc, a.depth)) != 0)
        goto fail;
    r->ctx = ctx;
    r->id = id;
    r->attr = a;
    r->attr.id = id;
    r->jfc = a.jfc;
    r->refs = 1;
    ub__list_init(&r->posted);
    ub__list_init(&r->reserved);
    ub__list_init(&r->unexpected);
    ub__list_init(&r->deferred);
    for (uint32_t i = 0; i < a.depth; i++) {
        r->bufs[i].idx = i;
        r->bufs[i].sge = &r->sge_mem[(size_t)i * a.max_sge];
        ub__list_init(&r->bufs[i].link);
        r->free_stack[i] = a.depth - 1 - i;
    }
    r->nfree = a.depth;
    if ((rc = ub__hmap_put(&ctx->objs, ub__obj_key(UB__OBJ_JFR, id), r)) != 0) {
        uncommit(a.jfc, a.depth, 0);
        goto fail;
    }
    ub__list_push_back(&ctx->jfrs, &r->link);
    *out = r;
    return 0;
fail:
    jfr_free(r);
    return rc;
}

UB_EXPORT int ub_jfr_create(ub_context *ctx, const struct ub_jfr_attr *attr, ub_jfr **out)
{
    LOCKED_CALL(ctx, ctx, jfr_create_impl(ctx, attr, out));
}

static int jfr_destroy_impl(ub_jfr *r)
{
    if (!r)
        return UB_EINVAL;
    if (r->refs > 1)
        return UB_EBUSY; /* a jetty's, or still shared by one: destroy the jetty first */
    ub_context *ctx = r->ctx;
    ub__ses_jfr_flush(r, ub__ctx_now(ctx));
    ub__hmap_del(&ctx->objs, ub__obj_key(UB__OBJ_JFR, r->id));
    forget_owner(ctx, NULL, r);
    if (ctx->ses.jfr_last == r)
        ctx->ses.jfr_last = NULL;
    uncommit(r->jfc, r->attr.depth, r->used);
    ub__list_remove(&r->link);
    jfr_free(r);
    return 0;
}

UB_EXPORT int ub_jfr_destroy(ub_jfr *r)
{
    LOCKED_CALL(r, r->ctx, jfr_destroy_impl(r));
}

static int post_recv_impl(ub_jfr *r, struct ub_rwr *wr, struct ub_rwr **bad_wr)
{
    if (!r)
        return UB_EINVAL;
    uint64_t now = 0;
    bool have_now = false; /* read when first needed: a ping-pong's repost never does */
    for (; wr; wr = wr->next) {
        int rc = 0;
        uint64_t cap = 0;
        if (wr->num_sge > r->attr.max_sge || (wr->num_sge && !wr->sge))
            rc = UB_EINVAL;
        for (uint32_t i = 0; !rc && i < wr->num_sge; i++) {
            const struct ub_sge *g = &wr->sge[i];
            cap += g->len;
            if (g->len &&
                (!g->seg || g->seg->ctx != r->ctx || !(g->seg->access & UB_ACCESS_LOCAL_WRITE) ||
                 !ub__seg_covers(g->seg, g->addr, g->len)))
                rc = UB_EINVAL;
        }
        if (!rc && (r->used >= r->attr.depth || !r->nfree))
            rc = UB_EFULL;
        if (rc) {
            if (bad_wr)
                *bad_wr = wr;
            return rc;
        }
        struct ub__rbuf *rb = &r->bufs[r->free_stack[--r->nfree]];
        rb->user_ctx = wr->user_ctx;
        if (wr->num_sge == 1) /* the usual receive: no library call for one entry */
            rb->sge[0] = wr->sge[0];
        else if (wr->num_sge)
            memcpy(rb->sge, wr->sge, wr->num_sge * sizeof(*rb->sge));
        rb->num_sge = wr->num_sge;
        rb->cap = cap;
        rb->tag = wr->tag;
        rb->ignore = wr->ignore;
        rb->in_use = true;
        r->used++;
        ub__list_push_back(&r->posted, &rb->link);
        /* Only messages waiting for a buffer (deferred SENDs, unexpected tagged ones) make the
         * new buffer matter to the transaction layer, and they need the time. */
        if (ub__ses_jfr_posted_needs_now(r)) {
            if (!have_now) {
                now = ub__ctx_now(r->ctx);
                have_now = true;
            }
            ub__ses_jfr_posted(r, now);
        }
    }
    return 0;
}

UB_EXPORT int ub_post_recv(ub_jfr *r, struct ub_rwr *wr, struct ub_rwr **bad_wr)
{
    LOCKED_CALL(r, r->ctx, post_recv_impl(r, wr, bad_wr));
}

static int jetty_create_impl(ub_context *ctx, const struct ub_jetty_attr *attr, ub_jetty **out)
{
    if (!ctx || !attr || !out || (attr->shared_jfr && attr->shared_jfr->ctx != ctx))
        return UB_EINVAL;
    ub_jetty *jt = calloc(1, sizeof(*jt));
    if (!jt)
        return UB_ENOMEM;
    int rc = ub_jfs_create(ctx, &attr->jfs, &jt->jfs);
    if (rc) {
        free(jt);
        return rc;
    }
    if (attr->shared_jfr) {
        jt->jfr = attr->shared_jfr;
        jt->shared_jfr = true;
    } else if ((rc = ub_jfr_create(ctx, &attr->jfr, &jt->jfr)) != 0) {
        ub_jfs_destroy(jt->jfs);
        free(jt);
        return rc;
    }
    jt->jfr->refs++; /* its own too: ub_jfr_destroy leaves it to ub_jetty_destroy (UB_EBUSY) */
    jt->ctx = ctx;
    jt->jfs->jetty = jt;
    ub__list_push_back(&ctx->jettys, &jt->link);
    *out = jt;
    return 0;
}

UB_EXPORT int ub_jetty_create(ub_context *ctx, const struct ub_jetty_attr *attr, ub_jetty **out)
{
    LOCKED_CALL(ctx, ctx, jetty_create_impl(ctx, attr, out));
}

static int jetty_destroy_impl(ub_jetty *jt)
{
    if (!jt)
        return UB_EINVAL;
    jt->jfs->jetty = NULL;
    ub_jfs_destroy(jt->jfs);
    jt->jfr->refs--;
    if (!jt->shared_jfr)
        ub_jfr_destroy(jt->jfr);
    ub__list_remove(&jt->link);
    free(jt);
    return 0;
}

UB_EXPORT int ub_jetty_destroy(ub_jetty *jt)
{
    LOCKED_CALL(jt, jt->ctx, jetty_destroy_impl(jt));
}

UB_EXPORT ub_jfs *ub_jetty_jfs(ub_jetty *jt)
{
    return jt ? jt->jfs : NULL;
}

UB_EXPORT ub_jfr *ub_jetty_jfr(ub_jetty *jt)
{
    return jt ? jt->jfr : NULL;
}

UB_EXPORT uint32_t ub_jfs_id(const ub_jfs *j)
{
    return j ? j->id : 0;
}

UB_EXPORT uint32_t ub_jfr_id(const ub_jfr *r)
{
    return r ? r->id : 0;
}

UB_EXPORT int ub_post_jetty_send(ub_jetty *jt, struct ub_wr *wr, struct ub_wr **bad_wr)
{
    return jt ? ub_post_send(jt->jfs, wr, bad_wr) : UB_EINVAL;
}

UB_EXPORT int ub_post_jetty_recv(ub_jetty *jt, struct ub_rwr *wr, struct ub_rwr **bad_wr)
{
    return jt ? ub_post_recv(jt->jfr, wr, bad_wr) : UB_EINVAL;
}

/* ---- descriptors ---------------------------------------------------------------------------- */

static void put32(uint8_t *b, uint32_t v)
{
    b[0] = (uint8_t)(v >> 24);
    b[1] = (uint8_t)(v >> 16);
    b[2] = (uint8_t)(v >> 8);
    b[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *b)
{
    return ((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) | ((uint32_t)b[2] << 8) | b[3];
}

void ub__desc_put_addr(uint8_t *d, const struct ub__addr *a)
{
    d[5] = a->family;
    d[6] = (uint8_t)(a->port >> 8);
    d[7] = (uint8_t)a->port;
    put32(d + 8, a->scope_id);
    memcpy(d + 12, a->ip, 16);
}

int ub__desc_get_addr(const uint8_t *d, struct ub__addr *a)
{
    memset(a, 0, sizeof(*a));
    a->family = d[5];
    a->port = (uint16_t)((d[6] << 8) | d[7]);
    a->scope_id = get32(d + 8);
    memcpy(a->ip, d + 12, 16);
    return a->family == UB_AF_NONE || a->family > UB_AF_SHM ? UB_EINVAL : 0;
}

UB_EXPORT int ub_jfr_export(const ub_jfr *r, void *desc, size_t len)
{
    if (!r || !desc || len < UB_JETTY_DESC_SIZE)
        return UB_EINVAL;
    uint8_t *d = desc;
    memset(d, 0, UB_JETTY_DESC_SIZE);
    memcpy(d, "UBJ1", 4);
    d[4] = r->attr.tag_matching ? 1 : 0;
    ub__desc_put_addr(d, &r->ctx->addr);
    put32(d + 28, r->id);
    ub__desc_put_alt(d, r->ctx);
    return UB_JETTY_DESC_SIZE;
}

UB_EXPORT int ub_jetty_export(const ub_jetty *jt, void *desc, size_t len)
{
    return jt ? ub_jfr_export(jt->jfr, desc, len) : UB_EINVAL;
}

static int jetty_import_impl(ub_context *ctx, const void *desc, size_t len, ub_tjetty **out)
{
    if (!ctx || !desc || !out || len < UB_JETTY_DESC_SIZE)
        return UB_EINVAL;
    const uint8_t *d = desc;
    if (memcmp(d, "UBJ1", 4) != 0 || d[4] > 1)
        return UB_EINVAL;
    struct ub__addr a;
    if (ub__desc_get_addr(d, &a))
        return UB_EINVAL;
    ub__desc_route(ctx, d, &a);
    uint32_t id = get32(d + 28);
    if (!id || id > UB_API_ID_MAX)
        return UB_EINVAL;
    ub_tjetty *tj = malloc(sizeof(*tj));
    if (!tj)
        return UB_ENOMEM;
    tj->ctx = ctx;
    tj->addr = a;
    tj->jfr = id;
    tj->flags = d[4];
    ub__list_push_back(&ctx->tjettys, &tj->link);
    *out = tj;
    return 0;
}

UB_EXPORT int ub_jetty_import(ub_context *ctx, const void *desc, size_t len, ub_tjetty **out)
{
    LOCKED_CALL(ctx, ctx, jetty_import_impl(ctx, desc, len, out));
}

static int jetty_unimport_impl(ub_tjetty *tj)
{
    if (!tj)
        return UB_EINVAL;
    ub__list_remove(&tj->link);
    free(tj);
    return 0;
}

UB_EXPORT int ub_jetty_unimport(ub_tjetty *tj)
{
    LOCKED_CALL(tj, tj->ctx, jetty_unimport_impl(tj));
}
