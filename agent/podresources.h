/* podresources.h -- a client of the kubelet's Pod Resources API v1 (List, GetAllocatableResources) on its unix
 * socket: gRPC unary calls over HTTP/2, made with libcurl.
 *
 * Why libcurl and not a gRPC library: tessera already links libcurl, and Debian's 7.88 speaks HTTP/2 with prior
 * knowledge over a unix socket (CURLOPT_UNIX_SOCKET_PATH) and hands HTTP/2 trailers (grpc-status) to the header
 * callback, which is all a unary gRPC call needs. Debian's libgrpc is the C++ runtime with abseil underneath and a
 * C API its authors call internal (not for applications); protobuf-c needs protoc and generated code at build time
 * for five small messages whose wire format protowire.c reads in a few hundred lines.
 *
 * The service (k8s.io/kubelet/pkg/apis/podresources/v1/api.proto, kubernetes/kubernetes at
 * staging/src/k8s.io/kubelet/pkg/apis/podresources/v1/api.proto):
 *     service PodResourcesLister {
 *         rpc List(ListPodResourcesRequest) returns (ListPodResourcesResponse) {}
 *         rpc GetAllocatableResources(AllocatableResourcesRequest) returns (AllocatableResourcesResponse) {}
 *         rpc Get(GetPodResourcesRequest) returns (GetPodResourcesResponse) {}          (not used)
 *     }
 * Both requests are empty messages. Messages are in protowire.h.
 *
 * libcurl must be initialised (curl_global_init) before threads start; these functions do it once themselves
 * (pthread_once), which is enough for a program that calls them before starting other curl users. Thread-safe
 * otherwise: each call has its own handle and connection.
 */
#ifndef AGENT_PODRESOURCES_H
#define AGENT_PODRESOURCES_H

#include <stddef.h>
#include <stdint.h>

#include "agent/protowire.h"

/* Where the kubelet listens; the agent's DaemonSet mounts /var/lib/kubelet/pod-resources (hostPath). */
#define AGENT_PR_SOCKET "/var/lib/kubelet/pod-resources/kubelet.sock"
#define AGENT_PR_METHOD_LIST "/v1.PodResourcesLister/List"
#define AGENT_PR_METHOD_ALLOCATABLE "/v1.PodResourcesLister/GetAllocatableResources"

/* What went wrong, for callers that act on the kind (retry, readiness text); err has the words. */
typedef enum agent_pr_error {
    AGENT_PR_OK = 0,
    AGENT_PR_ENOSOCKET = -1,   /* no socket at the path: the hostPath mount is missing, or no kubelet */
    AGENT_PR_EACCESS = -2,     /* the socket exists but we may not connect (the agent must run as root) */
    AGENT_PR_ECONNECT = -3,    /* nothing listens (a stale socket: the kubelet is down or restarting) */
    AGENT_PR_ETIMEOUT = -4,    /* no complete reply within timeout_ms */
    AGENT_PR_ESTATUS = -5,     /* the call ended with a gRPC status other than OK (*grpc_status, grpc-message) */
    AGENT_PR_EMALFORMED = -6,  /* the reply is not a well-formed gRPC response or message */
    AGENT_PR_ETRANSPORT = -7,  /* HTTP/2 failed otherwise (connection closed mid-reply, ...) */
    AGENT_PR_ENOMEM = -8,
} agent_pr_error;

/* gRPC status codes the agent names (https://grpc.github.io/grpc/core/md_doc_statuscodes.html). */
#define AGENT_GRPC_OK 0
#define AGENT_GRPC_UNIMPLEMENTED 12

/* One unary call: POST `method` with the message req[0..reqlen) framed as gRPC, wait at most timeout_ms (> 0)
 * for the whole reply. On AGENT_PR_OK *resp (malloc'd, NULL when empty) and *resplen hold the reply message
 * without its 5-byte prefix. Otherwise a negative agent_pr_error, err says it in words, *grpc_status has the
 * status when the server sent one (else -1). grpc_status may be NULL. */
int agent_pr_call(const char *socket_path, const char *method, const uint8_t *req, size_t reqlen, int timeout_ms,
                  uint8_t **resp, size_t *resplen, int *grpc_status, char *err, size_t errlen);

/* List and GetAllocatableResources, decoded. AGENT_PR_OK and *out filled (free it), or a negative
 * agent_pr_error, *out empty and err set. */
int agent_pr_call_list(const char *socket_path, int timeout_ms, agent_pr_list *out, char *err, size_t errlen);
int agent_pr_call_allocatable(const char *socket_path, int timeout_ms, agent_pr_allocatable *out, char *err,
                         size_t errlen);

/* The words for a failed connect(2) to the socket (errno e), as agent_pr_call reports it; the kind is returned.
 * Pure, so the cases a root test run cannot provoke (EACCES) are tested. */
int agent_pr_connect_error(int e, const char *socket_path, char *err, size_t errlen);

/* The name of a gRPC status code ("UNIMPLEMENTED"), "code N" buffers aside: never NULL. */
const char *agent_grpc_code_name(int code);

#endif
