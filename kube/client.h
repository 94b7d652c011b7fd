/* client.h -- the Kubernetes API client of every tessera program: in-cluster configuration, requests (GET, POST,
 * PUT, DELETE, merge PATCH) over pooled keep-alive connections, pod binding, and list+watch of nodes, pods and the
 * DRA kinds. The extender uses all of it; the node agent and tessera-reserve only configuration and requests.
 *
 * Once started, one background thread per kind lists, then watches from the list's resourceVersion,
 * relist on 410 Gone, and reconnect with capped exponential backoff when the API server
 * errs or vanishes. Every object reaches the caller through one handler, called from
 * those threads (the caller locks its own state). A relist is announced with
 * KUBE_RELIST before its objects and KUBE_SYNCED after them, so the caller can
 * drop whatever the relist did not mention. Speaks JSON over HTTPS or HTTP via libcurl.
 */
#ifndef KUBE_CLIENT_H
#define KUBE_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

/* Nodes and pods always; the resource.k8s.io/v1 kinds of Dynamic Resource Allocation only with cfg.dra. A
 * cluster that does not serve resource.k8s.io/v1 (before Kubernetes 1.34, or DRA turned off) answers their
 * list with 404, and one whose RBAC lacks them with 403: either is logged once and handled as an empty list
 * (RELIST, SYNCED), then asked again every backoff_max_ms, quietly, in case the API or the right appears. */
typedef enum kube_kind {
    KUBE_NODE = 0,
    KUBE_POD = 1,
    KUBE_RESOURCESLICE = 2,
    KUBE_RESOURCECLAIM = 3,
    KUBE_DEVICECLASS = 4,
    KUBE_NKINDS
} kube_kind;

/* "Node", "Pod", "ResourceSlice", ... */
const char *kube_kind_name(kube_kind kind);

typedef enum kube_event {
    KUBE_RELIST = 0, /* a (re)list starts: objects follow as ADDED, then SYNCED; obj is NULL */
    KUBE_ADDED,
    KUBE_MODIFIED,
    KUBE_DELETED,
    KUBE_SYNCED      /* the list is complete; obj is NULL */
} kube_event;

/* obj is valid only during the call. */
typedef void (*kube_handler)(void *user, kube_kind kind, kube_event ev, const cJSON *obj);

/* Why an API call failed, in the words a health registry and its metrics use (the extender's health.h names
 * them "unreachable", "not_found", ...). */
typedef enum kube_reason {
    KUBE_REASON_UNREACHABLE = 0,  /* no connection, or it broke */
    KUBE_REASON_TIMEOUT,          /* no answer in time */
    KUBE_REASON_UNAUTHORIZED,     /* 401: the token was not accepted */
    KUBE_REASON_FORBIDDEN,        /* 403: RBAC */
    KUBE_REASON_NOT_FOUND,        /* 404: e.g. the namespace does not exist */
    KUBE_REASON_THROTTLED,        /* 429 */
    KUBE_REASON_SERVER_ERROR,     /* 5xx */
    KUBE_REASON_REJECTED,         /* any other 4xx */
    KUBE_REASON_BAD_RESPONSE,     /* an answer that is not what the API sends (malformed JSON) */
    KUBE_REASON_FILE,             /* a file the client needs (token, CA) is missing or unreadable */
    KUBE_REASON_TLS,              /* TLS setup or verification */
    KUBE_REASON_N
} kube_reason;

/* What the client depends on, as it reports it to cfg.report: the list+watch of a kind, Binding POSTs, the
 * token file (re-read for every request) and the CA file. */
typedef enum kube_dep { KUBE_DEP_KIND = 0, KUBE_DEP_BIND, KUBE_DEP_TOKEN_FILE, KUBE_DEP_CA_FILE } kube_dep;

/* Called from whichever thread made the attempt: ok, or code (HTTP status or KUBE_*; 0 when there is none),
 * reason and msg (what failed in words an operator can act on, kube_api_msg). kind only for KUBE_DEP_KIND. The
 * extender's health registry is one (ext_health_kube_report); the node agent and tessera-reserve keep none. */
typedef void (*kube_report_fn)(void *user, kube_dep dep, kube_kind kind, bool ok, int code, kube_reason reason,
                               const char *msg);

typedef struct kube_config {
    char api_url[512];      /* "https://10.0.0.1:443" or "http://127.0.0.1:8080" */
    char token_file[512];   /* bearer token, re-read on every (re)connect (projected tokens rotate) */
    char ca_file[512];      /* "" = system CAs */
    char cert_file[512];    /* client certificate (optional) */
    char key_file[512];
    bool insecure;          /* skip TLS verification (tests only) */
    int request_timeout_ms; /* list (and bind unless bind_timeout_ms); default 10000 */
    int bind_timeout_ms;    /* one Binding POST; 0 = request_timeout_ms. kube-scheduler waits
                             * httpTimeout for the whole bind verb, so keep this below it */
    int watch_timeout_s;    /* server-side timeoutSeconds for a watch; default 300 */
    int backoff_max_ms;     /* cap of the reconnect backoff; default 30000 */
    bool dra;               /* also list+watch ResourceSlices, ResourceClaims, DeviceClasses (default off here;
                             * the extender's --dra turns it on) */
    char rbac[96];          /* where the rules granting list+watch and pods/binding live, named in a 403's message
                             * ("tessera-extender ClusterRole"); "" = "RBAC rules" */
    kube_report_fn report;  /* NULL: report nothing */
    void *report_user;
    char user_agent[64];    /* the program's name (default "tessera") */
    size_t max_answer;      /* the largest answer kube_request accepts; 0 = 64 KiB (a Node with its images list
                             * needs more: the node agent asks for 8 MiB) */
} kube_config;

/* Defaults, then the in-cluster settings: KUBERNETES_SERVICE_HOST/PORT, the service
 * account token and CA at /var/run/secrets/kubernetes.io/serviceaccount/. -1 with err
 * when not running in a cluster. */
void kube_config_defaults(kube_config *cfg);
int kube_config_in_cluster(kube_config *cfg, char *err, size_t errlen);

/* The namespace tessera runs in, the default home of its Lease: $POD_NAMESPACE (the Downward API), else the
 * service account's namespace file (/var/run/secrets/kubernetes.io/serviceaccount/namespace, mounted in every
 * pod with a service account token), else fallback. */
void kube_own_namespace(char *buf, size_t len, const char *fallback);

/* The flags that configure the client, with the same names and meaning in every program: their getopt_long
 * entries (KUBE_OPTIONS, to put in a program's option table) and values. --kube-api URL, --token-file FILE,
 * --ca-file FILE, --client-cert FILE, --client-key FILE, --insecure-skip-tls-verify. */
enum { KUBE_OPT_API = 0x4b00, KUBE_OPT_TOKEN, KUBE_OPT_CA, KUBE_OPT_CERT, KUBE_OPT_KEY, KUBE_OPT_INSECURE };
#define KUBE_OPTIONS                                                                                                 \
    {"kube-api", required_argument, 0, KUBE_OPT_API}, {"token-file", required_argument, 0, KUBE_OPT_TOKEN},          \
    {"ca-file", required_argument, 0, KUBE_OPT_CA}, {"client-cert", required_argument, 0, KUBE_OPT_CERT},            \
    {"client-key", required_argument, 0, KUBE_OPT_KEY}, {"insecure-skip-tls-verify", no_argument, 0, KUBE_OPT_INSECURE}
/* The --help lines of the client's TLS flags, the same in every program (each program words --kube-api,
 * --token-file and --ca-file for its own defaults). */
#define KUBE_OPTIONS_TLS_HELP                                                                                        \
    "  --client-cert FILE          client certificate for the API server\n"                                          \
    "  --client-key FILE           key for --client-cert\n"                                                          \
    "  --insecure-skip-tls-verify  do not verify the API server's certificate (tests only)\n"
/* getopt_long's answer opt (with its optarg): set it in cfg and true, or false when opt is not one of these. */
bool kube_config_option(kube_config *cfg, int opt, const char *arg);

typedef struct kube_client kube_client;

/* libcurl's global set-up, once per process (kube_new calls it too): call it from main before starting threads
 * that use libcurl on their own. -1 with err on failure. */
int kube_init(char *err, size_t errlen);

kube_client *kube_new(const kube_config *cfg, char *err, size_t errlen);

/* Start the list+watch threads; the handler is called from them until kube_stop. */
int kube_start(kube_client *k, kube_handler handler, void *user, char *err, size_t errlen);

/* Stop the threads (interrupting a blocked watch within a second) and free everything. */
void kube_free(kube_client *k);

/* POST /api/v1/namespaces/<ns>/pods/<name>/binding with metadata.uid = uid and
 * metadata.annotations = annotations (an object of strings, may be NULL). Returns the
 * HTTP status (201 on success), or -1 when the API server could not be reached; err
 * gets the API's message ("pods \"x\" not found", a UID precondition failure...), for 401/403,
 * 429, 5xx and no answer prefixed with what failed and, for 403, the RBAC rule it lacks
 * (kube_api_msg; cfg.report also hears of every outcome as KUBE_DEP_BIND). */
int kube_bind(kube_client *k, const char *ns, const char *name, const char *uid, const char *node,
                  const cJSON *annotations, char *err, size_t errlen);

/* Any other call (the leader election's Lease, reservations, ConfigMaps): method "GET" | "POST" | "PUT" |
 * "DELETE" | "PATCH" (a JSON merge patch: sent as application/merge-patch+json), path from the API root
 * ("/apis/coordination.k8s.io/v1/namespaces/NS/leases/NAME"), body JSON or NULL, a timeout (<= 0: the
 * configured request timeout). Returns the HTTP status with *resp the body (malloc'd; NULL on a bodiless
 * answer; resp may be NULL), or KUBE_UNREACHABLE / KUBE_TIMEOUT when no answer came, or
 * KUBE_NO_REQUEST when it could not even be sent (the token file is unreadable); err gets the reason, or
 * the API's message for a status outside 2xx. */
#define KUBE_UNREACHABLE (-1)
#define KUBE_TIMEOUT     (-2)
#define KUBE_NO_REQUEST  (-3)
int kube_request(kube_client *k, const char *method, const char *path, const char *body, int timeout_ms,
                     char **resp, char *err, size_t errlen);

/* Ask for a fresh list of one kind, even while its watch is healthy (the watch is cut at once), and get a
 * ticket; kube_relisted says when a list that began after the call has been delivered (SYNCED). A new
 * leader uses it to be sure its cache holds every binding the previous leader made. */
uint64_t kube_relist(kube_client *k, kube_kind kind);
bool kube_relisted(kube_client *k, kube_kind kind, uint64_t ticket);

/* The reason for kube_request's / kube_bind's status (KUBE_UNREACHABLE, KUBE_TIMEOUT, KUBE_NO_REQUEST, or an
 * HTTP status outside 2xx). */
kube_reason kube_reason_of(int code);

/* A message for a failed API call that says what was being done and, for 401/403, what the token or the RBAC
 * rules lack: "forbidden: cannot create leases in namespace tessera: check the tessera-leader-election Role:
 * <API message>", "cannot create Lease tessera/tessera-extender: namespaces \"tessera\" not found". verb:
 * get/list/watch/create/update/patch/delete; resource: the plural ("leases", "pods/binding"); kind: "Lease" (for
 * the object's name); ns "" for cluster-wide; name "" for a collection; rbac: which role grants it
 * ("tessera-leader-election Role"); api_msg: the API's message or the transport error. */
void kube_api_msg(char *out, size_t len, int code, const char *verb, const char *resource, const char *kind,
                  const char *ns, const char *name, const char *rbac, const char *api_msg);

/* A name that must be a DNS subdomain (a Node's; lower-case letters, digits, '-', '.'; at most 253): nothing to
 * escape in a URL path. false with err ("<what> \"x\" is not a DNS subdomain") if not. */
bool kube_name_ok(const char *what, const char *name, char *err, size_t errlen);

/* The body of a JSON merge patch of an object's annotations: {"metadata":{"annotations":{key: value, ...}}}, a
 * NULL value deleting its key (a merge patch deletes null members), in the order given; for kube_request's
 * "PATCH". malloc'd (cJSON_free or free), NULL when out of memory. */
char *kube_annotations_patch(const char *const *keys, const char *const *values, int n);

typedef struct kube_stats {
    uint64_t lists[KUBE_NKINDS];          /* completed lists per kind */
    uint64_t watch_restarts[KUBE_NKINDS]; /* watches that ended and were reopened */
    uint64_t gone[KUBE_NKINDS];           /* 410 Gone answers (each forces a relist) */
    uint64_t errors[KUBE_NKINDS];         /* failed requests (connection, 5xx, bad JSON) */
    bool synced[KUBE_NKINDS];             /* the latest list of this kind completed */
    bool absent[KUBE_NKINDS];             /* the kind's list answered 404 or 403 (an optional kind) */
} kube_stats;

void kube_get_stats(kube_client *k, kube_stats *out);

#endif
