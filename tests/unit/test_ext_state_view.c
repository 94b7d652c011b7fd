/* test_ext_state_view.c -- the cache keeps a node's Node-object model (base) beside its installed model only while
 * some ResourceSlice names the node (state.c): a node without DRA keeps one model, and when its first slice
 * arrives the base is recovered from the installed model by giving every pod's GPUs back. These tests check that
 * the recovered base is the Node object's model (MIG instances made on demand gone, nothing held) and that pods
 * keep exactly what they held through slices coming and going.
 */
#include <stdlib.h>
#include <string.h>

#include "extender/mirror/state.h"
#include "extender/verbs.h"
#include "ext_helpers.h"
#include "harness.h"
#include "model/fit.h"
#include "model/node.h"
#include "policy/policy.h"

static void apply_text(ext_state *st, kube_kind kind, kube_event ev, const char *json) {
    cJSON *o = cJSON_Parse(json);
    ext_state_apply(st, kind, ev, o);
    cJSON_Delete(o);
}

/* GPU 0 in dynamic MIG mode with one 3g.20gb instance made by mig-parted (a pod asking 1g.5gb gets an instance
 * created on demand), GPU 1 whole. */
#define DYN_NODE                                                                                                     \
    "{\"metadata\":{\"name\":\"dyn\",\"labels\":{\"nvidia.com/gpu.product\":\"NVIDIA-A100-SXM4-40GB\","               \
    "\"nvidia.com/gpu.count\":\"2\",\"nvidia.com/gpu.memory\":\"40960\",\"nvidia.com/mig.strategy\":\"mixed\"},"      \
    "\"annotations\":{\"tessera.io/gpus\":\"[{\\\"index\\\":0,\\\"uuid\\\":\\\"GPU-aaaa\\\",\\\"mig\\\":[{\\\"profile\\\":" \
    "\\\"3g.20gb\\\",\\\"start\\\":0}],\\\"mig_dynamic\\\":true},{\\\"index\\\":1,\\\"uuid\\\":\\\"GPU-bbbb\\\"}]\"}},"  \
    "\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"1\",\"nvidia.com/mig-3g.20gb\":\"1\"}}}"

/* NVIDIA's DRA driver publishing GPU 1 of node dyn (the same UUID: one GPU, marked dra). */
#define DYN_SLICE                                                                                                    \
    "{\"metadata\":{\"name\":\"dyn-gpu.nvidia.com\"},\"spec\":{\"driver\":\"gpu.nvidia.com\",\"nodeName\":\"dyn\","   \
    "\"pool\":{\"name\":\"dyn\",\"generation\":1,\"resourceSliceCount\":1},\"devices\":[{\"name\":\"gpu-1\","          \
    "\"attributes\":{\"type\":{\"string\":\"gpu\"},\"uuid\":{\"string\":\"GPU-bbbb\"},\"productName\":{\"string\":"     \
    "\"NVIDIA A100-SXM4-40GB\"}},\"capacity\":{\"memory\":{\"value\":\"40Gi\"}}}]}}"

static char *mig_pod(const char *name, const char *uid) {
    return pod_json(name, uid, 0, "\"nvidia.com/mig-1g.5gb\":\"1\"", NULL, NULL);
}

/* What the node holds, as text: per GPU its MIG instances (profile@start, * when held) and its holders. */
static void layout(const model_node *m, char *out, size_t len) {
    size_t o = 0;
    out[0] = 0;
    for (int i = 0; m && i < m->ngpus && o < len; i++) {
        const model_gpu *g = &m->gpus[i];
        o += (size_t)snprintf(out + o, len - o, "gpu%d%s h%d:", i, g->dra ? "(dra)" : "", g->nholders);
        for (int k = 0; k < g->ninst && o < len; k++)
            o += (size_t)snprintf(out + o, len - o, " %s@%d%s%s", g->product->profiles[g->inst[k].profile].name,
                                  g->inst[k].start, g->inst[k].on_demand ? "+" : "", g->inst[k].holder >= 0 ? "*" : "");
        if (o < len) o += (size_t)snprintf(out + o, len - o, "; ");
    }
}

TEST(ext_state_node_without_slices_keeps_one_model_and_recovers_its_base) {
    ext_state_config cfg = {.standalone = true};
    ext_state *st = ext_state_new(&cfg);
    apply_text(st, KUBE_NODE, KUBE_ADDED, DYN_NODE);
    ext_verbs v;
    ext_verbs_init(&v, st, policy_find("binpack"), NULL, NULL);
    char err[512], lay[512], why[256];
    char *p1 = mig_pod("small", "uid-small");
    place_pod(&v, p1, "small", "uid-small", "dyn", err, sizeof err);
    CHECK_STR(err, "");
    char *p2 = pod_json("whole", "uid-whole", 0, "\"nvidia.com/gpu\":\"1\"", NULL, NULL);
    place_pod(&v, p2, "whole", "uid-whole", "dyn", err, sizeof err);
    CHECK_STR(err, "");

    ext_state_lock(st);
    const ext_node *n = ext_state_node(st, "dyn");
    CHECK(n && n->m && !n->base);   /* no slice: one model */
    layout(n->m, lay, sizeof lay);
    CHECK_STR(lay, "gpu0 h1: 3g.20gb@0 1g.5gb@4+*; gpu1 h1:; ");
    ext_state_unlock(st);

    /* A Node event without slices: still one model, pods hold what they held */
    apply_text(st, KUBE_NODE, KUBE_MODIFIED, DYN_NODE);
    ext_state_lock(st);
    n = ext_state_node(st, "dyn");
    CHECK(n->m && !n->base);
    layout(n->m, lay, sizeof lay);
    CHECK_STR(lay, "gpu0 h1: 3g.20gb@0 1g.5gb@4+*; gpu1 h1:; ");
    ext_state_unlock(st);

    /* The first slice: base comes back as the Node object's model, pods are put back as they were */
    apply_text(st, KUBE_RESOURCESLICE, KUBE_ADDED, DYN_SLICE);
    ext_state_lock(st);
    n = ext_state_node(st, "dyn");
    CHECK(n->m && n->base);
    CHECK_INT(n->base->nlive, 0);
    CHECK_MSG(model_node_check(n->base, why, sizeof why), "%s", why);
    layout(n->base, lay, sizeof lay);
    CHECK_STR(lay, "gpu0 h0: 3g.20gb@0; gpu1 h0:; ");
    model_node *fresh = model_node_from_json_text(DYN_NODE, strlen(DYN_NODE), NULL, err, sizeof err);
    char flay[512];
    layout(fresh, flay, sizeof flay);
    CHECK_STR(lay, flay);
    CHECK_INT(n->base->ngpus, fresh->ngpus);
    model_node_free(fresh);
    CHECK(n->m->has_dra);
    layout(n->m, lay, sizeof lay);
    CHECK_STR(lay, "gpu0 h1: 3g.20gb@0 1g.5gb@4+*; gpu1(dra) h1:; ");
    CHECK(model_node_find(n->m, "uid-small") && model_node_find(n->m, "uid-whole"));
    CHECK_MSG(model_node_check(n->m, why, sizeof why), "%s", why);
    ext_state_unlock(st);

    /* A Node event while a slice names the node: base replaced, the view merged again */
    apply_text(st, KUBE_NODE, KUBE_MODIFIED, DYN_NODE);
    ext_state_lock(st);
    n = ext_state_node(st, "dyn");
    CHECK(n->base && n->m->has_dra);
    layout(n->m, lay, sizeof lay);
    CHECK_STR(lay, "gpu0 h1: 3g.20gb@0 1g.5gb@4+*; gpu1(dra) h1:; ");
    ext_state_unlock(st);

    /* The slice goes: one model again, without DRA, pods still in place */
    apply_text(st, KUBE_RESOURCESLICE, KUBE_DELETED, DYN_SLICE);
    ext_state_lock(st);
    n = ext_state_node(st, "dyn");
    CHECK(n->m && !n->base && !n->m->has_dra);
    layout(n->m, lay, sizeof lay);
    CHECK_STR(lay, "gpu0 h1: 3g.20gb@0 1g.5gb@4+*; gpu1 h1:; ");
    ext_state_unlock(st);

    /* The pods leave: the node is what its Node object says */
    apply_text(st, KUBE_POD, KUBE_DELETED, "{\"metadata\":{\"name\":\"small\",\"namespace\":\"default\",\"uid\":\"uid-small\"}}");
    apply_text(st, KUBE_POD, KUBE_DELETED, "{\"metadata\":{\"name\":\"whole\",\"namespace\":\"default\",\"uid\":\"uid-whole\"}}");
    ext_state_lock(st);
    n = ext_state_node(st, "dyn");
    layout(n->m, lay, sizeof lay);
    CHECK_STR(lay, "gpu0 h0: 3g.20gb@0; gpu1 h0:; ");
    CHECK_INT(n->m->nlive, 0);
    ext_state_unlock(st);
    free(p1);
    free(p2);
    ext_state_free(st);
}

TEST(ext_state_slice_before_its_node_and_node_deleted_with_slices) {
    ext_state_config cfg = {.standalone = true};
    ext_state *st = ext_state_new(&cfg);
    /* the slice first: nothing to install yet */
    apply_text(st, KUBE_RESOURCESLICE, KUBE_ADDED, DYN_SLICE);
    ext_state_lock(st);
    CHECK(!ext_state_node(st, "dyn") || !ext_state_node(st, "dyn")->m);
    ext_state_unlock(st);
    apply_text(st, KUBE_NODE, KUBE_ADDED, DYN_NODE);
    ext_state_lock(st);
    const ext_node *n = ext_state_node(st, "dyn");
    CHECK(n && n->m && n->base && n->m->has_dra && n->m->gpus[1].dra && !n->base->has_dra);
    ext_state_unlock(st);
    apply_text(st, KUBE_NODE, KUBE_DELETED, DYN_NODE);
    ext_state_lock(st);
    n = ext_state_node(st, "dyn");
    CHECK(!n || (!n->m && !n->base));
    ext_state_unlock(st);
    ext_state_free(st);
}
