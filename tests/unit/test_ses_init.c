/*
 * The initiator's request packets: every header it writes in place (the standard SES header,
 * the softub extension with its tail) is byte for byte what the generic encoders make of the
 * decoded headers, for each kind of request: inline and gathered SENDs, immediates, WRITEs
 * over several packets, READs, atomics, rendezvous, tagged sends and the order flags.
 */
#include "unit/api_util.h"
#include "pds/pds_int.h"
#include "wire/datagram.h"

static struct tnet T;
static uint8_t *M0, *M1;
static ub_seg *S0, *S1;
static ub_tseg *TS;
static ub_tjetty *TJ;

/* The transaction layer's upcalls of node 1, and what the check saw. */
static const struct ub__pds_upcalls *UP;
static void *UP_ARG;
static uint32_t SEEN;   /* request datagrams re-encoded */
static uint32_t SOM_HD; /* of them: starts of message with header data */
static uint32_t MIDDLE; /* of them: not the start of their message */
static uint32_t PLAIN;  /* of them: compared field by field with the posted request */

/* The standard header of the request w for bytes [off, off + n), field by field from the
 * request as posted, through the generic encoder. */
static void expect_std(const struct ub__wr *w, uint64_t off, uint32_t n, uint8_t *out)
{
    struct ub__ses_std q;
    memset(&q, 0, sizeof(q));
    bool som = off == 0;
    bool eom = off + n >= (w->eager ? w->eager : w->len);
    q.opcode = w->ses_op;
    q.flags = (uint8_t)((som ? UB_SES_F_SOM : 0) | (eom ? UB_SES_F_EOM : 0));
    q.msg_id = (uint16_t)w->seq;
    q.job_id = T.ctx[0]->eng.cfg.job_id;
    q.pid_on_fep = (uint16_t)((w->rkey >> 12) & 0xfff);
    q.resource_index = (uint16_t)(w->rkey & 0xfff);
    q.buffer_offset = w->deferrable ? ((uint64_t)w->os->id << 32) | w->seq : w->raddr;
    q.initiator = w->jfs->id;
    q.mem_key = w->opcode == UB_OP_TSEND ? w->tag : w->tag ? w->tag : w->token;
    q.request_length = (uint32_t)w->len;
    if (som && (w->opcode == UB_OP_WRITE_IMM || w->opcode == UB_OP_SEND_IMM)) {
        q.flags |= UB_SES_F_HD;
        q.header_data = w->imm;
    }
    if (!som) {
        q.payload_len = (uint16_t)n;
        q.message_offset = (uint32_t)off;
    }
    struct ub__wcur wc;
    ub__wcur_init(&wc, out, UB_SES_STD_SIZE);
    assert_int_equal(ub__ses_std_encode(&q, &wc), 0);
}

/* Parses the request datagram again and encodes its headers with the generic encoders: the
 * same bytes. */
static void check_deliver(void *arg, const struct ub__pds_rx *rx, uint64_t now)
{
    (void)arg;
    const struct ub__wire_dgram *h = rx->hdr;
    if (h->ses_kind == UB_PDS_NH_REQ_STD && h->has_ext) {
        const uint8_t *start = rx->payload - h->payload_off;
        struct ub__wire_dgram d;
        assert_int_equal(ub__wire_parse_datagram(&d, start, h->len, 0), 0);
        uint8_t buf[512];
        assert_true(d.payload_off <= sizeof(buf));
        struct ub__wcur wc;
        ub__wcur_init(&wc, buf, d.payload_off);
        assert_int_equal(ub__wire_encode_headers(&d, &wc), 0);
        assert_int_equal(ub__wcur_offset(&wc), d.payload_off);
        assert_memory_equal(buf, start, d.payload_off);
        SEEN++;
        const struct ub__ses_std *q = &d.ses.u.std;
        struct ub__wr *w = ub__ses_pending(&T.ctx[0]->ses, d.ext.stream, d.ext.order_seq);
        assert_non_null(w);
        if (d.ses.ext == UB_SES_EXT_NONE && !w->cma) {
            uint8_t want[UB_SES_STD_SIZE];
            uint64_t off = (q->flags & UB_SES_F_SOM) ? 0 : q->message_offset;
            expect_std(w, off, (uint32_t)d.payload_len, want);
            assert_memory_equal(want, start + d.ses_off, UB_SES_STD_SIZE);
            PLAIN++;
        }
        if (d.ses.u.std.flags & UB_SES_F_HD)
            SOM_HD++;
        if (!(d.ses.u.std.flags & UB_SES_F_SOM))
            MIDDLE++;
    }
    UP->deliver(UP_ARG, rx, now);
}

static void check_acked(void *arg, uint64_t c, uint64_t now)
{
    (void)arg;
    UP->acked(UP_ARG, c, now);
}

static void check_failed(void *arg, uint64_t c, int err, uint64_t now)
{
    (void)arg;
    UP->failed(UP_ARG, c, err, now);
}

static const struct ub__pds_upcalls check_up = {
    .deliver = check_deliver, .acked = check_acked, .failed = check_failed};

static void setup(bool tagged)
{
    tnet_init(&T, 2, 0, true, tagged);
    tnet_mem(&T, 1 << 20, &M0, &S0, &M1, &S1);
    TS = tnet_import_seg(&T, 0, S1, 2);
    TJ = tnet_import_jetty(&T, 0, 1);
    struct ub__pds *pds = T.ctx[1]->eng.pds;
    UP = pds->up;
    UP_ARG = pds->up_arg;
    ub__pds_set_upcalls(pds, &check_up, NULL);
    SEEN = SOM_HD = MIDDLE = PLAIN = 0;
}

static void teardown(void)
{
    tnet_fini(&T);
    free(M0);
    free(M1);
}

/* Posts wr on node 0 and waits for its record (and, for a message, node 1's). */
static void run(struct ub_wr *wr, bool msg)
{
    wr->flags |= UB_WR_COMPLETE;
    assert_int_equal(ub_post_jetty_send(T.jetty[0], wr, NULL), 0);
    struct ub_cr cr;
    assert_int_equal(tnet_wait(&T, 0, &cr), 1);
    assert_int_equal(cr.status, UB_CR_SUCCESS);
    if (msg) {
        assert_int_equal(tnet_wait(&T, 1, &cr), 1);
        assert_int_equal(cr.status, UB_CR_SUCCESS);
    }
}

static void post_recvs(uint32_t n, uint32_t len, uint64_t tag)
{
    for (uint32_t i = 0; i < n; i++) {
        struct ub_sge sg = {M1 + 65536 + (size_t)i * len, len, S1};
        struct ub_rwr rw;
        memset(&rw, 0, sizeof(rw));
        rw.sge = &sg;
        rw.num_sge = 1;
        rw.tag = tag;
        assert_int_equal(ub_post_jetty_recv(T.jetty[1], &rw, NULL), 0);
    }
}

/* A request of len bytes from the start of M0, one SGE. */
static void base_wr(struct ub_wr *wr, struct ub_sge *sg, enum ub_opcode op, uint32_t len)
{
    memset(wr, 0, sizeof(*wr));
    sg->addr = M0;
    sg->len = len;
    sg->seg = S0;
    wr->opcode = op;
    wr->sge = sg;
    wr->num_sge = 1;
}

static void send_wr(struct ub_wr *wr, struct ub_sge *sg, enum ub_opcode op, uint32_t len)
{
    base_wr(wr, sg, op, len);
    wr->tjetty = TJ;
}

static void rma_wr(struct ub_wr *wr, struct ub_sge *sg, enum ub_opcode op, uint32_t len)
{
    base_wr(wr, sg, op, len);
    wr->u.rma.tseg = TS;
    wr->u.rma.addr = ub_tseg_base(TS) + 4096;
}

static void test_untagged(void **state)
{
    (void)state;
    setup(false);
    post_recvs(6, 120000, 0);
    struct ub_wr wr;
    struct ub_sge sg;
    uint32_t big = 3 * T.ctx[0]->ses.max_payload + 5;

    send_wr(&wr, &sg, UB_OP_SEND, 8); /* the ping-pong's inline SEND */
    wr.flags = UB_WR_INLINE;
    run(&wr, true);
    send_wr(&wr, &sg, UB_OP_SEND_IMM, 100);
    wr.imm_data = 0x1122334455667788ull;
    wr.flags = UB_WR_SOLICITED | UB_WR_ORDER_SO;
    run(&wr, true);
    send_wr(&wr, &sg, UB_OP_SEND, 0);
    wr.flags = UB_WR_ORDER_RO | UB_WR_FENCE | UB_WR_INORDER_COMP;
    run(&wr, true);
    send_wr(&wr, &sg, UB_OP_SEND, 100000); /* rendezvous: the RNDV extension */
    run(&wr, true);
    uint32_t seen = SEEN, middle = MIDDLE;

    rma_wr(&wr, &sg, UB_OP_WRITE, big); /* four packets */
    run(&wr, false);
    assert_int_equal(SEEN, seen + 4);
    assert_int_equal(MIDDLE, middle + 3);
    rma_wr(&wr, &sg, UB_OP_WRITE_IMM, 64);
    wr.tjetty = TJ;
    wr.imm_data = 7;
    run(&wr, true);
    rma_wr(&wr, &sg, UB_OP_READ, 64);
    run(&wr, false);
    rma_wr(&wr, &sg, UB_OP_READ, big); /* one request, several responses */
    run(&wr, false);

    uint64_t old = 0;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_ATOMIC_FADD;
    wr.u.atomic.tseg = TS;
    wr.u.atomic.addr = ub_tseg_base(TS) + 8192;
    wr.u.atomic.operand = 5;
    wr.u.atomic.result = &old;
    run(&wr, false);
    wr.opcode = UB_OP_ATOMIC_CAS;
    wr.u.atomic.compare = 5;
    wr.u.atomic.operand = 9;
    run(&wr, false);
    assert_int_equal(old, 5);

    assert_int_equal(SEEN, seen + 4 + 5);
    assert_int_equal(SOM_HD, 2);
    assert_int_equal(PLAIN, 3 + 4 + 3); /* all but the rendezvous SEND and the atomics */
    teardown();
}

static void test_tagged(void **state)
{
    (void)state;
    setup(true);
    post_recvs(4, 120000, 0x55);
    struct ub_wr wr;
    struct ub_sge sg;
    send_wr(&wr, &sg, UB_OP_TSEND, 32);
    wr.u.send.tag = 0x55;
    run(&wr, true);
    send_wr(&wr, &sg, UB_OP_TSEND, 100000); /* rendezvous */
    wr.u.send.tag = 0x55;
    run(&wr, true);
    assert_true(SEEN >= 2);
    assert_true(PLAIN >= 1);
    teardown();
}

/* The per-JFR send_seq table both sides of a stream keep: a JFR's entry stays its own (and
 * in place for its next lookup) as others are added past the first allocation. */
static void test_send_seq_table(void **state)
{
    (void)state;
    struct ub__send_seqs t = {0};
    struct ub__send_seq *a = ub__send_seq_of(&t, 7);
    assert_non_null(a);
    assert_int_equal(a->jfr, 7);
    assert_int_equal(a->next, 0);
    a->next = 5;
    for (uint32_t j = 100; j < 110; j++) /* grows from 2 entries to 16 */
        assert_int_equal(ub__send_seq_of(&t, j)->next, 0);
    assert_int_equal(t.n, 11);
    assert_true(t.cap >= t.n);
    struct ub__send_seq *b = ub__send_seq_of(&t, 7);
    assert_int_equal(b->jfr, 7);
    assert_int_equal(b->next, 5);
    assert_ptr_equal(b, &t.v[0]);
    assert_int_equal(ub__send_seq_of(&t, 105)->jfr, 105);
    assert_int_equal(t.n, 11);
    free(t.v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_send_seq_table),
        cmocka_unit_test(test_untagged),
        cmocka_unit_test(test_tagged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
