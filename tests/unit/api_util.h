/* Helpers for the API tests: N contexts on one loop fabric, progress, waiting for records. */
#ifndef UB_TEST_API_UTIL_H
#define UB_TEST_API_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <softub/softub.h>
#include "api/api.h"
#include "dev/impair.h"
#include "dev/loop.h"
#include "unit/wr_util.h"

#define T_MAX_NODES 16

struct tnet {
    ub_loopnet *net;
    uint32_t n;
    ub_context *ctx[T_MAX_NODES];
    ub_jfc *jfc[T_MAX_NODES];
    ub_jetty *jetty[T_MAX_NODES];
    bool manual;
    uint32_t opens;
    struct ub__manual_clock mclock;
};

static inline void tnet_open_node(struct tnet *t, uint32_t i, bool tagged, uint32_t depth)
{
    char uri[32];
    snprintf(uri, sizeof(uri), "loop:%u", i);
    /* A reopened node is a new incarnation: it must not draw the same random numbers. */
    struct ub_context_attr ca = {.seed = 1000 + i + 7919ull * t->opens++, .loopnet = t->net};
    assert_int_equal(ub_context_open(uri, &ca, &t->ctx[i]), 0);
    struct ub_jfc_attr fa = {.depth = 4 * depth + 64};
    assert_int_equal(ub_jfc_create(t->ctx[i], &fa, &t->jfc[i]), 0);
    struct ub_jetty_attr ja;
    memset(&ja, 0, sizeof(ja));
    ja.jfs.depth = depth;
    ja.jfs.jfc = t->jfc[i];
    ja.jfs.max_sge = 4;
    ja.jfr.depth = depth;
    ja.jfr.jfc = t->jfc[i];
    ja.jfr.tag_matching = tagged;
    assert_int_equal(ub_jetty_create(t->ctx[i], &ja, &t->jetty[i]), 0);
}

/* An empty world on a new loop fabric; manual: time moves only when told. */
static inline void tnet_net(struct tnet *t, const struct ub_loopnet_attr *la, bool manual)
{
    memset(t, 0, sizeof(*t));
    assert_int_equal(ub_loopnet_create(la, &t->net), 0);
    if (manual) {
        t->manual = true;
        t->mclock.now = 1000000;
        struct ub__clock c = ub__clock_manual(&t->mclock);
        ub__loopnet_use_clock(t->net, &c);
    }
}

/* n nodes with a jetty each; drop_ppm on every direction; manual: time moves only when told. */
static inline void tnet_init(struct tnet *t, uint32_t n, uint32_t drop_ppm, bool manual,
                             bool tagged)
{
    struct ub_loopnet_attr la = {.ports = n < 4 ? 4 : n, .seed = 7 + n, .drop_ppm = drop_ppm};
    tnet_net(t, &la, manual);
    t->n = n;
    for (uint32_t i = 0; i < n; i++)
        tnet_open_node(t, i, tagged, 64);
}

/* The link from port src to port dst gets one impairment rule (dev/impair.h) in place of
 * whatever it had. */
static inline void tnet_impair(struct tnet *t, uint16_t src, uint16_t dst,
                               enum ub__impair_kind kind, uint64_t a, uint64_t b)
{
    struct ub__impair_cfg ic;
    memset(&ic, 0, sizeof(ic));
    ub__impair_add(&ic, kind, a, b, 0);
    assert_int_equal(ub__loopnet_impair(ub__loopnet_impl(t->net), src, dst, &ic), 0);
}

/* The link from port src to port dst clean again. */
static inline void tnet_heal(struct tnet *t, uint16_t src, uint16_t dst)
{
    assert_int_equal(ub__loopnet_impair(ub__loopnet_impl(t->net), src, dst, NULL), 0);
}

static inline void tnet_fini(struct tnet *t)
{
    for (uint32_t i = 0; i < t->n; i++)
        if (t->ctx[i])
            assert_int_equal(ub_context_close(t->ctx[i]), 0);
    assert_int_equal(ub_loopnet_destroy(t->net), 0);
}

/* One round of progress on every node; with a manual clock, time moves by step_ns first. */
static inline void tnet_step(struct tnet *t, uint64_t step_ns)
{
    if (t->manual)
        t->mclock.now += step_ns;
    for (uint32_t i = 0; i < t->n; i++)
        if (t->ctx[i])
            ub_progress(t->ctx[i]);
}

/* Progresses everyone until node i's JFC yields a record (or a bound of rounds). */
static inline int tnet_wait(struct tnet *t, uint32_t i, struct ub_cr *cr)
{
    for (int round = 0; round < 2000000; round++) {
        int n = ub_poll_jfc(t->jfc[i], 1, cr);
        if (n)
            return n;
        tnet_step(t, 10000);
    }
    return 0;
}

static inline ub_tjetty *tnet_import_jetty(struct tnet *t, uint32_t from, uint32_t to)
{
    uint8_t d[UB_JETTY_DESC_SIZE];
    assert_int_equal(ub_jetty_export(t->jetty[to], d, sizeof(d)), UB_JETTY_DESC_SIZE);
    ub_tjetty *tj;
    assert_int_equal(ub_jetty_import(t->ctx[from], d, sizeof(d), &tj), 0);
    return tj;
}

static inline ub_tseg *tnet_import_seg(struct tnet *t, uint32_t from, ub_seg *seg, uint64_t token)
{
    uint8_t d[UB_SEG_DESC_SIZE];
    assert_int_equal(ub_seg_export(seg, d, sizeof(d)), UB_SEG_DESC_SIZE);
    ub_tseg *ts;
    assert_int_equal(ub_seg_import(t->ctx[from], d, sizeof(d), token, &ts), 0);
    return ts;
}

/* Node 0 posts a signalled WRITE of len bytes at src (segment seg) to ts at offset off. */
static inline void tnet_post_write(struct tnet *t, void *src, uint32_t len, ub_seg *seg,
                                   ub_tseg *ts, uint64_t off, uint64_t user_ctx)
{
    struct ub_sge sg = {src, len, seg};
    struct ub_wr wr = t_rma(UB_OP_WRITE, &sg, ts, ub_tseg_base(ts) + off);
    wr.user_ctx = user_ctx;
    assert_int_equal(ub_post_jetty_send(t->jetty[0], &wr, NULL), 0);
}

/*
 * Warm-up, like a running system: one 8-byte WRITE from node 0's m0 (segment s0) to ts at
 * offset 900000, so the PDC exists and has an RTT sample; then the ACKs settle.
 */
static inline void tnet_warm_up(struct tnet *t, uint8_t *m0, ub_seg *s0, ub_tseg *ts)
{
    tnet_post_write(t, m0, 8, s0, ts, 900000, 0);
    struct ub_cr cr;
    assert_int_equal(tnet_wait(t, 0, &cr), 1);
    assert_int_equal(cr.status, UB_CR_SUCCESS);
    for (int i = 0; i < 100; i++)
        tnet_step(t, 1000);
}

static inline void fill_pattern(uint8_t *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (uint8_t)(x >> 16);
    }
}

#define ALL_ACCESS (UB_ACCESS_LOCAL_WRITE | UB_ACCESS_READ | UB_ACCESS_WRITE | UB_ACCESS_ATOMIC)

/* size bytes of zeroed memory on node 0 and on node 1, registered with every access under
 * tokens 1 and 2: what most two-node tests move data between. The caller frees both. */
static inline void tnet_mem(struct tnet *t, size_t size, uint8_t **m0, ub_seg **s0, uint8_t **m1,
                            ub_seg **s1)
{
    *m0 = calloc(1, size);
    *m1 = calloc(1, size);
    assert_true(*m0 && *m1);
    assert_int_equal(ub_seg_register(t->ctx[0], *m0, size, ALL_ACCESS, 1, s0), 0);
    assert_int_equal(ub_seg_register(t->ctx[1], *m1, size, ALL_ACCESS, 2, s1), 0);
}

#endif
