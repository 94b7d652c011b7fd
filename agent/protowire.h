/* protowire.h -- the protobuf wire format, as much as the node agent needs to talk to the kubelet's Pod Resources
 * API (k8s.io/kubelet/pkg/apis/podresources/v1/api.proto): an encoder for the (empty) requests and for the tests'
 * fake kubelet, and a decoder for ListPodResourcesResponse and AllocatableResourcesResponse.
 *
 * The decoder's input comes from another process, so it is bounded and total: every wire type is understood and
 * unknown fields of any type are skipped (as proto3 readers must, so a newer kubelet's additions do not break us);
 * a known field number arriving with another wire type is skipped as unknown too (as protobuf-go does); lengths
 * never reach past their enclosing message; groups nest at most AGENT_PW_MAX_DEPTH deep; the message is at most
 * AGENT_PW_MAX_MESSAGE bytes and decodes into at most AGENT_PW_MAX_ITEMS strings and sub-messages, so 64 MiB of
 * one-byte entries cannot become gigabytes of pointers. Strings must be UTF-8 without NUL (protobuf-go refuses to
 * marshal anything else, so a kubelet never sends it). Anything else is a clear error, never a crash.
 *
 * Decoded: pod name and namespace; per container its name and devices (resource_name, device_ids, topology's NUMA
 * ids). Read past, deliberately: cpu_ids, memory, dynamic_resources (DRA claims: wt-dra reads those from the
 * apiserver) and Get's messages; tessera publishes device-plugin holdings only.
 */
#ifndef AGENT_PROTOWIRE_H
#define AGENT_PROTOWIRE_H

#include <stddef.h>
#include <stdint.h>

/* The largest reply accepted. The gRPC default is 4 MiB and Kubernetes' own Pod Resources clients ask 16 MiB
 * (test/e2e_node/util.go: defaultPodResourcesMaxSize); 64 MiB leaves room for nodes with hundreds of pods and
 * thousands of replica ids (1,000 pods x 8 devices is ~0.5 MiB) while bounding what a broken peer can make us hold. */
#define AGENT_PW_MAX_MESSAGE (64u * 1024u * 1024u)
/* Strings plus sub-messages one decode may create (1,000 pods x 8 devices is ~20,000). */
#define AGENT_PW_MAX_ITEMS (1u << 21)
/* Nesting of unknown groups (wire types 3/4) being skipped; the schema's own nesting is 5. */
#define AGENT_PW_MAX_DEPTH 32

/* ---- encoding ------------------------------------------------------------------------------------------ */

/* A growing output buffer. oom is sticky: check it once at the end. */
typedef struct agent_pw_buf {
    uint8_t *p;
    size_t n, cap;
    int oom;
} agent_pw_buf;

void agent_pw_buf_free(agent_pw_buf *b);
void agent_pw_put_varint(agent_pw_buf *b, uint64_t v);
/* A field's key: (field << 3) | wire_type. */
void agent_pw_put_tag(agent_pw_buf *b, uint32_t field, int wire_type);
/* Wire type 2: the key, the length, the bytes (a string, or an encoded sub-message). */
void agent_pw_put_bytes(agent_pw_buf *b, uint32_t field, const void *data, size_t len);
void agent_pw_put_string(agent_pw_buf *b, uint32_t field, const char *s);
/* Wire type 0 with an int64 (negative numbers take ten bytes, as in protobuf). */
void agent_pw_put_int64(agent_pw_buf *b, uint32_t field, int64_t v);

enum { AGENT_PW_VARINT = 0, AGENT_PW_I64 = 1, AGENT_PW_LEN = 2, AGENT_PW_SGROUP = 3, AGENT_PW_EGROUP = 4,
       AGENT_PW_I32 = 5 };

/* ---- the decoded messages ------------------------------------------------------------------------------ */

/* ContainerDevices { string resource_name = 1; repeated string device_ids = 2; TopologyInfo topology = 3; }
 * TopologyInfo { repeated NUMANode nodes = 1; }  NUMANode { int64 ID = 1; } */
typedef struct agent_pr_devices {
    char *resource;          /* "" when absent */
    char **ids;
    size_t nids;
    int64_t *numa;           /* topology.nodes[].ID, in wire order */
    size_t nnuma;
} agent_pr_devices;

/* ContainerResources { string name = 1; repeated ContainerDevices devices = 2; (3 cpu_ids, 4 memory,
 * 5 dynamic_resources: skipped) } */
typedef struct agent_pr_container {
    char *name;
    agent_pr_devices *devices;
    size_t ndevices;
} agent_pr_container;

/* PodResources { string name = 1; string namespace = 2; repeated ContainerResources containers = 3; } */
typedef struct agent_pr_pod {
    char *name, *namespace_;
    agent_pr_container *containers;
    size_t ncontainers;
} agent_pr_pod;

/* ListPodResourcesResponse { repeated PodResources pod_resources = 1; } */
typedef struct agent_pr_list {
    agent_pr_pod *pods;
    size_t npods;
} agent_pr_list;

/* AllocatableResourcesResponse { repeated ContainerDevices devices = 1; (2 cpu_ids, 3 memory: skipped) } */
typedef struct agent_pr_allocatable {
    agent_pr_devices *devices;
    size_t ndevices;
} agent_pr_allocatable;

/* Decode one message (the gRPC payload, without its 5-byte prefix). 0 and *out filled (free it with the matching
 * _free), or -1 with a message saying what and where ("pod_resources[3].containers[0]: length 99 past the end of
 * the message") and *out empty. Never reads outside data[0..len). */
int agent_pw_decode_list(const uint8_t *data, size_t len, agent_pr_list *out, char *err, size_t errlen);
int agent_pw_decode_allocatable(const uint8_t *data, size_t len, agent_pr_allocatable *out, char *err,
                                size_t errlen);
void agent_pr_list_free(agent_pr_list *l);
void agent_pr_allocatable_free(agent_pr_allocatable *a);

/* Encoders of the same messages (the fake kubelet serves them; tests round-trip them). 0, or -1 when out of
 * memory. The caller frees b. */
int agent_pw_encode_list(const agent_pr_list *l, agent_pw_buf *b);
int agent_pw_encode_allocatable(const agent_pr_allocatable *a, agent_pw_buf *b);

#endif
