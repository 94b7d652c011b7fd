/* test_sim_topology_pairs.c -- the rule that scores an idle DGX 0 for a 2-GPU pod (README, Topology:
 * "Why an idle DGX scores 0 for a 2-GPU pod") checked with tessera-sim's replay on a cluster of
 * both kinds: 2-GPU pods fill the PCIe servers' NVLink pairs first and keep the DGXs whole for
 * the pods only they can serve, and once the PCIe servers are full the next 2-GPU pods are placed
 * on the DGXs at once, by every policy: the 0 ranks nodes, it never keeps a pod off one. */
#include "sim_helpers.h"

#include "policy/policy.h"
#include "sim/replay.h"

/* npcie 8-GPU PCIe servers with NVLink bridges on pairs and ndgx DGX A100s, whole GPUs. */
static sim_cluster *pairs_cluster(int npcie, int ndgx) {
    char json[1024], err[512];
    snprintf(json, sizeof json,
             "{\"nodeGroups\": ["
             "{\"name\": \"pcie8\", \"count\": %d, \"gpuProduct\": \"NVIDIA-A100-80GB-PCIe\", \"gpusPerNode\": 8,"
             " \"cpuMilli\": 128000, \"memoryMiB\": 1048576, \"sharing\": \"whole\", \"topology\": \"pcie8-nvlink-pairs\"},"
             "{\"name\": \"dgx\", \"count\": %d, \"gpuProduct\": \"NVIDIA-A100-SXM4-80GB\", \"gpusPerNode\": 8,"
             " \"cpuMilli\": 256000, \"memoryMiB\": 2097152, \"sharing\": \"whole\", \"topology\": \"dgx-a100\"}]}",
             npcie, ndgx);
    sim_cluster *c = cluster_of(json, err, sizeof err);
    if (!c) fprintf(stdout, "    pairs_cluster: %s\n", err);
    return c;
}

/* pairs 2-GPU pods arriving one a second, then (eight > 0) one 8-GPU pod, all running far past the last
 * arrival: nothing leaves, so a pod that cannot be placed at once waits to the end. */
static sim_trace *pairs_trace(int pairs, bool eight) {
    size_t cap = 256 + 320 * (size_t)(pairs + 1), len = 0;
    char *json = malloc(cap), err[512];
    len += (size_t)snprintf(json + len, cap - len, "{\"workloads\": [");
    for (int i = 0; i < pairs + eight; i++)
        len += (size_t)snprintf(json + len, cap - len,
                                "%s{\"id\": \"w%d\", \"kind\": \"training\", \"arrival\": %d, \"duration\": 100000, "
                                "\"priority\": 100, \"tenant\": \"team-1\", \"gpuUtil\": 0.9, \"pod\": {\"resources\": "
                                "{\"requests\": {\"cpu\": \"8000m\", \"memory\": \"64Gi\", \"nvidia.com/gpu\": \"%d\"}}}}",
                                i ? "," : "", i, 1 + i, i < pairs ? 2 : 8);
    snprintf(json + len, cap - len, "]}");
    sim_trace *t = trace_of(json, err, sizeof err);
    if (!t) fprintf(stdout, "    pairs_trace: %s\n", err);
    free(json);
    return t;
}

/* Replays; how many workloads started the moment they arrived, and the NVLink-aligned multi-GPU pods. */
static int replay_started(const char *pname, const sim_cluster *c, const sim_trace *t, int *nvlink) {
    sim_replay_opts o;
    sim_replay_defaults(&o);
    o.policy = pname;
    o.check = true;
    o.frag = false;
    sim_replay_result r;
    char err[512];
    if (sim_replay(c, t, &o, &r, err, sizeof err) != 0) {
        fprintf(stdout, "    %s: %s\n", pname, err);
        return -1;
    }
    int at_once = 0;
    for (int i = 0; i < t->n; i++) at_once += r.start[i] >= 0 && r.start[i] == t->w[i].arrival;
    *nvlink = r.topo.by_align[MODEL_ALIGN_NVLINK];
    sim_replay_result_free(&r);
    return at_once;
}

/* The PCIe servers fill first: three of them hold twelve 2-GPU pods on their bridged pairs, and the one
 * DGX is still whole for the 8-GPU pod that comes next (binpack and fgd-pack, the policies that pack). */
TEST(sim_topology_pairs_fill_the_pcie_servers_and_keep_the_dgx_whole) {
    sim_cluster *c = pairs_cluster(3, 1);
    sim_trace *t = pairs_trace(12, true);
    CHECK(c && t);
    static const char *const packing[] = {"binpack", "fgd-pack"};
    for (int i = 0; i < 2; i++) {
        int nvlink = 0, at_once = replay_started(packing[i], c, t, &nvlink);
        CHECK_MSG(at_once == 13, "%s: %d of 13 pods started on arrival (the 8-GPU pod needs a whole DGX)", packing[i],
                  at_once);
        CHECK_MSG(nvlink == 13, "%s: %d of 13 multi-GPU pods on NVLink", packing[i], nvlink);
    }
    sim_trace_free(t);
    sim_cluster_free(c);
}

/* Not stranded: three PCIe servers hold twelve pairs; the eight 2-GPU pods after them go to the two DGXs
 * the moment they arrive, whatever the policy (a node that scores 0 is still a node the pod fits). */
TEST(sim_topology_pairs_go_to_the_dgxs_once_the_pcie_servers_are_full) {
    sim_cluster *c = pairs_cluster(3, 2);
    sim_trace *t = pairs_trace(20, false);
    CHECK(c && t);
    for (int i = 0; i < policy_count(); i++) {
        const char *p = policy_name(policy_at(i));
        int nvlink = 0, at_once = replay_started(p, c, t, &nvlink);
        CHECK_MSG(at_once == 20, "%s: %d of 20 2-GPU pods started on arrival (12 fit the PCIe servers, 8 the DGXs)", p,
                  at_once);
        if (strcmp(p, "random") && strcmp(p, "bestfit") && strcmp(p, "dotprod") && strcmp(p, "gpupacking") &&
            strcmp(p, "gpuclustering") && strcmp(p, "fgd"))
            CHECK_MSG(nvlink == 20, "%s: %d of 20 pairs on NVLink", p, nvlink);
    }
    sim_trace_free(t);
    sim_cluster_free(c);
}
