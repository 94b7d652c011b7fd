/* deployed_cluster.c -- deploy/'s cluster on fakes (deployed_cluster.h). */
#include "tests/support/deployed_cluster.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "extender/base/delivery.h"
#include "tests/support/wait.h"

const char *const deployed_cluster_pods[2] = {"tessera-scheduler-7c9f5d8b6d-q4x2n", "tessera-scheduler-7c9f5d8b6d-h8m5t"};

int64_t deployed_cluster_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void deployed_cluster_nap(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}


bool deployed_cluster_deploy_dir(char *out, size_t len) {
    char self[512];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0 || len == 0) return false;
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (!slash) return false;
    *slash = 0;
    int w = snprintf(out, len, "%s/../deploy", self);
    char probe[640];
    snprintf(probe, sizeof probe, "%s/kustomization.yaml", out);
    return w > 0 && (size_t)w < len && access(probe, R_OK) == 0;
}

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

/* GET port/readyz until 200 (wait.h's patience). */
static bool wait_ready(int port) { return WAIT_FOR(deployed_http_ok(port, "/readyz")); }

int deployed_cluster_start(deployed_cluster *c, const deployed_cluster_config *cfg) {
    memset(c, 0, sizeof *c);
    if (!(c->api = fake_api_start(0, c->err, sizeof c->err))) return -1;
    if (!(c->d = deployed_load(cfg->deploy_dir, c->err, sizeof c->err))) return -1;
    deployed_apply(c->d, c->api);
    cJSON *node = cJSON_Parse(cfg->gpu_node_json);
    const cJSON *name = get(get(node, "metadata"), "name");
    if (!cJSON_IsString(name)) {
        cJSON_Delete(node);
        snprintf(c->err, sizeof c->err, "the GPU node has no name");
        return -1;
    }
    char gpu_node[256];
    snprintf(gpu_node, sizeof gpu_node, "%s", name->valuestring);
    fake_api_put(c->api, "nodes", cfg->gpu_node_json);
    cJSON_Delete(node);
    c->kl = fake_kubelet_start(c->api);
    fake_kubelet_add_node(c->kl, gpu_node, "nvidia.com/gpu", cfg->gpus, cfg->uuid_prefix);
    char bins[512];
    if (cfg->image_binaries) snprintf(bins, sizeof bins, "%s", cfg->image_binaries);
    else deployed_image_binaries(cfg->deploy_dir, bins, sizeof bins);
    fake_kubelet_add_image(c->kl, c->d->extender_image, cfg->pull_ms, !cfg->unpullable, bins);
    const cJSON *ctr;
    cJSON_ArrayForEach(ctr, get(get(get(get(c->d->deployment, "spec"), "template"), "spec"), "containers")) {
        const cJSON *img = get(ctr, "image"), *cmd = cJSON_GetArrayItem(get(ctr, "command"), 0);
        if (cJSON_IsString(img) && cJSON_IsString(cmd)) fake_kubelet_add_image(c->kl, img->valuestring, 0, true, cmd->valuestring);
    }
    for (int i = 0; i < 2; i++) {
        char cp[16];
        snprintf(cp, sizeof cp, "cp-%d", i + 1);
        int rc = i == 0 && cfg->pod0
                     ? deployed_replica_start_as(c->d, c->api, cfg->extender_bin, cfg->pod0, &c->rep[i], c->err, sizeof c->err)
                     : deployed_replica_start(c->d, c->api, cfg->extender_bin, deployed_cluster_pods[i], cp, &c->rep[i],
                                              c->err, sizeof c->err);
        if (rc != 0) return -1;
    }
    for (int i = 0; i < 2; i++)
        if (!wait_ready(c->rep[i].ops_port)) {
            snprintf(c->err, sizeof c->err, "replica %d never ready", i);
            return -1;
        }
    for (int i = 0; i < 2; i++) c->ks[i] = fake_scheduler_start(c->api, c->d, c->rep[i].pod_name, c->rep[i].verbs_port);
    if (WAIT_FOR(fake_scheduler_leading(c->ks[0]) || fake_scheduler_leading(c->ks[1]))) return 0;
    snprintf(c->err, sizeof c->err, "no kube-scheduler leads");
    return -1;
}

void deployed_cluster_stop(deployed_cluster *c) {
    for (int i = 0; i < 2; i++) {
        fake_scheduler_stop(c->ks[i], true);
        c->ks[i] = NULL;
        deployed_replica_stop(&c->rep[i], SIGTERM);
    }
    fake_kubelet_stop(c->kl);
    c->kl = NULL;
    deployed_free(c->d);
    c->d = NULL;
    fake_api_free(c->api);
    c->api = NULL;
}

void deployed_cluster_kill(deployed_cluster *c, int i) {
    fake_scheduler_stop(c->ks[i], false);
    c->ks[i] = NULL;
    deployed_replica_stop(&c->rep[i], SIGKILL);
}

int deployed_cluster_calls(deployed_cluster *c) {
    int n = 0;
    for (int i = 0; i < 2; i++) n += c->ks[i] ? fake_scheduler_calls(c->ks[i]) : 0;
    return n;
}

int deployed_cluster_lease_replica(deployed_cluster *c) {
    const char *name = deployed_extender_arg(c->d, "--leader-elect-name");
    cJSON *l = deployed_cluster_get(c, "leases", c->d->ns, name ? name : "tessera-extender");
    const cJSON *h = get(get(l, "spec"), "holderIdentity");
    int who = -1;
    for (int i = 0; i < 2 && cJSON_IsString(h); i++) {
        size_t n = strlen(c->rep[i].pod_name);
        if (!strncmp(h->valuestring, c->rep[i].pod_name, n) && h->valuestring[n] == '_') who = i;
    }
    cJSON_Delete(l);
    return who;
}

bool deployed_cluster_create_share(deployed_cluster *c, int r, const char *name, const char *fraction, char *uid,
                                   size_t uidlen, char *cm, size_t cmlen) {
    char pod[1024];
    snprintf(pod, sizeof pod,
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\","
             "\"annotations\":{\"tessera.io/gpu-fraction\":\"%s\"}},\"spec\":{\"schedulerName\":\"%s\","
             "\"containers\":[{\"name\":\"app\",\"image\":\"nvidia/cuda:12.4.1-base-ubuntu22.04\"}]}}",
             name, fraction, c->d->scheduler_name);
    cJSON *stored = deployed_create_pod(c->api, &c->rep[r], pod, c->err, sizeof c->err);
    const cJSON *meta = get(stored, "metadata");
    const cJSON *u = get(meta, "uid"), *d = get(get(meta, "annotations"), EXT_DLV_ANN_DELIVERY);
    snprintf(uid, uidlen, "%s", cJSON_IsString(u) ? u->valuestring : "");
    snprintf(cm, cmlen, "%s", cJSON_IsString(d) ? d->valuestring : "");
    if (stored && !(uid[0] && cm[0]))
        snprintf(c->err, sizeof c->err, "pod %s was admitted without a UID or the annotation " EXT_DLV_ANN_DELIVERY,
                 name);
    cJSON_Delete(stored);
    return uid[0] && cm[0];
}

cJSON *deployed_cluster_get(deployed_cluster *c, const char *kind, const char *ns, const char *name) {
    char *t = fake_api_get(c->api, kind, ns, name);
    cJSON *o = t ? cJSON_Parse(t) : NULL;
    free(t);
    return o;
}

bool deployed_cluster_bound(deployed_cluster *c, const char *name) {
    cJSON *p = deployed_cluster_get(c, "pods", "default", name);
    bool b = cJSON_IsString(get(get(p, "spec"), "nodeName"));
    cJSON_Delete(p);
    return b;
}

cJSON *deployed_cluster_reservations(deployed_cluster *c) {
    char *t = fake_api_list(c->api, "pods");
    cJSON *all = t ? cJSON_Parse(t) : NULL, *out = cJSON_CreateArray();
    free(t);
    cJSON *p;
    cJSON_ArrayForEach(p, all) {
        const cJSON *meta = get(p, "metadata"), *l = get(get(meta, "labels"), EXT_RSV_LABEL);
        if (cJSON_IsString(l) && !strcmp(l->valuestring, "true") && !get(meta, "deletionTimestamp"))
            cJSON_AddItemToArray(out, cJSON_Duplicate(p, 1));
    }
    cJSON_Delete(all);
    return out;
}

void deployed_cluster_cm_uuid(deployed_cluster *c, const char *cm, char *buf, size_t len) {
    cJSON *o = deployed_cluster_get(c, "configmaps", "default", cm);
    const cJSON *v = get(get(o, "data"), EXT_DLV_ENV_VISIBLE);
    snprintf(buf, len, "%s", cJSON_IsString(v) ? v->valuestring : "");
    cJSON_Delete(o);
}
