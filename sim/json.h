/* json.h -- small helpers for reading the simulator's input files: typed field access
 * whose errors name the field path ("workloads[3].duration: expected a number >= 0"),
 * and reading a whole file. Shared by cluster.c and trace.c. */
#ifndef SIM_JSON_H
#define SIM_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

/* Read a whole file into a NUL-terminated buffer (caller frees). NULL with err. */
char *sim_read_file(const char *path, size_t *len, char *err, size_t errlen);

/* Field `key` of object o, at path `where` (for messages). Each returns 0, 1 when the
 * field is absent and !required (out untouched), or -1 with err. */
int sim_json_str(const cJSON *o, const char *where, const char *key, bool required, const char **out, char *err,
                 size_t errlen);
int sim_json_num(const cJSON *o, const char *where, const char *key, bool required, double lo, double hi,
                 double *out, char *err, size_t errlen);
int sim_json_int(const cJSON *o, const char *where, const char *key, bool required, int64_t lo, int64_t hi,
                 int64_t *out, char *err, size_t errlen);

/* Every key of o must be one of the NULL-terminated list (a typo is an error, never
 * silently ignored). 0, or -1 with err naming the key. */
int sim_json_known_keys(const cJSON *o, const char *where, const char *const *keys, char *err, size_t errlen);

#endif
