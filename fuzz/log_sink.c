/*
 * log_sink.c - the two log functions of src/core/log.c that link.c calls (through MLN_ERROR
 * and MLN_DEBUG), for the link fuzz targets: log.c asks the library context (init.c, MPI)
 * for the level and the rank; here the level is MLN_LOG (default error) and lines go to
 * stderr in the same format, without a rank.
 */
#include "mln_core.h"

#include <stdarg.h>
#include <stdlib.h>
#include <strings.h>

static const char *const names[] = {"none", "error", "warn", "info", "debug", "trace"};

mln_log_level_t mln_log_level(void)
{
    const char *env = getenv("MLN_LOG");

    for (size_t i = 0; env != NULL && i < sizeof(names) / sizeof(names[0]); i++)
        if (strcasecmp(env, names[i]) == 0)
            return (mln_log_level_t)i;
    return MLN_LOG_ERROR;
}

void mln_log_write(mln_log_level_t level, const char *file, int line, const char *fmt, ...)
{
    const char *base = strrchr(file, '/');
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "multilane %s %s:%d: %s\n",
            (size_t)level < sizeof(names) / sizeof(names[0]) ? names[level] : "?",
            base ? base + 1 : file, line, msg);
}
