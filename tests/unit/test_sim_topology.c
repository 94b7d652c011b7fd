/* test_sim_topology.c -- topology in cluster files (the three reference servers (README, Topology) as
 * presets, matrices, strict errors) and the replay's multi-GPU accounting: alignment
 * classes counted right, the communication factor applied as sim/slowdown.h says, and the
 * topology-aware policy placing fewer multi-GPU pods unaligned than bestfit on the shipped
 * trace (data/sim/topo-*.json). */
#include "sim_helpers.h"
#include "topo_helpers.h"

#include "model/topo.h"
#include "sim/plan.h"
#include "sim/replay.h"
#include "sim/report.h"
#include "sim/slowdown.h"
#include "sim/topology.h"

/* The presets are the servers the fake NVML and the fit/score fixtures describe
 * (topo_helpers.h, written from the README independently). */
TEST(sim_topology_presets_are_the_reference_servers) {
    static const struct { const char *name, *product; test_server s; } cases[] = {
        {"dgx-a100", "NVIDIA-A100-SXM4-80GB", TEST_DGX_A100},
        {"pcie8-nvlink-pairs", "NVIDIA-A100-80GB-PCIe", TEST_PCIE8},
        {"2socket-4gpu", "NVIDIA-L40S", TEST_2SOCKET},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sim_topology t;
        const char *product = NULL;
        CHECK(sim_topology_preset(cases[i].name, &t, &product) == 0);
        CHECK_STR(product, cases[i].product);
        CHECK_INT(t.ngpus, test_server_gpus(cases[i].s));
        for (int a = 0; a < t.ngpus; a++)
            for (int b = 0; b < t.ngpus; b++) {
                if (a == b) continue;
                model_link want = test_server_link(cases[i].s, a, b);
                CHECK_MSG(t.link[a][b] == want, "%s: GPUs %d,%d link %d, want %d", cases[i].name, a, b, t.link[a][b],
                          want);
                CHECK_INT(t.nvlinks[a][b], want == MODEL_LINK_NVLINK ? 12 : 0);
            }
    }
    /* A few pairs as the README spells them. */
    sim_topology p;
    CHECK(sim_topology_preset("pcie8-nvlink-pairs", &p, NULL) == 0);
    CHECK_INT(p.link[6][7], MODEL_LINK_NVLINK);
    CHECK_INT(p.link[1][3], MODEL_LINK_PIX);
    CHECK_INT(p.link[3][4], MODEL_LINK_SYS);
    CHECK(sim_topology_preset("2socket-4gpu", &p, NULL) == 0);
    CHECK_INT(p.link[2][3], MODEL_LINK_NODE);
    CHECK_INT(p.link[1][2], MODEL_LINK_SYS);
    CHECK(sim_topology_preset("dgx-h100", &p, NULL) == -1);
}

/* Built from a cluster file, nodes carry the links, and the reference aligned-set expectations hold. */
TEST(sim_topology_cluster_nodes_align_as_the_readme_says) {
    char err[512];
    sim_cluster *c = sim_cluster_from_file("data/sim/topo-cluster.json", NULL, err, sizeof err);
    CHECK_MSG(c, "%s", err);
    model_node **nodes;
    int *group_of, n;
    CHECK_MSG(sim_cluster_build(c, NULL, &nodes, &group_of, &n, err, sizeof err) == 0, "%s", err);
    const model_node *pcie8 = NULL, *l40s = NULL, *dgx = NULL;
    for (int i = 0; i < n; i++) {
        const char *g = c->groups[group_of[i]].topo.preset;
        CHECK(nodes[i]->topo != NULL);
        if (!strcmp(g, "pcie8-nvlink-pairs")) pcie8 = nodes[i];
        if (!strcmp(g, "2socket-4gpu")) l40s = nodes[i];
        if (!strcmp(g, "dgx-a100")) dgx = nodes[i];
    }
    CHECK(pcie8 && l40s && dgx);
    const int8_t pair[] = {2, 3}, sw[] = {0, 1, 2, 3}, all[] = {0, 1, 2, 3, 4, 5, 6, 7}, split[] = {1, 2};
    CHECK_INT(model_topo_align(pcie8, pair, 2), MODEL_ALIGN_NVLINK);
    CHECK_INT(model_topo_align(pcie8, split, 2), MODEL_ALIGN_PCIE);
    CHECK_INT(model_topo_align(pcie8, sw, 4), MODEL_ALIGN_PCIE);
    CHECK_INT(model_topo_align(pcie8, all, 8), MODEL_ALIGN_NONE);
    CHECK_INT(model_topo_align(l40s, pair, 2), MODEL_ALIGN_NUMA);
    CHECK_INT(model_topo_align(l40s, split, 2), MODEL_ALIGN_NONE);
    CHECK_INT(model_topo_align(l40s, sw, 4), MODEL_ALIGN_NONE);
    CHECK_INT(model_topo_align(dgx, all, 8), MODEL_ALIGN_NVLINK);
    sim_cluster_free_nodes(nodes, group_of, n);

    /* Written back (plan results) and read again: the same topology. */
    char *json = sim_cluster_to_json(c);
    sim_cluster *d = sim_cluster_from_json(json, strlen(json), NULL, err, sizeof err);
    CHECK_MSG(d, "%s", err);
    for (int g = 0; g < c->ngroups; g++) CHECK(!memcmp(&c->groups[g].topo, &d->groups[g].topo, sizeof(sim_topology)));
    free(json);
    sim_cluster_free(d);
    sim_cluster_free(c);
}

#define GROUP(product, gpus, topo)                                                                              \
    "{\"nodeGroups\": [{\"name\": \"g\", \"count\": 1, \"gpuProduct\": \"" product "\", \"gpusPerNode\": " #gpus \
    ", \"topology\": " topo "}]}"

TEST(sim_topology_cluster_errors) {
    static const struct { const char *json, *needle; } bad[] = {
        {GROUP("NVIDIA-A100-80GB-PCIe", 4, "\"pcie8-nvlink-pairs\""),
         "nodeGroups[0].topology: preset \"pcie8-nvlink-pairs\" has 8 GPUs, the group's nodes 4"},
        {GROUP("NVIDIA-A100-SXM4-80GB", 8, "\"pcie8-nvlink-pairs\""),
         "is a server of 8 x NVIDIA-A100-80GB-PCIe, the group's gpuProduct is \"NVIDIA-A100-SXM4-80GB\""},
        {GROUP("NVIDIA-L40S", 4, "\"4socket\""),
         "unknown preset \"4socket\" (presets: dgx-a100, pcie8-nvlink-pairs, 2socket-4gpu"},
        {GROUP("NVIDIA-L40S", 2, "[[\"X\", \"NV4\"], [\"SYS\", \"X\"]]"), "not symmetric: GPU 0 to 1 differs from 1 to 0"},
        {GROUP("NVIDIA-L40S", 2, "[[\"X\", \"PIX\"], [\"PIX\"]]"), "topology[1]: expected an array of 2 link names"},
        {GROUP("NVIDIA-L40S", 2, "[[\"X\", \"QPI\"], [\"QPI\", \"X\"]]"),
         "topology[0][1]: expected X, NV<n>, PIX, PXB, PHB, NODE or SYS"},
        {GROUP("NVIDIA-L40S", 2, "[[\"PIX\", \"PIX\"], [\"PIX\", \"X\"]]"), "topology[0][0]: a GPU's link to itself is \"X\""},
        {GROUP("NVIDIA-L40S", 3, "[[\"X\", \"PIX\"], [\"PIX\", \"X\"]]"), "the matrix has 2 GPUs, the group's nodes 3"},
        {GROUP("NVIDIA-L40S", 2, "7"), "expected a preset name or a matrix"},
    };
    char err[512];
    sim_cluster *c;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_REFUSED((c = cluster_of(bad[i].json, err, sizeof err)) != NULL, bad[i].json, err, bad[i].needle);
        sim_cluster_free(c);
    }
    /* A matrix for any server: accepted, and the node gets it. */
    c = cluster_of(GROUP("NVIDIA-L40S", 2, "[[\"X\", \"NV4\"], [\"NV4\", \"X\"]]"), err, sizeof err);
    CHECK_MSG(c, "%s", err);
    model_node *n = sim_group_node(&c->groups[0], NULL, "m", err, sizeof err);
    CHECK(n && n->topo);
    CHECK_INT(model_topo_link(n, 1, 0), MODEL_LINK_NVLINK);
    model_node_free(n);
    sim_cluster_free(c);
}

/* ---- the replay's accounting, by hand ---- */

/* One 2-GPU node per class, each its own product so a pod can be pinned to it
 * (tessera.io/gpu-models), and a 3-GPU node whose only NVLink pair is (0,1). */
static const char *const CLASSES =
    "{\"nodeGroups\": ["
    "{\"name\": \"nv\", \"count\": 1, \"gpuProduct\": \"NVIDIA-A100-SXM4-80GB\", \"gpusPerNode\": 2,"
    " \"topology\": [[\"X\", \"NV12\"], [\"NV12\", \"X\"]]},"
    "{\"name\": \"sw\", \"count\": 1, \"gpuProduct\": \"NVIDIA-A100-80GB-PCIe\", \"gpusPerNode\": 2,"
    " \"topology\": [[\"X\", \"PIX\"], [\"PIX\", \"X\"]]},"
    "{\"name\": \"numa\", \"count\": 1, \"gpuProduct\": \"NVIDIA-L40S\", \"gpusPerNode\": 2,"
    " \"topology\": [[\"X\", \"NODE\"], [\"NODE\", \"X\"]]},"
    "{\"name\": \"sys\", \"count\": 1, \"gpuProduct\": \"Tesla-T4\", \"gpusPerNode\": 2,"
    " \"topology\": [[\"X\", \"SYS\"], [\"SYS\", \"X\"]]},"
    "{\"name\": \"plain\", \"count\": 1, \"gpuProduct\": \"NVIDIA-A10\", \"gpusPerNode\": 2},"
    "{\"name\": \"tri\", \"count\": 1, \"gpuProduct\": \"NVIDIA-H100-80GB-HBM3\", \"gpusPerNode\": 3,"
    " \"topology\": [[\"X\", \"NV18\", \"SYS\"], [\"NV18\", \"X\", \"SYS\"], [\"SYS\", \"SYS\", \"X\"]]}]}";

#define POD(gpus, product) \
    "\"pod\": {\"resources\": {\"requests\": {\"nvidia.com/gpu\": \"" #gpus "\"}}, " \
    "\"annotations\": {\"tessera.io/gpu-models\": \"" product "\"}}"

static const char *const CLASS_TRACE =
    "{\"workloads\": ["
    "{\"id\": \"nv\", \"kind\": \"training\", \"arrival\": 0, \"duration\": 100, " POD(2, "NVIDIA-A100-SXM4-80GB") "},"
    "{\"id\": \"sw\", \"kind\": \"training\", \"arrival\": 0, \"duration\": 100, " POD(2, "NVIDIA-A100-80GB-PCIe") "},"
    "{\"id\": \"numa\", \"kind\": \"training\", \"arrival\": 0, \"duration\": 100, " POD(2, "NVIDIA-L40S") "},"
    "{\"id\": \"sys\", \"kind\": \"training\", \"arrival\": 0, \"duration\": 100, " POD(2, "Tesla-T4") "},"
    "{\"id\": \"plain\", \"kind\": \"training\", \"arrival\": 0, \"duration\": 100, " POD(2, "NVIDIA-A10") "},"
    "{\"id\": \"one\", \"kind\": \"inference\", \"arrival\": 1, \"duration\": 1000, " POD(1, "NVIDIA-A10") "},"
    /* the commShare override: 0.2 on the NUMA node once it is free again */
    "{\"id\": \"numa2\", \"kind\": \"training\", \"arrival\": 500, \"duration\": 100, \"commShare\": 0.2, "
    POD(2, "NVIDIA-L40S") "},"
    /* tri: a 1-GPU pod first, then a 2-GPU pod gets the two GPUs left */
    "{\"id\": \"tri1\", \"kind\": \"inference\", \"arrival\": 0, \"duration\": 1000, " POD(1, "NVIDIA-H100-80GB-HBM3") "},"
    "{\"id\": \"tri2\", \"kind\": \"training\", \"arrival\": 10, \"duration\": 100, " POD(2, "NVIDIA-H100-80GB-HBM3") "}]}";

static int replay_classes(const char *policy, sim_replay_result *r, sim_cluster **c, sim_trace **t) {
    char err[512];
    *c = cluster_of(CLASSES, err, sizeof err);
    *t = *c ? trace_of(CLASS_TRACE, err, sizeof err) : NULL;
    if (!*t) {
        fprintf(stdout, "    %s\n", err);
        return -1;
    }
    sim_replay_opts o;
    sim_replay_defaults(&o);
    o.policy = policy;
    o.check = true;
    int rc = sim_replay(*c, *t, &o, r, err, sizeof err);
    if (rc != 0) fprintf(stdout, "    replay: %s\n", err);
    return rc;
}

static int find(const sim_trace *t, const char *id) {
    for (int i = 0; i < t->n; i++)
        if (!strcmp(sim_trace_id(t, i), id)) return i;
    return -1;
}

TEST(sim_replay_counts_alignment_classes_and_applies_the_factor) {
    sim_cluster *c = NULL;
    sim_trace *t = NULL;
    sim_replay_result r;
    CHECK(replay_classes("bestfit", &r, &c, &t) == 0);
    /* By hand (c = 0.05, bandwidths 230 / 25 / 20 / 10 GB/s):
     *   nv     nvlink  factor 1
     *   sw     pcie    0.95 + 0.05 x 230/25 = 1.41
     *   numa   numa    0.95 + 0.05 x 230/20 = 1.525
     *   sys    none    0.95 + 0.05 x 230/10 = 2.10
     *   plain  unknown 1 (no topology: not slowed)
     *   numa2  numa    commShare 0.2: 0.8 + 0.2 x 230/20 = 3.1
     *   tri2   bestfit gave tri1 GPU 0 (all GPUs equally tight: the first), so tri2 has GPUs 1 and 2: SYS,
     *          none, and unaligned (the node's best pair is NVLink); factor 2.10
     *   one, tri1: one GPU, not multi-GPU. */
    static const struct { const char *id; double factor; } want[] = {
        {"nv", 1.0}, {"sw", 1.41}, {"numa", 1.525}, {"sys", 2.10}, {"plain", 1.0}, {"numa2", 3.1}, {"tri2", 2.10}};
    double extra = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int w = find(t, want[i].id);
        CHECK(w >= 0);
        /* commShare is kept as a float (4 bytes of a million-workload trace): 0.2 is 0.2 + 3e-9 */
        CHECK_MSG(fabs(r.end[w] - r.start[w] - 100 * want[i].factor) < 1e-5, "%s ran %.6f s, want %.6f", want[i].id,
                  r.end[w] - r.start[w], 100 * want[i].factor);
        extra += 2 * 100 * (want[i].factor - 1) / 3600;
    }
    CHECK_NEAR(r.end[find(t, "one")] - r.start[find(t, "one")], 1000, 1e-9);
    CHECK_INT(r.topo.multi, 7);
    CHECK_INT(r.topo.by_align[MODEL_ALIGN_NVLINK], 1);
    CHECK_INT(r.topo.by_align[MODEL_ALIGN_PCIE], 1);
    CHECK_INT(r.topo.by_align[MODEL_ALIGN_NUMA], 2);
    CHECK_INT(r.topo.by_align[MODEL_ALIGN_NONE], 2);
    CHECK_INT(r.topo.by_align[MODEL_ALIGN_UNKNOWN], 1);
    CHECK_INT(r.topo.unaligned, 1);
    CHECK_NEAR(r.topo.extra_gpu_hours, extra, 1e-8);
    CHECK_NEAR(r.topo.unaligned_gpu_hours, 2 * 100 * (2.10 - 1) / 3600, 1e-8);   /* tri2's */
    CHECK_NEAR(r.topo.factor_mean, (1 + 1.41 + 1.525 + 2.10 + 1 + 3.1 + 2.10) / 7, 1e-7);
    sim_replay_result_free(&r);

    /* --comm-share: the default share changes, the trace's own 0.2 does not. */
    sim_comm_model m;
    sim_comm_defaults(&m);
    m.share = 0.1;
    sim_replay_opts o;
    sim_replay_defaults(&o);
    o.policy = "bestfit";
    o.comm = &m;
    char err[256];
    CHECK(sim_replay(c, t, &o, &r, err, sizeof err) == 0);
    int sw = find(t, "sw"), numa2 = find(t, "numa2");
    CHECK_NEAR(r.end[sw] - r.start[sw], 100 * (0.9 + 0.1 * 230 / 25), 1e-6);
    CHECK_NEAR(r.end[numa2] - r.start[numa2], 310, 1e-5);
    sim_replay_result_free(&r);
    sim_trace_free(t);
    sim_cluster_free(c);
}

TEST(sim_comm_factor_model) {
    sim_comm_model m;
    sim_comm_defaults(&m);
    CHECK_NEAR(m.share, 0.05, 0);
    CHECK_NEAR(sim_comm_factor(&m, MODEL_ALIGN_NVLINK, 0.05), 1.0, 1e-12);
    CHECK_NEAR(sim_comm_factor(&m, MODEL_ALIGN_PCIE, 0.05), 0.95 + 0.05 * 230 / 25, 1e-12);
    CHECK_NEAR(sim_comm_factor(&m, MODEL_ALIGN_NONE, 0.5), 0.5 + 0.5 * 23, 1e-12);
    CHECK_NEAR(sim_comm_factor(&m, MODEL_ALIGN_UNKNOWN, 0.5), 1.0, 0);   /* nothing known: not slowed */
    CHECK_NEAR(sim_comm_factor(&m, MODEL_ALIGN_NONE, 0), 1.0, 0);        /* nothing to communicate */
    /* worse class, larger factor */
    CHECK(sim_comm_factor(&m, MODEL_ALIGN_NONE, 0.05) > sim_comm_factor(&m, MODEL_ALIGN_NUMA, 0.05));
    CHECK(sim_comm_factor(&m, MODEL_ALIGN_NUMA, 0.05) > sim_comm_factor(&m, MODEL_ALIGN_PCIE, 0.05));
}

/* The shipped comparison (make sim): tessera's topology-aware policies place at most half as
 * many multi-GPU pods on a set worse than their node offers as the FGD paper's fgd and bestfit,
 * which know no topology. (Before binpack and fgd-pack weighed topology they placed 9 each
 * unaligned here against bestfit's and fgd's 12: "fewer" alone did not need topology.) */
TEST(sim_topology_aware_policies_cut_unaligned_placements) {
    char err[512];
    sim_cluster *c = sim_cluster_from_file("data/sim/topo-cluster.json", NULL, err, sizeof err);
    sim_trace *t = c ? sim_trace_from_file("data/sim/topo-trace.json", err, sizeof err) : NULL;
    CHECK_MSG(t, "%s", err);
    static const char *const policies[] = {"bestfit", "fgd", "binpack", "fgd-pack"};
    sim_replay_result r[4];
    for (int i = 0; i < 4; i++) {
        sim_replay_opts o;
        sim_replay_defaults(&o);
        o.policy = policies[i];
        o.frag = false;
        CHECK_MSG(sim_replay(c, t, &o, &r[i], err, sizeof err) == 0, "%s: %s", policies[i], err);
        CHECK_INT(r[i].placed, t->n);
        CHECK(r[i].topo.multi > 50);   /* the trace has enough multi-GPU training to tell */
        /* every node has a topology: no set is unknown (were the links lost, every set would be unknown,
         * nothing unaligned, and the comparison below would hold with 0 <= 0) */
        CHECK_INT(r[i].topo.by_align[MODEL_ALIGN_UNKNOWN], 0);
    }
    for (int paper = 0; paper < 2; paper++)   /* the policies without topology do leave some unaligned */
        CHECK_MSG(r[paper].topo.unaligned >= 6, "%s: %d unaligned", policies[paper], r[paper].topo.unaligned);
    for (int i = 2; i < 4; i++)
        for (int paper = 0; paper < 2; paper++)
            CHECK_MSG(2 * r[i].topo.unaligned <= r[paper].topo.unaligned, "%s: %d unaligned, %s %d", policies[i],
                      r[i].topo.unaligned, policies[paper], r[paper].topo.unaligned);
    for (int i = 0; i < 4; i++) sim_replay_result_free(&r[i]);
    sim_trace_free(t);
    sim_cluster_free(c);
}

/* not inlined: gcc then takes the memstream's buffer for a local that dangles (-Wdangling-pointer) */
__attribute__((noinline)) static char *report(sim_format fmt, const sim_replay_result *r) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    sim_report_replay(f, fmt, r, 1);
    fclose(f);
    return buf;
}

/* The table, JSON and CSV carry the multi-GPU figures, and plan can target them. */
TEST(sim_topology_reports_and_plan_targets) {
    sim_cluster *c = NULL;
    sim_trace *t = NULL;
    sim_replay_result r;
    CHECK(replay_classes("bestfit", &r, &c, &t) == 0);
    char *buf = report(SIM_FMT_JSON, &r);
    cJSON *j = cJSON_Parse(buf);
    CHECK_MSG(j, "JSON does not parse: %s", buf);
    const cJSON *m = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "replays"), 0), "multi_gpu");
    CHECK(m);
    CHECK_INT(cJSON_GetObjectItem(m, "n")->valueint, 7);
    CHECK_INT(cJSON_GetObjectItem(m, "numa")->valueint, 2);
    CHECK_INT(cJSON_GetObjectItem(m, "none")->valueint, 2);
    CHECK_INT(cJSON_GetObjectItem(m, "unknown")->valueint, 1);
    CHECK_INT(cJSON_GetObjectItem(m, "unaligned")->valueint, 1);
    CHECK_NEAR(cJSON_GetObjectItem(m, "comm_extra_gpu_hours")->valuedouble, r.topo.extra_gpu_hours, 1e-3);
    cJSON_Delete(j);
    free(buf);

    buf = report(SIM_FMT_CSV, &r);
    CHECK_CONTAINS(buf, ",multi_gpu,multi_nvlink,multi_pcie,multi_numa,multi_none,multi_unknown,multi_unaligned,");
    const char *row = strstr(buf, "\nbestfit,all,");
    CHECK(row != NULL);
    CHECK_CONTAINS(row, ",7,1,1,2,2,1,1,");   /* multi, then the classes, unaligned */
    free(buf);

    buf = report(SIM_FMT_TABLE, &r);
    CHECK_CONTAINS(buf, "multi-GPU pods by the alignment of their GPUs");
    free(buf);

    sim_target tg;
    char err[256];
    CHECK(sim_target_parse("unaligned==0", &tg, err, sizeof err) == 0);
    CHECK_NEAR(sim_target_measure(&tg, &r), 1, 0);
    CHECK(sim_target_parse("comm.gpu_hours<=1", &tg, err, sizeof err) == 0);
    CHECK_NEAR(sim_target_measure(&tg, &r), r.topo.extra_gpu_hours, 0);
    CHECK(sim_target_parse("aligned<=3", &tg, err, sizeof err) != 0);
    CHECK_CONTAINS(err, "unaligned, comm.gpu_hours");
    sim_replay_result_free(&r);
    sim_trace_free(t);
    sim_cluster_free(c);
}
