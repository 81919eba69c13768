/*
 * init.c - library life cycle.
 *
 * The library context is the one process-wide object (like MPI's own state): the public
 * MPI-style calls take no context argument, so mln_init creates it and every module receives
 * it by pointer from mln_context().  Nothing else in the library is mutable global state.
 */
#include "mln_core.h"

#include <stdlib.h>
#include <string.h>

static mln_context_t *mln_the_context;

/* Started in this order, stopped in the reverse one: the broadcast's set-up on
 * mln_comm_world() goes before the striping engine frees that communicator. */
static const mln_module_t *const modules[] = {&mln_module_p2p, &mln_module_bcast};
#define MLN_NMODULES (sizeof(modules) / sizeof(modules[0]))

mln_context_t *mln_context(void)
{
    return mln_the_context;
}

int mln_initialized(void)
{
    return mln_the_context != NULL;
}

/* Expands "%r" in `pattern` to the rank. */
static void expand_log_path(const char *pattern, int rank, char *out, size_t len)
{
    size_t used = 0;

    for (const char *p = pattern; *p && used + 1 < len; p++) {
        if (p[0] == '%' && p[1] == 'r') {
            used += (size_t)snprintf(out + used, len - used, "%d", rank);
            p++;
        } else {
            out[used++] = *p;
        }
    }
    out[used < len ? used : len - 1] = '\0';
}

mln_status_t mln_init(void)
{
    mln_status_t st = MLN_OK;
    mln_context_t *ctx;
    char err[512] = "";
    char path[512];
    int mpi_up = 0;

    if (mln_the_context != NULL) {
        MLN_ERROR("mln_init called twice (call mln_finalize first)");
        return MLN_ERR_STATE;
    }
    MPI_Initialized(&mpi_up);
    if (!mpi_up) {
        MLN_ERROR("mln_init needs MPI: call MPI_Init or MPI_Init_thread first");
        return MLN_ERR_STATE;
    }
    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL)
        return MLN_ERR_NOMEM;

    st = mln_config_load(NULL, NULL, &ctx->cfg, err, sizeof(err));
    if (st != MLN_OK) {
        /* Always shown, whatever MLN_LOG says (it may be the invalid one). */
        mln_log_write(MLN_LOG_ERROR, __FILE__, __LINE__, "%s", err);
        goto err_free;
    }
    MLN_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &ctx->world_rank), st, err_free);
    MLN_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &ctx->world_size), st, err_free);

    ctx->log_fp = stderr;
    if (ctx->cfg.log_file[0] != '\0') {
        expand_log_path(ctx->cfg.log_file, ctx->world_rank, path, sizeof(path));
        ctx->log_fp = fopen(path, "a");
        if (ctx->log_fp == NULL) {
            MLN_ERROR("MLN_LOG_FILE: cannot open '%s': %s", path, strerror(errno));
            st = MLN_ERR_CONFIG;
            goto err_free;
        }
        ctx->log_fp_owned = 1;
    }
    mln_the_context = ctx;
    for (size_t m = 0; m < MLN_NMODULES; m++) {
        if (modules[m]->init == NULL)
            continue;
        st = modules[m]->init(ctx);
        if (st == MLN_OK)
            continue;
        MLN_DEBUG("module %s failed to start: %s", modules[m]->name, mln_status_str(st));
        while (m-- > 0) /* those already started stop again */
            if (modules[m]->fini)
                modules[m]->fini(ctx);
        goto err_ctx;
    }
    MLN_DEBUG("multilane %s initialised: rank %d of %d, log level %s", mln_version_string(),
              ctx->world_rank, ctx->world_size,
              mln_log_level_name((mln_log_level_t)ctx->cfg.log_level));
    return MLN_OK;

err_ctx:
    mln_the_context = NULL;
    if (ctx->log_fp_owned)
        fclose(ctx->log_fp);
err_free:
    free(ctx);
    return st;
}

mln_status_t mln_finalize(void)
{
    mln_context_t *ctx = mln_the_context;

    if (ctx == NULL)
        return MLN_ERR_NOT_INIT;
    MLN_DEBUG("multilane finalising");
    for (size_t m = MLN_NMODULES; m-- > 0;)
        if (modules[m]->fini)
            modules[m]->fini(ctx);
    mln_the_context = NULL;
    if (ctx->log_fp_owned)
        fclose(ctx->log_fp);
    free(ctx);
    return MLN_OK;
}
