/*
 * The shared-memory device over a peer's life and at its edges: wake-ups of a sleeping
 * consumer (busy polling then arming, in one process and across two), a producer killed
 * mid-stream and its lane taken over, stale objects (an owner dead with its object left
 * behind, slots written but never published), single-copy (CMA) transfers, an endpoint of
 * another slot format version, garbage in the ring, and the bounded peer table. Prints CMA
 * throughput. The device's data path: test_shm.c.
 *
 * Children never use cmocka: they report through pipes and exit codes.
 * Every wait is a poll on a device fd or a pipe with a timeout, inside a
 * loop bounded in iterations and time; nothing sleeps to synchronise.
 */
#include "unit/shm_util.h"

/* ---- wake-ups ---------------------------------------------------------------------------- */

/*
 * Busy polling, then ub__shm_arm before a sleep: a wake-up byte left by an earlier packet is
 * drained, the fd is quiet, and the next packet makes it readable; with packets waiting,
 * ub__shm_arm says so instead.
 */
static void test_busy_poll_then_arm(void **state)
{
    (void)state;
    struct ub__dev *c = open_spec("shm://");
    struct ub__dev *p = open_spec("shm://");
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 16, 256, 0), 0);
    struct ub__pkt *in[4];
    int fd = ub__dev_fd(c);
    ub__shm_set_busy_poll(c, true);
    for (uint32_t i = 0; i < 3; i++) {
        struct ub__pkt *q = ub__pkt_alloc(&pool);
        raw_fill(q, 0, i, c->local.port);
        assert_int_equal(ub__dev_send(p, &q, 1), 1);
        assert_int_equal(ub__dev_recv(c, in, 4, &pool), 1);
        ub__pkt_free(in[0]);
        assert_int_equal(ub__dev_recv(c, in, 4, &pool), 0);
    }
    /* Armed at open: only the first packet wrote; busy receives drained nothing. */
    assert_int_equal(stats_of(p).wake_sent, 1);
    assert_int_equal(stats_of(c).wake_armed, 1);
    assert_true(wait_fd(fd, 0));
    assert_int_equal(ub__shm_arm(c), 0);
    assert_false(wait_fd(fd, 0));
    assert_int_equal(ub__shm_arm(c), 0); /* armed already: nothing to do */
    assert_int_equal(stats_of(c).wake_drained, 1);
    struct ub__pkt *q = ub__pkt_alloc(&pool);
    raw_fill(q, 0, 9, c->local.port);
    assert_int_equal(ub__dev_send(p, &q, 1), 1);
    assert_true(wait_fd(fd, 1000));
    assert_int_equal(ub__shm_arm(c), 1); /* a packet waits: receive, do not sleep */
    assert_int_equal(ub__dev_recv(c, in, 4, &pool), 1);
    ub__pkt_free(in[0]);
    struct ub__dev *nw = open_spec("shm://?wake=0");
    assert_int_equal(ub__shm_arm(nw), 0);
    ub__dev_close(nw);
    ub__dev_close(c);
    ub__dev_close(p);
    ub__pktpool_fini(&pool);
}

static void test_wake_one_process(void **state)
{
    (void)state;
    struct ub__dev *c = open_spec("shm://");
    struct ub__dev *p = open_spec("shm://");
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 16, 256, 0), 0);
    struct ub__pkt *in[4];
    int fd = ub__dev_fd(c);

    /* Armed from the open (an empty receive would ask to be woken); the fd is quiet until
     * a send. */
    assert_int_equal(stats_of(c).wake_armed, 1);
    assert_int_equal(ub__dev_recv(c, in, 4, &pool), 0);
    assert_int_equal(stats_of(c).wake_armed, 1);
    assert_false(wait_fd(fd, 0));
    assert_int_equal(ub__dev_recv(c, in, 4, &pool), 0); /* still armed: no second arm */
    assert_int_equal(stats_of(c).wake_armed, 1);
    struct ub__pkt *q = ub__pkt_alloc(&pool);
    raw_fill(q, 0, 0, c->local.port);
    assert_int_equal(ub__dev_send(p, &q, 1), 1);
    assert_int_equal(stats_of(p).wake_sent, 1);
    assert_true(wait_fd(fd, 1000));
    /* A second send before the consumer asked again costs no wake-up. */
    q = ub__pkt_alloc(&pool);
    raw_fill(q, 0, 1, c->local.port);
    assert_int_equal(ub__dev_send(p, &q, 1), 1);
    struct ub__shm_stats sp = stats_of(p);
    assert_int_equal(sp.wake_sent, 1);
    assert_int_equal(sp.wake_avoided, 1);
    assert_int_equal(ub__dev_recv(c, in, 4, &pool), 2);
    ub__pkt_free(in[0]);
    ub__pkt_free(in[1]);
    /* Empty again: the FIFO is drained and the request renewed; the fd is quiet. */
    assert_int_equal(ub__dev_recv(c, in, 4, &pool), 0);
    struct ub__shm_stats sc = stats_of(c);
    assert_int_equal(sc.wake_drained, 1);
    assert_int_equal(sc.wake_armed, 2);
    assert_false(wait_fd(fd, 0));

    /* wake=0: fd -1, producers never write. */
    struct ub__dev *nw = open_spec("shm://?wake=0");
    assert_int_equal(ub__dev_fd(nw), -1);
    assert_int_equal(ub__dev_recv(nw, in, 4, &pool), 0);
    q = ub__pkt_alloc(&pool);
    raw_fill(q, 0, 0, nw->local.port);
    assert_int_equal(ub__dev_send(p, &q, 1), 1);
    assert_int_equal(stats_of(p).wake_sent, 1);
    assert_int_equal(ub__dev_recv(nw, in, 4, &pool), 1);
    ub__pkt_free(in[0]);
    ub__dev_close(nw);
    ub__dev_close(p);
    ub__dev_close(c);
    ub__pktpool_fini(&pool);
}

/* Child: sleeps on its fd (one poll, up to 10 s) after an empty receive; reports the wait. */
static int child_sleeper(void *arg, int rd, int wr)
{
    (void)arg;
    (void)rd;
    struct ub__dev *d = try_open("shm://");
    struct ub__pktpool pool;
    if (!d || ub__pktpool_init(&pool, 16, 256, 0) != 0)
        return 2;
    struct ub__pkt *in[4];
    if (ub__dev_recv(d, in, 4, &pool) != 0 || !put_u64(wr, d->local.port))
        return 3;
    uint64_t t0 = now_ns();
    bool woke = wait_fd(ub__dev_fd(d), 10000);
    uint64_t slept = now_ns() - t0;
    int n = ub__dev_recv(d, in, 4, &pool);
    if (!woke || n != 1 || raw_check(in[0], 9) != 77)
        return 4;
    ub__pkt_free(in[0]);
    if (!put_u64(wr, slept))
        return 5;
    ub__dev_close(d);
    ub__pktpool_fini(&pool);
    return 0;
}

static void test_wake_two_processes(void **state)
{
    (void)state;
    struct child ch = spawn(child_sleeper, NULL);
    uint64_t id, slept;
    assert_true(get_u64(ch.from, &id, PIPE_MS));
    struct ub__dev *p = open_spec("shm://");
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 16, 256, 0), 0);
    /* The child reported its id after its empty receive: it is (about to be) asleep. */
    struct ub__pkt *q = ub__pkt_alloc(&pool);
    raw_fill(q, 9, 77, (uint16_t)id);
    assert_int_equal(ub__dev_send(p, &q, 1), 1);
    assert_int_equal(stats_of(p).wake_sent, 1);
    assert_true(get_u64(ch.from, &slept, PIPE_MS));
    expect_exit_ok(&ch);
    assert_true(slept < 5 * UB_NS_PER_S);
    ub__dev_close(p);
    ub__pktpool_fini(&pool);
}

/* Maps c's shared-memory object as a peer with write access would (to scribble on it). */
static uint8_t *map_object(const struct ub__dev *c, struct ub__shm_layout *lay)
{
    assert_int_equal(ub__shm_layout(c, lay), 0);
    char name[UB_SHM_NAME_MAX];
    ub__shm_objname(c->local.port, name, sizeof(name));
    int fd = shm_open(name, O_RDWR, 0);
    assert_true(fd >= 0);
    uint8_t *m = mmap(NULL, lay->obj_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(m != MAP_FAILED);
    close(fd);
    return m;
}

/* A child's producer: opens a device, tells the parent its id, learns the parent's, and
 * streams `count` packets to it (bounded by limit_ns). 0 when all went. */
static int child_stream(int rd, int wr, uint32_t count, uint64_t limit_ns)
{
    struct ub__dev *d = try_open("shm://");
    struct ub__pktpool pool;
    if (!d || ub__pktpool_init(&pool, 128, 256, 0) != 0)
        return 2;
    uint64_t cid;
    if (!put_u64(wr, d->local.port) || !get_u64(rd, &cid, PIPE_MS))
        return 3;
    return raw_stream(d, &pool, 0, (uint16_t)cid, 0, count, limit_ns) == count ? 0 : 4;
}

/* ---- a producer killed mid-stream ---------------------------------------------------------- */

static int child_endless(void *arg, int rd, int wr)
{
    (void)arg;
    /* Until killed (bounded: a lost parent must not leave us running). */
    return child_stream(rd, wr, UINT32_MAX - 1, 15 * UB_NS_PER_S);
}

static void test_producer_killed(void **state)
{
    (void)state;
    struct child ch = spawn(child_endless, NULL);
    struct ub__dev *c = open_spec("shm://?lanes=1&slots=64");
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 256, 256, 0), 0);
    uint64_t pid_id;
    assert_true(get_u64(ch.from, &pid_id, PIPE_MS));
    assert_true(put_u64(ch.to, c->local.port));
    uint32_t next = 0, bad = 0;
    bool killed = false;
    uint64_t end = now_ns() + LIMIT_NS;
    int empty = 0;
    for (uint32_t it = 0; it < 10000000 && now_ns() < end; it++) {
        struct ub__pkt *in[64];
        int k = ub__dev_recv(c, in, 64, &pool);
        assert_true(k >= 0);
        for (int j = 0; j < k; j++) {
            if (in[j]->addr.port != pid_id || raw_check(in[j], 0) != next)
                bad++;
            next++;
            ub__pkt_free(in[j]);
        }
        if (!killed && next >= 5000) {
            /* Mid-stream: it is writing slots as fast as we free them. */
            kill(ch.pid, SIGKILL);
            int st;
            assert_int_equal(waitpid(ch.pid, &st, 0), ch.pid);
            assert_true(WIFSIGNALED(st));
            killed = true;
        }
        if (k == 0 && killed && ++empty > 3)
            break;
        if (k == 0 && !killed)
            wait_fd(ub__dev_fd(c), 10);
    }
    close(ch.to);
    close(ch.from);
    assert_true(killed);
    assert_int_equal(bad, 0); /* everything published arrived whole and in order */
    /* The only lane belongs to a dead process: a new producer takes it over. */
    struct ub__dev *p = open_spec("shm://");
    assert_true(ub__shm_tx_space(p, &c->local) > 0);
    assert_int_equal(stats_of(p).lanes_reclaimed, 1);
    assert_int_equal(raw_stream(p, &pool, 1, c->local.port, 0, 32, LIMIT_NS), 32);
    struct ub__pkt *in[64];
    assert_int_equal(ub__dev_recv(c, in, 64, &pool), 32);
    for (int j = 0; j < 32; j++) {
        assert_int_equal(raw_check(in[j], 1), (uint32_t)j);
        assert_int_equal(in[j]->addr.port, p->local.port);
        ub__pkt_free(in[j]);
    }
    print_message("  killed producer after %u packets; consumer drained, lane taken over\n", next);
    /* The dead child's own endpoint stayed behind: opening its id reclaims it. */
    char spec[32];
    snprintf(spec, sizeof(spec), "shm://%u", (unsigned)pid_id);
    struct ub__dev *again = open_spec(spec);
    assert_int_equal(stats_of(again).stale_reclaimed, 1);
    ub__dev_close(again);
    assert_false(obj_exists((uint16_t)pid_id));
    ub__dev_close(p);
    ub__dev_close(c);
    ub__pktpool_fini(&pool);
}

/* ---- stale objects -------------------------------------------------------------------------- */

static int child_die_open(void *arg, int rd, int wr)
{
    (void)arg;
    struct ub__dev *d = try_open("shm://?slots=4");
    if (!d || !put_u64(wr, d->local.port))
        return 2;
    uint64_t go;
    if (!get_u64(rd, &go, PIPE_MS))
        return 3;
    raise(SIGKILL); /* never closes: the object stays behind, its lock dies with us */
    return 4;
}

static void test_stale_reclaim(void **state)
{
    (void)state;
    struct child ch = spawn(child_die_open, NULL);
    uint64_t id;
    assert_true(get_u64(ch.from, &id, PIPE_MS));
    struct ub__addr dead;
    ub__shm_addr(&dead, (uint16_t)id);
    assert_int_equal(ub__shm_reachable(&dead), 0);
    /* A producer attached while the owner lived fills the lane, then the owner dies. */
    struct ub__dev *p = open_spec("shm://");
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 64, 256, 0), 0);
    assert_int_equal(raw_stream(p, &pool, 0, (uint16_t)id, 0, 4, LIMIT_NS), 4);
    assert_true(put_u64(ch.to, 1));
    int st = reap(&ch);
    assert_true(WIFSIGNALED(st));
    assert_true(obj_exists((uint16_t)id));
    assert_int_equal(ub__shm_reachable(&dead), UB_EUNREACH);
    /* The full lane of a dead receiver: recognised, dropped, not a stall. */
    struct ub__pkt *q = ub__pkt_alloc(&pool);
    raw_fill(q, 0, 4, (uint16_t)id);
    assert_int_equal(ub__dev_send(p, &q, 1), 1);
    struct ub__shm_stats sp = stats_of(p);
    assert_int_equal(sp.peer_dead, 1);
    assert_int_equal(sp.tx_unreach, 1);
    assert_int_equal(sp.peers, 0);
    /* ... and named once for the layers above. */
    uint16_t gone[4];
    assert_int_equal(ub__shm_take_gone(p, gone, 4), 1);
    assert_int_equal(gone[0], id);
    assert_int_equal(ub__shm_take_gone(p, gone, 4), 0);

    /* Opening the id reclaims the stale object. */
    char spec[32];
    snprintf(spec, sizeof(spec), "shm://%u", (unsigned)id);
    struct ub__dev *c = open_spec(spec);
    assert_int_equal(stats_of(c).stale_reclaimed, 1);
    assert_int_equal(ub__shm_reachable(&dead), 0);
    /* The producer reaches the new owner. */
    assert_int_equal(raw_stream(p, &pool, 0, (uint16_t)id, 0, 3, LIMIT_NS), 3);
    struct ub__pkt *in[8];
    assert_int_equal(ub__dev_recv(c, in, 8, &pool), 3);
    for (int j = 0; j < 3; j++) {
        assert_int_equal(raw_check(in[j], 0), (uint32_t)j);
        ub__pkt_free(in[j]);
    }
    /* check_peers finds nothing dead now; a closed receiver is noticed on the next send. */
    assert_int_equal(ub__shm_check_peers(p), 0);
    ub__dev_close(c);
    q = ub__pkt_alloc(&pool);
    raw_fill(q, 0, 4, (uint16_t)id);
    assert_int_equal(ub__dev_send(p, &q, 1), 1);
    assert_int_equal(stats_of(p).peer_dead, 2);
    assert_int_equal(ub__shm_take_gone(p, gone, 4), 1);
    assert_int_equal(gone[0], id);
    ub__dev_close(p);
    ub__pktpool_fini(&pool);
}

/* Streams ten packets to the endpoint the parent names, then exits without closing. */
static int child_ten_then_exit(void *arg, int rd, int wr)
{
    (void)arg;
    return child_stream(rd, wr, 10, LIMIT_NS);
}

/*
 * A producer that died after writing slots but before publishing its tail: those slots are
 * complete (their sequence words were stored last), and the consumer reads them, possibly
 * before the lane's tail covers them. The producer that takes the lane over continues after
 * them, not from the stale tail: it neither overwrites slots the consumer has yet to read nor
 * writes behind the consumer's head (where nothing would read them and the lane would look
 * full for good).
 */
static void test_takeover_unpublished(void **state)
{
    (void)state;
    struct ub__dev *c = open_spec("shm://?lanes=1&slots=64");
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 64, 256, 0), 0);
    struct child ch = spawn(child_ten_then_exit, NULL);
    uint64_t id;
    assert_true(get_u64(ch.from, &id, PIPE_MS));
    assert_true(put_u64(ch.to, c->local.port));
    assert_int_equal(reap(&ch), 0);
    /* Its last three slots, as if never published. */
    struct ub__shm_layout lay;
    uint8_t *m = map_object(c, &lay);
    uint64_t tail = 7;
    memcpy(m + lay.lane_off + 64, &tail, 8);
    /* The consumer reads eight, one past the stale tail. */
    struct ub__pkt *in[16];
    assert_int_equal(ub__dev_recv(c, in, 8, &pool), 8);
    for (int j = 0; j < 8; j++) {
        assert_int_equal(raw_check(in[j], 0), (uint32_t)j);
        ub__pkt_free(in[j]);
    }
    /* A new producer takes the lane over and sends four; all fourteen arrive, in order. */
    struct ub__dev *p = open_spec("shm://");
    assert_int_equal(raw_stream(p, &pool, 1, c->local.port, 0, 4, LIMIT_NS), 4);
    assert_int_equal(stats_of(p).lanes_reclaimed, 1);
    assert_int_equal(ub__dev_recv(c, in, 16, &pool), 6);
    for (int j = 0; j < 6; j++) {
        assert_int_equal(raw_check(in[j], j < 2 ? 0 : 1), (uint32_t)(j < 2 ? 8 + j : j - 2));
        ub__pkt_free(in[j]);
    }
    munmap(m, lay.obj_size);
    ub__dev_close(p);
    ub__dev_close(c);
    ub__pktpool_fini(&pool);
}

/* ---- CMA ------------------------------------------------------------------------------------ */

#define CMA_SIZE (64u << 20)

static int child_cma(void *arg, int rd, int wr)
{
    (void)arg;
    uint8_t *buf = malloc(CMA_SIZE);
    struct ub__dev *d = try_open("shm://");
    if (!buf || !d)
        return 2;
    for (uint32_t i = 0; i < CMA_SIZE; i += 4) {
        uint32_t v = i * 2654435761u;
        memcpy(buf + i, &v, 4);
    }
    uint64_t go;
    if (!put_u64(wr, d->local.port) || !put_u64(wr, (uint64_t)(uintptr_t)buf) ||
        !get_u64(rd, &go, PIPE_MS))
        return 3;
    if (go == 2) { /* the parent wrote its pattern: check it */
        for (uint32_t i = 0; i < CMA_SIZE; i += 4) {
            uint32_t v;
            memcpy(&v, buf + i, 4);
            if (v != ~(i * 2654435761u))
                return 4;
        }
    }
    ub__dev_close(d);
    free(buf);
    return 0;
}

static void test_cma(void **state)
{
    (void)state;
    struct child ch = spawn(child_cma, NULL);
    uint64_t id, addr;
    assert_true(get_u64(ch.from, &id, PIPE_MS));
    assert_true(get_u64(ch.from, &addr, PIPE_MS));
    struct ub__dev *p = open_spec("shm://");
    struct ub__addr dst;
    ub__shm_addr(&dst, (uint16_t)id);
    pid_t pid = 0;
    int rc = ub__shm_peer_cma(p, &dst, &pid);
    if (rc == UB_ENOTSUP) {
        assert_true(put_u64(ch.to, 1));
        expect_exit_ok(&ch);
        ub__dev_close(p);
        print_message("  skipped: process_vm_readv not permitted here (ptrace policy)\n");
        skip();
    }
    assert_int_equal(rc, 0);
    assert_int_equal(pid, ch.pid);
    uint8_t *buf = malloc(CMA_SIZE);
    assert_non_null(buf);
    memset(buf, 0, CMA_SIZE); /* fault the pages in: time the copy, not the page faults */
    /* Two local segments, one remote range: exercises the iov walk. */
    struct iovec iov[2] = {{buf, CMA_SIZE / 3}, {buf + CMA_SIZE / 3, CMA_SIZE - CMA_SIZE / 3}};
    uint64_t t0 = now_ns();
    assert_int_equal(ub__shm_cma_read(pid, addr, iov, 2), 0);
    double rd = (double)(now_ns() - t0) / 1e9;
    for (uint32_t i = 0; i < CMA_SIZE; i += 4) {
        uint32_t v;
        memcpy(&v, buf + i, 4);
        if (v != i * 2654435761u)
            fail_msg("CMA read mismatch at %u", i);
    }
    for (uint32_t i = 0; i < CMA_SIZE; i += 4) {
        uint32_t v = ~(i * 2654435761u);
        memcpy(buf + i, &v, 4);
    }
    t0 = now_ns();
    assert_int_equal(ub__shm_cma_write(pid, addr, iov, 2), 0);
    double wr = (double)(now_ns() - t0) / 1e9;
    print_message("  CMA 64 MiB: read %.2f GB/s, write %.2f GB/s\n", CMA_SIZE / rd / 1e9,
                  CMA_SIZE / wr / 1e9);
    /* Errors: past the end of the child's memory map, a bad pid. */
    struct iovec one = {buf, 4096};
    assert_int_equal(ub__shm_cma_read(pid, 16, &one, 1), UB_EINVAL);
    assert_int_equal(ub__shm_cma_read(0, addr, &one, 1), UB_EINVAL);
    assert_true(put_u64(ch.to, 2));
    expect_exit_ok(&ch);
    assert_int_equal(ub__shm_cma_read(pid, addr, &one, 1), UB_EUNREACH);
    free(buf);
    /* A single copy's fixed part, timed on this process (always permitted): some ns, less
     * than a second. */
    uint64_t cost = ub__shm_cma_cost_ns();
    print_message("  a one-page single copy: %" PRIu64 " ns\n", cost);
    assert_true(cost > 0 && cost < 1000000000ull);
    ub__dev_close(p);
}

/* ---- another slot format version ------------------------------------------------------- */

/* An endpoint of another slot format version (header word at offset 8): reachable neither
 * for the API's device choice nor for a send, and said so (UB_EPROTO, attach_version, a
 * gone report). */
static void test_other_version(void **state)
{
    (void)state;
    struct ub__dev *c = open_spec("shm://");
    struct ub__dev *p = open_spec("shm://");
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 8, 2048, 64), 0);
    struct ub__shm_layout lay;
    uint8_t *m = map_object(c, &lay);
    uint32_t mine;
    memcpy(&mine, m + 8, 4);
    uint32_t other = mine - 1;
    memcpy(m + 8, &other, 4);
    assert_int_equal(ub__shm_reachable(&c->local), UB_EPROTO);
    assert_int_equal(ub__shm_tx_space(p, &c->local), UB_EPROTO);
    struct ub__pkt *pk = ub__pkt_alloc(&pool);
    raw_fill(pk, 1, 0, c->local.port);
    assert_int_equal(ub__dev_send(p, &pk, 1), 1); /* accepted, dropped */
    struct ub__shm_stats sp = stats_of(p);
    assert_int_equal(sp.attach_version, 2);
    assert_int_equal(sp.tx_unreach, 1);
    assert_int_equal(sp.attach, 0);
    /* Reported as gone (once), so that the requests to it fail now, not at their bound. */
    uint16_t ids[4];
    assert_int_equal(ub__shm_take_gone(p, ids, 4), 1);
    assert_int_equal(ids[0], c->local.port);
    memcpy(m + 8, &mine, 4); /* the same version again: attached */
    assert_int_equal(ub__shm_reachable(&c->local), 0);
    assert_true(ub__shm_tx_space(p, &c->local) > 0);
    assert_int_equal(stats_of(p).attach, 1);
    munmap(m, lay.obj_size);
    ub__dev_close(p);
    ub__dev_close(c);
    assert_int_equal(pool.avail, pool.count);
    ub__pktpool_fini(&pool);
}

/* ---- garbage in the ring ------------------------------------------------------------------- */

static void test_garbage(void **state)
{
    (void)state;
    struct ub__dev *c = open_spec("shm://?lanes=1&slots=64&mtu=1024");
    struct ub__dev *p = open_spec("shm://");
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 128, 2048, 0), 0);
    struct ub__engine e;
    assert_int_equal(engine_init(&e, 5), 0);
    struct rx x = {0};
    static const struct ub__engine_upcalls up = {.dgram = on_dgram};
    ub__engine_set_upcalls(&e, &up, &x);
    assert_int_equal(raw_stream(p, &pool, 0, c->local.port, 0, 48, LIMIT_NS), 48);

    /* Scribble over every slot but its sequence word (the first four bytes, which make it
     * readable): even ones get a plausible length and are whole, odd ones are all noise
     * (delta-encoded ones among them refer to no datagram and are dropped). */
    struct ub__shm_layout lay;
    uint8_t *m = map_object(c, &lay);
    uint64_t r = 0x9e3779b97f4a7c15ull;
    uint32_t slot_size = (uint32_t)(lay.slot_len / 64);
    for (uint64_t i = 0; i < lay.slot_len; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        if (i % slot_size >= 4)
            m[lay.slot_off + i] = (uint8_t)r;
    }
    uint32_t plausible = 0;
    for (uint32_t s = 0; s < 64; s += 2) {
        uint32_t len = (uint32_t)((s * 37u) % 1025u);
        memcpy(m + lay.slot_off + (uint64_t)s * slot_size + 4, &len, 4);
        m[lay.slot_off + (uint64_t)s * slot_size + 13] = 0; /* sent whole, not delta-encoded */
        plausible += s < 48;
    }
    struct ub__drive_stats ds = {0};
    for (int i = 0; i < 8; i++)
        ub__drive_once(&e, c, now_ns(), &ds);
    struct ub__shm_stats sc = stats_of(c);
    assert_int_equal(sc.rx_pkts + sc.rx_bad_slot, 48);
    assert_true(sc.rx_pkts >= plausible);
    assert_int_equal(e.stats.rx_pkts, sc.rx_pkts);
    assert_int_equal(e.stats.rx_delivered + e.stats.rx_malformed + e.stats.rx_unsupported,
                     sc.rx_pkts);
    assert_true(e.stats.rx_malformed > 0);
    print_message("  garbage: %" PRIu64 " slots handed up (%" PRIu64 " malformed, %" PRIu64
                  " unsupported), %" PRIu64 " bad lengths dropped\n",
                  sc.rx_pkts, e.stats.rx_malformed, e.stats.rx_unsupported, sc.rx_bad_slot);

    /* A tail far ahead of the head: the consumer goes by the slots' own sequence words and
     * reads nothing more, nor less, than what the producer writes next. */
    uint64_t bogus = 1ull << 40;
    memcpy(m + lay.lane_off + 64, &bogus, 8);
    uint64_t before = stats_of(c).rx_pkts;
    ub__drive_once(&e, c, now_ns(), &ds);
    assert_int_equal(stats_of(c).rx_pkts, before);
    assert_int_equal(raw_stream(p, &pool, 0, c->local.port, 0, 5, LIMIT_NS), 5);
    struct ub__pkt *in[8];
    assert_int_equal(ub__dev_recv(c, in, 8, &pool), 5);
    for (int j = 0; j < 5; j++) {
        assert_int_equal(raw_check(in[j], 0), (uint32_t)j);
        ub__pkt_free(in[j]);
    }
    munmap(m, lay.obj_size);
    ub__dev_close(p);
    ub__dev_close(c);
    ub__engine_fini(&e);
    ub__pktpool_fini(&pool);
}

/* ---- the bounded peer table ----------------------------------------------------------------- */

static void test_peer_table(void **state)
{
    (void)state;
    struct ub__dev *c[3];
    for (int i = 0; i < 3; i++)
        c[i] = open_spec("shm://");
    struct ub__dev *p = open_spec("shm://?peers=2");
    struct ub__pktpool pool;
    assert_int_equal(ub__pktpool_init(&pool, 64, 256, 0), 0);
    /* a, b, c, a: the third attach evicts a (least recent), the fourth evicts b. */
    static const int order[] = {0, 1, 2, 0};
    for (int k = 0; k < 4; k++) {
        struct ub__pkt *q = ub__pkt_alloc(&pool);
        raw_fill(q, 0, (uint32_t)k, c[order[k]]->local.port);
        assert_int_equal(ub__dev_send(p, &q, 1), 1);
    }
    struct ub__shm_stats sp = stats_of(p);
    assert_int_equal(sp.attach, 4);
    assert_int_equal(sp.evicted, 2);
    assert_int_equal(sp.detach, 2);
    assert_int_equal(sp.peers, 2);
    uint32_t got = 0;
    for (int i = 0; i < 3; i++) {
        struct ub__pkt *in[4];
        int n = ub__dev_recv(c[i], in, 4, &pool);
        assert_int_equal(n, i == 0 ? 2 : 1);
        for (int j = 0; j < n; j++)
            ub__pkt_free(in[j]);
        got += (uint32_t)n;
    }
    assert_int_equal(got, 4);
    ub__dev_close(p);
    for (int i = 0; i < 3; i++)
        ub__dev_close(c[i]);
    ub__pktpool_fini(&pool);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_other_version),
        cmocka_unit_test(test_peer_table),
        cmocka_unit_test(test_wake_one_process),
        cmocka_unit_test(test_busy_poll_then_arm),
        cmocka_unit_test(test_wake_two_processes),
        cmocka_unit_test(test_producer_killed),
        cmocka_unit_test(test_takeover_unpublished),
        cmocka_unit_test(test_stale_reclaim),
        cmocka_unit_test(test_cma),
        cmocka_unit_test(test_garbage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
