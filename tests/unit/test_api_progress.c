/*
 * Automatic progress: a target whose application never calls the API again still
 * executes one-sided operations (in another thread, and in another process); JFCE fds
 * work in the application's own epoll loop; the API is safe from two threads at once.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <sys/epoll.h>

#include "unit/api_net_util.h"

struct tgt {
    struct node b;
    const char *uri;
    uint8_t desc[NODE_DESC];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int state; /* 1: descriptors ready, 2: told to quit */
};

/* A target thread: sets up, publishes its descriptors, then waits on a condition variable
 * without ever touching the API until it is told to quit. */
static void *tgt_main(void *arg)
{
    struct tgt *t = arg;
    struct ub_context_attr ca = {.progress = UB_PROGRESS_AUTO, .spin_us = 20};
    int rc = node_open(&t->b, t->uri, &ca);
    if (!rc)
        node_export(&t->b, t->desc);
    pthread_mutex_lock(&t->mu);
    t->state = rc ? -1 : 1;
    pthread_cond_broadcast(&t->cv);
    while (t->state != 2)
        pthread_cond_wait(&t->cv, &t->mu);
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

static void one_sided_sleeping_target(const char *uri)
{
    struct tgt t;
    memset(&t, 0, sizeof(t));
    t.uri = uri;
    pthread_mutex_init(&t.mu, NULL);
    pthread_cond_init(&t.cv, NULL);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, tgt_main, &t), 0);
    pthread_mutex_lock(&t.mu);
    while (t.state == 0)
        pthread_cond_wait(&t.cv, &t.mu);
    pthread_mutex_unlock(&t.mu);
    assert_int_equal(t.state, 1);
    struct node a;
    struct ub_context_attr ca = {.progress = UB_PROGRESS_MANUAL};
    assert_int_equal(node_open(&a, uri, &ca), 0);
    struct peer p;
    node_import(&a, t.desc, &p);
    /* WRITE, READ back, FADD: only the target's progress thread serves them. */
    t_fill(a.mem, 300000, 21);
    struct ub_sge sg = {a.mem, 300000, a.seg};
    struct ub_wr wr = t_rma(UB_OP_WRITE, &sg, p.ts, p.base);
    wr.user_ctx = 1;
    assert_int_equal(t_run(&a, NULL, &wr), UB_CR_SUCCESS);
    struct ub_sge rs = {a.mem + 400000, 300000, a.seg};
    wr = t_rma(UB_OP_READ, &rs, p.ts, p.base);
    wr.user_ctx = 2;
    assert_int_equal(t_run(&a, NULL, &wr), UB_CR_SUCCESS);
    assert_memory_equal(a.mem + 400000, a.mem, 300000);
    uint64_t old = 1;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = UB_OP_ATOMIC_FADD;
    wr.flags = UB_WR_COMPLETE;
    wr.user_ctx = 3;
    wr.u.atomic.tseg = p.ts;
    wr.u.atomic.addr = p.base + (1u << 20) - 8;
    wr.u.atomic.operand = 41;
    wr.u.atomic.result = &old;
    assert_int_equal(t_run(&a, NULL, &wr), UB_CR_SUCCESS);
    assert_int_equal(old, 0);
    pthread_mutex_lock(&t.mu);
    t.state = 2;
    pthread_cond_broadcast(&t.cv);
    pthread_mutex_unlock(&t.mu);
    pthread_join(th, NULL);
    /* The target's memory, read directly once its progress thread is gone (closing joins it:
     * before that, only a completion or the application's own protocol orders the reads). */
    assert_int_equal(ub_context_close(t.b.ctx), 0);
    t.b.ctx = NULL;
    uint64_t v;
    memcpy(&v, t.b.mem + (1u << 20) - 8, 8);
    assert_int_equal(v, 41);
    node_close(&t.b);
    node_close(&a);
    pthread_mutex_destroy(&t.mu);
    pthread_cond_destroy(&t.cv);
}

static void test_sleeping_target_udp(void **state)
{
    (void)state;
    one_sided_sleeping_target("udp://127.0.0.1:0?paths=4");
}

static void test_sleeping_target_shm(void **state)
{
    (void)state;
    one_sided_sleeping_target("shm://0");
}

/* The target in another process, serving with automatic progress. */
static void test_target_process(void **state)
{
    (void)state;
    ub_bootstrap *bs;
    uint8_t d[NODE_DESC];
    pid_t pid = t_fork_target("udp://127.0.0.1:0", true, &bs, d);
    struct node a;
    struct ub_context_attr ca = {.progress = UB_PROGRESS_AUTO};
    assert_int_equal(node_open(&a, "udp://127.0.0.1:0", &ca), 0);
    struct peer p;
    node_import(&a, d, &p);
    t_every_op(&a, NULL, &p, NULL); /* both sides automatic: nobody drives by hand */
    char m[8];
    assert_int_equal(ub_bootstrap_recv(bs, m, sizeof(m), N_BOOT_MS), 2);
    assert_memory_equal(m, "ok", 2);
    assert_int_equal(ub_bootstrap_send(bs, "x", 1, N_BOOT_MS), 0);
    assert_int_equal(t_reap(pid, 5000), 0);
    ub_bootstrap_close(bs);
    node_close(&a);
}

/* JFCE fds in the application's own epoll loop, both sides automatic. */
static void test_jfce_in_app_epoll(void **state)
{
    (void)state;
    struct node a, b;
    struct ub_context_attr ca = {.progress = UB_PROGRESS_AUTO};
    struct peer p;
    t_pair(&a, "udp://127.0.0.1:0", &b, "udp://127.0.0.1:0", &ca, &p);
    int ep = epoll_create1(0);
    assert_true(ep >= 0);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 1};
    assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, ub_jfce_fd(a.jfce), &ev), 0);
    ev.data.u32 = 2;
    assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, ub_jfce_fd(b.jfce), &ev), 0);
    for (uint32_t i = 0; i < 50; i++) {
        /* b gets a message, a gets its send completion: both through the app's epoll. */
        assert_int_equal(node_post_recv(&b, ub_jetty_jfr(b.jetty), i % 8, 0, 0), 0);
        assert_int_equal(ub_rearm_jfc(a.jfc, false), 0);
        assert_int_equal(ub_rearm_jfc(b.jfc, false), 0);
        t_fill(a.mem, 64, i);
        struct ub_sge sg = {a.mem, 64, a.seg};
        struct ub_wr wr;
        memset(&wr, 0, sizeof(wr));
        wr.opcode = UB_OP_SEND_IMM;
        wr.flags = UB_WR_COMPLETE | UB_WR_SOLICITED;
        wr.user_ctx = i;
        wr.sge = &sg;
        wr.num_sge = 1;
        wr.imm_data = i;
        wr.tjetty = p.tj;
        assert_int_equal(ub_post_jetty_send(a.jetty, &wr, NULL), 0);
        bool ga = false, gb = false;
        uint64_t end = t_now() + N_WAIT_NS;
        while ((!ga || !gb) && t_now() < end) {
            struct epoll_event out[2];
            int n = epoll_wait(ep, out, 2, 1000);
            for (int k = 0; k < n; k++) {
                struct node *x = out[k].data.u32 == 1 ? &a : &b;
                ub_jfc *fired[4];
                int m = ub_wait_jfc(x->jfce, 4, 0, fired);
                if (m <= 0)
                    continue;
                assert_ptr_equal(fired[0], x->jfc);
                assert_int_equal(ub_ack_jfc(x->jfc, (uint32_t)m), 0);
                struct ub_cr cr;
                assert_int_equal(ub_poll_jfc(x->jfc, 1, &cr), 1);
                assert_int_equal(cr.status, UB_CR_SUCCESS);
                if (x == &a) {
                    assert_int_equal(cr.user_ctx, i);
                    ga = true;
                } else {
                    assert_int_equal(cr.imm_data, i);
                    assert_memory_equal(b.mem + N_RECV_OFF + (i % 8) * N_RECV_BUF, a.mem, 64);
                    gb = true;
                }
            }
        }
        assert_true(ga && gb);
    }
    close(ep);
    node_close(&a);
    node_close(&b);
}

/* Two application threads post and poll on one automatic context at once. */
struct hammer {
    struct node *a;
    struct peer *p;
    uint32_t base, ok;
    ub_jetty *jetty;
    ub_jfc *jfc;
};

static void *hammer_main(void *arg)
{
    struct hammer *h = arg;
    for (uint32_t i = 0; i < 300; i++) {
        struct ub_sge sg = {h->a->mem + h->base, 4096, h->a->seg};
        struct ub_wr wr = t_rma(UB_OP_WRITE, &sg, h->p->ts, h->p->base + h->base);
        wr.user_ctx = i;
        if (ub_post_jetty_send(h->jetty, &wr, NULL))
            return NULL;
        struct ub_cr cr;
        uint64_t end = t_now() + N_WAIT_NS;
        int k = 0;
        while (!k && t_now() < end)
            k = ub_poll_jfc(h->jfc, 1, &cr);
        if (k != 1 || cr.status != UB_CR_SUCCESS || cr.user_ctx != i)
            return NULL;
        h->ok++;
    }
    return NULL;
}

static void test_two_app_threads(void **state)
{
    (void)state;
    struct node a, b;
    struct ub_context_attr ca = {.progress = UB_PROGRESS_AUTO};
    struct peer p;
    t_pair(&a, "shm://0", &b, "shm://0", &ca, &p);
    struct hammer h[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        memset(&h[i], 0, sizeof(h[i]));
        h[i].a = &a;
        h[i].p = &p;
        h[i].base = (uint32_t)i * 65536u;
        struct ub_jfc_attr fa = {.depth = 64};
        assert_int_equal(ub_jfc_create(a.ctx, &fa, &h[i].jfc), 0);
        struct ub_jetty_attr ja;
        memset(&ja, 0, sizeof(ja));
        ja.jfs.depth = 8;
        ja.jfs.jfc = h[i].jfc;
        ja.jfr.depth = 8;
        ja.jfr.jfc = h[i].jfc;
        assert_int_equal(ub_jetty_create(a.ctx, &ja, &h[i].jetty), 0);
        t_fill(a.mem + h[i].base, 4096, (uint32_t)i + 30);
    }
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, hammer_main, &h[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(h[i].ok, 300);
        assert_memory_equal(b.mem + h[i].base, a.mem + h[i].base, 4096);
    }
    node_close(&a);
    node_close(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sleeping_target_udp), cmocka_unit_test(test_sleeping_target_shm),
        cmocka_unit_test(test_target_process),      cmocka_unit_test(test_jfce_in_app_epoll),
        cmocka_unit_test(test_two_app_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
