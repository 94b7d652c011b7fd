/* request.c -- a Pod object normalised into one model_request.
 * Resources are summed as kube-scheduler sums them, then the GPU forms are reconciled
 * into one kind; a combination that cannot mean one thing is an error naming the field.
 */
#include "model/request.h"
#include "model/link.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/catalog.h"
#include "model/mig.h"
#include "model/quantity.h"

#define ANN_FRACTION "tessera.io/gpu-fraction"
#define ANN_KAI_FRACTION "gpu-fraction"
#define ANN_KAI_MEMORY "gpu-memory"
#define ANN_MODELS "tessera.io/gpu-models"
#define ANN_ISOLATION "tessera.io/isolation"
#define ANN_TOPOLOGY "tessera.io/topology"
#define ANN_COMPUTE "tessera.io/compute-sharing"
#define ANN_COMPUTE_FIELD "metadata.annotations[\"" ANN_COMPUTE "\"]"
/* The init container tessera's webhook adds to every soft share (round4 contract): it copies
 * libtessera-cuda.so into the pod as uid 65532 and runs no CUDA, so its uid is not the pod's. */
#define SHIM_INIT_NAME "tessera-cuda-shim"
#define SHIM_INIT_FLAG "--install-shim"
#define RES_MIG_PREFIX "nvidia.com/mig-"

/* The resources tessera reads; everything else in requests/limits is only type-checked. */
enum { RES_CPU, RES_MEMORY, RES_GPU, RES_SHARED, RES_GPUMEM, RES_GPUMEM_PCT, RES_GPUCORES, RES_MIG, RES_N };
static const char *const req_res_names[RES_N] = {
    "cpu", "memory", "nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/gpumem",
    "nvidia.com/gpumem-percentage", "nvidia.com/gpucores", NULL /* nvidia.com/mig-<profile> */
};

typedef struct req_ctx {
    char *err;
    size_t errlen;
    char mig_resource[96]; /* the pod's one nvidia.com/mig-* resource, "" until seen */
    bool gpumem_bytes;     /* some nvidia.com/gpumem had a byte suffix (req_gpumem) */
} req_ctx;

static int req_fail(req_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int req_fail(req_ctx *c, const char *fmt, ...) {
    if (c->err && c->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int req_res_index(const char *name) {
    for (int r = 0; r < RES_N; r++)
        if (req_res_names[r] && strcmp(req_res_names[r], name) == 0) return r;
    if (strncmp(name, RES_MIG_PREFIX, strlen(RES_MIG_PREFIX)) == 0) return RES_MIG;
    return -1;
}

/* Whether a quantity's suffix makes it a count of bytes for nvidia.com/gpumem: a binary one
 * (Ki Mi Gi Ti Pi Ei), or a decimal one from M up (M G T P E), which read as MiB would be a
 * million MiB or more, more than any GPU holds. Not k: the API server writes a pod's 20000
 * back as "20k" (Quantity canonical form), and HAMi reads that as 20000 MiB; not m, u, n or
 * an exponent, which no one writes for bytes. */
static bool req_byte_suffix(const char *s) {
    size_t n = strlen(s);
    if (n >= 3 && s[n - 1] == 'i' && strchr("KMGTPE", s[n - 2])) return true;
    return n >= 2 && strchr("MGTPE", s[n - 1]) && ((s[n - 2] >= '0' && s[n - 2] <= '9') || s[n - 2] == '.');
}

/* " (nvidia.com/gpumem counts MiB: write 20480)" for a byte quantity that reads as a
 * positive number of MiB, "" otherwise: what to write instead of a value that cannot be
 * read as MiB. */
static void req_mib_hint(const char *s, const char *field, char *hint, size_t len) {
    int64_t mib;
    bool exact;
    hint[0] = 0;
    if (req_byte_suffix(s) && model_quantity_parse_scaled(s, -20, &mib, &exact, NULL, 0) == 0 && mib > 0)
        snprintf(hint, len, " (%s counts MiB: write %lld%s)", field, (long long)mib, exact ? "" : ", which holds it");
}

/* nvidia.com/gpumem into MiB. A bare number (or "20k") is MiB, as HAMi reads it; a quantity
 * with a byte suffix (req_byte_suffix) is bytes and must be a whole number of MiB. */
static int req_gpumem(req_ctx *c, const char *s, const char *where, int64_t *mib) {
    char qerr[256], hint[96];
    if (!req_byte_suffix(s)) {
        if (model_quantity_parse_int(s, mib, qerr, sizeof qerr) == 0) return 0;
        return req_fail(c, "%s: %s; it counts MiB, e.g. 20480 (or 20Gi)", where, qerr);
    }
    bool exact;
    c->gpumem_bytes = true;
    if (model_quantity_parse_scaled(s, -20, mib, &exact, qerr, sizeof qerr) != 0) return req_fail(c, "%s: %s", where, qerr);
    if (exact) return 0;
    req_mib_hint(s, req_res_names[RES_GPUMEM], hint, sizeof hint);
    return req_fail(c, "%s: \"%.64s\" is bytes, and not a whole number of MiB%s", where, s, hint);
}

/* One quantity of requests/limits: cpu and memory in milli-units, GPU resources as
 * whole counts (extended resources are integers in Kubernetes), nvidia.com/gpumem in MiB
 * (req_gpumem). JSON numbers are taken as the quantity they spell. */
static int req_quantity(req_ctx *c, const cJSON *item, const char *where, int r, int64_t *out) {
    char text[64];
    const char *s;
    if (cJSON_IsString(item)) {
        s = item->valuestring;
    } else if (cJSON_IsNumber(item)) {
        /* %.15g: enough digits for any integer a pod would use, and no binary noise
         * ("0.1", not "0.10000000000000001"). */
        snprintf(text, sizeof text, "%.15g", item->valuedouble);
        s = text;
    } else {
        return req_fail(c, "%s: expected a quantity string", where);
    }
    char qerr[256];
    /* cpu, memory and resources tessera does not read may be fractional */
    if (r < 0 || r == RES_CPU || r == RES_MEMORY) {
        if (model_quantity_parse_milli(s, out, qerr, sizeof qerr) != 0) return req_fail(c, "%s: %s", where, qerr);
        if (*out < 0) return req_fail(c, "%s: \"%.64s\" must not be negative", where, s);
        return 0;
    }
    if (r == RES_GPUMEM) return req_gpumem(c, s, where, out);
    if (model_quantity_parse_int(s, out, qerr, sizeof qerr) != 0) {
        if (r == RES_GPU && strstr(qerr, "whole number"))
            return req_fail(c, "%s: %s; for a share of one GPU use the " ANN_FRACTION " annotation", where, qerr);
        return req_fail(c, "%s: %s", where, qerr);
    }
    return 0;
}

/* Reads one section (requests or limits) of a container's resources into v[], with
 * has[] marking what was given. */
static int req_section(req_ctx *c, const cJSON *res, const char *path, const char *section, int64_t v[RES_N],
                       bool has[RES_N]) {
    const cJSON *sec = cJSON_GetObjectItemCaseSensitive(res, section);
    if (!sec || cJSON_IsNull(sec)) return 0;
    if (!cJSON_IsObject(sec)) return req_fail(c, "%s.resources.%s: expected an object", path, section);
    const cJSON *e;
    cJSON_ArrayForEach(e, sec) {
        char where[256];
        snprintf(where, sizeof where, "%s.resources.%s[\"%.100s\"]", path, section, e->string);
        int r = req_res_index(e->string);
        int64_t q;
        if (req_quantity(c, e, where, r, &q) != 0) return -1;
        if (r < 0) continue;
        if (r == RES_MIG) {
            /* A zero-valued MIG resource asks for nothing, so it cannot conflict. */
            if (q == 0) continue;
            if (strlen(e->string) >= sizeof c->mig_resource)
                return req_fail(c, "%s: unknown MIG profile (name too long)", where);
            if (c->mig_resource[0] && strcmp(c->mig_resource, e->string) != 0)
                return req_fail(c, "%s: a pod may ask for one MIG profile, and it already asks for %s", where,
                                c->mig_resource);
            snprintf(c->mig_resource, sizeof c->mig_resource, "%s", e->string);
        }
        v[r] = q;
        has[r] = true;
    }
    return 0;
}

/* A container's value per resource: its request, or its limit when no request is
 * given (the apiserver defaults requests from limits). */
static int req_container(req_ctx *c, const cJSON *ctr, const char *path, int64_t v[RES_N], bool *sidecar) {
    if (!cJSON_IsObject(ctr)) return req_fail(c, "%s: expected a container object", path);
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(ctr, "restartPolicy");
    if (rp && !cJSON_IsNull(rp) && !cJSON_IsString(rp)) return req_fail(c, "%s.restartPolicy: expected a string", path);
    *sidecar = cJSON_IsString(rp) && strcmp(rp->valuestring, "Always") == 0;

    int64_t req[RES_N] = {0}, lim[RES_N] = {0};
    bool has_req[RES_N] = {false}, has_lim[RES_N] = {false};
    memset(v, 0, RES_N * sizeof v[0]);
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(ctr, "resources");
    if (!res || cJSON_IsNull(res)) return 0;
    if (!cJSON_IsObject(res)) return req_fail(c, "%s.resources: expected an object", path);
    if (req_section(c, res, path, "requests", req, has_req) != 0) return -1;
    if (req_section(c, res, path, "limits", lim, has_lim) != 0) return -1;
    for (int r = 0; r < RES_N; r++) {
        if (r >= RES_GPU && has_req[r] && has_lim[r] && req[r] != lim[r])
            return req_fail(c, "%s.resources: %s request (%lld) and limit (%lld) must be equal for an extended resource",
                            path, r == RES_MIG ? c->mig_resource : req_res_names[r], (long long)req[r],
                            (long long)lim[r]);
        v[r] = has_req[r] ? req[r] : lim[r];
    }
    return 0;
}

static int req_add(req_ctx *c, int64_t *sum, int64_t x, int r) {
    if (__builtin_add_overflow(*sum, x, sum))
        return req_fail(c, "spec: the pod's total %s overflows", r == RES_MIG ? c->mig_resource : req_res_names[r]);
    return 0;
}

/* Effective pod value per resource = max(app containers plus sidecars, each regular
 * init container plus the sidecars started before it), as Kubernetes 1.29+ computes it. */
static int req_containers(req_ctx *c, const cJSON *spec, int64_t eff[RES_N]) {
    int64_t app[RES_N] = {0}, init_max[RES_N] = {0}, sidecars[RES_N] = {0}, v[RES_N];
    const cJSON *inits = cJSON_GetObjectItemCaseSensitive(spec, "initContainers");
    const cJSON *ctrs = cJSON_GetObjectItemCaseSensitive(spec, "containers");
    if (inits && !cJSON_IsNull(inits) && !cJSON_IsArray(inits))
        return req_fail(c, "spec.initContainers: expected an array");
    if (!cJSON_IsArray(ctrs)) return req_fail(c, "spec.containers: expected an array (a pod has at least one container)");

    int i = 0;
    const cJSON *ctr, *init_list = cJSON_IsArray(inits) ? inits : NULL;
    bool sidecar;
    cJSON_ArrayForEach(ctr, init_list) {
        char path[64];
        snprintf(path, sizeof path, "spec.initContainers[%d]", i++);
        if (req_container(c, ctr, path, v, &sidecar) != 0) return -1;
        for (int r = 0; r < RES_N; r++) {
            if (sidecar) {
                if (req_add(c, &sidecars[r], v[r], r) != 0) return -1;
                continue;
            }
            int64_t x = v[r];
            if (req_add(c, &x, sidecars[r], r) != 0) return -1;
            if (x > init_max[r]) init_max[r] = x;
        }
    }
    i = 0;
    cJSON_ArrayForEach(ctr, ctrs) {
        char path[64];
        snprintf(path, sizeof path, "spec.containers[%d]", i++);
        if (req_container(c, ctr, path, v, &sidecar) != 0) return -1;
        for (int r = 0; r < RES_N; r++)
            if (req_add(c, &app[r], v[r], r) != 0) return -1;
    }
    for (int r = 0; r < RES_N; r++) {
        if (req_add(c, &app[r], sidecars[r], r) != 0) return -1;
        eff[r] = app[r] > init_max[r] ? app[r] : init_max[r];
    }
    return 0;
}

/* The uids the pod's containers run as (securityContext.runAsUser), for an MPS share. */
typedef struct req_uids {
    int64_t uid;              /* the first container's uid; MODEL_UID_UNKNOWN when it sets none */
    bool unset, differ;       /* some container runs as the image's user; two containers differ */
    char first[64], other[64];/* the first container counted; the one that is unset or differs */
    int64_t other_uid;
} req_uids;

/* A securityContext's runAsUser into *uid (unchanged when absent). The API server takes an int64 in
 * 0..2147483647; so does this. */
static int req_run_as_user(req_ctx *c, const cJSON *holder, const char *path, int64_t *uid) {
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(holder, "securityContext");
    if (!sc || cJSON_IsNull(sc)) return 0;
    if (!cJSON_IsObject(sc)) return req_fail(c, "%s.securityContext: expected an object", path);
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(sc, "runAsUser");
    if (!u || cJSON_IsNull(u)) return 0;
    /* range before the cast: converting an out-of-range double is undefined */
    if (!cJSON_IsNumber(u) || !(u->valuedouble >= 0 && u->valuedouble <= 2147483647.0) ||
        u->valuedouble != (double)(int64_t)u->valuedouble)
        return req_fail(c, "%s.securityContext.runAsUser: expected a uid, a whole number in 0..2147483647", path);
    *uid = (int64_t)u->valuedouble;
    return 0;
}

static bool req_is_shim_init(const cJSON *ctr) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(ctr, "name");
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(ctr, "command");
    const cJSON *flag = cJSON_IsArray(cmd) ? cJSON_GetArrayItem(cmd, 1) : NULL;
    return cJSON_IsString(name) && !strcmp(name->valuestring, SHIM_INIT_NAME) && cJSON_IsString(flag) &&
           !strcmp(flag->valuestring, SHIM_INIT_FLAG);
}

/* Every container's effective uid (its own runAsUser, else the pod's), init containers included:
 * an MPS share's processes may run in any of them. Only the type of each value is checked here;
 * whether the pod needs one uid is req_mps_uid's question. */
static int req_uids_of(req_ctx *c, const cJSON *spec, req_uids *u) {
    int64_t pod_uid = MODEL_UID_UNKNOWN;
    memset(u, 0, sizeof *u);
    u->uid = MODEL_UID_UNKNOWN;
    if (req_run_as_user(c, spec, "spec", &pod_uid) != 0) return -1;
    static const char *const lists[] = {"initContainers", "containers"};
    bool first = true;
    for (int l = 0; l < 2; l++) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(spec, lists[l]), *ctr;
        if (!cJSON_IsArray(arr)) continue;   /* req_containers already refused what is not an array */
        int i = 0;
        cJSON_ArrayForEach(ctr, arr) {
            char path[64];
            snprintf(path, sizeof path, "spec.%s[%d]", lists[l], i++);
            int64_t uid = pod_uid;
            if (req_run_as_user(c, ctr, path, &uid) != 0) return -1;
            if (l == 0 && req_is_shim_init(ctr)) continue;
            if (first) {
                u->uid = uid;
                snprintf(u->first, sizeof u->first, "%s", path);
                first = false;
            }
            if (uid == MODEL_UID_UNKNOWN && !u->unset && !u->differ) {
                u->unset = true;
                snprintf(u->other, sizeof u->other, "%s", path);
            } else if (uid != u->uid && uid != MODEL_UID_UNKNOWN && u->uid != MODEL_UID_UNKNOWN && !u->unset &&
                       !u->differ) {
                u->differ = true;
                u->other_uid = uid;
                snprintf(u->other, sizeof u->other, "%s", path);
            }
        }
    }
    return 0;
}

/* An MPS share's one uid, or the refusal that says why it needs one. */
static int req_mps_uid(req_ctx *c, const req_uids *u) {
    static const char why[] =
        "an MPS control daemon runs one server per Unix user, and a client of another uid waits until the running "
        "server's clients are all gone (nvidia-cuda-mps-control(1)), so tessera keeps MPS shares of different uids on "
        "different GPUs and must know this pod's";
    if (u->differ)
        return req_fail(c, ANN_COMPUTE_FIELD ": mps needs one uid for the whole pod: %s runs as uid %lld and %s as uid %lld; %s",
                        u->first, (long long)u->uid, u->other, (long long)u->other_uid, why);
    if (u->unset)
        return req_fail(c, ANN_COMPUTE_FIELD ": mps needs the uid the pod's CUDA processes run as, and %s sets none: set "
                        "spec.securityContext.runAsUser (or runAsUser on every container, init containers too); %s",
                        u->other, why);
    return 0;
}

static int req_compute_sharing(req_ctx *c, const char *s, uint8_t *out) {
    if (!strcmp(s, "timeslice")) *out = MODEL_COMPUTE_TIMESLICE;
    else if (!strcmp(s, "mps")) *out = MODEL_COMPUTE_MPS;
    else return req_fail(c, ANN_COMPUTE_FIELD ": \"%.64s\" is not one of mps, timeslice", s);
    return 0;
}

/* tessera.io/compute-sharing says how a soft share shares compute: it needs a soft share (a
 * fraction that fit maps onto an unshared GPU), and an isolation that names another route
 * contradicts it. */
static int req_compute_rules(req_ctx *c, const char *value, model_request *out) {
    bool mps = out->compute_sharing == MODEL_COMPUTE_MPS;
    if (out->kind != MODEL_REQ_FRACTION) {
        char what[160];
        model_request_format(out, what, sizeof what);
        return req_fail(c, ANN_COMPUTE_FIELD ": applies to a share of one GPU (" ANN_FRACTION ", " ANN_KAI_FRACTION
                        ", " ANN_KAI_MEMORY ", nvidia.com/gpumem, gpumem-percentage or gpucores), and this pod asks "
                        "for %s", what);
    }
    switch (out->isolation) {
    case MODEL_ISO_DEFAULT: return 0;
    case MODEL_ISO_MIG:
        return req_fail(c, ANN_COMPUTE_FIELD " cannot be combined with " ANN_ISOLATION ": mig: the share becomes a MIG "
                        "instance, whose SMs are its own and shared with nobody; drop one of them");
    case MODEL_ISO_TIMESLICE:
        if (!mps) return 0;
        return req_fail(c, ANN_COMPUTE_FIELD ": mps contradicts " ANN_ISOLATION ": timeslice (a time-slice replica); "
                        "drop " ANN_ISOLATION " for an MPS share of an unshared GPU");
    case MODEL_ISO_MPS:
        if (mps)
            return req_fail(c, ANN_COMPUTE_FIELD ": mps and " ANN_ISOLATION ": mps ask for different things: the "
                            "isolation a replica of the device plugin's MPS daemon, compute-sharing a share of an "
                            "unshared GPU served by the MPS daemon of tessera's reservation; drop " ANN_ISOLATION);
        return req_fail(c, ANN_COMPUTE_FIELD ": %s contradicts " ANN_ISOLATION ": mps (a replica of the device "
                        "plugin's MPS daemon)", value);
    case MODEL_ISO_ANY:
        if (!mps) return 0;
        return req_fail(c, ANN_COMPUTE_FIELD ": mps cannot be combined with " ANN_ISOLATION ": any, which lets the "
                        "share land on a MIG instance or a device-plugin replica, where it is no client of tessera's "
                        "MPS daemon; drop " ANN_ISOLATION " for an MPS share of an unshared GPU");
    }
    return 0;
}

/* An annotation's value, NULL if absent; annotations are strings in the API. */
static int req_annotation(req_ctx *c, const cJSON *anns, const char *key, const char **out) {
    *out = NULL;
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(anns, key);
    if (!a || cJSON_IsNull(a)) return 0;
    if (!cJSON_IsString(a)) return req_fail(c, "metadata.annotations[\"%s\"]: expected a string", key);
    *out = a->valuestring;
    return 0;
}

/* "0.25" -> 250 permille, rounded, at least 1. False unless a plain decimal in (0, 1]. */
static bool req_parse_fraction(const char *s, int *permille) {
    int ip = 0, digits = 0, frac = 0, nfrac = 0; /* frac: the first 4 decimals */
    bool sticky = false;                        /* a non-zero decimal beyond the 4th */
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++, digits++) ip = ip > 1 ? 2 : ip * 10 + (*p - '0');
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++, digits++, nfrac++) {
            if (nfrac < 4) frac = frac * 10 + (*p - '0');
            else if (*p != '0') sticky = true;
        }
    }
    for (; nfrac < 4; nfrac++) frac *= 10;
    if (*p || !digits) return false;
    if (ip > 1 || (ip == 1 && (frac || sticky))) return false;
    if (ip == 0 && !frac && !sticky) return false;
    int v = ip * 10000 + frac;
    *permille = (v + 5) / 10;
    if (*permille < 1) *permille = 1;
    return true;
}

/* The gpu-memory annotation: MiB as a plain whole number > 0. */
static bool req_parse_mib(const char *s, int64_t *mib) {
    int64_t v = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++) v = v > INT32_MAX ? v : v * 10 + (*p - '0');
    if (*p || p == s || v == 0) return false;
    *mib = v;
    return true;
}

static int req_models(req_ctx *c, const char *s, model_request *out) {
    const char *p = s;
    while (*p) {
        const char *end = strchr(p, ',');
        if (!end) end = p + strlen(p);
        const char *a = p, *b = end;
        while (a < b && (*a == ' ' || *a == '\t')) a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t')) b--;
        if (b > a) {
            if (out->nmodels == MODEL_MAX_MODELS)
                return req_fail(c, "metadata.annotations[\"" ANN_MODELS "\"]: more than %d models", MODEL_MAX_MODELS);
            if ((size_t)(b - a) >= sizeof out->models[0])
                return req_fail(c, "metadata.annotations[\"" ANN_MODELS "\"]: model \"%.*s...\" is longer than %d characters",
                                40, a, (int)sizeof out->models[0] - 1);
            snprintf(out->models[out->nmodels++], sizeof out->models[0], "%.*s", (int)(b - a), a);
        }
        p = *end ? end + 1 : end;
    }
    return 0;
}

static int req_isolation(req_ctx *c, const char *s, model_isolation *iso) {
    static const struct { const char *name; model_isolation iso; } names[] = {
        {"mig", MODEL_ISO_MIG}, {"mps", MODEL_ISO_MPS}, {"timeslice", MODEL_ISO_TIMESLICE}, {"any", MODEL_ISO_ANY}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(s, names[i].name) == 0) {
            *iso = names[i].iso;
            return 0;
        }
    }
    return req_fail(c, "metadata.annotations[\"" ANN_ISOLATION "\"]: \"%.64s\" is not one of mig, mps, timeslice, any", s);
}

static int req_topology(req_ctx *c, const char *s, uint8_t *out) {
    static const struct { const char *name; model_align align; } names[] = {
        {"nvlink", MODEL_ALIGN_NVLINK}, {"numa", MODEL_ALIGN_NUMA}, {"any", MODEL_ALIGN_UNKNOWN}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(s, names[i].name) == 0) {
            *out = (uint8_t)names[i].align;
            return 0;
        }
    }
    return req_fail(c, "metadata.annotations[\"" ANN_TOPOLOGY "\"]: \"%.64s\" is not one of nvlink, numa, any", s);
}

/* nvidia.com/mig-<profile> -> the catalog's canonical profile name. */
static int req_mig_profile(req_ctx *c, const char *resource, char *canon, size_t len, bool *replica) {
    char buf[96];
    snprintf(buf, sizeof buf, "%s", resource + strlen(RES_MIG_PREFIX));
    const char *name = buf;
    /* renameByDefault advertises a shared instance's replicas as <name>.shared (the device
     * plugin's DefaultSharedResourceNameSuffix, api/config/v1/consts.go); no profile name
     * ends that way, so the suffix is unambiguous. */
    size_t bl = strlen(buf);
    *replica = bl > 7 && !strcmp(buf + bl - 7, ".shared");
    if (*replica) buf[bl - 7] = 0;
    const char *p = name;
    while (*p >= '0' && *p <= '9') p++;
    if (p > name && p[0] == 'c' && p[1] == '.')
        return req_fail(c, "%s: compute-instance profiles are not supported; ask for the GPU-instance profile "
                        "(e.g. nvidia.com/mig-%s)", resource, p + 2);
    const model_catalog *cat = model_catalog_default();
    for (int i = 0; i < model_catalog_count(cat); i++) {
        const model_gpu_product *prod = model_catalog_at(cat, i);
        int idx = model_product_profile_index(prod, name);
        if (idx >= 0) {
            snprintf(canon, len, "%s", prod->profiles[idx].name);
            return 0;
        }
    }
    return req_fail(c, "%s: unknown MIG profile \"%s\" (no GPU in the catalog offers it)", resource, name);
}

static int req_max_catalog_memory(void) {
    const model_catalog *cat = model_catalog_default();
    int max = 0;
    for (int i = 0; i < model_catalog_count(cat); i++) {
        const model_gpu_product *p = model_catalog_at(cat, i);
        if (p->memory_mib > max) max = p->memory_mib;
    }
    return max;
}

/* Which GPU kind the resources and annotations add up to; rejects the combinations
 * that cannot mean one thing. */
static int req_reconcile(req_ctx *c, const int64_t eff[RES_N], const char *frac_ann, const char *frac_val,
                         const char *kai_mem, model_request *out) {
    int64_t gpu = eff[RES_GPU], shared = eff[RES_SHARED], gpumem = eff[RES_GPUMEM];
    int64_t pct = eff[RES_GPUMEM_PCT], cores = eff[RES_GPUCORES], mig = eff[RES_MIG];
    bool hami = gpumem || pct || cores;
    const char *count_field = req_res_names[RES_GPU];
    int64_t count = 0, max_count = MODEL_MAX_GPUS;

    if (mig) {
        const char *other = gpu ? req_res_names[RES_GPU]
                          : shared ? req_res_names[RES_SHARED]
                          : gpumem ? req_res_names[RES_GPUMEM]
                          : pct ? req_res_names[RES_GPUMEM_PCT]
                          : cores ? req_res_names[RES_GPUCORES]
                          : frac_ann ? frac_ann
                          : kai_mem ? ANN_KAI_MEMORY : NULL;
        if (other)
            return req_fail(c, "%s cannot be combined with %s: a MIG profile fixes memory and compute",
                            c->mig_resource, other);
        if (req_mig_profile(c, c->mig_resource, out->mig_profile, sizeof out->mig_profile, &out->mig_replica) != 0)
            return -1;
        out->kind = MODEL_REQ_MIG;
        count = mig;
        count_field = c->mig_resource;
        /* Instances of several GPUs can go to one pod. */
        max_count = MODEL_MAX_GPUS * MODEL_MIG_MAX_INSTANCES;
    } else if (shared && gpu) {
        return req_fail(c, "%s cannot be combined with %s: ask for whole GPUs or for replicas, not both",
                        req_res_names[RES_SHARED], req_res_names[RES_GPU]);
    } else if (frac_ann || kai_mem) {
        const char *ann = frac_ann ? frac_ann : ANN_KAI_MEMORY;
        if (gpu)
            return req_fail(c, "%s cannot be combined with %s: the annotation already asks for a share of one GPU",
                            ann, req_res_names[RES_GPU]);
        if (shared)
            return req_fail(c, "%s cannot be combined with %s: the annotation already asks for a share of one GPU",
                            ann, req_res_names[RES_SHARED]);
        if (frac_ann && kai_mem)
            return req_fail(c, "%s and " ANN_KAI_MEMORY " both say how much of the GPU to take; give one of them",
                            frac_ann);
        if (gpumem || pct || (frac_ann && cores))
            return req_fail(c, "%s and %s both say how much of the GPU to take; give one of them", ann,
                            gpumem ? req_res_names[RES_GPUMEM]
                            : pct ? req_res_names[RES_GPUMEM_PCT] : req_res_names[RES_GPUCORES]);
        out->kind = MODEL_REQ_FRACTION;
        count = 1;
        if (frac_ann) {
            int permille;
            if (!req_parse_fraction(frac_val, &permille)) {
                /* "25%": a percentage where a share is meant; say which share */
                char hint[64] = "", *end;
                double percent = strtod(frac_val, &end);
                if (end != frac_val && !strcmp(end, "%") && percent > 0 && percent <= 100)
                    snprintf(hint, sizeof hint, " (a share, not a percentage: write %g)", percent / 100);
                return req_fail(c, "metadata.annotations[\"%s\"]: \"%.64s\" is not a share of one GPU in (0, 1]%s",
                                frac_ann, frac_val, hint);
            }
            out->memory_permille = out->compute_permille = (int16_t)permille;
        } else {
            if (!req_parse_mib(kai_mem, &gpumem)) {
                char hint[96];
                req_mib_hint(kai_mem, ANN_KAI_MEMORY, hint, sizeof hint);
                return req_fail(c, "metadata.annotations[\"" ANN_KAI_MEMORY "\"]: \"%.64s\" is not a whole number of MiB greater than 0%s",
                                kai_mem, hint);
            }
        }
    } else if (hami) {
        if (gpumem && pct)
            return req_fail(c, "%s and %s both give the GPU memory; give one of them", req_res_names[RES_GPUMEM],
                            req_res_names[RES_GPUMEM_PCT]);
        if (shared) {
            out->kind = MODEL_REQ_SHARED;
            count = shared;
            count_field = req_res_names[RES_SHARED];
        } else {
            /* HAMi: nvidia.com/gpu: N with a share means N GPUs, each giving that share. */
            out->kind = MODEL_REQ_FRACTION;
            count = gpu ? gpu : 1;
        }
    } else if (shared) {
        out->kind = MODEL_REQ_SHARED;
        count = shared;
        count_field = req_res_names[RES_SHARED];
    } else if (gpu) {
        out->kind = MODEL_REQ_WHOLE;
        count = gpu;
    }

    if (count > max_count)
        return req_fail(c, "%s: %lld is more than any node can give one pod (at most %lld)", count_field,
                        (long long)count, (long long)max_count);
    out->count = (int)count;
    if (pct > 100)
        return req_fail(c, "%s: %lld is not a percentage in 1..100", req_res_names[RES_GPUMEM_PCT], (long long)pct);
    if (cores > 100)
        return req_fail(c, "%s: %lld is not a percentage in 1..100", req_res_names[RES_GPUCORES], (long long)cores);
    if (pct) out->memory_permille = (int16_t)(10 * pct);
    if (cores) out->compute_permille = (int16_t)(10 * cores);
    if (gpumem) {
        int max = req_max_catalog_memory();
        if (gpumem > max) {
            /* a count of bytes written bare: say what it is in MiB */
            char hint[96] = "";
            int64_t as_mib = gpumem / (1 << 20) + (gpumem % (1 << 20) != 0);
            if (!c->gpumem_bytes && gpumem >= (1 << 20) && as_mib <= max)
                snprintf(hint, sizeof hint, "; it counts MiB: for %lld bytes write %lld", (long long)gpumem,
                         (long long)as_mib);
            return req_fail(c, "%s: %lld MiB per GPU is larger than any GPU holds (largest: %d MiB)%s",
                            kai_mem ? "metadata.annotations[\"" ANN_KAI_MEMORY "\"]" : req_res_names[RES_GPUMEM],
                            (long long)gpumem, max, hint);
        }
        out->memory_mib = (int32_t)gpumem;
    }

    if (out->isolation == MODEL_ISO_MIG && out->kind == MODEL_REQ_SHARED)
        return req_fail(c, ANN_ISOLATION ": mig cannot serve %s, which asks for time-slice/MPS replicas",
                        req_res_names[RES_SHARED]);
    /* timeslice/mps with nvidia.com/mig-<p> accept a replica of a shared instance (layered
     * sharing); mig with the .shared name cannot be served by a replica. */
    if (out->isolation == MODEL_ISO_MIG && out->kind == MODEL_REQ_MIG && out->mig_replica)
        return req_fail(c, ANN_ISOLATION ": mig cannot serve %s, which asks for a replica of a shared MIG instance",
                        c->mig_resource);
    return 0;
}

int model_request_from_pod(const cJSON *pod, model_request *out, char *err, size_t errlen) {
    req_ctx c = {.err = err, .errlen = errlen};
    memset(out, 0, sizeof *out);
    if (!cJSON_IsObject(pod)) return req_fail(&c, "pod: expected a Pod object");
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
    if (meta && !cJSON_IsNull(meta) && !cJSON_IsObject(meta)) return req_fail(&c, "metadata: expected an object");
    if (!cJSON_IsObject(spec)) return req_fail(&c, "spec: expected an object (is this a Pod?)");
    const cJSON *anns = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
    if (anns && !cJSON_IsNull(anns) && !cJSON_IsObject(anns))
        return req_fail(&c, "metadata.annotations: expected an object");

    const cJSON *prio = cJSON_GetObjectItemCaseSensitive(spec, "priority");
    if (prio && !cJSON_IsNull(prio)) {
        /* range before the cast: converting an out-of-range double is undefined */
        if (!cJSON_IsNumber(prio) || prio->valuedouble < INT32_MIN || prio->valuedouble > INT32_MAX ||
            prio->valuedouble != (double)(int32_t)prio->valuedouble)
            return req_fail(&c, "spec.priority: expected a 32-bit integer");
        out->priority = (int32_t)prio->valuedouble;
    }

    int64_t eff[RES_N];
    if (req_containers(&c, spec, eff) != 0) return -1;
    out->cpu_milli = eff[RES_CPU];
    /* bytes round up, as Quantity.Value() does */
    out->memory_bytes = eff[RES_MEMORY] / 1000 + (eff[RES_MEMORY] % 1000 != 0);

    req_uids uids;
    if (req_uids_of(&c, spec, &uids) != 0) return -1;
    out->run_as_uid = uids.unset || uids.differ ? MODEL_UID_UNKNOWN : uids.uid;

    const char *tfrac, *kfrac, *kmem, *models, *iso, *topo, *compute;
    if (req_annotation(&c, anns, ANN_FRACTION, &tfrac) || req_annotation(&c, anns, ANN_KAI_FRACTION, &kfrac) ||
        req_annotation(&c, anns, ANN_KAI_MEMORY, &kmem) || req_annotation(&c, anns, ANN_MODELS, &models) ||
        req_annotation(&c, anns, ANN_ISOLATION, &iso) || req_annotation(&c, anns, ANN_TOPOLOGY, &topo) ||
        req_annotation(&c, anns, ANN_COMPUTE, &compute))
        return -1;
    if (tfrac && kfrac)
        return req_fail(&c, ANN_FRACTION " and " ANN_KAI_FRACTION " both give the share of the GPU; give one of them");
    if (models && req_models(&c, models, out) != 0) return -1;
    if (iso && req_isolation(&c, iso, &out->isolation) != 0) return -1;
    if (topo && req_topology(&c, topo, &out->topology) != 0) return -1;
    if (compute && req_compute_sharing(&c, compute, &out->compute_sharing) != 0) return -1;
    if (req_reconcile(&c, eff, tfrac ? ANN_FRACTION : kfrac ? ANN_KAI_FRACTION : NULL, tfrac ? tfrac : kfrac, kmem,
                      out) != 0)
        return -1;
    if (compute && req_compute_rules(&c, compute, out) != 0) return -1;
    if (out->compute_sharing == MODEL_COMPUTE_MPS) return req_mps_uid(&c, &uids);
    return 0;
}

int model_request_from_pod_json(const char *json, size_t len, model_request *out, char *err, size_t errlen) {
    req_ctx c = {.err = err, .errlen = errlen};
    memset(out, 0, sizeof *out);
    cJSON *pod = json ? cJSON_ParseWithLength(json, len) : NULL;
    if (!pod) return req_fail(&c, "pod: malformed JSON");
    int rc = model_request_from_pod(pod, out, err, errlen);
    cJSON_Delete(pod);
    return rc;
}

bool model_request_wants_gpu(const model_request *r) { return r->kind != MODEL_REQ_NONE; }

static void req_appendf(char *buf, size_t len, size_t *off, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void req_appendf(char *buf, size_t len, size_t *off, const char *fmt, ...) {
    if (*off >= len) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *off, len - *off, fmt, ap);
    va_end(ap);
    if (n > 0) *off += (size_t)n;
}

/* 305 -> "30.5 percent", 300 -> "30 percent". Never a '%' sign: this text reaches kube-scheduler in filter
 * reasons, and kube-scheduler records its FailedScheduling Event with the reason as a Go format string, where
 * "25% memory" would read "25%!m(MISSING)emory". */
static void req_append_permille(char *buf, size_t len, size_t *off, int permille) {
    if (permille % 10) req_appendf(buf, len, off, "%d.%d percent", permille / 10, permille % 10);
    else req_appendf(buf, len, off, "%d percent", permille / 10);
}

void model_request_format(const model_request *r, char *buf, size_t len) {
    size_t off = 0;
    if (!buf || !len) return;
    buf[0] = 0;
    switch (r->kind) {
    case MODEL_REQ_NONE: req_appendf(buf, len, &off, "no GPU"); break;
    case MODEL_REQ_WHOLE: req_appendf(buf, len, &off, "%d x whole GPU", r->count); break;
    case MODEL_REQ_SHARED: req_appendf(buf, len, &off, "%d x replica", r->count); break;
    case MODEL_REQ_FRACTION: req_appendf(buf, len, &off, "%d x fraction", r->count); break;
    case MODEL_REQ_MIG:
        req_appendf(buf, len, &off, "%d x mig %s%s", r->count, r->mig_profile, r->mig_replica ? " replica" : "");
        break;
    }
    if (r->memory_mib || r->memory_permille || r->compute_permille) {
        const char *sep = " (";
        if (r->memory_mib) {
            req_appendf(buf, len, &off, "%s%d MiB", sep, (int)r->memory_mib);
            sep = ", ";
        }
        if (r->memory_permille) {
            req_appendf(buf, len, &off, "%s", sep);
            req_append_permille(buf, len, &off, r->memory_permille);
            req_appendf(buf, len, &off, " memory");
            sep = ", ";
        }
        if (r->compute_permille) {
            req_appendf(buf, len, &off, "%s", sep);
            req_append_permille(buf, len, &off, r->compute_permille);
            req_appendf(buf, len, &off, " SMs");
        }
        req_appendf(buf, len, &off, ")");
    }
    for (int i = 0; i < r->nmodels; i++) req_appendf(buf, len, &off, "%s%s", i ? "," : " models=", r->models[i]);
    if (r->isolation != MODEL_ISO_DEFAULT)
        req_appendf(buf, len, &off, " isolation=%s", model_isolation_name(r->isolation));
    if (r->compute_sharing == MODEL_COMPUTE_MPS) req_appendf(buf, len, &off, " mps uid=%lld", (long long)r->run_as_uid);
    for (int i = 0; i < r->dra_nconstraints && i < MODEL_DRA_MAX_CONSTRAINTS; i++)
        req_appendf(buf, len, &off, " %s=%s", r->dra_constraint[i].distinct ? "distinctAttribute" : "matchAttribute",
                    r->dra_constraint[i].attr);
    if (r->topology != MODEL_ALIGN_UNKNOWN)
        req_appendf(buf, len, &off, " topology=%s", model_align_name((model_align)r->topology));
}

void model_request_for_reservation_delivery(model_request *r) {
    if (r->kind == MODEL_REQ_FRACTION) r->no_mps = true;
}

const char *model_isolation_name(model_isolation iso) {
    switch (iso) {
    case MODEL_ISO_DEFAULT: return "default";
    case MODEL_ISO_ANY: return "any";
    case MODEL_ISO_MIG: return "mig";
    case MODEL_ISO_MPS: return "mps";
    case MODEL_ISO_TIMESLICE: return "timeslice";
    }
    return "unknown";
}

bool model_request_same(const model_request *a, const model_request *b) {
    if (a->kind != b->kind || a->count != b->count || a->memory_mib != b->memory_mib ||
        a->memory_permille != b->memory_permille || a->compute_permille != b->compute_permille ||
        a->isolation != b->isolation || a->topology != b->topology || a->compute_sharing != b->compute_sharing ||
        a->run_as_uid != b->run_as_uid || a->nmodels != b->nmodels || a->cpu_milli != b->cpu_milli ||
        a->memory_bytes != b->memory_bytes || a->priority != b->priority || a->no_mps != b->no_mps ||
        a->mig_replica != b->mig_replica || a->via_dra != b->via_dra || a->dra_min_memory_mib != b->dra_min_memory_mib ||
        a->dra_nconstraints != b->dra_nconstraints || strncmp(a->mig_profile, b->mig_profile, sizeof a->mig_profile))
        return false;
    for (int i = 0; i < a->dra_nconstraints && i < MODEL_DRA_MAX_CONSTRAINTS; i++)
        if (a->dra_constraint[i].distinct != b->dra_constraint[i].distinct ||
            strncmp(a->dra_constraint[i].attr, b->dra_constraint[i].attr, sizeof a->dra_constraint[i].attr))
            return false;
    for (int i = 0; i < a->nmodels && i < MODEL_MAX_MODELS; i++)
        if (strncmp(a->models[i], b->models[i], sizeof a->models[i])) return false;
    return true;
}
