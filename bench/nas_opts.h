/*
 * nas_opts.h - the command line of the NAS-style kernels (mln-nas-is, -mg, -lu): plain MPI
 * programs that call no Multilane function, so the little they share is this header and the
 * result writer (nas_result.h).
 *
 * A kernel's own options are "--NAME VALUE" with an integer VALUE.  Common to all three:
 *   --inject-error RANK  that rank (>= 0) spoils one value of its result: the verification
 *                        must fail
 *   --split S            the first rank of the second site (0, the default: P / 2), which only
 *                        says which messages cross between the sites (the result's bytes)
 *   --json FILE          also write the result as JSON (nas_result.h)
 *   --meta KEY=VALUE     copied into the JSON's provenance (repeatable, the last of a key wins)
 */
#ifndef MLN_NAS_OPTS_H
#define MLN_NAS_OPTS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAS_MAX_META 64 /* --meta pairs (the CLI passes about 15) */

typedef struct nas_opt {
    const char *name; /* "--keys" */
    long *into;
    long min; /* the smallest value allowed */
} nas_opt_t;

/* The options every kernel takes (nas_parse fills it). */
typedef struct nas_common {
    long inject;                    /* --inject-error RANK; -1: none */
    long split;                     /* --split S; 0: P / 2 */
    const char *json;               /* --json FILE; NULL: none */
    const char *meta[NAS_MAX_META]; /* the --meta arguments, KEY=VALUE each, in order */
    int nmeta;
} nas_common_t;

/* A text option's value: NULL, or why not (--json: an empty name; --meta: no KEY=, too many). */
static inline const char *nas_text(nas_common_t *c, const char *name, const char *value)
{
    if (strcmp(name, "--json") == 0) {
        c->json = value;
        return value[0] == '\0' ? "--json: an empty file name" : NULL;
    }
    if (strchr(value, '=') == NULL || value[0] == '=')
        return "--meta: expected KEY=VALUE";
    if (c->nmeta == NAS_MAX_META)
        return "--meta: at most 64 pairs";
    c->meta[c->nmeta++] = value;
    return NULL;
}

/* Reads argv[1..] into the n options' longs (their defaults already there) and the common
 * options into *c: NULL, or why not (an unknown argument, a missing value, a value that is no
 * integer or below its minimum, a bad --json or --meta). */
static inline const char *nas_parse(int argc, char **argv, const nas_opt_t *opts, int n,
                                    nas_common_t *c)
{
    *c = (nas_common_t){.inject = -1};
    for (int i = 1; i < argc; i++) {
        const nas_opt_t common[] = {{"--inject-error", &c->inject, 0}, {"--split", &c->split, 0}};
        const nas_opt_t *o = NULL;
        char *end = NULL;

        for (int k = 0; k < n + 2 && o == NULL; k++) {
            const nas_opt_t *each = k < n ? &opts[k] : &common[k - n];
            if (strcmp(argv[i], each->name) == 0)
                o = each;
        }
        if (o == NULL && strcmp(argv[i], "--json") != 0 && strcmp(argv[i], "--meta") != 0)
            return "unknown argument";
        if (i + 1 == argc)
            return "a value is missing";
        if (o == NULL) {
            const char *bad = nas_text(c, argv[i], argv[i + 1]);
            i++;
            if (bad != NULL)
                return bad;
            continue;
        }
        *o->into = strtol(argv[++i], &end, 10);
        if (end == argv[i] || *end != '\0' || *o->into < o->min)
            return "values are positive integers (--inject-error, --split: a rank)";
    }
    return NULL;
}

/* The first rank of the second site for P ranks: --split, or P / 2; -1 when --split leaves
 * the second site no rank. */
static inline int nas_split(const nas_common_t *c, int size)
{
    if (c->split == 0)
        return size / 2;
    return c->split < size ? (int)c->split : -1;
}

/* A usage error: "PROG: WHY" and "usage: PROG HELP" (the kernel's options, then the common
 * ones) on stderr, from rank 0 only; returns 2, the exit status of a usage error. */
static inline int nas_usage(int rank, const char *prog, const char *why, const char *help)
{
    if (rank == 0)
        fprintf(stderr,
                "%s: %s\nusage: %s %s\n"
                "  and [--inject-error RANK] [--split S] [--json FILE] [--meta KEY=VALUE]...: "
                "RANK spoils one value of its result (the verification must fail); S the first "
                "rank of the second site (default P / 2: the bytes that cross between the "
                "sites); the result also as JSON; KEY=VALUE into its provenance\n",
                prog, why, prog, help);
    return 2;
}

#endif /* MLN_NAS_OPTS_H */
