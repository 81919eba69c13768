/*
 * preload_gtopo.c - Cartesian and graph topologies on communicators that span sites, and their
 * neighbourhood collectives (grid mode; docs/PRELOAD.md, "Grid mode").
 *
 * A topology made from a grid communicator is the communicator MPI_Comm_split would make
 * (ranks kept: the layer never reorders), plus the layer's record of the topology, from which
 * every query (Topo_test, Cart_coords, Cart_shift, Graph_neighbors, Dist_graph_neighbors...)
 * is answered.  Where the new communicator lies inside one site, it is MPI's own topology made
 * on the site's communicator (MPI answers everything there, at native speed).
 *
 * Neighbourhood collectives: each block goes straight to its neighbour, as MPI's own do:
 * to a neighbour of this site by MPI's Isend on a private communicator of the topology (one
 * tag: the collectives of a communicator run one after another and MPI keeps each pair's order),
 * to another site's through the relay (the collective's tag).  The i-th block received is
 * the i-th source's, as the standard orders them (Cartesian: per dimension, the negative
 * direction, then the positive; graphs: as given).
 */
#include "preload_grid.h"

#include <stdlib.h>
#include <string.h>

struct mln_pl_gtopo {
    int kind; /* MPI_CART, MPI_GRAPH, MPI_DIST_GRAPH */
    int ndims, *dims, *periods;
    int nnodes, nedges, *index, *edges;
    int indeg, outdeg, weighted, *sources, *sweights, *dests, *dweights;
    MPI_Comm nbr; /* neighbourhood messages of this site's ranks */
};

static int *dup_ints(const int *a, int n)
{
    int *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(int));

    if (p != NULL && n > 0)
        memcpy(p, a, (size_t)n * sizeof(int));
    return p;
}

void mln_pl_gtopo_free(mln_pl_gtopo_t *t)
{
    if (t == NULL)
        return;
    if (t->nbr != MPI_COMM_NULL)
        mln_pmpi.Comm_free(&t->nbr);
    free(t->dims);
    free(t->periods);
    free(t->index);
    free(t->edges);
    free(t->sources);
    free(t->sweights);
    free(t->dests);
    free(t->dweights);
    free(t);
}

/* A copy of t for a duplicate communicator (its own private communicator, made on dup's
 * local, collectively). */
static mln_pl_gtopo_t *topo_copy(const mln_pl_gtopo_t *t, MPI_Comm local)
{
    mln_pl_gtopo_t *u = calloc(1, sizeof(*u));

    if (u == NULL)
        return NULL;
    *u = *t;
    u->dims = dup_ints(t->dims, t->ndims);
    u->periods = dup_ints(t->periods, t->ndims);
    u->index = dup_ints(t->index, t->kind == MPI_GRAPH ? t->nnodes : 0);
    u->edges = dup_ints(t->edges, t->nedges);
    u->sources = dup_ints(t->sources, t->indeg);
    u->sweights = dup_ints(t->sweights, t->indeg);
    u->dests = dup_ints(t->dests, t->outdeg);
    u->dweights = dup_ints(t->dweights, t->outdeg);
    u->nbr = MPI_COMM_NULL;
    if (mln_pmpi.Comm_dup(local, &u->nbr) != MPI_SUCCESS || u->dims == NULL || u->periods == NULL ||
        u->index == NULL || u->edges == NULL || u->sources == NULL || u->sweights == NULL ||
        u->dests == NULL || u->dweights == NULL) {
        mln_pl_gtopo_free(u);
        return NULL;
    }
    return u;
}

int mln_pl_gtopo_dup(mln_pl_gcomm_t *from, mln_pl_gcomm_t *to)
{
    if (from->topo == NULL)
        return MPI_SUCCESS;
    to->topo = topo_copy(from->topo, to->local);
    return to->topo != NULL ? MPI_SUCCESS : MPI_ERR_NO_MEM;
}

/* ---- making ------------------------------------------------------------------------------------
 */

/* MPI's own topology on a communicator inside this site (comm: the plain split, freed). */
typedef int (*site_topo_fn)(const mln_pl_gtopo_t *t, MPI_Comm comm, MPI_Comm *out);

/* The communicator of `color` (this rank's place kept), with topology t: the layer's record
 * where it spans sites, MPI's own (site) where it does not.  t is taken (freed on failure). */
static int topo_make(MPI_Comm comm, int color, mln_pl_gtopo_t *t, site_topo_fn site,
                     MPI_Comm *newcomm)
{
    mln_pl_gcomm_t *p = mln_pl_gcomm(comm), *c;
    MPI_Comm plain;
    int rc;

    if (t == NULL)
        return mln_pl_grid_fail_on(comm, MPI_ERR_NO_MEM);
    t->nbr = MPI_COMM_NULL;
    rc = mln_pl_gcomm_make(comm, color, p->rank, newcomm);
    if (rc != MPI_SUCCESS || *newcomm == MPI_COMM_NULL) {
        mln_pl_gtopo_free(t);
        return rc;
    }
    if ((c = mln_pl_gcomm(*newcomm)) == NULL) { /* inside this site: MPI's own */
        plain = *newcomm;
        rc = site(t, plain, newcomm);
        mln_pmpi.Comm_free(&plain);
        mln_pl_gtopo_free(t);
        return rc == MPI_SUCCESS ? rc : mln_pl_grid_fail_on(comm, rc);
    }
    rc = mln_pmpi.Comm_dup(c->local, &t->nbr);
    if (rc != MPI_SUCCESS) {
        mln_pl_gtopo_free(t);
        return mln_pl_grid_fail_on(comm, rc);
    }
    c->topo = t;
    return MPI_SUCCESS;
}

static int site_cart(const mln_pl_gtopo_t *t, MPI_Comm comm, MPI_Comm *out)
{
    return mln_pmpi.Cart_create(comm, t->ndims, t->dims, t->periods, 0, out);
}

static int site_graph(const mln_pl_gtopo_t *t, MPI_Comm comm, MPI_Comm *out)
{
    return mln_pmpi.Graph_create(comm, t->nnodes, t->index, t->edges, 0, out);
}

static int site_dist(const mln_pl_gtopo_t *t, MPI_Comm comm, MPI_Comm *out)
{
    return mln_pmpi.Dist_graph_create_adjacent(
        comm, t->indeg, t->sources, t->weighted ? t->sweights : MPI_UNWEIGHTED, t->outdeg, t->dests,
        t->weighted ? t->dweights : MPI_UNWEIGHTED, MPI_INFO_NULL, 0, out);
}

static mln_pl_gtopo_t *cart_record(int ndims, const int dims[], const int periods[])
{
    mln_pl_gtopo_t *t = calloc(1, sizeof(*t));

    if (t == NULL)
        return NULL;
    t->kind = MPI_CART;
    t->ndims = ndims;
    t->dims = dup_ints(dims, ndims);
    t->periods = dup_ints(periods, ndims);
    t->index = dup_ints(NULL, 0);
    t->edges = dup_ints(NULL, 0);
    t->sources = dup_ints(NULL, 0);
    t->sweights = dup_ints(NULL, 0);
    t->dests = dup_ints(NULL, 0);
    t->dweights = dup_ints(NULL, 0);
    for (int d = 0; t->periods != NULL && d < ndims; d++)
        t->periods[d] = periods[d] != 0;
    if (t->dims == NULL || t->periods == NULL || t->index == NULL || t->edges == NULL ||
        t->sources == NULL || t->sweights == NULL || t->dests == NULL || t->dweights == NULL) {
        mln_pl_gtopo_free(t);
        return NULL;
    }
    t->nnodes = 1;
    for (int d = 0; d < ndims; d++)
        t->nnodes *= dims[d];
    return t;
}

int mln_pl_grid_Cart_create(MPI_Comm comm_old, int ndims, const int dims[], const int periods[],
                            int reorder, MPI_Comm *comm_cart)
{
    mln_pl_gcomm_t *p = mln_pl_gcomm(comm_old);
    long long nodes = 1;

    (void)reorder; /* ranks kept */
    for (int d = 0; d < ndims; d++) {
        if (dims[d] <= 0)
            return mln_pl_grid_fail_on(comm_old, MPI_ERR_DIMS);
        nodes *= dims[d];
    }
    if (ndims < 0 || nodes > p->size)
        return mln_pl_grid_fail_on(comm_old, ndims < 0 ? MPI_ERR_DIMS : MPI_ERR_DIMS);
    return topo_make(comm_old, p->rank < nodes ? 0 : MPI_UNDEFINED,
                     cart_record(ndims, dims, periods), site_cart, comm_cart);
}

int mln_pl_grid_Graph_create(MPI_Comm comm_old, int nnodes, const int index[], const int edges[],
                             int reorder, MPI_Comm *comm_graph)
{
    mln_pl_gcomm_t *p = mln_pl_gcomm(comm_old);
    mln_pl_gtopo_t *t;

    (void)reorder;
    if (nnodes < 0 || nnodes > p->size)
        return mln_pl_grid_fail_on(comm_old, MPI_ERR_ARG);
    t = cart_record(0, NULL, NULL);
    if (t != NULL) {
        int nedges = nnodes > 0 ? index[nnodes - 1] : 0;
        free(t->index);
        free(t->edges);
        t->kind = MPI_GRAPH;
        t->nnodes = nnodes;
        t->nedges = nedges;
        t->index = dup_ints(index, nnodes);
        t->edges = dup_ints(edges, nedges);
        for (int e = 0; t->edges != NULL && e < nedges; e++)
            if (edges[e] < 0 || edges[e] >= nnodes) {
                mln_pl_gtopo_free(t);
                return mln_pl_grid_fail_on(comm_old, MPI_ERR_ARG);
            }
        if (t->index == NULL || t->edges == NULL) {
            mln_pl_gtopo_free(t);
            t = NULL;
        }
    }
    return topo_make(comm_old, p->rank < nnodes ? 0 : MPI_UNDEFINED, t, site_graph, comm_graph);
}

/* A distributed graph record: this rank's sources and destinations (weights or none). */
static mln_pl_gtopo_t *dist_record(int indeg, const int sources[], const int sw[], int outdeg,
                                   const int dests[], const int dw[])
{
    mln_pl_gtopo_t *t = cart_record(0, NULL, NULL);

    if (t == NULL)
        return NULL;
    free(t->sources);
    free(t->sweights);
    free(t->dests);
    free(t->dweights);
    t->kind = MPI_DIST_GRAPH;
    t->indeg = indeg;
    t->outdeg = outdeg;
    t->weighted = sw != MPI_UNWEIGHTED && dw != MPI_UNWEIGHTED;
    t->sources = dup_ints(sources, indeg);
    t->dests = dup_ints(dests, outdeg);
    t->sweights = t->weighted ? dup_ints(sw, indeg) : calloc((size_t)indeg + 1, sizeof(int));
    t->dweights = t->weighted ? dup_ints(dw, outdeg) : calloc((size_t)outdeg + 1, sizeof(int));
    if (t->sources == NULL || t->dests == NULL || t->sweights == NULL || t->dweights == NULL) {
        mln_pl_gtopo_free(t);
        return NULL;
    }
    return t;
}

int mln_pl_grid_Dist_graph_create_adjacent(MPI_Comm comm_old, int indegree, const int sources[],
                                           const int sourceweights[], int outdegree,
                                           const int destinations[], const int destweights[],
                                           MPI_Info info, int reorder, MPI_Comm *comm_dist_graph)
{
    mln_pl_gcomm_t *p = mln_pl_gcomm(comm_old);

    (void)info;
    (void)reorder;
    for (int i = 0; i < indegree; i++)
        if (sources[i] < 0 || sources[i] >= p->size)
            return mln_pl_grid_fail_on(comm_old, MPI_ERR_RANK);
    for (int i = 0; i < outdegree; i++)
        if (destinations[i] < 0 || destinations[i] >= p->size)
            return mln_pl_grid_fail_on(comm_old, MPI_ERR_RANK);
    return topo_make(
        comm_old, 0,
        dist_record(indegree, sources, sourceweights, outdegree, destinations, destweights),
        site_dist, comm_dist_graph);
}

/* MPI_Dist_graph_create: every rank may name any edge; an allgather of every rank's edges
 * (source, destination, weight) tells each its own, in the order of the ranks that named them. */
int mln_pl_grid_Dist_graph_create(MPI_Comm comm_old, int n, const int sources[],
                                  const int degrees[], const int destinations[],
                                  const int weights[], MPI_Info info, int reorder,
                                  MPI_Comm *comm_dist_graph)
{
    mln_pl_gcomm_t *p = mln_pl_gcomm(comm_old);
    int mine = 0, most = 0, *counts = malloc((size_t)p->size * sizeof(int)), *all = NULL,
        *edges = NULL, rc, in = 0, out = 0, weighted = weights != MPI_UNWEIGHTED;
    int *src = NULL, *sw = NULL, *dst = NULL, *dw = NULL;
    mln_pl_gtopo_t *t;

    (void)info;
    (void)reorder;
    for (int i = 0; i < n; i++)
        mine += degrees[i];
    rc = counts == NULL ? MPI_ERR_NO_MEM
                        : mln_pl_gcoll_allgather_bytes(p, &mine, (int)sizeof(int), counts);
    for (int r = 0; rc == MPI_SUCCESS && r < p->size; r++)
        most = counts[r] > most ? counts[r] : most;
    if (rc == MPI_SUCCESS) { /* every rank's edges, padded to the most any rank names */
        edges = calloc((size_t)(most > 0 ? most : 1) * 3, sizeof(int));
        all = calloc((size_t)p->size * (size_t)(most > 0 ? most : 1) * 3, sizeof(int));
        rc = edges == NULL || all == NULL ? MPI_ERR_NO_MEM : MPI_SUCCESS;
    }
    for (int i = 0, k = 0; rc == MPI_SUCCESS && i < n; i++)
        for (int j = 0; j < degrees[i]; j++, k++) {
            edges[3 * k] = sources[i];
            edges[3 * k + 1] = destinations[k];
            edges[3 * k + 2] = weighted ? weights[k] : 0;
        }
    if (rc == MPI_SUCCESS)
        rc = mln_pl_gcoll_allgather_bytes(p, edges, 3 * (most > 0 ? most : 1) * (int)sizeof(int),
                                          all);
    if (rc == MPI_SUCCESS) {
        src = calloc((size_t)p->size * (size_t)(most > 0 ? most : 1) + 1, sizeof(int));
        sw = calloc((size_t)p->size * (size_t)(most > 0 ? most : 1) + 1, sizeof(int));
        dst = calloc((size_t)p->size * (size_t)(most > 0 ? most : 1) + 1, sizeof(int));
        dw = calloc((size_t)p->size * (size_t)(most > 0 ? most : 1) + 1, sizeof(int));
        rc = src == NULL || sw == NULL || dst == NULL || dw == NULL ? MPI_ERR_NO_MEM : rc;
    }
    for (int r = 0; rc == MPI_SUCCESS && r < p->size; r++)
        for (int k = 0; k < counts[r]; k++) {
            const int *e = all + 3 * ((size_t)r * (size_t)(most > 0 ? most : 1) + (size_t)k);
            if (e[0] == p->rank) {
                dst[out] = e[1];
                dw[out++] = e[2];
            }
            if (e[1] == p->rank) {
                src[in] = e[0];
                sw[in++] = e[2];
            }
        }
    t = rc == MPI_SUCCESS ? dist_record(in, src, weighted ? sw : MPI_UNWEIGHTED, out, dst,
                                        weighted ? dw : MPI_UNWEIGHTED)
                          : NULL;
    free(counts);
    free(edges);
    free(all);
    free(src);
    free(sw);
    free(dst);
    free(dw);
    if (rc != MPI_SUCCESS)
        return mln_pl_grid_fail_on(comm_old, rc);
    return topo_make(comm_old, 0, t, site_dist, comm_dist_graph);
}

/* ---- queries ------------------------------------------------------------------------------------
 */

/* The topology of a grid communicator (kind: the one asked for, 0: any), or NULL with *rc
 * MPI_ERR_TOPOLOGY; *plain: MPI answers (not a grid communicator). */
static mln_pl_gtopo_t *topo_of(MPI_Comm comm, int kind, int *plain, int *rc)
{
    mln_pl_gcomm_t *c = mln_pl_gcomm(comm);

    *plain = c == NULL;
    *rc = MPI_SUCCESS;
    if (c == NULL)
        return NULL;
    if (c->topo == NULL || (kind != 0 && c->topo->kind != kind)) {
        *rc = mln_pl_grid_fail_on(comm, MPI_ERR_TOPOLOGY);
        return NULL;
    }
    return c->topo;
}

int mln_pl_Topo_test(MPI_Comm comm, int *status)
{
    mln_pl_gcomm_t *c = mln_pl_gcomm(comm);

    if (c == NULL)
        return mln_pmpi.Topo_test(comm, status);
    *status = c->topo != NULL ? c->topo->kind : MPI_UNDEFINED;
    return MPI_SUCCESS;
}

int mln_pl_Cartdim_get(MPI_Comm comm, int *ndims)
{
    int plain, rc;
    mln_pl_gtopo_t *t = topo_of(comm, MPI_CART, &plain, &rc);

    if (plain)
        return mln_pmpi.Cartdim_get(comm, ndims);
    if (t != NULL)
        *ndims = t->ndims;
    return rc;
}

static void coords_of(const mln_pl_gtopo_t *t, int rank, int *coords)
{
    for (int d = t->ndims - 1; d >= 0; d--) { /* row-major: the last dimension varies fastest */
        coords[d] = rank % t->dims[d];
        rank /= t->dims[d];
    }
}

int mln_pl_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[], int coords[])
{
    int plain, rc;
    mln_pl_gtopo_t *t = topo_of(comm, MPI_CART, &plain, &rc);
    int *all;

    if (plain)
        return mln_pmpi.Cart_get(comm, maxdims, dims, periods, coords);
    if (t == NULL)
        return rc;
    if ((all = malloc((size_t)(t->ndims + 1) * sizeof(int))) == NULL)
        return mln_pl_grid_fail_on(comm, MPI_ERR_NO_MEM);
    coords_of(t, mln_pl_gcomm(comm)->rank, all);
    for (int d = 0; d < maxdims && d < t->ndims; d++) {
        dims[d] = t->dims[d];
        periods[d] = t->periods[d];
        coords[d] = all[d];
    }
    free(all);
    return MPI_SUCCESS;
}

int mln_pl_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[])
{
    int plain, rc;
    mln_pl_gtopo_t *t = topo_of(comm, MPI_CART, &plain, &rc);
    int *all;

    if (plain)
        return mln_pmpi.Cart_coords(comm, rank, maxdims, coords);
    if (t == NULL)
        return rc;
    if (rank < 0 || rank >= t->nnodes)
        return mln_pl_grid_fail_on(comm, MPI_ERR_RANK);
    if ((all = malloc((size_t)(t->ndims + 1) * sizeof(int))) == NULL)
        return mln_pl_grid_fail_on(comm, MPI_ERR_NO_MEM);
    coords_of(t, rank, all);
    for (int d = 0; d < maxdims && d < t->ndims; d++)
        coords[d] = all[d];
    free(all);
    return MPI_SUCCESS;
}

/* The rank at coords (periodic dimensions wrap; out of a non-periodic one: MPI_PROC_NULL). */
static int rank_at(const mln_pl_gtopo_t *t, const int *coords)
{
    int rank = 0;

    for (int d = 0; d < t->ndims; d++) {
        int x = coords[d];
        if (x < 0 || x >= t->dims[d]) {
            if (!t->periods[d])
                return MPI_PROC_NULL;
            x = ((x % t->dims[d]) + t->dims[d]) % t->dims[d];
        }
        rank = rank * t->dims[d] + x;
    }
    return rank;
}

int mln_pl_Cart_rank(MPI_Comm comm, const int coords[], int *rank)
{
    int plain, rc;
    mln_pl_gtopo_t *t = topo_of(comm, MPI_CART, &plain, &rc);

    if (plain)
        return mln_pmpi.Cart_rank(comm, coords, rank);
    if (t == NULL)
        return rc;
    *rank = rank_at(t, coords);
    return *rank == MPI_PROC_NULL ? mln_pl_grid_fail_on(comm, MPI_ERR_ARG) : MPI_SUCCESS;
}

static void shift(const mln_pl_gtopo_t *t, int me, int direction, int disp, int *src, int *dst)
{
    int *c = malloc((size_t)(t->ndims + 1) * sizeof(int));

    if (c == NULL) {
        *src = *dst = MPI_PROC_NULL;
        return;
    }
    coords_of(t, me, c);
    c[direction] += disp;
    *dst = rank_at(t, c);
    c[direction] -= 2 * disp;
    *src = rank_at(t, c);
    free(c);
}

int mln_pl_Cart_shift(MPI_Comm comm, int direction, int disp, int *rank_source, int *rank_dest)
{
    int plain, rc;
    mln_pl_gtopo_t *t = topo_of(comm, MPI_CART, &plain, &rc);

    if (plain)
        return mln_pmpi.Cart_shift(comm, direction, disp, rank_source, rank_dest);
    if (t == NULL)
        return rc;
    if (direction < 0 || direction >= t->ndims)
        return mln_pl_grid_fail_on(comm, MPI_ERR_ARG);
    shift(t, mln_pl_gcomm(comm)->rank, direction, disp, rank_source, rank_dest);
    return MPI_SUCCESS;
}

int mln_pl_grid_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm)
{
    int plain, rc, color = 0, n = 0;
    mln_pl_gtopo_t *t = topo_of(comm, MPI_CART, &plain, &rc), *u;
    int *c, *dims, *periods;

    if (t == NULL)
        return rc;
    c = malloc((size_t)(t->ndims + 1) * sizeof(int));
    dims = malloc((size_t)(t->ndims + 1) * sizeof(int));
    periods = malloc((size_t)(t->ndims + 1) * sizeof(int));
    if (c == NULL || dims == NULL || periods == NULL) {
        free(c);
        free(dims);
        free(periods);
        return mln_pl_grid_fail_on(comm, MPI_ERR_NO_MEM);
    }
    coords_of(t, mln_pl_gcomm(comm)->rank, c);
    for (int d = 0; d < t->ndims; d++) {
        if (remain_dims[d]) {
            dims[n] = t->dims[d];
            periods[n++] = t->periods[d];
        } else {
            color = color * t->dims[d] + c[d]; /* the coordinates the slice keeps fixed */
        }
    }
    u = cart_record(n, dims, periods);
    free(c);
    free(dims);
    free(periods);
    return topo_make(comm, color, u, site_cart, newcomm);
}

int mln_pl_Graphdims_get(MPI_Comm comm, int *nnodes, int *nedges)
{
    int plain, rc;
    mln_pl_gtopo_t *t = topo_of(comm, MPI_GRAPH, &plain, &rc);

    if (plain)
        return mln_pmpi.Graphdims_get(comm, nnodes, nedges);
    if (t != NULL) {
        *nnodes = t->nnodes;
        *nedges = t->nedges;
    }
    return rc;
}

int mln_pl_Graph_get(MPI_Comm comm, int maxindex, int maxedges, int index[], int edges[])
{
    int plain, rc;
    mln_pl_gtopo_t *t = topo_of(comm, MPI_GRAPH, &plain, &rc);

    if (plain)
        return mln_pmpi.Graph_get(comm, maxindex, maxedges, index, edges);
    for (int i = 0; t != NULL && i < maxindex && i < t->nnodes; i++)
        index[i] = t->index[i];
    for (int i = 0; t != NULL && i < maxedges && i < t->nedges; i++)
        edges[i] = t->edges[i];
    return rc;
}

/* A graph rank's neighbours: edges[first .. index[rank]). */
static int graph_first(const mln_pl_gtopo_t *t, int rank)
{
    return rank == 0 ? 0 : t->index[rank - 1];
}

int mln_pl_Graph_neighbors_count(MPI_Comm comm, int rank, int *nneighbors)
{
    int plain, rc;
    mln_pl_gtopo_t *t = topo_of(comm, MPI_GRAPH, &plain, &rc);

    if (plain)
        return mln_pmpi.Graph_neighbors_count(comm, rank, nneighbors);
    if (t == NULL)
        return rc;
    if (rank < 0 || rank >= t->nnodes)
        return mln_pl_grid_fail_on(comm, MPI_ERR_RANK);
    *nneighbors = t->index[rank] - graph_first(t, rank);
    return MPI_SUCCESS;
}

int mln_pl_Graph_neighbors(MPI_Comm comm, int rank, int maxneighbors, int neighbors[])
{
    int plain, rc;
    mln_pl_gtopo_t *t = topo_of(comm, MPI_GRAPH, &plain, &rc);

    if (plain)
        return mln_pmpi.Graph_neighbors(comm, rank, maxneighbors, neighbors);
    if (t == NULL)
        return rc;
    if (rank < 0 || rank >= t->nnodes)
        return mln_pl_grid_fail_on(comm, MPI_ERR_RANK);
    for (int e = graph_first(t, rank), k = 0; e < t->index[rank] && k < maxneighbors; e++, k++)
        neighbors[k] = t->edges[e];
    return MPI_SUCCESS;
}

int mln_pl_Dist_graph_neighbors_count(MPI_Comm comm, int *indegree, int *outdegree, int *weighted)
{
    int plain, rc;
    mln_pl_gtopo_t *t = topo_of(comm, 0, &plain, &rc);
    int n = 0;

    if (plain)
        return mln_pmpi.Dist_graph_neighbors_count(comm, indegree, outdegree, weighted);
    if (t == NULL)
        return rc;
    if (t->kind == MPI_DIST_GRAPH) {
        *indegree = t->indeg;
        *outdegree = t->outdeg;
        *weighted = t->weighted;
        return MPI_SUCCESS;
    }
    rc = mln_pl_gtopo_neighbors(mln_pl_gcomm(comm), NULL, &n, NULL, NULL);
    *indegree = *outdegree = n;
    *weighted = 0;
    return rc;
}

int mln_pl_Dist_graph_neighbors(MPI_Comm comm, int maxindegree, int sources[], int sourceweights[],
                                int maxoutdegree, int destinations[], int destweights[])
{
    int plain, rc;
    mln_pl_gtopo_t *t = topo_of(comm, MPI_DIST_GRAPH, &plain, &rc);

    if (plain)
        return mln_pmpi.Dist_graph_neighbors(comm, maxindegree, sources, sourceweights,
                                             maxoutdegree, destinations, destweights);
    for (int i = 0; t != NULL && i < maxindegree && i < t->indeg; i++) {
        sources[i] = t->sources[i];
        if (t->weighted && sourceweights != MPI_UNWEIGHTED)
            sourceweights[i] = t->sweights[i];
    }
    for (int i = 0; t != NULL && i < maxoutdegree && i < t->outdeg; i++) {
        destinations[i] = t->dests[i];
        if (t->weighted && destweights != MPI_UNWEIGHTED)
            destweights[i] = t->dweights[i];
    }
    return rc;
}

/* The neighbours of c's rank in the order of the neighbourhood collectives: sources (in) and
 * destinations (out), arrays of the caller's (NULL: only the counts; Cartesian and graph: the
 * same list both ways). */
int mln_pl_gtopo_neighbors(mln_pl_gcomm_t *c, int *in, int *nin, int *out, int *nout)
{
    const mln_pl_gtopo_t *t = c->topo;
    int n = 0;

    if (t == NULL)
        return MPI_ERR_TOPOLOGY;
    switch (t->kind) {
    case MPI_CART:
        for (int d = 0; d < t->ndims; d++, n += 2)
            if (in != NULL) {
                shift(t, c->rank, d, 1, &in[n], &in[n + 1]);
                out[n] = in[n];
                out[n + 1] = in[n + 1];
            }
        break;
    case MPI_GRAPH:
        for (int e = graph_first(t, c->rank); e < t->index[c->rank]; e++, n++)
            if (in != NULL)
                in[n] = out[n] = t->edges[e];
        break;
    default:
        if (in != NULL) {
            memcpy(in, t->sources, (size_t)t->indeg * sizeof(int));
            memcpy(out, t->dests, (size_t)t->outdeg * sizeof(int));
        }
        *nin = t->indeg;
        if (nout != NULL)
            *nout = t->outdeg;
        return MPI_SUCCESS;
    }
    *nin = n;
    if (nout != NULL)
        *nout = n;
    return MPI_SUCCESS;
}

int mln_pl_gtopo_cart_dims(const mln_pl_gcomm_t *c)
{
    return c->topo != NULL && c->topo->kind == MPI_CART ? c->topo->ndims : -1;
}

MPI_Comm mln_pl_gtopo_comm(const mln_pl_gcomm_t *c)
{
    return c->topo != NULL ? c->topo->nbr : MPI_COMM_NULL;
}

int mln_pl_Cart_map(MPI_Comm comm, int ndims, const int dims[], const int periods[], int *newrank)
{
    mln_pl_gcomm_t *c = mln_pl_gcomm(comm);
    long long nodes = 1;

    if (c == NULL)
        return mln_pmpi.Cart_map(comm, ndims, dims, periods, newrank);
    for (int d = 0; d < ndims; d++)
        nodes *= dims[d];
    *newrank = c->rank < nodes ? c->rank : MPI_UNDEFINED;
    return MPI_SUCCESS;
}

int mln_pl_Graph_map(MPI_Comm comm, int nnodes, const int index[], const int edges[], int *newrank)
{
    mln_pl_gcomm_t *c = mln_pl_gcomm(comm);

    if (c == NULL)
        return mln_pmpi.Graph_map(comm, nnodes, index, edges, newrank);
    *newrank = c->rank < nnodes ? c->rank : MPI_UNDEFINED;
    return MPI_SUCCESS;
}
