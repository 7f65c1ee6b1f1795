/*
 * The udp device's receive modes and its connected socket, over loopback (127.0.0.1 only):
 * single reads after small batches and back to batches in a burst, with one socket and
 * several; the socket connected to the first peer (both directions, a second peer, a batch
 * split between the two, a peer gone away); the sockets joining the epoll set only when fd()
 * is first asked.
 *
 * Every wait is epoll_wait on a device fd with a timeout inside a loop bounded in iterations
 * and in time; nothing sleeps to synchronise.
 */
#include "unit/udp_util.h"

/*
 * Receive mode: after a batch that held at most one datagram a socket is read one datagram
 * per call (recvmsg); two single reads in a row that both found one (a burst) switch back to
 * batches. A device of several sockets whose datagrams all arrive on socket 0 behaves alike
 * (test_rx_paths: what changes when the others are busy too).
 */
static void rx_mode_run(const char *spec)
{
    struct ub__dev *b = open_spec(spec);
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 128, 2048, 64), 0);
    int ps = plain_sock4();
    struct sockaddr_in to = sa4_of(&b->local);
    uint8_t d[64] = {0};
    struct ub__pkt *got[64];
    /* Loopback delivers within sendto: every datagram is queued when a receive runs. */
#define SEND(n)                                                                       \
    for (int i_ = 0; i_ < (n); i_++)                                                  \
    assert_int_equal(sendto(ps, d, sizeof(d), 0, (struct sockaddr *)&to, sizeof(to)), \
                     (ssize_t)sizeof(d))
#define RECV(expect)                              \
    do {                                          \
        int r_ = ub__dev_recv(b, got, 64, &pool); \
        assert_int_equal(r_, (expect));           \
        for (int i_ = 0; i_ < r_; i_++)           \
            ub__pkt_free(got[i_]);                \
    } while (0)

    SEND(1);
    RECV(1); /* a batch that held one: single from now on */
    assert_int_equal(stats_of(b).rx_single, 0);
    RECV(0);
    for (int i = 0; i < 5; i++) { /* a ping-pong: one datagram, then an empty poll */
        SEND(1);
        RECV(1);
        RECV(0);
    }
    assert_int_equal(stats_of(b).rx_single, 5);
    /* This pool's buffers (1 984 bytes of room) cannot take a direct GRO train: single reads
     * still land straight in them; only the first batch went through staging. */
    assert_int_equal(stats_of(b).rx_copied, stats_of(b).gro ? 1 : 0);
    SEND(20); /* a burst: two single reads, then batches take the rest in one call */
    RECV(1);
    RECV(1);
    RECV(18);
    assert_int_equal(stats_of(b).rx_single, 7);
    RECV(0); /* an empty batch: single again */
    SEND(1);
    RECV(1);
    struct ub__udp_stats st = stats_of(b);
    assert_int_equal(st.rx_single, 8);
    assert_int_equal(st.rx_pkts, 1 + 5 + 20 + 1);
    if (st.gro) {
        /* Trains (GSO from a device) read singly: larger than a pool buffer (it runs on into
         * staging) and smaller; either way split into its packets in the one call, the
         * first left where it landed (the others copied out of staging), the last shorter.
         * Of a train of full-size segments (a pool buffer's room each) the first two stay
         * where they landed, in the receive's two buffers, and only the rest is copied. */
        struct ub__dev *a = open_spec("127.0.0.1:0?paths=1&gso=1");
        uint32_t room = pool_buf_room(&pool);
        const struct {
            uint32_t len, n, copied;
        } trains[4] = {{1000, 4, 3}, {100, 4, 3}, {room, 4, 2}, {room, 2, 0}};
        for (int t = 0; t < 4; t++) {
            uint32_t len = trains[t].len, n = trains[t].n;
            uint64_t copied = stats_of(b).rx_copied, direct = stats_of(b).rx_direct;
            struct ub__pkt *tr[4];
            for (uint32_t i = 0; i < n; i++)
                tr[i] = mk(&pool, &b->local, i, i + 1 < n ? len : len / 2, 0);
            assert_int_equal(ub__dev_send(a, tr, n), (int)n);
            assert_int_equal(ub__dev_recv(b, got, 64, &pool), (int)n);
            for (uint32_t i = 0; i < n; i++) {
                uint32_t seq;
                memcpy(&seq, got[i]->data, 4);
                assert_int_equal(seq, i);
                assert_int_equal(got[i]->len, i + 1 < n ? len : len / 2);
                for (uint32_t k = 4; k < got[i]->len; k++)
                    assert_int_equal(got[i]->data[k], pat(i, k));
                ub__pkt_free(got[i]);
            }
            RECV(0);
            if (stats_of(a).gso) {
                assert_int_equal(stats_of(b).rx_copied - copied, trains[t].copied);
                assert_int_equal(stats_of(b).rx_direct - direct, len == room ? 2 : 0);
            }
        }
        st = stats_of(b);
        assert_int_equal(st.rx_single, 12);
        assert_int_equal(st.rx_gro_msgs, stats_of(a).gso ? 4 : 0);
        assert_int_equal(st.rx_gro_segs, stats_of(a).gso ? 14 : 0);
        assert_int_equal(st.rx_truncated, 0);
        ub__dev_close(a);
    }
#undef SEND
#undef RECV
    close(ps);
    ub__dev_close(b);
    assert_int_equal(pool.avail, pool.count);
    ub__pktpool_fini(&pool);
}

static void test_rx_mode(void **state)
{
    (void)state;
    rx_mode_run("127.0.0.1:0?paths=1&gro=0");
    rx_mode_run("127.0.0.1:0?paths=1&gro=1");
    rx_mode_run("127.0.0.1:0?paths=4&gro=0");
    rx_mode_run("127.0.0.1:0?paths=4&gro=1");
}

/*
 * Several sockets. While epoll finds only socket 0 readable (a peer's requests, and the ACKs
 * of ours, go there), socket 0 is read without asking epoll but every RX_EPOLL_EVERY-th
 * receive, in single mode: a ping-pong costs one system call per datagram. A datagram on
 * another path is found within RX_EPOLL_EVERY receives and ends that; with two sockets
 * readable, receives take batches from both.
 */
static void rx_paths_run(const char *spec)
{
    struct ub__dev *b = open_spec(spec);
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 128, 2048, 64), 0);
    int ps = plain_sock4();
    struct ub__addr a2;
    assert_int_equal(ub__udp_path_addr(b, 2, &a2), 0);
    struct sockaddr_in to0 = sa4_of(&b->local), to2 = sa4_of(&a2);
    uint8_t d[64] = {0};
    struct ub__pkt *got[64];
#define SEND(to, n)                                                                     \
    for (int i_ = 0; i_ < (n); i_++)                                                    \
    assert_int_equal(sendto(ps, d, sizeof(d), 0, (struct sockaddr *)&(to), sizeof(to)), \
                     (ssize_t)sizeof(d))
    SEND(to0, 1);
    assert_int_equal(ub__dev_recv(b, got, 64, &pool), 1); /* epoll: socket 0 alone */
    ub__pkt_free(got[0]);
    uint64_t polls = stats_of(b).rx_polls;
    assert_int_equal(polls, 1);
    for (int i = 0; i < 4 * RX_EPOLL_EVERY; i++) { /* a ping-pong's receives */
        SEND(to0, 1);
        assert_int_equal(ub__dev_recv(b, got, 64, &pool), 1);
        assert_int_equal(got[0]->path, 0);
        ub__pkt_free(got[0]);
        assert_int_equal(ub__dev_recv(b, got, 64, &pool), 0);
    }
    struct ub__udp_stats st = stats_of(b);
    assert_int_equal(st.rx_polls - polls, 8); /* 64 receives, each eighth asks epoll */
    assert_int_equal(st.rx_single, 4 * RX_EPOLL_EVERY);

    SEND(to2, 1); /* path 2: found at the next epoll */
    int k = 0, r = 0;
    while (r == 0 && k < RX_EPOLL_EVERY) {
        r = ub__dev_recv(b, got, 64, &pool);
        k++;
    }
    assert_int_equal(r, 1);
    assert_int_equal(got[0]->path, 2);
    ub__pkt_free(got[0]);
    polls = stats_of(b).rx_polls;
    assert_int_equal(ub__dev_recv(b, got, 64, &pool), 0); /* epoll again: the others may talk */
    assert_int_equal(stats_of(b).rx_polls, polls + 1);

    SEND(to0, 3); /* two sockets readable: batches from both in one call */
    SEND(to2, 3);
    uint64_t single = stats_of(b).rx_single;
    assert_int_equal(ub__dev_recv(b, got, 64, &pool), 6);
    for (int i = 0; i < 6; i++)
        ub__pkt_free(got[i]);
    assert_int_equal(stats_of(b).rx_single, single);
#undef SEND
    close(ps);
    ub__dev_close(b);
    assert_int_equal(pool.avail, pool.count);
    ub__pktpool_fini(&pool);
}

static void test_rx_paths(void **state)
{
    (void)state;
    rx_paths_run("127.0.0.1:0?paths=4&gro=0");
    rx_paths_run("127.0.0.1:0?paths=4&gro=1");
}

/* ---- a socket connected to the first peer (one path) ------------------------------ */

/* The next packet d receives, asking at most 4 x RX_UNCONN_EVERY times (loopback delivers
 * within the send: no waiting). */
static struct ub__pkt *recv_next(struct ub__dev *d, struct ub__pktpool *pool)
{
    for (int it = 0; it < 32; it++) {
        struct ub__pkt *p = NULL;
        int r = ub__dev_recv(d, &p, 1, pool);
        assert_true(r >= 0);
        if (r == 1)
            return p;
    }
    fail_msg("nothing received");
    return NULL;
}

static void send_lone_to(struct ub__dev *from, struct ub__pktpool *pool, const struct ub__addr *to,
                         uint32_t seq)
{
    struct ub__pkt *p = mk(pool, to, seq, 64, 0);
    assert_int_equal(ub__dev_send(from, &p, 1), 1);
}

static void send_lone(struct ub__dev *from, struct ub__pktpool *pool, const struct ub__dev *to,
                      uint32_t seq)
{
    send_lone_to(from, pool, &to->local, seq);
}

/* Receives one packet and checks it came from `from` and arrived on d's socket of that path. */
static void expect_from_on(struct ub__dev *d, struct ub__pktpool *pool, const struct ub__dev *from,
                           uint32_t seq, uint16_t path)
{
    struct ub__pkt *p = recv_next(d, pool);
    uint32_t got;
    memcpy(&got, p->data, 4);
    assert_int_equal(got, seq);
    assert_int_equal(p->addr.family, from->local.family);
    assert_int_equal(p->addr.port, from->local.port);
    assert_memory_equal(p->addr.ip, from->local.ip, from->local.family == UB_AF_INET ? 4 : 16);
    assert_int_equal(p->path, path);
    ub__pkt_free(p);
}

static void expect_from(struct ub__dev *d, struct ub__pktpool *pool, const struct ub__dev *from,
                        uint32_t seq)
{
    expect_from_on(d, pool, from, seq, 0);
}

/* from sends seq to `to` marked CE; d (= to) receives it: the ECN codepoint it read. */
static uint8_t ce_through(struct ub__dev *from, struct ub__pktpool *pool, struct ub__dev *to,
                          uint32_t seq)
{
    struct ub__pkt *p = mk(pool, &to->local, seq, 64, 0);
    p->ecn = 3;
    assert_int_equal(ub__dev_send(from, &p, 1), 1);
    p = recv_next(to, pool);
    uint32_t got;
    memcpy(&got, p->data, 4);
    assert_int_equal(got, seq);
    uint8_t ecn = p->ecn;
    ub__pkt_free(p);
    return ecn;
}

static void connected_run(const char *spec)
{
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 64, 2048, 64), 0);
    struct ub__dev *a = open_spec(spec), *b = open_spec(spec), *c = open_spec(spec);

    send_lone(a, &pool, b, 1); /* a's first peer: a connects to b */
    struct ub__udp_stats sa = stats_of(a);
    assert_true(sa.connected);
    assert_int_equal(sa.peer.port, b->local.port);
    assert_int_equal(sa.tx_connected, 1);
    expect_from(b, &pool, a, 1); /* the source port is the path's own */
    assert_int_equal(stats_of(b).rx_connected, 0);

    send_lone(b, &pool, a, 2); /* b connects back; a reads it on its connected socket */
    assert_int_equal(stats_of(b).tx_connected, 1);
    expect_from(a, &pool, b, 2);
    assert_int_equal(stats_of(a).rx_connected, 1);

    /* A loopback peer: the connected socket does not read TOS (a CE mark set by the sender
     * itself goes unseen), the path socket does (c's). */
    assert_true(stats_of(a).conn_tos_off);
    assert_int_equal(ce_through(b, &pool, a, 5), 0);
    assert_int_equal(stats_of(a).rx_connected, 2);
    assert_int_equal(ce_through(c, &pool, a, 6), 3);
    assert_int_equal(stats_of(a).rx_connected, 2);

    /* Another peer still reaches a (on the path socket, read every RX_UNCONN_EVERY-th
     * time), and a answers it unconnected from the same port. */
    send_lone(c, &pool, a, 3);
    expect_from(a, &pool, c, 3);
    send_lone(a, &pool, c, 4);
    expect_from(c, &pool, a, 4);
    sa = stats_of(a);
    assert_int_equal(sa.rx_connected, 2);
    assert_int_equal(sa.tx_connected, 1);
    assert_int_equal(sa.peer.port, b->local.port);
    assert_int_equal(stats_of(c).rx_connected, 1); /* c connected to a first */

    /* A batch: the connected peer's packets go through the connected socket (a GSO run among
     * them too: no address per message), the others' through the path socket, each peer's in
     * order and from the one port. */
    struct ub__pkt *batch[6];
    for (uint32_t i = 0; i < 6; i++)
        batch[i] = mk(&pool, i == 2 || i == 3 ? &c->local : &b->local, 10 + i, 64, 0);
    assert_int_equal(ub__dev_send(a, batch, 6), 6);
    assert_int_equal(stats_of(a).tx_connected, 1 + 4);
    expect_from(b, &pool, a, 10);
    expect_from(b, &pool, a, 11);
    expect_from(b, &pool, a, 14);
    expect_from(b, &pool, a, 15);
    expect_from(c, &pool, a, 12);
    expect_from(c, &pool, a, 13);

    /* The peer goes away: the port-unreachable error lands on the connected socket, a send
     * or a receive reports it (counted), and the device goes on serving c. */
    struct ub__addr gone = b->local;
    ub__dev_close(b);
    for (uint32_t i = 0; i < 2; i++) {
        struct ub__pkt *p = mk(&pool, &gone, 20 + i, 64, 0);
        assert_int_equal(ub__dev_send(a, &p, 1), 1);
    }
    struct ub__pkt *none = NULL;
    assert_int_equal(ub__dev_recv(a, &none, 1, &pool), 0);
    sa = stats_of(a);
    assert_true(sa.tx_err_unreach + sa.rx_errors >= 1);
    send_lone(c, &pool, a, 22);
    expect_from(a, &pool, c, 22);

    /* c is a's peer now: 64 datagrams in a row from it (3, 6 and 22 were the first three)
     * retire the socket connected to b, and a's next lone packet connects to c. */
    for (uint32_t i = 3; i < 64; i++) {
        assert_true(stats_of(a).connected);
        send_lone(c, &pool, a, 100 + i);
        expect_from(a, &pool, c, 100 + i);
    }
    sa = stats_of(a);
    assert_false(sa.connected);
    assert_int_equal(sa.conn_retired, 1);
    send_lone(a, &pool, c, 200);
    sa = stats_of(a);
    assert_true(sa.connected);
    assert_int_equal(sa.peer.port, c->local.port);
    expect_from(c, &pool, a, 200);
    send_lone(c, &pool, a, 201);
    expect_from(a, &pool, c, 201);
    assert_int_equal(stats_of(a).rx_connected, 3);

    ub__dev_close(a);
    ub__dev_close(c);
    assert_int_equal(pool.avail, pool.count);
    ub__pktpool_fini(&pool);
}

static void test_connected(void **state)
{
    (void)state;
    connected_run("127.0.0.1:0?paths=1&gro=0");
    connected_run("127.0.0.1:0?paths=1&gro=1");
    if (have_ipv6_loopback())
        connected_run("[::1]:0?paths=1");

    /* Not with connect=0, nor with several paths. */
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 16, 2048, 64), 0);
    struct ub__dev *a = open_spec("127.0.0.1:0?paths=1&connect=0");
    struct ub__dev *m = open_spec("127.0.0.1:0?paths=2");
    send_lone(a, &pool, m, 1);
    send_lone(m, &pool, a, 2);
    assert_false(stats_of(a).connected);
    assert_false(stats_of(m).connected);
    assert_int_equal(stats_of(a).tx_connected + stats_of(m).tx_connected, 0);
    expect_from(a, &pool, m, 2);
    ub__dev_close(a);
    ub__dev_close(m);
    assert_int_equal(pool.avail, pool.count);
    ub__pktpool_fini(&pool);
}

/*
 * The sockets of a one-path device join its epoll set only when fd() is first asked (a busy
 * poller never asks, and every datagram into a socket in an epoll set calls into epoll), and
 * then nothing is missed: what arrived before shows readable at once, on the path socket and
 * on the connected one alike. So do the sockets of a device of up to RX_POLL_MAX (8) paths,
 * whose receive asks poll(2) until then; more paths join at open (their receive asks epoll).
 */
static void test_epoll_lazy(void **state)
{
    (void)state;
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 16, 2048, 64), 0);
    /* Without GRO: its staging eventfd, also in the set, may show readable on its own. */
    struct ub__dev *a = open_spec("127.0.0.1:0?paths=1&gro=0");
    struct ub__dev *b = open_spec("127.0.0.1:0?paths=1&gro=0");
    send_lone(a, &pool, b, 1); /* a connects to b, b's path socket holds 1 */
    expect_from(b, &pool, a, 1);
    send_lone(b, &pool, a, 2); /* b connects to a: 2 waits in a's connected socket */
    assert_true(stats_of(a).connected);
    assert_false(stats_of(a).epoll_live);
    assert_false(stats_of(b).epoll_live);
    struct epoll_event ev;
    int fd = ub__dev_fd(a);
    assert_true(fd >= 0);
    assert_true(stats_of(a).epoll_live);
    assert_int_equal(epoll_wait(fd, &ev, 1, 0), 1); /* 2, which came before the fd */
    assert_int_equal(ub__dev_fd(a), fd);
    expect_from(a, &pool, b, 2);
    assert_int_equal(epoll_wait(fd, &ev, 1, 0), 0);
    send_lone(b, &pool, a, 3);
    assert_int_equal(epoll_wait(fd, &ev, 1, 100), 1);
    expect_from(a, &pool, b, 3);
    /* A third peer's datagram arrives on the path socket, also in the set. */
    struct ub__dev *c = open_spec("127.0.0.1:0?paths=1&gro=0");
    send_lone(c, &pool, a, 4);
    assert_int_equal(epoll_wait(fd, &ev, 1, 100), 1);
    expect_from(a, &pool, c, 4);

    /* Two paths: a datagram on path 1 is found by poll, then, once the fd was asked for,
     * by epoll. More than eight paths: in the set from the start. */
    struct ub__dev *m = open_spec("127.0.0.1:0?paths=2&gro=0");
    assert_false(stats_of(m).epoll_live);
    struct ub__addr m1;
    assert_int_equal(ub__udp_path_addr(m, 1, &m1), 0);
    send_lone_to(c, &pool, &m1, 5);
    expect_from_on(m, &pool, c, 5, 1);
    send_lone_to(c, &pool, &m1, 6);
    fd = ub__dev_fd(m);
    assert_true(stats_of(m).epoll_live);
    assert_int_equal(epoll_wait(fd, &ev, 1, 100), 1);
    expect_from_on(m, &pool, c, 6, 1);
    struct ub__dev *w = open_spec("127.0.0.1:0?paths=9");
    assert_true(stats_of(w).epoll_live);
    ub__dev_close(w);
    ub__dev_close(a);
    ub__dev_close(b);
    ub__dev_close(c);
    ub__dev_close(m);
    assert_int_equal(pool.avail, pool.count);
    ub__pktpool_fini(&pool);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rx_mode),
        cmocka_unit_test(test_rx_paths),
        cmocka_unit_test(test_connected),
        cmocka_unit_test(test_epoll_lazy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
