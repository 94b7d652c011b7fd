/* pod.c -- see pod.h. */
#include "kube/pod.h"

#include <pthread.h>

void kube_pod_block_stop_signals(sigset_t *stop) {
    sigemptyset(stop);
    sigaddset(stop, SIGTERM);
    sigaddset(stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, stop, NULL);
    signal(SIGPIPE, SIG_IGN);
}
