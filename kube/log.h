/* log.h -- the log of every tessera program (tessera-extender, tessera-node-agent, tessera-reserve): one line per
 * event on stderr, with a time and a level, so an operator can grep a run ("level=warn") without a log library,
 * and one grep reads all three.
 */
#ifndef KUBE_LOG_H
#define KUBE_LOG_H

typedef enum kube_log_level { KUBE_LOG_DEBUG = 0, KUBE_LOG_INFO, KUBE_LOG_WARN, KUBE_LOG_ERROR, KUBE_LOG_OFF } kube_log_level;

/* Lines below the level are dropped (default INFO). */
void kube_log_set_level(kube_log_level lvl);
kube_log_level kube_log_get_level(void);

/* "debug" | "info" | "warn" | "error" | "off"; -1 for anything else. */
int kube_log_parse_level(const char *s);

/* One line: "2025-01-02T03:04:05.678Z level=info <message>". Newlines in the message are
 * replaced so that one event never spans two lines. Thread-safe. */
void kube_log(kube_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Send every line that passes the level to fn (without its newline) instead of stderr; NULL
 * restores stderr. For tests that check what an operator would read. Calls are serialised. */
typedef void (*kube_log_hook)(void *user, kube_log_level lvl, const char *line);
void kube_log_set_hook(kube_log_hook fn, void *user);

#endif
