/*
 * coll.h - the few collectives the harness itself needs (agreement on errors, the max of the
 * ranks' times, the sum of wrong bytes, the host names, the exit code), as an ops table with
 * two implementations chosen when a program is linked (harness.h, "Runtimes"):
 *
 *   mln_bench_coll_mpi  MPI_Allreduce, MPI_Bcast, MPI_Gather (coll_mpi.c): every program that
 *                       links libmultilane (mln_bench_harness)
 *   mln_bench_coll_p2p  the same results from MPI_Send and MPI_Recv only, linear through the
 *                       root (coll_p2p.c): mln-relay (mln_bench_plain), whose MPI_COMM_WORLD
 *                       may span sites under `multilane grid run`, where the interposition
 *                       layer carries point-to-point across sites but refuses collectives
 *
 * Each call has the arguments and the return value (an MPI error code) of the MPI call it
 * stands for, so MLN_MPI_CHECK checks it.  The p2p table supports what the harness uses:
 * allreduce of MPI_INT, MPI_DOUBLE, MPI_UINT64_T with MPI_MAX, MPI_MIN, MPI_SUM; bcast and
 * gather of those and of MPI_CHAR / MPI_BYTE; no MPI_IN_PLACE.  Its messages use the tags from
 * MLN_BENCH_COLL_TAG up, which a benchmark on the same communicator must leave alone.
 */
#ifndef MLN_BENCH_COLL_H
#define MLN_BENCH_COLL_H

#include <mpi.h>

/* Tags MLN_BENCH_COLL_TAG .. MLN_BENCH_COLL_TAG + 3 carry coll_p2p's messages (MPI_TAG_UB is
 * at least 32767 in every MPI). */
#define MLN_BENCH_COLL_TAG 32760

typedef struct mln_bench_coll {
    const char *name; /* "mpi", "p2p": the provenance's params.collectives */
    int (*allreduce)(const void *in, void *out, int count, MPI_Datatype type, MPI_Op op,
                     MPI_Comm comm);
    int (*bcast)(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm);
    int (*gather)(const void *in, int count, MPI_Datatype type, void *out, int root, MPI_Comm comm);
} mln_bench_coll_t;

extern const mln_bench_coll_t mln_bench_coll_mpi; /* coll_mpi.c */
extern const mln_bench_coll_t mln_bench_coll_p2p; /* coll_p2p.c */

#endif /* MLN_BENCH_COLL_H */
