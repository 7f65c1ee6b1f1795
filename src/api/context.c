/* Contexts: opening an endpoint on a device, progress, asynchronous events, closing. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <softub/errors.h>
#include "api/api.h"
#include "core/compiler.h"
#include "core/env.h"
#include "dev/shm.h"
#include "dev/udp.h"

void ub__lock_wait(struct ub__lock *l)
{
    /* 2: the holder wakes someone when it lets go. */
    while (atomic_exchange_explicit(&l->state, 2, memory_order_acquire) != 0)
        syscall(SYS_futex, (int *)(uintptr_t)&l->state, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
}

void ub__lock_wake(struct ub__lock *l)
{
    syscall(SYS_futex, (int *)(uintptr_t)&l->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

uint64_t ub__ctx_now(const ub_context *ctx)
{
    const struct ub__ctx *x = ub__ctx_of(ctx);
    if (x->kind == UB_CTX_LOOP)
        return ub__clock_now(&ctx->net->clock); /* tests may swap the fabric's clock */
    return ub__clock_now(&x->clock);
}

uint32_t ub__ctx_new_id(ub_context *ctx, uint32_t kind)
{
    for (uint32_t tries = 0; tries <= UB_API_ID_MAX; tries++) {
        uint32_t id = ctx->next_id++ & UB_API_ID_MAX;
        if (id && !ub__hmap_get(&ctx->objs, ub__obj_key(kind, id)))
            return id;
    }
    return 0;
}

static int parse_loop_uri(const char *uri, uint32_t *port)
{
    if (strncmp(uri, "loop:", 5) != 0)
        return UB_ENOTSUP;
    const char *p = uri + 5;
    if (!*p)
        return UB_EINVAL;
    uint32_t v = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9' || v > 100000)
            return UB_EINVAL;
        v = v * 10 + (uint32_t)(*p - '0');
    }
    *port = v;
    return 0;
}

static void impair_pair(ub_loopnet *n, uint16_t a, uint16_t b)
{
    struct ub__impair_cfg ic;
    memset(&ic, 0, sizeof(ic));
    ic.seed = n->attr.seed ^ ((uint64_t)a << 16) ^ b;
    ic.drop_ppm = n->attr.drop_ppm;
    ub__loopnet_impair(n->net, a, b, &ic);
}

/* A seed from the system: a restarted process is a new incarnation with new object ids. */
static uint64_t system_seed(const void *salt)
{
    uint64_t s = 0;
    ssize_t n = getrandom(&s, sizeof(s), GRND_NONBLOCK);
    if (n != (ssize_t)sizeof(s) || !s)
        s ^= ub__clock_monotonic_ns(NULL) ^ ((uint64_t)(uintptr_t)salt << 17) ^
             0x9e3779b97f4a7c15ull;
    return s ? s : 1;
}

/*
 * The transport's failure bound from the attributes: retries RTOs spread over about
 * timeout_ms, and never before the peer has been silent for timeout_ms (1 s by default):
 * the RTOs start near a millisecond and double, so the count alone would give up on a peer
 * that merely stalled for some tens of milliseconds.
 */
static void failure_bound(const struct ub_context_attr *a, struct ub__pds_cfg *pc)
{
    if (a->retries)
        pc->max_retries = a->retries;
    pc->fail_after_ns = (uint64_t)(a->timeout_ms ? a->timeout_ms : 1000) * UB_NS_PER_MS;
    if (!a->timeout_ms)
        return;
    uint64_t r = (uint64_t)(a->retries ? a->retries : 8) + 1; /* (retries 2^32 - 1: no wrap) */
    uint64_t rto_max = (uint64_t)a->timeout_ms * UB_NS_PER_MS / r;
    if (rto_max < 50 * UB_NS_PER_US)
        rto_max = 50 * UB_NS_PER_US;
    pc->rto_max_ns = rto_max;
    pc->rto_min_ns = rto_max < 200 * UB_NS_PER_US ? rto_max : 200 * UB_NS_PER_US;
    pc->rto_init_ns = rto_max < UB_NS_PER_MS ? rto_max : UB_NS_PER_MS;
    pc->idle_close_ns = 100 * UB_NS_PER_MS > rto_max ? 100 * UB_NS_PER_MS : rto_max;
}

/* Copies an algorithm's name into buf (c.attr then points at it); UB_EINVAL if too long. */
static int algo_name(const char **name, char *buf, size_t cap)
{
    if (!*name)
        return 0;
    size_t n = strnlen(*name, cap);
    if (n == cap)
        return UB_EINVAL;
    memcpy(buf, *name, n + 1);
    *name = buf;
    return 0;
}

/* Everything after the device is open: engine, tables, SES. Frees x and dev on failure. */
static int ctx_init(struct ub__ctx *x, const struct ub_context_attr *attr, uint64_t seed_salt)
{
    ub_context *ctx = &x->c;
    ctx->async = x->async_mem;
    struct ub__engine_cfg ec;
    memset(&ec, 0, sizeof(ec));
    ec.seed = attr->seed ? attr->seed : system_seed((const void *)(uintptr_t)seed_salt);
    uint32_t dmtu = ub__dev_mtu(ctx->dev);
    ec.mtu = attr->mtu && attr->mtu < dmtu ? attr->mtu : dmtu;
    /* No datagram is larger: bigger pool buffers would only waste memory, and keep the udp
     * device from splitting GRO trains of full-size packets straight into them. */
    ec.mtu = UB_MIN(ec.mtu, (uint32_t)UB_SES_MAX_DGRAM);
    uint32_t dpaths = ub__dev_num_paths(ctx->dev);
    ec.num_paths = attr->num_paths && attr->num_paths < dpaths ? attr->num_paths : dpaths;
    failure_bound(attr, &ec.pds);
    if (algo_name(&ctx->attr.cc, x->cc_name, sizeof(x->cc_name)) ||
        algo_name(&ctx->attr.lb, x->lb_name, sizeof(x->lb_name)))
        return UB_EINVAL;
    ec.pds.cc_algo = ctx->attr.cc; /* NULL: the transport's default */
    ec.pds.lb_algo = ctx->attr.lb;
    if (x->kind == UB_CTX_UDP || x->kind == UB_CTX_MULTI) {
        /* Two kernel UDP stacks are in every round trip: tens of microseconds, not a NIC's
         * 12, and congestion control's window (1.5 x rate x base RTT) must cover them. */
        ec.pds.base_rtt_ns = UB_API_UDP_BASE_RTT_NS;
        /* A path's packets leave in one send call: bursts of a GSO super-datagram
         * (docs/algorithms.md, "Bursts"; over veth at MTU 1452, packet by packet, eight
         * paths ran at half the rate of one). */
        ec.pds.spray_burst = UB_UDP_GSO_MAX_BYTES;
    }
    if (attr->spray_burst)
        ec.pds.spray_burst = attr->spray_burst;
    if (x->kind != UB_CTX_LOOP) {
        ec.pds.pacer_burst = UB_API_PACER_BURST;
        ec.pds.pacer_burst_ns = UB_API_PACER_BURST_NS;
    }
    /* Real devices: an ACK, a response and the next request to a peer share one datagram. */
    ec.bundle = (x->kind == UB_CTX_UDP || x->kind == UB_CTX_MULTI) && !ub__env_off("SOFTUB_BUNDLE");
    /* Large request payloads go out from the application's buffer where the device gathers
     * (udp: one more iovec per packet). SOFTUB_ZC=0 turns it off; SOFTUB_ZC=N sets the
     * threshold and applies it on any device (others flatten at the device: tests). */
    const char *zc = getenv("SOFTUB_ZC");
    if (zc && *zc) {
        char *end;
        unsigned long v = strtoul(zc, &end, 10);
        ec.zc_min = *end || v > UINT32_MAX ? 0 : (uint32_t)v;
    } else if (ub__dev_gathers(ctx->dev)) {
        ec.zc_min = UB_API_ZC_MIN;
    }
    /* shm peers: no PDCs over the lanes (docs/pds.md, "The link path"); SOFTUB_LINK=0 keeps
     * them (lossless PDCs), to compare. */
    ec.pds.link = !ub__env_off("SOFTUB_LINK");
    /* Real devices: the packets of one received batch are acknowledged once per PDC. */
    ec.pds.ack_coalesce = x->kind != UB_CTX_LOOP;
    int rc = ub__engine_init(&ctx->eng, &ec);
    if (rc)
        return rc;
    struct ub__list *lists[] = {&ctx->jfces,  &ctx->jfcs, &ctx->jfss,  &ctx->jfrs,
                                &ctx->jettys, &ctx->segs, &ctx->tsegs, &ctx->tjettys};
    for (size_t i = 0; i < UB_ARRAY_SIZE(lists); i++)
        ub__list_init(lists[i]);
    ub__list_init(&ctx->zombie);
    ctx->next_id = (uint32_t)ub__rng_next(&ctx->eng.rng);
    if ((rc = ub__hmap_init(&ctx->objs, 64, 0, ub__rng_next(&ctx->eng.rng))) != 0 ||
        (rc = ub__ses_init(&ctx->ses, ctx)) != 0) {
        ub__hmap_fini(&ctx->objs);
        ub__engine_fini(&ctx->eng);
        return rc;
    }
    ub__lock_init(&x->lock);
    x->wake_fd = -1;
    x->epfd = -1;
    x->spin_ns = (uint64_t)(attr->spin_us ? attr->spin_us : UB_API_DEFAULT_SPIN_US) * UB_NS_PER_US;
    /* A loop fabric is driven in lock step by tests: nothing held there. Automatic progress
     * holds only in rounds a waiter runs (ub_wait_jfc). */
    x->hold_off = x->kind == UB_CTX_LOOP || !ub__hold_enabled();
    /* A loop fabric's time is set each round, a shm device wants its busy-poll mark around the
     * round, and the progress thread runs whole rounds: those have no quiet spells. */
    x->quiet_ok = attr->progress == UB_PROGRESS_MANUAL && x->kind != UB_CTX_LOOP && !x->shm;
    return 0;
}

static int open_loop(const char *uri, const struct ub_context_attr *attr, ub_context **out)
{
    uint32_t port;
    int rc = parse_loop_uri(uri, &port);
    if (rc)
        return rc;
    ub_loopnet *n = attr->loopnet;
    if (!n || port >= n->attr.ports)
        return UB_EINVAL;
    if (attr->progress == UB_PROGRESS_AUTO)
        return UB_ENOTSUP; /* a loop fabric is shared by its contexts: progressed in turn */
    ub__loopnet_reap(n, false);
    struct ub__ctx *x = calloc(1, sizeof(*x));
    if (!x)
        return UB_ENOMEM;
    ub_context *ctx = &x->c;
    x->kind = UB_CTX_LOOP;
    ctx->attr = *attr;
    ctx->net = n;
    ctx->port = (uint16_t)port;
    rc = ub__loop_open(n->net, (uint16_t)port, &ctx->dev);
    if (rc) {
        free(x);
        return rc == UB_EEXIST ? UB_EBUSY : rc;
    }
    ub__addr_loop(&ctx->addr, (uint16_t)port);
    uint64_t salt = ub__clock_now(&n->clock) ^ ((uint64_t)port << 48) ^ (uint64_t)(uintptr_t)x;
    if ((rc = ctx_init(x, attr, salt)) != 0) {
        ub__dev_close(ctx->dev);
        free(x);
        return rc;
    }
    n->ports[port] = ctx;
    if (n->attr.drop_ppm) {
        for (uint32_t p = 0; p < n->attr.ports; p++) {
            if (!n->ports[p])
                continue;
            impair_pair(n, (uint16_t)p, (uint16_t)port);
            if (p != port)
                impair_pair(n, (uint16_t)port, (uint16_t)p);
        }
    }
    *out = ctx;
    return 0;
}

static int cma_peer(void *arg, const struct ub__addr *dst, pid_t *pid)
{
    return ub__shm_peer_cma(arg, dst, pid);
}

static uint64_t cma_clock(void *arg)
{
    (void)arg;
    return ub__clock_monotonic_ns(NULL); /* CLOCK_MONOTONIC: the same for every process */
}

/* Single copy for a context with a shm device, unless the attributes or the environment
 * turn it off. The shm device probed at attach whether the kernel lets us reach a peer. */
static void cma_setup(struct ub__ctx *x, const struct ub_context_attr *attr)
{
    if (!x->shm || attr->cma_min == UB_CMA_OFF || ub__env_off("SOFTUB_CMA"))
        return;
    struct ub__ses_cma *c = &x->c.ses.cma;
    c->arg = x->shm;
    c->peer = cma_peer;
    c->read = ub__shm_cma_read;
    c->write = ub__shm_cma_write;
    c->clock = cma_clock;
    /* Where single copy starts paying depends on the host's system calls (a one-page copy took
     * 2.6 us on one host, and there 16 KiB went faster through the lanes): measured once a
     * process, unless the context names a threshold. */
    if (!attr->cma_min)
        x->c.ses.cma_min = ub__ses_cma_auto_min(ub__shm_cma_cost_ns());
}

UB_EXPORT int ub_context_open(const char *uri, const struct ub_context_attr *attr, ub_context **out)
{
    if (!uri || !attr || !out)
        return UB_EINVAL;
    if (attr->progress != UB_PROGRESS_MANUAL && attr->progress != UB_PROGRESS_AUTO)
        return UB_EINVAL;
    if (strncmp(uri, "loop:", 5) == 0)
        return open_loop(uri, attr, out);
    struct ub__devsel ds;
    int rc = ub__devsel_open(uri, &ds);
    if (rc)
        return rc;
    struct ub__ctx *x = calloc(1, sizeof(*x));
    if (!x) {
        ub__dev_close(ds.dev);
        return UB_ENOMEM;
    }
    ub_context *ctx = &x->c;
    x->kind = ds.kind;
    x->udp = ds.udp;
    x->shm = ds.shm;
    x->clock = ub__clock_real;
    ctx->attr = *attr;
    ctx->dev = ds.dev;
    ctx->addr = ds.dev->local;
    if (ds.kind == UB_CTX_MULTI) {
        x->shm_addr = ds.shm->local;
        x->host_id = ub__host_id();
    } else if (ds.kind == UB_CTX_SHM) {
        x->host_id = ub__host_id();
    }
    if ((rc = ctx_init(x, attr, (uint64_t)(uintptr_t)x)) != 0) {
        ub__dev_close(ds.dev);
        free(x);
        return rc;
    }
    cma_setup(x, attr);
    if (attr->progress == UB_PROGRESS_AUTO && (rc = ub__progress_start(x)) != 0) {
        ctx->attr.progress = UB_PROGRESS_MANUAL;
        ub_context_close(ctx);
        return rc;
    }
    *out = ctx;
    return 0;
}

UB_EXPORT int ub_context_close(ub_context *ctx)
{
    if (!ctx)
        return UB_EINVAL;
    struct ub__ctx *x = ub__ctx_of(ctx);
    ub__progress_stop(x); /* no one else drives it from here on */
    ub__hold_stop(x);
    ub__ctx_lock(ctx);
    ub__ctx_flush_held(ctx); /* what the peers are owed (ACKs) still leaves */
    ctx->closing = true;
    struct ub__list *l;
    while (!ub__list_empty(&ctx->jettys))
        ub_jetty_destroy(UB_CONTAINER_OF(ctx->jettys.next, ub_jetty, link));
    while (!ub__list_empty(&ctx->jfss))
        ub_jfs_destroy(UB_CONTAINER_OF(ctx->jfss.next, ub_jfs, link));
    while (!ub__list_empty(&ctx->jfrs)) {
        ub_jfr *r = UB_CONTAINER_OF(ctx->jfrs.next, ub_jfr, link);
        r->refs = 1;
        ub_jfr_destroy(r);
    }
    while (!ub__list_empty(&ctx->jfcs)) {
        ub_jfc *c = UB_CONTAINER_OF(ctx->jfcs.next, ub_jfc, link);
        c->users = 0;
        c->events = 0;
        ub_jfc_destroy(c);
    }
    while (!ub__list_empty(&ctx->jfces)) {
        ub_jfce *e = UB_CONTAINER_OF(ctx->jfces.next, ub_jfce, link);
        e->users = 0;
        ub_jfce_destroy(e);
    }
    while (!ub__list_empty(&ctx->segs))
        ub_seg_unregister(UB_CONTAINER_OF(ctx->segs.next, ub_seg, link));
    while ((l = ub__list_pop_front(&ctx->tsegs)) != NULL)
        free(UB_CONTAINER_OF(l, ub_tseg, link));
    while ((l = ub__list_pop_front(&ctx->tjettys)) != NULL)
        free(UB_CONTAINER_OF(l, ub_tjetty, link));
    /* Nothing above may hear from PDS any more: the packets it fails now concern no one. */
    ub__pds_set_upcalls(ctx->eng.pds, NULL, NULL);
    ub__ses_fini(&ctx->ses);
    ub__hmap_fini(&ctx->objs);
    ub__lock_release(&x->lock);
    if (x->kind != UB_CTX_LOOP) {
        ub__dev_close(ctx->dev); /* a real device gives every buffer back when it closes */
        ub__engine_fini(&ctx->eng);
        free(x);
        return 0;
    }
    ub_loopnet *n = ctx->net;
    n->ports[ctx->port] = NULL;
    ub__dev_close(ctx->dev);
    /* The fabric may still hold packets from our pool (queued towards others): keep it until
     * they are back. */
    ub__pds_destroy(ctx->eng.pds, 0);
    ctx->eng.pds = NULL;
    ub__list_push_back(&n->zombies, &ctx->zombie);
    ub__loopnet_reap(n, false);
    return 0;
}

void ub__ctx_shm_check(ub_context *ctx, uint64_t now)
{
    struct ub__ctx *x = ub__ctx_of(ctx);
    x->shm_checked = now;
    ub__shm_check_peers(x->shm);
    uint16_t ids[16];
    uint32_t n;
    while ((n = ub__shm_take_gone(x->shm, ids, 16)) != 0)
        for (uint32_t i = 0; i < n; i++) {
            struct ub__addr a;
            ub__shm_addr(&a, ids[i]);
            ub__pds_peer_gone(ctx->eng.pds, &a);
            ub__ses_peer_gone(&ctx->ses, &a);
        }
}

/* Whether a round may hold its output for the application's reaction (hold.c). */
static inline bool round_may_hold(const ub_context *ctx, const struct ub__ctx *x)
{
    return !x->hold_off && (ctx->attr.progress != UB_PROGRESS_AUTO || x->wait_round);
}

/*
 * A round from its receive on (ub__ctx_progress_locked's second half): got the datagrams the
 * receive took, cr0 and w0 the records pushed and WRITEs placed before it, busy whether
 * the first half found work, n what it moved.
 */
static UB_ALWAYS_INLINE int round_rest(ub_context *ctx, uint64_t now, bool may_hold, bool busy,
                                       int n, int got, uint64_t cr0, uint64_t w0)
{
    struct ub__ctx *x = ub__ctx_of(ctx);
    uint64_t next = ub__engine_next_deadline(&ctx->eng);
    if (next <= now) {
        ub__engine_expire(&ctx->eng, now);
        busy = true;
    }
    /* Nothing was queued, arrived or due (an idle poll): nothing is now either, and until the
     * next deadline only a datagram or an API call can change that (poll_quiet). */
    if (!busy && got == 0) {
        x->quiet = x->quiet_ok;
        x->quiet_until = next;
        goto out;
    }
    n += got;
    /* A round about to be held keeps the responses it made out of PDS too: they go after the
     * application's answer (ub__ctx_send_out). */
    bool wrote = ctx->writes_placed != w0;
    x->writes_unanswered = wrote;
    bool react = may_hold && (ctx->cr_pushed != cr0 || (wrote && x->writes_answered));
    ub__ses_pump_held(&ctx->ses, now, react);
    /* Asked once: with nothing to send, neither the hold nor the sends below do anything. */
    bool pending = ctx->ses.prsp_n || ub__engine_pending(&ctx->eng);
    if (react && pending) {
        ub__ctx_hold(ctx); /* or, failing, sent the lot */
        if (x->tx_held)
            return n < 0 ? 1 : n + 1;
    }
    if (pending) {
        n += ub__drive_send(&ctx->eng, ctx->dev, now, &ctx->drive);
        if (ub__engine_pending(&ctx->eng))
            n += ub__drive_once(&ctx->eng, ctx->dev, now, &ctx->drive);
    }
    if (!ub__list_empty(&ctx->ses.cmaq))
        n++; /* single copies under way: come back soon */
out:
    if ((++ctx->drive_rounds & 1023) == 0) {
        ub__ses_tgt_gc(&ctx->ses, now);
        if (x->kind == UB_CTX_LOOP && !ub__list_empty(&ctx->net->zombies))
            ub__loopnet_reap(ctx->net, false);
        ub__ctx_shm_check_due(ctx, now);
    }
    return n < 0 ? 0 : n;
}

int ub__ctx_progress_locked(ub_context *ctx)
{
    struct ub__ctx *x = ub__ctx_of(ctx);
    uint64_t now = ub__ctx_now(ctx);
    x->round_now = now;
    x->quiet = false;
    if (x->kind == UB_CTX_LOOP)
        ub__loopnet_set_time(ctx->net->net, now);
    /*
     * Posted requests, then receive, timers, the transaction layer again (requests just
     * received become responses), and one output batch: an ACK and the response to the
     * request it acknowledges leave in one send call (sendmmsg), not two.
     *
     * Manual progress: when the round produced completion records, or executed plain WRITEs
     * while the application answers those (it polls memory for them), the application is
     * about to react, typically by posting: the output waits for that post (or the next
     * round, or the watchdog), so the ACK, the response and the new request leave as one
     * datagram bundle (hold.c).
     */
    bool may_hold = round_may_hold(ctx, x);
    int n = 0;
    bool busy = ub__ses_pump(&ctx->ses, now) || ub__engine_pending(&ctx->eng);
    /* What an earlier round held and what was posted since leave before this round may
     * hold output again. */
    if (x->tx_held || (may_hold && busy)) {
        x->tx_held = false;
        x->answered = false; /* held output left without a post */
        n += ub__drive_send(&ctx->eng, ctx->dev, now, &ctx->drive);
    }
    ctx->drive.rounds++;
    if (x->writes_unanswered) /* no post came between the last round's WRITEs and this one */
        x->writes_answered = x->writes_unanswered = false;
    uint64_t cr0 = ctx->cr_pushed, w0 = ctx->writes_placed;
    int got = ub__drive_recv(&ctx->eng, ctx->dev, now, &ctx->drive);
    return round_rest(ctx, now, may_hold, busy, n, got, cr0, w0);
}

/*
 * A poll in a quiet spell: the last round found nothing queued, arrived or due, and nothing
 * but polls has taken the lock since (ub__ctx_lock ends the spell). Until the engine's next
 * deadline the round's first half and its timers have nothing to do, so the poll is the
 * device's receive and, when that found something, the rest of the round: a waiting side's
 * every poll, a fifth of its instructions less over udp sockets and a third with the packet
 * ring (docs/progress.md, "Quiet polls").
 */
static int poll_quiet(ub_context *ctx, struct ub__ctx *x)
{
    uint64_t now = ub__ctx_now(ctx);
    /* The round's every-1024th chores come with a whole round. */
    if (now >= x->quiet_until || ((ctx->drive_rounds + 1) & 1023) == 0)
        return ub__ctx_progress_locked(ctx);
    x->round_now = now;
    ctx->drive.rounds++;
    struct ub__pkt *batch[UB_DRIVE_BATCH];
    int got = ub__dev_recv(ctx->dev, batch, UB_DRIVE_BATCH, &ctx->eng.pool);
    if (got == 0) {
        ctx->drive_rounds++;
        x->st_quiet++;
        return 0;
    }
    x->quiet = false;
    uint64_t cr0 = ctx->cr_pushed, w0 = ctx->writes_placed;
    got = ub__drive_recv_from(&ctx->eng, ctx->dev, now, &ctx->drive, batch, got);
    return round_rest(ctx, now, round_may_hold(ctx, x), false, 0, got, cr0, w0);
}

int ub__ctx_poll_locked(ub_context *ctx)
{
    struct ub__ctx *x = ub__ctx_of(ctx);
    return x->quiet ? poll_quiet(ctx, x) : ub__ctx_progress_locked(ctx);
}

void ub__ctx_send_locked(ub_context *ctx, uint64_t now)
{
    struct ub__ctx *x = ub__ctx_of(ctx);
    if (x->kind == UB_CTX_LOOP)
        ub__loopnet_set_time(ctx->net->net, now);
    x->tx_held = false;
    ub__ctx_send_out(ctx, now);
}

UB_EXPORT int ub_progress(ub_context *ctx)
{
    if (!ctx)
        return UB_EINVAL;
    ub__ctx_lock(ctx);
    int n = ub__ctx_progress_locked(ctx);
    ub__ctx_unlock(ctx);
    return n;
}

UB_EXPORT int ub_context_fd(ub_context *ctx)
{
    if (!ctx)
        return UB_EINVAL;
    /* Locked: a device may set its fd up now (udp: its sockets join the epoll set), which
     * must not race a round that adds udp's connected socket. */
    ub__ctx_lock(ctx);
    int fd = ub__dev_fd(ctx->dev);
    ub__ctx_unlock(ctx);
    return fd;
}

UB_EXPORT int ub_context_next_timeout_ms(ub_context *ctx)
{
    if (!ctx)
        return UB_EINVAL;
    struct ub__ctx *x = ub__ctx_of(ctx);
    ub__ctx_lock(ctx);
    uint64_t d = ub__engine_next_deadline(&ctx->eng);
    uint64_t now = ub__ctx_now(ctx);
    /* Held output goes with the next round, as does input a poll's round left for later (a
     * yield); an shm device that asks for a wake-up and finds packets waiting (busy polling
     * asked for none) needs a round now too. */
    bool pending = ub__engine_pending(&ctx->eng) || x->tx_held || ub__engine_rx_later(&ctx->eng) ||
                   (x->shm && ub__shm_arm(x->shm) > 0);
    ub__ctx_unlock(ctx);
    if (pending || d <= now)
        return 0;
    if (d == UB_TIME_NEVER)
        return -1;
    uint64_t ms = (d - now + UB_NS_PER_MS - 1) / UB_NS_PER_MS;
    return ms > 0x7fffffff ? 0x7fffffff : (int)ms;
}

UB_EXPORT int ub_context_addr(const ub_context *ctx, char *buf, size_t len)
{
    if (!ctx || (!buf && len))
        return UB_EINVAL;
    const struct ub__ctx *x = ub__ctx_of(ctx);
    int n = ub__addr_format(&ctx->addr, buf, len);
    if (x->kind == UB_CTX_MULTI && n >= 0) {
        size_t off = (size_t)n < len ? (size_t)n : len;
        n += snprintf(buf + off, len - off, "+shm:%u", x->shm_addr.port);
    }
    return n;
}

UB_EXPORT int ub_context_stats(ub_context *ctx, struct ub_context_stats *out)
{
    if (!ctx || !out)
        return UB_EINVAL;
    struct ub__ctx *x = ub__ctx_of(ctx);
    memset(out, 0, sizeof(*out));
    ub__ctx_lock(ctx);
    const struct ub__engine_stats *es = &ctx->eng.stats;
    out->tx_pkts = es->tx_pkts;
    out->tx_bytes = es->tx_bytes;
    out->rx_pkts = es->rx_pkts;
    out->rx_bytes = es->rx_bytes;
    out->rx_malformed = es->rx_malformed;
    out->rx_unsupported = es->rx_unsupported;
    if (ctx->eng.pds) {
        const struct ub__pds_stats *ps = ub__pds_stats(ctx->eng.pds);
        out->retransmits = ps->retx_pkts;
        out->retx_rto = ps->retx_rto;
        out->retx_fast = ps->retx_fast;
        out->retx_nack = ps->retx_nack;
        out->retx_probe = ps->retx_probe;
        out->rto_fired = ps->rto_fired;
        out->rto_undone = ps->rto_undone;
        out->rx_ce = ps->rx_ce;
        out->acks_ecn_rx = ps->acks_ecn_rx;
        out->peers_failed = ps->pdc_failed;
        out->tx_link = ps->tx_link;
        out->rx_link = ps->rx_link;
        out->rx_link_stale = ps->rx_link_stale;
        out->rx_malformed += ps->rx_malformed;
        out->acks_tx = ps->acks_tx - ps->acks_coalesced;
    }
    out->num_paths = ub__dev_num_paths(ctx->dev);
    if (x->udp) {
        struct ub__udp_stats us;
        if (ub__udp_stats(x->udp, &us) == 0) {
            out->dev_rx_drops = us.rx_kernel_drops + us.rx_truncated;
            out->tx_udp_pkts = us.tx_pkts;
            out->rx_udp_ring = us.rx_ring;
            out->udp_tx_calls = us.tx_batches;
            out->udp_gso_runs = us.tx_gso_msgs;
            out->udp_gso_pkts = us.tx_gso_segs;
            out->udp_rx_calls = us.rx_batches;
            out->udp_gro_runs = us.rx_gro_msgs;
            out->udp_gro_pkts = us.rx_gro_segs;
            for (uint32_t i = 0; i < us.num_paths && i < UB_STATS_MAX_PATHS; i++)
                out->path_tx_pkts[i] = us.path[i].tx_pkts;
        }
    }
    const struct ub__ses_stats *st = &ctx->ses.st;
    out->cma_reqs = st->cma_reqs;
    out->cma_fallbacks = st->cma_fallbacks;
    out->cma_done = st->cma_done;
    out->cma_bytes = st->cma_bytes;
    out->cma_refused = st->cma_refused;
    out->cma_unexpected = st->cma_unexpected;
    out->cma_min = ctx->ses.cma.peer ? ctx->ses.cma_min : 0;
    out->cma_errors = st->cma_errors + st->cma_expired;
    if (x->shm) {
        struct ub__shm_stats ss;
        if (ub__shm_stats(x->shm, &ss) == 0) {
            out->tx_shm_pkts = ss.tx_pkts;
            out->dev_rx_drops += ss.rx_bad_slot;
        }
    }
    ub__ctx_unlock(ctx);
    return 0;
}

UB_EXPORT int ub_get_async_event(ub_context *ctx, struct ub_async_event *ev)
{
    if (!ctx || !ev)
        return UB_EINVAL;
    ub__ctx_lock(ctx);
    int got = 0;
    if (ctx->async_count) {
        *ev = ctx->async[ctx->async_head];
        ctx->async_head = (ctx->async_head + 1) % UB_SES_ASYNC_QUEUE;
        ctx->async_count--;
        got = 1;
    }
    ub__ctx_unlock(ctx);
    return got;
}

UB_EXPORT const char *ub_cr_status_str(enum ub_cr_status s)
{
    switch (s) {
    case UB_CR_SUCCESS:
        return "success";
    case UB_CR_LOC_LEN_ERR:
        return "local length error";
    case UB_CR_LOC_ACCESS_ERR:
        return "local access error";
    case UB_CR_REM_ACCESS_ERR:
        return "remote access error";
    case UB_CR_REM_LEN_ERR:
        return "remote length error";
    case UB_CR_INVALID_TOKEN:
        return "invalid token";
    case UB_CR_RNR:
        return "receiver not ready";
    case UB_CR_PEER_UNREACHABLE:
        return "peer unreachable";
    case UB_CR_FLUSHED:
        return "flushed";
    case UB_CR_UNSUPPORTED:
        return "unsupported operation";
    case UB_CR_REM_OP_ERR:
        return "remote operation error";
    }
    return "unknown status";
}
