/*
 * preload_coll.c - MPI_Bcast of an unmodified program through mln_bcast (docs/PRELOAD.md).
 *
 * On a communicator that spans sites, a broadcast of at least MLN_BCAST_THRESHOLD bytes is
 * mln_bcast (the multi-endpoint broadcast, seed 001: several leaders per node at once); a
 * smaller one is MPI's, as its nonblocking form waited for while the engine moves striped
 * messages (every rank makes the same choice: the size and the communicator decide).  On a
 * communicator inside one site, and for intercommunicators, MPI_Bcast itself.
 *
 * Cost (sme, L leaders per node, n bytes, N nodes): lg N alpha + n/L beta between nodes, then
 * one shared-memory copy per process (docs/BCAST.md).
 */
#include "mln_core.h"
#include "preload_grid.h"

#include <limits.h>

int mln_pl_Bcast(void *buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    const mln_context_t *ctx = mln_context();
    mln_bcast_algo_t algo;
    mln_status_t st;
    MPI_Count bytes;
    MPI_Comm cc = mln_pl.on && !MLN_PL_GRID(comm) ? mln_pl_coll_comm(comm) : MPI_COMM_NULL;
    int leaders = 0, rc;

    if (MLN_PL_GRID(comm)) /* across sites: hierarchical (preload_gcoll.c) */
        return mln_pl_grid_bcast(buffer, count, datatype, root, comm, NULL);
    if (cc == MPI_COMM_NULL) {
#if MLN_PL_BIGCOUNT
        if (count > INT_MAX)
            return mln_pmpi.Bcast_c(buffer, count, datatype, root, comm);
#endif
        return mln_pmpi.Bcast(buffer, (int)count, datatype, root, comm);
    }
    bytes = mln_pl_bytes(count, datatype);
    MLN_PL_LOCK();
    if (ctx == NULL || (uint64_t)bytes < ctx->cfg.bcast_threshold || count > INT_MAX) {
        MPI_Request req;
        rc = mln_pmpi.Ibcast(buffer, (int)count, datatype, root, cc, &req);
        MLN_PL_UNLOCK();
        return mln_pl_coll_wait(comm, rc, &req);
    }
    st = mln_bcast(buffer, count, datatype, root, comm);
    algo = mln_bcast_last_algo(&leaders);
    if (st == MLN_OK && algo != MLN_BCAST_MPI) {
        mln_pl.bcast_calls++;
        mln_pl.bcast_bytes += (uint64_t)bytes;
    }
    MLN_PL_UNLOCK();
    return mln_pl_error(comm, st);
}
