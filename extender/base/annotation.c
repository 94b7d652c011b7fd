/* annotation.c -- encode/decode tessera.io/assignment (schema in annotation.h). Decoding is
 * strict about types: a hand-edited or foreign value is rejected, and the cache then
 * re-derives the pod's placement instead of trusting it.
 */
#include "extender/base/annotation.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

char *ext_ann_encode(const model_node *n, const model_assignment *a, const char *policy_name) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "version", 1);
    cJSON_AddStringToObject(o, "node", n->name ? n->name : "");
    if (policy_name) cJSON_AddStringToObject(o, "policy", policy_name);
    cJSON *arr = cJSON_AddArrayToObject(o, "grants");
    for (int k = 0; arr && k < a->ngrants; k++) {
        const model_grant *gr = &a->grant[k];
        if (gr->gpu < 0 || gr->gpu >= n->ngpus) continue;
        const model_gpu *g = &n->gpus[gr->gpu];
        cJSON *j = cJSON_CreateObject();
        if (!j) break;
        cJSON_AddNumberToObject(j, "gpu", g->index);
        if (g->uuid[0]) cJSON_AddStringToObject(j, "uuid", g->uuid);
        if (gr->mig_profile >= 0 && gr->mig_profile < g->product->nprofiles) {
            cJSON *m = cJSON_AddObjectToObject(j, "mig");
            cJSON_AddStringToObject(m, "profile", g->product->profiles[gr->mig_profile].name);
            cJSON_AddNumberToObject(m, "start", gr->mig_start);
            cJSON_AddBoolToObject(m, "create", gr->mig_create);
            if (gr->replica >= 0) cJSON_AddNumberToObject(j, "replica", gr->replica);   /* layered */
        } else if (gr->exclusive) {
            cJSON_AddBoolToObject(j, "whole", 1);
        } else if (gr->replica >= 0) {
            cJSON_AddNumberToObject(j, "replica", gr->replica);
        }
        cJSON_AddNumberToObject(j, "memoryMiB", gr->memory_mib);
        cJSON_AddNumberToObject(j, "computePermille", gr->compute_permille);
        cJSON_AddItemToArray(arr, j);
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); goto fail; } while (0)

static int get_int(const cJSON *o, const char *key, long lo, long hi, bool required, long *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) return required ? -1 : 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble) ||
        v->valuedouble < (double)lo || v->valuedouble > (double)hi)
        return -1;
    *out = (long)v->valuedouble;
    return 1;
}

int ext_ann_decode(const model_node *n, const char *text, model_assignment *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    cJSON *o = text ? cJSON_Parse(text) : NULL;
    long v;
    if (!cJSON_IsObject(o)) BAD("%s is not a JSON object", EXT_ANN_ASSIGNMENT);
    if (get_int(o, "version", 1, 1, true, &v) != 1) BAD("%s: version must be 1", EXT_ANN_ASSIGNMENT);
    const cJSON *node = cJSON_GetObjectItemCaseSensitive(o, "node");
    if (!cJSON_IsString(node) || strcmp(node->valuestring, n->name) != 0)
        BAD("%s: written for node %s, pod is on %s", EXT_ANN_ASSIGNMENT,
            cJSON_IsString(node) ? node->valuestring : "?", n->name);
    const cJSON *grants = cJSON_GetObjectItemCaseSensitive(o, "grants");
    if (!cJSON_IsArray(grants)) BAD("%s: grants must be an array", EXT_ANN_ASSIGNMENT);
    if (cJSON_GetArraySize(grants) > MODEL_MAX_GPUS) BAD("%s: too many grants", EXT_ANN_ASSIGNMENT);
    const cJSON *j;
    cJSON_ArrayForEach(j, grants) {
        if (!cJSON_IsObject(j)) BAD("%s: grant is not an object", EXT_ANN_ASSIGNMENT);
        model_grant gr = {.gpu = -1, .mig_inst = -1, .mig_profile = -1, .mig_start = -1, .replica = -1};
        long idx, mem = 0, comp = 0, rep;
        if (get_int(j, "gpu", 0, 1 << 20, true, &idx) != 1) BAD("%s: grant without a valid gpu index", EXT_ANN_ASSIGNMENT);
        for (int i = 0; i < n->ngpus; i++)
            if (n->gpus[i].index == idx) gr.gpu = (int8_t)i;
        if (gr.gpu < 0) BAD("%s: node %s has no GPU %ld", EXT_ANN_ASSIGNMENT, n->name, idx);
        const model_gpu *g = &n->gpus[gr.gpu];
        const cJSON *uuid = cJSON_GetObjectItemCaseSensitive(j, "uuid");
        if (uuid && (!cJSON_IsString(uuid) || (g->uuid[0] && strcmp(g->uuid, uuid->valuestring) != 0)))
            BAD("%s: GPU %ld uuid does not match the node's", EXT_ANN_ASSIGNMENT, idx);
        if (get_int(j, "memoryMiB", 0, 1 << 30, false, &mem) < 0 ||
            get_int(j, "computePermille", 0, 1000, false, &comp) < 0)
            BAD("%s: GPU %ld memoryMiB/computePermille out of range", EXT_ANN_ASSIGNMENT, idx);
        gr.memory_mib = (int32_t)mem;
        gr.compute_permille = (int16_t)comp;
        const cJSON *mig = cJSON_GetObjectItemCaseSensitive(j, "mig");
        const cJSON *whole = cJSON_GetObjectItemCaseSensitive(j, "whole");
        int r = get_int(j, "replica", 0, MODEL_MAX_REPLICAS - 1, false, &rep);
        if (r < 0) BAD("%s: GPU %ld replica out of range", EXT_ANN_ASSIGNMENT, idx);
        if (mig) {
            const cJSON *pn = cJSON_GetObjectItemCaseSensitive(mig, "profile");
            const cJSON *cr = cJSON_GetObjectItemCaseSensitive(mig, "create");
            long start;
            if (!cJSON_IsObject(mig) || !cJSON_IsString(pn) || get_int(mig, "start", 0, MODEL_MIG_MAX_SLICES - 1, true, &start) != 1 ||
                (cr && !cJSON_IsBool(cr)))
                BAD("%s: GPU %ld mig must be {profile, start, create}", EXT_ANN_ASSIGNMENT, idx);
            int pi = model_product_profile_index(g->product, pn->valuestring);
            if (pi < 0) BAD("%s: GPU %ld has no MIG profile %s", EXT_ANN_ASSIGNMENT, idx, pn->valuestring);
            gr.mig_profile = (int8_t)pi;
            gr.mig_start = (int8_t)start;
            gr.mig_create = cr && cJSON_IsTrue(cr);
            if (r == 1) {   /* a replica of a shared (time-sliced) instance */
                if (rep >= MODEL_MIG_MAX_REPLICAS || gr.mig_create)
                    BAD("%s: GPU %ld mig replica %ld is out of range or on a created instance", EXT_ANN_ASSIGNMENT, idx,
                        rep);
                gr.replica = (int16_t)rep;
            }
        } else if (whole) {
            if (!cJSON_IsBool(whole)) BAD("%s: GPU %ld whole must be a boolean", EXT_ANN_ASSIGNMENT, idx);
            gr.exclusive = cJSON_IsTrue(whole);
        } else if (r == 1) {
            gr.replica = (int16_t)rep;
        }
        out->grant[out->ngrants++] = gr;
    }
    cJSON_Delete(o);
    return 0;
fail:
    cJSON_Delete(o);
    memset(out, 0, sizeof *out);
    return -1;
}
