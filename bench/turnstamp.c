/*
 * Where a ping-pong's turn goes, for any program that busy-polls sockets: preloaded, this
 * library times the socket calls of the first thread that makes one and, at exit, prints
 * per turn (a receive that returned data, up to the next send):
 *
 *   user     from that receive's return to the send's call: the program's own work
 *   send     the send call (over loopback it runs the peer's receive path inline)
 *   receive  the receive call that found the data
 *   polls    receive calls that found nothing between a send and the next data
 *   empty    such a receive call
 *   idle     from such a call's return to the next receive's call: the poller's own work per
 *            empty poll (with empty, the period at which it asks the kernel)
 *
 *   LD_PRELOAD=build-bench/bench/libturnstamp.so softub-perf send_lat ...
 *   LD_PRELOAD=build-bench/bench/libturnstamp.so build-bench/bench/raw_udp_pingpong ...
 *
 * It wraps libc's socket calls and syscall(2) (softub's udp device calls the kernel through
 * it). Medians and tails in nanoseconds on stderr; each stamp is a vDSO clock read (~25 ns
 * here), so a turn's user figure carries two of them. docs/perf-journal.md, "The turn".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_TURNS 1000000u

struct samples {
    uint32_t n;
    uint32_t *v;
};

static struct samples user_ns, send_ns, recv_ns, polls, empty_ns, idle_ns;
static atomic_flag claimed = ATOMIC_FLAG_INIT; /* a thread's calls are timed */
static _Thread_local int role;                 /* 1: this thread's are, 2: not */
static uint64_t rx_end;         /* the last data receive's return, 0 once a send used it */
static uint32_t empty_since_tx; /* failing receives since the last send */
static bool waiting;            /* a send went, its answer has not come */
static uint64_t empty_end;      /* the last failing receive's return, 0 after anything else */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void add(struct samples *s, uint64_t v)
{
    if (!s->v && !(s->v = malloc(MAX_TURNS * sizeof(*s->v))))
        return;
    if (s->n < MAX_TURNS)
        s->v[s->n++] = (uint32_t)(v > UINT32_MAX ? UINT32_MAX : v);
}

static bool mine(void)
{
    if (!role)
        role = atomic_flag_test_and_set(&claimed) ? 2 : 1;
    return role == 1;
}

static void on_recv(uint64_t t0, long r)
{
    uint64_t t1 = now_ns();
    if (empty_end)
        add(&idle_ns, t0 - empty_end);
    empty_end = 0;
    if (r > 0) {
        add(&recv_ns, t1 - t0);
        rx_end = t1;
        if (waiting)
            add(&polls, empty_since_tx);
        waiting = false;
    } else {
        empty_since_tx++;
        add(&empty_ns, t1 - t0);
        empty_end = t1;
    }
}

static void on_send(uint64_t t0)
{
    add(&send_ns, now_ns() - t0);
    if (rx_end)
        add(&user_ns, t0 - rx_end);
    rx_end = 0;
    empty_end = 0;
    empty_since_tx = 0;
    waiting = true;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void line(const char *what, struct samples *s)
{
    if (!s->n)
        return;
    qsort(s->v, s->n, sizeof(*s->v), cmp_u32);
    fprintf(stderr, "turnstamp: %-8s n %7u  p10 %6u  p50 %6u  p90 %6u  p99 %6u\n", what, s->n,
            s->v[s->n / 10], s->v[s->n / 2], s->v[s->n * 9 / 10], s->v[s->n * 99 / 100]);
}

static void report(void) __attribute__((destructor));
static void report(void)
{
    if (!send_ns.n)
        return;
    fprintf(stderr, "turnstamp: pid %d, ns per turn (polls: failing receives per turn)\n",
            (int)getpid());
    line("user", &user_ns);
    line("send", &send_ns);
    line("receive", &recv_ns);
    line("polls", &polls);
    line("empty", &empty_ns);
    line("idle", &idle_ns);
}

/* The next definition of name (libc's); POSIX's way to store dlsym's result in a function
 * pointer. */
#define REAL(name)                 \
    static name##_fn *real_##name; \
    if (!real_##name)              \
    *(void **)&real_##name = dlsym(RTLD_NEXT, #name)

typedef long syscall_fn(long, ...);
typedef ssize_t recv_fn(int, void *, size_t, int);
typedef ssize_t recvfrom_fn(int, void *, size_t, int, struct sockaddr *, socklen_t *);
typedef ssize_t recvmsg_fn(int, struct msghdr *, int);
typedef ssize_t send_fn(int, const void *, size_t, int);
typedef ssize_t sendto_fn(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
typedef ssize_t sendmsg_fn(int, const struct msghdr *, int);

long syscall(long nr, ...)
{
    REAL(syscall);
    va_list ap;
    va_start(ap, nr);
    long a[6];
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    bool rx = nr == SYS_recvmsg || nr == SYS_recvmmsg || nr == SYS_recvfrom;
    bool tx = nr == SYS_sendmsg || nr == SYS_sendmmsg || nr == SYS_sendto;
    if (!(rx || tx) || !mine())
        return real_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
    uint64_t t0 = now_ns();
    long r = real_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
    if (rx)
        on_recv(t0, r);
    else
        on_send(t0);
    return r;
}

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
    REAL(recv);
    if (!mine())
        return real_recv(fd, buf, len, flags);
    uint64_t t0 = now_ns();
    ssize_t r = real_recv(fd, buf, len, flags);
    on_recv(t0, r);
    return r;
}

ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *from, socklen_t *fl)
{
    REAL(recvfrom);
    if (!mine())
        return real_recvfrom(fd, buf, len, flags, from, fl);
    uint64_t t0 = now_ns();
    ssize_t r = real_recvfrom(fd, buf, len, flags, from, fl);
    on_recv(t0, r);
    return r;
}

ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
    REAL(recvmsg);
    if (!mine())
        return real_recvmsg(fd, m, flags);
    uint64_t t0 = now_ns();
    ssize_t r = real_recvmsg(fd, m, flags);
    on_recv(t0, r);
    return r;
}

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
    REAL(send);
    if (!mine())
        return real_send(fd, buf, len, flags);
    uint64_t t0 = now_ns();
    ssize_t r = real_send(fd, buf, len, flags);
    on_send(t0);
    return r;
}

ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *to,
               socklen_t tl)
{
    REAL(sendto);
    if (!mine())
        return real_sendto(fd, buf, len, flags, to, tl);
    uint64_t t0 = now_ns();
    ssize_t r = real_sendto(fd, buf, len, flags, to, tl);
    on_send(t0);
    return r;
}

ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
    REAL(sendmsg);
    if (!mine())
        return real_sendmsg(fd, m, flags);
    uint64_t t0 = now_ns();
    ssize_t r = real_sendmsg(fd, m, flags);
    on_send(t0);
    return r;
}
