/* kube.h -- the node agent's Kubernetes client: GET its Node and merge-PATCH the Node's annotations, nothing
 * else (the ClusterRole grants get and patch on nodes, no more).
 *
 * Why not extender/mirror/kube.c: that client is the extender's list+watch machinery (threads, relists, the
 * extender's health registry), and the agent must not depend on extender/ (it is its own layer, built into the
 * same image). The configuration flags keep the extender's names and meaning (--kube-api, --token-file,
 * --ca-file, --client-cert, --client-key, --insecure-skip-tls-verify), and the in-cluster defaults are the same
 * few lines: KUBERNETES_SERVICE_HOST/PORT, the service account's token (re-read on every request: projected
 * tokens rotate) and ca.crt.
 */
#ifndef AGENT_KUBE_H
#define AGENT_KUBE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct agent_kube {
    char api_url[512];      /* "https://10.0.0.1:443" or "http://127.0.0.1:8080" */
    char token_file[512];   /* "" = no bearer token */
    char ca_file[512];      /* "" = system CAs */
    char cert_file[512], key_file[512];
    bool insecure;          /* skip TLS verification (tests only) */
    int timeout_ms;         /* one request; default 10000 */
} agent_kube;

void agent_kube_defaults(agent_kube *k);
/* The in-cluster settings (a token or CA file already set wins). -1 with err when not in a cluster. */
int agent_kube_in_cluster(agent_kube *k, char *err, size_t errlen);

#define AGENT_KUBE_UNREACHABLE (-1) /* no answer (connection refused, timeout, TLS failure) */
#define AGENT_KUBE_NO_REQUEST  (-2) /* not sent: the token file is unreadable, or out of memory */

/* GET /api/v1/nodes/<node>: the HTTP status with *body (malloc'd) on 200; err gets the API's message otherwise. */
int agent_kube_get_node(const agent_kube *k, const char *node, char **body, char *err, size_t errlen);
/* PATCH /api/v1/nodes/<node> with {"metadata":{"annotations":{key: value, ...}}} (application/merge-patch+json;
 * a NULL value deletes the key). keys/values have n entries. The HTTP status, or one of the codes above. */
int agent_kube_patch_annotations(const agent_kube *k, const char *node, const char *const *keys,
                                 const char *const *values, int n, char *err, size_t errlen);

/* A Node's name is a DNS subdomain (lower-case letters, digits, '-', '.'; at most 253): false with err if not. */
bool agent_kube_node_name_ok(const char *node, char *err, size_t errlen);

/* Global libcurl set-up; call once from main before any thread starts. */
int agent_kube_global_init(void);

#endif
