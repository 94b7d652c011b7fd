/* test_node_compact.c -- model_node_compact and model_node_trim (node.h): the extender keeps every node's
 * model compacted (room for its own GPUs only) and gives a node's allocation table back when its last pod
 * leaves. A compacted node must answer exactly as the node it was made from, refuse to grow, and become
 * growable again through a clone.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "model_helpers.h"
#include "model/catalog.h"
#include "model/fit.h"
#include "model/node.h"

/* The first fit of r on n, formatted ("" when none), so two nodes can be compared by their answers. */
static void first_fit(const model_node *n, const model_request *r, char *out, size_t len) {
    model_assignment a;
    out[0] = 0;
    if (model_fit(n, r, &a, 1, NULL, 0) > 0) model_assignment_format(n, &a, out, len);
}

TEST(node_compact_answers_as_the_original_and_refuses_to_grow) {
    model_node *n = fixture_node("nodes/plain-a100-80gb-x8.json");
    CHECK(n && n->ngpus == 8 && n->gpus_cap == MODEL_MAX_GPUS);
    model_request r = {.kind = MODEL_REQ_WHOLE, .count = 2};
    model_assignment a;
    char err[256];
    CHECK(model_fit(n, &r, &a, 1, err, sizeof err) > 0);
    CHECK_INT(model_assign(n, "pod-a", &a, err, sizeof err), 0);

    model_node *c = model_node_compact(n);
    CHECK(c && c->gpus_cap == 8 && c->ngpus == 8 && c->nlive == 1);
    char why[256];
    CHECK_MSG(model_node_check(c, why, sizeof why), "%s", why);
    char fa[256], fb[256];
    model_request r1 = {.kind = MODEL_REQ_WHOLE, .count = 1};
    first_fit(n, &r1, fa, sizeof fa);
    first_fit(c, &r1, fb, sizeof fb);
    CHECK(fa[0]);
    CHECK_STR(fb, fa);
    /* no room for a ninth GPU on the compacted node; a clone of it has room again */
    CHECK(model_node_add_gpu(c, n->gpus[0].product, MODEL_GPU_WHOLE, 1, 0) == NULL);
    model_node *g = model_node_clone(c);
    CHECK(g && g->gpus_cap == MODEL_MAX_GPUS);
    CHECK(model_node_add_gpu(g, n->gpus[0].product, MODEL_GPU_WHOLE, 1, 0) != NULL);
    CHECK_INT(g->ngpus, 9);
    CHECK_MSG(model_node_check(g, why, sizeof why), "%s", why);
    /* releasing on the compacted node frees what the original frees */
    CHECK_INT(model_release(c, "pod-a"), 0);
    CHECK_INT(model_release(n, "pod-a"), 0);
    model_request r8 = {.kind = MODEL_REQ_WHOLE, .count = 8};
    first_fit(n, &r8, fa, sizeof fa);
    first_fit(c, &r8, fb, sizeof fb);
    CHECK(fa[0]);
    CHECK_STR(fb, fa);
    model_node_free(g);
    model_node_free(c);
    model_node_free(n);
}

TEST(node_compact_keeps_an_unknown_products_facts) {
    model_node *n = fixture_node("nodes/unknown-product.json");
    CHECK(n && n->ngpus == 2 && n->gpus[0].product == &n->local_product);
    model_node *c = model_node_compact(n);
    model_node_free(n);   /* the compacted node must not lean on the original's storage */
    CHECK(c && c->gpus[0].product == &c->local_product && c->gpus[1].product == &c->local_product);
    CHECK_STR(c->local_product.product, "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition");
    model_node *g = model_node_clone(c);
    CHECK(g && g->gpus[0].product == &g->local_product);
    CHECK_STR(g->local_product.product, "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition");
    model_node_free(g);
    model_node_free(c);
}

TEST(node_trim_gives_the_table_back_only_when_empty) {
    model_node *n = fixture_node("nodes/plain-a100-80gb-x8.json");
    model_request r = {.kind = MODEL_REQ_WHOLE, .count = 1};
    model_assignment a[2];
    char err[256];
    CHECK(model_fit(n, &r, a, 1, err, sizeof err) > 0);
    CHECK_INT(model_assign(n, "pod-a", &a[0], err, sizeof err), 0);
    CHECK(model_fit(n, &r, &a[1], 1, err, sizeof err) > 0);
    CHECK_INT(model_assign(n, "pod-b", &a[1], err, sizeof err), 0);
    model_release(n, "pod-a");
    model_node_trim(n);   /* pod-b still holds: nothing changes */
    CHECK(n->allocs && model_node_find(n, "pod-b"));
    model_release(n, "pod-b");
    model_node_trim(n);
    CHECK(!n->allocs && n->allocs_cap == 0 && n->nallocs == 0);
    char why[256];
    CHECK_MSG(model_node_check(n, why, sizeof why), "%s", why);
    CHECK_INT(model_assign(n, "pod-c", &a[0], err, sizeof err), 0);   /* and it grows again */
    CHECK(model_node_find(n, "pod-c"));
    model_node_free(n);
}
