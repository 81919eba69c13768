/*
 * config.c - the library's own tunables table.  One row per tunable; later components add
 * their rows here (and the matching field to mln_config_t in multilane.h).
 */
#include "mln_core.h"

#include <stddef.h>

static const char *const log_levels[] = {"none", "error", "warn", "info", "debug", "trace", NULL};

static const mln_tunable_t mln_config_table[] = {
    {.env = "MLN_LOG",
     .type = MLN_TUNABLE_ENUM,
     .default_value = "warn",
     .help = "log level",
     .offset = offsetof(mln_config_t, log_level),
     .choices = log_levels},
    {.env = "MLN_LOG_FILE",
     .type = MLN_TUNABLE_STRING,
     .default_value = "",
     .help = "log file instead of stderr; %r becomes the MPI rank",
     .offset = offsetof(mln_config_t, log_file)},
};

const mln_tunable_t *mln_tunables(size_t *count)
{
    if (count)
        *count = sizeof(mln_config_table) / sizeof(mln_config_table[0]);
    return mln_config_table;
}

mln_status_t mln_config_load(mln_getenv_fn get, void *arg, mln_config_t *cfg, char *err,
                             size_t errlen)
{
    size_t n;
    const mln_tunable_t *table = mln_tunables(&n);

    if (cfg == NULL)
        return MLN_ERR_ARG;
    return mln_tunables_parse(table, n, get, arg, cfg, sizeof(*cfg), err, errlen);
}
