/* test_podresources_holdings.c -- the tessera.io/holdings record and the allocatable list from decoded Pod Resources
 * replies, without a socket (agent/holdings.c's pure half): containers merged as a sorted union, time-sliced
 * replicas and MIG devices kept as the kubelet names them, non-nvidia resources dropped, pods sorted by
 * "ns/name", the same bytes whatever the order the kubelet lists things in, valid JSON for any string. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "agent/holdings.h"
#include "agent/protowire.h"
#include "harness.h"
#include "tests/support/fake_podresources.h"

/* The record of the pods the spec describes (fake_podresources.h's text form). */
static char *record(const char *spec) {
    agent_pr_list l;
    char err[256];
    if (fake_pr_parse_pods(spec, &l, err, sizeof err) < 0) return NULL;
    char *json = agent_holdings_from_list(&l);
    agent_pr_list_free(&l);
    return json;
}

TEST(podres_holdings_containers_merged_sorted) {
    char *j = record("default/train-1 trainer nvidia.com/gpu GPU-77b1,GPU-6a0f\n"
                     "default/train-1 loader nvidia.com/gpu GPU-6a0f\n"            /* the same GPU: once */
                     "default/train-1 loader nvidia.com/gpu GPU-0001\n"            /* a second entry */
                     "default/train-1 init-ckpt nvidia.com/mig-1g.10gb MIG-aa11-22\n");
    CHECK_STR(j, "{\"v\":1,\"pods\":{\"default/train-1\":{\"nvidia.com/gpu\":[\"GPU-0001\",\"GPU-6a0f\",\"GPU-77b1\"],"
                 "\"nvidia.com/mig-1g.10gb\":[\"MIG-aa11-22\"]}}}");
    free(j);
}

TEST(podres_holdings_replicas_and_mig_kept_as_given) {
    char *j = record("ml/notebook-3 nb nvidia.com/gpu.shared GPU-6a0f-1111::3\n"
                     "ml/notebook-3 nb nvidia.com/gpu.shared GPU-6a0f-1111::10\n"
                     "ml/infer-0 srv nvidia.com/mig-3g.40gb MIG-5f2c9c1e-0b3d-5d3e-9b7a-1c2d3e4f5a6b\n");
    /* ids sort bytewise: "::10" before "::3" (no numeric reading of ids the kubelet owns) */
    CHECK_STR(j, "{\"v\":1,\"pods\":{\"ml/infer-0\":{\"nvidia.com/mig-3g.40gb\":[\"MIG-5f2c9c1e-0b3d-5d3e-9b7a-"
                 "1c2d3e4f5a6b\"]},\"ml/notebook-3\":{\"nvidia.com/gpu.shared\":[\"GPU-6a0f-1111::10\","
                 "\"GPU-6a0f-1111::3\"]}}}");
    free(j);
}

TEST(podres_holdings_non_nvidia_dropped) {
    char *j = record("a/p c amd.com/gpu gpu-0\n"
                     "a/p c nvidia.com rogue\n"              /* no '/': not an nvidia.com/ resource */
                     "a/p c nvidia.com/ empty-name\n"
                     "a/p c example.com/nvidia.com/gpu x\n"
                     "a/p c hugepages-2Mi y\n"
                     "b/q c intel.com/sriov vf-1\n"
                     "b/q c nvidia.com/gpu GPU-b\n"
                     "c/r c -\n");                           /* a container with no devices */
    CHECK_STR(j, "{\"v\":1,\"pods\":{\"b/q\":{\"nvidia.com/gpu\":[\"GPU-b\"]}}}");
    free(j);
    CHECK(agent_holdings_keeps("nvidia.com/gpu"));
    CHECK(!agent_holdings_keeps("nvidia.com/"));
    CHECK(!agent_holdings_keeps("NVIDIA.com/gpu"));
    CHECK(!agent_holdings_keeps(NULL));
}

TEST(podres_holdings_empty_and_sorted_bytewise) {
    char *j = record("");
    CHECK_STR(j, "{\"v\":1,\"pods\":{}}");
    free(j);
    j = record("kube-system/coredns c -\n");
    CHECK_STR(j, "{\"v\":1,\"pods\":{}}");
    free(j);
    /* '-' (0x2d) sorts before '/' (0x2f): "a-b/z" before "a/b"; namespaces before names */
    j = record("a/b c nvidia.com/gpu G1\nb/a c nvidia.com/gpu G2\na-b/z c nvidia.com/gpu G3\n");
    CHECK_STR(j, "{\"v\":1,\"pods\":{\"a-b/z\":{\"nvidia.com/gpu\":[\"G3\"]},\"a/b\":{\"nvidia.com/gpu\":[\"G1\"]},"
                 "\"b/a\":{\"nvidia.com/gpu\":[\"G2\"]}}}");
    free(j);
}

/* The order the kubelet lists pods, containers and ids in does not change a byte. */
TEST(podres_holdings_deterministic) {
    char *a = record("x/p1 c1 nvidia.com/gpu G1,G2\nx/p1 c2 nvidia.com/gpu.shared S1::0\n"
                     "y/p2 c nvidia.com/gpu G3\nx/p0 c nvidia.com/mig-1g.5gb MIG-1\n");
    char *b = record("x/p0 c nvidia.com/mig-1g.5gb MIG-1\ny/p2 c nvidia.com/gpu G3\n"
                     "x/p1 c2 nvidia.com/gpu.shared S1::0\nx/p1 c1 nvidia.com/gpu G2,G1,G2\n");
    CHECK(a && b);
    CHECK_STR(a, b);
    free(a);
    free(b);
}

/* Any name the kubelet sends (decoded strings are UTF-8 without NUL) gives valid JSON that reads back. */
TEST(podres_holdings_escaped) {
    agent_pr_list l = {0};
    char *ids[] = {"GPU-\"quoted\"", "back\\slash", "tab\there\x01", "\xc3\xa9t\xc3\xa9", ""};
    agent_pr_devices dev = {"nvidia.com/gpu", ids, 5, NULL, 0};
    agent_pr_container ct = {"c", &dev, 1};
    agent_pr_pod pod = {"we\"ird", "ns\n", &ct, 1};
    l.pods = &pod;
    l.npods = 1;
    char *j = agent_holdings_from_list(&l);
    CHECK(j != NULL);
    cJSON *doc = cJSON_Parse(j);
    free(j);
    CHECK(doc != NULL);
    cJSON *pods = cJSON_GetObjectItemCaseSensitive(doc, "pods");
    cJSON *p = cJSON_GetObjectItemCaseSensitive(pods, "ns\n/we\"ird");
    cJSON *arr = cJSON_GetObjectItemCaseSensitive(p, "nvidia.com/gpu");
    int n = cJSON_GetArraySize(arr);
    const char *first = n > 0 ? cJSON_GetArrayItem(arr, 0)->valuestring : NULL;
    char got[64];
    snprintf(got, sizeof got, "%s", first ? first : "");
    cJSON_Delete(doc);
    CHECK_INT(n, 4); /* the empty id is dropped */
    CHECK_STR(got, "GPU-\"quoted\"");
}

TEST(podres_allocatable_json) {
    agent_pr_allocatable a;
    char err[256];
    CHECK(fake_pr_parse_allocatable("nvidia.com/gpu GPU-b,GPU-a numa=1\ncpu 0,1,2\n"
                                    "nvidia.com/gpu GPU-a,GPU-c\nnvidia.com/mig-1g.10gb MIG-2,MIG-1\n",
                                    &a, err, sizeof err) == 0);
    char *j = agent_allocatable_from_reply(&a);
    agent_pr_allocatable_free(&a);
    CHECK_STR(j, "{\"nvidia.com/gpu\":[\"GPU-a\",\"GPU-b\",\"GPU-c\"],\"nvidia.com/mig-1g.10gb\":[\"MIG-1\",\"MIG-2\"]}");
    free(j);
    agent_pr_allocatable none = {0};
    j = agent_allocatable_from_reply(&none);
    CHECK_STR(j, "{}");
    free(j);
}
