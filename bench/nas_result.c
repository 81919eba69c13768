/*
 * nas_result.c - the JSON result of the NAS-style kernels (nas_result.h): the provenance and
 * the document are result.c's, as for every benchmark; the host names go to rank 0 by
 * point-to-point (coll_p2p.c), as in mln-relay, so nothing here needs more of MPI than the
 * kernel itself.
 */
#include "nas_result.h"
#include "coll.h"
#include "harness_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void json_rows(FILE *fp, const void *arg)
{
    const nas_result_t *r = arg;
    const unsigned long long per_iter = r->iters > 0 ? r->cross_bytes / (uint64_t)r->iters : 0;

    fprintf(fp,
            "  \"rows\": [\n    {\"bytes\": %llu, \"iters\": %ld, \"errors\": %d, "
            "\"problem_bytes\": %llu",
            per_iter, r->iters, r->verified ? 0 : 1, (unsigned long long)r->problem_bytes);
    for (int k = 0; k < r->nmetrics; k++) {
        const char *name = r->metrics[k].name;
        fprintf(fp, ", \"%s\": ", name);
        mln_json_write_number(fp, r->values[k]);
        fprintf(fp, ", \"%s_min\": ", name);
        mln_json_write_number(fp, r->values[k]);
        fprintf(fp, ", \"%s_max\": ", name);
        mln_json_write_number(fp, r->values[k]);
    }
    fputs("}\n  ]\n", fp);
}

int nas_result_probe(const nas_common_t *c, const char *prog)
{
    char err[512] = "";
    int rank = 0, rc = 0;

    if (c->json == NULL)
        return 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0 && mln_result_probe(c->json, err, sizeof(err)) != MLN_OK) {
        fprintf(stderr, "%s: %s\n", prog, err);
        rc = 2;
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return rc;
}

void nas_result_param(nas_result_t *r, const char *key, long value)
{
    if (mln_kv_set_int(&r->params, key, value) != MLN_OK)
        r->nomem = 1;
}

/* The common params and the --meta pairs, after the kernel's own: 0 or -1 (no memory). */
static int common_params(nas_result_t *r, const nas_common_t *c, int split, mln_kv_list_t *meta)
{
    int bad = 0;

    nas_result_param(r, "split", split);
    nas_result_param(r, "reps", 1);
    nas_result_param(r, "warmup", 0);
    if (c->inject >= 0)
        nas_result_param(r, "inject_error", c->inject);
    bad |= mln_kv_set(&r->params, "verified", 8, r->verified ? "true" : "false", 1) != MLN_OK;
    for (int i = 0; i < c->nmeta; i++) {
        const char *eq = strchr(c->meta[i], '=');
        bad |= mln_kv_set(meta, c->meta[i], (size_t)(eq - c->meta[i]), eq + 1, 0) != MLN_OK;
    }
    return bad || r->nomem ? -1 : 0;
}

int nas_result_write(nas_result_t *r, const nas_common_t *c, const char *prog, int argc,
                     char **argv)
{
    mln_kv_list_t meta = {0};
    mln_prov_t prov;
    char err[512] = "";
    char *command = NULL;
    int rank = 0, size = 1, rc = 0;

    if (c->json == NULL)
        goto out;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (mln_prov_collect(MPI_COMM_WORLD, &mln_bench_coll_p2p, &prov) != MLN_OK) {
        fprintf(stderr, "%s: rank %d: cannot collect the provenance\n", prog, rank);
        MPI_Abort(MPI_COMM_WORLD, 3); /* the other ranks may wait in the gather */
    }
    if (rank == 0) {
        command = mln_command_line(argc, argv);
        if (command == NULL || common_params(r, c, nas_split(c, size), &meta) != 0) {
            snprintf(err, sizeof(err), "out of memory");
            rc = 3;
        } else {
            const mln_bench_metric_t *defs[NAS_MAX_METRICS];
            mln_result_doc_t doc = {.benchmark = r->benchmark,
                                    .errors = r->verified ? 0 : 1,
                                    .prov = &prov,
                                    .command = command,
                                    .params = &r->params,
                                    .meta = &meta,
                                    .metrics = defs,
                                    .nmetrics = (size_t)r->nmetrics,
                                    .rows = json_rows,
                                    .rows_arg = r};

            for (int k = 0; k < r->nmetrics; k++)
                defs[k] = &r->metrics[k];
            if (mln_result_write(c->json, &doc, err, sizeof(err)) != MLN_OK)
                rc = 3;
        }
        if (rc != 0)
            fprintf(stderr, "%s: error: %s\n", prog, err);
    }
    mln_prov_free(&prov);
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
out:
    free(command);
    mln_kv_free(&meta);
    mln_kv_free(&r->params);
    return rc;
}
