/* test_shim_ledger.c -- the shim's accounting underneath (shim/ledger.c, shim/track.c) in this process, and under
 * load: several processes of one pod allocating at once never pass the share together (randomized, TESSERA_SEED).
 * Two ledger_open calls in one process hold two open file descriptions, so to the locks they are two processes:
 * closing one is a process dying.
 */
#include "harness.h"
#include "shim_helpers.h"

#include "shim/ledger.h"
#include "shim/track.h"

#include <stdint.h>

#define MIB (1024ull * 1024ull)

static unsigned long long rng;
static unsigned rnd(unsigned n) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)((rng >> 33) % n);
}
static unsigned long long seed(void) {
    const char *env = getenv("TESSERA_SEED");
    return env ? strtoull(env, NULL, 10) : 20261204;
}

TEST(ledger_limits_reclaims_and_names_devices) {
    char path[] = "/tmp/tessera-ledger-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    ledger a, b;
    char why[300];
    CHECK_MSG(ledger_open(&a, path, why, sizeof why) == 0, "%s", why);
    CHECK_MSG(ledger_open(&b, path, why, sizeof why) == 0, "%s", why);
    CHECK(a.slot != b.slot);
    int da = ledger_device(&a, GPU_A), db = ledger_device(&b, GPU_A), other = ledger_device(&b, GPU_B);
    CHECK(da >= 0 && da == db && other >= 0 && other != da);
    ledger_usage seen;
    CHECK(ledger_reserve(&a, da, 600 * MIB, 1000 * MIB, NULL));
    CHECK(!ledger_reserve(&b, db, 500 * MIB, 1000 * MIB, &seen));
    CHECK_INT(seen.used, 600 * MIB);
    CHECK_INT(seen.procs, 1);
    CHECK(ledger_reserve(&b, db, 400 * MIB, 1000 * MIB, NULL));
    CHECK(!ledger_reserve(&b, db, 1, 1000 * MIB, NULL)); /* exactly full */
    CHECK(ledger_reserve(&b, other, 1000 * MIB, 1000 * MIB, NULL)); /* each device has its own room */
    ledger_release(&a, da, 100 * MIB);
    CHECK_INT(ledger_own(&a, da), 500 * MIB);
    CHECK_INT(ledger_used(&b, db).used, 900 * MIB);
    /* a dies holding 500 MiB: the next look gives them back */
    ledger_close(&a);
    ledger_usage u = ledger_used(&b, db);
    CHECK_INT(u.used, 400 * MIB);
    CHECK_INT(u.procs, 1);
    /* a new process takes the dead slot (the lowest free) and starts from nothing */
    ledger c;
    CHECK_MSG(ledger_open(&c, path, why, sizeof why) == 0, "%s", why);
    CHECK_INT(ledger_own(&c, da), 0);
    CHECK(ledger_reserve(&c, da, 600 * MIB, 1000 * MIB, NULL));
    /* at most LEDGER_DEVS devices */
    char uuid[64];
    int last = 0;
    for (int i = 0; i < LEDGER_DEVS + 1; i++) {
        snprintf(uuid, sizeof uuid, "GPU-00000000-0000-4000-8000-%012d", i);
        last = ledger_device(&c, uuid);
    }
    CHECK_INT(last, -1);
    CHECK_INT(ledger_device(&c, ""), -1);
    ledger_close(&b);
    ledger_close(&c);
    /* a file that is not a ledger is refused, not overwritten */
    FILE *f = fopen(path, "w");
    CHECK(f);
    fputs("hello", f);
    fclose(f);
    CHECK_INT(ledger_open(&a, path, why, sizeof why), -1);
    CHECK_CONTAINS(why, "is 5 bytes, not a ledger of this version");
    CHECK_INT(a.fd, -1);
    unlink(path);
    CHECK_INT(ledger_open(&a, "/nonexistent/dir/memory.v1", why, sizeof why), -1);
    CHECK_STR(why, "cannot open /nonexistent/dir/memory.v1: No such file or directory");
}

/* The allocation table against a plain array, random puts and takes (backward-shift deletion keeps every key
 * findable). */
TEST(track_matches_a_reference) {
    rng = seed();
    enum { N = 1000 };
    static uint64_t keys[N];
    static int live[N], kinds[N];
    for (int i = 0; i < N; i++) {
        /* device pointers 2 MiB apart collide in low bits on purpose; kinds share values */
        keys[i] = 0x7f0000000000ull + (uint64_t)rnd(N / 2) * 2 * MIB;
        kinds[i] = 1 + (int)rnd(4);
        live[i] = 0;
    }
    for (int step = 0; step < 20000; step++) {
        int i = (int)rnd(N);
        int dev;
        uint64_t bytes;
        bool dup = false;
        for (int j = 0; j < N && !dup; j++) dup = j != i && live[j] && keys[j] == keys[i] && kinds[j] == kinds[i];
        if (dup) continue;
        if (live[i]) {
            CHECK_MSG(track_take(kinds[i], keys[i], &dev, &bytes), "step %d: key %d lost (seed %llu)", step, i,
                      seed());
            CHECK_INT(dev, i % 16);
            CHECK_INT(bytes, (uint64_t)i * 7);
            CHECK(!track_take(kinds[i], keys[i], &dev, &bytes));
            live[i] = 0;
        } else {
            CHECK(track_put(kinds[i], keys[i], i % 16, (uint64_t)i * 7));
            live[i] = 1;
        }
    }
    track_clear();
    int dev;
    uint64_t bytes;
    for (int i = 0; i < N; i++) CHECK(!track_take(kinds[i], keys[i], &dev, &bytes));
}

/* Processes of one pod allocate at once, every one after the same start signal: together they never pass the
 * share, and none is refused while there was room for it (memory only grows here, so a refusal of X means the
 * final total plus X passes the share). Allocation kinds are mixed (cuMemAlloc, cuMemAllocAsync, cuMemCreate). */
TEST(shim_concurrent_allocations_never_pass_the_share) {
    fake_node n;
    char pod[300], go[400];
    CHECK_MSG(node_new(&n, GPU_A ":81920"), "build/fake-cuda is not built (run make)");
    CHECK(pod_install(&n, "pod", pod, sizeof pod));
    rng = seed();
    enum { PROCS = 6, SHARE = 1000 };
    for (int round = 0; round < 3; round++) {
        snprintf(go, sizeof go, "%s/go-%d", n.root, round);
        bg_probe p[PROCS];
        static char args_text[PROCS][40][16];
        const char *args[PROCS][48];
        for (int i = 0; i < PROCS; i++) {
            int k = 0;
            args[i][k++] = "wait-file";
            args[i][k++] = go;
            int count = 4 + (int)rnd(8);
            for (int a = 0; a < count; a++) {
                static const char *const kinds[] = {"alloc", "async-alloc", "vmm-alloc"};
                unsigned kind = rnd(3);
                unsigned mib = 2 * (1 + rnd(120)); /* even: cuMemCreate takes 2 MiB granules */
                snprintf(args_text[i][a], sizeof args_text[i][a], "%u", mib);
                args[i][k++] = kinds[kind];
                args[i][k++] = args_text[i][a];
            }
            args[i][k++] = "meminfo";
            args[i][k++] = "hold";
            args[i][k++] = "60";
            args[i][k] = NULL;
            CHECK(probe_start(&p[i], &n, pod, "1000", NULL, args[i]));
        }
        usleep(100000);
        FILE *f = fopen(go, "w");
        CHECK(f);
        fclose(f);
        unsigned total = 0, max_refused_fit = 0;
        int oks = 0, refusals = 0;
        unsigned refused[PROCS * 16];
        for (int i = 0; i < PROCS; i++) {
            char line[256];
            while (probe_wait_line(&p[i], "", line, sizeof line) && strncmp(line, "meminfo", 7) != 0) {
                char op[32];
                unsigned mib;
                char result[16];
                if (sscanf(line, "%31s %u %15s", op, &mib, result) != 3) continue;
                if (!strcmp(result, "ok")) total += mib, oks++;
                else refused[refusals++] = mib;
            }
            CHECK_MSG(!strncmp(line, "meminfo", 7), "probe %d ended before its allocations were done", i);
        }
        for (int r = 0; r < refusals; r++)
            if (total + refused[r] <= SHARE && refused[r] > max_refused_fit) max_refused_fit = refused[r];
        for (int i = 0; i < PROCS; i++) probe_stop(&p[i], SIGKILL);
        CHECK_MSG(total <= SHARE, "round %d: the pod's processes hold %u MiB of a %u MiB share (seed %llu)", round,
                  total, SHARE, seed());
        CHECK_MSG(max_refused_fit == 0, "round %d: %u MiB refused although %u MiB of %u were in use at the end "
                  "(seed %llu)", round, max_refused_fit, total, SHARE, seed());
        CHECK_MSG(oks > 0 && refusals > 0, "round %d: %d granted, %d refused: the share was not contended", round,
                  oks, refusals);
    }
    node_free(&n);
}
