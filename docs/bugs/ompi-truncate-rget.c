/* A truncated receive: rank 0 sends 1,000,000 bytes, rank 1 receives them with a count of 4096
 * (MPI_ERRORS_RETURN: MPI_ERR_TRUNCATE is expected, and the buffer must hold the first 4096
 * bytes and nothing more).  Behind the receive buffer lie guard bytes that MPI must not touch.
 * Open MPI 5.0.11 (ob1, btl/sm with smsc/cma): the guard is overwritten (the single-copy RGET
 * protocol copies the message past the count; ASan: heap-buffer-overflow in
 * mca_smsc_cma_copy_from).  MPICH 5.0.2: the guard is intact.
 *   mpicc ompi-truncate-rget.c -o trunc && mpirun -n 2 ./trunc */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MSG = 1000000, COUNT = 4096, GUARD = 65536 };

int main(int argc, char **argv)
{
    int rank, rc, len, touched = 0;
    char msg[MPI_MAX_ERROR_STRING];
    unsigned char *buf = malloc(MSG + GUARD);

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (rank == 0) {
        MPI_Request req;
        memset(buf, 0x11, MSG);
        MPI_Isend(buf, MSG, MPI_BYTE, 1, 7, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        MPI_Request req;
        memset(buf, 0xee, MSG + GUARD);
        MPI_Irecv(buf, COUNT, MPI_BYTE, 0, 7, MPI_COMM_WORLD, &req);
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        MPI_Error_string(rc, msg, &len);
        for (int i = COUNT; i < MSG + GUARD; i++)
            touched += buf[i] != 0xee;
        printf("%d bytes into a receive of %d: %s; bytes written past the count: %d (%s)\n", MSG,
               COUNT, msg, touched, touched ? "BUG" : "correct");
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
