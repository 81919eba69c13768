/*
 * harness_report.c - what the harness writes: the '#' provenance block, the two-line header,
 * fixed-width rows and the verdict on rank 0's stdout, and the JSON result (schema
 * multilane-result, data_version 1: python/multilane/schemas/result-v1.json, docs/METRICS.md).
 */
#include "harness_int.h"
#include "mln_core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- provenance (result.c) -------------------------------------------------------------- */

mln_status_t mln_bench_report_collect(mln_bench_t *b)
{
    return mln_prov_collect(b->comm, mln_bench_rt.coll, &b->prov);
}

/* The '#' block: what ran, where, with which parameters. */
void mln_bench_report_provenance(const mln_bench_t *b)
{
    mln_prov_print(&b->prov, b->desc->name, b->desc->description, b->command, &b->params, &b->meta);
}

/* ---- table ------------------------------------------------------------------------------ */

#define W_BYTES 12
#define W_ITERS 8
#define W_ERRORS 10

static const char *const stat_suffix[3] = {"", "_min", "_max"};

/* Width of a column: its name (plus a _min/_max suffix) and two blanks, at least 12. */
static int col_width(const char *name, int suffix)
{
    int w = (int)(strlen(name) + strlen(stat_suffix[suffix])) + 2;
    return w < 12 ? 12 : w;
}

/* One header line: names (units = 0) or units (units = 1). */
static void header_line(const mln_bench_t *b, int units)
{
    const mln_bench_desc_t *d = b->desc;
    char name[128];

    printf("#%*s%*s", W_BYTES - 1, units ? "B" : "bytes", W_ITERS, units ? "count" : "iters");
    for (size_t c = 0; c < d->ncolumns; c++)
        printf("%*s", col_width(d->columns[c].name, 0),
               units ? d->columns[c].unit : d->columns[c].name);
    for (size_t j = 0; j < d->ntests; j++) {
        if (!b->selected[j])
            continue;
        for (int s = 0; s < 3; s++) {
            snprintf(name, sizeof(name), "%s%s", d->tests[j].metric.name, stat_suffix[s]);
            printf("%*s", col_width(d->tests[j].metric.name, s),
                   units ? d->tests[j].metric.unit : name);
        }
    }
    printf("%*s\n", W_ERRORS, units ? "bytes" : "errors");
}

void mln_bench_report_row(const mln_bench_t *b, size_t i)
{
    const mln_bench_desc_t *d = b->desc;
    const mln_stats_t *s;
    uint64_t errors = 0;

    printf("%*llu%*lld", W_BYTES, (unsigned long long)b->sizes.sizes[i], W_ITERS,
           (long long)b->row_iters[i]);
    for (size_t c = 0; c < d->ncolumns; c++) {
        const double v = b->row_columns[i * d->ncolumns + c];
        if (isfinite(v))
            printf("%*.6g", col_width(d->columns[c].name, 0), v);
        else /* no value at this size (mln_bench_column_t) */
            printf("%*s", col_width(d->columns[c].name, 0), "-");
    }
    for (size_t j = 0; j < d->ntests; j++) {
        if (!b->selected[j])
            continue;
        s = &b->stats[i * d->ntests + j];
        errors += b->errors[i * d->ntests + j];
        if (b->skipped[i * d->ntests + j]) {
            printf("%*s%*s%*s", col_width(d->tests[j].metric.name, 0), "-",
                   col_width(d->tests[j].metric.name, 1), "-",
                   col_width(d->tests[j].metric.name, 2), "-");
            continue;
        }
        printf("%*.3f%*.3f%*.3f", col_width(d->tests[j].metric.name, 0), s->median,
               col_width(d->tests[j].metric.name, 1), s->min, col_width(d->tests[j].metric.name, 2),
               s->max);
    }
    printf("%*llu\n", W_ERRORS, (unsigned long long)errors);
    fflush(stdout);
}

void mln_bench_report_header(const mln_bench_t *b)
{
    header_line(b, 0);
    header_line(b, 1);
    fflush(stdout);
}

void mln_bench_report_footer(const mln_bench_t *b)
{
    printf("# wall_time_s: %.1f\n", MPI_Wtime() - b->t_start);
    printf("# errors: %llu\n# verdict: %s\n", (unsigned long long)b->total_errors,
           b->total_errors ? "FAIL" : "PASS");
    fflush(stdout);
}

/* ---- JSON (result.c) -------------------------------------------------------------------- */

mln_status_t mln_bench_report_probe(mln_bench_t *b, const char *path)
{
    char err[512];

    if (mln_result_probe(path, err, sizeof(err)) != MLN_OK)
        return mln_bench_fail(b, "%s", err);
    return MLN_OK;
}

static void json_rows(FILE *fp, const void *arg)
{
    const mln_bench_t *b = arg;
    const mln_bench_desc_t *d = b->desc;

    fputs("  \"rows\": [", fp);
    for (size_t i = 0; i < b->sizes.count; i++) {
        uint64_t errors = 0;
        for (size_t j = 0; j < d->ntests; j++)
            errors += b->selected[j] ? b->errors[i * d->ntests + j] : 0;
        fprintf(fp, "%s\n    {\"bytes\": %llu, \"iters\": %lld, \"errors\": %llu", i ? "," : "",
                (unsigned long long)b->sizes.sizes[i], (long long)b->row_iters[i],
                (unsigned long long)errors);
        for (size_t c = 0; c < d->ncolumns; c++) {
            const double v = b->row_columns[i * d->ncolumns + c];
            if (!isfinite(v))
                continue; /* no value at this size: no key */
            fprintf(fp, ", \"%s\": ", d->columns[c].name);
            mln_json_write_number(fp, v);
        }
        for (size_t j = 0; j < d->ntests; j++) {
            const mln_stats_t *s = &b->stats[i * d->ntests + j];
            const char *name = d->tests[j].metric.name;
            if (!b->selected[j] || b->skipped[i * d->ntests + j])
                continue; /* not measured at this size: no key */
            fprintf(fp, ", \"%s\": ", name);
            mln_json_write_number(fp, s->median);
            fprintf(fp, ", \"%s_min\": ", name);
            mln_json_write_number(fp, s->min);
            fprintf(fp, ", \"%s_max\": ", name);
            mln_json_write_number(fp, s->max);
        }
        fputc('}', fp);
    }
    fputs(b->sizes.count ? "\n  ]\n" : "]\n", fp);
}

mln_status_t mln_bench_report_json(mln_bench_t *b, const char *path)
{
    const mln_bench_desc_t *d = b->desc;
    const mln_bench_metric_t **metrics = calloc(d->ntests ? d->ntests : 1, sizeof(*metrics));
    mln_result_doc_t doc = {.benchmark = d->name,
                            .errors = b->total_errors,
                            .prov = &b->prov,
                            .command = b->command,
                            .params = &b->params,
                            .meta = &b->meta,
                            .metrics = metrics,
                            .rows = json_rows,
                            .rows_arg = b};
    char err[512];
    mln_status_t st;

    if (metrics == NULL)
        return mln_bench_fail(b, "out of memory");
    for (size_t j = 0; j < d->ntests; j++) /* the selected tests', in the benchmark's order */
        if (b->selected[j])
            metrics[doc.nmetrics++] = &d->tests[j].metric;
    st = mln_result_write(path, &doc, err, sizeof(err));
    if (st != MLN_OK)
        mln_bench_fail(b, "%s", err);
    free(metrics);
    return st;
}
