/* test_podresources_client.c -- agent/podresources.c and agent_holdings_json against the fake kubelet Pod Resources
 * server (tests/support/fake_podresources.c: real HTTP/2 and gRPC framing). What is proved here: the status in
 * HTTP/2 trailers reaches us through libcurl (a reply whose trailers lack grpc-status is refused, so a pass cannot
 * come from a default); a trailers-only error is read; every fault (UNIMPLEMENTED, a late reply, garbage, a short
 * message, a connection closed mid-reply, no socket) ends in its clear error and never a crash; the request is
 * what a gRPC server expects; and 1,000 pods x 8 devices arrive whole. */
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent/holdings.h"
#include "agent/podresources.h"
#include "harness.h"
#include "tests/support/fake_podresources.h"

#define START(f)                                                                        \
    char err_[512];                                                                     \
    fake_pr *f = fake_pr_start(err_, sizeof err_);                                      \
    CHECK_MSG(f != NULL, "fake Pod Resources server: %s", err_)

static const char *const pods_spec =
    "ml/notebook-3 main nvidia.com/gpu.shared GPU-6a0f::3\n"
    "default/train-1 trainer nvidia.com/gpu GPU-77b1,GPU-6a0f numa=0\n"
    "default/train-1 sidecar cpu-pinned-thing 3\n"
    "kube-system/coredns coredns -\n";

TEST(podres_client_list_record_through_trailers) {
    START(f);
    char err[512];
    CHECK(fake_pr_set_pods(f, pods_spec, err, sizeof err) == 0);
    char *json = agent_holdings_json(fake_pr_socket(f), 2000, err, sizeof err);
    CHECK_MSG(json != NULL, "%s", err);
    CHECK_STR(json, "{\"v\":1,\"pods\":{\"default/train-1\":{\"nvidia.com/gpu\":[\"GPU-6a0f\",\"GPU-77b1\"]},"
                    "\"ml/notebook-3\":{\"nvidia.com/gpu.shared\":[\"GPU-6a0f::3\"]}}}");
    free(json);
    CHECK_INT(fake_pr_calls(f, AGENT_PR_METHOD_LIST), 1);
    /* what a gRPC server requires of the request */
    char *ct = fake_pr_last_header(f, "content-type"), *te = fake_pr_last_header(f, "te"),
         *to = fake_pr_last_header(f, "grpc-timeout");
    int ok = ct && !strcmp(ct, "application/grpc") && te && !strcmp(te, "trailers") && to && !strcmp(to, "2000m");
    free(ct);
    free(te);
    free(to);
    CHECK(ok);
    fake_pr_stop(f);
}

/* The same reply with trailers that do not carry grpc-status is refused: so the success above read the status
 * from the trailers libcurl handed to the header callback. */
TEST(podres_client_trailers_without_status_refused) {
    START(f);
    char err[512];
    CHECK(fake_pr_set_pods(f, pods_spec, err, sizeof err) == 0);
    fake_pr_set_fault(f, NULL, FAKE_PR_NO_STATUS, 0, NULL);
    agent_pr_list l;
    int rc = agent_pr_call_list(fake_pr_socket(f), 2000, &l, err, sizeof err);
    CHECK_INT(rc, AGENT_PR_EMALFORMED);
    CHECK_CONTAINS(err, "no grpc-status");
    CHECK(l.npods == 0 && l.pods == NULL);
    fake_pr_stop(f);
}

TEST(podres_client_unimplemented_trailers_only) {
    START(f);
    char err[512];
    fake_pr_set_fault(f, AGENT_PR_METHOD_ALLOCATABLE, FAKE_PR_STATUS, AGENT_GRPC_UNIMPLEMENTED,
                      "unknown method GetAllocatableResources for service v1.PodResourcesLister");
    char *json = agent_allocatable_json(fake_pr_socket(f), 2000, err, sizeof err);
    CHECK(json == NULL);
    CHECK_CONTAINS(err, "gRPC status UNIMPLEMENTED (12): unknown method GetAllocatableResources for service "
                        "v1.PodResourcesLister");
    CHECK_CONTAINS(err, "1.23");
    /* List is unaffected; the status code is given to the caller */
    uint8_t *msg;
    size_t len;
    int status = 99;
    CHECK_INT(agent_pr_call(fake_pr_socket(f), AGENT_PR_METHOD_ALLOCATABLE, NULL, 0, 2000, &msg, &len, &status, err,
                            sizeof err), AGENT_PR_ESTATUS);
    CHECK_INT(status, 12);
    json = agent_holdings_json(fake_pr_socket(f), 2000, err, sizeof err);
    CHECK_MSG(json != NULL, "%s", err);
    CHECK_STR(json, "{\"v\":1,\"pods\":{}}");
    free(json);
    fake_pr_stop(f);
}

/* A method the server does not have: the fake answers as grpc-go does, a status with a percent-encoded message. */
TEST(podres_client_unknown_method_and_encoded_message) {
    START(f);
    char err[512];
    uint8_t *msg;
    size_t len;
    int status;
    CHECK_INT(agent_pr_call(fake_pr_socket(f), "/v1.PodResourcesLister/Watch", NULL, 0, 2000, &msg, &len, &status,
                            err, sizeof err), AGENT_PR_ESTATUS);
    CHECK_INT(status, AGENT_GRPC_UNIMPLEMENTED);
    CHECK_CONTAINS(err, "unknown method Watch for service v1.PodResourcesLister");
    fake_pr_set_fault(f, NULL, FAKE_PR_STATUS, 7, "100% denied\nby policy");
    CHECK(agent_holdings_json(fake_pr_socket(f), 2000, err, sizeof err) == NULL);
    CHECK_CONTAINS(err, "PERMISSION_DENIED (7): 100% denied?by policy");
    fake_pr_stop(f);
}

static double elapsed_ms(const struct timespec *a) {
    struct timespec b;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (double)(b.tv_sec - a->tv_sec) * 1e3 + (double)(b.tv_nsec - a->tv_nsec) / 1e6;
}

TEST(podres_client_slow_reply_times_out) {
    START(f);
    char err[512];
    CHECK(fake_pr_set_pods(f, pods_spec, err, sizeof err) == 0);
    fake_pr_set_fault(f, NULL, FAKE_PR_SLOW, 3000, NULL);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char *json = agent_holdings_json(fake_pr_socket(f), 200, err, sizeof err);
    double ms = elapsed_ms(&t0);
    CHECK(json == NULL);
    CHECK_CONTAINS(err, "no complete reply within 200 ms");
    CHECK_MSG(ms < 2500, "the call took %.0f ms, its timeout is 200 ms", ms);
    /* late but within the timeout: served */
    fake_pr_set_fault(f, NULL, FAKE_PR_SLOW, 50, NULL);
    json = agent_holdings_json(fake_pr_socket(f), 5000, err, sizeof err);
    CHECK_MSG(json != NULL, "%s", err);
    free(json);
    fake_pr_stop(f);
}

TEST(podres_client_garbage_and_short_messages) {
    START(f);
    char err[512];
    CHECK(fake_pr_set_pods(f, pods_spec, err, sizeof err) == 0);
    static const int sizes[] = {1, 7, 64, 1000, 65536};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        fake_pr_set_fault(f, NULL, FAKE_PR_GARBAGE, sizes[i], NULL);
        agent_pr_list l;
        int rc = agent_pr_call_list(fake_pr_socket(f), 2000, &l, err, sizeof err);
        /* garbage may happen to be a valid message made of unknown fields; then it decodes to no pods */
        if (rc == AGENT_PR_OK) {
            CHECK_INT(l.npods, 0);
        } else {
            CHECK_INT(rc, AGENT_PR_EMALFORMED);
            CHECK_CONTAINS(err, "malformed reply");
        }
        agent_pr_list_free(&l);
    }
    fake_pr_set_fault(f, NULL, FAKE_PR_GARBAGE, 64, NULL);
    CHECK(agent_holdings_json(fake_pr_socket(f), 2000, err, sizeof err) == NULL);
    CHECK_CONTAINS(err, "kubelet Pod Resources /v1.PodResourcesLister/List on ");
    CHECK_CONTAINS(err, "malformed reply");
    fake_pr_set_fault(f, NULL, FAKE_PR_SHORT_PREFIX, 0, NULL);
    CHECK(agent_holdings_json(fake_pr_socket(f), 2000, err, sizeof err) == NULL);
    CHECK_CONTAINS(err, "the prefix announces");
    fake_pr_stop(f);
}

TEST(podres_client_not_grpc_or_compressed) {
    START(f);
    char err[512];
    CHECK(fake_pr_set_pods(f, pods_spec, err, sizeof err) == 0);
    fake_pr_set_fault(f, NULL, FAKE_PR_HTTP_STATUS, 503, NULL);
    agent_pr_list l;
    CHECK_INT(agent_pr_call_list(fake_pr_socket(f), 2000, &l, err, sizeof err), AGENT_PR_EMALFORMED);
    CHECK_CONTAINS(err, "HTTP status 503, not a gRPC reply");
    fake_pr_set_fault(f, NULL, FAKE_PR_COMPRESSED, 0, NULL);
    CHECK_INT(agent_pr_call_list(fake_pr_socket(f), 2000, &l, err, sizeof err), AGENT_PR_EMALFORMED);
    CHECK_CONTAINS(err, "message flag 1 (compressed, which we never ask for)");
    fake_pr_stop(f);
}

TEST(podres_client_closed_mid_reply) {
    START(f);
    char err[512];
    CHECK(fake_pr_set_pods(f, pods_spec, err, sizeof err) == 0);
    fake_pr_set_fault(f, NULL, FAKE_PR_CLOSE_MID, 0, NULL);
    agent_pr_list l;
    int rc = agent_pr_call_list(fake_pr_socket(f), 2000, &l, err, sizeof err);
    CHECK_INT(rc, AGENT_PR_ETRANSPORT);
    CHECK_CONTAINS(err, "the connection failed before the reply was complete");
    fake_pr_stop(f);
}

TEST(podres_client_socket_missing) {
    char err[512];
    char *json = agent_holdings_json("/nonexistent-tessera/pod-resources/kubelet.sock", 500, err, sizeof err);
    CHECK(json == NULL);
    CHECK_CONTAINS(err, "no socket at /nonexistent-tessera/pod-resources/kubelet.sock");
    CHECK_CONTAINS(err, "hostPath");
    /* the socket file disappears while a server runs (the mount went away) */
    START(f);
    fake_pr_unlink_socket(f);
    agent_pr_list l;
    CHECK_INT(agent_pr_call_list(fake_pr_socket(f), 500, &l, err, sizeof err), AGENT_PR_ENOSOCKET);
    CHECK_CONTAINS(err, "/var/lib/kubelet/pod-resources");
    fake_pr_stop(f);
}

TEST(podres_client_connect_errors_named) {
    char err[512];
    CHECK_INT(agent_pr_connect_error(EACCES, "/s.sock", err, sizeof err), AGENT_PR_EACCESS);
    CHECK_CONTAINS(err, "permission denied connecting to /s.sock");
    CHECK_CONTAINS(err, "uid 0");
    CHECK_INT(agent_pr_connect_error(ECONNREFUSED, "/s.sock", err, sizeof err), AGENT_PR_ECONNECT);
    CHECK_CONTAINS(err, "kubelet is not running");
    CHECK_INT(agent_pr_connect_error(ENOENT, "/s.sock", err, sizeof err), AGENT_PR_ENOSOCKET);
    CHECK_STR(agent_grpc_code_name(12), "UNIMPLEMENTED");
    CHECK_STR(agent_grpc_code_name(99), "an unknown code");
}

/* A socket file nobody listens on (a kubelet that died): connection refused, in words. */
TEST(podres_client_stale_socket) {
    START(f);
    /* a socket file bound and closed without listening, beside the fake's */
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    CHECK(strlen(fake_pr_socket(f)) + 7 < sizeof sa.sun_path);
    memcpy(sa.sun_path, fake_pr_socket(f), strlen(fake_pr_socket(f)));
    strcat(sa.sun_path, ".stale");
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    close(fd);
    char err[512];
    agent_pr_list l;
    CHECK_INT(agent_pr_call_list(sa.sun_path, 500, &l, err, sizeof err), AGENT_PR_ECONNECT);
    CHECK_CONTAINS(err, "connection refused");
    unlink(sa.sun_path);
    fake_pr_stop(f);
}

TEST(podres_client_replace_at_run_time_and_count) {
    START(f);
    char err[512];
    CHECK(fake_pr_set_pods(f, "a/p c nvidia.com/gpu GPU-1\n", err, sizeof err) == 0);
    char *j1 = agent_holdings_json(fake_pr_socket(f), 2000, err, sizeof err);
    CHECK(fake_pr_set_pods(f, "a/p c nvidia.com/gpu GPU-2\nb/q c nvidia.com/mig-1g.10gb MIG-9\n", err,
                           sizeof err) == 0);
    char *j2 = agent_holdings_json(fake_pr_socket(f), 2000, err, sizeof err);
    CHECK(fake_pr_set_allocatable(f, "nvidia.com/gpu GPU-2,GPU-1 numa=0\ncpu 0,1\n", err, sizeof err) == 0);
    char *j3 = agent_allocatable_json(fake_pr_socket(f), 2000, err, sizeof err);
    int ok = j1 && j2 && j3;
    if (ok) {
        CHECK_STR(j1, "{\"v\":1,\"pods\":{\"a/p\":{\"nvidia.com/gpu\":[\"GPU-1\"]}}}");
        CHECK_STR(j2, "{\"v\":1,\"pods\":{\"a/p\":{\"nvidia.com/gpu\":[\"GPU-2\"]},"
                      "\"b/q\":{\"nvidia.com/mig-1g.10gb\":[\"MIG-9\"]}}}");
        CHECK_STR(j3, "{\"nvidia.com/gpu\":[\"GPU-1\",\"GPU-2\"]}");
    }
    free(j1);
    free(j2);
    free(j3);
    CHECK_MSG(ok, "%s", err);
    CHECK_INT(fake_pr_calls(f, AGENT_PR_METHOD_LIST), 2);
    CHECK_INT(fake_pr_calls(f, AGENT_PR_METHOD_ALLOCATABLE), 1);
    CHECK_INT(fake_pr_calls(f, NULL), 3);
    CHECK(fake_pr_set_pods(f, "no-slash c nvidia.com/gpu X\n", err, sizeof err) < 0);
    CHECK_CONTAINS(err, "line 1");
    fake_pr_stop(f);
}

/* 1,000 pods x 8 devices (two containers of 4) through the socket: every id arrives, in the record's order. */
TEST(podres_client_thousand_pods) {
    START(f);
    size_t cap = 1000 * 1024, n = 0;
    char *spec = malloc(cap), err[512];
    CHECK(spec != NULL);
    for (int p = 0; p < 1000; p++) {
        for (int c = 0; c < 2; c++) {
            n += (size_t)snprintf(spec + n, cap - n, "ns%d/pod-%04d c%d nvidia.com/gpu", p % 7, p, c);
            for (int d = 0; d < 4; d++)
                n += (size_t)snprintf(spec + n, cap - n, "%sGPU-%08d-aaaa-bbbb-cccc-%012d::%d", d ? "," : " ", p,
                                      c * 4 + d, d);
            n += (size_t)snprintf(spec + n, cap - n, "\n");
        }
    }
    int rc = fake_pr_set_pods(f, spec, err, sizeof err);
    free(spec);
    CHECK(rc == 0);
    agent_pr_list l;
    CHECK_MSG(agent_pr_call_list(fake_pr_socket(f), 10000, &l, err, sizeof err) == AGENT_PR_OK, "%s", err);
    size_t ids = 0;
    for (size_t i = 0; i < l.npods; i++)
        for (size_t c = 0; c < l.pods[i].ncontainers; c++)
            for (size_t d = 0; d < l.pods[i].containers[c].ndevices; d++) ids += l.pods[i].containers[c].devices[d].nids;
    size_t npods = l.npods;
    char name[32];
    snprintf(name, sizeof name, "%s", npods > 999 ? l.pods[999].name : "");
    char *json = agent_holdings_from_list(&l);
    agent_pr_list_free(&l);
    CHECK_INT(npods, 1000);
    CHECK_INT(ids, 8000);
    CHECK_STR(name, "pod-0999");
    CHECK(json != NULL);
    /* pod-0000 is in ns0, pod-0999 in ns5; the record starts with ns0's first pod and its 8 ids sorted */
    CHECK_MSG(!strncmp(json, "{\"v\":1,\"pods\":{\"ns0/pod-0000\":{\"nvidia.com/gpu\":[\"GPU-00000000-aaaa-bbbb-cccc-"
                              "000000000000::0\",", 78), "%.200s", json);
    CHECK_CONTAINS(json, "\"ns5/pod-0999\":{\"nvidia.com/gpu\":[\"GPU-00000999-aaaa-bbbb-cccc-000000000000::0\"");
    size_t quotes = 0;
    for (const char *s = json; (s = strstr(s, "::")); s++) quotes++;
    free(json);
    CHECK_INT(quotes, 8000);
    fake_pr_stop(f);
}
