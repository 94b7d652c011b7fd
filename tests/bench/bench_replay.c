/* bench_replay.c -- replays a generated trace (default 1,000,000 workloads) on a
 * generated cluster (default 10,000 nodes, 76,000 GPUs: whole A100s, A100s under a MIG
 * layout, time-sliced T4s, H100s with MIG on demand) once per policy, each in its own
 * process, and prints the wall time and peak RSS of each. Target: <= 120 s and <= 2 GiB.
 *
 *   build/bench/bench_replay [--workloads N] [--nodes N] [--hours H] [--policies a,b]
 *
 * A figure, not a timed test: run it on a quiet machine and take the median of runs; the
 * CPU seconds say what the wall time would be on an idle core. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sim/cluster.h"
#include "sim/gen.h"
#include "sim/replay.h"

static double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    long workloads = 1000000, nodes = 10000;
    double hours = 30;
    const char *policies = "fgd,bestfit,binpack,spread,mig-aware";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--workloads")) workloads = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--nodes")) nodes = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--hours")) hours = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--policies")) policies = argv[i + 1];
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
    }
    if (nodes < 10) nodes = 10;
    /* 60 % whole A100 x8, 20 % A100 x8 MIG 3g+2x2g, 10 % T4 x4 time-sliced by 4, 10 % H100 x8 MIG on demand. */
    char json[1024], err[512];
    snprintf(json, sizeof json,
             "{\"nodeGroups\": ["
             "{\"name\": \"a100\", \"count\": %ld, \"gpuProduct\": \"NVIDIA-A100-SXM4-80GB\", \"gpusPerNode\": 8,"
             " \"cpuMilli\": 128000, \"memoryMiB\": 1048576},"
             "{\"name\": \"a100-mig\", \"count\": %ld, \"gpuProduct\": \"NVIDIA-A100-SXM4-80GB\", \"gpusPerNode\": 8,"
             " \"cpuMilli\": 128000, \"memoryMiB\": 1048576, \"sharing\": \"mig:3g.40gb+2x2g.20gb\"},"
             "{\"name\": \"t4\", \"count\": %ld, \"gpuProduct\": \"Tesla-T4\", \"gpusPerNode\": 4,"
             " \"cpuMilli\": 64000, \"memoryMiB\": 262144, \"sharing\": \"timeslice:4\"},"
             "{\"name\": \"h100\", \"count\": %ld, \"gpuProduct\": \"NVIDIA-H100-80GB-HBM3\", \"gpusPerNode\": 8,"
             " \"cpuMilli\": 128000, \"memoryMiB\": 1048576, \"sharing\": \"mig:on-demand\"}]}",
             nodes * 6 / 10, nodes * 2 / 10, nodes / 10, nodes - nodes * 6 / 10 - nodes * 2 / 10 - nodes / 10);
    sim_cluster *c = sim_cluster_from_json(json, strlen(json), NULL, err, sizeof err);
    if (!c) { fprintf(stderr, "cluster: %s\n", err); return 1; }
    sim_gen_opts go;
    sim_gen_defaults(&go);
    go.seed = 1;
    go.workloads = workloads;
    go.hours = hours;
    double t0 = mono();
    sim_trace *t = sim_gen(&go, err, sizeof err);
    if (!t) { fprintf(stderr, "gen: %s\n", err); return 1; }
    printf("bench_replay: %d workloads over %.0f h on %d nodes (%d GPUs); generated in %.2f s\n", t->n, hours,
           sim_cluster_nodes(c), sim_cluster_gpus(c), mono() - t0);
    printf("%-10s %9s %9s %9s %8s %8s %10s %10s\n", "policy", "wall s", "replay s", "RSS MiB", "alloc%", "unsch",
           "p95 inf", "placements");
    fflush(stdout);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", policies);
    char *save = NULL;
    int rc = 0;
    for (char *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        /* A child per policy, so the peak RSS is that policy's alone. */
        double w0 = mono();
        pid_t pid = fork();
        if (pid == 0) {
            sim_replay_opts o;
            sim_replay_defaults(&o);
            o.policy = p;
            o.samples = 24;
            sim_replay_result r;
            if (sim_replay(c, t, &o, &r, err, sizeof err) != 0) {
                fprintf(stderr, "%s: %s\n", p, err);
                _exit(1);
            }
            struct rusage ru;
            getrusage(RUSAGE_SELF, &ru);
            printf("%-10s %9s %9.1f %9.0f %8.1f %8d %9.0fs %10ld\n", p, "", r.wall_s, ru.ru_maxrss / 1024.0,
                   r.alloc_mean_pct, r.unschedulable, r.kind[SIM_INFERENCE].wait_p95, r.placements_tried);
            fflush(stdout);
            sim_replay_result_free(&r);
            _exit(0);
        }
        int status;
        struct rusage ru;
        wait4(pid, &status, 0, &ru);
        double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
        printf("%-10s %9.1f (CPU %.1f s, peak RSS %.0f MiB)\n", p, mono() - w0, cpu, ru.ru_maxrss / 1024.0);
        fflush(stdout);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
    }
    sim_trace_free(t);
    sim_cluster_free(c);
    return rc;
}
