/*
 * Fuzz target: the simulator's two text formats, picked by the first byte: even, a topology
 * file (ub_sim_topo_load); odd, htsim's connection matrix (ub_sim_wl_load_cm) over a fat tree
 * of 16 hosts. Invariants: one of the documented results, naming a line of the input; a graph
 * that loads is written out (ub_sim_topo_write), reads back as the same fabric port for port
 * and is written again byte for byte; a built-in shape is only read (building is
 * ub_sim_topo_build's, tested by size); every flow a matrix adds, whole or cut short by an
 * error, joins two distinct hosts of the fabric.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "fuzz.h"
#include "sim/sim.h"
#include "sim/topo.h"
#include "sim/topofile.h"
#include "sim/workload.h"

static const struct ub_sim_qcfg Q = {.limit = 200000, .kmin = 35000, .kmax = 140000};

static uint32_t lines_of(const uint8_t *data, size_t size)
{
    uint32_t n = 1;
    for (size_t i = 0; i < size; i++)
        n += data[i] == '\n';
    return n;
}

/* sim's fabric as a topology file, in a malloc'ed string (*len bytes). */
static char *written(const struct ub_sim *sim, size_t *len)
{
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    CHECK(f != NULL);
    CHECK(ub_sim_topo_write(sim, f) == 0);
    CHECK(fclose(f) == 0);
    return text;
}

static void same_fabric(const struct ub_sim *a, const struct ub_sim *b)
{
    CHECK(a->nhosts == b->nhosts && a->nswitches == b->nswitches && a->nports == b->nports);
    for (uint32_t i = 0; i < a->nports; i++) {
        const struct ub_sim_port *p = &a->ports[i], *q = &b->ports[i];
        CHECK(p->node == q->node && p->peer == q->peer && p->rev == q->rev);
        CHECK(p->rate == q->rate && p->delay == q->delay);
    }
}

static void topology(const uint8_t *data, size_t size)
{
    struct ub_sim a, b;
    CHECK(ub_sim_init(&a, 1) == 0);
    FILE *f = fmemopen((void *)(uintptr_t)data, size, "r");
    CHECK(f != NULL);
    uint32_t line = UINT32_MAX;
    bool builtin = true;
    struct ub_sim_topo_cfg cfg;
    int rc = ub_sim_topo_load(&a, f, &Q, &line, &builtin, &cfg);
    fclose(f);
    CHECK(rc == 0 || rc == UB_EINVAL || rc == UB_ERANGE || rc == UB_ENOMEM);
    CHECK(line <= lines_of(data, size));
    if (rc || builtin) {
        CHECK(rc || cfg.kind <= UB_SIM_TOPO_TORUS);
        CHECK(rc || a.nnodes == 0);
        ub_sim_fini(&a);
        return;
    }
    CHECK(line == 0 && a.nhosts > 0 && a.nnodes == a.nhosts + a.nswitches);
    size_t len1, len2;
    char *text1 = written(&a, &len1);
    CHECK(ub_sim_init(&b, 1) == 0);
    f = fmemopen(text1, len1, "r");
    CHECK(f != NULL);
    CHECK(ub_sim_topo_load(&b, f, &Q, &line, &builtin, &cfg) == 0 && !builtin);
    fclose(f);
    same_fabric(&a, &b);
    char *text2 = written(&b, &len2);
    CHECK(len1 == len2 && memcmp(text1, text2, len1) == 0);
    free(text1);
    free(text2);
    ub_sim_fini(&a);
    ub_sim_fini(&b);
}

static void matrix(const uint8_t *data, size_t size)
{
    struct ub_sim sim;
    CHECK(ub_sim_init(&sim, 1) == 0);
    struct ub_sim_topo_cfg t = {.kind = UB_SIM_TOPO_FATTREE, .k = 4};
    CHECK(ub_sim_topo_build(&sim, &t, &Q) == 0);
    FILE *f = fmemopen((void *)(uintptr_t)data, size, "r");
    CHECK(f != NULL);
    uint32_t line = UINT32_MAX;
    int rc = ub_sim_wl_load_cm(&sim, f, &line);
    fclose(f);
    CHECK(rc == 0 || rc == UB_EBADMSG || rc == UB_ENOTSUP || rc == UB_EINVAL || rc == UB_ENOMEM);
    CHECK(rc ? line >= 1 && line <= lines_of(data, size) : line == 0);
    for (uint32_t i = 0; i < sim.nflows; i++) {
        const struct ub_sim_flow *fl = &sim.flows[i];
        CHECK(fl->src < sim.nhosts && fl->dst < sim.nhosts && fl->src != fl->dst);
        CHECK(fl->id != 0);
    }
    ub_sim_fini(&sim);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] % 2 == 0)
        topology(data + 1, size - 1);
    else
        matrix(data + 1, size - 1);
    return 0;
}
