/*
 * datatype.c - byte messages of any 64-bit length through MPI's int counts.
 *
 * MPI_Isend/MPI_Irecv count in int.  A message of more than INT_MAX bytes travels as one
 * element of a derived type of that many bytes (blocks of 1 GiB plus the rest), so that its
 * type signature is still n x MPI_BYTE: a receive of any byte type of at least n bytes matches
 * it, and MPI_Get_elements_x(status, MPI_BYTE) gives n.  Never a cast of the size to int.
 */
#include "mln_core.h"

#include <limits.h>

#define BYTES_BLOCK ((MPI_Count)1 << 30)

mln_status_t mln_mpi_bytes_type(uint64_t n, MPI_Datatype *out)
{
    mln_status_t st = MLN_OK;
    MPI_Datatype block = MPI_DATATYPE_NULL, blocks = MPI_DATATYPE_NULL, type;
    const uint64_t nblocks = n / (uint64_t)BYTES_BLOCK, rest = n % (uint64_t)BYTES_BLOCK;

    if (nblocks > INT_MAX) {
        MLN_ERROR("a message of %llu bytes is larger than MPI can describe here",
                  (unsigned long long)n);
        return MLN_ERR_UNSUPPORTED;
    }
    MLN_MPI_CHECK(MPI_Type_contiguous((int)BYTES_BLOCK, MPI_BYTE, &block), st, out);
    MLN_MPI_CHECK(MPI_Type_contiguous((int)nblocks, block, &blocks), st, out);
    {
        const int lens[2] = {1, (int)rest};
        const MPI_Aint displs[2] = {0, (MPI_Aint)(nblocks * (uint64_t)BYTES_BLOCK)};
        const MPI_Datatype types[2] = {blocks, MPI_BYTE};
        MLN_MPI_CHECK(MPI_Type_create_struct(2, lens, displs, types, &type), st, out);
    }
    MLN_MPI_CHECK(MPI_Type_commit(&type), st, out);
    *out = type;
out:
    if (blocks != MPI_DATATYPE_NULL)
        MPI_Type_free(&blocks);
    if (block != MPI_DATATYPE_NULL)
        MPI_Type_free(&block);
    return st;
}

/* One element of a derived type of n bytes, or n x MPI_BYTE. */
static mln_status_t bytes_args(uint64_t n, MPI_Datatype *type, int *count)
{
    if (n <= INT_MAX) {
        *type = MPI_BYTE;
        *count = (int)n;
        return MLN_OK;
    }
    *count = 1;
    return mln_mpi_bytes_type(n, type);
}

int mln_mpi_isend_bytes(const void *buf, uint64_t n, int dest, int tag, MPI_Comm comm,
                        MPI_Request *req)
{
    MPI_Datatype type;
    int count, rc;

    if (bytes_args(n, &type, &count) != MLN_OK)
        return MPI_ERR_COUNT;
    rc = MPI_Isend(buf, count, type, dest, tag, comm, req);
    if (type != MPI_BYTE) /* freed now, released by MPI when the operation completes */
        MPI_Type_free(&type);
    return rc;
}

int mln_mpi_irecv_bytes(void *buf, uint64_t n, int source, int tag, MPI_Comm comm, MPI_Request *req)
{
    MPI_Datatype type;
    int count, rc;

    if (bytes_args(n, &type, &count) != MLN_OK)
        return MPI_ERR_COUNT;
    rc = MPI_Irecv(buf, count, type, source, tag, comm, req);
    if (type != MPI_BYTE)
        MPI_Type_free(&type);
    return rc;
}
