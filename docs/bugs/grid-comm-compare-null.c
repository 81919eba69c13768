/* Under `multilane grid run` (both MPIs): MPI_Comm_compare of a communicator that spans the
 * sites with MPI_COMM_NULL returns MPI_SUCCESS and MPI_UNEQUAL instead of failing with
 * MPI_ERR_COMM (as both MPIs do without the layer, and as the layer does for NULL, NULL).
 * mpi4py's test_exceptions.TestExcCommNull.testCompare. */
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    int rank, result = -1, rc;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    rc = MPI_Comm_compare(MPI_COMM_NULL, MPI_COMM_NULL, &result);
    printf("rank %d: MPI_Comm_compare(NULL, NULL): rc %d%s, result %d\n", rank, rc,
           rc != MPI_SUCCESS ? " (an error: right)" : " (MPI_SUCCESS: wrong)", result);
    rc = MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_NULL, &result);
    printf("rank %d: MPI_Comm_compare(WORLD, NULL): rc %d%s, result %d\n", rank, rc,
           rc != MPI_SUCCESS ? " (an error: right)" : " (MPI_SUCCESS: wrong)", result);
    MPI_Finalize();
    return 0;
}
