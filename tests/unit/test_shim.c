/* test_shim.c -- libtessera-cuda.so in real processes: tessera-cuda-probe on the fake driver (build/fake-cuda),
 * with the library installed into each "pod" by the real `tessera-reserve --install-shim` and preloaded. Each test
 * says what in shim/shim.c's promise it holds to.
 */
#include "harness.h"
#include "shim_helpers.h"

#include "reserve/install.h"

#include <fcntl.h>

#define NODE_80G GPU_A ":81920"
#define OUT 8192

/* Each path a program reaches the driver by: NVIDIA's runtime (cuGetProcAddress_v2 by base name and version, with
 * and without per-thread streams), dlsym of versioned names on the driver's handle, and load-time binding. */
static const char *const vias[][4] = {
    {"--via", "runtime", NULL}, {"--via", "runtime", "--ptsz", NULL}, {"--via", "dlsym", NULL}, {"--via", "link", NULL}};

/* A fake node with the given GPUs and one pod installed into its directory "pod". */
#define NODE_WITH_POD(n, devices, pod)                                                      \
    CHECK_MSG(node_new(&(n), devices), "build/fake-cuda is not built (run make)");          \
    CHECK(pod_install(&(n), "pod", pod, sizeof pod))

/* args = the client path vias[v], then ops; the count. */
static int via_args(const char **args, size_t v, const char *const *ops) {
    int k = 0;
    for (int j = 0; vias[v][j]; j++) args[k++] = vias[v][j];
    for (int j = 0; ops[j]; j++) args[k++] = ops[j];
    args[k] = NULL;
    return k;
}

TEST(shim_install_layout) {
    fake_node n;
    char pod[300], path[600], want[600];
    NODE_WITH_POD(n, NODE_80G, pod);
    CHECK(pod_install(&n, "pod", pod, sizeof pod)); /* a restarted init container installs again */
    struct stat st;
    snprintf(path, sizeof path, "%s/lib/libtessera-cuda.so", pod);
    CHECK(stat(path, &st) == 0);
    CHECK_INT(st.st_mode & 07777, 0555);
    snprintf(want, sizeof want, "%s/libtessera-cuda.so", n.build);
    struct stat src;
    CHECK(stat(want, &src) == 0);
    CHECK_INT(st.st_size, src.st_size);
    snprintf(path, sizeof path, "%s/state", pod);
    CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode));
    CHECK_INT(st.st_mode & 07777, 01777);
    snprintf(path, sizeof path, "%s/ld.so.preload", pod);
    FILE *f = fopen(path, "r");
    CHECK(f);
    char line[200] = "";
    size_t got = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[got] = 0;
    CHECK_STR(line, "/opt/tessera/lib/libtessera-cuda.so\n");
    /* config/: the mount point of the delivery ConfigMap, empty (the shim then reads the environment) */
    snprintf(path, sizeof path, "%s/config", pod);
    CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode));
    CHECK_INT(st.st_mode & 07777, 0755);
    /* a missing source: exit 1 and the file named; nothing half-installed */
    char bin[600], out[512], err[512], dir[300];
    snprintf(bin, sizeof bin, "%s/tessera-reserve", n.build);
    snprintf(dir, sizeof dir, "%s/other", n.root);
    const char *argv[] = {bin, "--install-shim", dir, "--shim-source", "/nonexistent/libtessera-cuda.so", NULL};
    const char *envp[] = {"PATH=/usr/bin:/bin", NULL};
    CHECK_INT(run_capture(argv, envp, out, sizeof out, err, sizeof err), 1);
    CHECK_CONTAINS(err, "cannot read /nonexistent/libtessera-cuda.so: No such file or directory");
    CHECK(access(dir, F_OK) != 0);
    node_free(&n);
}

TEST(shim_install_into_a_file_fails_clearly) {
    char why[300], dir[] = "/tmp/tessera-install-XXXXXX";
    int fd = mkstemp(dir);
    CHECK(fd >= 0);
    close(fd);
    /* the emptyDir is a file: nothing can be created under it */
    CHECK_INT(reserve_install_shim(dir, "/bin/sh", why, sizeof why), -1);
    CHECK_CONTAINS(why, "cannot create");
    CHECK_CONTAINS(why, "Not a directory");
    unlink(dir);
}

/* The kubelet mounts a subPath that does not exist yet as a directory: an EMPTY directory where ld.so.preload goes
 * (a container that started before the installer ran, in a pod whose init containers run again) is replaced by the
 * file; one with something in it is not removed, and the install fails saying so. */
TEST(shim_install_replaces_an_empty_directory_at_ld_so_preload) {
    char why[300], dir[] = "/tmp/tessera-install-XXXXXX", path[400], keep[450];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/ld.so.preload", dir);
    CHECK(mkdir(path, 0755) == 0);
    int rc = reserve_install_shim(dir, "/bin/sh", why, sizeof why);
    CHECK_MSG(rc == 0, "%s", why);
    struct stat st;
    CHECK(stat(path, &st) == 0 && S_ISREG(st.st_mode));
    /* a directory with something in it: not ours to remove */
    CHECK(unlink(path) == 0 && mkdir(path, 0755) == 0);
    snprintf(keep, sizeof keep, "%s/someone's", path);
    FILE *f = fopen(keep, "w");
    CHECK(f != NULL);
    fclose(f);
    CHECK_INT(reserve_install_shim(dir, "/bin/sh", why, sizeof why), -1);
    CHECK_CONTAINS(why, "cannot remove the directory in the way of ");
    CHECK_CONTAINS(why, "ld.so.preload: Directory not empty");
    CHECK(access(keep, F_OK) == 0);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

/* Write the delivery ConfigMap's key into pod/config/ as the kubelet projects it (a file per key). */
static void deliver(const char *pod, const char *key, const char *value) {
    char path[400];
    snprintf(path, sizeof path, "%s/config/%s", pod, key);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(value, f);
        fclose(f);
    }
}

/* Where the ConfigMap is mounted over config/, the limit is the file's and the environment is not read: a process
 * that drops or raises TESSERA_GPU_MEMORY_MIB (`env -u`) is held to the delivered share all the same. A delivered
 * configuration without the key is a share without a limit, whatever the environment says. */
TEST(shim_delivered_limit_beats_the_environment) {
    fake_node n;
    char pod[300], out[OUT], err[OUT];
    NODE_WITH_POD(n, NODE_80G, pod);
    deliver(pod, "TESSERA_GPU_UUID", GPU_A);
    deliver(pod, "TESSERA_GPU_MEMORY_MIB", "4096");
    const char *ops[] = {"alloc", "3000", "alloc", "2000", "meminfo", NULL};
    static const char *const envs[] = {NULL, "81920", "1"};
    for (size_t i = 0; i < sizeof envs / sizeof envs[0]; i++) {
        int rc = probe_run(&n, pod, envs[i], NULL, ops, out, sizeof out, err, sizeof err);
        CHECK_MSG(rc == 1, "env %s: exit %d, stdout:\n%s\nstderr:\n%s", envs[i] ? envs[i] : "(unset)", rc, out, err);
        CHECK_CONTAINS(out, "alloc 3000 ok\nalloc 2000 error 2\nmeminfo free=1096 total=4096\n");
        CHECK_CONTAINS(err, "this pod's share is 4096 MiB");
    }
    /* a bad delivered value names its file */
    deliver(pod, "TESSERA_GPU_MEMORY_MIB", "4Gi");
    CHECK_INT(probe_run(&n, pod, "4096", NULL, ops, out, sizeof out, err, sizeof err), 3);
    CHECK_CONTAINS(err, "TESSERA_GPU_MEMORY_MIB=\"4Gi\" (from ");
    CHECK_CONTAINS(err, "/lib/../config) is not a whole number of MiB");
    /* delivered without the key: no limit, the environment's ignored */
    char path[400];
    snprintf(path, sizeof path, "%s/config/TESSERA_GPU_MEMORY_MIB", pod);
    CHECK(unlink(path) == 0);
    const char *big[] = {"alloc", "8192", NULL};
    CHECK_INT(probe_run(&n, pod, "4096", NULL, big, out, sizeof out, err, sizeof err), 0);
    CHECK_CONTAINS(out, "alloc 8192 ok\n");
    node_free(&n);
}

/* A delivered MPS share: the driver takes its limits from the process's environment, so cuInit fails when the
 * process dropped one (802, naming it) or when no MPS control daemon answers in its pipe directory (805): never a
 * plain CUDA process with no compute limit. The deployed MPS test runs the same check against a daemon that answers. */
TEST(shim_mps_share_without_its_daemon_or_limits_fails_cuinit) {
    fake_node n;
    char pod[300], out[OUT], err[OUT], pipe[400], env_pipe[440];
    NODE_WITH_POD(n, NODE_80G, pod);
    deliver(pod, "TESSERA_GPU_MEMORY_MIB", "4096");
    deliver(pod, "CUDA_MPS_PIPE_DIRECTORY", "/run/tessera/mps/" GPU_A "/pipe");
    deliver(pod, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "25");
    snprintf(pipe, sizeof pipe, "%s/no-mps", n.root);
    snprintf(env_pipe, sizeof env_pipe, "CUDA_MPS_PIPE_DIRECTORY=%s", pipe);
    const char *ops[] = {"alloc", "10", NULL};
    /* the limit dropped from the environment */
    const char *no_pct[] = {env_pipe, NULL};
    CHECK_INT(probe_run(&n, pod, NULL, no_pct, ops, out, sizeof out, err, sizeof err), 3);
    CHECK_CONTAINS(out, "init error 802\n");
    CHECK_CONTAINS(err, "tessera: this pod's share is an MPS client whose CUDA_MPS_ACTIVE_THREAD_PERCENTAGE is \"25\"");
    CHECK_CONTAINS(err, "and this process's is unset");
    /* the limits there, no daemon in the pipe directory */
    const char *pct[] = {env_pipe, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25", NULL};
    CHECK_INT(probe_run(&n, pod, NULL, pct, ops, out, sizeof out, err, sizeof err), 3);
    CHECK_CONTAINS(out, "init error 805\n");
    CHECK_CONTAINS(err, "no MPS control daemon answers at ");
    CHECK_CONTAINS(err, "/no-mps/control (No such file or directory); CUDA fails with CUDA_ERROR_MPS_CONNECTION_FAILED");
    /* not an MPS share: the same process runs */
    char path[400];
    snprintf(path, sizeof path, "%s/config/CUDA_MPS_PIPE_DIRECTORY", pod);
    CHECK(unlink(path) == 0);
    CHECK_INT(probe_run(&n, pod, NULL, pct, ops, out, sizeof out, err, sizeof err), 0);
    node_free(&n);
}

/* Within the share an allocation succeeds, past it CUDA_ERROR_OUT_OF_MEMORY with the contract's line; the device
 * reports the share through cuMemGetInfo, cuDeviceTotalMem and NVML (both structs), through every client path. */
TEST(shim_every_client_path_enforces_and_reports_the_share) {
    fake_node n;
    char pod[300], out[OUT], err[OUT];
    NODE_WITH_POD(n, NODE_80G, pod);
    for (size_t v = 0; v < sizeof vias / sizeof vias[0]; v++) {
        const char *args[24];
        const char *ops[] = {"alloc", "3000", "alloc", "2000", "meminfo", "total-mem", "nvml-meminfo",
                             "nvml-meminfo-v2", "free", "alloc", "2000", "meminfo", NULL};
        via_args(args, v, ops);
        int rc = probe_run(&n, pod, "4096", NULL, args, out, sizeof out, err, sizeof err);
        CHECK_MSG(rc == 1, "%s %s: exit %d, stdout:\n%s\nstderr:\n%s", vias[v][1], vias[v][2] ? vias[v][2] : "", rc,
                  out, err);
        CHECK_CONTAINS(out, "init ok devices=1\nalloc 3000 ok\nalloc 2000 error 2\n"
                            "meminfo free=1096 total=4096\ntotal-mem 4096\n"
                            "nvml-meminfo total=4096 used=3000 free=1096\n"
                            "nvml-meminfo-v2 total=4096 used=3000 free=1096\n"
                            "free ok\nalloc 2000 ok\nmeminfo free=2096 total=4096\n");
        CHECK_CONTAINS(err, "tessera: cuMemAlloc of 2000 MiB refused on " GPU_A ": this pod's share is 4096 MiB, "
                            "3000 MiB in use by 1 process\n");
    }
    node_free(&n);
}

/* Every allocation entry point counts, and its free gives the memory back. */
TEST(shim_every_allocation_kind_counts) {
    fake_node n;
    char pod[300], out[OUT], err[OUT], want[300];
    NODE_WITH_POD(n, NODE_80G, pod);
    const char *kinds[] = {"alloc", "pitch-alloc", "managed-alloc", "async-alloc", "pool-alloc", "vmm-alloc",
                           "array-alloc"};
    const char *names[] = {"cuMemAlloc", "cuMemAllocPitch", "cuMemAllocManaged", "cuMemAllocAsync",
                           "cuMemAllocFromPoolAsync", "cuMemCreate", "cuArrayCreate"};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        for (int ptsz = 0; ptsz < 2; ptsz++) {
            /* --ptsz: the per-thread-stream variants (cuMemAllocAsync_ptsz...) where there are some */
            const char *args[16];
            int k = 0;
            if (ptsz) args[k++] = "--ptsz";
            const char *ops[] = {kinds[i], "3000", kinds[i], "2000", "free", kinds[i], "2000", "meminfo", NULL};
            for (int j = 0; ops[j]; j++) args[k++] = ops[j];
            args[k] = NULL;
            int rc = probe_run(&n, pod, "4096", NULL, args, out, sizeof out, err, sizeof err);
            CHECK_MSG(rc == 1, "%s: exit %d\n%s%s", kinds[i], rc, out, err);
            snprintf(want, sizeof want, "%s 3000 ok\n%s 2000 error 2\nfree ok\n%s 2000 ok\nmeminfo free=2096 total=4096\n",
                     kinds[i], kinds[i], kinds[i]);
            CHECK_CONTAINS(out, want);
            snprintf(want, sizeof want, "tessera: %s of 2000 MiB refused on " GPU_A, names[i]);
            CHECK_CONTAINS(err, want);
        }
    }
    node_free(&n);
}

/* Two processes of one pod share one limit; when the holder is killed (SIGKILL: no chance to free), its memory
 * comes back. */
TEST(shim_processes_of_one_pod_share_the_limit) {
    fake_node n;
    char pod[300], out[OUT], err[OUT], line[256];
    NODE_WITH_POD(n, NODE_80G, pod);
    bg_probe a;
    const char *hold[] = {"alloc", "3000", "hold", "60", NULL};
    CHECK(probe_start(&a, &n, pod, "4096", NULL, hold));
    CHECK_MSG(probe_wait_line(&a, "alloc 3000", line, sizeof line), "the holder ended early");
    CHECK_STR(line, "alloc 3000 ok");
    const char *second[] = {"meminfo", "nvml-meminfo", "alloc", "2000", "alloc", "1000", NULL};
    CHECK_INT(probe_run(&n, pod, "4096", NULL, second, out, sizeof out, err, sizeof err), 1);
    CHECK_CONTAINS(out, "meminfo free=1096 total=4096\nnvml-meminfo total=4096 used=3000 free=1096\n"
                        "alloc 2000 error 2\nalloc 1000 ok\n");
    CHECK_CONTAINS(err, "this pod's share is 4096 MiB, 3000 MiB in use by 1 process\n");
    CHECK_INT(probe_stop(&a, SIGKILL), 128 + SIGKILL);
    const char *after[] = {"alloc", "4000", "meminfo", NULL};
    CHECK_INT(probe_run(&n, pod, "4096", NULL, after, out, sizeof out, err, sizeof err), 0);
    CHECK_CONTAINS(out, "alloc 4000 ok\nmeminfo free=96 total=4096\n");
    node_free(&n);
}

/* A neighbour pod (its own state directory, the same GPU) allocates its own share; each pod's view is the smaller of
 * its share's room and what the GPU really has free. */
TEST(shim_neighbour_pod_keeps_its_own_share) {
    fake_node n;
    CHECK_MSG(node_new(&n, GPU_A ":8192"), "build/fake-cuda is not built (run make)");
    char pa[300], pb[300], out[OUT], err[OUT], line[256];
    CHECK(pod_install(&n, "pod-a", pa, sizeof pa));
    CHECK(pod_install(&n, "pod-b", pb, sizeof pb));
    bg_probe a;
    const char *hold[] = {"alloc", "3000", "alloc", "1500", "hold", "60", NULL};
    CHECK(probe_start(&a, &n, pa, "4096", NULL, hold));
    CHECK(probe_wait_line(&a, "alloc 1500", line, sizeof line));
    CHECK_STR(line, "alloc 1500 error 2"); /* pod A's own share */
    /* pod B: share 6000 on a GPU with 8192 - 3000 = 5192 MiB left: it sees 5192 free; past that the driver itself
     * refuses (no "tessera:" line: the GPU is full, not the share) */
    const char *b_ops[] = {"meminfo", "nvml-meminfo", "alloc", "5000", "meminfo", "alloc", "500", NULL};
    CHECK_INT(probe_run(&n, pb, "6000", NULL, b_ops, out, sizeof out, err, sizeof err), 1);
    CHECK_CONTAINS(out, "meminfo free=5192 total=6000\nnvml-meminfo total=6000 used=0 free=5192\n"
                        "alloc 5000 ok\nmeminfo free=192 total=6000\nalloc 500 error 2\n");
    CHECK_MSG(!strstr(err, "tessera:"), "the shim refused what the driver should have: %s", err);
    probe_stop(&a, SIGTERM);
    node_free(&n);
}

/* Without TESSERA_GPU_MEMORY_MIB the preloaded library changes nothing and opens no file. */
TEST(shim_without_a_share_is_pass_through) {
    fake_node n;
    char pod[300], out[OUT], err[OUT], path[400];
    NODE_WITH_POD(n, NODE_80G, pod);
    for (size_t v = 0; v < sizeof vias / sizeof vias[0]; v++) {
        const char *args[16];
        const char *ops[] = {"alloc", "60000", "meminfo", "total-mem", "nvml-meminfo", "free", NULL};
        via_args(args, v, ops);
        CHECK_INT(probe_run(&n, pod, NULL, NULL, args, out, sizeof out, err, sizeof err), 0);
        CHECK_CONTAINS(out, "alloc 60000 ok\nmeminfo free=21920 total=81920\ntotal-mem 81920\n"
                            "nvml-meminfo total=81920 used=60000 free=21920\nfree ok\n");
        CHECK_STR(err, "");
    }
    snprintf(path, sizeof path, "%s/state/memory.v1", pod);
    CHECK_MSG(access(path, F_OK) != 0, "a process without a share created %s", path);
    node_free(&n);
}

/* Limits set but not enforceable: CUDA fails at cuInit (802) with the reason, never runs unenforced. */
TEST(shim_fails_loudly_when_it_cannot_enforce) {
    fake_node n;
    char pod[300], out[OUT], err[OUT], path[400];
    NODE_WITH_POD(n, NODE_80G, pod);
    const char *ops[] = {"alloc", "10", NULL};
    /* the state directory gone (an emptyDir the init container never filled) */
    snprintf(path, sizeof path, "%s/state", pod);
    CHECK(rmdir(path) == 0);
    for (size_t v = 0; v < sizeof vias / sizeof vias[0]; v++) {
        const char *args[8];
        via_args(args, v, ops);
        CHECK_INT(probe_run(&n, pod, "4096", NULL, args, out, sizeof out, err, sizeof err), 3);
        CHECK_CONTAINS(out, "init error 802\n");
        CHECK_CONTAINS(err, "tessera: this pod's GPU memory share cannot be enforced: the pod's memory ledger is "
                            "unusable: cannot open ");
        CHECK_CONTAINS(err, "/lib/../state/memory.v1: No such file or directory; CUDA fails with "
                            "CUDA_ERROR_SYSTEM_NOT_READY (802) rather than run unenforced\n");
    }
    /* a value that is not a number of MiB */
    CHECK(mkdir(path, 01777) == 0);
    CHECK_INT(probe_run(&n, pod, "20Gi", NULL, ops, out, sizeof out, err, sizeof err), 3);
    CHECK_CONTAINS(out, "init error 802\n");
    CHECK_CONTAINS(err, "cannot be enforced: TESSERA_GPU_MEMORY_MIB=\"20Gi\" (from the environment) is not a whole "
                        "number of MiB");
    /* a ledger file of another size (not this version's): refused, not overwritten */
    snprintf(path, sizeof path, "%s/state/memory.v1", pod);
    FILE *f = fopen(path, "w");
    CHECK(f);
    fputs("not a ledger", f);
    fclose(f);
    CHECK_INT(probe_run(&n, pod, "4096", NULL, ops, out, sizeof out, err, sizeof err), 3);
    CHECK_CONTAINS(err, "is 12 bytes, not a ledger of this version");
    node_free(&n);
}

/* An allocation entry point of a version the shim does not know is refused, not handed out: the fake driver has a
 * made-up cuMemAlloc_v99 at CUDA version 99000. Without the shim the same lookup succeeds (the test means
 * something). */
TEST(shim_refuses_unknown_versions_of_allocation_calls) {
    fake_node n;
    char pod[300], out[OUT], err[OUT];
    NODE_WITH_POD(n, NODE_80G, pod);
    const char *args[] = {"--cuda-version", "99000", "alloc", "10", "meminfo", NULL};
    CHECK_INT(probe_run(&n, NULL, NULL, NULL, args, out, sizeof out, err, sizeof err), 0);
    CHECK_CONTAINS(out, "alloc 10 ok\n");
    CHECK_INT(probe_run(&n, pod, "4096", NULL, args, out, sizeof out, err, sizeof err), 1);
    CHECK_CONTAINS(out, "lookup cuMemAlloc error 500\ninit ok devices=1\nalloc 10 error 500\n"
                        "meminfo free=4096 total=4096\n");
    CHECK_CONTAINS(err, "tessera: cuGetProcAddress(\"cuMemAlloc\", 99000) found a variant of cuMemAlloc this library "
                        "does not know");
    /* the CUDA 3.1 entry point with 32-bit sizes: refused both looked up and bound at link time */
    const char *v1[][5] = {{"--via", "dlsym", "alloc-v1", "10", NULL}, {"--via", "link", "alloc-v1", "10", NULL}};
    for (int i = 0; i < 2; i++) {
        CHECK_INT(probe_run(&n, pod, "4096", NULL, v1[i], out, sizeof out, err, sizeof err), 1);
        CHECK_CONTAINS(out, "alloc-v1 10 error 801\n");
        CHECK_CONTAINS(err, "cuMemAlloc (the CUDA 3.1 entry point with 32-bit sizes) is not supported");
    }
    node_free(&n);
}

/* A driver whose cuGetProcAddress hands out internal functions rather than its exports is still caught: the shim
 * learns those addresses by asking the driver itself. */
TEST(shim_catches_a_driver_with_an_internal_table) {
    fake_node n;
    char pod[300], out[OUT], err[OUT];
    NODE_WITH_POD(n, NODE_80G, pod);
    const char *env[] = {"FAKE_CUDA_PROCADDR=internal", NULL};
    const char *args[] = {"alloc", "3000", "alloc", "2000", "async-alloc", "2000", "meminfo", "free", "meminfo", NULL};
    CHECK_INT(probe_run(&n, pod, "4096", env, args, out, sizeof out, err, sizeof err), 1);
    CHECK_CONTAINS(out, "alloc 3000 ok\nalloc 2000 error 2\nasync-alloc 2000 error 2\nmeminfo free=1096 total=4096\n"
                        "free ok\nmeminfo free=4096 total=4096\n");
    node_free(&n);
}

/* Another preloaded library that wraps libc through dlsym(RTLD_NEXT) keeps working after the shim, with or without
 * a share: glibc must see that library, not the shim, as dlsym's caller. */
TEST(shim_keeps_rtld_next_interposers_working) {
    fake_node n;
    char pod[300], out[OUT], err[OUT], preload[1400], wrap[700];
    NODE_WITH_POD(n, NODE_80G, pod);
    snprintf(wrap, sizeof wrap, "%s/fake-cuda/libwrap-uname.so", n.build);
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s/lib/libtessera-cuda.so %s", pod, wrap);
    for (int share = 0; share < 2; share++) {
        const char *argv[] = {"/bin/uname", "-s", NULL};
        const char *envp[] = {preload, "PATH=/usr/bin:/bin", share ? "TESSERA_GPU_MEMORY_MIB=4096" : NULL, NULL};
        int rc = run_capture(argv, envp, out, sizeof out, err, sizeof err);
        CHECK_MSG(rc == 0, "uname under the shim and an RTLD_NEXT wrapper: exit %d, %s", rc, err);
        CHECK_STR(out, "wrapped-Linux\n");
    }
    node_free(&n);
}

/* The library loads in the images people run: nothing newer than GLIBC_2.17 needed (Ubuntu 20.04 has 2.31, UBI 8
 * 2.28; aarch64's oldest is 2.17), no C++ runtime, libdl named (dlopen lives there before glibc 2.34), and it
 * exports only its hooks and dlsym. */
TEST(shim_loads_on_old_glibc_and_exports_only_its_hooks) {
    char lib[600], cmd[800], line[512];
    CHECK_MSG(sibling_binary_path("libtessera-cuda.so", lib, sizeof lib) || access(lib, R_OK) == 0,
              "build/libtessera-cuda.so is not built (run make)");
    snprintf(cmd, sizeof cmd, "objdump -T '%s' 2>&1", lib);
    FILE *p = popen(cmd, "r");
    CHECK(p);
    int glibc = 0, exported = 0, hooks = 0;
    char bad[512] = "";
    while (fgets(line, sizeof line, p)) {
        const char *v = strstr(line, "GLIBC_");
        if (v) {
            glibc++;
            int major = 0, minor = 0;
            if (sscanf(v, "GLIBC_%d.%d", &major, &minor) == 2 && (major > 2 || (major == 2 && minor > 17)))
                snprintf(bad, sizeof bad, "needs %.500s", line);
        }
        if (strstr(line, " .text") && strstr(line, " g ")) {
            exported++;
            char *name = strrchr(line, ' ');
            name = name ? name + 1 : line;
            name[strcspn(name, "\n")] = 0;
            if (!strncmp(name, "cu", 2) || !strncmp(name, "nvml", 4) || !strcmp(name, "dlsym")) hooks++;
            else snprintf(bad, sizeof bad, "exports %.500s", name);
        }
    }
    CHECK(pclose(p) == 0);
    CHECK_MSG(!bad[0], "%s", bad);
    CHECK_MSG(glibc > 10 && exported >= 29 && hooks == exported, "objdump -T: %d glibc references, %d exports", glibc,
              exported);
    snprintf(cmd, sizeof cmd, "readelf -d '%s' 2>&1", lib);
    p = popen(cmd, "r");
    CHECK(p);
    char needed[1024] = "";
    while (fgets(line, sizeof line, p))
        if (strstr(line, "(NEEDED)")) strncat(needed, line, sizeof needed - strlen(needed) - 1);
    CHECK(pclose(p) == 0);
    CHECK_CONTAINS(needed, "[libdl.so.2]");
    CHECK_CONTAINS(needed, "[libc.so.6]");
    CHECK_MSG(!strstr(needed, "libstdc++") && !strstr(needed, "libcjson") && !strstr(needed, "libcurl"),
              "the shim links more than libc and libdl:\n%s", needed);
}

/* A fork child inherits nothing: the parent killed while a forked helper lives on gives its memory back (the child
 * must not keep the parent's slot alive), and the child's exit takes nothing of the parent's. */
TEST(shim_fork_child_inherits_nothing) {
    fake_node n;
    char pod[300], out[OUT], err[OUT], line[256];
    NODE_WITH_POD(n, NODE_80G, pod);
    /* a child that exits at once: the parent's 3000 MiB stay counted */
    bg_probe a;
    const char *quick[] = {"alloc", "3000", "fork-hold", "0", "hold", "60", NULL};
    CHECK(probe_start(&a, &n, pod, "4096", NULL, quick));
    CHECK(probe_wait_line(&a, "fork-hold", line, sizeof line));
    int quick_child = atoi(line + strlen("fork-hold "));
    CHECK(quick_child > 0 && WAIT_FOR(test_pid_gone(quick_child)));   /* the child has exited */
    const char *probe2[] = {"alloc", "2000", NULL};
    CHECK_INT(probe_run(&n, pod, "4096", NULL, probe2, out, sizeof out, err, sizeof err), 1);
    CHECK_CONTAINS(err, "3000 MiB in use by 1 process");
    probe_stop(&a, SIGKILL);
    /* a child that outlives its parent: the parent's memory comes back when the parent dies */
    const char *slow[] = {"alloc", "3000", "fork-hold", "60", "hold", "60", NULL};
    CHECK(probe_start(&a, &n, pod, "4096", NULL, slow));
    CHECK(probe_wait_line(&a, "fork-hold", line, sizeof line));
    int child = atoi(line + strlen("fork-hold "));
    CHECK(child > 0);
    probe_stop(&a, SIGKILL);
    const char *after[] = {"alloc", "4000", NULL};
    int rc = probe_run(&n, pod, "4096", NULL, after, out, sizeof out, err, sizeof err);
    kill(child, SIGKILL);
    CHECK_MSG(rc == 0, "the dead parent's memory was not given back while its child lives: %s%s", out, err);
    node_free(&n);
}

/* Accounting is by UUID, not device number: with CUDA_VISIBLE_DEVICES renumbering the devices one process's device 0
 * is another's device 1, and both count against the same GPU. Each visible GPU has its own limit. */
TEST(shim_limits_follow_the_gpu_not_its_number) {
    fake_node n;
    char pod[300], out[OUT], err[OUT], line[256];
    NODE_WITH_POD(n, GPU_A ":81920," GPU_B ":81920", pod);
    bg_probe a;
    const char *env[] = {"CUDA_VISIBLE_DEVICES=1,0", NULL};
    const char *ops[] = {"alloc", "3000", "device", "1", "alloc", "3000", "hold", "60", NULL};
    CHECK(probe_start(&a, &n, pod, "4096", env, ops));
    CHECK(probe_wait_line(&a, "alloc", line, sizeof line));
    CHECK_STR(line, "alloc 3000 ok");
    CHECK(probe_wait_line(&a, "alloc", line, sizeof line));
    CHECK_STR(line, "alloc 3000 ok"); /* the other GPU: its own 4096 MiB */
    /* this process numbers them 0 = A, 1 = B: 3000 MiB are in use on each */
    const char *b_ops[] = {"alloc", "2000", "device", "1", "meminfo", "alloc", "1000", NULL};
    CHECK_INT(probe_run(&n, pod, "4096", NULL, b_ops, out, sizeof out, err, sizeof err), 1);
    CHECK_CONTAINS(out, "alloc 2000 error 2\ndevice 1 ok\nmeminfo free=1096 total=4096\nalloc 1000 ok\n");
    CHECK_CONTAINS(err, "refused on " GPU_A);
    /* a container shown only GPU B (NVIDIA_VISIBLE_DEVICES) sees one device, B, with the pod's use of B */
    snprintf(n.visible, sizeof n.visible, "%s", GPU_B);
    const char *c_ops[] = {"meminfo", NULL};
    CHECK_INT(probe_run(&n, pod, "4096", NULL, c_ops, out, sizeof out, err, sizeof err), 0);
    CHECK_CONTAINS(out, "init ok devices=1\nmeminfo free=1096 total=4096\n");
    probe_stop(&a, SIGTERM);
    node_free(&n);
}

/* tests/gpu/run.sh cannot run without a GPU, but its CUDA program must keep building (with CUDA 13 where nvcc is
 * installed: /usr/local/cuda or PATH) and the script must stay valid shell. */
TEST(shim_gpu_check_builds) {
    char out[OUT], err[OUT];
    const char *sh[] = {"/bin/bash", "-n", "tests/gpu/run.sh", NULL};
    const char *envp[] = {"PATH=/usr/local/cuda/bin:/usr/bin:/bin", NULL};
    CHECK_INT(run_capture(sh, envp, out, sizeof out, err, sizeof err), 0);
    const char *nvcc = access("/usr/local/cuda/bin/nvcc", X_OK) == 0 ? "/usr/local/cuda/bin/nvcc" : NULL;
    if (!nvcc) {
        printf("    skipped: nvcc is not installed (/usr/local/cuda/bin/nvcc), tests/gpu/check.cu not compiled\n");
        return;
    }
    char bin[] = "/tmp/tessera-gpu-check-XXXXXX";
    int fd = mkstemp(bin);
    CHECK(fd >= 0);
    close(fd);
    const char *argv[] = {nvcc, "-O2", "-o", bin, "tests/gpu/check.cu", NULL};
    int rc = run_capture(argv, envp, out, sizeof out, err, sizeof err);
    unlink(bin);
    CHECK_MSG(rc == 0, "nvcc tests/gpu/check.cu: exit %d\n%s", rc, err);
}
