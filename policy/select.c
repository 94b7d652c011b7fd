/* select.c -- from per-node results to one decision: normalisation that needs every
 * node (bestfit, random), the tie-break, the extender's 0..10 scale, and turning the
 * winner's choice back into a model assignment.
 */
#include "policy/policy_int.h"

#include <stdio.h>
#include <string.h>

void policy_normalize(const policy *p, const policy_ctx *ctx, policy_result *res, int n) {
    (void)ctx;
    if (!p || !res || n <= 0) return;
    int kind = policy_norm_kind(p);
    if (kind == NORM_NONE) return;
    int64_t lo = 0, hi = 0;
    int top = -1;
    bool any = false;
    for (int i = 0; i < n; i++) {
        if (!res[i].feasible) continue;
        int64_t v = (int64_t)res[i].raw;
        if (!any || v < lo) lo = v;
        if (!any || v > hi) hi = v;
        if (top < 0 || res[i].raw > res[top].raw) top = i;
        any = true;
    }
    for (int i = 0; i < n; i++) {
        if (!res[i].feasible) {
            res[i].score = 0;
        } else if (kind == NORM_MINMAX) {
            /* The FGD simulator's integer min-max: all equal -> all 0. */
            res[i].score = hi == lo ? 0.0 : (double)(((int64_t)res[i].raw - lo) * 100 / (hi - lo));
        } else {
            res[i].score = i == top ? 100.0 : 0.0;
        }
    }
}

/* Whether a beats b under the tie-break rule (see policy.h). */
static bool better(const policy_result *a, int ia, const policy_result *b, int ib) {
    if (a->score != b->score) return a->score > b->score;
    if (a->rank != b->rank) return a->rank < b->rank;
    return ia < ib;
}

int policy_select(const policy *p, const policy_ctx *ctx, policy_result *res, int n) {
    if (!p || !res || n <= 0) return -1;
    policy_normalize(p, ctx, res, n);
    int win = -1;
    for (int i = 0; i < n; i++)
        if (res[i].feasible && (win < 0 || better(&res[i], i, &res[win], win))) win = i;
    return win;
}

void policy_scores_0_10(const policy *p, const policy_ctx *ctx, policy_result *res, int n, int *out) {
    if (!res || !out || n <= 0) return;
    int win = policy_select(p, ctx, res, n);
    double lo = 0, hi = 0;
    bool any = false;
    for (int i = 0; i < n; i++) {
        if (!res[i].feasible) continue;
        if (!any || res[i].score < lo) lo = res[i].score;
        if (!any || res[i].score > hi) hi = res[i].score;
        any = true;
    }
    for (int i = 0; i < n; i++) {
        if (!res[i].feasible) out[i] = 0;
        else if (i == win) out[i] = 10;
        else if (hi <= lo) out[i] = 9;
        else {
            int s = (int)(10.0 * (res[i].score - lo) / (hi - lo));
            out[i] = s > 9 ? 9 : s < 0 ? 0 : s;
        }
    }
}

/* Whether assignment a realises choice c: the same GPUs, and the same MIG slot /
 * replica where the choice names one. A choice lists each GPU once (score.c generic_cand),
 * while an assignment has one grant per instance or replica: two MIG instances on one GPU
 * are two grants on GPU 0 and the choice {0}, so the grants' distinct GPUs are compared. */
static bool matches(const model_assignment *a, const policy_choice *c) {
    int8_t g[MODEL_MAX_GPUS];
    int ng = 0;
    for (int i = 0; i < a->ngrants; i++) {
        int8_t x = a->grant[i].gpu;
        int j = ng;
        while (j > 0 && g[j - 1] > x) j--;   /* insertion point, ascending */
        if (j > 0 && g[j - 1] == x) continue;
        if (ng == MODEL_MAX_GPUS) return false;
        memmove(&g[j + 1], &g[j], (size_t)(ng - j) * sizeof g[0]);
        g[j] = x;
        ng++;
    }
    if (ng != c->ngpus) return false;
    for (int i = 0; i < ng; i++)
        if (g[i] != c->gpu[i]) return false;
    if (c->mig_profile >= 0) {
        const model_grant *f = &a->grant[0];
        if (f->mig_profile != c->mig_profile || f->mig_start != c->mig_start || f->mig_create != c->mig_create)
            return false;
    }
    if (c->replica >= 0 && a->grant[0].replica != c->replica) return false;
    return true;
}

#define MAT_MAX 128   /* a choice's GPUs offer few assignments (MIG slots, replicas): ample */

int policy_materialize(const model_node *n, const model_request *r, const policy_choice *c, model_assignment *out,
                       char *err, size_t errlen) {
    if (!n || !r || !c || !out) {
        if (err) snprintf(err, errlen, "policy_materialize: NULL argument");
        return -1;
    }
    model_assignment as[MAT_MAX];
    char why[MODEL_REASON_LEN];
    /* Only the chosen GPUs: the choice may sit past the first MAT_MAX of the full list (a
     * topology-aware policy's aligned set on a 16-GPU node), and the list is shorter. */
    uint32_t only = c->ngpus > 0 ? 0 : UINT32_MAX;
    for (int i = 0; i < c->ngpus; i++)
        if (c->gpu[i] >= 0 && c->gpu[i] < MODEL_MAX_GPUS) only |= 1u << c->gpu[i];
    int total = model_fit_on(n, r, only, as, MAT_MAX, why, sizeof why);
    int k = total < MAT_MAX ? total : MAT_MAX;
    for (int i = 0; i < k; i++) {
        if (matches(&as[i], c)) {
            *out = as[i];
            return 0;
        }
    }
    if (err) snprintf(err, errlen, "node %s: the chosen placement no longer fits%s%s", n->name, total ? "" : ": ",
                      total ? "" : why);
    return -1;
}

int policy_place(const policy *p, const policy_ctx *ctx, const model_request *r, model_node *const *nodes, int n,
                 policy_result *scratch, model_assignment *out, char *why, size_t whylen) {
    if (why && whylen) why[0] = 0;
    if (!p || !ctx || !r || (n > 0 && (!nodes || !scratch)) || !out || n < 0) {
        if (why) snprintf(why, whylen, "policy_place: bad argument");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (policy_score(p, r, nodes[i], ctx, &scratch[i], NULL, 0) < 0) {
            if (why) policy_score(p, r, nodes[i], ctx, &scratch[i], why, whylen);
            return -1;
        }
    }
    int win = policy_select(p, ctx, scratch, n);
    if (win < 0) {
        if (why) snprintf(why, whylen, "no node fits the request");
        return -1;
    }
    if (policy_materialize(nodes[win], r, &scratch[win].choice, out, why, whylen) < 0) return -1;
    return win;
}
