/*
 * The bootstrap helper: descriptor blobs between processes over a TCP connection or a
 * file. Messages are framed (4-byte big-endian length, then the bytes); every call is
 * bounded by its timeout. Not on any fast path: plain blocking-with-poll code.
 *
 * A timeout never cuts a frame in two. The receiver keeps a frame it has begun (the length
 * bytes it has, then the body) across calls and finishes it on the next one, so polling
 * with timeout 0 sees every message whole. The sender writes length and body with one
 * sendmsg; once any byte of a frame is on the stream it finishes the frame, waiting past
 * the caller's timeout by at most SEND_GRACE_MS, or marks the connection broken.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <softub/errors.h>
#include "api/api.h"
#include "core/compiler.h"

enum { HDR_LEN = 4, SEND_GRACE_MS = 1000 };

struct ub_bootstrap {
    int fd;
    bool listening;
    bool broken; /* the framing is lost (a frame cut short, a bad length): UB_EIO from now */
    struct sockaddr_storage sa;
    socklen_t salen;
    /* The frame being received, kept across calls: its length bytes, then its body. */
    uint8_t rx_hdr[HDR_LEN];
    size_t rx_hdr_got;
    size_t rx_got;
    uint8_t *rx_body; /* UB_BOOTSTRAP_MAX_MSG bytes, allocated on the first non-empty body */
};

static uint64_t now_ms(void)
{
    return ub__clock_monotonic_ns(NULL) / UB_NS_PER_MS;
}

static int left_ms(uint64_t deadline)
{
    uint64_t n = now_ms();
    return n >= deadline ? 0 : (int)(deadline - n);
}

/* Waits up to ms for fd to be readable or writable; UB_EIO if poll fails. */
static int wait_fd(int fd, bool out, int ms)
{
    struct pollfd pf = {.fd = fd, .events = (short)(out ? POLLOUT : POLLIN)};
    if (poll(&pf, 1, ms) < 0 && errno != EINTR)
        return UB_EIO;
    return 0;
}

static bool would_block(void)
{
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

/* "tcp://IP:PORT", IPv4 or "[IPv6]". */
static int parse_tcp(const char *uri, struct sockaddr_storage *sa, socklen_t *salen)
{
    if (!uri || strncmp(uri, "tcp://", 6) != 0)
        return UB_EINVAL;
    const char *h = uri + 6;
    char host[64];
    const char *colon;
    bool v6 = *h == '[';
    if (v6) {
        const char *e = strchr(h, ']');
        if (!e || (size_t)(e - h - 1) >= sizeof(host) || e[1] != ':')
            return UB_EINVAL;
        memcpy(host, h + 1, (size_t)(e - h - 1));
        host[e - h - 1] = '\0';
        colon = e + 1;
    } else {
        colon = strrchr(h, ':');
        if (!colon || (size_t)(colon - h) >= sizeof(host))
            return UB_EINVAL;
        memcpy(host, h, (size_t)(colon - h));
        host[colon - h] = '\0';
    }
    char *end;
    errno = 0;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (errno || *end || end == colon + 1 || port > 65535)
        return UB_EINVAL;
    memset(sa, 0, sizeof(*sa));
    if (v6) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)sa;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        if (inet_pton(AF_INET6, host, &s6->sin6_addr) != 1)
            return UB_EINVAL;
        *salen = sizeof(*s6);
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)sa;
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)port);
        if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
            return UB_EINVAL;
        *salen = sizeof(*s4);
    }
    return 0;
}

UB_EXPORT int ub_bootstrap_listen(const char *uri, ub_bootstrap **out)
{
    if (!out)
        return UB_EINVAL;
    ub_bootstrap *b = calloc(1, sizeof(*b));
    if (!b)
        return UB_ENOMEM;
    int rc = parse_tcp(uri, &b->sa, &b->salen);
    if (rc) {
        free(b);
        return rc;
    }
    b->fd = socket(b->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (b->fd < 0 || setsockopt(b->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0)
        goto io;
    if (bind(b->fd, (struct sockaddr *)&b->sa, b->salen) != 0) {
        rc = errno == EADDRINUSE ? UB_EBUSY : UB_EIO;
        goto fail;
    }
    b->salen = sizeof(b->sa);
    if (listen(b->fd, 4) != 0 || getsockname(b->fd, (struct sockaddr *)&b->sa, &b->salen) != 0)
        goto io;
    b->listening = true;
    *out = b;
    return 0;
io:
    rc = UB_EIO;
fail:
    if (b->fd >= 0)
        close(b->fd);
    free(b);
    return rc;
}

UB_EXPORT int ub_bootstrap_uri(const ub_bootstrap *b, char *buf, size_t len)
{
    if (!b || (!buf && len))
        return UB_EINVAL;
    char ip[INET6_ADDRSTRLEN];
    if (b->sa.ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&b->sa;
        inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
        return snprintf(buf, len, "tcp://[%s]:%u", ip, ntohs(s6->sin6_port));
    }
    const struct sockaddr_in *s4 = (const struct sockaddr_in *)&b->sa;
    inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
    return snprintf(buf, len, "tcp://%s:%u", ip, ntohs(s4->sin_port));
}

static void set_conn_opts(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

UB_EXPORT int ub_bootstrap_accept(ub_bootstrap *b, int timeout_ms)
{
    if (!b || !b->listening || timeout_ms < 0)
        return UB_EINVAL;
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        int c = accept4(b->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c >= 0) {
            close(b->fd);
            b->fd = c;
            b->listening = false;
            set_conn_opts(c);
            return 0;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
            return UB_EIO;
        int ms = left_ms(deadline);
        if (!ms)
            return UB_ETIMEDOUT;
        if (wait_fd(b->fd, false, ms))
            return UB_EIO;
    }
}

UB_EXPORT int ub_bootstrap_connect(const char *uri, int timeout_ms, ub_bootstrap **out)
{
    if (!out || timeout_ms < 0)
        return UB_EINVAL;
    struct sockaddr_storage sa;
    socklen_t salen;
    int rc = parse_tcp(uri, &sa, &salen);
    if (rc)
        return rc;
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    int backoff = 1;
    for (;;) {
        int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return UB_EIO;
        int r = connect(fd, (struct sockaddr *)&sa, salen);
        if (r != 0 && errno == EINPROGRESS) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            int ms = left_ms(deadline);
            if (poll(&p, 1, ms > 0 ? ms : 0) == 1) {
                int err = 0;
                socklen_t el = sizeof(err);
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
                r = err ? -1 : 0;
                errno = err;
            } else {
                errno = ETIMEDOUT;
            }
        }
        if (r == 0) {
            ub_bootstrap *b = calloc(1, sizeof(*b));
            if (!b) {
                close(fd);
                return UB_ENOMEM;
            }
            b->fd = fd;
            b->sa = sa;
            b->salen = salen;
            set_conn_opts(fd);
            *out = b;
            return 0;
        }
        close(fd);
        if (errno != ECONNREFUSED && errno != ETIMEDOUT && errno != EINTR && errno != ECONNRESET)
            return UB_EIO;
        /* Nobody listens yet: retry, backing off up to 50 ms, within the timeout. */
        int ms = left_ms(deadline);
        if (!ms)
            return UB_ETIMEDOUT;
        poll(NULL, 0, backoff < ms ? backoff : ms);
        backoff = backoff < 50 ? backoff * 2 : 50;
    }
}

UB_EXPORT int ub_bootstrap_send(ub_bootstrap *b, const void *msg, size_t len, int timeout_ms)
{
    if (!b || b->listening || (!msg && len) || len > UB_BOOTSTRAP_MAX_MSG || timeout_ms < 0)
        return UB_EINVAL;
    if (b->broken)
        return UB_EIO;
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    bool grace = false;
    uint8_t hdr[HDR_LEN] = {(uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
                            (uint8_t)len};
    const size_t total = HDR_LEN + len;
    size_t done = 0;
    while (done < total) {
        struct iovec iov[2];
        int cnt = 0;
        if (done < HDR_LEN)
            iov[cnt++] = (struct iovec){.iov_base = hdr + done, .iov_len = HDR_LEN - done};
        if (len) {
            size_t off = done < HDR_LEN ? 0 : done - HDR_LEN;
            iov[cnt++] =
                (struct iovec){.iov_base = (uint8_t *)(uintptr_t)msg + off, .iov_len = len - off};
        }
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)cnt};
        ssize_t n = sendmsg(b->fd, &mh, MSG_NOSIGNAL);
        if (n > 0) {
            done += (size_t)n;
            continue;
        }
        if (n == 0 || !would_block())
            goto broken;
        int ms = left_ms(deadline);
        if (!ms) {
            if (!done)
                return UB_ETIMEDOUT; /* nothing of it sent: the stream is intact */
            if (grace)
                goto broken;
            /* Part of the frame is on the stream: finish it, within a bound. */
            grace = true;
            deadline = now_ms() + SEND_GRACE_MS;
            ms = SEND_GRACE_MS;
        }
        if (wait_fd(b->fd, true, ms))
            goto broken;
    }
    return 0;
broken:
    if (done)
        b->broken = true; /* the peer would read a torn frame */
    return UB_EIO;
}

/*
 * Reads toward the frame being received: the length bytes, then the body. 1: progress;
 * 0: nothing to read now; UB_EIO: the peer closed or the connection failed.
 */
static int rx_step(ub_bootstrap *b, size_t len)
{
    uint8_t *p;
    size_t want;
    if (b->rx_hdr_got < HDR_LEN) {
        p = b->rx_hdr + b->rx_hdr_got;
        want = HDR_LEN - b->rx_hdr_got;
    } else {
        p = b->rx_body + b->rx_got;
        want = len - b->rx_got;
    }
    ssize_t n = recv(b->fd, p, want, 0);
    if (n > 0) {
        if (b->rx_hdr_got < HDR_LEN)
            b->rx_hdr_got += (size_t)n;
        else
            b->rx_got += (size_t)n;
        return 1;
    }
    if (n < 0 && would_block())
        return 0;
    return UB_EIO; /* n == 0: the peer closed */
}

UB_EXPORT int ub_bootstrap_recv(ub_bootstrap *b, void *buf, size_t cap, int timeout_ms)
{
    if (!b || b->listening || (!buf && cap) || timeout_ms < 0)
        return UB_EINVAL;
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        if (b->broken)
            return UB_EIO;
        size_t len = 0;
        if (b->rx_hdr_got == HDR_LEN) {
            const uint8_t *h = b->rx_hdr;
            len = ((size_t)h[0] << 24) | ((size_t)h[1] << 16) | ((size_t)h[2] << 8) | h[3];
            if (len > UB_BOOTSTRAP_MAX_MSG) {
                b->broken = true; /* not our peer */
                return UB_EIO;
            }
            if (len > cap)
                return UB_ELENGTH; /* the message stays pending */
            if (len && !b->rx_body && !(b->rx_body = malloc(UB_BOOTSTRAP_MAX_MSG)))
                return UB_ENOMEM;
            if (b->rx_got == len) {
                if (len)
                    memcpy(buf, b->rx_body, len);
                b->rx_hdr_got = b->rx_got = 0;
                return (int)len;
            }
        }
        int rc = rx_step(b, len);
        if (rc < 0)
            return rc;
        if (rc)
            continue;
        int ms = left_ms(deadline);
        if (!ms)
            return UB_ETIMEDOUT; /* a frame begun stays: the next call finishes it */
        if (wait_fd(b->fd, false, ms))
            return UB_EIO;
    }
}

UB_EXPORT int ub_bootstrap_close(ub_bootstrap *b)
{
    if (!b)
        return UB_EINVAL;
    close(b->fd);
    free(b->rx_body);
    free(b);
    return 0;
}

/* ---- files ------------------------------------------------------------------------------ */

UB_EXPORT int ub_bootstrap_file_put(const char *path, const void *msg, size_t len)
{
    if (!path || (!msg && len) || len > UB_BOOTSTRAP_MAX_MSG)
        return UB_EINVAL;
    char tmp[PATH_MAX];
    int n = snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof(tmp))
        return UB_EINVAL;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return errno == EACCES ? UB_EACCESS : UB_EIO;
    const uint8_t *p = msg;
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, p + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            close(fd);
            unlink(tmp);
            return UB_EIO;
        }
        done += (size_t)w;
    }
    if (close(fd) != 0 || rename(tmp, path) != 0) { /* appears whole or not at all */
        unlink(tmp);
        return UB_EIO;
    }
    return 0;
}

static int read_file(const char *path, void *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? UB_ENOENT : UB_EIO;
    size_t done = 0;
    for (;;) {
        uint8_t extra;
        ssize_t r = done < cap ? read(fd, (uint8_t *)buf + done, cap - done) : read(fd, &extra, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            close(fd);
            return UB_EIO;
        }
        if (r == 0)
            break;
        if (done >= cap) {
            close(fd);
            return UB_ELENGTH;
        }
        done += (size_t)r;
    }
    close(fd);
    return (int)done;
}

UB_EXPORT int ub_bootstrap_file_get(const char *path, void *buf, size_t cap, int timeout_ms)
{
    if (!path || (!buf && cap) || timeout_ms < 0)
        return UB_EINVAL;
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    /* Watch the directory first, then look: a rename in between is not missed. */
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    int n = slash ? snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path)
                  : snprintf(dir, sizeof(dir), ".");
    if (n < 0 || (size_t)n >= sizeof(dir))
        return UB_EINVAL;
    if (!dir[0])
        dir[0] = '/', dir[1] = '\0';
    int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (in >= 0 && inotify_add_watch(in, dir, IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE) < 0) {
        close(in);
        in = -1;
    }
    int rc;
    for (;;) {
        rc = read_file(path, buf, cap);
        if (rc != UB_ENOENT)
            break;
        int ms = left_ms(deadline);
        if (!ms) {
            rc = UB_ETIMEDOUT;
            break;
        }
        if (in >= 0) {
            struct pollfd p = {.fd = in, .events = POLLIN};
            if (poll(&p, 1, ms) > 0) {
                char evbuf[4096];
                ssize_t r = read(in, evbuf, sizeof(evbuf));
                (void)r;
            }
        } else {
            poll(NULL, 0, ms < 10 ? ms : 10); /* no inotify: look again shortly */
        }
    }
    if (in >= 0)
        close(in);
    return rc;
}
