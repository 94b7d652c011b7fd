/* convert.c -- openb CSVs to cluster and trace JSON (see convert.h), and the
 * `tessera-sim convert` command line. */
#include "sim/convert.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "sim/fgd_paper.h"

static const struct { const char *openb, *product; } products[] = {
    {"T4", "T4-16GB"}, {"V100M16", "V100-16GB"}, {"V100M32", "V100-32GB"}, {"A10", "A10-24GB"},
};

const char *sim_openb_product(const char *model, const char *unknown_as) {
    for (size_t i = 0; i < sizeof products / sizeof products[0]; i++)
        if (!strcmp(products[i].openb, model)) return products[i].product;
    return unknown_as ? unknown_as : model;
}

/* Print one cJSON item compactly, then free it. -1 if printing failed. */
static int emit(FILE *out, cJSON *o, const char *sep) {
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!s) return -1;
    fprintf(out, "%s%s", sep, s);
    cJSON_free(s);
    return 0;
}

static int finish(FILE *out, int rc, char *err, size_t errlen) {
    if (rc == 0 && (fflush(out) != 0 || ferror(out))) rc = -1;
    if (rc < 0 && err && !err[0]) snprintf(err, errlen, "cannot write the output: %s", strerror(errno));
    return rc;
}

int sim_convert_openb_cluster(const sim_openb_node *v, int n, const char *unknown_as, FILE *out, char *err,
                              size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!v || n <= 0) {
        snprintf(err, errlen, "no nodes to convert");
        return -1;
    }
    int *group = malloc((size_t)n * sizeof *group), *first = malloc((size_t)n * sizeof *first), ng = 0;
    char *names = malloc((size_t)n * 96);
    if (!group || !first || !names) {
        free(group);
        free(first);
        free(names);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    /* group by identical (model, gpus, cpu, memory); quadratic in groups, which are few */
    for (int i = 0; i < n; i++) {
        int g = 0;
        for (; g < ng; g++) {
            const sim_openb_node *a = &v[first[g]];
            if (a->gpus == v[i].gpus && a->cpu_milli == v[i].cpu_milli && a->memory_mib == v[i].memory_mib &&
                !strcmp(a->model, v[i].model))
                break;
        }
        if (g == ng) first[ng++] = i;
        group[i] = g;
    }
    int rc = 0;
    fputs("{\"nodeGroups\": [\n", out);
    for (int g = 0; g < ng && rc == 0; g++) {
        const sim_openb_node *a = &v[first[g]];
        int count = 0;
        for (int i = 0; i < n; i++) count += group[i] == g;
        char name[96];
        snprintf(name, sizeof name, "%s-%dgpu-%lldc-%lldgi", a->gpus ? a->model : "cpu", a->gpus,
                 (long long)(a->cpu_milli / 1000), (long long)(a->memory_mib / 1024));
        for (char *c = name; *c; c++)
            if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
        /* memory rounded to GiB could make two groups' names equal: keep names unique */
        for (int h = 0; h < g; h++)
            if (!strcmp(names + (size_t)h * 96, name)) {
                snprintf(name + strlen(name), sizeof name - strlen(name), "-%d", g);
                break;
            }
        snprintf(names + (size_t)g * 96, 96, "%s", name);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", name);
        cJSON_AddNumberToObject(o, "count", count);
        if (a->gpus) cJSON_AddStringToObject(o, "gpuProduct", sim_openb_product(a->model, unknown_as));
        cJSON_AddNumberToObject(o, "gpusPerNode", a->gpus);
        cJSON_AddNumberToObject(o, "cpuMilli", (double)a->cpu_milli);
        cJSON_AddNumberToObject(o, "memoryMiB", (double)a->memory_mib);
        cJSON_AddStringToObject(o, "sharing", "whole");
        rc = emit(out, o, g ? ",\n  " : "  ");
    }
    fputs("\n]}\n", out);
    free(group);
    free(first);
    free(names);
    return finish(out, rc, err, errlen);
}

static const char *kind_of(const char *qos) {
    if (!strcmp(qos, "LS")) return "inference";
    if (!strcmp(qos, "BE")) return "batch";
    return "training";
}

/* The pod part of one workload (see convert.h). */
static cJSON *pod_part(const sim_openb_pod *p, const char *unknown_as) {
    char buf[256];
    cJSON *pod = cJSON_CreateObject(), *res = cJSON_AddObjectToObject(pod, "resources");
    cJSON *req = cJSON_AddObjectToObject(res, "requests"), *ann = cJSON_AddObjectToObject(pod, "annotations");
    snprintf(buf, sizeof buf, "%lldm", (long long)p->cpu_milli);
    cJSON_AddStringToObject(req, "cpu", buf);
    snprintf(buf, sizeof buf, "%lldMi", (long long)p->memory_mib);
    cJSON_AddStringToObject(req, "memory", buf);
    if (p->num_gpu > 0 && p->gpu_milli >= 1000) {
        snprintf(buf, sizeof buf, "%d", p->num_gpu);
        cJSON_AddStringToObject(req, "nvidia.com/gpu", buf);
        cJSON *lim = cJSON_AddObjectToObject(res, "limits");   /* extended resources: limit = request */
        cJSON_AddStringToObject(lim, "nvidia.com/gpu", buf);
    } else if (p->num_gpu > 0) {
        snprintf(buf, sizeof buf, "%g", p->gpu_milli / 1000.0);
        cJSON_AddStringToObject(ann, "tessera.io/gpu-fraction", buf);
    }
    if (p->gpu_spec[0]) {
        /* "A|B" -> "<product A>,<product B>" */
        char spec[sizeof p->gpu_spec], out[512] = "";
        snprintf(spec, sizeof spec, "%s", p->gpu_spec);
        size_t used = 0;
        for (char *save = NULL, *m = strtok_r(spec, "|", &save); m; m = strtok_r(NULL, "|", &save))
            used += (size_t)snprintf(out + used, sizeof out - used, "%s%s", used ? "," : "",
                                     sim_openb_product(m, unknown_as));
        cJSON_AddStringToObject(ann, "tessera.io/gpu-models", out);
    }
    return pod;
}

int sim_convert_openb_trace(const sim_openb_pod *p, int n, const char *unknown_as, FILE *out, char *err,
                            size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!p || n <= 0) {
        snprintf(err, errlen, "no pods to convert");
        return -1;
    }
    int rc = 0;
    fputs("{\"workloads\": [\n", out);
    for (int i = 0; i < n && rc == 0; i++) {
        const sim_openb_pod *q = &p[i];
        double arrival = 0, duration = 1;   /* the trace format wants a positive duration */
        if (q->has_times && q->creation >= 0) {
            arrival = (double)q->creation;
            int64_t start = q->scheduled >= 0 ? q->scheduled : q->creation;
            if (q->deletion > start) duration = (double)(q->deletion - start);
        }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "id", q->name);
        cJSON_AddStringToObject(o, "kind", kind_of(q->qos));
        cJSON_AddNumberToObject(o, "arrival", arrival);
        cJSON_AddNumberToObject(o, "duration", duration);
        cJSON_AddNumberToObject(o, "priority", 0);
        cJSON_AddStringToObject(o, "tenant", "openb");
        cJSON_AddNumberToObject(o, "gpuUtil", q->num_gpu > 0 ? 1 : 0);
        cJSON_AddItemToObject(o, "pod", pod_part(q, unknown_as));
        rc = emit(out, o, i ? ",\n  " : "  ");
    }
    fputs("\n]}\n", out);
    return finish(out, rc, err, errlen);
}

/* ---------------------------------------------------------------- command line */

static void convert_usage(FILE *f) {
    fprintf(f, "usage: tessera-sim convert openb [--nodes CSV] [--pods CSV] [--out-cluster FILE] [--out-trace FILE]\n"
               "                                 [--unknown-as PRODUCT]\n"
               "\n"
               "The openb node list and pod list (default: the built-in node list and default pod list)\n"
               "as cluster JSON (node groups of identical nodes, whole GPUs) and trace JSON (one workload\n"
               "per pod, creation/deletion times kept). At least one output is needed; \"-\" is stdout.\n"
               "T4, V100M16, V100M32 and A10 become catalog products; P100, G2 and G3 are not in the\n"
               "catalog and keep their names unless --unknown-as names a stand-in (e.g. T4-16GB).\n");
}

static int write_to(const char *path, const void *data, int n, bool cluster, const char *unknown_as, char *err,
                    size_t errlen) {
    FILE *f = strcmp(path, "-") ? fopen(path, "w") : stdout;
    if (!f) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    int rc = cluster ? sim_convert_openb_cluster(data, n, unknown_as, f, err, errlen)
                     : sim_convert_openb_trace(data, n, unknown_as, f, err, errlen);
    if (f != stdout && fclose(f) != 0 && rc == 0) {
        snprintf(err, errlen, "cannot write %s", path);
        rc = -1;
    }
    return rc;
}

int sim_cmd_convert(int argc, char **argv) {
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        convert_usage(stdout);
        return 0;
    }
    if (argc < 2 || strcmp(argv[1], "openb")) {
        fprintf(stderr, "tessera-sim convert: expected a source format: openb (see --help)\n");
        return 2;
    }
    const char *nodes = NULL, *pods = NULL, *ocl = NULL, *otr = NULL, *unk = NULL;
    for (int i = 2; i < argc; i++) {
        const char **dst = !strcmp(argv[i], "--nodes") ? &nodes : !strcmp(argv[i], "--pods") ? &pods
                         : !strcmp(argv[i], "--out-cluster") ? &ocl : !strcmp(argv[i], "--out-trace") ? &otr
                         : !strcmp(argv[i], "--unknown-as") ? &unk : NULL;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            convert_usage(stdout);
            return 0;
        }
        if (!dst || i + 1 >= argc) {
            fprintf(stderr, "tessera-sim convert openb: unknown or incomplete option \"%s\" (see --help)\n", argv[i]);
            return 2;
        }
        *dst = argv[++i];
    }
    if (!ocl && !otr) {
        fprintf(stderr, "tessera-sim convert openb: nothing to write: give --out-cluster and/or --out-trace\n");
        return 2;
    }
    char err[512];
    int rc = 0;
    if (ocl) {
        sim_openb_node *v = NULL;
        int n = 0;
        rc = sim_openb_load_nodes(nodes, &v, &n, err, sizeof err);
        if (rc == 0) rc = write_to(ocl, v, n, true, unk, err, sizeof err);
        free(v);
    }
    if (rc == 0 && otr) {
        sim_openb_pod *p = NULL;
        int n = 0;
        rc = sim_openb_load_pods(pods, &p, &n, err, sizeof err);
        if (rc == 0) rc = write_to(otr, p, n, false, unk, err, sizeof err);
        free(p);
    }
    if (rc < 0) {
        fprintf(stderr, "tessera-sim convert openb: %s\n", err);
        return 1;
    }
    return 0;
}
