/* test_sim_cluster.c -- cluster JSON: the demo cluster becomes the nodes the GPU
 * operator would describe; bad input gets an error naming the field. */
#include "sim_helpers.h"

#include "model/node.h"

TEST(sim_cluster_demo_builds_operator_nodes) {
    char err[512];
    sim_cluster *c = sim_cluster_from_json((const char *)sim_demo_sim_cluster_json, sim_demo_sim_cluster_json_len,
                                           NULL, err, sizeof err);
    CHECK_MSG(c, "%s", err);
    CHECK_INT(c->ngroups, 4);
    CHECK_INT(sim_cluster_nodes(c), 6);
    CHECK_INT(sim_cluster_gpus(c), 40);
    model_node **nodes;
    int *group_of, n;
    CHECK(sim_cluster_build(c, NULL, &nodes, &group_of, &n, err, sizeof err) == 0);
    CHECK_INT(n, 6);
    CHECK_STR(nodes[0]->name, "a100-0");
    CHECK_STR(nodes[1]->name, "a100-1");
    CHECK_INT(group_of[2], 1);
    /* whole A100s */
    CHECK_INT(nodes[0]->ngpus, 8);
    CHECK_INT(nodes[0]->gpus[7].mode, MODEL_GPU_WHOLE);
    CHECK(nodes[0]->track_host);
    CHECK_INT(nodes[0]->cpu_milli, 128000);
    CHECK_INT(nodes[0]->memory_mib, 1048576);
    /* MIG layout 3g.40gb + 2 x 2g.20gb on every GPU, placed by the model */
    CHECK_INT(nodes[2]->mig_strategy, MODEL_MIG_MIXED);
    for (int g = 0; g < 8; g++) {
        CHECK_INT(nodes[2]->gpus[g].mode, MODEL_GPU_MIG);
        CHECK_INT(nodes[2]->gpus[g].ninst, 3);
        CHECK(!nodes[2]->gpus[g].mig_dynamic);
    }
    /* time-sliced T4s: the -SHARED product label, 4 replicas */
    CHECK_INT(nodes[3]->ngpus, 4);
    CHECK_INT(nodes[3]->gpus[0].mode, MODEL_GPU_TIMESLICE);
    CHECK_INT(nodes[3]->gpus[0].replicas, 4);
    CHECK_STR(nodes[3]->product_label, "Tesla-T4-SHARED");
    /* H100 with MIG on demand: MIG mode, no instances yet */
    CHECK_INT(nodes[5]->gpus[0].mode, MODEL_GPU_MIG);
    CHECK(nodes[5]->gpus[0].mig_dynamic);
    CHECK_INT(nodes[5]->gpus[0].ninst, 0);
    for (int i = 0; i < n; i++) {
        char why[256];
        CHECK_MSG(model_node_check(nodes[i], why, sizeof why), "%s: %s", nodes[i]->name, why);
    }
    sim_cluster_free_nodes(nodes, group_of, n);
    sim_cluster_free(c);
}

TEST(sim_cluster_sharing_strings) {
    sim_sharing s;
    char err[256], buf[128];
    CHECK(sim_sharing_parse("mps:8", &s, err, sizeof err) == 0);
    CHECK_INT(s.kind, SIM_SHARE_MPS);
    CHECK_INT(s.replicas, 8);
    CHECK(sim_sharing_parse("mig:3g.40gb+2x2g.20gb", &s, err, sizeof err) == 0);
    CHECK_INT(s.nitems, 2);
    CHECK_STR(s.profile[1], "2g.20gb");
    CHECK_INT(s.count[1], 2);
    sim_sharing_format(&s, buf, sizeof buf);
    CHECK_STR(buf, "mig:3g.40gb+2x2g.20gb");
    CHECK(sim_sharing_parse("mig:1g.10gb+me+3x1g.10gb", &s, err, sizeof err) == 0);
    CHECK_STR(s.profile[0], "1g.10gb+me");
    CHECK_STR(s.profile[1], "1g.10gb");
    CHECK_INT(s.count[1], 3);
    CHECK(sim_sharing_parse("timeslice:1", &s, err, sizeof err) != 0);
    CHECK_CONTAINS(err, "2..");
    CHECK(sim_sharing_parse("mig:", &s, err, sizeof err) != 0);
    CHECK(sim_sharing_parse("mig:me+1g.10gb", &s, err, sizeof err) != 0);
    CHECK(sim_sharing_parse("exclusive", &s, err, sizeof err) != 0);
    CHECK_CONTAINS(err, "expected whole, timeslice:N");
}

static void expect_error(const char *json, const char *needle) {
    char err[512] = "";
    sim_cluster *c = cluster_of(json, err, sizeof err);
    CHECK_REFUSED(c != NULL, json, err, needle);
    sim_cluster_free(c);
}

#define GROUP(extra) "{\"nodeGroups\": [{\"name\": \"g\", \"count\": 1, \"gpusPerNode\": 2, " extra "}]}"

TEST(sim_cluster_errors_name_the_field) {
    expect_error("{\"nodeGroups\": [", "malformed JSON");
    expect_error("{\"groups\": []}", "unknown key \"groups\"");
    expect_error("{\"nodeGroups\": []}", "nodeGroups: expected a non-empty array");
    expect_error("{\"nodeGroups\": [{\"name\": \"g\", \"gpuProduct\": \"Tesla-T4\", \"gpusPerNode\": 1}]}",
                 "nodeGroups[0].count: missing");
    expect_error(GROUP("\"gpuProduct\": \"Tesla-T4\", \"gpusPerNod\": 1"), "nodeGroups[0]: unknown key \"gpusPerNod\"");
    expect_error(GROUP("\"gpuProduct\": 7"), "nodeGroups[0].gpuProduct: expected a string");
    expect_error(GROUP("\"gpuProduct\": \"Tesla-T5\""), "gpuProduct \"Tesla-T5\" is not in the GPU catalog");
    expect_error(GROUP("\"gpuProduct\": \"Tesla-T4\", \"sharing\": \"mig:on-demand\""), "does not support MIG");
    expect_error(GROUP("\"gpuProduct\": \"NVIDIA-A100-SXM4-80GB\", \"sharing\": \"mig:4x3g.40gb\""),
                 "nodeGroups[0]: group \"g\": cannot place the advertised MIG devices");
    expect_error(GROUP("\"gpuProduct\": \"NVIDIA-A100-SXM4-80GB\", \"sharing\": \"mig:3g.20gb\""),
                 "has no MIG profile \"3g.20gb\"");
    expect_error(GROUP("\"gpuProduct\": \"Tesla-T4\", \"sharing\": \"mps:64\""), "exceeds the");
    expect_error(GROUP("\"gpuProduct\": \"Tesla-T4\", \"cpuMilli\": 1000"), "cpuMilli and memoryMiB go together");
    expect_error(GROUP("\"gpuProduct\": \"Tesla-T4\", \"sharing\": \"timeslice:x\""), "nodeGroups[0].sharing:");
    expect_error("{\"nodeGroups\": [{\"name\": \"g\", \"count\": 1.5, \"gpuProduct\": \"Tesla-T4\", \"gpusPerNode\": 1}]}",
                 "nodeGroups[0].count: expected a whole number");
    expect_error("{\"nodeGroups\": [{\"name\": \"g\", \"count\": 1, \"gpuProduct\": \"Tesla-T4\", \"gpusPerNode\": 17}]}",
                 "nodeGroups[0].gpusPerNode");
    expect_error("{\"nodeGroups\": [{\"name\": \"g\", \"count\": 1, \"gpuProduct\": \"Tesla-T4\", \"gpusPerNode\": 1},"
                 " {\"name\": \"g\", \"count\": 1, \"gpuProduct\": \"Tesla-T4\", \"gpusPerNode\": 1}]}",
                 "nodeGroups[1].name: \"g\" is used twice");
}

TEST(sim_cluster_catalog_id_and_round_trip) {
    sim_cluster *c = one_group("A100-80GB", 3, 4, "timeslice:2");
    CHECK(c);
    char *json = sim_cluster_to_json(c);
    char err[256];
    sim_cluster *d = cluster_of(json, err, sizeof err);
    free(json);
    CHECK_MSG(d, "%s", err);
    CHECK_INT(d->groups[0].count, 3);
    CHECK_INT(d->groups[0].sharing.kind, SIM_SHARE_TIMESLICE);
    CHECK_INT(d->groups[0].sharing.replicas, 2);
    model_node *n = sim_group_node(&d->groups[0], NULL, "x", err, sizeof err);
    CHECK_MSG(n, "%s", err);
    CHECK_STR(n->gpus[0].product->model_id, "A100-80GB");
    CHECK(!n->track_host);
    model_node_free(n);
    sim_cluster_free(c);
    sim_cluster_free(d);
}

/* Layered sharing: "mig:<layout>+timeslice:N" parses, prints back, and becomes the Node the
 * GPU operator publishes for it (per-profile replicas labels, replicas x instances advertised),
 * which the model reads as time-sliced instances; MPS on MIG is refused as the device plugin does. */
TEST(sim_cluster_layered_sharing) {
    sim_sharing s;
    char err[256], buf[128];
    CHECK(sim_sharing_parse("mig:3g.40gb+4x1g.10gb+timeslice:4", &s, err, sizeof err) == 0);
    CHECK_INT(s.kind, SIM_SHARE_MIG);
    CHECK_INT(s.nitems, 2);
    CHECK_INT(s.mig_replicas, 4);
    sim_sharing_format(&s, buf, sizeof buf);
    CHECK_STR(buf, "mig:3g.40gb+4x1g.10gb+timeslice:4");
    CHECK(sim_sharing_parse("mig:3g.40gb", &s, err, sizeof err) == 0);
    CHECK_INT(s.mig_replicas, 1);
    CHECK(sim_sharing_parse("mig:3g.40gb+mps:4", &s, err, sizeof err) != 0);
    CHECK_CONTAINS(err, "cannot be shared by MPS");
    CHECK(sim_sharing_parse("mig:timeslice:4+3g.40gb", &s, err, sizeof err) != 0);
    CHECK(sim_sharing_parse("mig:3g.40gb+timeslice:1", &s, err, sizeof err) != 0);
    CHECK(sim_sharing_parse("mig:3g.40gb+timeslice:4+timeslice:2", &s, err, sizeof err) != 0);

    sim_cluster *c = cluster_of("{\"nodeGroups\": [{\"name\": \"lay\", \"count\": 2, \"gpusPerNode\": 2, "
                                "\"gpuProduct\": \"NVIDIA-A100-SXM4-80GB\", \"sharing\": \"mig:3g.40gb+4x1g.10gb+timeslice:4\"}]}",
                                err, sizeof err);
    CHECK_MSG(c != NULL, "%s", err);
    if (!c) return;
    model_node *n = sim_group_node(&c->groups[0], NULL, "lay-0", err, sizeof err);
    CHECK_MSG(n != NULL, "%s", err);
    if (n) {
        CHECK_INT(n->ngpus, 2);
        CHECK_INT(n->mig_sharing, MODEL_GPU_TIMESLICE);
        int shared = 0, plain = 0;
        for (int i = 0; i < n->ngpus; i++)
            for (int k = 0; k < n->gpus[i].ninst; k++) {
                shared += n->gpus[i].inst[k].replicas == 4;
                plain += n->gpus[i].inst[k].replicas == 1;
            }
        CHECK_INT(shared, 2 * 5);   /* every instance of the layout, as the config lists every profile */
        CHECK_INT(plain, 0);
        model_node_free(n);
    }
    char *back = sim_cluster_to_json(c);
    CHECK_CONTAINS(back, "mig:3g.40gb+4x1g.10gb+timeslice:4");
    free(back);
    sim_cluster_free(c);
}

/* plan's rule for one sharing option, as sim_cluster_apply_sharing has it: every shared
 * group that can be set up that way takes it; whole groups and groups whose product cannot
 * keep theirs; an option no group can take changes nothing. */
TEST(sim_cluster_apply_sharing_takes_shared_groups_that_can) {
    char err[512], buf[128];
    sim_cluster *c = sim_cluster_from_json((const char *)sim_demo_sim_cluster_json, sim_demo_sim_cluster_json_len,
                                           NULL, err, sizeof err);
    CHECK_MSG(c, "%s", err);
    sim_sharing opt;
    /* two 3g.40gb per GPU: the A100s under MIG and the H100s (MIG on demand) can take it,
     * the T4s cannot run MIG, the whole A100s are not a shared group */
    CHECK(sim_sharing_parse("mig:2x3g.40gb", &opt, err, sizeof err) == 0);
    sim_cluster *m = sim_cluster_clone(c);
    CHECK_INT(sim_cluster_apply_sharing(m, &opt, NULL), 2);
    sim_sharing_format(&m->groups[0].sharing, buf, sizeof buf);
    CHECK_STR(buf, "whole");   /* a100: whole, not a shared group */
    sim_sharing_format(&m->groups[1].sharing, buf, sizeof buf);
    CHECK_STR(buf, "mig:2x3g.40gb");
    sim_sharing_format(&m->groups[2].sharing, buf, sizeof buf);
    CHECK_STR(buf, "timeslice:4");   /* a T4 cannot run MIG */
    sim_sharing_format(&m->groups[3].sharing, buf, sizeof buf);
    CHECK_STR(buf, "mig:2x3g.40gb");
    sim_cluster_free(m);
    /* "whole": every shared group can, so the cluster has whole GPUs only */
    CHECK(sim_sharing_parse("whole", &opt, err, sizeof err) == 0);
    m = sim_cluster_clone(c);
    CHECK_INT(sim_cluster_apply_sharing(m, &opt, NULL), 3);
    for (int g = 0; g < m->ngroups; g++) CHECK_INT(m->groups[g].sharing.kind, SIM_SHARE_WHOLE);
    sim_cluster_free(m);
    /* a 40 GB A100's profile: no product of the demo has it */
    CHECK(sim_sharing_parse("mig:1g.5gb", &opt, err, sizeof err) == 0);
    m = sim_cluster_clone(c);
    CHECK_INT(sim_cluster_apply_sharing(m, &opt, NULL), 0);
    sim_sharing_format(&m->groups[1].sharing, buf, sizeof buf);
    CHECK_STR(buf, "mig:3g.40gb+2x2g.20gb");
    sim_cluster_free(m);
    sim_cluster_free(c);
}
