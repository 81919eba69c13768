/*
 * nas_lu.c - mln-nas-lu: a pipelined wavefront in the style of NAS LU (seed 004's
 * compute-bound kernel; issue 19), a plain MPI program: it links no Multilane library.
 *
 * An NX x NY x NZ grid of doubles, cut into bands along y (rank r holds rows [r NY/P,
 * (r+1) NY/P)).  One iteration is NAS LU's symmetric Gauss-Seidel pair of sweeps:
 *   lower  for z = 0 .. NZ-1: receive the row below this band in plane z from rank r - 1,
 *          update the band's rows in order, u = c (u + a (u[x-1] + u[y-1] + u[z-1])), send the
 *          band's last row of plane z to rank r + 1
 *   upper  for z = NZ-1 .. 0: the same from above, rows in reverse, with u[x+1], u[y+1], u[z+1]
 * (points outside the grid count as 0).  Rank r starts plane z when rank r - 1 has finished
 * it: a pipeline of NZ steps that fills in P - 1 steps; each message is one row (NX doubles),
 * each step NX NY / P points of work, so the kernel is compute-bound once the planes are big
 * and the pipeline is full (seed 004: LU over 1 trunk as fast as direct).
 *
 * Verified: rank 0 gathers the grid after the last iteration (outside the clock) and compares
 * it bit for bit with the same sweeps on one process (each point is computed from the same
 * values in the same order whatever the decomposition).  Output: the time of the iterations
 * (max over ranks), the time waiting in MPI_Recv, Mpoints/s, and "verified" or the first wrong
 * point; with --json FILE the same as the project's result document (nas_result.h; bytes: the
 * rows sent across the --split, per iteration).  Exit status: 0 verified, 1 wrong, 2 usage or
 * memory, 3 the JSON not written.  --inject-error RANK changes one point of that rank's grid
 * before the gather (tests).
 *
 * Cost per iteration: 2 NZ messages of NX doubles per rank and direction, 2 NX NY NZ / P
 * point updates (5 flops each), plus (P - 1) steps to fill the pipeline in each sweep.
 */
#include "nas_result.h"

#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define A 0.3 /* the weight of the three neighbours */
#define C 0.5 /* the scale of the update */

typedef struct lu_opts {
    long nx, ny, nz, iters;
    nas_common_t c;
} lu_opts_t;

enum { M_TOTAL, M_WAIT, M_RATE, M_N };
static const mln_bench_metric_t lu_metrics[M_N] = {
    {"total_s", "s", "one run", "the iterations (lower and upper sweep each), max over ranks", 0},
    {"recv_wait_s", "s", "one run",
     "waiting in MPI_Recv for the previous rank's row, max over ranks", 0},
    {"Mpoints_s", "Mpoints/s", "one run",
     "2 NX NY NZ x iterations / total_s / 10^6 (point updates)", 1},
};

typedef struct band {
    long nx, ny, nz; /* ny rows of this band; rows -1 and ny are the halo */
    double *u;
} band_t;

static int rank, size, split;
static double wait_s;
static uint64_t cross; /* bytes sent to a rank of the other site */

#define AT(b, x, y, z)                                                                             \
    ((b)->u[((size_t)(z) * (size_t)((b)->ny + 2) + (size_t)((y) + 1)) * (size_t)(b)->nx +          \
            (size_t)(x)])

static int usage(const char *why)
{
    return nas_usage(rank, "mln-nas-lu", why);
}

static int parse(int argc, char **argv, lu_opts_t *o)
{
    *o = (lu_opts_t){.nx = 64, .ny = 64, .nz = 64, .iters = 10};
    const nas_opt_t opts[] = {
        {"--nx", "NX", &o->nx, 1, "grid points along x, at most 4096 (default 64)"},
        {"--ny", "NY", &o->ny, 1, "along y, a multiple of the rank count (default 64)"},
        {"--nz", "NZ", &o->nz, 1, "along z, the pipeline's steps (default 64; 2^28 points)"},
        {"--iters", "I", &o->iters, 1, "timed iterations, at most 10000 (default 10)"}};
    const nas_cmd_t cmd = {"mln-nas-lu",
                           "a pipelined Gauss-Seidel wavefront in the style of NAS LU: lower "
                           "and upper sweeps over y bands, verified bit for bit",
                           opts, (int)(sizeof(opts) / sizeof(opts[0]))};
    const char *bad = nas_parse(argc, argv, &cmd, &o->c);

    if (bad != NULL)
        return usage(bad);
    if (o->c.help) {
        if (rank == 0)
            nas_help(&cmd);
        return 0;
    }
    if (o->nx > 4096 || o->ny > 4096 || o->nz > 4096 || o->iters > 10000 ||
        o->nx * o->ny * o->nz > (1L << 28))
        return usage("at most 4096 per dimension, 2^28 points, 10000 iterations");
    if (o->ny % size != 0)
        return usage("NY must be a multiple of the rank count");
    if (nas_split(&o->c, size) < 0)
        return usage("--split must leave the second site a rank (below the rank count)");
    return nas_result_probe(&o->c, "mln-nas-lu");
}

/* Mpoints/s (point updates) of a run that took `t` seconds. */
static double lu_rate(const lu_opts_t *o, double t)
{
    return t > 0 ? 2.0 * (double)(o->nx * o->ny * o->nz) * (double)o->iters / t / 1e6 : 0.0;
}

/* The JSON result (with --json): 0 or 3. */
static int report(const lu_opts_t *o, double t, double wait, uint64_t cross_all, int verified,
                  int argc, char **argv)
{
    const double values[M_N] = {t, wait, lu_rate(o, t)};
    nas_result_t r = {.benchmark = "nas-lu",
                      .metrics = lu_metrics,
                      .values = values,
                      .nmetrics = M_N,
                      .cross_bytes = cross_all,
                      .problem_bytes = (uint64_t)(o->nx * o->ny * o->nz) * sizeof(double),
                      .iters = o->iters,
                      .verified = verified};

    nas_result_param(&r, "nx", o->nx);
    nas_result_param(&r, "ny", o->ny);
    nas_result_param(&r, "nz", o->nz);
    nas_result_param(&r, "iters", o->iters);
    return nas_result_write(&r, &o->c, "mln-nas-lu", argc, argv);
}

/* MPI_Send of a row to rank `to`, counted when it crosses the sites. */
static void send_row(const double *row, long nx, int to, int tag)
{
    if ((to >= split) != (rank >= split))
        cross += (uint64_t)nx * sizeof(double);
    MPI_Send(row, (int)nx, MPI_DOUBLE, to, tag, MPI_COMM_WORLD);
}

/* The initial value of global point (x, y, z). */
static double initial(const lu_opts_t *o, long x, long y, long z)
{
    const long g = (z * o->ny + y) * o->nx + x;

    return (double)((g * 2246822519u) % 1000u) / 1000.0;
}

static void recv_row(double *row, long nx, int from, int tag)
{
    const double t0 = MPI_Wtime();

    MPI_Recv(row, (int)nx, MPI_DOUBLE, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    wait_s += MPI_Wtime() - t0;
}

/* One lower and one upper sweep over band b, rank `me` of `procs` (1: no messages). */
static void sweeps(band_t *b, int procs, int me)
{
    const long nx = b->nx, ny = b->ny;

    for (long z = 0; z < b->nz; z++) { /* lower: from rank 0 up, rows upward */
        if (me > 0)
            recv_row(&AT(b, 0, -1, z), nx, me - 1, 1);
        for (long y = 0; y < ny; y++)
            for (long x = 0; x < nx; x++) {
                const double w = (x > 0 ? AT(b, x - 1, y, z) : 0.0) +
                                 (me > 0 || y > 0 ? AT(b, x, y - 1, z) : 0.0) +
                                 (z > 0 ? AT(b, x, y, z - 1) : 0.0);
                AT(b, x, y, z) = C * (AT(b, x, y, z) + A * w);
            }
        if (me + 1 < procs)
            send_row(&AT(b, 0, ny - 1, z), nx, me + 1, 1);
    }
    for (long z = b->nz - 1; z >= 0; z--) { /* upper: from the last rank down, rows downward */
        if (me + 1 < procs)
            recv_row(&AT(b, 0, ny, z), nx, me + 1, 2);
        for (long y = ny - 1; y >= 0; y--)
            for (long x = nx - 1; x >= 0; x--) {
                const double w = (x + 1 < nx ? AT(b, x + 1, y, z) : 0.0) +
                                 (me + 1 < procs || y + 1 < ny ? AT(b, x, y + 1, z) : 0.0) +
                                 (z + 1 < b->nz ? AT(b, x, y, z + 1) : 0.0);
                AT(b, x, y, z) = C * (AT(b, x, y, z) + A * w);
            }
        if (me > 0)
            send_row(&AT(b, 0, 0, z), nx, me - 1, 2);
    }
}

/* A band of ny rows starting at global row y0, filled with the initial values. */
static int band_init(band_t *b, const lu_opts_t *o, long ny, long y0)
{
    *b = (band_t){.nx = o->nx, .ny = ny, .nz = o->nz};
    b->u = calloc((size_t)o->nx * (size_t)(ny + 2) * (size_t)o->nz, sizeof(double));
    if (b->u == NULL)
        return -1;
    for (long z = 0; z < o->nz; z++)
        for (long y = 0; y < ny; y++)
            for (long x = 0; x < o->nx; x++)
                AT(b, x, y, z) = initial(o, x, y0 + y, z);
    return 0;
}

int main(int argc, char **argv)
{
    lu_opts_t o;
    band_t b = {0}, ref = {0};
    double *all = NULL, *mine = NULL, t0, t, tmax = 0, wmax = 0;
    long ny;
    uint64_t cross_all = 0;
    int rc, bad = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if ((rc = parse(argc, argv, &o)) != 0 || o.c.help)
        goto done;
    split = nas_split(&o.c, size);
    ny = o.ny / size;
    const size_t row = (size_t)o.nx, count = row * (size_t)ny * (size_t)o.nz;
    mine = malloc(count * sizeof(double));
    if (band_init(&b, &o, ny, rank * ny) != 0 || mine == NULL ||
        (rank == 0 && (all = malloc(count * (size_t)size * sizeof(double))) == NULL)) {
        fprintf(stderr, "mln-nas-lu: rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (long it = 0; it < o.iters; it++)
        sweeps(&b, size, rank);
    t = MPI_Wtime() - t0;
    MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&wait_s, &wmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&cross, &cross_all, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    if (o.c.inject == rank)
        AT(&b, 0, 0, 0) += 1.0;
    /* verification: the band's rows, z-major, gathered at rank 0 against one process */
    for (long z = 0, k = 0; z < o.nz; z++)
        for (long y = 0; y < ny; y++, k++)
            memcpy(mine + (size_t)k * row, &AT(&b, 0, y, z), row * sizeof(double));
    MPI_Gather(mine, (int)count, MPI_DOUBLE, all, (int)count, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        if (band_init(&ref, &o, o.ny, 0) != 0) {
            fprintf(stderr, "mln-nas-lu: rank 0: out of memory for the check\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        for (long it = 0; it < o.iters; it++)
            sweeps(&ref, 1, 0);
        for (int r = 0; r < size && !bad; r++)
            for (long z = 0; z < o.nz && !bad; z++)
                for (long y = 0; y < ny && !bad; y++) {
                    const double *got =
                        all + (size_t)r * count + ((size_t)z * (size_t)ny + (size_t)y) * row;
                    const double *want = &AT(&ref, 0, r * ny + y, z);
                    for (long x = 0; x < o.nx && !bad; x++)
                        if (memcmp(&got[x], &want[x], sizeof(double)) != 0) {
                            printf("mln-nas-lu: FAILED: point (x %ld, y %ld, z %ld) is %.17g, "
                                   "one process computes %.17g\n",
                                   x, r * ny + y, z, got[x], want[x]);
                            bad = 1;
                        }
                }
        printf("mln-nas-lu: %d ranks, %ld x %ld x %ld grid, %ld iterations\n", size, o.nx, o.ny,
               o.nz, o.iters);
        printf("mln-nas-lu: iterations %10.6f s, of which waiting in MPI_Recv %10.6f s (max over "
               "ranks), %.2f Mpoints/s\n",
               tmax, wmax, lu_rate(&o, tmax));
        printf("mln-nas-lu: %s\n",
               bad ? "FAILED: the grid differs from one process's" : "verified");
        free(ref.u);
    }
    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    rc = report(&o, tmax, wmax, cross_all, !bad, argc, argv);
    rc = bad ? 1 : rc;
done:
    free(b.u);
    free(mine);
    free(all);
    MPI_Finalize();
    return rc;
}
