/* webhook_tls.h -- the webhook's TLS without manual steps: the serving certificate lives in a
 * Secret (default tessera/tessera-webhook-tls; keys ca.crt, ca.key, tls.crt, tls.key, type
 * kubernetes.io/tls), made by the first replica that finds none (a self-signed CA, certs.h),
 * re-issued with the same CA when 2/3 of its life is gone, and the CA is written into every
 * webhook's clientConfig.caBundle of the MutatingWebhookConfiguration (default tessera).
 *
 * Replicas race through the API's optimistic concurrency: a create that answers 409 means
 * another replica made the Secret (it is read back and used); an update that answers 409
 * means it changed under us (read again and decide again). The configuration is read,
 * changed and PUT with its resourceVersion (a merge patch would replace the whole webhooks
 * array), again retried on 409. Failures are logged at warn with the API's message; a 403
 * names the verb and resource the RBAC rules lack.
 *
 * ca.key is kept in the Secret beside ca.crt so that renewal keeps the CA (and the caBundle
 * the API server trusts) unchanged. When the CA itself must change (2/3 of its 10 years gone,
 * ca.key lost or not matching), the CA it replaces stays in the Secret (ca-previous.crt, until
 * the time in annotation tessera.io/ca-previous-until) and in the caBundle for 2 check
 * intervals: the other replicas serve certificates of the old CA until their next check re-reads
 * the Secret, within one interval; the second covers a check that failed and is being retried.
 * The next check after that drops it. A replica serves a new certificate only after the caBundle
 * was set (or when it serves nothing yet).
 *
 * A Secret with certificates but without ca.key was made by someone else (cert-manager, with
 * --webhook-secret pointing at its Secret, or by hand): it is used as it is and never written;
 * when it is due for renewal a warning names who must renew it (cert-manager's Certificate, from
 * its cert-manager.io/certificate-name annotation). An empty Secret is filled in.
 */
#ifndef EXT_WEBHOOK_TLS_H
#define EXT_WEBHOOK_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "extender/certs.h"
#include "extender/http.h"

/* The API call: kube_request's contract with the client as user (ext_webhook_tls_kube_request
 * adapts an kube_client *). Tests pass an in-memory fake. */
typedef int (*ext_webhook_tls_request_fn)(void *user, const char *method, const char *path, const char *body,
                                          int timeout_ms, char **resp, char *err, size_t errlen);
int ext_webhook_tls_kube_request(void *kube, const char *method, const char *path, const char *body, int timeout_ms,
                                 char **resp, char *err, size_t errlen);

typedef struct ext_webhook_tls_config {
    char secret_ns[64];        /* default $POD_NAMESPACE, else tessera */
    char secret_name[128];     /* default tessera-webhook-tls */
    char webhook_config[128];  /* MutatingWebhookConfiguration; default tessera; "" = leave caBundle alone */
    char service[64];          /* default tessera-extender: names service.ns.svc(.cluster.local), service.ns */
    int check_interval_s;      /* background re-check; default 600 */
    int retry_interval_s;      /* after a failed check; default 10 */
} ext_webhook_tls_config;

void ext_webhook_tls_config_defaults(ext_webhook_tls_config *cfg);
/* --webhook-secret NS/NAME: 0, or -1 with err. */
int ext_webhook_tls_parse_secret(ext_webhook_tls_config *cfg, const char *ns_name, char *err, size_t errlen);

/* One pass at Unix time now: read (or create) the Secret, renew the serving certificate when due,
 * and set the configuration's caBundle. 0 with the serving certificate and key in *serving (and, if
 * ca_pem is not NULL, the caBundle's PEM, malloc'd: ca.crt, plus the previous CA during a CA
 * change; NULL for a Secret without ca.crt), or -1 with err when no usable Secret could be had. A
 * caBundle that could not be set is logged at warn and does not fail the pass. */
int ext_webhook_tls_sync(const ext_webhook_tls_config *cfg, ext_webhook_tls_request_fn req, void *user, int64_t now,
                         ext_cert_pem *serving, char **ca_pem, char *err, size_t errlen);

/* The background check: a first pass now, then every check_interval_s (retry_interval_s after a
 * failure). on_pem is called from that thread with the serving certificate and key the first time
 * one is had and whenever it changes (to restart the TLS listener with it); it returns 0, or -1
 * when the listener could not take it, and is then called again after retry_interval_s. */
typedef int (*ext_webhook_tls_on_pem)(void *user, const ext_cert_pem *serving);
typedef struct ext_webhook_tls ext_webhook_tls;
ext_webhook_tls *ext_webhook_tls_start(const ext_webhook_tls_config *cfg, ext_webhook_tls_request_fn req,
                                       void *req_user, ext_webhook_tls_on_pem on_pem, void *pem_user, char *err,
                                       size_t errlen);
/* Stop the thread (within a second, or after the API call in flight) and free. NULL is fine. */
void ext_webhook_tls_stop(ext_webhook_tls *t);

/* The webhook's TLS listener on the certificate of the Secret: ext_webhook_listener_on_pem is the
 * background check's on_pem and restarts the server (cfg, copied, with webhook_only) with each new
 * certificate. A failed start (port taken, bad key) returns -1, so the check retries it, and is
 * reported to health.h as the failing webhook-listen dependency, which /readyz names. */
typedef struct ext_webhook_listener ext_webhook_listener;
ext_webhook_listener *ext_webhook_listener_new(const ext_http_config *cfg);
int ext_webhook_listener_on_pem(void *listener, const ext_cert_pem *serving);
int ext_webhook_listener_port(ext_webhook_listener *l);   /* 0 while not serving */
/* Stop the server (in-flight reviews finish) and free; after ext_webhook_tls_stop. NULL is fine. */
void ext_webhook_listener_free(ext_webhook_listener *l);

#endif
