/*
 * nas_result.h - the result of a NAS-style kernel (mln-nas-is, -mg, -lu) as the project's
 * JSON document (result.h: schema multilane-result, data_version 1, with the provenance every
 * benchmark carries), written with --json FILE.  docs/METRICS.md (nas) defines every item.
 *
 * One timed run makes one row:
 *   bytes          the bytes one iteration sent from a rank of one site to a rank of the
 *                  other (ranks below --split and the others), as the kernel counts its own
 *                  messages (the mean over the iterations, rounded down): what must cross the
 *                  WAN, which the CLI checks against the delay line's counters
 *   iters          the timed iterations (MG: V-cycles)
 *   errors         0, or 1 when the verification failed (status "fail")
 *   problem_bytes  the problem's data (IS: every key; MG, LU: the grid of doubles)
 *   the metrics    each the run's value (one run: _min and _max are the value itself)
 * params: the kernel's sizes, `split`, `reps` 1, `warmup` 0, `verified` (true or false) and
 * `inject_error` when given.
 */
#ifndef MLN_NAS_RESULT_H
#define MLN_NAS_RESULT_H

#include "nas_opts.h"
#include "result.h"

#include <stdint.h>

#define NAS_MAX_METRICS 8

typedef struct nas_result {
    const char *benchmark;             /* "nas-is" */
    const mln_bench_metric_t *metrics; /* nmetrics (<= NAS_MAX_METRICS) definitions */
    const double *values;              /* their values (rank 0) */
    int nmetrics;
    uint64_t cross_bytes;   /* sent between the sites over the timed run (rank 0: all ranks) */
    uint64_t problem_bytes; /* the problem's data */
    long iters;             /* timed iterations or V-cycles */
    int verified;           /* 1: the result is right */
    mln_kv_list_t params;   /* the kernel's own (nas_result_param); freed by nas_result_write */
    int nomem;              /* a parameter could not be stored (nas_result_write says so) */
} nas_result_t;

/* Rank 0 checks that --json's FILE can be written, and every rank learns the answer
 * (MPI_Bcast): 0, or 2 (a usage error) with one line on stderr.  Collective. */
int nas_result_probe(const nas_common_t *c, const char *prog);

/* Adds the kernel's parameter KEY = VALUE (an integer) to r->params (no memory: r->nomem). */
void nas_result_param(nas_result_t *r, const char *key, long value);

/* With --json: gathers the provenance (every rank: the host names go to rank 0), then rank 0
 * writes the document to FILE (PATH.tmp, renamed).  Collective; 0, or 3 with one line on
 * stderr (no memory, the file could not be written). */
int nas_result_write(nas_result_t *r, const nas_common_t *c, const char *prog, int argc,
                     char **argv);

#endif /* MLN_NAS_RESULT_H */
