/*
 * result.h - what every benchmark result carries, written once for the harness (harness.c)
 * and for the stand-alone programs that do not fit a message-size sweep (mln-matmul): the
 * provenance of the run (MPI library and standard, ranks, hosts, date, command, params, meta)
 * as the '#' block of the text output and as the JSON "provenance" object, and the JSON
 * result document itself (schema multilane-result, data_version 1:
 * python/multilane/schemas/result-v1.json, docs/METRICS.md), written to PATH.tmp and renamed.
 */
#ifndef MLN_RESULT_H
#define MLN_RESULT_H

#include "coll.h"
#include "harness.h"

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>

/* ---- key/value lists ("params", "meta") ------------------------------------------------- */

/* One entry: the value as text, written raw in the JSON when numeric. */
typedef struct mln_kv {
    char *key;
    char *value;
    int numeric;
} mln_kv_t;

typedef struct mln_kv_list {
    mln_kv_t *v;
    size_t n;
} mln_kv_list_t;

/* Sets key[0..keylen) to a copy of `value`, replacing an earlier value of that key (the last
 * --meta KEY=... wins) and keeping its place.  MLN_ERR_NOMEM leaves the list as it was. */
mln_status_t mln_kv_set(mln_kv_list_t *l, const char *key, size_t keylen, const char *value,
                        int numeric);
/* The same for a whole key and an integer value (written as a JSON number). */
mln_status_t mln_kv_set_int(mln_kv_list_t *l, const char *key, int64_t value);
void mln_kv_free(mln_kv_list_t *l);

/* ---- provenance ------------------------------------------------------------------------- */

typedef struct mln_prov {
    char mpi_library[MPI_MAX_LIBRARY_VERSION_STRING]; /* first line, blanks collapsed */
    char mpi_standard[32];                            /* "3.1" */
    char date[32];                                    /* UTC, ISO 8601 */
    int nranks;
    int nhosts;       /* distinct processor names (rank 0; 0 elsewhere) */
    char *host_names; /* rank 0: nhosts names of MPI_MAX_PROCESSOR_NAME chars, rank order */
} mln_prov_t;

/* Fills `p` for the ranks of `comm` (collective: every rank calls it; the names are gathered
 * to rank 0 with coll->gather: coll.h).  On MLN_ERR_NOMEM (rank 0) the other ranks may still wait
 * in MPI_Gather: the caller aborts the run.  Free with mln_prov_free. */
mln_status_t mln_prov_collect(MPI_Comm comm, const mln_bench_coll_t *coll, mln_prov_t *p);
void mln_prov_free(mln_prov_t *p);

/* Rank 0, stdout: the '#' block "# mln-NAME: DESCRIPTION", multilane_version, mpi_library,
 * ..., command, one "# params.KEY: VALUE" per param and "# meta.KEY: VALUE" per meta entry,
 * and a closing "#" line.  Control characters in values are escaped (one line each). */
void mln_prov_print(const mln_prov_t *p, const char *name, const char *description,
                    const char *command, const mln_kv_list_t *params, const mln_kv_list_t *meta);

/* ---- the JSON result document ------------------------------------------------------------ */

/* Writes `  "rows": [...]\n` (the document's last member) for mln_result_write. */
typedef void (*mln_result_rows_fn)(FILE *fp, const void *arg);

typedef struct mln_result_doc {
    const char *benchmark; /* "pt2pt": [a-z][a-z0-9_]* */
    uint64_t errors;       /* status is "fail" exactly when errors > 0 */
    const mln_prov_t *prov;
    const char *command;
    const mln_kv_list_t *params, *meta;
    const mln_bench_metric_t *const *metrics; /* in the benchmark's order */
    size_t nmetrics;
    mln_result_rows_fn rows;
    const void *rows_arg;
} mln_result_doc_t;

/* Checks that `path` can be written: creates and removes PATH.tmp.  On failure one line
 * ("--json: cannot write 'PATH.tmp': <strerror>") in err. */
mln_status_t mln_result_probe(const char *path, char *err, size_t errlen);
/* Writes the document to PATH.tmp, then renames it to PATH (a reader never sees half a file);
 * on failure removes PATH.tmp and puts one line in err. */
mln_status_t mln_result_write(const char *path, const mln_result_doc_t *doc, char *err,
                              size_t errlen);

#endif /* MLN_RESULT_H */
