/*
 * Single copy (cross-memory attach) for large RMA and large messages between processes of
 * one host.
 *
 * Who copies: always the target, the owner of the segment. A WRITE of at least
 * `cma_min` bytes to a shm peer goes as one request packet whose payload describes the
 * initiator's source (its address ranges; the target knows the initiator's pid from its
 * own shm attach, never from the wire); when the order engine runs it, the target checks
 * token, access and bounds (again before every chunk: unregistering revokes at once) and
 * pulls the bytes with process_vm_readv straight into the segment, then answers. A READ
 * goes the same way and the target pushes from its segment into the initiator's sink
 * with process_vm_writev, then answers. So protection and order are enforced where the
 * memory is, exactly as on the packet path, with one round trip and one copy. An untagged
 * SEND or SEND_IMM of at least `cma_min` bytes goes the same way instead of as an eager part
 * and a rendezvous READ: once its turn has come and a receive buffer is bound to it, the
 * target pulls the message straight into that buffer's elements and then records it. A
 * tagged one is matched in send order and pulled into the buffer it matched; one that
 * matches nothing is answered CMA_UNEXPECTED without executing (ses_msg.c bind_tagged): the
 * initiator sends it again as packets, which can wait for a buffer as no descriptor can.
 *
 * Descriptor (the request's payload, big endian):
 *   valid_until(64) | nseg(16) | rsv(48) | nseg x (address(64) | length(64))
 * valid_until is a CLOCK_MONOTONIC time (one clock for every process of a host): the
 * target copies nothing after it. The initiator sets it to half its response bound, so a
 * request the initiator gave up on (and whose buffers it may reuse) is never copied late.
 *
 * A target that cannot copy (no hooks, single copy disabled, the kernel refuses) answers
 * CMA_REFUSED without executing; the initiator sends the same transaction again as packets
 * and uses packets on that stream from then on.
 */
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "core/compiler.h"
#include "ses/ses_tgt.h"
#include "wire/datagram.h"

struct ub__cmajob {
    struct ub__list link; /* s->cmaq */
    struct ub__rxmsg *m;
    uint64_t off; /* bytes copied */
};

static void put_be(uint8_t *b, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        b[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

static uint64_t get_be(const uint8_t *b, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | b[i];
    return v;
}

/* ---- initiator ------------------------------------------------------------------------ */

static uint32_t desc_segs(const struct ub__wr *w)
{
    if (w->is_inline)
        return 1;
    uint32_t n = 0;
    for (uint32_t i = 0; i < w->num_sge; i++)
        n += w->sge[i].len != 0;
    return n;
}

uint32_t ub__ses_cma_desc_len(const struct ub__wr *w)
{
    return UB_SES_CMA_HDR + UB_SES_CMA_SEG * desc_segs(w);
}

/*
 * 12 bytes per ns of a copy's fixed part: where the lanes' two copies per byte have cost as
 * much more (the crossing measured ~16 bytes per ns for latency, ~7 for bandwidth, docs/api.md
 * "Single copy"). At least 16 KiB (at 8 KiB the lanes won on every host measured), at most
 * 64 KiB (the eager size: past it a message in packets takes the rendezvous round trip).
 */
uint32_t ub__ses_cma_auto_min(uint64_t cost_ns)
{
    if (cost_ns >= UB_SES_CMA_AUTO_MAX / UB_SES_CMA_BYTES_PER_NS)
        return UB_SES_CMA_AUTO_MAX;
    uint64_t n = (cost_ns * UB_SES_CMA_BYTES_PER_NS + 4095) & ~(uint64_t)4095; /* whole pages */
    return (uint32_t)UB_MAX((uint64_t)UB_SES_CMA_MIN, n);
}

bool ub__ses_cma_choose(struct ub__tl *s, const struct ub__wr *w)
{
    if (!s->cma.peer || !w->len || w->len < s->cma_min)
        return false;
    if (w->opcode != UB_OP_WRITE && w->opcode != UB_OP_WRITE_IMM && w->opcode != UB_OP_READ &&
        w->opcode != UB_OP_SEND && w->opcode != UB_OP_SEND_IMM && w->opcode != UB_OP_TSEND)
        return false;
    /* A tagged message up to eager_max goes eagerly: streamed, it outruns the copies, and
     * unmatched it is buffered at once, where a single copy would be sent again. */
    if (w->opcode == UB_OP_TSEND && w->len <= s->eager_max)
        return false;
    if (w->os && w->os->no_cma)
        return false;
    uint32_t n = desc_segs(w);
    if (n > UB_SES_CMA_MAX_SEG || ub__ses_cma_desc_len(w) > s->max_payload)
        return false;
    pid_t pid;
    return s->cma.peer(s->cma.arg, &w->dst, &pid) == 0;
}

void ub__ses_cma_desc_put(const struct ub__wr *w, uint64_t until, uint8_t *d)
{
    memset(d, 0, UB_SES_CMA_HDR);
    put_be(d, until, 8);
    put_be(d + 8, desc_segs(w), 2);
    d += UB_SES_CMA_HDR;
    if (w->is_inline) {
        put_be(d, (uint64_t)(uintptr_t)w->inl, 8);
        put_be(d + 8, w->len, 8);
        return;
    }
    for (uint32_t i = 0; i < w->num_sge; i++) {
        if (!w->sge[i].len)
            continue;
        put_be(d, (uint64_t)(uintptr_t)w->sge[i].addr, 8);
        put_be(d + 8, w->sge[i].len, 8);
        d += UB_SES_CMA_SEG;
    }
}

uint64_t ub__ses_cma_bound(const struct ub__tl *s, const struct ub__wr *w)
{
    return s->rsp_timeout_ns + (w->cma ? w->len * UB_SES_CMA_NS_PER_BYTE : 0);
}

/* ---- target --------------------------------------------------------------------------- */

bool ub__tgt_cma_allowed(struct ub__tl *s, struct ub__rxmsg *m)
{
    return s->cma.peer && s->cma.peer(s->cma.arg, &m->src, &m->cma_pid) == 0;
}

uint8_t ub__tgt_cma_parse(struct ub__tl *s, struct ub__rxmsg *m, const uint8_t *p, uint32_t n)
{
    (void)s;
    if (m->op != UB_SES_OP_WRITE && m->op != UB_SES_OP_READ && m->op != UB_SES_OP_SEND &&
        m->op != UB_SES_OP_TAGGED_SEND)
        return UB_SES_RC_UNSUPPORTED_OP;
    if (n < UB_SES_CMA_HDR)
        return UB_SES_RC_UNSUPPORTED_SIZE;
    uint32_t nseg = (uint32_t)get_be(p + 8, 2);
    if (!nseg || nseg > UB_SES_CMA_MAX_SEG || n < UB_SES_CMA_HDR + nseg * UB_SES_CMA_SEG)
        return UB_SES_RC_UNSUPPORTED_SIZE;
    uint64_t *seg = malloc(2 * nseg * sizeof(*seg));
    if (!seg)
        return UB_SES_RC_HOST_UNSUCCESS_CMPL;
    uint64_t total = 0;
    for (uint32_t i = 0; i < nseg; i++) {
        const uint8_t *q = p + UB_SES_CMA_HDR + i * UB_SES_CMA_SEG;
        uint64_t a = get_be(q, 8), l = get_be(q + 8, 8);
        if (l > UB_SES_MAX_MSG || a + l < a || (total += l) > UB_SES_MAX_MSG) {
            free(seg);
            return UB_SES_RC_UNSUPPORTED_SIZE;
        }
        seg[2 * i] = a;
        seg[2 * i + 1] = l;
    }
    if (total != m->len) {
        free(seg);
        return UB_SES_RC_UNSUPPORTED_SIZE;
    }
    m->cma_until = get_be(p, 8);
    m->cma_nseg = nseg;
    m->cma_seg = seg;
    return UB_SES_RC_OK;
}

bool ub__tgt_cma_start(struct ub__tl *s, struct ub__rxmsg *m, uint64_t now)
{
    struct ub__cmajob *j = calloc(1, sizeof(*j));
    if (!j) {
        ub__tgt_respond(s, m, UB_SES_RC_HOST_UNSUCCESS_CMPL, 0, false, 0, now);
        ub__tgt_executed_now(m->ts, m);
        return true;
    }
    m->running = true;
    m->ts->busy++;
    j->m = m;
    ub__list_push_back(&s->cmaq, &j->link);
    return false;
}

/* Where message byte off lies here, and *room: how many bytes are contiguous from there.
 * base: the segment's address of byte 0 (RMA); NULL: a message's receive buffer. */
static uint8_t *local_at(const struct ub__rxmsg *m, uint8_t *base, uint64_t off, uint64_t *room)
{
    if (base) {
        *room = m->len - off;
        return base + off;
    }
    for (uint32_t i = 0; i < m->rb->num_sge; i++) {
        const struct ub_sge *g = &m->rb->sge[i];
        if (off < g->len) {
            *room = g->len - off;
            return (uint8_t *)g->addr + off;
        }
        off -= g->len;
    }
    *room = 0;
    return NULL;
}

/* Copies message bytes [off, off + n) between here (base, as local_at) and the initiator:
 * pulled for WRITE and SEND, pushed for READ. */
static int cma_copy(struct ub__tl *s, const struct ub__rxmsg *m, uint8_t *base, uint64_t off,
                    uint64_t n)
{
    uint32_t i = 0;
    uint64_t pos = 0; /* message offset of the initiator's range i */
    while (n) {
        while (i < m->cma_nseg && off >= pos + m->cma_seg[2 * i + 1])
            pos += m->cma_seg[2 * i++ + 1];
        uint64_t room;
        uint8_t *local = local_at(m, base, off, &room);
        if (i == m->cma_nseg || !local)
            return UB_EINVAL; /* cannot be: the ranges add up to len, and len fits here */
        uint64_t o = off - pos, k = UB_MIN(UB_MIN(m->cma_seg[2 * i + 1] - o, n), room);
        struct iovec iov = {local, (size_t)k};
        int rc = m->op == UB_SES_OP_READ ? s->cma.write(m->cma_pid, m->cma_seg[2 * i] + o, &iov, 1)
                                         : s->cma.read(m->cma_pid, m->cma_seg[2 * i] + o, &iov, 1);
        if (rc)
            return rc;
        off += k;
        n -= k;
    }
    return 0;
}

/* The copy of j is over: rc (a return code) or err (a UB_E* from the copy) says how. */
static void cma_end(struct ub__tl *s, struct ub__cmajob *j, uint8_t rc, int err, uint64_t now)
{
    struct ub__rxmsg *m = j->m;
    struct ub__tstream *ts = m->ts;
    ub__list_remove(&j->link);
    free(j);
    m->running = false;
    ts->busy--;
    if (err == UB_ENOTSUP) {
        /* The kernel refuses (policy changed): not executed; the initiator resends as
         * packets, which rewrite every byte this copy may have moved. */
        s->st.cma_refused++;
        ub__tgt_send_rsp(s, &m->src, m->stream, m->seq, UB_SES_RC_CMA_REFUSED, 0, false, 0, now);
        ub__tgt_msg_free(s, m);
        ub__tgt_try_exec(s, ts, now);
        return;
    }
    if (err) {
        s->st.cma_errors++;
        rc = err == UB_EUNREACH ? UB_SES_RC_UNDELIVERABLE /* the initiator is gone */
             : err == UB_EINVAL ? UB_SES_RC_BAD_ADDR      /* EFAULT: a range is not mapped */
                                : UB_SES_RC_HOST_UNSUCCESS_CMPL;
    }
    if (rc == UB_SES_RC_CMA_EXPIRED)
        s->st.cma_expired++;
    if (rc == UB_SES_RC_OK) {
        if (m->jfr && m->rb) /* SEND, WRITE_IMM: the record, after the data */
            ub__tgt_deliver_recv(s, m, now);
        else if (m->op == UB_SES_OP_WRITE)
            s->ctx->writes_placed++;
        s->st.executed++;
        s->st.cma_done++;
    }
    ub__tgt_respond(s, m, rc, rc == UB_SES_RC_OK ? (uint32_t)m->len : 0, false, 0, now);
    ub__tgt_executed_now(ts, m);
    ub__tgt_msg_free(s, m);
    ub__tgt_try_exec(s, ts, now);
}

bool ub__ses_cma_pump(struct ub__tl *s, uint64_t now)
{
    uint64_t budget = UB_SES_CMA_BUDGET;
    while (!ub__list_empty(&s->cmaq) && budget) {
        struct ub__cmajob *j = UB_CONTAINER_OF(s->cmaq.next, struct ub__cmajob, link);
        struct ub__rxmsg *m = j->m;
        uint8_t rc = UB_SES_RC_OK;
        uint8_t *base = NULL; /* a message: into its receive buffer */
        if (m->op == UB_SES_OP_SEND || m->op == UB_SES_OP_TAGGED_SEND) {
            if (!m->rb) /* its JFR was destroyed meanwhile (ub__ses_jfr_flush) */
                rc = UB_SES_RC_CANCELLED;
        } else {
            uint32_t need = m->op == UB_SES_OP_WRITE ? UB_ACCESS_WRITE : UB_ACCESS_READ;
            ub_seg *seg = NULL;
            /* Every chunk: a segment unregistered meanwhile is never touched again. */
            rc = ub__tgt_seg_check(s->ctx, m->key, m->mkey, need, m->addr, m->len, &seg);
            if (rc == UB_SES_RC_OK)
                base = seg->addr + (m->addr - (uint64_t)(uintptr_t)seg->addr);
        }
        if (rc == UB_SES_RC_OK && s->cma.clock(s->cma.arg) >= m->cma_until)
            rc = UB_SES_RC_CMA_EXPIRED; /* the initiator may have given up: copy nothing more */
        int err = 0;
        if (rc == UB_SES_RC_OK && j->off < m->len) {
            uint64_t n = UB_MIN(UB_MIN((uint64_t)UB_SES_CMA_CHUNK, m->len - j->off), budget);
            err = cma_copy(s, m, base, j->off, n);
            if (!err) {
                j->off += n;
                budget -= n;
                s->st.cma_bytes += n;
                if (j->off < m->len)
                    continue;
            }
        }
        cma_end(s, j, rc, err, now);
    }
    return !ub__list_empty(&s->cmaq);
}

void ub__ses_cma_fini(struct ub__tl *s)
{
    struct ub__list *l;
    while (s->cmaq.next && (l = ub__list_pop_front(&s->cmaq)) != NULL) {
        struct ub__cmajob *j = UB_CONTAINER_OF(l, struct ub__cmajob, link);
        j->m->running = false;
        if (j->m->ts)
            j->m->ts->busy--;
        free(j);
    }
}
