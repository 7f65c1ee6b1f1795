#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "core/clock.h"
#include "core/compiler.h"
#include "dev/loop.h"

/* One queued copy. Metadata lives here, not in the (maybe shared) ub__pkt. */
struct loop_ent {
    uint64_t at;  /* delivery time */
    uint64_t seq; /* tie-break: enqueue order across the fabric */
    struct ub__pkt *pkt;
    uint16_t src;
    uint16_t path;
    uint8_t ecn;
};

/* A packet held back until `left` later packets of its direction overtook it. */
struct loop_hold {
    struct ub__pkt *pkt;
    uint64_t at;       /* when it would have been delivered */
    uint64_t deadline; /* released at the latest then */
    uint32_t left;
    uint16_t path;
    uint8_t ecn;
};

/* Allocated when a direction first gets rules, so unimpaired fabrics stay small. */
struct loop_imp {
    struct ub__impair im;
    struct loop_hold hold[UB_LOOP_MAX_HELD]; /* offer order, oldest first */
};

struct loop_dir {
    struct loop_imp *imp;
    bool active;
    uint16_t src, dst;
    uint32_t nhold;
    uint32_t queued;  /* copies in the destination's heap or held */
    uint64_t last_at; /* latest delivery time enqueued (fifo rule) */
    struct ub__loop_dir_stats st;
};

struct loop_port {
    struct ub__dev dev;
    struct ub__loopnet *net;
    struct loop_ent *heap; /* min-heap on (at, seq); capacity ports * queue_cap */
    uint32_t n, cap;
    uint16_t id;
    bool open;
    struct ub__loop_port_stats st;
};

struct ub__loopnet {
    struct ub__loopnet_cfg cfg;
    uint64_t now;
    uint64_t seq;
    uint32_t nheld; /* holds across all directions: lets set_time skip the scan */
    struct loop_port *ports;
    struct loop_dir *dirs; /* [src * ports + dst] */
    ub__loopnet_tap_fn tap;
    void *tap_arg;
};

static inline struct loop_dir *dir_of(const struct ub__loopnet *net, uint32_t src, uint32_t dst)
{
    return &net->dirs[src * net->cfg.ports + dst];
}

static inline uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a + b < a ? UB_TIME_NEVER - 1 : a + b;
}

/* ---- per-port delivery heap ------------------------------------------------ */

static inline bool ent_before(const struct loop_ent *a, const struct loop_ent *b)
{
    return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

static void heap_push(struct loop_port *port, const struct loop_ent *e)
{
    uint32_t i = port->n++;
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (!ent_before(e, &port->heap[parent]))
            break;
        port->heap[i] = port->heap[parent];
        i = parent;
    }
    port->heap[i] = *e;
}

static void heap_pop(struct loop_port *port)
{
    struct loop_ent last = port->heap[--port->n];
    uint32_t i = 0, n = port->n;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && ent_before(&port->heap[c + 1], &port->heap[c]))
            c++;
        if (!ent_before(&port->heap[c], &last))
            break;
        port->heap[i] = port->heap[c];
        i = c;
    }
    if (n)
        port->heap[i] = last;
}

/* Queues a copy whose slot in dir->queued is already taken. */
static void dir_enqueue(struct ub__loopnet *net, struct loop_dir *dir, struct ub__pkt *p,
                        uint64_t at, uint16_t path, uint8_t ecn)
{
    struct loop_ent e = {at, net->seq++, p, dir->src, path, ecn};
    heap_push(&net->ports[dir->dst], &e);
    dir->last_at = UB_MAX(dir->last_at, at);
}

/* ---- reordering holds -------------------------------------------------------- */

/* Ends hold i: queues it no earlier than cur (what overtook it); returns its time. */
static uint64_t hold_release(struct ub__loopnet *net, struct loop_dir *dir, uint32_t i,
                             uint64_t cur)
{
    struct loop_hold h = dir->imp->hold[i];
    memmove(&dir->imp->hold[i], &dir->imp->hold[i + 1],
            (dir->nhold - i - 1) * sizeof(dir->imp->hold[0]));
    dir->nhold--;
    net->nheld--;
    cur = UB_MAX(cur, h.at);
    dir_enqueue(net, dir, h.pkt, cur, h.path, h.ecn);
    return cur;
}

/*
 * A packet newer than holds [0, upto) was queued at `at`: each of them has
 * been overtaken once more. Holds that reach their depth end oldest first,
 * behind it; each ending overtakes the older holds still waiting (so the
 * newer packets that get ahead of a hold are exactly the ones counted).
 */
static void hold_overtaken(struct ub__loopnet *net, struct loop_dir *dir, uint32_t upto,
                           uint64_t at)
{
    for (uint32_t i = 0; i < upto; i++)
        dir->imp->hold[i].left--;
    for (;;) {
        uint32_t i = 0;
        while (i < dir->nhold && dir->imp->hold[i].left)
            i++;
        if (i == dir->nhold)
            return;
        at = hold_release(net, dir, i, at);
        for (uint32_t k = 0; k < i; k++)
            dir->imp->hold[k].left--;
    }
}

/* Ends the holds whose deadline has passed, earliest deadline first. */
static void holds_expire(struct ub__loopnet *net)
{
    uint32_t ndirs = net->cfg.ports * net->cfg.ports;
    for (uint32_t d = 0; d < ndirs && net->nheld; d++) {
        struct loop_dir *dir = &net->dirs[d];
        while (dir->nhold) {
            uint32_t best = dir->nhold;
            for (uint32_t i = 0; i < dir->nhold; i++)
                if (dir->imp->hold[i].deadline <= net->now &&
                    (best == dir->nhold ||
                     dir->imp->hold[i].deadline < dir->imp->hold[best].deadline))
                    best = i;
            if (best == dir->nhold)
                break;
            uint64_t at = hold_release(net, dir, best, dir->imp->hold[best].deadline);
            hold_overtaken(net, dir, best, at);
        }
    }
}

/* ---- send -------------------------------------------------------------------- */

static bool dir_admit(struct ub__loopnet *net, struct loop_dir *dir)
{
    if (dir->queued >= net->cfg.queue_cap) {
        dir->st.overflow++;
        net->ports[dir->dst].st.rx_overflow++;
        return false;
    }
    dir->queued++;
    return true;
}

/* Carries one packet from port src; consumes the caller's reference. */
static void loop_offer(struct ub__loopnet *net, uint16_t src, struct ub__pkt *p)
{
    const struct ub__addr *a = &p->addr;
    if (a->family != UB_AF_LOOP || a->port >= net->cfg.ports || !net->ports[a->port].open) {
        net->ports[src].st.tx_no_port++;
        ub__pkt_free(p);
        return;
    }
    struct loop_dir *dir = dir_of(net, src, a->port);
    dir->st.sent++;
    dir->st.sent_bytes += p->len;

    uint16_t path = (uint16_t)(p->path % net->cfg.num_paths);
    uint8_t ecn = p->ecn;
    uint64_t at = sat_add(net->now, net->cfg.latency_ns);
    uint32_t dups = 0, hold = 0;
    struct ub__pkt *primary = p; /* what is queued for the first copy */
    bool fifo = false;
    uint64_t timeout = UB_IMPAIR_DEFAULT_HOLD_NS;

    if (dir->active) {
        struct ub__impair_decision dec;
        ub__impair_decide_path(&dir->imp->im, net->now, p->len, path, &dec);
        if (dec.drop) {
            ub__pkt_free(p);
            return;
        }
        at = sat_add(at, dec.delay_ns);
        dups = dec.dups;
        hold = dec.hold;
        fifo = dir->imp->im.cfg.fifo;
        if (dir->imp->im.cfg.reorder_timeout_ns)
            timeout = dir->imp->im.cfg.reorder_timeout_ns;
        if (dec.ce && ecn != 0) {
            ecn = 3;
            dir->st.ce_marked++;
        }
        if (dec.nflips && net->cfg.checksum) {
            /* The receiver's checksum would fail: the corrupted first copy never arrives. */
            dir->st.csum_dropped++;
            primary = NULL;
        } else if (dec.nflips) {
            /* The sender may still hold p for retransmission: corrupt a private clone. */
            primary = ub__pkt_clone(p);
            if (primary)
                ub__impair_flip(primary->data, primary->len, &dec);
            else
                dir->st.nomem++;
        }
    }
    if (fifo)
        at = UB_MAX(at, dir->last_at);

    if (primary && !dir_admit(net, dir)) {
        if (primary != p)
            ub__pkt_free(primary);
        primary = NULL;
    }
    if (primary) {
        if (primary == p)
            ub__pkt_ref(p);
        if (hold && dir->nhold < UB_LOOP_MAX_HELD) {
            struct loop_hold *h = &dir->imp->hold[dir->nhold++];
            h->pkt = primary;
            h->at = at;
            h->deadline = sat_add(at, timeout);
            h->left = hold;
            h->path = path;
            h->ecn = ecn;
            net->nheld++;
        } else {
            if (hold)
                dir->st.hold_full++;
            dir_enqueue(net, dir, primary, at, path, ecn);
            if (dir->nhold)
                hold_overtaken(net, dir, dir->nhold, at);
        }
    }
    /* Duplicates: clean copies of the sent bytes, right behind the first copy. */
    for (uint32_t i = 0; i < dups; i++) {
        if (!dir_admit(net, dir))
            continue;
        ub__pkt_ref(p);
        dir_enqueue(net, dir, p, at, path, ecn);
    }
    ub__pkt_free(p); /* every queued copy holds its own reference */
}

static inline struct loop_port *port_of(const struct ub__dev *dev)
{
    return UB_CONTAINER_OF(dev, struct loop_port, dev);
}

static int loop_send(struct ub__dev *dev, struct ub__pkt **pkts, uint32_t n)
{
    struct loop_port *port = port_of(dev);
    struct ub__loopnet *net = port->net;
    uint32_t k;
    n = UB_MIN(n, (uint32_t)INT32_MAX);
    for (k = 0; k < n; k++) {
        struct ub__pkt *p = pkts[k];
        if (p->len > net->cfg.mtu) {
            /* Refused, not dropped: the caller keeps it and this one and the rest. */
            port->st.tx_too_big++;
            break;
        }
        port->st.tx_pkts++;
        port->st.tx_bytes += p->len;
        if (net->tap)
            net->tap(net->tap_arg, port->id, p);
        loop_offer(net, port->id, p);
    }
    if (k == 0 && n > 0)
        return UB_ELENGTH;
    return (int)k;
}

/* ---- receive ----------------------------------------------------------------- */

static int loop_recv(struct ub__dev *dev, struct ub__pkt **pkts, uint32_t max,
                     struct ub__pktpool *pool)
{
    struct loop_port *port = port_of(dev);
    struct ub__loopnet *net = port->net;
    uint32_t n = 0;
    bool nobufs = false;

    max = UB_MIN(max, (uint32_t)INT32_MAX);
    while (n < max && port->n && port->heap[0].at <= net->now) {
        struct loop_ent e = port->heap[0];
        struct loop_dir *dir = dir_of(net, e.src, port->id);
        struct ub__pkt *p = e.pkt;
        if (p->refcnt > 1) {
            /* Someone else still holds this buffer: hand over a private copy. */
            struct ub__pktpool *pl = pool ? pool : p->pool;
            if (p->len > pl->buf_size - pl->headroom) {
                heap_pop(port);
                dir->queued--;
                port->st.rx_too_big++;
                ub__pkt_free(p);
                continue;
            }
            struct ub__pkt *c = ub__pkt_alloc(pl);
            if (!c) {
                port->st.rx_nobufs++;
                nobufs = true;
                break; /* stays queued, like a datagram in a socket buffer */
            }
            memcpy(c->data, p->data, p->len);
            c->len = p->len;
            ub__pkt_free(p);
            p = c;
            port->st.rx_copied++;
        }
        heap_pop(port);
        dir->queued--;
        dir->st.delivered++;
        dir->st.delivered_bytes += p->len;
        p->next = NULL;
        p->flags = 0; /* the sender's owner bits (PDS's, the engine's) are not the receiver's */
        ub__addr_loop(&p->addr, e.src);
        p->path = e.path;
        p->ecn = e.ecn;
        p->ts = e.at;
        port->st.rx_pkts++;
        port->st.rx_bytes += p->len;
        pkts[n++] = p;
    }
    if (n == 0 && nobufs)
        return UB_ENOBUFS;
    return (int)n;
}

static int loop_fd(struct ub__dev *dev)
{
    (void)dev;
    return -1;
}

static uint32_t loop_mtu(const struct ub__dev *dev)
{
    return port_of(dev)->net->cfg.mtu;
}

static uint32_t loop_num_paths(const struct ub__dev *dev)
{
    return port_of(dev)->net->cfg.num_paths;
}

/* Frees everything queued or held for port. */
static void port_flush(struct ub__loopnet *net, struct loop_port *port)
{
    while (port->n) {
        struct loop_ent *e = &port->heap[0];
        struct loop_dir *dir = dir_of(net, e->src, port->id);
        ub__pkt_free(e->pkt);
        dir->queued--;
        dir->st.flushed++;
        port->st.flushed++;
        heap_pop(port);
    }
    for (uint32_t s = 0; s < net->cfg.ports; s++) {
        struct loop_dir *dir = dir_of(net, s, port->id);
        for (uint32_t i = 0; i < dir->nhold; i++) {
            ub__pkt_free(dir->imp->hold[i].pkt);
            dir->st.flushed++;
            port->st.flushed++;
        }
        dir->queued -= dir->nhold;
        net->nheld -= dir->nhold;
        dir->nhold = 0;
    }
}

static void loop_close(struct ub__dev *dev)
{
    struct loop_port *port = port_of(dev);
    if (!port->open)
        return;
    port_flush(port->net, port);
    free(port->heap);
    port->heap = NULL;
    port->n = port->cap = 0;
    port->open = false;
}

static const struct ub__dev_ops loop_ops = {
    .name = "loop",
    .send = loop_send,
    .recv = loop_recv,
    .fd = loop_fd,
    .mtu = loop_mtu,
    .num_paths = loop_num_paths,
    .close = loop_close,
};

/* ---- fabric ------------------------------------------------------------------ */

int ub__loopnet_create(const struct ub__loopnet_cfg *cfg, struct ub__loopnet **out)
{
    *out = NULL;
    struct ub__loopnet_cfg c = cfg ? *cfg : (struct ub__loopnet_cfg){0};
    if (!c.ports)
        c.ports = UB_LOOP_DEFAULT_PORTS;
    if (!c.mtu)
        c.mtu = UB_LOOP_DEFAULT_MTU;
    if (!c.num_paths)
        c.num_paths = 1;
    if (!c.queue_cap)
        c.queue_cap = UB_LOOP_DEFAULT_QUEUE;
    /* Bounds keep ports * queue_cap (one heap) and num_paths (a uint16 path) in range. */
    if (c.ports > UB_LOOP_MAX_PORTS || c.queue_cap > (1u << 20) || c.num_paths > 65536)
        return UB_ERANGE;

    struct ub__loopnet *net = calloc(1, sizeof(*net));
    if (!net)
        return UB_ENOMEM;
    net->cfg = c;
    net->ports = calloc(c.ports, sizeof(*net->ports));
    net->dirs = calloc((size_t)c.ports * c.ports, sizeof(*net->dirs));
    if (!net->ports || !net->dirs) {
        free(net->ports);
        free(net->dirs);
        free(net);
        return UB_ENOMEM;
    }
    for (uint32_t i = 0; i < c.ports; i++) {
        net->ports[i].net = net;
        net->ports[i].id = (uint16_t)i;
        for (uint32_t j = 0; j < c.ports; j++) {
            struct loop_dir *dir = dir_of(net, i, j);
            dir->src = (uint16_t)i;
            dir->dst = (uint16_t)j;
        }
    }
    *out = net;
    return 0;
}

void ub__loopnet_destroy(struct ub__loopnet *net)
{
    if (!net)
        return;
    for (uint32_t i = 0; i < net->cfg.ports; i++)
        loop_close(&net->ports[i].dev);
    for (size_t d = 0; d < (size_t)net->cfg.ports * net->cfg.ports; d++)
        free(net->dirs[d].imp);
    free(net->ports);
    free(net->dirs);
    free(net);
}

void ub__loopnet_set_time(struct ub__loopnet *net, uint64_t now)
{
    if (now > net->now)
        net->now = now;
    if (net->nheld)
        holds_expire(net);
}

uint64_t ub__loopnet_now(const struct ub__loopnet *net)
{
    return net->now;
}

uint64_t ub__loopnet_next_deadline(const struct ub__loopnet *net)
{
    uint64_t next = UB_TIME_NEVER;
    for (uint32_t i = 0; i < net->cfg.ports; i++)
        if (net->ports[i].n)
            next = UB_MIN(next, net->ports[i].heap[0].at);
    uint32_t ndirs = net->cfg.ports * net->cfg.ports;
    for (uint32_t d = 0; d < ndirs && net->nheld; d++)
        for (uint32_t i = 0; i < net->dirs[d].nhold; i++)
            next = UB_MIN(next, net->dirs[d].imp->hold[i].deadline);
    return next;
}

void ub__loopnet_set_tap(struct ub__loopnet *net, ub__loopnet_tap_fn fn, void *arg)
{
    net->tap = fn;
    net->tap_arg = arg;
}

int ub__loopnet_impair(struct ub__loopnet *net, uint16_t src, uint16_t dst,
                       const struct ub__impair_cfg *cfg)
{
    if (src >= net->cfg.ports || dst >= net->cfg.ports)
        return UB_ERANGE;
    struct loop_dir *dir = dir_of(net, src, dst);
    if (!ub__impair_cfg_active(cfg)) {
        dir->active = false;
        /* No rules, no reason to hold: release oldest first at their own times. */
        while (dir->nhold)
            hold_release(net, dir, 0, 0);
        return 0;
    }
    int rc = ub__impair_cfg_check(cfg);
    if (rc)
        return rc;
    uint64_t salt = ub__mix64(net->cfg.seed ^ ub__mix64(((uint64_t)src << 16 | dst) + 1));
    if (!dir->imp) {
        dir->imp = calloc(1, sizeof(*dir->imp));
        if (!dir->imp)
            return UB_ENOMEM;
        rc = ub__impair_init(&dir->imp->im, cfg, salt);
    } else {
        rc = ub__impair_set(&dir->imp->im, cfg, salt);
    }
    if (rc)
        return rc;
    dir->active = true;
    return 0;
}

int ub__loopnet_dir_stats(const struct ub__loopnet *net, uint16_t src, uint16_t dst,
                          struct ub__loop_dir_stats *out)
{
    if (src >= net->cfg.ports || dst >= net->cfg.ports)
        return UB_ERANGE;
    const struct loop_dir *dir = dir_of(net, src, dst);
    *out = dir->st;
    out->queued = dir->queued;
    out->held = dir->nhold;
    if (dir->imp)
        out->impair = dir->imp->im.stats;
    else
        memset(&out->impair, 0, sizeof(out->impair));
    return 0;
}

int ub__loopnet_port_stats(const struct ub__loopnet *net, uint16_t port,
                           struct ub__loop_port_stats *out)
{
    if (port >= net->cfg.ports)
        return UB_ERANGE;
    *out = net->ports[port].st;
    return 0;
}

int ub__loop_open(struct ub__loopnet *net, uint16_t port, struct ub__dev **dev)
{
    *dev = NULL;
    if (port >= net->cfg.ports)
        return UB_ERANGE;
    struct loop_port *p = &net->ports[port];
    if (p->open)
        return UB_EEXIST;
    uint32_t cap = net->cfg.ports * net->cfg.queue_cap;
    p->heap = malloc((size_t)cap * sizeof(*p->heap));
    if (!p->heap)
        return UB_ENOMEM;
    p->cap = cap;
    p->n = 0;
    p->dev.ops = &loop_ops;
    ub__addr_loop(&p->dev.local, port);
    p->open = true;
    *dev = &p->dev;
    return 0;
}
