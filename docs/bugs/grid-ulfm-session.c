/* Under `multilane grid run`: the fault-tolerance extension of Open MPI (ULFM: MPIX_Comm_shrink,
 * MPIX_Comm_agree) and MPI Sessions on the grid's world.  Neither is in the layer's grid mode
 * nor refused there (the refusals are generated from the MPI standard's functions that take a
 * communicator; MPIX_ names and sessions are not among them), so each gets the site's own
 * answer: mpi4py's test_ulfm.TestULFMWorld (testShrink, testAgree, testIAgree, testRevoke,
 * testAckFailed) and test_session.TestSession.testSessionWORLD.  Each rank prints what it saw;
 * the right answers are the world's size and, agreed, 0. */
#include <mpi.h>
#include <stdio.h>
#if defined(OPEN_MPI)
#include <mpi-ext.h>
#endif

int main(int argc, char **argv)
{
    int rank, size, len = 31, found = 0;
    MPI_Session session;
    MPI_Info info;
    char value[32] = "?";

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
#if defined(OMPI_HAVE_MPI_EXT_FTMPI) && OMPI_HAVE_MPI_EXT_FTMPI
    MPI_Comm shrunk;
    int shrunk_size = -1, flag = 1 << rank; /* agreed: the AND of every rank's flag */
    MPIX_Comm_shrink(MPI_COMM_WORLD, &shrunk);
    MPI_Comm_size(shrunk, &shrunk_size);
    MPIX_Comm_agree(MPI_COMM_WORLD, &flag);
    printf("rank %d: world size %d; MPIX_Comm_shrink: size %d; MPIX_Comm_agree: %d\n", rank, size,
           shrunk_size, flag);
    MPI_Comm_free(&shrunk);
#endif
    MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &session);
    MPI_Session_get_pset_info(session, "mpi://WORLD", &info);
    MPI_Info_get_string(info, "mpi_size", &len, value, &found);
    printf("rank %d: world size %d; session mpi://WORLD: mpi_size %s\n", rank, size, value);
    MPI_Info_free(&info);
    MPI_Session_finalize(&session);
    MPI_Finalize();
    return 0;
}
