/* podsecurity.h -- the Pod Security level a namespace enforces, as the webhook needs it for MPS shares:
 * their hostPath volumes (the node's MPS directory) are forbidden by "baseline" and "restricted", and the
 * webhook says so itself instead of leaving the pod to a refusal that does not say why tessera added them.
 *
 * One GET /api/v1/namespaces/NAME per namespace per ttl (default 60 s), made only when an MPS share is
 * admitted there; a failed read is not remembered (the next admission asks again). The label read is
 * pod-security.kubernetes.io/enforce; a namespace without it gets the cluster's default level, which the
 * API does not show (the API server's AdmissionConfiguration): "" then. Thread-safe (admission reviews
 * arrive on several threads); no call is made under the lock.
 */
#ifndef EXT_PODSECURITY_H
#define EXT_PODSECURITY_H

#include <stddef.h>

#include "kube/client.h"

#define EXT_PSS_LABEL_ENFORCE "pod-security.kubernetes.io/enforce"

typedef struct ext_pss ext_pss;

/* k (not owned) must outlive it. ttl_ms <= 0: 60000. NULL when out of memory. */
ext_pss *ext_pss_new(kube_client *k, int ttl_ms);
void ext_pss_free(ext_pss *p);

/* The enforce level of namespace ns into level ("" when the label is absent): 0, or -1 with why (the API's
 * status and message; a 403 names the missing RBAC rule). Matches ext_webhook_ns_level_fn (user: the ext_pss). */
int ext_pss_level(void *user, const char *ns, char *level, size_t len, char *why, size_t whylen);

/* Namespace reads made so far (what tests and /metrics-minded readers count). */
unsigned long ext_pss_reads(ext_pss *p);

#endif
