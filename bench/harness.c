/*
 * harness.c - the benchmark harness: options, sweep, timing, validation, table and JSON.
 * Written once for every program in bench/ (STYLE.md 13-16); see harness.h for the loop
 * and docs/METRICS.md for the definitions.
 */
#include "harness_int.h"
#include "mln_core.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* ---- accessors for the hooks ------------------------------------------------------------ */

void *mln_bench_state(const mln_bench_t *b)
{
    return b->state;
}

MPI_Comm mln_bench_comm(const mln_bench_t *b)
{
    return b->comm;
}

int mln_bench_rank(const mln_bench_t *b)
{
    return b->rank;
}

int mln_bench_nranks(const mln_bench_t *b)
{
    return b->nranks;
}

uint64_t mln_bench_max_bytes(const mln_bench_t *b)
{
    return b->sizes.count ? b->sizes.sizes[b->sizes.count - 1] : 0;
}

double mln_bench_cpu_per_iter(const mln_bench_t *b, const char *name)
{
    for (size_t j = 0; b->cpu_iter != NULL && j < b->desc->ntests; j++)
        if (strcmp(b->desc->tests[j].name, name) == 0)
            return b->cpu_iter[b->row * b->desc->ntests + j];
    return -1.0;
}

double mln_bench_median(const mln_bench_t *b, const char *name)
{
    size_t nt = b->desc->ntests;

    for (size_t j = 0; b->stats != NULL && b->sizes.count > 0 && j < nt; j++)
        if (strcmp(b->desc->tests[j].name, name) == 0)
            return b->selected[j] && !b->skipped[b->row * nt + j] ? b->stats[b->row * nt + j].median
                                                                  : NAN;
    return NAN;
}

const char *mln_bench_collectives(const mln_bench_t *b)
{
    (void)b;
    return mln_bench_rt.coll->name;
}

double mln_bench_value_us(const mln_bench_t *b, uint64_t bytes, double seconds)
{
    (void)b;
    (void)bytes;
    return seconds * 1e6;
}

mln_status_t mln_bench_pairs(mln_bench_t *b, int *peer)
{
    int half = b->nranks / 2;
    char pairing[128];
    mln_status_t st = MLN_OK;

    snprintf(pairing, sizeof(pairing), "rank r with rank r + %d for r < %d", half, half);
    MLN_CHECK(mln_bench_param_int(b, "pairs", half), st, out);
    MLN_CHECK(mln_bench_param_str(b, "pairing", pairing), st, out);
    if (b->nranks % 2) /* odd: the last rank sits out, and the provenance says so */
        MLN_CHECK(mln_bench_param_int(b, "idle_rank", b->nranks - 1), st, out);
    *peer = b->rank < half ? b->rank + half : b->rank < 2 * half ? b->rank - half : -1;
out:
    return st;
}

mln_status_t mln_bench_fail(mln_bench_t *b, const char *fmt, ...)
{
    va_list ap;

    if (b->errmsg[0] == '\0') {
        va_start(ap, fmt);
        vsnprintf(b->errmsg, sizeof(b->errmsg), fmt, ap);
        va_end(ap);
    }
    return MLN_ERR_ARG;
}

mln_status_t mln_bench_skip(mln_bench_t *b, const char *fmt, ...)
{
    va_list ap;

    if (b->errmsg[0] == '\0') {
        va_start(ap, fmt);
        vsnprintf(b->errmsg, sizeof(b->errmsg), fmt, ap);
        va_end(ap);
        b->skip = 1;
    }
    return MLN_ERR_UNSUPPORTED;
}

int mln_bench_selected(const mln_bench_t *b, const char *name)
{
    for (size_t j = 0; j < b->desc->ntests; j++)
        if (strcmp(b->desc->tests[j].name, name) == 0)
            return !b->selected[j] ? 0 : b->tests_named ? 2 : 1;
    return 0;
}

mln_status_t mln_bench_setenv(mln_bench_t *b, const char *name, const char *value)
{
    if (setenv(name, value, 1) != 0)
        return mln_bench_fail(b, "cannot set %s=%s: %s", name, value, strerror(errno));
    return MLN_OK;
}

mln_status_t mln_bench_setenv_count(mln_bench_t *b, const char *name, int64_t value)
{
    char text[32];

    if (value <= 0)
        return MLN_OK;
    snprintf(text, sizeof(text), "%lld", (long long)value);
    return mln_bench_setenv(b, name, text);
}

const char *mln_bench_tunable(const char *name, const char *def)
{
    const char *v = getenv(name);

    return v != NULL && v[0] != '\0' ? v : def;
}

/* ---- params (key/value lists: result.h) ------------------------------------------------- */

mln_status_t mln_bench_param_int(mln_bench_t *b, const char *key, int64_t value)
{
    return mln_kv_set_int(&b->params, key, value);
}

mln_status_t mln_bench_param_str(mln_bench_t *b, const char *key, const char *value)
{
    return mln_kv_set(&b->params, key, strlen(key), value, 0);
}

/* ---- options ---------------------------------------------------------------------------- */

enum bench_opt_id {
    OPT_SIZES,
    OPT_REPS,
    OPT_WARMUP,
    OPT_MIN_ITERS,
    OPT_MAX_ITERS,
    OPT_ITER_BUDGET,
    OPT_TESTS,
    OPT_JSON,
    OPT_META,
    OPT_QUIET,
    OPT_INJECT,
    OPT_HELP,
    OPT_VERSION
};

typedef struct bench_common_opt {
    const char *name;
    enum bench_opt_id id;
    const char *metavar; /* NULL: a flag */
    const char *help;
} bench_common_opt_t;

static const bench_common_opt_t common_opts[] = {
    {"sizes", OPT_SIZES, "SPEC",
     "message sizes: LO:HI = LO, 2*LO, ... HI (0:HI starts 0, 1, 2, ...), a list "
     "0,1,1000,64K, or both; K/M/G = 2^10/2^20/2^30"},
    {"reps", OPT_REPS, "N",
     "repetitions per size and test; median, min, max are over them "
     "(default 10)"},
    {"warmup", OPT_WARMUP, "N",
     "warm-up iterations before each repetition (default "
     "max(1, iters/10))"},
    {"min-iters", OPT_MIN_ITERS, "N", "fewest timed iterations per repetition (default 5)"},
    {"max-iters", OPT_MAX_ITERS, "N", "most timed iterations per repetition (default 1000)"},
    {"iter-budget", OPT_ITER_BUDGET, "SIZE",
     "timed iterations = SIZE / message size, within those bounds (default 1M)"},
    {"tests", OPT_TESTS, "LIST", "comma list of the tests to run (default all)"},
    {"json", OPT_JSON, "FILE", "also write the result as JSON (multilane-result, data_version 1)"},
    {"meta", OPT_META, "KEY=VALUE", "copy KEY=VALUE into the provenance (repeatable)"},
    {"quiet", OPT_QUIET, NULL, "print only the verdict footer (no provenance, no table)"},
    {"inject-error", OPT_INJECT, "SIZE",
     "for testing: flip one received byte at SIZE in every repetition (the run must FAIL)"},
    {"version", OPT_VERSION, NULL, "print the Multilane version and exit"},
    {"help", OPT_HELP, NULL, "print this help and exit"},
};

#define NCOMMON (sizeof(common_opts) / sizeof(common_opts[0]))

static const char *bench_default_sizes(const mln_bench_desc_t *d)
{
    return d->default_sizes != NULL ? d->default_sizes : "1:4M";
}

static void bench_usage(const mln_bench_t *b, FILE *fp)
{
    const mln_bench_desc_t *d = b->desc;
    char flag[64], text[512];

    fprintf(fp, "usage: mln-%s [options]\n%s\n\noptions:\n", d->name, d->description);
    for (size_t i = 0; i < NCOMMON; i++) {
        snprintf(flag, sizeof(flag), "--%s%s%s", common_opts[i].name,
                 common_opts[i].metavar ? " " : "",
                 common_opts[i].metavar ? common_opts[i].metavar : "");
        fprintf(fp, "  %-22s ", flag);
        if (common_opts[i].id == OPT_SIZES) /* the one default a benchmark may set */
            snprintf(text, sizeof(text), "%s (default %s)", common_opts[i].help,
                     bench_default_sizes(d));
        else
            snprintf(text, sizeof(text), "%s", common_opts[i].help);
        mln_help_text(fp, text);
    }
    fprintf(fp, "\n%s options:\n", d->name);
    for (size_t i = 0; i < d->noptions; i++) {
        const mln_bench_option_t *o = &d->options[i];
        snprintf(flag, sizeof(flag), "--%s %s", o->name,
                 o->metavar                        ? o->metavar
                 : o->type == MLN_BENCH_OPT_SIZE   ? "SIZE"
                 : o->type == MLN_BENCH_OPT_STRING ? "TEXT"
                                                   : "N");
        snprintf(text, sizeof(text), "%s (default %s)", d->options[i].help,
                 d->options[i].default_value);
        fprintf(fp, "  %-22s ", flag);
        mln_help_text(fp, text);
    }
    fprintf(fp, "\ntests:\n");
    for (size_t i = 0; i < d->ntests; i++) {
        snprintf(text, sizeof(text), "%s [%s]: %s", d->tests[i].metric.name,
                 d->tests[i].metric.unit, d->tests[i].metric.description);
        fprintf(fp, "  %-22s ", d->tests[i].name);
        mln_help_text(fp, text);
    }
    fprintf(fp, "\nexit status: 0 pass, 1 wrong data, 2 usage or start-up error, 3 failure "
                "while running.\nMetrics, statistics and the JSON layout: docs/METRICS.md\n");
}

/* Parses an integer option value within [lo, hi]. */
static mln_status_t opt_int(mln_bench_t *b, const char *opt, const char *text, int64_t lo,
                            int64_t hi, int64_t *out)
{
    int64_t v;

    if (mln_parse_int(text, &v) != MLN_OK || v < lo || v > hi)
        return mln_bench_fail(b, "--%s: invalid value '%s' (expected an integer from %lld to %lld)",
                              opt, text, (long long)lo, (long long)hi);
    *out = v;
    return MLN_OK;
}

static mln_status_t opt_size(mln_bench_t *b, const char *opt, const char *text, uint64_t lo,
                             uint64_t hi, uint64_t *out)
{
    uint64_t v;

    if (mln_parse_size(text, &v) != MLN_OK || v < lo || v > hi)
        return mln_bench_fail(b,
                              "--%s: invalid size '%s' (expected e.g. 4096, 64K or 1M, from "
                              "%llu to %llu bytes)",
                              opt, text, (unsigned long long)lo, (unsigned long long)hi);
    *out = v;
    return MLN_OK;
}

static mln_status_t opt_tests(mln_bench_t *b, const char *text)
{
    const mln_bench_desc_t *d = b->desc;
    const char *p = text, *end;
    char choices[256] = "";
    size_t len, j;

    memset(b->selected, 0, d->ntests);
    for (;;) {
        end = strchr(p, ',');
        len = end ? (size_t)(end - p) : strlen(p);
        for (j = 0; j < d->ntests; j++)
            if (strlen(d->tests[j].name) == len && strncmp(d->tests[j].name, p, len) == 0)
                break;
        if (j == d->ntests) {
            for (size_t k = 0; k < d->ntests; k++)
                snprintf(choices + strlen(choices), sizeof(choices) - strlen(choices), "%s%s",
                         k ? ", " : "", d->tests[k].name);
            return mln_bench_fail(b, "--tests: unknown test '%.*s' in '%s' (choose from %s)",
                                  (int)len, p, text, choices);
        }
        b->selected[j] = 1;
        if (end == NULL)
            return MLN_OK;
        p = end + 1;
    }
}

static mln_status_t opt_common(mln_bench_t *b, enum bench_opt_id id, const char *val)
{
    char err[256];
    const char *eq;

    switch (id) {
    case OPT_SIZES:
        mln_size_list_free(&b->sizes);
        if (mln_size_list_parse(val, &b->sizes, err, sizeof(err)) != MLN_OK)
            return mln_bench_fail(b, "--sizes: %s", err);
        b->sizes_spec = val;
        return MLN_OK;
    case OPT_REPS:
        return opt_int(b, "reps", val, 1, 1000000, &b->reps);
    case OPT_WARMUP:
        return opt_int(b, "warmup", val, 0, 1000000000, &b->rule.warmup);
    case OPT_MIN_ITERS:
        return opt_int(b, "min-iters", val, 1, 1000000000, &b->rule.min_iters);
    case OPT_MAX_ITERS:
        return opt_int(b, "max-iters", val, 1, 1000000000, &b->rule.max_iters);
    case OPT_ITER_BUDGET:
        return opt_size(b, "iter-budget", val, 1, UINT64_C(1) << 50, &b->rule.budget_bytes);
    case OPT_TESTS:
        b->tests_named = 1;
        return opt_tests(b, val);
    case OPT_JSON:
        if (val[0] == '\0')
            return mln_bench_fail(b, "--json: empty file name");
        b->json_path = val;
        return MLN_OK;
    case OPT_META:
        eq = strchr(val, '=');
        if (eq == NULL || eq == val)
            return mln_bench_fail(b, "--meta: invalid pair '%s' (expected KEY=VALUE)", val);
        if (mln_kv_set(&b->meta, val, (size_t)(eq - val), eq + 1, 0) != MLN_OK)
            return mln_bench_fail(b, "out of memory");
        return MLN_OK;
    case OPT_INJECT:
        b->inject = 1;
        return opt_size(b, "inject-error", val, 1, MLN_BENCH_MAX_BYTES, &b->inject_bytes);
    case OPT_QUIET:
        b->quiet = 1;
        return MLN_OK;
    case OPT_HELP:
        b->help = 1;
        return MLN_OK;
    case OPT_VERSION:
        b->version = 1;
        return MLN_OK;
    }
    return MLN_ERR_INTERNAL;
}

static mln_status_t opt_bench(mln_bench_t *b, const mln_bench_option_t *o, const char *val)
{
    char *field = (char *)b->state + o->offset;
    int64_t iv = 0;
    uint64_t uv = 0;
    mln_status_t st;

    if (o->type == MLN_BENCH_OPT_STRING) { /* argv and the defaults outlive the run */
        memcpy(field, &val, sizeof(val));
        st = MLN_OK;
    } else if (o->type == MLN_BENCH_OPT_INT) {
        st = opt_int(b, o->name, val, o->min, o->max, &iv);
        if (st == MLN_OK)
            memcpy(field, &iv, sizeof(iv));
    } else {
        st = opt_size(b, o->name, val, (uint64_t)o->min, (uint64_t)o->max, &uv);
        if (st == MLN_OK)
            memcpy(field, &uv, sizeof(uv));
    }
    return st;
}

/* Parses argv identically on every rank; the first error goes to b->errmsg. */
static mln_status_t bench_parse(mln_bench_t *b, int argc, char **argv)
{
    const mln_bench_desc_t *d = b->desc;
    mln_status_t st = MLN_OK;

    mln_iter_rule_default(&b->rule);
    b->reps = 10;
    memset(b->selected, 1, d->ntests);
    MLN_CHECK(opt_common(b, OPT_SIZES, bench_default_sizes(d)), st, out);
    for (size_t i = 0; i < d->noptions; i++)
        MLN_CHECK(opt_bench(b, &d->options[i], d->options[i].default_value), st, out);

    for (int i = 1; i < argc && st == MLN_OK; i++) {
        const char *arg = argv[i], *name, *val = NULL, *eq;
        size_t len;
        const bench_common_opt_t *c = NULL;
        const mln_bench_option_t *o = NULL;

        if (strcmp(arg, "-h") == 0)
            arg = "--help";
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0')
            return mln_bench_fail(b, "unexpected argument '%s' (see --help)", arg);
        name = arg + 2;
        eq = strchr(name, '=');
        len = eq ? (size_t)(eq - name) : strlen(name);
        for (size_t k = 0; k < NCOMMON && c == NULL; k++)
            if (strlen(common_opts[k].name) == len && strncmp(common_opts[k].name, name, len) == 0)
                c = &common_opts[k];
        for (size_t k = 0; k < d->noptions && c == NULL && o == NULL; k++)
            if (strlen(d->options[k].name) == len && strncmp(d->options[k].name, name, len) == 0)
                o = &d->options[k];
        if (c == NULL && o == NULL)
            return mln_bench_fail(b, "unknown option '--%.*s' (see --help)", (int)len, name);
        if (c != NULL && c->metavar == NULL) {
            if (eq != NULL)
                return mln_bench_fail(b, "--%s takes no value", c->name);
        } else if (eq != NULL) {
            val = eq + 1;
        } else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
            val = argv[++i];
        } else {
            return mln_bench_fail(b, "--%.*s: missing value", (int)len, name);
        }
        st = c ? opt_common(b, c->id, val) : opt_bench(b, o, val);
    }
    if (st != MLN_OK || b->help || b->version)
        goto out;
    if (b->rule.min_iters > b->rule.max_iters)
        return mln_bench_fail(b, "--min-iters %lld is above --max-iters %lld",
                              (long long)b->rule.min_iters, (long long)b->rule.max_iters);
    if (b->rule.warmup >= 0 && b->rule.warmup < d->min_warmup) /* < 0: max(1, iters / 10) */
        return mln_bench_fail(b,
                              "--warmup %lld: mln-%s needs at least %lld warm-up iteration(s) "
                              "(the first iteration at a size sets the test up, untimed)",
                              (long long)b->rule.warmup, d->name, (long long)d->min_warmup);
    for (size_t k = 0; d->size_unit > 1 && k < b->sizes.count; k++)
        if (b->sizes.sizes[k] % d->size_unit != 0)
            return mln_bench_fail(b,
                                  "--sizes: %llu bytes is not a multiple of %llu (mln-%s sizes "
                                  "are whole elements)",
                                  (unsigned long long)b->sizes.sizes[k],
                                  (unsigned long long)d->size_unit, d->name);
    if (b->inject) {
        size_t k = 0;
        while (k < b->sizes.count && b->sizes.sizes[k] != b->inject_bytes)
            k++;
        if (k == b->sizes.count)
            return mln_bench_fail(b, "--inject-error: %llu bytes is not one of the --sizes",
                                  (unsigned long long)b->inject_bytes);
    }
out:
    return st;
}

/* The common parameters and the benchmark's options, in --help order, into "params". */
static mln_status_t bench_params_common(mln_bench_t *b)
{
    const mln_bench_desc_t *d = b->desc;
    mln_status_t st = MLN_OK;
    char tests[256] = "", key[64];
    const char *sv;
    int64_t iv;
    uint64_t uv;

    for (size_t j = 0; j < d->ntests; j++)
        if (b->selected[j])
            snprintf(tests + strlen(tests), sizeof(tests) - strlen(tests), "%s%s",
                     tests[0] ? "," : "", d->tests[j].name);
    MLN_CHECK(mln_bench_param_str(b, "sizes", b->sizes_spec), st, out);
    MLN_CHECK(mln_bench_param_int(b, "reps", b->reps), st, out);
    if (b->rule.warmup < 0)
        MLN_CHECK(mln_bench_param_str(b, "warmup", "auto"), st, out);
    else
        MLN_CHECK(mln_bench_param_int(b, "warmup", b->rule.warmup), st, out);
    MLN_CHECK(mln_bench_param_int(b, "min_iters", b->rule.min_iters), st, out);
    MLN_CHECK(mln_bench_param_int(b, "max_iters", b->rule.max_iters), st, out);
    MLN_CHECK(mln_bench_param_int(b, "iter_budget", (int64_t)b->rule.budget_bytes), st, out);
    MLN_CHECK(mln_bench_param_str(b, "tests", tests), st, out);
    if (d->interleave) /* the other order, test by test, is the default and not named */
        MLN_CHECK(mln_bench_param_str(b, "order", "interleaved"), st, out);
    for (size_t i = 0; i < d->noptions; i++) {
        const char *field = (const char *)b->state + d->options[i].offset;
        snprintf(key, sizeof(key), "%s", d->options[i].name);
        for (char *c = key; *c; c++) /* --window-cap -> "window_cap", like "min_iters" */
            *c = *c == '-' ? '_' : *c;
        if (d->options[i].type == MLN_BENCH_OPT_STRING) {
            memcpy(&sv, field, sizeof(sv));
            MLN_CHECK(mln_bench_param_str(b, key, sv), st, out);
            continue;
        }
        if (d->options[i].type == MLN_BENCH_OPT_INT) {
            memcpy(&iv, field, sizeof(iv));
        } else {
            memcpy(&uv, field, sizeof(uv));
            iv = (int64_t)uv;
        }
        MLN_CHECK(mln_bench_param_int(b, key, iv), st, out);
    }
    if (b->inject)
        MLN_CHECK(mln_bench_param_int(b, "inject_error", (int64_t)b->inject_bytes), st, out);
out:
    return st;
}

/* ---- collective agreement --------------------------------------------------------------- */

/*
 * Every rank says whether it failed; returns the lowest failing rank (-1: none), which then
 * prints its message, so a usage or setup error gives one line and never a hang.  *skip: that
 * rank skipped (mln_bench_skip) rather than failed; every rank learns it from the same
 * reduction (2 * rank + skip).
 */
static int bench_agree(const mln_bench_t *b, int failed, int *skip)
{
    int mine = failed ? 2 * b->rank + (b->skip != 0) : INT_MAX, lowest = INT_MAX;

    *skip = failed && b->skip;
    if (mln_bench_rt.coll->allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, b->comm) != MPI_SUCCESS)
        return failed ? b->rank : 0;
    if (lowest == INT_MAX)
        return -1;
    *skip = lowest % 2;
    return lowest / 2;
}

/* Agrees on a failure; the lowest failing rank prints its one line.  Returns 1 on failure (or
 * on an agreed skip: b->skip_agreed). */
static int bench_failed(mln_bench_t *b, mln_status_t st)
{
    int skip = 0, lowest = bench_agree(b, st != MLN_OK, &skip);

    b->skip_agreed = lowest >= 0 && skip;
    if (lowest >= 0 && lowest == b->rank)
        fprintf(stderr, "mln-%s: %s: %s\n", b->desc->name, skip ? "skipped" : "error",
                b->errmsg[0] ? b->errmsg : mln_status_str(st));
    return lowest >= 0;
}

/* A failure while running: other ranks may wait in a collective, so abort them all. */
static void bench_abort(const mln_bench_t *b, mln_status_t st)
{
    fprintf(stderr, "mln-%s: error: rank %d: %s%s%s; aborting the run\n", b->desc->name, b->rank,
            mln_status_str(st), b->errmsg[0] ? ": " : "", b->errmsg);
    MPI_Abort(b->comm, MLN_BENCH_EXIT_RUNTIME);
}

/* ---- buffers and results ---------------------------------------------------------------- */

static char *bench_buffer(size_t len)
{
    void *p = NULL;

    if (posix_memalign(&p, 4096, len ? len : 1) != 0)
        return NULL;
    memset(p, 0, len); /* fault the pages in before anything is timed */
    return p;
}

static mln_status_t bench_alloc(mln_bench_t *b)
{
    const mln_bench_desc_t *d = b->desc;
    size_t nrows = b->sizes.count, send_len = 0, recv_len = 0, len;
    mln_bench_plan_t plan;

    for (size_t i = 0; i < nrows; i++) {
        for (size_t j = 0; j < d->ntests; j++) {
            if (!b->selected[j])
                continue;
            memset(&plan, 0, sizeof(plan));
            d->tests[j].plan(b, b->sizes.sizes[i], &plan);
            len = (size_t)plan.send_slots * b->sizes.sizes[i];
            send_len = len > send_len ? len : send_len;
            len = (size_t)plan.recv_slots * b->sizes.sizes[i];
            recv_len = len > recv_len ? len : recv_len;
        }
    }
    b->send = bench_buffer(send_len);
    b->recv = bench_buffer(recv_len);
    b->values = calloc((size_t)b->reps * d->ntests, sizeof(*b->values));
    b->cpu = calloc((size_t)b->reps * d->ntests, sizeof(*b->cpu));
    b->cpu_iter = calloc(nrows * d->ntests + 1, sizeof(*b->cpu_iter));
    b->row_iters = calloc(nrows, sizeof(*b->row_iters));
    b->row_columns = calloc(nrows * d->ncolumns + 1, sizeof(*b->row_columns));
    b->stats = calloc(nrows * d->ntests, sizeof(*b->stats));
    b->errors = calloc(nrows * d->ntests, sizeof(*b->errors));
    b->skipped = calloc(nrows * d->ntests, sizeof(*b->skipped));
    if (!b->send || !b->recv || !b->values || !b->cpu || !b->cpu_iter || !b->row_iters ||
        !b->row_columns || !b->stats || !b->errors || !b->skipped)
        return mln_bench_fail(b, "rank %d: cannot allocate buffers of %zu + %zu bytes", b->rank,
                              send_len, recv_len);
    for (size_t k = 0; k < nrows * d->ntests; k++)
        b->cpu_iter[k] = -1.0; /* no test ran yet */
    return MLN_OK;
}

static void bench_free(mln_bench_t *b)
{
    free(b->send);
    free(b->recv);
    free(b->values);
    free(b->cpu);
    free(b->cpu_iter);
    free(b->row_iters);
    free(b->row_columns);
    free(b->stats);
    free(b->errors);
    free(b->skipped);
    mln_prov_free(&b->prov);
    free(b->command);
    free(b->selected);
    free(b->state);
    mln_kv_free(&b->params);
    mln_kv_free(&b->meta);
    mln_size_list_free(&b->sizes);
}

/* ---- the sweep -------------------------------------------------------------------------- */

/* Wrong bytes in receive slot k after repetition `rep` (see mln_bench_plan_t). */
static uint64_t slot_wrong(const mln_bench_plan_t *plan, const char *slot, uint64_t bytes, int rep,
                           int k)
{
    int from = plan->recv_from_each != NULL ? plan->recv_from_each[k] : plan->recv_from;
    int from_slot = plan->recv_slot_each != NULL ? plan->recv_slot_each[k] : k;
    uint64_t wrong = 0;

    if (from >= 0)
        return mln_pattern_check(slot, bytes, mln_pattern_seed(from, rep, bytes, from_slot));
    for (uint64_t i = 0; i < bytes; i++) /* no sender: nothing may have written the slot */
        wrong += slot[i] != 0;
    return wrong;
}

/* User + system CPU seconds of this process so far (all its threads). */
static double bench_cpu_seconds(void)
{
    struct rusage ru;

    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0.0; /* cannot fail for RUSAGE_SELF and a valid pointer */
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/* Row i, test j, repetition `rep`: warm-up, timed loop and validation (see harness.h); the
 * value into b->values[j * reps + rep], the CPU seconds of one iteration summed over ranks
 * into b->cpu[j * reps + rep], the wrong bytes added to the cell's errors. */
static mln_status_t bench_run_rep(mln_bench_t *b, size_t i, size_t j, int rep,
                                  const mln_bench_plan_t *plan, int injector)
{
    const mln_bench_test_t *test = &b->desc->tests[j];
    uint64_t bytes = b->sizes.sizes[i], wrong = 0, wrong_all;
    int64_t iters = b->row_iters[i], warm = mln_iter_warmup(&b->rule, iters);
    mln_bench_op_t op = {
        .bytes = bytes, .plan = plan, .send = b->send, .recv = b->recv, .index = -1};
    const mln_bench_coll_t *coll = mln_bench_rt.coll;
    double t0, t, tmax, v, c0, c, csum;
    mln_status_t st = MLN_OK;

    for (int k = 0; k < plan->send_slots; k++)
        mln_pattern_fill(b->send + k * bytes, bytes, mln_pattern_seed(b->rank, rep, bytes, k));
    for (int64_t w = 0; w < warm; w++)
        MLN_CHECK(test->iter(b, &op), st, out);
    memset(b->recv, 0, (size_t)plan->recv_slots * bytes);
    if (test->before_timed != NULL)
        MLN_CHECK(test->before_timed(b, &op), st, out);
    MLN_MPI_CHECK(MPI_Barrier(b->comm), st, out);
    c0 = bench_cpu_seconds();
    t0 = MPI_Wtime();
    for (op.index = 0; op.index < iters; op.index++)
        MLN_CHECK(test->iter(b, &op), st, out);
    t = (MPI_Wtime() - t0) / (double)iters;
    c = (bench_cpu_seconds() - c0) / (double)iters;
    if (test->after_timed != NULL)
        MLN_CHECK(test->after_timed(b, &op), st, out);
    if (injector == b->rank)
        b->recv[bytes / 2] ^= 0x01;
    for (int k = 0; k < plan->recv_slots; k++)
        wrong += slot_wrong(plan, b->recv + k * bytes, bytes, rep, k);
    MLN_MPI_CHECK(coll->allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, b->comm), st, out);
    MLN_MPI_CHECK(coll->allreduce(&wrong, &wrong_all, 1, MPI_UINT64_T, MPI_SUM, b->comm), st, out);
    MLN_MPI_CHECK(coll->allreduce(&c, &csum, 1, MPI_DOUBLE, MPI_SUM, b->comm), st, out);
    v = test->value(b, bytes, tmax);
    b->values[j * (size_t)b->reps + (size_t)rep] = isfinite(v) && v > 0 ? v : 0.0;
    b->cpu[j * (size_t)b->reps + (size_t)rep] = isfinite(csum) && csum > 0 ? csum : 0.0;
    b->errors[i * b->desc->ntests + j] += wrong_all;
out:
    return st;
}

/* Whether test j runs at `bytes` (its runs_at hook; none: every size). */
static int test_runs_at(const mln_bench_t *b, size_t j, uint64_t bytes)
{
    const mln_bench_test_t *t = &b->desc->tests[j];

    return t->runs_at == NULL || t->runs_at(b, bytes);
}

/*
 * Row i: b->reps repetitions of every selected test that runs at its size; test after test, or
 * with desc->interleave the tests in turn within each repetition.  Then the statistics, and a
 * line for every cell with wrong bytes.  plans and injector: room for ntests each.
 */
static mln_status_t bench_run_row(mln_bench_t *b, size_t i, mln_bench_plan_t *plans, int *injector)
{
    const mln_bench_desc_t *d = b->desc;
    uint64_t bytes = b->sizes.sizes[i], wrong;
    size_t nt = d->ntests, outer = d->interleave ? (size_t)b->reps : nt;
    size_t inner = d->interleave ? nt : (size_t)b->reps;
    mln_stats_t cpu;
    int mine;
    mln_status_t st = MLN_OK;

    b->row = i;
    for (size_t j = 0; j < nt; j++) {
        b->skipped[i * nt + j] = b->selected[j] && !test_runs_at(b, j, bytes);
        memset(&plans[j], 0, sizeof(plans[j]));
        injector[j] = -1;
        if (!b->selected[j] || b->skipped[i * nt + j])
            continue;
        d->tests[j].plan(b, bytes, &plans[j]);
        if (b->inject && bytes == b->inject_bytes) { /* the lowest receiving rank corrupts */
            mine = plans[j].recv_slots > 0 && bytes > 0 ? b->rank : INT_MAX;
            MLN_MPI_CHECK(
                mln_bench_rt.coll->allreduce(&mine, &injector[j], 1, MPI_INT, MPI_MIN, b->comm), st,
                out);
        }
    }
    for (size_t o = 0; o < outer; o++)
        for (size_t n = 0; n < inner; n++) {
            size_t j = d->interleave ? n : o;
            int rep = (int)(d->interleave ? o : n);
            if (b->selected[j] && !b->skipped[i * nt + j])
                MLN_CHECK(bench_run_rep(b, i, j, rep, &plans[j], injector[j]), st, out);
        }
    for (size_t j = 0; j < nt; j++) {
        if (!b->selected[j] || b->skipped[i * nt + j])
            continue;
        MLN_CHECK(mln_stats_compute(b->values + j * (size_t)b->reps, (size_t)b->reps,
                                    &b->stats[i * nt + j]),
                  st, out);
        MLN_CHECK(mln_stats_compute(b->cpu + j * (size_t)b->reps, (size_t)b->reps, &cpu), st, out);
        b->cpu_iter[i * nt + j] = cpu.median;
        wrong = b->errors[i * nt + j];
        b->total_errors += wrong;
        if (wrong > 0 && b->rank == 0)
            fprintf(stderr,
                    "mln-%s: error: %llu wrong bytes received at %llu bytes in test %s "
                    "(sum over %lld repetitions and all ranks)\n",
                    d->name, (unsigned long long)wrong, (unsigned long long)bytes, d->tests[j].name,
                    (long long)b->reps);
    }
out:
    return st;
}

/* Every row has a metric (docs/METRICS.md): at each size some selected test runs (setup done:
 * runs_at may depend on it, e.g. a mode disabled on this MPI). */
static mln_status_t bench_check_rows(mln_bench_t *b)
{
    const mln_bench_desc_t *d = b->desc;

    for (size_t i = 0; i < b->sizes.count; i++) {
        size_t j = 0;
        while (j < d->ntests && !(b->selected[j] && test_runs_at(b, j, b->sizes.sizes[i])))
            j++;
        if (j == d->ntests)
            return mln_bench_fail(b, "no selected test runs at %llu bytes (see --help: tests)",
                                  (unsigned long long)b->sizes.sizes[i]);
    }
    return MLN_OK;
}

/*
 * Before the sweep: `iters` untimed iterations of every selected test at the first size, so
 * that the first size does not pay for what a process does once (connections opened on first
 * use, first touch of the buffers); without it the first test of a run measured up to 30%
 * slower at its first size than the second test right after it.
 */
static mln_status_t bench_prime(mln_bench_t *b)
{
    const mln_bench_desc_t *d = b->desc;
    uint64_t bytes = b->sizes.count ? b->sizes.sizes[0] : 0;
    int64_t iters = b->sizes.count ? mln_iter_count(&b->rule, bytes) : 0;
    mln_status_t st = MLN_OK;

    for (size_t j = 0; j < d->ntests && iters > 0; j++) {
        mln_bench_plan_t plan = {0};
        mln_bench_op_t op = {
            .bytes = bytes, .plan = &plan, .send = b->send, .recv = b->recv, .index = -1};
        if (!b->selected[j] || !test_runs_at(b, j, bytes))
            continue;
        d->tests[j].plan(b, bytes, &plan);
        for (int64_t k = 0; k < iters; k++)
            MLN_CHECK(d->tests[j].iter(b, &op), st, out);
    }
    MLN_MPI_CHECK(MPI_Barrier(b->comm), st, out);
out:
    return st;
}

static mln_status_t bench_sweep(mln_bench_t *b)
{
    const mln_bench_desc_t *d = b->desc;
    mln_bench_plan_t *plans = calloc(d->ntests, sizeof(*plans));
    int *injector = calloc(d->ntests, sizeof(*injector));
    mln_status_t st = MLN_OK;

    if (plans == NULL || injector == NULL) {
        st = mln_bench_fail(b, "rank %d: out of memory for the test plans", b->rank);
        goto out;
    }
    MLN_CHECK(bench_prime(b), st, out);
    for (size_t i = 0; i < b->sizes.count; i++) {
        b->row_iters[i] = mln_iter_count(&b->rule, b->sizes.sizes[i]);
        MLN_CHECK(bench_run_row(b, i, plans, injector), st, out);
        for (size_t c = 0; c < d->ncolumns; c++) /* after the tests: they may report on them */
            b->row_columns[i * d->ncolumns + c] = d->columns[c].value(b, b->sizes.sizes[i]);
        if (b->rank == 0 && !b->quiet)
            mln_bench_report_row(b, i);
    }
out:
    free(plans);
    free(injector);
    return st;
}

/* ---- main ------------------------------------------------------------------------------- */

/*
 * MPI, then the options on every rank of MPI_COMM_WORLD and the before_init hook (the library
 * is not up yet, so the world agrees on errors).  Returns 1 when ready; 0 on an error and for
 * --help and --version.
 */
static int bench_start(mln_bench_t *b, int *argc, char ***argv)
{
    const mln_bench_desc_t *d = b->desc;
    mln_status_t st = MLN_ERR_NOMEM;

    if (mln_bench_rt.mpi_init(argc, argv) != MPI_SUCCESS) {
        fprintf(stderr, "mln-%s: error: MPI_Init failed\n", d->name);
        return 0;
    }
    b->comm = MPI_COMM_WORLD;
    if (MPI_Comm_rank(MPI_COMM_WORLD, &b->rank) != MPI_SUCCESS ||
        MPI_Comm_size(MPI_COMM_WORLD, &b->nranks) != MPI_SUCCESS) {
        fprintf(stderr, "mln-%s: error: cannot query MPI_COMM_WORLD\n", d->name);
        MPI_Abort(MPI_COMM_WORLD, MLN_BENCH_EXIT_USAGE);
    }
    b->state = calloc(1, d->state_size ? d->state_size : 1);
    b->selected = calloc(d->ntests ? d->ntests : 1, 1);
    b->command = mln_command_line(*argc, *argv);
    if (b->state == NULL || b->selected == NULL || b->command == NULL)
        mln_bench_fail(b, "out of memory");
    else
        st = bench_parse(b, *argc, *argv);
    if (st == MLN_OK && !b->help && !b->version && d->before_init != NULL)
        st = d->before_init(b);
    return !bench_failed(b, st) && !b->help && !b->version;
}

/* The runtime's start (the library and the benchmark communicator: mln_bench_rt); if it
 * fails, the world agrees on the error.  Returns 1 when ready. */
static int bench_init(mln_bench_t *b, int *inited)
{
    return !bench_failed(b, mln_bench_rt.init(b, inited));
}

/* Ranks, the benchmark's setup, the JSON path, buffers.  Returns 1 when ready. */
static int bench_prepare(mln_bench_t *b, int *setup_done)
{
    const mln_bench_desc_t *d = b->desc;
    mln_status_t st = MLN_OK;

    if (b->nranks < d->min_ranks)
        st = mln_bench_fail(b, "needs at least %d MPI ranks, got %d (e.g. mpiexec -n %d mln-%s)",
                            d->min_ranks, b->nranks, d->min_ranks, d->name);
    if (st == MLN_OK)
        st = bench_params_common(b);
    if (st == MLN_OK && d->setup != NULL) {
        *setup_done = 1;
        st = d->setup(b);
    }
    if (st == MLN_OK)
        st = bench_check_rows(b);
    if (st == MLN_OK && b->rank == 0 && b->json_path != NULL)
        st = mln_bench_report_probe(b, b->json_path);
    if (st == MLN_OK)
        st = bench_alloc(b);
    return !bench_failed(b, st);
}

int mln_bench_main(const mln_bench_desc_t *desc, int argc, char **argv)
{
    mln_bench_t bench = {.desc = desc, .comm = MPI_COMM_NULL};
    mln_bench_t *b = &bench;
    int rc = MLN_BENCH_EXIT_USAGE, inited = 0, setup_done = 0, mpi_up = 0;
    mln_status_t st;

    if (!bench_start(b, &argc, &argv)) {
        if (b->help || b->version)
            rc = MLN_BENCH_EXIT_PASS;
        if (b->help && b->rank == 0)
            bench_usage(b, stdout);
        if (b->version && !b->help && b->rank == 0)
            printf("mln-%s (multilane %s)\n", desc->name, mln_version_string());
        goto out;
    }
    if (!bench_init(b, &inited) || !bench_prepare(b, &setup_done)) {
        if (b->skip_agreed)
            rc = MLN_BENCH_EXIT_SKIP;
        goto out;
    }
    st = mln_bench_report_collect(b);
    if (st != MLN_OK)
        bench_abort(b, st);
    if (b->rank == 0 && !b->quiet) {
        mln_bench_report_provenance(b);
        mln_bench_report_header(b);
    }
    b->t_start = MPI_Wtime();
    st = bench_sweep(b);
    if (st != MLN_OK)
        bench_abort(b, st);
    if (b->rank == 0) {
        mln_bench_report_footer(b);
        rc = b->total_errors ? MLN_BENCH_EXIT_FAIL : MLN_BENCH_EXIT_PASS;
        if (b->json_path != NULL && mln_bench_report_json(b, b->json_path) != MLN_OK) {
            fprintf(stderr, "mln-%s: error: %s\n", desc->name, b->errmsg);
            rc = MLN_BENCH_EXIT_RUNTIME;
        }
    }
    if (mln_bench_rt.coll->bcast(&rc, 1, MPI_INT, 0, b->comm) != MPI_SUCCESS)
        rc = MLN_BENCH_EXIT_RUNTIME;
out:
    if (setup_done && desc->teardown != NULL)
        desc->teardown(b);
    bench_free(b);
    mln_bench_rt.fini(b, inited);
    if (MPI_Initialized(&mpi_up) == MPI_SUCCESS && mpi_up)
        MPI_Finalize();
    return rc;
}
