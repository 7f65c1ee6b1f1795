/*
 * Fuzz target: importing descriptors (ub_jetty_import, ub_seg_import), the bytes a peer ships
 * out of band. The input is tried as both kinds, and, with its first bytes replaced by each
 * kind's magic, again (so that the fields behind the magic are reached). Invariants: an
 * import returns 0 or UB_EINVAL; a success holds exactly the descriptor's fields (an
 * address of a known family, a JFR id in range, access bits the API knows) and unimports.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <softub/errors.h>
#include <softub/urma.h>
#include "api/api.h"
#include "fuzz.h"

static ub_context *ctx_get(void)
{
    static ub_loopnet *net;
    static ub_context *ctx;
    if (!ctx) {
        CHECK(ub_loopnet_create(NULL, &net) == 0);
        struct ub_context_attr ca = {.seed = 1, .loopnet = net};
        CHECK(ub_context_open("loop:1", &ca, &ctx) == 0);
    }
    return ctx;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void jetty(ub_context *ctx, const uint8_t *d, size_t n)
{
    ub_tjetty *tj = NULL;
    int rc = ub_jetty_import(ctx, d, n, &tj);
    CHECK(rc == 0 || rc == UB_EINVAL);
    if (rc)
        return;
    CHECK(n >= UB_JETTY_DESC_SIZE && memcmp(d, "UBJ1", 4) == 0);
    CHECK(tj->flags == d[4] && tj->flags <= 1);
    CHECK(tj->jfr == be32(d + 28) && tj->jfr && tj->jfr <= UB_API_ID_MAX);
    CHECK(tj->addr.family == d[5] && tj->addr.family != UB_AF_NONE && tj->addr.family <= UB_AF_SHM);
    CHECK(tj->addr.port == (uint16_t)(d[6] << 8 | d[7]) && tj->addr.scope_id == be32(d + 8));
    CHECK(memcmp(tj->addr.ip, d + 12, 16) == 0);
    CHECK(ub_jetty_unimport(tj) == 0);
}

static void seg(ub_context *ctx, const uint8_t *d, size_t n)
{
    ub_tseg *ts = NULL;
    int rc = ub_seg_import(ctx, d, n, 0x1234, &ts);
    CHECK(rc == 0 || rc == UB_EINVAL);
    if (rc)
        return;
    CHECK(n >= UB_SEG_DESC_SIZE && memcmp(d, "UBS1", 4) == 0);
    CHECK(ts->access == d[4] && !(ts->access & ~(uint32_t)(UB_ACCESS_LOCAL_WRITE | UB_ACCESS_READ |
                                                           UB_ACCESS_WRITE | UB_ACCESS_ATOMIC)));
    CHECK(ts->key == be32(d + 28) && ts->token == 0x1234);
    CHECK(ts->len && ts->base + ts->len > ts->base); /* a range that does not wrap */
    CHECK(ts->addr.family == d[5] && ts->addr.family != UB_AF_NONE && ts->addr.family <= UB_AF_SHM);
    CHECK(ub_seg_unimport(ts) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ub_context *ctx = ctx_get();
    jetty(ctx, data, size);
    seg(ctx, data, size);
    uint8_t d[2 * UB_SEG_DESC_SIZE];
    size_t n = size < sizeof(d) ? size : sizeof(d);
    if (n < 4)
        return 0;
    memcpy(d, data, n);
    memcpy(d, "UBJ1", 4);
    jetty(ctx, d, n);
    memcpy(d, "UBS1", 4);
    seg(ctx, d, n);
    return 0;
}
