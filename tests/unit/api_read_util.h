/*
 * READs around the size of one response packet, for the API tests over shm and udp. Needs
 * the library's internals (api/api.h: the target's statistics) before it.
 */
#ifndef UB_TEST_API_READ_UTIL_H
#define UB_TEST_API_READ_UTIL_H

#include "unit/api_net_util.h"

/*
 * READs from a of b's memory (b in this process, manual, progressed by a's waits) around the
 * size of one response packet: those that fit one are answered when they execute, larger
 * ones and those behind one being streamed go by the READ pump. The data must be the same
 * either way, and a failed check must answer at once too.
 */
static inline void t_reads_one_packet(struct node *a, struct node *b, struct peer *p)
{
    uint32_t max = b->ctx->ses.max_rsp_payload;
    assert_true(4096 + 3 * max + 64 < N_RECV_OFF);
    t_fill(b->mem + 4096, 3 * max + 64, 11);
    const uint32_t lens[] = {65, 1000, max, max + 1, 2 * max + 5};
    for (uint32_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
        uint32_t len = lens[k];
        uint64_t st0 = b->ctx->ses.st.rd_streamed;
        memset(a->mem, 0, len + 1);
        struct ub_sge rs = {a->mem, len, a->seg};
        struct ub_wr rd = t_rma(UB_OP_READ, &rs, p->ts, p->base + 4096 + k);
        rd.user_ctx = 200 + k;
        assert_int_equal(t_run(a, b, &rd), UB_CR_SUCCESS);
        assert_memory_equal(a->mem, b->mem + 4096 + k, len);
        assert_int_equal(a->mem[len], 0);
        assert_int_equal(b->ctx->ses.st.rd_streamed - st0, len > max ? 1 : 0);
    }
    /* Past the segment's end: refused at once, nothing streamed. */
    uint64_t st0 = b->ctx->ses.st.rd_streamed;
    struct ub_sge rs = {a->mem, 1000, a->seg};
    struct ub_wr rd = t_rma(UB_OP_READ, &rs, p->ts, p->base + N_MEM - 500);
    rd.user_ctx = 210;
    assert_int_equal(t_run(a, b, &rd), UB_CR_REM_ACCESS_ERR);
    assert_int_equal(b->ctx->ses.st.rd_streamed, st0);
    /* A one-packet READ posted right behind one of three packets: both complete, right. */
    memset(a->mem, 0, 4 * max + 2048);
    struct ub_sge big = {a->mem, 3 * max, a->seg}, small = {a->mem + 3 * max + 1024, 1000, a->seg};
    struct ub_wr two[2] = {t_rma(UB_OP_READ, &big, p->ts, p->base + 4096),
                           t_rma(UB_OP_READ, &small, p->ts, p->base + 4096 + 7)};
    two[0].user_ctx = 211;
    two[0].next = &two[1];
    two[1].user_ctx = 212;
    assert_int_equal(ub_post_jetty_send(a->jetty, two, NULL), 0);
    for (uint32_t i = 0; i < 2; i++) {
        struct ub_cr cr;
        assert_int_equal(node_wait(a, b, &cr), 1);
        assert_int_equal(cr.status, UB_CR_SUCCESS);
        assert_true(cr.user_ctx == 211 || cr.user_ctx == 212);
    }
    assert_memory_equal(a->mem, b->mem + 4096, 3 * max);
    assert_memory_equal(a->mem + 3 * max + 1024, b->mem + 4096 + 7, 1000);
    assert_true(b->ctx->ses.st.rd_streamed - st0 >= 1);
}

/* The same between two manual contexts of this process on uri. */
static inline void t_reads_one_packet_on(const char *uri)
{
    struct node a, b;
    struct peer p;
    struct ub_context_attr ca = {.progress = UB_PROGRESS_MANUAL};
    t_pair(&a, uri, &b, uri, &ca, &p);
    t_reads_one_packet(&a, &b, &p);
    node_close(&a);
    node_close(&b);
}

#endif
