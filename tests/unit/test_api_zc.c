/*
 * Zero-copy payloads (engine zc_min, ub__pkt_attach): large WRITE payloads, the data a
 * rendezvous SEND's target READs, and a READ's data at its target go to the device as
 * references to the application's buffer or segment. Node 0's device is wrapped in a
 * gathering device that does what the udp device does (the bytes are gathered at send, the
 * packet PDS keeps still refers to the buffer) and hands a flat copy to the loop fabric.
 * Checked: the datagrams are byte for byte those of the copying path; a lost packet is
 * retransmitted from the buffer with the same bytes; a request that completes while PDS
 * still holds packets of it (their ACKs lost) has them flattened first, so retransmissions
 * after the completion never read the buffer the application owns again. Manual clock.
 */
#define _GNU_SOURCE /* setenv under -std=c11 */
#include "unit/api_util.h"
#include "pds/pds_int.h"
#include "wire/datagram.h"

#define MTU    9000
#define MEM    (1u << 20)
#define POISON 0xee

struct gdev {
    struct ub__dev dev;
    struct ub__dev *inner;
    uint32_t sent, zc, flat; /* datagrams; of them with an attached payload / without */
    uint64_t digest;         /* FNV-1a over every datagram's bytes, in order */
    bool drop_zc_once;       /* the next packet with an attached payload is lost */
    uint8_t *lost;           /* its bytes as gathered */
    uint32_t lost_len, lost_xlen;
    uint32_t resent_zc, resent_flat; /* later packets whose payload is the lost one's */
    bool drop_acks;                  /* ACKs towards node 0 are lost */
    uint32_t acks_dropped;
    uint32_t poisoned; /* datagrams that carry POISON bytes (a buffer read after completion) */
};

static struct gdev *G;
static struct tnet T;
static uint8_t *M0, *M1;
static ub_seg *S0, *S1;
static ub_tseg *TS;

static bool has_poison(const uint8_t *b, uint32_t n)
{
    uint32_t run = 0;
    for (uint32_t i = 0; i < n; i++) {
        run = b[i] == POISON ? run + 1 : 0;
        if (run == 32)
            return true;
    }
    return false;
}

static int g_send(struct ub__dev *d, struct ub__pkt **pkts, uint32_t n)
{
    struct gdev *g = (struct gdev *)d;
    for (uint32_t i = 0; i < n; i++) {
        struct ub__pkt *p = pkts[i];
        struct ub__pkt *c = ub__pkt_clone(p); /* the gather: what the kernel would copy */
        assert_non_null(c);
        g->sent++;
        if (p->xlen)
            g->zc++;
        else
            g->flat++;
        for (uint32_t k = 0; k < c->len; k++)
            g->digest = (g->digest ^ c->data[k]) * 1099511628211ull;
        if (has_poison(c->data, c->len))
            g->poisoned++;
        if (g->lost && c->len == g->lost_len &&
            memcmp(c->data + c->len - g->lost_xlen, g->lost + g->lost_len - g->lost_xlen,
                   g->lost_xlen) == 0) {
            if (p->xlen)
                g->resent_zc++;
            else
                g->resent_flat++;
        }
        if (g->drop_zc_once && p->xlen) {
            g->drop_zc_once = false;
            g->lost = malloc(c->len);
            assert_non_null(g->lost);
            memcpy(g->lost, c->data, c->len);
            g->lost_len = c->len;
            g->lost_xlen = p->xlen;
            ub__pkt_free(c);
        } else if (ub__dev_send(g->inner, &c, 1) != 1) {
            ub__pkt_free(c);
        }
        ub__pkt_free(p);
    }
    return (int)n;
}

static int g_recv(struct ub__dev *d, struct ub__pkt **pkts, uint32_t max, struct ub__pktpool *pool)
{
    struct gdev *g = (struct gdev *)d;
    int n = ub__dev_recv(g->inner, pkts, max, pool);
    if (n <= 0 || !g->drop_acks)
        return n;
    uint32_t k = 0;
    for (int i = 0; i < n; i++) {
        struct ub__wire_dgram w;
        uint8_t t = ub__wire_parse_datagram(&w, pkts[i]->data, pkts[i]->len, 0) == 0
                        ? w.pds.type
                        : UB_PDS_TYPE_RESERVED;
        if (t == UB_PDS_TYPE_ACK || t == UB_PDS_TYPE_ACK_CC || t == UB_PDS_TYPE_ACK_CCX) {
            g->acks_dropped++;
            ub__pkt_free(pkts[i]);
            continue;
        }
        pkts[k++] = pkts[i];
    }
    return (int)k;
}

static int g_fd(struct ub__dev *d)
{
    return ub__dev_fd(((const struct gdev *)d)->inner);
}

static uint32_t g_mtu(const struct ub__dev *d)
{
    return ub__dev_mtu(((const struct gdev *)d)->inner);
}

static uint32_t g_paths(const struct ub__dev *d)
{
    return ub__dev_num_paths(((const struct gdev *)d)->inner);
}

static void g_close(struct ub__dev *d)
{
    struct gdev *g = (struct gdev *)d;
    ub__dev_close(g->inner);
    free(g->lost);
    free(g);
}

static const struct ub__dev_ops gather_ops = {
    .name = "gather",
    .gather = true,
    .send = g_send,
    .recv = g_recv,
    .fd = g_fd,
    .mtu = g_mtu,
    .num_paths = g_paths,
    .close = g_close,
};

/* Two nodes on a 9000-byte loop fabric; zc is SOFTUB_ZC for both; node 0 sends through G. */
static void setup_zc(const char *zc)
{
    assert_int_equal(setenv("SOFTUB_ZC", zc, 1), 0);
    struct ub_loopnet_attr la = {.ports = 4, .mtu = MTU, .seed = 9};
    tnet_net(&T, &la, true);
    T.n = 2;
    for (uint32_t i = 0; i < 2; i++)
        tnet_open_node(&T, i, false, 64);
    assert_int_equal(unsetenv("SOFTUB_ZC"), 0);
    G = calloc(1, sizeof(*G));
    assert_non_null(G);
    G->dev.ops = &gather_ops;
    G->dev.local = T.ctx[0]->dev->local;
    G->inner = T.ctx[0]->dev;
    G->digest = 1469598103934665603ull;
    T.ctx[0]->dev = &G->dev;
    /* The same buffers in every run: their addresses are on the wire (buffer offsets). */
    if (!M0) {
        M0 = malloc(MEM);
        M1 = malloc(MEM);
        assert_true(M0 && M1);
    }
    memset(M1, 0, MEM);
    fill_pattern(M0, MEM, 3);
    assert_int_equal(ub_seg_register(T.ctx[0], M0, MEM, ALL_ACCESS, 1, &S0), 0);
    assert_int_equal(ub_seg_register(T.ctx[1], M1, MEM, ALL_ACCESS, 2, &S1), 0);
    TS = tnet_import_seg(&T, 0, S1, 2);
    tnet_warm_up(&T, M0, S0, TS);
}

static void teardown_zc(void)
{
    tnet_fini(&T);
    G = NULL;
}

/* Posts a WRITE of the SGEs sg[0..n) to offset off of node 1's memory. */
static void post_write(struct ub_sge *sg, uint32_t n, uint64_t off, uint64_t user)
{
    struct ub_wr wr = t_rma(UB_OP_WRITE, sg, TS, ub_tseg_base(TS) + off);
    wr.user_ctx = user;
    wr.num_sge = n;
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr, NULL), 0);
}

static void wait_ok(uint64_t user)
{
    struct ub_cr cr;
    assert_int_equal(tnet_wait(&T, 0, &cr), 1);
    assert_int_equal(cr.status, UB_CR_SUCCESS);
    assert_int_equal(cr.user_ctx, user);
}

/* Steps until node 0 has nothing queued or in flight towards node 1. */
static void settle(void)
{
    const struct ub__addr *dst = &T.ctx[1]->dev->local;
    for (int i = 0; i < 100000 && ub__pds_outstanding(T.ctx[0]->eng.pds, dst, UB_PDS_RUD); i++)
        tnet_step(&T, 10000);
    assert_int_equal(ub__pds_outstanding(T.ctx[0]->eng.pds, dst, UB_PDS_RUD), 0);
}

/* 200 KiB from one SGE, then 40 KiB from two (a packet spanning both is copied). */
static void scenario(void)
{
    struct ub_sge one = {M0 + 4096, 200 * 1024, S0};
    post_write(&one, 1, 0, 1);
    wait_ok(1);
    struct ub_sge two[2] = {{M0 + 300000, 20000, S0}, {M0 + 500000, 20000, S0}};
    post_write(two, 2, 300000, 2);
    wait_ok(2);
    settle();
    assert_memory_equal(M1, M0 + 4096, 200 * 1024);
    assert_memory_equal(M1 + 300000, M0 + 300000, 20000);
    assert_memory_equal(M1 + 320000, M0 + 500000, 20000);
}

/* The same run with and without zero copy: the same datagrams, byte for byte. */
static void test_same_bytes_as_copied(void **state)
{
    (void)state;
    setup_zc("2048");
    scenario();
    uint32_t sent = G->sent, zc = G->zc;
    uint64_t digest = G->digest;
    assert_true(zc >= 24); /* 23 from the first WRITE, at least one from the second */
    assert_int_equal(T.ctx[0]->eng.pds->st.retx_pkts, 0);
    teardown_zc();

    setup_zc("0");
    scenario();
    assert_int_equal(G->zc, 0);
    assert_int_equal(G->sent, sent);
    assert_true(G->digest == digest);
    teardown_zc();
    print_message("  %u datagrams, %u of them with attached payloads: identical\n", sent, zc);
}

/* A lost packet with an attached payload is sent again from the buffer, same bytes. */
static void test_retransmission(void **state)
{
    (void)state;
    setup_zc("2048");
    G->drop_zc_once = true;
    struct ub_sge one = {M0 + 4096, 200 * 1024, S0};
    post_write(&one, 1, 0, 1);
    wait_ok(1);
    settle();
    assert_non_null(G->lost);
    assert_true(T.ctx[0]->eng.pds->st.retx_pkts >= 1);
    assert_int_equal(G->resent_zc, 1); /* the retransmission still refers to the buffer */
    assert_int_equal(G->resent_flat, 0);
    assert_memory_equal(M1, M0 + 4096, 200 * 1024);
    teardown_zc();
}

/*
 * With node 0's held packets flattened: overwrites src's len bytes, lets PDS resend (ACKs
 * still lost), then lets the ACKs through; no datagram may have read src again (no attached
 * payload, no POISON) and node 1 must hold the original bytes.
 */
static void poison_and_resend(uint8_t *src, uint32_t len)
{
    struct ub__pds *pds = T.ctx[0]->eng.pds;
    uint8_t *orig = malloc(len);
    assert_non_null(orig);
    memcpy(orig, src, len);
    memset(src, POISON, len); /* the memory is the application's again */
    uint64_t retx = pds->st.retx_pkts;
    uint32_t zc = G->zc;
    for (int i = 0; i < 2000 && pds->st.retx_pkts < retx + 3; i++)
        tnet_step(&T, 10000);
    assert_true(pds->st.retx_pkts >= retx + 3);
    assert_int_equal(G->zc, zc);
    assert_int_equal(G->poisoned, 0);
    G->drop_acks = false;
    settle();
    assert_int_equal(G->poisoned, 0);
    assert_memory_equal(M1, orig, len);
    free(orig);
}

/*
 * ACKs lost: the response completes the WRITE while PDS still holds its packets. They are
 * flattened at completion; the application then overwrites its buffer, and the
 * retransmissions that follow carry the original bytes, none from the buffer.
 */
static void test_flattened_at_completion(void **state)
{
    (void)state;
    setup_zc("2048");
    G->drop_acks = true;
    /* The response in a packet of its own: on the last packet's ACK, which is dropped here
     * too, it would never arrive. */
    T.ctx[0]->ses.ack_rsp = false;
    struct ub_sge one = {M0 + 4096, 24000, S0};
    post_write(&one, 1, 0, 1);
    wait_ok(1);
    struct ub__pds *pds = T.ctx[0]->eng.pds;
    const struct ub__addr *dst = &T.ctx[1]->dev->local;
    assert_true(G->acks_dropped > 0);
    assert_true(ub__pds_outstanding(pds, dst, UB_PDS_RUD) >= 3);
    assert_int_equal(pds->st.zc_flattened, 3);
    assert_int_equal(ub__pds_flatten(pds, dst, UB_PDS_RUD, 0), 0); /* nothing attached left */
    poison_and_resend(M0 + 4096, 24000);
    teardown_zc();
}

/* A SEND of len bytes from M0+4096 (one SGE) into a receive buffer at node 1's M1. */
static void send_msg(uint32_t len, uint64_t user)
{
    struct ub_sge rs = {M1, len, S1};
    struct ub_rwr rw = {.user_ctx = 9, .sge = &rs, .num_sge = 1};
    assert_int_equal(ub_post_jetty_recv(T.jetty[1], &rw, NULL), 0);
    struct ub_sge sg = {M0 + 4096, len, S0};
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_SEND;
    wr.flags = UB_WR_COMPLETE;
    wr.user_ctx = user;
    wr.sge = &sg;
    wr.num_sge = 1;
    wr.tjetty = tnet_import_jetty(&T, 0, 1);
    assert_int_equal(ub_post_jetty_send(T.jetty[0], &wr, NULL), 0);
}

/* A rendezvous SEND: the READ data by reference, byte for byte what the copies were. */
static void test_rndv_same_bytes(void **state)
{
    (void)state;
    uint32_t len = UB_SES_EAGER_MAX + 150000, sent = 0, zc = 0;
    uint64_t digest = 0;
    for (int copy = 0; copy < 2; copy++) {
        setup_zc(copy ? "0" : "2048");
        uint32_t zc0 = G->zc;
        send_msg(len, 1);
        wait_ok(1);
        settle();
        assert_int_equal(T.ctx[0]->ses.st.rndv_served_pkts > 0, 1);
        assert_memory_equal(M1, M0 + 4096, len);
        if (!copy) {
            sent = G->sent;
            zc = G->zc - zc0;
            digest = G->digest;
            assert_true(zc >= 16); /* the READ's 150 000 bytes in 9 000-byte packets */
        } else {
            assert_int_equal(G->zc, 0);
            assert_int_equal(G->sent, sent);
            assert_true(G->digest == digest);
        }
        teardown_zc();
    }
    print_message("  %u datagrams, %u with attached READ data: identical\n", sent, zc);
}

/* ACKs lost: the SEND completes while PDS still holds READ data of it, which is flattened
 * then; the retransmissions after the buffer is overwritten carry the original bytes. */
static void test_rndv_flattened_at_completion(void **state)
{
    (void)state;
    setup_zc("2048");
    uint32_t len = UB_SES_EAGER_MAX + 30000;
    G->drop_acks = true;
    T.ctx[0]->ses.ack_rsp = false;
    send_msg(len, 1);
    wait_ok(1);
    struct ub__pds *pds = T.ctx[0]->eng.pds;
    assert_true(pds->st.zc_flattened >= 1);
    assert_int_equal(ub__pds_flatten(pds, &T.ctx[1]->dev->local, UB_PDS_RUD, 0), 0);
    poison_and_resend(M0 + 4096, len);
    teardown_zc();
}

/* Node 1 READs len bytes from node 0's M0+4096 into its M1: node 0 sends the data. */
static void read_from_0(uint32_t len)
{
    ub_tseg *ts = tnet_import_seg(&T, 1, S0, 1);
    struct ub_sge sg = {M1, len, S1};
    struct ub_wr wr = t_rma(UB_OP_READ, &sg, ts, ub_tseg_base(ts) + 4096);
    assert_int_equal(ub_post_jetty_send(T.jetty[1], &wr, NULL), 0);
    struct ub_cr cr;
    assert_int_equal(tnet_wait(&T, 1, &cr), 1);
    assert_int_equal(cr.status, UB_CR_SUCCESS);
}

/* A READ's data leaves its target by reference, byte for byte what the copies were. */
static void test_read_same_bytes(void **state)
{
    (void)state;
    uint32_t len = 200 * 1024, sent = 0, zc = 0;
    uint64_t digest = 0;
    for (int copy = 0; copy < 2; copy++) {
        setup_zc(copy ? "0" : "2048");
        uint32_t zc0 = G->zc, sent0 = G->sent;
        uint64_t d0 = G->digest;
        read_from_0(len);
        settle();
        assert_memory_equal(M1, M0 + 4096, len);
        if (!copy) {
            sent = G->sent - sent0;
            zc = G->zc - zc0;
            digest = G->digest ^ d0;
            assert_true(zc >= 22); /* 200 KiB in 9 000-byte packets */
        } else {
            assert_int_equal(G->zc, zc0);
            assert_int_equal(G->sent - sent0, sent);
            assert_true((G->digest ^ d0) == digest);
        }
        teardown_zc();
    }
    print_message("  %u datagrams, %u with attached READ data: identical\n", sent, zc);
}

/* ACKs lost: the READ completes while its target still holds the data for retransmission;
 * unregistering the segment copies that in, and the retransmissions after the memory is
 * overwritten carry the original bytes. */
static void test_read_unregistered(void **state)
{
    (void)state;
    setup_zc("2048");
    uint32_t len = 30000;
    G->drop_acks = true;
    read_from_0(len);
    struct ub__pds *pds = T.ctx[0]->eng.pds;
    assert_true(ub__pds_outstanding(pds, &T.ctx[1]->dev->local, UB_PDS_RUD) >= 3);
    uint64_t flat = pds->st.zc_flattened;
    assert_int_equal(ub_seg_unregister(S0), 0);
    assert_true(pds->st.zc_flattened >= flat + 3);
    assert_int_equal(ub__pds_flatten_range(pds, M0, MEM), 0); /* nothing attached left */
    poison_and_resend(M0 + 4096, len);
    teardown_zc();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_bytes_as_copied),
        cmocka_unit_test(test_retransmission),
        cmocka_unit_test(test_flattened_at_completion),
        cmocka_unit_test(test_rndv_same_bytes),
        cmocka_unit_test(test_rndv_flattened_at_completion),
        cmocka_unit_test(test_read_same_bytes),
        cmocka_unit_test(test_read_unregistered),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    free(M0);
    free(M1);
    return rc;
}
