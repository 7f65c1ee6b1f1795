/*
 * The world of the packing tests (test_api_pack.c, test_api_prsp.c): two contexts on a
 * loop fabric with a manual clock, node 0 packing as asked, node 1 answering; node 0's
 * memory M0 (segment S0), node 1's M1 (S1, imported as TS) and R1 (SR); node 1's jetty
 * imported as TJ; the PDC warmed up (it exists and has an RTT sample). One includer each.
 */
#ifndef UB_TEST_API_PACK_WORLD_H
#define UB_TEST_API_PACK_WORLD_H

#include "unit/api_util.h"

#define MEM (1u << 20)

static struct tnet T;
static uint8_t *M0, *M1, *R1;
static ub_seg *S0, *S1, *SR;
static ub_tseg *TS;
static ub_tjetty *TJ;
static const char *PW_LB; /* the nodes' load balancer (NULL: the default, which sprays) */

static void pw_open_node(uint32_t i, uint32_t pack_max, uint64_t seed)
{
    char uri[32];
    snprintf(uri, sizeof(uri), "loop:%u", i);
    struct ub_context_attr ca = {.seed = seed + i + 7919ull * T.opens++, .loopnet = T.net};
    ca.pack_max = pack_max;
    ca.lb = PW_LB;
    assert_int_equal(ub_context_open(uri, &ca, &T.ctx[i]), 0);
    struct ub_jfc_attr fa = {.depth = 4 * 128 + 64};
    assert_int_equal(ub_jfc_create(T.ctx[i], &fa, &T.jfc[i]), 0);
    struct ub_jetty_attr ja;
    memset(&ja, 0, sizeof(ja));
    ja.jfs.depth = 128;
    ja.jfs.jfc = T.jfc[i];
    ja.jfs.max_sge = 2;
    ja.jfr.depth = 128;
    ja.jfr.jfc = T.jfc[i];
    assert_int_equal(ub_jetty_create(T.ctx[i], &ja, &T.jetty[i]), 0);
}

/* mtu 0: the fabric's default; seed: of the contexts; net_seed: of the fabric. */
static void pw_setup(uint32_t pack_max, uint32_t mtu, uint64_t seed, uint64_t net_seed)
{
    struct ub_loopnet_attr la = {.ports = 4, .seed = net_seed, .mtu = mtu};
    tnet_net(&T, &la, true);
    T.n = 2;
    pw_open_node(0, pack_max, seed);
    pw_open_node(1, 0, seed);
    tnet_mem(&T, MEM, &M0, &S0, &M1, &S1);
    R1 = calloc(1, MEM);
    assert_int_equal(ub_seg_register(T.ctx[1], R1, MEM, ALL_ACCESS, 3, &SR), 0);
    TS = tnet_import_seg(&T, 0, S1, 2);
    TJ = tnet_import_jetty(&T, 0, 1);
    tnet_warm_up(&T, M0, S0, TS);
}

static void pw_teardown(void)
{
    tnet_fini(&T);
    free(M0);
    free(M1);
    free(R1);
}

/* A WRITE or READ of len bytes between M0 + off and node 1's M1 + off. */
static void pw_rma_wr(struct ub_wr *wr, struct ub_sge *sg, enum ub_opcode op, uint32_t flags,
                      uint64_t user, uint32_t off, uint32_t len)
{
    memset(wr, 0, sizeof(*wr));
    sg->addr = M0 + off;
    sg->len = len;
    sg->seg = S0;
    wr->opcode = op;
    wr->flags = UB_WR_COMPLETE | flags;
    wr->user_ctx = user;
    wr->sge = sg;
    wr->num_sge = 1;
    wr->u.rma.tseg = TS;
    wr->u.rma.addr = ub_tseg_base(TS) + off;
}

#endif
