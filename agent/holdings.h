/* holdings.h -- the `tessera.io/holdings` record: which nvidia.com/... devices each pod on this node holds, as the
 * kubelet's Pod Resources API says (README.md, "The `tessera.io/holdings` node annotation"):
 *
 *     {"v":1,"pods":{"default/train-1":{"nvidia.com/gpu":["GPU-6a0f…","GPU-77b1…"]},
 *                    "ml/notebook-3":{"nvidia.com/gpu.shared":["GPU-6a0f…::3"]}}}
 *
 * Compact (no spaces), deterministic bytes for equal holdings so the agent can compare before it writes: pods sorted
 * by "namespace/name" (bytewise), resources sorted, the device ids of all the pod's containers merged as a sorted
 * union (duplicates once). Only resources named nvidia.com/<something> are kept; pods left with none are left out;
 * nothing held is {"v":1,"pods":{}}. Device ids are kept exactly as the kubelet gives them (a UUID, a replica
 * "<uuid>::<n>", a "MIG-…" UUID); empty ids are dropped. Strings are JSON-escaped.
 *
 * Size: a node's annotations share 256 KiB; ~45 bytes per id means a few thousand devices. The caller checks
 * the length before it writes.
 */
#ifndef AGENT_HOLDINGS_H
#define AGENT_HOLDINGS_H

#include <stddef.h>

#include "agent/protowire.h"

/* Calls List on the kubelet's socket (AGENT_PR_SOCKET in podresources.h) and returns the record (malloc'd,
 * NUL-terminated), or NULL with err saying why: the socket is missing (and that the agent needs the hostPath mount
 * of /var/lib/kubelet/pod-resources), permission denied, nothing listening, the gRPC status and its message
 * (UNIMPLEMENTED...), a timeout, or a malformed reply. */
char *agent_holdings_json(const char *socket_path, int timeout_ms, char *err, size_t errlen);

/* The pure half: the record of a decoded List reply. NULL only when out of memory. */
char *agent_holdings_from_list(const agent_pr_list *l);

/* GetAllocatableResources as JSON for the log and for comparing with the holdings: the nvidia.com/... resources
 * the kubelet can hand out on this node and their device ids, sorted and unique:
 *     {"nvidia.com/gpu":["GPU-6a0f…","GPU-77b1…"],"nvidia.com/mig-1g.10gb":["MIG-…"]}
 * NULL with err as agent_holdings_json. */
char *agent_allocatable_json(const char *socket_path, int timeout_ms, char *err, size_t errlen);
char *agent_allocatable_from_reply(const agent_pr_allocatable *a);

/* The resource names the record keeps: "nvidia.com/" followed by at least one character. */
int agent_holdings_keeps(const char *resource);

#endif
