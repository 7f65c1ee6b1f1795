/*
 * Helpers of the shm device's tests (test_shm.c, test_shm_life.c): devices opened from a
 * spec, children forked with a pipe each way and reaped within a bound, raw packets that
 * carry their producer, sequence number and a checked pattern, and numbered datagrams
 * through engines checked as they arrive.
 */
#ifndef UB_TEST_SHM_UTIL_H
#define UB_TEST_SHM_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* process_vm_*, kill under -std=c11 */
#endif
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <softub/errors.h>
#include "core/clock.h"
#include "dev/shm.h"
#include "engine/driver.h"
#include "engine/engine.h"

#define MTU        4096
#define LIMIT_NS   (20 * UB_NS_PER_S)
#define PIPE_MS    20000
#define E2E_PAYMIN 16u
#define E2E_PAYMAX 512u
#define MAXPROD    3

static inline uint64_t now_ns(void)
{
    return ub__clock_monotonic_ns(NULL);
}

static inline struct ub__dev *try_open(const char *spec)
{
    struct ub__shm_cfg cfg;
    struct ub__dev *d = NULL;
    if (ub__shm_cfg_parse(spec, &cfg) != 0 || ub__shm_open(&cfg, &d) != 0)
        return NULL;
    return d;
}

static inline struct ub__dev *open_spec(const char *spec)
{
    struct ub__dev *d = try_open(spec);
    assert_non_null(d);
    return d;
}

static inline struct ub__shm_stats stats_of(const struct ub__dev *d)
{
    struct ub__shm_stats st;
    memset(&st, 0, sizeof(st));
    if (ub__shm_stats(d, &st) != 0)
        abort();
    return st;
}

/* Whether endpoint id's object exists (closing or reclaiming an endpoint unlinks it). */
static inline bool obj_exists(uint16_t id)
{
    char name[UB_SHM_NAME_MAX];
    ub__shm_objname(id, name, sizeof(name));
    int fd = shm_open(name, O_RDONLY, 0);
    if (fd >= 0)
        close(fd);
    return fd >= 0;
}

/* Waits (bounded) until fd is readable; true if it is. */
static inline bool wait_fd(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r = poll(&p, 1, ms);
    return r > 0 && (p.revents & (POLLIN | POLLHUP));
}

/* ---- pipes between parent and child ------------------------------------------------ */

static inline bool put_u64(int fd, uint64_t v)
{
    return write(fd, &v, sizeof(v)) == (ssize_t)sizeof(v);
}

static inline bool get_u64(int fd, uint64_t *v, int ms)
{
    uint64_t end = now_ns() + UB_NS_PER_MS * (unsigned)ms;
    for (int i = 0; i < 1000 && now_ns() < end; i++) {
        if (!wait_fd(fd, 100))
            continue;
        ssize_t r = read(fd, v, sizeof(*v));
        if (r == (ssize_t)sizeof(*v))
            return true;
        if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN))
            return false;
    }
    return false;
}

struct child {
    pid_t pid;
    int to;   /* parent writes */
    int from; /* parent reads */
};

typedef int (*child_fn)(void *arg, int rd, int wr);

static inline struct child spawn(child_fn fn, void *arg)
{
    int a[2], b[2];
    assert_int_equal(pipe(a), 0);
    assert_int_equal(pipe(b), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(a[1]);
        close(b[0]);
        int rc = fn(arg, a[0], b[1]);
        _exit(rc);
    }
    close(a[0]);
    close(b[1]);
    return (struct child){pid, a[1], b[0]};
}

/* Waits for the child to exit (its pipe reaches EOF first, bounded); returns its status. */
static inline int reap(struct child *c)
{
    uint64_t end = now_ns() + (uint64_t)PIPE_MS * UB_NS_PER_MS;
    uint8_t junk[64];
    for (int i = 0; i < 100000 && now_ns() < end; i++) {
        if (!wait_fd(c->from, 100))
            continue;
        ssize_t r = read(c->from, junk, sizeof(junk));
        if (r == 0 || (r < 0 && errno != EINTR))
            break;
    }
    int st = 0;
    /* EOF comes as the child's files close, a moment before it can be waited for. */
    if (now_ns() >= end) {
        kill(c->pid, SIGKILL);
        waitpid(c->pid, &st, 0);
        st = -1;
    } else if (waitpid(c->pid, &st, 0) != c->pid) {
        st = -1;
    }
    close(c->to);
    close(c->from);
    return st;
}

static inline void expect_exit_ok(struct child *c)
{
    int st = reap(c);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
        fail_msg("child failed: status 0x%x", (unsigned)st);
}

/* ---- raw packets: [producer u32][seq u32] then a pattern --------------------------- */

static inline uint8_t pat(uint32_t prod, uint32_t seq, uint32_t i)
{
    return (uint8_t)(seq * 131u + i * 7u + prod * 29u);
}

static inline uint32_t raw_len(uint32_t seq)
{
    return 8 + seq % 120;
}

static inline void raw_fill(struct ub__pkt *p, uint32_t prod, uint32_t seq, uint16_t dst)
{
    uint32_t len = raw_len(seq);
    uint8_t *b = ub__pkt_put(p, len);
    memcpy(b, &prod, 4);
    memcpy(b + 4, &seq, 4);
    for (uint32_t i = 8; i < len; i++)
        b[i] = pat(prod, seq, i);
    ub__shm_addr(&p->addr, dst);
}

/* Checks a raw packet; returns its seq or UINT32_MAX when damaged. */
static inline uint32_t raw_check(const struct ub__pkt *p, uint32_t prod)
{
    uint32_t pr, seq;
    if (p->len < 8)
        return UINT32_MAX;
    memcpy(&pr, p->data, 4);
    memcpy(&seq, p->data + 4, 4);
    if (pr != prod || p->len != raw_len(seq))
        return UINT32_MAX;
    for (uint32_t i = 8; i < p->len; i++)
        if (p->data[i] != pat(prod, seq, i))
            return UINT32_MAX;
    return seq;
}

/*
 * Sends seq [from, to) of producer prod to dst, keeping refused packets and
 * retrying them (lossless), bounded in time. Returns the next seq not sent.
 */
static inline uint32_t raw_stream(struct ub__dev *d, struct ub__pktpool *pool, uint32_t prod,
                                  uint16_t dst, uint32_t from, uint32_t to, uint64_t limit_ns)
{
    struct ub__pkt *b[32];
    uint32_t held = 0, seq = from;
    uint64_t end = now_ns() + limit_ns;
    for (uint32_t it = 0; it < 100000000 && (seq < to || held); it++) {
        while (held < 32 && seq < to) {
            struct ub__pkt *p = ub__pkt_alloc(pool);
            if (!p)
                break;
            raw_fill(p, prod, seq++, dst);
            b[held++] = p;
        }
        int k = ub__dev_send(d, b, held);
        if (k < 0)
            break;
        memmove(b, b + k, (held - (uint32_t)k) * sizeof(b[0]));
        held -= (uint32_t)k;
        if (held) {
            if ((it & 63) == 0 && now_ns() > end)
                break;
            sched_yield();
        }
    }
    for (uint32_t i = 0; i < held; i++) {
        ub__pkt_free(b[i]);
        seq--;
    }
    return seq;
}

/* ---- engines: numbered datagrams, checked as they arrive ------------------------- */

/* What a consumer's engine received from each producer (index = the datagram's initiator). */
struct rx {
    uint16_t prod_id[MAXPROD];
    uint32_t next[MAXPROD];
    uint32_t received, bad, out_of_order;
    uint64_t bytes;
};

static inline uint32_t e2e_len(uint32_t seq)
{
    return E2E_PAYMIN + (seq * 2654435761u) % (E2E_PAYMAX - E2E_PAYMIN + 1);
}

static inline void e2e_payload(uint32_t prod, uint32_t seq, uint8_t *buf, uint32_t len)
{
    for (uint32_t i = 0; i < len; i++)
        buf[i] = pat(prod, seq, i);
}

static inline void on_dgram(void *arg, const struct ub__dgram_in *d, uint64_t now)
{
    struct rx *x = arg;
    (void)now;
    uint32_t prod = d->initiator, seq = (uint32_t)d->header_data;
    uint8_t buf[E2E_PAYMAX];
    if (prod >= MAXPROD || d->src->family != UB_AF_SHM || d->src->port != x->prod_id[prod] ||
        d->len != e2e_len(seq)) {
        x->bad++;
        return;
    }
    e2e_payload(prod, seq, buf, d->len);
    if (memcmp(buf, d->data, d->len) != 0) {
        x->bad++;
        return;
    }
    if (seq != x->next[prod])
        x->out_of_order++;
    x->next[prod] = seq + 1;
    x->received++;
    x->bytes += d->len;
}

static inline int engine_init(struct ub__engine *e, uint64_t seed)
{
    struct ub__engine_cfg ec = {
        .seed = seed, .mtu = MTU, .num_paths = 1, .pool_bufs = 2048, .txq_cap = 1024};
    return ub__engine_init(e, &ec);
}

#endif
