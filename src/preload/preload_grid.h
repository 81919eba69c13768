/*
 * preload_grid.h - grid mode's state and the helpers its two files share (preload_grid.c: life
 * cycle, sends, the matching engine, the barrier; preload_grid_probe.c: probes and matched
 * probes).  Internal to the interposition layer.
 */
#ifndef MLN_PRELOAD_GRID_H
#define MLN_PRELOAD_GRID_H

#include "preload_int.h"
#include "relay/relay_int.h" /* MLN_RELAY_CTX_WORLD, MLN_RELAY_CTX_LAYER */

#define GRID_TAG_BARRIER 1 /* CTX_LAYER: the barrier's messages */
#define GRID_SAID_MAX 512  /* more than the layer wraps: each refused call is said once */

/* A view of a count or displacement array of either binding (int, MPI_Count, MPI_Aint): the
 * generated wrappers pass the program's array as it is (wrappers_gen.h, mln_cv_t). */
static inline MPI_Count mln_cv_at(mln_cv_t v, int k)
{
    return v.i != NULL ? (MPI_Count)v.i[k] : v.c != NULL ? v.c[k] : (MPI_Count)v.a[k];
}

typedef struct gcoll gcoll_t; /* a collective on a grid communicator (preload_gcoll.c) */
typedef struct mln_pl_gtopo mln_pl_gtopo_t; /* its topology (preload_gtopo.c) */

/* A communicator whose ranks live on more than one site (the grid's world, and every one
 * made from a grid communicator that keeps ranks of two sites; preload_gcomm.c).  The program
 * holds `handle`, a communicator of MPI over this site's members (MPI_COMM_WORLD for the
 * world): attributes, names and error handlers live there, as MPI keeps them.  Traffic goes
 * on `local` (a private communicator of the same members) and, to other sites, through the
 * relay: context ctx for point-to-point, cctx for collectives, nctx for neighbourhood ones. */
typedef struct mln_pl_gcomm mln_pl_gcomm_t;
struct mln_pl_gcomm {
    MPI_Comm handle, local;
    uint32_t ctx, cctx, nctx;
    mln_pl_gtopo_t *topo; /* Cartesian or graph topology (NULL: none) */
    int size, rank;       /* in this communicator */
    int *world;           /* comm rank -> global rank */
    int *lrank;           /* comm rank -> rank in local (-1: another site's) */
    int *of_local;        /* local rank -> comm rank */
    int nlocal;           /* ranks of local */
    int *of_global;       /* global rank -> comm rank (-1: no member) */
    /* member sites, in the order of their lowest comm rank: k = 0 .. nsites - 1 */
    int nsites, ksite;            /* how many; this rank's */
    int *site_k;                  /* comm rank -> k */
    int *site_pos;                /* comm rank -> its place among k's members */
    int *site_n;                  /* k -> members */
    int **site_members;           /* k -> its comm ranks in order (into one array) */
    uint32_t seq;                 /* collectives started on it (the relay tag of their messages) */
    gcoll_t *colls, **colls_tail; /* started, not complete: they run one after another */
    mln_pl_gcomm_t *next;
};

/* A message a matched probe (MPI_Mprobe, MPI_Improbe) took for the program. */
typedef struct grid_msg {
    MPI_Message handle; /* what the program holds: MPI's own, or a stand-in */
    mln_relay_msg_t *m; /* another site's message (NULL: a same-site one, MPI holds it) */
    mln_pl_gcomm_t *c;  /* the communicator it came on */
    struct grid_msg *next;
} grid_msg_t;

typedef struct mln_pl_grid {
    mln_relay_t *relay;
    int rank, size;                      /* global */
    int site, nsites, first, nlocal;     /* this site, its first global rank, its ranks */
    MPI_Comm local;                      /* a private duplicate of the site's world */
    mln_pl_req_t *posted, **posted_tail; /* receives not yet matched, in posting order */
    mln_pl_req_t *sends;                 /* sends to other sites the relay still moves */
    mln_pl_req_t *mrecvs;                /* receives matched to same-site messages: MPI's Imrecv */
    grid_msg_t *msgs;
    int remote_first;                /* MPI_ANY_SOURCE: which origin to look at first */
    mln_pl_gcomm_t world;            /* MPI_COMM_WORLD */
    mln_pl_gcomm_t *comms;           /* the others the program made */
    uint32_t next_ctx;               /* the lowest relay context this rank never used */
    int fatal;                       /* the fatal handler ran */
    const char *said[GRID_SAID_MAX]; /* refusals already said */
    int nsaid;
} mln_pl_grid_t;

static inline int mln_pl_grid_is_local(const mln_pl_gcomm_t *c, int rank)
{
    return c->lrank[rank] >= 0;
}

/* The grid communicator the program's handle stands for (NULL: a communicator of MPI's). */
mln_pl_gcomm_t *mln_pl_gcomm(MPI_Comm comm);
/* The world's (in mln_pl_grid_start), and freeing one's arrays. */
int mln_pl_gcomm_world(mln_pl_grid_t *g);
void mln_pl_gcomm_fini(mln_pl_gcomm_t *c);

/* A communicator made from grid communicator comm as MPI_Comm_split would (the constructors'
 * common part), and one of the members world[0..n) (this rank: pos) as MPI_Comm_create_group
 * would (collective over them only). */
int mln_pl_gcomm_make(MPI_Comm comm, int color, int key, MPI_Comm *newcomm);
int mln_pl_gcomm_make_group(mln_pl_gcomm_t *p, const int *world, int n, int pos, int tag,
                            MPI_Comm *newcomm);
void mln_pl_ggroup_fini(void); /* preload_ggroup.c: the groups left at MPI_Finalize */

/* preload_gtopo.c: a topology's end, its copy for a duplicate (made collectively), the
 * neighbours in the order of the neighbourhood collectives (in, out: arrays of the caller's, or
 * NULL for the counts), and the private communicator of their same-site messages. */
void mln_pl_gtopo_free(mln_pl_gtopo_t *t);
int mln_pl_gtopo_dup(mln_pl_gcomm_t *from, mln_pl_gcomm_t *to);
int mln_pl_gtopo_neighbors(mln_pl_gcomm_t *c, int *in, int *nin, int *out, int *nout);
int mln_pl_gtopo_cart_dims(const mln_pl_gcomm_t *c); /* Cartesian: its dimensions; else -1 */
MPI_Comm mln_pl_gtopo_comm(const mln_pl_gcomm_t *c);

/* Collectives (preload_gcoll.c): every communicator's queue moves (mln_pl_grid_progress). */
void mln_pl_gcoll_progress(mln_pl_grid_t *g);
/* An allgather of n bytes per rank into out (size x n), blocking (making communicators). */
int mln_pl_gcoll_allgather_bytes(mln_pl_gcomm_t *c, const void *in, int n, void *out);

/* 1 when count x dtype is one block of bytes at buf + *lb. */
int mln_pl_dtype_block(MPI_Datatype dtype, MPI_Count count, MPI_Aint *lb);
/* MPI_Bcast and MPI_Ibcast on a grid communicator (request NULL: blocking). */
int mln_pl_grid_bcast(void *buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm,
                      MPI_Request *request);

/* The world's error handler with code (the other sites told first where it is fatal). */
int mln_pl_grid_fail(int code);
/* The same on comm's error handler (a grid communicator's: MPI's handle of the program's). */
int mln_pl_grid_fail_on(MPI_Comm comm, int code);
/* The oldest message of another site that (source, tag) matches, or NULL. */
mln_relay_msg_t *mln_pl_grid_arrived(mln_pl_grid_t *g, mln_pl_gcomm_t *c, int source, int tag);
/* MPI's probe of a same-site message (source, tag: comm ranks); matched: MPI_Improbe. */
int mln_pl_grid_local_probe(mln_pl_gcomm_t *c, int source, int tag, int matched, int *flag,
                            MPI_Message *msg, MPI_Status *st);
void mln_pl_grid_remote_status(const mln_pl_gcomm_t *c, const mln_relay_msg_t *m, MPI_Count got,
                               MPI_Status *st);
/* Receive r matched: to a same-site message (MPI's Imrecv runs), or to another site's m
 * (unpacked, r complete; taken: a matched probe took m off the relay's list already). */
void mln_pl_grid_local_deliver(mln_pl_grid_t *g, mln_pl_req_t *r, MPI_Message *msg);
void mln_pl_grid_remote_deliver(mln_pl_grid_t *g, mln_pl_req_t *r, mln_relay_msg_t *m, int taken);

#endif /* MLN_PRELOAD_GRID_H */
