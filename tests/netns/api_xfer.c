/*
 * api_xfer: a transfer through the public API (ub_context_open("udp://...")) between two
 * network namespaces of the test bed (docs/testbed.md). Contexts are opened in threads that
 * entered the namespaces (their sockets live there); the target uses automatic progress
 * and never calls the API again, the initiator drives by hand from the main thread.
 *
 * It WRITEs `--mb` MiB in 64 KiB requests (16 in flight) to distinct offsets, can run a
 * command (a path failure) once `--fail-at` percent are done, READs everything back and
 * compares; every request must succeed, and all 8 entropy values must carry traffic.
 * `--opts K=V&..` adds udp device keys on both sides (`ring=1`: the packet ring).
 * Exit 0 pass, 1 fail, 2 usage, 77 skip (cannot enter the namespaces).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <softub/softub.h>

#define CHUNK  (64u << 10)
#define WINDOW 16u

struct side {
    const char *ns, *uri;
    enum ub_progress_mode mode;
    ub_context *ctx;
    int rc; /* 0 ok, 77 setns refused, else failure */
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *open_in_ns(void *arg)
{
    struct side *s = arg;
    char path[256];
    snprintf(path, sizeof(path), "/run/netns/%s", s->ns);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
        s->rc = 77;
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    close(fd);
    struct ub_context_attr ca = {.progress = s->mode, .timeout_ms = 5000};
    int rc = ub_context_open(s->uri, &ca, &s->ctx);
    if (rc)
        fprintf(stderr, "api_xfer: open %s in %s: %s\n", s->uri, s->ns, ub_strerror(rc));
    s->rc = rc ? 1 : 0;
    return NULL;
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (uint8_t)(x >> 16);
    }
}

static int wait1(ub_jfc *jfc, uint64_t deadline, struct ub_cr *cr)
{
    while (now_ns() < deadline) {
        int k = ub_poll_jfc(jfc, 1, cr);
        if (k)
            return k;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *ns_a = NULL, *ns_b = NULL, *a = NULL, *b = NULL, *fail_cmd = NULL, *opts = "";
    uint32_t mb = 32, fail_at = 0, timeout_s = 30;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--ns-a"))
            ns_a = argv[i + 1];
        else if (!strcmp(argv[i], "--ns-b"))
            ns_b = argv[i + 1];
        else if (!strcmp(argv[i], "--a"))
            a = argv[i + 1];
        else if (!strcmp(argv[i], "--b"))
            b = argv[i + 1];
        else if (!strcmp(argv[i], "--mb"))
            mb = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--fail-at"))
            fail_at = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--fail-cmd"))
            fail_cmd = argv[i + 1];
        else if (!strcmp(argv[i], "--opts"))
            opts = argv[i + 1];
        else if (!strcmp(argv[i], "--timeout"))
            timeout_s = (uint32_t)atoi(argv[i + 1]);
        else
            return 2;
    }
    if (!ns_a || !ns_b || !a || !b || !mb || mb > 256)
        return 2;
    char ua[192], ubr[192];
    snprintf(ua, sizeof(ua), "udp://%s?paths=8%s%s", a, *opts ? "&" : "", opts);
    snprintf(ubr, sizeof(ubr), "udp://%s?paths=8%s%s", b, *opts ? "&" : "", opts);
    struct side sa = {ns_a, ua, UB_PROGRESS_MANUAL, NULL, 1},
                sb = {ns_b, ubr, UB_PROGRESS_AUTO, NULL, 1};
    pthread_t ta, tb;
    pthread_create(&tb, NULL, open_in_ns, &sb);
    pthread_join(tb, NULL);
    pthread_create(&ta, NULL, open_in_ns, &sa);
    pthread_join(ta, NULL);
    if (sa.rc == 77 || sb.rc == 77) {
        printf("SKIP: cannot enter the namespaces\n");
        return 77;
    }
    if (sa.rc || sb.rc)
        return 1;
    size_t total = (size_t)mb << 20;
    uint8_t *src = aligned_alloc(4096, total), *back = aligned_alloc(4096, total);
    uint8_t *dst = aligned_alloc(4096, total);
    if (!src || !back || !dst)
        return 1;
    memset(dst, 0, total);
    memset(back, 0, total);
    uint32_t n = (uint32_t)(total / CHUNK);
    for (uint32_t i = 0; i < n; i++)
        fill(src + (size_t)i * CHUNK, CHUNK, i + 1);
    ub_seg *ssrc, *sback, *sdst;
    uint32_t all = UB_ACCESS_LOCAL_WRITE | UB_ACCESS_READ | UB_ACCESS_WRITE;
    ub_jfc *jfc;
    ub_jetty *jt;
    struct ub_jfc_attr fa = {.depth = 256};
    struct ub_jetty_attr ja;
    memset(&ja, 0, sizeof(ja));
    ja.jfs.depth = 64;
    ja.jfs.jfc = NULL;
    ja.jfr.depth = 8;
    if (ub_jfc_create(sa.ctx, &fa, &jfc))
        return 1;
    ja.jfs.jfc = jfc;
    ja.jfr.jfc = jfc;
    if (ub_jetty_create(sa.ctx, &ja, &jt) || ub_seg_register(sa.ctx, src, total, all, 0, &ssrc) ||
        ub_seg_register(sa.ctx, back, total, all, 0, &sback) ||
        ub_seg_register(sb.ctx, dst, total, all, 77, &sdst))
        return 1;
    uint8_t d[UB_SEG_DESC_SIZE];
    ub_tseg *ts;
    if (ub_seg_export(sdst, d, sizeof(d)) < 0 || ub_seg_import(sa.ctx, d, sizeof(d), 77, &ts))
        return 1;
    uint64_t base = ub_tseg_base(ts);
    uint64_t t0 = now_ns(), deadline = t0 + (uint64_t)timeout_s * 1000000000ull;
    uint32_t posted = 0, done = 0, failed = 0;
    bool fired = !fail_cmd || !fail_at;
    uint64_t fail_done_ns = 0;
    int rc = 1;
    while (done < n) {
        while (posted < n && posted - done < WINDOW) {
            struct ub_sge sg = {src + (size_t)posted * CHUNK, CHUNK, ssrc};
            struct ub_wr wr;
            memset(&wr, 0, sizeof(wr));
            wr.opcode = UB_OP_WRITE;
            wr.flags = UB_WR_COMPLETE;
            wr.user_ctx = posted;
            wr.sge = &sg;
            wr.num_sge = 1;
            wr.u.rma.tseg = ts;
            wr.u.rma.addr = base + (uint64_t)posted * CHUNK;
            if (ub_post_jetty_send(jt, &wr, NULL))
                goto out;
            posted++;
        }
        struct ub_cr cr;
        if (!wait1(jfc, deadline, &cr)) {
            fprintf(stderr, "api_xfer: timed out with %u of %u done\n", done, n);
            goto out;
        }
        if (cr.status != UB_CR_SUCCESS) {
            fprintf(stderr, "api_xfer: write %" PRIu64 ": %s\n", cr.user_ctx,
                    ub_cr_status_str(cr.status));
            failed++;
        }
        done++;
        if (!fired && done * 100 >= n * fail_at) {
            fired = true;
            int r = system(fail_cmd);
            fail_done_ns = now_ns();
            printf("failure command at %u%% (exit %d)\n", fail_at, r);
        }
    }
    uint64_t t1 = now_ns();
    /* Read it all back in 1 MiB requests and compare with the source and the target. */
    for (uint32_t i = 0; i < (uint32_t)(total >> 20); i++) {
        struct ub_sge sg = {back + ((size_t)i << 20), 1u << 20, sback};
        struct ub_wr wr;
        memset(&wr, 0, sizeof(wr));
        wr.opcode = UB_OP_READ;
        wr.flags = UB_WR_COMPLETE;
        wr.sge = &sg;
        wr.num_sge = 1;
        wr.u.rma.tseg = ts;
        wr.u.rma.addr = base + ((uint64_t)i << 20);
        struct ub_cr cr;
        if (ub_post_jetty_send(jt, &wr, NULL) || !wait1(jfc, deadline, &cr) ||
            cr.status != UB_CR_SUCCESS) {
            fprintf(stderr, "api_xfer: read-back %u failed\n", i);
            goto out;
        }
    }
    bool same = !memcmp(back, src, total) && !memcmp(dst, src, total);
    struct ub_context_stats st;
    ub_context_stats(sa.ctx, &st);
    uint32_t used = 0;
    printf("wrote %u MiB in %.1f ms (%.0f MB/s), %u failed, data %s\n", mb, (double)(t1 - t0) / 1e6,
           (double)total / ((double)(t1 - t0) / 1e9) / 1e6, failed, same ? "identical" : "CORRUPT");
    printf("initiator: %" PRIu64 " packets, %" PRIu64 " retransmitted; per EV:", st.tx_pkts,
           st.retransmits);
    for (uint32_t i = 0; i < st.num_paths; i++) {
        printf(" %" PRIu64, st.path_tx_pkts[i]);
        used += st.path_tx_pkts[i] > 0;
    }
    printf("\n");
    /* With the packet ring the initiator's ACKs and READ responses come through it. */
    bool ring_ok = !strstr(opts, "ring=1") || st.rx_udp_ring > 0;
    if (*opts)
        printf("initiator: %" PRIu64 " datagrams from the packet ring\n", st.rx_udp_ring);
    if (fail_done_ns)
        printf("finished %.1f ms after the failure command\n", (double)(t1 - fail_done_ns) / 1e6);
    rc = (same && !failed && used == st.num_paths && ring_ok) ? 0 : 1;
out:
    ub_context_close(sa.ctx);
    ub_context_close(sb.ctx);
    free(src);
    free(back);
    free(dst);
    return rc;
}
