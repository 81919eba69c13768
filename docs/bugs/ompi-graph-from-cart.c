/* A distributed graph made from a Cartesian communicator (1-D, no wrap, 2 ranks): each rank
 * has one neighbour, so the graph has one edge each way; MPI_Neighbor_alltoallw on the graph. */
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    int rank, size, dims[1] = {0}, periods[1] = {0}, indeg, outdeg, weighted, rc, len;
    double sbuf[4] = {1, 2, 3, 4}, rbuf[4] = {0};
    int counts[1] = {4};
    MPI_Aint sd[1], rd[1];
    MPI_Datatype types[1] = {MPI_DOUBLE};
    MPI_Comm cart, graph;
    char msg[MPI_MAX_ERROR_STRING];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Dims_create(size, 1, dims);
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart);
    int other = 1 - rank;
    MPI_Dist_graph_create_adjacent(cart, 1, &other, MPI_UNWEIGHTED, 1, &other, MPI_UNWEIGHTED,
                                   MPI_INFO_NULL, 0, &graph);
    MPI_Comm_set_errhandler(graph, MPI_ERRORS_RETURN);
    MPI_Dist_graph_neighbors_count(graph, &indeg, &outdeg, &weighted);
    MPI_Get_address(sbuf, &sd[0]);
    MPI_Get_address(rbuf, &rd[0]);
    rc =
        MPI_Neighbor_alltoallw(MPI_BOTTOM, counts, sd, types, MPI_BOTTOM, counts, rd, types, graph);
    MPI_Error_string(rc, msg, &len);
    printf("rank %d: degrees %d/%d, alltoallw: %s, rbuf[0] %g\n", rank, indeg, outdeg,
           rc == MPI_SUCCESS ? "ok" : msg, rbuf[0]);
    MPI_Finalize();
    return 0;
}
