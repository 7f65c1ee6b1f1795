/*
 * The JFCE fd for watchers other than the waiter that collects: a waiter's own round does
 * not write the fd for the events it takes itself (src/ses/ses_cq.c), so the fd must still
 * turn readable for epoll when nobody waits, stay readable for events a waiter leaves
 * behind, wake a second thread blocked on the same JFCE, and be quiet once all is taken.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>

#include "unit/api_net_util.h"

#define URI "udp://127.0.0.1:0?paths=1"

/* b with a second jetty whose JFC reports to the same JFCE, a sending to both. */
struct two {
    struct node a, b;
    struct peer p;
    ub_tjetty *tj2;
    ub_jfc *jfc2;
    ub_jetty *jetty2;
};

static bool readable(int fd)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    return poll(&pfd, 1, 0) == 1;
}

/* Takes `n` records from jfc, driving both contexts; false after the bound. */
static bool drain(struct two *t, ub_jfc *jfc, uint32_t n)
{
    uint64_t end = t_now() + N_WAIT_NS;
    while (n) {
        struct ub_cr cr;
        ub_progress(t->a.ctx);
        ub_progress(t->b.ctx);
        if (ub_poll_jfc(jfc, 1, &cr) == 1) {
            if (cr.status != UB_CR_SUCCESS)
                return false;
            n--;
        } else if (t_now() > end) {
            return false;
        }
    }
    return true;
}

static void two_open(struct two *t)
{
    memset(t, 0, sizeof(*t));
    struct ub_context_attr ca = {.progress = UB_PROGRESS_MANUAL};
    t_pair(&t->a, URI, &t->b, URI, &ca, &t->p);
    struct ub_jfc_attr fa = {.depth = 512, .jfce = t->b.jfce};
    assert_int_equal(ub_jfc_create(t->b.ctx, &fa, &t->jfc2), 0);
    struct ub_jetty_attr ja;
    memset(&ja, 0, sizeof(ja));
    ja.jfs.depth = 64;
    ja.jfs.jfc = t->jfc2;
    ja.jfr.depth = 128;
    ja.jfr.jfc = t->jfc2;
    assert_int_equal(ub_jetty_create(t->b.ctx, &ja, &t->jetty2), 0);
    uint8_t d[64];
    assert_int_equal(ub_jetty_export(t->jetty2, d, 64), 64);
    assert_int_equal(ub_jetty_import(t->a.ctx, d, 64, &t->tj2), 0);
    for (uint32_t i = 0; i < 64; i++) {
        assert_int_equal(node_post_recv(&t->b, ub_jetty_jfr(t->b.jetty), i, 0, 0), 0);
        assert_int_equal(node_post_recv(&t->b, ub_jetty_jfr(t->jetty2), 64 + i, 0, 0), 0);
    }
    /* Connection set-up, unarmed: no event. */
    assert_int_equal(node_send8(&t->a, t->p.tj, 0), 0);
    assert_int_equal(node_send8(&t->a, t->tj2, 0), 0);
    assert_true(drain(t, t->b.jfc, 1));
    assert_true(drain(t, t->jfc2, 1));
    assert_true(drain(t, t->a.jfc, 2));
    assert_false(readable(ub_jfce_fd(t->b.jfce)));
}

static void two_close(struct two *t)
{
    node_close(&t->a);
    node_close(&t->b);
}

/* Both JFCs armed, one SEND to each jetty of b, a's side pushed out. */
static void fire_two(struct two *t)
{
    assert_int_equal(ub_rearm_jfc(t->b.jfc, false), 0);
    assert_int_equal(ub_rearm_jfc(t->jfc2, false), 0);
    assert_int_equal(node_send8(&t->a, t->p.tj, 1), 0);
    assert_int_equal(node_send8(&t->a, t->tj2, 2), 0);
    ub_progress(t->a.ctx);
}

/* The records behind the events, and a's send completions. */
static void settle(struct two *t)
{
    assert_true(drain(t, t->b.jfc, 1));
    assert_true(drain(t, t->jfc2, 1));
    assert_true(drain(t, t->a.jfc, 2));
    for (uint32_t i = 0; i < 2; i++)
        assert_int_equal(node_post_recv(&t->b, ub_jetty_jfr(i ? t->jetty2 : t->b.jetty), 0, 0, 0),
                         0);
}

/* Nobody waits: a round run by ub_progress makes the fd readable for epoll; collecting
 * makes it quiet again. */
static void test_jfce_epoll(void **state)
{
    (void)state;
    struct two t;
    two_open(&t);
    int fd = ub_jfce_fd(t.b.jfce);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    assert_true(ep >= 0);
    struct epoll_event ev = {.events = EPOLLIN};
    assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
    for (int rep = 0; rep < 10; rep++) {
        fire_two(&t);
        uint64_t end = t_now() + N_WAIT_NS;
        struct epoll_event out;
        while (epoll_wait(ep, &out, 1, 0) != 1) {
            assert_true(t_now() < end);
            ub_progress(t.a.ctx);
            ub_progress(t.b.ctx);
        }
        ub_jfc *f[4];
        int got = 0;
        while (got < 2) {
            int m = ub_wait_jfc(t.b.jfce, 4, 0, f);
            assert_true(m >= 0);
            got += m;
            assert_true(t_now() < end);
            if (m == 0)
                ub_progress(t.b.ctx);
        }
        assert_int_equal(got, 2);
        assert_int_equal(epoll_wait(ep, &out, 1, 0), 0);
        assert_int_equal(ub_ack_jfc(t.b.jfc, 1), 0);
        assert_int_equal(ub_ack_jfc(t.jfc2, 1), 0);
        settle(&t);
    }
    close(ep);
    two_close(&t);
}

static void ack_events(ub_jfc **f, int m)
{
    for (int i = 0; i < m; i++)
        assert_int_equal(ub_ack_jfc(f[i], 1), 0);
}

/* A waiter whose own round fired both JFCs but returns one leaves the fd readable for the
 * other; once both are taken it is quiet. */
static void test_jfce_leftover(void **state)
{
    (void)state;
    struct two t;
    two_open(&t);
    int fd = ub_jfce_fd(t.b.jfce);
    int leftovers = 0;
    for (int rep = 0; rep < 20; rep++) {
        fire_two(&t);
        ub_jfc *f[2];
        int m = ub_wait_jfc(t.b.jfce, 1, 2000, f);
        assert_int_equal(m, 1);
        ack_events(f, m);
        if (readable(fd)) {
            leftovers++;
            m = ub_wait_jfc(t.b.jfce, 1, 0, f);
        } else {
            m = ub_wait_jfc(t.b.jfce, 1, 2000, f);
        }
        assert_int_equal(m, 1);
        ack_events(f, m);
        assert_false(readable(fd));
        settle(&t);
    }
    print_message("both events in one round: %d of 20\n", leftovers);
    assert_true(leftovers > 0);
    two_close(&t);
}

struct second {
    ub_jfce *e;
    int m;
    ub_jfc *f[2];
};

static void *second_main(void *arg)
{
    struct second *s = arg;
    s->m = ub_wait_jfc(s->e, 1, 3000, s->f);
    return NULL;
}

/* Two threads blocked on one JFCE, two events: each thread returns one. */
static void test_jfce_two_waiters(void **state)
{
    (void)state;
    struct two t;
    two_open(&t);
    for (int rep = 0; rep < 10; rep++) {
        struct second s = {.e = t.b.jfce};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, second_main, &s), 0);
        fire_two(&t);
        ub_jfc *f[2];
        uint64_t t0 = t_now();
        int m = ub_wait_jfc(t.b.jfce, 1, 3000, f);
        assert_int_equal(pthread_join(th, NULL), 0);
        assert_int_equal(m, 1);
        assert_int_equal(s.m, 1);
        assert_true(f[0] != s.f[0]);
        /* Neither slept to its timeout. */
        assert_true(t_now() - t0 < 2000ull * 1000000ull);
        ack_events(f, m);
        ack_events(s.f, s.m);
        assert_false(readable(ub_jfce_fd(t.b.jfce)));
        settle(&t);
    }
    two_close(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jfce_epoll),
        cmocka_unit_test(test_jfce_leftover),
        cmocka_unit_test(test_jfce_two_waiters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
