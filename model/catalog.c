/* catalog.c -- loads the GPU catalog (gpus.json schema) into flat product records and
 * answers lookups by GFD product string, pre-R470 alias or node label value.
 * The compiled-in copy of data/gpus.json is parsed once, on first use.
 */
#include "catalog.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const unsigned char model_catalog_json[];
extern const size_t model_catalog_json_len;

typedef struct catalog_alias {
    char name[MODEL_NAME_LEN];
    int product;   /* index into products */
} catalog_alias;

struct model_catalog {
    int n, cap;
    model_gpu_product *products;
    int nalias, capalias;
    catalog_alias *aliases;
};

/* Where in the document the parser is, so every message names the entry it is about. */
typedef struct load_ctx {
    char *err;
    size_t errlen;
    char where[160];
} load_ctx;

static int load_fail(load_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int load_fail(load_ctx *c, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->err && c->errlen) snprintf(c->err, c->errlen, "catalog: %s: %s", c->where, msg);
    return -1;
}

/* Unknown facts are null or absent in the data and read as 0; anything that is present
 * but not a whole number in range is a broken file. */
static int get_int(load_ctx *c, const cJSON *obj, const char *key, int lo, int hi, int *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    *out = 0;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsNumber(v)) return load_fail(c, "\"%s\" must be a number or null", key);
    double d = v->valuedouble;
    if (d != floor(d) || d < lo || d > hi)
        return load_fail(c, "\"%s\" must be a whole number in [%d, %d]", key, lo, hi);
    *out = (int)d;
    return 0;
}

static int get_bool(load_ctx *c, const cJSON *obj, const char *key, bool *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    *out = false;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v)) return load_fail(c, "\"%s\" must be true, false or null", key);
    *out = cJSON_IsTrue(v);
    return 0;
}

/* A string field copied into a fixed buffer; NULL result when null/absent. */
static int get_str(load_ctx *c, const cJSON *obj, const char *key, char *buf, size_t len, bool *present) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    buf[0] = 0;
    *present = false;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsString(v)) return load_fail(c, "\"%s\" must be a string or null", key);
    if (strlen(v->valuestring) >= len)
        return load_fail(c, "\"%s\" is longer than %zu characters", key, len - 1);
    strcpy(buf, v->valuestring);
    *present = true;
    return 0;
}

static int parse_cc(load_ctx *c, const cJSON *entry, model_gpu_product *p) {
    char cc[16];
    bool present;
    if (get_str(c, entry, "compute_capability", cc, sizeof cc, &present)) return -1;
    if (!present) return 0;
    int major, minor, used = 0;
    if (sscanf(cc, "%d.%d%n", &major, &minor, &used) != 2 || cc[used] || major < 0 || minor < 0)
        return load_fail(c, "\"compute_capability\" must look like \"8.0\", got \"%s\"", cc);
    p->cc_major = major;
    p->cc_minor = minor;
    return 0;
}

static int parse_profile(load_ctx *c, const cJSON *jp, int slices_total, model_mig_profile *out) {
    memset(out, 0, sizeof *out);
    if (!cJSON_IsObject(jp)) return load_fail(c, "profile must be an object");
    bool present;
    if (get_str(c, jp, "name", out->name, sizeof out->name, &present)) return -1;
    if (!present || !out->name[0]) return load_fail(c, "profile \"name\" is required");
    size_t where_len = strlen(c->where);
    snprintf(c->where + where_len, sizeof c->where - where_len, " profile \"%s\"", out->name);

    if (get_int(c, jp, "compute_slices", 0, 64, &out->compute_slices) ||
        get_int(c, jp, "memory_slices", 0, MODEL_MIG_MAX_SLICES, &out->memory_slices) ||
        get_int(c, jp, "sm_count", 0, 1 << 20, &out->sm_count) ||
        get_int(c, jp, "max_instances", 0, MODEL_MIG_MAX_SLICES, &out->max_instances))
        return -1;

    /* The first observation is as good as any: memory drifts by driver and the node's
     * label wins at run time. */
    const cJSON *rep = cJSON_GetObjectItemCaseSensitive(jp, "memory_mib_reported");
    if (rep && !cJSON_IsNull(rep)) {
        if (!cJSON_IsArray(rep)) return load_fail(c, "\"memory_mib_reported\" must be an array");
        const cJSON *first = cJSON_GetArrayItem(rep, 0);
        if (first) {
            if (!cJSON_IsObject(first)) return load_fail(c, "\"memory_mib_reported\" items must be objects");
            if (get_int(c, first, "mib", 0, 1 << 30, &out->memory_mib)) return -1;
        }
    }

    /* A profile we cannot place is useless to a placement model, so the table is required. */
    const cJSON *pl = cJSON_GetObjectItemCaseSensitive(jp, "placement");
    if (!cJSON_IsObject(pl)) return load_fail(c, "\"placement\" {starts, size} is required");
    int size;
    if (get_int(c, pl, "size", 1, MODEL_MIG_MAX_SLICES, &size)) return -1;
    if (size != out->memory_slices)
        return load_fail(c, "memory_slices %d must equal placement.size %d", out->memory_slices, size);
    const cJSON *starts = cJSON_GetObjectItemCaseSensitive(pl, "starts");
    if (!cJSON_IsArray(starts) || cJSON_GetArraySize(starts) == 0)
        return load_fail(c, "\"placement.starts\" must be a non-empty array");
    const cJSON *s;
    cJSON_ArrayForEach(s, starts) {
        if (!cJSON_IsNumber(s) || s->valuedouble != floor(s->valuedouble) || s->valuedouble < 0 ||
            s->valuedouble > MODEL_MIG_MAX_SLICES)
            return load_fail(c, "\"placement.starts\" must hold whole numbers in [0, %d)", MODEL_MIG_MAX_SLICES);
        int st = (int)s->valuedouble;
        if (st + size > slices_total)
            return load_fail(c, "start %d + size %d exceeds memory_slices_total %d", st, size, slices_total);
        out->start_mask |= (uint8_t)(1u << st);
    }
    /* Unknown max_instances: the placement table itself is the physical limit. */
    if (out->max_instances == 0) out->max_instances = __builtin_popcount(out->start_mask);
    size_t nl = strlen(out->name);
    out->media = nl > 3 && strcmp(out->name + nl - 3, "+me") == 0;
    c->where[where_len] = 0;
    return 0;
}

static int parse_profiles(load_ctx *c, const cJSON *arr, model_gpu_product *p) {
    p->nprofiles = 0;
    if (!arr || cJSON_IsNull(arr)) return 0;
    if (!cJSON_IsArray(arr)) return load_fail(c, "MIG profiles must be an array");
    if (cJSON_GetArraySize(arr) > MODEL_MAX_PROFILES)
        return load_fail(c, "more than %d MIG profiles", MODEL_MAX_PROFILES);
    const cJSON *jp;
    cJSON_ArrayForEach(jp, arr) {
        model_mig_profile *mp = &p->profiles[p->nprofiles];
        if (parse_profile(c, jp, p->mig_memory_slices, mp)) return -1;
        for (int i = 0; i < p->nprofiles; i++)
            if (strcmp(p->profiles[i].name, mp->name) == 0)
                return load_fail(c, "MIG profile \"%s\" listed twice", mp->name);
        p->nprofiles++;
    }
    return 0;
}

static int find_index(const model_catalog *cat, const char *name) {
    for (int i = 0; i < cat->n; i++)
        if (strcmp(cat->products[i].product, name) == 0) return i;
    return -1;
}

static int find_alias(const model_catalog *cat, const char *name) {
    for (int i = 0; i < cat->nalias; i++)
        if (strcmp(cat->aliases[i].name, name) == 0) return cat->aliases[i].product;
    return -1;
}

static int add_product(load_ctx *c, model_catalog *cat, const model_gpu_product *p) {
    if (find_index(cat, p->product) >= 0 || find_alias(cat, p->product) >= 0)
        return load_fail(c, "product \"%s\" appears twice", p->product);
    if (cat->n == cat->cap) {
        int ncap = cat->cap ? 2 * cat->cap : 32;
        model_gpu_product *np = realloc(cat->products, (size_t)ncap * sizeof *np);
        if (!np) return load_fail(c, "out of memory");
        cat->products = np;
        cat->cap = ncap;
    }
    cat->products[cat->n++] = *p;
    return 0;
}

static int add_alias(load_ctx *c, model_catalog *cat, const char *name, int product) {
    if (find_index(cat, name) >= 0 || find_alias(cat, name) >= 0)
        return load_fail(c, "alias \"%s\" is already a product or alias", name);
    if (cat->nalias == cat->capalias) {
        int ncap = cat->capalias ? 2 * cat->capalias : 8;
        catalog_alias *na = realloc(cat->aliases, (size_t)ncap * sizeof *na);
        if (!na) return load_fail(c, "out of memory");
        cat->aliases = na;
        cat->capalias = ncap;
    }
    catalog_alias *a = &cat->aliases[cat->nalias++];
    size_t n = strlen(name);
    assert(n < sizeof a->name);  /* split_names only yields names that fit */
    memcpy(a->name, name, n + 1);
    a->product = product;
    return 0;
}

/* Splits "A / B" (one variant sold under two names) into names[]; returns how many. */
static int split_names(load_ctx *c, const char *s, char names[][MODEL_NAME_LEN], int max) {
    int n = 0;
    while (*s) {
        const char *sep = strstr(s, " / ");
        size_t len = sep ? (size_t)(sep - s) : strlen(s);
        if (len == 0) return load_fail(c, "empty product name in \"%s\"", s);
        if (len >= MODEL_NAME_LEN) return load_fail(c, "product name longer than %d characters", MODEL_NAME_LEN - 1);
        if (n == max) return load_fail(c, "more than %d names in one variant", max);
        memcpy(names[n], s, len);
        names[n][len] = 0;
        n++;
        s = sep ? sep + 3 : s + len;
    }
    return n;
}

static int parse_variant(load_ctx *c, model_catalog *cat, const cJSON *jv, const model_gpu_product *base,
                         const cJSON *die_profiles) {
    if (!cJSON_IsObject(jv)) return load_fail(c, "variant must be an object");
    char buf[4 * MODEL_NAME_LEN], names[4][MODEL_NAME_LEN], aliases[4][MODEL_NAME_LEN];
    bool present;
    if (get_str(c, jv, "gfd_product", buf, sizeof buf, &present)) return -1;
    if (!present) return 0;  /* a model nobody saw a label for: nothing can match it */
    int nnames = split_names(c, buf, names, 4);
    if (nnames < 0) return -1;
    if (nnames == 0) return load_fail(c, "\"gfd_product\" is empty");
    size_t where_len = strlen(c->where);
    snprintf(c->where + where_len, sizeof c->where - where_len, " product \"%s\"", names[0]);

    model_gpu_product p = *base;
    int v;
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(jv, "memory_mib");
    if (item && !cJSON_IsNull(item)) {
        if (get_int(c, jv, "memory_mib", 0, 1 << 30, &v)) return -1;
        p.memory_mib = v;
    }
    item = cJSON_GetObjectItemCaseSensitive(jv, "sm_count");
    if (item && !cJSON_IsNull(item)) {
        if (get_int(c, jv, "sm_count", 0, 1 << 20, &v)) return -1;
        p.sm_count = v;
    }
    const cJSON *profiles = die_profiles;
    item = cJSON_GetObjectItemCaseSensitive(jv, "mig_profiles");
    if (item && !cJSON_IsNull(item)) profiles = item;
    if (p.mig_capable && parse_profiles(c, profiles, &p)) return -1;

    int first = cat->n;
    for (int i = 0; i < nnames; i++) {
        memcpy(p.product, names[i], sizeof p.product);  /* same size, NUL-terminated by split_names */
        if (add_product(c, cat, &p)) return -1;
    }
    if (get_str(c, jv, "gfd_product_pre_r470", buf, sizeof buf, &present)) return -1;
    if (present) {
        int nal = split_names(c, buf, aliases, 4);
        if (nal < 0) return -1;
        /* Aliases pair with names in order; extra aliases belong to the last name. */
        for (int i = 0; i < nal; i++)
            if (add_alias(c, cat, aliases[i], first + (i < nnames ? i : nnames - 1))) return -1;
    }
    c->where[where_len] = 0;
    return 0;
}

static int parse_entry(load_ctx *c, model_catalog *cat, const cJSON *e, int idx) {
    snprintf(c->where, sizeof c->where, "gpus[%d]", idx);
    if (!cJSON_IsObject(e)) return load_fail(c, "entry must be an object");
    model_gpu_product base;
    memset(&base, 0, sizeof base);
    bool present;
    if (get_str(c, e, "id", base.model_id, sizeof base.model_id, &present)) return -1;
    if (!present || !base.model_id[0]) return load_fail(c, "\"id\" is required");
    snprintf(c->where, sizeof c->where, "gpus[%d] \"%s\"", idx, base.model_id);
    if (get_str(c, e, "gfd_family", base.family, sizeof base.family, &present) || parse_cc(c, e, &base) ||
        get_int(c, e, "memory_mib", 0, 1 << 30, &base.memory_mib) ||
        get_int(c, e, "sm_count", 0, 1 << 20, &base.sm_count) ||
        get_bool(c, e, "mig_capable", &base.mig_capable) || get_bool(c, e, "mps_capable", &base.mps_capable))
        return -1;
    /* An MPS server takes 48 clients from Volta on, but the NVIDIA device plugin allows
     * 48 replicas only from compute capability 7.5 and 16 below (a V100, 7.0, gets 16):
     * the plugin's cap is what a node can advertise. */
    base.mps_max_clients = (base.cc_major > 7 || (base.cc_major == 7 && base.cc_minor >= 5)) ? 48 : 16;

    const cJSON *mig = cJSON_GetObjectItemCaseSensitive(e, "mig");
    const cJSON *die_profiles = NULL;
    if (base.mig_capable) {
        if (!cJSON_IsObject(mig)) return load_fail(c, "\"mig\" is required when mig_capable is true");
        if (get_int(c, mig, "compute_slices_total", 1, 64, &base.mig_compute_slices) ||
            get_int(c, mig, "memory_slices_total", 1, MODEL_MIG_MAX_SLICES, &base.mig_memory_slices) ||
            get_int(c, mig, "sm_total_mig_mode", 0, 1 << 20, &base.mig_sm_total))
            return -1;
        if (base.mig_memory_slices == 0 || base.mig_compute_slices == 0)
            return load_fail(c, "mig.compute_slices_total and mig.memory_slices_total are required");
        die_profiles = cJSON_GetObjectItemCaseSensitive(mig, "profiles");
    }

    const cJSON *vars = cJSON_GetObjectItemCaseSensitive(e, "variants");
    if (!cJSON_IsArray(vars)) return load_fail(c, "\"variants\" must be an array");
    const cJSON *jv;
    cJSON_ArrayForEach(jv, vars) {
        if (parse_variant(c, cat, jv, &base, die_profiles)) return -1;
    }
    return 0;
}

model_catalog *model_catalog_from_json(const char *json, size_t len, char *err, size_t errlen) {
    load_ctx c = {err, errlen, "document"};
    if (err && errlen) err[0] = 0;
    if (!json) {
        load_fail(&c, "no JSON text");
        return NULL;
    }
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        long off = at && at >= json && at <= json + len ? (long)(at - json) : -1;
        load_fail(&c, "not valid JSON (near byte %ld)", off);
        return NULL;
    }
    model_catalog *cat = calloc(1, sizeof *cat);
    if (!cat) {
        cJSON_Delete(root);
        load_fail(&c, "out of memory");
        return NULL;
    }
    const cJSON *gpus = cJSON_GetObjectItemCaseSensitive(root, "gpus");
    int rc = 0;
    if (!cJSON_IsArray(gpus)) {
        rc = load_fail(&c, "top-level \"gpus\" must be an array");
    } else {
        int idx = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, gpus) {
            if ((rc = parse_entry(&c, cat, e, idx++)) != 0) break;
        }
    }
    cJSON_Delete(root);
    if (rc) {
        model_catalog_free(cat);
        return NULL;
    }
    return cat;
}

model_catalog *model_catalog_from_file(const char *path, char *err, size_t errlen) {
    if (!path) {
        if (err && errlen) snprintf(err, errlen, "catalog: no file name");
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (err && errlen) snprintf(err, errlen, "catalog: cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 > cap) {
            cap = cap ? 2 * cap : 65536;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                if (err && errlen) snprintf(err, errlen, "catalog: %s: out of memory", path);
                return NULL;
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    bool failed = ferror(f);
    fclose(f);
    if (failed) {
        free(buf);
        if (err && errlen) snprintf(err, errlen, "catalog: cannot read %s", path);
        return NULL;
    }
    char inner[512];
    model_catalog *cat = model_catalog_from_json(buf, len, inner, sizeof inner);
    free(buf);
    if (!cat && err && errlen) snprintf(err, errlen, "%s (file %s)", inner, path);
    return cat;
}

void model_catalog_free(model_catalog *cat) {
    if (!cat) return;
    free(cat->products);
    free(cat->aliases);
    free(cat);
}

static model_catalog *default_catalog;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static void load_default(void) {
    char err[512];
    default_catalog = model_catalog_from_json((const char *)model_catalog_json, model_catalog_json_len, err, sizeof err);
    if (!default_catalog) {
        /* The embedded data is ours and was checked at build time by the tests; a failure
         * here is a broken build, not bad input. */
        fprintf(stderr, "tessera: the built-in GPU catalog (data/gpus.json) is broken: %s\n", err);
        abort();
    }
}

const model_catalog *model_catalog_default(void) {
    pthread_once(&default_once, load_default);
    return default_catalog;
}

int model_catalog_count(const model_catalog *cat) { return cat ? cat->n : 0; }

const model_gpu_product *model_catalog_at(const model_catalog *cat, int i) {
    if (!cat || i < 0 || i >= cat->n) return NULL;
    return &cat->products[i];
}

const model_gpu_product *model_catalog_find(const model_catalog *cat, const char *product) {
    if (!cat || !product) return NULL;
    int i = find_index(cat, product);
    if (i < 0) i = find_alias(cat, product);
    return i < 0 ? NULL : &cat->products[i];
}

static bool strip_suffix(char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    if (n < k || strcmp(s + n - k, suffix) != 0) return false;
    s[n - k] = 0;
    return true;
}

/* The label spelling of "+me" is ".me" (GFD and the device plugin replace '+'). */
static void canonical_profile(const char *name, char *out, size_t len) {
    snprintf(out, len, "%s", name);
    size_t n = strlen(out);
    if (n > 3 && strcmp(out + n - 3, ".me") == 0) out[n - 3] = '+';
}

void model_catalog_parse_label(const model_catalog *cat, const char *label, model_product_label *out) {
    memset(out, 0, sizeof *out);
    if (!label) return;
    char buf[256];
    if (strlen(label) >= sizeof buf) return;  /* no product is that long; leave it unknown */
    strcpy(buf, label);
    out->shared = strip_suffix(buf, "-SHARED");
    /* Profile names never contain "-MIG-", so the last one starts the suffix. */
    char *mig = NULL;
    for (char *p = strstr(buf, "-MIG-"); p; p = strstr(p + 1, "-MIG-")) mig = p;
    if (mig) {
        *mig = 0;
        const char *prof = mig + 5;
        if (strcmp(prof, "INVALID") == 0) out->mig_invalid = true;
        else canonical_profile(prof, out->mig_profile, sizeof out->mig_profile);
    }
    size_t n = strlen(buf);
    if (n >= sizeof out->base) {
        /* Longer than any product name: keep what fits for messages, match nothing. */
        memcpy(out->base, buf, sizeof out->base - 1);
        return;
    }
    memcpy(out->base, buf, n + 1);
    out->product = model_catalog_find(cat, out->base);
    if (out->product) return;
    /* Drivers before R470 leave out the "NVIDIA-" prefix, and aliases only cover the
     * names the data lists, so try the other spelling too. */
    char other[MODEL_NAME_LEN + 8];
    if (strncmp(out->base, "NVIDIA-", 7) == 0) {
        memcpy(other, out->base + 7, n - 7 + 1);
    } else {
        memcpy(other, "NVIDIA-", 7);
        memcpy(other + 7, out->base, n + 1);
    }
    out->product = model_catalog_find(cat, other);
}

int model_product_profile_index(const model_gpu_product *p, const char *name) {
    if (!p || !name) return -1;
    for (int i = 0; i < p->nprofiles; i++)
        if (strcmp(p->profiles[i].name, name) == 0) return i;
    char canon[64];
    if (strlen(name) >= sizeof canon) return -1;
    canonical_profile(name, canon, sizeof canon);
    if (strcmp(canon, name) == 0) return -1;
    for (int i = 0; i < p->nprofiles; i++)
        if (strcmp(p->profiles[i].name, canon) == 0) return i;
    return -1;
}

void model_product_init_generic(model_gpu_product *p, const char *product, int memory_mib, int sm_count) {
    memset(p, 0, sizeof *p);
    snprintf(p->product, sizeof p->product, "%s", product ? product : "");
    snprintf(p->model_id, sizeof p->model_id, "%s", p->product);
    p->memory_mib = memory_mib > 0 ? memory_mib : 0;
    p->sm_count = sm_count > 0 ? sm_count : 0;
    /* Any GPU recent enough to be missing from the catalog runs MPS with 48 clients. */
    p->mps_capable = true;
    p->mps_max_clients = 48;
}
