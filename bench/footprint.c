/*
 * What the answer's path touches: reads a `valgrind --tool=lackey --trace-mem=yes` trace
 * of bench/lat_count built with -DSOFTUB_CRITPATH=ON, in which the devices' marks store to
 * ub__critpath_mark[0] when a receive found the peer's message and to [1] just before the
 * answer leaves (src/dev/critpath.h), and counts per such turn the distinct 64-byte lines
 * and 4 KiB pages of code and of data touched in between. On a host whose system calls
 * empty the TLB (page-table isolation without PCIDs), that footprint is what a turn costs
 * in user space and, by what it evicts, in the next system call (docs/perf-journal.md,
 * "Pages, polls and the repost" and "Whose pages"). Prints the medians per turn, then the
 * code lines by function and the data lines and pages by owner (the allocation holding
 * them, by the function that made it and its size, or the mapping), averaged over turns.
 *
 *   footprint BINARY TRACE ALLOCLOG [TOP [HOTLIST]]
 *
 * ALLOCLOG comes from bench/footprint_alloc.c preloaded into the traced run. With HOTLIST
 * (cmake/hotpath.txt: the functions the build links together), it also names the functions
 * the turn runs that the list lacks. Run by bench/footprint.sh.
 */
#define _POSIX_C_SOURCE 200809L /* popen, strdup */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE_SHIFT 6
#define PAGE_SHIFT 12
#define MAX_TURNS  100000u

static void die(const char *what)
{
    fprintf(stderr, "footprint: %s\n", what);
    exit(1);
}

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p)
        die("out of memory");
    return p;
}

/* ---- owners: interned names, with per-turn tallies ---- */

struct owner {
    char *name;
    uint64_t lines[2], pages[2]; /* code [0], data [1]: summed over turns */
};
static struct owner *owners;
static uint32_t n_owners;

static uint32_t owner_id(const char *name)
{
    for (uint32_t i = 0; i < n_owners; i++)
        if (strcmp(owners[i].name, name) == 0)
            return i;
    owners = xrealloc(owners, (n_owners + 1) * sizeof(*owners));
    owners[n_owners] = (struct owner){strdup(name), {0, 0}, {0, 0}};
    if (!owners[n_owners].name)
        die("out of memory");
    return n_owners++;
}

/* ---- address ranges with an owner, sorted for lookup ---- */

struct range {
    uint64_t lo, hi; /* [lo, hi) */
    uint32_t owner;
};

struct ranges {
    struct range *v;
    size_t n;
};

static void range_add(struct ranges *r, uint64_t lo, uint64_t hi, uint32_t owner)
{
    r->v = xrealloc(r->v, (r->n + 1) * sizeof(*r->v));
    r->v[r->n++] = (struct range){lo, hi, owner};
}

static int range_cmp(const void *a, const void *b)
{
    const struct range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The range holding a (ranges do not overlap). */
static const struct range *range_find(const struct ranges *r, uint64_t a)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->v[mid].lo <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo && a < r->v[lo - 1].hi ? &r->v[lo - 1] : NULL;
}

/* ---- an open-addressing set of addresses, each with an owner, cleared per turn ---- */

struct set {
    uint64_t *key; /* address + 1; 0: empty */
    uint32_t *val;
    size_t cap, n;
};

static bool set_put(struct set *s, uint64_t k, uint32_t v)
{
    if (2 * (s->n + 1) > s->cap) {
        struct set t = {calloc(s->cap ? 2 * s->cap : 1024, sizeof(uint64_t)),
                        calloc(s->cap ? 2 * s->cap : 1024, sizeof(uint32_t)),
                        s->cap ? 2 * s->cap : 1024, 0};
        if (!t.key || !t.val)
            die("out of memory");
        for (size_t i = 0; i < s->cap; i++)
            if (s->key[i])
                set_put(&t, s->key[i] - 1, s->val[i]);
        free(s->key);
        free(s->val);
        *s = t;
    }
    size_t i = (size_t)((k * 0x9e3779b97f4a7c15ull) >> 20) & (s->cap - 1);
    for (; s->key[i]; i = (i + 1) & (s->cap - 1))
        if (s->key[i] == k + 1)
            return false;
    s->key[i] = k + 1;
    s->val[i] = v;
    s->n++;
    return true;
}

static void set_clear(struct set *s)
{
    if (s->n)
        memset(s->key, 0, s->cap * sizeof(uint64_t));
    s->n = 0;
}

/* ---- symbols and allocations ---- */

static struct ranges code, data, maps;
static uint64_t mark_rx, mark_tx;

static void load_symbols(const char *binary, uint64_t base)
{
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "nm --defined-only --numeric-sort --print-size '%s'", binary);
    FILE *f = popen(cmd, "r");
    if (!f)
        die("cannot run nm");
    char line[1024], name[900];
    uint64_t prev = 0;
    uint32_t prev_owner = UINT32_MAX;
    bool first = true;
    while (fgets(line, sizeof(line), f)) {
        uint64_t a, size = 0;
        char t;
        if (sscanf(line, "%" SCNx64 " %" SCNx64 " %c %899s", &a, &size, &t, name) != 4 &&
            sscanf(line, "%" SCNx64 " %c %899s", &a, &t, name) != 3)
            continue;
        /* A position-dependent executable's symbols are absolute already (its lowest lies in
         * its lowest mapping; a position-independent one's are offsets from 0). */
        if (first && a >= base)
            base = 0;
        first = false;
        if (strcmp(name, "ub__critpath_mark") == 0)
            mark_rx = base + a, mark_tx = base + a + 1;
        if (size && strchr("dDbBrR", t)) { /* the executable's own data, by variable */
            char label[920];
            snprintf(label, sizeof(label), "%s (variable)", name);
            range_add(&data, base + a, base + a + size, owner_id(label));
        }
        if (t != 't' && t != 'T' && t != 'w' && t != 'W')
            continue;
        /* Each function runs to the next symbol. */
        if (prev_owner != UINT32_MAX && a > prev)
            range_add(&code, base + prev, base + a, prev_owner);
        prev = a;
        prev_owner = owner_id(name);
    }
    if (prev_owner != UINT32_MAX)
        range_add(&code, base + prev, base + prev + 4096, prev_owner);
    pclose(f);
    qsort(code.v, code.n, sizeof(*code.v), range_cmp);
}

/* A path's last component. */
static const char *base_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

struct allocation {
    uint64_t at, size, caller;
    bool replaced; /* a later allocation overlaps it */
};

static int alloc_at_cmp(const void *a, const void *b)
{
    const struct allocation *x = *(const struct allocation *const *)a;
    const struct allocation *y = *(const struct allocation *const *)b;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* The allocation log: the allocations (named by their caller's function and size), the
 * mappings and the stack; then the binary's symbols at its load base. */
static void load_allocs(const char *path, const char *binary)
{
    FILE *f = fopen(path, "r");
    if (!f)
        die("cannot read the allocation log");
    const char *base_name = base_of(binary);
    struct allocation *al = NULL;
    size_t n_al = 0;
    uint64_t stack = 0, base = UINT64_MAX;
    char line[600], name[500];
    while (fgets(line, sizeof(line), f)) {
        uint64_t a, b, c;
        if (line[0] == 'a' &&
            sscanf(line + 1, " %" SCNx64 " %" SCNu64 " %" SCNx64, &a, &b, &c) == 3) {
            al = xrealloc(al, (n_al + 1) * sizeof(*al));
            al[n_al++] = (struct allocation){a, b, c, false};
        } else if (line[0] == 's') {
            if (sscanf(line + 1, " %" SCNx64, &stack) != 1)
                stack = 0;
        } else if (line[0] == 'm' &&
                   sscanf(line + 1, " %" SCNx64 " %" SCNx64 " %499s", &a, &b, name) == 3) {
            const char *n = base_of(name);
            if (strcmp(n, base_name) == 0 && a < base)
                base = a;
            range_add(&maps, a, b, owner_id(strcmp(n, "-") == 0 ? "(anonymous mapping)" : n));
        }
    }
    fclose(f);
    if (base == UINT64_MAX)
        die("the binary is not among the logged mappings");
    qsort(maps.v, maps.n, sizeof(*maps.v), range_cmp);
    const struct range *st = stack ? range_find(&maps, stack) : NULL;
    if (st)
        maps.v[st - maps.v].owner = owner_id("(stack)");
    load_symbols(binary, base);
    /* An allocation that a later one overlaps was freed before it (the later one stands).
     * In address order each overlapping pair is met once, from its lower start: the earlier
     * of the two (by log order) is the one replaced. */
    struct allocation **by_at = xrealloc(NULL, n_al * sizeof(*by_at));
    for (size_t i = 0; i < n_al; i++)
        by_at[i] = &al[i];
    qsort(by_at, n_al, sizeof(*by_at), alloc_at_cmp);
    for (size_t i = 0; i < n_al; i++)
        for (size_t j = i + 1; j < n_al && by_at[j]->at < by_at[i]->at + by_at[i]->size; j++)
            if (by_at[j]->size || by_at[j]->at > by_at[i]->at) /* (an empty one is a point) */
                (by_at[i] < by_at[j] ? by_at[i] : by_at[j])->replaced = true;
    free(by_at);
    for (size_t i = 0; i < n_al; i++) {
        if (!al[i].size || al[i].replaced)
            continue;
        const struct range *fn = range_find(&code, al[i].caller);
        snprintf(name, sizeof(name), "%s [%" PRIu64 " B]", fn ? owners[fn->owner].name : "?",
                 al[i].size);
        range_add(&data, al[i].at, al[i].at + al[i].size, owner_id(name));
    }
    free(al);
    qsort(data.v, data.n, sizeof(*data.v), range_cmp);
}

/* ---- the trace ---- */

static uint32_t unmapped; /* the owner of what no range holds */

/* The range of `in` holding a, else its mapping. */
static uint32_t owner_of(const struct ranges *in, uint64_t a)
{
    const struct range *r = range_find(in, a);
    if (!r)
        r = range_find(&maps, a);
    return r ? r->owner : unmapped;
}

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static uint32_t median(uint32_t *v, uint32_t n)
{
    qsort(v, n, sizeof(*v), u32_cmp);
    return n ? v[n / 2] : 0;
}

struct tally {
    uint32_t owner;
    double lines, pages;
};

static int tally_cmp(const void *a, const void *b)
{
    const struct tally *x = a, *y = b;
    return x->lines > y->lines ? -1 : x->lines < y->lines;
}

/* The owners of code (k 0) or data (k 1) by lines per turn, the TOP largest. */
static void print_owners(int k, uint32_t turns, int top)
{
    struct tally *t = xrealloc(NULL, n_owners * sizeof(*t));
    uint32_t n = 0;
    for (uint32_t i = 0; i < n_owners; i++)
        if (owners[i].lines[k])
            t[n++] = (struct tally){i, (double)owners[i].lines[k] / turns,
                                    (double)owners[i].pages[k] / turns};
    qsort(t, n, sizeof(*t), tally_cmp);
    printf("%s, lines and pages per turn (a page counts for the owner that touched it first):\n",
           k ? "data by owner" : "code by function");
    for (uint32_t i = 0; i < n && (int)i < top; i++)
        printf("  %6.1f %5.1f  %s\n", t[i].lines, t[i].pages, owners[t[i].owner].name);
    free(t);
}

/* Whether name (a function, or a clone of one: "name.part.0") is a line of the list. */
static bool listed(const char *name, char **list, size_t n)
{
    size_t len = strcspn(name, ".");
    for (size_t i = 0; i < n; i++)
        if (strlen(list[i]) == len && strncmp(list[i], name, len) == 0)
            return true;
    return false;
}

/* The functions of the binary that run in most turns (half a line per turn or more) and
 * are not in the hot list at path (one name per line; '#' starts a comment line). */
static void print_unlisted(const char *path, uint32_t turns)
{
    FILE *f = fopen(path, "r");
    if (!f)
        die("cannot read the hot list");
    char **list = NULL, line[256];
    size_t n = 0;
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, " \t\r\n")] = 0;
        if (!line[0] || line[0] == '#')
            continue;
        list = xrealloc(list, (n + 1) * sizeof(*list));
        if (!(list[n++] = strdup(line)))
            die("out of memory");
    }
    fclose(f);
    printf("footprint: on the path but not in %s:", base_of(path));
    uint32_t missing = 0;
    for (uint32_t i = 0; i < n_owners; i++) {
        const char *name = owners[i].name;
        /* Mappings ("libc.so.6", "(stack)") and the PLT's "_init" are no functions of ours. */
        if ((double)owners[i].lines[0] / turns < 0.5 || name[0] == '(' || name[0] == '_' ||
            strstr(name, ".so") || listed(name, list, n))
            continue;
        printf(" %s", name);
        missing++;
    }
    printf("%s\n", missing ? "" : " none");
    for (size_t i = 0; i < n; i++)
        free(list[i]);
    free(list);
}

/* Adds a turn's lines and pages to their owners (k: code 0, data 1). */
static void tally_set(const struct set *s, int k, bool pages)
{
    for (size_t i = 0; i < s->cap; i++)
        if (s->key[i]) {
            if (pages)
                owners[s->val[i]].pages[k]++;
            else
                owners[s->val[i]].lines[k]++;
        }
}

int main(int argc, char **argv)
{
    if (argc < 4)
        die("usage: footprint BINARY TRACE ALLOCLOG [TOP [HOTLIST]]");
    int top = argc > 4 ? atoi(argv[4]) : 15;
    unmapped = owner_id("(unmapped)");
    load_allocs(argv[3], argv[1]);
    if (!mark_rx)
        die("no ub__critpath_mark in the binary: build it with -DSOFTUB_CRITPATH=ON");
    FILE *f = fopen(argv[2], "r");
    if (!f)
        die("cannot read the trace");
    struct set il = {0}, ip = {0}, dl = {0}, dp = {0}, ia = {0};
    uint32_t *v[5];
    for (int k = 0; k < 5; k++)
        v[k] = xrealloc(NULL, MAX_TURNS * sizeof(uint32_t));
    uint32_t turns = 0, bytes = 0; /* bytes: the turn's distinct instructions' */
    bool in = false;
    char line[256];
    while (fgets(line, sizeof(line), f) && turns < MAX_TURNS) {
        /* "I  addr,size" for an instruction; " L", " S", " M" for data; "==" valgrind's. */
        char kind = line[0] == 'I' ? 'I' : line[1];
        uint64_t a;
        if (line[0] == '=' || sscanf(line + 2, " %" SCNx64, &a) != 1)
            continue;
        if ((kind == 'S' || kind == 'M') && (a == mark_rx || a == mark_tx)) {
            if (a == mark_rx && !in) {
                in = true;
                set_clear(&il), set_clear(&ip), set_clear(&dl), set_clear(&dp), set_clear(&ia);
                bytes = 0;
            } else if (a == mark_tx && in) {
                in = false;
                v[0][turns] = (uint32_t)il.n, v[1][turns] = (uint32_t)ip.n;
                v[2][turns] = (uint32_t)dl.n, v[3][turns] = (uint32_t)dp.n;
                v[4][turns] = bytes;
                tally_set(&il, 0, false), tally_set(&ip, 0, true);
                tally_set(&dl, 1, false), tally_set(&dp, 1, true);
                turns++;
            }
            continue;
        }
        if (!in)
            continue;
        if (kind == 'I') {
            const char *comma = strchr(line, ',');
            unsigned size;
            if (set_put(&ia, a, 0) && comma && sscanf(comma + 1, "%u", &size) == 1)
                bytes += size;
            uint32_t o = owner_of(&code, a); /* a function, or a library's mapping */
            set_put(&il, a >> LINE_SHIFT, o);
            set_put(&ip, a >> PAGE_SHIFT, o);
        } else if (kind == 'L' || kind == 'S' || kind == 'M') {
            uint32_t o = owner_of(&data, a);
            set_put(&dl, a >> LINE_SHIFT, o);
            set_put(&dp, a >> PAGE_SHIFT, o);
        }
    }
    fclose(f);
    if (!turns)
        die("no turn in the trace (no marks stored)");
    /* The distinct instructions' bytes against the lines holding them: how full the lines a
     * turn fetches are (a path laid out densely needs bytes / 64 lines). */
    uint32_t code_lines = median(v[0], turns), code_bytes = median(v[4], turns);
    printf("footprint: %u turns; per turn (median): code %u lines on %u pages (%u bytes of "
           "distinct instructions: the lines %.0f %% full), data %u lines on %u pages\n",
           turns, code_lines, median(v[1], turns), code_bytes,
           code_lines ? 100.0 * code_bytes / (64.0 * code_lines) : 0.0, median(v[2], turns),
           median(v[3], turns));
    print_owners(0, turns, top);
    print_owners(1, turns, top);
    if (argc > 5)
        print_unlisted(argv[5], turns);
    return 0;
}
