/* demo.c -- reads the built-in cluster and pods, shows each node's GPU inventory as the
 * model understands it, then places the pods one by one with a policy and explains every
 * decision. All decisions come from model/ and policy/; this file only reports. */
#include "sim/demo.h"

#include <stdlib.h>
#include <string.h>

#include "model/fit.h"
#include "model/node.h"
#include "model/request.h"
#include "policy/policy.h"

extern const unsigned char sim_demo_cluster_json[];
extern const size_t sim_demo_cluster_json_len;
extern const unsigned char sim_demo_pods_json[];
extern const size_t sim_demo_pods_json_len;

static void print_node(FILE *out, const model_node *n) {
    if (n->reason[0]) {
        fprintf(out, "  %-18s unusable: %s\n", n->name, n->reason);
        return;
    }
    if (n->ngpus == 0) {
        fprintf(out, "  %-18s no GPUs\n", n->name);
        return;
    }
    fprintf(out, "  %-18s %d x %s", n->name, n->ngpus, n->gpus[0].product->product);
    if (n->mig_strategy != MODEL_MIG_NONE) fprintf(out, ", MIG %s", n->mig_strategy == MODEL_MIG_SINGLE ? "single" : "mixed");
    if (n->mig_sharing != MODEL_GPU_WHOLE)
        fprintf(out, ", MIG instances %s%s", n->mig_sharing == MODEL_GPU_MPS ? "shared by MPS" : "time-sliced",
                n->mig_renamed ? " (replicas as <name>.shared)" : "");
    if (n->sharing != MODEL_GPU_WHOLE)
        fprintf(out, ", %s x%d%s", model_gpu_mode_name(n->sharing), n->replicas, n->shared_renamed ? " (nvidia.com/gpu.shared)" : "");
    fputc('\n', out);
    for (int i = 0; i < n->ngpus; i++) {
        const model_gpu *g = &n->gpus[i];
        fprintf(out, "      GPU %d %-9s %6d/%6d MiB free, %3d%% SMs free", g->index, model_gpu_mode_name(g->mode),
                model_gpu_free_memory(g), g->memory_mib, model_gpu_free_compute(g) / 10);
        if (g->mode == MODEL_GPU_TIMESLICE || g->mode == MODEL_GPU_MPS)
            fprintf(out, ", %d/%d replicas free", model_gpu_free_replicas(g), g->replicas);
        if (g->mode == MODEL_GPU_MIG) {
            model_mig_layout l = {.n = g->ninst};
            char buf[160];
            for (int k = 0; k < g->ninst; k++) l.inst[k] = (model_mig_placement){g->inst[k].profile, g->inst[k].start};
            model_mig_layout_format(g->product, &l, buf, sizeof buf);
            if (model_gpu_mig_layered(g)) {   /* layered: which instances are time-sliced, replicas free */
                fprintf(out, ", instances %s, time-sliced:", buf);
                for (int k = 0; k < g->ninst; k++)
                    if (g->inst[k].replicas > 1)
                        fprintf(out, " %s@%d x%d", g->product->profiles[g->inst[k].profile].name, g->inst[k].start,
                                g->inst[k].replicas);
                fprintf(out, " (%d idle instances + free replicas)", model_gpu_free_replicas(g));
            } else {
                fprintf(out, ", instances %s (%d idle)", buf, model_gpu_free_replicas(g));
            }
        }
        fputc('\n', out);
    }
}

static cJSON *parse_items(const unsigned char *json, size_t len, cJSON **root) {
    *root = cJSON_ParseWithLength((const char *)json, len);
    cJSON *items = cJSON_GetObjectItemCaseSensitive(*root, "items");
    return cJSON_IsArray(items) ? items : NULL;
}

int sim_demo_run(const char *wanted, FILE *out) {
    const policy *pol = policy_find(wanted);
    if (!pol) {
        fprintf(stderr, "tessera-sim: unknown policy \"%s\"; known:", wanted);
        for (int i = 0; i < policy_count(); i++) fprintf(stderr, " %s", policy_name(policy_at(i)));
        fputc('\n', stderr);
        return 2;
    }
    cJSON *croot, *proot;
    cJSON *nodes_json = parse_items(sim_demo_cluster_json, sim_demo_cluster_json_len, &croot);
    cJSON *pods_json = parse_items(sim_demo_pods_json, sim_demo_pods_json_len, &proot);
    if (!nodes_json || !pods_json) {
        fprintf(stderr, "tessera-sim: built-in demo data is corrupt\n");
        cJSON_Delete(croot);
        cJSON_Delete(proot);
        return 1;
    }
    int nnodes = 0, cap = cJSON_GetArraySize(nodes_json);
    model_node **nodes = calloc((size_t)cap + 1, sizeof *nodes);
    policy_result *scratch = calloc((size_t)cap + 1, sizeof *scratch);
    char err[512];
    const cJSON *item;

    fprintf(out, "tessera demo: %d nodes as the NVIDIA GPU operator labels them, read by the model\n\n", cap);
    cJSON_ArrayForEach(item, nodes_json) {
        model_node *n = model_node_from_json(item, model_catalog_default(), err, sizeof err);
        if (!n) {
            fprintf(out, "  (node skipped: %s)\n", err);
            continue;
        }
        print_node(out, n);
        nodes[nnodes++] = n;
    }

    policy_ctx ctx;
    policy_ctx_init(&ctx, 42);
    /* fgd and fgd-pack measure against a target workload: here the one estimated from
     * the pods so far (policy_online_*), as the extender's --online-workload does */
    policy_online *est = policy_online_new(POLICY_ONLINE_HALF_LIFE, POLICY_ONLINE_WARMUP, NULL, 0);
    fprintf(out, "\nplacing %d pods with policy %s (%s)\n", cJSON_GetArraySize(pods_json), policy_name(pol),
            policy_summary(pol));
    int placed = 0, refused = 0;
    cJSON_ArrayForEach(item, pods_json) {
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(item, "metadata");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(meta, "name");
        const cJSON *uid = cJSON_GetObjectItemCaseSensitive(meta, "uid");
        const char *pod = cJSON_IsString(name) ? name->valuestring : "?";
        model_request r;
        char desc[200], why[512];
        if (model_request_from_pod(item, &r, err, sizeof err) < 0) {
            fprintf(out, "\n  %s: rejected: %s\n", pod, err);
            refused++;
            continue;
        }
        model_request_format(&r, desc, sizeof desc);
        fprintf(out, "\n  %s asks for %s\n", pod, desc);
        for (int i = 0; i < nnodes; i++) {
            int nfit = model_fit(nodes[i], &r, NULL, 0, why, sizeof why);
            if (nfit == 0) fprintf(out, "      %-18s no: %s\n", nodes[i]->name, why);
        }
        model_assignment a;
        ctx.decision++;
        if (est && policy_online_observe(est, &r, NULL, 0) > 0) ctx.workload = policy_online_current(est);
        int win = policy_place(pol, &ctx, &r, nodes, nnodes, scratch, &a, why, sizeof why);
        if (win < 0) {
            fprintf(out, "      -> stays pending: %s\n", why[0] ? why : "no node fits");
            refused++;
            continue;
        }
        char where[256], because[512];
        model_assignment_format(nodes[win], &a, where, sizeof where);
        policy_result wr;   /* why this node: the winner's breakdown, before the pod lands */
        if (policy_score(pol, &r, nodes[win], &ctx, &wr, because, sizeof because) != 0) because[0] = 0;
        if (model_assign(nodes[win], cJSON_IsString(uid) ? uid->valuestring : pod, &a, err, sizeof err) < 0) {
            fprintf(out, "      -> %s refused the assignment: %s\n", nodes[win]->name, err);
            refused++;
            continue;
        }
        fprintf(out, "      -> %s: %s\n", nodes[win]->name, where);
        if (because[0]) fprintf(out, "         why: %s\n", because);
        placed++;
    }

    fprintf(out, "\n%d pods placed, %d not; GPU state afterwards:\n\n", placed, refused);
    for (int i = 0; i < nnodes; i++) {
        char why[256];
        if (!model_node_check(nodes[i], why, sizeof why)) fprintf(out, "  INVARIANT BROKEN on %s: %s\n", nodes[i]->name, why);
        print_node(out, nodes[i]);
        model_node_free(nodes[i]);
    }
    free(nodes);
    free(scratch);
    policy_online_free(est);
    cJSON_Delete(croot);
    cJSON_Delete(proot);
    return 0;
}
