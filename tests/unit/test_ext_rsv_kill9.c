/* test_ext_rsv_kill9.c -- soft-share delivery survives kill -9 at any step. The real tessera-extender
 * binary runs in cluster mode against the fake API server, with the fake kubelet playing the node (it
 * admits reservation pods by device count and publishes their UUID after a delay, so a kill lands between
 * any two steps: share bound, reservation created, reservation admitted, UUID published, ConfigMap written,
 * share deleted, reservation released). Each life binds a few shares and deletes one, then dies by SIGKILL
 * after a different delay. A last life runs to the end, and then, from the API's own objects:
 *   - every share bound to the node has its ConfigMap, naming exactly the device its reservation holds;
 *   - no (node, GPU) has two live reservations, and no device is ever held by two pods;
 *   - no reservation is left without tenants once the grace period has passed (no orphan).
 */
#include <stdint.h>
#include <time.h>

#include "ext_helpers.h"
#include "ext_proc.h"
#include "tests/support/wait.h"
#include "extender/base/annotation.h"
#include "extender/base/delivery.h"
#include "tests/support/fake_apiserver.h"
#include "tests/support/fake_kubelet.h"

#define K_SHARES 24
#define K_MIB 30000   /* two per 81920 MiB A100: 16 fit on the node's 8 GPUs */

/* A share as the webhook leaves it: its delivery annotation and envFrom of that ConfigMap, so the kubelet holds its
 * container until tessera writes it (a share without envFrom starts at once, before its reservation exists). */
static char *k_share(int i) {
    char name[16], uid[24], ann[128], cm[48];
    snprintf(name, sizeof name, "k%d", i);
    snprintf(uid, sizeof uid, "uid-k%d", i);
    snprintf(cm, sizeof cm, EXT_DLV_CM_PREFIX "k%d", i);
    snprintf(ann, sizeof ann, "\"" EXT_DLV_ANN_DELIVERY "\":\"%s\"", cm);
    char *t = pod_json(name, uid, 0, "\"nvidia.com/gpumem\":\"30000\"", ann, NULL);
    cJSON *p = cJSON_Parse(t);
    free(t);
    cJSON *from = cJSON_CreateObject();
    cJSON_AddStringToObject(cJSON_AddObjectToObject(from, "configMapRef"), "name", cm);
    cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "spec"), "containers"), 0);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(c0, "envFrom"), from);
    t = cJSON_PrintUnformatted(p);
    cJSON_Delete(p);
    return t;
}

/* Filter and bind the pending shares (at most max), as kube-scheduler would. */
static int k_schedule(fake_api *api, int port, int max) {
    static const char *nodes[] = {"n1"};
    int done = 0;
    for (int i = 0; i < K_SHARES && done < max; i++) {
        char name[16];
        snprintf(name, sizeof name, "k%d", i);
        char *txt = fake_api_get(api, "pods", "default", name);
        cJSON *pod = txt ? cJSON_Parse(txt) : NULL;
        free(txt);
        bool pending = pod && !cJSON_IsString(cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "spec"), "nodeName"));
        char *pj = pending ? cJSON_PrintUnformatted(pod) : NULL;
        cJSON_Delete(pod);
        if (!pj) continue;
        char *args = args_names(pj, nodes, 1);
        free(pj);
        long code;
        cJSON *f = http(port, "/tessera/filter", args, &code);
        free(args);
        bool fits = cJSON_GetArraySize(cJSON_GetObjectItem(f, "NodeNames")) == 1;
        cJSON_Delete(f);
        if (!fits) continue;
        char body[256];
        snprintf(body, sizeof body, "{\"PodName\":\"%s\",\"PodNamespace\":\"default\",\"PodUID\":\"uid-%s\",\"Node\":\"n1\"}",
                 name, name);
        cJSON_Delete(http(port, "/tessera/bind", body, &code));
        done++;
    }
    return done;
}

typedef struct k_view {
    int shares, delivered, wrong_uuid, gpus_reserved_twice, orphans;
    int live[8];                 /* live reservations per GPU */
    char tenant[8][16];          /* per GPU: the name of one share on it */
} k_view;

static const char *k_str(const cJSON *o, const char *a, const char *b, const char *c) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);
    if (b) v = cJSON_GetObjectItemCaseSensitive(v, b);
    if (c) v = cJSON_GetObjectItemCaseSensitive(v, c);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* What the API objects say. */
static void k_read(fake_api *api, fake_kubelet *kl, k_view *v) {
    memset(v, 0, sizeof *v);
    char *txt = fake_api_list(api, "pods");
    cJSON *pods = cJSON_Parse(txt), *p;
    free(txt);
    char live_dev[8][128];     /* per GPU: devices of its live reservation */
    int live[8] = {0}, tenants[8] = {0};
    memset(live_dev, 0, sizeof live_dev);
    cJSON_ArrayForEach(p, pods) {
        const char *rsv = k_str(p, "metadata", "labels", EXT_RSV_LABEL);
        const char *phase = k_str(p, "status", "phase", NULL);
        if (!rsv || strcmp(rsv, "true") != 0 || (phase && !strcmp(phase, "Failed"))) continue;
        const char *gs = k_str(p, "metadata", "annotations", EXT_RSV_ANN_GPU);
        int g = gs ? atoi(gs) : -1;
        if (g < 0 || g >= 8) continue;
        live[g]++;
        char *d = fake_kubelet_devices(kl, k_str(p, "metadata", "uid", NULL));
        snprintf(live_dev[g], sizeof live_dev[g], "%s", d ? d : "");
        free(d);
    }
    cJSON_ArrayForEach(p, pods) {
        const char *name = k_str(p, "metadata", "name", NULL);
        if (!name || name[0] != 'k' || !k_str(p, "spec", "nodeName", NULL)) continue;
        cJSON *a = cJSON_Parse(k_str(p, "metadata", "annotations", EXT_ANN_ASSIGNMENT) ?: "null");
        const cJSON *g0 = cJSON_GetArrayItem(cJSON_GetObjectItem(a, "grants"), 0);
        int g = g0 ? cJSON_GetObjectItem(g0, "gpu")->valueint : -1;
        cJSON_Delete(a);
        v->shares++;
        if (g < 0 || g >= 8) continue;
        tenants[g]++;
        snprintf(v->tenant[g], sizeof v->tenant[g], "%s", name);
        char cmn[64];
        snprintf(cmn, sizeof cmn, EXT_DLV_CM_PREFIX "%s", name);
        char *cm = fake_api_get(api, "configmaps", "default", cmn);
        cJSON *cj = cm ? cJSON_Parse(cm) : NULL;
        free(cm);
        const char *uuid = k_str(cj, "data", EXT_DLV_ENV_VISIBLE, NULL);
        if (uuid) {
            v->delivered++;
            if (strcmp(uuid, live_dev[g]) != 0) v->wrong_uuid++;
        }
        cJSON_Delete(cj);
    }
    for (int g = 0; g < 8; g++) {
        v->live[g] = live[g];
        if (live[g] > 1) v->gpus_reserved_twice++;
        if (live[g] && !tenants[g]) v->orphans++;
    }
    cJSON_Delete(pods);
}

TEST(ext_rsv_kill9_at_every_step_then_restart_converges) {
    char bin[600];
    CHECK_MSG(extender_path(bin, sizeof bin), "tessera-extender is not built next to the tests (run make)");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char err[256], url[128];
    fake_api *api = fake_api_start(0, err, sizeof err);
    CHECK_MSG(api, "fake API: %s", err);
    cJSON *node = demo_node_as("gpu-a100-whole", "n1");
    char *nt = cJSON_PrintUnformatted(node);
    fake_api_put(api, "nodes", nt);
    free(nt);
    cJSON_Delete(node);
    fake_kubelet *kl = fake_kubelet_start(api);
    fake_kubelet_add_node(kl, "n1", "nvidia.com/gpu", 8, "GPU-n1");
    fake_kubelet_set_reserve_delay_ms(kl, 80);   /* a window between "admitted" and "UUID published" */
    for (int i = 0; i < K_SHARES; i++) {
        char *pj = k_share(i);
        fake_api_put(api, "pods", pj);
        free(pj);
    }
    fake_api_url(api, url, sizeof url);
    const char *flags[] = {"--leader-elect=false", "--soft-share-delivery", "reservation", "--reserve-image",
                           "registry.example/tessera:test", "--reservation-namespace", "tessera", "--reservation-grace",
                           "1", NULL};
    /* Kill delays after each life's work: at once, mid-creation, mid-admission, mid-publication, later. */
    static const int kill_after_ms[] = {0, 15, 40, 70, 110, 160, 250};
    int lives = 0, bound = 0, deleted = 0;
    bool all_up = true;
    for (size_t life = 0; life < sizeof kill_after_ms / sizeof *kill_after_ms; life++) {
        proc p;
        bool up = proc_start_with(&p, bin, url, flags) && wait_ready(p.port);
        all_up &= up;
        if (!up) break;
        lives++;
        bound += k_schedule(api, p.port, 3);
        if (life % 2 == 1) {   /* a share ends: its GPU may become tenant-less */
            char name[16];
            snprintf(name, sizeof name, "k%d", (int)life);
            if (fake_api_delete(api, "pods", "default", name) == 0) deleted++;
        }
        test_nap_ms(kill_after_ms[life]);
        proc_end(&p, SIGKILL);
    }
    /* The last life: schedule what still fits, then wait for delivery and release to settle. */
    proc p;
    bool up = proc_start_with(&p, bin, url, flags) && wait_ready(p.port);
    k_view v = {0};
    bool settled = false;
    if (up) {
        bound += k_schedule(api, p.port, K_SHARES);
        settled = WAIT_FOR((k_read(api, kl, &v), v.shares > 0 && v.delivered == v.shares && v.wrong_uuid == 0 &&
                                                 v.orphans == 0 && v.gpus_reserved_twice == 0));
        proc_end(&p, SIGKILL);
    }
    /* Every share of one GPU ends, and tessera dies at once: the next life finds the reservation without
     * tenants and releases it after the grace period (1 s), not before: not before 1 s after the process started,
     * since it cannot know the tenants left earlier. */
    int freed_gpu = -1, released_after_ms = -1;
    for (int g = 0; settled && g < 8 && freed_gpu < 0; g++)
        if (v.live[g] == 1) freed_gpu = g;
    if (freed_gpu >= 0) {
        k_view w;
        for (int round = 0; round < 4; round++) {   /* both tenants (a GPU holds two shares) */
            k_read(api, kl, &w);
            if (w.tenant[freed_gpu][0]) fake_api_delete(api, "pods", "default", w.tenant[freed_gpu]);
        }
        int64_t t0 = test_now_ms();
        up = proc_start_with(&p, bin, url, flags) && wait_ready(p.port);
        if (up && WAIT_FOR((k_read(api, kl, &w), w.live[freed_gpu] == 0)))
            released_after_ms = (int)(test_now_ms() - t0);
        if (up) proc_end(&p, SIGTERM);
    }
    int doubles = fake_kubelet_double_holds(kl);
    printf("    kill -9: %d lives, %d binds, %d shares deleted; at the end %d shares bound, %d delivered, %d wrong "
           "UUIDs, %d GPUs reserved twice, %d orphan reservations, %d devices ever held twice\n",
           lives, bound, deleted, v.shares, v.delivered, v.wrong_uuid, v.gpus_reserved_twice, v.orphans, doubles);
    printf("    the orphan reservation of GPU %d was released %d ms after the restart\n", freed_gpu, released_after_ms);
    fake_kubelet_stop(kl);
    fake_api_free(api);
    curl_global_cleanup();
    CHECK(all_up);
    CHECK(up);
    CHECK(bound > 0);
    CHECK_INT(v.shares, 16);   /* 21 shares are left and the node holds 16 */
    CHECK_INT(v.wrong_uuid, 0);
    CHECK_INT(v.gpus_reserved_twice, 0);
    CHECK_INT(v.orphans, 0);
    CHECK_INT(v.delivered, v.shares);
    CHECK_INT(doubles, 0);
    CHECK(settled);
    CHECK(freed_gpu >= 0);
    CHECK_MSG(released_after_ms >= 1000, "the orphan reservation of GPU %d went after %d ms (grace 1 s)", freed_gpu,
              released_after_ms);
}
