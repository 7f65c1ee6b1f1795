/*
 * hello_urma: two endpoints in one process on an in-process fabric. The target
 * registers memory and a jetty and hands out descriptors (plain bytes; a real program
 * ships them over any channel). The initiator imports them, WRITEs into the target's
 * memory, adds to a counter atomically, and SENDs a message with immediate data.
 *
 *   cc hello_urma.c $(pkg-config --cflags --libs softub) -o hello_urma
 */
#include <stdio.h>
#include <string.h>

#include <softub/softub.h>

#define CHECK(x)                                               \
    do {                                                       \
        int rc_ = (x);                                         \
        if (rc_ < 0) {                                         \
            fprintf(stderr, "%s: %s\n", #x, ub_strerror(rc_)); \
            return 1;                                          \
        }                                                      \
    } while (0)

/* Manual progress: whoever waits drives both endpoints (they share this thread). */
static int wait_one(ub_context *other, ub_jfc *jfc, struct ub_cr *cr)
{
    for (;;) {
        int n = ub_poll_jfc(jfc, 1, cr); /* progresses jfc's context */
        if (n)
            return n;
        ub_progress(other);
    }
}

int main(void)
{
    ub_loopnet *net;
    CHECK(ub_loopnet_create(NULL, &net));

    /* Two contexts = two endpoints, each with a JFC and a jetty (a JFS + JFR pair). */
    ub_context *ctx[2];
    ub_jfc *jfc[2];
    ub_jetty *jetty[2];
    for (int i = 0; i < 2; i++) {
        struct ub_context_attr ca = {.loopnet = net};
        CHECK(ub_context_open(i == 0 ? "loop:0" : "loop:1", &ca, &ctx[i]));
        CHECK(ub_jfc_create(ctx[i], NULL, &jfc[i]));
        struct ub_jetty_attr ja = {.jfs = {.jfc = jfc[i]}, .jfr = {.jfc = jfc[i]}};
        CHECK(ub_jetty_create(ctx[i], &ja, &jetty[i]));
    }

    /* Target: memory peers may read, write and apply atomics to, protected by a token. */
    static char target_mem[4096];
    static uint64_t counter;
    ub_seg *tseg, *cseg;
    uint32_t acc = UB_ACCESS_LOCAL_WRITE | UB_ACCESS_READ | UB_ACCESS_WRITE | UB_ACCESS_ATOMIC;
    CHECK(ub_seg_register(ctx[1], target_mem, sizeof(target_mem), acc, 0xc0ffee, &tseg));
    CHECK(ub_seg_register(ctx[1], &counter, sizeof(counter), acc, 0xc0ffee, &cseg));
    uint8_t seg_desc[UB_SEG_DESC_SIZE], cnt_desc[UB_SEG_DESC_SIZE], jetty_desc[UB_JETTY_DESC_SIZE];
    CHECK(ub_seg_export(tseg, seg_desc, sizeof(seg_desc)));
    CHECK(ub_seg_export(cseg, cnt_desc, sizeof(cnt_desc)));
    CHECK(ub_jetty_export(jetty[1], jetty_desc, sizeof(jetty_desc)));
    /* A receive buffer for the message. */
    static char inbox[256];
    ub_seg *iseg;
    CHECK(ub_seg_register(ctx[1], inbox, sizeof(inbox), UB_ACCESS_LOCAL_WRITE, 0, &iseg));
    struct ub_sge rsge = {inbox, sizeof(inbox), iseg};
    struct ub_rwr rwr = {.user_ctx = 1, .sge = &rsge, .num_sge = 1};
    CHECK(ub_post_jetty_recv(jetty[1], &rwr, NULL));

    /* Initiator: import with the token (no connection is made), then post three requests. */
    ub_tseg *remote, *rcounter;
    ub_tjetty *peer;
    CHECK(ub_seg_import(ctx[0], seg_desc, sizeof(seg_desc), 0xc0ffee, &remote));
    CHECK(ub_seg_import(ctx[0], cnt_desc, sizeof(cnt_desc), 0xc0ffee, &rcounter));
    CHECK(ub_jetty_import(ctx[0], jetty_desc, sizeof(jetty_desc), &peer));

    const char hello[] = "hello, unified bus";
    struct ub_sge wsge = {(void *)hello, sizeof(hello), NULL};
    uint64_t old = 0;
    struct ub_wr send = {.opcode = UB_OP_SEND_IMM,
                         .flags = UB_WR_COMPLETE | UB_WR_INLINE,
                         .user_ctx = 3,
                         .sge = &wsge,
                         .num_sge = 1,
                         .imm_data = 42,
                         .tjetty = peer};
    /* SO: the message is executed only after the WRITE and the atomic before it. */
    send.flags |= UB_WR_ORDER_SO;
    struct ub_wr fadd = {.opcode = UB_OP_ATOMIC_FADD,
                         .flags = UB_WR_COMPLETE | UB_WR_ORDER_RO,
                         .user_ctx = 2,
                         .next = &send};
    fadd.u.atomic.tseg = rcounter;
    fadd.u.atomic.addr = ub_tseg_base(rcounter);
    fadd.u.atomic.operand = 5;
    fadd.u.atomic.result = &old;
    struct ub_wr write = {.opcode = UB_OP_WRITE,
                          .flags = UB_WR_COMPLETE | UB_WR_INLINE | UB_WR_ORDER_RO,
                          .user_ctx = 1,
                          .sge = &wsge,
                          .num_sge = 1,
                          .next = &fadd};
    write.u.rma.tseg = remote;
    write.u.rma.addr = ub_tseg_base(remote) + 100;
    CHECK(ub_post_jetty_send(jetty[0], &write, NULL)); /* one doorbell for the chain */

    for (int i = 0; i < 3; i++) {
        struct ub_cr cr;
        wait_one(ctx[1], jfc[0], &cr);
        printf("initiator: request %llu: %s\n", (unsigned long long)cr.user_ctx,
               ub_cr_status_str(cr.status));
    }
    struct ub_cr cr;
    wait_one(ctx[0], jfc[1], &cr);
    printf("target: received %u bytes \"%s\", imm %llu; memory says \"%s\"; counter %llu "
           "(was %llu)\n",
           cr.length, inbox, (unsigned long long)cr.imm_data, target_mem + 100,
           (unsigned long long)counter, (unsigned long long)old);

    for (int i = 0; i < 2; i++)
        CHECK(ub_context_close(ctx[i])); /* destroys everything created from it */
    CHECK(ub_loopnet_destroy(net));
    return 0;
}
