/*
 * Shared harness of the PDS tests: two (or more) engines on the loop fabric,
 * "transactions" made of 1..3 packets whose every packet carries (message id,
 * index, count, length) and a checksum of its payload, so the receiving side
 * can assert exactly-once and intact delivery per packet and per message.
 *
 * Include after cmocka.h. Everything is static; unused helpers are marked so.
 */
#ifndef TEST_PDS_HARNESS_H
#define TEST_PDS_HARNESS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "core/clock.h"
#include "core/compiler.h"
#include "engine/testbed.h"
#include "sanitized.h"

#define H_MAGIC 0x50445354u /* "PDST" */
#define H_HDR   20u         /* magic, msg, idx|cnt, len, csum */

/* Transactions per matrix cell: SOFTUB_PDS_TXNS, else 100 000 (10 000 under a sanitizer). */
static UB_UNUSED uint32_t h_txns(void)
{
    const char *e = getenv("SOFTUB_PDS_TXNS");
    if (e && *e)
        return (uint32_t)strtoul(e, NULL, 10);
    return UB_TEST_SANITIZED ? 10000 : 100000;
}

struct h_run {
    struct ub__testbed tb;
    uint16_t src, dst; /* sender and receiver node */
    uint8_t mode;
    uint32_t nmsg, npkt;
    uint32_t *msg_first; /* first packet id of message m; msg_first[nmsg] == npkt */
    uint8_t *delivered;  /* per packet: intact copies delivered (saturating) */
    uint8_t *acked;      /* per packet: acked upcalls */
    uint8_t *failed;     /* per packet: failed upcalls */
    int *fail_err;       /* per packet: the error of the first failure */
    uint32_t *msg_got;   /* per message: distinct packets delivered */
    uint32_t msgs_done, next_pkt;
    uint64_t corrupt;   /* deliveries whose checksum or framing was wrong */
    uint64_t foreign;   /* deliveries naming no packet of ours */
    uint64_t dup_deliv; /* deliveries of a packet already delivered */
    uint64_t ndeliv, nacked, nfailed;
    uint64_t acked_after_fail, fail_after_ack;
    bool own; /* packets go with ub__pds_tx.own (responses on ACKs) */
    /* Optional: observe each delivery (e.g. MP_RANGE checks). */
    void (*on_rx)(struct h_run *h, const struct ub__pds_rx *rx);
    uint64_t scratch[4];
};

static uint32_t h_csum(const uint8_t *b, uint32_t n)
{
    uint32_t x = 2166136261u; /* FNV-1a */
    for (uint32_t i = 0; i < n; i++)
        x = (x ^ b[i]) * 16777619u;
    return x;
}

static void h_put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

static uint32_t h_get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static uint32_t h_pkt_len(uint32_t pid)
{
    return 8 + (uint32_t)(ub__mix64(pid) % 200); /* payload bytes after the header */
}

static void h_on_deliver(void *arg, const struct ub__pds_rx *rx, uint64_t now)
{
    (void)now;
    struct h_run *h = arg;
    h->ndeliv++;
    if (h->on_rx)
        h->on_rx(h, rx);
    const uint8_t *b = rx->payload;
    uint32_t n = rx->payload_len;
    if (n < H_HDR || h_get32(b) != H_MAGIC) {
        h->corrupt++;
        return;
    }
    uint32_t msg = h_get32(b + 4), ic = h_get32(b + 8), len = h_get32(b + 12);
    uint32_t idx = ic & 0xffff, cnt = ic >> 16;
    if (len + H_HDR != n || h_get32(b + 16) != h_csum(b + H_HDR, len) ||
        h_csum(b, 16) != h_get32(b + H_HDR + len - 4)) {
        h->corrupt++;
        return;
    }
    if (msg >= h->nmsg || cnt != h->msg_first[msg + 1] - h->msg_first[msg] || idx >= cnt) {
        h->foreign++;
        return;
    }
    uint32_t pid = h->msg_first[msg] + idx;
    if (len != h_pkt_len(pid)) {
        h->corrupt++;
        return;
    }
    if (h->delivered[pid]) {
        h->dup_deliv++;
        if (h->delivered[pid] < 255)
            h->delivered[pid]++;
        return;
    }
    h->delivered[pid] = 1;
    if (++h->msg_got[msg] == cnt)
        h->msgs_done++;
}

static void h_on_acked(void *arg, uint64_t cookie, uint64_t now)
{
    (void)now;
    struct h_run *h = arg;
    h->nacked++;
    if (cookie >= h->npkt)
        return;
    if (h->failed[cookie])
        h->acked_after_fail++;
    if (h->acked[cookie] < 255)
        h->acked[cookie]++;
}

static void h_on_failed(void *arg, uint64_t cookie, int err, uint64_t now)
{
    (void)now;
    struct h_run *h = arg;
    h->nfailed++;
    if (cookie >= h->npkt)
        return;
    if (h->acked[cookie])
        h->fail_after_ack++;
    if (!h->failed[cookie])
        h->fail_err[cookie] = err;
    if (h->failed[cookie] < 255)
        h->failed[cookie]++;
}

static const struct ub__pds_upcalls h_upcalls = {
    .deliver = h_on_deliver, .acked = h_on_acked, .failed = h_on_failed};

/* Default fabric and engine settings: 2 us latency, 4 paths, UDP checksum modelled. */
static UB_UNUSED void h_default_cfg(struct ub__loopnet_cfg *nc, struct ub__engine_cfg *ec,
                                    uint64_t seed)
{
    memset(nc, 0, sizeof(*nc));
    memset(ec, 0, sizeof(*ec));
    nc->ports = 2;
    nc->mtu = 4096;
    nc->num_paths = 4;
    nc->seed = seed;
    nc->latency_ns = 2000;
    nc->queue_cap = 16384;
    nc->checksum = true;
    ec->seed = seed;
    ec->mtu = 4096;
    ec->num_paths = 4;
    ec->pool_bufs = 8192;
}

/* Sets up a run of nmsg messages of 1..3 packets each from node src to node dst. */
static UB_UNUSED void h_init(struct h_run *h, const struct ub__loopnet_cfg *nc,
                             const struct ub__engine_cfg *ec, uint32_t nodes, uint8_t mode,
                             uint32_t nmsg)
{
    memset(h, 0, sizeof(*h));
    assert_int_equal(ub__testbed_create(&h->tb, nodes, nc, ec), 0);
    h->src = 0;
    h->dst = 1;
    h->mode = mode;
    h->nmsg = nmsg;
    h->msg_first = calloc(nmsg + 1, sizeof(uint32_t));
    assert_non_null(h->msg_first);
    uint32_t n = 0;
    for (uint32_t m = 0; m < nmsg; m++) {
        h->msg_first[m] = n;
        n += 1 + (uint32_t)(ub__mix64(m ^ 0x5a5a) % 3);
    }
    h->msg_first[nmsg] = n;
    h->npkt = n;
    h->delivered = calloc(n + 1, 1);
    h->acked = calloc(n + 1, 1);
    h->failed = calloc(n + 1, 1);
    h->fail_err = calloc(n + 1, sizeof(int));
    h->msg_got = calloc(nmsg + 1, sizeof(uint32_t));
    assert_true(h->delivered && h->acked && h->failed && h->fail_err && h->msg_got);
    for (uint32_t i = 0; i < h->tb.n; i++)
        ub__pds_set_upcalls(h->tb.nodes[i].eng.pds, &h_upcalls, h);
}

static UB_UNUSED void h_fini(struct h_run *h)
{
    ub__testbed_destroy(&h->tb);
    free(h->msg_first);
    free(h->delivered);
    free(h->acked);
    free(h->failed);
    free(h->fail_err);
    free(h->msg_got);
}

/* Builds packet pid (SES header + framed payload) in node's pool; NULL if the pool is empty. */
static UB_UNUSED struct ub__pkt *h_build(struct h_run *h, uint16_t node, uint32_t pid)
{
    struct ub__pkt *p = ub__pkt_alloc(&h->tb.nodes[node].eng.pool);
    if (!p)
        return NULL;
    /* The message this packet belongs to: binary search over msg_first. */
    uint32_t lo = 0, hi = h->nmsg;
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (h->msg_first[mid] <= pid)
            lo = mid;
        else
            hi = mid;
    }
    uint32_t msg = lo, idx = pid - h->msg_first[lo];
    uint32_t cnt = h->msg_first[lo + 1] - h->msg_first[lo];
    uint32_t len = h_pkt_len(pid);
    struct ub__ses_std s = {.opcode = UB_SES_OP_SEND,
                            /* framing is the harness's own: SES sees single packets */
                            .flags = UB_SES_F_SOM | UB_SES_F_EOM,
                            .request_length = H_HDR + len};
    struct ub__wcur w;
    ub__wcur_init(&w, ub__pkt_put(p, UB_SES_STD_SIZE), UB_SES_STD_SIZE);
    assert_int_equal(ub__ses_std_encode(&s, &w), 0);
    uint8_t *b = ub__pkt_put(p, H_HDR + len);
    h_put32(b, H_MAGIC);
    h_put32(b + 4, msg);
    h_put32(b + 8, idx | cnt << 16);
    h_put32(b + 12, len);
    uint64_t x = ub__mix64(pid + 1);
    for (uint32_t i = 0; i < len; i++)
        b[H_HDR + i] = (uint8_t)(x >> (8 * (i % 8))) ^ (uint8_t)i;
    h_put32(b + H_HDR + len - 4, h_csum(b, 16)); /* the tail binds payload to the header */
    h_put32(b + 16, h_csum(b + H_HDR, len));
    return p;
}

/* Hands packet pid to node src's PDS for dst; false when refused (queue full, no buffers). */
static UB_UNUSED bool h_send_one(struct h_run *h, uint32_t pid)
{
    struct ub__pkt *p = h_build(h, h->src, pid);
    if (!p)
        return false;
    struct ub__pds_tx tx = {.dst = &h->tb.nodes[h->dst].addr,
                            .mode = h->mode,
                            .cookie = pid,
                            .ses_kind = UB_PDS_NH_REQ_STD,
                            .own = h->own};
    int rc = ub__pds_send(h->tb.nodes[h->src].eng.pds, &tx, p, h->tb.now);
    if (rc) {
        ub__pkt_free(p);
        return false;
    }
    return true;
}

/* Offers packets until `upto` (or refusal); returns how many went. */
static UB_UNUSED uint32_t h_offer(struct h_run *h, uint32_t upto)
{
    uint32_t n = 0;
    while (h->next_pkt < upto && h_send_one(h, h->next_pkt)) {
        h->next_pkt++;
        n++;
    }
    return n;
}

/* Whether every packet sent so far is resolved (acked or failed). */
static UB_UNUSED bool h_resolved(const struct h_run *h)
{
    return h->nacked + h->nfailed >= h->next_pkt;
}

/*
 * Sends every packet, in slices, stepping the bed between them, then runs until idle or
 * `limit_ns` of simulated time passed. UUD has no acks: it is done once everything is sent.
 */
static UB_UNUSED void h_pump(struct h_run *h, uint64_t limit_ns)
{
    uint64_t end = h->tb.now + limit_ns;
    while (h->next_pkt < h->npkt && h->tb.now < end) {
        h_offer(h, h->npkt);
        ub__testbed_run(&h->tb, h->tb.now + 20000, 1000000);
    }
    ub__testbed_run(&h->tb, end, 100000000);
}

static UB_UNUSED const struct ub__pds_stats *h_st(const struct h_run *h, uint16_t node)
{
    return ub__pds_stats(h->tb.nodes[node].eng.pds);
}

static UB_UNUSED void h_dir(const struct h_run *h, uint16_t s, uint16_t d,
                            struct ub__loop_dir_stats *out)
{
    assert_int_equal(ub__loopnet_dir_stats(h->tb.net, s, d, out), 0);
}

/* Every packet delivered exactly once intact, acked exactly once, never failed. */
static UB_UNUSED void h_assert_exactly_once(const struct h_run *h)
{
    uint32_t missing = 0, multi = 0, unacked = 0, failed = 0;
    for (uint32_t i = 0; i < h->npkt; i++) {
        missing += h->delivered[i] == 0;
        multi += h->delivered[i] > 1;
        unacked += h->acked[i] != 1;
        failed += h->failed[i] != 0;
    }
    assert_int_equal(h->corrupt, 0);
    assert_int_equal(h->foreign, 0);
    assert_int_equal(missing, 0);
    assert_int_equal(multi, 0);
    assert_int_equal(h->dup_deliv, 0);
    assert_int_equal(unacked, 0);
    assert_int_equal(failed, 0);
    assert_int_equal(h->msgs_done, h->nmsg);
    assert_int_equal(h->ndeliv, h->npkt);
}

/* Every buffer is back in each pool once the fabric is idle and PDS holds nothing. */
static UB_UNUSED void h_assert_no_leak(struct h_run *h)
{
    for (uint32_t i = 0; i < h->tb.n; i++) {
        const struct ub__engine *e = &h->tb.nodes[i].eng;
        assert_int_equal(e->pool.avail, e->pool.count);
    }
}

#endif
