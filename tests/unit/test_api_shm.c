/*
 * The public API over shared memory between two processes (fork + bootstrap), names
 * mapped to ids, and the automatic choice of shm for a peer on this host that advertises
 * it ("udp://...?shm=1" on both sides).
 */
#define _GNU_SOURCE
#include "unit/api_net_util.h"
#include "api/api.h"
#include "dev/shm.h"
#include "unit/api_read_util.h"
#include "dev/udp.h"

static void test_across_processes(void **state)
{
    (void)state;
    ub_bootstrap *bs;
    uint8_t d[NODE_DESC];
    pid_t pid = t_fork_target("shm://0", true, &bs, d);
    struct node a;
    struct ub_context_attr ca = {.progress = UB_PROGRESS_MANUAL};
    assert_int_equal(node_open(&a, "shm://0", &ca), 0);
    struct peer p;
    node_import(&a, d, &p);
    t_every_op(&a, NULL, &p, NULL);
    char m[8];
    assert_int_equal(ub_bootstrap_recv(bs, m, sizeof(m), N_BOOT_MS), 2);
    assert_memory_equal(m, "ok", 2);
    assert_int_equal(ub_bootstrap_send(bs, "x", 1, N_BOOT_MS), 0);
    assert_int_equal(t_reap(pid, 5000), 0);
    ub_bootstrap_close(bs);
    node_close(&a);
}

static void test_names(void **state)
{
    (void)state;
    struct ub_context_attr ca = {.progress = UB_PROGRESS_MANUAL};
    char name[64], a1[32], a2[32];
    snprintf(name, sizeof(name), "shm://softub-test-%d", (int)getpid());
    ub_context *c, *c2;
    assert_int_equal(ub_context_open(name, &ca, &c), 0);
    ub_context_addr(c, a1, sizeof(a1));
    /* The same name is the same id: taken. */
    assert_int_equal(ub_context_open(name, &ca, &c2), UB_EBUSY);
    assert_int_equal(ub_context_close(c), 0);
    assert_int_equal(ub_context_open(name, &ca, &c), 0);
    ub_context_addr(c, a2, sizeof(a2));
    assert_string_equal(a1, a2); /* deterministic */
    assert_int_equal(ub_context_close(c), 0);
    assert_int_equal(ub_context_open("shm://70000", &ca, &c), UB_EINVAL);
    assert_int_equal(ub_context_open("shm://1?bogus=1", &ca, &c), UB_EINVAL);
}

/*
 * One side keeps transport contexts over shm (SOFTUB_LINK=0), the other takes the link path:
 * every operation still works, each side sending its own way and taking the other's.
 */
static void test_link_mixed(void **state)
{
    (void)state;
    struct node a, b;
    struct ub_context_attr ca = {.progress = UB_PROGRESS_MANUAL};
    setenv("SOFTUB_LINK", "0", 1);
    int rc = node_open(&a, "shm://0", &ca);
    unsetenv("SOFTUB_LINK");
    assert_int_equal(rc, 0);
    assert_int_equal(node_open(&b, "shm://0", &ca), 0);
    t_every_op_local(&a, &b, NULL);
    struct ub_context_stats sa, sb;
    ub_context_stats(a.ctx, &sa);
    ub_context_stats(b.ctx, &sb);
    assert_int_equal(sa.tx_link, 0); /* a's requests through a PDC ... */
    assert_true(sa.rx_link > 0);     /* ... b's responses on the link path */
    assert_true(sb.tx_link > 0);
    assert_int_equal(sb.rx_link, 0);
    assert_int_equal(sa.rx_malformed + sb.rx_malformed, 0);
    node_close(&a);
    node_close(&b);
}

/*
 * Every fetching atomic over the link path, each on the word the last left: the old values
 * and the word as the operations say; the target takes the usual ones whole (rx_fast). A
 * misaligned one and one beyond the segment take the general way, which answers why. READs
 * of up to one response packet are taken whole as well, larger ones streamed.
 */
static void test_link_small_ops(void **state)
{
    (void)state;
    struct node a, b;
    struct ub_context_attr ca = {.progress = UB_PROGRESS_MANUAL};
    assert_int_equal(node_open(&a, "shm://0", &ca), 0);
    assert_int_equal(node_open(&b, "shm://0", &ca), 0);
    uint8_t d[NODE_DESC];
    node_export(&b, d);
    struct peer p;
    node_import(&a, d, &p);
    static const struct {
        enum ub_opcode op;
        uint64_t operand, compare, after;
    } step[] = {
        {UB_OP_ATOMIC_FADD, 40, 0, 140},
        {UB_OP_ATOMIC_FSUB, 13, 0, 127},
        {UB_OP_ATOMIC_FAND, 0x7c, 0, 0x7c},
        {UB_OP_ATOMIC_FOR, 0x300, 0, 0x37c},
        {UB_OP_ATOMIC_FXOR, 0x3ff, 0, 0x83},
        {UB_OP_ATOMIC_SWAP, 9, 0, 9},
        {UB_OP_ATOMIC_CAS, 77, 8, 9} /* no match */,
        {UB_OP_ATOMIC_CAS, 77, 9, 77},
    };
    uint8_t *word = b.mem + (512u << 10);
    uint64_t v = 100, fast0 = b.ctx->ses.st.rx_fast;
    memcpy(word, &v, 8);
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.flags = UB_WR_COMPLETE;
    wr.u.atomic.tseg = p.ts;
    wr.u.atomic.addr = p.base + (512u << 10);
    for (size_t i = 0; i < sizeof(step) / sizeof(step[0]); i++) {
        uint64_t old = 0;
        wr.opcode = step[i].op;
        wr.user_ctx = i;
        wr.u.atomic.operand = step[i].operand;
        wr.u.atomic.compare = step[i].compare;
        wr.u.atomic.result = &old;
        assert_int_equal(t_run(&a, &b, &wr), UB_CR_SUCCESS);
        assert_int_equal(old, v);
        memcpy(&v, word, 8);
        assert_int_equal(v, step[i].after);
    }
    assert_int_equal(b.ctx->ses.st.rx_fast - fast0, sizeof(step) / sizeof(step[0]));
    wr.opcode = UB_OP_ATOMIC_FADD;
    wr.u.atomic.addr = p.base + (512u << 10) + 4;
    assert_int_equal(t_run(&a, &b, &wr), UB_CR_REM_ACCESS_ERR);
    wr.u.atomic.addr = p.base + (64u << 20);
    assert_int_equal(t_run(&a, &b, &wr), UB_CR_REM_ACCESS_ERR);
    assert_int_equal(b.ctx->ses.st.rx_fast - fast0, sizeof(step) / sizeof(step[0]));
    memcpy(&v, word, 8);
    assert_int_equal(v, 77);
    /* READs of 8 and 64 bytes (one response record each) and of one response packet are
     * taken whole too; a byte more is not. */
    uint32_t max = b.ctx->ses.max_rsp_payload;
    t_fill(b.mem + 4096, max + 64, 9);
    for (uint32_t k = 0; k < 5; k++) {
        uint32_t len = (uint32_t[]){8, 64, 65, max, max + 1}[k];
        uint64_t f = b.ctx->ses.st.rx_fast;
        memset(a.mem, 0, max + 64);
        struct ub_sge rs = {a.mem, len, a.seg};
        struct ub_wr rd = t_rma(UB_OP_READ, &rs, p.ts, p.base + 4096);
        rd.user_ctx = 100 + k;
        assert_int_equal(t_run(&a, &b, &rd), UB_CR_SUCCESS);
        assert_memory_equal(a.mem, b.mem + 4096, len);
        assert_int_equal(a.mem[len], 0);
        assert_int_equal(b.ctx->ses.st.rx_fast - f, len <= max ? 1 : 0);
    }
    node_close(&a);
    node_close(&b);
}

/* READs of one response packet over the link path: answered when they execute. */
static void test_link_reads_one_packet(void **state)
{
    (void)state;
    t_reads_one_packet_on("shm://0");
}

/* Both sides open udp + shm: traffic between them goes through shared memory. */
static void test_auto_choice(void **state)
{
    (void)state;
    struct node a, b, c;
    struct ub_context_attr ca = {.progress = UB_PROGRESS_MANUAL};
    assert_int_equal(node_open(&a, "udp://127.0.0.1:0?paths=4&shm=1", &ca), 0);
    assert_int_equal(node_open(&b, "udp://127.0.0.1:0?paths=4&shm=1", &ca), 0);
    assert_int_equal(node_open(&c, "udp://127.0.0.1:0?paths=4", &ca), 0); /* udp only */
    char addr[96];
    ub_context_addr(a.ctx, addr, sizeof(addr));
    assert_non_null(strstr(addr, "+shm:"));
    uint8_t d[NODE_DESC];
    t_every_op_local(&a, &b, d);
    struct peer q;
    struct ub_context_stats sa;
    ub_context_stats(a.ctx, &sa);
    assert_true(sa.tx_shm_pkts > 0);
    assert_int_equal(sa.tx_udp_pkts, 0);
    /* A udp-only importer of the same descriptors reaches b over udp. */
    node_import(&c, d, &q);
    t_fill(c.mem, 65536, 11);
    struct ub_sge sg = {c.mem, 65536, c.seg};
    struct ub_wr wr = t_rma(UB_OP_WRITE, &sg, q.ts, q.base + 65536);
    wr.user_ctx = 1;
    assert_int_equal(t_run(&c, &b, &wr), UB_CR_SUCCESS);
    assert_memory_equal(b.mem + 65536, c.mem, 65536);
    struct ub_context_stats sb;
    ub_context_stats(b.ctx, &sb);
    assert_true(sb.tx_udp_pkts > 0); /* its responses to c */
    node_close(&a);
    node_close(&b);
    node_close(&c);
}

static struct ub__shm_stats shm_stats_of(ub_context *ctx)
{
    struct ub__shm_stats st;
    assert_int_equal(ub__shm_stats(ub__ctx_of(ctx)->shm, &st), 0);
    return st;
}

static bool fd_readable(ub_context *ctx)
{
    struct pollfd pf = {.fd = ub_context_fd(ctx), .events = POLLIN};
    return poll(&pf, 1, 0) == 1;
}

/*
 * A udp + shm context of one udp path: the udp sockets stay out of epoll until the context's
 * fd is asked for (docs/device-udp.md, "The epoll set, lazily"), and then a udp peer's
 * request makes that fd readable.
 */
static void test_auto_choice_fd_lazy(void **state)
{
    (void)state;
    struct node a, c;
    struct ub_context_attr ca = {.progress = UB_PROGRESS_MANUAL};
    assert_int_equal(node_open(&a, "udp://127.0.0.1:0?paths=1&shm=1", &ca), 0);
    assert_int_equal(node_open(&c, "udp://127.0.0.1:0?paths=1", &ca), 0);
    struct ub__udp_stats us;
    assert_int_equal(ub__udp_stats(ub__ctx_of(a.ctx)->udp, &us), 0);
    assert_false(us.epoll_live);
    int fd = ub_context_fd(a.ctx);
    assert_true(fd >= 0);
    assert_int_equal(ub__udp_stats(ub__ctx_of(a.ctx)->udp, &us), 0);
    assert_true(us.epoll_live);
    assert_false(fd_readable(a.ctx));
    uint8_t d[NODE_DESC];
    node_export(&a, d);
    struct peer q;
    node_import(&c, d, &q);
    struct ub_sge sg = {c.mem, 8, c.seg};
    struct ub_wr wr = t_rma(UB_OP_WRITE, &sg, q.ts, q.base);
    assert_int_equal(ub_post_jetty_send(c.jetty, &wr, NULL), 0);
    ub_progress(c.ctx);
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&pf, 1, 1000), 1);
    node_close(&a);
    node_close(&c);
}

/* One signalled 8 B WRITE from a to b, driven by ub_poll_jfc on both sides only. */
static void busy_write(struct node *a, struct node *b, struct peer *p, uint64_t id)
{
    struct ub_sge sg = {a->mem, 8, a->seg};
    struct ub_wr wr = t_rma(UB_OP_WRITE, &sg, p->ts, p->base + 8 * (id % 64));
    wr.user_ctx = id;
    struct ub_wr *bad = NULL;
    assert_int_equal(ub_post_jetty_send(a->jetty, &wr, &bad), 0);
    struct ub_cr cr;
    uint64_t end = t_now() + N_WAIT_NS;
    int k;
    while ((k = ub_poll_jfc(a->jfc, 1, &cr)) == 0) {
        assert_int_equal(ub_poll_jfc(b->jfc, 0, NULL), 0);
        assert_true(t_now() < end);
    }
    assert_int_equal(k, 1);
    assert_int_equal(cr.user_ctx, id);
    assert_int_equal(cr.status, UB_CR_SUCCESS);
}

/*
 * Wake-ups over shm: consumers that busy-poll through ub_poll_jfc never ask for one, so
 * their traffic costs no FIFO write; a consumer that progressed with ub_progress (about
 * to sleep on ub_context_fd) is woken by the next packet, also after a round that
 * received something.
 */
static void test_busy_poll_no_wakeups(void **state)
{
    (void)state;
    struct node a, b;
    struct ub_context_attr ca = {.progress = UB_PROGRESS_MANUAL};
    struct peer p;
    t_pair(&a, "shm://0", &b, "shm://0", &ca, &p);
    busy_write(&a, &b, &p, 1); /* attach; settles what the setup armed */
    busy_write(&a, &b, &p, 2);
    struct ub__shm_stats a0 = shm_stats_of(a.ctx), b0 = shm_stats_of(b.ctx);
    for (uint64_t i = 0; i < 200; i++)
        busy_write(&a, &b, &p, 100 + i);
    struct ub__shm_stats a1 = shm_stats_of(a.ctx), b1 = shm_stats_of(b.ctx);
    assert_true(b1.rx_pkts - b0.rx_pkts >= 200);
    assert_int_equal(a1.wake_sent - a0.wake_sent, 0);
    assert_int_equal(b1.wake_sent - b0.wake_sent, 0);
    assert_int_equal(a1.wake_armed - a0.wake_armed, 0);
    assert_int_equal(b1.wake_armed - b0.wake_armed, 0);

    /* b about to sleep: ub_progress arms; a's next packet makes b's fd readable. */
    ub_progress(b.ctx);
    assert_false(fd_readable(b.ctx));
    struct ub_sge sg = {a.mem, 8, a.seg};
    struct ub_wr wr = t_rma(UB_OP_WRITE, &sg, p.ts, p.base);
    wr.user_ctx = 7;
    struct ub_wr *bad = NULL;
    assert_int_equal(ub_post_jetty_send(a.jetty, &wr, &bad), 0);
    ub_poll_jfc(a.jfc, 0, NULL);
    assert_true(fd_readable(b.ctx));
    /* A round that receives the packet (and drains the FIFO) leaves b armed again. */
    struct ub__shm_stats b2 = shm_stats_of(b.ctx);
    ub_progress(b.ctx);
    struct ub__shm_stats b3 = shm_stats_of(b.ctx);
    assert_true(b3.rx_pkts > b2.rx_pkts);
    assert_false(fd_readable(b.ctx));
    wr.user_ctx = 8;
    assert_int_equal(ub_post_jetty_send(a.jetty, &wr, &bad), 0);
    ub_poll_jfc(a.jfc, 0, NULL);
    assert_true(fd_readable(b.ctx));
    node_close(&a);
    node_close(&b);
}

/* Posts K WRITEs of LEN bytes from a's memory to p (user_ctx 1000 + i), unsignalled polls. */
static void post_writes(struct node *a, struct peer *p, uint32_t k, uint32_t len)
{
    t_fill(a->mem, (size_t)k * len, 5);
    for (uint32_t i = 0; i < k; i++) {
        struct ub_sge sg = {a->mem + (size_t)i * len, len, a->seg};
        struct ub_wr wr = t_rma(UB_OP_WRITE, &sg, p->ts, p->base + (uint64_t)i * len);
        wr.user_ctx = 1000 + i;
        struct ub_wr *bad = NULL;
        assert_int_equal(ub_post_jetty_send(a->jetty, &wr, &bad), 0);
    }
}

/* Polls a (and b) until the K WRITEs of post_writes completed, each once and successfully. */
static void wait_writes(struct node *a, struct node *b, uint32_t k)
{
    uint8_t seen[256] = {0};
    assert_true(k <= 256);
    uint32_t got = 0;
    uint64_t end = t_now() + N_WAIT_NS;
    while (got < k) {
        struct ub_cr cr[16];
        int n = ub_poll_jfc(a->jfc, 16, cr);
        assert_true(n >= 0);
        for (int i = 0; i < n; i++) {
            assert_int_equal(cr[i].status, UB_CR_SUCCESS);
            assert_true(cr[i].user_ctx >= 1000 && cr[i].user_ctx < 1000 + k);
            assert_int_equal(seen[cr[i].user_ctx - 1000]++, 0); /* exactly once */
            got++;
        }
        ub_poll_jfc(b->jfc, 0, NULL);
        assert_true(t_now() < end);
    }
}

/*
 * A full lane is back-pressure, not loss: with 4-slot lanes at b, 64 WRITEs posted at once
 * overflow it; the packets the device refuses are held and sent again, so every WRITE
 * completes once, intact, with nothing resent and nothing dropped.
 */
static void test_full_lane_holds_back(void **state)
{
    (void)state;
    struct node a, b;
    struct ub_context_attr ca = {.progress = UB_PROGRESS_MANUAL};
    struct peer p;
    t_pair(&a, "shm://0", &b, "shm://0?slots=4", &ca, &p);
    enum { K = 64, LEN = 3000 };
    post_writes(&a, &p, K, LEN);
    wait_writes(&a, &b, K);
    assert_memory_equal(b.mem, a.mem, (size_t)K * LEN);
    struct ub_context_stats st;
    ub_context_stats(a.ctx, &st);
    /* The link path (no transport contexts over shm): every WRITE one packet, none resent,
     * none given up however long the lane stayed full. */
    assert_int_equal(st.tx_link, K);
    assert_int_equal(st.retransmits, 0);
    assert_int_equal(a.ctx->eng.stats.tx_hold_expired, 0);
    assert_true(a.ctx->drive.tx_refused > 0); /* the lane did fill */
    assert_int_equal(a.ctx->drive.tx_dropped, 0);
    node_close(&a);
    node_close(&b);
}

/*
 * A peer that does not drain its lane holds back only what goes to it: with b stopped (never
 * polled) and its 4-slot lane full, a's traffic to c over shm flows as before, also past the
 * time after which a's output to b parks; once b drains, every WRITE to it completes, once.
 */
static void test_full_lane_holds_back_one_peer(void **state)
{
    (void)state;
    struct node a, b, c;
    struct ub_context_attr ca = {.progress = UB_PROGRESS_MANUAL};
    struct peer p, q;
    t_pair(&a, "shm://0", &b, "shm://0?slots=4", &ca, &p);
    assert_int_equal(node_open(&c, "shm://0", &ca), 0);
    uint8_t d[NODE_DESC];
    node_export(&c, d);
    node_import(&a, d, &q);
    enum { K = 16, LEN = 3000 };
    post_writes(&a, &p, K, LEN);
    ub_poll_jfc(a.jfc, 0, NULL);
    assert_true(a.ctx->drive.tx_refused > 0); /* b's lane is full */
    uint8_t *src = a.mem + (size_t)K * LEN;
    t_fill(src, 512, 7);
    struct ub_sge sg = {src, 512, a.seg};
    for (int round = 0; round < 2; round++) {
        for (uint64_t i = 0; i < 20; i++) {
            struct ub_wr wr = t_rma(UB_OP_WRITE, &sg, q.ts, q.base + 512 * i);
            wr.user_ctx = 1 + i;
            assert_int_equal(t_run(&a, &c, &wr), UB_CR_SUCCESS);
        }
        assert_memory_equal(c.mem + 512 * 19, src, 512);
        if (round == 0) { /* past the hold bound: a's output to b parks */
            /* Polled until it has (a host that takes the CPU away for the last stretch of a
             * fixed wait would leave no poll past the bound), within a generous bound. */
            uint64_t until = t_now() + UB_ENGINE_HOLD_MAX_NS + N_WAIT_NS;
            while (a.ctx->eng.stats.tx_hold_parked == 0 && t_now() < until)
                ub_poll_jfc(a.jfc, 0, NULL);
            assert_true(a.ctx->eng.stats.tx_hold_parked > 0);
        }
    }
    wait_writes(&a, &b, K);
    assert_memory_equal(b.mem, a.mem, (size_t)K * LEN);
    assert_int_equal(a.ctx->drive.tx_dropped, 0);
    node_close(&a);
    node_close(&b);
    node_close(&c);
}

static struct ub__dev *open_shm_dev(const char *spec)
{
    struct ub__shm_cfg cfg;
    struct ub__dev *d = NULL;
    assert_int_equal(ub__shm_cfg_parse(spec, &cfg), 0);
    assert_int_equal(ub__shm_open(&cfg, &d), 0);
    return d;
}

static struct ub__dev *open_udp_dev(void)
{
    struct ub__udp_cfg cfg;
    struct ub__dev *d = NULL;
    /* A real network's MTU (not loopback's default): a 3000-byte datagram is over it. */
    assert_int_equal(ub__udp_cfg_parse("127.0.0.1:0?connect=0&mtu=1452", &cfg), 0);
    assert_int_equal(ub__udp_open(&cfg, &d), 0);
    return d;
}

static struct ub__pkt *byte_pkt(struct ub__pktpool *pool, const struct ub__addr *to, uint8_t v)
{
    struct ub__pkt *p = ub__pkt_alloc(pool);
    assert_non_null(p);
    *ub__pkt_put(p, 1) = v;
    p->addr = *to;
    return p;
}

/* Fills c's lane of four slots through the composite device m. */
static void fill_lane(struct ub__dev *m, const struct ub__dev *c, struct ub__pktpool *pool)
{
    struct ub__pkt *b[4];
    for (uint8_t i = 0; i < 4; i++)
        b[i] = byte_pkt(pool, &c->local, i);
    assert_int_equal(ub__dev_send(m, b, 4), 4);
}

/* Receives exactly want datagrams from d at once and frees them. */
static void recv_free(struct ub__dev *d, struct ub__pktpool *pool, int want)
{
    struct ub__pkt *in[8];
    assert_int_equal(ub__dev_recv(d, in, 8, pool), want);
    for (int i = 0; i < want; i++)
        ub__pkt_free(in[i]);
}

/* A composite (udp + shm) device m, a shm peer c whose lane of four slots m has filled, a
 * udp peer u, and the pool of their packets. */
struct composite {
    struct ub__dev *m, *c, *u;
    struct ub__pktpool pool;
};

static void composite_open(struct composite *t, uint32_t buf_size)
{
    t->c = open_shm_dev("0?slots=4");
    t->u = open_udp_dev();
    t->m = NULL;
    assert_int_equal(ub__multidev_open(open_udp_dev(), open_shm_dev("0"), &t->m), 0);
    assert_int_equal(ub__pktpool_init(&t->pool, 64, buf_size, 64), 0);
    fill_lane(t->m, t->c, &t->pool);
}

/* Takes the four packets of c's lane, closes everything and checks no buffer was lost. */
static void composite_close(struct composite *t)
{
    recv_free(t->c, &t->pool, 4);
    ub__dev_close(t->m);
    ub__dev_close(t->u);
    ub__dev_close(t->c);
    assert_int_equal(t->pool.avail, t->pool.count);
    ub__pktpool_fini(&t->pool);
}

/*
 * The udp + shm device of one context: a shm peer whose lane is full holds back neither the
 * udp peers nor the other shm peers of the same batch; its packets come back at the batch's
 * end, in order.
 */
static void test_composite_full_lane(void **state)
{
    (void)state;
    struct composite t;
    composite_open(&t, 2048);
    struct ub__dev *e = open_shm_dev("0");
    struct ub__pkt *b[6];
    const struct ub__dev *to[6] = {t.c, t.u, e, t.c, t.u, e};
    for (uint8_t i = 0; i < 6; i++)
        b[i] = byte_pkt(&t.pool, &to[i]->local, (uint8_t)(10 + i));
    assert_int_equal(ub__dev_send(t.m, b, 6), 4);
    assert_int_equal(b[4]->data[0], 10);
    assert_int_equal(b[5]->data[0], 13);
    recv_free(e, &t.pool, 2);
    struct ub__pkt *in[8];
    int got = 0;
    for (int tries = 0; got < 2 && tries < 100000; tries++) {
        int n = ub__dev_recv(t.u, in, 8, &t.pool);
        assert_true(n >= 0);
        for (int i = 0; i < n; i++)
            ub__pkt_free(in[i]);
        got += n;
    }
    assert_int_equal(got, 2);
    ub__pkt_free(b[4]);
    ub__pkt_free(b[5]);
    ub__dev_close(e);
    composite_close(&t);
}

/*
 * A batch in which the udp device fails (a datagram over its MTU) while a full lane refuses
 * the shm packet: nothing is lost, both come back to the caller (the shm one to be kept).
 */
static void test_composite_error_and_full_lane(void **state)
{
    (void)state;
    struct composite t;
    composite_open(&t, 4096);
    struct ub__pkt *b[2];
    b[0] = byte_pkt(&t.pool, &t.u->local, 20);
    assert_non_null(ub__pkt_put(b[0], 3000)); /* over the udp device's MTU */
    b[1] = byte_pkt(&t.pool, &t.c->local, 21);
    assert_int_equal(ub__dev_send(t.m, b, 2), 0);
    assert_int_equal(b[0]->data[0], 20);
    assert_int_equal(b[1]->data[0], 21);
    ub__pkt_free(b[0]);
    ub__pkt_free(b[1]);
    composite_close(&t);
}

/*
 * A target process SIGKILLed mid-transfer over shm: nothing retransmits on the lossless lanes
 * while it lives, yet its death still fails every outstanding request (PEER_UNREACHABLE,
 * nothing left hanging) soon: over the link path no transport context watches the peer, but
 * the context probes its shm peers' processes every UB_API_SHM_CHECK_NS while it drives (the
 * response bound, 2 s, would be the backstop).
 */
static void test_peer_killed(void **state)
{
    (void)state;
    t_peer_killed("shm://0", 4000, 1000, 500);
}

/*
 * A server process at a named shm id is killed and started again under the same name: the
 * client, which heard from the first one and was idle meanwhile, probes its shm peers as it
 * posts (the last probe is older than UB_API_SHM_CHECK_NS), finds the old process gone and
 * reaches the new one at the first try, never locked out by the link header's check; hearing
 * the new incarnation raises UB_ASYNC_PEER_RESTARTED.
 */
/* A sender whose tagged rendezvous message is parked here (no buffer matches) closes: over shm
 * no PDS says so, the peers' check does, and the message is let go (nothing of it could be READ
 * any more), so that a buffer posted later waits for a live one. */
static void test_parked_sender_gone(void **state)
{
    (void)state;
    struct node a, b;
    struct peer p;
    struct ub_context_attr ca = {.progress = UB_PROGRESS_MANUAL};
    t_pair(&a, "shm://0", &b, "shm://0", &ca, &p);
    struct ub_sge sg = {a.mem, 200u << 10, a.seg}; /* past eager_max: a rendezvous */
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_TSEND;
    wr.sge = &sg;
    wr.num_sge = 1;
    wr.tjetty = p.ttj;
    wr.u.send.tag = 4;
    assert_int_equal(ub_post_jetty_send(a.jetty, &wr, NULL), 0);
    uint64_t end = t_now() + N_WAIT_NS;
    while (ub__list_empty(&b.tjfr->unexpected)) {
        ub_progress(a.ctx);
        ub_progress(b.ctx);
        assert_true(t_now() < end);
    }
    node_close(&a);
    const struct ub__ses_stats *st = &b.ctx->ses.st;
    while (!st->rndv_park_dropped) {
        ub_progress(b.ctx);
        assert_true(t_now() < end);
    }
    assert_true(ub__list_empty(&b.tjfr->unexpected));
    assert_int_equal(st->rndv_park_dropped, 1);
    node_close(&b);
}

static void test_server_restarted(void **state)
{
    (void)state;
    char uri[64];
    snprintf(uri, sizeof(uri), "shm://softub-restart-%d", (int)getpid());
    ub_bootstrap *bs;
    uint8_t d[NODE_DESC];
    pid_t pid = t_fork_target(uri, false, &bs, d);
    struct node a;
    struct ub_context_attr ca = {.progress = UB_PROGRESS_MANUAL, .rsp_timeout_ms = 500};
    assert_int_equal(node_open(&a, "shm://0", &ca), 0);
    struct peer p, q;
    node_import(&a, d, &p);
    t_fill(a.mem, 4096, 9);
    struct ub_sge sg = {a.mem, 4096, a.seg};
    struct ub_wr wr = t_rma(UB_OP_WRITE, &sg, p.ts, p.base);
    assert_int_equal(t_run(&a, NULL, &wr), UB_CR_SUCCESS);
    uint64_t idle = t_now();
    kill(pid, SIGKILL);
    assert_true(t_reap(pid, 2000) == 128 + SIGKILL);
    ub_bootstrap_close(bs);
    pid = t_fork_target(uri, false, &bs, d);
    node_import(&a, d, &q);
    while (t_now() - idle < UB_API_SHM_CHECK_NS + 1000000) /* the client idles that long */
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    struct ub_async_event ev;
    assert_int_equal(ub_get_async_event(a.ctx, &ev), 0);
    wr = t_rma(UB_OP_WRITE, &sg, q.ts, q.base);
    wr.user_ctx = 2;
    assert_int_equal(t_run(&a, NULL, &wr), UB_CR_SUCCESS);
    assert_int_equal(ub_get_async_event(a.ctx, &ev), 1);
    assert_int_equal(ev.type, UB_ASYNC_PEER_RESTARTED);
    assert_int_equal(ub_bootstrap_send(bs, "x", 1, N_BOOT_MS), 0);
    assert_int_equal(t_reap(pid, 5000), 0);
    ub_bootstrap_close(bs);
    node_close(&a);
}

/*
 * Automatic progress: while its thread spins (within spin_us of work) it looks at the shm
 * lanes itself, so the traffic of a busy context costs no FIFO write; it asks for a wake-up
 * only in the round before it sleeps.
 */
static void test_auto_progress_spins_without_wakeups(void **state)
{
    (void)state;
    struct node a, b;
    /* A spin bound far beyond any operation here: the threads never sleep during the run. */
    struct ub_context_attr ca = {.progress = UB_PROGRESS_AUTO, .spin_us = 10000000};
    struct peer p;
    t_pair(&a, "shm://0", &b, "shm://0", &ca, &p);
    struct ub_sge sg = {a.mem, 8, a.seg};
    struct ub_wr wr = t_rma(UB_OP_WRITE, &sg, p.ts, p.base);
    assert_int_equal(t_run(&a, NULL, &wr), UB_CR_SUCCESS); /* attach */
    struct ub__shm_stats a0 = shm_stats_of(a.ctx), b0 = shm_stats_of(b.ctx);
    for (uint64_t i = 0; i < 200; i++) {
        wr.user_ctx = 10 + i;
        assert_int_equal(t_run(&a, NULL, &wr), UB_CR_SUCCESS);
    }
    struct ub__shm_stats a1 = shm_stats_of(a.ctx), b1 = shm_stats_of(b.ctx);
    assert_true(b1.rx_pkts - b0.rx_pkts >= 200);
    /* At most the one each side may still owe from before the loop. */
    assert_true(a1.wake_sent - a0.wake_sent <= 1);
    assert_true(b1.wake_sent - b0.wake_sent <= 1);
    node_close(&a);
    node_close(&b);
}

/*
 * A context that only ever busy-polls (ub_poll_jfc) and then sleeps on ub_context_fd is not
 * left asleep: the device is armed from its open, and the wake-up byte of the first packet
 * stays in the FIFO until a round that arms again drains it.
 */
static void test_poll_only_sleeper_is_woken(void **state)
{
    (void)state;
    struct node a, b;
    struct ub_context_attr ca = {.progress = UB_PROGRESS_MANUAL};
    struct peer p;
    t_pair(&a, "shm://0", &b, "shm://0", &ca, &p);
    assert_false(fd_readable(b.ctx));
    busy_write(&a, &b, &p, 1);
    assert_true(fd_readable(b.ctx));
    node_close(&a);
    node_close(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_across_processes),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_link_mixed),
        cmocka_unit_test(test_link_small_ops),
        cmocka_unit_test(test_link_reads_one_packet),
        cmocka_unit_test(test_auto_choice),
        cmocka_unit_test(test_auto_choice_fd_lazy),
        cmocka_unit_test(test_busy_poll_no_wakeups),
        cmocka_unit_test(test_poll_only_sleeper_is_woken),
        cmocka_unit_test(test_full_lane_holds_back),
        cmocka_unit_test(test_full_lane_holds_back_one_peer),
        cmocka_unit_test(test_composite_full_lane),
        cmocka_unit_test(test_composite_error_and_full_lane),
        cmocka_unit_test(test_peer_killed),
        cmocka_unit_test(test_parked_sender_gone),
        cmocka_unit_test(test_server_restarted),
        cmocka_unit_test(test_auto_progress_spins_without_wakeups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
