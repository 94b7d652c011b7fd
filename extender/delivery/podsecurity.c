/* podsecurity.c -- namespaces' Pod Security enforce level, read from the API and kept a while
 * (podsecurity.h).
 */
#include "extender/delivery/podsecurity.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "kube/log.h"
#include "extender/base/map.h"
#include "extender/mirror/state.h"

#define PSS_TIMEOUT_MS 2000   /* within the webhook's own 5 s (deploy/webhook.yaml timeoutSeconds) */

typedef struct entry {
    char ns[64];
    char level[32];
    int64_t ms;
} entry;

struct ext_pss {
    kube_client *k;
    int ttl_ms;
    pthread_mutex_t mu;
    ext_map *cache;   /* ns -> entry */
    unsigned long reads;
};

ext_pss *ext_pss_new(kube_client *k, int ttl_ms) {
    ext_pss *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->k = k;
    p->ttl_ms = ttl_ms > 0 ? ttl_ms : 60000;
    if (!(p->cache = ext_map_new())) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    return p;
}

void ext_pss_free(ext_pss *p) {
    if (!p) return;
    size_t it = 0;
    void *v;
    while ((v = ext_map_next(p->cache, &it))) free(v);
    ext_map_free(p->cache);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

unsigned long ext_pss_reads(ext_pss *p) {
    pthread_mutex_lock(&p->mu);
    unsigned long n = p->reads;
    pthread_mutex_unlock(&p->mu);
    return n;
}

int ext_pss_level(void *user, const char *ns, char *level, size_t len, char *why, size_t whylen) {
    ext_pss *p = user;
    level[0] = 0;
    if (!p || !ns || !ns[0] || strlen(ns) >= sizeof ((entry *)0)->ns) {
        snprintf(why, whylen, "no namespace to read");
        return -1;
    }
    int64_t now = ext_now_ms();
    pthread_mutex_lock(&p->mu);
    entry *e = ext_map_get(p->cache, ns);
    if (e && now - e->ms < p->ttl_ms) {
        snprintf(level, len, "%s", e->level);
        pthread_mutex_unlock(&p->mu);
        return 0;
    }
    p->reads++;
    pthread_mutex_unlock(&p->mu);
    char path[160], err[512] = "", *resp = NULL;
    snprintf(path, sizeof path, "/api/v1/namespaces/%s", ns);
    int code = kube_request(p->k, "GET", path, NULL, PSS_TIMEOUT_MS, &resp, err, sizeof err);
    cJSON *o = code == 200 && resp ? cJSON_Parse(resp) : NULL;
    free(resp);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        if (code == 403)
            snprintf(why, whylen, "403: tessera-extender may not get namespaces (ClusterRole tessera-extender): %s", err);
        else if (code == 200)
            snprintf(why, whylen, "the API's answer is not a Namespace");
        else
            snprintf(why, whylen, "API status %d%s%s", code, err[0] ? ": " : "", err);
        kube_log(KUBE_LOG_WARN, "event=namespace-read-failed namespace=%s why=\"%s\"", ns, why);
        return -1;
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "metadata"), "labels"), EXT_PSS_LABEL_ENFORCE);
    char got[32];
    snprintf(got, sizeof got, "%s", cJSON_IsString(v) ? v->valuestring : "");
    cJSON_Delete(o);
    snprintf(level, len, "%s", got);
    pthread_mutex_lock(&p->mu);
    e = ext_map_get(p->cache, ns);
    if (!e && (e = calloc(1, sizeof *e))) {
        snprintf(e->ns, sizeof e->ns, "%s", ns);
        if (ext_map_put(p->cache, e->ns, e) != 0) {
            free(e);
            e = NULL;
        }
    }
    if (e) {
        snprintf(e->level, sizeof e->level, "%s", got);
        e->ms = now;
    }
    pthread_mutex_unlock(&p->mu);
    return 0;
}
