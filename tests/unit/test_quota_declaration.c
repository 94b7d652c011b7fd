/* test_quota_declaration.c -- issue 30: quotas charged for this cluster's GPUs, not the catalog's
 * largest (README, Quotas). The webhook with the extender's synced mirror declares the most a pod
 * could hold on the GPUs the mirror holds (and its tessera.io/gpu-models allows); before the mirror
 * has synced, or without one, the catalog's rule, and the log and /metrics say which. Filter and bind
 * refuse a node whose GPUs would charge a pod more than it declared (a larger GPU that joined later),
 * naming both numbers, while pods declared by the catalog's rule (before this change) still fit. And
 * the point of it all: a ResourceQuota of 4 x 80 GiB admits four whole-GPU pods on a cluster of
 * A100-80GB, where the catalog's rule admitted one. Nodes are the fixtures' GFD-labelled ones.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "ext_helpers.h"
#include "tests/support/json_patch.h"
#include "extender/base64.h"
#include "extender/metrics.h"
#include "extender/webhook.h"
#include "model/charge.h"
#include "model/request.h"

/* obj[key] = the string val, whether or not obj had the key (cJSON_ReplaceItemInObject leaks its item when not). */
static void set_str(cJSON *obj, const char *key, const char *val) {
    cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
    cJSON_AddStringToObject(obj, key, val);
}

/* Fixture node rel as `name`; product and memory relabel it when given (a GPU the fixtures lack). */
static cJSON *node_as(const char *rel, const char *name, const char *product, const char *memory) {
    char *txt = test_fixture(rel, NULL);
    cJSON *n = cJSON_Parse(txt);
    free(txt);
    cJSON *meta = cJSON_GetObjectItem(n, "metadata"), *labels = cJSON_GetObjectItem(meta, "labels");
    set_str(meta, "name", name);
    set_str(labels, "kubernetes.io/hostname", name);
    if (product) set_str(labels, "nvidia.com/gpu.product", product);
    if (memory) set_str(labels, "nvidia.com/gpu.memory", memory);
    return n;
}

/* A synced mirror (standalone: ready once loaded) of count copies of fixture rel, named prefix-0..; a second
 * fixture rel2 the same way when given. */
static ext_state *mirror_of(const char *rel, const char *prefix, int count, const char *rel2, const char *prefix2,
                            int count2) {
    cJSON *list = cJSON_CreateObject(), *items = cJSON_AddArrayToObject(list, "items");
    cJSON_AddStringToObject(list, "kind", "NodeList");
    char name[64];
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < (k ? count2 : count); i++) {
            snprintf(name, sizeof name, "%s-%d", k ? prefix2 : prefix, i);
            cJSON_AddItemToArray(items, node_as(k ? rel2 : rel, name, NULL, NULL));
        }
    char *s = cJSON_PrintUnformatted(list);
    cJSON_Delete(list);
    ext_state *st = standalone_state(s);
    free(s);
    return st;
}

/* The pod (limits and annotations as JSON members) after tessera's webhook admitted it (caller frees); NULL
 * when refused or not patched. */
static cJSON *admit(const ext_webhook_config *cfg, const char *limits, const char *anns) {
    char body[2048];
    snprintf(body, sizeof body,
             "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"r-1\","
             "\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"},\"namespace\":\"team-a\",\"operation\":\"CREATE\","
             "\"object\":{\"metadata\":{\"name\":\"train\",\"namespace\":\"team-a\",\"uid\":\"u-train\",\"annotations\":{%s}},"
             "\"spec\":{\"schedulerName\":\"tessera-scheduler\",\"containers\":[{\"name\":\"main\",\"image\":\"x\","
             "\"resources\":{\"limits\":{%s}}}]}}}}",
             anns, limits);
    ext_reply r;
    ext_webhook_mutate(cfg, body, strlen(body), &r);
    cJSON *rev = r.status == 200 && r.body ? cJSON_Parse(r.body) : NULL;
    ext_reply_free(&r);
    cJSON *root = cJSON_Parse(body), *pod = cJSON_DetachItemFromObject(cJSON_GetObjectItem(root, "request"), "object");
    cJSON_Delete(root);
    const cJSON *p = cJSON_GetObjectItem(cJSON_GetObjectItem(rev, "response"), "patch");
    char *ops_txt = cJSON_IsString(p) ? ext_base64_decode(p->valuestring, strlen(p->valuestring), NULL) : NULL;
    cJSON *ops = ops_txt ? cJSON_Parse(ops_txt) : NULL;
    if (!ops || json_patch_apply(pod, ops) != 0) {
        cJSON_Delete(pod);
        pod = NULL;
    }
    free(ops_txt);
    cJSON_Delete(ops);
    cJSON_Delete(rev);
    return pod;
}

/* What the admitted pod declares (the webhook's values, read back as the model reads them). */
static model_request declared_of(const cJSON *pod) {
    model_request r;
    char err[256];
    if (!pod || model_request_from_pod(pod, &r, err, sizeof err) != 0) memset(&r, 0, sizeof r);
    return r;
}

/* The webhook's declaration for a pod: milli and MiB, -1 each when it was refused. */
static void declare(const ext_webhook_config *cfg, const char *limits, const char *anns, long long *milli,
                    long long *mib) {
    cJSON *pod = admit(cfg, limits, anns);
    model_request r = declared_of(pod);
    *milli = r.charge_declared ? r.declared_milli : -1;
    *mib = r.charge_declared ? r.declared_mib : -1;
    cJSON_Delete(pod);
}

/* What the extender logged, for the event=quota-declared lines. */
static char logged[4096];
static void keep_log(void *user, kube_log_level lvl, const char *line) {
    (void)user;
    (void)lvl;
    size_t o = strlen(logged);
    if (o + strlen(line) + 2 < sizeof logged) snprintf(logged + o, sizeof logged - o, "%s\n", line);
}

static uint64_t count_of(ext_webhook_rule rule) {
    uint64_t d[EXT_DECL_N];
    ext_webhook_declarations(d);
    return d[rule];
}

TEST(quota_webhook_declares_for_the_a100s_of_a_synced_mirror) {
    ext_state *st = mirror_of("nodes/plain-a100-80gb-x8.json", "a100", 3, NULL, NULL, 0);
    ext_webhook_config cfg;
    ext_webhook_config_defaults(&cfg);
    cfg.mirror = st;
    static const struct { const char *limits, *anns; long long milli, mib; } rows[] = {
        {"\"nvidia.com/gpu\":\"1\"", "", 1000, 81920},            /* the catalog's rule: 183359 (a B200) */
        {"\"nvidia.com/gpu\":\"2\"", "", 2000, 163840},
        {"", "\"tessera.io/gpu-fraction\":\"0.25\"", 250, 20480}, /* catalog: 45840 */
        {"\"nvidia.com/gpumem\":\"20000\"", "", 244, 20000},      /* its share of an A100-80GB (catalog: an A10's, 868) */
        {"\"nvidia.com/gpucores\":\"30\"", "", 300, 24576},
        {"\"nvidia.com/gpu\":\"1\"", "\"tessera.io/isolation\":\"timeslice\"", 500, 40960},   /* a replica of 2 at least */
    };
    uint64_t before = count_of(EXT_DECL_CLUSTER);
    kube_log_set_level(KUBE_LOG_DEBUG);   /* (info when the rule changes, debug for every pod) */
    logged[0] = 0;
    kube_log_set_hook(keep_log, NULL);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        long long milli, mib;
        declare(&cfg, rows[i].limits, rows[i].anns, &milli, &mib);
        CHECK_MSG(milli == rows[i].milli && mib == rows[i].mib, "row %zu (%s %s): declared %lld milli %lld MiB, expected %lld %lld",
                  i, rows[i].limits, rows[i].anns, milli, mib, rows[i].milli, rows[i].mib);
    }
    kube_log_set_hook(NULL, NULL);
    kube_log_set_level(KUBE_LOG_OFF);
    CHECK_INT(count_of(EXT_DECL_CLUSTER) - before, 6);
    CHECK_CONTAINS(logged, "event=quota-declared rule=cluster why=synced pod=team-a/train gpu_milli=1000 gpu_memory_mib=81920");
    /* /metrics says which rule declared */
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    static ext_metrics m;
    size_t len;
    char *text = ext_metrics_render(&m, &v, NULL, &len);
    char want[128];
    snprintf(want, sizeof want, "tessera_webhook_declarations_total{rule=\"cluster\",why=\"synced\"} %llu\n",
             (unsigned long long)count_of(EXT_DECL_CLUSTER));
    CHECK_CONTAINS(text, want);
    CHECK_CONTAINS(text, "tessera_webhook_declarations_total{rule=\"catalog\",why=\"not-synced\"} ");
    free(text);
    ext_state_free(st);
}

TEST(quota_webhook_declares_what_gpu_models_allows_among_the_clusters_gpus) {
    /* A100-80GB (81920 MiB) and H100-80GB (81559 MiB) nodes */
    ext_state *st = mirror_of("nodes/plain-a100-80gb-x8.json", "a100", 2, "nodes/annotated-h100-x4.json", "h100", 2);
    ext_webhook_config cfg;
    ext_webhook_config_defaults(&cfg);
    cfg.mirror = st;
    long long milli, mib;
    declare(&cfg, "\"nvidia.com/gpu\":\"1\"", "", &milli, &mib);
    CHECK_INT(mib, 81920);   /* the larger of the two */
    declare(&cfg, "\"nvidia.com/gpu\":\"1\"", "\"tessera.io/gpu-models\":\"H100-80GB\"", &milli, &mib);
    CHECK_INT(milli, 1000);
    CHECK_INT(mib, 81559);
    declare(&cfg, "", "\"gpu-memory\":\"16384\",\"tessera.io/gpu-models\":\"H100-80GB\"", &milli, &mib);
    CHECK_INT(milli, 200);   /* 16384 of 81559 */
    CHECK_INT(mib, 16384);
    /* a product the cluster does not have: no node here could take it now, one may join: the catalog's rule */
    uint64_t before = count_of(EXT_DECL_CATALOG_NO_GPU);
    declare(&cfg, "\"nvidia.com/gpu\":\"1\"", "\"tessera.io/gpu-models\":\"NVIDIA-B200\"", &milli, &mib);
    CHECK_INT(milli, 1000);
    CHECK_INT(mib, 183359);
    CHECK_INT(count_of(EXT_DECL_CATALOG_NO_GPU) - before, 1);
    ext_state_free(st);
}

TEST(quota_webhook_declares_a_mig_instance_of_the_clusters_product) {
    /* A100-80GB nodes under MIG mixed: 3g.40gb is 40192 MiB there (the catalog's largest 3g.40gb, H100's, 40320) */
    ext_state *st = mirror_of("nodes/a100-mig-mixed-timeslice.json", "mig", 2, NULL, NULL, 0);
    ext_webhook_config cfg;
    ext_webhook_config_defaults(&cfg);
    cfg.mirror = st;
    long long milli, mib;
    declare(&cfg, "\"nvidia.com/mig-3g.40gb\":\"1\"", "", &milli, &mib);
    CHECK_INT(milli, 429);
    CHECK_INT(mib, 40192);
    declare(&cfg, "\"nvidia.com/mig-1g.10gb\":\"2\"", "", &milli, &mib);
    CHECK_INT(milli, 286);
    CHECK_INT(mib, 2 * 9728);   /* the A100-80GB's 1g.10gb (the README's catalog row: 2 x H100's 9984) */
    ext_state_free(st);
}

TEST(quota_webhook_falls_back_to_the_catalog_until_the_mirror_has_synced) {
    /* a cluster-mode mirror before its first list (start-up), and a webhook with none */
    ext_state_config sc = {.standalone = false};
    ext_state *st = ext_state_new(&sc);
    CHECK(!ext_state_ready(st));
    ext_webhook_config cfg;
    ext_webhook_config_defaults(&cfg);
    cfg.mirror = st;
    uint64_t unsynced = count_of(EXT_DECL_CATALOG_NOT_SYNCED), alone = count_of(EXT_DECL_CATALOG_NO_MIRROR);
    kube_log_set_level(KUBE_LOG_DEBUG);
    logged[0] = 0;
    kube_log_set_hook(keep_log, NULL);
    long long milli, mib;
    declare(&cfg, "\"nvidia.com/gpu\":\"1\"", "", &milli, &mib);
    kube_log_set_hook(NULL, NULL);
    kube_log_set_level(KUBE_LOG_OFF);
    CHECK_INT(milli, 1000);
    CHECK_INT(mib, 183359);   /* the catalog's largest GPU */
    CHECK_INT(count_of(EXT_DECL_CATALOG_NOT_SYNCED) - unsynced, 1);
    CHECK_CONTAINS(logged, "rule=catalog why=not-synced");
    cfg.mirror = NULL;
    declare(&cfg, "", "\"tessera.io/gpu-fraction\":\"0.25\"", &milli, &mib);
    CHECK_INT(mib, 45840);
    CHECK_INT(count_of(EXT_DECL_CATALOG_NO_MIRROR) - alone, 1);
    ext_state_free(st);
}

/* Filter the pod over the nodes; the reason it gives node `who` ("" when it passed). */
static char *filter_why(ext_verbs *v, const cJSON *pod, const char *const *names, int n, const char *who) {
    char *ptxt = cJSON_PrintUnformatted(pod);
    char *args = args_names(ptxt, names, n);
    free(ptxt);
    cJSON *r = call_verb(v, ext_verb_filter, args, NULL);
    free(args);
    const cJSON *why = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "FailedAndUnresolvableNodes"), who);
    if (!why) why = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "FailedNodes"), who);
    char *out = strdup(cJSON_IsString(why) ? why->valuestring : "");
    cJSON_Delete(r);
    return out;
}

TEST(quota_filter_refuses_a_gpu_larger_than_the_pod_declared_and_names_both_numbers) {
    ext_state *st = mirror_of("nodes/plain-a100-80gb-x8.json", "a100", 2, NULL, NULL, 0);
    ext_webhook_config cfg;
    ext_webhook_config_defaults(&cfg);
    cfg.mirror = st;
    cJSON *pod = admit(&cfg, "\"nvidia.com/gpu\":\"1\"", "");   /* declares 1000 milli, 81920 MiB */
    CHECK(pod != NULL);
    /* later a B200 node joins */
    cJSON *b200 = node_as("nodes/plain-a100-80gb-x8.json", "b200-0", "NVIDIA-B200", "183359");
    ext_state_apply(st, KUBE_NODE, KUBE_ADDED, b200);
    cJSON_Delete(b200);
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    const char *names[] = {"a100-0", "b200-0"};
    char *on_a100 = filter_why(&v, pod, names, 2, "a100-0"), *on_b200 = filter_why(&v, pod, names, 2, "b200-0");
    CHECK_STR(on_a100, "");
    CHECK_STR(on_b200, "this node's GPUs would charge 183359 MiB, more than the 81920 MiB the pod declared at admission "
                       "(tessera.io/gpu-memory-mib): a GPU larger than any this cluster had when the pod was created");
    free(on_a100);
    free(on_b200);
    /* answered from the cache the same way (the declaration is part of the request's shape) */
    on_b200 = filter_why(&v, pod, names, 2, "b200-0");
    CHECK_CONTAINS(on_b200, "more than the 81920 MiB");
    free(on_b200);
    /* bind refuses it too (a bind kube-scheduler would not send: what filter said holds at bind) */
    char err[512];
    bind_pod(&v, "train", "u-train", "b200-0", err, sizeof err);
    CHECK_CONTAINS(err, "more than the 81920 MiB the pod declared");
    bind_pod(&v, "train", "u-train", "a100-0", err, sizeof err);
    CHECK_STR(err, "");
    /* compute is checked the same way: a pod that declared 250 milli of an A100 is not given a whole GPU's worth */
    cJSON *quarter = admit(&cfg, "", "\"tessera.io/gpu-fraction\":\"0.25\",\"tessera.io/isolation\":\"timeslice\"");
    CHECK(quarter != NULL);
    CHECK_INT(declared_of(quarter).declared_milli, 500);
    cJSON_Delete(pod);
    /* A pod declared before this change, by the catalog's rule (183359 MiB): every node still takes it. */
    cfg.mirror = NULL;
    pod = admit(&cfg, "\"nvidia.com/gpu\":\"1\"", "");
    CHECK_INT(declared_of(pod).declared_mib, 183359);
    cJSON *meta = cJSON_GetObjectItem(pod, "metadata");
    set_str(meta, "uid", "u-old");
    on_a100 = filter_why(&v, pod, names, 2, "a100-0");
    on_b200 = filter_why(&v, pod, names, 2, "b200-0");
    CHECK_STR(on_a100, "");
    CHECK_STR(on_b200, "");
    free(on_a100);
    free(on_b200);
    cJSON_Delete(quarter);
    cJSON_Delete(pod);
    ext_state_free(st);
}

/* Kubernetes' ResourceQuota admission for one pod: for each resource the quota names, what the namespace's pods
 * request already plus what this one requests must stay within hard (plugin/pkg/admission/resourcequota). The
 * pod's request is its effective one, as the model reads it. true: admitted, and used grows. */
static bool quota_admits(const cJSON *pod, const long long hard[2], long long used[2]) {
    model_request r = declared_of(pod);
    long long want[2] = {r.declared_milli > 0 ? r.declared_milli : 0, r.declared_mib > 0 ? r.declared_mib : 0};
    for (int k = 0; k < 2; k++)
        if (used[k] + want[k] > hard[k]) return false;
    for (int k = 0; k < 2; k++) used[k] += want[k];
    return true;
}

TEST(quota_of_four_80gib_admits_four_whole_gpu_pods_on_a100s) {
    /* requests.tessera.io/gpu-milli: 4000, requests.tessera.io/gpu-memory-mib: 4 x 80 GiB */
    const long long hard[2] = {4000, 4 * 81920};
    ext_state *st = mirror_of("nodes/plain-a100-80gb-x8.json", "a100", 2, NULL, NULL, 0);
    ext_webhook_config cfg;
    ext_webhook_config_defaults(&cfg);
    for (int rule = 0; rule < 2; rule++) {
        cfg.mirror = rule == 0 ? st : NULL;   /* this cluster's GPUs; the catalog's */
        long long used[2] = {0, 0};
        int admitted = 0;
        for (int i = 0; i < 6; i++) {
            cJSON *pod = admit(&cfg, "\"nvidia.com/gpu\":\"1\"", "");
            CHECK(pod != NULL);
            admitted += quota_admits(pod, hard, used);
            cJSON_Delete(pod);
        }
        CHECK_MSG(admitted == (rule == 0 ? 4 : 1), "%s rule: %d of 6 whole-GPU pods admitted",
                  rule == 0 ? "cluster" : "catalog", admitted);
    }
    ext_state_free(st);
}
