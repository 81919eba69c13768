/*
 * mpi_halo.c - the halo plan (mln_halo_*) under real MPI: every element of every neighbour's
 * halo checked in every iteration.  Payload element i from rank r's entry k in iteration it is
 * value(r, it, k, i), so data from the wrong rank, entry, iteration or offset is caught.
 *
 * Every case runs in every mode (p2p, neighbor, the four RMA modes, auto): a periodic ring (a
 * rank may be its own or both neighbours: 1 and 2 ranks), a line without wrap (edge ranks have
 * one neighbour), uneven and zero counts, periodic 2-D grids from a neighbour list and from
 * mln_halo_create_cart (radius 1 and 2), 1-D and 3-D Cartesian stencils with and without wrap
 * (MPI_PROC_NULL edges: their buffers stay untouched), many iterations, two plans used in turn,
 * buffers that share memory (refused in every mode), plan reuse and free, auto's choice against
 * its own timings, the tunables MLN_HALO_MODE and MLN_HALO_DISABLE, refused arguments and
 * neighbour lists of different lengths (on every rank, no hang: a watchdog ends a hung case),
 * a set-up or an exchange that fails on one rank (the test hook MLN_HALO_FAULT).
 * A mode disabled on this MPI (docs/HALO.md) is reported and skipped; nothing else may be
 * refused.
 */
#include "multilane.h"

#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { ITERS = 40, MANY = 600 };

static int rank, size, failures;
static const char *auto_iters; /* --auto-iters: MLN_HALO_AUTO_ITERS for the whole run */
static mln_halo_mode_t mode;   /* of the cases */

static const char *mname(void)
{
    return mln_halo_mode_name(mode);
}

/* One failure: what, the case and two numbers that locate it. */
static void fail(const char *what, const char *msg, long long a, long long b)
{
    fprintf(stderr, "rank %d: %s [%s]: %s (%lld, %lld)\n", rank, what, mname(), msg, a, b);
    failures++;
}

/* The watchdog's message: the one global a signal handler can read (it takes no argument). */
static char watch_msg[200];

static void watch_fire(int sig)
{
    ssize_t n = write(STDERR_FILENO, watch_msg, strlen(watch_msg));

    (void)sig;
    (void)n;
    _exit(3);
}

/* Arms the watchdog for `seconds` over case `what` (alarm(0) disarms it): a case that hangs, a
 * rank waiting for a message that never comes, fails the run with its name instead of holding
 * ctest until its timeout. */
static void watch(const char *what, unsigned seconds)
{
    snprintf(watch_msg, sizeof(watch_msg), "rank %d: %s: not done within %u s (hang)\n", rank, what,
             seconds);
    alarm(seconds);
}

static double value(int r, int it, int k, int64_t i)
{
    return (double)r * 1e6 + (double)it * 1e3 + (double)k * 100.0 + (double)(i % 97);
}

/* What a case expects of a plan's entries: partner's entry, counts (receive = the partner's
 * send); nbrs[k] == MPI_PROC_NULL: nothing arrives and the buffer stays as it was. */
typedef struct expect {
    int n;
    const int *nbrs, *peer;
    const int64_t *scount, *rcount;
} expect_t;

/* Checks that auto kept the fastest mode it timed, and that describe says so. */
static void check_auto(const char *what, const mln_halo_plan_t *plan)
{
    mln_halo_mode_t chosen = mln_halo_mode(plan), fastest = MLN_HALO_AUTO;
    mln_halo_state_t state;
    double sec, best = 0.0;
    char line[512];

    for (int m = MLN_HALO_P2P; m < MLN_HALO_NMODES; m++) {
        if (mln_halo_timing(plan, (mln_halo_mode_t)m, &state, &sec) != MLN_OK)
            fail(what, "auto: timing refused for mode", m, 0);
        else if (state == MLN_HALO_TIMED && (fastest == MLN_HALO_AUTO || sec < best)) {
            fastest = (mln_halo_mode_t)m;
            best = sec;
        } else if (state == MLN_HALO_WRONG)
            fail(what, "auto: a mode delivered wrong data in the trial", m, 0);
    }
    if (chosen != fastest)
        fail(what, "auto: chosen, fastest timed", chosen, fastest);
    if (mln_halo_describe(plan, line, sizeof(line)) <= 0 ||
        strstr(line, mln_halo_mode_name(chosen)) != line || strstr(line, "auto") == NULL)
        fail(what, "auto: describe", 0, 0);
    if (rank == 0 && strcmp(what, "ring") == 0)
        printf("auto, ring of %d: %s\n", size, line);
}

/* `iters` exchanges over `plan`, every element checked; frees the plan. */
static void drive(const char *what, mln_halo_plan_t **plan, const expect_t *x, int iters)
{
    const int n = x->n;
    double **sb = calloc((size_t)n + 1, sizeof(double *));
    double **rb = calloc((size_t)n + 1, sizeof(double *));
    int wrong = 0;
    mln_status_t st;

    if (mln_halo_size(*plan) != n)
        fail(what, "size: plan, expected", mln_halo_size(*plan), n);
    for (int k = 0; k < n; k++) {
        sb[k] = malloc((size_t)(x->scount[k] + 1) * sizeof(double));
        rb[k] = malloc((size_t)(x->rcount[k] + 1) * sizeof(double));
        if (mln_halo_neighbor(*plan, k) != x->nbrs[k])
            fail(what, "neighbor: entry, rank", k, mln_halo_neighbor(*plan, k));
    }
    if (mode == MLN_HALO_AUTO)
        check_auto(what, *plan);
    else if (mln_halo_mode(*plan) != mode)
        fail(what, "mode of the plan", mln_halo_mode(*plan), mode);
    for (int it = 0; it < iters; it++) {
        for (int k = 0; k < n; k++) {
            for (int64_t i = 0; i < x->scount[k]; i++)
                sb[k][i] = value(rank, it, k, i);
            for (int64_t i = 0; i < x->rcount[k]; i++)
                rb[k][i] = -1.0;
        }
        st = mln_halo_exchange(*plan, (const void *const *)sb, (void *const *)rb);
        if (st != MLN_OK) {
            fail(what, "exchange: status, iteration", st, it);
            MPI_Abort(MPI_COMM_WORLD, 1); /* the others may wait for this rank */
        }
        for (int k = 0; k < n; k++)
            for (int64_t i = 0; i < x->rcount[k]; i++) {
                double want =
                    x->nbrs[k] == MPI_PROC_NULL ? -1.0 : value(x->nbrs[k], it, x->peer[k], i);
                if (rb[k][i] != want && !wrong) {
                    fail(what, "wrong data: entry, element", k, i);
                    fprintf(stderr, "rank %d:   iteration %d: got %.0f, want %.0f\n", rank, it,
                            rb[k][i], want);
                    wrong = 1; /* report once; the exchanges go on with the others */
                }
            }
    }
    mln_halo_free(plan);
    if (*plan != NULL)
        fail(what, "free left the plan set", 0, 0);
    for (int k = 0; k < n; k++) {
        free(sb[k]);
        free(rb[k]);
    }
    free(sb);
    free(rb);
}

/* A plan from a neighbour list (create_peer: what the plan is told; NULL: the occurrence
 * rule), then `iters` checked exchanges. */
static void run(const char *what, const expect_t *x, const int *create_peer, int iters)
{
    mln_halo_plan_t *plan = NULL;
    mln_status_t st = mln_halo_create(MPI_COMM_WORLD, x->n, x->nbrs, create_peer, x->scount,
                                      x->rcount, MPI_DOUBLE, mode, &plan);

    if (st != MLN_OK || plan == NULL) {
        fail(what, "create: status", st, 0);
        return;
    }
    drive(what, &plan, x, iters);
}

/* Ring: entry 0 = left, entry 1 = right; my left pairs with the left rank's right.  Counts:
 * to the right 3 + rank (0 from rank 0: a zero-count neighbour), to the left 5 + rank. */
static void t_ring(const char *what, int iters)
{
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    int nbrs[2] = {left, right}, peer[2] = {1, 0};
    int64_t scount[2] = {5 + rank, rank == 0 ? 0 : 3 + rank};
    int64_t rcount[2] = {left == 0 ? 0 : 3 + left, 5 + right};
    expect_t x = {2, nbrs, peer, scount, rcount};

    run(what, &x, peer, iters);
}

/* A line without wrap, 160 doubles each way (the seed's size); no repeats: peer_index NULL. */
static void t_line(void)
{
    int nbrs[2], peer[2], n = 0;
    int64_t count[2] = {160, 160};
    expect_t x = {0, nbrs, peer, count, count};

    if (rank > 0) {
        nbrs[n] = rank - 1;
        peer[n++] = rank - 1 > 0 ? 1 : 0; /* my entry in rank - 1's list: its last */
    }
    if (rank < size - 1) {
        nbrs[n] = rank + 1;
        peer[n++] = 0; /* I am the first entry of rank + 1 */
    }
    x.n = n;
    run("line", &x, NULL, ITERS);
}

/* A periodic 2-D grid from a list: 4 neighbours, minus of an axis pairs with the neighbour's
 * plus; 160 doubles along one axis, 7 along the other. */
static void t_grid(void)
{
    int dims[2] = {0, 0}, periods[2] = {1, 1}, nbrs[4], peer[4], crank;
    int64_t count[4] = {160, 160, 7, 7};
    expect_t x = {4, nbrs, peer, count, count};
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
    run("grid", &x, peer, ITERS);
}

/* mln_halo_create_cart on an ndims grid (periodic or not), `radius` hops, 160 doubles. */
static void t_cart(const char *what, int ndims, int periodic, int radius)
{
    int dims[3] = {0, 0, 0}, periods[3] = {periodic, periodic, periodic}, n = 2 * ndims * radius;
    int nbrs[24], peer[24];
    int64_t count[24];
    expect_t x = {n, nbrs, peer, count, count};
    mln_halo_plan_t *plan = NULL;
    MPI_Comm cart;
    mln_status_t st;

    MPI_Dims_create(size, ndims, dims);
    MPI_Cart_create(MPI_COMM_WORLD, ndims, dims, periods, 0, &cart);
    for (int d = 0; d < ndims; d++)
        for (int h = 1; h <= radius; h++) {
            int e = 2 * (d * radius + h - 1);
            MPI_Cart_shift(cart, d, h, &nbrs[e], &nbrs[e + 1]);
            peer[e] = e + 1;
            peer[e + 1] = e;
            count[e] = count[e + 1] = 160;
        }
    st = mln_halo_create_cart(cart, radius, 160, MPI_DOUBLE, mode, &plan);
    if (st != MLN_OK)
        fail(what, "create_cart: status", st, 0);
    else
        drive(what, &plan, &x, ITERS); /* cart ranks are world ranks (reorder 0) */
    MPI_Comm_free(&cart);
}

/* Two plans of the same ranks, used in turn: tags and windows must not mix. */
static void t_two_plans(void)
{
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    int nbrs[2] = {left, right}, peer[2] = {1, 0};
    int64_t c1[2] = {3, 3}, c2[2] = {2, 2};
    double s1[2][3], r1[2][3], s2[2][2], r2[2][2];
    const void *sp1[2] = {s1[0], s1[1]}, *sp2[2] = {s2[0], s2[1]};
    void *rp1[2] = {r1[0], r1[1]}, *rp2[2] = {r2[0], r2[1]};
    mln_halo_plan_t *a = NULL, *b = NULL;

    if (mln_halo_create(MPI_COMM_WORLD, 2, nbrs, peer, c1, c1, MPI_DOUBLE, mode, &a) != MLN_OK ||
        mln_halo_create(MPI_COMM_WORLD, 2, nbrs, peer, c2, c2, MPI_DOUBLE, MLN_HALO_P2P, &b) !=
            MLN_OK) {
        fail("two plans", "create", 0, 0);
        goto out;
    }
    for (int it = 0; it < ITERS; it++) {
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < 3; i++) {
                s1[k][i] = value(rank, it, k, i);
                s2[k][i % 2] = -value(rank, it, k, i % 2);
            }
        if (mln_halo_exchange(a, sp1, rp1) != MLN_OK || mln_halo_exchange(b, sp2, rp2) != MLN_OK) {
            fail("two plans", "exchange, iteration", it, 0);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < 3; i++)
                if (r1[k][i] != value(nbrs[k], it, peer[k], i) ||
                    r2[k][i % 2] != -value(nbrs[k], it, peer[k], i % 2)) {
                    fail("two plans", "wrong data: iteration, entry", it, k);
                    it = ITERS;
                    break;
                }
    }
out:
    mln_halo_free(&a);
    mln_halo_free(&b);
}

/* One exchange that must return `want` (a refusal: before anything moves, on every rank). */
static void exchange_expect(const char *what, mln_halo_plan_t *plan, const void *const *sendbufs,
                            void *const *recvbufs, mln_status_t want)
{
    mln_status_t st = mln_halo_exchange(plan, sendbufs, recvbufs);

    if (st != want)
        fail("aliased buffers", what, st, want);
    if (st != MLN_OK && want == MLN_OK)
        MPI_Abort(MPI_COMM_WORLD, 1); /* the others may wait for this rank */
}

/*
 * Buffers that share memory, refused with MLN_ERR_ARG in every mode before anything moves (the
 * RMA modes would cope, p2p and neighbor would not): a receive buffer that is its own send
 * buffer, one that overlaps another entry's send buffer by one element, two entries receiving
 * into one buffer.  Allowed: one send buffer for both entries, receive buffers end to end.  A
 * strided type (not in the RMA modes): equal addresses refused, interleaved buffers in one
 * array allowed.  Then the plan runs its checked exchanges as if nothing had been refused.
 */
static void t_aliased(void)
{
    int nbrs[2] = {(rank + size - 1) % size, (rank + 1) % size}, peer[2] = {1, 0};
    int64_t count[2] = {4, 4};
    expect_t x = {2, nbrs, peer, count, count};
    double m[20], *a = m, *b = m + 4, *c = m + 8, *d = m + 12;
    const void *ab[2] = {a, b}, *aa[2] = {a, a};
    void *ac[2] = {a, c}, *over[2] = {m + 7, d}, *cc[2] = {c, c}, *cd[2] = {c, d};
    double s[32], r[32]; /* strided: two send buffers of 15 doubles, two receive buffers */
    const void *sp[2] = {s, s + 16};
    void *same[2] = {s, r + 16}, *between[2] = {s + 1, r};
    mln_halo_plan_t *plan = NULL;
    MPI_Datatype vec, strided;

    if (mln_halo_create(MPI_COMM_WORLD, 2, nbrs, peer, count, count, MPI_DOUBLE, mode, &plan) !=
        MLN_OK) {
        fail("aliased buffers", "create", 0, 0);
        return;
    }
    for (int i = 0; i < 4; i++)
        a[i] = value(rank, 0, 0, i);
    exchange_expect("recvbufs[0] = sendbufs[0]: status", plan, ab, ac, MLN_ERR_ARG);
    exchange_expect("recvbufs[0] overlaps sendbufs[1]: status", plan, ab, over, MLN_ERR_ARG);
    exchange_expect("recvbufs[0] = recvbufs[1]: status", plan, ab, cc, MLN_ERR_ARG);
    exchange_expect("one send buffer for both entries: status", plan, aa, cd, MLN_OK);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 4; i++)
            if (((double *)cd[k])[i] != value(nbrs[k], 0, 0, i)) {
                fail("aliased buffers", "one send buffer for both: wrong data, entry", k, i);
                break;
            }
    drive("aliased buffers, then a ring", &plan, &x, ITERS);
    if (mode >= MLN_HALO_RMA_FENCE) /* they refuse a strided type */
        return;
    /* elements 0 and 2 of 4 doubles, 4 apart: a buffer 1 double further interleaves */
    MPI_Type_vector(2, 1, 2, MPI_DOUBLE, &vec);
    MPI_Type_create_resized(vec, 0, 4 * sizeof(double), &strided);
    MPI_Type_commit(&strided);
    if (mln_halo_create(MPI_COMM_WORLD, 2, nbrs, peer, count, count, strided, mode, &plan) !=
        MLN_OK) {
        fail("aliased buffers", "create (strided type)", 0, 0);
        goto out;
    }
    for (int i = 0; i < 32; i++)
        s[i] = value(rank, 0, i / 16, i % 16);
    exchange_expect("strided, recvbufs[0] = sendbufs[0]: status", plan, sp, same, MLN_ERR_ARG);
    exchange_expect("strided, interleaved in one array: status", plan, sp, between, MLN_OK);
    /* entry 0 from the left's entry 1, entry 1 from the right's entry 0 */
    for (int i = 0; i < 16; i += 2)
        if (s[i + 1] != value(nbrs[0], 0, 1, i) || r[i] != value(nbrs[1], 0, 0, i)) {
            fail("aliased buffers", "strided, interleaved: wrong data at element", i, 0);
            break;
        }
out:
    mln_halo_free(&plan);
    MPI_Type_free(&strided);
    MPI_Type_free(&vec);
}

/* Every case in the current mode. */
static void cases(void)
{
    t_ring("ring", ITERS);
    t_line();
    t_grid();
    t_cart("cart 1-D open", 1, 0, 1);
    t_cart("cart 2-D periodic r2", 2, 1, 2);
    t_cart("cart 3-D periodic", 3, 1, 1);
    t_cart("cart 3-D open", 3, 0, 1);
    t_two_plans();
    t_aliased();
    t_ring("ring, many iterations", MANY);
}

/*
 * Neighbour lists that are not mutual and differ in length (ranks 0 and 1; with 4 ranks, 2 and 3
 * a correct pair meanwhile, refused all the same): rank 0 lists 1, which lists nobody; the other
 * way round; 0 lists 1 twice, which lists 0 once.  A rank must not wait for an entry that its
 * neighbour does not have: every rank gets MLN_ERR_ARG, and none hangs (the watchdog).
 */
static void t_unpaired(void)
{
    static const struct {
        const char *what;
        int n0, n1; /* entries of rank 0 (all naming 1) and of rank 1 (all naming 0) */
    } shapes[] = {{"0 lists 1, 1 lists nobody", 1, 0},
                  {"0 lists nobody, 1 lists 0", 0, 1},
                  {"0 lists 1 twice, 1 lists 0 once", 2, 1}};
    int64_t count[2] = {4, 4};
    char what[96];

    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]) && size > 1; i++) {
        int nbrs[2] = {1 - rank, 1 - rank}, n = rank == 0 ? shapes[i].n0 : shapes[i].n1;
        mln_halo_plan_t *plan = NULL;
        mln_status_t st;

        if (rank > 1) { /* 2 and 3 pair with each other; with 3 ranks, 2 lists nobody */
            nbrs[0] = rank ^ 1;
            n = nbrs[0] < size;
        }
        snprintf(what, sizeof(what), "lists not mutual (%s)", shapes[i].what);
        watch(what, 60);
        st = mln_halo_create(MPI_COMM_WORLD, n, nbrs, NULL, count, count, MPI_DOUBLE, MLN_HALO_P2P,
                             &plan);
        alarm(0);
        if (st != MLN_ERR_ARG || plan != NULL)
            fail(what, "status (expected)", st, MLN_ERR_ARG);
        mln_halo_free(&plan);
    }
}

/* Refused on every rank with a status, no hang: counts that do not match, a pairing that is
 * not mutual, lists of different lengths, a rank out of range, an RMA mode with a
 * non-contiguous type, not a Cartesian communicator, NULL plan. */
static void t_refused(void)
{
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int nbrs[2] = {left, right}, peer[2] = {1, 0}, wrong_peer[2] = {0, 0};
    int64_t count[2] = {4, 4}, uneven[2] = {4, 4}, bad_rank_nbrs_count[1] = {1};
    int bad_nbr[1] = {size};
    mln_halo_plan_t *plan = NULL;
    MPI_Datatype strided;
    mln_status_t st;

    mode = MLN_HALO_P2P;
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
    st = mln_halo_create(MPI_COMM_WORLD, 2, nbrs, peer, count, count, MPI_DOUBLE,
                         (mln_halo_mode_t)MLN_HALO_NMODES, &plan);
    if (st != MLN_ERR_ARG)
        fail("refused", "mode out of range: status (expected)", st, MLN_ERR_ARG);
    st = mln_halo_create_cart(MPI_COMM_WORLD, 1, 4, MPI_DOUBLE, MLN_HALO_P2P, &plan);
    if (st != MLN_ERR_ARG || plan != NULL)
        fail("refused", "create_cart without a topology: status (expected)", st, MLN_ERR_ARG);
    /* a strided type: the RMA modes are refused, auto keeps p2p without a trial */
    MPI_Type_vector(2, 1, 2, MPI_DOUBLE, &strided);
    MPI_Type_commit(&strided);
    st = mln_halo_create(MPI_COMM_WORLD, 2, nbrs, peer, count, count, strided, MLN_HALO_RMA_FENCE,
                         &plan);
    if (st != MLN_ERR_UNSUPPORTED || plan != NULL)
        fail("refused", "rma-fence with a strided type: status (expected)", st,
             MLN_ERR_UNSUPPORTED);
    st =
        mln_halo_create(MPI_COMM_WORLD, 2, nbrs, peer, count, count, strided, MLN_HALO_AUTO, &plan);
    if (st != MLN_OK || mln_halo_mode(plan) != MLN_HALO_P2P)
        fail("refused", "auto with a strided type: status, mode", st, mln_halo_mode(plan));
    mln_halo_free(&plan);
    MPI_Type_free(&strided);
    if (mln_halo_create(MPI_COMM_WORLD, 2, nbrs, peer, count, count, MPI_DOUBLE, MLN_HALO_P2P,
                        NULL) != MLN_ERR_ARG)
        fail("refused", "NULL plan pointer accepted", 0, 0);
    if (strcmp(mln_halo_mode_name(MLN_HALO_RMA_PASSIVE), "rma-passive") != 0 ||
        mln_halo_mode_name((mln_halo_mode_t)MLN_HALO_NMODES) != NULL)
        fail("refused", "mode names", 0, 0);
    mln_halo_free(NULL);
    mln_halo_free(&plan);
    t_unpaired();
    t_ring("ring after refusals", ITERS); /* nothing left behind: a real exchange still works */
}

/* The tunables, each read by a fresh mln_init: MLN_HALO_MODE replaces auto (not an explicit
 * mode), MLN_HALO_DISABLE refuses a mode and keeps auto from it, a bad word is a config error. */
static void t_tunables(void)
{
    int nbrs[2] = {(rank + size - 1) % size, (rank + 1) % size}, peer[2] = {1, 0};
    int64_t count[2] = {4, 4};
    mln_halo_plan_t *plan = NULL;
    mln_halo_state_t state = MLN_HALO_UNTRIED;
    int off_pscw = 0, off_fence = 1;
    const char *why = NULL;
    mln_status_t st;

    mode = MLN_HALO_AUTO;
    mln_finalize();
    setenv("MLN_HALO_MODE", "rma-fence", 1);
    setenv("MLN_HALO_DISABLE", "rma-pscw,rma-single", 1);
    mln_init();
    st = mln_halo_create(MPI_COMM_WORLD, 2, nbrs, peer, count, count, MPI_DOUBLE, MLN_HALO_AUTO,
                         &plan);
    if (st != MLN_OK || mln_halo_mode(plan) != MLN_HALO_RMA_FENCE)
        fail("tunables", "MLN_HALO_MODE: status, mode", st, mln_halo_mode(plan));
    mln_halo_free(&plan);
    st = mln_halo_create(MPI_COMM_WORLD, 2, nbrs, peer, count, count, MPI_DOUBLE, MLN_HALO_RMA_PSCW,
                         &plan);
    if (st != MLN_ERR_UNSUPPORTED || plan != NULL)
        fail("tunables", "disabled mode asked for: status (expected)", st, MLN_ERR_UNSUPPORTED);
    if (mln_halo_disabled(MLN_HALO_RMA_PSCW, &off_pscw, &why) != MLN_OK || !off_pscw ||
        why == NULL || mln_halo_disabled(MLN_HALO_RMA_FENCE, &off_fence, NULL) != MLN_OK ||
        off_fence)
        fail("tunables", "mln_halo_disabled: pscw, fence", off_pscw, off_fence);
    mln_finalize();
    unsetenv("MLN_HALO_MODE");
    mln_init();
    st = mln_halo_create(MPI_COMM_WORLD, 2, nbrs, peer, count, count, MPI_DOUBLE, MLN_HALO_AUTO,
                         &plan);
    mln_halo_timing(plan, MLN_HALO_RMA_SINGLE, &state, NULL);
    if (st != MLN_OK || state != MLN_HALO_DISABLED || mln_halo_mode(plan) == MLN_HALO_RMA_PSCW)
        fail("tunables", "auto with disabled modes: status, state", st, state);
    mln_halo_free(&plan);
    mln_finalize();
    setenv("MLN_HALO_DISABLE", "rma-fence,bogus", 1);
    mln_init();
    st = mln_halo_create(MPI_COMM_WORLD, 2, nbrs, peer, count, count, MPI_DOUBLE, MLN_HALO_P2P,
                         &plan);
    if (st != MLN_ERR_CONFIG || plan != NULL)
        fail("tunables", "bad MLN_HALO_DISABLE: status (expected)", st, MLN_ERR_CONFIG);
    mln_finalize();
    unsetenv("MLN_HALO_DISABLE");
    mln_init();
}

/* 1 when `mode` is disabled on this MPI (docs/HALO.md): reported, not run.  That creation
 * then refuses it is t_tunables' business. */
static int disabled_here(void)
{
    int off = 0;

    if (mln_halo_disabled(mode, &off, NULL) != MLN_OK)
        fail("modes", "mln_halo_disabled failed for mode", mode, 0);
    return off;
}

/* A fresh mln_init with MLN_HALO_FAULT set to `spec` ("": unset).  auto's timing is not what
 * these cases test: one timed iteration per sample while a fault is set (MPICH on a busy host
 * took seconds per trial with the default 30). */
static void reinit_fault(const char *spec)
{
    mln_finalize();
    if (spec[0] != '\0') {
        setenv("MLN_HALO_FAULT", spec, 1);
        setenv("MLN_HALO_AUTO_ITERS", "1", 1);
    } else {
        unsetenv("MLN_HALO_FAULT");
        if (auto_iters != NULL)
            setenv("MLN_HALO_AUTO_ITERS", auto_iters, 1);
        else
            unsetenv("MLN_HALO_AUTO_ITERS");
    }
    if (mln_init() != MLN_OK) {
        fail("faults", "mln_init with MLN_HALO_FAULT failed", 0, 0);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* A ring plan in every mode not disabled here (auto included), each made while MLN_HALO_FAULT
 * fails the set-up of `only` (AUTO: of every mode) on the last rank: where that mode is set up
 * (asked for, or in auto's trial) every rank must get MLN_ERR_NOMEM, and none hang. */
static void setup_faults(mln_halo_mode_t only)
{
    int nbrs[2] = {(rank + size - 1) % size, (rank + 1) % size}, peer[2] = {1, 0};
    int64_t count[2] = {4, 4};
    char spec[64], what[96];

    if (only == MLN_HALO_AUTO)
        snprintf(spec, sizeof(spec), "setup:%d", size - 1);
    else
        snprintf(spec, sizeof(spec), "setup:%d:%s", size - 1, mln_halo_mode_name(only));
    reinit_fault(spec);
    for (int m = MLN_HALO_AUTO; m < MLN_HALO_NMODES; m++) {
        mln_halo_plan_t *plan = NULL;
        mln_status_t st, want;
        mode = (mln_halo_mode_t)m;
        if (disabled_here())
            continue;
        want =
            only == MLN_HALO_AUTO || mode == MLN_HALO_AUTO || mode == only ? MLN_ERR_NOMEM : MLN_OK;
        snprintf(what, sizeof(what), "MLN_HALO_FAULT=%s, %s", spec, mname());
        watch(what, 60);
        st = mln_halo_create(MPI_COMM_WORLD, 2, nbrs, peer, count, count, MPI_DOUBLE, mode, &plan);
        alarm(0);
        if (st != want || (plan != NULL) != (want == MLN_OK))
            fail(what, "create: status (expected)", st, want);
        mln_halo_free(&plan);
    }
}

/*
 * MLN_HALO_FAULT, the test hook, on the last rank.  A set-up fails there before the mode's
 * first collective call (as out of memory), in every mode, and in auto's trial at its first
 * mode and at a later one (rma-pscw): every rank returns MLN_ERR_NOMEM, none hangs (the
 * watchdog).  Its exchange 2 fails after the data moved: that rank gets MLN_ERR_MPI, and its
 * next exchange is refused at once with MLN_ERR_STATE (the ranks may be at different
 * iterations), not left waiting for neighbours that went on without it; the plan is then
 * freed on every rank.  Plans made afterwards work.
 */
static void t_faults(void)
{
    int nbrs[2] = {(rank + size - 1) % size, (rank + 1) % size}, peer[2] = {1, 0};
    int64_t count[2] = {4, 4};
    double s[2][4], r[2][4];
    const void *sp[2] = {s[0], s[1]};
    void *rp[2] = {r[0], r[1]};
    char spec[64], what[96];

    setup_faults(MLN_HALO_AUTO);
    setup_faults(MLN_HALO_RMA_PSCW);
    snprintf(spec, sizeof(spec), "exchange:%d:2", size - 1);
    reinit_fault(spec);
    for (int m = MLN_HALO_AUTO; m < MLN_HALO_NMODES; m++) {
        mln_halo_plan_t *plan = NULL;
        mln_status_t st = MLN_OK;
        mode = (mln_halo_mode_t)m;
        if (disabled_here())
            continue;
        snprintf(what, sizeof(what), "MLN_HALO_FAULT=%s, %s", spec, mname());
        watch(what, 60);
        if (mln_halo_create(MPI_COMM_WORLD, 2, nbrs, peer, count, count, MPI_DOUBLE, mode, &plan) !=
            MLN_OK) {
            fail(what, "create", 0, 0);
            continue;
        }
        for (int it = 0; it < 3; it++) {
            const mln_status_t want = it == 2 && rank == size - 1 ? MLN_ERR_MPI : MLN_OK;
            for (int k = 0; k < 2; k++)
                for (int i = 0; i < 4; i++)
                    s[k][i] = value(rank, it, k, i);
            if ((st = mln_halo_exchange(plan, sp, rp)) != want)
                fail(what, "exchange: status, iteration", st, it);
            for (int k = 0; k < 2; k++)
                for (int i = 0; i < 4; i++)
                    if (r[k][i] != value(nbrs[k], it, peer[k], i)) {
                        fail(what, "wrong data: iteration, entry", it, k);
                        k = 2;
                        break;
                    }
        }
        if (rank == size - 1 && (st = mln_halo_exchange(plan, sp, rp)) != MLN_ERR_STATE)
            fail(what, "an exchange after the failed one: status (expected)", st, MLN_ERR_STATE);
        mln_halo_free(&plan);
        alarm(0);
    }
    reinit_fault("");
    mode = MLN_HALO_P2P;
    t_ring("ring after faults", ITERS);
}

/* [--modes a,b,...] [--disable LIST] [--auto-iters N]: the modes to run the cases in (default:
 * all, auto last); --disable sets MLN_HALO_DISABLE (none: test the modes disabled on this MPI
 * too); --auto-iters sets MLN_HALO_AUTO_ITERS (auto's timed iterations per sample: across
 * hosts the default 30 makes every auto plan cost seconds, and auto makes one per case). */
static int parse_args(int argc, char **argv, mln_halo_mode_t *modes)
{
    const char *list = "p2p,neighbor,rma-fence,rma-pscw,rma-passive,rma-single,auto";
    char buf[256];
    int n = 0;

    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc)
            return -1;
        if (strcmp(argv[i], "--modes") == 0)
            list = argv[i + 1];
        else if (strcmp(argv[i], "--disable") == 0)
            setenv("MLN_HALO_DISABLE", argv[i + 1], 1);
        else if (strcmp(argv[i], "--auto-iters") == 0) {
            auto_iters = argv[i + 1];
            setenv("MLN_HALO_AUTO_ITERS", auto_iters, 1);
        } else
            return -1;
    }
    snprintf(buf, sizeof(buf), "%s", list);
    for (char *w = strtok(buf, ","); w != NULL && n < MLN_HALO_NMODES; w = strtok(NULL, ","))
        if (mln_halo_mode_parse(w, &modes[n++]) != MLN_OK)
            return -1;
    return n;
}

int main(int argc, char **argv)
{
    mln_halo_mode_t modes[MLN_HALO_NMODES];
    int all = 0, nmodes;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    signal(SIGALRM, watch_fire);
    if ((nmodes = parse_args(argc, argv, modes)) < 0) {
        if (rank == 0)
            fprintf(stderr, "usage: mpi_halo [--modes p2p,neighbor,...,auto] [--disable LIST] "
                            "[--auto-iters N]\n");
        MPI_Finalize();
        return 2;
    }
    if (mln_init() != MLN_OK) {
        fprintf(stderr, "rank %d: mln_init failed\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int i = 0; i < nmodes; i++) {
        int before = failures, mine, sum = 0;
        mode = modes[i];
        if (disabled_here()) {
            if (rank == 0)
                printf("mpi_halo: %-11s disabled on this MPI\n", mname());
            continue;
        }
        cases();
        mine = failures - before;
        MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0)
            printf("mpi_halo: %-11s %s\n", mname(), sum == 0 ? "ok" : "FAILED");
    }
    t_refused();
    t_tunables();
    t_faults();
    mln_finalize();
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("mpi_halo: %d ranks, %s (%d failures)\n", size, all ? "FAILED" : "ok", all);
    MPI_Finalize();
    return all ? 1 : 0;
}
