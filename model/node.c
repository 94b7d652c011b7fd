/* node.c -- building a node: by hand, by cloning, or from a Kubernetes Node object.
 *
 * From a Node, GPU feature discovery labels say what hardware there is, status.allocatable
 * says what the device plugin hands out, and the optional tessera.io/gpus annotation pins
 * down what neither can (uuids, NUMA, NVLink, exact MIG placement). Anything that does not
 * add up becomes node->reason: the node then takes no GPU pods, and a person can see why.
 */
#include "model/node.h"

#include <assert.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "model/mig.h"
#include "model/quantity.h"
#include "model/json.h"
#include "model/link.h"

/* ------------------------------------------------------------ by hand ---- */

/* Zeroed and aligned as model_gpu asks (64 bytes), which malloc does not promise. cap MODEL_MAX_GPUS: the
 * whole struct; less: room for cap GPUs and no local_product. */
static model_node *node_alloc(int cap) {
    size_t size = cap >= MODEL_MAX_GPUS ? sizeof(model_node) : offsetof(model_node, gpus) + (size_t)cap * sizeof(model_gpu);
    size = (size + 63) & ~(size_t)63;
    model_node *n = aligned_alloc(64, size);
    if (!n) return NULL;
    memset(n, 0, size);
    n->gpus_cap = cap >= MODEL_MAX_GPUS ? MODEL_MAX_GPUS : cap;
    return n;
}

model_node *model_node_new(const char *name) {
    if (!name) return NULL;
    model_node *n = node_alloc(MODEL_MAX_GPUS);
    if (!n) return NULL;
    n->name = strdup(name);
    if (!n->name) {
        free(n);
        return NULL;
    }
    return n;
}

model_gpu *model_node_add_gpu(model_node *n, const model_gpu_product *p, model_gpu_mode mode, int replicas,
                              int memory_mib) {
    if (!n || !p || n->ngpus >= n->gpus_cap || memory_mib < 0) return NULL;
    switch (mode) {
    case MODEL_GPU_WHOLE:
        if (replicas > 1) return NULL;
        replicas = 1;
        break;
    case MODEL_GPU_MIG:
        if (replicas > 1 || !p->mig_capable || p->nprofiles == 0) return NULL;
        replicas = 1;
        break;
    case MODEL_GPU_TIMESLICE:
        if (replicas < 2 || replicas > MODEL_MAX_REPLICAS) return NULL;
        break;
    case MODEL_GPU_MPS:
        if (replicas < 2 || replicas > MODEL_MAX_REPLICAS || replicas > p->mps_max_clients) return NULL;
        break;
    default:
        return NULL;
    }
    if (memory_mib == 0) memory_mib = p->memory_mib;
    if (memory_mib <= 0) return NULL; /* a GPU without a known size cannot be accounted */

    model_gpu *g = &n->gpus[n->ngpus];
    memset(g, 0, sizeof *g);
    g->index = n->ngpus;
    g->product = p;
    g->mode = mode;
    g->memory_mib = memory_mib;
    g->replicas = replicas;
    if (mode == MODEL_GPU_MPS) {
        /* What the device plugin's MPS daemon sets, integer arithmetic included. */
        g->mps_memory_limit_mib = memory_mib / replicas;
        g->mps_thread_permille = 10 * (100 / replicas);
    }
    g->numa_node = -1;
    g->exclusive_holder = -1;
    g->mps_uid = -1;
    for (int i = 0; i < MODEL_MIG_MAX_INSTANCES; i++) {
        g->inst[i].profile = -1;
        g->inst[i].start = -1;
        g->inst[i].holder = -1;
        g->inst[i].replicas = 1;
    }
    n->ngpus++;
    return g;
}

static void gpu_layout(const model_gpu *g, model_mig_layout *l) {
    memset(l, 0, sizeof *l);
    l->n = g->ninst;
    for (int i = 0; i < g->ninst; i++) {
        l->inst[i].profile = g->inst[i].profile;
        l->inst[i].start = g->inst[i].start;
    }
}

int model_gpu_add_mig_instance(model_gpu *g, int profile, int start, char *err, size_t errlen) {
    if (!g || !g->product) {
        if (err) snprintf(err, errlen, "no GPU");
        return -1;
    }
    if (g->mode != MODEL_GPU_MIG) {
        if (err) snprintf(err, errlen, "GPU %d is in %s mode, not MIG", g->index, model_gpu_mode_name(g->mode));
        return -1;
    }
    if (g->ninst >= MODEL_MIG_MAX_INSTANCES) {
        if (err) snprintf(err, errlen, "GPU %d already holds %d MIG instances", g->index, g->ninst);
        return -1;
    }
    model_mig_layout l;
    gpu_layout(g, &l);
    char why[160];
    if (!model_mig_can_add(g->product, &l, profile, start, why, sizeof why)) {
        if (err) snprintf(err, errlen, "GPU %d: %s", g->index, why);
        return -1;
    }
    model_mig_instance *in = &g->inst[g->ninst++];
    in->profile = (int8_t)profile;
    in->start = (int8_t)start;
    in->on_demand = false;
    in->holder = -1;
    in->replicas = g->mig_replicas[profile] > 1 ? g->mig_replicas[profile] : 1;
    in->rep_used = 0;
    in->mem_used = 0;
    in->comp_used = 0;
    return 0;
}

int model_gpu_share_mig_profile(model_gpu *g, int profile, model_gpu_mode how, int replicas, char *err,
                                size_t errlen) {
    if (!g || !g->product || g->mode != MODEL_GPU_MIG) {
        if (err) snprintf(err, errlen, "replicas of MIG instances need a MIG-enabled GPU");
        return -1;
    }
    if (profile < 0 || profile >= g->product->nprofiles) {
        if (err) snprintf(err, errlen, "GPU %d: %s has no MIG profile #%d", g->index, g->product->product, profile);
        return -1;
    }
    if (replicas < 1 || replicas > MODEL_MIG_MAX_REPLICAS) {
        if (err) snprintf(err, errlen, "GPU %d: %d replicas per MIG instance; 1..%d are supported", g->index, replicas,
                          MODEL_MIG_MAX_REPLICAS);
        return -1;
    }
    if (replicas > 1 && how != MODEL_GPU_TIMESLICE && how != MODEL_GPU_MPS) {
        if (err) snprintf(err, errlen, "GPU %d: MIG instances are shared by time-slicing or MPS", g->index);
        return -1;
    }
    if (replicas > 1 && g->mig_sharing != MODEL_GPU_WHOLE && g->mig_sharing != how) {
        if (err) snprintf(err, errlen, "GPU %d: its MIG instances are already shared by %s (one method per GPU)",
                          g->index, model_gpu_mode_name(g->mig_sharing));
        return -1;
    }
    for (int k = 0; k < g->ninst; k++)
        if (g->inst[k].profile == profile && (g->inst[k].holder >= 0 || g->inst[k].rep_used)) {
            if (err) snprintf(err, errlen, "GPU %d: the %s instance at slot %d is in use", g->index,
                              g->product->profiles[profile].name, g->inst[k].start);
            return -1;
        }
    g->mig_replicas[profile] = (uint8_t)replicas;
    if (replicas > 1) g->mig_sharing = how;
    for (int k = 0; k < g->ninst; k++)
        if (g->inst[k].profile == profile && !g->inst[k].on_demand) g->inst[k].replicas = (uint8_t)replicas;
    bool any = false;
    for (int pi = 0; pi < MODEL_MAX_PROFILES; pi++) any |= g->mig_replicas[pi] > 1;
    if (!any) g->mig_sharing = MODEL_GPU_WHOLE;
    return 0;
}

bool model_gpu_mig_layered(const model_gpu *g) {
    if (!g || g->mode != MODEL_GPU_MIG) return false;
    for (int k = 0; k < g->ninst; k++)
        if (g->inst[k].replicas > 1) return true;
    return false;
}

bool model_node_mig_layered(const model_node *n) {
    for (int i = 0; n && i < n->ngpus; i++)
        if (model_gpu_mig_layered(&n->gpus[i])) return true;
    return false;
}

void model_node_free(model_node *n) {
    if (!n) return;
    free(n->name);
    free(n->allocs);
    free(n->dra_attrs);
    free(n->dra_links);
    free(n->topo);
    free(n);
}

static model_node *node_copy(const model_node *n, int cap) {
    if (!n) return NULL;
    model_node *c = node_alloc(cap);
    if (!c) return NULL;
    memcpy(c, n, offsetof(model_node, gpus) + (size_t)n->ngpus * sizeof(model_gpu));
    c->gpus_cap = cap;
    if (cap == MODEL_MAX_GPUS && n->gpus_cap == MODEL_MAX_GPUS) c->local_product = n->local_product;
    c->name = NULL;
    c->allocs = NULL;
    c->dra_attrs = NULL;
    c->dra_links = NULL;
    c->topo = NULL;
    c->name = strdup(n->name ? n->name : "");
    if (!c->name) goto fail;
    if (n->dra_attrs && n->dra_attrs_len > 0) {
        if (!(c->dra_attrs = malloc(n->dra_attrs_len))) goto fail;
        memcpy(c->dra_attrs, n->dra_attrs, n->dra_attrs_len);
    }
    if (n->dra_links) {
        if (!(c->dra_links = malloc(sizeof *c->dra_links))) goto fail;
        memcpy(c->dra_links, n->dra_links, sizeof *c->dra_links);
    }
    if (n->allocs && n->allocs_cap > 0) {
        c->allocs = malloc((size_t)n->allocs_cap * sizeof *c->allocs);
        if (!c->allocs) goto fail;
        memcpy(c->allocs, n->allocs, (size_t)n->allocs_cap * sizeof *c->allocs);
    } else {
        c->allocs_cap = 0;
    }
    if (n->topo) {
        c->topo = malloc(sizeof *c->topo);
        if (!c->topo) goto fail;
        memcpy(c->topo, n->topo, sizeof *c->topo);
    }
    /* The clone must not lean on the source's storage, which may be freed first. */
    for (int i = 0; i < c->ngpus; i++)
        if (c->gpus[i].product == &n->local_product) c->gpus[i].product = &c->local_product;
    return c;
fail:
    model_node_free(c);
    return NULL;
}

model_node *model_node_clone(const model_node *n) { return node_copy(n, MODEL_MAX_GPUS); }

model_node *model_node_compact(const model_node *n) {
    if (!n) return NULL;
    bool local = false;   /* an unknown GPU model's facts live in the node: keep the whole struct then */
    for (int i = 0; i < n->ngpus; i++) local |= n->gpus[i].product == &n->local_product;
    return node_copy(n, local ? MODEL_MAX_GPUS : n->ngpus);
}

void model_node_trim(model_node *n) {
    if (!n || n->nlive > 0) return;
    free(n->allocs);
    n->allocs = NULL;
    n->nallocs = n->allocs_cap = 0;
}

/* ------------------------------------------------------ from a Node ---- */

static int node_fail(model_node *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The first contradiction found is the one reported: later ones are often its echo. */
static int node_fail(model_node *n, const char *fmt, ...) {
    if (!n->reason[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(n->reason, sizeof n->reason, fmt, ap);
        va_end(ap);
    }
    return -1;
}

#define LBL "nvidia.com/"
#define ANN_GPUS "tessera.io/gpus"

/* One GPU as the tessera.io/gpus annotation describes it; profiles stay names until the
 * product is known. */
typedef struct ann_gpu {
    char uuid[48];
    char product[MODEL_NAME_LEN];
    int memory_mib;           /* 0: not given */
    int numa;                 /* -1: not given */
    uint32_t nvlink;
    bool has_nvlink;          /* "nvlink" given (an empty list says: no NVLink) */
    bool has_topo;            /* "topo" given: link[j] to GPU j (nvidia-smi's row) */
    uint8_t link[MODEL_MAX_GPUS], nvlinks[MODEL_MAX_GPUS];
    char pci[32];             /* PCI bus id, "" when not given */
    bool has_mig;             /* the GPU is MIG-enabled (even with an empty list) */
    int nmig;
    struct { char profile[32]; int start; } mig[MODEL_MIG_MAX_INSTANCES];
    int mig_dynamic;          /* -1 not given, else 0/1 */
} ann_gpu;

typedef struct ann_gpus {
    bool present;
    int n;
    ann_gpu g[MODEL_MAX_GPUS];
} ann_gpus;

/* Everything read from the Node before any GPU is built. */
typedef struct node_in {
    const model_catalog *cat;
    const cJSON *labels, *annotations, *alloc;
    const char *product_label;
    model_product_label pl;
    const model_gpu_product *product;  /* catalog entry or &n->local_product */
    const char *mig_strategy;          /* label value or NULL */
    const char *sharing_strategy;      /* label value or NULL */
    int64_t count;                     /* nvidia.com/gpu.count */
    int64_t replicas;                  /* nvidia.com/gpu.replicas, 1 if absent */
    int64_t memory_label;              /* nvidia.com/gpu.memory in MiB, 0 if absent */
    int64_t adv_gpu, adv_shared;       /* status.allocatable nvidia.com/gpu, nvidia.com/gpu.shared */
    int64_t adv_mig_total;
    int nmigres;
    /* nvidia.com/mig-<name>[.shared]: name as the resource spells it ("1g.10gb.me"), renamed when
     * advertised with the .shared suffix (renameByDefault); replicas from the labels */
    struct { char name[40]; int64_t count; bool renamed; int replicas; } migres[MODEL_MAX_PROFILES * 2];
    ann_gpus ann;
} node_in;

static bool json_int(const cJSON *v, int64_t lo, int64_t hi, int64_t *out) {
    if (!cJSON_IsNumber(v)) return false;
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d) || d < (double)lo || d > (double)hi) return false;
    *out = (int64_t)d;
    return true;
}

static const char *label(const node_in *in, const char *key) {
    const cJSON *v = in->labels ? cJSON_GetObjectItemCaseSensitive(in->labels, key) : NULL;
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Label values are decimal integers written by GFD; anything else is a broken label. */
static int label_int(model_node *n, const node_in *in, const char *key, int64_t dflt, int64_t *out) {
    const char *s = label(in, key);
    *out = dflt;
    if (!s) return 0;
    size_t len = strlen(s);
    if (len == 0 || strspn(s, "0123456789") != len)
        return node_fail(n, "label %s=\"%s\" is not a whole number >= 0", key, s);
    if (len > 15) return node_fail(n, "label %s=\"%s\" is out of range", key, s);
    *out = strtoll(s, NULL, 10);
    return 0;
}

static int alloc_int(model_node *n, const node_in *in, const cJSON *v, int64_t *out) {
    char err[128];
    if (!cJSON_IsString(v)) return node_fail(n, "status.allocatable %s is not a quantity string", v->string);
    if (model_quantity_parse_int(v->valuestring, out, err, sizeof err) != 0)
        return node_fail(n, "status.allocatable %s=\"%s\": %s", v->string, v->valuestring, err);
    return 0;
}

static bool has_suffix(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* An object, or absent/null; anything else is a malformed Node. */
static int get_object(model_node *n, const cJSON *parent, const char *key, const char *what, const cJSON **out) {
    const cJSON *v = parent ? cJSON_GetObjectItemCaseSensitive(parent, key) : NULL;
    *out = NULL;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsObject(v)) return node_fail(n, "%s is not an object", what);
    *out = v;
    return 0;
}

static int read_host(model_node *n, const node_in *in) {
    const cJSON *v;
    char err[128];
    int64_t milli;
    if ((v = in->alloc ? cJSON_GetObjectItemCaseSensitive(in->alloc, "cpu") : NULL)) {
        if (!cJSON_IsString(v) || model_quantity_parse_milli(v->valuestring, &milli, err, sizeof err) != 0 || milli < 0)
            return node_fail(n, "status.allocatable cpu is not a valid quantity");
        n->cpu_milli = milli;
    }
    if ((v = in->alloc ? cJSON_GetObjectItemCaseSensitive(in->alloc, "memory") : NULL)) {
        if (!cJSON_IsString(v) || model_quantity_parse_milli(v->valuestring, &milli, err, sizeof err) != 0 || milli < 0)
            return node_fail(n, "status.allocatable memory is not a valid quantity");
        n->memory_mib = milli / 1000 / (1024 * 1024);
    }
    return 0;
}

/* nvidia.com/gpu, nvidia.com/gpu.shared and every nvidia.com/mig-<p>. */
static int read_allocatable(model_node *n, node_in *in) {
    if (!in->alloc) return 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, in->alloc) {
        const char *k = v->string;
        if (!k || strncmp(k, LBL, strlen(LBL)) != 0) continue;
        int64_t val;
        if (strcmp(k, LBL "gpu") == 0) {
            if (alloc_int(n, in, v, &in->adv_gpu)) return -1;
        } else if (strcmp(k, LBL "gpu.shared") == 0) {
            if (alloc_int(n, in, v, &in->adv_shared)) return -1;
        } else if (strncmp(k, LBL "mig-", strlen(LBL "mig-")) == 0) {
            if (alloc_int(n, in, v, &val)) return -1;
            if (val == 0) continue;
            if (in->nmigres == (int)(sizeof in->migres / sizeof in->migres[0]))
                return node_fail(n, "status.allocatable lists too many nvidia.com/mig-* resources");
            const char *name = k + strlen(LBL "mig-");
            bool renamed = has_suffix(name, ".shared");
            size_t nl = strlen(name) - (renamed ? strlen(".shared") : 0);
            if (nl == 0 || nl >= sizeof in->migres[0].name)
                return node_fail(n, "status.allocatable %s is not a MIG resource name tessera knows", k);
            for (int i = 0; i < in->nmigres; i++)
                if (strlen(in->migres[i].name) == nl && !strncmp(in->migres[i].name, name, nl))
                    return node_fail(n, "status.allocatable advertises both %smig-%s and %smig-%s.shared: a profile's "
                                     "instances are either all shared or all plain", LBL, in->migres[i].name, LBL,
                                     in->migres[i].name);
            memcpy(in->migres[in->nmigres].name, name, nl);
            in->migres[in->nmigres].name[nl] = 0;
            in->migres[in->nmigres].count = val;
            in->migres[in->nmigres].renamed = renamed;
            in->migres[in->nmigres].replicas = 1;
            in->nmigres++;
            in->adv_mig_total += val;
        }
    }
    return 0;
}

/* ------------------------------------------------ tessera.io/gpus ---- */

static int ann_mig(model_node *n, ann_gpu *ag, int i, const cJSON *arr) {
    if (!cJSON_IsArray(arr)) return node_fail(n, ANN_GPUS "[%d].mig is not an array", i);
    if (cJSON_GetArraySize(arr) > MODEL_MIG_MAX_INSTANCES)
        return node_fail(n, ANN_GPUS "[%d].mig lists more than %d instances", i, MODEL_MIG_MAX_INSTANCES);
    ag->has_mig = true;
    const cJSON *m;
    cJSON_ArrayForEach(m, arr) {
        int k = ag->nmig;
        const cJSON *prof = cJSON_IsObject(m) ? cJSON_GetObjectItemCaseSensitive(m, "profile") : NULL;
        const cJSON *start = cJSON_IsObject(m) ? cJSON_GetObjectItemCaseSensitive(m, "start") : NULL;
        int64_t s;
        if (!cJSON_IsString(prof) || strlen(prof->valuestring) >= sizeof ag->mig[k].profile)
            return node_fail(n, ANN_GPUS "[%d].mig[%d] needs a \"profile\" string", i, k);
        if (!json_int(start, 0, MODEL_MIG_MAX_SLICES - 1, &s))
            return node_fail(n, ANN_GPUS "[%d].mig[%d] needs a \"start\" memory slice 0..%d", i, k,
                             MODEL_MIG_MAX_SLICES - 1);
        if (cJSON_GetArraySize(m) != 2)
            return node_fail(n, ANN_GPUS "[%d].mig[%d] has keys other than \"profile\" and \"start\"", i, k);
        snprintf(ag->mig[k].profile, sizeof ag->mig[k].profile, "%s", prof->valuestring);
        ag->mig[k].start = (int)s;
        ag->nmig++;
    }
    return 0;
}

/* "00000000:07:00.0" (NVML's busId: 8 hex digits of domain) or the 4-digit domain sysfs and
 * lspci print; at most 31 characters, as NVML's buffer. */
static bool pci_bus_id_valid(const char *s) {
    size_t len = strlen(s), dom = len >= 8 && s[8] == ':' ? 8 : 4;
    if (len != dom + 8) return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        bool sep = i == dom || i == dom + 3 ? c == ':' : i == dom + 6 ? c == '.' : false;
        bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
        if (i == dom || i == dom + 3 || i == dom + 6 ? !sep : !hex) return false;
    }
    return s[dom + 7] <= '7';   /* the function is 0..7 */
}

/* "topo": this GPU's row of `nvidia-smi topo -m`, one link per GPU of the node, "X" at its own
 * index and only there. Symmetry and agreement with "nvlink" are checked once every row is read. */
static int ann_topo(model_node *n, ann_gpu *ag, int i, int total, const cJSON *arr) {
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) != total)
        return node_fail(n, ANN_GPUS "[%d].topo must be an array of %d link names, one per GPU of the node", i, total);
    const cJSON *e;
    int j = 0;
    cJSON_ArrayForEach(e, arr) {
        model_link l;
        int nv;
        if (!cJSON_IsString(e) || !model_link_parse(e->valuestring, &l, &nv))
            return node_fail(n, ANN_GPUS "[%d].topo[%d] is not a link name (X, NV<n>, PIX, PXB, PHB, NODE, SYS)", i, j);
        if ((l == MODEL_LINK_UNKNOWN) != (j == i))
            return node_fail(n, ANN_GPUS "[%d].topo[%d] must be %s", i, j,
                             j == i ? "\"X\" (the GPU itself)" : "a link, not \"X\" (X marks the GPU itself)");
        ag->link[j] = (uint8_t)l;
        ag->nvlinks[j] = (uint8_t)nv;
        j++;
    }
    ag->has_topo = true;
    return 0;
}

static int ann_one(model_node *n, ann_gpu *ag, int i, int total, const cJSON *o) {
    if (!cJSON_IsObject(o)) return node_fail(n, ANN_GPUS "[%d] is not an object", i);
    ag->numa = -1;
    ag->mig_dynamic = -1;
    const cJSON *v;
    int64_t x;
    cJSON_ArrayForEach(v, o) {
        const char *k = v->string;
        if (strcmp(k, "index") == 0) {
            if (!json_int(v, i, i, &x))
                return node_fail(n, ANN_GPUS "[%d].index must be %d: GPUs are listed in device-index order", i, i);
        } else if (strcmp(k, "uuid") == 0) {
            if (!cJSON_IsString(v) || strlen(v->valuestring) >= sizeof ag->uuid)
                return node_fail(n, ANN_GPUS "[%d].uuid must be a string of at most %d characters", i,
                                 (int)sizeof ag->uuid - 1);
            snprintf(ag->uuid, sizeof ag->uuid, "%s", v->valuestring);
        } else if (strcmp(k, "product") == 0) {
            if (!cJSON_IsString(v) || strlen(v->valuestring) >= sizeof ag->product)
                return node_fail(n, ANN_GPUS "[%d].product must be a GFD product string", i);
            snprintf(ag->product, sizeof ag->product, "%s", v->valuestring);
        } else if (strcmp(k, "memory_mib") == 0) {
            if (!json_int(v, 1, INT_MAX, &x))
                return node_fail(n, ANN_GPUS "[%d].memory_mib must be a whole number > 0", i);
            ag->memory_mib = (int)x;
        } else if (strcmp(k, "numa") == 0) {
            if (!json_int(v, 0, INT_MAX, &x)) return node_fail(n, ANN_GPUS "[%d].numa must be a whole number >= 0", i);
            ag->numa = (int)x;
        } else if (strcmp(k, "nvlink") == 0) {
            if (!cJSON_IsArray(v)) return node_fail(n, ANN_GPUS "[%d].nvlink is not an array of GPU indices", i);
            const cJSON *p;
            cJSON_ArrayForEach(p, v) {
                if (!json_int(p, 0, total - 1, &x) || x == i)
                    return node_fail(n, ANN_GPUS "[%d].nvlink: peers must be other GPU indices 0..%d", i, total - 1);
                ag->nvlink |= 1u << x;
            }
            ag->has_nvlink = true;
        } else if (strcmp(k, "pci") == 0) {
            if (!cJSON_IsString(v) || !pci_bus_id_valid(v->valuestring))
                return node_fail(n, ANN_GPUS "[%d].pci must be a PCI bus id as NVML gives it "
                                 "(\"00000000:07:00.0\": domain, bus, device, function in hex)", i);
            snprintf(ag->pci, sizeof ag->pci, "%s", v->valuestring);
        } else if (strcmp(k, "topo") == 0) {
            if (ann_topo(n, ag, i, total, v)) return -1;
        } else if (strcmp(k, "mig") == 0) {
            if (ann_mig(n, ag, i, v)) return -1;
        } else if (strcmp(k, "mig_dynamic") == 0) {
            if (!cJSON_IsBool(v)) return node_fail(n, ANN_GPUS "[%d].mig_dynamic must be true or false", i);
            ag->mig_dynamic = cJSON_IsTrue(v);
        } else {
            /* A misspelt key would otherwise silently drop what the operator meant to say. */
            return node_fail(n, ANN_GPUS "[%d]: unknown key \"%s\"", i, k);
        }
    }
    if (ag->mig_dynamic >= 0 && !ag->has_mig)
        return node_fail(n, ANN_GPUS "[%d].mig_dynamic needs a \"mig\" list (only MIG-enabled GPUs)", i);
    return 0;
}

/* What one GPU's row says of another, across the rows: NVLink is one cable, seen from both ends. */
static int ann_links_agree(model_node *n, const ann_gpus *a) {
    for (int i = 1; i < a->n; i++)
        if (a->g[i].has_topo != a->g[0].has_topo)
            return node_fail(n, ANN_GPUS "[%d] %s \"topo\" but [0] %s: give it for every GPU or for none", i,
                             a->g[i].has_topo ? "has" : "has no", a->g[0].has_topo ? "has one" : "has none");
    for (int i = 0; i < a->n; i++) {
        const ann_gpu *gi = &a->g[i];
        for (int j = 0; j < a->n; j++) {
            const ann_gpu *gj = &a->g[j];
            if (i == j) continue;
            if (gi->pci[0] && strcasecmp(gi->pci, gj->pci) == 0)
                return node_fail(n, ANN_GPUS "[%d].pci and [%d].pci are both %s", j < i ? j : i, j < i ? i : j, gi->pci);
            if (gi->has_topo && (gi->link[j] != gj->link[i] || gi->nvlinks[j] != gj->nvlinks[i]))
                return node_fail(n, ANN_GPUS "[%d].topo[%d] and [%d].topo[%d] differ: the matrix must be symmetric", i, j,
                                 j, i);
            bool nv = gi->nvlink >> j & 1u;
            if (gi->has_topo && gi->has_nvlink && nv != (gi->link[j] == MODEL_LINK_NVLINK))
                return node_fail(n, ANN_GPUS "[%d].nvlink %s %d but [%d].topo[%d] says %s", i, nv ? "lists" : "leaves out",
                                 j, i, j, nv ? "no NVLink" : "NVLink");
            if (gi->has_nvlink && gj->has_nvlink && nv != (gj->nvlink >> i & 1u))
                return node_fail(n, ANN_GPUS "[%d].nvlink %s %d but [%d].nvlink %s %d", i, nv ? "lists" : "leaves out", j,
                                 j, nv ? "leaves out" : "lists", i);
        }
    }
    return 0;
}

static int read_annotation(model_node *n, node_in *in) {
    const cJSON *v = in->annotations ? cJSON_GetObjectItemCaseSensitive(in->annotations, ANN_GPUS) : NULL;
    if (!v) return 0;
    if (!cJSON_IsString(v)) return node_fail(n, "annotation " ANN_GPUS " is not a string");
    cJSON *root = cJSON_Parse(v->valuestring);
    int rc = 0;
    if (!root) {
        rc = node_fail(n, "annotation " ANN_GPUS " is not valid JSON");
    } else if (!cJSON_IsArray(root)) {
        rc = node_fail(n, "annotation " ANN_GPUS " must be a JSON array with one object per GPU");
    } else if (cJSON_GetArraySize(root) > MODEL_MAX_GPUS) {
        rc = node_fail(n, "annotation " ANN_GPUS " lists %d GPUs, more than the %d a node may have",
                       cJSON_GetArraySize(root), MODEL_MAX_GPUS);
    } else {
        in->ann.present = true;
        in->ann.n = cJSON_GetArraySize(root);
        const cJSON *o;
        int i = 0;
        cJSON_ArrayForEach(o, root) {
            if ((rc = ann_one(n, &in->ann.g[i], i, in->ann.n, o))) break;
            i++;
        }
        if (!rc) rc = ann_links_agree(n, &in->ann);
    }
    cJSON_Delete(root);
    return rc;
}

static const char *product_name(const node_in *in) { return in->product->product; }

/* The link of GPUs i and j as the annotation gives it: "topo" when present; else derived from
 * "nvlink" (a listed pair is NVLink, count unknown: NV1) and "numa" (same NUMA node: NODE,
 * different: SYS); else unknown. */
static model_link ann_link(const ann_gpus *a, int i, int j, int *nvlinks) {
    const ann_gpu *gi = &a->g[i], *gj = &a->g[j];
    *nvlinks = 0;
    if (gi->has_topo) {
        *nvlinks = gi->nvlinks[j];
        return (model_link)gi->link[j];
    }
    if ((gi->nvlink >> j & 1u) || (gj->nvlink >> i & 1u)) {
        *nvlinks = 1;
        return MODEL_LINK_NVLINK;
    }
    if (gi->numa >= 0 && gj->numa >= 0) return gi->numa == gj->numa ? MODEL_LINK_NODE : MODEL_LINK_SYS;
    return MODEL_LINK_UNKNOWN;
}

/* n->topo from the annotation, allocated only when some link is known (topo.h: NULL = unknown). */
static int annotated_topology(model_node *n, const ann_gpus *a) {
    for (int i = 0; i < a->n; i++)
        for (int j = i + 1; j < a->n; j++) {
            int nv;
            model_link l = ann_link(a, i, j, &nv);
            if (l != MODEL_LINK_UNKNOWN && model_link_set(&n->topo, i, j, l, nv) != 0)
                return node_fail(n, "out of memory for the GPU topology");
        }
    return 0;
}

/* Per-GPU facts the labels cannot give; MIG instances are placed by the builders. */
static int apply_annotation(model_node *n, const node_in *in) {
    const ann_gpus *a = &in->ann;
    if (!a->present) return 0;
    if (a->n != n->ngpus)
        return node_fail(n, "annotation " ANN_GPUS " lists %d GPUs but the labels say %d (%s=%s)", a->n, n->ngpus,
                         LBL "gpu.count", label(in, LBL "gpu.count"));
    for (int i = 0; i < a->n; i++) {
        const ann_gpu *ag = &a->g[i];
        model_gpu *g = &n->gpus[i];
        if (ag->product[0]) {
            model_product_label apl;
            model_catalog_parse_label(in->cat, ag->product, &apl);
            bool same = in->product == &n->local_product ? !apl.product && strcmp(apl.base, in->pl.base) == 0
                                                         : apl.product == in->product;
            if (!same)
                return node_fail(n, ANN_GPUS "[%d].product=%s but %s=%s", i, ag->product, LBL "gpu.product",
                                 in->product_label);
        }
        if (ag->has_mig && g->mode != MODEL_GPU_MIG)
            return node_fail(n, ANN_GPUS "[%d] lists MIG instances but the labels say GPU %d is not MIG-enabled", i, i);
        if (!ag->has_mig && g->mode == MODEL_GPU_MIG)
            return node_fail(n, ANN_GPUS "[%d] has no \"mig\" list but GPU %d is MIG-enabled", i, i);
        snprintf(g->uuid, sizeof g->uuid, "%s", ag->uuid);
        if (ag->memory_mib) {
            g->memory_mib = ag->memory_mib;
            if (g->mode == MODEL_GPU_MPS) g->mps_memory_limit_mib = g->memory_mib / g->replicas;
        }
        g->numa_node = ag->numa;
        g->nvlink_peers = ag->nvlink;
        if (ag->mig_dynamic > 0 && model_gpu_mig_layered(g))
            return node_fail(n, ANN_GPUS "[%d].mig_dynamic: GPU %d's instances are time-sliced (replicas), which "
                             "tessera does not combine with instances created on demand", i, i);
        if (ag->mig_dynamic >= 0) g->mig_dynamic = ag->mig_dynamic;
    }
    return annotated_topology(n, a);
}

/* Instances the annotation gives for one GPU, validated with the layout rules. */
static int add_annotated_instances(model_node *n, const node_in *in, model_gpu *g, const ann_gpu *ag, int only_profile) {
    for (int k = 0; k < ag->nmig; k++) {
        int pi = model_product_profile_index(in->product, ag->mig[k].profile);
        if (pi < 0)
            return node_fail(n, ANN_GPUS "[%d].mig[%d]: %s has no MIG profile \"%s\"", g->index, k, product_name(in),
                             ag->mig[k].profile);
        if (only_profile >= 0 && pi != only_profile)
            return node_fail(n, ANN_GPUS "[%d].mig[%d] is %s, but under the MIG single strategy every device is %s",
                             g->index, k, ag->mig[k].profile, in->product->profiles[only_profile].name);
        char err[200];
        if (model_gpu_add_mig_instance(g, pi, ag->mig[k].start, err, sizeof err))
            return node_fail(n, ANN_GPUS "[%d].mig[%d] %s@%d: %s", g->index, k, ag->mig[k].profile, ag->mig[k].start,
                             err);
    }
    return 0;
}

/* ----------------------------------------------------------- setups ---- */

static int not_advertised(model_node *n, const node_in *in) {
    if (!n->reason[0]) n->plugin_idle = true;   /* the reason, unless DRA publishes the GPUs (model/dra.h) */
    return node_fail(n, "no GPU resource advertised in status.allocatable yet (labels say %s=%s, %s=%" PRId64
                     "; the device plugin may not be running)",
                     LBL "gpu.product", in->product_label, LBL "gpu.count", in->count);
}

/* GPU memory for whole/shared GPUs: the label (MiB) wins over the catalog. */
static int gpu_memory(model_node *n, const node_in *in, int *mib) {
    *mib = in->memory_label > 0 ? (int)in->memory_label : in->product->memory_mib;
    if (*mib <= 0)
        return node_fail(n, "GPU memory of %s is unknown: the catalog has no figure and %s is missing",
                         product_name(in), LBL "gpu.memory");
    return 0;
}

/* Sharing method from gpu.replicas / gpu.sharing-strategy / the -SHARED suffix. */
static int sharing_mode(model_node *n, const node_in *in, model_gpu_mode *mode) {
    const char *s = in->sharing_strategy;
    int64_t r = in->replicas;
    *mode = MODEL_GPU_WHOLE;
    if (s && strcmp(s, "none") && strcmp(s, "time-slicing") && strcmp(s, "mps"))
        return node_fail(n, "label %s=%s is not none, time-slicing or mps", LBL "gpu.sharing-strategy", s);
    if (in->pl.shared && r <= 1)
        return node_fail(n, "%s=%s says the GPUs are shared but %s=%" PRId64, LBL "gpu.product", in->product_label,
                         LBL "gpu.replicas", r);
    if (s && strcmp(s, "none") && r < 2)
        return node_fail(n, "%s=%s but %s=%" PRId64 " (the device plugin needs at least 2 replicas)",
                         LBL "gpu.sharing-strategy", s, LBL "gpu.replicas", r);
    if (s && !strcmp(s, "none") && r >= 2)
        return node_fail(n, "%s=%" PRId64 " but %s=none", LBL "gpu.replicas", r, LBL "gpu.sharing-strategy");
    if (r < 2) return 0;
    /* GFD before the MPS release wrote no strategy label: replicas then meant time-slicing. */
    *mode = s && !strcmp(s, "mps") ? MODEL_GPU_MPS : MODEL_GPU_TIMESLICE;
    if (*mode == MODEL_GPU_MPS && (!in->product->mps_capable || r > in->product->mps_max_clients))
        return node_fail(n, "%s=%" PRId64 " MPS clients per GPU, but a %s takes at most %d", LBL "gpu.replicas", r,
                         product_name(in), in->product->mps_capable ? in->product->mps_max_clients : 0);
    return 0;
}

/* How many full (non-MIG) GPUs the advertised nvidia.com/gpu[.shared] stands for.
 * expect >= 0: must match it; expect < 0 (mixed): whatever it is. */
static int full_gpus(model_node *n, const node_in *in, model_gpu_mode mode, int64_t expect, int64_t *out) {
    int64_t a = in->adv_gpu, s = in->adv_shared, r = in->replicas;
    *out = 0;
    if (mode == MODEL_GPU_WHOLE) {
        if (s > 0)
            return node_fail(n, "status.allocatable %s=%" PRId64 " but %s=%" PRId64 " (no sharing configured)",
                             LBL "gpu.shared", s, LBL "gpu.replicas", r);
        if (expect >= 0 && a == 0) return not_advertised(n, in);
        if (expect >= 0 && a != expect)
            return node_fail(n, "%s=%" PRId64 " but status.allocatable %s=%" PRId64, LBL "gpu.count", expect,
                             LBL "gpu", a);
        *out = a;
        return 0;
    }
    bool renamed = s > 0;
    if (renamed && a > 0)
        return node_fail(n, "status.allocatable advertises both %s=%" PRId64 " and %s=%" PRId64, LBL "gpu", a,
                         LBL "gpu.shared", s);
    if (renamed && in->pl.shared)
        return node_fail(n, "%s=%s has the -SHARED suffix (renameByDefault off) but replicas are advertised as %s",
                         LBL "gpu.product", in->product_label, LBL "gpu.shared");
    if (!renamed && a > 0 && !in->pl.shared)
        return node_fail(n, "%s=%" PRId64 " and status.allocatable %s=%" PRId64
                         ", but %s=%s lacks the -SHARED suffix the device plugin adds to shared GPUs",
                         LBL "gpu.replicas", r, LBL "gpu", a, LBL "gpu.product", in->product_label);
    const char *res = renamed ? LBL "gpu.shared" : LBL "gpu";
    int64_t t = renamed ? s : a;
    if (expect >= 0 && t == 0) return not_advertised(n, in);
    if (t % r)
        return node_fail(n, "status.allocatable %s=%" PRId64 " is not a multiple of %s=%" PRId64, res, t,
                         LBL "gpu.replicas", r);
    if (expect >= 0 && t != expect * r)
        return node_fail(n, "%s=%" PRId64 " x %s=%" PRId64 " = %" PRId64 ", but status.allocatable %s=%" PRId64,
                         LBL "gpu.count", expect, LBL "gpu.replicas", r, expect * r, res, t);
    n->shared_renamed = renamed;
    *out = t / r;
    return 0;
}

static int add_full_gpus(model_node *n, const node_in *in, model_gpu_mode mode, int count, int mem) {
    for (int i = 0; i < count; i++)
        if (!model_node_add_gpu(n, in->product, mode, mode == MODEL_GPU_WHOLE ? 1 : (int)in->replicas, mem))
            return node_fail(n, "cannot add GPU %d of %s", n->ngpus, product_name(in));
    if (mode != MODEL_GPU_WHOLE) {
        n->sharing = mode;
        n->replicas = (int)in->replicas;
    }
    return 0;
}

/* No MIG devices exposed: whole, time-sliced or MPS GPUs. */
static int setup_full(model_node *n, const node_in *in) {
    if (in->nmigres > 0)
        return node_fail(n, "status.allocatable advertises %s%s=%" PRId64 " but %s is %s, not mixed", LBL "mig-",
                         in->migres[0].name, in->migres[0].count, LBL "mig.strategy",
                         in->mig_strategy ? in->mig_strategy : "absent");
    model_gpu_mode mode;
    int64_t nfull;
    int mem;
    if (sharing_mode(n, in, &mode) || full_gpus(n, in, mode, in->count, &nfull) || gpu_memory(n, in, &mem)) return -1;
    return add_full_gpus(n, in, mode, (int)nfull, mem);
}

/* Layered sharing, how GFD and the device plugin publish it (NVIDIA/k8s-device-plugin
 * internal/lm/resource.go, api/config/v1/{sharing,consts}.go, cmd/nvidia-device-plugin):
 * for a replicated resource R (nvidia.com/gpu under MIG single, nvidia.com/mig-<p> under
 * mixed) GFD writes R.replicas (N; 1 unshared; 0 when sharing is off), R.sharing-strategy
 * (time-slicing, mps or none) and R.product with "-SHARED" appended unless the replicas
 * are renamed; the device plugin advertises count x N of R, or of R.shared with
 * renameByDefault. The device plugin refuses MPS on MIG devices ("sharing using MPS is
 * not supported for MIG devices"), so only time-slicing layers on MIG.
 *
 * Checks one resource's labels against what status.allocatable says; *replicas gets N
 * (1 when unshared). res: the label prefix, "nvidia.com/gpu" or "nvidia.com/mig-<name>". */
static int mig_resource_sharing(model_node *n, const node_in *in, const char *res, int64_t advertised, bool renamed,
                                int64_t *replicas) {
    char key[96];
    int64_t r, count;
    snprintf(key, sizeof key, "%s.replicas", res);
    if (label_int(n, in, key, 1, &r)) return -1;
    if (r == 0) r = 1;   /* GFD writes 0 when the config has no sharing section at all */
    snprintf(key, sizeof key, "%s.sharing-strategy", res);
    const char *strategy = label(in, key);
    if (strategy && strcmp(strategy, "none") && strcmp(strategy, "time-slicing") && strcmp(strategy, "mps"))
        return node_fail(n, "label %s=%s is not none, time-slicing or mps", key, strategy);
    if (strategy && !strcmp(strategy, "mps"))
        return node_fail(n, "label %s=mps: the NVIDIA device plugin does not share MIG devices by MPS (\"sharing "
                         "using MPS is not supported for MIG devices\"); use time-slicing for MIG instances", key);
    if (strategy && !strcmp(strategy, "time-slicing") && r < 2)
        return node_fail(n, "label %s=time-slicing but %s.replicas=%" PRId64, key, res, r);
    if (strategy && !strcmp(strategy, "none") && r >= 2)
        return node_fail(n, "label %s.replicas=%" PRId64 " but %s=none", res, r, key);
    if (r > MODEL_MIG_MAX_REPLICAS)
        return node_fail(n, "label %s.replicas=%" PRId64 " is more than the %d replicas per MIG instance supported",
                         res, r, MODEL_MIG_MAX_REPLICAS);
    if (renamed && r < 2)
        return node_fail(n, "status.allocatable advertises %s.shared but label %s.replicas=%" PRId64
                         " (no sharing configured)", res, res, r);
    snprintf(key, sizeof key, "%s.product", res);
    const char *prod = label(in, key);
    if (prod) {
        model_product_label pl;
        model_catalog_parse_label(in->cat, prod, &pl);
        if (pl.shared && r < 2)
            return node_fail(n, "label %s=%s says the MIG devices are shared but %s.replicas=%" PRId64, key, prod, res, r);
        if (pl.shared && renamed)
            return node_fail(n, "label %s=%s has the -SHARED suffix (renameByDefault off) but replicas are advertised "
                             "as %s.shared", key, prod, res);
        if (!pl.shared && r >= 2 && !renamed)
            return node_fail(n, "%s.replicas=%" PRId64 " and status.allocatable %s, but label %s=%s lacks the -SHARED "
                             "suffix the device plugin adds to shared devices", res, r, res, key, prod);
    }
    if (advertised % r)
        return node_fail(n, "status.allocatable %s%s=%" PRId64 " is not a multiple of %s.replicas=%" PRId64, res,
                         renamed ? ".shared" : "", advertised, res, r);
    snprintf(key, sizeof key, "%s.count", res);
    if (label(in, key) && strcmp(res, LBL "gpu") != 0) {
        if (label_int(n, in, key, 0, &count)) return -1;
        if (count * r != advertised)
            return node_fail(n, "label %s=%" PRId64 " x %s.replicas=%" PRId64 " = %" PRId64 ", but status.allocatable "
                             "%s%s=%" PRId64, key, count, res, r, count * r, res, renamed ? ".shared" : "", advertised);
    }
    *replicas = r;
    return 0;
}

/* Give every MIG-enabled GPU's instances of profile pi their replicas (layered sharing). */
static int share_profile(model_node *n, const node_in *in, int pi, int replicas, bool renamed) {
    if (replicas < 2) return 0;
    for (int i = 0; i < n->ngpus; i++) {
        model_gpu *g = &n->gpus[i];
        char err[160];
        if (g->mode != MODEL_GPU_MIG) continue;
        if (model_gpu_share_mig_profile(g, pi, MODEL_GPU_TIMESLICE, replicas, err, sizeof err))
            return node_fail(n, "%s", err);
    }
    if (n->mig_sharing != MODEL_GPU_WHOLE && n->mig_renamed != renamed)
        return node_fail(n, "status.allocatable renames the replicas of some MIG profiles (.shared) but not of "
                         "others; renameByDefault applies to every resource of %s", product_name(in));
    n->mig_sharing = MODEL_GPU_TIMESLICE;
    n->mig_renamed = renamed;
    return 0;
}

/* Single strategy: gpu.count MIG devices of one profile; physical GPUs unlabelled. */
static int setup_mig_single(model_node *n, const node_in *in) {
    const model_gpu_product *p = in->product;
    if (!in->mig_strategy || strcmp(in->mig_strategy, "single"))
        return node_fail(n, "%s=%s names a MIG profile, which GFD writes only under the single strategy, but %s is %s",
                         LBL "gpu.product", in->product_label, LBL "mig.strategy",
                         in->mig_strategy ? in->mig_strategy : "absent");
    int pi = model_product_profile_index(p, in->pl.mig_profile);
    if (pi < 0)
        return node_fail(n, "%s=%s: %s has no MIG profile %s", LBL "gpu.product", in->product_label, p->product,
                         in->pl.mig_profile);
    const char *s = in->sharing_strategy;
    if (s && !strcmp(s, "mps"))
        return node_fail(n, "MPS is not supported on MIG-enabled GPUs (%s=mps): the NVIDIA device plugin refuses "
                         "(\"sharing using MPS is not supported for MIG devices\"); use time-slicing", LBL "gpu.sharing-strategy");
    if (in->nmigres > 0)
        return node_fail(n, "status.allocatable advertises %s%s under the MIG single strategy", LBL "mig-",
                         in->migres[0].name);
    if (in->count == 0) return node_fail(n, "%s=%s but %s=0", LBL "gpu.product", in->product_label, LBL "gpu.count");
    /* Time-sliced slices (layered): nvidia.com/gpu.replicas per slice, advertised as
     * nvidia.com/gpu (product -SHARED) or, renamed, as nvidia.com/gpu.shared. */
    if (in->adv_gpu > 0 && in->adv_shared > 0)
        return node_fail(n, "status.allocatable advertises both %s=%" PRId64 " and %s=%" PRId64, LBL "gpu",
                         in->adv_gpu, LBL "gpu.shared", in->adv_shared);
    bool renamed = in->adv_shared > 0;
    int64_t adv = renamed ? in->adv_shared : in->adv_gpu, r;
    if (adv == 0) return not_advertised(n, in);
    if (mig_resource_sharing(n, in, LBL "gpu", adv, renamed, &r)) return -1;
    if (adv != in->count * r)
        return r > 1 ? node_fail(n, "%s=%" PRId64 " MIG devices x %s=%" PRId64 " = %" PRId64 ", but status.allocatable "
                                 "%s=%" PRId64, LBL "gpu.count", in->count, LBL "gpu.replicas", r, in->count * r,
                                 renamed ? LBL "gpu.shared" : LBL "gpu", adv)
                     : node_fail(n, "%s=%" PRId64 " MIG devices but status.allocatable %s=%" PRId64, LBL "gpu.count",
                                 in->count, LBL "gpu", adv);
    if (p->memory_mib <= 0) return node_fail(n, "GPU memory of %s is unknown to the catalog", p->product);

    if (in->ann.present) {
        int64_t total = 0;
        for (int i = 0; i < in->ann.n; i++) {
            model_gpu *g = model_node_add_gpu(n, p, MODEL_GPU_MIG, 1, 0);
            if (!g) return node_fail(n, "cannot add GPU %d of %s", i, p->product);
            if (!in->ann.g[i].has_mig)
                return node_fail(n, ANN_GPUS "[%d] has no \"mig\" list, but under the MIG single strategy every GPU "
                                 "is MIG-enabled", i);
            if (add_annotated_instances(n, in, g, &in->ann.g[i], pi)) return -1;
            total += g->ninst;
        }
        if (total != in->count)
            return node_fail(n, "annotation " ANN_GPUS " places %" PRId64 " MIG devices but %s=%" PRId64, total,
                             LBL "gpu.count", in->count);
    } else {
        /* What mig-parted's all-<profile> configs produce: each GPU filled from slice 0 up. */
        int64_t left = in->count;
        while (left > 0) {
            model_gpu *g = model_node_add_gpu(n, p, MODEL_GPU_MIG, 1, 0);
            if (!g)
                return node_fail(n, "%s=%" PRId64 " MIG devices of %s do not fit on %d GPUs", LBL "gpu.count",
                                 in->count, p->profiles[pi].name, MODEL_MAX_GPUS);
            model_mig_layout l;
            gpu_layout(g, &l);
            uint8_t mask;
            while (left > 0 && (mask = model_mig_free_starts(p, &l, pi)) != 0) {
                int start = __builtin_ctz(mask);
                if (model_gpu_add_mig_instance(g, pi, start, NULL, 0)) break;
                gpu_layout(g, &l);
                left--;
            }
            if (g->ninst == 0) return node_fail(n, "%s cannot be placed on an empty %s", p->profiles[pi].name, p->product);
        }
    }
    n->mig_strategy = MODEL_MIG_SINGLE;
    return share_profile(n, in, pi, (int)r, renamed);
}

/* Placing the advertised MIG devices on the MIG-enabled GPUs. A GPU can hold only a few
 * hundred distinct profile mixes ("shapes"), so the search picks one shape per GPU, in
 * non-decreasing shape order (GPUs are interchangeable), until the counts are used up. */
#define MIG_MAX_SHAPES 1024
/* Enough for any real node; bounds the time an impossible mix can cost. */
#define MIG_SEARCH_BUDGET 200000L

typedef struct mig_shape {
    int8_t count[MODEL_MAX_PROFILES];
    int compute, mem;
    model_mig_layout layout;  /* the first placement found for this mix */
} mig_shape;

/* A search state: GPUs left, first shape allowed, counts still to place. */
typedef struct mig_memo_key {
    uint8_t used, left;
    uint8_t rem[MODEL_MAX_PROFILES];
} mig_memo_key;
#define MIG_MEMO_SIZE 8192

typedef struct mig_pack {
    const model_gpu_product *p;
    int nshapes;
    bool truncated;
    mig_shape shape[MIG_MAX_SHAPES];
    int ngpus, choice[MODEL_MAX_GPUS];
    int hard_rank[MODEL_MAX_PROFILES]; /* 0 = hardest to place */
    long steps;
    mig_memo_key *memo;        /* states known to fail, open addressing */
} mig_pack;

static void mig_record_shape(mig_pack *mp, const model_mig_layout *l) {
    mig_shape sh = {.layout = *l};
    for (int i = 0; i < l->n; i++) {
        const model_mig_profile *pr = &mp->p->profiles[l->inst[i].profile];
        sh.count[l->inst[i].profile]++;
        sh.compute += pr->compute_slices;
        sh.mem += pr->memory_slices;
    }
    for (int i = 0; i < mp->nshapes; i++)
        if (!memcmp(mp->shape[i].count, sh.count, sizeof sh.count)) return;
    if (mp->nshapes == MIG_MAX_SHAPES) {
        mp->truncated = true;
        return;
    }
    mp->shape[mp->nshapes++] = sh;
}

/* Every valid placement set, instances added in start order so each set is visited
 * once; the next instance starts where the last one ends, since none overlap. */
static void mig_enum_shapes(mig_pack *mp, model_mig_layout *l, int from_slice) {
    if (l->n > 0) mig_record_shape(mp, l);
    for (int start = from_slice; start < MODEL_MIG_MAX_SLICES; start++)
        for (int pi = 0; pi < mp->p->nprofiles; pi++) {
            if (!((mp->p->profiles[pi].start_mask >> start) & 1)) continue;
            if (!model_mig_can_add(mp->p, l, pi, start, NULL, 0)) continue;
            l->inst[l->n].profile = (int8_t)pi;
            l->inst[l->n].start = (int8_t)start;
            l->n++;
            mig_enum_shapes(mp, l, start + mp->p->profiles[pi].memory_slices);
            l->n--;
        }
}

/* Fuller GPUs first: the search then tries the mixes mig-parted configs produce. */
static int mig_shape_cmp(const void *a, const void *b) {
    const mig_shape *x = a, *y = b;
    if (x->compute != y->compute) return y->compute - x->compute;
    if (x->mem != y->mem) return y->mem - x->mem;
    return memcmp(y->count, x->count, sizeof x->count);
}

/* The slot for key k: where it is stored, or the empty slot it would go to (NULL when
 * the table is full, which only costs the memo's help). */
static mig_memo_key *mig_memo_slot(mig_pack *mp, const mig_memo_key *k) {
    uint32_t h = 2166136261u;
    for (size_t i = 1; i < sizeof *k; i++) h = (h ^ ((const uint8_t *)k)[i]) * 16777619u;
    for (int probe = 0; probe < 64; probe++) {
        mig_memo_key *e = &mp->memo[(h + (uint32_t)probe) % MIG_MEMO_SIZE];
        if (!e->used || !memcmp((const uint8_t *)e + 1, (const uint8_t *)k + 1, sizeof *k - 1)) return e;
    }
    return NULL;
}

/* Canonical order: the next GPU is one that holds the hardest profile still to place
 * (some GPU must), so only shapes containing it are tried. Failed states are memoised. */
static bool mig_pack_search(mig_pack *mp, int g, int *rem, int rem_compute, int rem_mem) {
    if (rem_compute == 0) return true; /* every profile takes a compute slice */
    if (g == mp->ngpus || ++mp->steps > MIG_SEARCH_BUDGET) return false;
    const model_gpu_product *p = mp->p;
    int left = mp->ngpus - g;
    if (rem_compute > left * p->mig_compute_slices || rem_mem > left * p->mig_memory_slices) return false;
    int hard = -1;
    for (int pi = 0; pi < p->nprofiles; pi++) {
        if (rem[pi] > left * p->profiles[pi].max_instances) return false;
        if (rem[pi] && (hard < 0 || mp->hard_rank[pi] < mp->hard_rank[hard])) hard = pi;
    }
    mig_memo_key key = {.used = 1, .left = (uint8_t)left};
    for (int pi = 0; pi < p->nprofiles; pi++) key.rem[pi] = (uint8_t)rem[pi];
    mig_memo_key *slot = mig_memo_slot(mp, &key);
    if (slot && slot->used) return false;
    for (int v = 0; v < mp->nshapes; v++) {
        const mig_shape *sh = &mp->shape[v];
        bool fits = sh->count[hard] > 0 && sh->compute <= rem_compute && sh->mem <= rem_mem;
        for (int pi = 0; fits && pi < p->nprofiles; pi++) fits = sh->count[pi] <= rem[pi];
        if (!fits) continue;
        for (int pi = 0; pi < p->nprofiles; pi++) rem[pi] -= sh->count[pi];
        mp->choice[g] = v;
        bool ok = mig_pack_search(mp, g + 1, rem, rem_compute - sh->compute, rem_mem - sh->mem);
        for (int pi = 0; pi < p->nprofiles; pi++) rem[pi] += sh->count[pi];
        if (ok) return true;
        if (mp->steps > MIG_SEARCH_BUDGET) return false;
    }
    if (slot) *slot = key;
    return false;
}

/* 0 placed; -1 impossible; -2 search gave up; -3 out of memory. */
static int mig_pack_place(const model_gpu_product *p, model_gpu **gpus, int ngpus, const int *want) {
    mig_pack *mp = calloc(1, sizeof *mp);
    mig_memo_key *memo = calloc(MIG_MEMO_SIZE, sizeof *memo);
    if (!mp || !memo) {
        free(mp);
        free(memo);
        return -3;
    }
    mp->memo = memo;
    mp->p = p;
    mp->ngpus = ngpus;
    model_mig_layout l = {0};
    mig_enum_shapes(mp, &l, 0);
    qsort(mp->shape, (size_t)mp->nshapes, sizeof mp->shape[0], mig_shape_cmp);
    /* Hardest: most compute, then most memory, then fewest allowed per GPU (+me). */
    for (int a = 0; a < p->nprofiles; a++) {
        const model_mig_profile *x = &p->profiles[a];
        for (int b = 0; b < p->nprofiles; b++) {
            const model_mig_profile *y = &p->profiles[b];
            bool harder = y->compute_slices != x->compute_slices ? y->compute_slices > x->compute_slices
                          : y->memory_slices != x->memory_slices ? y->memory_slices > x->memory_slices
                          : y->max_instances != x->max_instances ? y->max_instances < x->max_instances
                                                                 : b < a;
            mp->hard_rank[a] += harder;
        }
    }
    int rem[MODEL_MAX_PROFILES] = {0}, rem_compute = 0, rem_mem = 0;
    for (int pi = 0; pi < p->nprofiles; pi++) {
        rem[pi] = want[pi];
        rem_compute += want[pi] * p->profiles[pi].compute_slices;
        rem_mem += want[pi] * p->profiles[pi].memory_slices;
    }
    int rc = -1;
    if (mig_pack_search(mp, 0, rem, rem_compute, rem_mem)) {
        rc = 0;
        for (int g = 0, left = rem_compute; g < ngpus && left > 0; g++) {
            const mig_shape *sh = &mp->shape[mp->choice[g]];
            for (int i = 0; i < sh->layout.n; i++) {
                int err = model_gpu_add_mig_instance(gpus[g], sh->layout.inst[i].profile, sh->layout.inst[i].start, NULL, 0);
                assert(err == 0); /* the layout was built with the same rules */
                (void)err;
            }
            left -= sh->compute;
        }
    } else if (mp->steps > MIG_SEARCH_BUDGET || mp->truncated) {
        rc = -2;
    }
    free(mp->memo);
    free(mp);
    return rc;
}

static void format_mig_counts(const node_in *in, char *buf, size_t len) {
    size_t off = 0;
    buf[0] = 0;
    for (int i = 0; i < in->nmigres && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%" PRId64 " x %s", i ? ", " : "", in->migres[i].count,
                                in->migres[i].name);
}

static int share_mixed_profiles(model_node *n, const node_in *in) {
    for (int i = 0; i < in->nmigres; i++)
        if (share_profile(n, in, model_product_profile_index(in->product, in->migres[i].name), in->migres[i].replicas,
                          in->migres[i].renamed))
            return -1;
    return 0;
}

/* Mixed strategy: gpu.count physical GPUs, nvidia.com/gpu of them unshared, the rest MIG. */
static int setup_mig_mixed(model_node *n, node_in *in) {
    const model_gpu_product *p = in->product;
    n->mig_strategy = MODEL_MIG_MIXED;
    /* MPS on MIG: GFD labels the config, but the device plugin refuses to serve it, so the
     * resource may be missing from status.allocatable; the labels alone explain why. */
    const cJSON *lv;
    cJSON_ArrayForEach(lv, in->labels) {
        const char *k = lv->string;
        if (!strncmp(k, LBL "mig-", strlen(LBL "mig-")) && has_suffix(k, ".sharing-strategy") && cJSON_IsString(lv) &&
            !strcmp(lv->valuestring, "mps"))
            return node_fail(n, "label %s=mps: the NVIDIA device plugin does not share MIG devices by MPS (\"sharing "
                             "using MPS is not supported for MIG devices\"); use time-slicing for MIG instances", k);
    }
    int want[MODEL_MAX_PROFILES] = {0};
    for (int i = 0; i < in->nmigres; i++) {
        int pi = model_product_profile_index(p, in->migres[i].name);
        if (pi < 0)
            return node_fail(n, "status.allocatable advertises %smig-%s, but %s has no MIG profile %s", LBL,
                             in->migres[i].name, p->product, in->migres[i].name);
        char res[64];
        int64_t r;
        snprintf(res, sizeof res, LBL "mig-%s", in->migres[i].name);
        if (mig_resource_sharing(n, in, res, in->migres[i].count, in->migres[i].renamed, &r)) return -1;
        in->migres[i].replicas = (int)r;
        int64_t devices = in->migres[i].count / r;
        if (devices > MODEL_MAX_GPUS * MODEL_MIG_MAX_INSTANCES)
            return node_fail(n, "status.allocatable %smig-%s=%" PRId64 " is more than %d GPUs can hold", LBL,
                             in->migres[i].name, in->migres[i].count, MODEL_MAX_GPUS);
        want[pi] += (int)devices;
    }
    if (in->adv_gpu + in->adv_shared + in->adv_mig_total == 0) return not_advertised(n, in);
    model_gpu_mode mode;
    int64_t nfull;
    int mem;
    if (sharing_mode(n, in, &mode) || full_gpus(n, in, mode, -1, &nfull) || gpu_memory(n, in, &mem)) return -1;
    if (nfull > in->count)
        return node_fail(n, "status.allocatable says %" PRId64 " GPUs without MIG but %s=%" PRId64, nfull,
                         LBL "gpu.count", in->count);
    int nmig = (int)(in->count - nfull);
    char counts[160];
    format_mig_counts(in, counts, sizeof counts);
    if (nmig == 0 && in->adv_mig_total > 0)
        return node_fail(n, "status.allocatable advertises MIG devices (%s) but %s=%" PRId64 " and %s=%" PRId64
                         " leave no MIG-enabled GPU", counts, LBL "gpu.count", in->count, LBL "gpu", in->adv_gpu);

    model_gpu *migs[MODEL_MAX_GPUS];
    int m = 0;
    if (in->ann.present) {
        /* The annotation says which GPUs are MIG-enabled and where each instance sits. */
        if (in->ann.n != in->count)
            return node_fail(n, "annotation " ANN_GPUS " lists %d GPUs but %s=%" PRId64, in->ann.n, LBL "gpu.count",
                             in->count);
        int have[MODEL_MAX_PROFILES] = {0};
        for (int i = 0; i < in->ann.n; i++) {
            const ann_gpu *ag = &in->ann.g[i];
            model_gpu *g = model_node_add_gpu(n, p, ag->has_mig ? MODEL_GPU_MIG : mode,
                                              ag->has_mig || mode == MODEL_GPU_WHOLE ? 1 : (int)in->replicas,
                                              ag->has_mig ? 0 : mem);
            if (!g) return node_fail(n, "cannot add GPU %d of %s", i, p->product);
            if (!ag->has_mig) continue;
            m++;
            if (add_annotated_instances(n, in, g, ag, -1)) return -1;
            for (int k = 0; k < g->ninst; k++) have[g->inst[k].profile]++;
        }
        if (m != nmig)
            return node_fail(n, "annotation " ANN_GPUS " marks %d GPUs MIG-enabled but %s=%" PRId64 " minus %s=%" PRId64
                             " non-MIG GPUs is %d", m, LBL "gpu.count", in->count, LBL "gpu", nfull, nmig);
        for (int pi = 0; pi < p->nprofiles; pi++)
            if (have[pi] != want[pi])
                return node_fail(n, "annotation " ANN_GPUS " places %d x %s but status.allocatable advertises %d",
                                 have[pi], p->profiles[pi].name, want[pi]);
        if (mode != MODEL_GPU_WHOLE) {
            n->sharing = mode;
            n->replicas = (int)in->replicas;
        }
        return share_mixed_profiles(n, in);
    }

    /* Without the annotation the indices are a convention: unshared GPUs first. */
    if (add_full_gpus(n, in, mode, (int)nfull, mem)) return -1;
    for (int i = 0; i < nmig; i++) {
        migs[m] = model_node_add_gpu(n, p, MODEL_GPU_MIG, 1, 0);
        if (!migs[m]) return node_fail(n, "cannot add GPU %d of %s", n->ngpus, p->product);
        m++;
    }
    int rc = -1;
    for (int pi = 0; pi < p->nprofiles; pi++)
        if (want[pi] > m * p->profiles[pi].max_instances) goto nofit;
    rc = mig_pack_place(p, migs, m, want);
    if (rc == -3) return node_fail(n, "out of memory placing MIG devices");
    if (rc == 0) return share_mixed_profiles(n, in);
nofit:
    return node_fail(n, "cannot place the advertised MIG devices (%s) on %d MIG-enabled %s GPU(s) (%s=%" PRId64
                     ", %s=%" PRId64 " without MIG)%s", counts, m, p->product, LBL "gpu.count", in->count, LBL "gpu",
                     nfull, rc == -2 ? "; search gave up" : "");
}

/* Labels and allocatable -> GPUs. Returns -1 once a reason is set. */
static int read_gpus(model_node *n, node_in *in) {
    const cJSON *v;
    cJSON_ArrayForEach(v, in->labels) {
        if (!strncmp(v->string, LBL, strlen(LBL)) && !cJSON_IsString(v))
            return node_fail(n, "label %s is not a string", v->string);
    }
    if (read_allocatable(n, in) || read_annotation(n, in)) return -1;
    in->product_label = label(in, LBL "gpu.product");
    if (!in->product_label) {
        if (in->adv_gpu + in->adv_shared + in->adv_mig_total > 0)
            return node_fail(n, "status.allocatable advertises GPUs but the node has no %s label (is GPU feature "
                             "discovery running?)", LBL "gpu.product");
        const char *present = label(in, LBL "gpu.present");
        if (present && !strcmp(present, "true")) {
            if (!n->reason[0]) n->plugin_idle = true;   /* nothing for the device plugin; DRA may publish them */
            return node_fail(n, "%s=true but GPU feature discovery has not labelled the GPUs yet (no %s)",
                             LBL "gpu.present", LBL "gpu.product");
        }
        if (in->ann.present)
            return node_fail(n, "annotation " ANN_GPUS " lists %d GPUs but the node has no %s label", in->ann.n,
                             LBL "gpu.product");
        return 0;
    }
    snprintf(n->product_label, sizeof n->product_label, "%s", in->product_label);
    model_catalog_parse_label(in->cat, in->product_label, &in->pl);

    in->mig_strategy = label(in, LBL "mig.strategy");
    if (in->mig_strategy && !strcmp(in->mig_strategy, "single")) n->mig_strategy = MODEL_MIG_SINGLE;
    else if (in->mig_strategy && !strcmp(in->mig_strategy, "mixed")) n->mig_strategy = MODEL_MIG_MIXED;
    else if (in->mig_strategy && strcmp(in->mig_strategy, "none"))
        return node_fail(n, "label %s=%s is not single or mixed", LBL "mig.strategy", in->mig_strategy);
    if (in->pl.mig_invalid)
        return node_fail(n, "GPU feature discovery reports an invalid MIG single-strategy setup (%s=%s): GPUs mix "
                         "MIG and non-MIG or hold different profiles", LBL "gpu.product", in->product_label);
    in->sharing_strategy = label(in, LBL "gpu.sharing-strategy");
    if (!label(in, LBL "gpu.count"))
        return node_fail(n, "%s=%s but %s is missing", LBL "gpu.product", in->product_label, LBL "gpu.count");
    if (label_int(n, in, LBL "gpu.count", 0, &in->count) || label_int(n, in, LBL "gpu.replicas", 1, &in->replicas) ||
        label_int(n, in, LBL "gpu.memory", 0, &in->memory_label))
        return -1;
    /* Old GFD wrote bytes; no GPU has 16 TB, so a figure that large cannot be MiB. */
    if (in->memory_label > 16000000) in->memory_label /= 1024 * 1024;
    bool single = in->pl.mig_profile[0] != 0;
    if (!single && in->count <= MODEL_MAX_GPUS) n->gpu_count_label = (int)in->count;   /* physical GPUs (model/dra.h) */
    if (!single && in->count > MODEL_MAX_GPUS)
        return node_fail(n, "%s=%" PRId64 " is more than the %d GPUs a node may have", LBL "gpu.count", in->count,
                         MODEL_MAX_GPUS);
    if (!single && in->count == 0)
        return node_fail(n, "%s=%s but %s=0", LBL "gpu.product", in->product_label, LBL "gpu.count");
    if (in->replicas > MODEL_MAX_REPLICAS)
        return node_fail(n, "%s=%" PRId64 " is more than the %d replicas per GPU supported", LBL "gpu.replicas",
                         in->replicas, MODEL_MAX_REPLICAS);

    in->product = in->pl.product;
    if (!in->product) {
        if (single || n->mig_strategy == MODEL_MIG_MIXED)
            return node_fail(n, "MIG on a GPU model the catalog does not know (%s=%s): its MIG profiles and "
                             "placements are unknown", LBL "gpu.product", in->product_label);
        if (in->memory_label <= 0)
            return node_fail(n, "GPU model %s is not in the catalog and %s is missing, so its memory is unknown",
                             in->pl.base, LBL "gpu.memory");
        model_product_init_generic(&n->local_product, in->pl.base, (int)in->memory_label, 0);
        /* GFD labels the compute capability; MPS shares need to know it (model_gpu_mps_capable). Only a
         * well-formed value counts: a broken label leaves it unknown (no MPS) rather than failing the node. */
        const char *maj = label(in, LBL "gpu.compute.major"), *min = label(in, LBL "gpu.compute.minor");
        if (maj && min && *maj && *min && strlen(maj) <= 3 && strlen(min) <= 3 && strspn(maj, "0123456789") == strlen(maj) &&
            strspn(min, "0123456789") == strlen(min)) {
            n->local_product.cc_major = atoi(maj);
            n->local_product.cc_minor = atoi(min);
        }
        in->product = &n->local_product;
    }
    if (single) return setup_mig_single(n, in);
    if (n->mig_strategy == MODEL_MIG_MIXED) return setup_mig_mixed(n, in);
    return setup_full(n, in);
}

/* Keep the matrix of the Node object's tessera.io/gpus annotation (every GPU with "uuid" and "topo") in
 * n->dra_links, for a node whose GPUs DRA alone publishes (n->plugin_idle): model_dra_merge_slices matches it to
 * the devices by UUID (model/dra.h, "topology of the GPUs DRA publishes"). Reading the Node object is this
 * module's; what DRA makes of it is dra.c's. A malformed matrix is left out and n->dra_note says why (the node
 * still takes pods; its topology is then the PCIe roots'). 1 kept, 0 none. */
static int dra_links_read(model_node *n, const cJSON *node) {
    const char *ann = model_json_str(model_json_get(model_json_get(node, "metadata"), "annotations"), "tessera.io/gpus");
    cJSON *arr = ann ? cJSON_Parse(ann) : NULL;
    int total = cJSON_IsArray(arr) ? cJSON_GetArraySize(arr) : 0;
    model_dra_links *l = total > 0 && total <= MODEL_MAX_GPUS ? calloc(1, sizeof *l) : NULL;
    const char *bad = NULL;
    int i = 0;
    const cJSON *g, *list = l ? arr : NULL;
    cJSON_ArrayForEach(g, list) {
        const char *uuid = model_json_str(g, "uuid");
        const cJSON *row = model_json_get(g, "topo");
        if (!row) {   /* no matrix (numa/nvlink at most): nothing finer than the PCIe roots */
            bad = "";
            break;
        }
        if (!uuid || !*uuid || strlen(uuid) >= sizeof l->uuid[0] || cJSON_GetArraySize(row) != total) {
            bad = "every GPU needs a uuid and a topo row as long as the list";
            break;
        }
        snprintf(l->uuid[i], sizeof l->uuid[i], "%s", uuid);   /* its length is checked above */
        int j = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, row) {
            model_link lk;
            int nv;
            if (!cJSON_IsString(e) || !model_link_parse(e->valuestring, &lk, &nv) || (lk == MODEL_LINK_UNKNOWN) != (i == j)) {
                bad = "a topo entry is not a link name (X only on the diagonal)";
                break;
            }
            l->link[i][j] = (uint8_t)lk;
            l->nvlinks[i][j++] = (uint8_t)nv;
        }
        if (bad) break;
        i++;
    }
    for (int a = 0; l && !bad && a < total; a++)
        for (int b = 0; b < total && !bad; b++)
            if (l->link[a][b] != l->link[b][a] || l->nvlinks[a][b] != l->nvlinks[b][a]) bad = "the topo matrix is not symmetric";
    cJSON_Delete(arr);
    if (!l || bad) {
        if (bad && *bad && !n->dra_note[0])   /* the first disagreement is the one worth reading */
            snprintf(n->dra_note, sizeof n->dra_note, "tessera.io/gpus topo left out for the GPUs DRA publishes: %s", bad);
        free(l);
        return 0;
    }
    l->n = total;
    free(n->dra_links);
    n->dra_links = l;
    return 1;
}

model_node *model_node_from_json(const cJSON *node, const model_catalog *cat, char *err, size_t errlen) {
    if (!cJSON_IsObject(node)) {
        if (err) snprintf(err, errlen, "Node is not a JSON object");
        return NULL;
    }
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(node, "kind");
    if (cJSON_IsString(kind) && strcmp(kind->valuestring, "Node") != 0) {
        if (err) snprintf(err, errlen, "object is a %s, not a Node", kind->valuestring);
        return NULL;
    }
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(node, "metadata");
    const cJSON *name = cJSON_IsObject(meta) ? cJSON_GetObjectItemCaseSensitive(meta, "name") : NULL;
    if (!cJSON_IsString(name) || !name->valuestring[0]) {
        if (err) snprintf(err, errlen, "Node has no metadata.name");
        return NULL;
    }
    model_node *n = model_node_new(name->valuestring);
    if (!n) {
        if (err) snprintf(err, errlen, "out of memory");
        return NULL;
    }
    node_in in = {.cat = cat ? cat : model_catalog_default()};
    const cJSON *status = NULL;
    if (!in.cat) {
        node_fail(n, "no GPU catalog");
    } else if (!get_object(n, meta, "labels", "metadata.labels", &in.labels) &&
               !get_object(n, meta, "annotations", "metadata.annotations", &in.annotations) &&
               !get_object(n, node, "status", "status", &status) &&
               !get_object(n, status, "allocatable", "status.allocatable", &in.alloc) && !read_host(n, &in) &&
               !read_gpus(n, &in)) {
        apply_annotation(n, &in);
    }
    if (n->reason[0]) { /* an untrusted inventory must not be handed out by mistake */
        n->ngpus = 0;
        free(n->topo);
        n->topo = NULL;
    }
    /* GPUs DRA alone publishes come later (model_dra_merge_slices): keep the agent's matrix for them by UUID */
    if (n->plugin_idle) dra_links_read(n, node);
    return n;
}

model_node *model_node_from_json_text(const char *json, size_t len, const model_catalog *cat, char *err,
                                      size_t errlen) {
    if (!json) {
        if (err) snprintf(err, errlen, "no Node JSON");
        return NULL;
    }
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) {
        if (err) snprintf(err, errlen, "Node is not valid JSON");
        return NULL;
    }
    model_node *n = model_node_from_json(root, cat, err, errlen);
    cJSON_Delete(root);
    return n;
}
