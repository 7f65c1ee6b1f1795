/*
 * The target side's shared state (internal to src/ses): order streams,
 * transactions being assembled or executed, and the functions the target's
 * files share: ses_tgt.c (assembly, order engine, execution), ses_rsp.c
 * (responses, READ streaming) and ses_msg.c (receive buffers, tag matching,
 * deferral, the target half of rendezvous).
 */
#ifndef UB_SES_SES_TGT_H
#define UB_SES_SES_TGT_H

#include "ses/ses.h"

enum { BIND_NONE = 0, BIND_BUF, BIND_UNEXP, BIND_RNR, BIND_WAIT };

struct ub__rspc {
    uint32_t seq;
    bool valid, has_val;
    uint8_t rc;
    uint32_t len;
    uint64_t val;
};

struct ub__tstream {
    struct ub__list lru;
    uint64_t key;
    struct ub__addr src;
    uint32_t inc;
    uint16_t id;
    uint32_t floor; /* every order_seq before it has executed */
    uint64_t bits[UB_SES_WINDOW / 64];
    uint32_t cur_epoch, ro_done;
    struct ub__hmap msgs;    /* order_seq -> struct ub__rxmsg */
    struct ub__list waiting; /* complete, waiting for their turn */
    struct ub__send_seqs ss; /* next send_seq to bind, per JFR */
    struct ub__rspc cache[UB_SES_RSP_CACHE];
    uint64_t last_active;
    uint32_t busy;
    bool pk; /* the initiator takes packed responses (its last request said so) */
};

struct ub__rxmsg {
    /* Set by msg_new for every message (ivl: emptied when the message was freed); the rest,
     * from `amo` on, is cleared when a freed message is reused. */
    struct ub__list link;  /* ts->waiting */
    struct ub__list ulink; /* jfr->unexpected */
    struct ub__tstream *ts;
    struct ub__addr src;
    uint16_t stream;
    uint32_t seq, send_seq, aux;
    uint8_t op, eo;
    bool fence, solicited, deferrable, pk; /* pk: the initiator takes packed responses */
    uint16_t so_delta, ro_count;
    uint32_t key, initiator;
    uint64_t addr, mkey;
    uint64_t len, wire_len;
    uint64_t restart; /* deferrable: the initiator's restart token */
    uint8_t rc;
    bool cma;                  /* single copy */
    struct ub__timer rd_timer; /* rendezvous: bound on the READ data; parked: PENDING again */
    struct ub__ivl ivl;        /* which bytes arrived (request packets, then READ data) */
    uint8_t amo;
    bool has_imm, som_seen, complete, staged, on_wait, running, on_unexp;
    bool rndv, in_rndv; /* in_rndv: in s->rndv under read_id (parked, or being READ) */
    bool in_map;        /* in ts->msgs */
    uint64_t imm;
    uint64_t got;                /* request bytes that arrived (ivl.total) */
    uint32_t rd_jfs, read_id;    /* rendezvous: the initiator's JFS, our READ's id */
    uint64_t rd_off, rd_key;     /* rendezvous: where the READ starts, its token */
    enum ub_cr_status cr_status; /* the receive record's status, if not success */
    uint8_t *stage;
    uint8_t bind;
    struct ub__rbuf *rb;
    ub_jfr *jfr;
    uint64_t operand, compare;
    bool cma_refuse;    /* answer CMA_REFUSED, not executed: resend */
    bool cma_unexp;     /* tagged, no buffer matched: answer CMA_UNEXPECTED, not executed */
    pid_t cma_pid;      /* the initiator's process */
    uint64_t cma_until; /* CLOCK_MONOTONIC time after which nothing is copied any more */
    uint32_t cma_nseg;
    uint64_t *cma_seg; /* address, length pairs in the initiator's memory */
};

/* ---- ses_tgt.c ---- */
void ub__tgt_msg_free(struct ub__tl *s, struct ub__rxmsg *m);
void ub__tgt_executed_now(struct ub__tstream *ts, struct ub__rxmsg *m);
void ub__tgt_try_exec(struct ub__tl *s, struct ub__tstream *ts, uint64_t now);

/* Checks a remote access; UB_SES_RC_OK or the return code that refuses it. */
uint8_t ub__tgt_seg_check(ub_context *ctx, uint32_t key, uint64_t token, uint32_t need,
                          uint64_t addr, uint64_t len, ub_seg **out);
/* Target: parses a single-copy descriptor into m (UB_SES_RC_OK or why not). */
uint8_t ub__tgt_cma_parse(struct ub__tl *s, struct ub__rxmsg *m, const uint8_t *p, uint32_t n);
/* Target: whether this side may copy to and from m's initiator (sets m->cma_pid). */
bool ub__tgt_cma_allowed(struct ub__tl *s, struct ub__rxmsg *m);
/* Target: m's turn came: starts its copy. Returns true if m is over (the caller frees it);
 * otherwise m stays alive until the copy ends (ub__ses_cma_pump). */
bool ub__tgt_cma_start(struct ub__tl *s, struct ub__rxmsg *m, uint64_t now);

/* ---- ses_rsp.c ---- */
/* Sends a response without data now, its packet tracked by PDS under cookie (0: none); false
 * if it cannot go now (nothing queued). */
bool ub__tgt_rsp_tracked(struct ub__tl *s, const struct ub__addr *dst, uint16_t stream,
                         uint32_t seq, uint8_t rc, uint64_t cookie, uint64_t now);
/* Sends a response (without data, or an 8-byte value); queued if it cannot go now. */
void ub__tgt_send_rsp(struct ub__tl *s, const struct ub__addr *dst, uint16_t stream, uint32_t seq,
                      uint8_t rc, uint32_t len, bool has_val, uint64_t val, uint64_t now);
/* Answers m (and keeps the answer for re-sending while m is in its stream). */
void ub__tgt_respond(struct ub__tl *s, struct ub__rxmsg *m, uint8_t rc, uint32_t len, bool has_val,
                     uint64_t val, uint64_t now);
/* Answers transaction seq of stream ts (kept in its cache for re-sending; ts may be NULL);
 * pk: the initiator takes packed responses. */
void ub__tgt_respond_in(struct ub__tl *s, struct ub__tstream *ts, const struct ub__addr *src,
                        uint16_t stream, uint32_t seq, bool pk, uint8_t rc, uint32_t len,
                        bool has_val, uint64_t val, uint64_t now);
/* A response without data or with an 8-byte value, gathered when pk allows. */
void ub__tgt_rsp_val(struct ub__tl *s, const struct ub__addr *dst, uint16_t stream, uint32_t seq,
                     uint8_t rc, uint32_t len, bool has_val, uint64_t val, bool pk, uint64_t now);
/* READ answers: at most UB_SES_PRSP_DATA bytes in one record; up to a packet's payload on
 * the ACK or in a packet of its own (false: it could not go); longer ones streamed. */
void ub__tgt_read_answer(struct ub__tl *s, const struct ub__addr *dst, uint16_t stream,
                         uint32_t seq, bool pk, uint8_t rc, const ub_seg *seg, uint64_t addr,
                         uint32_t len, uint64_t now);
bool ub__tgt_read_packet(struct ub__tl *s, const struct ub__addr *dst, uint16_t stream,
                         uint32_t seq, const ub_seg *seg, uint64_t addr, uint32_t len,
                         uint64_t now);
void ub__tgt_rd_start(struct ub__tl *s, struct ub__rxmsg *m);
void ub__ses_rsp_fini(struct ub__tl *s);

/* ---- ses_msg.c ---- */
void ub__tgt_rbuf_free(ub_jfr *jfr, struct ub__rbuf *rb);
uint64_t ub__tgt_rbuf_place(const struct ub__rbuf *rb, uint64_t off, const uint8_t *src,
                            uint64_t n);
void ub__tgt_stage_put(struct ub__tl *s, struct ub__rxmsg *m, uint64_t off, const uint8_t *p,
                       uint32_t n);
/* Binds an untagged message (or WRITE_IMM) to a buffer in send order; false: none free. */
bool ub__tgt_bind_untagged(struct ub__rxmsg *m);
/* The first buffer posted to the tag-matching jfr (in posting order) that takes tag, or NULL. */
struct ub__rbuf *ub__tgt_first_match(ub_jfr *jfr, uint64_t tag);
/* Tagged messages of one stream to one JFR are matched in send order. */
void ub__tgt_bind_tagged_in_order(struct ub__tl *s, struct ub__rxmsg *m, uint64_t now);
/* The receive record of m (its buffer goes back to the JFR's free list). */
void ub__tgt_deliver_recv(struct ub__tl *s, struct ub__rxmsg *m, uint64_t now);
/* A receive record of jfr, zeroed, to be filled in place and completed by ub__tgt_recv_done
 * (ub__jfc_next: nothing else may complete into its JFC in between). */
static inline struct ub_cr *ub__tgt_recv_cr(ub_jfr *jfr)
{
    struct ub_cr *cr = ub__jfc_next(jfr->jfc);
    memset(cr, 0, sizeof(*cr));
    return cr;
}
/* Completes cr, jfr's record from ub__tgt_recv_cr, filling in what every receive record has
 * (the buffer's user_ctx, the JFR, src's node); rb goes back to the JFR's free list. */
void ub__tgt_recv_done(struct ub__tl *s, ub_jfr *jfr, struct ub__rbuf *rb, struct ub_cr *cr,
                       const struct ub__addr *src, bool solicited);
/* Remembers a deferred message of src (FIFO per JFR); false if the JFR remembers too many. */
bool ub__tgt_defer_add(ub_jfr *jfr, const struct ub__addr *src, uint64_t token);
/* Rendezvous message m, executed and out of its stream, matched nothing and was answered
 * PENDING: it waits for a buffer, and its sender hears PENDING again while it does. */
void ub__tgt_rndv_park(struct ub__tl *s, struct ub__rxmsg *m, uint64_t now);
/* Rendezvous message m, executed and out of its stream, has a buffer: READ the rest. Returns
 * true if m is over (and must be freed by the caller). */
bool ub__tgt_rndv_begin(struct ub__tl *s, struct ub__rxmsg *m, uint64_t now);
/* m->rd_timer's callback: the initiator stopped answering our READ, or a parked message's
 * PENDING is due again. */
void ub__tgt_rndv_timeout(struct ub__timer *t, uint64_t now);

#endif
