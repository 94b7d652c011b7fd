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
 * The environment's valueFrom.fieldRef takes metadata.name/namespace/uid, labels['k'], annotations['k'],
 * spec.nodeName, spec.serviceAccountName, status.podIP and status.hostIP (127.0.0.1).
 *
 * EXEC MODE (fake_kubelet_set_exec, per node; off by default: every other node behaves as above). The node's
 * containers really run, as processes of the test machine (tests/support/fake_runtime.h does it):
 *   - command + args (the image's ENTRYPOINT is not known: a container needs a command), $(VAR) expanded from its
 *     environment as the kubelet does; command[0] is looked up in the program table (fake_kubelet_add_program:
 *     "/usr/local/bin/tessera-reserve" -> build/tessera-reserve, its extra arguments appended), else a path under a
 *     volume mount (rewritten, below), else a path of the test machine, else searched on the container's PATH;
 *     not found: RunContainerError with runc's message, then the crash loop.
 *   - the environment makeEnvironmentVariables computes (above), plus HOSTNAME (the pod's name) and PATH (a Debian
 *     image's, when the container sets none); ASAN_OPTIONS, UBSAN_OPTIONS and LSAN_OPTIONS of the test process are
 *     passed through.
 *   - volumes (the layout is in fake_runtime.h): emptyDir (a directory per pod under node_root, mode 0777, shared by
 *     the pod's containers), hostPath (host_root + path, created or type-checked as the kubelet does; a failed check
 *     holds every container in ContainerCreating with the FailedMount text as its message, retried each second),
 *     configMap (a file per key, or per items' path; missing and not optional: as a failed mount); subPath (a
 *     missing one is made a directory, as the kubelet does). Any other volume type refuses the container.
 *   - init containers one after another, each to completion (exit 0) before the next; a native sidecar only has to
 *     run. Exit codes and states as the kubelet writes them: terminated {exitCode, reason Completed|Error,
 *     startedAt, finishedAt}; a container that restarts (a native sidecar always, an init container unless the
 *     pod's restartPolicy is Never, an app container by restartPolicy Always / OnFailure on a non-zero exit) shows
 *     waiting CrashLoopBackOff ("back-off 10s restarting failed container=..."; the fake restarts it after 1 s)
 *     with lastState.terminated, and restartCount. Phase: Pending, Running once an app container started, Failed
 *     when an init container failed for good, Succeeded/Failed when every app container ended for good (kubectl's
 *     Init:Error / Init:CrashLoopBackOff are these statuses). A pod that is over stops its remaining processes
 *     (native sidecars) and frees its devices.
 *   - stdout and stderr of each container, every run appended: fake_kubelet_log (the files are kept after the pod
 *     is deleted, under node_root/pods/<uid>/logs/).
 *   - processes go with their pod: deleted (SIGTERM to the container's main process, SIGKILL to its process group
 *     after terminationGracePeriodSeconds, at most 3 s here), over, or fake_kubelet_stop (the same, for every pod);
 *     each process is the leader of its own process group and gets PR_SET_PDEATHSIG (SIGKILL) of the kubelet's
 *     thread, so none outlives the test run; whatever still carries the pod's marker afterwards (a daemon that
 *     left the group) is killed too.
 *   - the kubelet's own tessera-reserve play (the annotation above) is off: the real program publishes.
 * What a test machine cannot do, and the stand-in (nothing else differs):
 *   - mounts: no mount namespace. A path the process is given is rewritten instead: a command argument that is a
 *     volume mount's mountPath or lies under it (the longest mountPath wins), or the VALUE of an argument
 *     "-...=VALUE" that does, or an environment variable's whole value that does, or workingDir, becomes the
 *     mount's host directory + the rest. A mount inside another's mountPath (the share's /opt/tessera/state) is
 *     a symlink at that place in the outer mount's host directory, replacing the empty mount point there, so a
 *     path a program derives itself (libtessera-cuda's <libdir>/../state) reaches it. Nothing else is rewritten: a path a program has compiled in (its
 *     defaults) or reads from a file is not, so pods run in exec mode must pass such paths as arguments (e.g.
 *     tessera-reserve --mps-root /run/tessera/mps). A path a program writes back to the API carries the host
 *     directory. The working directory is node_root/pods/<uid> unless workingDir says otherwise.
 *   - the NVIDIA container runtime: when the container's NVIDIA_VISIBLE_DEVICES names devices (set, not void or
 *     none) and NVIDIA_DRIVER_CAPABILITIES includes compute (unset: the toolkit's default utility,compute), the
 *     libraries it would mount become LD_LIBRARY_PATH=fake_cuda_dir (the fake libcuda.so.1) and the programs it
 *     would mount (nvidia-cuda-mps-control) become fake_cuda_dir/bin first on PATH; FAKE_CUDA_DEVICES and
 *     FAKE_CUDA_STATE (the node's GPUs, one state file per node) are set whenever it names devices, and the fake
 *     driver filters them by NVIDIA_VISIBLE_DEVICES itself, as the runtime would.
 *   - the container's user: no setuid. FAKE_CUDA_UID = the container's securityContext.runAsUser, else the pod's,
 *     else 0: the uid the fake driver tells the fake MPS daemon.
 *   - /etc/ld.so.preload mounted into the container (tessera's webhook mounts the tessera-cuda emptyDir's
 *     ld.so.preload there): LD_PRELOAD = that file's entries, each rewritten as a path above (after the
 *     container's own LD_PRELOAD), read when the container starts. Unlike the real file, a program can unset it,
 *     and a sanitizer-built program cannot run with it (ASan wants to be loaded first): run non-sanitized programs
 *     (e.g. build/fake-cuda/tessera-cuda-probe) in share pods.
 *   - the pod's cgroup: FAKE_KUBELET_POD_UID=<marker> in every process's environment, by which the pod's leftover
 *     processes are found and killed.
 *   - the in-cluster API configuration (service account token, KUBERNETES_SERVICE_*): the program table's extra
 *     arguments, e.g. {"--kube-api", <fake API URL>, NULL} for tessera-reserve, as deployed.h appends --kube-api.
 *
 * Usage (the deployed end-to-end tests of issue 27):
 *     fake_kubelet *k = fake_kubelet_start(api);
 *     fake_kubelet_add_node(k, "n1", "nvidia.com/gpu", 2, "GPU-n1");       // devices GPU-n1-0, GPU-n1-1
 *     fake_kubelet_set_exec(k, "n1", &(fake_kubelet_exec){
 *         .node_root = tmpdir, .host_root = tmpdir_host,
 *         .fake_cuda_dir = "<build>/fake-cuda", .cuda_devices = "GPU-n1-0:81920,GPU-n1-1:81920"});
 *     const char *api_args[] = {"--kube-api", api_url, NULL};
 *     fake_kubelet_add_program(k, "/usr/local/bin/tessera-reserve", "<build>/tessera-reserve", api_args);
 *     fake_kubelet_add_program(k, "/usr/local/bin/tessera-cuda-probe", "<build>/fake-cuda/tessera-cuda-probe", NULL);
 *     ... create pods (through the webhook); wait for phases / annotations ...
 *     char *err = fake_kubelet_log(k, uid, "app", 2);                      // the container's stderr
 *     fake_kubelet_stop(k);                                                // every process gone
 * Image names do not matter to exec mode (fake_kubelet_add_image still decides pulls and which commands an image
 * holds); program paths do.
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

/* ---- exec mode (above) ---- */

typedef struct fake_kubelet_exec {
    const char *node_root;     /* required: the node's kubelet directory (pods/<uid>/volumes, logs) */
    const char *host_root;     /* the node's filesystem: hostPath P is host_root + P (NULL: node_root/host) */
    const char *fake_cuda_dir; /* build/fake-cuda: the NVIDIA container runtime's stand-in (NULL: no GPU injection) */
    const char *cuda_devices;  /* FAKE_CUDA_DEVICES: the node's GPUs, "GPU-n1-0:81920,GPU-n1-1:81920" (IDs as
                                * fake_kubelet_add_node names them) */
    const char *cuda_state;    /* FAKE_CUDA_STATE (NULL: node_root/fake-cuda-state) */
} fake_kubelet_exec;

/* Run the containers of pods on node for real from now on (pods admitted before keep the old behaviour). The
 * strings are copied. */
void fake_kubelet_set_exec(fake_kubelet *k, const char *node, const fake_kubelet_exec *x);
/* command[0] image_path runs host_path, with extra_args (NULL-terminated, may be NULL) appended to its arguments. */
void fake_kubelet_add_program(fake_kubelet *k, const char *image_path, const char *host_path,
                              const char *const *extra_args);
/* Everything the container wrote to stream (1 stdout, 2 stderr) over all its runs, or NULL when it never ran in
 * exec mode. Also after the pod is gone. */
char *fake_kubelet_log(fake_kubelet *k, const char *pod_uid, const char *container, int stream);
/* The exit code of the container's last run that ended, -1 when none did (or the pod is gone). */
int fake_kubelet_exit_code(fake_kubelet *k, const char *pod_uid, const char *container);
/* The pid of the container's running process, 0 when it does not run. */
int fake_kubelet_pid(fake_kubelet *k, const char *pod_uid, const char *container);

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
