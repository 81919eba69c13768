/*
 * gateway_log.c - the log of mln-gateway: the two log functions of src/core/log.c that the
 * wire and the link layer call (through MLN_ERROR ... MLN_DEBUG), without the library's
 * context (no MPI here).  Lines "mln-gateway[SITE/TRUNK] LEVEL: message" on stderr, at the
 * level of --log (else MLN_LOG, else warn).
 */
#include "gateway_int.h"

#include "mln_core.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

static const char *const names[] = {"none", "error", "warn", "info", "debug", "trace"};

/* What the lines say (set once by main, before any line). */
static struct {
    char prefix[48];
    int level; /* -1: not set up: MLN_LOG */
} sink = {"mln-gateway", -1};

void mln_gw_log_setup(const char *site, int trunk, int level)
{
    snprintf(sink.prefix, sizeof(sink.prefix), "mln-gateway[%s/%d]", site, trunk);
    sink.level = level;
}

mln_log_level_t mln_log_level(void)
{
    const char *env = getenv("MLN_LOG");

    if (sink.level >= 0)
        return (mln_log_level_t)sink.level;
    for (size_t i = 0; env != NULL && i < sizeof(names) / sizeof(names[0]); i++)
        if (strcasecmp(env, names[i]) == 0)
            return (mln_log_level_t)i;
    return MLN_LOG_WARN;
}

const char *mln_log_level_name(mln_log_level_t level)
{
    return (size_t)level < sizeof(names) / sizeof(names[0]) ? names[level] : "?";
}

void mln_log_write(mln_log_level_t level, const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    (void)file;
    (void)line;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s %s: %s\n", sink.prefix, mln_log_level_name(level), msg);
    fflush(stderr);
}
