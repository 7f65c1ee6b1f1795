/* The bootstrap helper: TCP exchange between processes, files, and every bound. */
#define _GNU_SOURCE
#include "unit/api_net_util.h"

static void test_tcp_exchange(void **state)
{
    (void)state;
    ub_bootstrap *l;
    char uri[96];
    assert_int_equal(ub_bootstrap_listen("tcp://127.0.0.1:0", &l), 0);
    assert_true(ub_bootstrap_uri(l, uri, sizeof(uri)) > 0);
    assert_true(strncmp(uri, "tcp://127.0.0.1:", 16) == 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        ub_bootstrap_close(l);
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
        cmocka_unit_test(test_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
