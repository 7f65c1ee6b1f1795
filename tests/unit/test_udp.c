/*
 * The multipath UDP device over loopback (127.0.0.1 and ::1 only): engines
 * end to end on 8 paths with replies on the matching path, GSO/GRO on and
 * off, ECN both ways, foreign datagrams, a full receive buffer, an empty
 * pool, round-robin fairness, transmission stamps in send order, spec parsing and
 * open/send errors (receive modes and the connected socket: test_udp_conn.c).
 *
 * Every wait is epoll_wait on a device fd with a timeout inside a loop
 * bounded in iterations and in time; nothing sleeps to synchronise.
 */
#include "unit/udp_util.h"

/* ---- engines end to end -------------------------------------------------------------- */

#define E2E_N      20000
#define E2E_WIN    256
#define E2E_PATHS  8
#define TAG_DATA   (1ULL << 63)
#define TAG_REPLY  (1ULL << 62)
#define E2E_PAYMAX 3000

struct e2e {
    struct ub__engine ea, eb;
    struct ub__dev *a, *b;
    struct ub__addr a_path[E2E_PATHS];
    uint8_t seen[E2E_N];
    uint32_t received, bad, dup;
    uint64_t bytes;
    uint32_t from_path[E2E_PATHS]; /* data received, by the sender's path (source port) */
    bool replied[E2E_PATHS];
    uint32_t replies_ok, replies_bad;
};

static uint32_t e2e_len(uint32_t seq)
{
    return 1 + (seq * 7919u) % E2E_PAYMAX;
}

static void e2e_payload(uint32_t seq, uint8_t *buf, uint32_t len)
{
    for (uint32_t i = 0; i < len; i++)
        buf[i] = pat(seq, i);
}

static void on_b(void *arg, const struct ub__dgram_in *d, uint64_t now)
{
    struct e2e *x = arg;
    if (!(d->header_data & TAG_DATA)) {
        x->bad++;
        return;
    }
    uint32_t seq = (uint32_t)d->header_data;
    uint8_t buf[E2E_PAYMAX];
    if (seq >= E2E_N || d->len != e2e_len(seq)) {
        x->bad++;
        return;
    }
    e2e_payload(seq, buf, d->len);
    if (memcmp(buf, d->data, d->len) != 0 || d->src->family != x->b->local.family) {
        x->bad++;
        return;
    }
    if (x->seen[seq]++) {
        x->dup++;
        return;
    }
    x->received++;
    x->bytes += d->len;
    for (uint32_t k = 0; k < E2E_PATHS; k++) {
        if (!ub__addr_eq(d->src, &x->a_path[k]))
            continue;
        x->from_path[k]++;
        /* Reply to the source address from B's path k: it must arrive on A's path k. */
        if (!x->replied[k] &&
            ub__engine_dgram_send(&x->eb, d->src, (uint16_t)k, 0, TAG_REPLY | k, "r", 1, now) == 0)
            x->replied[k] = true;
    }
}

static void on_a(void *arg, const struct ub__dgram_in *d, uint64_t now)
{
    struct e2e *x = arg;
    (void)now;
    if ((d->header_data & TAG_REPLY) && (d->header_data & 0xff) == d->path)
        x->replies_ok++;
    else
        x->replies_bad++;
}

static void e2e_run(const char *spec)
{
    struct e2e *x = calloc(1, sizeof(*x));
    assert_non_null(x);
    x->a = open_spec(spec);
    x->b = open_spec(spec);
    for (uint32_t k = 0; k < E2E_PATHS; k++)
        assert_int_equal(ub__udp_path_addr(x->a, k, &x->a_path[k]), 0);
    assert_int_equal(ub__udp_path_addr(x->a, E2E_PATHS, &x->a_path[0]), UB_ERANGE);
    assert_int_equal(ub__dev_num_paths(x->a), E2E_PATHS);
    assert_int_equal(ub__dev_mtu(x->a), MTU);

    struct ub__engine_cfg ec = {
        .seed = 1, .mtu = MTU, .num_paths = E2E_PATHS, .pool_bufs = POOL_N, .txq_cap = 1024};
    assert_int_equal(ub__engine_init(&x->ea, &ec), 0);
    ec.seed = 2;
    assert_int_equal(ub__engine_init(&x->eb, &ec), 0);
    static const struct ub__engine_upcalls up_a = {.dgram = on_a}, up_b = {.dgram = on_b};
    ub__engine_set_upcalls(&x->ea, &up_a, x);
    ub__engine_set_upcalls(&x->eb, &up_b, x);

    int ep = epoll_create1(0);
    assert_true(ep >= 0);
    struct epoll_event ev = {.events = EPOLLIN};
    assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, ub__dev_fd(x->a), &ev), 0);
    assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, ub__dev_fd(x->b), &ev), 0);

    struct ub__drive_stats da = {0}, db = {0};
    uint8_t buf[E2E_PAYMAX];
    uint32_t sent = 0;
    uint64_t t0 = now_ns(), end = t0 + LIMIT_NS;
    for (uint32_t it = 0; it < 1000000 && (x->received < E2E_N || x->replies_ok < E2E_PATHS);
         it++) {
        uint64_t now = now_ns();
        if (now > end)
            break;
        while (sent < E2E_N && sent - x->received < E2E_WIN) {
            uint32_t len = e2e_len(sent);
            e2e_payload(sent, buf, len);
            if (ub__engine_dgram_send(&x->ea, &x->b->local, (uint16_t)(sent % E2E_PATHS), 7,
                                      TAG_DATA | sent, buf, len, now) != 0)
                break;
            sent++;
        }
        int ma = ub__drive_once(&x->ea, x->a, now, &da);
        int mb = ub__drive_once(&x->eb, x->b, now, &db);
        assert_true(ma >= 0 && mb >= 0);
        if (ma == 0 && mb == 0)
            wait_fd(ep, WAIT_MS);
    }
    double secs = (double)(now_ns() - t0) / 1e9;
    print_message("  %s: %u datagrams, %.1f MB in %.3f s: %.0f datagrams/s, %.1f MB/s\n", spec,
                  x->received, (double)x->bytes / 1e6, secs, x->received / secs,
                  (double)x->bytes / 1e6 / secs);

    struct ub__udp_stats sa = stats_of(x->a), sb = stats_of(x->b);
    assert_int_equal(x->bad, 0);
    assert_int_equal(x->dup, 0);
    assert_int_equal(x->received, E2E_N);
    assert_int_equal(da.tx_refused, 0);
    assert_int_equal(sb.rx_kernel_drops, 0);
    assert_int_equal(sb.rx_truncated, 0);
    /* All eight source paths carried data, and the sender's counters agree. */
    uint64_t sum = 0;
    for (uint32_t k = 0; k < E2E_PATHS; k++) {
        assert_int_equal(x->from_path[k], E2E_N / E2E_PATHS);
        assert_true(sa.path[k].tx_pkts >= E2E_N / E2E_PATHS);
        sum += sa.path[k].tx_pkts;
    }
    assert_int_equal(sum, sa.tx_pkts);
    assert_int_equal(sa.tx_pkts, x->ea.stats.tx_pkts);
    /* Everything arrived on B's path 0 (its dev->local); replies left from all of B's paths. */
    assert_int_equal(sb.path[0].rx_pkts, E2E_N);
    for (uint32_t k = 0; k < E2E_PATHS; k++)
        assert_int_equal(sb.path[k].tx_pkts, 1);
    /* A reply to a packet's source address came back on the path socket it left from. */
    assert_int_equal(x->replies_ok, E2E_PATHS);
    assert_int_equal(x->replies_bad, 0);
    for (uint32_t k = 0; k < E2E_PATHS; k++)
        assert_int_equal(sa.path[k].rx_pkts, 1);
    assert_int_equal(x->eb.stats.rx_malformed, 0);

    close(ep);
    ub__dev_close(x->a);
    ub__dev_close(x->b);
    ub__engine_fini(&x->ea);
    ub__engine_fini(&x->eb);
    free(x);
}

static void test_e2e_ipv4(void **state)
{
    (void)state;
    e2e_run("127.0.0.1:0?paths=8&mtu=4096&rcvbuf=8388608");
}

static void test_e2e_ipv6(void **state)
{
    (void)state;
    if (!have_ipv6_loopback())
        skip();
    e2e_run("[::1]:0?paths=8&mtu=4096&rcvbuf=8388608");
}

/* ---- GSO / GRO on and off ----------------------------------------------------------------- */

#define OFF_N 1200

/* Runs of 16 equal sizes on one path, so GSO has something to coalesce. */
static uint32_t off_len(uint32_t seq)
{
    return (seq % 97 == 0) ? 4 + seq % 13 : 200 + ((seq / 16) % 9) * 420;
}

static void offload_run(bool gso, bool gro, struct rx_check *out)
{
    char sa_spec[128], sb_spec[128];
    snprintf(sa_spec, sizeof(sa_spec), "127.0.0.1:0?paths=8&mtu=4096&gso=%d", gso);
    snprintf(sb_spec, sizeof(sb_spec), "127.0.0.1:0?paths=8&mtu=4096&gro=%d&rcvbuf=8388608", gro);
    struct ub__dev *a = open_spec(sa_spec), *b = open_spec(sb_spec);
    struct ub__pktpool pa, pb;
    assert_int_equal(ub__pktpool_init(&pa, POOL_N, MTU + 64, 64), 0);
    assert_int_equal(ub__pktpool_init(&pb, POOL_N, MTU + 64, 64), 0);
    memset(out, 0, sizeof(*out));
    out->n_expected = OFF_N;
    out->seen = calloc(OFF_N, 1);
    assert_non_null(out->seen);

    /* Batches of 128 (8 runs over 4 paths), then drain: the receive buffer never fills. */
    for (uint32_t base = 0; base < OFF_N; base += 128) {
        struct ub__pkt *pk[128];
        uint32_t n = UB_MIN(128u, OFF_N - base);
        for (uint32_t i = 0; i < n; i++) {
            uint32_t seq = base + i;
            pk[i] = mk(&pa, &b->local, seq, off_len(seq), (uint16_t)((seq / 32) % 8));
        }
        send_all(a, pk, n);
        drain_into(b, &pb, out, base + n);
    }
    struct ub__udp_stats st_a = stats_of(a), st_b = stats_of(b);
    assert_int_equal(out->got, OFF_N);
    assert_int_equal(out->bad + out->dup, 0);
    assert_int_equal(st_a.tx_pkts, OFF_N);
    assert_int_equal(st_b.rx_pkts, OFF_N);
    assert_int_equal(st_b.rx_bytes, out->bytes);
    if (!gso) {
        assert_false(st_a.gso);
        assert_int_equal(st_a.tx_gso_msgs, 0);
    }
    if (!gro) {
        assert_false(st_b.gro);
        assert_int_equal(st_b.rx_gro_msgs, 0);
    }
    if (st_a.gso) {
        assert_true(st_a.tx_gso_msgs > 0);
        assert_true(st_a.tx_gso_segs > st_a.tx_gso_msgs);
        assert_true(st_a.tx_batches < OFF_N / 4);
    }
    /* Loopback hands a GSO super-datagram to a GRO socket whole: the device splits it. */
    if (st_a.gso && st_b.gro) {
        assert_true(st_b.rx_gro_msgs > 0);
        assert_true(st_b.rx_gro_segs >= 2 * st_b.rx_gro_msgs);
    }
    print_message("  gso=%d gro=%d: tx %llu pkts in %llu super-datagrams (%llu calls), rx %llu "
                  "pkts of which %llu from %llu GRO receives\n",
                  st_a.gso, st_b.gro, (unsigned long long)st_a.tx_pkts,
                  (unsigned long long)st_a.tx_gso_msgs, (unsigned long long)st_a.tx_batches,
                  (unsigned long long)st_b.rx_pkts, (unsigned long long)st_b.rx_gro_segs,
                  (unsigned long long)st_b.rx_gro_msgs);
    close_pair(a, b, &pa, &pb);
    free(out->seen);
    out->seen = NULL;
}

static void test_gso_gro_matrix(void **state)
{
    (void)state;
    struct rx_check r[4];
    for (int i = 0; i < 4; i++)
        offload_run(i & 1, i & 2, &r[i]);
    for (int i = 1; i < 4; i++) {
        assert_int_equal(r[i].bytes, r[0].bytes);
        assert_int_equal(r[i].sum, r[0].sum);
    }
}

/*
 * GRO straight into pool buffers. 117 packets of 9000 bytes on one path (the last one 4000:
 * a 1 MiB transfer's shape) go out as super-datagrams of at most 7 segments; a receiver
 * whose buffers hold exactly 9000 bytes gets each segment in its own buffer, none staged.
 * Then runs of 4000-byte segments (not a buffer's size: staged and split) interleaved with
 * full-size runs and single datagrams: every byte intact, the socket's order kept.
 */
#define BIG      9000
#define BIG_N    117
#define MIX_RUNS 12

static void check_order(const struct ub__pkt *p, uint32_t *next)
{
    uint32_t seq;
    memcpy(&seq, p->data, 4);
    assert_int_equal(seq, *next);
    (*next)++;
}

static void direct_drain(struct ub__dev *b, struct ub__pktpool *pool, struct rx_check *c,
                         uint32_t want, uint32_t *next)
{
    uint64_t end = now_ns() + 5 * UB_NS_PER_S;
    for (int it = 0; it < 100000 && c->got + c->bad + c->dup < want && now_ns() < end; it++) {
        struct ub__pkt *pk[64];
        int r = ub__dev_recv(b, pk, 64, pool);
        assert_true(r >= 0);
        for (int i = 0; i < r; i++) {
            check_pkt(c, pk[i]);
            check_order(pk[i], next);
            ub__pkt_free(pk[i]);
        }
        if (r == 0)
            wait_fd(ub__dev_fd(b), WAIT_MS);
    }
}

static void test_gro_direct(void **state)
{
    (void)state;
    struct ub__dev *a = open_spec("127.0.0.1:0?paths=1&mtu=9000");
    struct ub__dev *b = open_spec("127.0.0.1:0?paths=1&mtu=9000&rcvbuf=8388608");
    struct ub__udp_stats sa = stats_of(a), sb = stats_of(b);
    if (!sa.gso || !sb.gro) {
        print_message("  no UDP GSO/GRO here: skipped\n");
        ub__dev_close(a);
        ub__dev_close(b);
        return;
    }
    struct ub__pktpool pa, pb;
    assert_int_equal(ub__pktpool_init(&pa, 256, BIG + 64, 64), 0);
    assert_int_equal(ub__pktpool_init(&pb, 256, BIG + 64, 64), 0);
    uint32_t total = BIG_N + MIX_RUNS * 10, next = 0;
    struct rx_check c = {.n_expected = total, .seen = calloc(total, 1)};
    assert_non_null(c.seen);

    struct ub__pkt *pk[BIG_N];
    for (uint32_t i = 0; i < BIG_N; i++)
        pk[i] = mk(&pa, &b->local, i, i + 1 < BIG_N ? BIG : 4000, 0);
    send_all(a, pk, BIG_N);
    direct_drain(b, &pb, &c, BIG_N, &next);
    sa = stats_of(a);
    sb = stats_of(b);
    assert_int_equal(c.got, BIG_N);
    assert_int_equal(c.bad + c.dup, 0);
    /* A sendmmsg batch holds 64 iovecs: 9 x 7 segments and a single, then 7 x 7 and 4. */
    assert_int_equal(sa.tx_pkts, BIG_N);
    assert_int_equal(sa.tx_gso_msgs, 17);
    assert_int_equal(sa.tx_gso_segs, BIG_N - 1);
    assert_int_equal(sb.rx_gro_msgs, 17);
    assert_int_equal(sb.rx_gro_segs, BIG_N - 1);
    assert_int_equal(sb.rx_direct, BIG_N - 1);
    assert_int_equal(sb.rx_bytes, (uint64_t)(BIG_N - 1) * BIG + 4000);

    /* Each round: 4 x 4000 (staged), 4 x 9000 (direct unless behind a staged one), 2 singles. */
    uint32_t seq = BIG_N;
    for (uint32_t r = 0; r < MIX_RUNS; r++) {
        struct ub__pkt *m[10];
        for (uint32_t i = 0; i < 10; i++, seq++)
            m[i] = mk(&pa, &b->local, seq, i < 4 ? 4000 : i < 8 ? BIG : 100 + 50 * i, 0);
        send_all(a, m, 4); /* one super-datagram each, so the runs do not merge */
        send_all(a, m + 4, 4);
        send_all(a, m + 8, 1);
        send_all(a, m + 9, 1);
    }
    direct_drain(b, &pb, &c, total, &next);
    struct ub__udp_stats sb2 = stats_of(b);
    assert_int_equal(c.got, total);
    assert_int_equal(c.bad + c.dup, 0);
    assert_int_equal(next, total);
    assert_int_equal(sb2.rx_gro_msgs - sb.rx_gro_msgs, 2 * MIX_RUNS);
    assert_int_equal(sb2.rx_truncated, 0);
    /* The 4000-byte runs never go direct; the 9000-byte ones may (when first in a batch). */
    assert_true(sb2.rx_direct - sb.rx_direct <= 4 * MIX_RUNS);
    print_message("  %llu of %u full-size segments direct in the mixed rounds\n",
                  (unsigned long long)(sb2.rx_direct - sb.rx_direct), 4 * MIX_RUNS);

    free(c.seen);
    close_pair(a, b, &pa, &pb);
}

/*
 * Zero copy: a packet whose payload is attached (ub__pkt_attach: header bytes in the buffer,
 * the rest in memory the packet refers to) leaves byte for byte as the same packet copied.
 * Attached and copied packets alternate, so GSO runs mix both forms (a segment of two iovecs
 * next to one of one); the short last packet ends a run. Every received datagram must match
 * the pattern mk() writes, i.e. what the copied form of the same packet carries.
 */
#define ZC_N   150
#define ZC_LEN 5000
#define ZC_HDR 48

static void zc_run(int gso)
{
    char spec[96];
    snprintf(spec, sizeof(spec), "127.0.0.1:0?paths=1&mtu=9000&gso=%d", gso);
    struct ub__dev *a = open_spec(spec);
    struct ub__dev *b = open_spec("127.0.0.1:0?paths=1&mtu=9000&rcvbuf=8388608");
    assert_true(ub__dev_gathers(a));
    struct ub__pktpool pa, pb;
    assert_int_equal(ub__pktpool_init(&pa, 256, 9000 + 64, 64), 0);
    assert_int_equal(ub__pktpool_init(&pb, 256, 9000 + 64, 64), 0);
    uint8_t *ext = malloc((size_t)ZC_N * ZC_LEN);
    assert_non_null(ext);
    struct ub__pkt *pk[ZC_N];
    uint64_t bytes = 0;
    for (uint32_t seq = 0; seq < ZC_N; seq++) {
        uint32_t len = seq + 1 < ZC_N ? ZC_LEN : 1234;
        if (seq % 2) {
            pk[seq] = mk(&pa, &b->local, seq, len, 0);
        } else {
            struct ub__pkt *p = ub__pkt_alloc(&pa);
            uint8_t *h = ub__pkt_put(p, ZC_HDR);
            uint8_t *x = ext + (size_t)seq * ZC_LEN;
            for (uint32_t i = 0; i < len; i++)
                (i < ZC_HDR ? h : x - ZC_HDR)[i] = pat(seq, i);
            memcpy(h, &seq, 4);
            assert_int_equal(ub__pkt_attach(p, x, len - ZC_HDR), 0);
            assert_int_equal(ub__pkt_total_len(p), len);
            p->addr = b->local;
            pk[seq] = p;
        }
        bytes += len;
    }
    send_all(a, pk, ZC_N);
    struct rx_check c = {.n_expected = ZC_N, .seen = calloc(ZC_N, 1)};
    assert_non_null(c.seen);
    drain_into(b, &pb, &c, ZC_N);
    struct ub__udp_stats sa = stats_of(a), sb = stats_of(b);
    assert_int_equal(c.got, ZC_N);
    assert_int_equal(c.bad + c.dup, 0);
    assert_int_equal(c.bytes, bytes);
    assert_int_equal(sa.tx_pkts, ZC_N);
    assert_int_equal(sa.tx_bytes, bytes);
    assert_int_equal(sb.rx_bytes, bytes);
    if (sa.gso) { /* 13 segments of 5000 per super-datagram, 64 packets per call */
        assert_int_equal(sa.tx_batches, 3);
        assert_true(sa.tx_gso_segs > sa.tx_gso_msgs);
    }
    print_message("  gso=%d: %u packets, half with attached payloads, in %llu calls and %llu "
                  "super-datagrams: every byte as copied\n",
                  sa.gso, ZC_N, (unsigned long long)sa.tx_batches,
                  (unsigned long long)sa.tx_gso_msgs);
    free(c.seen);
    free(ext);
    close_pair(a, b, &pa, &pb);
}

static void test_zero_copy_gather(void **state)
{
    (void)state;
    zc_run(1);
    zc_run(0);
}

/* ---- transmission stamps ----------------------------------------------------------------- */

/*
 * A window of several paths leaves socket by socket, and its transmission stamps (pkt->order)
 * are handed out again in the order the packets really left, so that PDS can tell which
 * packet left after which. Unstamped packets (ACKs: order 0) keep 0 and take no stamp.
 */
static void test_stamps_in_send_order(void **state)
{
    (void)state;
    struct ub__dev *a = open_spec("127.0.0.1:0?paths=2&gso=0");
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 16, 2048, 64), 0);
    int pr = plain_sock4();
    struct ub__addr ra = {.family = UB_AF_INET, .port = plain_port(pr), .ip = {127, 0, 0, 1}};
    static const uint16_t path[5] = {1, 0, 1, 0, 0};
    static const uint64_t stamp[5] = {10, 11, 12, 0, 14};
    struct ub__pkt *pk[5];
    for (uint32_t i = 0; i < 5; i++) {
        pk[i] = mk(&pool, &ra, i, 64, path[i]);
        pk[i]->order = stamp[i];
        ub__pkt_ref(pk[i]); /* as PDS keeps its packets for retransmission */
    }
    struct ub__pkt *w[5];
    memcpy(w, pk, sizeof(w));
    assert_int_equal(ub__dev_send(a, w, 5), 5);
    /* Socket 0's packets (1, 3, 4) left first, then socket 1's (0, 2). */
    static const uint32_t left[5] = {1, 3, 4, 0, 2};
    for (uint32_t k = 0; k < 5; k++) {
        struct pollfd pf = {.fd = pr, .events = POLLIN};
        assert_int_equal(poll(&pf, 1, 1000), 1);
        uint8_t d[128];
        assert_int_equal(recv(pr, d, sizeof(d), MSG_DONTWAIT), 64);
        uint32_t seq;
        memcpy(&seq, d, 4);
        assert_int_equal(seq, left[k]);
    }
    static const uint64_t want[5] = {12, 10, 14, 0, 11};
    for (uint32_t i = 0; i < 5; i++) {
        assert_int_equal(pk[i]->order, want[i]);
        ub__pkt_free(pk[i]);
    }
    close(pr);
    ub__pktpool_fini(&pool);
    ub__dev_close(a);
}

/* ---- ECN ------------------------------------------------------------------------------------- */

static void test_ecn(void **state)
{
    (void)state;
    struct ub__dev *b = open_spec("127.0.0.1:0?paths=2");
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 64, 2048, 64), 0);

    /* CE set by a plain sender reaches the caller. */
    int ps = plain_sock4();
    int tos = 3;
    assert_int_equal(setsockopt(ps, IPPROTO_IP, IP_TOS, &tos, sizeof(tos)), 0);
    struct sockaddr_in to = sa4_of(&b->local);
    for (uint32_t i = 0; i < 5; i++) {
        uint8_t d[64];
        for (uint32_t j = 0; j < sizeof(d); j++)
            d[j] = pat(i, j);
        memcpy(d, &i, 4);
        assert_int_equal(sendto(ps, d, sizeof(d), 0, (struct sockaddr *)&to, sizeof(to)), 64);
    }
    struct rx_check c = {.n_expected = 5, .seen = calloc(5, 1)};
    drain_into(b, &pool, &c, 5);
    assert_int_equal(c.got, 5);
    assert_int_equal(c.ecn_hist[3], 5);
    assert_int_equal(stats_of(b).rx_ce, 5);
    free(c.seen);

    /* The device sends ECT(0) by default and honours a non-zero pkt->ecn per packet; with
     * ecn=0 every datagram leaves Not-ECT. */
    int pr = plain_sock4();
    int one = 1;
    assert_int_equal(setsockopt(pr, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one)), 0);
    struct ub__addr ra = {.family = UB_AF_INET, .port = plain_port(pr), .ip = {127, 0, 0, 1}};
    struct ub__dev *e0 = open_spec("127.0.0.1:0?paths=2&ecn=0");
    int ep = epoll_create1(0);
    struct epoll_event pev = {.events = EPOLLIN};
    assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, pr, &pev), 0);
    struct {
        struct ub__dev *dev;
        uint8_t pkt_ecn, want;
    } cases[] = {{b, 0, 2}, {b, 1, 1}, {b, 2, 2}, {e0, 0, 0}, {e0, 1, 0}, {e0, 2, 0}};
    for (uint32_t i = 0; i < UB_ARRAY_SIZE(cases); i++) {
        struct ub__pkt *p = mk(&pool, &ra, i, 100, (uint16_t)i);
        p->ecn = cases[i].pkt_ecn;
        assert_int_equal(ub__dev_send(cases[i].dev, &p, 1), 1);
        uint8_t buf[256];
        union {
            char b[128];
            struct cmsghdr a;
        } ctl;
        struct iovec iov = {buf, sizeof(buf)};
        struct msghdr h = {.msg_iov = &iov,
                           .msg_iovlen = 1,
                           .msg_control = ctl.b,
                           .msg_controllen = sizeof(ctl.b)};
        ssize_t r = -1;
        uint64_t end = now_ns() + 2 * UB_NS_PER_S;
        for (int it = 0; it < 1000 && r < 0 && now_ns() < end; it++) {
            r = recvmsg(pr, &h, MSG_DONTWAIT);
            if (r < 0)
                wait_fd(ep, WAIT_MS);
        }
        assert_int_equal(r, 100);
        int got = -1;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&h); cm; cm = CMSG_NXTHDR(&h, cm))
            if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_TOS)
                got = *(uint8_t *)CMSG_DATA(cm) & 3;
        assert_int_equal(got, cases[i].want);
    }
    close(ep);
    close(ps);
    close(pr);
    ub__dev_close(b);
    ub__dev_close(e0);
    assert_int_equal(pool.avail, pool.count);
    ub__pktpool_fini(&pool);
}

/* ---- foreign datagrams ------------------------------------------------------------------------
 */

static void test_foreign_datagrams(void **state)
{
    (void)state;
    struct ub__dev *b = open_spec("127.0.0.1:0?paths=4&mtu=4096");
    struct ub__engine eb;
    struct ub__engine_cfg ec = {.seed = 3, .mtu = MTU, .num_paths = 4, .pool_bufs = 64};
    assert_int_equal(ub__engine_init(&eb, &ec), 0);

    int ps = plain_sock4();
    struct sockaddr_in to = sa4_of(&b->local);
    static uint8_t junk[6000];
    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (uint8_t)(i * 131 + 17);
    /* Empty, tiny, truncated-looking, garbage; the last is larger than any pool buffer. */
    static const size_t lens[] = {0, 1, 3, 7, 64, 1000, 4096, 5000};
    for (size_t i = 0; i < UB_ARRAY_SIZE(lens); i++)
        assert_int_equal(sendto(ps, junk, lens[i], 0, (struct sockaddr *)&to, sizeof(to)),
                         (ssize_t)lens[i]);

    struct ub__drive_stats ds = {0};
    uint64_t end = now_ns() + 5 * UB_NS_PER_S;
    for (int it = 0; it < 10000 && eb.stats.rx_pkts < 7 && now_ns() < end; it++) {
        assert_true(ub__drive_once(&eb, b, now_ns(), &ds) >= 0);
        if (eb.stats.rx_pkts < 7)
            wait_fd(ub__dev_fd(b), WAIT_MS);
    }
    struct ub__udp_stats st = stats_of(b);
    assert_int_equal(eb.stats.rx_pkts, 7);
    assert_int_equal(eb.stats.rx_malformed, 7);
    assert_int_equal(eb.stats.rx_delivered, 0);
    assert_int_equal(st.rx_truncated, 1);
    assert_int_equal(st.rx_pkts, 7);
    assert_int_equal(ds.dev_errors, 0);
    close(ps);
    ub__dev_close(b);
    ub__engine_fini(&eb);
}

/* ---- full receive buffer
 * ------------------------------------------------------------------------- */

static void test_full_rcvbuf(void **state)
{
    (void)state;
    /* No GSO: the kernel counts drops per datagram it queued, a super-datagram once. */
    struct ub__dev *a = open_spec("127.0.0.1:0?paths=8&mtu=4096&gso=0");
    struct ub__dev *b = open_spec("127.0.0.1:0?paths=8&mtu=4096&rcvbuf=2048");
    struct ub__pktpool pa, pb;
    assert_int_equal(ub__pktpool_init(&pa, POOL_N, MTU + 64, 64), 0);
    assert_int_equal(ub__pktpool_init(&pb, POOL_N, MTU + 64, 64), 0);
    assert_true(stats_of(b).rcvbuf < 65536);

    /* Blast without reading: the kernel drops what does not fit; nothing blocks. */
    const uint32_t blast = 4000;
    uint32_t accepted = 0;
    for (uint32_t base = 0; base < blast; base += 64) {
        struct ub__pkt *pk[64];
        for (uint32_t i = 0; i < 64; i++)
            pk[i] = mk(&pa, &b->local, base + i, 1000, (uint16_t)i);
        int r = ub__dev_send(a, pk, 64);
        assert_true(r >= 0);
        accepted += (uint32_t)r;
        for (uint32_t i = (uint32_t)r; i < 64; i++)
            ub__pkt_free(pk[i]);
    }
    struct rx_check c = {.n_expected = blast + 1000, .seen = calloc(blast + 1000, 1)};
    /* Take what the buffer held: every datagram sent was received or counted as dropped,
     * the last ones too (no later datagram needed to report them). */
    drain_idle(b, &pb, &c);
    uint32_t held = c.got;
    assert_int_equal(stats_of(b).rx_pkts + stats_of(b).rx_kernel_drops, stats_of(a).tx_pkts);
    uint64_t drops = stats_of(b).rx_kernel_drops;
    struct ub__pkt *probe = mk(&pa, &b->local, blast, 100, 0);
    send_all(a, &probe, 1);
    drain_into(b, &pb, &c, held + 1);
    struct ub__udp_stats st_a = stats_of(a), st_b = stats_of(b);
    print_message("  blast %u: accepted %llu, received %u, kernel drops %llu\n", blast,
                  (unsigned long long)st_a.tx_pkts, held, (unsigned long long)st_b.rx_kernel_drops);
    assert_int_equal(c.bad + c.dup, 0);
    assert_true(held > 0 && held < blast);
    assert_int_equal(st_a.tx_pkts, accepted + 1);
    assert_int_equal(st_b.rx_pkts, held + 1);
    assert_true(drops > 0);
    assert_int_equal(st_b.rx_kernel_drops, drops);
    assert_int_equal(st_b.rx_pkts + st_b.rx_kernel_drops, st_a.tx_pkts);

    /* Later traffic still flows, one at a time. */
    for (uint32_t i = 0; i < 50; i++) {
        uint32_t before = c.got;
        struct ub__pkt *p = mk(&pa, &b->local, blast + 1 + i, 500, (uint16_t)i);
        send_all(a, &p, 1);
        drain_into(b, &pb, &c, c.got + c.bad + c.dup + 1);
        assert_int_equal(c.got, before + 1);
    }
    free(c.seen);
    close_pair(a, b, &pa, &pb);
}

/* ---- empty pool, fairness ----------------------------------------------------------------------
 */

/* 20 datagrams to B's path 0 and 20 to its path 7, from a plain socket. */
static void load_paths_0_7(int ps, struct ub__dev *b)
{
    struct ub__addr p7;
    assert_int_equal(ub__udp_path_addr(b, 7, &p7), 0);
    struct sockaddr_in t0 = sa4_of(&b->local), t7 = sa4_of(&p7);
    for (uint32_t i = 0; i < 40; i++) {
        uint8_t d[200];
        for (uint32_t j = 0; j < sizeof(d); j++)
            d[j] = pat(i, j);
        memcpy(d, &i, 4);
        struct sockaddr_in *to = i % 2 ? &t7 : &t0;
        assert_int_equal(sendto(ps, d, sizeof(d), 0, (struct sockaddr *)to, sizeof(*to)), 200);
    }
}

static void test_fairness(void **state)
{
    (void)state;
    struct ub__dev *b = open_spec("127.0.0.1:0?paths=8&gro=0");
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 256, 2048, 64), 0);
    int ps = plain_sock4();
    load_paths_0_7(ps, b);
    /* Both sockets are loaded; every call of 8 serves both paths. */
    uint32_t total = 0;
    uint64_t end = now_ns() + 2 * UB_NS_PER_S;
    for (int it = 0; it < 1000 && total < 40 && now_ns() < end; it++) {
        struct ub__pkt *pk[8];
        int r = ub__dev_recv(b, pk, 8, &pool);
        assert_true(r >= 0);
        uint32_t on0 = 0, on7 = 0;
        for (int i = 0; i < r; i++) {
            on0 += pk[i]->path == 0;
            on7 += pk[i]->path == 7;
            assert_int_equal(pk[i]->addr.port, plain_port(ps));
            ub__pkt_free(pk[i]);
        }
        if (r == 8) {
            assert_int_equal(on0, 4);
            assert_int_equal(on7, 4);
        }
        total += (uint32_t)r;
        if (r == 0)
            wait_fd(ub__dev_fd(b), WAIT_MS);
    }
    assert_int_equal(total, 40);
    struct ub__udp_stats st = stats_of(b);
    assert_int_equal(st.path[0].rx_pkts, 20);
    assert_int_equal(st.path[7].rx_pkts, 20);
    close(ps);
    ub__dev_close(b);
    assert_int_equal(pool.avail, pool.count);
    ub__pktpool_fini(&pool);
}

/* A pool of 4: recv stops at 4 (counted), the rest waits and arrives later, nothing lost. */
static void pool_stall_run(const char *spec, bool via_gso)
{
    struct ub__dev *b = open_spec(spec);
    struct ub__pktpool small, pa;
    assert_int_equal(ub__pktpool_init(&small, 4, 2048, 64), 0);
    assert_int_equal(ub__pktpool_init(&pa, 64, 2048, 64), 0);
    int ps = plain_sock4();
    struct ub__dev *a = NULL;
    if (via_gso) {
        /* One GSO super-datagram of 40 segments: with GRO it lands whole in staging. */
        a = open_spec("127.0.0.1:0?paths=1");
        struct ub__pkt *pk[40];
        for (uint32_t i = 0; i < 40; i++)
            pk[i] = mk(&pa, &b->local, i, 200, 0);
        send_all(a, pk, 40);
    } else {
        load_paths_0_7(ps, b);
    }
    struct rx_check c = {.n_expected = 40, .seen = calloc(40, 1)};
    uint32_t calls = 0;
    uint64_t end = now_ns() + 2 * UB_NS_PER_S;
    for (int it = 0; it < 1000 && c.got < 40 && now_ns() < end; it++) {
        struct ub__pkt *pk[64];
        int r = ub__dev_recv(b, pk, 64, &small);
        assert_true(r >= 0 && r <= 4);
        calls += r > 0;
        for (int i = 0; i < r; i++)
            check_pkt(&c, pk[i]);
        /* The pool is empty now: the next call stalls, and the device fd still polls readable. */
        if (r == 4 && c.got < 40) {
            struct ub__pkt *none;
            assert_int_equal(ub__dev_recv(b, &none, 1, &small), 0);
            struct epoll_event ev;
            assert_int_equal(epoll_wait(ub__dev_fd(b), &ev, 1, 0), 1);
        }
        for (int i = 0; i < r; i++)
            ub__pkt_free(pk[i]);
        if (r == 0)
            wait_fd(ub__dev_fd(b), WAIT_MS);
    }
    struct ub__udp_stats st = stats_of(b);
    assert_int_equal(c.got, 40);
    assert_int_equal(c.bad + c.dup, 0);
    assert_true(calls >= 10);
    assert_true(st.rx_pool_empty >= 9);
    assert_int_equal(st.rx_pkts, 40);
    if (via_gso && st.gro && a && stats_of(a).gso)
        assert_int_equal(st.rx_gro_msgs, 1);
    /* Drained: nothing left to report. */
    struct epoll_event ev;
    assert_int_equal(epoll_wait(ub__dev_fd(b), &ev, 1, 0), 0);
    free(c.seen);
    close(ps);
    if (a)
        ub__dev_close(a);
    ub__dev_close(b);
    assert_int_equal(small.avail, small.count);
    ub__pktpool_fini(&small);
    ub__pktpool_fini(&pa);
}

static void test_pool_empty(void **state)
{
    (void)state;
    pool_stall_run("127.0.0.1:0?paths=8&gro=0", false);
    pool_stall_run("127.0.0.1:0?paths=8&gro=1", false);
    pool_stall_run("127.0.0.1:0?paths=8&gro=1", true);
    pool_stall_run("127.0.0.1:0?paths=8&gro=0", true);
}

/* A datagram larger than the pool's buffers is dropped and counted, with and without GRO. */
static void test_truncated(void **state)
{
    (void)state;
    for (int gro = 0; gro < 2; gro++) {
        struct ub__dev *b = open_spec(gro ? "127.0.0.1:0?gro=1" : "127.0.0.1:0?gro=0");
        struct ub__pktpool pool;
        assert_int_equal(ub__pktpool_init(&pool, 16, 1024 + 64, 64), 0);
        int ps = plain_sock4();
        struct sockaddr_in to = sa4_of(&b->local);
        static uint8_t d[3000];
        uint32_t zero = 0;
        memcpy(d, &zero, 4);
        for (uint32_t j = 4; j < 1024; j++)
            d[j] = pat(0, j);
        assert_int_equal(sendto(ps, d, 3000, 0, (struct sockaddr *)&to, sizeof(to)), 3000);
        assert_int_equal(sendto(ps, d, 1024, 0, (struct sockaddr *)&to, sizeof(to)), 1024);
        struct rx_check c = {.n_expected = 1, .seen = calloc(1, 1)};
        drain_into(b, &pool, &c, 1);
        assert_int_equal(c.got, 1);
        struct ub__udp_stats st = stats_of(b);
        assert_int_equal(st.rx_truncated, 1);
        assert_int_equal(st.rx_pkts, 1);
        free(c.seen);
        close(ps);
        ub__dev_close(b);
        assert_int_equal(pool.avail, pool.count);
        ub__pktpool_fini(&pool);
    }
}

/* ---- spec parsing
 * --------------------------------------------------------------------------------- */

static void test_spec_parse(void **state)
{
    (void)state;
    struct ub__udp_cfg c;
    assert_int_equal(ub__udp_cfg_parse("127.0.0.1:4790?paths=8&mtu=4096&rcvbuf=4194304", &c), 0);
    assert_int_equal(c.local.family, UB_AF_INET);
    assert_int_equal(c.local.port, 4790);
    assert_memory_equal(c.local.ip, ((uint8_t[]){127, 0, 0, 1}), 4);
    assert_int_equal(c.num_paths, 8);
    assert_int_equal(c.mtu, 4096);
    assert_int_equal(c.rcvbuf, 4194304);
    assert_false(c.no_gso || c.no_gro || c.no_ecn || c.no_connect);

    assert_int_equal(ub__udp_cfg_parse("[::1]:0", &c), 0);
    assert_int_equal(c.local.family, UB_AF_INET6);
    assert_int_equal(c.local.port, 0);
    assert_int_equal(c.local.ip[15], 1);
    assert_int_equal(c.num_paths, 0);

    assert_int_equal(
        ub__udp_cfg_parse("udp:[fe80::1%7]:5?gso=0&gro=0&ecn=0&connect=0&dscp=46&sndbuf=1", &c), 0);
    assert_int_equal(c.local.scope_id, 7);
    assert_int_equal(c.local.port, 5);
    assert_true(c.no_gso && c.no_gro && c.no_ecn && c.no_connect);
    assert_int_equal(c.dscp, 46);
    assert_int_equal(c.sndbuf, 1);
    assert_int_equal(ub__udp_cfg_parse("[fe80::1%lo]:1", &c), 0);
    assert_true(c.local.scope_id > 0);

    static const char *const bad[] = {
        "",
        "127.0.0.1",
        "127.0.0.1:",
        "127.0.0.1:65536",
        "127.0.0.1:-1",
        "127.0.0.1:+5",
        "127.0.0.1:5x",
        "127.0.0.1:99999999999",
        "127.0.0.256:1",
        "127.0.0:1",
        "localhost:1",
        "::1:5",
        "[::1]",
        "[::1]5",
        "[::1:5",
        "[127.0.0.1]:5",
        "[fe80::1%]:5",
        "[fe80::1%no-such-if0]:5",
        "[fe80::1%0]:5",
        "127.0.0.1:1?",
        "127.0.0.1:1?paths",
        "127.0.0.1:1?paths=",
        "127.0.0.1:1?paths=0",
        "127.0.0.1:1?paths=65",
        "127.0.0.1:1?paths=8&",
        "127.0.0.1:1?&paths=8",
        "127.0.0.1:1?mtu=63",
        "127.0.0.1:1?mtu=65508",
        "127.0.0.1:1?rcvbuf=1073741825",
        "127.0.0.1:1?dscp=64",
        "127.0.0.1:1?connect=2",
        "127.0.0.1:1?gso=2",
        "127.0.0.1:1?color=blue",
        "127.0.0.1:1?paths=8?mtu=9000",
        "udp:",
        "tcp:127.0.0.1:1",
    };
    for (size_t i = 0; i < UB_ARRAY_SIZE(bad); i++) {
        memset(&c, 0xa5, sizeof(c));
        int rc = ub__udp_cfg_parse(bad[i], &c);
        if (rc != UB_EINVAL)
            print_message("accepted bad spec \"%s\"\n", bad[i]);
        assert_int_equal(rc, UB_EINVAL);
        assert_int_equal(c.local.family, UB_AF_NONE); /* zeroed on failure */
    }
    char longspec[UB_UDP_SPEC_MAX + 16];
    memset(longspec, '1', sizeof(longspec) - 1);
    longspec[sizeof(longspec) - 1] = '\0';
    assert_int_equal(ub__udp_cfg_parse(longspec, &c), UB_EINVAL);
    assert_int_equal(ub__udp_cfg_parse(NULL, &c), UB_EINVAL);
    assert_int_equal(ub__udp_cfg_parse("127.0.0.1:1", NULL), UB_EINVAL);
}

/* ---- open and send errors -----------------------------------------------------------------------
 */

static void test_open_errors(void **state)
{
    (void)state;
    int fds0 = count_fds();
    struct ub__udp_cfg cfg;
    struct ub__dev *d = NULL;

    /* A port in the range is taken: a specific error, nothing left open. */
    int ps = plain_sock4();
    uint16_t taken = plain_port(ps);
    char spec[96];
    snprintf(spec, sizeof(spec), "127.0.0.1:%u?paths=8", taken >= 7 ? taken - 7 : taken);
    assert_int_equal(ub__udp_cfg_parse(spec, &cfg), 0);
    assert_int_equal(ub__udp_open(&cfg, &d), UB_EBUSY);
    assert_null(d);
    close(ps);
    assert_int_equal(count_fds(), fds0);

    /* Fixed ports: path i is base + i (retry elsewhere if a range happens to be in use). */
    int rc = UB_EBUSY;
    uint16_t base = 0;
    for (uint32_t t = 0; t < 50 && rc == UB_EBUSY; t++) {
        base = (uint16_t)(20000 + ((uint32_t)getpid() * 7919u + t * 1031u) % 30000u);
        snprintf(spec, sizeof(spec), "127.0.0.1:%u?paths=8", base);
        assert_int_equal(ub__udp_cfg_parse(spec, &cfg), 0);
        rc = ub__udp_open(&cfg, &d);
    }
    assert_int_equal(rc, 0);
    for (uint32_t i = 0; i < 8; i++) {
        struct ub__addr a;
        assert_int_equal(ub__udp_path_addr(d, i, &a), 0);
        assert_int_equal(a.port, base + i);
    }
    assert_int_equal(d->local.port, base);
    /* The same range again: taken. */
    struct ub__dev *d2 = NULL;
    assert_int_equal(ub__udp_open(&cfg, &d2), UB_EBUSY);
    ub__dev_close(d);

    assert_int_equal(ub__udp_cfg_parse("127.0.0.1:65530?paths=8", &cfg), 0);
    assert_int_equal(ub__udp_open(&cfg, &d), UB_ERANGE);
    /* Not a local address (unless the host allows binding those). */
    FILE *nl = fopen("/proc/sys/net/ipv4/ip_nonlocal_bind", "r");
    int nonlocal = nl && fgetc(nl) == '1';
    if (nl)
        fclose(nl);
    assert_int_equal(ub__udp_cfg_parse("192.0.2.1:0", &cfg), 0);
    if (!nonlocal)
        assert_int_equal(ub__udp_open(&cfg, &d), UB_EINVAL);
    memset(&cfg, 0, sizeof(cfg));
    assert_int_equal(ub__udp_open(&cfg, &d), UB_EINVAL);
    assert_int_equal(ub__udp_open(NULL, &d), UB_EINVAL);
    assert_int_equal(count_fds(), fds0);
}

/* The MTU and paths a device takes unless told: bound to a loopback address (every peer on
 * this host, one link) a jumbo frame's and one path, otherwise an Ethernet frame's and eight;
 * explicit ones win. */
static void test_loopback_defaults(void **state)
{
    (void)state;
    static const struct {
        const char *spec;
        uint32_t mtu, paths;
    } c[] = {
        {"127.0.0.1:0", UB_UDP_LOOPBACK_MTU, 1}, {"127.0.0.2:0", UB_UDP_LOOPBACK_MTU, 1},
        {"0.0.0.0:0", UB_UDP_DEFAULT_MTU, 8},    {"127.0.0.1:0?mtu=1452&paths=3", 1452, 3},
        {"[::1]:0", UB_UDP_LOOPBACK_MTU, 1},     {"[::]:0", UB_UDP_DEFAULT_MTU, 8},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        struct ub__udp_cfg cfg;
        struct ub__dev *d = NULL;
        assert_int_equal(ub__udp_cfg_parse(c[i].spec, &cfg), 0);
        int rc = ub__udp_open(&cfg, &d);
        if (rc != 0 && c[i].spec[0] == '[')
            continue; /* no IPv6 here */
        assert_int_equal(rc, 0);
        assert_int_equal(ub__dev_mtu(d), c[i].mtu);
        assert_int_equal(ub__dev_num_paths(d), c[i].paths);
        ub__dev_close(d);
    }
}

static void test_send_errors(void **state)
{
    (void)state;
    struct ub__dev *a = open_spec("127.0.0.1:0?paths=4&mtu=1000");
    struct ub__dev *b = open_spec("127.0.0.1:0?paths=4&mtu=1000");
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 64, 2048, 64), 0);

    /* Larger than the MTU: refused, the caller keeps it and what follows. */
    struct ub__pkt *pk[3] = {mk(&pool, &b->local, 0, 1000, 0), mk(&pool, &b->local, 1, 1001, 1),
                             mk(&pool, &b->local, 2, 10, 2)};
    assert_int_equal(ub__dev_send(a, pk, 3), 1);
    assert_int_equal(ub__dev_send(a, pk + 1, 2), UB_ELENGTH);
    assert_int_equal(pk[1]->refcnt, 1);
    ub__pkt_free(pk[1]);
    ub__pkt_free(pk[2]);
    struct ub__udp_stats st = stats_of(a);
    assert_int_equal(st.tx_too_big, 2);
    assert_int_equal(st.tx_pkts, 1);

    /* Wrong address family (and a loop address): accepted, dropped, counted. */
    struct ub__addr v6 = {.family = UB_AF_INET6, .port = 9, .ip = {[15] = 1}}, lp;
    ub__addr_loop(&lp, 1);
    struct ub__pkt *q[3] = {mk(&pool, &v6, 3, 10, 0), mk(&pool, &lp, 4, 10, 0),
                            mk(&pool, &b->local, 5, 10, 0)};
    assert_int_equal(ub__dev_send(a, q, 3), 3);
    st = stats_of(a);
    assert_int_equal(st.tx_bad_addr, 2);
    assert_int_equal(st.tx_pkts, 2);
    /* The same one at a time (a send of one packet has its own path). */
    struct ub__pkt *one = mk(&pool, &v6, 7, 10, 0);
    assert_int_equal(ub__dev_send(a, &one, 1), 1);
    one = mk(&pool, &b->local, 8, 1001, 0);
    assert_int_equal(ub__dev_send(a, &one, 1), UB_ELENGTH);
    ub__pkt_free(one);
    st = stats_of(a);
    assert_int_equal(st.tx_bad_addr, 3);
    assert_int_equal(st.tx_too_big, 3);
    assert_int_equal(st.tx_pkts, 2);
    /* Port 0 is not a destination: the kernel refuses; the packet is dropped and classified. */
    struct ub__addr p0 = b->local;
    p0.port = 0;
    struct ub__pkt *z = mk(&pool, &p0, 6, 10, 0);
    assert_int_equal(ub__dev_send(a, &z, 1), 1);
    st = stats_of(a);
    assert_int_equal(st.tx_err_dropped, 1);
    assert_int_equal(st.tx_err_inval + st.tx_err_unreach + st.tx_err_other, 1);

    struct rx_check c = {.n_expected = 9, .seen = calloc(9, 1)};
    drain_into(b, &pool, &c, 2);
    assert_int_equal(c.got, 2);
    assert_true(c.seen[0] && c.seen[5]);
    free(c.seen);
    assert_int_equal(ub__dev_send(a, NULL, 0), 0);
    ub__dev_close(a);
    ub__dev_close(b);
    assert_int_equal(pool.avail, pool.count);
    ub__pktpool_fini(&pool);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec_parse),
        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_loopback_defaults),
        cmocka_unit_test(test_send_errors),
        cmocka_unit_test(test_e2e_ipv4),
        cmocka_unit_test(test_e2e_ipv6),
        cmocka_unit_test(test_gso_gro_matrix),
        cmocka_unit_test(test_gro_direct),
        cmocka_unit_test(test_zero_copy_gather),
        cmocka_unit_test(test_stamps_in_send_order),
        cmocka_unit_test(test_ecn),
        cmocka_unit_test(test_foreign_datagrams),
        cmocka_unit_test(test_full_rcvbuf),
        cmocka_unit_test(test_fairness),
        cmocka_unit_test(test_pool_empty),
        cmocka_unit_test(test_truncated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
