/* holdings.c -- the tessera.io/holdings record and the allocatable list, from the kubelet's Pod Resources API.
 * The bytes must be the same for the same holdings (the agent compares them to decide whether to write), so the
 * (pod, resource, id) triples are sorted and written out run by run, duplicates once. The JSON is streamed by hand
 * from that sorted array: a cJSON tree would print the same bytes, but only after the same sort and one node per id. */
#include "agent/holdings.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/podresources.h"
#include "kube/strbuf.h"

int agent_holdings_keeps(const char *resource) {
    static const char prefix[] = "nvidia.com/";
    return resource && strncmp(resource, prefix, sizeof prefix - 1) == 0 && resource[sizeof prefix - 1] != '\0';
}

/* ---- (key, resource, id) triples, sorted and written as nested objects ---- */

typedef struct triple {
    const char *key;        /* "ns/name"; NULL in the allocatable list, which has no pods */
    const char *res, *id;
} triple;

typedef struct triples {
    triple *t;
    size_t n, cap;
    bool oom;
} triples;

static void tr_add(triples *ts, const char *key, const char *res, const char *id) {
    if (ts->oom) return;
    if (ts->n == ts->cap) {
        size_t cap = ts->cap ? ts->cap * 2 : 64;
        triple *t = realloc(ts->t, cap * sizeof *t);
        if (!t) { ts->oom = true; return; }
        ts->t = t;
        ts->cap = cap;
    }
    ts->t[ts->n++] = (triple){key, res, id};
}

static int cmp_opt(const char *a, const char *b) {
    if (!a || !b) return (a != NULL) - (b != NULL);
    return strcmp(a, b);
}

static int tr_cmp(const void *pa, const void *pb) {
    const triple *a = pa, *b = pb;
    int c = cmp_opt(a->key, b->key);
    if (!c) c = strcmp(a->res, b->res);
    if (!c) c = strcmp(a->id, b->id);
    return c;
}

/* Devices of kept resources with non-empty ids, under key. */
static void tr_add_devices(triples *ts, const char *key, const agent_pr_devices *d, size_t nd) {
    for (size_t i = 0; i < nd; i++) {
        if (!d[i].resource || !agent_holdings_keeps(d[i].resource)) continue;
        for (size_t k = 0; k < d[i].nids; k++)
            if (d[i].ids[k] && d[i].ids[k][0]) tr_add(ts, key, d[i].resource, d[i].ids[k]);
    }
}

/* {"res":["id",...],...} for the sorted run t[from..to), duplicates once. */
static void write_resources(kube_strbuf *b, const triple *t, size_t from, size_t to) {
    kube_strbuf_add(b, "{", 1);
    for (size_t i = from; i < to; i++) {
        bool new_res = i == from || strcmp(t[i].res, t[i - 1].res) != 0;
        if (!new_res && strcmp(t[i].id, t[i - 1].id) == 0) continue;
        if (new_res) {
            if (i != from) kube_strbuf_lit(b, "],");
            kube_strbuf_json(b, t[i].res);
            kube_strbuf_lit(b, ":[");
        } else {
            kube_strbuf_add(b, ",", 1);
        }
        kube_strbuf_json(b, t[i].id);
    }
    if (to > from) kube_strbuf_add(b, "]", 1);
    kube_strbuf_add(b, "}", 1);
}

char *agent_holdings_from_list(const agent_pr_list *l) {
    triples ts = {0};
    char **keys = calloc(l->npods ? l->npods : 1, sizeof *keys);
    char *out = NULL;
    if (!keys) return NULL;
    for (size_t i = 0; i < l->npods; i++) {
        const agent_pr_pod *pod = &l->pods[i];
        const char *ns = pod->namespace_ ? pod->namespace_ : "", *name = pod->name ? pod->name : "";
        size_t len = strlen(ns) + 1 + strlen(name) + 1;
        if (!(keys[i] = malloc(len))) goto done;
        snprintf(keys[i], len, "%s/%s", ns, name);
        for (size_t c = 0; c < pod->ncontainers; c++)
            tr_add_devices(&ts, keys[i], pod->containers[c].devices, pod->containers[c].ndevices);
    }
    if (ts.oom) goto done;
    /* equal keys from two entries of the same pod merge here too, as containers do */
    if (ts.n) qsort(ts.t, ts.n, sizeof *ts.t, tr_cmp);
    kube_strbuf b = {0};
    kube_strbuf_lit(&b, "{\"v\":1,\"pods\":{");
    for (size_t i = 0; i < ts.n;) {
        size_t j = i;
        while (j < ts.n && strcmp(ts.t[j].key, ts.t[i].key) == 0) j++;
        if (i) kube_strbuf_add(&b, ",", 1);
        kube_strbuf_json(&b, ts.t[i].key);
        kube_strbuf_add(&b, ":", 1);
        write_resources(&b, ts.t, i, j);
        i = j;
    }
    kube_strbuf_lit(&b, "}}");
    out = kube_strbuf_finish(&b);
done:
    for (size_t i = 0; i < l->npods; i++) free(keys[i]);
    free(keys);
    free(ts.t);
    return out;
}

char *agent_allocatable_from_reply(const agent_pr_allocatable *a) {
    triples ts = {0};
    tr_add_devices(&ts, NULL, a->devices, a->ndevices);
    if (ts.oom) {
        free(ts.t);
        return NULL;
    }
    if (ts.n) qsort(ts.t, ts.n, sizeof *ts.t, tr_cmp);
    kube_strbuf b = {0};
    write_resources(&b, ts.t, 0, ts.n);
    free(ts.t);
    return kube_strbuf_finish(&b);
}

/* ---- the calls ---- */

char *agent_holdings_json(const char *socket_path, int timeout_ms, char *err, size_t errlen) {
    agent_pr_list l;
    if (agent_pr_call_list(socket_path, timeout_ms, &l, err, errlen) != AGENT_PR_OK) return NULL;
    char *json = agent_holdings_from_list(&l);
    agent_pr_list_free(&l);
    if (!json) snprintf(err, errlen, "out of memory writing the kubelet's reply as JSON");
    return json;
}

char *agent_allocatable_json(const char *socket_path, int timeout_ms, char *err, size_t errlen) {
    agent_pr_allocatable a;
    if (agent_pr_call_allocatable(socket_path, timeout_ms, &a, err, errlen) != AGENT_PR_OK) return NULL;
    char *json = agent_allocatable_from_reply(&a);
    agent_pr_allocatable_free(&a);
    if (!json) snprintf(err, errlen, "out of memory writing the kubelet's reply as JSON");
    return json;
}
