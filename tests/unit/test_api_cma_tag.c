/*
 * Tagged messages by single copy, between two contexts of this process over shm:// (its own
 * memory is always within reach of process_vm_readv). A tagged send past the eager size that
 * matches a posted buffer is pulled by the target straight into it. One that matches nothing
 * is answered CMA_UNEXPECTED without being executed and goes again as packets (a rendezvous,
 * parked until a buffer matches), in its place in the matching order, while a send behind it
 * waits for that place; the stream keeps single copy for the next one. One of the eager size
 * or less goes as packets.
 */
#include "unit/api_net_util.h"

#define BIG  (200u << 10) /* past eager_max: single copy, or rendezvous on packets */
#define MID  (100u << 10) /* past eager_max too */
#define EAG  (48u << 10)  /* under eager_max: one eager message, never a single copy */
#define RBUF (256u << 10) /* receive buffer i at N_RECV_OFF + i * RBUF */

static void tsend(struct node *a, const struct peer *p, uint64_t tag, uint32_t off, uint32_t len,
                  uint32_t seed)
{
    t_fill(a->mem + off, len, seed);
    struct ub_sge sg = {a->mem + off, len, a->seg};
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_TSEND;
    wr.flags = UB_WR_COMPLETE;
    wr.user_ctx = seed;
    wr.sge = &sg;
    wr.num_sge = 1;
    wr.tjetty = p->ttj;
    wr.u.send.tag = tag;
    assert_int_equal(ub_post_jetty_send(a->jetty, &wr, NULL), 0);
}

static void trecv(struct node *b, uint32_t i, uint64_t tag)
{
    assert_int_equal(node_post_recv_of(b, b->tjfr, i, RBUF, tag, 0), 0);
}

/* a's next record: the send of `seed`, successful. */
static void sent(struct node *a, struct node *b, uint32_t seed)
{
    struct ub_cr cr;
    assert_int_equal(node_wait(a, b, &cr), 1);
    assert_int_equal(cr.status, UB_CR_SUCCESS);
    assert_int_equal(cr.user_ctx, seed);
}

/* b's next record: buffer i holds the len bytes of `seed`, tagged tag. */
static void received(struct node *b, struct node *a, uint32_t i, uint64_t tag, uint32_t len,
                     uint32_t seed)
{
    struct ub_cr cr;
    assert_int_equal(node_wait(b, a, &cr), 1);
    assert_int_equal(cr.status, UB_CR_SUCCESS);
    assert_int_equal(cr.opcode, UB_CR_OP_RECV);
    assert_int_equal(cr.user_ctx, i);
    assert_true(cr.flags & UB_CR_F_TAG);
    assert_int_equal(cr.tag, tag);
    assert_int_equal(cr.length, len);
    uint8_t *want = malloc(len);
    assert_non_null(want);
    t_fill(want, len, seed);
    assert_memory_equal(b->mem + N_RECV_OFF + (size_t)i * RBUF, want, len);
    free(want);
}

static struct ub_context_stats stats(struct node *n)
{
    struct ub_context_stats st;
    assert_int_equal(ub_context_stats(n->ctx, &st), 0);
    return st;
}

static void test_tagged_single_copy(void **state)
{
    (void)state;
    struct node a, b;
    struct peer p;
    struct ub_context_attr ca = {.progress = UB_PROGRESS_MANUAL};
    t_pair(&a, "shm://0", &b, "shm://0", &ca, &p);

    /* Whether single copy works here at all: a large WRITE goes by it if it does. */
    struct ub_sge sg = {a.mem, BIG, a.seg};
    struct ub_wr wr = t_rma(UB_OP_WRITE, &sg, p.ts, p.base);
    wr.user_ctx = 0;
    assert_int_equal(t_run(&a, &b, &wr), UB_CR_SUCCESS);
    if (!stats(&a).cma_reqs) {
        node_close(&a);
        node_close(&b);
        print_message("  no single copy toward this process here: skipped\n");
        skip();
    }

    /* Matched at arrival: one copy, into the buffer. */
    trecv(&b, 0, 7);
    tsend(&a, &p, 7, 0, BIG, 1);
    sent(&a, &b, 1);
    received(&b, &a, 0, 7, BIG, 1);
    assert_int_equal(stats(&a).cma_reqs, 2);
    assert_int_equal(stats(&b).cma_done, 2);

    /* Nothing posted: both go again as packets, each a rendezvous parked until a buffer
     * matches (their senders wait); the second, sent before the first came again, waited
     * for its place. Matched in send order once buffers come. */
    tsend(&a, &p, 9, 0, MID, 2);
    tsend(&a, &p, 9, 256u << 10, BIG, 3);
    for (int i = 0; i < 100000 && stats(&a).cma_fallbacks < 2; i++) {
        ub_progress(a.ctx);
        ub_progress(b.ctx);
    }
    struct ub_context_stats sa = stats(&a), sb = stats(&b);
    assert_int_equal(sa.cma_reqs, 4);
    assert_int_equal(sa.cma_fallbacks, 2);
    assert_int_equal(sb.cma_unexpected, 2);
    assert_int_equal(sb.cma_refused, 0);
    trecv(&b, 1, 9);
    trecv(&b, 2, 9);
    received(&b, &a, 1, 9, MID, 2);
    received(&b, &a, 2, 9, BIG, 3);
    sent(&a, &b, 2);
    sent(&a, &b, 3);
    assert_int_equal(stats(&b).cma_done, 2);

    /* Up to the eager size: packets, whether a buffer waits or not. */
    trecv(&b, 1, 10);
    tsend(&a, &p, 10, 0, EAG, 5);
    sent(&a, &b, 5);
    received(&b, &a, 1, 10, EAG, 5);
    assert_int_equal(stats(&a).cma_reqs, 4);

    /* The stream still asks for single copy. */
    trecv(&b, 3, 11);
    tsend(&a, &p, 11, 0, BIG, 4);
    sent(&a, &b, 4);
    received(&b, &a, 3, 11, BIG, 4);
    assert_int_equal(stats(&a).cma_reqs, 5);
    assert_int_equal(stats(&b).cma_done, 3);
    node_close(&a);
    node_close(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tagged_single_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
