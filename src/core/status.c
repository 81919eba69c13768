/* status.c - status codes to text. */
#include "multilane.h"

static const char *const status_text[MLN_STATUS_COUNT] = {
    [MLN_OK] = "success",
    [MLN_ERR_ARG] = "invalid argument",
    [MLN_ERR_NOMEM] = "out of memory",
    [MLN_ERR_CONFIG] = "invalid configuration value",
    [MLN_ERR_NOT_INIT] = "library not initialised",
    [MLN_ERR_STATE] = "operation not allowed in this state",
    [MLN_ERR_MPI] = "MPI call failed",
    [MLN_ERR_SYS] = "system call failed",
    [MLN_ERR_UNSUPPORTED] = "not supported",
    [MLN_ERR_TRUNCATE] = "message truncated",
    [MLN_ERR_PEER] = "peer or lane failed",
    [MLN_ERR_TIMEOUT] = "timed out",
    [MLN_ERR_DATA] = "data validation failed",
    [MLN_ERR_INTERNAL] = "internal error",
};

const char *mln_status_str(mln_status_t status)
{
    if ((int)status < 0 || status >= MLN_STATUS_COUNT || status_text[status] == NULL)
        return "unknown status";
    return status_text[status];
}
