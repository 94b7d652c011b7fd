/* protowire.c -- the protobuf wire format for the Pod Resources messages (see protowire.h for the rules). */
#include "agent/protowire.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- encoding ------------------------------------------------------------------------------------------ */

void agent_pw_buf_free(agent_pw_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

static void buf_add(agent_pw_buf *b, const void *data, size_t len) {
    if (b->oom || len == 0) return;
    if (len > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap - b->n < len) {
            if (cap > SIZE_MAX / 2) { b->oom = 1; return; }
            cap *= 2;
        }
        uint8_t *p = realloc(b->p, cap);
        if (!p) { b->oom = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, len);
    b->n += len;
}

void agent_pw_put_varint(agent_pw_buf *b, uint64_t v) {
    uint8_t tmp[10];
    size_t n = 0;
    do {
        tmp[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) tmp[n] |= 0x80;
        n++;
    } while (v);
    buf_add(b, tmp, n);
}

void agent_pw_put_tag(agent_pw_buf *b, uint32_t field, int wire_type) {
    agent_pw_put_varint(b, ((uint64_t)field << 3) | (uint64_t)(wire_type & 7));
}

void agent_pw_put_bytes(agent_pw_buf *b, uint32_t field, const void *data, size_t len) {
    agent_pw_put_tag(b, field, AGENT_PW_LEN);
    agent_pw_put_varint(b, len);
    buf_add(b, data, len);
}

void agent_pw_put_string(agent_pw_buf *b, uint32_t field, const char *s) {
    /* proto3 leaves empty strings out */
    if (s && *s) agent_pw_put_bytes(b, field, s, strlen(s));
}

void agent_pw_put_int64(agent_pw_buf *b, uint32_t field, int64_t v) {
    agent_pw_put_tag(b, field, AGENT_PW_VARINT);
    agent_pw_put_varint(b, (uint64_t)v);
}

/* A sub-message: encoded into sub, then written as a length-delimited field of b. */
static void put_message(agent_pw_buf *b, uint32_t field, agent_pw_buf *sub) {
    if (sub->oom) b->oom = 1;
    else agent_pw_put_bytes(b, field, sub->p, sub->n);
    agent_pw_buf_free(sub);
}

static void encode_devices(agent_pw_buf *b, uint32_t field, const agent_pr_devices *d) {
    agent_pw_buf m = {0};
    agent_pw_put_string(&m, 1, d->resource);
    for (size_t i = 0; i < d->nids; i++) agent_pw_put_bytes(&m, 2, d->ids[i], strlen(d->ids[i]));
    if (d->nnuma) {
        agent_pw_buf topo = {0};
        for (size_t i = 0; i < d->nnuma; i++) {
            agent_pw_buf node = {0};
            if (d->numa[i]) agent_pw_put_int64(&node, 1, d->numa[i]);
            put_message(&topo, 1, &node);
        }
        put_message(&m, 3, &topo);
    }
    put_message(b, field, &m);
}

int agent_pw_encode_list(const agent_pr_list *l, agent_pw_buf *b) {
    for (size_t i = 0; i < l->npods; i++) {
        const agent_pr_pod *pod = &l->pods[i];
        agent_pw_buf pm = {0};
        agent_pw_put_string(&pm, 1, pod->name);
        agent_pw_put_string(&pm, 2, pod->namespace_);
        for (size_t c = 0; c < pod->ncontainers; c++) {
            const agent_pr_container *ct = &pod->containers[c];
            agent_pw_buf cm = {0};
            agent_pw_put_string(&cm, 1, ct->name);
            for (size_t d = 0; d < ct->ndevices; d++) encode_devices(&cm, 2, &ct->devices[d]);
            put_message(&pm, 3, &cm);
        }
        put_message(b, 1, &pm);
    }
    return b->oom ? -1 : 0;
}

int agent_pw_encode_allocatable(const agent_pr_allocatable *a, agent_pw_buf *b) {
    for (size_t i = 0; i < a->ndevices; i++) encode_devices(b, 1, &a->devices[i]);
    return b->oom ? -1 : 0;
}

/* ---- decoding ------------------------------------------------------------------------------------------ */

typedef struct reader {
    const uint8_t *base;     /* the whole message, for offsets in errors */
    size_t items;            /* strings and sub-messages made so far (AGENT_PW_MAX_ITEMS) */
    char *err;
    size_t errlen;
} reader;

typedef struct span {
    const uint8_t *p, *end;
} span;

__attribute__((format(printf, 3, 4))) static int fail(reader *r, const uint8_t *at, const char *fmt, ...) {
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(r->err, r->errlen, "%s at byte %zu", what, (size_t)(at - r->base));
    return -1;
}

/* On the way out of a failed sub-message: "containers[2]." in front of what the inner level said. */
static int fail_in(reader *r, const char *field, size_t index) {
    char pre[64];
    int n = snprintf(pre, sizeof pre, "%s[%zu].", field, index);
    size_t have = strlen(r->err);
    if (n <= 0 || r->errlen == 0) return -1;
    size_t pn = (size_t)n;
    if (pn + 1 >= r->errlen) return -1;
    if (have + pn + 1 > r->errlen) have = r->errlen - pn - 1;
    memmove(r->err + pn, r->err, have);
    memcpy(r->err, pre, pn);
    r->err[have + pn] = '\0';
    return -1;
}

static int rd_varint(reader *r, span *s, uint64_t *v) {
    const uint8_t *start = s->p;
    uint64_t x = 0;
    for (int i = 0; i < 10; i++) {
        if (s->p >= s->end) return fail(r, start, "varint truncated");
        uint8_t byte = *s->p++;
        if (i == 9 && byte > 1) return fail(r, start, "varint longer than 64 bits");
        x |= (uint64_t)(byte & 0x7f) << (7 * i);
        if (!(byte & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return fail(r, start, "varint longer than 64 bits");
}

/* A field's key: its number (1 .. 2^29-1) and wire type. */
static int rd_tag(reader *r, span *s, uint32_t *field, int *wt) {
    const uint8_t *at = s->p;
    uint64_t tag;
    if (rd_varint(r, s, &tag) < 0) return -1;
    if (tag > UINT32_MAX || (tag >> 3) == 0) return fail(r, at, "field key %llu is not a valid field number",
                                                         (unsigned long long)tag);
    *field = (uint32_t)(tag >> 3);
    *wt = (int)(tag & 7);
    return 0;
}

/* The bytes of a length-delimited field, which must lie within the enclosing message. */
static int rd_len(reader *r, span *s, span *out) {
    const uint8_t *at = s->p;
    uint64_t n;
    if (rd_varint(r, s, &n) < 0) return -1;
    if (n > (uint64_t)(s->end - s->p))
        return fail(r, at, "length %llu past the end of the message (%zu bytes left)", (unsigned long long)n,
                    (size_t)(s->end - s->p));
    out->p = s->p;
    out->end = s->p + n;
    s->p += n;
    return 0;
}

static int skip_fixed(reader *r, span *s, size_t n) {
    if ((size_t)(s->end - s->p) < n) return fail(r, s->p, "fixed-width field truncated");
    s->p += n;
    return 0;
}

/* Skip the value of a field we do not read, of any wire type. A group runs to its matching end-group key. */
static int skip_value(reader *r, span *s, uint32_t field, int wt, int depth) {
    const uint8_t *at = s->p;
    uint64_t v;
    span sub;
    switch (wt) {
    case AGENT_PW_VARINT: return rd_varint(r, s, &v);
    case AGENT_PW_I64: return skip_fixed(r, s, 8);
    case AGENT_PW_I32: return skip_fixed(r, s, 4);
    case AGENT_PW_LEN: return rd_len(r, s, &sub);
    case AGENT_PW_SGROUP:
        if (depth >= AGENT_PW_MAX_DEPTH) return fail(r, at, "groups nested deeper than %d", AGENT_PW_MAX_DEPTH);
        for (;;) {
            if (s->p >= s->end) return fail(r, at, "group %u not closed", field);
            uint32_t f;
            int w;
            if (rd_tag(r, s, &f, &w) < 0) return -1;
            if (w == AGENT_PW_EGROUP) {
                if (f != field) return fail(r, s->p, "group %u closed as %u", field, f);
                return 0;
            }
            if (skip_value(r, s, f, w, depth + 1) < 0) return -1;
        }
    case AGENT_PW_EGROUP: return fail(r, at, "end of group %u without its start", field);
    default: return fail(r, at, "field %u has wire type %d, which does not exist", field, wt);
    }
}

static int count_item(reader *r, const uint8_t *at) {
    if (++r->items > AGENT_PW_MAX_ITEMS)
        return fail(r, at, "more than %u strings and messages in one reply", AGENT_PW_MAX_ITEMS);
    return 0;
}

/* Well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF) and no NUL. */
static bool utf8_ok(const uint8_t *p, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = p[i];
        if (c == 0) return false;
        if (c < 0x80) { i++; continue; }
        size_t len;
        uint32_t cp;
        if (c >= 0xc2 && c <= 0xdf) { len = 2; cp = c & 0x1f; }
        else if (c >= 0xe0 && c <= 0xef) { len = 3; cp = c & 0x0f; }
        else if (c >= 0xf0 && c <= 0xf4) { len = 4; cp = c & 0x07; }
        else return false;
        if (n - i < len) return false;
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xc0) != 0x80) return false;
            cp = (cp << 6) | (p[i + k] & 0x3f);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += len;
    }
    return true;
}

/* A string field into *dst (a repeated scalar field: the last one wins, as in protobuf). */
static int rd_string(reader *r, span *s, const char *name, char **dst) {
    const uint8_t *at = s->p;
    span v;
    if (rd_len(r, s, &v) < 0 || count_item(r, at) < 0) return -1;
    size_t n = (size_t)(v.end - v.p);
    if (!utf8_ok(v.p, n)) return fail(r, at, "%s is not UTF-8 text without NUL", name);
    char *str = malloc(n + 1);
    if (!str) return fail(r, at, "out of memory");
    memcpy(str, v.p, n);
    str[n] = '\0';
    free(*dst);
    *dst = str;
    return 0;
}

/* Room for one more element of an array of `size`-byte elements, zeroed; NULL after fail(). */
static void *grow(reader *r, const uint8_t *at, void **arr, size_t *n, size_t size) {
    if (count_item(r, at) < 0) return NULL;
    size_t cur = *n;
    /* capacities are the powers of two: grow when cur is one */
    if (cur == 0 || (cur & (cur - 1)) == 0) {
        size_t cap = cur ? cur * 2 : 1;
        void *p = realloc(*arr, cap * size);
        if (!p) { fail(r, at, "out of memory"); return NULL; }
        *arr = p;
    }
    void *slot = (char *)*arr + cur * size;
    memset(slot, 0, size);
    (*n)++;
    return slot;
}

static char *empty_string(void) {
    return calloc(1, 1);
}

/* NUMANode { int64 ID = 1; } appended to d->numa. */
static int dec_numa_node(reader *r, span s, agent_pr_devices *d) {
    int64_t *slot = grow(r, s.p, (void **)&d->numa, &d->nnuma, sizeof *d->numa);
    if (!slot) return -1;
    while (s.p < s.end) {
        uint32_t f;
        int wt;
        if (rd_tag(r, &s, &f, &wt) < 0) return -1;
        if (f == 1 && wt == AGENT_PW_VARINT) {
            uint64_t v;
            if (rd_varint(r, &s, &v) < 0) return -1;
            *slot = (int64_t)v;
        } else if (skip_value(r, &s, f, wt, 0) < 0) return -1;
    }
    return 0;
}

/* TopologyInfo { repeated NUMANode nodes = 1; } (appearing twice, the two merge: nodes concatenate) */
static int dec_topology(reader *r, span s, agent_pr_devices *d) {
    while (s.p < s.end) {
        uint32_t f;
        int wt;
        if (rd_tag(r, &s, &f, &wt) < 0) return -1;
        if (f == 1 && wt == AGENT_PW_LEN) {
            span sub;
            if (rd_len(r, &s, &sub) < 0) return -1;
            size_t idx = d->nnuma;
            if (dec_numa_node(r, sub, d) < 0) return fail_in(r, "nodes", idx);
        } else if (skip_value(r, &s, f, wt, 0) < 0) return -1;
    }
    return 0;
}

/* ContainerDevices { string resource_name = 1; repeated string device_ids = 2; TopologyInfo topology = 3; } */
static int dec_devices(reader *r, span s, agent_pr_devices *d) {
    while (s.p < s.end) {
        uint32_t f;
        int wt;
        if (rd_tag(r, &s, &f, &wt) < 0) return -1;
        if (f == 1 && wt == AGENT_PW_LEN) {
            if (rd_string(r, &s, "resource_name", &d->resource) < 0) return -1;
        } else if (f == 2 && wt == AGENT_PW_LEN) {
            size_t idx = d->nids;
            char **slot = grow(r, s.p, (void **)&d->ids, &d->nids, sizeof *d->ids);
            if (!slot) return -1;
            if (rd_string(r, &s, "device id", slot) < 0) return fail_in(r, "device_ids", idx);
        } else if (f == 3 && wt == AGENT_PW_LEN) {
            span sub;
            if (rd_len(r, &s, &sub) < 0) return -1;
            if (dec_topology(r, sub, d) < 0) return fail_in(r, "topology", 0);
        } else if (skip_value(r, &s, f, wt, 0) < 0) return -1;
    }
    if (!d->resource && !(d->resource = empty_string())) return fail(r, s.p, "out of memory");
    return 0;
}

/* ContainerResources { string name = 1; repeated ContainerDevices devices = 2; ... } */
static int dec_container(reader *r, span s, agent_pr_container *c) {
    while (s.p < s.end) {
        uint32_t f;
        int wt;
        if (rd_tag(r, &s, &f, &wt) < 0) return -1;
        if (f == 1 && wt == AGENT_PW_LEN) {
            if (rd_string(r, &s, "name", &c->name) < 0) return -1;
        } else if (f == 2 && wt == AGENT_PW_LEN) {
            span sub;
            if (rd_len(r, &s, &sub) < 0) return -1;
            size_t idx = c->ndevices;
            agent_pr_devices *d = grow(r, sub.p, (void **)&c->devices, &c->ndevices, sizeof *d);
            if (!d || dec_devices(r, sub, d) < 0) return fail_in(r, "devices", idx);
        } else if (skip_value(r, &s, f, wt, 0) < 0) return -1;
    }
    if (!c->name && !(c->name = empty_string())) return fail(r, s.p, "out of memory");
    return 0;
}

/* PodResources { string name = 1; string namespace = 2; repeated ContainerResources containers = 3; } */
static int dec_pod(reader *r, span s, agent_pr_pod *pod) {
    while (s.p < s.end) {
        uint32_t f;
        int wt;
        if (rd_tag(r, &s, &f, &wt) < 0) return -1;
        if (f == 1 && wt == AGENT_PW_LEN) {
            if (rd_string(r, &s, "name", &pod->name) < 0) return -1;
        } else if (f == 2 && wt == AGENT_PW_LEN) {
            if (rd_string(r, &s, "namespace", &pod->namespace_) < 0) return -1;
        } else if (f == 3 && wt == AGENT_PW_LEN) {
            span sub;
            if (rd_len(r, &s, &sub) < 0) return -1;
            size_t idx = pod->ncontainers;
            agent_pr_container *c = grow(r, sub.p, (void **)&pod->containers, &pod->ncontainers, sizeof *c);
            if (!c || dec_container(r, sub, c) < 0) return fail_in(r, "containers", idx);
        } else if (skip_value(r, &s, f, wt, 0) < 0) return -1;
    }
    if (!pod->name && !(pod->name = empty_string())) return fail(r, s.p, "out of memory");
    if (!pod->namespace_ && !(pod->namespace_ = empty_string())) return fail(r, s.p, "out of memory");
    return 0;
}

/* A reply: field 1 repeated, each one a sub-message `add` appends to out; every other field skipped. */
typedef int (*add_fn)(reader *r, span sub, void *out);

static int decode_reply(const uint8_t *data, size_t len, const char *field, add_fn add, void *out, char *err,
                        size_t errlen) {
    char scratch[1];
    reader r = {data, 0, err && errlen ? err : scratch, err && errlen ? errlen : sizeof scratch};
    r.err[0] = '\0';
    span s = {data, data ? data + len : data}; /* NULL + 0 is undefined behaviour */
    if (len > AGENT_PW_MAX_MESSAGE)
        return fail(&r, data, "message of %zu bytes, more than the %u accepted", len, AGENT_PW_MAX_MESSAGE);
    for (size_t idx = 0; s.p < s.end;) {
        uint32_t f;
        int wt;
        if (rd_tag(&r, &s, &f, &wt) < 0) return -1;
        if (f == 1 && wt == AGENT_PW_LEN) {
            span sub;
            if (rd_len(&r, &s, &sub) < 0) return -1;
            if (add(&r, sub, out) < 0) return fail_in(&r, field, idx);
            idx++;
        } else if (skip_value(&r, &s, f, wt, 0) < 0) return -1;
    }
    return 0;
}

static int add_pod(reader *r, span sub, void *out) {
    agent_pr_list *l = out;
    agent_pr_pod *pod = grow(r, sub.p, (void **)&l->pods, &l->npods, sizeof *pod);
    return pod ? dec_pod(r, sub, pod) : -1;
}

static int add_devices(reader *r, span sub, void *out) {
    agent_pr_allocatable *a = out;
    agent_pr_devices *d = grow(r, sub.p, (void **)&a->devices, &a->ndevices, sizeof *d);
    return d ? dec_devices(r, sub, d) : -1;
}

int agent_pw_decode_list(const uint8_t *data, size_t len, agent_pr_list *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (decode_reply(data, len, "pod_resources", add_pod, out, err, errlen) == 0) return 0;
    agent_pr_list_free(out);
    return -1;
}

int agent_pw_decode_allocatable(const uint8_t *data, size_t len, agent_pr_allocatable *out, char *err,
                                size_t errlen) {
    memset(out, 0, sizeof *out);
    if (decode_reply(data, len, "devices", add_devices, out, err, errlen) == 0) return 0;
    agent_pr_allocatable_free(out);
    return -1;
}

/* ---- freeing ------------------------------------------------------------------------------------------- */

static void devices_free(agent_pr_devices *d) {
    free(d->resource);
    for (size_t i = 0; i < d->nids; i++) free(d->ids[i]);
    free(d->ids);
    free(d->numa);
}

void agent_pr_list_free(agent_pr_list *l) {
    if (!l) return;
    for (size_t i = 0; i < l->npods; i++) {
        agent_pr_pod *pod = &l->pods[i];
        for (size_t c = 0; c < pod->ncontainers; c++) {
            agent_pr_container *ct = &pod->containers[c];
            for (size_t d = 0; d < ct->ndevices; d++) devices_free(&ct->devices[d]);
            free(ct->devices);
            free(ct->name);
        }
        free(pod->containers);
        free(pod->name);
        free(pod->namespace_);
    }
    free(l->pods);
    memset(l, 0, sizeof *l);
}

void agent_pr_allocatable_free(agent_pr_allocatable *a) {
    if (!a) return;
    for (size_t i = 0; i < a->ndevices; i++) devices_free(&a->devices[i]);
    free(a->devices);
    memset(a, 0, sizeof *a);
}
