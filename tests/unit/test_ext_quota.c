/* test_ext_quota.c -- per-namespace GPU usage in quota units (extender/quota.h): what bound pods
 * hold, summed per namespace with model/charge.h, in /metrics and /debug/state.
 */
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "ext_helpers.h"
#include "extender/metrics.h"
#include "extender/quota.h"
#include "extender/verbs.h"

/* A pod of namespace ns, bound to node (NULL: pending), asking res (JSON members of limits)
 * with annotations anns. */
static void add_pod(ext_state *st, const char *ns, const char *name, const char *node, const char *res, const char *anns) {
    char txt[1024];
    snprintf(txt, sizeof txt,
             "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\",\"uid\":\"uid-%s-%s\",\"annotations\":{%s}},"
             "\"spec\":{\"schedulerName\":\"tessera-scheduler\"%s%s%s,\"containers\":[{\"name\":\"c\","
             "\"resources\":{\"limits\":{%s}}}]},\"status\":{\"phase\":\"%s\"}}",
             name, ns, ns, name, anns, node ? ",\"nodeName\":\"" : "", node ? node : "", node ? "\"" : "", res,
             node ? "Running" : "Pending");
    cJSON *pod = cJSON_Parse(txt);
    ext_state_apply(st, KUBE_POD, KUBE_ADDED, pod);
    cJSON_Delete(pod);
}

TEST(ext_quota_usage_per_namespace_in_metrics_and_debug_state) {
    size_t len;
    char *nodes = test_fixture("nodes/plain-a100-80gb-x8.json", &len);
    ext_state_config cfg = {.standalone = true};
    ext_state *st = ext_state_new(&cfg);
    char err[256];
    char *list = malloc(len + 64);
    snprintf(list, len + 64, "{\"kind\":\"NodeList\",\"items\":[%s]}", nodes);
    free(nodes);
    CHECK_MSG(ext_state_load_cluster(st, list, strlen(list), err, sizeof err) == 0, "%s", err);
    free(list);
    ext_state_lock(st);
    const char *node = ext_state_node_at(st, 0)->name;
    char nodename[128];
    snprintf(nodename, sizeof nodename, "%s", node);
    ext_state_unlock(st);
    add_pod(st, "team-a", "whole", nodename, "\"nvidia.com/gpu\":\"2\"", "");
    add_pod(st, "team-a", "quarter", nodename, "", "\"tessera.io/gpu-fraction\":\"0.25\"");
    add_pod(st, "team-b", "mem", nodename, "\"nvidia.com/gpumem\":\"20000\"", "");
    add_pod(st, "team-c", "waiting", NULL, "\"nvidia.com/gpu\":\"1\"", "");   /* holds nothing yet */

    ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    static ext_metrics m;
    size_t mlen = 0;
    char *text = ext_metrics_render(&m, &v, NULL, &mlen);
    CHECK(text != NULL);
    /* team-a: 2 whole A100-80GB (2000, 163840) + a quarter (250, 20480); team-b: 20000 MiB = 244 */
    bool a = strstr(text, "tessera_namespace_gpu_milli{namespace=\"team-a\"} 2250\n") &&
             strstr(text, "tessera_namespace_gpu_memory_mib{namespace=\"team-a\"} 184320\n");
    bool b = strstr(text, "tessera_namespace_gpu_milli{namespace=\"team-b\"} 244\n") &&
             strstr(text, "tessera_namespace_gpu_memory_mib{namespace=\"team-b\"} 20000\n");
    bool c = strstr(text, "namespace=\"team-c\"") != NULL;
    free(text);
    CHECK_MSG(a && b && !c, "namespace gauges wrong (team-a %d, team-b %d, team-c listed %d)", a, b, c);

    ext_reply out = {0};
    ext_debug_state(&v, NULL, &out);
    cJSON *d = out.body ? cJSON_Parse(out.body) : NULL;
    ext_reply_free(&out);
    const cJSON *ns = cJSON_GetObjectItem(cJSON_GetObjectItem(d, "namespaces"), "team-a");
    int milli = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(ns, "gpuMilli"));
    int pods = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(ns, "pods"));
    bool no_c = !cJSON_GetObjectItem(cJSON_GetObjectItem(d, "namespaces"), "team-c");
    cJSON_Delete(d);
    ext_state_free(st);
    CHECK_INT(milli, 2250);
    CHECK_INT(pods, 2);
    CHECK(no_c);
}
