/* test_ext_printf_safe.c -- no '%' in anything kube-scheduler shows people (issue 19).
 *
 * kube-scheduler records its FailedScheduling Event with the extender's filter reason as a Go
 * format string: "25% memory" reads "25%!m(MISSING)emory" in `kubectl describe pod`. Every verb
 * (filter, prioritize, preempt, bind) is driven here with a broad set of pods -- every request form,
 * impossible ones, malformed ones, values with a '%' the pod wrote -- over the bodies a real
 * kube-scheduler sent (tests/fixtures/extender-samples, both nodeCacheCapable modes) and the demo
 * cluster's nodes, filling the nodes as it binds so that "no room" reasons come up too. The check is
 * generic: every string (key or value) anywhere in every reply, so a reason added later is covered
 * without touching this file. A second test holds model/ and policy/ to their own wording (no '%'
 * even before extender/base/text.h rewrites what leaves tessera).
 */
#include <stdlib.h>
#include <string.h>

#include "ext_helpers.h"
#include "extender/base/text.h"
#include "model/fit.h"
#include "model/request.h"

typedef struct pform {
    const char *limits, *anns;   /* the inside of resources.limits/requests and of metadata.annotations */
} pform;

#define SHARE "\"tessera.io/share\":\"1\""
static const pform forms[] = {
    /* every request form */
    {"\"nvidia.com/gpu\":\"1\"", NULL},
    {"\"nvidia.com/gpu\":\"2\"", NULL},
    {"\"nvidia.com/gpu\":\"8\"", NULL},
    {"\"nvidia.com/gpu\":\"1\"", "\"tessera.io/isolation\":\"any\""},
    {"\"nvidia.com/gpu\":\"1\"", "\"tessera.io/gpu-models\":\"Tesla-T4\""},
    {"\"nvidia.com/gpu.shared\":\"1\"", NULL},
    {"\"nvidia.com/gpu.shared\":\"3\"", "\"tessera.io/isolation\":\"mps\""},
    {"\"nvidia.com/mig-1g.10gb\":\"1\"", NULL},
    {"\"nvidia.com/mig-1g.10gb\":\"1\"", "\"tessera.io/isolation\":\"timeslice\""},
    {"\"nvidia.com/mig-3g.40gb\":\"2\"", NULL},
    {"\"nvidia.com/mig-1g.10gb.shared\":\"1\"", NULL},
    {"\"nvidia.com/gpumem\":\"20000\"", NULL},
    {"\"nvidia.com/gpumem\":\"20k\"", NULL},
    {"\"nvidia.com/gpumem\":\"20Gi\"", NULL},
    {"\"nvidia.com/gpumem\":\"8000\",\"nvidia.com/gpu\":\"2\"", NULL},
    {"\"nvidia.com/gpumem-percentage\":\"25\"", NULL},
    {"\"nvidia.com/gpumem-percentage\":\"50\",\"nvidia.com/gpucores\":\"30\"", NULL},
    {"\"nvidia.com/gpucores\":\"35\"", NULL},
    {"\"nvidia.com/gpucores\":\"60\"", "\"tessera.io/isolation\":\"mig\""},
    {"\"nvidia.com/gpumem-percentage\":\"75\"", "\"tessera.io/isolation\":\"timeslice\""},
    {SHARE, "\"tessera.io/gpu-fraction\":\"0.25\""},
    {SHARE, "\"tessera.io/gpu-fraction\":\"0.333\""},
    {SHARE, "\"gpu-fraction\":\"0.5\""},
    {SHARE, "\"gpu-memory\":\"16384\""},
    {SHARE, "\"gpu-fraction\":\"0.9\",\"tessera.io/gpu-models\":\"NVIDIA-H100-80GB-HBM3\""},
    {"\"cpu\":\"1\"", NULL},
    /* shares that no longer fit once the loop has filled the nodes, and ones that never fit */
    {"\"nvidia.com/gpumem\":\"79000\",\"nvidia.com/gpucores\":\"90\"", NULL},
    {"\"nvidia.com/gpucores\":\"100\"", NULL},
    {SHARE, "\"tessera.io/gpu-fraction\":\"1\""},
    {"\"nvidia.com/gpu\":\"16\"", NULL},
    {"\"nvidia.com/gpu\":\"17\"", NULL},
    {"\"nvidia.com/mig-7g.80gb\":\"9\"", NULL},
    {"\"nvidia.com/gpumem\":\"900000\"", NULL},
    {"\"nvidia.com/gpumem\":\"20G\"", NULL},
    {"\"nvidia.com/gpumem\":\"1.5Mi\"", NULL},
    {"\"nvidia.com/gpumem-percentage\":\"150\"", NULL},
    {"\"nvidia.com/gpumem\":\"1024\",\"nvidia.com/gpumem-percentage\":\"10\"", NULL},
    {"\"nvidia.com/gpu\":\"1\",\"nvidia.com/gpu.shared\":\"1\"", NULL},
    {"\"nvidia.com/mig-1c.3g.20gb\":\"1\"", NULL},
    {"\"nvidia.com/mig-9g.999gb\":\"1\"", NULL},
    {"\"nvidia.com/gpu.shared\":\"1\"", "\"tessera.io/isolation\":\"mig\""},
    {"\"nvidia.com/gpu\":\"1.5\"", NULL},
    {"\"nvidia.com/gpu\":\"-1\"", NULL},
    {"\"nvidia.com/gpu\":{\"a\":1}", NULL},
    /* malformed with a '%' the pod wrote, which the reason repeats */
    {SHARE, "\"tessera.io/gpu-fraction\":\"25%\""},
    {SHARE, "\"gpu-memory\":\"50%\""},
    {"\"nvidia.com/gpu\":\"1\"", "\"tessera.io/isolation\":\"50%\""},
    {"\"nvidia.com/gpu\":\"1\"", "\"tessera.io/gpu-models\":\"A100%\""},
    {"\"nvidia.com/gpu\":\"100%\"", NULL},
    {"\"nvidia.com/gpumem\":\"25%\"", NULL},
    {"\"nvidia.com/mig-1g%\":\"1\"", NULL},
};
#define NFORMS ((int)(sizeof forms / sizeof forms[0]))

/* Where the first '%' is, as "path: text"; false when no string (key or value) in j has one. */
static bool find_percent(const cJSON *j, const char *path, char *out, size_t len) {
    if (j->string && strchr(j->string, '%')) {
        snprintf(out, len, "%s: key \"%.300s\"", path, j->string);
        return true;
    }
    if (cJSON_IsString(j) && strchr(j->valuestring, '%')) {
        snprintf(out, len, "%s: \"%.300s\"", path, j->valuestring);
        return true;
    }
    const cJSON *c;
    int i = 0;
    cJSON_ArrayForEach(c, j) {
        char sub[300];
        if (c->string) snprintf(sub, sizeof sub, "%.200s.%.60s", path, c->string);
        else snprintf(sub, sizeof sub, "%.200s[%d]", path, i);
        i++;
        if (find_percent(c, sub, out, len)) return true;
    }
    return false;
}

typedef struct sweep {
    ext_verbs v;
    int replies, reasons, errors, bound;
    char bad[512];       /* the first '%' found ("" = none) */
    char *seen;          /* every reason and Error, one per line, for the coverage checks */
    size_t seen_len;
} sweep;

static void remember(sweep *s, const char *text) {
    size_t n = strlen(text);
    char *p = realloc(s->seen, s->seen_len + n + 2);
    if (!p) abort();
    s->seen = p;
    memcpy(s->seen + s->seen_len, text, n);
    s->seen_len += n;
    s->seen[s->seen_len++] = '\n';
    s->seen[s->seen_len] = 0;
}

/* One verb call: the raw reply and every string in it must be free of '%'. */
static cJSON *sweep_call(sweep *s, verb_fn fn, const char *verb, const char *body) {
    ext_reply r = {0};
    fn(&s->v, body, strlen(body), &r);
    s->replies++;
    cJSON *o = r.body ? cJSON_Parse(r.body) : NULL;
    if (!s->bad[0]) {
        if (!o) snprintf(s->bad, sizeof s->bad, "%s: reply is not JSON: %.300s", verb, r.body ? r.body : "(none)");
        else if (find_percent(o, verb, s->bad, sizeof s->bad)) {}
        else if (r.body && strchr(r.body, '%')) snprintf(s->bad, sizeof s->bad, "%s: raw reply: %.300s", verb, r.body);
    }
    ext_reply_free(&r);
    const cJSON *e = cJSON_GetObjectItem(o, "Error");
    if (cJSON_IsString(e) && e->valuestring[0]) {
        s->errors++;
        remember(s, e->valuestring);
    }
    const char *maps[] = {"FailedNodes", "FailedAndUnresolvableNodes"};
    for (int k = 0; k < 2; k++) {
        const cJSON *m;
        cJSON_ArrayForEach(m, cJSON_GetObjectItem(o, maps[k])) {
            s->reasons++;
            if (cJSON_IsString(m)) remember(s, m->valuestring);
        }
    }
    return o;
}

/* The API server refuses some Bindings with a message that has a '%' of its own. */
static int bind_some(void *user, const char *ns, const char *name, const char *uid, const char *node,
                     const cJSON *annotations, char *err, size_t errlen) {
    if (!strstr(name, "-refused")) return 0;
    snprintf(err, errlen, "pods \"%s\" is forbidden: exceeded quota: gpu-quota, 100%% of requests.nvidia.com/gpu used",
             name);
    return -1;
}

static const char *const demo_names[] = {"gpu-a100-whole", "gpu-a100-mig", "gpu-t4-timeslice", "gpu-h100-mps",
                                         "gpu-h100-single", "gpu-a100-layered", "cpu-only"};
#define NDEMO ((int)(sizeof demo_names / sizeof demo_names[0]))

/* A recorded body with our pod and the demo cluster's nodes in place of the recorded ones. */
static char *body_with(const char *mode, const char *file, const char *pod) {
    cJSON *req = extender_sample(mode, file);
    cJSON *p = cJSON_Parse(pod);
    if (p) cJSON_ReplaceItemInObject(req, "Pod", p);
    else cJSON_ReplaceItemInObject(req, "Pod", cJSON_CreateString(pod));   /* a malformed pod stays malformed */
    if (cJSON_GetObjectItem(req, "NodeNames") && cJSON_IsArray(cJSON_GetObjectItem(req, "NodeNames"))) {
        cJSON *names = cJSON_CreateArray();
        for (int i = 0; i < NDEMO; i++) cJSON_AddItemToArray(names, cJSON_CreateString(demo_names[i]));
        cJSON_ReplaceItemInObject(req, "NodeNames", names);
    }
    if (cJSON_IsObject(cJSON_GetObjectItem(req, "Nodes"))) cJSON_ReplaceItemInObject(req, "Nodes", demo_nodes());
    /* preempt: the recorded victims, on demo nodes (tessera knows neither the victims nor gpu-node-*) */
    const char *vk[] = {"NodeNameToVictims", "NodeNameToMetaVictims"};
    for (int k = 0; k < 2; k++) {
        cJSON *vm = cJSON_GetObjectItem(req, vk[k]);
        if (!cJSON_IsObject(vm)) continue;
        cJSON *it;
        int i = 0;
        cJSON_ArrayForEach(it, vm) {
            free(it->string);
            it->string = strdup(demo_names[i++ % NDEMO]);
        }
    }
    char *s = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    return s;
}

/* Everything one pod can make the verbs say, in one mode. */
static void sweep_pod(sweep *s, const char *mode, const char *name, const char *uid, const pform *f) {
    char *pod = pod_json(name, uid, 100, f->limits, f->anns, NULL);
    const char *files[] = {"01-filter.request.json", "02-prioritize.request.json", "04-preempt.request.json"};
    verb_fn fns[] = {ext_verb_filter, ext_verb_prioritize, ext_verb_preempt};
    const char *verbs[] = {"filter", "prioritize", "preempt"};
    for (int k = 0; k < 3; k++) {
        char *body = body_with(mode, files[k], pod);
        cJSON_Delete(sweep_call(s, fns[k], verbs[k], body));
        /* the same body cut short: malformed */
        body[strlen(body) / 2] = 0;
        cJSON_Delete(sweep_call(s, fns[k], verbs[k], body));
        free(body);
    }
    /* bind on every node in turn: it lands on one, the others say it is already there or does not fit */
    cJSON *bind = extender_sample(mode, "03-bind.request.json");
    cJSON_ReplaceItemInObject(bind, "PodName", cJSON_CreateString(name));
    cJSON_ReplaceItemInObject(bind, "PodUID", cJSON_CreateString(uid));
    for (int i = 0; i < NDEMO; i++) {
        cJSON_ReplaceItemInObject(bind, "Node", cJSON_CreateString(demo_names[i]));
        char *body = cJSON_PrintUnformatted(bind);
        cJSON *o = sweep_call(s, ext_verb_bind, "bind", body);
        const cJSON *e = cJSON_GetObjectItem(o, "Error");
        if (cJSON_IsString(e) && !e->valuestring[0]) s->bound++;
        cJSON_Delete(o);
        free(body);
    }
    cJSON_Delete(bind);
    free(pod);
}

static void sweep_mode(sweep *s, const char *mode) {
    for (int i = 0; i < NFORMS; i++) {
        char name[64], uid[64];
        /* every third pod's Binding is refused; one pod has a name no apiserver would allow */
        snprintf(name, sizeof name, i == 7 ? "p%d-%s-100%%" : "p%d-%s%s", i, mode, i % 3 == 2 ? "-refused" : "");
        snprintf(uid, sizeof uid, "uid-%s-%d", mode, i);
        sweep_pod(s, mode, name, uid, &forms[i]);
    }
    /* bodies that are not the verbs' args at all, some with a '%' of their own (not in a node name: those are
     * DNS subdomains, and filter must echo them as kube-scheduler sent them) */
    const char *junk[] = {"", "{", "[1,2]", "{\"Pod\": 25%}", "{\"Pod\":{\"metadata\":{\"name\":\"x%y\"}},\"NodeNames\":[\"a\"]}",
                          "{\"PodName\":\"a%b\",\"PodNamespace\":\"default\",\"PodUID\":\"u%\",\"Node\":\"gpu-a100-whole\"}",
                          "{\"Pod\":{},\"NodeNameToMetaVictims\":\"100%\"}",
                          "{\"Pod\":{},\"NodeNameToMetaVictims\":{\"n%\":{\"Pods\":[{}],\"NumPDBViolations\":0}}}"};
    verb_fn fns[] = {ext_verb_filter, ext_verb_prioritize, ext_verb_preempt, ext_verb_bind};
    const char *verbs[] = {"filter", "prioritize", "preempt", "bind"};
    for (size_t j = 0; j < sizeof junk / sizeof junk[0]; j++)
        for (int k = 0; k < 4; k++) cJSON_Delete(sweep_call(s, fns[k], verbs[k], junk[j]));
}

TEST(printf_safe_every_verb_reply_has_no_percent_sign) {
    const char *modes[] = {"node-list", "node-cache"};
    for (int m = 0; m < 2; m++) {
        sweep s = {0};
        ext_state *st = demo_state();
        ext_verbs_init(&s.v, st, NULL, bind_some, NULL);
        sweep_mode(&s, modes[m]);
        ext_state_free(st);
        char bad[512], *seen = s.seen ? s.seen : strdup("");
        snprintf(bad, sizeof bad, "%s", s.bad);
        /* the sweep reached what it is meant to: reasons of every kind, binds that worked and failed */
        bool coverage = s.reasons > 200 && s.errors > 100 && s.bound >= 10 &&
                        strstr(seen, "invalid GPU request") && strstr(seen, " percent SMs") &&
                        strstr(seen, "\"25 percent\" is not a share of one GPU in (0, 1] (a share, not a percentage: write 0.25)") && strstr(seen, "100 percent of requests") &&
                        strstr(seen, "is already on node") && strstr(seen, "not valid JSON");
        char where[200];
        snprintf(where, sizeof where, "%s: %d replies, %d reasons, %d errors, %d bound", modes[m], s.replies, s.reasons,
                 s.errors, s.bound);
        free(seen);
        CHECK_MSG(!bad[0], "%s: a '%%' reaches kube-scheduler: %s", where, bad);
        CHECK_MSG(coverage, "%s: the sweep missed reasons it should have produced", where);
    }
}

/* model/ and policy/ never write a '%' themselves: every reason, request summary and assignment
 * they produce for the '%'-free forms above, on nodes filled by binds, with every policy. */
TEST(printf_safe_model_and_policy_wording_has_no_percent_sign) {
    ext_state *st = demo_state();
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    char bad[600] = "", buf[1024];
    int texts = 0;
    for (int pass = 0; pass < 2 && !bad[0]; pass++) {
        for (int i = 0; i < NFORMS && !bad[0]; i++) {
            const pform *f = &forms[i];
            if (strchr(f->limits, '%') || (f->anns && strchr(f->anns, '%'))) continue;
            char name[32], uid[32], err[512];
            snprintf(name, sizeof name, "m%d-%d", pass, i);
            snprintf(uid, sizeof uid, "uid-m%d-%d", pass, i);
            char *pod = pod_json(name, uid, 0, f->limits, f->anns, NULL);
            model_request r;
            if (model_request_from_pod_json(pod, strlen(pod), &r, err, sizeof err) != 0) {
                texts++;
                if (strchr(err, '%')) snprintf(bad, sizeof bad, "request error: %s", err);
                free(pod);
                continue;
            }
            model_request_format(&r, buf, sizeof buf);
            texts++;
            if (strchr(buf, '%')) snprintf(bad, sizeof bad, "request summary: %.400s", buf);
            ext_state_lock(st);
            for (int n = 0; n < NDEMO && !bad[0]; n++) {
                const ext_node *en = ext_state_node(st, demo_names[n]);
                if (!en || !en->m) continue;
                model_assignment a;
                char why[MODEL_REASON_LEN] = "";
                int nfit = model_fit(en->m, &r, &a, 1, why, sizeof why);
                texts++;
                if (nfit > 0) model_assignment_format(en->m, &a, buf, sizeof buf);
                else snprintf(buf, sizeof buf, "%s", why);
                if (strchr(buf, '%')) snprintf(bad, sizeof bad, "%s on %s: %.400s", name, demo_names[n], buf);
                for (int p = 0; p < policy_count() && !bad[0]; p++) {
                    policy_result res;
                    char pwhy[MODEL_REASON_LEN] = "";
                    policy_ctx ctx;
                    policy_ctx_init(&ctx, 1);
                    policy_score(policy_at(p), &r, en->m, &ctx, &res, pwhy, sizeof pwhy);
                    texts++;
                    if (strchr(pwhy, '%'))
                        snprintf(bad, sizeof bad, "policy %s, %s on %s: %s", policy_name(policy_at(p)), name,
                                 demo_names[n], pwhy);
                }
            }
            ext_state_unlock(st);
            /* fill the nodes as the verbs would, so the second pass meets "no room" reasons */
            for (int n = 0; n < NDEMO; n++) {
                place_pod(&v, pod, name, uid, demo_names[n], err, sizeof err);
                if (!err[0]) break;
            }
            free(pod);
        }
    }
    ext_state_free(st);
    CHECK_MSG(!bad[0], "model/policy wrote a '%%': %s", bad);
    CHECK_MSG(texts > 500, "only %d texts checked", texts);
}

TEST(printf_safe_text_rewrites_percent_signs) {
    char out[64];
    CHECK_INT((long)ext_text_printf_safe(out, sizeof out, "25% memory, 25 % SMs, %"), 42);
    CHECK_STR(out, "25 percent memory, 25 percent SMs, percent");
    CHECK_INT((long)ext_text_printf_safe(out, sizeof out, "no sign"), 7);
    CHECK_STR(out, "no sign");
    CHECK_INT((long)ext_text_printf_safe(out, sizeof out, NULL), 0);
    CHECK_STR(out, "");
    /* cut to fit, terminated, the full length returned */
    char small[6];
    CHECK_INT((long)ext_text_printf_safe(small, sizeof small, "1%"), 9);
    CHECK_STR(small, "1 per");
    CHECK_INT((long)ext_text_printf_safe(NULL, 0, "%%"), 15);
    char *d = ext_text_printf_safe_dup("100%%");
    CHECK_STR(d, "100 percent percent");
    free(d);
}
