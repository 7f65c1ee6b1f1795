/*
 * The fast paths against the general ones: the same scripted ping-pongs (SEND, SEND_IMM,
 * WRITE_IMM behind a plain WRITE, an atomic and a READ (small or of a packet), inline and not;
 * clean, lossy, reordered; bursts of SENDs in flight) run twice on a loop fabric under a manual
 * clock, once with the fast paths on and once with them off (ub__tl.fast, SOFTUB_FAST=0). Both runs
 * must put the same bytes on the wire in the same order and hand the application the same records,
 * received bytes and memory; the first must have taken the fast paths. Held output is on (loop
 * contexts do not hold by default), without its watchdog: a post that answers a round is what the
 * fast send path serves. Then the same with tagged messages into tag-matching receive queues
 * (every message a TSEND, with one of three tags, into buffers of which every other one takes
 * any tag and the rest only tag 1, so that a message may have to pass buffers by).
 */
#include "unit/api_util.h"
#include "pds/pds.h"

#define PINGS   300u
#define BURST   6u /* messages node 0 sends without waiting, every 25th ping */
#define BURSTS  (PINGS / 25)
#define MEM     (1u << 16)
#define MAX_OUT (1u << 21)

struct wire {
    uint8_t *b; /* every datagram: sending port (2 bytes), length (4), bytes */
    size_t n;
    uint32_t pkts;
};

static void tap(void *arg, uint16_t src, const struct ub__pkt *p)
{
    struct wire *w = arg;
    size_t need = 6 + (size_t)p->len;
    assert_true(w->n + need <= MAX_OUT);
    memcpy(w->b + w->n, &src, 2);
    memcpy(w->b + w->n + 2, &p->len, 4);
    memcpy(w->b + w->n + 6, p->data, p->len);
    w->n += need;
    w->pkts++;
}

struct run {
    struct wire wire;
    struct ub_cr cr[2][4 * PINGS + 4 * BURSTS * BURST + 64];
    uint32_t ncr[2];
    uint8_t got[2][PINGS][128]; /* what each side received, per ping */
    uint8_t burst[BURSTS * BURST][128];
    uint8_t mem[2][MEM]; /* each side's memory at the end */
    uint64_t direct;     /* packets the fast send path emitted */
    uint64_t taken;      /* requests the fast receive path took */
};

static uint8_t mem[2][MEM];

struct side {
    ub_seg *seg;
    uint8_t *mem;
    ub_tjetty *peer;
    ub_tseg *peer_seg;
};

/* Polls node i until a receive record comes (keeping every record), stepping the clock. */
static void wait_recv(struct tnet *t, struct run *r, uint32_t i)
{
    for (int round = 0; round < 100000; round++) {
        struct ub_cr cr;
        while (ub_poll_jfc(t->jfc[i], 1, &cr) == 1) {
            assert_true(r->ncr[i] < sizeof(r->cr[i]) / sizeof(r->cr[i][0]));
            r->cr[i][r->ncr[i]++] = cr;
            if (cr.opcode == UB_CR_OP_RECV || cr.opcode == UB_CR_OP_RECV_WRITE_IMM)
                return;
        }
        tnet_step(t, 1000);
    }
    fail_msg("node %u: no message (records %u)", i, r->ncr[i]);
}

/* Ping k from `from`: its kind and size cycle through the cases the fast path must match. */
static void ping(struct tnet *t, struct side *sd, uint32_t from, uint32_t k, bool tagged)
{
    struct side *s = &sd[from];
    uint32_t len = (uint32_t[]){8, 1, 64, 100, 0, 24}[k % 6];
    uint8_t *src = s->mem + 40000 + (k % 8) * 256;
    fill_pattern(src, len, k * 2 + from);
    struct ub_sge sg = {src, len, s->seg};
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.user_ctx = 1000000 + k;
    wr.sge = &sg;
    wr.num_sge = 1;
    wr.tjetty = s->peer;
    wr.flags = UB_WR_COMPLETE | (k % 3 == 0 ? UB_WR_INLINE : 0);
    switch (k % 4) {
    case 0:
    case 1:
        wr.opcode = UB_OP_SEND;
        break;
    case 2:
        wr.opcode = UB_OP_SEND_IMM;
        wr.imm_data = 0xabc0000000000000ull + k;
        break;
    default: { /* a plain WRITE (nothing at the target but the bytes), an atomic (its old
                * value into our memory), then the WRITE_IMM */
        wr.opcode = UB_OP_WRITE;
        wr.u.rma.tseg = s->peer_seg;
        wr.u.rma.addr = ub_tseg_base(s->peer_seg) + 60000 + (k % 8) * 128;
        assert_int_equal(ub_post_jetty_send(t->jetty[from], &wr, NULL), 0);
        struct ub_wr amo = wr;
        amo.sge = NULL;
        amo.num_sge = 0;
        amo.flags = UB_WR_COMPLETE;
        amo.opcode = (k / 4) % 2 ? UB_OP_ATOMIC_CAS : UB_OP_ATOMIC_FADD;
        amo.u.atomic.tseg = s->peer_seg;
        amo.u.atomic.addr = ub_tseg_base(s->peer_seg) + 62000 + (k % 8) * 8;
        amo.u.atomic.operand = k + 1;
        amo.u.atomic.compare = k % 3; /* CAS: swaps when it matches */
        amo.u.atomic.result = (uint64_t *)(void *)(s->mem + 63000 + (k % 16) * 8);
        assert_int_equal(ub_post_jetty_send(t->jetty[from], &amo, NULL), 0);
        /* A READ of the plain WRITE's first bytes: one response record, or (every other
         * time) a response packet of its own. */
        struct ub_sge rs = (k / 4) % 2
                               ? (struct ub_sge){s->mem + 64200 + (k % 8) * 160, 160, s->seg}
                               : (struct ub_sge){s->mem + 64000 + (k % 8) * 16, 16, s->seg};
        struct ub_wr rd = wr;
        rd.opcode = UB_OP_READ;
        rd.sge = &rs;
        rd.flags = UB_WR_COMPLETE;
        assert_int_equal(ub_post_jetty_send(t->jetty[from], &rd, NULL), 0);
        wr.opcode = UB_OP_WRITE_IMM;
        wr.imm_data = k;
        wr.u.rma.addr = ub_tseg_base(s->peer_seg) + 50000 + (k % 8) * 128;
        break;
    }
    }
    if (tagged) { /* a tag-matching queue takes tagged messages only */
        memset(&wr.u, 0, sizeof(wr.u));
        wr.opcode = UB_OP_TSEND;
        wr.imm_data = 0;
        wr.u.send.tag = k % 3;
    }
    assert_int_equal(ub_post_jetty_send(t->jetty[from], &wr, NULL), 0);
}

/* Posts node i's receive buffer k (of 16, 1 KiB each); tagged: every other one takes any tag,
 * the rest tag 1 only. */
static void post_buf(struct tnet *t, struct side *sd, uint32_t i, uint64_t k, bool tagged)
{
    struct ub_sge sg = {sd[i].mem + (k % 16) * 1024, 1024, sd[i].seg};
    struct ub_rwr rw;
    memset(&rw, 0, sizeof(rw));
    rw.sge = &sg;
    rw.num_sge = 1;
    rw.user_ctx = k;
    if (tagged) {
        rw.tag = 1;
        rw.ignore = k % 2 ? 0 : ~0ull;
    }
    assert_int_equal(ub_post_jetty_recv(t->jetty[i], &rw, NULL), 0);
}

/* Node i takes ping k (the message, its first bytes into out) and gives the buffer it
 * consumed back. */
static void take(struct tnet *t, struct run *r, struct side *sd, uint32_t i, uint32_t k,
                 uint8_t *out, bool tagged)
{
    wait_recv(t, r, i);
    const struct ub_cr *c = &r->cr[i][r->ncr[i] - 1];
    bool write = c->opcode == UB_CR_OP_RECV_WRITE_IMM;
    uint8_t *buf = sd[i].mem + (c->user_ctx % 16) * 1024;
    const uint8_t *at = write ? sd[i].mem + 50000 + (k % 8) * 128 : buf;
    memcpy(out, at, c->length < 128 ? c->length : 128);
    post_buf(t, sd, i, c->user_ctx, tagged);
}

static void play(struct run *r, bool fast, bool tagged)
{
    struct tnet t;
    tnet_init(&t, 2, 0, true, tagged);
    ub__loopnet_set_tap(ub__loopnet_impl(t.net), tap, &r->wire);
    struct side sd[2];
    for (uint32_t i = 0; i < 2; i++) {
        struct ub__ctx *x = ub__ctx_of(t.ctx[i]);
        x->hold_off = false;
        x->hold_no_watchdog = true; /* every hold is answered here, at manual-clock times */
        t.ctx[i]->ses.fast = fast;
        sd[i].mem = mem[i]; /* the same addresses in both runs: they travel in WRITEs */
        memset(mem[i], 0, MEM);
        assert_int_equal(ub_seg_register(t.ctx[i], sd[i].mem, MEM, ALL_ACCESS, 77, &sd[i].seg), 0);
    }
    for (uint32_t i = 0; i < 2; i++) {
        sd[i].peer = tnet_import_jetty(&t, i, 1 - i);
        sd[i].peer_seg = tnet_import_seg(&t, i, sd[1 - i].seg, 77);
    }
    for (uint32_t k = 0; k < 16; k++)
        for (uint32_t i = 0; i < 2; i++)
            post_buf(&t, sd, i, k, tagged);
    for (uint32_t k = 0; k < PINGS; k++) {
        /* A lossy stretch: a drop every 7th packet each way, then a reordering one. */
        if (k == PINGS / 3) {
            tnet_impair(&t, 0, 1, UB_IMPAIR_DROP_EVERY, 7, 3);
            tnet_impair(&t, 1, 0, UB_IMPAIR_DROP_EVERY, 7, 5);
        } else if (k == PINGS / 2) {
            tnet_impair(&t, 0, 1, UB_IMPAIR_REORDER_NTH, 2, 1);
            tnet_heal(&t, 1, 0);
        } else if (k == 2 * PINGS / 3) {
            tnet_heal(&t, 0, 1);
        }
        if (k % 25 == 24) { /* several in flight: some out of order under the reordering */
            for (uint32_t j = 0; j < BURST; j++)
                ping(&t, sd, 0, 4 * (PINGS + j), tagged); /* SEND: k % 4 == 0 */
            for (uint32_t j = 0; j < BURST; j++)
                take(&t, r, sd, 1, 4 * (PINGS + j), r->burst[(k / 25) * BURST + j], tagged);
        }
        ping(&t, sd, 0, k, tagged);
        take(&t, r, sd, 1, k, r->got[1][k], tagged);
        ping(&t, sd, 1, k, tagged); /* the answer: the round that took the ping held its output */
        take(&t, r, sd, 0, k, r->got[0][k], tagged);
    }
    /* Everything settles: every send completes on both sides. */
    for (int i = 0; i < 20000; i++) {
        tnet_step(&t, 10000);
        for (uint32_t j = 0; j < 2; j++) {
            struct ub_cr cr;
            while (ub_poll_jfc(t.jfc[j], 1, &cr) == 1) {
                assert_true(r->ncr[j] < sizeof(r->cr[j]) / sizeof(r->cr[j][0]));
                r->cr[j][r->ncr[j]++] = cr;
            }
        }
    }
    for (uint32_t i = 0; i < 2; i++) {
        r->direct += ub__pds_stats(t.ctx[i]->eng.pds)->tx_direct;
        r->taken += t.ctx[i]->ses.st.rx_fast;
        memcpy(r->mem[i], mem[i], MEM);
    }
    ub__loopnet_set_tap(ub__loopnet_impl(t.net), NULL, NULL);
    tnet_fini(&t);
}

static void same_on_the_wire(bool tagged)
{
    static struct run a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    a.wire.b = malloc(MAX_OUT);
    b.wire.b = malloc(MAX_OUT);
    assert_non_null(a.wire.b);
    assert_non_null(b.wire.b);
    play(&a, true, tagged);
    play(&b, false, tagged);
    print_message("fast: %u datagrams, %lu emitted as sent, %lu messages taken whole; general: "
                  "%u datagrams\n",
                  a.wire.pkts, (unsigned long)a.direct, (unsigned long)a.taken, b.wire.pkts);
    assert_true(a.direct >= PINGS);    /* most answers took it */
    assert_true(a.taken >= 2 * PINGS); /* most SENDs and WRITEs both ways */
    assert_int_equal(b.direct, 0);
    assert_int_equal(b.taken, 0);
    assert_int_equal(a.wire.pkts, b.wire.pkts);
    assert_int_equal(a.wire.n, b.wire.n);
    for (size_t o = 0; o < a.wire.n;) { /* where the first difference is, if any */
        uint32_t len;
        memcpy(&len, a.wire.b + o + 2, 4);
        if (memcmp(a.wire.b + o, b.wire.b + o, 6 + len)) {
            for (uint32_t j = 0; j < len; j++)
                if (a.wire.b[o + 6 + j] != b.wire.b[o + 6 + j])
                    print_message("datagram at %zu (port %u, %u bytes): byte %u: %02x %02x\n", o,
                                  a.wire.b[o], len, j, a.wire.b[o + 6 + j], b.wire.b[o + 6 + j]);
            break;
        }
        o += 6 + len;
    }
    assert_memory_equal(a.wire.b, b.wire.b, a.wire.n);
    for (uint32_t i = 0; i < 2; i++) {
        assert_int_equal(a.ncr[i], b.ncr[i]);
        assert_true(a.ncr[i] >= 2 * PINGS); /* every message and every send */
        for (uint32_t k = 0; k < a.ncr[i]; k++) {
            const struct ub_cr *x = &a.cr[i][k], *y = &b.cr[i][k];
            assert_int_equal(x->status, UB_CR_SUCCESS);
            assert_int_equal(x->status, y->status);
            assert_int_equal(x->opcode, y->opcode);
            assert_int_equal(x->length, y->length);
            assert_int_equal(x->user_ctx, y->user_ctx);
            assert_int_equal(x->imm_data, y->imm_data);
            assert_int_equal(x->flags, y->flags);
            assert_int_equal(x->tag, y->tag);
            if (tagged && x->opcode == UB_CR_OP_RECV) /* the buffer took the message's tag */
                assert_true(x->tag == 1 || x->user_ctx % 2 == 0);
        }
    }
    assert_memory_equal(a.got, b.got, sizeof(a.got));
    assert_memory_equal(a.burst, b.burst, sizeof(a.burst));
    assert_memory_equal(a.mem, b.mem, sizeof(a.mem));
    for (uint32_t k = 0; k < PINGS; k++) /* and they are what was sent */
        for (uint32_t i = 0; i < 2; i++) {
            uint8_t want[128];
            uint32_t len = (uint32_t[]){8, 1, 64, 100, 0, 24}[k % 6];
            fill_pattern(want, len, k * 2 + (1 - i));
            assert_memory_equal(a.got[i][k], want, len);
        }
    free(a.wire.b);
    free(b.wire.b);
}

static void test_same_on_the_wire(void **state)
{
    (void)state;
    same_on_the_wire(false);
}

static void test_same_on_the_wire_tagged(void **state)
{
    (void)state;
    same_on_the_wire(true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_on_the_wire),
        cmocka_unit_test(test_same_on_the_wire_tagged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
