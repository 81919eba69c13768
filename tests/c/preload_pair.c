/*
 * preload_pair.c - MPI_Isendrecv and MPI_Isendrecv_replace (MPI-4) under the interposition
 * layer (issue 16), a plain MPI program: every rank exchanges with its neighbours in a ring,
 * sizes from 10 bytes to 1 MiB + 3 (plain and striped under the layer's 4K threshold), with a
 * named and an MPI_ANY_SOURCE receive; every byte and the status (source, tag, count) checked.
 * An MPI without MPI_Isendrecv (Open MPI 4.1) runs MPI_Sendrecv and MPI_Sendrecv_replace.
 * MPICH 5.0.2's own MPI_Isendrecv leaves the status unset (source, tag and count are left-overs:
 * "status source 1 tag 14 count 4"): on MPICH the status is checked under the layer only (the
 * layer's status is its receive's, as the standard says), the bytes always.
 * Prints PASS on rank 0, or one line per failed check and exits 1.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#if (defined(MPI_VERSION) && MPI_VERSION >= 4) ||                                                  \
    (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
#define HAVE_ISENDRECV 1
#else
#define HAVE_ISENDRECV 0
#endif

static char pattern(int from, int size, int i)
{
    return (char)(i * 7 + from * 31 + size);
}

static int check(int rank, const char *what, int size, const char *buf, int from,
                 const MPI_Status *st, int tag)
{
    int count = -1, bad = 0;
#ifdef MPICH_VERSION
    const char *layer = getenv("LD_PRELOAD");
    const int status_defined = layer != NULL && layer[0] != '\0';
#else
    const int status_defined = 1;
#endif

    MPI_Get_count(st, MPI_CHAR, &count);
    if (status_defined && (st->MPI_SOURCE != from || st->MPI_TAG != tag || count != size)) {
        printf("preload_pair: rank %d: %s of %d bytes: status source %d tag %d count %d, "
               "expected %d %d %d\n",
               rank, what, size, st->MPI_SOURCE, st->MPI_TAG, count, from, tag, size);
        bad++;
    }
    for (int i = 0; i < size; i++)
        if (buf[i] != pattern(from, size, i)) {
            printf("preload_pair: rank %d: %s of %d bytes: byte %d wrong\n", rank, what, size, i);
            return bad + 1;
        }
    return bad;
}

int main(int argc, char **argv)
{
    int rank, nprocs, bad = 0, all = 0;
    static const int sizes[] = {10, 64, 4097, 100 * 1024, 1024 * 1024 + 3};

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    const int right = (rank + 1) % nprocs, left = (rank + nprocs - 1) % nprocs;
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        const int n = sizes[k];
        char *s = malloc((size_t)n), *r = malloc((size_t)n);
        MPI_Status st;
        for (int i = 0; i < n; i++)
            s[i] = pattern(rank, n, i);
        for (int any = 0; any < 2; any++) {
            const int src = any && nprocs == 2 ? MPI_ANY_SOURCE : left;
#if HAVE_ISENDRECV
            MPI_Request q;
            MPI_Isendrecv(s, n, MPI_CHAR, right, 7, r, n, MPI_CHAR, src, 7, MPI_COMM_WORLD, &q);
            MPI_Wait(&q, &st);
#else
            MPI_Sendrecv(s, n, MPI_CHAR, right, 7, r, n, MPI_CHAR, src, 7, MPI_COMM_WORLD, &st);
#endif
            bad += check(rank, "Isendrecv", n, r, left, &st, 7);
        }
#if HAVE_ISENDRECV
        MPI_Request q;
        MPI_Isendrecv_replace(s, n, MPI_CHAR, right, 8, left, 8, MPI_COMM_WORLD, &q);
        MPI_Wait(&q, &st);
#else
        MPI_Sendrecv_replace(s, n, MPI_CHAR, right, 8, left, 8, MPI_COMM_WORLD, &st);
#endif
        bad += check(rank, "Isendrecv_replace", n, s, left, &st, 8);
        free(s);
        free(r);
    }
    MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && all == 0)
        printf("preload_pair: %d ranks: PASS\n", nprocs);
    MPI_Finalize();
    return all != 0;
}
