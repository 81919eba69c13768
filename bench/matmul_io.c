/*
 * matmul_io.c - what mln-matmul reads and writes: its options and --help, the metric
 * definitions, the fixed-width table and the JSON rows (the document around them: result.c).
 * docs/METRICS.md (matmul) describes every item.
 */
#include "matmul.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const mm_layout_names[2] = {"rows", "blocks2x2"};

const mln_bench_metric_t mm_metrics[M_COUNT] = {
    {"total_s", "s", "median",
     "from the barrier before the first phase to the end of the gather, max over ranks", 0},
    {"bcast_s", "s", "median", "MPI_Bcast of B (N x N doubles) from rank 0, max over ranks", 0},
    {"scatter_s", "s", "median",
     "rows: MPI_Scatterv of A's row blocks; blocks2x2: (Ai, Bj) to rank 2i+j; max over ranks", 0},
    {"dgemm_s", "s", "median",
     "the local product of this rank's block (OpenBLAS dgemm_, or with --gpu copies and cuBLAS), "
     "max over ranks",
     0},
    {"gather_s", "s", "median", "C's blocks to rank 0 (rows: MPI_Gatherv), max over ranks", 0},
    {"h2d_s", "s", "median", "--gpu: the local product's copies to the device, max over ranks", 0},
    {"kernel_s", "s", "median", "--gpu: the cuBLAS DGEMM on the device, max over ranks", 0},
    {"d2h_s", "s", "median", "--gpu: C's block back to the host, max over ranks", 0},
    {"gflops", "GFLOP/s", "median", "2 N^3 / total_s / 1e9, per repetition", 1},
    {"comm_share", "fraction", "median",
     "(bcast_s + scatter_s + gather_s) / total_s, per repetition", 0},
};

/* ---- options ---------------------------------------------------------------------------- */

enum mm_opt_id {
    OPT_REPS,
    OPT_JSON,
    OPT_META,
    OPT_QUIET,
    OPT_INJECT,
    OPT_VERSION,
    OPT_HELP,
    OPT_N,
    OPT_LAYOUT,
    OPT_GPU,
    OPT_BLAS_THREADS,
    OPT_EXACT_MAX_N
};

typedef struct mm_opt {
    const char *name;
    enum mm_opt_id id;
    const char *metavar; /* NULL: a flag */
    int common;          /* 1: an option the harness's programs share; 0: matmul's own */
    const char *help;
} mm_opt_t;

static const mm_opt_t mm_opt_table[] = {
    {"reps", OPT_REPS, "R", 1, "repetitions per N; median, min, max are over them (default 3)"},
    {"json", OPT_JSON, "FILE", 1,
     "also write the result as JSON (multilane-result, data_version 1)"},
    {"meta", OPT_META, "KEY=VALUE", 1, "copy KEY=VALUE into the provenance (repeatable)"},
    {"quiet", OPT_QUIET, NULL, 1, "print only the verdict footer (no provenance, no table)"},
    {"inject-error", OPT_INJECT, NULL, 1,
     "for testing: in every repetition one rank adds 1 to an element of its C block after the "
     "local product (the run must FAIL)"},
    {"version", OPT_VERSION, NULL, 1, "print the Multilane version and exit"},
    {"help", OPT_HELP, NULL, 1, "print this help and exit"},
    {"n", OPT_N, "LIST", 0, "matrix orders N, a comma list, each 1 to 46340 (default 1000)"},
    {"layout", OPT_LAYOUT, "NAME", 0,
     "rows: broadcast B, scatter row blocks of A, gather C, any rank count; blocks2x2: the "
     "seed's GPU version, exactly 4 ranks, rank 2i+j computes C_ij from A's row half i and B's "
     "column half j (default rows)"},
    {"gpu", OPT_GPU, NULL, 0,
     "local product with cuBLAS (bench/matmul_gpu.h) instead of OpenBLAS; without a usable GPU "
     "the run is skipped (exit 77)"},
    {"blas-threads", OPT_BLAS_THREADS, "N", 0,
     "OpenBLAS threads per rank (default 1: P ranks on few cores with more threads each would "
     "oversubscribe)"},
    {"exact-max-n", OPT_EXACT_MAX_N, "N", 0,
     "up to this N also compare every element of C with a serial triple-loop product; above it "
     "Freivalds' check only (default 512)"},
};

#define MM_NOPTS (sizeof(mm_opt_table) / sizeof(mm_opt_table[0]))

mln_status_t mm_fail(mm_t *m, const char *fmt, ...)
{
    va_list ap;

    if (m->errmsg[0] == '\0') {
        va_start(ap, fmt);
        vsnprintf(m->errmsg, sizeof(m->errmsg), fmt, ap);
        va_end(ap);
    }
    return MLN_ERR_ARG;
}

void mm_usage(void)
{
    char flag[64];

    printf("usage: mln-%s [options]\n%s\n", MM_NAME, MM_DESCRIPTION);
    for (int common = 1; common >= 0; common--) {
        printf(common ? "\noptions:\n" : "\n%s options:\n", MM_NAME);
        for (size_t i = 0; i < MM_NOPTS; i++) {
            const mm_opt_t *o = &mm_opt_table[i];
            if (o->common != common)
                continue;
            snprintf(flag, sizeof(flag), "--%s%s%s", o->name, o->metavar ? " " : "",
                     o->metavar ? o->metavar : "");
            printf("  %-22s ", flag);
            mln_help_text(stdout, o->help);
        }
    }
    printf("\nexit status: 0 pass, 1 wrong elements of C, 2 usage or start-up error, 3 failure "
           "while running,\n77 skipped (--gpu without a GPU).\nMetrics, verification and the "
           "JSON layout: docs/METRICS.md (matmul)\n");
}

static mln_status_t opt_int(mm_t *m, const char *name, const char *text, int64_t lo, int64_t hi,
                            int64_t *out)
{
    int64_t v;

    if (mln_parse_int(text, &v) != MLN_OK || v < lo || v > hi)
        return mm_fail(m, "--%s: invalid value '%s' (expected an integer from %lld to %lld)", name,
                       text, (long long)lo, (long long)hi);
    *out = v;
    return MLN_OK;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* --n LIST: a comma list of orders 1 .. MLN_MATMUL_MAX_N, kept ascending and distinct. */
static mln_status_t opt_n(mm_t *m, const char *text)
{
    mm_opts_t *o = &m->o;
    const char *p = text;
    int count = 0, uniq = 0;
    size_t used = 0;

    for (;;) {
        size_t len = strcspn(p, ",");
        char item[32];
        int64_t v;
        if (len == 0 || len >= sizeof(item))
            return mm_fail(
                m, "--n: invalid list '%s' (expected orders such as 1000 or 500,1000,2000)", text);
        memcpy(item, p, len);
        item[len] = '\0';
        if (mln_parse_int(item, &v) != MLN_OK || v < 1 || v > MLN_MATMUL_MAX_N)
            return mm_fail(m,
                           "--n: invalid order '%s' (expected an integer from 1 to %d: N * N "
                           "elements must fit an MPI count, and Freivalds' sums stay exact "
                           "in double up to there)",
                           item, MLN_MATMUL_MAX_N);
        if (count == MM_MAX_NS)
            return mm_fail(m, "--n: more than %d orders in '%s'", MM_MAX_NS, text);
        o->ns[count++] = (int)v;
        if (p[len] == '\0')
            break;
        p += len + 1;
    }
    qsort(o->ns, (size_t)count, sizeof(o->ns[0]), cmp_int);
    for (int i = 0; i < count; i++)
        if (uniq == 0 || o->ns[i] != o->ns[uniq - 1])
            o->ns[uniq++] = o->ns[i];
    o->nn = uniq;
    for (int i = 0; i < uniq; i++)
        used += (size_t)snprintf(o->n_list + used, sizeof(o->n_list) - used, "%s%d", i ? "," : "",
                                 o->ns[i]);
    return MLN_OK;
}

static mln_status_t opt_apply(mm_t *m, enum mm_opt_id id, const char *val)
{
    const char *eq;

    switch (id) {
    case OPT_REPS:
        return opt_int(m, "reps", val, 1, 1000000, &m->o.reps);
    case OPT_JSON:
        if (val[0] == '\0')
            return mm_fail(m, "--json: empty file name");
        m->o.json_path = val;
        return MLN_OK;
    case OPT_META:
        eq = strchr(val, '=');
        if (eq == NULL || eq == val)
            return mm_fail(m, "--meta: invalid pair '%s' (expected KEY=VALUE)", val);
        if (mln_kv_set(&m->meta, val, (size_t)(eq - val), eq + 1, 0) != MLN_OK)
            return mm_fail(m, "out of memory");
        return MLN_OK;
    case OPT_QUIET:
        m->o.quiet = 1;
        return MLN_OK;
    case OPT_INJECT:
        m->o.inject = 1;
        return MLN_OK;
    case OPT_VERSION:
        m->o.version = 1;
        return MLN_OK;
    case OPT_HELP:
        m->o.help = 1;
        return MLN_OK;
    case OPT_N:
        return opt_n(m, val);
    case OPT_LAYOUT:
        for (int l = LAYOUT_ROWS; l <= LAYOUT_BLOCKS; l++)
            if (strcmp(val, mm_layout_names[l]) == 0) {
                m->o.layout = (mm_layout_t)l;
                return MLN_OK;
            }
        return mm_fail(m, "--layout: unknown layout '%s' (choose rows or blocks2x2)", val);
    case OPT_GPU:
        m->o.gpu = 1;
        return MLN_OK;
    case OPT_BLAS_THREADS:
        return opt_int(m, "blas-threads", val, 1, MM_MAX_BLAS_THREADS, &m->o.blas_threads);
    case OPT_EXACT_MAX_N:
        return opt_int(m, "exact-max-n", val, 0, MLN_MATMUL_MAX_N, &m->o.exact_max_n);
    }
    return MLN_ERR_INTERNAL;
}

/* Parses argv identically on every rank; the first error goes to m->errmsg. */
mln_status_t mm_parse(mm_t *m, int argc, char **argv)
{
    mln_status_t st;

    m->o.reps = 3;
    m->o.blas_threads = 1;
    m->o.exact_max_n = 512;
    m->o.layout = LAYOUT_ROWS;
    st = opt_n(m, "1000");
    for (int i = 1; i < argc && st == MLN_OK; i++) {
        const char *arg = strcmp(argv[i], "-h") == 0 ? "--help" : argv[i], *val = NULL;
        const char *name = arg + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const mm_opt_t *o = NULL;

        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0')
            return mm_fail(m, "unexpected argument '%s' (see --help)", arg);
        for (size_t k = 0; k < MM_NOPTS && o == NULL; k++)
            if (strlen(mm_opt_table[k].name) == len &&
                strncmp(mm_opt_table[k].name, name, len) == 0)
                o = &mm_opt_table[k];
        if (o == NULL)
            return mm_fail(m, "unknown option '--%.*s' (see --help)", (int)len, name);
        if (o->metavar == NULL) {
            if (eq != NULL)
                return mm_fail(m, "--%s takes no value", o->name);
        } else if (eq != NULL) {
            val = eq + 1;
        } else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
            val = argv[++i];
        } else {
            return mm_fail(m, "--%s: missing value", o->name);
        }
        st = opt_apply(m, o->id, val);
    }
    if (st == MLN_OK && !m->o.help && !m->o.version && m->o.layout == LAYOUT_BLOCKS &&
        m->nranks != 4)
        return mm_fail(m,
                       "--layout blocks2x2 needs exactly 4 ranks (rank 2i+j computes C_ij), got "
                       "%d (e.g. mpiexec -n 4 mln-%s --layout blocks2x2)",
                       m->nranks, MM_NAME);
    return st;
}

/* ---- output ----------------------------------------------------------------------------- */

static const char *const stat_suffix[3] = {"", "_min", "_max"};

static int col_width(const char *name, int suffix)
{
    int w = (int)(strlen(name) + strlen(stat_suffix[suffix])) + 2;
    return w < 12 ? 12 : w;
}

static void header_line(const mm_t *m, int units)
{
    char name[64];

    printf("#%6s%14s%8s%6s", units ? "-" : "n", units ? "B" : "bytes", units ? "count" : "iters",
           units ? "0/1" : "exact");
    for (int k = 0; k < M_COUNT; k++)
        for (int s = 0; m->active[k] && s < 3; s++) {
            snprintf(name, sizeof(name), "%s%s", mm_metrics[k].name, stat_suffix[s]);
            printf("%*s", col_width(mm_metrics[k].name, s), units ? mm_metrics[k].unit : name);
        }
    printf("%10s\n", units ? "count" : "errors");
}

void mm_print_header(const mm_t *m)
{
    header_line(m, 0);
    header_line(m, 1);
    fflush(stdout);
}

void mm_print_row(const mm_t *m, const mm_row_t *r)
{
    printf("%7d%14llu%8lld%6d", r->n, 8ULL * (unsigned long long)r->n * (unsigned long long)r->n,
           (long long)m->o.reps, r->exact);
    for (int k = 0; k < M_COUNT; k++) {
        const mln_stats_t *s = &r->stats[k];
        if (!m->active[k])
            continue;
        printf("%*.6g%*.6g%*.6g", col_width(mm_metrics[k].name, 0), s->median,
               col_width(mm_metrics[k].name, 1), s->min, col_width(mm_metrics[k].name, 2), s->max);
    }
    printf("%10llu\n", (unsigned long long)r->errors);
    fflush(stdout);
}

static void json_rows(FILE *fp, const void *arg)
{
    const mm_t *m = arg;

    fputs("  \"rows\": [", fp);
    for (int i = 0; i < m->o.nn; i++) {
        const mm_row_t *r = &m->rows[i];
        fprintf(fp,
                "%s\n    {\"bytes\": %llu, \"iters\": %lld, \"errors\": %llu, \"n\": %d, "
                "\"exact\": %d",
                i ? "," : "", 8ULL * (unsigned long long)r->n * (unsigned long long)r->n,
                (long long)m->o.reps, (unsigned long long)r->errors, r->n, r->exact);
        for (int k = 0; k < M_COUNT; k++) {
            if (!m->active[k])
                continue;
            fprintf(fp, ", \"%s\": ", mm_metrics[k].name);
            mln_json_write_number(fp, r->stats[k].median);
            fprintf(fp, ", \"%s_min\": ", mm_metrics[k].name);
            mln_json_write_number(fp, r->stats[k].min);
            fprintf(fp, ", \"%s_max\": ", mm_metrics[k].name);
            mln_json_write_number(fp, r->stats[k].max);
        }
        fputc('}', fp);
    }
    fputs(m->o.nn ? "\n  ]\n" : "]\n", fp);
}

mln_status_t mm_write_json(mm_t *m)
{
    const mln_bench_metric_t *metrics[M_COUNT];
    mln_result_doc_t doc = {.benchmark = MM_NAME,
                            .errors = m->total_errors,
                            .prov = &m->prov,
                            .command = m->command,
                            .params = &m->params,
                            .meta = &m->meta,
                            .metrics = metrics,
                            .rows = json_rows,
                            .rows_arg = m};

    for (int k = 0; k < M_COUNT; k++)
        if (m->active[k])
            metrics[doc.nmetrics++] = &mm_metrics[k];
    return mln_result_write(m->o.json_path, &doc, m->errmsg, sizeof(m->errmsg));
}
