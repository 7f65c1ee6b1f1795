/*
 * Levelled logging. A ub__log belongs to its owner (a context, a tool, a
 * test); there is no global logger. The level comes from the SOFTUB_LOG
 * environment variable ("error", "warn", "info", "debug", "trace" or 0-5)
 * when the owner asks for it; the sink defaults to stderr.
 */
#ifndef UB_CORE_LOG_H
#define UB_CORE_LOG_H

#include "core/compiler.h"

enum ub__log_level {
    UB_LOG_OFF = 0,
    UB_LOG_ERROR = 1,
    UB_LOG_WARN = 2,
    UB_LOG_INFO = 3,
    UB_LOG_DEBUG = 4,
    UB_LOG_TRACE = 5,
};

typedef void ub__log_sink(void *arg, enum ub__log_level level, const char *msg);

struct ub__log {
    enum ub__log_level level;
    ub__log_sink *sink; /* NULL: stderr */
    void *arg;
    const char *prefix; /* prepended to every line, e.g. an endpoint's name; may be NULL */
};

/* Level WARN, stderr, no prefix. */
void ub__log_init(struct ub__log *log);

/* Applies SOFTUB_LOG if it is set and valid; returns the level now in force. */
enum ub__log_level ub__log_from_env(struct ub__log *log);

/* "warn" -> UB_LOG_WARN, "4" -> UB_LOG_DEBUG; -1 for anything else. */
int ub__log_parse_level(const char *s);
const char *ub__log_level_name(enum ub__log_level level);

void ub__log_write(const struct ub__log *log, enum ub__log_level level, const char *fmt, ...)
    UB_PRINTF(3, 4);

static inline int ub__log_enabled(const struct ub__log *log, enum ub__log_level level)
{
    return log && level <= log->level;
}

/* Formats nothing unless the level is enabled; log may be NULL. */
#define UB_LOG(log, lvl, ...)                         \
    do {                                              \
        if (ub__log_enabled((log), (lvl)))            \
            ub__log_write((log), (lvl), __VA_ARGS__); \
    } while (0)

#endif
