/*
 * mln_core.h - internal core of libmultilane: the library context, logging and the check
 * macros used by every module.  Not installed; benchmarks and tests of this tree may use it.
 */
#ifndef MLN_CORE_H
#define MLN_CORE_H

#include "multilane.h"

#include <errno.h>
#include <mpi.h>
#include <string.h>

#ifdef MLN_PMPI_REDIRECT
/* The copy of the library inside libmultilane-preload.so calls the real MPI for every function
 * the layer defines, never the layer's own wrappers (src/preload/wrappers_gen.h). */
#include "wrappers_gen.h"
#endif

/* Everything the library knows after mln_init; passed by pointer to the modules. */
typedef struct mln_context {
    mln_config_t cfg; /* parsed tunables */
    int world_rank;
    int world_size;
    FILE *log_fp; /* where log lines go (stderr unless MLN_LOG_FILE) */
    int log_fp_owned;
    struct mln_stripe *stripe; /* striped point-to-point (src/p2p) */
} mln_context_t;

/* The context of the running library, or NULL before mln_init / after mln_finalize. */
mln_context_t *mln_context(void);

/*
 * A module of the library (src/p2p, src/bcast, ...), as init.c sees it: started in the order
 * of init.c's table at mln_init (init may be NULL: nothing to set up), stopped in the reverse
 * order at mln_finalize.  Each module defines its own descriptor; core names none of their
 * functions.
 */
typedef struct mln_module {
    const char *name;
    mln_status_t (*init)(mln_context_t *ctx);
    void (*fini)(mln_context_t *ctx);
} mln_module_t;

extern const mln_module_t mln_module_p2p;   /* src/p2p/stripe_api.c */
extern const mln_module_t mln_module_bcast; /* src/bcast/bcast.c */

/* ---- datatypes -------------------------------------------------------------------------- */

/* 1 when `count` elements of `dt` are count * size contiguous bytes, which then start
 * *offset bytes from the buffer (the type's true lower bound); 0 when they must be packed. */
static inline int mln_type_contiguous(MPI_Datatype dt, int64_t count, MPI_Count *offset)
{
    MPI_Count size = 0, lb = 0, extent = 0, tlb = 0, textent = 0;

    if (MPI_Type_size_x(dt, &size) != MPI_SUCCESS ||
        MPI_Type_get_extent_x(dt, &lb, &extent) != MPI_SUCCESS ||
        MPI_Type_get_true_extent_x(dt, &tlb, &textent) != MPI_SUCCESS)
        return 0;
    *offset = tlb;
    return count == 0 || size == 0 || (size == textent && (count == 1 || extent == size));
}

/* datatype.c: byte messages of any 64-bit length (a derived type above INT_MAX bytes).  The
 * two calls return MPI's error code, like the MPI calls they wrap. */
mln_status_t mln_mpi_bytes_type(uint64_t n, MPI_Datatype *out);
int mln_mpi_isend_bytes(const void *buf, uint64_t n, int dest, int tag, MPI_Comm comm,
                        MPI_Request *req);
int mln_mpi_irecv_bytes(void *buf, uint64_t n, int source, int tag, MPI_Comm comm,
                        MPI_Request *req);

/* ---- logging ---------------------------------------------------------------------------- */

/* Threshold used before mln_init (and by tools that never call it): MLN_LOG, else "warn". */
mln_log_level_t mln_log_level(void);
void mln_log_write(mln_log_level_t level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
const char *mln_log_level_name(mln_log_level_t level);

#define MLN_LOG_AT(lvl, ...)                                                                       \
    do {                                                                                           \
        if ((lvl) <= mln_log_level())                                                              \
            mln_log_write((lvl), __FILE__, __LINE__, __VA_ARGS__);                                 \
    } while (0)
#define MLN_ERROR(...) MLN_LOG_AT(MLN_LOG_ERROR, __VA_ARGS__)
#define MLN_WARN(...) MLN_LOG_AT(MLN_LOG_WARN, __VA_ARGS__)
#define MLN_INFO(...) MLN_LOG_AT(MLN_LOG_INFO, __VA_ARGS__)
#define MLN_DEBUG(...) MLN_LOG_AT(MLN_LOG_DEBUG, __VA_ARGS__)
#define MLN_TRACE(...) MLN_LOG_AT(MLN_LOG_TRACE, __VA_ARGS__)

/* ---- check macros: one per foreign API; log file:line, the call and the error string ---- */

/* On MPI failure: log, set `st` to MLN_ERR_MPI and jump to `label`. */
#define MLN_MPI_CHECK(call, st, label)                                                             \
    do {                                                                                           \
        int mln_mpi_rc_ = (call);                                                                  \
        if (mln_mpi_rc_ != MPI_SUCCESS) {                                                          \
            char mln_mpi_msg_[MPI_MAX_ERROR_STRING];                                               \
            int mln_mpi_len_ = 0;                                                                  \
            MPI_Error_string(mln_mpi_rc_, mln_mpi_msg_, &mln_mpi_len_);                            \
            mln_log_write(MLN_LOG_ERROR, __FILE__, __LINE__, "%s failed: %s", #call,               \
                          mln_mpi_msg_);                                                           \
            (st) = MLN_ERR_MPI;                                                                    \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

/* For calls that return -1 and set errno: log, set `st` to MLN_ERR_SYS, jump to `label`. */
#define MLN_SYS_CHECK(call, st, label)                                                             \
    do {                                                                                           \
        if ((call) == -1) {                                                                        \
            mln_log_write(MLN_LOG_ERROR, __FILE__, __LINE__, "%s failed: %s", #call,               \
                          strerror(errno));                                                        \
            (st) = MLN_ERR_SYS;                                                                    \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

/* Propagate a Multilane status (already logged where it was detected). */
#define MLN_CHECK(call, st, label)                                                                 \
    do {                                                                                           \
        (st) = (call);                                                                             \
        if ((st) != MLN_OK)                                                                        \
            goto label;                                                                            \
    } while (0)

#endif /* MLN_CORE_H */
