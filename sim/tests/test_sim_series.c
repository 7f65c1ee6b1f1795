/*
 * Time series: sampling never changes a run (same FCTs with and without it), two runs write
 * byte-identical CSV, and with a 1 us interval each row's tx_mbps is exactly 8 x the bytes sent
 * in it, so the rows add up to every port's tx_bytes.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/reftp.h"
#include "sim/series.h"
#include "sim/sim.h"
#include "sim/topo.h"
#include "sim/workload.h"

struct out {
    uint64_t end[16];
    char *csv;
    size_t len;
    uint64_t tx[64]; /* per sampled port: tx_bytes at the end */
    uint64_t maxq[64];
    uint32_t nports;
    uint64_t samples;
};

/* A 2 MB permutation on a k=4 fat tree, 4 paths; sampled every 1 us on `spec` ports if given. */
static void run(const char *spec, struct out *o)
{
    struct ub_sim sim;
    assert_int_equal(ub_sim_init(&sim, 11), 0);
    struct ub_sim_topo_cfg t = {.kind = UB_SIM_TOPO_FATTREE, .k = 4};
    struct ub_sim_qcfg q = {
        .limit = 100000, .kmin = 20000, .kmax = 80000, .trim = true, .prio_ctrl = true};
    assert_int_equal(ub_sim_topo_build(&sim, &t, &q), 0);
    struct ub_sim_reftp_cfg c = {
        .mtu = 4096, .window = 150000, .base_rtt = 10000000, .paths = 4, .cc = true};
    assert_int_equal(ub_sim_reftp_create(&sim, &c, NULL), 0);
    assert_int_equal(ub_sim_wl_permutation(&sim, 2000000, 0), 0);
    sim.stop_when_done = true;
    assert_int_equal(ub_sim_start(&sim), 0);
    struct ub_sim_series *s = NULL;
    FILE *f = NULL;
    o->csv = NULL;
    if (spec) {
        uint32_t *ports;
        uint32_t n = ub_sim_select_ports(&sim, spec, &ports);
        assert_true(n > 0 && n <= 64);
        f = open_memstream(&o->csv, &o->len);
        assert_non_null(f);
        assert_int_equal(ub_sim_series_start(&sim, f, UB_SIM_PS_PER_US, ports, n, &s), 0);
        o->nports = n;
        free(ports);
    }
    ub_sim_run(&sim, UB_SIM_NEVER);
    assert_int_equal(sim.flows_done, 16);
    for (uint32_t i = 0; i < 16; i++)
        o->end[i] = sim.flows[i].end;
    if (s) {
        uint32_t n;
        const uint32_t *ports = ub_sim_series_ports(s, &n);
        for (uint32_t i = 0; i < n; i++) {
            o->tx[i] = sim.ports[ports[i]].st.tx_bytes;
            o->maxq[i] = ub_sim_series_maxq(s, i);
        }
        o->samples = ub_sim_series_samples(s);
        fclose(f);
        ub_sim_series_free(s);
    }
    ub_sim_fini(&sim);
}

static void test_series(void **state)
{
    (void)state;
    struct out a, b, plain;
    run("hosts", &a);
    run("hosts", &b);
    run(NULL, &plain);
    for (uint32_t i = 0; i < 16; i++) {
        assert_int_equal(a.end[i], plain.end[i]); /* sampling changes nothing */
        assert_int_equal(a.end[i], b.end[i]);
    }
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.csv, b.csv, a.len);
    assert_int_equal(a.nports, 16); /* k=4: one port per host */
    /* Parse the rows back: per port, the tx adds up and the queue maximum matches. */
    uint64_t tx[64] = {0}, maxq[64] = {0}, rows = 0;
    char *save, *line = strtok_r(a.csv, "\n", &save);
    assert_string_equal(line, "time_us,port,node,peer,qbytes,hbytes,tx_mbps");
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
        unsigned port, node, peer;
        unsigned long long qb, hb, mbps;
        char t[32];
        assert_int_equal(sscanf(line, "%31[^,],%u,%u,%u,%llu,%llu,%llu", t, &port, &node, &peer,
                                &qb, &hb, &mbps),
                         7);
        uint32_t k = (uint32_t)(rows % a.nports); /* each sample lists the ports in order */
        assert_true(mbps % 8 == 0);               /* 1 us: 8 Mbit/s per byte */
        tx[k] += mbps / 8;
        if (qb > maxq[k])
            maxq[k] = qb;
        rows++;
    }
    assert_int_equal(rows, a.samples * a.nports);
    for (uint32_t k = 0; k < a.nports; k++) {
        assert_int_equal(tx[k], a.tx[k]);
        assert_int_equal(maxq[k], a.maxq[k]);
    }
    free(a.csv);
    free(b.csv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_series),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
