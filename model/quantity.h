/* quantity.h -- Kubernetes resource quantities ("100m", "8Gi", "30k", "1e3", "0.5").
 *
 * The apiserver writes quantities back in canonical form, so a pod written with
 * "1000Mi" may reach us as "1000Mi", "1048576000" or "1e9"; every form parses here.
 * Values are kept as int64 in milli-units so that CPU ("100m") and integer resources
 * share one representation without floating point.
 */
#ifndef MODEL_QUANTITY_H
#define MODEL_QUANTITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Parse a quantity into milli-units (1 == 0.001). Accepts an optional sign, decimal
 * digits with an optional fraction, and one suffix: binary (Ki Mi Gi Ti Pi Ei),
 * decimal (n u m k M G T P E) or an exponent (e3, E-2). Values that are not a whole
 * number of milli-units are rounded up, as Kubernetes does. Returns 0 on success,
 * -1 with a message in err on malformed input or overflow. */
int model_quantity_parse_milli(const char *s, int64_t *milli, char *err, size_t errlen);

/* Parse a non-negative quantity times 2^exp2, for a unit the quantity is not written in:
 * exp2 = -20 reads a count of bytes ("20Gi") as MiB (20480). *value is rounded up to a
 * whole number; *exact says whether it was whole already ("1.5Mi" as MiB: 2, not exact).
 * -60 <= exp2 <= 60. Returns 0, or -1 with a message in err. */
int model_quantity_parse_scaled(const char *s, int exp2, int64_t *value, bool *exact, char *err, size_t errlen);

/* Parse a quantity that must be a whole, non-negative number (extended resources such
 * as nvidia.com/gpu: "2" or "2000m" is fine, "1500m" or "-1" is not). */
int model_quantity_parse_int(const char *s, int64_t *value, char *err, size_t errlen);

#endif
