/* test_sim_trace.c -- trace JSON: pods read by the model exactly as the extender reads
 * them, shapes shared, clear errors naming the workload and field, and a round trip. */
#include "sim_helpers.h"

#include "sim/gen.h"

TEST(sim_trace_demo_loads_with_shared_shapes) {
    char err[512];
    sim_trace *t = sim_trace_from_json((const char *)sim_demo_sim_trace_json, sim_demo_sim_trace_json_len, err,
                                       sizeof err);
    CHECK_MSG(t, "%s", err);
    CHECK_INT(t->n, 300);
    CHECK(t->nshapes >= 4 && t->nshapes <= 12);   /* gen.c's size options, not one per workload */
    int kinds[SIM_NKINDS] = {0};
    for (int i = 0; i < t->n; i++) {
        kinds[t->w[i].kind]++;
        CHECK(t->w[i].duration > 0);
        CHECK(t->w[i].util >= 0 && t->w[i].util <= 1);
        if (i) CHECK(t->w[i].arrival >= t->w[i - 1].arrival);
    }
    for (int k = 0; k < SIM_NKINDS; k++) CHECK(kinds[k] > 0);
    sim_trace_free(t);
}

TEST(sim_trace_pod_forms_go_through_the_model) {
    char err[512];
    sim_trace *t = trace_of(
        "{\"workloads\": ["
        "{\"id\": \"a\", \"kind\": \"training\", \"arrival\": 0, \"duration\": 60,"
        " \"pod\": {\"resources\": {\"limits\": {\"nvidia.com/gpu\": \"2\"}}}},"
        "{\"id\": \"b\", \"kind\": \"inference\", \"arrival\": 1, \"duration\": 60, \"priority\": 7, \"tenant\": \"x\","
        " \"gpuUtil\": 0.25, \"pod\": {\"resources\": {\"requests\": {\"nvidia.com/mig-3g.40gb\": \"1\"}}}},"
        "{\"id\": \"c\", \"kind\": \"notebook\", \"arrival\": 2, \"duration\": 60,"
        " \"pod\": {\"annotations\": {\"gpu-fraction\": \"0.5\"}}},"
        "{\"id\": \"d\", \"kind\": \"batch\", \"arrival\": 3, \"duration\": 60,"
        " \"pod\": {\"spec\": {\"containers\": [{\"name\": \"m\", \"resources\": {\"requests\": {\"nvidia.com/gpumem\": \"20000\"}}}]}}},"
        "{\"id\": \"e\", \"kind\": \"training\", \"arrival\": 4, \"duration\": 60,"
        " \"pod\": {\"resources\": {\"limits\": {\"nvidia.com/gpu\": \"2\"}}}}]}",
        err, sizeof err);
    CHECK_MSG(t, "%s", err);
    CHECK_INT(t->n, 5);
    CHECK_INT(t->nshapes, 4);   /* a and e share one */
    CHECK_INT(t->w[0].shape, t->w[4].shape);
    const model_request *r = &t->shapes[t->w[0].shape].req;
    CHECK_INT(r->kind, MODEL_REQ_WHOLE);
    CHECK_INT(r->count, 2);   /* a limit without a request counts as the request */
    CHECK_INT(t->shapes[t->w[1].shape].req.kind, MODEL_REQ_MIG);
    CHECK_STR(t->shapes[t->w[1].shape].req.mig_profile, "3g.40gb");
    CHECK_INT(t->shapes[t->w[2].shape].req.kind, MODEL_REQ_FRACTION);
    CHECK_INT(t->shapes[t->w[3].shape].req.memory_mib, 20000);
    CHECK_INT(t->w[1].priority, 7);
    CHECK_STR(t->tenants[t->w[1].tenant], "x");
    CHECK_STR(t->tenants[t->w[0].tenant], "default");
    CHECK_NEAR(t->w[0].util, 1.0, 1e-6);   /* default: busy */
    CHECK_STR(sim_trace_id(t, 3), "d");
    sim_trace_free(t);
}

static void expect_error(const char *workload, const char *needle) {
    char json[1024], err[512] = "";
    snprintf(json, sizeof json, "{\"workloads\": [%s]}", workload);
    sim_trace *t = trace_of(json, err, sizeof err);
    CHECK_REFUSED(t != NULL, workload, err, needle);
    sim_trace_free(t);
}

#define W(extra) "{\"id\": \"a\", \"kind\": \"training\", \"arrival\": 0, \"duration\": 60" extra "}"
#define POD ", \"pod\": {\"resources\": {\"requests\": {\"nvidia.com/gpu\": \"1\"}}}"

TEST(sim_trace_errors_name_the_field) {
    char err[256];
    CHECK(!trace_of("{\"workloads\": [", err, sizeof err));
    CHECK_CONTAINS(err, "malformed JSON");
    CHECK(!trace_of("[]", err, sizeof err));
    CHECK_CONTAINS(err, "\"workloads\" array");
    expect_error("{\"id\": \"a\", \"kind\": \"serving\", \"arrival\": 0, \"duration\": 60" POD "}",
                 "workloads[0].kind: \"serving\" is not one of training, inference, notebook, batch");
    expect_error(W(POD ", \"gpuUtil\": 1.5"), "workloads[0].gpuUtil: expected a number in [0, 1]");
    expect_error("{\"id\": \"a\", \"kind\": \"training\", \"arrival\": 0, \"duration\": 0" POD "}",
                 "workloads[0].duration: must be > 0");
    expect_error("{\"id\": \"a\", \"kind\": \"training\", \"arrival\": -1, \"duration\": 5" POD "}",
                 "workloads[0].arrival");
    expect_error(W(""), "workloads[0].pod: missing");
    expect_error(W(POD ", \"prio\": 1"), "workloads[0]: unknown key \"prio\"");
    expect_error(W(POD ", \"priority\": 1.5"), "workloads[0].priority: expected a whole number");
    expect_error(W(", \"pod\": {\"resources\": {\"requests\": {\"nvidia.com/gpu\": \"500m\"}}}"),
                 "workloads[0].pod: ");
    expect_error(W(", \"pod\": {\"resources\": {\"requests\": {\"nvidia.com/gpu\": \"500m\"}}}"), "nvidia.com/gpu");
    expect_error(W(", \"pod\": {\"annotations\": {\"tessera.io/gpu-fraction\": \"1.5\"}}"), "gpu-fraction");
    expect_error(W(", \"pod\": {\"resource\": {}}"), "workloads[0].pod: pod: unknown key \"resource\"");
    expect_error(W(", \"pod\": 3"), "workloads[0].pod: expected an object");
}

/* t written by sim_trace_write and read back (NULL with err). */
static sim_trace *written_and_read(const sim_trace *t, char *err, size_t errlen) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    int rc = sim_trace_write(t, f);
    fclose(f);
    sim_trace *b = rc == 0 ? sim_trace_from_json(buf, len, err, errlen) : NULL;
    if (rc != 0) snprintf(err, errlen, "sim_trace_write failed");
    free(buf);
    return b;
}

TEST(sim_trace_write_read_round_trip) {
    sim_gen_opts o;
    sim_gen_defaults(&o);
    o.workloads = 200;
    char err[512];
    sim_trace *a = sim_gen(&o, err, sizeof err);
    CHECK_MSG(a, "%s", err);
    sim_trace *b = written_and_read(a, err, sizeof err);
    CHECK_MSG(b, "%s", err);
    CHECK_INT(b->n, a->n);
    CHECK_INT(b->nshapes, a->nshapes);
    for (int i = 0; i < a->n; i++) {
        CHECK_STR(sim_trace_id(b, i), sim_trace_id(a, i));
        CHECK_NEAR(b->w[i].arrival, a->w[i].arrival, 1e-9);
        CHECK_NEAR(b->w[i].duration, a->w[i].duration, 1e-9);
        CHECK_NEAR(b->w[i].util, a->w[i].util, 1e-6);
        CHECK_INT(b->w[i].kind, a->w[i].kind);
        CHECK_INT(b->w[i].priority, a->w[i].priority);
        CHECK(!memcmp(&b->shapes[b->w[i].shape].req, &a->shapes[a->w[i].shape].req, sizeof(model_request)));
    }
    sim_trace_free(a);
    sim_trace_free(b);
}

/* The reader walks the text to each workload (sim/trace.c): strings holding brackets and
 * quotes, empty lists and every kind of malformed framing around the workloads. */
TEST(sim_trace_reader_framing) {
    char err[256] = "";
    sim_trace *t = trace_of("{\"description\": \"brackets ] } [ { and \\\"quotes\\\" \", \"workloads\": [" W(POD)
                            " , " W(POD) "],\n \"$schema\": \"x\"}\n",
                            err, sizeof err);
    int n = t ? t->n : -1;
    sim_trace_free(t);
    CHECK_MSG(n == 2, "two workloads around tricky strings: n=%d err=%s", n, err);
    t = trace_of("{\"workloads\": []}", err, sizeof err);
    n = t ? t->n : -1;
    sim_trace_free(t);
    CHECK_MSG(n == 0, "empty list: n=%d err=%s", n, err);
    static const struct { const char *json, *needle; } bad[] = {
        {"{\"workloads\": [" W(POD) "]} x", "malformed JSON"},
        {"{\"workloads\": [" W(POD) ",]}", "malformed JSON"},
        {"{\"workloads\": [" W(POD) "] , \"extra\": 1}", "unknown key \"extra\""},
        {"{\"workloads\": 5}", "\"workloads\" array"},
        {"{\"description\": \"no workloads\"}", "\"workloads\" array"},
        {"{\"workloads\": [" W(POD), "malformed JSON"},
        {"{\"workloads\": [{\"id\": \"a\" \"kind\": 1}]}", "malformed JSON"},
        {"", "malformed JSON"},
        {"   ", "malformed JSON"},
        {"{\"workloads\" [" W(POD) "]}", "malformed JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        t = trace_of(bad[i].json, err, sizeof err);
        bool refused = t == NULL;
        sim_trace_free(t);
        CHECK_MSG(refused && strstr(err, bad[i].needle), "case %zu (%s): %s", i, bad[i].json, refused ? err : "accepted");
    }
}

/* MPS shares in traces: the pod part's securityContext is the pod's (its uid), memBandwidth is read
 * strictly and written back, and a bad MPS pod fails with the model's message. */
TEST(sim_trace_mps_shares_and_memory_bandwidth) {
    char err[512];
    sim_trace *t = trace_of(
        "{\"workloads\": ["
        "{\"id\": \"a\", \"kind\": \"inference\", \"arrival\": 0, \"duration\": 60, \"gpuUtil\": 0.3, \"memBandwidth\": 0.7,"
        " \"pod\": {\"annotations\": {\"tessera.io/gpu-fraction\": \"0.25\", \"tessera.io/compute-sharing\": \"mps\"},"
        " \"securityContext\": {\"runAsUser\": 1000}}},"
        "{\"id\": \"b\", \"kind\": \"inference\", \"arrival\": 1, \"duration\": 60,"
        " \"pod\": {\"annotations\": {\"tessera.io/gpu-fraction\": \"0.25\"}}}]}",
        err, sizeof err);
    CHECK_MSG(t, "%s", err);
    const model_request *r = &t->shapes[t->w[0].shape].req;
    CHECK_INT(r->compute_sharing, MODEL_COMPUTE_MPS);
    CHECK_INT(r->run_as_uid, 1000);
    CHECK(t->w[0].bw_given);
    CHECK_NEAR(t->w[0].mem_bw, 0.7, 1e-6);
    CHECK(!t->w[1].bw_given);
    CHECK_INT(t->shapes[t->w[1].shape].req.compute_sharing, MODEL_COMPUTE_TIMESLICE);
    sim_trace *b = written_and_read(t, err, sizeof err);
    CHECK_MSG(b, "%s", err);
    CHECK(b->w[0].bw_given && !b->w[1].bw_given);
    CHECK_NEAR(b->w[0].mem_bw, 0.7, 1e-6);
    CHECK(!memcmp(&b->shapes[b->w[0].shape].req, r, sizeof *r));
    sim_trace_free(b);
    sim_trace_free(t);
    expect_error(W(POD ", \"memBandwidth\": 2"), "workloads[0].memBandwidth: expected a number in [0, 1]");
    expect_error(W(", \"pod\": {\"annotations\": {\"tessera.io/gpu-fraction\": \"0.5\", \"tessera.io/compute-sharing\": \"mps\"}}"),
                 "mps needs the uid the pod's CUDA processes run as");
    expect_error(W(", \"pod\": {\"annotations\": {\"tessera.io/gpu-fraction\": \"0.5\"}, \"securityContext\": {\"runAsUser\": \"x\"}}"),
                 "spec.securityContext.runAsUser: expected a uid");
}

/* --compute-sharing: the soft shares of a trace rewritten, through the model again. A fraction with
 * isolation any becomes an MPS share without it; one that cannot be a soft share (isolation mig, a
 * replica, whole GPUs) stays as it is; mps:tenant gives each tenant its own uid; timeslice undoes it. */
TEST(sim_trace_compute_sharing_rewrites_soft_shares) {
    char err[512];
    sim_trace *t = trace_of(
        "{\"workloads\": ["
        "{\"id\": \"a\", \"kind\": \"inference\", \"arrival\": 0, \"duration\": 60, \"tenant\": \"x\","
        " \"pod\": {\"annotations\": {\"tessera.io/gpu-fraction\": \"0.25\", \"tessera.io/isolation\": \"any\"}}},"
        "{\"id\": \"b\", \"kind\": \"inference\", \"arrival\": 1, \"duration\": 60, \"tenant\": \"y\","
        " \"pod\": {\"annotations\": {\"tessera.io/gpu-fraction\": \"0.25\", \"tessera.io/isolation\": \"any\"}}},"
        "{\"id\": \"c\", \"kind\": \"inference\", \"arrival\": 2, \"duration\": 60, \"tenant\": \"y\","
        " \"pod\": {\"annotations\": {\"tessera.io/gpu-fraction\": \"0.25\", \"tessera.io/isolation\": \"mig\"}}},"
        "{\"id\": \"d\", \"kind\": \"training\", \"arrival\": 3, \"duration\": 60,"
        " \"pod\": {\"resources\": {\"requests\": {\"nvidia.com/gpu\": \"1\"}}}},"
        "{\"id\": \"e\", \"kind\": \"batch\", \"arrival\": 4, \"duration\": 60, \"tenant\": \"x\", \"memBandwidth\": 0.5,"
        " \"pod\": {\"spec\": {\"securityContext\": {\"runAsUser\": 5}, \"containers\": [{\"name\": \"m\","
        " \"securityContext\": {\"runAsUser\": 6}, \"resources\": {\"requests\": {\"nvidia.com/gpumem\": \"8192\"}}}]}}}]}",
        err, sizeof err);
    CHECK_MSG(t, "%s", err);
    sim_trace *one = sim_trace_compute_sharing(t, SIM_COMPUTE_MPS, err, sizeof err);
    sim_trace *per = sim_trace_compute_sharing(t, SIM_COMPUTE_MPS_TENANT, err, sizeof err);
    CHECK_MSG(one && per, "%s", err);
    sim_trace *back = sim_trace_compute_sharing(per, SIM_COMPUTE_TIMESLICE, err, sizeof err);
    CHECK_MSG(back, "%s", err);
    const model_request *a = &one->shapes[one->w[0].shape].req, *b = &one->shapes[one->w[1].shape].req;
    CHECK_INT(a->compute_sharing, MODEL_COMPUTE_MPS);
    CHECK_INT(a->isolation, MODEL_ISO_DEFAULT);
    CHECK_INT(a->run_as_uid, SIM_MPS_UID);
    CHECK_INT(one->w[0].shape, one->w[1].shape);   /* one uid: one shape */
    CHECK(model_request_same(a, b));
    CHECK_INT(one->shapes[one->w[2].shape].req.compute_sharing, MODEL_COMPUTE_TIMESLICE);   /* MIG-mapped */
    CHECK_INT(one->shapes[one->w[2].shape].req.isolation, MODEL_ISO_MIG);
    CHECK_INT(one->shapes[one->w[3].shape].req.kind, MODEL_REQ_WHOLE);
    const model_request *e = &one->shapes[one->w[4].shape].req;   /* a whole Pod: the container's uid replaced too */
    CHECK_INT(e->compute_sharing, MODEL_COMPUTE_MPS);
    CHECK_INT(e->run_as_uid, SIM_MPS_UID);
    /* per tenant: x and y are told apart, x's two shares agree */
    int ux = (int)per->shapes[per->w[0].shape].req.run_as_uid, uy = (int)per->shapes[per->w[1].shape].req.run_as_uid;
    CHECK(ux != uy);
    CHECK_INT(per->shapes[per->w[4].shape].req.run_as_uid, ux);
    CHECK_STR(per->tenants[per->w[1].tenant], "y");
    /* everything else of the workloads is kept */
    for (int i = 0; i < t->n; i++) {
        CHECK_STR(sim_trace_id(per, i), sim_trace_id(t, i));
        CHECK_NEAR(per->w[i].arrival, t->w[i].arrival, 0);
        CHECK_INT(per->w[i].bw_given, t->w[i].bw_given);
        CHECK_INT(back->shapes[back->w[i].shape].req.compute_sharing, MODEL_COMPUTE_TIMESLICE);
    }
    sim_compute c;
    CHECK(sim_compute_parse("mps:tenant", &c, err, sizeof err) == 0 && c == SIM_COMPUTE_MPS_TENANT);
    CHECK(sim_compute_parse("MPS", &c, err, sizeof err) != 0);
    CHECK_CONTAINS(err, "is not one of trace, timeslice, mps, mps:tenant");
    sim_trace_free(back);
    sim_trace_free(per);
    sim_trace_free(one);
    sim_trace_free(t);
}
