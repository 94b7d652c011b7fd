/* test_holdings.c -- model/holdings.h: the kubelet's word (device ids through the GPUs' UUIDs) set
 * against the model's grants, and the model re-homed to it without ever over-committing.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "model_helpers.h"
#include "model/fit.h"
#include "model/holdings.h"
#include "model/node.h"

/* annotated-h100-x4: GPU i has UUID GPU-0a1b2c3d-0000-1111-2222-33334444555(5+i) */
#define H100_UUID(i) "GPU-0a1b2c3d-0000-1111-2222-33334444555" #i

/* Pod uid holds whole GPU gpu (as tessera's bind would grant it). */
static bool hold_whole(model_node *n, const char *uid, int gpu) {
    model_assignment a = {.ngrants = 1};
    a.grant[0] = (model_grant){.gpu = (int8_t)gpu, .mig_inst = -1, .mig_profile = -1, .mig_start = -1,
                               .exclusive = true, .replica = -1, .memory_mib = n->gpus[gpu].memory_mib,
                               .compute_permille = 1000};
    char err[256];
    return model_assign(n, uid, &a, err, sizeof err) == 0;
}

/* The holding of uid from device ids, every one of which must map. */
static bool holding(const model_node *n, const char *uid, const char *const *ids, int nids, model_holding *h) {
    memset(h, 0, sizeof *h);
    h->uid = uid;
    for (int i = 0; i < nids; i++) {
        char why[256];
        if (model_held_map_id(n, ids[i], &h->held[h->nheld], why, sizeof why) != MODEL_HELD_MAPPED) {
            printf("    %s: %s\n", ids[i], why);
            return false;
        }
        h->nheld++;
    }
    return true;
}

static int cmp_gpu(const void *a, const void *b) { return *(const int8_t *)a - *(const int8_t *)b; }

static int whole_gpu_of(const model_node *n, const char *uid) {
    const model_alloc *al = model_node_find(n, uid);
    return al && al->a.ngrants == 1 && al->a.grant[0].exclusive ? al->a.grant[0].gpu : -1;
}

TEST(holdings_agree_changes_nothing) {
    model_node *n = fixture_node("nodes/annotated-h100-x4.json");
    CHECK(n && n->ngpus == 4);
    CHECK(hold_whole(n, "a", 0) && hold_whole(n, "b", 1));
    model_holding h[2];
    const char *ia[] = {H100_UUID(5)}, *ib[] = {H100_UUID(6)};
    CHECK(holding(n, "a", ia, 1, &h[0]) && holding(n, "b", ib, 1, &h[1]));
    model_hold_result r[2];
    CHECK_INT(model_holdings_judge(n, 2, h, r), 0);
    CHECK_INT(r[0].verdict, MODEL_HOLD_AGREE);
    CHECK_INT(r[1].verdict, MODEL_HOLD_AGREE);
    model_node_free(n);
}

TEST(holdings_one_pod_moved_to_the_kubelets_gpu) {
    model_node *n = fixture_node("nodes/annotated-h100-x4.json");
    CHECK(n);
    CHECK(hold_whole(n, "a", 0) && hold_whole(n, "b", 1));
    model_holding h[2];
    const char *ia[] = {H100_UUID(5)}, *ib[] = {H100_UUID(7)};   /* b: GPU 2, not 1 */
    CHECK(holding(n, "a", ia, 1, &h[0]) && holding(n, "b", ib, 1, &h[1]));
    model_hold_result r[2];
    CHECK_INT(model_holdings_judge(n, 2, h, r), 1);
    CHECK_INT(r[0].verdict, MODEL_HOLD_AGREE);
    CHECK_INT(r[1].verdict, MODEL_HOLD_MOVED);
    CHECK_INT(r[1].a.grant[0].gpu, 2);
    CHECK_INT(r[1].a.grant[0].memory_mib, 81000);   /* GPU 2's own memory (tessera.io/gpus memory_mib) */
    CHECK_INT(whole_gpu_of(n, "b"), 1);              /* judging changed nothing */
    char err[256], why[256];
    CHECK_INT(model_holdings_apply(n, 2, h, r, err, sizeof err), 0);
    CHECK_INT(whole_gpu_of(n, "a"), 0);
    CHECK_INT(whole_gpu_of(n, "b"), 2);
    CHECK(model_gpu_idle(&n->gpus[1]));
    CHECK_MSG(model_node_check(n, why, sizeof why), "%s", why);
    model_node_free(n);
}

TEST(holdings_two_pods_swapped_move_together) {
    model_node *n = fixture_node("nodes/annotated-h100-x4.json");
    CHECK(n);
    CHECK(hold_whole(n, "a", 0) && hold_whole(n, "b", 1));
    model_holding h[2];
    const char *ia[] = {H100_UUID(6)}, *ib[] = {H100_UUID(5)};
    CHECK(holding(n, "a", ia, 1, &h[0]) && holding(n, "b", ib, 1, &h[1]));
    model_hold_result r[2];
    /* each alone would over-commit (the other holds its GPU); together they fit */
    CHECK_INT(model_holdings_judge(n, 2, h, r), 2);
    char err[256], why[256];
    CHECK_INT(model_holdings_apply(n, 2, h, r, err, sizeof err), 0);
    CHECK_INT(whole_gpu_of(n, "a"), 1);
    CHECK_INT(whole_gpu_of(n, "b"), 0);
    CHECK_MSG(model_node_check(n, why, sizeof why), "%s", why);
    model_node_free(n);
}

TEST(holdings_refuses_a_word_that_would_overcommit) {
    model_node *n = fixture_node("nodes/annotated-h100-x4.json");
    CHECK(n);
    CHECK(hold_whole(n, "a", 0) && hold_whole(n, "b", 1) && hold_whole(n, "c", 2));
    /* the kubelet says b holds GPU 2, but c (not in the record yet: it lags) holds it in the model */
    model_holding h[1];
    const char *ib[] = {H100_UUID(7)};
    CHECK(holding(n, "b", ib, 1, &h[0]));
    model_hold_result r[1];
    CHECK_INT(model_holdings_judge(n, 1, h, r), 0);
    CHECK_INT(r[0].verdict, MODEL_HOLD_REFUSED);
    CHECK_MSG(strstr(r[0].why, "cannot be applied") && strstr(r[0].why, "GPU 2"), "%s", r[0].why);
    CHECK_INT(r[0].a.grant[0].gpu, 1);   /* the model's view */
    char err[256], why[256];
    CHECK_INT(model_holdings_apply(n, 1, h, r, err, sizeof err), 0);   /* nothing moved */
    CHECK_INT(whole_gpu_of(n, "b"), 1);
    CHECK_INT(whole_gpu_of(n, "c"), 2);
    CHECK_MSG(model_node_check(n, why, sizeof why), "%s", why);

    /* a refused pod drops out; the others of the group still move: a->3 fits, b->2 does not */
    model_holding h2[2];
    const char *ia[] = {H100_UUID(8)};
    CHECK(holding(n, "b", ib, 1, &h2[0]) && holding(n, "a", ia, 1, &h2[1]));
    model_hold_result r2[2];
    CHECK_INT(model_holdings_judge(n, 2, h2, r2), 1);
    CHECK_INT(r2[0].verdict, MODEL_HOLD_REFUSED);
    CHECK_INT(r2[1].verdict, MODEL_HOLD_MOVED);
    CHECK_INT(model_holdings_apply(n, 2, h2, r2, err, sizeof err), 0);
    CHECK_INT(whole_gpu_of(n, "a"), 3);
    CHECK_INT(whole_gpu_of(n, "b"), 1);
    CHECK_MSG(model_node_check(n, why, sizeof why), "%s", why);
    model_node_free(n);
}

TEST(holdings_refuses_another_count_or_kind_of_device) {
    model_node *n = fixture_node("nodes/annotated-h100-x4.json");
    CHECK(n);
    CHECK(hold_whole(n, "a", 0));
    model_holding h;
    const char *two[] = {H100_UUID(5), H100_UUID(6)};
    CHECK(holding(n, "a", two, 2, &h));
    model_hold_result r;
    CHECK_INT(model_holdings_judge(n, 1, &h, &r), 0);
    CHECK_INT(r.verdict, MODEL_HOLD_REFUSED);
    CHECK_MSG(strstr(r.why, "2 devices, the model 1"), "%s", r.why);
    const char *rep[] = {H100_UUID(6) "::1"};
    CHECK(holding(n, "a", rep, 1, &h));
    CHECK_INT(model_holdings_judge(n, 1, &h, &r), 0);
    CHECK_INT(r.verdict, MODEL_HOLD_REFUSED);
    CHECK_MSG(strstr(r.why, "replicas, the model whole GPUs"), "%s", r.why);
    /* a pod the model does not hold is not compared (bound, but over-committed or not placed yet) */
    h.uid = "nobody";
    CHECK_INT(model_holdings_judge(n, 1, &h, &r), 0);
    CHECK_INT(r.verdict, MODEL_HOLD_NOT_COMPARED);
    model_node_free(n);
}

static const char TS_NODE[] =
    "{\"kind\":\"Node\",\"metadata\":{\"name\":\"t4-ts\",\"labels\":{\"nvidia.com/gpu.product\":\"Tesla-T4-SHARED\","
    "\"nvidia.com/gpu.count\":\"2\",\"nvidia.com/gpu.memory\":\"15360\",\"nvidia.com/gpu.replicas\":\"4\","
    "\"nvidia.com/gpu.sharing-strategy\":\"time-slicing\"},\"annotations\":{\"tessera.io/gpus\":"
    "\"[{\\\"index\\\":0,\\\"uuid\\\":\\\"GPU-t4-a\\\"},{\\\"index\\\":1,\\\"uuid\\\":\\\"GPU-t4-b\\\"}]\"}},"
    "\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"8\"}}}";

TEST(holdings_replica_ids_compare_gpus_and_take_the_kubelets_number) {
    char err[256], why[256];
    model_node *n = model_node_from_json_text(TS_NODE, sizeof TS_NODE - 1, NULL, err, sizeof err);
    CHECK_MSG(n && n->ngpus == 2 && !n->reason[0], "%s", n ? n->reason : err);
    CHECK_INT(n->gpus[0].mode, MODEL_GPU_TIMESLICE);
    model_request rq = {.kind = MODEL_REQ_WHOLE, .count = 1, .isolation = MODEL_ISO_TIMESLICE};
    model_assignment a;
    CHECK_MSG(model_fit(n, &rq, &a, 1, err, sizeof err) > 0, "%s", err);
    CHECK_INT(a.grant[0].gpu, 0);
    CHECK_INT(a.grant[0].replica, 0);
    CHECK_INT(model_assign(n, "r", &a, err, sizeof err), 0);

    model_held one;
    CHECK_INT(model_held_map_id(n, "GPU-t4-b::3", &one, why, sizeof why), MODEL_HELD_MAPPED);
    CHECK_INT(one.gpu, 1);
    CHECK_INT(one.replica, 3);
    CHECK_INT(model_held_map_id(n, "GPU-t4-b::x", &one, why, sizeof why), MODEL_HELD_UNKNOWN);
    CHECK_INT(model_held_map_id(n, "GPU-t4-c", &one, why, sizeof why), MODEL_HELD_UNKNOWN);
    CHECK_MSG(strstr(why, "not a GPU of node t4-ts"), "%s", why);
    /* one pod's ids together: an unknown one makes the pod a disagreement, said before a MIG id's "unmapped" */
    model_holding mixed;
    char *some[] = {"GPU-t4-a::1", "MIG-5a3e0c2b-1111-2222-3333-444455556666", "GPU-t4-c::0"};
    CHECK_INT(model_holding_map(n, some, 2, &mixed, why, sizeof why), MODEL_HELD_UNMAPPED);
    CHECK_MSG(strstr(why, "MIG instance"), "%s", why);
    CHECK_INT(model_holding_map(n, some, 3, &mixed, why, sizeof why), MODEL_HELD_UNKNOWN);
    CHECK_MSG(strstr(why, "not a GPU of node t4-ts"), "%s", why);
    CHECK_INT(model_holding_map(n, some, 1, &mixed, why, sizeof why), MODEL_HELD_MAPPED);
    CHECK_INT(mixed.nheld, 1);
    CHECK_INT(mixed.held[0].replica, 1);
    CHECK(model_held_id_is("GPU-t4-a::1", "GPU-t4-a") && model_held_id_is("GPU-t4-a", "GPU-t4-a"));
    CHECK(!model_held_id_is("GPU-t4-ab", "GPU-t4-a") && !model_held_id_is("GPU-t4-a:1", "GPU-t4-a"));
    CHECK(!model_held_id_is("GPU-t4-a", ""));

    /* same GPU, another replica number: agreement (the number is the plugin's bookkeeping) */
    model_holding h;
    const char *same[] = {"GPU-t4-a::2"};
    CHECK(holding(n, "r", same, 1, &h));
    model_hold_result r;
    CHECK_INT(model_holdings_judge(n, 1, &h, &r), 0);
    CHECK_INT(r.verdict, MODEL_HOLD_AGREE);
    /* another GPU: moved, with the kubelet's replica number */
    const char *moved[] = {"GPU-t4-b::3"};
    CHECK(holding(n, "r", moved, 1, &h));
    CHECK_INT(model_holdings_judge(n, 1, &h, &r), 1);
    CHECK_INT(r.verdict, MODEL_HOLD_MOVED);
    CHECK_INT(model_holdings_apply(n, 1, &h, &r, err, sizeof err), 0);
    const model_alloc *al = model_node_find(n, "r");
    CHECK(al && al->a.ngrants == 1);
    CHECK_INT(al->a.grant[0].gpu, 1);
    CHECK_INT(al->a.grant[0].replica, 3);
    CHECK_INT(n->gpus[0].replicas_used, 0);
    CHECK_INT(n->gpus[1].replicas_used, 1);
    CHECK_MSG(model_node_check(n, why, sizeof why), "%s", why);
    model_node_free(n);
}

TEST(holdings_mig_ids_and_nodes_without_uuids_are_unmapped) {
    model_node *n = fixture_node("nodes/annotated-h100-x4.json");
    CHECK(n);
    model_held one;
    char why[256];
    CHECK_INT(model_held_map_id(n, "MIG-5a3e0c2b-1111-2222-3333-444455556666", &one, why, sizeof why),
              MODEL_HELD_UNMAPPED);
    CHECK_MSG(strstr(why, "MIG instance"), "%s", why);
    model_node_free(n);
    model_node *p = fixture_node("nodes/plain-a100-80gb-x8.json");   /* labels only: no UUIDs */
    CHECK(p);
    CHECK_INT(model_held_map_id(p, "GPU-0a1b2c3d-0000-1111-2222-333344445555", &one, why, sizeof why),
              MODEL_HELD_UNMAPPED);
    CHECK_MSG(strstr(why, "publishes no GPU UUIDs"), "%s", why);
    model_node_free(p);
}

/* Random kubelet words, true or not, on nodes filled at random: after judging and applying, nothing is ever
 * over-committed, a moved pod holds exactly the kubelet's GPUs, and every other pod holds what it held. */
TEST(holdings_random_words_never_overcommit) {
    unsigned seed = 22;
    char err[256], why[256];
    int verdicts[MODEL_HOLD_NOT_COMPARED + 1] = {0};
    for (int round = 0; round < 400; round++) {
        bool ts = round % 2;
        model_node *n = ts ? model_node_from_json_text(TS_NODE, sizeof TS_NODE - 1, NULL, err, sizeof err)
                           : fixture_node("nodes/annotated-h100-x4.json");
        CHECK(n);
        model_request rq = {.kind = MODEL_REQ_WHOLE, .count = 1, .isolation = ts ? MODEL_ISO_TIMESLICE : MODEL_ISO_DEFAULT};
        char uids[8][16];   /* "p%d": room for any int (-Wformat-truncation at -O1) */
        model_holding h[8];
        model_assignment before[8];
        int k = 0;
        for (int p = 0; p < 8; p++) {
            rq.count = ts ? 1 : 1 + (int)(rand_r(&seed) % 2);
            model_assignment a;
            if (model_fit(n, &rq, &a, 1, NULL, 0) <= 0) continue;
            snprintf(uids[k], sizeof uids[k], "p%d", p);
            CHECK_INT(model_assign(n, uids[k], &a, err, sizeof err), 0);
            before[k] = a;
            memset(&h[k], 0, sizeof h[k]);
            h[k].uid = uids[k];
            /* usually as many devices as grants, now and then one more or one less */
            int nd = a.ngrants + (rand_r(&seed) % 8 == 0 ? (rand_r(&seed) % 2 ? 1 : -1) : 0);
            for (int d = 0; d < nd; d++) {
                h[k].held[d].gpu = (int8_t)(rand_r(&seed) % (unsigned)n->ngpus);
                h[k].held[d].replica = ts ? (int16_t)(rand_r(&seed) % 5) : -1;   /* 4 is out of range */
            }
            h[k].nheld = nd;
            k++;
        }
        model_hold_result r[8];
        int moved = model_holdings_judge(n, k, h, r);
        CHECK(moved >= 0);
        CHECK_INT(model_holdings_apply(n, k, h, r, err, sizeof err), 0);
        CHECK_MSG(model_node_check(n, why, sizeof why), "round %d: %s", round, why);
        for (int i = 0; i < k; i++) {
            const model_alloc *al = model_node_find(n, uids[i]);
            CHECK(al);
            verdicts[r[i].verdict]++;
            if (r[i].verdict != MODEL_HOLD_MOVED) {
                CHECK(!memcmp(&al->a, &before[i], sizeof before[i]));
                continue;
            }
            int8_t want[MODEL_HELD_MAX], got[MODEL_HELD_MAX];
            for (int d = 0; d < h[i].nheld; d++) want[d] = h[i].held[d].gpu;
            for (int g = 0; g < al->a.ngrants; g++) got[g] = al->a.grant[g].gpu;
            CHECK_INT(al->a.ngrants, h[i].nheld);
            qsort(want, (size_t)h[i].nheld, 1, cmp_gpu);
            qsort(got, (size_t)al->a.ngrants, 1, cmp_gpu);
            CHECK(!memcmp(want, got, (size_t)h[i].nheld));
        }
        model_node_free(n);
    }
    /* every outcome happened, many times */
    CHECK_MSG(verdicts[MODEL_HOLD_AGREE] > 20 && verdicts[MODEL_HOLD_MOVED] > 100 && verdicts[MODEL_HOLD_REFUSED] > 100,
              "agree %d moved %d refused %d", verdicts[MODEL_HOLD_AGREE], verdicts[MODEL_HOLD_MOVED],
              verdicts[MODEL_HOLD_REFUSED]);
}
