/* link.c -- the link names and the matrix of link.h. */
#include "model/link.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ names ---- */

static const struct {
    const char *name;
    model_link link;
} link_names[] = {
    {"SYS", MODEL_LINK_SYS}, {"NODE", MODEL_LINK_NODE}, {"PHB", MODEL_LINK_PHB},
    {"PXB", MODEL_LINK_PXB}, {"PIX", MODEL_LINK_PIX},
};

bool model_link_parse(const char *s, model_link *out, int *nvlinks) {
    if (!s || !out || !nvlinks) return false;
    if (strcmp(s, "X") == 0) {
        *out = MODEL_LINK_UNKNOWN;
        *nvlinks = 0;
        return true;
    }
    for (size_t i = 0; i < sizeof link_names / sizeof link_names[0]; i++)
        if (strcmp(s, link_names[i].name) == 0) {
            *out = link_names[i].link;
            *nvlinks = 0;
            return true;
        }
    /* NV1..NV63: digits only, no sign, no leading zero (nvidia-smi prints none). */
    if (s[0] != 'N' || s[1] != 'V' || s[2] < '1' || s[2] > '9') return false;
    int v = s[2] - '0';
    if (s[3]) {
        if (s[3] < '0' || s[3] > '9' || s[4]) return false;
        v = v * 10 + (s[3] - '0');
    }
    if (v > 63) return false;
    *out = MODEL_LINK_NVLINK;
    *nvlinks = v;
    return true;
}

void model_link_format(model_link l, int nvlinks, char *buf, size_t len) {
    if (!buf || len == 0) return;
    if (l == MODEL_LINK_NVLINK) {
        snprintf(buf, len, "NV%d", nvlinks > 0 ? nvlinks : 1);
        return;
    }
    for (size_t i = 0; i < sizeof link_names / sizeof link_names[0]; i++)
        if (link_names[i].link == l) {
            snprintf(buf, len, "%s", link_names[i].name);
            return;
        }
    snprintf(buf, len, "X");   /* unknown, as parse reads it back */
}

const char *model_align_name(model_align a) {
    switch (a) {
    case MODEL_ALIGN_NVLINK: return "nvlink";
    case MODEL_ALIGN_PCIE: return "pcie";
    case MODEL_ALIGN_NUMA: return "numa";
    case MODEL_ALIGN_NONE: return "none";
    default: return "unknown";
    }
}

model_align model_align_of_link(model_link l) {
    switch (l) {
    case MODEL_LINK_NVLINK: return MODEL_ALIGN_NVLINK;
    case MODEL_LINK_PIX:
    case MODEL_LINK_PXB: return MODEL_ALIGN_PCIE;
    case MODEL_LINK_PHB:
    case MODEL_LINK_NODE: return MODEL_ALIGN_NUMA;
    case MODEL_LINK_SYS: return MODEL_ALIGN_NONE;
    default: return MODEL_ALIGN_UNKNOWN;
    }
}

/* ------------------------------------------------------------ matrix ---- */

int model_link_set(model_topo **t, int a, int b, model_link l, int nvlinks) {
    if (!t || a < 0 || b < 0 || a >= MODEL_LINK_MAX_GPUS || b >= MODEL_LINK_MAX_GPUS || a == b) return -1;
    if ((unsigned)l > MODEL_LINK_NVLINK || nvlinks < 0 || nvlinks > 255) return -1;
    if (!*t) {
        *t = calloc(1, sizeof **t);
        if (!*t) return -1;
    }
    int c = l == MODEL_LINK_NVLINK ? (nvlinks > 0 ? nvlinks : 1) : 0;
    (*t)->link[a][b] = (*t)->link[b][a] = (uint8_t)l;
    (*t)->nvlinks[a][b] = (*t)->nvlinks[b][a] = (uint8_t)c;
    int al = (int)model_align_of_link(l);
    for (int L = 1; L <= MODEL_ALIGN_NVLINK; L++) {
        uint16_t ba = (uint16_t)(1u << b), bb = (uint16_t)(1u << a);
        if (L <= al) {
            (*t)->adj[L][a] |= ba;
            (*t)->adj[L][b] |= bb;
        } else {
            (*t)->adj[L][a] &= (uint16_t)~ba;
            (*t)->adj[L][b] &= (uint16_t)~bb;
        }
    }
    return 0;
}
