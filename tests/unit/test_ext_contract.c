/* test_ext_contract.c -- the verbs against the bodies a real kube-scheduler v1.26.1 sent
 * (tests/fixtures/extender-samples, both nodeCacheCapable modes): reply shapes and keys must
 * be what the scheduler decodes. Those pods ask for example.com/gpumem, which is not an
 * NVIDIA resource, so tessera passes every node and echoes the victims.
 */
#include <stdlib.h>
#include <string.h>

#include "ext_helpers.h"

static char *fixture_text(const char *mode, const char *file) {
    char rel[256];
    snprintf(rel, sizeof rel, "extender-samples/%s/%s", mode, file);
    return test_fixture(rel, NULL);
}

/* The sample cluster (3 nodes without NVIDIA GPUs), from the node-list filter body. */
static ext_state *sample_state(void) {
    cJSON *req = extender_sample("node-list", "01-filter.request.json");
    char *nodes = cJSON_PrintUnformatted(cJSON_GetObjectItem(req, "Nodes"));
    ext_state *st = standalone_state(nodes);
    free(nodes);
    cJSON_Delete(req);
    return st;
}

/* Same top-level keys as the recorded reply (the scheduler's decoder would accept ours). */
static bool same_keys(const cJSON *a, const cJSON *b) {
    const cJSON *it;
    int na = 0, nb = 0;
    cJSON_ArrayForEach(it, a) {
        na++;
        if (!cJSON_GetObjectItemCaseSensitive(b, it->string)) return false;
    }
    cJSON_ArrayForEach(it, b) nb++;
    return na == nb;
}

static void check_filter(const char *mode, const char *file, const char *respfile) {
    ext_state *st = sample_state();
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    char *body = fixture_text(mode, file);   /* the exact bytes kube-scheduler sent */
    int status = 0;
    cJSON *got = call_verb(&v, ext_verb_filter, body, &status);
    cJSON *want = extender_sample(mode, respfile);
    cJSON *req = cJSON_Parse(body);
    free(body);
    bool ok = got && status == 200 && same_keys(got, want);
    const cJSON *e = cJSON_GetObjectItem(got, "Error");
    ok = ok && cJSON_IsString(e) && !e->valuestring[0];
    ok = ok && cJSON_IsObject(cJSON_GetObjectItem(got, "FailedNodes")) &&
         cJSON_GetArraySize(cJSON_GetObjectItem(got, "FailedNodes")) == 0 &&
         cJSON_IsObject(cJSON_GetObjectItem(got, "FailedAndUnresolvableNodes"));
    if (!strcmp(mode, "node-list")) {
        /* Nodes echoed unchanged (the scheduler uses them as they are), NodeNames null. */
        ok = ok && cJSON_IsNull(cJSON_GetObjectItem(got, "NodeNames")) &&
             cJSON_Compare(cJSON_GetObjectItem(cJSON_GetObjectItem(got, "Nodes"), "items"),
                           cJSON_GetObjectItem(cJSON_GetObjectItem(req, "Nodes"), "items"), 1) &&
             cJSON_Compare(cJSON_GetObjectItem(got, "Nodes"), cJSON_GetObjectItem(want, "Nodes"), 1);
    } else {
        ok = ok && cJSON_IsNull(cJSON_GetObjectItem(got, "Nodes")) &&
             cJSON_Compare(cJSON_GetObjectItem(got, "NodeNames"), cJSON_GetObjectItem(want, "NodeNames"), 1);
    }
    cJSON_Delete(got);
    cJSON_Delete(want);
    cJSON_Delete(req);
    ext_state_free(st);
    CHECK_MSG(ok, "%s/%s: reply does not match the recorded reply's shape", mode, file);
}

TEST(ext_contract_filter_node_list) { check_filter("node-list", "01-filter.request.raw.json", "01-filter.response.json"); }
TEST(ext_contract_filter_node_cache) { check_filter("node-cache", "01-filter.request.raw.json", "01-filter.response.json"); }
TEST(ext_contract_filter_nominated_node_list) { check_filter("node-list", "05-filter.request.raw.json", "05-filter.response.json"); }
TEST(ext_contract_filter_nominated_node_cache) { check_filter("node-cache", "05-filter.request.raw.json", "05-filter.response.json"); }

static void check_prioritize(const char *mode) {
    ext_state *st = sample_state();
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    char *body = fixture_text(mode, "02-prioritize.request.raw.json");
    int status = 0;
    cJSON *got = call_verb(&v, ext_verb_prioritize, body, &status);
    free(body);
    cJSON *want = extender_sample(mode, "02-prioritize.response.json");
    bool ok = status == 200 && cJSON_IsArray(got) && cJSON_GetArraySize(got) == cJSON_GetArraySize(want);
    for (int i = 0; ok && i < cJSON_GetArraySize(got); i++) {
        cJSON *g = cJSON_GetArrayItem(got, i), *w = cJSON_GetArrayItem(want, i);
        cJSON *sc = cJSON_GetObjectItemCaseSensitive(g, "Score");
        ok = same_keys(g, w) && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(g, "Host")) &&
             !strcmp(cJSON_GetObjectItem(g, "Host")->valuestring, cJSON_GetObjectItem(w, "Host")->valuestring) &&
             cJSON_IsNumber(sc) && sc->valuedouble >= 0 && sc->valuedouble <= 10 && sc->valuedouble == (int)sc->valuedouble;
    }
    cJSON_Delete(got);
    cJSON_Delete(want);
    ext_state_free(st);
    CHECK_MSG(ok, "%s prioritize: not a bare [{Host, Score 0..10}] array over the candidates", mode);
}

TEST(ext_contract_prioritize_node_list) { check_prioritize("node-list"); }
TEST(ext_contract_prioritize_node_cache) { check_prioritize("node-cache"); }

typedef struct bind_rec { int calls; char ns[64], name[64], uid[80], node[64]; bool had_ann; } bind_rec;

static int record_bind(void *user, const char *ns, const char *name, const char *uid, const char *node,
                       const cJSON *annotations, char *err, size_t errlen) {
    bind_rec *r = user;
    r->calls++;
    snprintf(r->ns, sizeof r->ns, "%s", ns);
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->uid, sizeof r->uid, "%s", uid);
    snprintf(r->node, sizeof r->node, "%s", node);
    r->had_ann = annotations && cJSON_GetObjectItem(annotations, "tessera.io/assignment");
    return 0;
}

/* The recorded sequence filter -> bind, preempt -> filter (nominated) -> bind, per mode. */
static void check_sequence(const char *mode) {
    ext_state *st = sample_state();
    ext_verbs v;
    bind_rec rec = {0};
    ext_verbs_init(&v, st, NULL, record_bind, &rec);
    static const char *files[] = {"01-filter.request.raw.json", "03-bind.request.raw.json", "04-preempt.request.raw.json",
                                  "05-filter.request.raw.json", "06-bind.request.raw.json"};
    static const verb_fn fns[] = {ext_verb_filter, ext_verb_bind, ext_verb_preempt, ext_verb_filter, ext_verb_bind};
    static const char *resp[] = {"01-filter.response.json", "03-bind.response.json", "04-preempt.response.json",
                                 "05-filter.response.json", "06-bind.response.json"};
    for (int i = 0; i < 5; i++) {
        char *body = fixture_text(mode, files[i]);
        int status = 0;
        cJSON *got = call_verb(&v, fns[i], body, &status);
        cJSON *want = extender_sample(mode, resp[i]);
        free(body);
        bool shape = status == 200 && got && same_keys(got, want);
        /* bind answers {"Error": ""}; preempt echoes the proposed victims (meta form). */
        bool exact = fns[i] == ext_verb_filter || cJSON_Compare(got, want, 1);
        char *g = got ? cJSON_PrintUnformatted(got) : NULL;
        cJSON_Delete(got);
        cJSON_Delete(want);
        if (!shape || !exact) {
            test_fail(__FILE__, __LINE__, "%s %s: status %d reply %s", mode, files[i], status, g ? g : "(none)");
            free(g);
            ext_state_free(st);
            return;
        }
        free(g);
    }
    ext_state_free(st);
    CHECK_INT(rec.calls, 2);
    CHECK_STR(rec.name, "gpu-pod-high");
    CHECK_STR(rec.node, "gpu-node-3");
    CHECK(!rec.had_ann);   /* no GPU asked, no assignment written */
}

TEST(ext_contract_sequence_node_list) { check_sequence("node-list"); }
TEST(ext_contract_sequence_node_cache) { check_sequence("node-cache"); }

/* GPU versions of the recorded bodies: the same structure, with demo-cluster nodes
 * (GFD labels) and a pod that asks for nvidia.com/gpu. */
static char *gpu_body(const char *mode, const char *file, const char *limits) {
    cJSON *req = extender_sample(mode, file);
    cJSON *pod = cJSON_GetObjectItem(req, "Pod");
    cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "spec"), "containers"), 0);
    cJSON *res = cJSON_GetObjectItem(c0, "resources");
    char lim[256];
    snprintf(lim, sizeof lim, "{%s}", limits);
    cJSON_ReplaceItemInObject(res, "limits", cJSON_Parse(lim));
    cJSON_ReplaceItemInObject(res, "requests", cJSON_Parse(lim));
    if (cJSON_IsNull(cJSON_GetObjectItem(req, "Nodes"))) {
        cJSON *names = cJSON_CreateArray();
        const char *nn[] = {"gpu-a100-whole", "gpu-t4-timeslice", "gpu-a100-mig", "cpu-only"};
        for (int i = 0; i < 4; i++) cJSON_AddItemToArray(names, cJSON_CreateString(nn[i]));
        cJSON_ReplaceItemInObject(req, "NodeNames", names);
    } else {
        cJSON *list = demo_nodes();
        cJSON_ReplaceItemInObject(req, "Nodes", list);
    }
    char *s = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    return s;
}

static void check_gpu_filter(const char *mode) {
    ext_state *st = demo_state();
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    char *body = gpu_body(mode, "01-filter.request.json", "\"nvidia.com/gpu\":\"1\"");
    int status;
    cJSON *got = call_verb(&v, ext_verb_filter, body, &status);
    cJSON *want = extender_sample(mode, "01-filter.response.json");
    free(body);
    bool shape = status == 200 && same_keys(got, want);
    cJSON *passed = !strcmp(mode, "node-list") ? cJSON_GetObjectItem(cJSON_GetObjectItem(got, "Nodes"), "items")
                                               : cJSON_GetObjectItem(got, "NodeNames");
    const cJSON *un = cJSON_GetObjectItem(got, "FailedAndUnresolvableNodes");
    int npass = cJSON_GetArraySize(passed);
    const cJSON *first = cJSON_GetArrayItem(passed, 0);
    char fname[64];
    snprintf(fname, sizeof fname, "%s", cJSON_IsString(first) ? first->valuestring : cJSON_IsObject(first) ?
             cJSON_GetObjectItem(cJSON_GetObjectItem(first, "metadata"), "name")->valuestring : "");
    const cJSON *t4 = cJSON_GetObjectItem(un, "gpu-t4-timeslice");
    const cJSON *cpu = cJSON_GetObjectItem(un, "cpu-only");
    char t4why[300];
    snprintf(t4why, sizeof t4why, "%s", cJSON_IsString(t4) ? t4->valuestring : "");
    bool cpu_ok = cJSON_IsString(cpu);
    cJSON_Delete(got);
    cJSON_Delete(want);
    ext_state_free(st);
    CHECK(shape);
    /* Whole means whole: only the unshared A100 node (and MIG-single H100 is not listed
     * among the node-cache candidates; in the node-list it needs isolation). */
    CHECK_INT(npass, 1);
    CHECK_STR(fname, "gpu-a100-whole");
    CHECK(t4why[0]);
    CHECK(cpu_ok);
}

TEST(ext_contract_gpu_filter_node_list) { check_gpu_filter("node-list"); }
TEST(ext_contract_gpu_filter_node_cache) { check_gpu_filter("node-cache"); }

/* The recorded filter body with a layered-sharing pod (nvidia.com/mig-1g.10gb, isolation
 * timeslice) over the demo cluster: only gpu-a100-layered, whose 1g.10gb instances are
 * time-sliced, passes; the same pod without the isolation passes nowhere. */
static void check_layered_filter(const char *mode, bool iso) {
    ext_state *st = demo_state();
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    char *body0 = gpu_body(mode, "01-filter.request.json", "\"nvidia.com/mig-1g.10gb\":\"1\"");
    cJSON *req = cJSON_Parse(body0);
    free(body0);
    cJSON *meta = cJSON_GetObjectItem(cJSON_GetObjectItem(req, "Pod"), "metadata");
    cJSON *anns = cJSON_GetObjectItem(meta, "annotations");
    if (!anns) anns = cJSON_AddObjectToObject(meta, "annotations");
    if (iso) cJSON_AddStringToObject(anns, "tessera.io/isolation", "timeslice");
    if (!strcmp(mode, "node-cache")) {   /* the recorded candidate list plus the layered node */
        cJSON *names = cJSON_GetObjectItem(req, "NodeNames");
        cJSON_AddItemToArray(names, cJSON_CreateString("gpu-a100-layered"));
    }
    char *body = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    int status;
    cJSON *got = call_verb(&v, ext_verb_filter, body, &status);
    free(body);
    cJSON *passed = !strcmp(mode, "node-list") ? cJSON_GetObjectItem(cJSON_GetObjectItem(got, "Nodes"), "items")
                                               : cJSON_GetObjectItem(got, "NodeNames");
    int npass = cJSON_GetArraySize(passed);
    const cJSON *first = cJSON_GetArrayItem(passed, 0);
    char fname[64];
    snprintf(fname, sizeof fname, "%s", cJSON_IsString(first) ? first->valuestring : cJSON_IsObject(first) ?
             cJSON_GetObjectItem(cJSON_GetObjectItem(first, "metadata"), "name")->valuestring : "");
    cJSON_Delete(got);
    ext_state_free(st);
    CHECK_INT(status, 200);
    if (iso) {
        /* the A100-40GB MIG node holds 3g.20gb + 2 x 2g.10gb: no 1g.10gb there */
        CHECK_INT(npass, 1);
        CHECK_STR(fname, "gpu-a100-layered");
    } else {
        CHECK_INT(npass, 0);
    }
}

TEST(ext_contract_layered_filter_node_list) {
    check_layered_filter("node-list", true);
    check_layered_filter("node-list", false);
}
TEST(ext_contract_layered_filter_node_cache) {
    check_layered_filter("node-cache", true);
    check_layered_filter("node-cache", false);
}
