/* podresources.c -- gRPC unary calls to the kubelet's Pod Resources API over HTTP/2 with libcurl.
 *
 * A unary gRPC call on the wire (https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md): a POST to
 * /<service>/<method> with content-type application/grpc and te: trailers, whose body is one message behind a
 * 5-byte prefix (a compressed flag, a big-endian length). The reply is HTTP 200, the same framing, and the status in
 * the trailers (grpc-status, grpc-message percent-encoded); an error may come "trailers-only", the status in the
 * only HEADERS frame. libcurl passes both the headers and the HTTP/2 trailers to CURLOPT_HEADERFUNCTION (verified
 * by the tests against tests/support/fake_podresources.c, which sends both forms), so one callback reads the status
 * wherever it arrives. */
#include "agent/podresources.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static pthread_once_t pr_once = PTHREAD_ONCE_INIT;
static CURLcode pr_global_rc = CURLE_OK;
static void pr_global_init(void) { pr_global_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

const char *agent_grpc_code_name(int code) {
    static const char *const names[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
                                        "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                                        "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
                                        "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
    if (code >= 0 && code < (int)(sizeof names / sizeof names[0])) return names[code];
    return "an unknown code";
}

int agent_pr_connect_error(int e, const char *socket_path, char *err, size_t errlen) {
    switch (e) {
    case ENOENT:
    case ENOTDIR:
        snprintf(err, errlen,
                 "no socket at %s: the node agent needs the kubelet's /var/lib/kubelet/pod-resources directory "
                 "mounted at the same path (a hostPath volume), and a kubelet running on the node", socket_path);
        return AGENT_PR_ENOSOCKET;
    case EACCES:
    case EPERM:
        snprintf(err, errlen,
                 "permission denied connecting to %s: the kubelet's socket is writable by root only, so the node "
                 "agent must run as uid 0", socket_path);
        return AGENT_PR_EACCESS;
    case ECONNREFUSED:
        snprintf(err, errlen, "nothing listens on %s (connection refused): the kubelet is not running or is "
                 "restarting", socket_path);
        return AGENT_PR_ECONNECT;
    default:
        snprintf(err, errlen, "cannot connect to %s: %s", socket_path, strerror(e));
        return AGENT_PR_ECONNECT;
    }
}

/* curl said it could not connect: connect ourselves for the errno it does not give. */
static int probe_connect(const char *socket_path, const char *curl_words, char *err, size_t errlen) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, socket_path, strlen(socket_path) + 1); /* length checked by the caller */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "cannot connect to %s: socket: %s", socket_path, strerror(errno));
        return AGENT_PR_ECONNECT;
    }
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof sa), e = errno;
    close(fd);
    if (rc < 0) return agent_pr_connect_error(e, socket_path, err, errlen);
    /* it listens now (a kubelet that just came up): say what curl saw */
    snprintf(err, errlen, "cannot connect to %s: %s", socket_path, curl_words);
    return AGENT_PR_ECONNECT;
}

typedef struct reply {
    uint8_t *body;
    size_t n, cap;
    bool over;                  /* more than a prefix and AGENT_PW_MAX_MESSAGE bytes: transfer aborted */
    long http_status;
    int grpc_status;            /* -1 until a grpc-status header or trailer is seen */
    char grpc_message[512];     /* percent-decoded */
    char content_type[128];
} reply;

static size_t on_body(char *data, size_t size, size_t nmemb, void *userdata) {
    reply *r = userdata;
    size_t len = size * nmemb;
    if (len > (size_t)AGENT_PW_MAX_MESSAGE + 5 - r->n) {
        r->over = true;
        return 0;
    }
    if (r->n + len > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->n + len) cap *= 2;
        uint8_t *p = realloc(r->body, cap);
        if (!p) return 0;
        r->body = p;
        r->cap = cap;
    }
    memcpy(r->body + r->n, data, len);
    r->n += len;
    return len;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* grpc-message is percent-encoded (PROTOCOL-HTTP2.md); control characters become '?' so the text can go to logs. */
static void percent_decode(const char *s, size_t n, char *out, size_t outlen) {
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < outlen; i++) {
        char c = s[i];
        if (c == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
            c = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
            i += 2;
        }
        out[o++] = ((unsigned char)c < 0x20 || c == 0x7f) ? '?' : c;
    }
    if (outlen) out[o] = '\0';
}

/* Every header line, of the headers and of the trailers: "name: value\r\n" (and the status line "HTTP/2 200"). */
static size_t on_header(char *line, size_t size, size_t nitems, void *userdata) {
    reply *r = userdata;
    size_t len = size * nitems, n = len;
    while (n && (line[n - 1] == '\r' || line[n - 1] == '\n')) n--;
    const char *colon = memchr(line, ':', n);
    if (!colon) return len;
    size_t nlen = (size_t)(colon - line);
    const char *v = colon + 1;
    while (v < line + n && (*v == ' ' || *v == '\t')) v++;
    size_t vlen = (size_t)(line + n - v);
    if (nlen == 11 && !strncasecmp(line, "grpc-status", 11)) {
        int code = 0;
        bool ok = vlen > 0 && vlen <= 9;
        for (size_t i = 0; ok && i < vlen; i++) {
            if (v[i] < '0' || v[i] > '9') ok = false;
            else code = code * 10 + (v[i] - '0');
        }
        r->grpc_status = ok ? code : 2; /* an unparsable status is UNKNOWN, as gRPC treats it */
    } else if (nlen == 12 && !strncasecmp(line, "grpc-message", 12)) {
        percent_decode(v, vlen, r->grpc_message, sizeof r->grpc_message);
    } else if (nlen == 12 && !strncasecmp(line, "content-type", 12)) {
        snprintf(r->content_type, sizeof r->content_type, "%.*s", (int)vlen, v);
    }
    return len;
}

/* The reply's body must be exactly one uncompressed message. */
static int unframe(reply *r, const char *what, uint8_t **resp, size_t *resplen, char *err, size_t errlen) {
    if (r->n < 5) {
        snprintf(err, errlen, "%s: malformed reply: %zu bytes, less than the 5-byte gRPC message prefix", what, r->n);
        return AGENT_PR_EMALFORMED;
    }
    uint8_t flag = r->body[0];
    uint32_t len = (uint32_t)r->body[1] << 24 | (uint32_t)r->body[2] << 16 | (uint32_t)r->body[3] << 8 | r->body[4];
    if (flag != 0) {
        snprintf(err, errlen, "%s: malformed reply: message flag %u (compressed, which we never ask for)", what,
                 (unsigned)flag);
        return AGENT_PR_EMALFORMED;
    }
    if (len > AGENT_PW_MAX_MESSAGE) {
        snprintf(err, errlen, "%s: reply of %u bytes, more than the %u accepted", what, len, AGENT_PW_MAX_MESSAGE);
        return AGENT_PR_EMALFORMED;
    }
    if ((size_t)len + 5 != r->n) {
        snprintf(err, errlen, "%s: malformed reply: the prefix announces %u bytes, %zu came%s", what, len, r->n - 5,
                 (size_t)len + 5 < r->n ? " (more than one message in a unary reply)" : "");
        return AGENT_PR_EMALFORMED;
    }
    if (len == 0) {
        *resp = NULL;
    } else {
        memmove(r->body, r->body + 5, len);
        *resp = r->body;
        r->body = NULL;
    }
    *resplen = len;
    return AGENT_PR_OK;
}

/* curl_easy_perform, but through the multi interface waking at least every PERFORM_TICK_MS: libcurl 7.88's
 * HTTP/2 code can leave the end of a large reply (DATA, then the trailers) in its own buffers with nothing left
 * on the socket, and then sleeps until its next timer; curl_easy_perform showed a 200 ms p50 and 1.2 s p99 for a
 * 445 KB reply (tests/bench/bench_podresources.c), the ticks bring it down to the time of the transfer. The
 * transfer's own CURLOPT_TIMEOUT_MS still ends it. */
#define PERFORM_TICK_MS 5

static CURLcode perform(CURL *h) {
    CURLM *m = curl_multi_init();
    if (!m) return CURLE_OUT_OF_MEMORY;
    CURLcode cc = CURLE_OK;
    if (curl_multi_add_handle(m, h) != CURLM_OK) {
        curl_multi_cleanup(m);
        return CURLE_OUT_OF_MEMORY;
    }
    for (;;) {
        int running = 0;
        CURLMcode mc = curl_multi_perform(m, &running);
        if (mc != CURLM_OK) {
            cc = CURLE_RECV_ERROR;
            break;
        }
        if (!running) {
            int left;
            CURLMsg *msg;
            cc = CURLE_RECV_ERROR; /* no DONE message would be a libcurl bug; do not call it success */
            while ((msg = curl_multi_info_read(m, &left)))
                if (msg->msg == CURLMSG_DONE && msg->easy_handle == h) cc = msg->data.result;
            break;
        }
        if (curl_multi_poll(m, NULL, 0, PERFORM_TICK_MS, NULL) != CURLM_OK) {
            cc = CURLE_RECV_ERROR;
            break;
        }
    }
    curl_multi_remove_handle(m, h);
    curl_multi_cleanup(m);
    return cc;
}

int agent_pr_call(const char *socket_path, const char *method, const uint8_t *req, size_t reqlen, int timeout_ms,
                  uint8_t **resp, size_t *resplen, int *grpc_status, char *err, size_t errlen) {
    char what[256];
    snprintf(what, sizeof what, "kubelet Pod Resources %s on %s", method, socket_path);
    *resp = NULL;
    *resplen = 0;
    if (grpc_status) *grpc_status = -1;
    if (strlen(socket_path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
        snprintf(err, errlen, "%s: the socket path is longer than a unix socket address allows (%zu bytes)", what,
                 sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
        return AGENT_PR_ENOSOCKET;
    }
    if (timeout_ms <= 0 || reqlen > AGENT_PW_MAX_MESSAGE) {
        snprintf(err, errlen, "%s: timeout_ms must be > 0 and the request at most %u bytes", what,
                 AGENT_PW_MAX_MESSAGE);
        return AGENT_PR_ETRANSPORT;
    }
    pthread_once(&pr_once, pr_global_init);
    if (pr_global_rc != CURLE_OK) {
        snprintf(err, errlen, "%s: curl_global_init: %s", what, curl_easy_strerror(pr_global_rc));
        return AGENT_PR_ETRANSPORT;
    }

    uint8_t *framed = malloc(reqlen + 5);
    reply r = {.grpc_status = -1};
    CURL *h = curl_easy_init();
    struct curl_slist *hdrs = NULL, *more;
    char timeout_hdr[64], url[512], curl_err[CURL_ERROR_SIZE] = "";
    int rc = AGENT_PR_ENOMEM;
    if (!framed || !h) {
        snprintf(err, errlen, "%s: out of memory", what);
        goto done;
    }
    framed[0] = 0;
    framed[1] = (uint8_t)(reqlen >> 24);
    framed[2] = (uint8_t)(reqlen >> 16);
    framed[3] = (uint8_t)(reqlen >> 8);
    framed[4] = (uint8_t)reqlen;
    if (reqlen) memcpy(framed + 5, req, reqlen);

    /* grpc-timeout tells the server our deadline (at most 8 digits, unit m = milliseconds) */
    snprintf(timeout_hdr, sizeof timeout_hdr, "grpc-timeout: %dm", timeout_ms > 99999999 ? 99999999 : timeout_ms);
    const char *lines[] = {"content-type: application/grpc", "te: trailers", timeout_hdr,
                           "user-agent: tessera-node-agent (libcurl)", "Expect:", "Accept:"};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        if (!(more = curl_slist_append(hdrs, lines[i]))) {
            snprintf(err, errlen, "%s: out of memory", what);
            goto done;
        }
        hdrs = more;
    }
    /* the authority is not looked at by the kubelet; the path names the method */
    snprintf(url, sizeof url, "http://localhost%s", method);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, socket_path);
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, (const char *)framed);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(reqlen + 5));
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, curl_err);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &r);

    CURLcode cc = perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r.http_status);
    if (grpc_status) *grpc_status = r.grpc_status;
    const char *words = curl_err[0] ? curl_err : curl_easy_strerror(cc);
    if (cc == CURLE_COULDNT_CONNECT) {
        char why[400];
        rc = probe_connect(socket_path, words, why, sizeof why);
        snprintf(err, errlen, "kubelet Pod Resources %s: %s", method, why);
        goto done;
    }
    if (cc == CURLE_OPERATION_TIMEDOUT) {
        snprintf(err, errlen, "%s: no complete reply within %d ms (timed out)", what, timeout_ms);
        rc = AGENT_PR_ETIMEOUT;
        goto done;
    }
    if (cc == CURLE_WRITE_ERROR && r.over) {
        snprintf(err, errlen, "%s: reply larger than %u bytes, refused", what, AGENT_PW_MAX_MESSAGE);
        rc = AGENT_PR_EMALFORMED;
        goto done;
    }
    if (cc != CURLE_OK) {
        snprintf(err, errlen, "%s: the connection failed before the reply was complete: %s", what, words);
        rc = cc == CURLE_OUT_OF_MEMORY || cc == CURLE_WRITE_ERROR ? AGENT_PR_ENOMEM : AGENT_PR_ETRANSPORT;
        goto done;
    }
    if (r.http_status != 200) {
        snprintf(err, errlen, "%s: HTTP status %ld, not a gRPC reply", what, r.http_status);
        rc = AGENT_PR_EMALFORMED;
        goto done;
    }
    if (r.grpc_status < 0) {
        snprintf(err, errlen, "%s: malformed reply: no grpc-status in its headers or trailers", what);
        rc = AGENT_PR_EMALFORMED;
        goto done;
    }
    if (r.grpc_status != AGENT_GRPC_OK) {
        const char *hint = r.grpc_status == AGENT_GRPC_UNIMPLEMENTED
                               ? " (this kubelet does not serve the method: List needs Kubernetes 1.20 or later, "
                                 "GetAllocatableResources 1.23 or later, or its feature gate before that)"
                               : "";
        snprintf(err, errlen, "%s: gRPC status %s (%d): %s%s", what, agent_grpc_code_name(r.grpc_status),
                 r.grpc_status, r.grpc_message[0] ? r.grpc_message : "(no message)", hint);
        rc = AGENT_PR_ESTATUS;
        goto done;
    }
    if (strncasecmp(r.content_type, "application/grpc", 16) != 0 ||
        (r.content_type[16] != '\0' && r.content_type[16] != '+' && r.content_type[16] != ';')) {
        snprintf(err, errlen, "%s: malformed reply: content-type \"%s\", not application/grpc", what,
                 r.content_type);
        rc = AGENT_PR_EMALFORMED;
        goto done;
    }
    rc = unframe(&r, what, resp, resplen, err, errlen);
done:
    curl_slist_free_all(hdrs);
    if (h) curl_easy_cleanup(h);
    free(framed);
    free(r.body);
    return rc;
}

typedef int (*decode_fn)(const uint8_t *data, size_t len, void *out, char *err, size_t errlen);

static int call_decode(const char *socket_path, const char *method, int timeout_ms, void *out, decode_fn decode,
                       char *err, size_t errlen) {
    uint8_t *msg;
    size_t len;
    /* both requests are empty messages: zero bytes */
    int rc = agent_pr_call(socket_path, method, NULL, 0, timeout_ms, &msg, &len, NULL, err, errlen);
    if (rc != AGENT_PR_OK) return rc;
    char why[300];
    if (decode(msg, len, out, why, sizeof why) < 0) {
        snprintf(err, errlen, "kubelet Pod Resources %s on %s: malformed reply: %s", method, socket_path, why);
        rc = AGENT_PR_EMALFORMED;
    }
    free(msg);
    return rc;
}

static int decode_list(const uint8_t *data, size_t len, void *out, char *err, size_t errlen) {
    return agent_pw_decode_list(data, len, out, err, errlen);
}

static int decode_allocatable(const uint8_t *data, size_t len, void *out, char *err, size_t errlen) {
    return agent_pw_decode_allocatable(data, len, out, err, errlen);
}

int agent_pr_call_list(const char *socket_path, int timeout_ms, agent_pr_list *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    return call_decode(socket_path, AGENT_PR_METHOD_LIST, timeout_ms, out, decode_list, err, errlen);
}

int agent_pr_call_allocatable(const char *socket_path, int timeout_ms, agent_pr_allocatable *out, char *err,
                              size_t errlen) {
    memset(out, 0, sizeof *out);
    return call_decode(socket_path, AGENT_PR_METHOD_ALLOCATABLE, timeout_ms, out, decode_allocatable, err, errlen);
}
