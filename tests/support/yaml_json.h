/* yaml_json.h -- Kubernetes manifests (YAML) as cJSON, so tests can start tessera from deploy/'s own files
 * instead of restating them. libyaml's parser; a plain scalar becomes what YAML 1.1 and kubectl read it as
 * (true/false, null/~, an integer or a decimal number), a quoted one stays a string. Anchors and aliases,
 * which no manifest here uses, are refused. */
#ifndef YAML_JSON_H
#define YAML_JSON_H

#include <stddef.h>
#include <cjson/cJSON.h>

/* Every document of the YAML text as a JSON array (empty documents skipped). NULL with err. */
cJSON *yaml_json_parse_all(const char *text, size_t len, char *err, size_t errlen);
/* The same for a file. */
cJSON *yaml_json_load_all(const char *path, char *err, size_t errlen);

#endif
