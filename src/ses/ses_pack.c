/*
 * Several small requests in one packet (docs/wire-format.md section 6.1, docs/api.md
 * "Packing").
 *
 * A packed packet is `PDS | softub extension v1 with the P tail bit | SES standard request
 * (opcode NO_OP, SOM|EOM, request_length = payload bytes) | records`, each record
 * `length(16) | softub extension v1 (28 bytes: its own stream, order_seq, order class,
 * tail) | SES standard request (+ SES extension), SOM | payload`: exactly the bytes the
 * request's one packet would have had behind its own PDS header. All records of a packet belong to
 * one JFS and one destination (hence one stream).
 *
 * Initiator: PDS sees one packet with one cookie naming a pack group; its ACK or failure
 * is handed to every member still active (an ACK restarts each response bound, a failure
 * fails each as if its own packet had failed). Responses stay per request.
 *
 * Target: every record is checked before any runs (one malformed record refuses the whole
 * packet, nothing executed); then each goes through ub__ses_on_req as if it had come alone,
 * under the packet's PDS-verified source and incarnation: same order engine, exactly-once
 * window, response cache, protection checks and completion semantics.
 */
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "core/compiler.h"
#include "ses/ses.h"
#include "wire/datagram.h"

#define REC_EXT_SIZE (UB_EXT_SIZE + UB_SES_TAIL_LEN)
#define REC_MIN      (REC_EXT_SIZE + UB_SES_STD_SIZE)

struct ub__pack {
    uint32_t n;
    uint64_t member[]; /* the members' own cookies (stale ones name nothing any more) */
};

/*
 * The fixed 16 bytes of a record's softub extension at e (what ub__ext_decode accepts of
 * them), read in place into x (tail none): 0, or UB_EBADMSG for reserved bits or an
 * execution order out of range.
 */
static int ext_in_place(const uint8_t *e, uint8_t version, uint8_t next_hdr, struct ub__ext *x)
{
    if ((e[2] & UB_EXT_B2_RSVD) || (e[2] >> UB_EXT_B2_EO_SHIFT) > UB_EXT_EO_SO || e[3])
        return UB_EBADMSG;
    memset(x, 0, sizeof(*x));
    x->version = version;
    x->next_hdr = next_hdr;
    x->exec_order = (uint8_t)(e[2] >> UB_EXT_B2_EO_SHIFT);
    x->inorder_completion = (e[2] & UB_EXT_B2_CO) != 0;
    x->fence = (e[2] & UB_EXT_B2_F) != 0;
    x->aqm_increase = (e[2] & UB_EXT_B2_I) != 0;
    x->aqm_congestion = (e[2] & UB_EXT_B2_C) != 0;
    x->aqm_hint = ub__ld16(e + 4);
    x->stream = ub__ld16(e + 6);
    x->order_seq = ub__ld32(e + 8);
    x->incarnation = ub__ld32(e + 12);
    return 0;
}

/* ---- records ----------------------------------------------------------------------------- */

int ub__ses_pack_rec(const uint8_t *p, size_t n, struct ub__ses_prec *rec)
{
    if (n < UB_SES_PACK_LEN)
        return UB_ETRUNC;
    size_t len = ((size_t)p[0] << 8) | p[1];
    if (len > n - UB_SES_PACK_LEN)
        return UB_ETRUNC;
    if (len < REC_MIN)
        return UB_EBADMSG;
    struct ub__rcur r; /* the decoders below fill rec->ext and rec->ses whole */
    ub__rcur_init(&r, p + UB_SES_PACK_LEN, len);
    const uint8_t *e = p + UB_SES_PACK_LEN; /* len >= REC_MIN: the extension is there */
    int rc;
    if (e[0] == ((1u << 4) | UB_PDS_NH_REQ_STD) && e[1] == REC_EXT_SIZE / UB_EXT_HLEN_UNIT) {
        /* The form softub sends (version 1, one tail): what ub__ext_decode accepts of it,
         * read in place. */
        if (ext_in_place(e, 1, UB_PDS_NH_REQ_STD, &rec->ext))
            return UB_EBADMSG;
        struct ub__ext *x = &rec->ext;
        x->tail = e + UB_EXT_SIZE;
        x->tail_len = UB_SES_TAIL_LEN;
        ub__rcur_skip(&r, REC_EXT_SIZE);
    } else {
        rc = ub__ext_decode(&rec->ext, &r);
        if (rc)
            return rc == UB_ETRUNC ? UB_EBADMSG : rc; /* a record cut short is malformed */
    }
    /* A record is a whole request as the transaction layer sends it alone: a version-1
     * extension naming a standard request, neither packed again nor a rendezvous READ. */
    if (rec->ext.version < 1 || rec->ext.tail_len < UB_SES_TAIL_LEN ||
        rec->ext.next_hdr != UB_PDS_NH_REQ_STD ||
        (rec->ext.tail[8] & (UB_SES_TAIL_P | UB_SES_TAIL_R | UB_SES_TAIL_C)))
        return UB_EBADMSG;
    const uint8_t *h = ub__rcur_peek(&r, 1);
    if (h && ub__ses_ext_for(UB_PDS_NH_REQ_STD, (uint8_t)(h[0] & 0x3fu)) == UB_SES_EXT_NONE) {
        rec->ses.kind = UB_PDS_NH_REQ_STD; /* no SES extension: the standard header alone */
        rec->ses.ext = UB_SES_EXT_NONE;
        rc = ub__ses_std_decode(&rec->ses.u.std, &r);
    } else {
        rc = ub__ses_decode(&rec->ses, UB_PDS_NH_REQ_STD, &r);
    }
    if (rc)
        return UB_EBADMSG;
    const struct ub__ses_std *q = &rec->ses.u.std;
    if (!(q->flags & UB_SES_F_SOM) || q->opcode == UB_SES_OP_NO_OP ||
        q->opcode == UB_SES_OP_DEFER_RTR)
        return UB_EBADMSG;
    size_t pl = ub__rcur_remaining(&r);
    if (pl > q->request_length)
        return UB_EBADMSG; /* as for a packet alone: the payload is the request's first bytes */
    rec->payload = p + UB_SES_PACK_LEN + ub__rcur_offset(&r);
    rec->payload_len = (uint32_t)pl;
    return (int)(UB_SES_PACK_LEN + len);
}

typedef int rec_fn(const uint8_t *p, size_t n, struct ub__ses_prec *rec);

/* Parses every record of a packed payload into recs (UB_SES_PACK_RECS of them; NULL: only
 * checks). Their count, or UB_EBADMSG / UB_ETRUNC. */
static int parse_all(rec_fn *fn, const uint8_t *p, size_t n, struct ub__ses_prec *recs)
{
    int count = 0;
    struct ub__ses_prec one;
    while (n) {
        if (count == UB_SES_PACK_RECS)
            return UB_EBADMSG;
        int k = fn(p, n, recs ? &recs[count] : &one);
        if (k < 0)
            return k;
        p += k;
        n -= (size_t)k;
        count++;
    }
    return count ? count : UB_EBADMSG;
}

int ub__ses_pack_check(const uint8_t *p, size_t n)
{
    return parse_all(ub__ses_pack_rec, p, n, NULL);
}

/* ---- target ----------------------------------------------------------------------------- */

void ub__ses_pack_on_req(struct ub__tl *s, const struct ub__pds_rx *rx, uint64_t now)
{
    const struct ub__wire_dgram *d = rx->hdr;
    const struct ub__ses_std *c = &d->ses.u.std;
    s->st.rx_pack_pkts++;
    uint8_t both = UB_SES_F_SOM | UB_SES_F_EOM;
    struct ub__ses_prec recs[UB_SES_PACK_RECS];
    int count = UB_EBADMSG;
    if (c->opcode == UB_SES_OP_NO_OP && (c->flags & both) == both &&
        c->request_length == rx->payload_len)
        count = parse_all(ub__ses_pack_rec, rx->payload, rx->payload_len, recs);
    if (count < 0) {
        s->st.rx_pack_bad++; /* refused whole: nothing in it runs */
        s->st.rx_bad_pkts++;
        return;
    }
    /* Each record as a packet alone, with the packet's (PDS-verified) source and
     * incarnation: the record's own incarnation field is not trusted. */
    struct ub__wire_dgram rd;
    memset(&rd, 0, sizeof(rd));
    rd.has_ext = true;
    rd.ses_kind = UB_PDS_NH_REQ_STD;
    struct ub__pds_rx one = *rx;
    one.hdr = &rd;
    for (int i = 0; i < count; i++) {
        const struct ub__ses_prec *rec = &recs[i];
        rd.ext = rec->ext;
        rd.ext.incarnation = rx->incarnation;
        /* The standard header, and an extension header only when the record has one (the
         * target reads those only then): not the whole struct per record. */
        rd.ses.kind = rec->ses.kind;
        rd.ses.ext = rec->ses.ext;
        rd.ses.u.std = rec->ses.u.std;
        if (rec->ses.ext == UB_SES_EXT_ATOMIC)
            rd.ses.atomic = rec->ses.atomic;
        else if (rec->ses.ext == UB_SES_EXT_RNDV)
            rd.ses.rndv = rec->ses.rndv;
        rd.payload_len = rec->payload_len;
        one.payload = rec->payload;
        one.payload_len = rec->payload_len;
        s->st.rx_pack_recs++;
        ub__ses_on_req(s, &one, now);
    }
}

/* ---- initiator --------------------------------------------------------------------------- */

/* Bytes of w's record when it can be packed whole, 0 if it cannot. */
static uint32_t rec_size(const struct ub__tl *s, const struct ub__wr *w)
{
    if (w->state != WR_ACTIVE || w->first_sent || w->sent || w->cma || w->eager || w->deferred)
        return 0;
    uint32_t pl, hdr = UB_SES_STD_SIZE;
    switch (w->ses_op) {
    case UB_SES_OP_WRITE:
    case UB_SES_OP_SEND:
    case UB_SES_OP_DEFER_SEND:
    case UB_SES_OP_TAGGED_SEND:
        if (w->len > s->pack_max)
            return 0;
        pl = (uint32_t)w->len;
        break;
    case UB_SES_OP_READ:
        pl = 0;
        break;
    case UB_SES_OP_FETCHING_ATOMIC:
        hdr += ub__ses_amo_is_cswap(w->amo_op) ? UB_SES_CSWAP_SIZE : UB_SES_ATOMIC_SIZE;
        pl = ub__ses_amo_is_cswap(w->amo_op) ? 0 : 8;
        break;
    default:
        return 0;
    }
    return UB_SES_PACK_LEN + REC_EXT_SIZE + hdr + pl;
}

static uint32_t pack_alloc_id(struct ub__tl *s)
{
    uint32_t id;
    do
        id = ++s->next_pack;
    while (!id || ub__hmap_get(&s->packs, id));
    return id;
}

/* w's extension (version 1 with its tail, REC_EXT_SIZE bytes) at b: the bytes ub__ext_encode
 * writes for ub__ses_wr_ext's extension with the incarnation 0, without the generic checks
 * (every field is in range by construction; test_api_pack compares them). */
static void rec_ext_put(const struct ub__wr *w, uint8_t *b)
{
    b[0] = (uint8_t)((1u << 4) | UB_PDS_NH_REQ_STD); /* version 1 */
    b[1] = REC_EXT_SIZE / UB_EXT_HLEN_UNIT;
    b[2] = (uint8_t)((w->eo << UB_EXT_B2_EO_SHIFT) |
                     ((w->flags & UB_WR_INORDER_COMP) ? UB_EXT_B2_CO : 0) |
                     ((w->flags & UB_WR_FENCE) ? UB_EXT_B2_F : 0));
    b[3] = 0;
    ub__st16(b + 4, 0); /* aqm_hint */
    ub__st16(b + 6, w->os->id);
    ub__st32(b + 8, w->seq);
    ub__st32(b + 12, 0); /* incarnation: the packet's applies */
    ub__ses_wr_tail(w, b + UB_EXT_SIZE);
}

/* Appends w's record to p; 0 or UB_E*. */
static int put_rec(struct ub__tl *s, struct ub__wr *w, struct ub__pkt *p, uint32_t *n)
{
    uint8_t *lenp = ub__pkt_put(p, UB_SES_PACK_LEN);
    uint8_t *eb = lenp ? ub__pkt_put(p, REC_EXT_SIZE) : NULL;
    if (!eb)
        return UB_ENOBUFS;
    uint32_t start = p->len;
    rec_ext_put(w, eb);
    *n = w->ses_op == UB_SES_OP_READ || w->ses_op == UB_SES_OP_FETCHING_ATOMIC ? 0
                                                                               : (uint32_t)w->len;
    int rc = ub__ses_build_req(s, w, p, 0, *n, false); /* records follow: no attached payload */
    if (rc)
        return rc;
    uint32_t len = REC_EXT_SIZE + (p->len - start);
    lenp[0] = (uint8_t)(len >> 8);
    lenp[1] = (uint8_t)len;
    return 0;
}

int ub__ses_pack_pump(struct ub__tl *s, struct ub__wr *w, uint64_t now)
{
    struct ub__engine *e = s->eng;
    uint32_t size = rec_size(s, w);
    if (!size || !w->os)
        return UB_PACK_NONE;
    /* Members: w, then the queued requests of its stream, in posting order, while they fit
     * (a request of the stream that cannot be packed ends the search: wire order per stream
     * stays posting order). */
    struct ub__wr *mem[UB_SES_PACK_RECS];
    uint32_t k = 0, bytes = size, room = s->max_payload;
    mem[k++] = w;
    uint32_t scanned = 0;
    for (struct ub__list *it = w->txq.next;
         it != &s->txq && k < UB_SES_PACK_RECS && scanned < UB_SES_PACK_SCAN;
         it = it->next, scanned++) {
        struct ub__wr *x = UB_CONTAINER_OF(it, struct ub__wr, txq);
        if (x->os != w->os)
            continue;
        uint32_t l = rec_size(s, x);
        if (!l || bytes + l > room)
            break;
        mem[k++] = x;
        bytes += l;
    }
    if (k < 2)
        return UB_PACK_NONE; /* alone: no container */
    if (e->pool.avail <= UB_SES_POOL_RESERVE)
        return UB_PACK_STOP;
    if (ub__pds_outstanding(e->pds, &w->dst, w->mode) >= UB_SES_PKT_BUDGET) {
        s->st.tx_busy++;
        return UB_PACK_BUSY;
    }
    struct ub__pack *g = malloc(sizeof(*g) + k * sizeof(g->member[0]));
    struct ub__pkt *p = g ? ub__pkt_alloc(&e->pool) : NULL;
    if (!p) {
        free(g);
        return UB_PACK_STOP;
    }
    uint32_t lens[UB_SES_PACK_RECS];
    uint8_t *ch = ub__pkt_put(p, UB_SES_STD_SIZE); /* the container, encoded once sized */
    int rc = ch ? 0 : UB_ENOBUFS;
    for (uint32_t i = 0; i < k && !rc; i++)
        rc = put_rec(s, mem[i], p, &lens[i]);
    uint32_t id = 0;
    if (!rc) {
        struct ub__ses h;
        memset(&h, 0, sizeof(h));
        h.kind = UB_PDS_NH_REQ_STD;
        h.u.std.opcode = UB_SES_OP_NO_OP;
        h.u.std.flags = UB_SES_F_SOM | UB_SES_F_EOM;
        h.u.std.job_id = e->cfg.job_id;
        h.u.std.msg_id = (uint16_t)w->seq;
        h.u.std.initiator = w->jfs->id;
        h.u.std.request_length = p->len - UB_SES_STD_SIZE;
        struct ub__wcur wc;
        ub__wcur_init(&wc, ch, UB_SES_STD_SIZE);
        rc = ub__ses_encode(&h, &wc);
    }
    if (!rc) {
        id = pack_alloc_id(s);
        rc = ub__hmap_put(&s->packs, id, g);
    }
    if (rc) { /* nothing sent: every member goes alone (and meets the error there) */
        ub__pkt_free(p);
        free(g);
        return UB_PACK_NONE;
    }
    g->n = k;
    for (uint32_t i = 0; i < k; i++)
        g->member[i] = ub__ses_wr_cookie(mem[i]);
    struct ub__pds_tx tx = {
        .dst = &w->dst,
        .mode = w->mode,
        .ses_kind = UB_PDS_NH_REQ_STD,
        .ack_req = true,
        .cookie = UB_SES_PACK_COOKIE | id,
    };
    /* The container's extension: w's stream and order_seq (informative), no order class;
     * the P bit says what the payload is. */
    struct ub__ses_tail t = {0, 0, 0, UB_SES_TAIL_P << 24};
    rc = ub__ses_send_v1(s, &tx, w->os->id, w->seq, &t, p, now);
    if (rc) {
        ub__hmap_del(&s->packs, id);
        free(g);
        if (rc == UB_EFULL)
            return UB_PACK_BUSY;
        if (rc == UB_ENOBUFS)
            return UB_PACK_STOP;
        return UB_PACK_NONE; /* w alone meets the error and fails */
    }
    s->st.tx_req_pkts++;
    s->st.pack_pkts++;
    s->st.pack_reqs += k;
    for (uint32_t i = 0; i < k; i++) {
        struct ub__wr *x = mem[i];
        ub__ses_wr_sent(s, x, lens[i], now);
        if (x->on_txq)
            ub__ses_txq_del(s, x);
    }
    return UB_PACK_SENT;
}

void ub__ses_pack_acked(struct ub__tl *s, uint64_t cookie, uint64_t now)
{
    struct ub__pack *g = ub__hmap_del(&s->packs, (uint32_t)cookie);
    if (!g)
        return;
    ub_jfs *jfs = ub__ses_jfs_of_cookie(s, g->member[0]); /* one JFS for all members */
    for (uint32_t i = 0; i < g->n; i++)                   /* members over already name nothing */
        ub__ses_wr_acked(s, ub__ses_wr_in_jfs(jfs, g->member[i]), now);
    free(g);
}

void ub__ses_pack_failed(struct ub__tl *s, uint64_t cookie, int err, uint64_t now)
{
    struct ub__pack *g = ub__hmap_del(&s->packs, (uint32_t)cookie);
    if (!g)
        return;
    /* Each member fails as if its own packet had (a peer failure fails them all at once;
     * the later members then name nothing any more). */
    for (uint32_t i = 0; i < g->n; i++)
        ub__ses_on_failed(s, g->member[i], err, now);
    free(g);
}

void ub__ses_pack_fini(struct ub__tl *s)
{
    uint64_t k;
    void *v;
    while (s->packs.slots && ub__hmap_next(&s->packs, 0, &k, &v)) {
        ub__hmap_del(&s->packs, k);
        free(v);
    }
}

/* ---- packed responses (docs/wire-format.md section 6.2) ---------------------------------- */

#define PRSP_MIN (UB_EXT_SIZE + UB_SES_RSP_DATA_SIZE)

int ub__ses_prsp_rec(const uint8_t *p, size_t n, struct ub__ses_prec *rec)
{
    if (n < UB_SES_PACK_LEN)
        return UB_ETRUNC;
    size_t len = ((size_t)p[0] << 8) | p[1];
    if (len > n - UB_SES_PACK_LEN)
        return UB_ETRUNC;
    if (len < PRSP_MIN)
        return UB_EBADMSG;
    /* A record is a response as it goes alone: a version-0 extension (16 bytes, nothing
     * appended, so never packed or rendezvous data) naming a response with data. What
     * ub__ext_decode accepts of that form, read in place. */
    const uint8_t *e = p + UB_SES_PACK_LEN;
    if (e[0] != UB_PDS_NH_RSP_DATA || e[1] != UB_EXT_SIZE / UB_EXT_HLEN_UNIT ||
        ext_in_place(e, 0, UB_PDS_NH_RSP_DATA, &rec->ext))
        return UB_EBADMSG;
    struct ub__rcur r;
    ub__rcur_init(&r, e + UB_EXT_SIZE, len - UB_EXT_SIZE);
    rec->ses.kind = UB_PDS_NH_RSP_DATA;
    rec->ses.ext = UB_SES_EXT_NONE;
    if (ub__ses_rsp_data_decode(&rec->ses.u.rsp_data, &r))
        return UB_EBADMSG;
    size_t pl = ub__rcur_remaining(&r);
    if (pl != rec->ses.u.rsp_data.payload_len)
        return UB_EBADMSG; /* as for a packet alone: exactly payload_len bytes follow */
    rec->payload = e + UB_EXT_SIZE + ub__rcur_offset(&r);
    rec->payload_len = (uint32_t)pl;
    return (int)(UB_SES_PACK_LEN + len);
}

int ub__ses_prsp_check(const uint8_t *p, size_t n)
{
    return parse_all(ub__ses_prsp_rec, p, n, NULL);
}

void ub__ses_prsp_put(uint8_t *x0, const struct ub__prsp *x, uint32_t job_id, uint32_t inc)
{
    ub__ses_rsp_put(x0, x, x->data, x->n, job_id, inc);
}

void ub__ses_rsp_put(uint8_t *x0, const struct ub__prsp *x, const uint8_t *data, uint32_t n,
                     uint32_t job_id, uint32_t inc)
{
    x0[0] = UB_PDS_NH_RSP_DATA; /* version 0 */
    x0[1] = UB_EXT_SIZE / UB_EXT_HLEN_UNIT;
    x0[2] = 0;
    x0[3] = 0;
    ub__st16(x0 + 4, 0); /* aqm_hint */
    ub__st16(x0 + 6, x->stream);
    ub__st32(x0 + 8, x->seq);
    ub__st32(x0 + 12, inc);
    uint8_t *h0 = x0 + UB_EXT_SIZE;
    h0[0] = (uint8_t)((UB_SES_LIST_EXPECTED << 6) | UB_SES_RSP_WITH_DATA);
    h0[1] = x->rc;
    ub__st16(h0 + 2, (uint16_t)x->seq); /* msg_id */
    h0[4] = 0;
    ub__st24(h0 + 5, job_id);
    ub__st16(h0 + 8, (uint16_t)x->seq); /* read_req_msg_id */
    ub__st16(h0 + 10, (uint16_t)n);     /* payload_len */
    ub__st32(h0 + 12, x->mod_len);
    ub__st32(h0 + 16, x->off);
    if (n)
        memcpy(h0 + UB_SES_RSP_DATA_SIZE, data, n);
}

int ub__ses_prsp_send(struct ub__tl *s, const struct ub__addr *dst, const struct ub__prsp *r,
                      uint32_t n, uint64_t now)
{
    struct ub__engine *e = s->eng;
    struct ub__pkt *p = ub__pkt_alloc(&e->pool);
    if (!p)
        return UB_ENOBUFS;
    uint8_t *ch = ub__pkt_put(p, UB_SES_RSP_DATA_SIZE); /* the container, encoded once sized */
    int rc = ch ? 0 : UB_ENOBUFS;
    struct ub__ses_rsp_data h;
    memset(&h, 0, sizeof(h));
    h.list = UB_SES_LIST_EXPECTED;
    h.job_id = e->cfg.job_id;
    if (h.job_id > UB_SES_JOB_ID_MAX)
        rc = UB_EOVERFLOW;
    /* Each record as ub__ext_encode and ub__ses_rsp_data_encode write it (a version-0
     * extension, a response with data), in place: the values are checked here once. */
    bool bare = true; /* no record carries data: none answers a READ or an atomic */
    for (uint32_t i = 0; i < n && !rc; i++) {
        const struct ub__prsp *x = &r[i];
        bare = bare && !x->n;
        uint32_t size = UB_SES_PRSP_REC(x->n);
        uint8_t *b = ub__pkt_put(p, size);
        if (!b) {
            rc = UB_ENOBUFS;
            break;
        }
        if (!ub__ses_rc_valid(x->rc) || x->n > UB_SES_PRSP_DATA) {
            rc = UB_EINVAL;
            break;
        }
        ub__st16(b, (uint16_t)(size - UB_SES_PACK_LEN));
        ub__ses_prsp_put(b + UB_SES_PACK_LEN, x, h.job_id, 0); /* the packet's incarnation */
    }
    if (!rc) {
        uint32_t bytes = p->len - UB_SES_RSP_DATA_SIZE;
        h.rc = UB_SES_RC_OK;
        h.msg_id = (uint16_t)r[0].seq;
        h.read_req_msg_id = (uint16_t)r[0].seq;
        h.payload_len = (uint16_t)bytes;
        h.modified_length = bytes;
        h.message_offset = 0;
        struct ub__wcur wc;
        ub__wcur_init(&wc, ch, UB_SES_RSP_DATA_SIZE);
        rc = ub__ses_rsp_data_encode(&h, &wc);
    }
    if (rc) {
        ub__pkt_free(p);
        return rc;
    }
    struct ub__ses_tail t = {0, 0, 0, UB_SES_TAIL_P << 24};
    struct ub__pds_tx tx = {.dst = dst,
                            .mode = UB_PDS_RUD,
                            .ses_kind = UB_PDS_NH_RSP_DATA,
                            .ack_req = true,
                            .after_ack = bare};
    if ((rc = ub__ses_send_v1(s, &tx, r[0].stream, r[0].seq, &t, p, now)) != 0)
        return rc;
    s->st.tx_rsp_pkts++;
    s->st.tx_prsp_pkts++;
    s->st.tx_prsp_recs += n;
    return 0;
}

void ub__ses_pack_on_rsp(struct ub__tl *s, const struct ub__pds_rx *rx, uint64_t now)
{
    const struct ub__wire_dgram *d = rx->hdr;
    const struct ub__ses_rsp_data *c = &d->ses.u.rsp_data;
    s->st.rx_prsp_pkts++;
    struct ub__ses_prec recs[UB_SES_PACK_RECS];
    int count = UB_EBADMSG;
    if (c->rc == UB_SES_RC_OK && !c->message_offset && c->modified_length == rx->payload_len &&
        !(d->ext.tail[8] & (UB_SES_TAIL_R | UB_SES_TAIL_C)))
        count = parse_all(ub__ses_prsp_rec, rx->payload, rx->payload_len, recs);
    if (count < 0) {
        s->st.rx_prsp_bad++; /* refused whole: the requests end by their response bound */
        s->st.rx_bad_pkts++;
        return;
    }
    /* Each record as a packet alone, from the packet's (PDS-verified) source. */
    for (int i = 0; i < count; i++) {
        const struct ub__ses_prec *rec = &recs[i];
        struct ub__ses_rsp_in one = {rec->ext.stream, rec->ext.order_seq, &rec->ses.u.rsp_data,
                                     rx->src,         rec->payload,       rec->payload_len};
        s->st.rx_prsp_recs++;
        ub__ses_rsp_in(s, &one, now);
    }
}
