/* lease.h -- coordination.k8s.io/v1 Leases: read one, create one, update one (with the resourceVersion that was
 * read, so of two writers racing one gets 409 Conflict).
 *
 * Only the records and the calls live here. The leader-election policy that uses them (who campaigns, when to
 * step down, the relist before binding) is the extender's own (extender/base/leader.h): it follows kube-scheduler's
 * Lease and fences Bindings, which only the extender does.
 */
#ifndef KUBE_LEASE_H
#define KUBE_LEASE_H

#include <stddef.h>

#include "kube/client.h"

typedef struct kube_lease {
    char rv[64];            /* metadata.resourceVersion: "" for a create, and after a read that found no Lease */
    char holder[192];       /* spec.holderIdentity ("" = none) */
    char acquire[40];       /* spec.acquireTime, a MicroTime (kube_lease_now) */
    char renew[40];         /* spec.renewTime */
    int secs;               /* spec.leaseDurationSeconds (a read gives at least 1) */
    int transitions;        /* spec.leaseTransitions */
    char note[256];         /* the value of the annotation note_key, "" = none (a read: absent) */
} kube_lease;

/* "/apis/coordination.k8s.io/v1/namespaces/NS/leases/NAME" into buf. */
void kube_lease_path(char *buf, size_t len, const char *ns, const char *name);

/* Now as a Kubernetes MicroTime, "2006-01-02T15:04:05.000000Z" (the Lease's time fields). */
void kube_lease_now(char *buf, size_t len);

/* GET the Lease: the HTTP status (kube_request's codes), with *out filled on 200; out->rv is "" when the answer
 * is not a Lease (no resourceVersion). note_key: the annotation to read into out->note (NULL: none). err gets
 * kube_request's reason for any status outside 2xx. */
int kube_lease_get(kube_client *k, const char *ns, const char *name, const char *note_key, int timeout_ms,
                   kube_lease *out, char *err, size_t errlen);

/* Write rec as the Lease ns/name: POST (create) when rec->rv is "", else PUT (update, refused with 409 when the
 * Lease changed since rec->rv was read). rec->note, when not "", is written as the annotation note_key. The HTTP
 * status (200 or 201 on success, 409 Conflict, ...), or KUBE_UNREACHABLE / KUBE_TIMEOUT / KUBE_NO_REQUEST, with
 * *out the Lease as written on 2xx (out->rv "" when the answer is not a Lease). out may be NULL. */
int kube_lease_write(kube_client *k, const char *ns, const char *name, const kube_lease *rec, const char *note_key,
                     int timeout_ms, kube_lease *out, char *err, size_t errlen);

#endif
