/* test_sim_openb.c -- the openb CSV reader: the built-in copies match data/openb, the
 * cluster totals match sim/fgd-method.md section 8, columns are found by name, and
 * malformed input gets an error naming the line and column. */
#include "harness.h"

#include <stdlib.h>

#include "sim/openb.h"

TEST(sim_openb_builtin_nodes_match_paper) {
    sim_openb_node *v = NULL;
    int n = 0;
    char err[256];
    CHECK_MSG(sim_openb_load_nodes(NULL, &v, &n, err, sizeof err) == 0, "%s", err);
    int64_t cpu = 0;
    for (int i = 0; i < n; i++) cpu += v[i].cpu_milli;
    sim_openb_cluster *c = sim_openb_cluster_new(v, n, err, sizeof err);
    int gpus = c ? c->gpus : -1, nprod = c ? c->nproducts : -1;
    bool track = c && c->nodes[0]->track_host && c->nodes[0]->cpu_milli == v[0].cpu_milli;
    sim_openb_cluster_free(c);
    free(v);
    CHECK_INT(n, 1213);
    CHECK_INT(gpus, 6212);
    CHECK_INT(cpu, 107018000);
    CHECK_INT(nprod, 7);   /* A10 G2 G3 P100 T4 V100M16 V100M32 */
    CHECK(track);
}

TEST(sim_openb_builtin_pods_equal_file) {
    sim_openb_pod *a = NULL, *b = NULL;
    int na = 0, nb = 0;
    char err[256];
    CHECK_MSG(sim_openb_load_pod_list(NULL, "default", &a, &na, err, sizeof err) == 0, "%s", err);
    int rc = sim_openb_load_pod_list("data/openb", "default", &b, &nb, err, sizeof err);
    bool same = rc == 0 && na == nb && !memcmp(a, b, (size_t)na * sizeof *a);
    int64_t milli = 0;
    for (int i = 0; i < na; i++) milli += sim_openb_pod_gpu_milli(&a[i]);
    free(a);
    free(b);
    CHECK_MSG(rc == 0, "%s (run from the repo root)", err);
    CHECK_INT(na, 8152);
    CHECK(same);
    /* the default list asks for about 98 % of the 6,212 GPUs (sim/fgd-method.md section 4) */
    CHECK_MSG(milli > 6000000 && milli < 6150000, "default list asks for %lld milli-GPU", (long long)milli);
}

TEST(sim_openb_columns_by_name) {
    sim_openb_pod *p = NULL;
    int n = 0;
    char err[256];
    /* the multigpu lists have no gpu_spec and no time columns */
    CHECK_MSG(sim_openb_load_pod_list("data/openb", "multigpu50", &p, &n, err, sizeof err) == 0, "%s", err);
    bool ok = n > 1000 && !p[0].gpu_spec[0] && !p[0].has_times;
    free(p);
    CHECK(ok);
    const char *txt = "gpu_milli,num_gpu,name,memory_mib,cpu_milli\r\n500,1,a,1024,2000\r\n\r\n0,0,b,1,1\n";
    CHECK_MSG(sim_openb_parse_pods(txt, strlen(txt), &p, &n, err, sizeof err) == 0, "%s", err);
    model_request r0, r1;
    sim_openb_request(&p[0], &r0);
    sim_openb_request(&p[1], &r1);
    free(p);
    CHECK_INT(n, 2);
    CHECK_INT(r0.kind, MODEL_REQ_FRACTION);
    CHECK_INT(r0.compute_permille, 500);
    CHECK_INT(r0.cpu_milli, 2000);
    CHECK_INT(r0.memory_bytes, 1024LL << 20);
    CHECK_INT(r1.kind, MODEL_REQ_NONE);
}

TEST(sim_openb_requests) {
    sim_openb_pod p;
    memset(&p, 0, sizeof p);
    p.num_gpu = 4;
    p.gpu_milli = 1000;
    snprintf(p.gpu_spec, sizeof p.gpu_spec, "V100M16||V100M32");
    model_request r;
    sim_openb_request(&p, &r);
    CHECK_INT(r.kind, MODEL_REQ_WHOLE);
    CHECK_INT(r.count, 4);
    CHECK_INT(r.nmodels, 2);
    CHECK_STR(r.models[1], "V100M32");
    CHECK_INT(sim_openb_pod_gpu_milli(&p), 4000);
}

static void bad_pods(const char *txt, const char *want) {
    sim_openb_pod *p = (sim_openb_pod *)1;
    int n = 7;
    char err[256] = "";
    int rc = sim_openb_parse_pods(txt, strlen(txt), &p, &n, err, sizeof err);
    CHECK_MSG(rc == -1 && p == NULL && n == 0, "accepted: %s", txt);
    CHECK_CONTAINS(err, want);
}

#define HDR "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
TEST(sim_openb_bad_pods) {
    bad_pods("", "CSV header");
    bad_pods("name,cpu_milli,memory_mib,num_gpu\n", "no column \"gpu_milli\"");
    bad_pods(HDR, "no pods");
    bad_pods(HDR "a,1,1,1,500\n", "line 2: 5 fields");
    bad_pods(HDR "a,x,1,1,500,\n", "line 2: cpu_milli");
    bad_pods(HDR "a,1,1,1,500,\nb,-4,1,1,500,\n", "line 3: cpu_milli");
    bad_pods(HDR "a,1,1,17,1000,\n", "num_gpu");
    bad_pods(HDR "a,1,1,1,1001,\n", "gpu_milli");
    bad_pods(HDR "a,1,1,0,300,\n", "num_gpu 0");
    bad_pods(HDR "a,1,1,2,500,\n", "several GPUs are whole");
    bad_pods(HDR "a,1,1,1,0,\n", "must be 1..1000");
    bad_pods(HDR ",1,1,1,10,\n", "name");
    bad_pods(HDR "a,1,1,1,10,A|B|C|D|E|F|G|H|I\n", "gpu_spec");
    bad_pods(HDR "a,1,1,1,10,,x,y,z\n", "line 2: 9 fields");
    bad_pods(HDR "a,1,1,1,10,,,,,,,,,,,,,,,,,,,,,\n", "line 2: more than 16 fields");
    bad_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time,scheduled_time\n"
             "a,1,1,1,10,5,x,1\n", "deletion_time");
}

TEST(sim_openb_bad_nodes) {
    static const struct { const char *txt, *want; } cases[] = {
        {"sn,cpu_milli,memory_mib,gpu\n", "no column \"model\""},
        {"sn,cpu_milli,memory_mib,gpu,model\n", "no nodes"},
        {"sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,17,T4\n", "line 2: gpu"},
        {"sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,2,\n", "model"},
        {"sn,cpu_milli,memory_mib,gpu,model\nn1,1,1e3,2,T4\n", "memory_mib"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sim_openb_node *v = NULL;
        int n = 0;
        char err[256] = "";
        CHECK_INT(sim_openb_parse_nodes(cases[i].txt, strlen(cases[i].txt), &v, &n, err, sizeof err), -1);
        CHECK(v == NULL);
        CHECK_CONTAINS(err, cases[i].want);
    }
    sim_openb_node *v = NULL;
    int n = 0;
    char err[256] = "";
    CHECK_INT(sim_openb_load_nodes("data/openb/no-such.csv", &v, &n, err, sizeof err), -1);
    CHECK_CONTAINS(err, "data/openb/no-such.csv");
    CHECK_INT(sim_openb_load_pod_list(NULL, "cpu050", (sim_openb_pod **)&v, &n, err, sizeof err), -1);
    CHECK_CONTAINS(err, "--data");
    CHECK_INT(sim_openb_load_pod_list("data/openb", "../x", (sim_openb_pod **)&v, &n, err, sizeof err), -1);
    CHECK_CONTAINS(err, "short name");
}
