/* test_dra.c -- Dynamic Resource Allocation: ResourceSlices and ResourceClaims of NVIDIA's DRA driver as the
 * v1 API serves them (tests/fixtures/dra/, sources in its README), through the model (inventory, grants,
 * requests), the extender's cache (usage, shared and admin claims, generations, restart over the fake API
 * server, an older cluster without the API) and the verbs (filter, prioritize, bind), plus a randomized check
 * that a node with both device-plugin GPUs and DRA devices is never over-committed.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "extender/base64.h"
#include "extender/mirror/dra.h"
#include "kube/client.h"
#include "extender/mirror/state.h"
#include "extender/verbs.h"
#include "extender/webhook.h"
#include "extender/workload.h"
#include "ext_helpers.h"
#include "harness.h"
#include "model_helpers.h"
#include "model/dra.h"
#include "model/fit.h"
#include "model/node.h"
#include "policy/policy.h"
#include "policy/policy_int.h"   /* policy_test_generic_only */
#include "../support/fake_apiserver.h"

static cJSON *fx(const char *name) { return dra_fixture(name); }

static char *fx_text(const char *name) {
    char path[128];
    snprintf(path, sizeof path, "dra/%s", name);
    return test_fixture(path, NULL);
}

/* A node model: the Node fixture plus the slices' devices. */
static model_node *node_with(const char *node_fx, const char *const *slices, int n) {
    cJSON *no = fx(node_fx);
    char err[256];
    model_node *m = model_node_from_json(no, NULL, err, sizeof err);
    cJSON_Delete(no);
    for (int i = 0; m && i < n; i++) {
        cJSON *so = fx(slices[i]);
        model_dra_slice s;
        if (model_dra_slice_parse(so, &s, err, sizeof err) == 0) model_node_add_dra(m, s.dev, s.ndev, NULL);
        model_dra_slice_clear(&s);
        cJSON_Delete(so);
    }
    return m;
}

static const model_gpu *gpu_uuid(const model_node *m, const char *uuid) {
    for (int i = 0; i < m->ngpus; i++)
        if (!strcmp(m->gpus[i].uuid, uuid)) return &m->gpus[i];
    return NULL;
}

/* ------------------------------------------------------------ model: inventory ---- */

TEST(dra_slice_parse_as_v1_serves_it) {
    cJSON *so = fx("slice-dra-b-mig.json");
    model_dra_slice s;
    char err[256];
    CHECK_INT(model_dra_slice_parse(so, &s, err, sizeof err), 0);
    CHECK_STR(s.driver, "gpu.nvidia.com");
    CHECK_STR(s.pool, "dra-b");
    CHECK_STR(s.node, "dra-b");
    CHECK_INT((int)s.generation, 1);
    CHECK_INT(s.count, 1);
    CHECK_INT(s.ndev, 4);
    const model_dra_device *m0 = &s.dev[0], *g1 = &s.dev[3];
    CHECK_INT(m0->type, MODEL_DRA_MIG);
    CHECK_STR(m0->profile, "3g.20gb");
    CHECK_INT(m0->mig_start, 0);
    CHECK_INT(m0->mig_size, 4);
    CHECK_INT(m0->memory_mib, 19968);
    CHECK_INT(m0->minor, 0);
    CHECK_STR(m0->parent_uuid, "GPU-2d4f6a8c-0e1b-4c3d-9e5f-7a9b1c3d5e03");
    CHECK_INT(s.dev[1].mig_start, 4);
    CHECK_INT(s.dev[2].mig_start, 6);
    CHECK_INT(g1->type, MODEL_DRA_GPU);
    CHECK_INT(g1->memory_mib, 40960);
    CHECK_INT(g1->minor, 1);
    CHECK_STR(g1->product, "NVIDIA A100-SXM4-40GB");
    model_dra_slice_clear(&s);
    /* not a ResourceSlice: a clear error */
    cJSON *bad = cJSON_Parse("{\"metadata\":{\"name\":\"x\"},\"spec\":{\"pool\":{\"name\":\"p\"}}}");
    CHECK_INT(model_dra_slice_parse(bad, &s, err, sizeof err), -1);
    CHECK(strstr(err, "spec.driver") != NULL);
    cJSON_Delete(bad);
    cJSON_Delete(so);
}

TEST(dra_inventory_whole_and_mig_into_the_model) {
    const char *a[] = {"slice-dra-a.json"}, *b[] = {"slice-dra-b-mig.json"};
    model_node *na = node_with("node-dra-a.json", a, 1), *nb = node_with("node-dra-b.json", b, 1);
    CHECK(na && nb);
    /* the Node object alone offers nothing (no device plugin): every GPU comes from DRA, once */
    CHECK_INT(na->ngpus, 2);
    CHECK(na->has_dra);
    CHECK_STR(na->reason, "");
    const model_gpu *g = gpu_uuid(na, "GPU-9c1e3a5b-7d2f-4a6e-8c0b-1e3d5f7a9c02");
    CHECK(g && g->dra && g->dra_only && g->mode == MODEL_GPU_WHOLE && g->memory_mib == 40960 && g->index == 1);
    CHECK_STR(g->product->product, "NVIDIA-A100-SXM4-40GB");
    CHECK_INT(nb->ngpus, 2);
    const model_gpu *mg = gpu_uuid(nb, "GPU-2d4f6a8c-0e1b-4c3d-9e5f-7a9b1c3d5e03");
    CHECK(mg && mg->mode == MODEL_GPU_MIG && mg->ninst == 3 && !mg->mig_dynamic);
    int starts = 0;
    for (int i = 0; mg && i < mg->ninst; i++) starts |= 1 << mg->inst[i].start;
    CHECK_INT(starts, (1 << 0) | (1 << 4) | (1 << 6));
    char why[256];
    CHECK_MSG(model_node_check(nb, why, sizeof why), "%s", why);
    /* a claim's request reaches DRA GPUs only; a device-plugin request none of them */
    model_request dr = {.kind = MODEL_REQ_WHOLE, .count = 2, .via_dra = true};
    CHECK(model_fit_any(na, &dr, NULL, 0));
    model_request dp = {.kind = MODEL_REQ_WHOLE, .count = 1};
    char fw[256] = "";
    CHECK(!model_fit_any(na, &dp, fw, sizeof fw));
    CHECK_MSG(strstr(fw, "published through DRA only") != NULL, "%s", fw);
    model_request mr = {.kind = MODEL_REQ_MIG, .count = 1, .via_dra = true};
    snprintf(mr.mig_profile, sizeof mr.mig_profile, "1g.5gb");
    CHECK(model_fit_any(nb, &mr, NULL, 0));
    snprintf(mr.mig_profile, sizeof mr.mig_profile, "1g.10gb");   /* not a published device */
    CHECK(!model_fit_any(nb, &mr, NULL, 0));
    model_node_free(na);
    model_node_free(nb);
}

/* "uuid:mode:ninst:start@profile..." per GPU, in order: what two inventories are compared on. */
static void inventory(const model_node *n, char *out, size_t len) {
    size_t off = 0;
    out[0] = 0;
    for (int i = 0; i < n->ngpus && off < len; i++) {
        const model_gpu *g = &n->gpus[i];
        off += (size_t)snprintf(out + off, len - off, "%s:%s:%d:%d", g->uuid, model_gpu_mode_name(g->mode), g->memory_mib,
                                g->ninst);
        for (int k = 0; k < g->ninst && off < len; k++)
            off += (size_t)snprintf(out + off, len - off, ":%d@%s", g->inst[k].start, g->product->profiles[g->inst[k].profile].name);
        if (off < len) off += (size_t)snprintf(out + off, len - off, " ");
    }
}

TEST(dra_current_and_older_driver_fixtures_load_alike) {
    /* v0.4.0 (gpu-<minor> without index/minor; MIG gpu-<N>-mig-<profile>-<gi>-<start>; standard PCI attributes) and
     * the releases before it (index/minor; MIG gpu-<N>-mig-<gi>-<start>-<size>): one inventory */
    const char *pairs[2][2] = {{"slice-dra-a.json", "slice-dra-a-v0.3.json"}, {"slice-dra-b-mig.json", "slice-dra-b-mig-v0.3.json"}};
    const char *nodes[2] = {"node-dra-a.json", "node-dra-b.json"};
    for (int k = 0; k < 2; k++) {
        model_node *cur = node_with(nodes[k], &pairs[k][0], 1), *old = node_with(nodes[k], &pairs[k][1], 1);
        CHECK(cur && old);
        char ic[1024], io[1024], why[256];
        inventory(cur, ic, sizeof ic);
        inventory(old, io, sizeof io);
        CHECK_STR(ic, io);
        CHECK_STR(cur->reason, "");
        CHECK_MSG(model_node_check(cur, why, sizeof why), "%s", why);
        model_node_free(cur);
        model_node_free(old);
    }
    /* without memorySlice<i> capacities or a profile attribute, the placement and profile come from the name */
    const char *names[][3] = {{"gpu-0-mig-1g5gb-19-6", "1g.5gb", "6"}, {"gpu-0-mig-3g20gb-9-4", "3g.20gb", "4"},
                              {"gpu-2-mig-1g10gbme-20-3", "1g.10gb+me", "3"}, {"gpu-2-mig-1g10gb-me-20-5", "1g.10gb+me", "5"},
                              {"gpu-0-mig-19-6-1", "", "6"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char js[400];
        snprintf(js, sizeof js, "{\"metadata\":{\"name\":\"s\"},\"spec\":{\"driver\":\"gpu.nvidia.com\",\"pool\":{\"name\":\"p\"},"
                 "\"devices\":[{\"name\":\"%s\",\"attributes\":{\"type\":{\"string\":\"mig\"}}}]}}", names[i][0]);
        cJSON *o = cJSON_Parse(js);
        model_dra_slice sl;
        char err[256];
        CHECK(model_dra_slice_parse(o, &sl, err, sizeof err) == 0);
        CHECK_STR(sl.dev[0].profile, names[i][1]);
        CHECK_INT(sl.dev[0].mig_start, atoi(names[i][2]));
        model_dra_slice_clear(&sl);
        cJSON_Delete(o);
    }
}

/* The rules the extender and the simulator share (model/dra.h): a pool's current generation and whether it is
 * all there, the devices that count, and how an allocated claim is accounted. */
static const model_dra_device *only_here(void *user, const model_dra_result *r, bool *on_node) {
    const model_dra_slice *const *sl = user;
    *on_node = strcmp(r->pool, "elsewhere") != 0;
    return model_dra_find_device(sl, 2, r->driver, strcmp(r->pool, "elsewhere") ? r->pool : "dra-a", r->device);
}

TEST(dra_model_generations_devices_and_claim_accounting) {
    cJSON *so = fx("slice-dra-a.json");
    model_dra_slice old, cur;
    char err[256];
    CHECK_INT(model_dra_slice_parse(so, &old, err, sizeof err), 0);
    CHECK_INT(model_dra_slice_parse(so, &cur, err, sizeof err), 0);
    cJSON_Delete(so);
    cur.generation = 2;   /* the driver republished the pool: two slices now, one here yet */
    cur.count = 2;
    old.ndev = 1;         /* the old generation had gpu-0 only */
    const model_dra_slice *sl[2] = {&old, &cur};
    int have, want;
    CHECK(model_dra_pool_current(sl, 2, MODEL_DRA_DRIVER, "dra-a", &have, &want) == 2);
    CHECK_INT(have, 1);
    CHECK_INT(want, 2);
    CHECK(model_dra_pool_current(sl, 2, MODEL_DRA_DRIVER, "nope", &have, &want) == INT64_MIN);
    CHECK(model_dra_find_device(sl, 2, MODEL_DRA_DRIVER, "dra-a", "gpu-0") == &cur.dev[0]);   /* not the old one */
    CHECK(model_dra_find_device(sl, 2, MODEL_DRA_DRIVER, "dra-a", "gpu-7") == NULL);
    /* a device only the older generation still has (its slice not replaced yet) is found there */
    cur.ndev = 1;
    old.dev[0] = cur.dev[1];
    CHECK(model_dra_find_device(sl, 2, MODEL_DRA_DRIVER, "dra-a", "gpu-1") == &old.dev[0]);
    old.dev[0] = cur.dev[0];
    cur.ndev = 2;
    cJSON *no = fx("node-dra-a.json");
    model_node *m = model_node_from_json(no, NULL, err, sizeof err);
    cJSON_Delete(no);
    CHECK(m != NULL);
    if (!m) { model_dra_slice_clear(&old); model_dra_slice_clear(&cur); return; }
    CHECK_INT(model_dra_merge_slices(m, sl, 2, NULL), 2);   /* gpu-0 and gpu-1 of generation 2, each once */
    CHECK_INT(m->ngpus, 2);
    CHECK_CONTAINS(m->dra_note, "DRA pool dra-a is incomplete (1 of 2 ResourceSlices of generation 2)");
    /* the 1.36 allocator takes nothing from an incomplete pool: no claim can get a GPU of it, nor a device-plugin pod */
    model_request one = {.kind = MODEL_REQ_WHOLE, .count = 1, .via_dra = true};
    CHECK(!model_dra_could_fit(m, &one, NULL, 0));
    CHECK(!model_fit_any(m, &one, NULL, 0));
    one.via_dra = false;
    CHECK(!model_fit_any(m, &one, NULL, 0));
    /* a claim: admin access and another driver hold nothing; a device on another node is not this node's */
    model_dra_result res[4] = {{.driver = MODEL_DRA_DRIVER, .pool = "dra-a", .device = "gpu-0", .admin = true},
                               {.driver = "other.example.com", .pool = "x", .device = "d"},
                               {.driver = MODEL_DRA_DRIVER, .pool = "elsewhere", .device = "gpu-0"},
                               {.driver = MODEL_DRA_DRIVER, .pool = "dra-a", .device = "gpu-1"}};
    CHECK_INT(model_dra_account_claim(m, "claim:a", res, 3, only_here, (void *)sl, err, sizeof err), 0);
    CHECK_INT(model_dra_account_claim(m, "claim:a", res, 4, only_here, (void *)sl, err, sizeof err), 1);
    int held = 0;
    for (int g = 0; g < m->ngpus; g++) held += !model_gpu_idle(&m->gpus[g]);
    CHECK_INT(held, 1);
    model_dra_result gone = {.driver = MODEL_DRA_DRIVER, .pool = "dra-a", .device = "gpu-9"};
    CHECK_INT(model_dra_account_claim(m, "claim:b", &gone, 1, only_here, (void *)sl, err, sizeof err), -1);
    CHECK_CONTAINS(err, "device gpu-9 of pool dra-a is not published");
    /* a claim with one device published nowhere still holds the other: never dropped whole (no under-count) */
    model_dra_result partly[2] = {{.driver = MODEL_DRA_DRIVER, .pool = "dra-a", .device = "gpu-9"},
                                  {.driver = MODEL_DRA_DRIVER, .pool = "dra-a", .device = "gpu-0"}};
    CHECK_INT(model_dra_account_claim(m, "claim:c", partly, 2, only_here, (void *)sl, err, sizeof err), 1);
    CHECK_CONTAINS(err, "device gpu-9 of pool dra-a is not published");
    held = 0;
    for (int g = 0; g < m->ngpus; g++) held += !model_gpu_idle(&m->gpus[g]);
    CHECK_INT(held, 2);
    char why[256];
    CHECK_MSG(model_node_check(m, why, sizeof why), "%s", why);
    model_node_free(m);
    model_dra_slice_clear(&old);
    model_dra_slice_clear(&cur);
}

TEST(dra_both_paths_one_gpu_never_twice) {
    const char *s[] = {"slice-both.json"};
    model_node *m = node_with("node-both.json", s, 1);
    CHECK(m);
    /* the device plugin hands out 2 GPUs and DRA publishes 2: the same two, matched by index (no UUIDs on the
     * device-plugin side), said in the note */
    CHECK_INT(m->ngpus, 2);
    CHECK(m->gpus[0].dra && !m->gpus[0].dra_only && m->gpus[1].dra && !m->gpus[1].dra_only);
    CHECK(strstr(m->dra_note, "matched to GPU 0 by index") != NULL);
    CHECK_STR(m->gpus[0].uuid, "GPU-aaaaaaaa-0000-4000-8000-000000000001");
    /* a claim holding GPU 0 leaves the device plugin one GPU */
    model_dra_device d = {.type = MODEL_DRA_GPU, .mig_start = -1};
    snprintf(d.name, sizeof d.name, "gpu-0");
    snprintf(d.uuid, sizeof d.uuid, "GPU-aaaaaaaa-0000-4000-8000-000000000001");
    model_assignment a = {.ngrants = 1};
    char err[256];
    CHECK_INT(model_dra_grant(m, &d, &a.grant[0], err, sizeof err), 0);
    CHECK_INT(model_assign(m, "claim:x", &a, err, sizeof err), 0);
    model_request two = {.kind = MODEL_REQ_WHOLE, .count = 2}, one = {.kind = MODEL_REQ_WHOLE, .count = 1};
    CHECK(!model_fit_any(m, &two, NULL, 0));
    CHECK(model_fit_any(m, &one, NULL, 0));
    model_node_free(m);
    /* the annotation names UUIDs DRA does not: the views disagree, and the node says how rather than counting 4 */
    cJSON *no = fx("node-both.json");
    cJSON_AddStringToObject(cJSON_GetObjectItem(cJSON_GetObjectItem(no, "metadata"), "annotations"), "tessera.io/gpus",
                            "[{\"uuid\":\"GPU-x0\"},{\"uuid\":\"GPU-x1\"}]");
    char err2[256];
    m = model_node_from_json(no, NULL, err2, sizeof err2);
    cJSON_Delete(no);
    CHECK(m && m->ngpus == 2 && !strcmp(m->gpus[1].uuid, "GPU-x1"));
    cJSON *so = fx("slice-both.json");
    model_dra_slice sl;
    model_dra_slice_parse(so, &sl, err2, sizeof err2);
    model_node_add_dra(m, sl.dev, sl.ndev, NULL);
    CHECK_MSG(strstr(m->reason, "show 4 GPUs, but GPU feature discovery counts 2") != NULL, "%s", m->reason);
    model_dra_slice_clear(&sl);
    cJSON_Delete(so);
    model_node_free(m);
}

TEST(dra_views_that_disagree_are_named) {
    /* the device plugin time-slices the GPU DRA also publishes: no safe accounting, the node says why */
    cJSON *no = fx("node-both.json");
    cJSON *labels = cJSON_GetObjectItem(cJSON_GetObjectItem(no, "metadata"), "labels");
    cJSON_ReplaceItemInObject(labels, "nvidia.com/gpu.replicas", cJSON_CreateString("4"));
    cJSON_ReplaceItemInObject(labels, "nvidia.com/gpu.product", cJSON_CreateString("NVIDIA-A100-SXM4-40GB-SHARED"));
    cJSON_AddStringToObject(labels, "nvidia.com/gpu.sharing-strategy", "time-slicing");
    cJSON *alloc = cJSON_GetObjectItem(cJSON_GetObjectItem(no, "status"), "allocatable");
    cJSON_ReplaceItemInObject(alloc, "nvidia.com/gpu", cJSON_CreateString("8"));
    char err[256];
    model_node *m = model_node_from_json(no, NULL, err, sizeof err);
    cJSON_Delete(no);
    CHECK(m && m->gpus[0].mode == MODEL_GPU_TIMESLICE);
    cJSON *so = fx("slice-both.json");
    model_dra_slice s;
    model_dra_slice_parse(so, &s, err, sizeof err);
    model_node_add_dra(m, s.dev, s.ndev, NULL);
    CHECK(strstr(m->reason, "time-sliced by the device plugin and published by DRA too") != NULL);
    model_dra_slice_clear(&s);
    cJSON_Delete(so);
    model_node_free(m);
    /* a device of a product the catalog lacks and without memory: refused by name, not guessed */
    model_node *n = model_node_new("x");
    model_dra_device d = {.type = MODEL_DRA_GPU, .mig_start = -1, .minor = 0};
    snprintf(d.name, sizeof d.name, "gpu-0");
    snprintf(d.uuid, sizeof d.uuid, "GPU-1");
    snprintf(d.product, sizeof d.product, "NVIDIA Future 9000");
    model_node_add_dra(n, &d, 1, NULL);
    CHECK(strstr(n->reason, "NVIDIA Future 9000") != NULL);
    model_node_free(n);
}

TEST(dra_dynamic_mig_whole_gpu_claim_blocks_every_slice) {
    /* DynamicMIG publishes the GPU and its MIG placements: holding the GPU leaves no slice */
    model_node *m = model_node_new("dyn");
    model_dra_device d[2] = {{.type = MODEL_DRA_GPU, .mig_start = -1, .minor = 0, .memory_mib = 40960},
                             {.type = MODEL_DRA_MIG, .mig_start = 0, .mig_size = 1, .minor = 0}};
    snprintf(d[0].name, sizeof d[0].name, "gpu-0");
    snprintf(d[0].uuid, sizeof d[0].uuid, "GPU-D");
    snprintf(d[0].product, sizeof d[0].product, "NVIDIA A100-SXM4-40GB");
    snprintf(d[1].name, sizeof d[1].name, "gpu-0-mig-19-0-1");
    snprintf(d[1].parent_uuid, sizeof d[1].parent_uuid, "GPU-D");
    snprintf(d[1].product, sizeof d[1].product, "NVIDIA A100-SXM4-40GB");
    snprintf(d[1].profile, sizeof d[1].profile, "1g.5gb");
    CHECK_INT(model_node_add_dra(m, d, 2, NULL), 1);
    CHECK(m->ngpus == 1 && m->gpus[0].mode == MODEL_GPU_MIG && m->gpus[0].mig_dynamic && m->gpus[0].ninst == 0);
    model_assignment a = {.ngrants = 1};
    char err[256];
    CHECK_INT(model_dra_grant(m, &d[0], &a.grant[0], err, sizeof err), 0);
    CHECK_INT(model_assign(m, "claim:whole", &a, err, sizeof err), 0);
    model_request mr = {.kind = MODEL_REQ_MIG, .count = 1, .via_dra = true};
    snprintf(mr.mig_profile, sizeof mr.mig_profile, "1g.5gb");
    CHECK(!model_fit_any(m, &mr, NULL, 0));
    model_release(m, "claim:whole");
    CHECK(model_fit_any(m, &mr, NULL, 0));
    model_node_free(m);
}

/* ------------------------------------------------------------ model: requests ---- */

static const cJSON *classes_fx(void *user, const char *name) {
    cJSON **cl = user;
    for (int i = 0; cl[i]; i++)
        if (!strcmp(cJSON_GetObjectItem(cJSON_GetObjectItem(cl[i], "metadata"), "name")->valuestring, name)) return cl[i];
    return NULL;
}

static model_dra_verdict judge_spec(const char *spec_json, model_request *r, char *why, size_t whylen) {
    cJSON *cl[3] = {fx("deviceclass-gpu.json"), fx("deviceclass-mig.json"), NULL};
    cJSON *spec = cJSON_Parse(spec_json);
    memset(r, 0, sizeof *r);
    model_dra_verdict v = model_dra_request(spec, classes_fx, cl, r, why, whylen);
    cJSON_Delete(spec);
    cJSON_Delete(cl[0]);
    cJSON_Delete(cl[1]);
    return v;
}

TEST(dra_claim_requests_judged_or_said_why_not) {
    model_request r;
    char why[256];
    /* the template's claim: one whole GPU through DRA */
    cJSON *t = fx("claimtemplate-one-gpu.json");
    char *spec = cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetObjectItem(t, "spec"), "spec"));
    cJSON_Delete(t);
    CHECK_INT(judge_spec(spec, &r, why, sizeof why), MODEL_DRA_JUDGED);
    free(spec);
    CHECK(r.kind == MODEL_REQ_WHOLE && r.count == 1 && r.via_dra);
    /* MIG profile through the mig class */
    cJSON *mc = fx("claim-mig.json");
    spec = cJSON_PrintUnformatted(cJSON_GetObjectItem(mc, "spec"));
    cJSON_Delete(mc);
    CHECK_INT(judge_spec(spec, &r, why, sizeof why), MODEL_DRA_JUDGED);
    free(spec);
    CHECK(r.kind == MODEL_REQ_MIG && !strcmp(r.mig_profile, "1g.5gb"));
    /* product and memory selectors: understood */
    CHECK_INT(judge_spec("{\"devices\":{\"requests\":[{\"name\":\"g\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\","
                         "\"count\":2,\"selectors\":[{\"cel\":{\"expression\":\"device.attributes['gpu.nvidia.com']."
                         "productName == 'NVIDIA H100 80GB HBM3' && device.capacity['gpu.nvidia.com'].memory."
                         "compareTo(quantity('40Gi')) >= 0\"}}]}}]}}", &r, why, sizeof why),
              MODEL_DRA_JUDGED);
    CHECK(r.count == 2 && r.nmodels == 1 && !strcmp(r.models[0], "NVIDIA-H100-80GB-HBM3") && r.dra_min_memory_mib == 40960);
    /* beyond what tessera understands: not judged, and why */
    CHECK_INT(judge_spec("{\"devices\":{\"requests\":[{\"name\":\"g\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\","
                         "\"selectors\":[{\"cel\":{\"expression\":\"device.attributes['gpu.nvidia.com'].architecture == "
                         "'Hopper' || device.attributes['gpu.nvidia.com'].architecture == 'Blackwell'\"}}]}}]}}",
                         &r, why, sizeof why),
              MODEL_DRA_UNJUDGED);
    CHECK(strstr(why, "CEL selector beyond what tessera understands") != NULL);
    CHECK_INT(judge_spec("{\"devices\":{\"requests\":[{\"name\":\"g\",\"exactly\":{\"deviceClassName\":\"nic.example.com\"}}]}}",
                         &r, why, sizeof why),
              MODEL_DRA_UNJUDGED);
    CHECK(strstr(why, "nic.example.com") != NULL);
    CHECK_INT(judge_spec("{\"devices\":{\"requests\":[{\"name\":\"g\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\","
                         "\"allocationMode\":\"All\"}}]}}", &r, why, sizeof why),
              MODEL_DRA_UNJUDGED);
    CHECK_INT(judge_spec("{\"devices\":{\"requests\":[{\"name\":\"g\",\"firstAvailable\":[{\"name\":\"a\",\"deviceClassName\":"
                         "\"gpu.nvidia.com\"},{\"name\":\"b\",\"deviceClassName\":\"mig.nvidia.com\"}]}]}}", &r, why, sizeof why),
              MODEL_DRA_UNJUDGED);
    /* admin access asks for nothing tessera accounts */
    cJSON *ac = fx("claim-admin.json");
    spec = cJSON_PrintUnformatted(cJSON_GetObjectItem(ac, "spec"));
    cJSON_Delete(ac);
    CHECK_INT(judge_spec(spec, &r, why, sizeof why), MODEL_DRA_NOTHING);
    free(spec);
}

/* ------------------------------------------------------------ the extender's cache ---- */

static void apply_fx(ext_state *st, kube_kind kind, kube_event ev, const char *name) {
    cJSON *o = fx(name);
    ext_state_apply(st, kind, ev, o);
    cJSON_Delete(o);
}

/* The holder uid of the GPU with this UUID on node ("" idle, "?" unknown GPU). */
static void holder_of(ext_state *st, const char *node, const char *uuid, char *out, size_t len) {
    snprintf(out, len, "?");
    ext_state_lock(st);
    const ext_node *n = ext_state_node(st, node);
    const model_gpu *g = n && n->m ? gpu_uuid(n->m, uuid) : NULL;
    if (g) snprintf(out, len, "%s", g->exclusive_holder >= 0 ? n->m->allocs[g->exclusive_holder].uid : "");
    ext_state_unlock(st);
}

static ext_state *dra_state(void) {
    ext_state_config cfg = {.standalone = true};
    ext_state *st = ext_state_new(&cfg);
    apply_fx(st, KUBE_DEVICECLASS, KUBE_ADDED, "deviceclass-gpu.json");
    apply_fx(st, KUBE_DEVICECLASS, KUBE_ADDED, "deviceclass-mig.json");
    apply_fx(st, KUBE_NODE, KUBE_ADDED, "node-dra-a.json");
    apply_fx(st, KUBE_NODE, KUBE_ADDED, "node-dra-b.json");
    apply_fx(st, KUBE_RESOURCESLICE, KUBE_ADDED, "slice-dra-a.json");
    apply_fx(st, KUBE_RESOURCESLICE, KUBE_ADDED, "slice-dra-b-mig.json");
    return st;
}

#define UA0 "GPU-4b7a9c2e-1f3d-4e8a-9b6c-0d2e4f6a8b01"
#define UA1 "GPU-9c1e3a5b-7d2f-4a6e-8c0b-1e3d5f7a9c02"

TEST(dra_usage_from_claims_shared_once_admin_nothing) {
    ext_state *st = dra_state();
    char h[80];
    holder_of(st, "dra-a", UA1, h, sizeof h);
    CHECK_STR(h, "");
    /* allocated: held whether or not its pod runs */
    apply_fx(st, KUBE_RESOURCECLAIM, KUBE_ADDED, "claim-allocated.json");
    holder_of(st, "dra-a", UA1, h, sizeof h);
    CHECK_STR(h, "claim:c0a1b2c3-0000-4000-8000-00000000000a");
    /* admin access on gpu-0: holds nothing */
    apply_fx(st, KUBE_RESOURCECLAIM, KUBE_ADDED, "claim-admin.json");
    holder_of(st, "dra-a", UA0, h, sizeof h);
    CHECK_STR(h, "");
    /* a claim two pods share: gpu-0 held once */
    apply_fx(st, KUBE_RESOURCECLAIM, KUBE_ADDED, "claim-shared.json");
    holder_of(st, "dra-a", UA0, h, sizeof h);
    CHECK_STR(h, "claim:c0a1b2c3-0000-4000-8000-00000000000d");
    ext_state_lock(st);
    const ext_node *n = ext_state_node(st, "dra-a");
    CHECK_INT(n->m->nlive, 2);
    char why[256];
    CHECK_MSG(model_node_check(n->m, why, sizeof why), "%s", why);
    ext_state_unlock(st);
    /* a MIG claim holds its instance */
    apply_fx(st, KUBE_RESOURCECLAIM, KUBE_ADDED, "claim-mig.json");
    ext_state_lock(st);
    const ext_node *b = ext_state_node(st, "dra-b");
    const model_gpu *mg = gpu_uuid(b->m, "GPU-2d4f6a8c-0e1b-4c3d-9e5f-7a9b1c3d5e03");
    int held_at = -1;
    for (int i = 0; mg && i < mg->ninst; i++)
        if (mg->inst[i].holder >= 0) held_at = mg->inst[i].start;
    CHECK_INT(held_at, 6);
    ext_state_unlock(st);
    /* deallocation (status cleared) and deletion release */
    cJSON *c = fx("claim-allocated.json");
    cJSON_DeleteItemFromObject(c, "status");
    ext_state_apply(st, KUBE_RESOURCECLAIM, KUBE_MODIFIED, c);
    cJSON_Delete(c);
    holder_of(st, "dra-a", UA1, h, sizeof h);
    CHECK_STR(h, "");
    apply_fx(st, KUBE_RESOURCECLAIM, KUBE_DELETED, "claim-shared.json");
    holder_of(st, "dra-a", UA0, h, sizeof h);
    CHECK_STR(h, "");
    ext_state_free(st);
}

TEST(dra_generation_change_replaces_the_pool) {
    ext_state *st = dra_state();
    apply_fx(st, KUBE_RESOURCECLAIM, KUBE_ADDED, "claim-allocated.json");   /* holds gpu-1 */
    /* generation 2 split over two slices: first only gpu-0 arrives; the pool is incomplete until gpu-1's slice does */
    cJSON *s2 = fx("slice-dra-a.json");
    cJSON *spec = cJSON_GetObjectItem(s2, "spec"), *pool = cJSON_GetObjectItem(spec, "pool");
    cJSON_ReplaceItemInObject(pool, "generation", cJSON_CreateNumber(2));
    cJSON_ReplaceItemInObject(pool, "resourceSliceCount", cJSON_CreateNumber(2));
    cJSON *devs = cJSON_GetObjectItem(spec, "devices");
    cJSON *gpu1 = cJSON_DetachItemFromArray(devs, 1);
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(s2, "metadata"), "name", cJSON_CreateString("dra-a-gen2-a"));
    ext_state_apply(st, KUBE_RESOURCESLICE, KUBE_ADDED, s2);
    ext_state_lock(st);
    const ext_node *n = ext_state_node(st, "dra-a");
    CHECK_INT(n->m->ngpus, 2);   /* gpu-1 is still in generation 1's slice */
    CHECK(strstr(n->m->dra_note, "incomplete (1 of 2") != NULL);
    /* meanwhile nothing is offered (the 1.36 allocator), and the claim on gpu-1 is not dropped: no under-count */
    model_request one = {.kind = MODEL_REQ_WHOLE, .count = 1, .via_dra = true};
    char why[256] = "";
    CHECK(!model_dra_could_fit(n->m, &one, why, sizeof why));
    CHECK_INT(n->m->nlive, 1);
    ext_state_unlock(st);
    char h[80];
    holder_of(st, "dra-a", UA1, h, sizeof h);
    CHECK_STR(h, "claim:c0a1b2c3-0000-4000-8000-00000000000a");
    /* the second slice of generation 2 brings gpu-1 back, and the claim holds it again */
    cJSON *s3 = cJSON_Duplicate(s2, 1);
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(s3, "metadata"), "name", cJSON_CreateString("dra-a-gen2-b"));
    cJSON *d3 = cJSON_GetObjectItem(cJSON_GetObjectItem(s3, "spec"), "devices");
    cJSON_DeleteItemFromArray(d3, 0);
    cJSON_AddItemToArray(d3, gpu1);
    ext_state_apply(st, KUBE_RESOURCESLICE, KUBE_ADDED, s3);
    apply_fx(st, KUBE_RESOURCESLICE, KUBE_DELETED, "slice-dra-a.json");   /* the driver drops gen 1 */
    holder_of(st, "dra-a", UA1, h, sizeof h);
    CHECK_STR(h, "claim:c0a1b2c3-0000-4000-8000-00000000000a");
    ext_state_lock(st);
    n = ext_state_node(st, "dra-a");
    CHECK_INT(n->m->ngpus, 2);
    CHECK_STR(n->m->dra_note, "");
    CHECK(model_dra_could_fit(n->m, &one, NULL, 0));   /* complete: gpu-0 is offered again */
    ext_state_unlock(st);
    cJSON_Delete(s2);
    cJSON_Delete(s3);
    ext_state_free(st);
}

/* ------------------------------------------------------------ restart over the fake API ---- */

typedef struct dra_run { ext_state *st; kube_client *k; } dra_run;

static bool dra_start(dra_run *r, const char *url) {
    ext_state_config sc = {.dra = true};
    r->st = ext_state_new(&sc);
    kube_config kc;
    kube_config_defaults(&kc);
    kc.dra = true;
    kc.backoff_max_ms = 400;
    snprintf(kc.api_url, sizeof kc.api_url, "%s", url);
    char err[256];
    r->k = kube_new(&kc, err, sizeof err);
    if (!r->k || kube_start(r->k, ext_state_on_event, r->st, err, sizeof err) != 0) return false;
    return WAIT_FOR(ext_state_ready(r->st));
}

static void dra_stop(dra_run *r) {
    kube_free(r->k);
    ext_state_free(r->st);
}

static void put_fx(fake_api *api, const char *kind, const char *name) {
    char *t = fx_text(name);
    fake_api_put(api, kind, t);
    free(t);
}

/* "node/uuid=holder " for every held GPU, sorted by node then GPU order: compares two caches. */
static void dra_holdings(ext_state *st, char *out, size_t len) {
    size_t off = 0;
    out[0] = 0;
    ext_state_lock(st);
    const char *nodes[] = {"dra-a", "dra-b"};
    for (int k = 0; k < 2; k++) {
        const ext_node *n = ext_state_node(st, nodes[k]);
        for (int i = 0; n && n->m && i < n->m->ngpus && off < len; i++) {
            const model_gpu *g = &n->m->gpus[i];
            if (g->exclusive_holder >= 0)
                off += (size_t)snprintf(out + off, len - off, "%s/%s=%s ", nodes[k], g->uuid, n->m->allocs[g->exclusive_holder].uid);
            for (int j = 0; j < g->ninst && off < len; j++)
                if (g->inst[j].holder >= 0)
                    off += (size_t)snprintf(out + off, len - off, "%s/%s@%d=%s ", nodes[k], g->uuid, g->inst[j].start,
                                            n->m->allocs[g->inst[j].holder].uid);
        }
    }
    ext_state_unlock(st);
}

static bool holds_three(void *p) {
    char h[1024];
    dra_holdings(p, h, sizeof h);
    int n = 0;
    for (const char *s = h; (s = strchr(s, '=')); s++) n++;
    return n == 3;
}

static bool wait_until(bool (*pred)(void *), void *arg) { return WAIT_FOR(pred(arg)); }

TEST(dra_restart_rebuilds_usage_from_the_api) {
    char err[256], url[128];
    fake_api *api = fake_api_start(0, err, sizeof err);
    CHECK_MSG(api, "%s", err);
    fake_api_url(api, url, sizeof url);
    put_fx(api, "nodes", "node-dra-a.json");
    put_fx(api, "nodes", "node-dra-b.json");
    put_fx(api, "deviceclasses", "deviceclass-gpu.json");
    put_fx(api, "deviceclasses", "deviceclass-mig.json");
    put_fx(api, "resourceslices", "slice-dra-a.json");
    put_fx(api, "resourceslices", "slice-dra-b-mig.json");
    put_fx(api, "resourceclaims", "claim-allocated.json");
    put_fx(api, "resourceclaims", "claim-shared.json");
    put_fx(api, "resourceclaims", "claim-admin.json");
    dra_run a;
    CHECK(dra_start(&a, url));
    /* a claim allocated while we watch shows up through the watch */
    put_fx(api, "resourceclaims", "claim-mig.json");
    CHECK(wait_until(holds_three, a.st));
    char h1[1024], h2[1024];
    dra_holdings(a.st, h1, sizeof h1);
    CHECK(strstr(h1, "dra-a/" UA1 "=claim:c0a1b2c3-0000-4000-8000-00000000000a") != NULL);
    CHECK(strstr(h1, "dra-a/" UA0 "=claim:c0a1b2c3-0000-4000-8000-00000000000d") != NULL);
    CHECK(strstr(h1, "@6=claim:c0a1b2c3-0000-4000-8000-00000000000f") != NULL);
    dra_stop(&a);
    /* a new process rebuilds exactly that from lists alone */
    dra_run b;
    CHECK(dra_start(&b, url));
    CHECK(wait_until(holds_three, b.st));
    dra_holdings(b.st, h2, sizeof h2);
    CHECK_STR(h2, h1);
    /* the claim deleted while nobody watched... */
    dra_stop(&b);
    fake_api_delete(api, "resourceclaims", "ml", "shared-gpu");
    dra_run c;
    CHECK(dra_start(&c, url));
    char h3[1024];
    dra_holdings(c.st, h3, sizeof h3);
    CHECK(strstr(h3, UA0) == NULL);
    /* the driver republishes dra-a's pool (generation 2, new slice name) and drops generation 1, on the watch:
     * the inventory follows and the allocated claim still holds gpu-1 */
    cJSON *s2 = fx("slice-dra-a.json");
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(s2, "metadata"), "name", cJSON_CreateString("dra-a-gpu.nvidia.com-gen2"));
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(cJSON_GetObjectItem(s2, "spec"), "pool"), "generation", cJSON_CreateNumber(2));
    char *s2t = cJSON_PrintUnformatted(s2);
    cJSON_Delete(s2);
    fake_api_put(api, "resourceslices", s2t);
    free(s2t);
    fake_api_delete(api, "resourceslices", NULL, "dra-a-gpu.nvidia.com-k7x2p");
    bool gen2 = WAIT_FOR(({
        ext_state_lock(c.st);
        const ext_node *n = ext_state_node(c.st, "dra-a");
        cJSON *dbg = ext_dra_debug(ext_state_dra(c.st));
        char *dt = cJSON_PrintUnformatted(dbg);
        bool y = n && n->m && n->m->ngpus == 2 && dt && !strstr(dt, "k7x2p") && strstr(dt, "gen2");
        free(dt);
        cJSON_Delete(dbg);
        ext_state_unlock(c.st);
        y;
    }));
    CHECK(gen2);
    char h4[1024];
    dra_holdings(c.st, h4, sizeof h4);
    CHECK(strstr(h4, "dra-a/" UA1 "=claim:c0a1b2c3-0000-4000-8000-00000000000a") != NULL);
    dra_stop(&c);
    fake_api_free(api);
}

TEST(dra_older_cluster_without_the_api_carries_on) {
    char err[256], url[128];
    fake_api *api = fake_api_start(0, err, sizeof err);
    CHECK_MSG(api, "%s", err);
    fake_api_url(api, url, sizeof url);
    fake_api_inject(api, "/apis/resource.k8s.io/", 404, 1000000);
    cJSON *node = demo_node_as("gpu-a100-whole", "n1");
    char *nj = cJSON_PrintUnformatted(node);
    cJSON_Delete(node);
    fake_api_put(api, "nodes", nj);
    free(nj);
    dra_run a;
    CHECK(dra_start(&a, url));   /* ready although resource.k8s.io/v1 answers 404 */
    kube_stats ks;
    kube_get_stats(a.k, &ks);
    CHECK(ks.absent[KUBE_RESOURCESLICE] && ks.absent[KUBE_RESOURCECLAIM] && ks.absent[KUBE_DEVICECLASS]);
    CHECK(!ks.absent[KUBE_NODE]);
    /* and the device-plugin path works as before */
    ext_verbs v;
    ext_verbs_init(&v, a.st, NULL, NULL, NULL);
    char *pod = pod_json("p", "uid-p", 0, "\"nvidia.com/gpu\":\"1\"", NULL, NULL);
    const char *names[] = {"n1"};
    char *args = args_names(pod, names, 1);
    cJSON *f = call_verb(&v, ext_verb_filter, args, NULL);
    CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(f, "NodeNames")), 1);
    cJSON_Delete(f);
    free(args);
    free(pod);
    /* asked again quietly: a later list that works brings DRA in */
    fake_api_clear_injections(api);
    put_fx(api, "deviceclasses", "deviceclass-gpu.json");
    bool seen = WAIT_FOR((kube_get_stats(a.k, &ks), !ks.absent[KUBE_DEVICECLASS]));
    CHECK(seen);
    dra_stop(&a);
    /* RBAC without resource.k8s.io (403) must not keep the extender from ever being ready either */
    fake_api_inject(api, "/apis/resource.k8s.io/v1/resourceclaims", 403, 1000000);
    dra_run b;
    CHECK(dra_start(&b, url));
    kube_get_stats(b.k, &ks);
    CHECK(ks.absent[KUBE_RESOURCECLAIM] && !ks.absent[KUBE_RESOURCESLICE]);
    dra_stop(&b);
    fake_api_free(api);
}

/* ------------------------------------------------------------ verbs ---- */

/* The template pod, with its claim (made by the resourceclaim controller) pending. */
/* The fixture as kube-scheduler sees it: after tessera's webhook added the marker tessera.io/share to the first
 * app container (dra_pod_with_claim_template_reaches_tessera checks the webhook does), without which
 * kube-scheduler would not call the extender at all (managedResources). */
static char *claim_pod(void) {
    char *t = fx_text("pod-claim-template.json");
    cJSON *pod = cJSON_Parse(t);
    free(t);
    cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "spec"), "containers"), 0);
    cJSON *res = cJSON_GetObjectItem(c0, "resources");
    if (!res) res = cJSON_AddObjectToObject(c0, "resources");
    const char *kinds[] = {"requests", "limits"};
    for (int i = 0; i < 2; i++) {
        cJSON *k = cJSON_GetObjectItem(res, kinds[i]);
        if (!k) k = cJSON_AddObjectToObject(res, kinds[i]);
        cJSON_AddStringToObject(k, "tessera.io/share", "1");
    }
    char *out = cJSON_PrintUnformatted(pod);
    cJSON_Delete(pod);
    return out;
}

static char *args_for(const char *pod, const char *const *names, int n) { return args_names(pod, names, n); }

/* A Binding "posted": its annotations kept as text (in char[POSTED_LEN]). */
#define POSTED_LEN 8192
static int capture_bind(void *user, const char *ns, const char *name, const char *uid, const char *node,
                        const cJSON *annotations, char *err, size_t errlen) {
    char *t = cJSON_PrintUnformatted(annotations);
    snprintf(user, POSTED_LEN, "%s/%s@%s %s", ns, name, node, t ? t : "");
    free(t);
    return 0;
}

/* dra-c: a third DRA node, two free A100s (dra-a's Node and slice renamed, new UUIDs): its Node object and
 * ResourceSlice. */
static cJSON *dra_c_node(void) {
    cJSON *nc = fx("node-dra-a.json");
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(nc, "metadata"), "name", cJSON_CreateString("dra-c"));
    return nc;
}

static cJSON *dra_c_slice(void) {
    cJSON *sc = fx("slice-dra-a.json");
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(sc, "metadata"), "name", cJSON_CreateString("dra-c-slice"));
    cJSON *spec = cJSON_GetObjectItem(sc, "spec");
    cJSON_ReplaceItemInObject(spec, "nodeName", cJSON_CreateString("dra-c"));
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(spec, "pool"), "name", cJSON_CreateString("dra-c"));
    cJSON *d;
    int k = 0;
    cJSON_ArrayForEach(d, cJSON_GetObjectItem(spec, "devices")) {
        char u[64];
        snprintf(u, sizeof u, "GPU-cccccccc-0000-4000-8000-00000000000%d", k++);
        cJSON_ReplaceItemInObject(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "attributes"), "uuid"), "string", cJSON_CreateString(u));
    }
    return sc;
}

static void add_dra_c(ext_state *st) {
    cJSON *nc = dra_c_node(), *sc = dra_c_slice();
    ext_state_apply(st, KUBE_NODE, KUBE_ADDED, nc);
    ext_state_apply(st, KUBE_RESOURCESLICE, KUBE_ADDED, sc);
    cJSON_Delete(nc);
    cJSON_Delete(sc);
}

TEST(dra_pod_with_claim_template_filter_prioritize_bind) {
    ext_state *st = dra_state();
    add_dra_c(st);
    /* a plain node without any GPU: DynamicResources refuses it too */
    cJSON *cpu = demo_node_as("cpu-only", "cpu-1");
    ext_state_apply(st, KUBE_NODE, KUBE_ADDED, cpu);
    cJSON_Delete(cpu);
    apply_fx(st, KUBE_RESOURCECLAIM, KUBE_ADDED, "claim-allocated.json");   /* dra-a: gpu-1 taken */
    apply_fx(st, KUBE_RESOURCECLAIM, KUBE_ADDED, "claim-pending.json");     /* the pod's own claim */

    ext_verbs v;
    char posted[POSTED_LEN] = "";
    ext_verbs_init(&v, st, policy_find("binpack"), capture_bind, posted);
    char *pod = claim_pod();
    const char *names[] = {"dra-a", "dra-c", "cpu-1", "unknown-node"};
    char *args = args_for(pod, names, 4);
    cJSON *f = call_verb(&v, ext_verb_filter, args, NULL);
    const cJSON *pass = cJSON_GetObjectItem(f, "NodeNames");
    CHECK_INT(cJSON_GetArraySize(pass), 3);   /* dra-a, dra-c, and the node tessera does not know */
    const cJSON *un = cJSON_GetObjectItem(f, "FailedAndUnresolvableNodes");
    CHECK(cJSON_GetObjectItem(un, "cpu-1") && strstr(cJSON_GetObjectItem(un, "cpu-1")->valuestring, "no GPU published through DRA"));
    /* kube-scheduler calls prioritize only with the nodes the filter let through (extender-api.md, "When the
     * extender is called"): cpu-1 is not among them */
    const char *passed[4];
    int npassed = 0;
    const cJSON *pn;
    cJSON_ArrayForEach(pn, pass)
        if (cJSON_IsString(pn) && npassed < 4) passed[npassed++] = pn->valuestring;
    free(args);
    args = args_for(pod, passed, npassed);
    cJSON_Delete(f);
    /* prioritize: the node the allocation fragments least (binpack: take dra-a's last GPU, keep dra-c whole) */
    cJSON *p = call_verb(&v, ext_verb_prioritize, args, NULL);
    CHECK_INT(cJSON_GetArraySize(p), 3);
    int sa = -1, sc2 = -1;
    cJSON *e;
    cJSON_ArrayForEach(e, p) {
        const char *h = cJSON_GetObjectItem(e, "Host")->valuestring;
        int s = cJSON_GetObjectItem(e, "Score")->valueint;
        if (!strcmp(h, "dra-a")) sa = s;
        if (!strcmp(h, "dra-c")) sc2 = s;
    }
    CHECK_MSG(sa > sc2, "dra-a %d, dra-c %d", sa, sc2);
    cJSON_Delete(p);
    /* and with fragmentation gradient descent against a workload of 2-GPU claims: dra-a's lone free GPU is
     * fragmentation (no 2-GPU claim fits there), taking it removes it; on dra-c it would create one */
    policy_workload *wl = policy_workload_new();
    model_request two = {.kind = MODEL_REQ_WHOLE, .count = 2, .via_dra = true};
    char werr[256];
    CHECK(policy_workload_add(wl, &two, 10, werr, sizeof werr) == 0 && policy_workload_finish(wl, 95, werr, sizeof werr) == 0);
    ext_verbs vf;
    ext_verbs_init(&vf, st, policy_find("fgd"), NULL, NULL);
    vf.ctx.workload = wl;
    p = call_verb(&vf, ext_verb_prioritize, args, NULL);
    sa = sc2 = -1;
    cJSON_ArrayForEach(e, p) {
        const char *h = cJSON_GetObjectItem(e, "Host")->valuestring;
        int s = cJSON_GetObjectItem(e, "Score")->valueint;
        if (!strcmp(h, "dra-a")) sa = s;
        if (!strcmp(h, "dra-c")) sc2 = s;
    }
    CHECK_MSG(sa > sc2, "fgd: dra-a %d, dra-c %d", sa, sc2);
    cJSON_Delete(p);
    policy_workload_free(wl);
    /* bind posts the Binding only: nothing reserved by tessera, the claim's devices recorded once allocated */
    cJSON *claim = fx("claim-pending.json");
    cJSON *status = cJSON_GetObjectItem(claim, "status");
    cJSON *alloc = cJSON_Parse("{\"devices\":{\"results\":[{\"request\":\"gpu\",\"driver\":\"gpu.nvidia.com\",\"pool\":\"dra-a\","
                               "\"device\":\"gpu-0\"}]}}");
    cJSON_AddItemToObject(status, "allocation", alloc);
    cJSON_AddItemToObject(status, "reservedFor",
                          cJSON_Parse("[{\"resource\":\"pods\",\"name\":\"train-1\",\"uid\":\"p0a1b2c3-0000-4000-8000-00000000000b\"}]"));
    ext_state_apply(st, KUBE_RESOURCECLAIM, KUBE_MODIFIED, claim);   /* DynamicResources' PreBind */
    cJSON_Delete(claim);
    char berr[512];
    char body[512];
    snprintf(body, sizeof body, "{\"PodName\":\"train-1\",\"PodNamespace\":\"ml\",\"PodUID\":\"p0a1b2c3-0000-4000-8000-00000000000b\","
             "\"Node\":\"dra-a\"}");
    cJSON *b = call_verb(&v, ext_verb_bind, body, NULL);
    snprintf(berr, sizeof berr, "%s", cJSON_GetObjectItem(b, "Error")->valuestring);
    cJSON_Delete(b);
    CHECK_STR(berr, "");
    CHECK_STR(posted, "ml/train-1@dra-a {\"tessera.io/dra-allocation\":\"train-1-gpu-q8m4w:dra-a/gpu-0\"}");
    ext_state_lock(st);
    const ext_pod *bp = ext_state_pod(st, "p0a1b2c3-0000-4000-8000-00000000000b");
    CHECK(!bp || !bp->holds);   /* the claim holds the GPU, not the pod */
    const ext_node *na = ext_state_node(st, "dra-a");
    CHECK_INT(na->m->nlive, 2);
    char why[256];
    CHECK_MSG(model_node_check(na->m, why, sizeof why), "%s", why);
    ext_state_unlock(st);
    free(args);
    free(pod);
    ext_state_free(st);
}

TEST(dra_unjudged_claim_is_neutral_and_debug_says_so) {
    ext_state *st = dra_state();
    cJSON *c = fx("claim-pending.json");
    cJSON *rq = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "spec"), "devices"), "requests"), 0);
    cJSON_AddItemToObject(cJSON_GetObjectItem(rq, "exactly"), "selectors",
                          cJSON_Parse("[{\"cel\":{\"expression\":\"device.attributes['gpu.nvidia.com'].brand.startsWith('Nv')\"}}]"));
    ext_state_apply(st, KUBE_RESOURCECLAIM, KUBE_ADDED, c);
    cJSON_Delete(c);
    cJSON *cpu = demo_node_as("cpu-only", "cpu-1");
    ext_state_apply(st, KUBE_NODE, KUBE_ADDED, cpu);
    cJSON_Delete(cpu);
    ext_verbs v;
    ext_verbs_init(&v, st, policy_find("binpack"), NULL, NULL);
    char *pod = claim_pod();
    const char *names[] = {"dra-a", "dra-b", "cpu-1"};
    char *args = args_for(pod, names, 3);
    cJSON *f = call_verb(&v, ext_verb_filter, args, NULL);
    CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(f, "NodeNames")), 3);   /* never refused */
    cJSON_Delete(f);
    cJSON *p = call_verb(&v, ext_verb_prioritize, args, NULL);
    CHECK_INT(cJSON_GetArraySize(p), 3);   /* one score per node, so the loop below checks every node */
    cJSON *e;
    cJSON_ArrayForEach(e, p) CHECK_INT(cJSON_GetObjectItem(e, "Score")->valueint, 0);   /* neutral */
    cJSON_Delete(p);
    ext_reply r = {0};
    ext_debug_state(&v, NULL, &r);
    CHECK(r.body && strstr(r.body, "\"notJudged\"") && strstr(r.body, "CEL selector beyond what tessera understands"));
    ext_reply_free(&r);
    free(args);
    free(pod);
    ext_state_free(st);
}

/* ------------------------------------------------------------ the webhook and the scheduler configuration ---- */

TEST(dra_claim_pod_reaches_tessera_through_the_scheduler_config) {
    /* the webhook gives the claim pod of tessera-scheduler the marker... */
    char *pod = fx_text("pod-claim-template.json");   /* as created: before the webhook */
    size_t cap = strlen(pod) + 512;
    char *body = malloc(cap);
    snprintf(body, cap, "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"rv-1\","
             "\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"},\"operation\":\"CREATE\",\"namespace\":\"ml\","
             "\"object\":%s}}", pod);
    ext_webhook_config wc;
    ext_webhook_config_defaults(&wc);
    ext_reply r = {0};
    ext_webhook_mutate(&wc, body, strlen(body), &r);
    cJSON *rep = cJSON_Parse(r.body);
    const cJSON *resp = cJSON_GetObjectItem(rep, "response");
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(resp, "allowed")));
    const cJSON *patch = cJSON_GetObjectItem(resp, "patch");
    CHECK(cJSON_IsString(patch));
    size_t plen = 0;
    char *ptxt = patch ? ext_base64_decode(patch->valuestring, strlen(patch->valuestring), &plen) : NULL;
    CHECK(ptxt && strstr(ptxt, "tessera.io~1share") != NULL);
    free(ptxt);
    cJSON_Delete(rep);
    ext_reply_free(&r);
    free(body);
    free(pod);
    /* ...which the project's scheduler configuration lists as a managed resource kube-scheduler ignores, with
     * the filter and prioritize verbs: so kube-scheduler calls tessera's filter and prioritize for it */
    char *cfg = test_fixture("../../deploy/scheduler-config.yaml", NULL);
    const char *m = strstr(cfg, "- name: tessera.io/share");
    CHECK(m && strstr(m, "ignoredByScheduler: true") && strstr(m, "ignoredByScheduler: true") - m < 80);
    CHECK(strstr(cfg, "filterVerb: filter") && strstr(cfg, "prioritizeVerb: prioritize"));
    free(cfg);
}

/* ------------------------------------------------------------ randomized: both paths, never over-committed ---- */

TEST(dra_randomized_both_paths_never_overcommitted) {
    unsigned seed = 20251125;
    int mixed = 0, squeezed = 0;   /* steps with a claim and a pod on the node; with a pod pushed off its GPU */
    for (int round = 0; round < 40; round++) {
        ext_state_config cfg = {.standalone = true};
        ext_state *st = ext_state_new(&cfg);
        apply_fx(st, KUBE_DEVICECLASS, KUBE_ADDED, "deviceclass-gpu.json");
        apply_fx(st, KUBE_NODE, KUBE_ADDED, "node-both.json");
        apply_fx(st, KUBE_RESOURCESLICE, KUBE_ADDED, "slice-both.json");
        ext_verbs v;
        ext_verbs_init(&v, st, policy_find("binpack"), NULL, NULL);
        for (int step = 0; step < 30; step++) {
            int op = rand_r(&seed) % 4;
            char name[32], uid[64];
            snprintf(name, sizeof name, "r%d-%d", round, step);
            snprintf(uid, sizeof uid, "uid-%d-%d", round, step);
            if (op == 0) {
                /* a device-plugin pod through tessera: filter, then bind (refused when nothing is left) */
                char *pod = pod_json(name, uid, 0, "\"nvidia.com/gpu\":\"1\"", NULL, NULL);
                char err[512];
                place_pod(&v, pod, name, uid, "both", err, sizeof err);
                free(pod);
            } else if (op == 1) {
                /* DynamicResources allocates a device tessera may think taken (it does not ask): the claim wins,
                 * a pod that can no longer fit is reported over-committed, never double-counted */
                char c[700];
                snprintf(c, sizeof c, "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ml\",\"uid\":\"c-%s\"},\"spec\":{\"devices\":"
                         "{\"requests\":[{\"name\":\"g\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\"}}]}},\"status\":"
                         "{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"g\",\"driver\":\"gpu.nvidia.com\","
                         "\"pool\":\"both\",\"device\":\"gpu-%d\"}]}}}}", name, uid, rand_r(&seed) % 2);
                cJSON *o = cJSON_Parse(c);
                ext_state_apply(st, KUBE_RESOURCECLAIM, KUBE_ADDED, o);
                cJSON_Delete(o);
            } else if (op == 2) {
                /* something leaves: a random pod or claim of this round */
                char victim[128], vname[32];
                int s = rand_r(&seed) % (step + 1);
                snprintf(vname, sizeof vname, "r%d-%d", round, s);
                snprintf(victim, sizeof victim,
                         "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ml\"}}", vname);
                cJSON *o = cJSON_Parse(victim);
                ext_state_apply(st, KUBE_RESOURCECLAIM, KUBE_DELETED, o);
                cJSON_Delete(o);
                char pj[128];
                snprintf(pj, sizeof pj, "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\",\"uid\":\"uid-%d-%d\"}}",
                         vname, round, s);
                o = cJSON_Parse(pj);
                ext_state_apply(st, KUBE_POD, KUBE_DELETED, o);
                cJSON_Delete(o);
            } else {
                /* the slice is republished (new generation): the node is rebuilt with everyone put back */
                cJSON *o = fx("slice-both.json");
                cJSON_ReplaceItemInObject(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "spec"), "pool"), "generation",
                                          cJSON_CreateNumber(2 + step));
                ext_state_apply(st, KUBE_RESOURCESLICE, KUBE_MODIFIED, o);
                cJSON_Delete(o);
            }
            char why[256] = "";
            CHECK_MSG(all_nodes_consistent(st, why, sizeof why), "round %d step %d: %s", round, step, why);
            /* every GPU has at most one holder, whatever path it came by; never more holders than GPUs */
            ext_state_lock(st);
            const ext_node *n = ext_state_node(st, "both");
            int held = 0;
            for (int i = 0; n && n->m && i < n->m->ngpus; i++) {
                CHECK(n->m->gpus[i].nholders <= 1);
                held += n->m->gpus[i].nholders;
            }
            CHECK(n && n->m && n->m->ngpus == 2 && held <= 2);
            bool claim = false, pod = false;
            for (int i = 0; n && n->m && i < n->m->nallocs; i++) {
                claim |= !strncmp(n->m->allocs[i].uid, "claim:", 6);
                pod |= !strncmp(n->m->allocs[i].uid, "uid-", 4);
            }
            mixed += claim && pod;
            ext_state_stats ss;
            ext_state_get_stats(st, &ss);
            squeezed += ss.overcommitted > 0;
            ext_state_unlock(st);
        }
        ext_state_free(st);
    }
    CHECK_MSG(mixed > 0 && squeezed > 0, "mixed %d squeezed %d: the sequence must exercise both", mixed, squeezed);
}

/* ------------------------------------------------------------ simulator ---- */

#include "sim/cluster.h"
#include "sim/replay.h"
#include "sim/trace.h"

TEST(dra_sim_cluster_and_claim_trace_replay) {
    char err[300];
    const char *cj = "{\"nodeGroups\": ["
                     "{\"name\": \"dra-whole\", \"count\": 1, \"gpuProduct\": \"NVIDIA-A100-SXM4-40GB\", \"gpusPerNode\": 2, \"dra\": true},"
                     "{\"name\": \"dra-mig\", \"count\": 1, \"gpuProduct\": \"NVIDIA-A100-SXM4-40GB\", \"gpusPerNode\": 1,"
                     " \"sharing\": \"mig:3g.20gb+2x1g.5gb\", \"dra\": true},"
                     "{\"name\": \"plugin\", \"count\": 1, \"gpuProduct\": \"NVIDIA-A100-SXM4-40GB\", \"gpusPerNode\": 1}]}";
    sim_cluster *c = sim_cluster_from_json(cj, strlen(cj), NULL, err, sizeof err);
    CHECK_MSG(c, "%s", err);
    /* DRA groups are modelled from the ResourceSlice the driver would publish */
    model_node *n = c ? sim_group_node(&c->groups[1], NULL, "dra-mig-0", err, sizeof err) : NULL;
    CHECK_MSG(n && n->ngpus == 1 && n->gpus[0].dra_only && n->gpus[0].mode == MODEL_GPU_MIG && n->gpus[0].ninst == 3,
              "%s", err);
    model_node_free(n);
    char *back = c ? sim_cluster_to_json(c) : NULL;
    CHECK(back && strstr(back, "\"dra\":\ttrue"));
    free(back);
    /* mig:on-demand with DRA: the driver's DynamicMIG (the GPU and its placements published) */
    const char *dyn = "{\"nodeGroups\": [{\"name\": \"d\", \"count\": 1, \"gpuProduct\": \"NVIDIA-H100-80GB-HBM3\","
                      " \"gpusPerNode\": 2, \"sharing\": \"mig:on-demand\", \"dra\": true}]}";
    sim_cluster *cd = sim_cluster_from_json(dyn, strlen(dyn), NULL, err, sizeof err);
    model_node *dn = cd ? sim_group_node(&cd->groups[0], NULL, "d-0", err, sizeof err) : NULL;
    CHECK_MSG(dn && dn->ngpus == 2 && dn->gpus[1].mig_dynamic && dn->gpus[1].dra_only, "%s", err);
    model_node_free(dn);
    sim_cluster_free(cd);
    /* time-slicing belongs on the claim with DRA */
    const char *bad = "{\"nodeGroups\": [{\"name\": \"x\", \"count\": 1, \"gpuProduct\": \"NVIDIA-A100-SXM4-40GB\","
                      " \"gpusPerNode\": 1, \"sharing\": \"timeslice:4\", \"dra\": true}]}";
    sim_cluster *cb = sim_cluster_from_json(bad, strlen(bad), NULL, err, sizeof err);
    CHECK(!cb && strstr(err, "set on the claim"));
    /* claim-shaped requests: 2 whole GPUs, a MIG slice by profile, a product selector with time-slicing config;
     * and a device-plugin pod, which DRA-only GPUs cannot serve */
#define CLAIM(cls, extra) "\"pod\": {\"claim\": {\"devices\": {\"requests\": [{\"name\": \"g\", \"exactly\": {\"deviceClassName\": \"" cls "\"" extra "}}]"
    const char *tj =
        "{\"workloads\": ["
        "{\"id\": \"w2\", \"kind\": \"training\", \"arrival\": 0, \"duration\": 100, " CLAIM("gpu.nvidia.com", ", \"count\": 2") "}}}},"
        "{\"id\": \"m1\", \"kind\": \"notebook\", \"arrival\": 1, \"duration\": 100, " CLAIM("mig.nvidia.com",
        ", \"selectors\": [{\"cel\": {\"expression\": \"device.attributes['gpu.nvidia.com'].profile == '1g.5gb'\"}}]") "}}}},"
        "{\"id\": \"ts\", \"kind\": \"inference\", \"arrival\": 2, \"duration\": 50, " CLAIM("gpu.nvidia.com",
        ", \"selectors\": [{\"cel\": {\"expression\": \"device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-40GB'\"}}]")
        ", \"config\": [{\"requests\": [\"g\"], \"opaque\": {\"driver\": \"gpu.nvidia.com\", \"parameters\": {\"apiVersion\": "
        "\"resource.nvidia.com/v1beta1\", \"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"TimeSlicing\"}}}}]}}}},"
        "{\"id\": \"dp\", \"kind\": \"training\", \"arrival\": 3, \"duration\": 10, \"pod\": {\"resources\": {\"requests\": {\"nvidia.com/gpu\": \"1\"}}}}"
        "]}";
    sim_trace *t = sim_trace_from_json(tj, strlen(tj), err, sizeof err);
    CHECK_MSG(t, "%s", err);
    CHECK(t && t->shapes[t->w[0].shape].req.via_dra && t->shapes[t->w[0].shape].req.count == 2);
    CHECK(t && t->shapes[t->w[1].shape].req.kind == MODEL_REQ_MIG);
    if (c && t) {
        sim_replay_opts o;
        sim_replay_defaults(&o);
        o.policy = "binpack";
        o.check = true;
        sim_replay_result r;
        CHECK_INT(sim_replay(c, t, &o, &r, err, sizeof err), 0);
        /* w2 takes dra-whole's two GPUs, m1 a 1g.5gb on dra-mig, ts waits for dra-whole (the plugin node's GPU is
         * not DRA's), dp runs at once on the plugin node */
        CHECK_MSG(r.placed == 4, "placed %d unsched %d: %g %g %g %g", r.placed, r.unschedulable, r.start[0], r.start[1], r.start[2], r.start[3]);
        CHECK_MSG(fabs((r.start[0]) - (0)) < 1e-9, "%g", (double)(r.start[0]));
        CHECK_MSG(fabs((r.start[1]) - (1)) < 1e-9, "%g", (double)(r.start[1]));
        CHECK_MSG(fabs((r.start[2]) - (100)) < 1e-9, "%g", (double)(r.start[2]));
        CHECK_MSG(fabs((r.start[3]) - (3)) < 1e-9, "%g", (double)(r.start[3]));
        sim_replay_result_free(&r);
    }
    /* a claim the simulator cannot judge is an error naming it */
    const char *tb = "{\"workloads\": [{\"id\": \"x\", \"kind\": \"training\", \"arrival\": 0, \"duration\": 1, "
                     CLAIM("gpu.nvidia.com", ", \"allocationMode\": \"All\"") "}}}}]}";
    sim_trace *t2 = sim_trace_from_json(tb, strlen(tb), err, sizeof err);
    CHECK(!t2 && strstr(err, "allocationMode All"));
    sim_trace_free(t);
    sim_cluster_free(c);
}

/* ------------------------------------------------------------ bind records exactly what was allocated ---- */

/* claim-pending.json allocated to `ndev` devices of pool `pool` named dev-<i>, reserved for the template pod. */
static char *claim_allocated_text(const char *pool, const char *devfmt, int ndev) {
    cJSON *claim = fx("claim-pending.json");
    cJSON *status = cJSON_GetObjectItem(claim, "status");
    cJSON *alloc = cJSON_AddObjectToObject(status, "allocation");
    cJSON *res = cJSON_AddArrayToObject(cJSON_AddObjectToObject(alloc, "devices"), "results");
    for (int i = 0; i < ndev; i++) {
        char dev[300];
        snprintf(dev, sizeof dev, devfmt, i);
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "request", "gpu");
        cJSON_AddStringToObject(r, "driver", "gpu.nvidia.com");
        cJSON_AddStringToObject(r, "pool", pool);
        cJSON_AddStringToObject(r, "device", dev);
        cJSON_AddItemToArray(res, r);
    }
    cJSON_AddItemToObject(status, "reservedFor",
                          cJSON_Parse("[{\"resource\":\"pods\",\"name\":\"train-1\",\"uid\":\"p0a1b2c3-0000-4000-8000-00000000000b\"}]"));
    char *t = cJSON_PrintUnformatted(claim);
    cJSON_Delete(claim);
    return t;
}

static const char *BIND_TRAIN1 = "{\"PodName\":\"train-1\",\"PodNamespace\":\"ml\",\"PodUID\":\"p0a1b2c3-0000-4000-8000-00000000000b\","
                                 "\"Node\":\"dra-a\"}";
#define CLAIM_GET "GET /apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/train-1-gpu-q8m4w"

/* The bind's Error text ("" when it worked). */
static void bind_error(ext_verbs *v, char *out, size_t len) {
    cJSON *b = call_verb(v, ext_verb_bind, BIND_TRAIN1, NULL);
    const cJSON *e = cJSON_GetObjectItem(b, "Error");
    snprintf(out, len, "%s", cJSON_IsString(e) ? e->valuestring : "(no Error)");
    cJSON_Delete(b);
}

typedef struct late_claim { ext_state *st; char *text; int after_ms; } late_claim;
static void *apply_late(void *arg) {
    late_claim *l = arg;
    usleep((useconds_t)l->after_ms * 1000);
    cJSON *o = cJSON_Parse(l->text);
    ext_state_apply(l->st, KUBE_RESOURCECLAIM, KUBE_MODIFIED, o);
    cJSON_Delete(o);
    return NULL;
}

TEST(dra_bind_records_an_allocation_written_just_before_bind) {
    char err[256], url[128];
    fake_api *api = fake_api_start(0, err, sizeof err);
    CHECK_MSG(api, "%s", err);
    fake_api_url(api, url, sizeof url);
    put_fx(api, "pods", "pod-claim-template.json");
    /* the cache (fed by hand: no watch) has the claim as the resourceclaim controller made it */
    ext_state *st = dra_state();
    apply_fx(st, KUBE_RESOURCECLAIM, KUBE_ADDED, "claim-pending.json");
    kube_config kc;
    kube_config_defaults(&kc);
    snprintf(kc.api_url, sizeof kc.api_url, "%s", url);
    kube_client *k = kube_new(&kc, err, sizeof err);
    CHECK_MSG(k, "%s", err);
    ext_verbs v;
    char posted[POSTED_LEN] = "";
    ext_verbs_init(&v, st, policy_find("binpack"), capture_bind, posted);
    v.kube = k;
    v.dra_bind_wait_ms = 100;
    char *pod = claim_pod();
    const char *names[] = {"dra-a"};
    char *args = args_for(pod, names, 1);
    cJSON_Delete(call_verb(&v, ext_verb_filter, args, NULL));

    /* 1. DynamicResources' PreBind wrote the allocation; the watch event is still on its way: the bind reads it */
    char *two = claim_allocated_text("dra-a", "gpu-%d", 2);
    fake_api_put(api, "resourceclaims", two);
    char berr[2048];
    bind_error(&v, berr, sizeof berr);
    CHECK_STR(berr, "");
    CHECK_STR(posted, "ml/train-1@dra-a {\"tessera.io/dra-allocation\":\"train-1-gpu-q8m4w:dra-a/gpu-0,"
                      "train-1-gpu-q8m4w:dra-a/gpu-1\"}");
    CHECK_INT(fake_api_requests(api, CLAIM_GET), 1);

    /* 2. the event arrives while bind waits on the watch: recorded from the cache, no read of the API */
    posted[0] = 0;
    v.dra_bind_wait_ms = TEST_PATIENCE_MS;   /* the wait ends with the event, however late a loaded machine brings it */
    late_claim l = {st, two, 40};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, apply_late, &l) == 0);
    bind_error(&v, berr, sizeof berr);
    pthread_join(th, NULL);
    CHECK_STR(berr, "");
    CHECK(strstr(posted, "train-1-gpu-q8m4w:dra-a/gpu-0,train-1-gpu-q8m4w:dra-a/gpu-1") != NULL);
    CHECK_INT(fake_api_requests(api, CLAIM_GET), 1);

    /* 3. not allocated anywhere: no Binding, and the error says what bind waited for */
    apply_fx(st, KUBE_RESOURCECLAIM, KUBE_MODIFIED, "claim-pending.json");
    put_fx(api, "resourceclaims", "claim-pending.json");
    posted[0] = 0;
    v.dra_bind_wait_ms = 50;
    bind_error(&v, berr, sizeof berr);
    CHECK_CONTAINS(berr, "waited");
    CHECK_CONTAINS(berr, "the allocation of claim ml/train-1-gpu-q8m4w");
    CHECK_CONTAINS(berr, "claim ml/train-1-gpu-q8m4w is not allocated there either");
    CHECK_STR(posted, "");
    CHECK_INT((int)v.bind_outcomes[EXT_BIND_DRA_UNSEEN], 1);

    /* 4. standalone (no API to read): refused the same way, never bound with a partial record */
    v.kube = NULL;
    bind_error(&v, berr, sizeof berr);
    CHECK_CONTAINS(berr, "the allocation of claim ml/train-1-gpu-q8m4w");
    CHECK_CONTAINS(berr, "standalone");
    CHECK_STR(posted, "");
    free(two);
    free(args);
    free(pod);
    kube_free(k);
    ext_state_free(st);
    fake_api_free(api);
}

TEST(dra_bind_records_eight_devices_with_long_names_whole) {
    ext_state *st = dra_state();
    /* a pool named as long as a node name may be, MIG device names of the current driver */
    char pool[254];
    memset(pool, 'p', 253);
    pool[253] = 0;
    memcpy(pool, "node-", 5);
    char *eight = claim_allocated_text(pool, "gpu-%d-mig-1g10gb-19-6", 8);
    cJSON *o = cJSON_Parse(eight);
    ext_state_apply(st, KUBE_RESOURCECLAIM, KUBE_ADDED, o);
    cJSON_Delete(o);
    ext_verbs v;
    char posted[POSTED_LEN] = "";
    ext_verbs_init(&v, st, policy_find("binpack"), capture_bind, posted);
    char *pod = claim_pod();
    const char *names[] = {"dra-a"};
    char *args = args_for(pod, names, 1);
    cJSON_Delete(call_verb(&v, ext_verb_filter, args, NULL));
    char berr[2048];
    bind_error(&v, berr, sizeof berr);
    CHECK_STR(berr, "");
    /* the annotation back: eight entries, each exactly claim:pool/device */
    const char *j = strchr(posted, '{');
    cJSON *anns = j ? cJSON_Parse(j) : NULL;
    const cJSON *a = cJSON_GetObjectItem(anns, EXT_ANN_DRA_ALLOCATION);
    CHECK_MSG(cJSON_IsString(a), "%.300s", posted);
    char *copy = strdup(cJSON_IsString(a) ? a->valuestring : "");
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save), n++) {
        char want[600];
        snprintf(want, sizeof want, "train-1-gpu-q8m4w:%s/gpu-%d-mig-1g10gb-19-6", pool, n);
        CHECK_STR(tok, want);
    }
    CHECK_INT(n, 8);
    free(copy);
    cJSON_Delete(anns);
    free(eight);
    free(args);
    free(pod);
    ext_state_free(st);
}

/* ------------------------------------------------------------ claim pods are GPU work for every policy ---- */

/* Scores of dra-a and dra-c for the pod, by the verbs (0..10) and by the policy on the cached models (raw). */
typedef struct two_scores { int a, c; double raw_a, raw_c; } two_scores;

static two_scores prioritize_two(ext_verbs *v, const char *pod, const model_request *raw_req) {
    const char *names[] = {"dra-a", "dra-c"};
    char *args = args_for(pod, names, 2);
    cJSON *p = call_verb(v, ext_verb_prioritize, args, NULL);
    two_scores t = {-1, -1, 0, 0};
    cJSON *e;
    cJSON_ArrayForEach(e, p) {
        const char *h = cJSON_GetObjectItem(e, "Host")->valuestring;
        int s = cJSON_GetObjectItem(e, "Score")->valueint;
        if (!strcmp(h, "dra-a")) t.a = s;
        if (!strcmp(h, "dra-c")) t.c = s;
    }
    cJSON_Delete(p);
    free(args);
    ext_state_lock(v->st);
    policy_ctx ctx = v->ctx;
    policy_result ra, rc;
    if (policy_score(v->pol, raw_req, ext_state_node(v->st, "dra-a")->m, &ctx, &ra, NULL, 0) == 0) t.raw_a = ra.raw;
    if (policy_score(v->pol, raw_req, ext_state_node(v->st, "dra-c")->m, &ctx, &rc, NULL, 0) == 0) t.raw_c = rc.raw;
    ext_state_unlock(v->st);
    return t;
}

TEST(dra_claim_pod_scores_as_the_device_plugin_pod_for_fgd_and_fgd_pack) {
    /* the same two nodes, once with the device plugin (node-both's Node alone: 2 x A100-SXM4-40GB), once
     * published through DRA; on dra-a one GPU is taken (a pod there, a claim here); the target workload is
     * estimated online from the arrivals, as --online-workload does */
    ext_state_config cfg = {.standalone = true};
    ext_state *sp = ext_state_new(&cfg);
    const char *pn[] = {"dra-a", "dra-c"};
    for (int i = 0; i < 2; i++) {
        cJSON *n = fx("node-both.json");
        cJSON_ReplaceItemInObject(cJSON_GetObjectItem(n, "metadata"), "name", cJSON_CreateString(pn[i]));
        ext_state_apply(sp, KUBE_NODE, KUBE_ADDED, n);
        cJSON_Delete(n);
    }
    char *held = pod_json("held", "uid-held", 0, "\"nvidia.com/gpu\":\"1\"", NULL, "dra-a");
    cJSON *ho = cJSON_Parse(held);
    ext_state_apply(sp, KUBE_POD, KUBE_ADDED, ho);
    cJSON_Delete(ho);
    free(held);
    ext_state *sd = dra_state();
    add_dra_c(sd);
    apply_fx(sd, KUBE_RESOURCECLAIM, KUBE_ADDED, "claim-allocated.json");   /* dra-a: gpu-1 taken */
    apply_fx(sd, KUBE_RESOURCECLAIM, KUBE_ADDED, "claim-pending.json");
    ext_state_lock(sp);
    ext_state_lock(sd);
    CHECK_INT(ext_state_node(sp, "dra-a")->m->nlive, 1);
    CHECK_INT(ext_state_node(sd, "dra-a")->m->nlive, 1);
    ext_state_unlock(sd);
    ext_state_unlock(sp);
    /* the claim pod and the pod asking the same as nvidia.com/gpu (CPU and memory as the template pod's) */
    char *claim = claim_pod();
    char *plain = pod_json("train-1", "p0a1b2c3-0000-4000-8000-00000000000b", 0,
                           "\"nvidia.com/gpu\":\"1\",\"cpu\":\"4\",\"memory\":\"16Gi\"", NULL, NULL);
    model_request whole = {.kind = MODEL_REQ_WHOLE, .count = 1, .cpu_milli = 4000};
    model_request whole_dra = whole;
    whole_dra.via_dra = true;
    const char *pols[] = {"fgd", "fgd-pack"};
    for (int k = 0; k < 2; k++) {
        ext_verbs vp, vd;
        ext_verbs_init(&vp, sp, policy_find(pols[k]), NULL, NULL);
        ext_verbs_init(&vd, sd, policy_find(pols[k]), NULL, NULL);
        char oerr[128];
        vp.online = policy_online_new(100, POLICY_ONLINE_WARMUP, oerr, sizeof oerr);
        vd.online = policy_online_new(100, POLICY_ONLINE_WARMUP, oerr, sizeof oerr);
        /* a 2-GPU task arrived before: dra-a's lone free GPU is a fragment for it, dra-c's pair is not */
        model_request two = {.kind = MODEL_REQ_WHOLE, .count = 2, .cpu_milli = 4000};
        CHECK(policy_online_observe(vp.online, &two, oerr, sizeof oerr) >= 0);
        CHECK(policy_online_observe(vd.online, &two, oerr, sizeof oerr) >= 0);
        vp.ctx.workload = policy_online_current(vp.online);
        vd.ctx.workload = policy_online_current(vd.online);
        two_scores p = prioritize_two(&vp, plain, &whole);
        two_scores d = prioritize_two(&vd, claim, &whole_dra);
        CHECK_MSG(p.a == d.a && p.c == d.c, "%s: device plugin %d/%d, claim %d/%d", pols[k], p.a, p.c, d.a, d.c);
        CHECK_MSG(fabs(p.raw_a - d.raw_a) < 1e-9 && fabs(p.raw_c - d.raw_c) < 1e-9, "%s raw: %g/%g vs %g/%g", pols[k],
                  p.raw_a, p.raw_c, d.raw_a, d.raw_c);
        /* and the used node wins by the same margin, not on the tie-break */
        CHECK_MSG(d.a > d.c, "%s: claim pod dra-a %d, dra-c %d (raw %g, %g)", pols[k], d.a, d.c, d.raw_a, d.raw_c);
        CHECK_INT(vd.online ? (int)policy_online_arrivals(vd.online) : -1, 2);   /* the claim pod arrived */
        policy_online_free(vp.online);
        policy_online_free(vd.online);
    }
    /* the metric's workload from the cache counts the claims as GPU work too */
    ext_state_lock(sd);
    policy_workload *w = ext_workload_from_state(sd, false);
    CHECK(w != NULL);
    bool gpu_type = false;
    for (int i = 0; w && i < policy_workload_count(w); i++) gpu_type |= policy_workload_type(w, i)->kind == MODEL_REQ_WHOLE;
    CHECK(gpu_type);
    policy_workload_free(w);
    ext_state_unlock(sd);
    free(claim);
    free(plain);
    ext_state_free(sp);
    ext_state_free(sd);
}

TEST(dra_workload_file_counts_claim_pods_as_gpu_work) {
    /* a pod of the template, the template, and a pod asking nvidia.com/gpu: one shape of two tasks */
    char *pod = claim_pod();
    char *tmpl = fx_text("claimtemplate-one-gpu.json");
    char *plain = pod_json("p", "uid-p", 0, "\"nvidia.com/gpu\":\"1\",\"cpu\":\"4\",\"memory\":\"16Gi\"", NULL, NULL);
    size_t cap = strlen(pod) + strlen(tmpl) + strlen(plain) + 64;
    char *file = malloc(cap);
    snprintf(file, cap, "{\"kind\":\"List\",\"items\":[%s,%s,%s]}", pod, tmpl, plain);
    char err[256];
    policy_workload *w = ext_workload_from_json(file, strlen(file), false, err, sizeof err);
    CHECK_MSG(w, "%s", err);
    CHECK_INT(policy_workload_count(w), 1);
    CHECK(w && policy_workload_type(w, 0)->kind == MODEL_REQ_WHOLE && policy_workload_type(w, 0)->count == 2);
    policy_workload_free(w);
    /* without the template the claim cannot be read: a CPU-only task, as before */
    snprintf(file, cap, "[%s]", pod);
    w = ext_workload_from_json(file, strlen(file), false, err, sizeof err);
    CHECK_MSG(w, "%s", err);
    CHECK(w && policy_workload_type(w, 0)->kind == MODEL_REQ_NONE);
    policy_workload_free(w);
    free(file);
    free(pod);
    free(tmpl);
    free(plain);
}

/* ------------------------------------------------------------ extended resources backed by DRA ---- */

static void put_obj(fake_api *api, const char *kind, cJSON *o) {
    char *t = cJSON_PrintUnformatted(o);
    fake_api_put(api, kind, t);
    free(t);
    cJSON_Delete(o);
}

static int api_bind(void *user, const char *ns, const char *name, const char *uid, const char *node,
                    const cJSON *annotations, char *err, size_t errlen) {
    int code = kube_bind(user, ns, name, uid, node, annotations, err, errlen);
    return code == 200 || code == 201 ? 0 : -1;
}

static uint64_t settle_pod_events;   /* pod events the cache must have seen first (the bind's, after it) */

static bool ext_settled(void *p) {
    ext_state *st = p;
    ext_state_lock(st);
    const ext_node *n = ext_state_node(st, "dra-a");
    const ext_pod *pod = ext_state_pod(st, "uid-ext-1");
    ext_state_stats ss;
    ext_state_get_stats(st, &ss);
    bool ok = n && n->m && n->m->nlive == 2 && ss.events[KUBE_POD] >= settle_pod_events && ss.overcommitted == 0 &&
              !(pod && pod->holds);
    ext_state_unlock(st);
    return ok;
}

/* What kube-scheduler's DynamicResources does in PreBind for a pod's extended resources: the claim (annotated,
 * owned by the pod, allocated to dra-a/gpu-0, reserved for it), then the pod's status naming it. */
static void prebind_extended(fake_api *api) {
    cJSON *c = cJSON_Parse(
        "{\"metadata\":{\"name\":\"ext-1-extended-resources-x7k2q\",\"namespace\":\"default\","
        "\"uid\":\"c0a1b2c3-0000-4000-8000-0000000000e1\","
        "\"annotations\":{\"resource.kubernetes.io/extended-resource-claim\":\"true\"},"
        "\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"name\":\"ext-1\",\"uid\":\"uid-ext-1\",\"controller\":true}]},"
        "\"spec\":{\"devices\":{\"requests\":[{\"name\":\"container-0-request-0\",\"exactly\":{\"deviceClassName\":"
        "\"gpu.nvidia.com\",\"allocationMode\":\"ExactCount\",\"count\":1}}]}},"
        "\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"container-0-request-0\",\"driver\":"
        "\"gpu.nvidia.com\",\"pool\":\"dra-a\",\"device\":\"gpu-0\"}]}},"
        "\"reservedFor\":[{\"resource\":\"pods\",\"name\":\"ext-1\",\"uid\":\"uid-ext-1\"}]}}");
    put_obj(api, "resourceclaims", c);
    fake_api_patch(api, "pods", "default", "ext-1",
                   "{\"status\":{\"extendedResourceClaimStatus\":{\"resourceClaimName\":\"ext-1-extended-resources-x7k2q\","
                   "\"requestMappings\":[{\"containerName\":\"main\",\"resourceName\":\"nvidia.com/gpu\","
                   "\"requestName\":\"container-0-request-0\"}]}}}");
}

TEST(dra_extended_resource_pod_placed_accounted_once_and_recovered) {
    char err[256], url[128];
    fake_api *api = fake_api_start(0, err, sizeof err);
    CHECK_MSG(api, "%s", err);
    fake_api_url(api, url, sizeof url);
    put_fx(api, "nodes", "node-dra-a.json");
    put_obj(api, "nodes", dra_c_node());
    put_fx(api, "deviceclasses", "deviceclass-gpu.json");   /* extendedResourceName: nvidia.com/gpu */
    put_fx(api, "resourceslices", "slice-dra-a.json");
    put_obj(api, "resourceslices", dra_c_slice());
    put_fx(api, "resourceclaims", "claim-allocated.json");  /* dra-a: gpu-1 taken */
    char *pod = pod_json("ext-1", "uid-ext-1", 0, "\"nvidia.com/gpu\":\"1\"", NULL, NULL);
    fake_api_put(api, "pods", pod);
    dra_run a;
    CHECK(dra_start(&a, url));
    ext_verbs v;
    ext_verbs_init(&v, a.st, policy_find("binpack"), api_bind, a.k);
    v.kube = a.k;
    const char *names[] = {"dra-a", "dra-c"};
    char *args = args_for(pod, names, 2);
    /* filter: both DRA nodes can serve nvidia.com/gpu through the class (no "ask for it with a ResourceClaim") */
    cJSON *f = call_verb(&v, ext_verb_filter, args, NULL);
    CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(f, "NodeNames")), 2);
    cJSON_Delete(f);
    /* prioritize with the same policy as any GPU pod: binpack takes dra-a's last GPU */
    cJSON *p = call_verb(&v, ext_verb_prioritize, args, NULL);
    int sa = -1, sc = -1;
    cJSON *e;
    cJSON_ArrayForEach(e, p) {
        const char *h = cJSON_GetObjectItem(e, "Host")->valuestring;
        if (!strcmp(h, "dra-a")) sa = cJSON_GetObjectItem(e, "Score")->valueint;
        if (!strcmp(h, "dra-c")) sc = cJSON_GetObjectItem(e, "Score")->valueint;
    }
    cJSON_Delete(p);
    CHECK_MSG(sa > sc, "dra-a %d, dra-c %d", sa, sc);
    /* PreBind makes and allocates the claim; bind records it (from the watch, or read from the API) */
    prebind_extended(api);
    char berr[2048];
    cJSON *b = call_verb(&v, ext_verb_bind, "{\"PodName\":\"ext-1\",\"PodNamespace\":\"default\",\"PodUID\":\"uid-ext-1\","
                                            "\"Node\":\"dra-a\"}", NULL);
    snprintf(berr, sizeof berr, "%s", cJSON_GetObjectItem(b, "Error")->valuestring);
    cJSON_Delete(b);
    CHECK_STR(berr, "");
    char *bb = fake_api_binding_body(api, 0);
    CHECK(bb && strstr(bb, "ext-1-extended-resources-x7k2q:dra-a/gpu-0"));
    free(bb);
    /* accounted once: the claim holds gpu-0, the pod holds nothing and is not over-committed (once the watch has
     * shown the pod added, given its status, and bound) */
    settle_pod_events = 3;
    CHECK(wait_until(ext_settled, a.st));
    char h1[1024];
    dra_holdings(a.st, h1, sizeof h1);
    CHECK_CONTAINS(h1, "dra-a/" UA0 "=claim:c0a1b2c3-0000-4000-8000-0000000000e1");
    ext_state_lock(a.st);
    ext_state_stats ss;
    ext_state_get_stats(a.st, &ss);
    CHECK_INT(ss.overcommitted, 0);
    char why[256];
    CHECK_MSG(model_node_check(ext_state_node(a.st, "dra-a")->m, why, sizeof why), "%s", why);
    ext_state_unlock(a.st);
    dra_stop(&a);
    /* after a restart, from lists alone: the same holdings, nothing over-committed */
    dra_run r;
    CHECK(dra_start(&r, url));
    settle_pod_events = 1;
    CHECK(wait_until(ext_settled, r.st));
    char h2[1024];
    dra_holdings(r.st, h2, sizeof h2);
    CHECK_STR(h2, h1);
    dra_stop(&r);
    free(args);
    free(pod);
    fake_api_free(api);
}

TEST(dra_lean_scoring_paths_agree_with_model_fit_on_dra_nodes) {
    /* every GPU of a DRA-only node is reachable by a claim: the policies' lean paths (which assume that) must
     * give what the generic path over model_fit gives, for every policy, on a used and a free node */
    ext_state *st = dra_state();
    add_dra_c(st);
    apply_fx(st, KUBE_RESOURCECLAIM, KUBE_ADDED, "claim-allocated.json");
    policy_workload *wl = policy_workload_new();
    model_request two = {.kind = MODEL_REQ_WHOLE, .count = 2}, one = {.kind = MODEL_REQ_WHOLE, .count = 1};
    char err[256];
    CHECK(policy_workload_add(wl, &two, 3, err, sizeof err) == 0 && policy_workload_add(wl, &one, 5, err, sizeof err) == 0 &&
          policy_workload_finish(wl, 95, err, sizeof err) == 0);
    const char *pols[] = {"binpack", "spread", "bestfit", "dotprod", "gpupacking", "gpuclustering", "fgd", "fgd-pack"};
    model_request reqs[3] = {{.kind = MODEL_REQ_WHOLE, .count = 1, .via_dra = true, .cpu_milli = 1000},
                             {.kind = MODEL_REQ_WHOLE, .count = 2, .via_dra = true},
                             {.kind = MODEL_REQ_MIG, .count = 1, .via_dra = true, .mig_profile = "1g.5gb"}};
    apply_fx(st, KUBE_RESOURCECLAIM, KUBE_ADDED, "claim-mig.json");   /* dra-b: the 1g.5gb@6 taken */
    ext_state_lock(st);
    const char *nodes[] = {"dra-a", "dra-c", "dra-b"};
    for (size_t p = 0; p < sizeof pols / sizeof pols[0]; p++)
        for (int r = 0; r < 3; r++)
            for (int k = 0; k < 3; k++) {
                policy_ctx ctx;
                policy_ctx_init(&ctx, 7);
                ctx.workload = wl;
                const model_node *m = ext_state_node(st, nodes[k])->m;
                policy_result lean, generic;
                CHECK(policy_score(policy_find(pols[p]), &reqs[r], m, &ctx, &lean, NULL, 0) == 0);
                policy_test_generic_only = true;
                CHECK(policy_score(policy_find(pols[p]), &reqs[r], m, &ctx, &generic, NULL, 0) == 0);
                policy_test_generic_only = false;
                CHECK_MSG(lean.feasible == generic.feasible && fabs(lean.raw - generic.raw) < 1e-9 &&
                          lean.choice.ngpus == generic.choice.ngpus &&
                          !memcmp(lean.choice.gpu, generic.choice.gpu, (size_t)lean.choice.ngpus),
                          "%s, %d GPU(s) on %s: lean %d %g, generic %d %g", pols[p], reqs[r].count, nodes[k], lean.feasible,
                          lean.raw, generic.feasible, generic.raw);
            }
    ext_state_unlock(st);
    policy_workload_free(wl);
    ext_state_free(st);
}

TEST(dra_extended_resource_follows_the_device_class) {
    ext_state *st = dra_state();   /* gpu.nvidia.com maps nvidia.com/gpu */
    ext_verbs v;
    ext_verbs_init(&v, st, policy_find("binpack"), NULL, NULL);
    char *pod = pod_json("x", "uid-x", 0, "\"nvidia.com/gpu\":\"2\"", NULL, NULL);
    const char *names[] = {"dra-a", "dra-b"};
    char *args = args_for(pod, names, 2);
    /* dra-a publishes 2 whole GPUs; dra-b one whole GPU and MIG devices, too few for 2 */
    cJSON *f = call_verb(&v, ext_verb_filter, args, NULL);
    CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(f, "NodeNames")), 1);
    const cJSON *why = cJSON_GetObjectItem(cJSON_GetObjectItem(f, "FailedAndUnresolvableNodes"), "dra-b");
    CHECK(cJSON_IsString(why) && strstr(why->valuestring, "DRA publishes 1 matching device here"));
    cJSON_Delete(f);
    /* the chart without the mapping (before Kubernetes 1.34): the device plugin's path, which DRA-only GPUs refuse */
    cJSON *cls = fx("deviceclass-gpu.json");
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(cls, "spec"), "extendedResourceName");
    ext_state_apply(st, KUBE_DEVICECLASS, KUBE_MODIFIED, cls);
    f = call_verb(&v, ext_verb_filter, args, NULL);
    CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(f, "NodeNames")), 0);
    why = cJSON_GetObjectItem(cJSON_GetObjectItem(f, "FailedAndUnresolvableNodes"), "dra-a");
    CHECK(cJSON_IsString(why) && strstr(why->valuestring, "ask for it with a ResourceClaim"));
    cJSON_Delete(f);
    cJSON_Delete(cls);
    free(args);
    free(pod);
    ext_state_free(st);
}

/* ------------------------------------------------------------ claims' constraints through the verbs ---- */

/* claim-allocated.json moved to pool (a node's name), holding gpu-<minor> (claim name and uid made unique). */
static void p8_hold(ext_state *st, const char *pool, int minor) {
    static int seq;
    cJSON *c = fx("claim-allocated.json");
    char s[64];
    snprintf(s, sizeof s, "held-%s-%d", pool, minor);
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(c, "metadata"), "name", cJSON_CreateString(s));
    snprintf(s, sizeof s, "c0a1b2c3-0000-4000-8000-0000000009%02d", ++seq % 100);
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(c, "metadata"), "uid", cJSON_CreateString(s));
    cJSON *r0 = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "status"),
                                                                                               "allocation"), "devices"), "results"), 0);
    cJSON_ReplaceItemInObject(r0, "pool", cJSON_CreateString(pool));
    snprintf(s, sizeof s, "gpu-%d", minor);
    cJSON_ReplaceItemInObject(r0, "device", cJSON_CreateString(s));
    ext_state_apply(st, KUBE_RESOURCECLAIM, KUBE_ADDED, c);
    cJSON_Delete(c);
}

/* The pod's pending claim (claim-pending.json) asking count GPUs, that share a PCIe root unless plain. */
static void p8_claim_as(ext_state *st, int count, bool plain) {
    cJSON *c = fx("claim-pending.json");
    cJSON *devs = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "spec"), "devices");
    cJSON *ex = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(devs, "requests"), 0), "exactly");
    cJSON_ReplaceItemInObject(ex, "count", cJSON_CreateNumber(count));
    if (!plain)
        cJSON_AddItemToObject(devs, "constraints", cJSON_Parse("[{\"matchAttribute\":\"resource.kubernetes.io/pcieRoot\"}]"));
    ext_state_apply(st, KUBE_RESOURCECLAIM, KUBE_MODIFIED, c);
    cJSON_Delete(c);
}

static void p8_claim(ext_state *st, int count) { p8_claim_as(st, count, false); }

/* Two copies of the dra-p8 server (tests/fixtures/dra: 8 GPUs, 4 under each of two PCIe roots): dra-p8 with gpu-1
 * taken, dra-p8b (the same Node and slice renamed) with gpu-1 and gpu-5 taken. */
static ext_state *p8_state(void) {
    ext_state *st = dra_state();
    apply_fx(st, KUBE_NODE, KUBE_ADDED, "node-dra-p8.json");
    apply_fx(st, KUBE_RESOURCESLICE, KUBE_ADDED, "slice-dra-p8.json");
    cJSON *nb = fx("node-dra-p8.json"), *sb = fx("slice-dra-p8.json");
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(nb, "metadata"), "name", cJSON_CreateString("dra-p8b"));
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(sb, "metadata"), "name", cJSON_CreateString("dra-p8b-slice"));
    cJSON *spec = cJSON_GetObjectItem(sb, "spec");
    cJSON_ReplaceItemInObject(spec, "nodeName", cJSON_CreateString("dra-p8b"));
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(spec, "pool"), "name", cJSON_CreateString("dra-p8b"));
    ext_state_apply(st, KUBE_NODE, KUBE_ADDED, nb);
    ext_state_apply(st, KUBE_RESOURCESLICE, KUBE_ADDED, sb);
    cJSON_Delete(nb);
    cJSON_Delete(sb);
    p8_hold(st, "dra-p8", 1);
    p8_hold(st, "dra-p8b", 1);
    p8_hold(st, "dra-p8b", 5);
    return st;
}

TEST(dra_match_attribute_claim_filter_prioritize_bind) {
    ext_state *st = p8_state();
    ext_verbs v;
    char posted[POSTED_LEN] = "";
    ext_verbs_init(&v, st, policy_find("binpack"), capture_bind, posted);
    char *pod = claim_pod();
    const char *names[] = {"dra-p8", "dra-p8b"};
    char *args = args_for(pod, names, 2);
    /* 5 GPUs under one root: no node publishes that many together; the reason names the claim and the constraint */
    p8_claim(st, 5);
    cJSON *f = call_verb(&v, ext_verb_filter, args, NULL);
    CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(f, "NodeNames")), 0);
    const cJSON *un = cJSON_GetObjectItem(cJSON_GetObjectItem(f, "FailedAndUnresolvableNodes"), "dra-p8");
    CHECK_STR(un ? un->valuestring : "", "claim train-1-gpu-q8m4w: no 5 GPUs share resource.kubernetes.io/pcieRoot "
                                         "(matchAttribute); the largest group is 4");
    cJSON_Delete(f);
    /* 4: both nodes publish a root of 4 (the filter does not look at usage, as DynamicResources' own allocation
     * decides that); prioritize scores only dra-p8, where pci0000:97 is whole */
    p8_claim(st, 4);
    f = call_verb(&v, ext_verb_filter, args, NULL);
    CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(f, "NodeNames")), 2);
    cJSON_Delete(f);
    cJSON *p = call_verb(&v, ext_verb_prioritize, args, NULL);
    int s8 = -1, s8b = -1;
    cJSON *e;
    cJSON_ArrayForEach(e, p) {
        const char *h = cJSON_GetObjectItem(e, "Host")->valuestring;
        if (!strcmp(h, "dra-p8")) s8 = cJSON_GetObjectItem(e, "Score")->valueint;
        if (!strcmp(h, "dra-p8b")) s8b = cJSON_GetObjectItem(e, "Score")->valueint;
    }
    cJSON_Delete(p);
    CHECK_MSG(s8 > 0 && s8b == 0, "dra-p8 %d, dra-p8b %d", s8, s8b);
    /* bind records the devices DynamicResources allocated: those of the whole root */
    cJSON *claim = fx("claim-pending.json");
    cJSON *devs = cJSON_GetObjectItem(cJSON_GetObjectItem(claim, "spec"), "devices");
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(devs, "requests"), 0), "exactly"), "count",
                              cJSON_CreateNumber(4));
    cJSON *status = cJSON_GetObjectItem(claim, "status");
    cJSON *res = cJSON_CreateArray();
    for (int m = 4; m < 8; m++) {
        char d[160];
        snprintf(d, sizeof d, "{\"request\":\"gpu\",\"driver\":\"gpu.nvidia.com\",\"pool\":\"dra-p8\",\"device\":\"gpu-%d\"}", m);
        cJSON_AddItemToArray(res, cJSON_Parse(d));
    }
    cJSON *alloc = cJSON_AddObjectToObject(status, "allocation");
    cJSON_AddItemToObject(cJSON_AddObjectToObject(alloc, "devices"), "results", res);
    cJSON_AddItemToObject(status, "reservedFor",
                          cJSON_Parse("[{\"resource\":\"pods\",\"name\":\"train-1\",\"uid\":\"p0a1b2c3-0000-4000-8000-00000000000b\"}]"));
    ext_state_apply(st, KUBE_RESOURCECLAIM, KUBE_MODIFIED, claim);
    cJSON_Delete(claim);
    cJSON *b = call_verb(&v, ext_verb_bind, "{\"PodName\":\"train-1\",\"PodNamespace\":\"ml\",\"PodUID\":"
                                            "\"p0a1b2c3-0000-4000-8000-00000000000b\",\"Node\":\"dra-p8\"}", NULL);
    CHECK_STR(cJSON_GetObjectItem(b, "Error")->valuestring, "");
    cJSON_Delete(b);
    CHECK_STR(posted, "ml/train-1@dra-p8 {\"tessera.io/dra-allocation\":\"train-1-gpu-q8m4w:dra-p8/gpu-4,"
                      "train-1-gpu-q8m4w:dra-p8/gpu-5,train-1-gpu-q8m4w:dra-p8/gpu-6,train-1-gpu-q8m4w:dra-p8/gpu-7\"}");
    ext_state_lock(st);
    const ext_node *n8 = ext_state_node(st, "dra-p8");
    CHECK_INT(n8->m->nlive, 2);
    char why[256];
    CHECK_MSG(model_node_check(n8->m, why, sizeof why), "%s", why);
    ext_state_unlock(st);
    free(args);
    free(pod);
    ext_state_free(st);
}

/* The scores 0..10 prioritize gives the pod on nodes[0..n) (by host), and the policy's raw values on the cached
 * models for req. */
static void scores_of(ext_verbs *v, const char *pod, const char *const *nodes, int n, const model_request *req,
                      int *score, double *raw) {
    char *args = args_for(pod, nodes, n);
    cJSON *p = call_verb(v, ext_verb_prioritize, args, NULL);
    free(args);
    for (int i = 0; i < n; i++) {
        score[i] = -1;
        cJSON *e;
        cJSON_ArrayForEach(e, p)
            if (!strcmp(cJSON_GetObjectItem(e, "Host")->valuestring, nodes[i])) score[i] = cJSON_GetObjectItem(e, "Score")->valueint;
        ext_state_lock(v->st);
        policy_ctx ctx = v->ctx;
        policy_result r = {0};
        raw[i] = policy_score(v->pol, req, ext_state_node(v->st, nodes[i])->m, &ctx, &r, NULL, 0) == 0 && r.feasible ? r.raw : -1;
        ext_state_unlock(v->st);
    }
    cJSON_Delete(p);
}

TEST(dra_claim_pod_scores_as_the_device_plugin_pod_with_the_agents_topology) {
    /* the pcie8 server twice, once with the device plugin (the node agent's fixture, nvidia.com/gpu: 8), once
     * through DRA with the agent's annotation (its matrix matched to the devices by UUID); the same GPUs taken
     * on both: one on dra-p8, two on dra-p8b (pods there, claims here) */
    const char *nodes[] = {"dra-p8", "dra-p8b"};
    ext_state_config cfg = {.standalone = true};
    ext_state *sp = ext_state_new(&cfg), *sd = ext_state_new(&cfg);
    apply_fx(sd, KUBE_DEVICECLASS, KUBE_ADDED, "deviceclass-gpu.json");
    char *t = test_fixture("nodes/topo-pcie8-nvlink-pairs.json", NULL);
    cJSON *agent = cJSON_Parse(t);
    free(t);
    const char *ann = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(agent, "metadata"), "annotations"),
                                          "tessera.io/gpus")->valuestring;
    for (int i = 0; i < 2; i++) {
        cJSON *pn = cJSON_Duplicate(agent, 1), *dn = fx("node-dra-p8.json"), *sl = fx("slice-dra-p8.json");
        cJSON_ReplaceItemInObject(cJSON_GetObjectItem(pn, "metadata"), "name", cJSON_CreateString(nodes[i]));
        cJSON_ReplaceItemInObject(cJSON_GetObjectItem(dn, "metadata"), "name", cJSON_CreateString(nodes[i]));
        cJSON_AddStringToObject(cJSON_GetObjectItem(cJSON_GetObjectItem(dn, "metadata"), "annotations"), "tessera.io/gpus", ann);
        char sn[64];
        snprintf(sn, sizeof sn, "%s-slice", nodes[i]);
        cJSON_ReplaceItemInObject(cJSON_GetObjectItem(sl, "metadata"), "name", cJSON_CreateString(sn));
        cJSON *spec = cJSON_GetObjectItem(sl, "spec");
        cJSON_ReplaceItemInObject(spec, "nodeName", cJSON_CreateString(nodes[i]));
        cJSON_ReplaceItemInObject(cJSON_GetObjectItem(spec, "pool"), "name", cJSON_CreateString(nodes[i]));
        ext_state_apply(sp, KUBE_NODE, KUBE_ADDED, pn);
        ext_state_apply(sd, KUBE_NODE, KUBE_ADDED, dn);
        ext_state_apply(sd, KUBE_RESOURCESLICE, KUBE_ADDED, sl);
        cJSON_Delete(pn);
        cJSON_Delete(dn);
        cJSON_Delete(sl);
        for (int k = 0; k <= i; k++) {
            char name[32], uid[48];
            snprintf(name, sizeof name, "held-%d-%d", i, k);
            snprintf(uid, sizeof uid, "uid-held-%d-%d", i, k);
            char *held = pod_json(name, uid, 0, "\"nvidia.com/gpu\":\"1\"", NULL, nodes[i]);
            cJSON *ho = cJSON_Parse(held);
            ext_state_apply(sp, KUBE_POD, KUBE_ADDED, ho);
            cJSON_Delete(ho);
            free(held);
        }
    }
    cJSON_Delete(agent);
    /* the claims hold the GPUs tessera's model gave the pods */
    ext_state_lock(sp);
    int held[2][MODEL_MAX_GPUS], nheld[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        const model_node *m = ext_state_node(sp, nodes[i])->m;
        CHECK(m->topo != NULL);
        for (int g = 0; g < m->ngpus; g++)
            if (m->gpus[g].exclusive_holder >= 0) held[i][nheld[i]++] = m->gpus[g].index;
    }
    ext_state_unlock(sp);
    CHECK(nheld[0] == 1 && nheld[1] == 2);
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < nheld[i]; k++) p8_hold(sd, nodes[i], held[i][k]);
    p8_claim_as(sd, 2, true);
    ext_state_lock(sd);
    for (int i = 0; i < 2; i++) {
        const model_node *m = ext_state_node(sd, nodes[i])->m;
        CHECK_INT(m->nlive, i + 1);
        CHECK_INT(model_topo_link(m, 0, 1), MODEL_LINK_NVLINK);   /* the agent's matrix, not the roots' PHB */
        CHECK_INT(model_topo_link(m, 0, 2), MODEL_LINK_PIX);
    }
    ext_state_unlock(sd);
    char *claim = claim_pod();
    char *plain = pod_json("train-1", "p0a1b2c3-0000-4000-8000-00000000000b", 0,
                           "\"nvidia.com/gpu\":\"2\",\"cpu\":\"4\",\"memory\":\"16Gi\"", NULL, NULL);
    model_request two = {.kind = MODEL_REQ_WHOLE, .count = 2, .cpu_milli = 4000}, two_dra = two;
    two_dra.via_dra = true;
    const char *pols[] = {"binpack", "spread"};
    for (int k = 0; k < 2; k++) {
        ext_verbs vp, vd;
        ext_verbs_init(&vp, sp, policy_find(pols[k]), NULL, NULL);
        ext_verbs_init(&vd, sd, policy_find(pols[k]), NULL, NULL);
        int ps[2], ds[2];
        double pr[2], dr[2];
        scores_of(&vp, plain, nodes, 2, &two, ps, pr);
        scores_of(&vd, claim, nodes, 2, &two_dra, ds, dr);
        for (int i = 0; i < 2; i++) {
            CHECK_MSG(ps[i] == ds[i] && ps[i] >= 0, "%s %s: device plugin %d, claim %d", pols[k], nodes[i], ps[i], ds[i]);
            CHECK_MSG(pr[i] == dr[i] && pr[i] >= 0, "%s %s raw: device plugin %g, claim %g", pols[k], nodes[i], pr[i], dr[i]);
        }
    }
    free(claim);
    free(plain);
    ext_state_free(sp);
    ext_state_free(sd);
}
