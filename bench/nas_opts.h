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
    const char *name;    /* "--keys" */
    const char *metavar; /* "N" */
    long *into;
    long min;         /* the smallest value allowed */
    const char *help; /* what it sets, its default */
} nas_opt_t;

/* A kernel's command line: its name, what it does (one line), its own options. */
typedef struct nas_cmd {
    const char *prog; /* "mln-nas-is" */
    const char *summary;
    const nas_opt_t *opts;
    int n;
} nas_cmd_t;

/* The options every kernel takes (nas_parse fills it). */
typedef struct nas_common {
    long inject;                    /* --inject-error RANK; -1: none */
    long split;                     /* --split S; 0: P / 2 */
    const char *json;               /* --json FILE; NULL: none */
    const char *meta[NAS_MAX_META]; /* the --meta arguments, KEY=VALUE each, in order */
    int nmeta;
    int help; /* --help: nas_help, and nothing else */
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

/* Reads argv[1..] into the kernel's options (their defaults already there) and the common
 * options into *c: NULL, or why not (an unknown argument, a missing value, a value that is no
 * integer or below its minimum, a bad --json or --meta). */
static inline const char *nas_parse(int argc, char **argv, const nas_cmd_t *cmd, nas_common_t *c)
{
    *c = (nas_common_t){.inject = -1};
    for (int i = 1; i < argc; i++) {
        const nas_opt_t common[] = {{"--inject-error", "RANK", &c->inject, 0, NULL},
                                    {"--split", "S", &c->split, 0, NULL}};
        const nas_opt_t *o = NULL;
        char *end = NULL;

        if (strcmp(argv[i], "--help") == 0) {
            c->help = 1;
            continue;
        }
        for (int k = 0; k < cmd->n + 2 && o == NULL; k++) {
            const nas_opt_t *each = k < cmd->n ? &cmd->opts[k] : &common[k - cmd->n];
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

static inline void nas_help_line(const char *name, const char *metavar, const char *help)
{
    char flag[40];

    snprintf(flag, sizeof(flag), "%s%s%s", name, metavar ? " " : "", metavar ? metavar : "");
    printf("  %-20s %s\n", flag, help);
}

/* --help on stdout: the kernel's options, then the common ones (docs/METRICS.md, nas). */
static inline void nas_help(const nas_cmd_t *cmd)
{
    printf("usage: %s [options]\n%s\n\nkernel options:\n", cmd->prog, cmd->summary);
    for (int k = 0; k < cmd->n; k++)
        nas_help_line(cmd->opts[k].name, cmd->opts[k].metavar, cmd->opts[k].help);
    printf("\noptions:\n");
    nas_help_line("--split", "S",
                  "the first rank of the second site (default 0: P / 2); the result's bytes "
                  "are what an iteration sends between the sites");
    nas_help_line("--json", "FILE", "also write the result as JSON (multilane-result, v1)");
    nas_help_line("--meta", "KEY=VALUE", "copy KEY=VALUE into the provenance (repeatable)");
    nas_help_line("--inject-error", "RANK",
                  "for testing: that rank spoils one value of its result (the run must FAIL)");
    nas_help_line("--help", NULL, "print this help and exit");
    printf("\nexit status: 0 verified, 1 wrong result, 2 usage error or no memory, 3 the JSON "
           "not written.\n");
}

/* A usage error: "PROG: WHY" on stderr, from rank 0 only; returns 2, the exit status of a
 * usage error. */
static inline int nas_usage(int rank, const char *prog, const char *why)
{
    if (rank == 0)
        fprintf(stderr, "%s: %s (%s --help lists the options)\n", prog, why, prog);
    return 2;
}

#endif /* MLN_NAS_OPTS_H */
