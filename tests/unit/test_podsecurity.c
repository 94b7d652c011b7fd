/* test_podsecurity.c -- the Pod Security level of a namespace as the webhook reads it for MPS shares
 * (extender/delivery/podsecurity.h), against the fake API server: the label, its absence, the cache (one GET per
 * namespace per ttl), and the reads that fail (RBAC, a namespace that does not exist), which say why and are not
 * remembered.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../support/fake_apiserver.h"
#include "ext_helpers.h"
#include "extender/delivery/podsecurity.h"

static void nap_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void put_ns(fake_api *api, const char *name, const char *level) {
    char j[512];
    if (level)
        snprintf(j, sizeof j, "{\"metadata\":{\"name\":\"%s\",\"labels\":{\"kubernetes.io/metadata.name\":\"%s\","
                              "\"pod-security.kubernetes.io/enforce\":\"%s\"}}}", name, name, level);
    else
        snprintf(j, sizeof j, "{\"metadata\":{\"name\":\"%s\",\"labels\":{\"kubernetes.io/metadata.name\":\"%s\"}}}", name,
                 name);
    fake_api_put(api, "namespaces", j);
}

TEST(podsecurity_reads_the_enforce_label_once_per_ttl_and_says_why_it_cannot) {
    char err[256], url[128];
    fake_api *api = fake_api_start(0, err, sizeof err);
    CHECK_MSG(api != NULL, "%s", err);
    put_ns(api, "ml-base", "baseline");
    put_ns(api, "ml-open", NULL);
    put_ns(api, "ml-priv", "privileged");
    fake_api_url(api, url, sizeof url);
    kube_config kc;
    kube_config_defaults(&kc);
    snprintf(kc.api_url, sizeof kc.api_url, "%s", url);
    kube_client *k = kube_new(&kc, err, sizeof err);
    ext_pss *p = ext_pss_new(k, 200);
    char lv[3][32], why[3][512], again[32] = "?";
    int rc[3], rc_again, rc403, rc404;
    const char *nss[3] = {"ml-base", "ml-open", "ml-priv"};
    for (int i = 0; i < 3; i++) rc[i] = ext_pss_level(p, nss[i], lv[i], sizeof lv[i], why[i], sizeof why[i]);
    unsigned long reads3 = ext_pss_reads(p);
    rc_again = ext_pss_level(p, "ml-base", again, sizeof again, why[0], sizeof why[0]);   /* cached */
    unsigned long reads_cached = ext_pss_reads(p);
    nap_ms(250);   /* the ttl passes: read again, and a changed label is seen */
    put_ns(api, "ml-base", "restricted");
    char later[32] = "";
    int rc_later = ext_pss_level(p, "ml-base", later, sizeof later, why[0], sizeof why[0]);
    unsigned long reads_later = ext_pss_reads(p);
    fake_api_inject(api, "GET /api/v1/namespaces/ml-open", 403, 1);
    char w403[512] = "", w404[512] = "", l403[32] = "x", l404[32] = "x";
    nap_ms(250);
    rc403 = ext_pss_level(p, "ml-open", l403, sizeof l403, w403, sizeof w403);
    rc404 = ext_pss_level(p, "ml-nowhere", l404, sizeof l404, w404, sizeof w404);
    /* a failed read is not remembered: the next admission asks again and gets the answer */
    char l_retry[32] = "x";
    int rc_retry = ext_pss_level(p, "ml-open", l_retry, sizeof l_retry, w403 + 256, 256);
    ext_pss_free(p);
    kube_free(k);
    fake_api_free(api);
    CHECK_INT(rc[0], 0);
    CHECK_STR(lv[0], "baseline");
    CHECK_INT(rc[1], 0);
    CHECK_STR(lv[1], "");   /* no label: the cluster's default level, which the API does not show */
    CHECK_INT(rc[2], 0);
    CHECK_STR(lv[2], "privileged");
    CHECK_INT(reads3, 3);
    CHECK_INT(rc_again, 0);
    CHECK_STR(again, "baseline");
    CHECK_INT(reads_cached, 3);
    CHECK_INT(rc_later, 0);
    CHECK_STR(later, "restricted");
    CHECK_INT(reads_later, 4);
    CHECK_INT(rc403, -1);
    CHECK_CONTAINS(w403, "403");
    CHECK_CONTAINS(w403, "may not get namespaces");
    CHECK_STR(l403, "");
    CHECK_INT(rc404, -1);
    CHECK_CONTAINS(w404, "404");
    CHECK_INT(rc_retry, 0);
    CHECK_STR(l_retry, "");
}
