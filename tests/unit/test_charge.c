/* test_charge.c -- the quota units (model/charge.h): what a bind holds on the fixture nodes,
 * and the property the webhook's declaration rests on: for random pods on random nodes of the
 * fixtures (and hand-built dynamic-MIG and layered nodes), every assignment model_fit offers
 * charges at most what model_charge_request declared for the pod at admission.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "model_helpers.h"
#include "model/charge.h"
#include "model/fit.h"

static int parse(const char *pod, model_request *r) {
    char err[300];
    return model_request_from_pod_json(pod, strlen(pod), r, err, sizeof err);
}

/* The charge of the first assignment fit offers for pod on the fixture node. */
static model_charge bound(const char *node, const char *pod) {
    model_charge c = {-1, -1};
    model_node *n = fixture_node(node);
    model_request r;
    model_assignment a;
    if (n && parse(pod, &r) == 0 && model_fit(n, &r, &a, 1, NULL, 0) > 0) c = model_charge_assignment(n, &a);
    model_node_free(n);
    return c;
}

#define POD(res, ann) "{\"metadata\":{\"annotations\":{" ann "}},\"spec\":{\"containers\":[{\"resources\":{\"limits\":{" res "}}}]}}"

TEST(charge_of_binds_on_fixture_nodes) {
    model_charge c = bound("nodes/plain-a100-80gb-x8.json", POD("\"nvidia.com/gpu\":\"2\"", ""));
    CHECK_INT(c.gpu_milli, 2000);
    CHECK_INT(c.memory_mib, 2 * 81920);
    c = bound("nodes/plain-a100-80gb-x8.json", POD("", "\"tessera.io/gpu-fraction\":\"0.25\""));
    CHECK_INT(c.gpu_milli, 250);
    CHECK_INT(c.memory_mib, 20480);
    /* memory only: its share of the GPU's memory, rounded down */
    c = bound("nodes/plain-a100-80gb-x8.json", POD("\"nvidia.com/gpumem\":\"20000\"", ""));
    CHECK_INT(c.gpu_milli, 244);
    CHECK_INT(c.memory_mib, 20000);
    /* 3g.40gb on an A100: 3 of 7 compute slices, rounded up */
    c = bound("nodes/a100-mig-mixed-timeslice.json", POD("\"nvidia.com/mig-3g.40gb\":\"1\"", ""));
    CHECK_INT(c.gpu_milli, 429);
    CHECK_INT(c.memory_mib, 40192);
    /* a replica of a 1g.10gb instance time-sliced 4 ways: ceil(143 / 4) */
    c = bound("nodes/a100-mig-mixed-timeslice.json",
              POD("\"nvidia.com/mig-1g.10gb\":\"1\"", "\"tessera.io/isolation\":\"timeslice\""));
    CHECK_INT(c.gpu_milli, 36);
    /* a time-slice replica of a T4 with 4 replicas: 250, and a quarter of its memory */
    c = bound("nodes/t4-timeslice-x4.json", POD("\"nvidia.com/gpu\":\"1\"", "\"tessera.io/isolation\":\"timeslice\""));
    CHECK_INT(c.gpu_milli, 250);
    CHECK_INT(c.memory_mib, 3840);
    /* an MPS client of an H100 shared 4 ways (memory / 4 pinned) */
    c = bound("nodes/h100-mps.json", POD("\"nvidia.com/gpu\":\"1\"", "\"tessera.io/isolation\":\"mps\""));
    CHECK(c.gpu_milli > 0 && c.gpu_milli <= 500);
    /* an A100-40GB labelled 40537 MiB by an old driver: the quarter is still 250 */
    c = bound("nodes/a100-pre-r470.json", POD("", "\"tessera.io/gpu-fraction\":\"0.25\""));
    CHECK_INT(c.gpu_milli, 250);
}

/* ------------------------------------------------------------ property ---- */

static unsigned long long rng;
static unsigned rnd(unsigned n) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)((rng >> 33) % n);
}

/* A random pod in one of the request forms, as JSON text. */
static void random_pod(char *buf, size_t len) {
    static const char *isos[] = {"", "any", "mig", "mps", "timeslice"};
    static const char *models[] = {"", "A100-80GB", "NVIDIA-H100-80GB-HBM3", "Tesla-T4", "A100-SXM4-40GB",
                                   "Tesla-T4-SHARED", "NVIDIA-RTX-PRO-6000"};
    static const char *profiles[] = {"1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "1g.5gb", "3g.20gb",
                                     "2g.10gb", "1g.10gb.me", "1g.20gb", "1g.10gb.shared"};
    char res[256] = "", ann[256] = "";
    const char *iso = isos[rnd(5)], *model = models[rnd(7)];
    switch (rnd(9)) {
    case 0: snprintf(res, sizeof res, "\"nvidia.com/gpu\":\"%u\"", 1 + rnd(4)); break;
    case 1: snprintf(res, sizeof res, "\"nvidia.com/gpu.shared\":\"%u\"", 1 + rnd(2)); break;
    case 2: snprintf(res, sizeof res, "\"nvidia.com/mig-%s\":\"%u\"", profiles[rnd(11)], 1 + rnd(2)); break;
    case 3: snprintf(res, sizeof res, "\"nvidia.com/gpumem\":\"%u\"", 1000 + rnd(90000)); break;
    case 4: snprintf(res, sizeof res, "\"nvidia.com/gpumem\":\"%u\",\"nvidia.com/gpu\":\"%u\"", 1000 + rnd(40000), 1 + rnd(3)); break;
    case 5: snprintf(res, sizeof res, "\"nvidia.com/gpumem-percentage\":\"%u\"", 1 + rnd(100)); break;
    case 6: snprintf(res, sizeof res, "\"nvidia.com/gpucores\":\"%u\"", 1 + rnd(100)); break;
    case 7: snprintf(ann, sizeof ann, "\"tessera.io/gpu-fraction\":\"0.%03u\"", 1 + rnd(999)); break;
    default: snprintf(ann, sizeof ann, "\"gpu-memory\":\"%u\"", 500 + rnd(80000)); break;
    }
    /* an MPS share (charged compute in proportion when it names only memory); it takes no isolation */
    bool mps = rnd(3) == 0;
    if (mps) iso = "";
    size_t o = strlen(ann);
    if (iso[0]) o += snprintf(ann + o, sizeof ann - o, "%s\"tessera.io/isolation\":\"%s\"", o ? "," : "", iso);
    if (model[0]) o += snprintf(ann + o, sizeof ann - o, "%s\"tessera.io/gpu-models\":\"%s\"", o ? "," : "", model);
    if (mps) snprintf(ann + o, sizeof ann - o, "%s\"tessera.io/compute-sharing\":\"mps\"", o ? "," : "");
    snprintf(buf, len, "{\"metadata\":{\"annotations\":{%s}},\"spec\":{%s\"containers\":[{\"resources\":{\"limits\":{%s}}}]}}",
             ann, mps ? "\"securityContext\":{\"runAsUser\":1000}," : "", res);
}

/* Whether every GPU of the node is a product the catalog knows: the declaration is sized from
 * the catalog, so a GPU it does not know may hold more (README, Quotas). */
static bool catalog_gpus(const model_node *n) {
    for (int i = 0; i < n->ngpus; i++)
        if (n->gpus[i].product == &n->local_product) return false;
    return true;
}

/* Nodes the fixtures do not have: dynamic MIG (instances of any profile created on demand). */
static model_node *built_node(int kind) {
    const model_catalog *cat = model_catalog_default();
    static const char *names[] = {"NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-SXM4-40GB", "NVIDIA-H100-80GB-HBM3",
                                  "NVIDIA-A30", "NVIDIA-H200"};
    const model_gpu_product *p = model_catalog_find(cat, names[kind % 5]);
    model_node *n = model_node_new("built");
    n->mig_strategy = MODEL_MIG_MIXED;
    for (int g = 0; g < 2; g++) model_node_add_gpu(n, p, MODEL_GPU_MIG, 1, 0)->mig_dynamic = true;
    return n;
}

TEST(charge_declared_at_admission_covers_every_bind) {
    static const char *fixtures[] = {
        "nodes/a100-40gb-mig-mixed.json", "nodes/a100-mig-mixed-mps.json", "nodes/a100-mig-mixed-timeslice-rename.json",
        "nodes/a100-mig-mixed-timeslice.json", "nodes/a100-pre-r470.json", "nodes/annotated-a100-mixed.json",
        "nodes/annotated-h100-x4.json", "nodes/h100-mig-mixed-me.json", "nodes/h100-mig-single-timeslice-rename.json",
        "nodes/h100-mig-single-timeslice.json", "nodes/h100-mig-single.json", "nodes/h100-mps.json",
        "nodes/plain-a100-80gb-x8.json", "nodes/t4-timeslice-rename.json", "nodes/t4-timeslice-x4.json",
        "nodes/v100-bytes-memory.json", "nodes/unknown-product.json"};
    enum { NF = sizeof fixtures / sizeof fixtures[0], NB = 5 };
    model_node *nodes[NF + NB];
    int nn = 0;
    for (int i = 0; i < NF; i++) {
        model_node *n = fixture_node(fixtures[i]);
        CHECK_MSG(n, "%s does not load", fixtures[i]);
        if (catalog_gpus(n)) nodes[nn++] = n;
        else model_node_free(n);
    }
    for (int k = 0; k < NB; k++) nodes[nn++] = built_node(k);
    const char *env = getenv("TESSERA_SEED");
    rng = env ? strtoull(env, NULL, 10) : 20261127;
    static model_assignment as[64];
    int pods = 0, binds = 0, half_used = 0, mps_binds = 0;
    char pod[600], err[300], why[256];
    for (int step = 0; step < 16000; step++) {
        random_pod(pod, sizeof pod);
        model_request r;
        if (model_request_from_pod_json(pod, strlen(pod), &r, err, sizeof err) != 0) continue;
        if (rnd(2)) model_request_for_reservation_delivery(&r);
        model_charge decl;
        if (model_charge_request(&r, NULL, &decl, err, sizeof err) != 0) continue;
        pods++;
        model_node *n = nodes[rnd((unsigned)nn)];
        /* now and then the node is part used first, so later grants see other replica slots */
        model_node *m = model_node_clone(n);
        if (rnd(2)) {
            model_request other;
            char op[600];
            random_pod(op, sizeof op);
            model_assignment a1;
            if (model_request_from_pod_json(op, strlen(op), &other, err, sizeof err) == 0 &&
                model_fit(m, &other, &a1, 1, NULL, 0) > 0 && model_assign(m, "other", &a1, err, sizeof err) == 0)
                half_used++;
        }
        int k = model_fit(m, &r, as, 64, why, sizeof why);
        for (int i = 0; i < k && i < 64; i++) {
            model_charge c = model_charge_assignment(m, &as[i]);
            binds++;
            mps_binds += as[i].ngrants > 0 && as[i].grant[0].mps;
            if (c.gpu_milli > decl.gpu_milli || c.memory_mib > decl.memory_mib || c.gpu_milli <= 0) {
                char a[256];
                model_assignment_format(m, &as[i], a, sizeof a);
                model_node_free(m);
                for (int j = 0; j < nn; j++) model_node_free(nodes[j]);
                CHECK_MSG(false, "%s on %s (%s): bind holds %lld milli %lld MiB, declared %lld milli %lld MiB", pod,
                          n->name, a, (long long)c.gpu_milli, (long long)c.memory_mib, (long long)decl.gpu_milli,
                          (long long)decl.memory_mib);
            }
        }
        model_node_free(m);
    }
    for (int j = 0; j < nn; j++) model_node_free(nodes[j]);
    CHECK_MSG(pods > 3000 && binds > 3000 && half_used > 150 && mps_binds > 150,
              "too few cases: %d pods, %d binds (%d MPS), %d part-used nodes", pods, binds, mps_binds, half_used);
}
