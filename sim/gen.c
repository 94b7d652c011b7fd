/* gen.c -- synthetic traces; the distributions are written down in gen.h. */
#include "sim/gen.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* splitmix64: small, fast, and the same sequence on every platform. */
static uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s) { return (double)(next_u64(s) >> 11) * 0x1.0p-53; }

static double normal(uint64_t *s) {
    double u1 = uniform(s), u2 = uniform(s);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

typedef struct size_opt {
    double p;              /* probability within the kind */
    int gpus;              /* whole GPUs (0: a fraction) */
    const char *fraction;  /* tessera.io/gpu-fraction */
} size_opt;

typedef struct kind_spec {
    double median_s, sigma, lo_s, hi_s;
    double util_lo, util_hi;
    int priority;
    int cpu_milli, memory_gib;   /* per GPU or per fractional pod */
    int nsizes;
    size_opt sizes[4];
} kind_spec;

static const kind_spec specs[SIM_NKINDS] = {
    [SIM_TRAINING] = {7200, 1.0, 300, 48 * 3600, 0.6, 0.95, 100, 8000, 64, 4,
                      {{0.60, 1, NULL}, {0.25, 2, NULL}, {0.10, 4, NULL}, {0.05, 8, NULL}}},
    [SIM_INFERENCE] = {3600, 1.0, 60, 24 * 3600, 0.1, 0.5, 1000, 2000, 8, 4,
                       {{0.40, 0, "0.1"}, {0.40, 0, "0.25"}, {0.10, 0, "0.5"}, {0.10, 1, NULL}}},
    [SIM_NOTEBOOK] = {7200, 0.8, 600, 12 * 3600, 0.0, 0.1, 500, 1000, 4, 2, {{0.60, 0, "0.1"}, {0.40, 0, "0.25"}}},
    [SIM_BATCH] = {1800, 1.2, 60, 12 * 3600, 0.5, 1.0, 0, 4000, 16, 2, {{0.70, 1, NULL}, {0.30, 0, "0.5"}}},
};

void sim_gen_defaults(sim_gen_opts *o) {
    memset(o, 0, sizeof *o);
    o->seed = 1;
    o->workloads = 1000;
    o->hours = 8;
    o->mix[SIM_TRAINING] = 0.2;
    o->mix[SIM_INFERENCE] = 0.4;
    o->mix[SIM_NOTEBOOK] = 0.3;
    o->mix[SIM_BATCH] = 0.1;
    o->tenants = 8;
}

int sim_gen_parse_mix(const char *s, sim_gen_opts *o, char *err, size_t errlen) {
    double mix[SIM_NKINDS] = {0};
    char buf[256];
    if (strlen(s) >= sizeof buf) {
        snprintf(err, errlen, "--mix: too long");
        return -1;
    }
    strcpy(buf, s);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) goto bad;
        *eq = 0;
        int k = sim_kind_parse(tok);
        char *end;
        double v = strtod(eq + 1, &end);
        if (k < 0 || end == eq + 1 || *end || !(v >= 0) || v > 1e6) goto bad;
        mix[k] = v;
    }
    memcpy(o->mix, mix, sizeof mix);
    return 0;
bad:
    snprintf(err, errlen, "--mix \"%s\": expected kind=share pairs, e.g. training=0.2,inference=0.5,notebook=0.3", s);
    return -1;
}

int sim_gen_parse_training_sizes(const char *s, sim_gen_opts *o, char *err, size_t errlen) {
    const kind_spec *k = &specs[SIM_TRAINING];   /* the sizes are its size options, in their order */
    double share[4] = {0}, total = 0;
    char buf[256];
    if (strlen(s) >= sizeof buf) goto bad;
    strcpy(buf, s);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '='), *end;
        if (!eq) goto bad;
        *eq = 0;
        long gpus = strtol(tok, &end, 10);
        if (end == tok || *end) goto bad;
        int z = 0;
        while (z < k->nsizes && k->sizes[z].gpus != gpus) z++;
        double v = strtod(eq + 1, &end);
        if (z == k->nsizes || end == eq + 1 || *end || !(v >= 0) || v > 1e6) goto bad;
        share[z] = v;
        total += v;
    }
    if (!(total > 0)) goto bad;
    memcpy(o->training_sizes, share, sizeof share);
    return 0;
bad:
    snprintf(err, errlen, "--training-sizes \"%s\": expected gpus=share pairs for 1, 2, 4 and 8 GPUs, e.g. "
             "1=0.3,2=0.35,4=0.25,8=0.1 (at least one share > 0)", s);
    return -1;
}

/* The pod part of one size option of a kind, as a trace writes it. */
static cJSON *pod_part(const kind_spec *k, const size_opt *z) {
    cJSON *part = cJSON_CreateObject();
    cJSON *req = cJSON_AddObjectToObject(cJSON_AddObjectToObject(part, "resources"), "requests");
    int units = z->gpus ? z->gpus : 1;
    char buf[32];
    snprintf(buf, sizeof buf, "%dm", k->cpu_milli * units);
    cJSON_AddStringToObject(req, "cpu", buf);
    snprintf(buf, sizeof buf, "%dGi", k->memory_gib * units);
    cJSON_AddStringToObject(req, "memory", buf);
    if (z->gpus) {
        snprintf(buf, sizeof buf, "%d", z->gpus);
        cJSON_AddStringToObject(req, "nvidia.com/gpu", buf);
    } else {
        cJSON *ann = cJSON_AddObjectToObject(part, "annotations");
        cJSON_AddStringToObject(ann, "tessera.io/gpu-fraction", z->fraction);
        cJSON_AddStringToObject(ann, "tessera.io/isolation", "any");
    }
    return part;
}

static int by_arrival(const void *a, const void *b) {
    const sim_workload *x = a, *y = b;
    if (x->arrival != y->arrival) return x->arrival < y->arrival ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

sim_trace *sim_gen(const sim_gen_opts *o, char *err, size_t errlen) {
    double total = 0;
    for (int k = 0; k < SIM_NKINDS; k++) total += o->mix[k];
    if (o->workloads < 0 || o->workloads > 50000000) {
        snprintf(err, errlen, "--workloads: expected 0..50000000");
        return NULL;
    }
    if (!(o->hours > 0) || o->hours > 1e6) {
        snprintf(err, errlen, "--hours: expected a number of hours > 0");
        return NULL;
    }
    if (!(total > 0)) {
        snprintf(err, errlen, "--mix: at least one kind needs a share > 0");
        return NULL;
    }
    if (o->tenants < 1 || o->tenants > 65535) {
        snprintf(err, errlen, "--tenants: expected 1..65535");
        return NULL;
    }
    sim_trace *t = sim_trace_new();
    int shape[SIM_NKINDS][4];
    for (int k = 0; k < SIM_NKINDS; k++)
        for (int z = 0; z < specs[k].nsizes; z++) {
            cJSON *part = pod_part(&specs[k], &specs[k].sizes[z]);
            shape[k][z] = sim_trace_shape(t, part, err, errlen);
            cJSON_Delete(part);
            if (shape[k][z] < 0) goto fail;   /* our own pods: a bug, but say so */
        }
    for (int i = 0; i < o->tenants; i++) {
        char name[32];
        snprintf(name, sizeof name, "team-%d", i + 1);
        sim_trace_tenant(t, name);
    }
    double tsizes = 0;   /* --training-sizes: their total; 0 keeps the spec's shares */
    for (int z = 0; z < 4; z++) tsizes += o->training_sizes[z];
    uint64_t rng = o->seed * 0x2545F4914F6CDD1DULL + 12345;
    double span = o->hours * 3600.0;
    for (long i = 0; i < o->workloads; i++) {
        double pick = uniform(&rng) * total, acc = 0;
        int k = 0;
        for (; k < SIM_NKINDS - 1; k++) {
            acc += o->mix[k];
            if (pick < acc) break;
        }
        while (o->mix[k] <= 0) k--;   /* rounding at the top edge */
        const kind_spec *s = &specs[k];
        sim_workload w = {0};
        w.kind = (uint8_t)k;
        w.arrival = floor(uniform(&rng) * span * 1000.0) / 1000.0;   /* ms resolution, as written */
        double d = s->median_s * exp(s->sigma * normal(&rng));
        d = d < s->lo_s ? s->lo_s : d > s->hi_s ? s->hi_s : d;
        w.duration = floor(d * 1000.0) / 1000.0;
        w.util = (float)(floor((s->util_lo + (s->util_hi - s->util_lo) * uniform(&rng)) * 1000.0) / 1000.0);
        w.priority = s->priority;
        double zp = uniform(&rng), zacc = 0;
        int z = 0;
        for (; z < s->nsizes - 1; z++) {
            zacc += k == SIM_TRAINING && tsizes > 0 ? o->training_sizes[z] / tsizes : s->sizes[z].p;
            if (zp < zacc) break;
        }
        w.shape = shape[k][z];
        w.tenant = (uint16_t)(next_u64(&rng) % (uint64_t)o->tenants);
        char id[48];
        snprintf(id, sizeof id, "%s-%ld", sim_kind_name(k), i + 1);
        if (sim_trace_add(t, &w, id) != 0) {
            snprintf(err, errlen, "out of memory after %ld workloads", i);
            goto fail;
        }
    }
    /* Sort by arrival; equal times keep generation order (the id offsets ascend). */
    qsort(t->w, (size_t)t->n, sizeof *t->w, by_arrival);
    return t;
fail:
    sim_trace_free(t);
    return NULL;
}
