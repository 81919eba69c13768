/* Under `multilane grid run` (both MPIs): nonblocking collectives whose count and displacement
 * arrays are overwritten and freed as soon as the call returns, before MPI_Wait -- what mpi4py
 * 4.1.1's Comm.Ireduce_scatter and Comm.Iallgatherv do (their message object, which owns the
 * arrays, is not kept with the request as the other nonblocking collectives' is).  MPI 4.1
 * (6.12) says such arrays must not be modified until the operation completes; Open MPI and
 * MPICH copy them when it starts and get it right, the layer reads them as the collective
 * progresses: wrong results, MPI_ERR_OTHER, a segmentation fault or a hang.  mpi4py's
 * test_cco_nb_buf.*.testReduceScatter and test_cco_nb_vec.*.testAllgatherv{,2,3}.
 * Each rank prints what it got and OK or WRONG. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int *counts(int size)
{
    int *c = malloc(size * sizeof(int));
    for (int i = 0; i < size; i++)
        c[i] = i + 1;
    return c;
}

static void trash(int *p, int n)
{
    memset(p, 0x7f, n * sizeof(int));
    free(p);
}

int main(int argc, char **argv)
{
    int rank, size, total, ok = 1;
    MPI_Request req;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    total = size * (size + 1) / 2;
    int *sbuf = malloc(total * sizeof(int)), *rbuf = malloc(total * sizeof(int));

    /* Ireduce_scatter: sum of the ranks in every element */
    for (int i = 0; i < total; i++)
        sbuf[i] = rank;
    int *rc = counts(size);
    MPI_Ireduce_scatter(sbuf, rbuf, rc, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
    trash(rc, size);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    for (int i = 0; i < rank + 1; i++)
        ok &= rbuf[i] == size * (size - 1) / 2;
    printf("rank %d: Ireduce_scatter rbuf[0] = %d: %s\n", rank, rbuf[0], ok ? "OK" : "WRONG");
    fflush(stdout);

    /* Iallgatherv: rank r gives r+1 copies of r, at displacement r(r+1)/2 */
    int *ac = counts(size), *ad = malloc(size * sizeof(int));
    for (int i = 0, d = 0; i < size; d += ac[i], i++)
        ad[i] = d;
    for (int i = 0; i < rank + 1; i++)
        sbuf[i] = rank;
    MPI_Iallgatherv(sbuf, rank + 1, MPI_INT, rbuf, ac, ad, MPI_INT, MPI_COMM_WORLD, &req);
    trash(ac, size);
    trash(ad, size);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    ok = 1;
    for (int r = 0, k = 0; r < size; r++)
        for (int j = 0; j <= r; j++, k++)
            ok &= rbuf[k] == r;
    printf("rank %d: Iallgatherv: %s\n", rank, ok ? "OK" : "WRONG");
    MPI_Finalize();
    return 0;
}
