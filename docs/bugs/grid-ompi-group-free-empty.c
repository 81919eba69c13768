/* Under `multilane grid run` with Open MPI 5.0.11 (MPICH: right): a group operation across the
 * sites with an empty result gives MPI_GROUP_EMPTY, as without the layer, and MPI_Group_free of
 * it aborts the rank ("free(): invalid pointer", SIGABRT).  mpi4py's test_group.TestGroupWorld
 * testDifference, testIntersection, testIncl, testRangeIncl, testRangeExcl. */
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    MPI_Group world, empty;
    int rank, size, cmp;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_difference(world, world, &empty);
    MPI_Group_size(empty, &size);
    MPI_Group_compare(empty, MPI_GROUP_EMPTY, &cmp);
    printf("rank %d: difference: size %d, %s MPI_GROUP_EMPTY\n", rank, size,
           empty == MPI_GROUP_EMPTY ? "is" : "is not");
    fflush(stdout);
    MPI_Group_free(&empty);
    printf("rank %d: freed the empty group\n", rank);
    fflush(stdout);
    MPI_Group_free(&world);
    printf("rank %d: freed the world's group\n", rank);
    MPI_Finalize();
    return 0;
}
