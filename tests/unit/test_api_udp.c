/*
 * The public API over the multipath UDP device, on loopback: every operation between two
 * contexts of this process, traffic over every path, malformed and foreign datagrams,
 * the packet ring, a tiny socket receive buffer, zero-copy sends with losses, a peer process killed
 * mid-transfer, a peer restarted on the same address.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "unit/api_net_util.h"
#include "api/api.h"
#include "dev/udp.h"
#include "pds/pds_int.h"
#include "unit/api_read_util.h"

#define URI "udp://127.0.0.1:0?paths=8"

static void pair_open_burst(struct node *a, struct node *b, const char *ua, const char *ub,
                            uint32_t burst)
{
    struct ub_context_attr ca = {.progress = UB_PROGRESS_MANUAL, .spray_burst = burst};
    assert_int_equal(node_open(a, ua, &ca), 0);
    assert_int_equal(node_open(b, ub, &ca), 0);
}

static void pair_open(struct node *a, struct node *b, const char *ua, const char *ub)
{
    pair_open_burst(a, b, ua, ub, 0);
}

/* Every operation from a to b, then a 1 MiB WRITE (its bytes seeded by seed), all checked. */
static void every_op_1mib(struct node *a, struct node *b, uint32_t seed)
{
    t_every_op_post(b);
    uint8_t d[NODE_DESC];
    node_export(b, d);
    struct peer p;
    node_import(a, d, &p);
    t_every_op(a, b, &p, b->mem);
    assert_int_equal(t_every_op_check(b, a), 0);
    struct ub_sge sg = {a->mem, 1u << 20, a->seg};
    t_fill(a->mem, 1u << 20, seed);
    struct ub_wr wr = t_rma(UB_OP_WRITE, &sg, p.ts, p.base);
    wr.user_ctx = 99;
    assert_int_equal(t_run(a, b, &wr), UB_CR_SUCCESS);
    assert_memory_equal(b->mem, a->mem, 1u << 20);
}

static void test_every_op(void **state)
{
    (void)state;
    struct node a, b;
    pair_open_burst(&a, &b, URI, URI, 1);
    /* The 1 MiB, sprayed packet by packet: every one of the 8 entropy values (source ports)
     * carried traffic. */
    every_op_1mib(&a, &b, 9);
    struct ub_context_stats st;
    assert_int_equal(ub_context_stats(a.ctx, &st), 0);
    assert_int_equal(st.num_paths, 8);
    for (uint32_t i = 0; i < 8; i++)
        assert_true(st.path_tx_pkts[i] > 0);
    /* The device's system calls: each moved one datagram or more; the 1 MiB left in GSO
     * runs of two packets or more; b acknowledged a's requests. */
    assert_true(st.udp_tx_calls > 0 && st.udp_tx_calls < st.tx_udp_pkts);
    assert_true(st.udp_gso_runs > 0 && st.udp_gso_pkts >= 2 * st.udp_gso_runs);
    assert_true(st.udp_gso_pkts <= st.tx_udp_pkts);
    assert_true(st.udp_rx_calls > 0 && st.udp_rx_calls <= st.rx_pkts);
    struct ub_context_stats sb;
    assert_int_equal(ub_context_stats(b.ctx, &sb), 0);
    assert_true(sb.acks_tx > 0);
    assert_true(sb.udp_gro_runs > 0 && sb.udp_gro_pkts >= 2 * sb.udp_gro_runs);
    char addr[64];
    assert_true(ub_context_addr(a.ctx, addr, sizeof(addr)) > 0);
    assert_true(strncmp(addr, "udp:127.0.0.1:", 14) == 0);
    node_close(&a);
    node_close(&b);
}

/* Every operation and 1 MiB over devices reading small datagrams from the packet ring (the
 * bulk data through the sockets), at uri; false where this process may not open one. */
static bool ring_pair_run(const char *uri)
{
    struct ub_context_attr ca = {.progress = UB_PROGRESS_MANUAL};
    struct node a, b;
    int rc = node_open(&a, uri, &ca);
    if (rc == UB_EACCESS)
        return false; /* no CAP_NET_RAW */
    assert_int_equal(rc, 0);
    assert_int_equal(node_open(&b, uri, &ca), 0);
    every_op_1mib(&a, &b, 13);
    struct ub__udp_stats sa, sb;
    assert_int_equal(ub__udp_stats(a.ctx->dev, &sa), 0);
    assert_int_equal(ub__udp_stats(b.ctx->dev, &sb), 0);
    assert_true(sa.ring && sb.ring);
    assert_true(sa.rx_ring > 0 && sb.rx_ring > 0); /* ACKs, responses, small requests */
    assert_true(sb.rx_ring_notes > 0);             /* the write's full datagrams */
    assert_true(sb.rx_pkts > sb.rx_ring);          /* ... read from the sockets */
    assert_int_equal(sa.rx_ring_bad + sb.rx_ring_bad, 0);
    node_close(&a);
    node_close(&b);
    return true;
}

/* READs of one response packet over PDS: answered when they execute, data and all. */
static void test_reads_one_packet(void **state)
{
    (void)state;
    t_reads_one_packet_on("udp://127.0.0.1:0?paths=2");
}

/* Bursts (docs/algorithms.md): a udp context sprays a GSO super-datagram's worth per path
 * choice unless told otherwise. What bursts do is test_pds_cc's. */
static void test_spray_bursts(void **state)
{
    (void)state;
    static const uint32_t asked[] = {0, 1, 4096};
    static const uint32_t got[] = {UB_UDP_GSO_MAX_BYTES, 1, 4096};
    for (int i = 0; i < 3; i++) {
        struct node a, b;
        pair_open_burst(&a, &b, URI, URI, asked[i]);
        assert_int_equal(a.ctx->eng.pds->cfg.spray_burst, got[i]);
        every_op_1mib(&a, &b, (uint32_t)i);
        node_close(&a);
        node_close(&b);
    }
}

static void test_ring(void **state)
{
    (void)state;
    if (!ring_pair_run("udp://127.0.0.1:0?paths=4&ring=1&mtu=9000"))
        skip();
    struct ub_context_attr ca = {.progress = UB_PROGRESS_MANUAL};
    struct node probe;
    if (node_open(&probe, "udp://[::1]:0?paths=1", &ca) == 0) { /* IPv6 loopback here */
        node_close(&probe);
        assert_true(ring_pair_run("udp://[::1]:0?paths=4&ring=1&mtu=9000"));
    }
}

static void test_ipv6(void **state)
{
    (void)state;
    struct node a, b;
    struct ub_context_attr ca = {.progress = UB_PROGRESS_MANUAL};
    if (node_open(&a, "udp://[::1]:0?paths=4", &ca)) {
        node_close(&a);
        skip(); /* no IPv6 loopback here */
    }
    assert_int_equal(node_open(&b, "udp://[::1]:0?paths=4", &ca), 0);
    t_every_op_local(&a, &b, NULL);
    node_close(&a);
    node_close(&b);
}

static void test_bad_uris(void **state)
{
    (void)state;
    struct ub_context_attr ca = {0};
    ub_context *c;
    assert_int_equal(ub_context_open("udp://127.0.0.1", &ca, &c), UB_EINVAL);
    assert_int_equal(ub_context_open("udp://127.0.0.1:0?paths=0x", &ca, &c), UB_EINVAL);
    assert_int_equal(ub_context_open("udp://127.0.0.1:0?bogus=1", &ca, &c), UB_EINVAL);
    assert_int_equal(ub_context_open("tcp://127.0.0.1:0", &ca, &c), UB_ENOTSUP);
    ca.progress = (enum ub_progress_mode)7;
    assert_int_equal(ub_context_open(URI, &ca, &c), UB_EINVAL);
    /* The same base port twice: busy. */
    ca.progress = UB_PROGRESS_MANUAL;
    assert_int_equal(ub_context_open(URI, &ca, &c), 0);
    char addr[64], uri[96];
    ub_context_addr(c, addr, sizeof(addr));
    snprintf(uri, sizeof(uri), "udp://%s?paths=1", addr + 4);
    ub_context *c2;
    assert_int_equal(ub_context_open(uri, &ca, &c2), UB_EBUSY);
    assert_int_equal(ub_context_close(c), 0);
}

/* A blast: 64 WRITEs of 16 KiB (a's first MiB onto b's) in flight at once, three times over;
 * every one succeeds and every byte lands. */
static void blast(struct node *a, struct node *b, const struct peer *p)
{
    for (uint32_t round = 0; round < 3; round++) {
        for (uint32_t i = 0; i < 64; i++) {
            struct ub_sge sg = {a->mem + i * 16384u, 16384, a->seg};
            struct ub_wr wr = t_rma(UB_OP_WRITE, &sg, p->ts, p->base + i * 16384u);
            wr.user_ctx = i;
            assert_int_equal(ub_post_jetty_send(a->jetty, &wr, NULL), 0);
        }
        for (uint32_t i = 0; i < 64; i++) {
            struct ub_cr cr;
            assert_int_equal(node_wait(a, b, &cr), 1);
            assert_int_equal(cr.status, UB_CR_SUCCESS);
        }
    }
    assert_memory_equal(b->mem, a->mem, 1u << 20);
}

/*
 * Congestion control and load balancing by name (ub_context_attr.cc, .lb): unknown or
 * overlong names refuse the open; known ones reach every PDC (here DCQCN and the bitmap
 * balancer, named from a buffer overwritten after the open: the context keeps a copy), and
 * traffic runs over them.
 */
static void test_cc_lb_attrs(void **state)
{
    (void)state;
    struct ub_context_attr ca = {.progress = UB_PROGRESS_MANUAL};
    ub_context *c;
    ca.cc = "cubic";
    assert_int_equal(ub_context_open(URI, &ca, &c), UB_EINVAL);
    ca.cc = "dcqcn+rccc+rccc";
    assert_int_equal(ub_context_open(URI, &ca, &c), UB_EINVAL);
    ca.cc = "an-algorithm-name-longer-than-any";
    assert_int_equal(ub_context_open(URI, &ca, &c), UB_EINVAL);
    ca.cc = NULL;
    ca.lb = "ecmp";
    assert_int_equal(ub_context_open(URI, &ca, &c), UB_EINVAL);

    char cc[16] = "dcqcn", lb[16] = "bitmap";
    ca.cc = cc;
    ca.lb = lb;
    struct node a, b;
    assert_int_equal(node_open(&a, URI, &ca), 0);
    assert_int_equal(node_open(&b, URI, &ca), 0);
    memset(cc, 'x', sizeof(cc) - 1);
    memset(lb, 'x', sizeof(lb) - 1);
    assert_string_equal(a.ctx->attr.cc, "dcqcn");
    uint8_t d[NODE_DESC];
    node_export(&b, d);
    struct peer p;
    node_import(&a, d, &p);
    blast(&a, &b, &p);
    bool collision;
    const struct ub__pds_ipdc *ipdc =
        ub__pds_ipdc_find(a.ctx->eng.pds, &b.ctx->addr, UB_PDS_RUD, &collision);
    assert_non_null(ipdc);
    assert_non_null(ipdc->ccx);
    assert_ptr_equal(ipdc->ccx->cc.algo, &ub__cc_dcqcn);
    assert_ptr_equal(ipdc->lb.algo, &ub__lb_bitmap);
    node_close(&a);
    node_close(&b);
}

/* The UDP port of ctx's path 0, from its address string. */
static uint16_t ctx_port(ub_context *ctx)
{
    char addr[64];
    ub_context_addr(ctx, addr, sizeof(addr));
    const char *colon = strrchr(addr, ':');
    return (uint16_t)atoi(colon + 1);
}

static void test_malformed_foreign(void **state)
{
    (void)state;
    struct node a, b;
    pair_open(&a, &b, URI, URI);
    struct ub_context_stats before, after;
    assert_int_equal(ub_context_stats(b.ctx, &before), 0);
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    assert_true(s >= 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(ctx_port(b.ctx))};
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    uint8_t junk[1500];
    uint32_t sent = 0;
    for (uint32_t i = 0; i < 200; i++) {
        size_t len = 1 + (i * 37) % sizeof(junk);
        t_fill(junk, len, i);
        if (i % 2) { /* "foreign": a DNS query header, a QUIC long header, an empty-ish packet */
            static const uint8_t dns[] = {0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0};
            memcpy(junk, dns, sizeof(dns) < len ? sizeof(dns) : len);
        }
        if (sendto(s, junk, len, 0, (struct sockaddr *)&to, sizeof(to)) == (ssize_t)len)
            sent++;
    }
    close(s);
    /* Drive b until all of them were counted (bounded). */
    uint64_t end = t_now() + N_WAIT_NS;
    do {
        ub_progress(b.ctx);
        ub_context_stats(b.ctx, &after);
    } while ((after.rx_pkts + after.dev_rx_drops) - (before.rx_pkts + before.dev_rx_drops) < sent &&
             t_now() < end);
    /* Each one counted once: too large for a packet buffer (device), or dropped by the engine. */
    uint64_t rx = after.rx_pkts - before.rx_pkts;
    assert_int_equal(rx + (after.dev_rx_drops - before.dev_rx_drops), sent);
    assert_int_equal((after.rx_malformed + after.rx_unsupported) -
                         (before.rx_malformed + before.rx_unsupported),
                     rx);
    assert_true(rx > sent / 2);
    /* Nothing else happened: b still works. */
    t_every_op_local(&a, &b, NULL);
    node_close(&a);
    node_close(&b);
}

static void test_tiny_rcvbuf(void **state)
{
    (void)state;
    struct node a, b;
    pair_open(&a, &b, URI, "udp://127.0.0.1:0?paths=8&rcvbuf=4096&gro=0");
    uint8_t d[NODE_DESC];
    node_export(&b, d);
    struct peer p;
    node_import(&a, d, &p);
    t_fill(a.mem, 1u << 20, 5);
    blast(&a, &b, &p);
    struct ub_context_stats sa, sb;
    ub_context_stats(a.ctx, &sa);
    ub_context_stats(b.ctx, &sb);
    print_message("tiny rcvbuf: %llu kernel drops at the receiver, %llu retransmissions\n",
                  (unsigned long long)sb.dev_rx_drops, (unsigned long long)sa.retransmits);
    assert_true(sb.dev_rx_drops > 0 || sa.retransmits > 0);
    node_close(&a);
    node_close(&b);
}

/* a learns b (p), then WRITEs 1 MiB of pattern seed to it, which lands whole. */
static void write_1m(struct node *a, struct node *b, struct peer *p, uint32_t seed)
{
    uint8_t d[NODE_DESC];
    node_export(b, d);
    node_import(a, d, p);
    t_fill(a->mem, 1u << 20, seed);
    struct ub_sge sg = {a->mem, 1u << 20, a->seg};
    struct ub_wr wr = t_rma(UB_OP_WRITE, &sg, p->ts, p->base);
    assert_int_equal(t_run(a, b, &wr), UB_CR_SUCCESS);
    assert_memory_equal(b->mem, a->mem, 1u << 20);
}

/*
 * Zero-copy send over the real device (9000-byte MTU: every full packet's payload is
 * attached, not copied): a 1 MiB WRITE, then a blast of 16 KiB WRITEs into a small receive
 * buffer, so that attached packets are lost and sent again from the source buffer. Every
 * byte lands.
 */
static void test_zero_copy(void **state)
{
    (void)state;
    struct node a, b;
    pair_open(&a, &b, "udp://127.0.0.1:0?paths=2&mtu=9000",
              "udp://127.0.0.1:0?paths=2&mtu=9000&rcvbuf=32768&gro=0");
    assert_int_equal(a.ctx->eng.cfg.zc_min, 2048); /* the udp device gathers */
    struct peer p;
    write_1m(&a, &b, &p, 11);

    t_fill(a.mem, 1u << 20, 12);
    blast(&a, &b, &p);
    struct ub_context_stats sa, sb;
    ub_context_stats(a.ctx, &sa);
    ub_context_stats(b.ctx, &sb);
    print_message("zero copy: %llu kernel drops at the receiver, %llu retransmissions, %llu "
                  "flattened at completion\n",
                  (unsigned long long)sb.dev_rx_drops, (unsigned long long)sa.retransmits,
                  (unsigned long long)a.ctx->eng.pds->st.zc_flattened);
    assert_true(sb.dev_rx_drops > 0 || sa.retransmits > 0);
    node_close(&a);
    node_close(&b);
}

/*
 * An MTU beyond the largest datagram (a request of 16 383 payload bytes): the context takes
 * the largest datagram as its MTU (pool buffers no larger), and a 1 MiB WRITE lands whole.
 */
static void test_mtu_beyond_largest_datagram(void **state)
{
    (void)state;
    struct node a, b;
    pair_open(&a, &b, "udp://127.0.0.1:0?paths=1&mtu=65000", "udp://127.0.0.1:0?paths=1&mtu=65000");
    assert_int_equal(a.ctx->eng.cfg.mtu, UB_SES_MAX_DGRAM);
    assert_int_equal(UB_SES_MAX_DGRAM, 16467);
    assert_int_equal(a.ctx->eng.pool.buf_size, UB_SES_MAX_DGRAM + UB_ENGINE_HEADROOM);
    assert_int_equal(a.ctx->ses.max_payload, UB_SES_LEN14_MAX);
    struct peer p;
    write_1m(&a, &b, &p, 21);
    node_close(&a);
    node_close(&b);
}

/* A target process SIGKILLed mid-transfer: the initiator's requests fail within the bound. */
static void test_peer_killed(void **state)
{
    (void)state;
    /* 1 s: the transport fails a peer only after it has been silent that long, so a live
     * child that a loaded machine stalls for a while is not given up on. */
    t_peer_killed(URI, 65536, 1000, 6000);
}

/* Forks a target on exactly `uri`, retrying while the old incarnation's port is still busy. */
static pid_t fork_target_retry(const char *uri, ub_bootstrap **bs, uint8_t *d)
{
    return t_fork_target(uri, false, bs, d);
}

static void test_peer_restarted(void **state)
{
    (void)state;
    /* Find a free port: open and close a context there. */
    struct ub_context_attr ca = {.progress = UB_PROGRESS_MANUAL};
    ub_context *probe;
    assert_int_equal(ub_context_open("udp://127.0.0.1:0?paths=1", &ca, &probe), 0);
    char uri[96];
    snprintf(uri, sizeof(uri), "udp://127.0.0.1:%u?paths=1", ctx_port(probe));
    assert_int_equal(ub_context_close(probe), 0);

    ub_bootstrap *bs1, *bs2;
    uint8_t d1[NODE_DESC], d2[NODE_DESC];
    pid_t p1 = fork_target_retry(uri, &bs1, d1);
    struct node a;
    ca.timeout_ms = 500;
    assert_int_equal(node_open(&a, URI, &ca), 0);
    struct peer old, neu;
    node_import(&a, d1, &old);
    t_fill(a.mem, 65536, 7);
    struct ub_sge sg = {a.mem, 65536, a.seg};
    struct ub_wr wr = t_rma(UB_OP_WRITE, &sg, old.ts, old.base);
    wr.user_ctx = 1;
    assert_int_equal(t_run(&a, NULL, &wr), UB_CR_SUCCESS);
    /* The old incarnation dies; a new one takes the same address. */
    kill(p1, SIGKILL);
    assert_int_equal(t_reap(p1, 2000), 128 + SIGKILL);
    ub_bootstrap_close(bs1);
    pid_t p2 = fork_target_retry(uri, &bs2, d2);
    /* Work aimed at the old incarnation fails cleanly; it touches nothing of the new one. */
    wr.user_ctx = 2;
    int st = t_run(&a, NULL, &wr);
    print_message("write to the old incarnation: %s\n",
                  st < 0 ? "timeout" : ub_cr_status_str((enum ub_cr_status)st));
    assert_true(st > 0); /* completed, and not with success */
    /* New work to the new incarnation succeeds, and reads back what it wrote. */
    node_import(&a, d2, &neu);
    wr = t_rma(UB_OP_WRITE, &sg, neu.ts, neu.base + 65536);
    wr.user_ctx = 3;
    assert_int_equal(t_run(&a, NULL, &wr), UB_CR_SUCCESS);
    struct ub_sge rs = {a.mem + 131072, 131072, a.seg};
    wr = t_rma(UB_OP_READ, &rs, neu.ts, neu.base);
    wr.user_ctx = 4;
    assert_int_equal(t_run(&a, NULL, &wr), UB_CR_SUCCESS);
    uint8_t zero[65536];
    memset(zero, 0, sizeof(zero));
    assert_memory_equal(a.mem + 131072, zero, 65536);          /* the old write never landed */
    assert_memory_equal(a.mem + 131072 + 65536, a.mem, 65536); /* the new one did */
    assert_int_equal(ub_bootstrap_send(bs2, "x", 1, N_BOOT_MS), 0);
    assert_int_equal(t_reap(p2, 5000), 0);
    ub_bootstrap_close(bs2);
    node_close(&a);
}

/* A forked target over udp with automatic progress: every operation across processes. */
static void test_across_processes(void **state)
{
    (void)state;
    ub_bootstrap *bs;
    uint8_t d[NODE_DESC];
    pid_t pid = t_fork_target(URI, true, &bs, d);
    struct node a;
    struct ub_context_attr ca = {.progress = UB_PROGRESS_MANUAL};
    assert_int_equal(node_open(&a, URI, &ca), 0);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_op),
        cmocka_unit_test(test_reads_one_packet),
        cmocka_unit_test(test_spray_bursts),
        cmocka_unit_test(test_ring),
        cmocka_unit_test(test_ipv6),
        cmocka_unit_test(test_bad_uris),
        cmocka_unit_test(test_cc_lb_attrs),
        cmocka_unit_test(test_malformed_foreign),
        cmocka_unit_test(test_tiny_rcvbuf),
        cmocka_unit_test(test_zero_copy),
        cmocka_unit_test(test_mtu_beyond_largest_datagram),
        cmocka_unit_test(test_across_processes),
        cmocka_unit_test(test_peer_killed),
        cmocka_unit_test(test_peer_restarted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
