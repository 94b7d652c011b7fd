/* log.h -- the node agent's log: one line per event on stderr, "2025-01-02T03:04:05.678Z level=info <message>",
 * the same line format as tessera-extender's (extender/log.h), so one grep reads both; a copy of its few lines
 * because the agent does not link extender/. */
#ifndef AGENT_LOG_H
#define AGENT_LOG_H

typedef enum agent_log_level { AGENT_LOG_DEBUG = 0, AGENT_LOG_INFO, AGENT_LOG_WARN, AGENT_LOG_ERROR,
                               AGENT_LOG_OFF } agent_log_level;

/* "debug" | "info" | "warn" | "error" | "off"; -1 for anything else. */
int agent_log_parse_level(const char *s);
void agent_log_set_level(agent_log_level lvl);
/* Thread-safe (one write per line); newlines in the message become spaces. */
void agent_log(agent_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
