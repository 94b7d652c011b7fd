/* kube.c -- two API calls over libcurl (kube.h says why this is not the extender's client). */
#include "agent/kube.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount/"
#define MAX_TOKEN 65536
#define MAX_BODY (8u << 20) /* a Node with big annotations and images lists stays far below */

void agent_kube_defaults(agent_kube *k) {
    memset(k, 0, sizeof *k);
    k->timeout_ms = 10000;
}

int agent_kube_global_init(void) { return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1; }

int agent_kube_in_cluster(agent_kube *k, char *err, size_t errlen) {
    const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host || !port || !*port) {
        snprintf(err, errlen, "not running in a cluster: KUBERNETES_SERVICE_HOST/PORT are not set");
        return -1;
    }
    const char *token = k->token_file[0] ? k->token_file : SA_DIR "token";
    if (access(token, R_OK) != 0) {
        snprintf(err, errlen, "in-cluster: cannot read %s: %s", token, strerror(errno));
        return -1;
    }
    snprintf(k->api_url, sizeof k->api_url, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host, port);
    if (!k->token_file[0]) snprintf(k->token_file, sizeof k->token_file, "%s", SA_DIR "token");
    if (!k->ca_file[0] && access(SA_DIR "ca.crt", R_OK) == 0)
        snprintf(k->ca_file, sizeof k->ca_file, "%s", SA_DIR "ca.crt");
    return 0;
}

typedef struct body_buf { char *p; size_t n; bool over; } body_buf;

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud) {
    body_buf *b = ud;
    size_t n = size * nmemb;
    if (b->over || b->n + n > MAX_BODY) { b->over = true; return 0; }
    char *q = realloc(b->p, b->n + n + 1);
    if (!q) { b->over = true; return 0; }
    memcpy(q + b->n, ptr, n);
    b->p = q;
    b->n += n;
    b->p[b->n] = 0;
    return n;
}

/* "Authorization: Bearer <token>" from the token file, or NULL with err (a missing token would only earn a
 * confusing 401). *line is NULL without a token file. */
static int auth_header(const agent_kube *k, char **line, char *err, size_t errlen) {
    *line = NULL;
    if (!k->token_file[0]) return 0;
    FILE *f = fopen(k->token_file, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot read token file %s: %s", k->token_file, strerror(errno));
        return -1;
    }
    char *tok = malloc(MAX_TOKEN + 1);
    size_t n = tok ? fread(tok, 1, MAX_TOKEN + 1, f) : 0;
    fclose(f);
    size_t s = 0;
    while (n && isspace((unsigned char)tok[n - 1])) n--;
    while (s < n && isspace((unsigned char)tok[s])) s++;
    bool ok = tok && n > s && n <= MAX_TOKEN;
    for (size_t i = s; ok && i < n; i++) ok = tok[i] > 0x20 && tok[i] < 0x7f; /* no header injection */
    if (!ok) {
        snprintf(err, errlen, "token file %s is empty, too big or not a token", k->token_file);
        free(tok);
        return -1;
    }
    static const char pre[] = "Authorization: Bearer ";
    *line = malloc(sizeof pre + (n - s));
    if (*line) {
        memcpy(*line, pre, sizeof pre - 1);
        memcpy(*line + sizeof pre - 1, tok + s, n - s);
        (*line)[sizeof pre - 1 + (n - s)] = 0;
    }
    free(tok);
    if (!*line) snprintf(err, errlen, "out of memory");
    return *line ? 0 : -1;
}

/* The message of a v1 Status body, else "HTTP <code>". */
static void status_msg(const body_buf *b, long code, char *err, size_t errlen) {
    cJSON *s = b->p ? cJSON_Parse(b->p) : NULL;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(s, "message");
    if (cJSON_IsString(m) && *m->valuestring) snprintf(err, errlen, "HTTP %ld: %s", code, m->valuestring);
    else snprintf(err, errlen, "HTTP %ld from the API server", code);
    cJSON_Delete(s);
}

static int request(const agent_kube *k, const char *method, const char *path, const char *body, char **resp,
                   char *err, size_t errlen) {
    if (resp) *resp = NULL;
    char url[2048], errbuf[CURL_ERROR_SIZE] = "";
    if ((size_t)snprintf(url, sizeof url, "%s%s", k->api_url, path) >= sizeof url) {
        snprintf(err, errlen, "%s %s: URL too long", method, path);
        return AGENT_KUBE_NO_REQUEST;
    }
    char *auth = NULL;
    if (auth_header(k, &auth, err, errlen) < 0) return AGENT_KUBE_NO_REQUEST;
    struct curl_slist *h = NULL, *t;
    CURL *c = curl_easy_init();
    bool ok = c != NULL;
    if (ok && auth) ok = (t = curl_slist_append(h, auth)) && (h = t);
    if (ok) ok = (t = curl_slist_append(h, "Accept: application/json")) && (h = t);
    if (ok && body) ok = (t = curl_slist_append(h, "Content-Type: application/merge-patch+json")) && (h = t);
    free(auth);
    if (!ok) {
        curl_slist_free_all(h);
        if (c) curl_easy_cleanup(c);
        snprintf(err, errlen, "out of memory");
        return AGENT_KUBE_NO_REQUEST;
    }
    body_buf b = {0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "tessera-node-agent");
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(k->timeout_ms > 0 ? k->timeout_ms : 10000));
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    if (k->ca_file[0]) curl_easy_setopt(c, CURLOPT_CAINFO, k->ca_file);
    if (k->cert_file[0]) curl_easy_setopt(c, CURLOPT_SSLCERT, k->cert_file);
    if (k->key_file[0]) curl_easy_setopt(c, CURLOPT_SSLKEY, k->key_file);
    if (k->insecure) {
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    int ret;
    if (rc != CURLE_OK || code == 0 || b.over) {
        snprintf(err, errlen, "%s %s: %s", method, path,
                 b.over ? "answer too large" : errbuf[0] ? errbuf : curl_easy_strerror(rc));
        ret = AGENT_KUBE_UNREACHABLE;
    } else {
        if (code < 200 || code > 299) status_msg(&b, code, err, errlen);
        else if (resp) { *resp = b.p; b.p = NULL; }
        ret = (int)code;
    }
    free(b.p);
    return ret;
}

/* A node name is a DNS subdomain: nothing to escape in a URL path, and anything else is refused. */
bool agent_kube_node_name_ok(const char *node, char *err, size_t errlen) {
    size_t n = node ? strlen(node) : 0;
    bool ok = n > 0 && n <= 253;
    for (size_t i = 0; ok && i < n; i++)
        ok = islower((unsigned char)node[i]) || isdigit((unsigned char)node[i]) || node[i] == '-' || node[i] == '.';
    if (!ok) snprintf(err, errlen, "node name \"%.300s\" is not a DNS subdomain", node ? node : "");
    return ok;
}

int agent_kube_get_node(const agent_kube *k, const char *node, char **body, char *err, size_t errlen) {
    *body = NULL;
    if (!agent_kube_node_name_ok(node, err, errlen)) return AGENT_KUBE_NO_REQUEST;
    char path[300];
    snprintf(path, sizeof path, "/api/v1/nodes/%s", node);
    return request(k, "GET", path, NULL, body, err, errlen);
}

int agent_kube_patch_annotations(const agent_kube *k, const char *node, const char *const *keys,
                                 const char *const *values, int n, char *err, size_t errlen) {
    if (!agent_kube_node_name_ok(node, err, errlen)) return AGENT_KUBE_NO_REQUEST;
    cJSON *root = cJSON_CreateObject();
    cJSON *ann = cJSON_AddObjectToObject(cJSON_AddObjectToObject(root, "metadata"), "annotations");
    for (int i = 0; i < n; i++) {
        if (values[i]) cJSON_AddStringToObject(ann, keys[i], values[i]);
        else cJSON_AddNullToObject(ann, keys[i]);
    }
    char *body = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!body) {
        snprintf(err, errlen, "out of memory");
        return AGENT_KUBE_NO_REQUEST;
    }
    char path[300];
    snprintf(path, sizeof path, "/api/v1/nodes/%s", node);
    int st = request(k, "PATCH", path, body, NULL, err, errlen);
    free(body);
    return st;
}
