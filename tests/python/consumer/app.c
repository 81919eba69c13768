/* A downstream program: initialises MPI and Multilane, prints the version and the status. */
#include <multilane.h>
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    mln_status_t st;

    MPI_Init(&argc, &argv);
    st = mln_init();
    printf("multilane %s init: %s\n", mln_version_string(), mln_status_str(st));
    if (st == MLN_OK)
        mln_finalize();
    MPI_Finalize();
    return st == MLN_OK ? 0 : 1;
}
