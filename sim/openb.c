/* openb.c -- reading the openb node and pod CSVs (from a file or the built-in copies)
 * and building model nodes and requests from them. See openb.h for the formats.
 */
#include "sim/openb.h"
#include "sim/json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/catalog.h"
#include "model/fit.h"

/* Compiled in by the Makefile from data/openb (NUL-terminated). */
extern const unsigned char sim_openb_nodes_csv[];
extern const size_t sim_openb_nodes_csv_len;
extern const unsigned char sim_openb_default_csv[];
extern const size_t sim_openb_default_csv_len;

/* ---------------------------------------------------------------- CSV */

#define MAXCOLS 16

/* One line split in place into fields; returns the field count. */
static int split(char *line, char **f) {
    int n = 0;
    f[n++] = line;
    for (char *p = line; *p; p++)
        if (*p == ',') {
            *p = 0;
            if (n == MAXCOLS) return -1;
            f[n++] = p + 1;
        }
    return n;
}

/* Next line of text[*pos..len) copied into a fresh buffer without its line ending; NULL
 * at the end. */
static char *next_line(const char *text, size_t len, size_t *pos) {
    if (*pos >= len) return NULL;
    size_t s = *pos, e = s;
    while (e < len && text[e] != '\n') e++;
    *pos = e + 1;
    size_t l = e - s;
    if (l && text[s + l - 1] == '\r') l--;
    char *out = malloc(l + 1);
    if (!out) return NULL;
    memcpy(out, text + s, l);
    out[l] = 0;
    return out;
}

static int col_of(char **hdr, int nh, const char *name) {
    for (int i = 0; i < nh; i++)
        if (!strcmp(hdr[i], name)) return i;
    return -1;
}

static bool parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (!*s) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

typedef struct csv {
    const char *text;
    size_t len, pos;
    int lineno;
    char *hdrline, *hdr[MAXCOLS];
    int nh;
} csv;

static int csv_open(csv *c, const char *text, size_t len, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    c->text = text;
    c->len = len;
    c->hdrline = next_line(text, len, &c->pos);
    c->lineno = 1;
    if (!c->hdrline || (c->nh = split(c->hdrline, c->hdr)) < 2) {
        free(c->hdrline);
        snprintf(err, errlen, "line 1: expected a CSV header");
        return -1;
    }
    return 0;
}

/* Find required columns; -1 with err naming the first missing one. */
static int csv_cols(csv *c, const char *const *names, int *idx, int n, bool *required, char *err, size_t errlen) {
    for (int i = 0; i < n; i++) {
        idx[i] = col_of(c->hdr, c->nh, names[i]);
        if (idx[i] < 0 && required[i]) {
            snprintf(err, errlen, "line 1: no column \"%s\" in the header", names[i]);
            return -1;
        }
    }
    return 0;
}

static void csv_close(csv *c) { free(c->hdrline); }

/* ---------------------------------------------------------------- nodes */

int sim_openb_parse_nodes(const char *text, size_t len, sim_openb_node **out, int *n, char *err, size_t errlen) {
    static const char *const names[] = {"sn", "cpu_milli", "memory_mib", "gpu", "model"};
    bool req[] = {true, true, true, true, true};
    int idx[5];
    csv c;
    *out = NULL;
    *n = 0;
    if (!text || csv_open(&c, text, len, err, errlen) < 0) return -1;
    if (csv_cols(&c, names, idx, 5, req, err, errlen) < 0) {
        csv_close(&c);
        return -1;
    }
    int cap = 0, cnt = 0;
    sim_openb_node *v = NULL;
    char *line;
    int rc = 0;
    while ((line = next_line(c.text, c.len, &c.pos))) {
        c.lineno++;
        char *f[MAXCOLS];
        int nf = line[0] ? split(line, f) : 0;
        if (nf == 0) { free(line); continue; }
        if (nf != c.nh) {
            snprintf(err, errlen, "line %d: %d fields, the header has %d", c.lineno, nf, c.nh);
            rc = -1;
        }
        if (!rc && cnt == cap) {
            cap = cap ? 2 * cap : 1024;
            sim_openb_node *nv = realloc(v, (size_t)cap * sizeof *v);
            if (!nv) { snprintf(err, errlen, "out of memory"); rc = -1; }
            else v = nv;
        }
        if (!rc) {
            sim_openb_node *nd = &v[cnt];
            memset(nd, 0, sizeof *nd);
            int64_t gpus = 0;
            const char *name = f[idx[0]], *model = f[idx[4]];
            if (!*name || strlen(name) >= sizeof nd->name) {
                snprintf(err, errlen, "line %d: sn: empty or longer than %zu characters", c.lineno, sizeof nd->name - 1);
                rc = -1;
            } else if (!parse_int(f[idx[1]], 0, INT64_MAX / 2, &nd->cpu_milli)) {
                snprintf(err, errlen, "line %d: cpu_milli: \"%s\" is not a whole number >= 0", c.lineno, f[idx[1]]);
                rc = -1;
            } else if (!parse_int(f[idx[2]], 0, INT64_MAX / 2, &nd->memory_mib)) {
                snprintf(err, errlen, "line %d: memory_mib: \"%s\" is not a whole number >= 0", c.lineno, f[idx[2]]);
                rc = -1;
            } else if (!parse_int(f[idx[3]], 0, MODEL_MAX_GPUS, &gpus)) {
                snprintf(err, errlen, "line %d: gpu: \"%s\" is not a whole number in 0..%d", c.lineno, f[idx[3]],
                         MODEL_MAX_GPUS);
                rc = -1;
            } else if ((gpus > 0 && !*model) || strlen(model) >= sizeof nd->model) {
                snprintf(err, errlen, "line %d: model: empty or longer than %zu characters", c.lineno,
                         sizeof nd->model - 1);
                rc = -1;
            } else {
                snprintf(nd->name, sizeof nd->name, "%s", name);
                snprintf(nd->model, sizeof nd->model, "%s", model);
                nd->gpus = (int)gpus;
                cnt++;
            }
        }
        free(line);
        if (rc) break;
    }
    csv_close(&c);
    if (!rc && cnt == 0) {
        snprintf(err, errlen, "no nodes in the node list");
        rc = -1;
    }
    if (rc) {
        free(v);
        return -1;
    }
    *out = v;
    *n = cnt;
    return 0;
}

/* ---------------------------------------------------------------- pods */

enum { P_NAME, P_CPU, P_MEM, P_NGPU, P_MILLI, P_SPEC, P_QOS, P_PHASE, P_CREATE, P_DELETE, P_SCHED, P_NCOLS };

static int pod_fields(char **f, const int *idx, int lineno, sim_openb_pod *p, char *err, size_t errlen) {
    memset(p, 0, sizeof *p);
    int64_t v;
    const char *name = f[idx[P_NAME]];
    if (!*name || strlen(name) >= sizeof p->name) {
        snprintf(err, errlen, "line %d: name: empty or longer than %zu characters", lineno, sizeof p->name - 1);
        return -1;
    }
    snprintf(p->name, sizeof p->name, "%s", name);
    if (!parse_int(f[idx[P_CPU]], 0, INT64_MAX / 2, &p->cpu_milli)) {
        snprintf(err, errlen, "line %d: cpu_milli: \"%s\" is not a whole number >= 0", lineno, f[idx[P_CPU]]);
        return -1;
    }
    if (!parse_int(f[idx[P_MEM]], 0, INT64_MAX / (1 << 21), &p->memory_mib)) {
        snprintf(err, errlen, "line %d: memory_mib: \"%s\" is not a whole number >= 0", lineno, f[idx[P_MEM]]);
        return -1;
    }
    if (!parse_int(f[idx[P_NGPU]], 0, MODEL_MAX_GPUS, &v)) {
        snprintf(err, errlen, "line %d: num_gpu: \"%s\" is not a whole number in 0..%d", lineno, f[idx[P_NGPU]],
                 MODEL_MAX_GPUS);
        return -1;
    }
    p->num_gpu = (int)v;
    if (!parse_int(f[idx[P_MILLI]], 0, 1000, &v)) {
        snprintf(err, errlen, "line %d: gpu_milli: \"%s\" is not a whole number in 0..1000", lineno, f[idx[P_MILLI]]);
        return -1;
    }
    p->gpu_milli = (int)v;
    if (p->num_gpu == 0 && p->gpu_milli != 0) {
        snprintf(err, errlen, "line %d: gpu_milli: %d with num_gpu 0 (a CPU-only pod asks for no GPU share)", lineno,
                 p->gpu_milli);
        return -1;
    }
    if (p->num_gpu > 0 && p->gpu_milli == 0) {
        snprintf(err, errlen, "line %d: gpu_milli: 0 with num_gpu %d (must be 1..1000)", lineno, p->num_gpu);
        return -1;
    }
    if (p->num_gpu > 1 && p->gpu_milli != 1000) {
        snprintf(err, errlen, "line %d: gpu_milli: %d with num_gpu %d (a share is of one GPU; several GPUs are whole)",
                 lineno, p->gpu_milli, p->num_gpu);
        return -1;
    }
    if (idx[P_SPEC] >= 0) {
        const char *s = f[idx[P_SPEC]];
        int models = *s ? 1 : 0;
        for (const char *q = s; *q; q++) models += *q == '|';
        if (strlen(s) >= sizeof p->gpu_spec || models > MODEL_MAX_MODELS) {
            snprintf(err, errlen, "line %d: gpu_spec: longer than %zu characters or more than %d models", lineno,
                     sizeof p->gpu_spec - 1, MODEL_MAX_MODELS);
            return -1;
        }
        snprintf(p->gpu_spec, sizeof p->gpu_spec, "%s", s);
    }
    if (idx[P_QOS] >= 0) snprintf(p->qos, sizeof p->qos, "%s", f[idx[P_QOS]]);
    if (idx[P_PHASE] >= 0) snprintf(p->phase, sizeof p->phase, "%s", f[idx[P_PHASE]]);
    if (idx[P_CREATE] >= 0 && idx[P_DELETE] >= 0 && idx[P_SCHED] >= 0) {
        static const char *const tn[] = {"creation_time", "deletion_time", "scheduled_time"};
        int64_t *t[] = {&p->creation, &p->deletion, &p->scheduled};
        for (int k = 0; k < 3; k++) {
            const char *s = f[idx[P_CREATE + k]];
            if (!*s) {   /* a pod that never ran or never ended */
                *t[k] = -1;
                continue;
            }
            if (!parse_int(s, 0, INT64_MAX / 2, t[k])) {
                snprintf(err, errlen, "line %d: %s: \"%s\" is not a whole number of seconds >= 0", lineno, tn[k], s);
                return -1;
            }
        }
        p->has_times = true;
    }
    return 0;
}

int sim_openb_parse_pods(const char *text, size_t len, sim_openb_pod **out, int *n, char *err, size_t errlen) {
    static const char *const names[P_NCOLS] = {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec",
                                               "qos", "pod_phase", "creation_time", "deletion_time",
                                               "scheduled_time"};
    bool req[P_NCOLS] = {true, true, true, true, true};
    int idx[P_NCOLS];
    csv c;
    *out = NULL;
    *n = 0;
    if (!text || csv_open(&c, text, len, err, errlen) < 0) return -1;
    if (csv_cols(&c, names, idx, P_NCOLS, req, err, errlen) < 0) {
        csv_close(&c);
        return -1;
    }
    int cap = 0, cnt = 0, rc = 0;
    sim_openb_pod *v = NULL;
    char *line;
    while (!rc && (line = next_line(c.text, c.len, &c.pos))) {
        c.lineno++;
        char *f[MAXCOLS];
        int nf = line[0] ? split(line, f) : 0;
        if (nf == 0) {
            free(line);
            continue;
        }
        if (nf != c.nh) {
            snprintf(err, errlen, "line %d: %d fields, the header has %d", c.lineno, nf, c.nh);
            rc = -1;
        } else if (cnt == cap) {
            cap = cap ? 2 * cap : 4096;
            sim_openb_pod *nv = realloc(v, (size_t)cap * sizeof *v);
            if (!nv) {
                snprintf(err, errlen, "out of memory");
                rc = -1;
            } else {
                v = nv;
            }
        }
        if (!rc && pod_fields(f, idx, c.lineno, &v[cnt], err, errlen) < 0) rc = -1;
        if (!rc) cnt++;
        free(line);
    }
    csv_close(&c);
    if (!rc && cnt == 0) {
        snprintf(err, errlen, "no pods in the pod list");
        rc = -1;
    }
    if (rc) {
        free(v);
        return -1;
    }
    *out = v;
    *n = cnt;
    return 0;
}

/* ---------------------------------------------------------------- loading */

static int with_prefix(int rc, const char *path, char *err, size_t errlen) {
    if (rc < 0 && path) {
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%s", err);
        snprintf(err, errlen, "%s: %s", path, tmp);
    }
    return rc;
}

int sim_openb_load_nodes(const char *path, sim_openb_node **out, int *n, char *err, size_t errlen) {
    if (!path)
        return sim_openb_parse_nodes((const char *)sim_openb_nodes_csv, sim_openb_nodes_csv_len, out, n, err, errlen);
    size_t len;
    char *text = sim_read_file(path, &len, err, errlen);
    if (!text) return -1;
    int rc = sim_openb_parse_nodes(text, len, out, n, err, errlen);
    free(text);
    return with_prefix(rc, path, err, errlen);
}

int sim_openb_load_pods(const char *path, sim_openb_pod **out, int *n, char *err, size_t errlen) {
    if (!path)
        return sim_openb_parse_pods((const char *)sim_openb_default_csv, sim_openb_default_csv_len, out, n, err,
                                    errlen);
    size_t len;
    char *text = sim_read_file(path, &len, err, errlen);
    if (!text) return -1;
    int rc = sim_openb_parse_pods(text, len, out, n, err, errlen);
    free(text);
    return with_prefix(rc, path, err, errlen);
}

int sim_openb_load_pod_list(const char *data_dir, const char *name, sim_openb_pod **out, int *n, char *err,
                            size_t errlen) {
    if (!name || !*name || strchr(name, '/')) {
        snprintf(err, errlen, "pod list name \"%s\": expected a short name such as default or cpu050", name ? name : "");
        return -1;
    }
    if (!data_dir) {
        if (!strcmp(name, "default")) return sim_openb_load_pods(NULL, out, n, err, errlen);
        snprintf(err, errlen, "pod list \"%s\" is not built in (only default is); pass --data DIR, the directory "
                              "holding openb_pod_list_%s.csv (data/openb in the repository)", name, name);
        return -1;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/openb_pod_list_%s.csv", data_dir, name);
    return sim_openb_load_pods(path, out, n, err, errlen);
}

/* ---------------------------------------------------------------- model */

int64_t sim_openb_pod_gpu_milli(const sim_openb_pod *p) { return (int64_t)p->num_gpu * p->gpu_milli; }

void sim_openb_request(const sim_openb_pod *p, model_request *r) {
    memset(r, 0, sizeof *r);
    r->cpu_milli = p->cpu_milli;
    r->memory_bytes = p->memory_mib * 1048576LL;
    if (p->num_gpu == 0) {
        r->kind = MODEL_REQ_NONE;
    } else if (p->num_gpu == 1 && p->gpu_milli < 1000) {
        r->kind = MODEL_REQ_FRACTION;
        r->count = 1;
        r->compute_permille = (int16_t)p->gpu_milli;
    } else {
        r->kind = MODEL_REQ_WHOLE;
        r->count = p->num_gpu;
    }
    /* "A|B|B": duplicates kept as written, empty items skipped; checked against
     * MODEL_MAX_MODELS by the parser */
    const char *s = p->gpu_spec;
    while (*s && r->nmodels < MODEL_MAX_MODELS) {
        size_t l = strcspn(s, "|");
        if (l && l < sizeof r->models[0]) {
            memcpy(r->models[r->nmodels], s, l);
            r->models[r->nmodels++][l] = 0;
        }
        s += l + (s[l] == '|');
    }
}

static const model_gpu_product *product_of(sim_openb_cluster *c, const char *model) {
    for (int i = 0; i < c->nproducts; i++)
        if (!strcmp(c->products[i].product, model)) return &c->products[i];
    if (c->nproducts == (int)(sizeof c->products / sizeof c->products[0])) return NULL;
    model_product_init_generic(&c->products[c->nproducts], model, SIM_OPENB_GPU_MIB, 0);
    return &c->products[c->nproducts++];
}

sim_openb_cluster *sim_openb_cluster_new(const sim_openb_node *v, int n, char *err, size_t errlen) {
    sim_openb_cluster *c = calloc(1, sizeof *c);
    if (c) c->nodes = calloc((size_t)(n > 0 ? n : 1), sizeof *c->nodes);
    if (!c || !c->nodes) {
        free(c);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        model_node *nd = model_node_new(v[i].name);
        const model_gpu_product *p = v[i].gpus ? product_of(c, v[i].model) : NULL;
        if (!nd || (v[i].gpus && !p)) {
            model_node_free(nd);
            snprintf(err, errlen, "node %s: %s", v[i].name, nd ? "more than 16 GPU models" : "out of memory");
            sim_openb_cluster_free(c);
            return NULL;
        }
        nd->track_host = true;
        nd->cpu_milli = v[i].cpu_milli;
        nd->memory_mib = v[i].memory_mib;
        for (int g = 0; g < v[i].gpus; g++) model_node_add_gpu(nd, p, MODEL_GPU_WHOLE, 1, 0);
        c->nodes[c->n++] = nd;
        c->gpus += nd->ngpus;
    }
    return c;
}

void sim_openb_cluster_free(sim_openb_cluster *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) model_node_free(c->nodes[i]);
    free(c->nodes);
    free(c);
}
