/*
 * The allocation log bench/footprint.sh attributes data lines with: preloaded into the
 * traced program, it records every allocation made through malloc, calloc, realloc,
 * aligned_alloc and posix_memalign (address, size, the calling instruction), and at exit
 * the process's mappings and one address of the main thread's stack, into the file named by
 * FOOTPRINT_ALLOC_LOG:
 *
 *   a ADDRESS SIZE CALLER      an allocation (hexadecimal, size decimal)
 *   s ADDRESS                  an address on the main thread's stack
 *   m START END NAME           a mapping of /proc/self/maps (NAME "-" when anonymous)
 *
 * Frees are not logged: a later allocation at the same address replaces the earlier one in
 * the analysis, which is what the traced turns see.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *__libc_malloc(size_t n);
void *__libc_calloc(size_t k, size_t n);
void *__libc_realloc(void *p, size_t n);
void *__libc_memalign(size_t align, size_t n);

static int log_fd = -1;

static void put(const char *line, int len)
{
    if (log_fd == -1) {
        const char *path = getenv("FOOTPRINT_ALLOC_LOG");
        log_fd = path ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -2;
    }
    if (log_fd >= 0 && len > 0 && write(log_fd, line, (size_t)len) < 0)
        log_fd = -2;
}

static void *logged(void *p, size_t n, void *caller)
{
    if (p) {
        char line[96];
        put(line, snprintf(line, sizeof(line), "a %p %zu %p\n", p, n, caller));
    }
    return p;
}

void *malloc(size_t n)
{
    return logged(__libc_malloc(n), n, __builtin_return_address(0));
}

void *calloc(size_t k, size_t n)
{
    return logged(__libc_calloc(k, n), k * n, __builtin_return_address(0));
}

void *realloc(void *p, size_t n)
{
    return logged(__libc_realloc(p, n), n, __builtin_return_address(0));
}

void *aligned_alloc(size_t align, size_t n)
{
    return logged(__libc_memalign(align, n), n, __builtin_return_address(0));
}

int posix_memalign(void **out, size_t align, size_t n)
{
    void *p = logged(__libc_memalign(align, n), n, __builtin_return_address(0));
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

__attribute__((destructor)) static void dump_maps(void)
{
    char line[512];
    int here = 0;
    put(line, snprintf(line, sizeof(line), "s %p\n", (void *)&here));
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return;
    char buf[512];
    while (fgets(buf, sizeof(buf), f)) {
        unsigned long lo, hi;
        char name[400] = "-";
        if (sscanf(buf, "%lx-%lx %*s %*s %*s %*s %399s", &lo, &hi, name) < 2)
            continue;
        put(line, snprintf(line, sizeof(line), "m %lx %lx %s\n", lo, hi, name));
    }
    fclose(f);
}
