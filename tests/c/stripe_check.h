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
    const char *progress; /* MLN_STRIPE_PROGRESS: call or thread */
    int lanes, helpers, local, stripe_timeout, watchdog;
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
void *xmalloc(int64_t n);
int expect(tctx_t *t, mln_status_t got, mln_status_t want, const char *what);
int check_status(tctx_t *t, const MPI_Status *st, int src, int tag, int64_t bytes,
                 const char *what);
void recv_check(tctx_t *t, int64_t n, int64_t cap, int src, int tag, int msg, const char *what);
void send_all(tctx_t *t, int dest, int count, const int64_t *sizes, const int *tags, int msg0);
/* Runs body with rank 0 of each pair sending, then with rank 1 sending. */
void both_directions(tctx_t *t, void (*body)(tctx_t *, int sender));

/* The edge sub-tests (mpi_stripe_edges.c). */
void t_args(tctx_t *t);
void t_big(tctx_t *t);
void t_fault(tctx_t *t);

#endif /* MLN_STRIPE_CHECK_H */
