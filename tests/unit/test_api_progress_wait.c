/*
 * Automatic progress with application threads blocked in ub_wait_jfc, which drive their
 * context themselves while the progress thread stands by (docs/progress.md): a SEND
 * ping-pong between two such threads completes with held output (about one datagram per
 * direction), what stays held when the waiter leaves is sent by the progress thread, and
 * once the application has left the library for good, the progress thread serves a peer's
 * one-sided operations again.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>

#include "unit/api_net_util.h"
#include "api/api.h"
#include "dev/shm.h"

#define PINGS   300u
#define SPIN_US 500u

struct side {
    struct node n;
    struct peer p; /* the other side, imported */
    uint32_t recvs, sends;
    int err;
};

static void post_send(struct side *s, uint64_t id)
{
    if (node_send8(&s->n, s->p.tj, id))
        s->err++;
}

/* Takes records until `recvs` receives and `sends` send completions were seen, sleeping in
 * ub_wait_jfc between polls (poll, rearm, poll again, wait). Returns false after the bound. */
static bool event_wait(struct side *s, uint32_t recvs, uint32_t sends)
{
    uint64_t end = t_now() + N_WAIT_NS;
    while (s->recvs < recvs || s->sends < sends) {
        struct ub_cr cr;
        int k = ub_poll_jfc(s->n.jfc, 1, &cr);
        if (k == 0) {
            ub_rearm_jfc(s->n.jfc, false);
            k = ub_poll_jfc(s->n.jfc, 1, &cr);
        }
        if (k == 1) {
            if (cr.status != UB_CR_SUCCESS)
                s->err++;
            if (cr.opcode == UB_CR_OP_RECV) {
                s->recvs++;
                if (node_post_recv(&s->n, ub_jetty_jfr(s->n.jetty), 0, 0, 0))
                    s->err++;
            } else {
                s->sends++;
            }
            continue;
        }
        if (t_now() > end)
            return false;
        ub_jfc *fired[4];
        int m = ub_wait_jfc(s->n.jfce, 4, 100, fired);
        if (m > 0 && ub_ack_jfc(s->n.jfc, (uint32_t)m))
            s->err++;
    }
    return true;
}

/* The responder: answers every ping, then waits for its last send's completion. */
static void *responder_main(void *arg)
{
    struct side *b = arg;
    for (uint32_t i = 0; i < PINGS; i++) {
        if (!event_wait(b, i + 1, 0))
            return NULL;
        post_send(b, i);
    }
    /* The ACK of the last answer was held by the pinger's waiter, which then left: its
     * progress thread sends it. */
    event_wait(b, PINGS, PINGS);
    return NULL;
}

static uint64_t datagrams(struct node *n)
{
    struct ub_context_stats st;
    assert_int_equal(ub_context_stats(n->ctx, &st), 0);
    return st.tx_udp_pkts;
}

/* FIFO writes to wake a sleeping shm consumer, by both sides so far (0 over udp). */
static uint64_t wakes(struct node *a, struct node *b)
{
    uint64_t n = 0;
    struct node *both[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        struct ub__shm_stats st;
        struct ub__dev *shm = ub__ctx_of(both[i]->ctx)->shm;
        if (shm && ub__shm_stats(shm, &st) == 0)
            n += st.wake_sent;
    }
    return n;
}

static void wait_pingpong(const char *uri)
{
    struct side a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    struct ub_context_attr ca = {.progress = UB_PROGRESS_AUTO};
    assert_int_equal(node_open(&a.n, uri, &ca), 0);
    assert_int_equal(node_open(&b.n, uri, &ca), 0);
    uint8_t d[NODE_DESC];
    node_export(&b.n, d);
    node_import(&a.n, d, &a.p);
    node_export(&a.n, d);
    node_import(&b.n, d, &b.p);
    for (uint32_t i = 0; i < 16; i++) {
        assert_int_equal(node_post_recv(&a.n, ub_jetty_jfr(a.n.jetty), 0, 0, 0), 0);
        assert_int_equal(node_post_recv(&b.n, ub_jetty_jfr(b.n.jetty), 0, 0, 0), 0);
    }
    /* One warm-up exchange (connection set-up), then the counted ping-pong. */
    post_send(&a, 0);
    assert_true(event_wait(&b, 1, 0));
    post_send(&b, 0);
    assert_true(event_wait(&a, 1, 1));
    a.recvs = a.sends = b.recvs = 0;
    assert_true(event_wait(&b, 0, 1));
    b.sends = 0;
    uint64_t d0 = datagrams(&a.n) + datagrams(&b.n), w0 = wakes(&a.n, &b.n);

    uint64_t t0 = t_now();
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, responder_main, &b), 0);
    for (uint32_t i = 0; i < PINGS; i++) {
        post_send(&a, i);
        if (!event_wait(&a, i + 1, 0))
            break;
    }
    /* From here on a's application leaves the library. */
    pthread_join(th, NULL);
    uint64_t took = t_now() - t0;
    /* The last ping's own completion: its response may come after the answer (which leaves
     * first, hold.c) and be taken by a later round. */
    assert_true(event_wait(&a, PINGS, PINGS));
    assert_int_equal(a.recvs, PINGS);
    assert_int_equal(b.recvs, PINGS);
    assert_int_equal(b.sends, PINGS);
    assert_int_equal(a.err + b.err, 0);
    uint64_t dg = datagrams(&a.n) + datagrams(&b.n) - d0, wk = wakes(&a.n, &b.n) - w0;
    print_message("%s: %lu datagrams, %lu wake-ups for %u pings\n", uri, (unsigned long)dg,
                  (unsigned long)wk, PINGS);
    /* Over udp, request and answer each carry the ACK of the other in one datagram: two a
     * ping, four without holding (old automatic progress: exactly 1 200 here). A few more
     * when a side was slow for a lease and its progress thread sent an ACK alone. (shm
     * lanes carry packets one by one: nothing to bundle.) */
    if (strncmp(uri, "udp", 3) == 0)
        assert_true(dg < 7 * PINGS / 2);
    /* A waiter asks the shm device for a wake-up (which costs the peer a write(2) and itself
     * a read(2)) only once it has spun spin_us (50) in vain, and so does a progress thread
     * about to sleep: at most one per 50 us of each of the four threads, however loaded the
     * machine. Asking in every round of the spin, it cost one per message (600-730 here). */
    assert_true(wk <= 4 * took / (50 * UB_NS_PER_US) + 8);

    /* b's application has left too: its progress thread serves a WRITE and a READ. */
    t_fill(a.n.mem, 20000, 7);
    struct ub_sge sg = {a.n.mem, 20000, a.n.seg};
    struct ub_wr wr = t_rma(UB_OP_WRITE, &sg, a.p.ts, a.p.base);
    wr.user_ctx = 11;
    assert_int_equal(t_run(&a.n, NULL, &wr), UB_CR_SUCCESS);
    struct ub_sge rs = {a.n.mem + 40000, 20000, a.n.seg};
    wr = t_rma(UB_OP_READ, &rs, a.p.ts, a.p.base);
    wr.user_ctx = 12;
    assert_int_equal(t_run(&a.n, NULL, &wr), UB_CR_SUCCESS);
    assert_memory_equal(a.n.mem + 40000, a.n.mem, 20000);
    node_close(&a.n);
    node_close(&b.n);
}

/* A passive target: its application only waits (no event ever comes), so its waiter drives. */
struct passive {
    struct node *n;
    atomic_bool stop;
};

static void *passive_main(void *arg)
{
    struct passive *p = arg;
    while (!atomic_load(&p->stop)) {
        ub_jfc *fired[4];
        int m = ub_wait_jfc(p->n->jfce, 4, 10, fired);
        if (m > 0)
            ub_ack_jfc(p->n->jfc, (uint32_t)m);
    }
    return NULL;
}

/*
 * READs, one at a time, of a target whose application waits in ub_wait_jfc: its waiter
 * serves them, and spins again after each (as the progress thread does after work) instead
 * of sleeping until the next, which cost every READ a wake-up from sleep (over shm a wake-up
 * asked of the device: the initiator's write(2), the target's read(2)).
 */
static void test_wait_passive_target_shm(void **state)
{
    (void)state;
    struct side a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    /* A spin of 500 us, far more than a READ takes and than a wake-up from sleep, but less
     * than the target's waits (10 ms), so that a waiter spinning only at the start of its
     * wait, as before, sleeps between READs. */
    struct ub_context_attr ca = {.progress = UB_PROGRESS_AUTO, .spin_us = SPIN_US};
    assert_int_equal(node_open(&a.n, "shm://0", &ca), 0);
    assert_int_equal(node_open(&b.n, "shm://0", &ca), 0);
    uint8_t d[NODE_DESC];
    node_export(&b.n, d);
    node_import(&a.n, d, &a.p);
    t_fill(b.n.mem, 64, 3);
    struct ub_sge sg = {a.n.mem, 8, a.n.seg};
    struct ub_wr wr = t_rma(UB_OP_READ, &sg, a.p.ts, a.p.base);
    assert_int_equal(ub_post_jetty_send(a.n.jetty, &wr, NULL), 0); /* connection set-up */
    assert_true(event_wait(&a, 0, 1));

    struct passive p = {.n = &b.n};
    atomic_init(&p.stop, false);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, passive_main, &p), 0);
    /* Between serving READ i and READ i + 1 arriving, the target idles less than from the
     * post of READ i to the completion of READ i + 1: if that is under the spin, neither side
     * can have asked for a wake-up in it. */
    uint64_t w0 = wakes(&a.n, &b.n), posted[2] = {0, 0};
    uint32_t slow = 0;
    for (uint32_t i = 0; i < PINGS; i++) {
        wr.u.rma.addr = a.p.base + 8 * (i % 8);
        posted[i % 2] = t_now();
        assert_int_equal(ub_post_jetty_send(a.n.jetty, &wr, NULL), 0);
        if (!event_wait(&a, 0, i + 2))
            break;
        if (i && t_now() - posted[(i + 1) % 2] >= SPIN_US * UB_NS_PER_US)
            slow++;
    }
    uint64_t wk = wakes(&a.n, &b.n) - w0;
    atomic_store(&p.stop, true);
    pthread_join(th, NULL);
    assert_int_equal(a.sends, PINGS + 1);
    assert_int_equal(a.err, 0);
    assert_memory_equal(a.n.mem, b.n.mem + 8 * ((PINGS - 1) % 8), 8);
    print_message("%u READs: %lu wake-ups, %u pairs of READs over %u us\n", PINGS,
                  (unsigned long)wk, slow, SPIN_US);
    /* Only packets of such a pair (two READs: requests, responses, at most four) can find
     * a side asking for a wake-up. About one per READ when the target's waiter slept between
     * them (180-270 here, with no slow pair). */
    assert_true(wk <= 4 * slow + 8);
    node_close(&a.n);
    node_close(&b.n);
}

static void test_wait_pingpong_udp(void **state)
{
    (void)state;
    wait_pingpong("udp://127.0.0.1:0?paths=1");
}

static void test_wait_pingpong_shm(void **state)
{
    (void)state;
    wait_pingpong("shm://0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wait_pingpong_udp),
        cmocka_unit_test(test_wait_pingpong_shm),
        cmocka_unit_test(test_wait_passive_target_shm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
