/*
 * mpi_halo.c - the halo plan (mln_halo_*) under real MPI: every element of every neighbour's
 * halo checked in every iteration.  Payload element i from rank r's entry k in iteration it is
 * value(r, it, k, i), so data from the wrong rank, entry, iteration or offset is caught.
 *
 * Cases: a periodic ring (a rank may be its own or both neighbours: 1 and 2 ranks), a line
 * without wrap (edge ranks have one neighbour), uneven and zero counts, a periodic 2-D
 * Cartesian grid, plan reuse and free, refused arguments (on every rank, no hang).
 * Only the p2p mode exists so far (issue 6); the others must be refused as unsupported.
 */
#include "multilane.h"

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ITERS = 40 };

static int rank, size, failures;

/* One failure: what, the case and two numbers that locate it. */
static void fail(const char *what, const char *msg, long long a, long long b)
{
    fprintf(stderr, "rank %d: %s: %s (%lld, %lld)\n", rank, what, msg, a, b);
    failures++;
}

static double value(int r, int it, int k, int64_t i)
{
    return (double)r * 1e6 + (double)it * 1e3 + (double)k * 100.0 + (double)(i % 97);
}

/* ITERS exchanges over a plan of n entries, every element checked. */
static void run(const char *what, int n, const int *nbrs, const int *peer, const int *create_peer,
                const int64_t *scount, const int64_t *rcount)
{
    mln_halo_plan_t *plan = NULL;
    double **sb = calloc((size_t)n + 1, sizeof(double *));
    double **rb = calloc((size_t)n + 1, sizeof(double *));
    mln_status_t st;

    for (int k = 0; k < n; k++) {
        sb[k] = malloc((size_t)(scount[k] + 1) * sizeof(double));
        rb[k] = malloc((size_t)(rcount[k] + 1) * sizeof(double));
    }
    /* create_peer: what the plan is told (NULL: the occurrence rule); peer: the sender's entry */
    st = mln_halo_create(MPI_COMM_WORLD, n, nbrs, create_peer, scount, rcount, MPI_DOUBLE,
                         MLN_HALO_P2P, &plan);
    if (st != MLN_OK || mln_halo_mode(plan) != MLN_HALO_P2P) {
        fail(what, "create: status, mode", st, plan ? (long long)mln_halo_mode(plan) : -1LL);
        goto out;
    }
    for (int it = 0; it < ITERS; it++) {
        for (int k = 0; k < n; k++) {
            for (int64_t i = 0; i < scount[k]; i++)
                sb[k][i] = value(rank, it, k, i);
            for (int64_t i = 0; i < rcount[k]; i++)
                rb[k][i] = -1.0;
        }
        st = mln_halo_exchange(plan, (const void *const *)sb, (void *const *)rb);
        if (st != MLN_OK) {
            fail(what, "exchange: status, iteration", st, it);
            goto out;
        }
        for (int k = 0; k < n; k++)
            for (int64_t i = 0; i < rcount[k]; i++)
                if (rb[k][i] != value(nbrs[k], it, peer[k], i)) {
                    fail(what, "wrong data: entry, element", k, i);
                    goto out;
                }
    }
out:
    mln_halo_free(&plan);
    if (plan != NULL)
        fail(what, "free left the plan set", 0, 0);
    for (int k = 0; k < n; k++) {
        free(sb[k]);
        free(rb[k]);
    }
    free(sb);
    free(rb);
}

/* Ring: entry 0 = left, entry 1 = right; my left pairs with the left rank's right.  Counts:
 * to the right 3 + rank (0 from rank 0: a zero-count neighbour), to the left 5 + rank. */
static void t_ring(void)
{
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    int nbrs[2] = {left, right}, peer[2] = {1, 0};
    int64_t scount[2] = {5 + rank, rank == 0 ? 0 : 3 + rank};
    int64_t rcount[2] = {left == 0 ? 0 : 3 + left, 5 + right};

    run("ring", 2, nbrs, peer, peer, scount, rcount);
}

/* A line without wrap, 160 doubles each way (the seed's size); no repeats: peer_index NULL. */
static void t_line(void)
{
    int nbrs[2], peer[2], n = 0;
    int64_t count[2] = {160, 160};

    if (rank > 0) {
        nbrs[n] = rank - 1;
        peer[n++] = rank - 1 > 0 ? 1 : 0; /* my entry in rank - 1's list: its last */
    }
    if (rank < size - 1) {
        nbrs[n] = rank + 1;
        peer[n++] = 0; /* I am the first entry of rank + 1 */
    }
    run("line", n, nbrs, peer, NULL, count, count);
}

/* A periodic 2-D grid: 4 neighbours, minus of an axis pairs with the neighbour's plus. */
static void t_grid(void)
{
    int dims[2] = {0, 0}, periods[2] = {1, 1}, nbrs[4], peer[4], crank;
    int64_t count[4] = {160, 160, 7, 7};
    MPI_Comm cart;

    MPI_Dims_create(size, 2, dims);
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
    MPI_Comm_rank(cart, &crank);
    for (int d = 0; d < 2; d++) {
        MPI_Cart_shift(cart, d, 1, &nbrs[2 * d], &nbrs[2 * d + 1]);
        peer[2 * d] = 2 * d + 1;
        peer[2 * d + 1] = 2 * d;
    }
    MPI_Comm_free(&cart); /* reorder 0: cart ranks are world ranks */
    if (crank != rank)
        fail("grid", "cart rank differs from world rank", crank, rank);
    run("grid", 4, nbrs, peer, peer, count, count);
}

/* Refused on every rank with a status, no hang: counts that do not match, a pairing that is
 * not mutual, a rank out of range, a mode not built yet, NULL plan. */
static void t_refused(void)
{
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int nbrs[2] = {left, right}, peer[2] = {1, 0}, wrong_peer[2] = {0, 0};
    int64_t count[2] = {4, 4}, uneven[2] = {4, 4}, bad_rank_nbrs_count[1] = {1};
    int bad_nbr[1] = {size};
    mln_halo_plan_t *plan = NULL;
    mln_status_t st;

    if (rank == 0)
        uneven[1] = 5; /* rank 0 sends 5 to the right, which expects 4 */
    st = mln_halo_create(MPI_COMM_WORLD, 2, nbrs, peer, uneven, count, MPI_DOUBLE, MLN_HALO_P2P,
                         &plan);
    if (st != MLN_ERR_ARG || plan != NULL)
        fail("refused", "mismatched counts: status (expected)", st, MLN_ERR_ARG);
    if (size > 2) { /* with 1 or 2 ranks both entries name the same rank: {0, 0} can pair */
        st = mln_halo_create(MPI_COMM_WORLD, 2, nbrs, wrong_peer, count, count, MPI_DOUBLE,
                             MLN_HALO_P2P, &plan);
        if (st != MLN_ERR_ARG)
            fail("refused", "pairing not mutual: status (expected)", st, MLN_ERR_ARG);
    }
    st = mln_halo_create(MPI_COMM_WORLD, 1, bad_nbr, NULL, bad_rank_nbrs_count, bad_rank_nbrs_count,
                         MPI_DOUBLE, MLN_HALO_P2P, &plan);
    if (st != MLN_ERR_ARG)
        fail("refused", "neighbour out of range: status (expected)", st, MLN_ERR_ARG);
    for (int m = MLN_HALO_AUTO; m <= MLN_HALO_RMA_SINGLE; m++) {
        if (m == MLN_HALO_P2P)
            continue;
        st = mln_halo_create(MPI_COMM_WORLD, 2, nbrs, peer, count, count, MPI_DOUBLE,
                             (mln_halo_mode_t)m, &plan);
        if (st != MLN_ERR_UNSUPPORTED || plan != NULL)
            fail("refused", "mode not built yet: mode, status", m, st);
    }
    if (mln_halo_create(MPI_COMM_WORLD, 2, nbrs, peer, count, count, MPI_DOUBLE, MLN_HALO_P2P,
                        NULL) != MLN_ERR_ARG)
        fail("refused", "NULL plan pointer accepted", 0, 0);
    if (strcmp(mln_halo_mode_name(MLN_HALO_RMA_PASSIVE), "rma-passive") != 0 ||
        mln_halo_mode_name((mln_halo_mode_t)7) != NULL)
        fail("refused", "mode names", 0, 0);
    mln_halo_free(NULL);
    mln_halo_free(&plan);
    t_ring(); /* nothing left behind: a real exchange still works */
}

int main(int argc, char **argv)
{
    int all = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (mln_init() != MLN_OK) {
        fprintf(stderr, "rank %d: mln_init failed\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    t_ring();
    t_line();
    t_grid();
    t_refused();
    mln_finalize();
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("mpi_halo: %d ranks, %s (%d failures)\n", size, all ? "FAILED" : "ok", all);
    MPI_Finalize();
    return all ? 1 : 0;
}
