/*
 * stripe_check.h - what the striped point-to-point tests (mpi_stripe.c) share: the options,
 * the per-rank test context, the data pattern and the checks on data and statuses.  The
 * broadcast test (mpi_bcast.c) reuses the context, the pattern and the data checks.
 */
#ifndef MLN_STRIPE_CHECK_H
#define MLN_STRIPE_CHECK_H

#include "multilane.h"

#include <stdint.h>

#define KIB ((int64_t)1024)
#define MIB (1024 * KIB)
#define WHY_LEN 320

typedef struct options {
    const char *backend;
    const char *tests;
    const char *fault;
    const char *threshold;
    const char *progress;                                /* MLN_STRIPE_PROGRESS: call or thread */
    int lanes, helpers, local, stripe_timeout, watchdog; /* lanes 0: --lanes auto */
    int lanes_max;                                       /* MLN_STRIPE_LANES_MAX (--lanes-max) */
    int tags;          /* MLN_STRIPE_TAGS (0: all of MPI_TAG_UB) */
    int fault_rank;    /* the world rank that gets MLN_STRIPE_FAULT */
    int fault_set;     /* --fault was given */
    const char *early; /* --early SIZE: MLN_STRIPE_EARLY on world rank early_rank only */
    int early_rank;
    int stripe_port;   /* --stripe-port P: MLN_STRIPE_PORT (0: not set, a free port) */
    const char *until; /* --until FILE: the stranger sub-test runs until FILE exists */
} options_t;

typedef struct tctx {
    const options_t *opt;
    MPI_Comm comm;
    int rank, size, partner; /* partner: rank ^ 1, or -1 for the odd one out */
    int64_t thr;             /* MLN_STRIPE_THRESHOLD in bytes */
    int tag;                 /* first tag of the running sub-test */
    int ok;
    char why[WHY_LEN];
    const char *prog; /* the program named in stderr lines; NULL: mpi_stripe */
} tctx_t;

/* Byte `off` of message `msg` from `sender`: every payload byte is checked against it. */
static inline uint8_t pat(int sender, int msg, uint64_t off)
{
    return (uint8_t)(off * 7u + (off >> 9) * 3u + (off >> 17) * 5u + (off >> 25) * 11u +
                     (uint64_t)msg * 29u + (uint64_t)sender * 113u + 1u);
}

/* Records the sub-test's first failure (and prints every one to stderr). */
void fail(tctx_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fill(uint8_t *buf, int64_t n, int sender, int msg);
/* 1 when buf holds the pattern; else records the first wrong offset and returns 0. */
int check(tctx_t *t, const uint8_t *buf, int64_t n, int sender, int msg, const char *what);
/* How many bytes of buf[0..n) are not message `msg` of `sender`; *first: the first (-1: none). */
int64_t pattern_wrong(const uint8_t *buf, int64_t n, int sender, int msg, int64_t *first);
void *xmalloc(int64_t n);
int expect(tctx_t *t, mln_status_t got, mln_status_t want, const char *what);
int check_status(tctx_t *t, const MPI_Status *st, int src, int tag, int64_t bytes,
                 const char *what);
void recv_check(tctx_t *t, int64_t n, int64_t cap, int src, int tag, int msg, const char *what);
void send_all(tctx_t *t, int dest, int count, const int64_t *sizes, const int *tags, int msg0);
/* Runs body with rank 0 of each pair sending, then with rank 1 sending. */
void both_directions(tctx_t *t, void (*body)(tctx_t *, int sender));

/* ---- the sub-test driver (mpi_stripe.c, mpi_bcast.c) --------------------------------------- */

/* SIGALRM ends the job with the armed "FAIL ... (hang)" line instead of letting it hang. */
void watchdog_install(void);
/* Arms the watchdog: after `limit` seconds it prints the formatted line and ends the process. */
void watchdog_arm(unsigned limit, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* 1 when `name` is in the comma-separated list, or the list says "all" and in_all is set. */
int list_has(const char *list, const char *name, int in_all);
/* 1 when every name in the list is "all" or name_of(i) for some i (NULL past the last). */
int list_known(const char *list, const char *(*name_of)(int index));
/* An option's number: decimal, 0 .. 100000; 0 on success, -1 otherwise. */
int parse_count(const char *text, int *out);
/* Starts sub-test `name` on every rank of t->comm: a fresh verdict, a barrier, the watchdog
 * armed for `limit` seconds.  Returns the start time for subtest_end. */
double subtest_begin(tctx_t *t, const char *name, unsigned limit);
/* Ends it: 1 when it passed on every rank; rank 0 prints "ok NAME (T s)" or
 * "FAIL NAME: rank R: why" (the first failing rank's reason). */
int subtest_end(tctx_t *t, const char *name, double t0);
/* mln_finalize and MPI_Finalize under a 60 s watchdog; returns 1 when mln_finalize failed. */
int finalize_checked(tctx_t *t);

/* ---- options and start-up of the striped tests (mpi_stripe.c, mpi_stripe_diff.c) --------------
 */

/* The defaults: backend tcp, 4 lanes, 1 helper, local 1, threshold 256K, timeout 10 s, ... */
void stripe_options_init(options_t *o);
/* Takes `name val` when it is one of --backend --threshold --progress --lanes --helpers --local
 * --stripe-timeout --stripe-port --watchdog --tags --fault-rank: 1 when taken, 0 when not one of
 * them, -1 for a bad value. */
int stripe_option(options_t *o, const char *name, const char *val);
/* NULL when the options make sense (then *threshold is the threshold in bytes), else why not. */
const char *stripe_options_check(const options_t *o, uint64_t *threshold);
/* Sets the MLN_STRIPE_* tunables from the options (and MLN_STRIPE_FAULT unless fault is NULL)
 * for mln_init to read; non-zero when setenv failed. */
int stripe_tunables_set(const options_t *o, const char *fault);
/* MPI_Init, or MPI_Init_thread(MPI_THREAD_MULTIPLE) when argv has --progress thread; returns
 * the rank in MPI_COMM_WORLD. */
int stripe_mpi_init(int *argc, char ***argv, const char *prog);
/* Installs the watchdog and calls mln_init; a failure prints "FAIL init" and aborts the job. */
void stripe_mln_init(int world_rank);

/* The edge sub-tests (mpi_stripe_edges.c). */
void t_args(tctx_t *t);
void t_big(tctx_t *t);
void t_fault(tctx_t *t);
/* A message of n bytes from rank 0 to rank 1 whose tcp lane fails (MLN_STRIPE_FAULT, or the
 * network): an error on both sides within MLN_STRIPE_TIMEOUT + 20 s, then 2 x 4 MiB both ways
 * whole; `what` names it in the lines printed. */
void lane_fault_run(tctx_t *t, const char *what, int64_t n);

/* The fault sub-tests run on the test bed (mpi_stripe_faults.c). */
void t_blackhole(tctx_t *t);
void t_kill(tctx_t *t);
void t_stranger(tctx_t *t);

/* The regression sub-tests of the code reading's findings (mpi_stripe_fixes.c). */
void t_bigplain(tctx_t *t);
void t_upto(tctx_t *t);
void t_gap(tctx_t *t);
void t_tags(tctx_t *t);
void t_rabort(tctx_t *t);
void t_sabort(tctx_t *t);
void t_nak(tctx_t *t);
void t_inline(tctx_t *t);
void t_listener(tctx_t *t);
void t_outeof(tctx_t *t);
void t_eintr(tctx_t *t);
void t_early(tctx_t *t);
void t_early_limit(tctx_t *t);
void t_nak_early(tctx_t *t);
void t_rabort_early(tctx_t *t);
void t_sabort_early(tctx_t *t);

/* Sub-tests between ranks 0 and 1 alone: at other sizes they say so and pass (1). */
int pair_only(tctx_t *t, const char *name);

#endif /* MLN_STRIPE_CHECK_H */
