/*
 * Held output and datagram bundles over udp, manual progress: in a SEND ping-pong (and a
 * WRITE one whose sides poll memory) the ACK, the response and the answer leave as one
 * datagram per direction, also between devices of several paths (whose requests come from
 * several ports); with holding off (SOFTUB_HOLD=0) they do not. An application that takes a
 * completion and then stops calling the library still has its ACKs sent (the watchdog), so its
 * peer's requests complete. Over shm the answer leaves before the response and is taken before it;
 * over udp it comes first in its bundle and is taken before the ACK behind it.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>

#include "unit/api_net_util.h"
#include "api/api.h"

#define URI   "udp://127.0.0.1:0?paths=1"
#define PINGS 400u

struct pair {
    struct node a, b;
    struct peer pa, pb; /* a's view of b, b's view of a */
};

static void pair_up_uri(struct pair *p, const char *uri_a, const char *uri_b)
{
    struct ub_context_attr ca = {.progress = UB_PROGRESS_MANUAL};
    t_pair(&p->a, uri_a, &p->b, uri_b, &ca, &p->pa);
    uint8_t d[NODE_DESC];
    node_export(&p->a, d);
    node_import(&p->b, d, &p->pb);
}

static void pair_up(struct pair *p)
{
    pair_up_uri(p, URI, URI);
}

static void pair_down(struct pair *p)
{
    node_close(&p->a);
    node_close(&p->b);
}

static void post_send(struct node *n, struct peer *to, uint64_t id)
{
    assert_int_equal(node_send8(n, to->tj, id), 0);
}

/*
 * Polls n until a receive record arrives, counting send records on the way; other keeps
 * progressing meanwhile, as a second process polling for its own answer would.
 */
static void wait_recv(struct node *n, struct node *other, uint32_t *sends)
{
    uint64_t end = t_now() + N_WAIT_NS;
    struct ub_cr cr;
    for (;;) {
        int k = ub_poll_jfc(n->jfc, 1, &cr);
        if (k == 1) {
            assert_int_equal(cr.status, UB_CR_SUCCESS);
            if (cr.opcode == UB_CR_OP_RECV) {
                assert_int_equal(node_post_recv(n, ub_jetty_jfr(n->jetty), 0, 0, 0), 0);
                return;
            }
            (*sends)++;
        }
        ub_progress(other->ctx);
        assert_true(t_now() < end);
    }
}

/* Polls n (other progressing too) until it has counted want successful records, each of
 * opcode op (or of any, op < 0). */
static void wait_records(struct node *n, struct node *other, uint32_t *recs, uint32_t want, int op)
{
    uint64_t end = t_now() + N_WAIT_NS;
    struct ub_cr cr;
    while (*recs < want) {
        if (ub_poll_jfc(n->jfc, 1, &cr) == 1) {
            assert_int_equal(cr.status, UB_CR_SUCCESS);
            if (op >= 0)
                assert_int_equal(cr.opcode, op);
            (*recs)++;
        }
        ub_progress(other->ctx);
        assert_true(t_now() < end);
    }
}

static uint64_t datagrams(const struct node *n)
{
    struct ub_context_stats st;
    assert_int_equal(ub_context_stats(n->ctx, &st), 0);
    return st.tx_udp_pkts;
}

/* A ping-pong between a and b in this thread; returns the datagrams a and b sent. */
static uint64_t pingpong(struct pair *p, uint32_t pings)
{
    for (uint32_t i = 0; i < 16; i++) {
        assert_int_equal(node_post_recv(&p->a, ub_jetty_jfr(p->a.jetty), 0, 0, 0), 0);
        assert_int_equal(node_post_recv(&p->b, ub_jetty_jfr(p->b.jetty), 0, 0, 0), 0);
    }
    uint32_t sa = 0, sb = 0;
    uint64_t d0 = datagrams(&p->a) + datagrams(&p->b);
    for (uint32_t i = 0; i < pings; i++) {
        post_send(&p->a, &p->pa, i);
        wait_recv(&p->b, &p->a, &sb);
        post_send(&p->b, &p->pb, i);
        wait_recv(&p->a, &p->b, &sa);
    }
    uint64_t d = datagrams(&p->a) + datagrams(&p->b) - d0;
    /* Every send completes (the last ones, or more when the host delays a side, come after
     * the ping-pong's last answer). */
    wait_records(&p->a, &p->b, &sa, pings, UB_CR_OP_SEND);
    wait_records(&p->b, &p->a, &sb, pings, UB_CR_OP_SEND);
    return d;
}

/* A held ping-pong's datagrams: one per direction, plus a few (the start, a timer). */
#define HELD_MAX (2 * PINGS * 14 / 10)

static uint64_t splits(const struct pair *p)
{
    return p->a.ctx->eng.stats.rx_split + p->b.ctx->eng.stats.rx_split;
}

/*
 * pingpong of PINGS, again (at most three times in all) while the count is over HELD_MAX: a
 * side descheduled for longer than a timer's delay (a loaded CI machine) makes its timers
 * send datagrams of their own, and that is not what these tests are about. Without holding
 * every try has twice the datagrams. *split: answers taken before their ACK, in the last.
 */
static uint64_t held_pingpong(struct pair *p, uint64_t *split)
{
    uint64_t d = 0;
    for (int tries = 0; tries < 3 && (tries == 0 || d > HELD_MAX); tries++) {
        uint64_t s0 = splits(p);
        d = pingpong(p, PINGS);
        *split = splits(p) - s0;
    }
    return d;
}

static void test_pingpong_one_datagram(void **state)
{
    (void)state;
    struct pair p;
    pair_up(&p);
    uint64_t split;
    uint64_t d = held_pingpong(&p, &split);
    print_message("held: %lu datagrams for %u pings, %lu answers taken before their ACK\n",
                  (unsigned long)d, PINGS, (unsigned long)split);
    assert_true(d <= HELD_MAX);
    /* The answer comes first in its bundle, and the poll that finds it leaves the ACK behind
     * it (of our last request) for the next poll (engine.h, a yield). */
    assert_true(split >= 2 * PINGS * 9 / 10);
    pair_down(&p);
}

/*
 * Devices of several paths: requests leave from as many ports, and the ACK of each goes to
 * the port the target's own requests go to, so that it rides with the answer. Both sides of
 * four paths, and one of four against one of one.
 */
static void test_pingpong_paths(void **state)
{
    (void)state;
    static const char *const uris[][2] = {
        {"udp://127.0.0.1:0?paths=4", "udp://127.0.0.1:0?paths=4"},
        {"udp://127.0.0.1:0?paths=4", URI},
    };
    for (size_t k = 0; k < sizeof(uris) / sizeof(uris[0]); k++) {
        struct pair p;
        pair_up_uri(&p, uris[k][0], uris[k][1]);
        uint64_t split;
        uint64_t d = held_pingpong(&p, &split);
        print_message("%s - %s: %lu datagrams for %u pings\n", uris[k][0], uris[k][1],
                      (unsigned long)d, PINGS);
        assert_true(d <= HELD_MAX);
        pair_down(&p);
    }
}

/* An 8-byte WRITE of value v (in n's first byte) to byte 0 of the peer's segment. */
static void post_write(struct node *n, struct peer *to, uint8_t v)
{
    n->mem[0] = v;
    struct ub_sge sg = {n->mem, 1, n->seg};
    struct ub_wr wr = t_rma(UB_OP_WRITE, &sg, to->ts, to->base);
    wr.flags |= UB_WR_INLINE;
    assert_int_equal(ub_post_jetty_send(n->jetty, &wr, NULL), 0);
}

/* Polls n (other progressing too) until byte 0 of its segment reads v; counts n's records
 * in *recs. */
static void wait_byte(struct node *n, struct node *other, uint8_t v, uint32_t *recs)
{
    uint64_t end = t_now() + N_WAIT_NS;
    volatile const uint8_t *b = n->mem;
    while (*b != v) {
        struct ub_cr cr;
        if (ub_poll_jfc(n->jfc, 1, &cr) == 1) {
            assert_int_equal(cr.status, UB_CR_SUCCESS);
            (*recs)++;
        }
        ub_progress(other->ctx);
        assert_true(t_now() < end);
    }
}

static uint64_t holds(const struct node *n)
{
    return atomic_load(&ub__ctx_of(n->ctx)->hold_gen);
}

/* The same for a WRITE ping-pong played in one thread, which progresses the other side while
 * it polls memory: ~1 020 datagrams for 400 pings held, ~1 400 not (SOFTUB_HOLD=0). The
 * bound lies midway (HELD_MAX left it ~100 datagrams of room, little on a loaded machine). */
#define HELD_WRITE_MAX (2 * PINGS * 3 / 2)

/*
 * A WRITE ping-pong (perftest's write_lat: each side polls the byte the other writes, then
 * writes back) has no records to hold for, but its answers come too: once a side has
 * answered, a round that executes a WRITE holds its ACK for the answer, one datagram per
 * direction. A target that never answers (a stream of WRITEs) never holds: its ACKs leave
 * in the round that made them.
 */
static void test_write_pingpong_one_datagram(void **state)
{
    (void)state;
    struct pair p;
    pair_up(&p);
    uint64_t d = 0;
    uint32_t ra = 0, rb = 0, posted = 0;
    for (int tries = 0; tries < 3 && (tries == 0 || d > HELD_WRITE_MAX); tries++) {
        uint64_t d0 = datagrams(&p.a) + datagrams(&p.b);
        for (uint32_t i = 0; i < PINGS; i++, posted++) {
            uint8_t v = (uint8_t)(i % 255 + 1);
            post_write(&p.a, &p.pa, v);
            wait_byte(&p.b, &p.a, v, &rb);
            post_write(&p.b, &p.pb, v);
            wait_byte(&p.a, &p.b, v, &ra);
        }
        d = datagrams(&p.a) + datagrams(&p.b) - d0;
        print_message("WRITE ping-pong: %lu datagrams for %u pings\n", (unsigned long)d, PINGS);
    }
    assert_true(d <= HELD_WRITE_MAX);

    /* b's own WRITEs complete first: a record of one that came during the stream below
     * (a's response held for a's next post, or sent by a's watchdog when the host delays
     * this thread) would be a reason to hold of its own. */
    wait_records(&p.b, &p.a, &rb, posted, -1);
    /* b only takes WRITEs now: after the first round that finds one unanswered, b holds
     * nothing, and every WRITE of a completes without b posting. */
    uint64_t h0 = holds(&p.b);
    for (uint32_t i = 0; i < 64; i++, posted++) {
        post_write(&p.a, &p.pa, (uint8_t)(i + 1));
        wait_byte(&p.b, &p.a, (uint8_t)(i + 1), &rb);
    }
    assert_true(holds(&p.b) - h0 <= 1);
    wait_records(&p.a, &p.b, &ra, posted, -1);
    pair_down(&p);
}

/* Takes n's records; returns how many were RECVs, counting the others in *sends. */
static int take_records(struct node *n, uint32_t *sends, int *k)
{
    struct ub_cr cr[8];
    *k = ub_poll_jfc(n->jfc, 8, cr);
    assert_true(*k >= 0);
    int recvs = 0;
    for (int j = 0; j < *k; j++) {
        assert_int_equal(cr[j].status, UB_CR_SUCCESS);
        if (cr[j].opcode == UB_CR_OP_RECV)
            recvs++;
        else
            (*sends)++;
    }
    return recvs;
}

/*
 * Over shm a side answers before it sends the response to what it answers (hold.c), and a
 * side that answers what it receives gets the answer from its poll before the rest of the
 * batch is worked through (a yield, engine.h): from the second ping on, the poll that finds
 * the RECV returns it alone, and the completion of the side's own last SEND comes with its
 * next poll, made right after it answered (a process waiting for the next answer polls).
 * Sent the other way round, or worked through whole, both would come together.
 */
static void test_pingpong_shm_answer_first(void **state)
{
    (void)state;
    struct pair p;
    pair_up_uri(&p, "shm://0", "shm://0");
    for (uint32_t i = 0; i < 16; i++) {
        assert_int_equal(node_post_recv(&p.a, ub_jetty_jfr(p.a.jetty), 0, 0, 0), 0);
        assert_int_equal(node_post_recv(&p.b, ub_jetty_jfr(p.b.jetty), 0, 0, 0), 0);
    }
    struct node *side[2] = {&p.a, &p.b};
    struct peer *to[2] = {&p.pa, &p.pb};
    uint32_t alone = 0, sends = 0, turns = 2 * 64;
    int k;
    post_send(&p.a, &p.pa, 0);
    for (uint32_t i = 0; i < turns; i++) {
        struct node *n = side[(i + 1) % 2];
        if (i < 2) { /* connection set-up: the peer's progress is needed */
            uint64_t end = t_now() + N_WAIT_NS;
            while (take_records(n, &sends, &k) == 0) {
                ub_progress(side[i % 2]->ctx);
                assert_true(t_now() < end);
            }
        } else { /* the peer's post sent everything: the first poll finds the RECV */
            assert_int_equal(take_records(n, &sends, &k), 1);
            alone += k == 1;
        }
        assert_int_equal(node_post_recv(n, ub_jetty_jfr(n->jetty), 0, 0, 0), 0);
        post_send(n, to[(i + 1) % 2], i + 1);
        assert_int_equal(take_records(n, &sends, &k), 0);
    }
    uint64_t taken_alone = p.a.ctx->eng.stats.rx_alone + p.b.ctx->eng.stats.rx_alone;
    print_message("%u of %u RECVs alone, %u SEND records, %lu datagrams taken alone\n", alone,
                  turns, sends, (unsigned long)taken_alone);
    /* All but the first two, unless the watchdog sent a side's held output first (the test
     * off its CPU for a millisecond, on a loaded host): then that turn's poll finds both. */
    assert_true(alone >= turns * 9 / 10);
    /* ... and the device was not asked about the slots after them (engine.h, rx_one_first). */
    assert_true(taken_alone >= turns * 9 / 10);
    assert_true(p.a.ctx->eng.stats.rx_yields + p.b.ctx->eng.stats.rx_yields >= alone);
    assert_true(sends >= turns - 2);
    /* ... and each side took the responses to its SENDs whole (ub__wire_link_rsp), one a turn. */
    uint64_t fast = p.a.ctx->ses.st.rx_rsp_fast + p.b.ctx->ses.st.rx_rsp_fast;
    print_message("%lu responses taken whole\n", (unsigned long)fast);
    assert_true(fast >= turns * 9 / 10);
    pair_down(&p);
}

/* A context's clock that counts its readings. */
struct counted_clock {
    unsigned reads;
};

static uint64_t counted_ns(void *arg)
{
    ((struct counted_clock *)arg)->reads++;
    return ub__clock_monotonic_ns(NULL);
}

/*
 * A ping-pong over uri: of the answers posted after the set-up, how many read the clock
 * (*answers: how many were posted).
 */
static uint32_t answers_reading_clock(const char *uri, uint32_t *answers)
{
    struct pair p;
    pair_up_uri(&p, uri, uri);
    struct counted_clock cc = {0};
    struct ub__clock counting = {counted_ns, &cc};
    ub__ctx_of(p.a.ctx)->clock = counting;
    ub__ctx_of(p.b.ctx)->clock = counting;
    for (uint32_t i = 0; i < 16; i++) {
        assert_int_equal(node_post_recv(&p.a, ub_jetty_jfr(p.a.jetty), 0, 0, 0), 0);
        assert_int_equal(node_post_recv(&p.b, ub_jetty_jfr(p.b.jetty), 0, 0, 0), 0);
    }
    struct node *side[2] = {&p.a, &p.b};
    struct peer *to[2] = {&p.pa, &p.pb};
    uint32_t sends = 0, reading = 0;
    *answers = 0;
    post_send(&p.a, &p.pa, 0);
    for (uint32_t i = 0; i < 64; i++) {
        struct node *n = side[(i + 1) % 2];
        wait_recv(n, side[i % 2], &sends);
        unsigned r0 = cc.reads;
        post_send(n, to[(i + 1) % 2], i + 1);
        if (i >= 2) {
            (*answers)++;
            reading += cc.reads != r0;
        }
    }
    pair_down(&p);
    return reading;
}

/*
 * Over shm alone an answer takes the time of the round it answers (post.c): no clock reading
 * on its path. Over udp it reads the clock, once: a PDC times what it sends.
 */
static void test_answer_takes_round_time(void **state)
{
    (void)state;
    uint32_t answers;
    uint32_t shm = answers_reading_clock("shm://0", &answers);
    print_message("shm: %u of %u answers read the clock\n", shm, answers);
    /* The watchdog may send a hold first (the test off its CPU for a millisecond): then the
     * answer reads the clock, rightly. */
    assert_true(shm <= answers / 10);
    uint32_t udp = answers_reading_clock(URI, &answers);
    assert_int_equal(udp, answers);
}

static void test_pingpong_unheld(void **state)
{
    (void)state;
    setenv("SOFTUB_HOLD", "0", 1);
    struct pair p;
    pair_up(&p);
    unsetenv("SOFTUB_HOLD");
    uint64_t d = pingpong(&p, PINGS);
    /* Without holding, the ACK (carrying the response) leaves before the answer is posted:
     * two datagrams per direction. */
    print_message("not held: %lu datagrams for %u pings\n", (unsigned long)d, PINGS);
    assert_true(d >= 2 * PINGS * 18 / 10);
    pair_down(&p);
}

/*
 * b takes a's message and then never calls the library again: its ACK and response were
 * held for its reaction, and the watchdog sends them, so a's SEND completes successfully
 * well within the failure bound.
 */
/* b stops right after its message; busy: after a ping-pong long enough for the watchdog to
 * stretch its period (4 ms). Returns how long a's SEND took to complete after that. */
static uint64_t stop_after_take(bool busy)
{
    struct pair p;
    pair_up(&p);
    if (busy) {
        pingpong(&p, 5 * PINGS); /* tens of milliseconds: many looks of the watchdog */
        /* The watchdog never preempts the application on waking. */
        int pol = -1;
        struct sched_param sp;
        assert_int_equal(pthread_getschedparam(ub__ctx_of(p.b.ctx)->hold_thread, &pol, &sp), 0);
        assert_int_equal(pol, SCHED_BATCH);
    }
    assert_int_equal(node_post_recv(&p.b, ub_jetty_jfr(p.b.jetty), 0, 0, 0), 0);
    post_send(&p.a, &p.pa, 7);
    uint64_t end = t_now() + N_WAIT_NS;
    struct ub_cr cr;
    int k = 0;
    while (k == 0) { /* (records of the ping-pong's last sends may come first) */
        ub_progress(p.a.ctx);
        k = ub_poll_jfc(p.b.jfc, 1, &cr);
        if (k == 1 && cr.opcode != UB_CR_OP_RECV)
            k = 0;
        assert_true(t_now() < end);
    }
    /* From here on only a is driven. */
    uint64_t t0 = t_now();
    while ((k = ub_poll_jfc(p.a.jfc, 1, &cr)) == 0 || cr.user_ctx != 7)
        assert_true(t_now() < end);
    uint64_t waited = t_now() - t0;
    assert_int_equal(cr.status, UB_CR_SUCCESS);
    assert_int_equal(cr.user_ctx, 7);
    print_message("completed %lu us after the peer stopped%s\n", (unsigned long)(waited / 1000),
                  busy ? " (after a busy ping-pong)" : "");
    pair_down(&p);
    return waited;
}

static void test_watchdog(void **state)
{
    (void)state;
    /* Within the failure bound with room to spare (1-3 ms on an idle machine). */
    assert_true(stop_after_take(false) < 200ull * 1000000ull);
}

/* The same when the period had grown: at most two periods of 4 ms on an idle machine. */
static void test_watchdog_after_busy(void **state)
{
    (void)state;
    assert_true(stop_after_take(true) < 200ull * 1000000ull);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pingpong_one_datagram),
        cmocka_unit_test(test_pingpong_paths),
        cmocka_unit_test(test_write_pingpong_one_datagram),
        cmocka_unit_test(test_pingpong_unheld),
        cmocka_unit_test(test_watchdog),
        cmocka_unit_test(test_watchdog_after_busy),
        cmocka_unit_test(test_pingpong_shm_answer_first),
        cmocka_unit_test(test_answer_takes_round_time),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
