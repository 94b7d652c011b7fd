/* test_node_agent_topology.c -- the tessera.io/gpus annotation the node agent builds (agent/topology.h), from a
 * hand-made NVML view: the link names, the merge with an existing annotation (mig, memory_mib, product kept;
 * matched by uuid), and the refusals (a MIG GPU without "mig", an existing value that is not an array), NUMA from
 * a sysfs tree. The three fake-NVML servers end to end are in test_node_agent.c. */
#include "harness.h"

#include "agent/topology.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Two GPUs on one PCIe switch, no NVLink; bus ids 3B and 5E. */
static void two_gpus(agent_gpus *g) {
    memset(g, 0, sizeof *g);
    g->n = 2;
    for (int i = 0; i < 2; i++) {
        snprintf(g->gpu[i].uuid, sizeof g->gpu[i].uuid, "GPU-aaaa000%d", i);
        snprintf(g->gpu[i].pci, sizeof g->gpu[i].pci, "00000000:%s:00.0", i ? "5E" : "3B");
        g->gpu[i].pcie[0] = g->gpu[i].pcie[1] = AGENT_PCIE_SINGLE;
    }
}

TEST(node_agent_topology_pcie_levels_and_nvlink_counts) {
    agent_gpus g;
    two_gpus(&g);
    char err[512];
    char *s = agent_topology_json(&g, "/nonexistent", NULL, err, sizeof err);
    CHECK_STR(s, "[{\"index\":0,\"uuid\":\"GPU-aaaa0000\",\"pci\":\"00000000:3B:00.0\",\"nvlink\":[],\"topo\":[\"X\",\"PIX\"]},"
                 "{\"index\":1,\"uuid\":\"GPU-aaaa0001\",\"pci\":\"00000000:5E:00.0\",\"nvlink\":[],\"topo\":[\"PIX\",\"X\"]}]");
    free(s);
    /* nvidia-smi's names for every level; INTERNAL (one board) is PIX */
    static const struct { int level; const char *name; } lv[] = {
        {AGENT_PCIE_INTERNAL, "PIX"}, {AGENT_PCIE_SINGLE, "PIX"}, {AGENT_PCIE_MULTIPLE, "PXB"},
        {AGENT_PCIE_HOSTBRIDGE, "PHB"}, {AGENT_PCIE_NODE, "NODE"}, {AGENT_PCIE_SYSTEM, "SYS"}};
    for (size_t i = 0; i < sizeof lv / sizeof lv[0]; i++) CHECK_STR(agent_pcie_name(lv[i].level), lv[i].name);
    /* the two directions disagree: the worse is published, so topo stays symmetric */
    g.gpu[0].pcie[1] = AGENT_PCIE_SINGLE;
    g.gpu[1].pcie[0] = AGENT_PCIE_NODE;
    s = agent_topology_json(&g, "/nonexistent", NULL, err, sizeof err);
    CHECK(s && strstr(s, "\"topo\":[\"X\",\"NODE\"]") && strstr(s, "\"topo\":[\"NODE\",\"X\"]"));
    free(s);
    /* straight links seen from both ends count once; switch links add the smaller side's count */
    g.gpu[0].nvlinks[1] = 4;
    g.gpu[1].nvlinks[0] = 4;
    s = agent_topology_json(&g, "/nonexistent", NULL, err, sizeof err);
    CHECK(s && strstr(s, "\"nvlink\":[1],\"topo\":[\"X\",\"NV4\"]") && strstr(s, "\"nvlink\":[0],\"topo\":[\"NV4\",\"X\"]"));
    free(s);
    memset(g.gpu[0].nvlinks, 0, sizeof g.gpu[0].nvlinks);
    memset(g.gpu[1].nvlinks, 0, sizeof g.gpu[1].nvlinks);
    g.gpu[0].switch_links = 18;
    g.gpu[1].switch_links = 12;
    s = agent_topology_json(&g, "/nonexistent", NULL, err, sizeof err);
    CHECK(s && strstr(s, "\"topo\":[\"X\",\"NV12\"]"));
    free(s);
    /* one GPU on the fabric, the other not: no NVLink between them */
    g.gpu[1].switch_links = 0;
    s = agent_topology_json(&g, "/nonexistent", NULL, err, sizeof err);
    CHECK(s && strstr(s, "\"nvlink\":[],\"topo\":[\"X\",\"NODE\"]"));
    free(s);
}

TEST(node_agent_topology_keeps_operator_keys) {
    agent_gpus g;
    two_gpus(&g);
    g.gpu[1].mig_enabled = 1;
    /* entries in the other order, matched by uuid; stale owned keys replaced; mig, memory_mib, product and
     * mig_dynamic kept in their order; an entry for a GPU NVML no longer reports dropped */
    const char *existing =
        "[{\"uuid\":\"GPU-aaaa0001\",\"index\":0,\"numa\":7,\"nvlink\":[0],\"memory_mib\":40960,"
        "\"mig\":[{\"profile\":\"3g.20gb\",\"start\":4}],\"mig_dynamic\":true},"
        "{\"uuid\":\"GPU-aaaa0000\",\"product\":\"NVIDIA-A100-SXM4-40GB\",\"memory_mib\":40960},"
        "{\"uuid\":\"GPU-gone\",\"memory_mib\":1}]";
    char err[512];
    char *s = agent_topology_json(&g, "/nonexistent", existing, err, sizeof err);
    CHECK_STR(s, "[{\"index\":0,\"uuid\":\"GPU-aaaa0000\",\"pci\":\"00000000:3B:00.0\",\"nvlink\":[],\"topo\":[\"X\",\"PIX\"],"
                 "\"product\":\"NVIDIA-A100-SXM4-40GB\",\"memory_mib\":40960},"
                 "{\"index\":1,\"uuid\":\"GPU-aaaa0001\",\"pci\":\"00000000:5E:00.0\",\"nvlink\":[],\"topo\":[\"PIX\",\"X\"],"
                 "\"memory_mib\":40960,\"mig\":[{\"profile\":\"3g.20gb\",\"start\":4}],\"mig_dynamic\":true}]");
    /* the same input gives the same bytes (the agent compares before it writes) */
    char *again = agent_topology_json(&g, "/nonexistent", existing, err, sizeof err);
    CHECK_STR(again, s);
    free(again);
    /* its own output merged again is a fixed point */
    again = agent_topology_json(&g, "/nonexistent", s, err, sizeof err);
    CHECK_STR(again, s);
    free(again);
    free(s);
    /* entries without uuid are matched by position */
    s = agent_topology_json(&g, "/nonexistent", "[{\"memory_mib\":1},{\"mig\":[]}]", err, sizeof err);
    CHECK(s && strstr(s, "\"topo\":[\"X\",\"PIX\"],\"memory_mib\":1}") && strstr(s, "\"topo\":[\"PIX\",\"X\"],\"mig\":[]}"));
    free(s);
}

TEST(node_agent_topology_refusals) {
    agent_gpus g;
    two_gpus(&g);
    g.gpu[1].mig_enabled = 1;
    char err[512] = "";
    /* a MIG GPU needs its "mig" list and NVML's view does not give it */
    CHECK(agent_topology_json(&g, "/nonexistent", NULL, err, sizeof err) == NULL);
    CHECK(strstr(err, "GPU 1 (GPU-aaaa0001) has MIG enabled") && strstr(err, "\"mig\""));
    err[0] = 0;
    CHECK(agent_topology_json(&g, "/nonexistent", "[{\"uuid\":\"GPU-aaaa0001\",\"memory_mib\":1}]", err, sizeof err) == NULL);
    CHECK(strstr(err, "MIG enabled"));
    /* an operator's malformed value is not overwritten */
    g.gpu[1].mig_enabled = 0;
    static const char *const bad[] = {"{\"index\":0}", "[1,2]", "not json", "[{\"index\":0},\"x\"]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        CHECK(agent_topology_json(&g, "/nonexistent", bad[i], err, sizeof err) == NULL);
        CHECK(strstr(err, "not a JSON array of objects"));
    }
    /* "" is no annotation */
    char *s = agent_topology_json(&g, "/nonexistent", "", err, sizeof err);
    CHECK(s != NULL);
    free(s);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

TEST(node_agent_topology_numa_from_sysfs) {
    char root[] = "/tmp/tessera-sysfs-XXXXXX";
    CHECK(mkdtemp(root) != NULL);
    char p[512];
    snprintf(p, sizeof p, "%s/bus", root);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/bus/pci", root);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/bus/pci/devices", root);
    mkdir(p, 0755);
    /* sysfs: 4-digit domain, lower case; NVML: 8 digits, upper case */
    snprintf(p, sizeof p, "%s/bus/pci/devices/0000:3b:00.0", root);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/bus/pci/devices/0000:3b:00.0/numa_node", root);
    write_file(p, "1\n");
    snprintf(p, sizeof p, "%s/bus/pci/devices/0000:5e:00.0", root);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/bus/pci/devices/0000:5e:00.0/numa_node", root);
    write_file(p, "-1\n");
    CHECK_INT(agent_sysfs_numa(root, "00000000:3B:00.0"), 1);
    CHECK_INT(agent_sysfs_numa(root, "00000000:5E:00.0"), -1);   /* -1: unknown */
    CHECK_INT(agent_sysfs_numa(root, "00000000:99:00.0"), -1);   /* no such device */
    CHECK_INT(agent_sysfs_numa(root, "garbage"), -1);
    agent_gpus g;
    two_gpus(&g);
    char err[256];
    char *s = agent_topology_json(&g, root, NULL, err, sizeof err);
    CHECK(s && strstr(s, "\"pci\":\"00000000:3B:00.0\",\"numa\":1,\"nvlink\"") &&
          strstr(s, "\"pci\":\"00000000:5E:00.0\",\"nvlink\""));
    free(s);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    CHECK(system(cmd) == 0);
}
