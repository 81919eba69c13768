/*
 * mln-config: prints the Multilane tunables table, or checks the environment against it.
 *
 *   mln-config            table: variable, type, default, current value, help
 *   mln-config --json     the same as a JSON list
 *   mln-config --check    exit 2 with one line naming the first invalid MLN_* variable
 *   mln-config --version  the library version
 *
 * Needs no MPI initialisation; `multilane config` runs it.
 */
#include "multilane.h"

#include <stdio.h>
#include <string.h>

static int usage(FILE *fp, int rc)
{
    fprintf(fp, "usage: mln-config [--json | --check | --version | --help]\n");
    return rc;
}

int main(int argc, char **argv)
{
    size_t n;
    const mln_tunable_t *table = mln_tunables(&n);
    mln_config_t cfg;
    char err[512] = "";
    int json = 0, check = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--check") == 0) {
            check = 1;
        } else if (strcmp(argv[i], "--version") == 0) {
            printf("multilane %s\n", mln_version_string());
            return 0;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            return usage(stdout, 0);
        } else {
            fprintf(stderr, "mln-config: error: unknown option '%s'\n", argv[i]);
            return usage(stderr, 2);
        }
    }
    if (mln_config_load(NULL, NULL, &cfg, err, sizeof(err)) != MLN_OK) {
        fprintf(stderr, "%s\n", err);
        if (check)
            return 2;
    } else if (check) {
        return 0;
    }
    if (mln_tunables_print(table, n, NULL, NULL, json, stdout) != MLN_OK) {
        fprintf(stderr, "mln-config: error: cannot write the table\n");
        return 1;
    }
    return err[0] ? 2 : 0;
}
