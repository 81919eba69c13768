/*
 * sitemap.c - who is where: hosts (same MPI processor name) and sites (S3).
 *
 * Only peers on another site are striped.  By default every host is its own site, so any
 * two hosts are "remote" (on a cluster behind one switch, set MLN_SITE_MAP to group them).
 * MLN_NODE_SIZE = N (a test hook, as for the broadcast) cuts each host into emulated hosts of
 * N consecutive ranks, named "host#0", "host#1", ...
 * MLN_SITE_MAP = "pattern=site,pattern=site,...": the first shell pattern (fnmatch) that
 * matches a host name gives its site; hosts that match none are their own site.
 */
#include "stripe_int.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#define NAME_LEN MPI_MAX_PROCESSOR_NAME

/* The site named for `host` by the map, or NULL. */
static const char *map_lookup(const char *map, const char *host, char *site, size_t len)
{
    char buf[sizeof(((mln_config_t *)0)->site_map)];
    char *save = NULL;

    snprintf(buf, sizeof(buf), "%s", map);
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        *eq = '\0';
        if (fnmatch(item, host, 0) == 0) {
            snprintf(site, len, "%s", eq + 1);
            return site;
        }
    }
    return NULL;
}

/* MLN_SITE_MAP syntax check: non-empty pattern=site items. */
static int map_valid(const char *map)
{
    const char *p = map;

    while (*p) {
        const char *end = strchr(p, ',');
        const char *eq = strchr(p, '=');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (eq == NULL || eq >= p + len || eq == p || eq + 1 == p + len)
            return 0;
        p += len + (end ? 1 : 0);
        if (end && *p == '\0')
            return 0;
    }
    return 1;
}

/* Index of `name` in `names` (adding it); names has room for wsize entries. */
static int intern(char (*names)[NAME_LEN], int *n, const char *name)
{
    for (int i = 0; i < *n; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    snprintf(names[*n], NAME_LEN, "%s", name);
    return (*n)++;
}

mln_status_t mln_sitemap_build(mln_stripe_t *s)
{
    mln_status_t st = MLN_OK;
    char me[NAME_LEN] = "", site[NAME_LEN];
    char(*all)[NAME_LEN] = NULL, (*hosts)[NAME_LEN] = NULL, (*sites)[NAME_LEN] = NULL;
    int len = 0, nsites = 0;

    if (!map_valid(s->cfg->site_map)) {
        MLN_ERROR("MLN_SITE_MAP: invalid value '%s' (expected pattern=site[,pattern=site...], "
                  "e.g. 'a*=siteA,b*=siteB')",
                  s->cfg->site_map);
        return MLN_ERR_CONFIG;
    }
    all = calloc((size_t)s->wsize, NAME_LEN);
    hosts = calloc((size_t)s->wsize, NAME_LEN);
    sites = calloc((size_t)s->wsize, NAME_LEN);
    s->host_of = calloc((size_t)s->wsize, sizeof(int));
    s->site_of = calloc((size_t)s->wsize, sizeof(int));
    if (!all || !hosts || !sites || !s->host_of || !s->site_of) {
        st = MLN_ERR_NOMEM;
        goto out;
    }
    MLN_MPI_CHECK(MPI_Get_processor_name(me, &len), st, out);
    MLN_MPI_CHECK(MPI_Allgather(me, NAME_LEN, MPI_CHAR, all, NAME_LEN, MPI_CHAR, MPI_COMM_WORLD),
                  st, out);
    for (int r = 0; r < s->wsize; r++)
        all[r][NAME_LEN - 1] = '\0';
    if (s->cfg->node_size > 0) /* from the last rank down: all[] is only read above r */
        for (int r = s->wsize - 1; r >= 0; r--) {
            char emu[NAME_LEN];
            int before = 0;
            for (int q = 0; q < r; q++)
                before += strcmp(all[q], all[r]) == 0;
            snprintf(emu, sizeof(emu), "%.*s#%lld", NAME_LEN - 24, all[r],
                     (long long)(before / s->cfg->node_size));
            snprintf(all[r], NAME_LEN, "%s", emu);
        }
    for (int r = 0; r < s->wsize; r++) {
        s->host_of[r] = intern(hosts, &s->nhosts, all[r]);
        if (map_lookup(s->cfg->site_map, all[r], site, sizeof(site)) == NULL)
            snprintf(site, sizeof(site), "host:%s", all[r]);
        s->site_of[r] = intern(sites, &nsites, site);
    }
    MLN_DEBUG("sites: %d hosts on %d sites; this rank: host %s", s->nhosts, nsites, me);
out:
    free(all);
    free(hosts);
    free(sites);
    return st;
}
