/* test_kube_lease.c -- kube/'s helpers that the three programs share, against the fake API server on loopback:
 * Leases (kube/lease.h: create, read back, update with the resourceVersion read, 409 on a stale one, 404 for a
 * missing one, the note annotation), the annotations merge patch, the client flags, the name check, the listen
 * address parser and the dependency reporter (what the extender's health registry hears). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "../support/fake_apiserver.h"
#include "harness.h"
#include "kube/client.h"
#include "kube/lease.h"
#include "kube/pod.h"

#define NOTE_KEY "tessera.io/wanted-by"

typedef struct rec_report {
    int calls, token_ok, token_fail;
    kube_reason last_reason;
    char last_msg[256];
} rec_report;

static void record(void *user, kube_dep dep, kube_kind kind, bool ok, int code, kube_reason reason,
                   const char *msg) {
    rec_report *r = user;
    r->calls++;
    if (dep != KUBE_DEP_TOKEN_FILE) return;
    if (ok) r->token_ok++;
    else {
        r->token_fail++;
        r->last_reason = reason;
        snprintf(r->last_msg, sizeof r->last_msg, "%s", msg ? msg : "");
    }
}

static kube_client *client_of(fake_api *f, rec_report *rep, const char *token_file) {
    char err[256];
    kube_config kc;
    kube_config_defaults(&kc);
    fake_api_url(f, kc.api_url, sizeof kc.api_url);
    if (token_file) snprintf(kc.token_file, sizeof kc.token_file, "%s", token_file);
    if (rep) {
        kc.report = record;
        kc.report_user = rep;
    }
    return kube_new(&kc, err, sizeof err);
}

TEST(kube_lease_create_read_update_conflict) {
    char err[256];
    fake_api *f = fake_api_start(0, err, sizeof err);
    kube_client *k = f ? client_of(f, NULL, NULL) : NULL;
    CHECK(k != NULL);
    if (k) {
        kube_lease got, rd;
        CHECK_INT(kube_lease_get(k, "tessera", "l1", NOTE_KEY, 2000, &rd, err, sizeof err), 404);
        CHECK_STR(rd.rv, "");   /* not found: no record */

        kube_lease rec = {.secs = 15, .transitions = 0};
        snprintf(rec.holder, sizeof rec.holder, "replica-a");
        kube_lease_now(rec.acquire, sizeof rec.acquire);
        snprintf(rec.renew, sizeof rec.renew, "%s", rec.acquire);
        CHECK(strlen(rec.acquire) == 27 && rec.acquire[26] == 'Z');   /* 2006-01-02T15:04:05.000000Z */
        CHECK_INT(kube_lease_write(k, "tessera", "l1", &rec, NOTE_KEY, 2000, &got, err, sizeof err), 201);
        CHECK(got.rv[0] != 0);
        CHECK_STR(got.holder, "replica-a");
        CHECK_INT(got.secs, 15);

        /* a second create of the same name loses: 409 */
        CHECK_INT(kube_lease_write(k, "tessera", "l1", &rec, NOTE_KEY, 2000, NULL, err, sizeof err), 409);

        CHECK_INT(kube_lease_get(k, "tessera", "l1", NOTE_KEY, 2000, &rd, err, sizeof err), 200);
        CHECK_STR(rd.rv, got.rv);
        CHECK_STR(rd.acquire, rec.acquire);
        CHECK_STR(rd.note, "");

        /* an update with the version read, carrying a note */
        kube_lease upd = rd;
        upd.transitions = 3;
        snprintf(upd.note, sizeof upd.note, "replica-b 1");
        CHECK_INT(kube_lease_write(k, "tessera", "l1", &upd, NOTE_KEY, 2000, &got, err, sizeof err), 200);
        CHECK(strcmp(got.rv, rd.rv) != 0);
        CHECK_STR(got.note, "replica-b 1");
        CHECK_INT(got.transitions, 3);

        /* the version read before that update is stale now: 409, and the record stays */
        upd = rd;
        snprintf(upd.holder, sizeof upd.holder, "replica-c");
        CHECK_INT(kube_lease_write(k, "tessera", "l1", &upd, NOTE_KEY, 2000, &got, err, sizeof err), 409);
        CHECK_STR(got.rv, "");
        CHECK_INT(kube_lease_get(k, "tessera", "l1", NOTE_KEY, 2000, &rd, err, sizeof err), 200);
        CHECK_STR(rd.holder, "replica-a");
        CHECK_STR(rd.note, "replica-b 1");
    }
    kube_free(k);
    fake_api_free(f);
}

TEST(kube_annotations_patch_sets_and_deletes_in_order) {
    const char *keys[] = {"tessera.io/gpu-uuid", "tessera.io/reserve-error"};
    const char *values[] = {"GPU-1,GPU-2", NULL};
    char *body = kube_annotations_patch(keys, values, 2);
    CHECK_STR(body, "{\"metadata\":{\"annotations\":{\"tessera.io/gpu-uuid\":\"GPU-1,GPU-2\","
                    "\"tessera.io/reserve-error\":null}}}");
    free(body);
    body = kube_annotations_patch(keys, values, 0);
    CHECK_STR(body, "{\"metadata\":{\"annotations\":{}}}");
    free(body);
}

TEST(kube_config_option_takes_the_client_flags_only) {
    kube_config c;
    kube_config_defaults(&c);
    CHECK(kube_config_option(&c, KUBE_OPT_API, "https://10.0.0.1:6443"));
    CHECK(kube_config_option(&c, KUBE_OPT_TOKEN, "/t"));
    CHECK(kube_config_option(&c, KUBE_OPT_CA, "/ca"));
    CHECK(kube_config_option(&c, KUBE_OPT_CERT, "/c"));
    CHECK(kube_config_option(&c, KUBE_OPT_KEY, "/k"));
    CHECK(kube_config_option(&c, KUBE_OPT_INSECURE, NULL));
    CHECK(!kube_config_option(&c, 'h', "x"));
    CHECK(!kube_config_option(&c, 1, "x"));
    CHECK_STR(c.api_url, "https://10.0.0.1:6443");
    CHECK_STR(c.token_file, "/t");
    CHECK_STR(c.ca_file, "/ca");
    CHECK_STR(c.cert_file, "/c");
    CHECK_STR(c.key_file, "/k");
    CHECK(c.insecure);
}

TEST(kube_name_ok_is_a_dns_subdomain) {
    char err[512];
    CHECK(kube_name_ok("node name", "gpu-node-1.example", err, sizeof err));
    CHECK(!kube_name_ok("node name", "GPU_node", err, sizeof err));
    CHECK_STR(err, "node name \"GPU_node\" is not a DNS subdomain");
    CHECK(!kube_name_ok("node name", "", err, sizeof err));
    CHECK(!kube_name_ok("node name", NULL, err, sizeof err));
    char long_name[300];
    memset(long_name, 'a', 254);
    long_name[254] = 0;
    CHECK(!kube_name_ok("node name", long_name, err, sizeof err));
}

/* The token file is re-read for every request: an unreadable one refuses the request (nothing is sent) and is
 * reported as a failing token-file dependency with reason "file"; a readable one again is reported as working, and
 * its token is sent. */
TEST(kube_reporter_hears_of_the_token_file) {
    char err[256], dir[] = "/tmp/tessera-kube-lease-XXXXXX", tok[300];
    fake_api *f = fake_api_start(0, err, sizeof err);
    CHECK(f != NULL && mkdtemp(dir) != NULL);
    snprintf(tok, sizeof tok, "%s/token", dir);
    rec_report rep = {0};
    if (f) fake_api_require_token(f, "a-token");
    kube_client *k = f ? client_of(f, &rep, tok) : NULL;
    CHECK(k != NULL);
    if (k) {
        int code = kube_request(k, "GET", "/api/v1/nodes", NULL, 2000, NULL, err, sizeof err);
        CHECK_INT(code, KUBE_NO_REQUEST);
        CHECK(strstr(err, "cannot read token file") != NULL);
        CHECK_INT(rep.token_fail, 1);
        CHECK_INT(rep.last_reason, KUBE_REASON_FILE);
        CHECK(strstr(rep.last_msg, tok) != NULL);
        FILE *fp = fopen(tok, "w");
        if (fp) {
            fputs("a-token\n", fp);
            fclose(fp);
        }
        CHECK_INT(kube_request(k, "GET", "/api/v1/nodes", NULL, 2000, NULL, err, sizeof err), 200);
        CHECK_INT(rep.token_ok, 1);
    }
    kube_free(k);
    /* without a reporter the same failure is only the request's own answer */
    k = f ? client_of(f, NULL, "/nonexistent/token") : NULL;
    if (k) CHECK_INT(kube_request(k, "GET", "/api/v1/nodes", NULL, 2000, NULL, err, sizeof err), KUBE_NO_REQUEST);
    kube_free(k);
    unlink(tok);
    rmdir(dir);
    fake_api_free(f);
}

/* The listen addresses of the extender (--listen, names resolved) and the node agent (--metrics-listen, numeric
 * only: no DNS lookup before the probes are served) are parsed by one function. */
TEST(kube_pod_listen_addr_reads_host_port) {
    struct sockaddr_storage ss;
    socklen_t sl;
    char host[64];
    CHECK_INT(kube_pod_listen_addr("0.0.0.0:9090", true, &ss, &sl, host, sizeof host), 0);
    CHECK_INT(ss.ss_family, AF_INET);
    CHECK_INT(ntohs(((struct sockaddr_in *)&ss)->sin_port), 9090);
    CHECK_STR(host, "0.0.0.0");
    CHECK_INT(kube_pod_listen_addr("[::1]:8888", true, &ss, &sl, host, sizeof host), 0);
    CHECK_INT(ss.ss_family, AF_INET6);
    CHECK_STR(host, "::1");
    CHECK_INT(kube_pod_listen_addr(":9090", true, &ss, &sl, NULL, 0), 0);   /* every address */
    CHECK_INT(kube_pod_listen_addr("localhost:8888", true, &ss, &sl, NULL, 0), KUBE_POD_LISTEN_UNRESOLVED);
    CHECK_INT(kube_pod_listen_addr("localhost:8888", false, &ss, &sl, NULL, 0), 0);
    CHECK_INT(kube_pod_listen_addr("9090", true, &ss, &sl, NULL, 0), KUBE_POD_LISTEN_MALFORMED);
    CHECK_INT(kube_pod_listen_addr("0.0.0.0:65536", true, &ss, &sl, NULL, 0), KUBE_POD_LISTEN_MALFORMED);
    CHECK_INT(kube_pod_listen_addr("0.0.0.0:", true, &ss, &sl, NULL, 0), KUBE_POD_LISTEN_MALFORMED);
    CHECK_INT(kube_pod_listen_addr("[::1]8888", true, &ss, &sl, NULL, 0), KUBE_POD_LISTEN_MALFORMED);
}
