/*
 * mpi_stripe_diff.c - differential test of striped point-to-point: one seeded random sequence of
 * operations through mln_stripe_* and through plain MPI on twin communicators, compared on every
 * rank (received bytes, statuses, return codes, matching order).  diff.h says how.
 *
 *   mpi_stripe_diff [--backend tcp|mpi|helper] [--lanes N] [--helpers K] [--local 0|1]
 *                   [--threshold SIZE] [--progress call|thread] [--stripe-timeout S]
 *                   [--watchdog S] [--seed N] [--ops N | --duration S] [--max-size SIZE]
 *                   [--round-ops N] [--round-bytes SIZE] [--comms N] [--trunc-prob P]
 *                   [--trunc-max SIZE] [--self-prob P] [--big-prob P] [--big-size SIZE]
 *                   [--burst-prob P] [--burst N] [--gap-prob P] [--gap-seconds S]
 *                   [--gap-total S] [--report N] [--keep-going 0|1] [--self-check 0|1]
 *                   [--dump ROUND] [--first-round ROUND]
 *
 * Rank 0 draws the seed unless --seed gives it, prints "seed=N" and a command line that
 * reproduces the run; every rank derives the same rounds from it.  Every round runs under the
 * watchdog (--watchdog seconds): a hang prints "FAIL ... seed=N" and ends the job.  A mismatch
 * prints "MISMATCH rank R, seed=N round I (kind): what differed" (the first --report of each
 * rank); the run stops after the round unless --keep-going 1.  The last line is the summary:
 * "mpi_stripe_diff: seed=N rounds=R ops=O bytes=B duration=T s mismatches=M: PASS|FAIL"; the
 * exit status is 1 on any mismatch.  --ops counts the messages run (at most 100000; a burst
 * round alone has 65545).  --self-check 1 runs MPI on both sides: it tests the test
 * (the schedule, its model of MPI's matching, the comparison), and must always pass.  --dump R
 * prints round R's schedule (rank 0); --first-round R skips the rounds before R (they are drawn,
 * not run), so that a failing round of a long run is reproduced at once.  With
 * --duration it runs that long (a soak), printing a progress line every 30 s.
 */
#include "diff.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROG "mpi_stripe_diff"

typedef struct diff_options {
    options_t stripe;
    uint64_t seed;
    int ops, comms, round_ops, burst, report, keep_going, self_check, dump, first_round;
    double duration, big_prob, burst_prob, gap_prob, gap_seconds, gap_total, trunc_prob, self_prob;
    const char *max_size, *big_size, *round_bytes, *trunc_max;
} diff_options_t;

static int usage(const char *why, int verbose)
{
    if (verbose)
        fprintf(stderr,
                PROG ": %s\nusage: " PROG " [--backend tcp|mpi|helper] [--lanes N] [--helpers K] "
                     "[--local 0|1] [--threshold SIZE] [--progress call|thread] "
                     "[--stripe-timeout S] [--watchdog S] [--seed N] [--ops N | --duration S] "
                     "[--max-size SIZE] [--round-ops N] [--round-bytes SIZE] [--comms 1-4] "
                     "[--trunc-prob P] [--self-prob P] [--big-prob P] [--big-size SIZE] "
                     "[--burst-prob P] [--burst N] [--gap-prob P] [--gap-seconds S] "
                     "[--gap-total S] [--report N] [--keep-going 0|1] [--self-check 0|1] [--dump "
                     "ROUND] [--first-round ROUND]\n",
                why);
    return 2;
}

/* A probability (0..1) or seconds (>= 0): 0 on success. */
static int parse_real(const char *text, double max, double *out)
{
    char *end;
    double v = strtod(text, &end);

    if (*end || end == text || !(v >= 0 && v <= max))
        return -1;
    *out = v;
    return 0;
}

static int parse_options(int argc, char **argv, int verbose, diff_options_t *o)
{
    const struct {
        const char *name;
        double max, *val;
    } reals[] = {{"--duration", 1e7, &o->duration},        {"--big-prob", 1, &o->big_prob},
                 {"--burst-prob", 1, &o->burst_prob},      {"--gap-prob", 1, &o->gap_prob},
                 {"--gap-seconds", 3600, &o->gap_seconds}, {"--gap-total", 1e7, &o->gap_total},
                 {"--trunc-prob", 1, &o->trunc_prob},      {"--self-prob", 1, &o->self_prob}};
    const struct {
        const char *name;
        int *val;
    } ints[] = {{"--ops", &o->ops},
                {"--comms", &o->comms},
                {"--round-ops", &o->round_ops},
                {"--burst", &o->burst},
                {"--report", &o->report},
                {"--keep-going", &o->keep_going},
                {"--self-check", &o->self_check},
                {"--dump", &o->dump},
                {"--first-round", &o->first_round}};
    const char *why;
    uint64_t thr;

    stripe_options_init(&o->stripe);
    o->stripe.stripe_timeout = 2;
    *o = (diff_options_t){.stripe = o->stripe,
                          .ops = 300,
                          .comms = 3,
                          .round_ops = 16,
                          .burst = 65528,
                          .report = 10,
                          .dump = -1,
                          .gap_prob = 0.05,
                          .gap_seconds = -1,
                          .gap_total = -1,
                          .trunc_prob = 0.05,
                          .self_prob = 0.03,
                          .max_size = "4M",
                          .big_size = "2147487744", /* 2^31 + 4096 */
                          .round_bytes = "64M",
                          .trunc_max = "4K"};
    for (int i = 1; i < argc; i += 2) {
        const char *name = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int taken = 0;
        if (val == NULL)
            return usage("an option without its value", verbose);
        if ((taken = stripe_option(&o->stripe, name, val)) < 0)
            return usage("a bad number", verbose);
        for (size_t k = 0; !taken && k < sizeof(reals) / sizeof(reals[0]); k++)
            if (!strcmp(name, reals[k].name) &&
                (taken = parse_real(val, reals[k].max, reals[k].val) ? -1 : 1) < 0)
                return usage("a bad number", verbose);
        for (size_t k = 0; !taken && k < sizeof(ints) / sizeof(ints[0]); k++)
            if (!strcmp(name, ints[k].name) && (taken = parse_count(val, ints[k].val) ? -1 : 1) < 0)
                return usage("a bad number", verbose);
        if (taken)
            continue;
        if (!strcmp(name, "--seed"))
            o->seed = strtoull(val, NULL, 10);
        else if (!strcmp(name, "--max-size"))
            o->max_size = val;
        else if (!strcmp(name, "--big-size"))
            o->big_size = val;
        else if (!strcmp(name, "--round-bytes"))
            o->round_bytes = val;
        else if (!strcmp(name, "--trunc-max"))
            o->trunc_max = val;
        else
            return usage("unknown option", verbose);
    }
    if ((why = stripe_options_check(&o->stripe, &thr)) != NULL)
        return usage(why, verbose);
    if (o->comms < 1 || o->comms > DIFF_MAX_COMMS || o->round_ops < 1 || o->round_ops > 200)
        return usage("--comms is 1 to 4, --round-ops 1 to 200", verbose);
    if (o->gap_seconds < 0)
        o->gap_seconds = o->stripe.stripe_timeout + 1.0;
    if (o->gap_total < 0)
        o->gap_total = 2 * o->gap_seconds;
    return 0;
}

/* The schedule's parameters from the options (sizes parsed: 0 on success). */
static int make_params(const diff_options_t *o, int size, int tag_ub, diff_params_t *p)
{
    uint64_t thr = 0, max = 0, big = 0, round = 0, trunc = 0;
    const int tags[DIFF_NTAGS] = {0, 1, 2, 3, 77, tag_ub};

    if (mln_parse_size(o->stripe.threshold, &thr) != MLN_OK ||
        mln_parse_size(o->max_size, &max) != MLN_OK ||
        mln_parse_size(o->big_size, &big) != MLN_OK ||
        mln_parse_size(o->round_bytes, &round) != MLN_OK ||
        mln_parse_size(o->trunc_max, &trunc) != MLN_OK)
        return -1;
    *p = (diff_params_t){.seed = o->seed,
                         .size = size,
                         .ncomms = o->comms,
                         .round_ops = o->round_ops,
                         .burst = o->burst,
                         .thr = (int64_t)thr,
                         .max_size = (int64_t)max,
                         .big_size = (int64_t)big,
                         .round_bytes = (int64_t)round,
                         .trunc_max = (int64_t)trunc,
                         .big_prob = o->big_prob,
                         .burst_prob = o->burst_prob,
                         .gap_prob = o->gap_prob,
                         .gap_seconds = o->gap_seconds,
                         .trunc_prob = o->trunc_prob,
                         .self_prob = o->self_prob};
    memcpy(p->tags, tags, sizeof(tags));
    return 0;
}

/* Rank 0: the header, with the seed and a command line that reproduces the run. */
static void print_header(const diff_ctx_t *c, const diff_options_t *o, int argc, char **argv,
                         int world_size)
{
    printf("# " PROG ": backend %s, %d lanes, %d application ranks of %d, threshold %lld, local "
           "%d, %d comms, stripe timeout %d s, gaps %.1f s (at most %.1f s per rank)\n",
           mln_stripe_backend_name(), mln_stripe_lanes(), c->size, world_size,
           (long long)c->params.thr, o->stripe.local, o->comms, o->stripe.stripe_timeout,
           o->gap_seconds, o->gap_total);
    printf("seed=%llu\n# reproduce: mpiexec -n %d %s", (unsigned long long)c->params.seed,
           world_size, argv[0]);
    for (int i = 1; i + 1 < argc; i += 2)
        if (strcmp(argv[i], "--seed") != 0)
            printf(" %s %s", argv[i], argv[i + 1]);
    printf(" --seed %llu\n", (unsigned long long)c->params.seed);
    fflush(stdout);
}

/* A seed from the clock and the process id (never 0: 0 asks for one). */
static uint64_t draw_seed(void)
{
    struct timespec ts;
    diff_rng_t g;

    clock_gettime(CLOCK_REALTIME, &ts);
    g.s = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
    return (rng_next(&g) % 1000000000000ull) + 1;
}

/* One round: the twin, then the striped side, then the comparison; mismatches counted in c. */
static void run_round(diff_ctx_t *c, MPI_Comm app, const MPI_Comm *striped, const MPI_Comm *twin,
                      const diff_round_t *r, int self_check)
{
    uint8_t **sendbufs = diff_send_buffers(c, r);
    diff_side_t mpi = {.api = &diff_api_mpi}, mln = {.api = &diff_api_mln, .gaps = 1};

    if (self_check) /* the test against itself: MPI on both sides */
        mln.api = &diff_api_mpi;

    memcpy(mpi.comm, twin, sizeof(mpi.comm));
    memcpy(mln.comm, striped, sizeof(mln.comm));
    diff_side_alloc(c, r, &mpi);
    diff_exec_round(c, r, sendbufs, &mpi);
    MPI_Barrier(app);
    diff_side_alloc(c, r, &mln);
    diff_exec_round(c, r, sendbufs, &mln);
    diff_compare_round(c, r, &mln, &mpi);
    diff_side_free(r, &mln);
    diff_side_free(r, &mpi);
    diff_buffers_free(sendbufs, r->nmsg);
}

int main(int argc, char **argv)
{
    diff_options_t o;
    diff_ctx_t c = {.report = 10};
    diff_state_t st = {.next_id = 1};
    tctx_t t = {.prog = PROG};
    MPI_Comm app, striped[DIFF_MAX_COMMS], twin[DIFF_MAX_COMMS];
    int world_rank, world_size, *tag_ub = NULL, flag = 0, round = 0, stop = 0;
    long long ops = 0, bytes = 0, total[2] = {0, 0}, mine_total;
    double t0, last_print;
    char where[128];

    world_rank = stripe_mpi_init(&argc, &argv, PROG);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    if (parse_options(argc, argv, world_rank == 0, &o) != 0 ||
        stripe_tunables_set(&o.stripe, NULL) != 0) {
        MPI_Finalize();
        return 2;
    }
    stripe_mln_init(world_rank);
    app = mln_comm_world();
    MPI_Comm_rank(app, &c.rank);
    MPI_Comm_size(app, &c.size);
    t.rank = c.rank;
    t.comm = app;
    if (c.size < 2) {
        if (c.rank == 0)
            printf(PROG ": 1 application rank: nothing to test\n");
        return finalize_checked(&t);
    }
    if (c.rank == 0 && o.seed == 0)
        o.seed = draw_seed();
    MPI_Bcast(&o.seed, 1, MPI_UINT64_T, 0, app);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
    if (make_params(&o, c.size, flag ? *tag_ub : 32767, &c.params) != 0) {
        if (c.rank == 0)
            usage("a bad size (--max-size, --big-size, --round-bytes, --trunc-max)", 1);
        finalize_checked(&t);
        return 2;
    }
    c.report = o.report;
    c.where = where;
    MPI_Comm_dup(MPI_COMM_SELF, &c.self);
    diff_types_create(&c.types);
    for (int k = 0; k < o.comms; k++) { /* the striped side uses mln_comm_world() itself too */
        if (k == 0)
            striped[k] = app;
        else
            MPI_Comm_dup(app, &striped[k]);
        MPI_Comm_dup(app, &twin[k]);
        MPI_Comm_set_errhandler(striped[k], MPI_ERRORS_RETURN); /* truncation: docs/STRIPE.md */
        MPI_Comm_set_errhandler(twin[k], MPI_ERRORS_RETURN);
    }
    /* MPI_Waitall's MPI_ERR_IN_STATUS goes to MPI_COMM_WORLD's (or SELF's) handler in MPICH */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    st.gap_left = malloc(sizeof(double) * (size_t)c.size);
    for (int k = 0; k < c.size; k++)
        st.gap_left[k] = o.gap_total;
    if (c.rank == 0)
        print_header(&c, &o, argc, argv, world_size);
    t0 = last_print = MPI_Wtime();
    for (round = 0; !stop; round++) {
        diff_round_t r;
        long long mine[2] = {0, 0};

        diff_plan_round(&c.params, &st, round, &r);
        if (round < o.first_round) { /* drawn (ids, gap budget), not run */
            diff_round_free(&r, c.size);
            continue;
        }
        if (c.rank == 0 && round == o.dump)
            diff_round_print(&r, c.size, stdout);
        snprintf(where, sizeof(where), "seed=%llu round %d (%s)", (unsigned long long)o.seed, round,
                 diff_round_kind_name(r.kind));
        watchdog_arm((unsigned)o.stripe.watchdog,
                     "FAIL " PROG ": rank %d: %s not done within %d s (hang; --watchdog); "
                     "reproduce with --seed %llu\n",
                     c.rank, where, o.stripe.watchdog, (unsigned long long)o.seed);
        mine[0] = c.mismatches;
        run_round(&c, app, striped, twin, &r, o.self_check);
        mine[0] = c.mismatches - mine[0];
        ops += r.nmsg;
        bytes += r.bytes;
        mine[1] = c.rank == 0 && (o.duration > 0 ? MPI_Wtime() - t0 >= o.duration : ops >= o.ops);
        MPI_Allreduce(mine, total, 2, MPI_LONG_LONG, MPI_SUM, app);
        alarm(0);
        stop = total[1] > 0 || (total[0] > 0 && !o.keep_going);
        diff_round_free(&r, c.size);
        if (c.rank == 0 && MPI_Wtime() - last_print >= 30) {
            last_print = MPI_Wtime();
            printf("# progress: %.0f s, %d rounds, %lld ops, %.1f MB\n", last_print - t0, round + 1,
                   ops, (double)bytes / 1e6);
            fflush(stdout);
        }
    }
    mine_total = (long long)c.mismatches;
    MPI_Allreduce(&mine_total, &total[0], 1, MPI_LONG_LONG, MPI_SUM, app);
    if (c.rank == 0)
        printf(PROG ": seed=%llu rounds=%d ops=%lld bytes=%lld duration=%.1f s mismatches=%lld: "
                    "%s\n",
               (unsigned long long)o.seed, round, ops, bytes, MPI_Wtime() - t0, total[0],
               total[0] ? "FAIL" : "PASS");
    fflush(stdout);
    for (int k = 0; k < o.comms; k++) {
        if (k > 0)
            MPI_Comm_free(&striped[k]);
        MPI_Comm_free(&twin[k]);
    }
    diff_types_free(&c.types);
    MPI_Comm_free(&c.self);
    free(st.gap_left);
    return finalize_checked(&t) || total[0] ? 1 : 0;
}
