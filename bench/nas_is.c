/*
 * nas_is.c - mln-nas-is: an integer sort in the style of NAS IS (seed 004's first application
 * kernel; issue 19), a plain MPI program: it links no Multilane library and calls only MPI,
 * so that the same binary runs as one stock MPI job and, once the grid carries collectives,
 * across private sites under `multilane grid run`.
 *
 * Each rank holds --keys keys in [0, --max-key), drawn from its own stream (the sum of four
 * uniform draws / 4, as NAS IS: a bell-shaped key distribution).  One iteration (NAS IS's
 * rank()):
 *   1. count the keys per bucket (--buckets buckets of max_key / buckets keys each)
 *   2. MPI_Allreduce(SUM) of the bucket counts: every rank knows the global histogram
 *   3. buckets to ranks in order, each rank about total / P keys (whole buckets)
 *   4. MPI_Alltoall of the counts to send each rank; MPI_Alltoallv of the keys
 *   5. a counting sort of the keys received (each rank's key range, in order)
 * Before iteration it, as NAS IS, two keys change: key[it] = it and key[it + ITER_MAX] =
 * max_key - it (rank 0), so each iteration sorts something new.  As NAS IS, one iteration
 * (the first one's keys) runs untimed before the timed ones (--warmup 1, the default): it
 * touches every page and opens every connection (with the grid: the trunks' TCP windows grow),
 * so that the timed iterations measure the sort, not the start-up.
 *
 * Verified after the last iteration (full verification, not NAS's partial one): every rank's
 * output is sorted, the last key of rank r is at most the first of rank r + 1, and the keys'
 * count, sum and sum of squares (mod 2^64) are those of the input.  Output: one line per phase
 * (time max over ranks, summed over iterations), Mkeys/s = P keys iters / total / 1e6, and
 * "verified" or what failed; with --json FILE the same as the project's result document
 * (nas_result.h; bytes: the keys and counts sent across the --split, per iteration).  Exit
 * status: 0 verified, 1 wrong result, 2 usage or memory, 3 the JSON not written.
 * --inject-error RANK makes that rank change one key of its output: the run must fail (tests).
 *
 * Cost per iteration (alpha-beta, P ranks, n keys each, B buckets): Allreduce of B words,
 * Alltoall of P words, Alltoallv of ~n (P-1)/P keys per rank: the all-to-all is the
 * cross-site traffic of seed 004's IS figures.
 */
#include "nas_result.h"

#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ITER_MAX 64 /* the keys the iterations change sit at [0, ITER_MAX) and past it */

enum { PH_ALLREDUCE, PH_ALLTOALL, PH_ALLTOALLV, PH_SORT, PH_N };
static const char *const phase_name[PH_N] = {"histogram", "alltoall", "alltoallv", "sort"};

/* The JSON's metrics: total_s, the phases (PH_* + 1), then the rate. */
enum { M_TOTAL, M_RATE = PH_N + 1, M_N };
static const mln_bench_metric_t is_metrics[M_N] = {
    {"total_s", "s", "one run", "the four phases summed over the iterations, each max over ranks",
     0},
    {"histogram_s", "s", "one run",
     "counting the keys per bucket and MPI_Allreduce of the counts, max over ranks", 0},
    {"alltoall_s", "s", "one run", "MPI_Alltoall of the key counts, max over ranks", 0},
    {"alltoallv_s", "s", "one run", "MPI_Alltoallv of the keys, max over ranks", 0},
    {"sort_s", "s", "one run", "the counting sort of the keys received, max over ranks", 0},
    {"Mkeys_s", "Mkeys/s", "one run", "P x keys per rank x iterations / total_s / 10^6", 1},
};

typedef struct is_opts {
    long keys, max_key, buckets, iters, warmup;
    nas_common_t c; /* --inject-error RANK: that rank changes one key of its output (tests) */
} is_opts_t;

static int rank, size;

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15u);

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

static int usage(const char *why)
{
    return nas_usage(rank, "mln-nas-is", why);
}

static int parse(int argc, char **argv, is_opts_t *o)
{
    *o = (is_opts_t){
        .keys = 1L << 20, .max_key = 1L << 19, .buckets = 1024, .iters = 10, .warmup = 1};
    const nas_opt_t opts[] = {
        {"--keys", "N", &o->keys, 1, "keys per rank, 256 to 2^28 (default 1048576)"},
        {"--max-key", "K", &o->max_key, 1, "keys in [0, K), 128 to 2^30 (default 524288)"},
        {"--buckets", "B", &o->buckets, 1, "buckets, B dividing K (default 1024)"},
        {"--iters", "I", &o->iters, 1, "timed iterations, 1 to 64 (default 10)"},
        {"--warmup", "W", &o->warmup, 0,
         "untimed iterations first, 0 or 1 (default 1: NAS IS's untimed first ranking)"}};
    const nas_cmd_t cmd = {"mln-nas-is",
                           "an integer sort in the style of NAS IS: MPI_Allreduce of a bucket "
                           "histogram, MPI_Alltoall, MPI_Alltoallv of the keys, verified",
                           opts, (int)(sizeof(opts) / sizeof(opts[0]))};
    const char *bad = nas_parse(argc, argv, &cmd, &o->c);

    if (bad != NULL)
        return usage(bad);
    if (o->c.help) {
        if (rank == 0)
            nas_help(&cmd);
        return 0;
    }
    if (o->keys < 4 * ITER_MAX || o->keys > (1L << 28))
        return usage("--keys must be 256 to 2^28");
    if (o->max_key < 2 * ITER_MAX || o->max_key > (1L << 30) || o->buckets > o->max_key ||
        o->max_key % o->buckets != 0)
        return usage("--max-key must be 128 to 2^30 and a multiple of --buckets");
    if (o->iters > ITER_MAX)
        return usage("--iters is at most 64");
    if (o->warmup > 1)
        return usage("--warmup is 0 or 1");
    if (nas_split(&o->c, size) < 0)
        return usage("--split must leave the second site a rank (below the rank count)");
    return nas_result_probe(&o->c, "mln-nas-is");
}

/* Mkeys/s of a run that took `total` seconds. */
static double is_rate(const is_opts_t *o, double total)
{
    return total > 0 ? (double)o->keys * size * (double)o->iters / total / 1e6 : 0.0;
}

/* The JSON result (with --json): 0 or 3. */
static int report(const is_opts_t *o, const double tmax[PH_N], double total, uint64_t cross,
                  int verified, int argc, char **argv)
{
    double values[M_N];
    nas_result_t r = {.benchmark = "nas-is",
                      .metrics = is_metrics,
                      .values = values,
                      .nmetrics = M_N,
                      .cross_bytes = cross,
                      .problem_bytes = (uint64_t)o->keys * (uint64_t)size * sizeof(int),
                      .iters = o->iters,
                      .verified = verified};

    values[M_TOTAL] = total;
    for (int p = 0; p < PH_N; p++)
        values[M_TOTAL + 1 + p] = tmax[p];
    values[M_RATE] = is_rate(o, total);
    nas_result_param(&r, "keys", o->keys);
    nas_result_param(&r, "max_key", o->max_key);
    nas_result_param(&r, "buckets", o->buckets);
    nas_result_param(&r, "iters", o->iters);
    nas_result_param(&r, "warmup_iters", o->warmup); /* untimed (not the harness's warmup) */
    return nas_result_write(&r, &o->c, "mln-nas-is", argc, argv);
}

/* count, sum, sum of squares of n keys (mod 2^64), added into acc[3] */
static void digest(const int *k, long n, uint64_t acc[3])
{
    for (long i = 0; i < n; i++) {
        acc[0]++;
        acc[1] += (uint64_t)k[i];
        acc[2] += (uint64_t)k[i] * (uint64_t)k[i];
    }
}

int main(int argc, char **argv)
{
    is_opts_t o;
    int *keys = NULL, *out = NULL, *scounts = NULL, *rcounts = NULL, *sdispl = NULL, *rdispl = NULL;
    long *lcount = NULL, *gcount = NULL, *lo_bucket = NULL, *work = NULL, nout = 0;
    double times[PH_N] = {0}, scratch[PH_N] = {0}, tmax[PH_N] = {0}, total = 0;
    uint64_t in[3] = {0}, got[3] = {0}, in_all[3], got_all[3], seed, cross = 0, cross_all = 0;
    int rc = 0, bad = 0, bad_all = 0, split;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if ((rc = parse(argc, argv, &o)) != 0 || o.c.help)
        goto done;
    split = nas_split(&o.c, size);
    keys = malloc((size_t)o.keys * sizeof(*keys));
    /* the keys grouped to send, then every key of the run at most (one rank may take all) */
    out = malloc((size_t)o.keys * ((size_t)size + 1) * sizeof(*out));
    lcount = calloc((size_t)o.buckets, sizeof(*lcount));
    gcount = malloc((size_t)o.buckets * sizeof(*gcount));
    lo_bucket = malloc(((size_t)size + 1) * sizeof(*lo_bucket));
    work = malloc((size_t)o.max_key * sizeof(*work));
    scounts = malloc(4 * (size_t)size * sizeof(int));
    if (!keys || !out || !lcount || !gcount || !lo_bucket || !work || !scounts) {
        fprintf(stderr, "mln-nas-is: rank %d: out of memory\n", rank);
        rc = 2;
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    rcounts = scounts + size;
    sdispl = rcounts + size;
    rdispl = sdispl + size;
    seed = 314159265u + 1000003u * (uint64_t)rank;
    for (long i = 0; i < o.keys; i++) {
        uint64_t sum = 0;
        for (int d = 0; d < 4; d++)
            sum += splitmix(&seed) % (uint64_t)o.max_key;
        keys[i] = (int)(sum / 4);
    }
    const long width = o.max_key / o.buckets;

    /* iteration 0: the untimed warm-up (NAS IS ranks the first iteration's keys once
     * untimed); its times and bytes are not counted */
    for (long it = o.warmup ? 0 : 1; it <= o.iters; it++) {
        double t0, *t = it > 0 ? times : scratch;
        long acc = 0, need, r = 0;
        const long kit = it > 0 ? it : 1;

        if (rank == 0) { /* NAS IS: two keys change before each ranking */
            keys[kit] = (int)kit;
            keys[kit + ITER_MAX] = (int)(o.max_key - kit);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        /* 1-2: the global histogram */
        t0 = MPI_Wtime();
        memset(lcount, 0, (size_t)o.buckets * sizeof(*lcount));
        for (long i = 0; i < o.keys; i++)
            lcount[keys[i] / width]++;
        MPI_Allreduce(lcount, gcount, (int)o.buckets, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        t[PH_ALLREDUCE] += MPI_Wtime() - t0;
        /* 3: rank r takes buckets [lo_bucket[r], lo_bucket[r + 1]), about total / P keys */
        need = (o.keys * size + size - 1) / size;
        lo_bucket[0] = 0;
        for (long b = 0; b < o.buckets; b++) {
            acc += gcount[b];
            while (r + 1 < size && acc >= need * (r + 1))
                lo_bucket[++r] = b + 1;
        }
        while (r + 1 <= size)
            lo_bucket[++r] = o.buckets;
        /* 4: counts, then the keys, grouped by destination (a counting pass over buckets) */
        t0 = MPI_Wtime();
        for (int d = 0; d < size; d++) {
            long c = 0;
            for (long b = lo_bucket[d]; b < lo_bucket[d + 1]; b++)
                c += lcount[b];
            scounts[d] = (int)c;
            sdispl[d] = d ? sdispl[d - 1] + scounts[d - 1] : 0;
            if (it > 0 && (d >= split) != (rank >= split)) /* count and keys cross the sites */
                cross += (uint64_t)(c + 1) * sizeof(int);
        }
        MPI_Alltoall(scounts, 1, MPI_INT, rcounts, 1, MPI_INT, MPI_COMM_WORLD);
        t[PH_ALLTOALL] += MPI_Wtime() - t0;
        {
            int *grouped = out;        /* scratch: the keys in destination order, then sent */
            int *recvd = out + o.keys; /* room for every key of the run */
            long *fill = work;         /* per bucket: the next slot */
            long pos = 0;

            for (long b = 0; b < o.buckets; b++) {
                fill[b] = pos;
                pos += lcount[b];
            }
            for (long i = 0; i < o.keys; i++)
                grouped[fill[keys[i] / width]++] = keys[i];
            nout = 0;
            for (int d = 0; d < size; d++) {
                rdispl[d] = (int)nout;
                nout += rcounts[d];
            }
            t0 = MPI_Wtime();
            MPI_Alltoallv(grouped, scounts, sdispl, MPI_INT, recvd, rcounts, rdispl, MPI_INT,
                          MPI_COMM_WORLD);
            t[PH_ALLTOALLV] += MPI_Wtime() - t0;
            /* 5: counting sort of this rank's key range into out[0..nout) */
            t0 = MPI_Wtime();
            {
                const long klo = lo_bucket[rank] * width, khi = lo_bucket[rank + 1] * width;
                long *cnt = work, at = 0;

                memset(cnt, 0, (size_t)(khi - klo) * sizeof(*cnt));
                for (long i = 0; i < nout; i++) {
                    if (recvd[i] < klo || recvd[i] >= khi) {
                        bad = 1; /* a key outside this rank's range */
                        continue;
                    }
                    cnt[recvd[i] - klo]++;
                }
                for (long k = 0; k < khi - klo; k++)
                    for (long c = 0; c < cnt[k]; c++)
                        out[at++] = (int)(klo + k);
                nout = at;
            }
            t[PH_SORT] += MPI_Wtime() - t0;
        }
    }
    if (o.c.inject == rank && nout > 0)
        out[nout / 2] = out[nout / 2] == 0 ? 1 : out[nout / 2] - 1; /* a wrong key */
    /* verification: sorted, in order across ranks, the same keys */
    digest(keys, o.keys, in);
    digest(out, nout, got);
    for (long i = 1; i < nout; i++)
        bad |= out[i - 1] > out[i];
    {
        int mine[2] = {nout ? out[0] : -1, nout ? out[nout - 1] : -1}, prev[2] = {-1, -1};
        int left = rank ? rank - 1 : MPI_PROC_NULL,
            right = rank + 1 < size ? rank + 1 : MPI_PROC_NULL;

        /* the last key of the rank below (one without keys: no check across it) */
        MPI_Sendrecv(mine, 2, MPI_INT, right, 7, prev, 2, MPI_INT, left, 7, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        bad |= nout && prev[1] >= 0 && prev[1] > mine[0];
    }
    MPI_Allreduce(in, in_all, 3, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(got, got_all, 3, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&bad, &bad_all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Reduce(times, tmax, PH_N, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&cross, &cross_all, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    if (memcmp(in_all, got_all, sizeof(in_all)) != 0)
        bad_all = 1;
    if (rank == 0) {
        for (int p = 0; p < PH_N; p++)
            total += tmax[p];
        printf("mln-nas-is: %d ranks, %ld keys per rank in [0, %ld), %ld buckets, %ld iterations\n",
               size, o.keys, o.max_key, o.buckets, o.iters);
        for (int p = 0; p < PH_N; p++)
            printf("mln-nas-is: %-9s %10.6f s\n", phase_name[p], tmax[p]);
        printf("mln-nas-is: total     %10.6f s, %.2f Mkeys/s\n", total, is_rate(&o, total));
        printf("mln-nas-is: %s\n",
               bad_all ? "FAILED: the output is not the input sorted" : "verified");
    }
    rc = report(&o, tmax, total, cross_all, !bad_all, argc, argv);
    rc = bad_all ? 1 : rc;
done:
    free(keys);
    free(out);
    free(lcount);
    free(gcount);
    free(lo_bucket);
    free(work);
    free(scounts);
    MPI_Finalize();
    return rc;
}
