/* fake_runtime.h -- the container runtime under the fake kubelet's exec mode (fake_kubelet.h says what a test sees):
 * a pod's volumes as directories of the test's node, a container as a real process of the test machine, its mounts
 * replaced by rewriting paths, and what the NVIDIA container runtime would inject replaced by the fakes. The fake
 * kubelet calls it with its mutex held; nothing here keeps state between calls except files and processes.
 *
 * Layout under node_root (the real kubelet's /var/lib/kubelet/pods/<uid>/ shape):
 *   pods/<uid>/volumes/kubernetes.io~empty-dir/<volume>/   an emptyDir, shared by the pod's containers
 *   pods/<uid>/volumes/kubernetes.io~configmap/<volume>/   a configMap volume: one file per key (or items' paths)
 *   pods/<uid>/logs/<container>.stdout, .stderr             every run of the container, appended
 * A hostPath volume's path P is host_root + P (the node's filesystem), created for DirectoryOrCreate (0755) and
 * FileOrCreate, checked for Directory, File and Socket.
 */
#ifndef FAKE_RUNTIME_H
#define FAKE_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <cjson/cJSON.h>

/* One node's exec configuration (fake_kubelet_exec in fake_kubelet.h, copied). */
typedef struct fk_rt_node {
    char node_root[512], host_root[512];
    char fake_cuda_dir[512];  /* "" when none */
    char cuda_devices[1024];  /* FAKE_CUDA_DEVICES */
    char cuda_state[512];     /* FAKE_CUDA_STATE */
} fk_rt_node;

/* A program of an image: command[0] image_path runs host_path with extra_args appended. */
typedef struct fk_rt_prog {
    char image_path[256], host_path[512];
    char **extra_args; /* NULL-terminated, owned */
} fk_rt_prog;

/* Make the pod's volume directories and configMap files (configmaps: namespace -> name -> data, looked up with
 * get_cm, which returns the data object or NULL; the caller deletes). 0, or -1 with msg: a hostPath type check
 * failed, a configMap is missing (the kubelet's FailedMount: the containers wait in ContainerCreating). */
typedef cJSON *(*fk_rt_get_cm)(void *user, const char *ns, const char *name);
int fk_rt_pod_setup(const fk_rt_node *n, const cJSON *pod, fk_rt_get_cm get_cm, void *user, char *msg, size_t len);

/* Start the container ctr (its spec) of pod with env (name -> value, makeEnvironmentVariables' result) as a
 * process in its own process group, FAKE_KUBELET_POD_UID=marker in its environment. Returns its pid, or -1 with msg
 * worded as containerd/runc word a start error (the kubelet's RunContainerError). */
pid_t fk_rt_start(const fk_rt_node *n, const fk_rt_prog *progs, size_t nprogs, const cJSON *pod, const cJSON *ctr,
                  const cJSON *env, const char *marker, char *msg, size_t len);

/* The log file of a container's stream (1 stdout, 2 stderr) into buf. */
void fk_rt_log_path(const fk_rt_node *n, const char *uid, const char *container, int stream, char *buf, size_t len);

/* SIGKILL every process still carrying the pod's marker (FAKE_KUBELET_POD_UID=marker in its environment: what the
 * pod's cgroup would hold), e.g. a daemon that left the container's process group. */
void fk_rt_kill_pod(const char *marker);

/* $(VAR) references expanded from env as the kubelet expands command and args ($$ is a literal $; an unknown
 * variable stays as written). malloc'd. */
char *fk_rt_expand(const char *s, const cJSON *env);

#endif
