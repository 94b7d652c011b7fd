/* test_request.c -- Pod objects into model_request: the real kube-scheduler pods,
 * every request form, the container summing rules, and every rejection (checked to
 * name its field).
 */
#include "tests/unit/harness.h"
#include "model/catalog.h"
#include "model/request.h"

#include <stdlib.h>

/* Inline pods are written with ' for " to stay readable. */
static int parse_q(const char *squoted, model_request *r, char *err, size_t errlen) {
    char json[4096];
    snprintf(json, sizeof json, "%s", squoted);
    for (char *p = json; *p; p++)
        if (*p == '\'') *p = '"';
    return model_request_from_pod_json(json, strlen(json), r, err, errlen);
}

/* A pod with one container whose requests are `reqs` and annotations `anns`. */
static int parse_pod(const char *anns, const char *reqs, model_request *r, char *err, size_t errlen) {
    char pod[4096];
    snprintf(pod, sizeof pod,
             "{'metadata':{'name':'p','annotations':{%s}},"
             "'spec':{'containers':[{'name':'c','resources':{'requests':{%s}}}]}}",
             anns, reqs);
    return parse_q(pod, r, err, errlen);
}

static int parse_fixture(const char *rel, model_request *r, char *err, size_t errlen) {
    size_t len;
    char *text = test_fixture(rel, &len);
    int rc = model_request_from_pod_json(text, len, r, err, errlen);
    free(text);
    return rc;
}

/* The Pod inside an extender request body. */
static int parse_sample_pod(const char *rel, model_request *r, char *err, size_t errlen) {
    size_t len;
    char *text = test_fixture(rel, &len);
    cJSON *body = cJSON_ParseWithLength(text, len);
    free(text);
    if (!body) return -2;
    int rc = model_request_from_pod(cJSON_GetObjectItemCaseSensitive(body, "Pod"), r, err, errlen);
    cJSON_Delete(body);
    return rc;
}

#define CHECK_OK(call)                                                                  \
    do {                                                                                \
        err[0] = 0;                                                                     \
        int rc_ = (call);                                                               \
        CHECK_MSG(rc_ == 0, "%s failed: %s", #call, err);                               \
    } while (0)

#define CHECK_REJECT(call, needle)                                                      \
    do {                                                                                \
        err[0] = 0;                                                                     \
        int rc_ = (call);                                                               \
        CHECK_MSG(rc_ == -1, "%s was accepted", #call);                                 \
        CHECK_CONTAINS(err, needle);                                                    \
    } while (0)

#define CHECK_FORMAT(r, want)                                                           \
    do {                                                                                \
        char f_[256];                                                                   \
        model_request_format(&(r), f_, sizeof f_);                                      \
        CHECK_STR(f_, want);                                                            \
    } while (0)

static int max_catalog_memory(void) {
    const model_catalog *cat = model_catalog_default();
    int max = 0;
    for (int i = 0; i < model_catalog_count(cat); i++)
        if (model_catalog_at(cat, i)->memory_mib > max) max = model_catalog_at(cat, i)->memory_mib;
    return max;
}

/* ---- real kube-scheduler pods ---- */

TEST(request_real_filter_pod_is_cpu_only) {
    model_request r;
    char err[256];
    CHECK_OK(parse_sample_pod("extender-samples/node-list/01-filter.request.json", &r, err, sizeof err));
    CHECK_INT(r.kind, MODEL_REQ_NONE);
    CHECK_INT(r.count, 0);
    CHECK(!model_request_wants_gpu(&r));
    CHECK_INT(r.cpu_milli, 100);
    CHECK_INT(r.memory_bytes, 64LL * 1024 * 1024);
    CHECK_INT(r.priority, 0);
    CHECK_FORMAT(r, "no GPU");
}

TEST(request_real_preempt_and_filter_pods_carry_priority) {
    model_request r;
    char err[256];
    CHECK_OK(parse_sample_pod("extender-samples/node-list/04-preempt.request.json", &r, err, sizeof err));
    CHECK_INT(r.priority, 1000);
    CHECK_INT(r.kind, MODEL_REQ_NONE);
    CHECK_INT(r.cpu_milli, 0);
    CHECK_INT(r.memory_bytes, 0);
    CHECK_OK(parse_sample_pod("extender-samples/node-list/05-filter.request.json", &r, err, sizeof err));
    CHECK_INT(r.priority, 1000);
    CHECK_OK(parse_sample_pod("extender-samples/node-cache/01-filter.request.json", &r, err, sizeof err));
    CHECK_INT(r.cpu_milli, 100);
}

TEST(request_real_preempt_victims_parse) {
    size_t len;
    char *text = test_fixture("extender-samples/node-list/04-preempt.request.json", &len);
    cJSON *body = cJSON_ParseWithLength(text, len);
    free(text);
    CHECK(body != NULL);
    const cJSON *victims = cJSON_GetObjectItemCaseSensitive(body, "NodeNameToVictims");
    int n = 0, bad = 0, low = 0, zero = 0;
    const cJSON *node, *pod;
    cJSON_ArrayForEach(node, victims) {
        cJSON_ArrayForEach(pod, cJSON_GetObjectItemCaseSensitive(node, "Pods")) {
            model_request r;
            char err[256];
            n++;
            if (model_request_from_pod(pod, &r, err, sizeof err) != 0) bad++;
            else if (r.priority == 10) low++;
            else if (r.priority == 0) zero++;
        }
    }
    cJSON_Delete(body);
    /* two gpu-low fillers (priority 10) and gpu-pod-1 (no priority class) */
    CHECK_INT(n, 3);
    CHECK_INT(bad, 0);
    CHECK_INT(low, 2);
    CHECK_INT(zero, 1);
}

/* ---- fixtures: forms and summing rules ---- */

TEST(request_whole_from_limits_only) {
    model_request r;
    char err[256];
    CHECK_OK(parse_fixture("requests/whole-limits-only.json", &r, err, sizeof err));
    CHECK_INT(r.kind, MODEL_REQ_WHOLE);
    CHECK_INT(r.count, 2);
    CHECK(model_request_wants_gpu(&r));
    /* the request wins over the limit for cpu and memory */
    CHECK_INT(r.cpu_milli, 2000);
    CHECK_INT(r.memory_bytes, 8LL << 30);
    CHECK_INT(r.priority, 10);
    CHECK_FORMAT(r, "2 x whole GPU");
}

TEST(request_init_container_max_rule) {
    model_request r;
    char err[256];
    CHECK_OK(parse_fixture("requests/init-max.json", &r, err, sizeof err));
    /* cpu: init max(2, 3 from a limit) beats the app sum 1 */
    CHECK_INT(r.cpu_milli, 3000);
    /* memory: init 1Gi beats the app sum 600Mi */
    CHECK_INT(r.memory_bytes, 1LL << 30);
    /* GPUs: the app sum 2 beats the init container's 1 */
    CHECK_INT(r.kind, MODEL_REQ_WHOLE);
    CHECK_INT(r.count, 2);
}

TEST(request_sidecar_init_containers_add_to_app_and_later_inits) {
    model_request r;
    char err[256];
    CHECK_OK(parse_fixture("requests/sidecar.json", &r, err, sizeof err));
    /* migrate runs beside the proxy sidecar: 1.5 + 1 = 2.5 > app 1 + sidecar 1 */
    CHECK_INT(r.cpu_milli, 2500);
    CHECK_INT(r.memory_bytes, 2LL << 30);
    CHECK_INT(r.kind, MODEL_REQ_NONE);
}

TEST(request_hami_fraction_multi_gpu) {
    model_request r;
    char err[256];
    CHECK_OK(parse_fixture("requests/hami.json", &r, err, sizeof err));
    CHECK_INT(r.kind, MODEL_REQ_FRACTION);
    CHECK_INT(r.count, 2);
    CHECK_INT(r.memory_mib, 8192);
    CHECK_INT(r.compute_permille, 300);
    CHECK_INT(r.memory_permille, 0);
    CHECK_INT(r.nmodels, 2);
    CHECK_STR(r.models[0], "NVIDIA-A100-SXM4-80GB");
    CHECK_STR(r.models[1], "NVIDIA-H100-80GB-HBM3");
    CHECK_FORMAT(r, "2 x fraction (8192 MiB, 30 percent SMs) models=NVIDIA-A100-SXM4-80GB,NVIDIA-H100-80GB-HBM3");
}

TEST(request_mig_mixed_resource_is_canonicalised) {
    model_request r;
    char err[256];
    CHECK_OK(parse_fixture("requests/mig-mixed.json", &r, err, sizeof err));
    CHECK_INT(r.kind, MODEL_REQ_MIG);
    CHECK_INT(r.count, 1);
    CHECK_STR(r.mig_profile, "1g.10gb+me");
    CHECK_INT(r.isolation, MODEL_ISO_MIG);
    CHECK_FORMAT(r, "1 x mig 1g.10gb+me isolation=mig");
}

TEST(request_kai_fraction_annotation) {
    model_request r;
    char err[256];
    CHECK_OK(parse_fixture("requests/kai-fraction.json", &r, err, sizeof err));
    CHECK_INT(r.kind, MODEL_REQ_FRACTION);
    CHECK_INT(r.count, 1);
    CHECK_INT(r.memory_permille, 500);
    CHECK_INT(r.compute_permille, 500);
    CHECK_INT(r.cpu_milli, 250);
    CHECK_INT(r.memory_bytes, 1000000000);
    CHECK_FORMAT(r, "1 x fraction (50 percent memory, 50 percent SMs)");
}

/* ---- inline forms ---- */

TEST(request_whole_shared_and_mig_forms) {
    model_request r;
    char err[256];
    CHECK_OK(parse_pod("", "'nvidia.com/gpu':'4'", &r, err, sizeof err));
    CHECK_INT(r.kind, MODEL_REQ_WHOLE);
    CHECK_INT(r.count, 4);
    /* JSON numbers are quantities too; "2000m" is a whole 2 */
    CHECK_OK(parse_pod("", "'nvidia.com/gpu':3,'cpu':0.5", &r, err, sizeof err));
    CHECK_INT(r.count, 3);
    CHECK_INT(r.cpu_milli, 500);
    CHECK_OK(parse_pod("", "'nvidia.com/gpu':'2000m'", &r, err, sizeof err));
    CHECK_INT(r.count, 2);
    CHECK_OK(parse_pod("", "'nvidia.com/gpu':'16'", &r, err, sizeof err));
    CHECK_INT(r.count, 16);

    CHECK_OK(parse_pod("", "'nvidia.com/gpu.shared':'1'", &r, err, sizeof err));
    CHECK_INT(r.kind, MODEL_REQ_SHARED);
    CHECK_INT(r.count, 1);
    CHECK_FORMAT(r, "1 x replica");

    CHECK_OK(parse_pod("", "'nvidia.com/mig-3g.40gb':'1'", &r, err, sizeof err));
    CHECK_INT(r.kind, MODEL_REQ_MIG);
    CHECK_STR(r.mig_profile, "3g.40gb");
    CHECK_FORMAT(r, "1 x mig 3g.40gb");
    /* the '+' spelling is accepted too */
    CHECK_OK(parse_pod("", "'nvidia.com/mig-1g.5gb+me':'1'", &r, err, sizeof err));
    CHECK_STR(r.mig_profile, "1g.5gb+me");
}

TEST(request_mig_summed_over_containers) {
    model_request r;
    char err[256];
    CHECK_OK(parse_q("{'spec':{'containers':["
                     "{'name':'a','resources':{'limits':{'nvidia.com/mig-1g.10gb':'2'}}},"
                     "{'name':'b','resources':{'requests':{'nvidia.com/mig-1g.10gb':'1','nvidia.com/mig-2g.20gb':'0'}}}]}}",
                     &r, err, sizeof err));
    CHECK_INT(r.kind, MODEL_REQ_MIG);
    CHECK_INT(r.count, 3);
    CHECK_STR(r.mig_profile, "1g.10gb");
}

TEST(request_zero_valued_resources_are_ignored) {
    model_request r;
    char err[256];
    CHECK_OK(parse_pod("", "'nvidia.com/gpu':'0','nvidia.com/gpu.shared':'0','nvidia.com/gpucores':'0'", &r, err,
                       sizeof err));
    CHECK_INT(r.kind, MODEL_REQ_NONE);
    CHECK_INT(r.count, 0);
    CHECK_OK(parse_pod("", "'nvidia.com/mig-1g.10gb':'0','nvidia.com/gpu':'1'", &r, err, sizeof err));
    CHECK_INT(r.kind, MODEL_REQ_WHOLE);
}

TEST(request_cpu_request_and_limit_may_differ) {
    model_request r;
    char err[256];
    CHECK_OK(parse_q("{'spec':{'containers':[{'name':'a','resources':{'requests':{'cpu':'1'},'limits':{'cpu':'2',"
                     "'memory':'1.5'}}}]}}",
                     &r, err, sizeof err));
    CHECK_INT(r.cpu_milli, 1000);
    /* 1.5 bytes rounds up */
    CHECK_INT(r.memory_bytes, 2);
}

TEST(request_hami_forms) {
    model_request r;
    char err[256];
    CHECK_OK(parse_pod("", "'nvidia.com/gpumem':'4096'", &r, err, sizeof err));
    CHECK_INT(r.kind, MODEL_REQ_FRACTION);
    CHECK_INT(r.count, 1);
    CHECK_INT(r.memory_mib, 4096);
    CHECK_FORMAT(r, "1 x fraction (4096 MiB)");

    CHECK_OK(parse_pod("", "'nvidia.com/gpumem-percentage':'50','nvidia.com/gpucores':'25'", &r, err, sizeof err));
    CHECK_INT(r.kind, MODEL_REQ_FRACTION);
    CHECK_INT(r.memory_permille, 500);
    CHECK_INT(r.compute_permille, 250);
    CHECK_INT(r.memory_mib, 0);

    CHECK_OK(parse_pod("", "'nvidia.com/gpucores':'100','nvidia.com/gpumem-percentage':'1'", &r, err, sizeof err));
    CHECK_INT(r.compute_permille, 1000);
    CHECK_INT(r.memory_permille, 10);

    /* with gpu.shared: replicas, each with that share */
    CHECK_OK(parse_pod("", "'nvidia.com/gpu.shared':'3','nvidia.com/gpumem':'2048'", &r, err, sizeof err));
    CHECK_INT(r.kind, MODEL_REQ_SHARED);
    CHECK_INT(r.count, 3);
    CHECK_INT(r.memory_mib, 2048);
    CHECK_FORMAT(r, "3 x replica (2048 MiB)");

    /* the largest GPU's memory is allowed */
    char reqs[128];
    snprintf(reqs, sizeof reqs, "'nvidia.com/gpumem':'%d'", max_catalog_memory());
    CHECK_OK(parse_pod("", reqs, &r, err, sizeof err));
    CHECK_INT(r.memory_mib, max_catalog_memory());
}

/* nvidia.com/gpumem counts MiB (HAMi); a byte suffix says bytes (README "Request forms"). */
TEST(request_gpumem_units) {
    model_request r;
    char err[512];
    /* bare: MiB, as HAMi reads it; "20k" is how the API server writes 20000 back */
    CHECK_OK(parse_pod("", "'nvidia.com/gpumem':'20000'", &r, err, sizeof err));
    CHECK_INT(r.memory_mib, 20000);
    CHECK_OK(parse_pod("", "'nvidia.com/gpumem':'20k'", &r, err, sizeof err));
    CHECK_INT(r.memory_mib, 20000);
    CHECK_OK(parse_pod("", "'nvidia.com/gpumem':'2e4'", &r, err, sizeof err));
    CHECK_INT(r.memory_mib, 20000);
    /* binary suffixes: bytes */
    CHECK_OK(parse_pod("", "'nvidia.com/gpumem':'20Gi'", &r, err, sizeof err));
    CHECK_INT(r.kind, MODEL_REQ_FRACTION);
    CHECK_INT(r.memory_mib, 20480);
    CHECK_FORMAT(r, "1 x fraction (20480 MiB)");
    CHECK_OK(parse_pod("", "'nvidia.com/gpumem':'1536Mi'", &r, err, sizeof err));
    CHECK_INT(r.memory_mib, 1536);
    CHECK_OK(parse_pod("", "'nvidia.com/gpumem':'0.5Gi'", &r, err, sizeof err));
    CHECK_INT(r.memory_mib, 512);
    /* per container, then summed: 8Gi + 4096 MiB */
    CHECK_OK(parse_q("{'spec':{'containers':[{'resources':{'limits':{'nvidia.com/gpumem':'8Gi'}}},"
                     "{'resources':{'limits':{'nvidia.com/gpumem':'4096'}}}]}}", &r, err, sizeof err));
    CHECK_INT(r.memory_mib, 12288);
    /* with nvidia.com/gpu: N, on each of N GPUs */
    CHECK_OK(parse_pod("", "'nvidia.com/gpumem':'10Gi','nvidia.com/gpu':'2'", &r, err, sizeof err));
    CHECK_INT(r.count, 2);
    CHECK_INT(r.memory_mib, 10240);
    /* decimal byte suffixes: bytes too, whole MiB only ("16384M" is 15625 MiB) */
    CHECK_OK(parse_pod("", "'nvidia.com/gpumem':'16384M'", &r, err, sizeof err));
    CHECK_INT(r.memory_mib, 15625);
    CHECK_REJECT(parse_pod("", "'nvidia.com/gpumem':'20G'", &r, err, sizeof err),
                 "nvidia.com/gpumem\"]: \"20G\" is bytes, and not a whole number of MiB "
                 "(nvidia.com/gpumem counts MiB: write 19074, which holds it)");
    /* not a whole number of MiB */
    CHECK_REJECT(parse_pod("", "'nvidia.com/gpumem':'1.5Mi'", &r, err, sizeof err),
                 "\"1.5Mi\" is bytes, and not a whole number of MiB (nvidia.com/gpumem counts MiB: write 2, which holds it)");
    CHECK_REJECT(parse_pod("", "'nvidia.com/gpumem':'1000Ki'", &r, err, sizeof err), "not a whole number of MiB");
    CHECK_REJECT(parse_pod("", "'nvidia.com/gpumem':'0.5'", &r, err, sizeof err),
                 "\"0.5\" is not a whole number; it counts MiB, e.g. 20480 (or 20Gi)");
    CHECK_REJECT(parse_pod("", "'nvidia.com/gpumem':'20GB'", &r, err, sizeof err), "it counts MiB, e.g. 20480 (or 20Gi)");
    /* huge: larger than any GPU, in any unit; a count of bytes written bare gets its MiB suggested */
    char want[160];
    snprintf(want, sizeof want, "nvidia.com/gpumem: 21474836480 MiB per GPU is larger than any GPU holds (largest: %d "
             "MiB); it counts MiB: for 21474836480 bytes write 20480", max_catalog_memory());
    CHECK_REJECT(parse_pod("", "'nvidia.com/gpumem':'21474836480'", &r, err, sizeof err), want);
    snprintf(want, sizeof want, "nvidia.com/gpumem: 1048576 MiB per GPU is larger than any GPU holds (largest: %d MiB)",
             max_catalog_memory());
    CHECK_REJECT(parse_pod("", "'nvidia.com/gpumem':'1Ti'", &r, err, sizeof err), want);
    CHECK_MSG(!strstr(err, "bytes"), "1Ti is bytes already: %s", err);
    CHECK_REJECT(parse_pod("", "'nvidia.com/gpumem':'8Ei'", &r, err, sizeof err), "larger than any GPU holds");
    CHECK_REJECT(parse_pod("", "'nvidia.com/gpumem':'99999999999999999999Ei'", &r, err, sizeof err), "is too large");
    CHECK_REJECT(parse_pod("", "'nvidia.com/gpumem':'-1Gi'", &r, err, sizeof err), "must not be negative");
    /* a percentage where a fraction is meant: the share suggested */
    CHECK_REJECT(parse_pod("'tessera.io/gpu-fraction':'25%'", "'tessera.io/share':'1'", &r, err, sizeof err),
                 "\"25%\" is not a share of one GPU in (0, 1] (a share, not a percentage: write 0.25)");
    /* KAI's gpu-memory annotation stays a plain number of MiB, with the number suggested */
    CHECK_REJECT(parse_pod("'gpu-memory':'16Gi'", "'tessera.io/share':'1'", &r, err, sizeof err),
                 "\"16Gi\" is not a whole number of MiB greater than 0 (gpu-memory counts MiB: write 16384)");
}

TEST(request_fraction_annotations) {
    model_request r;
    char err[256];
    CHECK_OK(parse_pod("'tessera.io/gpu-fraction':'0.3'", "", &r, err, sizeof err));
    CHECK_INT(r.kind, MODEL_REQ_FRACTION);
    CHECK_INT(r.count, 1);
    CHECK_INT(r.memory_permille, 300);
    CHECK_INT(r.compute_permille, 300);
    CHECK_OK(parse_pod("'tessera.io/gpu-fraction':'1'", "", &r, err, sizeof err));
    CHECK_INT(r.memory_permille, 1000);
    CHECK_OK(parse_pod("'tessera.io/gpu-fraction':'1.000'", "", &r, err, sizeof err));
    CHECK_INT(r.memory_permille, 1000);
    CHECK_OK(parse_pod("'gpu-fraction':'.25'", "", &r, err, sizeof err));
    CHECK_INT(r.compute_permille, 250);
    /* rounded to permille, at least 1 */
    CHECK_OK(parse_pod("'gpu-fraction':'0.3333'", "", &r, err, sizeof err));
    CHECK_INT(r.memory_permille, 333);
    CHECK_FORMAT(r, "1 x fraction (33.3 percent memory, 33.3 percent SMs)");
    CHECK_OK(parse_pod("'gpu-fraction':'0.0005'", "", &r, err, sizeof err));
    CHECK_INT(r.memory_permille, 1);
    CHECK_OK(parse_pod("'gpu-fraction':'0.00001'", "", &r, err, sizeof err));
    CHECK_INT(r.memory_permille, 1);
    CHECK_OK(parse_pod("'gpu-fraction':'0.9996'", "", &r, err, sizeof err));
    CHECK_INT(r.memory_permille, 1000);

    CHECK_OK(parse_pod("'gpu-memory':'4096'", "'cpu':'1'", &r, err, sizeof err));
    CHECK_INT(r.kind, MODEL_REQ_FRACTION);
    CHECK_INT(r.count, 1);
    CHECK_INT(r.memory_mib, 4096);
    CHECK_INT(r.compute_permille, 0);
    /* KAI memory plus HAMi cores: two different dimensions */
    CHECK_OK(parse_pod("'gpu-memory':'4096'", "'nvidia.com/gpucores':'20'", &r, err, sizeof err));
    CHECK_INT(r.compute_permille, 200);
    CHECK_FORMAT(r, "1 x fraction (4096 MiB, 20 percent SMs)");
}

TEST(request_models_and_isolation) {
    model_request r;
    char err[256];
    CHECK_OK(parse_pod("'tessera.io/gpu-models':' A100 , ,H100-80GB,, ','tessera.io/isolation':'any'",
                       "'nvidia.com/gpu':'1'", &r, err, sizeof err));
    CHECK_INT(r.nmodels, 2);
    CHECK_STR(r.models[0], "A100");
    CHECK_STR(r.models[1], "H100-80GB");
    CHECK_INT(r.isolation, MODEL_ISO_ANY);
    CHECK_FORMAT(r, "1 x whole GPU models=A100,H100-80GB isolation=any");

    CHECK_OK(parse_pod("'tessera.io/gpu-models':''", "", &r, err, sizeof err));
    CHECK_INT(r.nmodels, 0);
    CHECK_OK(parse_pod("'tessera.io/gpu-models':'a,b,c,d,e,f,g,h'", "", &r, err, sizeof err));
    CHECK_INT(r.nmodels, 8);
    CHECK_STR(r.models[7], "h");
    char anns[200];
    snprintf(anns, sizeof anns, "'tessera.io/gpu-models':'%s'",
             "M23456789012345678901234567890123456789012345678901234567890123"); /* 63 chars */
    CHECK_OK(parse_pod(anns, "", &r, err, sizeof err));
    CHECK_INT(strlen(r.models[0]), 63);

    CHECK_OK(parse_pod("'tessera.io/isolation':'mps'", "'nvidia.com/gpu.shared':'1'", &r, err, sizeof err));
    CHECK_INT(r.isolation, MODEL_ISO_MPS);
    CHECK_OK(parse_pod("'tessera.io/isolation':'timeslice'", "'nvidia.com/gpu':'1'", &r, err, sizeof err));
    CHECK_INT(r.isolation, MODEL_ISO_TIMESLICE);
    CHECK_OK(parse_pod("'tessera.io/isolation':'mig'", "'nvidia.com/gpu':'1'", &r, err, sizeof err));
    CHECK_INT(r.isolation, MODEL_ISO_MIG);
    CHECK_OK(parse_pod("'tessera.io/isolation':'mig','gpu-fraction':'0.1'", "", &r, err, sizeof err));
    CHECK_INT(r.kind, MODEL_REQ_FRACTION);
    CHECK_OK(parse_pod("'tessera.io/isolation':'any'", "'nvidia.com/mig-1g.10gb':'1'", &r, err, sizeof err));
    CHECK_INT(r.kind, MODEL_REQ_MIG);
}

TEST(request_topology) {
    model_request r;
    char err[256];
    CHECK_OK(parse_pod("", "'nvidia.com/gpu':'4'", &r, err, sizeof err));
    CHECK_INT(r.topology, MODEL_ALIGN_UNKNOWN);   /* default any: prefer, never require */
    CHECK_INT(model_request_required_align(&r), MODEL_ALIGN_UNKNOWN);
    CHECK_OK(parse_pod("'tessera.io/topology':'nvlink'", "'nvidia.com/gpu':'4'", &r, err, sizeof err));
    CHECK_INT(r.topology, MODEL_ALIGN_NVLINK);
    CHECK_INT(model_request_required_align(&r), MODEL_ALIGN_NVLINK);
    CHECK_FORMAT(r, "4 x whole GPU topology=nvlink");
    CHECK_OK(parse_pod("'tessera.io/topology':'numa'", "'nvidia.com/gpu.shared':'2'", &r, err, sizeof err));
    CHECK_INT(model_request_required_align(&r), MODEL_ALIGN_NUMA);
    CHECK_OK(parse_pod("'tessera.io/topology':'any'", "'nvidia.com/gpu':'2'", &r, err, sizeof err));
    CHECK_INT(r.topology, MODEL_ALIGN_UNKNOWN);
    CHECK_FORMAT(r, "2 x whole GPU");
    /* One GPU: accepted, nothing to require. */
    CHECK_OK(parse_pod("'tessera.io/topology':'nvlink'", "'nvidia.com/gpu':'1'", &r, err, sizeof err));
    CHECK_INT(r.topology, MODEL_ALIGN_NVLINK);
    CHECK_INT(model_request_required_align(&r), MODEL_ALIGN_UNKNOWN);
    /* Fractions on two GPUs (HAMi nvidia.com/gpu: 2 with gpumem) are two GPUs. */
    CHECK_OK(parse_pod("'tessera.io/topology':'nvlink'", "'nvidia.com/gpu':'2','nvidia.com/gpumem':'1000'", &r, err,
                       sizeof err));
    CHECK_INT(r.kind, MODEL_REQ_FRACTION);
    CHECK_INT(model_request_required_align(&r), MODEL_ALIGN_NVLINK);
    model_request other = r;
    other.topology = MODEL_ALIGN_NUMA;
    CHECK(!model_request_same(&r, &other));
    const char *bad[] = {"pcie", "NVLink", "", "nvlink,numa", "none"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char anns[96];
        snprintf(anns, sizeof anns, "'tessera.io/topology':'%s'", bad[i]);
        CHECK(parse_pod(anns, "'nvidia.com/gpu':'2'", &r, err, sizeof err) != 0);
        CHECK_CONTAINS(err, "tessera.io/topology");
        CHECK_CONTAINS(err, "is not one of nvlink, numa, any");
    }
}

TEST(request_format_and_names) {
    model_request r;
    memset(&r, 0, sizeof r);
    r.kind = MODEL_REQ_FRACTION;
    r.count = 1;
    r.memory_mib = 8192;
    r.compute_permille = 300;
    CHECK_FORMAT(r, "1 x fraction (8192 MiB, 30 percent SMs)");
    r.memory_permille = 125;
    r.compute_permille = 305;
    CHECK_FORMAT(r, "1 x fraction (8192 MiB, 12.5 percent memory, 30.5 percent SMs)");
    r.isolation = MODEL_ISO_MIG;
    r.nmodels = 2;
    strcpy(r.models[0], "A");
    strcpy(r.models[1], "B");
    r.memory_mib = 0;
    r.memory_permille = 0;
    r.compute_permille = 0;
    CHECK_FORMAT(r, "1 x fraction models=A,B isolation=mig");

    /* a short buffer truncates, stays terminated, never overruns */
    char small[8];
    memset(small, 'x', sizeof small);
    model_request_format(&r, small, sizeof small);
    CHECK_STR(small, "1 x fra");
    model_request_format(&r, small, 0);
    CHECK_STR(small, "1 x fra");

    CHECK_STR(model_isolation_name(MODEL_ISO_DEFAULT), "default");
    CHECK_STR(model_isolation_name(MODEL_ISO_ANY), "any");
    CHECK_STR(model_isolation_name(MODEL_ISO_MIG), "mig");
    CHECK_STR(model_isolation_name(MODEL_ISO_MPS), "mps");
    CHECK_STR(model_isolation_name(MODEL_ISO_TIMESLICE), "timeslice");
    CHECK_STR(model_isolation_name((model_isolation)99), "unknown");
}

/* ---- rejections ---- */

TEST(request_rejects_malformed_documents) {
    model_request r;
    char err[256];
    CHECK_REJECT(model_request_from_pod_json("{nope", 5, &r, err, sizeof err), "malformed JSON");
    CHECK_REJECT(model_request_from_pod_json(NULL, 0, &r, err, sizeof err), "malformed JSON");
    CHECK_REJECT(model_request_from_pod_json("[]", 2, &r, err, sizeof err), "expected a Pod object");
    CHECK_REJECT(model_request_from_pod(NULL, &r, err, sizeof err), "expected a Pod object");
    CHECK_REJECT(parse_q("{}", &r, err, sizeof err), "spec: expected an object");
    CHECK_REJECT(parse_q("{'metadata':3,'spec':{'containers':[]}}", &r, err, sizeof err), "metadata: expected an object");
    CHECK_REJECT(parse_q("{'metadata':{'annotations':[]},'spec':{'containers':[]}}", &r, err, sizeof err),
                 "metadata.annotations: expected an object");
    CHECK_REJECT(parse_q("{'spec':{}}", &r, err, sizeof err), "spec.containers: expected an array");
    CHECK_REJECT(parse_q("{'spec':{'containers':{}}}", &r, err, sizeof err), "spec.containers: expected an array");
    CHECK_REJECT(parse_q("{'spec':{'containers':[],'initContainers':7}}", &r, err, sizeof err),
                 "spec.initContainers: expected an array");
    CHECK_REJECT(parse_q("{'spec':{'containers':['x']}}", &r, err, sizeof err),
                 "spec.containers[0]: expected a container object");
    CHECK_REJECT(parse_q("{'spec':{'containers':[{},{'resources':[]}]}}", &r, err, sizeof err),
                 "spec.containers[1].resources: expected an object");
    CHECK_REJECT(parse_q("{'spec':{'containers':[{'resources':{'limits':'2'}}]}}", &r, err, sizeof err),
                 "spec.containers[0].resources.limits: expected an object");
    CHECK_REJECT(parse_q("{'spec':{'containers':[],'initContainers':[{'restartPolicy':1}]}}", &r, err, sizeof err),
                 "spec.initContainers[0].restartPolicy: expected a string");
    CHECK_REJECT(parse_q("{'spec':{'containers':[],'priority':'high'}}", &r, err, sizeof err), "spec.priority");
    CHECK_REJECT(parse_q("{'spec':{'containers':[],'priority':1.5}}", &r, err, sizeof err), "spec.priority");
    CHECK_REJECT(parse_q("{'spec':{'containers':[],'priority':1e12}}", &r, err, sizeof err), "spec.priority");
    CHECK_OK(parse_q("{'spec':{'containers':[],'priority':-5}}", &r, err, sizeof err));
    CHECK_INT(r.priority, -5);
}

TEST(request_rejects_bad_quantities_naming_the_path) {
    model_request r;
    char err[256];
    CHECK_REJECT(parse_pod("", "'nvidia.com/gpu':{'n':1}", &r, err, sizeof err),
                 "spec.containers[0].resources.requests[\"nvidia.com/gpu\"]: expected a quantity string");
    CHECK_REJECT(parse_pod("", "'example.com/foo':true", &r, err, sizeof err),
                 "requests[\"example.com/foo\"]: expected a quantity string");
    CHECK_REJECT(parse_pod("", "'cpu':'abc'", &r, err, sizeof err),
                 "spec.containers[0].resources.requests[\"cpu\"]: \"abc\" is not a quantity");
    CHECK_REJECT(parse_pod("", "'memory':'-1Gi'", &r, err, sizeof err), "requests[\"memory\"]: \"-1Gi\" must not be negative");
    CHECK_REJECT(parse_pod("", "'nvidia.com/gpu':'500m'", &r, err, sizeof err),
                 "requests[\"nvidia.com/gpu\"]: \"500m\" is not a whole number; for a share of one GPU use the "
                 "tessera.io/gpu-fraction annotation");
    CHECK_REJECT(parse_pod("", "'nvidia.com/gpu.shared':'1.5'", &r, err, sizeof err),
                 "requests[\"nvidia.com/gpu.shared\"]: \"1.5\" is not a whole number");
    CHECK_REJECT(parse_pod("", "'nvidia.com/gpu':'-1'", &r, err, sizeof err), "must not be negative");
    CHECK_REJECT(parse_q("{'spec':{'containers':[{'resources':{'limits':{'nvidia.com/gpumem':'1Gix'}}}]}}", &r, err,
                         sizeof err),
                 "spec.containers[0].resources.limits[\"nvidia.com/gpumem\"]");
    CHECK_REJECT(parse_q("{'spec':{'containers':[{},{'resources':{'requests':{'nvidia.com/gpu':'1'},"
                         "'limits':{'nvidia.com/gpu':'2'}}}]}}",
                         &r, err, sizeof err),
                 "spec.containers[1].resources: nvidia.com/gpu request (1) and limit (2) must be equal");
    CHECK_REJECT(parse_q("{'spec':{'containers':[{'resources':{'requests':{'memory':'9e15'}}},"
                         "{'resources':{'requests':{'memory':'9e15'}}}]}}",
                         &r, err, sizeof err),
                 "total memory overflows");
}

TEST(request_rejects_mig_misuse) {
    model_request r;
    char err[256];
    CHECK_REJECT(parse_pod("", "'nvidia.com/mig-9g.99gb':'1'", &r, err, sizeof err),
                 "nvidia.com/mig-9g.99gb: unknown MIG profile");
    CHECK_REJECT(parse_pod("", "'nvidia.com/mig-':'1'", &r, err, sizeof err), "unknown MIG profile");
    CHECK_REJECT(parse_pod("", "'nvidia.com/mig-1c.3g.20gb':'1'", &r, err, sizeof err),
                 "nvidia.com/mig-1c.3g.20gb: compute-instance profiles are not supported");
    CHECK_REJECT(parse_pod("", "'nvidia.com/mig-1g.10gb':'1','nvidia.com/mig-2g.20gb':'1'", &r, err, sizeof err),
                 "one MIG profile, and it already asks for nvidia.com/mig-1g.10gb");
    CHECK_REJECT(parse_q("{'spec':{'containers':[{'resources':{'limits':{'nvidia.com/mig-1g.10gb':'1'}}}],"
                         "'initContainers':[{'resources':{'limits':{'nvidia.com/mig-3g.40gb':'1'}}}]}}",
                         &r, err, sizeof err),
                 "spec.containers[0].resources.limits[\"nvidia.com/mig-1g.10gb\"]: a pod may ask for one MIG profile");
    const char *others[][2] = {
        {"", "'nvidia.com/gpu':'1'"},
        {"", "'nvidia.com/gpu.shared':'1'"},
        {"", "'nvidia.com/gpumem':'1024'"},
        {"", "'nvidia.com/gpumem-percentage':'10'"},
        {"", "'nvidia.com/gpucores':'10'"},
        {"'tessera.io/gpu-fraction':'0.5'", ""},
        {"'gpu-fraction':'0.5'", ""},
        {"'gpu-memory':'1024'", ""},
    };
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        char reqs[256];
        snprintf(reqs, sizeof reqs, "'nvidia.com/mig-1g.10gb':'1'%s%s", others[i][1][0] ? "," : "", others[i][1]);
        CHECK_REJECT(parse_pod(others[i][0], reqs, &r, err, sizeof err),
                     "nvidia.com/mig-1g.10gb cannot be combined with");
        CHECK_CONTAINS(err, "a MIG profile fixes memory and compute");
    }
    CHECK_REJECT(parse_pod("", "'nvidia.com/mig-1g.10gb':'129'", &r, err, sizeof err),
                 "nvidia.com/mig-1g.10gb: 129 is more than any node can give one pod (at most 128)");
    /* Layered sharing: timeslice/mps accept a replica of a shared instance; the .shared name asks
     * for a replica outright, which isolation mig cannot serve. */
    CHECK_INT(parse_pod("'tessera.io/isolation':'timeslice'", "'nvidia.com/mig-1g.10gb':'2'", &r, err, sizeof err), 0);
    CHECK_INT(r.kind, MODEL_REQ_MIG);
    CHECK(!r.mig_replica);
    CHECK_INT(r.isolation, MODEL_ISO_TIMESLICE);
    CHECK_INT(parse_pod("", "'nvidia.com/mig-1g.10gb.shared':'1'", &r, err, sizeof err), 0);
    CHECK_INT(r.kind, MODEL_REQ_MIG);
    CHECK(r.mig_replica);
    CHECK_STR(r.mig_profile, "1g.10gb");
    char buf[128];
    model_request_format(&r, buf, sizeof buf);
    CHECK_STR(buf, "1 x mig 1g.10gb replica");
    CHECK_INT(parse_pod("", "'nvidia.com/mig-1g.10gb.me.shared':'1'", &r, err, sizeof err), 0);
    CHECK_STR(r.mig_profile, "1g.10gb+me");
    CHECK(r.mig_replica);
    CHECK_REJECT(parse_pod("'tessera.io/isolation':'mig'", "'nvidia.com/mig-1g.10gb.shared':'1'", &r, err, sizeof err),
                 "tessera.io/isolation: mig cannot serve nvidia.com/mig-1g.10gb.shared");
    CHECK_REJECT(parse_pod("", "'nvidia.com/mig-1g.10gb.shared':'1','nvidia.com/gpu':'1'", &r, err, sizeof err),
                 "nvidia.com/mig-1g.10gb.shared cannot be combined with nvidia.com/gpu");
    model_request a, b2;
    CHECK_INT(parse_pod("", "'nvidia.com/mig-1g.10gb.shared':'1'", &a, err, sizeof err), 0);
    CHECK_INT(parse_pod("", "'nvidia.com/mig-1g.10gb':'1'", &b2, err, sizeof err), 0);
    CHECK(!model_request_same(&a, &b2));
}

TEST(request_rejects_conflicting_gpu_forms) {
    model_request r;
    char err[256];
    CHECK_REJECT(parse_pod("", "'nvidia.com/gpu':'1','nvidia.com/gpu.shared':'1'", &r, err, sizeof err),
                 "nvidia.com/gpu.shared cannot be combined with nvidia.com/gpu");
    CHECK_REJECT(parse_pod("", "'nvidia.com/gpumem':'1024','nvidia.com/gpumem-percentage':'10'", &r, err, sizeof err),
                 "nvidia.com/gpumem and nvidia.com/gpumem-percentage both give the GPU memory");
    CHECK_REJECT(parse_pod("", "'nvidia.com/gpumem-percentage':'101'", &r, err, sizeof err),
                 "nvidia.com/gpumem-percentage: 101 is not a percentage in 1..100");
    CHECK_REJECT(parse_pod("", "'nvidia.com/gpucores':'150'", &r, err, sizeof err),
                 "nvidia.com/gpucores: 150 is not a percentage in 1..100");
    char reqs[128], want[128];
    snprintf(reqs, sizeof reqs, "'nvidia.com/gpumem':'%d'", max_catalog_memory() + 1);
    snprintf(want, sizeof want, "nvidia.com/gpumem: %d MiB per GPU is larger than any GPU holds (largest: %d MiB)",
             max_catalog_memory() + 1, max_catalog_memory());
    CHECK_REJECT(parse_pod("", reqs, &r, err, sizeof err), want);
    CHECK_REJECT(parse_pod("", "'nvidia.com/gpu':'17'", &r, err, sizeof err),
                 "nvidia.com/gpu: 17 is more than any node can give one pod (at most 16)");
    CHECK_REJECT(parse_pod("", "'nvidia.com/gpu':'17','nvidia.com/gpucores':'10'", &r, err, sizeof err),
                 "nvidia.com/gpu: 17 is more");
    CHECK_REJECT(parse_pod("", "'nvidia.com/gpu.shared':'17'", &r, err, sizeof err), "nvidia.com/gpu.shared: 17 is more");
    CHECK_REJECT(parse_pod("'tessera.io/isolation':'mig'", "'nvidia.com/gpu.shared':'1'", &r, err, sizeof err),
                 "tessera.io/isolation: mig cannot serve nvidia.com/gpu.shared");
}

TEST(request_rejects_bad_fraction_annotations) {
    model_request r;
    char err[256];
    const char *bad[] = {"abc", "0", "0.0", "1.5", "1.0001", "-0.2", "", " 0.5", "0.5x", "2", "1e-1", "."};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char anns[128];
        snprintf(anns, sizeof anns, "'tessera.io/gpu-fraction':'%s'", bad[i]);
        CHECK_REJECT(parse_pod(anns, "", &r, err, sizeof err), "metadata.annotations[\"tessera.io/gpu-fraction\"]");
        CHECK_CONTAINS(err, "(0, 1]");
    }
    CHECK_REJECT(parse_pod("'gpu-fraction':'1.5'", "", &r, err, sizeof err),
                 "metadata.annotations[\"gpu-fraction\"]: \"1.5\" is not a share of one GPU in (0, 1]");

    CHECK_REJECT(parse_pod("'tessera.io/gpu-fraction':'0.5'", "'nvidia.com/gpu':'1'", &r, err, sizeof err),
                 "tessera.io/gpu-fraction cannot be combined with nvidia.com/gpu: ");
    CHECK_REJECT(parse_pod("'gpu-fraction':'0.5'", "'nvidia.com/gpu':'1'", &r, err, sizeof err),
                 "gpu-fraction cannot be combined with nvidia.com/gpu");
    CHECK_REJECT(parse_pod("'gpu-fraction':'0.5'", "'nvidia.com/gpu.shared':'1'", &r, err, sizeof err),
                 "gpu-fraction cannot be combined with nvidia.com/gpu.shared");
    CHECK_REJECT(parse_pod("'gpu-fraction':'0.5','tessera.io/gpu-fraction':'0.5'", "", &r, err, sizeof err),
                 "tessera.io/gpu-fraction and gpu-fraction both give the share");
    CHECK_REJECT(parse_pod("'gpu-fraction':'0.5','gpu-memory':'1024'", "", &r, err, sizeof err),
                 "gpu-fraction and gpu-memory both say how much of the GPU to take");
    CHECK_REJECT(parse_pod("'tessera.io/gpu-fraction':'0.5'", "'nvidia.com/gpumem':'1024'", &r, err, sizeof err),
                 "tessera.io/gpu-fraction and nvidia.com/gpumem both say");
    CHECK_REJECT(parse_pod("'tessera.io/gpu-fraction':'0.5'", "'nvidia.com/gpumem-percentage':'5'", &r, err, sizeof err),
                 "tessera.io/gpu-fraction and nvidia.com/gpumem-percentage both say");
    CHECK_REJECT(parse_pod("'tessera.io/gpu-fraction':'0.5'", "'nvidia.com/gpucores':'5'", &r, err, sizeof err),
                 "tessera.io/gpu-fraction and nvidia.com/gpucores both say");
}

TEST(request_rejects_bad_kai_memory_and_annotations) {
    model_request r;
    char err[256];
    const char *bad[] = {"abc", "0", "1.5", "-1", "", "1Gi", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char anns[128];
        snprintf(anns, sizeof anns, "'gpu-memory':'%s'", bad[i]);
        CHECK_REJECT(parse_pod(anns, "", &r, err, sizeof err), "metadata.annotations[\"gpu-memory\"]");
    }
    CHECK_CONTAINS(err, "larger than any GPU holds");
    CHECK_REJECT(parse_pod("'gpu-memory':'abc'", "", &r, err, sizeof err), "is not a whole number of MiB greater than 0");
    CHECK_REJECT(parse_pod("'gpu-memory':'1024'", "'nvidia.com/gpu':'1'", &r, err, sizeof err),
                 "gpu-memory cannot be combined with nvidia.com/gpu");
    CHECK_REJECT(parse_pod("'gpu-memory':'1024'", "'nvidia.com/gpumem':'1024'", &r, err, sizeof err),
                 "gpu-memory and nvidia.com/gpumem both say");
    CHECK_REJECT(parse_pod("'gpu-memory':'1024'", "'nvidia.com/gpumem-percentage':'10'", &r, err, sizeof err),
                 "gpu-memory and nvidia.com/gpumem-percentage both say");
    char anns[128], want[128];
    snprintf(anns, sizeof anns, "'gpu-memory':'%d'", max_catalog_memory() + 1);
    snprintf(want, sizeof want, "metadata.annotations[\"gpu-memory\"]: %d MiB per GPU is larger than any GPU holds", max_catalog_memory() + 1);
    CHECK_REJECT(parse_pod(anns, "", &r, err, sizeof err), want);

    CHECK_REJECT(parse_pod("'tessera.io/gpu-fraction':0.5", "", &r, err, sizeof err),
                 "metadata.annotations[\"tessera.io/gpu-fraction\"]: expected a string");
    CHECK_REJECT(parse_pod("'tessera.io/isolation':'MIG'", "", &r, err, sizeof err),
                 "metadata.annotations[\"tessera.io/isolation\"]: \"MIG\" is not one of mig, mps, timeslice, any");
    CHECK_REJECT(parse_pod("'tessera.io/isolation':''", "", &r, err, sizeof err), "is not one of mig, mps, timeslice, any");
    CHECK_REJECT(parse_pod("'tessera.io/gpu-models':'a,b,c,d,e,f,g,h,i'", "", &r, err, sizeof err),
                 "metadata.annotations[\"tessera.io/gpu-models\"]: more than 8 models");
    snprintf(anns, sizeof anns, "'tessera.io/gpu-models':'A100,%s'",
             "M234567890123456789012345678901234567890123456789012345678901234"); /* 64 chars */
    CHECK_REJECT(parse_pod(anns, "", &r, err, sizeof err),
                 "metadata.annotations[\"tessera.io/gpu-models\"]: model \"M23456789");
    CHECK_CONTAINS(err, "is longer than 63 characters");
}

/* The webhook's marker resource tessera.io/share (issue 11) makes kube-scheduler call the
 * extender; it asks for no GPU by itself, so the request is whatever else the pod says. */
TEST(request_share_marker_with_fraction_annotation_is_the_fraction) {
    model_request r;
    char err[256] = "";
    char pod[1024];
    snprintf(pod, sizeof pod,
             "{'metadata':{'name':'p','annotations':{'tessera.io/gpu-fraction':'0.25'}},"
             "'spec':{'containers':[{'name':'c','resources':{'requests':{'tessera.io/share':'1'},"
             "'limits':{'tessera.io/share':'1'}}}]}}");
    CHECK_MSG(parse_q(pod, &r, err, sizeof err) == 0, "%s", err);
    CHECK_INT(r.kind, MODEL_REQ_FRACTION);
    CHECK_INT(r.count, 1);
    CHECK_INT(r.memory_permille, 250);
    CHECK_INT(r.compute_permille, 250);
}

TEST(request_share_marker_alone_asks_for_no_gpu) {
    model_request r;
    char err[256] = "";
    CHECK_MSG(parse_pod("", "'tessera.io/share':'1','cpu':'100m'", &r, err, sizeof err) == 0, "%s", err);
    CHECK_INT(r.kind, MODEL_REQ_NONE);
    CHECK(!model_request_wants_gpu(&r));
    CHECK_INT(r.cpu_milli, 100);
}

/* ---- tessera.io/compute-sharing and the pod's uid (MPS shares) ---- */

/* A pod with a fraction annotation, the given extra annotations, a pod-level securityContext and
 * (when init is not "") an init container before the one app container. */
static int parse_mps(const char *anns, const char *pod_sc, const char *init, const char *ctr_sc, model_request *r,
                     char *err, size_t errlen) {
    char pod[4096];
    snprintf(pod, sizeof pod,
             "{'metadata':{'name':'p','annotations':{'tessera.io/gpu-fraction':'0.25'%s%s}},"
             "'spec':{%s%s'initContainers':[%s],"
             "'containers':[{'name':'app'%s%s,'resources':{'requests':{'tessera.io/share':'1'}}}]}}",
             anns[0] ? "," : "", anns, pod_sc, pod_sc[0] ? "," : "", init, ctr_sc[0] ? "," : "", ctr_sc);
    return parse_q(pod, r, err, errlen);
}

/* The init container tessera's webhook puts first on every soft share (round-4 contract): uid 65532. */
#define SHIM_INIT "{'name':'tessera-cuda-shim','image':'tessera','command':['/usr/local/bin/tessera-reserve','--install-shim','/opt/tessera']," \
                  "'securityContext':{'runAsNonRoot':true,'runAsUser':65532,'allowPrivilegeEscalation':false}}"

TEST(request_compute_sharing_mps_and_the_pods_uid) {
    model_request r;
    char err[512];
    /* default: time-sliced, and the uid is recorded whatever the mode */
    CHECK_OK(parse_mps("", "'securityContext':{'runAsUser':1000}", "", "", &r, err, sizeof err));
    CHECK_INT(r.compute_sharing, MODEL_COMPUTE_TIMESLICE);
    CHECK_INT(r.run_as_uid, 1000);
    CHECK_OK(parse_mps("'tessera.io/compute-sharing':'timeslice'", "", "", "", &r, err, sizeof err));
    CHECK_INT(r.compute_sharing, MODEL_COMPUTE_TIMESLICE);
    CHECK_INT(r.run_as_uid, MODEL_UID_UNKNOWN);
    /* mps with the pod's uid; a container's own runAsUser overrides the pod's */
    CHECK_OK(parse_mps("'tessera.io/compute-sharing':'mps'", "'securityContext':{'runAsUser':1000}", "", "", &r, err,
                       sizeof err));
    CHECK_INT(r.kind, MODEL_REQ_FRACTION);
    CHECK_INT(r.compute_sharing, MODEL_COMPUTE_MPS);
    CHECK_INT(r.run_as_uid, 1000);
    CHECK_FORMAT(r, "1 x fraction (25 percent memory, 25 percent SMs) mps uid=1000");
    CHECK_OK(parse_mps("'tessera.io/compute-sharing':'mps'", "'securityContext':{'runAsUser':1000}", "",
                       "'securityContext':{'runAsUser':2000}", &r, err, sizeof err));
    CHECK_INT(r.run_as_uid, 2000);
    CHECK_OK(parse_mps("'tessera.io/compute-sharing':'mps'", "", "", "'securityContext':{'runAsUser':0}", &r, err,
                       sizeof err));
    CHECK_INT(r.run_as_uid, 0);   /* root is a uid like any other */
    /* the webhook's shim installer runs as 65532 and no CUDA: it does not count */
    CHECK_OK(parse_mps("'tessera.io/compute-sharing':'mps'", "'securityContext':{'runAsUser':1000}", SHIM_INIT, "", &r,
                       err, sizeof err));
    CHECK_INT(r.run_as_uid, 1000);
    /* ... but a user's init container of another uid does */
    CHECK_REJECT(parse_mps("'tessera.io/compute-sharing':'mps'", "'securityContext':{'runAsUser':1000}",
                           "{'name':'setup','securityContext':{'runAsUser':3000}}", "", &r, err, sizeof err),
                 "spec.initContainers[0] runs as uid 3000 and spec.containers[0] as uid 1000");
    CHECK_CONTAINS(err, "nvidia-cuda-mps-control(1)");
    CHECK_CONTAINS(err, "metadata.annotations[\"tessera.io/compute-sharing\"]");
    /* the same pod time-sliced is fine: its uid is just unknown */
    CHECK_OK(parse_mps("", "'securityContext':{'runAsUser':1000}", "{'name':'setup','securityContext':{'runAsUser':3000}}",
                       "", &r, err, sizeof err));
    CHECK_INT(r.run_as_uid, MODEL_UID_UNKNOWN);
    /* no uid anywhere: the image's USER, which tessera cannot see */
    CHECK_REJECT(parse_mps("'tessera.io/compute-sharing':'mps'", "", "", "", &r, err, sizeof err),
                 "mps needs the uid the pod's CUDA processes run as, and spec.containers[0] sets none");
    CHECK_CONTAINS(err, "spec.securityContext.runAsUser");
    CHECK_CONTAINS(err, "a client of another uid waits until the running server's clients are all gone");
    CHECK(!strchr(err, '%'));
}

TEST(request_compute_sharing_refusals_name_the_field_and_rule) {
    model_request r;
    char err[512];
    const char *uid = "'securityContext':{'runAsUser':1000}";
    CHECK_REJECT(parse_mps("'tessera.io/compute-sharing':'MPS'", uid, "", "", &r, err, sizeof err),
                 "metadata.annotations[\"tessera.io/compute-sharing\"]: \"MPS\" is not one of mps, timeslice");
    CHECK_REJECT(parse_mps("'tessera.io/compute-sharing':'mps','tessera.io/isolation':'mig'", uid, "", "", &r, err,
                           sizeof err),
                 "cannot be combined with tessera.io/isolation: mig");
    CHECK_REJECT(parse_mps("'tessera.io/compute-sharing':'timeslice','tessera.io/isolation':'mig'", uid, "", "", &r, err,
                           sizeof err),
                 "cannot be combined with tessera.io/isolation: mig");
    CHECK_REJECT(parse_mps("'tessera.io/compute-sharing':'mps','tessera.io/isolation':'timeslice'", uid, "", "", &r, err,
                           sizeof err),
                 "mps contradicts tessera.io/isolation: timeslice");
    CHECK_REJECT(parse_mps("'tessera.io/compute-sharing':'mps','tessera.io/isolation':'mps'", uid, "", "", &r, err,
                           sizeof err),
                 "ask for different things");
    CHECK_REJECT(parse_mps("'tessera.io/compute-sharing':'timeslice','tessera.io/isolation':'mps'", uid, "", "", &r, err,
                           sizeof err),
                 "timeslice contradicts tessera.io/isolation: mps");
    CHECK_REJECT(parse_mps("'tessera.io/compute-sharing':'mps','tessera.io/isolation':'any'", uid, "", "", &r, err,
                           sizeof err),
                 "cannot be combined with tessera.io/isolation: any");
    /* timeslice says what isolation timeslice/any already allow */
    CHECK_OK(parse_mps("'tessera.io/compute-sharing':'timeslice','tessera.io/isolation':'any'", uid, "", "", &r, err,
                       sizeof err));
    CHECK_OK(parse_mps("'tessera.io/compute-sharing':'timeslice','tessera.io/isolation':'timeslice'", uid, "", "", &r,
                       err, sizeof err));
    /* other request kinds */
    CHECK_REJECT(parse_pod("'tessera.io/compute-sharing':'mps'", "'nvidia.com/gpu':'2'", &r, err, sizeof err),
                 "applies to a share of one GPU");
    CHECK_CONTAINS(err, "this pod asks for 2 x whole GPU");
    CHECK_REJECT(parse_pod("'tessera.io/compute-sharing':'timeslice'", "'nvidia.com/gpu.shared':'1'", &r, err, sizeof err),
                 "this pod asks for 1 x replica");
    CHECK_REJECT(parse_pod("'tessera.io/compute-sharing':'mps'", "'nvidia.com/mig-1g.10gb':'1'", &r, err, sizeof err),
                 "this pod asks for 1 x mig 1g.10gb");
    CHECK_REJECT(parse_pod("'tessera.io/compute-sharing':'mps'", "'cpu':'1'", &r, err, sizeof err),
                 "this pod asks for no GPU");
    /* every fraction form takes it (the HAMi forms, KAI's memory) */
    const char *sc = "'securityContext':{'runAsUser':7}";
    char pod[1024];
    const char *forms[][2] = {{"", "'nvidia.com/gpumem':'8192'"}, {"", "'nvidia.com/gpumem-percentage':'30'"},
                              {"", "'nvidia.com/gpucores':'30'"}, {"'gpu-memory':'8192',", "'cpu':'1'"},
                              {"'gpu-fraction':'0.5',", "'cpu':'1'"}, {"", "'nvidia.com/gpu':'2','nvidia.com/gpumem':'8192'"}};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        snprintf(pod, sizeof pod,
                 "{'metadata':{'annotations':{%s'tessera.io/compute-sharing':'mps'}},'spec':{%s,'containers':[{'name':'c',"
                 "'resources':{'requests':{%s}}}]}}", forms[i][0], sc, forms[i][1]);
        CHECK_OK(parse_q(pod, &r, err, sizeof err));
        CHECK_INT(r.kind, MODEL_REQ_FRACTION);
        CHECK_INT(r.compute_sharing, MODEL_COMPUTE_MPS);
        CHECK_INT(r.run_as_uid, 7);
    }
    /* runAsUser is read strictly, MPS or not, as the API server validates it */
    CHECK_REJECT(parse_mps("", "'securityContext':{'runAsUser':'1000'}", "", "", &r, err, sizeof err),
                 "spec.securityContext.runAsUser: expected a uid, a whole number in 0..2147483647");
    CHECK_REJECT(parse_mps("", "", "", "'securityContext':{'runAsUser':-1}", &r, err, sizeof err),
                 "spec.containers[0].securityContext.runAsUser: expected a uid");
    CHECK_REJECT(parse_mps("", "", "", "'securityContext':{'runAsUser':2147483648}", &r, err, sizeof err),
                 "expected a uid");
    CHECK_REJECT(parse_mps("", "", "", "'securityContext':{'runAsUser':1.5}", &r, err, sizeof err), "expected a uid");
    CHECK_REJECT(parse_mps("", "'securityContext':[]", "", "", &r, err, sizeof err),
                 "spec.securityContext: expected an object");
    CHECK_OK(parse_mps("", "'securityContext':{'runAsUser':null}", "", "'securityContext':null", &r, err, sizeof err));
    CHECK_REJECT(parse_pod("'tessera.io/compute-sharing':7", "'cpu':'1'", &r, err, sizeof err),
                 "metadata.annotations[\"tessera.io/compute-sharing\"]: expected a string");
}

TEST(request_compute_sharing_is_part_of_the_request) {
    model_request a, b;
    char err[512];
    CHECK_OK(parse_mps("'tessera.io/compute-sharing':'mps'", "'securityContext':{'runAsUser':1000}", "", "", &a, err,
                       sizeof err));
    CHECK_OK(parse_mps("'tessera.io/compute-sharing':'mps'", "'securityContext':{'runAsUser':1001}", "", "", &b, err,
                       sizeof err));
    CHECK(!model_request_same(&a, &b));   /* another uid is another request */
    CHECK_OK(parse_mps("", "'securityContext':{'runAsUser':1000}", "", "", &b, err, sizeof err));
    CHECK(!model_request_same(&a, &b));   /* time-sliced */
    b = a;
    CHECK(model_request_same(&a, &b));
    /* reservation delivery forbids device-plugin MPS replicas, not tessera's MPS shares */
    model_request_for_reservation_delivery(&b);
    CHECK_INT(b.compute_sharing, MODEL_COMPUTE_MPS);
}
