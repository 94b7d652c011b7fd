/* cluster.c -- cluster JSON in, model nodes out. Each group's node is written as the Node
 * object the GPU operator publishes (GFD labels, status.allocatable) and read back by
 * model_node_from_json, so the simulator cannot model a node differently from the
 * extender. MIG on demand has no operator setup and is built with model_node_add_gpu.
 * One node per group is built; the rest are clones. */
#include "sim/cluster.h"

#include "model/dra.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/json.h"

/* ------------------------------------------------------------ sharing ---- */

static int parse_int_tail(const char *s, int lo, int hi, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

/* "3g.40gb+2x2g.20gb": items separated by '+', an optional "Nx" count; a "me" item is
 * the media-extension suffix of the profile before it ("1g.10gb+me"). */
static int parse_mig_layout(const char *s, sim_sharing *out, char *err, size_t errlen) {
    char buf[256];
    if (!*s || strlen(s) >= sizeof buf) {
        snprintf(err, errlen, "\"mig:%s\": expected a layout like \"3g.40gb+2x2g.20gb\" or \"on-demand\"", s);
        return -1;
    }
    strcpy(buf, s);
    char *save = NULL;
    for (char *tok = strtok_r(buf, "+", &save); tok; tok = strtok_r(NULL, "+", &save)) {
        if (!strncmp(tok, "timeslice:", 10)) {   /* layered: every instance time-sliced */
            if (out->mig_replicas > 1 || parse_int_tail(tok + 10, 2, MODEL_MIG_MAX_REPLICAS, &out->mig_replicas) != 0) {
                snprintf(err, errlen, "\"mig:%s\": \"+timeslice:N\" takes N in 2..%d, once, after the layout", s,
                         MODEL_MIG_MAX_REPLICAS);
                return -1;
            }
            continue;
        }
        if (!strncmp(tok, "mps:", 4)) {
            snprintf(err, errlen, "\"mig:%s\": MIG instances cannot be shared by MPS (the NVIDIA device plugin refuses "
                     "MPS on MIG devices); use +timeslice:N", s);
            return -1;
        }
        if (out->mig_replicas > 1) {
            snprintf(err, errlen, "\"mig:%s\": \"+timeslice:N\" comes last, after the layout", s);
            return -1;
        }
        if (!strcmp(tok, "me")) {
            if (out->nitems == 0 || out->count[out->nitems - 1] != 1) {
                snprintf(err, errlen, "\"mig:%s\": \"+me\" must follow a single profile (e.g. 1g.10gb+me)", s);
                return -1;
            }
            char *p = out->profile[out->nitems - 1];
            if (strlen(p) + 4 > sizeof out->profile[0]) goto bad;
            strcat(p, "+me");
            continue;
        }
        int count = 1;
        char *x = strchr(tok, 'x');
        if (x && x > tok) {
            *x = 0;
            if (parse_int_tail(tok, 1, 8, &count) != 0) goto bad;
            tok = x + 1;
        }
        if (!*tok || strlen(tok) >= sizeof out->profile[0] || !strchr(tok, 'g')) goto bad;
        int k;
        for (k = 0; k < out->nitems && strcmp(out->profile[k], tok); k++) {}
        if (k == out->nitems) {
            if (out->nitems == SIM_MIG_MAX_ITEMS) goto bad;
            strcpy(out->profile[k], tok);
            out->count[k] = 0;
            out->nitems++;
        }
        out->count[k] += count;
    }
    if (out->nitems == 0) goto bad;
    return 0;
bad:
    snprintf(err, errlen, "\"mig:%s\": expected a layout like \"3g.40gb+2x2g.20gb\" or \"on-demand\"", s);
    return -1;
}

int sim_sharing_parse(const char *s, sim_sharing *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    out->replicas = 1;
    out->mig_replicas = 1;
    if (!strcmp(s, "whole")) return 0;
    if (!strncmp(s, "timeslice:", 10) || !strncmp(s, "mps:", 4)) {
        bool ts = s[0] == 't';
        out->kind = ts ? SIM_SHARE_TIMESLICE : SIM_SHARE_MPS;
        if (parse_int_tail(s + (ts ? 10 : 4), 2, MODEL_MAX_REPLICAS, &out->replicas) != 0) {
            snprintf(err, errlen, "\"%s\": the replica count must be a whole number in 2..%d", s, MODEL_MAX_REPLICAS);
            return -1;
        }
        return 0;
    }
    if (!strcmp(s, "mig:on-demand")) {
        out->kind = SIM_SHARE_MIG_ON_DEMAND;
        return 0;
    }
    if (!strncmp(s, "mig:", 4)) {
        out->kind = SIM_SHARE_MIG;
        return parse_mig_layout(s + 4, out, err, errlen);
    }
    snprintf(err, errlen, "\"%s\": expected whole, timeslice:N, mps:N, mig:<layout>, mig:<layout>+timeslice:N or mig:on-demand", s);
    return -1;
}

void sim_sharing_format(const sim_sharing *s, char *buf, size_t len) {
    switch (s->kind) {
    case SIM_SHARE_WHOLE: snprintf(buf, len, "whole"); return;
    case SIM_SHARE_TIMESLICE: snprintf(buf, len, "timeslice:%d", s->replicas); return;
    case SIM_SHARE_MPS: snprintf(buf, len, "mps:%d", s->replicas); return;
    case SIM_SHARE_MIG_ON_DEMAND: snprintf(buf, len, "mig:on-demand"); return;
    case SIM_SHARE_MIG: break;
    }
    size_t used = (size_t)snprintf(buf, len, "mig:");
    for (int i = 0; i < s->nitems && used < len; i++) {
        if (s->count[i] > 1)
            used += (size_t)snprintf(buf + used, len - used, "%s%dx%s", i ? "+" : "", s->count[i], s->profile[i]);
        else
            used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? "+" : "", s->profile[i]);
    }
    if (s->mig_replicas > 1 && used < len) snprintf(buf + used, len - used, "+timeslice:%d", s->mig_replicas);
}

/* ----------------------------------------------------------- products ---- */

/* A GFD product string, or a catalog id ("A100-80GB") for its first variant. */
static const model_gpu_product *find_product(const model_catalog *cat, const char *name) {
    const model_gpu_product *p = model_catalog_find(cat, name);
    if (p) return p;
    model_product_label l;
    model_catalog_parse_label(cat, name, &l);
    if (l.product && !l.mig_profile[0] && !l.shared) return l.product;
    for (int i = 0; i < model_catalog_count(cat); i++)
        if (!strcmp(model_catalog_at(cat, i)->model_id, name)) return model_catalog_at(cat, i);
    return NULL;
}

/* ------------------------------------------------------- Node objects ---- */

static void add_label(cJSON *labels, const char *k, const char *v) { cJSON_AddStringToObject(labels, k, v); }

static void add_labelf(cJSON *labels, const char *k, long long v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", v);
    cJSON_AddStringToObject(labels, k, buf);
}

/* The Node object the GPU operator (GFD + device plugin) publishes for a group's node. */
static cJSON *group_node_json(const sim_group *g, const model_gpu_product *p, const char *name) {
    cJSON *node = cJSON_CreateObject();
    cJSON_AddStringToObject(node, "apiVersion", "v1");
    cJSON_AddStringToObject(node, "kind", "Node");
    cJSON *meta = cJSON_AddObjectToObject(node, "metadata");
    cJSON_AddStringToObject(meta, "name", name);
    cJSON *labels = cJSON_AddObjectToObject(meta, "labels");
    cJSON *alloc = cJSON_AddObjectToObject(cJSON_AddObjectToObject(node, "status"), "allocatable");
    const sim_sharing *s = &g->sharing;
    int n = g->gpus_per_node;
    char buf[128];

    add_label(labels, "nvidia.com/gpu.present", "true");
    add_labelf(labels, "nvidia.com/gpu.count", n);
    add_labelf(labels, "nvidia.com/gpu.memory", p->memory_mib);
    add_label(labels, "nvidia.com/mig.capable", p->mig_capable ? "true" : "false");
    if (s->kind == SIM_SHARE_TIMESLICE || s->kind == SIM_SHARE_MPS) {
        /* renameByDefault: false, the device plugin's default */
        snprintf(buf, sizeof buf, "%s-SHARED", p->product);
        add_label(labels, "nvidia.com/gpu.product", buf);
        add_labelf(labels, "nvidia.com/gpu.replicas", s->replicas);
        add_label(labels, "nvidia.com/gpu.sharing-strategy", s->kind == SIM_SHARE_MPS ? "mps" : "time-slicing");
        snprintf(buf, sizeof buf, "%d", n * s->replicas);
        cJSON_AddStringToObject(alloc, "nvidia.com/gpu", buf);
    } else if (s->kind == SIM_SHARE_MIG || s->kind == SIM_SHARE_MIG_ON_DEMAND) {
        add_label(labels, "nvidia.com/gpu.product", p->product);
        add_label(labels, "nvidia.com/mig.strategy", "mixed");
        cJSON_AddStringToObject(alloc, "nvidia.com/gpu", "0");
        int r = s->mig_replicas > 1 ? s->mig_replicas : 1;
        for (int i = 0; i < s->nitems && s->kind == SIM_SHARE_MIG; i++) {
            char res[96], key[128];
            snprintf(res, sizeof res, "nvidia.com/mig-%s", s->profile[i]);
            for (char *c = res; *c; c++)
                if (*c == '+') *c = '.';   /* resource names spell "+me" as ".me" */
            snprintf(buf, sizeof buf, "%d", n * s->count[i] * r);
            cJSON_AddStringToObject(alloc, res, buf);
            if (r > 1) {   /* what GFD writes for a time-sliced MIG resource (renameByDefault off) */
                snprintf(key, sizeof key, "%s.replicas", res);
                add_labelf(labels, key, r);
                snprintf(key, sizeof key, "%s.sharing-strategy", res);
                add_label(labels, key, "time-slicing");
                snprintf(key, sizeof key, "%s.count", res);
                add_labelf(labels, key, n * s->count[i]);
                char prod[MODEL_NAME_LEN + 96];
                snprintf(key, sizeof key, "%s.product", res);
                snprintf(prod, sizeof prod, "%s-MIG-%s-SHARED", p->product, res + strlen("nvidia.com/mig-"));
                add_label(labels, key, prod);
            }
        }
    } else {
        add_label(labels, "nvidia.com/gpu.product", p->product);
        add_label(labels, "nvidia.com/gpu.replicas", "1");
        add_label(labels, "nvidia.com/gpu.sharing-strategy", "none");
        snprintf(buf, sizeof buf, "%d", n);
        cJSON_AddStringToObject(alloc, "nvidia.com/gpu", buf);
    }
    if (g->cpu_milli > 0) {
        snprintf(buf, sizeof buf, "%lldm", (long long)g->cpu_milli);
        cJSON_AddStringToObject(alloc, "cpu", buf);
        snprintf(buf, sizeof buf, "%lldMi", (long long)g->memory_mib);
        cJSON_AddStringToObject(alloc, "memory", buf);
    }
    return node;
}

/* ---- DRA groups: the ResourceSlice NVIDIA's DRA driver would publish (device names and attributes as in
 * its cmd/gpu-kubelet-plugin/deviceinfo.go; see tests/fixtures/dra/README.md), read by model/dra.h. */

static cJSON *dra_attr(cJSON *attrs, const char *k, const char *v) {
    cJSON_AddStringToObject(cJSON_AddObjectToObject(attrs, k), "string", v);
    return attrs;
}

/* layout: the device-plugin model of the same group, for its GPUs and (static MIG) instance placements. */
static cJSON *dra_slice_json(const sim_group *g, const model_node *layout, const model_gpu_product *p, const char *name) {
    cJSON *sl = cJSON_CreateObject();
    cJSON_AddStringToObject(sl, "apiVersion", "resource.k8s.io/v1");
    cJSON_AddStringToObject(sl, "kind", "ResourceSlice");
    char buf[160];
    snprintf(buf, sizeof buf, "%s-gpu.nvidia.com", name);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(sl, "metadata"), "name", buf);
    cJSON *spec = cJSON_AddObjectToObject(sl, "spec");
    cJSON_AddStringToObject(spec, "driver", "gpu.nvidia.com");
    cJSON_AddStringToObject(spec, "nodeName", name);
    cJSON *pool = cJSON_AddObjectToObject(spec, "pool");
    cJSON_AddStringToObject(pool, "name", name);
    cJSON_AddNumberToObject(pool, "generation", 1);
    cJSON_AddNumberToObject(pool, "resourceSliceCount", 1);
    cJSON *devs = cJSON_AddArrayToObject(spec, "devices");
    char nvml[MODEL_NAME_LEN];
    snprintf(nvml, sizeof nvml, "%s", p->product);
    for (char *c = nvml; *c; c++)
        if (*c == '-' && c == nvml + 6 && !strncmp(nvml, "NVIDIA", 6)) *c = ' ';   /* NVML: "NVIDIA A100-..." */
    bool dynamic = g->sharing.kind == SIM_SHARE_MIG_ON_DEMAND, mig = g->sharing.kind == SIM_SHARE_MIG;
    for (int i = 0; i < g->gpus_per_node; i++) {
        char uuid[64];
        snprintf(uuid, sizeof uuid, "GPU-sim-%s-%d", name, i);
        if (!mig) {
            cJSON *d = cJSON_CreateObject();
            snprintf(buf, sizeof buf, "gpu-%d", i);
            cJSON_AddStringToObject(d, "name", buf);
            cJSON *a = cJSON_AddObjectToObject(d, "attributes");
            dra_attr(dra_attr(dra_attr(a, "type", "gpu"), "uuid", uuid), "productName", nvml);
            snprintf(buf, sizeof buf, "%dMi", p->memory_mib);
            cJSON_AddStringToObject(cJSON_AddObjectToObject(cJSON_AddObjectToObject(d, "capacity"), "memory"), "value", buf);
            cJSON_AddItemToArray(devs, d);
        }
        /* static MIG: the instances of the layout; DynamicMIG: one device per profile suffices to say so */
        const model_gpu *lg = i < layout->ngpus ? &layout->gpus[i] : NULL;
        int n = mig && lg ? lg->ninst : dynamic ? 1 : 0;
        for (int k = 0; k < n; k++) {
            int pi = mig ? lg->inst[k].profile : 0, start = mig ? lg->inst[k].start : 0;
            const model_mig_profile *pr = &p->profiles[pi];
            cJSON *d = cJSON_CreateObject();
            snprintf(buf, sizeof buf, "gpu-%d-mig-%d-%d-%d", i, pi, start, pr->memory_slices);
            cJSON_AddStringToObject(d, "name", buf);
            cJSON *a = cJSON_AddObjectToObject(d, "attributes");
            snprintf(buf, sizeof buf, "MIG-sim-%s-%d-%d", name, i, k);
            dra_attr(dra_attr(dra_attr(dra_attr(dra_attr(a, "type", "mig"), "uuid", buf), "parentUUID", uuid), "profile",
                              pr->name), "productName", nvml);
            cJSON *cap = cJSON_AddObjectToObject(d, "capacity");
            for (int s = start; s < start + pr->memory_slices; s++) {
                snprintf(buf, sizeof buf, "memorySlice%d", s);
                cJSON_AddStringToObject(cJSON_AddObjectToObject(cap, buf), "value", "1");
            }
            cJSON_AddItemToArray(devs, d);
        }
    }
    return sl;
}

static model_node *dra_group_node(const sim_group *g, const model_gpu_product *p, const model_catalog *cat,
                                  const char *name, char *err, size_t errlen) {
    if (g->sharing.kind == SIM_SHARE_TIMESLICE || g->sharing.kind == SIM_SHARE_MPS) {
        snprintf(err, errlen, "group \"%s\": with \"dra\": true, time-slicing and MPS are set on the claim (the "
                 "driver's GpuConfig sharing), not on the node: use sharing \"whole\"", g->name);
        return NULL;
    }
    sim_group plain = *g;
    plain.dra = false;
    model_node *layout = sim_group_node(&plain, cat, name, err, errlen);   /* GPUs and MIG placements */
    if (!layout) return NULL;
    cJSON *sl = dra_slice_json(g, layout, p, name);
    model_node_free(layout);
    model_dra_slice s;
    model_node *n = NULL;
    if (model_dra_slice_parse(sl, &s, err, errlen) == 0 && (n = model_node_new(name)) != NULL) {
        const model_dra_slice *sp = &s;   /* the same rule as the extender's: which slices and devices count */
        if (model_dra_merge_slices(n, &sp, 1, cat) < 0) snprintf(n->reason, sizeof n->reason, "out of memory");
        n->mig_strategy = MODEL_MIG_MIXED;
        n->track_host = g->cpu_milli > 0;
        n->cpu_milli = g->cpu_milli;
        n->memory_mib = g->memory_mib;
        if (n->reason[0]) {
            snprintf(err, errlen, "group \"%s\": %s", g->name, n->reason);
            model_node_free(n);
            n = NULL;
        }
    }
    model_dra_slice_clear(&s);
    cJSON_Delete(sl);
    return n;
}

static model_node *group_node(const sim_group *g, const model_catalog *cat, const char *name, char *err,
                              size_t errlen) {
    const model_gpu_product *p = find_product(cat, g->product);
    if (!p) {
        snprintf(err, errlen, "group \"%s\": gpuProduct \"%s\" is not in the GPU catalog", g->name, g->product);
        return NULL;
    }
    const sim_sharing *s = &g->sharing;
    if ((s->kind == SIM_SHARE_MIG || s->kind == SIM_SHARE_MIG_ON_DEMAND) && !p->mig_capable) {
        snprintf(err, errlen, "group \"%s\": %s does not support MIG", g->name, p->product);
        return NULL;
    }
    for (int i = 0; i < s->nitems; i++)
        if (model_product_profile_index(p, s->profile[i]) < 0) {
            snprintf(err, errlen, "group \"%s\": %s has no MIG profile \"%s\"", g->name, p->product, s->profile[i]);
            return NULL;
        }
    if (s->kind == SIM_SHARE_MPS && s->replicas > p->mps_max_clients) {
        snprintf(err, errlen, "group \"%s\": mps:%d exceeds the %d MPS clients %s allows", g->name, s->replicas,
                 p->mps_max_clients, p->product);
        return NULL;
    }
    if (g->dra) return dra_group_node(g, p, cat, name, err, errlen);
    if (s->kind == SIM_SHARE_MIG_ON_DEMAND) {
        /* No operator setup creates MIG instances per pod (the Node would advertise no GPU
         * resource at all), so this one is built with the model's by-hand API. */
        model_node *n = model_node_new(name);
        for (int i = 0; n && i < g->gpus_per_node; i++) {
            model_gpu *gpu = model_node_add_gpu(n, p, MODEL_GPU_MIG, 1, 0);
            if (gpu) gpu->mig_dynamic = true;
        }
        if (n) {
            n->mig_strategy = MODEL_MIG_MIXED;
            n->track_host = g->cpu_milli > 0;
            n->cpu_milli = g->cpu_milli;
            n->memory_mib = g->memory_mib;
        }
        if (!n) snprintf(err, errlen, "out of memory");
        return n;
    }
    cJSON *j = group_node_json(g, p, name);
    model_node *n = model_node_from_json(j, cat, err, errlen);
    cJSON_Delete(j);
    if (!n) return NULL;
    if (n->reason[0]) {
        snprintf(err, errlen, "group \"%s\": %s", g->name, n->reason);
        model_node_free(n);
        return NULL;
    }
    n->track_host = g->cpu_milli > 0;
    return n;
}

model_node *sim_group_node(const sim_group *g, const model_catalog *cat, const char *name, char *err,
                           size_t errlen) {
    if (!cat) cat = model_catalog_default();
    model_node *n = group_node(g, cat, name, err, errlen);
    char e2[200];
    if (n && sim_topology_apply(&g->topo, n, e2, sizeof e2) != 0) {
        snprintf(err, errlen, "group \"%s\": topology: %s", g->name, e2);
        model_node_free(n);
        return NULL;
    }
    return n;
}

/* A group's "topology": a preset must be the group's server (GPU count and product), a matrix
 * must have a row per GPU. */
static int read_topology(const cJSON *o, const char *where, const model_catalog *cat, sim_group *g, char *err,
                         size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "topology");
    if (!v) return 0;
    char field[64];
    snprintf(field, sizeof field, "%s.topology", where);
    if (sim_topology_parse(v, field, &g->topo, err, errlen) != 0) return -1;
    if (g->topo.ngpus != g->gpus_per_node) {
        snprintf(err, errlen, "%s: %s%s%shas %d GPUs, the group's nodes %d (gpusPerNode)", field,
                 g->topo.preset[0] ? "preset \"" : "the matrix ", g->topo.preset, g->topo.preset[0] ? "\" " : "",
                 g->topo.ngpus, g->gpus_per_node);
        return -1;
    }
    const char *product = NULL;
    if (g->topo.preset[0]) {
        sim_topology tmp;
        sim_topology_preset(g->topo.preset, &tmp, &product);
        if (find_product(cat ? cat : model_catalog_default(), g->product) !=
            model_catalog_find(cat ? cat : model_catalog_default(), product)) {
            snprintf(err, errlen, "%s: preset \"%s\" is a server of %d x %s, the group's gpuProduct is \"%s\"", field,
                     g->topo.preset, g->topo.ngpus, product, g->product);
            return -1;
        }
    }
    return 0;
}

bool sim_group_can_share(const sim_group *g, const sim_sharing *opt, const model_catalog *cat) {
    sim_group try = *g;
    try.sharing = *opt;
    char err[256];
    model_node *probe = sim_group_node(&try, cat, "probe", err, sizeof err);
    bool ok = probe != NULL;
    model_node_free(probe);
    return ok;
}

int sim_cluster_apply_sharing(sim_cluster *c, const sim_sharing *opt, const model_catalog *cat) {
    int took = 0;
    for (int i = 0; i < c->ngroups; i++) {
        sim_group *g = &c->groups[i];
        if (g->sharing.kind == SIM_SHARE_WHOLE || !sim_group_can_share(g, opt, cat)) continue;
        g->sharing = *opt;
        took++;
    }
    return took;
}

/* ------------------------------------------------------------ reading ---- */

static int read_group(const cJSON *o, int i, const model_catalog *cat, sim_group *g, char *err, size_t errlen) {
    static const char *const keys[] = {"name", "count", "gpuProduct", "gpusPerNode", "cpuMilli", "memoryMiB",
                                       "sharing", "dra", "topology", NULL};
    char where[48];
    snprintf(where, sizeof where, "nodeGroups[%d]", i);
    if (!cJSON_IsObject(o)) {
        snprintf(err, errlen, "%s: expected an object", where);
        return -1;
    }
    if (sim_json_known_keys(o, where, keys, err, errlen) != 0) return -1;
    const char *s = NULL;
    int64_t v;
    memset(g, 0, sizeof *g);
    if (sim_json_str(o, where, "name", true, &s, err, errlen) != 0) return -1;
    if (!*s || strlen(s) >= sizeof g->name) {
        snprintf(err, errlen, "%s.name: must be 1..%zu characters", where, sizeof g->name - 1);
        return -1;
    }
    strcpy(g->name, s);
    if (sim_json_int(o, where, "count", true, 0, 1000000, &v, err, errlen) != 0) return -1;
    g->count = (int)v;
    if (sim_json_str(o, where, "gpuProduct", true, &s, err, errlen) != 0) return -1;
    if (strlen(s) >= sizeof g->product) {
        snprintf(err, errlen, "%s.gpuProduct: too long", where);
        return -1;
    }
    strcpy(g->product, s);
    if (sim_json_int(o, where, "gpusPerNode", true, 1, MODEL_MAX_GPUS, &v, err, errlen) != 0) return -1;
    g->gpus_per_node = (int)v;
    int rc_cpu = sim_json_int(o, where, "cpuMilli", false, 1, INT64_C(1) << 40, &g->cpu_milli, err, errlen);
    if (rc_cpu < 0) return -1;
    int rc_mem = sim_json_int(o, where, "memoryMiB", false, 1, INT64_C(1) << 40, &g->memory_mib, err, errlen);
    if (rc_mem < 0) return -1;
    if (rc_cpu != rc_mem) {
        snprintf(err, errlen, "%s: cpuMilli and memoryMiB go together (give both, or neither to ignore host resources)",
                 where);
        return -1;
    }
    s = "whole";
    if (sim_json_str(o, where, "sharing", false, &s, err, errlen) < 0) return -1;
    char e2[200];
    if (sim_sharing_parse(s, &g->sharing, e2, sizeof e2) != 0) {
        snprintf(err, errlen, "%s.sharing: %s", where, e2);
        return -1;
    }
    const cJSON *dra = cJSON_GetObjectItemCaseSensitive(o, "dra");
    if (dra && !cJSON_IsBool(dra)) {
        snprintf(err, errlen, "%s.dra: expected true or false", where);
        return -1;
    }
    g->dra = cJSON_IsTrue(dra);
    if (read_topology(o, where, cat, g, err, errlen) != 0) return -1;
    /* Build one node now, so a product or layout the model cannot realise is reported
     * against the field, not at the first arrival. */
    model_node *n = sim_group_node(g, cat, "check", e2, sizeof e2);
    if (!n) {
        snprintf(err, errlen, "%s: %s", where, e2);
        return -1;
    }
    model_node_free(n);
    return 0;
}

sim_cluster *sim_cluster_from_json(const char *json, size_t len, const model_catalog *cat, char *err,
                                   size_t errlen) {
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) {
        snprintf(err, errlen, "cluster: malformed JSON near byte %ld",
                 cJSON_GetErrorPtr() ? (long)(cJSON_GetErrorPtr() - json) : 0L);
        return NULL;
    }
    sim_cluster *c = calloc(1, sizeof *c);
    static const char *const keys[] = {"nodeGroups", "$schema", "description", NULL};
    const cJSON *groups = cJSON_GetObjectItemCaseSensitive(root, "nodeGroups");
    if (!cJSON_IsObject(root)) {
        snprintf(err, errlen, "cluster: expected an object with \"nodeGroups\"");
        goto fail;
    }
    if (sim_json_known_keys(root, "cluster", keys, err, errlen) != 0) goto fail;
    if (!cJSON_IsArray(groups) || cJSON_GetArraySize(groups) == 0) {
        snprintf(err, errlen, "nodeGroups: expected a non-empty array");
        goto fail;
    }
    c->ngroups = cJSON_GetArraySize(groups);
    c->groups = calloc((size_t)c->ngroups, sizeof *c->groups);
    int i = 0;
    for (const cJSON *g = groups->child; g; g = g->next, i++) {
        if (read_group(g, i, cat, &c->groups[i], err, errlen) != 0) goto fail;
        for (int k = 0; k < i; k++)
            if (!strcmp(c->groups[k].name, c->groups[i].name)) {
                snprintf(err, errlen, "nodeGroups[%d].name: \"%s\" is used twice", i, c->groups[i].name);
                goto fail;
            }
    }
    cJSON_Delete(root);
    return c;
fail:
    cJSON_Delete(root);
    sim_cluster_free(c);
    return NULL;
}

sim_cluster *sim_cluster_from_file(const char *path, const model_catalog *cat, char *err, size_t errlen) {
    size_t len;
    char *txt = sim_read_file(path, &len, err, errlen);
    if (!txt) return NULL;
    char e2[400];
    sim_cluster *c = sim_cluster_from_json(txt, len, cat, e2, sizeof e2);
    if (!c) snprintf(err, errlen, "%s: %s", path, e2);
    free(txt);
    return c;
}

sim_cluster *sim_cluster_clone(const sim_cluster *c) {
    sim_cluster *d = calloc(1, sizeof *d);
    d->ngroups = c->ngroups;
    d->groups = malloc((size_t)c->ngroups * sizeof *d->groups);
    memcpy(d->groups, c->groups, (size_t)c->ngroups * sizeof *d->groups);
    return d;
}

void sim_cluster_free(sim_cluster *c) {
    if (!c) return;
    free(c->groups);
    free(c);
}

char *sim_cluster_to_json(const sim_cluster *c) {
    cJSON *root = cJSON_CreateObject();
    cJSON *arr = cJSON_AddArrayToObject(root, "nodeGroups");
    for (int i = 0; i < c->ngroups; i++) {
        const sim_group *g = &c->groups[i];
        char buf[256];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", g->name);
        cJSON_AddNumberToObject(o, "count", g->count);
        cJSON_AddStringToObject(o, "gpuProduct", g->product);
        cJSON_AddNumberToObject(o, "gpusPerNode", g->gpus_per_node);
        if (g->cpu_milli > 0) {
            cJSON_AddNumberToObject(o, "cpuMilli", (double)g->cpu_milli);
            cJSON_AddNumberToObject(o, "memoryMiB", (double)g->memory_mib);
        }
        sim_sharing_format(&g->sharing, buf, sizeof buf);
        cJSON_AddStringToObject(o, "sharing", buf);
        if (g->dra) cJSON_AddBoolToObject(o, "dra", true);
        if (g->topo.ngpus) cJSON_AddItemToObject(o, "topology", sim_topology_to_json(&g->topo));
        cJSON_AddItemToArray(arr, o);
    }
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    return s;
}

int sim_cluster_nodes(const sim_cluster *c) {
    int n = 0;
    for (int i = 0; i < c->ngroups; i++) n += c->groups[i].count;
    return n;
}

int sim_cluster_gpus(const sim_cluster *c) {
    int n = 0;
    for (int i = 0; i < c->ngroups; i++) n += c->groups[i].count * c->groups[i].gpus_per_node;
    return n;
}

int sim_cluster_build(const sim_cluster *c, const model_catalog *cat, model_node ***nodes_out, int **group_out,
                      int *n_out, char *err, size_t errlen) {
    int total = sim_cluster_nodes(c), k = 0;
    model_node **nodes = calloc((size_t)total + 1, sizeof *nodes);
    int *group_of = calloc((size_t)total + 1, sizeof *group_of);
    for (int gi = 0; gi < c->ngroups; gi++) {
        const sim_group *g = &c->groups[gi];
        if (g->count == 0) continue;
        char name[96];
        snprintf(name, sizeof name, "%s-0", g->name);
        model_node *tmpl = sim_group_node(g, cat, name, err, errlen);
        if (!tmpl) {
            sim_cluster_free_nodes(nodes, group_of, k);
            return -1;
        }
        for (int i = 0; i < g->count; i++) {
            model_node *n = i == 0 ? tmpl : model_node_clone(tmpl);
            if (i > 0) {
                snprintf(name, sizeof name, "%s-%d", g->name, i);
                free(n->name);
                n->name = strdup(name);
            }
            group_of[k] = gi;
            nodes[k++] = n;
        }
    }
    *nodes_out = nodes;
    *group_out = group_of;
    *n_out = k;
    return 0;
}

void sim_cluster_free_nodes(model_node **nodes, int *group_of, int n) {
    for (int i = 0; nodes && i < n; i++) model_node_free(nodes[i]);
    free(nodes);
    free(group_of);
}
