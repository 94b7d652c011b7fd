/* model_helpers.h -- what several model tests share: a node read from tests/fixtures, a DRA fixture's object. */
#ifndef TEST_MODEL_HELPERS_H
#define TEST_MODEL_HELPERS_H

#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "harness.h"
#include "model/node.h"

/* The object in tests/fixtures/dra/<name> (caller deletes). */
static inline cJSON *dra_fixture(const char *name) {
    char path[128];
    snprintf(path, sizeof path, "dra/%s", name);
    char *t = test_fixture(path, NULL);
    cJSON *o = cJSON_Parse(t);
    free(t);
    return o;
}

/* The model of the Node object in tests/fixtures/<rel> (caller frees), or NULL with the reason printed. */
static inline model_node *fixture_node(const char *rel) {
    size_t len;
    char *buf = test_fixture(rel, &len), err[256] = "";
    model_node *n = model_node_from_json_text(buf, len, NULL, err, sizeof err);
    free(buf);
    if (!n) printf("    %s: %s\n", rel, err);
    return n;
}

#endif
