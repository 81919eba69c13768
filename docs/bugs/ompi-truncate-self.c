/* A message to self that is larger than the posted receive: Open MPI 5.0.11 completes the
 * receive with MPI_SUCCESS (MPICH: MPI_ERR_TRUNCATE).  One rank, 384 bytes into 64. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    char out[384], in[64];
    int rank, rc, cls, count = -1;
    MPI_Request rreq, sreq;
    MPI_Status st;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    memset(out, 7, sizeof(out));
    MPI_Irecv(in, (int)sizeof(in), MPI_BYTE, rank, 1, MPI_COMM_WORLD, &rreq);
    MPI_Isend(out, (int)sizeof(out), MPI_BYTE, rank, 1, MPI_COMM_WORLD, &sreq);
    rc = MPI_Wait(&rreq, &st);
    MPI_Error_class(rc, &cls);
    MPI_Get_count(&st, MPI_BYTE, &count);
    printf("receive of 384 bytes into 64 from self: error class %d (MPI_ERR_TRUNCATE %d), count "
           "%d\n",
           cls, MPI_ERR_TRUNCATE, count);
    MPI_Wait(&sreq, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}
