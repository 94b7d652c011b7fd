/* deployed_cluster.h -- a whole cluster as `kubectl apply -k deploy/` leaves it, for end-to-end tests and
 * benchmarks: the fake API server holding deploy/'s objects, two tessera replicas started from deploy/'s
 * Deployment (deployed.h), a fake kube-scheduler beside each (fake_scheduler.h), and one GPU node played by the
 * fake kubelet (fake_kubelet.h), whose container runtime knows deploy/'s images: tessera's holds the programs
 * deploy/Containerfile installs, every other image of the Deployment only its own command.
 */
#ifndef DEPLOYED_CLUSTER_H
#define DEPLOYED_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "tests/support/deployed.h"
#include "tests/support/fake_apiserver.h"
#include "tests/support/fake_kubelet.h"
#include "tests/support/fake_scheduler.h"

typedef struct deployed_cluster {
    fake_api *api;
    fake_kubelet *kl;
    deployed *d;
    deployed_replica rep[2];
    fake_scheduler *ks[2];
    char err[1024];
} deployed_cluster;

typedef struct deployed_cluster_config {
    const char *extender_bin;   /* build/tessera-extender */
    const char *deploy_dir;     /* deploy/ */
    const char *gpu_node_json;  /* the GPU node's Node object (GFD labels, allocatable) */
    int gpus;                   /* nvidia.com/gpu devices the fake device plugin registers on it */
    const char *uuid_prefix;    /* its devices' IDs: "<prefix>-<i>" */
    int pull_ms;                /* a first pull of tessera's image on the GPU node takes this long */
    bool unpullable;            /* tessera's image cannot be pulled on the GPU node */
    const char *image_binaries; /* NULL: tessera's image holds what deploy/Containerfile installs; else these
                                   (comma-joined paths), e.g. an image built without tessera-reserve */
    const cJSON *pod0;          /* NULL, or the Pod the API shows for the first replica instead of deploy/'s */
} deployed_cluster_config;

/* deploy/ of this tree, beside the build directory that holds the running test binary (build/../deploy, with a
 * kustomization.yaml): false when there is none. */
bool deployed_cluster_deploy_dir(char *out, size_t len);
/* CLOCK_MONOTONIC in milliseconds, and a sleep of ms milliseconds: the tests' waiting loops. */
int64_t deployed_cluster_now_ms(void);
void deployed_cluster_nap(int ms);

/* The names of the two replicas' Pods, as a ReplicaSet names them. */
extern const char *const deployed_cluster_pods[2];

/* Start it all; returns once both replicas are ready and a kube-scheduler leads. 0, or -1 with c->err (stop
 * c all the same). */
int deployed_cluster_start(deployed_cluster *c, const deployed_cluster_config *cfg);
/* Stop the schedulers (releasing), the replicas (SIGTERM), the kubelet, the API server. Stopped or NULL
 * parts are skipped. */
void deployed_cluster_stop(deployed_cluster *c);
/* Replica i's pod died: its kube-scheduler and extender stop at once, releasing nothing (SIGKILL). */
void deployed_cluster_kill(deployed_cluster *c, int i);

/* Verb calls both kube-schedulers made so far. */
int deployed_cluster_calls(deployed_cluster *c);
/* Which replica holds the extender's Lease (its identity starts with the Pod's name), or -1. */
int deployed_cluster_lease_replica(deployed_cluster *c);
/* A share as a user writes it (the gpu-fraction annotation only) created through replica r's webhook: the
 * stored pod's uid and the name of its delivery ConfigMap. false with c->err. */
bool deployed_cluster_create_share(deployed_cluster *c, int r, const char *name, const char *fraction, char *uid,
                                   size_t uidlen, char *cm, size_t cmlen);
/* A stored object (caller deletes), or NULL. */
cJSON *deployed_cluster_get(deployed_cluster *c, const char *kind, const char *ns, const char *name);
/* Pod default/name has a node. */
bool deployed_cluster_bound(deployed_cluster *c, const char *name);
/* The live reservation pods (not being deleted), as an array (caller deletes). */
cJSON *deployed_cluster_reservations(deployed_cluster *c);
/* The NVIDIA_VISIBLE_DEVICES a share's ConfigMap default/cm hands out ("" when it does not exist). */
void deployed_cluster_cm_uuid(deployed_cluster *c, const char *cm, char *buf, size_t len);

#endif
