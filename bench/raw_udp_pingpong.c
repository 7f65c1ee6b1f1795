/*
 * raw_udp_pingpong: the floor for any transport over UDP. Two processes bounce one
 * datagram back and forth over plain sockets, busy-polling non-blocking recv(); no
 * protocol, no reliability, no copies beyond the kernel's. Both sockets are connected (the
 * server connects to the client once its first datagram arrived): no destination to look up
 * per send, no address per receive. Half round trips, printed in softub-perf's latency
 * format (microseconds), by its statistics (tools/perf_stats.c).
 *
 *   raw_udp_pingpong [-p PORT] [-s BYTES] [-n ITERS] [-w WARMUP]              server
 *   raw_udp_pingpong [-p PORT] [-s BYTES] [-n ITERS] [-w WARMUP] SERVER_IP    client
 *
 * The server echoes every datagram until it has echoed WARMUP + ITERS of them or nothing
 * came for 10 s. Every wait is bounded.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "perf.h"

#define TIMEOUT_NS (10ull * 1000000000ull)

/* Busy-polls until a datagram arrives (its length) or the bound passes (-1). from: where it
 * came from (NULL on a connected socket). */
static ssize_t spin_recv(int fd, void *buf, size_t cap, struct sockaddr_in *from)
{
    uint64_t start = 0;
    for (unsigned k = 0;; k++) {
        socklen_t fl = sizeof(*from);
        ssize_t r = from ? recvfrom(fd, buf, cap, MSG_DONTWAIT, (struct sockaddr *)from, &fl)
                         : recv(fd, buf, cap, MSG_DONTWAIT);
        if (r >= 0)
            return r;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return -1;
        if ((k & 1023) == 0) {
            uint64_t t = perf_now_ns();
            if (!start)
                start = t;
            else if (t - start > TIMEOUT_NS)
                return -1;
        }
    }
}

int main(int argc, char **argv)
{
    int port = 18600, opt;
    unsigned long size = 8, iters = 100000, warmup = 1000;
    while ((opt = getopt(argc, argv, "p:s:n:w:")) != -1) {
        switch (opt) {
        case 'p':
            port = atoi(optarg);
            break;
        case 's':
            size = strtoul(optarg, NULL, 0);
            break;
        case 'n':
            iters = strtoul(optarg, NULL, 0);
            break;
        case 'w':
            warmup = strtoul(optarg, NULL, 0);
            break;
        default:
            fprintf(stderr, "usage: raw_udp_pingpong [-p PORT] [-s BYTES] [-n ITERS] [-w WARMUP] "
                            "[SERVER_IP]\n");
            return 2;
        }
    }
    if (port <= 0 || port > 65535 || size < 1 || size > 65507 || !iters) {
        fprintf(stderr, "raw_udp_pingpong: bad arguments\n");
        return 2;
    }
    const char *server = optind < argc ? argv[optind] : NULL;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        perror("socket");
        return 1;
    }
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    char *buf = calloc(1, 65536);
    if (!buf)
        return 1;
    struct sockaddr_in from;
    if (!server) {
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
            perror("bind");
            return 1;
        }
        for (unsigned long i = 0; i < warmup + iters; i++) {
            ssize_t r = spin_recv(fd, buf, 65536, i ? NULL : &from);
            if (r < 0)
                break;
            if (i == 0 && connect(fd, (struct sockaddr *)&from, sizeof(from)) != 0) {
                perror("connect");
                return 1;
            }
            if (send(fd, buf, (size_t)r, 0) != r) {
                perror("send");
                return 1;
            }
        }
        return 0;
    }
    if (inet_pton(AF_INET, server, &sa.sin_addr) != 1 ||
        connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        fprintf(stderr, "raw_udp_pingpong: bad server address %s\n", server);
        return 1;
    }
    uint64_t *s = malloc(iters * sizeof(*s));
    if (!s)
        return 1;
    /* The server may not be up yet: the first ping is retried every 10 ms for 10 s. */
    for (int tries = 0;; tries++) {
        if (send(fd, buf, size, 0) != (ssize_t)size && tries > 1000)
            return 1;
        uint64_t t0 = perf_now_ns();
        ssize_t r = -1;
        while (perf_now_ns() - t0 < 10000000ull && (r = recv(fd, buf, 65536, MSG_DONTWAIT)) < 0 &&
               errno == EAGAIN)
            ;
        if (r >= 0)
            break;
        if (tries > 1000) {
            fprintf(stderr, "raw_udp_pingpong: no answer from %s:%d\n", server, port);
            return 1;
        }
    }
    for (unsigned long i = 1; i < warmup + iters; i++) {
        uint64_t t0 = perf_now_ns();
        if (send(fd, buf, size, 0) != (ssize_t)size) {
            perror("send");
            return 1;
        }
        if (spin_recv(fd, buf, 65536, NULL) < 0) {
            fprintf(stderr, "raw_udp_pingpong: lost the server\n");
            return 1;
        }
        uint64_t t1 = perf_now_ns();
        if (i >= warmup)
            s[i - warmup] = t1 - t0;
    }
    size_t n = iters - (warmup ? 0 : 1);
    uint64_t *v = warmup ? s : s + 1;
    struct perf_lat l;
    perf_lat_stats(v, n, 0.5, &l); /* half round trips */
    printf(" %-10s %-11s %10s %10s %10s %10s %10s %10s %10s %10s\n", "#bytes", "#iterations",
           "t_min", "t_max", "t_median", "t_avg", "t_stdev", "99%", "99.9%", "99.99%");
    printf(" %-10lu %-11zu %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f\n", size, n,
           l.min, l.max, l.median, l.avg, l.stdev, l.p99, l.p999, l.p9999);
    free(s);
    free(buf);
    close(fd);
    return 0;
}
