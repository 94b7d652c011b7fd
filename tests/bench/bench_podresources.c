/* bench_podresources.c -- what reading a node's holdings from the kubelet costs the node agent. Prints figures; not
 * a test.
 *
 *   A node with P pods x 8 devices (two containers of 4 time-sliced replica ids, ~45 bytes each), three cells,
 *   alternated round by round in one run so machine noise hits them alike, p50 and p99 of R rounds:
 *     decode   agent_pw_decode_list on the encoded ListPodResourcesResponse
 *     record   decode + agent_holdings_from_list (the tessera.io/holdings JSON)
 *     call     agent_holdings_json against tests/support/fake_podresources (unix socket, HTTP/2, gRPC framing)
 *
 *   make build/bench/bench_podresources && build/bench/bench_podresources
 *   (BENCH_PODRES_PODS=P, default 1000; BENCH_PODRES_ROUNDS=R, default 30)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/holdings.h"
#include "agent/protowire.h"
#include "tests/support/fake_podresources.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int env_int(const char *name, int def) {
    const char *v = getenv(name);
    return v && atoi(v) > 0 ? atoi(v) : def;
}

int main(void) {
    int pods = env_int("BENCH_PODRES_PODS", 1000), rounds = env_int("BENCH_PODRES_ROUNDS", 30);
    size_t cap = (size_t)pods * 1024 + 1, n = 0;
    char *spec = malloc(cap), err[512];
    if (!spec) return 1;
    for (int p = 0; p < pods; p++)
        for (int c = 0; c < 2; c++) {
            n += (size_t)snprintf(spec + n, cap - n, "ns%d/pod-%05d c%d nvidia.com/gpu.shared", p % 7, p, c);
            for (int d = 0; d < 4; d++)
                n += (size_t)snprintf(spec + n, cap - n, "%sGPU-%08x-6a0f-4c1e-9b7a-%012d::%d", d ? "," : " ",
                                      (unsigned)(p / 4), c * 4 + d, p % 4);
            n += (size_t)snprintf(spec + n, cap - n, "\n");
        }
    agent_pr_list l;
    agent_pw_buf msg = {0};
    if (fake_pr_parse_pods(spec, &l, err, sizeof err) < 0 || agent_pw_encode_list(&l, &msg) < 0) {
        fprintf(stderr, "bench: %s\n", err);
        return 1;
    }
    agent_pr_list_free(&l);
    fake_pr *f = fake_pr_start(err, sizeof err);
    if (!f || fake_pr_set_pods(f, spec, err, sizeof err) < 0) {
        fprintf(stderr, "bench: fake Pod Resources server: %s\n", err);
        return 1;
    }
    free(spec);
    double *t[3];
    for (int c = 0; c < 3; c++) t[c] = calloc((size_t)rounds, sizeof(double));
    size_t record_len = 0;
    for (int r = 0; r < rounds; r++) {
        for (int c = 0; c < 3; c++) {
            int cell = (c + r) % 3; /* rotate the order too */
            double t0 = now_ms();
            char *json = NULL;
            if (cell == 0) {
                if (agent_pw_decode_list(msg.p, msg.n, &l, err, sizeof err) == 0) agent_pr_list_free(&l);
            } else if (cell == 1) {
                if (agent_pw_decode_list(msg.p, msg.n, &l, err, sizeof err) == 0) {
                    json = agent_holdings_from_list(&l);
                    agent_pr_list_free(&l);
                }
            } else {
                json = agent_holdings_json(fake_pr_socket(f), 10000, err, sizeof err);
                if (!json) fprintf(stderr, "bench: call: %s\n", err);
            }
            t[cell][r] = now_ms() - t0;
            if (json) record_len = strlen(json);
            free(json);
        }
    }
    printf("%d pods x 8 devices: ListPodResourcesResponse %zu bytes, holdings record %zu bytes, %d rounds\n", pods,
           msg.n, record_len, rounds);
    static const char *const names[] = {"decode", "record", "call"};
    printf("%-8s %10s %10s\n", "cell", "p50 ms", "p99 ms");
    for (int c = 0; c < 3; c++) {
        qsort(t[c], (size_t)rounds, sizeof(double), cmp);
        int p99 = (int)((rounds - 1) * 0.99 + 0.5);
        printf("%-8s %10.3f %10.3f\n", names[c], t[c][rounds / 2], t[c][p99]);
        free(t[c]);
    }
    fake_pr_stop(f);
    agent_pw_buf_free(&msg);
    return 0;
}
