/* topology.c -- cluster files' GPU topology: presets and matrices (topology.h). */
#include "sim/topology.h"

#include <stdio.h>
#include <string.h>

/* The three reference servers (README.md, "Reference servers"), as nvidia-smi topo -m shows them. */
typedef struct preset {
    const char *name, *product;
    int ngpus;
    /* the link of GPUs a != b */
    model_link (*link)(int a, int b);
} preset;

static model_link dgx_link(int a, int b) {
    (void)a, (void)b;
    return MODEL_LINK_NVLINK;
}

static model_link pcie8_link(int a, int b) {
    if (a / 2 == b / 2) return MODEL_LINK_NVLINK;   /* the bridged pairs */
    return a / 4 == b / 4 ? MODEL_LINK_PIX : MODEL_LINK_SYS;
}

static model_link twosocket_link(int a, int b) { return a / 2 == b / 2 ? MODEL_LINK_NODE : MODEL_LINK_SYS; }

static const preset presets[] = {
    {"dgx-a100", "NVIDIA-A100-SXM4-80GB", 8, dgx_link},
    {"pcie8-nvlink-pairs", "NVIDIA-A100-80GB-PCIe", 8, pcie8_link},
    {"2socket-4gpu", "NVIDIA-L40S", 4, twosocket_link},
};

#define NVLINKS_PRESET 12   /* every NVLink of the presets is NV12 */

int sim_topology_preset(const char *name, sim_topology *out, const char **product) {
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        const preset *p = &presets[i];
        if (strcmp(p->name, name)) continue;
        memset(out, 0, sizeof *out);
        snprintf(out->preset, sizeof out->preset, "%s", p->name);
        out->ngpus = p->ngpus;
        for (int a = 0; a < p->ngpus; a++)
            for (int b = 0; b < p->ngpus; b++) {
                if (a == b) continue;
                out->link[a][b] = (uint8_t)p->link(a, b);
                out->nvlinks[a][b] = out->link[a][b] == MODEL_LINK_NVLINK ? NVLINKS_PRESET : 0;
            }
        if (product) *product = p->product;
        return 0;
    }
    return -1;
}

static int parse_matrix(const cJSON *v, const char *where, sim_topology *out, char *err, size_t errlen) {
    int n = cJSON_GetArraySize(v);
    if (n < 1 || n > MODEL_MAX_GPUS) {
        snprintf(err, errlen, "%s: a matrix of 1..%d rows, one per GPU", where, MODEL_MAX_GPUS);
        return -1;
    }
    out->ngpus = n;
    int a = 0;
    for (const cJSON *row = v->child; row; row = row->next, a++) {
        if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != n) {
            snprintf(err, errlen, "%s[%d]: expected an array of %d link names (one per GPU, \"X\" for GPU %d itself)",
                     where, a, n, a);
            return -1;
        }
        int b = 0;
        for (const cJSON *c = row->child; c; c = c->next, b++) {
            model_link l;
            int nv = 0;
            if (!cJSON_IsString(c) || !model_link_parse(c->valuestring, &l, &nv)) {
                snprintf(err, errlen, "%s[%d][%d]: expected X, NV<n>, PIX, PXB, PHB, NODE or SYS (as nvidia-smi topo -m "
                         "names links)", where, a, b);
                return -1;
            }
            bool self = l == MODEL_LINK_UNKNOWN;   /* "X" */
            if (self != (a == b)) {
                snprintf(err, errlen, "%s[%d][%d]: %s", where, a, b,
                         a == b ? "a GPU's link to itself is \"X\"" : "\"X\" only on the diagonal");
                return -1;
            }
            out->link[a][b] = (uint8_t)l;
            out->nvlinks[a][b] = (uint8_t)nv;
        }
    }
    for (a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++)
            if (out->link[a][b] != out->link[b][a] || out->nvlinks[a][b] != out->nvlinks[b][a]) {
                snprintf(err, errlen, "%s: not symmetric: GPU %d to %d differs from %d to %d", where, a, b, b, a);
                return -1;
            }
    return 0;
}

int sim_topology_parse(const cJSON *v, const char *where, sim_topology *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (cJSON_IsString(v)) {
        if (sim_topology_preset(v->valuestring, out, NULL) == 0) return 0;
        char names[128] = "";
        for (size_t i = 0, off = 0; i < sizeof presets / sizeof presets[0] && off < sizeof names; i++)
            off += (size_t)snprintf(names + off, sizeof names - off, "%s%s", i ? ", " : "", presets[i].name);
        snprintf(err, errlen, "%s: unknown preset \"%s\" (presets: %s; or a matrix of nvidia-smi link names)", where,
                 v->valuestring, names);
        return -1;
    }
    if (cJSON_IsArray(v)) return parse_matrix(v, where, out, err, errlen);
    snprintf(err, errlen, "%s: expected a preset name or a matrix (an array per GPU of nvidia-smi link names)", where);
    return -1;
}

cJSON *sim_topology_to_json(const sim_topology *t) {
    if (t->preset[0]) return cJSON_CreateString(t->preset);
    cJSON *m = cJSON_CreateArray();
    for (int a = 0; a < t->ngpus; a++) {
        cJSON *row = cJSON_CreateArray();
        for (int b = 0; b < t->ngpus; b++) {
            char buf[16] = "X";
            if (a != b) model_link_format((model_link)t->link[a][b], t->nvlinks[a][b], buf, sizeof buf);
            cJSON_AddItemToArray(row, cJSON_CreateString(buf));
        }
        cJSON_AddItemToArray(m, row);
    }
    return m;
}

int sim_topology_apply(const sim_topology *t, model_node *n, char *err, size_t errlen) {
    if (t->ngpus == 0) return 0;
    if (t->ngpus != n->ngpus) {
        snprintf(err, errlen, "the topology has %d GPUs, the node %d", t->ngpus, n->ngpus);
        return -1;
    }
    for (int a = 0; a < t->ngpus; a++)
        for (int b = a + 1; b < t->ngpus; b++)
            if (model_topo_set(n, a, b, (model_link)t->link[a][b], t->nvlinks[a][b]) != 0) {
                snprintf(err, errlen, "out of memory");
                return -1;
            }
    return 0;
}
