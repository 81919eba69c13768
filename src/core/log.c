/*
 * log.c - leveled log lines: "multilane[rank] LEVEL file:line: message".
 * The level comes from MLN_LOG (parsed once by mln_init; read directly before that).
 */
#include "mln_core.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const level_names[] = {"none", "error", "warn", "info", "debug", "trace"};

const char *mln_log_level_name(mln_log_level_t level)
{
    if ((int)level < 0 || (size_t)level >= sizeof(level_names) / sizeof(level_names[0]))
        return "?";
    return level_names[level];
}

mln_log_level_t mln_log_level(void)
{
    const mln_context_t *ctx = mln_context();
    const char *env;

    if (ctx != NULL)
        return (mln_log_level_t)ctx->cfg.log_level;
    env = getenv("MLN_LOG");
    if (env != NULL) {
        for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
            if (strcasecmp(env, level_names[i]) == 0)
                return (mln_log_level_t)i;
    }
    return MLN_LOG_WARN;
}

void mln_log_write(mln_log_level_t level, const char *file, int line, const char *fmt, ...)
{
    const mln_context_t *ctx = mln_context();
    FILE *fp = (ctx && ctx->log_fp) ? ctx->log_fp : stderr;
    const char *base = strrchr(file, '/');
    char msg[1024];
    char rank[32] = "";
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (ctx != NULL)
        snprintf(rank, sizeof(rank), "[%d]", ctx->world_rank);
    /* One fprintf per line so lines from threads do not interleave mid-line. */
    fprintf(fp, "multilane%s %s %s:%d: %s\n", rank, mln_log_level_name(level),
            base ? base + 1 : file, line, msg);
    fflush(fp);
}
