/* text.h -- text that kube-scheduler shows people, made printf-safe.
 *
 * kube-scheduler records its FailedScheduling Event with the extender's filter reason (and an
 * extender's Error) as a Go format string, so a '%' in it reads "%!m(MISSING)" in `kubectl
 * describe pod`. tessera's own wording never has one: model/ and policy/ write "percent". What
 * tessera repeats but did not write -- a value from the pod ("gpu-fraction: 25%"), an API
 * server's error -- passes through here on its way into a verb's reply or an Event, so no '%'
 * leaves tessera there whatever the input.
 */
#ifndef EXT_TEXT_H
#define EXT_TEXT_H

#include <stddef.h>

/* The word each '%' becomes. */
#define EXT_TEXT_PERCENT "percent"

/* Copies in to out with each '%' written as EXT_TEXT_PERCENT, after a space unless one is
 * there already ("100%" -> "100 percent", "a % b" -> "a percent b"), cut to fit and always
 * terminated when outlen > 0. Returns the length the whole text would have, as snprintf
 * does: a result >= outlen means it was cut. */
size_t ext_text_printf_safe(char *out, size_t outlen, const char *in);

/* The same text malloc'd (the caller frees it); NULL when out of memory. */
char *ext_text_printf_safe_dup(const char *in);

#endif
