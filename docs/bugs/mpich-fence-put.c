/*
 * MPI_Win_fence does not complete small MPI_Puts at their target: after the fence that ends
 * the epoch, the target's window still holds the old value.
 *
 * A ring: every rank puts one double (its rank and the iteration) into each neighbour's
 * window (left slot, right slot), calls MPI_Win_fence(0), reads what its neighbours put, and
 * calls MPI_Win_fence(0) again before the next iteration's puts.  Per MPI-4.1 section 12.5.1
 * the fence completes every put to the local window of the epoch it ends, so both values must
 * be there.  Seen with MPICH 5.0.2 (ch4, OFI netmod, tcp provider) across hosts: a few stale
 * reads in 200 iterations on 8 ranks over 4 hosts; 160 doubles per put: none; one host: none.
 *
 *   mpicc mpich-fence-put.c -o fence-put
 *   MPIR_CVAR_CH4_NETMOD=ofi FI_PROVIDER=tcp mpiexec -n 8 -hosts h1:2,h2:2,h3:2,h4:2 ./fence-put
 *
 * Prints "FAIL: N stale reads ..." and exits 1 when it happens, else "ok: 0 stale reads ...".
 */
#include <mpi.h>
#include <stdio.h>

enum { ITERS = 200 };

int main(int argc, char **argv)
{
    int rank, size, left, right, stale = 0, all = 0;
    double *slot; /* [0]: from my left neighbour, [1]: from my right neighbour */
    MPI_Win win;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    left = (rank + size - 1) % size;
    right = (rank + 1) % size;
    MPI_Win_allocate(2 * sizeof(double), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &slot, &win);
    MPI_Win_fence(0, win);
    for (int it = 0; it < ITERS; it++) {
        double mine = rank * 1e6 + it;
        MPI_Put(&mine, 1, MPI_DOUBLE, right, 0, 1, MPI_DOUBLE, win);
        MPI_Put(&mine, 1, MPI_DOUBLE, left, sizeof(double), 1, MPI_DOUBLE, win);
        MPI_Win_fence(0, win); /* ends the epoch: both neighbours' puts are here */
        stale += slot[0] != left * 1e6 + it;
        stale += slot[1] != right * 1e6 + it;
        MPI_Win_fence(0, win); /* everyone has read: the next puts may come */
    }
    MPI_Win_free(&win);
    MPI_Reduce(&stale, &all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s: %d stale reads of %d on %d ranks\n", all ? "FAIL" : "ok", all, 2 * ITERS * size,
               size);
    MPI_Finalize();
    return all ? 1 : 0;
}
