/* policy_helpers.h -- shared by the policy tests and the policy benchmark: the openb
 * cluster and pod lists read straight from data/openb (run from the repository root),
 * and small helpers to build nodes and place requests through the model.
 */
#ifndef TEST_POLICY_HELPERS_H
#define TEST_POLICY_HELPERS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/catalog.h"
#include "model/fit.h"
#include "model/node.h"
#include "policy/policy.h"

/* GPU memory for the openb models, which the trace does not give. A multiple of 1000
 * MiB, so the memory the model charges a compute-only fraction (ceil(permille *
 * memory / 1000)) is exact and never blocks what compute alone would admit. */
#define OPENB_GPU_MIB 16000

typedef struct openb_cluster {
    int n;
    model_node **nodes;
    int nproducts;
    model_gpu_product products[16];   /* one per openb model name, owned here */
} openb_cluster;

static inline void openb_cluster_free(openb_cluster *c) {
    for (int i = 0; i < c->n; i++) model_node_free(c->nodes[i]);
    free(c->nodes);
    free(c);
}

static inline const model_gpu_product *openb_product(openb_cluster *c, const char *model) {
    for (int i = 0; i < c->nproducts; i++)
        if (!strcmp(c->products[i].product, model)) return &c->products[i];
    if (c->nproducts == 16) return NULL;
    model_product_init_generic(&c->products[c->nproducts], model, OPENB_GPU_MIB, 0);
    return &c->products[c->nproducts++];
}

/* openb_node_list_gpu_node.csv: sn,cpu_milli,memory_mib,gpu,model */
static inline openb_cluster *openb_load_nodes(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    openb_cluster *c = calloc(1, sizeof *c);
    int cap = 0;
    char line[512];
    if (!fgets(line, sizeof line, f)) { fclose(f); free(c); return NULL; }
    while (fgets(line, sizeof line, f)) {
        char name[128], model[64];
        long long cpu, mem;
        int gpus;
        if (sscanf(line, "%127[^,],%lld,%lld,%d,%63[^,\r\n]", name, &cpu, &mem, &gpus, model) != 5) continue;
        model_node *n = model_node_new(name);
        n->track_host = true;
        n->cpu_milli = cpu;
        n->memory_mib = mem;
        const model_gpu_product *p = openb_product(c, model);
        for (int g = 0; g < gpus; g++) model_node_add_gpu(n, p, MODEL_GPU_WHOLE, 1, 0);
        if (c->n == cap) {
            cap = cap ? 2 * cap : 1024;
            c->nodes = realloc(c->nodes, (size_t)cap * sizeof *c->nodes);
        }
        c->nodes[c->n++] = n;
    }
    fclose(f);
    return c;
}

/* One openb pod as a request: CPU-only, a share of one GPU, or whole GPUs. */
static inline void openb_request(long long cpu, long long mem_mib, int num_gpu, int gpu_milli, const char *spec,
                                 model_request *r) {
    memset(r, 0, sizeof *r);
    r->cpu_milli = cpu;
    r->memory_bytes = mem_mib * 1048576LL;
    if (num_gpu == 0) {
        r->kind = MODEL_REQ_NONE;
    } else if (num_gpu == 1 && gpu_milli < 1000) {
        r->kind = MODEL_REQ_FRACTION;
        r->count = 1;
        r->compute_permille = (int16_t)gpu_milli;
    } else {
        r->kind = MODEL_REQ_WHOLE;
        r->count = num_gpu;
    }
    while (spec && *spec && r->nmodels < MODEL_MAX_MODELS) {
        const char *bar = strchr(spec, '|');
        size_t len = bar ? (size_t)(bar - spec) : strlen(spec);
        if (len >= sizeof r->models[0]) len = sizeof r->models[0] - 1;
        memcpy(r->models[r->nmodels], spec, len);
        r->models[r->nmodels][len] = 0;
        if (len) r->nmodels++;
        spec = bar ? bar + 1 : NULL;
    }
}

/* openb_pod_list_*.csv: name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,... into
 * an array of requests (caller frees); *n gets the count. */
static inline model_request *openb_load_pods(const char *path, int *n) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    int cap = 0, cnt = 0;
    model_request *rs = NULL;
    char line[1024];
    if (!fgets(line, sizeof line, f)) { fclose(f); return NULL; }
    while (fgets(line, sizeof line, f)) {
        /* split by hand: gpu_spec may be empty, which sscanf cannot express */
        char *fld[12];
        int nf = 0;
        char *p = line;
        line[strcspn(line, "\r\n")] = 0;
        fld[nf++] = p;
        for (; *p && nf < 12; p++)
            if (*p == ',') { *p = 0; fld[nf++] = p + 1; }
        if (nf < 5) continue;   /* the multigpu lists have no gpu_spec column */
        if (cnt == cap) {
            cap = cap ? 2 * cap : 4096;
            rs = realloc(rs, (size_t)cap * sizeof *rs);
        }
        openb_request(atoll(fld[1]), atoll(fld[2]), atoi(fld[3]), atoi(fld[4]), nf > 5 ? fld[5] : "", &rs[cnt++]);
    }
    fclose(f);
    *n = cnt;
    return rs;
}

static inline policy_workload *openb_workload(const char *trace) {
    char path[256];
    snprintf(path, sizeof path, "data/openb/openb_pod_list_%s.csv", trace);
    int n = 0;
    model_request *rs = openb_load_pods(path, &n);
    if (!rs) return NULL;
    policy_workload *w = policy_workload_new();
    for (int i = 0; i < n; i++) policy_workload_add(w, &rs[i], 1, NULL, 0);
    free(rs);
    if (policy_workload_finish(w, 95.0, NULL, 0) < 0) {
        policy_workload_free(w);
        return NULL;
    }
    return w;
}

/* Place r on n through model_fit/model_assign at the given GPU (-1: first candidate). */
static inline int place_on(model_node *n, const model_request *r, const char *uid, int gpu) {
    model_assignment as[64];
    int k = model_fit(n, r, as, 64, NULL, 0);
    if (k > 64) k = 64;
    for (int i = 0; i < k; i++)
        if (gpu < 0 || (as[i].ngrants > 0 && as[i].grant[0].gpu == gpu))
            return model_assign(n, uid, &as[i], NULL, 0);
    return -1;
}

/* Score every node with the named policy and select: the winner's index, -1 none, -2 unknown
 * policy, -3 a scoring error. */
static inline int pick(const char *pname, const policy_ctx *ctx, const model_request *r, model_node **nodes, int n,
                       policy_result *res) {
    const policy *p = policy_find(pname);
    if (!p) return -2;
    for (int i = 0; i < n; i++)
        if (policy_score(p, r, nodes[i], ctx, &res[i], NULL, 0) < 0) return -3;
    return policy_select(p, ctx, res, n);
}

static inline model_request req_frac(int permille, long long cpu) {
    model_request r;
    memset(&r, 0, sizeof r);
    r.kind = MODEL_REQ_FRACTION;
    r.count = 1;
    r.compute_permille = (int16_t)permille;
    r.cpu_milli = cpu;
    return r;
}

static inline model_request req_whole(int k, long long cpu) {
    model_request r;
    memset(&r, 0, sizeof r);
    r.kind = MODEL_REQ_WHOLE;
    r.count = k;
    r.cpu_milli = cpu;
    return r;
}

static inline model_request req_cpu(long long cpu) {
    model_request r;
    memset(&r, 0, sizeof r);
    r.kind = MODEL_REQ_NONE;
    r.cpu_milli = cpu;
    return r;
}

/* A finished target workload of whole 1-, 2-, 4- and 8-GPU pods and half-GPU shares, in these
 * counts (0 leaves a shape out). */
static inline policy_workload *gpu_mix_workload(long one, long two, long four, long eight, long half) {
    policy_workload *w = policy_workload_new();
    const long counts[] = {one, two, four, eight};
    for (int i = 0; i < 4; i++) {
        model_request r = req_whole(1 << i, 0);
        if (counts[i] > 0) policy_workload_add(w, &r, counts[i], NULL, 0);
    }
    model_request half_share = req_frac(500, 0);
    if (half > 0) policy_workload_add(w, &half_share, half, NULL, 0);
    policy_workload_finish(w, 100, NULL, 0);
    return w;
}

static inline model_request req_mig(const char *profile) {
    model_request r;
    memset(&r, 0, sizeof r);
    r.kind = MODEL_REQ_MIG;
    r.count = 1;
    snprintf(r.mig_profile, sizeof r.mig_profile, "%s", profile);
    return r;
}

/* A layered MIG node (time-slicing on MIG instances): per A100-80GB, mixed strategy,
 * 3g.40gb@4 plain and 4 x 1g.10gb with `replicas` replicas each; with single, 7 x 1g.10gb
 * all shared. renamed: replicas advertised as .shared (renameByDefault). */
static inline model_node *layered_node(const char *name, int ngpus, bool single, int replicas, bool renamed) {
    const model_gpu_product *a = model_catalog_find(model_catalog_default(), "NVIDIA-A100-SXM4-80GB");
    model_node *n = model_node_new(name);
    int p1 = model_product_profile_index(a, "1g.10gb"), p3 = model_product_profile_index(a, "3g.40gb");
    for (int i = 0; i < ngpus; i++) {
        model_gpu *g = model_node_add_gpu(n, a, MODEL_GPU_MIG, 1, 0);
        model_gpu_share_mig_profile(g, p1, MODEL_GPU_TIMESLICE, replicas, NULL, 0);
        if (!single) model_gpu_add_mig_instance(g, p3, 4, NULL, 0);
        for (int s = 0; s < (single ? 7 : 4); s++) model_gpu_add_mig_instance(g, p1, s, NULL, 0);
    }
    n->mig_strategy = single ? MODEL_MIG_SINGLE : MODEL_MIG_MIXED;
    n->mig_sharing = MODEL_GPU_TIMESLICE;
    n->mig_renamed = renamed;
    snprintf(n->product_label, sizeof n->product_label, "%s", single ? "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb-SHARED"
                                                                      : "NVIDIA-A100-SXM4-80GB");
    return n;
}

#endif
