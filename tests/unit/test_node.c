/* test_node.c -- nodes built by hand, cloned, and read from Node objects: every
 * device-plugin setup (tests/fixtures/nodes/), the tessera.io/gpus annotation, and the
 * contradictions and garbage that must become a reason or an error, never a crash.
 */
#include "harness.h"
#include "model_helpers.h"
#include "topo_helpers.h"

#include <stdlib.h>

#include "model/catalog.h"
#include "model/node.h"

/* ------------------------------------------------------------ helpers ---- */

static const model_gpu_product *product(const char *name) {
    return model_catalog_find(model_catalog_default(), name);
}

/* A Node from its parts: labels and allocatable as JSON text, the annotation raw. */
static model_node *mk(const char *labels, const char *alloc, const char *ann) {
    cJSON *node = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(node, "metadata");
    cJSON_AddStringToObject(meta, "name", "t");
    if (labels) cJSON_AddItemToObject(meta, "labels", cJSON_Parse(labels));
    if (ann) cJSON_AddStringToObject(cJSON_AddObjectToObject(meta, "annotations"), "tessera.io/gpus", ann);
    if (alloc) cJSON_AddItemToObject(cJSON_AddObjectToObject(node, "status"), "allocatable", cJSON_Parse(alloc));
    char err[256];
    model_node *n = model_node_from_json(node, NULL, err, sizeof err);
    cJSON_Delete(node);
    return n;
}

/* The reason such a node gets ("" if none). A reason must also leave no GPUs behind. */
static const char *reason_of(const char *labels, const char *alloc, const char *ann) {
    static char buf[MODEL_REASON_LEN + 32];
    model_node *n = mk(labels, alloc, ann);
    if (!n) return "(no node)";
    if (n->reason[0] && n->ngpus) snprintf(buf, sizeof buf, "(reason with %d GPUs: %s)", n->ngpus, n->reason);
    else snprintf(buf, sizeof buf, "%s", n->reason);
    model_node_free(n);
    return buf;
}

#define T4_TS "\"nvidia.com/gpu.product\":\"Tesla-T4-SHARED\",\"nvidia.com/gpu.count\":\"2\""
#define A40 "\"nvidia.com/gpu.product\":\"NVIDIA-A100-SXM4-40GB\""
#define H100 "\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3\""
#define MIXED "\"nvidia.com/mig.strategy\":\"mixed\""

/* ------------------------------------------------------------ by hand ---- */

TEST(node_new_copies_name_and_starts_empty) {
    char name[] = "node-a";
    model_node *n = model_node_new(name);
    CHECK(n);
    name[0] = 'X';
    CHECK_STR(n->name, "node-a");
    CHECK_INT(n->ngpus, 0);
    CHECK_INT(n->nallocs, 0);
    CHECK_INT(n->nlive, 0);
    CHECK(n->allocs == NULL);
    CHECK_STR(n->reason, "");
    CHECK(!n->track_host);
    CHECK_INT(n->sharing, MODEL_GPU_WHOLE);
    CHECK_INT(n->mig_strategy, MODEL_MIG_NONE);
    model_node_free(n);
    CHECK(model_node_new(NULL) == NULL);
    model_node_free(NULL);
}

TEST(node_add_gpu_modes_and_limits) {
    const model_gpu_product *a80 = product("NVIDIA-A100-SXM4-80GB"), *h = product("NVIDIA-H100-80GB-HBM3"),
                            *t4 = product("Tesla-T4"), *v100 = product("Tesla-V100-SXM2-16GB");
    CHECK(a80 && h && t4 && v100);
    model_node *n = model_node_new("hand");
    model_gpu *g = model_node_add_gpu(n, a80, MODEL_GPU_WHOLE, 1, 0);
    CHECK(g);
    CHECK_INT(g->index, 0);
    CHECK_INT(g->memory_mib, 81920);
    CHECK_INT(g->replicas, 1);
    CHECK_INT(g->exclusive_holder, -1);
    CHECK_INT(g->numa_node, -1);
    CHECK_INT(g->ninst, 0);
    CHECK_INT(g->inst[0].holder, -1);
    CHECK_STR(g->uuid, "");

    g = model_node_add_gpu(n, t4, MODEL_GPU_TIMESLICE, 4, 15000);
    CHECK(g);
    CHECK_INT(g->index, 1);
    CHECK_INT(g->memory_mib, 15000);
    CHECK_INT(g->replicas, 4);
    CHECK_INT(g->mps_memory_limit_mib, 0);

    /* The device plugin's integer arithmetic: 100/3 = 33 -> 330 permille. */
    g = model_node_add_gpu(n, h, MODEL_GPU_MPS, 3, 0);
    CHECK(g);
    CHECK_INT(g->mps_memory_limit_mib, 81559 / 3);
    CHECK_INT(g->mps_thread_permille, 330);
    g = model_node_add_gpu(n, h, MODEL_GPU_MPS, 48, 0);
    CHECK(g);
    CHECK_INT(g->mps_thread_permille, 20);

    g = model_node_add_gpu(n, a80, MODEL_GPU_MIG, 1, 0);
    CHECK(g);
    CHECK_INT(g->mode, MODEL_GPU_MIG);
    CHECK_INT(n->ngpus, 5);

    /* Refused: replicas out of range, MPS beyond the product's client cap (V100: 16),
     * MIG on a GPU without it, negative memory, no product, whole with replicas. */
    CHECK(!model_node_add_gpu(n, t4, MODEL_GPU_TIMESLICE, 1, 0));
    CHECK(!model_node_add_gpu(n, t4, MODEL_GPU_TIMESLICE, MODEL_MAX_REPLICAS + 1, 0));
    CHECK(!model_node_add_gpu(n, h, MODEL_GPU_MPS, 49, 0));
    CHECK(!model_node_add_gpu(n, v100, MODEL_GPU_MPS, 17, 0));
    CHECK(model_node_add_gpu(n, v100, MODEL_GPU_MPS, 16, 0));
    CHECK(!model_node_add_gpu(n, t4, MODEL_GPU_MIG, 1, 0));
    CHECK(!model_node_add_gpu(n, t4, MODEL_GPU_WHOLE, 1, -1));
    CHECK(!model_node_add_gpu(n, NULL, MODEL_GPU_WHOLE, 1, 0));
    CHECK(!model_node_add_gpu(n, t4, MODEL_GPU_WHOLE, 2, 0));
    CHECK(!model_node_add_gpu(n, t4, (model_gpu_mode)42, 1, 0));
    CHECK_INT(n->ngpus, 6);
    while (n->ngpus < MODEL_MAX_GPUS) CHECK(model_node_add_gpu(n, t4, MODEL_GPU_WHOLE, 1, 0));
    CHECK(!model_node_add_gpu(n, t4, MODEL_GPU_WHOLE, 1, 0));
    CHECK_INT(n->gpus[MODEL_MAX_GPUS - 1].index, MODEL_MAX_GPUS - 1);
    model_node_free(n);
}

TEST(node_add_mig_instance_validates_layout) {
    const model_gpu_product *h = product("NVIDIA-H100-80GB-HBM3");
    model_node *n = model_node_new("mig");
    model_gpu *whole = model_node_add_gpu(n, h, MODEL_GPU_WHOLE, 1, 0);
    model_gpu *g = model_node_add_gpu(n, h, MODEL_GPU_MIG, 1, 0);
    int p3 = model_product_profile_index(h, "3g.40gb"), p1 = model_product_profile_index(h, "1g.10gb"),
        pme = model_product_profile_index(h, "1g.10gb+me");
    char err[256] = "";
    CHECK(p3 >= 0 && p1 >= 0 && pme >= 0);
    CHECK_INT(model_gpu_add_mig_instance(whole, p1, 0, err, sizeof err), -1);
    CHECK_CONTAINS(err, "not MIG");
    CHECK_INT(model_gpu_add_mig_instance(g, p3, 4, err, sizeof err), 0);
    CHECK_INT(g->ninst, 1);
    CHECK_INT(g->inst[0].profile, p3);
    CHECK_INT(g->inst[0].start, 4);
    CHECK_INT(g->inst[0].holder, -1);
    CHECK(!g->inst[0].on_demand);
    err[0] = 0;
    CHECK_INT(model_gpu_add_mig_instance(g, p1, 5, err, sizeof err), -1); /* overlaps the 3g */
    CHECK(err[0]);
    CHECK_INT(model_gpu_add_mig_instance(g, p3, 1, err, sizeof err), -1); /* illegal start */
    CHECK_INT(model_gpu_add_mig_instance(g, 99, 0, err, sizeof err), -1);
    CHECK_INT(model_gpu_add_mig_instance(g, pme, 0, err, sizeof err), 0);
    CHECK_INT(model_gpu_add_mig_instance(g, pme, 1, err, sizeof err), -1); /* one +me per GPU */
    CHECK_INT(g->ninst, 2);
    CHECK_INT(model_gpu_add_mig_instance(NULL, p1, 0, err, sizeof err), -1);
    CHECK_INT(model_gpu_add_mig_instance(g, p1, 1, NULL, 0), 0); /* err may be NULL */
    model_node_free(n);
}

TEST(node_clone_is_independent) {
    model_node *n = fixture_node("nodes/unknown-product.json");
    CHECK(n);
    CHECK(n->gpus[0].product == &n->local_product);
    n->allocs_cap = 2;
    n->nallocs = 1;
    n->nlive = 1;
    n->allocs = calloc(2, sizeof *n->allocs);
    snprintf(n->allocs[0].uid, sizeof n->allocs[0].uid, "pod-1");
    n->allocs[0].a.ngrants = 1;
    n->gpus[0].memory_used_mib = 100;

    model_node *c = model_node_clone(n);
    CHECK(c);
    CHECK(c->name != n->name);
    CHECK(c->allocs != n->allocs);
    CHECK_STR(c->name, "rtxpro-01");
    CHECK_STR(c->allocs[0].uid, "pod-1");
    CHECK_INT(c->gpus[1].memory_mib, 97887);
    /* Products that lived in the source must now live in the clone. */
    CHECK(c->gpus[0].product == &c->local_product);
    CHECK(c->gpus[1].product == &c->local_product);
    c->gpus[0].memory_used_mib = 500;
    snprintf(c->allocs[0].uid, sizeof c->allocs[0].uid, "pod-2");
    CHECK_INT(n->gpus[0].memory_used_mib, 100);
    CHECK_STR(n->allocs[0].uid, "pod-1");
    model_node_free(n);
    /* The clone outlives its source (ASan would see a use after free otherwise). */
    CHECK_STR(c->gpus[0].product->product, "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition");
    CHECK_STR(c->name, "rtxpro-01");

    /* Catalog products stay shared, and a node without allocations clones too. */
    model_node *p = fixture_node("nodes/plain-a100-80gb-x8.json");
    model_node *pc = model_node_clone(p);
    CHECK(pc && pc->allocs == NULL);
    CHECK(pc->gpus[3].product == p->gpus[3].product);
    CHECK(model_node_clone(NULL) == NULL);
    model_node_free(pc);
    model_node_free(p);
    model_node_free(c);
}

/* ------------------------------------------------------------ setups ---- */

TEST(node_json_plain_a100_x8) {
    model_node *n = fixture_node("nodes/plain-a100-80gb-x8.json");
    CHECK(n);
    CHECK_STR(n->reason, "");
    CHECK_STR(n->name, "dgx-a100-01");
    CHECK_STR(n->product_label, "NVIDIA-A100-SXM4-80GB");
    CHECK_INT(n->ngpus, 8);
    CHECK_INT(n->sharing, MODEL_GPU_WHOLE);
    CHECK_INT(n->mig_strategy, MODEL_MIG_NONE);
    CHECK(!n->shared_renamed);
    for (int i = 0; i < 8; i++) {
        CHECK_INT(n->gpus[i].index, i);
        CHECK_INT(n->gpus[i].mode, MODEL_GPU_WHOLE);
        CHECK_INT(n->gpus[i].memory_mib, 81920);
        CHECK(n->gpus[i].product == product("NVIDIA-A100-SXM4-80GB"));
    }
    CHECK_INT(n->cpu_milli, 255500);
    CHECK_INT(n->memory_mib, 2111328776LL / 1024);
    CHECK(!n->track_host);
    model_node_free(n);
}

TEST(node_json_timeslice_without_rename) {
    model_node *n = fixture_node("nodes/t4-timeslice-x4.json");
    CHECK(n);
    CHECK_STR(n->reason, "");
    CHECK_INT(n->ngpus, 2);
    CHECK_INT(n->sharing, MODEL_GPU_TIMESLICE);
    CHECK_INT(n->replicas, 4);
    CHECK(!n->shared_renamed);
    CHECK_STR(n->product_label, "Tesla-T4-SHARED");
    CHECK(n->gpus[1].product == product("Tesla-T4"));
    CHECK_INT(n->gpus[1].mode, MODEL_GPU_TIMESLICE);
    CHECK_INT(n->gpus[1].replicas, 4);
    CHECK_INT(n->gpus[1].memory_mib, 15360);
    model_node_free(n);
}

TEST(node_json_timeslice_renamed) {
    model_node *n = fixture_node("nodes/t4-timeslice-rename.json");
    CHECK(n);
    CHECK_STR(n->reason, "");
    CHECK_INT(n->ngpus, 2);
    CHECK(n->shared_renamed);
    CHECK_INT(n->sharing, MODEL_GPU_TIMESLICE);
    CHECK_INT(n->gpus[0].replicas, 4);
    model_node_free(n);
}

TEST(node_json_mps) {
    model_node *n = fixture_node("nodes/h100-mps.json");
    CHECK(n);
    CHECK_STR(n->reason, "");
    CHECK_INT(n->ngpus, 4);
    CHECK_INT(n->sharing, MODEL_GPU_MPS);
    CHECK_INT(n->replicas, 6);
    CHECK_INT(n->gpus[3].mode, MODEL_GPU_MPS);
    CHECK_INT(n->gpus[3].mps_memory_limit_mib, 81559 / 6);
    CHECK_INT(n->gpus[3].mps_thread_permille, 160);
    model_node_free(n);

    /* Renamed MPS with more clients than the hardware takes. */
    n = fixture_node("nodes/h100-mps-rename-too-many.json");
    CHECK(n);
    CHECK_INT(n->ngpus, 0);
    CHECK_CONTAINS(n->reason, "nvidia.com/gpu.replicas=64 MPS clients per GPU, but a NVIDIA-H100-80GB-HBM3 takes at most 48");
    model_node_free(n);
}

TEST(node_json_mig_single_infers_gpus) {
    model_node *n = fixture_node("nodes/h100-mig-single.json");
    CHECK(n);
    CHECK_STR(n->reason, "");
    CHECK_INT(n->mig_strategy, MODEL_MIG_SINGLE);
    CHECK_INT(n->ngpus, 2); /* 14 devices, 7 per GPU */
    const model_gpu_product *h = product("NVIDIA-H100-80GB-HBM3");
    int p1 = model_product_profile_index(h, "1g.10gb");
    for (int i = 0; i < 2; i++) {
        const model_gpu *g = &n->gpus[i];
        CHECK_INT(g->mode, MODEL_GPU_MIG);
        CHECK_INT(g->memory_mib, 81559); /* the label is per MIG device, not per GPU */
        CHECK_INT(g->ninst, 7);
        for (int k = 0; k < 7; k++) {
            CHECK_INT(g->inst[k].profile, p1);
            CHECK_INT(g->inst[k].start, k);
            CHECK_INT(g->inst[k].holder, -1);
        }
    }
    model_node_free(n);

    /* 9 devices: one full GPU and a second with the rest from slice 0 up. */
    n = mk("{\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3-MIG-3g.40gb\",\"nvidia.com/gpu.count\":\"3\","
           "\"nvidia.com/mig.strategy\":\"single\"}",
           "{\"nvidia.com/gpu\":\"3\"}", NULL);
    CHECK(n);
    CHECK_STR(n->reason, "");
    CHECK_INT(n->ngpus, 2);
    CHECK_INT(n->gpus[0].ninst, 2);
    CHECK_INT(n->gpus[0].inst[1].start, 4);
    CHECK_INT(n->gpus[1].ninst, 1);
    CHECK_INT(n->gpus[1].inst[0].start, 0);
    model_node_free(n);
}

TEST(node_json_mig_mixed_places_instances) {
    model_node *n = fixture_node("nodes/a100-40gb-mig-mixed.json");
    CHECK(n);
    CHECK_STR(n->reason, "");
    CHECK_INT(n->mig_strategy, MODEL_MIG_MIXED);
    CHECK_INT(n->ngpus, 3);
    const model_gpu_product *a = product("NVIDIA-A100-SXM4-40GB");
    int p3 = model_product_profile_index(a, "3g.20gb"), p2 = model_product_profile_index(a, "2g.10gb");
    CHECK_INT(n->gpus[0].mode, MODEL_GPU_WHOLE); /* unshared GPUs come first */
    CHECK_INT(n->gpus[0].memory_mib, 40960);
    /* 3g.20gb + 2 x 2g.10gb on each MIG GPU: the only layout is 2g@0 2g@2 3g@4. */
    for (int i = 1; i < 3; i++) {
        const model_gpu *g = &n->gpus[i];
        CHECK_INT(g->mode, MODEL_GPU_MIG);
        CHECK_INT(g->ninst, 3);
        CHECK_INT(g->inst[0].profile, p2);
        CHECK_INT(g->inst[0].start, 0);
        CHECK_INT(g->inst[1].profile, p2);
        CHECK_INT(g->inst[1].start, 2);
        CHECK_INT(g->inst[2].profile, p3);
        CHECK_INT(g->inst[2].start, 4);
    }
    char why[200];
    CHECK_MSG(model_node_check(n, why, sizeof why), "%s", why);
    model_node_free(n);
}

TEST(node_json_mig_mixed_media_profile) {
    model_node *n = fixture_node("nodes/h100-mig-mixed-me.json");
    CHECK(n);
    CHECK_STR(n->reason, "");
    CHECK_INT(n->ngpus, 1);
    const model_gpu_product *h = product("NVIDIA-H100-80GB-HBM3");
    const model_gpu *g = &n->gpus[0];
    CHECK_INT(g->mode, MODEL_GPU_MIG);
    CHECK_INT(g->ninst, 4);
    /* One of each of 1g.10gb, 1g.10gb+me, 2g.20gb, 3g.40gb; deterministic placement. */
    const char *names[] = {"1g.10gb", "1g.10gb+me", "2g.20gb", "3g.40gb"};
    const int starts[] = {0, 1, 2, 4};
    for (int k = 0; k < 4; k++) {
        CHECK_INT(g->inst[k].profile, model_product_profile_index(h, names[k]));
        CHECK_INT(g->inst[k].start, starts[k]);
    }
    char why[200];
    CHECK_MSG(model_node_check(n, why, sizeof why), "%s", why);
    model_node_free(n);
}

TEST(node_json_mig_mixed_with_timesliced_full_gpus) {
    model_node *n = mk("{\"nvidia.com/gpu.product\":\"NVIDIA-A100-SXM4-40GB-SHARED\",\"nvidia.com/gpu.count\":\"2\","
                       "\"nvidia.com/gpu.replicas\":\"2\",\"nvidia.com/gpu.sharing-strategy\":\"time-slicing\"," MIXED "}",
                       "{\"nvidia.com/gpu\":\"2\",\"nvidia.com/mig-7g.40gb\":\"1\"}", NULL);
    CHECK(n);
    CHECK_STR(n->reason, "");
    CHECK_INT(n->ngpus, 2);
    CHECK_INT(n->gpus[0].mode, MODEL_GPU_TIMESLICE);
    CHECK_INT(n->gpus[0].replicas, 2);
    CHECK_INT(n->gpus[1].mode, MODEL_GPU_MIG);
    CHECK_INT(n->gpus[1].ninst, 1);
    CHECK_INT(n->sharing, MODEL_GPU_TIMESLICE);
    model_node_free(n);
}

TEST(node_json_mig_invalid) {
    model_node *n = fixture_node("nodes/mig-invalid.json");
    CHECK(n);
    CHECK_INT(n->ngpus, 0);
    CHECK_STR(n->reason, "GPU feature discovery reports an invalid MIG single-strategy setup "
                         "(nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB-MIG-INVALID): GPUs mix MIG and non-MIG or "
                         "hold different profiles");
    CHECK_STR(n->product_label, "NVIDIA-A100-SXM4-40GB-MIG-INVALID");
    CHECK_INT(n->cpu_milli, 32000);
    model_node_free(n);
}

TEST(node_json_quirks_bytes_pre_r470_unknown) {
    /* Old GFD wrote bytes: 16944988160 B = 16160 MiB. */
    model_node *n = fixture_node("nodes/v100-bytes-memory.json");
    CHECK(n);
    CHECK_STR(n->reason, "");
    CHECK_INT(n->ngpus, 4);
    CHECK_INT(n->gpus[0].memory_mib, 16160);
    model_node_free(n);

    /* Pre-R470 drivers: no "NVIDIA-" prefix, still the catalog product; the label's
     * memory wins over the catalog's 40960. */
    n = fixture_node("nodes/a100-pre-r470.json");
    CHECK(n);
    CHECK_STR(n->reason, "");
    CHECK(n->gpus[0].product == product("NVIDIA-A100-SXM4-40GB"));
    CHECK_INT(n->gpus[1].memory_mib, 40537);
    CHECK_STR(n->product_label, "A100-SXM4-40GB");
    model_node_free(n);

    n = fixture_node("nodes/unknown-product.json");
    CHECK(n);
    CHECK_STR(n->reason, "");
    CHECK_INT(n->ngpus, 2);
    CHECK(n->gpus[0].product == &n->local_product);
    CHECK_STR(n->local_product.product, "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition");
    CHECK_INT(n->gpus[0].memory_mib, 97887);
    CHECK(!n->local_product.mig_capable);
    model_node_free(n);

    n = fixture_node("nodes/unknown-product-no-memory.json");
    CHECK(n);
    CHECK_INT(n->ngpus, 0);
    CHECK_STR(n->reason, "GPU model NVIDIA-Mystery-GPU is not in the catalog and nvidia.com/gpu.memory is missing, "
                         "so its memory is unknown");
    model_node_free(n);

}

TEST(node_json_no_gpus_and_too_many) {
    model_node *n = fixture_node("nodes/no-gpus.json");
    CHECK(n);
    CHECK_INT(n->ngpus, 0);
    CHECK_STR(n->reason, "");
    CHECK_INT(n->cpu_milli, 15890);
    CHECK_INT(n->memory_mib, 60 * 1024);
    model_node_free(n);

    n = fixture_node("nodes/too-many-gpus.json");
    CHECK(n);
    CHECK_INT(n->ngpus, 0);
    CHECK_STR(n->reason, "nvidia.com/gpu.count=20 is more than the 16 GPUs a node may have");
    model_node_free(n);

    /* A node with no labels, no annotations and no status at all. */
    CHECK_STR(reason_of(NULL, NULL, NULL), "");
    /* GPU operator labels the node but GFD has not run yet. */
    CHECK_CONTAINS(reason_of("{\"nvidia.com/gpu.present\":\"true\"}", NULL, NULL),
                   "GPU feature discovery has not labelled the GPUs yet");
    CHECK_STR(reason_of("{\"nvidia.com/gpu.deploy.driver\":\"true\"}", "{}", NULL), "");
    /* Device plugin without GFD: GPUs advertised, hardware unknown. */
    CHECK_CONTAINS(reason_of("{}", "{\"nvidia.com/gpu\":\"2\"}", NULL), "no nvidia.com/gpu.product label");
}

TEST(node_json_extender_sample_nodes) {
    size_t len;
    char *buf = test_fixture("extender-samples/node-list/01-filter.request.json", &len);
    cJSON *root = cJSON_ParseWithLength(buf, len);
    free(buf);
    CHECK(root);
    const cJSON *items = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "Nodes"), "items");
    CHECK_INT(cJSON_GetArraySize(items), 3);
    const cJSON *item;
    int seen = 0;
    cJSON_ArrayForEach(item, items) {
        char err[256] = "";
        model_node *n = model_node_from_json(item, NULL, err, sizeof err);
        CHECK_MSG(n, "%s", err);
        CHECK(strncmp(n->name, "gpu-node-", 9) == 0);
        CHECK_INT(n->ngpus, 0);
        CHECK_STR(n->reason, "");
        CHECK_INT(n->cpu_milli, 16000);
        CHECK_INT(n->memory_mib, 64 * 1024);
        model_node_free(n);
        seen++;
    }
    CHECK_INT(seen, 3);
    cJSON_Delete(root);
}

/* ---------------------------------------------------- contradictions ---- */

TEST(node_json_sharing_contradictions) {
    const char *ts = "{" T4_TS ",\"nvidia.com/gpu.replicas\":\"4\",\"nvidia.com/gpu.sharing-strategy\":\"time-slicing\"}";
    model_node *n = fixture_node("nodes/timeslice-not-multiple.json");
    CHECK(n);
    CHECK_INT(n->ngpus, 0);
    CHECK_STR(n->reason, "status.allocatable nvidia.com/gpu=7 is not a multiple of nvidia.com/gpu.replicas=4");
    model_node_free(n);

    CHECK_STR(reason_of(ts, "{\"nvidia.com/gpu\":\"12\"}", NULL),
              "nvidia.com/gpu.count=2 x nvidia.com/gpu.replicas=4 = 8, but status.allocatable nvidia.com/gpu=12");
    CHECK_CONTAINS(reason_of(ts, "{\"nvidia.com/gpu\":\"0\"}", NULL),
                   "no GPU resource advertised in status.allocatable yet");
    CHECK_CONTAINS(reason_of(ts, NULL, NULL), "no GPU resource advertised in status.allocatable yet");
    CHECK_CONTAINS(reason_of("{" T4_TS ",\"nvidia.com/gpu.replicas\":\"1\"}", "{\"nvidia.com/gpu\":\"2\"}", NULL),
                   "nvidia.com/gpu.product=Tesla-T4-SHARED says the GPUs are shared but nvidia.com/gpu.replicas=1");
    CHECK_CONTAINS(reason_of("{\"nvidia.com/gpu.product\":\"Tesla-T4\",\"nvidia.com/gpu.count\":\"2\","
                             "\"nvidia.com/gpu.sharing-strategy\":\"time-slicing\",\"nvidia.com/gpu.replicas\":\"1\"}",
                             "{\"nvidia.com/gpu\":\"2\"}", NULL),
                   "nvidia.com/gpu.sharing-strategy=time-slicing but nvidia.com/gpu.replicas=1");
    CHECK_CONTAINS(reason_of("{" T4_TS ",\"nvidia.com/gpu.replicas\":\"4\",\"nvidia.com/gpu.sharing-strategy\":\"none\"}",
                             "{\"nvidia.com/gpu\":\"8\"}", NULL),
                   "nvidia.com/gpu.replicas=4 but nvidia.com/gpu.sharing-strategy=none");
    CHECK_CONTAINS(reason_of("{" T4_TS ",\"nvidia.com/gpu.replicas\":\"4\",\"nvidia.com/gpu.sharing-strategy\":\"magic\"}",
                             "{\"nvidia.com/gpu\":\"8\"}", NULL),
                   "nvidia.com/gpu.sharing-strategy=magic is not none, time-slicing or mps");
    CHECK_CONTAINS(reason_of("{" T4_TS ",\"nvidia.com/gpu.replicas\":\"200\"}", "{\"nvidia.com/gpu\":\"400\"}", NULL),
                   "nvidia.com/gpu.replicas=200 is more than the 128 replicas per GPU supported");
    /* Replicas advertised as plain nvidia.com/gpu need the -SHARED suffix. */
    CHECK_CONTAINS(reason_of("{\"nvidia.com/gpu.product\":\"Tesla-T4\",\"nvidia.com/gpu.count\":\"2\","
                             "\"nvidia.com/gpu.replicas\":\"4\"}",
                             "{\"nvidia.com/gpu\":\"8\"}", NULL),
                   "lacks the -SHARED suffix");
    CHECK_CONTAINS(reason_of(ts, "{\"nvidia.com/gpu.shared\":\"8\"}", NULL), "has the -SHARED suffix");
    CHECK_CONTAINS(reason_of("{\"nvidia.com/gpu.product\":\"Tesla-T4\",\"nvidia.com/gpu.count\":\"2\","
                             "\"nvidia.com/gpu.replicas\":\"4\"}",
                             "{\"nvidia.com/gpu\":\"8\",\"nvidia.com/gpu.shared\":\"8\"}", NULL),
                   "advertises both nvidia.com/gpu=8 and nvidia.com/gpu.shared=8");
    CHECK_CONTAINS(reason_of("{\"nvidia.com/gpu.product\":\"Tesla-T4\",\"nvidia.com/gpu.count\":\"2\"}",
                             "{\"nvidia.com/gpu\":\"2\",\"nvidia.com/gpu.shared\":\"4\"}", NULL),
                   "status.allocatable nvidia.com/gpu.shared=4 but nvidia.com/gpu.replicas=1 (no sharing configured)");
    /* Old GFD without a strategy label: replicas mean time-slicing. */
    model_node *old = mk("{" T4_TS ",\"nvidia.com/gpu.replicas\":\"4\"}", "{\"nvidia.com/gpu\":\"8\"}", NULL);
    CHECK(old);
    CHECK_STR(old->reason, "");
    CHECK_INT(old->sharing, MODEL_GPU_TIMESLICE);
    model_node_free(old);
    /* V100 takes 16 MPS clients. */
    CHECK_CONTAINS(reason_of("{\"nvidia.com/gpu.product\":\"Tesla-V100-SXM2-16GB-SHARED\",\"nvidia.com/gpu.count\":\"1\","
                             "\"nvidia.com/gpu.replicas\":\"20\",\"nvidia.com/gpu.sharing-strategy\":\"mps\"}",
                             "{\"nvidia.com/gpu\":\"20\"}", NULL),
                   "takes at most 16");
}

TEST(node_json_label_contradictions) {
    CHECK_STR(reason_of("{\"nvidia.com/gpu.product\":\"Tesla-T4\",\"nvidia.com/gpu.count\":\"-1\"}",
                        "{\"nvidia.com/gpu\":\"1\"}", NULL),
              "label nvidia.com/gpu.count=\"-1\" is not a whole number >= 0");
    CHECK_CONTAINS(reason_of("{\"nvidia.com/gpu.product\":\"Tesla-T4\",\"nvidia.com/gpu.count\":\"2.5\"}",
                             "{\"nvidia.com/gpu\":\"2\"}", NULL),
                   "nvidia.com/gpu.count=\"2.5\"");
    CHECK_CONTAINS(reason_of("{\"nvidia.com/gpu.product\":\"Tesla-T4\",\"nvidia.com/gpu.count\":\"1\","
                             "\"nvidia.com/gpu.memory\":\"lots\"}",
                             "{\"nvidia.com/gpu\":\"1\"}", NULL),
                   "nvidia.com/gpu.memory=\"lots\"");
    CHECK_CONTAINS(reason_of("{\"nvidia.com/gpu.product\":\"Tesla-T4\",\"nvidia.com/gpu.count\":\"1\","
                             "\"nvidia.com/gpu.memory\":\"9999999999999999\"}",
                             "{\"nvidia.com/gpu\":\"1\"}", NULL),
                   "label nvidia.com/gpu.memory=\"9999999999999999\" is out of range");
    CHECK_STR(reason_of("{\"nvidia.com/gpu.product\":\"Tesla-T4\"}", "{\"nvidia.com/gpu\":\"1\"}", NULL),
              "nvidia.com/gpu.product=Tesla-T4 but nvidia.com/gpu.count is missing");
    CHECK_CONTAINS(reason_of("{\"nvidia.com/gpu.product\":\"Tesla-T4\",\"nvidia.com/gpu.count\":\"0\"}", "{}", NULL),
                   "nvidia.com/gpu.count=0");
    CHECK_STR(reason_of("{\"nvidia.com/gpu.product\":\"Tesla-T4\",\"nvidia.com/gpu.count\":\"8\"}",
                        "{\"nvidia.com/gpu\":\"6\"}", NULL),
              "nvidia.com/gpu.count=8 but status.allocatable nvidia.com/gpu=6");
    CHECK_CONTAINS(reason_of("{\"nvidia.com/gpu.product\":\"Tesla-T4\",\"nvidia.com/gpu.count\":\"1\","
                             "\"nvidia.com/mig.strategy\":\"sometimes\"}",
                             "{\"nvidia.com/gpu\":\"1\"}", NULL),
                   "nvidia.com/mig.strategy=sometimes is not single or mixed");
    CHECK_STR(reason_of("{\"nvidia.com/gpu.product\":\"Tesla-T4\",\"nvidia.com/gpu.count\":1}",
                        "{\"nvidia.com/gpu\":\"1\"}", NULL),
              "label nvidia.com/gpu.count is not a string");
    CHECK_CONTAINS(reason_of("{\"nvidia.com/gpu.product\":\"Tesla-T4\",\"nvidia.com/gpu.count\":\"1\"}",
                             "{\"nvidia.com/gpu\":1}", NULL),
                   "status.allocatable nvidia.com/gpu is not a quantity string");
    CHECK_CONTAINS(reason_of("{\"nvidia.com/gpu.product\":\"Tesla-T4\",\"nvidia.com/gpu.count\":\"1\"}",
                             "{\"nvidia.com/gpu\":\"1500m\"}", NULL),
                   "status.allocatable nvidia.com/gpu=\"1500m\"");
    CHECK_CONTAINS(reason_of("{\"nvidia.com/gpu.product\":\"Tesla-T4\",\"nvidia.com/gpu.count\":\"1\"}",
                             "{\"nvidia.com/gpu\":\"1\",\"cpu\":\"lots\"}", NULL),
                   "status.allocatable cpu is not a valid quantity");
    CHECK_CONTAINS(reason_of(NULL, "{\"memory\":\"-5Gi\"}", NULL), "status.allocatable memory is not a valid quantity");
    /* Unshared GPUs with plain whole-GPU labels and "single" (no MIG GPU) are whole GPUs. */
    model_node *n = mk("{\"nvidia.com/gpu.product\":\"NVIDIA-L4\",\"nvidia.com/gpu.count\":\"1\","
                       "\"nvidia.com/mig.strategy\":\"single\"}",
                       "{\"nvidia.com/gpu\":\"1\"}", NULL);
    CHECK(n);
    CHECK_STR(n->reason, "");
    CHECK_INT(n->ngpus, 1);
    CHECK_INT(n->gpus[0].mode, MODEL_GPU_WHOLE);
    CHECK_INT(n->gpus[0].memory_mib, product("NVIDIA-L4")->memory_mib);
    model_node_free(n);
}

TEST(node_json_mig_contradictions) {
    const char *single = "{\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3-MIG-1g.10gb\",\"nvidia.com/gpu.count\":\"7\","
                         "\"nvidia.com/mig.strategy\":\"single\"}";
    CHECK_STR(reason_of(single, "{\"nvidia.com/gpu\":\"7\"}", NULL), "");
    CHECK_STR(reason_of(single, "{\"nvidia.com/gpu\":\"6\"}", NULL),
              "nvidia.com/gpu.count=7 MIG devices but status.allocatable nvidia.com/gpu=6");
    CHECK_CONTAINS(reason_of(single, "{}", NULL), "no GPU resource advertised in status.allocatable yet");
    CHECK_CONTAINS(reason_of(single, "{\"nvidia.com/gpu\":\"7\",\"nvidia.com/mig-1g.10gb\":\"7\"}", NULL),
                   "under the MIG single strategy");
    CHECK_CONTAINS(reason_of("{\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3-MIG-1g.10gb\",\"nvidia.com/gpu.count\":\"7\"}",
                             "{\"nvidia.com/gpu\":\"7\"}", NULL),
                   "but nvidia.com/mig.strategy is absent");
    CHECK_CONTAINS(reason_of("{\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3-MIG-9g.99gb\",\"nvidia.com/gpu.count\":\"1\","
                             "\"nvidia.com/mig.strategy\":\"single\"}",
                             "{\"nvidia.com/gpu\":\"1\"}", NULL),
                   "NVIDIA-H100-80GB-HBM3 has no MIG profile 9g.99gb");
    CHECK_CONTAINS(reason_of("{\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3-MIG-1g.10gb\",\"nvidia.com/gpu.count\":\"200\","
                             "\"nvidia.com/mig.strategy\":\"single\"}",
                             "{\"nvidia.com/gpu\":\"200\"}", NULL),
                   "do not fit on 16 GPUs");
    CHECK_CONTAINS(reason_of("{\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3-MIG-1g.10gb\",\"nvidia.com/gpu.count\":\"0\","
                             "\"nvidia.com/mig.strategy\":\"single\"}",
                             "{}", NULL),
                   "nvidia.com/gpu.count=0");
    /* Sharing on MIG devices (layered): counts that do not add up, MPS, missing labels. */
    CHECK_STR(reason_of("{\"nvidia.com/gpu.product\":\"NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED\",\"nvidia.com/gpu.count\":\"28\","
                        "\"nvidia.com/gpu.replicas\":\"4\",\"nvidia.com/mig.strategy\":\"single\"}",
                        "{\"nvidia.com/gpu\":\"28\"}", NULL),
              "nvidia.com/gpu.count=28 MIG devices x nvidia.com/gpu.replicas=4 = 112, but status.allocatable "
              "nvidia.com/gpu=28");
    CHECK_CONTAINS(reason_of("{\"nvidia.com/gpu.product\":\"NVIDIA-A100-SXM4-40GB-MIG-1g.5gb\",\"nvidia.com/gpu.count\":\"7\","
                             "\"nvidia.com/gpu.replicas\":\"2\",\"nvidia.com/gpu.sharing-strategy\":\"mps\","
                             "\"nvidia.com/mig.strategy\":\"single\"}",
                             "{\"nvidia.com/gpu\":\"14\"}", NULL),
                   "MPS is not supported on MIG-enabled GPUs");
    CHECK_STR(reason_of("{" A40 ",\"nvidia.com/gpu.count\":\"1\"," MIXED "}",
                        "{\"nvidia.com/gpu\":\"0\",\"nvidia.com/mig-1g.5gb.shared\":\"28\"}", NULL),
              "status.allocatable advertises nvidia.com/mig-1g.5gb.shared but label nvidia.com/mig-1g.5gb.replicas=1 "
              "(no sharing configured)");
    /* Replicas label and allocatable agree (no product label to check): a layered node. */
    CHECK_STR(reason_of("{" A40 ",\"nvidia.com/gpu.count\":\"1\"," MIXED ",\"nvidia.com/mig-1g.5gb.replicas\":\"4\"}",
                        "{\"nvidia.com/gpu\":\"0\",\"nvidia.com/mig-1g.5gb\":\"28\"}", NULL),
              "");
    /* Mixed strategy: unknown profile, impossible mixes, counts that do not add up. */
    CHECK_STR(reason_of("{" A40 ",\"nvidia.com/gpu.count\":\"1\"," MIXED "}",
                        "{\"nvidia.com/gpu\":\"0\",\"nvidia.com/mig-1g.10gb.me\":\"1\"}", NULL),
              "status.allocatable advertises nvidia.com/mig-1g.10gb.me, but NVIDIA-A100-SXM4-40GB has no MIG profile "
              "1g.10gb.me");
    CHECK_STR(reason_of("{" A40 ",\"nvidia.com/gpu.count\":\"1\"," MIXED "}",
                        "{\"nvidia.com/gpu\":\"0\",\"nvidia.com/mig-3g.20gb\":\"3\"}", NULL),
              "cannot place the advertised MIG devices (3 x 3g.20gb) on 1 MIG-enabled NVIDIA-A100-SXM4-40GB GPU(s) "
              "(nvidia.com/gpu.count=1, nvidia.com/gpu=0 without MIG)");
    CHECK_CONTAINS(reason_of("{" A40 ",\"nvidia.com/gpu.count\":\"1\"," MIXED "}",
                             "{\"nvidia.com/mig-4g.20gb\":\"1\",\"nvidia.com/mig-3g.20gb\":\"1\",\"nvidia.com/mig-1g.5gb\":\"1\"}",
                             NULL),
                   "cannot place the advertised MIG devices (1 x 4g.20gb, 1 x 3g.20gb, 1 x 1g.5gb)");
    CHECK_CONTAINS(reason_of("{" A40 ",\"nvidia.com/gpu.count\":\"1\"," MIXED "}",
                             "{\"nvidia.com/gpu\":\"1\",\"nvidia.com/mig-1g.5gb\":\"2\"}", NULL),
                   "leave no MIG-enabled GPU");
    CHECK_CONTAINS(reason_of("{" A40 ",\"nvidia.com/gpu.count\":\"1\"," MIXED "}",
                             "{\"nvidia.com/gpu\":\"2\"}", NULL),
                   "status.allocatable says 2 GPUs without MIG but nvidia.com/gpu.count=1");
    CHECK_CONTAINS(reason_of("{" A40 ",\"nvidia.com/gpu.count\":\"2\"," MIXED "}", "{\"nvidia.com/gpu\":\"0\"}", NULL),
                   "no GPU resource advertised in status.allocatable yet");
    CHECK_CONTAINS(reason_of("{" A40 ",\"nvidia.com/gpu.count\":\"1\"}",
                             "{\"nvidia.com/gpu\":\"1\",\"nvidia.com/mig-1g.5gb\":\"2\"}", NULL),
                   "advertises nvidia.com/mig-1g.5gb=2 but nvidia.com/mig.strategy is absent, not mixed");
    /* MIG on a model the catalog does not know. */
    CHECK_CONTAINS(reason_of("{\"nvidia.com/gpu.product\":\"NVIDIA-Future-MIG-1g.10gb\",\"nvidia.com/gpu.count\":\"7\","
                             "\"nvidia.com/gpu.memory\":\"9000\",\"nvidia.com/mig.strategy\":\"single\"}",
                             "{\"nvidia.com/gpu\":\"7\"}", NULL),
                   "MIG on a GPU model the catalog does not know");
    CHECK_CONTAINS(reason_of("{\"nvidia.com/gpu.product\":\"NVIDIA-Future\",\"nvidia.com/gpu.count\":\"1\","
                             "\"nvidia.com/gpu.memory\":\"9000\"," MIXED "}",
                             "{\"nvidia.com/mig-1g.10gb\":\"7\"}", NULL),
                   "MIG on a GPU model the catalog does not know");
    /* A mixed node whose every GPU has MIG, with an empty GPU left over. */
    model_node *n = mk("{" A40 ",\"nvidia.com/gpu.count\":\"2\"," MIXED ",\"nvidia.com/gpu.replicas\":\"0\"}",
                       "{\"nvidia.com/mig-7g.40gb\":\"1\"}", NULL);
    CHECK(n);
    CHECK_STR(n->reason, "");
    CHECK_INT(n->ngpus, 2);
    CHECK_INT(n->gpus[0].ninst + n->gpus[1].ninst, 1);
    CHECK_INT(n->gpus[1].mode, MODEL_GPU_MIG);
    model_node_free(n);
}

/* ---------------------------------------------------------- annotation ---- */

TEST(node_json_annotation_refines) {
    model_node *n = fixture_node("nodes/annotated-h100-x4.json");
    CHECK(n);
    CHECK_STR(n->reason, "");
    CHECK_INT(n->ngpus, 4);
    CHECK_STR(n->gpus[0].uuid, "GPU-0a1b2c3d-0000-1111-2222-333344445555");
    CHECK_STR(n->gpus[3].uuid, "GPU-0a1b2c3d-0000-1111-2222-333344445558");
    CHECK_INT(n->gpus[0].numa_node, 0);
    CHECK_INT(n->gpus[2].numa_node, 1);
    CHECK_INT(n->gpus[0].nvlink_peers, 1u << 1);
    CHECK_INT(n->gpus[3].nvlink_peers, 1u << 2);
    CHECK_INT(n->gpus[2].memory_mib, 81000);
    CHECK_INT(n->gpus[1].memory_mib, 81559);
    model_node_free(n);

    n = fixture_node("nodes/annotated-a100-mixed.json");
    CHECK(n);
    CHECK_STR(n->reason, "");
    CHECK_INT(n->ngpus, 2);
    /* The annotation decides which GPU has MIG: here GPU 0, unlike the inferred order. */
    CHECK_INT(n->gpus[0].mode, MODEL_GPU_MIG);
    CHECK(n->gpus[0].mig_dynamic);
    CHECK_INT(n->gpus[0].ninst, 3);
    CHECK_INT(n->gpus[0].inst[0].start, 0);
    CHECK_INT(n->gpus[0].inst[1].start, 4);
    CHECK_INT(n->gpus[0].inst[2].start, 6);
    CHECK_STR(n->gpus[0].uuid, "GPU-aaaa");
    CHECK_INT(n->gpus[1].mode, MODEL_GPU_WHOLE);
    CHECK_INT(n->gpus[1].numa_node, 1);
    CHECK_INT(n->gpus[1].numa_node, 1);
    model_node_free(n);

    /* MIG single with exact placement, and MPS whose per-client limit follows the memory. */
    const char *single = "{\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3-MIG-1g.10gb\",\"nvidia.com/gpu.count\":\"3\","
                         "\"nvidia.com/mig.strategy\":\"single\"}";
    n = mk(single, "{\"nvidia.com/gpu\":\"3\"}",
           "[{\"mig\":[{\"profile\":\"1g.10gb\",\"start\":6},{\"profile\":\"1g.10gb\",\"start\":3}]},"
           "{\"mig\":[{\"profile\":\"1g.10gb\",\"start\":2}]}]");
    CHECK(n);
    CHECK_STR(n->reason, "");
    CHECK_INT(n->ngpus, 2);
    CHECK_INT(n->gpus[0].inst[0].start, 6);
    CHECK_INT(n->gpus[1].inst[0].start, 2);
    model_node_free(n);
    n = mk("{\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3-SHARED\",\"nvidia.com/gpu.count\":\"1\","
           "\"nvidia.com/gpu.replicas\":\"4\",\"nvidia.com/gpu.sharing-strategy\":\"mps\"}",
           "{\"nvidia.com/gpu\":\"4\"}", "[{\"memory_mib\":80000}]");
    CHECK(n);
    CHECK_STR(n->reason, "");
    CHECK_INT(n->gpus[0].mps_memory_limit_mib, 20000);
    model_node_free(n);
}

TEST(node_json_annotation_rejected) {
    model_node *n = fixture_node("nodes/annotation-malformed.json");
    CHECK(n);
    CHECK_INT(n->ngpus, 0);
    CHECK_STR(n->reason, "annotation tessera.io/gpus is not valid JSON");
    model_node_free(n);

    const char *h2 = "{" H100 ",\"nvidia.com/gpu.count\":\"2\"}", *a2 = "{\"nvidia.com/gpu\":\"2\"}";
    CHECK_STR(reason_of(h2, a2, "[{},{}]"), "");
    CHECK_STR(reason_of(h2, a2, "[{\"uuid\":\"GPU-1\"}]"),
              "annotation tessera.io/gpus lists 1 GPUs but the labels say 2 (nvidia.com/gpu.count=2)");
    CHECK_STR(reason_of(h2, a2, "{\"uuid\":\"GPU-1\"}"),
              "annotation tessera.io/gpus must be a JSON array with one object per GPU");
    CHECK_STR(reason_of(h2, a2, "[{},3]"), "tessera.io/gpus[1] is not an object");
    CHECK_STR(reason_of(h2, a2, "[{\"numa_node\":0},{}]"), "tessera.io/gpus[0]: unknown key \"numa_node\"");
    CHECK_CONTAINS(reason_of(h2, a2, "[{\"index\":1},{}]"), "tessera.io/gpus[0].index must be 0");
    CHECK_CONTAINS(reason_of(h2, a2, "[{},{\"nvlink\":[1]}]"), "tessera.io/gpus[1].nvlink");
    CHECK_CONTAINS(reason_of(h2, a2, "[{},{\"nvlink\":[5]}]"), "tessera.io/gpus[1].nvlink");
    CHECK_CONTAINS(reason_of(h2, a2, "[{},{\"nvlink\":1}]"), "tessera.io/gpus[1].nvlink is not an array");
    CHECK_CONTAINS(reason_of(h2, a2, "[{\"uuid\":7},{}]"), "tessera.io/gpus[0].uuid");
    CHECK_CONTAINS(reason_of(h2, a2, "[{\"memory_mib\":-1},{}]"), "tessera.io/gpus[0].memory_mib");
    CHECK_CONTAINS(reason_of(h2, a2, "[{\"numa\":0.5},{}]"), "tessera.io/gpus[0].numa");
    CHECK_CONTAINS(reason_of(h2, a2, "[{\"product\":1},{}]"), "tessera.io/gpus[0].product");
    CHECK_STR(reason_of(h2, a2, "[{\"product\":\"NVIDIA-A100-SXM4-80GB\"},{}]"),
              "tessera.io/gpus[0].product=NVIDIA-A100-SXM4-80GB but nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3");
    CHECK_STR(reason_of(h2, a2, "[{\"product\":\"NVIDIA-H100-80GB-HBM3\"},{}]"), "");
    CHECK_CONTAINS(reason_of(h2, a2, "[{\"mig\":[]},{}]"), "tessera.io/gpus[0] lists MIG instances but the labels say");
    CHECK_CONTAINS(reason_of(h2, a2, "[{\"mig_dynamic\":true},{}]"), "mig_dynamic needs a \"mig\" list");
    CHECK_CONTAINS(reason_of(h2, a2, "[{\"mig\":[],\"mig_dynamic\":1},{}]"), "mig_dynamic must be true or false");
    CHECK_CONTAINS(reason_of("{}", "{}", "[]"), "annotation tessera.io/gpus lists 0 GPUs but the node has no");
    CHECK_CONTAINS(reason_of(h2, a2, "[{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}]"), "lists 17 GPUs");

    /* Unknown-product annotation must name the same unknown product. */
    const char *u = "{\"nvidia.com/gpu.product\":\"NVIDIA-Future\",\"nvidia.com/gpu.count\":\"1\","
                    "\"nvidia.com/gpu.memory\":\"9000\"}";
    CHECK_STR(reason_of(u, "{\"nvidia.com/gpu\":\"1\"}", "[{\"product\":\"NVIDIA-Future\"}]"), "");
    CHECK_CONTAINS(reason_of(u, "{\"nvidia.com/gpu\":\"1\"}", "[{\"product\":\"NVIDIA-Past\"}]"),
                   "tessera.io/gpus[0].product=NVIDIA-Past");

    /* MIG placement in the annotation: invalid layouts, unknown profiles, counts. */
    const char *mx = "{" A40 ",\"nvidia.com/gpu.count\":\"1\"," MIXED "}";
    const char *ax = "{\"nvidia.com/mig-3g.20gb\":\"1\",\"nvidia.com/mig-2g.10gb\":\"1\"}";
    CHECK_STR(reason_of(mx, ax, "[{\"mig\":[{\"profile\":\"3g.20gb\",\"start\":4},{\"profile\":\"2g.10gb\",\"start\":0}]}]"), "");
    CHECK_CONTAINS(reason_of(mx, ax, "[{\"mig\":[{\"profile\":\"3g.20gb\",\"start\":0},{\"profile\":\"2g.10gb\",\"start\":2}]}]"),
                   "tessera.io/gpus[0].mig[1] 2g.10gb@2: GPU 0:");
    CHECK_STR(reason_of(mx, ax, "[{\"mig\":[{\"profile\":\"3g.40gb\",\"start\":0}]}]"),
              "tessera.io/gpus[0].mig[0]: NVIDIA-A100-SXM4-40GB has no MIG profile \"3g.40gb\"");
    CHECK_STR(reason_of(mx, ax, "[{\"mig\":[{\"profile\":\"3g.20gb\",\"start\":4}]}]"),
              "annotation tessera.io/gpus places 0 x 2g.10gb but status.allocatable advertises 1");
    CHECK_CONTAINS(reason_of(mx, ax, "[{\"mig\":[{\"profile\":\"3g.20gb\"}]}]"), "needs a \"start\"");
    CHECK_CONTAINS(reason_of(mx, ax, "[{\"mig\":[{\"start\":0}]}]"), "needs a \"profile\"");
    CHECK_CONTAINS(reason_of(mx, ax, "[{\"mig\":[{\"profile\":\"3g.20gb\",\"start\":4,\"size\":4}]}]"),
                   "keys other than");
    CHECK_CONTAINS(reason_of(mx, ax, "[{\"mig\":{}}]"), "tessera.io/gpus[0].mig is not an array");
    CHECK_CONTAINS(reason_of(mx, ax, "[{\"mig\":[{},{},{},{},{},{},{},{},{}]}]"), "more than 8 instances");
    CHECK_CONTAINS(reason_of(mx, ax, "[{}]"), "tessera.io/gpus marks 0 GPUs MIG-enabled");
    CHECK_CONTAINS(reason_of(mx, ax, "[{\"mig\":[]},{}]"), "lists 2 GPUs but nvidia.com/gpu.count=1");

    const char *single = "{\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3-MIG-1g.10gb\",\"nvidia.com/gpu.count\":\"2\","
                         "\"nvidia.com/mig.strategy\":\"single\"}";
    const char *as = "{\"nvidia.com/gpu\":\"2\"}";
    CHECK_STR(reason_of(single, as, "[{\"mig\":[{\"profile\":\"1g.10gb\",\"start\":0}]}]"),
              "annotation tessera.io/gpus places 1 MIG devices but nvidia.com/gpu.count=2");
    CHECK_CONTAINS(reason_of(single, as, "[{\"mig\":[{\"profile\":\"2g.20gb\",\"start\":0}]}]"),
                   "under the MIG single strategy every device is 1g.10gb");
    CHECK_CONTAINS(reason_of(single, as, "[{\"mig\":[{\"profile\":\"1g.10gb\",\"start\":0}]},{}]"),
                   "tessera.io/gpus[1] has no \"mig\" list");
    CHECK_CONTAINS(reason_of(single, as, "[{\"mig\":[{\"profile\":\"1g.10gb\",\"start\":0},{\"profile\":\"1g.10gb\",\"start\":0}]}]"),
                   "tessera.io/gpus[0].mig[1] 1g.10gb@0");
}

/* ------------------------------------------------------------- garbage ---- */

TEST(node_json_garbage) {
    char err[256] = "";
    CHECK(!model_node_from_json_text("[1,2]", 5, NULL, err, sizeof err));
    CHECK_STR(err, "Node is not a JSON object");
    CHECK(!model_node_from_json_text("{not json", 9, NULL, err, sizeof err));
    CHECK_STR(err, "Node is not valid JSON");
    CHECK(!model_node_from_json_text(NULL, 0, NULL, err, sizeof err));
    const char *noname = "{\"metadata\":{\"labels\":{}}}";
    CHECK(!model_node_from_json_text(noname, strlen(noname), NULL, err, sizeof err));
    CHECK_STR(err, "Node has no metadata.name");
    const char *numname = "{\"metadata\":{\"name\":5}}";
    CHECK(!model_node_from_json_text(numname, strlen(numname), NULL, err, sizeof err));
    const char *pod = "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"}}";
    CHECK(!model_node_from_json_text(pod, strlen(pod), NULL, err, sizeof err));
    CHECK_STR(err, "object is a Pod, not a Node");
    CHECK(!model_node_from_json(NULL, NULL, NULL, 0));

    /* A named Node with broken parts is a node that takes no GPU pods. */
    const char *bad[][2] = {
        {"{\"kind\":\"Node\",\"metadata\":{\"name\":\"x\",\"labels\":[1]}}", "metadata.labels is not an object"},
        {"{\"metadata\":{\"name\":\"x\",\"labels\":\"gpu\"}}", "metadata.labels is not an object"},
        {"{\"metadata\":{\"name\":\"x\",\"annotations\":7}}", "metadata.annotations is not an object"},
        {"{\"metadata\":{\"name\":\"x\"},\"status\":[]}", "status is not an object"},
        {"{\"metadata\":{\"name\":\"x\"},\"status\":{\"allocatable\":\"8\"}}", "status.allocatable is not an object"},
        {"{\"metadata\":{\"name\":\"x\",\"annotations\":{\"tessera.io/gpus\":[]}}}",
         "annotation tessera.io/gpus is not a string"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        model_node *n = model_node_from_json_text(bad[i][0], strlen(bad[i][0]), NULL, err, sizeof err);
        CHECK_MSG(n, "case %zu: %s", i, err);
        CHECK_STR(n->name, "x");
        CHECK_INT(n->ngpus, 0);
        CHECK_STR(n->reason, bad[i][1]);
        model_node_free(n);
    }
    /* Null labels are just absent. */
    const char *nul = "{\"metadata\":{\"name\":\"x\",\"labels\":null}}";
    model_node *n = model_node_from_json_text(nul, strlen(nul), NULL, err, sizeof err);
    CHECK(n);
    CHECK_STR(n->reason, "");
    model_node_free(n);
    /* An explicit catalog is used as given. */
    n = model_node_from_json_text(nul, strlen(nul), model_catalog_default(), NULL, 0);
    CHECK(n);
    model_node_free(n);
}

/* A catalog given by the caller: products whose memory nobody measured, and one that
 * cannot run MPS, must be refused rather than guessed. */
TEST(node_json_custom_catalog_gaps) {
    const char *data =
        "{\"gpus\":[{\"id\":\"Blank\",\"compute_capability\":\"8.0\",\"mig_capable\":false,\"mps_capable\":false,"
        "\"variants\":[{\"gfd_product\":\"NVIDIA-Blank\"}]},"
        "{\"id\":\"Tiny\",\"compute_capability\":\"8.0\",\"mig_capable\":true,\"mps_capable\":true,"
        "\"mig\":{\"compute_slices_total\":1,\"memory_slices_total\":1,\"profiles\":[{\"name\":\"1g.1gb\","
        "\"compute_slices\":1,\"memory_slices\":1,\"placement\":{\"starts\":[0],\"size\":1}}]},"
        "\"variants\":[{\"gfd_product\":\"NVIDIA-Tiny\"}]}]}";
    char err[256] = "";
    model_catalog *cat = model_catalog_from_json(data, strlen(data), err, sizeof err);
    CHECK_MSG(cat, "%s", err);
    const char *cases[][3] = {
        {"{\"nvidia.com/gpu.product\":\"NVIDIA-Blank\",\"nvidia.com/gpu.count\":\"1\"}", "{\"nvidia.com/gpu\":\"1\"}",
         "GPU memory of NVIDIA-Blank is unknown: the catalog has no figure and nvidia.com/gpu.memory is missing"},
        {"{\"nvidia.com/gpu.product\":\"NVIDIA-Blank\",\"nvidia.com/gpu.count\":\"1\",\"nvidia.com/gpu.memory\":\"1000\"}",
         "{\"nvidia.com/gpu\":\"1\"}", ""},
        {"{\"nvidia.com/gpu.product\":\"NVIDIA-Blank\",\"nvidia.com/gpu.count\":\"1\",\"nvidia.com/gpu.replicas\":\"2\","
         "\"nvidia.com/gpu.sharing-strategy\":\"mps\"}",
         "{\"nvidia.com/gpu.shared\":\"2\"}", "MPS clients per GPU, but a NVIDIA-Blank takes at most 0"},
        {"{\"nvidia.com/gpu.product\":\"NVIDIA-Tiny-MIG-1g.1gb\",\"nvidia.com/gpu.count\":\"1\","
         "\"nvidia.com/mig.strategy\":\"single\"}",
         "{\"nvidia.com/gpu\":\"1\"}", "GPU memory of NVIDIA-Tiny is unknown to the catalog"},
        {"{\"nvidia.com/gpu.product\":\"NVIDIA-Tiny\",\"nvidia.com/gpu.count\":\"1\",\"nvidia.com/mig.strategy\":\"mixed\"}",
         "{\"nvidia.com/mig-1g.1gb\":\"1\"}", "GPU memory of NVIDIA-Tiny is unknown"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cJSON *node = cJSON_CreateObject();
        cJSON *meta = cJSON_AddObjectToObject(node, "metadata");
        cJSON_AddStringToObject(meta, "name", "c");
        cJSON_AddItemToObject(meta, "labels", cJSON_Parse(cases[i][0]));
        cJSON_AddItemToObject(cJSON_AddObjectToObject(node, "status"), "allocatable", cJSON_Parse(cases[i][1]));
        model_node *n = model_node_from_json(node, cat, err, sizeof err);
        cJSON_Delete(node);
        CHECK(n);
        bool ok = cases[i][2][0] ? strstr(n->reason, cases[i][2]) != NULL : n->reason[0] == 0;
        CHECK_MSG(ok, "case %zu: reason \"%s\", expected \"%s\"", i, n->reason, cases[i][2]);
        CHECK_INT(n->ngpus, cases[i][2][0] ? 0 : 1);
        model_node_free(n);
    }
    model_catalog_free(cat);
}

/* An impossible mix on many GPUs must end quickly with a reason, not search forever. */
TEST(node_json_mig_mixed_impossible_is_bounded) {
    CHECK_CONTAINS(reason_of("{" A40 ",\"nvidia.com/gpu.count\":\"16\"," MIXED "}",
                             "{\"nvidia.com/mig-3g.20gb\":\"32\",\"nvidia.com/mig-1g.5gb\":\"1\"}", NULL),
                   "cannot place the advertised MIG devices (32 x 3g.20gb, 1 x 1g.5gb) on 16 MIG-enabled");
    CHECK_CONTAINS(reason_of("{" A40 ",\"nvidia.com/gpu.count\":\"16\"," MIXED "}",
                             "{\"nvidia.com/mig-1g.5gb\":\"111\",\"nvidia.com/mig-2g.10gb\":\"1\"}", NULL),
                   "cannot place the advertised MIG devices");
    /* Feasible mixes on the same GPUs are found, uniform (112 x 1g.5gb) or ragged, and the
     * result is a valid node. */
    CHECK_STR(reason_of("{" A40 ",\"nvidia.com/gpu.count\":\"16\"," MIXED "}",
                        "{\"nvidia.com/mig-1g.5gb\":\"112\"}", NULL),
              "");
    model_node *n = mk("{" A40 ",\"nvidia.com/gpu.count\":\"16\"," MIXED "}",
                       "{\"nvidia.com/mig-2g.10gb\":\"40\",\"nvidia.com/mig-1g.10gb\":\"17\","
                       "\"nvidia.com/mig-1g.5gb.me\":\"1\"}",
                       NULL);
    CHECK(n);
    CHECK_STR(n->reason, "");
    int total = 0;
    for (int i = 0; i < n->ngpus; i++) total += n->gpus[i].ninst;
    CHECK_INT(total, 58);
    char why[200];
    CHECK_MSG(model_node_check(n, why, sizeof why), "%s", why);
    model_node_free(n);
}

/* ------------------------------------------------ layered sharing ---- */

/* Instances of profile `name` on the node, and how many of them carry `replicas`. */
static int count_instances(const model_node *n, const char *name, int replicas, int *with) {
    int total = 0;
    *with = 0;
    for (int i = 0; i < n->ngpus; i++)
        for (int k = 0; k < n->gpus[i].ninst; k++) {
            const model_gpu *g = &n->gpus[i];
            if (strcmp(g->product->profiles[g->inst[k].profile].name, name)) continue;
            total++;
            *with += g->inst[k].replicas == replicas;
        }
    return total;
}

TEST(node_json_layered_mixed_timeslice) {
    const char *files[] = {"nodes/a100-mig-mixed-timeslice.json", "nodes/a100-mig-mixed-timeslice-rename.json"};
    for (int f = 0; f < 2; f++) {
        model_node *n = fixture_node(files[f]);
        CHECK(n);
        CHECK_STR(n->reason, "");
        CHECK_INT(n->mig_strategy, MODEL_MIG_MIXED);
        CHECK_INT(n->mig_sharing, MODEL_GPU_TIMESLICE);
        CHECK_INT(n->mig_renamed, f == 1);
        CHECK_INT(n->sharing, MODEL_GPU_WHOLE);   /* the full-GPU sharing is separate */
        CHECK_INT(n->ngpus, 2);
        int with;
        CHECK_INT(count_instances(n, "1g.10gb", 4, &with), 8);
        CHECK_INT(with, 8);                         /* every 1g.10gb: 4 replicas */
        CHECK_INT(count_instances(n, "3g.40gb", 1, &with), 2);
        CHECK_INT(with, 2);                         /* 3g.40gb stays plain */
        CHECK(model_node_mig_layered(n));
        CHECK_INT(model_gpu_free_replicas(&n->gpus[0]), 1 + 4 * 4);
        char why[200];
        CHECK_MSG(model_node_check(n, why, sizeof why), "%s", why);
        model_node_free(n);
    }
}

TEST(node_json_layered_single_timeslice) {
    const char *files[] = {"nodes/h100-mig-single-timeslice.json", "nodes/h100-mig-single-timeslice-rename.json"};
    for (int f = 0; f < 2; f++) {
        model_node *n = fixture_node(files[f]);
        CHECK(n);
        CHECK_STR(n->reason, "");
        CHECK_INT(n->mig_strategy, MODEL_MIG_SINGLE);
        CHECK_INT(n->mig_sharing, MODEL_GPU_TIMESLICE);
        CHECK_INT(n->mig_renamed, f == 1);
        CHECK_INT(n->ngpus, 2);
        int with;
        CHECK_INT(count_instances(n, "1g.10gb", 2, &with), 14);
        CHECK_INT(with, 14);
        /* A free replica of a 1g instance is half of a free 1g instance's capacity. */
        CHECK_INT(model_gpu_free_compute(&n->gpus[0]), 1000);
        model_node_free(n);
    }
}

TEST(node_json_layered_mps_refused) {
    model_node *n = fixture_node("nodes/a100-mig-mixed-mps.json");
    CHECK(n);
    CHECK_INT(n->ngpus, 0);
    CHECK_CONTAINS(n->reason, "label nvidia.com/mig-1g.10gb.sharing-strategy=mps: the NVIDIA device plugin does not "
                              "share MIG devices by MPS");
    model_node_free(n);
}

TEST(node_json_layered_contradictions) {
    /* Labels and allocatable that disagree: a readable reason, no GPUs. */
#define L1G(extra) "{" A40 ",\"nvidia.com/gpu.count\":\"1\"," MIXED extra "}"
    CHECK_STR(reason_of(L1G(",\"nvidia.com/mig-1g.5gb.replicas\":\"4\",\"nvidia.com/mig-1g.5gb.count\":\"7\""),
                        "{\"nvidia.com/mig-1g.5gb\":\"26\"}", NULL),
              "status.allocatable nvidia.com/mig-1g.5gb=26 is not a multiple of nvidia.com/mig-1g.5gb.replicas=4");
    CHECK_STR(reason_of(L1G(",\"nvidia.com/mig-1g.5gb.replicas\":\"2\",\"nvidia.com/mig-1g.5gb.count\":\"7\""),
                        "{\"nvidia.com/mig-1g.5gb\":\"16\"}", NULL),
              "label nvidia.com/mig-1g.5gb.count=7 x nvidia.com/mig-1g.5gb.replicas=2 = 14, but status.allocatable "
              "nvidia.com/mig-1g.5gb=16");
    CHECK_STR(reason_of(L1G(",\"nvidia.com/mig-1g.5gb.replicas\":\"2\","
                            "\"nvidia.com/mig-1g.5gb.product\":\"NVIDIA-A100-SXM4-40GB-MIG-1g.5gb\""),
                        "{\"nvidia.com/mig-1g.5gb\":\"14\"}", NULL),
              "nvidia.com/mig-1g.5gb.replicas=2 and status.allocatable nvidia.com/mig-1g.5gb, but label "
              "nvidia.com/mig-1g.5gb.product=NVIDIA-A100-SXM4-40GB-MIG-1g.5gb lacks the -SHARED suffix the device "
              "plugin adds to shared devices");
    CHECK_CONTAINS(reason_of(L1G(",\"nvidia.com/mig-1g.5gb.replicas\":\"2\","
                                 "\"nvidia.com/mig-1g.5gb.product\":\"NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED\""),
                             "{\"nvidia.com/mig-1g.5gb.shared\":\"14\"}", NULL),
                   "has the -SHARED suffix (renameByDefault off) but replicas are advertised as nvidia.com/mig-1g.5gb.shared");
    CHECK_CONTAINS(reason_of(L1G(",\"nvidia.com/mig-1g.5gb.replicas\":\"2\",\"nvidia.com/mig-1g.5gb.sharing-strategy\":\"none\""),
                             "{\"nvidia.com/mig-1g.5gb\":\"14\"}", NULL),
                   "label nvidia.com/mig-1g.5gb.replicas=2 but nvidia.com/mig-1g.5gb.sharing-strategy=none");
    CHECK_CONTAINS(reason_of(L1G(",\"nvidia.com/mig-1g.5gb.replicas\":\"64\""), "{\"nvidia.com/mig-1g.5gb\":\"448\"}",
                             NULL),
                   "more than the 32 replicas per MIG instance supported");
    CHECK_CONTAINS(reason_of(L1G(",\"nvidia.com/mig-1g.5gb.replicas\":\"2\""),
                             "{\"nvidia.com/mig-1g.5gb\":\"2\",\"nvidia.com/mig-1g.5gb.shared\":\"2\"}", NULL),
                   "advertises both nvidia.com/mig-1g.5gb and nvidia.com/mig-1g.5gb.shared");
    CHECK_CONTAINS(reason_of(L1G(",\"nvidia.com/mig-1g.5gb.replicas\":\"2\",\"nvidia.com/mig-2g.10gb.replicas\":\"2\""),
                             "{\"nvidia.com/mig-1g.5gb.shared\":\"6\",\"nvidia.com/mig-2g.10gb\":\"4\"}", NULL),
                   "renames the replicas of some MIG profiles (.shared) but not of others");
    /* Single strategy: replicas advertised under both names, or renamed with -SHARED. */
#define S1G(extra) "{\"nvidia.com/gpu.product\":\"NVIDIA-A100-SXM4-40GB-MIG-1g.5gb" extra "\",\"nvidia.com/gpu.count\":\"7\"," \
                   "\"nvidia.com/gpu.replicas\":\"2\",\"nvidia.com/mig.strategy\":\"single\"}"
    CHECK_STR(reason_of(S1G("-SHARED"), "{\"nvidia.com/gpu\":\"14\"}", NULL), "");
    CHECK_STR(reason_of(S1G(""), "{\"nvidia.com/gpu.shared\":\"14\"}", NULL), "");
    CHECK_CONTAINS(reason_of(S1G("-SHARED"), "{\"nvidia.com/gpu.shared\":\"14\"}", NULL),
                   "has the -SHARED suffix (renameByDefault off) but replicas are advertised as nvidia.com/gpu.shared");
    CHECK_CONTAINS(reason_of(S1G(""), "{\"nvidia.com/gpu\":\"14\"}", NULL), "lacks the -SHARED suffix");
    CHECK_CONTAINS(reason_of(S1G("-SHARED"), "{\"nvidia.com/gpu\":\"14\",\"nvidia.com/gpu.shared\":\"14\"}", NULL),
                   "advertises both nvidia.com/gpu=14 and nvidia.com/gpu.shared=14");
    /* Replicas 1 on a MIG instance is today's plain MIG: nothing changes. */
    model_node *n = mk(L1G(",\"nvidia.com/mig-1g.5gb.replicas\":\"1\",\"nvidia.com/mig-1g.5gb.sharing-strategy\":\"none\""),
                       "{\"nvidia.com/mig-1g.5gb\":\"7\"}", NULL);
    CHECK_STR(n->reason, "");
    CHECK_INT(n->mig_sharing, MODEL_GPU_WHOLE);
    CHECK(!model_node_mig_layered(n));
    model_node_free(n);
    /* Layered instances and instances created on demand are not combined. */
    CHECK_CONTAINS(reason_of(L1G(",\"nvidia.com/mig-1g.5gb.replicas\":\"2\""), "{\"nvidia.com/mig-1g.5gb\":\"2\"}",
                             "[{\"index\":0,\"mig\":[{\"profile\":\"1g.5gb\",\"start\":0}],\"mig_dynamic\":true}]"),
                   "does not combine with instances created on demand");
#undef L1G
#undef S1G
}

TEST(node_layered_by_hand) {
    const model_gpu_product *a80 = product("NVIDIA-A100-SXM4-80GB");
    model_node *n = model_node_new("hand");
    model_gpu *g = model_node_add_gpu(n, a80, MODEL_GPU_MIG, 1, 0);
    model_gpu *w = model_node_add_gpu(n, a80, MODEL_GPU_WHOLE, 1, 0);
    int p1 = model_product_profile_index(a80, "1g.10gb"), p3 = model_product_profile_index(a80, "3g.40gb");
    char err[200];
    CHECK_INT(model_gpu_add_mig_instance(g, p1, 0, err, sizeof err), 0);
    CHECK_INT(model_gpu_share_mig_profile(g, p1, MODEL_GPU_TIMESLICE, 4, err, sizeof err), 0);
    CHECK_INT(g->inst[0].replicas, 4);                     /* existing instance */
    CHECK_INT(model_gpu_add_mig_instance(g, p1, 1, err, sizeof err), 0);
    CHECK_INT(g->inst[1].replicas, 4);                     /* added later */
    CHECK_INT(model_gpu_add_mig_instance(g, p3, 4, err, sizeof err), 0);
    CHECK_INT(g->inst[2].replicas, 1);                     /* other profile: plain */
    CHECK_INT(g->mig_sharing, MODEL_GPU_TIMESLICE);
    CHECK(model_gpu_share_mig_profile(g, p3, MODEL_GPU_MPS, 2, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "already shared by timeslice");
    CHECK(model_gpu_share_mig_profile(g, p3, MODEL_GPU_TIMESLICE, MODEL_MIG_MAX_REPLICAS + 1, err, sizeof err) < 0);
    CHECK(model_gpu_share_mig_profile(w, p3, MODEL_GPU_TIMESLICE, 2, err, sizeof err) < 0);
    CHECK(model_gpu_share_mig_profile(g, 99, MODEL_GPU_TIMESLICE, 2, err, sizeof err) < 0);
    CHECK(model_node_mig_layered(n));
    /* back to plain */
    CHECK_INT(model_gpu_share_mig_profile(g, p1, MODEL_GPU_TIMESLICE, 1, err, sizeof err), 0);
    CHECK_INT(g->inst[0].replicas, 1);
    CHECK_INT(g->mig_sharing, MODEL_GPU_WHOLE);
    CHECK(!model_node_mig_layered(n));
    model_node_free(n);
}

/* ------------------------------------------------------------ topology ---- */

/* The three servers' fixtures (the annotation as the node agent writes it) give the matrix
 * topo_helpers.h builds by hand, link for link. */
TEST(node_topo_fixtures_give_the_reference_matrices) {
    const char *files[] = {"nodes/topo-dgx-a100.json", "nodes/topo-pcie8-nvlink-pairs.json",
                           "nodes/topo-2socket-4gpu.json"};
    test_server servers[] = {TEST_DGX_A100, TEST_PCIE8, TEST_2SOCKET};
    for (int s = 0; s < 3; s++) {
        model_node *n = fixture_node(files[s]);
        CHECK(n);
        CHECK_MSG(!n->reason[0], "%s: %s", files[s], n->reason);
        CHECK_INT(n->ngpus, test_server_gpus(servers[s]));
        CHECK(n->topo != NULL);
        for (int a = 0; a < n->ngpus; a++)
            for (int b = 0; b < n->ngpus; b++) {
                if (a == b) continue;
                model_link want = test_server_link(servers[s], a, b);
                CHECK_MSG(model_topo_link(n, a, b) == want, "%s: link %d-%d is %d, expected %d", files[s], a, b,
                          model_topo_link(n, a, b), want);
                CHECK_INT(n->topo->nvlinks[a][b], want == MODEL_LINK_NVLINK ? 12 : 0);
            }
        CHECK_INT(n->gpus[n->ngpus - 1].numa_node, 1);
        model_node_free(n);
    }
}

TEST(node_topo_derived_from_numa_and_nvlink) {
    const char *h4 = "{" H100 ",\"nvidia.com/gpu.count\":\"4\"}", *a4 = "{\"nvidia.com/gpu\":\"4\"}";
    model_node *n = mk(h4, a4, "[{\"numa\":0,\"nvlink\":[1]},{\"numa\":0,\"nvlink\":[0]},{\"numa\":1},{}]");
    CHECK(n);
    CHECK_STR(n->reason, "");
    CHECK(n->topo != NULL);
    CHECK_INT(model_topo_link(n, 0, 1), MODEL_LINK_NVLINK);
    CHECK_INT(n->topo->nvlinks[0][1], 1);   /* the count is unknown: one */
    CHECK_INT(model_topo_link(n, 0, 2), MODEL_LINK_SYS);
    CHECK_INT(model_topo_link(n, 1, 3), MODEL_LINK_UNKNOWN);   /* GPU 3 says nothing */
    model_node_free(n);
    n = mk(h4, a4, "[{\"numa\":0},{\"numa\":0},{\"numa\":0},{\"numa\":0}]");
    CHECK(n && n->topo);
    int8_t all[] = {0, 1, 2, 3};
    CHECK_INT(model_topo_align(n, all, 4), MODEL_ALIGN_NUMA);
    model_node_free(n);
    n = mk(h4, a4, "[{\"uuid\":\"GPU-1\"},{},{},{}]");   /* nothing about links: unknown */
    CHECK(n);
    CHECK(n->topo == NULL);
    model_node_free(n);
    n = mk(h4, a4, NULL);
    CHECK(n && n->topo == NULL);
    model_node_free(n);
}

/* Each malformed topology key, and the reason it gets (contains). */
static const struct {
    const char *ann, *reason;
} topo_rejections[] = {
    {"[{\"topo\":[\"X\"]},{\"topo\":[\"NV4\",\"X\"]}]", "tessera.io/gpus[0].topo must be an array of 2 link names"},
    {"[{\"topo\":\"X NV4\"},{}]", "tessera.io/gpus[0].topo must be an array"},
    {"[{\"topo\":[\"X\",\"NVLINK\"]},{\"topo\":[\"SYS\",\"X\"]}]", "tessera.io/gpus[0].topo[1] is not a link name"},
    {"[{\"topo\":[\"X\",7]},{\"topo\":[\"SYS\",\"X\"]}]", "tessera.io/gpus[0].topo[1] is not a link name"},
    {"[{\"topo\":[\"SYS\",\"SYS\"]},{\"topo\":[\"SYS\",\"X\"]}]", "tessera.io/gpus[0].topo[0] must be \"X\""},
    {"[{\"topo\":[\"X\",\"X\"]},{\"topo\":[\"SYS\",\"X\"]}]", "tessera.io/gpus[0].topo[1] must be a link"},
    {"[{\"topo\":[\"X\",\"PIX\"]},{\"topo\":[\"SYS\",\"X\"]}]", "tessera.io/gpus[0].topo[1] and [1].topo[0] differ"},
    {"[{\"topo\":[\"X\",\"NV4\"]},{\"topo\":[\"NV2\",\"X\"]}]", "must be symmetric"},
    {"[{\"topo\":[\"X\",\"NV4\"]},{}]", "tessera.io/gpus[1] has no \"topo\""},
    {"[{},{\"topo\":[\"NV4\",\"X\"]}]", "tessera.io/gpus[1] has \"topo\""},
    {"[{\"nvlink\":[],\"topo\":[\"X\",\"NV4\"]},{\"topo\":[\"NV4\",\"X\"]}]",
     "tessera.io/gpus[0].nvlink leaves out 1 but [0].topo[1] says NVLink"},
    {"[{\"nvlink\":[1],\"topo\":[\"X\",\"SYS\"]},{\"topo\":[\"SYS\",\"X\"]}]",
     "tessera.io/gpus[0].nvlink lists 1 but [0].topo[1] says no NVLink"},
    {"[{\"nvlink\":[1]},{\"nvlink\":[]}]", "tessera.io/gpus[0].nvlink lists 1 but [1].nvlink leaves out 0"},
    {"[{\"pci\":3},{}]", "tessera.io/gpus[0].pci must be a PCI bus id"},
    {"[{\"pci\":\"7\"},{}]", "tessera.io/gpus[0].pci must be a PCI bus id"},
    {"[{\"pci\":\"00000000:07:00\"},{}]", "tessera.io/gpus[0].pci must be a PCI bus id"},
    {"[{\"pci\":\"00000000:07:00.8\"},{}]", "tessera.io/gpus[0].pci must be a PCI bus id"},
    {"[{\"pci\":\"0000000:07:00.0\"},{}]", "tessera.io/gpus[0].pci must be a PCI bus id"},
    {"[{\"pci\":\"00000000-07:00.0\"},{}]", "tessera.io/gpus[0].pci must be a PCI bus id"},
    {"[{\"pci\":\"00000000:0g:00.0\"},{}]", "tessera.io/gpus[0].pci must be a PCI bus id"},
    {"[{\"pci\":\"00000000:07:00.0 \"},{}]", "tessera.io/gpus[0].pci must be a PCI bus id"},
    {"[{\"pci\":\"00000000:07:00.0\"},{\"pci\":\"00000000:07:00.0\"}]", "tessera.io/gpus[0].pci and [1].pci are both"},
};

TEST(node_topo_annotation_rejected_with_the_key_named) {
    const char *h2 = "{" H100 ",\"nvidia.com/gpu.count\":\"2\"}", *a2 = "{\"nvidia.com/gpu\":\"2\"}";
    CHECK_STR(reason_of(h2, a2, "[{\"topo\":[\"X\",\"NV4\"]},{\"topo\":[\"NV4\",\"X\"]}]"), "");
    CHECK_STR(reason_of(h2, a2, "[{\"pci\":\"00000000:07:00.0\"},{\"pci\":\"0000:0f:00.1\"}]"), "");
    for (size_t i = 0; i < sizeof topo_rejections / sizeof topo_rejections[0]; i++)
        CHECK_CONTAINS(reason_of(h2, a2, topo_rejections[i].ann), topo_rejections[i].reason);
    /* A node whose annotation is refused keeps no matrix either. */
    model_node *n = mk(h2, a2, "[{\"topo\":[\"X\",\"NV4\"]},{\"topo\":[\"NV4\",\"X\"],\"uuid\":1}]");
    CHECK(n && n->reason[0] && n->topo == NULL);
    model_node_free(n);
}
