/*
 * nas_mg.c - mln-nas-mg: a multigrid-style stencil in the style of NAS MG (seed 004's
 * latency-bound kernel; issue 19), a plain MPI program: it links no Multilane library.
 *
 * A periodic N x N x N grid of doubles, cut into slabs along z (rank r holds planes
 * [r N/P, (r+1) N/P)); --levels grids, each half the last in every dimension.  One V-cycle:
 *   down  level 0 .. L-2: --smooth Jacobi steps of the 7-point stencil (each: the two boundary
 *         planes to the neighbours in z, MPI_Sendrecv both ways), then restriction to the next
 *         level (the mean of each 2 x 2 x 2 cube: local, the planes of a slab pair up)
 *   bottom level L-1: --smooth steps
 *   up    level L-2 .. 0: prolongation (each fine point += half its coarse point), --smooth
 *         steps
 * As in NAS MG, the messages shrink with the level: N^2 doubles at the finest, (N / 2^(L-1))^2
 * at the coarsest, so a WAN between the sites makes the coarse levels latency-bound.
 *
 * Verified: rank 0 gathers the finest grid after the last cycle (MPI_Gatherv, outside the
 * clock) and compares it, bit for bit, with the same cycles run on one process (every point
 * is computed from the same neighbours in the same order whatever the decomposition).  Output:
 * the time of the cycles (max over ranks), the time in MPI_Sendrecv, messages per rank,
 * Mpoints/s (finest-grid points x V-cycles / time / 1e6), and "verified" or the first wrong
 * point; with --json FILE the same as the project's result document (nas_result.h; bytes: the
 * halo planes sent across the --split, per V-cycle).  Exit status: 0 verified, 1 wrong, 2 usage
 * or memory, 3 the JSON not written.  --inject-error RANK changes one point of that rank's
 * grid before the gather (tests).
 *
 * Cost per V-cycle (P ranks, L levels, s steps): 2 s (2L - 1) MPI_Sendrecv of (N / 2^l)^2
 * doubles per rank, and 8 (N / 2^l)^3 / P flops per step at level l.
 */
#include "nas_result.h"

#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct mg_opts {
    long n, levels, smooth, cycles;
    nas_common_t c;
} mg_opts_t;

enum { M_TOTAL, M_SENDRECV, M_RATE, M_N };
static const mln_bench_metric_t mg_metrics[M_N] = {
    {"total_s", "s", "one run", "the V-cycles, max over ranks", 0},
    {"sendrecv_s", "s", "one run", "the halo exchanges (MPI_Sendrecv), max over ranks", 0},
    {"Mpoints_s", "Mpoints/s", "one run", "N^3 x V-cycles / total_s / 10^6", 1},
};

/* One level of one process: nz planes of n x n, with a halo plane below (index 0) and above
 * (nz + 1); u is the grid, v the scratch of a Jacobi step. */
typedef struct level {
    long n, nz;
    double *u, *v;
} level_t;

static int rank, size, split;
static double comm_s;
static long msgs;
static uint64_t cross; /* bytes sent to a rank of the other site */

#define AT(l, x, y, z)                                                                             \
    ((l)->u[((size_t)(z) * (size_t)(l)->n + (size_t)(y)) * (size_t)(l)->n + (size_t)(x)])

static int usage(const char *why)
{
    return nas_usage(rank, "mln-nas-mg", why);
}

static int parse(int argc, char **argv, mg_opts_t *o)
{
    *o = (mg_opts_t){.n = 64, .levels = 4, .smooth = 2, .cycles = 4};
    const nas_opt_t opts[] = {
        {"--n", "N", &o->n, 1,
         "an N^3 periodic grid, at most 1024 (default 64); N / 2^(L-1) a multiple of the ranks"},
        {"--levels", "L", &o->levels, 1, "grid levels, at most 10 (default 4)"},
        {"--smooth", "S", &o->smooth, 1, "Jacobi steps per level and leg, at most 100 (default 2)"},
        {"--cycles", "C", &o->cycles, 1, "timed V-cycles, at most 1000 (default 4)"}};
    const nas_cmd_t cmd = {"mln-nas-mg",
                           "a multigrid-style stencil in the style of NAS MG: V-cycles of a "
                           "7-point Jacobi, halo planes by MPI_Sendrecv, verified bit for bit",
                           opts, (int)(sizeof(opts) / sizeof(opts[0]))};
    const char *bad = nas_parse(argc, argv, &cmd, &o->c);

    if (bad != NULL)
        return usage(bad);
    if (o->c.help) {
        if (rank == 0)
            nas_help(&cmd);
        return 0;
    }
    if (o->n > 1024 || o->levels > 10 || o->smooth > 100 || o->cycles > 1000)
        return usage("at most --n 1024, --levels 10, --smooth 100, --cycles 1000");
    if ((o->n >> (o->levels - 1)) < 2 || (o->n >> (o->levels - 1)) << (o->levels - 1) != o->n)
        return usage("N must be divisible by 2^(L-1), and N / 2^(L-1) at least 2");
    if ((o->n >> (o->levels - 1)) % size != 0)
        return usage("N / 2^(L-1) must be a multiple of the rank count");
    if (nas_split(&o->c, size) < 0)
        return usage("--split must leave the second site a rank (below the rank count)");
    return nas_result_probe(&o->c, "mln-nas-mg");
}

/* Mpoints/s of a run that took `t` seconds. */
static double mg_rate(const mg_opts_t *o, double t)
{
    return t > 0 ? (double)o->n * (double)o->n * (double)o->n * (double)o->cycles / t / 1e6 : 0.0;
}

/* The JSON result (with --json): 0 or 3. */
static int report(const mg_opts_t *o, double t, double sendrecv, uint64_t cross_all, int verified,
                  int argc, char **argv)
{
    const double values[M_N] = {t, sendrecv, mg_rate(o, t)};
    nas_result_t r = {.benchmark = "nas-mg",
                      .metrics = mg_metrics,
                      .values = values,
                      .nmetrics = M_N,
                      .cross_bytes = cross_all,
                      .problem_bytes = (uint64_t)o->n * (uint64_t)o->n * (uint64_t)o->n * 8,
                      .iters = o->cycles,
                      .verified = verified};

    nas_result_param(&r, "n", o->n);
    nas_result_param(&r, "levels", o->levels);
    nas_result_param(&r, "smooth", o->smooth);
    nas_result_param(&r, "cycles", o->cycles);
    return nas_result_write(&r, &o->c, "mln-nas-mg", argc, argv);
}

/* The planes [0, nz] + halos of level l: 0 on success. */
static int level_init(level_t *l, long n, long nz)
{
    const size_t points = (size_t)n * (size_t)n * (size_t)(nz + 2);

    l->n = n;
    l->nz = nz;
    l->u = calloc(points, sizeof(double));
    l->v = calloc(points, sizeof(double));
    return l->u && l->v ? 0 : -1;
}

/* The halo planes from the neighbours in z (periodic); procs = 1: a plain copy. */
static void halo(level_t *l, MPI_Comm comm, int procs, int me)
{
    const size_t plane = (size_t)l->n * (size_t)l->n;
    double *u = l->u;

    if (procs == 1) {
        memcpy(u, u + plane * (size_t)l->nz, plane * sizeof(double));
        memcpy(u + plane * (size_t)(l->nz + 1), u + plane, plane * sizeof(double));
        return;
    }
    const int up = (me + 1) % procs, down = (me + procs - 1) % procs;
    const double t0 = MPI_Wtime();

    cross += ((up >= split) != (me >= split)) * plane * sizeof(double);
    cross += ((down >= split) != (me >= split)) * plane * sizeof(double);

    /* my top plane up, the one below me from down; my bottom plane down, the one above from up */
    MPI_Sendrecv(u + plane * (size_t)l->nz, (int)plane, MPI_DOUBLE, up, 1, u, (int)plane,
                 MPI_DOUBLE, down, 1, comm, MPI_STATUS_IGNORE);
    MPI_Sendrecv(u + plane, (int)plane, MPI_DOUBLE, down, 2, u + plane * (size_t)(l->nz + 1),
                 (int)plane, MPI_DOUBLE, up, 2, comm, MPI_STATUS_IGNORE);
    comm_s += MPI_Wtime() - t0;
    msgs += 2;
}

/* One Jacobi step of the 7-point stencil: u = (sum of the 6 neighbours + u) / 7. */
static void smooth(level_t *l, MPI_Comm comm, int procs, int me)
{
    const long n = l->n;

    halo(l, comm, procs, me);
    for (long z = 1; z <= l->nz; z++)
        for (long y = 0; y < n; y++)
            for (long x = 0; x < n; x++) {
                const long xm = (x + n - 1) % n, xp = (x + 1) % n;
                const long ym = (y + n - 1) % n, yp = (y + 1) % n;
                double s = AT(l, x, y, z);
                s += AT(l, xm, y, z);
                s += AT(l, xp, y, z);
                s += AT(l, x, ym, z);
                s += AT(l, x, yp, z);
                s += AT(l, x, y, z - 1);
                s += AT(l, x, y, z + 1);
                l->v[((size_t)z * (size_t)n + (size_t)y) * (size_t)n + (size_t)x] = s / 7.0;
            }
    double *t = l->u;
    l->u = l->v;
    l->v = t;
}

/* coarse = the mean of each 2 x 2 x 2 cube of fine (the slab's planes pair up: local). */
static void restrict_to(const level_t *f, level_t *c)
{
    for (long z = 1; z <= c->nz; z++)
        for (long y = 0; y < c->n; y++)
            for (long x = 0; x < c->n; x++) {
                double s = 0;
                for (int dz = 0; dz < 2; dz++)
                    for (int dy = 0; dy < 2; dy++)
                        for (int dx = 0; dx < 2; dx++)
                            s += AT(f, 2 * x + dx, 2 * y + dy, 2 * (z - 1) + 1 + dz);
                AT(c, x, y, z) = s / 8.0;
            }
}

/* fine += coarse / 2 at each fine point's coarse point. */
static void prolong(level_t *f, const level_t *c)
{
    for (long z = 1; z <= f->nz; z++)
        for (long y = 0; y < f->n; y++)
            for (long x = 0; x < f->n; x++)
                AT(f, x, y, z) += 0.5 * AT(c, x / 2, y / 2, (z - 1) / 2 + 1);
}

/* C V-cycles over the levels of one process (procs ranks in all, this one `me`). */
static void cycles(level_t *lv, const mg_opts_t *o, MPI_Comm comm, int procs, int me)
{
    for (long c = 0; c < o->cycles; c++) {
        for (long l = 0; l < o->levels - 1; l++) {
            for (long s = 0; s < o->smooth; s++)
                smooth(&lv[l], comm, procs, me);
            restrict_to(&lv[l], &lv[l + 1]);
        }
        for (long s = 0; s < o->smooth; s++)
            smooth(&lv[o->levels - 1], comm, procs, me);
        for (long l = o->levels - 2; l >= 0; l--) {
            prolong(&lv[l], &lv[l + 1]);
            for (long s = 0; s < o->smooth; s++)
                smooth(&lv[l], comm, procs, me);
        }
    }
}

/* The initial value of global point (x, y, z): a few deterministic spikes on a ramp. */
static double initial(long n, long x, long y, long z)
{
    const long g = (z * n + y) * n + x;

    return (double)((g * 2654435761u) % 1000u) / 1000.0 + (g % 97 == 0 ? 10.0 : 0.0);
}

static int levels_init(level_t *lv, const mg_opts_t *o, long nz)
{
    for (long l = 0; l < o->levels; l++)
        if (level_init(&lv[l], o->n >> l, nz >> l) != 0)
            return -1;
    return 0;
}

static void levels_free(level_t *lv, long levels)
{
    for (long l = 0; l < levels; l++) {
        free(lv[l].u);
        free(lv[l].v);
    }
}

int main(int argc, char **argv)
{
    mg_opts_t o;
    level_t lv[10] = {{0}}, ref[10] = {{0}};
    double *all = NULL, t0, t, tmax = 0, cmax = 0;
    long nz, msgs_max = 0;
    uint64_t cross_all = 0;
    int rc, bad = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if ((rc = parse(argc, argv, &o)) != 0 || o.c.help)
        goto done;
    split = nas_split(&o.c, size);
    nz = o.n / size;
    if (levels_init(lv, &o, nz) != 0) {
        fprintf(stderr, "mln-nas-mg: rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (long z = 1; z <= nz; z++)
        for (long y = 0; y < o.n; y++)
            for (long x = 0; x < o.n; x++)
                AT(&lv[0], x, y, z) = initial(o.n, x, y, rank * nz + z - 1);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    cycles(lv, &o, MPI_COMM_WORLD, size, rank);
    t = MPI_Wtime() - t0;
    MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&comm_s, &cmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&msgs, &msgs_max, 1, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&cross, &cross_all, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    if (o.c.inject == rank)
        AT(&lv[0], 1, 1, 1) += 1.0;
    /* verification: the finest grid at rank 0 against one process's cycles */
    const size_t plane = (size_t)o.n * (size_t)o.n, mine = plane * (size_t)nz;
    if (rank == 0 && (all = malloc(plane * (size_t)o.n * sizeof(double))) == NULL) {
        fprintf(stderr, "mln-nas-mg: rank 0: out of memory for the check\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Gather(lv[0].u + plane, (int)mine, MPI_DOUBLE, all, (int)mine, MPI_DOUBLE, 0,
               MPI_COMM_WORLD);
    if (rank == 0) {
        if (levels_init(ref, &o, o.n) != 0) {
            fprintf(stderr, "mln-nas-mg: rank 0: out of memory for the check\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        for (long z = 1; z <= o.n; z++)
            for (long y = 0; y < o.n; y++)
                for (long x = 0; x < o.n; x++)
                    AT(&ref[0], x, y, z) = initial(o.n, x, y, z - 1);
        cycles(ref, &o, MPI_COMM_SELF, 1, 0);
        for (size_t i = 0; i < plane * (size_t)o.n && !bad; i++)
            if (memcmp(&all[i], &ref[0].u[plane + i], sizeof(double)) != 0) {
                printf("mln-nas-mg: FAILED: point %zu (x %zu, y %zu, z %zu) is %.17g, one "
                       "process computes %.17g\n",
                       i, i % (size_t)o.n, i / (size_t)o.n % (size_t)o.n, i / plane, all[i],
                       ref[0].u[plane + i]);
                bad = 1;
            }
        printf("mln-nas-mg: %d ranks, %ld^3 grid, %ld levels, %ld steps, %ld V-cycles\n", size, o.n,
               o.levels, o.smooth, o.cycles);
        printf("mln-nas-mg: cycles %10.6f s, of which MPI_Sendrecv %10.6f s (max over ranks), "
               "%ld messages per rank, %.2f Mpoints/s\n",
               tmax, cmax, msgs_max, mg_rate(&o, tmax));
        printf("mln-nas-mg: %s\n",
               bad ? "FAILED: the grid differs from one process's" : "verified");
        levels_free(ref, o.levels);
    }
    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    rc = report(&o, tmax, cmax, cross_all, !bad, argc, argv);
    rc = bad ? 1 : rc;
done:
    free(all);
    levels_free(lv, o.levels > 10 ? 10 : o.levels);
    MPI_Finalize();
    return rc;
}
