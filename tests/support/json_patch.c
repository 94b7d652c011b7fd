/* json_patch.c -- RFC 6902 "add" and "remove" operations (json_patch.h). */
#include "tests/support/json_patch.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* RFC 6901 token, unescaped. */
static void token_unescape(char *t) {
    char *o = t;
    for (char *p = t; *p; p++) {
        if (p[0] == '~' && (p[1] == '0' || p[1] == '1')) {
            *o++ = p[1] == '0' ? '~' : '/';
            p++;
        } else {
            *o++ = *p;
        }
    }
    *o = 0;
}

int json_patch_apply(cJSON *doc, const cJSON *ops) {
    const cJSON *op;
    cJSON_ArrayForEach(op, ops) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(op, "op"), *p = cJSON_GetObjectItemCaseSensitive(op, "path");
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(op, "value");
        bool remove = cJSON_IsString(o) && !strcmp(o->valuestring, "remove");
        if (!cJSON_IsString(o) || (strcmp(o->valuestring, "add") && !remove) || !cJSON_IsString(p) || (!v && !remove) ||
            p->valuestring[0] != '/')
            return -1;
        char path[512];
        if (strlen(p->valuestring) >= sizeof path) return -1;
        snprintf(path, sizeof path, "%s", p->valuestring + 1);
        /* RFC 6901: tokens are split at every '/', empty ones included ("/a//b" names the key "") */
        char *toks[32];
        int n = 0;
        for (char *t = path; n < 32; ) {
            char *slash = strchr(t, '/');
            if (slash) *slash = 0;
            token_unescape(t);
            toks[n++] = t;
            if (!slash) break;
            t = slash + 1;
        }
        if (n == 0 || n == 32) return -1;
        cJSON *cur = doc;
        for (int i = 0; i < n - 1; i++) {
            cur = cJSON_IsArray(cur) ? cJSON_GetArrayItem(cur, atoi(toks[i])) : cJSON_GetObjectItemCaseSensitive(cur, toks[i]);
            if (!cur) return -1;   /* RFC 6902: the parent must exist */
        }
        if (remove) {
            cJSON *gone = NULL;
            if (cJSON_IsArray(cur)) {
                int at = atoi(toks[n - 1]);
                if (at >= 0 && at < cJSON_GetArraySize(cur)) gone = cJSON_DetachItemFromArray(cur, at);
            } else if (cJSON_IsObject(cur)) {
                gone = cJSON_DetachItemFromObjectCaseSensitive(cur, toks[n - 1]);
            }
            if (!gone) return -1;   /* RFC 6902: the target must exist */
            cJSON_Delete(gone);
            continue;
        }
        cJSON *val = cJSON_Duplicate(v, 1);
        if (cJSON_IsArray(cur)) {
            int at = atoi(toks[n - 1]);
            if (!strcmp(toks[n - 1], "-") || at == cJSON_GetArraySize(cur)) cJSON_AddItemToArray(cur, val);
            else if (at >= 0 && at < cJSON_GetArraySize(cur)) cJSON_InsertItemInArray(cur, at, val);
            else { cJSON_Delete(val); return -1; }   /* RFC 6902: an index past the end is an error */
        } else if (cJSON_IsObject(cur)) {
            if (cJSON_GetObjectItemCaseSensitive(cur, toks[n - 1])) cJSON_ReplaceItemInObjectCaseSensitive(cur, toks[n - 1], val);
            else cJSON_AddItemToObject(cur, toks[n - 1], val);
        } else {
            cJSON_Delete(val);
            return -1;
        }
    }
    return 0;
}

