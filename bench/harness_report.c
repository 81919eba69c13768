/*
 * harness_report.c - what the harness writes: the '#' provenance block, the two-line header,
 * fixed-width rows and the verdict on rank 0's stdout, and the JSON result (schema
 * multilane-result, data_version 1: python/multilane/schemas/result-v1.json, docs/METRICS.md).
 */
#include "harness_int.h"
#include "mln_core.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- provenance ------------------------------------------------------------------------- */

/* First line of the library version, runs of blanks collapsed to one space. */
static void first_line(const char *in, char *out, size_t len)
{
    size_t used = 0;

    while (*in == ' ' || *in == '\t')
        in++;
    for (; *in && *in != '\n' && *in != '\r' && used + 1 < len; in++) {
        if ((*in == ' ' || *in == '\t') && used > 0 && out[used - 1] == ' ')
            continue;
        out[used++] = *in == '\t' ? ' ' : *in;
    }
    while (used > 0 && out[used - 1] == ' ')
        used--;
    out[used] = '\0';
}

mln_status_t mln_bench_report_collect(mln_bench_t *b)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    char name[MPI_MAX_PROCESSOR_NAME] = "";
    char *all = NULL;
    mln_status_t st = MLN_OK;
    int len = 0, major = 0, minor = 0;
    time_t now = time(NULL);
    struct tm tm;

    MLN_MPI_CHECK(MPI_Get_library_version(lib, &len), st, out);
    first_line(lib, b->mpi_library, sizeof(b->mpi_library));
    if (b->mpi_library[0] == '\0')
        snprintf(b->mpi_library, sizeof(b->mpi_library), "unknown");
    MLN_MPI_CHECK(MPI_Get_version(&major, &minor), st, out);
    snprintf(b->mpi_standard, sizeof(b->mpi_standard), "%d.%d", major, minor);
    if (gmtime_r(&now, &tm) == NULL ||
        strftime(b->date, sizeof(b->date), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(b->date, sizeof(b->date), "unknown");

    MLN_MPI_CHECK(MPI_Get_processor_name(name, &len), st, out);
    if (b->rank == 0) {
        all = calloc((size_t)b->nranks, MPI_MAX_PROCESSOR_NAME);
        if (all == NULL) { /* the caller aborts the run: the others wait in MPI_Gather */
            st = MLN_ERR_NOMEM;
            goto out;
        }
    }
    MLN_MPI_CHECK(MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME,
                             MPI_CHAR, 0, b->comm),
                  st, out);
    if (b->rank == 0 && all != NULL) {
        /* Distinct names in rank order, packed to the front. */
        b->nhosts = 0;
        for (int r = 0; r < b->nranks; r++) {
            char *h = all + (size_t)r * MPI_MAX_PROCESSOR_NAME;
            int seen = 0;
            h[MPI_MAX_PROCESSOR_NAME - 1] = '\0';
            for (int k = 0; k < b->nhosts && !seen; k++)
                seen = strcmp(all + (size_t)k * MPI_MAX_PROCESSOR_NAME, h) == 0;
            if (!seen)
                memmove(all + (size_t)b->nhosts++ * MPI_MAX_PROCESSOR_NAME, h,
                        MPI_MAX_PROCESSOR_NAME);
        }
        b->host_names = all;
        all = NULL;
    }
out:
    free(all);
    return st;
}

static const char *host_name(const mln_bench_t *b, int i)
{
    return b->host_names + (size_t)i * MPI_MAX_PROCESSOR_NAME;
}

/* Prints `s` on one line: control characters (a newline in --meta) become escapes. */
static void put_line_safe(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\n')
            fputs("\\n", stdout);
        else if (*p == '\t')
            fputs("\\t", stdout);
        else if (*p < 0x20 || *p == 0x7f)
            printf("\\x%02x", *p);
        else
            putchar(*p);
    }
}

/* The '#' block: what ran, where, with which parameters. */
void mln_bench_report_provenance(const mln_bench_t *b)
{
    printf("# mln-%s: %s\n", b->desc->name, b->desc->description);
    printf("# multilane_version: %s\n", mln_version_string());
    printf("# mpi_library: %s\n# mpi_standard: %s\n", b->mpi_library, b->mpi_standard);
    printf("# nranks: %d\n# nhosts: %d\n# hosts:", b->nranks, b->nhosts);
    for (int i = 0; i < b->nhosts; i++)
        printf(" %s", host_name(b, i));
    printf("\n# date: %s\n# command: ", b->date);
    put_line_safe(b->command);
    for (size_t i = 0; i < b->params.n; i++) {
        printf("\n# params.%s: ", b->params.v[i].key);
        put_line_safe(b->params.v[i].value);
    }
    for (size_t i = 0; i < b->meta.n; i++) {
        fputs("\n# meta.", stdout);
        put_line_safe(b->meta.v[i].key);
        fputs(": ", stdout);
        put_line_safe(b->meta.v[i].value);
    }
    printf("\n#\n");
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
    for (size_t c = 0; c < d->ncolumns; c++)
        printf("%*.6g", col_width(d->columns[c].name, 0), b->row_columns[i * d->ncolumns + c]);
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

/* ---- JSON ------------------------------------------------------------------------------- */

static char *tmp_path(const char *path)
{
    size_t len = strlen(path) + 5;
    char *tmp = malloc(len);

    if (tmp != NULL)
        snprintf(tmp, len, "%s.tmp", path);
    return tmp;
}

mln_status_t mln_bench_report_probe(mln_bench_t *b, const char *path)
{
    char *tmp = tmp_path(path);
    FILE *fp;

    if (tmp == NULL)
        return mln_bench_fail(b, "out of memory");
    fp = fopen(tmp, "w");
    if (fp == NULL) {
        mln_bench_fail(b, "--json: cannot write '%s': %s", tmp, strerror(errno));
        free(tmp);
        return MLN_ERR_ARG;
    }
    fclose(fp);
    remove(tmp);
    free(tmp);
    return MLN_OK;
}

static void json_kv_object(FILE *fp, const bench_kv_list_t *l, const char *indent)
{
    fputc('{', fp);
    for (size_t i = 0; i < l->n; i++) {
        fprintf(fp, "%s\n%s  ", i ? "," : "", indent);
        mln_json_write_string(fp, l->v[i].key);
        fputs(": ", fp);
        if (l->v[i].numeric)
            fputs(l->v[i].value, fp);
        else
            mln_json_write_string(fp, l->v[i].value);
    }
    fprintf(fp, "%s}", l->n ? "\n    " : "");
}

static void json_provenance(const mln_bench_t *b, FILE *fp)
{
    fputs("  \"provenance\": {\n    \"multilane_version\": ", fp);
    mln_json_write_string(fp, mln_version_string());
    fputs(",\n    \"mpi_library\": ", fp);
    mln_json_write_string(fp, b->mpi_library);
    fputs(",\n    \"mpi_standard\": ", fp);
    mln_json_write_string(fp, b->mpi_standard);
    fprintf(fp, ",\n    \"nranks\": %d,\n    \"nhosts\": %d,\n    \"hosts\": [", b->nranks,
            b->nhosts);
    for (int i = 0; i < b->nhosts; i++) {
        fputs(i ? ", " : "", fp);
        mln_json_write_string(fp, host_name(b, i));
    }
    fputs("],\n    \"date\": ", fp);
    mln_json_write_string(fp, b->date);
    fputs(",\n    \"command\": ", fp);
    mln_json_write_string(fp, b->command);
    fputs(",\n    \"params\": ", fp);
    json_kv_object(fp, &b->params, "    ");
    fputs(",\n    \"meta\": ", fp);
    json_kv_object(fp, &b->meta, "    ");
    fputs("\n  },\n", fp);
}

static void json_metrics(const mln_bench_t *b, FILE *fp)
{
    const mln_bench_desc_t *d = b->desc;
    int first = 1;

    fputs("  \"metrics\": [", fp);
    for (size_t j = 0; j < d->ntests; j++) {
        const mln_bench_metric_t *m = &d->tests[j].metric;
        if (!b->selected[j])
            continue;
        fputs(first ? "\n    {\"name\": " : ",\n    {\"name\": ", fp);
        first = 0;
        mln_json_write_string(fp, m->name);
        fputs(", \"unit\": ", fp);
        mln_json_write_string(fp, m->unit);
        fputs(", \"statistic\": ", fp);
        mln_json_write_string(fp, m->statistic);
        fputs(", \"description\": ", fp);
        mln_json_write_string(fp, m->description);
        fprintf(fp, ", \"higher_is_better\": %s}", m->higher_is_better ? "true" : "false");
    }
    fputs("\n  ],\n", fp);
}

static void json_rows(const mln_bench_t *b, FILE *fp)
{
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
            fprintf(fp, ", \"%s\": ", d->columns[c].name);
            mln_json_write_number(fp, b->row_columns[i * d->ncolumns + c]);
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
    char *tmp = tmp_path(path);
    FILE *fp = NULL;
    mln_status_t st = MLN_OK;

    if (tmp == NULL)
        return mln_bench_fail(b, "out of memory");
    fp = fopen(tmp, "w");
    if (fp == NULL) {
        st = mln_bench_fail(b, "--json: cannot write '%s': %s", tmp, strerror(errno));
        goto out;
    }
    fputs("{\n  \"schema\": \"multilane-result\",\n  \"data_version\": 1,\n  \"benchmark\": ", fp);
    mln_json_write_string(fp, b->desc->name);
    fprintf(fp, ",\n  \"status\": \"%s\",\n  \"errors\": %llu,\n",
            b->total_errors ? "fail" : "pass", (unsigned long long)b->total_errors);
    json_provenance(b, fp);
    json_metrics(b, fp);
    json_rows(b, fp);
    fputs("}\n", fp);
    if (ferror(fp)) {
        st = mln_bench_fail(b, "--json: cannot write '%s': %s", tmp, strerror(errno));
        fclose(fp);
        goto err_remove;
    }
    if (fclose(fp) != 0) {
        st = mln_bench_fail(b, "--json: cannot write '%s': %s", tmp, strerror(errno));
        goto err_remove;
    }
    if (rename(tmp, path) != 0) {
        st =
            mln_bench_fail(b, "--json: cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
        goto err_remove;
    }
    goto out;

err_remove:
    remove(tmp);
out:
    free(tmp);
    return st;
}
