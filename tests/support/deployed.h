/* deployed.h -- tessera as `kubectl apply -k deploy/` runs it, for end-to-end tests. Everything is read from
 * deploy/ (kustomization.yaml and the files it lists), never restated: the Deployment's tessera-extender
 * container (its arguments and environment), tessera's own Pod as the ReplicaSet makes it from the template
 * (tessera-extender a native sidecar in spec.initContainers, kube-scheduler in spec.containers, images as
 * kustomization.yaml's images: maps them), and the KubeSchedulerConfiguration (its Lease, the extender's
 * urlPrefix and verbs, nodeCacheCapable, managedResources) that the fake kube-scheduler (fake_scheduler.h)
 * plays by.
 *
 * What a test machine cannot give as a cluster does, and what the harness does instead (nothing else differs):
 *   - each replica is a pod with its own IP; here both share 127.0.0.1, so every listen address of the
 *     Deployment (HOST:PORT) becomes 127.0.0.1:0 and the ports are read from the extender's log;
 *   - a pod reaches the API server through its service account (in-cluster configuration); here
 *     "--kube-api <fake API server URL>" is appended;
 *   - valueFrom.fieldRef in the environment is resolved against the Pod (metadata.name, metadata.namespace,
 *     spec.nodeName, status.podIP = 127.0.0.1); any other source fails the load, so a new kind of variable
 *     in deploy/ cannot be dropped silently. The sanitizers' *SAN_OPTIONS are passed through.
 *
 * The node agent (deploy/node-agent/, an optional kustomize component, so loaded only when a test enables it
 * with deployed_load_components) runs as its DaemonSet's tessera-node-agent container says: its command, its
 * arguments (each --flag=value) and its environment, NODE_NAME from spec.nodeName of the Pod the DaemonSet makes
 * on the test's node. Besides the listen addresses and --kube-api above, the harness changes only:
 *   - the node's filesystem: an argument that is an absolute path under a hostPath volume's mountPath is moved
 *     to host_root + the volume's host path (+ the rest), and one under /sys (a container's sysfs is the
 *     host's) to host_root + /sys...: there the test serves its fake Pod Resources socket and builds a sysfs tree;
 *   - the NVIDIA container runtime, which mounts libnvidia-ml.so.1 where the loader finds it: here
 *     LD_LIBRARY_PATH=nvml_dir (the fake NVML's directory) and the fake's own FAKE_NVML_* variables (the machine
 *     it plays: not the DaemonSet's, which cannot know the machine);
 *   - timing, when a test asks: the values of --poll-interval, --min-write-interval and --topology-interval (and
 *     no other flag), so that what the DaemonSet's 10 s write interval stretches over minutes runs in seconds;
 *     a test of the DaemonSet's own timing changes none.
 */
#ifndef DEPLOYED_H
#define DEPLOYED_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>
#include <cjson/cJSON.h>

#include "tests/support/fake_apiserver.h"

typedef struct deployed {
    cJSON *objects;            /* every object of the kustomization, images mapped (owned) */
    const cJSON *deployment;   /* the Deployment running tessera-extender (in objects) */
    const cJSON *node_agent;   /* the DaemonSet running tessera-node-agent (in objects), NULL unless enabled */
    cJSON *sched_config;       /* the KubeSchedulerConfiguration of the scheduler ConfigMap (owned) */
    char ns[64];               /* the Deployment's namespace */
    char extender_image[256];  /* the tessera-extender container's image, after images: */
    /* from the KubeSchedulerConfiguration */
    char scheduler_name[64];
    char lease_ns[64], lease_name[128];
    int lease_ms, renew_ms, retry_ms;
    char url_path[128];        /* urlPrefix's path ("/tessera") */
    char filter_verb[32], prioritize_verb[32], bind_verb[32], preempt_verb[32];
    bool node_cache_capable;
    char managed[64][96];      /* managedResources names */
    int nmanaged;
} deployed;

/* Read deploy_dir ("deploy"). NULL with err. */
deployed *deployed_load(const char *deploy_dir, char *err, size_t errlen);
/* The same with these components of deploy_dir enabled too (NULL-terminated, e.g. {"node-agent", NULL}), as
 * listing them under components: in kustomization.yaml would. */
deployed *deployed_load_components(const char *deploy_dir, const char *const *components, char *err, size_t errlen);
void deployed_free(deployed *d);

/* Store the objects the fake API server serves (ConfigMaps, the MutatingWebhookConfiguration), as
 * `kubectl apply -k` would. */
void deployed_apply(const deployed *d, fake_api *api);

/* tessera's Pod as the ReplicaSet creates it from the template, scheduled on node and running (the native
 * sidecar started and ready, then the app containers): caller deletes. */
cJSON *deployed_pod(const deployed *d, const char *pod_name, const char *node);

/* One replica: its Pod in the fake API server and tessera-extender started from the Pod's own container. */
typedef struct deployed_replica {
    char pod_name[128];
    pid_t pid;
    int verbs_port;            /* --listen (the verbs, /debug/state, /webhook/mutate) */
    int ops_port;              /* --metrics-listen (/healthz, /readyz, /metrics) */
    pthread_t drain;
    bool running;
    struct deployed_log *log;  /* what the process wrote to stderr (its log), kept until stopped */
} deployed_replica;

/* Store the Pod and exec extender_bin with the container's arguments and environment (rewritten as above);
 * returns once both ports are known. 0, or -1 with err. */
int deployed_replica_start(const deployed *d, fake_api *api, const char *extender_bin, const char *pod_name,
                           const char *node, deployed_replica *r, char *err, size_t errlen);
/* The same with the Pod the API server shows (deployed_pod's, changed by the test), the process started from the
 * Deployment's own container all the same. */
int deployed_replica_start_as(const deployed *d, fake_api *api, const char *extender_bin, const cJSON *pod,
                              deployed_replica *r, char *err, size_t errlen);

/* The value the Deployment gives the tessera-extender flag ("--reservation-grace": "30"), or NULL. */
const char *deployed_extender_arg(const deployed *d, const char *flag);
/* The programs deploy/Containerfile installs in the tessera-extender image ("/usr/local/bin/tessera-extender,
 * /usr/local/bin/tessera-reserve"), comma-joined, for the fake kubelet's image table. "" if none is found. */
void deployed_image_binaries(const char *deploy_dir, char *buf, size_t len);
/* Lines of the replica's log so far that contain a and (if not NULL) b. */
int deployed_replica_log_count(deployed_replica *r, const char *a, const char *b);
/* Send sig and reap (SIGKILL: the node died; SIGTERM: a clean shutdown). */
void deployed_replica_stop(deployed_replica *r, int sig);

/* GET http://127.0.0.1:port<path> answers 200. */
bool deployed_http_ok(int port, const char *path);

/* Does kube-scheduler send this pod to the extender at all: some container or init container names one of
 * managedResources in requests or limits (IsInterested in kube-scheduler's extender.go). */
bool deployed_interested(const deployed *d, const cJSON *pod);

/* Create a pod as the API server does with tessera's webhook in front: an AdmissionReview (a fresh request
 * uid) to the replica's /webhook/mutate, its JSON Patch applied, the result stored. The stored pod (caller
 * deletes), NULL with err when the webhook refuses or cannot be reached. */
cJSON *deployed_create_pod(fake_api *api, const deployed_replica *r, const char *pod_json, char *err, size_t errlen);

/* ---- the node agent ---- */

typedef struct deployed_agent_opts {
    const char *host_root;        /* the fake host's filesystem (see above); NULL: paths stay */
    const char *nvml_dir;         /* the fake libnvidia-ml.so.1's directory; NULL: no NVML (a node without driver) */
    const char *const *nvml_env;  /* "FAKE_NVML_SERVER=dgx-a100", ...; NULL-terminated, may be NULL */
    const char *const *timing;    /* flag, value, flag, value, ..., NULL; may be NULL (the DaemonSet's own) */
} deployed_agent_opts;

typedef struct deployed_agent {
    pid_t pid;
    int ops_port;                 /* --metrics-listen: /healthz, /readyz, /metrics */
    pthread_t drain;
    struct deployed_log *log;     /* its log, read by a thread (heap: a test that fails before it stops the agent
                                   * leaves the thread something valid to write to) */
    bool running;
} deployed_agent;

/* The agent's Pod as the DaemonSet makes it on node (caller deletes), NULL without the DaemonSet. */
cJSON *deployed_agent_pod(const deployed *d, const char *node);
/* Store the Pod and exec agent_bin from the DaemonSet's container as described above; returns once the agent
 * serves its probes. 0, or -1 with err. */
int deployed_agent_start(const deployed *d, fake_api *api, const char *agent_bin, const char *node,
                         const deployed_agent_opts *o, deployed_agent *a, char *err, size_t errlen);
/* Send sig, reap: the exit status (128 + signal when killed by one); -1 when not running. */
int deployed_agent_stop(deployed_agent *a, int sig);
/* Has the agent logged a line containing needle. */
bool deployed_agent_log_has(deployed_agent *a, const char *needle);
/* The value the DaemonSet gives the agent's flag ("--min-write-interval": "10s"), or NULL. */
const char *deployed_agent_arg(const deployed *d, const char *flag);

#endif
