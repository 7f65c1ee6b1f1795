#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

static const char *const level_names[] = {"off", "error", "warn", "info", "debug", "trace"};

void ub__log_init(struct ub__log *log)
{
    log->level = UB_LOG_WARN;
    log->sink = 0;
    log->arg = 0;
    log->prefix = 0;
}

int ub__log_parse_level(const char *s)
{
    if (!s || !*s)
        return -1;
    if (s[0] >= '0' && s[0] <= '5' && s[1] == '\0')
        return s[0] - '0';
    for (int i = 0; i < (int)UB_ARRAY_SIZE(level_names); i++)
        if (strcmp(s, level_names[i]) == 0)
            return i;
    return -1;
}

const char *ub__log_level_name(enum ub__log_level level)
{
    return (unsigned)level < UB_ARRAY_SIZE(level_names) ? level_names[level] : "?";
}

enum ub__log_level ub__log_from_env(struct ub__log *log)
{
    int lvl = ub__log_parse_level(getenv("SOFTUB_LOG"));
    if (lvl >= 0)
        log->level = (enum ub__log_level)lvl;
    return log->level;
}

void ub__log_write(const struct ub__log *log, enum ub__log_level level, const char *fmt, ...)
{
    char msg[512];
    int off = 0;
    if (log->prefix)
        off = snprintf(msg, sizeof(msg), "%s: ", log->prefix);
    if (off < 0 || (size_t)off >= sizeof(msg))
        off = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + off, sizeof(msg) - (size_t)off, fmt, ap);
    va_end(ap);
    if (log->sink)
        log->sink(log->arg, level, msg);
    else
        fprintf(stderr, "softub %s: %s\n", ub__log_level_name(level), msg);
}
