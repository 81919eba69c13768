/* A truncated receive that Open MPI 5.0.11 serves by its single-copy protocol (btl/sm with CMA:
 * a message over the 4 KiB eager limit on one host) writes the whole message, past the end of
 * the receive buffer.  Rank 0 sends 32 KiB; rank 1 receives into the first 24000 bytes of a
 * 40000-byte area filled with 0xEE and counts the bytes changed past 24000 (MPICH: 0). */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    static char out[32768], area[40000];
    int rank, rc, cls, count = -1, past = 0;
    MPI_Status st;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (rank == 0) {
        memset(out, 0x11, sizeof(out));
        MPI_Send(out, (int)sizeof(out), MPI_BYTE, 1, 0, MPI_COMM_WORLD);
    } else if (rank == 1) {
        memset(area, 0xEE, sizeof(area));
        rc = MPI_Recv(area, 24000, MPI_BYTE, 0, 0, MPI_COMM_WORLD, &st);
        MPI_Error_class(rc, &cls);
        MPI_Get_count(&st, MPI_BYTE, &count);
        for (int i = 24000; i < (int)sizeof(area); i++)
            past += area[i] != (char)0xEE;
        printf("truncated receive: error class %d (MPI_ERR_TRUNCATE %d), count %d, %d bytes "
               "written past the buffer\n",
               cls, MPI_ERR_TRUNCATE, count, past);
    }
    MPI_Finalize();
    return 0;
}
