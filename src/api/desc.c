/*
 * Descriptor addressing beyond the primary address: a context with a udp and a shm
 * endpoint ("udp://...?shm=1") advertises its shm endpoint and its host in every
 * descriptor; an importer on the same host that has a shm endpoint too sends through
 * shared memory, everyone else through udp. docs/api.md, "Devices and addresses".
 */
#include <string.h>

#include "api/api.h"
#include "dev/shm.h"

#define ALT_OFF 48

void ub__desc_put_alt(uint8_t *d, const ub_context *ctx)
{
    const struct ub__ctx *x = ub__ctx_of(ctx);
    memset(d + ALT_OFF, 0, 8);
    if (x->kind != UB_CTX_MULTI || !x->host_id)
        return;
    d[ALT_OFF] = UB_AF_SHM;
    d[ALT_OFF + 1] = (uint8_t)(x->shm_addr.port >> 8);
    d[ALT_OFF + 2] = (uint8_t)x->shm_addr.port;
    for (int i = 0; i < 4; i++)
        d[ALT_OFF + 4 + i] = (uint8_t)(x->host_id >> (24 - 8 * i));
}

void ub__desc_route(ub_context *importer, const uint8_t *d, struct ub__addr *a)
{
    const struct ub__ctx *x = ub__ctx_of(importer);
    if ((x->kind != UB_CTX_MULTI && x->kind != UB_CTX_SHM) || d[ALT_OFF] != UB_AF_SHM)
        return;
    uint32_t host = 0;
    for (int i = 0; i < 4; i++)
        host = (host << 8) | d[ALT_OFF + 4 + i];
    if (!host || host != x->host_id)
        return;
    struct ub__addr alt;
    ub__shm_addr(&alt, (uint16_t)((d[ALT_OFF + 1] << 8) | d[ALT_OFF + 2]));
    if (alt.port && ub__shm_reachable(&alt) == 0)
        *a = alt;
}
