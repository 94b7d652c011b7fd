/* trace.c -- trace JSON in and out; every pod goes through model_request_from_pod. */
#include "sim/trace.h"

#include <stdlib.h>
#include <string.h>

#include "model/dra.h"
#include "sim/json.h"

static const char *const kind_names[SIM_NKINDS] = {"training", "inference", "notebook", "batch"};

const char *sim_kind_name(int kind) { return kind >= 0 && kind < SIM_NKINDS ? kind_names[kind] : "?"; }

int sim_kind_parse(const char *s) {
    for (int i = 0; i < SIM_NKINDS; i++)
        if (!strcmp(s, kind_names[i])) return i;
    return -1;
}

sim_trace *sim_trace_new(void) { return calloc(1, sizeof(sim_trace)); }

void sim_trace_free(sim_trace *t) {
    if (!t) return;
    for (int i = 0; i < t->nshapes; i++) free(t->shapes[i].pod_json);
    for (int i = 0; i < t->ntenants; i++) free(t->tenants[i]);
    free(t->shapes);
    free(t->tenants);
    free(t->w);
    free(t->ids);
    free(t->shape_hash);
    free(t);
}

static uint64_t fnv(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static void rehash(sim_trace *t) {
    int cap = t->hash_cap ? t->hash_cap * 2 : 64;
    int *h = calloc((size_t)cap, sizeof *h);
    for (int i = 0; i < t->nshapes; i++) {
        size_t k = fnv(t->shapes[i].pod_json) & (size_t)(cap - 1);
        while (h[k]) k = (k + 1) & (size_t)(cap - 1);
        h[k] = i + 1;
    }
    free(t->shape_hash);
    t->shape_hash = h;
    t->hash_cap = cap;
}

/* The DeviceClasses NVIDIA's DRA driver installs (its Helm chart; tests/fixtures/dra/), which claims in
 * traces name. Parsed once; the simulator reads traces on one thread. */
static const cJSON *sim_classes(void *user, const char *name) {
    static cJSON *classes;
    (void)user;
    if (!classes) classes = model_dra_chart_classes();
    return cJSON_GetObjectItemCaseSensitive(classes, name);
}

/* A claim-shaped request ("claim": a ResourceClaim's spec) into req, keeping the pod's host resources.
 * Sharing (the driver's GpuConfig: TimeSlicing or MPS) is checked; the claim holds its device whole. */
static int claim_request(const cJSON *claim, model_request *req, char *err, size_t errlen) {
    if (req->kind != MODEL_REQ_NONE) {
        snprintf(err, errlen, "claim: a pod asks for GPUs through resources or through a claim, not both");
        return -1;
    }
    const cJSON *cfg;
    cJSON_ArrayForEach(cfg, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(claim, "devices"), "config")) {
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cfg, "opaque"), "parameters"), "sharing");
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(sh, "strategy");
        if (sh && !(cJSON_IsString(st) && (!strcmp(st->valuestring, "TimeSlicing") || !strcmp(st->valuestring, "MPS")))) {
            snprintf(err, errlen, "claim.devices.config: sharing.strategy must be TimeSlicing or MPS");
            return -1;
        }
    }
    model_request r = {0};
    char why[256];
    model_dra_verdict v = model_dra_request(claim, sim_classes, NULL, &r, why, sizeof why);
    if (v != MODEL_DRA_JUDGED) {
        snprintf(err, errlen, "claim: %s", v == MODEL_DRA_NOTHING ? "asks for no GPU device" : why);
        return -1;
    }
    model_dra_request_of_pod(&r, req);
    *req = r;
    return 0;
}

/* The Pod the extender would see for a trace's pod part. */
static cJSON *as_pod(const cJSON *part, char *err, size_t errlen) {
    if (cJSON_GetObjectItemCaseSensitive(part, "spec")) return cJSON_Duplicate(part, true);
    static const char *const keys[] = {"resources", "annotations", "securityContext", "claim", NULL};
    if (sim_json_known_keys(part, "pod", keys, err, errlen) != 0) return NULL;
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(part, "resources");
    const cJSON *ann = cJSON_GetObjectItemCaseSensitive(part, "annotations");
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(part, "securityContext");
    cJSON *pod = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(pod, "metadata");
    if (ann) cJSON_AddItemToObject(meta, "annotations", cJSON_Duplicate(ann, true));
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "name", "main");
    if (res) cJSON_AddItemToObject(c, "resources", cJSON_Duplicate(res, true));
    cJSON *spec = cJSON_AddObjectToObject(pod, "spec");
    if (sc) cJSON_AddItemToObject(spec, "securityContext", cJSON_Duplicate(sc, true));   /* the pod's, as in a Pod */
    cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "containers"), c);
    return pod;
}

int sim_trace_shape(sim_trace *t, const cJSON *part, char *err, size_t errlen) {
    if (!cJSON_IsObject(part)) {
        snprintf(err, errlen, "pod: expected an object with \"resources\" and \"annotations\"");
        return -1;
    }
    char *key = cJSON_PrintUnformatted(part);
    if (!key) return -1;
    if (t->hash_cap) {
        size_t k = fnv(key) & (size_t)(t->hash_cap - 1);
        for (; t->shape_hash[k]; k = (k + 1) & (size_t)(t->hash_cap - 1))
            if (!strcmp(t->shapes[t->shape_hash[k] - 1].pod_json, key)) {
                free(key);
                return t->shape_hash[k] - 1;
            }
    }
    model_request req;
    char e2[300];
    cJSON *pod = as_pod(part, e2, sizeof e2);
    int rc = pod ? model_request_from_pod(pod, &req, e2, sizeof e2) : -1;
    cJSON_Delete(pod);
    const cJSON *claim = cJSON_GetObjectItemCaseSensitive(part, "claim");
    if (rc == 0 && claim) rc = claim_request(claim, &req, e2, sizeof e2);
    if (rc != 0) {
        snprintf(err, errlen, "pod: %s", e2);
        free(key);
        return -1;
    }
    if (t->nshapes == t->shapes_cap) {
        t->shapes_cap = t->shapes_cap ? 2 * t->shapes_cap : 16;
        t->shapes = realloc(t->shapes, (size_t)t->shapes_cap * sizeof *t->shapes);
    }
    t->shapes[t->nshapes] = (sim_shape){.req = req, .pod_json = key};
    t->nshapes++;
    if (2 * t->nshapes > t->hash_cap) rehash(t);
    else {
        size_t k = fnv(key) & (size_t)(t->hash_cap - 1);
        while (t->shape_hash[k]) k = (k + 1) & (size_t)(t->hash_cap - 1);
        t->shape_hash[k] = t->nshapes;
    }
    return t->nshapes - 1;
}

int sim_trace_tenant(sim_trace *t, const char *name) {
    for (int i = 0; i < t->ntenants; i++)
        if (!strcmp(t->tenants[i], name)) return i;
    if (t->ntenants >= 65535) return -1;
    t->tenants = realloc(t->tenants, (size_t)(t->ntenants + 1) * sizeof *t->tenants);
    t->tenants[t->ntenants] = strdup(name);
    return t->ntenants++;
}

int sim_trace_add(sim_trace *t, const sim_workload *w, const char *id) {
    size_t idlen = strlen(id) + 1;
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 1024;
        sim_workload *nw = realloc(t->w, (size_t)cap * sizeof *nw);
        if (!nw) return -1;
        t->w = nw, t->cap = cap;
    }
    if (t->ids_len + idlen > t->ids_cap) {
        size_t cap = t->ids_cap ? 2 * t->ids_cap : 16384;
        while (cap < t->ids_len + idlen) cap *= 2;
        char *ni = realloc(t->ids, cap);
        if (!ni) return -1;
        t->ids = ni, t->ids_cap = cap;
    }
    t->w[t->n] = *w;
    t->w[t->n].id = (uint32_t)t->ids_len;
    memcpy(t->ids + t->ids_len, id, idlen);
    t->ids_len += idlen;
    t->n++;
    return 0;
}

const char *sim_trace_id(const sim_trace *t, int i) { return t->ids + t->w[i].id; }

static int read_workload(sim_trace *t, const cJSON *o, int i, char *err, size_t errlen) {
    static const char *const keys[] = {"id", "kind", "arrival", "duration", "priority", "tenant", "gpuUtil", "commShare",
                                       "memBandwidth", "pod", NULL};
    char where[48], e2[400];
    snprintf(where, sizeof where, "workloads[%d]", i);
    if (!cJSON_IsObject(o)) {
        snprintf(err, errlen, "%s: expected an object", where);
        return -1;
    }
    if (sim_json_known_keys(o, where, keys, err, errlen) != 0) return -1;
    sim_workload w = {0};
    const char *id, *kind, *tenant = "default";
    double d, util = 1.0;
    int64_t prio = 0;
    if (sim_json_str(o, where, "id", true, &id, err, errlen) != 0) return -1;
    if (sim_json_str(o, where, "kind", true, &kind, err, errlen) != 0) return -1;
    int k = sim_kind_parse(kind);
    if (k < 0) {
        snprintf(err, errlen, "%s.kind: \"%s\" is not one of training, inference, notebook, batch", where, kind);
        return -1;
    }
    w.kind = (uint8_t)k;
    if (sim_json_num(o, where, "arrival", true, 0, 1e12, &w.arrival, err, errlen) != 0) return -1;
    if (sim_json_num(o, where, "duration", true, 0, 1e12, &d, err, errlen) != 0) return -1;
    /* sim_trace_write keeps milliseconds (%.3f): a shorter duration would be written as 0
     * and the converted trace could not be read back */
    if (d < 0.001) {
        snprintf(err, errlen, "%s.duration: must be > 0 seconds (at least 0.001, a millisecond)", where);
        return -1;
    }
    w.duration = d;
    if (sim_json_int(o, where, "priority", false, -2147483647, 2147483647, &prio, err, errlen) < 0) return -1;
    w.priority = (int32_t)prio;
    if (sim_json_str(o, where, "tenant", false, &tenant, err, errlen) < 0) return -1;
    if (sim_json_num(o, where, "gpuUtil", false, 0, 1, &util, err, errlen) < 0) return -1;
    w.util = (float)util;
    double comm;
    int rc = sim_json_num(o, where, "commShare", false, 0, 1, &comm, err, errlen);
    if (rc < 0) return -1;
    w.comm_given = rc == 0;   /* 1: absent */
    w.comm_share = w.comm_given ? (float)comm : 0;
    double bw;
    rc = sim_json_num(o, where, "memBandwidth", false, 0, 1, &bw, err, errlen);
    if (rc < 0) return -1;
    w.bw_given = rc == 0;
    w.mem_bw = w.bw_given ? (float)bw : 0;
    int ti = sim_trace_tenant(t, tenant);
    if (ti < 0) {
        snprintf(err, errlen, "%s.tenant: more than 65535 tenants", where);
        return -1;
    }
    w.tenant = (uint16_t)ti;
    const cJSON *pod = cJSON_GetObjectItemCaseSensitive(o, "pod");
    if (!pod) {
        snprintf(err, errlen, "%s.pod: missing (the GPU request, as in a pod)", where);
        return -1;
    }
    w.shape = sim_trace_shape(t, pod, e2, sizeof e2);
    if (w.shape < 0) {
        snprintf(err, errlen, "%s.%s", where, e2);
        return -1;
    }
    if (sim_trace_add(t, &w, id) != 0) {
        snprintf(err, errlen, "%s: out of memory", where);
        return -1;
    }
    return 0;
}

/* The trace is read one workload at a time: cJSON parses a single value and says where it
 * ended (cJSON_ParseWithLengthOpts), so only the framing -- the top-level object and the
 * "workloads" array -- is walked here. A tree of a whole million-workload trace took about
 * 5x the file's size (1.6 GB peak for 275 MB); this way the peak is the file plus the trace. */

static const char *skip_ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

/* One JSON value at *p; *p moves past it. NULL with "malformed JSON near byte N". */
static cJSON *parse_next(const char *json, const char *end, const char **p, char *err, size_t errlen) {
    const char *stop = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(*p, (size_t)(end - *p), &stop, false);
    if (!v) {
        const char *at = cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() : *p;
        snprintf(err, errlen, "trace: malformed JSON near byte %ld", (long)(at - json));
        return NULL;
    }
    *p = stop;
    return v;
}

sim_trace *sim_trace_from_json(const char *json, size_t len, char *err, size_t errlen) {
    const char *p = skip_ws(json, json + len), *end = json + len;
    sim_trace *t = sim_trace_new();
    bool seen_workloads = false;
    if (!t) {
        snprintf(err, errlen, "trace: out of memory");
        return NULL;
    }
    if (p == end) goto malformed;
    if (*p != '{') {   /* valid JSON but not an object, or not JSON at all */
        cJSON *v = parse_next(json, end, &p, err, errlen);
        if (!v) goto fail;
        cJSON_Delete(v);
        snprintf(err, errlen, "trace: expected an object with a \"workloads\" array");
        goto fail;
    }
    p = skip_ws(p + 1, end);
    if (p < end && *p == '}') p++;
    else
        for (;;) {   /* "key": value, ... */
            if (p == end || *p != '"') goto malformed;
            cJSON *key = parse_next(json, end, &p, err, errlen);
            if (!key) goto fail;
            char name[64];
            snprintf(name, sizeof name, "%s", key->valuestring);
            cJSON_Delete(key);
            p = skip_ws(p, end);
            if (p == end || *p != ':') goto malformed;
            p = skip_ws(p + 1, end);
            if (!strcmp(name, "workloads") && p < end && *p == '[') {
                seen_workloads = true;
                p = skip_ws(p + 1, end);
                if (p < end && *p == ']') p++;
                else
                    for (int i = 0;; i++) {
                        cJSON *o = parse_next(json, end, &p, err, errlen);
                        if (!o) goto fail;
                        int rc = read_workload(t, o, i, err, errlen);
                        cJSON_Delete(o);
                        if (rc != 0) goto fail;
                        p = skip_ws(p, end);
                        if (p < end && *p == ',') { p = skip_ws(p + 1, end); continue; }
                        if (p < end && *p == ']') { p++; break; }
                        goto malformed;
                    }
            } else {
                cJSON *v = parse_next(json, end, &p, err, errlen);
                if (!v) goto fail;
                cJSON_Delete(v);
                if (!strcmp(name, "workloads")) {
                    snprintf(err, errlen, "trace: expected an object with a \"workloads\" array");
                    goto fail;
                }
                if (strcmp(name, "$schema") != 0 && strcmp(name, "description") != 0) {
                    snprintf(err, errlen, "trace: unknown key \"%s\"", name);
                    goto fail;
                }
            }
            p = skip_ws(p, end);
            if (p < end && *p == ',') { p = skip_ws(p + 1, end); continue; }
            if (p < end && *p == '}') { p++; break; }
            goto malformed;
        }
    if (skip_ws(p, end) != end) goto malformed;   /* nothing may follow the object */
    if (!seen_workloads) {
        snprintf(err, errlen, "trace: expected an object with a \"workloads\" array");
        goto fail;
    }
    return t;
malformed:
    snprintf(err, errlen, "trace: malformed JSON near byte %ld", (long)(p - json));
fail:
    sim_trace_free(t);
    return NULL;
}

sim_trace *sim_trace_from_file(const char *path, char *err, size_t errlen) {
    size_t len;
    char *txt = sim_read_file(path, &len, err, errlen);
    if (!txt) return NULL;
    char e2[500];
    sim_trace *t = sim_trace_from_json(txt, len, e2, sizeof e2);
    if (!t) snprintf(err, errlen, "%s: %s", path, e2);
    free(txt);
    return t;
}

static void put_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

int sim_trace_write(const sim_trace *t, FILE *f) {
    fputs("{\"workloads\": [\n", f);
    for (int i = 0; i < t->n; i++) {
        const sim_workload *w = &t->w[i];
        fputs("  {\"id\": ", f);
        put_string(f, sim_trace_id(t, i));
        fprintf(f, ", \"kind\": \"%s\", \"arrival\": %.3f, \"duration\": %.3f, \"priority\": %d, \"tenant\": ",
                sim_kind_name(w->kind), w->arrival, w->duration, (int)w->priority);
        put_string(f, t->tenants[w->tenant]);
        fprintf(f, ", \"gpuUtil\": %.3f", (double)w->util);
        if (w->comm_given) fprintf(f, ", \"commShare\": %.3f", (double)w->comm_share);
        if (w->bw_given) fprintf(f, ", \"memBandwidth\": %.3f", (double)w->mem_bw);
        fprintf(f, ", \"pod\": %s}%s\n", t->shapes[w->shape].pod_json, i + 1 < t->n ? "," : "");
    }
    fputs("]}\n", f);
    return ferror(f) ? -1 : 0;
}

/* ------------------------------------------------------------ compute sharing */

static const char *const compute_names[] = {"trace", "timeslice", "mps", "mps:tenant"};

int sim_compute_parse(const char *s, sim_compute *out, char *err, size_t errlen) {
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, compute_names[i])) {
            *out = (sim_compute)i;
            return 0;
        }
    snprintf(err, errlen, "\"%s\" is not one of trace, timeslice, mps, mps:tenant", s);
    return -1;
}

const char *sim_compute_name(sim_compute c) { return c >= SIM_COMPUTE_TRACE && c <= SIM_COMPUTE_MPS_TENANT ? compute_names[c] : "?"; }

/* runAsUser = uid on the pod and on every container that sets its own (which would override it). */
static void set_uid(cJSON *spec, int64_t uid) {
    cJSON *sc = cJSON_GetObjectItemCaseSensitive(spec, "securityContext");
    if (!cJSON_IsObject(sc)) {
        cJSON_DeleteItemFromObjectCaseSensitive(spec, "securityContext");
        sc = cJSON_AddObjectToObject(spec, "securityContext");
    }
    cJSON_DeleteItemFromObjectCaseSensitive(sc, "runAsUser");
    cJSON_AddNumberToObject(sc, "runAsUser", (double)uid);
    static const char *const lists[] = {"initContainers", "containers"};
    for (int l = 0; l < 2; l++) {
        cJSON *ctr;
        cJSON_ArrayForEach(ctr, cJSON_GetObjectItemCaseSensitive(spec, lists[l])) {
            cJSON *csc = cJSON_GetObjectItemCaseSensitive(ctr, "securityContext");
            if (cJSON_GetObjectItemCaseSensitive(csc, "runAsUser")) cJSON_ReplaceItemInObjectCaseSensitive(csc, "runAsUser", cJSON_CreateNumber((double)uid));
        }
    }
}

/* The pod part of one workload rewritten for compute sharing c (a new tree), or NULL when it stays as is. */
static cJSON *rewrite_part(const sim_shape *sh, sim_compute c, int tenant) {
    const model_request *r = &sh->req;
    if (r->kind != MODEL_REQ_FRACTION || r->via_dra) return NULL;
    bool mps = c == SIM_COMPUTE_MPS || c == SIM_COMPUTE_MPS_TENANT;
    if (mps && r->isolation != MODEL_ISO_DEFAULT && r->isolation != MODEL_ISO_ANY) return NULL;   /* no soft share */
    if (!mps && r->compute_sharing == MODEL_COMPUTE_TIMESLICE) return NULL;
    cJSON *part = cJSON_Parse(sh->pod_json);
    if (!part) return NULL;
    cJSON *spec = cJSON_GetObjectItemCaseSensitive(part, "spec");
    cJSON *holder = spec ? cJSON_GetObjectItemCaseSensitive(part, "metadata") : part;
    if (spec && !holder) holder = cJSON_AddObjectToObject(part, "metadata");
    cJSON *ann = cJSON_GetObjectItemCaseSensitive(holder, "annotations");
    if (!cJSON_IsObject(ann)) {
        cJSON_DeleteItemFromObjectCaseSensitive(holder, "annotations");
        ann = cJSON_AddObjectToObject(holder, "annotations");
    }
    cJSON_DeleteItemFromObjectCaseSensitive(ann, "tessera.io/compute-sharing");
    if (mps) {
        cJSON_DeleteItemFromObjectCaseSensitive(ann, "tessera.io/isolation");
        cJSON_AddStringToObject(ann, "tessera.io/compute-sharing", "mps");
        set_uid(spec ? spec : part, SIM_MPS_UID + (c == SIM_COMPUTE_MPS_TENANT ? tenant : 0));
    }
    return part;
}

sim_trace *sim_trace_compute_sharing(const sim_trace *t, sim_compute c, char *err, size_t errlen) {
    sim_trace *o = sim_trace_new();
    if (!o) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    for (int i = 0; i < t->ntenants; i++) sim_trace_tenant(o, t->tenants[i]);   /* same indices */
    int *memo = calloc((size_t)(t->nshapes ? t->nshapes : 1), sizeof *memo);   /* shape + 1, unless per tenant */
    for (int i = 0; memo && i < t->n; i++) {
        sim_workload w = t->w[i];
        const sim_shape *sh = &t->shapes[w.shape];
        int shape = c != SIM_COMPUTE_MPS_TENANT ? memo[w.shape] - 1 : -1;
        if (shape < 0) {
            cJSON *part = c == SIM_COMPUTE_TRACE ? NULL : rewrite_part(sh, c, w.tenant);
            cJSON *orig = part ? NULL : cJSON_Parse(sh->pod_json);
            char e2[400];
            shape = sim_trace_shape(o, part ? part : orig, e2, sizeof e2);
            cJSON_Delete(part);
            cJSON_Delete(orig);
            if (shape < 0) {
                snprintf(err, errlen, "workloads[%d] (%s) as %s: %s", i, sim_trace_id(t, i), sim_compute_name(c), e2);
                free(memo);
                sim_trace_free(o);
                return NULL;
            }
            if (c != SIM_COMPUTE_MPS_TENANT) memo[w.shape] = shape + 1;
        }
        w.shape = shape;
        if (sim_trace_add(o, &w, sim_trace_id(t, i)) != 0) {
            snprintf(err, errlen, "out of memory");
            free(memo);
            sim_trace_free(o);
            return NULL;
        }
    }
    if (!memo) {
        snprintf(err, errlen, "out of memory");
        sim_trace_free(o);
        return NULL;
    }
    free(memo);
    return o;
}
