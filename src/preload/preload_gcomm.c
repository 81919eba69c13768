/*
 * preload_gcomm.c - communicators that span sites in grid mode (docs/PRELOAD.md, "Grid mode").
 *
 * The program's MPI_COMM_WORLD is the grid's world; a communicator it makes from a grid
 * communicator (Comm_dup, Comm_split, Comm_create...) either keeps ranks of several sites, and
 * then is one of these, or lies inside one site, and then is a plain communicator of that
 * site's MPI (native speed, nothing of the layer's on it).
 *
 * A grid communicator is what the program holds (`handle`: MPI's communicator over this
 * site's members, made by the same MPI call on the parent's handle, so that attributes, error
 * handlers and names are MPI's own), a private communicator of the same members (`local`:
 * same-site messages and the site's part of collectives), its ranks (comm rank <-> global
 * rank <-> rank on the site) and two relay contexts, one for point-to-point and one for
 * collectives.  Making one is collective over the parent: one allgather of (color, key, the
 * lowest context each rank never used); the new contexts are above every member's, so no two
 * communicators a rank belongs to share one.
 */
#include "preload_grid.h"

#include <stdlib.h>
#include <string.h>

/* The relay contexts: 0 the world's messages, 1 the layer's, 2 and 3 the world's collectives
 * and neighbourhood collectives; the communicators the program makes take three each from
 * here on (GCOMM_CTXS). */
#define GCOMM_CTXS 3u
#define GCOMM_CTX_FIRST 4u

/* ---- lookup ---------------------------------------------------------------------------------- */

mln_pl_gcomm_t *mln_pl_gcomm(MPI_Comm comm)
{
    mln_pl_grid_t *g = mln_pl.grid;

    if (g == NULL || comm == MPI_COMM_NULL)
        return NULL;
    if (comm == MPI_COMM_WORLD)
        return &g->world;
    for (mln_pl_gcomm_t **pp = &g->comms; *pp; pp = &(*pp)->next)
        if ((*pp)->handle == comm) {
            mln_pl_gcomm_t *c = *pp;
            if (pp != &g->comms) { /* to the front: loops call on one communicator */
                *pp = c->next;
                c->next = g->comms;
                g->comms = c;
            }
            return c;
        }
    return NULL;
}

int mln_pl_grid_spans(MPI_Comm comm)
{
    return mln_pl_gcomm(comm) != NULL;
}

/* ---- making ---------------------------------------------------------------------------------- */

void mln_pl_gcomm_fini(mln_pl_gcomm_t *c)
{
    mln_pl_gtopo_free(c->topo);
    c->topo = NULL;
    free(c->world);
    free(c->lrank);
    free(c->of_local);
    free(c->of_global);
    free(c->site_k);
    free(c->site_pos);
    free(c->site_n);
    if (c->site_members != NULL)
        free(c->site_members[0]);
    free(c->site_members);
}

/* Fills c's maps from its members' global ranks (comm order); c->rank set by the caller. */
static int gcomm_maps(mln_pl_grid_t *g, mln_pl_gcomm_t *c, const int *world, int n)
{
    int nsites = mln_relay_nsites(g->relay), *first_of = malloc((size_t)nsites * sizeof(int));
    int *members;

    c->size = n;
    c->world = malloc((size_t)n * sizeof(int));
    c->lrank = malloc((size_t)n * sizeof(int));
    c->of_local = malloc((size_t)n * sizeof(int));
    c->of_global = malloc((size_t)g->size * sizeof(int));
    c->site_k = malloc((size_t)n * sizeof(int));
    c->site_pos = malloc((size_t)n * sizeof(int));
    c->site_n = calloc((size_t)nsites, sizeof(int));
    c->site_members = calloc((size_t)nsites, sizeof(int *));
    members = malloc((size_t)n * sizeof(int));
    if (first_of == NULL || c->world == NULL || c->lrank == NULL || c->of_local == NULL ||
        c->of_global == NULL || c->site_k == NULL || c->site_pos == NULL || c->site_n == NULL ||
        c->site_members == NULL || members == NULL) {
        free(first_of);
        free(members);
        return MPI_ERR_NO_MEM;
    }
    memcpy(c->world, world, (size_t)n * sizeof(int));
    for (int i = 0; i < g->size; i++)
        c->of_global[i] = -1;
    for (int s = 0; s < nsites; s++)
        first_of[s] = -1; /* site -> k */
    c->nsites = 0;
    c->nlocal = 0;
    for (int i = 0; i < n; i++) {
        int s = mln_relay_site_of_rank(g->relay, world[i]);
        c->of_global[world[i]] = i;
        if (first_of[s] < 0)
            first_of[s] = c->nsites++;
        c->site_k[i] = first_of[s];
        c->site_pos[i] = c->site_n[first_of[s]]++;
        c->lrank[i] = s == g->site ? c->nlocal : -1;
        if (s == g->site)
            c->of_local[c->nlocal++] = i;
    }
    c->site_members[0] = members; /* k's comm ranks, k after k */
    for (int k = 1; k < c->nsites; k++)
        c->site_members[k] = c->site_members[k - 1] + c->site_n[k - 1];
    for (int i = 0; i < n; i++)
        c->site_members[c->site_k[i]][c->site_pos[i]] = i;
    c->ksite = c->site_k[c->rank];
    free(first_of);
    return MPI_SUCCESS;
}

int mln_pl_gcomm_world(mln_pl_grid_t *g)
{
    mln_pl_gcomm_t *c = &g->world;
    int *world = malloc((size_t)g->size * sizeof(int)), rc;

    if (world == NULL)
        return MPI_ERR_NO_MEM;
    for (int i = 0; i < g->size; i++)
        world[i] = i;
    memset(c, 0, sizeof(*c));
    c->handle = MPI_COMM_WORLD;
    c->local = g->local;
    c->ctx = MLN_RELAY_CTX_WORLD;
    c->cctx = 2;
    c->nctx = 3;
    c->rank = g->rank;
    c->colls_tail = &c->colls;
    rc = gcomm_maps(g, c, world, g->size);
    free(world);
    g->next_ctx = GCOMM_CTX_FIRST;
    return rc;
}

/* What each rank of the parent says when a communicator is made from it. */
typedef struct gcomm_said {
    int color, key;
    uint32_t ctx;
} gcomm_said_t;

static int by_key(const void *a, const void *b)
{
    const int *x = a, *y = b; /* (key, parent rank) */
    return x[0] != y[0] ? (x[0] > y[0]) - (x[0] < y[0]) : (x[1] > y[1]) - (x[1] < y[1]);
}

/* The members of the communicator this rank's color makes (global ranks, new rank order),
 * *newrank, and the context every one of them agrees on. */
static int split_plan(mln_pl_gcomm_t *p, int color, int key, int **world, int *n, int *newrank,
                      uint32_t *ctx)
{
    mln_pl_grid_t *g = mln_pl.grid;
    gcomm_said_t me = {color, key, g->next_ctx}, *all = malloc((size_t)p->size * sizeof(me));
    int *order = malloc((size_t)p->size * 2 * sizeof(int)), rc;

    *world = NULL;
    *n = 0;
    if (all == NULL || order == NULL) {
        free(all);
        free(order);
        return MPI_ERR_NO_MEM;
    }
    rc = mln_pl_gcoll_allgather_bytes(p, &me, (int)sizeof(me), all);
    *ctx = 0;
    for (int i = 0; rc == MPI_SUCCESS && i < p->size; i++) {
        if (all[i].ctx > *ctx)
            *ctx = all[i].ctx;
        if (color != MPI_UNDEFINED && all[i].color == color) {
            order[2 * *n] = all[i].key;
            order[2 * *n + 1] = i;
            ++*n;
        }
    }
    if (rc == MPI_SUCCESS) /* above every context of every parent rank */
        g->next_ctx = *ctx + GCOMM_CTXS;
    if (rc == MPI_SUCCESS && *n > 0) {
        qsort(order, (size_t)*n, 2 * sizeof(int), by_key);
        if ((*world = malloc((size_t)*n * sizeof(int))) == NULL)
            rc = MPI_ERR_NO_MEM;
        for (int i = 0; rc == MPI_SUCCESS && i < *n; i++) {
            (*world)[i] = p->world[order[2 * i + 1]];
            if (order[2 * i + 1] == p->rank)
                *newrank = i;
        }
    }
    free(all);
    free(order);
    return rc;
}

/* 1 when every one of n global ranks is on this site. */
static int one_site(const int *world, int n)
{
    mln_pl_grid_t *g = mln_pl.grid;

    for (int i = 0; i < n; i++)
        if (mln_relay_site_of_rank(g->relay, world[i]) != g->site)
            return 0;
    return 1;
}

/* Registers the communicator made of world[0..n) (this rank: newrank) with MPI's handle and
 * local (both over this site's members, in new rank order). */
static int gcomm_add(const int *world, int n, int newrank, uint32_t ctx, MPI_Comm handle,
                     MPI_Comm local)
{
    mln_pl_grid_t *g = mln_pl.grid;
    mln_pl_gcomm_t *c = calloc(1, sizeof(*c));
    int rc;

    if (c == NULL)
        return MPI_ERR_NO_MEM;
    c->handle = handle;
    c->local = local;
    c->ctx = ctx;
    c->cctx = ctx + 1;
    c->nctx = ctx + 2;
    c->rank = newrank;
    c->colls_tail = &c->colls;
    rc = gcomm_maps(g, c, world, n);
    if (rc != MPI_SUCCESS) {
        mln_pl_gcomm_fini(c);
        free(c);
        return rc;
    }
    MPI_Comm_set_errhandler(local, MPI_ERRORS_RETURN);
    c->next = g->comms;
    g->comms = c;
    return MPI_SUCCESS;
}

/* The part every maker shares: the plan, MPI's communicators over this site's members (made by
 * make_handle on the parent's handle, and a split of the parent's local), the new one's entry
 * (or a plain communicator where it lies on this site). */
typedef int (*make_handle_fn)(MPI_Comm parent, int color, int key, void *arg, MPI_Comm *out);

static int gcomm_make(MPI_Comm comm, int color, int key, make_handle_fn make, void *arg,
                      MPI_Comm *newcomm)
{
    mln_pl_gcomm_t *p = mln_pl_gcomm(comm);
    MPI_Comm handle = MPI_COMM_NULL, local = MPI_COMM_NULL;
    int *world = NULL, n = 0, newrank = 0, rc;
    uint32_t ctx = 0;

    MLN_PL_LOCK();
    rc = split_plan(p, color, key, &world, &n, &newrank, &ctx);
    MLN_PL_UNLOCK();
    /* every site member of the parent takes part in MPI's calls, in new rank order */
    if (rc == MPI_SUCCESS)
        rc = make(p->handle, color, newrank, arg, &handle);
    if (rc == MPI_SUCCESS)
        rc = mln_pmpi.Comm_split(p->local, color, newrank, &local);
    *newcomm = MPI_COMM_NULL;
    if (rc == MPI_SUCCESS && n > 0) {
        if (one_site(world, n)) { /* MPI's own communicator, nothing of the layer's */
            *newcomm = handle;
            handle = MPI_COMM_NULL;
        } else {
            MLN_PL_LOCK();
            rc = gcomm_add(world, n, newrank, ctx, handle, local);
            MLN_PL_UNLOCK();
            if (rc == MPI_SUCCESS) {
                *newcomm = handle;
                handle = local = MPI_COMM_NULL;
            }
        }
    }
    if (handle != MPI_COMM_NULL)
        mln_pmpi.Comm_free(&handle);
    if (local != MPI_COMM_NULL)
        mln_pmpi.Comm_free(&local);
    free(world);
    return rc == MPI_SUCCESS ? rc : mln_pl_grid_fail_on(comm, rc);
}

static int make_split(MPI_Comm parent, int color, int key, void *arg, MPI_Comm *out)
{
    (void)arg;
    return mln_pmpi.Comm_split(parent, color, key, out);
}

static int make_dup(MPI_Comm parent, int color, int key, void *arg, MPI_Comm *out)
{
    (void)color;
    (void)key;
    return arg != NULL ? mln_pmpi.Comm_dup_with_info(parent, *(MPI_Info *)arg, out)
                       : mln_pmpi.Comm_dup(parent, out);
}

int mln_pl_gcomm_make(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
    return gcomm_make(comm, color, key, make_split, NULL, newcomm);
}

int mln_pl_grid_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
    if (color < 0 && color != MPI_UNDEFINED)
        return mln_pl_grid_fail_on(comm, MPI_ERR_ARG);
    return gcomm_make(comm, color, key, make_split, NULL, newcomm);
}

/* MPI's communicator over this site's members of world[0..n) (in that order), made from
 * parent (site-local: the parent's handle or local) with MPI_Comm_create_group. */
static int site_part(mln_pl_gcomm_t *p, MPI_Comm parent, const int *world, int n, int tag,
                     MPI_Comm *out)
{
    mln_pl_grid_t *g = mln_pl.grid;
    MPI_Group all = MPI_GROUP_NULL, mine = MPI_GROUP_NULL;
    int *ranks = malloc((size_t)n * sizeof(int)), m = 0, rc;

    if (ranks == NULL)
        return MPI_ERR_NO_MEM;
    for (int i = 0; i < n; i++)
        if (mln_relay_site_of_rank(g->relay, world[i]) == g->site)
            ranks[m++] = p->lrank[p->of_global[world[i]]];
    rc = mln_pmpi.Comm_group(parent, &all);
    if (rc == MPI_SUCCESS)
        rc = mln_pmpi.Group_incl(all, m, ranks, &mine);
    if (rc == MPI_SUCCESS)
        rc = mln_pmpi.Comm_create_group(parent, mine, tag, out);
    if (mine != MPI_GROUP_NULL)
        mln_pmpi.Group_free(&mine);
    if (all != MPI_GROUP_NULL)
        mln_pmpi.Group_free(&all);
    free(ranks);
    return rc;
}

/* MPI_Comm_create_group: collective over the members only, so the context is agreed among
 * them, by an allgather over a communicator of the moment (the members, the parent's
 * collective context, tags from 2^30 + tag on: never the parent's own collectives'). */
int mln_pl_gcomm_make_group(mln_pl_gcomm_t *p, const int *world, int n, int pos, int tag,
                            MPI_Comm *newcomm)
{
    mln_pl_grid_t *g = mln_pl.grid;
    MPI_Comm handle = MPI_COMM_NULL, local = MPI_COMM_NULL;
    mln_pl_gcomm_t t;
    uint32_t *said = NULL, ctx = 0;
    int rc;

    *newcomm = MPI_COMM_NULL;
    rc = site_part(p, p->handle, world, n, tag, &handle);
    if (rc == MPI_SUCCESS)
        rc = site_part(p, p->local, world, n, tag, &local);
    if (rc == MPI_SUCCESS && one_site(world, n)) {
        *newcomm = handle;
        mln_pmpi.Comm_free(&local);
        return MPI_SUCCESS;
    }
    memset(&t, 0, sizeof(t));
    t.local = local;
    t.handle = MPI_COMM_NULL;
    t.cctx = p->cctx;
    t.seq = 0x40000000u | ((uint32_t)tag & 0x3fffffffu);
    t.rank = pos;
    t.colls_tail = &t.colls;
    if (rc == MPI_SUCCESS)
        rc = gcomm_maps(g, &t, world, n);
    if (rc == MPI_SUCCESS && (said = malloc((size_t)n * sizeof(*said))) == NULL)
        rc = MPI_ERR_NO_MEM;
    MLN_PL_LOCK();
    if (rc == MPI_SUCCESS)
        rc = mln_pl_gcoll_allgather_bytes(&t, &g->next_ctx, (int)sizeof(g->next_ctx), said);
    for (int i = 0; rc == MPI_SUCCESS && i < n; i++)
        ctx = said[i] > ctx ? said[i] : ctx;
    if (rc == MPI_SUCCESS) {
        g->next_ctx = ctx + GCOMM_CTXS;
        rc = gcomm_add(world, n, pos, ctx, handle, local);
    }
    MLN_PL_UNLOCK();
    mln_pl_gcomm_fini(&t);
    free(said);
    if (rc == MPI_SUCCESS) {
        *newcomm = handle;
        return MPI_SUCCESS;
    }
    if (handle != MPI_COMM_NULL)
        mln_pmpi.Comm_free(&handle);
    if (local != MPI_COMM_NULL)
        mln_pmpi.Comm_free(&local);
    return rc;
}

/* A duplicate keeps the topology (its own copy, with its own private communicator). */
static int dup_topo(mln_pl_gcomm_t *p, int rc, MPI_Comm *newcomm)
{
    mln_pl_gcomm_t *c = rc == MPI_SUCCESS ? mln_pl_gcomm(*newcomm) : NULL;

    if (c == NULL || p->topo == NULL)
        return rc;
    rc = mln_pl_gtopo_dup(p, c);
    return rc == MPI_SUCCESS ? rc : mln_pl_grid_fail_on(p->handle, rc);
}

int mln_pl_grid_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
    mln_pl_gcomm_t *p = mln_pl_gcomm(comm);

    return dup_topo(p, gcomm_make(comm, 0, p->rank, make_dup, NULL, newcomm), newcomm);
}

int mln_pl_grid_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm)
{
    mln_pl_gcomm_t *p = mln_pl_gcomm(comm);

    return dup_topo(p, gcomm_make(comm, 0, p->rank, make_dup, &info, newcomm), newcomm);
}

/* Every rank of a site shares its host's memory only with ranks of its own site: the shared
 * (and finer) kinds are MPI's own split of the site's part. */
int mln_pl_grid_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info,
                                MPI_Comm *newcomm)
{
    mln_pl_gcomm_t *p = mln_pl_gcomm(comm);

    /* equal keys keep the parent's order, which the site's handle has too */
    return mln_pmpi.Comm_split_type(p->handle, split_type, key, info, newcomm);
}

/* ---- freeing, comparing, size and rank --------------------------------------------------------
 */

int mln_pl_Comm_free(MPI_Comm *comm)
{
    mln_pl_grid_t *g = mln_pl.grid;
    mln_pl_gcomm_t *c;
    int spins = 0;

    if (g == NULL || comm == NULL || (c = mln_pl_gcomm(*comm)) == NULL)
        return mln_pmpi.Comm_free(comm);
    if (c == &g->world)
        return mln_pl_grid_fail(MPI_ERR_COMM);
    MLN_PL_LOCK();
    while (c->colls != NULL) { /* collectives still running on it finish first */
        mln_pl_progress();
        if (c->colls != NULL)
            mln_pl_idle(&spins);
    }
    for (mln_pl_gcomm_t **pp = &g->comms; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    MLN_PL_UNLOCK();
    mln_pmpi.Comm_free(&c->local);
    mln_pl_gcomm_fini(c);
    free(c);
    return mln_pmpi.Comm_free(comm);
}

int mln_pl_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int *result)
{
    mln_pl_gcomm_t *a = mln_pl_gcomm(comm1), *b = mln_pl_gcomm(comm2);
    int same = 1;

    if ((a == NULL && b == NULL) || comm1 == MPI_COMM_NULL || comm2 == MPI_COMM_NULL)
        return mln_pmpi.Comm_compare(comm1, comm2, result); /* MPI's own error for NULL */
    if (a == NULL || b == NULL || a->size != b->size) {     /* a site's own spans no other */
        *result = MPI_UNEQUAL;
        return MPI_SUCCESS;
    }
    if (a == b) {
        *result = MPI_IDENT;
        return MPI_SUCCESS;
    }
    for (int i = 0; i < a->size && same; i++)
        same = a->world[i] == b->world[i];
    if (same) {
        *result = MPI_CONGRUENT;
        return MPI_SUCCESS;
    }
    *result = MPI_SIMILAR;
    for (int i = 0; i < a->size; i++)
        if (b->of_global[a->world[i]] < 0)
            *result = MPI_UNEQUAL;
    return MPI_SUCCESS;
}

int mln_pl_Comm_size(MPI_Comm comm, int *size)
{
    mln_pl_gcomm_t *c = mln_pl_gcomm(comm);

    if (c == NULL)
        return mln_pmpi.Comm_size(comm, size);
    *size = c->size;
    return MPI_SUCCESS;
}

int mln_pl_Comm_rank(MPI_Comm comm, int *rank)
{
    mln_pl_gcomm_t *c = mln_pl_gcomm(comm);

    if (c == NULL)
        return mln_pmpi.Comm_rank(comm, rank);
    *rank = c->rank;
    return MPI_SUCCESS;
}

/* ULFM (MPIX_) on a communicator that spans sites.  No process failure is survivable across
 * the grid (a lost site or gateway ends the run), so the failed set is always empty: agreement
 * is the bitwise AND of every rank's flag, shrinking is duplicating, nothing is revoked (the
 * guards refuse MPIX_Comm_revoke, and MPIX_Comm_iagree: it may overlap the communicator's
 * collectives in any order, which ordered grid collectives cannot).  A communicator inside a site
 * keeps its MPI's own ULFM. */

/* An empty group the caller frees (Open MPI counts references to MPI_GROUP_EMPTY: a bare
 * MPI_GROUP_EMPTY handed out would be freed once too often). */
static inline int empty_group(MPI_Group *group)
{
    return mln_pmpi.Group_incl(MPI_GROUP_EMPTY, 0, NULL, group);
}

#if defined(MLN_PL_HAVE_X_Comm_agree)
int mln_pl_grid_X_Comm_agree(MPI_Comm comm, int *flag)
{
    int mine = *flag;

    return mln_pl_grid_Allreduce(&mine, flag, 1, MPI_INT, MPI_BAND, comm);
}
#endif

#if defined(MLN_PL_HAVE_X_Comm_shrink)
int mln_pl_grid_X_Comm_shrink(MPI_Comm comm, MPI_Comm *newcomm)
{
    return gcomm_make(comm, 0, mln_pl_gcomm(comm)->rank, make_dup, NULL, newcomm);
}
#endif

#if defined(MLN_PL_HAVE_X_Comm_is_revoked)
int mln_pl_grid_X_Comm_is_revoked(MPI_Comm comm, int *flag)
{
    (void)comm;
    *flag = 0;
    return MPI_SUCCESS;
}
#endif

#if defined(MLN_PL_HAVE_X_Comm_get_failed)
int mln_pl_grid_X_Comm_get_failed(MPI_Comm comm, MPI_Group *failedgrp)
{
    (void)comm;
    return empty_group(failedgrp);
}
#endif

#if defined(MLN_PL_HAVE_X_Comm_failure_get_acked)
int mln_pl_grid_X_Comm_failure_get_acked(MPI_Comm comm, MPI_Group *failedgrp)
{
    (void)comm;
    return empty_group(failedgrp);
}
#endif

#if defined(MLN_PL_HAVE_X_Comm_ack_failed)
int mln_pl_grid_X_Comm_ack_failed(MPI_Comm comm, int num_to_ack, int *num_acked)
{
    (void)comm;
    (void)num_to_ack;
    *num_acked = 0;
    return MPI_SUCCESS;
}
#endif

#if defined(MLN_PL_HAVE_X_Comm_failure_ack)
int mln_pl_grid_X_Comm_failure_ack(MPI_Comm comm)
{
    (void)comm;
    return MPI_SUCCESS;
}
#endif
