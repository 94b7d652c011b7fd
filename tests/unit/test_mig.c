/* test_mig.c -- MIG placement rules against known facts from the MIG user guide and the
 * catalog's placement tables, config parsing, layout enumeration and the derived counts
 * of all valid placement sets.
 */
#include "harness.h"
#include "model/catalog.h"
#include "model/mig.h"

#include <stdlib.h>

static const model_gpu_product *gpu(const char *name) {
    const model_gpu_product *p = model_catalog_find(model_catalog_default(), name);
    if (!p) fprintf(stderr, "test_mig: %s missing from the catalog\n", name);
    return p;
}

static int prof(const model_gpu_product *p, const char *name) {
    int i = model_product_profile_index(p, name);
    if (i < 0) {
        fprintf(stderr, "test_mig: no profile %s on %s\n", name, p->product);
        abort();  /* a fixture mistake in this file, not a behaviour under test */
    }
    return i;
}

/* Appends "profile@start" entries without checking them (that is the point of the tests). */
static void put(model_mig_layout *l, const model_gpu_product *p, const char *name, int start) {
    l->inst[l->n].profile = (int8_t)prof(p, name);
    l->inst[l->n].start = (int8_t)start;
    l->n++;
}

/* Parses a config and returns how many layouts realise it; the first is formatted. */
static int layouts_of(const model_gpu_product *p, const char *json, char *first, size_t len) {
    model_mig_config cfg;
    char err[256];
    if (model_mig_config_parse(p, json, &cfg, err, sizeof err) != 0) {
        printf("    config %s: %s\n", json, err);
        first[0] = 0;
        return -1;
    }
    model_mig_layout out[4];
    int n = model_mig_layouts(p, &cfg, out, 4);
    first[0] = 0;
    if (n > 0) model_mig_layout_format(p, &out[0], first, len);
    return n;
}

TEST(mig_a100_40_cern_config) {
    const model_gpu_product *p = gpu("NVIDIA-A100-SXM4-40GB");
    CHECK(p);
    char s[128];
    /* 3g@0 leaves only the 2g start at 4, so the 3g must sit at 4. */
    CHECK_INT(layouts_of(p, "{\"3g.20gb\": 1, \"2g.10gb\": 2}", s, sizeof s), 1);
    CHECK_STR(s, "2g.10gb@0 2g.10gb@2 3g.20gb@4");
}

TEST(mig_a100_40_known_configs) {
    const model_gpu_product *p = gpu("NVIDIA-A100-SXM4-40GB");
    CHECK(p);
    char s[128];
    CHECK_INT(layouts_of(p, "{\"1g.5gb\": 7}", s, sizeof s), 1);
    CHECK_STR(s, "1g.5gb@0 1g.5gb@1 1g.5gb@2 1g.5gb@3 1g.5gb@4 1g.5gb@5 1g.5gb@6");
    CHECK_INT(layouts_of(p, "{\"1g.5gb\": 8}", s, sizeof s), 0);
    /* 3+3+1 = 7 compute slices, but the two 3g fill all 8 memory slices. */
    CHECK_INT(layouts_of(p, "{\"3g.20gb\": 2, \"1g.5gb\": 1}", s, sizeof s), 0);
    CHECK_INT(layouts_of(p, "{\"3g.20gb\": 2}", s, sizeof s), 1);
    CHECK_STR(s, "3g.20gb@0 3g.20gb@4");
    CHECK_INT(layouts_of(p, "{\"4g.20gb\": 1, \"3g.20gb\": 1}", s, sizeof s), 1);
    CHECK_STR(s, "4g.20gb@0 3g.20gb@4");
    CHECK_INT(layouts_of(p, "{\"7g.40gb\": 1}", s, sizeof s), 1);
    CHECK_STR(s, "7g.40gb@0");
    /* The double-memory 1g: four fit, a fifth cannot. */
    CHECK_INT(layouts_of(p, "{\"1g.10gb\": 4}", s, sizeof s), 1);
    CHECK_STR(s, "1g.10gb@0 1g.10gb@2 1g.10gb@4 1g.10gb@6");
    CHECK_INT(layouts_of(p, "{\"1g.10gb\": 3, \"2g.10gb\": 1}", s, sizeof s), 3);
    CHECK_INT(layouts_of(p, "{\"4g.20gb\": 1, \"1g.5gb+me\": 1, \"1g.5gb\": 2}", s, sizeof s), 3);
    CHECK_STR(s, "4g.20gb@0 1g.5gb@4 1g.5gb@5 1g.5gb+me@6");  /* profile index breaks the tie */
    CHECK_INT(layouts_of(p, "{}", s, sizeof s), 1);
    CHECK_STR(s, "");
}

TEST(mig_a100_80_known_configs) {
    const model_gpu_product *p = gpu("NVIDIA-A100-SXM4-80GB");
    CHECK(p);
    char s[128];
    CHECK_INT(layouts_of(p, "{\"4g.40gb\": 1, \"3g.40gb\": 1}", s, sizeof s), 1);
    CHECK_STR(s, "4g.40gb@0 3g.40gb@4");
    CHECK_INT(layouts_of(p, "{\"2g.20gb\": 3, \"1g.10gb\": 1}", s, sizeof s), 1);
    CHECK_STR(s, "2g.20gb@0 2g.20gb@2 2g.20gb@4 1g.10gb@6");
    CHECK_INT(layouts_of(p, "{\"2g.20gb\": 3, \"1g.10gb\": 2}", s, sizeof s), 0);
    CHECK_INT(layouts_of(p, "{\"1g.10gb\": 7}", s, sizeof s), 1);
    CHECK_INT(layouts_of(p, "{\"7g.80gb\": 1, \"1g.10gb\": 1}", s, sizeof s), 0);
}

TEST(mig_a30_known_configs) {
    const model_gpu_product *p = gpu("NVIDIA-A30");
    CHECK(p);
    char s[128];
    CHECK_INT(layouts_of(p, "{\"2g.12gb\": 2}", s, sizeof s), 1);
    CHECK_STR(s, "2g.12gb@0 2g.12gb@2");
    CHECK_INT(layouts_of(p, "{\"2g.12gb\": 1, \"1g.6gb\": 2}", s, sizeof s), 2);
    CHECK_STR(s, "1g.6gb@0 1g.6gb@1 2g.12gb@2");
    CHECK_INT(layouts_of(p, "{\"1g.6gb\": 4}", s, sizeof s), 1);
    CHECK_INT(layouts_of(p, "{\"4g.24gb\": 1, \"1g.6gb\": 1}", s, sizeof s), 0);
    /* Two media instances can never share a GPU, even of different profiles. */
    CHECK_INT(layouts_of(p, "{\"2g.12gb+me\": 1, \"1g.6gb+me\": 1}", s, sizeof s), 0);
}

TEST(mig_3211_geometry_valid) {
    const model_gpu_product *p = gpu("NVIDIA-A100-SXM4-40GB");
    CHECK(p);
    model_mig_layout l = {0};
    put(&l, p, "3g.20gb", 4);
    put(&l, p, "2g.10gb", 2);
    put(&l, p, "1g.5gb", 0);
    put(&l, p, "1g.5gb", 1);
    char why[256] = "";
    CHECK_MSG(model_mig_layout_valid(p, &l, why, sizeof why), "3-2-1-1 rejected: %s", why);
    CHECK_INT(model_mig_used_mask(p, &l), 0xff);
    char s[128];
    model_mig_layout_format(p, &l, s, sizeof s);
    CHECK_STR(s, "3g.20gb@4 2g.10gb@2 1g.5gb@0 1g.5gb@1");
    /* Nothing more fits: every slice is taken and all 7 compute slices are in use. */
    for (int i = 0; i < p->nprofiles; i++) CHECK_INT(model_mig_free_starts(p, &l, i), 0);
    /* The same config has more than this one layout; ours is among them. */
    model_mig_config cfg;
    CHECK_INT(model_mig_config_parse(p, "{\"3g.20gb\":1,\"2g.10gb\":1,\"1g.5gb\":2}", &cfg, why, sizeof why), 0);
    model_mig_layout out[16];
    int n = model_mig_layouts(p, &cfg, out, 16);
    CHECK(n > 1 && n <= 16);
    bool found = false;
    for (int i = 0; i < n; i++) {
        model_mig_layout_format(p, &out[i], s, sizeof s);
        if (strcmp(s, "1g.5gb@0 1g.5gb@1 2g.10gb@2 3g.20gb@4") == 0) found = true;
        CHECK(model_mig_layout_valid(p, &out[i], NULL, 0));
        for (int k = 1; k < out[i].n; k++) CHECK(out[i].inst[k - 1].start < out[i].inst[k].start);
    }
    CHECK(found);
}

TEST(mig_two_3g_fill_the_gpu) {
    const model_gpu_product *p = gpu("NVIDIA-A100-SXM4-40GB");
    CHECK(p);
    model_mig_layout l = {0};
    put(&l, p, "3g.20gb", 0);
    put(&l, p, "3g.20gb", 4);
    CHECK(model_mig_layout_valid(p, &l, NULL, 0));
    for (int i = 0; i < p->nprofiles; i++)
        CHECK_MSG(model_mig_free_starts(p, &l, i) == 0, "%s still fits", p->profiles[i].name);
    char why[256] = "";
    CHECK(!model_mig_can_add(p, &l, prof(p, "1g.5gb"), 3, why, sizeof why));
    CHECK_CONTAINS(why, "overlaps");
}

TEST(mig_free_starts_on_a_partly_filled_gpu) {
    const model_gpu_product *p = gpu("NVIDIA-A100-SXM4-40GB");
    CHECK(p);
    model_mig_layout l = {0};
    CHECK_INT(model_mig_free_starts(p, &l, prof(p, "3g.20gb")), 0x11);
    put(&l, p, "2g.10gb", 2);
    CHECK_INT(model_mig_used_mask(p, &l), 0x0c);
    CHECK_INT(model_mig_free_starts(p, &l, prof(p, "1g.5gb")), 0x73);    /* 0,1,4,5,6 */
    CHECK_INT(model_mig_free_starts(p, &l, prof(p, "1g.10gb")), 0x51);   /* 0,4,6 */
    CHECK_INT(model_mig_free_starts(p, &l, prof(p, "2g.10gb")), 0x11);   /* 0,4 */
    CHECK_INT(model_mig_free_starts(p, &l, prof(p, "3g.20gb")), 0x10);   /* 4 */
    CHECK_INT(model_mig_free_starts(p, &l, prof(p, "4g.20gb")), 0);
    CHECK_INT(model_mig_free_starts(p, &l, prof(p, "7g.40gb")), 0);
    CHECK_INT(model_mig_free_starts(p, &l, -1), 0);
    CHECK_INT(model_mig_free_starts(p, &l, p->nprofiles), 0);
    put(&l, p, "1g.5gb+me", 5);
    CHECK_INT(model_mig_free_starts(p, &l, prof(p, "1g.5gb+me")), 0);
    CHECK_INT(model_mig_free_starts(p, &l, prof(p, "3g.20gb")), 0);
    CHECK_INT(model_mig_free_starts(p, &l, prof(p, "1g.5gb")), 0x53);    /* 0,1,4,6 */
}

TEST(mig_can_add_reasons) {
    const model_gpu_product *a40 = gpu("NVIDIA-A100-SXM4-40GB");
    CHECK(a40);
    model_mig_layout l = {0};
    char why[256];
    CHECK(!model_mig_can_add(a40, &l, prof(a40, "3g.20gb"), 2, why, sizeof why));
    CHECK_CONTAINS(why, "3g.20gb cannot start at memory slice 2 (legal starts: 0,4)");
    CHECK(!model_mig_can_add(a40, &l, prof(a40, "1g.5gb"), 7, why, sizeof why));
    CHECK_CONTAINS(why, "legal starts: 0,1,2,3,4,5,6");
    CHECK(!model_mig_can_add(a40, &l, prof(a40, "1g.5gb"), -1, why, sizeof why));
    CHECK(!model_mig_can_add(a40, &l, prof(a40, "1g.5gb"), 8, why, sizeof why));
    CHECK(!model_mig_can_add(a40, &l, 99, 0, why, sizeof why));
    CHECK_CONTAINS(why, "no MIG profile number 99");
    CHECK(model_mig_can_add(a40, &l, prof(a40, "4g.20gb"), 0, NULL, 0));

    put(&l, a40, "4g.20gb", 0);
    CHECK(!model_mig_can_add(a40, &l, prof(a40, "2g.10gb"), 2, why, sizeof why));
    CHECK_CONTAINS(why, "2g.10gb@2 overlaps");

    /* Max instances, with a table that would otherwise allow more. */
    model_gpu_product capped = *a40;
    capped.profiles[prof(a40, "1g.5gb")].max_instances = 2;
    model_mig_layout c = {0};
    put(&c, &capped, "1g.5gb", 0);
    put(&c, &capped, "1g.5gb", 1);
    CHECK(!model_mig_can_add(&capped, &c, prof(a40, "1g.5gb"), 2, why, sizeof why));
    CHECK_CONTAINS(why, "1g.5gb allows at most 2 instances");

    /* Compute slices, on a part that has fewer than its memory suggests. */
    model_gpu_product six = *a40;
    six.mig_compute_slices = 6;
    model_mig_layout d = {0};
    put(&d, &six, "4g.20gb", 0);
    CHECK(!model_mig_can_add(&six, &d, prof(a40, "3g.20gb"), 4, why, sizeof why));
    CHECK_CONTAINS(why, "3g.20gb needs 3 compute slices but only 2 of 6 are free");
    CHECK(model_mig_can_add(&six, &d, prof(a40, "2g.10gb"), 4, why, sizeof why));

    /* One media instance per GPU, across profiles. */
    const model_gpu_product *a30 = gpu("NVIDIA-A30");
    CHECK(a30);
    model_mig_layout m = {0};
    put(&m, a30, "1g.6gb+me", 0);
    CHECK(!model_mig_can_add(a30, &m, prof(a30, "2g.12gb+me"), 2, why, sizeof why));
    CHECK_CONTAINS(why, "only one +me instance per GPU: 1g.6gb+me@0");
    CHECK(model_mig_can_add(a30, &m, prof(a30, "2g.12gb"), 2, why, sizeof why));

    /* A layout already holding the maximum number of instances takes no more. */
    model_gpu_product wide = *a40;
    model_mig_layout full = {0};
    full.n = MODEL_MIG_MAX_INSTANCES;
    CHECK(!model_mig_can_add(&wide, &full, prof(a40, "1g.5gb"), 0, why, sizeof why));
    CHECK_CONTAINS(why, "at most 8 MIG instances");

    /* Not a MIG part at all. */
    const model_gpu_product *t4 = gpu("Tesla-T4");
    model_mig_layout e = {0};
    CHECK(!model_mig_can_add(t4, &e, 0, 0, why, sizeof why));
    CHECK_CONTAINS(why, "Tesla-T4");
}

TEST(mig_layout_valid_names_the_offender) {
    const model_gpu_product *p = gpu("NVIDIA-A100-SXM4-40GB");
    CHECK(p);
    char why[256];
    model_mig_layout l = {0};
    CHECK(model_mig_layout_valid(p, &l, why, sizeof why));
    put(&l, p, "2g.10gb", 0);
    put(&l, p, "1g.5gb", 2);
    put(&l, p, "3g.20gb", 0);
    CHECK(!model_mig_layout_valid(p, &l, why, sizeof why));
    CHECK_CONTAINS(why, "instance 2 (3g.20gb@0)");
    CHECK_CONTAINS(why, "overlaps");
    CHECK(!model_mig_layout_valid(p, &l, NULL, 0));

    model_mig_layout bad = {0};
    bad.n = 1;
    bad.inst[0].profile = 42;
    CHECK(!model_mig_layout_valid(p, &bad, why, sizeof why));
    CHECK_CONTAINS(why, "instance 0 (?@0)");
    CHECK_INT(model_mig_used_mask(p, &bad), 0);
    bad.n = 9;
    CHECK(!model_mig_layout_valid(p, &bad, why, sizeof why));
    CHECK_CONTAINS(why, "9 instances");
    bad.n = -1;
    CHECK(!model_mig_layout_valid(p, &bad, why, sizeof why));

    model_mig_layout two = {0};
    put(&two, p, "1g.5gb+me", 0);
    put(&two, p, "1g.5gb+me", 3);
    CHECK(!model_mig_layout_valid(p, &two, why, sizeof why));
    CHECK_CONTAINS(why, "instance 1 (1g.5gb+me@3)");
}

TEST(mig_layouts_order_and_limit) {
    const model_gpu_product *p = gpu("NVIDIA-A100-SXM4-40GB");
    CHECK(p);
    model_mig_config cfg;
    char err[256], s[128];
    CHECK_INT(model_mig_config_parse(p, "{\"1g.5gb\": 1}", &cfg, err, sizeof err), 0);
    model_mig_layout out[4];
    memset(out, 0x7f, sizeof out);
    CHECK_INT(model_mig_layouts(p, &cfg, out, 3), 7);  /* total, though only 3 were written */
    for (int i = 0; i < 3; i++) {
        CHECK_INT(out[i].n, 1);
        CHECK_INT(out[i].inst[0].start, i);
    }
    CHECK_INT(out[3].n, 0x7f7f7f7f);
    CHECK_INT(model_mig_layouts(p, &cfg, NULL, 0), 7);

    /* Lexicographic by (start, profile) across the whole sequence. */
    CHECK_INT(model_mig_config_parse(p, "{\"2g.10gb\": 1, \"1g.5gb\": 1}", &cfg, err, sizeof err), 0);
    model_mig_layout all[32];
    int n = model_mig_layouts(p, &cfg, all, 32);
    /* 2g at 0/2/4, then a 1g on one of the 5 remaining 1g starts: 3 * 5. */
    CHECK_INT(n, 15);
    const char *expect[] = {"1g.5gb@0 2g.10gb@2", "1g.5gb@0 2g.10gb@4", "2g.10gb@0 1g.5gb@2",
                            "2g.10gb@0 1g.5gb@3", "2g.10gb@0 1g.5gb@4"};
    for (int i = 0; i < 5; i++) {
        model_mig_layout_format(p, &all[i], s, sizeof s);
        CHECK_STR(s, expect[i]);
    }
    model_mig_layout_format(p, &all[n - 1], s, sizeof s);
    CHECK_STR(s, "2g.10gb@4 1g.5gb@6");

    /* A config asking for more instances than a GPU can hold is simply impossible. */
    model_mig_config big = {0};
    big.n = 2;
    big.item[0].profile = (int8_t)prof(p, "1g.5gb");
    big.item[0].count = 7;
    big.item[1].profile = (int8_t)prof(p, "1g.10gb");
    big.item[1].count = 4;
    CHECK_INT(model_mig_layouts(p, &big, out, 4), 0);
    big.item[1].profile = 99;
    CHECK_INT(model_mig_layouts(p, &big, out, 4), 0);
}

TEST(mig_config_parse) {
    const model_gpu_product *p = gpu("NVIDIA-A100-SXM4-40GB");
    const model_gpu_product *a80 = gpu("NVIDIA-A100-SXM4-80GB");
    CHECK(p && a80);
    model_mig_config cfg;
    char err[256];
    CHECK_INT(model_mig_config_parse(p, "{\"3g.20gb\": 1, \"2g.10gb\": 2, \"1g.5gb\": 0}", &cfg, err, sizeof err), 0);
    CHECK_INT(cfg.n, 2);  /* zero counts ask for nothing */
    CHECK_INT(cfg.item[0].profile, prof(p, "3g.20gb"));
    CHECK_INT(cfg.item[0].count, 1);
    CHECK_INT(cfg.item[1].profile, prof(p, "2g.10gb"));
    CHECK_INT(cfg.item[1].count, 2);

    CHECK_INT(model_mig_config_parse(a80, "{\"1g.10gb.me\": 1}", &cfg, err, sizeof err), 0);
    CHECK_INT(cfg.n, 1);
    CHECK_INT(cfg.item[0].profile, prof(a80, "1g.10gb+me"));

    CHECK_INT(model_mig_config_parse(p, "{\"5g.50gb\": 1}", &cfg, err, sizeof err), -1);
    CHECK_STR(err, "unknown MIG profile \"5g.50gb\" on NVIDIA-A100-SXM4-40GB");
    CHECK_INT(cfg.n, 0);
    /* Names are per product: 1g.20gb exists on the 80GB part only. */
    CHECK_INT(model_mig_config_parse(p, "{\"1g.20gb\": 1}", &cfg, err, sizeof err), -1);
    CHECK_CONTAINS(err, "unknown MIG profile \"1g.20gb\"");
    CHECK_INT(model_mig_config_parse(p, "{\"1g.5gb\": -1}", &cfg, err, sizeof err), -1);
    CHECK_STR(err, "count for \"1g.5gb\" must be a whole number >= 0");
    CHECK_INT(model_mig_config_parse(p, "{\"1g.5gb\": 1.5}", &cfg, err, sizeof err), -1);
    CHECK_STR(err, "count for \"1g.5gb\" must be a whole number >= 0");
    CHECK_INT(model_mig_config_parse(p, "{\"2g.10gb\": 1, \"1g.5gb\": \"2\"}", &cfg, err, sizeof err), -1);
    CHECK_STR(err, "count for \"1g.5gb\" must be a whole number >= 0");
    CHECK_INT(cfg.n, 0);  /* nothing half-parsed is left behind */
    CHECK_INT(model_mig_config_parse(p, "{\"1g.5gb\": 1000}", &cfg, err, sizeof err), -1);
    CHECK_CONTAINS(err, "count for \"1g.5gb\" must be at most 8");
    CHECK_INT(model_mig_config_parse(p, "{\"1g.5gb+me\": 1, \"1g.5gb.me\": 0}", &cfg, err, sizeof err), -1);
    CHECK_CONTAINS(err, "\"1g.5gb+me\" is given twice");
    CHECK_INT(model_mig_config_parse(p, "[1, 2]", &cfg, err, sizeof err), -1);
    CHECK_CONTAINS(err, "must be a JSON object");
    CHECK_INT(model_mig_config_parse(p, "{\"1g.5gb\": ", &cfg, err, sizeof err), -1);
    CHECK_CONTAINS(err, "not valid JSON");
    CHECK_INT(model_mig_config_parse(p, NULL, &cfg, err, sizeof err), -1);
    CHECK_INT(model_mig_config_parse(p, "{}", &cfg, err, sizeof err), 0);
    CHECK_INT(cfg.n, 0);
}

TEST(mig_layout_format_truncates_safely) {
    const model_gpu_product *p = gpu("NVIDIA-A100-SXM4-40GB");
    CHECK(p);
    model_mig_layout l = {0};
    put(&l, p, "3g.20gb", 4);
    put(&l, p, "2g.10gb", 0);
    put(&l, p, "2g.10gb", 2);
    char s[64];
    model_mig_layout_format(p, &l, s, sizeof s);
    CHECK_STR(s, "3g.20gb@4 2g.10gb@0 2g.10gb@2");
    char small[12];
    memset(small, 'x', sizeof small);
    model_mig_layout_format(p, &l, small, sizeof small);
    CHECK(memchr(small, 0, sizeof small) != NULL);
    CHECK_STR(small, "3g.20gb@4");
    model_mig_layout_format(p, &l, small, 0);  /* no room at all: must not write */
    l.inst[1].profile = 77;
    model_mig_layout_format(p, &l, s, sizeof s);
    CHECK_STR(s, "3g.20gb@4 ?@0 2g.10gb@2");
}

/* ---- derived counts: every valid placement set of the non-media profiles ---- */

typedef struct census {
    const model_gpu_product *p;
    int sets, maximal, nkinds;
    int kinds[128][MODEL_MAX_PROFILES];  /* distinct per-profile counts of maximal sets */
} census;

static bool fits_more(const census *c, const model_mig_layout *l) {
    for (int i = 0; i < c->p->nprofiles; i++)
        if (!c->p->profiles[i].media && model_mig_free_starts(c->p, l, i)) return true;
    return false;
}

/* Instances never overlap, so adding them in increasing start order names each set once. */
static void census_walk(census *c, model_mig_layout *l, int min_start) {
    c->sets++;
    if (!fits_more(c, l)) {
        c->maximal++;
        int counts[MODEL_MAX_PROFILES] = {0};
        for (int i = 0; i < l->n; i++) counts[l->inst[i].profile]++;
        int k;
        for (k = 0; k < c->nkinds; k++)
            if (memcmp(c->kinds[k], counts, sizeof counts) == 0) break;
        if (k == c->nkinds && c->nkinds < 128) memcpy(c->kinds[c->nkinds++], counts, sizeof counts);
    }
    for (int s = min_start; s < MODEL_MIG_MAX_SLICES; s++)
        for (int i = 0; i < c->p->nprofiles; i++) {
            if (c->p->profiles[i].media || !model_mig_can_add(c->p, l, i, s, NULL, 0)) continue;
            l->inst[l->n++] = (model_mig_placement){(int8_t)i, (int8_t)s};
            census_walk(c, l, s + 1);
            l->n--;
        }
}

static census *take_census(const char *product) {
    census *c = calloc(1, sizeof *c);
    c->p = gpu(product);
    model_mig_layout l = {0};
    if (c->p) census_walk(c, &l, 0);
    return c;
}

TEST(mig_census_8_slot_parts) {
    const char *parts[] = {"NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-SXM4-40GB", "NVIDIA-H100-80GB-HBM3", "NVIDIA-B200"};
    for (int i = 0; i < 4; i++) {
        census *c = take_census(parts[i]);
        int sets = c->sets, maximal = c->maximal, kinds = c->nkinds;
        free(c);
        CHECK_MSG(sets == 723 && maximal == 78 && kinds == 38, "%s: %d sets, %d maximal, %d multisets", parts[i],
                  sets, maximal, kinds);
    }
}

TEST(mig_census_a30) {
    census *c = take_census("NVIDIA-A30");
    int sets = c->sets, maximal = c->maximal, kinds = c->nkinds;
    free(c);
    CHECK_INT(sets, 26);
    CHECK_INT(maximal, 5);
    CHECK_INT(kinds, 4);
}

TEST(mig_census_agrees_with_layouts) {
    /* Fed back as configs, the maximal multisets on A100-80GB must give back exactly the
     * 78 maximal placement sets (layouts finds every set of a multiset, each once). */
    census *c = take_census("NVIDIA-A100-SXM4-80GB");
    int maximal = 0, realised = 0;
    for (int k = 0; k < c->nkinds; k++) {
        model_mig_config cfg = {0};
        for (int i = 0; i < c->p->nprofiles; i++)
            if (c->kinds[k][i]) {
                cfg.item[cfg.n].profile = (int8_t)i;
                cfg.item[cfg.n].count = (int8_t)c->kinds[k][i];
                cfg.n++;
            }
        model_mig_layout out[64];
        int n = model_mig_layouts(c->p, &cfg, out, 64);
        if (n >= 1 && n <= 64) realised++;
        for (int j = 0; j < n && j < 64; j++)
            if (!fits_more(c, &out[j])) maximal++;
    }
    int kinds = c->nkinds;
    free(c);
    CHECK_INT(realised, kinds);
    CHECK_INT(maximal, 78);
}

/* The answer-only path of model_mig_can_add (why NULL) and model_mig_free_starts(_all)
 * work on bit masks; they must agree with the rule-by-rule path that explains itself, on
 * every MIG product, on random layouts grown one legal instance at a time and on layouts
 * with out-of-range entries. */
TEST(mig_fast_starts_agree_with_explained_rules) {
    const model_catalog *cat = model_catalog_default();
    uint64_t x = 0x2545f4914f6cdd1dull;
    int checked = 0;
    for (int ci = 0; ci < model_catalog_count(cat); ci++) {
        const model_gpu_product *p = model_catalog_at(cat, ci);
        if (!p->mig_capable || p->nprofiles == 0) continue;
        for (int round = 0; round < 300; round++) {
            model_mig_layout l = {0};
            int steps = (int)(x % 10);
            for (int k = 0; k < steps; k++) {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                int pi = (int)(x % (uint64_t)(p->nprofiles + 1)) - (round % 7 == 0 ? 1 : 0);
                int st = (int)((x >> 20) % 9);
                char why[160];
                if (round % 11 == 0 && l.n < MODEL_MIG_MAX_INSTANCES)   /* forged: anything goes */
                    l.inst[l.n++] = (model_mig_placement){(int8_t)pi, (int8_t)st};
                else if (model_mig_can_add(p, &l, pi, st, why, sizeof why))
                    l.inst[l.n++] = (model_mig_placement){(int8_t)pi, (int8_t)st};
            }
            uint8_t all[MODEL_MAX_PROFILES];
            model_mig_free_starts_all(p, &l, all);
            for (int pi = -1; pi <= p->nprofiles; pi++) {
                uint8_t slow = 0;
                for (int st = -1; st <= MODEL_MIG_MAX_SLICES; st++) {
                    char why[160];
                    bool a = model_mig_can_add(p, &l, pi, st, why, sizeof why);
                    bool b = model_mig_can_add(p, &l, pi, st, NULL, 0);
                    CHECK_MSG(a == b, "%s profile %d start %d: explained %d, fast %d", p->product, pi, st, a, b);
                    if (a && st >= 0 && st < MODEL_MIG_MAX_SLICES) slow |= (uint8_t)(1u << st);
                    checked++;
                }
                CHECK_INT(model_mig_free_starts(p, &l, pi), slow);
                if (pi >= 0 && pi < MODEL_MAX_PROFILES) CHECK_INT(all[pi], pi < p->nprofiles ? slow : 0);
            }
        }
    }
    CHECK(checked > 10000);
}
