/* topology.c -- the tessera.io/gpus annotation from NVML's view of the node (topology.h). */
#include "agent/topology.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int agent_sysfs_numa(const char *sysfs_root, const char *bus_id) {
    unsigned dom, bus, dev, fn;
    if (!bus_id || sscanf(bus_id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4) return -1;
    /* sysfs names PCI devices with a 4-digit domain and lower-case hex; NVML's busId has 8 digits, upper case */
    char path[1024];
    snprintf(path, sizeof path, "%s/bus/pci/devices/%04x:%02x:%02x.%x/numa_node", sysfs_root ? sysfs_root : "/sys",
             dom & 0xffff, bus, dev, fn);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int numa = -1;
    if (fscanf(f, "%d", &numa) != 1 || numa < 0 || numa > 1023) numa = -1;
    fclose(f);
    return numa;
}

/* NVLinks between GPUs a and b, as nvidia-smi counts them (0: none). */
static int nvlink_count(const agent_gpus *g, int a, int b) {
    int n = g->gpu[a].nvlinks[b];
    if (g->gpu[b].nvlinks[a] > n) n = g->gpu[b].nvlinks[a]; /* a link is seen from both ends; count it once */
    int sa = g->gpu[a].switch_links, sb = g->gpu[b].switch_links;
    if (sa > 0 && sb > 0) n += sa < sb ? sa : sb;
    return n;
}

static const char *OWNED[] = {"index", "uuid", "pci", "numa", "nvlink", "topo"};

static int owned(const char *key) {
    for (size_t i = 0; i < sizeof OWNED / sizeof OWNED[0]; i++)
        if (!strcmp(key, OWNED[i])) return 1;
    return 0;
}

/* The existing entry for GPU i: the one with its uuid, else the one at position i if that has no uuid. */
static const cJSON *existing_entry(const cJSON *arr, int i, const char *uuid) {
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(e, "uuid");
        if (cJSON_IsString(u) && !strcmp(u->valuestring, uuid)) return e;
    }
    e = cJSON_GetArrayItem(arr, i);
    return e && !cJSON_GetObjectItemCaseSensitive(e, "uuid") ? e : NULL;
}

static cJSON *gpu_entry(const agent_gpus *g, int i, const char *sysfs_root, const cJSON *old, char *err,
                        size_t errlen) {
    const agent_gpu *gp = &g->gpu[i];
    if (gp->mig_enabled && !cJSON_GetObjectItemCaseSensitive(old, "mig")) {
        snprintf(err, errlen,
                 "GPU %d (%s) has MIG enabled and the node's %s annotation gives no \"mig\" list for it; the agent "
                 "does not enumerate MIG instances, so it writes no topology for this node until the annotation "
                 "lists them (README, The tessera.io/gpus node annotation)", i, gp->uuid, AGENT_ANN_GPUS);
        return NULL;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "index", i);
    cJSON_AddStringToObject(o, "uuid", gp->uuid);
    cJSON_AddStringToObject(o, "pci", gp->pci);
    int numa = agent_sysfs_numa(sysfs_root, gp->pci);
    if (numa >= 0) cJSON_AddNumberToObject(o, "numa", numa);
    cJSON *nvl = cJSON_AddArrayToObject(o, "nvlink");
    cJSON *topo = cJSON_AddArrayToObject(o, "topo");
    for (int j = 0; j < g->n; j++) {
        char name[16];
        int links = j == i ? 0 : nvlink_count(g, i, j);
        if (j == i) snprintf(name, sizeof name, "X");
        else if (links > 0) snprintf(name, sizeof name, "NV%d", links);
        else {
            /* NVML answers both directions; take the worse should they ever differ, so topo stays symmetric */
            int lv = gp->pcie[j] > g->gpu[j].pcie[i] ? gp->pcie[j] : g->gpu[j].pcie[i];
            snprintf(name, sizeof name, "%s", agent_pcie_name(lv));
        }
        if (links > 0) cJSON_AddItemToArray(nvl, cJSON_CreateNumber(j));
        cJSON_AddItemToArray(topo, cJSON_CreateString(name));
    }
    const cJSON *k;
    cJSON_ArrayForEach(k, old) {
        if (k->string && !owned(k->string)) cJSON_AddItemToObject(o, k->string, cJSON_Duplicate(k, 1));
    }
    return o;
}

char *agent_topology_json(const agent_gpus *g, const char *sysfs_root, const char *existing, char *err,
                          size_t errlen) {
    cJSON *old = NULL;
    if (existing && *existing) {
        old = cJSON_Parse(existing);
        int ok = cJSON_IsArray(old);
        const cJSON *e;
        cJSON_ArrayForEach(e, old) ok = ok && cJSON_IsObject(e);
        if (!ok) {
            snprintf(err, errlen, "the node's %s annotation is not a JSON array of objects; the agent does not "
                     "overwrite it (fix or remove it, and the agent writes it at its next topology read)",
                     AGENT_ANN_GPUS);
            cJSON_Delete(old);
            return NULL;
        }
    }
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < g->n; i++) {
        cJSON *o = gpu_entry(g, i, sysfs_root, existing_entry(old, i, g->gpu[i].uuid), err, errlen);
        if (!o) {
            cJSON_Delete(arr);
            cJSON_Delete(old);
            return NULL;
        }
        cJSON_AddItemToArray(arr, o);
    }
    char *s = cJSON_PrintUnformatted(arr);
    cJSON_Delete(arr);
    cJSON_Delete(old);
    if (!s) snprintf(err, errlen, "out of memory");
    return s;
}
