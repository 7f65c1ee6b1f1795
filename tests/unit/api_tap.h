/*
 * A tap between PDS and the transaction layer of one context, for tests that
 * capture request packets and deliver them again, as a re-established PDC
 * would. One tap per test program (TAP is file-static).
 */
#ifndef UB_TEST_API_TAP_H
#define UB_TEST_API_TAP_H

#include <stdlib.h>
#include <string.h>

#include "pds/pds_int.h"
#include "wire/datagram.h"

#define TAP_MAX 8

struct tap {
    const struct ub__pds_upcalls *up; /* the transaction layer's own upcalls */
    void *arg;
    ub_context *ctx;
    uint8_t *saved[TAP_MAX]; /* whole datagrams of captured requests */
    uint32_t saved_len[TAP_MAX];
    uint32_t n, limit;
    bool record;                               /* capture matching requests (up to limit) */
    bool swallow;                              /* captured requests are not passed on */
    bool (*keep)(const struct ub__pds_rx *rx); /* which requests to capture; NULL: all */
    bool rsp;                                  /* capture responses with data, not requests */
    uint16_t src_port;                         /* loop port re-delivered packets come from */
};
static struct tap TAP;

static inline void tap_deliver(void *arg, const struct ub__pds_rx *rx, uint64_t now)
{
    (void)arg;
    uint8_t kind = TAP.rsp ? UB_PDS_NH_RSP_DATA : UB_PDS_NH_REQ_STD;
    if (TAP.record && TAP.n < TAP.limit && rx->hdr->ses_kind == kind &&
        (!TAP.keep || TAP.keep(rx))) {
        const uint8_t *start = rx->payload - rx->hdr->payload_off;
        TAP.saved[TAP.n] = malloc(rx->hdr->len);
        memcpy(TAP.saved[TAP.n], start, rx->hdr->len);
        TAP.saved_len[TAP.n++] = (uint32_t)rx->hdr->len;
        if (TAP.swallow)
            return;
    }
    TAP.up->deliver(TAP.arg, rx, now);
}

static inline void tap_acked(void *arg, uint64_t c, uint64_t now)
{
    (void)arg;
    TAP.up->acked(TAP.arg, c, now);
}

static inline void tap_failed(void *arg, uint64_t c, int err, uint64_t now)
{
    (void)arg;
    TAP.up->failed(TAP.arg, c, err, now);
}

static const struct ub__pds_upcalls tap_up = {
    .deliver = tap_deliver, .acked = tap_acked, .failed = tap_failed};

static inline void tap_free(void)
{
    for (uint32_t i = 0; i < TAP.n; i++)
        free(TAP.saved[i]);
    TAP.n = 0;
}

/* Puts the tap in front of ctx's transaction layer; captures up to limit (<= TAP_MAX). */
static inline void tap_install(ub_context *ctx, uint32_t limit)
{
    struct ub__pds *pds = ctx->eng.pds;
    tap_free();
    memset(&TAP, 0, sizeof(TAP));
    TAP.up = pds->up;
    TAP.arg = pds->up_arg;
    TAP.ctx = ctx;
    TAP.limit = limit < TAP_MAX ? limit : TAP_MAX;
    ub__pds_set_upcalls(pds, &tap_up, NULL);
}

/* Delivers a (possibly altered) captured datagram to the transaction layer again. */
static inline void tap_redeliver_buf(const uint8_t *buf, uint32_t len)
{
    struct ub__wire_dgram d;
    assert_int_equal(ub__wire_parse_datagram(&d, buf, len, 0), 0);
    struct ub__addr src;
    ub__addr_loop(&src, TAP.src_port);
    struct ub__pds_rx rx = {.src = &src,
                            .incarnation = d.ext.incarnation,
                            .mode = UB_PDS_RUD,
                            .hdr = &d,
                            .payload = buf + d.payload_off,
                            .payload_len = (uint32_t)d.payload_len};
    TAP.up->deliver(TAP.arg, &rx, ub__ctx_now(TAP.ctx));
}

static inline void tap_redeliver(uint32_t i)
{
    tap_redeliver_buf(TAP.saved[i], TAP.saved_len[i]);
}

#endif
