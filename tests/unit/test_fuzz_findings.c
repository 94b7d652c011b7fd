/* test_fuzz_findings.c -- the bugs the fuzz targets found (tests/fuzz), each as the rule it
 * broke, on real inputs; the raw inputs are also replayed from tests/fuzz/crashes/.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ext_helpers.h"
#include "model/dra.h"
#include "sim/trace.h"

/* Two instances of one MIG profile that land on the same GPU: filter passes the node, and
 * bind must then place the pod (policy_materialize used to compare the grant count with the
 * choice's distinct GPUs, so the pod was refused with "the chosen placement no longer fits"
 * on every retry). Found by the filter target's filter-then-bind check. */
TEST(fuzz_finding_two_mig_instances_on_one_gpu_bind) {
    ext_state *st = demo_state();
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    const char *res[] = {"\"nvidia.com/mig-2g.10gb\":\"2\"", "\"nvidia.com/mig-2g.10gb\":\"2\""};
    for (int i = 0; i < 2; i++) {
        char uid[32], name[32], err[512];
        snprintf(uid, sizeof uid, "uid-pair-%d", i);
        snprintf(name, sizeof name, "pair-%d", i);
        char *pod = pod_json(name, uid, 0, res[i], NULL, NULL);
        const char *names[] = {"gpu-a100-mig"};
        char *args = args_names(pod, names, 1);
        cJSON *r = call_verb(&v, ext_verb_filter, args, NULL);
        CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(r, "NodeNames")), 1);
        cJSON_Delete(r);
        free(args);
        free(pod);
        bind_pod(&v, name, uid, "gpu-a100-mig", err, sizeof err);
        CHECK_STR(err, "");
    }
    char why[256];
    CHECK_MSG(all_nodes_consistent(st, why, sizeof why), "%s", why);
    ext_state_free(st);
}

/* A Pod UID longer than the cache keeps: filter used to pass the nodes while remembering
 * nothing, so bind then said the pod was "unknown: tessera saw it in no filter call". Now
 * filter and preempt refuse it with a 400 that names the field. Found by the filter target. */
TEST(fuzz_finding_overlong_pod_uid_is_a_clear_error) {
    ext_state *st = demo_state();
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    char uid[100];
    memset(uid, '4', 80);
    uid[80] = 0;
    char *pod = pod_json("long-uid", uid, 0, "\"nvidia.com/gpu\":\"1\"", NULL, NULL);
    const char *names[] = {"gpu-a100-whole"};
    char *args = args_names(pod, names, 1);
    int status = 0;
    cJSON *r = call_verb(&v, ext_verb_filter, args, &status);
    CHECK_INT(status, 400);
    const cJSON *e = cJSON_GetObjectItem(r, "Error");
    CHECK(cJSON_IsString(e));
    CHECK_CONTAINS(e->valuestring, "Pod.metadata.uid: 80 characters");
    cJSON_Delete(r);
    free(args);
    free(pod);
    ext_state_free(st);
}

/* A trace duration below a millisecond was accepted, but sim_trace_write keeps three
 * decimals, so `tessera-sim convert` wrote "duration": 0.000 and could not read its own
 * output. Durations under 0.001 s are now refused on reading. Found by the trace target. */
TEST(fuzz_finding_sub_millisecond_duration_is_refused) {
    const char *pod = "\"pod\": {\"resources\": {\"requests\": {\"nvidia.com/gpu\": \"1\"}}}";
    char json[512], err[256] = "";
    snprintf(json, sizeof json,
             "{\"workloads\": [{\"id\": \"a\", \"kind\": \"batch\", \"arrival\": 1, \"duration\": 9841E-21, %s}]}", pod);
    sim_trace *t = sim_trace_from_json(json, strlen(json), err, sizeof err);
    CHECK(t == NULL);
    CHECK_CONTAINS(err, "workloads[0].duration: must be > 0 seconds (at least 0.001");
    snprintf(json, sizeof json,
             "{\"workloads\": [{\"id\": \"a\", \"kind\": \"batch\", \"arrival\": 1, \"duration\": 0.001, %s}]}", pod);
    t = sim_trace_from_json(json, strlen(json), err, sizeof err);
    CHECK_MSG(t != NULL, "%s", err);
    sim_trace_free(t);
}

/* The API's int64 fields beyond the C type they are read into: a ResourceSlice's
 * resourceSliceCount of 1333333333333333 was converted to int (undefined behaviour; UBSan
 * stopped the dra_slice target). Out-of-range numbers are clamped so they keep their meaning:
 * such a pool is never complete, a huge memory capacity stays huge, a huge device count is
 * a claim tessera cannot judge. */
TEST(fuzz_finding_dra_numbers_beyond_int_are_clamped) {
    cJSON *o = cJSON_Parse(
        "{\"metadata\":{\"name\":\"s\"},\"spec\":{\"driver\":\"gpu.nvidia.com\",\"nodeName\":\"both\","
        "\"pool\":{\"name\":\"both\",\"generation\":1e300,\"resourceSliceCount\":1333333333333333},"
        "\"devices\":[{\"name\":\"gpu-0\",\"attributes\":{\"type\":{\"string\":\"gpu\"}},"
        "\"capacity\":{\"memory\":{\"value\":\"4Pi\"}}}]}}");
    model_dra_slice s;
    char err[256];
    CHECK_INT(model_dra_slice_parse(o, &s, err, sizeof err), 0);
    CHECK_INT(s.count, INT_MAX);
    CHECK(s.generation == (INT64_C(1) << 53));
    CHECK_INT(s.ndev, 1);
    CHECK_INT(s.dev[0].memory_mib, INT_MAX);
    model_dra_slice_clear(&s);
    cJSON_Delete(o);
    cJSON *spec = cJSON_Parse("{\"devices\":{\"requests\":[{\"name\":\"gpu\",\"exactly\":{\"deviceClassName\":"
                              "\"gpu.nvidia.com\",\"count\":1e15}}]}}");
    model_request r;
    memset(&r, 0, sizeof r);
    char why[256] = "";
    CHECK_INT(model_dra_request(spec, NULL, NULL, &r, why, sizeof why), MODEL_DRA_UNJUDGED);
    CHECK_MSG(strstr(why, "count") != NULL, "%s", why);
    cJSON_Delete(spec);
}

/* A ResourceSlice whose spec.devices is an object, not a list: room was counted only for a
 * list's items, but the loop also walks an object's members, so its devices were written
 * through a NULL pointer (a crash of the extender on one malformed slice). Now a clear error. */
TEST(fuzz_finding_dra_slice_devices_not_a_list_is_refused) {
    cJSON *o = cJSON_Parse("{\"metadata\":{\"name\":\"s\"},\"spec\":{\"driver\":\"gpu.nvidia.com\",\"nodeName\":"
                           "\"both\",\"pool\":{\"name\":\"both\"},\"devices\":{\"a\":{\"name\":\"gpu-0\"}}}}");
    model_dra_slice s;
    char err[256] = "";
    CHECK_INT(model_dra_slice_parse(o, &s, err, sizeof err), -1);
    CHECK_MSG(strstr(err, "spec.devices is not a list") != NULL, "%s", err);
    CHECK_INT(s.ndev, 0);
    model_dra_slice_clear(&s);
    cJSON_Delete(o);
}

/* A ResourceSlice that publishes no devices (spec.devices absent), the only slice of its node:
 * merging copied zero devices from a NULL array into a NULL buffer (undefined behaviour that
 * UBSan stopped the dra_watch target on). The node keeps its device-plugin GPUs and no DRA view. */
TEST(fuzz_finding_dra_slice_without_devices_merges_cleanly) {
    ext_state_config cfg = {.standalone = true};
    ext_state *st = ext_state_new(&cfg);
    char *node = test_fixture("dra/node-both.json", NULL);
    cJSON *no = cJSON_Parse(node);
    ext_state_apply(st, KUBE_NODE, KUBE_ADDED, no);
    cJSON *sl = cJSON_Parse("{\"kind\":\"ResourceSlice\",\"metadata\":{\"name\":\"both-empty\"},\"spec\":{\"driver\":"
                            "\"gpu.nvidia.com\",\"nodeName\":\"both\",\"pool\":{\"name\":\"both\",\"generation\":1,"
                            "\"resourceSliceCount\":1}}}");
    ext_state_apply(st, KUBE_RESOURCESLICE, KUBE_ADDED, sl);
    ext_state_lock(st);
    const ext_node *n = ext_state_node(st, "both");
    CHECK(n && n->m);
    if (n && n->m) {
        CHECK_INT(n->m->ngpus, 2);
        CHECK(!n->m->has_dra);
    }
    ext_state_unlock(st);
    cJSON_Delete(sl);
    cJSON_Delete(no);
    free(node);
    ext_state_free(st);
}
