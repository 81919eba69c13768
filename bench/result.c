/*
 * result.c - the provenance of a run and the JSON result document (see result.h), shared by
 * the harness (harness_report.c) and mln-matmul so that every program writes the same block
 * and the same document.
 */
#include "result.h"
#include "mln_core.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- key/value lists -------------------------------------------------------------------- */

mln_status_t mln_kv_set(mln_kv_list_t *l, const char *key, size_t keylen, const char *value,
                        int numeric)
{
    mln_kv_t *grown, *kv = NULL;
    char *k, *v;

    for (size_t i = 0; i < l->n; i++)
        if (strlen(l->v[i].key) == keylen && strncmp(l->v[i].key, key, keylen) == 0)
            kv = &l->v[i];
    k = strndup(key, keylen);
    v = strdup(value);
    if (k == NULL || v == NULL)
        goto err_free;
    if (kv == NULL) {
        grown = realloc(l->v, (l->n + 1) * sizeof(*grown));
        if (grown == NULL)
            goto err_free;
        l->v = grown;
        kv = &l->v[l->n++];
    } else {
        free(kv->key);
        free(kv->value);
    }
    *kv = (mln_kv_t){.key = k, .value = v, .numeric = numeric};
    return MLN_OK;

err_free:
    free(k);
    free(v);
    return MLN_ERR_NOMEM;
}

mln_status_t mln_kv_set_int(mln_kv_list_t *l, const char *key, int64_t value)
{
    char text[32];

    snprintf(text, sizeof(text), "%lld", (long long)value);
    return mln_kv_set(l, key, strlen(key), text, 1);
}

void mln_kv_free(mln_kv_list_t *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].key);
        free(l->v[i].value);
    }
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

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

mln_status_t mln_prov_collect(MPI_Comm comm, const mln_bench_coll_t *coll, mln_prov_t *p)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    char name[MPI_MAX_PROCESSOR_NAME] = "";
    char *all = NULL;
    mln_status_t st = MLN_OK;
    int len = 0, major = 0, minor = 0, rank = 0;
    time_t now = time(NULL);
    struct tm tm;

    memset(p, 0, sizeof(*p));
    MLN_MPI_CHECK(MPI_Comm_rank(comm, &rank), st, out);
    MLN_MPI_CHECK(MPI_Comm_size(comm, &p->nranks), st, out);
    MLN_MPI_CHECK(MPI_Get_library_version(lib, &len), st, out);
    first_line(lib, p->mpi_library, sizeof(p->mpi_library));
    if (p->mpi_library[0] == '\0')
        snprintf(p->mpi_library, sizeof(p->mpi_library), "unknown");
    MLN_MPI_CHECK(MPI_Get_version(&major, &minor), st, out);
    snprintf(p->mpi_standard, sizeof(p->mpi_standard), "%d.%d", major, minor);
    if (gmtime_r(&now, &tm) == NULL ||
        strftime(p->date, sizeof(p->date), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(p->date, sizeof(p->date), "unknown");

    MLN_MPI_CHECK(MPI_Get_processor_name(name, &len), st, out);
    if (rank == 0) {
        all = calloc((size_t)p->nranks, MPI_MAX_PROCESSOR_NAME);
        if (all == NULL) { /* the caller aborts the run: the others wait in the gather */
            st = MLN_ERR_NOMEM;
            goto out;
        }
    }
    MLN_MPI_CHECK(coll->gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, 0, comm), st, out);
    if (rank == 0) {
        /* Distinct names in rank order, packed to the front. */
        for (int r = 0; r < p->nranks; r++) {
            char *h = all + (size_t)r * MPI_MAX_PROCESSOR_NAME;
            int seen = 0;
            h[MPI_MAX_PROCESSOR_NAME - 1] = '\0';
            for (int k = 0; k < p->nhosts && !seen; k++)
                seen = strcmp(all + (size_t)k * MPI_MAX_PROCESSOR_NAME, h) == 0;
            if (!seen)
                memmove(all + (size_t)p->nhosts++ * MPI_MAX_PROCESSOR_NAME, h,
                        MPI_MAX_PROCESSOR_NAME);
        }
        p->host_names = all;
        all = NULL;
    }
out:
    free(all);
    return st;
}

void mln_prov_free(mln_prov_t *p)
{
    free(p->host_names);
    p->host_names = NULL;
    p->nhosts = 0;
}

static const char *host_name(const mln_prov_t *p, int i)
{
    return p->host_names + (size_t)i * MPI_MAX_PROCESSOR_NAME;
}

/* Prints `s` on one line: control characters (a newline in --meta) become escapes. */
static void put_line_safe(const char *s)
{
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '\n')
            fputs("\\n", stdout);
        else if (*c == '\t')
            fputs("\\t", stdout);
        else if (*c < 0x20 || *c == 0x7f)
            printf("\\x%02x", *c);
        else
            putchar(*c);
    }
}

void mln_prov_print(const mln_prov_t *p, const char *name, const char *description,
                    const char *command, const mln_kv_list_t *params, const mln_kv_list_t *meta)
{
    printf("# mln-%s: %s\n", name, description);
    printf("# multilane_version: %s\n", mln_version_string());
    printf("# mpi_library: %s\n# mpi_standard: %s\n", p->mpi_library, p->mpi_standard);
    printf("# nranks: %d\n# nhosts: %d\n# hosts:", p->nranks, p->nhosts);
    for (int i = 0; i < p->nhosts; i++)
        printf(" %s", host_name(p, i));
    printf("\n# date: %s\n# command: ", p->date);
    put_line_safe(command);
    for (size_t i = 0; i < params->n; i++) {
        printf("\n# params.%s: ", params->v[i].key);
        put_line_safe(params->v[i].value);
    }
    for (size_t i = 0; i < meta->n; i++) {
        fputs("\n# meta.", stdout);
        put_line_safe(meta->v[i].key);
        fputs(": ", stdout);
        put_line_safe(meta->v[i].value);
    }
    printf("\n#\n");
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

/* path.tmp opened for writing: the stream, and the name in *tmp (free it); NULL with err set
 * and *st the status (no memory, or the file cannot be made). */
static FILE *open_tmp(const char *path, char **tmp, mln_status_t *st, char *err, size_t errlen)
{
    FILE *fp;

    *tmp = tmp_path(path);
    if (*tmp == NULL) {
        snprintf(err, errlen, "out of memory");
        *st = MLN_ERR_NOMEM;
        return NULL;
    }
    fp = fopen(*tmp, "w");
    if (fp == NULL) {
        snprintf(err, errlen, "--json: cannot write '%s': %s", *tmp, strerror(errno));
        *st = MLN_ERR_SYS;
    }
    return fp;
}

mln_status_t mln_result_probe(const char *path, char *err, size_t errlen)
{
    char *tmp = NULL;
    mln_status_t st = MLN_OK;
    FILE *fp = open_tmp(path, &tmp, &st, err, errlen);

    if (fp == NULL) {
        free(tmp);
        return st == MLN_ERR_SYS ? MLN_ERR_ARG
                                 : st; /* a path that cannot be written: an argument */
    }
    fclose(fp);
    remove(tmp);
    free(tmp);
    return MLN_OK;
}

static void json_kv_object(FILE *fp, const mln_kv_list_t *l, const char *indent)
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

static void json_provenance(FILE *fp, const mln_result_doc_t *doc)
{
    const mln_prov_t *p = doc->prov;

    fputs("  \"provenance\": {\n    \"multilane_version\": ", fp);
    mln_json_write_string(fp, mln_version_string());
    fputs(",\n    \"mpi_library\": ", fp);
    mln_json_write_string(fp, p->mpi_library);
    fputs(",\n    \"mpi_standard\": ", fp);
    mln_json_write_string(fp, p->mpi_standard);
    fprintf(fp, ",\n    \"nranks\": %d,\n    \"nhosts\": %d,\n    \"hosts\": [", p->nranks,
            p->nhosts);
    for (int i = 0; i < p->nhosts; i++) {
        fputs(i ? ", " : "", fp);
        mln_json_write_string(fp, host_name(p, i));
    }
    fputs("],\n    \"date\": ", fp);
    mln_json_write_string(fp, p->date);
    fputs(",\n    \"command\": ", fp);
    mln_json_write_string(fp, doc->command);
    fputs(",\n    \"params\": ", fp);
    json_kv_object(fp, doc->params, "    ");
    fputs(",\n    \"meta\": ", fp);
    json_kv_object(fp, doc->meta, "    ");
    fputs("\n  },\n", fp);
}

static void json_metrics(FILE *fp, const mln_result_doc_t *doc)
{
    fputs("  \"metrics\": [", fp);
    for (size_t j = 0; j < doc->nmetrics; j++) {
        const mln_bench_metric_t *m = doc->metrics[j];
        fputs(j == 0 ? "\n    {\"name\": " : ",\n    {\"name\": ", fp);
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

mln_status_t mln_result_write(const char *path, const mln_result_doc_t *doc, char *err,
                              size_t errlen)
{
    char *tmp = NULL;
    mln_status_t st = MLN_OK;
    FILE *fp = open_tmp(path, &tmp, &st, err, errlen);

    if (fp == NULL)
        goto out;
    fputs("{\n  \"schema\": \"multilane-result\",\n  \"data_version\": 1,\n  \"benchmark\": ", fp);
    mln_json_write_string(fp, doc->benchmark);
    fprintf(fp, ",\n  \"status\": \"%s\",\n  \"errors\": %llu,\n", doc->errors ? "fail" : "pass",
            (unsigned long long)doc->errors);
    json_provenance(fp, doc);
    json_metrics(fp, doc);
    doc->rows(fp, doc->rows_arg);
    fputs("}\n", fp);
    if (ferror(fp)) {
        snprintf(err, errlen, "--json: cannot write '%s': %s", tmp, strerror(errno));
        fclose(fp);
        goto err_remove;
    }
    if (fclose(fp) != 0) {
        snprintf(err, errlen, "--json: cannot write '%s': %s", tmp, strerror(errno));
        goto err_remove;
    }
    if (rename(tmp, path) != 0) {
        snprintf(err, errlen, "--json: cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
        goto err_remove;
    }
    goto out;

err_remove:
    st = MLN_ERR_SYS;
    remove(tmp);
out:
    free(tmp);
    return st;
}
