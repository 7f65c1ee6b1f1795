/*
 * Runs a libFuzzer target over every file of a corpus directory without
 * libFuzzer, so the seed corpus is a regression test in every build.
 */
#define _DEFAULT_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    static uint8_t buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    /* Copy to an exact-size heap block so ASan catches any over-read. */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact)
        return -1;
    memcpy(exact, buf, n);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    DIR *d = opendir(argv[1]);
    if (!d) {
        perror(argv[1]);
        return 1;
    }
    int files = 0;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", argv[1], e->d_name);
        if (run_file(path) == 0)
            files++;
    }
    closedir(d);
    /* The empty input, which no corpus file holds. */
    LLVMFuzzerTestOneInput((const uint8_t *)"", 0);
    printf("replayed %d corpus files\n", files);
    return files > 0 ? 0 : 1;
}
