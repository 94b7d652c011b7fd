/* json_patch.h -- applies the JSON Patch (RFC 6902) an admission webhook answers, as the API server does before
 * it stores the object: "add" operations only, which is all tessera's webhook emits. */
#ifndef JSON_PATCH_H
#define JSON_PATCH_H

#include <cjson/cJSON.h>

/* Apply ops (a JSON array of {op, path, value}) to doc in place. 0, or -1 when an op is not "add", a path is
 * malformed or its parent does not exist (RFC 6902: the parent must exist). */
int json_patch_apply(cJSON *doc, const cJSON *ops);

#endif
