/* lease.c -- the Lease records and calls of lease.h, as JSON through kube_request. */
#include "kube/lease.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void kube_lease_path(char *buf, size_t len, const char *ns, const char *name) {
    snprintf(buf, len, "/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s", ns, name);
}

void kube_lease_now(char *buf, size_t len) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char s[32];
    strftime(s, sizeof s, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%.19s.%06dZ", s, (int)(ts.tv_nsec / 1000) % 1000000);
}

/* "" rather than NULL for a missing string: the lease fields are copied as they are. */
static const char *jstr(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* body into *r; r->rv "" when it is not a Lease. */
static void parse(const char *body, const char *note_key, kube_lease *r) {
    memset(r, 0, sizeof *r);
    cJSON *o = body ? cJSON_Parse(body) : NULL;
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(o, "spec");
    if (cJSON_IsObject(o) && *jstr(meta, "resourceVersion")) {
        snprintf(r->rv, sizeof r->rv, "%s", jstr(meta, "resourceVersion"));
        snprintf(r->holder, sizeof r->holder, "%s", jstr(spec, "holderIdentity"));
        snprintf(r->acquire, sizeof r->acquire, "%s", jstr(spec, "acquireTime"));
        snprintf(r->renew, sizeof r->renew, "%s", jstr(spec, "renewTime"));
        if (note_key)
            snprintf(r->note, sizeof r->note, "%s", jstr(cJSON_GetObjectItemCaseSensitive(meta, "annotations"), note_key));
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(spec, "leaseDurationSeconds");
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(spec, "leaseTransitions");
        r->secs = cJSON_IsNumber(d) && d->valuedouble >= 1 ? (int)d->valuedouble : 1;
        r->transitions = cJSON_IsNumber(t) && t->valuedouble >= 0 ? (int)t->valuedouble : 0;
    }
    cJSON_Delete(o);
}

int kube_lease_get(kube_client *k, const char *ns, const char *name, const char *note_key, int timeout_ms,
                   kube_lease *out, char *err, size_t errlen) {
    char path[300], *resp = NULL;
    kube_lease_path(path, sizeof path, ns, name);
    int code = kube_request(k, "GET", path, NULL, timeout_ms, &resp, err, errlen);
    parse(code == 200 ? resp : NULL, note_key, out);
    free(resp);
    return code;
}

/* The Lease to write, as JSON. */
static char *body_of(const char *ns, const char *name, const kube_lease *rec, const char *note_key) {
    cJSON *o = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(o, "metadata"),
          *spec = cJSON_AddObjectToObject(o, "spec");
    cJSON_AddStringToObject(o, "apiVersion", "coordination.k8s.io/v1");
    cJSON_AddStringToObject(o, "kind", "Lease");
    cJSON_AddStringToObject(meta, "name", name);
    cJSON_AddStringToObject(meta, "namespace", ns);
    if (rec->rv[0]) cJSON_AddStringToObject(meta, "resourceVersion", rec->rv); /* optimistic concurrency */
    if (rec->note[0] && note_key)
        cJSON_AddStringToObject(cJSON_AddObjectToObject(meta, "annotations"), note_key, rec->note);
    cJSON_AddStringToObject(spec, "holderIdentity", rec->holder);
    cJSON_AddNumberToObject(spec, "leaseDurationSeconds", rec->secs);
    cJSON_AddStringToObject(spec, "acquireTime", rec->acquire);
    cJSON_AddStringToObject(spec, "renewTime", rec->renew);
    cJSON_AddNumberToObject(spec, "leaseTransitions", rec->transitions);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

int kube_lease_write(kube_client *k, const char *ns, const char *name, const kube_lease *rec, const char *note_key,
                     int timeout_ms, kube_lease *out, char *err, size_t errlen) {
    char path[300], *resp = NULL;
    if (rec->rv[0]) kube_lease_path(path, sizeof path, ns, name);
    else snprintf(path, sizeof path, "/apis/coordination.k8s.io/v1/namespaces/%s/leases", ns);
    char *body = body_of(ns, name, rec, note_key);
    int code = KUBE_NO_REQUEST;
    if (!body) snprintf(err, errlen, "out of memory");
    else code = kube_request(k, rec->rv[0] ? "PUT" : "POST", path, body, timeout_ms, &resp, err, errlen);
    if (out) parse(code >= 200 && code <= 299 ? resp : NULL, note_key, out);
    free(body);
    free(resp);
    return code;
}
