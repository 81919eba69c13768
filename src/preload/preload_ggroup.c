/*
 * preload_ggroup.c - groups of ranks of several sites, and the communicators made from them
 * (grid mode; docs/PRELOAD.md, "Grid mode").
 *
 * MPI's groups hold processes of its own job, so a group with ranks of other sites is the
 * layer's: a list of global ranks behind a handle that is a real group of MPI's (a one-process
 * group of MPI_COMM_SELF made for it, so that every handle is distinct and MPI's own calls on
 * it do no harm).  MPI_Comm_group of a grid communicator gives one; every group function that
 * meets one answers from the lists (a group of MPI's own, of a site's communicator, is read as
 * the global ranks of its processes).  Groups and communicators of one site stay MPI's.
 *
 * MPI_Comm_create is a split of the parent (in the group: color 0, key its place there).
 * MPI_Comm_create_group is collective over the group only: the context is agreed by an
 * allgather over the group's members themselves (a communicator of the moment, whose
 * messages go on the parent's collective context with tags above the parent's own).
 */
#include "preload_grid.h"

#include <stdlib.h>
#include <string.h>

typedef struct mln_pl_ggroup {
    MPI_Group handle;
    int size;
    int *world; /* global ranks, group order */
    struct mln_pl_ggroup *next;
} mln_pl_ggroup_t;

static mln_pl_ggroup_t *groups;

static mln_pl_ggroup_t *ggroup_find(MPI_Group h)
{
    if (h == MPI_GROUP_NULL || h == MPI_GROUP_EMPTY)
        return NULL;
    for (mln_pl_ggroup_t *gg = groups; gg; gg = gg->next)
        if (gg->handle == h)
            return gg;
    return NULL;
}

/* The global ranks of group h (a grid group's, or those of MPI's group of this site's
 * processes); *owned: the caller frees *world. */
static int ggroup_view(MPI_Group h, int **world, int *n, int *owned)
{
    mln_pl_ggroup_t *gg = ggroup_find(h);
    MPI_Group site = MPI_GROUP_NULL;
    int *ranks, rc;

    *owned = 0;
    if (gg != NULL) {
        *world = gg->world;
        *n = gg->size;
        return MPI_SUCCESS;
    }
    if ((rc = mln_pmpi.Group_size(h, n)) != MPI_SUCCESS)
        return rc;
    *world = malloc((size_t)(*n > 0 ? *n : 1) * sizeof(int));
    ranks = malloc((size_t)(*n > 0 ? *n : 1) * sizeof(int));
    if (*world == NULL || ranks == NULL) {
        free(*world);
        free(ranks);
        return MPI_ERR_NO_MEM;
    }
    for (int i = 0; i < *n; i++)
        ranks[i] = i;
    rc = mln_pmpi.Comm_group(MPI_COMM_WORLD, &site); /* the site's own world */
    if (rc == MPI_SUCCESS && *n > 0)
        rc = mln_pmpi.Group_translate_ranks(h, *n, ranks, site, *world);
    for (int i = 0; rc == MPI_SUCCESS && i < *n; i++)
        (*world)[i] += mln_pl.grid->first;
    if (site != MPI_GROUP_NULL)
        mln_pmpi.Group_free(&site);
    free(ranks);
    *owned = 1;
    if (rc != MPI_SUCCESS)
        free(*world);
    return rc;
}

/* A grid group of the n global ranks (MPI_GROUP_EMPTY when n is 0). */
static int ggroup_new(const int *world, int n, MPI_Group *out)
{
    mln_pl_ggroup_t *gg;
    MPI_Group self = MPI_GROUP_NULL;
    int zero = 0, rc;

    if (n == 0) { /* MPI's own empty group, as its calls give it (Open MPI counts references) */
        MPI_Group one = MPI_GROUP_NULL;
        rc = mln_pmpi.Comm_group(MPI_COMM_SELF, &one);
        if (rc == MPI_SUCCESS)
            rc = mln_pmpi.Group_incl(one, 0, NULL, out);
        if (one != MPI_GROUP_NULL)
            mln_pmpi.Group_free(&one);
        return rc;
    }
    if ((gg = calloc(1, sizeof(*gg))) == NULL ||
        (gg->world = malloc((size_t)n * sizeof(int))) == NULL) {
        free(gg);
        return MPI_ERR_NO_MEM;
    }
    rc = mln_pmpi.Comm_group(MPI_COMM_SELF, &self);
    if (rc == MPI_SUCCESS)
        rc = mln_pmpi.Group_incl(self, 1, &zero, &gg->handle);
    if (self != MPI_GROUP_NULL)
        mln_pmpi.Group_free(&self);
    if (rc != MPI_SUCCESS) {
        free(gg->world);
        free(gg);
        return rc;
    }
    memcpy(gg->world, world, (size_t)n * sizeof(int));
    gg->size = n;
    gg->next = groups;
    groups = gg;
    *out = gg->handle;
    return MPI_SUCCESS;
}

static int index_of(const int *world, int n, int rank)
{
    for (int i = 0; i < n; i++)
        if (world[i] == rank)
            return i;
    return MPI_UNDEFINED;
}

/* ---- groups ------------------------------------------------------------------------------------
 */

int mln_pl_Comm_group(MPI_Comm comm, MPI_Group *group)
{
    mln_pl_gcomm_t *c = mln_pl_gcomm(comm);
    int rc;

    if (c == NULL)
        return mln_pmpi.Comm_group(comm, group);
    MLN_PL_LOCK();
    rc = ggroup_new(c->world, c->size, group);
    MLN_PL_UNLOCK();
    return rc == MPI_SUCCESS ? rc : mln_pl_grid_fail_on(comm, rc);
}

int mln_pl_Group_size(MPI_Group group, int *size)
{
    mln_pl_ggroup_t *gg = ggroup_find(group);

    if (gg == NULL)
        return mln_pmpi.Group_size(group, size);
    *size = gg->size;
    return MPI_SUCCESS;
}

int mln_pl_Group_rank(MPI_Group group, int *rank)
{
    mln_pl_ggroup_t *gg = ggroup_find(group);

    if (gg == NULL)
        return mln_pmpi.Group_rank(group, rank);
    *rank = index_of(gg->world, gg->size, mln_pl.grid->rank);
    return MPI_SUCCESS;
}

int mln_pl_Group_free(MPI_Group *group)
{
    mln_pl_ggroup_t *gg = group != NULL ? ggroup_find(*group) : NULL;

    if (gg == NULL)
        return mln_pmpi.Group_free(group);
    MLN_PL_LOCK();
    for (mln_pl_ggroup_t **pp = &groups; *pp; pp = &(*pp)->next)
        if (*pp == gg) {
            *pp = gg->next;
            break;
        }
    MLN_PL_UNLOCK();
    free(gg->world);
    free(gg);
    return mln_pmpi.Group_free(group);
}

/* Two groups as global ranks: *a, *b (freed by views_done). 0 when neither is a grid group
 * (then MPI's own call answers). */
typedef struct views {
    int *a, *b, na, nb, own_a, own_b, rc;
} views_t;

static int views(MPI_Group g1, MPI_Group g2, views_t *v)
{
    memset(v, 0, sizeof(*v));
    if (ggroup_find(g1) == NULL && (g2 == MPI_GROUP_NULL || ggroup_find(g2) == NULL))
        return 0;
    v->rc = ggroup_view(g1, &v->a, &v->na, &v->own_a);
    if (v->rc == MPI_SUCCESS && g2 != MPI_GROUP_NULL)
        v->rc = ggroup_view(g2, &v->b, &v->nb, &v->own_b);
    return 1;
}

static int views_done(views_t *v, int rc)
{
    if (v->own_a)
        free(v->a);
    if (v->own_b)
        free(v->b);
    return rc;
}

int mln_pl_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[], MPI_Group group2,
                                 int ranks2[])
{
    views_t v;

    if (!views(group1, group2, &v))
        return mln_pmpi.Group_translate_ranks(group1, n, ranks1, group2, ranks2);
    for (int i = 0; v.rc == MPI_SUCCESS && i < n; i++) {
        if (ranks1[i] == MPI_PROC_NULL)
            ranks2[i] = MPI_PROC_NULL;
        else if (ranks1[i] < 0 || ranks1[i] >= v.na)
            v.rc = MPI_ERR_RANK;
        else
            ranks2[i] = index_of(v.b, v.nb, v.a[ranks1[i]]);
    }
    return views_done(&v, v.rc);
}

int mln_pl_Group_compare(MPI_Group group1, MPI_Group group2, int *result)
{
    views_t v;
    int same = 1, similar = 1;

    if (!views(group1, group2, &v))
        return mln_pmpi.Group_compare(group1, group2, result);
    same = v.na == v.nb;
    similar = same;
    for (int i = 0; same && i < v.na; i++)
        same = v.a[i] == v.b[i];
    for (int i = 0; similar && i < v.na; i++)
        similar = index_of(v.b, v.nb, v.a[i]) != MPI_UNDEFINED;
    *result = same ? MPI_IDENT : similar ? MPI_SIMILAR : MPI_UNEQUAL;
    return views_done(&v, v.rc);
}

/* The set operations: union (a, then b's that a lacks), intersection (a's that b has),
 * difference (a's that b lacks). */
enum { SET_UNION, SET_INTERSECTION, SET_DIFFERENCE };

static int set_op(MPI_Group group1, MPI_Group group2, int op, MPI_Group *newgroup)
{
    views_t v;
    int *out, n = 0;

    views(group1, group2, &v);
    if (v.rc != MPI_SUCCESS)
        return views_done(&v, v.rc);
    if ((out = malloc((size_t)(v.na + v.nb + 1) * sizeof(int))) == NULL)
        return views_done(&v, MPI_ERR_NO_MEM);
    for (int i = 0; i < v.na; i++) {
        int in_b = index_of(v.b, v.nb, v.a[i]) != MPI_UNDEFINED;
        if (op == SET_UNION || (op == SET_INTERSECTION) == in_b)
            out[n++] = v.a[i];
    }
    for (int i = 0; op == SET_UNION && i < v.nb; i++)
        if (index_of(v.a, v.na, v.b[i]) == MPI_UNDEFINED)
            out[n++] = v.b[i];
    v.rc = ggroup_new(out, n, newgroup);
    free(out);
    return views_done(&v, v.rc);
}

#define SET_BODY(OP, FN)                                                                           \
    do {                                                                                           \
        int rc;                                                                                    \
        if (ggroup_find(group1) == NULL && ggroup_find(group2) == NULL)                            \
            return mln_pmpi.FN(group1, group2, newgroup);                                          \
        MLN_PL_LOCK();                                                                             \
        rc = set_op(group1, group2, OP, newgroup);                                                 \
        MLN_PL_UNLOCK();                                                                           \
        return rc;                                                                                 \
    } while (0)

int mln_pl_Group_union(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup)
{
    SET_BODY(SET_UNION, Group_union);
}

int mln_pl_Group_intersection(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup)
{
    SET_BODY(SET_INTERSECTION, Group_intersection);
}

int mln_pl_Group_difference(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup)
{
    SET_BODY(SET_DIFFERENCE, Group_difference);
}

/* Incl and excl, by list or by ranges: keep[i] says whether rank i of the group is in, and
 * order (incl) the new group's order. */
static int pick(MPI_Group group, const int *order, int norder, int excl, MPI_Group *newgroup)
{
    mln_pl_ggroup_t *gg = ggroup_find(group);
    int *out = malloc((size_t)(gg->size + 1) * sizeof(int)), n = 0, rc = MPI_SUCCESS;
    unsigned char *drop = calloc((size_t)gg->size + 1, 1);

    if (out == NULL || drop == NULL) {
        free(out);
        free(drop);
        return MPI_ERR_NO_MEM;
    }
    for (int i = 0; i < norder; i++) {
        if (order[i] < 0 || order[i] >= gg->size || drop[order[i]]) {
            rc = MPI_ERR_RANK;
            break;
        }
        drop[order[i]] = 1;
        if (!excl)
            out[n++] = gg->world[order[i]];
    }
    for (int i = 0; excl && i < gg->size; i++)
        if (!drop[i])
            out[n++] = gg->world[i];
    if (rc == MPI_SUCCESS) {
        MLN_PL_LOCK();
        rc = ggroup_new(out, n, newgroup);
        MLN_PL_UNLOCK();
    }
    free(out);
    free(drop);
    return rc;
}

int mln_pl_Group_incl(MPI_Group group, int n, const int ranks[], MPI_Group *newgroup)
{
    if (ggroup_find(group) == NULL)
        return mln_pmpi.Group_incl(group, n, ranks, newgroup);
    return pick(group, ranks, n, 0, newgroup);
}

int mln_pl_Group_excl(MPI_Group group, int n, const int ranks[], MPI_Group *newgroup)
{
    if (ggroup_find(group) == NULL)
        return mln_pmpi.Group_excl(group, n, ranks, newgroup);
    return pick(group, ranks, n, 1, newgroup);
}

/* The ranks the triplets (first, last, stride) name, in order. */
static int *ranges_list(const mln_pl_ggroup_t *gg, int n, int ranges[][3], int *count)
{
    int *out = malloc((size_t)(gg->size + 1) * sizeof(int)), k = 0;

    for (int i = 0; out != NULL && i < n; i++) {
        int first = ranges[i][0], last = ranges[i][1], stride = ranges[i][2];
        if (stride == 0 || (stride > 0 && first > last) || (stride < 0 && first < last)) {
            free(out);
            return NULL;
        }
        for (int r = first; stride > 0 ? r <= last : r >= last; r += stride) {
            if (k >= gg->size) { /* more ranks than the group: some twice */
                free(out);
                return NULL;
            }
            out[k++] = r;
        }
    }
    *count = k;
    return out;
}

int mln_pl_Group_range_incl(MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup)
{
    mln_pl_ggroup_t *gg = ggroup_find(group);
    int *list, k = 0, rc;

    if (gg == NULL)
        return mln_pmpi.Group_range_incl(group, n, ranges, newgroup);
    if ((list = ranges_list(gg, n, ranges, &k)) == NULL)
        return MPI_ERR_ARG;
    rc = pick(group, list, k, 0, newgroup);
    free(list);
    return rc;
}

int mln_pl_Group_range_excl(MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup)
{
    mln_pl_ggroup_t *gg = ggroup_find(group);
    int *list, k = 0, rc;

    if (gg == NULL)
        return mln_pmpi.Group_range_excl(group, n, ranges, newgroup);
    if ((list = ranges_list(gg, n, ranges, &k)) == NULL)
        return MPI_ERR_ARG;
    rc = pick(group, list, k, 1, newgroup);
    free(list);
    return rc;
}

/* ---- communicators from groups -------------------------------------------------------------- */

/* This rank's place in group (MPI_UNDEFINED: not in it); MPI_ERR_GROUP when a member is no
 * rank of c. */
static int place_in(mln_pl_gcomm_t *c, MPI_Group group, int *pos)
{
    int *world, n, owned, rc = ggroup_view(group, &world, &n, &owned);

    if (rc != MPI_SUCCESS)
        return rc;
    *pos = index_of(world, n, mln_pl.grid->rank);
    for (int i = 0; i < n; i++)
        if (world[i] < 0 || world[i] >= mln_pl.grid->size || c->of_global[world[i]] < 0)
            rc = MPI_ERR_GROUP;
    if (owned)
        free(world);
    return rc;
}

int mln_pl_grid_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
    mln_pl_gcomm_t *c = mln_pl_gcomm(comm);
    int pos = MPI_UNDEFINED, rc = place_in(c, group, &pos);

    if (rc != MPI_SUCCESS)
        return mln_pl_grid_fail_on(comm, rc);
    return mln_pl_gcomm_make(comm, pos == MPI_UNDEFINED ? MPI_UNDEFINED : 0, pos, newcomm);
}

int mln_pl_grid_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm)
{
    mln_pl_gcomm_t *c = mln_pl_gcomm(comm);
    int pos = MPI_UNDEFINED, rc = place_in(c, group, &pos);
    int *world = NULL, n = 0, owned = 0;

    if (rc == MPI_SUCCESS && pos == MPI_UNDEFINED)
        rc = MPI_ERR_GROUP; /* only the group's members call it */
    if (rc == MPI_SUCCESS && tag < 0)
        rc = MPI_ERR_TAG;
    if (rc == MPI_SUCCESS)
        rc = ggroup_view(group, &world, &n, &owned);
    if (rc == MPI_SUCCESS)
        rc = mln_pl_gcomm_make_group(c, world, n, pos, tag, newcomm);
    if (owned)
        free(world);
    return rc == MPI_SUCCESS ? rc : mln_pl_grid_fail_on(comm, rc);
}

void mln_pl_ggroup_fini(void)
{
    while (groups != NULL) {
        mln_pl_ggroup_t *gg = groups;
        groups = gg->next;
        free(gg->world);
        free(gg);
    }
}
