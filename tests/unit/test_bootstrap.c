/* The bootstrap helper: TCP exchange between processes, files, and every bound. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "unit/api_net_util.h"

/* Polls with timeout 0 until a message (or an error) comes, within N_BOOT_MS. */
static int recv_poll0(ub_bootstrap *b, void *buf, size_t cap)
{
    uint64_t end = t_now() + N_BOOT_MS * 1000000ull;
    int n;
    while ((n = ub_bootstrap_recv(b, buf, cap, 0)) == UB_ETIMEDOUT && t_now() < end)
        poll(NULL, 0, 1);
    return n;
}

/* A raw TCP connection to a "tcp://127.0.0.1:PORT" listener, or -1. */
static int raw_connect(const char *uri)
{
    unsigned port;
    if (sscanf(uri, "tcp://127.0.0.1:%u", &port) != 1)
        return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) ||
        connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* Writes p[0..n) as its own segment, then pauses: the reader sees a frame in pieces. */
static int raw_piece(int fd, const uint8_t *p, size_t n)
{
    if (send(fd, p, n, MSG_NOSIGNAL) != (ssize_t)n)
        return -1;
    poll(NULL, 0, 30);
    return 0;
}

/*
 * Listens on an ephemeral loopback port (its URI into uri) and forks: the child (0) has no
 * listener and connects to uri; the parent gets the child's pid and accepts.
 */
static pid_t listen_fork(ub_bootstrap **l, char *uri, size_t len)
{
    assert_int_equal(ub_bootstrap_listen("tcp://127.0.0.1:0", l), 0);
    assert_true(ub_bootstrap_uri(*l, uri, len) > 0);
    assert_true(strncmp(uri, "tcp://127.0.0.1:", 16) == 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        ub_bootstrap_close(*l);
        *l = NULL;
    }
    return pid;
}

static void test_tcp_exchange(void **state)
{
    (void)state;
    ub_bootstrap *l;
    char uri[96];
    pid_t pid = listen_fork(&l, uri, sizeof(uri));
    if (pid == 0) {
        ub_bootstrap *c;
        uint8_t buf[UB_BOOTSTRAP_MAX_MSG];
        if (ub_bootstrap_connect(uri, N_BOOT_MS, &c))
            _exit(2);
        int n = ub_bootstrap_recv(c, buf, sizeof(buf), N_BOOT_MS);
        if (n != 40000)
            _exit(3);
        for (int i = 0; i < n; i++)
            buf[i] ^= 0xff;
        if (ub_bootstrap_send(c, buf, (size_t)n, N_BOOT_MS) ||
            ub_bootstrap_send(c, NULL, 0, N_BOOT_MS))
            _exit(4);
        ub_bootstrap_close(c);
        _exit(0);
    }
    assert_int_equal(ub_bootstrap_accept(l, N_BOOT_MS), 0);
    static uint8_t msg[40000], back[UB_BOOTSTRAP_MAX_MSG];
    t_fill(msg, sizeof(msg), 1);
    assert_int_equal(ub_bootstrap_send(l, msg, sizeof(msg), N_BOOT_MS), 0);
    assert_int_equal(ub_bootstrap_recv(l, back, sizeof(back), N_BOOT_MS), (int)sizeof(msg));
    for (size_t i = 0; i < sizeof(msg); i++)
        assert_int_equal(back[i], msg[i] ^ 0xff);
    assert_int_equal(ub_bootstrap_recv(l, back, sizeof(back), N_BOOT_MS), 0); /* empty message */
    /* The peer closed: an error, not a hang. */
    assert_int_equal(ub_bootstrap_recv(l, back, sizeof(back), N_BOOT_MS), UB_EIO);
    assert_int_equal(t_reap(pid, 5000), 0);
    ub_bootstrap_close(l);
}

static void test_bounds(void **state)
{
    (void)state;
    /* Nobody listens: connect retries, then gives up within its bound. */
    ub_bootstrap *l, *c;
    char uri[96];
    assert_int_equal(ub_bootstrap_listen("tcp://127.0.0.1:0", &l), 0);
    ub_bootstrap_uri(l, uri, sizeof(uri));
    ub_bootstrap_close(l); /* the port is free again */
    uint64_t t0 = t_now();
    assert_int_equal(ub_bootstrap_connect(uri, 150, &c), UB_ETIMEDOUT);
    uint64_t el = t_now() - t0;
    assert_true(el >= 140ull * 1000000 && el < 2000ull * 1000000);
    /* Nobody connects: accept times out. */
    assert_int_equal(ub_bootstrap_listen("tcp://127.0.0.1:0", &l), 0);
    assert_int_equal(ub_bootstrap_accept(l, 50), UB_ETIMEDOUT);
    /* Connected, nothing sent: recv times out; too small a buffer: UB_ELENGTH. */
    ub_bootstrap_uri(l, uri, sizeof(uri));
    assert_int_equal(ub_bootstrap_connect(uri, N_BOOT_MS, &c), 0);
    assert_int_equal(ub_bootstrap_accept(l, N_BOOT_MS), 0);
    uint8_t b[8];
    assert_int_equal(ub_bootstrap_recv(c, b, sizeof(b), 30), UB_ETIMEDOUT);
    assert_int_equal(ub_bootstrap_send(l, "0123456789", 10, N_BOOT_MS), 0);
    assert_int_equal(ub_bootstrap_recv(c, b, sizeof(b), N_BOOT_MS), UB_ELENGTH);
    assert_int_equal(ub_bootstrap_send(l, b, UB_BOOTSTRAP_MAX_MSG + 1, N_BOOT_MS), UB_EINVAL);
    ub_bootstrap_close(c);
    ub_bootstrap_close(l);
    /* Bad URIs. */
    assert_int_equal(ub_bootstrap_listen("udp://127.0.0.1:0", &l), UB_EINVAL);
    assert_int_equal(ub_bootstrap_listen("tcp://127.0.0.1", &l), UB_EINVAL);
    assert_int_equal(ub_bootstrap_listen("tcp://localhost:1", &l), UB_EINVAL);
    assert_int_equal(ub_bootstrap_connect("tcp://127.0.0.1:99999", 10, &c), UB_EINVAL);
}

/*
 * A frame arriving in pieces (the length, a pause, the body; the length itself split) while
 * the receiver polls with timeout 0. A timeout must not lose the part already read: once
 * it read the length and timed out on the body, it used to read the body as the next
 * length (UB_EIO) and the message was lost.
 */
static void test_split_frame_poll0(void **state)
{
    (void)state;
    ub_bootstrap *l;
    char uri[96];
    pid_t pid = listen_fork(&l, uri, sizeof(uri));
    if (pid == 0) {
        int fd = raw_connect(uri);
        if (fd < 0)
            _exit(2);
        static uint8_t m[3000];
        memset(m, 0xff, 8); /* read as a length: far above UB_BOOTSTRAP_MAX_MSG */
        t_fill(m + 8, sizeof(m) - 8, 7);
        const uint8_t h1[4] = {0, 0, 0, 100}, h2[4] = {0, 0, 3000 >> 8, 3000 & 0xff};
        /* Message 1: the length, then the body. Message 2: the length in two, the body
         * in two. Message 3: the length alone, for a buffer too small, then the body. */
        if (raw_piece(fd, h1, 4) || raw_piece(fd, m, 100) || raw_piece(fd, h2, 2) ||
            raw_piece(fd, h2 + 2, 2) || raw_piece(fd, m, 1500) || raw_piece(fd, m + 1500, 1500) ||
            raw_piece(fd, h2, 4) || raw_piece(fd, m, 3000))
            _exit(3);
        char c;
        if (recv(fd, &c, 1, 0) != 0) /* wait for the parent to close */
            _exit(4);
        close(fd);
        _exit(0);
    }
    assert_int_equal(ub_bootstrap_accept(l, N_BOOT_MS), 0);
    static uint8_t exp[3000], got[3000];
    memset(exp, 0xff, 8);
    t_fill(exp + 8, sizeof(exp) - 8, 7);
    assert_int_equal(recv_poll0(l, got, sizeof(got)), 100);
    assert_memory_equal(got, exp, 100);
    assert_int_equal(recv_poll0(l, got, sizeof(got)), 3000);
    assert_memory_equal(got, exp, 3000);
    /* Too small a buffer: UB_ELENGTH as soon as the length is known; the message waits. */
    assert_int_equal(recv_poll0(l, got, 100), UB_ELENGTH);
    assert_int_equal(ub_bootstrap_recv(l, got, 100, 0), UB_ELENGTH);
    assert_int_equal(recv_poll0(l, got, sizeof(got)), 3000);
    assert_memory_equal(got, exp, 3000);
    assert_int_equal(ub_bootstrap_recv(l, got, sizeof(got), 0), UB_ETIMEDOUT);
    ub_bootstrap_close(l);
    assert_int_equal(t_reap(pid, 5000), 0);
}

/*
 * Both sides with timeout 0: the sender retries on UB_ETIMEDOUT while the receiver starts
 * late and reads slowly, so the socket fills and sends are cut short (part of a frame
 * written). Every message must arrive whole, once, in order.
 */
enum { STREAM_MSGS = 600 };

/* Message i: stream_len(i) bytes of a fixed pattern, from an offset of its own. */
static const uint8_t *stream_msg(int i, size_t *len)
{
    static uint8_t pat[UB_BOOTSTRAP_MAX_MSG + 4096];
    static bool filled;
    if (!filled)
        t_fill(pat, sizeof(pat), 11), filled = true;
    *len = i % 2 == 0 ? UB_BOOTSTRAP_MAX_MSG : (size_t)i * 997 % UB_BOOTSTRAP_MAX_MSG;
    return pat + (size_t)i * 13 % 4096;
}

static void test_stream_poll0(void **state)
{
    (void)state;
    ub_bootstrap *l;
    char uri[96];
    size_t len;
    pid_t pid = listen_fork(&l, uri, sizeof(uri));
    if (pid == 0) {
        ub_bootstrap *c;
        static uint8_t buf[UB_BOOTSTRAP_MAX_MSG];
        if (ub_bootstrap_connect(uri, N_BOOT_MS, &c))
            _exit(2);
        poll(NULL, 0, 100); /* let the sender fill the socket */
        for (int i = 0; i < STREAM_MSGS; i++) {
            if (i % 16 == 0)
                poll(NULL, 0, 5);
            int n = recv_poll0(c, buf, sizeof(buf));
            const uint8_t *exp = stream_msg(i, &len);
            if (n != (int)len || memcmp(buf, exp, len))
                _exit(3);
        }
        ub_bootstrap_close(c);
        _exit(0);
    }
    assert_int_equal(ub_bootstrap_accept(l, N_BOOT_MS), 0);
    for (int i = 0; i < STREAM_MSGS; i++) {
        const uint8_t *msg = stream_msg(i, &len);
        uint64_t end = t_now() + N_BOOT_MS * 1000000ull;
        int rc;
        while ((rc = ub_bootstrap_send(l, msg, len, 0)) == UB_ETIMEDOUT && t_now() < end)
            poll(NULL, 0, 1);
        assert_int_equal(rc, 0);
    }
    assert_int_equal(t_reap(pid, N_BOOT_MS), 0);
    ub_bootstrap_close(l);
}

static void test_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/softub-bootstrap-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof(path), "%s/desc", dir);
    uint8_t buf[64];
    /* Nothing there: bounded wait. */
    assert_int_equal(ub_bootstrap_file_get(path, buf, sizeof(buf), 30), UB_ETIMEDOUT);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        uint8_t m[48];
        t_fill(m, sizeof(m), 3);
        _exit(ub_bootstrap_file_put(path, m, sizeof(m)) ? 1 : 0);
    }
    /* The child writes it at some point: the reader waits for it (inotify), whole. */
    assert_int_equal(ub_bootstrap_file_get(path, buf, sizeof(buf), N_BOOT_MS), 48);
    uint8_t exp[48];
    t_fill(exp, sizeof(exp), 3);
    assert_memory_equal(buf, exp, 48);
    assert_int_equal(t_reap(pid, 5000), 0);
    assert_int_equal(ub_bootstrap_file_get(path, buf, 16, 10), UB_ELENGTH);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp_exchange),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_split_frame_poll0),
        cmocka_unit_test(test_stream_poll0),
        cmocka_unit_test(test_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
