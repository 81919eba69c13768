/*
 * harness_util.h - the MPI-free parts of the benchmark harness: message-size specs, iteration
 * scaling, statistics over repetitions and the data pattern used for validation.  Unit-tested
 * by tests/c/test_harness.c.  Definitions of the rules: docs/METRICS.md.
 */
#ifndef MLN_HARNESS_UTIL_H
#define MLN_HARNESS_UTIL_H

#include "multilane.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Largest message the harness accepts: MPI counts are C ints. */
#define MLN_BENCH_MAX_BYTES ((uint64_t)2147483647)
/* Most sizes one spec may produce. */
#define MLN_BENCH_MAX_SIZES 1024

/* ---- message sizes -------------------------------------------------------------------- */

/* An ascending list of distinct message sizes in bytes. */
typedef struct mln_size_list {
    uint64_t *sizes;
    size_t count;
} mln_size_list_t;

/*
 * Parses a size spec into an ascending, duplicate-free list.  A spec is a comma list of items;
 * an item is a size ("4096", "4K", "64M": binary suffixes, see mln_parse_size) or a range
 * "LO:HI" = LO, 2*LO, 4*LO, ... up to HI inclusive (LO = 0 gives 0, 1, 2, 4, ...).  Rejects
 * empty items, LO > HI, sizes above MLN_BENCH_MAX_BYTES and junk with MLN_ERR_ARG and one line
 * in `err` (without a prefix: the caller names the option).  `out` is written only on success;
 * free it with mln_size_list_free.
 */
mln_status_t mln_size_list_parse(const char *spec, mln_size_list_t *out, char *err, size_t errlen);
void mln_size_list_free(mln_size_list_t *list);

/* ---- iteration scaling ------------------------------------------------------------------ */

typedef struct mln_iter_rule {
    int64_t min_iters;     /* at least this many timed iterations per repetition */
    int64_t max_iters;     /* at most this many */
    uint64_t budget_bytes; /* aim: iterations * message bytes ~ budget */
    int64_t warmup;        /* warm-up iterations per repetition; < 0: max(1, iters / 10) */
} mln_iter_rule_t;

#define MLN_ITER_DEFAULT_MIN 5
#define MLN_ITER_DEFAULT_MAX 1000
#define MLN_ITER_DEFAULT_BUDGET ((uint64_t)1 << 20)

/* Defaults: min 5, max 1000, budget 1 MiB, automatic warm-up. */
void mln_iter_rule_default(mln_iter_rule_t *rule);
/* clamp(budget / max(bytes, 1), min_iters, max_iters); never below 1. */
int64_t mln_iter_count(const mln_iter_rule_t *rule, uint64_t bytes);
/* rule->warmup when >= 0, else max(1, iters / 10). */
int64_t mln_iter_warmup(const mln_iter_rule_t *rule, int64_t iters);

/* ---- statistics ------------------------------------------------------------------------- */

typedef struct mln_stats {
    double median; /* middle value; mean of the two middle values for an even count */
    double min;
    double max;
} mln_stats_t;

/* Statistics of v[0..n-1] (n >= 1); `v` is not modified. */
mln_status_t mln_stats_compute(const double *v, size_t n, mln_stats_t *out);

/* ---- data pattern ----------------------------------------------------------------------- */

/* Seed of one message: the sending rank, the repetition, the message size and its slot. */
uint64_t mln_pattern_seed(int rank, int rep, uint64_t bytes, int slot);
/* Fills buf[0..bytes) with a pattern that depends on the byte offset and on `seed`. */
void mln_pattern_fill(void *buf, size_t bytes, uint64_t seed);
/* Number of bytes of buf[0..bytes) that differ from the pattern of `seed` (0 = intact). */
uint64_t mln_pattern_check(const void *buf, size_t bytes, uint64_t seed);

/* ---- output helpers -------------------------------------------------------------------- */

/* (mln_json_write_string, for strings, is in multilane_base.h.) */
/* Writes `v` with 9 significant digits; NaN and infinities (not JSON) are written as 0. */
void mln_json_write_number(FILE *fp, double v);
/* --help's text of an option: from column 25, wrapped at spaces before column 100; a newline
 * at the end. */
void mln_help_text(FILE *fp, const char *text);
/* argv joined by spaces, each argument quoted for a POSIX shell where needed; free() it. */
char *mln_command_line(int argc, char *const *argv);

#endif /* MLN_HARNESS_UTIL_H */
