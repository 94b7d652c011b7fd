/* test_podresources_wire.c -- agent/protowire.c: the Pod Resources messages decoded from bytes written by hand from
 * api.proto (so encoder and decoder cannot agree on a wrong layout), unknown fields of every wire type skipped at
 * every level, every bound enforced with an error that says where, and every truncation and many single-byte
 * mutations of a rich message decoded without a crash (ASan in `make asan` makes that a real check). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/protowire.h"
#include "harness.h"
#include "tests/support/fake_podresources.h"

/* ListPodResourcesResponse, by hand from k8s.io/kubelet/pkg/apis/podresources/v1/api.proto:
 * pod_resources(1) { name(1) "p", namespace(2) "n", containers(3) { name(1) "c",
 *   devices(2) { resource_name(1) "nvidia.com/gpu", device_ids(2) "G1", device_ids(2) "G2",
 *                topology(3) { nodes(1) { ID(1) 1 } } },
 *   cpu_ids(3) packed [4, 5], dynamic_resources(5) {} } } */
static const uint8_t golden[] = {
    0x0a, 49,                                   /* pod_resources, 49 bytes */
    0x0a, 1, 'p', 0x12, 1, 'n',                 /* name, namespace */
    0x1a, 41,                                   /* containers, 41 bytes */
    0x0a, 1, 'c',                               /* name */
    0x12, 30,                                   /* devices, 30 bytes */
    0x0a, 14, 'n', 'v', 'i', 'd', 'i', 'a', '.', 'c', 'o', 'm', '/', 'g', 'p', 'u',
    0x12, 2, 'G', '1', 0x12, 2, 'G', '2',
    0x1a, 4, 0x0a, 2, 0x08, 1,                  /* topology { nodes { ID 1 } } */
    0x1a, 2, 4, 5,                              /* cpu_ids, packed: skipped */
    0x2a, 0,                                    /* dynamic_resources {}: skipped */
};

static bool golden_fields(const agent_pr_list *l) {
    if (l->npods != 1) return false;
    const agent_pr_pod *p = &l->pods[0];
    if (strcmp(p->name, "p") || strcmp(p->namespace_, "n") || p->ncontainers != 1) return false;
    const agent_pr_container *c = &p->containers[0];
    if (strcmp(c->name, "c") || c->ndevices != 1) return false;
    const agent_pr_devices *d = &c->devices[0];
    return !strcmp(d->resource, "nvidia.com/gpu") && d->nids == 2 && !strcmp(d->ids[0], "G1") &&
           !strcmp(d->ids[1], "G2") && d->nnuma == 1 && d->numa[0] == 1;
}

TEST(podres_wire_golden_bytes) {
    agent_pr_list l;
    char err[256];
    CHECK_MSG(agent_pw_decode_list(golden, sizeof golden, &l, err, sizeof err) == 0, "%s", err);
    CHECK(golden_fields(&l));
    /* our encoder writes the same bytes, less the two fields we skip (6 bytes) and so 6 fewer in each length */
    agent_pw_buf b = {0};
    CHECK(agent_pw_encode_list(&l, &b) == 0);
    agent_pr_list_free(&l);
    uint8_t want[sizeof golden - 6];
    memcpy(want, golden, sizeof want);
    want[1] -= 6;
    want[9] -= 6;
    int same = b.n == sizeof want && !memcmp(b.p, want, sizeof want);
    agent_pw_buf_free(&b);
    CHECK(same);
}

TEST(podres_wire_empty_and_absent) {
    agent_pr_list l;
    char err[256];
    CHECK(agent_pw_decode_list(NULL, 0, &l, err, sizeof err) == 0);
    CHECK(l.npods == 0);
    /* a pod with nothing set: names are "" (proto3 defaults), not NULL */
    static const uint8_t empty_pod[] = {0x0a, 0x02, 0x1a, 0x00};
    CHECK(agent_pw_decode_list(empty_pod, sizeof empty_pod, &l, err, sizeof err) == 0);
    CHECK(l.npods == 1 && l.pods[0].ncontainers == 1);
    CHECK_STR(l.pods[0].name, "");
    CHECK_STR(l.pods[0].namespace_, "");
    CHECK_STR(l.pods[0].containers[0].name, "");
    agent_pr_list_free(&l);
    /* AllocatableResourcesResponse: devices(1) {resource_name "r", device_ids "d"}, cpu_ids(2) 7 */
    static const uint8_t alloc[] = {0x0a, 6, 0x0a, 1, 'r', 0x12, 1, 'd', 0x10, 7};
    agent_pr_allocatable a;
    CHECK(agent_pw_decode_allocatable(alloc, sizeof alloc, &a, err, sizeof err) == 0);
    CHECK(a.ndevices == 1 && a.devices[0].nids == 1);
    CHECK_STR(a.devices[0].resource, "r");
    CHECK_STR(a.devices[0].ids[0], "d");
    agent_pr_allocatable_free(&a);
}

/* Unknown fields of every wire type (and a group holding another group), at the top and inside each message. */
static void put_unknowns(agent_pw_buf *b) {
    agent_pw_put_tag(b, 15, AGENT_PW_VARINT);
    agent_pw_put_varint(b, UINT64_MAX);
    agent_pw_put_tag(b, 16, AGENT_PW_I64);
    for (int i = 0; i < 8; i++) agent_pw_put_varint(b, 0x7f);
    agent_pw_put_tag(b, 17, AGENT_PW_I32);
    for (int i = 0; i < 4; i++) agent_pw_put_varint(b, 0x01);
    agent_pw_put_tag(b, 18, AGENT_PW_SGROUP);
    agent_pw_put_int64(b, 1, 5);
    agent_pw_put_tag(b, 19, AGENT_PW_SGROUP);
    agent_pw_put_string(b, 2, "inner");
    agent_pw_put_tag(b, 19, AGENT_PW_EGROUP);
    agent_pw_put_tag(b, 18, AGENT_PW_EGROUP);
    agent_pw_put_string(b, 536870911, "highest field number");
    /* a known field number with another wire type is unknown too: name(1) as a varint */
    agent_pw_put_int64(b, 1, 42);
}

static void put_msg(agent_pw_buf *b, uint32_t field, agent_pw_buf *sub) {
    agent_pw_put_bytes(b, field, sub->p, sub->n);
    agent_pw_buf_free(sub);
}

TEST(podres_wire_unknown_fields_skipped) {
    agent_pw_buf numa = {0}, topo = {0}, dev = {0}, ctr = {0}, pod = {0}, top = {0};
    put_unknowns(&numa);
    agent_pw_put_int64(&numa, 1, 1);
    put_unknowns(&topo);
    put_msg(&topo, 1, &numa);
    agent_pw_put_string(&dev, 1, "nvidia.com/gpu");
    put_unknowns(&dev);
    agent_pw_put_string(&dev, 2, "G1");
    agent_pw_put_string(&dev, 2, "G2");
    put_msg(&dev, 3, &topo);
    agent_pw_put_string(&ctr, 1, "c");
    put_unknowns(&ctr);
    put_msg(&ctr, 2, &dev);
    agent_pw_put_string(&pod, 1, "p");
    put_unknowns(&pod);
    agent_pw_put_string(&pod, 2, "n");
    put_msg(&pod, 3, &ctr);
    put_unknowns(&top);
    put_msg(&top, 1, &pod);
    put_unknowns(&top);
    CHECK(!top.oom);
    agent_pr_list l;
    char err[256];
    int rc = agent_pw_decode_list(top.p, top.n, &l, err, sizeof err);
    agent_pw_buf_free(&top);
    CHECK_MSG(rc == 0, "%s", err);
    bool ok = golden_fields(&l);
    agent_pr_list_free(&l);
    CHECK(ok);
}

/* What must be refused, and that the error says what and where. */
static void refused(const uint8_t *data, size_t len, const char *want, const char *file, int line) {
    agent_pr_list l;
    char err[256];
    if (agent_pw_decode_list(data, len, &l, err, sizeof err) == 0) {
        agent_pr_list_free(&l);
        test_fail(file, line, "decoded, expected an error containing \"%s\"", want);
    } else if (!strstr(err, want)) {
        test_fail(file, line, "error \"%s\" does not contain \"%s\"", err, want);
    } else if (l.pods || l.npods) {
        test_fail(file, line, "the reply was not left empty after an error");
    }
}
#define REFUSED(want, ...)                                                              \
    do {                                                                                \
        static const uint8_t in_[] = {__VA_ARGS__};                                     \
        refused(in_, sizeof in_, want, __FILE__, __LINE__);                             \
    } while (0)

TEST(podres_wire_malformed_refused) {
    REFUSED("varint truncated", 0x0a);
    REFUSED("varint truncated", 0x78, 0x80);
    REFUSED("varint longer than 64 bits", 0x78, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02);
    REFUSED("length 5 past the end of the message (2 bytes left)", 0x0a, 0x05, 0x0a, 0x00);
    REFUSED("pod_resources[0].length 9 past the end of the message", 0x0a, 0x02, 0x0a, 0x09);
    REFUSED("wire type 6, which does not exist", 0x0e);
    REFUSED("wire type 7, which does not exist", 0x0f);
    REFUSED("not a valid field number", 0x02, 0x00);
    REFUSED("not a valid field number", 0x80, 0x80, 0x80, 0x80, 0x10);
    REFUSED("group 1 not closed", 0x0b, 0x08, 0x01);
    REFUSED("end of group 1 without its start", 0x0c);
    REFUSED("group 1 closed as 2", 0x0b, 0x14);
    REFUSED("fixed-width field truncated", 0x09, 0x01, 0x02);
    REFUSED("fixed-width field truncated", 0x0d, 0x01);
    REFUSED("name is not UTF-8", 0x0a, 0x03, 0x0a, 0x01, 0xff);
    REFUSED("namespace is not UTF-8", 0x0a, 0x04, 0x12, 0x02, 'a', 0x00);          /* NUL */
    REFUSED("not UTF-8", 0x0a, 0x05, 0x0a, 0x03, 0xed, 0xa0, 0x80);                /* a surrogate */
    REFUSED("not UTF-8", 0x0a, 0x04, 0x0a, 0x02, 0xc0, 0x80);                      /* an overlong NUL */
    /* where: the second pod's first container's first device's second id */
    REFUSED("pod_resources[1].containers[0].devices[0].device_ids[1].device id is not UTF-8",
            0x0a, 0x00, 0x0a, 0x0b, 0x1a, 0x09, 0x12, 0x07, 0x12, 0x01, 'a', 0x12, 0x02, 'b', 0xfe);
}

TEST(podres_wire_group_depth_bounded) {
    agent_pw_buf b = {0};
    for (int i = 0; i < AGENT_PW_MAX_DEPTH; i++) agent_pw_put_tag(&b, 20, AGENT_PW_SGROUP);
    for (int i = 0; i < AGENT_PW_MAX_DEPTH; i++) agent_pw_put_tag(&b, 20, AGENT_PW_EGROUP);
    agent_pr_list l;
    char err[256];
    CHECK_MSG(agent_pw_decode_list(b.p, b.n, &l, err, sizeof err) == 0, "%s", err);
    agent_pw_buf_free(&b);
    for (int i = 0; i <= AGENT_PW_MAX_DEPTH; i++) agent_pw_put_tag(&b, 20, AGENT_PW_SGROUP);
    for (int i = 0; i <= AGENT_PW_MAX_DEPTH; i++) agent_pw_put_tag(&b, 20, AGENT_PW_EGROUP);
    int rc = agent_pw_decode_list(b.p, b.n, &l, err, sizeof err);
    agent_pw_buf_free(&b);
    CHECK(rc < 0);
    CHECK_CONTAINS(err, "groups nested deeper than 32");
}

TEST(podres_wire_size_and_count_bounded) {
    agent_pr_list l;
    char err[256];
    /* one byte over the limit: refused before a byte is read (calloc keeps the untouched pages free) */
    uint8_t *big = calloc(1, (size_t)AGENT_PW_MAX_MESSAGE + 1);
    CHECK(big != NULL);
    int rc = agent_pw_decode_list(big, (size_t)AGENT_PW_MAX_MESSAGE + 1, &l, err, sizeof err);
    free(big);
    CHECK(rc < 0);
    CHECK_CONTAINS(err, "more than the 67108864 accepted");
    /* AGENT_PW_MAX_ITEMS empty device ids (2 bytes each) in one ContainerDevices: the item budget stops it */
    agent_pw_buf dev = {0}, a = {0};
    for (uint32_t i = 0; i <= AGENT_PW_MAX_ITEMS / 2; i++) agent_pw_put_bytes(&dev, 2, "", 0);
    agent_pw_put_bytes(&a, 1, dev.p, dev.n);
    agent_pw_buf_free(&dev);
    CHECK(!a.oom);
    agent_pr_allocatable al;
    rc = agent_pw_decode_allocatable(a.p, a.n, &al, err, sizeof err);
    agent_pw_buf_free(&a);
    CHECK(rc < 0);
    CHECK_CONTAINS(err, "more than 2097152 strings and messages in one reply");
    CHECK(al.devices == NULL && al.ndevices == 0);
}

/* A rich reply: several pods, containers, devices with topology, unknown fields. */
static agent_pw_buf rich_message(void) {
    agent_pr_list l;
    char err[256];
    agent_pw_buf b = {0};
    if (fake_pr_parse_pods("default/train-1 trainer nvidia.com/gpu GPU-77b1,GPU-6a0f numa=0,1\n"
                           "default/train-1 sidecar example.com/x 3\n"
                           "ml/nb-3 main nvidia.com/gpu.shared GPU-6a0f::3 numa=1\n"
                           "ml/mig-0 main nvidia.com/mig-1g.10gb MIG-1234\n",
                           &l, err, sizeof err) == 0) {
        agent_pw_encode_list(&l, &b);
        agent_pr_list_free(&l);
        put_unknowns(&b);
    }
    return b;
}

/* Decode, and when it decodes, re-encoding and decoding again gives the same bytes. */
static bool decodes_sanely(const uint8_t *data, size_t len) {
    agent_pr_list l;
    char err[256] = "";
    if (agent_pw_decode_list(data, len, &l, err, sizeof err) < 0) return err[0] != '\0' && l.pods == NULL;
    agent_pw_buf b1 = {0}, b2 = {0};
    agent_pr_list l2;
    bool ok = agent_pw_encode_list(&l, &b1) == 0 && agent_pw_decode_list(b1.p, b1.n, &l2, err, sizeof err) == 0;
    if (ok) {
        ok = agent_pw_encode_list(&l2, &b2) == 0 && b1.n == b2.n && (!b1.n || !memcmp(b1.p, b2.p, b1.n));
        agent_pr_list_free(&l2);
    }
    agent_pr_list_free(&l);
    agent_pw_buf_free(&b1);
    agent_pw_buf_free(&b2);
    return ok;
}

TEST(podres_wire_every_truncation) {
    agent_pw_buf b = rich_message();
    CHECK(b.n > 100 && !b.oom);
    CHECK(decodes_sanely(b.p, b.n));
    for (size_t n = 0; n < b.n; n++) {
        /* an exact-size copy, so reading past n is an ASan report */
        uint8_t *cut = malloc(n ? n : 1);
        if (n) memcpy(cut, b.p, n);
        bool ok = decodes_sanely(cut, n);
        free(cut);
        if (!ok) {
            agent_pw_buf_free(&b);
            CHECK_MSG(false, "truncated to %zu bytes: no clear error, or no stable round trip", n);
        }
    }
    agent_pw_buf_free(&b);
}

TEST(podres_wire_single_byte_mutations) {
    agent_pw_buf b = rich_message();
    CHECK(b.n > 100 && !b.oom);
    static const uint8_t values[] = {0x00, 0x01, 0x07, 0x7f, 0x80, 0xff};
    uint8_t *m = malloc(b.n);
    CHECK(m != NULL);
    int decoded = 0, refused_n = 0;
    for (size_t i = 0; i < b.n; i++) {
        for (size_t v = 0; v < sizeof values + 1; v++) {
            memcpy(m, b.p, b.n);
            m[i] = v < sizeof values ? values[v] : (uint8_t)(b.p[i] ^ 0x80);
            agent_pr_list l;
            char err[256];
            if (agent_pw_decode_list(m, b.n, &l, err, sizeof err) == 0) decoded++;
            else refused_n++;
            agent_pr_list_free(&l);
            if (!decodes_sanely(m, b.n)) {
                free(m);
                agent_pw_buf_free(&b);
                CHECK_MSG(false, "byte %zu set to 0x%02x: no clear error, or no stable round trip", i,
                          v < sizeof values ? values[v] : 0);
            }
        }
    }
    free(m);
    agent_pw_buf_free(&b);
    /* both outcomes happen: the mutations reach past the framing into the strings and numbers */
    CHECK(decoded > 0 && refused_n > 0);
}
