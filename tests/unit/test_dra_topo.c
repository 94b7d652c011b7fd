/* test_dra_topo.c -- claims' constraints (spec.devices.constraints: matchAttribute, distinctAttribute) and the
 * topology of DRA nodes, on NVIDIA's driver v0.4.0 fixtures (tests/fixtures/dra/, sources in its README):
 * dra-p8 is the reference pcie8-nvlink-pairs server published through DRA, GPUs 0-3 under PCIe root
 * pci0000:17 and 4-7 under pci0000:97.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "model_helpers.h"
#include "model/dra.h"
#include "model/fit.h"
#include "model/node.h"
#include "model/topo.h"
#include "policy/policy.h"

static cJSON *fx(const char *name) { return dra_fixture(name); }

/* dra-p8 built as the extender and the simulator build a DRA node: its Node object, then its slice's devices;
 * edit (may be NULL) changes the slice first. */
/* The model of Node object no with the devices of slice so merged. */
static model_node *node_of(const cJSON *no, const cJSON *so) {
    char err[256];
    model_node *m = model_node_from_json(no, NULL, err, sizeof err);
    model_dra_slice s;
    if (m && model_dra_slice_parse(so, &s, err, sizeof err) == 0) {
        const model_dra_slice *sp = &s;
        model_dra_merge_slices(m, &sp, 1, NULL);
        model_dra_slice_clear(&s);
    }
    return m;
}

static model_node *p8_node(void (*edit)(cJSON *slice)) {
    cJSON *no = fx("node-dra-p8.json"), *so = fx("slice-dra-p8.json");
    if (edit) edit(so);
    model_node *m = node_of(no, so);
    cJSON_Delete(no);
    cJSON_Delete(so);
    return m;
}

/* The position in m->gpus of device gpu-<minor>. */
static int pos_of(const model_node *m, int minor) {
    for (int i = 0; i < m->ngpus; i++)
        if (m->gpus[i].index == minor) return i;
    return -1;
}

/* Device gpu-<minor> held by a claim, as an allocated claim is accounted. */
static void take(model_node *m, int minor, const char *uid) {
    model_assignment a;
    memset(&a, 0, sizeof a);
    a.ngrants = 1;
    a.grant[0] = (model_grant){.gpu = (int8_t)pos_of(m, minor), .mig_inst = -1, .mig_profile = -1, .mig_start = -1,
                               .exclusive = true, .replica = -1, .memory_mib = m->gpus[pos_of(m, minor)].memory_mib,
                               .compute_permille = 1000};
    char err[256];
    CHECK_MSG(model_assign(m, uid, &a, err, sizeof err) == 0, "%s", err);
}

/* The chart's DeviceClasses (user: model_dra_chart_classes()). */
static const cJSON *chart_class(void *user, const char *name) { return cJSON_GetObjectItem(user, name); }

/* A claim spec of count whole GPUs of class gpu.nvidia.com (request "gpu") with the constraints given as JSON
 * ("" for none), judged. */
static model_dra_verdict claim(int count, const char *constraints, model_request *r, char *why, size_t whylen) {
    char spec[1024];
    snprintf(spec, sizeof spec, "{\"devices\":{\"requests\":[{\"name\":\"gpu\",\"exactly\":{\"deviceClassName\":"
             "\"gpu.nvidia.com\",\"count\":%d}}]%s%s}}", count, constraints[0] ? ",\"constraints\":" : "", constraints);
    cJSON *s = cJSON_Parse(spec), *cl = model_dra_chart_classes();
    memset(r, 0, sizeof *r);
    model_dra_verdict v = model_dra_request(s, chart_class, cl, r, why, whylen);
    cJSON_Delete(s);
    cJSON_Delete(cl);
    return v;
}

#define SAME_ROOT "[{\"matchAttribute\":\"resource.kubernetes.io/pcieRoot\"}]"

/* The minors an assignment's grants are on, ascending, as "4,5,6,7". */
static void minors(const model_node *m, const model_assignment *a, char *out, size_t len) {
    int mn[MODEL_MAX_GPUS], k = 0;
    for (int i = 0; i < a->ngrants; i++) mn[k++] = m->gpus[a->grant[i].gpu].index;
    for (int i = 1; i < k; i++)
        for (int j = i; j > 0 && mn[j - 1] > mn[j]; j--) {
            int t = mn[j];
            mn[j] = mn[j - 1];
            mn[j - 1] = t;
        }
    size_t off = 0;
    out[0] = 0;
    for (int i = 0; i < k && off < len; i++) off += (size_t)snprintf(out + off, len - off, "%s%d", i ? "," : "", mn[i]);
}

/* ------------------------------------------------------------ the devices' attributes in the model ---- */

TEST(dra_node_keeps_the_devices_attributes_qualified) {
    model_node *m = p8_node(NULL);
    CHECK(m && m->ngpus == 8 && !m->reason[0]);
    CHECK_STR(model_dra_node_attr(m, pos_of(m, 0), "resource.kubernetes.io/pcieRoot"), "spci0000:17");
    CHECK_STR(model_dra_node_attr(m, pos_of(m, 7), "resource.kubernetes.io/pcieRoot"), "spci0000:97");
    CHECK_STR(model_dra_node_attr(m, pos_of(m, 5), "resource.kubernetes.io/pciBusID"), "s0000:9c:00.0");
    /* the driver's own attributes are published unqualified: the allocator finds them under its domain */
    CHECK_STR(model_dra_node_attr(m, 0, "gpu.nvidia.com/productName"), "sNVIDIA A100 80GB PCIe");
    CHECK_STR(model_dra_node_attr(m, 0, "gpu.nvidia.com/cudaComputeCapability"), "v8.0.0");
    CHECK(model_dra_node_attr(m, 0, "productName") == NULL);
    CHECK(model_dra_node_attr(m, 0, "other.example.com/productName") == NULL);
    /* a clone and a compacted copy keep them (the extender keeps compacted nodes) */
    model_node *c = model_node_clone(m), *k = model_node_compact(m);
    model_node_free(m);
    CHECK_STR(model_dra_node_attr(c, 3, "resource.kubernetes.io/pcieRoot"), "spci0000:17");
    CHECK_STR(model_dra_node_attr(k, 4, "resource.kubernetes.io/pcieRoot"), "spci0000:97");
    model_node_free(c);
    model_node_free(k);
}

/* ------------------------------------------------------------ matchAttribute at fit ---- */

TEST(dra_match_pcie_root_fits_only_the_whole_root_and_placement_takes_it) {
    model_node *m = p8_node(NULL);
    take(m, 1, "claim:held");   /* one GPU of root pci0000:17 is taken */
    model_request r4, plain;
    char why[256];
    CHECK_INT(claim(4, SAME_ROOT, &r4, why, sizeof why), MODEL_DRA_JUDGED);
    CHECK_INT(r4.dra_nconstraints, 1);
    CHECK_STR(r4.dra_constraint[0].attr, "resource.kubernetes.io/pcieRoot");
    CHECK(!r4.dra_constraint[0].distinct);
    /* the filter's ground: published devices, usage not looked at -- both roots have 4 */
    CHECK_MSG(model_dra_could_fit(m, &r4, why, sizeof why), "%s", why);
    /* with usage: only pci0000:97's four GPUs together */
    model_assignment out[64];
    CHECK_INT(model_fit(m, &r4, out, 64, why, sizeof why), 1);
    char got[64];
    minors(m, &out[0], got, sizeof got);
    CHECK_STR(got, "4,5,6,7");
    /* the same claim without the constraint: any 4 of the 7 free GPUs, C(7,4) */
    CHECK_INT(claim(4, "", &plain, why, sizeof why), MODEL_DRA_JUDGED);
    CHECK_INT(plain.dra_nconstraints, 0);
    CHECK(!model_request_same(&plain, &r4));
    CHECK_INT(model_fit(m, &plain, NULL, 0, why, sizeof why), 35);
    /* placement (what the simulator binds): the policy picks those devices, and the model takes them */
    const char *pols[] = {"spread", "bestfit", "binpack"};
    model_assignment a;
    for (int k = 0; k < 3; k++) {
        policy_ctx ctx;
        policy_ctx_init(&ctx, 1);
        policy_result res[1];
        model_node *nodes[1] = {m};
        int w = policy_place(policy_find(pols[k]), &ctx, &r4, nodes, 1, res, &a, why, sizeof why);
        CHECK_MSG(w == 0, "%s: %s", pols[k], why);
        minors(m, &a, got, sizeof got);
        CHECK_MSG(!strcmp(got, "4,5,6,7"), "%s placed %s", pols[k], got);
    }
    CHECK_MSG(model_assign(m, "claim:train", &a, why, sizeof why) == 0, "%s", why);   /* binpack's */
    CHECK_MSG(model_node_check(m, why, sizeof why), "%s", why);
    /* with one GPU taken on each root, 6 are free but no 4 together: fit says which constraint stands in the way */
    CHECK_INT(model_release(m, "claim:train"), 0);
    take(m, 6, "claim:other");
    CHECK_INT(model_fit(m, &plain, NULL, 0, why, sizeof why), 15);
    CHECK_INT(model_fit(m, &r4, NULL, 0, why, sizeof why), 0);
    CHECK_STR(why, "no 4 free GPUs share resource.kubernetes.io/pcieRoot (matchAttribute); the largest group is 3");
    model_node_free(m);
}

TEST(dra_match_pcie_root_refuses_more_than_a_root_holds_with_the_reason) {
    model_node *m = p8_node(NULL);
    take(m, 1, "claim:held");
    model_request r5;
    char why[256];
    CHECK_INT(claim(5, SAME_ROOT, &r5, why, sizeof why), MODEL_DRA_JUDGED);
    CHECK(!model_dra_could_fit(m, &r5, why, sizeof why));
    CHECK_STR(why, "no 5 GPUs share resource.kubernetes.io/pcieRoot (matchAttribute); the largest group is 4");
    CHECK_INT(model_fit(m, &r5, NULL, 0, why, sizeof why), 0);
    CHECK_STR(why, "no 5 free GPUs share resource.kubernetes.io/pcieRoot (matchAttribute); the largest group is 4");
    policy_ctx ctx;
    policy_ctx_init(&ctx, 1);
    policy_result res;
    CHECK_INT(policy_score(policy_find("binpack"), &r5, m, &ctx, &res, NULL, 0), 0);
    CHECK(!res.feasible);
    /* the same 5 without the constraint fit (7 free) */
    model_request p5;
    CHECK_INT(claim(5, "", &p5, why, sizeof why), MODEL_DRA_JUDGED);
    CHECK(model_dra_could_fit(m, &p5, why, sizeof why));
    CHECK_INT(model_fit(m, &p5, NULL, 0, why, sizeof why), 21);
    model_node_free(m);
}

/* The driver publishes resource.kubernetes.io/pcieRoot only where it resolves the root complex (deviceinfo.go:
 * "if d.pcieRootAttr != nil"): gpu-4 and gpu-5 without it. */
static void drop_root_4_5(cJSON *slice) {
    cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItem(cJSON_GetObjectItem(slice, "spec"), "devices")) {
        const char *n = cJSON_GetObjectItem(d, "name")->valuestring;
        if (!strcmp(n, "gpu-4") || !strcmp(n, "gpu-5"))
            cJSON_DeleteItemFromObject(cJSON_GetObjectItem(d, "attributes"), "resource.kubernetes.io/pcieRoot");
    }
}

TEST(dra_constraint_on_an_attribute_some_devices_lack) {
    model_node *m = p8_node(drop_root_4_5);
    CHECK(m && m->ngpus == 8);
    CHECK(model_dra_node_attr(m, pos_of(m, 4), "resource.kubernetes.io/pcieRoot") == NULL);
    take(m, 1, "claim:held");
    model_request r, one;
    char why[256];
    CHECK_INT(claim(4, SAME_ROOT, &r, why, sizeof why), MODEL_DRA_JUDGED);
    /* statically pci0000:17 has 4; with gpu-1 taken 3 remain, and pci0000:97 has 2 with the attribute */
    CHECK(model_dra_could_fit(m, &r, why, sizeof why));
    CHECK_INT(model_fit(m, &r, NULL, 0, why, sizeof why), 0);
    CHECK_STR(why, "no 4 free GPUs share resource.kubernetes.io/pcieRoot (matchAttribute); the largest group is 3; 2 "
                   "lack the attribute");
    /* a device lacking the attribute cannot be part of the set, even alone (the allocator's add()) */
    CHECK_INT(claim(1, SAME_ROOT, &one, why, sizeof why), MODEL_DRA_JUDGED);
    model_assignment out[16];
    int n = model_fit(m, &one, out, 16, why, sizeof why);
    CHECK_INT(n, 5);   /* 7 free, 2 of them without the attribute */
    for (int i = 0; i < n; i++) {
        int mn = m->gpus[out[i].grant[0].gpu].index;
        CHECK_MSG(mn != 4 && mn != 5, "gpu-%d offered", mn);
    }
    /* a node whose devices all lack it: refused, saying so */
    model_request r1;
    CHECK_INT(claim(1, "[{\"matchAttribute\":\"gpu.nvidia.com/numaNode\"}]", &r1, why, sizeof why), MODEL_DRA_JUDGED);
    CHECK(!model_dra_could_fit(m, &r1, why, sizeof why));
    CHECK_STR(why, "no GPU here has gpu.nvidia.com/numaNode (the claim's matchAttribute needs it on every device)");
    model_node_free(m);
}

TEST(dra_constraints_on_other_attributes_work_the_same_way) {
    model_node *m = p8_node(NULL);
    take(m, 1, "claim:held");
    model_request r;
    char why[256];
    /* every device has the same product: the constraint removes nothing */
    CHECK_INT(claim(4, "[{\"matchAttribute\":\"gpu.nvidia.com/productName\"}]", &r, why, sizeof why), MODEL_DRA_JUDGED);
    CHECK_INT(model_fit(m, &r, NULL, 0, why, sizeof why), 35);
    /* the uuid is every device's own: no two share it */
    CHECK_INT(claim(2, "[{\"matchAttribute\":\"gpu.nvidia.com/uuid\"}]", &r, why, sizeof why), MODEL_DRA_JUDGED);
    CHECK(!model_dra_could_fit(m, &r, why, sizeof why));
    CHECK_STR(why, "no 2 GPUs share gpu.nvidia.com/uuid (matchAttribute); the largest group is 1");
    /* distinctAttribute: one GPU per root -- 3 free on pci0000:17 times 4 on pci0000:97 */
    CHECK_INT(claim(2, "[{\"distinctAttribute\":\"resource.kubernetes.io/pcieRoot\"}]", &r, why, sizeof why),
              MODEL_DRA_JUDGED);
    CHECK(r.dra_constraint[0].distinct);
    model_assignment out[32];
    int n = model_fit(m, &r, out, 32, why, sizeof why);
    CHECK_INT(n, 12);
    for (int i = 0; i < n; i++)
        CHECK((m->gpus[out[i].grant[0].gpu].index < 4) != (m->gpus[out[i].grant[1].gpu].index < 4));
    CHECK_INT(claim(3, "[{\"distinctAttribute\":\"resource.kubernetes.io/pcieRoot\"}]", &r, why, sizeof why),
              MODEL_DRA_JUDGED);
    CHECK(!model_dra_could_fit(m, &r, why, sizeof why));
    CHECK_STR(why, "no 3 GPUs have distinct values of resource.kubernetes.io/pcieRoot (distinctAttribute); at most 2 do");
    /* two constraints together: one root and one product */
    CHECK_INT(claim(4, "[{\"matchAttribute\":\"resource.kubernetes.io/pcieRoot\"},{\"requests\":[\"gpu\"],"
                       "\"matchAttribute\":\"gpu.nvidia.com/productName\"}]", &r, why, sizeof why), MODEL_DRA_JUDGED);
    CHECK_INT(r.dra_nconstraints, 2);
    CHECK_INT(model_fit(m, &r, NULL, 0, why, sizeof why), 1);
    model_node_free(m);
}

/* ------------------------------------------------------------ which constraints tessera judges ---- */

static model_dra_verdict judge(const char *spec_json, model_request *r, char *why, size_t whylen) {
    cJSON *s = cJSON_Parse(spec_json), *cl = model_dra_chart_classes();
    memset(r, 0, sizeof *r);
    model_dra_verdict v = model_dra_request(s, chart_class, cl, r, why, whylen);
    cJSON_Delete(s);
    cJSON_Delete(cl);
    return v;
}

#define REQ(name, n) "{\"name\":\"" name "\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\",\"count\":" #n "}}"

TEST(dra_constraints_judged_or_said_why_not) {
    model_request r;
    char why[256];
    /* every request named explicitly: judged, over the sum */
    CHECK_INT(judge("{\"devices\":{\"requests\":[" REQ("a", 2) "," REQ("b", 2) "],\"constraints\":[{\"requests\":[\"a\",\"b\"],"
                    "\"matchAttribute\":\"resource.kubernetes.io/pcieRoot\"}]}}", &r, why, sizeof why), MODEL_DRA_JUDGED);
    CHECK_INT(r.count, 4);
    CHECK_INT(r.dra_nconstraints, 1);
    /* over part of the requests: 2 of the 4 devices share a root, which one request cannot say */
    CHECK_INT(judge("{\"devices\":{\"requests\":[" REQ("a", 2) "," REQ("b", 2) "],\"constraints\":[{\"requests\":[\"a\"],"
                    "\"matchAttribute\":\"resource.kubernetes.io/pcieRoot\"}]}}", &r, why, sizeof why), MODEL_DRA_UNJUDGED);
    CHECK(strstr(why, "part of a claim's GPU requests") != NULL);
    /* firstAvailable with one alternative, named as <request>/<alternative> */
    CHECK_INT(judge("{\"devices\":{\"requests\":[{\"name\":\"g\",\"firstAvailable\":[{\"name\":\"big\",\"deviceClassName\":"
                    "\"gpu.nvidia.com\",\"count\":2}]}],\"constraints\":[{\"requests\":[\"g/big\"],\"matchAttribute\":"
                    "\"resource.kubernetes.io/pcieRoot\"}]}}", &r, why, sizeof why), MODEL_DRA_JUDGED);
    CHECK_INT(r.dra_nconstraints, 1);
    /* a constraint that takes in a monitoring (adminAccess) device */
    CHECK_INT(judge("{\"devices\":{\"requests\":[" REQ("a", 2) ",{\"name\":\"mon\",\"exactly\":{\"deviceClassName\":"
                    "\"gpu.nvidia.com\",\"adminAccess\":true}}],\"constraints\":[{\"matchAttribute\":"
                    "\"resource.kubernetes.io/pcieRoot\"}]}}", &r, why, sizeof why), MODEL_DRA_UNJUDGED);
    CHECK(strstr(why, "adminAccess") != NULL);
    /* ... and one that leaves it out is judged */
    CHECK_INT(judge("{\"devices\":{\"requests\":[" REQ("a", 2) ",{\"name\":\"mon\",\"exactly\":{\"deviceClassName\":"
                    "\"gpu.nvidia.com\",\"adminAccess\":true}}],\"constraints\":[{\"requests\":[\"a\"],\"matchAttribute\":"
                    "\"resource.kubernetes.io/pcieRoot\"}]}}", &r, why, sizeof why), MODEL_DRA_JUDGED);
    /* on MIG devices */
    CHECK_INT(judge("{\"devices\":{\"requests\":[{\"name\":\"m\",\"exactly\":{\"deviceClassName\":\"mig.nvidia.com\","
                    "\"count\":2,\"selectors\":[{\"cel\":{\"expression\":\"device.attributes['gpu.nvidia.com'].profile == "
                    "'1g.10gb'\"}}]}}],\"constraints\":[{\"matchAttribute\":\"resource.kubernetes.io/pcieRoot\"}]}}",
                    &r, why, sizeof why), MODEL_DRA_UNJUDGED);
    CHECK(strstr(why, "MIG") != NULL);
    /* a kind of constraint tessera does not know, a name that is not qualified, too many */
    CHECK_INT(judge("{\"devices\":{\"requests\":[" REQ("a", 2) "],\"constraints\":[{\"matchExpression\":\"x\"}]}}", &r, why,
                    sizeof why), MODEL_DRA_UNJUDGED);
    CHECK_INT(judge("{\"devices\":{\"requests\":[" REQ("a", 2) "],\"constraints\":[{\"matchAttribute\":\"pcieRoot\"}]}}", &r,
                    why, sizeof why), MODEL_DRA_UNJUDGED);
    CHECK_INT(judge("{\"devices\":{\"requests\":[" REQ("a", 2) "],\"constraints\":[{\"matchAttribute\":\"a.b/c\"},"
                    "{\"distinctAttribute\":\"a.b/d\"}]}}", &r, why, sizeof why), MODEL_DRA_JUDGED);
    CHECK_INT(judge("{\"devices\":{\"requests\":[" REQ("a", 2) "],\"constraints\":[{\"matchAttribute\":\"a.b/c\"},"
                    "{\"matchAttribute\":\"a.b/d\"},{\"matchAttribute\":\"a.b/e\"}]}}", &r, why, sizeof why),
              MODEL_DRA_UNJUDGED);
    CHECK(strstr(why, "more constraints than tessera judges") != NULL);
    /* two claims of one pod: a claim's constraint covers its own devices only, which one request cannot say */
    cJSON *c1 = cJSON_Parse("{\"devices\":{\"requests\":[" REQ("a", 2) "],\"constraints\":[{\"matchAttribute\":"
                            "\"resource.kubernetes.io/pcieRoot\"}]}}");
    cJSON *c2 = cJSON_Parse("{\"devices\":{\"requests\":[" REQ("b", 2) "]}}"), *cl = model_dra_chart_classes();
    memset(&r, 0, sizeof r);
    CHECK_INT(model_dra_request(c1, chart_class, cl, &r, why, sizeof why), MODEL_DRA_JUDGED);
    CHECK_INT(model_dra_request(c2, chart_class, cl, &r, why, sizeof why), MODEL_DRA_UNJUDGED);
    memset(&r, 0, sizeof r);
    CHECK_INT(model_dra_request(c2, chart_class, cl, &r, why, sizeof why), MODEL_DRA_JUDGED);
    CHECK_INT(model_dra_request(c1, chart_class, cl, &r, why, sizeof why), MODEL_DRA_UNJUDGED);
    cJSON_Delete(c1);
    cJSON_Delete(c2);
    cJSON_Delete(cl);
}

/* ------------------------------------------------------------ topology of DRA nodes ---- */

/* dra-p8's Node object with the node agent's tessera.io/gpus annotation of the same server
 * (tests/fixtures/nodes/topo-pcie8-nvlink-pairs.json: NV12 bridges (0,1),(2,3),(4,5),(6,7), PIX on a switch, SYS
 * across), its entries listed in reverse so that only the UUIDs can match them to the devices. */
static cJSON *p8_node_annotated(void) {
    cJSON *no = fx("node-dra-p8.json");
    char *t = test_fixture("nodes/topo-pcie8-nvlink-pairs.json", NULL);
    cJSON *agent = cJSON_Parse(t);
    free(t);
    const char *ann = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(agent, "metadata"), "annotations"),
                                          "tessera.io/gpus")->valuestring;
    cJSON *arr = cJSON_Parse(ann), *rev = cJSON_CreateArray();
    for (int i = cJSON_GetArraySize(arr) - 1; i >= 0; i--) {
        cJSON *g = cJSON_Duplicate(cJSON_GetArrayItem(arr, i), 1);
        cJSON_DeleteItemFromObject(g, "index");   /* the list's order is NVML's; here it is not */
        cJSON *row = cJSON_GetObjectItem(g, "topo"), *rrow = cJSON_CreateArray();
        for (int j = cJSON_GetArraySize(row) - 1; j >= 0; j--)
            cJSON_AddItemToArray(rrow, cJSON_Duplicate(cJSON_GetArrayItem(row, j), 1));
        cJSON_ReplaceItemInObject(g, "topo", rrow);
        cJSON_DeleteItemFromObject(g, "nvlink");
        cJSON_AddItemToArray(rev, g);
    }
    char *text = cJSON_PrintUnformatted(rev);
    cJSON_AddStringToObject(cJSON_GetObjectItem(cJSON_GetObjectItem(no, "metadata"), "annotations"), "tessera.io/gpus", text);
    free(text);
    cJSON_Delete(rev);
    cJSON_Delete(arr);
    cJSON_Delete(agent);
    return no;
}

static model_align align_of(const model_node *m, const int *minor, int k) {
    int8_t set[MODEL_MAX_GPUS];
    for (int i = 0; i < k; i++) set[i] = (int8_t)pos_of(m, minor[i]);
    return model_topo_align(m, set, k);
}

TEST(dra_topology_from_pcie_roots_numa_under_one_root_unknown_across) {
    model_node *m = p8_node(NULL);
    CHECK(m->topo != NULL);
    CHECK_INT(model_topo_link(m, pos_of(m, 0), pos_of(m, 3)), MODEL_LINK_PHB);
    CHECK_INT(model_topo_link(m, pos_of(m, 5), pos_of(m, 6)), MODEL_LINK_PHB);
    CHECK_INT(model_topo_link(m, pos_of(m, 3), pos_of(m, 4)), MODEL_LINK_UNKNOWN);
    int root[] = {0, 1, 2, 3}, across[] = {2, 3, 4, 5}, pair[] = {0, 4};
    CHECK_INT(align_of(m, root, 4), MODEL_ALIGN_NUMA);
    CHECK_INT(align_of(m, across, 4), MODEL_ALIGN_UNKNOWN);
    CHECK_INT(align_of(m, pair, 2), MODEL_ALIGN_UNKNOWN);
    /* the best free set of 4 with gpu-1 taken is the other root */
    take(m, 1, "claim:held");
    bool cand[MODEL_MAX_GPUS] = {false};
    for (int g = 0; g < m->ngpus; g++) cand[g] = m->gpus[g].exclusive_holder < 0;
    int8_t set[MODEL_MAX_GPUS];
    CHECK_INT(model_topo_best_set(m, cand, 4, set), MODEL_ALIGN_NUMA);
    for (int i = 0; i < 4; i++) CHECK(m->gpus[set[i]].index >= 4);
    /* a device without the attribute has no known link */
    model_node *l = p8_node(drop_root_4_5);
    CHECK_INT(model_topo_link(l, pos_of(l, 4), pos_of(l, 5)), MODEL_LINK_UNKNOWN);
    CHECK_INT(model_topo_link(l, pos_of(l, 6), pos_of(l, 7)), MODEL_LINK_PHB);
    model_node_free(l);
    /* a compacted copy keeps the matrix (the extender installs compacted models) */
    model_node *k = model_node_compact(m);
    CHECK_INT(model_topo_link(k, pos_of(k, 1), pos_of(k, 2)), MODEL_LINK_PHB);
    model_node_free(k);
    model_node_free(m);
}

TEST(dra_topology_the_agents_matrix_wins_matched_by_uuid) {
    cJSON *no = p8_node_annotated(), *so = fx("slice-dra-p8.json");
    model_node *m = node_of(no, so);
    CHECK(m && m->ngpus == 8 && !m->reason[0] && m->dra_links == NULL);   /* applied, then no longer needed */
    char got[32];
    CHECK_INT(model_topo_link(m, pos_of(m, 0), pos_of(m, 1)), MODEL_LINK_NVLINK);
    model_link_format(model_topo_link(m, pos_of(m, 6), pos_of(m, 7)), m->topo->nvlinks[pos_of(m, 6)][pos_of(m, 7)], got,
                      sizeof got);
    CHECK_STR(got, "NV12");
    CHECK_INT(model_topo_link(m, pos_of(m, 0), pos_of(m, 2)), MODEL_LINK_PIX);   /* finer than the roots' PHB */
    CHECK_INT(model_topo_link(m, pos_of(m, 3), pos_of(m, 4)), MODEL_LINK_SYS);   /* what the roots cannot say */
    int bridged[] = {2, 3}, sw[] = {0, 1, 2, 3}, all[] = {0, 1, 2, 3, 4, 5, 6, 7};
    CHECK_INT(align_of(m, bridged, 2), MODEL_ALIGN_NVLINK);
    CHECK_INT(align_of(m, sw, 4), MODEL_ALIGN_PCIE);
    CHECK_INT(align_of(m, all, 8), MODEL_ALIGN_NONE);
    model_node_free(m);
    /* the same annotation with a GPU DRA does not publish: the others still match by UUID */
    cJSON_DeleteItemFromArray(cJSON_GetObjectItem(cJSON_GetObjectItem(so, "spec"), "devices"), 0);
    char err[256];
    m = model_node_from_json(no, NULL, err, sizeof err);
    CHECK(m && m->dra_links != NULL && m->dra_links->n == 8);
    model_dra_slice s;
    CHECK_INT(model_dra_slice_parse(so, &s, err, sizeof err), 0);
    const model_dra_slice *sp = &s;
    CHECK_INT(model_dra_merge_slices(m, &sp, 1, NULL), 7);
    CHECK_INT(model_topo_link(m, pos_of(m, 2), pos_of(m, 3)), MODEL_LINK_NVLINK);
    CHECK_INT(model_topo_link(m, pos_of(m, 4), pos_of(m, 1)), MODEL_LINK_SYS);
    model_dra_slice_clear(&s);
    cJSON_Delete(so);
    model_node_free(m);
    cJSON_Delete(no);
}

/* The device-plugin twin of dra-p8: the node agent's fixture of the same server (nvidia.com/gpu: 8). */
static model_node *p8_plugin_node(void) {
    char *t = test_fixture("nodes/topo-pcie8-nvlink-pairs.json", NULL);
    char err[256];
    model_node *m = model_node_from_json_text(t, strlen(t), NULL, err, sizeof err);
    free(t);
    return m;
}

TEST(dra_claims_are_judged_and_placed_by_topology_as_device_plugin_pods) {
    cJSON *no = p8_node_annotated(), *so = fx("slice-dra-p8.json");
    model_node *d = node_of(no, so), *p = p8_plugin_node();
    cJSON_Delete(no);
    cJSON_Delete(so);
    CHECK(d && p && !d->reason[0] && !p->reason[0] && d->ngpus == 8 && p->ngpus == 8);
    /* the same physical GPUs, the same links */
    for (int a = 0; a < 8; a++)
        for (int b = 0; b < 8; b++)
            if (a != b) {
                int da = pos_of(d, a), db = pos_of(d, b);
                CHECK_STR(d->gpus[da].uuid, p->gpus[a].uuid);
                CHECK_INT(model_topo_link(d, da, db), model_topo_link(p, a, b));
            }
    /* GPU 0 taken on both: a 2-GPU claim and a 2-GPU pod get the same set from every topology-aware policy */
    take(d, 0, "claim:held");
    take(p, 0, "pod:held");
    model_request claim2, pod2 = {.kind = MODEL_REQ_WHOLE, .count = 2};
    char why[256];
    CHECK_INT(claim(2, "", &claim2, why, sizeof why), MODEL_DRA_JUDGED);
    const char *pols[] = {"binpack", "spread", "bestfit"};
    for (int k = 0; k < 3; k++) {
        policy_ctx ctx;
        policy_ctx_init(&ctx, 1);
        policy_result rd, rp;
        CHECK_INT(policy_score(policy_find(pols[k]), &claim2, d, &ctx, &rd, NULL, 0), 0);
        CHECK_INT(policy_score(policy_find(pols[k]), &pod2, p, &ctx, &rp, NULL, 0), 0);
        CHECK(rd.feasible && rp.feasible);
        CHECK_INT(rd.choice.ngpus, 2);
        for (int i = 0; i < 2; i++) CHECK_INT(d->gpus[rd.choice.gpu[i]].index, p->gpus[rp.choice.gpu[i]].index);
        CHECK_MSG(rd.raw == rp.raw && rd.score == rp.score, "%s: claim %g/%g, pod %g/%g", pols[k], rd.raw, rd.score,
                  rp.raw, rp.score);
        CHECK_INT(model_topo_align(d, rd.choice.gpu, 2), model_topo_align(p, rp.choice.gpu, 2));
        if (k == 0) CHECK_INT(model_topo_align(d, rd.choice.gpu, 2), MODEL_ALIGN_NVLINK);   /* binpack weighs it */
    }
    /* a required alignment: the claim pod's tessera.io/topology, judged on the same matrix */
    claim2.topology = pod2.topology = MODEL_ALIGN_NVLINK;
    model_request claim4 = claim2, pod4 = pod2;
    claim4.count = pod4.count = 4;
    CHECK_INT(model_fit(d, &claim2, NULL, 0, why, sizeof why), model_fit(p, &pod2, NULL, 0, why, sizeof why));
    CHECK(model_fit(d, &claim2, NULL, 0, why, sizeof why) == 3);   /* the bridged pairs left whole */
    CHECK_INT(model_fit(d, &claim4, NULL, 0, why, sizeof why), 0);
    CHECK(!model_dra_could_fit(d, &claim4, why, sizeof why));
    CHECK_STR(why, "tessera.io/topology: nvlink: no 4 GPUs DRA publishes here are nvlink-aligned (the best set is pcie)");
    model_node_free(d);
    model_node_free(p);
}

TEST(dra_topology_aware_policies_place_only_sets_that_meet_the_constraints) {
    cJSON *no = p8_node_annotated(), *so = fx("slice-dra-p8.json");
    model_node *m = node_of(no, so);
    cJSON_Delete(no);
    cJSON_Delete(so);
    take(m, 0, "claim:held");
    model_request same4, apart2;
    char why[256], got[32];
    CHECK_INT(claim(4, SAME_ROOT, &same4, why, sizeof why), MODEL_DRA_JUDGED);
    CHECK_INT(claim(2, "[{\"distinctAttribute\":\"resource.kubernetes.io/pcieRoot\"}]", &apart2, why, sizeof why),
              MODEL_DRA_JUDGED);
    const char *pols[] = {"binpack", "spread", "fgd-pack", "bestfit"};
    for (int k = 0; k < 4; k++) {
        policy_ctx ctx;
        policy_ctx_init(&ctx, 1);
        model_request two = {.kind = MODEL_REQ_WHOLE, .count = 2, .via_dra = true};
        policy_workload *w = policy_workload_new();
        CHECK(policy_workload_add(w, &two, 1, why, sizeof why) == 0 && policy_workload_finish(w, 95, why, sizeof why) == 0);
        ctx.workload = w;
        policy_result res[1];
        model_assignment a;
        model_node *nodes[1] = {m};
        /* the one root with 4 free GPUs: pci0000:97, a PCIe switch with two bridged pairs */
        CHECK_MSG(policy_place(policy_find(pols[k]), &ctx, &same4, nodes, 1, res, &a, why, sizeof why) == 0, "%s: %s",
                  pols[k], why);
        minors(m, &a, got, sizeof got);
        CHECK_MSG(!strcmp(got, "4,5,6,7"), "%s placed %s", pols[k], got);
        /* one GPU on each root: every such pair crosses the sockets, and still one is placed */
        CHECK_MSG(policy_place(policy_find(pols[k]), &ctx, &apart2, nodes, 1, res, &a, why, sizeof why) == 0, "%s: %s",
                  pols[k], why);
        CHECK_INT(a.ngrants, 2);
        CHECK_MSG((m->gpus[a.grant[0].gpu].index < 4) != (m->gpus[a.grant[1].gpu].index < 4), "%s", pols[k]);
        CHECK_INT(model_topo_align(m, (int8_t[]){a.grant[0].gpu, a.grant[1].gpu}, 2), MODEL_ALIGN_NONE);
        policy_workload_free(w);
    }
    model_node_free(m);
}

TEST(dra_required_alignment_on_pcie_roots_alone) {
    model_node *m = p8_node(NULL);   /* no annotation: what the roots say */
    take(m, 1, "claim:held");
    model_request r;
    char why[256];
    CHECK_INT(claim(4, "", &r, why, sizeof why), MODEL_DRA_JUDGED);
    r.topology = MODEL_ALIGN_NUMA;
    CHECK(model_dra_could_fit(m, &r, why, sizeof why));
    model_assignment out[8];
    CHECK_INT(model_fit(m, &r, out, 8, why, sizeof why), 1);   /* only pci0000:97 is a known-aligned 4 */
    char got[32];
    minors(m, &out[0], got, sizeof got);
    CHECK_STR(got, "4,5,6,7");
    r.topology = MODEL_ALIGN_PCIE;   /* a switch below the root is invisible to the attribute */
    CHECK(!model_dra_could_fit(m, &r, why, sizeof why));
    CHECK_STR(why, "tessera.io/topology: pcie: no 4 GPUs DRA publishes here are pcie-aligned (the best set is numa)");
    model_node_free(m);
    /* without the attribute anywhere the topology is unknown, and says how to make it known */
    cJSON *no = fx("node-dra-a.json"), *so = fx("slice-dra-a.json");
    cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItem(cJSON_GetObjectItem(so, "spec"), "devices"))
        cJSON_DeleteItemFromObject(cJSON_GetObjectItem(d, "attributes"), "resource.kubernetes.io/pcieRoot");
    m = node_of(no, so);
    cJSON_Delete(no);
    cJSON_Delete(so);
    CHECK(m && m->ngpus == 2 && m->topo == NULL);
    CHECK_INT(claim(2, "", &r, why, sizeof why), MODEL_DRA_JUDGED);
    r.topology = MODEL_ALIGN_NUMA;
    CHECK(!model_dra_could_fit(m, &r, why, sizeof why));
    CHECK(strstr(why, "this node's is unknown") && strstr(why, "tessera.io/gpus"));
    model_node_free(m);
}

/* ------------------------------------------------------------ exactness ---- */

/* Whether the GPUs set[0..k) meet r's constraints, from the attribute values themselves. */
static bool meets(const model_node *m, const model_request *r, const int *set, int k) {
    for (int c = 0; c < r->dra_nconstraints; c++)
        for (int i = 0; i < k; i++) {
            const char *a = model_dra_node_attr(m, set[i], r->dra_constraint[c].attr);
            if (!a) return false;
            for (int j = 0; j < i; j++) {
                bool same = !strcmp(a, model_dra_node_attr(m, set[j], r->dra_constraint[c].attr));
                if (same == r->dra_constraint[c].distinct) return false;
            }
        }
    return true;
}

/* How many k-subsets of the GPUs with ok[g] meet r's constraints, by brute force. */
static int brute(const model_node *m, const model_request *r, const bool *ok, int k) {
    int n = 0;
    for (unsigned mask = 0; mask < 1u << m->ngpus; mask++) {
        if (__builtin_popcount(mask) != k) continue;
        int set[MODEL_MAX_GPUS], s = 0;
        bool all = true;
        for (int g = 0; g < m->ngpus; g++)
            if (mask >> g & 1u) {
                all &= ok[g];
                set[s++] = g;
            }
        n += all && meets(m, r, set, k);
    }
    return n;
}

/* Random roots (0-2 distinct values, some devices without one) and products per device. */
static unsigned rnd_state = 12345;
static unsigned rnd(void) { return rnd_state = rnd_state * 1103515245u + 12345u, (rnd_state >> 16) & 0x7fff; }

static void shuffle_attrs(cJSON *slice) {
    cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItem(cJSON_GetObjectItem(slice, "spec"), "devices")) {
        cJSON *at = cJSON_GetObjectItem(d, "attributes");
        unsigned x = rnd() % 4;
        cJSON_DeleteItemFromObject(at, "resource.kubernetes.io/pcieRoot");
        if (x < 3) {
            char v[32];
            snprintf(v, sizeof v, "pci0000:%u7", x);
            cJSON_AddItemToObject(at, "resource.kubernetes.io/pcieRoot", cJSON_CreateObject());
            cJSON_AddStringToObject(cJSON_GetObjectItem(at, "resource.kubernetes.io/pcieRoot"), "string", v);
        }
        if (rnd() % 3 == 0) {   /* the same value as an int: a different type, so a different value */
            cJSON_DeleteItemFromObject(at, "productName");
            cJSON_AddItemToObject(at, "productName", cJSON_Parse("{\"int\":7}"));
        }
    }
}

TEST(dra_randomized_constraints_exact_and_never_overcommitted) {
    const char *cons[] = {SAME_ROOT, "[{\"distinctAttribute\":\"resource.kubernetes.io/pcieRoot\"}]",
                          "[{\"matchAttribute\":\"gpu.nvidia.com/productName\"}]",
                          "[{\"matchAttribute\":\"resource.kubernetes.io/pcieRoot\"},{\"matchAttribute\":\"gpu.nvidia.com/productName\"}]",
                          "[{\"distinctAttribute\":\"resource.kubernetes.io/pcieRoot\"},{\"matchAttribute\":\"gpu.nvidia.com/productName\"}]"};
    for (int round = 0; round < 60; round++) {
        model_node *m = p8_node(shuffle_attrs);
        CHECK(m && m->ngpus == 8);
        for (int step = 0; step < 12; step++) {
            model_request r;
            char why[256], uid[32];
            int k = 1 + (int)(rnd() % 5);
            const char *c = cons[rnd() % 5];
            CHECK_INT(claim(k, c, &r, why, sizeof why), MODEL_DRA_JUDGED);
            bool free_[MODEL_MAX_GPUS], all[MODEL_MAX_GPUS];
            for (int g = 0; g < m->ngpus; g++) {
                free_[g] = m->gpus[g].nholders == 0;
                all[g] = true;
            }
            /* fit lists exactly the free sets that meet the constraints; the filter's ground, the published ones */
            model_assignment out[128];
            int n = model_fit(m, &r, out, 128, why, sizeof why);
            CHECK_MSG(n == brute(m, &r, free_, k), "round %d step %d: fit %d, brute force %d (%s, %d GPUs)", round, step, n,
                      brute(m, &r, free_, k), c, k);
            CHECK_INT(model_dra_could_fit(m, &r, why, sizeof why), brute(m, &r, all, k) > 0);
            for (int i = 0; i < n && i < 128; i++) {
                int set[MODEL_MAX_GPUS];
                for (int g = 0; g < out[i].ngrants; g++) set[g] = out[i].grant[g].gpu;
                CHECK(meets(m, &r, set, out[i].ngrants));
            }
            /* place one (what the simulator does), sometimes give one back */
            if (n > 0) {
                snprintf(uid, sizeof uid, "claim:%d", step);
                CHECK_MSG(model_assign(m, uid, &out[rnd() % (unsigned)(n < 128 ? n : 128)], why, sizeof why) == 0, "%s", why);
            }
            if (rnd() % 3 == 0) {
                snprintf(uid, sizeof uid, "claim:%d", (int)(rnd() % 12));
                model_release(m, uid);
            }
            CHECK_MSG(model_node_check(m, why, sizeof why), "%s", why);
        }
        model_node_free(m);
    }
}
