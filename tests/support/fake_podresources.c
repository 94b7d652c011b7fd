/* fake_podresources.c -- a fake kubelet Pod Resources gRPC server on libnghttp2 (see fake_podresources.h). */
#include "tests/support/fake_podresources.h"

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent/podresources.h"
#include "agent/protowire.h"

#define MAX_HEADERS 32

typedef struct header {
    char *name, *value;
} header;

struct fake_pr {
    char dir[64], path[96];
    int lfd;
    pthread_t thread;
    bool started;
    _Atomic int stop;
    pthread_mutex_t mu;
    /* guarded by mu */
    agent_pw_buf list_msg, alloc_msg;       /* the encoded replies */
    char *fault_method;                     /* NULL: every method */
    fake_pr_fault fault;
    int fault_arg;
    char *fault_msg;
    int calls_list, calls_alloc, calls_other;
    header last[MAX_HEADERS];
    int nlast;
};

/* ---- the configured replies ---- */

static char *xstrndup(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (!p) abort();
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static void *xgrow(void *arr, size_t n, size_t size) {
    void *p = realloc(arr, (n + 1) * size);
    if (!p) abort();
    memset((char *)p + n * size, 0, size);
    return p;
}

/* "a,b,c" -> ids; "numa=0,1" -> numa */
static void parse_ids(const char *s, agent_pr_devices *d) {
    while (*s) {
        const char *c = strchr(s, ',');
        size_t n = c ? (size_t)(c - s) : strlen(s);
        d->ids = xgrow(d->ids, d->nids, sizeof *d->ids);
        d->ids[d->nids++] = xstrndup(s, n);
        s += n + (c ? 1 : 0);
    }
}

static void parse_numa(const char *s, agent_pr_devices *d) {
    while (*s) {
        char *end;
        long long v = strtoll(s, &end, 10);
        d->numa = xgrow(d->numa, d->nnuma, sizeof *d->numa);
        d->numa[d->nnuma++] = v;
        s = *end == ',' ? end + 1 : end + strlen(end);
    }
}

/* Splits a line into up to 5 words (in place). */
static int words(char *line, char **w, int max) {
    int n = 0;
    for (char *tok = strtok(line, " \t"); tok && n < max; tok = strtok(NULL, " \t")) w[n++] = tok;
    return n;
}

static int parse_devices(char **w, int n, agent_pr_devices *d, char *err, size_t errlen, int lineno) {
    d->resource = strdup(w[0]);
    if (n >= 2) parse_ids(w[1], d);
    if (n >= 3) {
        if (strncmp(w[2], "numa=", 5) != 0) {
            snprintf(err, errlen, "line %d: \"%s\" is not numa=<n>,...", lineno, w[2]);
            return -1;
        }
        parse_numa(w[2] + 5, d);
    }
    return 0;
}

/* Runs fn on each meaningful line (a writable copy). */
typedef int (*line_fn)(char *line, int lineno, void *ctx, char *err, size_t errlen);
static int each_line(const char *spec, line_fn fn, void *ctx, char *err, size_t errlen) {
    char *copy = strdup(spec ? spec : ""), *save = NULL;
    int lineno = 0, rc = 0;
    if (!copy) abort();
    for (char *line = copy; line && rc == 0; line = save) {
        save = strchr(line, '\n');
        if (save) *save++ = '\0';
        lineno++;
        while (*line == ' ' || *line == '\t') line++;
        if (!*line || *line == '#') continue;
        rc = fn(line, lineno, ctx, err, errlen);
    }
    free(copy);
    return rc;
}

static int pod_line(char *line, int lineno, void *ctx, char *err, size_t errlen) {
    agent_pr_list *l = ctx;
    char *w[6];
    int n = words(line, w, 6);
    char *slash = n >= 3 ? strchr(w[0], '/') : NULL;
    if (!slash || n > 5) {
        snprintf(err, errlen, "line %d: want <ns>/<pod> <container> <resource> <ids> [numa=...]", lineno);
        return -1;
    }
    *slash = '\0';
    const char *ns = w[0], *pod = slash + 1, *ctr = w[1];
    agent_pr_pod *p = NULL;
    for (size_t i = 0; i < l->npods && !p; i++)
        if (!strcmp(l->pods[i].namespace_, ns) && !strcmp(l->pods[i].name, pod)) p = &l->pods[i];
    if (!p) {
        l->pods = xgrow(l->pods, l->npods, sizeof *l->pods);
        p = &l->pods[l->npods++];
        p->namespace_ = strdup(ns);
        p->name = strdup(pod);
    }
    agent_pr_container *c = NULL;
    for (size_t i = 0; i < p->ncontainers && !c; i++)
        if (!strcmp(p->containers[i].name, ctr)) c = &p->containers[i];
    if (!c) {
        p->containers = xgrow(p->containers, p->ncontainers, sizeof *p->containers);
        c = &p->containers[p->ncontainers++];
        c->name = strdup(ctr);
    }
    if (!strcmp(w[2], "-")) return 0;
    c->devices = xgrow(c->devices, c->ndevices, sizeof *c->devices);
    return parse_devices(w + 2, n - 2, &c->devices[c->ndevices++], err, errlen, lineno);
}

static int alloc_line(char *line, int lineno, void *ctx, char *err, size_t errlen) {
    agent_pr_allocatable *a = ctx;
    char *w[4];
    int n = words(line, w, 4);
    if (n < 2 || n > 3) {
        snprintf(err, errlen, "line %d: want <resource> <ids> [numa=...]", lineno);
        return -1;
    }
    a->devices = xgrow(a->devices, a->ndevices, sizeof *a->devices);
    return parse_devices(w, n, &a->devices[a->ndevices++], err, errlen, lineno);
}

int fake_pr_parse_pods(const char *spec, agent_pr_list *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (each_line(spec, pod_line, out, err, errlen) == 0) return 0;
    agent_pr_list_free(out);
    return -1;
}

int fake_pr_parse_allocatable(const char *spec, agent_pr_allocatable *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (each_line(spec, alloc_line, out, err, errlen) == 0) return 0;
    agent_pr_allocatable_free(out);
    return -1;
}

int fake_pr_set_pods(fake_pr *f, const char *spec, char *err, size_t errlen) {
    agent_pr_list l;
    agent_pw_buf b = {0};
    int rc = fake_pr_parse_pods(spec, &l, err, errlen);
    if (rc == 0 && agent_pw_encode_list(&l, &b) < 0) abort();
    agent_pr_list_free(&l);
    if (rc < 0) return -1;
    pthread_mutex_lock(&f->mu);
    agent_pw_buf_free(&f->list_msg);
    f->list_msg = b;
    pthread_mutex_unlock(&f->mu);
    return 0;
}

int fake_pr_set_allocatable(fake_pr *f, const char *spec, char *err, size_t errlen) {
    agent_pr_allocatable a;
    agent_pw_buf b = {0};
    int rc = fake_pr_parse_allocatable(spec, &a, err, errlen);
    if (rc == 0 && agent_pw_encode_allocatable(&a, &b) < 0) abort();
    agent_pr_allocatable_free(&a);
    if (rc < 0) return -1;
    pthread_mutex_lock(&f->mu);
    agent_pw_buf_free(&f->alloc_msg);
    f->alloc_msg = b;
    pthread_mutex_unlock(&f->mu);
    return 0;
}

void fake_pr_set_fault(fake_pr *f, const char *method, fake_pr_fault fault, int arg, const char *msg) {
    pthread_mutex_lock(&f->mu);
    free(f->fault_method);
    free(f->fault_msg);
    f->fault_method = method ? strdup(method) : NULL;
    f->fault_msg = msg ? strdup(msg) : NULL;
    f->fault = fault;
    f->fault_arg = arg;
    pthread_mutex_unlock(&f->mu);
}

int fake_pr_calls(fake_pr *f, const char *method) {
    pthread_mutex_lock(&f->mu);
    int n = !method                                      ? f->calls_list + f->calls_alloc + f->calls_other
            : !strcmp(method, AGENT_PR_METHOD_LIST)        ? f->calls_list
            : !strcmp(method, AGENT_PR_METHOD_ALLOCATABLE) ? f->calls_alloc
                                                           : f->calls_other;
    pthread_mutex_unlock(&f->mu);
    return n;
}

char *fake_pr_last_header(fake_pr *f, const char *name) {
    char *v = NULL;
    pthread_mutex_lock(&f->mu);
    for (int i = 0; i < f->nlast && !v; i++)
        if (!strcasecmp(f->last[i].name, name)) v = strdup(f->last[i].value);
    pthread_mutex_unlock(&f->mu);
    return v;
}

void fake_pr_unlink_socket(fake_pr *f) {
    unlink(f->path);
}

const char *fake_pr_socket(const fake_pr *f) {
    return f->path;
}

/* ---- one connection: HTTP/2 with nghttp2 ---- */

typedef struct stream {
    int32_t id;
    char *path;
    header hdrs[MAX_HEADERS];
    int nhdrs;
    agent_pw_buf body;          /* the request body */
    uint8_t *out;               /* the reply body: prefix + message */
    size_t outn, outoff;
    bool half;                  /* FAKE_PR_CLOSE_MID: send half of out, then close */
    bool trailer_status;        /* send trailers with grpc-status 0 after the body (false: without it) */
    int64_t respond_at_ms;      /* 0: not ready to answer yet */
    bool answered;
    struct stream *next;
} stream;

typedef struct conn {
    fake_pr *f;
    int fd;
    nghttp2_session *s;
    stream *streams;
    bool close_now;
} conn;

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void stream_free(stream *st) {
    free(st->path);
    for (int i = 0; i < st->nhdrs; i++) {
        free(st->hdrs[i].name);
        free(st->hdrs[i].value);
    }
    agent_pw_buf_free(&st->body);
    free(st->out);
    free(st);
}

static ssize_t on_send(nghttp2_session *s, const uint8_t *data, size_t len, int flags, void *user) {
    conn *c = user;
    ssize_t n = send(c->fd, data, len, MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN || errno == EINTR ? NGHTTP2_ERR_WOULDBLOCK : NGHTTP2_ERR_CALLBACK_FAILURE;
    return n;
}

static int on_begin_headers(nghttp2_session *s, const nghttp2_frame *frame, void *user) {
    conn *c = user;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    stream *st = calloc(1, sizeof *st);
    if (!st) return NGHTTP2_ERR_CALLBACK_FAILURE;
    st->id = frame->hd.stream_id;
    st->next = c->streams;
    c->streams = st;
    nghttp2_session_set_stream_user_data(s, st->id, st);
    return 0;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *frame, const uint8_t *name, size_t namelen,
                     const uint8_t *value, size_t valuelen, uint8_t flags, void *user) {
    stream *st = nghttp2_session_get_stream_user_data(s, frame->hd.stream_id);
    if (!st) return 0;
    if (namelen == 5 && !memcmp(name, ":path", 5)) {
        free(st->path);
        st->path = xstrndup((const char *)value, valuelen);
    } else if (st->nhdrs < MAX_HEADERS) {
        st->hdrs[st->nhdrs].name = xstrndup((const char *)name, namelen);
        st->hdrs[st->nhdrs].value = xstrndup((const char *)value, valuelen);
        st->nhdrs++;
    }
    return 0;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len, void *user) {
    stream *st = nghttp2_session_get_stream_user_data(s, id);
    if (!st) return 0;
    agent_pw_buf *b = &st->body;
    /* reuse the encoder's buffer: append raw bytes */
    size_t need = b->n + len;
    if (need > b->cap) {
        uint8_t *p = realloc(b->p, need);
        if (!p) return NGHTTP2_ERR_CALLBACK_FAILURE;
        b->p = p;
        b->cap = need;
    }
    memcpy(b->p + b->n, data, len);
    b->n += len;
    return 0;
}

static const char *hdr(const stream *st, const char *name) {
    for (int i = 0; i < st->nhdrs; i++)
        if (!strcasecmp(st->hdrs[i].name, name)) return st->hdrs[i].value;
    return NULL;
}

static void percent_encode(const char *s, char *out, size_t outlen) {
    size_t o = 0;
    for (; *s && o + 4 < outlen; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c > 0x7e || c == '%') o += (size_t)snprintf(out + o, outlen - o, "%%%02X", c);
        else out[o++] = (char)c;
    }
    out[o] = '\0';
}

#define NV(n, v) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE}

static void submit_status_only(conn *c, stream *st, int code, const char *msg) {
    char codes[16], enc[1024];
    snprintf(codes, sizeof codes, "%d", code);
    percent_encode(msg ? msg : "", enc, sizeof enc);
    nghttp2_nv nva[] = {NV(":status", "200"), NV("content-type", "application/grpc"), NV("grpc-status", codes),
                        NV("grpc-message", enc)};
    nghttp2_submit_response(c->s, st->id, nva, msg ? 4 : 3, NULL);
}

static ssize_t on_read_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length, uint32_t *data_flags,
                            nghttp2_data_source *source, void *user) {
    conn *c = user;
    stream *st = source->ptr;
    size_t limit = st->half ? st->outn / 2 : st->outn;
    if (st->outoff >= limit && st->half) {
        c->close_now = true; /* close with the reply half sent */
        return NGHTTP2_ERR_DEFERRED;
    }
    size_t n = limit - st->outoff < length ? limit - st->outoff : length;
    memcpy(buf, st->out + st->outoff, n);
    st->outoff += n;
    if (st->outoff >= st->outn) {
        *data_flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        nghttp2_nv ok[] = {NV("grpc-status", "0")}, other[] = {NV("x-fake", "no status")};
        nghttp2_submit_trailer(s, id, st->trailer_status ? ok : other, 1);
    }
    return (ssize_t)n;
}

/* The request is complete: count it and decide the reply (sent now, or later for FAKE_PR_SLOW). */
static void request_done(conn *c, stream *st) {
    fake_pr *f = c->f;
    const char *ctype = hdr(st, "content-type");
    pthread_mutex_lock(&f->mu);
    const char *path = st->path ? st->path : "";
    bool is_list = !strcmp(path, AGENT_PR_METHOD_LIST), is_alloc = !strcmp(path, AGENT_PR_METHOD_ALLOCATABLE);
    if (is_list) f->calls_list++;
    else if (is_alloc) f->calls_alloc++;
    else f->calls_other++;
    for (int i = 0; i < f->nlast; i++) {
        free(f->last[i].name);
        free(f->last[i].value);
    }
    f->nlast = 0;
    for (int i = 0; i < st->nhdrs; i++) {
        f->last[f->nlast].name = strdup(st->hdrs[i].name);
        f->last[f->nlast].value = strdup(st->hdrs[i].value);
        f->nlast++;
    }
    bool faulty = f->fault != FAKE_PR_SERVE && (!f->fault_method || !strcmp(f->fault_method, path));
    fake_pr_fault fault = faulty ? f->fault : FAKE_PR_SERVE;
    int arg = f->fault_arg;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", f->fault_msg ? f->fault_msg : "");
    agent_pw_buf *m = is_list ? &f->list_msg : &f->alloc_msg;
    size_t mlen = m->n;
    uint8_t *message = malloc(mlen + 1);
    if (!message) abort();
    if (mlen) memcpy(message, m->p, mlen);
    pthread_mutex_unlock(&f->mu);

    st->respond_at_ms = now_ms();
    st->answered = true;
    if (!ctype || strncmp(ctype, "application/grpc", 16) != 0) {
        nghttp2_nv nva[] = {NV(":status", "415")};
        nghttp2_submit_response(c->s, st->id, nva, 1, NULL);
        free(message);
        return;
    }
    /* one message with an empty body: 5 bytes, flag 0, length 0 (both requests are empty messages) */
    const agent_pw_buf *in = &st->body;
    if (in->n < 5 || in->p[0] != 0 ||
        ((uint32_t)in->p[1] << 24 | (uint32_t)in->p[2] << 16 | (uint32_t)in->p[3] << 8 | in->p[4]) != in->n - 5) {
        submit_status_only(c, st, 13, "grpc: malformed request message");
        free(message);
        return;
    }
    if (!is_list && !is_alloc) {
        char words[600];
        const char *method = strrchr(path, '/');
        snprintf(words, sizeof words, "unknown method %s for service v1.PodResourcesLister", method ? method + 1 : "");
        submit_status_only(c, st, AGENT_GRPC_UNIMPLEMENTED, words);
        free(message);
        return;
    }
    if (fault == FAKE_PR_HTTP_STATUS) {
        char code[16];
        snprintf(code, sizeof code, "%d", arg);
        nghttp2_nv nva[] = {NV(":status", code)};
        nghttp2_submit_response(c->s, st->id, nva, 1, NULL);
        free(message);
        return;
    }
    if (fault == FAKE_PR_STATUS) {
        submit_status_only(c, st, arg, msg[0] ? msg : NULL);
        free(message);
        return;
    }
    if (fault == FAKE_PR_GARBAGE) {
        free(message);
        mlen = arg > 0 ? (size_t)arg : 64;
        message = malloc(mlen);
        if (!message) abort();
        uint32_t x = 2463534242u; /* xorshift32: the same garbage on every run */
        for (size_t i = 0; i < mlen; i++) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            message[i] = (uint8_t)x;
        }
    }
    size_t announced = fault == FAKE_PR_SHORT_PREFIX ? mlen + 100 : mlen;
    st->outn = mlen + 5;
    st->out = malloc(st->outn);
    if (!st->out) abort();
    st->out[0] = fault == FAKE_PR_COMPRESSED ? 1 : 0;
    st->out[1] = (uint8_t)(announced >> 24);
    st->out[2] = (uint8_t)(announced >> 16);
    st->out[3] = (uint8_t)(announced >> 8);
    st->out[4] = (uint8_t)announced;
    if (mlen) memcpy(st->out + 5, message, mlen);
    free(message);
    st->half = fault == FAKE_PR_CLOSE_MID;
    st->trailer_status = fault != FAKE_PR_NO_STATUS;
    if (fault == FAKE_PR_SLOW) {
        st->respond_at_ms = now_ms() + arg;
        st->answered = false;   /* the loop sends it when the time comes */
        return;
    }
    nghttp2_nv nva[] = {NV(":status", "200"), NV("content-type", "application/grpc")};
    nghttp2_data_provider dp = {.source.ptr = st, .read_callback = on_read_body};
    nghttp2_submit_response(c->s, st->id, nva, 2, &dp);
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *frame, void *user) {
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        stream *st = nghttp2_session_get_stream_user_data(s, frame->hd.stream_id);
        if (st && !st->answered && !st->respond_at_ms) request_done(user, st);
    }
    return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t id, uint32_t error_code, void *user) {
    conn *c = user;
    for (stream **pp = &c->streams; *pp; pp = &(*pp)->next) {
        if ((*pp)->id == id) {
            stream *st = *pp;
            *pp = st->next;
            stream_free(st);
            break;
        }
    }
    return 0;
}

/* Late replies (FAKE_PR_SLOW) whose time has come. */
static void send_due(conn *c) {
    int64_t now = now_ms();
    for (stream *st = c->streams; st; st = st->next) {
        if (st->answered || !st->respond_at_ms || st->respond_at_ms > now) continue;
        st->answered = true;
        nghttp2_nv nva[] = {NV(":status", "200"), NV("content-type", "application/grpc")};
        nghttp2_data_provider dp = {.source.ptr = st, .read_callback = on_read_body};
        nghttp2_submit_response(c->s, st->id, nva, 2, &dp);
    }
}

static void serve_conn(fake_pr *f, int fd) {
    nghttp2_session_callbacks *cbs;
    conn c = {.f = f, .fd = fd};
    if (nghttp2_session_callbacks_new(&cbs) != 0) return;
    nghttp2_session_callbacks_set_send_callback(cbs, on_send);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    int rc = nghttp2_session_server_new(&c.s, cbs, &c);
    nghttp2_session_callbacks_del(cbs);
    if (rc != 0) return;
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100}};
    nghttp2_submit_settings(c.s, NGHTTP2_FLAG_NONE, iv, 1);
    uint8_t buf[16384];
    while (!f->stop && !c.close_now) {
        send_due(&c);
        if (nghttp2_session_send(c.s) != 0 || c.close_now) break;
        if (!nghttp2_session_want_read(c.s) && !nghttp2_session_want_write(c.s)) break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int pr = poll(&p, 1, 10);
        if (pr < 0 && errno != EINTR) break;
        if (pr <= 0) continue;
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;  /* the client went away (its timeout) or closed */
        if (nghttp2_session_mem_recv(c.s, buf, (size_t)n) < 0) break;
    }
    nghttp2_session_del(c.s);   /* closes the streams: on_stream_close frees them */
    while (c.streams) {
        stream *st = c.streams;
        c.streams = st->next;
        stream_free(st);
    }
}

static void *serve(void *arg) {
    fake_pr *f = arg;
    while (!f->stop) {
        struct pollfd p = {.fd = f->lfd, .events = POLLIN};
        if (poll(&p, 1, 20) <= 0) continue;
        int fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) continue;
        serve_conn(f, fd);
        close(fd);
    }
    return NULL;
}

fake_pr *fake_pr_start(char *err, size_t errlen) {
    fake_pr *f = calloc(1, sizeof *f);
    if (!f) abort();
    pthread_mutex_init(&f->mu, NULL);
    f->lfd = -1;
    snprintf(f->dir, sizeof f->dir, "/tmp/tessera-podres-XXXXXX");
    if (!mkdtemp(f->dir)) {
        snprintf(err, errlen, "mkdtemp: %s", strerror(errno));
        f->dir[0] = '\0';
        fake_pr_stop(f);
        return NULL;
    }
    snprintf(f->path, sizeof f->path, "%s/kubelet.sock", f->dir);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", f->path);
    f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (f->lfd < 0 || bind(f->lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(f->lfd, 16) < 0) {
        snprintf(err, errlen, "listen on %s: %s", f->path, strerror(errno));
        fake_pr_stop(f);
        return NULL;
    }
    if (pthread_create(&f->thread, NULL, serve, f) != 0) {
        snprintf(err, errlen, "pthread_create failed");
        fake_pr_stop(f);
        return NULL;
    }
    f->started = true;
    return f;
}

void fake_pr_stop(fake_pr *f) {
    if (!f) return;
    if (f->started) {
        f->stop = 1;
        pthread_join(f->thread, NULL);
    }
    if (f->lfd >= 0) close(f->lfd);
    if (f->path[0]) unlink(f->path);
    if (f->dir[0]) rmdir(f->dir);
    agent_pw_buf_free(&f->list_msg);
    agent_pw_buf_free(&f->alloc_msg);
    free(f->fault_method);
    free(f->fault_msg);
    for (int i = 0; i < f->nlast; i++) {
        free(f->last[i].name);
        free(f->last[i].value);
    }
    pthread_mutex_destroy(&f->mu);
    free(f);
}
