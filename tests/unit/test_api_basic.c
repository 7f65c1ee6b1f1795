/* Every operation end to end between two contexts on a loop fabric, clean and lossy. */
#include "unit/api_util.h"

struct rig {
    struct tnet t;
    uint8_t *mem[2];
    ub_seg *seg[2];
    ub_tseg *rseg; /* node 1's segment, imported by node 0 */
    ub_tjetty *tj; /* node 1's jetty, imported by node 0 */
};

#define RIG_MEM (1u << 20)

static void rig_init(struct rig *r, uint32_t drop_ppm, bool tagged)
{
    memset(r, 0, sizeof(*r));
    tnet_init(&r->t, 2, drop_ppm, false, tagged);
    for (int i = 0; i < 2; i++) {
        r->mem[i] = calloc(1, RIG_MEM);
        assert_int_equal(ub_seg_register(r->t.ctx[i], r->mem[i], RIG_MEM, ALL_ACCESS,
                                         0x1234 + (uint64_t)i, &r->seg[i]),
                         0);
    }
    r->rseg = tnet_import_seg(&r->t, 0, r->seg[1], 0x1235);
    r->tj = tnet_import_jetty(&r->t, 0, 1);
}

static void rig_fini(struct rig *r)
{
    tnet_fini(&r->t);
    free(r->mem[0]);
    free(r->mem[1]);
}

static void post1(struct rig *r, struct ub_wr *wr)
{
    struct ub_wr *bad = NULL;
    assert_int_equal(ub_post_jetty_send(r->t.jetty[0], wr, &bad), 0);
}

static void expect(struct rig *r, uint32_t node, enum ub_cr_status st, uint64_t user_ctx,
                   struct ub_cr *out)
{
    struct ub_cr cr;
    assert_int_equal(tnet_wait(&r->t, node, &cr), 1);
    if (cr.status != st)
        fprintf(stderr, "status %s, expected %s\n", ub_cr_status_str(cr.status),
                ub_cr_status_str(st));
    assert_int_equal(cr.status, st);
    assert_int_equal(cr.user_ctx, user_ctx);
    if (out)
        *out = cr;
}

static void do_write_read(uint32_t drop_ppm)
{
    struct rig r;
    rig_init(&r, drop_ppm, false);
    uint8_t *src = r.mem[0], *dst = r.mem[1];
    size_t n = 100000;
    fill_pattern(src, n, 1);
    struct ub_sge sg[2] = {{src, 30000, r.seg[0]}, {src + 30000, (uint32_t)(n - 30000), r.seg[0]}};
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_WRITE;
    wr.flags = UB_WR_COMPLETE;
    wr.user_ctx = 1;
    wr.sge = sg;
    wr.num_sge = 2;
    wr.u.rma.tseg = r.rseg;
    wr.u.rma.addr = ub_tseg_base(r.rseg) + 4096;
    post1(&r, &wr);
    struct ub_cr cr;
    expect(&r, 0, UB_CR_SUCCESS, 1, &cr);
    assert_int_equal(cr.opcode, UB_CR_OP_WRITE);
    assert_int_equal(cr.length, n);
    assert_memory_equal(dst + 4096, src, n);

    /* READ it back into another place. */
    struct ub_sge rs = {src + 200000, (uint32_t)n, r.seg[0]};
    wr.opcode = UB_OP_READ;
    wr.user_ctx = 2;
    wr.sge = &rs;
    wr.num_sge = 1;
    post1(&r, &wr);
    expect(&r, 0, UB_CR_SUCCESS, 2, &cr);
    assert_int_equal(cr.opcode, UB_CR_OP_READ);
    assert_memory_equal(src + 200000, src, n);

    /* Inline write: the source needs no segment and may change right after posting. */
    uint8_t small[40];
    memset(small, 0x5a, sizeof(small));
    struct ub_sge is = {small, sizeof(small), NULL};
    wr.opcode = UB_OP_WRITE;
    wr.flags = UB_WR_COMPLETE | UB_WR_INLINE;
    wr.user_ctx = 3;
    wr.sge = &is;
    wr.u.rma.addr = ub_tseg_base(r.rseg);
    post1(&r, &wr);
    memset(small, 0, sizeof(small));
    expect(&r, 0, UB_CR_SUCCESS, 3, &cr);
    assert_true(cr.flags & UB_CR_F_INLINE);
    for (int i = 0; i < 40; i++)
        assert_int_equal(dst[i], 0x5a);
    rig_fini(&r);
}

static void test_write_read(void **state)
{
    (void)state;
    do_write_read(0);
    do_write_read(20000);
}

static void do_send(uint32_t drop_ppm)
{
    struct rig r;
    rig_init(&r, drop_ppm, false);
    uint8_t *rb = r.mem[1];
    struct ub_sge rsg = {rb, 20000, r.seg[1]};
    struct ub_rwr rw = {.user_ctx = 77, .sge = &rsg, .num_sge = 1};
    assert_int_equal(ub_post_jetty_recv(r.t.jetty[1], &rw, NULL), 0);
    fill_pattern(r.mem[0], 12345, 9);
    struct ub_sge sg = {r.mem[0], 12345, r.seg[0]};
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_SEND_IMM;
    wr.flags = UB_WR_COMPLETE;
    wr.user_ctx = 5;
    wr.sge = &sg;
    wr.num_sge = 1;
    wr.imm_data = 0xfeedface12345678ull;
    wr.tjetty = r.tj;
    post1(&r, &wr);
    struct ub_cr cr;
    expect(&r, 0, UB_CR_SUCCESS, 5, &cr);
    assert_int_equal(cr.opcode, UB_CR_OP_SEND);
    expect(&r, 1, UB_CR_SUCCESS, 77, &cr);
    assert_int_equal(cr.opcode, UB_CR_OP_RECV);
    assert_int_equal(cr.length, 12345);
    assert_true(cr.flags & UB_CR_F_IMM);
    assert_int_equal(cr.imm_data, 0xfeedface12345678ull);
    assert_int_equal(cr.remote_id, ub_jfs_id(ub_jetty_jfs(r.t.jetty[0])));
    assert_int_equal(cr.local_id, ub_jfr_id(ub_jetty_jfr(r.t.jetty[1])));
    assert_memory_equal(rb, r.mem[0], 12345);
    rig_fini(&r);
}

static void test_send(void **state)
{
    (void)state;
    do_send(0);
    do_send(20000);
}

static void test_write_imm(void **state)
{
    (void)state;
    struct rig r;
    rig_init(&r, 0, false);
    struct ub_rwr rw = {.user_ctx = 8};
    assert_int_equal(ub_post_jetty_recv(r.t.jetty[1], &rw, NULL), 0);
    memset(r.mem[0], 0xab, 5000);
    struct ub_sge sg = {r.mem[0], 5000, r.seg[0]};
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_WRITE_IMM;
    wr.flags = UB_WR_COMPLETE;
    wr.user_ctx = 6;
    wr.sge = &sg;
    wr.num_sge = 1;
    wr.imm_data = 99;
    wr.tjetty = r.tj;
    wr.u.rma.tseg = r.rseg;
    wr.u.rma.addr = ub_tseg_base(r.rseg) + 100;
    post1(&r, &wr);
    struct ub_cr cr;
    expect(&r, 0, UB_CR_SUCCESS, 6, &cr);
    expect(&r, 1, UB_CR_SUCCESS, 8, &cr);
    assert_int_equal(cr.opcode, UB_CR_OP_RECV_WRITE_IMM);
    assert_int_equal(cr.imm_data, 99);
    assert_int_equal(r.mem[1][100], 0xab);
    assert_int_equal(r.mem[1][5099], 0xab);
    rig_fini(&r);
}

static uint64_t atomic(struct rig *r, enum ub_opcode op, uint64_t operand, uint64_t compare)
{
    uint64_t old = 0xdeadbeef;
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = op;
    wr.flags = UB_WR_COMPLETE;
    wr.user_ctx = 9;
    wr.u.atomic.tseg = r->rseg;
    wr.u.atomic.addr = ub_tseg_base(r->rseg) + 64;
    wr.u.atomic.operand = operand;
    wr.u.atomic.compare = compare;
    wr.u.atomic.result = &old;
    post1(r, &wr);
    struct ub_cr cr;
    expect(r, 0, UB_CR_SUCCESS, 9, &cr);
    assert_int_equal(cr.opcode, UB_CR_OP_ATOMIC);
    return old;
}

static void test_atomics(void **state)
{
    (void)state;
    struct rig r;
    rig_init(&r, 0, false);
    uint64_t *word = (uint64_t *)(void *)(r.mem[1] + 64);
    *word = 10;
    assert_int_equal(atomic(&r, UB_OP_ATOMIC_FADD, 5, 0), 10);
    assert_int_equal(*word, 15);
    assert_int_equal(atomic(&r, UB_OP_ATOMIC_FSUB, 3, 0), 15);
    assert_int_equal(*word, 12);
    assert_int_equal(atomic(&r, UB_OP_ATOMIC_FAND, 0xc, 0), 12);
    assert_int_equal(*word, 12);
    assert_int_equal(atomic(&r, UB_OP_ATOMIC_FOR, 0x3, 0), 12);
    assert_int_equal(*word, 15);
    assert_int_equal(atomic(&r, UB_OP_ATOMIC_FXOR, 0xff, 0), 15);
    assert_int_equal(*word, 0xf0);
    assert_int_equal(atomic(&r, UB_OP_ATOMIC_SWAP, 7, 0), 0xf0);
    assert_int_equal(*word, 7);
    assert_int_equal(atomic(&r, UB_OP_ATOMIC_CAS, 100, 8), 7); /* compare fails */
    assert_int_equal(*word, 7);
    assert_int_equal(atomic(&r, UB_OP_ATOMIC_CAS, 100, 7), 7);
    assert_int_equal(*word, 100);
    rig_fini(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_read),
        cmocka_unit_test(test_send),
        cmocka_unit_test(test_write_imm),
        cmocka_unit_test(test_atomics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
