/*
 * The shared-memory device and its data path: spec parsing, open/close/unlink, addressing,
 * two devices in one process (a full lane refusing only its own peer's packets, small
 * datagrams delta-encoded, no page faults on a ring's first lap, attached payloads
 * flattened), engines in one process and across two and three real processes (per-producer
 * order, payloads intact), and multi-producer stress with exact ring-full accounting. Prints
 * one-way latency (busy-poll and sleeping on the fd) and throughput between processes.
 * A peer's life and the edges (wake-ups, dead and stale peers, CMA, damage): test_shm_life.c.
 *
 * Children never use cmocka: they report through pipes and exit codes.
 * Every wait is a poll on a device fd or a pipe with a timeout, inside a
 * loop bounded in iterations and time; nothing sleeps to synchronise.
 */
#include "unit/shm_util.h"

#include <sys/resource.h>
#include <sys/stat.h>

#include "sanitized.h"

#ifndef MADV_POPULATE_READ /* headers older than Linux 5.14 */
#define MADV_POPULATE_READ 22
#endif

#define E2E_N 100000u

/* ---- spec parsing, open/close --------------------------------------------------------- */

static void test_parse(void **state)
{
    (void)state;
    struct ub__shm_cfg c;
    assert_int_equal(ub__shm_cfg_parse("shm://42", &c), 0);
    assert_int_equal(c.id, 42);
    assert_int_equal(
        ub__shm_cfg_parse("shm://7?slots=1024&mtu=9000&lanes=4&peers=8&paths=2&wake=0", &c), 0);
    assert_int_equal(c.id, 7);
    assert_int_equal(c.slots, 1024);
    assert_int_equal(c.mtu, 9000);
    assert_int_equal(c.lanes, 4);
    assert_int_equal(c.max_peers, 8);
    assert_int_equal(c.num_paths, 2);
    assert_true(c.no_wake);
    assert_int_equal(ub__shm_cfg_parse("shm:9", &c), 0);
    assert_int_equal(c.id, 9);
    assert_int_equal(ub__shm_cfg_parse("", &c), 0);
    assert_int_equal(c.id, 0);
    assert_int_equal(ub__shm_cfg_parse("shm://?wake=1", &c), 0);
    assert_false(c.no_wake);
    static const char *bad[] = {"shm://65536",     "shm://x",        "shm://1?slots=1000",
                                "shm://1?slots=1", "shm://1?mtu=63", "shm://1?lanes=65",
                                "shm://1?foo=1",   "shm://1?",       "shm://1?lanes",
                                "shm://1?wake=2",  "shm://1?=3",     "shm://1?peers=0",
                                "shm://1&lanes=2", "shm://-1",       "shm://1?paths=65"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(ub__shm_cfg_parse(bad[i], &c), UB_EINVAL);
        assert_int_equal(c.id, 0);
    }
    char longspec[UB_SHM_SPEC_MAX + 16];
    memset(longspec, '1', sizeof(longspec) - 1);
    longspec[sizeof(longspec) - 1] = '\0';
    assert_int_equal(ub__shm_cfg_parse(longspec, &c), UB_EINVAL);
    assert_int_equal(ub__shm_cfg_parse(NULL, &c), UB_EINVAL);
    struct ub__dev *d;
    struct ub__shm_cfg badc = {.slots = 3};
    assert_int_equal(ub__shm_open(&badc, &d), UB_EINVAL);
    assert_null(d);
    badc = (struct ub__shm_cfg){.lanes = 64, .slots = 65536, .mtu = 65536};
    assert_int_equal(ub__shm_open(&badc, &d), UB_EINVAL); /* 270 GB */
}

static void test_open_close(void **state)
{
    (void)state;
    struct ub__dev *a = open_spec("shm://?lanes=2&slots=16");
    uint16_t id = a->local.port;
    assert_int_equal(a->local.family, UB_AF_SHM);
    assert_true(id != 0);
    assert_int_equal(ub__shm_reachable(&a->local), 0);
    assert_true(obj_exists(id));
    assert_true(ub__dev_fd(a) >= 0);
    assert_int_equal(ub__dev_mtu(a), UB_SHM_DEFAULT_MTU);
    assert_int_equal(ub__dev_num_paths(a), 1);
    char fifo[128];
    char name[UB_SHM_NAME_MAX];
    ub__shm_objname(id, name, sizeof(name));
    snprintf(fifo, sizeof(fifo), "/dev/shm%s.wake", name);
    struct stat st;
    assert_int_equal(stat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));

    /* The id is taken while a lives. */
    char spec[64];
    snprintf(spec, sizeof(spec), "shm://%u", id);
    struct ub__shm_cfg c;
    struct ub__dev *b = NULL;
    assert_int_equal(ub__shm_cfg_parse(spec, &c), 0);
    assert_int_equal(ub__shm_open(&c, &b), UB_EBUSY);
    assert_null(b);

    struct ub__shm_stats s = stats_of(a);
    assert_int_equal(s.id, id);
    assert_int_equal(s.lanes, 2);
    assert_int_equal(s.slots, 16);
    struct ub__shm_layout lay;
    assert_int_equal(ub__shm_layout(a, &lay), 0);
    assert_int_equal(lay.obj_size, s.obj_size);
    assert_true(lay.slot_off + lay.slot_len <= lay.obj_size);

    ub__dev_close(a);
    assert_false(obj_exists(id));
    assert_int_equal(stat(fifo, &st), -1);
    struct ub__addr gone;
    ub__shm_addr(&gone, id);
    assert_int_equal(ub__shm_reachable(&gone), UB_EUNREACH);
    struct ub__addr bad = {.family = UB_AF_INET};
    assert_int_equal(ub__shm_reachable(&bad), UB_EINVAL);

    /* Now the id is free again; and wake=0 means no fd. */
    snprintf(spec, sizeof(spec), "shm://%u?wake=0", id);
    b = open_spec(spec);
    assert_int_equal(b->local.port, id);
    assert_int_equal(ub__dev_fd(b), -1);
    assert_int_equal(stat(fifo, &st), -1);
    ub__dev_close(b);
}

/* ---- two devices in one process ------------------------------------------------------ */

static void test_one_process(void **state)
{
    (void)state;
    struct ub__dev *c = open_spec("shm://?paths=4&slots=64");
    struct ub__dev *p = open_spec("shm://?paths=4&mtu=8192");
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 256, 9000, 64), 0);

    /* Path, ECN and the sender's address arrive as sent. */
    struct ub__pkt *pk = ub__pkt_alloc(&pool);
    raw_fill(pk, 1, 5, c->local.port);
    pk->path = 3;
    pk->ecn = 1;
    assert_int_equal(ub__dev_send(p, &pk, 1), 1);
    struct ub__pkt *in[8];
    assert_int_equal(ub__dev_recv(c, in, 8, &pool), 1);
    assert_int_equal(raw_check(in[0], 1), 5);
    assert_int_equal(in[0]->path, 3);
    assert_int_equal(in[0]->ecn, 1);
    assert_true(ub__addr_eq(&in[0]->addr, &p->local));
    /* A reply to the source address reaches the sender. */
    assert_int_equal(ub__dev_send(c, in, 1), 1);
    assert_int_equal(ub__dev_recv(p, in, 8, &pool), 1);
    assert_true(ub__addr_eq(&in[0]->addr, &c->local));
    ub__pkt_free(in[0]);

    /* Larger than our MTU: refused, the caller keeps it. Larger than the peer's: dropped. */
    pk = ub__pkt_alloc(&pool);
    ub__pkt_put(pk, 8192 + 1);
    ub__shm_addr(&pk->addr, c->local.port);
    assert_int_equal(ub__dev_send(p, &pk, 1), UB_ELENGTH);
    pk->len = 5000;
    assert_int_equal(ub__dev_send(p, &pk, 1), 1);
    /* Not a shm address, and no such endpoint: accepted and dropped. */
    struct ub__pkt *two[2] = {ub__pkt_alloc(&pool), ub__pkt_alloc(&pool)};
    two[0]->addr.family = UB_AF_INET;
    struct ub__addr nobody;
    ub__shm_addr(&nobody, (uint16_t)(c->local.port ^ 0x5a5a));
    for (int i = 0; i < 100 && ub__shm_reachable(&nobody) == 0; i++)
        nobody.port++; /* another test's endpoint: pick the next id */
    two[1]->addr = nobody;
    assert_int_equal(ub__dev_send(p, two, 2), 2);
    assert_int_equal(ub__shm_tx_space(p, &nobody), UB_EUNREACH);
    struct ub__shm_stats sp = stats_of(p);
    assert_int_equal(sp.tx_too_big, 1);
    assert_int_equal(sp.tx_peer_too_big, 1);
    assert_int_equal(sp.tx_bad_addr, 1);
    assert_int_equal(sp.tx_unreach, 1);
    assert_int_equal(sp.attach, 1); /* c; the reply made c attach to p */
    assert_int_equal(sp.attach_fail, 2);
    assert_int_equal(sp.peers, 1);
    assert_int_equal(stats_of(c).attach, 1);
    assert_int_equal(pool.avail, pool.count);

    /* Ring full: exactly `slots` accepted, the rest refused and counted once each. */
    assert_int_equal(ub__shm_tx_space(p, &c->local), 64);
    uint32_t acc = 0;
    for (uint32_t i = 0; i < 100; i++) {
        struct ub__pkt *q = ub__pkt_alloc(&pool);
        raw_fill(q, 2, i, c->local.port);
        int k = ub__dev_send(p, &q, 1);
        assert_true(k == 0 || k == 1);
        if (k == 0)
            ub__pkt_free(q);
        acc += (uint32_t)k;
    }
    assert_int_equal(acc, 64);
    assert_int_equal(ub__shm_tx_space(p, &c->local), 0);
    sp = stats_of(p);
    assert_int_equal(sp.tx_full, 36);
    uint32_t got = 0;
    for (int it = 0; it < 100; it++) {
        int n = ub__dev_recv(c, in, 8, &pool);
        assert_true(n >= 0);
        if (n == 0)
            break;
        for (int j = 0; j < n; j++) {
            assert_int_equal(raw_check(in[j], 2), got);
            got++;
            ub__pkt_free(in[j]);
        }
    }
    assert_int_equal(got, 64);
    struct ub__shm_stats sc = stats_of(c);
    assert_int_equal(sc.rx_pkts, 64 + 1);
    assert_int_equal(sc.rx_bad_slot, 0);
    /* An empty pool stops recv without losing anything. */
    pk = ub__pkt_alloc(&pool);
    raw_fill(pk, 3, 0, c->local.port);
    assert_int_equal(ub__dev_send(p, &pk, 1), 1);
    struct ub__pktpool tiny;
    assert_int_equal(ub__pktpool_init(&tiny, 1, 9000, 64), 0);
    struct ub__pkt *hold = ub__pkt_alloc(&tiny);
    assert_int_equal(ub__dev_recv(c, in, 8, &tiny), 0);
    assert_int_equal(stats_of(c).rx_pool_empty, 1);
    ub__pkt_free(hold);
    assert_int_equal(ub__dev_recv(c, in, 8, &tiny), 1);
    assert_int_equal(raw_check(in[0], 3), 0);
    ub__pkt_free(in[0]);
    ub__pktpool_fini(&tiny);

    ub__dev_close(p);
    ub__dev_close(c);
    assert_int_equal(pool.avail, pool.count);
    ub__pktpool_fini(&pool);
}

/*
 * A full lane refuses only its peer's packets: in one batch alternating between a full lane
 * (to c) and one with room (to d), d's are taken, c's refused and moved to the batch's end
 * in their order; once c drains, they go, in order.
 */
static void test_full_lane_skipped(void **state)
{
    (void)state;
    struct ub__dev *c = open_spec("shm://?slots=4");
    struct ub__dev *d = open_spec("shm://?slots=64");
    struct ub__dev *p = open_spec("shm://");
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 64, 9000, 64), 0);
    struct ub__pkt *b[12];
    for (uint32_t i = 0; i < 4; i++) { /* c's lane: full */
        b[i] = ub__pkt_alloc(&pool);
        raw_fill(b[i], 1, i, c->local.port);
    }
    assert_int_equal(ub__dev_send(p, b, 4), 4);
    for (uint32_t i = 0; i < 12; i++) { /* c, d, c, d, ...: seq 4.. to c, 0.. to d */
        b[i] = ub__pkt_alloc(&pool);
        raw_fill(b[i], i % 2 ? 2 : 1, i % 2 ? i / 2 : 4 + i / 2,
                 i % 2 ? d->local.port : c->local.port);
    }
    assert_int_equal(ub__dev_send(p, b, 12), 6);
    for (uint32_t i = 6; i < 12; i++) {
        assert_int_equal(b[i]->addr.port, c->local.port);
        assert_int_equal(raw_check(b[i], 1), 4 + (i - 6));
    }
    assert_int_equal(stats_of(p).tx_full, 6);
    struct ub__pkt *in[16];
    assert_int_equal(ub__dev_recv(d, in, 16, &pool), 6);
    for (uint32_t i = 0; i < 6; i++) {
        assert_int_equal(raw_check(in[i], 2), i);
        ub__pkt_free(in[i]);
    }
    assert_int_equal(ub__dev_recv(c, in, 16, &pool), 4);
    for (uint32_t i = 0; i < 4; i++)
        ub__pkt_free(in[i]);
    assert_int_equal(ub__dev_send(p, b + 6, 6), 4); /* room for four */
    assert_int_equal(raw_check(b[10], 1), 8);
    assert_int_equal(ub__dev_recv(c, in, 16, &pool), 4);
    for (uint32_t i = 0; i < 4; i++) {
        assert_int_equal(raw_check(in[i], 1), 4 + i);
        ub__pkt_free(in[i]);
    }
    ub__pkt_free(b[10]);
    ub__pkt_free(b[11]);
    ub__dev_close(p);
    ub__dev_close(d);
    ub__dev_close(c);
    assert_int_equal(pool.avail, pool.count);
    ub__pktpool_fini(&pool);
}

/* Small datagrams of one size that differ in a few words go delta-encoded (dev/shm_delta.h),
 * among others that cannot (too short, or all new), and arrive exactly as sent. */
static void test_delta_lane(void **state)
{
    (void)state;
    struct ub__dev *c = open_spec("shm://?slots=64");
    struct ub__dev *p = open_spec("shm://");
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 64, 2048, 64), 0);
    static const uint32_t lens[3] = {88, 44, 100};
    uint8_t want[3][100];
    memset(want, 0x42, sizeof(want));
    uint32_t rnd = 1;
    for (uint32_t i = 0; i < 300; i++) {
        memcpy(want[0] + 8, &i, 4); /* a sequence number and a flag: two words */
        want[0][80] = (uint8_t)(i & 1);
        for (uint32_t k = 0; k < 100; k++) /* all new: whole */
            want[2][k] = (uint8_t)((rnd = rnd * 1103515245u + 12345u) >> 16);
        memcpy(want[1], &i, 4);
        for (uint32_t t = 0; t < 3; t++) {
            struct ub__pkt *pk = ub__pkt_alloc(&pool);
            memcpy(ub__pkt_put(pk, lens[t]), want[t], lens[t]);
            ub__shm_addr(&pk->addr, c->local.port);
            assert_int_equal(ub__dev_send(p, &pk, 1), 1);
            struct ub__pkt *in;
            assert_int_equal(ub__dev_recv(c, &in, 1, &pool), 1);
            assert_int_equal(in->len, lens[t]);
            assert_memory_equal(in->data, want[t], lens[t]);
            ub__pkt_free(in);
        }
    }
    struct ub__shm_stats sp = stats_of(p), sc = stats_of(c);
    assert_int_equal(sp.tx_delta, 299);
    assert_int_equal(sc.rx_delta, 299);
    assert_int_equal(sc.rx_pkts, 900);
    assert_int_equal(sc.rx_bad_slot, 0);
    ub__dev_close(p);
    ub__dev_close(c);
    assert_int_equal(pool.avail, pool.count);
    ub__pktpool_fini(&pool);
}

/* ---- engines ------------------------------------------------------------------------- */

/* Sends n datagrams of producer prod to dst through an engine, never overrunning the lane. */
static int engine_stream(struct ub__engine *e, struct ub__dev *d, uint32_t prod,
                         const struct ub__addr *dst, uint32_t n)
{
    struct ub__drive_stats ds = {0};
    uint8_t buf[E2E_PAYMAX];
    uint32_t sent = 0;
    uint64_t end = now_ns() + LIMIT_NS;
    for (uint32_t it = 0; it < 100000000 && (sent < n || ub__engine_pending(e)); it++) {
        uint64_t now = now_ns();
        if ((it & 255) == 0 && now > end)
            return 10;
        int space = ub__shm_tx_space(d, dst);
        if (space < 0)
            return 11;
        uint32_t k = UB_MIN((uint32_t)space, n - sent);
        k = k > UB_DRIVE_BATCH ? UB_DRIVE_BATCH : k;
        for (uint32_t i = 0; i < k; i++, sent++) {
            uint32_t len = e2e_len(sent);
            e2e_payload(prod, sent, buf, len);
            if (ub__engine_dgram_send(e, dst, 0, prod, sent, buf, len, now) != 0)
                return 12;
        }
        ub__drive_once(e, d, now, &ds);
        if (k == 0)
            sched_yield();
    }
    return ds.tx_refused == 0 && ds.dev_errors == 0 && sent == n ? 0 : 13;
}

struct prod_arg {
    uint32_t prod, n;
};

/* Child: opens a device, learns the consumer's id, streams, reports its id first. */
static int child_engine_producer(void *arg, int rd, int wr)
{
    const struct prod_arg *a = arg;
    struct ub__dev *d = try_open("shm://");
    struct ub__engine e;
    if (!d || engine_init(&e, 100 + a->prod) != 0)
        return 2;
    uint64_t cid;
    if (!put_u64(wr, d->local.port) || !get_u64(rd, &cid, PIPE_MS))
        return 3;
    struct ub__addr dst;
    ub__shm_addr(&dst, (uint16_t)cid);
    int rc = engine_stream(&e, d, a->prod, &dst, a->n);
    struct ub__shm_stats st = stats_of(d);
    if (rc == 0 && st.tx_pkts != a->n)
        rc = 14;
    ub__dev_close(d);
    ub__engine_fini(&e);
    return rc;
}

static void engines_across(uint32_t nprod, uint32_t per)
{
    struct child ch[MAXPROD];
    struct prod_arg pa[MAXPROD];
    struct rx *x = calloc(1, sizeof(*x));
    assert_non_null(x);
    for (uint32_t i = 0; i < nprod; i++) {
        pa[i] = (struct prod_arg){i, per};
        ch[i] = spawn(child_engine_producer, &pa[i]);
    }
    struct ub__dev *c = open_spec("shm://?slots=1024");
    struct ub__engine e;
    assert_int_equal(engine_init(&e, 1), 0);
    static const struct ub__engine_upcalls up = {.dgram = on_dgram};
    ub__engine_set_upcalls(&e, &up, x);
    for (uint32_t i = 0; i < nprod; i++) {
        uint64_t id;
        assert_true(get_u64(ch[i].from, &id, PIPE_MS));
        x->prod_id[i] = (uint16_t)id;
        assert_true(put_u64(ch[i].to, c->local.port));
    }
    struct ub__drive_stats ds = {0};
    uint64_t t0 = now_ns(), end = t0 + LIMIT_NS;
    uint32_t total = nprod * per;
    for (uint32_t it = 0; it < 100000000 && x->received + x->bad < total; it++) {
        uint64_t now = now_ns();
        if (now > end)
            break;
        if (ub__drive_once(&e, c, now, &ds) == 0)
            wait_fd(ub__dev_fd(c), 10);
    }
    double secs = (double)(now_ns() - t0) / 1e9;
    print_message("  %u producer process(es) -> 1: %u datagrams (%.1f MB) in %.3f s: %.2f M "
                  "datagrams/s, %.0f MB/s\n",
                  nprod, x->received, (double)x->bytes / 1e6, secs, x->received / secs / 1e6,
                  (double)x->bytes / 1e6 / secs);
    for (uint32_t i = 0; i < nprod; i++)
        expect_exit_ok(&ch[i]);
    struct ub__shm_stats st = stats_of(c);
    assert_int_equal(x->bad, 0);
    assert_int_equal(x->out_of_order, 0);
    assert_int_equal(x->received, total);
    for (uint32_t i = 0; i < nprod; i++)
        assert_int_equal(x->next[i], per);
    assert_int_equal(e.stats.rx_malformed, 0);
    assert_int_equal(st.rx_pkts, total);
    assert_int_equal(st.rx_bad_slot, 0);
    ub__dev_close(c);
    ub__engine_fini(&e);
    free(x);
}

/*
 * The first lap of a ring takes no page faults: attach maps the producer's lane and the
 * consumer maps it when the lane is claimed, instead of one fault per page as the ring first
 * goes round (which cost the first few hundred round trips of a ping-pong 10 us each).
 */
/* Whether the kernel knows MADV_POPULATE_READ (Linux 5.14): the prefault needs it. */
static bool have_madv_populate(void)
{
    long page = sysconf(_SC_PAGESIZE);
    void *m = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(m != MAP_FAILED);
    bool ok = madvise(m, (size_t)page, MADV_POPULATE_READ) == 0;
    munmap(m, (size_t)page);
    return ok;
}

static void test_first_lap_no_faults(void **state)
{
    (void)state;
    if (!have_madv_populate()) {
        print_message("kernel without MADV_POPULATE_*: the first lap faults, skipped\n");
        skip();
    }
    struct ub__dev *c = open_spec("shm://?slots=512&mtu=4096");
    struct ub__dev *p = open_spec("shm://");
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 16, 4096, 64), 0);
    struct ub__pkt *in[4];
    /* The first packet attaches; the pool's buffers are touched once here as well. */
    for (uint32_t i = 0; i < 4; i++) {
        struct ub__pkt *q = ub__pkt_alloc(&pool);
        raw_fill(q, 1, i, c->local.port);
        assert_int_equal(ub__dev_send(p, &q, 1), 1);
        assert_int_equal(ub__dev_recv(c, in, 4, &pool), 1);
        ub__pkt_free(in[0]);
    }
    struct rusage r0, r1;
    assert_int_equal(getrusage(RUSAGE_SELF, &r0), 0);
    for (uint32_t i = 4; i < 1024; i++) { /* twice round the ring, one packet at a time */
        struct ub__pkt *q = ub__pkt_alloc(&pool);
        raw_fill(q, 1, i, c->local.port);
        assert_int_equal(ub__dev_send(p, &q, 1), 1);
        assert_int_equal(ub__dev_recv(c, in, 4, &pool), 1);
        assert_int_equal(raw_check(in[0], 1), i);
        ub__pkt_free(in[0]);
    }
    assert_int_equal(getrusage(RUSAGE_SELF, &r1), 0);
    /* 512 slots of 4160 bytes are 520 pages: one fault each without the prefault. (ASan
     * faults in its shadow of them.) */
    if (!UB_TEST_SANITIZED)
        assert_true(r1.ru_minflt - r0.ru_minflt < 16);
    ub__pktpool_fini(&pool);
    ub__dev_close(p);
    ub__dev_close(c);
}

/*
 * A packet with an attached payload (ub__pkt_attach) is gathered: the device copies the
 * payload into the slot behind the headers, so the same bytes arrive, the sender's kept
 * reference still points at the source (it may be sent again from there), and the source
 * changing after the send changes nothing that arrived.
 */
static void test_attached_payload_gathered(void **state)
{
    (void)state;
    struct ub__dev *c = open_spec("shm://?paths=1");
    struct ub__dev *p = open_spec("shm://?paths=1");
    assert_true(ub__dev_gathers(p));
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 16, 9000, 64), 0);
    struct ub__pkt *flat = ub__pkt_alloc(&pool);
    raw_fill(flat, 4, 7, c->local.port);
    uint32_t len = flat->len;
    assert_true(len > 8);
    uint8_t *src = malloc(len);
    assert_non_null(src);
    memcpy(src, flat->data + 8, len - 8);
    struct ub__pkt *pk = ub__pkt_alloc(&pool);
    memcpy(ub__pkt_put(pk, 8), flat->data, 8);
    assert_int_equal(ub__pkt_attach(pk, src, len - 8), 0);
    pk->addr = flat->addr;
    ub__pkt_ref(pk); /* kept, as PDS keeps a packet for retransmission */
    assert_int_equal(ub__dev_send(p, &pk, 1), 1);
    assert_int_equal(pk->xlen, len - 8);
    assert_int_equal(pk->len, 8);
    assert_ptr_equal(pk->xdata, src);
    memset(src, 0, len - 8);
    struct ub__pkt *in[2];
    assert_int_equal(ub__dev_recv(c, in, 2, &pool), 1);
    assert_int_equal(raw_check(in[0], 4), 7);
    assert_memory_equal(in[0]->data, flat->data, len);
    ub__pkt_free(in[0]);
    ub__pkt_free(pk);
    ub__pkt_free(flat);
    free(src);
    assert_int_equal(pool.avail, pool.count);
    ub__dev_close(c);
    ub__dev_close(p);
    ub__pktpool_fini(&pool);
}

static void test_engines_two_processes(void **state)
{
    (void)state;
    engines_across(1, E2E_N);
}

static void test_engines_three_processes(void **state)
{
    (void)state;
    engines_across(2, E2E_N / 2);
}

/* Engines over two devices of one process: the same path without fork. */
static void test_engines_one_process(void **state)
{
    (void)state;
    struct ub__dev *c = open_spec("shm://");
    struct ub__dev *p = open_spec("shm://");
    struct ub__engine ec, ep;
    assert_int_equal(engine_init(&ec, 1), 0);
    assert_int_equal(engine_init(&ep, 2), 0);
    struct rx x = {.prod_id = {p->local.port}};
    static const struct ub__engine_upcalls up = {.dgram = on_dgram};
    ub__engine_set_upcalls(&ec, &up, &x);
    struct ub__drive_stats dc = {0}, dp = {0};
    uint8_t buf[E2E_PAYMAX];
    uint32_t sent = 0, n = 20000;
    uint64_t end = now_ns() + LIMIT_NS;
    for (uint32_t it = 0; it < 1000000 && x.received < n && now_ns() < end; it++) {
        uint64_t now = now_ns();
        uint32_t k = (uint32_t)ub__shm_tx_space(p, &c->local);
        for (uint32_t i = 0; i < UB_MIN(k, 64u) && sent < n; i++, sent++) {
            e2e_payload(0, sent, buf, e2e_len(sent));
            assert_int_equal(
                ub__engine_dgram_send(&ep, &c->local, 0, 0, sent, buf, e2e_len(sent), now), 0);
        }
        ub__drive_once(&ep, p, now, &dp);
        ub__drive_once(&ec, c, now, &dc);
    }
    assert_int_equal(x.received, n);
    assert_int_equal(x.bad + x.out_of_order, 0);
    assert_int_equal(dp.tx_refused, 0);
    ub__dev_close(p);
    ub__dev_close(c);
    ub__engine_fini(&ep);
    ub__engine_fini(&ec);
}

/* ---- latency: ping-pong between two processes ------------------------------------------ */

#define PP_BUSY  20000u
#define PP_SLEEP 2000u
#define PP_STOP  UINT32_MAX

/*
 * Latency modes: 0 busy-polling with wake=0 (no wake-up machinery at all),
 * 1 busy-polling with wake-ups on (every empty receive asks to be woken,
 * so a sender that finds the peer idle pays a FIFO write), 2 both sides
 * sleeping on the fd between packets.
 */
static const char *const pp_spec[] = {"shm://?wake=0", "shm://", "shm://"};
static const char *const pp_name[] = {"busy-polling, wake=0", "busy-polling, wake=1",
                                      "sleeping on the fd"};

/* Child: echoes every packet back to its source until the stop marker. */
static int child_echo(void *arg, int rd, int wr)
{
    uint32_t mode = *(const uint32_t *)arg;
    (void)rd;
    struct ub__dev *d = try_open(pp_spec[mode]);
    struct ub__pktpool pool;
    if (!d || ub__pktpool_init(&pool, 64, 256, 0) != 0)
        return 2;
    if (!put_u64(wr, d->local.port))
        return 3;
    uint64_t end = now_ns() + LIMIT_NS;
    for (uint64_t it = 0; it < 1000000000ull; it++) {
        struct ub__pkt *in[8];
        int n = ub__dev_recv(d, in, 8, &pool);
        if (n < 0)
            return 4;
        if (n == 0) {
            if ((it & 1023) == 0 && now_ns() > end)
                return 5;
            if (mode == 2)
                wait_fd(ub__dev_fd(d), 100);
            else if ((it & 255) == 255)
                sched_yield();
            continue;
        }
        bool stop = false;
        for (int i = 0; i < n; i++) {
            uint32_t seq;
            memcpy(&seq, in[i]->data + 4, 4);
            stop |= seq == PP_STOP;
        }
        if (ub__dev_send(d, in, (uint32_t)n) != n)
            return 6;
        if (stop)
            break;
    }
    ub__dev_close(d);
    ub__pktpool_fini(&pool);
    return 0;
}

#define PP_BUDGET_NS (300 * UB_NS_PER_MS) /* per mode: a loaded machine runs fewer rounds */

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/*
 * Round trips until `rounds` or the time budget; returns how many ran and
 * the one-way latency (half the round trip): median in *med_us (robust to
 * the scheduler stealing a CPU now and then), mean in *mean_us.
 */
static uint32_t pingpong(struct ub__dev *d, struct ub__pktpool *pool, uint16_t peer,
                         uint32_t rounds, bool sleep, double *med_us, double *mean_us)
{
    uint32_t *rtt = calloc(rounds, sizeof(*rtt));
    assert_non_null(rtt);
    uint64_t t0 = now_ns(), end = t0 + LIMIT_NS;
    uint32_t r = 0;
    for (; r < rounds && now_ns() - t0 < PP_BUDGET_NS; r++) {
        uint64_t ts = now_ns();
        struct ub__pkt *p = ub__pkt_alloc(pool);
        raw_fill(p, 0, r, peer);
        assert_int_equal(ub__dev_send(d, &p, 1), 1);
        bool got = false;
        for (uint64_t it = 0; it < 100000000ull && !got; it++) {
            struct ub__pkt *in;
            int n = ub__dev_recv(d, &in, 1, pool);
            assert_true(n >= 0);
            if (n == 1) {
                assert_int_equal(raw_check(in, 0), r);
                ub__pkt_free(in);
                got = true;
            } else if (sleep) {
                wait_fd(ub__dev_fd(d), 100);
            } else if ((it & 255) == 255) {
                sched_yield(); /* spin, then let a descheduled peer run on a busy machine */
            }
            if ((it & 1023) == 1023 && now_ns() > end)
                fail_msg("ping-pong stalled at round %u", r);
        }
        rtt[r] = (uint32_t)UB_MIN(now_ns() - ts, (uint64_t)UINT32_MAX);
    }
    *mean_us = (double)(now_ns() - t0) / r / 2 / 1e3;
    qsort(rtt, r, sizeof(*rtt), cmp_u32);
    *med_us = rtt[r / 2] / 2 / 1e3;
    free(rtt);
    return r;
}

static void test_latency(void **state)
{
    (void)state;
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 64, 256, 0), 0);
    for (uint32_t mode = 0; mode < 3; mode++) {
        struct ub__dev *d = open_spec(pp_spec[mode]);
        struct child ch = spawn(child_echo, &mode);
        uint64_t id;
        assert_true(get_u64(ch.from, &id, PIPE_MS));
        uint32_t rounds = mode == 2 ? PP_SLEEP : PP_BUSY;
        double med, mean;
        /* Warm up: attach, fault the pages in. */
        pingpong(d, &pool, (uint16_t)id, 100, mode == 2, &med, &mean);
        uint32_t ran = pingpong(d, &pool, (uint16_t)id, rounds, mode == 2, &med, &mean);
        struct ub__pkt *p = ub__pkt_alloc(&pool);
        raw_fill(p, 0, PP_STOP, (uint16_t)id);
        p->len = 8; /* the stop marker carries no pattern */
        assert_int_equal(ub__dev_send(d, &p, 1), 1);
        expect_exit_ok(&ch);
        /* The child echoed the stop before it exited. */
        struct ub__pkt *in[8];
        assert_int_equal(ub__dev_recv(d, in, 8, &pool), 1);
        ub__pkt_free(in[0]);
        struct ub__shm_stats st = stats_of(d);
        print_message("  one-way latency, %s: median %.2f us, mean %.2f us (%u round trips of "
                      "8..127 bytes; wake-ups %" PRIu64 " sent, %" PRIu64 " avoided)\n",
                      pp_name[mode], med, mean, ran, st.wake_sent, st.wake_avoided);
        ub__dev_close(d);
    }
    ub__pktpool_fini(&pool);
}

/* ---- multi-producer stress -------------------------------------------------------------- */

struct stress_arg {
    uint32_t prod, n;
    bool lossy; /* send one at a time, drop what is refused, report counts */
};

static int child_raw_producer(void *arg, int rd, int wr)
{
    const struct stress_arg *a = arg;
    struct ub__dev *d = try_open("shm://");
    struct ub__pktpool pool;
    if (!d || ub__pktpool_init(&pool, 128, 256, 0) != 0)
        return 2;
    uint64_t cid;
    if (!put_u64(wr, d->local.port) || !get_u64(rd, &cid, PIPE_MS))
        return 3;
    uint64_t accepted = 0;
    if (!a->lossy) {
        accepted = raw_stream(d, &pool, a->prod, (uint16_t)cid, 0, a->n, LIMIT_NS);
    } else {
        for (uint32_t i = 0; i < a->n; i++) {
            struct ub__pkt *p = ub__pkt_alloc(&pool);
            raw_fill(p, a->prod, (uint32_t)accepted, (uint16_t)cid);
            int k = ub__dev_send(d, &p, 1);
            if (k == 1)
                accepted++;
            else
                ub__pkt_free(p);
        }
    }
    struct ub__shm_stats st = stats_of(d);
    if (!put_u64(wr, accepted) || !put_u64(wr, st.tx_full) || !put_u64(wr, st.tx_pkts))
        return 4;
    uint64_t go;
    if (!get_u64(rd, &go, PIPE_MS)) /* keep the lane until the consumer is done */
        return 5;
    ub__dev_close(d);
    ub__pktpool_fini(&pool);
    return 0;
}

static void stress(bool lossy, uint32_t n, const char *spec)
{
    struct child ch[MAXPROD];
    struct stress_arg sa[MAXPROD];
    uint16_t ids[MAXPROD];
    for (uint32_t i = 0; i < MAXPROD; i++) {
        sa[i] = (struct stress_arg){i, n, lossy};
        ch[i] = spawn(child_raw_producer, &sa[i]);
    }
    struct ub__dev *c = open_spec(spec);
    struct ub__shm_stats sc = stats_of(c);
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 256, 256, 0), 0);
    for (uint32_t i = 0; i < MAXPROD; i++) {
        uint64_t id;
        assert_true(get_u64(ch[i].from, &id, PIPE_MS));
        ids[i] = (uint16_t)id;
        assert_true(put_u64(ch[i].to, c->local.port));
    }
    uint64_t acc[MAXPROD] = {0}, full[MAXPROD] = {0}, txp[MAXPROD] = {0};
    if (lossy) /* nothing is drained until every producer has filled its lane and more */
        for (uint32_t i = 0; i < MAXPROD; i++)
            assert_true(get_u64(ch[i].from, &acc[i], PIPE_MS) &&
                        get_u64(ch[i].from, &full[i], PIPE_MS) &&
                        get_u64(ch[i].from, &txp[i], PIPE_MS));
    uint32_t next[MAXPROD] = {0}, got = 0, bad = 0,
             expect = lossy ? MAXPROD * sc.slots : MAXPROD * n;
    uint64_t t0 = now_ns(), end = t0 + LIMIT_NS;
    for (uint32_t it = 0; it < 100000000 && got + bad < expect && now_ns() < end; it++) {
        struct ub__pkt *in[64];
        int k = ub__dev_recv(c, in, 64, &pool);
        assert_true(k >= 0);
        if (k == 0)
            wait_fd(ub__dev_fd(c), 10);
        for (int j = 0; j < k; j++) {
            uint32_t pi = 0;
            while (pi < MAXPROD && in[j]->addr.port != ids[pi])
                pi++;
            if (pi == MAXPROD || raw_check(in[j], pi) != next[pi])
                bad++;
            else
                next[pi]++, got++;
            ub__pkt_free(in[j]);
        }
    }
    double secs = (double)(now_ns() - t0) / 1e9;
    if (!lossy) {
        print_message("  %u producers -> 1 (raw device, 8..127 bytes): %u packets in %.3f s, "
                      "%.2f M packets/s\n",
                      MAXPROD, got, secs, got / secs / 1e6);
        for (uint32_t i = 0; i < MAXPROD; i++)
            assert_true(get_u64(ch[i].from, &acc[i], PIPE_MS) &&
                        get_u64(ch[i].from, &full[i], PIPE_MS) &&
                        get_u64(ch[i].from, &txp[i], PIPE_MS));
    }
    for (uint32_t i = 0; i < MAXPROD; i++) {
        assert_true(put_u64(ch[i].to, 1));
        expect_exit_ok(&ch[i]);
    }
    assert_int_equal(bad, 0);
    assert_int_equal(got, expect);
    for (uint32_t i = 0; i < MAXPROD; i++) {
        assert_int_equal(txp[i], acc[i]);
        if (lossy) {
            /* Exactly a lane's worth accepted, every other packet refused and counted. */
            assert_int_equal(acc[i], sc.slots);
            assert_int_equal(full[i], n - sc.slots);
            assert_int_equal(next[i], sc.slots);
        } else {
            assert_int_equal(acc[i], n);
            assert_int_equal(next[i], n);
        }
    }
    /* One more receive: nothing left, nothing damaged. */
    struct ub__pkt *in[8];
    assert_int_equal(ub__dev_recv(c, in, 8, &pool), 0);
    sc = stats_of(c);
    assert_int_equal(sc.rx_pkts, expect);
    assert_int_equal(sc.rx_bad_slot, 0);
    ub__dev_close(c);
    ub__pktpool_fini(&pool);
}

static void test_stress_lossless(void **state)
{
    (void)state;
    stress(false, 50000, "shm://?slots=256&lanes=4");
}

static void test_stress_ring_full(void **state)
{
    (void)state;
    stress(true, 1000, "shm://?slots=256&lanes=4");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_open_close),
        cmocka_unit_test(test_one_process),
        cmocka_unit_test(test_delta_lane),
        cmocka_unit_test(test_attached_payload_gathered),
        cmocka_unit_test(test_first_lap_no_faults),
        cmocka_unit_test(test_engines_one_process),
        cmocka_unit_test(test_engines_two_processes),
        cmocka_unit_test(test_engines_three_processes),
        cmocka_unit_test(test_latency),
        cmocka_unit_test(test_stress_lossless),
        cmocka_unit_test(test_stress_ring_full),
        cmocka_unit_test(test_full_lane_skipped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
