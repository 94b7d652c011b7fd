/* json.c -- typed field access with errors that name the field; see json.h. */
#include "sim/json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *sim_read_file(const char *path, size_t *len, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb, cap *= 2;
    }
    bool bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        snprintf(err, errlen, "%s: cannot read the file", path);
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

static const cJSON *field(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key); }

int sim_json_str(const cJSON *o, const char *where, const char *key, bool required, const char **out, char *err,
                 size_t errlen) {
    const cJSON *v = field(o, key);
    if (!v) {
        if (!required) return 1;
        snprintf(err, errlen, "%s.%s: missing (a string is required)", where, key);
        return -1;
    }
    if (!cJSON_IsString(v)) {
        snprintf(err, errlen, "%s.%s: expected a string", where, key);
        return -1;
    }
    *out = v->valuestring;
    return 0;
}

int sim_json_num(const cJSON *o, const char *where, const char *key, bool required, double lo, double hi,
                 double *out, char *err, size_t errlen) {
    const cJSON *v = field(o, key);
    if (!v) {
        if (!required) return 1;
        snprintf(err, errlen, "%s.%s: missing (a number is required)", where, key);
        return -1;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi) {
        snprintf(err, errlen, "%s.%s: expected a number in [%g, %g]", where, key, lo, hi);
        return -1;
    }
    *out = v->valuedouble;
    return 0;
}

int sim_json_int(const cJSON *o, const char *where, const char *key, bool required, int64_t lo, int64_t hi,
                 int64_t *out, char *err, size_t errlen) {
    double d;
    int rc = sim_json_num(o, where, key, required, (double)lo, (double)hi, &d, err, errlen);
    if (rc == -1 && field(o, key)) {
        snprintf(err, errlen, "%s.%s: expected a whole number in [%lld, %lld]", where, key, (long long)lo,
                 (long long)hi);
        return -1;
    }
    if (rc != 0) return rc;
    if (d != floor(d)) {
        snprintf(err, errlen, "%s.%s: expected a whole number, got %g", where, key, d);
        return -1;
    }
    *out = (int64_t)d;
    return 0;
}

int sim_json_known_keys(const cJSON *o, const char *where, const char *const *keys, char *err, size_t errlen) {
    for (const cJSON *c = o ? o->child : NULL; c; c = c->next) {
        bool ok = false;
        for (int i = 0; keys[i] && !ok; i++) ok = c->string && !strcmp(c->string, keys[i]);
        if (!ok) {
            snprintf(err, errlen, "%s: unknown key \"%s\"", where, c->string ? c->string : "");
            return -1;
        }
    }
    return 0;
}
