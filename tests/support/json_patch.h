/* json_patch.h -- applies the JSON Patch (RFC 6902) an admission webhook answers, as the API server does before
 * it stores the object: "add" and "remove", which is all tessera's webhook emits ("remove" only to put its
 * tessera-cuda-shim init container back first). */
#ifndef JSON_PATCH_H
#define JSON_PATCH_H

#include <cjson/cJSON.h>

/* Apply ops (a JSON array of {op, path, value}) to doc in place. 0, or -1 when an op is neither "add" nor
 * "remove", a path is malformed, its parent does not exist (RFC 6902: the parent must exist) or a removed
 * member does not. */
int json_patch_apply(cJSON *doc, const cJSON *ops);

#endif
