/* log.h -- the extender's logging: one line per event on stderr, with a time and a level,
 * so an operator can grep a run ("level=warn") without a log library.
 */
#ifndef EXT_LOG_H
#define EXT_LOG_H

typedef enum ext_log_level { EXT_LOG_DEBUG = 0, EXT_LOG_INFO, EXT_LOG_WARN, EXT_LOG_ERROR, EXT_LOG_OFF } ext_log_level;

/* Lines below the level are dropped (default INFO). */
void ext_log_set_level(ext_log_level lvl);
ext_log_level ext_log_get_level(void);

/* "debug" | "info" | "warn" | "error" | "off"; -1 for anything else. */
int ext_log_parse_level(const char *s);

/* One line: "2025-01-02T03:04:05.678Z level=info <message>". Newlines in the message are
 * replaced so that one event never spans two lines. Thread-safe. */
void ext_log(ext_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Send every line that passes the level to fn (without its newline) instead of stderr; NULL
 * restores stderr. For tests that check what an operator would read. Calls are serialised. */
typedef void (*ext_log_hook)(void *user, ext_log_level lvl, const char *line);
void ext_log_set_hook(ext_log_hook fn, void *user);

#endif
