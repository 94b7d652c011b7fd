/* pod.c -- see pod.h. */
#include "kube/pod.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kube_pod_block_stop_signals(sigset_t *stop) {
    sigemptyset(stop);
    sigaddset(stop, SIGTERM);
    sigaddset(stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, stop, NULL);
    signal(SIGPIPE, SIG_IGN);
}

int kube_pod_listen_addr(const char *s, bool numeric, struct sockaddr_storage *ss, socklen_t *sl, char *hostout,
                         size_t hostlen) {
    char host[256];
    const char *colon;
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        if (!rb || rb[1] != ':' || (size_t)(rb - s - 1) >= sizeof host) return KUBE_POD_LISTEN_MALFORMED;
        snprintf(host, sizeof host, "%.*s", (int)(rb - s - 1), s + 1);
        colon = rb + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon || (size_t)(colon - s) >= sizeof host) return KUBE_POD_LISTEN_MALFORMED;
        snprintf(host, sizeof host, "%.*s", (int)(colon - s), s);
    }
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 0 || port > 65535 || colon[1] == 0) return KUBE_POD_LISTEN_MALFORMED;
    if (hostlen) snprintf(hostout, hostlen, "%s", host);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | (numeric ? AI_NUMERICHOST : 0)}, *ai = NULL;
    if (getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &ai) != 0 || !ai) return KUBE_POD_LISTEN_UNRESOLVED;
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    *sl = ai->ai_addrlen;
    freeaddrinfo(ai);
    return 0;
}

int kube_pod_parse_duration(const char *s, int max_ms) {
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno) return -1;
    double mult = !strcmp(end, "ms") ? 1 : (!*end || !strcmp(end, "s")) ? 1000 : !strcmp(end, "m") ? 60000
                  : !strcmp(end, "h") ? 3600000 : -1;
    double ms = v * mult;
    if (mult < 0 || !(ms >= 1) || ms > max_ms) return -1;   /* !(>=) also refuses NaN */
    return (int)(ms + 0.5);
}
