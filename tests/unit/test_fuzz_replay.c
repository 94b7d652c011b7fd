/* test_fuzz_replay.c -- every fuzz corpus input and every crash ever found, replayed through
 * the fuzz targets' own bodies (tests/fuzz/fuzz_targets.c) under the normal build, so a
 * regression of a fixed finding fails `make test` without clang or libFuzzer. A target's
 * invariant checks abort the run, as they do under the fuzzer.
 */
#include "tests/unit/harness.h"
#include "tests/fuzz/fuzz_targets.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_DIR "tests/fuzz"

/* Feed every regular file of dir to one; returns the number of files, -1 if dir is missing. */
static int replay_dir(const char *dir, void (*one)(const uint8_t *, size_t)) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;   /* ., .. and .gitkeep */
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        fseek(f, 0, SEEK_SET);
        /* exact size, as libFuzzer passes it: a read past the end is an ASan report under make asan */
        uint8_t *buf = malloc(len > 0 ? (size_t)len : 1);
        size_t got = len > 0 ? fread(buf, 1, (size_t)len, f) : 0;
        fclose(f);
        if (got == (size_t)(len > 0 ? len : 0)) {
            one(buf, got);
            n++;
        }
        free(buf);
    }
    closedir(d);
    return n;
}

/* Each target has a seed corpus, and every file in it and in crashes/ goes through without
 * a sanitizer report or a broken invariant. */
TEST(fuzz_replay_corpora_and_crashes) {
    int targets = 0, files = 0;
    for (const fuzz_target *t = fuzz_targets; t->name; t++) {
        char dir[512];
        snprintf(dir, sizeof dir, "%s/corpus/%s", FUZZ_DIR, t->name);
        int n = replay_dir(dir, t->one);
        CHECK_MSG(n > 0, "%s: no seed corpus (%d files)", dir, n);
        files += n;
        snprintf(dir, sizeof dir, "%s/crashes/%s", FUZZ_DIR, t->name);
        n = replay_dir(dir, t->one);
        if (n > 0) files += n;
        targets++;
    }
    printf("    replayed %d inputs through %d fuzz targets\n", files, targets);
    CHECK(targets >= 17);
}
