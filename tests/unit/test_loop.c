/*
 * Loop fabric: ordered delivery under manual time, metadata, buffer
 * ownership (shared buffers copied, corruption on clones), MTU, unknown
 * ports, overflow, scripted and seeded impairment end to end, no leaks.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <softub/errors.h>
#include "core/clock.h"
#include "dev/loop.h"

#define POOL_N 4096
#define LEN    100

struct fx {
    struct ub__pktpool pool;
    struct ub__loopnet *net;
    struct ub__dev *dev[4];
};

static void fx_init(struct fx *f, const struct ub__loopnet_cfg *cfg, uint32_t nopen)
{
    memset(f, 0, sizeof(*f));
    assert_int_equal(ub__pktpool_init(&f->pool, POOL_N, 2048, 64), 0);
    assert_int_equal(ub__loopnet_create(cfg, &f->net), 0);
    for (uint16_t i = 0; i < nopen; i++)
        assert_int_equal(ub__loop_open(f->net, i, &f->dev[i]), 0);
}

static void fx_fini(struct fx *f)
{
    ub__loopnet_destroy(f->net);
    assert_int_equal(f->pool.avail, f->pool.count);
    ub__pktpool_fini(&f->pool);
}

/* A packet to loop:dst whose first 4 bytes are seq, the rest a pattern. */
static struct ub__pkt *mk(struct fx *f, uint16_t dst, uint32_t seq, uint32_t len)
{
    struct ub__pkt *p = ub__pkt_alloc(&f->pool);
    assert_non_null(p);
    uint8_t *d = ub__pkt_put(p, len);
    assert_non_null(d);
    for (uint32_t i = 0; i < len; i++)
        d[i] = (uint8_t)(seq * 7 + i);
    if (len >= 4)
        memcpy(d, &seq, 4);
    ub__addr_loop(&p->addr, dst);
    return p;
}

static uint32_t seq_of(const struct ub__pkt *p)
{
    uint32_t s;
    memcpy(&s, p->data, 4);
    return s;
}

/* Sends one packet, which must be accepted. */
static void send1(struct fx *f, uint16_t src, struct ub__pkt *p)
{
    assert_int_equal(ub__dev_send(f->dev[src], &p, 1), 1);
}

/* Receives everything due now; records seqs; frees the packets. */
static uint32_t drain(struct fx *f, uint16_t port, uint32_t *seqs, uint32_t max)
{
    struct ub__pkt *b[16];
    uint32_t n = 0;
    int r;
    while ((r = ub__dev_recv(f->dev[port], b, 16, &f->pool)) > 0) {
        for (int i = 0; i < r; i++) {
            assert_true(n < max);
            seqs[n++] = seq_of(b[i]);
            ub__pkt_free(b[i]);
        }
    }
    assert_int_equal(r, 0);
    return n;
}

/* Jumps time from deadline to deadline until nothing is pending; collects arrivals. */
static uint32_t drain_all(struct fx *f, uint16_t port, uint32_t *seqs, uint32_t max)
{
    uint32_t n = drain(f, port, seqs, max);
    uint64_t t;
    while ((t = ub__loopnet_next_deadline(f->net)) != UB_TIME_NEVER) {
        ub__loopnet_set_time(f->net, t);
        n += drain(f, port, seqs + n, max - n);
    }
    return n;
}

static void test_in_order_metadata(void **state)
{
    (void)state;
    struct fx f;
    struct ub__loopnet_cfg cfg = {.ports = 2, .num_paths = 4, .latency_ns = 10000};
    fx_init(&f, &cfg, 2);
    assert_int_equal(ub__dev_fd(f.dev[0]), -1);
    assert_int_equal(ub__dev_mtu(f.dev[0]), UB_LOOP_DEFAULT_MTU);
    assert_int_equal(ub__dev_num_paths(f.dev[1]), 4);
    assert_string_equal(f.dev[0]->ops->name, "loop");
    assert_int_equal(f.dev[1]->local.family, UB_AF_LOOP);
    assert_int_equal(f.dev[1]->local.port, 1);
    assert_int_equal(ub__loopnet_next_deadline(f.net), UB_TIME_NEVER);

    ub__loopnet_set_time(f.net, 1000);
    struct ub__pkt *b[100];
    for (uint32_t i = 0; i < 100; i++) {
        b[i] = mk(&f, 1, i, LEN);
        b[i]->path = (uint16_t)(i % 7); /* beyond 4 paths: taken modulo */
        b[i]->ecn = (uint8_t)(i % 4);
        b[i]->flags = (uint8_t)(i % 4); /* a sender's owner bits */
    }
    assert_int_equal(ub__dev_send(f.dev[0], b, 60), 60);
    assert_int_equal(ub__dev_send(f.dev[0], b + 60, 40), 40);
    assert_int_equal(ub__loopnet_next_deadline(f.net), 11000);

    struct ub__pkt *r[128];
    ub__loopnet_set_time(f.net, 10999);
    assert_int_equal(ub__dev_recv(f.dev[1], r, 128, &f.pool), 0);
    ub__loopnet_set_time(f.net, 5); /* never backwards */
    assert_int_equal(ub__loopnet_now(f.net), 10999);
    ub__loopnet_set_time(f.net, 11000);
    assert_int_equal(ub__dev_recv(f.dev[1], r, 30, &f.pool), 30);
    assert_int_equal(ub__dev_recv(f.dev[1], r + 30, 128, &f.pool), 70);
    for (uint32_t i = 0; i < 100; i++) {
        assert_ptr_equal(r[i], b[i]); /* sole owner: the buffer itself travelled */
        assert_int_equal(seq_of(r[i]), i);
        assert_int_equal(r[i]->len, LEN);
        assert_int_equal(r[i]->addr.family, UB_AF_LOOP);
        assert_int_equal(r[i]->addr.port, 0);
        assert_int_equal(r[i]->path, (i % 7) % 4);
        assert_int_equal(r[i]->ecn, i % 4);
        assert_int_equal(r[i]->ts, 11000);
        assert_int_equal(r[i]->flags, 0);
        ub__pkt_free(r[i]);
    }
    assert_int_equal(ub__loopnet_next_deadline(f.net), UB_TIME_NEVER);

    struct ub__loop_dir_stats ds;
    struct ub__loop_port_stats ps;
    assert_int_equal(ub__loopnet_dir_stats(f.net, 0, 1, &ds), 0);
    assert_int_equal(ds.sent, 100);
    assert_int_equal(ds.delivered, 100);
    assert_int_equal(ds.sent_bytes, 100 * LEN);
    assert_int_equal(ds.queued, 0);
    assert_int_equal(ds.impair.offered, 0);
    assert_int_equal(ub__loopnet_port_stats(f.net, 0, &ps), 0);
    assert_int_equal(ps.tx_pkts, 100);
    assert_int_equal(ub__loopnet_port_stats(f.net, 1, &ps), 0);
    assert_int_equal(ps.rx_pkts, 100);
    assert_int_equal(ps.rx_copied, 0);
    assert_int_equal(ub__loopnet_dir_stats(f.net, 0, 2, &ds), UB_ERANGE);
    assert_int_equal(ub__loopnet_port_stats(f.net, 2, &ps), UB_ERANGE);
    fx_fini(&f);
}

static void test_open_close_errors(void **state)
{
    (void)state;
    struct fx f;
    struct ub__loopnet_cfg cfg = {.ports = 3};
    struct ub__dev *d;
    fx_init(&f, &cfg, 2);
    assert_int_equal(ub__loop_open(f.net, 0, &d), UB_EEXIST);
    assert_int_equal(ub__loop_open(f.net, 3, &d), UB_ERANGE);
    assert_null(d);
    struct ub__loopnet *bad;
    struct ub__loopnet_cfg big = {.ports = UB_LOOP_MAX_PORTS + 1};
    assert_int_equal(ub__loopnet_create(&big, &bad), UB_ERANGE);
    assert_null(bad);
    struct ub__impair_cfg ic;
    memset(&ic, 0, sizeof(ic));
    ic.drop_ppm = 2000000;
    assert_int_equal(ub__loopnet_impair(f.net, 0, 1, &ic), UB_ERANGE);
    assert_int_equal(ub__loopnet_impair(f.net, 0, 3, NULL), UB_ERANGE);

    /* Closing frees what is queued for the port; reopening starts empty. */
    for (uint32_t i = 0; i < 10; i++)
        send1(&f, 0, mk(&f, 1, i, LEN));
    assert_int_equal(f.pool.avail, POOL_N - 10);
    ub__dev_close(f.dev[1]);
    assert_int_equal(f.pool.avail, POOL_N);
    struct ub__loop_dir_stats ds;
    ub__loopnet_dir_stats(f.net, 0, 1, &ds);
    assert_int_equal(ds.flushed, 10);
    assert_int_equal(ds.queued, 0);
    send1(&f, 0, mk(&f, 1, 0, LEN)); /* closed port: accepted, dropped */
    struct ub__loop_port_stats ps;
    ub__loopnet_port_stats(f.net, 0, &ps);
    assert_int_equal(ps.tx_no_port, 1);
    assert_int_equal(ub__loop_open(f.net, 1, &f.dev[1]), 0);
    assert_int_equal(ub__loopnet_next_deadline(f.net), UB_TIME_NEVER);
    send1(&f, 0, mk(&f, 1, 5, LEN));
    uint32_t s[4];
    assert_int_equal(drain(&f, 1, s, 4), 1);
    assert_int_equal(s[0], 5);
    fx_fini(&f);
}

static void test_shared_buffer_copied(void **state)
{
    (void)state;
    struct fx f;
    struct ub__loopnet_cfg cfg = {.ports = 2};
    fx_init(&f, &cfg, 2);
    struct ub__pkt *p = mk(&f, 1, 77, LEN);
    p->flags = 0x03; /* the sender's owner bits */
    ub__pkt_ref(p);  /* the sender keeps it for retransmission */
    send1(&f, 0, p);
    struct ub__pkt *r;
    assert_int_equal(ub__dev_recv(f.dev[1], &r, 1, &f.pool), 1);
    assert_ptr_not_equal(r, p);
    assert_int_equal(r->flags, 0);
    assert_int_equal(p->flags, 0x03);
    assert_int_equal(r->len, p->len);
    assert_memory_equal(r->data, p->data, LEN);
    assert_int_equal(r->addr.port, 0);
    /* The receiver consumes its copy in place; the sender's is untouched. */
    r->data[0] ^= 0xff;
    ub__pkt_pull(r, 10);
    assert_int_equal(seq_of(p), 77);
    assert_int_equal(p->len, LEN);
    assert_int_equal(p->addr.port, 1);
    assert_int_equal(p->refcnt, 1);
    ub__pkt_free(r);
    struct ub__loop_port_stats ps;
    ub__loopnet_port_stats(f.net, 1, &ps);
    assert_int_equal(ps.rx_copied, 1);

    /* Copy into a caller pool that is empty: the packet waits. */
    struct ub__pktpool small;
    assert_int_equal(ub__pktpool_init(&small, 1, 2048, 64), 0);
    struct ub__pkt *hog = ub__pkt_alloc(&small);
    send1(&f, 0, p); /* second transmission of the retained packet */
    ub__pkt_ref(p);
    assert_int_equal(ub__dev_recv(f.dev[1], &r, 1, &small), UB_ENOBUFS);
    ub__loopnet_port_stats(f.net, 1, &ps);
    assert_int_equal(ps.rx_nobufs, 1);
    ub__pkt_free(hog);
    assert_int_equal(ub__dev_recv(f.dev[1], &r, 1, &small), 1);
    assert_ptr_equal(r->pool, &small);
    assert_int_equal(seq_of(r), 77);
    ub__pkt_free(r);
    ub__pkt_free(p);
    assert_int_equal(small.avail, 1);
    ub__pktpool_fini(&small);
    fx_fini(&f);
}

static void test_mtu(void **state)
{
    (void)state;
    struct fx f;
    struct ub__loopnet_cfg cfg = {.ports = 2, .mtu = 1000};
    fx_init(&f, &cfg, 2);
    struct ub__pkt *b[3] = {mk(&f, 1, 0, 1000), mk(&f, 1, 1, 1001), mk(&f, 1, 2, 10)};
    assert_int_equal(ub__dev_send(f.dev[0], b, 3), 1);
    assert_int_equal(ub__dev_send(f.dev[0], b + 1, 2), UB_ELENGTH);
    send1(&f, 0, b[2]);
    ub__pkt_free(b[1]); /* refused: still the caller's */
    struct ub__loop_port_stats ps;
    ub__loopnet_port_stats(f.net, 0, &ps);
    assert_int_equal(ps.tx_too_big, 2);
    assert_int_equal(ps.tx_pkts, 2);
    uint32_t s[4];
    assert_int_equal(drain(&f, 1, s, 4), 2);
    assert_int_equal(s[0], 0);
    assert_int_equal(s[1], 2);
    fx_fini(&f);
}

static void test_unknown_port(void **state)
{
    (void)state;
    struct fx f;
    struct ub__loopnet_cfg cfg = {.ports = 4};
    fx_init(&f, &cfg, 2);
    struct ub__pkt *b[4] = {mk(&f, 3, 0, LEN), mk(&f, 99, 1, LEN), mk(&f, 1, 2, LEN),
                            mk(&f, 1, 3, LEN)};
    b[3]->addr.family = UB_AF_INET;
    assert_int_equal(ub__dev_send(f.dev[0], b, 4), 4);
    struct ub__loop_port_stats ps;
    ub__loopnet_port_stats(f.net, 0, &ps);
    assert_int_equal(ps.tx_no_port, 3);
    assert_int_equal(ps.tx_pkts, 4);
    assert_int_equal(f.pool.avail, POOL_N - 1);
    uint32_t s[4];
    assert_int_equal(drain(&f, 1, s, 4), 1);
    assert_int_equal(s[0], 2);
    fx_fini(&f);
}

static void test_overflow(void **state)
{
    (void)state;
    struct fx f;
    struct ub__loopnet_cfg cfg = {.ports = 3, .queue_cap = 8, .latency_ns = 100};
    fx_init(&f, &cfg, 3);
    struct ub__pkt *b[20];
    for (uint32_t i = 0; i < 20; i++)
        b[i] = mk(&f, 2, i, LEN);
    assert_int_equal(ub__dev_send(f.dev[0], b, 20), 20); /* a full queue drops, not refuses */
    /* The capacity is per direction: another sender still gets in. */
    for (uint32_t i = 0; i < 8; i++)
        send1(&f, 1, mk(&f, 2, 100 + i, LEN));
    struct ub__loop_dir_stats ds;
    ub__loopnet_dir_stats(f.net, 0, 2, &ds);
    assert_int_equal(ds.overflow, 12);
    assert_int_equal(ds.queued, 8);
    struct ub__loop_port_stats ps;
    ub__loopnet_port_stats(f.net, 2, &ps);
    assert_int_equal(ps.rx_overflow, 12);
    uint32_t s[32];
    assert_int_equal(drain_all(&f, 2, s, 32), 16);
    for (uint32_t i = 0; i < 8; i++) {
        assert_int_equal(s[i], i); /* same time: enqueue order */
        assert_int_equal(s[8 + i], 100 + i);
    }
    fx_fini(&f);
}

static void test_merge_and_latency(void **state)
{
    (void)state;
    struct fx f;
    struct ub__loopnet_cfg cfg = {.ports = 3, .latency_ns = 1000};
    fx_init(&f, &cfg, 3);
    struct ub__impair_cfg ic;
    memset(&ic, 0, sizeof(ic));
    ic.delay_ns = 500; /* 1 -> 2 is slower */
    assert_int_equal(ub__loopnet_impair(f.net, 1, 2, &ic), 0);
    /* t=0: A0 (0->2, due 1000), B0 (1->2, due 1500); t=400: A1 (1400); t=500: B1 (2000), A2 (1500).
     */
    send1(&f, 0, mk(&f, 2, 0xA0, LEN));
    send1(&f, 1, mk(&f, 2, 0xB0, LEN));
    ub__loopnet_set_time(f.net, 400);
    send1(&f, 0, mk(&f, 2, 0xA1, LEN));
    ub__loopnet_set_time(f.net, 500);
    send1(&f, 1, mk(&f, 2, 0xB1, LEN));
    send1(&f, 0, mk(&f, 2, 0xA2, LEN));
    static const uint32_t want[] = {0xA0, 0xA1, 0xB0, 0xA2, 0xB1};
    static const uint64_t when[] = {1000, 1400, 1500, 1500, 2000};
    for (uint32_t i = 0; i < 5; i++) {
        uint64_t t = ub__loopnet_next_deadline(f.net);
        assert_int_equal(t, when[i]);
        ub__loopnet_set_time(f.net, t);
        struct ub__pkt *r;
        assert_int_equal(ub__dev_recv(f.dev[2], &r, 1, &f.pool), 1);
        assert_int_equal(seq_of(r), want[i]);
        assert_int_equal(r->ts, when[i]);
        assert_int_equal(r->addr.port, (want[i] >> 4) == 0xA ? 0 : 1);
        ub__pkt_free(r);
    }
    fx_fini(&f);
}

static void test_scripted_drops(void **state)
{
    (void)state;
    struct fx f;
    struct ub__loopnet_cfg cfg = {.ports = 2, .latency_ns = 10};
    fx_init(&f, &cfg, 2);
    struct ub__impair_cfg ic;
    memset(&ic, 0, sizeof(ic));
    static const uint64_t list[] = {1, 3};
    assert_int_equal(ub__impair_add_drop_list(&ic, list, 2), 0);
    assert_int_equal(ub__impair_add(&ic, UB_IMPAIR_DROP_EVERY, 10, 0, 0), 0);
    assert_int_equal(ub__impair_add(&ic, UB_IMPAIR_DROP_CYCLE, 2, 3, 20), 0);
    assert_int_equal(ub__loopnet_impair(f.net, 0, 1, &ic), 0);
    for (uint32_t i = 0; i < 40; i++)
        send1(&f, 0, mk(&f, 1, i, LEN));
    uint32_t s[64], n = drain_all(&f, 1, s, 64), k = 0;
    for (uint32_t i = 0; i < 40; i++) {
        bool drop = i == 1 || i == 3 || i % 10 == 9 || (i >= 20 && (i - 20) % 5 < 2);
        if (!drop)
            assert_int_equal(s[k++], i);
    }
    assert_int_equal(n, k);
    struct ub__loop_dir_stats ds;
    ub__loopnet_dir_stats(f.net, 0, 1, &ds);
    assert_int_equal(ds.impair.offered, 40);
    assert_int_equal(ds.impair.dropped, 40 - n);
    /* The reverse direction is not impaired. */
    for (uint32_t i = 0; i < 40; i++)
        send1(&f, 1, mk(&f, 0, i, LEN));
    assert_int_equal(drain_all(&f, 0, s, 64), 40);
    fx_fini(&f);
}

static void test_blackhole_midflow(void **state)
{
    (void)state;
    struct fx f;
    struct ub__loopnet_cfg cfg = {.ports = 2, .latency_ns = 1000};
    fx_init(&f, &cfg, 2);
    uint32_t s[64];
    for (uint32_t i = 0; i < 10; i++)
        send1(&f, 0, mk(&f, 1, i, LEN));
    /* Black hole from now on: packets already in flight still arrive. */
    struct ub__impair_cfg ic;
    memset(&ic, 0, sizeof(ic));
    assert_int_equal(ub__impair_add(&ic, UB_IMPAIR_BLACKHOLE_PKT, 0, 0, 0), 0);
    assert_int_equal(ub__loopnet_impair(f.net, 0, 1, &ic), 0);
    for (uint32_t i = 10; i < 20; i++)
        send1(&f, 0, mk(&f, 1, i, LEN));
    assert_int_equal(drain_all(&f, 1, s, 64), 10);
    assert_int_equal(s[9], 9);
    /* Lifted: traffic flows again. */
    assert_int_equal(ub__loopnet_impair(f.net, 0, 1, NULL), 0);
    send1(&f, 0, mk(&f, 1, 20, LEN));
    assert_int_equal(drain_all(&f, 1, s, 64), 1);
    assert_int_equal(s[0], 20);

    /* Black hole from a time. */
    memset(&ic, 0, sizeof(ic));
    uint64_t t0 = ub__loopnet_now(f.net);
    assert_int_equal(ub__impair_add(&ic, UB_IMPAIR_BLACKHOLE_TIME, t0 + 5000, 0, 0), 0);
    assert_int_equal(ub__loopnet_impair(f.net, 0, 1, &ic), 0);
    for (uint32_t i = 0; i < 10; i++) {
        ub__loopnet_set_time(f.net, t0 + i * 1000);
        send1(&f, 0, mk(&f, 1, i, LEN));
    }
    assert_int_equal(drain_all(&f, 1, s, 64), 5);
    assert_int_equal(s[4], 4);
    struct ub__loop_dir_stats ds;
    ub__loopnet_dir_stats(f.net, 0, 1, &ds);
    assert_int_equal(ds.impair.dropped_blackhole, 15);
    assert_int_equal(ds.impair.offered, 20); /* counters accumulate across rule changes */
    fx_fini(&f);
}

struct arrivals {
    uint64_t sent_at[200];
    uint32_t got, reordered, last;
};

/* Jumps from deadline to deadline up to limit; each packet must arrive exactly then. */
static void take_due(struct fx *f, struct arrivals *a, uint64_t limit)
{
    uint64_t t;
    while ((t = ub__loopnet_next_deadline(f->net)) <= limit) {
        struct ub__pkt *r;
        assert_true(t >= ub__loopnet_now(f->net));
        ub__loopnet_set_time(f->net, t);
        while (ub__dev_recv(f->dev[1], &r, 1, &f->pool) == 1) {
            uint32_t i = seq_of(r);
            assert_int_equal(r->ts, t);
            assert_in_range(r->ts, a->sent_at[i] + 1300, a->sent_at[i] + 2000);
            if (a->got && i < a->last)
                a->reordered++;
            a->last = i;
            a->got++;
            ub__pkt_free(r);
        }
    }
}

/* Checks that each packet arrives exactly on time: not at t-1, at t. */
static void test_delay_jitter_exact(void **state)
{
    (void)state;
    struct fx f;
    struct ub__loopnet_cfg cfg = {.ports = 2, .latency_ns = 1000, .seed = 11};
    fx_init(&f, &cfg, 2);
    struct ub__impair_cfg ic;
    memset(&ic, 0, sizeof(ic));
    ic.delay_ns = 200;
    assert_int_equal(ub__impair_add(&ic, UB_IMPAIR_DELAY_NTH, 3, 5000, 0), 0);
    assert_int_equal(ub__loopnet_impair(f.net, 0, 1, &ic), 0);
    /* Scripted: packet i sent at 100 i, due at 100 i + 1200 (+5000 for #3). */
    for (uint32_t i = 0; i < 6; i++) {
        ub__loopnet_set_time(f.net, 100 * i);
        send1(&f, 0, mk(&f, 1, i, LEN));
    }
    static const uint32_t order[] = {0, 1, 2, 4, 5, 3};
    for (uint32_t k = 0; k < 6; k++) {
        uint32_t i = order[k];
        uint64_t due = 100 * i + 1200 + (i == 3 ? 5000 : 0);
        assert_int_equal(ub__loopnet_next_deadline(f.net), due);
        struct ub__pkt *r;
        ub__loopnet_set_time(f.net, due - 1);
        assert_int_equal(ub__dev_recv(f.dev[1], &r, 1, &f.pool), 0);
        ub__loopnet_set_time(f.net, due);
        assert_int_equal(ub__dev_recv(f.dev[1], &r, 1, &f.pool), 1);
        assert_int_equal(seq_of(r), i);
        assert_int_equal(r->ts, due);
        ub__pkt_free(r);
    }

    /* fifo: the late packet holds back the ones behind it instead of being overtaken. */
    ic.fifo = true;
    assert_int_equal(ub__loopnet_impair(f.net, 0, 1, &ic), 0);
    uint64_t t0 = ub__loopnet_now(f.net);
    for (uint32_t i = 0; i < 6; i++) {
        ub__loopnet_set_time(f.net, t0 + 100 * i);
        send1(&f, 0, mk(&f, 1, i, LEN));
    }
    uint32_t s[8];
    assert_int_equal(drain_all(&f, 1, s, 8), 6);
    for (uint32_t i = 0; i < 6; i++)
        assert_int_equal(s[i], i);

    /* Jitter: every arrival inside its window, exactly when next_deadline said. */
    memset(&ic, 0, sizeof(ic));
    ic.seed = 5;
    ic.delay_ns = 300;
    ic.jitter_ns = 700;
    assert_int_equal(ub__loopnet_impair(f.net, 0, 1, &ic), 0);
    t0 = ub__loopnet_now(f.net) + 10000;
    struct arrivals a = {.sent_at = {0}};
    for (uint32_t i = 0; i < 200; i++) {
        a.sent_at[i] = t0 + 50 * i;
        take_due(&f, &a, a.sent_at[i]);
        ub__loopnet_set_time(f.net, a.sent_at[i]);
        send1(&f, 0, mk(&f, 1, i, LEN));
    }
    take_due(&f, &a, UB_TIME_NEVER - 1);
    uint32_t got = a.got, reordered = a.reordered;
    assert_int_equal(got, 200);
    assert_true(reordered > 0); /* jitter wider than the gap reorders, as with netem */
    struct ub__loop_dir_stats ds;
    ub__loopnet_dir_stats(f.net, 0, 1, &ds);
    assert_int_equal(ds.impair.delayed, 6 + 6 + 200);
    fx_fini(&f);
}

/* Exact orders for scripted reordering, including holds released by other holds. */
static void test_reorder_scripted(void **state)
{
    (void)state;
    struct fx f;
    struct ub__loopnet_cfg cfg = {.ports = 2, .latency_ns = 100};
    fx_init(&f, &cfg, 2);
    struct ub__impair_cfg ic;
    uint32_t s[32];

    memset(&ic, 0, sizeof(ic));
    assert_int_equal(ub__impair_add(&ic, UB_IMPAIR_REORDER_NTH, 2, 3, 0), 0);
    assert_int_equal(ub__loopnet_impair(f.net, 0, 1, &ic), 0);
    for (uint32_t i = 0; i < 8; i++)
        send1(&f, 0, mk(&f, 1, i, LEN));
    static const uint32_t w1[] = {0, 1, 3, 4, 5, 2, 6, 7};
    assert_int_equal(drain_all(&f, 1, s, 32), 8);
    assert_memory_equal(s, w1, sizeof(w1));

    /* 2 waits for 2 overtakers, 3 for 1: packet 4 releases 3, and 3 then releases 2. */
    memset(&ic, 0, sizeof(ic));
    assert_int_equal(ub__impair_add(&ic, UB_IMPAIR_REORDER_NTH, 2, 2, 0), 0);
    assert_int_equal(ub__impair_add(&ic, UB_IMPAIR_REORDER_NTH, 3, 1, 0), 0);
    assert_int_equal(ub__loopnet_impair(f.net, 0, 1, &ic), 0);
    for (uint32_t i = 0; i < 6; i++)
        send1(&f, 0, mk(&f, 1, i, LEN));
    static const uint32_t w2[] = {0, 1, 4, 3, 2, 5};
    assert_int_equal(drain_all(&f, 1, s, 32), 6);
    assert_memory_equal(s, w2, sizeof(w2));

    /* A released hold overtakes the older holds still waiting. */
    memset(&ic, 0, sizeof(ic));
    assert_int_equal(ub__impair_add(&ic, UB_IMPAIR_REORDER_NTH, 1, 2, 0), 0);
    assert_int_equal(ub__impair_add(&ic, UB_IMPAIR_REORDER_NTH, 2, 1, 0), 0);
    assert_int_equal(ub__loopnet_impair(f.net, 0, 1, &ic), 0);
    for (uint32_t i = 0; i < 5; i++)
        send1(&f, 0, mk(&f, 1, i, LEN));
    /* 1 (left 2), 2 (left 1); 3 enters: 1 -> 1, 2 -> 0: 2 goes, overtaking 1 -> 0: 1 goes. */
    static const uint32_t w3[] = {0, 3, 2, 1, 4};
    assert_int_equal(drain_all(&f, 1, s, 32), 5);
    assert_memory_equal(s, w3, sizeof(w3));

    /* Both due at once: the older goes first, so neither exceeds its depth. */
    memset(&ic, 0, sizeof(ic));
    assert_int_equal(ub__impair_add(&ic, UB_IMPAIR_REORDER_NTH, 1, 1, 0), 0);
    assert_int_equal(ub__impair_add(&ic, UB_IMPAIR_REORDER_NTH, 2, 1, 0), 0);
    assert_int_equal(ub__loopnet_impair(f.net, 0, 1, &ic), 0);
    for (uint32_t i = 0; i < 5; i++)
        send1(&f, 0, mk(&f, 1, i, LEN));
    static const uint32_t w4[] = {0, 3, 1, 2, 4};
    assert_int_equal(drain_all(&f, 1, s, 32), 5);
    assert_memory_equal(s, w4, sizeof(w4));

    /* A tail packet with no one to overtake it is released by the timeout. */
    memset(&ic, 0, sizeof(ic));
    ic.reorder_timeout_ns = 50000;
    assert_int_equal(ub__impair_add(&ic, UB_IMPAIR_REORDER_NTH, 1, 5, 0), 0);
    assert_int_equal(ub__loopnet_impair(f.net, 0, 1, &ic), 0);
    uint64_t t0 = ub__loopnet_now(f.net);
    send1(&f, 0, mk(&f, 1, 0, LEN));
    send1(&f, 0, mk(&f, 1, 1, LEN));
    send1(&f, 0, mk(&f, 1, 2, LEN));
    struct ub__loop_dir_stats ds;
    ub__loopnet_dir_stats(f.net, 0, 1, &ds);
    assert_int_equal(ds.held, 1);
    assert_int_equal(ds.queued, 3);
    assert_int_equal(ub__loopnet_next_deadline(f.net), t0 + 100);
    ub__loopnet_set_time(f.net, t0 + 100);
    assert_int_equal(drain(&f, 1, s, 32), 2);
    assert_int_equal(s[1], 2);
    assert_int_equal(ub__loopnet_next_deadline(f.net), t0 + 100 + 50000);
    ub__loopnet_set_time(f.net, t0 + 100 + 49999);
    assert_int_equal(drain(&f, 1, s, 32), 0);
    ub__loopnet_set_time(f.net, t0 + 100 + 50000);
    struct ub__pkt *r;
    assert_int_equal(ub__dev_recv(f.dev[1], &r, 1, &f.pool), 1);
    assert_int_equal(seq_of(r), 1);
    assert_int_equal(r->ts, t0 + 100 + 50000);
    ub__pkt_free(r);

    /* A hold ended by its timeout also overtakes older holds (here, a delayed one). */
    memset(&ic, 0, sizeof(ic));
    ic.reorder_timeout_ns = 1000;
    assert_int_equal(ub__impair_add(&ic, UB_IMPAIR_REORDER_NTH, 1, 5, 0), 0);
    assert_int_equal(ub__impair_add(&ic, UB_IMPAIR_DELAY_NTH, 1, 100000, 0), 0);
    assert_int_equal(ub__impair_add(&ic, UB_IMPAIR_REORDER_NTH, 2, 5, 0), 0);
    assert_int_equal(ub__loopnet_impair(f.net, 0, 1, &ic), 0);
    t0 = ub__loopnet_now(f.net);
    for (uint32_t i = 0; i < 4; i++)
        send1(&f, 0, mk(&f, 1, i, LEN));    /* 3 overtakes both holds: 4 left each */
    ub__loopnet_set_time(f.net, t0 + 1100); /* 2 times out, overtaking 1: 3 left */
    static const uint32_t w5[] = {0, 3, 2};
    assert_int_equal(drain(&f, 1, s, 32), 3);
    assert_memory_equal(s, w5, sizeof(w5));
    for (uint32_t i = 4; i < 7; i++)
        send1(&f, 0, mk(&f, 1, i, LEN)); /* 6 is the third: 1 is released at its own time */
    ub__loopnet_set_time(f.net, t0 + 1200);
    assert_int_equal(drain(&f, 1, s, 32), 3);
    assert_int_equal(ub__loopnet_next_deadline(f.net), t0 + 100100);
    ub__loopnet_set_time(f.net, t0 + 100100);
    assert_int_equal(ub__dev_recv(f.dev[1], &r, 1, &f.pool), 1);
    assert_int_equal(seq_of(r), 1);
    ub__pkt_free(r);

    /* Held packets are freed by close, and by destroy. */
    assert_int_equal(ub__loopnet_impair(f.net, 0, 1, &ic), 0);
    send1(&f, 0, mk(&f, 1, 0, LEN));
    send1(&f, 0, mk(&f, 1, 1, LEN));
    ub__dev_close(f.dev[1]);
    assert_int_equal(f.pool.avail, POOL_N);
    assert_int_equal(ub__loopnet_next_deadline(f.net), UB_TIME_NEVER);
    assert_int_equal(ub__loop_open(f.net, 1, &f.dev[1]), 0);
    ub__loopnet_set_time(f.net, t0 + 200000);
    assert_int_equal(ub__loopnet_impair(f.net, 0, 1, &ic), 0);
    send1(&f, 0, mk(&f, 1, 0, LEN));
    send1(&f, 0, mk(&f, 1, 1, LEN));
    assert_int_equal(f.pool.avail, POOL_N - 2);
    struct ub__loop_dir_stats ds2;
    ub__loopnet_dir_stats(f.net, 0, 1, &ds2);
    assert_int_equal(ds2.held, 1);
    fx_fini(&f);
}

/* Seeded reordering: depth never exceeded, nothing lost, nothing stuck. */
static void test_reorder_random(void **state)
{
    (void)state;
    enum { N = 3000, DEPTH = 5 };
    struct fx f;
    struct ub__loopnet_cfg cfg = {.ports = 2, .latency_ns = 2000, .seed = 1};
    fx_init(&f, &cfg, 2);
    struct ub__impair_cfg ic;
    memset(&ic, 0, sizeof(ic));
    ic.seed = 99;
    ic.reorder_ppm = 200000;
    ic.reorder_depth = DEPTH;
    ic.reorder_timeout_ns = 3000;
    assert_int_equal(ub__loopnet_impair(f.net, 0, 1, &ic), 0);
    uint32_t *s = calloc(N, sizeof(*s));
    uint8_t *seen = calloc(N, 1);
    assert_true(s && seen);
    uint32_t n = 0;
    for (uint32_t i = 0; i < N; i++) {
        /* Bursts and gaps, so both overtaking and the timeout end holds. */
        ub__loopnet_set_time(f.net, (uint64_t)i * 100 + (i / 50) * 10000);
        send1(&f, 0, mk(&f, 1, i, LEN));
        n += drain(&f, 1, s + n, N - n);
    }
    n += drain_all(&f, 1, s + n, N - n);
    assert_int_equal(n, N);
    uint32_t max_over = 0, out_of_order = 0;
    for (uint32_t k = 0; k < N; k++) {
        assert_false(seen[s[k]]);
        seen[s[k]] = 1;
        uint32_t over = 0; /* later packets delivered before this one */
        for (uint32_t j = 0; j < k; j++)
            over += s[j] > s[k];
        assert_true(over <= DEPTH);
        max_over = over > max_over ? over : max_over;
        out_of_order += over > 0;
    }
    assert_int_equal(max_over, DEPTH);
    assert_true(out_of_order > N / 10);
    struct ub__loop_dir_stats ds;
    ub__loopnet_dir_stats(f.net, 0, 1, &ds);
    assert_in_range(ds.impair.reordered, N / 5 - 150, N / 5 + 150);
    assert_int_equal(ds.held, 0);
    assert_int_equal(ds.queued, 0);
    free(s);
    free(seen);
    fx_fini(&f);
}

static uint32_t popcount_diff(const uint8_t *x, const uint8_t *y, uint32_t n)
{
    uint32_t c = 0;
    for (uint32_t i = 0; i < n; i++)
        c += (uint32_t)__builtin_popcount((unsigned)(x[i] ^ y[i]));
    return c;
}

static void test_corrupt_and_duplicate(void **state)
{
    (void)state;
    struct fx f;
    struct ub__loopnet_cfg cfg = {.ports = 2};
    fx_init(&f, &cfg, 2);
    struct ub__impair_cfg ic;
    memset(&ic, 0, sizeof(ic));
    assert_int_equal(ub__impair_add(&ic, UB_IMPAIR_CORRUPT_NTH, 0, 3, 0), 0);
    assert_int_equal(ub__impair_add(&ic, UB_IMPAIR_DUP_NTH, 1, 3, 0), 0);
    assert_int_equal(ub__impair_add(&ic, UB_IMPAIR_CORRUPT_BIT, 2, 33, 0), 0);
    assert_int_equal(ub__impair_add(&ic, UB_IMPAIR_DUP_NTH, 2, 1, 0), 0);
    assert_int_equal(ub__loopnet_impair(f.net, 0, 1, &ic), 0);
    struct ub__pkt *p[4];
    uint8_t orig[4][LEN];
    for (uint32_t i = 0; i < 4; i++) {
        p[i] = mk(&f, 1, i, LEN);
        memcpy(orig[i], p[i]->data, LEN);
        ub__pkt_ref(p[i]); /* retained by the sender */
    }
    assert_int_equal(ub__dev_send(f.dev[0], p, 4), 4);
    for (uint32_t i = 0; i < 4; i++)
        assert_memory_equal(p[i]->data, orig[i], LEN); /* sender's bytes never touched */

    struct ub__pkt *r[16];
    int n = ub__dev_recv(f.dev[1], r, 16, &f.pool);
    /* 0 (3 bits), 1 x4, 2 (bit 33), 2 clean duplicate, 3 */
    assert_int_equal(n, 8);
    assert_int_equal(popcount_diff(r[0]->data, orig[0], LEN), 3);
    for (int k = 1; k <= 4; k++) {
        assert_memory_equal(r[k]->data, orig[1], LEN);
        for (int j = 1; j < k; j++)
            assert_ptr_not_equal(r[k], r[j]);
    }
    assert_int_equal(popcount_diff(r[5]->data, orig[2], LEN), 1);
    assert_int_equal(r[5]->data[4] ^ orig[2][4], 0x02);
    assert_memory_equal(r[6]->data, orig[2], LEN);
    assert_memory_equal(r[7]->data, orig[3], LEN);
    for (int k = 0; k < n; k++) {
        assert_ptr_not_equal(r[k], p[0]);
        assert_ptr_not_equal(r[k], p[1]);
        assert_ptr_not_equal(r[k], p[2]);
        assert_ptr_not_equal(r[k], p[3]);
        ub__pkt_free(r[k]);
    }
    for (uint32_t i = 0; i < 4; i++) {
        assert_memory_equal(p[i]->data, orig[i], LEN);
        assert_int_equal(p[i]->refcnt, 1);
        ub__pkt_free(p[i]);
    }
    struct ub__loop_dir_stats ds;
    ub__loopnet_dir_stats(f.net, 0, 1, &ds);
    assert_int_equal(ds.impair.corrupted, 2);
    assert_int_equal(ds.impair.bits_flipped, 4);
    assert_int_equal(ds.impair.duplicated, 4);
    assert_int_equal(ds.delivered, 8);

    /* Sender not retaining: the last duplicate is the original buffer itself. */
    struct ub__pkt *q = mk(&f, 1, 9, LEN);
    memset(&ic, 0, sizeof(ic));
    assert_int_equal(ub__impair_add(&ic, UB_IMPAIR_DUP_NTH, 0, 2, 0), 0);
    assert_int_equal(ub__loopnet_impair(f.net, 0, 1, &ic), 0);
    send1(&f, 0, q);
    n = ub__dev_recv(f.dev[1], r, 16, &f.pool);
    assert_int_equal(n, 3);
    assert_ptr_equal(r[2], q);
    for (int k = 0; k < n; k++) {
        assert_int_equal(seq_of(r[k]), 9);
        ub__pkt_free(r[k]);
    }

    /* No buffer for a corrupted clone: that copy is lost and counted. */
    memset(&ic, 0, sizeof(ic));
    assert_int_equal(ub__impair_add(&ic, UB_IMPAIR_CORRUPT_NTH, 0, 1, 0), 0);
    assert_int_equal(ub__loopnet_impair(f.net, 0, 1, &ic), 0);
    struct ub__pkt *hog[POOL_N];
    uint32_t nh = 0;
    q = mk(&f, 1, 10, LEN);
    while ((hog[nh] = ub__pkt_alloc(&f.pool)) != NULL)
        nh++;
    send1(&f, 0, q);
    while (nh)
        ub__pkt_free(hog[--nh]);
    ub__loopnet_dir_stats(f.net, 0, 1, &ds);
    assert_int_equal(ds.nomem, 1);
    assert_int_equal(ub__dev_recv(f.dev[1], r, 16, &f.pool), 0);
    fx_fini(&f);
}

static void test_ce_marking(void **state)
{
    (void)state;
    struct fx f;
    struct ub__loopnet_cfg cfg = {.ports = 2};
    fx_init(&f, &cfg, 2);
    struct ub__impair_cfg ic;
    memset(&ic, 0, sizeof(ic));
    ic.ce_ppm = UB_IMPAIR_PPM;
    assert_int_equal(ub__loopnet_impair(f.net, 0, 1, &ic), 0);
    struct ub__pkt *b[4];
    for (uint32_t i = 0; i < 4; i++) {
        b[i] = mk(&f, 1, i, LEN);
        b[i]->ecn = (uint8_t)i;
        ub__pkt_ref(b[i]);
    }
    assert_int_equal(ub__dev_send(f.dev[0], b, 4), 4);
    struct ub__pkt *r[4];
    assert_int_equal(ub__dev_recv(f.dev[1], r, 4, &f.pool), 4);
    static const uint8_t want[4] = {0, 3, 3, 3}; /* not-ECT is never marked */
    for (uint32_t i = 0; i < 4; i++) {
        assert_int_equal(r[i]->ecn, want[i]);
        assert_int_equal(b[i]->ecn, i); /* the sender's metadata is its own */
        ub__pkt_free(r[i]);
        ub__pkt_free(b[i]);
    }
    struct ub__loop_dir_stats ds;
    ub__loopnet_dir_stats(f.net, 0, 1, &ds);
    assert_int_equal(ds.ce_marked, 3);
    fx_fini(&f);
}

/* One run of seeded loss + duplication + reordering + jitter; returns the arrival sequence. */
static uint32_t seeded_run(uint64_t net_seed, uint32_t *s, uint32_t max)
{
    struct fx f;
    struct ub__loopnet_cfg cfg = {.ports = 2, .latency_ns = 5000, .seed = net_seed};
    fx_init(&f, &cfg, 2);
    struct ub__impair_cfg ic;
    memset(&ic, 0, sizeof(ic));
    ic.seed = 1234;
    ic.drop_ppm = 100000;
    ic.dup_ppm = 50000;
    ic.reorder_ppm = 50000;
    ic.reorder_depth = 3;
    ic.jitter_ns = 300;
    ic.corrupt_ppm = 50000;
    assert_int_equal(ub__loopnet_impair(f.net, 0, 1, &ic), 0);
    uint32_t n = 0;
    for (uint32_t i = 0; i < 2000; i++) {
        ub__loopnet_set_time(f.net, (uint64_t)i * 250);
        send1(&f, 0, mk(&f, 1, i, LEN));
        n += drain(&f, 1, s + n, max - n);
    }
    n += drain_all(&f, 1, s + n, max - n);
    struct ub__loop_dir_stats ds;
    ub__loopnet_dir_stats(f.net, 0, 1, &ds);
    assert_int_equal(n, 2000 - ds.impair.dropped + ds.impair.duplicated);
    fx_fini(&f);
    return n;
}

static void test_seeded_determinism(void **state)
{
    (void)state;
    enum { MAX = 4000 };
    uint32_t *a = calloc(MAX, 4), *b = calloc(MAX, 4), *c = calloc(MAX, 4);
    assert_true(a && b && c);
    uint32_t na = seeded_run(7, a, MAX), nb = seeded_run(7, b, MAX), nc = seeded_run(8, c, MAX);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, (size_t)na * 4);
    assert_true(na != nc || memcmp(a, c, (size_t)na * 4) != 0);
    free(a);
    free(b);
    free(c);
}

static void test_destroy_frees_everything(void **state)
{
    (void)state;
    struct fx f;
    struct ub__loopnet_cfg cfg = {.ports = 3, .latency_ns = 1000000};
    fx_init(&f, &cfg, 3);
    struct ub__impair_cfg ic;
    memset(&ic, 0, sizeof(ic));
    ic.reorder_ppm = 500000;
    ic.reorder_depth = 10;
    ic.dup_ppm = 500000;
    assert_int_equal(ub__loopnet_impair(f.net, 0, 2, &ic), 0);
    for (uint32_t i = 0; i < 100; i++) {
        send1(&f, 0, mk(&f, 2, i, LEN));
        send1(&f, 1, mk(&f, 2, i, LEN));
        send1(&f, 2, mk(&f, 0, i, LEN));
    }
    struct ub__pkt *keep = mk(&f, 1, 1, LEN);
    ub__pkt_ref(keep);
    send1(&f, 0, keep);
    ub__pkt_free(keep); /* the sender lets go; the fabric still holds a reference */
    assert_true(f.pool.avail < POOL_N - 300);
    fx_fini(&f); /* checks avail == count */
}

/*
 * A packet with an attached payload (ub__pkt_attach) is flattened before the loop device
 * sees it: the copy the sender keeps for retransmission stops referring to the source
 * memory, and the receiver gets the same bytes, however the source changes afterwards.
 */
static void test_attached_payload_flattened(void **state)
{
    (void)state;
    struct fx f;
    struct ub__loopnet_cfg cfg = {.ports = 2};
    fx_init(&f, &cfg, 2);
    assert_false(ub__dev_gathers(f.dev[0]));
    uint8_t src[1000], want[1020];
    for (uint32_t i = 0; i < sizeof(src); i++)
        src[i] = (uint8_t)(i * 13 + 5);
    struct ub__pkt *p = mk(&f, 1, 77, 20);
    memcpy(want, p->data, 20);
    memcpy(want + 20, src, sizeof(src));
    assert_int_equal(ub__pkt_attach(p, src, sizeof(src)), 0);
    ub__pkt_ref(p); /* kept, as PDS keeps a packet for retransmission */
    send1(&f, 0, p);
    assert_int_equal(p->xlen, 0);
    assert_int_equal(p->len, sizeof(want));
    assert_memory_equal(p->data, want, sizeof(want));
    memset(src, 0, sizeof(src)); /* the owner takes its memory back */
    struct ub__pkt *r[4];
    assert_int_equal(ub__dev_recv(f.dev[1], r, 4, &f.pool), 1);
    assert_int_equal(r[0]->len, sizeof(want));
    assert_int_equal(r[0]->xlen, 0);
    assert_memory_equal(r[0]->data, want, sizeof(want));
    ub__pkt_free(r[0]);
    ub__pkt_free(p);
    fx_fini(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_order_metadata),
        cmocka_unit_test(test_open_close_errors),
        cmocka_unit_test(test_shared_buffer_copied),
        cmocka_unit_test(test_attached_payload_flattened),
        cmocka_unit_test(test_mtu),
        cmocka_unit_test(test_unknown_port),
        cmocka_unit_test(test_overflow),
        cmocka_unit_test(test_merge_and_latency),
        cmocka_unit_test(test_scripted_drops),
        cmocka_unit_test(test_blackhole_midflow),
        cmocka_unit_test(test_delay_jitter_exact),
        cmocka_unit_test(test_reorder_scripted),
        cmocka_unit_test(test_reorder_random),
        cmocka_unit_test(test_corrupt_and_duplicate),
        cmocka_unit_test(test_ce_marking),
        cmocka_unit_test(test_seeded_determinism),
        cmocka_unit_test(test_destroy_frees_everything),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
