/*
 * mpi_nodes.c - MPI sees distinct nodes: the groups of MPI_Comm_split_type(SHARED) match the
 * distinct processor names, one group per host.  Prints "mpi_nodes: N ranks, H hosts,
 * G shared-memory groups" and exits 1 if H != G or a group spans two host names.  On the
 * test bed (one namespace and hostname per host) it proves the emulated hosts are seen as
 * separate nodes.
 */
#include "mln_test.h"

#include <mpi.h>
#include <string.h>

int main(int argc, char **argv)
{
    char name[MPI_MAX_PROCESSOR_NAME] = "";
    char *names;
    int rank, size, len, local_rank, is_leader, groups = 0, hosts = 0, ok = 1, all_ok = 0;
    int mixed = 0, any_mixed = 0;
    MPI_Comm node;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(name, &len);

    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local_rank);
    is_leader = local_rank == 0;
    MPI_Allreduce(&is_leader, &groups, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);

    /* Every member of a shared-memory group must carry the group leader's host name. */
    {
        char leader[MPI_MAX_PROCESSOR_NAME];
        memcpy(leader, name, sizeof(leader));
        MPI_Bcast(leader, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, node);
        mixed = strcmp(leader, name) != 0;
        MPI_Allreduce(&mixed, &any_mixed, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    }

    /* Distinct host names, counted on rank 0. */
    names = calloc((size_t)size, MPI_MAX_PROCESSOR_NAME);
    MLN_TEST_ASSERT(names != NULL);
    MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0,
               MPI_COMM_WORLD);
    if (rank == 0) {
        for (int i = 0; i < size; i++) {
            int seen = 0;
            for (int j = 0; j < i && !seen; j++)
                seen = strcmp(names + (size_t)i * MPI_MAX_PROCESSOR_NAME,
                              names + (size_t)j * MPI_MAX_PROCESSOR_NAME) == 0;
            hosts += !seen;
        }
        ok = hosts == groups && !any_mixed;
        printf("mpi_nodes: %d ranks, %d hosts, %d shared-memory groups%s\n", size, hosts, groups,
               ok ? "" : " (MISMATCH)");
    }
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    free(names);
    MPI_Comm_free(&node);
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
