/* holdings.h -- what the kubelet says a node's pods hold, set against the model, and the model
 * re-homed to it ("the kubelet's word wins").
 *
 * For the pods the device plugin serves (whole GPUs, time-slice/MPS replicas, MIG instances) tessera's
 * GPU index is its own choice: the device plugin picks the physical device, and only the kubelet knows
 * which (its Pod Resources API; the node agent publishes it as the tessera.io/holdings annotation). A
 * device id is mapped onto the model through the node's GPU UUIDs (tessera.io/gpus): a UUID is that
 * GPU, "<uuid>::<n>" replica n of it; a "MIG-..." id is a MIG instance, which the model cannot name
 * (it keeps no instance UUIDs), so it is unmapped: reported, never a mismatch.
 *
 * What is compared, per pod the model holds:
 *   whole GPUs  the set of GPU indices;
 *   replicas    the GPUs the replicas are on (as a multiset); the replica number is the device
 *               plugin's own bookkeeping and the model's only a count, so it is not compared, but a
 *               re-homed replica takes the kubelet's number when that one is free in the model;
 *   MIG, soft shares (memory/compute fractions): nothing (MIG ids are unmapped; a share holds no
 *               device itself: its reservation pod does).
 * The kubelet's word is applied only as a whole-pod move that model_assign accepts: the pods that
 * disagree are released together and each re-assigned to the kubelet's GPUs (so two pods swapped move
 * both), and a pod whose new grants would over-commit, or whose devices are of another kind than its
 * grants, keeps the model's view, with the reason. Never an over-commit; model_node_check holds after.
 */
#ifndef MODEL_HOLDINGS_H
#define MODEL_HOLDINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node.h"

#define MODEL_HELD_MAX 64   /* device ids of one pod (replicas of several GPUs add up) */

/* One device id mapped onto the node. */
typedef struct model_held {
    int8_t gpu;        /* index into n->gpus */
    int16_t replica;   /* "<uuid>::<n>": n; -1 for a whole GPU */
} model_held;

typedef enum model_held_map {
    MODEL_HELD_MAPPED = 0,   /* *out names a GPU of the node (and a replica) */
    MODEL_HELD_UNMAPPED,     /* a MIG id, or the node publishes no GPU UUIDs: cannot be compared */
    MODEL_HELD_UNKNOWN       /* names a GPU the node does not have, or a replica it has not */
} model_held_map;

/* Map one device id as the kubelet returns it. why (if not NULL) says what was not mapped and why. */
model_held_map model_held_map_id(const model_node *n, const char *id, model_held *out, char *why, size_t whylen);

/* Whether device id names the GPU whose UUID is uuid: the GPU itself, or a replica "<uuid>::<n>" of it. */
bool model_held_id_is(const char *id, const char *uuid);

/* What the kubelet says one pod holds, its ids mapped. */
typedef struct model_holding {
    const char *uid;                 /* the pod's UID, as in n->allocs */
    int nheld;
    model_held held[MODEL_HELD_MAX];
} model_holding;

/* Map every device id of one pod into h->held (h->uid is the caller's). MAPPED when every id is mapped; else
 * UNKNOWN when one names a GPU or replica the node does not have (a disagreement: the kubelet's word cannot be
 * applied), else UNMAPPED (MIG ids, no UUIDs published: not compared). why (if not NULL): the reason, an unknown
 * id's before an unmapped one's. */
model_held_map model_holding_map(const model_node *n, char *const *ids, int nids, model_holding *h, char *why,
                                 size_t whylen);

typedef enum model_hold_verdict {
    MODEL_HOLD_AGREE = 0,    /* the model holds the pod where the kubelet says */
    MODEL_HOLD_MOVED,        /* it does not; out.a is the kubelet's version, which fits */
    MODEL_HOLD_REFUSED,      /* it does not, and the kubelet's word cannot be applied (why) */
    MODEL_HOLD_NOT_COMPARED  /* the model holds nothing for the pod, or holds MIG instances or soft shares */
} model_hold_verdict;

const char *model_hold_verdict_name(model_hold_verdict v);   /* "agree", "moved", "refused", "not-compared" */

typedef struct model_hold_result {
    model_hold_verdict verdict;
    model_assignment a;              /* MOVED: the re-homed assignment; else the model's (ngrants 0 if none) */
    char why[MODEL_REASON_LEN];      /* REFUSED, NOT_COMPARED: why */
} model_hold_result;

/* Judge the k pods of h[] on n together. out[i] for h[i]. Pure: n is not changed. Returns how many
 * are MOVED, or -1 when out of memory (out then says nothing). The MOVED ones fit together once all
 * of them are released, in the order of h[]: model_holdings_apply does exactly that. */
int model_holdings_judge(const model_node *n, int k, const model_holding *h, model_hold_result *out);

/* Apply model_holdings_judge's MOVED results to n (the same n it judged): release every moved pod, then
 * assign each its re-homed assignment. 0, or -1 with err if a re-assignment was refused after all (n
 * changed since the judgement): every pod then holds what it held before. */
int model_holdings_apply(model_node *n, int k, const model_holding *h, const model_hold_result *res, char *err,
                         size_t errlen);

#endif
