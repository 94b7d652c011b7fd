/* incremental.h -- placing a stream of requests over many nodes without re-scoring
 * every node for every request. Same decisions as policy_place (policy.h), bit for bit.
 *
 * A policy's per-node score is a pure function of (request, node state, ctx), so for a
 * given request shape only the nodes whose state changed since that shape was last
 * placed need a new score. The selector keeps, per request shape (up to max_shapes,
 * least recently used evicted), every node's score and a tournament tree over them
 * whose root is the winner under policy_select's rule; a pick re-scores the touched
 * nodes and walks their paths up the tree: O(touched * log n) instead of O(n).
 *
 *   policy_inc *s = policy_inc_new(p, &ctx, nodes, n, 0);
 *   for each request r:
 *       int i = policy_inc_place(s, r, decision, &a, why, sizeof why);   like policy_place
 *       if (i >= 0) { model_assign(nodes[i], uid, &a, ...); policy_inc_touch(s, i); }
 *   ... on a release from node j: policy_inc_touch(s, j);
 *   policy_inc_free(s);
 *
 * Contract: the caller calls policy_inc_touch after EVERY change to a node's state
 * (assign, release, anything else); a change it does not report makes later picks stale.
 * The node array is copied (the nodes are not); it must not be reordered.
 *
 * Normalised policies: bestfit's min-max maps the feasible nodes with the largest
 * integer raw value to 100 and every other one lower (or all to 0 when all are equal),
 * so its winner is the largest raw, then the tie-break -- no aggregate needed. random
 * draws every node's score afresh per decision: feasibility is cached as above and only
 * the draws (a hash per feasible node) are redone. POLICY_TIE_RANDOM re-draws the ranks
 * per decision: nothing can be cached, so it falls back to policy_place.
 *
 * One selector is used by one thread; different selectors on different threads are
 * independent.
 */
#ifndef POLICY_INCREMENTAL_H
#define POLICY_INCREMENTAL_H

#include <stdint.h>

#include "policy/policy.h"

typedef struct policy_inc policy_inc;

/* ctx is copied; its decision field is replaced by the decision given to each place.
 * max_shapes: request shapes cached at once (0: 256). NULL on bad arguments or out of
 * memory. n may be 0 (every place then finds nothing). */
policy_inc *policy_inc_new(const policy *p, const policy_ctx *ctx, model_node *const *nodes, int n, int max_shapes);
void policy_inc_free(policy_inc *s);

/* Node i's state changed (its index in the array given to policy_inc_new). Out-of-range
 * indices are ignored. */
void policy_inc_touch(policy_inc *s, int i);
void policy_inc_touch_all(policy_inc *s);

/* Replace ctx.workload (an online estimate's new snapshot): every cached score is
 * dropped, as after policy_inc_touch_all. */
void policy_inc_set_workload(policy_inc *s, const policy_workload *w);

/* What policy_place(p, ctx with .decision = decision, r, nodes, n, ...) returns: the
 * winner's index with out filled, or -1 (no node fits, or bad input; why says which). */
int policy_inc_place(policy_inc *s, const model_request *r, uint64_t decision, model_assignment *out, char *why,
                     size_t whylen);

/* Work done so far, for benchmarks: places, node scores computed, places that fell back
 * to scoring every node (random tie-break). */
typedef struct policy_inc_stats {
    long places, scored, fallbacks;
} policy_inc_stats;
policy_inc_stats policy_inc_get_stats(const policy_inc *s);

#endif
