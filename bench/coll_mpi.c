/*
 * coll_mpi.c - the harness's collectives as MPI's own (coll.h): for the programs that link
 * libmultilane, whose communicator is an ordinary one.
 */
#include "coll.h"

static int coll_mpi_allreduce(const void *in, void *out, int count, MPI_Datatype type, MPI_Op op,
                              MPI_Comm comm)
{
    return MPI_Allreduce(in, out, count, type, op, comm);
}

static int coll_mpi_bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    return MPI_Bcast(buf, count, type, root, comm);
}

static int coll_mpi_gather(const void *in, int count, MPI_Datatype type, void *out, int root,
                           MPI_Comm comm)
{
    return MPI_Gather(in, count, type, out, count, type, root, comm);
}

const mln_bench_coll_t mln_bench_coll_mpi = {
    .name = "mpi",
    .allreduce = coll_mpi_allreduce,
    .bcast = coll_mpi_bcast,
    .gather = coll_mpi_gather,
};
