/* holdings.h -- the mirror's copy of each node's holdings record (the tessera.io/holdings Node annotation
 * the node agent writes from the kubelet's Pod Resources API: which nvidia.com/ devices each pod holds),
 * and what the extender does with it: the model is set against it (model/holdings.h), the kubelet's word
 * wins where it can be applied, and every disagreement is logged once, counted and shown in /debug/state.
 *
 * Record, version 1 (read strictly: anything else is malformed, logged once per node and content,
 * counted, shown, and ignored -- the record seen before stays in use):
 *   {"v":1,"pods":{"<namespace>/<name>":{"nvidia.com/<resource>":["<device id>", ...], ...}, ...}}
 *
 * Rules (extender/README.md, "The node agent's holdings record"):
 *   - a pod of the cache on the node, held by the model: compared and re-homed (model_holdings_judge);
 *   - a pod bound but not in the record yet: nothing (the record lags the binding by the agent's write
 *     interval); an entry for a pod the cache does not know on that node: ignored, counted;
 *   - a device id the model cannot map (a MIG instance, a node without GPU UUIDs): reported, counted as
 *     unmapped, not a mismatch; an id naming a GPU the node does not have: a refused mismatch;
 *   - tessera's reservation pods (not in the cache: their tenants are accounted): the record's device
 *     is compared with the UUID the reservation published (tessera.io/gpu-uuid); a difference is a
 *     mismatch reported, never applied (the share's delivery names the published UUID; the reservation
 *     controller owns it); none published yet is the same lag as above.
 * A disagreement is reported once per pod and what the kubelet said, and again only when its outcome
 * changes (refused, later applied); it is shown as long as the record says the same of the pod.
 *
 * Not thread-safe: called under the state lock (state.c).
 */
#ifndef EXT_HOLDINGS_H
#define EXT_HOLDINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "extender/mirror/objects.h"

#define EXT_HOLDINGS_ANN "tessera.io/holdings"

typedef enum ext_hold_kind {
    EXT_HOLD_APPLIED = 0,      /* the model followed the kubelet */
    EXT_HOLD_REFUSED,          /* the kubelet's word cannot be applied: the model's view kept */
    EXT_HOLD_RESERVATION,      /* a reservation pod holds another device than it published */
    EXT_HOLD_NKINDS
} ext_hold_kind;

typedef enum ext_hold_ignored { EXT_HOLD_IGN_UNMAPPED = 0, EXT_HOLD_IGN_UNKNOWN_POD, EXT_HOLD_IGN_N } ext_hold_ignored;

const char *ext_hold_kind_name(ext_hold_kind k);          /* "applied", "refused", "reservation" */
const char *ext_hold_ignored_name(ext_hold_ignored w);    /* "unmapped", "unknown-pod" */

typedef struct ext_holdings_stats {
    uint64_t mismatches[EXT_HOLD_NKINDS];   /* disagreements found, by outcome (each once) */
    uint64_t ignored[EXT_HOLD_IGN_N];       /* record entries not compared, by why (each once) */
    uint64_t malformed;                     /* records that could not be read (once per node and content) */
} ext_holdings_stats;

typedef struct ext_holdings ext_holdings;

/* Read the Node object's annotation into *h (allocated on the first record seen; freed and set NULL when
 * the annotation is gone). now_ms: the watch event's time (monotonic). true when the record in use
 * changed (a new valid record, or the annotation removed). */
bool ext_holdings_read(ext_holdings **h, const char *node, const cJSON *node_obj, int64_t now_ms,
                       ext_holdings_stats *stats);

/* What a reservation pod ("namespace/name") published: NULL when no reservation pod of that name is known,
 * "" when it published no UUID yet. *gpu: the logical GPU it backs (-1 unknown). */
typedef const char *(*ext_holdings_rsv_fn)(void *user, const char *key, int *gpu);

/* Set the record against node n's model and pods, apply the kubelet's word, report what is new. rsv_version
 * changes whenever what rsv answers may have. true when n->m or a pod's assignment changed (the caller bumps the
 * node's version). Skipped (false) when none of its inputs changed since the last call and nothing disagrees.
 * now_ms (ext_now_ms): when a new disagreement is seen. */
bool ext_holdings_reconcile(ext_holdings *h, ext_node *n, ext_holdings_rsv_fn rsv, void *user, uint64_t rsv_version,
                            int64_t now_ms, ext_holdings_stats *stats);

/* Disagreements standing now (refused and reservation ones): the gauge. */
int ext_holdings_disagreements(const ext_holdings *h);

/* /debug/state, per node: {"recordAgeSeconds", "lastSeenSecondsAgo", "pods", "podsMapped", "malformed",
 * "disagreements": [{"pod", "kind", "model", "kubelet", "devices", "applied", "why", "sinceSeconds"}]}. */
cJSON *ext_holdings_debug(const ext_holdings *h, int64_t now_ms);

void ext_holdings_free(ext_holdings *h);

#endif
