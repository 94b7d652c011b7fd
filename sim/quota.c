/* quota.c -- parsing and lookup of the simulator's namespace quotas (quota.h). The quota
 * arithmetic itself is the replay's (replay.c), with the charges of model/charge.h. */
#include "sim/quota.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_amount(const char *s, int64_t *out) {
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || v < 0) return -1;
    *out = v;
    return 0;
}

static bool valid_name(const char *s, size_t len) {
    if (len == 0 || len >= SIM_QUOTA_NAME) return false;
    for (size_t i = 0; i < len; i++)
        if (s[i] == '=' || s[i] == ';' || s[i] == ',' || s[i] == ':' || s[i] == ' ') return false;
    return true;
}

/* One "NS=unit:N[,unit:N]". */
static int parse_one(sim_quotas *qs, const char *item, char *err, size_t errlen) {
    const char *eq = strchr(item, '=');
    if (!eq || !valid_name(item, (size_t)(eq - item))) {
        snprintf(err, errlen, "quota \"%s\": expected NAMESPACE=gpu-milli:N[,gpu-memory-mib:M]", item);
        return -1;
    }
    sim_quota q = {.gpu_milli = -1, .memory_mib = -1};
    memcpy(q.ns, item, (size_t)(eq - item));
    char buf[256];
    snprintf(buf, sizeof buf, "%s", eq + 1);
    char *save = NULL;
    int units = 0;
    for (char *u = strtok_r(buf, ",", &save); u; u = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(u, ':');
        int64_t v;
        if (colon) *colon = 0;
        int64_t *slot = !strcmp(u, "gpu-milli") ? &q.gpu_milli : !strcmp(u, "gpu-memory-mib") ? &q.memory_mib : NULL;
        if (!slot || !colon || parse_amount(colon + 1, &v) != 0) {
            snprintf(err, errlen, "quota \"%s\": \"%s%s%s\" is not gpu-milli:N or gpu-memory-mib:N (N a whole number)",
                     item, u, colon ? ":" : "", colon ? colon + 1 : "");
            return -1;
        }
        *slot = v;
        units++;
    }
    if (!units) {
        snprintf(err, errlen, "quota \"%s\": no limit given (gpu-milli:N, gpu-memory-mib:N)", item);
        return -1;
    }
    for (int i = 0; i < qs->n; i++)
        if (!strcmp(qs->q[i].ns, q.ns)) {
            qs->q[i] = q;
            return 0;
        }
    if (qs->n == SIM_QUOTA_MAX) {
        snprintf(err, errlen, "more than %d quotas", SIM_QUOTA_MAX);
        return -1;
    }
    qs->q[qs->n++] = q;
    return 0;
}

int sim_quotas_parse(sim_quotas *qs, const char *spec, char *err, size_t errlen) {
    char buf[4096];
    if (strlen(spec) >= sizeof buf) {
        snprintf(err, errlen, "quota spec longer than %zu characters", sizeof buf - 1);
        return -1;
    }
    snprintf(buf, sizeof buf, "%s", spec);
    char *save = NULL;
    int n = 0;
    for (char *it = strtok_r(buf, ";", &save); it; it = strtok_r(NULL, ";", &save), n++)
        if (parse_one(qs, it, err, errlen) != 0) return -1;
    if (!n) {
        snprintf(err, errlen, "empty quota spec");
        return -1;
    }
    return 0;
}

int sim_quotas_map(sim_quotas *qs, const char *spec, char *err, size_t errlen) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", spec);
    char *save = NULL;
    for (char *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(it, '=');
        if (!eq || !valid_name(it, (size_t)(eq - it)) || !valid_name(eq + 1, strlen(eq + 1))) {
            snprintf(err, errlen, "tenant mapping \"%s\": expected TENANT=NAMESPACE", it);
            return -1;
        }
        *eq = 0;
        int k;
        for (k = 0; k < qs->nmap && strcmp(qs->map_tenant[k], it); k++) {}
        if (k == SIM_QUOTA_MAX) {
            snprintf(err, errlen, "more than %d tenant mappings", SIM_QUOTA_MAX);
            return -1;
        }
        snprintf(qs->map_tenant[k], SIM_QUOTA_NAME, "%s", it);
        snprintf(qs->map_ns[k], SIM_QUOTA_NAME, "%s", eq + 1);
        if (k == qs->nmap) qs->nmap++;
    }
    return 0;
}

static const char *const mode_names[] = {"wait", "fifo", "refuse"};

const char *sim_quota_mode_name(sim_quota_mode m) { return m >= 0 && m <= SIM_QUOTA_REFUSE ? mode_names[m] : "?"; }

int sim_quotas_mode(sim_quotas *qs, const char *s, char *err, size_t errlen) {
    for (int m = 0; m <= SIM_QUOTA_REFUSE; m++)
        if (!strcmp(s, mode_names[m])) {
            qs->mode = (sim_quota_mode)m;
            return 0;
        }
    snprintf(err, errlen, "quota mode \"%s\": wait, fifo or refuse", s);
    return -1;
}

const char *sim_quotas_namespace(const sim_quotas *qs, const char *tenant) {
    for (int k = 0; k < qs->nmap; k++)
        if (!strcmp(qs->map_tenant[k], tenant)) return qs->map_ns[k];
    return tenant;
}

const sim_quota *sim_quotas_find(const sim_quotas *qs, const char *ns) {
    for (int i = 0; i < qs->n; i++)
        if (!strcmp(qs->q[i].ns, ns)) return &qs->q[i];
    return NULL;
}

void sim_quotas_format(const sim_quotas *qs, char *buf, size_t len) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < qs->n && o < len; i++) {
        const sim_quota *q = &qs->q[i];
        o += (size_t)snprintf(buf + o, len - o, "%s%s=", i ? ";" : "", q->ns);
        if (o < len && q->gpu_milli >= 0) o += (size_t)snprintf(buf + o, len - o, "gpu-milli:%lld", (long long)q->gpu_milli);
        if (o < len && q->memory_mib >= 0)
            o += (size_t)snprintf(buf + o, len - o, "%sgpu-memory-mib:%lld", q->gpu_milli >= 0 ? "," : "",
                                  (long long)q->memory_mib);
    }
}
