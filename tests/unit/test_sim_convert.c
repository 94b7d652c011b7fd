/* test_sim_convert.c -- `convert openb`: the cluster JSON keeps every node and GPU of
 * the openb cluster in groups of identical nodes, and every workload of the trace JSON
 * carries a pod part that model_request_from_pod (the extender's own parser) reads back
 * as the request the openb reader makes of that pod. */
#include "harness.h"

#include <stdlib.h>

#include <cjson/cJSON.h>

#include "sim/convert.h"
#include "sim/fgd_paper.h"

/* Run a converter into a memory buffer (caller frees). */
static char *convert(bool cluster, const void *v, int n, const char *unk, int *rc, char *err, size_t errlen) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    *rc = cluster ? sim_convert_openb_cluster(v, n, unk, f, err, errlen) : sim_convert_openb_trace(v, n, unk, f, err, errlen);
    fclose(f);
    return buf;
}

TEST(sim_convert_openb_cluster_keeps_every_node) {
    sim_openb_node *v = NULL;
    int n = 0, rc;
    char err[256];
    CHECK_MSG(sim_openb_load_nodes(NULL, &v, &n, err, sizeof err) == 0, "%s", err);
    char *txt = convert(true, v, n, NULL, &rc, err, sizeof err);
    free(v);
    cJSON *j = cJSON_Parse(txt);
    free(txt);
    CHECK_MSG(rc == 0, "%s", err);
    CHECK(j != NULL);
    long nodes = 0, gpus = 0;
    double cpu = 0;
    int groups = 0, t4 = 0, unknown = 0;
    bool whole = true;
    cJSON *g;
    cJSON_ArrayForEach(g, cJSON_GetObjectItem(j, "nodeGroups")) {
        int count = cJSON_GetObjectItem(g, "count")->valueint, per = cJSON_GetObjectItem(g, "gpusPerNode")->valueint;
        const char *prod = cJSON_GetStringValue(cJSON_GetObjectItem(g, "gpuProduct"));
        groups++;
        nodes += count;
        gpus += (long)count * per;
        cpu += count * cJSON_GetObjectItem(g, "cpuMilli")->valuedouble;
        whole = whole && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(g, "sharing")), "whole");
        t4 += prod && !strcmp(prod, "T4-16GB");
        unknown += prod && !strcmp(prod, "G2");
    }
    cJSON_Delete(j);
    CHECK_INT(nodes, 1213);
    CHECK_INT(gpus, 6212);
    CHECK_INT((long long)cpu, 107018000);
    CHECK_MSG(groups >= 7 && groups < 40, "%d groups", groups);
    CHECK_INT(t4, 2);       /* 4-GPU and 2-GPU T4 nodes */
    CHECK_INT(unknown, 1);  /* all 549 G2 nodes are alike */
    CHECK(whole);
}

TEST(sim_convert_openb_trace_round_trips_through_the_model) {
    sim_openb_pod *p = NULL;
    int n = 0, rc;
    char err[256];
    CHECK_MSG(sim_openb_load_pods(NULL, &p, &n, err, sizeof err) == 0, "%s", err);
    char *txt = convert(false, p, n, "T4-16GB", &rc, err, sizeof err);
    cJSON *j = cJSON_Parse(txt);
    free(txt);
    CHECK_MSG(rc == 0, "%s", err);
    CHECK(j != NULL);
    int i = 0, bad = -1;
    char why[256] = "";
    cJSON *w;
    cJSON_ArrayForEach(w, cJSON_GetObjectItem(j, "workloads")) {
        if (i >= n) break;
        /* the pod part inside a Pod, as the simulator's trace reader builds it */
        cJSON *part = cJSON_GetObjectItem(w, "pod"), *pod = cJSON_CreateObject();
        cJSON *meta = cJSON_AddObjectToObject(pod, "metadata"), *spec = cJSON_AddObjectToObject(pod, "spec");
        cJSON_AddItemToObject(meta, "annotations", cJSON_Duplicate(cJSON_GetObjectItem(part, "annotations"), 1));
        cJSON *c = cJSON_CreateObject();
        cJSON_AddStringToObject(c, "name", "main");
        cJSON_AddItemToObject(c, "resources", cJSON_Duplicate(cJSON_GetObjectItem(part, "resources"), 1));
        cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "containers"), c);
        model_request got, want;
        int prc = model_request_from_pod(pod, &got, why, sizeof why);
        cJSON_Delete(pod);
        sim_openb_request(&p[i], &want);
        double arrival = cJSON_GetObjectItem(w, "arrival")->valuedouble;
        bool same = prc == 0 && got.kind == want.kind && got.count == want.count && got.cpu_milli == want.cpu_milli &&
                    got.memory_bytes == want.memory_bytes && got.nmodels == want.nmodels &&
                    (want.kind != MODEL_REQ_FRACTION || got.compute_permille == want.compute_permille) &&
                    !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(w, "id")), p[i].name) &&
                    arrival == (double)p[i].creation && cJSON_GetObjectItem(w, "duration")->valuedouble >= 1;
        if (!same) {
            bad = i;
            break;
        }
        i++;
    }
    cJSON_Delete(j);
    int npods = n;
    char name[64];
    snprintf(name, sizeof name, "%s", bad >= 0 ? p[bad].name : "");
    free(p);
    CHECK_MSG(bad < 0, "pod %s does not round-trip (%s)", name, why);
    CHECK_INT(i, npods);
}

TEST(sim_convert_openb_products_and_errors) {
    CHECK_STR(sim_openb_product("V100M32", NULL), "V100-32GB");
    CHECK_STR(sim_openb_product("G3", NULL), "G3");
    CHECK_STR(sim_openb_product("G3", "T4-16GB"), "T4-16GB");
    char err[256];
    int rc;
    free(convert(true, NULL, 0, NULL, &rc, err, sizeof err));
    CHECK_INT(rc, -1);
    CHECK_CONTAINS(err, "no nodes");
    char *a1[] = {"convert", "csv"}, *a2[] = {"convert", "openb"}, *a3[] = {"convert", "openb", "--nodes"},
         *a4[] = {"convert", "openb", "--nodes", "/nonexistent.csv", "--out-cluster", "/tmp/x.json"};
    CHECK_INT(sim_cmd_convert(2, a1), 2);
    CHECK_INT(sim_cmd_convert(2, a2), 2);
    CHECK_INT(sim_cmd_convert(3, a3), 2);
    CHECK_INT(sim_cmd_convert(6, a4), 1);
}
