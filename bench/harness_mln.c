/*
 * harness_mln.c - the harness's runtime for the programs that link libmultilane
 * (mln_bench_harness; harness_int.h): MPI_Init, or MPI_Init_thread where the library's
 * progress thread calls MPI; mln_init; the benchmark communicator a duplicate of
 * mln_comm_world() (the application's ranks: helper ranks never return from mln_init), with
 * errors returned; MPI's own collectives.
 */
#include "harness_int.h"
#include "mln_core.h"

#include <stdlib.h>
#include <strings.h>

static int rt_mln_mpi_init(int *argc, char ***argv)
{
    /* The library's progress thread calls MPI: ask for MPI_THREAD_MULTIPLE only then, so
     * that stock runs keep MPI's cheapest (single-threaded) paths. */
    const char *progress = getenv("MLN_STRIPE_PROGRESS");
    int provided = 0;

    return progress && strcasecmp(progress, "thread") == 0
               ? MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided)
               : MPI_Init(argc, argv);
}

static mln_status_t rt_mln_init(mln_bench_t *b, int *inited)
{
    mln_config_t cfg;
    char err[512] = "";
    mln_status_t st;

    /* Checking the configuration first gives the exact message (the variable, the value). */
    st = mln_config_load(NULL, NULL, &cfg, err, sizeof(err));
    if (st != MLN_OK) {
        snprintf(b->errmsg, sizeof(b->errmsg), "%s", err);
    } else {
        st = mln_init();
        *inited = st == MLN_OK;
        if (st != MLN_OK)
            snprintf(b->errmsg, sizeof(b->errmsg), "mln_init failed: %s", mln_status_str(st));
    }
    if (st == MLN_OK && (MPI_Comm_dup(mln_comm_world(), &b->comm) != MPI_SUCCESS ||
                         MPI_Comm_set_errhandler(b->comm, MPI_ERRORS_RETURN) != MPI_SUCCESS ||
                         MPI_Comm_rank(b->comm, &b->rank) != MPI_SUCCESS ||
                         MPI_Comm_size(b->comm, &b->nranks) != MPI_SUCCESS)) {
        fprintf(stderr, "mln-%s: error: cannot set up the MPI communicator\n", b->desc->name);
        MPI_Abort(MPI_COMM_WORLD, MLN_BENCH_EXIT_USAGE);
    }
    return st;
}

static void rt_mln_fini(mln_bench_t *b, int inited)
{
    if (b->comm != MPI_COMM_NULL && b->comm != MPI_COMM_WORLD)
        MPI_Comm_free(&b->comm);
    if (inited)
        mln_finalize();
}

const mln_bench_rt_t mln_bench_rt = {
    .name = "multilane",
    .coll = &mln_bench_coll_mpi,
    .mpi_init = rt_mln_mpi_init,
    .init = rt_mln_init,
    .fini = rt_mln_fini,
};
