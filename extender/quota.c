/* quota.c -- per-namespace GPU usage in quota units, summed over the cache's pods with the
 * same function that sizes a pod's admission charge (model/charge.h). See quota.h.
 */
#include "extender/quota.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/charge.h"

static int by_ns(const void *a, const void *b) {
    return strcmp(((const ext_ns_usage *)a)->ns, ((const ext_ns_usage *)b)->ns);
}

int ext_quota_usage(const ext_state *st, ext_ns_usage **out) {
    *out = NULL;
    int n = 0, cap = 0;
    ext_ns_usage *u = NULL;
    size_t it = 0;
    for (const ext_pod *p; (p = ext_state_pod_next(st, &it));) {
        if (!p->holds || !p->node || !p->ns) continue;
        const ext_node *en = ext_state_node(st, p->node);
        if (!en || !en->m) continue;
        model_charge c = model_charge_assignment(en->m, &p->a);
        if (c.gpu_milli == 0 && c.memory_mib == 0) continue;
        int k;
        for (k = 0; k < n && strcmp(u[k].ns, p->ns); k++) {}
        if (k == n) {
            if (n == cap) {
                cap = cap ? 2 * cap : 16;
                ext_ns_usage *nu = realloc(u, (size_t)cap * sizeof *u);
                if (!nu) {
                    free(u);
                    return -1;
                }
                u = nu;
            }
            u[n++] = (ext_ns_usage){.ns = p->ns};
        }
        u[k].gpu_milli += c.gpu_milli;
        u[k].memory_mib += c.memory_mib;
        u[k].pods++;
    }
    if (n) qsort(u, (size_t)n, sizeof *u, by_ns);
    *out = u;
    return n;
}

char *ext_quota_metrics(const ext_state *st) {
    ext_ns_usage *u;
    int n = ext_quota_usage(st, &u);
    if (n < 0) return NULL;
    static const char head[] =
        "# HELP tessera_namespace_gpu_milli GPU compute the namespace's pods hold, in thousandths of a GPU "
        "(quota resource tessera.io/gpu-milli).\n# TYPE tessera_namespace_gpu_milli gauge\n"
        "# HELP tessera_namespace_gpu_memory_mib GPU memory the namespace's pods hold, MiB "
        "(quota resource tessera.io/gpu-memory-mib).\n# TYPE tessera_namespace_gpu_memory_mib gauge\n";
    /* a namespace name is at most 63 characters */
    size_t len = sizeof head + (size_t)n * 2 * 160;
    char *s = malloc(len);
    if (!s) {
        free(u);
        return NULL;
    }
    size_t o = (size_t)snprintf(s, len, "%s", head);
    for (int i = 0; i < n && o < len; i++)
        o += (size_t)snprintf(s + o, len - o,
                              "tessera_namespace_gpu_milli{namespace=\"%.63s\"} %lld\n"
                              "tessera_namespace_gpu_memory_mib{namespace=\"%.63s\"} %lld\n",
                              u[i].ns, (long long)u[i].gpu_milli, u[i].ns, (long long)u[i].memory_mib);
    free(u);
    return s;
}

cJSON *ext_quota_debug(const ext_state *st) {
    cJSON *o = cJSON_CreateObject();
    ext_ns_usage *u;
    int n = ext_quota_usage(st, &u);
    for (int i = 0; i < n; i++) {
        cJSON *j = cJSON_AddObjectToObject(o, u[i].ns);
        cJSON_AddNumberToObject(j, "gpuMilli", (double)u[i].gpu_milli);
        cJSON_AddNumberToObject(j, "gpuMemoryMiB", (double)u[i].memory_mib);
        cJSON_AddNumberToObject(j, "pods", u[i].pods);
    }
    free(u);
    return o;
}
