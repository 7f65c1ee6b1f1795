/*
 * udp_calls: what each way of sending and receiving one small datagram costs on loopback.
 * One thread, two non-blocking sockets, a ping-pong (every receive finds its datagram, so
 * nothing waits): each round trip is two sends and two receives. Variants run alternately,
 * several rounds, and the best round of each is printed with its ratio to the plain one
 * (sendto + recv). The difference of two variants is the cost of what distinguishes them,
 * twice per round trip. docs/perf-journal.md, "The latency path's system calls".
 *
 *   udp_calls [ROUND_TRIPS [ROUNDS]]      (100000, 5)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define LEN 165 /* a softub ping-pong bundle: ACK, response and the next request */

enum {
    F_SENDMMSG = 1 << 0, /* send: sendmmsg of one message (else sendto) */
    F_CONNECT = 1 << 1,  /* send: connected sockets, send() without an address */
    F_RECVMSG = 1 << 2,  /* receive: recvmsg with address and control buffer (else recv) */
    F_RECVMMSG = 1 << 3, /* receive: recvmmsg, vector of 16 */
    F_RECVTOS = 1 << 4,  /* IP_RECVTOS and UDP_GRO on: a control message per datagram */
    F_EPOLL = 1 << 5,    /* epoll_wait (timeout 0) before each receive */
    F_NOCTL = 1 << 6,    /* recvmsg: no control buffer (the address only) */
    F_FROM = 1 << 7,     /* receive: recvfrom with the address */
    F_NONAME = 1 << 8,   /* recvmsg: no address (a connected socket knows its peer) */
    F_SENDMSG = 1 << 9,  /* with F_CONNECT: sendmsg of one iovec, no address (else send) */
};

static const struct variant {
    const char *name;
    unsigned flags;
} variants[] = {
    {"sendto + recv (plain)", 0},
    {"connected send + recv", F_CONNECT},
    {"connected sendmsg(1 iovec) + recv", F_CONNECT | F_SENDMSG},
    {"sendmmsg(1) + recv", F_SENDMMSG},
    {"sendto + recvfrom(name)", F_FROM},
    {"sendto + recvmsg(name)", F_RECVMSG | F_NOCTL},
    {"sendto + recvmsg(name, cmsg)", F_RECVMSG},
    {"sendto + recvmmsg(16)", F_RECVMMSG},
    {"sendto + recvmsg + IP_RECVTOS, GRO", F_RECVMSG | F_RECVTOS},
    {"sendto + epoll + recvmsg + TOS, GRO", F_EPOLL | F_RECVMSG | F_RECVTOS},
    {"sendmmsg + epoll + recvmmsg + TOS, GRO", F_SENDMMSG | F_EPOLL | F_RECVMMSG | F_RECVTOS},
    {"connected send + recvmsg + TOS, GRO", F_CONNECT | F_RECVMSG | F_RECVTOS},
    {"connected send + recvmsg(no name), TOS...", F_CONNECT | F_RECVMSG | F_RECVTOS | F_NONAME},
};
#define NV (sizeof(variants) / sizeof(variants[0]))

struct end {
    int fd;
    struct sockaddr_in self;
};

static uint8_t rxbuf[16][2048];

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void open_end(struct end *e, unsigned f)
{
    e->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    if (e->fd < 0)
        die("socket");
    int one = 1, tos = 2;
    if ((f & F_RECVTOS) && (setsockopt(e->fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos)) ||
                            setsockopt(e->fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one))))
        die("IP_RECVTOS");
    if (f & F_RECVTOS)
        (void)setsockopt(e->fd, IPPROTO_UDP, 104 /* UDP_GRO */, &one, sizeof(one));
    memset(&e->self, 0, sizeof(e->self));
    e->self.sin_family = AF_INET;
    e->self.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t l = sizeof(e->self);
    if (bind(e->fd, (struct sockaddr *)&e->self, l) ||
        getsockname(e->fd, (struct sockaddr *)&e->self, &l))
        die("bind");
}

static void send_one(const struct end *from, const struct end *to, unsigned f)
{
    static uint8_t buf[LEN];
    ssize_t r;
    if (f & F_SENDMSG) {
        struct iovec iov = {buf, LEN};
        struct msghdr h = {.msg_iov = &iov, .msg_iovlen = 1};
        r = sendmsg(from->fd, &h, 0);
    } else if (f & F_CONNECT) {
        r = send(from->fd, buf, LEN, 0);
    } else if (f & F_SENDMMSG) {
        struct iovec iov = {buf, LEN};
        struct mmsghdr m = {.msg_hdr = {.msg_name = (void *)&to->self,
                                        .msg_namelen = sizeof(to->self),
                                        .msg_iov = &iov,
                                        .msg_iovlen = 1}};
        r = sendmmsg(from->fd, &m, 1, 0) == 1 ? LEN : -1;
    } else {
        r = sendto(from->fd, buf, LEN, 0, (const struct sockaddr *)&to->self, sizeof(to->self));
    }
    if (r != LEN)
        die("send");
}

static void recv_one(const struct end *e, int ep, unsigned f)
{
    if (f & F_EPOLL) {
        struct epoll_event ev[4];
        if (epoll_wait(ep, ev, 4, 0) < 1)
            die("epoll_wait");
    }
    if (f & (F_RECVMSG | F_RECVMMSG)) {
        struct iovec iov[16];
        struct sockaddr_in name[16];
        char ctl[16][64];
        struct mmsghdr m[16];
        unsigned k = (f & F_RECVMMSG) ? 16 : 1;
        for (unsigned i = 0; i < k; i++) {
            iov[i] = (struct iovec){rxbuf[i], sizeof(rxbuf[i])};
            m[i].msg_hdr = (struct msghdr){.msg_name = (f & F_NONAME) ? NULL : &name[i],
                                           .msg_namelen = (f & F_NONAME) ? 0 : sizeof(name[i]),
                                           .msg_iov = &iov[i],
                                           .msg_iovlen = 1,
                                           .msg_control = (f & F_NOCTL) ? NULL : ctl[i],
                                           .msg_controllen = (f & F_NOCTL) ? 0 : sizeof(ctl[i])};
        }
        int r = (f & F_RECVMMSG) ? recvmmsg(e->fd, m, k, 0, NULL)
                                 : (recvmsg(e->fd, &m[0].msg_hdr, 0) == LEN ? 1 : -1);
        if (r != 1)
            die("recvmsg");
    } else if (f & F_FROM) {
        struct sockaddr_in name;
        socklen_t l = sizeof(name);
        if (recvfrom(e->fd, rxbuf[0], sizeof(rxbuf[0]), 0, (struct sockaddr *)&name, &l) != LEN)
            die("recvfrom");
    } else if (recv(e->fd, rxbuf[0], sizeof(rxbuf[0]), 0) != LEN) {
        die("recv");
    }
}

/* ns per round trip of variant f over n round trips. */
static double run(unsigned f, long n)
{
    struct end a, b;
    open_end(&a, f);
    open_end(&b, f);
    if ((f & F_CONNECT) && (connect(a.fd, (struct sockaddr *)&b.self, sizeof(b.self)) ||
                            connect(b.fd, (struct sockaddr *)&a.self, sizeof(a.self))))
        die("connect");
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, a.fd, &ev) ||
        epoll_ctl(ep, EPOLL_CTL_ADD, b.fd, &ev))
        die("epoll");
    uint64_t t0 = now_ns();
    for (long i = 0; i < n; i++) {
        send_one(&a, &b, f);
        recv_one(&b, ep, f);
        send_one(&b, &a, f);
        recv_one(&a, ep, f);
    }
    uint64_t t = now_ns() - t0;
    close(ep);
    close(a.fd);
    close(b.fd);
    return (double)t / (double)n;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000;
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    if (n < 1 || rounds < 1 || rounds > 100) {
        fprintf(stderr, "usage: udp_calls [ROUND_TRIPS [ROUNDS]]\n");
        return 2;
    }
    double best[NV];
    for (size_t v = 0; v < NV; v++)
        best[v] = 1e300;
    for (int r = 0; r < rounds; r++)
        for (size_t v = 0; v < NV; v++) {
            double t = run(variants[v].flags, n);
            if (t < best[v])
                best[v] = t;
        }
    printf("%-42s %12s %8s\n", "# variant (two sends, two receives)", "ns/round", "ratio");
    for (size_t v = 0; v < NV; v++)
        printf("%-42s %12.0f %8.2f\n", variants[v].name, best[v], best[v] / best[0]);
    return 0;
}
