/*
 * mpi_init.c - library life cycle under MPI at any rank count: init before MPI is refused,
 * init/finalize/init again works, double init is refused, every rank agrees on the version,
 * and the log level from the environment is honoured.
 */
#include "mln_core.h"
#include "mln_test.h"

#include <string.h>

int main(int argc, char **argv)
{
    int rank, size, ok = 1, all_ok = 0;
    unsigned long ver, ver_min, ver_max;

    /* Before MPI_Init the library refuses to start. */
    MLN_TEST_ASSERT(setenv("MLN_LOG", "none", 1) == 0); /* silence the expected error */
    MLN_TEST_ASSERT(mln_init() == MLN_ERR_STATE);
    MLN_TEST_ASSERT(!mln_initialized());
    MLN_TEST_ASSERT(mln_finalize() == MLN_ERR_NOT_INIT);

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    MLN_TEST_ASSERT(setenv("MLN_LOG", "info", 1) == 0);
    for (int round = 0; round < 2; round++) {
        ok &= mln_init() == MLN_OK;
        ok &= mln_initialized();
        ok &= mln_context() != NULL && mln_context()->world_rank == rank;
        ok &= mln_context()->world_size == size;
        ok &= mln_log_level() == MLN_LOG_INFO;
        ok &= mln_init() == MLN_ERR_STATE; /* double init */
        ok &= mln_finalize() == MLN_OK;
        ok &= !mln_initialized();
    }

    /* An invalid tunable is refused with MLN_ERR_CONFIG and leaves the library down. */
    MLN_TEST_ASSERT(setenv("MLN_LOG", "loud", 1) == 0);
    ok &= mln_init() == MLN_ERR_CONFIG;
    ok &= !mln_initialized();

    /* Every rank links the same version. */
    ver = (unsigned long)MLN_VERSION_MAJOR * 10000 + MLN_VERSION_MINOR * 100 + MLN_VERSION_PATCH;
    MPI_Allreduce(&ver, &ver_min, 1, MPI_UNSIGNED_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&ver, &ver_max, 1, MPI_UNSIGNED_LONG, MPI_MAX, MPI_COMM_WORLD);
    ok &= ver_min == ver_max && strcmp(mln_version_string(), MLN_VERSION_STRING) == 0;

    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (rank == 0)
        printf("mpi_init: %d ranks: %s\n", size, all_ok ? "ok" : "FAILED");
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
