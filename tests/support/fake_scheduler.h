/* fake_scheduler.h -- the kube-scheduler of one tessera replica, as deploy/ configures it (deployed.h), played
 * against the fake API server: what tests of the deployed configuration need from it, by kube-scheduler's
 * real rules.
 *   - Leader election on the Lease of its KubeSchedulerConfiguration (tessera/tessera-scheduler), identity
 *     "<pod name>_<uuid>" as kube-scheduler writes it (os.Hostname() + "_" + a UUID), with client-go's timing
 *     (a record unchanged for leaseDuration on our clock may be taken; renew every retryPeriod). Only the
 *     leader schedules; a stopped scheduler either releases (clean shutdown) or just stops (its pod died).
 *   - It calls ONLY its own replica's extender (loopback in the pod), and only for pending pods of its
 *     profile's schedulerName that name one of managedResources (IsInterested): filter with node names
 *     (nodeCacheCapable), prioritize only when two or more nodes passed, then bind through the extender.
 *     Nothing is called while nothing is pending: an idle cluster sees no verb at all.
 *   - A pod no node passed gets kube-scheduler's FailedScheduling Event, whose message ("0/N nodes are
 *     available: 1 <reason>, ...") is used as a Go format string as kube-scheduler's Eventf does: a '%' in a
 *     reason shows as "%!m(MISSING)" there, exactly as `kubectl describe pod` would show it.
 *   - It does not run kube-scheduler's own plugins: tests give it pods whose only constraint is tessera's
 *     (soft shares ask for ignoredByScheduler resources). A failed pod is retried after a second.
 * All functions are thread-safe.
 */
#ifndef FAKE_SCHEDULER_H
#define FAKE_SCHEDULER_H

#include <stdbool.h>

#include "tests/support/deployed.h"
#include "tests/support/fake_apiserver.h"

typedef struct fake_scheduler fake_scheduler;

/* Start for the replica whose pod is pod_name and whose extender serves the verbs on extender_port. d and f
 * must outlive it. */
fake_scheduler *fake_scheduler_start(fake_api *f, const deployed *d, const char *pod_name, int extender_port);
/* Stop the thread; release: give the Lease up as a clean shutdown does (else it is left to expire). Frees. */
void fake_scheduler_stop(fake_scheduler *s, bool release);

bool fake_scheduler_leading(fake_scheduler *s);
/* Verb calls made to the extender so far (filter, prioritize, bind, preempt). */
int fake_scheduler_calls(fake_scheduler *s);
/* Pods bound through the extender so far. */
int fake_scheduler_bound(fake_scheduler *s);

#endif
