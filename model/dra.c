/* dra.c -- reading ResourceSlices and ResourceClaims of NVIDIA's DRA driver into the model (dra.h): devices
 * merged into a node by UUID, allocations as grants, device requests as a model_request. Anything unclear
 * leans the safe way: two GPUs that might be one are merged (capacity can only shrink), and a request whose
 * selectors are not fully understood is not judged at all rather than judged wrongly.
 */
#include "model/dra.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/json.h"
#include "model/quantity.h"
#include "model/topo.h"

/* ------------------------------------------------------------ reading objects ---- */

/* Copy with truncation (names longer than the model keeps are cut, never overflow). */
static void cpy(char *dst, size_t len, const char *src) {
    size_t n = src ? strnlen(src, len - 1) : 0;
    if (n) memcpy(dst, src, n);
    dst[n] = 0;
}

/* An attribute's value: {"string": ...} | {"version": ...} | {"int": n} | {"bool": b}, as v1 serves them. */
static const char *attr_str(const cJSON *attrs, const char *name) {
    const cJSON *a = model_json_get(attrs, name);
    if (!a) {   /* attributes may also be written fully qualified */
        char q[160];
        snprintf(q, sizeof q, MODEL_DRA_DRIVER "/%.100s", name);
        a = model_json_get(attrs, q);
    }
    const char *s = model_json_str(a, "string");
    return s ? s : model_json_str(a, "version");
}

/* A JSON number as an integer clamped to lo..hi (dflt when it is not a number): the API's int64
 * fields arrive as doubles, and converting one beyond the target type's range is undefined. */
static int64_t jint(const cJSON *o, int64_t lo, int64_t hi, int64_t dflt) {
    if (!cJSON_IsNumber(o) || o->valuedouble != o->valuedouble) return dflt;   /* not a number, NaN */
    if (o->valuedouble <= (double)lo) return lo;
    if (o->valuedouble >= (double)hi) return hi;
    return (int64_t)o->valuedouble;
}

/* A capacity's value ({"value": "40Gi"}) in MiB, or -1. */
static int cap_mib(const cJSON *caps, const char *name) {
    const char *v = model_json_str(model_json_get(caps, name), "value");
    int64_t milli;
    if (!v || model_quantity_parse_milli(v, &milli, NULL, 0) != 0 || milli < 0) return -1;
    int64_t mib = milli / 1000 / (1024 * 1024);
    return mib > INT_MAX ? INT_MAX : (int)mib;
}

/* A MIG device's placement (and profile) from its name, for devices without memorySlice<i> capacities or a
 * profile attribute. v0.4.0: "gpu-<minor>-mig-<profile without dots>-<GI profile id>-<start>" ("1g5gb", with "me"
 * for a media-extension profile, attached or as its own part); older releases:
 * "gpu-<minor>-mig-<GI profile id>-<start>-<size>". */
static void mig_from_name(model_dra_device *o) {
    const char *m = strstr(o->name, "-mig-");
    if (!m) return;
    char part[4][32];
    int np = 0;
    for (const char *p = m + 5; *p && np < 4;) {
        size_t n = strcspn(p, "-");
        if (n == 0 || n >= sizeof part[0]) return;
        memcpy(part[np], p, n);
        part[np++][n] = 0;
        p += n + (p[n] == '-');
    }
    bool named = np >= 3 && strchr(part[0], 'g') && isalpha((unsigned char)part[0][strlen(part[0]) - 1]);
    if (!named) {   /* older form: <gi>-<start>-<size> */
        if (np == 3 && o->mig_start < 0) {
            o->mig_start = atoi(part[1]);
            o->mig_size = atoi(part[2]);
        }
        return;
    }
    bool me_part = np == 4 && !strcmp(part[1], "me");
    const char *start = part[me_part ? 3 : 2];
    if ((np != 3 && !me_part) || !isdigit((unsigned char)start[0])) return;
    if (o->mig_start < 0) o->mig_start = atoi(start);   /* the size follows from the profile (merge_mig) */
    if (o->profile[0]) return;
    /* "1g5gb" -> "1g.5gb", "1g10gbme" or "1g10gb" + "me" -> "1g.10gb+me" */
    const char *g = strchr(part[0], 'g');
    size_t len = strlen(part[0]);
    bool me = me_part || (len > 4 && !strcmp(part[0] + len - 4, "gbme"));
    snprintf(o->profile, sizeof o->profile, "%.*s.%.*s%s", (int)(g - part[0] + 1), part[0],
             (int)(len - (size_t)(g - part[0] + 1) - (me && !me_part ? 2 : 0)), g + 1, me ? "+me" : "");
}

/* A growing buffer of attribute records (model_dra_device.attrs). */
typedef struct abuf {
    char *p;
    size_t len, cap;
    bool oom;
} abuf;

static void ab_put(abuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 1024;
        while (nc < b->len + n + 1) nc *= 2;
        char *q = realloc(b->p, nc);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = nc;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

/* One device's attributes as records, names qualified as the allocator's lookupAttribute finds them (an
 * unqualified name is the driver's own); values the allocator cannot compare (a type it does not know) are left
 * out, as a device lacking the attribute. */
static void attrs_encode(abuf *b, const cJSON *attrs, const char *driver) {
    size_t dl = strlen(driver);
    const cJSON *a;
    cJSON_ArrayForEach(a, attrs) {
        if (!a->string || !*a->string || !cJSON_IsObject(a)) continue;
        size_t nl = strlen(a->string);
        bool qualified = strchr(a->string, '/') != NULL;
        if ((qualified ? nl : dl + 1 + nl) >= MODEL_DRA_ATTR_LEN) continue;   /* longer than a qualified name may be */
        const cJSON *v;
        char type = 0, num[32];
        const char *val = NULL;
        if ((v = model_json_get(a, "string")) && cJSON_IsString(v)) type = 's', val = v->valuestring;
        else if ((v = model_json_get(a, "version")) && cJSON_IsString(v)) type = 'v', val = v->valuestring;
        else if ((v = model_json_get(a, "int")) && cJSON_IsNumber(v)) {
            snprintf(num, sizeof num, "%lld", (long long)jint(v, INT64_MIN, INT64_MAX, 0));
            type = 'i', val = num;
        } else if ((v = model_json_get(a, "bool")) && cJSON_IsBool(v)) type = 'b', val = cJSON_IsTrue(v) ? "true" : "false";
        if (!type) continue;   /* a type the allocator cannot compare either */
        if (!qualified) {
            ab_put(b, driver, dl);
            ab_put(b, "/", 1);
        }
        ab_put(b, a->string, nl + 1);
        ab_put(b, &type, 1);
        ab_put(b, val, strlen(val) + 1);
    }
    ab_put(b, "", 1);
}

static void device_parse(const cJSON *d, bool nvidia, model_dra_device *o) {
    memset(o, 0, sizeof *o);
    o->mig_start = o->mig_size = o->minor = -1;
    cpy(o->name, sizeof o->name, model_json_str(d, "name"));
    if (!nvidia) return;
    const cJSON *attrs = model_json_get(d, "attributes"), *caps = model_json_get(d, "capacity");
    const char *type = attr_str(attrs, "type");
    o->type = type && !strcmp(type, "gpu") ? MODEL_DRA_GPU : type && !strcmp(type, "mig") ? MODEL_DRA_MIG : MODEL_DRA_OTHER;
    cpy(o->uuid, sizeof o->uuid, attr_str(attrs, "uuid"));
    cpy(o->parent_uuid, sizeof o->parent_uuid, attr_str(attrs, "parentUUID"));
    cpy(o->product, sizeof o->product, attr_str(attrs, "productName"));
    cpy(o->profile, sizeof o->profile, attr_str(attrs, "profile"));
    int m = cap_mib(caps, "memory");
    o->memory_mib = m > 0 ? m : 0;
    /* the driver adds one capacity memorySlice<i> per memory slice the MIG device covers (deviceinfo.go) */
    for (int i = 0; i < MODEL_MIG_MAX_SLICES; i++) {
        char k[32];
        snprintf(k, sizeof k, "memorySlice%d", i);
        if (!model_json_get(caps, k)) continue;
        if (o->mig_start < 0) o->mig_start = i;
        o->mig_size = i - o->mig_start + 1;
    }
    if (o->type == MODEL_DRA_MIG && (o->mig_start < 0 || !o->profile[0])) mig_from_name(o);
    int minor, used = 0;
    if (sscanf(o->name, "gpu-%d%n", &minor, &used) == 1 && minor >= 0 && (o->name[used] == 0 || o->name[used] == '-'))
        o->minor = minor;
}

int model_dra_slice_parse(const cJSON *slice, model_dra_slice *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    const cJSON *spec = model_json_get(slice, "spec"), *pool = model_json_get(spec, "pool");
    const char *name = model_json_str(model_json_get(slice, "metadata"), "name");
    const char *driver = model_json_str(spec, "driver"), *pname = model_json_str(pool, "name");
    if (!name || !*name || !driver || !*driver || !pname) {
        snprintf(err, errlen, "ResourceSlice %s: metadata.name, spec.driver and spec.pool.name are required",
                 name ? name : "(no name)");
        return -1;
    }
    cpy(out->name, sizeof out->name, name);
    cpy(out->driver, sizeof out->driver, driver);
    cpy(out->pool, sizeof out->pool, pname);
    cpy(out->node, sizeof out->node, model_json_str(spec, "nodeName"));
    const cJSON *gen = model_json_get(pool, "generation"), *cnt = model_json_get(pool, "resourceSliceCount");
    out->generation = jint(gen, -(INT64_C(1) << 53), INT64_C(1) << 53, 0);
    /* a count beyond INT_MAX stays a pool that is never complete */
    out->count = (int)jint(cnt, 1, INT_MAX, 1);
    const cJSON *devs = model_json_get(spec, "devices");
    /* an object's members iterate like a list's items, but no room was counted for them */
    if (devs && !cJSON_IsArray(devs) && !cJSON_IsNull(devs)) {
        snprintf(err, errlen, "ResourceSlice %s: spec.devices is not a list", name);
        return -1;
    }
    int n = cJSON_IsArray(devs) ? cJSON_GetArraySize(devs) : 0;
    if (n > 0 && !(out->dev = calloc((size_t)n, sizeof *out->dev))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    bool nvidia = !strcmp(driver, MODEL_DRA_DRIVER);
    const cJSON *d;
    abuf ab = {0};
    size_t *off = n > 0 ? malloc((size_t)n * sizeof *off) : NULL;
    if (n > 0 && !off) ab.oom = true;
    cJSON_ArrayForEach(d, devs) {
        if (!cJSON_IsObject(d) || !model_json_str(d, "name")) continue;
        if (nvidia && !ab.oom) {
            off[out->ndev] = ab.len;
            attrs_encode(&ab, model_json_get(d, "attributes"), driver);
        }
        device_parse(d, nvidia, &out->dev[out->ndev++]);
    }
    if (ab.oom) {
        free(off);
        free(ab.p);
        model_dra_slice_clear(out);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    out->attrs = ab.p;   /* final: the devices point into it */
    for (int i = 0; nvidia && ab.p && i < out->ndev; i++) out->dev[i].attrs = ab.p + off[i];
    free(off);
    return 0;
}

void model_dra_slice_clear(model_dra_slice *s) {
    if (!s) return;
    free(s->dev);
    free(s->attrs);
    memset(s, 0, sizeof *s);
}

/* ------------------------------------------------------------ merging into a node ---- */

static void note(model_node *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(model_node *n, const char *fmt, ...) {
    if (n->dra_note[0]) return;   /* the first disagreement is the one worth reading */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n->dra_note, sizeof n->dra_note, fmt, ap);
    va_end(ap);
}

static void refuse(model_node *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refuse(model_node *n, const char *fmt, ...) {
    if (n->reason[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n->reason, sizeof n->reason, fmt, ap);
    va_end(ap);
}

/* NVML names products with spaces ("NVIDIA A100-SXM4-40GB"), GFD's label with dashes: the catalog's key. */
static const model_gpu_product *dra_product(model_node *n, const model_catalog *cat, const char *nvml, int memory_mib) {
    char label[MODEL_NAME_LEN];
    cpy(label, sizeof label, nvml);
    for (char *p = label; *p; p++)
        if (*p == ' ') *p = '-';
    model_product_label pl;
    model_catalog_parse_label(cat, label, &pl);
    if (pl.product) return pl.product;
    /* One unknown model per node, as for labelled nodes (local_product). */
    bool local_used = false;
    for (int i = 0; i < n->ngpus; i++) local_used |= n->gpus[i].product == &n->local_product;
    if (local_used) return strcasecmp(n->local_product.product, label) == 0 ? &n->local_product : NULL;
    if (memory_mib <= 0) return NULL;
    model_product_init_generic(&n->local_product, label, memory_mib, 0);
    return &n->local_product;
}

static model_gpu *gpu_by_uuid(model_node *n, const char *uuid) {
    for (int i = 0; uuid && *uuid && i < n->ngpus; i++)
        if (!strcmp(n->gpus[i].uuid, uuid)) return &n->gpus[i];
    return NULL;
}

/* The device plugin's GPU that may be this physical GPU when its GPUs carry no UUID: same index. */
static model_gpu *gpu_by_minor(model_node *n, int minor) {
    for (int i = 0; minor >= 0 && i < n->ngpus; i++)
        if (!n->gpus[i].uuid[0] && !n->gpus[i].dra && n->gpus[i].index == minor) return &n->gpus[i];
    return NULL;
}

static int profile_of(const model_gpu_product *p, const model_dra_device *d) {
    int idx = model_product_profile_index(p, d->profile);
    if (idx >= 0 || d->mig_size <= 0) return idx;
    return -1;
}

/* The MIG devices of one physical GPU onto g: instances it lacks are added when the layout allows. */
static void merge_mig(model_node *n, model_gpu *g, const model_dra_device *dev, int ndev, const char *uuid) {
    for (int k = 0; k < ndev; k++) {
        const model_dra_device *d = &dev[k];
        if (d->type != MODEL_DRA_MIG || strcmp(d->parent_uuid, uuid) != 0) continue;
        int pi = profile_of(g->product, d);
        if (pi < 0 || d->mig_start < 0) {
            refuse(n, "DRA device %s: MIG profile \"%s\" at slice %d is not one tessera knows on %s", d->name,
                   d->profile, d->mig_start, g->product->product);
            continue;
        }
        if (g->mig_dynamic) continue;   /* every placement is a possible device: instances come with claims */
        bool have = false;
        for (int i = 0; i < g->ninst; i++) have |= g->inst[i].profile == pi && g->inst[i].start == d->mig_start;
        if (have) continue;
        char why[160];
        if (model_gpu_add_mig_instance(g, pi, d->mig_start, why, sizeof why) != 0)
            refuse(n, "DRA device %s does not fit the MIG layout the device plugin reports: %s", d->name, why);
    }
}

/* ------------------------------------------------------------ the GPUs' attributes ---- */

/* The node keeps, per GPU, the attributes of the device that is that GPU (n->dra_attrs): one block per GPU,
 * "<GPU position + 1><length: 2 bytes, little-endian><records as model_dra_device.attrs, the empty name
 * included>", so that finding a GPU's block skips the others whole (a DRA node is rebuilt on every claim
 * event: this is on that path). */

/* The records of GPU gpu, or NULL. */
static const char *node_block(const model_node *n, int gpu) {
    const unsigned char *p = (const unsigned char *)n->dra_attrs, *end = p ? p + n->dra_attrs_len : NULL;
    while (p && p + 3 <= end) {
        size_t len = (size_t)p[1] | (size_t)p[2] << 8;
        if (p[0] == gpu + 1) return (const char *)p + 3;
        p += 3 + len;
    }
    return NULL;
}

static const char *records_find(const char *p, const char *qualified) {
    while (p && *p) {
        size_t nl = strlen(p);
        const char *v = p + nl + 1;
        if (!strcmp(p, qualified)) return v;
        p = v + strlen(v) + 1;
    }
    return NULL;
}

const char *model_dra_attr(const model_dra_device *d, const char *qualified) {
    return d && qualified ? records_find(d->attrs, qualified) : NULL;
}

const char *model_dra_node_attr(const model_node *n, int gpu, const char *qualified) {
    return n && qualified ? records_find(node_block(n, gpu), qualified) : NULL;
}

/* Append GPU gpu's block (records rec[0..len), the empty name included). */
static bool node_block_put(model_node *n, int gpu, const char *rec, size_t len) {
    if (len > 0xffff) return false;   /* more than any device has: the GPU lacks its attributes */
    char *q = realloc(n->dra_attrs, n->dra_attrs_len + 3 + len);
    if (!q) return false;
    n->dra_attrs = q;
    q += n->dra_attrs_len;
    q[0] = (char)(gpu + 1);
    q[1] = (char)(len & 0xff);
    q[2] = (char)(len >> 8);
    memcpy(q + 3, rec, len);
    n->dra_attrs_len += 3 + len;
    return true;
}

/* The length of a device's records, the empty name included. */
static size_t records_len(const char *p) {
    const char *q = p;
    while (*q) {
        q += strlen(q) + 1;
        q += strlen(q) + 1;
    }
    return (size_t)(q - p) + 1;
}

/* GPU gpu's attributes: those of its device (gd), or for a GPU DRA publishes only as MIG devices the ones every
 * one of them has with the same value (the GPU's own: product, PCIe root; not a device's uuid or profile). */
static void node_attrs_record(model_node *n, int gpu, const model_dra_device *gd, const model_dra_device *dev, int ndev,
                              const char *uuid) {
    if (gpu < 0 || gpu >= MODEL_MAX_GPUS || node_block(n, gpu)) return;
    if (gd) {
        if (gd->attrs) node_block_put(n, gpu, gd->attrs, records_len(gd->attrs));
        return;
    }
    const model_dra_device *src = NULL;
    for (int k = 0; !src && k < ndev; k++)
        if (dev[k].type == MODEL_DRA_MIG && !strcmp(dev[k].parent_uuid, uuid)) src = &dev[k];
    if (!src || !src->attrs) return;
    abuf b = {0};
    for (const char *p = src->attrs; *p;) {
        const char *v = p + strlen(p) + 1, *next = v + strlen(v) + 1;
        bool shared = true;
        for (int k = 0; shared && k < ndev; k++) {
            if (dev[k].type != MODEL_DRA_MIG || strcmp(dev[k].parent_uuid, uuid) != 0) continue;
            const char *o = model_dra_attr(&dev[k], p);
            shared = o && !strcmp(o, v);
        }
        if (shared) ab_put(&b, p, (size_t)(next - p));
        p = next;
    }
    ab_put(&b, "", 1);
    if (!b.oom) node_block_put(n, gpu, b.p, b.len);
    free(b.p);
}

/* ------------------------------------------------------------ topology ---- */

/* The rule of dra.h ("topology of the GPUs DRA publishes") on the GPUs of n: the agent's matrix by UUID where it
 * knows a pair, then PHB for pairs under one PCIe root that nothing else describes. */
static void dra_topology(model_node *n) {
    const model_dra_links *l = n->dra_links;
    int ng = n->ngpus < MODEL_MAX_GPUS ? n->ngpus : MODEL_MAX_GPUS;
    int row[MODEL_MAX_GPUS];
    const char *root[MODEL_MAX_GPUS];   /* NULL: not a GPU DRA publishes, or its device lacks the attribute */
    for (int g = 0; g < ng; g++) {
        row[g] = -1;
        for (int k = 0; l && n->gpus[g].uuid[0] && k < l->n; k++)
            if (!strcmp(l->uuid[k], n->gpus[g].uuid)) row[g] = k;
        root[g] = model_dra_node_attr(n, g, MODEL_DRA_ATTR_PCIE_ROOT);
    }
    for (int a = 0; a < ng; a++)
        for (int b = a + 1; b < ng; b++) {
            if (row[a] >= 0 && row[b] >= 0)
                model_topo_set(n, a, b, (model_link)l->link[row[a]][row[b]], l->nvlinks[row[a]][row[b]]);
            else if (root[a] && root[b] && !strcmp(root[a], root[b]) && model_topo_link(n, a, b) == MODEL_LINK_UNKNOWN)
                model_topo_set(n, a, b, MODEL_LINK_PHB, 0);
        }
    /* in the matrix now: the merged model (the one installed and copied around) need not carry it */
    free(n->dra_links);
    n->dra_links = NULL;
}

/* offered: the devices may be allocated to new claims; false for a pool whose newest generation is not all seen
 * (the allocator takes nothing from it), whose GPUs are still modelled so that the claims holding them count. */
static int add_dra(model_node *n, const model_dra_device *dev, int ndev, const model_catalog *cat, bool offered) {
    if (!n || ndev <= 0) return 0;
    if (n->gpus_cap < MODEL_MAX_GPUS) return -1;   /* compacted (model_node_compact): no room; merge into a clone */
    if (!cat) cat = model_catalog_default();
    bool any = false;
    for (int k = 0; k < ndev; k++) any |= dev[k].type != MODEL_DRA_OTHER;
    if (any && n->plugin_idle) {
        /* GFD labels the GPUs, the device plugin is off: DRA hands them out. Not a fault any more. */
        n->reason[0] = 0;
        n->plugin_idle = false;
        n->ngpus = 0;
        free(n->dra_attrs);
        n->dra_attrs = NULL;
        n->dra_attrs_len = 0;
    }
    int marked = 0;
    /* Each physical GPU once: a "gpu" device, or the parent named by MIG devices. */
    for (int k = 0; k < ndev; k++) {
        const model_dra_device *d = &dev[k];
        if (d->type == MODEL_DRA_OTHER) continue;
        const char *uuid = d->type == MODEL_DRA_GPU ? d->uuid : d->parent_uuid;
        if (!uuid[0]) {
            refuse(n, "DRA device %s has no %s attribute: tessera cannot tell which GPU it is", d->name,
                   d->type == MODEL_DRA_GPU ? "uuid" : "parentUUID");
            continue;
        }
        bool seen = false;   /* handled with an earlier device of the same GPU */
        for (int j = 0; j < k && !seen; j++) {
            const model_dra_device *e = &dev[j];
            seen = e->type != MODEL_DRA_OTHER && !strcmp(e->type == MODEL_DRA_GPU ? e->uuid : e->parent_uuid, uuid);
        }
        if (seen) continue;
        bool whole = false, migs = false;
        const model_dra_device *gd = NULL, *first_mig = NULL;
        for (int j = k; j < ndev; j++) {
            const model_dra_device *e = &dev[j];
            if (e->type == MODEL_DRA_GPU && !strcmp(e->uuid, uuid)) { whole = true; gd = e; }
            if (e->type == MODEL_DRA_MIG && !strcmp(e->parent_uuid, uuid)) { migs = true; if (!first_mig) first_mig = e; }
        }
        const model_dra_device *src = gd ? gd : first_mig;
        /* Both the GPU and MIG devices of it: the driver's DynamicMIG, where every placement is published and
         * instances exist only while a claim holds them. */
        bool dynamic = whole && migs;
        int minor = gd ? gd->minor : -1;
        if (minor < 0 && first_mig) {
            int m;
            if (sscanf(first_mig->name, "gpu-%d-mig-", &m) == 1) minor = m;
        }
        model_gpu *g = gpu_by_uuid(n, uuid);
        if (!g && (g = gpu_by_minor(n, minor)) != NULL) {
            note(n, "device-plugin GPUs carry no UUID (no tessera.io/gpus annotation): DRA device %s matched to "
                 "GPU %d by index", src->name, g->index);
            cpy(g->uuid, sizeof g->uuid, uuid);
        }
        const model_gpu_product *p = dra_product(n, cat, src->product, gd ? gd->memory_mib : 0);
        if (g) {
            /* One physical GPU seen by both paths. */
            if (p && g->product != p && strcasecmp(g->product->model_id, p->model_id) != 0)
                note(n, "GPU %s: the device plugin says %s, DRA says %s; the device plugin's view is kept", uuid,
                     g->product->product, p->product);
            if (g->mode == MODEL_GPU_TIMESLICE || g->mode == MODEL_GPU_MPS) {
                refuse(n, "GPU %s is %s by the device plugin and published by DRA too: a claim on it could not be "
                       "accounted; give each GPU to one of them", uuid, g->mode == MODEL_GPU_MPS ? "shared by MPS" : "time-sliced");
                continue;
            }
            if ((g->mode == MODEL_GPU_MIG) != migs) {
                refuse(n, "GPU %s: the device plugin sees MIG %s, DRA %s", uuid, g->mode == MODEL_GPU_MIG ? "on" : "off",
                       migs ? "publishes MIG devices" : "publishes the whole GPU");
                continue;
            }
            if (migs) merge_mig(n, g, dev, ndev, uuid);
            g->dra |= offered;
            node_attrs_record(n, (int)(g - n->gpus), gd, dev, ndev, uuid);
            marked++;
            continue;
        }
        if (!p) {
            refuse(n, "DRA device %s: product \"%s\" is not in tessera's catalog and its memory is unknown", src->name,
                   src->product);
            continue;
        }
        if (migs && !p->mig_capable) {
            refuse(n, "DRA publishes MIG devices of GPU %s, but %s is not MIG-capable in tessera's catalog", uuid, p->product);
            continue;
        }
        int mem = gd && gd->memory_mib > 0 ? gd->memory_mib : 0;
        model_gpu *ng = model_node_add_gpu(n, p, migs ? MODEL_GPU_MIG : MODEL_GPU_WHOLE, 1, mem);
        if (!ng) {
            refuse(n, "DRA publishes more GPUs than tessera models per node (%d)", MODEL_MAX_GPUS);
            break;
        }
        cpy(ng->uuid, sizeof ng->uuid, uuid);
        if (minor >= 0) ng->index = minor;
        ng->mig_dynamic = dynamic;
        if (migs) merge_mig(n, ng, dev, ndev, uuid);
        ng->dra = offered;   /* not offered: held by its claims only, reachable by no request */
        ng->dra_only = true;
        node_attrs_record(n, (int)(ng - n->gpus), gd, dev, ndev, uuid);
        marked++;
    }
    if (marked) n->has_dra = true;
    /* GFD counts the physical GPUs: more GPUs than that means one was counted twice (UUIDs that differ between
     * the tessera.io/gpus annotation and DRA, say). Better no GPU pods than a GPU promised twice. */
    if (marked && n->gpu_count_label > 0 && n->ngpus > n->gpu_count_label)
        refuse(n, "the device plugin and DRA together show %d GPUs, but GPU feature discovery counts %d "
               "(nvidia.com/gpu.count): a GPU would be counted twice; check the UUIDs in tessera.io/gpus against "
               "the ResourceSlices", n->ngpus, n->gpu_count_label);
    return marked;
}

int model_node_add_dra(model_node *n, const model_dra_device *dev, int ndev, const model_catalog *cat) {
    return add_dra(n, dev, ndev, cat, true);
}

/* ------------------------------------------------------------ allocations ---- */

int model_dra_claim_results(const cJSON *claim, model_dra_result *out, int max) {
    const cJSON *alloc = model_json_get(model_json_get(claim, "status"), "allocation");
    if (!cJSON_IsObject(alloc)) return -1;
    const cJSON *res = model_json_get(model_json_get(alloc, "devices"), "results"), *r;
    int n = 0;
    cJSON_ArrayForEach(r, res) {
        if (n >= max || !cJSON_IsObject(r)) continue;
        model_dra_result *o = &out[n++];
        memset(o, 0, sizeof *o);
        cpy(o->request, sizeof o->request, model_json_str(r, "request"));
        cpy(o->driver, sizeof o->driver, model_json_str(r, "driver"));
        cpy(o->pool, sizeof o->pool, model_json_str(r, "pool"));
        cpy(o->device, sizeof o->device, model_json_str(r, "device"));
        o->admin = cJSON_IsTrue(model_json_get(r, "adminAccess"));
    }
    return n;
}

int64_t model_dra_pool_current(const model_dra_slice *const *slices, int n, const char *driver, const char *pool,
                               int *have, int *want) {
    int64_t g = INT64_MIN;
    *have = *want = 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(slices[i]->driver, driver) && !strcmp(slices[i]->pool, pool) && slices[i]->generation > g)
            g = slices[i]->generation;
    for (int i = 0; i < n; i++)
        if (!strcmp(slices[i]->driver, driver) && !strcmp(slices[i]->pool, pool) && slices[i]->generation == g) {
            (*have)++;
            *want = slices[i]->count;
        }
    return g;
}

const model_dra_device *model_dra_find_device(const model_dra_slice *const *slices, int n, const char *driver,
                                              const char *pool, const char *name) {
    /* the current generation first; then the newest older one that has it: while a generation is replaced slice
     * by slice, a claim's device may still be only in a slice of the one before */
    const model_dra_device *best = NULL;
    int64_t best_gen = INT64_MIN;
    for (int i = 0; i < n; i++) {
        const model_dra_slice *s = slices[i];
        if (strcmp(s->driver, driver) || strcmp(s->pool, pool) || (best && s->generation <= best_gen)) continue;
        for (int j = 0; j < s->ndev; j++)
            if (!strcmp(s->dev[j].name, name)) {
                best = &s->dev[j];
                best_gen = s->generation;
                break;
            }
    }
    return best;
}

/* Append the devices of slice s not already in all[0..*nd) (by name: a newer generation's copy wins). */
static int append_devices(model_dra_device **all, int *nd, int *cap, const model_dra_slice *s, int from) {
    for (int j = 0; j < s->ndev; j++) {
        bool dup = false;
        for (int k = from; k < *nd && !dup; k++) dup = !strcmp((*all)[k].name, s->dev[j].name);
        if (dup) continue;
        if (*nd == *cap) {
            int nc = *cap ? 2 * *cap : 16;
            model_dra_device *g = realloc(*all, (size_t)nc * sizeof *g);
            if (!g) return -1;
            *all = g;
            *cap = nc;
        }
        (*all)[(*nd)++] = s->dev[j];
    }
    return 0;
}

int model_dra_merge_slices(model_node *m, const model_dra_slice *const *slices, int n, const model_catalog *cat) {
    int nd = 0, cap = 0, nh = 0, hcap = 0;
    model_dra_device *all = NULL, *held = NULL;   /* offered; of incomplete pools (held by claims only) */
    for (int i = 0; i < n; i++) {
        const model_dra_slice *s = slices[i];
        if (strcmp(s->driver, MODEL_DRA_DRIVER) != 0) continue;
        int have, want;
        int64_t cur = model_dra_pool_current(slices, n, s->driver, s->pool, &have, &want);
        bool first = true;   /* the pool's first slice in this array: the pool is handled once, here */
        for (int k = 0; k < i && first; k++) first = strcmp(slices[k]->driver, s->driver) || strcmp(slices[k]->pool, s->pool);
        if (!first) continue;
        if (have >= want) {
            for (int k = i; k < n; k++)
                if (!strcmp(slices[k]->driver, s->driver) && !strcmp(slices[k]->pool, s->pool) &&
                    slices[k]->generation == cur && append_devices(&all, &nd, &cap, slices[k], 0) != 0)
                    goto oom;
            continue;
        }
        /* The 1.36 allocator takes nothing from a pool until every slice of its newest generation is seen. Its
         * devices, newest generation first, stay in the model for the claims that hold them (no under-count while
         * a generation is replaced slice by slice), offered to none. */
        if (!m->dra_note[0])
            snprintf(m->dra_note, sizeof m->dra_note, "DRA pool %.120s is incomplete (%d of %d ResourceSlices of "
                     "generation %lld): none of its devices is offered until all arrive", s->pool, have, want,
                     (long long)cur);
        int from = nh;
        for (int64_t g = cur, next;; g = next) {
            next = INT64_MIN;
            for (int k = i; k < n; k++) {
                const model_dra_slice *t = slices[k];
                if (strcmp(t->driver, s->driver) || strcmp(t->pool, s->pool)) continue;
                if (t->generation == g && append_devices(&held, &nh, &hcap, t, from) != 0) goto oom;
                if (t->generation < g && t->generation > next) next = t->generation;
            }
            if (next == INT64_MIN) break;
        }
    }
    int marked = nd > 0 ? add_dra(m, all, nd, cat, true) : 0;
    marked += nh > 0 ? add_dra(m, held, nh, cat, false) : 0;
    free(all);
    free(held);
    if (marked > 0) dra_topology(m);
    return marked;
oom:
    free(all);
    free(held);
    return -1;
}

int model_dra_grant(const model_node *n, const model_dra_device *d, model_grant *g, char *err, size_t errlen) {
    memset(g, 0, sizeof *g);
    g->mig_inst = g->mig_profile = g->mig_start = -1;
    g->replica = -1;
    const char *uuid = d->type == MODEL_DRA_MIG ? d->parent_uuid : d->uuid;
    int gi = -1;
    for (int i = 0; uuid[0] && i < n->ngpus; i++)
        if (!strcmp(n->gpus[i].uuid, uuid)) gi = i;
    if (gi < 0 || d->type == MODEL_DRA_OTHER) {
        snprintf(err, errlen, "device %s: no GPU %s on node %s", d->name, uuid[0] ? uuid : "(no uuid)", n->name);
        return -1;
    }
    const model_gpu *gpu = &n->gpus[gi];
    g->gpu = (int8_t)gi;
    if (d->type == MODEL_DRA_GPU && gpu->mode == MODEL_GPU_WHOLE) {
        g->exclusive = true;
        g->memory_mib = gpu->memory_mib;
        g->compute_permille = 1000;
        return 0;
    }
    if (gpu->mode != MODEL_GPU_MIG) {
        snprintf(err, errlen, "device %s: GPU %s is %s", d->name, uuid, model_gpu_mode_name(gpu->mode));
        return -1;
    }
    const model_gpu_product *p = gpu->product;
    int pi = -1, start = d->mig_start;
    if (d->type == MODEL_DRA_GPU) {
        /* The whole GPU of a DynamicMIG GPU: held as the one profile that spans every memory slice. */
        for (int k = 0; k < p->nprofiles; k++)
            if (p->profiles[k].memory_slices >= p->mig_memory_slices && !p->profiles[k].media && pi < 0) pi = k;
        start = 0;
    } else {
        pi = profile_of(p, d);
    }
    if (pi < 0 || start < 0) {
        snprintf(err, errlen, "device %s: profile \"%s\" at slice %d is unknown on %s", d->name, d->profile, start, p->product);
        return -1;
    }
    g->mig_profile = (int8_t)pi;
    g->mig_start = (int8_t)start;
    for (int k = 0; k < gpu->ninst; k++)
        if (gpu->inst[k].profile == pi && gpu->inst[k].start == start) g->mig_inst = (int8_t)k;
    g->mig_create = g->mig_inst < 0;   /* DynamicMIG: the instance exists while the claim holds it */
    g->memory_mib = d->memory_mib > 0 ? d->memory_mib : p->profiles[pi].memory_mib;
    return 0;
}

/* ------------------------------------------------------------ requests ---- */

typedef struct sel {
    bool driver_ok;          /* device.driver == gpu.nvidia.com, or an attribute of that driver was tested */
    int type;                /* 0 unset, MODEL_DRA_GPU, MODEL_DRA_MIG */
    char product[MODEL_NAME_LEN];
    char profile[32];
    int min_mib;
} sel;

static void trim(const char **s, const char **e) {
    while (*s < *e && isspace((unsigned char)**s)) (*s)++;
    while (*e > *s && isspace((unsigned char)(*e)[-1])) (*e)--;
}

/* s..e starts with lit (after blanks): advance past it. */
static bool eat(const char **s, const char *e, const char *lit) {
    while (*s < e && isspace((unsigned char)**s)) (*s)++;
    size_t n = strlen(lit);
    if ((size_t)(e - *s) < n || memcmp(*s, lit, n) != 0) return false;
    *s += n;
    return true;
}

/* A quoted CEL string ('x' or "x", no escapes) into out. */
static bool eat_str(const char **s, const char *e, char *out, size_t len) {
    while (*s < e && isspace((unsigned char)**s)) (*s)++;
    if (*s >= e || (**s != '\'' && **s != '"')) return false;
    char q = **s;
    const char *b = *s + 1, *c = b;
    while (c < e && *c != q && *c != '\\') c++;
    if (c >= e || *c != q || (size_t)(c - b) >= len) return false;
    memcpy(out, b, (size_t)(c - b));
    out[c - b] = 0;
    *s = c + 1;
    return true;
}

/* device.attributes['gpu.nvidia.com'].NAME or device.attributes["gpu.nvidia.com"].NAME */
static bool eat_qualified(const char **s, const char *e, const char *what, char *name, size_t len) {
    char dom[64];
    if (!eat(s, e, "device.") || !eat(s, e, what) || !eat(s, e, "[") || !eat_str(s, e, dom, sizeof dom) ||
        strcmp(dom, MODEL_DRA_DRIVER) != 0 || !eat(s, e, "]") || !eat(s, e, "."))
        return false;
    size_t n = 0;
    while (*s < e && (isalnum((unsigned char)**s) || **s == '_') && n + 1 < len) name[n++] = *(*s)++;
    name[n] = 0;
    return n > 0;
}

/* One term of a conjunction; false when it is not one of the understood forms. */
static bool term(const char *s, const char *e, sel *o) {
    trim(&s, &e);
    char v[MODEL_NAME_LEN], attr[32];
    const char *p = s;
    if (eat(&p, e, "device.driver") && eat(&p, e, "==") && eat_str(&p, e, v, sizeof v) && p == e) {
        if (strcmp(v, MODEL_DRA_DRIVER) != 0) return false;
        o->driver_ok = true;
        return true;
    }
    p = s;
    if (eat_qualified(&p, e, "attributes", attr, sizeof attr) && eat(&p, e, "==") && eat_str(&p, e, v, sizeof v) && p == e) {
        o->driver_ok = true;   /* only this driver's devices have attributes in its domain */
        if (!strcmp(attr, "type")) {
            int t = !strcmp(v, "gpu") ? MODEL_DRA_GPU : !strcmp(v, "mig") ? MODEL_DRA_MIG : -1;
            if (t < 0 || (o->type && o->type != t)) return false;
            o->type = t;
            return true;
        }
        if (!strcmp(attr, "productName")) { cpy(o->product, sizeof o->product, v); return true; }
        if (!strcmp(attr, "profile")) { cpy(o->profile, sizeof o->profile, v); return true; }
        return false;
    }
    p = s;
    char q[32];
    if (eat_qualified(&p, e, "capacity", attr, sizeof attr) && !strcmp(attr, "memory") && eat(&p, e, ".compareTo(") &&
        eat(&p, e, "quantity(") && eat_str(&p, e, q, sizeof q) && eat(&p, e, ")") && eat(&p, e, ")") &&
        eat(&p, e, ">=") && eat(&p, e, "0") && p == e) {
        int64_t milli;
        if (model_quantity_parse_milli(q, &milli, NULL, 0) != 0 || milli < 0) return false;
        int64_t mib64 = (milli / 1000 + (1 << 20) - 1) >> 20;
        int mib = mib64 > INT_MAX ? INT_MAX : (int)mib64;
        if (mib > o->min_mib) o->min_mib = mib;
        o->driver_ok = true;
        return true;
    }
    return false;
}

/* A CEL expression: terms joined by && (no ||, no parentheses, no negation). */
static bool expression(const char *x, sel *o, char *why, size_t whylen) {
    if (strchr(x, '|') || strchr(x, '!') || strchr(x, '?')) goto unknown;
    const char *s = x;
    for (;;) {
        const char *amp = strstr(s, "&&");
        const char *e = amp ? amp : s + strlen(s);
        /* a parenthesis is fine only inside the compareTo(quantity(...)) form, which term checks */
        if (!term(s, e, o)) goto unknown;
        if (!amp) return true;
        s = amp + 2;
    }
unknown:
    snprintf(why, whylen, "CEL selector beyond what tessera understands: %.160s", x);
    return false;
}

static bool selectors(const cJSON *sels, sel *o, char *why, size_t whylen) {
    const cJSON *s;
    cJSON_ArrayForEach(s, sels) {
        const char *x = model_json_str(model_json_get(s, "cel"), "expression");
        if (!x) {
            snprintf(why, whylen, "a selector that is not CEL");
            return false;
        }
        if (!expression(x, o, why, whylen)) return false;
    }
    return true;
}

static model_dra_verdict unjudged(char *why, size_t whylen, const char *fmt, const char *arg) {
    if (fmt) snprintf(why, whylen, fmt, arg ? arg : "");
    return MODEL_DRA_UNJUDGED;
}

/* One exact request (or the only alternative of firstAvailable) added to out. */
static model_dra_verdict one_request(const cJSON *rq, model_dra_class_fn classes, void *user, model_request *out,
                                     char *why, size_t whylen) {
    const char *cls = model_json_str(rq, "deviceClassName");
    if (!cls || !*cls) return unjudged(why, whylen, "a device request without deviceClassName", NULL);
    const char *mode = model_json_str(rq, "allocationMode");
    if (mode && strcmp(mode, "ExactCount") != 0)
        return unjudged(why, whylen, "allocationMode %s (tessera judges ExactCount only)", mode);
    const cJSON *cnt = model_json_get(rq, "count");
    int count = (int)jint(cnt, 0, MODEL_MAX_GPUS + 1, 1);   /* out of range either way: unjudged below */
    if (count < 1 || count > MODEL_MAX_GPUS) return unjudged(why, whylen, "a device count tessera cannot place", NULL);
    const cJSON *cl = classes ? classes(user, cls) : NULL;
    if (!cl) return unjudged(why, whylen, "DeviceClass %s is not known to tessera", cls);
    sel o = {0};
    if (!selectors(model_json_get(model_json_get(cl, "spec"), "selectors"), &o, why, whylen)) return MODEL_DRA_UNJUDGED;
    if (!selectors(model_json_get(rq, "selectors"), &o, why, whylen)) return MODEL_DRA_UNJUDGED;
    if (!o.driver_ok) return unjudged(why, whylen, "DeviceClass %s does not select gpu.nvidia.com devices", cls);
    if (!o.type) o.type = o.profile[0] ? MODEL_DRA_MIG : MODEL_DRA_GPU;
    model_request r = {0};
    r.via_dra = true;
    r.count = count;
    if (o.type == MODEL_DRA_GPU) {
        if (o.profile[0]) return unjudged(why, whylen, "a MIG profile asked of whole GPUs", NULL);
        r.kind = MODEL_REQ_WHOLE;
        r.dra_min_memory_mib = o.min_mib;
    } else {
        if (!o.profile[0]) return unjudged(why, whylen, "MIG devices of any profile (tessera needs the profile)", NULL);
        if (o.min_mib) return unjudged(why, whylen, "a memory selector on MIG devices", NULL);
        r.kind = MODEL_REQ_MIG;
        cpy(r.mig_profile, sizeof r.mig_profile, o.profile);
        char *me = strstr(r.mig_profile, ".me");
        if (me && me[3] == 0) *me = '+';
    }
    if (o.product[0]) {
        r.nmodels = 1;
        char *m = r.models[0];
        cpy(m, sizeof r.models[0], o.product);
        for (; *m; m++)
            if (*m == ' ') *m = '-';   /* GFD's spelling, which the catalog and fit compare */
    }
    if (out->kind == MODEL_REQ_NONE) {
        *out = r;
        return MODEL_DRA_JUDGED;
    }
    int sum = out->count + r.count;
    out->count = r.count;   /* compare shapes without the counts */
    bool same = model_request_same(out, &r);
    out->count = sum;
    if (!same || sum > MODEL_MAX_GPUS) return unjudged(why, whylen, "device requests of different shapes in one pod", NULL);
    return MODEL_DRA_JUDGED;
}

/* Whether a constraint's request list names request rq ("gpu"), or its alternative sub ("gpu/a100"); an empty
 * list names every request (the allocator's matches()). */
static bool names_request(const cJSON *list, const char *rq, const char *sub) {
    if (cJSON_GetArraySize(list) == 0) return true;
    const cJSON *e;
    cJSON_ArrayForEach(e, list) {
        const char *s = cJSON_IsString(e) ? e->valuestring : "";
        size_t l = strlen(rq);
        if (!strcmp(s, rq)) return true;
        if (sub && !strncmp(s, rq, l) && s[l] == '/' && !strcmp(s + l + 1, sub)) return true;
    }
    return false;
}

#define CLAIM_MAX_REQUESTS 32   /* the API's limit on a claim's requests */

/* The claim's constraints into out, over its judged requests (names[0..n), their alternatives subs[], admin[] the
 * admin-access ones). Judged when every constraint covers all of the claim's requests that ask GPUs, and none
 * covers an admin-access request (the device monitored would join the set); several claims' devices are one
 * request here, so a claim's constraints are judged only when its devices are all the pod asks (prior: devices
 * asked before this claim). */
static model_dra_verdict constraints(const cJSON *spec, const char *const *names, const char *const *subs,
                                     const bool *admin, int n, bool prior, model_request *out, char *why, size_t whylen) {
    const cJSON *cs = model_json_get(model_json_get(spec, "devices"), "constraints"), *c;
    int judged = 0;
    for (int i = 0; i < n; i++) judged += !admin[i];
    cJSON_ArrayForEach(c, cs) {
        if (!judged) return MODEL_DRA_JUDGED;   /* no GPU asked: nothing to constrain */
        const char *m = model_json_str(c, "matchAttribute"), *d = model_json_str(c, "distinctAttribute");
        const char *attr = m ? m : d;
        if (!attr || (m && d)) return unjudged(why, whylen, "a device constraint tessera does not know (neither "
                                                            "matchAttribute nor distinctAttribute)", NULL);
        if (!strchr(attr, '/') || strlen(attr) >= MODEL_DRA_ATTR_LEN)
            return unjudged(why, whylen, "a constraint on attribute %.120s, which is not a fully qualified name", attr);
        const cJSON *list = model_json_get(c, "requests");
        for (int i = 0; i < n; i++) {
            bool named = names_request(list, names[i], subs[i]);
            if (named && admin[i])
                return unjudged(why, whylen, "a constraint over an adminAccess request (%.100s)", names[i]);
            if (!named && !admin[i])
                return unjudged(why, whylen, "a constraint over part of a claim's GPU requests (not %.100s)", names[i]);
        }
        if (out->kind == MODEL_REQ_MIG)
            return unjudged(why, whylen, "a constraint on MIG devices (%.120s)", attr);
        if (prior)
            return unjudged(why, whylen, "a constraint on one of several claims that ask GPUs (%.120s)", attr);
        if (out->dra_nconstraints >= MODEL_DRA_MAX_CONSTRAINTS)
            return unjudged(why, whylen, "more constraints than tessera judges in one claim", NULL);
        model_dra_constraint *k = &out->dra_constraint[out->dra_nconstraints++];
        cpy(k->attr, sizeof k->attr, attr);
        k->distinct = d != NULL;
    }
    return MODEL_DRA_JUDGED;
}

model_dra_verdict model_dra_request(const cJSON *claim_spec, model_dra_class_fn classes, void *user,
                                    model_request *out, char *why, size_t whylen) {
    if (why && whylen) why[0] = 0;
    const cJSON *reqs = model_json_get(model_json_get(claim_spec, "devices"), "requests"), *rq;
    model_dra_verdict v = MODEL_DRA_NOTHING;
    /* an earlier claim's devices: its constraints, or this claim's, would cover part of the request */
    bool prior = out->kind != MODEL_REQ_NONE, prior_constrained = out->dra_nconstraints > 0;
    const char *names[CLAIM_MAX_REQUESTS], *subs[CLAIM_MAX_REQUESTS];
    bool admin[CLAIM_MAX_REQUESTS];
    int nnames = 0;
    cJSON_ArrayForEach(rq, reqs) {
        const cJSON *exact = model_json_get(rq, "exactly"), *first = model_json_get(rq, "firstAvailable");
        /* v1beta1's flat form, seen in old manifests */
        if (!exact && !first && model_json_str(rq, "deviceClassName")) exact = rq;
        if (first) {
            if (cJSON_GetArraySize(first) != 1)
                return unjudged(why, whylen, "firstAvailable with several alternatives (DynamicResources picks one)", NULL);
            exact = cJSON_GetArrayItem(first, 0);
        }
        if (!exact) return unjudged(why, whylen, "a device request tessera cannot read", NULL);
        bool adm = cJSON_IsTrue(model_json_get(exact, "adminAccess"));
        if (nnames < CLAIM_MAX_REQUESTS) {
            names[nnames] = model_json_str(rq, "name");
            if (!names[nnames]) names[nnames] = "";
            subs[nnames] = first ? model_json_str(exact, "name") : NULL;
            admin[nnames++] = adm;
        }
        if (adm) continue;   /* monitoring access: allocates nothing */
        model_dra_verdict one = one_request(exact, classes, user, out, why, whylen);
        if (one == MODEL_DRA_UNJUDGED) return one;
        v = MODEL_DRA_JUDGED;
    }
    if (v == MODEL_DRA_JUDGED && prior_constrained)
        return unjudged(why, whylen, "a constraint on one of several claims that ask GPUs", NULL);
    if (v == MODEL_DRA_JUDGED && constraints(claim_spec, names, subs, admin, nnames, prior, out, why, whylen) ==
                                     MODEL_DRA_UNJUDGED)
        return MODEL_DRA_UNJUDGED;
    return v;
}

cJSON *model_dra_chart_classes(void) {
    return cJSON_Parse(
        "{\"gpu.nvidia.com\":{\"spec\":{\"selectors\":[{\"cel\":{\"expression\":\"device.driver == 'gpu.nvidia.com' && "
        "device.attributes['gpu.nvidia.com'].type == 'gpu'\"}}]}},"
        "\"mig.nvidia.com\":{\"spec\":{\"selectors\":[{\"cel\":{\"expression\":\"device.driver == 'gpu.nvidia.com' && "
        "device.attributes['gpu.nvidia.com'].type == 'mig'\"}}]}}}");
}

void model_dra_request_of_pod(model_request *dr, const model_request *pod) {
    dr->topology = pod->topology;   /* tessera.io/topology: the pod's, whichever path its GPUs take */
    dr->priority = pod->priority;
    dr->cpu_milli = pod->cpu_milli;
    dr->memory_bytes = pod->memory_bytes;
}

/* ------------------------------------------------------------ constraints ---- */

void model_dra_groups_of(const model_node *n, const model_request *r, model_dra_groups *out) {
    memset(out, 0, sizeof *out);
    out->n = r->dra_nconstraints < MODEL_DRA_MAX_CONSTRAINTS ? r->dra_nconstraints : MODEL_DRA_MAX_CONSTRAINTS;
    int ng = n->ngpus < MODEL_MAX_GPUS ? n->ngpus : MODEL_MAX_GPUS;
    for (int c = 0; c < out->n; c++) {
        out->distinct[c] = r->dra_constraint[c].distinct;
        const char *vals[MODEL_MAX_GPUS];
        int nv = 0;
        for (int g = 0; g < ng; g++) {
            const char *v = model_dra_node_attr(n, g, r->dra_constraint[c].attr);
            if (!v) continue;   /* lacks it: id 0 */
            int k = 0;
            while (k < nv && strcmp(vals[k], v) != 0) k++;   /* type and value, as "<type><value>" */
            if (k == nv) vals[nv++] = v;
            out->id[c][g] = (uint8_t)(k + 1);
        }
    }
}

bool model_dra_groups_admit(const model_dra_groups *gr, const int8_t *chosen, int k, int g) {
    for (int c = 0; c < gr->n; c++) {
        uint8_t v = gr->id[c][g];
        if (!v) return false;
        for (int i = 0; i < k; i++) {
            bool same = gr->id[c][chosen[i]] == v;
            if (same == gr->distinct[c]) return false;
        }
    }
    return true;
}

/* Depth-first over the candidates in order, keeping the largest set found (enough once it reaches want). */
static void largest_from(const model_dra_groups *gr, const bool *cand, int ngpus, int from, int8_t *set, int k,
                         int want, int *best) {
    if (k > *best) *best = k;
    for (int g = from; g < ngpus && *best < want; g++) {
        if (!cand[g] || !model_dra_groups_admit(gr, set, k, g)) continue;
        int left = 0;
        for (int h = g; h < ngpus; h++) left += cand[h];
        if (k + left <= *best) return;   /* cannot beat what is found */
        set[k] = (int8_t)g;
        largest_from(gr, cand, ngpus, g + 1, set, k + 1, want, best);
    }
}

int model_dra_groups_largest(const model_dra_groups *gr, const bool *cand, int ngpus, int want) {
    int8_t set[MODEL_MAX_GPUS];
    int best = 0;
    if (ngpus > MODEL_MAX_GPUS) ngpus = MODEL_MAX_GPUS;
    largest_from(gr, cand, ngpus, 0, set, 0, want, &best);
    return best;
}

void model_dra_groups_why(const model_dra_groups *gr, const model_request *r, const bool *cand, int ngpus,
                          const char *what, char *why, size_t whylen) {
    if (!why || !whylen) return;
    int best = model_dra_groups_largest(gr, cand, ngpus, r->count), lack = 0, have = 0;
    for (int g = 0; g < ngpus && g < MODEL_MAX_GPUS; g++) {
        if (!cand[g]) continue;
        have++;
        bool all = true;
        for (int c = 0; c < gr->n; c++) all &= gr->id[c][g] != 0;
        lack += !all;
    }
    const model_dra_constraint *c0 = &r->dra_constraint[0];
    const char *kind0 = c0->distinct ? "distinctAttribute" : "matchAttribute";
    if (lack == have) {
        snprintf(why, whylen, "no %sGPU here has %s%s (the claim's %s needs it on every device)", what, c0->attr,
                 gr->n > 1 ? " and the claim's other constrained attributes" : "", kind0);
        return;
    }
    char lacking[64] = "";
    if (lack) snprintf(lacking, sizeof lacking, "; %d lack%s the attribute", lack, lack == 1 ? "s" : "");
    if (gr->n == 1 && !c0->distinct)
        snprintf(why, whylen, "no %d %sGPUs share %s (matchAttribute); the largest group is %d%s", r->count, what,
                 c0->attr, best, lacking);
    else if (gr->n == 1)
        snprintf(why, whylen, "no %d %sGPUs have distinct values of %s (distinctAttribute); at most %d do%s", r->count,
                 what, c0->attr, best, lacking);
    else
        snprintf(why, whylen, "no %d %sGPUs meet the claim's %d constraints (%s %s, ...); at most %d do%s", r->count,
                 what, gr->n, kind0, c0->attr, best, lacking);
}

/* ------------------------------------------------------------ static feasibility ---- */

bool model_dra_extended_on(const model_node *n) {
    if (!n || !n->has_dra || n->ngpus == 0) return false;
    for (int i = 0; i < n->ngpus; i++)
        if (!n->gpus[i].dra_only) return false;
    return true;
}

bool model_dra_extended_request(const model_request *class_req, const model_request *pod_req, model_request *out) {
    if (pod_req->kind != MODEL_REQ_WHOLE || pod_req->isolation != MODEL_ISO_DEFAULT || pod_req->memory_mib ||
        pod_req->memory_permille || pod_req->compute_permille || pod_req->via_dra || pod_req->count < 1 ||
        pod_req->count > MODEL_MAX_GPUS)
        return false;
    if (class_req->nmodels > 0 && pod_req->nmodels > 0) return false;   /* two model lists are not combined */
    model_request r = *class_req;
    r.count = pod_req->count;
    model_dra_request_of_pod(&r, pod_req);
    if (pod_req->nmodels > 0) {
        r.nmodels = pod_req->nmodels;
        memcpy(r.models, pod_req->models, sizeof r.models);
    }
    *out = r;
    return true;
}

