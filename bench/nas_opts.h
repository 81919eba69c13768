/*
 * nas_opts.h - the command line of the NAS-style kernels (mln-nas-is, -mg, -lu): plain MPI
 * programs that link nothing of Multilane, so the little they share is this header.
 *
 * Every option is "--NAME VALUE" with an integer VALUE; --inject-error RANK (a rank, >= 0) is
 * common to all: that rank spoils one value of its result, and the verification must fail.
 */
#ifndef MLN_NAS_OPTS_H
#define MLN_NAS_OPTS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct nas_opt {
    const char *name; /* "--keys" */
    long *into;
    long min; /* the smallest value allowed */
} nas_opt_t;

/* Reads argv[1..] into the n options' longs (their defaults already there): NULL, or why not
 * (an unknown argument, a missing value, a value that is no integer or below its minimum). */
static inline const char *nas_parse(int argc, char **argv, const nas_opt_t *opts, int n)
{
    for (int i = 1; i < argc; i++) {
        const nas_opt_t *o = NULL;
        char *end = NULL;

        for (int k = 0; k < n && o == NULL; k++)
            if (strcmp(argv[i], opts[k].name) == 0)
                o = &opts[k];
        if (o == NULL)
            return "unknown argument";
        if (i + 1 == argc)
            return "a value is missing";
        *o->into = strtol(argv[++i], &end, 10);
        if (end == argv[i] || *end != '\0' || *o->into < o->min)
            return "values are positive integers (--inject-error: a rank)";
    }
    return NULL;
}

/* A usage error: "PROG: WHY" and "usage: PROG HELP" on stderr, from rank 0 only; returns 2,
 * the exit status of a usage error. */
static inline int nas_usage(int rank, const char *prog, const char *why, const char *help)
{
    if (rank == 0)
        fprintf(stderr, "%s: %s\nusage: %s %s\n", prog, why, prog, help);
    return 2;
}

#endif /* MLN_NAS_OPTS_H */
