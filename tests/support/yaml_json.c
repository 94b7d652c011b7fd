/* yaml_json.c -- libyaml's event stream folded into cJSON trees (yaml_json.h). */
#include "tests/support/yaml_json.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* A plain scalar as YAML 1.1's core schema reads it (what kubectl sees). */
static cJSON *plain_scalar(const char *s) {
    if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE")) return cJSON_CreateTrue();
    if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE")) return cJSON_CreateFalse();
    if (!*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL")) return cJSON_CreateNull();
    char *end = NULL;
    const char *digits = s + (*s == '-' || *s == '+');
    if (*digits >= '0' && *digits <= '9') {
        double v = strtod(s, &end);
        if (end && !*end) return cJSON_CreateNumber(v);
    }
    return cJSON_CreateString(s);
}

/* Parse one node whose first event is ev (consumed by the caller). NULL with err. */
static cJSON *node(yaml_parser_t *p, yaml_event_t *ev, char *err, size_t errlen, int depth) {
    if (depth > 64) { snprintf(err, errlen, "nested too deep"); return NULL; }
    if (ev->type == YAML_SCALAR_EVENT) {
        const char *v = (const char *)ev->data.scalar.value;
        return ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ? plain_scalar(v) : cJSON_CreateString(v);
    }
    if (ev->type == YAML_ALIAS_EVENT) { snprintf(err, errlen, "YAML aliases are not supported"); return NULL; }
    bool map = ev->type == YAML_MAPPING_START_EVENT;
    if (!map && ev->type != YAML_SEQUENCE_START_EVENT) { snprintf(err, errlen, "unexpected YAML event %d", ev->type); return NULL; }
    cJSON *out = map ? cJSON_CreateObject() : cJSON_CreateArray();
    for (;;) {
        yaml_event_t e;
        if (!yaml_parser_parse(p, &e)) {
            snprintf(err, errlen, "line %zu: %s", p->problem_mark.line + 1, p->problem ? p->problem : "syntax error");
            cJSON_Delete(out);
            return NULL;
        }
        if (e.type == YAML_MAPPING_END_EVENT || e.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&e);
            return out;
        }
        if (map) {
            if (e.type != YAML_SCALAR_EVENT) {
                snprintf(err, errlen, "line %zu: a mapping key must be a scalar", e.start_mark.line + 1);
                yaml_event_delete(&e);
                cJSON_Delete(out);
                return NULL;
            }
            char *key = strdup((const char *)e.data.scalar.value);
            yaml_event_delete(&e);
            yaml_event_t ve;
            if (!key || !yaml_parser_parse(p, &ve)) {
                snprintf(err, errlen, "line %zu: %s", p->problem_mark.line + 1, p->problem ? p->problem : "no value");
                free(key);
                cJSON_Delete(out);
                return NULL;
            }
            cJSON *v = node(p, &ve, err, errlen, depth + 1);
            yaml_event_delete(&ve);
            if (!v) { free(key); cJSON_Delete(out); return NULL; }
            cJSON_AddItemToObject(out, key, v);
            free(key);
        } else {
            cJSON *v = node(p, &e, err, errlen, depth + 1);
            yaml_event_delete(&e);
            if (!v) { cJSON_Delete(out); return NULL; }
            cJSON_AddItemToArray(out, v);
        }
    }
}

cJSON *yaml_json_parse_all(const char *text, size_t len, char *err, size_t errlen) {
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) { snprintf(err, errlen, "out of memory"); return NULL; }
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    cJSON *docs = cJSON_CreateArray();
    for (;;) {
        yaml_event_t e;
        if (!yaml_parser_parse(&p, &e)) {
            snprintf(err, errlen, "line %zu: %s", p.problem_mark.line + 1, p.problem ? p.problem : "syntax error");
            cJSON_Delete(docs);
            docs = NULL;
            break;
        }
        yaml_event_type_t t = e.type;
        if (t == YAML_MAPPING_START_EVENT || t == YAML_SEQUENCE_START_EVENT || t == YAML_SCALAR_EVENT) {
            cJSON *d = node(&p, &e, err, errlen, 0);
            yaml_event_delete(&e);
            if (!d) { cJSON_Delete(docs); docs = NULL; break; }
            if (cJSON_IsNull(d)) cJSON_Delete(d);
            else cJSON_AddItemToArray(docs, d);
            continue;
        }
        yaml_event_delete(&e);
        if (t == YAML_STREAM_END_EVENT) break;
    }
    yaml_parser_delete(&p);
    return docs;
}

cJSON *yaml_json_load_all(const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) { snprintf(err, errlen, "%s: cannot open", path); return NULL; }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 16384;
            char *nb = realloc(buf, cap);
            if (!nb) { free(buf); fclose(f); snprintf(err, errlen, "out of memory"); return NULL; }
            buf = nb;
        }
        size_t r = fread(buf + n, 1, 4096, f);
        n += r;
        if (r < 4096) break;
    }
    fclose(f);
    char perr[256];
    cJSON *docs = yaml_json_parse_all(buf, n, perr, sizeof perr);
    free(buf);
    if (!docs) snprintf(err, errlen, "%s: %s", path, perr);
    return docs;
}
