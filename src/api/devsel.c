/*
 * Device selection: a context URI to the device(s) under the engine, and the composite
 * device that puts a udp and a shm endpoint under one engine (shm for peers on this host
 * that advertise it, udp for everyone else).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <softub/errors.h>
#include "api/ctx.h"
#include "core/compiler.h"
#include "dev/shm.h"
#include "dev/udp.h"

#define URI_MAX 512

uint16_t ub__shm_name_id(const char *name, size_t len)
{
    uint32_t h = 2166136261u; /* FNV-1a 32 */
    for (size_t i = 0; i < len; i++) {
        h ^= (uint8_t)name[i];
        h *= 16777619u;
    }
    return (uint16_t)(1 + h % 65535u);
}

uint32_t ub__host_id(void)
{
    char buf[64];
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf));
    close(fd);
    if (n <= 0)
        return 0;
    uint32_t h = 2166136261u;
    for (ssize_t i = 0; i < n; i++) {
        h ^= (uint8_t)buf[i];
        h *= 16777619u;
    }
    return h ? h : 1;
}

/* ---- the composite device ------------------------------------------------------------- */

struct multidev {
    struct ub__dev dev;
    struct ub__dev *udp, *shm;
    int epfd;
    uint32_t mtu, paths;
    bool rx_shm_first; /* alternate which device is drained first */
    bool ep_live;      /* the devices' fds are in epfd: from the first fd() (udp_fd's reason) */
};

static const struct ub__dev_ops multi_ops;

/*
 * Each device takes its share of a window of the batch in one call (between the two there is
 * no order to keep: they reach different peers). Once the shm device refused a packet, later
 * windows' shm packets are refused without asking it: a later call could take a packet of
 * the peer whose earlier one it refused. The refused are gathered in front while the loop
 * runs (never ahead of it) and moved behind at the end.
 */
#define MULTI_WINDOW 64

static int multi_send(struct ub__dev *d, struct ub__pkt **pkts, uint32_t n)
{
    struct multidev *m = (struct multidev *)d;
    uint32_t taken = 0, refused = 0;
    bool shm_stopped = false; /* the shm device refused (a full lane): not an error */
    int err = 0;
    for (uint32_t i = 0; i < n;) {
        struct ub__pkt *part[2][MULTI_WINDOW]; /* udp, shm */
        uint32_t cnt[2] = {0, 0};
        for (uint32_t end = UB_MIN(n, i + MULTI_WINDOW); i < end; i++) {
            unsigned shm = pkts[i]->addr.family == UB_AF_SHM;
            part[shm][cnt[shm]++] = pkts[i];
        }
        for (unsigned shm = 0; shm < 2; shm++) {
            int rc = 0;
            if (cnt[shm] && !(shm && shm_stopped))
                rc = ub__dev_send(shm ? m->shm : m->udp, part[shm], cnt[shm]);
            if (rc < 0) {
                err = rc;
                rc = 0;
            }
            if (shm && (uint32_t)rc < cnt[shm])
                shm_stopped = true;
            taken += (uint32_t)rc;
            for (uint32_t t = (uint32_t)rc; t < cnt[shm]; t++)
                pkts[refused++] = part[shm][t];
        }
    }
    /* An error only when nothing was refused for want of room: those must come back to the
     * caller (a link packet is kept, not dropped), the rest with them. */
    if (!taken && err && !shm_stopped)
        return err;
    memmove(pkts + taken, pkts, refused * sizeof(*pkts));
    return (int)taken;
}

static int multi_recv(struct ub__dev *d, struct ub__pkt **pkts, uint32_t max,
                      struct ub__pktpool *pool)
{
    struct multidev *m = (struct multidev *)d;
    struct ub__dev *first = m->rx_shm_first ? m->shm : m->udp;
    struct ub__dev *second = m->rx_shm_first ? m->udp : m->shm;
    m->rx_shm_first = !m->rx_shm_first;
    uint32_t half = max > 1 ? max / 2 : max;
    int a = ub__dev_recv(first, pkts, half, pool);
    if (a < 0)
        a = 0;
    int b = ub__dev_recv(second, pkts + a, max - (uint32_t)a, pool);
    if (b < 0)
        b = 0;
    /* The first one may have more if the second had little. */
    if ((uint32_t)(a + b) < max && (uint32_t)a == half) {
        int c = ub__dev_recv(first, pkts + a + b, max - (uint32_t)(a + b), pool);
        if (c > 0)
            b += c;
    }
    return a + b;
}

static int multi_fd(struct ub__dev *d)
{
    struct multidev *m = (struct multidev *)d;
    struct ub__dev *devs[2] = {m->udp, m->shm};
    for (int i = 0; !m->ep_live && i < 2; i++) {
        int fd = ub__dev_fd(devs[i]);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (fd >= 0 && epoll_ctl(m->epfd, EPOLL_CTL_ADD, fd, &ev) != 0 && errno != EEXIST)
            return -1;
    }
    m->ep_live = true;
    return m->epfd;
}

static uint32_t multi_mtu(const struct ub__dev *d)
{
    return ((const struct multidev *)d)->mtu;
}

static uint32_t multi_paths(const struct ub__dev *d)
{
    return ((const struct multidev *)d)->paths;
}

static void multi_close(struct ub__dev *d)
{
    struct multidev *m = (struct multidev *)d;
    ub__dev_close(m->udp);
    ub__dev_close(m->shm);
    close(m->epfd);
    free(m);
}

static const struct ub__dev_ops multi_ops = {
    .name = "udp+shm",
    .gather = true, /* each share goes through ub__dev_send of its own device, which decides */
    .send = multi_send,
    .recv = multi_recv,
    .fd = multi_fd,
    .mtu = multi_mtu,
    .num_paths = multi_paths,
    .close = multi_close,
};

int ub__multidev_open(struct ub__dev *udp, struct ub__dev *shm, struct ub__dev **out)
{
    struct multidev *m = calloc(1, sizeof(*m));
    if (!m)
        return UB_ENOMEM;
    m->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (m->epfd < 0) {
        free(m);
        return UB_EIO;
    }
    m->dev.ops = &multi_ops;
    m->dev.local = udp->local;
    m->udp = udp;
    m->shm = shm;
    uint32_t mu = ub__dev_mtu(udp), ms = ub__dev_mtu(shm);
    m->mtu = mu < ms ? mu : ms;
    m->paths = ub__dev_num_paths(udp);
    *out = &m->dev;
    return 0;
}

/* ---- URI -> devices -------------------------------------------------------------------- */

/*
 * Splits the query of uri (after '?') into the keys this layer consumes and the rest,
 * which goes to the device's parser. Returns UB_EINVAL for a malformed option.
 */
static int take_api_keys(char *q, bool *shm, char *rest, size_t rest_len)
{
    rest[0] = '\0';
    size_t used = 0;
    char *save = NULL;
    for (char *kv = strtok_r(q, "&", &save); kv; kv = strtok_r(NULL, "&", &save)) {
        if (strcmp(kv, "shm=1") == 0) {
            *shm = true;
            continue;
        }
        if (strcmp(kv, "shm=0") == 0) {
            *shm = false;
            continue;
        }
        size_t l = strlen(kv);
        if (used + l + 2 > rest_len)
            return UB_EINVAL;
        if (used)
            rest[used++] = '&';
        memcpy(rest + used, kv, l + 1);
        used += l;
    }
    return 0;
}

static int open_shm_spec(const char *body, uint32_t mtu, uint32_t paths, struct ub__dev **out)
{
    /* body: "ID[?opts]" or "NAME[?opts]" */
    char spec[URI_MAX];
    const char *q = strchr(body, '?');
    size_t idlen = q ? (size_t)(q - body) : strlen(body);
    bool numeric = true;
    for (size_t i = 0; i < idlen; i++)
        if (body[i] < '0' || body[i] > '9')
            numeric = false;
    int n;
    if (numeric)
        n = snprintf(spec, sizeof(spec), "%s", body);
    else
        n = snprintf(spec, sizeof(spec), "%u%s", ub__shm_name_id(body, idlen), q ? q : "");
    if (n < 0 || (size_t)n >= sizeof(spec))
        return UB_EINVAL;
    struct ub__shm_cfg cfg;
    int rc = ub__shm_cfg_parse(spec, &cfg);
    if (rc)
        return rc;
    if (mtu)
        cfg.mtu = mtu;
    if (paths && !cfg.num_paths)
        cfg.num_paths = paths;
    return ub__shm_open(&cfg, out);
}

int ub__devsel_open(const char *uri, struct ub__devsel *out)
{
    memset(out, 0, sizeof(*out));
    size_t len = strnlen(uri, URI_MAX);
    if (len >= URI_MAX)
        return UB_EINVAL;
    char buf[URI_MAX], rest[URI_MAX], spec[URI_MAX];
    memcpy(buf, uri, len + 1);
    if (strncmp(buf, "shm://", 6) == 0 || strncmp(buf, "shm:", 4) == 0) {
        const char *body = buf + (buf[4] == '/' ? 6 : 4);
        int rc = open_shm_spec(body, 0, 0, &out->shm);
        if (rc)
            return rc;
        out->kind = UB_CTX_SHM;
        out->dev = out->shm;
        return 0;
    }
    const char *body;
    if (strncmp(buf, "udp://", 6) == 0)
        body = buf + 6;
    else if (strncmp(buf, "udp:", 4) == 0)
        body = buf + 4;
    else
        return UB_ENOTSUP;
    bool want_shm = false;
    char *q = strchr(body, '?');
    if (q) {
        *q = '\0';
        int rc = take_api_keys(q + 1, &want_shm, rest, sizeof(rest));
        if (rc)
            return rc;
    } else {
        rest[0] = '\0';
    }
    int n = snprintf(spec, sizeof(spec), "%s%s%s", body, rest[0] ? "?" : "", rest);
    if (n < 0 || (size_t)n >= sizeof(spec))
        return UB_EINVAL;
    struct ub__udp_cfg cfg;
    int rc = ub__udp_cfg_parse(spec, &cfg);
    if (rc)
        return rc;
    rc = ub__udp_open(&cfg, &out->udp);
    if (rc)
        return rc;
    if (!want_shm) {
        out->kind = UB_CTX_UDP;
        out->dev = out->udp;
        return 0;
    }
    /* A shm endpoint beside it, with the udp device's MTU and paths (one engine drives both). */
    rc = open_shm_spec("0", ub__dev_mtu(out->udp), ub__dev_num_paths(out->udp), &out->shm);
    if (rc == 0)
        rc = ub__multidev_open(out->udp, out->shm, &out->dev);
    if (rc) {
        if (out->shm)
            ub__dev_close(out->shm);
        ub__dev_close(out->udp);
        memset(out, 0, sizeof(*out));
        return rc;
    }
    out->kind = UB_CTX_MULTI;
    return 0;
}
