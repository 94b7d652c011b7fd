/* test_policy_openb.c -- the FGD acceptance numbers: empty-cluster fragmentation of the
 * 1,213 openb GPU nodes against the target workload of each pod list
 * (sim/fgd-method.md section 2.3), and the target-workload construction itself.
 */
#include "harness.h"
#include "policy_helpers.h"

#include <math.h>

static void check_trace(const char *trace, double expected_pct) {
    policy_workload *w = openb_workload(trace);
    CHECK_MSG(w != NULL, "cannot build the workload of %s (run from the repo root)", trace);
    openb_cluster *c = openb_load_nodes("data/openb/openb_node_list_gpu_node.csv");
    if (!c) policy_workload_free(w);
    CHECK_MSG(c != NULL, "cannot read data/openb/openb_node_list_gpu_node.csv (run from the repo root)");
    policy_frag_report rep;
    int rc = policy_frag_cluster(c->nodes, c->n, w, &rep);
    int gpus = rep.gpus;
    double amount = rep.amount_pct;
    policy_workload_free(w);
    openb_cluster_free(c);
    CHECK_INT(rc, 0);
    CHECK_INT(gpus, 6212);
    CHECK_MSG(fabs(amount - expected_pct) <= 0.05, "%s: empty-cluster frag %.3f %%, expected %.2f %% +- 0.05", trace,
              amount, expected_pct);
}

TEST(policy_openb_frag_default) { check_trace("default", 13.94); }
TEST(policy_openb_frag_cpu050) { check_trace("cpu050", 5.55); }
TEST(policy_openb_frag_cpu250) { check_trace("cpu250", 25.87); }
TEST(policy_openb_frag_gpushare100) { check_trace("gpushare100", 13.64); }
TEST(policy_openb_frag_multigpu50) { check_trace("multigpu50", 14.73); }
TEST(policy_openb_frag_gpuspec33) { check_trace("gpuspec33", 35.49); }

/* The paper's default trace: 35 task types cover 95.3 % of tasks, CPU-only p ~ 0.136. */
TEST(policy_openb_workload_default) {
    policy_workload *w = openb_workload("default");
    CHECK(w != NULL);
    int n = policy_workload_count(w);
    double cov = policy_workload_coverage(w), sum = 0, cpu_only = 0;
    for (int i = 0; i < n; i++) {
        const policy_task_type *t = policy_workload_type(w, i);
        sum += t->p;
        if (t->kind == MODEL_REQ_NONE) cpu_only += t->p;
        if (i) CHECK(policy_workload_type(w, i - 1)->count >= t->count);
    }
    policy_workload_free(w);
    CHECK_INT(n, 35);
    CHECK_MSG(fabs(cov - 0.953) < 0.001, "coverage %.4f", cov);
    CHECK_MSG(fabs(sum - 1.0) < 1e-9, "p sums to %.12f", sum);
    CHECK_MSG(fabs(cpu_only - 0.136) < 0.002, "CPU-only share %.4f", cpu_only);
}
