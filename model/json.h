/* json.h -- the two cJSON look-ups every reader of Kubernetes objects repeats: a member of an
 * object (NULL when the parent is not an object or lacks it) and a string member (NULL when
 * absent or not a string). Used by model/ and by the extender, so both read objects alike.
 */
#ifndef MODEL_JSON_H
#define MODEL_JSON_H

#include <cjson/cJSON.h>

static inline const cJSON *model_json_get(const cJSON *o, const char *k) {
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
}

static inline const char *model_json_str(const cJSON *o, const char *k) {
    const cJSON *v = model_json_get(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

#endif
