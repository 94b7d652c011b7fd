/* fake_kubelet.h -- the kubelet and the NVIDIA device plugin of some nodes, played against a fake_api, so tests of
 * reservation pods and delivery can watch Kubernetes' side happen by its real rules.
 *
 * A background thread polls the fake's pods every ~10 ms (through the C API, no HTTP) and, for each pod whose
 * spec.nodeName is a node it was told about:
 *   - admits a new pod (no status.phase, or "Pending") as the kubelet does: extended resources the node does not
 *     register are dropped from the app containers' requests first (removeMissingExtendedResources; init
 *     containers keep theirs and are refused "OutOf<resource>"). The pod's request of each registered resource
 *     (requests, else limits; sum of the app containers, at least the largest init container's) must fit in the
 *     devices no admitted pod holds. If it does not, the pod gets status.phase "Failed", reason
 *     "UnexpectedAdmissionError" and message "Allocate failed due to requested number of devices unavailable for
 *     <resource>. Requested: N, Available: M, which is unexpected" (kubelet 1.26+; fake_kubelet_set_outof_reason
 *     switches to reason "OutOf<resource>", message "Node didn't have enough resource: <resource>, requested: N,
 *     used: U, capacity: C", what the predicate admission writes). Otherwise it gets free devices (lowest index
 *     first, or random ones after fake_kubelet_set_random) and status.phase "Running".
 *   - starts an admitted pod's containers as the kubelet does, writing status.initContainerStatuses and
 *     containerStatuses (reason and message as a real kubelet writes them) and phase Pending, then Running
 *     once an app container runs: init containers one after another (a native sidecar, restartPolicy Always,
 *     must be running and an ordinary one completed before the next starts), then the app containers. Per
 *     container: the image is pulled (fake_kubelet_add_image: a first pull on a node takes its time, with
 *     waiting reason ContainerCreating; an image that cannot be pulled waits in ErrImagePull, then
 *     ImagePullBackOff); a command the image does not hold fails with RunContainerError, then
 *     CrashLoopBackOff ("back-off 10s restarting failed container=..."), the start error in
 *     lastState.terminated (reason StartError); the environment is made as makeEnvironmentVariables
 *     does (the device plugin's NVIDIA_VISIBLE_DEVICES, envFrom, env): a ConfigMap that does not exist and is
 *     not optional holds the container in CreateContainerConfigError, retried after 1, 2, 4, 8, 8... s, and it
 *     starts at the first retry after the ConfigMap appears. Images never registered pull at once and hold
 *     every command.
 *   - plays tessera-reserve in a reservation pod (label tessera.io/reservation: "true") once its container runs:
 *     merges the annotation tessera.io/gpu-uuid = its device IDs, comma-joined (tessera.io/reserve-error when
 *     it got none), at once, after a delay, or never.
 *   - frees a pod's devices when it is deleted or its phase becomes Succeeded or Failed.
 * Status and annotations are written with fake_api_patch (atomic, so a concurrent client's change is kept).
 *
 * All functions are thread-safe; returned strings are malloc'd.
 */
#ifndef FAKE_KUBELET_H
#define FAKE_KUBELET_H

#include <stdbool.h>

#include "tests/support/fake_apiserver.h"

typedef struct fake_kubelet fake_kubelet;

/* Start polling f (which must outlive the kubelet). */
fake_kubelet *fake_kubelet_start(fake_api *f);
/* Stop the thread and free everything. NULL is fine. */
void fake_kubelet_stop(fake_kubelet *k);

/* A device plugin on node_name registers `resource` ("nvidia.com/gpu", "nvidia.com/mig-1g.10gb"...) with `count`
 * devices whose IDs are "<uuid_prefix>-<i>", i from 0 ("GPU-n1" -> "GPU-n1-0", "GPU-n1-1"...); a uuid_prefix that
 * is a GPU UUID without its last two hex digits ("GPU-8c0a1b2c-3d4e-5f60-7182-93a4b5c6d7") ends them with i in two
 * hex digits instead ("...d700", "...d701"): real UUIDs, as the fake driver wants them. Call once per node and
 * resource; a node may have several resources. */
void fake_kubelet_add_node(fake_kubelet *k, const char *node_name, const char *resource, int count,
                           const char *uuid_prefix);

/* Pick a random free device (seeded, so runs repeat) instead of the lowest free index. */
void fake_kubelet_set_random(fake_kubelet *k, unsigned seed);
/* Refuse with reason "OutOf<resource>" (predicate admission) instead of "UnexpectedAdmissionError". */
void fake_kubelet_set_outof_reason(fake_kubelet *k, bool on);
/* tessera-reserve writes its annotation ms after its pod was admitted (default 0). */
void fake_kubelet_set_reserve_delay_ms(fake_kubelet *k, int ms);
/* tessera-reserve never writes its annotation (a reservation that stays pending). */
void fake_kubelet_set_reserve_silent(fake_kubelet *k, bool on);

/* The node's container runtime knows image: a first pull on a node takes pull_ms; pullable false: the pull
 * fails for ever; binaries: the comma-joined paths a container's command[0] may name ("" = any). */
void fake_kubelet_add_image(fake_kubelet *k, const char *image, int pull_ms, bool pullable, const char *binaries);

/* The value of var in the environment container (NULL: the first) of the pod started with, or NULL when it
 * does not run (yet) or has no such variable. */
char *fake_kubelet_env(fake_kubelet *k, const char *pod_uid, const char *container, const char *var);
/* The container (NULL: the first) runs. */
bool fake_kubelet_running(fake_kubelet *k, const char *pod_uid, const char *container);

/* The uid of the live pod holding device_id on node, or NULL when it is free (or unknown). */
char *fake_kubelet_holder(fake_kubelet *k, const char *node, const char *device_id);
/* The device IDs a live pod holds, comma-joined, or NULL when it holds none. */
char *fake_kubelet_devices(fake_kubelet *k, const char *pod_uid);
/* Device IDs ever seen held by two live pods at once: 0 by construction; tests assert it stays so. */
int fake_kubelet_double_holds(fake_kubelet *k);
/* Pods admitted and refused so far. */
int fake_kubelet_admitted(fake_kubelet *k);
int fake_kubelet_refused(fake_kubelet *k);

#endif
