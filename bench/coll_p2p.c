/*
 * coll_p2p.c - the harness's collectives from point-to-point only (coll.h), for programs whose
 * MPI_COMM_WORLD may span sites joined by relays (`multilane grid run`: the interposition
 * layer carries MPI_Send/MPI_Recv across sites and refuses collectives).  Linear through the
 * root, in rank order, so results are the same on every run (a sum of doubles too):
 *
 *   allreduce  every rank sends its values to rank 0 (tag +0), which combines them in rank
 *              order and sends the result to every rank (tag +1)
 *   bcast      the root sends to every other rank (tag +2)
 *   gather     every other rank sends to the root (tag +3), which places block r at r * count
 *
 * Cost at the root: allreduce 2 (P-1) (alpha + n beta), bcast and gather (P-1) (alpha + n beta).
 * The harness calls them outside the timed loops (a few per size and test), so a linear
 * pattern costs nothing the metrics see; across a WAN it is P-1 round trips' worth of latency.
 *
 * A receive here polls (MPI_Irecv, MPI_Test) and sleeps COLL_NAP_US between polls once it has
 * waited COLL_SPIN_S: ranks that take no part in a test (a ping-pong's other ranks) wait in
 * the allreduce after the timed loop, and a spinning MPI_Recv there took a core from the two
 * that are timed (4 ranks, 2 gateways and the delay line on 2 cores: the direct ping-pong's
 * latency swung by 80 us).
 */
#include "coll.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define COLL_SPIN_S 0.001 /* polls without sleeping for this long */
#define COLL_NAP_US 1000  /* then sleeps this long between polls */

enum { TAG_UP = MLN_BENCH_COLL_TAG, TAG_DOWN, TAG_BCAST, TAG_GATHER };

/* Bytes of one element of the types the harness uses; 0 for any other type. */
static size_t coll_type_size(MPI_Datatype type)
{
    if (type == MPI_CHAR || type == MPI_BYTE)
        return 1;
    if (type == MPI_INT)
        return sizeof(int);
    if (type == MPI_DOUBLE)
        return sizeof(double);
    if (type == MPI_UINT64_T)
        return sizeof(uint64_t);
    return 0;
}

#define COLL_COMBINE(ctype, acc, in, count, op)                                                    \
    do {                                                                                           \
        ctype *a_ = (ctype *)(acc);                                                                \
        const ctype *x_ = (const ctype *)(in);                                                     \
        for (int i_ = 0; i_ < (count); i_++) {                                                     \
            if ((op) == MPI_SUM)                                                                   \
                a_[i_] += x_[i_];                                                                  \
            else if ((op) == MPI_MAX)                                                              \
                a_[i_] = x_[i_] > a_[i_] ? x_[i_] : a_[i_];                                        \
            else                                                                                   \
                a_[i_] = x_[i_] < a_[i_] ? x_[i_] : a_[i_];                                        \
        }                                                                                          \
    } while (0)

/* acc[i] = acc[i] op in[i] (type and op checked by the caller). */
static void coll_combine(void *acc, const void *in, int count, MPI_Datatype type, MPI_Op op)
{
    if (type == MPI_INT)
        COLL_COMBINE(int, acc, in, count, op);
    else if (type == MPI_DOUBLE)
        COLL_COMBINE(double, acc, in, count, op);
    else
        COLL_COMBINE(uint64_t, acc, in, count, op);
}

/* Rank and size of comm; MPI's error code. */
/* MPI_Recv that leaves the cores to others after COLL_SPIN_S (see the top). */
static int coll_recv(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm)
{
    const struct timespec nap = {.tv_sec = 0, .tv_nsec = COLL_NAP_US * 1000L};
    MPI_Request req;
    double t0 = MPI_Wtime();
    int done = 0, rc = MPI_Irecv(buf, count, type, src, tag, comm, &req);

    while (rc == MPI_SUCCESS && !done) {
        rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS && !done && MPI_Wtime() - t0 > COLL_SPIN_S)
            nanosleep(&nap, NULL);
    }
    return rc;
}

static int coll_where(MPI_Comm comm, int *rank, int *size)
{
    int rc = MPI_Comm_rank(comm, rank);

    return rc != MPI_SUCCESS ? rc : MPI_Comm_size(comm, size);
}

static int coll_p2p_allreduce(const void *in, void *out, int count, MPI_Datatype type, MPI_Op op,
                              MPI_Comm comm)
{
    size_t esize = coll_type_size(type);
    size_t len = esize * (size_t)(count > 0 ? count : 0);
    int rank = 0, size = 0, rc;
    void *tmp = NULL;

    if (esize == 0 || type == MPI_CHAR || type == MPI_BYTE)
        return MPI_ERR_TYPE;
    if (op != MPI_SUM && op != MPI_MAX && op != MPI_MIN)
        return MPI_ERR_OP;
    if (count < 0 || in == MPI_IN_PLACE || in == NULL || out == NULL)
        return MPI_ERR_ARG;
    rc = coll_where(comm, &rank, &size);
    if (rc != MPI_SUCCESS)
        return rc;
    if (rank != 0) {
        rc = MPI_Send(in, count, type, 0, TAG_UP, comm);
        return rc != MPI_SUCCESS ? rc : coll_recv(out, count, type, 0, TAG_DOWN, comm);
    }
    tmp = malloc(len ? len : 1);
    if (tmp == NULL)
        return MPI_ERR_NO_MEM;
    memmove(out, in, len);
    for (int r = 1; r < size && rc == MPI_SUCCESS; r++) {
        rc = coll_recv(tmp, count, type, r, TAG_UP, comm);
        if (rc == MPI_SUCCESS)
            coll_combine(out, tmp, count, type, op);
    }
    for (int r = 1; r < size && rc == MPI_SUCCESS; r++)
        rc = MPI_Send(out, count, type, r, TAG_DOWN, comm);
    free(tmp);
    return rc;
}

static int coll_p2p_bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    int rank = 0, size = 0, rc;

    if (coll_type_size(type) == 0)
        return MPI_ERR_TYPE;
    rc = coll_where(comm, &rank, &size);
    if (rc != MPI_SUCCESS)
        return rc;
    if (root < 0 || root >= size)
        return MPI_ERR_ROOT;
    if (rank != root)
        return coll_recv(buf, count, type, root, TAG_BCAST, comm);
    for (int r = 0; r < size && rc == MPI_SUCCESS; r++)
        if (r != root)
            rc = MPI_Send(buf, count, type, r, TAG_BCAST, comm);
    return rc;
}

static int coll_p2p_gather(const void *in, int count, MPI_Datatype type, void *out, int root,
                           MPI_Comm comm)
{
    size_t block = coll_type_size(type) * (size_t)(count > 0 ? count : 0);
    int rank = 0, size = 0, rc;

    if (coll_type_size(type) == 0)
        return MPI_ERR_TYPE;
    if (count < 0 || in == MPI_IN_PLACE)
        return MPI_ERR_ARG;
    rc = coll_where(comm, &rank, &size);
    if (rc != MPI_SUCCESS)
        return rc;
    if (root < 0 || root >= size)
        return MPI_ERR_ROOT;
    if (rank != root)
        return MPI_Send(in, count, type, root, TAG_GATHER, comm);
    memmove((char *)out + (size_t)root * block, in, block);
    for (int r = 0; r < size && rc == MPI_SUCCESS; r++)
        if (r != root)
            rc = coll_recv((char *)out + (size_t)r * block, count, type, r, TAG_GATHER, comm);
    return rc;
}

const mln_bench_coll_t mln_bench_coll_p2p = {
    .name = "p2p",
    .allreduce = coll_p2p_allreduce,
    .bcast = coll_p2p_bcast,
    .gather = coll_p2p_gather,
};
