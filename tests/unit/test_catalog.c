/* test_catalog.c -- the GPU catalog: the built-in data, lookups by product, alias and
 * node label, (product, profile) keying, and loader errors on broken input.
 */
#include "harness.h"
#include "model/catalog.h"

#include <stdlib.h>

static const model_gpu_product *find(const char *name) {
    return model_catalog_find(model_catalog_default(), name);
}

/* Loads JSON text that must be rejected; returns the loader's message ("" if accepted). */
static const char *load_error(const char *json) {
    static char err[512];
    err[0] = 0;
    model_catalog *cat = model_catalog_from_json(json, strlen(json), err, sizeof err);
    if (cat) {
        model_catalog_free(cat);
        return "";
    }
    return err;
}

static char *fixture_path(const char *rel) {
    static char path[1024];
    const char *dir = getenv("TESSERA_FIXTURES");
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "tests/fixtures", rel);
    return path;
}

TEST(catalog_default_loads_every_labelled_variant) {
    const model_catalog *cat = model_catalog_default();
    CHECK(cat != NULL);
    CHECK(model_catalog_default() == cat);  /* parsed once */
    /* 15 models, 26 variants; the H100 SXM5 94GB has no label (skipped) and the
     * "V100-PCIE-32GB / V100S-PCIE-32GB" variant is two products. */
    CHECK_INT(model_catalog_count(cat), 24);
    for (int i = 0; i < model_catalog_count(cat); i++) {
        const model_gpu_product *p = model_catalog_at(cat, i);
        CHECK(p != NULL);
        CHECK(p->product[0] != 0);
        CHECK(model_catalog_find(cat, p->product) == p);
        CHECK_MSG(p->mig_capable == (p->nprofiles > 0), "%s: MIG profiles do not match mig_capable", p->product);
    }
    CHECK(model_catalog_at(cat, -1) == NULL);
    CHECK(model_catalog_at(cat, 24) == NULL);
    CHECK(model_catalog_at(NULL, 0) == NULL);
    CHECK_INT(model_catalog_count(NULL), 0);
}

TEST(catalog_a100_facts) {
    const model_gpu_product *sxm = find("NVIDIA-A100-SXM4-80GB");
    const model_gpu_product *pcie = find("NVIDIA-A100-80GB-PCIe");
    CHECK(sxm && pcie && sxm != pcie);
    CHECK_STR(sxm->model_id, "A100-80GB");
    CHECK_STR(pcie->model_id, "A100-80GB");
    CHECK_STR(sxm->family, "ampere");
    CHECK_INT(sxm->cc_major, 8);
    CHECK_INT(sxm->cc_minor, 0);
    CHECK_INT(sxm->memory_mib, 81920);
    CHECK_INT(sxm->sm_count, 108);
    CHECK(sxm->mig_capable && sxm->mps_capable);
    CHECK_INT(sxm->mps_max_clients, 48);
    CHECK_INT(sxm->mig_compute_slices, 7);
    CHECK_INT(sxm->mig_memory_slices, 8);
    CHECK_INT(sxm->mig_sm_total, 98);
    CHECK_INT(sxm->nprofiles, 7);
    CHECK_INT(pcie->nprofiles, 7);

    int i7 = model_product_profile_index(sxm, "7g.80gb");
    CHECK(i7 >= 0);
    CHECK_INT(sxm->profiles[i7].compute_slices, 7);
    CHECK_INT(sxm->profiles[i7].memory_slices, 8);
    CHECK_INT(sxm->profiles[i7].start_mask, 0x01);
    CHECK_INT(sxm->profiles[i7].memory_mib, 80896);
    CHECK_INT(sxm->profiles[i7].sm_count, 98);
    int i3 = model_product_profile_index(sxm, "3g.40gb");
    CHECK_INT(sxm->profiles[i3].start_mask, 0x11);  /* starts 0 and 4 */
    CHECK_INT(sxm->profiles[i3].max_instances, 2);
    CHECK(!sxm->profiles[i3].media);
    /* memory_mib_reported is empty for 1g.20gb on A100-80GB: unknown, not a crash. */
    int i120 = model_product_profile_index(sxm, "1g.20gb");
    CHECK(i120 >= 0);
    CHECK_INT(sxm->profiles[i120].memory_mib, 0);
    CHECK_INT(sxm->profiles[i120].start_mask, 0x55);  /* 0,2,4,6 */
}

TEST(catalog_pre_r470_name_is_an_alias) {
    const model_gpu_product *p = find("A100-SXM4-40GB");
    CHECK(p != NULL);
    CHECK_STR(p->product, "NVIDIA-A100-SXM4-40GB");
    CHECK(find("NVIDIA-A100-SXM4-40GB") == p);
    CHECK(find("NVIDIA-A100-PCIE-40GB") != p);
    CHECK(find("NVIDIA-A100-PCIE-40GB") != NULL);
}

TEST(catalog_unknown_and_null_lookups) {
    CHECK(find("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb") == NULL);  /* find is exact, no suffixes */
    CHECK(find("NVIDIA-Z9000") == NULL);
    CHECK(find("") == NULL);
    CHECK(find(NULL) == NULL);
    CHECK(model_catalog_find(NULL, "Tesla-T4") == NULL);
}

TEST(catalog_slash_names_two_products) {
    const model_gpu_product *a = find("Tesla-V100-PCIE-32GB");
    const model_gpu_product *b = find("Tesla-V100S-PCIE-32GB");
    CHECK(a && b && a != b);
    CHECK_STR(a->model_id, "V100-32GB");
    CHECK_STR(b->model_id, "V100-32GB");
    CHECK_INT(b->memory_mib, 32768);
    CHECK(find("Tesla-V100-PCIE-32GB / Tesla-V100S-PCIE-32GB") == NULL);
}

TEST(catalog_mps_clients_follow_compute_capability) {
    const model_gpu_product *v100 = find("Tesla-V100-SXM2-16GB"), *t4 = find("Tesla-T4");
    CHECK(v100 && t4);
    CHECK_INT(v100->cc_major, 7);
    CHECK_INT(v100->cc_minor, 0);
    CHECK_INT(v100->mps_max_clients, 16);
    CHECK_INT(t4->cc_minor, 5);
    CHECK_INT(t4->mps_max_clients, 48);
    CHECK(!t4->mig_capable);
    CHECK_INT(t4->mig_compute_slices, 0);
    CHECK_INT(t4->mig_memory_slices, 0);
    CHECK_INT(t4->nprofiles, 0);
}

TEST(catalog_variant_fields_override_the_die) {
    const model_gpu_product *sxm = find("NVIDIA-H100-80GB-HBM3"), *pcie = find("NVIDIA-H100-PCIe");
    CHECK(sxm && pcie);
    CHECK_INT(sxm->sm_count, 132);
    CHECK_INT(pcie->sm_count, 114);
    CHECK_INT(pcie->memory_mib, 81559);
    /* GH200: the die has no profiles; each variant brings its own table and memory. */
    const model_gpu_product *g480 = find("NVIDIA-GH200-480GB"), *g144 = find("NVIDIA-GH200-144G-HBM3e");
    CHECK(g480 && g144);
    CHECK_INT(g480->memory_mib, 97871);
    CHECK_INT(g144->memory_mib, 146831);
    CHECK(model_product_profile_index(g480, "1g.12gb") >= 0);
    CHECK(model_product_profile_index(g480, "1g.18gb") < 0);
    CHECK(model_product_profile_index(g144, "1g.18gb") >= 0);
    CHECK(model_product_profile_index(g144, "1g.18gb+me") < 0);
    CHECK_INT(g480->mig_sm_total, 0);  /* null in the data: unknown */
    CHECK_INT(find("NVIDIA-A10G")->memory_mib, 23028);
}

TEST(catalog_profiles_are_keyed_by_product) {
    const model_gpu_product *a40 = find("NVIDIA-A100-SXM4-40GB"), *a80 = find("NVIDIA-A100-SXM4-80GB"),
                            *h100 = find("NVIDIA-H100-80GB-HBM3");
    int i40 = model_product_profile_index(a40, "1g.10gb");
    int i80 = model_product_profile_index(a80, "1g.10gb");
    int ih = model_product_profile_index(h100, "1g.10gb");
    CHECK(i40 >= 0 && i80 >= 0 && ih >= 0);
    CHECK_INT(a40->profiles[i40].memory_slices, 2);
    CHECK_INT(a40->profiles[i40].start_mask, 0x55);
    CHECK_INT(a40->profiles[i40].max_instances, 4);
    CHECK_INT(a80->profiles[i80].memory_slices, 1);
    CHECK_INT(a80->profiles[i80].start_mask, 0x7f);
    CHECK_INT(h100->profiles[ih].memory_slices, 1);
    CHECK_INT(h100->profiles[ih].sm_count, 16);
    CHECK(model_product_profile_index(a40, "1g.20gb") < 0);
    CHECK(model_product_profile_index(a40, "5g.50gb") < 0);
    CHECK(model_product_profile_index(NULL, "1g.5gb") < 0);
    CHECK(model_product_profile_index(a40, NULL) < 0);
}

TEST(catalog_media_profile_spellings) {
    const model_gpu_product *a80 = find("NVIDIA-A100-SXM4-80GB");
    int canon = model_product_profile_index(a80, "1g.10gb+me");
    CHECK(canon >= 0);
    CHECK(a80->profiles[canon].media);
    CHECK_INT(a80->profiles[canon].max_instances, 1);
    CHECK_INT(model_product_profile_index(a80, "1g.10gb.me"), canon);
    CHECK(model_product_profile_index(a80, "1g.10gb") != canon);
    CHECK(!a80->profiles[model_product_profile_index(a80, "1g.10gb")].media);
    /* A compute-instance prefix names a CI, not a GPU instance profile. */
    CHECK(model_product_profile_index(a80, "1c.3g.40gb") < 0);
    CHECK(model_product_profile_index(a80, "2g.20gb.me") < 0);
}

TEST(catalog_label_mig_shared) {
    model_product_label l;
    model_catalog_parse_label(model_catalog_default(), "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED", &l);
    CHECK(l.product == find("NVIDIA-A100-SXM4-40GB"));
    CHECK_STR(l.base, "NVIDIA-A100-SXM4-40GB");
    CHECK_STR(l.mig_profile, "1g.5gb");
    CHECK(l.shared);
    CHECK(!l.mig_invalid);
}

TEST(catalog_label_shared_only) {
    model_product_label l;
    model_catalog_parse_label(model_catalog_default(), "Tesla-T4-SHARED", &l);
    CHECK(l.product == find("Tesla-T4"));
    CHECK_STR(l.base, "Tesla-T4");
    CHECK_STR(l.mig_profile, "");
    CHECK(l.shared);
    CHECK(!l.mig_invalid);
}

TEST(catalog_label_mig_invalid) {
    model_product_label l;
    model_catalog_parse_label(model_catalog_default(), "NVIDIA-H100-80GB-HBM3-MIG-INVALID", &l);
    CHECK(l.product == find("NVIDIA-H100-80GB-HBM3"));
    CHECK_STR(l.base, "NVIDIA-H100-80GB-HBM3");
    CHECK(l.mig_invalid);
    CHECK_STR(l.mig_profile, "");
    CHECK(!l.shared);
}

TEST(catalog_label_media_profile_and_prefix) {
    model_product_label l;
    model_catalog_parse_label(model_catalog_default(), "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb.me", &l);
    CHECK(l.product == find("NVIDIA-A100-SXM4-80GB"));
    CHECK_STR(l.mig_profile, "1g.10gb+me");
    /* Pre-R470 spelling from the GPU operator docs, with no alias in the data for it. */
    model_catalog_parse_label(model_catalog_default(), "A100-SXM4-80GB-MIG-3g.40gb-SHARED", &l);
    CHECK(l.product == find("NVIDIA-A100-SXM4-80GB"));
    CHECK_STR(l.base, "A100-SXM4-80GB");
    CHECK_STR(l.mig_profile, "3g.40gb");
    CHECK(l.shared);
    /* And the other way: a label with a prefix the data does not use. */
    model_catalog_parse_label(model_catalog_default(), "NVIDIA-Tesla-T4", &l);
    CHECK(l.product == find("Tesla-T4"));
    model_catalog_parse_label(model_catalog_default(), "A100-SXM4-40GB", &l);
    CHECK(l.product == find("NVIDIA-A100-SXM4-40GB"));
    CHECK(!l.shared);
}

TEST(catalog_label_unknown_product) {
    model_product_label l;
    model_catalog_parse_label(model_catalog_default(), "NVIDIA-Z9000-MIG-2g.20gb-SHARED", &l);
    CHECK(l.product == NULL);
    CHECK_STR(l.base, "NVIDIA-Z9000");
    CHECK_STR(l.mig_profile, "2g.20gb");
    CHECK(l.shared);
    model_catalog_parse_label(model_catalog_default(), "", &l);
    CHECK(l.product == NULL);
    CHECK_STR(l.base, "");
    model_catalog_parse_label(model_catalog_default(), NULL, &l);
    CHECK(l.product == NULL);
    char longlabel[400];
    memset(longlabel, 'x', sizeof longlabel - 1);
    longlabel[sizeof longlabel - 1] = 0;
    model_catalog_parse_label(model_catalog_default(), longlabel, &l);
    CHECK(l.product == NULL);
    CHECK(!l.shared);
    /* Longer than a product name but short enough to take apart: base is cut, no match. */
    memset(longlabel, 'y', 100);
    strcpy(longlabel + 100, "-SHARED");
    model_catalog_parse_label(model_catalog_default(), longlabel, &l);
    CHECK(l.product == NULL);
    CHECK(l.shared);
    CHECK_INT(strlen(l.base), MODEL_NAME_LEN - 1);
}

TEST(catalog_from_file_fixture) {
    char err[512] = "";
    model_catalog *cat = model_catalog_from_file(fixture_path("catalog/small.json"), err, sizeof err);
    CHECK_MSG(cat != NULL, "load failed: %s", err);
    CHECK_INT(model_catalog_count(cat), 4);
    const model_gpu_product *toy = model_catalog_find(cat, "NVIDIA-TOY-8");
    const model_gpu_product *s = model_catalog_find(cat, "NVIDIA-TOY-8S-PCIe");
    CHECK(toy && s);
    CHECK(model_catalog_find(cat, "TOY-8") == toy);
    CHECK_INT(toy->memory_mib, 8192);
    CHECK_INT(s->memory_mib, 16000);
    CHECK_INT(s->sm_count, 0);
    CHECK_INT(toy->mps_max_clients, 16);
    CHECK_INT(toy->nprofiles, 2);
    /* max_instances null: the placement table is the limit. */
    CHECK_INT(toy->profiles[0].max_instances, 2);
    CHECK_INT(toy->profiles[0].start_mask, 0x03);
    CHECK_INT(toy->profiles[1].memory_mib, 4000);
    CHECK(toy->profiles[1].media);
    const model_gpu_product *plain = model_catalog_find(cat, "Plain-GPU");
    CHECK(plain != NULL);
    CHECK_INT(plain->cc_major, 0);
    CHECK_INT(plain->memory_mib, 0);
    CHECK(!plain->mps_capable);
    CHECK_INT(plain->nprofiles, 0);
    model_catalog_free(cat);
    model_catalog_free(NULL);
}

TEST(catalog_missing_file) {
    char err[512] = "";
    CHECK(model_catalog_from_file("tests/fixtures/catalog/no-such-file.json", err, sizeof err) == NULL);
    CHECK_CONTAINS(err, "no-such-file.json");
    CHECK_CONTAINS(err, "cannot open");
    CHECK(model_catalog_from_file(NULL, err, sizeof err) == NULL);
    CHECK_CONTAINS(err, "no file name");
    /* A directory opens but cannot be read. */
    CHECK(model_catalog_from_file(fixture_path("catalog"), err, sizeof err) == NULL);
    CHECK_CONTAINS(err, "cannot read");
}

TEST(catalog_broken_placement_names_product_and_profile) {
    char err[512] = "";
    CHECK(model_catalog_from_file(fixture_path("catalog/bad_placement.json"), err, sizeof err) == NULL);
    CHECK_CONTAINS(err, "NVIDIA-BROKEN");
    CHECK_CONTAINS(err, "3g.20gb");
    CHECK_CONTAINS(err, "placement.size");
    CHECK_CONTAINS(err, "bad_placement.json");
}

#define ENTRY(body) "{\"gpus\":[{\"id\":\"X\",\"variants\":[{\"gfd_product\":\"NVIDIA-X\"}]" body "}]}"
#define MIG(profiles) ",\"mig_capable\":true,\"mig\":{\"compute_slices_total\":7,\"memory_slices_total\":8,\"profiles\":[" profiles "]}"
#define PROF(extra) "{\"name\":\"2g.10gb\",\"compute_slices\":2,\"memory_slices\":2,\"max_instances\":3" extra "}"

TEST(catalog_malformed_json) {
    CHECK_CONTAINS(load_error("{\"gpus\": [ {\"id\": "), "not valid JSON");
    CHECK_CONTAINS(load_error(""), "not valid JSON");
    CHECK_CONTAINS(load_error("{}"), "\"gpus\" must be an array");
    CHECK_CONTAINS(load_error("[1,2]"), "\"gpus\" must be an array");
    CHECK_CONTAINS(load_error("{\"gpus\": {}}"), "\"gpus\" must be an array");
    CHECK_CONTAINS(load_error("{\"gpus\": [3]}"), "gpus[0]");
    CHECK_CONTAINS(load_error("{\"gpus\": [{\"variants\": []}]}"), "\"id\" is required");
    CHECK_CONTAINS(load_error("{\"gpus\": [{\"id\": \"X\"}]}"), "\"variants\" must be an array");
    CHECK_CONTAINS(load_error("{\"gpus\": [{\"id\": \"X\", \"variants\": [7]}]}"), "variant must be an object");
    char err[64];
    CHECK(model_catalog_from_json(NULL, 0, err, sizeof err) == NULL);
    CHECK_CONTAINS(err, "no JSON");
    CHECK_STR(load_error("{\"gpus\": []}"), "");  /* empty but well-formed */
}

TEST(catalog_malformed_fields_name_the_field) {
    const char *e = load_error(ENTRY(",\"memory_mib\":\"lots\""));
    CHECK_CONTAINS(e, "\"X\"");
    CHECK_CONTAINS(e, "\"memory_mib\" must be a number");
    CHECK_CONTAINS(load_error(ENTRY(",\"sm_count\":1.5")), "\"sm_count\" must be a whole number");
    CHECK_CONTAINS(load_error(ENTRY(",\"memory_mib\":-1")), "\"memory_mib\" must be a whole number");
    CHECK_CONTAINS(load_error(ENTRY(",\"compute_capability\":\"eight\"")), "\"compute_capability\" must look like");
    CHECK_CONTAINS(load_error(ENTRY(",\"compute_capability\":8")), "\"compute_capability\" must be a string");
    CHECK_CONTAINS(load_error(ENTRY(",\"mig_capable\":\"yes\"")), "\"mig_capable\" must be true");
    CHECK_CONTAINS(load_error(ENTRY(",\"gfd_family\":\"a-family-name-that-is-far-too-long\"")), "\"gfd_family\" is longer");
    CHECK_CONTAINS(load_error(ENTRY(",\"mig_capable\":true")), "\"mig\" is required");
    CHECK_CONTAINS(load_error(ENTRY(",\"mig_capable\":true,\"mig\":{}")), "compute_slices_total");
    CHECK_CONTAINS(load_error(ENTRY(",\"mig_capable\":true,\"mig\":{\"compute_slices_total\":7,"
                                    "\"memory_slices_total\":9}")),
                   "\"memory_slices_total\" must be a whole number in [1, 8]");
    CHECK_CONTAINS(load_error("{\"gpus\":[{\"id\":\"X\",\"variants\":[{\"gfd_product\":\"NVIDIA-X\"},"
                              "{\"gfd_product\":\"NVIDIA-X\"}]}]}"),
                   "\"NVIDIA-X\" appears twice");
    CHECK_CONTAINS(load_error("{\"gpus\":[{\"id\":\"X\",\"variants\":[{\"gfd_product\":\"NVIDIA-X\","
                              "\"gfd_product_pre_r470\":\"NVIDIA-X\"}]}]}"),
                   "alias \"NVIDIA-X\"");
    CHECK_CONTAINS(load_error("{\"gpus\":[{\"id\":\"X\",\"variants\":[{\"gfd_product\":\"A /  / B\"}]}]}"),
                   "empty product name");
    CHECK_CONTAINS(load_error("{\"gpus\":[{\"id\":\"X\",\"variants\":[{\"gfd_product\":"
                              "\"NVIDIA-A-PRODUCT-NAME-THAT-IS-MUCH-LONGER-THAN-SIXTY-FOUR-CHARACTERS-IN-TOTAL\"}]}]}"),
                   "longer than 63");
    CHECK_CONTAINS(load_error("{\"gpus\":[{\"id\":\"X\",\"variants\":[{\"gfd_product\":\"NVIDIA-X\","
                              "\"mig_profiles\":5}],\"mig_capable\":true,\"mig\":{\"compute_slices_total\":7,"
                              "\"memory_slices_total\":8}}]}"),
                   "MIG profiles must be an array");
}

TEST(catalog_malformed_profiles) {
    const char *ok = ENTRY(MIG(PROF(",\"placement\":{\"starts\":[0,2,4],\"size\":2}")));
    CHECK_STR(load_error(ok), "");
    const char *e = load_error(ENTRY(MIG(PROF(""))));
    CHECK_CONTAINS(e, "NVIDIA-X");
    CHECK_CONTAINS(e, "\"2g.10gb\"");
    CHECK_CONTAINS(e, "\"placement\"");
    CHECK_CONTAINS(load_error(ENTRY(MIG(PROF(",\"placement\":{\"starts\":[6,7],\"size\":2}")))),
                   "start 7 + size 2 exceeds memory_slices_total 8");
    CHECK_CONTAINS(load_error(ENTRY(MIG(PROF(",\"placement\":{\"starts\":[],\"size\":2}")))),
                   "\"placement.starts\" must be a non-empty array");
    CHECK_CONTAINS(load_error(ENTRY(MIG(PROF(",\"placement\":{\"starts\":[\"0\"],\"size\":2}")))),
                   "\"placement.starts\" must hold whole numbers");
    CHECK_CONTAINS(load_error(ENTRY(MIG(PROF(",\"placement\":{\"starts\":[0],\"size\":2},"
                                             "\"memory_mib_reported\":{}")))),
                   "\"memory_mib_reported\" must be an array");
    CHECK_CONTAINS(load_error(ENTRY(MIG(PROF(",\"placement\":{\"starts\":[0],\"size\":2},"
                                             "\"memory_mib_reported\":[9984]")))),
                   "items must be objects");
    CHECK_CONTAINS(load_error(ENTRY(MIG(PROF(",\"placement\":{\"starts\":[0],\"size\":2},"
                                             "\"memory_mib_reported\":[{\"mib\":\"9984\"}]")))),
                   "\"mib\" must be a number");
    CHECK_CONTAINS(load_error(ENTRY(MIG(PROF(",\"placement\":{\"starts\":[0],\"size\":2}") ","
                                        PROF(",\"placement\":{\"starts\":[0],\"size\":2}")))),
                   "listed twice");
    CHECK_CONTAINS(load_error(ENTRY(MIG("{\"compute_slices\":1}"))), "profile \"name\" is required");
    CHECK_CONTAINS(load_error(ENTRY(MIG("{\"name\":\"9g.1gb\",\"max_instances\":9}"))),
                   "profile \"9g.1gb\": \"max_instances\" must be a whole number in [0, 8]");
    CHECK_CONTAINS(load_error(ENTRY(MIG("3"))), "profile must be an object");
    CHECK_CONTAINS(load_error(ENTRY(MIG("1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17"))), "more than 16 MIG profiles");
}

TEST(catalog_generic_product) {
    model_gpu_product p;
    memset(&p, 0xab, sizeof p);
    model_product_init_generic(&p, "NVIDIA-Z9000", 65536, 200);
    CHECK_STR(p.product, "NVIDIA-Z9000");
    CHECK_STR(p.model_id, "NVIDIA-Z9000");
    CHECK_STR(p.family, "");
    CHECK_INT(p.memory_mib, 65536);
    CHECK_INT(p.sm_count, 200);
    CHECK(!p.mig_capable);
    CHECK(p.mps_capable);
    CHECK_INT(p.mps_max_clients, 48);
    CHECK_INT(p.nprofiles, 0);
    CHECK_INT(p.mig_compute_slices, 0);
    CHECK_INT(p.cc_major, 0);
    CHECK(model_product_profile_index(&p, "1g.5gb") < 0);
    model_product_init_generic(&p, NULL, -5, -1);
    CHECK_STR(p.product, "");
    CHECK_INT(p.memory_mib, 0);
    CHECK_INT(p.sm_count, 0);
}
